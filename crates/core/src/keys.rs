//! Generic key commands: DEL, EXISTS, TYPE, RENAME, COPY, the expiry
//! family, KEYS, SCAN, RANDOMKEY, OBJECT, DUMP and RESTORE, with Redis 7.0
//! replies.
//!
//! Writes expire the keys they touch lazily first (`Store::expire_if_needed`
//! at `ctx.now_ms`); reads see expired keys as missing and change nothing.

use crate::args::{eq_ic, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::glob;
use crate::keyspace::{AccessMode, Collection, EntryRef, Keyspace, Value};
use crate::store::DbRef;
use crate::store::{Ctx, Store};
use crate::table::{cmd, container, help_reply, CommandSpec, Flags, Keyless};
use bytes::Bytes;
use kvasir_resp::Reply;

const G: &str = "generic";
const R: Flags = Flags::READONLY;
const RF: Flags = Flags::READONLY.union(Flags::FAST);
const W: Flags = Flags::WRITE;
const WF: Flags = Flags::WRITE.union(Flags::FAST);
const ACL_RS: &[&str] = &["keyspace", "read", "slow"];
const ACL_RF: &[&str] = &["keyspace", "read", "fast"];
const ACL_WS: &[&str] = &["keyspace", "write", "slow"];
const ACL_WF: &[&str] = &["keyspace", "write", "fast"];
const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
const KEY: (i32, i32, i32) = (1, 1, 1);
const TWO_KEYS: (i32, i32, i32) = (1, 2, 1);
const ALL_KEYS: (i32, i32, i32) = (1, -1, 1);
/// OBJECT subcommands take their key after the subcommand name.
const SUB_KEY: (i32, i32, i32) = (2, 2, 1);

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("del", -2, W, ALL_KEYS, ACL_WS, G, "1.0.0", "Deletes one or more keys.", crate::write_handler!(del)).idle_on_empty().events(crate::notify::Events::Custom(crate::notify::del)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RM_DELETE]).with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"]),
    cmd("unlink", -2, WF, ALL_KEYS, ACL_WF, G, "4.0.0", "Asynchronously deletes one or more keys.", crate::write_handler!(del)).idle_on_empty().events(crate::notify::Events::Custom(crate::notify::del)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RM_DELETE]).with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"]),
    cmd("exists", -2, RF, ALL_KEYS, ACL_RF, G, "1.0.0", "Determines whether one or more keys exist.", crate::read_handler!(exists)).keys_access(crate::table::KeyAccess::Existence).with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"]),
    cmd("touch", -2, RF, ALL_KEYS, ACL_RF, G, "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", crate::read_handler!(touch)).keys_access(crate::table::KeyAccess::Existence).with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"]),
    cmd("type", 2, RF, KEY, ACL_RF, G, "1.0.0", "Determines the type of value stored at a key.", crate::read_handler!(type_of)).keys_access(crate::table::KeyAccess::Existence),
    cmd("rename", 3, W, TWO_KEYS, ACL_WS, G, "1.0.0", "Renames a key and overwrites the destination.", crate::write_handler!(rename)).events(crate::notify::Events::Custom(crate::notify::rename)).keys_access(crate::table::KeyAccess::ReadWriteThenWrite).with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE, crate::table::ks::OW_UPDATE]),
    cmd("renamenx", 3, WF, TWO_KEYS, ACL_WF, G, "1.0.0", "Renames a key only when the target key name doesn't exist.", crate::write_handler!(renamenx)).idle_on_empty().events(crate::notify::Events::Custom(crate::notify::rename)).keys_access(crate::table::KeyAccess::ReadWriteThenWrite).with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE, crate::table::ks::OW_INSERT]),
    cmd("copy", -3, W.union(Flags::DENYOOM), TWO_KEYS, ACL_WS, G, "6.2.0", "Copies the value of a key to a new key.", crate::write_handler!(copy)).idle_on_empty().events(crate::notify::Events::Custom(crate::notify::copy)).keys_access(crate::table::KeyAccess::ReadThenWrite),
    cmd("move", 3, WF, KEY, ACL_WF, G, "1.0.0", "Moves a key to another database.", crate::write_handler!(move_key)).idle_on_empty().events(crate::notify::Events::Custom(crate::notify::move_key)),
    cmd("expire", -3, WF, KEY, ACL_WF, G, "1.0.0", "Sets the expiration time of a key in seconds.", crate::write_handler!(expire)).idle_on_empty().events(crate::notify::Events::Custom(crate::notify::expire)).keys_access(crate::table::KeyAccess::Write),
    cmd("pexpire", -3, WF, KEY, ACL_WF, G, "2.6.0", "Sets the expiration time of a key in milliseconds.", crate::write_handler!(pexpire)).idle_on_empty().events(crate::notify::Events::Custom(crate::notify::expire)).keys_access(crate::table::KeyAccess::Write),
    cmd("expireat", -3, WF, KEY, ACL_WF, G, "1.2.0", "Sets the expiration time of a key to a Unix timestamp.", crate::write_handler!(expireat)).idle_on_empty().events(crate::notify::Events::Custom(crate::notify::expire)).keys_access(crate::table::KeyAccess::Write),
    cmd("pexpireat", -3, WF, KEY, ACL_WF, G, "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp.", crate::write_handler!(pexpireat)).idle_on_empty().events(crate::notify::Events::Custom(crate::notify::expire)).keys_access(crate::table::KeyAccess::Write),
    cmd("persist", 2, WF, KEY, ACL_WF, G, "2.2.0", "Removes the expiration time of a key.", crate::write_handler!(persist)).idle_on_empty().keys_access(crate::table::KeyAccess::Write),
    cmd("ttl", 2, RF, KEY, ACL_RF, G, "1.0.0", "Returns the expiration time in seconds of a key.", crate::read_handler!(ttl)).with_tips(&["nondeterministic_output"]),
    cmd("pttl", 2, RF, KEY, ACL_RF, G, "2.6.0", "Returns the expiration time in milliseconds of a key.", crate::read_handler!(pttl)).with_tips(&["nondeterministic_output"]),
    cmd("expiretime", 2, RF, KEY, ACL_RF, G, "7.0.0", "Returns the expiration time of a key as a Unix timestamp.", crate::read_handler!(expiretime)),
    cmd("pexpiretime", 2, RF, KEY, ACL_RF, G, "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp.", crate::read_handler!(pexpiretime)),
    cmd("keys", 2, R, NO_KEYS, &["keyspace", "read", "slow", "dangerous"], G, "1.0.0", "Returns all key names that match a pattern.", crate::read_handler!(keys)).reaching(Keyless::List).with_tips(&["request_policy:all_shards", "nondeterministic_output_order"]),
    cmd("scan", -2, R, NO_KEYS, ACL_RS, G, "2.8.0", "Iterates over the key names in the database.", crate::read_handler!(scan)).reaching(Keyless::Cursor).with_tips(&["nondeterministic_output", "request_policy:special"]),
    cmd("randomkey", 1, R, NO_KEYS, ACL_RS, G, "1.0.0", "Returns a random key name from the database.", crate::read_handler!(randomkey)).reaching(Keyless::Pick).with_tips(&["request_policy:all_shards", "nondeterministic_output"]),
    cmd("dump", 2, R, KEY, ACL_RS, G, "2.6.0", "Returns a serialized representation of the value stored at a key.", crate::read_handler!(dump)).with_tips(&["nondeterministic_output"]),
    cmd("restore", -4, W.union(Flags::DENYOOM), KEY, &["keyspace", "write", "slow", "dangerous"], G, "2.6.0", "Creates a key from the serialized representation of a value.", crate::write_handler!(restore)).events(crate::notify::Events::Custom(crate::notify::restore)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::OW_UPDATE]),
    // What MIGRATE sends from a Redis Cluster node (its target accepts it
    // for a slot being imported): RESTORE here, where slots move by Raft.
    cmd("restore-asking", -4, W.union(Flags::DENYOOM).union(Flags::ASKING), KEY, &["keyspace", "write", "slow", "dangerous"], G, "3.0.0", "An internal command for migrating keys in a cluster.", crate::write_handler!(restore)).events(crate::notify::Events::Custom(crate::notify::restore)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::OW_UPDATE]),
    container("object", -2, &["slow"], G, "2.2.3", "A container for object introspection commands.", OBJECT_SUBS),
];

#[rustfmt::skip]
const OBJECT_SUBS: &[CommandSpec] = &[
    cmd("encoding", 3, R, SUB_KEY, ACL_RS, G, "2.2.3", "Returns the internal encoding of a Redis object.", crate::read_handler!(object_encoding)).keys_access(crate::table::KeyAccess::Existence).with_tips(&["nondeterministic_output"]),
    cmd("freq", 3, R, SUB_KEY, ACL_RS, G, "4.0.0", "Returns the logarithmic access frequency counter of a Redis object.", crate::read_handler!(object_freq)).keys_access(crate::table::KeyAccess::Existence).with_tips(&["nondeterministic_output"]),
    cmd("idletime", 3, R, SUB_KEY, ACL_RS, G, "2.2.3", "Returns the time since the last access to a Redis object.", crate::read_handler!(object_idletime)).keys_access(crate::table::KeyAccess::Existence).with_tips(&["nondeterministic_output"]),
    cmd("refcount", 3, R, SUB_KEY, ACL_RS, G, "2.2.3", "Returns the reference count of a value of a key.", crate::read_handler!(object_refcount)).keys_access(crate::table::KeyAccess::Existence).with_tips(&["nondeterministic_output"]),
    cmd("help", 2, Flags::LOADING.union(Flags::STALE), NO_KEYS, &["keyspace", "slow"], G, "6.2.0", "Returns helpful text about the different subcommands.", crate::read_handler!(object_help)),
];

fn key_reply<K: Keyspace>(e: EntryRef<'_, K>) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(e.key))
}

// ---- DEL, EXISTS, TYPE ----------------------------------------------------

/// DEL and UNLINK (there is no background freeing to hand work to).
fn del<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let mut n = 0;
    for k in &args[1..] {
        if store.expire_if_needed(db, k, ctx) {
            store.db_mut(db).remove(k);
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

/// EXISTS: a key named twice counts twice, as in Redis; its access is
/// not recorded.
fn exists<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let n = args[1..]
        .iter()
        .filter(|k| store.peek(db, k, ctx.now_ms).is_some())
        .count();
    Ok(Reply::Int(n as i64))
}

/// TOUCH: EXISTS that records the access of each key.
fn touch<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let n = args[1..]
        .iter()
        .filter(|k| store.live(db, k, ctx.now_ms).is_some())
        .count();
    Ok(Reply::Int(n as i64))
}

fn type_of<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let name = store
        .peek(db, &args[1], ctx.now_ms)
        .map_or("none", |e| e.value.type_name());
    Ok(Reply::simple(name))
}

// ---- RENAME, RENAMENX, COPY ------------------------------------------------

fn rename<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    rename_key(store, db, args, ctx, false)
}

fn renamenx<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    rename_key(store, db, args, ctx, true)
}

/// Moves the value and the expiry of `args[1]` to `args[2]`. Renaming a
/// key to itself only checks that it exists (RENAMENX then answers 0).
fn rename_key<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    nx: bool,
) -> CmdResult {
    let (src, dst) = (&args[1], &args[2]);
    if !store.expire_if_needed(db, src, ctx) {
        return Err(CmdError::NoSuchKey);
    }
    if src == dst {
        return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
    }
    if store.expire_if_needed(db, dst, ctx) && nx {
        return Ok(Reply::Int(0));
    }
    let mut d = store.db_mut(db);
    let entry = d.remove(src).ok_or(CmdError::NoSuchKey)?;
    let expire_at = entry.expire_at();
    d.set(dst, entry.value, expire_at);
    Ok(if nx { Reply::Int(1) } else { Reply::ok() })
}

/// COPY source destination [DB n] [REPLACE]. Cluster mode's "only DB 0"
/// rule belongs to the session layer, which knows the mode.
fn copy<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let (src, dst) = (&args[1], &args[2]);
    let (dst_db, replace) = parse_copy_options(store, db, &args[3..])?;
    if dst_db == db && src == dst {
        return Err(CmdError::other(
            "ERR source and destination objects are the same",
        ));
    }
    if !store.expire_if_needed(db, src, ctx) {
        return Ok(Reply::Int(0));
    }
    if store.expire_if_needed(dst_db, dst, ctx) && !replace {
        return Ok(Reply::Int(0));
    }
    let Some(entry) = store.db(db).get(src) else {
        return Ok(Reply::Int(0));
    };
    let (value, expire_at) = (entry.value.clone(), entry.expire_at());
    store.db_mut(dst_db).set(dst, value, expire_at);
    Ok(Reply::Int(1))
}

/// MOVE key db: the key (with its TTL) goes to another database unless a
/// key of that name is there already. Redis Cluster has one database.
fn move_key<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    if store.cluster_mode {
        return Err(CmdError::other("ERR MOVE is not allowed in cluster mode"));
    }
    // Redis reads a C int here (getIntFromObjectOrReply).
    let dst_db = i32::try_from(parse_i64(&args[2])?).map_err(|_| {
        CmdError::other("ERR value is out of range, value must between -2147483648 and 2147483647")
    })?;
    let dst_db = usize::try_from(dst_db)
        .ok()
        .filter(|&d| d < store.databases())
        .ok_or(CmdError::DbIndexOutOfRange)?;
    if dst_db == db {
        return Err(CmdError::other(
            "ERR source and destination objects are the same",
        ));
    }
    let key = &args[1];
    if !store.expire_if_needed(db, key, ctx) || store.expire_if_needed(dst_db, key, ctx) {
        return Ok(Reply::Int(0));
    }
    let Some(entry) = store.db_mut(db).remove(key) else {
        return Ok(Reply::Int(0));
    };
    let expire_at = entry.expire_at();
    store.db_mut(dst_db).set(key, entry.value, expire_at);
    Ok(Reply::Int(1))
}

/// COPY's [DB n] [REPLACE]: the destination database and whether to
/// replace an existing destination key.
fn parse_copy_options<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    opts: &[Bytes],
) -> Result<(usize, bool), CmdError> {
    let mut replace = false;
    let mut dst_db = db;
    let mut i = 0;
    while i < opts.len() {
        if eq_ic(&opts[i], "REPLACE") {
            replace = true;
        } else if eq_ic(&opts[i], "DB") && i + 1 < opts.len() {
            dst_db = copy_db_index(store, &opts[i + 1])?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok((dst_db, replace))
}

/// COPY's DB argument: Redis parses a C int (anything else is "not an
/// integer") and then range-checks it.
fn copy_db_index<K: Keyspace>(store: &Store<K>, arg: &[u8]) -> Result<usize, CmdError> {
    let i = parse_i64(arg)?;
    let i = i32::try_from(i).map_err(|_| CmdError::NotInteger)?;
    usize::try_from(i)
        .ok()
        .filter(|&i| i < store.databases())
        .ok_or(CmdError::DbIndexOutOfRange)
}

// ---- Expiry ------------------------------------------------------------------

/// What distinguishes EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT.
#[derive(Clone, Copy)]
struct ExpireCmd {
    name: &'static str,
    seconds: bool,
    relative: bool,
}

fn expire<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cmd = ExpireCmd {
        name: "expire",
        seconds: true,
        relative: true,
    };
    set_expiry(store, db, args, ctx, cmd)
}

fn pexpire<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cmd = ExpireCmd {
        name: "pexpire",
        seconds: false,
        relative: true,
    };
    set_expiry(store, db, args, ctx, cmd)
}

fn expireat<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cmd = ExpireCmd {
        name: "expireat",
        seconds: true,
        relative: false,
    };
    set_expiry(store, db, args, ctx, cmd)
}

fn pexpireat<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cmd = ExpireCmd {
        name: "pexpireat",
        seconds: false,
        relative: false,
    };
    set_expiry(store, db, args, ctx, cmd)
}

/// The NX / XX / GT / LT options of the EXPIRE family.
#[derive(Default)]
struct ExpireCond {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl ExpireCond {
    fn parse(opts: &[Bytes]) -> Result<ExpireCond, CmdError> {
        let mut c = ExpireCond::default();
        for o in opts {
            if eq_ic(o, "NX") {
                c.nx = true;
            } else if eq_ic(o, "XX") {
                c.xx = true;
            } else if eq_ic(o, "GT") {
                c.gt = true;
            } else if eq_ic(o, "LT") {
                c.lt = true;
            } else {
                return Err(CmdError::other(format!(
                    "ERR Unsupported option {}",
                    sanitize(o)
                )));
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(CmdError::other(
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        if c.gt && c.lt {
            return Err(CmdError::other(
                "ERR GT and LT options at the same time are not compatible",
            ));
        }
        Ok(c)
    }

    /// Whether the options allow replacing the `current` expiry (None: the
    /// key is persistent, which GT and LT treat as an infinite TTL) by `when`.
    fn allows(&self, current: Option<i64>, when: i64) -> bool {
        match current {
            None => !self.xx && !self.gt,
            Some(cur) => {
                let refused = self.nx || (self.gt && when <= cur) || (self.lt && when >= cur);
                !refused
            }
        }
    }
}

/// Argument text for an error message: lossy UTF-8, and no CR/LF that
/// could break the error line.
fn sanitize(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg)
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}

/// The absolute expiry (Unix ms, possibly in the past or negative) that
/// an EXPIRE-family command asks for, with Redis's overflow checks.
fn expire_target(arg: &[u8], cmd: ExpireCmd, ctx: &Ctx) -> Result<i64, CmdError> {
    let invalid = CmdError::InvalidExpire(cmd.name);
    let mut when = parse_i64(arg)?;
    if cmd.seconds {
        when = when.checked_mul(1000).ok_or(invalid.clone())?;
    }
    let base = if cmd.relative {
        i64::try_from(ctx.now_ms).map_err(|_| invalid.clone())?
    } else {
        0
    };
    when.checked_add(base).ok_or(invalid)
}

fn set_expiry<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    cmd: ExpireCmd,
) -> CmdResult {
    let key = &args[1];
    // Redis checks the options before the number.
    let cond = ExpireCond::parse(&args[3..])?;
    let when = expire_target(&args[2], cmd, ctx)?;
    if !store.expire_if_needed(db, key, ctx) {
        return Ok(Reply::Int(0));
    }
    let current = store
        .db(db)
        .get(key)
        .and_then(|e| e.expire_at())
        .map(|t| i64::try_from(t).unwrap_or(i64::MAX));
    if !cond.allows(current, when) {
        return Ok(Reply::Int(0));
    }
    match u64::try_from(when) {
        Ok(at) if at > ctx.now_ms => {
            store.db_mut(db).set_expire(key, Some(at));
        }
        // A time already past deletes the key (Redis replicates a DEL).
        _ => {
            store.db_mut(db).remove(key);
        }
    }
    Ok(Reply::Int(1))
}

fn persist<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    let volatile = store.expire_if_needed(db, key, ctx)
        && store.db(db).get(key).and_then(|e| e.expire_at()).is_some();
    if volatile {
        store.db_mut(db).set_expire(key, None);
    }
    Ok(Reply::Int(volatile as i64))
}

/// How TTL-family commands report an expiry.
#[derive(Clone, Copy)]
enum TtlForm {
    RemainingSecs,
    RemainingMs,
    AtSecs,
    AtMs,
}

/// -2 for a missing key, -1 for a persistent one; seconds round to the
/// nearest like Redis's `(ms + 500) / 1000`.
fn ttl_reply<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
    form: TtlForm,
) -> CmdResult {
    let Some(e) = store.peek(db, key, ctx.now_ms) else {
        return Ok(Reply::Int(-2));
    };
    let Some(at) = e.expire_at() else {
        return Ok(Reply::Int(-1));
    };
    let ms = match form {
        TtlForm::RemainingSecs | TtlForm::RemainingMs => at.saturating_sub(ctx.now_ms),
        TtlForm::AtSecs | TtlForm::AtMs => at,
    };
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    Ok(Reply::Int(match form {
        TtlForm::RemainingMs | TtlForm::AtMs => ms,
        TtlForm::RemainingSecs | TtlForm::AtSecs => ms.saturating_add(500) / 1000,
    }))
}

fn ttl<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    ttl_reply(store, db, &args[1], ctx, TtlForm::RemainingSecs)
}

fn pttl<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    ttl_reply(store, db, &args[1], ctx, TtlForm::RemainingMs)
}

fn expiretime<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    ttl_reply(store, db, &args[1], ctx, TtlForm::AtSecs)
}

fn pexpiretime<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    ttl_reply(store, db, &args[1], ctx, TtlForm::AtMs)
}

// ---- KEYS, SCAN, RANDOMKEY -----------------------------------------------------

fn keys<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let filter = KeyFilter {
        pattern: pattern_arg(&args[1]),
        type_name: None,
    };
    let out = store
        .db(db)
        .iter()
        .filter(|e| filter.wants(*e, ctx.now_ms))
        .map(key_reply)
        .collect();
    Ok(Reply::Array(out))
}

/// None for the match-everything pattern, which Redis answers without the
/// matcher (so it also selects the empty key, which `*` alone would not).
fn pattern_arg(arg: &[u8]) -> Option<&[u8]> {
    (!glob::is_match_all(arg)).then_some(arg)
}

/// Which keys KEYS and SCAN report.
struct KeyFilter<'a> {
    pattern: Option<&'a [u8]>,
    type_name: Option<&'a [u8]>,
}

impl KeyFilter<'_> {
    fn wants<K: Keyspace>(&self, e: EntryRef<'_, K>, now_ms: u64) -> bool {
        !e.is_expired(now_ms)
            && self.pattern.is_none_or(|p| glob::matches(p, e.key, false))
            && self
                .type_name
                .is_none_or(|t| t.eq_ignore_ascii_case(e.value.type_name().as_bytes()))
    }
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE t].
///
/// The cursor and its guarantee (a key present for the whole iteration
/// is returned at least once; keys added during it may be missed, which
/// SCAN allows) are the engine's: see [`Keyspace::scan`]. 0 both starts
/// and ends an iteration. The memory engine's cursor is a position in its
/// dense entry vector, walked downwards so that a removal (which moves the
/// last entry into the hole) never hides a key not yet visited.
fn scan<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cursor = crate::args::parse_cursor(&args[1])?;
    let (filter, count) = parse_scan_options(&args[2..])?;
    let (next, keys) = scan_db(store.db(db), cursor, count, &filter, ctx.now_ms);
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(keys),
    ]))
}

/// Redis's default SCAN COUNT.
const SCAN_DEFAULT_COUNT: u64 = 10;

/// SCAN's COUNT among its options (`args[2..]`), checked as SCAN checks
/// them (cluster mode's SCAN over several shards reads it).
pub fn scan_count(opts: &[Bytes]) -> Result<u64, CmdError> {
    parse_scan_options(opts).map(|(_, count)| count)
}

fn parse_scan_options(opts: &[Bytes]) -> Result<(KeyFilter<'_>, u64), CmdError> {
    let mut filter = KeyFilter {
        pattern: None,
        type_name: None,
    };
    let mut count = SCAN_DEFAULT_COUNT;
    let mut i = 0;
    while i < opts.len() {
        let Some(value) = opts.get(i + 1) else {
            return Err(CmdError::Syntax);
        };
        if eq_ic(&opts[i], "COUNT") {
            count = u64::try_from(parse_i64(value)?)
                .ok()
                .filter(|&n| n >= 1)
                .ok_or(CmdError::Syntax)?;
        } else if eq_ic(&opts[i], "MATCH") {
            filter.pattern = pattern_arg(value);
        } else if eq_ic(&opts[i], "TYPE") {
            filter.type_name = Some(value);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok((filter, count))
}

/// Visits up to `count` entries from `cursor` (see [`scan`]) and returns
/// the next cursor and the keys that pass the filter.
fn scan_db<K: Keyspace>(
    d: DbRef<'_, K>,
    cursor: u64,
    count: u64,
    filter: &KeyFilter,
    now_ms: u64,
) -> (u64, Vec<Reply>) {
    let mut keys = Vec::new();
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let next = d.scan(cursor, count, |e| {
        if filter.wants(e, now_ms) {
            keys.push(key_reply(e));
        }
    });
    (next, keys)
}

/// Random picks RANDOMKEY tries before deciding the database holds only
/// expired keys (it cannot delete them: it is a read).
const RANDOMKEY_ATTEMPTS: u64 = 100;

/// Picks with the command's seed, so every replica picks the same key.
fn randomkey<K: Keyspace>(store: &Store<K>, db: usize, _args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let d = store.db(db);
    if d.is_empty() {
        return Ok(Reply::Nil);
    }
    let live = (0..RANDOMKEY_ATTEMPTS)
        .filter_map(|n| d.random_entry(ctx.random(n)))
        .find(|e| !e.is_expired(ctx.now_ms));
    Ok(live.map_or(Reply::Nil, key_reply))
}

// ---- DUMP, RESTORE ------------------------------------------------------------

/// DUMP key: the value in Redis 7.0's serialization format (see
/// [`crate::rdb`]), which redis-server's RESTORE loads; nil for a missing
/// key. The TTL is not part of the payload.
fn dump<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    Ok(match store.live(db, &args[1], ctx.now_ms) {
        Some(e) => Reply::Bulk(Bytes::from(crate::rdb::dump(e.value))),
        None => Reply::Nil,
    })
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME s]
/// [FREQ f], checked in Redis's order: options, BUSYKEY, the TTL, the
/// payload's version and checksum, then its contents. A TTL of 0 means
/// no expiry; ABSTTL makes it a Unix time in ms; a time already past
/// restores nothing (and REPLACE has still deleted the old key), as
/// Redis does. IDLETIME sets the key's idle time under an LRU policy,
/// FREQ its counter under an LFU one (node-local, as every access stamp).
fn restore<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (None, None);
    let mut j = 4;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = &args[j];
        if eq_ic(a, "REPLACE") {
            replace = true;
        } else if eq_ic(a, "ABSTTL") {
            absttl = true;
        } else if eq_ic(a, "IDLETIME") && more && freq.is_none() {
            let v = parse_i64(&args[j + 1])?;
            if v < 0 {
                return Err(CmdError::other("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v as u64);
            j += 1;
        } else if eq_ic(a, "FREQ") && more && idle.is_none() {
            let v = parse_i64(&args[j + 1])?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::other(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq = Some(v as u8);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let exists = store.expire_if_needed(db, key, ctx);
    if exists && !replace {
        return Err(CmdError::other("BUSYKEY Target key name already exists."));
    }
    let ttl = parse_i64(&args[2])?;
    if ttl < 0 {
        return Err(CmdError::other("ERR Invalid TTL value, must be >= 0"));
    }
    let body = crate::rdb::verify(&args[3])
        .ok_or_else(|| CmdError::other("ERR DUMP payload version or checksum are wrong"))?;
    let value = crate::rdb::decode_value(body, &store.limits)
        .map_err(|_| CmdError::other("ERR Bad data format"))?;
    if exists {
        store.db_mut(db).remove(key);
    }
    let now = i64::try_from(ctx.now_ms).unwrap_or(i64::MAX);
    // Redis adds without an overflow check: a sum past i64 lands in the
    // past, which restores nothing.
    let at = if absttl { ttl } else { ttl.wrapping_add(now) };
    if ttl != 0 && at <= now {
        return Ok(Reply::ok());
    }
    let expire_at = (ttl != 0).then_some(at as u64);
    store.db_mut(db).set(key, value, expire_at);
    store.keyspace().restore_access(db, key, idle, freq);
    Ok(Reply::ok())
}

// ---- OBJECT ---------------------------------------------------------------------

/// Redis keeps strings up to this length in one allocation with their
/// header ("embstr"); longer ones are "raw".
const EMBSTR_MAX_LEN: usize = 44;

/// Redis shares the integer objects 0..OBJ_SHARED_INTEGERS, whose refcount
/// reads as INT_MAX.
const SHARED_INTEGERS: i64 = 10_000;

/// The encoding name OBJECT ENCODING reports for a value.
pub fn encoding_name<K: Keyspace>(v: &Value<K>) -> &'static str {
    match v {
        Value::Int(_) => "int",
        Value::Str(s) if s.len() <= EMBSTR_MAX_LEN => "embstr",
        Value::Str(_) | Value::Raw(_) => "raw",
        // Redis 7.0 reports every list as a quicklist (a small one is a
        // quicklist of one listpack node; 7.2 started to name it
        // "listpack"); Kvasir answers as 7.0 does.
        Value::List(_) => "quicklist",
        Value::Hash(h) => h.encoding(),
        Value::Set(s) => s.encoding(),
        Value::ZSet(z) => z.encoding(),
        Value::Stream(s) => s.encoding(),
    }
}

fn object_encoding<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    Ok(match store.peek(db, &args[2], ctx.now_ms) {
        Some(e) => Reply::Bulk(Bytes::from_static(encoding_name(e.value).as_bytes())),
        None => Reply::Nil,
    })
}

/// The decayed LFU counter; refused unless an LFU maxmemory policy is
/// selected, as in Redis. Access stamps are node-local: a follower's may
/// differ from its leader's.
fn object_freq<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    match store.peek(db, &args[2], ctx.now_ms) {
        Some(e) if store.keyspace().access_mode() != AccessMode::Lru => {
            Ok(Reply::Int(store.keyspace().access_frequency(&e) as i64))
        }
        Some(_) => Err(CmdError::other(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
             Please note that when switching between policies at runtime LRU and LFU data \
             will take some time to adjust.",
        )),
        None => Ok(Reply::Nil),
    }
}

/// Seconds since the key's last access; refused under an LFU policy, as
/// in Redis.
fn object_idletime<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    match store.peek(db, &args[2], ctx.now_ms) {
        Some(e) if store.keyspace().access_mode() == AccessMode::Lru => {
            Ok(Reply::Int(store.keyspace().idle_seconds(&e) as i64))
        }
        Some(_) => Err(CmdError::other(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. \
             Please note that when switching between policies at runtime LRU and LFU data \
             will take some time to adjust.",
        )),
        None => Ok(Reply::Nil),
    }
}

fn object_refcount<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    Ok(
        match store.peek(db, &args[2], ctx.now_ms).map(|e| e.value) {
            Some(Value::Int(i)) if (0..SHARED_INTEGERS).contains(i) => Reply::Int(i32::MAX as i64),
            Some(_) => Reply::Int(1),
            None => Reply::Nil,
        },
    )
}

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

fn object_help<K: Keyspace>(
    _store: &Store<K>,
    _db: usize,
    _args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    Ok(help_reply(OBJECT_HELP))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::lookup;

    const NOW: u64 = 1_000_000;

    fn ctx(now_ms: u64) -> Ctx {
        Ctx { now_ms, seed: 42 }
    }

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    fn apply(s: &mut Store, a: &[&str]) -> CmdResult {
        s.apply(0, &args(a), &ctx(NOW))
    }

    fn read(s: &Store, a: &[&str]) -> CmdResult {
        s.read(0, &args(a), &ctx(NOW))
    }

    fn err(r: CmdResult) -> String {
        match r {
            Err(e) => e.text().into_owned(),
            Ok(reply) => panic!("expected an error, got {reply:?}"),
        }
    }

    fn put(s: &mut Store, key: &str, val: &str, expire_at: Option<u64>) {
        s.db_mut(0)
            .set(key.as_bytes(), Value::from_bytes(val.as_bytes()), expire_at);
    }

    fn value(s: &Store, db: usize, key: &str) -> Option<(Value, Option<u64>)> {
        s.db(db)
            .get(key.as_bytes())
            .map(|e| (e.value.clone(), e.expire_at()))
    }

    fn int(n: i64) -> CmdResult {
        Ok(Reply::Int(n))
    }

    fn bulk(s: &str) -> Reply {
        Reply::bulk_str(s)
    }

    fn s(v: &str) -> Value {
        Value::from_bytes(v.as_bytes())
    }

    #[test]
    fn del_and_unlink_count_existing_keys() {
        let mut st = Store::default();
        put(&mut st, "a", "1", None);
        put(&mut st, "b", "2", None);
        put(&mut st, "gone", "3", Some(NOW));
        assert_eq!(apply(&mut st, &["DEL", "a", "b", "c", "a"]), int(2));
        assert_eq!(apply(&mut st, &["UNLINK", "gone"]), int(0));
        assert!(st.db(0).is_empty(), "the expired key went lazily");
        put(&mut st, "x", "1", None);
        assert_eq!(apply(&mut st, &["unlink", "x"]), int(1));
        assert_eq!(
            err(apply(&mut st, &["DEL"])),
            "ERR wrong number of arguments for 'del' command"
        );
    }

    #[test]
    fn exists_and_touch_count_duplicates() {
        let mut st = Store::default();
        put(&mut st, "a", "1", None);
        put(&mut st, "old", "1", Some(NOW - 1));
        assert_eq!(read(&st, &["EXISTS", "a", "a", "b", "old"]), int(2));
        assert_eq!(read(&st, &["TOUCH", "a", "old", "a"]), int(2));
        assert_eq!(st.db(0).len(), 2, "reads never remove expired keys");
    }

    #[test]
    fn type_reports_string_or_none() {
        let mut st = Store::default();
        put(&mut st, "a", "hello", None);
        put(&mut st, "n", "12", None);
        put(&mut st, "old", "1", Some(NOW));
        assert_eq!(read(&st, &["TYPE", "a"]), Ok(Reply::simple("string")));
        assert_eq!(read(&st, &["TYPE", "n"]), Ok(Reply::simple("string")));
        assert_eq!(read(&st, &["TYPE", "nope"]), Ok(Reply::simple("none")));
        assert_eq!(read(&st, &["TYPE", "old"]), Ok(Reply::simple("none")));
    }

    #[test]
    fn rename_moves_value_and_ttl() {
        let mut st = Store::default();
        put(&mut st, "a", "1", Some(NOW + 5000));
        put(&mut st, "b", "other", None);
        assert_eq!(apply(&mut st, &["RENAME", "a", "b"]), Ok(Reply::ok()));
        assert_eq!(value(&st, 0, "a"), None);
        assert_eq!(value(&st, 0, "b"), Some((Value::Int(1), Some(NOW + 5000))));
        assert_eq!(st.db(0).expires_count(), 1);
        assert_eq!(
            err(apply(&mut st, &["RENAME", "missing", "b"])),
            "ERR no such key"
        );
        // To itself: a no-op for an existing key, an error for a missing one.
        assert_eq!(apply(&mut st, &["RENAME", "b", "b"]), Ok(Reply::ok()));
        assert_eq!(value(&st, 0, "b"), Some((Value::Int(1), Some(NOW + 5000))));
        assert_eq!(
            err(apply(&mut st, &["RENAME", "a", "a"])),
            "ERR no such key"
        );
        put(&mut st, "old", "1", Some(NOW));
        assert_eq!(
            err(apply(&mut st, &["RENAME", "old", "c"])),
            "ERR no such key"
        );
        assert_eq!(
            err(apply(&mut st, &["RENAME", "b"])),
            "ERR wrong number of arguments for 'rename' command"
        );
    }

    #[test]
    fn renamenx_only_to_a_free_name() {
        let mut st = Store::default();
        put(&mut st, "a", "1", None);
        put(&mut st, "b", "2", None);
        put(&mut st, "expired", "3", Some(NOW));
        assert_eq!(apply(&mut st, &["RENAMENX", "a", "b"]), int(0));
        assert_eq!(apply(&mut st, &["RENAMENX", "a", "a"]), int(0));
        assert_eq!(apply(&mut st, &["RENAMENX", "a", "expired"]), int(1));
        assert_eq!(value(&st, 0, "expired"), Some((Value::Int(1), None)));
        assert_eq!(
            err(apply(&mut st, &["RENAMENX", "a", "c"])),
            "ERR no such key"
        );
    }

    #[test]
    fn copy_within_and_across_databases() {
        let mut st = Store::default();
        put(&mut st, "src", "v", Some(NOW + 10));
        put(&mut st, "taken", "t", None);
        assert_eq!(apply(&mut st, &["COPY", "src", "dst"]), int(1));
        assert_eq!(value(&st, 0, "dst"), Some((s("v"), Some(NOW + 10))));
        assert_eq!(apply(&mut st, &["COPY", "src", "taken"]), int(0));
        assert_eq!(value(&st, 0, "taken"), Some((s("t"), None)));
        assert_eq!(apply(&mut st, &["COPY", "src", "taken", "REPLACE"]), int(1));
        assert_eq!(value(&st, 0, "taken"), Some((s("v"), Some(NOW + 10))));
        assert_eq!(apply(&mut st, &["COPY", "src", "src", "db", "3"]), int(1));
        assert_eq!(value(&st, 3, "src"), Some((s("v"), Some(NOW + 10))));
        assert_eq!(apply(&mut st, &["COPY", "missing", "x"]), int(0));
        assert_eq!(
            err(apply(&mut st, &["COPY", "src", "src"])),
            "ERR source and destination objects are the same"
        );
        assert_eq!(
            err(apply(&mut st, &["COPY", "src", "src", "DB", "0"])),
            "ERR source and destination objects are the same"
        );
        assert_eq!(
            err(apply(&mut st, &["COPY", "src", "x", "DB", "16"])),
            "ERR DB index is out of range"
        );
        assert_eq!(
            err(apply(&mut st, &["COPY", "src", "x", "DB", "-1"])),
            "ERR DB index is out of range"
        );
        assert_eq!(
            err(apply(&mut st, &["COPY", "src", "x", "DB", "x"])),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err(apply(&mut st, &["COPY", "src", "x", "DB", "4294967296"])),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err(apply(&mut st, &["COPY", "src", "x", "DB"])),
            "ERR syntax error"
        );
        assert_eq!(
            err(apply(&mut st, &["COPY", "src", "x", "FOO"])),
            "ERR syntax error"
        );
    }

    #[test]
    fn copy_of_an_expired_key_copies_nothing() {
        let mut st = Store::default();
        put(&mut st, "src", "v", Some(NOW));
        assert_eq!(apply(&mut st, &["COPY", "src", "dst"]), int(0));
        assert!(st.db(0).is_empty());
    }

    #[test]
    fn expire_family_sets_absolute_times() {
        let mut st = Store::default();
        for k in ["a", "b", "c", "d"] {
            put(&mut st, k, "1", None);
        }
        assert_eq!(apply(&mut st, &["EXPIRE", "a", "10"]), int(1));
        assert_eq!(apply(&mut st, &["PEXPIRE", "b", "10"]), int(1));
        assert_eq!(apply(&mut st, &["EXPIREAT", "c", "2000"]), int(1));
        assert_eq!(apply(&mut st, &["PEXPIREAT", "d", "2000000"]), int(1));
        assert_eq!(value(&st, 0, "a").and_then(|v| v.1), Some(NOW + 10_000));
        assert_eq!(value(&st, 0, "b").and_then(|v| v.1), Some(NOW + 10));
        assert_eq!(value(&st, 0, "c").and_then(|v| v.1), Some(2_000_000));
        assert_eq!(value(&st, 0, "d").and_then(|v| v.1), Some(2_000_000));
        assert_eq!(apply(&mut st, &["EXPIRE", "missing", "10"]), int(0));
    }

    #[test]
    fn expire_in_the_past_deletes() {
        let mut st = Store::default();
        for k in ["a", "b", "c", "d"] {
            put(&mut st, k, "1", None);
        }
        assert_eq!(apply(&mut st, &["EXPIRE", "a", "0"]), int(1));
        assert_eq!(apply(&mut st, &["PEXPIRE", "b", "-5"]), int(1));
        assert_eq!(apply(&mut st, &["EXPIREAT", "c", "1"]), int(1));
        let now = NOW.to_string();
        assert_eq!(apply(&mut st, &["PEXPIREAT", "d", &now]), int(1));
        assert!(st.db(0).is_empty());
        assert_eq!(st.db(0).expires_count(), 0);
    }

    #[test]
    fn expire_conditions() {
        let mut st = Store::default();
        put(&mut st, "p", "1", None);
        put(&mut st, "v", "1", Some(NOW + 10_000));
        // Persistent key: NX and LT apply, XX and GT do not.
        assert_eq!(apply(&mut st, &["EXPIRE", "p", "100", "XX"]), int(0));
        assert_eq!(apply(&mut st, &["EXPIRE", "p", "100", "GT"]), int(0));
        assert_eq!(apply(&mut st, &["EXPIRE", "p", "100", "LT"]), int(1));
        assert!(st.db_mut(0).set_expire(b"p", None));
        assert_eq!(apply(&mut st, &["EXPIRE", "p", "100", "nx"]), int(1));
        // Volatile key (10 s left).
        assert_eq!(apply(&mut st, &["EXPIRE", "v", "100", "NX"]), int(0));
        assert_eq!(apply(&mut st, &["EXPIRE", "v", "5", "GT"]), int(0));
        assert_eq!(apply(&mut st, &["EXPIRE", "v", "10", "GT"]), int(0));
        assert_eq!(apply(&mut st, &["EXPIRE", "v", "20", "GT"]), int(1));
        assert_eq!(apply(&mut st, &["EXPIRE", "v", "30", "LT"]), int(0));
        assert_eq!(apply(&mut st, &["EXPIRE", "v", "15", "XX", "LT"]), int(1));
        assert_eq!(value(&st, 0, "v").and_then(|v| v.1), Some(NOW + 15_000));
    }

    #[test]
    fn expire_errors() {
        let mut st = Store::default();
        put(&mut st, "k", "1", None);
        let nx = "ERR NX and XX, GT or LT options at the same time are not compatible";
        assert_eq!(err(apply(&mut st, &["EXPIRE", "k", "1", "NX", "XX"])), nx);
        assert_eq!(err(apply(&mut st, &["EXPIRE", "k", "1", "GT", "NX"])), nx);
        assert_eq!(err(apply(&mut st, &["EXPIRE", "k", "1", "NX", "LT"])), nx);
        assert_eq!(
            err(apply(&mut st, &["EXPIRE", "k", "1", "GT", "LT"])),
            "ERR GT and LT options at the same time are not compatible"
        );
        assert_eq!(
            err(apply(&mut st, &["EXPIRE", "k", "1", "FOO"])),
            "ERR Unsupported option FOO"
        );
        // Options are checked before the number, as in Redis.
        assert_eq!(err(apply(&mut st, &["EXPIRE", "k", "x", "NX", "XX"])), nx);
        assert_eq!(
            err(apply(&mut st, &["EXPIRE", "k", "1.5"])),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err(apply(&mut st, &["EXPIRE", "k", "9223372036854775807"])),
            "ERR invalid expire time in 'expire' command"
        );
        assert_eq!(
            err(apply(&mut st, &["EXPIRE", "k", "-9223372036854775808"])),
            "ERR invalid expire time in 'expire' command"
        );
        assert_eq!(
            err(apply(&mut st, &["PEXPIRE", "k", "9223372036854775807"])),
            "ERR invalid expire time in 'pexpire' command"
        );
        assert_eq!(
            err(apply(&mut st, &["EXPIREAT", "k", "9223372036854775807"])),
            "ERR invalid expire time in 'expireat' command"
        );
        // PEXPIREAT adds nothing, so the largest time is accepted.
        assert_eq!(
            apply(&mut st, &["PEXPIREAT", "k", "9223372036854775807"]),
            int(1)
        );
        assert_eq!(
            err(apply(&mut st, &["EXPIRE", "k"])),
            "ERR wrong number of arguments for 'expire' command"
        );
    }

    #[test]
    fn ttl_family() {
        let mut st = Store::default();
        put(&mut st, "p", "1", None);
        put(&mut st, "a", "1", Some(NOW + 1499));
        put(&mut st, "b", "1", Some(NOW + 1500));
        put(&mut st, "old", "1", Some(NOW));
        for cmd in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
            assert_eq!(read(&st, &[cmd, "missing"]), int(-2), "{cmd}");
            assert_eq!(read(&st, &[cmd, "old"]), int(-2), "{cmd}");
            assert_eq!(read(&st, &[cmd, "p"]), int(-1), "{cmd}");
        }
        assert_eq!(read(&st, &["TTL", "a"]), int(1));
        assert_eq!(read(&st, &["TTL", "b"]), int(2));
        assert_eq!(read(&st, &["PTTL", "a"]), int(1499));
        assert_eq!(read(&st, &["EXPIRETIME", "a"]), int(1001));
        assert_eq!(read(&st, &["EXPIRETIME", "b"]), int(1002));
        assert_eq!(read(&st, &["PEXPIRETIME", "a"]), int((NOW + 1499) as i64));
    }

    #[test]
    fn persist_clears_the_expiry() {
        let mut st = Store::default();
        put(&mut st, "v", "1", Some(NOW + 100));
        put(&mut st, "p", "1", None);
        assert_eq!(apply(&mut st, &["PERSIST", "v"]), int(1));
        assert_eq!(apply(&mut st, &["PERSIST", "v"]), int(0));
        assert_eq!(apply(&mut st, &["PERSIST", "p"]), int(0));
        assert_eq!(apply(&mut st, &["PERSIST", "missing"]), int(0));
        assert_eq!(st.db(0).expires_count(), 0);
        assert_eq!(read(&st, &["TTL", "v"]), int(-1));
    }

    #[test]
    fn keys_matches_in_entry_order() {
        let mut st = Store::default();
        for k in ["user:1", "user:2", "", "order:1", "user:x"] {
            put(&mut st, k, "1", None);
        }
        put(&mut st, "user:old", "1", Some(NOW));
        let all = read(&st, &["KEYS", "*"]);
        let expected = ["user:1", "user:2", "", "order:1", "user:x"].map(bulk);
        assert_eq!(all, Ok(Reply::Array(expected.to_vec())));
        assert_eq!(
            read(&st, &["KEYS", "user:[0-9]"]),
            Ok(Reply::Array(vec![bulk("user:1"), bulk("user:2")]))
        );
        assert_eq!(
            read(&st, &["KEYS", "*:?"]),
            Ok(Reply::Array(
                ["user:1", "user:2", "order:1", "user:x"].map(bulk).to_vec()
            ))
        );
        assert_eq!(read(&st, &["KEYS", "nothing*"]), Ok(Reply::Array(vec![])));
    }

    /// Runs a whole SCAN iteration, returning every call's keys.
    fn scan_all(st: &Store, opts: &[&str]) -> Vec<Vec<Reply>> {
        let mut cursor = "0".to_string();
        let mut calls = Vec::new();
        loop {
            let mut a = vec!["SCAN", cursor.as_str()];
            a.extend_from_slice(opts);
            let Ok(Reply::Array(parts)) = read(st, &a) else {
                panic!("bad SCAN reply");
            };
            let [Reply::Bulk(next), Reply::Array(keys)] = parts.as_slice() else {
                panic!("bad SCAN reply {parts:?}");
            };
            calls.push(keys.clone());
            cursor = String::from_utf8_lossy(next).into_owned();
            if cursor == "0" {
                return calls;
            }
            assert!(calls.len() < 10_000, "SCAN does not terminate");
        }
    }

    fn sorted_keys(calls: &[Vec<Reply>]) -> Vec<Reply> {
        let mut keys: Vec<Reply> = calls.iter().flatten().cloned().collect();
        keys.sort_by_key(|r| format!("{r:?}"));
        keys
    }

    #[test]
    fn scan_visits_every_key_once() {
        let mut st = Store::default();
        for i in 0..95 {
            put(&mut st, &format!("k{i:02}"), "1", None);
        }
        put(&mut st, "gone", "1", Some(NOW));
        let calls = scan_all(&st, &[]);
        assert_eq!(calls.len(), 10, "COUNT defaults to 10 positions");
        let expected: Vec<Reply> = (0..95).map(|i| bulk(&format!("k{i:02}"))).collect();
        assert_eq!(sorted_keys(&calls), expected);
        let calls = scan_all(&st, &["COUNT", "1000", "MATCH", "k9*"]);
        assert_eq!(calls.len(), 1);
        assert_eq!(
            sorted_keys(&calls),
            (90..95).map(|i| bulk(&format!("k{i}"))).collect::<Vec<_>>()
        );
        assert_eq!(
            sorted_keys(&scan_all(&st, &["TYPE", "STRING", "COUNT", "3"])).len(),
            95
        );
        assert!(sorted_keys(&scan_all(&st, &["TYPE", "list"])).is_empty());
        // The empty database answers at once.
        let empty = Store::default();
        assert_eq!(
            read(&empty, &["SCAN", "0"]),
            Ok(Reply::Array(vec![bulk("0"), Reply::Array(vec![])]))
        );
        // A stale cursor beyond the end resumes at the end.
        assert_eq!(sorted_keys(&scan_all(&st, &["COUNT", "1000"])).len(), 95);
        let Ok(Reply::Array(parts)) = read(&st, &["SCAN", "99999", "COUNT", "1000"]) else {
            panic!()
        };
        assert_eq!(parts[0], bulk("0"));
    }

    #[test]
    fn scan_never_skips_keys_that_stay_while_others_go() {
        let mut st = Store::default();
        for i in 0..200 {
            put(&mut st, &format!("k{i}"), "1", None);
        }
        let mut seen = std::collections::HashSet::new();
        let mut removed = std::collections::HashSet::new();
        let mut cursor = "0".to_string();
        let mut round = 0;
        loop {
            let Ok(Reply::Array(parts)) = read(&st, &["SCAN", &cursor, "COUNT", "7"]) else {
                panic!()
            };
            let [Reply::Bulk(next), Reply::Array(keys)] = parts.as_slice() else {
                panic!()
            };
            for k in keys {
                if let Reply::Bulk(b) = k {
                    seen.insert(b.clone());
                }
            }
            cursor = String::from_utf8_lossy(next).into_owned();
            if cursor == "0" {
                break;
            }
            // Delete a few keys spread over the keyspace, visited or not.
            for j in 0..3 {
                let victim = format!("k{}", (round * 37 + j * 61) % 200);
                if apply(&mut st, &["DEL", &victim]) == int(1) {
                    removed.insert(victim);
                }
            }
            round += 1;
        }
        for i in 0..200 {
            let k = format!("k{i}");
            if !removed.contains(&k) {
                assert!(seen.contains(k.as_bytes()), "{k} was skipped");
            }
        }
    }

    #[test]
    fn scan_errors() {
        let st = Store::default();
        // Redis parses the cursor with strtoul: "-1" wraps instead of
        // failing, and an empty database answers it like cursor 0.
        assert_eq!(read(&st, &["SCAN", "-1"]), read(&st, &["SCAN", "0"]));
        for bad in ["abc", " 1", "1 ", "-", "18446744073709551616"] {
            assert_eq!(
                err(read(&st, &["SCAN", bad])),
                "ERR invalid cursor",
                "{bad}"
            );
        }
        assert_eq!(
            err(read(&st, &["SCAN", "0", "COUNT", "0"])),
            "ERR syntax error"
        );
        assert_eq!(
            err(read(&st, &["SCAN", "0", "COUNT", "-3"])),
            "ERR syntax error"
        );
        assert_eq!(
            err(read(&st, &["SCAN", "0", "COUNT", "x"])),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(err(read(&st, &["SCAN", "0", "MATCH"])), "ERR syntax error");
        assert_eq!(
            err(read(&st, &["SCAN", "0", "FOO", "1"])),
            "ERR syntax error"
        );
        assert_eq!(
            read(&st, &["SCAN", "18446744073709551615"]),
            Ok(Reply::Array(vec![bulk("0"), Reply::Array(vec![])]))
        );
    }

    #[test]
    fn randomkey_is_seeded_and_skips_expired_keys() {
        let mut st = Store::default();
        assert_eq!(read(&st, &["RANDOMKEY"]), Ok(Reply::Nil));
        for i in 0..10 {
            put(&mut st, &format!("dead{i}"), "1", Some(NOW));
        }
        assert_eq!(
            read(&st, &["RANDOMKEY"]),
            Ok(Reply::Nil),
            "only expired keys"
        );
        put(&mut st, "live1", "1", None);
        put(&mut st, "live2", "1", Some(NOW + 1));
        let mut picked = std::collections::HashSet::new();
        for seed in 0..200 {
            let c = Ctx { now_ms: NOW, seed };
            let r = st.read(0, &args(&["RANDOMKEY"]), &c);
            assert_eq!(
                r,
                st.read(0, &args(&["RANDOMKEY"]), &c),
                "same seed, same key"
            );
            let Ok(Reply::Bulk(k)) = r else {
                panic!("no live key found: {r:?}")
            };
            assert!(k.starts_with(b"live"));
            picked.insert(k);
        }
        assert_eq!(picked.len(), 2, "both live keys get picked");
    }

    #[test]
    fn object_subcommands() {
        let mut st = Store::default();
        put(&mut st, "i", "123", None);
        put(&mut st, "e", &"x".repeat(44), None);
        put(&mut st, "r", &"x".repeat(45), None);
        put(&mut st, "big", "12345", None);
        put(&mut st, "old", "1", Some(NOW));
        assert_eq!(read(&st, &["OBJECT", "ENCODING", "i"]), Ok(bulk("int")));
        assert_eq!(read(&st, &["object", "encoding", "e"]), Ok(bulk("embstr")));
        assert_eq!(read(&st, &["OBJECT", "ENCODING", "r"]), Ok(bulk("raw")));
        assert_eq!(read(&st, &["OBJECT", "ENCODING", "old"]), Ok(Reply::Nil));
        assert_eq!(read(&st, &["OBJECT", "ENCODING", "no"]), Ok(Reply::Nil));
        // Created 5 s ago, read (GET records the access) 2 s ago.
        let mut st2 = Store::default();
        st2.keyspace().set_access_clock(NOW - 5_000);
        put(&mut st2, "a", "1", None);
        put(&mut st2, "b", "1", None);
        let ctx = |now_ms| Ctx { now_ms, seed: 0 };
        assert!(st2.read(0, &args(&["GET", "a"]), &ctx(NOW - 2_000)).is_ok());
        // OBJECT, TYPE, TTL and EXISTS do not count as accesses.
        for c in [
            &["TYPE", "b"][..],
            &["TTL", "b"],
            &["EXISTS", "b"],
            &["OBJECT", "ENCODING", "b"],
        ] {
            assert!(st2.read(0, &args(c), &ctx(NOW - 1_000)).is_ok());
        }
        assert_eq!(
            st2.read(0, &args(&["OBJECT", "IDLETIME", "a"]), &ctx(NOW)),
            int(2)
        );
        assert_eq!(
            st2.read(0, &args(&["OBJECT", "IDLETIME", "b"]), &ctx(NOW)),
            int(5)
        );
        assert!(st2.read(0, &args(&["TOUCH", "b"]), &ctx(NOW)).is_ok());
        assert_eq!(
            st2.read(0, &args(&["OBJECT", "IDLETIME", "b"]), &ctx(NOW)),
            int(0)
        );
        assert_eq!(read(&st, &["OBJECT", "IDLETIME", "no"]), Ok(Reply::Nil));
        // Under an LFU policy: FREQ answers (a new key starts at 5, and
        // with a log factor of 0 every access counts), IDLETIME refuses.
        st2.keyspace().set_access_mode(AccessMode::Lfu {
            log_factor: 0,
            decay_minutes: 0,
        });
        put(&mut st2, "c", "1", None);
        assert_eq!(
            st2.read(0, &args(&["OBJECT", "FREQ", "c"]), &ctx(NOW)),
            int(5)
        );
        assert!(st2.read(0, &args(&["GET", "c"]), &ctx(NOW)).is_ok());
        assert_eq!(
            st2.read(0, &args(&["OBJECT", "FREQ", "c"]), &ctx(NOW)),
            int(6)
        );
        assert!(
            err(st2.read(0, &args(&["OBJECT", "IDLETIME", "c"]), &ctx(NOW)))
                .starts_with("ERR An LFU maxmemory policy is selected, idle time not tracked.")
        );
        assert_eq!(read(&st, &["OBJECT", "REFCOUNT", "i"]), int(2_147_483_647));
        assert_eq!(read(&st, &["OBJECT", "REFCOUNT", "big"]), int(1));
        assert_eq!(read(&st, &["OBJECT", "REFCOUNT", "e"]), int(1));
        assert_eq!(read(&st, &["OBJECT", "REFCOUNT", "no"]), Ok(Reply::Nil));
        assert_eq!(read(&st, &["OBJECT", "FREQ", "no"]), Ok(Reply::Nil));
        assert_eq!(
            err(read(&st, &["OBJECT", "FREQ", "i"])),
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
             Please note that when switching between policies at runtime LRU and LFU data \
             will take some time to adjust."
        );
        let Ok(Reply::Array(help)) = read(&st, &["OBJECT", "HELP"]) else {
            panic!()
        };
        assert_eq!(
            help.first(),
            Some(&Reply::simple(
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
            ))
        );
        assert_eq!(
            err(read(&st, &["OBJECT", "FOO"])),
            "ERR unknown subcommand 'FOO'. Try OBJECT HELP."
        );
        assert_eq!(
            err(read(&st, &["OBJECT", "ENCODING"])),
            "ERR wrong number of arguments for 'object|encoding' command"
        );
        assert_eq!(
            err(read(&st, &["OBJECT", "HELP", "x"])),
            "ERR wrong number of arguments for 'object|help' command"
        );
    }

    #[test]
    fn table_entries() {
        let spec = |name: &str| lookup(name.as_bytes()).expect(name);
        assert_eq!(spec("rename").key_indexes(3), vec![1, 2]);
        assert_eq!(spec("copy").key_indexes(6), vec![1, 2]);
        assert_eq!(spec("exists").key_indexes(4), vec![1, 2, 3]);
        assert_eq!(spec("scan").key_indexes(6), Vec::<usize>::new());
        assert!(spec("unlink").flags.contains(Flags::FAST));
        assert!(!spec("del").flags.contains(Flags::FAST));
        assert!(spec("copy").flags.contains(Flags::DENYOOM));
        assert!(spec("keys").acl.contains(&"dangerous"));
        let object = spec("object");
        let encoding = object
            .subcommands
            .iter()
            .find(|s| s.name == "encoding")
            .expect("object|encoding");
        assert_eq!(encoding.key_indexes(3), vec![2]);
        for c in COMMANDS {
            let writes = matches!(c.handler, crate::table::Handler::Write(_));
            assert_eq!(writes, c.is_write(), "{}", c.name);
        }
    }
}
