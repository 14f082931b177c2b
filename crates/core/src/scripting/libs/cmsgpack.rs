//! `cmsgpack`: lua_cmsgpack 0.4.0 (Salvatore Sanfilippo) as loaded by
//! Redis 7.0.
//!
//! * `pack(...)` encodes every argument and concatenates the results.
//!   Numbers with an int64 value use the smallest integer encoding, other
//!   numbers float32 when exact, else float64. Tables whose keys are
//!   exactly 1..n become arrays, other tables maps; tables nested deeper
//!   than 16 levels (e.g. cycles) and non-serialisable values become nil.
//! * `unpack(s)` returns every value of `s`; `unpack_one(s [, offset])` and
//!   `unpack_limit(s, limit [, offset])` return the next offset (-1 at the
//!   end) followed by the values.
//!
//! Deviation: bin 8/16/32 are decoded as strings (lua_cmsgpack rejects
//! them with "Bad data format in input."); ext types are rejected as in
//! Redis.

use mlua::{Lua, Table, Value};

use super::util::{
    arg_error, check_bytes, check_integer, err, f64_to_i64, make_fn, opt_integer, LibError,
    LibResult, RESULT_SLOTS,
};

/// `LUACMSGPACK_MAX_NESTING`.
const MAX_NESTING: usize = 16;
/// `LUAI_MAXCSTACK` of Lua 5.1.
const MAX_C_STACK: usize = 8000;

// ---------------------------------------------------------------- encoding

fn encode_bytes(buf: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        buf.push(0xa0 | len as u8);
    } else if len <= 0xff {
        buf.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        buf.push(0xda);
        buf.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        buf.push(0xdb);
        buf.extend_from_slice(&(len as u32).to_be_bytes());
    }
    buf.extend_from_slice(s);
}

fn encode_int(buf: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            buf.push(n as u8);
        } else if n <= 0xff {
            buf.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            buf.push(0xcd);
            buf.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            buf.push(0xce);
            buf.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            buf.push(0xcf);
            buf.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        buf.push(n as i8 as u8);
    } else if n >= -128 {
        buf.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        buf.push(0xd1);
        buf.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        buf.push(0xd2);
        buf.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        buf.push(0xd3);
        buf.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(buf: &mut Vec<u8>, n: f64) {
    let i = f64_to_i64(n);
    if !n.is_infinite() && i as f64 == n {
        encode_int(buf, i);
        return;
    }
    let f = n as f32;
    if f as f64 == n {
        buf.push(0xca);
        buf.extend_from_slice(&f.to_be_bytes());
    } else {
        buf.push(0xcb);
        buf.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_len(buf: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        buf.push(fix | n as u8);
    } else if n <= 0xffff {
        buf.push(b16);
        buf.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        buf.push(b32);
        buf.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// `table_is_an_array`: every key is a number holding a positive `int`
/// and the largest equals the number of keys.
fn table_is_an_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max) = (0i64, 0i64);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || n > i32::MAX as f64 || n.fract() != 0.0 {
            return Ok(false);
        }
        max = max.max(n as i64);
        count += 1;
    }
    Ok(max == count)
}

fn encode_value(buf: &mut Vec<u8>, v: &Value, level: usize) -> mlua::Result<()> {
    match v {
        Value::String(s) => encode_bytes(buf, &s.as_bytes()),
        Value::Boolean(b) => buf.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(buf, *i as f64),
        Value::Number(n) => encode_number(buf, *n),
        Value::Table(t) if level < MAX_NESTING => {
            if table_is_an_array(t)? {
                let len = t.raw_len();
                encode_len(buf, len, 0x90, 0xdc, 0xdd);
                for j in 1..=len {
                    // lua_gettable: honours __index.
                    let item: Value = t.get(j)?;
                    encode_value(buf, &item, level + 1)?;
                }
            } else {
                let mut len = 0usize;
                for pair in t.pairs::<Value, Value>() {
                    pair?;
                    len += 1;
                }
                encode_len(buf, len, 0x80, 0xde, 0xdf);
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    encode_value(buf, &k, level + 1)?;
                    encode_value(buf, &v, level + 1)?;
                }
            }
        }
        _ => buf.push(0xc0),
    }
    Ok(())
}

fn pack(lua: &Lua, args: Vec<Value>) -> LibResult<Vec<Value>> {
    if args.is_empty() {
        return arg_error(0, "pack", "MessagePack pack needs input.");
    }
    let mut buf = Vec::new();
    for v in &args {
        encode_value(&mut buf, v, 0)?;
    }
    Ok(vec![Value::String(lua.create_string(buf)?)])
}

// ---------------------------------------------------------------- decoding

enum DecodeError {
    Eof,
    BadFmt,
    Msg(String),
    Raw(String),
    Lua(mlua::Error),
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lua(e)
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.data.len() - self.pos < n {
            Err(DecodeError::Eof)
        } else {
            Ok(())
        }
    }

    /// Returns the `n` bytes after the type byte and consumes `1 + n`.
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        self.need(1 + n)?;
        let s = &self.data[self.pos + 1..self.pos + 1 + n];
        self.pos += 1 + n;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    /// A length-prefixed payload whose length field has `n` bytes.
    fn payload(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        self.need(1 + n)?;
        let len = self.data[self.pos + 1..self.pos + 1 + n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | b as usize);
        self.need(1 + n + len)?;
        let s = &self.data[self.pos + 1 + n..self.pos + 1 + n + len];
        self.pos += 1 + n + len;
        Ok(s)
    }
}

/// What the next item turned out to be.
enum Item {
    Value(Value),
    Array(usize),
    Map(usize),
}

fn decode_item(lua: &Lua, c: &mut Cursor) -> Result<Item, DecodeError> {
    c.need(1)?;
    let t = c.data[c.pos];
    let num = |n: f64| Ok(Item::Value(Value::Number(n)));
    let string = |s: &[u8]| -> Result<Item, DecodeError> {
        Ok(Item::Value(Value::String(lua.create_string(s)?)))
    };
    match t {
        0xcc => num(c.uint(1)? as f64),
        0xcd => num(c.uint(2)? as f64),
        0xce => num(c.uint(4)? as f64),
        // lua_cmsgpack builds uint64 as a signed lua_Integer.
        0xcf => num(c.uint(8)? as i64 as f64),
        0xd0 => num(c.uint(1)? as u8 as i8 as f64),
        0xd1 => num(c.uint(2)? as u16 as i16 as f64),
        0xd2 => num(c.uint(4)? as u32 as i32 as f64),
        0xd3 => num(c.uint(8)? as i64 as f64),
        0xc0 => {
            c.pos += 1;
            Ok(Item::Value(Value::Nil))
        }
        0xc2 | 0xc3 => {
            c.pos += 1;
            Ok(Item::Value(Value::Boolean(t == 0xc3)))
        }
        0xca => num(f32::from_bits(c.uint(4)? as u32) as f64),
        0xcb => num(f64::from_bits(c.uint(8)?)),
        // str 8/16/32 and (an extension over lua_cmsgpack) bin 8/16/32.
        0xd9 | 0xc4 => string(c.payload(1)?),
        0xda | 0xc5 => string(c.payload(2)?),
        0xdb | 0xc6 => string(c.payload(4)?),
        0xdc => Ok(Item::Array(c.uint(2)? as usize)),
        0xdd => Ok(Item::Array(c.uint(4)? as usize)),
        0xde => Ok(Item::Map(c.uint(2)? as usize)),
        0xdf => Ok(Item::Map(c.uint(4)? as usize)),
        _ if t & 0x80 == 0 => {
            c.pos += 1;
            num(t as f64)
        }
        _ if t & 0xe0 == 0xe0 => {
            c.pos += 1;
            num(t as i8 as f64)
        }
        _ if t & 0xe0 == 0xa0 => {
            let l = (t & 0x1f) as usize;
            c.need(1 + l)?;
            let s = &c.data[c.pos + 1..c.pos + 1 + l];
            c.pos += 1 + l;
            string(s)
        }
        _ if t & 0xf0 == 0x90 => {
            c.pos += 1;
            Ok(Item::Array((t & 0xf) as usize))
        }
        _ if t & 0xf0 == 0x80 => {
            c.pos += 1;
            Ok(Item::Map((t & 0xf) as usize))
        }
        _ => Err(DecodeError::BadFmt),
    }
}

struct Frame {
    table: Table,
    remaining: usize,
    is_map: bool,
    next_index: usize,
    key: Option<Value>,
}

/// Decodes one top-level value without recursion. `used` is the number of
/// Lua stack slots the C implementation would be using at this point; the
/// same limits are applied to nesting.
fn decode_value(lua: &Lua, c: &mut Cursor, used: usize) -> Result<Value, DecodeError> {
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        let mut value = match decode_item(lua, c)? {
            Item::Value(v) => v,
            Item::Array(n) | Item::Map(n) if n == 0 => Value::Table(lua.create_table()?),
            item => {
                let is_map = matches!(item, Item::Map(_));
                let n = match item {
                    Item::Array(n) | Item::Map(n) => n,
                    Item::Value(_) => 0,
                };
                if used + 2 * stack.len() + 2 > MAX_C_STACK {
                    let f = if is_map {
                        "mp_decode_to_lua_hash"
                    } else {
                        "mp_decode_to_lua_array"
                    };
                    return Err(DecodeError::Msg(format!(
                        "stack overflow (in function {f})"
                    )));
                }
                // Never trust the announced size for preallocation.
                stack.push(Frame {
                    table: lua.create_table()?,
                    remaining: n,
                    is_map,
                    next_index: 1,
                    key: None,
                });
                continue;
            }
        };
        // Store `value` into the enclosing containers, closing those
        // that are complete.
        loop {
            let Some(top) = stack.last_mut() else {
                return Ok(value);
            };
            if top.is_map {
                match top.key.take() {
                    None => {
                        top.key = Some(value);
                        break;
                    }
                    Some(k) => {
                        match &k {
                            Value::Nil => {
                                return Err(DecodeError::Raw("table index is nil".into()))
                            }
                            Value::Number(n) if n.is_nan() => {
                                return Err(DecodeError::Raw("table index is NaN".into()))
                            }
                            _ => {}
                        }
                        top.table.raw_set(k, value)?;
                    }
                }
            } else {
                top.table.raw_set(top.next_index, value)?;
                top.next_index += 1;
            }
            top.remaining -= 1;
            if top.remaining > 0 {
                break;
            }
            let done = stack.pop().map(|f| f.table);
            value = done.map(Value::Table).unwrap_or(Value::Nil);
        }
    }
}

fn unpack_full(
    lua: &Lua,
    fname: &str,
    args: &[Value],
    limit: i64,
    offset: i64,
) -> LibResult<Vec<Value>> {
    let s = check_bytes(lua, args, 0, fname)?;
    let len = s.len();
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return err(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        ));
    } else if offset as u64 > len as u64 {
        // Printed with %d in C.
        return err(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        ));
    }
    let limit = if decode_all { i32::MAX as i64 } else { limit };
    // Lua 5.1 lets a C function use 8000 stack slots; the string argument
    // takes one. mlua needs a few more (see RESULT_SLOTS).
    let mlua_max = RESULT_SLOTS - args.len();
    let mut c = Cursor {
        data: &s,
        pos: offset as usize,
    };
    let mut out = Vec::new();
    let mut cnt: i64 = 0;
    while c.pos < len && cnt < limit {
        if 1 + out.len() + 1 > MAX_C_STACK || out.len() + 1 > mlua_max {
            return err(
                "stack overflow (too many return values at once; use unpack_one or \
                 unpack_limit instead.)",
            );
        }
        match decode_value(lua, &mut c, 1 + out.len()) {
            Ok(v) => out.push(v),
            Err(DecodeError::Eof) => return err("Missing bytes in input."),
            Err(DecodeError::BadFmt) => return err("Bad data format in input."),
            Err(DecodeError::Msg(m)) => return Err(LibError::Msg(m)),
            Err(DecodeError::Raw(m)) => return Err(LibError::Raw(m)),
            Err(DecodeError::Lua(e)) => return Err(e.into()),
        }
        cnt += 1;
    }
    if !decode_all {
        if 1 + out.len() + 1 > MAX_C_STACK || out.len() + 1 > mlua_max {
            return err("stack overflow (in function mp_unpack_full)");
        }
        let next = if c.pos == len { -1.0 } else { c.pos as f64 };
        out.insert(0, Value::Number(next));
    }
    Ok(out)
}

fn unpack(lua: &Lua, args: Vec<Value>) -> LibResult<Vec<Value>> {
    unpack_full(lua, "unpack", &args, 0, 0)
}

fn unpack_one(lua: &Lua, args: Vec<Value>) -> LibResult<Vec<Value>> {
    let offset = opt_integer(lua, &args, 1, "unpack_one", 0)?;
    unpack_full(lua, "unpack_one", &args, 1, offset)
}

fn unpack_limit(lua: &Lua, args: Vec<Value>) -> LibResult<Vec<Value>> {
    let limit = check_integer(lua, &args, 1, "unpack_limit")?;
    let offset = opt_integer(lua, &args, 2, "unpack_limit", 0)?;
    unpack_full(lua, "unpack_limit", &args, limit, offset)
}

/// Creates the global `cmsgpack` table.
pub fn register(lua: &mlua::Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("pack", make_fn(lua, pack)?)?;
    t.raw_set("unpack", make_fn(lua, unpack)?)?;
    t.raw_set("unpack_one", make_fn(lua, unpack_one)?)?;
    t.raw_set("unpack_limit", make_fn(lua, unpack_limit)?)?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    lua.globals().raw_set("cmsgpack", t)?;
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
            ("1.5", "ca3fc00000"),
            ("0.1", "cb3fb999999999999a"),
            ("-0.0", "00"),
            ("0/0", "cbfff8000000000000"),
            ("1/0", "ca7f800000"),
            ("-1/0", "caff800000"),
            ("0", "00"),
            ("127", "7f"),
            ("128", "cc80"),
            ("255", "ccff"),
            ("256", "cd0100"),
            ("65535", "cdffff"),
            ("65536", "ce00010000"),
            ("4294967295", "ceffffffff"),
            ("4294967296", "cf0000000100000000"),
            ("-1", "ff"),
            ("-32", "e0"),
            ("-33", "d0df"),
            ("-128", "d080"),
            ("-129", "d1ff7f"),
            ("-32768", "d18000"),
            ("-32769", "d2ffff7fff"),
            ("-2147483648", "d280000000"),
            ("-2147483649", "d3ffffffff7fffffff"),
            ("2^63", "ca5f000000"),
            ("-2^63", "d38000000000000000"),
            ("2^53", "cf0020000000000000"),
            ("1e300", "cb7e37e43c8800759c"),
            ("nil", "c0"),
            ("true", "c3"),
            ("false", "c2"),
            ("{}", "90"),
            ("{1,2,3}", "93010203"),
            ("{1,2,nil,4}", "83010102020404"),
            ("{a=1}", "81a16101"),
            ("{[1]=1,[3]=3}", "8201010303"),
            ("{[0]=1}", "810001"),
            ("{[2^31]=1}", "81ce8000000001"),
            ("string.rep('x',1)", "a178"),
            ("{1,2},{a=true}", "92010281a161c3"),
            ("print", "c0"),
        ];
        for (args, want) in cases {
            assert_eq!(
                eval(&lua, &format!("return h(cmsgpack.pack({args}))")),
                *want,
                "{args}"
            );
        }
        let long: &[(&str, &str)] = &[
            (
                "string.rep('a',31)",
                "bf61616161616161616161616161616161616161616161616161616161616161",
            ),
            (
                "string.rep('a',32)",
                "d9206161616161616161616161616161616161616161616161616161616161616161",
            ),
            ("string.rep('a',255)", "d9ff61616161616161616161..len=257"),
            ("string.rep('a',256)", "da0100616161616161616161..len=259"),
            (
                "string.rep('a',65536)",
                "db0001000061616161616161..len=65541",
            ),
        ];
        for (args, want) in long {
            let code = format!(
                "local s = cmsgpack.pack({args}) if #s > 40 then return h(s:sub(1,12))..'..len='..#s end return h(s)"
            );
            assert_eq!(eval(&lua, &code), *want, "{args}");
        }
        // Nesting beyond 16 levels (and cycles) is packed as nil.
        assert_eq!(
            eval(
                &lua,
                "local t={} local c=t for i=1,20 do c[1]={} c=c[1] end return h(cmsgpack.pack(t))"
            ),
            "91919191919191919191919191919191c0"
        );
        assert_eq!(
            eval(&lua, "local t={} t[1]=t return tostring(#cmsgpack.pack(t))"),
            "17"
        );
        // Arrays are read through __index.
        assert_eq!(
            eval(
                &lua,
                "local t=setmetatable({}, {__index=function(t,k) return k*10 end}) t[1]=1 t[2]=2 \
                 return h(cmsgpack.pack(t))"
            ),
            "920102"
        );
        assert_eq!(
            eval_err(&lua, "cmsgpack.pack()"),
            "bad argument #0 to 'pack' (MessagePack pack needs input.)"
        );
    }

    #[test]
    fn unpack_values() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("cmsgpack.unpack(u('01'))", "1:1"),
            ("cmsgpack.unpack(u('0102ff'))", "3:1 2 -1"),
            ("cmsgpack.unpack(u('cfffffffffffffffff'))", "1:-1"),
            (
                "cmsgpack.unpack(u('cf8000000000000000'))",
                "1:-9.2233720368547758e+18",
            ),
            ("cmsgpack.unpack(u('d3ffffffffffffffff'))", "1:-1"),
            ("cmsgpack.unpack(u('ca3fc00000'))", "1:1.5"),
            ("cmsgpack.unpack(u('ca3dcccccd'))", "1:0.10000000149011612"),
            ("cmsgpack.unpack(u('c0c2c3'))", "3:nil false true"),
            (
                "cmsgpack.unpack(u('dc0002a161a162'))",
                "1:{1=\"a\",2=\"b\"}",
            ),
            ("cmsgpack.unpack(u('82a16101a16102'))", "1:{\"a\"=2}"),
            ("cmsgpack.unpack('')", "0:"),
            ("cmsgpack.unpack(5)", "1:53"),
            ("cmsgpack.unpack_one(u('010203'))", "2:1 1"),
            ("cmsgpack.unpack_one(u('010203'),1)", "2:2 2"),
            ("cmsgpack.unpack_one(u('010203'),2)", "2:-1 3"),
            ("cmsgpack.unpack_one(u('010203'),3)", "1:-1"),
            ("cmsgpack.unpack_limit(u('010203'),2)", "3:2 1 2"),
            ("cmsgpack.unpack_limit(u('010203'),0)", "3:1 2 3"),
            ("cmsgpack.unpack_limit(u('010203'),0,1)", "1:1"),
            ("cmsgpack.unpack_limit(u('010203'),5,1)", "3:-1 2 3"),
            ("cmsgpack.unpack_one(u('010203'),1.7)", "2:2 2"),
            ("cmsgpack.unpack_one('',0)", "1:-1"),
            ("cmsgpack.unpack(u('cb7ff8000000000000'))", "1:nan"),
            ("cmsgpack.unpack(u('d1ff7f'))", "1:-129"),
            ("cmsgpack.unpack(u('ce80000000'))", "1:2147483648"),
            ("cmsgpack.unpack(u('d280000000'))", "1:-2147483648"),
            ("cmsgpack.unpack(u('d0df'))", "1:-33"),
            ("cmsgpack.unpack(u('92c0c0'))", "1:{}"),
            ("cmsgpack.unpack(u('819101a178'))", "1:{{1=1}=\"x\"}"),
            // Not supported by lua_cmsgpack ("Bad data format"): bin 8.
            ("cmsgpack.unpack(u('c403616263'))", "1:\"abc\""),
            (
                "cmsgpack.unpack(cmsgpack.pack({1,{a={true,false}},'x',-1.25}, 'tail'))",
                "2:{1=1,2={\"a\"={1=true,2=false}},3=\"x\",4=-1.25} \"tail\"",
            ),
        ];
        for (code, want) in cases {
            assert_eq!(eval(&lua, &format!("return all({code})")), *want, "{code}");
        }
        assert_eq!(
            eval(&lua, "return tostring(select('#', cmsgpack.unpack(string.rep(string.char(0x91),3999)..string.char(0))))"),
            "1"
        );
    }

    #[test]
    fn unpack_errors() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("cmsgpack.unpack(u('d4'))", "Bad data format in input."),
            ("cmsgpack.unpack(u('c1'))", "Bad data format in input."),
            ("cmsgpack.unpack(u('d9'))", "Missing bytes in input."),
            ("cmsgpack.unpack(u('a56162'))", "Missing bytes in input."),
            ("cmsgpack.unpack(u('82c00101'))", "table index is nil"),
            ("cmsgpack.unpack(u('81ca7fc0000001'))", "table index is NaN"),
            ("cmsgpack.unpack(u('dfffffffff'))", "Missing bytes in input."),
            ("cmsgpack.unpack(u('81a161'))", "Missing bytes in input."),
            ("cmsgpack.unpack(u('92'))", "Missing bytes in input."),
            ("cmsgpack.unpack(u('dbffffffff41'))", "Missing bytes in input."),
            ("cmsgpack.unpack()", "bad argument #1 to 'unpack' (string expected, got no value)"),
            ("cmsgpack.unpack({})", "bad argument #1 to 'unpack' (string expected, got table)"),
            ("cmsgpack.unpack_one(u('010203'),4)", "Start offset 4 greater than input length 3."),
            (
                "cmsgpack.unpack_one(u('010203'),-1)",
                "Invalid request to unpack with offset of -1 and limit of 3.",
            ),
            (
                "cmsgpack.unpack_limit(u('010203'),-1)",
                "Invalid request to unpack with offset of 0 and limit of 3.",
            ),
            (
                "cmsgpack.unpack_limit(u('010203'))",
                "bad argument #2 to 'unpack_limit' (number expected, got no value)",
            ),
            (
                "cmsgpack.unpack_one(u('010203'),'x')",
                "bad argument #2 to 'unpack_one' (number expected, got string)",
            ),
            (
                "cmsgpack.unpack(string.rep(string.char(0),7977))",
                "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
            ),
            (
                "cmsgpack.unpack(string.rep(string.char(0),10000))",
                "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
            ),
            (
                "cmsgpack.unpack(string.rep(string.char(0x91),100000))",
                "stack overflow (in function mp_decode_to_lua_array)",
            ),
            (
                "cmsgpack.unpack(string.rep(string.char(0x91),4000)..string.char(0))",
                "stack overflow (in function mp_decode_to_lua_array)",
            ),
            (
                "cmsgpack.unpack(string.rep(string.char(0),6000)..string.rep(string.char(0x91),1000)..string.char(0))",
                "stack overflow (in function mp_decode_to_lua_array)",
            ),
        ];
        for (code, want) in cases {
            assert_eq!(eval_err(&lua, code), *want, "{code}");
        }
    }
}
