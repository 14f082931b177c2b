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
#[derive(Debug, Clone, PartialEq)]
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
    Double(f64),
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
}

impl From<i64> for Reply {
    fn from(v: i64) -> Self {
        Reply::Int(v)
    }
}
