//! Lua scripting (EVAL, FUNCTION): placeholder while being built.

pub mod libs;
