//! The storage-engine seam: what the command families need from a keyspace.
//!
//! Command families (`crate::string`, `crate::hash`, ...) parse, validate,
//! do set algebra and shape replies once; they reach storage only through
//! [`Keyspace`] (keys, expiry, iteration, random picks) and the per-family
//! operations of the engine's collection types ([`HashOps`], [`ListOps`],
//! [`SetOps`], [`ZSetOps`], [`StreamOps`]). Handlers are generic over the
//! engine (`fn hset<K: Keyspace>(store: &mut Store<K>, ...)`) and the
//! command table keeps one monomorphised copy per engine
//! ([`crate::table::PerEngine`]): static dispatch, no `dyn`, and the memory
//! engine's views are plain references into its structures.
//!
//! An engine that keeps its data elsewhere (RocksDB) hands out its
//! collection types as handles it owns for the duration of one log entry
//! (loaded on first access, written back in [`Keyspace::commit_entry`]),
//! which is why views are borrowed from the keyspace.
//!
//! Interchangeability: replicas of one shard must apply every entry
//! identically. Everything observable that depends on the engine (the
//! order of [`Keyspace::scan`], which entry [`Keyspace::random_entry`]
//! picks for a given number, the iteration order of a collection, which
//! HRANDFIELD/SRANDMEMBER/SPOP and SCAN replies follow) must be a function
//! of the logical state and the arguments alone. Two engines with
//! different orders can therefore not serve replicas of the same shard;
//! the engine is chosen per node for the whole cluster (`memory` is the
//! only one built today), see docs/architecture.md.

mod collection;
mod hash_ops;
pub mod image;
pub mod list_ops;
pub(crate) mod memory;
mod set_ops;
pub mod stream_ops;
mod zset_ops;

pub use collection::Collection;
pub use hash_ops::HashOps;
pub use image::{HashImage, ListImage, SetImage, StreamImage, ZSetImage};
pub use list_ops::ListOps;
pub use memory::MemoryKeyspace;
pub use set_ops::{SetMember, SetOps};
pub use stream_ops::StreamOps;
pub use zset_ops::ZSetOps;

pub use kvasir_engine_memory::{canonical_i64, AccessMode, CompactBytes};

use std::fmt;

/// A keyspace engine: databases of keys, each with a [`Value`] and an
/// optional absolute expiry (Unix ms). Expiry *policy* (lazy deletion,
/// notifications, stats) stays in [`crate::store::Store`]; the engine
/// only stores and answers.
pub trait Keyspace: Sized + 'static {
    type List: ListOps + ListImage;
    type Hash: HashOps + HashImage;
    type Set: SetOps + SetImage;
    type ZSet: ZSetOps + ZSetImage;
    type Stream: StreamOps + StreamImage;

    /// A keyspace of `databases` empty databases.
    fn with_databases(databases: usize) -> Self;
    fn databases(&self) -> usize;

    /// The entry of `key`, expired or not.
    fn get(&self, db: usize, key: &[u8]) -> Option<EntryRef<'_, Self>>;
    /// [`Keyspace::get`] for a command's use of the key: a live entry's
    /// access is recorded (LRU/LFU, see [`AccessMode`]).
    fn get_touched(&self, db: usize, key: &[u8], now_ms: u64) -> Option<EntryRef<'_, Self>> {
        let _ = now_ms;
        self.get(db, key)
    }
    /// Counts and lists keys per hash slot from now on (a cluster shard's
    /// store), the keys already stored included; `slot_of` gives a key's
    /// slot.
    fn index_slots(&mut self, _slot_of: fn(&[u8]) -> u16) {}
    /// Keys in `slot` over every database, expired ones not yet removed
    /// included (Redis counts them too); None when the engine keeps no
    /// count ([`Keyspace::index_slots`] not called, or not supported): the
    /// caller then walks the keys.
    fn keys_in_slot(&self, _slot: u16) -> Option<usize> {
        None
    }
    /// Up to `limit` keys of `slot` over every database, expired ones not
    /// yet removed included (CLUSTER GETKEYSINSLOT, a node-local answer
    /// with no order replicas must agree on); None when the engine keeps
    /// no per-slot index: the caller then walks the keys.
    fn slot_keys(&self, _slot: u16, _limit: usize) -> Option<Vec<&[u8]>> {
        None
    }
    /// The time accesses are recorded at from now on (each command's).
    fn set_access_clock(&self, _now_ms: u64) {}
    /// While frozen, reads and writes leave the keys' access stamps as they
    /// are (CLIENT NO-TOUCH); node-local, like the stamps.
    fn set_access_frozen(&self, _frozen: bool) {}
    /// How accesses are recorded: the maxmemory policy's choice.
    fn set_access_mode(&self, _mode: AccessMode) {}
    fn access_mode(&self) -> AccessMode {
        AccessMode::Lru
    }
    /// Sets the recorded access of `key` as RESTORE's IDLETIME (seconds,
    /// under an LRU policy) or FREQ (under an LFU one) gives it.
    fn restore_access(&self, _db: usize, _key: &[u8], _idle: Option<u64>, _freq: Option<u8>) {}
    /// Seconds since the last recorded access of an entry (LRU stamps).
    fn idle_seconds(&self, _e: &EntryRef<'_, Self>) -> u64 {
        0
    }
    /// The decayed access counter of an entry (LFU stamps).
    fn access_frequency(&self, _e: &EntryRef<'_, Self>) -> u8 {
        0
    }
    /// The value of `key`, for a change in place. Its expiry changes only
    /// through [`Keyspace::set_expire`].
    fn get_value_mut(&mut self, db: usize, key: &[u8]) -> Option<&mut Value<Self>>;
    /// Stores `value` under `key` with the given expiry (None: persistent),
    /// replacing and returning any previous entry.
    fn set(
        &mut self,
        db: usize,
        key: &[u8],
        value: Value<Self>,
        expire_at: Option<u64>,
    ) -> Option<OwnedEntry<Self>>;
    /// [`Keyspace::set`] unless `key` holds an entry already expired at
    /// `now_ms`: then nothing changes and `value` comes back, so the caller
    /// expires the key first (events, counts) and sets it after. One
    /// lookup where an engine can (the plain SET path).
    fn set_unless_expired(
        &mut self,
        db: usize,
        key: &[u8],
        value: Value<Self>,
        expire_at: Option<u64>,
        now_ms: u64,
    ) -> Result<(), Value<Self>> {
        if self.get(db, key).is_some_and(|e| e.is_expired(now_ms)) {
            return Err(value);
        }
        self.set(db, key, value, expire_at);
        Ok(())
    }
    /// The value of `key` for a change in place if the key is live at
    /// `now_ms` (Ok(None): missing). A key present but expired is removed
    /// and comes back as Err, for the caller to account. One lookup where
    /// an engine can: every write to an existing key starts here.
    #[allow(clippy::type_complexity)]
    fn live_value_mut(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&mut Value<Self>>, OwnedEntry<Self>>;
    /// [`Keyspace::live_value_mut`], storing `make()` (with no expiry)
    /// when the key is missing or expired; an expired entry it replaced
    /// comes back beside the value. The order of keys afterwards is the
    /// one a removal of the expired key and a [`Keyspace::set`] give.
    fn live_value_mut_or_insert(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
        make: impl FnOnce() -> Value<Self>,
    ) -> (&mut Value<Self>, Option<OwnedEntry<Self>>);
    /// Sets (Some) or clears (None) the expiry of an existing key; false
    /// if the key does not exist.
    fn set_expire(&mut self, db: usize, key: &[u8], expire_at: Option<u64>) -> bool;
    fn remove(&mut self, db: usize, key: &[u8]) -> Option<OwnedEntry<Self>>;

    /// Number of keys, logically expired ones not yet removed included.
    fn len(&self, db: usize) -> usize;
    fn is_empty(&self, db: usize) -> bool {
        self.len(db) == 0
    }
    /// Number of keys that carry an expiry.
    fn expires_count(&self, db: usize) -> usize;
    /// Makes room for `additional` keys (bulk loads).
    fn reserve(&mut self, db: usize, additional: usize);
    fn clear(&mut self, db: usize);
    fn swap_dbs(&mut self, a: usize, b: usize);

    /// Every entry of a database, in the engine's deterministic order.
    fn iter(&self, db: usize) -> impl Iterator<Item = EntryRef<'_, Self>>;
    /// One step of a cursor walk over a database: visits up to `count`
    /// entries from `cursor` (0 starts a walk) and returns the cursor to
    /// continue from, 0 when the walk is complete. A key present for the
    /// whole walk is visited at least once, as SCAN promises.
    fn scan(
        &self,
        db: usize,
        cursor: u64,
        count: usize,
        visit: impl FnMut(EntryRef<'_, Self>),
    ) -> u64;
    /// The entry picked by the number `r` (from the command's seed): a
    /// function of the logical state and `r` only. None when empty.
    fn random_entry(&self, db: usize, r: u64) -> Option<EntryRef<'_, Self>>;
    /// Approximate bytes the entry of `key` occupies (MEMORY USAGE); 0
    /// when missing.
    fn entry_size(&self, db: usize, key: &[u8]) -> usize;
    /// Bytes the next new key of `db` would make the engine allocate at
    /// once beyond the key itself (an index that doubles): under
    /// `maxmemory` keys are evicted rather than let it grow past the
    /// limit, as Redis does not expand a dict that would (its
    /// `dictExpandAllowed`).
    fn growth_reserve(&self, _db: usize) -> usize {
        0
    }

    /// Brackets the writes of one log entry (or of one standalone
    /// command), so an engine with its own durability can make them one
    /// atomic batch together with `applied` (the entry's log index). The
    /// memory engine has nothing to do.
    fn begin_entry(&mut self) {}
    fn commit_entry(&mut self, _applied: u64) {}

    /// The command table's copy of a handler for this engine.
    fn write_fn(
        f: &crate::table::PerEngine<crate::table::WriteFn<MemoryKeyspace>>,
    ) -> crate::table::WriteFn<Self>;
    fn read_fn(
        f: &crate::table::PerEngine<crate::table::ReadFn<MemoryKeyspace>>,
    ) -> crate::table::ReadFn<Self>;
}

/// A stored value. Strings that are canonical 64-bit integers are kept as
/// `Int` (Redis's "int" encoding): smaller, and INCR needs no parsing.
/// Collections are the engine's types, boxed so a string entry stays small.
pub enum Value<K: Keyspace = MemoryKeyspace> {
    Str(CompactBytes),
    /// A string changed in place (APPEND, SETRANGE): Redis reports these as
    /// "raw" whatever their length, so the distinction is observable.
    Raw(CompactBytes),
    Int(i64),
    List(Box<K::List>),
    Hash(Box<K::Hash>),
    Set(Box<K::Set>),
    ZSet(Box<K::ZSet>),
    Stream(Box<K::Stream>),
}

impl<K: Keyspace> Value<K> {
    /// Builds a string value, choosing the integer encoding when the bytes
    /// are exactly the decimal form of an i64 (no sign plus, no leading zero).
    pub fn from_bytes(b: &[u8]) -> Value<K> {
        match canonical_i64(b) {
            Some(i) => Value::Int(i),
            None => Value::Str(CompactBytes::from_slice(b)),
        }
    }

    /// Heap bytes this value owns beyond its inline size.
    pub fn heap_size(&self) -> usize {
        use std::mem::size_of;
        match self {
            Value::Str(s) | Value::Raw(s) if s.spilled() => s.capacity(),
            Value::Str(_) | Value::Raw(_) | Value::Int(_) => 0,
            Value::List(l) => size_of::<K::List>() + l.heap_size(),
            Value::Hash(h) => size_of::<K::Hash>() + h.heap_size(),
            Value::Set(s) => size_of::<K::Set>() + s.heap_size(),
            Value::ZSet(z) => size_of::<K::ZSet>() + z.heap_size(),
            Value::Stream(s) => size_of::<K::Stream>() + s.heap_size(),
        }
    }

    /// The Redis type name (`TYPE` reply).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) | Value::Raw(_) | Value::Int(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }
}

impl<K: Keyspace> Clone for Value<K> {
    fn clone(&self) -> Self {
        match self {
            Value::Str(s) => Value::Str(s.clone()),
            Value::Raw(s) => Value::Raw(s.clone()),
            Value::Int(i) => Value::Int(*i),
            Value::List(x) => Value::List(x.clone()),
            Value::Hash(x) => Value::Hash(x.clone()),
            Value::Set(x) => Value::Set(x.clone()),
            Value::ZSet(x) => Value::ZSet(x.clone()),
            Value::Stream(x) => Value::Stream(x.clone()),
        }
    }
}

impl<K: Keyspace> PartialEq for Value<K> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Str(a), Value::Str(b)) | (Value::Raw(a), Value::Raw(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::List(a), Value::List(b)) => a == b,
            (Value::Hash(a), Value::Hash(b)) => a == b,
            (Value::Set(a), Value::Set(b)) => a == b,
            (Value::ZSet(a), Value::ZSet(b)) => a == b,
            (Value::Stream(a), Value::Stream(b)) => a == b,
            _ => false,
        }
    }
}

impl<K: Keyspace> Eq for Value<K> {}

impl<K: Keyspace> fmt::Debug for Value<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => f.debug_tuple("Str").field(s).finish(),
            Value::Raw(s) => f.debug_tuple("Raw").field(s).finish(),
            Value::Int(i) => f.debug_tuple("Int").field(i).finish(),
            Value::List(x) => f.debug_tuple("List").field(x).finish(),
            Value::Hash(x) => f.debug_tuple("Hash").field(x).finish(),
            Value::Set(x) => f.debug_tuple("Set").field(x).finish(),
            Value::ZSet(x) => f.debug_tuple("ZSet").field(x).finish(),
            Value::Stream(x) => f.debug_tuple("Stream").field(x).finish(),
        }
    }
}

/// A stored entry as the engine shows it: borrowed, cheap to copy.
pub struct EntryRef<'a, K: Keyspace = MemoryKeyspace> {
    pub key: &'a [u8],
    pub value: &'a Value<K>,
    expire_at: Option<u64>,
    /// The engine's access stamp (node-local metadata).
    access: u32,
}

impl<K: Keyspace> Clone for EntryRef<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Keyspace> Copy for EntryRef<'_, K> {}

impl<'a, K: Keyspace> EntryRef<'a, K> {
    pub fn new(key: &'a [u8], value: &'a Value<K>, expire_at: Option<u64>) -> Self {
        EntryRef {
            key,
            value,
            expire_at,
            access: 0,
        }
    }

    /// This entry with the engine's access stamp.
    pub fn with_access(mut self, access: u32) -> Self {
        self.access = access;
        self
    }

    /// The engine's access stamp, for its `idle_seconds` and
    /// `access_frequency`.
    pub fn access(&self) -> u32 {
        self.access
    }

    /// Absolute expiry in Unix ms, or None for a persistent key.
    pub fn expire_at(&self) -> Option<u64> {
        self.expire_at
    }

    /// Whether the key is logically gone at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at.is_some_and(|at| at <= now_ms)
    }
}

/// An entry taken out of the keyspace (replaced or removed).
pub struct OwnedEntry<K: Keyspace = MemoryKeyspace> {
    pub value: Value<K>,
    expire_at: Option<u64>,
}

impl<K: Keyspace> OwnedEntry<K> {
    pub fn new(value: Value<K>, expire_at: Option<u64>) -> Self {
        OwnedEntry { value, expire_at }
    }

    pub fn expire_at(&self) -> Option<u64> {
        self.expire_at
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at.is_some_and(|at| at <= now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_encoding_is_canonical_only() {
        let v = |b: &[u8]| Value::<MemoryKeyspace>::from_bytes(b);
        assert_eq!(v(b"123"), Value::Int(123));
        assert_eq!(v(b"-9223372036854775808"), Value::Int(i64::MIN));
        assert!(matches!(v(b"0123"), Value::Str(_)));
        assert!(matches!(v(b"-0"), Value::Str(_)));
        assert!(matches!(v(b"+1"), Value::Str(_)));
        assert!(matches!(v(b"9223372036854775808"), Value::Str(_)));
        assert_eq!(v(b"0"), Value::Int(0));
    }

    #[test]
    fn value_and_entry_are_compact() {
        assert!(std::mem::size_of::<Value<MemoryKeyspace>>() <= 32);
        // Key 24, value 32, expiry 8, access stamp 4 (+ padding).
        let entry = std::mem::size_of::<kvasir_engine_memory::Entry<Value<MemoryKeyspace>>>();
        assert!(entry <= 72, "{entry}");
    }
}
