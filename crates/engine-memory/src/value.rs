//! Stored values and their compact byte representation.

use crate::{Hash, List, Set, Stream, ZSet};
use smallvec::SmallVec;

/// Bytes stored inline when they fit in 16 bytes, on the heap otherwise.
/// The whole value is 24 bytes.
pub type CompactBytes = SmallVec<[u8; 16]>;

/// A stored value. Strings that are canonical 64-bit integers are kept as
/// `Int` (Redis's "int" encoding): smaller, and INCR needs no parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Str(CompactBytes),
    /// A string changed in place (APPEND, SETRANGE): Redis reports these as
    /// "raw" whatever their length, so the distinction is observable.
    Raw(CompactBytes),
    Int(i64),
    // Collections are boxed so that a string entry stays small.
    List(Box<List>),
    Hash(Box<Hash>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
    Stream(Box<Stream>),
}

impl Value {
    /// Builds a string value, choosing the integer encoding when the bytes
    /// are exactly the decimal form of an i64 (no sign plus, no leading zero).
    pub fn from_bytes(b: &[u8]) -> Value {
        match canonical_i64(b) {
            Some(i) => Value::Int(i),
            None => Value::Str(CompactBytes::from_slice(b)),
        }
    }

    /// Heap bytes this value owns beyond its inline size.
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Str(s) | Value::Raw(s) if s.spilled() => s.capacity(),
            Value::Str(_) | Value::Raw(_) | Value::Int(_) => 0,
            Value::List(l) => std::mem::size_of::<List>() + l.heap_size(),
            Value::Hash(h) => std::mem::size_of::<Hash>() + h.heap_size(),
            Value::Set(s) => std::mem::size_of::<Set>() + s.heap_size(),
            Value::ZSet(z) => std::mem::size_of::<ZSet>() + z.heap_size(),
            Value::Stream(s) => std::mem::size_of::<Stream>() + s.heap_size(),
        }
    }

    /// The Redis type name (`TYPE` reply).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) | Value::Raw(_) | Value::Int(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }
}

/// Parses `b` as an i64 only if formatting the result gives `b` back, so
/// that the integer encoding never changes what GET returns.
pub fn canonical_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub((c - b'0') as i64)?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_encoding_is_canonical_only() {
        assert_eq!(Value::from_bytes(b"123"), Value::Int(123));
        assert_eq!(
            Value::from_bytes(b"-9223372036854775808"),
            Value::Int(i64::MIN)
        );
        assert!(matches!(Value::from_bytes(b"0123"), Value::Str(_)));
        assert!(matches!(Value::from_bytes(b"-0"), Value::Str(_)));
        assert!(matches!(Value::from_bytes(b"+1"), Value::Str(_)));
        assert!(matches!(
            Value::from_bytes(b"9223372036854775808"),
            Value::Str(_)
        ));
        assert_eq!(Value::from_bytes(b"0"), Value::Int(0));
    }

    #[test]
    fn value_is_compact() {
        assert!(std::mem::size_of::<Value>() <= 32);
    }
}
