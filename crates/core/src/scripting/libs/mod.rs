//! The libraries Redis 7.0 loads into its Lua interpreter besides Lua's
//! own (`string`, `table`, `math`): `cjson`, `cmsgpack`, `bit` and
//! `struct`, with the behaviour of the C libraries Redis embeds.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;
#[cfg(test)]
mod test_support;
mod util;

/// Registers every library as a global table of `lua`.
pub fn register_all(lua: &mlua::Lua) -> mlua::Result<()> {
    bit::register(lua)?;
    cjson::register(lua)?;
    cmsgpack::register(lua)?;
    structlib::register(lua)?;
    Ok(())
}
