//! A shard's state-machine image for Raft snapshots: [`encode`] writes
//! everything replicated in a [`Store`] (every database, every key with its
//! value and absolute expiry, and the [`EncodingLimits`]), [`decode`]
//! rebuilds an identical store, and [`digest`] gives a content hash for
//! comparing replicas (like Redis's DEBUG DIGEST).
//!
//! # Image format (version 1)
//!
//! All integers are little-endian; `uvar` is an unsigned LEB128 varint,
//! `svar` a zigzag-encoded signed one, `bytes` is `uvar(len)` + the bytes.
//!
//! ```text
//! header   magic "\x89KVSNAP\n" (8) | version u32 | body length u64 | crc32 of the 20 bytes before
//! body     limits: 7 x uvar (hash entries, hash value, set intset entries,
//!                  set listpack entries, set listpack value, zset entries,
//!                  zset value) + svar (list-max-listpack-size)
//!          uvar database count, then per database:
//!            uvar key count, then per key, in the database's iteration order:
//!              tag u8 (bit 7: has expiry) | [expiry u64, Unix ms] | bytes key | value
//! trailer  crc32 of the body, u32
//! ```
//!
//! Values by tag (collections: `uvar` count, then their elements):
//!
//! | tag | value                | elements                                     |
//! |-----|----------------------|----------------------------------------------|
//! | 0/1 | string Str / Raw     | `bytes`                                      |
//! | 2   | string Int           | `svar`                                       |
//! | 3/4 | list listpack / quicklist | `bytes` each, front to back             |
//! | 5/6 | hash listpack / hashtable | `bytes` field, `bytes` value, iteration order |
//! | 7   | set intset           | `u8` width (16/32/64) before the count; members as decimal `bytes`, ascending |
//! | 8/9 | set packed / table   | `bytes` each, iteration order                |
//! | 10  | zset listpack        | `bytes` member, `f64` score, score order     |
//! | 11  | zset skiplist        | `bytes` member, `f64` score, slot order      |
//!
//! The body is one forward pass with every count ahead of what it counts, so
//! an encoder can stream it and a decoder can size things up front; the
//! header carries the body length so that a short image is reported as
//! truncated rather than as a checksum failure. [`decode`] checks the frame
//! and the checksum before interpreting anything, and still bounds-checks
//! every read (a CRC is no defence against a deliberately forged image), so
//! no input makes it panic, and no count is believed beyond what the rest
//! of the image can hold (databases: at most [`MAX_DATABASES`]). Decoding
//! costs what building the same values by commands costs: linear, except
//! that compact encodings (listpacks, intsets, packed sets) are scanned per
//! insert, as they are by HSET or ZADD, which is cheap at their sizes.
//!
//! # Encodings are restored, not re-derived
//!
//! Values are written as their logical contents and rebuilt through the
//! engine's constructors and inserts, but into the encoding the source value
//! had (which the image records), not the one the current limits would
//! pick for the contents. The two differ whenever history matters, as it
//! does in Redis: collections never convert back (a hash that grew past 128
//! fields and shrank to 3 stays a hashtable), an intset never narrows, and
//! a replicated CONFIG SET may change the limits after a value was built.
//! Re-deriving would give a replica restored from a snapshot another
//! OBJECT ENCODING than its leader, another member order (SPOP,
//! HRANDFIELD and SCAN pick by position in that order) and another
//! conversion point later: it would diverge. So after a restore OBJECT
//! ENCODING and iteration order are exactly the source's, which are what
//! the same commands produced there.
//!
//! Not carried: [`crate::store::Stats`] (local observations); a
//! quicklist's node boundaries (rebuilt by the normal pushes under the
//! restored `list-max-listpack-size`), whether a small hashtable has built
//! its index yet, and buffers' allocation slack. No command tells these
//! apart, except MEMORY USAGE by a few bytes.

//! A shard's state-machine image for Raft snapshots: [`encode`] writes
//! everything replicated in a [`Store`] (every database, every key with its
//! value and absolute expiry, and the [`EncodingLimits`]), [`decode`]
//! rebuilds an identical store, and [`digest`] gives a content hash for
//! comparing replicas (like Redis's DEBUG DIGEST). All three work on any
//! engine, through the collections' image traits
//! ([`crate::keyspace::image`]).
//!
//! # Image format (versions 2 to 4)
//!
//! All integers are little-endian; `uvar` is an unsigned LEB128 varint,
//! `svar` a zigzag-encoded signed one, `bytes` is `uvar(len)` + the bytes,
//! `id` a stream id as `uvar` ms, `uvar` seq.
//!
//! ```text
//! header   magic "\x89KVSNAP\n" (8) | version u32 | body length u64 | crc32 of the 20 bytes before
//! body     limits: 7 x uvar (hash entries, hash value, set intset entries,
//!                  set listpack entries, set listpack value, zset entries,
//!                  zset value) + svar (list-max-listpack-size)
//!                  + uvar (list-compress-depth; from version 3, version 2
//!                  images read as depth 0)
//!                  + 2 x uvar (stream-node-max-entries, stream-node-max-bytes;
//!                  from version 4, older images read as Redis's defaults
//!                  100 and 4096)
//!          uvar database count, then per database:
//!            uvar key count, then per key, in the database's iteration order:
//!              tag u8 (bit 7: has expiry) | [expiry u64, Unix ms] | bytes key | value
//!          'S', uvar script count, bytes each (by SHA1), uvar library count, bytes each
//! trailer  crc32 of the body, u32
//! ```
//!
//! Values by tag; a collection's value starts with its layout (`u8`: 0
//! listpack, 1 quicklist, 2 hashtable, 3 intset followed by its width in
//! bits as a `u8`, 4 skiplist), then `uvar` count and its elements:
//!
//! | tag | value         | elements                                            |
//! |-----|---------------|-----------------------------------------------------|
//! | 0/1 | string Str/Raw| `bytes`                                             |
//! | 2   | string Int    | `svar`                                              |
//! | 3   | list          | `bytes` each, front to back                         |
//! | 4   | hash          | `bytes` field, `bytes` value, iteration order       |
//! | 5   | set           | `bytes` each (integers as decimal), iteration order |
//! | 6   | sorted set    | `bytes` member, `f64` score, load order             |
//! | 7   | stream        | see below                                           |
//!
//! A stream: `id` last id, `id` max deleted id, `uvar` entries added;
//! `uvar` node count, per node `id` master id, `uvar` live entries,
//! `uvar` deleted entries, `uvar` + `bytes` master field names; `uvar`
//! entry count, per entry `id`, `uvar` field count, `bytes` field and
//! value each; `uvar` group count, per group `bytes` name, `id` last id,
//! entries read (`u8` 0: unknown, or 1 and `uvar`), `uvar` consumer count, per
//! consumer `bytes` name and `uvar` seen time, `uvar` pending count, per
//! pending entry `id`, `bytes` consumer, `uvar` delivery time and count.
//!
//! The body is one forward pass with every count ahead of what it counts, so
//! an encoder can stream it and a decoder can size things up front; the
//! header carries the body length so that a short image is reported as
//! truncated rather than as a checksum failure. [`decode`] checks the frame
//! and the checksum before interpreting anything, and still bounds-checks
//! every read (a CRC is no defence against a deliberately forged image), so
//! no input makes it panic, and no count is believed beyond what the rest
//! of the image can hold (databases: at most [`MAX_DATABASES`]). Decoding
//! costs what building the same values by commands costs: linear, except
//! that compact layouts (listpacks, intsets) are scanned per insert, as
//! they are by HSET or ZADD, which is cheap at their sizes.
//!
//! # Version 1
//!
//! Images of format version 1 (before the engine seam) recorded the memory
//! engine's own encodings: a tag per type and encoding (3/4 list
//! listpack/quicklist, 5/6 hash listpack/hashtable, 7/8/9 set
//! intset (width byte before the count)/listpack/hashtable, 10/11 sorted
//! set listpack/skiplist) with the same elements as version 2, and a
//! stream (12) as one `bytes` blob of the engine's node bytes
//! ([`crate::keyspace::image::node_codec`]). Snapshots already in users'
//! data folders are in it, so [`decode`] still reads it, into the same
//! state; [`encode`] writes version 4 only.
//!
//! # Layouts are restored, not re-derived
//!
//! Values are written as their logical contents and rebuilt through the
//! engine's constructors and inserts, but into the layout the source value
//! had (which the image records), not the one the current limits would
//! pick for the contents. The two differ whenever history matters, as it
//! does in Redis: collections never convert back (a hash that grew past 128
//! fields and shrank to 3 stays a hashtable), an intset never narrows, and
//! a replicated CONFIG SET may change the limits after a value was built.
//! Re-deriving would give a replica restored from a snapshot another
//! OBJECT ENCODING than its leader, another member order (SPOP,
//! HRANDFIELD and SCAN pick by position in that order) and another
//! conversion point later: it would diverge. So after a restore OBJECT
//! ENCODING and iteration order are exactly the source's, which are what
//! the same commands produced there. A stream's grouping into nodes is
//! restored for the same reason (XTRIM ~ removes whole nodes).
//!
//! Not carried: [`crate::store::Stats`] (local observations); a
//! quicklist's node boundaries (rebuilt by the normal pushes under the
//! restored `list-max-listpack-size`), whether a small hashtable has built
//! its index yet, and buffers' allocation slack. No command tells these
//! apart, except MEMORY USAGE by a few bytes.

use crate::keyspace::image::{
    format_i64, node_codec, Layout, StreamContent, StreamEntry, StreamGroup, StreamId, StreamNode,
    StreamPending, KEEP_LAYOUT,
};
use crate::keyspace::{
    canonical_i64, Collection, CompactBytes, EntryRef, HashImage, Keyspace, ListImage,
    MemoryKeyspace, SetImage, StreamImage, Value, ZSetImage,
};
use crate::store::{EncodingLimits, Store};
use std::borrow::Cow;
use std::fmt;
use std::hash::{BuildHasher, Hasher};

/// First bytes of every image (PNG-style: a high byte and a newline catch
/// 7-bit and line-ending mangling).
pub const MAGIC: [u8; 8] = *b"\x89KVSNAP\n";
/// The format version [`encode`] writes.
pub const VERSION: u32 = 4;
/// The first format version [`decode`] still reads (see the module docs).
pub const OLDEST_VERSION: u32 = 1;
/// Magic, version, body length, header checksum.
pub const HEADER_LEN: usize = 24;
/// The body checksum.
pub const TRAILER_LEN: usize = 4;

const T_STR: u8 = 0;
const T_RAW: u8 = 1;
const T_INT: u8 = 2;
const T_LIST: u8 = 3;
const T_HASH: u8 = 4;
const T_SET: u8 = 5;
const T_ZSET: u8 = 6;
const T_STREAM: u8 = 7;
/// Tag bit: an expiry follows the tag.
const HAS_EXPIRY: u8 = 0x80;

/// Version 1's tags (strings as in version 2).
mod v1 {
    pub const LIST_LISTPACK: u8 = 3;
    pub const LIST_QUICKLIST: u8 = 4;
    pub const HASH_LISTPACK: u8 = 5;
    pub const HASH_TABLE: u8 = 6;
    pub const SET_INTSET: u8 = 7;
    pub const SET_PACKED: u8 = 8;
    pub const SET_TABLE: u8 = 9;
    pub const ZSET_LISTPACK: u8 = 10;
    pub const ZSET_SKIPLIST: u8 = 11;
    pub const STREAM: u8 = 12;
}

/// Layout bytes.
const L_LISTPACK: u8 = 0;
const L_QUICKLIST: u8 = 1;
const L_HASHTABLE: u8 = 2;
const L_INTSET: u8 = 3;
const L_SKIPLIST: u8 = 4;

/// Why an image could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    /// The image does not start with [`MAGIC`].
    BadMagic,
    /// The image has a format version this build does not read.
    UnsupportedVersion(u32),
    /// The image ends at byte `at` but needs `needed` bytes.
    Truncated { at: usize, needed: usize },
    /// The image is `len` bytes, longer than the `expected` its header says.
    TrailingBytes { len: usize, expected: usize },
    /// The header's own checksum does not match.
    HeaderChecksum,
    /// The body's checksum does not match.
    Checksum { stored: u32, computed: u32 },
    /// The body passed its checksum but is malformed at byte `at`.
    Corrupt { at: usize, what: &'static str },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::BadMagic => write!(f, "not a Kvasir snapshot (bad magic)"),
            SnapshotError::UnsupportedVersion(v) => {
                write!(
                    f,
                    "unsupported snapshot version {v} (this build reads {OLDEST_VERSION} to {VERSION})"
                )
            }
            SnapshotError::Truncated { at, needed } => {
                write!(f, "snapshot truncated at byte {at} (needs {needed} bytes)")
            }
            SnapshotError::TrailingBytes { len, expected } => write!(
                f,
                "snapshot has {} trailing bytes ({len} bytes, header says {expected})",
                len - expected
            ),
            SnapshotError::HeaderChecksum => write!(f, "snapshot header checksum mismatch"),
            SnapshotError::Checksum { stored, computed } => write!(
                f,
                "snapshot checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            SnapshotError::Corrupt { at, what } => {
                write!(f, "snapshot corrupt at byte {at}: {what}")
            }
        }
    }
}

impl std::error::Error for SnapshotError {}

// ---------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------

fn put_uvar(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_svar(out: &mut Vec<u8>, v: i64) {
    put_uvar(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    put_uvar(out, n as u64);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_len(out, b.len());
    out.extend_from_slice(b);
}

fn put_score(out: &mut Vec<u8>, score: f64) {
    out.extend_from_slice(&score.to_bits().to_le_bytes());
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_uvar(out, id.ms);
    put_uvar(out, id.seq);
}

fn put_layout(out: &mut Vec<u8>, layout: Layout) {
    match layout {
        Layout::Listpack => out.push(L_LISTPACK),
        Layout::Quicklist => out.push(L_QUICKLIST),
        Layout::Hashtable => out.push(L_HASHTABLE),
        Layout::Intset(width) => out.extend_from_slice(&[L_INTSET, width]),
        Layout::Skiplist => out.push(L_SKIPLIST),
    }
}

/// Appends the image of `store` to `out`.
pub fn encode<K: Keyspace>(store: &Store<K>, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + HEADER_LEN, 0);
    let body = out.len();

    let l = &store.limits;
    for v in [
        l.hash_max_listpack_entries,
        l.hash_max_listpack_value,
        l.set_max_intset_entries,
        l.set_max_listpack_entries,
        l.set_max_listpack_value,
        l.zset_max_listpack_entries,
        l.zset_max_listpack_value,
    ] {
        put_len(out, v);
    }
    put_svar(out, l.list_max_listpack_size);
    put_len(out, l.list_compress_depth as usize);
    put_uvar(out, l.stream_node_max_entries);
    put_uvar(out, l.stream_node_max_bytes);

    put_len(out, store.databases());
    for i in 0..store.databases() {
        let db = store.db(i);
        put_len(out, db.len());
        for e in db.iter() {
            encode_entry(out, e);
        }
    }

    encode_scripts(store, out);

    let body_len = out.len() - body;
    let crc = crc32fast::hash(&out[body..]);
    out.extend_from_slice(&crc.to_le_bytes());

    let header = &mut out[start..start + HEADER_LEN];
    header[0..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[12..20].copy_from_slice(&(body_len as u64).to_le_bytes());
    let header_crc = crc32fast::hash(&header[..20]);
    header[20..24].copy_from_slice(&header_crc.to_le_bytes());
}

fn encode_entry<K: Keyspace>(out: &mut Vec<u8>, e: EntryRef<'_, K>) {
    let tag = match e.value {
        Value::Str(_) => T_STR,
        Value::Raw(_) => T_RAW,
        Value::Int(_) => T_INT,
        Value::List(_) => T_LIST,
        Value::Hash(_) => T_HASH,
        Value::Set(_) => T_SET,
        Value::ZSet(_) => T_ZSET,
        Value::Stream(_) => T_STREAM,
    };
    match e.expire_at() {
        Some(at) => {
            out.push(tag | HAS_EXPIRY);
            out.extend_from_slice(&at.to_le_bytes());
        }
        None => out.push(tag),
    }
    put_bytes(out, e.key);
    match e.value {
        Value::Str(s) | Value::Raw(s) => put_bytes(out, s),
        Value::Int(i) => put_svar(out, *i),
        Value::List(l) => {
            put_layout(out, l.stored_layout());
            put_len(out, l.len());
            l.for_each_elem(|el| put_bytes(out, el));
        }
        Value::Hash(h) => {
            put_layout(out, h.stored_layout());
            put_len(out, h.len());
            h.for_each_pair(|f, v| {
                put_bytes(out, f);
                put_bytes(out, v);
            });
        }
        Value::Set(s) => {
            put_layout(out, s.stored_layout());
            put_len(out, s.len());
            s.for_each_member(|m| put_bytes(out, m));
        }
        Value::ZSet(z) => {
            put_layout(out, z.stored_layout());
            put_len(out, z.len());
            z.for_each_in_load_order(|m, score| {
                put_bytes(out, m);
                put_score(out, score);
            });
        }
        Value::Stream(st) => encode_stream(out, &st.content()),
    }
}

fn encode_stream(out: &mut Vec<u8>, c: &StreamContent<'_>) {
    put_id(out, c.last_id);
    put_id(out, c.max_deleted_id);
    put_uvar(out, c.entries_added);
    let nodes = c.nodes.as_deref().unwrap_or_default();
    put_len(out, nodes.len());
    for n in nodes {
        put_id(out, n.key);
        put_uvar(out, u64::from(n.count));
        put_uvar(out, u64::from(n.deleted));
        put_len(out, n.master_fields.len());
        for f in &n.master_fields {
            put_bytes(out, f);
        }
    }
    put_len(out, c.entries.len());
    for e in &c.entries {
        put_id(out, e.id);
        put_len(out, e.fields.len());
        for (f, v) in &e.fields {
            put_bytes(out, f);
            put_bytes(out, v);
        }
    }
    put_len(out, c.groups.len());
    for g in &c.groups {
        put_bytes(out, &g.name);
        put_id(out, g.last_id);
        match g.entries_read {
            Some(r) => {
                out.push(1);
                put_uvar(out, r);
            }
            None => out.push(0),
        }
        put_len(out, g.consumers.len());
        for (name, seen_time) in &g.consumers {
            put_bytes(out, name);
            put_uvar(out, *seen_time);
        }
        put_len(out, g.pending.len());
        for p in &g.pending {
            put_id(out, p.id);
            put_bytes(out, &p.consumer);
            put_uvar(out, p.delivery_time);
            put_uvar(out, p.delivery_count);
        }
    }
}

// ---------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------

/// Most databases an image may declare (the server's own limit).
pub const MAX_DATABASES: usize = 1_000_000;

/// Fewest body bytes an entry takes: tag, key length, a one-byte value.
const MIN_ENTRY: usize = 3;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)?.try_into().ok().map(u32::from_le_bytes)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8)?.try_into().ok().map(u64::from_le_bytes)
}

/// Checks magic, version, length and both checksums; returns the version
/// and the body.
fn check_frame(bytes: &[u8]) -> Result<(u32, &[u8]), SnapshotError> {
    let n = bytes.len();
    let magic_len = n.min(MAGIC.len());
    if bytes.get(..magic_len) != MAGIC.get(..magic_len) {
        return Err(SnapshotError::BadMagic);
    }
    let truncated = |needed| SnapshotError::Truncated { at: n, needed };
    let version = u32_at(bytes, 8).ok_or(truncated(HEADER_LEN))?;
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    let header = bytes.get(..HEADER_LEN).ok_or(truncated(HEADER_LEN))?;
    if u32_at(header, 20) != Some(crc32fast::hash(&header[..20])) {
        return Err(SnapshotError::HeaderChecksum);
    }
    let total = u64_at(header, 12)
        .and_then(|b| usize::try_from(b).ok())
        .and_then(|b| b.checked_add(HEADER_LEN + TRAILER_LEN))
        .ok_or(SnapshotError::Corrupt {
            at: 12,
            what: "body length out of range",
        })?;
    if n < total {
        return Err(truncated(total));
    }
    if n > total {
        return Err(SnapshotError::TrailingBytes {
            len: n,
            expected: total,
        });
    }
    let body = &bytes[HEADER_LEN..total - TRAILER_LEN];
    let stored = u32_at(bytes, total - TRAILER_LEN).unwrap_or_default();
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(SnapshotError::Checksum { stored, computed });
    }
    Ok((version, body))
}

/// A bounds-checked cursor over the body. Positions in errors are offsets
/// in the whole image.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

type Res<T> = Result<T, SnapshotError>;

impl<'a> Reader<'a> {
    fn corrupt(&self, at: usize, what: &'static str) -> SnapshotError {
        SnapshotError::Corrupt {
            at: HEADER_LEN + at,
            what,
        }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        let s = self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(self.pos..end))
            .ok_or_else(|| self.corrupt(self.pos, "data runs past the end of the body"))?;
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Res<u8> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| self.corrupt(self.pos, "data runs past the end of the body"))?;
        self.pos += 1;
        Ok(b)
    }

    fn u64(&mut self) -> Res<u64> {
        let b = self.take(8)?;
        Ok(u64_at(b, 0).unwrap_or_default())
    }

    fn uvar(&mut self) -> Res<u64> {
        let start = self.pos;
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 1 {
                return Err(self.corrupt(start, "varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.corrupt(start, "varint overflows 64 bits"))
    }

    fn svar(&mut self) -> Res<i64> {
        let u = self.uvar()?;
        Ok((u >> 1) as i64 ^ -((u & 1) as i64))
    }

    fn usize(&mut self) -> Res<usize> {
        let at = self.pos;
        let v = self.uvar()?;
        usize::try_from(v).map_err(|_| self.corrupt(at, "number too large for this machine"))
    }

    /// A count of things each taking at least `min` bytes: never more than
    /// the rest of the body can hold, so nothing is sized beyond the image.
    fn count(&mut self, min: usize) -> Res<usize> {
        let at = self.pos;
        let n = self.uvar()?;
        if n > (self.remaining() / min.max(1)) as u64 {
            return Err(self.corrupt(at, "count larger than the rest of the image"));
        }
        Ok(n as usize)
    }

    fn bytes(&mut self) -> Res<&'a [u8]> {
        let n = self.usize()?;
        self.take(n)
    }

    fn score(&mut self) -> Res<f64> {
        let at = self.pos;
        let s = f64::from_bits(self.u64()?);
        if s.is_nan() {
            return Err(self.corrupt(at, "NaN score"));
        }
        Ok(s)
    }
}

/// Rebuilds a memory-engine store from an image made by [`encode`] (or by
/// a build that wrote format version 1). Never panics: any malformed
/// input gives an error.
pub fn decode(bytes: &[u8]) -> Result<Store, SnapshotError> {
    decode_into::<MemoryKeyspace>(bytes)
}

/// Rebuilds a store of the engine `K` from an image; see [`decode`].
pub fn decode_into<K: Keyspace>(bytes: &[u8]) -> Result<Store<K>, SnapshotError> {
    let (version, body) = check_frame(bytes)?;
    let mut r = Reader { buf: body, pos: 0 };
    let limits = EncodingLimits {
        hash_max_listpack_entries: r.usize()?,
        hash_max_listpack_value: r.usize()?,
        set_max_intset_entries: r.usize()?,
        set_max_listpack_entries: r.usize()?,
        set_max_listpack_value: r.usize()?,
        zset_max_listpack_entries: r.usize()?,
        zset_max_listpack_value: r.usize()?,
        list_max_listpack_size: r.svar()?,
        list_compress_depth: 0,
        stream_node_max_entries: kvasir_engine_memory::stream::NODE_MAX_ENTRIES,
        stream_node_max_bytes: kvasir_engine_memory::stream::NODE_MAX_BYTES,
        // Not carried: cluster shards run with the default.
        script_max_instructions: crate::store::DEFAULT_SCRIPT_MAX_INSTRUCTIONS,
    };
    let mut limits = limits;
    if version >= 3 {
        let at = r.pos;
        limits.list_compress_depth = u32::try_from(r.uvar()?)
            .ok()
            .filter(|&d| d <= 65535)
            .ok_or_else(|| r.corrupt(at, "list-compress-depth out of range"))?;
    }
    if version >= 4 {
        limits.stream_node_max_entries = r.uvar()?;
        limits.stream_node_max_bytes = r.uvar()?;
    }
    let at = r.pos;
    // Each database takes at least its one-byte key count.
    let databases = r.count(1)?;
    if databases == 0 || databases > MAX_DATABASES {
        return Err(r.corrupt(at, "database count out of range"));
    }
    let mut store = Store::with_keyspace(K::with_databases(databases));
    store.limits = limits;
    let mut scratch: Vec<&[u8]> = Vec::new();
    let last_tag = if version == 1 { v1::STREAM } else { T_STREAM };
    for i in 0..databases {
        let n = r.count(MIN_ENTRY)?;
        let mut db = store.db_mut(i);
        db.reserve(n);
        for _ in 0..n {
            let at = r.pos;
            let tag = r.u8()?;
            if tag & !HAS_EXPIRY > last_tag {
                return Err(r.corrupt(at, "unknown value type"));
            }
            let expire = if tag & HAS_EXPIRY != 0 {
                match r.u64()? {
                    0 => return Err(r.corrupt(at, "expiry of 0")),
                    t => Some(t),
                }
            } else {
                None
            };
            let key = r.bytes()?;
            let tag = tag & !HAS_EXPIRY;
            let value = if version == 1 {
                decode_value_v1(&mut r, tag, &limits, &mut scratch)?
            } else {
                decode_value(&mut r, tag, &limits, &mut scratch)?
            };
            if db.set(key, value, expire).is_some() {
                return Err(r.corrupt(at, "duplicate key"));
            }
        }
    }
    // Images written before scripting end with the databases.
    if r.remaining() != 0 {
        let at = r.pos;
        if r.u8()? != SCRIPTS_SECTION {
            return Err(r.corrupt(at, "bytes after the last database"));
        }
        decode_scripts(&mut r, &mut store)?;
    }
    if r.remaining() != 0 {
        return Err(r.corrupt(r.pos, "bytes after the scripts"));
    }
    Ok(store)
}

/// The tag of the section after the databases.
const SCRIPTS_SECTION: u8 = b'S';

/// Script bodies (sorted by SHA1, so images of equal stores are equal)
/// and FUNCTION libraries' code, after [`SCRIPTS_SECTION`].
fn encode_scripts<K: Keyspace>(store: &Store<K>, out: &mut Vec<u8>) {
    out.push(SCRIPTS_SECTION);
    let mut bodies: Vec<_> = store.scripts.bodies.iter().collect();
    bodies.sort_by(|a, b| a.0.cmp(b.0));
    put_len(out, bodies.len());
    for (_, body) in bodies {
        put_bytes(out, body);
    }
    put_len(out, store.scripts.libraries.len());
    for lib in store.scripts.libraries.values() {
        put_bytes(out, &lib.code);
    }
}

fn decode_scripts<K: Keyspace>(r: &mut Reader<'_>, store: &mut Store<K>) -> Res<()> {
    let n = r.count(1)?;
    for _ in 0..n {
        let body = bytes::Bytes::copy_from_slice(r.bytes()?);
        let sha = crate::scripting::sha1_hex(&body);
        store.scripts.bodies.insert(sha, body);
    }
    let at = r.pos;
    let n = r.count(1)?;
    let mut codes = Vec::with_capacity(n);
    for _ in 0..n {
        codes.push(bytes::Bytes::copy_from_slice(r.bytes()?));
    }
    // Libraries are loaded (and checked) by the interpreter.
    crate::scripting::function::restore_libraries(store, codes)
        .map_err(|_| r.corrupt(at, "a library that does not load"))
}

fn read_layout(r: &mut Reader<'_>) -> Res<Layout> {
    let at = r.pos;
    Ok(match r.u8()? {
        L_LISTPACK => Layout::Listpack,
        L_QUICKLIST => Layout::Quicklist,
        L_HASHTABLE => Layout::Hashtable,
        L_INTSET => Layout::Intset(r.u8()?),
        L_SKIPLIST => Layout::Skiplist,
        _ => return Err(r.corrupt(at, "unknown layout")),
    })
}

fn read_id(r: &mut Reader<'_>) -> Res<StreamId> {
    Ok(StreamId::new(r.uvar()?, r.uvar()?))
}

/// A version 2 value.
fn decode_value<'a, K: Keyspace>(
    r: &mut Reader<'a>,
    tag: u8,
    limits: &EncodingLimits,
    scratch: &mut Vec<&'a [u8]>,
) -> Res<Value<K>> {
    let at = r.pos;
    Ok(match tag {
        T_STR => Value::Str(CompactBytes::from_slice(r.bytes()?)),
        T_RAW => Value::Raw(CompactBytes::from_slice(r.bytes()?)),
        T_INT => Value::Int(r.svar()?),
        T_LIST => {
            let layout = read_layout(r)?;
            Value::List(Box::new(read_list(r, at, layout, limits, scratch)?))
        }
        T_HASH => {
            let layout = read_layout(r)?;
            Value::Hash(Box::new(read_hash(r, at, layout)?))
        }
        T_SET => {
            let layout = read_layout(r)?;
            Value::Set(Box::new(read_set(r, at, layout)?))
        }
        T_ZSET => {
            let layout = read_layout(r)?;
            Value::ZSet(Box::new(read_zset(r, at, layout)?))
        }
        T_STREAM => {
            let content = read_stream(r)?;
            let st =
                K::Stream::from_content(&content).ok_or_else(|| r.corrupt(at, "bad stream"))?;
            Value::Stream(Box::new(st))
        }
        _ => return Err(r.corrupt(at, "unknown value type")),
    })
}

/// A version 1 value: the layout is in the tag, a stream is a blob of
/// the memory engine's node bytes.
fn decode_value_v1<'a, K: Keyspace>(
    r: &mut Reader<'a>,
    tag: u8,
    limits: &EncodingLimits,
    scratch: &mut Vec<&'a [u8]>,
) -> Res<Value<K>> {
    let at = r.pos;
    Ok(match tag {
        T_STR | T_RAW | T_INT => return decode_value(r, tag, limits, scratch),
        v1::LIST_LISTPACK | v1::LIST_QUICKLIST => {
            let layout = if tag == v1::LIST_LISTPACK {
                Layout::Listpack
            } else {
                Layout::Quicklist
            };
            Value::List(Box::new(read_list(r, at, layout, limits, scratch)?))
        }
        v1::HASH_LISTPACK => Value::Hash(Box::new(read_hash(r, at, Layout::Listpack)?)),
        v1::HASH_TABLE => Value::Hash(Box::new(read_hash(r, at, Layout::Hashtable)?)),
        v1::SET_INTSET => {
            let width = r.u8()?;
            Value::Set(Box::new(read_set(r, at, Layout::Intset(width))?))
        }
        v1::SET_PACKED => Value::Set(Box::new(read_set(r, at, Layout::Listpack)?)),
        v1::SET_TABLE => Value::Set(Box::new(read_set(r, at, Layout::Hashtable)?)),
        v1::ZSET_LISTPACK => Value::ZSet(Box::new(read_zset(r, at, Layout::Listpack)?)),
        v1::ZSET_SKIPLIST => Value::ZSet(Box::new(read_zset(r, at, Layout::Skiplist)?)),
        v1::STREAM => {
            let blob = r.bytes()?;
            let st = node_codec::parse_canonical(blob)
                .and_then(|c| K::Stream::from_content(&c))
                .ok_or_else(|| r.corrupt(at, "bad stream"))?;
            Value::Stream(Box::new(st))
        }
        _ => return Err(r.corrupt(at, "unknown value type")),
    })
}

fn wrong_layout(r: &Reader<'_>, at: usize) -> SnapshotError {
    r.corrupt(at, "a layout this type does not have")
}

fn read_list<'a, L: ListImage>(
    r: &mut Reader<'a>,
    at: usize,
    layout: Layout,
    limits: &EncodingLimits,
    scratch: &mut Vec<&'a [u8]>,
) -> Res<L> {
    let n = r.count(1)?;
    scratch.clear();
    for _ in 0..n {
        scratch.push(r.bytes()?);
    }
    let l = L::restore(layout, scratch, limits);
    scratch.clear();
    l.ok_or_else(|| wrong_layout(r, at))
}

fn read_hash<H: HashImage>(r: &mut Reader<'_>, at: usize, layout: Layout) -> Res<H> {
    let n = r.count(2)?;
    let mut h = H::with_layout(layout, n).ok_or_else(|| wrong_layout(r, at))?;
    for _ in 0..n {
        let f = r.bytes()?;
        let v = r.bytes()?;
        if !h.load_pair(f, v, &KEEP_LAYOUT) {
            return Err(r.corrupt(at, "duplicate element in a collection"));
        }
    }
    Ok(h)
}

fn read_set<S: SetImage>(r: &mut Reader<'_>, at: usize, layout: Layout) -> Res<S> {
    let n = r.count(1)?;
    let mut s = match S::with_layout(layout, n) {
        Some(s) => s,
        None if matches!(layout, Layout::Intset(_)) => {
            return Err(r.corrupt(at, "bad intset width"))
        }
        None => return Err(wrong_layout(r, at)),
    };
    for _ in 0..n {
        let m_at = r.pos;
        let m = r.bytes()?;
        if matches!(layout, Layout::Intset(_)) && canonical_i64(m).is_none() {
            return Err(r.corrupt(m_at, "intset member is not an integer"));
        }
        if !s.load_member(m, &KEEP_LAYOUT) {
            return Err(r.corrupt(at, "duplicate element in a collection"));
        }
    }
    if s.stored_layout() != layout {
        return Err(r.corrupt(at, "intset member wider than the intset"));
    }
    Ok(s)
}

fn read_zset<Z: ZSetImage>(r: &mut Reader<'_>, at: usize, layout: Layout) -> Res<Z> {
    let n = r.count(9)?;
    let mut z = Z::with_layout(layout).ok_or_else(|| wrong_layout(r, at))?;
    for _ in 0..n {
        let m = r.bytes()?;
        let score = r.score()?;
        if !z.load_pair(m, score, &KEEP_LAYOUT) {
            return Err(r.corrupt(at, "duplicate element in a collection"));
        }
    }
    Ok(z)
}

/// A version 2 stream's content (checked for consistency when the stream
/// is built from it).
fn read_stream<'a>(r: &mut Reader<'a>) -> Res<StreamContent<'a>> {
    let mut c = StreamContent {
        last_id: read_id(r)?,
        max_deleted_id: read_id(r)?,
        entries_added: r.uvar()?,
        ..StreamContent::default()
    };
    // A node takes at least its id, two counts and a name count.
    let n = r.count(5)?;
    let mut nodes = Vec::with_capacity(n);
    for _ in 0..n {
        let key = read_id(r)?;
        let at = r.pos;
        let count = u32::try_from(r.uvar()?).map_err(|_| r.corrupt(at, "node too large"))?;
        let at = r.pos;
        let deleted = u32::try_from(r.uvar()?).map_err(|_| r.corrupt(at, "node too large"))?;
        let names = r.count(1)?;
        let mut master_fields = Vec::with_capacity(names);
        for _ in 0..names {
            master_fields.push(Cow::Borrowed(r.bytes()?));
        }
        nodes.push(StreamNode {
            key,
            master_fields,
            count,
            deleted,
        });
    }
    c.nodes = Some(nodes);
    // An entry takes at least its id and a field count.
    let n = r.count(3)?;
    c.entries.reserve(n);
    for _ in 0..n {
        let id = read_id(r)?;
        let fields = r.count(2)?;
        let mut e = StreamEntry {
            id,
            fields: Vec::with_capacity(fields),
        };
        for _ in 0..fields {
            e.fields
                .push((Cow::Borrowed(r.bytes()?), Cow::Borrowed(r.bytes()?)));
        }
        c.entries.push(e);
    }
    // A group takes at least its name, id, entries read and two counts.
    let n = r.count(6)?;
    for _ in 0..n {
        let mut g = StreamGroup {
            name: Cow::Borrowed(r.bytes()?),
            last_id: read_id(r)?,
            entries_read: None,
            consumers: Vec::new(),
            pending: Vec::new(),
        };
        let at = r.pos;
        g.entries_read = match r.u8()? {
            0 => None,
            1 => Some(r.uvar()?),
            _ => return Err(r.corrupt(at, "bad entries-read flag")),
        };
        let consumers = r.count(2)?;
        for _ in 0..consumers {
            g.consumers.push((Cow::Borrowed(r.bytes()?), r.uvar()?));
        }
        let pending = r.count(5)?;
        for _ in 0..pending {
            g.pending.push(StreamPending {
                id: read_id(r)?,
                consumer: Cow::Borrowed(r.bytes()?),
                delivery_time: r.uvar()?,
                delivery_count: r.uvar()?,
            });
        }
        c.groups.push(g);
    }
    Ok(c)
}

// ---------------------------------------------------------------------------
// Digest
// ---------------------------------------------------------------------------

fn hasher() -> impl Hasher {
    foldhash::quality::FixedState::with_seed(0x6b76_6173_6972_6467).build_hasher()
}

fn write_bytes(h: &mut impl Hasher, b: &[u8]) {
    h.write_u64(b.len() as u64);
    h.write(b);
}

fn hash_of<H: Hasher>(new: fn() -> H, f: impl FnOnce(&mut dyn Hasher)) -> u64 {
    let mut h = new();
    f(&mut h);
    h.finish()
}

/// FNV-1a, 64 bits, integers written little-endian: a hash whose output
/// is fixed forever, for digests that travel in the Raft log and are
/// compared by replicas that may run different builds.
struct StableHasher(u64);

impl StableHasher {
    fn new() -> StableHasher {
        StableHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for StableHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write(&[i]);
    }
    fn write_u64(&mut self, i: u64) {
        self.write(&i.to_le_bytes());
    }
}

/// What WATCH remembers of a key in cluster mode: a digest of its logical
/// contents and expiry at `now_ms` (0 for a missing or expired key), by a
/// hash that never changes between builds. The EXEC entry carries the
/// digests seen at WATCH time and every replica compares them with its
/// own state when it applies the entry, so all replicas abort alike.
pub fn watch_digest<K: Keyspace>(store: &Store<K>, db: usize, key: &[u8], now_ms: u64) -> u64 {
    if db >= store.databases() {
        return 0;
    }
    match store.db(db).get(key) {
        Some(e) if !e.is_expired(now_ms) => entry_digest_with(db, e, StableHasher::new) | 1,
        _ => 0,
    }
}

/// A content digest of every key, value and expiry in every database:
/// equal for stores with the same logical contents whatever their insertion
/// order, encodings or internal layout (an intset and a hashtable set of the
/// same members, Str/Raw/Int strings of the same text, a hash's field order
/// all digest alike), and different, with overwhelming probability, as soon
/// as a key, a value, an element, a score (by its bits: -0 and 0 differ, as
/// ZSCORE shows), an expiry or a key's database differs. The encoding limits
/// are configuration, not contents, and are left out. Like DEBUG DIGEST it
/// is for comparing replicas (and tests), not for persisting: it may change
/// between builds.
pub fn digest<K: Keyspace>(store: &Store<K>) -> u64 {
    // Entries (and the elements of unordered collections) are combined by
    // wrapping addition of their own hashes, which does not depend on order.
    let mut sum = 0u64;
    let mut count = 0u64;
    for i in 0..store.databases() {
        for e in store.db(i).iter() {
            sum = sum.wrapping_add(entry_digest(i, e));
            count += 1;
        }
    }
    let mut h = hasher();
    h.write_u64(sum);
    h.write_u64(count);
    // Scripting state is replicated too: bodies in any order, libraries
    // by name.
    let mut bodies = 0u64;
    for sha in store.scripts.bodies.keys() {
        let mut b = hasher();
        write_bytes(&mut b, sha.as_bytes());
        bodies = bodies.wrapping_add(b.finish());
    }
    h.write_u64(bodies);
    for lib in store.scripts.libraries.values() {
        write_bytes(&mut h, &lib.code);
    }
    h.finish()
}

fn entry_digest<K: Keyspace>(db: usize, e: EntryRef<'_, K>) -> u64 {
    entry_digest_with(db, e, hasher)
}

fn entry_digest_with<K: Keyspace, H: Hasher>(db: usize, e: EntryRef<'_, K>, new: fn() -> H) -> u64 {
    let mut h = new();
    h.write_u64(db as u64);
    write_bytes(&mut h, e.key);
    value_into(&mut h, e, new);
    h.finish()
}

/// DEBUG DIGEST-VALUE: a digest of a key's value and expiry alone (not its
/// name or database, so a COPY digests as its source), at `now_ms`; 0 for a
/// missing or expired key.
pub fn value_digest<K: Keyspace>(store: &Store<K>, db: usize, key: &[u8], now_ms: u64) -> u64 {
    if db >= store.databases() {
        return 0;
    }
    match store.db(db).get(key) {
        Some(e) if !e.is_expired(now_ms) => {
            let mut h = hasher();
            value_into(&mut h, e, hasher);
            h.finish() | 1
        }
        _ => 0,
    }
}

fn value_into<K: Keyspace, H: Hasher>(h: &mut H, e: EntryRef<'_, K>, new: fn() -> H) {
    h.write_u64(e.expire_at().unwrap_or(0));
    match e.value {
        Value::Str(s) | Value::Raw(s) => {
            h.write_u8(b's');
            write_bytes(h, s);
        }
        Value::Int(i) => {
            h.write_u8(b's');
            write_bytes(h, format_i64(*i, &mut [0; 20]));
        }
        Value::List(l) => {
            h.write_u8(b'l');
            h.write_u64(l.len() as u64);
            l.for_each_elem(|el| write_bytes(h, el));
        }
        Value::Hash(x) => {
            h.write_u8(b'h');
            h.write_u64(x.len() as u64);
            let mut sum = 0u64;
            x.for_each_pair(|f, v| {
                sum = sum.wrapping_add(hash_of(new, |h| {
                    h.write_u64(f.len() as u64);
                    h.write(f);
                    h.write_u64(v.len() as u64);
                    h.write(v);
                }))
            });
            h.write_u64(sum);
        }
        Value::Set(s) => {
            h.write_u8(b'S');
            h.write_u64(s.len() as u64);
            let mut sum = 0u64;
            s.for_each_member(|b| {
                sum = sum.wrapping_add(hash_of(new, |h| {
                    h.write_u64(b.len() as u64);
                    h.write(b);
                }))
            });
            h.write_u64(sum);
        }
        Value::ZSet(z) => {
            h.write_u8(b'z');
            h.write_u64(z.len() as u64);
            // Rank order is a function of the contents: hash in order.
            z.for_each_by_rank(|m, score| {
                write_bytes(h, m);
                h.write_u64(score.to_bits());
            });
        }
        Value::Stream(st) => {
            // The canonical form (node grouping included) is a function of
            // the operations applied, identical on every replica.
            h.write_u8(b'x');
            let mut blob = Vec::new();
            node_codec::put_canonical(&mut blob, &st.content());
            write_bytes(h, &blob);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_uvar(&mut out, v);
            let mut r = Reader { buf: &out, pos: 0 };
            assert_eq!(r.uvar(), Ok(v));
            assert_eq!(r.remaining(), 0);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -300] {
            let mut out = Vec::new();
            put_svar(&mut out, v);
            let mut r = Reader { buf: &out, pos: 0 };
            assert_eq!(r.svar(), Ok(v));
        }
        // Eleven continuation bytes, and a tenth byte above 1: errors.
        let mut r = Reader {
            buf: &[0xff; 11],
            pos: 0,
        };
        assert!(r.uvar().is_err());
        let mut bad = vec![0xff; 9];
        bad.push(0x02);
        let mut r = Reader { buf: &bad, pos: 0 };
        assert!(r.uvar().is_err());
    }

    #[test]
    fn empty_store_round_trips() {
        let st = Store::default();
        let mut img = Vec::new();
        encode(&st, &mut img);
        assert_eq!(&img[..8], &MAGIC);
        let back = decode(&img).map_err(|e| e.to_string());
        let back = back.as_ref().map(|s| (s.databases(), s.limits));
        assert_eq!(back, Ok((st.databases(), st.limits)));
    }

    #[test]
    fn encode_appends() {
        let st = Store::new(2);
        let mut img = b"prefix".to_vec();
        encode(&st, &mut img);
        assert!(decode(&img[6..]).is_ok());
    }
}
