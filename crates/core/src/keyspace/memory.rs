//! The memory engine behind the seam: `kvasir_engine_memory`'s databases
//! (a dense entry vector with a hash index) and its compact collections.
//!
//! Its order is the dense vector's, a pure function of the sequence of
//! writes: SCAN walks positions downwards (a removal moves the last entry
//! into the hole, which a downward walk has already passed or will reach),
//! a random pick is a position.

use super::{EntryRef, Keyspace, OwnedEntry, Value};
use crate::store::EncodingLimits;
use crate::table::{PerEngine, ReadFn, WriteFn};
use kvasir_engine_memory::hash::HashLimits;
use kvasir_engine_memory::set::SetLimits;
use kvasir_engine_memory::zset::ZSetLimits;
use kvasir_engine_memory::{AccessClock, AccessMode, Db, Entry, HeapSize};
use std::sync::Arc;

/// The memory engine's hash thresholds, taken from the store's.
#[inline]
pub(crate) fn hash_limits(l: &EncodingLimits) -> HashLimits {
    HashLimits {
        max_listpack_entries: l.hash_max_listpack_entries,
        max_listpack_value: l.hash_max_listpack_value,
    }
}

/// The memory engine's set thresholds, taken from the store's.
#[inline]
pub(crate) fn set_limits(l: &EncodingLimits) -> SetLimits {
    SetLimits {
        max_intset_entries: l.set_max_intset_entries,
        max_packed_entries: l.set_max_listpack_entries,
        max_packed_value: l.set_max_listpack_value,
    }
}

/// The memory engine's sorted-set thresholds, taken from the store's.
#[inline]
pub(crate) fn zset_limits(l: &EncodingLimits) -> ZSetLimits {
    ZSetLimits {
        max_listpack_entries: l.zset_max_listpack_entries,
        max_listpack_value: l.zset_max_listpack_value,
    }
}

pub struct MemoryKeyspace {
    dbs: Vec<Db<Value<MemoryKeyspace>>>,
    /// Stamps the accesses of every database.
    clock: Arc<AccessClock>,
}

impl HeapSize for Value<MemoryKeyspace> {
    fn heap_size(&self) -> usize {
        Value::heap_size(self)
    }
}

fn entry_ref(e: &Entry<Value<MemoryKeyspace>>) -> EntryRef<'_, MemoryKeyspace> {
    EntryRef::new(&e.key, &e.value, e.expire_at()).with_access(e.access())
}

fn owned(e: Entry<Value<MemoryKeyspace>>) -> OwnedEntry<MemoryKeyspace> {
    let expire_at = e.expire_at();
    OwnedEntry::new(e.value, expire_at)
}

impl Keyspace for MemoryKeyspace {
    type List = kvasir_engine_memory::List;
    type Hash = kvasir_engine_memory::Hash;
    type Set = kvasir_engine_memory::Set;
    type ZSet = kvasir_engine_memory::ZSet;
    type Stream = kvasir_engine_memory::Stream;

    fn with_databases(databases: usize) -> Self {
        let clock = Arc::new(AccessClock::default());
        MemoryKeyspace {
            dbs: (0..databases.max(1))
                .map(|_| Db::with_clock(clock.clone()))
                .collect(),
            clock,
        }
    }

    #[inline]
    fn databases(&self) -> usize {
        self.dbs.len()
    }

    #[inline]
    fn get(&self, db: usize, key: &[u8]) -> Option<EntryRef<'_, Self>> {
        self.dbs[db].get(key).map(entry_ref)
    }

    fn index_slots(&mut self, slot_of: fn(&[u8]) -> u16) {
        for d in &mut self.dbs {
            d.index_slots(slot_of);
        }
    }

    fn keys_in_slot(&self, slot: u16) -> Option<usize> {
        self.dbs.iter().map(|d| d.keys_in_slot(slot)).sum()
    }

    fn slot_keys(&self, slot: u16, limit: usize) -> Option<Vec<&[u8]>> {
        let mut keys = Vec::new();
        for d in &self.dbs {
            keys.extend(d.slot_keys(slot)?.take(limit - keys.len()));
        }
        Some(keys)
    }

    #[inline]
    fn get_touched(&self, db: usize, key: &[u8], now_ms: u64) -> Option<EntryRef<'_, Self>> {
        self.dbs[db].get_touched(key, now_ms).map(entry_ref)
    }

    #[inline]
    fn set_access_clock(&self, now_ms: u64) {
        self.clock.set_now(now_ms);
    }

    fn set_access_frozen(&self, frozen: bool) {
        self.clock.set_frozen(frozen);
    }

    fn set_access_mode(&self, mode: AccessMode) {
        self.clock.set_mode(mode);
    }

    fn access_mode(&self) -> AccessMode {
        self.clock.mode()
    }

    fn restore_access(&self, db: usize, key: &[u8], idle: Option<u64>, freq: Option<u8>) {
        let stamp = match (self.clock.mode(), idle, freq) {
            (AccessMode::Lru, Some(idle), _) => self.clock.idle_stamp(idle),
            (AccessMode::Lfu { .. }, _, Some(freq)) => self.clock.frequency_stamp(freq),
            _ => return,
        };
        self.dbs[db].set_access(key, stamp);
    }

    fn idle_seconds(&self, e: &EntryRef<'_, Self>) -> u64 {
        self.clock.idle_seconds(e.access())
    }

    fn access_frequency(&self, e: &EntryRef<'_, Self>) -> u8 {
        self.clock.frequency(e.access())
    }

    #[inline]
    fn get_value_mut(&mut self, db: usize, key: &[u8]) -> Option<&mut Value<Self>> {
        self.dbs[db].get_value_mut(key)
    }

    #[inline]
    fn live_value_mut(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&mut Value<Self>>, OwnedEntry<Self>> {
        self.dbs[db].live_value_mut(key, now_ms).map_err(owned)
    }

    #[inline]
    fn live_value_mut_or_insert(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
        make: impl FnOnce() -> Value<Self>,
    ) -> (&mut Value<Self>, Option<OwnedEntry<Self>>) {
        let (value, expired) = self.dbs[db].live_value_mut_or_insert(key, now_ms, make);
        (value, expired.map(owned))
    }

    #[inline]
    fn set(
        &mut self,
        db: usize,
        key: &[u8],
        value: Value<Self>,
        expire_at: Option<u64>,
    ) -> Option<OwnedEntry<Self>> {
        self.dbs[db].set(key, value, expire_at).map(owned)
    }

    #[inline]
    fn set_unless_expired(
        &mut self,
        db: usize,
        key: &[u8],
        value: Value<Self>,
        expire_at: Option<u64>,
        now_ms: u64,
    ) -> Result<(), Value<Self>> {
        self.dbs[db].set_unless_expired(key, value, expire_at, now_ms)
    }

    #[inline]
    fn set_expire(&mut self, db: usize, key: &[u8], expire_at: Option<u64>) -> bool {
        self.dbs[db].set_expire(key, expire_at)
    }

    #[inline]
    fn remove(&mut self, db: usize, key: &[u8]) -> Option<OwnedEntry<Self>> {
        self.dbs[db].remove(key).map(owned)
    }

    #[inline]
    fn len(&self, db: usize) -> usize {
        self.dbs[db].len()
    }

    #[inline]
    fn expires_count(&self, db: usize) -> usize {
        self.dbs[db].expires_count()
    }

    fn reserve(&mut self, db: usize, additional: usize) {
        self.dbs[db].reserve(additional)
    }

    fn clear(&mut self, db: usize) {
        self.dbs[db].clear()
    }

    fn swap_dbs(&mut self, a: usize, b: usize) {
        self.dbs.swap(a, b)
    }

    fn iter(&self, db: usize) -> impl Iterator<Item = EntryRef<'_, Self>> {
        self.dbs[db].iter().map(entry_ref)
    }

    /// The cursor is the position below which the walk continues: 0 starts
    /// at the end, a cursor beyond the end (the database shrank) resumes at
    /// the end, and the walk is complete at position 0.
    fn scan(
        &self,
        db: usize,
        cursor: u64,
        count: usize,
        mut visit: impl FnMut(EntryRef<'_, Self>),
    ) -> u64 {
        let d = &self.dbs[db];
        let len = d.len() as u64;
        let mut pos = if cursor == 0 { len } else { cursor.min(len) };
        let mut visited = 0;
        while pos > 0 && visited < count {
            pos -= 1;
            visited += 1;
            if let Some(e) = d.entry_at(pos as usize) {
                visit(entry_ref(e));
            }
        }
        pos
    }

    fn random_entry(&self, db: usize, r: u64) -> Option<EntryRef<'_, Self>> {
        let d = &self.dbs[db];
        let len = d.len() as u64;
        if len == 0 {
            return None;
        }
        d.entry_at((r % len) as usize).map(entry_ref)
    }

    fn entry_size(&self, db: usize, key: &[u8]) -> usize {
        self.dbs[db].get(key).map_or(0, Db::entry_size)
    }

    fn growth_reserve(&self, db: usize) -> usize {
        self.dbs.get(db).map_or(0, Db::growth_reserve)
    }

    #[inline]
    fn write_fn(f: &PerEngine<WriteFn<MemoryKeyspace>>) -> WriteFn<Self> {
        f.memory
    }

    #[inline]
    fn read_fn(f: &PerEngine<ReadFn<MemoryKeyspace>>) -> ReadFn<Self> {
        f.memory
    }
}
