//! The list operations the command family needs from an engine.

use super::Collection;
use crate::store::EncodingLimits;
use bytes::Bytes;

/// Plain data shared with the memory engine (no behaviour to abstract):
/// which end of a list an operation works on, and an element as stored
/// (integers decoded, strings borrowed), compared by its bytes.
pub use kvasir_engine_memory::list::{Elem, End};

/// List operations of an engine (`crate::list` is written against it).
///
/// Positions count from the front, 0-based. Iteration is front to back
/// (or back to front for the `_rev` forms) and yields every element once.
/// Encodings (OBJECT ENCODING, [`Collection::encoding`]) must be a
/// deterministic function of the list's history and the limits passed in,
/// so every replica reports the same one.
pub trait ListOps: Collection {
    /// An empty list (in the compact encoding).
    fn new() -> Self;

    /// Pushes `values` one by one at `end` (so LPUSH a b c leaves c
    /// first), converting the encoding as `limits.list_max_listpack_size`
    /// says. A list that becomes a quicklist keeps its inner nodes
    /// compressed as `limits.list_compress_depth` says (a memory
    /// representation: nothing a command sees changes).
    fn push<T: AsRef<[u8]>>(&mut self, end: End, values: &[T], limits: &EncodingLimits);

    /// Removes and returns the first or last element.
    fn pop(&mut self, end: End) -> Option<Bytes>;

    /// The element at `index`, if any.
    fn get(&self, index: usize) -> Option<Elem<'_>>;

    /// Replaces the element at `index`; false if out of range.
    fn set(&mut self, index: usize, value: &[u8], limits: &EncodingLimits) -> bool;

    /// Inserts `value` so that it ends up at `index` (clamped to 0..=len).
    fn insert(&mut self, index: usize, value: &[u8], limits: &EncodingLimits);

    /// Removes `count` elements starting at `start` (clamped to the list).
    fn remove_range(&mut self, start: usize, count: usize);

    /// Removes the elements at the given positions (ascending, distinct).
    fn remove_positions(&mut self, sorted: &[usize]);

    /// Elements from the front.
    fn iter(&self) -> impl ExactSizeIterator<Item = Elem<'_>>;

    /// Elements from position `start` towards the back.
    fn iter_from(&self, start: usize) -> impl ExactSizeIterator<Item = Elem<'_>>;

    /// Elements from the back.
    fn iter_rev(&self) -> impl ExactSizeIterator<Item = Elem<'_>>;

    /// Elements from position `start` towards the front.
    fn iter_rev_from(&self, start: usize) -> impl ExactSizeIterator<Item = Elem<'_>>;
}

impl Collection for kvasir_engine_memory::List {
    fn heap_size(&self) -> usize {
        kvasir_engine_memory::List::heap_size(self)
    }

    fn len(&self) -> usize {
        kvasir_engine_memory::List::len(self)
    }

    fn encoding(&self) -> &'static str {
        kvasir_engine_memory::List::encoding(self)
    }
}

/// The memory engine's list: a listpack, or a quicklist of listpack nodes
/// once it outgrows `list-max-listpack-size` (never back).
impl ListOps for kvasir_engine_memory::List {
    #[inline]
    fn new() -> Self {
        kvasir_engine_memory::List::new()
    }

    #[inline]
    fn push<T: AsRef<[u8]>>(&mut self, end: End, values: &[T], limits: &EncodingLimits) {
        kvasir_engine_memory::List::push(self, end, values, limits.list())
    }

    #[inline]
    fn pop(&mut self, end: End) -> Option<Bytes> {
        kvasir_engine_memory::List::pop(self, end)
    }

    #[inline]
    fn get(&self, index: usize) -> Option<Elem<'_>> {
        kvasir_engine_memory::List::get(self, index)
    }

    #[inline]
    fn set(&mut self, index: usize, value: &[u8], limits: &EncodingLimits) -> bool {
        kvasir_engine_memory::List::set(self, index, value, limits.list())
    }

    #[inline]
    fn insert(&mut self, index: usize, value: &[u8], limits: &EncodingLimits) {
        kvasir_engine_memory::List::insert(self, index, value, limits.list())
    }

    #[inline]
    fn remove_range(&mut self, start: usize, count: usize) {
        kvasir_engine_memory::List::remove_range(self, start, count)
    }

    #[inline]
    fn remove_positions(&mut self, sorted: &[usize]) {
        kvasir_engine_memory::List::remove_positions(self, sorted)
    }

    #[inline]
    fn iter(&self) -> impl ExactSizeIterator<Item = Elem<'_>> {
        kvasir_engine_memory::List::iter(self)
    }

    #[inline]
    fn iter_from(&self, start: usize) -> impl ExactSizeIterator<Item = Elem<'_>> {
        kvasir_engine_memory::List::iter_from(self, start)
    }

    #[inline]
    fn iter_rev(&self) -> impl ExactSizeIterator<Item = Elem<'_>> {
        kvasir_engine_memory::List::iter_rev(self)
    }

    #[inline]
    fn iter_rev_from(&self, start: usize) -> impl ExactSizeIterator<Item = Elem<'_>> {
        kvasir_engine_memory::List::iter_rev_from(self, start)
    }
}
