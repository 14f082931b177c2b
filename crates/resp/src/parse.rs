//! Request parser: RESP multibulk (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) and the
//! inline form (`GET k\r\n`) that telnet and redis-cli's raw mode send.
//!
//! The parser never consumes a partial command: it first checks that a whole
//! command is in the buffer, then splits it off and hands out zero-copy
//! `Bytes` slices of it. Every limit is explicit ([`Limits`]) and every
//! violation is a [`ProtocolError`] with the text Redis 7 sends.

use bytes::{Buf, Bytes, BytesMut};
use std::fmt;

/// Size limits applied while parsing, mirroring redis-server's settings.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `proto-max-bulk-len`: the largest single argument (512 MB by default).
    pub max_bulk_len: usize,
    /// The largest number of arguments in one multibulk request.
    pub max_multibulk_len: usize,
    /// The longest inline request line, and the longest `*N` / `$N` header
    /// (Redis: PROTO_INLINE_MAX_SIZE, 64 KB).
    pub max_inline_len: usize,
    /// A client that has not authenticated yet may send at most 10
    /// arguments of at most 16 KB each (as Redis 7 enforces), so an
    /// anonymous peer cannot make the server buffer much.
    pub unauthenticated: bool,
}

/// Redis's limits for clients that have not authenticated.
const UNAUTH_MAX_MULTIBULK: i64 = 10;
const UNAUTH_MAX_BULK: i64 = 16384;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: 1024 * 1024,
            max_inline_len: 64 * 1024,
            unauthenticated: false,
        }
    }
}

impl Limits {
    /// Checks a multibulk command parsed under other limits (an I/O thread
    /// parses ahead of the session) against these: the error the parser
    /// would have given for the same bytes under these limits, if any. A
    /// request that parsed is well formed, so only the counts can differ;
    /// they are checked in the parser's order.
    pub fn check_parsed(&self, args: &[Bytes]) -> Result<(), ProtocolError> {
        let count = args.len() as i64;
        if self.unauthenticated && count > UNAUTH_MAX_MULTIBULK {
            return Err(ProtocolError::new("unauthenticated multibulk length"));
        }
        if count > self.max_multibulk_len as i64 {
            return Err(ProtocolError::new("invalid multibulk length"));
        }
        for arg in args {
            if self.unauthenticated && arg.len() as i64 > UNAUTH_MAX_BULK {
                return Err(ProtocolError::new("unauthenticated bulk length"));
            }
            if arg.len() > self.max_bulk_len {
                return Err(ProtocolError::new("invalid bulk length"));
            }
        }
        Ok(())
    }
}

/// A protocol violation. The connection that sent it gets
/// `-ERR Protocol error: <reason>` and is then closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(reason: impl Into<String>) -> Self {
        ProtocolError(reason.into())
    }

    /// The error line to send before closing, without the leading dash.
    pub fn reply_text(&self) -> String {
        format!("ERR Protocol error: {}", self.0)
    }

    /// The whole `-ERR Protocol error: ...\r\n` line as Redis sends it: a
    /// byte echoed from the input (`expected '$', got '\xff'`) goes back as
    /// that raw byte, not as its UTF-8 encoding.
    pub fn reply_line(&self) -> Vec<u8> {
        let mut line = b"-ERR Protocol error: ".to_vec();
        for c in self.0.chars() {
            match u8::try_from(u32::from(c)) {
                Ok(b) if b != b'\r' && b != b'\n' => line.push(b),
                Ok(_) => line.push(b' '),
                Err(_) => line.push(b'?'),
            }
        }
        line.extend_from_slice(b"\r\n");
        line
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// The outcome of one parse attempt.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// A complete command (possibly empty: a blank inline line or `*0`,
    /// which Redis silently skips).
    Command(Vec<Bytes>),
    /// More bytes are needed; at least `min_total` bytes in the buffer, when
    /// known, so the caller can reserve room for a large bulk at once.
    Incomplete { min_total: usize },
}

/// Parses one command from the front of `buf`, removing it on success.
pub fn parse_command(buf: &mut BytesMut, limits: &Limits) -> Result<Parsed, ProtocolError> {
    if buf.is_empty() {
        return Ok(Parsed::Incomplete { min_total: 0 });
    }
    if buf[0] == b'*' {
        parse_multibulk(buf, limits)
    } else {
        parse_inline(buf, limits)
    }
}

/// Finds `\r\n` starting at `from`; returns the index of `\r`.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        match memchr(b'\r', &buf[i..]) {
            Some(off) => {
                let at = i + off;
                if at + 1 < buf.len() {
                    if buf[at + 1] == b'\n' {
                        return Some(at);
                    }
                    i = at + 1;
                } else {
                    return None;
                }
            }
            None => return None,
        }
    }
    None
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == needle)
}

/// Length of a `*N` / `$N` header seen so far when its `\r\n` has not
/// arrived: a trailing `\r` may be the start of the terminator, so it does not
/// count (otherwise a header exactly at the limit would be rejected or not
/// depending on where the read boundary fell).
fn pending_header_len(rest: &[u8]) -> usize {
    match rest.last() {
        Some(b'\r') => rest.len() - 1,
        _ => rest.len(),
    }
}

/// Parses a decimal integer header the way Redis's string2ll does: optional
/// minus, digits only, no leading `+`, no spaces, fits in i64.
fn parse_header_int(digits: &[u8]) -> Option<i64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    let (neg, body) = match digits[0] {
        b'-' => (true, &digits[1..]),
        _ => (false, digits),
    };
    // No leading zeros, and "-0" is rejected too, as string2ll does.
    if body.is_empty() || (body[0] == b'0' && (body.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in body {
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

fn parse_multibulk(buf: &mut BytesMut, limits: &Limits) -> Result<Parsed, ProtocolError> {
    let Some(end) = find_crlf(buf, 1) else {
        if pending_header_len(buf) > limits.max_inline_len {
            return Err(ProtocolError::new("too big mbulk count string"));
        }
        return Ok(Parsed::Incomplete { min_total: 0 });
    };
    if end > limits.max_inline_len {
        return Err(ProtocolError::new("too big mbulk count string"));
    }
    let count = match parse_header_int(&buf[1..end]) {
        Some(n) if limits.unauthenticated && n > UNAUTH_MAX_MULTIBULK => {
            return Err(ProtocolError::new("unauthenticated multibulk length"))
        }
        Some(n) if n <= limits.max_multibulk_len as i64 => n,
        _ => return Err(ProtocolError::new("invalid multibulk length")),
    };
    let mut pos = end + 2;
    if count <= 0 {
        buf.advance(pos);
        return Ok(Parsed::Command(Vec::new()));
    }
    // First pass: locate every argument without consuming anything.
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity((count as usize).min(1024));
    for _ in 0..count {
        if pos >= buf.len() {
            return Ok(Parsed::Incomplete { min_total: pos + 1 });
        }
        if buf[pos] != b'$' {
            let got = buf[pos] as char;
            return Err(ProtocolError::new(format!("expected '$', got '{got}'")));
        }
        let Some(hdr_end) = find_crlf(buf, pos + 1) else {
            if pending_header_len(&buf[pos..]) > limits.max_inline_len {
                return Err(ProtocolError::new("too big bulk count string"));
            }
            return Ok(Parsed::Incomplete { min_total: 0 });
        };
        if hdr_end - pos > limits.max_inline_len {
            return Err(ProtocolError::new("too big bulk count string"));
        }
        let len = match parse_header_int(&buf[pos + 1..hdr_end]) {
            Some(n) if limits.unauthenticated && n > UNAUTH_MAX_BULK => {
                return Err(ProtocolError::new("unauthenticated bulk length"))
            }
            Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len as u64 => n as usize,
            _ => return Err(ProtocolError::new("invalid bulk length")),
        };
        let start = hdr_end + 2;
        let need = start + len + 2;
        if buf.len() < need {
            return Ok(Parsed::Incomplete { min_total: need });
        }
        if &buf[start + len..need] != b"\r\n" {
            return Err(ProtocolError::new("expected CRLF after bulk data"));
        }
        spans.push((start, len));
        pos = need;
    }
    let frame = buf.split_to(pos).freeze();
    let args = spans
        .into_iter()
        .map(|(start, len)| frame.slice(start..start + len))
        .collect();
    Ok(Parsed::Command(args))
}

fn parse_inline(buf: &mut BytesMut, limits: &Limits) -> Result<Parsed, ProtocolError> {
    let Some(nl) = memchr(b'\n', buf) else {
        if buf.len() > limits.max_inline_len {
            return Err(ProtocolError::new("too big inline request"));
        }
        return Ok(Parsed::Incomplete { min_total: 0 });
    };
    if nl > limits.max_inline_len {
        return Err(ProtocolError::new("too big inline request"));
    }
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    let line = buf.split_to(nl + 1).freeze();
    let args = split_args(&line[..line_end])
        .ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))?;
    if args.len() > limits.max_multibulk_len {
        return Err(ProtocolError::new("invalid multibulk length"));
    }
    Ok(Parsed::Command(args.into_iter().map(Bytes::from).collect()))
}

/// C's `isspace` in the C locale: unlike `u8::is_ascii_whitespace` it
/// includes vertical tab (0x0B).
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Splits an inline line into arguments with the quoting rules of Redis's
/// `sdssplitargs`: "double quotes" with `\n \r \t \b \a \\ \" \xHH` escapes,
/// 'single quotes' with only `\'`, and a closing quote must be followed by
/// a space or the end. Returns None on unbalanced quotes.
///
/// Like the C original, which works on a NUL-terminated string, the line ends
/// at its first NUL byte, and blanks between arguments are C `isspace`.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = &line[..memchr(0, line).unwrap_or(line.len())];
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_c_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && hex_val(line[i + 2]).is_some()
                    && hex_val(line[i + 3]).is_some()
                {
                    let hi = hex_val(line[i + 2]).unwrap_or(0);
                    let lo = hex_val(line[i + 3]).unwrap_or(0);
                    cur.push(hi * 16 + lo);
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !is_c_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !is_c_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        args.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        loop {
            match parse_command(&mut buf, &Limits::default())? {
                Parsed::Command(args) => out.push(args.iter().map(|a| a.to_vec()).collect()),
                Parsed::Incomplete { .. } => return Ok(out),
            }
        }
    }

    fn err(input: &[u8]) -> String {
        parse_all(input).unwrap_err().0
    }

    #[test]
    fn multibulk_and_pipeline() {
        let cmds = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n").unwrap();
        assert_eq!(
            cmds,
            vec![vec![b"GET".to_vec(), b"k".to_vec()], vec![b"PING".to_vec()]]
        );
    }

    /// A command parsed under loose limits, checked under strict ones,
    /// gets exactly the parser's answer under the strict ones.
    #[test]
    fn check_parsed_agrees_with_the_parser() {
        let loose = Limits::default();
        let stricter = [
            Limits::default(),
            Limits {
                unauthenticated: true,
                ..Limits::default()
            },
            Limits {
                max_bulk_len: 20_000,
                ..Limits::default()
            },
            Limits {
                max_bulk_len: 5,
                unauthenticated: true,
                ..Limits::default()
            },
        ];
        let encode = |args: &[Vec<u8>]| {
            let mut out = format!("*{}\r\n", args.len()).into_bytes();
            for a in args {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
            out
        };
        let mut commands: Vec<Vec<Vec<u8>>> = Vec::new();
        for count in [1usize, 3, 10, 11, 40] {
            for size in [0usize, 5, 6, 16_384, 16_385, 20_000, 20_001] {
                // The long argument first, last, or everywhere.
                let mut first = vec![b"a".to_vec(); count];
                first[0] = vec![b'x'; size];
                let mut last = vec![b"a".to_vec(); count];
                last[count - 1] = vec![b'x'; size];
                commands.push(first);
                commands.push(last);
                commands.push(vec![vec![b'x'; size]; count]);
            }
        }
        for args in &commands {
            let wire = encode(args);
            let mut buf = BytesMut::from(&wire[..]);
            let Ok(Parsed::Command(parsed)) = parse_command(&mut buf, &loose) else {
                panic!("loose limits parse it");
            };
            for limits in &stricter {
                let mut buf = BytesMut::from(&wire[..]);
                let direct = parse_command(&mut buf, limits).map(|_| ());
                assert_eq!(
                    limits.check_parsed(&parsed),
                    direct,
                    "{} args, sizes {:?}, {limits:?}",
                    args.len(),
                    args.iter().map(Vec::len).collect::<Vec<_>>()
                );
            }
        }
    }

    #[test]
    fn partial_is_not_consumed() {
        let full = b"*2\r\n$3\r\nSET\r\n$5\r\nhello\r\n";
        for cut in 0..full.len() {
            let mut buf = BytesMut::from(&full[..cut]);
            let r = parse_command(&mut buf, &Limits::default()).unwrap();
            assert!(matches!(r, Parsed::Incomplete { .. }), "cut at {cut}");
            assert_eq!(buf.len(), cut);
        }
    }

    #[test]
    fn inline_with_quotes() {
        let cmds = parse_all(b"SET k \"a b\\x41\\n\"\r\nPING\n").unwrap();
        assert_eq!(
            cmds[0],
            vec![b"SET".to_vec(), b"k".to_vec(), b"a bA\n".to_vec()]
        );
        assert_eq!(cmds[1], vec![b"PING".to_vec()]);
        assert_eq!(err(b"SET \"k\r\n"), "unbalanced quotes in request");
        assert_eq!(err(b"SET 'k'x\r\n"), "unbalanced quotes in request");
    }

    #[test]
    fn empty_commands_are_skipped() {
        let cmds = parse_all(b"\r\n*0\r\n*-1\r\n").unwrap();
        assert!(cmds.iter().all(|c| c.is_empty()));
    }

    #[test]
    fn redis_error_texts() {
        assert_eq!(err(b"*x\r\n"), "invalid multibulk length");
        assert_eq!(err(b"*99999999999\r\n"), "invalid multibulk length");
        assert_eq!(err(b"*1\r\n+PING\r\n"), "expected '$', got '+'");
        assert_eq!(err(b"*1\r\n$-1\r\n"), "invalid bulk length");
        assert_eq!(err(b"*1\r\n$abc\r\n"), "invalid bulk length");
        assert_eq!(err(b"*1\r\n$999999999999\r\n"), "invalid bulk length");
        assert_eq!(err(b"*1\r\n$4\r\nPINGxx"), "expected CRLF after bulk data");
        let long = vec![b'a'; 70 * 1024];
        assert_eq!(err(&long), "too big inline request");
        let mut mb = b"*".to_vec();
        mb.extend(vec![b'1'; 70 * 1024]);
        assert_eq!(err(&mb), "too big mbulk count string");
    }

    #[test]
    fn big_bulk_asks_for_room() {
        let mut buf = BytesMut::from(&b"*1\r\n$1000\r\nab"[..]);
        let r = parse_command(&mut buf, &Limits::default()).unwrap();
        assert_eq!(
            r,
            Parsed::Incomplete {
                min_total: 11 + 1002
            }
        );
    }
}
