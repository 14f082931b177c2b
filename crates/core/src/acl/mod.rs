//! ACL rules and the permission check, as Redis 7 has them: a user's
//! flags, passwords and selectors (`user.rs`), the commands they name
//! (`commands.rs`: one bit per command and subcommand of the table), and
//! whether a user may run one invocation (`check.rs`). The server keeps
//! the users, the log and the ACL command; scripts check each
//! `redis.call` against the caller's user here.

pub mod check;
pub mod commands;
pub mod user;

pub use check::{check, pattern_refusal, Denied};
pub use user::User;

/// Redis 7.0's ACL categories, in its order.
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];
