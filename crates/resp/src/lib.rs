//! RESP codec for Kvasir: turns request bytes into argument vectors and
//! replies into RESP2 or RESP3 bytes.
//!
//! - [`parse`]: the request parser (multibulk and inline forms) with explicit
//!   size limits; every malformed input becomes a [`ProtocolError`] carrying
//!   Redis's own error text, never a panic.
//! - [`reply`]: the [`Reply`] value the command layer produces.
//! - [`encode`]: writes a [`Reply`] for a given [`Protocol`] version,
//!   downgrading RESP3-only types the way Redis does for RESP2 clients.
//!
//! This crate does no I/O and knows nothing about commands.

pub mod encode;
pub mod parse;
pub mod reply;

pub use encode::{encode, fmt_u64, format_double};
pub use parse::{parse_command, Limits, Parsed, ProtocolError};
pub use reply::{Protocol, Reply};
