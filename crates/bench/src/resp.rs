//! RESP on the client side: requests are encoded straight into a caller's
//! buffer, replies are recognised in place in a read buffer and inspected
//! through borrowed views. Nothing here allocates per request or per reply.

/// Appends `*n\r\n`.
pub fn put_array_len(buf: &mut Vec<u8>, n: usize) {
    buf.push(b'*');
    put_u64(buf, n as u64);
    buf.extend_from_slice(b"\r\n");
}

/// Appends a bulk string.
pub fn put_bulk(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.push(b'$');
    put_u64(buf, bytes.len() as u64);
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(bytes);
    buf.extend_from_slice(b"\r\n");
}

/// Appends a bulk string of `len` bytes that `fill` writes in place.
pub fn put_bulk_with(buf: &mut Vec<u8>, len: usize, fill: impl FnOnce(&mut [u8])) {
    buf.push(b'$');
    put_u64(buf, len as u64);
    buf.extend_from_slice(b"\r\n");
    let at = buf.len();
    buf.resize(at + len, 0);
    fill(&mut buf[at..]);
    buf.extend_from_slice(b"\r\n");
}

/// Appends a bulk string holding the decimal form of `v`.
pub fn put_bulk_i64(buf: &mut Vec<u8>, v: i64) {
    let mut digits = [0u8; 20];
    let s = fmt_i64(v, &mut digits);
    put_bulk(buf, s);
}

/// Appends a whole command.
pub fn put_cmd(buf: &mut Vec<u8>, args: &[&[u8]]) {
    put_array_len(buf, args.len());
    for a in args {
        put_bulk(buf, a);
    }
}

/// Appends the decimal digits of `v`.
pub fn put_u64(buf: &mut Vec<u8>, v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = v;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Formats `v` in decimal into `out` and returns the used tail.
pub fn fmt_i64(v: i64, out: &mut [u8; 20]) -> &[u8] {
    let neg = v < 0;
    let mut u = v.unsigned_abs();
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if neg {
        // i64::MIN has 19 digits, so there is always room for the sign.
        i -= 1;
        out[i] = b'-';
    }
    &out[i..]
}

/// A reply that is not valid RESP: the connection cannot be trusted after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub &'static str);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "protocol error: {}", self.0)
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let rest = buf.get(from..)?;
    let p = rest.iter().position(|&b| b == b'\r')?;
    let at = from + p;
    if at + 1 < buf.len() {
        Some(at)
    } else {
        None
    }
}

fn parse_int(bytes: &[u8]) -> Option<i64> {
    let (neg, digits) = match bytes.first()? {
        b'-' => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulate negatively so that i64::MIN parses too.
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub((d - b'0') as i64)?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// Length of the complete reply (RESP2 or RESP3) at the start of `buf`;
/// `Ok(None)` while more bytes are needed. Iterative: nested aggregates add
/// to a count of pending elements instead of recursing.
pub fn reply_len(buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
    let mut pos = 0usize;
    let mut pending: u64 = 1;
    while pending > 0 {
        pending -= 1;
        let Some(&kind) = buf.get(pos) else {
            return Ok(None);
        };
        let Some(cr) = find_crlf(buf, pos + 1) else {
            return Ok(None);
        };
        if buf[cr + 1] != b'\n' {
            return Err(ProtocolError("line not ended by CRLF"));
        }
        let after = cr + 2;
        match kind {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => pos = after,
            b'$' | b'=' | b'!' => {
                let n = parse_int(&buf[pos + 1..cr]).ok_or(ProtocolError("bad bulk length"))?;
                if n < 0 {
                    pos = after;
                } else {
                    // A length beyond the address space is malformed (and
                    // must not overflow the arithmetic below).
                    let end = usize::try_from(n)
                        .ok()
                        .and_then(|n| after.checked_add(n))
                        .filter(|&end| end < usize::MAX - 2)
                        .ok_or(ProtocolError("bad bulk length"))?;
                    if buf.len() < end + 2 {
                        return Ok(None);
                    }
                    if &buf[end..end + 2] != b"\r\n" {
                        return Err(ProtocolError("bulk not ended by CRLF"));
                    }
                    pos = end + 2;
                }
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n =
                    parse_int(&buf[pos + 1..cr]).ok_or(ProtocolError("bad aggregate length"))?;
                if n > 0 {
                    let items = if kind == b'%' || kind == b'|' {
                        2 * n as u64
                    } else {
                        n as u64
                    };
                    pending = pending
                        .checked_add(items)
                        .ok_or(ProtocolError("bad aggregate length"))?;
                }
                pos = after;
            }
            _ => return Err(ProtocolError("unknown reply type")),
        }
    }
    Ok(Some(pos))
}

/// A borrowed view of one complete reply frame.
#[derive(Clone, Copy, Debug)]
pub struct Reply<'a>(pub &'a [u8]);

impl<'a> Reply<'a> {
    /// The type byte (`+`, `-`, `$`, `*`...).
    pub fn kind(&self) -> u8 {
        self.0.first().copied().unwrap_or(0)
    }

    fn line(&self) -> &'a [u8] {
        let end = find_crlf(self.0, 1).unwrap_or(self.0.len());
        &self.0[1..end]
    }

    /// Error text (after the dash) if this is an error reply.
    pub fn error(&self) -> Option<&'a [u8]> {
        match self.kind() {
            b'-' | b'!' => Some(if self.kind() == b'-' {
                self.line()
            } else {
                self.bulk_body().unwrap_or(b"")
            }),
            _ => None,
        }
    }

    /// Whether this is the simple string `+OK`.
    pub fn is_ok(&self) -> bool {
        self.0 == b"+OK\r\n"
    }

    /// Integer payload.
    pub fn int(&self) -> Option<i64> {
        (self.kind() == b':')
            .then(|| parse_int(self.line()))
            .flatten()
    }

    fn bulk_body(&self) -> Option<&'a [u8]> {
        let cr = find_crlf(self.0, 1)?;
        let n = parse_int(&self.0[1..cr])?;
        if n < 0 {
            return None;
        }
        let start = cr + 2;
        self.0
            .get(start..start.checked_add(usize::try_from(n).ok()?)?)
    }

    /// `Some(Some(bytes))` for a bulk string, `Some(None)` for a nil
    /// (`$-1` or RESP3 `_`), `None` for any other type.
    pub fn bulk(&self) -> Option<Option<&'a [u8]>> {
        match self.kind() {
            b'$' => Some(self.bulk_body()),
            b'_' => Some(None),
            b'*' if self.0 == b"*-1\r\n" => Some(None),
            _ => None,
        }
    }

    /// The elements of an array (or set/push) reply; a map yields keys and
    /// values in turn.
    pub fn array(&self) -> Option<ArrayIter<'a>> {
        match self.kind() {
            b'*' | b'~' | b'>' | b'%' => {
                let cr = find_crlf(self.0, 1)?;
                let n = parse_int(&self.0[1..cr])?;
                let n = if n < 0 {
                    0
                } else if self.kind() == b'%' {
                    (n as usize).saturating_mul(2)
                } else {
                    n as usize
                };
                Some(ArrayIter {
                    rest: &self.0[cr + 2..],
                    left: n,
                })
            }
            _ => None,
        }
    }

    /// Number of elements of an array reply.
    pub fn array_len(&self) -> Option<usize> {
        self.array().map(|it| it.left)
    }
}

/// Iterator over the elements of an aggregate reply.
pub struct ArrayIter<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Reply<'a>;

    fn next(&mut self) -> Option<Reply<'a>> {
        if self.left == 0 {
            return None;
        }
        let n = reply_len(self.rest).ok().flatten()?;
        let (item, rest) = self.rest.split_at(n);
        self.rest = rest;
        self.left -= 1;
        Some(Reply(item))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_of_complete_and_partial_replies() {
        assert_eq!(reply_len(b"+OK\r\n"), Ok(Some(5)));
        assert_eq!(reply_len(b"+OK\r"), Ok(None));
        assert_eq!(reply_len(b"$3\r\nabc\r\n+OK"), Ok(Some(9)));
        assert_eq!(reply_len(b"$3\r\nab"), Ok(None));
        assert_eq!(reply_len(b"$-1\r\n"), Ok(Some(5)));
        assert_eq!(reply_len(b"*2\r\n$1\r\na\r\n:5\r\n"), Ok(Some(15)));
        assert_eq!(reply_len(b"*2\r\n$1\r\na\r\n"), Ok(None));
        assert_eq!(reply_len(b"*0\r\n"), Ok(Some(4)));
        assert_eq!(reply_len(b"*1\r\n*1\r\n*1\r\n:1\r\n"), Ok(Some(16)));
        assert_eq!(reply_len(b"%1\r\n+a\r\n:1\r\n"), Ok(Some(12)));
        assert!(reply_len(b"?x\r\n").is_err());
        assert!(reply_len(b"$3\r\nabcd\r\n").is_err());
        // Huge lengths wait for more bytes or are errors, never panics.
        assert_eq!(reply_len(b"$9223372036854775807\r\nabc\r\n"), Ok(None));
        assert_eq!(reply_len(b"*9223372036854775807\r\n:1\r\n"), Ok(None));
        let nested = b"*9223372036854775807\r\n%9223372036854775807\r\n";
        assert!(reply_len(nested).is_err());
        assert_eq!(Reply(b"$9223372036854775807\r\nabc\r\n").bulk(), Some(None));
    }

    #[test]
    fn views() {
        assert!(Reply(b"+OK\r\n").is_ok());
        assert_eq!(Reply(b"-ERR no\r\n").error(), Some(&b"ERR no"[..]));
        assert_eq!(Reply(b":-42\r\n").int(), Some(-42));
        assert_eq!(Reply(b"$3\r\nabc\r\n").bulk(), Some(Some(&b"abc"[..])));
        assert_eq!(Reply(b"$-1\r\n").bulk(), Some(None));
        let frame = b"*3\r\n$1\r\na\r\n*1\r\n:7\r\n$-1\r\n";
        let items: Vec<_> = Reply(frame).array().unwrap().collect();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].bulk(), Some(Some(&b"a"[..])));
        assert_eq!(items[1].array().unwrap().next().unwrap().int(), Some(7));
        assert_eq!(items[2].bulk(), Some(None));
    }

    #[test]
    fn encoding() {
        let mut b = Vec::new();
        put_cmd(&mut b, &[b"SET", b"k", b"v"]);
        put_bulk_i64(&mut b, -17);
        put_bulk_with(&mut b, 2, |d| d.copy_from_slice(b"xy"));
        assert_eq!(
            b,
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$3\r\n-17\r\n$2\r\nxy\r\n"
        );
        let mut d = [0u8; 20];
        assert_eq!(fmt_i64(i64::MIN, &mut d), b"-9223372036854775808");
        assert_eq!(fmt_i64(0, &mut d), b"0");
    }
}
