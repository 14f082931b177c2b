//! Helpers shared by the Redis Lua libraries: Lua-5.1-like argument
//! checking, `%.14g` number formatting and the wrapper that turns library
//! errors into plain Lua string errors (as `luaL_error` does in C).

use mlua::{ffi, Function, LightUserData, Lua, MultiValue, Value};

/// Error raised by a library function.
pub(crate) enum LibError {
    /// A message raised like `luaL_error` from a C function: a plain Lua
    /// string error prefixed with the position of the calling Lua code.
    Msg(String),
    /// A message raised without any position (errors raised by the Lua
    /// core inside a C function, such as "table index is nil").
    Raw(String),
    /// A `luaL_argerror`: the function name is resolved from the call
    /// site when the error is raised, as Lua does ('?' under `pcall`).
    Arg { narg: usize, extra: String },
    /// An error coming from mlua itself, propagated unchanged.
    Lua(mlua::Error),
}

impl From<mlua::Error> for LibError {
    fn from(e: mlua::Error) -> Self {
        LibError::Lua(e)
    }
}

pub(crate) type LibResult<T> = Result<T, LibError>;

/// Shorthand for a plain message error.
pub(crate) fn err<T>(msg: impl Into<String>) -> LibResult<T> {
    Err(LibError::Msg(msg.into()))
}

/// `luaL_argerror`. `_fname` documents the function the error is for; the
/// name in the message comes from the call site, as in Lua.
pub(crate) fn arg_error<T>(narg: usize, _fname: &str, extra: &str) -> LibResult<T> {
    Err(LibError::Arg {
        narg,
        extra: extra.to_string(),
    })
}

/// The message `luaL_argerror` builds, naming the function the way the
/// caller (level 1: the C trampoline made by [`make_fn`]) was called.
fn arg_error_message(lua: &Lua, narg: usize, extra: &str) -> String {
    let (name, what) = lua
        .inspect_stack(1, |d| {
            let n = d.names();
            (n.name.map(|s| s.into_owned()), n.name_what)
        })
        .unwrap_or((None, None));
    let name = name.unwrap_or_else(|| "?".to_string());
    let mut narg = narg as i64;
    if what == Some("method") {
        narg -= 1;
        if narg == 0 {
            return format!("calling '{name}' on bad self ({extra})");
        }
    }
    format!("bad argument #{narg} to '{name}' ({extra})")
}

/// Lua 5.1 type name of a value (`luaL_typename`).
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// Type name of argument `idx` (0-based) or "no value" when absent.
pub(crate) fn arg_type_name(args: &[Value], idx: usize) -> &'static str {
    args.get(idx).map(type_name).unwrap_or("no value")
}

/// `lua_tonumber`: numbers and numeric strings (Lua 5.1 rules).
pub(crate) fn to_number(lua: &Lua, v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(_) => lua.coerce_number(v.clone()).ok().flatten(),
        _ => None,
    }
}

/// `luaL_checknumber` for argument `idx` (0-based).
pub(crate) fn check_number(lua: &Lua, args: &[Value], idx: usize, fname: &str) -> LibResult<f64> {
    match args.get(idx).and_then(|v| to_number(lua, v)) {
        Some(n) => Ok(n),
        None => arg_error(
            idx + 1,
            fname,
            &format!("number expected, got {}", arg_type_name(args, idx)),
        ),
    }
}

/// `luaL_checkinteger`: a number truncated towards zero (as Lua 5.1 does on
/// x86-64), saturating instead of being undefined for huge values.
pub(crate) fn check_integer(lua: &Lua, args: &[Value], idx: usize, fname: &str) -> LibResult<i64> {
    check_number(lua, args, idx, fname).map(f64_to_i64)
}

/// `luaL_optinteger`.
pub(crate) fn opt_integer(
    lua: &Lua,
    args: &[Value],
    idx: usize,
    fname: &str,
    default: i64,
) -> LibResult<i64> {
    match args.get(idx) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, args, idx, fname),
    }
}

/// 2^63 as a double.
pub(crate) const TWO_63: f64 = (1u64 << 63) as f64;

/// `(int64_t)d` with the x86-64 result for out-of-range values
/// (`0x8000000000000000`).
pub(crate) fn f64_to_i64(d: f64) -> i64 {
    if (-TWO_63..TWO_63).contains(&d) {
        d as i64
    } else {
        i64::MIN
    }
}

/// `luaL_checklstring`: strings and numbers (converted as Lua does).
pub(crate) fn check_bytes(
    lua: &Lua,
    args: &[Value],
    idx: usize,
    fname: &str,
) -> LibResult<Vec<u8>> {
    match args.get(idx) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(v @ (Value::Integer(_) | Value::Number(_))) => match lua.coerce_string(v.clone())? {
            Some(s) => Ok(s.as_bytes().to_vec()),
            None => arg_error(idx + 1, fname, "string expected, got number"),
        },
        _ => arg_error(
            idx + 1,
            fname,
            &format!("string expected, got {}", arg_type_name(args, idx)),
        ),
    }
}

/// C's `printf("%.{prec}g", v)` (glibc output, round-half-even on the exact
/// binary value).
pub(crate) fn fmt_g(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let p = prec.max(1);
    let e_repr = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = e_repr.split_once('e').unwrap_or((&e_repr, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    if x < -4 || x >= p as i32 {
        let m = strip_zeros(mantissa);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", x.unsigned_abs())
    } else {
        let decimals = (p as i32 - 1 - x).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, v)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Most `arguments + results` a library function can have: Lua 5.1 gives
/// a C function 8000 stack slots (`LUAI_MAXCSTACK`), and mlua needs about
/// 20 of them to move the results of a Rust callback (measured). The C
/// libraries can return up to `8000 - arguments` values.
pub(crate) const RESULT_SLOTS: usize = 7977;

static ERROR_MARK: u8 = 0;

fn error_mark_ptr() -> *mut std::ffi::c_void {
    &ERROR_MARK as *const u8 as *mut std::ffi::c_void
}

/// First result of a raw library function that failed; it is followed by
/// the message and whether to prefix it with the caller's position.
fn error_mark() -> Value {
    Value::LightUserData(LightUserData(error_mark_ptr()))
}

/// The results telling the trampoline to raise `msg`.
fn raise(lua: &Lua, msg: &str, with_position: bool) -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_iter([
        error_mark(),
        Value::String(lua.create_string(msg)?),
        Value::Boolean(with_position),
    ]))
}

/// C function wrapping a raw library function (its upvalue 1). It calls
/// it with its own arguments and returns its results, except when the
/// first result is the error mark: then it raises the message as a plain
/// Lua string, prefixed (when asked) with `luaL_where(L, 1)` exactly like
/// `luaL_error` in the C libraries. Being a C function, it behaves like the
/// C libraries for tail calls, `pcall` and debug information.
///
/// Errors raised here or by the raw function unwind with `longjmp`; this
/// frame holds nothing that needs dropping.
unsafe extern "C-unwind" fn trampoline(state: *mut ffi::lua_State) -> std::ffi::c_int {
    // SAFETY: plain Lua C API use on the state Lua called us with; the
    // stack has room for the one extra value pushed (LUA_MINSTACK).
    unsafe {
        let nargs = ffi::lua_gettop(state);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, nargs, ffi::LUA_MULTRET);
        let nres = ffi::lua_gettop(state);
        if nres == 3
            && ffi::lua_type(state, 1) == ffi::LUA_TLIGHTUSERDATA
            && ffi::lua_touserdata(state, 1) == error_mark_ptr()
        {
            let with_position = ffi::lua_toboolean(state, 3) != 0;
            ffi::lua_settop(state, 2);
            if with_position {
                ffi::luaL_where(state, 1);
                ffi::lua_insert(state, 2);
                ffi::lua_concat(state, 2);
            }
            ffi::lua_error(state);
        }
        nres
    }
}

/// Creates a Lua function from `f`. [`LibError::Msg`] and
/// [`LibError::Arg`] errors are raised as `luaL_error` would,
/// [`LibError::Raw`] as a bare message; mlua errors propagate unchanged.
pub(crate) fn make_fn<F>(lua: &Lua, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, Vec<Value>) -> LibResult<Vec<Value>> + Send + 'static,
{
    let raw = lua.create_function(move |lua, args: MultiValue| {
        let args: Vec<Value> = args.into_iter().collect();
        let nargs = args.len();
        match f(lua, args) {
            // Fail with a Lua-like message instead of mlua's StackError.
            Ok(vals) if nargs + vals.len() > RESULT_SLOTS => {
                raise(lua, "stack overflow (too many results)", true)
            }
            Ok(vals) => Ok(MultiValue::from_iter(vals)),
            Err(LibError::Msg(m)) => raise(lua, &m, true),
            Err(LibError::Raw(m)) => raise(lua, &m, false),
            Err(LibError::Arg { narg, extra }) => {
                raise(lua, &arg_error_message(lua, narg, &extra), true)
            }
            Err(LibError::Lua(e)) => Err(e),
        }
    })?;
    // SAFETY: the closure pops the function exec_raw pushed and pushes one
    // C closure; `trampoline` only uses the Lua C API.
    unsafe {
        lua.exec_raw(raw, |state| {
            ffi::lua_pushcclosure(state, trampoline, 1);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::fmt_g;

    #[test]
    fn fmt_g_matches_printf() {
        assert_eq!(fmt_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(fmt_g(1e14, 14), "1e+14");
        assert_eq!(fmt_g(12345678901234.0, 14), "12345678901234");
        assert_eq!(fmt_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(fmt_g(1e-7, 14), "1e-07");
        assert_eq!(fmt_g(-0.0, 14), "-0");
        assert_eq!(fmt_g(0.1, 14), "0.1");
        assert_eq!(fmt_g(5e-324, 14), "4.9406564584125e-324");
        assert_eq!(fmt_g(1.7976931348623157e308, 14), "1.7976931348623e+308");
        assert_eq!(fmt_g(0.25, 1), "0.2");
        assert_eq!(fmt_g(15.0, 1), "2e+01");
        assert_eq!(fmt_g(1234.5, 3), "1.23e+03");
        assert_eq!(fmt_g(0.0001234, 3), "0.000123");
        assert_eq!(fmt_g(100.0, 3), "100");
        assert_eq!(fmt_g(1e-5, 3), "1e-05");
    }
}
