//! The Hash value type, in Redis's two encodings.
//!
//! - **listpack** (small hashes): one byte buffer of length-prefixed
//!   entries, field then value, in insertion order, scanned linearly. A
//!   field costs its bytes plus a 1-byte length for anything under 128
//!   bytes, so a small hash is little more than its data.
//! - **hashtable** (past [`HashLimits`]): a dense vector of entries, each
//!   one allocation holding `len(field) field value`, plus a fixed-seed
//!   hash index (`hashbrown::HashTable<u32>`) of positions into it. No
//!   per-field `Vec` headers and no separate value allocation: a 10-field
//!   hash of 100-byte values (YCSB's record) costs about 1.4 KB, less than
//!   Redis's dict.
//!
//! A hash converts from listpack to hashtable when it gets more entries
//! than `max_listpack_entries` or a field or value longer than
//! `max_listpack_value`, and never converts back (as Redis).
//!
//! Iteration order is a pure function of the operations applied (insertion
//! order, with removal in a hashtable moving the last entry into the hole),
//! so HGETALL and random picks agree on every replica.
//!
//! This module knows nothing about commands, replies or expiry.

use hashbrown::HashTable;
use std::hash::BuildHasher;

/// The listpack thresholds: Redis's hash-max-listpack-entries and
/// hash-max-listpack-value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashLimits {
    pub max_listpack_entries: usize,
    pub max_listpack_value: usize,
}

impl Default for HashLimits {
    fn default() -> Self {
        HashLimits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        }
    }
}

/// A Redis hash value.
#[derive(Clone, Default)]
pub struct Hash {
    repr: Repr,
}

/// The table is boxed so that a small hash (the common case) costs a
/// 32-byte header, not one sized for the table.
#[derive(Clone)]
enum Repr {
    Listpack(Listpack),
    Table(Box<Table>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Listpack(Listpack::default())
    }
}

impl Hash {
    /// An empty hash (listpack-encoded).
    pub fn new() -> Hash {
        Hash::default()
    }

    /// An empty hash already in the hashtable encoding, with room for
    /// `capacity` pairs. For restoring a snapshot: a hash never converts
    /// back, so one that shrank below the limits (or was built under other
    /// limits) keeps the encoding its source had.
    pub fn new_table(capacity: usize) -> Hash {
        Hash {
            repr: Repr::Table(Box::new(Table::with_capacity(capacity))),
        }
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.len,
            Repr::Table(t) => t.entries.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned (MEMORY USAGE), without allocator rounding.
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.buf.capacity(),
            Repr::Table(t) => {
                std::mem::size_of::<Table>()
                    + t.entries.capacity() * std::mem::size_of::<Box<[u8]>>()
                    + t.data_bytes
                    + t.index.allocation_size()
            }
        }
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Listpack(lp) => lp.find(field).map(|s| &lp.buf[s.value.0..s.value.1]),
            Repr::Table(t) => t.find(field).map(|i| entry_parts(&t.entries[i]).1),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Readies the hash for a write of `pairs` field/value pairs whose
    /// longest field or value is `longest` bytes: converts to a hashtable
    /// first when that is too long for a listpack (Redis's
    /// hashTypeTryConversion), and gives a still-empty hashtable room for
    /// all the pairs, so a hash written by one HSET owns no spare capacity.
    pub fn reserve(&mut self, pairs: usize, longest: usize, limits: HashLimits) {
        if longest > limits.max_listpack_value {
            self.convert_to_table(pairs);
        }
        if let Repr::Table(t) = &mut self.repr {
            if t.entries.is_empty() {
                t.reserve_exact(pairs);
            }
        }
    }

    /// Sets `field` to `value`; true if the field is new. Converts to a
    /// hashtable when the pair is too long for a listpack, or the listpack
    /// gets too many entries.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: HashLimits) -> bool {
        if field.len() > limits.max_listpack_value || value.len() > limits.max_listpack_value {
            self.convert_to_table(0);
        }
        let added = match &mut self.repr {
            Repr::Listpack(lp) => lp.set(field, value),
            Repr::Table(t) => t.set(field, value),
        };
        if self.len() > limits.max_listpack_entries {
            self.convert_to_table(0);
        }
        added
    }

    /// Removes `field`; true if it was there. The caller deletes the key
    /// when the hash becomes empty.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Listpack(lp) => lp.remove(field),
            Repr::Table(t) => t.remove(field),
        }
    }

    /// (field, value) pairs in iteration order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(match &self.repr {
            Repr::Listpack(lp) => IterRepr::Listpack(LpIter {
                buf: &lp.buf,
                pos: 0,
            }),
            Repr::Table(t) => IterRepr::Table(t.entries.iter()),
        })
    }

    /// A view with O(1) access to the n-th pair (for random picks). A
    /// listpack is decoded once into a vector of slices; a hashtable is
    /// already indexable.
    pub fn indexed(&self) -> Indexed<'_> {
        Indexed(match &self.repr {
            Repr::Listpack(lp) => IndexedRepr::Pairs(
                LpIter {
                    buf: &lp.buf,
                    pos: 0,
                }
                .collect(),
            ),
            Repr::Table(t) => IndexedRepr::Table(&t.entries),
        })
    }

    /// One HSCAN step: visits up to `count` pairs below `cursor` and
    /// returns the next cursor (0 when done). A listpack is returned whole
    /// in one call with cursor 0, as Redis does. A hashtable is walked from
    /// the end of its entry vector towards the start, the cursor being the
    /// number of positions left: removal moves the *last* entry into the
    /// hole, and the last entry is always one already visited (or, when
    /// the vector shrank below the cursor, one not yet visited moving to
    /// another unvisited slot), so a field present for the whole scan is
    /// never skipped. Fields added during the scan may be missed.
    pub fn scan(&self, cursor: u64, count: u64, mut visit: impl FnMut(&[u8], &[u8])) -> u64 {
        match &self.repr {
            Repr::Listpack(_) => {
                for (f, v) in self.iter() {
                    visit(f, v);
                }
                0
            }
            Repr::Table(t) => {
                let len = t.entries.len() as u64;
                let mut pos = if cursor == 0 { len } else { cursor.min(len) };
                let mut visited = 0;
                while pos > 0 && visited < count {
                    pos -= 1;
                    visited += 1;
                    let (f, v) = entry_parts(&t.entries[pos as usize]);
                    visit(f, v);
                }
                pos
            }
        }
    }

    /// Switches to the hashtable encoding (no-op if already there), with
    /// room for `extra` more entries.
    fn convert_to_table(&mut self, extra: usize) {
        let Repr::Listpack(lp) = &self.repr else {
            return;
        };
        let mut t = Table::with_capacity(lp.len + extra);
        for (f, v) in (LpIter {
            buf: &lp.buf,
            pos: 0,
        }) {
            t.set(f, v);
        }
        self.repr = Repr::Table(Box::new(t));
    }
}

impl PartialEq for Hash {
    /// Same encoding and the same pairs in the same order: what replicas
    /// that applied the same commands must agree on.
    fn eq(&self, other: &Hash) -> bool {
        self.encoding() == other.encoding()
            && self.len() == other.len()
            && self.iter().eq(other.iter())
    }
}

impl Eq for Hash {}

impl std::fmt::Debug for Hash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        struct Lossy<'a>(&'a [u8]);
        impl std::fmt::Debug for Lossy<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{:?}", String::from_utf8_lossy(self.0))
            }
        }
        write!(f, "Hash({}) ", self.encoding())?;
        f.debug_map()
            .entries(self.iter().map(|(k, v)| (Lossy(k), Lossy(v))))
            .finish()
    }
}

/// Iterator over a hash's (field, value) pairs.
pub struct Iter<'a>(IterRepr<'a>);

enum IterRepr<'a> {
    Listpack(LpIter<'a>),
    Table(std::slice::Iter<'a, Box<[u8]>>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::Listpack(it) => it.next(),
            IterRepr::Table(it) => it.next().map(|e| entry_parts(e)),
        }
    }
}

/// Random access to a hash's pairs, see [`Hash::indexed`].
pub struct Indexed<'a>(IndexedRepr<'a>);

enum IndexedRepr<'a> {
    Pairs(Vec<(&'a [u8], &'a [u8])>),
    Table(&'a [Box<[u8]>]),
}

impl<'a> Indexed<'a> {
    pub fn len(&self) -> usize {
        match &self.0 {
            IndexedRepr::Pairs(p) => p.len(),
            IndexedRepr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pair at position `i` of iteration order.
    pub fn get(&self, i: usize) -> Option<(&'a [u8], &'a [u8])> {
        match &self.0 {
            IndexedRepr::Pairs(p) => p.get(i).copied(),
            IndexedRepr::Table(t) => t.get(i).map(|e| entry_parts(e)),
        }
    }
}

// ---------------------------------------------------------------------------
// Length prefixes: LEB128, 1 byte below 128.
// ---------------------------------------------------------------------------

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn write_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a length written by [`write_varint`] at `pos`; returns it and
/// the position after it. Only ever reads buffers this module wrote.
fn read_varint(buf: &[u8], mut pos: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[pos];
        pos += 1;
        n |= ((b & 0x7f) as usize) << shift;
        if b < 0x80 {
            return (n, pos);
        }
        shift += 7;
    }
}

// ---------------------------------------------------------------------------
// Listpack
// ---------------------------------------------------------------------------

/// `len(f1) f1 len(v1) v1 len(f2) f2 ...` in insertion order.
#[derive(Clone, Default)]
struct Listpack {
    buf: Vec<u8>,
    len: usize,
}

/// Where one pair lives in a listpack: the pair spans `start..value.1`,
/// the value's bytes are `value.0..value.1` and its length prefix starts
/// at `value_prefix`.
struct LpSlot {
    start: usize,
    value_prefix: usize,
    value: (usize, usize),
}

impl Listpack {
    fn find(&self, field: &[u8]) -> Option<LpSlot> {
        let buf = &self.buf;
        let mut pos = 0;
        while pos < buf.len() {
            let start = pos;
            let (flen, fstart) = read_varint(buf, pos);
            let value_prefix = fstart + flen;
            let (vlen, vstart) = read_varint(buf, value_prefix);
            pos = vstart + vlen;
            if &buf[fstart..value_prefix] == field {
                return Some(LpSlot {
                    start,
                    value_prefix,
                    value: (vstart, pos),
                });
            }
        }
        None
    }

    fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let mut encoded = Vec::with_capacity(varint_len(value.len()) + value.len());
        write_varint(&mut encoded, value.len());
        encoded.extend_from_slice(value);
        match self.find(field) {
            Some(slot) => {
                let old = slot.value.1 - slot.value_prefix;
                if encoded.len() > old {
                    self.buf.reserve_exact(encoded.len() - old);
                }
                self.buf.splice(slot.value_prefix..slot.value.1, encoded);
                false
            }
            None => {
                // Exact growth: a listpack is small and rarely appended to
                // in bulk; jemalloc grows it in place within a size class.
                self.buf
                    .reserve_exact(varint_len(field.len()) + field.len() + encoded.len());
                write_varint(&mut self.buf, field.len());
                self.buf.extend_from_slice(field);
                self.buf.extend_from_slice(&encoded);
                self.len += 1;
                true
            }
        }
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        let Some(slot) = self.find(field) else {
            return false;
        };
        self.buf.drain(slot.start..slot.value.1);
        self.len -= 1;
        if self.buf.capacity() > 2 * self.buf.len() + 64 {
            self.buf.shrink_to_fit();
        }
        true
    }
}

struct LpIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for LpIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let (flen, fstart) = read_varint(self.buf, self.pos);
        let (vlen, vstart) = read_varint(self.buf, fstart + flen);
        self.pos = vstart + vlen;
        Some((
            &self.buf[fstart..fstart + flen],
            &self.buf[vstart..self.pos],
        ))
    }
}

// ---------------------------------------------------------------------------
// Hashtable
// ---------------------------------------------------------------------------

/// Fixed seed: the index layout never shows (iteration goes through the
/// entry vector), the fixed seed only keeps runs reproducible.
const FIELD_HASHER: foldhash::fast::FixedState =
    foldhash::fast::FixedState::with_seed(0x6b76_6173_6972_6868);

fn hash_field(field: &[u8]) -> u64 {
    FIELD_HASHER.hash_one(field)
}

/// One allocation per pair: `len(field) field value`.
fn encode_entry(field: &[u8], value: &[u8]) -> Box<[u8]> {
    let mut e = Vec::with_capacity(varint_len(field.len()) + field.len() + value.len());
    write_varint(&mut e, field.len());
    e.extend_from_slice(field);
    e.extend_from_slice(value);
    e.into_boxed_slice()
}

/// The index hash of an entry (of its field).
fn hash_entry(e: &[u8]) -> u64 {
    hash_field(entry_parts(e).0)
}

fn entry_parts(e: &[u8]) -> (&[u8], &[u8]) {
    let (flen, fstart) = read_varint(e, 0);
    (&e[fstart..fstart + flen], &e[fstart + flen..])
}

/// A hashtable of up to this many entries has no index: a linear scan of
/// so few fields is as fast as hashing, and a YCSB record (10 fields)
/// saves the index's ~100 bytes.
const LINEAR_MAX: usize = 16;

/// Dense entries plus an index of their positions, hashed by field. The
/// index is either complete (`index.len() == entries.len()`) or empty, in
/// which case there are at most [`LINEAR_MAX`] entries, found by scanning.
/// It is built when the entries first outgrow that, and kept after.
#[derive(Clone, Default)]
struct Table {
    entries: Vec<Box<[u8]>>,
    index: HashTable<u32>,
    /// Sum of the entries' lengths (heap_size without a walk).
    data_bytes: usize,
}

impl Table {
    /// An empty table with room for `n` entries (and their index, if it
    /// will need one).
    fn with_capacity(n: usize) -> Table {
        Table {
            entries: Vec::with_capacity(n),
            index: HashTable::with_capacity(if n > LINEAR_MAX { n } else { 0 }),
            data_bytes: 0,
        }
    }

    fn indexed(&self) -> bool {
        !self.index.is_empty()
    }

    fn reserve_exact(&mut self, n: usize) {
        self.entries.reserve_exact(n);
        if self.entries.len() + n > LINEAR_MAX {
            let entries = &self.entries;
            self.index.reserve(n, |&i| hash_entry(&entries[i as usize]));
        }
    }

    fn find(&self, field: &[u8]) -> Option<usize> {
        if !self.indexed() {
            return self.entries.iter().position(|e| entry_parts(e).0 == field);
        }
        let entries = &self.entries;
        self.index
            .find(hash_field(field), |&i| {
                entry_parts(&entries[i as usize]).0 == field
            })
            .map(|&i| i as usize)
    }

    fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let entry = encode_entry(field, value);
        if let Some(i) = self.find(field) {
            self.data_bytes = self.data_bytes - self.entries[i].len() + entry.len();
            self.entries[i] = entry;
            return false;
        }
        // Positions are u32: a hash of 4 billion fields would not fit in
        // memory long before.
        let pos = self.entries.len() as u32;
        self.data_bytes += entry.len();
        self.entries.push(entry);
        let entries = &self.entries;
        if self.indexed() {
            self.index.insert_unique(hash_field(field), pos, |&i| {
                hash_entry(&entries[i as usize])
            });
        } else if entries.len() > LINEAR_MAX {
            let hasher = |&i: &u32| hash_entry(&entries[i as usize]);
            self.index.reserve(entries.len(), hasher);
            for (i, e) in entries.iter().enumerate() {
                self.index.insert_unique(hash_entry(e), i as u32, hasher);
            }
        }
        true
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        let Some(pos) = self.find(field) else {
            return false;
        };
        let last = self.entries.len() - 1;
        if self.indexed() {
            if let Ok(slot) = self
                .index
                .find_entry(hash_field(field), |&i| i as usize == pos)
            {
                slot.remove();
            }
            if pos != last {
                // The last entry moves into the hole: repoint its slot.
                let moved = hash_entry(&self.entries[last]);
                if let Some(slot) = self.index.find_mut(moved, |&i| i as usize == last) {
                    *slot = pos as u32;
                }
            }
        }
        let removed = self.entries.swap_remove(pos);
        self.data_bytes -= removed.len();
        // Give memory back once the hash has shrunk to a quarter, as
        // Redis's dict does (it resizes below 10% fill).
        let len = self.entries.len();
        if self.entries.capacity() >= 64 && len * 4 <= self.entries.capacity() {
            self.entries.shrink_to(len * 2);
            let entries = &self.entries;
            self.index
                .shrink_to(len * 2, |&i| hash_entry(&entries[i as usize]));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: HashLimits = HashLimits {
        max_listpack_entries: 128,
        max_listpack_value: 64,
    };

    fn pairs(h: &Hash) -> Vec<(Vec<u8>, Vec<u8>)> {
        h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
    }

    #[test]
    fn varints_round_trip() {
        for n in [
            0usize,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            1 << 30,
            usize::MAX,
        ] {
            let mut buf = Vec::new();
            write_varint(&mut buf, n);
            assert_eq!(buf.len(), varint_len(n), "{n}");
            assert_eq!(read_varint(&buf, 0), (n, buf.len()), "{n}");
        }
    }

    #[test]
    fn listpack_set_get_update_remove() {
        let mut h = Hash::new();
        assert!(h.is_empty());
        assert!(h.set(b"a", b"1", LIMITS));
        assert!(h.set(b"b", b"", LIMITS));
        assert!(h.set(b"", b"empty field", LIMITS));
        assert!(!h.set(b"a", b"longer value", LIMITS));
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(h.len(), 3);
        assert_eq!(h.get(b"a"), Some(&b"longer value"[..]));
        assert_eq!(h.get(b"b"), Some(&b""[..]));
        assert_eq!(h.get(b""), Some(&b"empty field"[..]));
        assert_eq!(h.get(b"c"), None);
        assert!(!h.set(b"a", b"x", LIMITS));
        assert_eq!(
            pairs(&h),
            vec![
                (b"a".to_vec(), b"x".to_vec()),
                (b"b".to_vec(), b"".to_vec()),
                (b"".to_vec(), b"empty field".to_vec()),
            ]
        );
        assert!(h.remove(b"b"));
        assert!(!h.remove(b"b"));
        assert_eq!(h.len(), 2);
        assert_eq!(h.get(b""), Some(&b"empty field"[..]));
        assert!(h.remove(b"a"));
        assert!(h.remove(b""));
        assert!(h.is_empty());
        assert_eq!(h.iter().count(), 0);
    }

    #[test]
    fn listpack_is_compact() {
        let mut h = Hash::new();
        for i in 0..10 {
            h.set(format!("field{i}").as_bytes(), &[b'x'; 60], LIMITS);
        }
        assert_eq!(h.encoding(), "listpack");
        // 10 × (1 + 6 + 1 + 60) bytes of payload, no slack.
        assert_eq!(h.heap_size(), 680);
    }

    #[test]
    fn long_value_or_field_converts() {
        let mut h = Hash::new();
        h.set(b"a", &[b'v'; 64], LIMITS);
        assert_eq!(h.encoding(), "listpack", "64 bytes still fit");
        h.set(b"b", &[b'v'; 65], LIMITS);
        assert_eq!(h.encoding(), "hashtable");
        let mut h = Hash::new();
        h.set(&[b'f'; 65], b"v", LIMITS);
        assert_eq!(h.encoding(), "hashtable");
        // Updating an existing field with a long value converts too.
        let mut h = Hash::new();
        h.set(b"a", b"1", LIMITS);
        h.set(b"a", &[b'v'; 100], LIMITS);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"a"), Some(&[b'v'; 100][..]));
    }

    #[test]
    fn too_many_entries_converts_and_never_back() {
        let mut h = Hash::new();
        for i in 0..128 {
            h.set(i.to_string().as_bytes(), b"v", LIMITS);
        }
        assert_eq!(h.encoding(), "listpack");
        let before = pairs(&h);
        h.set(b"128", b"v", LIMITS);
        assert_eq!(h.encoding(), "hashtable");
        // Conversion keeps the order.
        assert_eq!(pairs(&h)[..128], before[..]);
        for i in 0..129 {
            assert!(h.remove(i.to_string().as_bytes()));
        }
        assert!(h.is_empty());
        assert_eq!(h.encoding(), "hashtable");
    }

    #[test]
    fn zero_limits_make_every_hash_a_table() {
        let limits = HashLimits {
            max_listpack_entries: 0,
            max_listpack_value: 0,
        };
        let mut h = Hash::new();
        h.set(b"", b"", limits);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b""), Some(&b""[..]));
    }

    #[test]
    fn table_matches_a_model_under_random_ops() {
        let mut h = Hash::new();
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut x: u64 = 42;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let field = format!("f{}", x % 300).into_bytes();
            let value = vec![b'a' + (step % 26) as u8; (x % 90) as usize];
            if x.is_multiple_of(3) {
                let had = model.iter().position(|(f, _)| *f == field);
                assert_eq!(h.remove(&field), had.is_some());
                if let Some(i) = had {
                    model.remove(i);
                }
            } else {
                let had = model.iter().position(|(f, _)| *f == field);
                assert_eq!(h.set(&field, &value, LIMITS), had.is_none());
                match had {
                    Some(i) => model[i].1 = value,
                    None => model.push((field, value)),
                }
            }
            assert_eq!(h.len(), model.len());
        }
        assert_eq!(h.encoding(), "hashtable");
        for (f, v) in &model {
            assert_eq!(h.get(f), Some(&v[..]));
        }
        let mut got = pairs(&h);
        got.sort();
        model.sort();
        assert_eq!(got, model);
        let data: usize = h.iter().map(|(f, v)| 1 + f.len() + v.len()).sum();
        match &h.repr {
            Repr::Table(t) => assert_eq!(t.data_bytes, data),
            Repr::Listpack(_) => unreachable!(),
        }
    }

    #[test]
    fn ycsb_record_is_compact() {
        let mut h = Hash::new();
        h.reserve(10, 100, LIMITS);
        for i in 0..10 {
            h.set(format!("field{i}").as_bytes(), &[b'x'; 100], LIMITS);
        }
        assert_eq!(h.encoding(), "hashtable");
        // The table header, 10 entries of 107 bytes and 10 slots of 16;
        // no index that small.
        let header = std::mem::size_of::<Table>();
        assert_eq!(h.heap_size(), header + 1070 + 160);
        // Updates reuse the slots.
        h.reserve(1, 100, LIMITS);
        h.set(b"field3", &[b'y'; 100], LIMITS);
        assert_eq!(h.heap_size(), header + 1070 + 160);
    }

    #[test]
    fn small_tables_scan_and_big_ones_index() {
        let mut h = Hash::new();
        h.set(b"long", &[b'x'; 100], LIMITS);
        let indexed = |h: &Hash| match &h.repr {
            Repr::Table(t) => t.indexed(),
            Repr::Listpack(_) => unreachable!(),
        };
        for round in 0..3 {
            for i in 0..LINEAR_MAX - 1 {
                h.set(format!("f{i}").as_bytes(), b"v", LIMITS);
            }
            assert_eq!(h.len(), LINEAR_MAX);
            assert!(!indexed(&h) || round > 0);
            h.set(b"one more", b"v", LIMITS);
            assert!(indexed(&h), "round {round}");
            for i in 0..LINEAR_MAX - 1 {
                assert_eq!(h.get(format!("f{i}").as_bytes()), Some(&b"v"[..]));
            }
            assert_eq!(h.get(b"long"), Some(&[b'x'; 100][..]));
            for i in 0..LINEAR_MAX - 1 {
                assert!(h.remove(format!("f{i}").as_bytes()));
            }
            assert!(h.remove(b"one more"));
            assert_eq!(h.len(), 1);
            assert_eq!(h.get(b"long"), Some(&[b'x'; 100][..]));
            assert_eq!(h.get(b"f0"), None);
        }
        assert!(h.remove(b"long"));
        assert!(h.is_empty());
        assert!(!indexed(&h));
        h.set(b"again", b"v", LIMITS);
        assert_eq!(h.get(b"again"), Some(&b"v"[..]));
    }

    #[test]
    fn scan_visits_everything_that_stays() {
        let mut h = Hash::new();
        for i in 0..500 {
            h.set(format!("f{i}").as_bytes(), b"v", LIMITS);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = h.scan(cursor, 7, |f, _| {
                seen.insert(f.to_vec());
            });
            // Delete some fields (never the ones with an odd number) while
            // scanning.
            for j in 0..3 {
                h.remove(format!("f{}", (round * 3 + j) * 2).as_bytes());
            }
            round += 1;
            if cursor == 0 {
                break;
            }
        }
        for i in (1..500).step_by(2) {
            assert!(seen.contains(format!("f{i}").as_bytes()), "f{i} missed");
        }
    }

    #[test]
    fn listpack_scan_returns_all_at_once() {
        let mut h = Hash::new();
        for i in 0..20 {
            h.set(format!("f{i}").as_bytes(), b"v", LIMITS);
        }
        let mut n = 0;
        assert_eq!(h.scan(0, 1, |_, _| n += 1), 0);
        assert_eq!(n, 20);
    }

    #[test]
    fn indexed_view_matches_iteration() {
        for count in [5, 200] {
            let mut h = Hash::new();
            for i in 0..count {
                h.set(format!("f{i}").as_bytes(), i.to_string().as_bytes(), LIMITS);
            }
            let view = h.indexed();
            assert_eq!(view.len(), count);
            let all: Vec<_> = h.iter().collect();
            for (i, p) in all.iter().enumerate() {
                assert_eq!(view.get(i), Some(*p));
            }
            assert_eq!(view.get(count), None);
        }
    }

    #[test]
    fn equality_and_clone() {
        let mut a = Hash::new();
        a.set(b"x", b"1", LIMITS);
        let mut b = a.clone();
        assert_eq!(a, b);
        b.set(b"x", b"2", LIMITS);
        assert_ne!(a, b);
        let mut c = Hash::new();
        c.set(b"x", &[b'1'; 100], LIMITS);
        c.set(b"x", b"1", LIMITS);
        assert_ne!(a, c, "same pairs, different encoding");
        assert!(format!("{a:?}").contains("listpack"));
    }

    #[test]
    fn hash_header_is_small() {
        assert!(
            std::mem::size_of::<Hash>() <= 64,
            "{}",
            std::mem::size_of::<Hash>()
        );
    }
}
