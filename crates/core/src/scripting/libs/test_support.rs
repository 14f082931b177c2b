//! What the libraries' unit tests share: an interpreter with one library
//! and Lua helpers to print values, and the two ways of reading a result.

use mlua::Lua;

/// `h(s)`: hex of a string, `u(x)`: the string of a hex, `all(...)`: every
/// value (count first) in a stable text form, tables sorted by key.
const HELPERS: &str = r#"
        function h(s) return (string.gsub(s, '.', function(c) return string.format('%02x', c:byte()) end)) end
        function u(x) return (string.gsub(x, '..', function(b) return string.char(tonumber(b, 16)) end)) end
        local function d(v)
            if type(v)=='table' then
                local p={} for k,x in pairs(v) do p[#p+1]=d(k)..'='..d(x) end
                table.sort(p) return '{'..table.concat(p,',')..'}'
            elseif type(v)=='number' then return string.format('%.17g',v)
            elseif type(v)=='string' then return string.format('%q',v)
            else return tostring(v) end
        end
        function all(...) local n=select('#',...) local t={...} local o={} for i=1,n do o[i]=d(t[i]) end return n..':'..table.concat(o,' ') end
"#;

/// A plain interpreter with one library registered and the helpers.
pub fn lua_with(register: fn(&Lua) -> mlua::Result<()>) -> Lua {
    let lua = Lua::new();
    register(&lua).unwrap();
    lua.load(HELPERS).exec().unwrap();
    lua
}

pub fn eval(lua: &Lua, code: &str) -> String {
    lua.load(code).eval::<String>().unwrap()
}

/// The error a script sees when `code` fails inside `pcall`, without
/// the "user_script:1: " position that `luaL_error` prefixes.
pub fn eval_err(lua: &Lua, code: &str) -> String {
    let wrapped = format!("local ok, e = pcall(function() {code} end) assert(not ok) return e");
    let e = lua
        .load(wrapped)
        .set_name("@user_script")
        .eval::<String>()
        .unwrap();
    e.strip_prefix("user_script:1: ")
        .map(str::to_string)
        .unwrap_or(e)
}
