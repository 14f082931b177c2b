//! One logical database: a dense entry vector plus a hash index into it.

use crate::access::AccessClock;
use crate::chunked::ChunkedVec;
use crate::value::CompactBytes;
use hashbrown::HashTable;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A key, its value, its absolute expiry time in Unix milliseconds (0
/// means the key does not expire) and when it was last used (see
/// [`crate::access`]: node-local, so equality ignores it).
#[derive(Debug)]
pub struct Entry<V> {
    pub key: CompactBytes,
    pub value: V,
    expire_at: u64,
    access: AtomicU32,
}

impl<V: Clone> Clone for Entry<V> {
    fn clone(&self) -> Self {
        Entry {
            key: self.key.clone(),
            value: self.value.clone(),
            expire_at: self.expire_at,
            access: AtomicU32::new(self.access()),
        }
    }
}

impl<V: PartialEq> PartialEq for Entry<V> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.value == other.value && self.expire_at == other.expire_at
    }
}

impl<V: Eq> Eq for Entry<V> {}

/// What the database needs to know about a stored value: the heap bytes it
/// owns beyond its inline size (MEMORY USAGE, INFO memory).
pub trait HeapSize {
    fn heap_size(&self) -> usize;
}

impl<V> Entry<V> {
    /// Absolute expiry in Unix ms, or None for a persistent key.
    pub fn expire_at(&self) -> Option<u64> {
        (self.expire_at != 0).then_some(self.expire_at)
    }

    /// Whether the key is logically gone at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }

    /// The access stamp (LRU or LFU, see [`crate::access`]).
    pub fn access(&self) -> u32 {
        self.access.load(Ordering::Relaxed)
    }

    #[inline]
    fn touch(&self, clock: &AccessClock) {
        let old = self.access();
        let new = clock.touched(old);
        // Most reads of a key within its second change nothing: no write
        // to the entry's cache line then.
        if new != old {
            self.access.store(new, Ordering::Relaxed);
        }
    }
}

/// A fixed-seed hasher: the index layout never leaks into behaviour (all
/// iteration goes through the dense vector), so no per-process seed is needed
/// for determinism; the fixed seed only keeps runs reproducible.
#[derive(Clone, Default)]
struct FixedState;

impl BuildHasher for FixedState {
    type Hasher = foldhash::fast::FoldHasher;
    fn build_hasher(&self) -> Self::Hasher {
        foldhash::fast::FixedState::with_seed(0x6b76_6173_6972).build_hasher()
    }
}

fn hash_key(key: &[u8]) -> u64 {
    FixedState.hash_one(key)
}

/// One database (Redis has 16 of them, selected with SELECT).
pub struct Db<V> {
    entries: ChunkedVec<Entry<V>>,
    index: HashTable<u32>,
    expires: usize,
    /// Stamps accesses (shared by a keyspace's databases).
    clock: Arc<AccessClock>,
    /// Cluster mode: each hash slot's keys, kept on every insert and
    /// removal so CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT need no walk.
    slots: Option<Box<SlotIndex>>,
}

/// No position: the end of a slot's list, or an empty slot.
const NO_POS: u32 = u32::MAX;

/// Each hash slot's keys as a list through the entries' positions, newest
/// first, as Redis 7.0 links a slot's keys: 8 bytes per key (the links,
/// beside the entries, so a standalone database pays nothing) and 8 per
/// slot seen.
struct SlotIndex {
    slot_of: fn(&[u8]) -> u16,
    /// Indexed by slot, grown to the highest slot seen.
    slots: Vec<SlotHead>,
    /// Parallel to the entries: the neighbours of each in its slot's list.
    links: ChunkedVec<SlotLink>,
}

#[derive(Clone, Copy)]
struct SlotHead {
    count: u32,
    first: u32,
}

#[derive(Clone, Copy)]
struct SlotLink {
    prev: u32,
    next: u32,
}

impl SlotIndex {
    fn new(slot_of: fn(&[u8]) -> u16) -> SlotIndex {
        SlotIndex {
            slot_of,
            slots: Vec::new(),
            links: ChunkedVec::default(),
        }
    }

    fn head_mut(&mut self, slot: u16) -> &mut SlotHead {
        let i = slot as usize;
        if i >= self.slots.len() {
            self.slots.resize(
                i + 1,
                SlotHead {
                    count: 0,
                    first: NO_POS,
                },
            );
        }
        &mut self.slots[i]
    }

    /// Links the entry just pushed at `pos` (the last position) first in
    /// its slot's list.
    fn push(&mut self, pos: u32, key: &[u8]) {
        debug_assert_eq!(pos as usize, self.links.len());
        let slot = (self.slot_of)(key);
        let head = self.head_mut(slot);
        let next = head.first;
        head.first = pos;
        head.count += 1;
        if next != NO_POS {
            self.links[next as usize].prev = pos;
        }
        self.links.push(SlotLink { prev: NO_POS, next });
    }

    /// Unlinks the entry at `pos`, whose key is `key`, then follows the
    /// entries' `swap_remove`: the last entry, whose key is `last_key`,
    /// moves to `pos`.
    fn swap_remove(&mut self, pos: u32, key: &[u8], last_key: &[u8]) {
        let SlotLink { prev, next } = self.links[pos as usize];
        let slot = (self.slot_of)(key);
        let head = self.head_mut(slot);
        head.count = head.count.saturating_sub(1);
        if prev == NO_POS {
            head.first = next;
        } else {
            self.links[prev as usize].next = next;
        }
        if next != NO_POS {
            self.links[next as usize].prev = prev;
        }
        let last = self.links.len() as u32 - 1;
        self.links.swap_remove(pos as usize);
        if pos == last {
            return;
        }
        // The moved entry's neighbours point at it by its old position.
        let SlotLink { prev, next } = self.links[pos as usize];
        if prev == NO_POS {
            let slot = (self.slot_of)(last_key);
            self.head_mut(slot).first = pos;
        } else {
            self.links[prev as usize].next = pos;
        }
        if next != NO_POS {
            self.links[next as usize].prev = pos;
        }
    }

    fn count(&self, slot: u16) -> usize {
        self.slots
            .get(slot as usize)
            .map_or(0, |h| h.count as usize)
    }

    /// The positions of `slot`'s entries, newest first.
    fn positions(&self, slot: u16) -> impl Iterator<Item = u32> + '_ {
        let first = self.slots.get(slot as usize).map_or(NO_POS, |h| h.first);
        std::iter::successors(Some(first).filter(|&p| p != NO_POS), move |&p| {
            Some(self.links[p as usize].next).filter(|&n| n != NO_POS)
        })
    }
}

impl<V> Default for Db<V> {
    fn default() -> Self {
        Db::with_clock(Arc::default())
    }
}

impl<V> Db<V> {
    pub fn new() -> Db<V> {
        Db::default()
    }

    /// An empty database whose accesses `clock` stamps.
    pub fn with_clock(clock: Arc<AccessClock>) -> Db<V> {
        Db {
            entries: ChunkedVec::default(),
            index: HashTable::new(),
            expires: 0,
            clock,
            slots: None,
        }
    }

    /// Indexes keys by hash slot (`slot_of` gives a key's) from now on,
    /// the keys already here included.
    pub fn index_slots(&mut self, slot_of: fn(&[u8]) -> u16) {
        let mut index = SlotIndex::new(slot_of);
        for i in 0..self.entries.len() {
            index.push(i as u32, &self.entries[i].key);
        }
        self.slots = Some(Box::new(index));
    }

    /// Keys in `slot`, expired ones not yet removed included (as Redis
    /// counts them); None unless [`Db::index_slots`] was called.
    pub fn keys_in_slot(&self, slot: u16) -> Option<usize> {
        self.slots.as_ref().map(|index| index.count(slot))
    }

    /// The keys of `slot`, newest first, expired ones not yet removed
    /// included (as Redis's GETKEYSINSLOT lists them); None unless
    /// [`Db::index_slots`] was called.
    pub fn slot_keys(&self, slot: u16) -> Option<impl Iterator<Item = &[u8]> + '_> {
        let index = self.slots.as_ref()?;
        Some(
            index
                .positions(slot)
                .map(move |p| self.entries[p as usize].key.as_slice()),
        )
    }

    /// Makes room for `additional` more keys (bulk loads such as restoring
    /// a snapshot), so the entry vector and index grow once.
    pub fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
        if let Some(index) = &mut self.slots {
            index.links.reserve(additional);
        }
        let entries = &self.entries;
        self.index
            .reserve(additional, |&i| hash_key(&entries[i as usize].key));
    }

    /// Number of keys, including logically expired ones not yet removed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of keys that carry an expiry time.
    pub fn expires_count(&self) -> usize {
        self.expires
    }

    fn find(&self, key: &[u8]) -> Option<usize> {
        let entries = &self.entries;
        self.index
            .find(hash_key(key), |&i| {
                entries[i as usize].key.as_slice() == key
            })
            .map(|&i| i as usize)
    }

    /// The entry for `key`, expired or not.
    pub fn get(&self, key: &[u8]) -> Option<&Entry<V>> {
        self.find(key).map(|i| &self.entries[i])
    }

    /// [`Db::get`] for a command's use of the key: a live entry's access
    /// is stamped.
    pub fn get_touched(&self, key: &[u8], now_ms: u64) -> Option<&Entry<V>> {
        let e = &self.entries[self.find(key)?];
        if !e.is_expired(now_ms) {
            e.touch(&self.clock);
        }
        Some(e)
    }

    /// Replaces the access stamp of `key` (RESTORE IDLETIME / FREQ).
    pub fn set_access(&self, key: &[u8], stamp: u32) {
        if let Some(i) = self.find(key) {
            self.entries[i].access.store(stamp, Ordering::Relaxed);
        }
    }

    /// Mutable access to a key's value (its expiry is changed only through
    /// [`Db::set_expire`], which keeps the expiry count right).
    pub fn get_value_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        self.find(key).map(|i| &mut self.entries[i].value)
    }

    /// Position of `key` in iteration order.
    pub fn position(&self, key: &[u8]) -> Option<usize> {
        self.find(key)
    }

    /// The entry at a position in iteration order (SCAN, RANDOMKEY).
    pub fn entry_at(&self, pos: usize) -> Option<&Entry<V>> {
        self.entries.get(pos)
    }

    /// Iterates entries in their stored order (deterministic).
    pub fn iter(&self) -> impl Iterator<Item = &Entry<V>> {
        self.entries.iter()
    }

    /// Stores `value` under `key` with the given expiry (None: persistent),
    /// replacing any previous entry, which is returned.
    pub fn set(&mut self, key: &[u8], value: V, expire_at: Option<u64>) -> Option<Entry<V>> {
        let expire_at = expire_at.unwrap_or(0);
        if let Some(i) = self.find(key) {
            let old_value = std::mem::replace(&mut self.entries[i].value, value);
            let old_expire = self.replace_expire(i, expire_at);
            let old_access = self.entries[i].access();
            self.entries[i].touch(&self.clock);
            return Some(Entry {
                key: self.entries[i].key.clone(),
                value: old_value,
                expire_at: old_expire,
                access: AtomicU32::new(old_access),
            });
        }
        let pos = self.push(key, value, expire_at);
        let entries = &self.entries;
        self.index
            .insert_unique(hash_key(key), pos, |&i| hash_key(&entries[i as usize].key));
        None
    }

    /// Appends a new entry (its index slot is the caller's) and returns its
    /// position.
    fn push(&mut self, key: &[u8], value: V, expire_at: u64) -> u32 {
        let pos = self.entries.len() as u32;
        self.entries.push(Entry {
            key: CompactBytes::from_slice(key),
            value,
            expire_at,
            access: AtomicU32::new(self.clock.initial()),
        });
        if expire_at != 0 {
            self.expires += 1;
        }
        if let Some(index) = &mut self.slots {
            index.push(pos, key);
        }
        pos
    }

    /// Gives entry `i` a new expiry (0: none), keeping the count right;
    /// returns the old one.
    fn replace_expire(&mut self, i: usize, expire_at: u64) -> u64 {
        let old = std::mem::replace(&mut self.entries[i].expire_at, expire_at);
        self.expires = self.expires + (expire_at != 0) as usize - (old != 0) as usize;
        old
    }

    /// [`Db::set`] in one probe of the index, unless `key` holds an entry
    /// already expired at `now_ms`: then nothing changes and `value` comes
    /// back, for the caller to expire the key first (its events and
    /// counts). A live entry is replaced where it is, a new one appended,
    /// exactly as `set` does, so iteration orders are the same.
    pub fn set_unless_expired(
        &mut self,
        key: &[u8],
        value: V,
        expire_at: Option<u64>,
        now_ms: u64,
    ) -> Result<(), V> {
        let expire_at = expire_at.unwrap_or(0);
        let entries = &self.entries;
        let found = self.index.entry(
            hash_key(key),
            |&i| entries[i as usize].key.as_slice() == key,
            |&i| hash_key(&entries[i as usize].key),
        );
        match found {
            hashbrown::hash_table::Entry::Occupied(o) => {
                let i = *o.get() as usize;
                if self.entries[i].is_expired(now_ms) {
                    return Err(value);
                }
                self.entries[i].value = value;
                self.replace_expire(i, expire_at);
                self.entries[i].touch(&self.clock);
            }
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(self.entries.len() as u32);
                self.push(key, value, expire_at);
            }
        }
        Ok(())
    }

    /// The value of `key` for a change in place if the key is live at
    /// `now_ms`, in one probe. A key present but expired is removed (as
    /// [`Db::remove`]) and comes back as Err.
    pub fn live_value_mut(&mut self, key: &[u8], now_ms: u64) -> Result<Option<&mut V>, Entry<V>> {
        match self.find(key) {
            None => Ok(None),
            Some(i) if self.entries[i].is_expired(now_ms) => self.remove(key).map_or(Ok(None), Err),
            Some(i) => {
                let e = &mut self.entries[i];
                e.touch(&self.clock);
                Ok(Some(&mut e.value))
            }
        }
    }

    /// [`Db::live_value_mut`], storing `make()` (no expiry) when the key is
    /// missing or expired, in one probe unless it was expired. An expired
    /// entry is removed first and the new one appended, as a removal and a
    /// [`Db::set`] would, so iteration orders are the same; it comes back
    /// beside the value.
    pub fn live_value_mut_or_insert(
        &mut self,
        key: &[u8],
        now_ms: u64,
        make: impl FnOnce() -> V,
    ) -> (&mut V, Option<Entry<V>>) {
        let entries = &self.entries;
        let found = self.index.entry(
            hash_key(key),
            |&i| entries[i as usize].key.as_slice() == key,
            |&i| hash_key(&entries[i as usize].key),
        );
        let (pos, expired) = match found {
            hashbrown::hash_table::Entry::Occupied(o) => {
                let i = *o.get() as usize;
                if !self.entries[i].is_expired(now_ms) {
                    let e = &mut self.entries[i];
                    e.touch(&self.clock);
                    return (&mut e.value, None);
                }
                let expired = self.remove(key);
                let pos = self.push(key, make(), 0);
                let entries = &self.entries;
                self.index
                    .insert_unique(hash_key(key), pos, |&i| hash_key(&entries[i as usize].key));
                (pos, expired)
            }
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(self.entries.len() as u32);
                (self.push(key, make(), 0), None)
            }
        };
        (&mut self.entries[pos as usize].value, expired)
    }

    /// Sets (Some) or clears (None) the expiry of an existing key; false if
    /// the key does not exist.
    pub fn set_expire(&mut self, key: &[u8], expire_at: Option<u64>) -> bool {
        let Some(i) = self.find(key) else {
            return false;
        };
        self.replace_expire(i, expire_at.unwrap_or(0));
        true
    }

    /// Removes `key`, returning its entry.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry<V>> {
        let hash = hash_key(key);
        let entries = &self.entries;
        let slot = self
            .index
            .find_entry(hash, |&i| entries[i as usize].key.as_slice() == key)
            .ok()?;
        let (pos, _) = slot.remove();
        let pos = pos as usize;
        let last = self.entries.len() - 1;
        if pos != last {
            // The last entry moves into the hole: repoint its index slot.
            let moved_hash = hash_key(&self.entries[last].key);
            if let Some(slot) = self.index.find_mut(moved_hash, |&i| i as usize == last) {
                *slot = pos as u32;
            }
        }
        if let Some(index) = &mut self.slots {
            index.swap_remove(pos as u32, &self.entries[pos].key, &self.entries[last].key);
        }
        let removed = self.entries.swap_remove(pos)?;
        if removed.expire_at != 0 {
            self.expires -= 1;
        }
        self.shrink_if_sparse();
        Some(removed)
    }

    /// Gives the index's memory back once three quarters of it are unused
    /// (after mass deletion or eviction), as Redis resizes a dict that is
    /// under a tenth full; the entries give theirs back chunk by chunk.
    fn shrink_if_sparse(&mut self) {
        const MIN_CAPACITY: usize = 1024;
        let len = self.entries.len();
        if self.index.capacity() > MIN_CAPACITY && len * 4 < self.index.capacity() {
            let entries = &self.entries;
            self.index.shrink_to((len * 2).max(MIN_CAPACITY), |&i| {
                hash_key(&entries[i as usize].key)
            });
        }
    }

    /// Bytes the index takes on its next growth, if the next new key
    /// makes it grow: it is full, and growing allocates a table of twice
    /// its buckets (a `u32` and a control byte each) before the old one
    /// is freed. 0 while it has room.
    pub fn growth_reserve(&self) -> usize {
        if self.index.len() < self.index.capacity() {
            return 0;
        }
        // hashbrown keeps a table at most 7/8 full, in a power of two of
        // buckets (at least 4).
        let buckets = ((self.index.capacity() + 1) * 8 / 7)
            .next_power_of_two()
            .max(4);
        buckets * (std::mem::size_of::<u32>() + 1)
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.entries = ChunkedVec::default();
        self.index = HashTable::new();
        self.expires = 0;
        if let Some(index) = &mut self.slots {
            **index = SlotIndex::new(index.slot_of);
        }
    }

    /// Approximate bytes owned by the entry of `key` (MEMORY USAGE).
    pub fn entry_size(e: &Entry<V>) -> usize
    where
        V: HeapSize,
    {
        let key_heap = if e.key.spilled() { e.key.capacity() } else { 0 };
        std::mem::size_of::<Entry<V>>() + 5 + key_heap + e.value.heap_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for the stored value (the value type is the caller's).
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Value {
        Int(i64),
    }

    /// The keys in iteration order.
    fn keys(db: &Db<Value>) -> Vec<String> {
        db.iter()
            .map(|e| String::from_utf8_lossy(&e.key).into_owned())
            .collect()
    }

    /// A slot function with few slots, so keys share them.
    fn tiny_slot(key: &[u8]) -> u16 {
        key.iter().map(|&b| b as u16).sum::<u16>() % 7
    }

    fn walked(db: &Db<Value>, slot: u16) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = db
            .iter()
            .filter(|e| tiny_slot(&e.key) == slot)
            .map(|e| e.key.to_vec())
            .collect();
        keys.sort();
        keys
    }

    fn listed(db: &Db<Value>, slot: u16) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = db
            .slot_keys(slot)
            .expect("indexed")
            .map(<[u8]>::to_vec)
            .collect();
        keys.sort();
        keys
    }

    /// The per-slot counts and key lists follow every way a key comes and
    /// goes (new keys through each insert path, replacements that are not
    /// new, expired entries removed or replaced, removals that move the
    /// last entry, clear), and start from the keys already there.
    #[test]
    fn slot_index_matches_a_walk_of_the_keys() {
        let mut db: Db<Value> = Db::new();
        assert_eq!(db.keys_in_slot(0), None, "not counted until asked");
        assert!(db.slot_keys(0).is_none());
        db.set(b"before", Value::Int(0), None);
        db.index_slots(tiny_slot);
        let mut x: u64 = 12345;
        for step in 0..4000u64 {
            // xorshift: a fixed pseudo-random sequence of operations.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = format!("k{}", x % 300);
            // Keys written with expiry 10 are expired at 20: those paths
            // remove the old entry (and re-insert) instead of changing it.
            match x % 6 {
                0 | 1 => {
                    db.set(key.as_bytes(), Value::Int(step as i64), None);
                }
                2 => {
                    let _ = db.set_unless_expired(key.as_bytes(), Value::Int(1), Some(10), 5);
                }
                3 => {
                    let _ = db.live_value_mut_or_insert(key.as_bytes(), 20, || Value::Int(2));
                }
                4 => {
                    let _ = db.live_value_mut(key.as_bytes(), 20);
                }
                _ => {
                    db.remove(key.as_bytes());
                }
            }
            if step == 3000 {
                db.clear();
            }
            if step % 97 == 0 || step == 3000 {
                for slot in 0..8 {
                    let keys = walked(&db, slot);
                    assert_eq!(
                        db.keys_in_slot(slot),
                        Some(keys.len()),
                        "step {step} slot {slot}"
                    );
                    assert_eq!(listed(&db, slot), keys, "step {step} slot {slot}");
                }
            }
        }
        let total: usize = (0..7).filter_map(|s| db.keys_in_slot(s)).sum();
        assert_eq!(total, db.len());
    }

    /// A slot lists its keys newest first, as Redis 7.0 does, whatever
    /// removals moved them around in the entry vector.
    #[test]
    fn slot_keys_come_newest_first() {
        let mut db: Db<Value> = Db::new();
        db.index_slots(|_| 3);
        for k in ["a", "b", "c", "d", "e"] {
            db.set(k.as_bytes(), Value::Int(0), None);
        }
        // "a" leaves: "e" moves into its position; "c" leaves from the middle.
        db.remove(b"a");
        db.remove(b"c");
        db.set(b"f", Value::Int(0), None);
        let order: Vec<&[u8]> = db.slot_keys(3).expect("indexed").collect();
        assert_eq!(order, [&b"f"[..], b"e", b"d", b"b"]);
        assert_eq!(db.slot_keys(2).expect("indexed").count(), 0);
        assert_eq!(db.slot_keys(60_000).expect("indexed").count(), 0);
    }

    /// The reserve is announced exactly before the insert that grows the
    /// index, and is about the table it then allocates.
    #[test]
    fn growth_reserve_comes_before_the_index_grows() {
        let mut db: Db<Value> = Db::new();
        let mut grew = 0;
        for i in 0..20_000u32 {
            let reserve = db.growth_reserve();
            let before = db.index.capacity();
            db.set(format!("k{i}").as_bytes(), Value::Int(1), None);
            let after = db.index.capacity();
            assert_eq!(
                reserve > 0,
                after != before,
                "key {i}: capacity {before} -> {after}"
            );
            if after != before && after >= 64 {
                grew += 1;
                let buckets = (after * 8 / 7).next_power_of_two();
                let approx = buckets * 5;
                assert!(
                    reserve >= approx * 9 / 10 && reserve <= approx * 11 / 10 + 40,
                    "{reserve} vs {approx}"
                );
            }
        }
        assert!(grew >= 8, "{grew}");
    }

    #[test]
    fn live_value_mut_removes_an_expired_key_as_remove_does() {
        let mut db: Db<Value> = Db::new();
        db.set(b"a", Value::Int(1), Some(100));
        db.set(b"b", Value::Int(2), None);
        db.set(b"c", Value::Int(3), None);
        assert_eq!(db.live_value_mut(b"zz", 50), Ok(None));
        if let Ok(Some(v)) = db.live_value_mut(b"a", 99) {
            *v = Value::Int(10);
        }
        assert_eq!(db.get(b"a").map(|e| e.value.clone()), Some(Value::Int(10)));
        assert_eq!(db.get(b"a").and_then(|e| e.expire_at()), Some(100));
        let expired = db.live_value_mut(b"a", 100).map(|v| v.cloned());
        assert_eq!(
            expired.map_err(|e| (e.expire_at(), e.value)),
            Err((Some(100), Value::Int(10)))
        );
        assert_eq!(keys(&db), ["c", "b"]);
        assert_eq!(db.expires_count(), 0);
        assert!(db.get(b"a").is_none());
    }

    #[test]
    fn live_value_mut_or_insert_orders_keys_as_remove_then_set() {
        let mut a: Db<Value> = Db::new();
        let mut b: Db<Value> = Db::new();
        for db in [&mut a, &mut b] {
            db.set(b"x", Value::Int(1), Some(100));
            db.set(b"y", Value::Int(2), None);
            db.set(b"z", Value::Int(3), None);
        }
        // Live: the value itself, nothing inserted.
        let (v, expired) = a.live_value_mut_or_insert(b"y", 100, || Value::Int(0));
        *v = Value::Int(20);
        assert!(expired.is_none());
        b.set(b"y", Value::Int(20), None);
        // Expired: replaced by a fresh value without expiry, moved to the
        // end as a removal and a set would.
        let (v, expired) = a.live_value_mut_or_insert(b"x", 100, || Value::Int(7));
        assert_eq!(*v, Value::Int(7));
        assert_eq!(expired.map(|e| e.value), Some(Value::Int(1)));
        b.remove(b"x");
        b.set(b"x", Value::Int(7), None);
        // Missing: appended.
        let (v, expired) = a.live_value_mut_or_insert(b"w", 100, || Value::Int(9));
        assert_eq!((v.clone(), expired.is_none()), (Value::Int(9), true));
        b.set(b"w", Value::Int(9), None);
        assert_eq!(keys(&a), keys(&b));
        assert_eq!(a.expires_count(), 0);
        for k in ["w", "x", "y", "z"] {
            let (ea, eb) = (a.get(k.as_bytes()), b.get(k.as_bytes()));
            assert_eq!(
                ea.map(|e| (&e.value, e.expire_at())),
                eb.map(|e| (&e.value, e.expire_at()))
            );
        }
    }

    #[test]
    fn set_get_remove_keeps_index_consistent() {
        let mut db: Db<Value> = Db::new();
        for i in 0..1000u32 {
            let k = format!("key:{i}");
            assert!(db
                .set(
                    k.as_bytes(),
                    Value::Int(i as i64),
                    (i % 3 == 0).then_some(5)
                )
                .is_none());
        }
        assert_eq!(db.len(), 1000);
        assert_eq!(db.expires_count(), 334);
        for i in (0..1000u32).step_by(2) {
            let k = format!("key:{i}");
            assert_eq!(
                db.remove(k.as_bytes()).map(|e| e.value),
                Some(Value::Int(i as i64))
            );
        }
        assert_eq!(db.len(), 500);
        for i in 0..1000u32 {
            let k = format!("key:{i}");
            let got = db.get(k.as_bytes()).map(|e| e.value.clone());
            if i % 2 == 0 {
                assert_eq!(got, None);
            } else {
                assert_eq!(got, Some(Value::Int(i as i64)));
            }
        }
        let expected_expires = (0..1000u32).filter(|i| i % 2 == 1 && i % 3 == 0).count();
        assert_eq!(db.expires_count(), expected_expires);
    }

    #[test]
    fn set_unless_expired_is_set_in_one_probe_and_leaves_expired_keys_alone() {
        let mut db: Db<Value> = Db::new();
        db.set(b"a", Value::Int(1), None);
        db.set(b"old", Value::Int(2), Some(50));
        db.set(b"b", Value::Int(3), Some(500));
        // A live key is replaced where it is, its expiry changed.
        assert!(db
            .set_unless_expired(b"b", Value::Int(4), None, 100)
            .is_ok());
        // A new key is appended.
        assert!(db
            .set_unless_expired(b"c", Value::Int(5), Some(900), 100)
            .is_ok());
        // An expired key is left for the caller to expire.
        assert_eq!(
            db.set_unless_expired(b"old", Value::Int(6), None, 100),
            Err(Value::Int(6))
        );
        let order: Vec<(&[u8], Value, Option<u64>)> = db
            .iter()
            .map(|e| (e.key.as_slice(), e.value.clone(), e.expire_at()))
            .collect();
        let want: Vec<(&[u8], Value, Option<u64>)> = vec![
            (b"a", Value::Int(1), None),
            (b"old", Value::Int(2), Some(50)),
            (b"b", Value::Int(4), None),
            (b"c", Value::Int(5), Some(900)),
        ];
        assert_eq!(order, want);
        assert_eq!(db.expires_count(), 2);
        assert_eq!(db.get(b"c").map(|e| e.value.clone()), Some(Value::Int(5)));
    }

    #[test]
    fn replace_returns_old_and_updates_expiry() {
        let mut db: Db<Value> = Db::new();
        assert!(db.set(b"a", Value::Int(1), Some(10)).is_none());
        let old = db
            .set(b"a", Value::Int(2), None)
            .map(|e| (e.expire_at(), e.value));
        assert_eq!(old, Some((Some(10), Value::Int(1))));
        assert_eq!(db.expires_count(), 0);
        assert!(db.set_expire(b"a", Some(99)));
        assert_eq!(db.get(b"a").and_then(|e| e.expire_at()), Some(99));
        assert!(!db.set_expire(b"missing", Some(1)));
    }

    #[test]
    fn a_database_emptied_by_removals_gives_its_memory_back() {
        let mut db: Db<Value> = Db::new();
        for i in 0..100_000 {
            db.set(format!("k{i}").as_bytes(), Value::Int(i), None);
        }
        let full = db.entries.capacity() + db.index.capacity();
        for i in 0..99_000 {
            assert!(db.remove(format!("k{i}").as_bytes()).is_some());
        }
        assert!(
            db.entries.capacity() + db.index.capacity() <= full / 8,
            "{}",
            db.entries.capacity() + db.index.capacity()
        );
        for i in 99_000..100_000 {
            assert_eq!(
                db.get(format!("k{i}").as_bytes()).map(|e| &e.value),
                Some(&Value::Int(i))
            );
        }
        assert_eq!(keys(&db).len(), 1_000);
    }

    #[test]
    fn entry_is_small() {
        // Key 24, value 32, expiry 8, access stamp 4 (+ padding).
        assert!(
            std::mem::size_of::<Entry<[u64; 4]>>() <= 72,
            "{}",
            std::mem::size_of::<Entry<[u64; 4]>>()
        );
    }
}
