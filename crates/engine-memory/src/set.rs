//! The set value. OBJECT ENCODING answers as Redis 7.0 does ("intset" or
//! "hashtable"; 7.0 has no listpack sets, 7.2 added them), over three
//! internal layouts:
//!
//! - **intset** while every member is the canonical decimal text of an i64
//!   (`canonical_i64`: no `+`, no leading zero, no `-0`) and the set holds
//!   at most `set-max-intset-entries` members: a sorted, exactly sized array
//!   of integers at the smallest width (16, 32 or 64 bits) that holds them
//!   all, searched by binary search. Like Redis it widens but never
//!   narrows, and iterates in ascending order.
//! - **packed** (reported as "hashtable"): small sets of other members, at
//!   most `set-max-listpack-entries` members of at most
//!   `set-max-listpack-value` bytes, live in one byte buffer of
//!   length-prefixed entries scanned linearly, like Redis 7.2's listpack
//!   sets: a few bytes per member instead of a hash table's ~40.
//! - **table** (reported as "hashtable"): the members in a dense vector
//!   plus a `hashbrown::HashTable<u32>` of positions, hashed with a fixed
//!   seed. Removal swaps the last member into the hole, so removing by value
//!   or by position is O(1).
//!
//! Every layout iterates in an order that is a pure function of the
//! operation sequence, and every random pick (SPOP, SRANDMEMBER) is a
//! position in that order, so replicas that applied the same commands pick
//! the same members. Conversions go one way (intset -> packed -> table),
//! keep the order, and happen at the same operation on every replica. This
//! module knows nothing about commands or replies.

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

/// The thresholds that choose a set's layout (Redis's settings of the same
/// names; the caller passes them from its configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetLimits {
    /// set-max-intset-entries
    pub max_intset_entries: usize,
    /// set-max-listpack-entries
    pub max_packed_entries: usize,
    /// set-max-listpack-value (bytes per member)
    pub max_packed_value: usize,
}

impl Default for SetLimits {
    fn default() -> Self {
        SetLimits {
            max_intset_entries: 512,
            max_packed_entries: 128,
            max_packed_value: 64,
        }
    }
}

/// One member as stored: an integer of an intset or the bytes of another
/// layout. Both stand for the same text (`Int(5)` is `"5"`).
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
        self.with_bytes(Bytes::copy_from_slice)
    }

    /// Length of the member's text.
    fn text_len(self) -> usize {
        self.with_bytes(<[u8]>::len)
    }
}

// ---------------------------------------------------------------------------
// intset
// ---------------------------------------------------------------------------

/// A sorted array of distinct integers at one width, sized exactly (as
/// Redis's intset: one reallocation per change, no slack).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ints {
    I16(Box<[i16]>),
    I32(Box<[i32]>),
    I64(Box<[i64]>),
}

/// Runs `$body` with `$v` bound to the boxed slice, whatever its width.
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

/// Inserts `x` at `at`, keeping the allocation exact.
fn insert_exact<T: Copy>(b: &mut Box<[T]>, at: usize, x: T) {
    let mut v = std::mem::take(b).into_vec();
    v.reserve_exact(1);
    v.insert(at, x);
    *b = v.into_boxed_slice();
}

/// Removes the value at `at`, keeping the allocation exact.
fn remove_exact<T: Copy>(b: &mut Box<[T]>, at: usize) -> T {
    let mut v = std::mem::take(b).into_vec();
    let x = v.remove(at);
    *b = v.into_boxed_slice();
    x
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
        fn widen<S: Copy, T: From<S>>(v: &[S]) -> Box<[T]> {
            v.iter().map(|&x| T::from(x)).collect()
        }
        *self = match (&*self, want) {
            (Ints::I16(v), 32) => Ints::I32(widen(v)),
            (Ints::I16(v), _) => Ints::I64(widen(v)),
            (Ints::I32(v), _) => Ints::I64(widen(v)),
            // Already the widest: `want <= width` returned above.
            (Ints::I64(_), _) => return,
        };
    }

    /// Adds `x`; false if it was already there.
    fn insert(&mut self, x: i64) -> bool {
        self.widen_for(x);
        with_ints!(self, v => match x.try_into() {
            Ok(x) => match v.binary_search(&x) {
                Ok(_) => false,
                Err(at) => {
                    insert_exact(v, at, x);
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
                    remove_exact(v, at);
                    true
                }
                Err(_) => false,
            },
            Err(_) => false,
        })
    }

    fn remove_at(&mut self, i: usize) -> Option<i64> {
        with_ints!(self, v => (i < v.len()).then(|| i64::from(remove_exact(v, i))))
    }

    fn heap_size(&self) -> usize {
        with_ints!(self, v => std::mem::size_of_val(&**v))
    }

    /// Whether every member's text is at most `max` bytes.
    fn texts_fit(&self, max: usize) -> bool {
        max >= I64_TEXT_MAX
            || (0..self.len()).all(|i| {
                self.get(i)
                    .is_some_and(|x| Member::Int(x).text_len() <= max)
            })
    }
}

// ---------------------------------------------------------------------------
// packed
// ---------------------------------------------------------------------------

/// Small sets: one exactly sized buffer (like the intset) holding the
/// member count as a little-endian u32, then the members back to back, each
/// preceded by its length as a LEB128 varint (one byte up to 127). With the
/// count inside the buffer a whole [`Set`] is 24 bytes, so its box is one
/// small allocation. An empty buffer (no header) is an empty set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Packed {
    buf: Box<[u8]>,
}

/// Bytes of the count header of a packed buffer.
const PACKED_HEADER: usize = 4;

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn push_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads the varint at `at`: (value, bytes used); None if malformed.
fn read_varint(buf: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut v: usize = 0;
    for (i, &b) in buf.get(at..)?.iter().enumerate().take(10) {
        v |= usize::from(b & 0x7f).checked_shl(7 * i as u32)?;
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// The entries of a packed buffer: (start of the entry, member).
struct PackedIter<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Iterator for PackedIter<'a> {
    type Item = (usize, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.at;
        let (n, used) = read_varint(self.buf, start)?;
        let data = start + used;
        let m = self.buf.get(data..data.checked_add(n)?)?;
        self.at = data + n;
        Some((start, m))
    }
}

impl Packed {
    fn entries(&self) -> PackedIter<'_> {
        PackedIter {
            buf: &self.buf,
            at: PACKED_HEADER,
        }
    }

    /// Position, start and end (exclusive) of the entry holding `m`.
    fn find(&self, m: &[u8]) -> Option<(usize, usize, usize)> {
        self.entries()
            .enumerate()
            .find(|(_, (_, e))| *e == m)
            .map(|(pos, (start, e))| (pos, start, start + varint_len(e.len()) + e.len()))
    }

    fn count(&self) -> u32 {
        self.buf
            .get(..PACKED_HEADER)
            .and_then(|h| h.try_into().ok())
            .map_or(0, u32::from_le_bytes)
    }

    fn len(&self) -> usize {
        self.count() as usize
    }

    /// Whether one more member fits the count (at most `max`, and u32).
    fn has_room(&self, max: usize) -> bool {
        self.len() < max && self.count() < u32::MAX
    }

    /// Rewrites the buffer with `edit`, keeping it exactly sized, and
    /// stores the new count.
    fn rewrite(&mut self, count: u32, edit: impl FnOnce(&mut Vec<u8>)) {
        let mut buf = std::mem::take(&mut self.buf).into_vec();
        if buf.len() < PACKED_HEADER {
            buf = vec![0; PACKED_HEADER];
        }
        edit(&mut buf);
        buf[..PACKED_HEADER].copy_from_slice(&count.to_le_bytes());
        self.buf = buf.into_boxed_slice();
    }

    /// Appends `m` (the caller checked it is not there and there is room).
    fn push(&mut self, m: &[u8]) {
        let count = self.count().saturating_add(1);
        self.rewrite(count, |buf| {
            buf.reserve_exact(varint_len(m.len()) + m.len());
            push_varint(buf, m.len());
            buf.extend_from_slice(m);
        });
    }

    /// Removes the entry spanning `start..end` (found by [`Packed::entries`]).
    fn cut(&mut self, start: usize, end: usize) {
        let count = self.count().saturating_sub(1);
        self.rewrite(count, |buf| {
            buf.drain(start..end);
        });
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match self.find(m) {
            Some((_, start, end)) => {
                self.cut(start, end);
                true
            }
            None => false,
        }
    }

    fn get(&self, pos: usize) -> Option<&[u8]> {
        self.entries().nth(pos).map(|(_, m)| m)
    }

    fn remove_at(&mut self, pos: usize) -> Option<Bytes> {
        let (start, m) = self.entries().nth(pos)?;
        let end = start + varint_len(m.len()) + m.len();
        let out = Bytes::copy_from_slice(m);
        self.cut(start, end);
        Some(out)
    }
}

// ---------------------------------------------------------------------------
// table
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
    /// A table holding `members` (distinct) in order, with room for `extra`.
    fn from_members<'a>(
        members: impl Iterator<Item = Member<'a>>,
        n: usize,
        extra: usize,
    ) -> Table {
        let mut t = Table {
            members: Vec::with_capacity(n + extra),
            index: HashTable::with_capacity(n + extra),
            spilled: 0,
        };
        for m in members {
            m.with_bytes(|b| t.insert(b));
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
        std::mem::size_of::<Table>()
            + self.members.capacity() * std::mem::size_of::<CompactBytes>()
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
    Packed(Packed),
    Table(Box<Table>),
}

/// A Redis set value. Equality compares the layout and the members in
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
            (Repr::Packed(a), Repr::Packed(b)) => a == b,
            (Repr::Table(a), Repr::Table(b)) => a.members == b.members,
            _ => false,
        }
    }
}

impl Eq for Set {}

impl fmt::Debug for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let layout = match self.repr {
            Repr::Ints(_) => "intset",
            Repr::Packed(_) => "packed",
            Repr::Table(_) => "table",
        };
        write!(f, "Set({layout}) ")?;
        f.debug_list()
            .entries(
                self.iter()
                    .map(|m| m.with_bytes(|b| String::from_utf8_lossy(b).into_owned())),
            )
            .finish()
    }
}

/// The members of a set in iteration order.
pub struct Iter<'a>(IterInner<'a>);

enum IterInner<'a> {
    Ints(&'a Ints, usize),
    Packed(PackedIter<'a>),
    Table(std::slice::Iter<'a, CompactBytes>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Member<'a>> {
        match &mut self.0 {
            IterInner::Ints(ints, i) => {
                let x = ints.get(*i)?;
                *i += 1;
                Some(Member::Int(x))
            }
            IterInner::Packed(p) => p.next().map(|(_, m)| Member::Bytes(m)),
            IterInner::Table(t) => t.next().map(|m| Member::Bytes(m)),
        }
    }
}

impl Set {
    /// An empty set in the intset encoding (Redis creates sets this way and
    /// converts on the first non-integer member).
    pub fn new() -> Set {
        Set {
            repr: Repr::Ints(Ints::I16(Box::default())),
        }
    }

    /// An empty intset of `width` bits (16, 32 or 64; None otherwise). For
    /// restoring a snapshot: an intset widens but never narrows, so its
    /// width is part of its state (see [`Set::intset_width`]).
    pub fn new_intset(width: u8) -> Option<Set> {
        let ints = match width {
            16 => Ints::I16(Box::default()),
            32 => Ints::I32(Box::default()),
            64 => Ints::I64(Box::default()),
            _ => return None,
        };
        Some(Set {
            repr: Repr::Ints(ints),
        })
    }

    /// An empty set in the packed layout, for restoring a snapshot (the
    /// layout depends on the set's history, not only on its members).
    pub fn new_packed() -> Set {
        Set {
            repr: Repr::Packed(Packed::default()),
        }
    }

    /// An empty set in the table layout with room for `capacity` members,
    /// for restoring a snapshot.
    pub fn new_table(capacity: usize) -> Set {
        Set {
            repr: Repr::Table(Box::new(Table::from_members(
                std::iter::empty(),
                0,
                capacity,
            ))),
        }
    }

    /// The integer width in bits (16, 32 or 64) of an intset; None for the
    /// other layouts.
    pub fn intset_width(&self) -> Option<u8> {
        match &self.repr {
            Repr::Ints(v) => Some(v.width()),
            Repr::Packed(_) | Repr::Table(_) => None,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(v) => v.len(),
            Repr::Packed(p) => p.len(),
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
            Repr::Packed(p) => p.buf.len(),
            Repr::Table(t) => t.heap_size(),
        }
    }

    /// What OBJECT ENCODING reports: Redis 7.0's names.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Ints(_) => "intset",
            Repr::Packed(_) | Repr::Table(_) => "hashtable",
        }
    }

    /// Whether the set is in the intset encoding.
    pub fn is_intset(&self) -> bool {
        matches!(self.repr, Repr::Ints(_))
    }

    /// Whether the set is small and compact (intset or packed): scanned
    /// whole rather than by cursor, and [`Set::get`] is not O(1) for a
    /// packed set (collect [`Set::iter`] for many picks).
    pub fn is_compact(&self) -> bool {
        !matches!(self.repr, Repr::Table(_))
    }

    /// Whether `m` is a member.
    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(v) => canonical_i64(m).is_some_and(|x| v.contains(x)),
            Repr::Packed(p) => p.find(m).is_some(),
            Repr::Table(t) => t.find(m).is_some(),
        }
    }

    /// Whether a member of another set is a member of this one.
    pub fn contains_member(&self, m: Member<'_>) -> bool {
        match (m, &self.repr) {
            (Member::Int(x), Repr::Ints(v)) => v.contains(x),
            (m, _) => m.with_bytes(|b| self.contains(b)),
        }
    }

    /// Adds `m`, changing layout as `limits` say. False if already there.
    pub fn insert(&mut self, m: &[u8], limits: &SetLimits) -> bool {
        self.insert_member(Member::Bytes(m), limits)
    }

    /// [`Set::insert`] for a member taken from another set.
    pub fn insert_member(&mut self, m: Member<'_>, limits: &SetLimits) -> bool {
        match &mut self.repr {
            Repr::Ints(v) => match m.as_int() {
                Some(x) => {
                    let added = v.insert(x);
                    if added && v.len() > limits.max_intset_entries {
                        self.repr = Self::grown_from_ints(v, None, limits);
                    }
                    added
                }
                None => {
                    self.repr = Self::grown_from_ints(v, Some(m), limits);
                    true
                }
            },
            Repr::Packed(p) => {
                let fits = m.text_len() <= limits.max_packed_value;
                if m.with_bytes(|b| p.find(b).is_some()) {
                    return false;
                }
                if fits && p.has_room(limits.max_packed_entries) {
                    m.with_bytes(|b| p.push(b));
                } else {
                    let mut t =
                        Table::from_members(p.entries().map(|(_, e)| Member::Bytes(e)), p.len(), 1);
                    m.with_bytes(|b| t.insert(b));
                    self.repr = Repr::Table(Box::new(t));
                }
                true
            }
            Repr::Table(t) => m.with_bytes(|b| t.insert(b)),
        }
    }

    /// The layout an intset grows into, holding its members and `extra` (a
    /// non-integer, so not among them): packed when everything fits the
    /// packed limits, a table otherwise.
    fn grown_from_ints(v: &Ints, extra: Option<Member<'_>>, limits: &SetLimits) -> Repr {
        let n = v.len() + extra.is_some() as usize;
        let ints = (0..v.len()).filter_map(|i| v.get(i)).map(Member::Int);
        let fits = n <= limits.max_packed_entries.min(u32::MAX as usize)
            && v.texts_fit(limits.max_packed_value)
            && extra.is_none_or(|m| m.text_len() <= limits.max_packed_value);
        if fits {
            let mut p = Packed::default();
            for m in ints.chain(extra) {
                m.with_bytes(|b| p.push(b));
            }
            Repr::Packed(p)
        } else {
            Repr::Table(Box::new(Table::from_members(ints.chain(extra), n, 0)))
        }
    }

    /// Removes `m`; false if it was not a member.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(v) => canonical_i64(m).is_some_and(|x| v.remove(x)),
            Repr::Packed(p) => p.remove(m),
            Repr::Table(t) => t.remove(m),
        }
    }

    /// The member at position `pos` of the iteration order: O(1), except
    /// for a packed set (a scan of at most set-max-listpack-entries).
    pub fn get(&self, pos: usize) -> Option<Member<'_>> {
        match &self.repr {
            Repr::Ints(v) => v.get(pos).map(Member::Int),
            Repr::Packed(p) => p.get(pos).map(Member::Bytes),
            Repr::Table(t) => t.members.get(pos).map(|m| Member::Bytes(m)),
        }
    }

    /// Removes and returns the member at position `pos` (SPOP). O(1) for a
    /// table; an intset or packed set shifts its tail, as Redis's do.
    pub fn take(&mut self, pos: usize) -> Option<Bytes> {
        match &mut self.repr {
            Repr::Ints(v) => v.remove_at(pos).map(|x| Member::Int(x).to_bytes()),
            Repr::Packed(p) => p.remove_at(pos),
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
    pub fn iter(&self) -> Iter<'_> {
        Iter(match &self.repr {
            Repr::Ints(v) => IterInner::Ints(v, 0),
            Repr::Packed(p) => IterInner::Packed(p.entries()),
            Repr::Table(t) => IterInner::Table(t.members.iter()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const LIMITS: SetLimits = SetLimits {
        max_intset_entries: 512,
        max_packed_entries: 128,
        max_packed_value: 64,
    };

    fn texts(s: &Set) -> Vec<String> {
        s.iter()
            .map(|m| m.with_bytes(|b| String::from_utf8_lossy(b).into_owned()))
            .collect()
    }

    fn layout(s: &Set) -> String {
        match &s.repr {
            Repr::Ints(v) => format!("intset{}", v.width()),
            Repr::Packed(_) => "packed".into(),
            Repr::Table(_) => "table".into(),
        }
    }

    fn set_of(items: &[&str], limits: &SetLimits) -> Set {
        let mut s = Set::new();
        for m in items {
            s.insert(m.as_bytes(), limits);
        }
        s
    }

    #[test]
    fn formats_every_i64() {
        for v in [0, 1, -1, 10, -10, 123456789, i64::MAX, i64::MIN] {
            let mut buf = [0; I64_TEXT_MAX];
            assert_eq!(format_i64(v, &mut buf), v.to_string().as_bytes());
        }
    }

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, 16_383, 16_384, usize::MAX] {
            let mut out = Vec::new();
            push_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v));
            assert_eq!(read_varint(&out, 0), Some((v, out.len())));
        }
        assert_eq!(read_varint(&[0x80], 0), None);
        assert_eq!(read_varint(&[], 0), None);
        assert_eq!(read_varint(&[0xff; 12], 0), None);
    }

    #[test]
    fn intset_is_sorted_exact_and_widens_only() {
        let mut s = set_of(&["5", "-3", "100", "5"], &LIMITS);
        assert_eq!(s.encoding(), "intset");
        assert_eq!(texts(&s), ["-3", "5", "100"]);
        assert_eq!(layout(&s), "intset16");
        assert_eq!(s.heap_size(), 3 * 2);
        assert!(s.insert(b"70000", &LIMITS));
        assert_eq!(layout(&s), "intset32");
        assert!(s.insert(b"-9223372036854775808", &LIMITS));
        assert_eq!(layout(&s), "intset64");
        assert_eq!(
            texts(&s),
            ["-9223372036854775808", "-3", "5", "100", "70000"]
        );
        assert!(s.remove(b"-9223372036854775808"));
        assert!(s.remove(b"70000"));
        // Never narrows, like Redis.
        assert_eq!(layout(&s), "intset64");
        assert_eq!(s.heap_size(), 3 * 8);
        assert!(s.contains(b"100"));
        assert!(!s.contains(b"0100"));
        assert!(!s.contains(b"abc"));
        assert!(!s.remove(b"abc"));
        assert_eq!(s.encoding(), "intset");
    }

    #[test]
    fn intset_lookups_outside_the_width() {
        let mut s = set_of(&["1"], &LIMITS);
        assert!(!s.contains(b"9223372036854775807"));
        assert!(!s.contains_member(Member::Int(i64::MIN)));
        assert!(!s.remove(b"70000"));
        assert_eq!(layout(&s), "intset16");
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
            let s = set_of(&[m], &LIMITS);
            assert_eq!(s.encoding(), "hashtable", "{m:?}");
            assert_eq!(layout(&s), "packed");
            assert!(s.contains(m.as_bytes()));
        }
    }

    #[test]
    fn intset_past_its_limit_becomes_a_table() {
        let limits = SetLimits {
            max_intset_entries: 4,
            ..LIMITS
        };
        let mut s = set_of(&["0", "1", "2", "3"], &limits);
        assert_eq!(s.encoding(), "intset");
        // Re-adding an existing member does not count.
        assert!(!s.insert(b"3", &limits));
        assert_eq!(s.encoding(), "intset");
        assert!(s.insert(b"4", &limits));
        // 5 members fit the packed limits.
        assert_eq!(layout(&s), "packed");
        assert_eq!(texts(&s), ["0", "1", "2", "3", "4"]);
        let mut big = Set::new();
        for i in 0..=512 {
            big.insert(i.to_string().as_bytes(), &LIMITS);
        }
        assert_eq!(layout(&big), "table");
        assert_eq!(big.len(), 513);
        // One-way: removing does not convert back.
        for i in 0..500 {
            big.remove(i.to_string().as_bytes());
        }
        assert_eq!(layout(&big), "table");
        assert!(big.contains(b"512"));
        assert!(big.contains_member(Member::Int(511)));
    }

    #[test]
    fn a_string_member_converts_and_keeps_order() {
        let mut s = set_of(&["3", "1", "2"], &LIMITS);
        assert!(s.insert(b"a", &LIMITS));
        assert_eq!(layout(&s), "packed");
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(texts(&s), ["1", "2", "3", "a"]);
        assert!(!s.insert(b"2", &LIMITS));
        assert!(!s.insert(b"a", &LIMITS));
        assert_eq!(s.len(), 4);
        // Too many ints for a packed set: straight to a table.
        let mut many = Set::new();
        for i in 0..200 {
            many.insert(i.to_string().as_bytes(), &LIMITS);
        }
        many.insert(b"x", &LIMITS);
        assert_eq!(layout(&many), "table");
        assert_eq!(texts(&many)[..3], ["0", "1", "2"]);
        assert_eq!(texts(&many)[200], "x");
        // Long ints with a tiny value limit: a table too.
        let tiny = SetLimits {
            max_packed_value: 3,
            ..LIMITS
        };
        let mut s = set_of(&["1", "12345"], &tiny);
        s.insert(b"a", &tiny);
        assert_eq!(layout(&s), "table");
    }

    #[test]
    fn packed_becomes_a_table_past_its_limits() {
        let mut s = Set::new();
        for i in 0..128 {
            assert!(s.insert(format!("m{i}").as_bytes(), &LIMITS));
        }
        assert_eq!(layout(&s), "packed");
        assert!(!s.insert(b"m5", &LIMITS));
        assert_eq!(layout(&s), "packed");
        assert!(s.insert(b"m128", &LIMITS));
        assert_eq!(layout(&s), "table");
        let expected: Vec<String> = (0..129).map(|i| format!("m{i}")).collect();
        assert_eq!(texts(&s), expected);
        let mut s = set_of(&["a", "b"], &LIMITS);
        let long = "x".repeat(65);
        assert!(s.insert(long.as_bytes(), &LIMITS));
        assert_eq!(layout(&s), "table");
        assert_eq!(texts(&s), ["a", "b", long.as_str()]);
        // Exactly at the value limit stays packed.
        let s = set_of(&["a", &"y".repeat(64)], &LIMITS);
        assert_eq!(layout(&s), "packed");
        // Members longer than 127 bytes (2-byte length) in a packed set.
        let roomy = SetLimits {
            max_packed_value: 1000,
            ..LIMITS
        };
        let big = "z".repeat(300);
        let mut s = set_of(&["a", &big, "b"], &roomy);
        assert_eq!(layout(&s), "packed");
        assert_eq!(texts(&s), ["a", big.as_str(), "b"]);
        assert!(s.remove(big.as_bytes()));
        assert_eq!(texts(&s), ["a", "b"]);
    }

    #[test]
    fn members_cross_layouts() {
        let ints = set_of(&["7"], &LIMITS);
        let packed = set_of(&["7", "x"], &LIMITS);
        let mut table = Set::new();
        for i in 0..200 {
            table.insert(format!("t{i}").as_bytes(), &LIMITS);
        }
        table.insert(b"7", &LIMITS);
        for s in [&packed, &table] {
            assert!(s.contains_member(Member::Int(7)));
            assert!(!s.contains_member(Member::Int(8)));
        }
        assert!(ints.contains_member(Member::Bytes(b"7")));
        assert!(!ints.contains_member(Member::Bytes(b"x")));
        let mut out = Set::new();
        for m in packed.iter() {
            out.insert_member(m, &LIMITS);
        }
        assert_eq!(texts(&out), ["7", "x"]);
        assert_eq!(Member::Int(-12).as_int(), Some(-12));
        assert_eq!(Member::Bytes(b"-12").as_int(), Some(-12));
        assert_eq!(&Member::Int(-12).to_bytes()[..], b"-12");
    }

    #[test]
    fn take_by_position() {
        let mut s = set_of(&["10", "20", "30"], &LIMITS);
        assert_eq!(s.take(1).as_deref(), Some(&b"20"[..]));
        assert_eq!(s.take(5), None);
        let mut p = set_of(&["a", "b", "c"], &LIMITS);
        assert_eq!(p.take(1).as_deref(), Some(&b"b"[..]));
        assert_eq!(texts(&p), ["a", "c"]);
        assert_eq!(p.get(1), Some(Member::Bytes(b"c")));
        assert_eq!(p.take(2), None);
        let mut t = Set::new();
        for i in 0..200 {
            t.insert(format!("t{i}").as_bytes(), &LIMITS);
        }
        let long = "a-long-member-that-spills-to-the-heap";
        t.insert(long.as_bytes(), &LIMITS);
        assert_eq!(t.take(0).as_deref(), Some(&b"t0"[..]));
        // The last member moved into the hole.
        assert_eq!(t.get(0), Some(Member::Bytes(long.as_bytes())));
        assert_eq!(t.take(0).as_deref(), Some(long.as_bytes()));
        assert!(t.contains(b"t1") && !t.contains(b"t0"));
        assert_eq!(t.take(1000), None);
    }

    /// A tiny deterministic generator for the model tests.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Random inserts, removals and takes against a BTreeSet model, with
    /// member names that move the set through every layout.
    fn check_against_model(limits: &SetLimits, names: u64, seed: u64) -> BTreeSet<String> {
        let mut s = Set::new();
        let mut model = BTreeSet::new();
        let mut rng = seed;
        let mut layouts = BTreeSet::new();
        for _ in 0..20_000 {
            let r = next(&mut rng);
            let m = match r % 7 {
                0 => format!("a-longer-member-name-{}", r % names),
                1 | 2 => ((r >> 3) % names).to_string(),
                _ => format!("m{}", (r >> 3) % names),
            };
            match (r >> 8) % 4 {
                0 | 1 => assert_eq!(s.insert(m.as_bytes(), limits), model.insert(m.clone())),
                2 => assert_eq!(s.remove(m.as_bytes()), model.remove(&m)),
                _ => {
                    if !s.is_empty() {
                        let pos = (r >> 16) as usize % s.len();
                        let got = s.take(pos).expect("position in range");
                        assert!(model.remove(&*String::from_utf8_lossy(&got)));
                    }
                }
            }
            assert_eq!(s.len(), model.len());
            layouts.insert(layout(&s));
            if s.is_empty() {
                // Like the keyspace: an emptied set is gone.
                s = Set::new();
            }
        }
        for m in &model {
            assert!(s.contains(m.as_bytes()));
        }
        let all: BTreeSet<String> = texts(&s).into_iter().collect();
        assert_eq!(all, model);
        if let Repr::Table(t) = &s.repr {
            for (i, m) in t.members.iter().enumerate() {
                assert_eq!(t.find(m), Some(i));
            }
            let spilled: usize = t.members.iter().map(spilled_size).sum();
            assert_eq!(t.spilled, spilled);
        }
        layouts
    }

    #[test]
    fn every_layout_matches_a_model() {
        let big = check_against_model(&LIMITS, 400, 0x1234_5678_9abc_def0);
        assert!(big.contains("table"), "{big:?}");
        let small = check_against_model(&LIMITS, 40, 0x0fed_cba9_8765_4321);
        assert!(small.contains("packed"), "{small:?}");
        let tight = SetLimits {
            max_intset_entries: 3,
            max_packed_entries: 5,
            max_packed_value: 8,
        };
        let all = check_against_model(&tight, 12, 0x5555_aaaa_1234_4321);
        assert!(all.contains("intset16"), "{all:?}");
    }

    #[test]
    fn intset_matches_a_model_under_random_operations() {
        let mut s = Set::new();
        let mut model = BTreeSet::new();
        let mut rng = 0x0fed_cba9_8765_4321u64;
        let limits = SetLimits {
            max_intset_entries: usize::MAX,
            ..LIMITS
        };
        for _ in 0..5000 {
            let r = next(&mut rng);
            let x = match r % 3 {
                0 => (r >> 8) as i64 % 100,
                1 => (r >> 8) as i64 % 100_000,
                _ => (r >> 2) as i64,
            };
            if (r >> 60).is_multiple_of(2) {
                assert_eq!(s.insert(x.to_string().as_bytes(), &limits), model.insert(x));
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
            s.insert(format!("member:{i}").as_bytes(), &LIMITS);
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
        let mut p = set_of(&["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"; 1], &LIMITS);
        for i in 0..100 {
            p.insert(format!("member-{i}").as_bytes(), &LIMITS);
        }
        let full = p.heap_size();
        while p.len() > 2 {
            p.take(1);
        }
        assert!(p.heap_size() * 10 < full, "{} vs {full}", p.heap_size());
    }

    #[test]
    fn equality_is_by_layout_and_order() {
        assert_eq!(set_of(&["1", "2"], &LIMITS), set_of(&["2", "1"], &LIMITS));
        assert_eq!(
            set_of(&["1", "2", "x"], &LIMITS),
            set_of(&["2", "1", "x"], &LIMITS)
        );
        assert_ne!(
            set_of(&["x", "2", "1"], &LIMITS),
            set_of(&["1", "2", "x"], &LIMITS)
        );
        let a = set_of(&["a", "b"], &LIMITS);
        assert_eq!(a.clone(), a);
        assert!(format!("{a:?}").contains("packed"));
    }

    #[test]
    fn memory_is_compact() {
        let mut ints = Set::new();
        for i in 0..512 {
            ints.insert(i.to_string().as_bytes(), &LIMITS);
        }
        // 2 bytes per member, no slack.
        assert_eq!(ints.heap_size(), 512 * 2);
        let small = set_of(&["alpha", "beta", "gamma"], &LIMITS);
        assert_eq!(small.heap_size(), 4 + 3 + 5 + 4 + 5);
        let mut packed = Set::new();
        for i in 0..128 {
            packed.insert(format!("element:{i}").as_bytes(), &LIMITS);
        }
        assert!(packed.heap_size() <= 4 + 128 * 13, "{}", packed.heap_size());
        let mut t = Set::new();
        for i in 0..100_000 {
            t.insert(format!("element:{i}").as_bytes(), &LIMITS);
        }
        let per = t.heap_size() / t.len();
        assert!(per <= 64, "{per} bytes per member");
        assert_eq!(std::mem::size_of::<Set>(), 24);
    }
}
