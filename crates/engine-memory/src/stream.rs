//! The Stream value type: an append-only log of entries keyed by
//! [`StreamId`], plus consumer groups.
//!
//! Entries live in packed nodes, the way Redis keeps them in listpacks
//! under a radix tree: a `BTreeMap` from a node's master id to a [`Node`]
//! holding up to `stream-node-max-entries` entries (or about
//! `stream-node-max-bytes` of data, see [`NodeLimits`]) in one byte
//! buffer. Each entry stores its id
//! as varint deltas from the master id and, when its field names equal the
//! node's master fields (the common case: every entry of a queue has the
//! same shape), only its values. An entry of two 8-byte values costs about
//! 21 bytes.
//!
//! Like Redis, a node counts the entries deleted from it towards its limit,
//! so node boundaries (and so what an approximate `~` trim removes) follow
//! Redis's for entries that fit a node by count.
//!
//! This module knows nothing about commands, replies or time: callers pass
//! times in.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Entries per node before a new one starts: the default of Redis's
/// stream-node-max-entries.
pub const NODE_MAX_ENTRIES: u64 = 100;
/// Data bytes per node before a new one starts: the default of
/// stream-node-max-bytes.
pub const NODE_MAX_BYTES: u64 = 4096;
/// The most data one node takes whatever stream-node-max-bytes says
/// (Redis's STREAM_LISTPACK_MAX_SIZE, 1 GB).
const NODE_BYTES_CAP: u64 = 1 << 30;

/// When an append starts a new node: Redis's stream-node-max-entries and
/// stream-node-max-bytes, as they are when the entry is added (a node
/// already there keeps its entries when they change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    /// Entries per node, deleted ones counted; 0: no limit by count.
    pub max_entries: u64,
    /// Data bytes per node; 0 (or more than 1 GB): 1 GB.
    pub max_bytes: u64,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_entries: NODE_MAX_ENTRIES,
            max_bytes: NODE_MAX_BYTES,
        }
    }
}

/// A stream entry id: milliseconds and a sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The smallest id greater than this one (None at the maximum).
    pub fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => self.ms.checked_add(1).map(|ms| StreamId { ms, seq: 0 }),
        }
    }

    /// The greatest id smaller than this one (None at the minimum).
    pub fn prev(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => self
                .ms
                .checked_sub(1)
                .map(|ms| StreamId { ms, seq: u64::MAX }),
        }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// One entry read from a stream; the fields borrow the node's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub id: StreamId,
    pub fields: Vec<(&'a [u8], &'a [u8])>,
}

/// A packed run of entries. `master` is the encoded field names of the
/// node's first entry; `data` the entries back to back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    master: Box<[u8]>,
    data: Vec<u8>,
    count: u32,
    deleted: u32,
}

/// A pending entry of a consumer group: delivered, not yet acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub consumer: Box<[u8]>,
    /// Unix ms of the last delivery.
    pub delivery_time: u64,
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Consumer {
    /// Unix ms of the consumer's last interaction.
    pub seen_time: u64,
    pub pending: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Group {
    pub last_id: StreamId,
    /// Entries the group has read (None: unknown, Redis's -1).
    pub entries_read: Option<u64>,
    pub pel: BTreeMap<StreamId, Pending>,
    pub consumers: BTreeMap<Box<[u8]>, Consumer>,
}

/// A Redis stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    len: u64,
    pub last_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Box<[u8]>, Group>,
}

// ---------------------------------------------------------------------------
// Varints and the node codec
// ---------------------------------------------------------------------------

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn put_blob(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn get_blob<'a>(b: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let n = usize::try_from(get_varint(b, pos)?).ok()?;
    let end = pos.checked_add(n)?;
    let s = b.get(*pos..end)?;
    *pos = end;
    Some(s)
}

/// Field names encoded as a node's master: count, then each name.
fn encode_names<F: AsRef<[u8]>>(fields: &[(F, F)]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, fields.len() as u64);
    for (f, _) in fields {
        put_blob(&mut out, f.as_ref());
    }
    out
}

fn decode_names(b: &[u8]) -> Option<Vec<&[u8]>> {
    let mut pos = 0;
    let n = get_varint(b, &mut pos)?;
    let mut names = Vec::with_capacity((n as usize).min(b.len()));
    for _ in 0..n {
        names.push(get_blob(b, &mut pos)?);
    }
    (pos == b.len()).then_some(names)
}

/// Whether `fields` have exactly the names encoded in `master`; walks the
/// encoding without allocating (this runs on every append).
fn same_names<F: AsRef<[u8]>>(master: &[u8], fields: &[(F, F)]) -> bool {
    let mut pos = 0;
    if get_varint(master, &mut pos) != Some(fields.len() as u64) {
        return false;
    }
    fields
        .iter()
        .all(|(f, _)| get_blob(master, &mut pos) == Some(f.as_ref()))
}

const OWN_FIELDS: u8 = 1;
const SAME_FIELDS: u8 = 0;

impl Node {
    fn new<F: AsRef<[u8]>>(fields: &[(F, F)]) -> Node {
        Node {
            master: encode_names(fields).into_boxed_slice(),
            ..Node::default()
        }
    }

    /// Appends an entry (its id is above every id in the node).
    fn push<F: AsRef<[u8]>>(&mut self, key: StreamId, id: StreamId, fields: &[(F, F)]) {
        let same = same_names(&self.master, fields);
        let d = &mut self.data;
        let ms_delta = id.ms - key.ms;
        put_varint(d, ms_delta);
        put_varint(
            d,
            if ms_delta == 0 {
                id.seq - key.seq
            } else {
                id.seq
            },
        );
        if same {
            d.push(SAME_FIELDS);
            for (_, v) in fields {
                put_blob(d, v.as_ref());
            }
        } else {
            d.push(OWN_FIELDS);
            put_varint(d, fields.len() as u64);
            for (f, v) in fields {
                put_blob(d, f.as_ref());
                put_blob(d, v.as_ref());
            }
        }
        self.count += 1;
    }

    /// Every entry of the node, in id order; None when the bytes are
    /// damaged (only possible for a node read from a snapshot).
    fn entries(&self, key: StreamId) -> Option<Vec<EntryRef<'_>>> {
        let names = decode_names(&self.master)?;
        let (b, mut pos) = (&self.data[..], 0);
        let mut out = Vec::with_capacity(self.count as usize);
        while pos < b.len() {
            let ms_delta = get_varint(b, &mut pos)?;
            let seq = get_varint(b, &mut pos)?;
            let id = if ms_delta == 0 {
                StreamId::new(key.ms, key.seq.checked_add(seq)?)
            } else {
                StreamId::new(key.ms.checked_add(ms_delta)?, seq)
            };
            let flag = *b.get(pos)?;
            pos += 1;
            let mut fields = Vec::with_capacity(names.len());
            match flag {
                SAME_FIELDS => {
                    for n in &names {
                        fields.push((*n, get_blob(b, &mut pos)?));
                    }
                }
                OWN_FIELDS => {
                    let n = get_varint(b, &mut pos)?;
                    for _ in 0..n {
                        let f = get_blob(b, &mut pos)?;
                        fields.push((f, get_blob(b, &mut pos)?));
                    }
                }
                _ => return None,
            }
            if out.last().is_some_and(|e: &EntryRef| e.id >= id) || id < key {
                return None;
            }
            out.push(EntryRef { id, fields });
        }
        (out.len() == self.count as usize).then_some(out)
    }

    /// Whether a new entry must start another node.
    fn is_full(&self, limits: NodeLimits) -> bool {
        let max_bytes = match limits.max_bytes {
            0 => NODE_BYTES_CAP,
            n => n.min(NODE_BYTES_CAP),
        };
        self.data.len() as u64 >= max_bytes
            || (limits.max_entries != 0
                && u64::from(self.count) + u64::from(self.deleted) >= limits.max_entries)
    }

    fn heap_size(&self) -> usize {
        self.master.len() + self.data.capacity()
    }

    /// Rebuilds the node keeping only the entries `keep` accepts; returns
    /// how many went. Deleted entries count as Redis's tombstones do.
    fn retain(&mut self, key: StreamId, keep: impl Fn(StreamId) -> bool) -> u32 {
        let Some(entries) = self.entries(key) else {
            return 0;
        };
        let mut rebuilt = Node {
            master: self.master.clone(),
            deleted: self.deleted,
            ..Node::default()
        };
        for e in entries.iter().filter(|e| keep(e.id)) {
            rebuilt.push(key, e.id, &e.fields);
        }
        let removed = self.count - rebuilt.count;
        rebuilt.deleted += removed;
        rebuilt.data.shrink_to_fit();
        drop(entries);
        *self = rebuilt;
        removed
    }
}

/// What a trim keeps: at most N entries, or the ids from one on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

/// A node's raw parts, for snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawNode {
    pub key: StreamId,
    pub master: Vec<u8>,
    pub data: Vec<u8>,
    pub count: u32,
    pub deleted: u32,
}

// ---------------------------------------------------------------------------
// The stream
// ---------------------------------------------------------------------------

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of nodes (XINFO STREAM radix-tree-keys/nodes).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Appends an entry, in the last node unless `limits` say it is full;
    /// the caller has checked that `id > last_id`.
    pub fn append<F: AsRef<[u8]>>(&mut self, id: StreamId, fields: &[(F, F)], limits: NodeLimits) {
        let start_new = match self.nodes.last_key_value() {
            Some((_, node)) => node.is_full(limits),
            None => true,
        };
        if start_new {
            // The previous tail is sealed: give back its growth slack.
            if let Some(mut last) = self.nodes.last_entry() {
                last.get_mut().data.shrink_to_fit();
            }
            self.nodes.insert(id, Node::new(fields));
        }
        if let Some(mut last) = self.nodes.last_entry() {
            let key = *last.key();
            last.get_mut().push(key, id, fields);
        }
        self.len += 1;
        self.last_id = id;
        self.entries_added += 1;
    }

    /// Entries with ids in `start..=end`, at most `count`, forward or
    /// (with `rev`) from `end` down.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        count: Option<usize>,
        rev: bool,
    ) -> Vec<EntryRef<'_>> {
        let limit = count.unwrap_or(usize::MAX);
        let mut out = Vec::with_capacity(limit.min(self.len as usize).min(1024));
        if start > end || limit == 0 {
            return out;
        }
        let nodes = self.nodes_overlapping(start, end);
        let in_range = |e: &EntryRef| e.id >= start && e.id <= end;
        if rev {
            for (key, node) in nodes.rev() {
                let entries = node.entries(*key).unwrap_or_default();
                for e in entries.into_iter().rev().filter(in_range) {
                    out.push(e);
                    if out.len() >= limit {
                        return out;
                    }
                }
            }
        } else {
            for (key, node) in nodes {
                let entries = node.entries(*key).unwrap_or_default();
                for e in entries.into_iter().filter(in_range) {
                    out.push(e);
                    if out.len() >= limit {
                        return out;
                    }
                }
            }
        }
        out
    }

    /// The nodes that may hold ids in `start..=end`: the one whose master
    /// id is at or below `start`, and those starting inside the range.
    /// Lazy in both directions, so reading the last entry of a long stream
    /// touches one node.
    fn nodes_overlapping(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> impl DoubleEndedIterator<Item = (&StreamId, &Node)> {
        use std::ops::Bound::{Excluded, Included};
        let before = self.nodes.range(..=start).next_back();
        before
            .into_iter()
            .chain(self.nodes.range((Excluded(start), Included(end))))
    }

    /// The first entry, if any.
    pub fn first_entry(&self) -> Option<EntryRef<'_>> {
        self.range(StreamId::MIN, StreamId::MAX, Some(1), false)
            .into_iter()
            .next()
    }

    /// The last entry, if any.
    pub fn last_entry(&self) -> Option<EntryRef<'_>> {
        self.range(StreamId::MIN, StreamId::MAX, Some(1), true)
            .into_iter()
            .next()
    }

    /// The id of the first entry (0-0 when empty, as Redis reports).
    pub fn first_id(&self) -> StreamId {
        self.first_entry().map(|e| e.id).unwrap_or_default()
    }

    pub fn contains(&self, id: StreamId) -> bool {
        !self.range(id, id, Some(1), false).is_empty()
    }

    /// Deletes one entry; returns whether it existed.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&key, _)) = self.nodes.range(..=id).next_back() else {
            return false;
        };
        let Some(node) = self.nodes.get_mut(&key) else {
            return false;
        };
        let removed = node.retain(key, |e| e != id);
        if removed == 0 {
            return false;
        }
        if node.count == 0 {
            self.nodes.remove(&key);
        }
        self.len -= 1;
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        true
    }

    /// Redis's streamTrim: whole nodes go from the front while they can
    /// go entirely; an approximate trim stops at the first node it cannot
    /// remove whole, an exact one then removes entries from inside that
    /// node. `limit` caps the entries removed (0: no cap). Returns how
    /// many entries went.
    pub fn trim(&mut self, to: Trim, approx: bool, limit: u64) -> u64 {
        let mut removed = 0u64;
        while let Some((&key, node)) = self.nodes.first_key_value() {
            if let Trim::MaxLen(max) = to {
                if self.len <= max {
                    break;
                }
            }
            let count = u64::from(node.count);
            if limit > 0 && removed + count > limit {
                break;
            }
            let whole = match to {
                Trim::MaxLen(max) => self.len - count >= max,
                Trim::MinId(min) => {
                    let last = node.entries(key).and_then(|es| es.last().map(|e| e.id));
                    last.is_none_or(|l| l < min)
                }
            };
            if whole {
                self.nodes.remove(&key);
                self.len -= count;
                removed += count;
                continue;
            }
            if !approx {
                removed += self.trim_inside(key, to);
            }
            break;
        }
        removed
    }

    /// Removes entries from the front of the node at `key` until `to`
    /// holds.
    fn trim_inside(&mut self, key: StreamId, to: Trim) -> u64 {
        let len = self.len;
        let Some(node) = self.nodes.get_mut(&key) else {
            return 0;
        };
        let cut: BTreeSet<StreamId> = {
            let entries = node.entries(key).unwrap_or_default();
            let n = match to {
                Trim::MaxLen(max) => (len - max) as usize,
                Trim::MinId(min) => entries.iter().take_while(|e| e.id < min).count(),
            };
            entries.iter().take(n).map(|e| e.id).collect()
        };
        if cut.is_empty() {
            return 0;
        }
        let gone = u64::from(node.retain(key, |id| !cut.contains(&id)));
        if node.count == 0 {
            self.nodes.remove(&key);
        }
        self.len -= gone;
        gone
    }

    /// Every entry, in order (snapshots, digests, XINFO FULL).
    pub fn iter(&self) -> impl Iterator<Item = EntryRef<'_>> {
        self.nodes
            .iter()
            .flat_map(|(k, n)| n.entries(*k).unwrap_or_default())
    }

    /// The nodes' raw parts (snapshots).
    pub fn raw_nodes(&self) -> Vec<RawNode> {
        self.nodes
            .iter()
            .map(|(k, n)| RawNode {
                key: *k,
                master: n.master.to_vec(),
                data: n.data.clone(),
                count: n.count,
                deleted: n.deleted,
            })
            .collect()
    }

    /// Rebuilds the entries from raw nodes; None when they are damaged
    /// (undecodable, out of order) so a bad snapshot cannot panic later.
    pub fn set_raw_nodes(&mut self, raw: Vec<RawNode>) -> Option<()> {
        let mut nodes = BTreeMap::new();
        let mut len = 0u64;
        let mut prev_last: Option<StreamId> = None;
        for r in raw {
            let node = Node {
                master: r.master.into_boxed_slice(),
                data: r.data,
                count: r.count,
                deleted: r.deleted,
            };
            let entries = node.entries(r.key)?;
            let first = entries.first()?.id;
            if prev_last.is_some_and(|p| p >= first || p >= r.key) {
                return None;
            }
            prev_last = entries.last().map(|e| e.id);
            len += entries.len() as u64;
            drop(entries);
            nodes.insert(r.key, node);
        }
        self.nodes = nodes;
        self.len = len;
        Some(())
    }

    /// Heap bytes owned by the stream.
    pub fn heap_size(&self) -> usize {
        let node_entry = std::mem::size_of::<StreamId>() + std::mem::size_of::<Node>();
        let nodes: usize = self
            .nodes
            .values()
            .map(|n| node_entry + n.heap_size())
            .sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| {
                name.len()
                    + std::mem::size_of::<Group>()
                    + g.pel.values().map(|p| 48 + p.consumer.len()).sum::<usize>()
                    + g.consumers
                        .iter()
                        .map(|(n, c)| n.len() + 48 + c.pending.len() * 16)
                        .sum::<usize>()
            })
            .sum();
        nodes + groups
    }

    /// Redis's streamEstimateDistanceFromFirstEverEntry: the entries_read
    /// counter of a group whose last delivered id is `id`, when knowable.
    pub fn estimate_entries_read(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.len == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        let first = self.first_id();
        if self.max_deleted_id.is_zero() || self.max_deleted_id < first {
            if id < first {
                return Some(self.entries_added - self.len);
            }
            if id == first {
                return Some(self.entries_added - self.len + 1);
            }
        }
        None
    }

    /// Redis's streamRangeHasTombstones: whether entries between `start`
    /// and the last id may have been deleted.
    pub fn range_has_tombstones(&self, start: Option<StreamId>) -> bool {
        if self.len == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id() > self.max_deleted_id {
            return false;
        }
        start.unwrap_or(StreamId::MIN) <= self.max_deleted_id
    }

    /// Redis's streamGetLag... as XINFO GROUPS reports it (None: nil).
    /// Entries added that the group has not read; negative when the
    /// group was told it read more than were added (XGROUP CREATE/SETID
    /// ENTRIESREAD), as Redis 7.0 reports it.
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        let lag = |read: u64| (self.entries_added as i64).wrapping_sub(read as i64);
        let valid = g.entries_read.is_some() && !self.range_has_tombstones(Some(g.last_id));
        if valid {
            return g.entries_read.map(lag);
        }
        self.estimate_entries_read(g.last_id).map(lag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(i: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        vec![
            (b"a".to_vec(), i.to_le_bytes().to_vec()),
            (b"b".to_vec(), (!i).to_le_bytes().to_vec()),
        ]
    }

    fn filled(n: u64) -> Stream {
        let mut s = Stream::new();
        for i in 1..=n {
            s.append(
                StreamId::new(1000 + i / 3, i % 3),
                &fields(i),
                NodeLimits::default(),
            );
        }
        s
    }

    #[test]
    fn nodes_fill_to_the_limits_each_append_finds() {
        let by_count = |max_entries, max_bytes, n| {
            let mut s = Stream::new();
            let limits = NodeLimits {
                max_entries,
                max_bytes,
            };
            for i in 1..=n {
                s.append(StreamId::new(i, 0), &fields(i), limits);
            }
            s
        };
        assert_eq!(by_count(10, 4096, 250).node_count(), 25);
        assert_eq!(by_count(1, 4096, 7).node_count(), 7);
        // 0 is no limit by count; 0 bytes is 1 GB.
        assert_eq!(by_count(0, 0, 5000).node_count(), 1);
        // Each entry of `fields` takes over 16 data bytes: a 64-byte limit
        // fills a node in at most 4 of them.
        let small = by_count(0, 64, 100);
        assert!(
            (25..=50).contains(&small.node_count()),
            "{}",
            small.node_count()
        );
        // A node made under one limit keeps its entries when it changes;
        // the next append finds the new one.
        let mut s = by_count(100, 4096, 30);
        assert_eq!(s.node_count(), 1);
        let five = NodeLimits {
            max_entries: 5,
            max_bytes: 4096,
        };
        s.append(StreamId::new(31, 0), &fields(31), five);
        assert_eq!(s.node_count(), 2);
        assert_eq!(s.len(), 31);
        // Deleted entries count towards the limit, as in Redis.
        let mut s = by_count(5, 4096, 4);
        assert!(s.delete(StreamId::new(1, 0)));
        s.append(StreamId::new(5, 0), &fields(5), five);
        s.append(StreamId::new(6, 0), &fields(6), five);
        assert_eq!(s.node_count(), 2);
    }

    #[test]
    fn append_range_and_reverse() {
        let s = filled(250);
        assert_eq!(s.len(), 250);
        assert_eq!(s.node_count(), 3);
        let all = s.range(StreamId::MIN, StreamId::MAX, None, false);
        assert_eq!(all.len(), 250);
        assert!(all.windows(2).all(|w| w[0].id < w[1].id));
        let rev = s.range(StreamId::MIN, StreamId::MAX, Some(5), true);
        assert_eq!(rev[0].id, s.last_id);
        let mid = s.range(StreamId::new(1010, 0), StreamId::new(1020, 0), None, false);
        assert_eq!(mid.first().map(|e| e.id), Some(StreamId::new(1010, 0)));
        assert_eq!(mid.last().map(|e| e.id), Some(StreamId::new(1020, 0)));
        assert_eq!(
            all[7].fields,
            vec![
                (&b"a"[..], &8u64.to_le_bytes()[..]),
                (&b"b"[..], &(!8u64).to_le_bytes()[..])
            ]
        );
    }

    #[test]
    fn own_fields_and_delete() {
        let mut s = Stream::new();
        s.append(StreamId::new(1, 0), &[("f", "v")], NodeLimits::default());
        s.append(
            StreamId::new(2, 0),
            &[("g", "w"), ("h", "x")],
            NodeLimits::default(),
        );
        assert!(s.delete(StreamId::new(1, 0)));
        assert!(!s.delete(StreamId::new(1, 0)));
        assert_eq!(s.max_deleted_id, StreamId::new(1, 0));
        let all = s.range(StreamId::MIN, StreamId::MAX, None, false);
        assert_eq!(all.len(), 1);
        assert_eq!(
            all[0].fields,
            vec![(&b"g"[..], &b"w"[..]), (&b"h"[..], &b"x"[..])]
        );
    }

    #[test]
    fn trims_whole_nodes_approximately_and_entries_exactly() {
        let mut s = filled(250);
        assert_eq!(
            s.trim(Trim::MaxLen(180), true, 0),
            0,
            "first node must stay"
        );
        assert_eq!(s.trim(Trim::MaxLen(120), true, 0), 100);
        assert_eq!(s.trim(Trim::MaxLen(100), false, 0), 50);
        assert_eq!(s.len(), 100);
        let first = s.first_id();
        assert_eq!(
            s.trim(Trim::MinId(first.next().unwrap_or(first)), false, 0),
            1
        );
        assert_eq!(s.len(), 99);
    }

    #[test]
    fn memory_per_entry_is_small() {
        let n = 1_000_000u64;
        let mut s = Stream::new();
        for i in 0..n {
            s.append(
                StreamId::new(1_700_000_000_000 + i / 4, i % 4),
                &fields(i),
                NodeLimits::default(),
            );
        }
        let per = s.heap_size() as f64 / n as f64;
        eprintln!("stream bytes per entry: {per:.1}");
        assert!(per < 30.0, "{per}");
    }
}
