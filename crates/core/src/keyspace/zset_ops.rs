//! The sorted-set operations the command families need from an engine
//! (`crate::zset`, and `crate::geo`, which keeps its points in sorted sets).

use super::memory::zset_limits;
use super::Collection;
use crate::store::EncodingLimits;
use kvasir_engine_memory::ZSet as MemoryZSet;

/// Sorted-set operations of an engine.
///
/// Elements are (member, score) pairs, each member once, ordered by
/// (score, member bytes); scores are never NaN and -0.0 equals 0.0. Ranks
/// are zero-based positions in that ascending order. Every engine must keep
/// these observable properties a function of the logical state (the
/// sequence of writes applied), so replicas agree: the encoding reported by
/// [`Collection::encoding`] (`listpack` until the set outgrows the given
/// [`EncodingLimits`], Redis's `zset-max-listpack-*`, then `skiplist` for
/// good), the score a `listpack` keeps for -0 (0, as Redis's listpack
/// stores it as an integer) and ZSCAN's cursors.
pub trait ZSetOps: Collection {
    /// An empty set in the `listpack` encoding (ZADD, ZRANGESTORE).
    fn new() -> Self;

    /// An empty set already in the `skiplist` encoding, for results known
    /// to be too big for a listpack: Redis creates those directly as
    /// skiplists, which keeps a score of -0 as it is.
    fn new_skiplist() -> Self;

    /// The score of `member`.
    fn score(&self, member: &[u8]) -> Option<f64>;

    /// Sets the score of `member`, adding it if absent, and returns its
    /// previous score. Adding converts to `skiplist` when the set would
    /// outgrow `limits`.
    fn insert(&mut self, member: &[u8], score: f64, limits: &EncodingLimits) -> Option<f64>;

    /// Adds `member`, which the caller has just found absent (with
    /// [`ZSetOps::score`]), without looking for it again.
    fn insert_absent(&mut self, member: &[u8], score: f64, limits: &EncodingLimits);

    /// Removes `member`, returning its score. The caller deletes the key
    /// when the set becomes empty.
    fn remove(&mut self, member: &[u8]) -> Option<f64>;

    /// The ascending rank of `member`.
    fn rank(&self, member: &[u8]) -> Option<usize>;

    /// The element at ascending rank `rank`.
    fn get(&self, rank: usize) -> Option<(&[u8], f64)>;

    /// Every element in ascending order.
    fn iter(&self) -> impl Iterator<Item = (&[u8], f64)>;

    /// Elements from rank `start` on: ascending from the `start`-th lowest,
    /// or (`rev`) descending from the `start`-th highest.
    fn iter_from(&self, start: usize, rev: bool) -> impl Iterator<Item = (&[u8], f64)>;

    /// How many leading elements (ascending) have a score for which `pred`
    /// holds; `pred` holds for a prefix of the scores (like
    /// `slice::partition_point`), so an ordered engine need not visit them.
    fn count_scores_where(&self, pred: impl FnMut(f64) -> bool) -> usize;

    /// How many leading elements (ascending) satisfy `pred`, which holds
    /// for a prefix of the elements.
    fn count_where(&self, pred: impl FnMut(&[u8], f64) -> bool) -> usize;

    /// Removes the elements of ascending ranks `start..end` (clamped to the
    /// set) and returns how many went.
    fn remove_range(&mut self, start: usize, end: usize) -> usize;

    /// Removes and returns the lowest (or, `max`, the highest) element.
    fn pop(&mut self, max: bool) -> Option<(Vec<u8>, f64)>;

    /// One ZSCAN step: visits the elements of up to `count` positions from
    /// `cursor` (0 starts a walk) and returns the cursor to continue from, 0
    /// when the walk is complete. An element present for the whole walk is
    /// visited at least once; a `listpack` is visited whole in one step, as
    /// Redis does.
    fn scan(&self, cursor: u64, count: usize, visit: impl FnMut(&[u8], f64)) -> u64;
}

impl Collection for MemoryZSet {
    fn heap_size(&self) -> usize {
        MemoryZSet::heap_size(self)
    }

    fn len(&self) -> usize {
        MemoryZSet::len(self)
    }

    fn encoding(&self) -> &'static str {
        MemoryZSet::encoding(self)
    }
}

impl ZSetOps for MemoryZSet {
    #[inline]
    fn new() -> Self {
        MemoryZSet::new()
    }

    #[inline]
    fn new_skiplist() -> Self {
        MemoryZSet::new_indexed()
    }

    #[inline]
    fn score(&self, member: &[u8]) -> Option<f64> {
        MemoryZSet::score(self, member)
    }

    #[inline]
    fn insert(&mut self, member: &[u8], score: f64, limits: &EncodingLimits) -> Option<f64> {
        MemoryZSet::insert(self, member, score, zset_limits(limits))
    }

    #[inline]
    fn insert_absent(&mut self, member: &[u8], score: f64, limits: &EncodingLimits) {
        MemoryZSet::insert_absent(self, member, score, zset_limits(limits))
    }

    #[inline]
    fn remove(&mut self, member: &[u8]) -> Option<f64> {
        MemoryZSet::remove(self, member)
    }

    #[inline]
    fn rank(&self, member: &[u8]) -> Option<usize> {
        MemoryZSet::rank(self, member)
    }

    #[inline]
    fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        MemoryZSet::get(self, rank)
    }

    #[inline]
    fn iter(&self) -> impl Iterator<Item = (&[u8], f64)> {
        MemoryZSet::iter(self)
    }

    #[inline]
    fn iter_from(&self, start: usize, rev: bool) -> impl Iterator<Item = (&[u8], f64)> {
        MemoryZSet::iter_from(self, start, rev)
    }

    #[inline]
    fn count_scores_where(&self, pred: impl FnMut(f64) -> bool) -> usize {
        MemoryZSet::count_scores_where(self, pred)
    }

    #[inline]
    fn count_where(&self, pred: impl FnMut(&[u8], f64) -> bool) -> usize {
        MemoryZSet::count_where(self, pred)
    }

    #[inline]
    fn remove_range(&mut self, start: usize, end: usize) -> usize {
        MemoryZSet::remove_range(self, start, end)
    }

    #[inline]
    fn pop(&mut self, max: bool) -> Option<(Vec<u8>, f64)> {
        MemoryZSet::pop(self, max)
    }

    #[inline]
    fn scan(&self, cursor: u64, count: usize, visit: impl FnMut(&[u8], f64)) -> u64 {
        MemoryZSet::scan(self, cursor, count, visit)
    }
}
