//! The hash operations the command family needs from an engine.

use super::memory::hash_limits;
use super::Collection;
use crate::store::EncodingLimits;
use kvasir_engine_memory::Hash as MemoryHash;

/// Hash operations of an engine (`crate::hash` is written against it).
///
/// Every engine must keep these observable properties a function of the
/// logical state (the sequence of writes applied), so replicas agree:
/// the iteration order ([`HashOps::iter`], which [`HashOps::pairs_at`]
/// and [`HashOps::scan`] follow) and the encoding reported by
/// [`Collection::encoding`], which changes only as the given
/// [`EncodingLimits`] say (Redis's `hash-max-listpack-*`).
pub trait HashOps: Collection {
    /// An empty hash, as HSET creates it (Redis: a listpack).
    fn new() -> Self;

    /// The value of `field`.
    fn get(&self, field: &[u8]) -> Option<&[u8]>;

    fn contains(&self, field: &[u8]) -> bool;

    /// Readies the hash for a write of `pairs` field/value pairs whose
    /// longest field or value is `longest` bytes (Redis's
    /// hashTypeTryConversion: a pair too long for the compact encoding
    /// converts before the write). An engine without encodings may do
    /// nothing.
    fn reserve(&mut self, pairs: usize, longest: usize, limits: &EncodingLimits);

    /// Sets `field` to `value`; true if the field is new. Converts the
    /// encoding as `limits` say.
    fn set(&mut self, field: &[u8], value: &[u8], limits: &EncodingLimits) -> bool;

    /// Removes `field`; true if it was there. The caller deletes the key
    /// when the hash becomes empty.
    fn remove(&mut self, field: &[u8]) -> bool;

    /// (field, value) pairs in iteration order.
    fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])>;

    /// The pairs at `positions` of the iteration order (HRANDFIELD's
    /// picks), in the order given, repeats included; positions past the
    /// end are skipped. Many positions may be asked for, so an engine
    /// whose positional access is slow indexes the hash once here.
    fn pairs_at(
        &self,
        positions: impl IntoIterator<Item = usize>,
    ) -> impl Iterator<Item = (&[u8], &[u8])>;

    /// One HSCAN step: visits up to about `count` pairs from `cursor` (0
    /// starts a walk) and returns the cursor to continue from, 0 when the
    /// walk is complete. A field present for the whole walk is visited at
    /// least once; a small hash may be visited whole in one step.
    fn scan(&self, cursor: u64, count: u64, visit: impl FnMut(&[u8], &[u8])) -> u64;
}

impl Collection for MemoryHash {
    fn heap_size(&self) -> usize {
        MemoryHash::heap_size(self)
    }

    fn len(&self) -> usize {
        MemoryHash::len(self)
    }

    fn encoding(&self) -> &'static str {
        MemoryHash::encoding(self)
    }
}

impl HashOps for MemoryHash {
    #[inline]
    fn new() -> Self {
        MemoryHash::new()
    }

    #[inline]
    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        MemoryHash::get(self, field)
    }

    #[inline]
    fn contains(&self, field: &[u8]) -> bool {
        MemoryHash::contains(self, field)
    }

    #[inline]
    fn reserve(&mut self, pairs: usize, longest: usize, limits: &EncodingLimits) {
        MemoryHash::reserve(self, pairs, longest, hash_limits(limits))
    }

    #[inline]
    fn set(&mut self, field: &[u8], value: &[u8], limits: &EncodingLimits) -> bool {
        MemoryHash::set(self, field, value, hash_limits(limits))
    }

    #[inline]
    fn remove(&mut self, field: &[u8]) -> bool {
        MemoryHash::remove(self, field)
    }

    #[inline]
    fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        MemoryHash::iter(self)
    }

    /// A listpack is decoded once into a vector of slices; a hashtable is
    /// indexable as it is.
    #[inline]
    fn pairs_at(
        &self,
        positions: impl IntoIterator<Item = usize>,
    ) -> impl Iterator<Item = (&[u8], &[u8])> {
        let view = MemoryHash::indexed(self);
        positions.into_iter().filter_map(move |pos| view.get(pos))
    }

    #[inline]
    fn scan(&self, cursor: u64, count: u64, visit: impl FnMut(&[u8], &[u8])) -> u64 {
        MemoryHash::scan(self, cursor, count, visit)
    }
}
