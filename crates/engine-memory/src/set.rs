//! The set value, with Redis 7.0's two encodings (7.0 has no listpack
//! sets; 7.2 added them):
//!
//! - **intset** while every member is the canonical decimal text of an i64
//!   (`canonical_i64`: no `+`, no leading zero, no `-0`) and the set holds
//!   at most `set-max-intset-entries` members: a sorted array of integers at
//!   the smallest width (16, 32 or 64 bits) that holds them all, searched by
//!   binary search. Like Redis it widens but never narrows, and iterates in
//!   ascending order.
//! - **hashtable** otherwise: the members in a dense vector plus a
//!   `hashbrown::HashTable<u32>` of positions, hashed with a fixed seed. All
//!   iteration goes through the vector, so the order (and every position
//!   based random pick: SPOP, SRANDMEMBER) is a pure function of the
//!   operation sequence, identical on every replica. Removal swaps the last
//!   member into the hole, so removing by value or by position is O(1).
//!
//! The conversion intset -> hashtable is one-way, as in Redis. This module
//! knows nothing about commands or replies; the caller passes the intset
//! limit.

use crate::value::{canonical_i64, CompactBytes};
use bytes::Bytes;
use foldhash::fast::FixedState;
use hashbrown::hash_table::Entry as TableEntry;
use hashbrown::HashTable;
use std::fmt;
use std::hash::BuildHasher;

/// The fixed hash seed of set members (any constant will do: the index
/// layout never shows in behaviour, the seed only keeps runs reproducible).
const HASH_STATE: FixedState = FixedState::with_seed(0x7365_745f_6b76_6173);

fn hash_member(m: &[u8]) -> u64 {
    HASH_STATE.hash_one(m)
}

/// Longest decimal text of an i64 (`-9223372036854775808`).
const I64_TEXT_MAX: usize = 20;

/// Formats `v` in decimal into `buf`, returning the text (no allocation).
pub fn format_i64(v: i64, buf: &mut [u8; I64_TEXT_MAX]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = I64_TEXT_MAX;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// One member as stored: an integer of an intset or the bytes of a
/// hashtable member. Both stand for the same text (`Int(5)` is `"5"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl Member<'_> {
    /// The integer this member is, if its text is a canonical i64.
    pub fn as_int(self) -> Option<i64> {
        match self {
            Member::Int(i) => Some(i),
            Member::Bytes(b) => canonical_i64(b),
        }
    }

    /// Calls `f` with the member's text (integers formatted on the stack).
    pub fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Member::Int(i) => f(format_i64(i, &mut [0; I64_TEXT_MAX])),
            Member::Bytes(b) => f(b),
        }
    }

    /// The member's text as an owned buffer (for replies).
    pub fn to_bytes(self) -> Bytes {
        match self {
            Member::Int(i) => Bytes::copy_from_slice(format_i64(i, &mut [0; I64_TEXT_MAX])),
            Member::Bytes(b) => Bytes::copy_from_slice(b),
        }
    }
}

// ---------------------------------------------------------------------------
// intset
// ---------------------------------------------------------------------------

/// A sorted array of distinct integers at one width.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ints {
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// Runs `$body` with `$v` bound to the vector, whatever its width.
macro_rules! with_ints {
    ($ints:expr, $v:ident => $body:expr) => {
        match $ints {
            Ints::I16($v) => $body,
            Ints::I32($v) => $body,
            Ints::I64($v) => $body,
        }
    };
}

/// The narrowest width (in bits) that holds `x`.
fn width_of(x: i64) -> u8 {
    if i16::try_from(x).is_ok() {
        16
    } else if i32::try_from(x).is_ok() {
        32
    } else {
        64
    }
}

// `with_ints!` instantiates each body for i16, i32 and i64; for i64 the
// conversions are the identity.
#[allow(clippy::useless_conversion)]
impl Ints {
    fn width(&self) -> u8 {
        match self {
            Ints::I16(_) => 16,
            Ints::I32(_) => 32,
            Ints::I64(_) => 64,
        }
    }

    fn len(&self) -> usize {
        with_ints!(self, v => v.len())
    }

    fn get(&self, i: usize) -> Option<i64> {
        with_ints!(self, v => v.get(i).map(|&x| i64::from(x)))
    }

    fn contains(&self, x: i64) -> bool {
        with_ints!(self, v => match x.try_into() {
            Ok(x) => v.binary_search(&x).is_ok(),
            // Wider than every stored value: not there.
            Err(_) => false,
        })
    }

    /// Widens the array so that it can hold `x` (Redis's intsetUpgradeAndAdd).
    fn widen_for(&mut self, x: i64) {
        let want = width_of(x);
        if want <= self.width() {
            return;
        }
        fn widen<S: Copy, T: From<S>>(v: &[S]) -> Vec<T> {
            let mut out = Vec::with_capacity(v.len() + 1);
            out.extend(v.iter().map(|&x| T::from(x)));
            out
        }
        *self = match (std::mem::replace(self, Ints::I16(Vec::new())), want) {
            (Ints::I16(v), 32) => Ints::I32(widen(&v)),
            (Ints::I16(v), _) => Ints::I64(widen(&v)),
            (Ints::I32(v), _) => Ints::I64(widen(&v)),
            (same, _) => same,
        };
    }

    /// Adds `x`; false if it was already there.
    fn insert(&mut self, x: i64) -> bool {
        self.widen_for(x);
        with_ints!(self, v => match x.try_into() {
            Ok(x) => match v.binary_search(&x) {
                Ok(_) => false,
                Err(at) => {
                    v.insert(at, x);
                    true
                }
            },
            // Cannot happen after widening; refusing is the safe answer.
            Err(_) => false,
        })
    }

    /// Removes `x`; false if it was not there.
    fn remove(&mut self, x: i64) -> bool {
        with_ints!(self, v => match x.try_into() {
            Ok(x) => match v.binary_search(&x) {
                Ok(at) => {
                    v.remove(at);
                    true
                }
                Err(_) => false,
            },
            Err(_) => false,
        })
    }

    fn remove_at(&mut self, i: usize) -> Option<i64> {
        with_ints!(self, v => (i < v.len()).then(|| i64::from(v.remove(i))))
    }

    fn heap_size(&self) -> usize {
        fn bytes<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        with_ints!(self, v => bytes(v))
    }
}

// ---------------------------------------------------------------------------
// hashtable
// ---------------------------------------------------------------------------

/// Members in a dense vector, indexed by a hash table of positions.
#[derive(Clone, Default)]
struct Table {
    members: Vec<CompactBytes>,
    index: HashTable<u32>,
    /// Heap bytes of the members too long to be stored inline.
    spilled: usize,
}

/// Below this capacity a table never shrinks.
const SHRINK_MIN_CAPACITY: usize = 64;

fn spilled_size(m: &CompactBytes) -> usize {
    if m.spilled() {
        m.capacity()
    } else {
        0
    }
}

impl Table {
    fn with_capacity(n: usize) -> Table {
        Table {
            members: Vec::with_capacity(n),
            index: HashTable::with_capacity(n),
            spilled: 0,
        }
    }

    /// The table holding the members of an intset, with room for `extra`.
    fn from_ints(ints: &Ints, extra: usize) -> Table {
        let mut t = Table::with_capacity(ints.len() + extra);
        for i in 0..ints.len() {
            if let Some(x) = ints.get(i) {
                t.insert(format_i64(x, &mut [0; I64_TEXT_MAX]));
            }
        }
        t
    }

    fn len(&self) -> usize {
        self.members.len()
    }

    fn find(&self, m: &[u8]) -> Option<usize> {
        let members = &self.members;
        self.index
            .find(hash_member(m), |&i| members[i as usize].as_slice() == m)
            .map(|&i| i as usize)
    }

    /// Adds `m`; false if it was already there.
    fn insert(&mut self, m: &[u8]) -> bool {
        let members = &self.members;
        let entry = self.index.entry(
            hash_member(m),
            |&i| members[i as usize].as_slice() == m,
            |&i| hash_member(&members[i as usize]),
        );
        match entry {
            TableEntry::Occupied(_) => false,
            TableEntry::Vacant(slot) => {
                // Positions are u32: a set of 4 billion members would need
                // ~100 GB here, far beyond what a node holds.
                slot.insert(self.members.len() as u32);
                let stored = CompactBytes::from_slice(m);
                self.spilled += spilled_size(&stored);
                self.members.push(stored);
                true
            }
        }
    }

    /// Removes `m`; false if it was not there.
    fn remove(&mut self, m: &[u8]) -> bool {
        let members = &self.members;
        match self
            .index
            .find_entry(hash_member(m), |&i| members[i as usize].as_slice() == m)
        {
            Ok(slot) => {
                let (pos, _) = slot.remove();
                self.swap_out(pos as usize);
                true
            }
            Err(_) => false,
        }
    }

    /// Removes and returns the member at `pos`.
    fn remove_at(&mut self, pos: usize) -> Option<CompactBytes> {
        let hash = hash_member(self.members.get(pos)?);
        let slot = self.index.find_entry(hash, |&i| i as usize == pos).ok()?;
        slot.remove();
        Some(self.swap_out(pos))
    }

    /// Takes the member at `pos` (already unindexed) out of the vector,
    /// moving the last member into its place and repointing its index slot.
    fn swap_out(&mut self, pos: usize) -> CompactBytes {
        let last = self.members.len() - 1;
        if pos != last {
            let moved = hash_member(&self.members[last]);
            if let Some(slot) = self.index.find_mut(moved, |&i| i as usize == last) {
                *slot = pos as u32;
            }
        }
        let out = self.members.swap_remove(pos);
        self.spilled -= spilled_size(&out);
        self.maybe_shrink();
        out
    }

    /// Gives memory back once the table is mostly empty (after many SPOPs),
    /// like Redis's dict resize. Order and positions do not change.
    fn maybe_shrink(&mut self) {
        let cap = self.members.capacity();
        if cap > SHRINK_MIN_CAPACITY && self.members.len() * 4 < cap {
            let target = (self.members.len() * 2).max(SHRINK_MIN_CAPACITY / 2);
            self.members.shrink_to(target);
            let members = &self.members;
            self.index
                .shrink_to(target, |&i| hash_member(&members[i as usize]));
        }
    }

    fn heap_size(&self) -> usize {
        self.members.capacity() * std::mem::size_of::<CompactBytes>()
            + self.index.allocation_size()
            + self.spilled
    }
}

// ---------------------------------------------------------------------------
// Set
// ---------------------------------------------------------------------------

#[derive(Clone)]
enum Repr {
    Ints(Ints),
    Table(Table),
}

/// A Redis set value. Equality compares the encoding and the members in
/// iteration order (the state replicas must agree on), not set semantics.
#[derive(Clone)]
pub struct Set {
    repr: Repr,
}

impl Default for Set {
    fn default() -> Self {
        Set::new()
    }
}

impl PartialEq for Set {
    fn eq(&self, other: &Self) -> bool {
        match (&self.repr, &other.repr) {
            (Repr::Ints(a), Repr::Ints(b)) => a == b,
            (Repr::Table(a), Repr::Table(b)) => a.members == b.members,
            _ => false,
        }
    }
}

impl Eq for Set {}

impl fmt::Debug for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Set({}) ", self.encoding())?;
        f.debug_list()
            .entries(
                self.iter()
                    .map(|m| m.with_bytes(|b| String::from_utf8_lossy(b).into_owned())),
            )
            .finish()
    }
}

impl Set {
    /// An empty set in the intset encoding (Redis creates sets this way and
    /// converts on the first non-integer member).
    pub fn new() -> Set {
        Set {
            repr: Repr::Ints(Ints::I16(Vec::new())),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(v) => v.len(),
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Ints(v) => v.heap_size(),
            Repr::Table(t) => t.heap_size(),
        }
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Ints(_) => "intset",
            Repr::Table(_) => "hashtable",
        }
    }

    /// Whether the set is in the intset encoding.
    pub fn is_intset(&self) -> bool {
        matches!(self.repr, Repr::Ints(_))
    }

    /// Whether `m` is a member.
    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(v) => canonical_i64(m).is_some_and(|x| v.contains(x)),
            Repr::Table(t) => t.find(m).is_some(),
        }
    }

    /// Whether a member of another set is a member of this one.
    pub fn contains_member(&self, m: Member<'_>) -> bool {
        match (m, &self.repr) {
            (Member::Int(x), Repr::Ints(v)) => v.contains(x),
            (Member::Int(x), Repr::Table(t)) => {
                t.find(format_i64(x, &mut [0; I64_TEXT_MAX])).is_some()
            }
            (Member::Bytes(b), _) => self.contains(b),
        }
    }

    /// Adds `m`, converting to a hashtable when `m` is not an integer or the
    /// intset grows beyond `max_intset` members. False if already there.
    pub fn insert(&mut self, m: &[u8], max_intset: usize) -> bool {
        self.insert_member(Member::Bytes(m), max_intset)
    }

    /// [`Set::insert`] for a member taken from another set.
    pub fn insert_member(&mut self, m: Member<'_>, max_intset: usize) -> bool {
        match &mut self.repr {
            Repr::Ints(v) => match m.as_int() {
                Some(x) => {
                    let added = v.insert(x);
                    if added && v.len() > max_intset {
                        self.repr = Repr::Table(Table::from_ints(v, 0));
                    }
                    added
                }
                None => {
                    let mut t = Table::from_ints(v, 1);
                    let added = m.with_bytes(|b| t.insert(b));
                    self.repr = Repr::Table(t);
                    added
                }
            },
            Repr::Table(t) => m.with_bytes(|b| t.insert(b)),
        }
    }

    /// Removes `m`; false if it was not a member.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(v) => canonical_i64(m).is_some_and(|x| v.remove(x)),
            Repr::Table(t) => t.remove(m),
        }
    }

    /// The member at position `pos` of the iteration order.
    pub fn get(&self, pos: usize) -> Option<Member<'_>> {
        match &self.repr {
            Repr::Ints(v) => v.get(pos).map(Member::Int),
            Repr::Table(t) => t.members.get(pos).map(|m| Member::Bytes(m)),
        }
    }

    /// Removes and returns the member at position `pos` (SPOP). O(1) for a
    /// hashtable; an intset shifts its tail, as Redis's does.
    pub fn take(&mut self, pos: usize) -> Option<Bytes> {
        match &mut self.repr {
            Repr::Ints(v) => v.remove_at(pos).map(|x| Member::Int(x).to_bytes()),
            Repr::Table(t) => t.remove_at(pos).map(|m| {
                if m.spilled() {
                    Bytes::from(m.into_vec())
                } else {
                    Bytes::copy_from_slice(&m)
                }
            }),
        }
    }

    /// The members in iteration order (ascending for an intset).
    pub fn iter(&self) -> impl Iterator<Item = Member<'_>> + '_ {
        (0..self.len()).filter_map(move |i| self.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const MAX: usize = 512;

    fn texts(s: &Set) -> Vec<String> {
        s.iter()
            .map(|m| m.with_bytes(|b| String::from_utf8_lossy(b).into_owned()))
            .collect()
    }

    fn width(s: &Set) -> Option<u8> {
        match &s.repr {
            Repr::Ints(v) => Some(v.width()),
            Repr::Table(_) => None,
        }
    }

    #[test]
    fn formats_every_i64() {
        for v in [0, 1, -1, 10, -10, 123456789, i64::MAX, i64::MIN] {
            let mut buf = [0; I64_TEXT_MAX];
            assert_eq!(format_i64(v, &mut buf), v.to_string().as_bytes());
        }
    }

    #[test]
    fn intset_is_sorted_and_widens_only() {
        let mut s = Set::new();
        assert_eq!(s.encoding(), "intset");
        for x in ["5", "-3", "100", "5"] {
            s.insert(x.as_bytes(), MAX);
        }
        assert_eq!(texts(&s), ["-3", "5", "100"]);
        assert_eq!(width(&s), Some(16));
        assert!(s.insert(b"70000", MAX));
        assert_eq!(width(&s), Some(32));
        assert!(s.insert(b"-9223372036854775808", MAX));
        assert_eq!(width(&s), Some(64));
        assert_eq!(
            texts(&s),
            ["-9223372036854775808", "-3", "5", "100", "70000"]
        );
        assert!(s.remove(b"-9223372036854775808"));
        assert!(s.remove(b"70000"));
        // Never narrows, like Redis.
        assert_eq!(width(&s), Some(64));
        assert!(s.contains(b"100"));
        assert!(!s.contains(b"0100"));
        assert!(!s.contains(b"abc"));
        assert!(!s.remove(b"abc"));
        assert_eq!(s.encoding(), "intset");
    }

    #[test]
    fn intset_lookups_outside_the_width() {
        let mut s = Set::new();
        s.insert(b"1", MAX);
        assert!(!s.contains(b"9223372036854775807"));
        assert!(!s.contains_member(Member::Int(i64::MIN)));
        assert!(!s.remove(b"70000"));
        assert_eq!(width(&s), Some(16));
    }

    #[test]
    fn non_canonical_integers_are_strings() {
        for m in [
            "01",
            "-0",
            "+1",
            " 1",
            "1 ",
            "1.0",
            "",
            "9223372036854775808",
        ] {
            let mut s = Set::new();
            assert!(s.insert(m.as_bytes(), MAX));
            assert_eq!(s.encoding(), "hashtable", "{m:?}");
            assert!(s.contains(m.as_bytes()));
        }
    }

    #[test]
    fn converts_past_the_intset_limit() {
        let mut s = Set::new();
        for i in 0..4 {
            s.insert(i.to_string().as_bytes(), 4);
        }
        assert_eq!(s.encoding(), "intset");
        // Re-adding an existing member does not count.
        assert!(!s.insert(b"3", 4));
        assert_eq!(s.encoding(), "intset");
        assert!(s.insert(b"4", 4));
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(texts(&s), ["0", "1", "2", "3", "4"]);
        // One-way: removing does not convert back.
        s.remove(b"4");
        s.remove(b"3");
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.contains(b"2"));
        assert!(s.contains_member(Member::Int(2)));
    }

    #[test]
    fn a_string_member_converts_and_keeps_order() {
        let mut s = Set::new();
        for x in ["3", "1", "2"] {
            s.insert(x.as_bytes(), MAX);
        }
        assert!(s.insert(b"a", MAX));
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(texts(&s), ["1", "2", "3", "a"]);
        assert!(!s.insert(b"2", MAX));
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn members_cross_encodings() {
        let mut ints = Set::new();
        ints.insert(b"7", MAX);
        let mut table = Set::new();
        table.insert(b"7", MAX);
        table.insert(b"x", MAX);
        assert!(table.contains_member(Member::Int(7)));
        assert!(ints.contains_member(Member::Bytes(b"7")));
        assert!(!ints.contains_member(Member::Bytes(b"x")));
        let mut out = Set::new();
        for m in table.iter() {
            out.insert_member(m, MAX);
        }
        assert_eq!(texts(&out), ["7", "x"]);
        assert_eq!(Member::Int(-12).as_int(), Some(-12));
        assert_eq!(Member::Bytes(b"-12").as_int(), Some(-12));
        assert_eq!(&Member::Int(-12).to_bytes()[..], b"-12");
    }

    #[test]
    fn take_by_position() {
        let mut s = Set::new();
        for x in ["10", "20", "30"] {
            s.insert(x.as_bytes(), MAX);
        }
        assert_eq!(s.take(1).as_deref(), Some(&b"20"[..]));
        assert_eq!(s.take(5), None);
        let mut t = Set::new();
        for x in ["a", "b", "c", "a-long-member-that-spills-to-the-heap"] {
            t.insert(x.as_bytes(), MAX);
        }
        assert_eq!(t.take(0).as_deref(), Some(&b"a"[..]));
        // The last member moved into the hole.
        assert_eq!(
            texts(&t),
            ["a-long-member-that-spills-to-the-heap", "b", "c"]
        );
        assert_eq!(
            t.take(0).as_deref(),
            Some(&b"a-long-member-that-spills-to-the-heap"[..])
        );
        assert!(t.contains(b"b") && t.contains(b"c") && !t.contains(b"a"));
        assert_eq!(t.take(3), None);
    }

    /// A tiny deterministic generator for the model test.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn table_matches_a_model_under_random_operations() {
        let mut s = Set::new();
        let mut model = BTreeSet::new();
        let mut rng = 0x1234_5678_9abc_def0u64;
        for _ in 0..20_000 {
            let r = next(&mut rng);
            let m = if r.is_multiple_of(5) {
                format!("a-longer-member-name-{}", r % 300)
            } else {
                format!("m{}", r % 300)
            };
            match (r >> 8) % 4 {
                0 | 1 => assert_eq!(s.insert(m.as_bytes(), MAX), model.insert(m.clone())),
                2 => assert_eq!(s.remove(m.as_bytes()), model.remove(&m)),
                _ => {
                    if !s.is_empty() {
                        let pos = (r >> 16) as usize % s.len();
                        let got = s
                            .take(pos)
                            .map(|b| String::from_utf8_lossy(&b).into_owned());
                        let got = got.expect("position in range");
                        assert!(model.remove(&got));
                    }
                }
            }
            assert_eq!(s.len(), model.len());
        }
        for m in &model {
            assert!(s.contains(m.as_bytes()));
        }
        let all: BTreeSet<String> = texts(&s).into_iter().collect();
        assert_eq!(all, model);
        // Every position resolves back to its member through the index.
        if let Repr::Table(t) = &s.repr {
            for (i, m) in t.members.iter().enumerate() {
                assert_eq!(t.find(m), Some(i));
            }
            let spilled: usize = t.members.iter().map(spilled_size).sum();
            assert_eq!(t.spilled, spilled);
        }
    }

    #[test]
    fn intset_matches_a_model_under_random_operations() {
        let mut s = Set::new();
        let mut model = BTreeSet::new();
        let mut rng = 0x0fed_cba9_8765_4321u64;
        for _ in 0..5000 {
            let r = next(&mut rng);
            let x = match r % 3 {
                0 => (r >> 8) as i64 % 100,
                1 => (r >> 8) as i64 % 100_000,
                _ => (r >> 2) as i64,
            };
            if (r >> 60).is_multiple_of(2) {
                assert_eq!(
                    s.insert(x.to_string().as_bytes(), usize::MAX),
                    model.insert(x)
                );
            } else {
                assert_eq!(s.remove(x.to_string().as_bytes()), model.remove(&x));
            }
        }
        assert_eq!(s.encoding(), "intset");
        let got: Vec<i64> = s.iter().filter_map(|m| m.as_int()).collect();
        assert_eq!(got, model.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn shrinks_after_mass_removal_and_stays_consistent() {
        let mut s = Set::new();
        for i in 0..10_000 {
            s.insert(format!("member:{i}").as_bytes(), MAX);
        }
        let big = s.heap_size();
        while s.len() > 10 {
            s.take(0);
        }
        assert!(s.heap_size() * 20 < big, "{} vs {big}", s.heap_size());
        for m in s.clone().iter() {
            assert!(m.with_bytes(|b| s.remove(b)));
        }
        assert!(s.is_empty());
    }

    #[test]
    fn equality_is_by_encoding_and_order() {
        let mut a = Set::new();
        let mut b = Set::new();
        for x in ["1", "2"] {
            a.insert(x.as_bytes(), MAX);
        }
        for x in ["2", "1"] {
            b.insert(x.as_bytes(), MAX);
        }
        assert_eq!(a, b); // intsets are sorted
        a.insert(b"x", MAX);
        b.insert(b"x", MAX);
        assert_eq!(a, b);
        let mut c = Set::new();
        for x in ["x", "2", "1"] {
            c.insert(x.as_bytes(), MAX);
        }
        assert_ne!(a, c);
        assert_eq!(a.clone(), a);
        assert!(format!("{a:?}").contains("hashtable"));
    }

    #[test]
    fn memory_is_compact() {
        let mut ints = Set::new();
        for i in 0..512 {
            ints.insert(i.to_string().as_bytes(), MAX);
        }
        // 2 bytes per member (plus growth slack).
        assert!(ints.heap_size() <= 512 * 2 * 2, "{}", ints.heap_size());
        let mut t = Set::new();
        for i in 0..100_000 {
            t.insert(format!("element:{i}").as_bytes(), MAX);
        }
        let per = t.heap_size() / t.len();
        assert!(per <= 64, "{per} bytes per member");
    }
}
