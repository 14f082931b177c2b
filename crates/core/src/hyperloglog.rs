//! HyperLogLog: PFADD, PFCOUNT, PFMERGE, and Redis's debugging commands
//! PFDEBUG and PFSELFTEST (its test suite uses them).
//!
//! HyperLogLogs are ordinary strings holding Redis 7.0's exact
//! representation (`hyperloglog.c`), so GET returns the same bytes as Redis
//! and PFCOUNT the same estimate:
//!
//! - a 16-byte header: the magic `HYLL`, the encoding byte (0 dense,
//!   1 sparse), 3 unused bytes and the cached cardinality (8 bytes, little
//!   endian; the top bit of the last byte set means "stale");
//! - 16384 registers of 6 bits: either dense (packed from the least
//!   significant bit, 12288 bytes) or sparse, a run-length code of ZERO
//!   (`00xxxxxx`, 1-64 zero registers), XZERO (`01xxxxxx yyyyyyyy`, 1-16384
//!   zero registers) and VAL (`1vvvvvxx`, 1-4 registers of value 1-32)
//!   opcodes. A sparse HLL becomes dense when a register exceeds 32 or the
//!   string would grow beyond [`SPARSE_MAX_BYTES`].
//!
//! Elements are hashed with MurmurHash64A (seed 0xadc83b19): the low 14
//! bits pick the register, the position of the first set bit in the other
//! 50 is the candidate value. The estimate is Ertl's improved estimator
//! over the register histogram, as in Redis 5+.
//!
//! Difference from Redis: Redis's PFCOUNT on one key writes the computed
//! cardinality back into the header (bytes 8..16) when the cache is stale.
//! Here PFCOUNT is a pure read (`Store::read`), so it recomputes instead:
//! the numbers are identical, but after a PFCOUNT those 8 cached bytes (and
//! OBJECT ENCODING, which Redis turns to raw) can differ from Redis's.
//! A valid cache found in the value (set by a restored or SET value) is
//! answered as is, like Redis.
//!
//! Hostile values (any string starting with `HYLL` can be SET) never
//! panic: opcodes are decoded with bounds checks, a missing second XZERO
//! byte reads as 0 (Redis reads the string's terminating NUL there), and
//! inconsistent register counts answer `INVALIDOBJ`.

use crate::error::{CmdError, CmdResult};
use crate::keyspace::{CompactBytes, Keyspace, Value};
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags};
use bytes::Bytes;
use kvasir_resp::Reply;

const W_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const W_OOM_FAST: Flags = W_OOM.union(Flags::FAST);
const R: Flags = Flags::READONLY;
const G: &str = "hyperloglog";

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("pfadd", -2, W_OOM_FAST, (1, 1, 1), &["write", "hyperloglog", "fast"], G, "2.8.9", "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.", crate::write_handler!(pfadd)).events(crate::notify::Events::Custom(crate::notify::pfadd)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_INSERT]),
    // Every argument is a key (the union of all of them is counted).
    cmd("pfcount", -2, R.union(Flags::MAY_REPLICATE), (1, -1, 1), &["read", "hyperloglog", "slow"], G, "2.8.9", "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).", crate::read_handler!(pfcount)).with_key_specs(&[crate::table::ks::RW_ACCESS]),
    // The destination (also merged as a source) and the sources.
    cmd("pfmerge", -2, W_OOM, (1, -1, 1), &["write", "hyperloglog", "slow"], G, "2.8.9", "Merges one or more HyperLogLog values into a single key.", crate::write_handler!(pfmerge)).events(crate::notify::Events::Dest("pfadd")).keys_access(crate::table::KeyAccess::ReadWriteThenRead),
    // The subcommand is an argument, not a container (as in Redis), so
    // the key is the second argument. Its key spec (RW access) asks ACL
    // for read permission only, as Redis derives it.
    // Runs on the server's thread (it touches no key), see [`self_test`].
    cmd("pfselftest", 1, Flags::ADMIN, (0, 0, 0), &["hyperloglog", "admin", "slow", "dangerous"], G, "2.8.9", "An internal command for testing HyperLogLog values.", crate::connection::s(crate::connection::SessionCmd::Pfselftest)),
    cmd("pfdebug", 3, W_OOM.union(Flags::ADMIN), (2, 2, 1), &["write", "hyperloglog", "admin", "slow", "dangerous"], G, "2.8.9", "Internal commands for debugging HyperLogLog values.", crate::write_handler!(pfdebug)).events(crate::notify::Events::None).with_key_specs(&[crate::table::ks::RW_ACCESS]).keys_access(crate::table::KeyAccess::Read).unchanged_when(pfdebug_changed_nothing),
];

/// Redis's `hll-sparse-max-bytes` default: a sparse HLL (header included)
/// that would grow beyond it is converted to the dense encoding.
pub const SPARSE_MAX_BYTES: usize = 3000;

/// Bits of the hash addressing the register.
const P: u32 = 14;
/// Bits of the hash used for the run of zeroes.
const Q: usize = 64 - P as usize;
const REGISTERS: usize = 1 << P;
const REGISTER_BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << REGISTER_BITS) - 1;
const HDR_SIZE: usize = 16;
const DENSE_SIZE: usize = HDR_SIZE + (REGISTERS * REGISTER_BITS).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
/// Offset of the encoding byte and of the cached cardinality.
const ENCODING_AT: usize = 4;
const CARD_AT: usize = 8;
/// The byte holding the cache's "stale" bit (its top bit).
const CARD_LAST: usize = CARD_AT + 7;

const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: i64 = 4;
const SPARSE_ZERO_MAX_LEN: i64 = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;

const HASH_SEED: u64 = 0xadc8_3b19;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const INVALID_HLL: &str = "INVALIDOBJ Corrupted HLL object detected";

/// A sparse representation whose opcodes do not cover exactly the 16384
/// registers (or that cannot be located in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Corrupt;

fn invalid() -> CmdError {
    CmdError::other(INVALID_HLL)
}

// ---------------------------------------------------------------------------
// Hashing
// ---------------------------------------------------------------------------

/// MurmurHash64A as in Redis (little-endian word reads).
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(w);
        let mut k = u64::from_le_bytes(buf);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate() {
            h ^= u64::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element maps to and the value it proposes for it
/// (1..=51): Redis's hllPatLen.
fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, HASH_SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The forced bit 50 bounds the count at Q + 1.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------
// Dense registers
// ---------------------------------------------------------------------------

/// Register `i` of packed 6-bit registers; a byte past the end reads as 0
/// (the last register never needs it).
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * REGISTER_BITS / 8;
    let fb = (i * REGISTER_BITS) & 7;
    let b0 = u16::from(regs.get(byte).copied().unwrap_or(0));
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & u16::from(REGISTER_MAX)) as u8
}

fn dense_put(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * REGISTER_BITS / 8;
    let fb = (i * REGISTER_BITS) & 7;
    let v = u16::from(val & REGISTER_MAX);
    let max = u16::from(REGISTER_MAX);
    if let Some(b) = regs.get_mut(byte) {
        *b &= !((max << fb) as u8);
        *b |= (v << fb) as u8;
    }
    if let Some(b) = regs.get_mut(byte + 1) {
        *b &= !((max >> (8 - fb)) as u8);
        *b |= (v >> (8 - fb)) as u8;
    }
}

/// Raises register `i` to `count`; whether it changed (hllDenseSet).
fn dense_set(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_put(regs, i, count);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------
// Sparse opcodes
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Zero,
    XZero,
    Val(u8),
}

/// Decodes the opcode at `p` (which must be inside `s`): its kind, the
/// registers it covers and its length in bytes. A truncated XZERO reads
/// its second byte as 0, as Redis (which finds the string's NUL) does.
fn op_at(s: &[u8], p: usize) -> (Op, i64, usize) {
    let b = s.get(p).copied().unwrap_or(0);
    if b & 0xc0 == 0 {
        (Op::Zero, i64::from(b & 0x3f) + 1, 1)
    } else if b & 0xc0 == 0x40 {
        let lo = s.get(p + 1).copied().unwrap_or(0);
        (Op::XZero, (i64::from(b & 0x3f) << 8 | i64::from(lo)) + 1, 2)
    } else {
        (Op::Val(((b >> 2) & 0x1f) + 1), i64::from(b & 0x3) + 1, 1)
    }
}

fn val_op(value: u8, len: i64) -> u8 {
    ((value - 1) << 2 | (len - 1) as u8) | 0x80
}

/// The (at most five) opcodes that replace one when a register inside
/// it is set: on the stack, as PFADD makes one per changed register.
#[derive(Default)]
struct OpSeq {
    buf: [u8; 5],
    len: usize,
}

impl OpSeq {
    fn push(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }

    fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Extend<u8> for OpSeq {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, iter: I) {
        for b in iter {
            self.push(b);
        }
    }
}

/// Pushes the ZERO or XZERO opcode for a run of `len` (1..=16384) zeroes.
fn push_zeroes(out: &mut impl Extend<u8>, len: i64) {
    if len > SPARSE_ZERO_MAX_LEN {
        let l = len - 1;
        out.extend([((l >> 8) as u8 & 0x3f) | 0x40, (l & 0xff) as u8]);
    } else {
        out.extend([(len - 1) as u8]);
    }
}

/// A new, empty HLL: sparse, one XZERO covering every register, cache
/// valid at 0 (createHLLObject).
fn new_hll() -> Vec<u8> {
    let mut s = Vec::with_capacity(HDR_SIZE + 2);
    s.extend_from_slice(b"HYLL");
    s.push(SPARSE);
    s.extend_from_slice(&[0; 11]);
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(SPARSE_XZERO_MAX_LEN);
        push_zeroes(&mut s, run as i64);
        left -= run;
    }
    s
}

/// Visits the non-zero runs (first register, length, value) of sparse
/// opcodes `ops`, which must cover exactly the 16384 registers. As in the
/// Redis 7.0 the tests run against (with the CVE-2025-32023 fix), an
/// opcode reaching past the last register makes the whole value corrupt.
fn walk_sparse(ops: &[u8], mut visit: impl FnMut(usize, usize, u8)) -> Result<(), Corrupt> {
    let mut idx: usize = 0;
    let mut p = 0;
    while p < ops.len() {
        let (op, runlen, oplen) = op_at(ops, p);
        let runlen = runlen as usize;
        if idx + runlen > REGISTERS {
            return Err(Corrupt);
        }
        if let Op::Val(v) = op {
            visit(idx, runlen, v);
        }
        idx += runlen;
        p += oplen;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(())
}

/// The dense form of a sparse HLL (hllSparseToDense): the header is kept
/// (cached cardinality included), only the encoding byte changes.
fn sparse_to_dense(s: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR_SIZE].copy_from_slice(s.get(..HDR_SIZE).ok_or(Corrupt)?);
    dense[ENCODING_AT] = DENSE;
    let regs = &mut dense[HDR_SIZE..];
    walk_sparse(&s[HDR_SIZE..], |start, runlen, value| {
        for i in start..start + runlen {
            dense_put(regs, i, value);
        }
    })?;
    Ok(dense)
}

/// Raises register `index` of a sparse HLL to `count`, in place, with
/// Redis's exact opcode edits (hllSparseSet), converting to dense when
/// needed. Whether a register changed.
fn sparse_set(hll: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(hll, index, count);
    }
    // Step 1: find the opcode covering `index`: only the run lengths are
    // decoded on the way (this scan is PFADD's cost on a sparse HLL).
    let end = hll.len();
    let mut p = HDR_SIZE;
    let mut first: usize = 0;
    let mut prev: Option<usize> = None;
    loop {
        let Some(&b) = hll.get(p) else {
            return Err(Corrupt);
        };
        let (span, oplen) = match b >> 6 {
            0 => (usize::from(b & 0x3f) + 1, 1),
            1 => {
                let lo = hll.get(p + 1).copied().unwrap_or(0);
                ((usize::from(b & 0x3f) << 8 | usize::from(lo)) + 1, 2)
            }
            _ => (usize::from(b & 0x3) + 1, 1),
        };
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    let (op, span, oplen) = op_at(hll, p);
    let (index, first) = (index as i64, first as i64);
    let runlen = span;

    // Step 2: the trivial in-place updates.
    match op {
        Op::Val(old) if old >= count => return Ok(false),
        Op::Val(_) | Op::Zero if runlen == 1 => {
            hll[p] = val_op(count, 1);
            merge_adjacent(hll, prev);
            return Ok(true);
        }
        _ => {}
    }

    // General case: split the opcode into up to three.
    let last = first + span - 1;
    let mut seq = OpSeq::default();
    match op {
        Op::Zero | Op::XZero => {
            if index != first {
                push_zeroes(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zeroes(&mut seq, last - index);
            }
        }
        Op::Val(cur) => {
            if index != first {
                seq.push(val_op(cur, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(cur, last - index));
            }
        }
    }

    // Step 3: substitute the sequence for the opcode.
    let delta = seq.len as i64 - oplen as i64;
    if delta > 0 && end as i64 + delta > SPARSE_MAX_BYTES as i64 {
        return promote(hll, index as usize, count);
    }
    let new_len = (end as i64 + delta) as usize;
    if p + oplen < end {
        // Redis's memmove of the tail, then the sequence in the gap.
        let tail = p + oplen;
        let to = p + seq.len;
        if to > tail {
            hll.resize(new_len, 0);
            hll.copy_within(tail..end, to);
        } else if to < tail {
            hll.copy_within(tail..end, to);
            hll.truncate(new_len);
        }
        hll[p..to].copy_from_slice(seq.as_slice());
    } else {
        // The last opcode (possibly a truncated XZERO): Redis writes the
        // sequence in place and sets the length arithmetically.
        hll.truncate(p);
        hll.extend_from_slice(seq.as_slice());
        hll.truncate(new_len);
    }
    merge_adjacent(hll, prev);
    Ok(true)
}

/// Step 4 of hllSparseSet: merges equal adjacent VAL opcodes, scanning up
/// to 5 opcodes from the one before the edit; then marks the cache stale.
fn merge_adjacent(hll: &mut Vec<u8>, prev: Option<usize>) {
    let mut p = prev.unwrap_or(HDR_SIZE);
    let mut scan = 5;
    while p < hll.len() && scan > 0 {
        scan -= 1;
        let b = hll[p];
        if b & 0xc0 == 0x40 {
            p += 2;
            continue;
        }
        if b & 0xc0 == 0 {
            p += 1;
            continue;
        }
        if let Some(&next) = hll.get(p + 1) {
            if next & 0x80 != 0 {
                let (v1, v2) = (((b >> 2) & 0x1f) + 1, ((next >> 2) & 0x1f) + 1);
                let len = i64::from(b & 3) + i64::from(next & 3) + 2;
                if v1 == v2 && len <= SPARSE_VAL_MAX_LEN {
                    hll[p + 1] = val_op(v1, len);
                    hll.remove(p);
                    continue;
                }
            }
        }
        p += 1;
    }
    if let Some(b) = hll.get_mut(CARD_LAST) {
        *b |= 0x80;
    }
}

/// Converts a sparse HLL to dense, then raises the register there.
fn promote(hll: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    let mut dense = sparse_to_dense(hll)?;
    let changed = dense_set(&mut dense[HDR_SIZE..], index, count);
    *hll = dense;
    Ok(changed)
}

/// Adds one element (hllAdd): whether a register changed.
fn add(hll: &mut Vec<u8>, ele: &[u8]) -> Result<bool, Corrupt> {
    let (index, count) = pat_len(ele);
    match hll.get(ENCODING_AT) {
        Some(&DENSE) if hll.len() == DENSE_SIZE => {
            Ok(dense_set(&mut hll[HDR_SIZE..], index, count))
        }
        Some(&SPARSE) => sparse_set(hll, index, count),
        _ => Err(Corrupt),
    }
}

// ---------------------------------------------------------------------------
// Estimation
// ---------------------------------------------------------------------------

/// How many registers hold each value (0..=63).
type Histogram = [i64; 64];

/// The register histogram of a validated HLL (dense or sparse); a sparse
/// one must cover exactly 16384 registers.
fn histogram(hll: &[u8]) -> Result<Histogram, Corrupt> {
    let mut h = [0i64; 64];
    let regs = hll.get(HDR_SIZE..).unwrap_or_default();
    if hll.get(ENCODING_AT) == Some(&DENSE) {
        for i in 0..REGISTERS {
            h[usize::from(dense_get(regs, i))] += 1;
        }
        return Ok(h);
    }
    h[0] = REGISTERS as i64;
    walk_sparse(regs, |_, runlen, value| {
        h[0] -= runlen as i64;
        h[usize::from(value)] += runlen as i64;
    })?;
    Ok(h)
}

fn raw_histogram(regs: &[u8]) -> Histogram {
    let mut h = [0i64; 64];
    for &r in regs {
        h[usize::from(r & REGISTER_MAX)] += 1;
    }
    h
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        // Redis's pow(1 - x, 2), which compilers turn into a product.
        z -= (1.0 - x) * (1.0 - x) * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

/// Ertl's improved estimator, as Redis's hllCount.
fn estimate(h: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    c_estimate_to_u64(ALPHA_INF * m * m / z)
}

/// Redis's `(uint64_t)(double)llroundl(x)` as compiled for x86-64: an
/// estimate out of the i64 range (infinite when every register is at its
/// maximum, which only a hand-made value can reach) becomes LLONG_MIN,
/// whose conversion answers 2^63 (PFCOUNT then replies i64::MIN).
fn c_estimate_to_u64(x: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let r = x.round();
    let ll = if (-TWO_63..TWO_63).contains(&r) {
        r as i64
    } else {
        i64::MIN
    };
    let e = ll as f64;
    if e < TWO_63 {
        e as i64 as u64
    } else {
        ((e - TWO_63) as i64 as u64) ^ (1 << 63)
    }
}

/// Raises `max` to the registers of a validated HLL (hllMerge).
fn merge_into(max: &mut [u8], hll: &[u8]) -> Result<(), Corrupt> {
    let regs = hll.get(HDR_SIZE..).unwrap_or_default();
    if hll.get(ENCODING_AT) == Some(&DENSE) {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(regs, i));
        }
        return Ok(());
    }
    walk_sparse(regs, |start, runlen, value| {
        for m in &mut max[start..start + runlen] {
            *m = (*m).max(value);
        }
    })
}

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/// The bytes of a value that looks like an HLL (isHLLObjectOrReply): a
/// non-integer string with the magic, a known encoding and, when dense,
/// the exact size. The usual WRONGTYPE for other types.
fn hll_bytes<K: Keyspace>(v: &Value<K>) -> Result<&[u8], CmdError> {
    let s = match v {
        Value::Str(s) | Value::Raw(s) => s.as_slice(),
        Value::Int(_) => return Err(CmdError::other(NOT_HLL)),
        Value::List(_) | Value::Hash(_) | Value::Set(_) | Value::ZSet(_) | Value::Stream(_) => {
            return Err(CmdError::WrongType)
        }
    };
    let ok = s.len() >= HDR_SIZE
        && s.starts_with(b"HYLL")
        && s[ENCODING_AT] <= SPARSE
        && (s[ENCODING_AT] != DENSE || s.len() == DENSE_SIZE);
    if ok {
        Ok(s)
    } else {
        Err(CmdError::other(NOT_HLL))
    }
}

/// Moves a valid HLL's bytes out of its value for an update in place
/// (no copy of a dense 12 KB HLL per PFADD); [`store_hll`] puts them back.
fn take_hll<K: Keyspace>(v: &mut Value<K>) -> Result<Vec<u8>, CmdError> {
    hll_bytes(v)?;
    match v {
        Value::Str(s) | Value::Raw(s) => Ok(std::mem::take(s).into_vec()),
        _ => Err(CmdError::WrongType),
    }
}

/// Replaces the string at `key` by `hll` (raw, like every value a PF
/// command writes), keeping its TTL; creates it without one if missing.
fn store_hll<K: Keyspace>(store: &mut Store<K>, db: usize, key: &[u8], hll: Vec<u8>) {
    let value = hll_value(hll);
    match store.db_mut(db).get_value_mut(key) {
        Some(v) => *v = value,
        None => {
            store.db_mut(db).set(key, value, None);
        }
    }
}

/// An HLL's bytes as a raw string value. A sparse HLL grows a few bytes at
/// a time through `Vec`'s doubling: its spare room is cut to a quarter of
/// its length, so 1,000 small HLLs do not carry up to twice their size.
fn hll_value<K: Keyspace>(mut hll: Vec<u8>) -> Value<K> {
    if hll.capacity() > hll.len() + hll.len() / 2 {
        hll.shrink_to(hll.len() + hll.len() / 4);
    }
    Value::Raw(CompactBytes::from_vec(hll))
}

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

/// PFADD key [element ...]: 1 if a register changed or the key was
/// created, else 0. On a corrupt sparse HLL the changes made before the
/// bad register stay, as in Redis.
fn pfadd<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    // One lookup: the HLL is updated in its place.
    let (updated, corrupt) = match store.live_value_mut(db, key, ctx) {
        Some(v) => {
            let mut hll = take_hll(v)?;
            let (updated, corrupt) = add_all(&mut hll, &args[2..], false);
            *v = hll_value(hll);
            (updated, corrupt)
        }
        None => {
            let mut hll = new_hll();
            let (updated, corrupt) = add_all(&mut hll, &args[2..], true);
            store.db_mut(db).set(key, hll_value(hll), None);
            (updated, corrupt)
        }
    };
    if corrupt {
        return Err(invalid());
    }
    Ok(Reply::Int(i64::from(updated)))
}

/// Adds `elements` (PFADD): whether a register changed (or `created`),
/// and whether a corrupt register stopped it; a change invalidates the
/// cached cardinality.
fn add_all(hll: &mut Vec<u8>, elements: &[Bytes], created: bool) -> (bool, bool) {
    let mut updated = created;
    for ele in elements {
        match add(hll, ele) {
            Ok(changed) => updated |= changed,
            Err(Corrupt) => return (updated, true),
        }
    }
    if updated {
        hll[CARD_LAST] |= 0x80;
    }
    (updated, false)
}

/// PFCOUNT key [key ...]: the estimated cardinality of one HLL (its valid
/// cache if any), or of the union of several (missing keys are empty).
fn pfcount<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    if args.len() > 2 {
        let mut max = vec![0u8; REGISTERS];
        for key in &args[1..] {
            let Some(e) = store.live(db, key, ctx.now_ms) else {
                continue;
            };
            merge_into(&mut max, hll_bytes(e.value)?).map_err(|_| invalid())?;
        }
        return Ok(Reply::Int(estimate(&raw_histogram(&max)) as i64));
    }
    let Some(e) = store.live(db, &args[1], ctx.now_ms) else {
        return Ok(Reply::Int(0));
    };
    let hll = hll_bytes(e.value)?;
    let mut card = [0u8; 8];
    card.copy_from_slice(&hll[CARD_AT..CARD_AT + 8]);
    if card[7] & 0x80 == 0 {
        return Ok(Reply::Int(u64::from_le_bytes(card) as i64));
    }
    let h = histogram(hll).map_err(|_| invalid())?;
    let card = estimate(&h);
    if store.cache_hll_counts {
        store
            .hll_counted
            .borrow_mut()
            .push((db, args[1].clone(), card));
    }
    Ok(Reply::Int(card as i64))
}

/// Drops the cardinalities noted by a read that did not end.
pub fn forget_counted<K: Keyspace>(store: &mut Store<K>) {
    store.hll_counted.get_mut().clear();
}

/// Stores the cardinalities the read just run computed (see
/// `Store::cache_hll_counts`) in their HLLs' headers, so the next PFCOUNT
/// answers from the cache as in Redis; the value becomes raw, as Redis
/// unshares it. Only right after that read: nothing can have changed the
/// HLLs in between.
pub fn store_counted<K: Keyspace>(store: &mut Store<K>, now_ms: u64) {
    if store.hll_counted.get_mut().is_empty() {
        return;
    }
    let counted = std::mem::take(store.hll_counted.get_mut());
    for (db, key, card) in counted {
        let live = store
            .db(db)
            .get(&key)
            .is_some_and(|e| !e.is_expired(now_ms));
        if !live {
            continue;
        }
        let Some(v) = store.db_mut(db).get_value_mut(&key) else {
            continue;
        };
        let Ok(mut hll) = take_hll(v) else {
            continue;
        };
        if hll[CARD_LAST] & 0x80 != 0 {
            hll[CARD_AT..CARD_AT + 8].copy_from_slice(&card.to_le_bytes());
        }
        *v = hll_value(hll);
    }
}

/// PFMERGE destkey [sourcekey ...]: the destination becomes the union of
/// itself and the sources; created (sparse) if missing, made dense if any
/// input is dense, kept sparse otherwise (as long as it fits).
fn pfmerge<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let keys = &args[1..];
    for k in keys {
        store.expire_if_needed(db, k, ctx);
    }
    let mut max = vec![0u8; REGISTERS];
    let mut use_dense = false;
    for k in keys {
        let Some(e) = store.live(db, k, ctx.now_ms) else {
            continue;
        };
        let hll = hll_bytes(e.value)?;
        use_dense |= hll[ENCODING_AT] == DENSE;
        merge_into(&mut max, hll).map_err(|_| invalid())?;
    }
    let dest = &args[1];
    let mut hll = match store.live_value_mut(db, dest, ctx) {
        Some(v) => hll_bytes(v)?.to_vec(),
        None => new_hll(),
    };
    if use_dense && hll[ENCODING_AT] == SPARSE {
        match sparse_to_dense(&hll) {
            Ok(dense) => hll = dense,
            Err(Corrupt) => {
                // Redis has created a missing destination by then (an
                // empty one cannot be corrupt, so this is an existing key).
                return Err(invalid());
            }
        }
    }
    for (i, &m) in max.iter().enumerate() {
        if m == 0 {
            continue;
        }
        if hll[ENCODING_AT] == DENSE {
            dense_set(&mut hll[HDR_SIZE..], i, m);
        } else {
            // Redis ignores a failure here (the inputs were checked).
            let _ = sparse_set(&mut hll, i, m);
        }
    }
    hll[CARD_LAST] |= 0x80;
    store_hll(store, db, dest, hll);
    Ok(Reply::ok())
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key, as Redis's pfdebugCommand:
/// GETREG the 16384 registers (a sparse HLL is made dense first, as
/// TODENSE does: 1 if it was converted), DECODE a sparse HLL's opcodes
/// (`z:<zeroes>`, `Z:<zeroes>`, `v:<value>,<registers>`), ENCODING
/// `sparse` or `dense`.
fn pfdebug<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let Some(v) = store.live_value_mut(db, &args[2], ctx) else {
        return Err(CmdError::other("ERR The specified key does not exist"));
    };
    // As Redis: the key must hold a HyperLogLog whatever the subcommand.
    hll_bytes(v)?;
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"getreg" | b"todense" => {
            let mut hll = take_hll(v)?;
            let sparse = hll[ENCODING_AT] == SPARSE;
            if sparse {
                match sparse_to_dense(&hll) {
                    Ok(dense) => hll = dense,
                    Err(Corrupt) => {
                        *v = hll_value(hll);
                        return Err(invalid());
                    }
                }
            }
            let reply = if sub.as_slice() == b"getreg" {
                let regs = &hll[HDR_SIZE..];
                Reply::Array(
                    (0..REGISTERS)
                        .map(|i| Reply::Int(i64::from(dense_get(regs, i))))
                        .collect(),
                )
            } else {
                Reply::Int(i64::from(sparse))
            };
            *v = hll_value(hll);
            Ok(reply)
        }
        b"decode" => {
            let hll = hll_bytes(v)?;
            if hll[ENCODING_AT] != SPARSE {
                return Err(CmdError::other("ERR HLL encoding is not sparse"));
            }
            let ops = &hll[HDR_SIZE..];
            let mut words = Vec::new();
            let mut p = 0;
            while p < ops.len() {
                let (op, runlen, oplen) = op_at(ops, p);
                words.push(match op {
                    Op::Zero => format!("z:{runlen}"),
                    Op::XZero => format!("Z:{runlen}"),
                    Op::Val(value) => format!("v:{value},{runlen}"),
                });
                p += oplen;
            }
            Ok(Reply::Bulk(Bytes::from(words.join(" "))))
        }
        b"encoding" => {
            let hll = hll_bytes(v)?;
            Ok(Reply::simple(if hll[ENCODING_AT] == SPARSE {
                "sparse"
            } else {
                "dense"
            }))
        }
        _ => Err(CmdError::other(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(&args[1])
        ))),
    }
}

/// Whether a PFDEBUG left its key as it was: all but a conversion to
/// dense (GETREG may convert too; it is counted as a change).
fn pfdebug_changed_nothing(args: &[Bytes], reply: &Reply) -> bool {
    match args.get(1).map(|a| a.to_ascii_lowercase()).as_deref() {
        Some(b"todense") => matches!(reply, Reply::Int(0)),
        Some(b"getreg") => false,
        _ => true,
    }
}

/// PFSELFTEST: checks this implementation as Redis's pfselftestCommand
/// checks its own: the packed 6-bit registers read back what was written
/// (100 rounds of random values), and HLLs fed 1 to 1,000,000 distinct
/// elements stay sparse while small, agree sparse and dense, and estimate
/// within six standard errors (1.04/sqrt(16384)) at each power of ten.
/// `seed` picks the values and elements. The error reply starts with
/// TESTFAILED, as Redis's.
pub fn self_test(seed: u64) -> Result<(), String> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut regs = vec![0u8; DENSE_SIZE - HDR_SIZE];
    let mut expected = vec![0u8; REGISTERS];
    for _ in 0..100 {
        for (i, e) in expected.iter_mut().enumerate() {
            *e = (next() & u64::from(REGISTER_MAX)) as u8;
            dense_put(&mut regs, i, *e);
        }
        for (i, &e) in expected.iter().enumerate() {
            if dense_get(&regs, i) != e {
                return Err(format!("TESTFAILED Register error at {i}"));
            }
        }
    }
    let mut sparse = new_hll();
    let mut dense = sparse_to_dense(&new_hll()).map_err(|_| "TESTFAILED empty HLL")?;
    let rel_err = 1.04 / (REGISTERS as f64).sqrt();
    let salt = next();
    let mut checkpoint: u64 = 1;
    for j in 1..=1_000_000u64 {
        let ele = (j ^ salt).to_le_bytes();
        let broken = |_| "TESTFAILED corrupt HLL".to_string();
        add(&mut sparse, &ele).map_err(broken)?;
        add(&mut dense, &ele).map_err(broken)?;
        if j != checkpoint {
            continue;
        }
        if j < SPARSE_MAX_BYTES as u64 / 2 && sparse[ENCODING_AT] != SPARSE {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let count = |hll: &[u8]| histogram(hll).map(|h| estimate(&h)).map_err(broken);
        let (dense_count, sparse_count) = (count(&dense)?, count(&sparse)?);
        if dense_count != sparse_count {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        // At 10 a collision is statistically likely now and then: one off
        // is allowed, as Redis allows.
        let max_err = if j == 10 {
            1.0
        } else {
            (rel_err * 6.0 * j as f64).ceil()
        };
        let abs_err = (j as f64 - dense_count as f64).abs();
        if abs_err > max_err {
            return Err(format!(
                "TESTFAILED Too big error. card:{j} abserr:{abs_err:.6}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000_000;

    #[test]
    fn the_self_test_passes() {
        for seed in [1, 42, 0xdead_beef] {
            assert_eq!(self_test(seed), Ok(()));
        }
    }

    #[test]
    fn pfdebug_reports_converts_and_decodes() {
        let mut st = Store::new(1);
        assert_eq!(
            run(&mut st, &[b"pfdebug", b"encoding", b"h"]),
            err("ERR The specified key does not exist")
        );
        run(&mut st, &[b"pfadd", b"h", b"a", b"b", b"c"]);
        assert_eq!(
            run(&mut st, &[b"pfdebug", b"encoding", b"h"]),
            Reply::simple("sparse")
        );
        let Reply::Bulk(decoded) = run(&mut st, &[b"pfdebug", b"DECODE", b"h"]) else {
            panic!("DECODE is a bulk string");
        };
        let decoded = String::from_utf8(decoded.to_vec()).unwrap();
        let covered: i64 = decoded
            .split(' ')
            .map(|w| {
                let n = w[2..].rsplit(',').next().unwrap();
                n.parse::<i64>().unwrap()
            })
            .sum();
        assert_eq!(covered, REGISTERS as i64, "{decoded}");
        assert_eq!(decoded.matches("v:").count(), 3, "{decoded}");
        let before = count(&st, &[b"h"]);
        let Reply::Array(regs) = run(&mut st, &[b"pfdebug", b"getreg", b"h"]) else {
            panic!("GETREG is an array");
        };
        assert_eq!(regs.len(), REGISTERS);
        assert_eq!(regs.iter().filter(|r| **r != Reply::Int(0)).count(), 3);
        assert_eq!(
            run(&mut st, &[b"pfdebug", b"encoding", b"h"]),
            Reply::simple("dense")
        );
        assert_eq!(count(&st, &[b"h"]), before);
        assert_eq!(run(&mut st, &[b"pfdebug", b"todense", b"h"]), Reply::Int(0));
        assert_eq!(
            run(&mut st, &[b"pfdebug", b"decode", b"h"]),
            err("ERR HLL encoding is not sparse")
        );
        assert_eq!(
            run(&mut st, &[b"pfdebug", b"nope", b"h"]),
            err("ERR Unknown PFDEBUG subcommand 'nope'")
        );
        run(&mut st, &[b"pfadd", b"s", b"x"]);
        assert_eq!(run(&mut st, &[b"pfdebug", b"todense", b"s"]), Reply::Int(1));
        run(&mut st, &[b"set", b"str", b"hello"]);
        assert_eq!(run(&mut st, &[b"pfdebug", b"getreg", b"str"]), err(NOT_HLL));
    }

    fn ctx() -> Ctx {
        Ctx {
            now_ms: NOW,
            seed: 42,
        }
    }

    fn args(a: &[&[u8]]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::copy_from_slice(s)).collect()
    }

    fn run(st: &mut Store, a: &[&[u8]]) -> Reply {
        match st.apply(0, &args(a), &ctx()) {
            Ok(r) => r,
            Err(e) => Reply::Error(e.text()),
        }
    }

    fn read(st: &Store, a: &[&[u8]]) -> Reply {
        match st.read(0, &args(a), &ctx()) {
            Ok(r) => r,
            Err(e) => Reply::Error(e.text()),
        }
    }

    fn err(text: &'static str) -> Reply {
        Reply::Error(text.into())
    }

    fn get(st: &Store, key: &[u8]) -> Vec<u8> {
        match st.live(0, key, NOW).map(|e| e.value) {
            Some(Value::Str(s) | Value::Raw(s)) => s.to_vec(),
            other => panic!("not a string: {other:?}"),
        }
    }

    fn put(st: &mut Store, key: &[u8], bytes: &[u8]) {
        st.db_mut(0)
            .set(key, Value::Str(CompactBytes::from_slice(bytes)), None);
    }

    /// PFADD of `n` elements "{prefix}{i}" in batches.
    fn add_many(st: &mut Store, key: &[u8], prefix: &str, range: std::ops::Range<usize>) {
        let elems: Vec<Vec<u8>> = range.map(|i| format!("{prefix}{i}").into_bytes()).collect();
        for chunk in elems.chunks(500) {
            let mut a: Vec<&[u8]> = vec![b"pfadd", key];
            a.extend(chunk.iter().map(|e| e.as_slice()));
            run(st, &a);
        }
    }

    fn count(st: &Store, keys: &[&[u8]]) -> i64 {
        let mut a: Vec<&[u8]> = vec![b"pfcount"];
        a.extend_from_slice(keys);
        match read(st, &a) {
            Reply::Int(n) => n,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn murmur_reference_values() {
        // The register/count pairs follow from the hash; the bytes of a
        // one-element HLL were checked against redis-server 7.0.
        assert_eq!(murmur64a(b"", 0), 0);
        let mut st = Store::default();
        assert_eq!(run(&mut st, &[b"pfadd", b"h", b"a"]), Reply::Int(1));
        let (idx, cnt) = pat_len(b"a");
        let bytes = get(&st, b"h");
        assert_eq!(&bytes[..16], b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80");
        let mut expect = Vec::new();
        push_zeroes(&mut expect, idx as i64);
        expect.push(val_op(cnt, 1));
        push_zeroes(&mut expect, (REGISTERS - idx - 1) as i64);
        assert_eq!(&bytes[16..], &expect[..]);
    }

    #[test]
    fn empty_and_small() {
        let mut st = Store::default();
        assert_eq!(read(&st, &[b"pfcount", b"nokey"]), Reply::Int(0));
        assert_eq!(run(&mut st, &[b"pfadd", b"e"]), Reply::Int(1));
        assert_eq!(get(&st, b"e"), b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff");
        assert_eq!(run(&mut st, &[b"pfadd", b"e"]), Reply::Int(0));
        assert_eq!(count(&st, &[b"e"]), 0);
        assert_eq!(
            run(&mut st, &[b"pfadd", b"s", b"a", b"b", b"c", b"a"]),
            Reply::Int(1)
        );
        assert_eq!(run(&mut st, &[b"pfadd", b"s", b"b", b"c"]), Reply::Int(0));
        assert_eq!(count(&st, &[b"s"]), 3);
        assert_eq!(count(&st, &[b"s", b"nokey", b"e"]), 3);
        assert_eq!(count(&st, &[b"nokey", b"nokey2"]), 0);
    }

    #[test]
    fn sparse_grows_then_turns_dense_with_sane_estimates() {
        let mut st = Store::default();
        add_many(&mut st, b"h", "el:", 0..100);
        let b = get(&st, b"h");
        assert_eq!(b[ENCODING_AT], SPARSE);
        assert!(b.len() <= SPARSE_MAX_BYTES);
        assert_eq!(count(&st, &[b"h"]), 100);
        add_many(&mut st, b"h", "el:", 100..10_000);
        let b = get(&st, b"h");
        assert_eq!(b[ENCODING_AT], DENSE);
        assert_eq!(b.len(), DENSE_SIZE);
        let n = count(&st, &[b"h"]);
        assert!((9_800..=10_200).contains(&n), "{n}");
        // Sparse and dense forms of the same registers agree.
        let mut small = Store::default();
        add_many(&mut small, b"x", "v", 0..300);
        let sparse = get(&small, b"x");
        let dense = sparse_to_dense(&sparse).unwrap();
        assert_eq!(histogram(&sparse).unwrap(), histogram(&dense).unwrap());
    }

    #[test]
    fn merge_and_multi_count() {
        let mut st = Store::default();
        add_many(&mut st, b"a", "", 0..1000);
        add_many(&mut st, b"b", "", 500..5000);
        let union = count(&st, &[b"a", b"b"]);
        assert!((4_900..=5_100).contains(&union), "{union}");
        assert_eq!(run(&mut st, &[b"pfmerge", b"m", b"a", b"b"]), Reply::ok());
        assert_eq!(get(&st, b"m")[ENCODING_AT], DENSE);
        assert_eq!(count(&st, &[b"m"]), union);
        // Sparse inputs only: the destination stays sparse.
        add_many(&mut st, b"c", "c", 0..20);
        add_many(&mut st, b"d", "d", 0..20);
        assert_eq!(run(&mut st, &[b"pfmerge", b"cd", b"c", b"d"]), Reply::ok());
        assert_eq!(get(&st, b"cd")[ENCODING_AT], SPARSE);
        assert_eq!(count(&st, &[b"cd"]), count(&st, &[b"c", b"d"]));
        // The destination is one of the sources; no source at all.
        assert_eq!(run(&mut st, &[b"pfmerge", b"c", b"d"]), Reply::ok());
        assert_eq!(count(&st, &[b"c"]), count(&st, &[b"cd"]));
        assert_eq!(run(&mut st, &[b"pfmerge", b"new"]), Reply::ok());
        assert_eq!(
            get(&st, b"new"),
            b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff"
        );
    }

    #[test]
    fn type_errors() {
        let mut st = Store::default();
        put(&mut st, b"str", b"hello world, not an hll");
        st.db_mut(0).set(b"int", Value::Int(12), None);
        run(&mut st, &[b"rpush", b"list", b"x"]);
        for key in [&b"str"[..], b"int"] {
            assert_eq!(run(&mut st, &[b"pfadd", key, b"x"]), err(NOT_HLL));
            assert_eq!(read(&st, &[b"pfcount", key]), err(NOT_HLL));
            assert_eq!(read(&st, &[b"pfcount", b"nokey", key]), err(NOT_HLL));
            assert_eq!(run(&mut st, &[b"pfmerge", b"d", key]), err(NOT_HLL));
            assert_eq!(run(&mut st, &[b"pfmerge", key, b"nokey"]), err(NOT_HLL));
        }
        let wt = "WRONGTYPE Operation against a key holding the wrong kind of value";
        assert_eq!(run(&mut st, &[b"pfadd", b"list", b"x"]), err(wt));
        assert_eq!(read(&st, &[b"pfcount", b"list"]), err(wt));
        assert_eq!(run(&mut st, &[b"pfmerge", b"list"]), err(wt));
        // Nothing was created by the failing merges.
        assert!(st.live(0, b"d", NOW).is_none());
        // Dense with a wrong size, unknown encoding, short header.
        let mut dense = vec![0u8; DENSE_SIZE + 1];
        dense[..4].copy_from_slice(b"HYLL");
        put(&mut st, b"bad", &dense);
        assert_eq!(read(&st, &[b"pfcount", b"bad"]), err(NOT_HLL));
        put(&mut st, b"bad", b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff");
        assert_eq!(read(&st, &[b"pfcount", b"bad"]), err(NOT_HLL));
        put(&mut st, b"bad", b"HYLL\x01\0\0");
        assert_eq!(run(&mut st, &[b"pfadd", b"bad", b"x"]), err(NOT_HLL));
    }

    #[test]
    fn corrupt_sparse_values_error() {
        let hdr = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80";
        let cases: &[&[u8]] = &[
            b"",             // no opcode at all
            b"\x7f\xfe",     // 16383 registers
            b"\x7f\xff\x00", // 16385 registers
            b"\x7f",         // truncated XZERO: 16129 registers
            b"\xff\x7f\xff", // VAL, then too many zeroes
            b"\x7f\xfe\xff", // VAL past the end
        ];
        for (n, tail) in cases.iter().enumerate() {
            let mut st = Store::default();
            let mut v = hdr.to_vec();
            v.extend_from_slice(tail);
            put(&mut st, b"h", &v);
            put(&mut st, b"ok", &new_hll());
            assert_eq!(read(&st, &[b"pfcount", b"h"]), err(INVALID_HLL), "{n}");
            assert_eq!(read(&st, &[b"pfcount", b"ok", b"h"]), err(INVALID_HLL));
            assert_eq!(run(&mut st, &[b"pfmerge", b"d", b"h"]), err(INVALID_HLL));
            assert!(st.live(0, b"d", NOW).is_none());
            assert_eq!(run(&mut st, &[b"pfmerge", b"h", b"ok"]), err(INVALID_HLL));
        }
        // An opcode past the 16384th register is corrupt everywhere (the
        // CVE-2025-32023 fix of Redis 7.0.15 as shipped by Debian).
        let mut st = Store::default();
        let mut v = hdr.to_vec();
        v.extend_from_slice(b"\x7f\xff\xff");
        put(&mut st, b"h", &v);
        assert_eq!(read(&st, &[b"pfcount", b"h"]), err(INVALID_HLL));
        assert_eq!(read(&st, &[b"pfcount", b"h", b"h"]), err(INVALID_HLL));
        // PFADD reaching past the covered registers fails.
        let mut st = Store::default();
        let mut v = hdr.to_vec();
        v.push(0x00); // one zero register only
        put(&mut st, b"h", &v);
        assert_eq!(run(&mut st, &[b"pfadd", b"h", b"a"]), err(INVALID_HLL));
        // A valid cache is answered as is, like Redis.
        let mut v = b"HYLL\x01\0\0\0\x2a\0\0\0\0\0\0\0".to_vec();
        v.extend_from_slice(b"\x7f\xff");
        put(&mut st, b"c", &v);
        assert_eq!(read(&st, &[b"pfcount", b"c"]), Reply::Int(42));
    }

    #[test]
    fn hostile_bytes_never_panic() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut st = Store::default();
        for round in 0..400 {
            let dense = round % 4 == 0;
            let len = if dense {
                DENSE_SIZE
            } else {
                HDR_SIZE + (next() % 64) as usize
            };
            let mut v: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            v[..4].copy_from_slice(b"HYLL");
            v[ENCODING_AT] = if dense { DENSE } else { SPARSE };
            if round % 3 == 0 {
                v[CARD_LAST] |= 0x80;
            }
            put(&mut st, b"h", &v);
            put(&mut st, b"g", &v);
            let e1 = format!("e{round}");
            let _ = read(&st, &[b"pfcount", b"h"]);
            let _ = read(&st, &[b"pfcount", b"h", b"g"]);
            let _ = run(&mut st, &[b"pfadd", b"h", e1.as_bytes(), b"x", b"y"]);
            let _ = run(&mut st, &[b"pfmerge", b"g", b"h"]);
            let _ = run(&mut st, &[b"pfmerge", b"m", b"g"]);
            // Whatever they hold now, they are still read without panic.
            let _ = read(&st, &[b"pfcount", b"h", b"g", b"m"]);
        }
        // Every sparse opcode byte, alone and as a 2-byte prefix.
        for b0 in 0..=255u8 {
            for b1 in [0u8, 0x3f, 0x7f, 0xbf, 0xff] {
                let mut v = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
                v.push(b0);
                v.push(b1);
                put(&mut st, b"h", &v);
                let _ = read(&st, &[b"pfcount", b"h"]);
                let _ = run(&mut st, &[b"pfadd", b"h", b"a", b"b"]);
                put(&mut st, b"h", &v[..v.len() - 1]);
                let _ = run(&mut st, &[b"pfadd", b"h", b"a"]);
                let _ = run(&mut st, &[b"pfmerge", b"h", b"g"]);
            }
        }
    }

    #[test]
    fn estimator_edges() {
        let mut h = [0i64; 64];
        h[0] = REGISTERS as i64;
        assert_eq!(estimate(&h), 0);
        // All registers at the maximum: an infinite estimate, which Redis
        // turns into LLONG_MIN.
        let mut h = [0i64; 64];
        h[Q + 1] = REGISTERS as i64;
        assert_eq!(estimate(&h), 1 << 63);
        let mut h = [0i64; 64];
        h[63] = REGISTERS as i64;
        assert_eq!(estimate(&h), 1 << 63);
        assert_eq!(c_estimate_to_u64(1e30), 1 << 63);
        assert_eq!(c_estimate_to_u64(f64::NAN), 1 << 63);
        assert_eq!(c_estimate_to_u64(2.5), 3);
    }

    #[test]
    fn table_entries() {
        let spec = |n: &str| COMMANDS.iter().find(|c| c.name == n).unwrap();
        let keys = |n: &str, a: &[&[u8]]| spec(n).keys_of(&args(a));
        assert_eq!(keys("pfadd", &[b"pfadd", b"k", b"a", b"b"]), vec![1]);
        assert_eq!(
            keys("pfcount", &[b"pfcount", b"a", b"b", b"c"]),
            vec![1, 2, 3]
        );
        assert_eq!(
            keys("pfmerge", &[b"pfmerge", b"d", b"s1", b"s2"]),
            vec![1, 2, 3]
        );
        assert!(spec("pfadd").is_write() && spec("pfmerge").is_write());
        assert!(!spec("pfcount").is_write());
    }
}
