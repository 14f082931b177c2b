//! `cjson`: lua_cjson 2.1.0 as loaded by Redis 7.0.
//!
//! * `encode(v)`: tables whose keys are all positive integers become JSON
//!   arrays (holes are `null`; "excessively sparse" arrays error unless
//!   `encode_sparse_array(true)`), other non-empty tables objects, empty
//!   tables `{}`; numbers use `%.14g`; `cjson.null` (a NULL lightuserdata)
//!   encodes as `null`; `/` is escaped as `\/`.
//! * `decode(s)`: JSON `null` becomes `cjson.null`; numbers are parsed
//!   with `strtod` rules (so `0x10`, `inf`, `nan`, `+1` are accepted while
//!   `decode_invalid_numbers` is on, the default); error messages and
//!   positions match lua_cjson.
//! * The configuration functions (`encode_sparse_array`, `encode_max_depth`,
//!   `decode_max_depth`, `encode_number_precision`, `encode_keep_buffer`,
//!   `encode_invalid_numbers`, `decode_invalid_numbers`) and `new()`.
//!
//! Encoding and decoding are iterative, so nesting never grows the Rust
//! stack.

use std::sync::{Arc, Mutex, MutexGuard};

use mlua::{LightUserData, Lua, Table, Value};

use super::util::{
    arg_error, arg_type_name, check_bytes, check_integer, err, fmt_g, make_fn, type_name, LibError,
    LibResult,
};

/// Nesting lua_cjson reaches before its Lua C stack (8000 slots) runs out,
/// whatever the configured maximum depth.
const HARD_ENCODE_DEPTH: i64 = 7997;
const HARD_DECODE_DEPTH: i64 = 7998;

#[derive(Clone)]
struct Config {
    encode_sparse_convert: bool,
    encode_sparse_ratio: i32,
    encode_sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    encode_number_precision: i32,
    encode_keep_buffer: bool,
    /// 0 = off, 1 = on, 2 = null.
    encode_invalid_numbers: usize,
    decode_invalid_numbers: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            encode_sparse_convert: false,
            encode_sparse_ratio: 2,
            encode_sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_number_precision: 14,
            encode_keep_buffer: true,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: true,
        }
    }
}

type Shared = Arc<Mutex<Config>>;

fn lock(cfg: &Shared) -> MutexGuard<'_, Config> {
    cfg.lock().unwrap_or_else(|e| e.into_inner())
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

// ---------------------------------------------------------------- encoding

fn exception<T>(v: &Value, reason: &str) -> LibResult<T> {
    err(format!("Cannot serialise {}: {reason}", type_name(v)))
}

fn append_number(out: &mut Vec<u8>, cfg: &Config, v: &Value, n: f64) -> LibResult<()> {
    if n.is_nan() || n.is_infinite() {
        match cfg.encode_invalid_numbers {
            0 => return exception(v, "must not be NaN or Inf"),
            1 if n.is_nan() => {
                out.extend_from_slice(b"nan");
                return Ok(());
            }
            1 => {}
            _ => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
        }
    }
    out.extend_from_slice(fmt_g(n, cfg.encode_number_precision as usize).as_bytes());
    Ok(())
}

fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 15) as usize]);
            }
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// `(int)d` as compiled on x86-64 (out of range gives `INT_MIN`).
fn f64_to_i32(d: f64) -> i32 {
    if d > -2_147_483_649.0 && d < 2_147_483_648.0 {
        d as i32
    } else {
        i32::MIN
    }
}

/// `lua_array_length`: the array length, or `None` for an object.
fn array_length(cfg: &Config, t: &Table) -> LibResult<Option<usize>> {
    let (mut max, mut items) = (0i32, 0i32);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        match as_number(&k) {
            Some(k) if k != 0.0 && k.floor() == k && k >= 1.0 => {
                if k > max as f64 {
                    max = f64_to_i32(k);
                }
                items = items.wrapping_add(1);
            }
            _ => return Ok(None),
        }
    }
    if cfg.encode_sparse_ratio > 0
        && max > items.wrapping_mul(cfg.encode_sparse_ratio)
        && max > cfg.encode_sparse_safe
    {
        if !cfg.encode_sparse_convert {
            return exception(&Value::Table(t.clone()), "excessively sparse array");
        }
        return Ok(None);
    }
    Ok(if max > 0 { Some(max as usize) } else { None })
}

enum Frame {
    Array {
        table: Table,
        len: usize,
        next: usize,
    },
    Object {
        entries: Vec<(Value, Value)>,
        next: usize,
    },
}

fn encode_value(cfg: &Config, value: Value) -> LibResult<Vec<u8>> {
    let mut out = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut pending = Some(value);
    loop {
        if let Some(v) = pending.take() {
            match &v {
                Value::String(s) => append_string(&mut out, &s.as_bytes()),
                Value::Integer(_) | Value::Number(_) => {
                    append_number(&mut out, cfg, &v, as_number(&v).unwrap_or(0.0))?
                }
                Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
                Value::Nil => out.extend_from_slice(b"null"),
                Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
                Value::Table(t) => {
                    let depth = stack.len() as i64 + 1;
                    if depth > cfg.encode_max_depth as i64 || depth > HARD_ENCODE_DEPTH {
                        return err(format!("Cannot serialise, excessive nesting ({depth})"));
                    }
                    match array_length(cfg, t)? {
                        Some(len) => {
                            out.push(b'[');
                            stack.push(Frame::Array {
                                table: t.clone(),
                                len,
                                next: 1,
                            });
                        }
                        None => {
                            out.push(b'{');
                            let mut entries = Vec::new();
                            for pair in t.pairs::<Value, Value>() {
                                entries.push(pair?);
                            }
                            stack.push(Frame::Object { entries, next: 0 });
                        }
                    }
                }
                _ => return exception(&v, "type not supported"),
            }
        }
        let Some(top) = stack.last_mut() else {
            return Ok(out);
        };
        match top {
            Frame::Array { table, len, next } => {
                if *next <= *len {
                    if *next > 1 {
                        out.push(b',');
                    }
                    pending = Some(table.raw_get(*next)?);
                    *next += 1;
                } else {
                    out.push(b']');
                    stack.pop();
                }
            }
            Frame::Object { entries, next } => {
                if let Some((k, v)) = entries.get_mut(*next) {
                    if *next > 0 {
                        out.push(b',');
                    }
                    match &*k {
                        Value::Integer(_) | Value::Number(_) => {
                            out.push(b'"');
                            append_number(&mut out, cfg, k, as_number(k).unwrap_or(0.0))?;
                            out.extend_from_slice(b"\":");
                        }
                        Value::String(s) => {
                            append_string(&mut out, &s.as_bytes());
                            out.push(b':');
                        }
                        _ => return exception(k, "table key must be a number or string"),
                    }
                    pending = Some(std::mem::replace(v, Value::Nil));
                    *next += 1;
                } else {
                    out.push(b'}');
                    stack.pop();
                }
            }
        }
    }
}

fn encode(lua: &Lua, cfg: &Shared, args: Vec<Value>) -> LibResult<Vec<Value>> {
    if args.len() != 1 {
        return arg_error(1, "encode", "expected 1 argument");
    }
    let cfg = lock(cfg).clone();
    let out = encode_value(&cfg, args.into_iter().next().unwrap_or(Value::Nil))?;
    Ok(vec![Value::String(lua.create_string(out)?)])
}

// ---------------------------------------------------------------- decoding

#[derive(Clone, Copy, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    String,
    Number,
    Boolean,
    Null,
    Colon,
    Comma,
    End,
    Error,
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::String => "T_STRING",
            Tok::Number => "T_NUMBER",
            Tok::Boolean => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error => "T_ERROR",
        }
    }
}

struct Token {
    kind: Tok,
    /// 0-based position used in error messages.
    index: usize,
    number: f64,
    boolean: bool,
    /// Error description for `Tok::Error`.
    error: &'static str,
}

struct Parser<'a> {
    data: &'a [u8],
    ptr: usize,
    invalid_numbers: bool,
    /// Decoded string of the last string token.
    tmp: Vec<u8>,
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn starts_with_ci(s: &[u8], p: usize, pat: &[u8]) -> bool {
    s.len() >= p + pat.len() && s[p..p + pat.len()].eq_ignore_ascii_case(pat)
}

/// glibc `strtod` on `s[start..]`: the value and the end position, or
/// `None` when no number could be parsed.
fn strtod(s: &[u8], start: usize) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut p = start;
    let neg = match at(p) {
        b'-' => {
            p += 1;
            true
        }
        b'+' => {
            p += 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if neg { -v } else { v };
    if starts_with_ci(s, p, b"inf") {
        p += 3;
        if starts_with_ci(s, p, b"inity") {
            p += 5;
        }
        return Some((sign(f64::INFINITY), p));
    }
    if starts_with_ci(s, p, b"nan") {
        p += 3;
        if at(p) == b'(' {
            let mut q = p + 1;
            while at(q).is_ascii_alphanumeric() || at(q) == b'_' {
                q += 1;
            }
            if at(q) == b')' {
                p = q + 1;
            }
        }
        return Some((sign(f64::NAN), p));
    }
    if at(p) == b'0' && (at(p + 1) | 0x20) == b'x' {
        let q = p + 2;
        if is_hex(at(q)) || (at(q) == b'.' && is_hex(at(q + 1))) {
            return Some(hex_float(s, q, neg));
        }
        // Just "0": the 'x' is not part of the number.
        return Some((sign(0.0), p + 1));
    }
    let mant_start = p;
    let mut digits = 0;
    while at(p).is_ascii_digit() {
        p += 1;
        digits += 1;
    }
    if at(p) == b'.' {
        p += 1;
        while at(p).is_ascii_digit() {
            p += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    let mant_end = p;
    let mut exp_part = "";
    if at(p) | 0x20 == b'e' {
        let mut q = p + 1;
        if at(q) == b'+' || at(q) == b'-' {
            q += 1;
        }
        if at(q).is_ascii_digit() {
            while at(q).is_ascii_digit() {
                q += 1;
            }
            exp_part = std::str::from_utf8(&s[p..q]).unwrap_or("");
            p = q;
        }
    }
    let mant = std::str::from_utf8(&s[mant_start..mant_end]).unwrap_or("0");
    let mut text = String::with_capacity(mant.len() + exp_part.len() + 2);
    if mant.starts_with('.') {
        text.push('0');
    }
    text.push_str(mant);
    if mant.ends_with('.') {
        text.push('0');
    }
    text.push_str(exp_part);
    let v: f64 = text.parse().unwrap_or(0.0);
    Some((sign(v), p))
}

/// Hexadecimal `strtod` body after "0x".
fn hex_float(s: &[u8], mut p: usize, neg: bool) -> (f64, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut v = 0.0f64;
    let mut exp: i64 = 0;
    while is_hex(at(p)) {
        v = v * 16.0 + (at(p) as char).to_digit(16).unwrap_or(0) as f64;
        p += 1;
    }
    if at(p) == b'.' {
        p += 1;
        while is_hex(at(p)) {
            v = v * 16.0 + (at(p) as char).to_digit(16).unwrap_or(0) as f64;
            exp -= 4;
            p += 1;
        }
    }
    if at(p) | 0x20 == b'p' {
        let mut q = p + 1;
        let eneg = match at(q) {
            b'-' => {
                q += 1;
                true
            }
            b'+' => {
                q += 1;
                false
            }
            _ => false,
        };
        if at(q).is_ascii_digit() {
            let mut e: i64 = 0;
            while at(q).is_ascii_digit() {
                e = (e * 10 + (at(q) - b'0') as i64).min(1_000_000);
                q += 1;
            }
            exp += if eneg { -e } else { e };
            p = q;
        }
    }
    let v = v * 2f64.powi(exp.clamp(-2000, 2000) as i32);
    (if neg { -v } else { v }, p)
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn token(&self, kind: Tok, index: usize) -> Token {
        Token {
            kind,
            index,
            number: 0.0,
            boolean: false,
            error: "",
        }
    }

    fn error_token(&self, error: &'static str) -> Token {
        Token {
            kind: Tok::Error,
            index: self.ptr,
            number: 0.0,
            boolean: false,
            error,
        }
    }

    /// `json_is_invalid_number`.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.ptr;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        if self.at(p) == b'0' {
            let ch2 = self.at(p + 1);
            return (ch2 | 0x20) == b'x' || ch2.is_ascii_digit();
        } else if self.at(p) <= b'9' {
            return false;
        }
        starts_with_ci(self.data, p, b"inf") || starts_with_ci(self.data, p, b"nan")
    }

    fn number_token(&mut self) -> Token {
        match strtod(self.data, self.ptr) {
            Some((n, end)) if end > self.ptr => {
                let mut t = self.token(Tok::Number, self.ptr);
                t.number = n;
                self.ptr = end;
                t
            }
            _ => self.error_token("invalid number"),
        }
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.ptr), b' ' | b'\t' | b'\n' | b'\r') {
            self.ptr += 1;
        }
        let index = self.ptr;
        let ch = self.at(self.ptr);
        let single = match ch {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b':' => Some(Tok::Colon),
            b',' => Some(Tok::Comma),
            _ => None,
        };
        if let Some(kind) = single {
            self.ptr += 1;
            return self.token(kind, index);
        }
        if ch == 0 {
            return self.token(Tok::End, index);
        }
        if !matches!(
            ch,
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-' | b'0'..=b'9'
        ) {
            let mut t = self.error_token("invalid token");
            t.index = index;
            return t;
        }
        if ch == b'"' {
            return self.string_token(index);
        }
        if ch == b'-' || ch.is_ascii_digit() {
            if !self.invalid_numbers && self.is_invalid_number() {
                return self.error_token("invalid number");
            }
            return self.number_token();
        }
        let rest = &self.data[self.ptr.min(self.data.len())..];
        if rest.starts_with(b"true") {
            self.ptr += 4;
            let mut t = self.token(Tok::Boolean, index);
            t.boolean = true;
            return t;
        }
        if rest.starts_with(b"false") {
            self.ptr += 5;
            return self.token(Tok::Boolean, index);
        }
        if rest.starts_with(b"null") {
            self.ptr += 4;
            return self.token(Tok::Null, index);
        }
        if self.invalid_numbers && self.is_invalid_number() {
            return self.number_token();
        }
        self.error_token("invalid token")
    }

    fn hex4(&self, p: usize) -> Option<u32> {
        let mut v = 0u32;
        for i in 0..4 {
            v = v * 16 + (self.at(p + i) as char).to_digit(16)?;
        }
        Some(v)
    }

    /// `json_append_unicode_escape`, with `ptr` on the backslash.
    fn unicode_escape(&mut self) -> bool {
        let Some(mut cp) = self.hex4(self.ptr + 2) else {
            return false;
        };
        let mut escape_len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.at(self.ptr + 6) != b'\\' || self.at(self.ptr + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.ptr + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            escape_len = 12;
        }
        let mut buf = [0u8; 4];
        // Every value here is a valid scalar value (no lone surrogates).
        let Some(c) = char::from_u32(cp) else {
            return false;
        };
        self.tmp
            .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        self.ptr += escape_len;
        true
    }

    fn string_token(&mut self, index: usize) -> Token {
        self.ptr += 1;
        self.tmp.clear();
        loop {
            let ch = self.at(self.ptr);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return self.error_token("unexpected end of string");
            }
            let mut out = ch;
            if ch == b'\\' {
                out = match self.at(self.ptr + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => {
                        if self.unicode_escape() {
                            continue;
                        }
                        return self.error_token("invalid unicode escape code");
                    }
                    _ => return self.error_token("invalid escape code"),
                };
                self.ptr += 1;
            }
            self.tmp.push(out);
            self.ptr += 1;
        }
        self.ptr += 1;
        self.token(Tok::String, index)
    }
}

fn parse_error<T>(expected: &str, t: &Token) -> LibResult<T> {
    let found = if t.kind == Tok::Error {
        t.error
    } else {
        t.kind.name()
    };
    err(format!(
        "Expected {expected} but found {found} at character {}",
        t.index + 1
    ))
}

enum Container {
    Array(Table, usize),
    Object(Table),
}

fn decode_value(lua: &Lua, cfg: &Config, data: &[u8]) -> LibResult<Value> {
    let mut p = Parser {
        data,
        ptr: 0,
        invalid_numbers: cfg.decode_invalid_numbers,
        tmp: Vec::new(),
    };
    let mut stack: Vec<Container> = Vec::new();
    let mut pending_key: Vec<Option<mlua::LuaString>> = Vec::new();
    let max_depth = (cfg.decode_max_depth as i64).min(HARD_DECODE_DEPTH);
    let mut tok = p.next_token();
    loop {
        // Parse one value starting at `tok`.
        let value = match tok.kind {
            Tok::String => Value::String(lua.create_string(&p.tmp)?),
            Tok::Number => Value::Number(tok.number),
            Tok::Boolean => Value::Boolean(tok.boolean),
            Tok::Null => null(),
            Tok::ObjBegin | Tok::ArrBegin => {
                let depth = stack.len() as i64 + 1;
                if depth > max_depth {
                    return err(format!(
                        "Found too many nested data structures ({depth}) at character {}",
                        p.ptr
                    ));
                }
                let table = lua.create_table()?;
                let is_obj = tok.kind == Tok::ObjBegin;
                tok = p.next_token();
                let close = if is_obj { Tok::ObjEnd } else { Tok::ArrEnd };
                if tok.kind == close {
                    Value::Table(table)
                } else if is_obj {
                    stack.push(Container::Object(table));
                    // Expect `"key" :` then a value.
                    if tok.kind != Tok::String {
                        return parse_error("object key string", &tok);
                    }
                    pending_key.push(Some(lua.create_string(&p.tmp)?));
                    tok = p.next_token();
                    if tok.kind != Tok::Colon {
                        return parse_error("colon", &tok);
                    }
                    tok = p.next_token();
                    continue;
                } else {
                    stack.push(Container::Array(table, 1));
                    pending_key.push(None);
                    continue;
                }
            }
            _ => return parse_error("value", &tok),
        };
        // Store the value into its container(s).
        let mut value = value;
        loop {
            let Some(top) = stack.last_mut() else {
                let end = p.next_token();
                if end.kind != Tok::End {
                    return parse_error("the end", &end);
                }
                return Ok(value);
            };
            match top {
                Container::Array(t, i) => {
                    t.raw_set(*i, value)?;
                    *i += 1;
                    tok = p.next_token();
                    if tok.kind == Tok::ArrEnd {
                        let Some(Container::Array(t, _)) = stack.pop() else {
                            unreachable!()
                        };
                        pending_key.pop();
                        value = Value::Table(t);
                        continue;
                    }
                    if tok.kind != Tok::Comma {
                        return parse_error("comma or array end", &tok);
                    }
                    tok = p.next_token();
                    break;
                }
                Container::Object(t) => {
                    let key = pending_key.last_mut().and_then(Option::take);
                    if let Some(k) = key {
                        t.raw_set(k, value)?;
                    }
                    tok = p.next_token();
                    if tok.kind == Tok::ObjEnd {
                        let Some(Container::Object(t)) = stack.pop() else {
                            unreachable!()
                        };
                        pending_key.pop();
                        value = Value::Table(t);
                        continue;
                    }
                    if tok.kind != Tok::Comma {
                        return parse_error("comma or object end", &tok);
                    }
                    tok = p.next_token();
                    if tok.kind != Tok::String {
                        return parse_error("object key string", &tok);
                    }
                    if let Some(slot) = pending_key.last_mut() {
                        *slot = Some(lua.create_string(&p.tmp)?);
                    }
                    tok = p.next_token();
                    if tok.kind != Tok::Colon {
                        return parse_error("colon", &tok);
                    }
                    tok = p.next_token();
                    break;
                }
            }
        }
    }
}

fn decode(lua: &Lua, cfg: &Shared, args: Vec<Value>) -> LibResult<Vec<Value>> {
    if args.len() != 1 {
        return arg_error(1, "decode", "expected 1 argument");
    }
    let data = check_bytes(lua, &args, 0, "decode")?;
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return err("JSON parser does not support UTF-16 or UTF-32");
    }
    let cfg = lock(cfg).clone();
    Ok(vec![decode_value(lua, &cfg, &data)?])
}

// ----------------------------------------------------------- configuration

fn verify_arg_count(args: &[Value], n: usize, fname: &str) -> LibResult<()> {
    if args.len() > n {
        return arg_error(n + 1, fname, "found too many arguments");
    }
    Ok(())
}

fn is_nil(args: &[Value], idx: usize) -> bool {
    matches!(args.get(idx), None | Some(Value::Nil))
}

/// `json_integer_option`: reads and validates an optional integer argument.
fn integer_option(
    lua: &Lua,
    args: &[Value],
    idx: usize,
    fname: &str,
    setting: &mut i32,
    min: i32,
    max: i32,
) -> LibResult<Value> {
    if !is_nil(args, idx) {
        let v = check_integer(lua, args, idx, fname)?;
        if v < min as i64 || v > max as i64 {
            return arg_error(
                1,
                fname,
                &format!("expected integer between {min} and {max}"),
            );
        }
        *setting = v as i32;
    }
    Ok(Value::Number(*setting as f64))
}

/// `json_enum_option`: booleans or one of `options`.
fn enum_option(
    lua: &Lua,
    args: &[Value],
    idx: usize,
    fname: &str,
    setting: &mut usize,
    options: &[&str],
) -> LibResult<Value> {
    match args.get(idx) {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) => *setting = usize::from(*b),
        Some(_) => {
            let s = match check_bytes(lua, args, idx, fname) {
                Ok(s) => s,
                Err(LibError::Msg(_) | LibError::Arg { .. }) => {
                    return arg_error(
                        idx + 1,
                        fname,
                        &format!("string expected, got {}", arg_type_name(args, idx)),
                    )
                }
                Err(e) => return Err(e),
            };
            match options.iter().position(|o| o.as_bytes() == s.as_slice()) {
                Some(i) => *setting = i,
                None => {
                    return arg_error(
                        idx + 1,
                        fname,
                        &format!("invalid option '{}'", String::from_utf8_lossy(&s)),
                    )
                }
            }
        }
    }
    Ok(if *setting <= 1 {
        Value::Boolean(*setting == 1)
    } else {
        Value::String(lua.create_string(options[*setting])?)
    })
}

const BOOL_OPTIONS: &[&str] = &["off", "on"];

fn bool_option(
    lua: &Lua,
    args: &[Value],
    fname: &str,
    setting: &mut bool,
) -> LibResult<Vec<Value>> {
    verify_arg_count(args, 1, fname)?;
    let mut v = usize::from(*setting);
    let r = enum_option(lua, args, 0, fname, &mut v, BOOL_OPTIONS);
    *setting = v == 1;
    Ok(vec![r?])
}

fn config_fn(lua: &Lua, name: &str, cfg: &Shared, args: &[Value]) -> LibResult<Vec<Value>> {
    let mut c = lock(cfg);
    let c = &mut *c;
    match name {
        "encode_sparse_array" => {
            verify_arg_count(args, 3, name)?;
            let mut convert = usize::from(c.encode_sparse_convert);
            let r = enum_option(lua, args, 0, name, &mut convert, BOOL_OPTIONS);
            c.encode_sparse_convert = convert == 1;
            let a = r?;
            let b = integer_option(lua, args, 1, name, &mut c.encode_sparse_ratio, 0, i32::MAX)?;
            let d = integer_option(lua, args, 2, name, &mut c.encode_sparse_safe, 0, i32::MAX)?;
            Ok(vec![a, b, d])
        }
        "encode_max_depth" => {
            verify_arg_count(args, 1, name)?;
            Ok(vec![integer_option(
                lua,
                args,
                0,
                name,
                &mut c.encode_max_depth,
                1,
                i32::MAX,
            )?])
        }
        "decode_max_depth" => {
            verify_arg_count(args, 1, name)?;
            Ok(vec![integer_option(
                lua,
                args,
                0,
                name,
                &mut c.decode_max_depth,
                1,
                i32::MAX,
            )?])
        }
        "encode_number_precision" => {
            verify_arg_count(args, 1, name)?;
            Ok(vec![integer_option(
                lua,
                args,
                0,
                name,
                &mut c.encode_number_precision,
                1,
                14,
            )?])
        }
        "encode_keep_buffer" => bool_option(lua, args, name, &mut c.encode_keep_buffer),
        "encode_invalid_numbers" => {
            verify_arg_count(args, 1, name)?;
            Ok(vec![enum_option(
                lua,
                args,
                0,
                name,
                &mut c.encode_invalid_numbers,
                &["off", "on", "null"],
            )?])
        }
        "decode_invalid_numbers" => bool_option(lua, args, name, &mut c.decode_invalid_numbers),
        _ => err(format!("unknown cjson option {name}")),
    }
}

const CONFIG_FNS: [&str; 7] = [
    "encode_sparse_array",
    "encode_max_depth",
    "decode_max_depth",
    "encode_number_precision",
    "encode_keep_buffer",
    "encode_invalid_numbers",
    "decode_invalid_numbers",
];

/// Builds a `cjson` module table with its own configuration.
fn new_module(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Shared = Arc::new(Mutex::new(Config::default()));
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        make_fn(lua, move |lua, args| encode(lua, &c, args))?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        make_fn(lua, move |lua, args| decode(lua, &c, args))?,
    )?;
    for name in CONFIG_FNS {
        let c = cfg.clone();
        t.raw_set(
            name,
            make_fn(lua, move |lua, args| config_fn(lua, name, &c, &args))?,
        )?;
    }
    t.raw_set(
        "new",
        make_fn(lua, |lua, _args| Ok(vec![Value::Table(new_module(lua)?)]))?,
    )?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

/// Creates the global `cjson` table.
pub fn register(lua: &mlua::Lua) -> mlua::Result<()> {
    let t = new_module(lua)?;
    lua.globals().raw_set("cjson", t)?;
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
    fn encode() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("{1,2,{a=1}}", r#"[1,2,{"a":1}]"#),
            ("{}", "{}"),
            ("{[1]=1,[2]=2,[4]=4}", "[1,2,null,4]"),
            ("{[1]=1,[10]=2}", "[1,null,null,null,null,null,null,null,null,2]"),
            ("{[1]=1,x=2}", r#"{"1":1,"x":2}"#),
            ("{[0]=1}", r#"{"0":1}"#),
            ("{[1.5]=1}", r#"{"1.5":1}"#),
            ("{[-1]=1}", r#"{"-1":1}"#),
            ("{[2]=1}", "[null,1]"),
            ("{[2^40]=1}", r#"{"1099511627776":1}"#),
            ("{[2^31]=1}", r#"{"2147483648":1}"#),
            ("1/3", "0.33333333333333"),
            ("100000000000000", "1e+14"),
            ("-0", "-0"),
            ("{0.1, 123456789012345678, -5, 1e-7, 123456789012345, 0.25, 1e21, 5e-324}",
             "[0.1,1.2345678901235e+17,-5,1e-07,1.2345678901234e+14,0.25,1e+21,4.9406564584125e-324]"),
            ("'a/b\"c\\\\d\\n\\r\\t\\b\\f\\1\\31\\127'",
             "\"a\\/b\\\"c\\\\d\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f\""),
            ("cjson.null", "null"),
            ("nil", "null"),
            ("true", "true"),
            ("{1,2,nil,4}", "[1,2,null,4]"),
            ("{a={}, b={1}}", r#"{"a":{},"b":[1]}"#),
            ("{[1]=1,[2]=cjson.null,[4]=4}", "[1,null,null,4]"),
            ("setmetatable({}, {__index=function() return 1 end})", "{}"),
            // Same key order as Redis: both iterate Lua 5.1 tables.
            ("{a=1,b=2,c=3,d={x=1,y=2},hello='world',[5]=1}",
             r#"{"a":1,"c":3,"b":2,"d":{"y":2,"x":1},"5":1,"hello":"world"}"#),
        ];
        for (v, want) in cases {
            let code = format!("return cjson.encode({v})");
            assert_eq!(
                lua.load(&code)
                    .eval::<mlua::LuaString>()
                    .unwrap()
                    .as_bytes()
                    .to_vec(),
                want.as_bytes(),
                "{v}"
            );
        }
        assert_eq!(
            eval(&lua, r#"return tostring(cjson.encode('\200') == '"\200"')"#),
            "true"
        );
        assert_eq!(
            eval(&lua, "local t={} local c=t for i=1,999 do c[1]={} c=c[1] end return tostring(#cjson.encode(t))"),
            "2000"
        );
    }

    #[test]
    fn encode_errors() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            (
                "cjson.encode({[1]=1,[11]=2})",
                "Cannot serialise table: excessively sparse array",
            ),
            (
                "cjson.encode({[2^31-1]=1, [1]=2})",
                "Cannot serialise table: excessively sparse array",
            ),
            (
                "cjson.encode({[true]=1})",
                "Cannot serialise boolean: table key must be a number or string",
            ),
            (
                "cjson.encode({[{}]=1})",
                "Cannot serialise table: table key must be a number or string",
            ),
            (
                "cjson.encode(0/0)",
                "Cannot serialise number: must not be NaN or Inf",
            ),
            (
                "cjson.encode({[1/0]=1})",
                "Cannot serialise number: must not be NaN or Inf",
            ),
            (
                "cjson.encode({f=string.len})",
                "Cannot serialise function: type not supported",
            ),
            (
                "cjson.encode()",
                "bad argument #1 to 'encode' (expected 1 argument)",
            ),
            (
                "cjson.encode(1, 2)",
                "bad argument #1 to 'encode' (expected 1 argument)",
            ),
            (
                "local t={} local c=t for i=1,1000 do c[1]={} c=c[1] end cjson.encode(t)",
                "Cannot serialise, excessive nesting (1001)",
            ),
        ];
        for (code, want) in cases {
            assert_eq!(eval_err(&lua, code), *want, "{code}");
        }
        // Under pcall the error has no position and no function name.
        assert_eq!(
            eval(&lua, "return select(2, pcall(cjson.decode))"),
            "bad argument #1 to '?' (expected 1 argument)"
        );
        // A tail call from a script keeps the script's position.
        let e = lua
            .load("return cjson.decode('x')")
            .set_name("@user_script")
            .exec()
            .unwrap_err();
        let mlua::Error::RuntimeError(msg) = &e else {
            panic!("unexpected error {e:?}")
        };
        assert!(
            msg.starts_with("user_script:1: Expected value but found invalid token at character 1"),
            "{e}"
        );
    }

    #[test]
    fn options() {
        let lua = lua();
        assert_eq!(
            eval(&lua, "cjson.encode_number_precision(1) local s=cjson.encode({0.25, 0.35, 2.5, 15, 25, 0.05}) \
                        cjson.encode_number_precision(3) return s..cjson.encode({1234.5, 0.0001234, 100, 1e-5})"),
            "[0.2,0.3,2,2e+01,2e+01,0.05][1.23e+03,0.000123,100,1e-05]"
        );
        assert_eq!(
            eval(&lua, "local a = cjson.encode_invalid_numbers(true) local s=cjson.encode({1/0,-1/0,0/0}) \
                        local b=cjson.encode_invalid_numbers('null') local s2=cjson.encode({1/0,-1/0,0/0}) \
                        local c=cjson.encode_invalid_numbers(false) return s..s2..tostring(a)..b..tostring(c)"),
            "[inf,-inf,nan][null,null,null]truenullfalse"
        );
        assert_eq!(
            eval(&lua, "local a = cjson.encode_sparse_array(true) return cjson.encode({[1]=1,[20]=2})..tostring(a)"),
            r#"{"1":1,"20":2}true"#
        );
        assert_eq!(
            eval(&lua, "local a, r, s = cjson.encode_sparse_array(false, 3, 1) \
                        return cjson.encode({[1]=1,[3]=2})..tostring(a)..r..s..select(2, pcall(cjson.encode, {[1]=1,[4]=2}))"),
            "[1,null,2]false31[1,null,null,2]"
        );
        assert_eq!(
            eval(&lua, "cjson.encode_number_precision(14) local c = cjson.new() c.encode_number_precision(2) \
                        return c.encode(1/3)..cjson.encode(1/3)..tostring(c.null == cjson.null)..c._NAME..c._VERSION"),
            "0.330.33333333333333truecjson2.1.0"
        );
        let fresh = self::lua();
        assert_eq!(
            eval(&fresh, "local t = {cjson.encode_sparse_array()} local r = {} for i = 1, 3 do r[i] = tostring(t[i]) end \
                          return table.concat(r, ',')..' '..cjson.encode_max_depth()..' '..cjson.decode_max_depth()..' '..\
                          cjson.encode_number_precision()..' '..tostring(cjson.encode_keep_buffer())..' '..\
                          tostring(cjson.encode_invalid_numbers())..' '..tostring(cjson.decode_invalid_numbers())"),
            "false,2,10 1000 1000 14 true false true"
        );
        let errs: &[(&str, &str)] = &[
            (
                "cjson.encode_number_precision(15)",
                "bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)",
            ),
            (
                "cjson.encode_number_precision('x')",
                "bad argument #1 to 'encode_number_precision' (number expected, got string)",
            ),
            (
                "cjson.encode_max_depth(0)",
                "bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)",
            ),
            (
                "cjson.encode_keep_buffer('x')",
                "bad argument #1 to 'encode_keep_buffer' (invalid option 'x')",
            ),
            (
                "cjson.encode_keep_buffer({})",
                "bad argument #1 to 'encode_keep_buffer' (string expected, got table)",
            ),
            (
                "cjson.encode_max_depth(1, 2)",
                "bad argument #2 to 'encode_max_depth' (found too many arguments)",
            ),
            (
                "cjson.encode_sparse_array(true, 1, 1, 1)",
                "bad argument #4 to 'encode_sparse_array' (found too many arguments)",
            ),
        ];
        for (code, want) in errs {
            assert_eq!(eval_err(&fresh, code), *want, "{code}");
        }
    }

    #[test]
    fn decode() {
        let lua = lua();
        let show = r#"
            local function d(v)
                if type(v)=='table' then
                    local p={} for k,x in pairs(v) do p[#p+1]=d(k)..'='..d(x) end
                    table.sort(p) return '{'..table.concat(p,',')..'}'
                elseif type(v)=='number' then return string.format('%.17g',v)
                elseif type(v)=='string' then return string.format('%q',v)
                elseif v == cjson.null then return 'NULL'
                else return tostring(v) end
            end
            local ok, v = pcall(cjson.decode, ...)
            if ok then return d(v) end
            return 'ERR '..v
        "#;
        let f = lua.load(show).into_function().unwrap();
        let cases: &[(&str, &str)] = &[
            ("", "ERR Expected value but found T_END at character 1"),
            (" ", "ERR Expected value but found T_END at character 2"),
            (
                "x",
                "ERR Expected value but found invalid token at character 1",
            ),
            (
                "[1,2",
                "ERR Expected comma or array end but found T_END at character 5",
            ),
            (
                "[1,2,]",
                "ERR Expected value but found T_ARR_END at character 6",
            ),
            (
                "{\"a\":1,}",
                "ERR Expected object key string but found T_OBJ_END at character 8",
            ),
            (
                "{\"a\" 1}",
                "ERR Expected colon but found T_NUMBER at character 6",
            ),
            (
                "{1:2}",
                "ERR Expected object key string but found T_NUMBER at character 2",
            ),
            (
                "\"abc",
                "ERR Expected value but found unexpected end of string at character 5",
            ),
            (
                "\"\\q\"",
                "ERR Expected value but found invalid escape code at character 2",
            ),
            (
                "\"\\u12\"",
                "ERR Expected value but found invalid unicode escape code at character 2",
            ),
            (
                "\"\\ud800\\u0041\"",
                "ERR Expected value but found invalid unicode escape code at character 2",
            ),
            (
                "\"\\udc00\"",
                "ERR Expected value but found invalid unicode escape code at character 2",
            ),
            ("\"\\ud83d\\ude00\"", "\"\u{1F600}\""),
            (
                "\"\\u00e9\\/\\b\\f\\n\\r\\t\\\"\\\\\"",
                "\"\u{e9}/\u{8}\u{c}\\\n\\r\t\\\"\\\\\"",
            ),
            ("\"\\u0000a\"", "\"\\000a\""),
            (
                "nullx",
                "ERR Expected the end but found invalid token at character 5",
            ),
            ("[true,false,null]", "{1=true,2=false,3=NULL}"),
            (
                "1 2",
                "ERR Expected the end but found T_NUMBER at character 3",
            ),
            ("01", "1"),
            ("0x10", "16"),
            ("1.", "1"),
            (
                ".5",
                "ERR Expected value but found invalid token at character 1",
            ),
            ("+1", "1"),
            (
                "-",
                "ERR Expected value but found invalid number at character 1",
            ),
            ("-inf", "-inf"),
            ("Infinity", "inf"),
            ("1e400", "inf"),
            (
                "1e",
                "ERR Expected the end but found invalid token at character 2",
            ),
            (
                "nan1",
                "ERR Expected the end but found T_NUMBER at character 4",
            ),
            ("-0", "-0"),
            ("123456789012345678901", "1.2345678901234568e+20"),
            (
                "{\"a\":{\"b\":[]}, \"c\": [1, {\"d\": null}], \"a\": 5}",
                "{\"a\"=5,\"c\"={1=1,2={\"d\"=NULL}}}",
            ),
            (
                "\"a\0\"",
                "ERR Expected value but found unexpected end of string at character 3",
            ),
            (
                "[1\0]",
                "ERR Expected comma or array end but found T_END at character 3",
            ),
            ("1\0a", "ERR JSON parser does not support UTF-16 or UTF-32"),
        ];
        for (json, want) in cases {
            assert_eq!(f.call::<String>(*json).unwrap(), *want, "{json:?}");
        }
        let depth = |s: String| f.call::<String>(s).unwrap();
        assert_eq!(
            depth("[".repeat(2000)),
            "ERR Found too many nested data structures (1001) at character 1001"
        );
        assert_eq!(
            depth(format!("[[{{\"a\":{}", "[".repeat(2000))),
            "ERR Found too many nested data structures (1001) at character 1005"
        );
        assert!(depth(format!("{}{}", "[".repeat(1000), "]".repeat(1000))).starts_with("{1={1="));
        assert_eq!(
            eval(&lua, "cjson.decode_invalid_numbers(false) local r = {} \
                        for _, j in ipairs({'0x10','inf','01','-inf','+1','1.5'}) do \
                        r[#r+1] = tostring(select(2, pcall(cjson.decode, j))) end return table.concat(r, '|')"),
            "Expected value but found invalid number at character 1|\
             Expected value but found invalid token at character 1|\
             Expected value but found invalid number at character 1|\
             Expected value but found invalid number at character 1|\
             Expected value but found invalid token at character 1|1.5"
        );
        assert_eq!(
            eval(
                &lua,
                "return cjson.encode(cjson.decode('{\"a\":[1,2,{\"b\":null}],\"c\":\"x\"}'))"
            ),
            r#"{"a":[1,2,{"b":null}],"c":"x"}"#
        );
    }
}
