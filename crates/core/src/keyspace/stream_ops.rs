//! The stream operations the command family needs from an engine.
//!
//! A stream is an append-only log of entries keyed by [`StreamId`] plus
//! consumer groups. The log is reached through [`StreamOps`]; a group
//! through [`ConsumerGroup`], a view the engine hands out by name, so an
//! engine stores groups, consumers and pending entries its own way. What
//! the commands read of them comes back as small records
//! ([`PendingEntry`], [`ConsumerInfo`]).

use super::Collection;
use kvasir_engine_memory::stream::{Consumer, Group, Pending};

/// Plain data shared with the memory engine (no behaviour to abstract):
/// an entry id, a trimming target (MAXLEN / MINID), and one entry read
/// from a stream (its id and fields, borrowed from the stream). The entry
/// is renamed because `crate::keyspace::EntryRef` is a keyspace entry.
/// The node limits are Redis's `stream-node-max-entries` and
/// `stream-node-max-bytes`, replicated state like the other encoding
/// limits (`crate::store::EncodingLimits`).
pub use kvasir_engine_memory::stream::{
    EntryRef as StreamEntry, NodeLimits as StreamNodeLimits, StreamId, Trim,
};

/// A pending entry of a consumer group, as the commands read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingEntry<'a> {
    /// The consumer the entry was last delivered to.
    pub consumer: &'a [u8],
    /// Unix ms of the last delivery.
    pub delivery_time: u64,
    pub delivery_count: u64,
}

/// A consumer of a group, as the commands read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerInfo<'a> {
    pub name: &'a [u8],
    /// Unix ms of the consumer's last interaction.
    pub seen_time: u64,
    /// Number of entries pending for it.
    pub pending: usize,
}

/// Stream operations of an engine (`crate::stream` is written against it).
///
/// Entries are ordered by id; every iteration below is in id order. Groups
/// iterate in name order (bytewise) and consumers of a group too, so XINFO
/// replies are the same on every replica whatever the engine.
pub trait StreamOps: Collection {
    /// The engine's consumer group.
    type Group: ConsumerGroup;

    /// An empty stream: no entries, no groups, last id 0-0.
    fn new() -> Self;

    /// The last id ever added (or set by XSETID): what auto ids exceed.
    fn last_id(&self) -> StreamId;
    fn set_last_id(&mut self, id: StreamId);
    /// The greatest id ever deleted by XDEL (0-0: none).
    fn max_deleted_id(&self) -> StreamId;
    fn set_max_deleted_id(&mut self, id: StreamId);
    /// Entries ever added (XINFO's entries-added).
    fn entries_added(&self) -> u64;
    fn set_entries_added(&mut self, n: u64);

    /// Appends an entry, making `id` the last id and counting it in
    /// entries-added; the caller has checked that `id > last_id`. The
    /// entry starts a new node when the last one is full by `nodes`.
    fn append<F: AsRef<[u8]>>(&mut self, id: StreamId, fields: &[(F, F)], nodes: StreamNodeLimits);
    /// Redis's streamTrim with `approx` (`~`) and `limit` (0: no cap on
    /// the entries removed); returns how many entries went. What an
    /// approximate trim removes depends on node boundaries: an engine
    /// must place them as Redis does (a node is full at
    /// `stream-node-max-entries` entries, deleted ones counted, as each
    /// append found the limits).
    fn trim(&mut self, to: Trim, approx: bool, limit: u64) -> u64;
    /// Deletes one entry (XDEL), raising max-deleted-id; whether it existed.
    fn delete(&mut self, id: StreamId) -> bool;

    /// Entries with ids in `start..=end`, at most `count`, forward or
    /// (with `rev`) from `end` down.
    fn range(
        &self,
        start: StreamId,
        end: StreamId,
        count: Option<usize>,
        rev: bool,
    ) -> Vec<StreamEntry<'_>>;
    fn first_entry(&self) -> Option<StreamEntry<'_>>;
    fn last_entry(&self) -> Option<StreamEntry<'_>>;
    /// The id of the first entry (0-0 when empty, as Redis reports).
    fn first_id(&self) -> StreamId;
    fn contains(&self, id: StreamId) -> bool;
    /// The number Redis reports as radix-tree-keys (its listpack nodes):
    /// a deterministic function of the stream's history, as node
    /// boundaries are (see [`StreamOps::trim`]).
    fn node_count(&self) -> usize;

    /// Redis's streamRangeHasTombstones: whether entries between `start`
    /// (None: the beginning) and the last id may have been deleted.
    fn range_has_tombstones(&self, start: Option<StreamId>) -> bool;
    /// Redis's streamEstimateDistanceFromFirstEverEntry: the entries-read
    /// counter of a group whose last delivered id is `id`, when knowable.
    fn estimate_entries_read(&self, id: StreamId) -> Option<u64>;
    /// The lag of `group` as XINFO reports it (None: nil), Redis's rules.
    fn group_lag(&self, group: &Self::Group) -> Option<i64>;

    /// The group `name`, to read.
    fn group(&self, name: &[u8]) -> Option<&Self::Group>;
    /// The group `name`, to change.
    fn group_mut(&mut self, name: &[u8]) -> Option<&mut Self::Group>;
    /// Every group with its name, in name order.
    fn groups(&self) -> impl Iterator<Item = (&[u8], &Self::Group)>;
    fn group_count(&self) -> usize;
    /// Creates the group `name` with no consumers and nothing pending;
    /// false (and nothing changed) if it exists.
    fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: Option<u64>) -> bool;
    /// Removes the group `name`; whether it existed.
    fn destroy_group(&mut self, name: &[u8]) -> bool;
}

/// A consumer group of a stream: its last delivered id, its pending
/// entries list (PEL: entry id -> consumer, delivery time and count) and
/// its consumers (name -> seen time and the ids pending for it). The PEL
/// and each consumer's pending ids always agree: an id is pending for a
/// consumer exactly when the PEL says that consumer has it.
pub trait ConsumerGroup {
    /// The last id delivered to the group.
    fn last_id(&self) -> StreamId;
    fn set_last_id(&mut self, id: StreamId);
    /// Entries the group has read (None: unknown, Redis's -1).
    fn entries_read(&self) -> Option<u64>;
    fn set_entries_read(&mut self, n: Option<u64>);

    /// Number of pending entries.
    fn pending_count(&self) -> usize;
    /// The pending entry `id`, if pending.
    fn pending(&self, id: StreamId) -> Option<PendingEntry<'_>>;
    /// The pending entries with ids in `start..=end`, in id order (both
    /// ways: the last one is what XPENDING's summary reports).
    fn pending_in(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> impl DoubleEndedIterator<Item = (StreamId, PendingEntry<'_>)>;
    /// Records `id` as delivered to `consumer` at `now_ms` with delivery
    /// count 1, taking it from the consumer that had it pending. The
    /// consumer exists ([`ConsumerGroup::touch_consumer`] first).
    fn add_pending(&mut self, id: StreamId, consumer: &[u8], now_ms: u64);
    /// A re-delivery of the pending `id` from a consumer's history: its
    /// delivery time becomes `now_ms` and its count goes up by one.
    fn redeliver(&mut self, id: StreamId, now_ms: u64);
    /// XCLAIM / XAUTOCLAIM: gives `id` to `consumer` (created if missing,
    /// seen at `now_ms`) with the given delivery time and count, creating
    /// the pending entry if `id` is not pending (XCLAIM FORCE).
    fn claim(
        &mut self,
        id: StreamId,
        consumer: &[u8],
        delivery_time: u64,
        delivery_count: u64,
        now_ms: u64,
    );
    /// Removes `id` from the PEL and from its consumer (XACK, or an entry
    /// that no longer exists); whether it was pending.
    fn remove_pending(&mut self, id: StreamId) -> bool;

    fn consumer_count(&self) -> usize;
    fn has_consumer(&self, name: &[u8]) -> bool;
    /// Every consumer, in name order.
    fn consumers(&self) -> impl Iterator<Item = ConsumerInfo<'_>>;
    /// The ids pending for the consumer `name` in `start..=end`, in id
    /// order (none when there is no such consumer).
    fn consumer_pending(
        &self,
        name: &[u8],
        start: StreamId,
        end: StreamId,
    ) -> impl Iterator<Item = StreamId>;
    /// The consumer `name`, created if missing, its seen time `now_ms`.
    fn touch_consumer(&mut self, name: &[u8], now_ms: u64);
    /// Removes the consumer `name` and its pending entries from the PEL;
    /// how many it had, None if there was no such consumer.
    fn delete_consumer(&mut self, name: &[u8]) -> Option<usize>;
}

impl Collection for kvasir_engine_memory::Stream {
    fn heap_size(&self) -> usize {
        kvasir_engine_memory::Stream::heap_size(self)
    }

    fn len(&self) -> usize {
        kvasir_engine_memory::Stream::len(self) as usize
    }

    fn encoding(&self) -> &'static str {
        "stream"
    }
}

/// The memory engine's stream: packed nodes in a B-tree by master id,
/// groups in a B-tree by name.
impl StreamOps for kvasir_engine_memory::Stream {
    type Group = Group;

    #[inline]
    fn new() -> Self {
        kvasir_engine_memory::Stream::new()
    }

    #[inline]
    fn last_id(&self) -> StreamId {
        self.last_id
    }

    #[inline]
    fn set_last_id(&mut self, id: StreamId) {
        self.last_id = id;
    }

    #[inline]
    fn max_deleted_id(&self) -> StreamId {
        self.max_deleted_id
    }

    #[inline]
    fn set_max_deleted_id(&mut self, id: StreamId) {
        self.max_deleted_id = id;
    }

    #[inline]
    fn entries_added(&self) -> u64 {
        self.entries_added
    }

    #[inline]
    fn set_entries_added(&mut self, n: u64) {
        self.entries_added = n;
    }

    #[inline]
    fn append<F: AsRef<[u8]>>(&mut self, id: StreamId, fields: &[(F, F)], nodes: StreamNodeLimits) {
        kvasir_engine_memory::Stream::append(self, id, fields, nodes)
    }

    #[inline]
    fn trim(&mut self, to: Trim, approx: bool, limit: u64) -> u64 {
        kvasir_engine_memory::Stream::trim(self, to, approx, limit)
    }

    #[inline]
    fn delete(&mut self, id: StreamId) -> bool {
        kvasir_engine_memory::Stream::delete(self, id)
    }

    #[inline]
    fn range(
        &self,
        start: StreamId,
        end: StreamId,
        count: Option<usize>,
        rev: bool,
    ) -> Vec<StreamEntry<'_>> {
        kvasir_engine_memory::Stream::range(self, start, end, count, rev)
    }

    #[inline]
    fn first_entry(&self) -> Option<StreamEntry<'_>> {
        kvasir_engine_memory::Stream::first_entry(self)
    }

    #[inline]
    fn last_entry(&self) -> Option<StreamEntry<'_>> {
        kvasir_engine_memory::Stream::last_entry(self)
    }

    #[inline]
    fn first_id(&self) -> StreamId {
        kvasir_engine_memory::Stream::first_id(self)
    }

    #[inline]
    fn contains(&self, id: StreamId) -> bool {
        kvasir_engine_memory::Stream::contains(self, id)
    }

    #[inline]
    fn node_count(&self) -> usize {
        kvasir_engine_memory::Stream::node_count(self)
    }

    #[inline]
    fn range_has_tombstones(&self, start: Option<StreamId>) -> bool {
        kvasir_engine_memory::Stream::range_has_tombstones(self, start)
    }

    #[inline]
    fn estimate_entries_read(&self, id: StreamId) -> Option<u64> {
        kvasir_engine_memory::Stream::estimate_entries_read(self, id)
    }

    #[inline]
    fn group_lag(&self, group: &Group) -> Option<i64> {
        kvasir_engine_memory::Stream::group_lag(self, group)
    }

    #[inline]
    fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.get(name)
    }

    #[inline]
    fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.groups.get_mut(name)
    }

    #[inline]
    fn groups(&self) -> impl Iterator<Item = (&[u8], &Group)> {
        self.groups.iter().map(|(name, g)| (&name[..], g))
    }

    #[inline]
    fn group_count(&self) -> usize {
        self.groups.len()
    }

    fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: Option<u64>) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        let group = Group {
            last_id,
            entries_read,
            ..Group::default()
        };
        self.groups.insert(name.into(), group);
        true
    }

    #[inline]
    fn destroy_group(&mut self, name: &[u8]) -> bool {
        self.groups.remove(name).is_some()
    }
}

fn pending_entry(p: &Pending) -> PendingEntry<'_> {
    PendingEntry {
        consumer: &p.consumer,
        delivery_time: p.delivery_time,
        delivery_count: p.delivery_count,
    }
}

/// The memory engine's group: the PEL and the consumers in B-trees, each
/// consumer with the set of its pending ids.
impl ConsumerGroup for Group {
    #[inline]
    fn last_id(&self) -> StreamId {
        self.last_id
    }

    #[inline]
    fn set_last_id(&mut self, id: StreamId) {
        self.last_id = id;
    }

    #[inline]
    fn entries_read(&self) -> Option<u64> {
        self.entries_read
    }

    #[inline]
    fn set_entries_read(&mut self, n: Option<u64>) {
        self.entries_read = n;
    }

    #[inline]
    fn pending_count(&self) -> usize {
        self.pel.len()
    }

    #[inline]
    fn pending(&self, id: StreamId) -> Option<PendingEntry<'_>> {
        self.pel.get(&id).map(pending_entry)
    }

    #[inline]
    fn pending_in(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> impl DoubleEndedIterator<Item = (StreamId, PendingEntry<'_>)> {
        // An empty range rather than BTreeMap's panic on start > end.
        let pel = (start <= end).then(|| self.pel.range(start..=end));
        pel.into_iter()
            .flatten()
            .map(|(id, p)| (*id, pending_entry(p)))
    }

    fn add_pending(&mut self, id: StreamId, consumer: &[u8], now_ms: u64) {
        let pending = Pending {
            consumer: consumer.into(),
            delivery_time: now_ms,
            delivery_count: 1,
        };
        if let Some(old) = self.pel.insert(id, pending) {
            if let Some(c) = self.consumers.get_mut(&old.consumer) {
                c.pending.remove(&id);
            }
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pending.insert(id);
        }
    }

    fn redeliver(&mut self, id: StreamId, now_ms: u64) {
        if let Some(p) = self.pel.get_mut(&id) {
            p.delivery_time = now_ms;
            p.delivery_count += 1;
        }
    }

    fn claim(
        &mut self,
        id: StreamId,
        consumer: &[u8],
        delivery_time: u64,
        delivery_count: u64,
        now_ms: u64,
    ) {
        let taken = Pending {
            consumer: consumer.into(),
            delivery_time,
            delivery_count,
        };
        if let Some(old) = self.pel.insert(id, taken) {
            if let Some(c) = self.consumers.get_mut(&old.consumer) {
                c.pending.remove(&id);
            }
        }
        touch(self, consumer, now_ms).pending.insert(id);
    }

    fn remove_pending(&mut self, id: StreamId) -> bool {
        let Some(p) = self.pel.remove(&id) else {
            return false;
        };
        if let Some(c) = self.consumers.get_mut(&p.consumer) {
            c.pending.remove(&id);
        }
        true
    }

    #[inline]
    fn consumer_count(&self) -> usize {
        self.consumers.len()
    }

    #[inline]
    fn has_consumer(&self, name: &[u8]) -> bool {
        self.consumers.contains_key(name)
    }

    fn consumers(&self) -> impl Iterator<Item = ConsumerInfo<'_>> {
        self.consumers.iter().map(|(name, c)| ConsumerInfo {
            name: &name[..],
            seen_time: c.seen_time,
            pending: c.pending.len(),
        })
    }

    fn consumer_pending(
        &self,
        name: &[u8],
        start: StreamId,
        end: StreamId,
    ) -> impl Iterator<Item = StreamId> {
        let ids = self
            .consumers
            .get(name)
            .filter(|_| start <= end)
            .map(|c| c.pending.range(start..=end));
        ids.into_iter().flatten().copied()
    }

    #[inline]
    fn touch_consumer(&mut self, name: &[u8], now_ms: u64) {
        touch(self, name, now_ms);
    }

    fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pending {
            self.pel.remove(id);
        }
        Some(c.pending.len())
    }
}

/// The group's consumer `name`, created if missing, its seen time now.
fn touch<'a>(g: &'a mut Group, name: &[u8], now_ms: u64) -> &'a mut Consumer {
    let c = g.consumers.entry(name.into()).or_default();
    c.seen_time = now_ms;
    c
}
