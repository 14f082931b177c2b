//! Sorted set commands. (Being written: the table entries and handlers land here.)

use crate::table::CommandSpec;

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[];
