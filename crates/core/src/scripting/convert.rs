//! Conversions between replies and Lua values, as Redis 7.0 documents
//! them ("Conversion between Lua and Redis data types").
//!
//! Command replies reach a script in the protocol the script chose with
//! `redis.setresp` (2 by default), whatever the client speaks; a script's
//! return value becomes a reply rendered in the client's protocol.

use kvasir_resp::Reply;
use mlua::{ffi, Lua, Table, Value};
use std::os::raw::c_int;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RespVersion {
    Resp2,
    Resp3,
}

/// An error text in the form Redis keeps in error tables (its
/// luaPushErrorBuff): `CODE message`, the code being the first word of a
/// text (a leading `-` dropped), or `ERR` for a one-word text.
pub fn error_text(raw: &str) -> String {
    let text = raw.strip_prefix('-').unwrap_or(raw);
    let (code, msg) = match text.split_once(' ') {
        Some((code, msg)) => (code, msg),
        None => ("ERR", text),
    };
    format!("{code} {}", msg.trim_matches(['\r', '\n']))
}

/// A command's reply as the script sees it.
pub fn reply_to_lua(lua: &Lua, reply: Reply, resp: RespVersion) -> mlua::Result<Value> {
    let resp3 = resp == RespVersion::Resp3;
    Ok(match reply {
        Reply::Simple(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", s.as_ref())?;
            Value::Table(t)
        }
        Reply::Error(s) => {
            let t = lua.create_table()?;
            t.raw_set("err", error_text(&s))?;
            Value::Table(t)
        }
        Reply::Int(i) => Value::Number(i as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(&b)?),
        Reply::Nil | Reply::NilArray if resp3 => Value::Nil,
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Array(items) | Reply::Push(items) => array(lua, items, resp)?,
        Reply::BulkArray(buf, ends) => {
            let t = lua.create_table_with_capacity(ends.len(), 0)?;
            let mut start = 0;
            for (i, end) in ends.into_iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(&buf[start..end])?)?;
                start = end;
            }
            Value::Table(t)
        }
        Reply::Double(d) if resp3 => single(lua, "double", Value::Number(d))?,
        Reply::Double(d) => {
            Value::String(lua.create_string(kvasir_resp::encode::format_double(d))?)
        }
        Reply::DoubleText(b) if resp3 => {
            let d = std::str::from_utf8(&b)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(0.0);
            single(lua, "double", Value::Number(d))?
        }
        Reply::DoubleText(b) => Value::String(lua.create_string(&b)?),
        Reply::Bool(b) if resp3 => Value::Boolean(b),
        Reply::Bool(b) => Value::Number(b as i64 as f64),
        Reply::KeyedArrays(pairs) if !resp3 => array(
            lua,
            pairs
                .into_iter()
                .map(|(k, v)| Reply::Array(vec![k, v]))
                .collect(),
            resp,
        )?,
        Reply::Map(pairs) | Reply::KeyedArrays(pairs) if resp3 => {
            let m = lua.create_table()?;
            for (k, v) in pairs {
                m.raw_set(reply_to_lua(lua, k, resp)?, reply_to_lua(lua, v, resp)?)?;
            }
            single(lua, "map", Value::Table(m))?
        }
        Reply::Set(items) if resp3 => {
            let s = lua.create_table()?;
            for item in items {
                s.raw_set(reply_to_lua(lua, item, resp)?, true)?;
            }
            single(lua, "set", Value::Table(s))?
        }
        Reply::Map(pairs) | Reply::Pairs(pairs) if !resp3 => array(
            lua,
            pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
            resp,
        )?,
        Reply::Pairs(pairs) => array(
            lua,
            pairs
                .into_iter()
                .map(|(k, v)| Reply::Array(vec![k, v]))
                .collect(),
            resp,
        )?,
        Reply::Set(items) => array(lua, items, resp)?,
        Reply::Verbatim(format, b) if resp3 => {
            let v = lua.create_table()?;
            v.raw_set("format", format)?;
            v.raw_set("string", lua.create_string(&b)?)?;
            single(lua, "verbatim_string", Value::Table(v))?
        }
        Reply::Verbatim(_, b) => Value::String(lua.create_string(&b)?),
        Reply::BigNumber(digits) if resp3 => single(
            lua,
            "big_number",
            Value::String(lua.create_string(&digits)?),
        )?,
        Reply::BigNumber(digits) => Value::String(lua.create_string(&digits)?),
        // Lua sees the reply, not the data about it (as Redis's parser
        // skips attributes).
        Reply::Preceded(_, reply) => reply_to_lua(lua, *reply, resp)?,
        Reply::Attribute(_) => Value::Nil,
        // The remaining shapes are matched above in both protocols.
        Reply::Map(_) | Reply::KeyedArrays(_) => Value::Nil,
    })
}

fn array(lua: &Lua, items: Vec<Reply>, resp: RespVersion) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.into_iter().enumerate() {
        t.raw_set(i + 1, reply_to_lua(lua, item, resp)?)?;
    }
    Ok(Value::Table(t))
}

fn single(lua: &Lua, key: &str, v: Value) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(key, v)?;
    Ok(Value::Table(t))
}

/// Lua number to integer reply: truncated toward zero as C's cast does;
/// out of range (and NaN) gives Redis's result on x86, the i64 minimum.
pub fn number_to_int(n: f64) -> i64 {
    if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// The reply of the value at `at` on `state`'s stack if it is not a table
/// (or anything else that needs mlua to read): Redis's conversion of a
/// script's result, by the same rules as [`lua_to_reply`]'s scalars.
///
/// # Safety
/// `at` must be a valid index of `state`'s stack.
pub(super) unsafe fn stack_scalar_to_reply(state: *mut ffi::lua_State, at: c_int) -> Option<Reply> {
    unsafe {
        Some(match ffi::lua_type(state, at) {
            ffi::LUA_TNIL => Reply::Nil,
            ffi::LUA_TBOOLEAN if ffi::lua_toboolean(state, at) != 0 => Reply::Int(1),
            ffi::LUA_TBOOLEAN => Reply::Nil,
            ffi::LUA_TNUMBER => Reply::Int(number_to_int(ffi::lua_tonumber(state, at))),
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let ptr = ffi::lua_tolstring(state, at, &mut len);
                Reply::Bulk(bytes::Bytes::copy_from_slice(std::slice::from_raw_parts(
                    ptr.cast::<u8>(),
                    len,
                )))
            }
            _ => return None,
        })
    }
}

/// A script's return value as the client's reply; `None` if it nests
/// deeper than `depth` (a table holding itself).
pub fn lua_to_reply(v: &Value, depth: usize) -> Option<Reply> {
    Some(match v {
        Value::Nil => Reply::Nil,
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(number_to_int(*n)),
        Value::String(s) => Reply::Bulk(bytes::Bytes::copy_from_slice(&s.as_bytes())),
        Value::Table(t) => table_to_reply(t, depth)?,
        _ => Reply::Nil,
    })
}

fn table_to_reply(t: &Table, depth: usize) -> Option<Reply> {
    if depth == 0 {
        return None;
    }
    table_shape(t, depth)
}

fn table_shape(t: &Table, depth: usize) -> Option<Reply> {
    if let Ok(Value::String(s)) = t.raw_get::<Value>("err") {
        return Some(Reply::Error(s.to_string_lossy().into()));
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        return Some(Reply::Simple(s.to_string_lossy().into()));
    }
    if let Ok(d) = t.raw_get::<Value>("double") {
        match d {
            Value::Number(n) => return Some(Reply::Double(n)),
            Value::Integer(i) => return Some(Reply::Double(i as f64)),
            _ => {}
        }
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        return Some(Reply::Bulk(bytes::Bytes::copy_from_slice(&s.as_bytes())));
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let mut pairs = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            pairs.push((lua_to_reply(&k, depth - 1)?, lua_to_reply(&v, depth - 1)?));
        }
        return Some(Reply::Map(pairs));
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let items = s
            .pairs::<Value, Value>()
            .flatten()
            .map(|(k, _)| lua_to_reply(&k, depth - 1))
            .collect::<Option<Vec<_>>>()?;
        return Some(Reply::Set(items));
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let Ok(Value::String(s)) = v.raw_get::<Value>("string") {
            return Some(Reply::Bulk(bytes::Bytes::copy_from_slice(&s.as_bytes())));
        }
    }
    // An array: elements 1, 2, ... up to the first nil.
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(lua_to_reply(&v, depth - 1)?),
        }
    }
    Some(Reply::Array(items))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts_get_a_code() {
        assert_eq!(error_text("noprefix"), "ERR noprefix");
        assert_eq!(error_text("-E2 x"), "E2 x");
        assert_eq!(error_text("-DASH2"), "ERR DASH2");
        assert_eq!(
            error_text("WRONGTYPE Operation against a key"),
            "WRONGTYPE Operation against a key"
        );
        assert_eq!(error_text("lower case"), "lower case");
    }

    #[test]
    fn numbers_truncate_as_redis_does() {
        assert_eq!(number_to_int(3.99), 3);
        assert_eq!(number_to_int(-3.99), -3);
        assert_eq!(number_to_int(1e20), i64::MIN);
        assert_eq!(number_to_int(f64::NAN), i64::MIN);
    }
}
