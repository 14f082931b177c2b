//! Compact byte storage for keys and string values, and the canonical
//! integer test behind Redis's "int" string encoding.

use smallvec::SmallVec;

/// Bytes stored inline when they fit in 16 bytes, on the heap otherwise.
/// The whole value is 24 bytes.
pub type CompactBytes = SmallVec<[u8; 16]>;

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
