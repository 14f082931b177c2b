//! `bit`: LuaBitOp 1.0.2 as loaded by Redis. All operations work on the
//! 32-bit two's complement value of Lua numbers and return signed 32-bit
//! results.

use mlua::{Lua, Value};

use super::util::{arg_error, arg_type_name, make_fn, to_number, LibResult};

/// `barg`: normalises argument `idx` (0-based) to 32 bits the way
/// LuaBitOp does (adding 2^52+2^51 and taking the low word, which rounds
/// half to even and maps NaN/Inf to 0).
fn barg(lua: &Lua, args: &[Value], idx: usize, fname: &str) -> LibResult<u32> {
    match args.get(idx).and_then(|v| to_number(lua, v)) {
        Some(n) => Ok(tobit(n)),
        None => arg_error(
            idx + 1,
            fname,
            &format!("number expected, got {}", arg_type_name(args, idx)),
        ),
    }
}

fn tobit(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

fn ret(b: u32) -> LibResult<Vec<Value>> {
    Ok(vec![Value::Number(b as i32 as f64)])
}

type BitFn = fn(&Lua, &[Value]) -> LibResult<Vec<Value>>;

fn fold(lua: &Lua, args: &[Value], fname: &str, op: fn(u32, u32) -> u32) -> LibResult<Vec<Value>> {
    let mut b = barg(lua, args, 0, fname)?;
    // LuaBitOp checks the extra arguments from the last one down.
    for i in (1..args.len()).rev() {
        b = op(b, barg(lua, args, i, fname)?);
    }
    ret(b)
}

fn shift(lua: &Lua, args: &[Value], fname: &str, op: fn(u32, u32) -> u32) -> LibResult<Vec<Value>> {
    let b = barg(lua, args, 0, fname)?;
    let n = barg(lua, args, 1, fname)? & 31;
    ret(op(b, n))
}

fn tohex(lua: &Lua, args: &[Value]) -> LibResult<Vec<Value>> {
    let b = barg(lua, args, 0, "tohex")?;
    let mut n: i32 = match args.get(1) {
        None => 8,
        Some(_) => barg(lua, args, 1, "tohex")? as i32,
    };
    let digits: &[u8; 16] = if n < 0 {
        n = n.wrapping_neg();
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    // Compared as unsigned by the compiled C code, so -(-2^31) gives 8.
    if n as u32 > 8 {
        n = 8;
    }
    let n = n.max(0) as usize;
    let mut out = vec![0u8; n];
    let mut v = b;
    for i in (0..n).rev() {
        out[i] = digits[(v & 15) as usize];
        v >>= 4;
    }
    Ok(vec![Value::String(lua.create_string(out)?)])
}

/// Creates the global `bit` table.
pub fn register(lua: &mlua::Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    let fns: [(&str, BitFn); 12] = [
        ("tobit", |l, a| ret(barg(l, a, 0, "tobit")?)),
        ("bnot", |l, a| ret(!barg(l, a, 0, "bnot")?)),
        ("band", |l, a| fold(l, a, "band", |x, y| x & y)),
        ("bor", |l, a| fold(l, a, "bor", |x, y| x | y)),
        ("bxor", |l, a| fold(l, a, "bxor", |x, y| x ^ y)),
        ("lshift", |l, a| shift(l, a, "lshift", |b, n| b << n)),
        ("rshift", |l, a| shift(l, a, "rshift", |b, n| b >> n)),
        ("arshift", |l, a| {
            shift(l, a, "arshift", |b, n| ((b as i32) >> n) as u32)
        }),
        ("rol", |l, a| shift(l, a, "rol", |b, n| b.rotate_left(n))),
        ("ror", |l, a| shift(l, a, "ror", |b, n| b.rotate_right(n))),
        ("bswap", |l, a| ret(barg(l, a, 0, "bswap")?.swap_bytes())),
        ("tohex", tohex),
    ];
    for (name, f) in fns {
        t.raw_set(name, make_fn(lua, move |lua, args| f(lua, &args))?)?;
    }
    lua.globals().raw_set("bit", t)?;
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
    fn conversions() {
        let lua = lua();
        assert_eq!(
            eval(
                &lua,
                "return table.concat({bit.tobit(2^32+5), bit.tobit(-1), bit.tobit(2^31), \
                 bit.tobit(1.5), bit.tobit(-1.5), bit.tobit(2.5), bit.tobit(3.5), bit.tobit(2^53), \
                 bit.tobit(0/0), bit.tobit(1/0), bit.tobit('12'), bit.tobit(' 0x10 ')}, ',')"
            ),
            "5,-1,-2147483648,2,-2,2,4,0,0,0,12,16"
        );
        assert_eq!(
            eval(
                &lua,
                "return table.concat({bit.tohex(255), bit.tohex(-1), bit.tohex(255,2), \
                 bit.tohex(255,-2), bit.tohex(255,0), bit.tohex(255,9), bit.tohex(255,-9), \
                 bit.tohex(0x12345678, 3), bit.tohex(255, 100)}, ',')"
            ),
            "000000ff,ffffffff,ff,FF,,000000ff,000000FF,678,000000ff"
        );
    }

    #[test]
    fn operations() {
        let lua = lua();
        assert_eq!(
            eval(
                &lua,
                "return table.concat({bit.bnot(0), bit.band(0xff, 0x0f, 0x3), bit.bor(1,2,4), \
                 bit.bxor(1,3), bit.bor(1)}, ',')"
            ),
            "-1,3,7,2,1"
        );
        assert_eq!(
            eval(
                &lua,
                "return table.concat({bit.lshift(1, 31), bit.lshift(1, 32), bit.lshift(1,33), \
                 bit.rshift(-1, 1), bit.arshift(-256, 4), bit.rol(0x12345678, 8), \
                 bit.ror(0x12345678, 8), bit.bswap(0x12345678), bit.lshift(1,-1)}, ',')"
            ),
            "-2147483648,1,2,2147483647,-16,878082066,2014458966,2018915346,-2147483648"
        );
    }

    #[test]
    fn errors() {
        let lua = lua();
        assert_eq!(
            eval_err(&lua, "bit.band()"),
            "bad argument #1 to 'band' (number expected, got no value)"
        );
        assert_eq!(
            eval_err(&lua, "bit.tobit('x')"),
            "bad argument #1 to 'tobit' (number expected, got string)"
        );
        assert_eq!(
            eval_err(&lua, "bit.band(1, 'x')"),
            "bad argument #2 to 'band' (number expected, got string)"
        );
        assert_eq!(
            eval_err(&lua, "bit.tohex(1, 'a')"),
            "bad argument #2 to 'tohex' (number expected, got string)"
        );
        let msg: String = lua
            .load("local ok, e = pcall(bit.tobit, {}) return e")
            .eval()
            .unwrap();
        // Under pcall the function has no name, as in Lua.
        assert_eq!(msg, "bad argument #1 to '?' (number expected, got table)");
    }
}
