//! Bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO.
//!
//! Bitmaps are ordinary strings (GET returns their bytes); bit 0 is the most
//! significant bit of the first byte. Replies, error texts and the order of
//! checks follow Redis 7.0 (`bitops.c`). Writes work on the raw byte form
//! (an int-encoded string is converted first, as Redis does) and keep the
//! key's TTL, except BITOP, which replaces its destination.

use crate::args::{eq_ic, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{CompactBytes, Keyspace, Value};
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags};
use bytes::Bytes;
use kvasir_resp::Reply;
use std::borrow::Cow;

const W_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const R: Flags = Flags::READONLY;
const RF: Flags = Flags::READONLY.union(Flags::FAST);
const ACL_W: &[&str] = &["write", "bitmap", "slow"];
const ACL_R: &[&str] = &["read", "bitmap", "slow"];
const ACL_RF: &[&str] = &["read", "bitmap", "fast"];
const G: &str = "bitmap";
const ONE_KEY: (i32, i32, i32) = (1, 1, 1);

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("bitcount", -2, R, ONE_KEY, ACL_R, G, "2.6.0", "Counts the number of set bits (population counting) in a string.", crate::read_handler!(bitcount)),
    cmd("bitfield", -2, W_OOM, ONE_KEY, ACL_W, G, "3.2.0", "Performs arbitrary bitfield integer operations on strings.", crate::write_handler!(bitfield)).events(crate::notify::Events::Custom(crate::notify::bitfield)).keys_access(crate::table::KeyAccess::ByArgs(bitfield_key_access)).with_key_specs(&[crate::table::KeySpec::RW.union(crate::table::KeySpec::ACCESS).union(crate::table::KeySpec::UPDATE).union(crate::table::KeySpec::VARIABLE_FLAGS)]),
    cmd("bitfield_ro", -2, RF, ONE_KEY, ACL_RF, G, "6.0.0", "Performs arbitrary read-only bitfield integer operations on strings.", crate::read_handler!(bitfield_ro)),
    // Destination and sources: every argument from index 2 is a key.
    cmd("bitop", -4, W_OOM, (2, -1, 1), ACL_W, G, "2.6.0", "Performs bitwise operations on multiple strings, and stores the result.", crate::write_handler!(bitop)).events(crate::notify::Events::Dest("set")).keys_access(crate::table::KeyAccess::WriteThenRead),
    cmd("bitpos", -3, R, ONE_KEY, ACL_R, G, "2.8.7", "Finds the first set (1) or clear (0) bit in a string.", crate::read_handler!(bitpos)),
    cmd("getbit", 3, RF, ONE_KEY, ACL_RF, G, "2.2.0", "Returns a bit value by offset.", crate::read_handler!(getbit)),
    cmd("setbit", 4, W_OOM, ONE_KEY, ACL_W, G, "2.2.0", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", crate::write_handler!(setbit)),
];

/// BITFIELD only reads its key when every operation is a GET (Redis's
/// bitfieldGetKeys: a user with read-only access may run such a call); a
/// SET, an INCRBY or a malformed tail needs read and write.
fn bitfield_key_access(args: &[Bytes]) -> crate::table::KeyAccess {
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - i - 1;
        let op = &args[i];
        if op.eq_ignore_ascii_case(b"get") && more >= 2 {
            i += 3;
        } else if op.eq_ignore_ascii_case(b"overflow") && more >= 1 {
            i += 2;
        } else {
            return crate::table::KeyAccess::ReadWrite;
        }
    }
    crate::table::KeyAccess::Read
}

/// Redis's default proto-max-bulk-len: bit offsets must address a byte
/// below it, and no write may grow a string beyond it.
const MAX_STRING_LEN: u64 = 512 * 1024 * 1024;

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/// The bytes of a string value, borrowed unless it is int-encoded;
/// WRONGTYPE for any other type.
fn string_bytes<K: Keyspace>(v: &Value<K>) -> Result<Cow<'_, [u8]>, CmdError> {
    match v {
        Value::Str(s) | Value::Raw(s) => Ok(Cow::Borrowed(s.as_slice())),
        Value::Int(i) => Ok(Cow::Owned(i.to_string().into_bytes())),
        Value::List(_) | Value::Hash(_) | Value::Set(_) | Value::ZSet(_) | Value::Stream(_) => {
            Err(CmdError::WrongType)
        }
    }
}

/// The live string at `key` for a read (None when missing).
fn read_string<'a, K: Keyspace>(
    store: &'a Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Option<Cow<'a, [u8]>>, CmdError> {
    store
        .live(db, key, ctx.now_ms)
        .map(|e| string_bytes(e.value))
        .transpose()
}

/// For writes: the bytes of the string at `key`, switched to the raw form
/// and zero-padded so that bit `max_bit` exists; a missing key is created.
/// WRONGTYPE for other types; a string that would grow beyond
/// proto-max-bulk-len is refused (and nothing is created).
/// The second value is true when the string was created or grown (a
/// change whatever the bits written), as Redis's lookupStringForBitCommand
/// reports.
fn bits_for_write<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    key: &[u8],
    max_bit: u64,
    ctx: &Ctx,
) -> Result<(&'a mut CompactBytes, bool), CmdError> {
    let need = (max_bit >> 3) + 1;
    if need > MAX_STRING_LEN {
        // WRONGTYPE first, as Redis checks the key before the size.
        if let Some(v) = store.live_value_mut(db, key, ctx) {
            string_bytes(v)?;
        }
        return Err(CmdError::other(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    let need = need as usize;
    let mut created = false;
    let v = store.live_value_mut_or_insert(db, key, ctx, || {
        created = true;
        Value::Raw(CompactBytes::from_elem(0, need))
    });
    match v {
        Value::Int(i) => *v = Value::Raw(CompactBytes::from_slice(i.to_string().as_bytes())),
        Value::Str(s) => *v = Value::Raw(std::mem::take(s)),
        _ => {}
    }
    match v {
        Value::Raw(s) => {
            let grown = s.len() < need;
            if grown {
                s.resize(need, 0);
            }
            Ok((s, created || grown))
        }
        _ => Err(CmdError::WrongType),
    }
}

// ---------------------------------------------------------------------------
// Argument parsing
// ---------------------------------------------------------------------------

/// Parses a bit offset as Redis's getBitOffsetFromArgument: a non-negative
/// integer whose byte is below proto-max-bulk-len. With `field_bits` > 0
/// (BITFIELD), `#N` means N * field_bits (multiplied with C's wrap-around).
fn bit_offset(arg: &[u8], field_bits: u32) -> Result<u64, CmdError> {
    let err = || CmdError::other("ERR bit offset is not an integer or out of range");
    let (digits, scale) = match arg.strip_prefix(b"#") {
        Some(rest) if field_bits > 0 => (rest, i64::from(field_bits)),
        _ => (arg, 1),
    };
    let n = parse_i64(digits).map_err(|_| err())?.wrapping_mul(scale);
    if n < 0 || (n >> 3) as u64 >= MAX_STRING_LEN {
        return Err(err());
    }
    Ok(n as u64)
}

/// BYTE or BIT: whether a range is given in bits.
fn range_unit_is_bit(arg: &[u8]) -> Result<bool, CmdError> {
    if eq_ic(arg, "BIT") {
        Ok(true)
    } else if eq_ic(arg, "BYTE") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Resolves a BITCOUNT/BITPOS range over a string of `len` bytes to an
/// inclusive range of absolute bit positions (None when empty): negative
/// indexes count from the end and clamp to 0, the end clamps to the last
/// byte (or bit).
fn bit_range(len: usize, start: i64, end: i64, in_bits: bool) -> Option<(u64, u64)> {
    let total = len as i64 * if in_bits { 8 } else { 1 };
    let from_end = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (from_end(start), from_end(end).min(total - 1));
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if in_bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

// ---------------------------------------------------------------------------
// SETBIT, GETBIT
// ---------------------------------------------------------------------------

/// SETBIT key offset 0|1: answers the previous bit; grows the string with
/// zero bytes as needed.
fn setbit<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let offset = bit_offset(&args[2], 0)?;
    let on = match parse_i64(&args[3]) {
        Ok(b @ (0 | 1)) => b == 1,
        _ => return Err(CmdError::other("ERR bit is not an integer or out of range")),
    };
    let (bytes, grown) = bits_for_write(store, db, &args[1], offset, ctx)?;
    let mask = 0x80u8 >> (offset & 7);
    let Some(byte) = bytes.get_mut((offset >> 3) as usize) else {
        return Err(CmdError::IndexOutOfRange);
    };
    let was = *byte & mask != 0;
    if on {
        *byte |= mask;
    } else {
        *byte &= !mask;
    }
    if !grown && was == on {
        store.unchanged.set(true);
    }
    Ok(Reply::Int(i64::from(was)))
}

/// GETBIT key offset: bits past the end (or of a missing key) are 0.
fn getbit<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let offset = bit_offset(&args[2], 0)?;
    let s = read_string(store, db, &args[1], ctx)?.unwrap_or_default();
    Ok(Reply::Int(get_bits(&s, offset, 1) as i64))
}

// ---------------------------------------------------------------------------
// BITCOUNT, BITPOS
// ---------------------------------------------------------------------------

/// BITCOUNT key [start end [BYTE|BIT]]. As in Redis 7.0 a missing key
/// answers 0 before the arguments are looked at.
fn bitcount<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let Some(s) = read_string(store, db, &args[1], ctx)? else {
        return Ok(Reply::Int(0));
    };
    let range = match args.len() {
        2 => bit_range(s.len(), 0, -1, false),
        4 | 5 => {
            let start = parse_i64(&args[2])?;
            let end = parse_i64(&args[3])?;
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Int(0));
            }
            let in_bits = match args.get(4) {
                Some(unit) => range_unit_is_bit(unit)?,
                None => false,
            };
            bit_range(s.len(), start, end, in_bits)
        }
        _ => return Err(CmdError::Syntax),
    };
    let count = range.map_or(0, |(first, last)| count_ones(&s, first, last));
    Ok(Reply::Int(count as i64))
}

/// Set bits of `s` between bit positions `first` and `last` (inclusive,
/// both inside `s`).
fn count_ones(s: &[u8], first: u64, last: u64) -> u64 {
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    let Some(bytes) = s.get(fb..=lb) else {
        return 0;
    };
    let before = bytes[0] & !(0xFFu8 >> (first & 7));
    let after = bytes[lb - fb] & (0xFFu8 >> (last & 7) >> 1);
    popcount(bytes) - u64::from(before.count_ones()) - u64::from(after.count_ones())
}

/// Set bits of `bytes`, eight bytes at a time (a portable build has no
/// popcnt instruction; one u64 count is far cheaper than eight u8 ones).
fn popcount(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let mut n: u64 = 0;
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        n += u64::from(u64::from_ne_bytes(a).count_ones());
    }
    n + words
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>()
}

/// BITPOS key bit [start [end [BYTE|BIT]]]: the first bit equal to `bit`
/// in the range, or -1. Looking for 0 without an explicit end, the string
/// counts as zero-padded: the first bit past the range is the answer.
fn bitpos<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let bit = match parse_i64(&args[2])? {
        b @ (0 | 1) => b == 1,
        _ => return Err(CmdError::other("ERR The bit argument must be 1 or 0.")),
    };
    let Some(s) = read_string(store, db, &args[1], ctx)? else {
        return Ok(Reply::Int(if bit { -1 } else { 0 }));
    };
    let (range, end_given) = match args.len() {
        3 => (bit_range(s.len(), 0, -1, false), false),
        4..=6 => {
            let start = parse_i64(&args[3])?;
            let in_bits = match args.get(5) {
                Some(unit) => range_unit_is_bit(unit)?,
                None => false,
            };
            let end = match args.get(4) {
                Some(end) => parse_i64(end)?,
                None => -1,
            };
            (bit_range(s.len(), start, end, in_bits), args.len() > 4)
        }
        _ => return Err(CmdError::Syntax),
    };
    let Some((first, last)) = range else {
        return Ok(Reply::Int(-1));
    };
    let pos = match first_bit(&s, first, last, bit) {
        Some(p) => p as i64,
        None if !bit && !end_given => last as i64 + 1,
        None => -1,
    };
    Ok(Reply::Int(pos))
}

/// The first bit equal to `bit` between positions `first` and `last`.
fn first_bit(s: &[u8], first: u64, last: u64, bit: bool) -> Option<u64> {
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    for (i, &b) in s.get(fb..=lb)?.iter().enumerate() {
        // Set bits of `wanted` are the matches.
        let mut wanted = if bit { b } else { !b };
        if i == 0 {
            wanted &= 0xFF >> (first & 7);
        }
        if i == lb - fb {
            wanted &= !(0xFF >> (last & 7) >> 1);
        }
        if wanted != 0 {
            return Some((fb + i) as u64 * 8 + u64::from(wanted.leading_zeros()));
        }
    }
    None
}

// ---------------------------------------------------------------------------
// BITOP
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...]: missing sources count as
/// empty strings, shorter ones are zero-padded; the result replaces the
/// destination (TTL cleared), or deletes it when empty. Answers its length.
fn bitop<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let op = [
        ("AND", BitOp::And),
        ("OR", BitOp::Or),
        ("XOR", BitOp::Xor),
        ("NOT", BitOp::Not),
    ]
    .into_iter()
    .find(|(name, _)| eq_ic(&args[1], name))
    .map(|(_, op)| op)
    .ok_or(CmdError::Syntax)?;
    if op == BitOp::Not && args.len() != 4 {
        return Err(CmdError::other(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let (dest, keys) = (&args[2], &args[3..]);
    for k in keys {
        store.expire_if_needed(db, k, ctx);
    }
    let result = {
        let store = &*store;
        let mut sources = Vec::with_capacity(keys.len());
        for k in keys {
            sources.push(read_string(store, db, k, ctx)?.unwrap_or_default());
        }
        combine(op, &sources)
    };
    let len = result.len();
    if len == 0 {
        store.db_mut(db).remove(dest);
    } else {
        let value = Value::Raw(CompactBytes::from_vec(result));
        store.db_mut(db).set(dest, value, None);
    }
    Ok(Reply::Int(len as i64))
}

/// Applies `op` byte by byte over `sources` (at least one), zero-padding
/// the shorter ones to the longest.
fn combine(op: BitOp, sources: &[Cow<'_, [u8]>]) -> Vec<u8> {
    let Some((head, rest)) = sources.split_first() else {
        return Vec::new();
    };
    let longest = sources.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = head.to_vec();
    out.resize(longest, 0);
    match op {
        BitOp::Not => out.iter_mut().for_each(|b| *b = !*b),
        BitOp::And => {
            for s in rest {
                out.iter_mut().zip(s.iter()).for_each(|(o, b)| *o &= b);
                out[s.len()..].fill(0);
            }
        }
        BitOp::Or => {
            for s in rest {
                out.iter_mut().zip(s.iter()).for_each(|(o, b)| *o |= b);
            }
        }
        BitOp::Xor => {
            for s in rest {
                out.iter_mut().zip(s.iter()).for_each(|(o, b)| *o ^= b);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// BITFIELD, BITFIELD_RO
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One BITFIELD operation: a field of `bits` bits at bit `offset`.
#[derive(Debug, Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// Parses a field type (`i1`..`i64`, `u1`..`u63`): (signed, bits).
fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let err = || {
        CmdError::other(
            "ERR Invalid bitfield type. Use something like i16 u8. \
             Note that u64 is not supported but i64 is.",
        )
    };
    let (signed, max) = match arg.first() {
        Some(b'i') => (true, 64),
        Some(b'u') => (false, 63),
        _ => return Err(err()),
    };
    match parse_i64(&arg[1..]) {
        Ok(bits) if (1..=max).contains(&bits) => Ok((signed, bits as u32)),
        _ => Err(err()),
    }
}

/// Parses the operations after the key, as Redis's bitfieldGeneric: GET
/// type offset, SET/INCRBY type offset value, OVERFLOW WRAP|SAT|FAIL
/// (applies to the operations after it).
fn parse_fields(args: &[Bytes]) -> Result<Vec<Field>, CmdError> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while i < args.len() {
        let rest = args.len() - i - 1;
        let a = &args[i];
        let op_args = if eq_ic(a, "GET") && rest >= 2 {
            2
        } else if (eq_ic(a, "SET") || eq_ic(a, "INCRBY")) && rest >= 3 {
            3
        } else if eq_ic(a, "OVERFLOW") && rest >= 1 {
            let kind = &args[i + 1];
            overflow = if eq_ic(kind, "WRAP") {
                Overflow::Wrap
            } else if eq_ic(kind, "SAT") {
                Overflow::Sat
            } else if eq_ic(kind, "FAIL") {
                Overflow::Fail
            } else {
                return Err(CmdError::other("ERR Invalid OVERFLOW type specified"));
            };
            i += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(&args[i + 1])?;
        let offset = bit_offset(&args[i + 2], bits)?;
        let op = if op_args == 2 {
            FieldOp::Get
        } else if eq_ic(a, "SET") {
            FieldOp::Set(parse_i64(&args[i + 3])?)
        } else {
            FieldOp::IncrBy(parse_i64(&args[i + 3])?)
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        i += 1 + op_args;
    }
    Ok(fields)
}

fn bitfield<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let fields = parse_fields(args)?;
    let last_bit = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(|f| f.offset + u64::from(f.bits) - 1)
        .max();
    let Some(last_bit) = last_bit else {
        store.unchanged.set(true);
        return read_fields(store, db, args, ctx, &fields);
    };
    let (bytes, grown) = bits_for_write(store, db, &args[1], last_bit, ctx)?;
    let mut changed = grown;
    let replies = fields
        .iter()
        .map(|f| {
            let (reply, wrote) = run_field(bytes, f);
            changed |= wrote;
            reply
        })
        .collect();
    // As Redis: only a field whose bits changed (or a grown string)
    // counts as a change.
    if !changed {
        store.unchanged.set(true);
    }
    Ok(Reply::Array(replies))
}

fn bitfield_ro<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let fields = parse_fields(args)?;
    if fields.iter().any(|f| f.op != FieldOp::Get) {
        return Err(CmdError::other(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    read_fields(store, db, args, ctx, &fields)
}

/// Runs GET-only operations without creating the key.
fn read_fields<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    fields: &[Field],
) -> CmdResult {
    let s = read_string(store, db, &args[1], ctx)?.unwrap_or_default();
    let replies = fields.iter().map(|f| field_get(&s, f)).collect();
    Ok(Reply::Array(replies))
}

fn field_get(s: &[u8], f: &Field) -> Reply {
    let raw = get_bits(s, f.offset, f.bits);
    Reply::Int(if f.signed {
        sign_extend(raw, f.bits)
    } else {
        raw as i64
    })
}

/// Runs one operation on a string already long enough for every write.
/// SET answers the old value, INCRBY the new one; with OVERFLOW FAIL an
/// overflowing write is skipped and answers nil.
/// A field's reply, and whether its bits changed.
fn run_field(s: &mut [u8], f: &Field) -> (Reply, bool) {
    let (value, incr, is_set) = match f.op {
        FieldOp::Get => return (field_get(s, f), false),
        FieldOp::Set(v) => (v, 0, true),
        FieldOp::IncrBy(by) => (0, by, false),
    };
    let old = get_bits(s, f.offset, f.bits);
    let (new, reply) = if f.signed {
        let old = sign_extend(old, f.bits);
        let base = if is_set { value } else { old };
        let Some(new) = signed_result(base, incr, f.bits, f.overflow) else {
            return (Reply::Nil, false);
        };
        (new as u64, if is_set { old } else { new })
    } else {
        let base = if is_set { value as u64 } else { old };
        let Some(new) = unsigned_result(base, incr, f.bits, f.overflow) else {
            return (Reply::Nil, false);
        };
        (new, if is_set { old as i64 } else { new as i64 })
    };
    set_bits(s, f.offset, f.bits, new);
    (Reply::Int(reply), get_bits(s, f.offset, f.bits) != old)
}

/// `value + incr` for an unsigned field of `bits` (at most 63) bits, with
/// Redis's checkUnsignedBitfieldOverflow rules (a SET passes its value
/// with incr 0, so a negative value counts as too big); None for FAIL.
fn unsigned_result(value: u64, incr: i64, bits: u32, overflow: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = 0u64.wrapping_sub(value) as i64;
    let limit = if value > max || (incr > 0 && incr > max_incr) {
        max
    } else if incr < 0 && incr < min_incr {
        0
    } else {
        return Some(value.wrapping_add(incr as u64));
    };
    match overflow {
        Overflow::Wrap => Some(value.wrapping_add(incr as u64) & max),
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    }
}

/// `value + incr` for a signed field of `bits` bits, with Redis's
/// checkSignedBitfieldOverflow rules; None for FAIL.
fn signed_result(value: i64, incr: i64, bits: u32, overflow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let limit = if value > max
        || (bits != 64 && incr > max_incr)
        || (value >= 0 && incr > 0 && incr > max_incr)
    {
        max
    } else if value < min
        || (bits != 64 && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        min
    } else {
        return Some(value.wrapping_add(incr));
    };
    match overflow {
        Overflow::Wrap => Some(sign_extend((value as u64).wrapping_add(incr as u64), bits)),
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    }
}

/// The `bits` low bits of `raw` as a two's complement number.
fn sign_extend(raw: u64, bits: u32) -> i64 {
    if bits < 64 && raw & (1 << (bits - 1)) != 0 {
        (raw | (u64::MAX << bits)) as i64
    } else if bits < 64 {
        (raw & !(u64::MAX << bits)) as i64
    } else {
        raw as i64
    }
}

/// Reads `bits` bits from bit `offset` (most significant first); bits past
/// the end of `s` are 0.
fn get_bits(s: &[u8], offset: u64, bits: u32) -> u64 {
    (offset..offset + u64::from(bits)).fold(0, |acc, pos| {
        let byte = s.get((pos >> 3) as usize).copied().unwrap_or(0);
        (acc << 1) | u64::from((byte >> (7 - (pos & 7))) & 1)
    })
}

/// Writes the `bits` low bits of `value` at bit `offset` (most significant
/// first); `s` must be long enough.
fn set_bits(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..u64::from(bits) {
        let pos = offset + i;
        let mask = 0x80u8 >> (pos & 7);
        if let Some(byte) = s.get_mut((pos >> 3) as usize) {
            if (value >> (u64::from(bits) - 1 - i)) & 1 == 1 {
                *byte |= mask;
            } else {
                *byte &= !mask;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000_000;

    fn ctx() -> Ctx {
        Ctx {
            now_ms: NOW,
            seed: 42,
        }
    }

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    fn run(st: &mut Store, a: &[&str]) -> Reply {
        match st.apply(0, &args(a), &ctx()) {
            Ok(r) => r,
            Err(e) => Reply::Error(e.text()),
        }
    }

    fn read(st: &Store, a: &[&str]) -> Reply {
        match st.read(0, &args(a), &ctx()) {
            Ok(r) => r,
            Err(e) => Reply::Error(e.text()),
        }
    }

    fn int(i: i64) -> Reply {
        Reply::Int(i)
    }

    fn err(text: &'static str) -> Reply {
        Reply::Error(text.into())
    }

    fn ints(v: &[Option<i64>]) -> Reply {
        Reply::Array(v.iter().map(|i| i.map_or(Reply::Nil, Reply::Int)).collect())
    }

    fn get(st: &Store, key: &str) -> Reply {
        read(st, &["get", key])
    }

    fn bulk(b: &[u8]) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(b))
    }

    const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";

    #[test]
    fn setbit_getbit() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["setbit", "k", "7", "1"]), int(0));
        assert_eq!(run(&mut s, &["setbit", "k", "7", "1"]), int(1));
        assert_eq!(get(&s, "k"), bulk(b"\x01"));
        assert_eq!(run(&mut s, &["setbit", "k", "17", "1"]), int(0));
        assert_eq!(get(&s, "k"), bulk(b"\x01\x00\x40"));
        assert_eq!(run(&mut s, &["setbit", "k", "7", "0"]), int(1));
        assert_eq!(read(&s, &["getbit", "k", "17"]), int(1));
        assert_eq!(read(&s, &["getbit", "k", "7"]), int(0));
        assert_eq!(read(&s, &["getbit", "k", "4294967295"]), int(0));
        assert_eq!(read(&s, &["getbit", "nokey", "3"]), int(0));

        // Int-encoded strings are bit-addressed through their digits.
        assert_eq!(run(&mut s, &["set", "n", "1"]), Reply::ok());
        assert_eq!(read(&s, &["getbit", "n", "2"]), int(1)); // '1' = 0x31
        assert_eq!(run(&mut s, &["setbit", "n", "6", "1"]), int(0));
        assert_eq!(get(&s, "n"), bulk(b"3"));

        for bad in ["-1", "4294967296", "x", "1.5"] {
            assert_eq!(run(&mut s, &["setbit", "k", bad, "1"]), err(BAD_OFFSET));
            assert_eq!(read(&s, &["getbit", "k", bad]), err(BAD_OFFSET));
        }
        let bad_bit = "ERR bit is not an integer or out of range";
        assert_eq!(run(&mut s, &["setbit", "k", "1", "2"]), err(bad_bit));
        assert_eq!(run(&mut s, &["setbit", "k", "1", "-1"]), err(bad_bit));
        assert_eq!(run(&mut s, &["lpush", "l", "a"]), int(1));
        assert_eq!(
            run(&mut s, &["setbit", "l", "1", "1"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
    }

    #[test]
    fn setbit_keeps_the_ttl() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["set", "k", "a", "PX", "500"]), Reply::ok());
        assert_eq!(run(&mut s, &["setbit", "k", "0", "1"]), int(0));
        assert_eq!(read(&s, &["pttl", "k"]), int(500));
        assert_eq!(get(&s, "k"), bulk(b"\xe1"));
    }

    #[test]
    fn bitcount_ranges() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["set", "k", "foobar"]), Reply::ok());
        let cases: &[(&[&str], i64)] = &[
            (&[], 26),
            (&["0", "0"], 4),
            (&["1", "1"], 6),
            (&["1", "1", "BYTE"], 6),
            (&["5", "30", "BIT"], 17),
            (&["-2", "-1"], 7),
            (&["-1", "-2"], 0),
            (&["0", "-100"], 4),
            (&["100", "200"], 0),
            (&["-100", "100", "bit"], 26),
            (&["-1", "-1", "BIT"], 0),
        ];
        for (range, want) in cases {
            let mut a = vec!["bitcount", "k"];
            a.extend_from_slice(range);
            assert_eq!(read(&s, &a), int(*want), "{range:?}");
        }
        assert_eq!(read(&s, &["bitcount", "k", "1"]), err("ERR syntax error"));
        assert_eq!(
            read(&s, &["bitcount", "k", "1", "2", "bits"]),
            err("ERR syntax error")
        );
        assert_eq!(
            read(&s, &["bitcount", "k", "a", "2"]),
            err("ERR value is not an integer or out of range")
        );
        // Redis 7.0 answers 0 for a missing key before parsing the range.
        assert_eq!(read(&s, &["bitcount", "no", "a"]), int(0));
    }

    #[test]
    fn bitpos_rules() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["set", "k", "\u{0}\u{7f}"]), Reply::ok());
        assert_eq!(read(&s, &["bitpos", "k", "1"]), int(9));
        assert_eq!(read(&s, &["bitpos", "k", "0"]), int(0));
        assert_eq!(read(&s, &["bitpos", "k", "0", "1"]), int(8));
        assert_eq!(read(&s, &["bitpos", "k", "1", "9", "-1", "BIT"]), int(9));
        assert_eq!(read(&s, &["bitpos", "k", "1", "10", "12", "bit"]), int(10));
        assert_eq!(read(&s, &["bitpos", "k", "0", "9", "15", "BIT"]), int(-1));
        assert_eq!(read(&s, &["bitpos", "k", "1", "0", "0"]), int(-1));
        assert_eq!(read(&s, &["bitpos", "k", "1", "5", "3"]), int(-1));
        assert_eq!(run(&mut s, &["set", "f", "\u{7f}\u{7f}"]), Reply::ok());
        assert_eq!(run(&mut s, &["setbit", "f", "8", "1"]), int(0));
        assert_eq!(run(&mut s, &["setbit", "f", "0", "1"]), int(0));
        // All ones: without an end the string counts as zero-padded.
        assert_eq!(read(&s, &["bitpos", "f", "0"]), int(16));
        assert_eq!(read(&s, &["bitpos", "f", "0", "1"]), int(16));
        assert_eq!(read(&s, &["bitpos", "f", "0", "0", "-1"]), int(-1));
        assert_eq!(read(&s, &["bitpos", "no", "0"]), int(0));
        assert_eq!(read(&s, &["bitpos", "no", "1"]), int(-1));
        assert_eq!(read(&s, &["bitpos", "no", "1", "x"]), int(-1));
        assert_eq!(
            read(&s, &["bitpos", "k", "2"]),
            err("ERR The bit argument must be 1 or 0.")
        );
        assert_eq!(
            read(&s, &["bitpos", "k", "1", "0", "1", "bit", "x"]),
            err("ERR syntax error")
        );
        assert_eq!(
            read(&s, &["bitpos", "k", "1", "0", "1", "bits"]),
            err("ERR syntax error")
        );
        assert_eq!(run(&mut s, &["set", "e", ""]), Reply::ok());
        assert_eq!(read(&s, &["bitpos", "e", "0"]), int(-1));
    }

    #[test]
    fn bitop_ops() {
        let mut s = Store::default();
        assert_eq!(
            run(&mut s, &["bitfield", "a", "set", "u16", "0", "4080"]),
            ints(&[Some(0)])
        );
        assert_eq!(run(&mut s, &["set", "b", "<"]), Reply::ok());
        assert_eq!(run(&mut s, &["bitop", "and", "d", "a", "b"]), int(2));
        assert_eq!(get(&s, "d"), bulk(b"\x0c\x00"));
        assert_eq!(run(&mut s, &["bitop", "OR", "d", "a", "b", "no"]), int(2));
        assert_eq!(get(&s, "d"), bulk(b"\x3f\xf0"));
        assert_eq!(run(&mut s, &["bitop", "xor", "d", "a", "b"]), int(2));
        assert_eq!(get(&s, "d"), bulk(b"\x33\xf0"));
        assert_eq!(run(&mut s, &["bitop", "not", "d", "a"]), int(2));
        assert_eq!(get(&s, "d"), bulk(b"\xf0\x0f"));
        assert_eq!(
            run(&mut s, &["bitop", "not", "d", "a", "b"]),
            err("ERR BITOP NOT must be called with a single source key.")
        );
        assert_eq!(
            run(&mut s, &["bitop", "nand", "d", "a"]),
            err("ERR syntax error")
        );
        // An empty result deletes the destination (and its TTL goes too).
        assert_eq!(run(&mut s, &["bitop", "or", "d", "x", "y"]), int(0));
        assert_eq!(get(&s, "d"), Reply::Nil);
        assert_eq!(run(&mut s, &["set", "d", "v", "EX", "100"]), Reply::ok());
        assert_eq!(run(&mut s, &["bitop", "and", "d", "a"]), int(2));
        assert_eq!(read(&s, &["ttl", "d"]), int(-1));
        assert_eq!(run(&mut s, &["lpush", "l", "x"]), int(1));
        assert_eq!(
            run(&mut s, &["bitop", "or", "d", "a", "l"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
    }

    #[test]
    fn bitop_key_spec_covers_destination_and_sources() {
        let spec = crate::table::lookup(b"BITOP").map(|c| c.key_indexes(6));
        assert_eq!(spec, Some(vec![2, 3, 4, 5]));
    }

    #[test]
    fn bitfield_ops() {
        let mut s = Store::default();
        assert_eq!(
            run(
                &mut s,
                &["bitfield", "k", "set", "i8", "0", "-100", "get", "u8", "0"]
            ),
            ints(&[Some(0), Some(156)])
        );
        assert_eq!(
            run(&mut s, &["bitfield", "k", "incrby", "i8", "0", "-100"]),
            ints(&[Some(56)])
        );
        assert_eq!(
            run(
                &mut s,
                &[
                    "bitfield", "k", "overflow", "sat", "incrby", "i8", "0", "-200", "overflow",
                    "fail", "incrby", "i8", "0", "-1", "get", "i8", "0"
                ]
            ),
            ints(&[Some(-128), None, Some(-128)])
        );
        assert_eq!(
            run(
                &mut s,
                &["bitfield", "u", "set", "u4", "#1", "-1", "get", "u8", "0"]
            ),
            ints(&[Some(0), Some(15)])
        );
        assert_eq!(
            run(
                &mut s,
                &[
                    "bitfield", "u", "overflow", "sat", "set", "u4", "0", "-1", "incrby", "u4",
                    "0", "-20"
                ]
            ),
            ints(&[Some(0), Some(0)])
        );
        assert_eq!(
            run(
                &mut s,
                &[
                    "bitfield",
                    "w",
                    "incrby",
                    "u2",
                    "100",
                    "7",
                    "incrby",
                    "i64",
                    "0",
                    "9223372036854775807",
                    "incrby",
                    "i64",
                    "0",
                    "1"
                ]
            ),
            ints(&[Some(3), Some(i64::MAX), Some(i64::MIN)])
        );
        assert_eq!(read(&s, &["strlen", "w"]), int(13));
        assert_eq!(
            run(&mut s, &["bitfield", "none", "get", "u8", "0"]),
            ints(&[Some(0)])
        );
        assert_eq!(read(&s, &["exists", "none"]), int(0));
        assert_eq!(run(&mut s, &["bitfield", "none"]), ints(&[]));

        let bad_type = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
        for t in ["u64", "i65", "i0", "x8", "I8", "", "u"] {
            assert_eq!(
                run(&mut s, &["bitfield", "k", "get", t, "0"]),
                err(bad_type),
                "{t}"
            );
        }
        assert_eq!(
            run(&mut s, &["bitfield", "k", "get", "u8"]),
            err("ERR syntax error")
        );
        assert_eq!(
            run(&mut s, &["bitfield", "k", "foo"]),
            err("ERR syntax error")
        );
        assert_eq!(
            run(&mut s, &["bitfield", "k", "overflow", "up"]),
            err("ERR Invalid OVERFLOW type specified")
        );
        assert_eq!(
            run(&mut s, &["bitfield", "k", "get", "u8", "#-1"]),
            err(BAD_OFFSET)
        );
        assert_eq!(
            run(&mut s, &["bitfield", "k", "set", "u8", "0", "x"]),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            run(&mut s, &["bitfield", "big", "set", "u8", "4294967295", "1"]),
            err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
        );
        assert_eq!(read(&s, &["exists", "big"]), int(0));

        assert_eq!(
            read(&s, &["bitfield_ro", "k", "get", "i8", "0"]),
            ints(&[Some(-128)])
        );
        assert_eq!(
            read(
                &s,
                &["bitfield_ro", "k", "get", "i8", "0", "set", "u1", "0", "1"]
            ),
            err("ERR BITFIELD_RO only supports the GET subcommand")
        );
    }

    #[test]
    fn overflow_rules() {
        use Overflow::*;
        assert_eq!(unsigned_result(250, 10, 8, Wrap), Some(4));
        assert_eq!(unsigned_result(250, 10, 8, Sat), Some(255));
        assert_eq!(unsigned_result(250, 10, 8, Fail), None);
        assert_eq!(unsigned_result(5, -10, 8, Wrap), Some(251));
        assert_eq!(unsigned_result(5, -10, 8, Sat), Some(0));
        assert_eq!(unsigned_result(u64::MAX, 0, 8, Sat), Some(255));
        assert_eq!(signed_result(120, 10, 8, Wrap), Some(-126));
        assert_eq!(signed_result(-120, -10, 8, Sat), Some(-128));
        assert_eq!(signed_result(200, 0, 8, Wrap), Some(-56));
        assert_eq!(signed_result(i64::MIN, -1, 64, Wrap), Some(i64::MAX));
        assert_eq!(signed_result(i64::MIN, -1, 64, Sat), Some(i64::MIN));
        assert_eq!(signed_result(5, -3, 64, Fail), Some(2));
    }
}
