//! Lists: pushes and pops at both ends, positional access, LPOS, moves
//! between lists, LMPOP and the blocking forms.
//!
//! Replies, errors and the order in which arguments are checked follow Redis
//! 7.0's `t_list.c`. The value type and its encodings are the engine's,
//! reached through [`ListOps`]; this module passes it the configured
//! limits (`store.limits`, of which lists use `list_max_listpack_size`).
//!
//! Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) serve the
//! request when they can and otherwise answer [`CmdError::WouldBlock`]; the
//! server parks the client and runs the same command again when one of the
//! keys is written. They never wait here.

use crate::args::{eq_ic, parse_i64, parse_timeout};
use crate::error::{BlockOn, CmdError, CmdResult};
use crate::keyspace::list_ops::{Elem, End};
use crate::keyspace::{Collection, Keyspace, ListOps, Value};
use crate::store::{Ctx, Store};
use crate::table::{cmd, keys_after_numkeys, CommandSpec, Flags};
use bytes::{Bytes, BytesMut};
use kvasir_resp::Reply;

const WDF: Flags = Flags::WRITE.union(Flags::DENYOOM).union(Flags::FAST);
const WF: Flags = Flags::WRITE.union(Flags::FAST);
const WD: Flags = Flags::WRITE.union(Flags::DENYOOM);
const W: Flags = Flags::WRITE;
const RF: Flags = Flags::READONLY.union(Flags::FAST);
const R: Flags = Flags::READONLY;
const W_MOVABLE: Flags = Flags::WRITE.union(Flags::MOVABLEKEYS);
const W_BLOCK: Flags = Flags::WRITE.union(Flags::NOSCRIPT).union(Flags::BLOCKING);
const WD_BLOCK: Flags = WD.union(Flags::NOSCRIPT).union(Flags::BLOCKING);
const W_BLOCK_MOVABLE: Flags = Flags::WRITE
    .union(Flags::BLOCKING)
    .union(Flags::MOVABLEKEYS);
const ACL_WF: &[&str] = &["write", "list", "fast"];
const ACL_W: &[&str] = &["write", "list", "slow"];
const ACL_RF: &[&str] = &["read", "list", "fast"];
const ACL_R: &[&str] = &["read", "list", "slow"];
const ACL_WB: &[&str] = &["write", "list", "slow", "blocking"];
const G: &str = "list";
const ONE_KEY: (i32, i32, i32) = (1, 1, 1);
const TWO_KEYS: (i32, i32, i32) = (1, 2, 1);
const NO_KEYS: (i32, i32, i32) = (0, 0, 0);

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("blmove", 6, WD_BLOCK, TWO_KEYS, ACL_WB, G, "6.2.0", "Pop an element from a list, push it to another list and return it; or block until one is available", crate::write_handler!(blmove)).events(crate::notify::Events::Custom(crate::notify::lmove)).keys_access(crate::table::KeyAccess::ReadWriteThenWrite),
    CommandSpec { key_finder: Some(keys_after_numkeys::<2>), ..cmd("blmpop", -5, W_BLOCK_MOVABLE, NO_KEYS, ACL_WB, G, "7.0.0", "Pop elements from a list, or block until one is available", crate::write_handler!(blmpop)) }.events(crate::notify::Events::Custom(crate::notify::lmpop)).with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE]),
    cmd("blpop", -3, W_BLOCK, (1, -2, 1), ACL_WB, G, "2.0.0", "Remove and get the first element in a list, or block until one is available", crate::write_handler!(blpop)).events(crate::notify::Events::Custom(crate::notify::blpop)).with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE]),
    cmd("brpop", -3, W_BLOCK, (1, -2, 1), ACL_WB, G, "2.0.0", "Remove and get the last element in a list, or block until one is available", crate::write_handler!(brpop)).events(crate::notify::Events::Custom(crate::notify::brpop)).with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE]),
    cmd("brpoplpush", 4, WD_BLOCK, TWO_KEYS, ACL_WB, G, "2.2.0", "Pop an element from a list, push it to another list and return it; or block until one is available", crate::write_handler!(brpoplpush)).events(crate::notify::Events::Custom(crate::notify::rpoplpush)).keys_access(crate::table::KeyAccess::ReadWriteThenWrite),
    cmd("lindex", 3, R, ONE_KEY, ACL_R, G, "1.0.0", "Get an element from a list by its index", crate::read_handler!(lindex)),
    cmd("linsert", 5, WD, ONE_KEY, ACL_W, G, "2.2.0", "Insert an element before or after another element in a list", crate::write_handler!(linsert)).idle_on_empty().keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_INSERT]),
    cmd("llen", 2, RF, ONE_KEY, ACL_RF, G, "1.0.0", "Get the length of a list", crate::read_handler!(llen)).keys_access(crate::table::KeyAccess::Existence),
    cmd("lmove", 5, WD, TWO_KEYS, ACL_W, G, "6.2.0", "Pop an element from a list, push it to another list and return it", crate::write_handler!(lmove)).events(crate::notify::Events::Custom(crate::notify::lmove)).keys_access(crate::table::KeyAccess::ReadWriteThenWrite),
    CommandSpec { key_finder: Some(keys_after_numkeys::<1>), ..cmd("lmpop", -4, W_MOVABLE, NO_KEYS, ACL_W, G, "7.0.0", "Pop elements from a list", crate::write_handler!(lmpop)) }.events(crate::notify::Events::Custom(crate::notify::lmpop)).with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE]),
    cmd("lpop", -2, WF, ONE_KEY, ACL_WF, G, "1.0.0", "Remove and get the first elements in a list", crate::write_handler!(lpop)).idle_on_empty().with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE]),
    cmd("lpos", -3, R, ONE_KEY, ACL_R, G, "6.0.6", "Return the index of matching elements on a list", crate::read_handler!(lpos)),
    cmd("lpush", -3, WDF, ONE_KEY, ACL_WF, G, "1.0.0", "Prepend one or multiple elements to a list", crate::write_handler!(lpush)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_INSERT]),
    cmd("lpushx", -3, WDF, ONE_KEY, ACL_WF, G, "2.2.0", "Prepend an element to a list, only if the list exists", crate::write_handler!(lpushx)).idle_on_empty().events(crate::notify::Events::Named("lpush")).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_INSERT]),
    cmd("lrange", 4, R, ONE_KEY, ACL_R, G, "1.0.0", "Get a range of elements from a list", crate::read_handler!(lrange)),
    cmd("lrem", 4, W, ONE_KEY, ACL_W, G, "1.0.0", "Remove elements from a list", crate::write_handler!(lrem)).idle_on_empty().keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_DELETE]),
    cmd("lset", 4, WD, ONE_KEY, ACL_W, G, "1.0.0", "Set the value of an element in a list by its index", crate::write_handler!(lset)).keys_access(crate::table::KeyAccess::Write),
    cmd("ltrim", 4, W, ONE_KEY, ACL_W, G, "1.0.0", "Trim a list to the specified range", crate::write_handler!(ltrim)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_DELETE]),
    cmd("rpop", -2, WF, ONE_KEY, ACL_WF, G, "1.0.0", "Remove and get the last elements in a list", crate::write_handler!(rpop)).idle_on_empty().with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE]),
    cmd("rpoplpush", 3, WD, TWO_KEYS, ACL_W, G, "1.2.0", "Remove the last element in a list, prepend it to another list and return it", crate::write_handler!(rpoplpush)).events(crate::notify::Events::Custom(crate::notify::rpoplpush)).keys_access(crate::table::KeyAccess::ReadWriteThenWrite),
    cmd("rpush", -3, WDF, ONE_KEY, ACL_WF, G, "1.0.0", "Append one or multiple elements to a list", crate::write_handler!(rpush)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_INSERT]),
    cmd("rpushx", -3, WDF, ONE_KEY, ACL_WF, G, "2.2.0", "Append an element to a list, only if the list exists", crate::write_handler!(rpushx)).idle_on_empty().events(crate::notify::Events::Named("rpush")).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_INSERT]),
];

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/// The list in `v`; WRONGTYPE for any other type. The type check of this
/// module.
fn as_list<K: Keyspace>(v: &Value<K>) -> Result<&K::List, CmdError> {
    match v {
        Value::List(l) => Ok(l),
        _ => Err(CmdError::WrongType),
    }
}

fn as_list_mut<K: Keyspace>(v: &mut Value<K>) -> Result<&mut K::List, CmdError> {
    match v {
        Value::List(l) => Ok(l),
        _ => Err(CmdError::WrongType),
    }
}

/// For reads: the live list at `key` (None when missing).
fn read_list<'a, K: Keyspace>(
    store: &'a Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Option<&'a K::List>, CmdError> {
    store
        .live(db, key, ctx.now_ms)
        .map(|e| as_list(e.value))
        .transpose()
}

/// For writes: the live list at `key` after lazy expiry (None when missing).
fn write_list<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Option<&'a mut K::List>, CmdError> {
    store
        .live_value_mut(db, key, ctx)
        .map(as_list_mut)
        .transpose()
}

/// Deletes `key` if it holds an empty list: a list never exists empty.
fn delete_if_empty<K: Keyspace>(store: &mut Store<K>, db: usize, key: &[u8]) {
    let empty = store
        .db(db)
        .get(key)
        .is_some_and(|e| matches!(&e.value, Value::List(l) if l.is_empty()));
    if empty {
        store.db_mut(db).remove(key);
    }
}

/// Pushes `values` at `end` of the list at `key`, creating it unless
/// `only_existing`; returns the new length (0 when nothing was created).
fn push_values<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    key: &[u8],
    values: &[impl AsRef<[u8]>],
    end: End,
    only_existing: bool,
    ctx: &Ctx,
) -> Result<usize, CmdError> {
    let limits = store.limits;
    if let Some(l) = write_list(store, db, key, ctx)? {
        l.push(end, values, &limits);
        return Ok(l.len());
    }
    if only_existing {
        return Ok(0);
    }
    let mut l = K::List::new();
    l.push(end, values, &limits);
    let len = l.len();
    store.db_mut(db).set(key, Value::List(Box::new(l)), None);
    Ok(len)
}

/// Bulk replies for `elems`, copied into one shared buffer that every
/// reply slices: one allocation for the data however many elements.
fn bulk_replies<'a>(elems: impl ExactSizeIterator<Item = Elem<'a>>) -> Vec<Reply> {
    let n = elems.len();
    let mut buf = BytesMut::with_capacity(n.saturating_mul(16).min(1 << 20));
    let mut ends = Vec::with_capacity(n);
    for e in elems {
        e.write_to(&mut buf);
        ends.push(buf.len());
    }
    let all = buf.freeze();
    let mut start = 0;
    ends.into_iter()
        .map(|end| {
            let r = Reply::Bulk(all.slice(start..end));
            start = end;
            r
        })
        .collect()
}

/// The elements as one array reply backed by a single buffer (no handle
/// per element): what LRANGE sends.
fn bulk_array<'a>(elems: impl ExactSizeIterator<Item = Elem<'a>>) -> Reply {
    let n = elems.len();
    let mut buf = BytesMut::with_capacity(n.saturating_mul(16).min(1 << 20));
    let mut ends = Vec::with_capacity(n);
    for e in elems {
        e.write_to(&mut buf);
        ends.push(buf.len());
    }
    Reply::BulkArray(buf.freeze(), ends)
}

/// Removes up to `count` elements from `end` of `list` and returns them in
/// pop order (for RPOP, the last element first).
fn pop_many(list: &mut impl ListOps, end: End, count: usize) -> Vec<Reply> {
    let n = count.min(list.len());
    match end {
        End::Front => {
            let out = bulk_replies(list.iter().take(n));
            list.remove_range(0, n);
            out
        }
        End::Back => {
            let out = bulk_replies(list.iter_rev().take(n));
            let len = list.len();
            list.remove_range(len - n, n);
            out
        }
    }
}

// ---------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------

/// LEFT or RIGHT (case-insensitive), else a syntax error.
fn parse_end(arg: &[u8]) -> Result<End, CmdError> {
    if eq_ic(arg, "LEFT") {
        Ok(End::Front)
    } else if eq_ic(arg, "RIGHT") {
        Ok(End::Back)
    } else {
        Err(CmdError::Syntax)
    }
}

/// An integer within `min..`, with one error text for both a bad number
/// and one out of range (Redis's getRangeLongFromObjectOrReply with a
/// message).
fn parse_at_least(arg: &[u8], min: i64, msg: &'static str) -> Result<i64, CmdError> {
    match parse_i64(arg) {
        Ok(v) if v >= min => Ok(v),
        _ => Err(CmdError::other(msg)),
    }
}

/// A list position (negative counts from the end) as an index into a list
/// of `len` elements, if in range.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let i = if index < 0 { index + len } else { index };
    (0..len).contains(&i).then_some(i as usize)
}

/// LRANGE/LTRIM's inclusive range over a list of `len` elements, clamped as
/// Redis clamps it; None when empty.
fn resolve_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = i64::try_from(len).ok()?;
    let mut start = if start < 0 { start + len } else { start };
    let mut end = if end < 0 { end + len } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize))
}

// ---------------------------------------------------------------------------
// Push and pop
// ---------------------------------------------------------------------------

fn lpush<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    push_values(store, db, &args[1], &args[2..], End::Front, false, ctx).map(len_reply)
}

fn rpush<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    push_values(store, db, &args[1], &args[2..], End::Back, false, ctx).map(len_reply)
}

fn lpushx<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    push_values(store, db, &args[1], &args[2..], End::Front, true, ctx).map(len_reply)
}

fn rpushx<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    push_values(store, db, &args[1], &args[2..], End::Back, true, ctx).map(len_reply)
}

fn len_reply(n: usize) -> Reply {
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn lpop<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    pop_command(store, db, args, End::Front, "lpop", ctx)
}

fn rpop<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    pop_command(store, db, args, End::Back, "rpop", ctx)
}

/// LPOP/RPOP key [count]: without a count one element or nil; with one an
/// array (empty for 0) or a nil array when the key is missing.
fn pop_command<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    end: End,
    name: &str,
    ctx: &Ctx,
) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::WrongArity(name.to_string()));
    }
    let count = match args.get(2) {
        Some(a) => Some(parse_at_least(
            a,
            0,
            "ERR value is out of range, must be positive",
        )?),
        None => None,
    };
    let key = &args[1];
    let Some(list) = write_list(store, db, key, ctx)? else {
        return Ok(if count.is_some() {
            Reply::NilArray
        } else {
            Reply::Nil
        });
    };
    let reply = match count {
        None => list.pop(end).map_or(Reply::Nil, Reply::Bulk),
        Some(0) => return Ok(Reply::Array(Vec::new())),
        Some(n) => Reply::Array(pop_many(
            list,
            end,
            usize::try_from(n).unwrap_or(usize::MAX),
        )),
    };
    delete_if_empty(store, db, key);
    Ok(reply)
}

// ---------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------

fn llen<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let n = read_list(store, db, &args[1], ctx)?.map_or(0, |l| l.len());
    Ok(len_reply(n))
}

/// LRANGE key start stop: indexes are checked before the key.
fn lrange<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let start = parse_i64(&args[2])?;
    let end = parse_i64(&args[3])?;
    let Some(list) = read_list(store, db, &args[1], ctx)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let Some((from, to)) = resolve_range(start, end, list.len()) else {
        return Ok(Reply::Array(Vec::new()));
    };
    Ok(bulk_array(list.iter_from(from).take(to - from + 1)))
}

/// LINDEX key index: a missing key answers nil before the index is parsed.
fn lindex<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let Some(list) = read_list(store, db, &args[1], ctx)? else {
        return Ok(Reply::Nil);
    };
    let index = parse_i64(&args[2])?;
    Ok(resolve_index(index, list.len())
        .and_then(|i| list.get(i))
        .map_or(Reply::Nil, |e| Reply::Bulk(e.to_bytes())))
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
///
/// The matching loop mirrors Redis 7.0 including its wrapping arithmetic,
/// so that even RANK -9223372036854775808 answers as Redis does (the first
/// match from the tail, every match with COUNT).
fn lpos<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let mut rank: i64 = 1;
    let mut count: Option<i64> = None;
    let mut maxlen: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let opt = &args[j];
        let value = args.get(j + 1);
        match value {
            Some(v) if eq_ic(opt, "RANK") => {
                rank = parse_i64(v)?;
                if rank == 0 {
                    return Err(CmdError::other(
                        "ERR RANK can't be zero: use 1 to start from the first match, \
                         2 from the second ... or use negative to start from the end of the list",
                    ));
                }
            }
            Some(v) if eq_ic(opt, "COUNT") => {
                count = Some(parse_at_least(v, 0, "ERR COUNT can't be negative")?);
            }
            Some(v) if eq_ic(opt, "MAXLEN") => {
                maxlen = parse_at_least(v, 0, "ERR MAXLEN can't be negative")?;
            }
            _ => return Err(CmdError::Syntax),
        }
        j += 2;
    }
    let from_tail = rank < 0;
    if from_tail {
        rank = rank.wrapping_neg();
    }
    let Some(list) = read_list(store, db, &args[1], ctx)? else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Nil
        });
    };
    let needle = Elem::from_bytes(&args[2]);
    let len = list.len();
    let elems: Box<dyn Iterator<Item = Elem<'_>>> = if from_tail {
        Box::new(list.iter_rev())
    } else {
        Box::new(list.iter())
    };
    let mut found = Vec::new();
    let mut matches: i64 = 0;
    for (index, e) in elems.enumerate() {
        if maxlen != 0 && index as u64 >= maxlen as u64 {
            break;
        }
        if e != needle {
            continue;
        }
        matches += 1;
        if matches >= rank {
            let pos = if from_tail { len - index - 1 } else { index };
            found.push(Reply::Int(pos as i64));
            match count {
                None => break,
                Some(c) if c != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= c => break,
                Some(_) => {}
            }
        }
    }
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    })
}

// ---------------------------------------------------------------------------
// Edits
// ---------------------------------------------------------------------------

/// LSET key index element: the key is looked up before the index is parsed.
fn lset<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let limits = store.limits;
    let Some(list) = write_list(store, db, &args[1], ctx)? else {
        return Err(CmdError::NoSuchKey);
    };
    let index = parse_i64(&args[2])?;
    let i = resolve_index(index, list.len()).ok_or(CmdError::IndexOutOfRange)?;
    list.set(i, &args[3], &limits);
    Ok(Reply::ok())
}

/// LINSERT key BEFORE|AFTER pivot element: -1 without the pivot, 0 without
/// the key, else the new length.
fn linsert<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let after = if eq_ic(&args[2], "AFTER") {
        true
    } else if eq_ic(&args[2], "BEFORE") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let limits = store.limits;
    let Some(list) = write_list(store, db, &args[1], ctx)? else {
        return Ok(Reply::Int(0));
    };
    let pivot = Elem::from_bytes(&args[3]);
    let Some(at) = list.iter().position(|e| e == pivot) else {
        return Ok(Reply::Int(-1));
    };
    list.insert(at + usize::from(after), &args[4], &limits);
    Ok(len_reply(list.len()))
}

/// LREM key count element: count > 0 removes from the head, < 0 from the
/// tail, 0 every match.
fn lrem<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let count = parse_i64(&args[2])?;
    let key = &args[1];
    let Some(list) = write_list(store, db, key, ctx)? else {
        return Ok(Reply::Int(0));
    };
    let needle = Elem::from_bytes(&args[3]);
    let limit = match count.unsigned_abs() {
        0 => usize::MAX,
        n => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let mut positions: Vec<usize> = if count >= 0 {
        list.iter()
            .enumerate()
            .filter(|(_, e)| *e == needle)
            .map(|(i, _)| i)
            .take(limit)
            .collect()
    } else {
        let last = list.len().saturating_sub(1);
        list.iter_rev()
            .enumerate()
            .filter(|(_, e)| *e == needle)
            .map(|(i, _)| last - i)
            .take(limit)
            .collect()
    };
    positions.sort_unstable();
    list.remove_positions(&positions);
    delete_if_empty(store, db, key);
    Ok(len_reply(positions.len()))
}

/// LTRIM key start stop: keeps the range, deleting the key when it is empty.
fn ltrim<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let start = parse_i64(&args[2])?;
    let end = parse_i64(&args[3])?;
    let key = &args[1];
    let Some(list) = write_list(store, db, key, ctx)? else {
        return Ok(Reply::ok());
    };
    let len = list.len();
    match resolve_range(start, end, len) {
        Some((from, to)) => {
            list.remove_range(to + 1, len - to - 1);
            list.remove_range(0, from);
        }
        None => list.remove_range(0, len),
    }
    delete_if_empty(store, db, key);
    Ok(Reply::ok())
}

// ---------------------------------------------------------------------------
// Moves
// ---------------------------------------------------------------------------

fn lmove<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let from = parse_end(&args[3])?;
    let to = parse_end(&args[4])?;
    move_element(store, db, &args[1], &args[2], from, to, ctx)
}

fn rpoplpush<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    move_element(store, db, &args[1], &args[2], End::Back, End::Front, ctx)
}

/// Pops from `from` of `src` and pushes at `to` of `dst` (which may be the
/// same key: a rotation). Nil when `src` is missing; WRONGTYPE, with nothing
/// changed, when either key holds another type.
fn move_element<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    ctx: &Ctx,
) -> CmdResult {
    if write_list(store, db, src, ctx)?.is_none() {
        return Ok(Reply::Nil);
    }
    write_list(store, db, dst, ctx)?;
    let value = write_list(store, db, src, ctx)?
        .and_then(|l| l.pop(from))
        .ok_or(CmdError::NoSuchKey)?;
    push_values(store, db, dst, &[&value], to, false, ctx)?;
    delete_if_empty(store, db, src);
    Ok(Reply::Bulk(value))
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count].
fn lmpop<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let req = parse_mpop(args, 1)?;
    Ok(mpop(store, db, &req, ctx)?.unwrap_or(Reply::NilArray))
}

/// A parsed LMPOP/BLMPOP: its keys, the end to pop from and the count.
struct MpopReq<'a> {
    keys: &'a [Bytes],
    end: End,
    count: usize,
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT n]` with numkeys at `at`, with
/// Redis's checks and their order.
fn parse_mpop(args: &[Bytes], at: usize) -> Result<MpopReq<'_>, CmdError> {
    let numkeys = parse_at_least(&args[at], 1, "ERR numkeys should be greater than 0")?;
    let where_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(at + 1))
        .filter(|&w| w < args.len())
        .ok_or(CmdError::Syntax)?;
    let end = parse_end(&args[where_at])?;
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        match args.get(j + 1) {
            Some(v) if count.is_none() && eq_ic(&args[j], "COUNT") => {
                count = Some(parse_at_least(v, 1, "ERR count should be greater than 0")?);
            }
            _ => return Err(CmdError::Syntax),
        }
        j += 2;
    }
    Ok(MpopReq {
        keys: &args[at + 1..where_at],
        end,
        count: count.map_or(1, |c| usize::try_from(c).unwrap_or(usize::MAX)),
    })
}

/// Pops from the first non-empty list among the keys: `[key, [elements]]`,
/// or None when every key is missing. A key of another type met before a
/// list answers WRONGTYPE.
fn mpop<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    req: &MpopReq<'_>,
    ctx: &Ctx,
) -> Result<Option<Reply>, CmdError> {
    for key in req.keys {
        let Some(list) = write_list(store, db, key, ctx)? else {
            continue;
        };
        let elems = pop_many(list, req.end, req.count);
        delete_if_empty(store, db, key);
        return Ok(Some(Reply::Array(vec![
            Reply::Bulk(key.clone()),
            Reply::Array(elems),
        ])));
    }
    Ok(None)
}

// ---------------------------------------------------------------------------
// Blocking forms
// ---------------------------------------------------------------------------

fn would_block(keys: &[Bytes], timeout_ms: u64, on_timeout: Reply) -> CmdError {
    CmdError::WouldBlock(Box::new(BlockOn {
        keys: keys.to_vec(),
        timeout_ms,
        on_timeout,
        rerun: None,
    }))
}

fn blpop<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    blocking_pop(store, db, args, End::Front, ctx)
}

fn brpop<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    blocking_pop(store, db, args, End::Back, ctx)
}

/// BLPOP/BRPOP key [key ...] timeout: `[key, element]` from the first
/// non-empty list; a key of another type met first answers WRONGTYPE.
fn blocking_pop<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    end: End,
    ctx: &Ctx,
) -> CmdResult {
    let last = args.len() - 1;
    let timeout_ms = parse_timeout(&args[last])?;
    let keys = &args[1..last];
    for key in keys {
        let Some(list) = write_list(store, db, key, ctx)? else {
            continue;
        };
        if let Some(value) = list.pop(end) {
            delete_if_empty(store, db, key);
            return Ok(Reply::Array(vec![
                Reply::Bulk(key.clone()),
                Reply::Bulk(value),
            ]));
        }
    }
    Err(would_block(keys, timeout_ms, Reply::NilArray))
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout.
fn blmove<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let from = parse_end(&args[3])?;
    let to = parse_end(&args[4])?;
    let timeout_ms = parse_timeout(&args[5])?;
    blocking_move(store, db, args, from, to, timeout_ms, ctx)
}

/// BRPOPLPUSH source destination timeout.
fn brpoplpush<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let timeout_ms = parse_timeout(&args[3])?;
    blocking_move(store, db, args, End::Back, End::Front, timeout_ms, ctx)
}

fn blocking_move<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    from: End,
    to: End,
    timeout_ms: u64,
    ctx: &Ctx,
) -> CmdResult {
    if write_list(store, db, &args[1], ctx)?.is_none() {
        return Err(would_block(&args[1..2], timeout_ms, Reply::Nil));
    }
    move_element(store, db, &args[1], &args[2], from, to, ctx)
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count].
fn blmpop<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let timeout_ms = parse_timeout(&args[1])?;
    let req = parse_mpop(args, 2)?;
    match mpop(store, db, &req, ctx)? {
        Some(reply) => Ok(reply),
        None => Err(would_block(req.keys, timeout_ms, Reply::NilArray)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000_000;
    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    const NOT_INT: &str = "ERR value is not an integer or out of range";
    const SYNTAX: &str = "ERR syntax error";

    fn ctx() -> Ctx {
        Ctx {
            now_ms: NOW,
            seed: 7,
        }
    }

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    fn apply(s: &mut Store, a: &[&str]) -> CmdResult {
        s.apply(0, &args(a), &ctx())
    }

    fn read(s: &Store, a: &[&str]) -> CmdResult {
        s.read(0, &args(a), &ctx())
    }

    fn err(r: CmdResult) -> String {
        match r {
            Err(e) => e.text().into_owned(),
            Ok(reply) => panic!("expected an error, got {reply:?}"),
        }
    }

    fn int(n: i64) -> CmdResult {
        Ok(Reply::Int(n))
    }

    fn bulk(s: &str) -> Reply {
        Reply::bulk_str(s)
    }

    fn arr(items: &[&str]) -> CmdResult {
        Ok(Reply::Array(items.iter().map(|s| bulk(s)).collect()))
    }

    fn ints(items: &[i64]) -> CmdResult {
        Ok(Reply::Array(items.iter().map(|&i| Reply::Int(i)).collect()))
    }

    fn ok() -> CmdResult {
        Ok(Reply::ok())
    }

    fn all(s: &Store, key: &str) -> CmdResult {
        read(s, &["lrange", key, "0", "-1"])
    }

    fn exists(s: &Store, key: &str) -> bool {
        s.db(0).get(key.as_bytes()).is_some()
    }

    /// The engine's representation of a list: OBJECT ENCODING names every
    /// list a quicklist, as Redis 7.0 does.
    fn encoding(s: &Store, key: &str) -> CmdResult {
        match s.db(0).get(key.as_bytes()).map(|e| e.value) {
            Some(crate::keyspace::Value::List(l)) => {
                assert_eq!(read(s, &["object", "encoding", key]), Ok(bulk("quicklist")));
                Ok(bulk(l.encoding()))
            }
            _ => read(s, &["object", "encoding", key]),
        }
    }

    /// A store with "s" holding a string and "l" holding a..e.
    fn store() -> Store {
        let mut st = Store::default();
        assert_eq!(apply(&mut st, &["set", "s", "x"]), ok());
        assert_eq!(
            apply(&mut st, &["rpush", "l", "a", "b", "c", "d", "e"]),
            int(5)
        );
        st
    }

    #[test]
    fn push_creates_and_orders_like_redis() {
        let mut st = Store::default();
        assert_eq!(apply(&mut st, &["lpush", "k", "a", "b", "c"]), int(3));
        assert_eq!(all(&st, "k"), arr(&["c", "b", "a"]));
        assert_eq!(apply(&mut st, &["rpush", "k", "1", "2"]), int(5));
        assert_eq!(all(&st, "k"), arr(&["c", "b", "a", "1", "2"]));
        assert_eq!(apply(&mut st, &["lpushx", "k", "x", "y"]), int(7));
        assert_eq!(apply(&mut st, &["rpushx", "k", "z"]), int(8));
        assert_eq!(
            all(&st, "k"),
            arr(&["y", "x", "c", "b", "a", "1", "2", "z"])
        );
        assert_eq!(apply(&mut st, &["lpushx", "none", "x"]), int(0));
        assert_eq!(apply(&mut st, &["rpushx", "none", "x"]), int(0));
        assert!(!exists(&st, "none"));
        assert_eq!(read(&st, &["type", "k"]), Ok(Reply::simple("list")));
    }

    #[test]
    fn every_command_answers_wrongtype_on_a_string() {
        let mut st = store();
        for a in [
            &["lpush", "s", "a"][..],
            &["rpush", "s", "a"],
            &["lpushx", "s", "a"],
            &["rpushx", "s", "a"],
            &["lpop", "s"],
            &["rpop", "s", "2"],
            &["lset", "s", "0", "a"],
            &["linsert", "s", "before", "a", "b"],
            &["lrem", "s", "0", "a"],
            &["ltrim", "s", "0", "1"],
            &["lmove", "s", "l", "left", "left"],
            &["lmove", "l", "s", "left", "left"],
            &["rpoplpush", "s", "l"],
            &["rpoplpush", "l", "s"],
            &["lmpop", "2", "s", "l", "left"],
            &["blpop", "s", "0"],
            &["brpop", "missing", "s", "l", "0"],
            &["blmove", "s", "l", "left", "left", "0"],
            &["blmove", "l", "s", "left", "left", "0"],
            &["brpoplpush", "s", "l", "0"],
            &["blmpop", "0", "1", "s", "left"],
        ] {
            assert_eq!(err(apply(&mut st, a)), WRONGTYPE, "{a:?}");
        }
        for a in [
            &["llen", "s"][..],
            &["lrange", "s", "0", "-1"],
            &["lindex", "s", "0"],
            &["lpos", "s", "a"],
        ] {
            assert_eq!(err(read(&st, a)), WRONGTYPE, "{a:?}");
        }
        // Nothing changed on the way.
        assert_eq!(all(&st, "l"), arr(&["a", "b", "c", "d", "e"]));
        assert_eq!(read(&st, &["get", "s"]), Ok(bulk("x")));
        // A list found before the string is served without looking further.
        assert_eq!(
            apply(&mut st, &["lmpop", "2", "l", "s", "left"]),
            Ok(Reply::Array(vec![bulk("l"), Reply::Array(vec![bulk("a")])]))
        );
        assert_eq!(apply(&mut st, &["blpop", "l", "s", "0"]), arr(&["l", "b"]));
    }

    #[test]
    fn pop_with_and_without_count() {
        let mut st = store();
        assert_eq!(apply(&mut st, &["lpop", "l"]), Ok(bulk("a")));
        assert_eq!(apply(&mut st, &["rpop", "l"]), Ok(bulk("e")));
        assert_eq!(apply(&mut st, &["lpop", "l", "0"]), arr(&[]));
        assert_eq!(apply(&mut st, &["rpop", "l", "2"]), arr(&["d", "c"]));
        assert_eq!(apply(&mut st, &["lpop", "l", "10"]), arr(&["b"]));
        assert!(!exists(&st, "l"), "an emptied list is deleted");
        assert_eq!(apply(&mut st, &["lpop", "l"]), Ok(Reply::Nil));
        assert_eq!(apply(&mut st, &["rpop", "l", "0"]), Ok(Reply::NilArray));
        assert_eq!(apply(&mut st, &["lpop", "l", "3"]), Ok(Reply::NilArray));
        let positive = "ERR value is out of range, must be positive";
        assert_eq!(err(apply(&mut st, &["lpop", "l", "-1"])), positive);
        assert_eq!(err(apply(&mut st, &["rpop", "l", "abc"])), positive);
        assert_eq!(
            err(apply(&mut st, &["lpop", "l", "1", "2"])),
            "ERR wrong number of arguments for 'lpop' command"
        );
        assert_eq!(
            err(apply(&mut st, &["lpop"])),
            "ERR wrong number of arguments for 'lpop' command"
        );
        assert_eq!(apply(&mut st, &["rpush", "n", "1"]), int(1));
        assert_eq!(
            apply(&mut st, &["rpop", "n", "9223372036854775807"]),
            arr(&["1"])
        );
    }

    #[test]
    fn llen_lrange_lindex() {
        let st = store();
        assert_eq!(read(&st, &["llen", "l"]), int(5));
        assert_eq!(read(&st, &["llen", "none"]), int(0));
        assert_eq!(read(&st, &["lrange", "l", "1", "2"]), arr(&["b", "c"]));
        assert_eq!(read(&st, &["lrange", "l", "-2", "-1"]), arr(&["d", "e"]));
        assert_eq!(
            read(&st, &["lrange", "l", "-100", "100"]),
            arr(&["a", "b", "c", "d", "e"])
        );
        assert_eq!(read(&st, &["lrange", "l", "3", "1"]), arr(&[]));
        assert_eq!(read(&st, &["lrange", "l", "5", "10"]), arr(&[]));
        assert_eq!(read(&st, &["lrange", "l", "-1", "-2"]), arr(&[]));
        assert_eq!(
            read(
                &st,
                &["lrange", "l", "-9223372036854775808", "9223372036854775807"]
            ),
            arr(&["a", "b", "c", "d", "e"])
        );
        assert_eq!(
            read(&st, &["lrange", "l", "0", "-9223372036854775808"]),
            arr(&[])
        );
        assert_eq!(read(&st, &["lrange", "none", "0", "-1"]), arr(&[]));
        assert_eq!(err(read(&st, &["lrange", "none", "a", "1"])), NOT_INT);
        assert_eq!(err(read(&st, &["lrange", "l", "0", "1.5"])), NOT_INT);
        assert_eq!(read(&st, &["lindex", "l", "0"]), Ok(bulk("a")));
        assert_eq!(read(&st, &["lindex", "l", "-1"]), Ok(bulk("e")));
        assert_eq!(read(&st, &["lindex", "l", "5"]), Ok(Reply::Nil));
        assert_eq!(read(&st, &["lindex", "l", "-6"]), Ok(Reply::Nil));
        assert_eq!(
            read(&st, &["lindex", "l", "-9223372036854775808"]),
            Ok(Reply::Nil)
        );
        assert_eq!(read(&st, &["lindex", "none", "abc"]), Ok(Reply::Nil));
        assert_eq!(err(read(&st, &["lindex", "l", "abc"])), NOT_INT);
    }

    #[test]
    fn integers_come_back_as_sent() {
        let mut st = Store::default();
        let vals = [
            "0",
            "-1",
            "007",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "1.0",
            "-0",
            "+5",
            "4096",
            "-4097",
        ];
        let mut a = vec!["rpush", "n"];
        a.extend(vals);
        assert_eq!(apply(&mut st, &a), int(vals.len() as i64));
        assert_eq!(all(&st, "n"), arr(&vals));
        assert_eq!(read(&st, &["lpos", "n", "007"]), int(2));
        assert_eq!(read(&st, &["lpos", "n", "7"]), Ok(Reply::Nil));
        assert_eq!(read(&st, &["lpos", "n", "-1"]), int(1));
    }

    #[test]
    fn lset_errors_and_replacement() {
        let mut st = store();
        assert_eq!(apply(&mut st, &["lset", "l", "1", "B"]), ok());
        assert_eq!(apply(&mut st, &["lset", "l", "-1", "12345"]), ok());
        assert_eq!(all(&st, "l"), arr(&["a", "B", "c", "d", "12345"]));
        assert_eq!(
            err(apply(&mut st, &["lset", "none", "abc", "x"])),
            "ERR no such key"
        );
        assert_eq!(err(apply(&mut st, &["lset", "l", "abc", "x"])), NOT_INT);
        assert_eq!(
            err(apply(&mut st, &["lset", "l", "5", "x"])),
            "ERR index out of range"
        );
        assert_eq!(
            err(apply(&mut st, &["lset", "l", "-6", "x"])),
            "ERR index out of range"
        );
    }

    #[test]
    fn linsert_before_after_and_missing() {
        let mut st = store();
        assert_eq!(
            apply(&mut st, &["linsert", "l", "BEFORE", "a", "0"]),
            int(6)
        );
        assert_eq!(apply(&mut st, &["linsert", "l", "after", "e", "f"]), int(7));
        assert_eq!(
            apply(&mut st, &["linsert", "l", "After", "c", "c2"]),
            int(8)
        );
        assert_eq!(
            all(&st, "l"),
            arr(&["0", "a", "b", "c", "c2", "d", "e", "f"])
        );
        assert_eq!(
            apply(&mut st, &["linsert", "l", "before", "zz", "x"]),
            int(-1)
        );
        assert_eq!(
            apply(&mut st, &["linsert", "none", "before", "a", "x"]),
            int(0)
        );
        assert!(!exists(&st, "none"));
        assert_eq!(
            err(apply(&mut st, &["linsert", "none", "middle", "a", "x"])),
            SYNTAX
        );
        assert_eq!(
            err(apply(&mut st, &["linsert", "l", "middle", "a", "x"])),
            SYNTAX
        );
    }

    #[test]
    fn lrem_from_head_tail_and_all() {
        let mut st = Store::default();
        let fill = ["rpush", "r", "x", "a", "x", "b", "x", "c", "x"];
        assert_eq!(apply(&mut st, &fill), int(7));
        assert_eq!(apply(&mut st, &["lrem", "r", "2", "x"]), int(2));
        assert_eq!(all(&st, "r"), arr(&["a", "b", "x", "c", "x"]));
        assert_eq!(apply(&mut st, &["lrem", "r", "-1", "x"]), int(1));
        assert_eq!(all(&st, "r"), arr(&["a", "b", "x", "c"]));
        assert_eq!(apply(&mut st, &["lrem", "r", "0", "x"]), int(1));
        assert_eq!(apply(&mut st, &["lrem", "r", "0", "zz"]), int(0));
        assert_eq!(
            apply(&mut st, &["lrem", "r", "-9223372036854775808", "a"]),
            int(1)
        );
        assert_eq!(all(&st, "r"), arr(&["b", "c"]));
        assert_eq!(apply(&mut st, &["lrem", "r", "0", "b"]), int(1));
        assert_eq!(apply(&mut st, &["lrem", "r", "5", "c"]), int(1));
        assert!(!exists(&st, "r"));
        assert_eq!(apply(&mut st, &["lrem", "r", "0", "c"]), int(0));
        assert_eq!(err(apply(&mut st, &["lrem", "r", "x", "c"])), NOT_INT);
    }

    #[test]
    fn ltrim_ranges() {
        let mut st = store();
        assert_eq!(apply(&mut st, &["ltrim", "l", "1", "-2"]), ok());
        assert_eq!(all(&st, "l"), arr(&["b", "c", "d"]));
        assert_eq!(apply(&mut st, &["ltrim", "l", "-100", "100"]), ok());
        assert_eq!(all(&st, "l"), arr(&["b", "c", "d"]));
        assert_eq!(apply(&mut st, &["ltrim", "l", "1", "1"]), ok());
        assert_eq!(all(&st, "l"), arr(&["c"]));
        assert_eq!(apply(&mut st, &["ltrim", "l", "1", "0"]), ok());
        assert!(!exists(&st, "l"));
        assert_eq!(apply(&mut st, &["ltrim", "l", "0", "1"]), ok());
        assert_eq!(err(apply(&mut st, &["ltrim", "l", "a", "1"])), NOT_INT);
    }

    #[test]
    fn lpos_options_and_errors() {
        let mut st = Store::default();
        apply(&mut st, &["rpush", "p", "a", "b", "c", "a", "b", "a"]).ok();
        assert_eq!(read(&st, &["lpos", "p", "a"]), int(0));
        assert_eq!(read(&st, &["lpos", "p", "b"]), int(1));
        assert_eq!(read(&st, &["lpos", "p", "a", "RANK", "2"]), int(3));
        assert_eq!(read(&st, &["lpos", "p", "a", "RANK", "-1"]), int(5));
        assert_eq!(read(&st, &["lpos", "p", "a", "RANK", "-2"]), int(3));
        assert_eq!(read(&st, &["lpos", "p", "a", "RANK", "4"]), Ok(Reply::Nil));
        assert_eq!(
            read(&st, &["lpos", "p", "a", "COUNT", "0"]),
            ints(&[0, 3, 5])
        );
        assert_eq!(read(&st, &["lpos", "p", "a", "COUNT", "2"]), ints(&[0, 3]));
        assert_eq!(
            read(&st, &["lpos", "p", "a", "RANK", "2", "COUNT", "0"]),
            ints(&[3, 5])
        );
        assert_eq!(
            read(&st, &["lpos", "p", "a", "RANK", "-1", "COUNT", "2"]),
            ints(&[5, 3])
        );
        assert_eq!(
            read(&st, &["lpos", "p", "a", "COUNT", "0", "MAXLEN", "4"]),
            ints(&[0, 3])
        );
        assert_eq!(
            read(
                &st,
                &["lpos", "p", "a", "RANK", "-1", "MAXLEN", "1", "COUNT", "0"]
            ),
            ints(&[5])
        );
        assert_eq!(read(&st, &["lpos", "p", "z", "COUNT", "0"]), ints(&[]));
        assert_eq!(read(&st, &["lpos", "p", "z"]), Ok(Reply::Nil));
        assert_eq!(read(&st, &["lpos", "none", "a"]), Ok(Reply::Nil));
        assert_eq!(read(&st, &["lpos", "none", "a", "COUNT", "0"]), ints(&[]));
        // Redis 7.0's wrapping arithmetic for the smallest rank.
        assert_eq!(
            read(&st, &["lpos", "p", "a", "RANK", "-9223372036854775808"]),
            int(5)
        );
        assert_eq!(
            read(
                &st,
                &[
                    "lpos",
                    "p",
                    "a",
                    "RANK",
                    "-9223372036854775808",
                    "COUNT",
                    "1"
                ]
            ),
            ints(&[5, 3, 0])
        );
        assert_eq!(
            read(&st, &["lpos", "p", "a", "RANK", "9223372036854775807"]),
            Ok(Reply::Nil)
        );
        assert_eq!(
            err(read(&st, &["lpos", "p", "a", "RANK", "0"])),
            "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
        );
        assert_eq!(err(read(&st, &["lpos", "p", "a", "RANK", "x"])), NOT_INT);
        assert_eq!(
            err(read(&st, &["lpos", "p", "a", "COUNT", "-1"])),
            "ERR COUNT can't be negative"
        );
        assert_eq!(
            err(read(&st, &["lpos", "p", "a", "COUNT", "x"])),
            "ERR COUNT can't be negative"
        );
        assert_eq!(
            err(read(&st, &["lpos", "p", "a", "MAXLEN", "-1"])),
            "ERR MAXLEN can't be negative"
        );
        assert_eq!(err(read(&st, &["lpos", "p", "a", "RANK"])), SYNTAX);
        assert_eq!(err(read(&st, &["lpos", "p", "a", "FOO", "1"])), SYNTAX);
        // Options are checked before the key.
        assert!(err(read(&st, &["lpos", "none", "a", "RANK", "0"])).starts_with("ERR RANK"));
    }

    #[test]
    fn lmove_and_rpoplpush() {
        let mut st = store();
        assert_eq!(
            apply(&mut st, &["lmove", "l", "d", "left", "right"]),
            Ok(bulk("a"))
        );
        assert_eq!(
            apply(&mut st, &["lmove", "l", "d", "RIGHT", "LEFT"]),
            Ok(bulk("e"))
        );
        assert_eq!(all(&st, "d"), arr(&["e", "a"]));
        assert_eq!(apply(&mut st, &["rpoplpush", "l", "d"]), Ok(bulk("d")));
        assert_eq!(all(&st, "d"), arr(&["d", "e", "a"]));
        assert_eq!(all(&st, "l"), arr(&["b", "c"]));
        // Same key: rotation.
        assert_eq!(
            apply(&mut st, &["lmove", "l", "l", "left", "right"]),
            Ok(bulk("b"))
        );
        assert_eq!(all(&st, "l"), arr(&["c", "b"]));
        assert_eq!(apply(&mut st, &["rpoplpush", "l", "l"]), Ok(bulk("b")));
        assert_eq!(all(&st, "l"), arr(&["b", "c"]));
        // A one-element list rotating onto itself survives.
        apply(&mut st, &["rpush", "one", "x"]).ok();
        assert_eq!(
            apply(&mut st, &["lmove", "one", "one", "left", "left"]),
            Ok(bulk("x"))
        );
        assert_eq!(all(&st, "one"), arr(&["x"]));
        // The last element moving out deletes the source.
        assert_eq!(
            apply(&mut st, &["lmove", "one", "two", "left", "left"]),
            Ok(bulk("x"))
        );
        assert!(!exists(&st, "one"));
        assert_eq!(
            apply(&mut st, &["lmove", "none", "s", "left", "left"]),
            Ok(Reply::Nil)
        );
        assert_eq!(apply(&mut st, &["rpoplpush", "none", "d"]), Ok(Reply::Nil));
        assert_eq!(
            err(apply(&mut st, &["lmove", "l", "d", "up", "left"])),
            SYNTAX
        );
        assert_eq!(
            err(apply(&mut st, &["lmove", "l", "d", "left", "down"])),
            SYNTAX
        );
    }

    #[test]
    fn lmpop_parsing_and_pops() {
        let mut st = store();
        let popped = |key: &str, items: &[&str]| {
            Ok(Reply::Array(vec![
                bulk(key),
                Reply::Array(items.iter().map(|s| bulk(s)).collect()),
            ]))
        };
        assert_eq!(
            apply(&mut st, &["lmpop", "2", "none", "l", "left"]),
            popped("l", &["a"])
        );
        assert_eq!(
            apply(&mut st, &["lmpop", "1", "l", "RIGHT", "COUNT", "2"]),
            popped("l", &["e", "d"])
        );
        assert_eq!(
            apply(&mut st, &["lmpop", "1", "l", "left", "count", "10"]),
            popped("l", &["b", "c"])
        );
        assert!(!exists(&st, "l"));
        assert_eq!(
            apply(&mut st, &["lmpop", "2", "l", "none", "left"]),
            Ok(Reply::NilArray)
        );
        let numkeys = "ERR numkeys should be greater than 0";
        let count = "ERR count should be greater than 0";
        assert_eq!(err(apply(&mut st, &["lmpop", "0", "l", "left"])), numkeys);
        assert_eq!(err(apply(&mut st, &["lmpop", "-1", "l", "left"])), numkeys);
        assert_eq!(err(apply(&mut st, &["lmpop", "abc", "l", "left"])), numkeys);
        assert_eq!(err(apply(&mut st, &["lmpop", "2", "l", "left"])), SYNTAX);
        assert_eq!(
            err(apply(
                &mut st,
                &["lmpop", "9223372036854775807", "l", "left"]
            )),
            SYNTAX
        );
        assert_eq!(err(apply(&mut st, &["lmpop", "1", "l", "middle"])), SYNTAX);
        assert_eq!(
            err(apply(&mut st, &["lmpop", "1", "l", "left", "count", "0"])),
            count
        );
        assert_eq!(
            err(apply(&mut st, &["lmpop", "1", "l", "left", "count", "x"])),
            count
        );
        assert_eq!(
            err(apply(
                &mut st,
                &["lmpop", "1", "l", "left", "count", "1", "count", "1"]
            )),
            SYNTAX
        );
        assert_eq!(
            err(apply(&mut st, &["lmpop", "1", "l", "left", "count"])),
            SYNTAX
        );
        assert_eq!(
            err(apply(&mut st, &["lmpop", "1", "l", "left", "foo"])),
            SYNTAX
        );
        assert_eq!(
            err(apply(&mut st, &["lmpop", "1", "l"])),
            "ERR wrong number of arguments for 'lmpop' command"
        );
    }

    fn block_on(r: CmdResult) -> BlockOn {
        match r {
            Err(CmdError::WouldBlock(b)) => *b,
            other => panic!("expected WouldBlock, got {other:?}"),
        }
    }

    #[test]
    fn blocking_pops_serve_when_data_exists() {
        let mut st = store();
        apply(&mut st, &["rpush", "m", "1", "2"]).ok();
        assert_eq!(
            apply(&mut st, &["blpop", "none", "l", "0"]),
            arr(&["l", "a"])
        );
        assert_eq!(
            apply(&mut st, &["brpop", "none", "l", "m", "1.5"]),
            arr(&["l", "e"])
        );
        assert_eq!(
            apply(&mut st, &["blmove", "l", "m", "left", "right", "0"]),
            Ok(bulk("b"))
        );
        assert_eq!(
            apply(&mut st, &["brpoplpush", "l", "m", "0"]),
            Ok(bulk("d"))
        );
        assert_eq!(all(&st, "m"), arr(&["d", "1", "2", "b"]));
        assert_eq!(
            apply(
                &mut st,
                &["blmpop", "0", "2", "none", "m", "right", "count", "3"]
            ),
            Ok(Reply::Array(vec![
                bulk("m"),
                Reply::Array(vec![bulk("b"), bulk("2"), bulk("1")])
            ]))
        );
        assert_eq!(apply(&mut st, &["blpop", "l", "0"]), arr(&["l", "c"]));
        assert!(!exists(&st, "l"));
    }

    #[test]
    fn blocking_commands_block_when_nothing_to_pop() {
        let mut st = store();
        let b = block_on(apply(&mut st, &["blpop", "x", "y", "0"]));
        assert_eq!(
            b,
            BlockOn {
                keys: args(&["x", "y"]),
                timeout_ms: 0,
                on_timeout: Reply::NilArray,
                rerun: None,
            }
        );
        let b = block_on(apply(&mut st, &["brpop", "x", "0.25"]));
        assert_eq!(
            (b.keys, b.timeout_ms, b.on_timeout),
            (args(&["x"]), 250, Reply::NilArray)
        );
        let b = block_on(apply(&mut st, &["blmove", "x", "l", "left", "left", "2"]));
        assert_eq!(
            (b.keys, b.timeout_ms, b.on_timeout),
            (args(&["x"]), 2000, Reply::Nil)
        );
        let b = block_on(apply(&mut st, &["brpoplpush", "x", "s", "1"]));
        assert_eq!(
            (b.keys, b.timeout_ms, b.on_timeout),
            (args(&["x"]), 1000, Reply::Nil)
        );
        let b = block_on(apply(
            &mut st,
            &["blmpop", "3", "2", "x", "y", "left", "count", "2"],
        ));
        assert_eq!(
            (b.keys, b.timeout_ms, b.on_timeout),
            (args(&["x", "y"]), 3000, Reply::NilArray)
        );
        // Inside MULTI the server renders WouldBlock as the timeout reply.
        assert_eq!(
            apply(&mut st, &["blpop", "x", "0"]).unwrap_or_else(|e| e.to_reply()),
            Reply::NilArray
        );
        assert_eq!(all(&st, "l"), arr(&["a", "b", "c", "d", "e"]));
    }

    #[test]
    fn blocking_argument_errors_come_first() {
        let mut st = store();
        let not_float = "ERR timeout is not a float or out of range";
        let negative = "ERR timeout is negative";
        assert_eq!(err(apply(&mut st, &["blpop", "s", "abc"])), not_float);
        assert_eq!(err(apply(&mut st, &["brpop", "l", "-1"])), negative);
        assert_eq!(
            err(apply(&mut st, &["brpoplpush", "s", "l", "x"])),
            not_float
        );
        assert_eq!(
            err(apply(&mut st, &["blmove", "s", "l", "up", "left", "x"])),
            SYNTAX
        );
        assert_eq!(
            err(apply(&mut st, &["blmove", "s", "l", "left", "left", "x"])),
            not_float
        );
        assert_eq!(
            err(apply(&mut st, &["blmpop", "x", "1", "l", "left"])),
            not_float
        );
        assert_eq!(
            err(apply(&mut st, &["blmpop", "0", "0", "l", "left"])),
            "ERR numkeys should be greater than 0"
        );
        assert_eq!(
            err(apply(
                &mut st,
                &["blmpop", "0", "1", "l", "left", "count", "0"]
            )),
            "ERR count should be greater than 0"
        );
        assert_eq!(all(&st, "l"), arr(&["a", "b", "c", "d", "e"]));
    }

    #[test]
    fn expired_lists_read_as_missing() {
        let mut st = store();
        st.db_mut(0).set_expire(b"l", Some(NOW));
        assert_eq!(read(&st, &["llen", "l"]), int(0));
        assert_eq!(read(&st, &["lindex", "l", "0"]), Ok(Reply::Nil));
        assert!(exists(&st, "l"), "reads never remove");
        assert_eq!(apply(&mut st, &["lpushx", "l", "x"]), int(0));
        assert!(!exists(&st, "l"), "writes expire lazily");
        assert_eq!(apply(&mut st, &["rpush", "l", "x"]), int(1));
        assert_eq!(st.db(0).get(b"l").and_then(|e| e.expire_at()), None);
    }

    #[test]
    fn encoding_turns_quicklist_past_the_limit_and_stays() {
        let mut st = Store::default();
        apply(&mut st, &["rpush", "e", "a", "b"]).ok();
        assert_eq!(encoding(&st, "e"), Ok(bulk("listpack")));
        let big = "x".repeat(9000);
        apply(&mut st, &["rpush", "e", &big]).ok();
        assert_eq!(encoding(&st, "e"), Ok(bulk("quicklist")));
        apply(&mut st, &["rpop", "e"]).ok();
        assert_eq!(encoding(&st, "e"), Ok(bulk("quicklist")));
        // LSET and LINSERT with a big value convert too.
        apply(&mut st, &["rpush", "f", "a"]).ok();
        apply(&mut st, &["lset", "f", "0", &big]).ok();
        assert_eq!(encoding(&st, "f"), Ok(bulk("quicklist")));
        apply(&mut st, &["rpush", "g", "a"]).ok();
        apply(&mut st, &["linsert", "g", "after", "a", &big]).ok();
        assert_eq!(encoding(&st, "g"), Ok(bulk("quicklist")));
        assert_eq!(read(&st, &["lindex", "g", "1"]), Ok(bulk(&big)));
        // Many small pushes cross the 8 KB default as well.
        for i in 0..2000 {
            apply(&mut st, &["lpush", "h", &format!("value-{i}")]).ok();
        }
        assert_eq!(encoding(&st, "h"), Ok(bulk("quicklist")));
        assert_eq!(read(&st, &["lindex", "h", "0"]), Ok(bulk("value-1999")));
        assert_eq!(read(&st, &["lindex", "h", "-1"]), Ok(bulk("value-0")));
    }

    #[test]
    fn positive_list_max_listpack_size_counts_entries() {
        let mut st = Store::default();
        st.limits.list_max_listpack_size = 4;
        apply(&mut st, &["rpush", "c", "1", "2", "3", "4"]).ok();
        assert_eq!(encoding(&st, "c"), Ok(bulk("listpack")));
        apply(&mut st, &["rpush", "c", "5"]).ok();
        assert_eq!(encoding(&st, "c"), Ok(bulk("quicklist")));
        assert_eq!(all(&st, "c"), arr(&["1", "2", "3", "4", "5"]));
    }

    #[test]
    fn big_lists_behave_across_nodes() {
        let mut st = Store::default();
        st.limits.list_max_listpack_size = 3;
        let items: Vec<String> = (0..50).map(|i| format!("v{i}")).collect();
        let mut a = vec!["rpush".to_string(), "b".to_string()];
        a.extend(items.iter().cloned());
        let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        assert_eq!(apply(&mut st, &a), int(50));
        let want: Vec<&str> = items.iter().map(|s| s.as_str()).collect();
        assert_eq!(all(&st, "b"), arr(&want));
        assert_eq!(read(&st, &["lrange", "b", "10", "12"]), arr(&want[10..13]));
        assert_eq!(read(&st, &["lpos", "b", "v40", "RANK", "-1"]), int(40));
        assert_eq!(
            apply(&mut st, &["linsert", "b", "before", "v25", "new"]),
            int(51)
        );
        assert_eq!(read(&st, &["lindex", "b", "25"]), Ok(bulk("new")));
        assert_eq!(apply(&mut st, &["lrem", "b", "0", "new"]), int(1));
        assert_eq!(apply(&mut st, &["ltrim", "b", "5", "-6"]), ok());
        assert_eq!(all(&st, "b"), arr(&want[5..45]));
        assert_eq!(apply(&mut st, &["lpop", "b", "20"]), arr(&want[5..25]));
        assert_eq!(read(&st, &["llen", "b"]), int(20));
    }

    #[test]
    fn table_entries_match_redis() {
        let spec = |n: &str| crate::table::lookup(n.as_bytes()).expect(n);
        let lmpop = spec("lmpop");
        assert!(lmpop.flags.contains(Flags::MOVABLEKEYS));
        assert_eq!(
            lmpop.keys_of(&args(&["lmpop", "2", "a", "b", "left"])),
            vec![2, 3]
        );
        assert_eq!(
            spec("blmpop").keys_of(&args(&["blmpop", "0", "2", "a", "b", "left"])),
            vec![3, 4]
        );
        assert_eq!(
            spec("blpop").keys_of(&args(&["blpop", "a", "b", "0"])),
            vec![1, 2]
        );
        assert_eq!(
            spec("lmove").keys_of(&args(&["lmove", "a", "b", "left", "left"])),
            vec![1, 2]
        );
        assert!(spec("blpop").flags.contains(Flags::BLOCKING));
        assert!(spec("lpush").flags.contains(Flags::DENYOOM));
        assert!(!spec("lpop").flags.contains(Flags::DENYOOM));
        assert!(spec("llen")
            .flags
            .contains(Flags::READONLY.union(Flags::FAST)));
    }

    #[test]
    fn memory_per_element_is_small() {
        let mut st = Store::default();
        let mut a = vec!["rpush".to_string(), "m".to_string()];
        a.extend((0..100).map(|i| format!("item:{i:04}")));
        let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        apply(&mut st, &a).ok();
        let heap = st.db(0).get(b"m").map(|e| e.value.heap_size()).unwrap_or(0);
        // 9 data bytes + 2 of entry header and backlen, plus growth slack.
        assert!(heap < 100 * 11 * 5 / 4 + 64, "{heap}");
    }
}
