//! Kvasir's command layer and deterministic state machine.
//!
//! - [`table`]: the command table, the single source of arity, flags, key
//!   positions and ACL categories. Each family module contributes its
//!   commands (`string::COMMANDS`, `keys::COMMANDS`, ...); [`table::lookup`]
//!   joins them.
//! - [`store`]: the state machine: every write runs as
//!   `Store::apply(db, args, ctx)` where [`Ctx`] carries the time and a random
//!   seed chosen by whoever orders the writes (today the shard loop, under
//!   Raft the leader), so replicas applying the same sequence end identical.
//! - [`snapshot`]: the state-machine image for Raft snapshots (encode,
//!   decode) and a content digest for comparing replicas.
//! - [`acl`]: ACL users' rules and the permission check of one command.
//! - [`error`]: typed command errors, rendered as Redis error text only at
//!   the edge ([`CmdError::to_reply`]).
//! - Families: [`string`], [`bitmap`], [`keys`], [`list`], [`hash`],
//!   [`set`], [`zset`], [`sort`], [`server`] (keyspace-level server commands),
//!   [`connection`] (commands answered by the session layer; only their
//!   table entries live here).
//!
//! Nothing here does I/O, reads the clock or draws random numbers.

pub mod acl;
pub mod args;
pub mod bitmap;
pub mod command_docs;
pub mod connection;
pub mod error;
pub mod evict;
pub mod expire;
pub mod geo;
pub mod glob;
pub mod hash;
pub mod hyperloglog;
pub mod keys;
pub mod keyspace;
pub mod list;
pub mod machine;
pub mod notify;
pub mod rdb;
pub mod rdb_file;
pub mod scripting;
pub mod server;
pub mod set;
pub mod snapshot;
pub mod sort;
pub mod store;
pub mod stream;
pub mod string;
pub mod table;
pub mod zset;

pub use connection::SessionCmd;
pub use error::CmdError;
pub use store::{Ctx, EncodingLimits, Store, DEFAULT_DATABASES};
pub use table::{lookup, CommandSpec, Handler};
