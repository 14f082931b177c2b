//! Redis 7.0's serialization format (RDB version 10) for DUMP, RESTORE
//! and FUNCTION DUMP/RESTORE payloads: a value's type byte and body, the
//! RDB version as two bytes little-endian, then a CRC64 of everything
//! before it (Jones polynomial, reflected, as Redis's crc64.c),
//! little-endian.
//!
//! [`decode_value`] reads every encoding redis-server 7.0 writes (and the
//! older ones it still loads): strings (raw, integer and LZF), lists
//! (linked, ziplist, quicklist of ziplists, quicklist of listpacks with
//! plain nodes), sets (plain, intset), hashes (plain, ziplist, listpack),
//! sorted sets (text and binary scores, ziplist, listpack) and streams
//! (listpacks, versions 1 and 2, with consumer groups). Values are rebuilt
//! through the engine's image traits ([`crate::keyspace::image`]) with
//! inserts under the store's encoding limits, as Redis converts a loaded
//! value that exceeds its limits; any engine works.
//!
//! [`encode_value`] writes simple encodings every Redis since 7.0 loads:
//! strings raw or integer-encoded, lists as quicklist-2 of listpacks, sets,
//! hashes and sorted sets in their plain forms, streams as listpacks v2.
//!
//! Payloads come from clients: every length is checked against the bytes
//! left before anything is allocated from it, every listpack, ziplist and
//! intset is validated in full (Redis's deep sanitization), duplicates and
//! empty collections are refused, and nothing recurses, so malformed input
//! gives [`Bad`], never a panic.

use crate::keyspace::image::{
    format_i64, Layout, StreamContent, StreamEntry, StreamFields, StreamGroup, StreamId,
    StreamNode, StreamPending,
};
use crate::keyspace::{
    canonical_i64, Collection, HashImage, Keyspace, ListImage, SetImage, StreamImage, Value,
    ZSetImage,
};
use crate::store::EncodingLimits;
use std::borrow::Cow;
use std::collections::BTreeSet;

/// The RDB version Redis 7.0 writes (and the newest it reads).
pub const RDB_VERSION: u16 = 10;

/// A malformed payload (RESTORE answers "Bad data format").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bad;

pub type Res<T> = Result<T, Bad>;

const T_STRING: u8 = 0;
const T_LIST: u8 = 1;
const T_SET: u8 = 2;
const T_ZSET: u8 = 3;
const T_HASH: u8 = 4;
const T_ZSET_2: u8 = 5;
const T_LIST_ZIPLIST: u8 = 10;
const T_SET_INTSET: u8 = 11;
const T_ZSET_ZIPLIST: u8 = 12;
const T_HASH_ZIPLIST: u8 = 13;
const T_LIST_QUICKLIST: u8 = 14;
const T_STREAM_LISTPACKS: u8 = 15;
const T_HASH_LISTPACK: u8 = 16;
const T_ZSET_LISTPACK: u8 = 17;
const T_LIST_QUICKLIST_2: u8 = 18;
const T_STREAM_LISTPACKS_2: u8 = 19;

/// Quicklist node containers.
const NODE_PLAIN: u64 = 1;
const NODE_PACKED: u64 = 2;

/// Stream entry flags.
const STREAM_DELETED: i64 = 1;
const STREAM_SAMEFIELDS: i64 = 2;

// ---------------------------------------------------------------------------
// CRC64, LZF
// ---------------------------------------------------------------------------

/// Redis's CRC64 (Jones polynomial, reflected, no final xor).
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            *slot = c;
        }
        t
    });
    data.iter().fold(crc, |c, &b| {
        table[((c ^ b as u64) & 0xff) as usize] ^ (c >> 8)
    })
}

/// LZF decompression (liblzf's format, used by RDB for long strings);
/// `None` if the input does not produce exactly `len` bytes.
pub fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    // The payload came from a client: never trust `len` for allocation
    // beyond what the input could expand to (at most 264 bytes per 2).
    if len > input.len().saturating_mul(132).saturating_add(64) {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            out.extend_from_slice(input.get(i..i + run)?);
            i += run;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *input.get(i)? as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
            i += 1;
            let start = out.len().checked_sub(back)?;
            for k in 0..n + 2 {
                let b = out[start + k];
                out.push(b);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

// ---------------------------------------------------------------------------
// Framing and primitives
// ---------------------------------------------------------------------------

/// Appends the RDB version and the CRC64 of everything in `out`.
pub fn seal(out: &mut Vec<u8>) {
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Redis's verifyDumpPayload: the body before the trailer, or None when
/// the payload is too short, from a newer RDB version, or its checksum is
/// wrong.
pub fn verify(payload: &[u8]) -> Option<&[u8]> {
    let body_len = payload.len().checked_sub(10)?;
    let version = u16::from_le_bytes([payload[body_len], payload[body_len + 1]]);
    if version > RDB_VERSION {
        return None;
    }
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&payload[body_len + 2..]);
    (crc64(0, &payload[..body_len + 2]) == u64::from_le_bytes(crc)).then(|| &payload[..body_len])
}

/// An RDB length.
pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// An RDB string, length-prefixed.
pub fn put_string(out: &mut Vec<u8>, b: &[u8]) {
    put_len(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// An RDB string holding an integer: the 1/2/4-byte integer encodings
/// when it fits 32 bits (as Redis writes them), decimal text otherwise.
fn put_int_string(out: &mut Vec<u8>, v: i64) {
    if let Ok(x) = i8::try_from(v) {
        out.push(0xc0);
        out.push(x as u8);
    } else if let Ok(x) = i16::try_from(v) {
        out.push(0xc1);
        out.extend_from_slice(&x.to_le_bytes());
    } else if let Ok(x) = i32::try_from(v) {
        out.push(0xc2);
        out.extend_from_slice(&x.to_le_bytes());
    } else {
        put_string(out, format_i64(v, &mut [0; 20]));
    }
}

/// A cursor over payload bytes; every read is bounds-checked.
pub struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b }
    }

    pub fn is_empty(&self) -> bool {
        self.b.is_empty()
    }

    pub fn remaining(&self) -> usize {
        self.b.len()
    }

    pub fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        if self.b.len() < n {
            return Err(Bad);
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }

    pub fn u8(&mut self) -> Res<u8> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Res<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// The rest of a length whose first byte is `first`; Err for the
    /// special string encodings (first two bits 11) and unknown forms.
    fn len_from(&mut self, first: u8) -> Res<u64> {
        Ok(match first >> 6 {
            0 => (first & 0x3f) as u64,
            1 => (((first & 0x3f) as u64) << 8) | self.u8()? as u64,
            _ if first == 0x80 => u32::from_be_bytes(self.array()?) as u64,
            _ if first == 0x81 => u64::from_be_bytes(self.array()?),
            _ => return Err(Bad),
        })
    }

    /// An RDB length.
    pub fn len(&mut self) -> Res<u64> {
        let first = self.u8()?;
        self.len_from(first)
    }

    /// A count of items that take at least `min` bytes each: refused when
    /// the rest of the payload cannot hold them, so it may size buffers.
    fn count(&mut self, min: usize) -> Res<usize> {
        let n = self.len()?;
        if n > (self.remaining() / min.max(1)) as u64 {
            return Err(Bad);
        }
        Ok(n as usize)
    }

    /// An RDB string in any of its encodings (integers come back as
    /// their decimal text, LZF decompressed).
    pub fn string(&mut self) -> Res<Cow<'a, [u8]>> {
        let first = self.u8()?;
        if first >> 6 != 3 {
            let n = usize::try_from(self.len_from(first)?).map_err(|_| Bad)?;
            return Ok(Cow::Borrowed(self.take(n)?));
        }
        let int = match first & 0x3f {
            0 => self.u8()? as i8 as i64,
            1 => i16::from_le_bytes(self.array()?) as i64,
            2 => i32::from_le_bytes(self.array()?) as i64,
            3 => {
                let clen = usize::try_from(self.len()?).map_err(|_| Bad)?;
                let len = usize::try_from(self.len()?).map_err(|_| Bad)?;
                let compressed = self.take(clen)?;
                return lzf_decompress(compressed, len).map(Cow::Owned).ok_or(Bad);
            }
            _ => return Err(Bad),
        };
        Ok(Cow::Owned(format_i64(int, &mut [0; 20]).to_vec()))
    }

    fn u64_le(&mut self) -> Res<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A binary double (ZSET_2); NaN refused.
    fn f64_bin(&mut self) -> Res<f64> {
        let f = f64::from_bits(self.u64_le()?);
        if f.is_nan() {
            return Err(Bad);
        }
        Ok(f)
    }

    /// A text double (the old ZSET type): length byte, 253 NaN, 254 +inf,
    /// 255 -inf.
    fn f64_text(&mut self) -> Res<f64> {
        match self.u8()? {
            253 => Err(Bad),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => parse_score(self.take(n as usize)?),
        }
    }

    /// A stream id as 16 raw bytes, big-endian.
    fn raw_id(&mut self) -> Res<StreamId> {
        raw_id(self.take(16)?)
    }

    /// A stream id as two lengths.
    fn len_id(&mut self) -> Res<StreamId> {
        Ok(StreamId::new(self.len()?, self.len()?))
    }
}

fn raw_id(b: &[u8]) -> Res<StreamId> {
    if b.len() != 16 {
        return Err(Bad);
    }
    let mut ms = [0u8; 8];
    let mut seq = [0u8; 8];
    ms.copy_from_slice(&b[..8]);
    seq.copy_from_slice(&b[8..]);
    Ok(StreamId::new(
        u64::from_be_bytes(ms),
        u64::from_be_bytes(seq),
    ))
}

fn put_raw_id(out: &mut Vec<u8>, id: StreamId) {
    out.extend_from_slice(&id.ms.to_be_bytes());
    out.extend_from_slice(&id.seq.to_be_bytes());
}

/// A score written as text (ziplists, listpacks, the old ZSET type).
fn parse_score(b: &[u8]) -> Res<f64> {
    let s = std::str::from_utf8(b).map_err(|_| Bad)?;
    let f: f64 = match s {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ => s.parse().map_err(|_| Bad)?,
    };
    if f.is_nan() {
        return Err(Bad);
    }
    Ok(f)
}

// ---------------------------------------------------------------------------
// Packed containers: listpack, ziplist, intset
// ---------------------------------------------------------------------------

/// An element of a listpack or ziplist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl<'a> Item<'a> {
    fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Item::Int(i) => f(format_i64(i, &mut [0; 20])),
            Item::Str(s) => f(s),
        }
    }

    fn to_cow(self) -> Cow<'a, [u8]> {
        match self {
            Item::Int(i) => Cow::Owned(format_i64(i, &mut [0; 20]).to_vec()),
            Item::Str(s) => Cow::Borrowed(s),
        }
    }

    /// The element as an integer (an integer written as text counts).
    fn int(self) -> Res<i64> {
        match self {
            Item::Int(i) => Ok(i),
            Item::Str(s) => canonical_i64(s).ok_or(Bad),
        }
    }

    fn score(self) -> Res<f64> {
        match self {
            Item::Int(i) => Ok(i as f64),
            Item::Str(s) => parse_score(s),
        }
    }
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |acc, &x| (acc << 8) | x as u64)
}

/// Sign-extends the low `bits` bits of `v`.
fn sign_extend(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// A listpack's back-length field for an entry of `l` bytes.
fn lp_backlen(l: usize, buf: &mut [u8; 5]) -> &[u8] {
    let l = l as u64;
    let n = match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    };
    for (i, slot) in buf[..n].iter_mut().enumerate() {
        let shift = 7 * (n - 1 - i);
        let mut b = ((l >> shift) & 127) as u8;
        if i > 0 {
            b |= 128;
        }
        *slot = b;
    }
    // The first byte holds the high bits unmasked (Redis: l >> 7*(n-1)).
    buf[0] = (l >> (7 * (n - 1))) as u8;
    &buf[..n]
}

/// Every element of a listpack, validated in full: header total and
/// count, each entry's encoding, bounds and back-length, the terminator.
pub fn listpack(lp: &[u8]) -> Res<Vec<Item<'_>>> {
    if lp.len() < 7 || le(&lp[..4]) != lp.len() as u64 || lp[lp.len() - 1] != 0xff {
        return Err(Bad);
    }
    let declared = le(&lp[4..6]) as usize;
    let end = lp.len() - 1;
    let mut items = Vec::new();
    let mut p = 6;
    while p < end {
        let b0 = lp[p];
        let byte = |i: usize| lp.get(p + i).copied().ok_or(Bad);
        let (header, item_len, item): (usize, usize, Option<i64>) = match b0 {
            0x00..=0x7f => (1, 0, Some(b0 as i64)),
            0x80..=0xbf => (1, (b0 & 0x3f) as usize, None),
            0xc0..=0xdf => {
                let v = (((b0 & 0x1f) as u64) << 8) | byte(1)? as u64;
                (2, 0, Some(sign_extend(v, 13)))
            }
            0xe0..=0xef => (2, (((b0 & 0x0f) as usize) << 8) | byte(1)? as usize, None),
            0xf0 => {
                let n = le(lp.get(p + 1..p + 5).ok_or(Bad)?);
                (5, usize::try_from(n).map_err(|_| Bad)?, None)
            }
            0xf1..=0xf4 => {
                let w = [2usize, 3, 4, 8][(b0 - 0xf1) as usize];
                let v = le(lp.get(p + 1..p + 1 + w).ok_or(Bad)?);
                (1 + w, 0, Some(sign_extend(v, 8 * w as u32)))
            }
            _ => return Err(Bad),
        };
        let data_end = (p + header).checked_add(item_len).ok_or(Bad)?;
        if data_end > end {
            return Err(Bad);
        }
        items.push(match item {
            Some(i) => Item::Int(i),
            None => Item::Str(&lp[p + header..data_end]),
        });
        let mut buf = [0u8; 5];
        let back = lp_backlen(data_end - p, &mut buf);
        if lp.get(data_end..data_end + back.len()) != Some(back) || data_end + back.len() > end {
            return Err(Bad);
        }
        p = data_end + back.len();
    }
    if declared != 0xffff && declared != items.len() {
        return Err(Bad);
    }
    Ok(items)
}

/// Builds a listpack.
#[derive(Default)]
struct LpWriter {
    buf: Vec<u8>,
    count: usize,
}

impl LpWriter {
    fn new() -> LpWriter {
        LpWriter {
            buf: vec![0; 6],
            count: 0,
        }
    }

    fn size(&self) -> usize {
        self.buf.len() + 1
    }

    fn entry(&mut self, start: usize) {
        let mut b = [0u8; 5];
        let back = lp_backlen(self.buf.len() - start, &mut b).to_vec();
        self.buf.extend_from_slice(&back);
        self.count += 1;
    }

    fn int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1fff;
            self.buf.push(0xc0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else {
            let (tag, w) = if i16::try_from(v).is_ok() {
                (0xf1, 2)
            } else if (-(1 << 23)..(1 << 23)).contains(&v) {
                (0xf2, 3)
            } else if i32::try_from(v).is_ok() {
                (0xf3, 4)
            } else {
                (0xf4, 8)
            };
            self.buf.push(tag);
            self.buf.extend_from_slice(&v.to_le_bytes()[..w]);
        }
        self.entry(start);
    }

    /// A string element; canonical integers go in an integer encoding,
    /// as Redis's lpAppend stores them.
    fn str(&mut self, s: &[u8]) {
        if let Some(i) = canonical_i64(s) {
            return self.int(i);
        }
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.push(0xe0 | (n >> 8) as u8);
            self.buf.push(n as u8);
        } else {
            self.buf.push(0xf0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.entry(start);
    }

    fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = self.count.min(0xffff) as u16;
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Every element of a ziplist (RDB before version 10), validated in full.
pub fn ziplist(zl: &[u8]) -> Res<Vec<Item<'_>>> {
    if zl.len() < 11 || le(&zl[..4]) != zl.len() as u64 || zl[zl.len() - 1] != 0xff {
        return Err(Bad);
    }
    let tail = le(&zl[4..8]) as usize;
    let declared = le(&zl[8..10]) as usize;
    let end = zl.len() - 1;
    let mut items = Vec::new();
    let mut p = 10;
    let mut prev_len = 0usize;
    let mut last_start = 10;
    while p < end {
        let at = |i: usize| zl.get(p + i).copied().ok_or(Bad);
        let (prev, mut q) = match at(0)? {
            0xfe => (le(zl.get(p + 1..p + 5).ok_or(Bad)?) as usize, p + 5),
            0xff => return Err(Bad),
            b => (b as usize, p + 1),
        };
        if prev != prev_len {
            return Err(Bad);
        }
        let e = zl.get(q).copied().ok_or(Bad)?;
        let (header, data_len, int_width): (usize, usize, usize) = match e >> 6 {
            0 => (1, (e & 0x3f) as usize, 0),
            1 => (2, (((e & 0x3f) as usize) << 8) | at(q - p + 1)? as usize, 0),
            2 if e == 0x80 => {
                let b = zl.get(q + 1..q + 5).ok_or(Bad)?;
                (5, u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize, 0)
            }
            2 => return Err(Bad),
            _ => match e {
                0xc0 => (1, 2, 2),
                0xd0 => (1, 4, 4),
                0xe0 => (1, 8, 8),
                0xf0 => (1, 3, 3),
                0xfe => (1, 1, 1),
                0xf1..=0xfd => (1, 0, 0),
                _ => return Err(Bad),
            },
        };
        q += header;
        let data_end = q.checked_add(data_len).ok_or(Bad)?;
        if data_end > end {
            return Err(Bad);
        }
        let data = &zl[q..data_end];
        items.push(if e >> 6 != 3 {
            Item::Str(data)
        } else if int_width == 0 {
            Item::Int((e & 0x0f) as i64 - 1)
        } else {
            Item::Int(sign_extend(le(data), 8 * int_width as u32))
        });
        last_start = p;
        prev_len = data_end - p;
        p = data_end;
    }
    if tail != last_start || (declared != 0xffff && declared != items.len()) {
        return Err(Bad);
    }
    Ok(items)
}

/// An intset's members: width 2, 4 or 8 bytes, strictly ascending.
/// Returns the width in bits with the members.
fn intset(b: &[u8]) -> Res<(u8, Vec<i64>)> {
    if b.len() < 8 {
        return Err(Bad);
    }
    let width = le(&b[..4]) as usize;
    let n = le(&b[4..8]) as usize;
    if !matches!(width, 2 | 4 | 8) || n.checked_mul(width) != Some(b.len() - 8) || n == 0 {
        return Err(Bad);
    }
    let members: Vec<i64> = b[8..]
        .chunks_exact(width)
        .map(|c| sign_extend(le(c), 8 * width as u32))
        .collect();
    if members.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Bad);
    }
    Ok(((width * 8) as u8, members))
}

// ---------------------------------------------------------------------------
// Decoding values
// ---------------------------------------------------------------------------

/// The value of a verified payload's body (see [`verify`]): its type byte
/// and encoding, rebuilt under `limits`. The body must end with the value.
pub fn decode_value<K: Keyspace>(body: &[u8], limits: &EncodingLimits) -> Res<Value<K>> {
    let mut r = Reader::new(body);
    let t = r.u8()?;
    let value = read_value(&mut r, t, limits)?;
    if !r.is_empty() {
        return Err(Bad);
    }
    Ok(value)
}

/// Reads a value of RDB type `t` (its type byte already read) from `r`,
/// leaving `r` after it: how an RDB file's records are read.
pub fn read_value<K: Keyspace>(
    r: &mut Reader<'_>,
    t: u8,
    limits: &EncodingLimits,
) -> Res<Value<K>> {
    let r = &mut *r;
    let value = match t {
        T_STRING => Value::from_bytes(&r.string()?),
        T_LIST | T_LIST_ZIPLIST | T_LIST_QUICKLIST | T_LIST_QUICKLIST_2 => {
            Value::List(Box::new(decode_list(r, t, limits)?))
        }
        T_SET => {
            let n = r.count(1)?;
            // A set too large for the compact layouts starts as a table,
            // sized up front; smaller ones start as Redis creates sets
            // (an intset) and convert as SADD would.
            let layout = if n > limits
                .set_max_intset_entries
                .max(limits.set_max_listpack_entries)
            {
                Layout::Hashtable
            } else {
                Layout::Intset(16)
            };
            let mut s = K::Set::with_layout(layout, n).ok_or(Bad)?;
            for _ in 0..n {
                if !s.load_member(&r.string()?, limits) {
                    return Err(Bad);
                }
            }
            nonempty(s.len())?;
            Value::Set(Box::new(s))
        }
        T_SET_INTSET => {
            let blob = r.string()?;
            let (width, members) = intset(&blob)?;
            let mut s = K::Set::with_layout(Layout::Intset(width), members.len()).ok_or(Bad)?;
            for m in members {
                s.load_member(format_i64(m, &mut [0; 20]), limits);
            }
            Value::Set(Box::new(s))
        }
        T_HASH => {
            let n = r.count(2)?;
            let layout = if n > limits.hash_max_listpack_entries {
                Layout::Hashtable
            } else {
                Layout::Listpack
            };
            let mut h = K::Hash::with_layout(layout, n).ok_or(Bad)?;
            for _ in 0..n {
                let f = r.string()?;
                let v = r.string()?;
                if !h.load_pair(&f, &v, limits) {
                    return Err(Bad);
                }
            }
            nonempty(h.len())?;
            Value::Hash(Box::new(h))
        }
        t @ (T_HASH_ZIPLIST | T_HASH_LISTPACK) => {
            let blob = r.string()?;
            let items = if t == T_HASH_LISTPACK {
                listpack(&blob)?
            } else {
                ziplist(&blob)?
            };
            if items.is_empty() || items.len() % 2 != 0 {
                return Err(Bad);
            }
            let mut h = K::Hash::with_layout(Layout::Listpack, items.len() / 2).ok_or(Bad)?;
            for pair in items.chunks_exact(2) {
                let added =
                    pair[0].with_bytes(|f| pair[1].with_bytes(|v| h.load_pair(f, v, limits)));
                if !added {
                    return Err(Bad);
                }
            }
            Value::Hash(Box::new(h))
        }
        t @ (T_ZSET | T_ZSET_2) => {
            let n = r.count(if t == T_ZSET_2 { 9 } else { 2 })?;
            let mut z = K::ZSet::with_layout(Layout::Listpack).ok_or(Bad)?;
            for _ in 0..n {
                let m = r.string()?;
                let score = if t == T_ZSET_2 {
                    r.f64_bin()?
                } else {
                    r.f64_text()?
                };
                if !z.load_pair(&m, score, limits) {
                    return Err(Bad);
                }
            }
            nonempty(z.len())?;
            Value::ZSet(Box::new(z))
        }
        t @ (T_ZSET_ZIPLIST | T_ZSET_LISTPACK) => {
            let blob = r.string()?;
            let items = if t == T_ZSET_LISTPACK {
                listpack(&blob)?
            } else {
                ziplist(&blob)?
            };
            if items.is_empty() || items.len() % 2 != 0 {
                return Err(Bad);
            }
            let mut z = K::ZSet::with_layout(Layout::Listpack).ok_or(Bad)?;
            for pair in items.chunks_exact(2) {
                let score = pair[1].score()?;
                if !pair[0].with_bytes(|m| z.load_pair(m, score, limits)) {
                    return Err(Bad);
                }
            }
            Value::ZSet(Box::new(z))
        }
        t @ (T_STREAM_LISTPACKS | T_STREAM_LISTPACKS_2) => {
            let content = decode_stream(r, t == T_STREAM_LISTPACKS_2)?;
            Value::Stream(Box::new(K::Stream::from_content(&content).ok_or(Bad)?))
        }
        _ => return Err(Bad),
    };
    Ok(value)
}

fn nonempty(n: usize) -> Res<()> {
    if n == 0 {
        Err(Bad)
    } else {
        Ok(())
    }
}

/// A list built as RPUSHes of its elements build it under `limits`.
fn decode_list<L: ListImage + Collection>(
    r: &mut Reader<'_>,
    t: u8,
    limits: &EncodingLimits,
) -> Res<L> {
    let mut l = L::empty();
    let push_items = |l: &mut L, items: &[Item<'_>]| {
        for it in items {
            it.with_bytes(|b| l.push_back(b, limits));
        }
    };
    match t {
        T_LIST => {
            let n = r.count(1)?;
            for _ in 0..n {
                let s = r.string()?;
                l.push_back(&s, limits);
            }
        }
        T_LIST_ZIPLIST => {
            let blob = r.string()?;
            push_items(&mut l, &ziplist(&blob)?);
        }
        T_LIST_QUICKLIST => {
            let n = r.count(1)?;
            for _ in 0..n {
                let blob = r.string()?;
                push_items(&mut l, &ziplist(&blob)?);
            }
        }
        _ => {
            let n = r.count(2)?;
            for _ in 0..n {
                match r.len()? {
                    NODE_PLAIN => {
                        let s = r.string()?;
                        l.push_back(&s, limits);
                    }
                    NODE_PACKED => {
                        let blob = r.string()?;
                        push_items(&mut l, &listpack(&blob)?);
                    }
                    _ => return Err(Bad),
                }
            }
        }
    }
    nonempty(l.len())?;
    Ok(l)
}

fn owned(b: Cow<'_, [u8]>) -> Cow<'static, [u8]> {
    Cow::Owned(b.into_owned())
}

/// A stream's content, checked as Redis's deep sanitization checks it,
/// with its nodes as the payload has them (their layout decides where
/// XADD appends and what approximate trimming removes); grouped as XADD
/// appends when they are not in order.
fn decode_stream(r: &mut Reader<'_>, v2: bool) -> Res<StreamContent<'static>> {
    let mut st = StreamContent::default();
    let mut layout: Vec<StreamNode<'static>> = Vec::new();
    let mut in_order = true;
    // Listpack key (16 bytes + length) and a listpack of at least a
    // master entry: 30 bytes at the very least.
    let nodes = r.count(30)?;
    for _ in 0..nodes {
        let key = r.string()?;
        let master = raw_id(&key)?;
        let blob = r.string()?;
        let items = listpack(&blob)?;
        let mut it = items.iter().copied();
        let mut next = || it.next().ok_or(Bad);
        let valid = next()?.int()?;
        let deleted = next()?.int()?;
        let nfields = next()?.int()?;
        if valid < 0 || deleted < 0 || nfields < 0 || valid + deleted == 0 {
            return Err(Bad);
        }
        let nfields = nfields as usize;
        if nfields > items.len() {
            return Err(Bad);
        }
        let mut master_fields = Vec::with_capacity(nfields);
        for _ in 0..nfields {
            master_fields.push(next()?);
        }
        let before = st.entries.len();
        if next()?.int()? != 0 {
            return Err(Bad);
        }
        let (mut seen_valid, mut seen_deleted) = (0i64, 0i64);
        for _ in 0..valid.checked_add(deleted).ok_or(Bad)? {
            let flags = next()?.int()?;
            let ms = master.ms.wrapping_add(next()?.int()? as u64);
            let seq = master.seq.wrapping_add(next()?.int()? as u64);
            let id = StreamId::new(ms, seq);
            let mut fields: StreamFields<'static> = Vec::new();
            let lp_count = if flags & STREAM_SAMEFIELDS != 0 {
                for f in &master_fields {
                    fields.push((owned(f.to_cow()), owned(next()?.to_cow())));
                }
                nfields as i64 + 3
            } else {
                let n = next()?.int()?;
                if n < 0 || n as usize > items.len() {
                    return Err(Bad);
                }
                for _ in 0..n {
                    let f = owned(next()?.to_cow());
                    fields.push((f, owned(next()?.to_cow())));
                }
                2 * n + 4
            };
            if next()?.int()? != lp_count {
                return Err(Bad);
            }
            if flags & STREAM_DELETED != 0 {
                seen_deleted += 1;
                continue;
            }
            seen_valid += 1;
            if st.entries.last().is_some_and(|p| p.id >= id) {
                return Err(Bad);
            }
            st.entries.push(StreamEntry { id, fields });
        }
        if next().is_ok() || seen_valid != valid || seen_deleted != deleted {
            return Err(Bad);
        }
        // A node after the one before it, its entries at or after its
        // master id; a node without live entries is dropped (Redis
        // removes such a node).
        let mine = &st.entries[before..];
        let after_previous = layout.last().is_none_or(|p| p.key < master)
            && before
                .checked_sub(1)
                .is_none_or(|i| st.entries[i].id < master);
        in_order &= after_previous && mine.first().is_none_or(|e| e.id >= master);
        if valid > 0 {
            layout.push(StreamNode {
                key: master,
                master_fields: master_fields.iter().map(|f| owned(f.to_cow())).collect(),
                count: u32::try_from(valid).map_err(|_| Bad)?,
                deleted: u32::try_from(deleted).map_err(|_| Bad)?,
            });
        }
    }
    if in_order {
        st.nodes = Some(layout);
    }
    let length = r.len()?;
    st.last_id = r.len_id()?;
    let last_appended = st.entries.last().map(|e| e.id);
    if length != st.entries.len() as u64 || last_appended.is_some_and(|id| id > st.last_id) {
        return Err(Bad);
    }
    if v2 {
        let _first_id = r.len_id()?;
        st.max_deleted_id = r.len_id()?;
        st.entries_added = r.len()?;
    } else {
        st.entries_added = length;
    }
    // Name, last id, entries read, two counts: 5 bytes at least.
    let groups = r.count(5)?;
    let mut names = BTreeSet::new();
    for _ in 0..groups {
        let name = owned(r.string()?);
        let last_id = r.len_id()?;
        let entries_read = if v2 {
            match r.len()? {
                u64::MAX => None,
                n => Some(n),
            }
        } else {
            estimate_entries_read(&st, last_id)
        };
        let g = decode_group(r, name, last_id, entries_read)?;
        if !names.insert(g.name.clone()) {
            return Err(Bad);
        }
        st.groups.push(g);
    }
    // Groups, consumers and pending entries in name and id order, as a
    // stream gives them out.
    st.groups.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(st)
}

/// A group's pending entries and consumers: every pending entry is owned
/// by exactly one consumer.
fn decode_group(
    r: &mut Reader<'_>,
    name: Cow<'static, [u8]>,
    last_id: StreamId,
    entries_read: Option<u64>,
) -> Res<StreamGroup<'static>> {
    // Delivery time and count by id; the owner comes with the consumers.
    let mut pel = std::collections::BTreeMap::new();
    let n = r.count(16 + 8 + 1)?;
    for _ in 0..n {
        let id = r.raw_id()?;
        let delivery = (r.u64_le()?, r.len()?);
        if pel.insert(id, (delivery, None)).is_some() {
            return Err(Bad);
        }
    }
    let mut consumers = Vec::new();
    let mut consumer_names = BTreeSet::new();
    let n = r.count(1 + 8 + 1)?;
    for _ in 0..n {
        let cname = owned(r.string()?);
        let seen_time = r.u64_le()?;
        let owned_ids = r.count(16)?;
        for _ in 0..owned_ids {
            let id = r.raw_id()?;
            let (_, owner) = pel.get_mut(&id).ok_or(Bad)?;
            if owner.is_some() {
                return Err(Bad);
            }
            *owner = Some(cname.clone());
        }
        if !consumer_names.insert(cname.clone()) {
            return Err(Bad);
        }
        consumers.push((cname, seen_time));
    }
    consumers.sort_by(|a, b| a.0.cmp(&b.0));
    let mut pending = Vec::with_capacity(pel.len());
    for (id, ((delivery_time, delivery_count), owner)) in pel {
        pending.push(StreamPending {
            id,
            consumer: owner.ok_or(Bad)?,
            delivery_time,
            delivery_count,
        });
    }
    Ok(StreamGroup {
        name,
        last_id,
        entries_read,
        consumers,
        pending,
    })
}

/// Redis's streamEstimateDistanceFromFirstEverEntry: the entries-read
/// counter of a group whose last delivered id is `id`, when knowable
/// (RDB 9 payloads do not carry it).
fn estimate_entries_read(st: &StreamContent<'_>, id: StreamId) -> Option<u64> {
    let len = st.entries.len() as u64;
    if st.entries_added == 0 {
        return Some(0);
    }
    if len == 0 && id <= st.last_id {
        return Some(st.entries_added);
    }
    if id == st.last_id {
        return Some(st.entries_added);
    }
    if id > st.last_id {
        return None;
    }
    let first = st.entries.first().map(|e| e.id).unwrap_or_default();
    if st.max_deleted_id.is_zero() || st.max_deleted_id < first {
        if id < first {
            return st.entries_added.checked_sub(len);
        }
        if id == first {
            return st.entries_added.checked_sub(len)?.checked_add(1);
        }
    }
    None
}

// ---------------------------------------------------------------------------
// Encoding values
// ---------------------------------------------------------------------------

/// Listpack bytes at which DUMP starts another quicklist node (Redis's
/// default list-max-listpack-size -2).
const LIST_NODE_BYTES: usize = 8192;
/// Entries per stream listpack for content without nodes of its own
/// (Redis's default stream-node-max-entries).
const STREAM_NODE_ENTRIES: usize = kvasir_engine_memory::stream::NODE_MAX_ENTRIES as usize;

/// The DUMP payload of `v`: type, body, version and checksum.
pub fn dump<K: Keyspace>(v: &Value<K>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(v, &mut out);
    seal(&mut out);
    out
}

/// Appends `v`'s type byte and body.
pub fn encode_value<K: Keyspace>(v: &Value<K>, out: &mut Vec<u8>) {
    match v {
        Value::Str(s) | Value::Raw(s) => {
            out.push(T_STRING);
            match canonical_i64(s) {
                Some(i) if s.len() <= 11 => put_int_string(out, i),
                _ => put_string(out, s),
            }
        }
        Value::Int(i) => {
            out.push(T_STRING);
            put_int_string(out, *i);
        }
        Value::List(l) => {
            out.push(T_LIST_QUICKLIST_2);
            encode_list(&**l, out);
        }
        Value::Set(s) => {
            out.push(T_SET);
            put_len(out, s.len() as u64);
            s.for_each_member(|m| put_string(out, m));
        }
        Value::Hash(h) => {
            out.push(T_HASH);
            put_len(out, h.len() as u64);
            h.for_each_pair(|f, v| {
                put_string(out, f);
                put_string(out, v);
            });
        }
        Value::ZSet(z) => {
            out.push(T_ZSET_2);
            put_len(out, z.len() as u64);
            z.for_each_by_rank(|m, score| {
                put_string(out, m);
                out.extend_from_slice(&score.to_bits().to_le_bytes());
            });
        }
        Value::Stream(st) => {
            out.push(T_STREAM_LISTPACKS_2);
            encode_stream(&st.content(), out);
        }
    }
}

/// A quicklist of listpack nodes of about [`LIST_NODE_BYTES`] each.
fn encode_list(l: &impl ListImage, out: &mut Vec<u8>) {
    let mut nodes = Vec::new();
    let mut lp = LpWriter::new();
    l.for_each_elem(|e| {
        if lp.count > 0 && lp.size() + e.len() > LIST_NODE_BYTES {
            nodes.push(std::mem::replace(&mut lp, LpWriter::new()).finish());
        }
        // Canonical integers go in an integer encoding, as Redis stores
        // them.
        lp.str(e);
    });
    if lp.count > 0 {
        nodes.push(lp.finish());
    }
    put_len(out, nodes.len() as u64);
    for n in nodes {
        put_len(out, NODE_PACKED);
        put_string(out, &n);
    }
}

fn encode_stream(st: &StreamContent<'_>, out: &mut Vec<u8>) {
    // The stream's own nodes, as Redis writes its listpacks (their layout
    // decides where XADD appends and what approximate trimming removes);
    // chunks of entries for content without them.
    let regrouped: Vec<StreamNode<'_>>;
    let whole = |nodes: &[StreamNode<'_>]| {
        nodes.iter().all(|n| n.count > 0)
            && nodes.iter().map(|n| n.count as usize).sum::<usize>() == st.entries.len()
    };
    let nodes = match &st.nodes {
        Some(nodes) if whole(nodes) => nodes.as_slice(),
        _ => {
            regrouped = st
                .entries
                .chunks(STREAM_NODE_ENTRIES)
                .map(|chunk| StreamNode {
                    key: chunk[0].id,
                    master_fields: chunk[0].fields.iter().map(|(f, _)| f.clone()).collect(),
                    count: chunk.len() as u32,
                    deleted: 0,
                })
                .collect();
            &regrouped
        }
    };
    put_len(out, nodes.len() as u64);
    let mut rest = st.entries.as_slice();
    for node in nodes {
        let (chunk, later) = rest.split_at((node.count as usize).min(rest.len()));
        rest = later;
        let master = node.key;
        let master_fields = &node.master_fields;
        let mut lp = LpWriter::new();
        lp.int(chunk.len() as i64);
        lp.int(i64::from(node.deleted));
        lp.int(master_fields.len() as i64);
        for f in master_fields {
            lp.str(f);
        }
        lp.int(0);
        // Entries XDEL marked deleted count towards the node's size but
        // their content is gone: written as deleted entries with the
        // master id and empty values, which every reader skips.
        for _ in 0..node.deleted {
            lp.int(STREAM_DELETED | STREAM_SAMEFIELDS);
            lp.int(0);
            lp.int(0);
            for _ in master_fields {
                lp.str(b"");
            }
            lp.int(master_fields.len() as i64 + 3);
        }
        for e in chunk {
            let same = e.fields.len() == master_fields.len()
                && e.fields.iter().zip(master_fields).all(|(a, b)| a.0 == *b);
            lp.int(if same { STREAM_SAMEFIELDS } else { 0 });
            lp.int(e.id.ms.wrapping_sub(master.ms) as i64);
            lp.int(e.id.seq.wrapping_sub(master.seq) as i64);
            if same {
                for (_, v) in &e.fields {
                    lp.str(v);
                }
                lp.int(e.fields.len() as i64 + 3);
            } else {
                lp.int(e.fields.len() as i64);
                for (f, v) in &e.fields {
                    lp.str(f);
                    lp.str(v);
                }
                lp.int(2 * e.fields.len() as i64 + 4);
            }
        }
        let mut key = Vec::with_capacity(16);
        put_raw_id(&mut key, master);
        put_string(out, &key);
        put_string(out, &lp.finish());
    }
    put_len(out, st.entries.len() as u64);
    let put_id = |out: &mut Vec<u8>, id: StreamId| {
        put_len(out, id.ms);
        put_len(out, id.seq);
    };
    put_id(out, st.last_id);
    put_id(out, st.entries.first().map(|e| e.id).unwrap_or_default());
    put_id(out, st.max_deleted_id);
    put_len(out, st.entries_added);
    put_len(out, st.groups.len() as u64);
    for g in &st.groups {
        put_string(out, &g.name);
        put_id(out, g.last_id);
        put_len(out, g.entries_read.unwrap_or(u64::MAX));
        put_len(out, g.pending.len() as u64);
        for p in &g.pending {
            put_raw_id(out, p.id);
            out.extend_from_slice(&p.delivery_time.to_le_bytes());
            put_len(out, p.delivery_count);
        }
        // Each consumer's pending entries, by id: those of the group's
        // it owns.
        let mut owned: std::collections::BTreeMap<&[u8], Vec<StreamId>> = Default::default();
        for p in &g.pending {
            owned.entry(&p.consumer).or_default().push(p.id);
        }
        put_len(out, g.consumers.len() as u64);
        for (cname, seen_time) in &g.consumers {
            put_string(out, cname);
            out.extend_from_slice(&seen_time.to_le_bytes());
            let ids = owned.get(&cname[..]).map_or(&[][..], |v| &v[..]);
            put_len(out, ids.len() as u64);
            for id in ids {
                put_raw_id(out, *id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::memory::{hash_limits, set_limits, zset_limits};
    use kvasir_engine_memory::stream::{Group, NodeLimits};
    use kvasir_engine_memory::{Hash, List, Set, Stream, ZSet};

    // The tests build and inspect the memory engine's values.
    type Value = crate::keyspace::Value<crate::keyspace::MemoryKeyspace>;

    fn decode_value(body: &[u8], limits: &EncodingLimits) -> Res<Value> {
        super::decode_value(body, limits)
    }

    fn encode_stream(st: &Stream, out: &mut Vec<u8>) {
        super::encode_stream(&st.content(), out)
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Payloads redis-server 7.0.15 wrote (DUMP).
    const REDIS_STR: &str = "000568656c6c6f0a006372df766534200a";
    const REDIS_INT: &str = "00c139300a009d94ea2793fc08b9";
    const REDIS_NEG: &str = "00c0fb0a0049c4c6f4d7263f68";
    const REDIS_BIG: &str = "00c2a08601000a00f12403506f2fa674";
    const REDIS_LZF: &str = "00c3094064016161e057000161610a00e8a3b507b06df271";
    const REDIS_LIST: &str = "120102c32240621a6200000006008161020101ded4028362626204f270110104e04678e03c000148ff0a00eed91c55b04ea97d";
    const REDIS_LIST_PLAIN: &str = "1203020a0a0000000100816102ff01c3094096016262e08900016262020a0a0000000100816302ff0a000568bd5498a1c20d";
    const REDIS_INTSET: &str =
        "0b18040000000400000090eefeff0100000002000000030000000a00a8b63c622cbf2c9c";
    const REDIS_SET: &str = "0202016101620a00fe642125eb033d0d";
    const REDIS_HASH_LP: &str = "1012120000000400816602817602816e020501ff0a008490939f57b4f3c2";
    const REDIS_ZSET_LP: &str =
        "1115150000000400816202dffe0281610283312e3504ff0a006c359df633d08b5d";
    const REDIS_STREAM: &str = "130110000000000000000100000000000000013f3f0000001900030100010201816102816202000102010001000101010201050102010101dfff0203010401050100010201dfff0201018163028178020601ff0303000101000003000a00e3a26b66b8c2b9d1";
    const REDIS_STREAM_GROUPS: &str = "130110000000000000000500000000000000014041410000001800020101010101816602000102010001000182763103040103010001010182763203040100010101dfff020201816702817702816802d060020801ff020600050105020302026732060081ffffffffffffffff00000367727006000302000000000000000500000000000000014d843713a201000001000000000000000600000000000000004d843713a2010000010205616c6963654d843713a2010000010000000000000005000000000000000103626f624d843713a201000001000000000000000600000000000000000a001ddec65b33b492c2";
    const ALL: &[&str] = &[
        REDIS_STR,
        REDIS_INT,
        REDIS_NEG,
        REDIS_BIG,
        REDIS_LZF,
        REDIS_LIST,
        REDIS_LIST_PLAIN,
        REDIS_INTSET,
        REDIS_SET,
        REDIS_HASH_LP,
        REDIS_ZSET_LP,
        REDIS_STREAM,
        REDIS_STREAM_GROUPS,
    ];

    fn load(hex: &str) -> Res<Value> {
        let p = unhex(hex);
        let body = verify(&p).ok_or(Bad)?;
        decode_value(body, &EncodingLimits::default())
    }

    fn text(v: &Value) -> Vec<String> {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        match v {
            Value::Str(b) | Value::Raw(b) => vec![s(b)],
            Value::Int(i) => vec![i.to_string()],
            Value::List(l) => l.iter().map(|e| s(&e.to_vec())).collect(),
            Value::Hash(h) => {
                let mut v: Vec<_> = h
                    .iter()
                    .map(|(f, x)| format!("{}={}", s(f), s(x)))
                    .collect();
                v.sort();
                v
            }
            Value::Set(st) => {
                let mut v: Vec<_> = st.iter().map(|m| s(&m.to_bytes())).collect();
                v.sort();
                v
            }
            Value::ZSet(z) => z.iter().map(|(m, sc)| format!("{}:{sc}", s(m))).collect(),
            Value::Stream(st) => st
                .iter()
                .map(|e| {
                    let f: Vec<_> = e
                        .fields
                        .iter()
                        .map(|(a, b)| format!("{}={}", s(a), s(b)))
                        .collect();
                    format!("{} {}", e.id, f.join(","))
                })
                .collect(),
        }
    }

    #[test]
    fn rdb_crc64_matches_redis_check_value() {
        // crc64.c's self-test: "123456789" gives 0xe9c6d914c4b8d9ca.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        for p in ALL {
            assert!(verify(&unhex(p)).is_some(), "{p}");
        }
    }

    #[test]
    fn rdb_lzf_back_references_expand() {
        // "abcabcabc": literal "abc", then a 6-byte copy from 3 back.
        let compressed = [2, b'a', b'b', b'c', (4 << 5), 2];
        assert_eq!(lzf_decompress(&compressed, 9).unwrap(), b"abcabcabc");
        assert!(lzf_decompress(&compressed, 10).is_none());
        assert!(lzf_decompress(&compressed, 8).is_none());
        assert!(lzf_decompress(&[0x20, 5], 3).is_none());
        assert!(lzf_decompress(&[5, b'a'], 6).is_none());
        assert!(lzf_decompress(&[0xe0], 9).is_none());
        assert!(lzf_decompress(&[0], usize::MAX).is_none());
    }

    #[test]
    fn rdb_reads_redis_payloads() {
        assert_eq!(text(&load(REDIS_STR).unwrap()), ["hello"]);
        assert_eq!(load(REDIS_INT).unwrap(), Value::Int(12345));
        assert_eq!(load(REDIS_NEG).unwrap(), Value::Int(-5));
        assert_eq!(load(REDIS_BIG).unwrap(), Value::Int(100000));
        assert_eq!(text(&load(REDIS_LZF).unwrap()), ["a".repeat(100)]);
        let x70 = "x".repeat(70);
        assert_eq!(
            text(&load(REDIS_LIST).unwrap()),
            ["a", "1", "-300", "bbb", "70000", x70.as_str()]
        );
        let b150 = "b".repeat(150);
        assert_eq!(
            text(&load(REDIS_LIST_PLAIN).unwrap()),
            ["a", b150.as_str(), "c"]
        );
        let si = load(REDIS_INTSET).unwrap();
        assert_eq!(text(&si), ["-70000", "1", "2", "3"]);
        assert!(matches!(&si, Value::Set(s) if s.intset_width() == Some(32)));
        assert_eq!(text(&load(REDIS_SET).unwrap()), ["a", "b"]);
        assert_eq!(text(&load(REDIS_HASH_LP).unwrap()), ["f=v", "n=5"]);
        assert_eq!(text(&load(REDIS_ZSET_LP).unwrap()), ["b:-2", "a:1.5"]);
        assert_eq!(
            text(&load(REDIS_STREAM).unwrap()),
            ["1-1 a=1,b=2", "2-0 a=3,b=4", "3-0 c=x"]
        );
        let Value::Stream(st) = load(REDIS_STREAM_GROUPS).unwrap() else {
            panic!("not a stream")
        };
        assert_eq!(
            text(&Value::Stream(st.clone())),
            ["5-1 f=v1", "6-0 g=w,h=-4000"]
        );
        assert_eq!(st.last_id, StreamId::new(6, 0));
        assert_eq!(st.max_deleted_id, StreamId::new(5, 2));
        assert_eq!(st.entries_added, 3);
        let g = &st.groups[&b"grp"[..]];
        assert_eq!(g.entries_read, Some(3));
        assert_eq!(&*g.pel[&StreamId::new(5, 1)].consumer, b"alice");
        assert_eq!(&*g.pel[&StreamId::new(6, 0)].consumer, b"bob");
        assert_eq!(g.consumers.len(), 2);
        assert_eq!(st.groups[&b"g2"[..]].entries_read, None);
    }

    #[test]
    fn rdb_round_trips_every_type() {
        let limits = EncodingLimits::default();
        let mut values: Vec<Value> = ALL.iter().map(|p| load(p).unwrap()).collect();
        let items: Vec<String> = (0..3000).map(|i| format!("{}", i * 37 - 500)).collect();
        let long: Vec<String> = (0..300)
            .map(|i| format!("e{i}-{}", "y".repeat(i % 90)))
            .collect();
        values.push(Value::List(Box::new(List::from_items(&items, -2))));
        values.push(Value::List(Box::new(List::from_items(&long, -2))));
        let mut h = Hash::new();
        let mut s = Set::new();
        let mut z = ZSet::new();
        for (i, m) in long.iter().enumerate() {
            h.set(m.as_bytes(), items[i].as_bytes(), hash_limits(&limits));
            s.insert(m.as_bytes(), &set_limits(&limits));
            z.insert(m.as_bytes(), i as f64 / 7.0 - 3.0, zset_limits(&limits));
        }
        z.insert(b"inf", f64::INFINITY, zset_limits(&limits));
        z.insert(b"-inf", f64::NEG_INFINITY, zset_limits(&limits));
        values.push(Value::Hash(Box::new(h)));
        values.push(Value::Set(Box::new(s)));
        values.push(Value::ZSet(Box::new(z)));
        values.push(Value::from_bytes(b"-2147483648"));
        values.push(Value::from_bytes(b"9223372036854775807"));
        values.push(Value::from_bytes(b"007"));
        let mut st = Stream::new();
        for i in 1..=250u64 {
            let v = i.to_string();
            if i % 3 == 0 {
                st.append(
                    StreamId::new(i, i),
                    &[("a", v.as_str()), ("b", "x")],
                    NodeLimits::default(),
                );
            } else {
                st.append(
                    StreamId::new(i, 0),
                    &[("a", v.as_str())],
                    NodeLimits::default(),
                );
            }
        }
        st.last_id = StreamId::new(300, 0);
        st.entries_added = 260;
        values.push(Value::Stream(Box::new(st)));
        for v in values {
            let p = dump(&v);
            let back = decode_value(verify(&p).unwrap(), &limits).unwrap();
            assert_eq!(text(&back), text(&v));
            if let (Value::Stream(a), Value::Stream(b)) = (&v, &back) {
                assert_eq!(
                    (a.last_id, a.max_deleted_id, a.entries_added, &a.groups),
                    (b.last_id, b.max_deleted_id, b.entries_added, &b.groups)
                );
            }
        }
    }

    /// Every prefix of every payload's body, and every one-byte change,
    /// decodes to an error or a value: never a panic.
    #[test]
    fn rdb_truncated_and_damaged_payloads_are_refused() {
        let limits = EncodingLimits::default();
        for p in ALL {
            let p = unhex(p);
            let body = verify(&p).unwrap();
            assert!(decode_value(body, &limits).is_ok());
            for cut in 0..body.len() {
                assert_eq!(decode_value(&body[..cut], &limits), Err(Bad), "{cut}");
            }
            for i in 0..body.len() {
                for x in [1u8, 0x80, 0xff, 0x3f] {
                    let mut b = body.to_vec();
                    b[i] ^= x;
                    let _ = decode_value(&b, &limits);
                }
            }
            let mut longer = body.to_vec();
            longer.push(0);
            assert_eq!(decode_value(&longer, &limits), Err(Bad));
            // The trailer: version, checksum.
            let mut v11 = p.clone();
            let n = v11.len();
            v11[n - 10] = 11;
            assert!(verify(&v11).is_none());
            let mut crc = p.clone();
            crc[n - 1] ^= 1;
            assert!(verify(&crc).is_none());
            assert!(verify(&p[..9]).is_none());
        }
    }

    #[test]
    fn rdb_refuses_huge_counts_and_bad_types() {
        let limits = EncodingLimits::default();
        // A list, set, hash and zset claiming 2^32 elements in 5 bytes.
        for t in [
            T_LIST,
            T_SET,
            T_HASH,
            T_ZSET_2,
            T_LIST_QUICKLIST_2,
            T_STREAM_LISTPACKS_2,
        ] {
            let body = [t, 0x81, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 3];
            assert_eq!(decode_value(&body, &limits), Err(Bad));
        }
        // A string claiming 4 GB.
        assert_eq!(
            decode_value(&[0, 0x80, 0xff, 0xff, 0xff, 0xff, 1], &limits),
            Err(Bad)
        );
        // LZF claiming a huge output.
        assert_eq!(
            decode_value(&[0, 0xc3, 1, 0x81, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0], &limits),
            Err(Bad)
        );
        // Empty collections, unknown and module types.
        for body in [
            &[T_LIST, 0][..],
            &[T_SET, 0],
            &[T_HASH, 0],
            &[T_ZSET_2, 0],
            &[6],
            &[7],
            &[9, 0],
            &[20, 0],
            &[200],
        ] {
            assert_eq!(decode_value(body, &limits), Err(Bad), "{body:?}");
        }
        // Duplicates.
        assert_eq!(
            decode_value(&[T_SET, 2, 1, b'a', 1, b'a'], &limits),
            Err(Bad)
        );
        assert_eq!(
            decode_value(&[T_HASH, 2, 1, b'a', 0, 1, b'a', 0], &limits),
            Err(Bad)
        );
        // A NaN score.
        let mut z = vec![T_ZSET_2, 1, 1, b'a'];
        z.extend_from_slice(&f64::NAN.to_bits().to_le_bytes());
        assert_eq!(decode_value(&z, &limits), Err(Bad));
        assert_eq!(decode_value(&[T_ZSET, 1, 1, b'a', 253], &limits), Err(Bad));
        assert_eq!(
            decode_value(&[T_ZSET, 1, 1, b'a', 3, b'1', b'.', b'5'], &limits).map(|v| text(&v)),
            Ok(vec!["a:1.5".to_string()])
        );
    }

    #[test]
    fn rdb_listpack_and_ziplist_and_intset_validation() {
        let mut w = LpWriter::new();
        for v in [
            0i64,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -32768,
            32767,
            40000,
            -8388608,
            8388607,
            1 << 23,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ] {
            w.int(v);
        }
        let s64 = "s".repeat(64);
        let s5000 = "t".repeat(5000);
        for s in ["", "a", s64.as_str(), s5000.as_str()] {
            w.str(s.as_bytes());
        }
        let lp = w.finish();
        let items = listpack(&lp).unwrap();
        assert_eq!(items.len(), 20);
        assert_eq!(items[15], Item::Int(i64::MIN));
        assert_eq!(items[19], Item::Str(s5000.as_bytes()));
        for cut in 0..lp.len() {
            assert!(listpack(&lp[..cut]).is_err());
        }
        for i in 0..lp.len() {
            let mut b = lp.clone();
            b[i] ^= 0x40;
            let _ = listpack(&b);
        }
        let mut bad_count = lp.clone();
        bad_count[4] = 3;
        assert!(listpack(&bad_count).is_err());

        // Ziplist ["a", 5, 300, "bcd"]: prevlen, encoding, data.
        let mut zl = vec![0; 10];
        let entries: [&[u8]; 4] = [
            &[0x01, b'a'],
            &[0xf6],
            &[0xc0, 0x2c, 0x01],
            &[0x03, b'b', b'c', b'd'],
        ];
        let mut prev = 0u8;
        let mut tail = 0;
        for e in entries {
            tail = zl.len();
            zl.push(prev);
            zl.extend_from_slice(e);
            prev = (e.len() + 1) as u8;
        }
        zl.push(0xff);
        let n = zl.len() as u32;
        zl[..4].copy_from_slice(&n.to_le_bytes());
        zl[4..8].copy_from_slice(&(tail as u32).to_le_bytes());
        zl[8..10].copy_from_slice(&4u16.to_le_bytes());
        assert_eq!(
            ziplist(&zl).unwrap(),
            [
                Item::Str(b"a"),
                Item::Int(5),
                Item::Int(300),
                Item::Str(b"bcd")
            ]
        );
        for cut in 0..zl.len() {
            assert!(ziplist(&zl[..cut]).is_err());
        }
        let mut bad_prev = zl.clone();
        bad_prev[13] = 7;
        assert!(ziplist(&bad_prev).is_err());
        // As a list (10) and a hash (13) payload body.
        let mut body = vec![T_LIST_ZIPLIST];
        put_string(&mut body, &zl);
        let l = decode_value(&body, &EncodingLimits::default()).unwrap();
        assert_eq!(text(&l), ["a", "5", "300", "bcd"]);
        body[0] = T_HASH_ZIPLIST;
        let h = decode_value(&body, &EncodingLimits::default()).unwrap();
        assert_eq!(text(&h), ["300=bcd", "a=5"]);

        // Intsets: unsorted, duplicate, bad width, length mismatch.
        let is = |w: u32, vals: &[i64]| {
            let mut b = w.to_le_bytes().to_vec();
            b.extend_from_slice(&(vals.len() as u32).to_le_bytes());
            for v in vals {
                b.extend_from_slice(&v.to_le_bytes()[..w as usize]);
            }
            b
        };
        assert_eq!(intset(&is(2, &[-3, 7])).unwrap(), (16, vec![-3, 7]));
        assert_eq!(
            intset(&is(8, &[i64::MIN, 0])).unwrap(),
            (64, vec![i64::MIN, 0])
        );
        assert!(intset(&is(2, &[7, -3])).is_err());
        assert!(intset(&is(4, &[7, 7])).is_err());
        assert!(intset(&is(3, &[1])).is_err());
        assert!(intset(&is(2, &[])).is_err());
        let mut short = is(4, &[1, 2]);
        short.pop();
        assert!(intset(&short).is_err());
    }

    #[test]
    fn rdb_stream_consistency_is_checked() {
        let limits = EncodingLimits::default();
        let good = unhex(REDIS_STREAM_GROUPS);
        let body = verify(&good).unwrap().to_vec();
        // Find the group PEL's delivery count bytes and the consumer
        // ids: changing the stream length or a consumer's id breaks it.
        let Value::Stream(st) = decode_value(&body, &limits).unwrap() else {
            panic!()
        };
        let mut p = Vec::new();
        p.push(T_STREAM_LISTPACKS_2);
        encode_stream(&st, &mut p);
        assert_eq!(
            decode_value(&p, &limits).map(|v| text(&v)),
            Ok(text(&Value::Stream(st.clone())))
        );
        // A PEL entry no consumer owns.
        let mut orphan = (*st).clone();
        orphan
            .groups
            .get_mut(&b"grp"[..])
            .unwrap()
            .consumers
            .clear();
        let mut p = vec![T_STREAM_LISTPACKS_2];
        encode_stream(&orphan, &mut p);
        assert_eq!(decode_value(&p, &limits), Err(Bad));
        // An empty stream (no listpacks) with a group is fine.
        let mut empty = Stream::new();
        empty.last_id = StreamId::new(9, 9);
        empty
            .groups
            .insert(b"g".to_vec().into_boxed_slice(), Group::default());
        let mut p = vec![T_STREAM_LISTPACKS_2];
        encode_stream(&empty, &mut p);
        let Value::Stream(back) = decode_value(&p, &limits).unwrap() else {
            panic!()
        };
        assert_eq!(
            (back.len(), back.last_id, back.groups.len()),
            (0, StreamId::new(9, 9), 1)
        );
    }
}
