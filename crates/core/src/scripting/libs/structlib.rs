//! `struct`: lua_struct 0.2 (Roberto Ierusalimschy) as loaded by Redis,
//! on an LP64 little-endian host (`long`/`size_t` are 8 bytes, `int` 4,
//! maximum alignment 8).
//!
//! Format characters: `>` `<` (endianness), `!n` (maximum alignment),
//! `x` (padding byte), `b B h H l L T i[n] I[n]` (integers), `f d`
//! (floats), `s` (zero-terminated string), `c[n]` (fixed string; `c0`
//! takes its size from the string itself or, when unpacking, from the
//! previous value) and spaces.

use mlua::{Lua, Value};

use super::util::{
    arg_error, arg_type_name, check_bytes, check_number, err, make_fn, opt_integer, to_number,
    LibResult, RESULT_SLOTS, TWO_63,
};

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: usize,
}

impl Header {
    fn new() -> Self {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// Cursor over a format string; stops at the end or at a NUL byte, as the
/// C code does.
struct Fmt<'a> {
    fmt: &'a [u8],
    pos: usize,
}

impl Fmt<'_> {
    fn next_opt(&mut self) -> Option<u8> {
        let c = *self.fmt.get(self.pos)?;
        if c == 0 {
            return None;
        }
        self.pos += 1;
        Some(c)
    }

    fn getnum(&mut self, default: usize) -> LibResult<usize> {
        let mut a: i64 = 0;
        if !self.fmt.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        while let Some(d) = self.fmt.get(self.pos).filter(|c| c.is_ascii_digit()) {
            let d = (d - b'0') as i64;
            if a > i32::MAX as i64 / 10 || a * 10 > i32::MAX as i64 - d {
                return err("integral size overflow");
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a as usize)
    }

    fn optsize(&mut self, opt: u8) -> LibResult<usize> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.getnum(1)?,
            b'i' | b'I' => {
                let sz = self.getnum(4)?;
                if sz > MAXINTSIZE {
                    return err(format!(
                        "integral size {sz} is larger than limit of {MAXINTSIZE}"
                    ));
                }
                sz
            }
            _ => 0,
        })
    }

    fn controloptions(&mut self, opt: u8, h: &mut Header, fname: &str) -> LibResult<()> {
        match opt {
            b' ' => Ok(()),
            b'>' => {
                h.endian = Endian::Big;
                Ok(())
            }
            b'<' => {
                h.endian = Endian::Little;
                Ok(())
            }
            b'!' => {
                let a = self.getnum(MAXALIGN)?;
                if a == 0 || a & (a - 1) != 0 {
                    return err(format!("alignment {a} is not a power of 2"));
                }
                h.align = a;
                Ok(())
            }
            _ => arg_error(
                1,
                fname,
                &format!(
                    "invalid format option '{}'",
                    String::from_utf8_lossy(&[opt])
                ),
            ),
        }
    }
}

fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let align = if size > h.align { h.align } else { size };
    // `align` may not be a power of 2 (e.g. `i3`); this is the C formula.
    (align.wrapping_sub(len & align.wrapping_sub(1))) & align.wrapping_sub(1)
}

/// `(unsigned long)n` / `(unsigned long)(long)n` as compiled by GCC on
/// x86-64, including its results for out-of-range values.
fn number_to_bits(n: f64) -> u64 {
    fn cvt(x: f64) -> u64 {
        if (-TWO_63..TWO_63).contains(&x) {
            x as i64 as u64
        } else {
            1 << 63
        }
    }
    if n < 0.0 {
        cvt(n)
    } else if n >= TWO_63 {
        cvt(n - TWO_63) ^ (1 << 63)
    } else {
        cvt(n)
    }
}

fn missing_type(args: &[Value], idx: usize) -> &'static str {
    // b_pack pushes a nil right after its arguments.
    if idx == args.len() {
        "nil"
    } else {
        arg_type_name(args, idx)
    }
}

fn pack(lua: &Lua, args: Vec<Value>) -> LibResult<Vec<Value>> {
    let fmt = check_bytes(lua, &args, 0, "pack")?;
    let mut f = Fmt { fmt: &fmt, pos: 0 };
    let mut h = Header::new();
    let mut arg = 1usize;
    let mut out: Vec<u8> = Vec::new();
    let check_num = |arg: usize| -> LibResult<f64> {
        if arg >= args.len() {
            return arg_error(
                arg + 1,
                "pack",
                &format!("number expected, got {}", missing_type(&args, arg)),
            );
        }
        check_number(lua, &args, arg, "pack")
    };
    while let Some(opt) = f.next_opt() {
        let mut size = f.optsize(opt)?;
        let toalign = gettoalign(out.len(), &h, opt, size);
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let mut value = number_to_bits(check_num(arg)?);
                arg += 1;
                let mut buf = [0u8; MAXINTSIZE];
                for i in 0..size {
                    let idx = if h.endian == Endian::Little {
                        i
                    } else {
                        size - 1 - i
                    };
                    buf[idx] = (value & 0xff) as u8;
                    value >>= 8;
                }
                out.extend_from_slice(&buf[..size]);
            }
            b'x' => out.push(0),
            b'f' => {
                let v = check_num(arg)? as f32;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => v.to_le_bytes(),
                    Endian::Big => v.to_be_bytes(),
                });
            }
            b'd' => {
                let v = check_num(arg)?;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => v.to_le_bytes(),
                    Endian::Big => v.to_be_bytes(),
                });
            }
            b'c' | b's' => {
                let s = if arg >= args.len() {
                    return arg_error(
                        arg + 1,
                        "pack",
                        &format!("string expected, got {}", missing_type(&args, arg)),
                    );
                } else {
                    check_bytes(lua, &args, arg, "pack")?
                };
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // The C code reports the already incremented index.
                    return arg_error(arg + 1, "pack", "string too short");
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.controloptions(opt, &mut h, "pack")?,
        }
    }
    Ok(vec![Value::String(lua.create_string(out)?)])
}

fn getinteger(buf: &[u8], endian: Endian, signed: bool) -> f64 {
    let size = buf.len();
    let mut l: u64 = 0;
    for i in 0..size {
        let b = if endian == Endian::Big {
            buf[i]
        } else {
            buf[size - 1 - i]
        };
        l = (l << 8) | b as u64;
    }
    if !signed {
        return l as f64;
    }
    // The C shift count is taken modulo 64 on x86-64 for sizes above 8.
    let mask = u64::MAX.wrapping_shl((size * 8).wrapping_sub(1) as u32);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: Vec<Value>) -> LibResult<Vec<Value>> {
    let fmt = check_bytes(lua, &args, 0, "unpack")?;
    let data = check_bytes(lua, &args, 1, "unpack")?;
    let ld = data.len();
    let pos_arg = opt_integer(lua, &args, 2, "unpack", 1)? as u64 as usize;
    if pos_arg == 0 {
        return arg_error(3, "unpack", "offset must be 1 or greater");
    }
    let mut pos = pos_arg - 1;
    let mut f = Fmt { fmt: &fmt, pos: 0 };
    let mut h = Header::new();
    let mut res: Vec<Value> = Vec::new();
    let too_short = || arg_error(2, "unpack", "data string too short");
    while let Some(opt) = f.next_opt() {
        let mut size = f.optsize(opt)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return too_short();
        }
        // lua_struct checks for room for this item and the position.
        if args.len() + res.len() + 2 > RESULT_SLOTS {
            return err("stack overflow (too many results)");
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = getinteger(&data[pos..pos + size], h.endian, opt.is_ascii_lowercase());
                res.push(Value::Number(v));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().unwrap_or([0; 4]);
                let v = match h.endian {
                    Endian::Little => f32::from_le_bytes(b),
                    Endian::Big => f32::from_be_bytes(b),
                };
                res.push(Value::Number(v as f64));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().unwrap_or([0; 8]);
                let v = match h.endian {
                    Endian::Little => f64::from_le_bytes(b),
                    Endian::Big => f64::from_be_bytes(b),
                };
                res.push(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let prev = res.last().and_then(|v| to_number(lua, v));
                    let Some(n) = prev else {
                        return err("format 'c0' needs a previous size");
                    };
                    res.pop();
                    size = number_to_bits(n) as usize;
                    if !(size <= ld && pos <= ld - size) {
                        return too_short();
                    }
                }
                res.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(len) = data[pos..].iter().position(|&b| b == 0) else {
                    return err("unfinished string in data");
                };
                size = len + 1;
                res.push(Value::String(lua.create_string(&data[pos..pos + len])?));
            }
            _ => f.controloptions(opt, &mut h, "unpack")?,
        }
        pos = pos.wrapping_add(size);
    }
    res.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(res)
}

fn size(lua: &Lua, args: Vec<Value>) -> LibResult<Vec<Value>> {
    let fmt = check_bytes(lua, &args, 0, "size")?;
    let mut f = Fmt { fmt: &fmt, pos: 0 };
    let mut h = Header::new();
    let mut pos: usize = 0;
    while let Some(opt) = f.next_opt() {
        let size = f.optsize(opt)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if opt == b's' {
            return arg_error(1, "size", "option 's' has no fixed size");
        } else if opt == b'c' && size == 0 {
            return arg_error(1, "size", "option 'c0' has no fixed size");
        }
        if !opt.is_ascii_alphanumeric() {
            f.controloptions(opt, &mut h, "size")?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(vec![Value::Number(pos as i64 as f64)])
}

/// Creates the global `struct` table.
pub fn register(lua: &mlua::Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("pack", make_fn(lua, pack)?)?;
    t.raw_set("unpack", make_fn(lua, unpack)?)?;
    t.raw_set("size", make_fn(lua, size)?)?;
    lua.globals().raw_set("struct", t)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    use crate::scripting::libs::test_support::{eval, eval_err};

    fn lua() -> Lua {
        crate::scripting::libs::test_support::lua_with(super::register)
    }

    // Expected values checked against redis-server 7.0.15.
    #[test]
    fn pack_bytes() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("'>i', 1", "00000001"),
            ("'<i', -2", "feffffff"),
            ("'b', -1", "ff"),
            ("'B', 255", "ff"),
            ("'>h', 258", "0102"),
            ("'l', 1", "0100000000000000"),
            ("'>L', 2^64", "0000000000000000"),
            ("'>L', 0/0", "8000000000000000"),
            ("'>l', -2^64", "8000000000000000"),
            ("'>l', 2^63", "8000000000000000"),
            ("'>i16', -1", "0000000000000000ffffffffffffffff"),
            ("'>I3', 0x123456", "123456"),
            ("'<I3', 0x123456", "563412"),
            ("'!4 b i', 1, 2", "0100000002000000"),
            ("'! b d', 1, 2", "01000000000000000000000000000040"),
            ("'!2 b d', 1, 2", "01000000000000000040"),
            ("'b x h', 1, 2", "01000200"),
            ("'>f', 1.5", "3fc00000"),
            ("'<d', 1.5", "000000000000f83f"),
            ("'s', 'ab'", "616200"),
            ("'c5', 'abcdefg'", "6162636465"),
            ("'c0', 'abc'", "616263"),
            ("'c', 'xyz'", "78"),
            ("'>i', 1.9", "00000001"),
            ("'>i', -1.9", "ffffffff"),
            ("'>i', '7'", "00000007"),
            ("'>B', 300", "2c"),
            ("'T', 5", "0500000000000000"),
            ("'i0', 5", ""),
            ("'>i2b', 0x1234, 3", "123403"),
            ("'!8 b T', 1, 2", "01000000000000000200000000000000"),
            ("'s', 5", "3500"),
            ("'!', 1", ""),
        ];
        for (args, want) in cases {
            assert_eq!(
                eval(&lua, &format!("return h(struct.pack({args}))")),
                *want,
                "{args}"
            );
        }
    }

    #[test]
    fn pack_errors() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("'!3'", "alignment 3 is not a power of 2"),
            (
                "'q'",
                "bad argument #1 to 'pack' (invalid format option 'q')",
            ),
            ("'c5', 'ab'", "bad argument #3 to 'pack' (string too short)"),
            ("'i33', 1", "integral size 33 is larger than limit of 32"),
            (
                "'>i'",
                "bad argument #2 to 'pack' (number expected, got nil)",
            ),
            (
                "'>i', {}",
                "bad argument #2 to 'pack' (number expected, got table)",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(
                eval_err(&lua, &format!("struct.pack({args})")),
                *want,
                "{args}"
            );
        }
    }

    #[test]
    fn unpack_values() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("'>i', u('00000001')", "2:1 5"),
            ("'<i', u('feffffff')", "2:-2 5"),
            ("'b B', u('ffff')", "3:-1 255 3"),
            ("'>h H', u('fffffffe')", "3:-1 65534 5"),
            ("'>l', u('ffffffffffffffff')", "2:-1 9"),
            ("'>L', u('ffffffffffffffff')", "2:1.8446744073709552e+19 9"),
            ("'>i16', u('0000000000000000ffffffffffffffff')", "2:-1 17"),
            ("'>i16', u('ffffffffffffffff0000000000000001')", "2:1 17"),
            ("'>I3', u('123456')", "2:1193046 4"),
            ("'>i3', u('fffffe')", "2:-2 4"),
            ("'!4 b i', u('0100000002000000')", "3:1 2 9"),
            ("'>f d', u('3fc000003ff8000000000000')", "3:1.5 1.5 13"),
            ("'s', 'ab'..string.char(0)..'cd'", "2:\"ab\" 4"),
            ("'b c0', u('02')..'xyz'", "2:\"xy\" 4"),
            ("'>i', 'abcdef', 3", "2:1667523942 7"),
            ("'', 'abc', -5", "1:-5"),
            ("'', 'abc', 10", "1:10"),
            ("'x x b', 'abc'", "2:99 4"),
            ("'i', 'abcd', 1.5", "2:1684234849 5"),
            ("'c1 c0', '3xyz'", "2:\"xyz\" 5"),
            ("' > b'..string.char(0)..'b', 'ab'", "2:97 2"),
            ("'i0', ''", "2:0 1"),
        ];
        for (args, want) in cases {
            assert_eq!(
                eval(&lua, &format!("return all(struct.unpack({args}))")),
                *want,
                "{args}"
            );
        }
    }

    #[test]
    fn unpack_errors() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("'s', 'abc'", "unfinished string in data"),
            (
                "'c2 c0', u('0002')..'xyz'",
                "format 'c0' needs a previous size",
            ),
            ("'c0', 'abc'", "format 'c0' needs a previous size"),
            (
                "'b c0', u('05')..'xyz'",
                "bad argument #2 to 'unpack' (data string too short)",
            ),
            (
                "'>i', 'abc'",
                "bad argument #2 to 'unpack' (data string too short)",
            ),
            (
                "'>i', 'abcdef', 4",
                "bad argument #2 to 'unpack' (data string too short)",
            ),
            (
                "'>i', 'abcdef', 0",
                "bad argument #3 to 'unpack' (offset must be 1 or greater)",
            ),
            (
                "'b', 'a', 'x'",
                "bad argument #3 to 'unpack' (number expected, got string)",
            ),
            (
                "'q', 'a'",
                "bad argument #1 to 'unpack' (invalid format option 'q')",
            ),
            (
                "'>i'",
                "bad argument #2 to 'unpack' (string expected, got no value)",
            ),
            ("'c1 c0', '-1xyz'", "format 'c0' needs a previous size"),
            // Redis allows up to 7997 items; mlua needs some slots itself.
            (
                "string.rep('b', 7975), string.rep('x', 8000)",
                "stack overflow (too many results)",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(
                eval_err(&lua, &format!("struct.unpack({args})")),
                *want,
                "{args}"
            );
        }
        assert_eq!(
            eval(
                &lua,
                "return tostring(#{struct.unpack(string.rep('b', 7974), string.rep('x', 8000))})"
            ),
            "7975"
        );
    }

    #[test]
    fn sizes() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("'>i'", "4"),
            ("'b h'", "3"),
            ("'!b d'", "16"),
            ("'!4 b d'", "12"),
            ("'c5'", "5"),
            ("'c'", "1"),
            ("'bxh'", "4"),
            ("'i3'", "3"),
            ("'q'", "0"),
            ("'<>'", "0"),
            ("'b!4 h'", "4"),
            ("''", "0"),
            ("'c2147483647c2147483647c2147483647'", "6442450941"),
        ];
        for (args, want) in cases {
            assert_eq!(
                eval(
                    &lua,
                    &format!("return string.format('%d', struct.size({args}))")
                ),
                *want,
                "{args}"
            );
        }
        let errs: &[(&str, &str)] = &[
            (
                "'s'",
                "bad argument #1 to 'size' (option 's' has no fixed size)",
            ),
            (
                "'c0'",
                "bad argument #1 to 'size' (option 'c0' has no fixed size)",
            ),
            ("'!3'", "alignment 3 is not a power of 2"),
            ("'i40'", "integral size 40 is larger than limit of 32"),
            ("'c99999999999'", "integral size overflow"),
        ];
        for (args, want) in errs {
            assert_eq!(
                eval_err(&lua, &format!("struct.size({args})")),
                *want,
                "{args}"
            );
        }
    }
}
