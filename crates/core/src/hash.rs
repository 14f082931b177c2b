//! Hashes: HSET HSETNX HMSET HGET HMGET HGETALL HDEL HEXISTS HLEN HKEYS
//! HVALS HSTRLEN HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN, with Redis 7.0's
//! replies and error texts (`t_hash.c`).
//!
//! The value type and its encodings (listpack, hashtable) are the
//! engine's, reached through [`HashOps`]; this module parses arguments,
//! checks types, deletes a hash that becomes empty and shapes replies.
//! Every argument is validated before the first change, so a failing
//! command writes nothing.
//! HRANDFIELD picks with `ctx.random`, over the hash's deterministic
//! iteration order.

use crate::args::{eq_ic, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::glob;
use crate::keyspace::{Collection, HashOps, Keyspace, Value};
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags};
use bytes::Bytes;
use kvasir_resp::Reply;

const W_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WF_OOM: Flags = W_OOM.union(Flags::FAST);
const WF: Flags = Flags::WRITE.union(Flags::FAST);
const R: Flags = Flags::READONLY;
const RF: Flags = Flags::READONLY.union(Flags::FAST);
const ACL_WF: &[&str] = &["write", "hash", "fast"];
const ACL_R: &[&str] = &["read", "hash", "slow"];
const ACL_RF: &[&str] = &["read", "hash", "fast"];
const G: &str = "hash";
const ONE_KEY: (i32, i32, i32) = (1, 1, 1);

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("hdel", -3, WF, ONE_KEY, ACL_WF, G, "2.0.0", "Delete one or more hash fields", crate::write_handler!(hdel)).idle_on_empty().keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_DELETE]),
    cmd("hexists", 3, RF, ONE_KEY, ACL_RF, G, "2.0.0", "Determine if a hash field exists", crate::read_handler!(hexists)).keys_access(crate::table::KeyAccess::Existence),
    cmd("hget", 3, RF, ONE_KEY, ACL_RF, G, "2.0.0", "Get the value of a hash field", crate::read_handler!(hget)),
    cmd("hgetall", 2, R, ONE_KEY, ACL_R, G, "2.0.0", "Get all the fields and values in a hash", crate::read_handler!(hgetall)).with_tips(&["nondeterministic_output_order"]),
    cmd("hincrby", 4, WF_OOM, ONE_KEY, ACL_WF, G, "2.0.0", "Increment the integer value of a hash field by the given number", crate::write_handler!(hincrby)),
    cmd("hincrbyfloat", 4, WF_OOM, ONE_KEY, ACL_WF, G, "2.6.0", "Increment the float value of a hash field by the given amount", crate::write_handler!(hincrbyfloat)),
    cmd("hkeys", 2, R, ONE_KEY, ACL_R, G, "2.0.0", "Get all the fields in a hash", crate::read_handler!(hkeys)).with_tips(&["nondeterministic_output_order"]),
    cmd("hlen", 2, RF, ONE_KEY, ACL_RF, G, "2.0.0", "Get the number of fields in a hash", crate::read_handler!(hlen)).keys_access(crate::table::KeyAccess::Existence),
    cmd("hmget", -3, RF, ONE_KEY, ACL_RF, G, "2.0.0", "Get the values of all the given hash fields", crate::read_handler!(hmget)),
    cmd("hmset", -4, WF_OOM, ONE_KEY, ACL_WF, G, "2.0.0", "Set multiple hash fields to multiple values", crate::write_handler!(hmset)).events(crate::notify::Events::Named("hset")).keys_access(crate::table::KeyAccess::Write),
    cmd("hrandfield", -2, R, ONE_KEY, ACL_R, G, "6.2.0", "Get one or multiple random fields from a hash", crate::read_handler!(hrandfield)).with_tips(&["nondeterministic_output"]),
    cmd("hscan", -3, R, ONE_KEY, ACL_R, G, "2.8.0", "Incrementally iterate hash fields and associated values", crate::read_handler!(hscan)).with_tips(&["nondeterministic_output"]),
    cmd("hset", -4, WF_OOM, ONE_KEY, ACL_WF, G, "2.0.0", "Set the string value of a hash field", crate::write_handler!(hset)).keys_access(crate::table::KeyAccess::Write),
    cmd("hsetnx", 4, WF_OOM, ONE_KEY, ACL_WF, G, "2.0.0", "Set the value of a hash field, only if the field does not exist", crate::write_handler!(hsetnx)).idle_on_empty().events(crate::notify::Events::Named("hset")).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_INSERT]),
    cmd("hstrlen", 3, RF, ONE_KEY, ACL_RF, G, "3.2.0", "Get the length of the value of a hash field", crate::read_handler!(hstrlen)).keys_access(crate::table::KeyAccess::Existence),
    cmd("hvals", 2, R, ONE_KEY, ACL_R, G, "2.0.0", "Get all the values in a hash", crate::read_handler!(hvals)).with_tips(&["nondeterministic_output_order"]),
];

// ---------------------------------------------------------------------------
// Access
// ---------------------------------------------------------------------------

/// For reads: the live hash at `key` (None when missing), WRONGTYPE for
/// other types.
fn hash_ref<'a, K: Keyspace>(
    store: &'a Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Option<&'a K::Hash>, CmdError> {
    match store.live(db, key, ctx.now_ms).map(|e| e.value) {
        None => Ok(None),
        Some(Value::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// For writes: the live hash at `key` after lazy expiry (None when
/// missing), WRONGTYPE for other types.
fn hash_mut<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Option<&'a mut K::Hash>, CmdError> {
    match store.live_value_mut(db, key, ctx) {
        None => Ok(None),
        Some(Value::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// For writes: the live hash at `key`, created empty when missing. Call
/// only once nothing can fail any more, or an empty hash would be left.
fn hash_mut_or_create<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<&'a mut K::Hash, CmdError> {
    match store.live_value_mut_or_insert(db, key, ctx, || Value::Hash(Box::new(K::Hash::new()))) {
        Value::Hash(h) => Ok(h),
        _ => Err(CmdError::WrongType),
    }
}

fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(b))
}

// ---------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------

/// HSET key field value [field value ...]: the number of new fields.
fn hset<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    set_pairs(store, db, args, ctx, "hset").map(|added| Reply::Int(added as i64))
}

/// HMSET: HSET answering OK.
fn hmset<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    set_pairs(store, db, args, ctx, "hmset").map(|_| Reply::ok())
}

fn set_pairs<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    name: &str,
) -> Result<usize, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.to_string()));
    }
    let pairs = &args[2..];
    let longest = pairs.iter().map(|a| a.len()).max().unwrap_or(0);
    let limits = store.limits;
    let h = hash_mut_or_create(store, db, &args[1], ctx)?;
    h.reserve(pairs.len() / 2, longest, &limits);
    let mut added = 0;
    for pair in pairs.chunks_exact(2) {
        added += h.set(&pair[0], &pair[1], &limits) as usize;
    }
    Ok(added)
}

fn hsetnx<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let limits = store.limits;
    let h = hash_mut_or_create(store, db, &args[1], ctx)?;
    if h.contains(&args[2]) {
        return Ok(Reply::Int(0));
    }
    h.set(&args[2], &args[3], &limits);
    Ok(Reply::Int(1))
}

/// HDEL key field [field ...]: the number removed; an emptied hash goes.
fn hdel<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    let Some(h) = hash_mut(store, db, key, ctx)? else {
        return Ok(Reply::Int(0));
    };
    let removed = args[2..].iter().filter(|f| h.remove(f)).count();
    if h.is_empty() {
        store.db_mut(db).remove(key);
    }
    Ok(Reply::Int(removed as i64))
}

/// HINCRBY key field increment. The increment is checked first, then the
/// type, then the stored value (as Redis).
fn hincrby<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let incr = parse_i64(&args[3])?;
    let limits = store.limits;
    let field = &args[2];
    let current = match hash_mut(store, db, &args[1], ctx)?.and_then(|h| h.get(field)) {
        Some(v) => crate::keyspace::canonical_i64(v)
            .ok_or_else(|| CmdError::other("ERR hash value is not an integer"))?,
        None => 0,
    };
    let next = current.checked_add(incr).ok_or(CmdError::Overflow)?;
    let h = hash_mut_or_create(store, db, &args[1], ctx)?;
    h.set(field, next.to_string().as_bytes(), &limits);
    Ok(Reply::Int(next))
}

/// HINCRBYFLOAT key field increment. Numbers are parsed and the sum
/// formatted exactly as INCRBYFLOAT does (`string::float`); the error
/// texts are the hash ones.
fn hincrbyfloat<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    use crate::string::float;
    let incr = &args[3];
    // The increment alone: not a float, or an infinity.
    match float::add(b"0", incr) {
        Ok(_) => {}
        Err(CmdError::NotFloat) => return Err(CmdError::NotFloat),
        Err(_) => return Err(CmdError::other("ERR value is NaN or Infinity")),
    }
    let limits = store.limits;
    let field = &args[2];
    let sum = match hash_mut(store, db, &args[1], ctx)?.and_then(|h| h.get(field)) {
        Some(v) => {
            // The stored value alone; an infinity there makes the sum one.
            if let Err(CmdError::NotFloat) = float::add(v, b"0") {
                return Err(CmdError::other("ERR hash value is not a float"));
            }
            float::add(v, incr)?
        }
        None => float::add(b"0", incr)?,
    };
    let h = hash_mut_or_create(store, db, &args[1], ctx)?;
    h.set(field, sum.as_bytes(), &limits);
    Ok(Reply::Bulk(Bytes::from(sum)))
}

// ---------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------

fn hget<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let h = hash_ref(store, db, &args[1], ctx)?;
    Ok(h.and_then(|h| h.get(&args[2])).map_or(Reply::Nil, bulk))
}

/// HMGET: nil for each missing field (all of them for a missing key).
fn hmget<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let h = hash_ref(store, db, &args[1], ctx)?;
    let values = args[2..]
        .iter()
        .map(|f| h.and_then(|h| h.get(f)).map_or(Reply::Nil, bulk))
        .collect();
    Ok(Reply::Array(values))
}

/// HGETALL: a map in RESP3, a flat array in RESP2.
fn hgetall<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let h = hash_ref(store, db, &args[1], ctx)?;
    let pairs = h
        .into_iter()
        .flat_map(|h| h.iter())
        .map(|(f, v)| (bulk(f), bulk(v)))
        .collect();
    Ok(Reply::Map(pairs))
}

fn hkeys<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let h = hash_ref(store, db, &args[1], ctx)?;
    let keys = h.into_iter().flat_map(|h| h.iter()).map(|(f, _)| bulk(f));
    Ok(Reply::Array(keys.collect()))
}

fn hvals<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let h = hash_ref(store, db, &args[1], ctx)?;
    let vals = h.into_iter().flat_map(|h| h.iter()).map(|(_, v)| bulk(v));
    Ok(Reply::Array(vals.collect()))
}

fn hlen<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let h = hash_ref(store, db, &args[1], ctx)?;
    Ok(Reply::Int(h.map_or(0, |h| h.len()) as i64))
}

fn hexists<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let h = hash_ref(store, db, &args[1], ctx)?;
    Ok(Reply::Int(h.is_some_and(|h| h.contains(&args[2])) as i64))
}

fn hstrlen<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let h = hash_ref(store, db, &args[1], ctx)?;
    let len = h.and_then(|h| h.get(&args[2])).map_or(0, |v| v.len());
    Ok(Reply::Int(len as i64))
}

// ---------------------------------------------------------------------------
// HRANDFIELD
// ---------------------------------------------------------------------------

/// The most picks a negative count may ask for. Redis 7.0 would try to
/// build any reply (and dies of OOM near i64::MIN); Kvasir answers an
/// out-of-range error beyond this instead of allocating without bound.
const MAX_REPEATED_PICKS: u64 = 1 << 20;

/// HRANDFIELD key [count [WITHVALUES]]. Checks run in Redis's order: the
/// count, the syntax, WITHVALUES's range, then the key. Without a count:
/// one field or nil. A positive count gives distinct fields (the whole
/// hash when it has no more), a negative one allows repeats. WITHVALUES
/// pairs are nested arrays in RESP3 and flat in RESP2.
fn hrandfield<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    let Some(count_arg) = args.get(2) else {
        let Some(h) = hash_ref(store, db, key, ctx)? else {
            return Ok(Reply::Nil);
        };
        let pick = (ctx.random(0) % h.len().max(1) as u64) as usize;
        let picked = h.pairs_at([pick]).next();
        return Ok(picked.map_or(Reply::Nil, |(f, _)| bulk(f)));
    };
    let count = parse_i64(count_arg)?;
    if count == i64::MIN {
        return Err(CmdError::other(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let with_values = match &args[3..] {
        [] => false,
        [w] if eq_ic(w, "WITHVALUES") => true,
        _ => return Err(CmdError::Syntax),
    };
    if with_values && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::other("ERR value is out of range"));
    }
    if count < 0 && count.unsigned_abs() > MAX_REPEATED_PICKS {
        return Err(CmdError::other("ERR value is out of range"));
    }
    let Some(h) = hash_ref(store, db, key, ctx)?.filter(|_| count != 0) else {
        return Ok(Reply::Array(Vec::new()));
    };
    let len = h.len() as u64;
    let picks: Vec<usize> = if count < 0 {
        // Repeats allowed: each pick is independent.
        (0..count.unsigned_abs())
            .map(|n| (ctx.random(n) % len.max(1)) as usize)
            .collect()
    } else if count as u64 >= len {
        (0..h.len()).collect()
    } else {
        distinct_picks(count as usize, h.len(), ctx)
    };
    let chosen = h.pairs_at(picks);
    Ok(if with_values {
        Reply::Pairs(chosen.map(|(f, v)| (bulk(f), bulk(v))).collect())
    } else {
        Reply::Array(chosen.map(|(f, _)| bulk(f)).collect())
    })
}

/// `count` distinct positions below `len` (count < len), picked with the
/// command's seed. When the picks cover a good part of the hash, the first
/// steps of a Fisher-Yates shuffle; otherwise random positions with
/// repeats skipped, so a few picks from a huge hash cost O(count).
fn distinct_picks(count: usize, len: usize, ctx: &Ctx) -> Vec<usize> {
    if count.saturating_mul(3) > len {
        let mut order: Vec<usize> = (0..len).collect();
        for i in 0..count {
            let j = i + (ctx.random(i as u64) % (len - i) as u64) as usize;
            order.swap(i, j);
        }
        order.truncate(count);
        return order;
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut picks = Vec::with_capacity(count);
    let mut n = 0;
    while picks.len() < count {
        let i = (ctx.random(n) % len as u64) as usize;
        n += 1;
        if seen.insert(i) {
            picks.push(i);
        }
    }
    picks
}

// ---------------------------------------------------------------------------
// HSCAN
// ---------------------------------------------------------------------------

/// Redis's default SCAN COUNT.
const SCAN_DEFAULT_COUNT: u64 = 10;

/// HSCAN key cursor [MATCH pattern] [COUNT count]. As in Redis the cursor
/// is checked first, then the key (a missing key answers `0 []` whatever
/// the options), then the options. See [`HashOps::scan`] for the cursor.
fn hscan<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cursor = crate::args::parse_cursor(&args[2])?;
    let Some(h) = hash_ref(store, db, &args[1], ctx)? else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let mut pattern = None;
    let mut count = SCAN_DEFAULT_COUNT;
    for opt in args[3..].chunks(2) {
        match opt {
            [name, value] if eq_ic(name, "COUNT") => {
                count = u64::try_from(parse_i64(value)?)
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or(CmdError::Syntax)?;
            }
            [name, value] if eq_ic(name, "MATCH") => {
                pattern = Some(value).filter(|p| !glob::is_match_all(p));
            }
            _ => return Err(CmdError::Syntax),
        }
    }
    let mut items = Vec::new();
    let next = h.scan(cursor, count, |f, v| {
        if pattern.is_none_or(|p| glob::matches(p, f, false)) {
            items.push(bulk(f));
            items.push(bulk(v));
        }
    });
    Ok(scan_reply(next, items))
}

fn scan_reply(cursor: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(vec![Reply::bulk(cursor.to_string()), Reply::Array(items)])
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000;
    const NOT_INT: &str = "ERR value is not an integer or out of range";
    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    const SYNTAX: &str = "ERR syntax error";

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    fn ctx_at(now_ms: u64, seed: u64) -> Ctx {
        Ctx { now_ms, seed }
    }

    fn run(s: &mut Store, a: &[&str]) -> Result<Reply, String> {
        s.apply(0, &args(a), &ctx_at(T0, 7))
            .map_err(|e| e.text().into_owned())
    }

    fn run_at(s: &mut Store, now_ms: u64, a: &[&str]) -> Result<Reply, String> {
        s.apply(0, &args(a), &ctx_at(now_ms, 7))
            .map_err(|e| e.text().into_owned())
    }

    fn read(s: &Store, a: &[&str]) -> Result<Reply, String> {
        read_seeded(s, 7, a)
    }

    fn read_seeded(s: &Store, seed: u64, a: &[&str]) -> Result<Reply, String> {
        s.read(0, &args(a), &ctx_at(T0, seed))
            .map_err(|e| e.text().into_owned())
    }

    fn b(s: &str) -> Reply {
        Reply::Bulk(Bytes::from(s.to_string()))
    }

    fn bulk_ok(s: &str) -> Result<Reply, String> {
        Ok(b(s))
    }

    fn int(n: i64) -> Result<Reply, String> {
        Ok(Reply::Int(n))
    }

    fn arr(items: &[&str]) -> Result<Reply, String> {
        Ok(Reply::Array(items.iter().map(|s| b(s)).collect()))
    }

    fn err(text: &str) -> Result<Reply, String> {
        Err(text.to_string())
    }

    fn encoding(s: &Store, key: &str) -> Result<Reply, String> {
        read(s, &["OBJECT", "ENCODING", key])
    }

    fn exists(s: &Store, key: &str) -> bool {
        s.db(0).get(key.as_bytes()).is_some()
    }

    /// The bulk strings of an array reply.
    fn strings(r: Result<Reply, String>) -> Vec<String> {
        match r {
            Ok(Reply::Array(items)) => items
                .into_iter()
                .map(|i| match i {
                    Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                    other => panic!("not a bulk: {other:?}"),
                })
                .collect(),
            other => panic!("not an array: {other:?}"),
        }
    }

    #[test]
    fn table_entries_match_redis() {
        let spec = |n: &str| {
            crate::table::lookup(n.as_bytes())
                .map(|c| (c.arity, c.first_key, c.last_key, c.step, c.flags.names()))
        };
        let expected: &[(&str, i32, &[&str])] = &[
            ("hdel", -3, &["write", "fast"]),
            ("hexists", 3, &["readonly", "fast"]),
            ("hget", 3, &["readonly", "fast"]),
            ("hgetall", 2, &["readonly"]),
            ("hincrby", 4, &["write", "denyoom", "fast"]),
            ("hincrbyfloat", 4, &["write", "denyoom", "fast"]),
            ("hkeys", 2, &["readonly"]),
            ("hlen", 2, &["readonly", "fast"]),
            ("hmget", -3, &["readonly", "fast"]),
            ("hmset", -4, &["write", "denyoom", "fast"]),
            ("hrandfield", -2, &["readonly"]),
            ("hscan", -3, &["readonly"]),
            ("hset", -4, &["write", "denyoom", "fast"]),
            ("hsetnx", 4, &["write", "denyoom", "fast"]),
            ("hstrlen", 3, &["readonly", "fast"]),
            ("hvals", 2, &["readonly"]),
        ];
        for (name, arity, flags) in expected {
            assert_eq!(
                spec(name),
                Some((*arity, 1, 1, 1, flags.to_vec())),
                "{name}"
            );
        }
        assert_eq!(COMMANDS.len(), expected.len());
    }

    #[test]
    fn hset_hget_hmset_hsetnx() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["hset", "h", "a", "1", "b", "2"]), int(2));
        assert_eq!(run(&mut s, &["hset", "h", "a", "10", "c", "3"]), int(1));
        assert_eq!(read(&s, &["hget", "h", "a"]), bulk_ok("10"));
        assert_eq!(read(&s, &["hget", "h", "zz"]), Ok(Reply::Nil));
        assert_eq!(read(&s, &["hget", "missing", "a"]), Ok(Reply::Nil));
        assert_eq!(run(&mut s, &["hmset", "h", "d", "4"]), Ok(Reply::ok()));
        assert_eq!(run(&mut s, &["hsetnx", "h", "a", "x"]), int(0));
        assert_eq!(run(&mut s, &["hsetnx", "h", "e", "5"]), int(1));
        assert_eq!(run(&mut s, &["hsetnx", "new", "f", "v"]), int(1));
        assert_eq!(read(&s, &["hget", "h", "a"]), bulk_ok("10"));
        assert_eq!(read(&s, &["hlen", "h"]), int(5));
        // Repeated fields in one HSET count once, the last value wins.
        assert_eq!(run(&mut s, &["hset", "r", "f", "1", "f", "2"]), int(1));
        assert_eq!(read(&s, &["hget", "r", "f"]), bulk_ok("2"));
        // Empty fields and values are fine; binary data too.
        assert_eq!(run(&mut s, &["hset", "r", "", ""]), int(1));
        assert_eq!(read(&s, &["hexists", "r", ""]), int(1));
        assert_eq!(run(&mut s, &["hset", "bin", "\0\r\n", "\u{ff}"]), int(1));
        assert_eq!(read(&s, &["hget", "bin", "\0\r\n"]), bulk_ok("\u{ff}"));
    }

    #[test]
    fn arity_errors() {
        let mut s = Store::default();
        for (cmd, a) in [
            ("hset", &["hset", "h", "a", "1", "b"][..]),
            ("hset", &["hset", "h", "a"]),
            ("hmset", &["hmset", "h", "a", "1", "b"]),
            ("hsetnx", &["hsetnx", "h", "a"]),
            ("hget", &["hget", "h"]),
            ("hdel", &["hdel", "h"]),
            ("hincrby", &["hincrby", "h", "a"]),
            ("hincrbyfloat", &["hincrbyfloat", "h", "a", "1", "2"]),
            ("hrandfield", &["hrandfield"]),
            ("hscan", &["hscan", "h"]),
            ("hstrlen", &["hstrlen", "h"]),
        ] {
            assert_eq!(
                run(&mut s, a),
                err(&format!(
                    "ERR wrong number of arguments for '{cmd}' command"
                ))
            );
        }
        assert!(!exists(&s, "h"), "a failed HSET creates nothing");
    }

    #[test]
    fn wrong_type_everywhere() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["set", "s", "x"]), Ok(Reply::ok()));
        let writes: &[&[&str]] = &[
            &["hset", "s", "a", "1"],
            &["hmset", "s", "a", "1"],
            &["hsetnx", "s", "a", "1"],
            &["hdel", "s", "a"],
            &["hincrby", "s", "a", "1"],
            &["hincrbyfloat", "s", "a", "1"],
        ];
        for a in writes {
            assert_eq!(run(&mut s, a), err(WRONGTYPE), "{a:?}");
        }
        let reads: &[&[&str]] = &[
            &["hget", "s", "a"],
            &["hmget", "s", "a"],
            &["hgetall", "s"],
            &["hkeys", "s"],
            &["hvals", "s"],
            &["hlen", "s"],
            &["hexists", "s", "a"],
            &["hstrlen", "s", "a"],
            &["hrandfield", "s"],
            &["hrandfield", "s", "2"],
            &["hscan", "s", "0"],
        ];
        for a in reads {
            assert_eq!(read(&s, a), err(WRONGTYPE), "{a:?}");
        }
        assert_eq!(read(&s, &["get", "s"]), bulk_ok("x"));
        assert_eq!(run(&mut s, &["hset", "h", "a", "1"]), int(1));
        assert_eq!(read(&s, &["get", "h"]), err(WRONGTYPE));
        assert_eq!(read(&s, &["type", "h"]), Ok(Reply::simple("hash")));
    }

    #[test]
    fn reads_of_missing_keys() {
        let s = Store::default();
        assert_eq!(
            read(&s, &["hmget", "m", "a", "b"]),
            Ok(Reply::Array(vec![Reply::Nil, Reply::Nil]))
        );
        assert_eq!(read(&s, &["hgetall", "m"]), Ok(Reply::Map(vec![])));
        assert_eq!(read(&s, &["hkeys", "m"]), arr(&[]));
        assert_eq!(read(&s, &["hvals", "m"]), arr(&[]));
        assert_eq!(read(&s, &["hlen", "m"]), int(0));
        assert_eq!(read(&s, &["hexists", "m", "a"]), int(0));
        assert_eq!(read(&s, &["hstrlen", "m", "a"]), int(0));
        assert_eq!(read(&s, &["hrandfield", "m"]), Ok(Reply::Nil));
        assert_eq!(read(&s, &["hrandfield", "m", "3"]), arr(&[]));
        assert_eq!(read(&s, &["hrandfield", "m", "-3", "withvalues"]), arr(&[]));
    }

    #[test]
    fn getall_keys_vals_mget_strlen() {
        let mut s = Store::default();
        assert_eq!(
            run(&mut s, &["hset", "h", "a", "1", "b", "hello", "c", "3"]),
            int(3)
        );
        assert_eq!(
            read(&s, &["hgetall", "h"]),
            Ok(Reply::Map(vec![
                (b("a"), b("1")),
                (b("b"), b("hello")),
                (b("c"), b("3"))
            ]))
        );
        assert_eq!(read(&s, &["hkeys", "h"]), arr(&["a", "b", "c"]));
        assert_eq!(read(&s, &["hvals", "h"]), arr(&["1", "hello", "3"]));
        assert_eq!(
            read(&s, &["hmget", "h", "b", "zz", "a"]),
            Ok(Reply::Array(vec![b("hello"), Reply::Nil, b("1")]))
        );
        assert_eq!(read(&s, &["hstrlen", "h", "b"]), int(5));
        assert_eq!(read(&s, &["hstrlen", "h", "zz"]), int(0));
        assert_eq!(read(&s, &["hexists", "h", "a"]), int(1));
        assert_eq!(read(&s, &["hexists", "h", "zz"]), int(0));
    }

    #[test]
    fn hdel_deletes_emptied_hash() {
        let mut s = Store::default();
        assert_eq!(
            run(&mut s, &["hset", "h", "a", "1", "b", "2", "c", "3"]),
            int(3)
        );
        assert_eq!(run(&mut s, &["hdel", "h", "a", "zz", "a"]), int(1));
        assert_eq!(read(&s, &["hkeys", "h"]), arr(&["b", "c"]));
        assert_eq!(run(&mut s, &["hdel", "missing", "a"]), int(0));
        assert_eq!(run(&mut s, &["hdel", "h", "b", "c"]), int(2));
        assert!(!exists(&s, "h"));
        // The same in the hashtable encoding.
        let long = "v".repeat(100);
        assert_eq!(run(&mut s, &["hset", "t", "a", &long, "b", "2"]), int(2));
        assert_eq!(encoding(&s, "t"), bulk_ok("hashtable"));
        assert_eq!(run(&mut s, &["hdel", "t", "a", "b"]), int(2));
        assert!(!exists(&s, "t"));
    }

    #[test]
    fn hincrby_rules() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["hincrby", "h", "n", "5"]), int(5));
        assert_eq!(run(&mut s, &["hincrby", "h", "n", "-7"]), int(-2));
        assert_eq!(read(&s, &["hget", "h", "n"]), bulk_ok("-2"));
        assert_eq!(run(&mut s, &["hincrby", "h", "n", "x"]), err(NOT_INT));
        assert_eq!(run(&mut s, &["hincrby", "h", "n", "1.5"]), err(NOT_INT));
        assert_eq!(run(&mut s, &["hincrby", "nokey", "n", "x"]), err(NOT_INT));
        assert!(!exists(&s, "nokey"));
        let not_int = "ERR hash value is not an integer";
        for bad in [
            "abc",
            " 1",
            "1 ",
            "+1",
            "01",
            "-0",
            "1.0",
            "",
            "9223372036854775808",
        ] {
            assert!(run(&mut s, &["hset", "h", "s", bad]).is_ok());
            assert_eq!(
                run(&mut s, &["hincrby", "h", "s", "1"]),
                err(not_int),
                "{bad:?}"
            );
            assert_eq!(read(&s, &["hget", "h", "s"]), bulk_ok(bad));
        }
        let overflow = "ERR increment or decrement would overflow";
        assert_eq!(
            run(&mut s, &["hset", "h", "max", "9223372036854775807"]),
            int(1)
        );
        assert_eq!(run(&mut s, &["hincrby", "h", "max", "1"]), err(overflow));
        assert_eq!(run(&mut s, &["hincrby", "h", "max", "0"]), int(i64::MAX));
        assert_eq!(
            run(&mut s, &["hset", "h", "min", "-9223372036854775808"]),
            int(1)
        );
        assert_eq!(run(&mut s, &["hincrby", "h", "min", "-1"]), err(overflow));
        assert_eq!(
            run(&mut s, &["hincrby", "h", "min", "9223372036854775807"]),
            int(-1)
        );
        assert_eq!(
            run(&mut s, &["hincrby", "h", "zero", "-9223372036854775808"]),
            int(i64::MIN)
        );
    }

    #[test]
    fn hincrbyfloat_rules() {
        let mut s = Store::default();
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "h", "f", "1.5"]),
            bulk_ok("1.5")
        );
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "h", "f", "0.1"]),
            bulk_ok("1.6")
        );
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "h", "f", "-1.6"]),
            bulk_ok("0")
        );
        assert_eq!(run(&mut s, &["hset", "h", "i", "10"]), int(1));
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "h", "i", "2.0e2"]),
            bulk_ok("210")
        );
        assert_eq!(read(&s, &["hget", "h", "i"]), bulk_ok("210"));
        // Formatted as INCRBYFLOAT formats it.
        assert_eq!(run(&mut s, &["set", "str", "10.50"]), Ok(Reply::ok()));
        assert_eq!(run(&mut s, &["hset", "h", "g", "10.50"]), int(1));
        assert_eq!(
            run(&mut s, &["incrbyfloat", "str", "0.1"]),
            run(&mut s, &["hincrbyfloat", "h", "g", "0.1"])
        );
        let not_float = "ERR value is not a valid float";
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "h", "f", "x"]),
            err(not_float)
        );
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "h", "f", "nan"]),
            err(not_float)
        );
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "nokey", "f", "x"]),
            err(not_float)
        );
        let nan_inf = "ERR value is NaN or Infinity";
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "h", "f", "inf"]),
            err(nan_inf)
        );
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "nokey", "f", "-inf"]),
            err(nan_inf)
        );
        assert!(!exists(&s, "nokey"));
        let hash_not_float = "ERR hash value is not a float";
        for bad in ["abc", " 1", "1 ", "nan", ""] {
            assert!(run(&mut s, &["hset", "h", "s", bad]).is_ok());
            assert_eq!(
                run(&mut s, &["hincrbyfloat", "h", "s", "1"]),
                err(hash_not_float),
                "{bad:?}"
            );
            assert_eq!(read(&s, &["hget", "h", "s"]), bulk_ok(bad));
        }
        assert_eq!(run(&mut s, &["hset", "h", "inf", "inf"]), int(1));
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "h", "inf", "1"]),
            err("ERR increment would produce NaN or Infinity")
        );
        assert_eq!(read(&s, &["hget", "h", "inf"]), bulk_ok("inf"));
        assert_eq!(run(&mut s, &["hset", "h", "big", "1e4932"]), int(1));
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "h", "big", "1e4932"]),
            err("ERR increment would produce NaN or Infinity")
        );
    }

    #[test]
    fn encoding_transitions() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["hset", "h", "a", "1"]), int(1));
        assert_eq!(encoding(&s, "h"), bulk_ok("listpack"));
        // Exactly 64 bytes still fit; 65 converts, for fields and values.
        let v64 = "v".repeat(64);
        let v65 = "v".repeat(65);
        assert_eq!(run(&mut s, &["hset", "h", "b", &v64]), int(1));
        assert_eq!(encoding(&s, "h"), bulk_ok("listpack"));
        assert_eq!(run(&mut s, &["hset", "h", "b", &v65]), int(0));
        assert_eq!(encoding(&s, "h"), bulk_ok("hashtable"));
        assert_eq!(run(&mut s, &["hset", "f", &v65, "1"]), int(1));
        assert_eq!(encoding(&s, "f"), bulk_ok("hashtable"));
        assert_eq!(run(&mut s, &["hsetnx", "nx", "a", &v65]), int(1));
        assert_eq!(encoding(&s, "nx"), bulk_ok("hashtable"));
        // Never back, even when the long value goes.
        assert_eq!(run(&mut s, &["hdel", "h", "b"]), int(1));
        assert_eq!(encoding(&s, "h"), bulk_ok("hashtable"));
        // 128 entries fit, the 129th converts.
        for i in 0..128 {
            assert_eq!(run(&mut s, &["hset", "n", &format!("f{i}"), "v"]), int(1));
        }
        assert_eq!(encoding(&s, "n"), bulk_ok("listpack"));
        assert_eq!(run(&mut s, &["hincrby", "n", "f128", "1"]), int(1));
        assert_eq!(encoding(&s, "n"), bulk_ok("hashtable"));
        assert_eq!(read(&s, &["hlen", "n"]), int(129));
        assert_eq!(read(&s, &["hget", "n", "f5"]), bulk_ok("v"));
        // The thresholds come from the store's limits.
        s.limits.hash_max_listpack_entries = 2;
        assert_eq!(run(&mut s, &["hset", "small", "a", "1", "b", "2"]), int(2));
        assert_eq!(encoding(&s, "small"), bulk_ok("listpack"));
        assert_eq!(run(&mut s, &["hset", "small", "c", "3"]), int(1));
        assert_eq!(encoding(&s, "small"), bulk_ok("hashtable"));
        s.limits.hash_max_listpack_value = 3;
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "fl", "x", "1.5"]),
            bulk_ok("1.5")
        );
        assert_eq!(encoding(&s, "fl"), bulk_ok("listpack"));
        assert_eq!(
            run(&mut s, &["hincrbyfloat", "fl", "x", "0.25"]),
            bulk_ok("1.75")
        );
        assert_eq!(encoding(&s, "fl"), bulk_ok("hashtable"));
    }

    #[test]
    fn memory_usage_counts_the_data() {
        let mut s = Store::default();
        let v = "x".repeat(100);
        let mut cmd = vec!["hset".to_string(), "user1".to_string()];
        for i in 0..10 {
            cmd.push(format!("field{i}"));
            cmd.push(v.clone());
        }
        let a: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
        assert_eq!(run(&mut s, &a), int(10));
        assert_eq!(encoding(&s, "user1"), bulk_ok("hashtable"));
        let Ok(Reply::Int(usage)) = read(&s, &["MEMORY", "USAGE", "user1"]) else {
            panic!("MEMORY USAGE");
        };
        // Redis 7.0.15 reports 1736 for the same hash.
        assert!((1060..1736).contains(&usage), "{usage}");
    }

    #[test]
    fn expired_hash_reads_missing_and_is_replaced() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["hset", "h", "a", "1", "b", "2"]), int(2));
        assert_eq!(run(&mut s, &["pexpire", "h", "10"]), int(1));
        let later = T0 + 10;
        let r = s.read(0, &args(&["hget", "h", "a"]), &ctx_at(later, 7));
        assert_eq!(r, Ok(Reply::Nil));
        let r = s.read(0, &args(&["hlen", "h"]), &ctx_at(later, 7));
        assert_eq!(r, Ok(Reply::Int(0)));
        assert_eq!(run_at(&mut s, later, &["hset", "h", "c", "3"]), int(1));
        assert_eq!(read(&s, &["hkeys", "h"]), arr(&["c"]));
        assert_eq!(s.db(0).get(b"h").and_then(|e| e.expire_at()), None);
        // HSET on an existing hash keeps its TTL.
        assert_eq!(run(&mut s, &["pexpire", "h", "100"]), int(1));
        assert_eq!(run(&mut s, &["hset", "h", "d", "4"]), int(1));
        assert_eq!(
            s.db(0).get(b"h").and_then(|e| e.expire_at()),
            Some(T0 + 100)
        );
    }

    #[test]
    fn hrandfield_shapes_and_picks() {
        let mut s = Store::default();
        assert_eq!(
            run(&mut s, &["hset", "h", "a", "1", "b", "2", "c", "3"]),
            int(3)
        );
        let one = strings(read(&s, &["hrandfield", "h", "1"]));
        assert_eq!(one.len(), 1);
        let Ok(Reply::Bulk(f)) = read(&s, &["hrandfield", "h"]) else {
            panic!("bulk expected");
        };
        assert!([&b"a"[..], b"b", b"c"].contains(&&f[..]));
        // Positive counts are distinct; at or past the size, everything.
        for n in ["2", "3", "100"] {
            let mut got = strings(read(&s, &["hrandfield", "h", n]));
            let want = n.parse::<usize>().unwrap().min(3);
            assert_eq!(got.len(), want);
            got.sort();
            got.dedup();
            assert_eq!(got.len(), want, "distinct for {n}");
        }
        assert_eq!(read(&s, &["hrandfield", "h", "0"]), arr(&[]));
        assert_eq!(read(&s, &["hrandfield", "h", "0", "withvalues"]), arr(&[]));
        // Negative counts repeat.
        let got = strings(read(&s, &["hrandfield", "h", "-20"]));
        assert_eq!(got.len(), 20);
        let mut uniq = got.clone();
        uniq.sort();
        uniq.dedup();
        assert!(uniq.len() < 20);
        // WITHVALUES: pairs that belong together.
        let Ok(Reply::Pairs(pairs)) = read(&s, &["hrandfield", "h", "-5", "WITHVALUES"]) else {
            panic!("pairs expected");
        };
        assert_eq!(pairs.len(), 5);
        for (f, v) in pairs {
            let want = match f {
                Reply::Bulk(ref f) if f == "a" => "1",
                Reply::Bulk(ref f) if f == "b" => "2",
                _ => "3",
            };
            assert_eq!(v, b(want));
        }
        let Ok(Reply::Pairs(all)) = read(&s, &["hrandfield", "h", "9", "withvalues"]) else {
            panic!("pairs expected");
        };
        assert_eq!(all.len(), 3);
        // The seed decides the pick, and it does change the picks.
        let picks = |seed| read_seeded(&s, seed, &["hrandfield", "h", "-10"]);
        assert_eq!(picks(1), picks(1));
        assert!((2..20).any(|seed| picks(seed) != picks(1)));
    }

    #[test]
    fn hrandfield_on_a_big_table() {
        let mut s = Store::default();
        for i in 0..1000 {
            assert_eq!(run(&mut s, &["hset", "h", &format!("f{i}"), "v"]), int(1));
        }
        assert_eq!(encoding(&s, "h"), bulk_ok("hashtable"));
        // Both ways of picking distinct fields: shuffle and skip-repeats.
        for n in [600, 100, 1] {
            let mut got = strings(read(&s, &["hrandfield", "h", &n.to_string()]));
            assert_eq!(got.len(), n);
            got.sort();
            got.dedup();
            assert_eq!(got.len(), n);
        }
        let got = strings(read(&s, &["hrandfield", "h", "-3000"]));
        assert_eq!(got.len(), 3000);
    }

    #[test]
    fn hrandfield_errors() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["hset", "h", "a", "1"]), int(1));
        assert_eq!(read(&s, &["hrandfield", "h", "x"]), err(NOT_INT));
        assert_eq!(read(&s, &["hrandfield", "missing", "x"]), err(NOT_INT));
        assert_eq!(read(&s, &["hrandfield", "h", "1", "foo"]), err(SYNTAX));
        assert_eq!(
            read(&s, &["hrandfield", "missing", "1", "foo"]),
            err(SYNTAX)
        );
        assert_eq!(
            read(&s, &["hrandfield", "h", "1", "withvalues", "x"]),
            err(SYNTAX)
        );
        assert_eq!(
            read(&s, &["hrandfield", "h", "-9223372036854775808"]),
            err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        let range = "ERR value is out of range";
        assert_eq!(
            read(
                &s,
                &["hrandfield", "h", "-9223372036854775807", "withvalues"]
            ),
            err(range)
        );
        assert_eq!(
            read(
                &s,
                &["hrandfield", "h", "-4611686018427387904", "withvalues"]
            ),
            err(range)
        );
        assert_eq!(
            read(
                &s,
                &["hrandfield", "h", "4611686018427387904", "withvalues"]
            ),
            err(range)
        );
        assert_eq!(
            read(
                &s,
                &["hrandfield", "h", "-4611686018427387903", "withvalues", "a"]
            ),
            err(SYNTAX)
        );
        // Huge positive counts are just the whole hash.
        assert_eq!(
            read(&s, &["hrandfield", "h", "9223372036854775807"]),
            arr(&["a"])
        );
        assert_eq!(
            read(
                &s,
                &["hrandfield", "h", "4611686018427387903", "withvalues"]
            ),
            Ok(Reply::Pairs(vec![(b("a"), b("1"))]))
        );
        // Huge negative counts are refused rather than allocated.
        assert_eq!(
            read(&s, &["hrandfield", "h", "-9223372036854775807"]),
            err(range)
        );
        assert_eq!(
            strings(read(&s, &["hrandfield", "h", "-1048576"])).len(),
            1 << 20
        );
    }

    /// Runs HSCAN to completion, returning (calls, fields seen).
    fn hscan_all(s: &Store, key: &str, opts: &[&str]) -> (usize, Vec<String>) {
        let mut cursor = "0".to_string();
        let mut calls = 0;
        let mut fields = Vec::new();
        loop {
            let mut a = vec!["hscan", key, cursor.as_str()];
            a.extend_from_slice(opts);
            let Ok(Reply::Array(parts)) = read(s, &a) else {
                panic!("hscan reply");
            };
            calls += 1;
            let [Reply::Bulk(next), Reply::Array(items)] = &parts[..] else {
                panic!("hscan shape");
            };
            assert_eq!(items.len() % 2, 0);
            for pair in items.chunks(2) {
                if let Reply::Bulk(f) = &pair[0] {
                    fields.push(String::from_utf8_lossy(f).into_owned());
                }
            }
            cursor = String::from_utf8_lossy(next).into_owned();
            if cursor == "0" {
                return (calls, fields);
            }
        }
    }

    #[test]
    fn hscan_listpack_and_table() {
        let mut s = Store::default();
        for i in 0..20 {
            assert_eq!(
                run(&mut s, &["hset", "small", &format!("f{i}"), "v"]),
                int(1)
            );
        }
        let (calls, fields) = hscan_all(&s, "small", &["COUNT", "2"]);
        assert_eq!((calls, fields.len()), (1, 20), "a listpack comes whole");
        let (_, fields) = hscan_all(&s, "small", &["MATCH", "f1*"]);
        assert_eq!(fields.len(), 11);
        assert_eq!(
            read(&s, &["hscan", "small", "0", "match", "f3"]),
            Ok(Reply::Array(vec![
                b("0"),
                Reply::Array(vec![b("f3"), b("v")])
            ]))
        );
        for i in 0..300 {
            assert_eq!(run(&mut s, &["hset", "big", &format!("f{i}"), "v"]), int(1));
        }
        let (calls, mut fields) = hscan_all(&s, "big", &["COUNT", "10"]);
        assert_eq!(calls, 30);
        fields.sort();
        fields.dedup();
        assert_eq!(fields.len(), 300);
        let (_, fields) = hscan_all(&s, "big", &["MATCH", "f1?", "COUNT", "1000"]);
        assert_eq!(fields.len(), 10);
        let (_, fields) = hscan_all(&s, "big", &["MATCH", "*"]);
        assert_eq!(fields.len(), 300);
    }

    #[test]
    fn hscan_errors_and_cursors() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["hset", "h", "a", "1"]), int(1));
        let invalid = "ERR invalid cursor";
        for bad in ["x", " 1", "1 ", "18446744073709551616", "-", "1.5"] {
            assert_eq!(read(&s, &["hscan", "h", bad]), err(invalid), "{bad:?}");
            assert_eq!(read(&s, &["hscan", "missing", bad]), err(invalid));
        }
        let all = Ok(Reply::Array(vec![
            b("0"),
            Reply::Array(vec![b("a"), b("1")]),
        ]));
        for good in ["", "0", "-1", "+5", "18446744073709551615"] {
            assert_eq!(read(&s, &["hscan", "h", good]), all, "{good:?}");
        }
        assert_eq!(read(&s, &["hscan", "h", "0", "count", "0"]), err(SYNTAX));
        assert_eq!(read(&s, &["hscan", "h", "0", "count", "-1"]), err(SYNTAX));
        assert_eq!(read(&s, &["hscan", "h", "0", "count", "x"]), err(NOT_INT));
        assert_eq!(read(&s, &["hscan", "h", "0", "match"]), err(SYNTAX));
        assert_eq!(
            read(&s, &["hscan", "h", "0", "type", "string"]),
            err(SYNTAX)
        );
        assert_eq!(read(&s, &["hscan", "h", "0", "foo", "bar"]), err(SYNTAX));
        // A missing key answers before its options are looked at.
        let empty = Ok(Reply::Array(vec![b("0"), Reply::Array(vec![])]));
        assert_eq!(read(&s, &["hscan", "missing", "0", "count", "0"]), empty);
    }

    #[test]
    fn cursor_parsing() {
        assert_eq!(crate::args::parse_cursor(b""), Ok(0));
        assert_eq!(crate::args::parse_cursor(b"42"), Ok(42));
        assert_eq!(crate::args::parse_cursor(b"-1"), Ok(u64::MAX));
        assert_eq!(crate::args::parse_cursor(b"+7"), Ok(7));
        assert!(crate::args::parse_cursor(b"+").is_err());
        assert!(crate::args::parse_cursor(b"99999999999999999999").is_err());
    }
}
