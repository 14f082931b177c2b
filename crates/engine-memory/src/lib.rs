//! The in-memory keyspace engine.
//!
//! A [`Db`] is one logical database: entries live in a dense `Vec<Entry>`
//! and a hash index (`hashbrown::HashTable<u32>`) maps a key's hash to its
//! position. This costs 5 bytes of index per bucket instead of a whole entry
//! per bucket, keeps iteration order a pure function of the operation
//! sequence (needed for deterministic replicas), and makes "a random key" an
//! O(1) pick from a seed.
//!
//! Small keys and string values are stored inline (up to 16 bytes) so that a
//! typical small key costs no heap allocation at all.
//!
//! This crate knows nothing about commands, expiry policy or replies: it
//! stores entries and answers lookups.

pub mod access;
mod chunked;
mod db;
pub mod hash;
pub mod list;
pub mod set;
pub mod stream;
pub mod value;
pub mod zset;

pub use access::{AccessClock, AccessMode};
pub use db::{Db, Entry, HeapSize};
pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use stream::Stream;
pub use value::{canonical_i64, CompactBytes};
pub use zset::ZSet;
