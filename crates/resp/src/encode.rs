//! Reply encoder for RESP2 and RESP3.

use crate::reply::{Protocol, Reply};
use bytes::{BufMut, BytesMut};

/// Appends the wire form of `reply` for `proto` to `out`.
pub fn encode(reply: &Reply, proto: Protocol, out: &mut BytesMut) {
    match reply {
        Reply::Simple(s) => line(out, b'+', s.as_bytes()),
        Reply::Error(s) => line(out, b'-', s.as_bytes()),
        Reply::Int(v) => int_line(out, b':', *v),
        Reply::Bulk(b) => bulk(out, b),
        Reply::Nil => match proto {
            Protocol::Resp2 => out.put_slice(b"$-1\r\n"),
            Protocol::Resp3 => out.put_slice(b"_\r\n"),
        },
        Reply::NilArray => match proto {
            Protocol::Resp2 => out.put_slice(b"*-1\r\n"),
            Protocol::Resp3 => out.put_slice(b"_\r\n"),
        },
        Reply::Array(items) => {
            int_line(out, b'*', items.len() as i64);
            for item in items {
                encode(item, proto, out);
            }
        }
        Reply::BulkArray(data, ends) => {
            int_line(out, b'*', ends.len() as i64);
            let mut start = 0;
            for &end in ends {
                bulk(out, data.get(start..end).unwrap_or_default());
                start = end;
            }
        }
        Reply::Double(d) => {
            let text = format_double(*d);
            match proto {
                Protocol::Resp2 => bulk(out, text.as_bytes()),
                Protocol::Resp3 => line(out, b',', text.as_bytes()),
            }
        }
        Reply::DoubleText(text) => match proto {
            Protocol::Resp2 => bulk(out, text),
            Protocol::Resp3 => line(out, b',', text),
        },
        Reply::Bool(b) => match proto {
            Protocol::Resp2 => int_line(out, b':', *b as i64),
            Protocol::Resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        },
        Reply::Map(pairs) => {
            match proto {
                Protocol::Resp2 => int_line(out, b'*', 2 * pairs.len() as i64),
                Protocol::Resp3 => int_line(out, b'%', pairs.len() as i64),
            }
            for (k, v) in pairs {
                encode(k, proto, out);
                encode(v, proto, out);
            }
        }
        Reply::Set(items) => {
            let tag = if proto == Protocol::Resp3 { b'~' } else { b'*' };
            int_line(out, tag, items.len() as i64);
            for item in items {
                encode(item, proto, out);
            }
        }
        Reply::Verbatim(format, text) => match proto {
            Protocol::Resp2 => bulk(out, text),
            Protocol::Resp3 => {
                int_line(out, b'=', (text.len() + 4) as i64);
                out.put_slice(format.as_bytes());
                out.put_u8(b':');
                out.put_slice(text);
                out.put_slice(b"\r\n");
            }
        },
        Reply::Pairs(pairs) => {
            match proto {
                Protocol::Resp2 => int_line(out, b'*', 2 * pairs.len() as i64),
                Protocol::Resp3 => int_line(out, b'*', pairs.len() as i64),
            }
            for (a, b) in pairs {
                if proto == Protocol::Resp3 {
                    out.put_slice(b"*2\r\n");
                }
                encode(a, proto, out);
                encode(b, proto, out);
            }
        }
        Reply::KeyedArrays(pairs) => {
            let tag = if proto == Protocol::Resp3 { b'%' } else { b'*' };
            int_line(out, tag, pairs.len() as i64);
            for (k, v) in pairs {
                if proto == Protocol::Resp2 {
                    out.put_slice(b"*2\r\n");
                }
                encode(k, proto, out);
                encode(v, proto, out);
            }
        }
        Reply::Push(items) => {
            let tag = if proto == Protocol::Resp3 { b'>' } else { b'*' };
            int_line(out, tag, items.len() as i64);
            for item in items {
                encode(item, proto, out);
            }
        }
        Reply::BigNumber(digits) => match proto {
            Protocol::Resp2 => bulk(out, digits),
            Protocol::Resp3 => line(out, b'(', digits),
        },
        Reply::Attribute(pairs) => {
            if proto == Protocol::Resp3 {
                int_line(out, b'|', pairs.len() as i64);
                for (k, v) in pairs {
                    encode(k, proto, out);
                    encode(v, proto, out);
                }
            }
        }
        Reply::Preceded(first, reply) => {
            encode(first, proto, out);
            encode(reply, proto, out);
        }
    }
}

fn line(out: &mut BytesMut, tag: u8, body: &[u8]) {
    out.reserve(body.len() + 3);
    out.put_u8(tag);
    // A status or error line must not contain CR or LF: they would split the
    // reply. Redis replaces them with spaces; so do we.
    if body.iter().any(|&c| c == b'\r' || c == b'\n') {
        out.extend(
            body.iter()
                .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
        );
    } else {
        out.put_slice(body);
    }
    out.put_slice(b"\r\n");
}

fn int_line(out: &mut BytesMut, tag: u8, v: i64) {
    let mut buf = itoa_buf();
    let digits = fmt_i64(v, &mut buf);
    out.reserve(digits.len() + 3);
    out.put_u8(tag);
    out.put_slice(digits);
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, body: &[u8]) {
    int_line(out, b'$', body.len() as i64);
    out.reserve(body.len() + 2);
    out.put_slice(body);
    out.put_slice(b"\r\n");
}

fn itoa_buf() -> [u8; 20] {
    [0u8; 20]
}

/// Formats an i64 into the tail of `buf` without allocating.
pub fn fmt_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let len = fmt_u64(v.unsigned_abs(), buf).len();
    let mut pos = buf.len() - len;
    if v < 0 {
        pos -= 1;
        buf[pos] = b'-';
    }
    &buf[pos..]
}

/// Formats a u64 in decimal into the tail of `buf` without allocating
/// (20 digits hold u64::MAX).
pub fn fmt_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut pos = buf.len();
    loop {
        pos -= 1;
        buf[pos] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[pos..]
}

/// Formats a double the way Redis 7.0 replies with one (`%.17g`): 17
/// significant digits without trailing zeros (ZSCORE of 0.1 is
/// `0.10000000000000001`), exponent notation (`1e+20`, `2.5e-07`) below
/// 1e-4 or from 1e17 on, and `inf`/`-inf`/`nan` for the specials.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "nan".to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    const PRECISION: i32 = 17;
    // `{:.16e}` rounds to 17 significant digits as printf does, and tells
    // the decimal exponent %g chooses its style by.
    let sci = format!("{:.*e}", (PRECISION - 1) as usize, d);
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if negative { "-" } else { "" };
    if !(-4..PRECISION).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let rest = rest.trim_end_matches('0');
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{esign}{:02}", exp.abs());
    }
    let text = if exp >= 0 {
        let (int, frac) = digits.split_at((exp + 1) as usize);
        format!("{int}.{frac}")
    } else {
        format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
    };
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{sign}{text}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn enc(r: &Reply, p: Protocol) -> String {
        let mut out = BytesMut::new();
        encode(r, p, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn scalars_resp2() {
        assert_eq!(enc(&Reply::ok(), Protocol::Resp2), "+OK\r\n");
        assert_eq!(enc(&Reply::Int(-42), Protocol::Resp2), ":-42\r\n");
        assert_eq!(
            enc(&Reply::Int(i64::MIN), Protocol::Resp2),
            ":-9223372036854775808\r\n"
        );
        assert_eq!(enc(&Reply::Nil, Protocol::Resp2), "$-1\r\n");
        assert_eq!(enc(&Reply::NilArray, Protocol::Resp2), "*-1\r\n");
        assert_eq!(
            enc(&Reply::Bulk(Bytes::from_static(b"hi")), Protocol::Resp2),
            "$2\r\nhi\r\n"
        );
        assert_eq!(enc(&Reply::Double(1.5), Protocol::Resp2), "$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Bool(true), Protocol::Resp2), ":1\r\n");
    }

    #[test]
    fn pairs_nest_in_resp3_and_flatten_in_resp2() {
        let pairs = Reply::Pairs(vec![(Reply::bulk_str("a"), Reply::Double(1.5))]);
        assert_eq!(
            enc(&pairs, Protocol::Resp3),
            "*1\r\n*2\r\n$1\r\na\r\n,1.5\r\n"
        );
        assert_eq!(
            enc(&pairs, Protocol::Resp2),
            "*2\r\n$1\r\na\r\n$3\r\n1.5\r\n"
        );
        assert_eq!(enc(&Reply::Pairs(vec![]), Protocol::Resp3), "*0\r\n");
        let keyed = Reply::KeyedArrays(vec![(Reply::bulk_str("s"), Reply::Array(vec![]))]);
        assert_eq!(
            enc(&keyed, Protocol::Resp2),
            "*1\r\n*2\r\n$1\r\ns\r\n*0\r\n"
        );
        assert_eq!(enc(&keyed, Protocol::Resp3), "%1\r\n$1\r\ns\r\n*0\r\n");
    }

    #[test]
    fn resp3_types() {
        assert_eq!(enc(&Reply::Nil, Protocol::Resp3), "_\r\n");
        assert_eq!(enc(&Reply::Double(1.5), Protocol::Resp3), ",1.5\r\n");
        assert_eq!(enc(&Reply::Bool(false), Protocol::Resp3), "#f\r\n");
        let map = Reply::Map(vec![(Reply::bulk_str("a"), Reply::Int(1))]);
        assert_eq!(enc(&map, Protocol::Resp3), "%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&map, Protocol::Resp2), "*2\r\n$1\r\na\r\n:1\r\n");
        let v = Reply::Verbatim("txt", Bytes::from_static(b"hello"));
        assert_eq!(enc(&v, Protocol::Resp3), "=9\r\ntxt:hello\r\n");
    }

    #[test]
    fn bulk_array_encodes_like_an_array_of_bulks() {
        let packed = Reply::BulkArray(Bytes::from_static(b"abcde"), vec![1, 1, 5]);
        let plain = Reply::Array(vec![
            Reply::bulk_str("a"),
            Reply::bulk_str(""),
            Reply::bulk_str("bcde"),
        ]);
        for p in [Protocol::Resp2, Protocol::Resp3] {
            assert_eq!(enc(&packed, p), enc(&plain, p));
        }
    }

    #[test]
    fn error_lines_never_break() {
        assert_eq!(
            enc(&Reply::error("ERR a\r\nb"), Protocol::Resp2),
            "-ERR a  b\r\n"
        );
    }

    #[test]
    fn doubles_like_redis() {
        assert_eq!(format_double(3.0), "3");
        // Redis 7.0.15's replies for the same scores, byte for byte.
        for (d, redis) in [
            (0.1, "0.10000000000000001"),
            (1.1, "1.1000000000000001"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e20, "1e+20"),
            (1e-5, "1.0000000000000001e-05"),
            (2.5e-7, "2.4999999999999999e-07"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (-0.0, "-0"),
            (0.0, "0"),
            (-2.5, "-2.5"),
            (1e16, "10000000000000000"),
            (0.0001, "0.0001"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
        ] {
            assert_eq!(format_double(d), redis, "{d:?}");
        }
        assert_eq!(format_double(10.5), "10.5");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(-2.5e-7), "-2.4999999999999999e-07");
    }
}
