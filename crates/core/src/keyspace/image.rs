//! Export and import of a collection's logical content: what snapshots
//! ([`crate::snapshot`]), DUMP/RESTORE ([`crate::rdb`]) and the content
//! digests need from an engine's collection types.
//!
//! A collection is exported as its elements in its iteration order plus
//! its [`Layout`], and imported by creating an empty collection of a
//! layout and loading the elements into it under [`EncodingLimits`]:
//!
//! - a snapshot restore loads under [`KEEP_LAYOUT`] into the layout the
//!   source had, because the layout is replicated state: it is what
//!   OBJECT ENCODING reports, collections never convert back (a hash that
//!   grew past the limit and shrank stays a hashtable), and the iteration
//!   order HRANDFIELD, SPOP and the SCAN family follow differs between
//!   layouts. A replica restored from a snapshot must answer exactly as
//!   its leader;
//! - RESTORE loads under the store's limits into the layout Redis would
//!   start from, so the engine converts as the same inserts by commands
//!   would.
//!
//! Every engine must guarantee, for each collection type: loading the
//! exported elements, in the exported order, into `with_layout(layout)`
//! under [`KEEP_LAYOUT`] (for a list: [`ListImage::restore`]; for a
//! stream: [`StreamImage::from_content`] of its [`StreamImage::content`])
//! gives a collection equal to the source (same layout, same iteration
//! order, same answers to every command). The layouts are Redis's
//! encodings, not an engine's structures: an engine that lays data out
//! otherwise still reports, and so restores, Redis's OBJECT ENCODING and
//! its orders, since replicas must answer alike.

use super::memory::{hash_limits, set_limits, zset_limits};
use crate::store::EncodingLimits;
use kvasir_engine_memory::list::{Elem, End};
use kvasir_engine_memory::stream::{Consumer, Group, NodeLimits, Pending};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Decimal text of an i64 into a stack buffer (a pure helper of the
/// engine crate, re-exported for the codecs).
pub use kvasir_engine_memory::set::format_i64;

/// A stream entry id (a plain record of the engine, re-exported rather
/// than copied: it has no behaviour beyond ordering).
pub use kvasir_engine_memory::stream::StreamId;

/// How a collection is laid out, in Redis's terms (its encodings, as
/// Redis's own RDB files record them). Part of the replicated state: see
/// the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A compact list, hash, set of strings or sorted set. (OBJECT
    /// ENCODING reports a listpack set as "hashtable", as Redis 7.0,
    /// which had none, would; its order still differs from a table's.)
    Listpack,
    /// A set of integers, each `width` bits wide (16, 32 or 64): an
    /// intset widens but never narrows.
    Intset(u8),
    /// A list of listpack nodes.
    Quicklist,
    /// An indexed hash or set.
    Hashtable,
    /// An indexed sorted set.
    Skiplist,
}

/// Limits under which loading never changes a collection's layout (a
/// snapshot restore). `list_max_listpack_size` and `list_compress_depth`
/// are not among them: a restored quicklist fills (and compresses) its
/// nodes under the store's own settings; nor are the stream node limits
/// (an image carries a stream's nodes as they were).
pub const KEEP_LAYOUT: EncodingLimits = EncodingLimits {
    hash_max_listpack_entries: usize::MAX,
    hash_max_listpack_value: usize::MAX,
    set_max_intset_entries: usize::MAX,
    set_max_listpack_entries: usize::MAX,
    set_max_listpack_value: usize::MAX,
    zset_max_listpack_entries: usize::MAX,
    zset_max_listpack_value: usize::MAX,
    list_max_listpack_size: -2,
    list_compress_depth: 0,
    stream_node_max_entries: kvasir_engine_memory::stream::NODE_MAX_ENTRIES,
    stream_node_max_bytes: kvasir_engine_memory::stream::NODE_MAX_BYTES,
    script_max_instructions: crate::store::DEFAULT_SCRIPT_MAX_INSTRUCTIONS,
};

/// A list's content.
pub trait ListImage: Sized {
    fn stored_layout(&self) -> Layout;
    /// Every element, front to back.
    fn for_each_elem(&self, visit: impl FnMut(&[u8]));
    /// The list of `elems`, front to back, in `layout` whatever their
    /// number and size (a snapshot restore); a quicklist's nodes are
    /// filled under `limits.list_max_listpack_size`. None for a layout
    /// lists do not have.
    fn restore(layout: Layout, elems: &[&[u8]], limits: &EncodingLimits) -> Option<Self>;
    /// An empty list as RPUSH creates it.
    fn empty() -> Self;
    /// Appends `elem` as RPUSH does under `limits` (converting when the
    /// list outgrows list-max-listpack-size).
    fn push_back(&mut self, elem: &[u8], limits: &EncodingLimits);
}

/// A hash's content.
pub trait HashImage: Sized {
    fn stored_layout(&self) -> Layout;
    /// Every field and value, in iteration order.
    fn for_each_pair(&self, visit: impl FnMut(&[u8], &[u8]));
    /// An empty hash in `layout` with room for `capacity` fields; None
    /// for a layout hashes do not have.
    fn with_layout(layout: Layout, capacity: usize) -> Option<Self>;
    /// Adds a pair as HSET does under `limits`; false (and no change)
    /// when the field is already there.
    fn load_pair(&mut self, field: &[u8], value: &[u8], limits: &EncodingLimits) -> bool;
}

/// A set's content.
pub trait SetImage: Sized {
    fn stored_layout(&self) -> Layout;
    /// Every member, in iteration order (integers as decimal text).
    fn for_each_member(&self, visit: impl FnMut(&[u8]));
    /// An empty set in `layout` with room for `capacity` members; None
    /// for a layout sets do not have (or an intset width other than 16,
    /// 32 or 64).
    fn with_layout(layout: Layout, capacity: usize) -> Option<Self>;
    /// Adds a member as SADD does under `limits`; false (and no change)
    /// when it is already there.
    fn load_member(&mut self, member: &[u8], limits: &EncodingLimits) -> bool;
}

/// A sorted set's content.
pub trait ZSetImage: Sized {
    fn stored_layout(&self) -> Layout;
    /// Every member and score by rank (score, then member): a function of
    /// the content alone.
    fn for_each_by_rank(&self, visit: impl FnMut(&[u8], f64));
    /// Every member and score in the order that loading rebuilds this
    /// very set from (for an indexed set, the order ZSCAN's cursor
    /// positions follow), which may differ from rank order.
    fn for_each_in_load_order(&self, visit: impl FnMut(&[u8], f64));
    /// An empty sorted set in `layout`; None for a layout sorted sets do
    /// not have.
    fn with_layout(layout: Layout) -> Option<Self>;
    /// Adds a member as ZADD does under `limits`; false (and no change)
    /// when it is already there.
    fn load_pair(&mut self, member: &[u8], score: f64, limits: &EncodingLimits) -> bool;
}

/// A stream's whole content, borrowed from the stream or from a payload.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamContent<'a> {
    pub last_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    /// Every entry, in id order.
    pub entries: Vec<StreamEntry<'a>>,
    /// How the entries are grouped into nodes, in order: Redis keeps a
    /// stream in nodes (listpacks under a master entry), and XTRIM ~ and
    /// XADD's approximate trimming remove whole nodes only, so the
    /// grouping is state a replica must restore (and an RDB file or DUMP
    /// payload carries). None: grouped as XADD appends them (a payload
    /// whose nodes are out of order).
    pub nodes: Option<Vec<StreamNode<'a>>>,
    /// Consumer groups, by name.
    pub groups: Vec<StreamGroup<'a>>,
}

/// An entry's fields and values, in order.
pub type StreamFields<'a> = Vec<(Cow<'a, [u8]>, Cow<'a, [u8]>)>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEntry<'a> {
    pub id: StreamId,
    pub fields: StreamFields<'a>,
}

/// One node: the next `count` entries of [`StreamContent::entries`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamNode<'a> {
    /// The node's master id: the first id ever added to it (its entry may
    /// since have been deleted).
    pub key: StreamId,
    /// The field names of that first entry (entries with the same names
    /// are stored without them).
    pub master_fields: Vec<Cow<'a, [u8]>>,
    /// Live entries.
    pub count: u32,
    /// Entries deleted from the node (they count towards its size).
    pub deleted: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamGroup<'a> {
    pub name: Cow<'a, [u8]>,
    pub last_id: StreamId,
    /// Entries the group has read (None: unknown).
    pub entries_read: Option<u64>,
    /// Consumers by name, with the Unix ms they were last seen.
    pub consumers: Vec<(Cow<'a, [u8]>, u64)>,
    /// Pending entries by id.
    pub pending: Vec<StreamPending<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPending<'a> {
    pub id: StreamId,
    pub consumer: Cow<'a, [u8]>,
    /// Unix ms of the last delivery.
    pub delivery_time: u64,
    pub delivery_count: u64,
}

/// A stream's content.
pub trait StreamImage: Sized {
    /// The whole content, node grouping included.
    fn content(&self) -> StreamContent<'_>;
    /// A stream of `content`; None when it is inconsistent (entries out of
    /// order or not matching the nodes, a pending entry whose consumer is
    /// missing, a duplicate).
    fn from_content(content: &StreamContent<'_>) -> Option<Self>;
}

// ---------------------------------------------------------------------------
// The memory engine
// ---------------------------------------------------------------------------

impl ListImage for kvasir_engine_memory::List {
    fn stored_layout(&self) -> Layout {
        match self.encoding() {
            "listpack" => Layout::Listpack,
            _ => Layout::Quicklist,
        }
    }

    fn for_each_elem(&self, mut visit: impl FnMut(&[u8])) {
        for e in self.iter() {
            match e {
                Elem::Int(i) => visit(format_i64(i, &mut [0; 20])),
                Elem::Str(s) => visit(s),
                Elem::Buf(b) => visit(&b),
            }
        }
    }

    fn restore(layout: Layout, elems: &[&[u8]], limits: &EncodingLimits) -> Option<Self> {
        match layout {
            Layout::Listpack => Some(Self::listpack_from_items(elems)),
            Layout::Quicklist => {
                let mut l = Self::new_quicklist(limits.list_compress_depth);
                l.push(End::Back, elems, limits.list());
                Some(l)
            }
            _ => None,
        }
    }

    fn empty() -> Self {
        Self::new()
    }

    #[inline]
    fn push_back(&mut self, elem: &[u8], limits: &EncodingLimits) {
        self.push(End::Back, &[elem], limits.list());
    }
}

impl HashImage for kvasir_engine_memory::Hash {
    fn stored_layout(&self) -> Layout {
        match self.encoding() {
            "listpack" => Layout::Listpack,
            _ => Layout::Hashtable,
        }
    }

    fn for_each_pair(&self, mut visit: impl FnMut(&[u8], &[u8])) {
        for (f, v) in self.iter() {
            visit(f, v);
        }
    }

    fn with_layout(layout: Layout, capacity: usize) -> Option<Self> {
        match layout {
            Layout::Listpack => Some(Self::new()),
            Layout::Hashtable => Some(Self::new_table(capacity)),
            _ => None,
        }
    }

    #[inline]
    fn load_pair(&mut self, field: &[u8], value: &[u8], limits: &EncodingLimits) -> bool {
        self.set(field, value, hash_limits(limits))
    }
}

impl SetImage for kvasir_engine_memory::Set {
    fn stored_layout(&self) -> Layout {
        match self.intset_width() {
            Some(width) => Layout::Intset(width),
            None if self.is_compact() => Layout::Listpack,
            None => Layout::Hashtable,
        }
    }

    fn for_each_member(&self, mut visit: impl FnMut(&[u8])) {
        for m in self.iter() {
            m.with_bytes(&mut visit);
        }
    }

    fn with_layout(layout: Layout, capacity: usize) -> Option<Self> {
        match layout {
            Layout::Intset(width) => Self::new_intset(width),
            Layout::Listpack => Some(Self::new_packed()),
            Layout::Hashtable => Some(Self::new_table(capacity)),
            _ => None,
        }
    }

    #[inline]
    fn load_member(&mut self, member: &[u8], limits: &EncodingLimits) -> bool {
        self.insert(member, &set_limits(limits))
    }
}

impl ZSetImage for kvasir_engine_memory::ZSet {
    fn stored_layout(&self) -> Layout {
        match self.encoding() {
            "listpack" => Layout::Listpack,
            _ => Layout::Skiplist,
        }
    }

    fn for_each_by_rank(&self, mut visit: impl FnMut(&[u8], f64)) {
        for (m, score) in self.iter() {
            visit(m, score);
        }
    }

    /// A listpack is its rank order; an indexed set numbers its slots
    /// (what ZSCAN's cursor walks, last slot first) in the order members
    /// were inserted: `scan` from cursor 0 visits every slot last first,
    /// so they are copied aside and given out in reverse.
    fn for_each_in_load_order(&self, mut visit: impl FnMut(&[u8], f64)) {
        if self.encoding() == "listpack" {
            return self.for_each_by_rank(visit);
        }
        let mut members = Vec::new();
        let mut slots = Vec::with_capacity(self.len());
        self.scan(0, usize::MAX, |m, score| {
            members.extend_from_slice(m);
            slots.push((members.len(), score));
        });
        for i in (0..slots.len()).rev() {
            let start = if i == 0 { 0 } else { slots[i - 1].0 };
            let (end, score) = slots[i];
            visit(&members[start..end], score);
        }
    }

    fn with_layout(layout: Layout) -> Option<Self> {
        match layout {
            Layout::Listpack => Some(Self::new()),
            Layout::Skiplist => Some(Self::new_indexed()),
            _ => None,
        }
    }

    #[inline]
    fn load_pair(&mut self, member: &[u8], score: f64, limits: &EncodingLimits) -> bool {
        self.insert(member, score, zset_limits(limits)).is_none()
    }
}

impl StreamImage for kvasir_engine_memory::Stream {
    fn content(&self) -> StreamContent<'_> {
        let entries = self
            .iter()
            .map(|e| StreamEntry {
                id: e.id,
                fields: e
                    .fields
                    .into_iter()
                    .map(|(f, v)| (Cow::Borrowed(f), Cow::Borrowed(v)))
                    .collect(),
            })
            .collect();
        let nodes = self
            .raw_nodes()
            .into_iter()
            .map(|n| StreamNode {
                key: n.key,
                master_fields: node_codec::decode_names(&n.master)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|f| Cow::Owned(f.to_vec()))
                    .collect(),
                count: n.count,
                deleted: n.deleted,
            })
            .collect();
        let groups = self
            .groups
            .iter()
            .map(|(name, g)| StreamGroup {
                name: Cow::Borrowed(&name[..]),
                last_id: g.last_id,
                entries_read: g.entries_read,
                consumers: g
                    .consumers
                    .iter()
                    .map(|(c, info)| (Cow::Borrowed(&c[..]), info.seen_time))
                    .collect(),
                pending: g
                    .pel
                    .iter()
                    .map(|(id, p)| StreamPending {
                        id: *id,
                        consumer: Cow::Borrowed(&p.consumer[..]),
                        delivery_time: p.delivery_time,
                        delivery_count: p.delivery_count,
                    })
                    .collect(),
            })
            .collect();
        StreamContent {
            last_id: self.last_id,
            max_deleted_id: self.max_deleted_id,
            entries_added: self.entries_added,
            entries,
            nodes: Some(nodes),
            groups,
        }
    }

    fn from_content(c: &StreamContent<'_>) -> Option<Self> {
        let mut st = Self::new();
        match &c.nodes {
            Some(nodes) => st.set_raw_nodes(node_codec::encode_nodes(nodes, &c.entries)?)?,
            None => {
                for (i, e) in c.entries.iter().enumerate() {
                    if i > 0 && c.entries[i - 1].id >= e.id {
                        return None;
                    }
                    st.append(e.id, &e.fields, NodeLimits::default());
                }
            }
        }
        st.last_id = c.last_id;
        st.max_deleted_id = c.max_deleted_id;
        st.entries_added = c.entries_added;
        for g in &c.groups {
            let group = memory_group(g)?;
            if st.groups.insert(g.name.to_vec().into(), group).is_some() {
                return None;
            }
        }
        Some(st)
    }
}

fn memory_group(g: &StreamGroup<'_>) -> Option<Group> {
    let mut group = Group {
        last_id: g.last_id,
        entries_read: g.entries_read,
        ..Group::default()
    };
    for (name, seen_time) in &g.consumers {
        let c = Consumer {
            seen_time: *seen_time,
            pending: BTreeSet::new(),
        };
        if group.consumers.insert(name.to_vec().into(), c).is_some() {
            return None;
        }
    }
    let mut pel = BTreeMap::new();
    for p in &g.pending {
        group
            .consumers
            .get_mut(&p.consumer[..])?
            .pending
            .insert(p.id);
        let pending = Pending {
            consumer: p.consumer.to_vec().into(),
            delivery_time: p.delivery_time,
            delivery_count: p.delivery_count,
        };
        if pel.insert(p.id, pending).is_some() {
            return None;
        }
    }
    group.pel = pel;
    Some(group)
}

/// The memory engine's stream node bytes (its `RawNode` parts), which is
/// also the stream's canonical form the content digests hash: a node's
/// master is its field names (`varint` count, then each as `varint`
/// length + bytes); its data is every live entry as `varint` ms delta
/// from the master id, `varint` seq (a delta when the ms delta is 0),
/// then 0 + each value when the fields have the master's names, or 1 +
/// `varint` count + each field and value.
pub mod node_codec {
    use super::{StreamContent, StreamEntry, StreamGroup, StreamId, StreamNode, StreamPending};
    use kvasir_engine_memory::stream::RawNode;
    use std::borrow::Cow;

    const SAME_FIELDS: u8 = 0;
    const OWN_FIELDS: u8 = 1;

    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn put_blob(out: &mut Vec<u8>, b: &[u8]) {
        put_varint(out, b.len() as u64);
        out.extend_from_slice(b);
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

    fn get_blob<'a>(b: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
        let n = usize::try_from(get_varint(b, pos)?).ok()?;
        let end = pos.checked_add(n)?;
        let s = b.get(*pos..end)?;
        *pos = end;
        Some(s)
    }

    fn encode_names<F: AsRef<[u8]>>(names: &[F]) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, names.len() as u64);
        for f in names {
            put_blob(&mut out, f.as_ref());
        }
        out
    }

    pub(super) fn decode_names(b: &[u8]) -> Option<Vec<&[u8]>> {
        let mut pos = 0;
        let n = get_varint(b, &mut pos)?;
        let mut names = Vec::with_capacity((n as usize).min(b.len()));
        for _ in 0..n {
            names.push(get_blob(b, &mut pos)?);
        }
        (pos == b.len()).then_some(names)
    }

    /// Appends `e` to the data of the node `key` whose master names are
    /// `master`.
    fn encode_entry(
        data: &mut Vec<u8>,
        key: StreamId,
        master: &[Cow<'_, [u8]>],
        e: &StreamEntry<'_>,
    ) {
        let ms_delta = e.id.ms.wrapping_sub(key.ms);
        put_varint(data, ms_delta);
        put_varint(
            data,
            if ms_delta == 0 {
                e.id.seq.wrapping_sub(key.seq)
            } else {
                e.id.seq
            },
        );
        let same =
            e.fields.len() == master.len() && e.fields.iter().zip(master).all(|((f, _), m)| f == m);
        if same {
            data.push(SAME_FIELDS);
            for (_, v) in &e.fields {
                put_blob(data, v);
            }
        } else {
            data.push(OWN_FIELDS);
            put_varint(data, e.fields.len() as u64);
            for (f, v) in &e.fields {
                put_blob(data, f);
                put_blob(data, v);
            }
        }
    }

    /// The raw nodes of `nodes` holding `entries`; None when the counts
    /// do not add up to the entries.
    pub(super) fn encode_nodes(
        nodes: &[StreamNode<'_>],
        entries: &[StreamEntry<'_>],
    ) -> Option<Vec<RawNode>> {
        let mut rest = entries;
        let mut raw = Vec::with_capacity(nodes.len());
        for n in nodes {
            let count = n.count as usize;
            if count > rest.len() {
                return None;
            }
            let (mine, later) = rest.split_at(count);
            rest = later;
            let mut data = Vec::new();
            for e in mine {
                encode_entry(&mut data, n.key, &n.master_fields, e);
            }
            // No growth slack, as a node read back from bytes has.
            data.shrink_to_fit();
            raw.push(RawNode {
                key: n.key,
                master: encode_names(&n.master_fields),
                data,
                count: n.count,
                deleted: n.deleted,
            });
        }
        rest.is_empty().then_some(raw)
    }

    /// The entries of a node's data; None when damaged or out of order.
    fn decode_entries<'a>(
        key: StreamId,
        master: &[&'a [u8]],
        b: &'a [u8],
        out: &mut Vec<StreamEntry<'a>>,
    ) -> Option<u32> {
        let mut pos = 0;
        let mut count = 0u32;
        let mut prev: Option<StreamId> = None;
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
            let mut fields = Vec::new();
            match flag {
                SAME_FIELDS => {
                    for n in master {
                        fields.push((Cow::Borrowed(*n), Cow::Borrowed(get_blob(b, &mut pos)?)));
                    }
                }
                OWN_FIELDS => {
                    let n = get_varint(b, &mut pos)?;
                    for _ in 0..n {
                        let f = get_blob(b, &mut pos)?;
                        fields.push((Cow::Borrowed(f), Cow::Borrowed(get_blob(b, &mut pos)?)));
                    }
                }
                _ => return None,
            }
            if prev.is_some_and(|p| p >= id) || id < key {
                return None;
            }
            prev = Some(id);
            out.push(StreamEntry { id, fields });
            count = count.checked_add(1)?;
        }
        Some(count)
    }

    fn put_id(out: &mut Vec<u8>, id: StreamId) {
        put_varint(out, id.ms);
        put_varint(out, id.seq);
    }

    /// The stream's canonical bytes (what snapshot images of format
    /// version 1 hold, and what stream digests hash): metadata, raw nodes, groups with their consumers and
    /// pending entries. `content.nodes` must be given (every export has
    /// them); None writes no nodes.
    pub fn put_canonical(out: &mut Vec<u8>, c: &StreamContent<'_>) {
        put_id(out, c.last_id);
        put_id(out, c.max_deleted_id);
        put_varint(out, c.entries_added);
        let raw = c
            .nodes
            .as_deref()
            .and_then(|n| encode_nodes(n, &c.entries))
            .unwrap_or_default();
        put_varint(out, raw.len() as u64);
        for r in &raw {
            put_id(out, r.key);
            put_blob(out, &r.master);
            put_blob(out, &r.data);
            put_varint(out, u64::from(r.count));
            put_varint(out, u64::from(r.deleted));
        }
        put_varint(out, c.groups.len() as u64);
        for g in &c.groups {
            put_blob(out, &g.name);
            put_id(out, g.last_id);
            put_varint(out, g.entries_read.map_or(0, |r| r.wrapping_add(1)));
            put_varint(out, g.consumers.len() as u64);
            for (name, seen_time) in &g.consumers {
                put_blob(out, name);
                put_varint(out, *seen_time);
            }
            put_varint(out, g.pending.len() as u64);
            for p in &g.pending {
                put_id(out, p.id);
                put_blob(out, &p.consumer);
                put_varint(out, p.delivery_time);
                put_varint(out, p.delivery_count);
            }
        }
    }

    /// A bounds-checked reader over canonical bytes.
    struct Cursor<'a> {
        b: &'a [u8],
        pos: usize,
    }

    impl<'a> Cursor<'a> {
        fn var(&mut self) -> Option<u64> {
            get_varint(self.b, &mut self.pos)
        }
        fn id(&mut self) -> Option<StreamId> {
            Some(StreamId::new(self.var()?, self.var()?))
        }
        fn blob(&mut self) -> Option<&'a [u8]> {
            get_blob(self.b, &mut self.pos)
        }
        /// A count no larger than the bytes left could hold (each item
        /// takes at least one byte).
        fn count(&mut self) -> Option<usize> {
            let n = usize::try_from(self.var()?).ok()?;
            (n <= self.b.len() - self.pos).then_some(n)
        }
    }

    /// Reads what [`put_canonical`] wrote; None for damaged bytes (never
    /// a panic). Consistency (order, consumers of pending entries) is
    /// checked when a stream is built from the content.
    pub fn parse_canonical(b: &[u8]) -> Option<StreamContent<'_>> {
        let mut r = Cursor { b, pos: 0 };
        let mut c = StreamContent {
            last_id: r.id()?,
            max_deleted_id: r.id()?,
            entries_added: r.var()?,
            ..StreamContent::default()
        };
        let mut nodes = Vec::new();
        for _ in 0..r.count()? {
            let key = r.id()?;
            let master = decode_names(r.blob()?)?;
            let data = r.blob()?;
            let count = u32::try_from(r.var()?).ok()?;
            let deleted = u32::try_from(r.var()?).ok()?;
            if decode_entries(key, &master, data, &mut c.entries)? != count {
                return None;
            }
            nodes.push(StreamNode {
                key,
                master_fields: master.into_iter().map(Cow::Borrowed).collect(),
                count,
                deleted,
            });
        }
        c.nodes = Some(nodes);
        for _ in 0..r.count()? {
            let mut g = StreamGroup {
                name: Cow::Borrowed(r.blob()?),
                last_id: r.id()?,
                entries_read: match r.var()? {
                    0 => None,
                    n => Some(n - 1),
                },
                consumers: Vec::new(),
                pending: Vec::new(),
            };
            for _ in 0..r.count()? {
                g.consumers.push((Cow::Borrowed(r.blob()?), r.var()?));
            }
            for _ in 0..r.count()? {
                g.pending.push(StreamPending {
                    id: r.id()?,
                    consumer: Cow::Borrowed(r.blob()?),
                    delivery_time: r.var()?,
                    delivery_count: r.var()?,
                });
            }
            c.groups.push(g);
        }
        (r.pos == b.len()).then_some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvasir_engine_memory::stream::Trim;
    use kvasir_engine_memory::Stream;

    /// A stream with several nodes, entries with their own fields,
    /// deletions (tombstones), a trim and groups.
    fn stream() -> Stream {
        let mut s = Stream::new();
        for i in 1..=350u64 {
            let v = i.to_string();
            let id = StreamId::new(1000 + i / 4, i % 4);
            if i % 9 == 0 {
                s.append(id, &[("other", v.as_str())], NodeLimits::default());
            } else {
                s.append(id, &[("a", v.as_str()), ("b", "x")], NodeLimits::default());
            }
        }
        for i in (1..=350u64).step_by(11) {
            s.delete(StreamId::new(1000 + i / 4, i % 4));
        }
        s.trim(Trim::MaxLen(300), true, 0);
        let mut g = Group {
            last_id: StreamId::new(1050, 0),
            entries_read: Some(40),
            ..Group::default()
        };
        for (n, c) in [(b"c1", 2), (b"c2", 3)] {
            let mut consumer = Consumer {
                seen_time: 7,
                ..Consumer::default()
            };
            for k in 0..c {
                let id = StreamId::new(1040 + k * 2 + n[1] as u64 % 2, 1);
                consumer.pending.insert(id);
                g.pel.insert(
                    id,
                    Pending {
                        consumer: n.to_vec().into(),
                        delivery_time: 9,
                        delivery_count: k,
                    },
                );
            }
            g.consumers.insert(n.to_vec().into(), consumer);
        }
        s.groups.insert(b"g".to_vec().into(), g);
        s.groups.insert(b"empty".to_vec().into(), Group::default());
        s
    }

    #[test]
    fn stream_content_round_trips_with_its_nodes() {
        let s = stream();
        assert!(s.node_count() > 2);
        let back = Stream::from_content(&s.content());
        assert_eq!(back.as_ref(), Some(&s));
    }

    #[test]
    fn canonical_bytes_round_trip_and_reject_damage() {
        let s = stream();
        let mut canonical = Vec::new();
        node_codec::put_canonical(&mut canonical, &s.content());
        let parsed = node_codec::parse_canonical(&canonical);
        let back = parsed.as_ref().and_then(Stream::from_content);
        assert_eq!(back.as_ref(), Some(&s));
        for cut in 0..canonical.len() {
            let c = node_codec::parse_canonical(&canonical[..cut]);
            assert!(c.and_then(|c| Stream::from_content(&c)).is_none());
        }
        for i in 0..canonical.len() {
            let mut bad = canonical.clone();
            bad[i] ^= 0x5a;
            // Damage must not panic; what it parses to is not pinned.
            let _ = node_codec::parse_canonical(&bad).and_then(|c| Stream::from_content(&c));
        }
    }
}
