//! The set operations the command family needs from an engine.

use super::memory::set_limits;
use super::{canonical_i64, Collection};
use crate::store::EncodingLimits;
use bytes::Bytes;
use kvasir_engine_memory::set::{format_i64, Member as MemoryMember};
use kvasir_engine_memory::Set as MemorySet;

/// Longest decimal text of an i64 (`-9223372036854775808`).
const I64_TEXT_MAX: usize = 20;

/// One member of a set as an engine hands it out: an integer (an engine
/// may store integer members as numbers, as Redis's intset does) or bytes.
/// Both stand for the same text: `Int(5)` is the member `"5"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetMember<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl SetMember<'_> {
    /// The integer this member is, if its text is a canonical i64.
    #[inline]
    pub fn as_int(self) -> Option<i64> {
        match self {
            SetMember::Int(i) => Some(i),
            SetMember::Bytes(b) => canonical_i64(b),
        }
    }

    /// Calls `f` with the member's text (integers formatted on the stack).
    #[inline]
    pub fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            SetMember::Int(i) => f(format_i64(i, &mut [0; I64_TEXT_MAX])),
            SetMember::Bytes(b) => f(b),
        }
    }

    /// The member's text as an owned buffer (for replies).
    #[inline]
    pub fn to_bytes(self) -> Bytes {
        self.with_bytes(Bytes::copy_from_slice)
    }
}

/// Set operations of an engine (`crate::set` is written against it).
///
/// Every engine must keep these observable properties a function of the
/// logical state (the sequence of writes applied), so replicas agree: the
/// iteration order ([`SetOps::iter`]; SMEMBERS answers in it), the
/// positions in that order that random picks (SPOP, SRANDMEMBER) name,
/// SSCAN's cursors, and the encoding reported by
/// [`Collection::encoding`], which changes only as the given
/// [`EncodingLimits`] say (Redis's `set-max-intset-entries` and
/// `set-max-listpack-*`).
pub trait SetOps: Collection {
    /// An empty set, as SADD and the set algebra create it (Redis: an
    /// intset, converted on the first non-integer member).
    fn new() -> Self;

    /// Whether `member` is a member.
    fn contains(&self, member: &[u8]) -> bool;

    /// [`SetOps::contains`] for a member of another set.
    fn contains_member(&self, member: SetMember<'_>) -> bool;

    /// Adds `member`, converting the encoding as `limits` say; false if it
    /// was already there.
    fn insert(&mut self, member: &[u8], limits: &EncodingLimits) -> bool;

    /// [`SetOps::insert`] for a member of another set.
    fn insert_member(&mut self, member: SetMember<'_>, limits: &EncodingLimits) -> bool;

    /// Removes `member`; false if it was not a member. The caller deletes
    /// the key when the set becomes empty.
    fn remove(&mut self, member: &[u8]) -> bool;

    /// The members in iteration order.
    fn iter(&self) -> impl Iterator<Item = SetMember<'_>>;

    /// The member at position `pos` of the iteration order (one random
    /// pick).
    fn member_at(&self, pos: usize) -> Option<SetMember<'_>>;

    /// The members at `positions` of the iteration order (SRANDMEMBER's
    /// picks), in the order given, repeats included; positions past the
    /// end are skipped. Many positions may be asked for, so an engine
    /// whose positional access is slow indexes the set once here.
    fn members_at(
        &self,
        positions: impl IntoIterator<Item = usize>,
    ) -> impl Iterator<Item = SetMember<'_>>;

    /// Removes and returns the member at position `pos` of the iteration
    /// order (SPOP).
    fn take(&mut self, pos: usize) -> Option<Bytes>;

    /// One SSCAN step: visits up to about `count` members from `cursor` (0
    /// starts a walk) and returns the cursor to continue from, 0 when the
    /// walk is complete. A member present for the whole walk is visited at
    /// least once; a small set may be visited whole in one step.
    fn scan(&self, cursor: u64, count: u64, visit: impl FnMut(SetMember<'_>)) -> u64;
}

impl Collection for MemorySet {
    fn heap_size(&self) -> usize {
        MemorySet::heap_size(self)
    }

    fn len(&self) -> usize {
        MemorySet::len(self)
    }

    fn encoding(&self) -> &'static str {
        MemorySet::encoding(self)
    }
}

#[inline]
fn from_memory(m: MemoryMember<'_>) -> SetMember<'_> {
    match m {
        MemoryMember::Int(i) => SetMember::Int(i),
        MemoryMember::Bytes(b) => SetMember::Bytes(b),
    }
}

#[inline]
fn to_memory(m: SetMember<'_>) -> MemoryMember<'_> {
    match m {
        SetMember::Int(i) => MemoryMember::Int(i),
        SetMember::Bytes(b) => MemoryMember::Bytes(b),
    }
}

impl SetOps for MemorySet {
    #[inline]
    fn new() -> Self {
        MemorySet::new()
    }

    #[inline]
    fn contains(&self, member: &[u8]) -> bool {
        MemorySet::contains(self, member)
    }

    #[inline]
    fn contains_member(&self, member: SetMember<'_>) -> bool {
        MemorySet::contains_member(self, to_memory(member))
    }

    #[inline]
    fn insert(&mut self, member: &[u8], limits: &EncodingLimits) -> bool {
        MemorySet::insert(self, member, &set_limits(limits))
    }

    #[inline]
    fn insert_member(&mut self, member: SetMember<'_>, limits: &EncodingLimits) -> bool {
        MemorySet::insert_member(self, to_memory(member), &set_limits(limits))
    }

    #[inline]
    fn remove(&mut self, member: &[u8]) -> bool {
        MemorySet::remove(self, member)
    }

    #[inline]
    fn iter(&self) -> impl Iterator<Item = SetMember<'_>> {
        MemorySet::iter(self).map(from_memory)
    }

    /// O(1), except in the packed layout (a scan of at most
    /// set-max-listpack-entries).
    #[inline]
    fn member_at(&self, pos: usize) -> Option<SetMember<'_>> {
        MemorySet::get(self, pos).map(from_memory)
    }

    /// The packed layout finds a position by scanning, so it is indexed
    /// once; intsets and tables are indexable as they are.
    fn members_at(
        &self,
        positions: impl IntoIterator<Item = usize>,
    ) -> impl Iterator<Item = SetMember<'_>> {
        let packed = self.is_compact() && !self.is_intset();
        let indexed: Option<Vec<MemoryMember<'_>>> =
            packed.then(|| MemorySet::iter(self).collect());
        positions.into_iter().filter_map(move |pos| {
            let member = match &indexed {
                Some(members) => members.get(pos).copied(),
                None => MemorySet::get(self, pos),
            };
            member.map(from_memory)
        })
    }

    #[inline]
    fn take(&mut self, pos: usize) -> Option<Bytes> {
        MemorySet::take(self, pos)
    }

    /// A compact set (intset or packed) is visited whole with cursor 0, as
    /// Redis does for its small encodings. A table is walked by position
    /// in its dense member vector from the end towards the start, the
    /// cursor being the number of positions still to visit: removal moves
    /// the last member into the hole, and the last member is always one
    /// already visited (or, once the set shrank below the cursor, an
    /// unvisited one moving to another unvisited position), so a member
    /// present for the whole walk is never missed; members added during it
    /// may be.
    fn scan(&self, cursor: u64, count: u64, mut visit: impl FnMut(SetMember<'_>)) -> u64 {
        if self.is_compact() {
            MemorySet::iter(self).for_each(|m| visit(from_memory(m)));
            return 0;
        }
        let len = MemorySet::len(self) as u64;
        let mut pos = if cursor == 0 { len } else { cursor.min(len) };
        let mut visited = 0;
        while pos > 0 && visited < count {
            pos -= 1;
            visited += 1;
            if let Some(m) = MemorySet::get(self, pos as usize) {
                visit(from_memory(m));
            }
        }
        pos
    }
}
