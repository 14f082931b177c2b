//! Set commands, as Redis 7.0 answers them (`t_set.c`): SADD SREM SMEMBERS
//! SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SMOVE, the algebra (SINTER
//! SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE) and SSCAN.
//!
//! The encodings (intset, hashtable) are the engine's, reached through
//! [`SetOps`]; this module only passes the thresholds from [`Store::limits`]
//! (`set-max-intset-entries`, and `set-max-listpack-*`, which size the
//! engine's compact layout for small non-integer sets; OBJECT ENCODING
//! still says "hashtable" for those, as Redis 7.0 does).
//!
//! Random picks (SPOP, SRANDMEMBER) choose a position in the set's
//! iteration order with `ctx.random(n)` for the n-th pick, so every replica
//! that applied the same commands picks the same members. Writes run lazy
//! expiry first; reads see expired keys as missing. A set that becomes empty
//! is deleted, and every argument is checked before anything changes.

use crate::args::{eq_ic, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::glob;
use crate::keyspace::{Collection, Keyspace, SetMember, SetOps, Value};
use crate::store::{Ctx, EncodingLimits, Store};
use crate::table::{cmd, keys_after_numkeys, CommandSpec, Flags};
use bytes::Bytes;
use kvasir_resp::Reply;
use std::collections::HashSet;

const G: &str = "set";
const R: Flags = Flags::READONLY;
const RF: Flags = Flags::READONLY.union(Flags::FAST);
const W_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WF: Flags = Flags::WRITE.union(Flags::FAST);
const WF_OOM: Flags = W_OOM.union(Flags::FAST);
const ACL_R: &[&str] = &["read", "set", "slow"];
const ACL_RF: &[&str] = &["read", "set", "fast"];
const ACL_W: &[&str] = &["write", "set", "slow"];
const ACL_WF: &[&str] = &["write", "set", "fast"];
const KEY: (i32, i32, i32) = (1, 1, 1);
const ALL_KEYS: (i32, i32, i32) = (1, -1, 1);

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("sadd", -3, WF_OOM, KEY, ACL_WF, G, "1.0.0", "Add one or more members to a set", crate::write_handler!(sadd)).idle_on_empty().keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_INSERT]),
    cmd("scard", 2, RF, KEY, ACL_RF, G, "1.0.0", "Get the number of members in a set", crate::read_handler!(scard)).keys_access(crate::table::KeyAccess::Existence),
    cmd("sdiff", -2, R, ALL_KEYS, ACL_R, G, "1.0.0", "Subtract multiple sets", crate::read_handler!(sdiff)).with_tips(&["nondeterministic_output_order"]),
    cmd("sdiffstore", -3, W_OOM, ALL_KEYS, ACL_W, G, "1.0.0", "Subtract multiple sets and store the resulting set in a key", crate::write_handler!(sdiffstore)).events(crate::notify::Events::Dest("sdiffstore")).keys_access(crate::table::KeyAccess::WriteThenRead),
    cmd("sinter", -2, R, ALL_KEYS, ACL_R, G, "1.0.0", "Intersect multiple sets", crate::read_handler!(sinter)).with_tips(&["nondeterministic_output_order"]),
    CommandSpec {
        key_finder: Some(keys_after_numkeys::<1>),
        ..cmd("sintercard", -3, R.union(Flags::MOVABLEKEYS), (0, 0, 0), ACL_R, G, "7.0.0", "Intersect multiple sets and return the cardinality of the result", crate::read_handler!(sintercard))
    },
    cmd("sinterstore", -3, W_OOM, ALL_KEYS, ACL_W, G, "1.0.0", "Intersect multiple sets and store the resulting set in a key", crate::write_handler!(sinterstore)).events(crate::notify::Events::Dest("sinterstore")).keys_access(crate::table::KeyAccess::WriteThenRead).with_key_specs(&[crate::table::ks::RW_UPDATE, crate::table::ks::RO_ACCESS]),
    cmd("sismember", 3, RF, KEY, ACL_RF, G, "1.0.0", "Determine if a given value is a member of a set", crate::read_handler!(sismember)).keys_access(crate::table::KeyAccess::Existence),
    cmd("smembers", 2, R, KEY, ACL_R, G, "1.0.0", "Get all the members in a set", crate::read_handler!(smembers)).with_tips(&["nondeterministic_output_order"]),
    cmd("smismember", -3, RF, KEY, ACL_RF, G, "6.2.0", "Returns the membership associated with the given elements for a set", crate::read_handler!(smismember)),
    cmd("smove", 4, WF, (1, 2, 1), ACL_WF, G, "1.0.0", "Move a member from one set to another", crate::write_handler!(smove)).idle_on_empty().reporting_writes().events(crate::notify::Events::None).keys_access(crate::table::KeyAccess::ReadWriteThenWrite),
    cmd("spop", -2, WF, KEY, ACL_WF, G, "1.0.0", "Remove and return one or multiple random members from a set", crate::write_handler!(spop)).idle_on_empty().with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE]).with_tips(&["nondeterministic_output"]),
    cmd("srandmember", -2, R, KEY, ACL_R, G, "1.0.0", "Get one or multiple random members from a set", crate::read_handler!(srandmember)).with_tips(&["nondeterministic_output"]),
    cmd("srem", -3, WF, KEY, ACL_WF, G, "1.0.0", "Remove one or more members from a set", crate::write_handler!(srem)).idle_on_empty().keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_DELETE]),
    cmd("sscan", -3, R, KEY, ACL_R, G, "2.8.0", "Incrementally iterate Set elements", crate::read_handler!(sscan)).with_tips(&["nondeterministic_output"]),
    cmd("sunion", -2, R, ALL_KEYS, ACL_R, G, "1.0.0", "Add multiple sets", crate::read_handler!(sunion)).with_tips(&["nondeterministic_output_order"]),
    cmd("sunionstore", -3, W_OOM, ALL_KEYS, ACL_W, G, "1.0.0", "Add multiple sets and store the resulting set in a key", crate::write_handler!(sunionstore)).events(crate::notify::Events::Dest("sunionstore")).keys_access(crate::table::KeyAccess::WriteThenRead),
];

/// SRANDMEMBER with a negative count may repeat members, so the reply is not
/// bounded by the set's size. Redis would try to build any size (and run
/// out of memory); Kvasir refuses counts below minus this (8M replies, a
/// few hundred MB), with Redis's out-of-range error naming the bound.
pub const MAX_RANDOM_REPEATS: i64 = 1 << 23;

// ---------------------------------------------------------------------------
// Lookups
// ---------------------------------------------------------------------------

/// The set in `v`, WRONGTYPE for any other type.
fn as_set<K: Keyspace>(v: &Value<K>) -> Result<&K::Set, CmdError> {
    match v {
        Value::Set(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

/// For reads: the live set at `key` (None when missing or expired).
fn read_set<'a, K: Keyspace>(
    store: &'a Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Option<&'a K::Set>, CmdError> {
    store
        .live(db, key, ctx.now_ms)
        .map(|e| as_set(e.value))
        .transpose()
}

/// For writes: the live set at `key`, mutable, after lazy expiry.
fn write_set<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Option<&'a mut K::Set>, CmdError> {
    match store.live_value_mut(db, key, ctx) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// Every key as a set for a read (missing keys are None, as Redis treats
/// them as empty sets); WRONGTYPE if any key holds another type, whatever
/// comes before it (Redis 7.0 checks them all first).
fn read_sets<'a, K: Keyspace>(
    store: &'a Store<K>,
    db: usize,
    keys: &[Bytes],
    ctx: &Ctx,
) -> Result<Vec<Option<&'a K::Set>>, CmdError> {
    keys.iter().map(|k| read_set(store, db, k, ctx)).collect()
}

/// [`read_sets`] for a write (SINTERSTORE...): lazy expiry of every source
/// first, then plain lookups (writes do not count keyspace hits).
fn sets_for_write<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    keys: &[Bytes],
    ctx: &Ctx,
) -> Result<Vec<Option<&'a K::Set>>, CmdError> {
    for k in keys {
        store.expire_if_needed(db, k, ctx);
    }
    let store: &'a Store<K> = store;
    keys.iter()
        .map(|k| store.db(db).get(k).map(|e| as_set(e.value)).transpose())
        .collect()
}

fn bulk(m: SetMember<'_>) -> Reply {
    Reply::Bulk(m.to_bytes())
}

/// The members as a RESP3 set reply (an array for RESP2 clients).
fn set_reply<S: SetOps>(s: &S) -> Reply {
    Reply::Set(s.iter().map(bulk).collect())
}

/// The position of the `n`-th random pick in a set of `len` members.
fn pick(ctx: &Ctx, n: u64, len: usize) -> usize {
    (ctx.random(n) % len.max(1) as u64) as usize
}

// ---------------------------------------------------------------------------
// SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD
// ---------------------------------------------------------------------------

fn sadd<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    let limits = store.limits;
    let add_all = |set: &mut K::Set| args[2..].iter().filter(|m| set.insert(m, &limits)).count();
    let added = match write_set(store, db, key, ctx)? {
        Some(set) => add_all(set),
        None => {
            let mut set = K::Set::new();
            let added = add_all(&mut set);
            store.db_mut(db).set(key, Value::Set(Box::new(set)), None);
            added
        }
    };
    Ok(Reply::Int(added as i64))
}

fn srem<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    let Some(set) = write_set(store, db, key, ctx)? else {
        return Ok(Reply::Int(0));
    };
    let mut removed = 0;
    for m in &args[2..] {
        if set.remove(m) {
            removed += 1;
            if set.is_empty() {
                break;
            }
        }
    }
    if set.is_empty() {
        store.db_mut(db).remove(key);
    }
    Ok(Reply::Int(removed))
}

/// SMEMBERS: a set reply (empty for a missing key), intsets in ascending
/// order, hashtables in insertion order as changed by removals.
fn smembers<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    Ok(read_set(store, db, &args[1], ctx)?.map_or(Reply::Set(Vec::new()), set_reply))
}

fn sismember<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let set = read_set(store, db, &args[1], ctx)?;
    Ok(Reply::Int(set.is_some_and(|s| s.contains(&args[2])) as i64))
}

fn smismember<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let set = read_set(store, db, &args[1], ctx)?;
    Ok(Reply::Array(
        args[2..]
            .iter()
            .map(|m| Reply::Int(set.is_some_and(|s| s.contains(m)) as i64))
            .collect(),
    ))
}

fn scard<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let set = read_set(store, db, &args[1], ctx)?;
    Ok(Reply::Int(set.map_or(0, |s| s.len() as i64)))
}

// ---------------------------------------------------------------------------
// SPOP SRANDMEMBER
// ---------------------------------------------------------------------------

/// SPOP key [count]. Without a count: one member or nil. With one: a set
/// reply; a count of at least the size returns everything and deletes the
/// key. Picks are positions drawn with `ctx.random(0..count)`.
fn spop<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    let count = match args.len() {
        2 => None,
        3 => Some(
            parse_i64(&args[2])
                .ok()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or(CmdError::other(
                    "ERR value is out of range, must be positive",
                ))?,
        ),
        _ => return Err(CmdError::Syntax),
    };
    let Some(set) = write_set(store, db, key, ctx)? else {
        return Ok(match count {
            None => Reply::Nil,
            Some(_) => Reply::Set(Vec::new()),
        });
    };
    let reply = match count {
        None => match set.take(pick(ctx, 0, set.len())) {
            Some(m) => Reply::Bulk(m),
            None => Reply::Nil,
        },
        Some(n) if n >= set.len() as u64 => {
            let all = set_reply(set);
            store.db_mut(db).remove(key);
            return Ok(all);
        }
        Some(n) => {
            let mut popped = Vec::with_capacity(n as usize);
            for i in 0..n {
                if let Some(m) = set.take(pick(ctx, i, set.len())) {
                    popped.push(Reply::Bulk(m));
                }
            }
            Reply::Set(popped)
        }
    };
    if set.is_empty() {
        store.db_mut(db).remove(key);
    }
    Ok(reply)
}

/// SRANDMEMBER key [count]. Without a count: one member or nil. A positive
/// count gives distinct members (all of them when the count reaches the
/// size), a negative one allows repeats; the reply is an array.
fn srandmember<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    if args.len() == 2 {
        let set = read_set(store, db, key, ctx)?;
        let member = set.and_then(|s| s.member_at(pick(ctx, 0, s.len())));
        return Ok(member.map_or(Reply::Nil, bulk));
    }
    let count = parse_i64(&args[2])?;
    if count == i64::MIN {
        return Err(CmdError::other(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    if count < -MAX_RANDOM_REPEATS {
        return Err(CmdError::other(format!(
            "ERR value is out of range, value must between -{MAX_RANDOM_REPEATS} and {}",
            i64::MAX
        )));
    }
    let Some(set) = read_set(store, db, key, ctx)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let len = set.len();
    if count >= 0 && count as u64 >= len as u64 {
        return Ok(Reply::Array(set.iter().map(bulk).collect()));
    }
    let picks: Vec<Reply> = if count < 0 || count == 1 {
        // Repeats allowed: every pick is independent.
        let positions = (0..count.unsigned_abs()).map(|i| pick(ctx, i, len));
        set.members_at(positions).map(bulk).collect()
    } else {
        let positions = distinct_positions(ctx, count as usize, len);
        set.members_at(positions).map(bulk).collect()
    };
    Ok(Reply::Array(picks))
}

/// `count` distinct positions below `len` (count < len), by Floyd's
/// algorithm: exactly `count` random draws, no retries. The hash set is
/// only probed, never iterated, and has a fixed seed anyway.
fn distinct_positions(ctx: &Ctx, count: usize, len: usize) -> Vec<usize> {
    let mut chosen =
        HashSet::with_capacity_and_hasher(count, foldhash::fast::FixedState::default());
    let mut order = Vec::with_capacity(count);
    for (n, j) in (len - count..len).enumerate() {
        let t = (ctx.random(n as u64) % (j as u64 + 1)) as usize;
        let p = if chosen.contains(&t) { j } else { t };
        chosen.insert(p);
        order.push(p);
    }
    order
}

// ---------------------------------------------------------------------------
// SMOVE
// ---------------------------------------------------------------------------

/// SMOVE source destination member. A missing source answers 0 before the
/// destination's type is checked, as in Redis; moving within one key only
/// reports membership.
fn smove<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    store.expire_if_needed(db, src, ctx);
    store.expire_if_needed(db, dst, ctx);
    let d = store.db(db);
    let Some(src_entry) = d.get(src) else {
        return Ok(Reply::Int(0));
    };
    let src_set = as_set(src_entry.value)?;
    if let Some(e) = d.get(dst) {
        as_set(e.value)?;
    }
    if src == dst {
        return Ok(Reply::Int(src_set.contains(member) as i64));
    }
    let limits = store.limits;
    let Some(src_set) = write_set(store, db, src, ctx)? else {
        return Ok(Reply::Int(0));
    };
    if !src_set.remove(member) {
        return Ok(Reply::Int(0));
    }
    // Events in Redis's order (smoveCommand): "srem" on the source, "del"
    // if that emptied it, "new" if the destination is created, "sadd" only
    // if the member was not there already.
    let emptied = src_set.is_empty();
    store.emit(crate::notify::SET, "srem", db, src);
    if emptied {
        store.db_mut(db).remove(src);
        store.emit(crate::notify::GENERIC, "del", db, src);
    }
    let added = match write_set(store, db, dst, ctx)? {
        Some(dst_set) => dst_set.insert(member, &limits),
        None => {
            let mut set = K::Set::new();
            set.insert(member, &limits);
            store.db_mut(db).set(dst, Value::Set(Box::new(set)), None);
            store.emit(crate::notify::NEW, "new", db, dst);
            true
        }
    };
    if added {
        store.emit(crate::notify::SET, "sadd", db, dst);
    }
    // The keys modified, as the SREM and SADD it amounts to: the
    // destination only if the member is new there (Redis's smoveCommand
    // signals it only then, so its watchers stay clean).
    let mut reported = store.reported_writes.borrow_mut();
    for (name, key, modified) in [("srem", src, true), ("sadd", dst, added)] {
        if let Some(spec) = crate::table::lookup(name.as_bytes()).filter(|_| modified) {
            reported.push((
                db,
                spec,
                vec![
                    Bytes::from_static(name.as_bytes()),
                    key.clone(),
                    member.clone(),
                ],
            ));
        }
    }
    Ok(Reply::Int(1))
}

// ---------------------------------------------------------------------------
// SINTER SUNION SDIFF and their *STORE / SINTERCARD forms
// ---------------------------------------------------------------------------

/// Visits the members of the intersection (in the iteration order of the
/// smallest set) until `visit` returns false. Any missing key makes it
/// empty.
fn inter_each<'a, S: SetOps>(sets: &[Option<&'a S>], mut visit: impl FnMut(SetMember<'a>) -> bool) {
    let Some(mut sets) = sets.iter().copied().collect::<Option<Vec<&S>>>() else {
        return;
    };
    sets.sort_by_key(|s| s.len());
    let Some((smallest, rest)) = sets.split_first() else {
        return;
    };
    for m in smallest.iter() {
        if rest.iter().all(|s| s.contains_member(m)) && !visit(m) {
            return;
        }
    }
}

fn inter_of<S: SetOps>(sets: &[Option<&S>], limits: &EncodingLimits) -> S {
    let mut out = S::new();
    inter_each(sets, |m| {
        out.insert_member(m, limits);
        true
    });
    out
}

/// The union, built like Redis's: an intset while it can be one.
fn union_of<S: SetOps>(sets: &[Option<&S>], limits: &EncodingLimits) -> S {
    let mut out = S::new();
    for s in sets.iter().flatten() {
        for m in s.iter() {
            out.insert_member(m, limits);
        }
    }
    out
}

/// The members of the first set found in none of the others.
fn diff_of<S: SetOps>(sets: &[Option<&S>], limits: &EncodingLimits) -> S {
    let mut out = S::new();
    let Some((Some(first), rest)) = sets.split_first() else {
        return out;
    };
    let others: Vec<&S> = rest.iter().flatten().copied().collect();
    for m in first.iter() {
        if !others.iter().any(|o| o.contains_member(m)) {
            out.insert_member(m, limits);
        }
    }
    out
}

fn sinter<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let sets = read_sets(store, db, &args[1..], ctx)?;
    let mut members = Vec::new();
    inter_each(&sets, |m| {
        members.push(bulk(m));
        true
    });
    Ok(Reply::Set(members))
}

fn sunion<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let sets = read_sets(store, db, &args[1..], ctx)?;
    Ok(set_reply(&union_of(&sets, &store.limits)))
}

fn sdiff<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let sets = read_sets(store, db, &args[1..], ctx)?;
    Ok(set_reply(&diff_of(&sets, &store.limits)))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: options are checked
/// before the keys' types, as in Redis; LIMIT 0 means no limit.
fn sintercard<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let numkeys = parse_i64(&args[1])
        .ok()
        .filter(|&n| n > 0)
        .ok_or(CmdError::other("ERR numkeys should be greater than 0"))?;
    let keys_end = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(2))
        .filter(|&end| end <= args.len())
        .ok_or(CmdError::other(
            "ERR Number of keys can't be greater than number of args",
        ))?;
    let mut limit = 0u64;
    let mut opts = args[keys_end..].iter();
    while let Some(opt) = opts.next() {
        match opts.next() {
            Some(value) if eq_ic(opt, "LIMIT") => {
                limit = parse_i64(value)
                    .ok()
                    .and_then(|l| u64::try_from(l).ok())
                    .ok_or(CmdError::other("ERR LIMIT can't be negative"))?;
            }
            _ => return Err(CmdError::Syntax),
        }
    }
    let sets = read_sets(store, db, &args[2..keys_end], ctx)?;
    let mut n = 0u64;
    inter_each(&sets, |_| {
        n += 1;
        limit == 0 || n < limit
    });
    Ok(Reply::Int(n as i64))
}

/// A set operation over source sets (missing keys are None), building its
/// result under the store's encoding limits.
type SetAlgebra<S> = fn(&[Option<&S>], &EncodingLimits) -> S;

/// The *STORE commands: the result replaces the destination whatever it
/// held (its TTL goes too); an empty result deletes it. Replies the size.
fn store_result<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    op: SetAlgebra<K::Set>,
) -> CmdResult {
    let limits = store.limits;
    let result = op(&sets_for_write(store, db, &args[2..], ctx)?, &limits);
    let dst = &args[1];
    let n = result.len();
    if n == 0 {
        store.db_mut(db).remove(dst);
    } else {
        store
            .db_mut(db)
            .set(dst, Value::Set(Box::new(result)), None);
    }
    Ok(Reply::Int(n as i64))
}

fn sinterstore<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    store_result(store, db, args, ctx, inter_of)
}

fn sunionstore<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    store_result(store, db, args, ctx, union_of)
}

fn sdiffstore<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    store_result(store, db, args, ctx, diff_of)
}

// ---------------------------------------------------------------------------
// SSCAN
// ---------------------------------------------------------------------------

/// Redis's default SCAN COUNT.
const SCAN_DEFAULT_COUNT: u64 = 10;

/// SSCAN key cursor [MATCH pattern] [COUNT count]. The walk and its
/// cursor are the engine's ([`SetOps::scan`]): a small set answers
/// everything in one call with cursor 0, as Redis does for its small
/// encodings, and a member present for the whole iteration is never
/// missed.
///
/// As in Redis, the cursor is checked first, a missing key answers an
/// empty scan before the options are looked at, and the type before them.
fn sscan<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cursor = crate::args::parse_cursor(&args[2])?;
    let Some(set) = read_set(store, db, &args[1], ctx)? else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let mut pattern = None;
    let mut count = SCAN_DEFAULT_COUNT;
    let mut opts = args[3..].iter();
    while let Some(opt) = opts.next() {
        let Some(value) = opts.next() else {
            return Err(CmdError::Syntax);
        };
        if eq_ic(opt, "COUNT") {
            count = u64::try_from(parse_i64(value)?)
                .ok()
                .filter(|&n| n >= 1)
                .ok_or(CmdError::Syntax)?;
        } else if eq_ic(opt, "MATCH") {
            pattern = (!glob::is_match_all(value)).then_some(value);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let wanted =
        |m: SetMember<'_>| pattern.is_none_or(|p| m.with_bytes(|b| glob::matches(p, b, false)));
    let mut members = Vec::new();
    let next = set.scan(cursor, count, |m| {
        if wanted(m) {
            members.push(bulk(m));
        }
    });
    Ok(scan_reply(next, members))
}

fn scan_reply(cursor: u64, members: Vec<Reply>) -> Reply {
    Reply::Array(vec![Reply::bulk(cursor.to_string()), Reply::Array(members)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::lookup;

    const NOW: u64 = 1_000_000;

    fn ctx_seed(seed: u64) -> Ctx {
        Ctx { now_ms: NOW, seed }
    }

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    fn apply(s: &mut Store, a: &[&str]) -> CmdResult {
        s.apply(0, &args(a), &ctx_seed(42))
    }

    fn read(s: &Store, a: &[&str]) -> CmdResult {
        s.read(0, &args(a), &ctx_seed(42))
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

    fn bulk_str(s: &str) -> Reply {
        Reply::bulk_str(s)
    }

    fn set_of(items: &[&str]) -> CmdResult {
        Ok(Reply::Set(items.iter().map(|s| bulk_str(s)).collect()))
    }

    fn array_of(items: &[&str]) -> CmdResult {
        Ok(Reply::Array(items.iter().map(|s| bulk_str(s)).collect()))
    }

    /// The members of a reply (set or array of bulks), sorted.
    fn sorted(r: CmdResult) -> Vec<String> {
        let items = match r {
            Ok(Reply::Set(v)) | Ok(Reply::Array(v)) => v,
            other => panic!("not a list of members: {other:?}"),
        };
        let mut out: Vec<String> = items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                other => panic!("not a bulk: {other:?}"),
            })
            .collect();
        out.sort();
        out
    }

    fn sadd_many(st: &mut Store, key: &str, members: &[String]) {
        let mut a = vec!["SADD", key];
        a.extend(members.iter().map(String::as_str));
        apply(st, &a).unwrap();
    }

    fn encoding(s: &Store, key: &str) -> CmdResult {
        read(s, &["OBJECT", "ENCODING", key])
    }

    fn exists(s: &Store, key: &str) -> bool {
        s.db(0).get(key.as_bytes()).is_some()
    }

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

    fn with_string(s: &mut Store) {
        assert_eq!(apply(s, &["SET", "str", "x"]), Ok(Reply::ok()));
    }

    #[test]
    fn sadd_srem_scard_sismember() {
        let mut st = Store::default();
        assert_eq!(apply(&mut st, &["SADD", "s", "a", "b", "a"]), int(2));
        assert_eq!(apply(&mut st, &["SADD", "s", "b", "c"]), int(1));
        assert_eq!(read(&st, &["SCARD", "s"]), int(3));
        assert_eq!(read(&st, &["SCARD", "nokey"]), int(0));
        assert_eq!(read(&st, &["SISMEMBER", "s", "a"]), int(1));
        assert_eq!(read(&st, &["SISMEMBER", "s", "z"]), int(0));
        assert_eq!(read(&st, &["SISMEMBER", "nokey", "a"]), int(0));
        assert_eq!(
            read(&st, &["SMISMEMBER", "s", "a", "z", "c"]),
            Ok(Reply::Array(vec![
                Reply::Int(1),
                Reply::Int(0),
                Reply::Int(1)
            ]))
        );
        assert_eq!(
            read(&st, &["SMISMEMBER", "nokey", "a"]),
            Ok(Reply::Array(vec![Reply::Int(0)]))
        );
        assert_eq!(apply(&mut st, &["SREM", "s", "a", "z", "a"]), int(1));
        assert_eq!(apply(&mut st, &["SREM", "nokey", "a"]), int(0));
        assert_eq!(apply(&mut st, &["SREM", "s", "b", "c", "d"]), int(2));
        assert!(!exists(&st, "s"), "an emptied set is deleted");
        assert_eq!(
            err(apply(&mut st, &["SADD", "s"])),
            "ERR wrong number of arguments for 'sadd' command"
        );
    }

    #[test]
    fn smembers_replies_a_set_sorted_for_intsets() {
        let mut st = Store::default();
        apply(&mut st, &["SADD", "i", "3", "-1", "20", "1"]).unwrap();
        assert_eq!(
            read(&st, &["SMEMBERS", "i"]),
            set_of(&["-1", "1", "3", "20"])
        );
        assert_eq!(read(&st, &["SMEMBERS", "nokey"]), set_of(&[]));
        apply(&mut st, &["SADD", "h", "x", "y"]).unwrap();
        assert_eq!(read(&st, &["SMEMBERS", "h"]), set_of(&["x", "y"]));
    }

    #[test]
    fn wrong_type_everywhere_and_nothing_changes() {
        let mut st = Store::default();
        with_string(&mut st);
        apply(&mut st, &["SADD", "s", "1"]).unwrap();
        let writes: &[&[&str]] = &[
            &["SADD", "str", "a"],
            &["SREM", "str", "a"],
            &["SPOP", "str"],
            &["SPOP", "str", "1"],
            &["SPOP", "str", "0"],
            &["SMOVE", "str", "s", "1"],
            &["SMOVE", "s", "str", "1"],
            &["SMOVE", "s", "str", "nonmember"],
            &["SMOVE", "str", "str", "1"],
            &["SINTERSTORE", "d", "nokey", "str"],
            &["SUNIONSTORE", "d", "s", "str"],
            &["SDIFFSTORE", "d", "nokey", "str"],
            &["SDIFFSTORE", "d", "s", "str"],
        ];
        for w in writes {
            assert_eq!(err(apply(&mut st, w)), WRONGTYPE, "{w:?}");
        }
        let reads: &[&[&str]] = &[
            &["SMEMBERS", "str"],
            &["SISMEMBER", "str", "a"],
            &["SMISMEMBER", "str", "a"],
            &["SCARD", "str"],
            &["SRANDMEMBER", "str"],
            &["SRANDMEMBER", "str", "0"],
            &["SINTER", "nokey", "str"],
            &["SINTER", "str", "nokey"],
            &["SUNION", "s", "str"],
            &["SDIFF", "nokey", "str"],
            &["SINTERCARD", "2", "nokey", "str"],
            &["SSCAN", "str", "0"],
            &["SSCAN", "str", "0", "COUNT", "0"],
        ];
        for r in reads {
            assert_eq!(err(read(&st, r)), WRONGTYPE, "{r:?}");
        }
        assert_eq!(read(&st, &["GET", "str"]), Ok(bulk_str("x")));
        assert!(!exists(&st, "d"));
        assert_eq!(read(&st, &["SMEMBERS", "s"]), set_of(&["1"]));
    }

    #[test]
    fn smove_cases() {
        let mut st = Store::default();
        apply(&mut st, &["SADD", "a", "1", "2"]).unwrap();
        with_string(&mut st);
        // A missing source answers 0 before the destination's type is seen.
        assert_eq!(apply(&mut st, &["SMOVE", "nokey", "str", "1"]), int(0));
        assert_eq!(apply(&mut st, &["SMOVE", "a", "a", "1"]), int(1));
        assert_eq!(apply(&mut st, &["SMOVE", "a", "a", "9"]), int(0));
        assert_eq!(apply(&mut st, &["SMOVE", "a", "b", "9"]), int(0));
        assert!(!exists(&st, "b"));
        assert_eq!(apply(&mut st, &["SMOVE", "a", "b", "1"]), int(1));
        assert_eq!(read(&st, &["SMEMBERS", "b"]), set_of(&["1"]));
        assert_eq!(encoding(&st, "b"), Ok(bulk_str("intset")));
        apply(&mut st, &["SADD", "c", "x"]).unwrap();
        assert_eq!(apply(&mut st, &["SMOVE", "a", "c", "2"]), int(1));
        assert!(!exists(&st, "a"), "emptied source is deleted");
        assert_eq!(sorted(read(&st, &["SMEMBERS", "c"])), ["2", "x"]);
        // Moving a member the destination already has still removes it.
        apply(&mut st, &["SADD", "a", "x"]).unwrap();
        assert_eq!(apply(&mut st, &["SMOVE", "a", "c", "x"]), int(1));
        assert!(!exists(&st, "a"));
        assert_eq!(read(&st, &["SCARD", "c"]), int(2));
        // A string member into an intset converts it.
        apply(&mut st, &["SADD", "a", "y"]).unwrap();
        assert_eq!(apply(&mut st, &["SMOVE", "a", "b", "y"]), int(1));
        assert_eq!(encoding(&st, "b"), Ok(bulk_str("hashtable")));
    }

    #[test]
    fn spop_single_and_count() {
        let mut st = Store::default();
        assert_eq!(apply(&mut st, &["SPOP", "nokey"]), Ok(Reply::Nil));
        assert_eq!(apply(&mut st, &["SPOP", "nokey", "3"]), set_of(&[]));
        apply(&mut st, &["SADD", "s", "a", "b", "c", "d", "e"]).unwrap();
        assert_eq!(apply(&mut st, &["SPOP", "s", "0"]), set_of(&[]));
        let Ok(Reply::Bulk(one)) = apply(&mut st, &["SPOP", "s"]) else {
            panic!("SPOP without count replies a bulk");
        };
        let one = String::from_utf8_lossy(&one).into_owned();
        assert_eq!(read(&st, &["SISMEMBER", "s", &one]), int(0));
        let two = sorted(apply(&mut st, &["SPOP", "s", "2"]));
        assert_eq!(two.len(), 2);
        assert_eq!(read(&st, &["SCARD", "s"]), int(2));
        let rest = sorted(apply(&mut st, &["SPOP", "s", "100"]));
        assert_eq!(rest.len(), 2);
        assert!(!exists(&st, "s"));
        let mut all: Vec<String> = [vec![one], two, rest].concat();
        all.sort();
        assert_eq!(all, ["a", "b", "c", "d", "e"]);
        // The last member popped deletes the key.
        apply(&mut st, &["SADD", "s", "1"]).unwrap();
        assert_eq!(apply(&mut st, &["SPOP", "s"]), Ok(bulk_str("1")));
        assert!(!exists(&st, "s"));
        apply(&mut st, &["SADD", "s", "1", "2"]).unwrap();
        assert_eq!(apply(&mut st, &["SPOP", "s", "2"]), set_of(&["1", "2"]));
        assert!(!exists(&st, "s"));
        // Popping from an intset keeps it one.
        apply(&mut st, &["SADD", "s", "1", "2", "3"]).unwrap();
        apply(&mut st, &["SPOP", "s", "2"]).unwrap();
        assert_eq!(encoding(&st, "s"), Ok(bulk_str("intset")));
    }

    #[test]
    fn spop_errors_come_before_the_lookup() {
        let mut st = Store::default();
        with_string(&mut st);
        let positive = "ERR value is out of range, must be positive";
        for c in ["-1", "x", "1.5", "-9223372036854775808", ""] {
            assert_eq!(err(apply(&mut st, &["SPOP", "nokey", c])), positive);
            assert_eq!(err(apply(&mut st, &["SPOP", "str", c])), positive);
        }
        assert_eq!(
            err(apply(&mut st, &["SPOP", "s", "1", "2"])),
            "ERR syntax error"
        );
        assert_eq!(
            err(apply(&mut st, &["SPOP"])),
            "ERR wrong number of arguments for 'spop' command"
        );
    }

    #[test]
    fn spop_picks_follow_the_seed() {
        let members: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
        let run = |seed: u64| {
            let mut st = Store::default();
            sadd_many(&mut st, "s", &members);
            st.apply(0, &args(&["SPOP", "s", "5"]), &ctx_seed(seed))
        };
        assert_eq!(run(1), run(1));
        assert!((2..10).any(|seed| run(seed) != run(1)));
    }

    #[test]
    fn srandmember_counts() {
        let mut st = Store::default();
        assert_eq!(read(&st, &["SRANDMEMBER", "nokey"]), Ok(Reply::Nil));
        assert_eq!(read(&st, &["SRANDMEMBER", "nokey", "3"]), array_of(&[]));
        assert_eq!(read(&st, &["SRANDMEMBER", "nokey", "-3"]), array_of(&[]));
        apply(&mut st, &["SADD", "s", "1", "2", "3", "4", "5"]).unwrap();
        assert_eq!(read(&st, &["SRANDMEMBER", "s", "0"]), array_of(&[]));
        // A count of at least the size: everything, in order, as an array.
        let all = array_of(&["1", "2", "3", "4", "5"]);
        assert_eq!(read(&st, &["SRANDMEMBER", "s", "5"]), all);
        assert_eq!(read(&st, &["SRANDMEMBER", "s", "9223372036854775807"]), all);
        for seed in 0..50 {
            let r = st.read(0, &args(&["SRANDMEMBER", "s", "3"]), &ctx_seed(seed));
            let got = sorted(r);
            let mut dedup = got.clone();
            dedup.dedup();
            assert_eq!(got.len(), 3);
            assert_eq!(dedup, got, "positive counts give distinct members");
        }
        let mut saw_repeat = false;
        for seed in 0..50 {
            let r = st.read(0, &args(&["SRANDMEMBER", "s", "-10"]), &ctx_seed(seed));
            let got = sorted(r);
            assert_eq!(got.len(), 10);
            let mut dedup = got.clone();
            dedup.dedup();
            saw_repeat |= dedup.len() < got.len();
        }
        assert!(saw_repeat, "negative counts allow repeats");
        assert_eq!(sorted(read(&st, &["SRANDMEMBER", "s", "1"])).len(), 1);
        let Ok(Reply::Bulk(m)) = read(&st, &["SRANDMEMBER", "s"]) else {
            panic!("SRANDMEMBER without count replies a bulk");
        };
        assert!(matches!(&m[..], b"1" | b"2" | b"3" | b"4" | b"5"));
        assert_eq!(read(&st, &["SCARD", "s"]), int(5), "reads change nothing");
    }

    #[test]
    fn srandmember_errors() {
        let mut st = Store::default();
        with_string(&mut st);
        let not_int = "ERR value is not an integer or out of range";
        assert_eq!(err(read(&st, &["SRANDMEMBER", "nokey", "x"])), not_int);
        assert_eq!(err(read(&st, &["SRANDMEMBER", "str", "x"])), not_int);
        assert_eq!(
            err(read(&st, &["SRANDMEMBER", "s", "-9223372036854775808"])),
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
        );
        assert_eq!(
            err(read(&st, &["SRANDMEMBER", "s", "-9223372036854775807"])),
            "ERR value is out of range, value must between -8388608 and 9223372036854775807"
        );
        assert_eq!(
            err(read(&st, &["SRANDMEMBER", "s", "1", "2"])),
            "ERR syntax error"
        );
    }

    #[test]
    fn srandmember_distinct_picks_on_big_sets() {
        let mut st = Store::default();
        let members: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
        sadd_many(&mut st, "s", &members);
        for count in [2, 10, 500, 999] {
            let got = sorted(read(&st, &["SRANDMEMBER", "s", &count.to_string()]));
            let mut dedup = got.clone();
            dedup.dedup();
            assert_eq!(dedup.len(), count);
        }
    }

    #[test]
    fn algebra_replies() {
        let mut st = Store::default();
        apply(&mut st, &["SADD", "a", "1", "2", "3", "4"]).unwrap();
        apply(&mut st, &["SADD", "b", "3", "4", "5"]).unwrap();
        apply(&mut st, &["SADD", "c", "4", "x"]).unwrap();
        assert_eq!(read(&st, &["SINTER", "a", "b"]), set_of(&["3", "4"]));
        assert_eq!(read(&st, &["SINTER", "a", "b", "c"]), set_of(&["4"]));
        assert_eq!(read(&st, &["SINTER", "a", "nokey"]), set_of(&[]));
        assert_eq!(read(&st, &["SINTER", "a"]), set_of(&["1", "2", "3", "4"]));
        assert_eq!(
            read(&st, &["SUNION", "a", "b"]),
            set_of(&["1", "2", "3", "4", "5"])
        );
        assert_eq!(
            sorted(read(&st, &["SUNION", "a", "c", "nokey"])),
            ["1", "2", "3", "4", "x"]
        );
        assert_eq!(read(&st, &["SUNION", "nokey"]), set_of(&[]));
        assert_eq!(read(&st, &["SDIFF", "a", "b"]), set_of(&["1", "2"]));
        assert_eq!(read(&st, &["SDIFF", "a", "b", "c"]), set_of(&["1", "2"]));
        assert_eq!(
            read(&st, &["SDIFF", "a", "nokey"]),
            set_of(&["1", "2", "3", "4"])
        );
        assert_eq!(read(&st, &["SDIFF", "a", "a"]), set_of(&[]));
        assert_eq!(read(&st, &["SDIFF", "nokey", "a"]), set_of(&[]));
        assert_eq!(read(&st, &["SDIFF", "c", "a"]), set_of(&["x"]));
    }

    #[test]
    fn store_variants_overwrite_and_delete() {
        let mut st = Store::default();
        apply(&mut st, &["SADD", "a", "1", "2", "3"]).unwrap();
        apply(&mut st, &["SADD", "b", "2", "3", "z"]).unwrap();
        with_string(&mut st);
        assert_eq!(apply(&mut st, &["EXPIRE", "str", "100"]), int(1));
        assert_eq!(apply(&mut st, &["SINTERSTORE", "str", "a", "b"]), int(2));
        assert_eq!(read(&st, &["TYPE", "str"]), Ok(Reply::simple("set")));
        assert_eq!(
            read(&st, &["TTL", "str"]),
            int(-1),
            "the destination loses its TTL"
        );
        assert_eq!(read(&st, &["SMEMBERS", "str"]), set_of(&["2", "3"]));
        assert_eq!(encoding(&st, "str"), Ok(bulk_str("intset")));
        assert_eq!(apply(&mut st, &["SUNIONSTORE", "u", "a", "b"]), int(4));
        assert_eq!(encoding(&st, "u"), Ok(bulk_str("hashtable")));
        assert_eq!(apply(&mut st, &["SDIFFSTORE", "d", "a", "b"]), int(1));
        assert_eq!(read(&st, &["SMEMBERS", "d"]), set_of(&["1"]));
        // Empty results delete the destination.
        assert_eq!(apply(&mut st, &["SINTERSTORE", "d", "a", "nokey"]), int(0));
        assert!(!exists(&st, "d"));
        apply(&mut st, &["SET", "d", "x"]).unwrap();
        assert_eq!(apply(&mut st, &["SDIFFSTORE", "d", "a", "a"]), int(0));
        assert!(!exists(&st, "d"));
        assert_eq!(apply(&mut st, &["SUNIONSTORE", "d", "nokey"]), int(0));
        assert!(!exists(&st, "d"));
        // The destination may be a source.
        assert_eq!(apply(&mut st, &["SINTERSTORE", "a", "a", "b"]), int(2));
        assert_eq!(read(&st, &["SMEMBERS", "a"]), set_of(&["2", "3"]));
        assert_eq!(apply(&mut st, &["SUNIONSTORE", "a", "a"]), int(2));
    }

    #[test]
    fn sintercard_and_its_errors() {
        let mut st = Store::default();
        apply(&mut st, &["SADD", "a", "1", "2", "3", "4"]).unwrap();
        apply(&mut st, &["SADD", "b", "2", "3", "4", "5"]).unwrap();
        with_string(&mut st);
        assert_eq!(read(&st, &["SINTERCARD", "2", "a", "b"]), int(3));
        assert_eq!(read(&st, &["SINTERCARD", "1", "a"]), int(4));
        assert_eq!(
            read(&st, &["SINTERCARD", "2", "a", "b", "LIMIT", "2"]),
            int(2)
        );
        assert_eq!(
            read(&st, &["SINTERCARD", "2", "a", "b", "limit", "0"]),
            int(3)
        );
        assert_eq!(
            read(
                &st,
                &["SINTERCARD", "2", "a", "b", "LIMIT", "1", "LIMIT", "9"]
            ),
            int(3)
        );
        assert_eq!(read(&st, &["SINTERCARD", "2", "a", "nokey"]), int(0));
        let numkeys = "ERR numkeys should be greater than 0";
        for n in ["0", "-1", "x", "99999999999999999999"] {
            assert_eq!(err(read(&st, &["SINTERCARD", n, "a"])), numkeys);
        }
        let too_many = "ERR Number of keys can't be greater than number of args";
        assert_eq!(err(read(&st, &["SINTERCARD", "3", "a", "b"])), too_many);
        assert_eq!(
            err(read(&st, &["SINTERCARD", "9223372036854775807", "a"])),
            too_many
        );
        let limit = "ERR LIMIT can't be negative";
        assert_eq!(
            err(read(&st, &["SINTERCARD", "1", "a", "LIMIT", "-1"])),
            limit
        );
        assert_eq!(
            err(read(&st, &["SINTERCARD", "1", "a", "LIMIT", "x"])),
            limit
        );
        assert_eq!(
            err(read(&st, &["SINTERCARD", "1", "str", "LIMIT", "-1"])),
            limit
        );
        let syntax = "ERR syntax error";
        assert_eq!(err(read(&st, &["SINTERCARD", "1", "a", "LIMIT"])), syntax);
        assert_eq!(
            err(read(&st, &["SINTERCARD", "1", "a", "FOO", "1"])),
            syntax
        );
        assert_eq!(err(read(&st, &["SINTERCARD", "1", "nokey", "str"])), syntax);
    }

    #[test]
    fn key_positions() {
        let spec = lookup(b"sintercard").expect("sintercard");
        assert!(spec.flags.contains(Flags::MOVABLEKEYS));
        assert_eq!(
            spec.keys_of(&args(&["SINTERCARD", "2", "a", "b", "LIMIT", "1"])),
            vec![2, 3]
        );
        assert_eq!(
            spec.keys_of(&args(&["SINTERCARD", "x", "a"])),
            Vec::<usize>::new()
        );
        // More keys announced than given: none (as Redis's key specs).
        assert_eq!(
            spec.keys_of(&args(&["SINTERCARD", "5", "a"])),
            Vec::<usize>::new()
        );
        let store = lookup(b"sdiffstore").expect("sdiffstore");
        assert_eq!(
            store.keys_of(&args(&["SDIFFSTORE", "d", "a", "b"])),
            vec![1, 2, 3]
        );
        let smove = lookup(b"smove").expect("smove");
        assert_eq!(smove.keys_of(&args(&["SMOVE", "a", "b", "m"])), vec![1, 2]);
    }

    #[test]
    fn encodings_follow_redis_7_0() {
        let mut st = Store::default();
        apply(&mut st, &["SADD", "i", "1", "2"]).unwrap();
        assert_eq!(encoding(&st, "i"), Ok(bulk_str("intset")));
        apply(&mut st, &["SADD", "h", "a"]).unwrap();
        assert_eq!(encoding(&st, "h"), Ok(bulk_str("hashtable")));
        for m in ["01", "-0", "+1", ""] {
            apply(&mut st, &["DEL", "n"]).unwrap();
            apply(&mut st, &["SADD", "n", m]).unwrap();
            assert_eq!(encoding(&st, "n"), Ok(bulk_str("hashtable")), "{m:?}");
        }
        apply(
            &mut st,
            &["SADD", "i", "-9223372036854775808", "9223372036854775807"],
        )
        .unwrap();
        assert_eq!(encoding(&st, "i"), Ok(bulk_str("intset")));
        // Past set-max-intset-entries (512 by default).
        let many: Vec<String> = (0..512).map(|i| i.to_string()).collect();
        sadd_many(&mut st, "big", &many);
        assert_eq!(read(&st, &["SCARD", "big"]), int(512));
        assert_eq!(encoding(&st, "big"), Ok(bulk_str("intset")));
        assert_eq!(apply(&mut st, &["SADD", "big", "512"]), int(1));
        assert_eq!(encoding(&st, "big"), Ok(bulk_str("hashtable")));
        // Never back.
        apply(&mut st, &["SREM", "big", "512", "511"]).unwrap();
        assert_eq!(encoding(&st, "big"), Ok(bulk_str("hashtable")));
        // The limit comes from the store.
        st.limits.set_max_intset_entries = 2;
        apply(&mut st, &["SADD", "small", "1", "2"]).unwrap();
        assert_eq!(encoding(&st, "small"), Ok(bulk_str("intset")));
        apply(&mut st, &["SADD", "small", "3"]).unwrap();
        assert_eq!(encoding(&st, "small"), Ok(bulk_str("hashtable")));
        assert_eq!(apply(&mut st, &["SUNIONSTORE", "u", "i"]), int(4));
        assert_eq!(encoding(&st, "u"), Ok(bulk_str("hashtable")));
    }

    #[test]
    fn expired_sets_read_as_missing_and_writes_expire_them() {
        let mut st = Store::default();
        apply(&mut st, &["SADD", "s", "a"]).unwrap();
        st.db_mut(0).set_expire(b"s", Some(NOW - 1));
        assert_eq!(read(&st, &["SCARD", "s"]), int(0));
        assert_eq!(read(&st, &["SMEMBERS", "s"]), set_of(&[]));
        assert_eq!(read(&st, &["SRANDMEMBER", "s"]), Ok(Reply::Nil));
        assert_eq!(
            read(&st, &["SSCAN", "s", "0"]),
            Ok(scan_reply(0, Vec::new()))
        );
        assert_eq!(apply(&mut st, &["SADD", "s", "b"]), int(1));
        assert_eq!(read(&st, &["SMEMBERS", "s"]), set_of(&["b"]));
        assert_eq!(read(&st, &["TTL", "s"]), int(-1));
        st.db_mut(0).set_expire(b"s", Some(NOW - 1));
        assert_eq!(apply(&mut st, &["SMOVE", "s", "t", "b"]), int(0));
        assert!(!exists(&st, "s"));
        apply(&mut st, &["SADD", "s", "b"]).unwrap();
        st.db_mut(0).set_expire(b"s", Some(NOW - 1));
        assert_eq!(apply(&mut st, &["SUNIONSTORE", "d", "s"]), int(0));
        assert!(!exists(&st, "s"));
    }

    /// Runs a full SSCAN; returns the number of calls and the members seen.
    fn scan_all(st: &Store, key: &str, opts: &[&str]) -> (usize, Vec<String>) {
        let mut cursor = "0".to_string();
        let mut calls = 0;
        let mut out = Vec::new();
        loop {
            let mut a = vec!["SSCAN", key, cursor.as_str()];
            a.extend_from_slice(opts);
            let Ok(Reply::Array(parts)) = read(st, &a) else {
                panic!("SSCAN reply");
            };
            calls += 1;
            let [Reply::Bulk(next), Reply::Array(items)] = &parts[..] else {
                panic!("SSCAN reply shape");
            };
            out.extend(sorted(Ok(Reply::Array(items.clone()))));
            cursor = String::from_utf8_lossy(next).into_owned();
            if cursor == "0" {
                break;
            }
        }
        out.sort();
        (calls, out)
    }

    #[test]
    fn sscan_intsets_in_one_call_and_hashtables_by_cursor() {
        let mut st = Store::default();
        apply(&mut st, &["SADD", "i", "1", "2", "3", "12", "100"]).unwrap();
        let (calls, all) = scan_all(&st, "i", &["COUNT", "1"]);
        assert_eq!((calls, all.len()), (1, 5));
        assert_eq!(scan_all(&st, "i", &["MATCH", "1*"]).1, ["1", "100", "12"]);
        // A small hashtable too.
        sadd_many(&mut st, "p", &["a".into(), "b".into(), "c".into()]);
        assert_eq!(
            scan_all(&st, "p", &["COUNT", "1"]),
            (1, vec!["a".into(), "b".into(), "c".into()])
        );
        let members: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
        sadd_many(&mut st, "h", &members);
        let (calls, all) = scan_all(&st, "h", &[]);
        assert_eq!(calls, 20);
        let mut expected = members.clone();
        expected.sort();
        assert_eq!(all, expected);
        let (_, some) = scan_all(&st, "h", &["MATCH", "m1?", "COUNT", "7"]);
        assert_eq!(some.len(), 10);
        assert_eq!(
            scan_all(&st, "h", &["match", "*", "count", "1000"]),
            (1, expected)
        );
        assert_eq!(
            read(&st, &["SSCAN", "nokey", "0"]),
            Ok(scan_reply(0, Vec::new()))
        );
    }

    #[test]
    fn sscan_never_misses_members_that_stay() {
        let mut st = Store::default();
        let members: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
        sadd_many(&mut st, "h", &members);
        let mut seen = std::collections::HashSet::new();
        let mut removed = std::collections::HashSet::new();
        let mut cursor = "0".to_string();
        let mut round = 0;
        loop {
            let Ok(Reply::Array(parts)) = read(&st, &["SSCAN", "h", &cursor, "COUNT", "7"]) else {
                panic!("SSCAN reply");
            };
            let [Reply::Bulk(next), Reply::Array(items)] = &parts[..] else {
                panic!("shape");
            };
            for i in items {
                if let Reply::Bulk(b) = i {
                    seen.insert(String::from_utf8_lossy(b).into_owned());
                }
            }
            cursor = String::from_utf8_lossy(next).into_owned();
            if cursor == "0" {
                break;
            }
            // Remove members (by value and by SPOP) between calls.
            round += 1;
            let victim = format!("m{}", (round * 37) % 300);
            if apply(&mut st, &["SREM", "h", &victim]) == int(1) {
                removed.insert(victim);
            }
            if let Ok(Reply::Bulk(b)) = st.apply(0, &args(&["SPOP", "h"]), &ctx_seed(round)) {
                removed.insert(String::from_utf8_lossy(&b).into_owned());
            }
        }
        for m in &members {
            assert!(seen.contains(m) || removed.contains(m), "{m} was missed");
        }
    }

    #[test]
    fn sscan_errors_and_cursor_parsing() {
        let mut st = Store::default();
        apply(&mut st, &["SADD", "s", "1", "2"]).unwrap();
        with_string(&mut st);
        let invalid = "ERR invalid cursor";
        for c in ["x", " 1", "1 ", "+", "-", "18446744073709551616", "0x1"] {
            assert_eq!(err(read(&st, &["SSCAN", "s", c])), invalid, "{c:?}");
            assert_eq!(err(read(&st, &["SSCAN", "str", c])), invalid);
            assert_eq!(err(read(&st, &["SSCAN", "nokey", c])), invalid);
        }
        for c in ["", "+1", "-1", "18446744073709551615", "7"] {
            let all = scan_reply(0, vec![bulk_str("1"), bulk_str("2")]);
            assert_eq!(read(&st, &["SSCAN", "s", c]), Ok(all), "{c:?}");
        }
        assert_eq!(crate::args::parse_cursor(b"-1"), Ok(u64::MAX));
        assert_eq!(crate::args::parse_cursor(b""), Ok(0));
        let syntax = "ERR syntax error";
        assert_eq!(err(read(&st, &["SSCAN", "s", "0", "COUNT", "0"])), syntax);
        assert_eq!(err(read(&st, &["SSCAN", "s", "0", "COUNT", "-1"])), syntax);
        assert_eq!(
            err(read(&st, &["SSCAN", "s", "0", "COUNT", "x"])),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(err(read(&st, &["SSCAN", "s", "0", "MATCH"])), syntax);
        assert_eq!(err(read(&st, &["SSCAN", "s", "0", "TYPE", "set"])), syntax);
        assert_eq!(err(read(&st, &["SSCAN", "s", "0", "NOVALUES"])), syntax);
        // A missing key answers before the options are checked.
        assert_eq!(
            read(&st, &["SSCAN", "nokey", "0", "COUNT", "0"]),
            Ok(scan_reply(0, Vec::new()))
        );
    }

    #[test]
    fn arities_flags_and_keys_match_redis() {
        type Row = (&'static str, i32, &'static [&'static str], (i32, i32, i32));
        let expect: &[Row] = &[
            ("sadd", -3, &["write", "denyoom", "fast"], (1, 1, 1)),
            ("srem", -3, &["write", "fast"], (1, 1, 1)),
            ("smembers", 2, &["readonly"], (1, 1, 1)),
            ("sismember", 3, &["readonly", "fast"], (1, 1, 1)),
            ("smismember", -3, &["readonly", "fast"], (1, 1, 1)),
            ("scard", 2, &["readonly", "fast"], (1, 1, 1)),
            ("spop", -2, &["write", "fast"], (1, 1, 1)),
            ("srandmember", -2, &["readonly"], (1, 1, 1)),
            ("smove", 4, &["write", "fast"], (1, 2, 1)),
            ("sinter", -2, &["readonly"], (1, -1, 1)),
            ("sintercard", -3, &["readonly", "movablekeys"], (0, 0, 0)),
            ("sinterstore", -3, &["write", "denyoom"], (1, -1, 1)),
            ("sunion", -2, &["readonly"], (1, -1, 1)),
            ("sunionstore", -3, &["write", "denyoom"], (1, -1, 1)),
            ("sdiff", -2, &["readonly"], (1, -1, 1)),
            ("sdiffstore", -3, &["write", "denyoom"], (1, -1, 1)),
            ("sscan", -3, &["readonly"], (1, 1, 1)),
        ];
        assert_eq!(COMMANDS.len(), expect.len());
        for (name, arity, flags, keys) in expect {
            let c = lookup(name.as_bytes()).expect("listed");
            assert_eq!(c.arity, *arity, "{name}");
            assert_eq!(c.flags.names(), *flags, "{name}");
            assert_eq!((c.first_key, c.last_key, c.step), *keys, "{name}");
            assert!(c.acl.contains(&"set"), "{name}");
        }
    }

    #[test]
    fn nothing_panics_on_odd_counts() {
        let mut st = Store::default();
        apply(&mut st, &["SADD", "s", "a", "b", "c"]).unwrap();
        for c in [
            "9223372036854775807",
            "-8388608",
            "0",
            "1",
            "-1",
            "18446744073709551616",
        ] {
            let _ = read(&st, &["SRANDMEMBER", "s", c]);
            let _ = read(&st, &["SRANDMEMBER", "nokey", c]);
            let _ = apply(&mut st, &["SPOP", "nokey", c]);
        }
        assert_eq!(
            sorted(apply(&mut st, &["SPOP", "s", "9223372036854775807"])),
            ["a", "b", "c"]
        );
        assert!(!exists(&st, "s"));
    }
}
