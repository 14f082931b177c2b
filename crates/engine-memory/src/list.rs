//! The List value type, encoded as Redis encodes it.
//!
//! - A small list is one *listpack*: a single byte buffer of entries, each
//!   `<encoding><data><backlen>` exactly as in Redis's `listpack.c` (integers
//!   in 1..9 bytes, strings with a 1, 2 or 5 byte length prefix, and a
//!   backwards length so the buffer can be walked from either end). OBJECT
//!   ENCODING says `listpack`.
//! - Once a push would make that buffer exceed `list-max-listpack-size`
//!   (negative: 4..64 KB per node; positive: entries per node, at most 8 KB),
//!   the list becomes a *quicklist*: a deque of such listpack nodes, each
//!   kept within the same limit. OBJECT ENCODING says `quicklist`. As the
//!   family's rule says, a list never converts back.
//!
//! Pushes and pops at either end touch one node (O(1) amortized, plus a
//! memmove bounded by the node size, as in Redis); positional access walks
//! the nodes (O(n), as in Redis). Elements that are canonical decimal i64s
//! are stored as integers; [`Elem`] gives them back as the same bytes.
//!
//! This module knows nothing about commands: the limit (`fill`) is passed in
//! by the caller, which owns the configuration.

use bytes::{BufMut, Bytes, BytesMut};
use std::collections::VecDeque;

use crate::value::canonical_i64;

/// Which end of a list an operation works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Front,
    Back,
}

/// Bytes of a Redis listpack outside its entries (total-bytes u32, count
/// u16, end marker), counted so that node sizes compare with Redis's limits
/// the way Redis compares them.
const LP_OVERHEAD: usize = 7;
/// Redis's SIZE_SAFETY_LIMIT: a node never grows past 8 KB when the limit
/// is a count of entries.
const SIZE_SAFETY_LIMIT: usize = 8192;
/// Redis's SIZE_ESTIMATE_OVERHEAD, added to an element's length when
/// checking whether it still fits a node.
const SIZE_ESTIMATE_OVERHEAD: usize = 8;
/// Node size limits for list-max-listpack-size -1..-5.
const OPTIMIZATION_LEVEL: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

/// Whether a node of `bytes` bytes and `count` entries is over the limit
/// `fill` (Redis's quicklistNodeExceedsLimit).
fn exceeds(fill: i64, bytes: usize, count: usize) -> bool {
    if fill >= 0 {
        let max_count = usize::try_from(fill.max(1)).unwrap_or(usize::MAX);
        bytes > SIZE_SAFETY_LIMIT || count > max_count
    } else {
        // -1 -> level 0 ... -5 and below -> level 4; no overflow for i64::MIN.
        let level = usize::try_from(-(fill + 1)).unwrap_or(usize::MAX).min(4);
        bytes > OPTIMIZATION_LEVEL[level]
    }
}

// ---------------------------------------------------------------------------
// Elements
// ---------------------------------------------------------------------------

/// An element as stored: integers decoded, strings borrowed from the node
/// (or, for a node kept compressed, shared with the buffer it was
/// decompressed into for this one access). Equality is equality of the
/// element's bytes, because an element is an `Int` exactly when its bytes
/// are a canonical i64.
#[derive(Debug, Clone)]
pub enum Elem<'a> {
    Int(i64),
    Str(&'a [u8]),
    /// A string of a compressed node: a slice of the node's decompressed
    /// copy, freed once the last element taken from it is dropped (the
    /// stored node stays compressed, as Redis recompresses after access).
    Buf(Bytes),
}

impl PartialEq for Elem<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Elem::Int(a), Elem::Int(b)) => a == b,
            (Elem::Int(_), _) | (_, Elem::Int(_)) => false,
            (a, b) => a.str_bytes() == b.str_bytes(),
        }
    }
}

impl Eq for Elem<'_> {}

impl<'a> Elem<'a> {
    /// The stored form of `b` (what to compare stored elements with).
    pub fn from_bytes(b: &'a [u8]) -> Elem<'a> {
        match canonical_i64(b) {
            Some(i) => Elem::Int(i),
            None => Elem::Str(b),
        }
    }

    /// The bytes of a string element (empty for an integer).
    #[inline]
    fn str_bytes(&self) -> &[u8] {
        match self {
            Elem::Int(_) => &[],
            Elem::Str(s) => s,
            Elem::Buf(b) => b,
        }
    }

    /// Length of the element's bytes.
    pub fn byte_len(&self) -> usize {
        match self {
            Elem::Int(i) => IntBuf::new(*i).as_slice().len(),
            s => s.str_bytes().len(),
        }
    }

    /// Appends the element's bytes to `out`.
    pub fn write_to(&self, out: &mut BytesMut) {
        match self {
            Elem::Int(i) => out.put_slice(IntBuf::new(*i).as_slice()),
            s => out.put_slice(s.str_bytes()),
        }
    }

    /// Calls `visit` with the element's bytes (an integer formatted on the
    /// stack).
    pub fn with_bytes<R>(&self, visit: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Elem::Int(i) => visit(IntBuf::new(*i).as_slice()),
            s => visit(s.str_bytes()),
        }
    }

    /// The element's bytes, owned.
    pub fn to_bytes(&self) -> Bytes {
        match self {
            Elem::Int(i) => Bytes::copy_from_slice(IntBuf::new(*i).as_slice()),
            Elem::Str(s) => Bytes::copy_from_slice(s),
            Elem::Buf(b) => b.clone(),
        }
    }

    /// The element's bytes as a Vec (tests, debugging).
    pub fn to_vec(&self) -> Vec<u8> {
        self.with_bytes(<[u8]>::to_vec)
    }

    /// The element taken from a decompressed node `node` (`self` borrows
    /// from it): strings become shared slices of it.
    fn owned_from(self, node: &Bytes) -> Elem<'static> {
        match self {
            Elem::Int(i) => Elem::Int(i),
            Elem::Str(s) => Elem::Buf(node.slice_ref(s)),
            Elem::Buf(b) => Elem::Buf(b),
        }
    }
}

/// Decimal formatting of an i64 on the stack.
struct IntBuf {
    buf: [u8; 20],
    start: usize,
}

impl IntBuf {
    fn new(v: i64) -> IntBuf {
        let mut buf = [0u8; 20];
        let mut pos = buf.len();
        let neg = v < 0;
        let mut u = v.unsigned_abs();
        loop {
            pos -= 1;
            buf[pos] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        if neg {
            pos -= 1;
            buf[pos] = b'-';
        }
        IntBuf { buf, start: pos }
    }

    fn as_slice(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

// ---------------------------------------------------------------------------
// Entry encoding (listpack.c)
// ---------------------------------------------------------------------------

/// One encoded entry, ready to be copied into a node: header (encoding byte
/// and any integer or length bytes), string data, backlen.
struct Encoded<'a> {
    head: [u8; 9],
    head_len: usize,
    data: &'a [u8],
    back: [u8; 5],
    back_len: usize,
}

impl<'a> Encoded<'a> {
    fn new(e: &'a Elem<'_>) -> Encoded<'a> {
        let mut head = [0u8; 9];
        let (head_len, data): (usize, &[u8]) = match *e {
            Elem::Int(v) => {
                let n = if (0..=127).contains(&v) {
                    head[0] = v as u8;
                    1
                } else if (-4096..=4095).contains(&v) {
                    let u = (v as u16) & 0x1FFF;
                    head[0] = 0xC0 | (u >> 8) as u8;
                    head[1] = u as u8;
                    2
                } else if (-32768..=32767).contains(&v) {
                    head[0] = 0xF1;
                    head[1..3].copy_from_slice(&(v as i16).to_le_bytes());
                    3
                } else if (-8_388_608..=8_388_607).contains(&v) {
                    head[0] = 0xF2;
                    head[1..4].copy_from_slice(&(v as i32).to_le_bytes()[..3]);
                    4
                } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
                    head[0] = 0xF3;
                    head[1..5].copy_from_slice(&(v as i32).to_le_bytes());
                    5
                } else {
                    head[0] = 0xF4;
                    head[1..9].copy_from_slice(&v.to_le_bytes());
                    9
                };
                (n, &[])
            }
            Elem::Str(_) | Elem::Buf(_) => {
                let s = e.str_bytes();
                let len = s.len();
                let n = if len < 64 {
                    head[0] = 0x80 | len as u8;
                    1
                } else if len < 4096 {
                    head[0] = 0xE0 | (len >> 8) as u8;
                    head[1] = len as u8;
                    2
                } else {
                    // Strings reach us through the protocol, bounded far
                    // below 4 GB (proto-max-bulk-len).
                    head[0] = 0xF0;
                    head[1..5].copy_from_slice(&(len as u32).to_le_bytes());
                    5
                };
                (n, s)
            }
        };
        let mut back = [0u8; 5];
        let back_len = encode_backlen(head_len + data.len(), &mut back);
        Encoded {
            head,
            head_len,
            data,
            back,
            back_len,
        }
    }

    fn size(&self) -> usize {
        self.head_len + self.data.len() + self.back_len
    }

    /// Writes the entry into `out`, which is exactly `size()` long.
    fn write(&self, out: &mut [u8]) {
        let (h, rest) = out.split_at_mut(self.head_len);
        h.copy_from_slice(&self.head[..self.head_len]);
        let (d, b) = rest.split_at_mut(self.data.len());
        d.copy_from_slice(self.data);
        b.copy_from_slice(&self.back[..self.back_len]);
    }

    fn append_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.head[..self.head_len]);
        out.extend_from_slice(self.data);
        out.extend_from_slice(&self.back[..self.back_len]);
    }
}

/// Redis's lpEncodeBacklen: `l` in 7-bit groups, most significant first,
/// every byte but the first flagged with the high bit, so that reading
/// backwards from the entry's end knows when to stop.
fn encode_backlen(l: usize, out: &mut [u8; 5]) -> usize {
    let n = backlen_size(l);
    for (i, slot) in out.iter_mut().take(n).enumerate() {
        let shift = 7 * (n - 1 - i);
        let group = ((l >> shift) & 127) as u8;
        *slot = if i == 0 { group } else { group | 128 };
    }
    n
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Decodes the entry at `p`: the element and the length of its encoding
/// and data (without backlen). `buf` is a node buffer written by this
/// module, so its entries are well formed.
fn decode(buf: &[u8], p: usize) -> (Elem<'_>, usize) {
    let b = buf[p];
    if b & 0x80 == 0 {
        return (Elem::Int(b as i64), 1);
    }
    if b & 0xC0 == 0x80 {
        let n = (b & 0x3F) as usize;
        return (Elem::Str(&buf[p + 1..p + 1 + n]), 1 + n);
    }
    if b & 0xE0 == 0xC0 {
        let u = (((b & 0x1F) as u16) << 8) | buf[p + 1] as u16;
        // Sign-extend the 13-bit two's complement value.
        let v = ((u << 3) as i16) >> 3;
        return (Elem::Int(v as i64), 2);
    }
    if b & 0xF0 == 0xE0 {
        let n = (((b & 0x0F) as usize) << 8) | buf[p + 1] as usize;
        return (Elem::Str(&buf[p + 2..p + 2 + n]), 2 + n);
    }
    let le = |n: usize| -> u64 {
        buf[p + 1..p + 1 + n]
            .iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | x as u64)
    };
    match b {
        0xF0 => {
            let n = le(4) as usize;
            (Elem::Str(&buf[p + 5..p + 5 + n]), 5 + n)
        }
        0xF1 => (Elem::Int(le(2) as u16 as i16 as i64), 3),
        0xF2 => (Elem::Int((((le(3) as u32) << 8) as i32 >> 8) as i64), 4),
        0xF3 => (Elem::Int(le(4) as u32 as i32 as i64), 5),
        _ => (Elem::Int(le(8) as i64), 9),
    }
}

/// Start of the entry that ends (backlen included) at `end`.
fn entry_start_before(buf: &[u8], end: usize) -> usize {
    let mut p = end - 1;
    let mut l = 0usize;
    let mut shift = 0;
    loop {
        l |= ((buf[p] & 127) as usize) << shift;
        if buf[p] & 128 == 0 {
            break;
        }
        shift += 7;
        p -= 1;
    }
    end - backlen_size(l) - l
}

// ---------------------------------------------------------------------------
// Listpack: one node
// ---------------------------------------------------------------------------

/// The element at byte offset `off` of the entries `buf` and the offset
/// of the next entry.
#[inline]
fn entry_at(buf: &[u8], off: usize) -> (Elem<'_>, usize) {
    let (e, l) = decode(buf, off);
    (e, off + l + backlen_size(l))
}

/// Byte offset of the entry at position `i` of the `count` entries `buf`
/// (`i == count` gives the end), walking from the nearer end.
fn offset_in(buf: &[u8], count: usize, i: usize) -> usize {
    if i >= count {
        return buf.len();
    }
    if i <= count / 2 {
        let mut off = 0;
        for _ in 0..i {
            off = entry_at(buf, off).1;
        }
        off
    } else {
        let mut off = buf.len();
        for _ in i..count {
            off = entry_start_before(buf, off);
        }
        off
    }
}

/// Redis's MIN_COMPRESS_BYTES: smaller nodes are never compressed.
const MIN_COMPRESS_BYTES: usize = 48;
/// Redis's MIN_COMPRESS_IMPROVE: a node stays raw unless compressing it
/// saves at least this many bytes.
const MIN_COMPRESS_IMPROVE: usize = 8;
/// [`Listpack::packed`] of a raw node on which compression was tried and
/// did not pay (tried again only after the node changes).
const PACK_TRIED: u32 = u32::MAX;

/// One listpack: its entries back to back (Redis's header and end byte are
/// implied; see [`LP_OVERHEAD`]).
///
/// A quicklist node deeper than `list-compress-depth` from both ends is
/// kept compressed: `buf` then holds the entries compressed and `packed`
/// their raw length. Only [`Quicklist`] compresses nodes, and it makes a
/// node raw again (`decompress`) before changing it; every other method
/// here reads `buf` as raw entries and is only called on raw nodes.
#[derive(Clone, Default)]
struct Listpack {
    buf: Vec<u8>,
    count: u32,
    /// 0: raw. [`PACK_TRIED`]: raw, compression did not pay. Otherwise
    /// `buf` is compressed and this is the raw entries' length.
    packed: u32,
}

/// Decompresses the entries of a compressed node (`raw_len` bytes of
/// `count` entries). The input is what [`Listpack::compress`] produced in
/// this process, so decoding cannot fail; should it ever, the node reads
/// as `count` empty strings rather than panicking on a short buffer.
fn unpack(compressed: &[u8], raw_len: usize, count: usize) -> Vec<u8> {
    match lz4_flex::block::decompress(compressed, raw_len) {
        Ok(v) if v.len() == raw_len => v,
        _ => {
            debug_assert!(false, "a compressed list node failed to decompress");
            // An empty string entry: encoding 0x80, backlen 1.
            [0x80u8, 1].repeat(count)
        }
    }
}

impl Listpack {
    fn count(&self) -> usize {
        self.count as usize
    }

    /// Whether `buf` holds the entries compressed.
    #[inline]
    fn is_compressed(&self) -> bool {
        self.packed != 0 && self.packed != PACK_TRIED
    }

    /// Size as Redis's lpBytes would report it (of the raw entries, for a
    /// compressed node).
    fn bytes(&self) -> usize {
        let raw = if self.is_compressed() {
            self.packed as usize
        } else {
            self.buf.len()
        };
        raw + LP_OVERHEAD
    }

    /// Compresses the node unless it is already compressed, too small, or
    /// compression was tried since it last changed (Redis's
    /// __quicklistCompressNode: at least [`MIN_COMPRESS_BYTES`], kept raw
    /// unless it saves [`MIN_COMPRESS_IMPROVE`] bytes).
    fn compress(&mut self) {
        if self.packed != 0 {
            return;
        }
        let raw = self.bytes();
        if raw < MIN_COMPRESS_BYTES || self.buf.len() >= PACK_TRIED as usize {
            self.packed = PACK_TRIED;
            return;
        }
        let mut c = lz4_flex::block::compress(&self.buf);
        if c.len() + MIN_COMPRESS_IMPROVE >= raw {
            self.packed = PACK_TRIED;
            return;
        }
        c.shrink_to_fit();
        self.packed = self.buf.len() as u32;
        self.buf = c;
    }

    /// Makes the node raw (to be changed, or because it is now within the
    /// compress depth of an end). Marks it untried: it may have changed.
    #[inline]
    fn decompress(&mut self) {
        if self.is_compressed() {
            self.buf = unpack(&self.buf, self.packed as usize, self.count());
        }
        self.packed = 0;
    }

    /// For a compressed node, its raw entries decompressed into a buffer of
    /// their own (the node stays compressed); None for a raw node.
    #[inline]
    fn unpacked(&self) -> Option<Bytes> {
        self.is_compressed()
            .then(|| Bytes::from(unpack(&self.buf, self.packed as usize, self.count())))
    }

    /// Whether an element of `raw_len` bytes may still go into this node
    /// (Redis's _quicklistNodeAllowInsert).
    fn allows_insert(&self, raw_len: usize, fill: i64) -> bool {
        self.count == 0
            || !exceeds(
                fill,
                self.bytes() + raw_len + SIZE_ESTIMATE_OVERHEAD,
                self.count() + 1,
            )
    }

    /// Grows capacity by a quarter at least (amortized O(1) appends with
    /// little slack, close to jemalloc's size classes).
    fn reserve(&mut self, extra: usize) {
        let need = self.buf.len() + extra;
        let cap = self.buf.capacity();
        if need > cap {
            let target = need.max(cap + cap / 4).max(16);
            self.buf.reserve_exact(target - self.buf.len());
        }
    }

    /// Gives memory back after removals left the buffer mostly empty.
    fn maybe_shrink(&mut self) {
        let cap = self.buf.capacity();
        if cap > 64 && self.buf.len() < cap / 2 {
            let len = self.buf.len();
            self.buf.shrink_to(len + len / 4);
        }
    }

    fn insert_encoded(&mut self, off: usize, enc: &Encoded<'_>) {
        let size = enc.size();
        if off == self.buf.len() {
            self.reserve(size);
            enc.append_to(&mut self.buf);
        } else {
            self.reserve(size);
            let old = self.buf.len();
            self.buf.resize(old + size, 0);
            self.buf.copy_within(off..old, off + size);
            enc.write(&mut self.buf[off..off + size]);
        }
        self.count += 1;
    }

    fn push(&mut self, end: End, e: Elem<'_>) {
        let off = match end {
            End::Front => 0,
            End::Back => self.buf.len(),
        };
        self.insert_encoded(off, &Encoded::new(&e));
    }

    /// The element at byte offset `off` and the offset of the next entry.
    #[inline]
    fn at(&self, off: usize) -> (Elem<'_>, usize) {
        entry_at(&self.buf, off)
    }

    /// Byte offset of the entry at position `i` (`i == count` gives the
    /// end), walking from the nearer end.
    fn offset_of(&self, i: usize) -> usize {
        offset_in(&self.buf, self.count(), i)
    }

    fn get(&self, i: usize) -> Elem<'_> {
        self.at(self.offset_of(i)).0
    }

    fn insert(&mut self, i: usize, e: Elem<'_>) {
        let off = self.offset_of(i);
        self.insert_encoded(off, &Encoded::new(&e));
    }

    fn replace(&mut self, i: usize, e: Elem<'_>) {
        let off = self.offset_of(i);
        let next = self.at(off).1;
        let enc = Encoded::new(&e);
        let size = enc.size();
        let old_size = next - off;
        if size > old_size {
            self.reserve(size - old_size);
            let old = self.buf.len();
            self.buf.resize(old + size - old_size, 0);
            self.buf.copy_within(next..old, off + size);
        } else if size < old_size {
            self.buf.copy_within(next.., off + size);
            self.buf.truncate(self.buf.len() - (old_size - size));
        }
        enc.write(&mut self.buf[off..off + size]);
    }

    /// Removes entries `i..i + n` (clamped to the node).
    fn remove_range(&mut self, i: usize, n: usize) {
        let n = n.min(self.count().saturating_sub(i));
        if n == 0 {
            return;
        }
        if n == self.count() {
            self.buf = Vec::new();
            self.count = 0;
            self.packed = 0;
            return;
        }
        let from = self.offset_of(i);
        let mut to = from;
        for _ in 0..n {
            to = self.at(to).1;
        }
        self.buf.drain(from..to);
        self.count -= n as u32;
        self.maybe_shrink();
    }

    /// Removes the first or last entry and returns its bytes.
    fn pop(&mut self, end: End) -> Option<Bytes> {
        if self.count == 0 {
            return None;
        }
        let (from, to) = match end {
            End::Front => (0, self.at(0).1),
            End::Back => (
                entry_start_before(&self.buf, self.buf.len()),
                self.buf.len(),
            ),
        };
        let value = self.at(from).0.to_bytes();
        self.buf.drain(from..to);
        self.count -= 1;
        self.maybe_shrink();
        Some(value)
    }

    /// Keeps only the entries whose position is not in `sorted` (positions
    /// local to this node, ascending).
    fn remove_positions(&mut self, sorted: &[usize]) {
        if sorted.is_empty() {
            return;
        }
        let mut out = Vec::with_capacity(self.buf.len());
        let mut skip = sorted.iter().peekable();
        let mut off = 0;
        let mut i = 0;
        while off < self.buf.len() {
            let next = self.at(off).1;
            if skip.peek() == Some(&&i) {
                skip.next();
            } else {
                out.extend_from_slice(&self.buf[off..next]);
            }
            off = next;
            i += 1;
        }
        let removed = sorted.iter().filter(|&&p| p < self.count()).count();
        self.count -= removed as u32;
        out.shrink_to_fit();
        self.buf = out;
    }

    /// Splits into nodes that each respect the limit `fill`.
    fn split(self, fill: i64) -> Vec<Listpack> {
        let mut parts = Vec::new();
        let mut cur = Listpack::default();
        let mut off = 0;
        while off < self.buf.len() {
            let (e, next) = self.at(off);
            if !cur.allows_insert(e.byte_len(), fill) {
                cur.buf.shrink_to_fit();
                parts.push(std::mem::take(&mut cur));
            }
            cur.buf.extend_from_slice(&self.buf[off..next]);
            cur.count += 1;
            off = next;
        }
        if cur.count > 0 {
            cur.buf.shrink_to_fit();
            parts.push(cur);
        }
        parts
    }
}

// ---------------------------------------------------------------------------
// List
// ---------------------------------------------------------------------------

#[derive(Clone)]
enum Repr {
    /// Small list: one listpack.
    Packed(Listpack),
    /// Large list: a deque of listpack nodes, none empty.
    Quick(Box<Quicklist>),
}

#[derive(Clone, Default)]
struct Quicklist {
    nodes: VecDeque<Listpack>,
    len: usize,
    /// Redis's list-compress-depth as it was when the list became a
    /// quicklist (Redis's quicklistNew takes it then, and CONFIG SET does
    /// not change existing lists): this many nodes at each end stay raw,
    /// the nodes between them are kept compressed. 0 compresses nothing.
    depth: u32,
}

/// The limits a list is shaped by: Redis's list-max-listpack-size (`fill`)
/// and list-compress-depth (taken when the list becomes a quicklist).
/// An `i64` converts into a fill without compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListLimits {
    pub fill: i64,
    pub compress_depth: u32,
}

impl From<i64> for ListLimits {
    fn from(fill: i64) -> ListLimits {
        ListLimits {
            fill,
            compress_depth: 0,
        }
    }
}

/// A Redis list value.
#[derive(Clone)]
pub struct List {
    repr: Repr,
}

impl Default for List {
    fn default() -> Self {
        List::new()
    }
}

impl PartialEq for List {
    /// Same encoding and same elements (node boundaries are an internal
    /// detail, like buffer capacities).
    fn eq(&self, other: &Self) -> bool {
        self.encoding() == other.encoding()
            && self.len() == other.len()
            && self.iter().eq(other.iter())
    }
}

impl Eq for List {}

impl std::fmt::Debug for List {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let items: Vec<String> = self
            .iter()
            .map(|e| String::from_utf8_lossy(&e.to_vec()).into_owned())
            .collect();
        f.debug_struct("List")
            .field("encoding", &self.encoding())
            .field("items", &items)
            .finish()
    }
}

impl List {
    pub fn new() -> List {
        List {
            repr: Repr::Packed(Listpack::default()),
        }
    }

    /// A list of `items`, front to back, as pushes under `limits` build it.
    pub fn from_items<T: AsRef<[u8]>>(items: &[T], limits: impl Into<ListLimits>) -> List {
        let mut l = List::new();
        l.push(End::Back, items, limits);
        l
    }

    /// A list of `items`, front to back, in the listpack encoding whatever
    /// their number and size. For restoring a snapshot: a list's encoding
    /// depends on its history (the limits when it last grew, and it never
    /// converts back), not only on its elements, so a replica restores the
    /// encoding its source had.
    pub fn listpack_from_items<T: AsRef<[u8]>>(items: &[T]) -> List {
        let mut lp = Listpack::default();
        for v in items {
            lp.push(End::Back, Elem::from_bytes(v.as_ref()));
        }
        List {
            repr: Repr::Packed(lp),
        }
    }

    /// An empty list already in the quicklist encoding, for restoring a
    /// snapshot of a list that became a quicklist (however short it got
    /// since). Pushes then fill nodes as in any quicklist.
    /// `compress_depth` is list-compress-depth (see [`ListLimits`]).
    pub fn new_quicklist(compress_depth: u32) -> List {
        List {
            repr: Repr::Quick(Box::new(Quicklist {
                depth: compress_depth,
                ..Default::default()
            })),
        }
    }

    /// How many of a quicklist's nodes are kept compressed (tests and
    /// diagnostics; 0 for a listpack).
    pub fn compressed_nodes(&self) -> usize {
        match &self.repr {
            Repr::Packed(_) => 0,
            Repr::Quick(q) => q.nodes.iter().filter(|n| n.is_compressed()).count(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Packed(lp) => lp.count(),
            Repr::Quick(q) => q.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Packed(lp) => lp.buf.capacity(),
            Repr::Quick(q) => {
                std::mem::size_of::<Quicklist>()
                    + q.nodes.capacity() * std::mem::size_of::<Listpack>()
                    + q.nodes.iter().map(|n| n.buf.capacity()).sum::<usize>()
            }
        }
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Packed(_) => "listpack",
            Repr::Quick(_) => "quicklist",
        }
    }

    /// Number of nodes (1 for a listpack; tests and diagnostics).
    pub fn node_count(&self) -> usize {
        match &self.repr {
            Repr::Packed(_) => 1,
            Repr::Quick(q) => q.nodes.len(),
        }
    }

    fn node(&self, i: usize) -> Option<&Listpack> {
        match &self.repr {
            Repr::Packed(lp) => (i == 0).then_some(lp),
            Repr::Quick(q) => q.nodes.get(i),
        }
    }

    /// Turns a listpack into a quicklist if adding `add_count` elements of
    /// `add_bytes` bytes in total would exceed the limit (Redis's
    /// listTypeTryConvertListpack). The whole listpack becomes the first
    /// node; later pushes fill new nodes.
    fn convert_if_needed(&mut self, add_bytes: usize, add_count: usize, limits: ListLimits) {
        if let Repr::Packed(lp) = &mut self.repr {
            let bytes = lp.bytes().saturating_add(add_bytes);
            if exceeds(limits.fill, bytes, lp.count() + add_count) {
                let lp = std::mem::take(lp);
                let len = lp.count();
                let mut nodes = VecDeque::new();
                if len > 0 {
                    nodes.push_back(lp);
                }
                self.repr = Repr::Quick(Box::new(Quicklist {
                    nodes,
                    len,
                    depth: limits.compress_depth,
                }));
            }
        }
    }

    /// Pushes `values` one by one at `end` (so LPUSH a b c leaves c first).
    pub fn push<T: AsRef<[u8]>>(&mut self, end: End, values: &[T], limits: impl Into<ListLimits>) {
        let limits = limits.into();
        let fill = limits.fill;
        let add_bytes = values.iter().map(|v| v.as_ref().len()).sum();
        self.convert_if_needed(add_bytes, values.len(), limits);
        match &mut self.repr {
            Repr::Packed(lp) => {
                for v in values {
                    lp.push(end, Elem::from_bytes(v.as_ref()));
                }
            }
            Repr::Quick(q) => {
                for v in values {
                    q.push(end, v.as_ref(), fill);
                }
            }
        }
    }

    /// Removes and returns the first or last element.
    pub fn pop(&mut self, end: End) -> Option<Bytes> {
        match &mut self.repr {
            Repr::Packed(lp) => lp.pop(end),
            Repr::Quick(q) => q.pop(end),
        }
    }

    /// The element at `index` (from the front), if any.
    pub fn get(&self, index: usize) -> Option<Elem<'_>> {
        if index >= self.len() {
            return None;
        }
        match &self.repr {
            Repr::Packed(lp) => Some(lp.get(index)),
            Repr::Quick(q) => {
                let (ni, local) = q.locate(index);
                let n = &q.nodes[ni];
                match n.unpacked() {
                    None => Some(n.get(local)),
                    Some(raw) => {
                        let off = offset_in(&raw, n.count(), local);
                        Some(entry_at(&raw, off).0.owned_from(&raw))
                    }
                }
            }
        }
    }

    /// Replaces the element at `index`; false if out of range.
    pub fn set(&mut self, index: usize, value: &[u8], limits: impl Into<ListLimits>) -> bool {
        let limits = limits.into();
        if index >= self.len() {
            return false;
        }
        self.convert_if_needed(value.len(), 1, limits);
        let e = Elem::from_bytes(value);
        match &mut self.repr {
            Repr::Packed(lp) => lp.replace(index, e),
            Repr::Quick(q) => {
                let (ni, local) = q.locate(index);
                q.raw_node(ni).replace(local, e);
                q.split_if_over(ni, limits.fill);
                q.compress_inner();
            }
        }
        true
    }

    /// Inserts `value` so that it ends up at `index` (0..=len).
    pub fn insert(&mut self, index: usize, value: &[u8], limits: impl Into<ListLimits>) {
        let limits = limits.into();
        let fill = limits.fill;
        let index = index.min(self.len());
        self.convert_if_needed(value.len(), 1, limits);
        let e = Elem::from_bytes(value);
        match &mut self.repr {
            Repr::Packed(lp) => lp.insert(index, e),
            Repr::Quick(q) => {
                if index == q.len {
                    q.push(End::Back, value, fill);
                } else if index == 0 {
                    q.push(End::Front, value, fill);
                } else {
                    let (ni, local) = q.locate(index);
                    q.raw_node(ni).insert(local, e);
                    q.len += 1;
                    q.split_if_over(ni, fill);
                    q.compress_inner();
                }
            }
        }
    }

    /// Removes `count` elements starting at `start` (clamped to the list).
    pub fn remove_range(&mut self, start: usize, count: usize) {
        let count = count.min(self.len().saturating_sub(start));
        if count == 0 {
            return;
        }
        match &mut self.repr {
            Repr::Packed(lp) => lp.remove_range(start, count),
            Repr::Quick(q) => q.remove_range(start, count),
        }
    }

    /// Removes the elements at the given positions (ascending, distinct).
    pub fn remove_positions(&mut self, sorted: &[usize]) {
        match &mut self.repr {
            Repr::Packed(lp) => lp.remove_positions(sorted),
            Repr::Quick(q) => q.remove_positions(sorted),
        }
    }

    /// Elements from the front.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// Elements from position `start` towards the back.
    pub fn iter_from(&self, start: usize) -> Iter<'_> {
        let left = self.len().saturating_sub(start);
        let (node, off, unpacked) = if left == 0 {
            (usize::MAX, 0, None)
        } else {
            match &self.repr {
                Repr::Packed(lp) => (0, lp.offset_of(start), None),
                Repr::Quick(q) => {
                    let (ni, local) = q.locate(start);
                    let n = &q.nodes[ni];
                    let unpacked = n.unpacked();
                    let off = match &unpacked {
                        Some(raw) => offset_in(raw, n.count(), local),
                        None => n.offset_of(local),
                    };
                    (ni, off, unpacked)
                }
            }
        };
        Iter {
            list: self,
            node,
            off,
            left,
            unpacked,
        }
    }

    /// Elements from the back.
    pub fn iter_rev(&self) -> RevIter<'_> {
        self.iter_rev_from(self.len().saturating_sub(1))
    }

    /// Elements from position `start` towards the front.
    pub fn iter_rev_from(&self, start: usize) -> RevIter<'_> {
        let len = self.len();
        let (left, node, end, unpacked) = if len == 0 {
            (0, 0, 0, None)
        } else {
            let start = start.min(len - 1);
            let (ni, local) = match &self.repr {
                Repr::Packed(_) => (0, start),
                Repr::Quick(q) => q.locate(start),
            };
            let (end, unpacked) = match self.node(ni) {
                None => (0, None),
                Some(n) => {
                    let unpacked = n.unpacked();
                    let end = match &unpacked {
                        Some(raw) => offset_in(raw, n.count(), local + 1),
                        None => n.offset_of(local + 1),
                    };
                    (end, unpacked)
                }
            };
            (start + 1, ni, end, unpacked)
        };
        RevIter {
            list: self,
            node,
            end,
            left,
            unpacked,
        }
    }
}

impl Quicklist {
    /// The node holding position `index` (< len) and the position in it,
    /// walking from the nearer end.
    fn locate(&self, index: usize) -> (usize, usize) {
        if index < self.len / 2 {
            let mut i = index;
            for (ni, n) in self.nodes.iter().enumerate() {
                if i < n.count() {
                    return (ni, i);
                }
                i -= n.count();
            }
        } else {
            let mut from_back = self.len - index; // >= 1
            for (ni, n) in self.nodes.iter().enumerate().rev() {
                if from_back <= n.count() {
                    return (ni, n.count() - from_back);
                }
                from_back -= n.count();
            }
        }
        // Unreachable while `len` matches the nodes; stay in bounds anyway.
        (self.nodes.len().saturating_sub(1), 0)
    }

    /// Node `ni`, raw, to be changed (it is compressed again, if deep
    /// enough, by the [`Quicklist::compress_inner`] that follows).
    #[inline]
    fn raw_node(&mut self, ni: usize) -> &mut Listpack {
        let n = &mut self.nodes[ni];
        n.decompress();
        n
    }

    /// Restores the compression shape after nodes came or went at the ends
    /// (Redis's __quicklistCompress): the `depth` nodes at each end raw,
    /// the first node past them on each side compressed. O(depth); the
    /// nodes further in are already compressed (or tried).
    fn compress_ends(&mut self) {
        let d = self.depth as usize;
        if d == 0 {
            return;
        }
        let n = self.nodes.len();
        for i in 0..d.min(n) {
            self.nodes[i].decompress();
            self.nodes[n - 1 - i].decompress();
        }
        if n > 2 * d {
            self.nodes[d].compress();
            self.nodes[n - 1 - d].compress();
        }
    }

    /// Restores the compression shape after changes anywhere: every node
    /// within `depth` of an end raw, every other one compressed (or tried).
    /// O(nodes) checks, compressing only the nodes that changed.
    fn compress_inner(&mut self) {
        let d = self.depth as usize;
        if d == 0 {
            return;
        }
        let n = self.nodes.len();
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if i < d || i + d >= n {
                node.decompress();
            } else {
                node.compress();
            }
        }
    }

    fn push(&mut self, end: End, value: &[u8], fill: i64) {
        let e = Elem::from_bytes(value);
        let node = match end {
            End::Front => self.nodes.front_mut(),
            End::Back => self.nodes.back_mut(),
        };
        if let Some(n) = node {
            // The end nodes are raw (within the depth); stay safe anyway.
            n.decompress();
            if n.allows_insert(value.len(), fill) {
                n.push(end, e);
                self.len += 1;
                return;
            }
            // The full node is done growing at this end: drop its slack.
            n.buf.shrink_to_fit();
        }
        let mut n = Listpack::default();
        n.push(end, e);
        match end {
            End::Front => self.nodes.push_front(n),
            End::Back => self.nodes.push_back(n),
        }
        self.len += 1;
        self.compress_ends();
    }

    fn pop(&mut self, end: End) -> Option<Bytes> {
        let node = match end {
            End::Front => self.nodes.front_mut(),
            End::Back => self.nodes.back_mut(),
        }?;
        node.decompress();
        let v = node.pop(end);
        if node.count == 0 {
            match end {
                End::Front => self.nodes.pop_front(),
                End::Back => self.nodes.pop_back(),
            };
            self.compress_ends();
        }
        if v.is_some() {
            self.len -= 1;
        }
        v
    }

    /// Splits node `ni` into several if it outgrew the limit.
    fn split_if_over(&mut self, ni: usize, fill: i64) {
        let n = &self.nodes[ni];
        if n.count() <= 1 || !exceeds(fill, n.bytes(), n.count()) {
            return;
        }
        let node = std::mem::take(&mut self.nodes[ni]);
        let mut parts = node.split(fill).into_iter();
        if let Some(first) = parts.next() {
            self.nodes[ni] = first;
        }
        for (k, p) in parts.enumerate() {
            self.nodes.insert(ni + 1 + k, p);
        }
    }

    fn remove_range(&mut self, start: usize, count: usize) {
        let (mut ni, mut local) = self.locate(start);
        let mut left = count;
        let mut emptied: Option<(usize, usize)> = None;
        while left > 0 && ni < self.nodes.len() {
            let n = &mut self.nodes[ni];
            let take = left.min(n.count() - local);
            if take < n.count() {
                n.decompress();
            }
            n.remove_range(local, take);
            if n.count == 0 {
                emptied = Some(emptied.map_or((ni, ni), |(a, _)| (a, ni)));
            }
            left -= take;
            local = 0;
            ni += 1;
        }
        // Fully removed nodes are contiguous.
        if let Some((a, b)) = emptied {
            self.nodes.drain(a..=b);
        }
        self.len -= count - left;
        self.compress_inner();
    }

    fn remove_positions(&mut self, sorted: &[usize]) {
        let mut base = 0;
        let mut rest = sorted;
        let mut removed = 0;
        for n in self.nodes.iter_mut() {
            if rest.is_empty() {
                break;
            }
            let end = base + n.count();
            let k = rest.partition_point(|&p| p < end);
            if k > 0 {
                let local: Vec<usize> = rest[..k].iter().map(|&p| p - base).collect();
                n.decompress();
                let before = n.count();
                n.remove_positions(&local);
                removed += before - n.count();
                rest = &rest[k..];
            }
            base = end;
        }
        self.nodes.retain(|n| n.count > 0);
        self.len -= removed;
        self.compress_inner();
    }
}

/// Front-to-back iterator over a list's elements.
pub struct Iter<'a> {
    list: &'a List,
    node: usize,
    off: usize,
    left: usize,
    /// The current node's entries, when it is compressed: decompressed for
    /// this walk only (dropped when the walk moves on).
    unpacked: Option<Bytes>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        if self.left == 0 {
            return None;
        }
        loop {
            let n = self.list.node(self.node)?;
            match &self.unpacked {
                None if self.off < n.buf.len() => {
                    let (e, next) = n.at(self.off);
                    self.off = next;
                    self.left -= 1;
                    return Some(e);
                }
                Some(raw) if self.off < raw.len() => {
                    let (e, next) = entry_at(raw, self.off);
                    self.off = next;
                    self.left -= 1;
                    return Some(e.owned_from(raw));
                }
                _ => {}
            }
            self.node += 1;
            self.off = 0;
            self.unpacked = self.list.node(self.node)?.unpacked();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// Back-to-front iterator over a list's elements.
pub struct RevIter<'a> {
    list: &'a List,
    node: usize,
    /// End (exclusive) of the next entry to return within `node`.
    end: usize,
    left: usize,
    /// The current node's entries, when it is compressed (see [`Iter`]).
    unpacked: Option<Bytes>,
}

impl<'a> Iterator for RevIter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        if self.left == 0 {
            return None;
        }
        loop {
            if self.end > 0 {
                let start;
                let e = match &self.unpacked {
                    None => {
                        let n = self.list.node(self.node)?;
                        start = entry_start_before(&n.buf, self.end);
                        n.at(start).0
                    }
                    Some(raw) => {
                        start = entry_start_before(raw, self.end);
                        entry_at(raw, start).0.owned_from(raw)
                    }
                };
                self.end = start;
                self.left -= 1;
                return Some(e);
            }
            self.node = self.node.checked_sub(1)?;
            let n = self.list.node(self.node)?;
            self.unpacked = n.unpacked();
            self.end = match &self.unpacked {
                Some(raw) => raw.len(),
                None => n.buf.len(),
            };
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for RevIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(l: &List) -> Vec<Vec<u8>> {
        l.iter().map(|e| e.to_vec()).collect()
    }

    fn items_rev(l: &List) -> Vec<Vec<u8>> {
        l.iter_rev().map(|e| e.to_vec()).collect()
    }

    fn s(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|x| x.as_bytes().to_vec()).collect()
    }

    /// Values covering every entry encoding.
    fn samples() -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = [
            "0",
            "1",
            "127",
            "128",
            "-1",
            "-4096",
            "4095",
            "4096",
            "-4097",
            "32767",
            "-32768",
            "32768",
            "8388607",
            "-8388608",
            "8388608",
            "2147483647",
            "-2147483648",
            "2147483648",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "007",
            "-0",
            "+1",
            "1.5",
            "",
            "a",
            " 1",
        ]
        .iter()
        .map(|x| x.as_bytes().to_vec())
        .collect();
        v.push(vec![b'x'; 63]);
        v.push(vec![b'y'; 64]);
        v.push(vec![b'z'; 4095]);
        v.push(vec![b'w'; 4096]);
        v.push(vec![0, 255, 13, 10]);
        v.push(vec![b'q'; 20000]);
        v
    }

    #[test]
    fn every_encoding_round_trips_both_ways() {
        let vals = samples();
        let l = List::from_items(&vals, 1_000_000);
        assert_eq!(items(&l), vals);
        let mut rev = vals.clone();
        rev.reverse();
        assert_eq!(items_rev(&l), rev);
        for (i, v) in vals.iter().enumerate() {
            assert_eq!(l.get(i).map(|e| e.to_vec()), Some(v.clone()));
            assert_eq!(l.get(i).map(|e| e.byte_len()), Some(v.len()));
        }
    }

    #[test]
    fn redis_entry_sizes() {
        let size = |b: &[u8]| Encoded::new(&Elem::from_bytes(b)).size();
        assert_eq!(size(b"5"), 2);
        assert_eq!(size(b"-5"), 3);
        assert_eq!(size(b"10000"), 4);
        assert_eq!(size(b"100000"), 5);
        assert_eq!(size(b"10000000000"), 10);
        assert_eq!(size(b"xxx"), 5);
        assert_eq!(size(&[b'a'; 63]), 65);
        assert_eq!(size(&[b'a'; 126]), 130); // 2 + 126 = 128 needs a 2-byte backlen
        assert_eq!(size(&[b'a'; 5000]), 5 + 5000 + 2);
    }

    #[test]
    fn backlen_matches_redis() {
        let mut b = [0u8; 5];
        assert_eq!(encode_backlen(127, &mut b), 1);
        assert_eq!(b[0], 127);
        assert_eq!(encode_backlen(128, &mut b), 2);
        assert_eq!(&b[..2], &[1, 128]);
        for l in [
            0,
            1,
            127,
            128,
            16382,
            16383,
            2_097_150,
            2_097_151,
            300_000_000,
        ] {
            let n = encode_backlen(l, &mut b);
            let mut buf = vec![0u8; l + n];
            buf[l..].copy_from_slice(&b[..n]);
            assert_eq!(entry_start_before(&buf, buf.len()), 0, "l={l}");
        }
    }

    #[test]
    fn push_pop_both_ends() {
        let mut l = List::new();
        l.push(End::Front, &["b", "a"], -2);
        l.push(End::Back, &["c", "10"], -2);
        assert_eq!(items(&l), s(&["a", "b", "c", "10"]));
        assert_eq!(l.pop(End::Front), Some(Bytes::from("a")));
        assert_eq!(l.pop(End::Back), Some(Bytes::from("10")));
        assert_eq!(l.len(), 2);
        assert_eq!(l.pop(End::Back), Some(Bytes::from("c")));
        assert_eq!(l.pop(End::Back), Some(Bytes::from("b")));
        assert_eq!(l.pop(End::Back), None);
        assert!(l.is_empty());
    }

    #[test]
    fn converts_to_quicklist_past_the_byte_limit() {
        let mut l = List::new();
        let v = vec![b'v'; 100];
        let mut n = 0;
        while l.encoding() == "listpack" {
            l.push(End::Back, &[&v], -2);
            n += 1;
            assert!(n < 200);
        }
        // 8 KB of ~103-byte entries: Redis converts at the 80th push.
        assert_eq!(n, 80);
        assert_eq!(l.len(), 80);
        for _ in 0..1000 {
            l.push(End::Front, &[&v], -2);
        }
        assert!(l.node_count() > 10);
        assert!(matches!(&l.repr, Repr::Quick(q) if q.nodes.iter().all(|n| n.bytes() <= 8192)));
        // Popping everything but one never converts back.
        while l.len() > 1 {
            l.pop(End::Front);
        }
        assert_eq!(l.encoding(), "quicklist");
    }

    #[test]
    fn positive_fill_counts_entries() {
        let mut l = List::new();
        for i in 0..5 {
            l.push(End::Back, &[i.to_string()], 5);
        }
        assert_eq!(l.encoding(), "listpack");
        l.push(End::Back, &["5"], 5);
        assert_eq!(l.encoding(), "quicklist");
        for i in 6..23 {
            l.push(End::Back, &[i.to_string()], 5);
        }
        assert_eq!(l.node_count(), 5);
        let want: Vec<Vec<u8>> = (0..23).map(|i| i.to_string().into_bytes()).collect();
        assert_eq!(items(&l), want);
        // A batch that would overflow converts before pushing.
        let mut m = List::new();
        m.push(End::Back, &["a", "b", "c"], 2);
        assert_eq!(m.encoding(), "quicklist");
        assert_eq!(items(&m), s(&["a", "b", "c"]));
        // fill 0 means one entry per node.
        let z = List::from_items(&["a", "b"], 0);
        assert_eq!(z.node_count(), 2);
    }

    #[test]
    fn huge_fill_values_do_not_panic() {
        for fill in [i64::MIN, -6, -1, 0, 1, i64::MAX] {
            let l = List::from_items(&samples(), fill);
            assert_eq!(items(&l), samples(), "fill {fill}");
        }
    }

    /// A model-checked random workout over both encodings.
    #[test]
    fn random_ops_match_a_vecdeque_model() {
        let mut seed = 0x1234_5678_9abc_def1u64;
        let mut rnd = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n.max(1) as u64) as usize
        };
        for (fill, depth) in [(-1, 0), (-2, 0), (3, 0), (16, 0), (-1, 1), (3, 2), (16, 1)] {
            let fill = ListLimits {
                fill,
                compress_depth: depth,
            };
            let mut l = List::new();
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            let mut most_compressed = 0;
            for step in 0..6000 {
                most_compressed = most_compressed.max(l.compressed_nodes());
                let v: Vec<u8> = match rnd(4) {
                    0 => (rnd(100_000) as i64 - 50_000).to_string().into_bytes(),
                    1 => vec![b'a' + rnd(26) as u8; rnd(40)],
                    2 => vec![b'b'; rnd(300)],
                    _ => rnd(10).to_string().into_bytes(),
                };
                match rnd(10) {
                    0 | 1 => {
                        l.push(End::Front, &[&v], fill);
                        model.push_front(v);
                    }
                    2 | 3 => {
                        l.push(End::Back, &[&v], fill);
                        model.push_back(v);
                    }
                    4 => {
                        assert_eq!(l.pop(End::Front).map(|b| b.to_vec()), model.pop_front());
                    }
                    5 => {
                        assert_eq!(l.pop(End::Back).map(|b| b.to_vec()), model.pop_back());
                    }
                    6 => {
                        let i = rnd(model.len() + 1);
                        l.insert(i, &v, fill);
                        model.insert(i, v);
                    }
                    7 if !model.is_empty() => {
                        let i = rnd(model.len());
                        assert!(l.set(i, &v, fill));
                        model[i] = v;
                    }
                    8 => {
                        let start = rnd(model.len() + 1);
                        let n = rnd(5);
                        l.remove_range(start, n);
                        let end = (start + n).min(model.len());
                        model.drain(start..end);
                    }
                    _ => {
                        let target = rnd(10).to_string().into_bytes();
                        let pos: Vec<usize> = model
                            .iter()
                            .enumerate()
                            .filter(|(_, x)| **x == target)
                            .map(|(i, _)| i)
                            .step_by(2)
                            .collect();
                        l.remove_positions(&pos);
                        for p in pos.iter().rev() {
                            model.remove(*p);
                        }
                    }
                }
                assert_eq!(l.len(), model.len(), "step {step}");
                if step % 97 == 0 {
                    let want: Vec<Vec<u8>> = model.iter().cloned().collect();
                    assert_eq!(items(&l), want, "step {step} {fill:?}");
                    let mut rev = want.clone();
                    rev.reverse();
                    assert_eq!(items_rev(&l), rev);
                    if !model.is_empty() {
                        let i = rnd(model.len());
                        assert_eq!(l.get(i).map(|e| e.to_vec()).as_ref(), model.get(i));
                        let tail: Vec<Vec<u8>> = l.iter_from(i).map(|e| e.to_vec()).collect();
                        assert_eq!(tail, want[i..].to_vec());
                        let head: Vec<Vec<u8>> = l.iter_rev_from(i).map(|e| e.to_vec()).collect();
                        let mut h = want[..=i].to_vec();
                        h.reverse();
                        assert_eq!(head, h);
                    }
                    if let Repr::Quick(q) = &l.repr {
                        assert!(q.nodes.iter().all(|n| n.count > 0));
                        assert_eq!(q.nodes.iter().map(|n| n.count()).sum::<usize>(), q.len);
                        let n = q.nodes.len();
                        let d = depth as usize;
                        for (i, node) in q.nodes.iter().enumerate() {
                            let inner = i >= d && i + d < n;
                            assert!(
                                inner || !node.is_compressed(),
                                "node {i} of {n} compressed within depth {d}"
                            );
                            assert!(depth > 0 || node.packed == 0);
                        }
                    }
                }
            }
            assert_eq!(most_compressed > 0, depth > 0, "{fill:?}");
        }
    }

    #[test]
    fn compress_depth_keeps_inner_nodes_compressed() {
        let v: Vec<String> = (0..5000)
            .map(|i| format!("user:{:06}:session:{}", i, "abcdef".repeat(4)))
            .collect();
        let plain = List::from_items(&v, -2);
        let packed = List::from_items(
            &v,
            ListLimits {
                fill: -2,
                compress_depth: 1,
            },
        );
        assert_eq!(plain, packed);
        assert_eq!(plain.compressed_nodes(), 0);
        let nodes = packed.node_count();
        assert!(nodes > 10);
        // Every node but the one at each end.
        assert_eq!(packed.compressed_nodes(), nodes - 2);
        assert!(
            packed.heap_size() * 2 < plain.heap_size(),
            "{} vs {}",
            packed.heap_size(),
            plain.heap_size()
        );
        // Reads decompress a copy; the stored nodes stay compressed.
        assert_eq!(
            packed.get(2500).map(|e| e.to_vec()),
            Some(v[2500].clone().into_bytes())
        );
        let back: Vec<Vec<u8>> = packed.iter_rev_from(4000).map(|e| e.to_vec()).collect();
        assert_eq!(back.len(), 4001);
        assert_eq!(back[0], v[4000].as_bytes());
        assert_eq!(packed.compressed_nodes(), nodes - 2);
        // Popping an end node exposes the next one, which is made raw.
        let mut p = packed.clone();
        let first = p.node(0).map_or(0, |n| n.count());
        for _ in 0..first {
            p.pop(End::Front);
        }
        assert_eq!(p.compressed_nodes(), nodes - 3);
        // Depth 2 on a list of 4 nodes or fewer compresses nothing.
        let short = List::from_items(
            &v[..200],
            ListLimits {
                fill: -2,
                compress_depth: 2,
            },
        );
        assert!(short.node_count() <= 4);
        assert_eq!(short.compressed_nodes(), 0);
    }

    #[test]
    fn incompressible_nodes_stay_raw() {
        // Distinct pseudo-random bytes: LZ4 cannot save 8 bytes on them.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let v: Vec<Vec<u8>> = (0..400)
            .map(|_| {
                (0..100)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        (x >> 24) as u8
                    })
                    .collect()
            })
            .collect();
        let l = List::from_items(
            &v,
            ListLimits {
                fill: -2,
                compress_depth: 1,
            },
        );
        assert!(l.node_count() > 3);
        assert_eq!(l.compressed_nodes(), 0);
        assert_eq!(l.iter().map(|e| e.to_vec()).collect::<Vec<_>>(), v);
    }

    #[test]
    fn small_lists_cost_a_few_bytes_per_element() {
        let vals: Vec<String> = (0..100).map(|i| format!("item:{i:03}")).collect();
        let l = List::from_items(&vals, -2);
        assert_eq!(l.encoding(), "listpack");
        // 8 data bytes + 2 bytes of header/backlen per element, plus slack.
        assert!(l.heap_size() <= 100 * 10 * 5 / 4 + 16, "{}", l.heap_size());
        assert!(std::mem::size_of::<List>() <= 32);
    }

    #[test]
    fn equality_ignores_layout_but_not_encoding() {
        let a = List::from_items(&["1", "x", "300"], -2);
        let mut b = List::new();
        b.push(End::Front, &["300", "x", "1"], -2);
        assert_eq!(a, b);
        let c = List::from_items(&["1", "x", "300"], 1);
        assert_ne!(a, c);
        assert_eq!(
            format!("{a:?}"),
            r#"List { encoding: "listpack", items: ["1", "x", "300"] }"#
        );
    }
}
