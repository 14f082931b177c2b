//! Argument parsing helpers shared by the families, with Redis's rules for
//! integers and floats.

use crate::error::CmdError;

/// Parses an argument as i64 exactly as Redis's string2ll: no spaces, no
/// plus sign, no leading zeros, within range.
pub fn parse_i64(b: &[u8]) -> Result<i64, CmdError> {
    crate::keyspace::canonical_i64(b).ok_or(CmdError::NotInteger)
}

/// Parses a non-negative-or-any i64 and maps a failure to `err`.
pub fn parse_i64_or(b: &[u8], err: CmdError) -> Result<i64, CmdError> {
    parse_i64(b).map_err(|_| err)
}

/// Parses an argument as a float as Redis's string2ld/strtold: decimal or
/// exponent forms, `inf`/`-inf`/`+inf`, no spaces, not NaN.
pub fn parse_f64(b: &[u8]) -> Result<f64, CmdError> {
    let s = std::str::from_utf8(b).map_err(|_| CmdError::NotFloat)?;
    if s.is_empty()
        || s.len() > 5120
        || s.starts_with(char::is_whitespace)
        || s.ends_with(char::is_whitespace)
    {
        return Err(CmdError::NotFloat);
    }
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        "nan" | "+nan" | "-nan" => return Err(CmdError::NotFloat),
        _ => match s.parse::<f64>() {
            Ok(v) => v,
            Err(_) => parse_hex_float(s).ok_or(CmdError::NotFloat)?,
        },
    };
    if v.is_nan() {
        return Err(CmdError::NotFloat);
    }
    Ok(v)
}

/// C's hexadecimal float form, which Redis's strtod/strtold accept:
/// `[+-]0x` hex digits with an optional `.` fraction and an optional
/// binary exponent `p[+-]digits` (`0x10` is 16, `0x1p-2` is 0.25).
pub fn parse_hex_float(s: &str) -> Option<f64> {
    let (negative, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let rest = rest
        .strip_prefix("0x")
        .or_else(|| rest.strip_prefix("0X"))?;
    let (digits, exponent) = match rest.find(['p', 'P']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i32>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    // 15 hex digits fit in the mantissa's 53 bits with room; later digits
    // only move the exponent.
    let mut mantissa: u64 = 0;
    let mut scale: i64 = i64::from(exponent);
    let mut kept = 0;
    for (i, c) in int.chars().chain(frac.chars()).enumerate() {
        let d = u64::from(c.to_digit(16)?);
        let fractional = i >= int.len();
        if kept < 15 {
            if mantissa != 0 || d != 0 {
                kept += 1;
            }
            mantissa = mantissa * 16 + d;
            if fractional {
                scale -= 4;
            }
        } else if !fractional {
            scale += 4;
        }
    }
    // In two steps, so that a large mantissa times a tiny power of two
    // is not lost to an underflow of the power alone.
    let scale = scale.clamp(-3000, 3000) as i32;
    let v = mantissa as f64 * 2f64.powi(scale / 2) * 2f64.powi(scale - scale / 2);
    Some(if negative { -v } else { v })
}

/// Parses a blocking command's timeout (seconds, fractions allowed) into
/// milliseconds, with Redis's errors; 0 means wait forever.
pub fn parse_timeout(b: &[u8]) -> Result<u64, CmdError> {
    let secs =
        parse_f64(b).map_err(|_| CmdError::other("ERR timeout is not a float or out of range"))?;
    if secs < 0.0 {
        return Err(CmdError::other("ERR timeout is negative"));
    }
    let ms = (secs * 1000.0).ceil();
    if !ms.is_finite() || ms > (i64::MAX / 2) as f64 {
        return Err(CmdError::other("ERR timeout is out of range"));
    }
    Ok(ms as u64)
}

/// Parses a SCAN-family cursor the way Redis does (strtoul): optional
/// sign (a minus wraps, as in C), decimal digits only, no spaces, fits in
/// u64; an empty argument is 0.
pub fn parse_cursor(arg: &[u8]) -> Result<u64, CmdError> {
    let invalid = || CmdError::other("ERR invalid cursor");
    let (negative, digits) = match arg.split_first() {
        None => return Ok(0),
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, arg),
    };
    if digits.is_empty() {
        return Err(invalid());
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(invalid());
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(c - b'0')))
            .ok_or_else(invalid)?;
    }
    Ok(if negative { v.wrapping_neg() } else { v })
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub fn eq_ic(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// The argument upper-cased, for matching option keywords.
pub fn upper(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_floats_like_strtod() {
        for (text, v) in [
            ("0x10", 16.0),
            ("-0x10", -16.0),
            ("+0X1p-2", 0.25),
            ("0x1.8", 1.5),
            ("0x.8p1", 1.0),
            ("0xA.8P+1", 21.0),
            ("0x1p-1074", f64::from_bits(1)),
            ("0x10000000000000000", 18446744073709551616.0),
        ] {
            assert_eq!(parse_f64(text.as_bytes()), Ok(v), "{text}");
        }
        for bad in ["0x", "0x.", "0xg", "0x1p", "0x1p+", "x10", "0x1 ", "0x1q"] {
            assert!(parse_f64(bad.as_bytes()).is_err(), "{bad}");
        }
        assert_eq!(parse_f64(b"0x1p5000"), Ok(f64::INFINITY));
    }

    #[test]
    fn ints_like_redis() {
        assert_eq!(parse_i64(b"10"), Ok(10));
        assert_eq!(parse_i64(b"-5"), Ok(-5));
        assert_eq!(parse_i64(b" 1"), Err(CmdError::NotInteger));
        assert_eq!(parse_i64(b"1.0"), Err(CmdError::NotInteger));
        assert_eq!(parse_i64(b"9223372036854775808"), Err(CmdError::NotInteger));
    }

    #[test]
    fn floats_like_redis() {
        assert_eq!(parse_f64(b"1.5"), Ok(1.5));
        assert_eq!(parse_f64(b"5e3"), Ok(5000.0));
        assert_eq!(parse_f64(b"-inf"), Ok(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"nan"), Err(CmdError::NotFloat));
        assert_eq!(parse_f64(b"abc"), Err(CmdError::NotFloat));
        assert_eq!(parse_f64(b" 1"), Err(CmdError::NotFloat));
    }

    #[test]
    fn timeouts_like_redis() {
        assert_eq!(parse_timeout(b"0"), Ok(0));
        assert_eq!(parse_timeout(b"0.5"), Ok(500));
        assert_eq!(parse_timeout(b"2"), Ok(2000));
        assert_eq!(
            parse_timeout(b"-1").map_err(|e| e.text()),
            Err("ERR timeout is negative".into())
        );
        assert_eq!(
            parse_timeout(b"abc").map_err(|e| e.text()),
            Err("ERR timeout is not a float or out of range".into())
        );
        assert!(parse_timeout(b"inf").is_err());
    }
}
