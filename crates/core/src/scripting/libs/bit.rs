//! Placeholder: filled in by the library work.

pub fn register(_lua: &mlua::Lua) -> mlua::Result<()> {
    Ok(())
}
