//! The reply value produced by commands, independent of the wire version.

use bytes::Bytes;
use std::borrow::Cow;

/// The RESP version a connection speaks (chosen with HELLO).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

/// A reply. RESP3-only variants are downgraded by the encoder for RESP2
/// clients exactly as Redis does (maps become flat arrays, doubles become
/// bulk strings, booleans become integers, null becomes `$-1` or `*-1`).
#[derive(Debug, Clone)]
pub enum Reply {
    /// `+OK`
    Simple(Cow<'static, str>),
    /// `-ERR ...`: the full text after the dash, error code included.
    Error(Cow<'static, str>),
    Int(i64),
    Bulk(Bytes),
    /// A missing value: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// A missing array: `*-1` in RESP2, `_` in RESP3.
    NilArray,
    Array(Vec<Reply>),
    /// An array of bulk strings stored back to back in one buffer, element
    /// `i` ending at `ends[i]`. The same bytes on the wire as an `Array` of
    /// `Bulk`s, without a reference-counted handle per element (LRANGE).
    BulkArray(Bytes, Vec<usize>),
    Double(f64),
    /// A double whose text the command fixes (Redis's
    /// addReplyHumanLongDouble: GEOPOS, WITHCOORD): a bulk string in RESP2,
    /// `,text` in RESP3.
    DoubleText(Bytes),
    Bool(bool),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
    /// Verbatim string with its three-letter format (`txt`, `mkd`).
    Verbatim(&'static str, Bytes),
    /// Out-of-band push (pub/sub messages in RESP3).
    Push(Vec<Reply>),
    /// An ordered list of pairs: in RESP3 an array of two-element arrays,
    /// in RESP2 one flat array (ZRANGE WITHSCORES, HRANDFIELD WITHVALUES:
    /// replies whose order matters, so not a map).
    Pairs(Vec<(Reply, Reply)>),
    /// Keyed results: a map in RESP3, an array of two-element arrays in
    /// RESP2 (XREAD / XREADGROUP's per-stream replies, as Redis sends).
    KeyedArrays(Vec<(Reply, Reply)>),
    /// A RESP3 big number (`(digits`); a bulk string in RESP2.
    BigNumber(Bytes),
    /// A RESP3 attribute (`|`), data about the reply that follows it;
    /// RESP2 has no form for it, so nothing is written there. Only as the
    /// first part of [`Reply::Preceded`].
    Attribute(Vec<(Reply, Reply)>),
    /// An out-of-band frame (an attribute, a push) written right before
    /// the command's reply (DEBUG PROTOCOL attrib / push).
    Preceded(Box<Reply>, Box<Reply>),
}

impl Reply {
    pub const fn ok() -> Reply {
        Reply::Simple(Cow::Borrowed("OK"))
    }

    pub fn simple(s: &'static str) -> Reply {
        Reply::Simple(Cow::Borrowed(s))
    }

    pub fn error(s: impl Into<Cow<'static, str>>) -> Reply {
        Reply::Error(s.into())
    }

    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    pub fn bulk_str(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// About how many bytes this reply takes on the wire (within a few
    /// bytes of a header per element): what a client's output buffer
    /// holds while the reply waits for it.
    pub fn approx_wire_len(&self) -> usize {
        const HEADER: usize = 8;
        match self {
            Reply::Simple(s) | Reply::Error(s) => s.len() + 3,
            Reply::Int(_) | Reply::Double(_) => 24,
            Reply::Bulk(b) | Reply::DoubleText(b) | Reply::Verbatim(_, b) | Reply::BigNumber(b) => {
                b.len() + HEADER
            }
            Reply::Preceded(first, reply) => first.approx_wire_len() + reply.approx_wire_len(),
            Reply::Nil | Reply::NilArray | Reply::Bool(_) => 5,
            Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => {
                HEADER + items.iter().map(Reply::approx_wire_len).sum::<usize>()
            }
            Reply::BulkArray(data, ends) => HEADER + data.len() + HEADER * ends.len(),
            Reply::Map(pairs)
            | Reply::Pairs(pairs)
            | Reply::KeyedArrays(pairs)
            | Reply::Attribute(pairs) => {
                HEADER
                    + pairs
                        .iter()
                        .map(|(k, v)| k.approx_wire_len() + v.approx_wire_len())
                        .sum::<usize>()
            }
        }
    }
}

impl From<i64> for Reply {
    fn from(v: i64) -> Self {
        Reply::Int(v)
    }
}

impl Reply {
    /// The elements of a `BulkArray` as ordinary bulk replies.
    fn bulk_array_items(data: &Bytes, ends: &[usize]) -> Vec<Reply> {
        let mut start = 0;
        ends.iter()
            .map(|&end| {
                let item = Reply::Bulk(data.slice(start.min(end)..end.min(data.len())));
                start = end;
                item
            })
            .collect()
    }
}

/// Replies are equal when a client would read the same thing: a
/// `BulkArray` equals the `Array` of the same bulk strings.
impl PartialEq for Reply {
    fn eq(&self, other: &Self) -> bool {
        use Reply::*;
        match (self, other) {
            (BulkArray(d, e), BulkArray(d2, e2)) => d == d2 && e == e2,
            (BulkArray(d, e), other) | (other, BulkArray(d, e)) => {
                matches!(other, Array(items) if *items == Reply::bulk_array_items(d, e))
            }
            (Simple(a), Simple(b)) => a == b,
            (Error(a), Error(b)) => a == b,
            (Int(a), Int(b)) => a == b,
            (Bulk(a), Bulk(b)) => a == b,
            (Nil, Nil) | (NilArray, NilArray) => true,
            (Array(a), Array(b)) | (Set(a), Set(b)) | (Push(a), Push(b)) => a == b,
            (Double(a), Double(b)) => a == b,
            (Bool(a), Bool(b)) => a == b,
            (Map(a), Map(b)) | (Pairs(a), Pairs(b)) => a == b,
            (Verbatim(f, a), Verbatim(g, b)) => f == g && a == b,
            (BigNumber(a), BigNumber(b)) => a == b,
            (Attribute(a), Attribute(b)) => a == b,
            (Preceded(a, r), Preceded(b, s)) => a == b && r == s,
            _ => false,
        }
    }
}
