//! The sorted set value: members ordered by (score, member bytes), each
//! member once, scores f64 and never NaN (-0.0 and 0.0 compare equal).
//!
//! Two encodings, as in Redis (OBJECT ENCODING answers with its names):
//!
//! - `listpack` ([`Listpack`]) for small sets: one byte buffer of entries in
//!   order, each `varint(len) member score`, the score an integer varint when
//!   it is integral (Redis's listpack stores `-0` as the integer 0 too) or
//!   eight raw bytes otherwise. Everything is a linear scan; a few bytes per
//!   member beyond the data.
//! - `skiplist` ([`Indexed`]) once the set outgrows the limits given by the
//!   caller (zset-max-listpack-entries / -value). Members live once, in a
//!   dense slot vector; a hash index (fixed seed) maps a member to its slot,
//!   and an order-statistic B+tree of (score, slot) keys, with the size of
//!   every subtree in its parent, gives rank, select and range lookups in
//!   O(log n). The tree compares equal scores by the members the slots hold,
//!   so no member is stored twice. Removal moves the last slot into the hole
//!   (like `Db`), which keeps slots dense and lets ZSCAN walk them backwards
//!   with SCAN's guarantee.
//!
//! Like Redis, a set never converts back to a listpack. This module knows
//! nothing of commands: it stores, orders and answers lookups; every
//! operation is a pure function of the sequence of calls, so replicas agree.

use crate::value::CompactBytes;
use hashbrown::HashTable;
use smallvec::SmallVec;
use std::cmp::Ordering;
use std::hash::BuildHasher;

/// The thresholds of the compact encoding (Redis's zset-max-listpack-*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZSetLimits {
    /// Most entries a listpack may hold.
    pub max_listpack_entries: usize,
    /// Longest member a listpack may hold, in bytes.
    pub max_listpack_value: usize,
}

impl Default for ZSetLimits {
    fn default() -> Self {
        ZSetLimits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        }
    }
}

/// A Redis zset value.
#[derive(Clone, Default)]
pub struct ZSet {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Listpack(Listpack),
    Indexed(Box<Indexed>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Listpack(Listpack::default())
    }
}

impl ZSet {
    /// An empty set in the listpack encoding.
    pub fn new() -> ZSet {
        ZSet::default()
    }

    /// An empty set already in the indexed ("skiplist") encoding, for
    /// results known to be too big for a listpack (Redis creates those
    /// directly as skiplists, which keeps a score of -0 as it is).
    pub fn new_indexed() -> ZSet {
        ZSet {
            repr: Repr::Indexed(Box::new(Indexed::with_capacity(0))),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.len,
            Repr::Indexed(ix) => ix.slots.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.buf.capacity(),
            Repr::Indexed(ix) => std::mem::size_of::<Indexed>() + ix.heap_size(),
        }
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Indexed(_) => "skiplist",
        }
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Listpack(lp) => lp.find(member).map(|e| e.score),
            Repr::Indexed(ix) => ix.find(member).map(|id| ix.slots[id].score),
        }
    }

    /// Sets the score of `member`, adding it if absent, and returns its
    /// previous score. Adding converts to the indexed encoding when the set
    /// would outgrow `limits`.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: ZSetLimits) -> Option<f64> {
        match &mut self.repr {
            Repr::Listpack(lp) => {
                if let Some(e) = lp.find(member) {
                    let old = e.score;
                    // An unchanged score keeps the entry as it is.
                    if old.to_bits() != score.to_bits() {
                        lp.remove_bytes(e.start, e.end, 1);
                        lp.insert(member, score);
                    }
                    return Some(old);
                }
            }
            Repr::Indexed(ix) => return ix.set(member, score),
        }
        self.insert_absent(member, score, limits);
        None
    }

    /// Adds `member`, which the caller knows is absent, without looking
    /// for it first (ZADD has just asked for its score); converts as
    /// [`ZSet::insert`] does.
    pub fn insert_absent(&mut self, member: &[u8], score: f64, limits: ZSetLimits) {
        if let Repr::Listpack(lp) = &mut self.repr {
            if lp.len < limits.max_listpack_entries && member.len() <= limits.max_listpack_value {
                lp.insert(member, score);
                return;
            }
            self.convert();
        }
        if let Repr::Indexed(ix) = &mut self.repr {
            ix.set(member, score);
        }
    }

    /// Removes `member`, returning its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Listpack(lp) => {
                let e = lp.find(member)?;
                let score = e.score;
                lp.remove_bytes(e.start, e.end, 1);
                Some(score)
            }
            Repr::Indexed(ix) => ix.remove(member),
        }
    }

    /// Zero-based rank of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match &self.repr {
            Repr::Listpack(lp) => lp.iter().position(|e| e.member == member),
            Repr::Indexed(ix) => {
                let id = ix.find(member)?;
                let key = Key {
                    score: ix.slots[id].score,
                    id: id as u32,
                };
                let slots = &ix.slots;
                Some(
                    ix.tree
                        .partition_point(|k| order(slots, k, key) == Ordering::Less),
                )
            }
        }
    }

    /// The element at ascending rank `rank`.
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        self.iter_from(rank, false).next()
    }

    /// Every element in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, false)
    }

    /// Elements from rank `start` on: ascending from the `start`-th lowest,
    /// or (`rev`) descending from the `start`-th highest.
    pub fn iter_from(&self, start: usize, rev: bool) -> Iter<'_> {
        let len = self.len();
        let inner = match &self.repr {
            Repr::Listpack(lp) if !rev => {
                let mut it = lp.iter();
                if start >= len {
                    it.pos = lp.buf.len();
                } else {
                    for _ in 0..start {
                        it.next();
                    }
                }
                IterInner::Listpack(it)
            }
            Repr::Listpack(lp) => {
                let mut offsets: Vec<u32> = lp.iter().map(|e| e.start as u32).collect();
                offsets.truncate(len.saturating_sub(start));
                IterInner::ListpackRev(lp, offsets)
            }
            Repr::Indexed(ix) => {
                let tree_iter = if start >= len {
                    TreeIter::empty(rev)
                } else if rev {
                    ix.tree.iter_at(len - 1 - start, true)
                } else {
                    ix.tree.iter_at(start, false)
                };
                IterInner::Tree(&ix.slots, tree_iter)
            }
        };
        Iter { inner }
    }

    /// How many leading elements (ascending) have a score for which `pred`
    /// holds; `pred` must hold for a prefix of the scores (like
    /// `slice::partition_point`).
    pub fn count_scores_where(&self, mut pred: impl FnMut(f64) -> bool) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.iter().take_while(|e| pred(e.score)).count(),
            Repr::Indexed(ix) => ix.tree.partition_point(|k| pred(k.score)),
        }
    }

    /// How many leading elements (ascending) satisfy `pred`, which must hold
    /// for a prefix of the elements.
    pub fn count_where(&self, mut pred: impl FnMut(&[u8], f64) -> bool) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.iter().take_while(|e| pred(e.member, e.score)).count(),
            Repr::Indexed(ix) => {
                let slots = &ix.slots;
                ix.tree
                    .partition_point(|k| pred(&slots[k.id as usize].member, k.score))
            }
        }
    }

    /// Removes the elements of ascending ranks `start..end` and returns how
    /// many went.
    pub fn remove_range(&mut self, start: usize, end: usize) -> usize {
        let end = end.min(self.len());
        if start >= end {
            return 0;
        }
        match &mut self.repr {
            Repr::Listpack(lp) => {
                let mut from = lp.buf.len();
                let mut to = lp.buf.len();
                for (i, e) in lp.iter().enumerate() {
                    if i == start {
                        from = e.start;
                    }
                    if i == end {
                        to = e.start;
                        break;
                    }
                }
                lp.remove_bytes(from, to, end - start);
            }
            Repr::Indexed(ix) => {
                let members: Vec<CompactBytes> = ix
                    .tree
                    .iter_at(start, false)
                    .take(end - start)
                    .map(|k| ix.slots[k.id as usize].member.clone())
                    .collect();
                for m in &members {
                    ix.remove(m);
                }
            }
        }
        end - start
    }

    /// Removes and returns the lowest (or, `max`, the highest) element.
    pub fn pop(&mut self, max: bool) -> Option<(Vec<u8>, f64)> {
        let (member, score) = self.iter_from(0, max).next()?;
        let member = member.to_vec();
        self.remove(&member);
        Some((member, score))
    }

    /// One step of ZSCAN: calls `f` for the elements of up to `count`
    /// positions below `cursor` and returns the next cursor (0 at the end).
    /// A listpack is returned whole. Indexed sets walk their dense slots
    /// backwards from the end, as SCAN does over the keyspace: removal moves
    /// the last slot (already visited, or both unvisited) into the hole, so
    /// an element present for the whole iteration is never missed.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        match &self.repr {
            Repr::Listpack(lp) => {
                for e in lp.iter() {
                    f(e.member, e.score);
                }
                0
            }
            Repr::Indexed(ix) => {
                let len = ix.slots.len() as u64;
                let mut pos = if cursor == 0 { len } else { cursor.min(len) };
                let mut visited = 0;
                while pos > 0 && visited < count {
                    pos -= 1;
                    visited += 1;
                    let slot = &ix.slots[pos as usize];
                    f(&slot.member, slot.score);
                }
                pos
            }
        }
    }

    /// Switches to the indexed encoding.
    fn convert(&mut self) {
        if let Repr::Listpack(lp) = &self.repr {
            let mut ix = Indexed::with_capacity(lp.len + 1);
            for e in lp.iter() {
                ix.set(e.member, e.score);
            }
            self.repr = Repr::Indexed(Box::new(ix));
        }
    }
}

impl PartialEq for ZSet {
    /// Same encoding, same elements in the same order, scores compared by
    /// their bits.
    fn eq(&self, other: &ZSet) -> bool {
        self.encoding() == other.encoding()
            && self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|((m1, s1), (m2, s2))| m1 == m2 && s1.to_bits() == s2.to_bits())
    }
}

impl Eq for ZSet {}

impl std::fmt::Debug for ZSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries: Vec<(String, f64)> = self
            .iter()
            .map(|(m, s)| (String::from_utf8_lossy(m).into_owned(), s))
            .collect();
        f.debug_struct("ZSet")
            .field("encoding", &self.encoding())
            .field("entries", &entries)
            .finish()
    }
}

/// Iterator over (member, score) pairs in rank order.
pub struct Iter<'a> {
    inner: IterInner<'a>,
}

enum IterInner<'a> {
    Listpack(LpIter<'a>),
    /// Reverse walk of a listpack: entry offsets, consumed from the end.
    ListpackRev(&'a Listpack, Vec<u32>),
    Tree(&'a Slots, TreeIter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            IterInner::Listpack(it) => it.next().map(|e| (e.member, e.score)),
            IterInner::ListpackRev(lp, offsets) => {
                let at = offsets.pop()?;
                let e = lp.entry_at(at as usize);
                Some((e.member, e.score))
            }
            IterInner::Tree(slots, it) => it.next().map(|k| {
                let slot = &slots[k.id as usize];
                (slot.member.as_slice(), k.score)
            }),
        }
    }
}

// ---------------------------------------------------------------------------
// Listpack: the compact encoding
// ---------------------------------------------------------------------------

/// Score tag: a zigzag varint integer follows.
const SCORE_INT: u8 = 0;
/// Score tag: eight little-endian bytes of an f64 follow.
const SCORE_F64: u8 = 1;
/// Integral scores up to this magnitude are stored as integers (exactly
/// representable, so the round trip is exact).
const MAX_INT_SCORE: f64 = 9_007_199_254_740_992.0;

#[derive(Clone, Default)]
struct Listpack {
    buf: Vec<u8>,
    len: usize,
}

/// One decoded listpack entry and its byte range in the buffer.
struct LpEntry<'a> {
    member: &'a [u8],
    score: f64,
    start: usize,
    end: usize,
}

struct LpIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for LpIter<'a> {
    type Item = LpEntry<'a>;

    fn next(&mut self) -> Option<LpEntry<'a>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let e = decode_entry(self.buf, self.pos);
        self.pos = e.end;
        Some(e)
    }
}

fn put_varint(out: &mut SmallVec<[u8; 96]>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&b) = buf.get(*pos) {
        *pos += 1;
        v |= ((b & 0x7f) as u64) << shift.min(63);
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    v
}

fn decode_entry(buf: &[u8], start: usize) -> LpEntry<'_> {
    let mut pos = start;
    let len = get_varint(buf, &mut pos) as usize;
    let member_end = (pos + len).min(buf.len());
    let member = &buf[pos..member_end];
    pos = member_end;
    let tag = buf.get(pos).copied().unwrap_or(SCORE_INT);
    pos += 1;
    let score = if tag == SCORE_F64 {
        let mut raw = [0u8; 8];
        let end = (pos + 8).min(buf.len());
        raw[..end - pos.min(end)].copy_from_slice(&buf[pos.min(end)..end]);
        pos = end;
        f64::from_le_bytes(raw)
    } else {
        let z = get_varint(buf, &mut pos);
        (((z >> 1) as i64) ^ -((z & 1) as i64)) as f64
    };
    LpEntry {
        member,
        score,
        start,
        end: pos,
    }
}

/// The position after the score that starts at `pos`.
fn skip_score(buf: &[u8], pos: usize) -> usize {
    if buf.get(pos) == Some(&SCORE_F64) {
        return pos + 9;
    }
    let mut p = pos + 1;
    while buf.get(p).is_some_and(|b| b & 0x80 != 0) {
        p += 1;
    }
    p + 1
}

fn encode_entry(member: &[u8], score: f64) -> SmallVec<[u8; 96]> {
    let mut out = SmallVec::new();
    put_varint(&mut out, member.len() as u64);
    out.extend_from_slice(member);
    if score == score.trunc() && score.abs() <= MAX_INT_SCORE {
        // -0.0 lands here and is stored as 0, as Redis's listpack does.
        let i = score as i64;
        out.push(SCORE_INT);
        put_varint(&mut out, ((i << 1) ^ (i >> 63)) as u64);
    } else {
        out.push(SCORE_F64);
        out.extend_from_slice(&score.to_le_bytes());
    }
    out
}

/// Whether (s1, m1) sorts before (s2, m2).
fn less(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> bool {
    s1 < s2 || (s1 == s2 && m1 < m2)
}

impl Listpack {
    fn iter(&self) -> LpIter<'_> {
        LpIter {
            buf: &self.buf,
            pos: 0,
        }
    }

    fn entry_at(&self, pos: usize) -> LpEntry<'_> {
        decode_entry(&self.buf, pos)
    }

    /// The entry of `member`. Scores are skipped, not decoded, on the way:
    /// the scan compares members only.
    fn find(&self, member: &[u8]) -> Option<LpEntry<'_>> {
        let buf = self.buf.as_slice();
        let mut pos = 0;
        while pos < buf.len() {
            let start = pos;
            let len = get_varint(buf, &mut pos) as usize;
            let member_end = (pos + len).min(buf.len());
            // The last byte first: members of one set often differ only
            // there (numbered ids), and it spares most memcmp calls.
            if len == member.len()
                && (len == 0 || buf.get(member_end - 1) == member.last())
                && buf[pos..member_end] == *member
            {
                return Some(decode_entry(buf, start));
            }
            pos = skip_score(buf, member_end);
        }
        None
    }

    /// Inserts an absent member at its place in the order.
    fn insert(&mut self, member: &[u8], score: f64) {
        let at = self
            .iter()
            .find(|e| less(score, member, e.score, e.member))
            .map_or(self.buf.len(), |e| e.start);
        let bytes = encode_entry(member, score);
        self.buf.reserve_exact(bytes.len());
        self.buf.splice(at..at, bytes);
        self.len += 1;
    }

    /// Removes the `count` entries stored in `start..end`.
    fn remove_bytes(&mut self, start: usize, end: usize, count: usize) {
        self.buf.drain(start..end);
        self.len -= count;
        if self.buf.capacity() > self.buf.len() + self.buf.len() / 4 + 32 {
            self.buf.shrink_to_fit();
        }
    }
}

// ---------------------------------------------------------------------------
// Indexed: slots + hash index + order-statistic B+tree
// ---------------------------------------------------------------------------

/// A fixed-seed hasher, so that the index (and anything derived from it)
/// is the same on every replica.
#[derive(Clone, Copy, Default)]
struct FixedState;

impl BuildHasher for FixedState {
    type Hasher = foldhash::fast::FoldHasher;
    fn build_hasher(&self) -> Self::Hasher {
        foldhash::fast::FixedState::with_seed(0x7a73_6574_6b76).build_hasher()
    }
}

fn hash_member(member: &[u8]) -> u64 {
    FixedState.hash_one(member)
}

#[derive(Clone)]
struct Slot {
    member: CompactBytes,
    score: f64,
}

/// Slots per chunk: 4096 x 32 bytes = 128 KiB, an exact allocator size
/// class. Fixed chunks instead of one doubling vector: no huge reallocation
/// (with old and new copies alive at once) and no rounding of a huge
/// allocation up to its size class, which costs up to a quarter more.
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;

/// A dense vector of slots stored in chunks: every chunk but the last is
/// full. The first grows like a `Vec` (small sets stay small); the others
/// are allocated whole.
#[derive(Clone, Default)]
struct Slots {
    chunks: Vec<Vec<Slot>>,
    len: usize,
}

impl Slots {
    fn with_capacity(n: usize) -> Slots {
        Slots {
            chunks: vec![Vec::with_capacity(n.min(CHUNK))],
            len: 0,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, slot: Slot) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => {
                if c.len() == c.capacity() {
                    let want = (c.capacity() * 2).clamp(4, CHUNK);
                    c.reserve_exact(want - c.len());
                }
                c.push(slot);
            }
            _ => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(slot);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }

    /// Removes the last slot. An emptied last chunk is kept until the next
    /// pop, so alternating pushes and pops at a chunk boundary do not
    /// allocate.
    fn pop(&mut self) -> Option<Slot> {
        if self.len == 0 {
            return None;
        }
        while self.chunks.len() > 1 && self.chunks.last().is_some_and(Vec::is_empty) {
            self.chunks.pop();
        }
        let slot = self.chunks.last_mut()?.pop();
        self.len -= 1;
        slot
    }

    /// Removes slot `id`, moving the last slot into its place.
    fn swap_remove(&mut self, id: usize) -> Option<Slot> {
        let last = self.pop()?;
        if id == self.len {
            return Some(last);
        }
        Some(std::mem::replace(&mut self[id], last))
    }

    fn shrink_if_sparse(&mut self) {
        if let [only] = self.chunks.as_mut_slice() {
            if only.capacity() > 64 && only.len() < only.capacity() / 4 {
                only.shrink_to(only.len() * 2);
            }
        }
    }

    fn heap_size(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Vec<Slot>>()
            + self
                .chunks
                .iter()
                .map(|c| c.capacity() * std::mem::size_of::<Slot>())
                .sum::<usize>()
    }
}

impl std::ops::Index<usize> for Slots {
    type Output = Slot;
    fn index(&self, id: usize) -> &Slot {
        &self.chunks[id >> CHUNK_BITS][id & (CHUNK - 1)]
    }
}

impl std::ops::IndexMut<usize> for Slots {
    fn index_mut(&mut self, id: usize) -> &mut Slot {
        &mut self.chunks[id >> CHUNK_BITS][id & (CHUNK - 1)]
    }
}

fn member_heap(m: &CompactBytes) -> usize {
    if m.spilled() {
        m.capacity()
    } else {
        0
    }
}

#[derive(Clone)]
struct Indexed {
    /// Dense: a member's id is its position here.
    slots: Slots,
    /// Member -> id, hashed by the member bytes the slot holds.
    index: HashTable<u32>,
    tree: Tree,
    /// Heap bytes of members too long to be stored inline.
    member_heap: usize,
}

/// The order of keys: score, then member bytes (ids name the members).
fn order(slots: &Slots, a: Key, b: Key) -> Ordering {
    match a.score.partial_cmp(&b.score) {
        Some(Ordering::Equal) | None => {}
        Some(o) => return o,
    }
    if a.id == b.id {
        return Ordering::Equal;
    }
    slots[a.id as usize]
        .member
        .as_slice()
        .cmp(slots[b.id as usize].member.as_slice())
}

impl Indexed {
    fn with_capacity(n: usize) -> Indexed {
        Indexed {
            slots: Slots::with_capacity(n),
            index: HashTable::with_capacity(n),
            tree: Tree::default(),
            member_heap: 0,
        }
    }

    fn find(&self, member: &[u8]) -> Option<usize> {
        let slots = &self.slots;
        self.index
            .find(hash_member(member), |&i| {
                slots[i as usize].member.as_slice() == member
            })
            .map(|&i| i as usize)
    }

    /// Sets the score of `member` (adding it if absent); returns the old one.
    fn set(&mut self, member: &[u8], score: f64) -> Option<f64> {
        if let Some(id) = self.find(member) {
            let old = self.slots[id].score;
            let old_key = Key {
                score: old,
                id: id as u32,
            };
            let slots = &self.slots;
            self.tree.remove(old_key, &|a, b| order(slots, a, b));
            self.slots[id].score = score;
            let slots = &self.slots;
            self.tree.insert(
                Key {
                    score,
                    id: id as u32,
                },
                &|a, b| order(slots, a, b),
            );
            return Some(old);
        }
        let id = self.slots.len();
        let stored = CompactBytes::from_slice(member);
        self.member_heap += member_heap(&stored);
        self.slots.push(Slot {
            member: stored,
            score,
        });
        let slots = &self.slots;
        self.index
            .insert_unique(hash_member(member), id as u32, |&i| {
                hash_member(&slots[i as usize].member)
            });
        self.tree.insert(
            Key {
                score,
                id: id as u32,
            },
            &|a, b| order(slots, a, b),
        );
        None
    }

    fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let hash = hash_member(member);
        let id = self.find(member)?;
        let score = self.slots[id].score;
        let slots = &self.slots;
        self.tree.remove(
            Key {
                score,
                id: id as u32,
            },
            &|a, b| order(slots, a, b),
        );
        if let Ok(entry) = self.index.find_entry(hash, |&i| i as usize == id) {
            entry.remove();
        }
        let last = self.slots.len() - 1;
        if id != last {
            // The last slot moves into the hole: renumber it in the tree
            // (while its member is still at `last`) and in the index.
            let moved = Key {
                score: self.slots[last].score,
                id: last as u32,
            };
            let slots = &self.slots;
            self.tree
                .replace_id(moved, id as u32, &|a, b| order(slots, a, b));
            let moved_hash = hash_member(&self.slots[last].member);
            if let Some(slot) = self.index.find_mut(moved_hash, |&i| i as usize == last) {
                *slot = id as u32;
            }
        }
        if let Some(removed) = self.slots.swap_remove(id) {
            self.member_heap -= member_heap(&removed.member);
        }
        self.shrink_if_sparse();
        Some(score)
    }

    /// Gives memory back once the set has shrunk to a quarter of its room.
    fn shrink_if_sparse(&mut self) {
        let len = self.slots.len();
        self.slots.shrink_if_sparse();
        if self.index.capacity() > 64 && len < self.index.capacity() / 4 {
            let slots = &self.slots;
            self.index
                .shrink_to(len * 2, |&i| hash_member(&slots[i as usize].member));
        }
    }

    fn heap_size(&self) -> usize {
        let cap = self.index.capacity();
        let buckets = if cap == 0 {
            0
        } else if cap < 8 {
            (cap + 1).next_power_of_two()
        } else {
            (cap * 8 / 7).next_power_of_two()
        };
        self.slots.heap_size()
            + self.member_heap
            + buckets * (std::mem::size_of::<u32>() + 1)
            + self.tree.heap_size()
    }
}

// ---------------------------------------------------------------------------
// The order-statistic B+tree
// ---------------------------------------------------------------------------

/// Keys per leaf: 63 keys of 12 bytes and a length, 768 bytes, one
/// allocation of an exact allocator size class.
const LEAF_CAP: usize = 63;
/// Children per inner node.
const INNER_CAP: usize = 64;
/// A node below these sizes is merged with, or refilled from, a sibling.
const LEAF_MIN: usize = LEAF_CAP / 4;
const INNER_MIN: usize = INNER_CAP / 4;

/// A tree key: a score and the id of the slot holding the member.
#[derive(Debug, Clone, Copy)]
struct Key {
    score: f64,
    id: u32,
}

#[derive(Clone)]
struct Leaf {
    len: usize,
    scores: [f64; LEAF_CAP],
    ids: [u32; LEAF_CAP],
}

/// Invariant: `mins[i]` is the smallest key under `children[i]` and
/// `counts[i]` the number of keys under it (never 0).
#[derive(Clone)]
struct Inner {
    counts: Vec<usize>,
    mins: Vec<Key>,
    children: Vec<Node>,
}

#[derive(Clone)]
enum Node {
    Leaf(Box<Leaf>),
    Inner(Box<Inner>),
}

#[derive(Clone, Default)]
struct Tree {
    root: Option<Node>,
    len: usize,
}

impl Leaf {
    fn empty() -> Box<Leaf> {
        Box::new(Leaf {
            len: 0,
            scores: [0.0; LEAF_CAP],
            ids: [0; LEAF_CAP],
        })
    }

    fn key(&self, i: usize) -> Key {
        Key {
            score: self.scores[i],
            id: self.ids[i],
        }
    }

    fn set(&mut self, i: usize, k: Key) {
        self.scores[i] = k.score;
        self.ids[i] = k.id;
    }

    fn insert_at(&mut self, i: usize, k: Key) {
        self.scores.copy_within(i..self.len, i + 1);
        self.ids.copy_within(i..self.len, i + 1);
        self.set(i, k);
        self.len += 1;
    }

    fn remove_at(&mut self, i: usize) {
        self.scores.copy_within(i + 1..self.len, i);
        self.ids.copy_within(i + 1..self.len, i);
        self.len -= 1;
    }

    /// Number of leading keys satisfying `pred` (a prefix predicate).
    fn partition(&self, mut pred: impl FnMut(Key) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if pred(self.key(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Moves keys between two neighbours: all into `l` when they fit (true),
    /// else half each.
    fn balance(l: &mut Leaf, r: &mut Leaf) -> bool {
        let total = l.len + r.len;
        if total <= LEAF_CAP {
            l.scores[l.len..total].copy_from_slice(&r.scores[..r.len]);
            l.ids[l.len..total].copy_from_slice(&r.ids[..r.len]);
            l.len = total;
            r.len = 0;
            return true;
        }
        let want = total / 2;
        if l.len < want {
            let m = want - l.len;
            l.scores[l.len..want].copy_from_slice(&r.scores[..m]);
            l.ids[l.len..want].copy_from_slice(&r.ids[..m]);
            r.scores.copy_within(m..r.len, 0);
            r.ids.copy_within(m..r.len, 0);
            r.len -= m;
            l.len = want;
        } else if l.len > want {
            let m = l.len - want;
            r.scores.copy_within(0..r.len, m);
            r.ids.copy_within(0..r.len, m);
            r.scores[..m].copy_from_slice(&l.scores[want..l.len]);
            r.ids[..m].copy_from_slice(&l.ids[want..l.len]);
            r.len += m;
            l.len = want;
        }
        false
    }
}

impl Inner {
    fn with_children(children: Vec<Node>) -> Box<Inner> {
        let mut n = Box::new(Inner {
            counts: Vec::with_capacity(INNER_CAP + 1),
            mins: Vec::with_capacity(INNER_CAP + 1),
            children: Vec::with_capacity(INNER_CAP + 1),
        });
        for c in children {
            n.counts.push(c.len());
            n.mins.push(c.min());
            n.children.push(c);
        }
        n
    }

    /// The child whose key range holds `key`: the last whose min is not
    /// above it (the first if `key` is below every key).
    fn child_for(&self, key: Key, cmp: &impl Fn(Key, Key) -> Ordering) -> usize {
        self.mins
            .partition_point(|m| cmp(*m, key) != Ordering::Greater)
            .saturating_sub(1)
    }

    fn refresh(&mut self, i: usize) {
        self.counts[i] = self.children[i].len();
        self.mins[i] = self.children[i].min();
    }

    /// Fixes an underfull child `i` by merging it with a neighbour or
    /// taking keys from one.
    fn rebalance(&mut self, i: usize) {
        if self.children.len() < 2 {
            return;
        }
        let a = if i + 1 < self.children.len() {
            i
        } else {
            i - 1
        };
        let b = a + 1;
        let (left, right) = self.children.split_at_mut(b);
        let merged = match (&mut left[a], &mut right[0]) {
            (Node::Leaf(l), Node::Leaf(r)) => Leaf::balance(l, r),
            (Node::Inner(l), Node::Inner(r)) => {
                let total = l.children.len() + r.children.len();
                if total <= INNER_CAP {
                    l.counts.append(&mut r.counts);
                    l.mins.append(&mut r.mins);
                    l.children.append(&mut r.children);
                    true
                } else {
                    let want = total / 2;
                    if l.children.len() < want {
                        let m = want - l.children.len();
                        l.counts.extend(r.counts.drain(..m));
                        l.mins.extend(r.mins.drain(..m));
                        l.children.extend(r.children.drain(..m));
                    } else if l.children.len() > want {
                        let counts = l.counts.split_off(want);
                        let mins = l.mins.split_off(want);
                        let children = l.children.split_off(want);
                        r.counts.splice(0..0, counts);
                        r.mins.splice(0..0, mins);
                        r.children.splice(0..0, children);
                    }
                    false
                }
            }
            // Siblings are always at the same depth.
            _ => return,
        };
        if merged {
            self.children.remove(b);
            self.counts.remove(b);
            self.mins.remove(b);
        } else {
            self.refresh(b);
        }
        self.refresh(a);
    }
}

impl Node {
    fn len(&self) -> usize {
        match self {
            Node::Leaf(l) => l.len,
            Node::Inner(n) => n.counts.iter().sum(),
        }
    }

    fn min(&self) -> Key {
        match self {
            Node::Leaf(l) => l.key(0),
            Node::Inner(n) => n.mins[0],
        }
    }

    fn underfull(&self) -> bool {
        match self {
            Node::Leaf(l) => l.len < LEAF_MIN,
            Node::Inner(n) => n.children.len() < INNER_MIN,
        }
    }

    /// Inserts `key` (absent); returns a new right sibling if this node split.
    fn insert(&mut self, key: Key, cmp: &impl Fn(Key, Key) -> Ordering) -> Option<Node> {
        match self {
            Node::Leaf(leaf) => {
                let pos = leaf.partition(|k| cmp(k, key) == Ordering::Less);
                if leaf.len < LEAF_CAP {
                    leaf.insert_at(pos, key);
                    return None;
                }
                let mut right = Leaf::empty();
                if pos == LEAF_CAP {
                    // Ascending inserts: keep this leaf full.
                    right.insert_at(0, key);
                } else if pos == 0 {
                    // Descending inserts: the full leaf moves right whole.
                    std::mem::swap(leaf, &mut right);
                    leaf.insert_at(0, key);
                } else {
                    let mid = LEAF_CAP / 2;
                    let moved = LEAF_CAP - mid;
                    right.scores[..moved].copy_from_slice(&leaf.scores[mid..]);
                    right.ids[..moved].copy_from_slice(&leaf.ids[mid..]);
                    right.len = moved;
                    leaf.len = mid;
                    if pos <= mid {
                        leaf.insert_at(pos, key);
                    } else {
                        right.insert_at(pos - mid, key);
                    }
                }
                Some(Node::Leaf(right))
            }
            Node::Inner(n) => {
                let i = n.child_for(key, cmp);
                let split = n.children[i].insert(key, cmp);
                n.counts[i] += 1;
                n.mins[i] = n.children[i].min();
                let new = split?;
                let moved = new.len();
                n.counts[i] -= moved;
                n.counts.insert(i + 1, moved);
                n.mins.insert(i + 1, new.min());
                n.children.insert(i + 1, new);
                if n.children.len() <= INNER_CAP {
                    return None;
                }
                let at = if i + 1 == INNER_CAP {
                    INNER_CAP
                } else if i == 0 {
                    1
                } else {
                    INNER_CAP / 2
                };
                let mut right = Inner::with_children(Vec::new());
                right.counts.extend(n.counts.drain(at..));
                right.mins.extend(n.mins.drain(at..));
                right.children.extend(n.children.drain(at..));
                Some(Node::Inner(right))
            }
        }
    }

    /// Removes `key`; false if it is not in the tree.
    fn remove(&mut self, key: Key, cmp: &impl Fn(Key, Key) -> Ordering) -> bool {
        match self {
            Node::Leaf(leaf) => {
                let pos = leaf.partition(|k| cmp(k, key) == Ordering::Less);
                if pos < leaf.len && leaf.ids[pos] == key.id {
                    leaf.remove_at(pos);
                    true
                } else {
                    false
                }
            }
            Node::Inner(n) => {
                let i = n.child_for(key, cmp);
                if !n.children[i].remove(key, cmp) {
                    return false;
                }
                n.counts[i] -= 1;
                if n.counts[i] == 0 {
                    n.children.remove(i);
                    n.counts.remove(i);
                    n.mins.remove(i);
                } else {
                    n.mins[i] = n.children[i].min();
                    if n.children[i].underfull() {
                        n.rebalance(i);
                    }
                }
                true
            }
        }
    }

    fn heap_size(&self) -> usize {
        match self {
            Node::Leaf(_) => std::mem::size_of::<Leaf>(),
            Node::Inner(n) => {
                std::mem::size_of::<Inner>()
                    + n.counts.capacity() * std::mem::size_of::<usize>()
                    + n.mins.capacity() * std::mem::size_of::<Key>()
                    + n.children.capacity() * std::mem::size_of::<Node>()
                    + n.children.iter().map(Node::heap_size).sum::<usize>()
            }
        }
    }
}

impl Tree {
    fn insert(&mut self, key: Key, cmp: &impl Fn(Key, Key) -> Ordering) {
        self.len += 1;
        let Some(root) = &mut self.root else {
            let mut leaf = Leaf::empty();
            leaf.insert_at(0, key);
            self.root = Some(Node::Leaf(leaf));
            return;
        };
        if let Some(right) = root.insert(key, cmp) {
            if let Some(left) = self.root.take() {
                self.root = Some(Node::Inner(Inner::with_children(vec![left, right])));
            }
        }
    }

    fn remove(&mut self, key: Key, cmp: &impl Fn(Key, Key) -> Ordering) -> bool {
        let Some(root) = &mut self.root else {
            return false;
        };
        if !root.remove(key, cmp) {
            return false;
        }
        self.len -= 1;
        // Shrink the root: drop an empty leaf, lift an only child.
        loop {
            match self.root.take() {
                Some(Node::Leaf(l)) if l.len == 0 => break,
                Some(Node::Inner(mut n)) if n.children.len() == 1 => self.root = n.children.pop(),
                other => {
                    self.root = other;
                    break;
                }
            }
        }
        true
    }

    /// Renames the slot id of `key` (present) to `new_id`, in its leaf and
    /// wherever it stands as a subtree minimum on the way down.
    fn replace_id(&mut self, key: Key, new_id: u32, cmp: &impl Fn(Key, Key) -> Ordering) {
        let mut node = match &mut self.root {
            Some(n) => n,
            None => return,
        };
        loop {
            match node {
                Node::Inner(n) => {
                    let i = n.child_for(key, cmp);
                    if n.mins[i].id == key.id {
                        n.mins[i].id = new_id;
                    }
                    node = &mut n.children[i];
                }
                Node::Leaf(l) => {
                    let pos = l.partition(|k| cmp(k, key) == Ordering::Less);
                    if pos < l.len && l.ids[pos] == key.id {
                        l.ids[pos] = new_id;
                    }
                    return;
                }
            }
        }
    }

    /// Number of leading keys satisfying `pred`, which must hold for a
    /// prefix of the keys in order.
    fn partition_point(&self, mut pred: impl FnMut(Key) -> bool) -> usize {
        let mut node = match &self.root {
            Some(n) => n,
            None => return 0,
        };
        let mut before = 0;
        loop {
            match node {
                Node::Leaf(l) => return before + l.partition(&mut pred),
                Node::Inner(n) => {
                    // Children whose minimum satisfies pred: the boundary
                    // lies in the last of them (or before the first).
                    let k = n.mins.partition_point(|m| pred(*m));
                    if k == 0 {
                        return before;
                    }
                    before += n.counts[..k - 1].iter().sum::<usize>();
                    node = &n.children[k - 1];
                }
            }
        }
    }

    /// Iterator from the key at ascending index `index` (< len), upwards
    /// or (`rev`) downwards.
    fn iter_at(&self, mut index: usize, rev: bool) -> TreeIter<'_> {
        let mut it = TreeIter::empty(rev);
        if index >= self.len {
            return it;
        }
        let mut node = match &self.root {
            Some(n) => n,
            None => return it,
        };
        loop {
            match node {
                Node::Inner(n) => {
                    let mut i = 0;
                    while i + 1 < n.counts.len() && index >= n.counts[i] {
                        index -= n.counts[i];
                        i += 1;
                    }
                    it.stack.push((n, i));
                    node = &n.children[i];
                }
                Node::Leaf(l) => {
                    it.leaf = Some(l);
                    it.pos = if rev { index + 1 } else { index };
                    return it;
                }
            }
        }
    }

    fn heap_size(&self) -> usize {
        self.root.as_ref().map_or(0, Node::heap_size)
    }
}

/// Walks the leaves from a position, with the path of inner nodes above.
struct TreeIter<'a> {
    stack: Vec<(&'a Inner, usize)>,
    leaf: Option<&'a Leaf>,
    /// Forward: the next index to yield. Reverse: one past it.
    pos: usize,
    rev: bool,
}

impl TreeIter<'_> {
    fn empty(rev: bool) -> Self {
        TreeIter {
            stack: Vec::new(),
            leaf: None,
            pos: 0,
            rev,
        }
    }
}

impl Iterator for TreeIter<'_> {
    type Item = Key;

    fn next(&mut self) -> Option<Key> {
        loop {
            let leaf = self.leaf?;
            if self.rev {
                if self.pos > 0 {
                    self.pos -= 1;
                    return Some(leaf.key(self.pos));
                }
            } else if self.pos < leaf.len {
                self.pos += 1;
                return Some(leaf.key(self.pos - 1));
            }
            // This leaf is done: climb to the next sibling and descend.
            self.leaf = None;
            while let Some((n, i)) = self.stack.pop() {
                let next = if self.rev {
                    i.checked_sub(1)
                } else {
                    Some(i + 1).filter(|&j| j < n.children.len())
                };
                let Some(j) = next else { continue };
                self.stack.push((n, j));
                let mut node = &n.children[j];
                loop {
                    match node {
                        Node::Inner(m) => {
                            let k = if self.rev { m.children.len() - 1 } else { 0 };
                            self.stack.push((m, k));
                            node = &m.children[k];
                        }
                        Node::Leaf(l) => {
                            self.leaf = Some(l);
                            self.pos = if self.rev { l.len } else { 0 };
                            break;
                        }
                    }
                }
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const SMALL: ZSetLimits = ZSetLimits {
        max_listpack_entries: 128,
        max_listpack_value: 64,
    };
    /// Limits that force the indexed encoding from the first element.
    const NONE: ZSetLimits = ZSetLimits {
        max_listpack_entries: 0,
        max_listpack_value: 0,
    };

    /// The model: member -> score, ordered views computed on demand.
    #[derive(Default)]
    struct Model {
        scores: BTreeMap<Vec<u8>, f64>,
    }

    impl Model {
        fn sorted(&self) -> Vec<(Vec<u8>, f64)> {
            let mut v: Vec<(Vec<u8>, f64)> =
                self.scores.iter().map(|(m, s)| (m.clone(), *s)).collect();
            v.sort_by(|a, b| {
                a.1.partial_cmp(&b.1)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.0.cmp(&b.0))
            });
            v
        }
    }

    /// xorshift64*: a fixed-seed generator for the tests.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    fn all(z: &ZSet) -> Vec<(Vec<u8>, f64)> {
        z.iter().map(|(m, s)| (m.to_vec(), s)).collect()
    }

    /// Walks the tree: counts and minimums of inner nodes match their
    /// children, no node is empty, all leaves are at one depth, keys are in
    /// order, and the index maps every member to its slot.
    fn check_structure(z: &ZSet) {
        let Repr::Indexed(ix) = &z.repr else { return };
        fn walk(
            n: &Node,
            depth: usize,
            leaf_depth: &mut Option<usize>,
            keys: &mut Vec<Key>,
        ) -> usize {
            match n {
                Node::Leaf(l) => {
                    assert!(l.len > 0 && l.len <= LEAF_CAP);
                    assert_eq!(
                        *leaf_depth.get_or_insert(depth),
                        depth,
                        "leaves at one depth"
                    );
                    keys.extend((0..l.len).map(|i| l.key(i)));
                    l.len
                }
                Node::Inner(inner) => {
                    assert!(!inner.children.is_empty() && inner.children.len() <= INNER_CAP);
                    assert_eq!(inner.children.len(), inner.counts.len());
                    assert_eq!(inner.children.len(), inner.mins.len());
                    let mut total = 0;
                    for (i, c) in inner.children.iter().enumerate() {
                        let before = keys.len();
                        let n = walk(c, depth + 1, leaf_depth, keys);
                        assert_eq!(inner.counts[i], n, "count of child {i}");
                        assert_eq!(inner.mins[i].id, keys[before].id, "min of child {i}");
                        assert_eq!(inner.mins[i].score.to_bits(), keys[before].score.to_bits());
                        total += n;
                    }
                    total
                }
            }
        }
        let mut keys = Vec::new();
        let total = ix
            .tree
            .root
            .as_ref()
            .map_or(0, |r| walk(r, 0, &mut None, &mut keys));
        assert_eq!(total, ix.slots.len());
        assert_eq!(ix.tree.len, total);
        assert_eq!(ix.index.len(), total);
        for w in keys.windows(2) {
            assert_eq!(order(&ix.slots, w[0], w[1]), Ordering::Less);
        }
        for k in &keys {
            let slot = &ix.slots[k.id as usize];
            assert_eq!(slot.score.to_bits(), k.score.to_bits());
            assert_eq!(ix.find(&slot.member), Some(k.id as usize));
        }
    }

    fn check(z: &ZSet, model: &Model) {
        check_structure(z);
        let sorted = model.sorted();
        assert_eq!(z.len(), sorted.len());
        assert_eq!(all(z), sorted);
        let rev: Vec<(Vec<u8>, f64)> = z.iter_from(0, true).map(|(m, s)| (m.to_vec(), s)).collect();
        let mut expected_rev = sorted.clone();
        expected_rev.reverse();
        assert_eq!(rev, expected_rev);
    }

    /// Random inserts, updates and removals checked against the model; one
    /// step in `query_every` also checks rank, select, ranges and counts.
    fn random_ops(limits: ZSetLimits, ops: usize, members: u64, query_every: u64, seed: u64) {
        let mut rng = Rng(seed);
        let mut z = ZSet::new();
        let mut model = Model::default();
        for step in 0..ops {
            let m = format!("m{}", rng.below(members)).into_bytes();
            let query = rng.below(query_every) == 0;
            if rng.below(3) == 0 {
                assert_eq!(z.remove(&m), model.scores.remove(&m));
            } else {
                // Few distinct scores, so ties (member order) matter.
                let score =
                    (rng.below(50) as f64) - 25.0 + if rng.below(4) == 0 { 0.5 } else { 0.0 };
                // An absent member goes in either way (ZADD uses
                // insert_absent after asking for its score).
                let old = if !model.scores.contains_key(&m) && rng.below(2) == 0 {
                    z.insert_absent(&m, score, limits);
                    None
                } else {
                    z.insert(&m, score, limits)
                };
                assert_eq!(old, model.scores.insert(m.clone(), score));
            }
            if query {
                let sorted = model.sorted();
                let rank = sorted.iter().position(|(mm, _)| *mm == m);
                assert_eq!(z.rank(&m), rank);
                assert_eq!(z.score(&m), model.scores.get(&m).copied());
                if !sorted.is_empty() {
                    let r = rng.below(sorted.len() as u64) as usize;
                    let got = z.get(r).map(|(m, s)| (m.to_vec(), s));
                    assert_eq!(got.as_ref(), sorted.get(r));
                    let from: Vec<_> = z
                        .iter_from(r, false)
                        .take(5)
                        .map(|(m, s)| (m.to_vec(), s))
                        .collect();
                    assert_eq!(from, sorted[r..(r + 5).min(sorted.len())].to_vec());
                    let back: Vec<_> = z
                        .iter_from(r, true)
                        .take(5)
                        .map(|(m, s)| (m.to_vec(), s))
                        .collect();
                    let hi = sorted.len() - 1 - r;
                    let exp: Vec<_> = sorted[hi.saturating_sub(4)..=hi]
                        .iter()
                        .rev()
                        .cloned()
                        .collect();
                    assert_eq!(back, exp);
                }
                let cut = rng.below(50) as f64 - 25.0;
                let n = sorted.iter().filter(|(_, s)| *s < cut).count();
                assert_eq!(z.count_scores_where(|s| s < cut), n);
            }
            if step % 997 == 0 {
                check(&z, &model);
            }
        }
        check(&z, &model);
        // Empty it through ranges and pops.
        while !z.is_empty() {
            let before = z.len();
            let (m, s) = z.pop(z.len().is_multiple_of(2)).expect("pop");
            assert_eq!(model.scores.remove(&m), Some(s));
            assert_eq!(z.len(), before - 1);
            if z.len() > 10 {
                let doomed: Vec<Vec<u8>> = z
                    .iter_from(3, false)
                    .take(4)
                    .map(|(m, _)| m.to_vec())
                    .collect();
                assert_eq!(z.remove_range(3, 7), 4);
                for m in &doomed {
                    assert!(model.scores.remove(m).is_some());
                }
            }
            if z.len().is_multiple_of(101) {
                check(&z, &model);
            }
        }
        check(&z, &model);
    }

    #[test]
    fn listpack_finds_members_past_every_score_form() {
        // Equal-length members, scores of every stored form: one- and
        // many-byte integers (geohashes take eight), negative ones, and
        // doubles.
        let scores = [
            0.0,
            -1.0,
            300.0,
            -70_000.0,
            4_503_599_627_370_495.0,
            1.5,
            -2.25e-3,
            1e300,
        ];
        let mut z = ZSet::new();
        for (i, s) in scores.iter().enumerate() {
            assert_eq!(z.insert(format!("m:{i:04}").as_bytes(), *s, SMALL), None);
        }
        for (i, s) in scores.iter().enumerate() {
            assert_eq!(z.score(format!("m:{i:04}").as_bytes()), Some(*s));
        }
        assert_eq!(z.score(b"m:9999"), None);
        assert_eq!(z.score(b"m:000"), None);
        // The same score again changes nothing; a new one moves the member.
        let before: Vec<_> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        assert_eq!(z.insert(b"m:0004", scores[4], SMALL), Some(scores[4]));
        let after: Vec<_> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        assert_eq!(before, after);
        assert_eq!(z.insert(b"m:0004", -1e9, SMALL), Some(scores[4]));
        assert_eq!(
            z.get(0).map(|(m, s)| (m.to_vec(), s)),
            Some((b"m:0004".to_vec(), -1e9))
        );
        assert_eq!(z.len(), scores.len());
        // -0.0 over 0.0 is stored as 0, as before.
        assert_eq!(z.insert(b"m:0000", -0.0, SMALL), Some(0.0));
        assert_eq!(z.score(b"m:0000").map(f64::to_bits), Some(0.0f64.to_bits()));
    }

    #[test]
    fn listpack_matches_model() {
        random_ops(SMALL, 5000, 100, 3, 1);
    }

    #[test]
    fn indexed_matches_model_small() {
        random_ops(NONE, 5000, 100, 3, 2);
    }

    #[test]
    fn indexed_matches_model_deep_trees() {
        // Enough members for three tree levels, with splits, merges and
        // borrowing between siblings.
        random_ops(NONE, 120_000, 12_000, 500, 3);
    }

    #[test]
    fn conversion_keeps_order_and_happens_at_the_limits() {
        let mut z = ZSet::new();
        for i in 0..128 {
            z.insert(format!("m{i:03}").as_bytes(), (i % 7) as f64, SMALL);
        }
        assert_eq!(z.encoding(), "listpack");
        let before = all(&z);
        // Updating an existing member never converts.
        z.insert(b"m000", 0.0, SMALL);
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"m128", 3.0, SMALL);
        assert_eq!(z.encoding(), "skiplist");
        let mut expected = before;
        expected.push((b"m128".to_vec(), 3.0));
        expected.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
        assert_eq!(all(&z), expected);
        // Removing back down does not convert back.
        for i in 0..120 {
            z.remove(format!("m{i:03}").as_bytes());
        }
        assert_eq!(z.encoding(), "skiplist");

        let mut long = ZSet::new();
        long.insert(&[b'x'; 64], 1.0, SMALL);
        assert_eq!(long.encoding(), "listpack");
        long.insert(&[b'y'; 65], 1.0, SMALL);
        assert_eq!(long.encoding(), "skiplist");
        assert_eq!(long.len(), 2);
    }

    #[test]
    fn scores_round_trip_in_both_encodings() {
        let scores = [
            0.0,
            1.0,
            -1.0,
            1.5,
            -2.25,
            1e300,
            -1e-300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            9_007_199_254_740_992.0,
            -9_007_199_254_740_992.0,
            9_007_199_254_740_994.0,
            i64::MAX as f64,
            0.1,
        ];
        for limits in [SMALL, NONE] {
            let mut z = ZSet::new();
            for (i, s) in scores.iter().enumerate() {
                z.insert(format!("{i}").as_bytes(), *s, limits);
            }
            for (i, s) in scores.iter().enumerate() {
                assert_eq!(z.score(format!("{i}").as_bytes()), Some(*s), "{s}");
            }
        }
    }

    #[test]
    fn negative_zero_is_zero_in_a_listpack_and_kept_when_indexed() {
        let mut z = ZSet::new();
        z.insert(b"a", -0.0, SMALL);
        assert!(z
            .score(b"a")
            .is_some_and(|s| s == 0.0 && s.is_sign_positive()));
        let mut big = ZSet::new();
        big.insert(b"a", -0.0, NONE);
        assert!(big.score(b"a").is_some_and(|s| s.is_sign_negative()));
        // -0 and 0 are equal scores: ties go by member.
        big.insert(b"b", 0.0, NONE);
        big.insert(b"0", 0.0, NONE);
        let order: Vec<&[u8]> = big.iter().map(|(m, _)| m).collect();
        assert_eq!(order, vec![b"0".as_slice(), b"a", b"b"]);
    }

    #[test]
    fn members_are_binary_and_compared_bytewise() {
        for limits in [SMALL, NONE] {
            let mut z = ZSet::new();
            for m in [&b"\xff"[..], b"", b"\x00", b"a\x00b", b"A", b"a"] {
                z.insert(m, 1.0, limits);
            }
            let order: Vec<Vec<u8>> = z.iter().map(|(m, _)| m.to_vec()).collect();
            assert_eq!(
                order,
                vec![
                    b"".to_vec(),
                    b"\x00".to_vec(),
                    b"A".to_vec(),
                    b"a".to_vec(),
                    b"a\x00b".to_vec(),
                    b"\xff".to_vec()
                ]
            );
            assert_eq!(z.rank(b""), Some(0));
            assert_eq!(z.score(b"\x00"), Some(1.0));
        }
    }

    #[test]
    fn count_where_on_members_finds_lex_ranges() {
        for limits in [SMALL, NONE] {
            let mut z = ZSet::new();
            for c in b'a'..=b'z' {
                z.insert(&[c], 0.0, limits);
            }
            assert_eq!(z.count_where(|m, _| m < b"c".as_slice()), 2);
            assert_eq!(z.count_where(|m, _| m <= b"z".as_slice()), 26);
            assert_eq!(z.count_where(|_, _| false), 0);
        }
    }

    #[test]
    fn scan_visits_every_member_present_throughout() {
        let mut z = ZSet::new();
        for i in 0..1000 {
            z.insert(format!("m{i}").as_bytes(), i as f64, NONE);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            cursor = z.scan(cursor, 10, |m, _| {
                seen.insert(m.to_vec());
            });
            // Remove members as we go: the ones that stay must all be seen.
            z.remove(format!("m{}", step * 3).as_bytes());
            step += 1;
            if cursor == 0 {
                break;
            }
        }
        for (m, _) in z.iter() {
            assert!(seen.contains(m), "missed {:?}", String::from_utf8_lossy(m));
        }
    }

    #[test]
    fn sequential_inserts_fill_leaves_and_memory_is_compact() {
        let mut z = ZSet::new();
        let n = 100_000;
        for i in 0..n {
            z.insert(format!("member:{i}").as_bytes(), i as f64, SMALL);
        }
        let per_member = z.heap_size() / n;
        assert!(per_member < 70, "{per_member} bytes per member");
        // Descending inserts too.
        let mut d = ZSet::new();
        for i in (0..n).rev() {
            d.insert(format!("member:{i}").as_bytes(), i as f64, SMALL);
        }
        assert!(d.heap_size() / n < 70);
        assert_eq!(all(&z), all(&d));
        assert_eq!(z, d);
    }

    #[test]
    fn node_sizes_match_allocator_classes() {
        assert_eq!(std::mem::size_of::<Leaf>(), 768);
        assert_eq!(std::mem::size_of::<Slot>(), 32);
        assert_eq!(CHUNK * std::mem::size_of::<Slot>(), 128 * 1024);
    }

    #[test]
    fn slots_chunks_stay_dense() {
        let mut s = Slots::with_capacity(3);
        let slot = |i: usize| Slot {
            member: CompactBytes::from_slice(i.to_string().as_bytes()),
            score: i as f64,
        };
        for i in 0..3 * CHUNK + 5 {
            s.push(slot(i));
        }
        assert_eq!(s.len(), 3 * CHUNK + 5);
        assert_eq!(s.chunks[0].capacity(), CHUNK);
        assert_eq!(s[CHUNK + 7].score, (CHUNK + 7) as f64);
        // Pops and pushes across a chunk boundary keep indexes right.
        for _ in 0..10 {
            s.pop();
        }
        s.push(slot(99));
        assert_eq!(s[3 * CHUNK - 5].score, 99.0);
        let removed = s.swap_remove(1).map(|r| r.score);
        assert_eq!(removed, Some(1.0));
        assert_eq!(s[1].score, 99.0);
        while s.len() > 0 {
            s.pop();
        }
        assert!(s.chunks.len() <= 2);
        assert_eq!(s.swap_remove(0).map(|r| r.score), None);
    }

    #[test]
    fn shrinking_gives_memory_back() {
        let mut z = ZSet::new();
        for i in 0..50_000 {
            z.insert(format!("member:{i}").as_bytes(), i as f64, NONE);
        }
        let big = z.heap_size();
        assert_eq!(z.remove_range(0, 49_000), 49_000);
        assert_eq!(z.len(), 1000);
        assert!(z.heap_size() < big / 10, "{} vs {}", z.heap_size(), big);
        assert_eq!(
            z.get(0).map(|(m, _)| m.to_vec()),
            Some(b"member:49000".to_vec())
        );
    }

    #[test]
    fn equality_is_by_encoding_and_content() {
        let mut a = ZSet::new();
        let mut b = ZSet::new();
        a.insert(b"x", 1.0, SMALL);
        b.insert(b"x", 1.0, NONE);
        assert_ne!(a, b);
        let mut c = ZSet::new();
        c.insert(b"x", 1.0, SMALL);
        assert_eq!(a, c);
        c.insert(b"x", 2.0, SMALL);
        assert_ne!(a, c);
        assert_eq!(a.clone(), a);
        assert!(format!("{a:?}").contains("listpack"));
    }

    #[test]
    fn out_of_range_positions_are_empty() {
        for limits in [SMALL, NONE] {
            let mut z = ZSet::new();
            z.insert(b"a", 1.0, limits);
            assert_eq!(z.iter_from(1, false).count(), 0);
            assert_eq!(z.iter_from(5, true).count(), 0);
            assert_eq!(z.get(1), None);
            assert_eq!(z.remove_range(1, 10), 0);
            assert_eq!(z.remove_range(0, usize::MAX), 1);
            assert!(z.is_empty());
            assert_eq!(z.pop(false), None);
        }
    }
}
