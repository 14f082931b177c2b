//! Strings and counters: GET, SET and friends, INCR family, ranges, LCS.
//!
//! Replies and error texts follow Redis 7.0 (`t_string.c`). Every check of a
//! value's type goes through [`as_str`] (or [`edit_raw`]), so when other
//! types join [`Value`] the compiler points at the one place that must answer
//! WRONGTYPE for them.

use crate::args::{eq_ic, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{CompactBytes, Keyspace, Value};
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags};
use bytes::Bytes;
use kvasir_resp::Reply;
use std::borrow::Cow;

const W_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WF_OOM: Flags = W_OOM.union(Flags::FAST);
const WF: Flags = Flags::WRITE.union(Flags::FAST);
const R: Flags = Flags::READONLY;
const RF: Flags = Flags::READONLY.union(Flags::FAST);
const ACL_W: &[&str] = &["write", "string", "slow"];
const ACL_WF: &[&str] = &["write", "string", "fast"];
const ACL_R: &[&str] = &["read", "string", "slow"];
const ACL_RF: &[&str] = &["read", "string", "fast"];
const G: &str = "string";
const ONE_KEY: (i32, i32, i32) = (1, 1, 1);

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("append", 3, WF_OOM, ONE_KEY, ACL_WF, G, "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist.", crate::write_handler!(append)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_INSERT]),
    cmd("decr", 2, WF_OOM, ONE_KEY, ACL_WF, G, "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", crate::write_handler!(decr)).events(crate::notify::Events::Named("incrby")),
    cmd("decrby", 3, WF_OOM, ONE_KEY, ACL_WF, G, "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", crate::write_handler!(decrby)).events(crate::notify::Events::Named("incrby")),
    cmd("get", 2, RF, ONE_KEY, ACL_RF, G, "1.0.0", "Returns the string value of a key.", crate::read_handler!(get)),
    cmd("getdel", 2, WF, ONE_KEY, ACL_WF, G, "6.2.0", "Returns the string value of a key after deleting the key.", crate::write_handler!(getdel)).idle_on_empty().events(crate::notify::Events::Custom(crate::notify::del)).with_key_specs(&[crate::table::ks::RW_ACCESS_DELETE]),
    cmd("getex", -2, WF, ONE_KEY, ACL_WF, G, "6.2.0", "Returns the string value of a key after setting its expiration time.", crate::write_handler!(getex)).events(crate::notify::Events::Custom(crate::notify::getex)).unchanged_when(getex_changed_nothing),
    cmd("getrange", 4, R, ONE_KEY, ACL_R, G, "2.4.0", "Returns a substring of the string stored at a key.", crate::read_handler!(getrange)),
    cmd("getset", 3, WF_OOM, ONE_KEY, ACL_WF, G, "1.0.0", "Returns the previous string value of a key after setting it to a new value.", crate::write_handler!(getset)).events(crate::notify::Events::Named("set")),
    cmd("incr", 2, WF_OOM, ONE_KEY, ACL_WF, G, "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", crate::write_handler!(incr)).events(crate::notify::Events::Named("incrby")),
    cmd("incrby", 3, WF_OOM, ONE_KEY, ACL_WF, G, "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", crate::write_handler!(incrby)).events(crate::notify::Events::Named("incrby")),
    cmd("incrbyfloat", 3, WF_OOM, ONE_KEY, ACL_WF, G, "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", crate::write_handler!(incrbyfloat)),
    cmd("lcs", -3, R, (1, 2, 1), ACL_R, G, "7.0.0", "Finds the longest common substring.", crate::read_handler!(lcs)),
    cmd("mget", -2, RF, (1, -1, 1), ACL_RF, G, "1.0.0", "Atomically returns the string values of one or more keys.", crate::read_handler!(mget)).with_tips(&["request_policy:multi_shard"]),
    cmd("mset", -3, W_OOM, (1, -1, 2), ACL_W, G, "1.0.1", "Atomically creates or modifies the string values of one or more keys.", crate::write_handler!(mset)).events(crate::notify::Events::Named("set")).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::OW_UPDATE]).with_tips(&["request_policy:multi_shard", "response_policy:all_succeeded"]),
    cmd("msetnx", -3, W_OOM, (1, -1, 2), ACL_W, G, "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist.", crate::write_handler!(msetnx)).idle_on_empty().events(crate::notify::Events::Named("set")).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::OW_INSERT]).with_tips(&["request_policy:multi_shard", "response_policy:agg_min"]),
    cmd("psetex", 4, W_OOM, ONE_KEY, ACL_W, G, "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", crate::write_handler!(psetex)).events(crate::notify::Events::Custom(crate::notify::setex)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::OW_UPDATE]),
    cmd("set", -3, W_OOM, ONE_KEY, ACL_W, G, "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", crate::write_handler!(set)).unchanged_when(set_unchanged).events(crate::notify::Events::Custom(crate::notify::set)).keys_access(crate::table::KeyAccess::ByArgs(crate::string::set_key_access)),
    cmd("setex", 4, W_OOM, ONE_KEY, ACL_W, G, "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", crate::write_handler!(setex)).events(crate::notify::Events::Custom(crate::notify::setex)).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::OW_UPDATE]),
    cmd("setnx", 3, WF_OOM, ONE_KEY, ACL_WF, G, "1.0.0", "Set the string value of a key only when the key doesn't exist.", crate::write_handler!(setnx)).idle_on_empty().events(crate::notify::Events::Named("set")).keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::OW_INSERT]),
    cmd("setrange", 4, W_OOM, ONE_KEY, ACL_W, G, "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", crate::write_handler!(setrange)).keys_access(crate::table::KeyAccess::Write),
    cmd("strlen", 2, RF, ONE_KEY, ACL_RF, G, "2.2.0", "Returns the length of a string value.", crate::read_handler!(strlen)).keys_access(crate::table::KeyAccess::Existence),
    cmd("substr", 4, R, ONE_KEY, ACL_R, G, "1.0.0", "Returns a substring from a string value.", crate::read_handler!(getrange)),
];

/// SET's key needs read permission only with GET, which returns the old
/// value.
pub fn set_key_access(args: &[Bytes]) -> crate::table::KeyAccess {
    if set_has_option(args, b"get") {
        crate::table::KeyAccess::ReadWrite
    } else {
        crate::table::KeyAccess::Write
    }
}

/// Whether a SET changed nothing, from its reply: without GET a nil reply
/// is an NX or XX condition that failed; with GET, NX failed if the key
/// existed (an old value came back) and XX if it did not (nil). Redis
/// signals no modification then: watchers stay clean and tracking
/// readers are not told.
pub fn set_unchanged(args: &[Bytes], reply: &Reply) -> bool {
    match (set_has_option(args, b"get"), reply) {
        (false, Reply::Nil) => true,
        (true, Reply::Nil) => set_has_option(args, b"xx"),
        (true, Reply::Bulk(_)) => set_has_option(args, b"nx"),
        _ => false,
    }
}

/// Whether SET's options (after key and value) include `opt`.
fn set_has_option(args: &[Bytes], opt: &[u8]) -> bool {
    args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(opt))
}

/// Redis's default proto-max-bulk-len: APPEND and SETRANGE refuse to grow a
/// string beyond it (and LCS refuses a bigger scratch table).
const MAX_STRING_LEN: u64 = 512 * 1024 * 1024;

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/// The bytes of a string value, borrowed unless it is int-encoded;
/// WRONGTYPE for any other type. The single type check of this module.
fn as_str<K: Keyspace>(v: &Value<K>) -> Result<Cow<'_, [u8]>, CmdError> {
    match v {
        Value::Str(s) | Value::Raw(s) => Ok(Cow::Borrowed(s.as_slice())),
        Value::Int(i) => Ok(Cow::Owned(i.to_string().into_bytes())),
        Value::List(_) | Value::Hash(_) | Value::Set(_) | Value::ZSet(_) | Value::Stream(_) => {
            Err(CmdError::WrongType)
        }
    }
}

/// The bytes of a string value (integers are formatted).
pub fn value_bytes<K: Keyspace>(v: &Value<K>) -> Result<Bytes, CmdError> {
    as_str(v).map(|s| Bytes::copy_from_slice(&s))
}

/// A string value as an i64, parsed like Redis's string2ll.
fn int_value<K: Keyspace>(v: &Value<K>) -> Result<i64, CmdError> {
    match v {
        Value::Int(i) => Ok(*i),
        other => parse_i64(&as_str(other)?),
    }
}

/// Switches a string value to its raw byte form in place (Redis unshares
/// and decodes the same way before APPEND and SETRANGE), lets `edit` change
/// the bytes and returns the new length. WRONGTYPE for other types.
fn edit_raw<K: Keyspace>(
    v: &mut Value<K>,
    edit: impl FnOnce(&mut CompactBytes),
) -> Result<usize, CmdError> {
    match v {
        Value::Int(i) => *v = Value::Raw(CompactBytes::from_slice(i.to_string().as_bytes())),
        Value::Str(s) => *v = Value::Raw(std::mem::take(s)),
        Value::Raw(_)
        | Value::List(_)
        | Value::Hash(_)
        | Value::Set(_)
        | Value::ZSet(_)
        | Value::Stream(_) => {}
    }
    match v {
        Value::Raw(s) => {
            edit(s);
            Ok(s.len())
        }
        // Not a string: the other string encodings were converted above.
        _ => Err(CmdError::WrongType),
    }
}

/// Refuses a string that would grow beyond proto-max-bulk-len.
fn check_string_length(total: u64) -> Result<usize, CmdError> {
    if total > MAX_STRING_LEN {
        return Err(CmdError::other(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    // At most 512MB here, so it fits any usize we run on.
    Ok(total as usize)
}

/// For writes: the live value of `key` after lazy expiry.
fn live_for_write<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Option<&'a Value<K>> {
    if store.expire_if_needed(db, key, ctx) {
        store.db(db).get(key).map(|e| e.value)
    } else {
        None
    }
}

/// For writes: the live string at `key` (None when missing), WRONGTYPE for
/// other types.
fn string_for_write<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Option<Bytes>, CmdError> {
    live_for_write(store, db, key, ctx)
        .map(value_bytes)
        .transpose()
}

/// Stores `value` at `key`, keeping the TTL of a key that already exists
/// (what INCR and friends do). Call after lazy expiry.
fn put_keep_ttl<K: Keyspace>(store: &mut Store<K>, db: usize, key: &[u8], value: Value<K>) {
    let ks = store.keyspace_mut();
    match ks.get_value_mut(db, key) {
        Some(slot) => *slot = value,
        None => {
            ks.set(db, key, value, None);
        }
    }
}

fn bulk_or_nil(v: Option<Bytes>) -> Reply {
    v.map_or(Reply::Nil, Reply::Bulk)
}

// ---------------------------------------------------------------------------
// Expiry options (SET, GETEX)
// ---------------------------------------------------------------------------

/// Whose options `parse_options` accepts (Redis's COMMAND_SET / COMMAND_GET).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OptsFor {
    Set,
    GetEx,
}

/// The expiry option given to SET or GETEX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TtlOpt {
    Unset,
    KeepTtl,
    Persist,
    Ex,
    Px,
    ExAt,
    PxAt,
}

impl TtlOpt {
    fn from_keyword(arg: &[u8]) -> Option<TtlOpt> {
        [
            ("EX", TtlOpt::Ex),
            ("PX", TtlOpt::Px),
            ("EXAT", TtlOpt::ExAt),
            ("PXAT", TtlOpt::PxAt),
            ("KEEPTTL", TtlOpt::KeepTtl),
            ("PERSIST", TtlOpt::Persist),
        ]
        .into_iter()
        .find(|(kw, _)| eq_ic(arg, kw))
        .map(|(_, t)| t)
    }

    fn allowed_in(self, cmd: OptsFor) -> bool {
        match self {
            TtlOpt::KeepTtl => cmd == OptsFor::Set,
            TtlOpt::Persist => cmd == OptsFor::GetEx,
            _ => true,
        }
    }

    fn takes_value(self) -> bool {
        matches!(self, TtlOpt::Ex | TtlOpt::Px | TtlOpt::ExAt | TtlOpt::PxAt)
    }

    fn in_seconds(self) -> bool {
        matches!(self, TtlOpt::Ex | TtlOpt::ExAt)
    }

    fn is_relative(self) -> bool {
        matches!(self, TtlOpt::Ex | TtlOpt::Px)
    }
}

/// What a write does to the key's TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TtlChange {
    Keep,
    Clear,
    At(u64),
}

/// Options of SET (NX XX GET and the TTL ones) or GETEX (TTL ones only).
#[derive(Debug)]
struct StringOpts<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    ttl: TtlOpt,
    ttl_arg: &'a [u8],
}

/// Parses options as Redis's parseExtendedStringArgumentsOrReply: NX and XX
/// exclude each other, the TTL options exclude each other but one may be
/// repeated (the last value wins), anything else is a syntax error.
fn parse_options(args: &[Bytes], cmd: OptsFor) -> Result<StringOpts<'_>, CmdError> {
    let mut o = StringOpts {
        nx: false,
        xx: false,
        get: false,
        ttl: TtlOpt::Unset,
        ttl_arg: &[],
    };
    let set = cmd == OptsFor::Set;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if set && eq_ic(a, "NX") && !o.xx {
            o.nx = true;
        } else if set && eq_ic(a, "XX") && !o.nx {
            o.xx = true;
        } else if set && eq_ic(a, "GET") {
            o.get = true;
        } else {
            let ttl = TtlOpt::from_keyword(a)
                .filter(|t| t.allowed_in(cmd) && (o.ttl == TtlOpt::Unset || o.ttl == *t));
            match (ttl, args.get(i + 1)) {
                (Some(t), _) if !t.takes_value() => o.ttl = t,
                (Some(t), Some(value)) => {
                    o.ttl = t;
                    o.ttl_arg = value;
                    i += 1;
                }
                _ => return Err(CmdError::Syntax),
            }
        }
        i += 1;
    }
    Ok(o)
}

impl StringOpts<'_> {
    /// Resolves the TTL option at `now_ms`; `unset` is what no option means.
    /// Errors name `cmd` as Redis does (`invalid expire time in 'set' ...`).
    fn ttl_change(
        &self,
        unset: TtlChange,
        now_ms: u64,
        cmd: &'static str,
    ) -> Result<TtlChange, CmdError> {
        match self.ttl {
            TtlOpt::Unset => Ok(unset),
            TtlOpt::KeepTtl => Ok(TtlChange::Keep),
            TtlOpt::Persist => Ok(TtlChange::Clear),
            t => expire_at(t, self.ttl_arg, now_ms, cmd).map(TtlChange::At),
        }
    }
}

/// The absolute expiry (Unix ms) that EX/PX/EXAT/PXAT `arg` asks for, with
/// Redis's checks: positive, and no overflow when scaled or offset by now.
fn expire_at(ttl: TtlOpt, arg: &[u8], now_ms: u64, cmd: &'static str) -> Result<u64, CmdError> {
    let n = parse_i64(arg)?;
    let invalid = CmdError::InvalidExpire(cmd);
    if n <= 0 || (ttl.in_seconds() && n > i64::MAX / 1000) {
        return Err(invalid);
    }
    let ms = if ttl.in_seconds() { n * 1000 } else { n };
    let at = if ttl.is_relative() {
        i64::try_from(now_ms)
            .ok()
            .and_then(|now| now.checked_add(ms))
            .ok_or(invalid)?
    } else {
        ms
    };
    // `at` is positive here, so the conversion cannot fail.
    u64::try_from(at).map_err(|_| CmdError::InvalidExpire(cmd))
}

// ---------------------------------------------------------------------------
// GET family
// ---------------------------------------------------------------------------

fn get<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let v = store
        .live(db, &args[1], ctx.now_ms)
        .map(|e| value_bytes(e.value))
        .transpose()?;
    Ok(bulk_or_nil(v))
}

fn getdel<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    let old = string_for_write(store, db, key, ctx)?;
    if old.is_some() {
        store.db_mut(db).remove(key);
    }
    Ok(bulk_or_nil(old))
}

/// GETEX key [EX s | PX ms | EXAT ts | PXAT ms-ts | PERSIST]. As in Redis,
/// syntax errors come first, a missing key answers nil before the expiry
/// value is checked, and an absolute time already past deletes the key.
/// GETEX without an option only reads; on a missing key nothing changes.
fn getex_changed_nothing(args: &[Bytes], reply: &Reply) -> bool {
    args.len() == 2 || matches!(reply, Reply::Nil)
}

fn getex<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let key = &args[1];
    let opts = parse_options(&args[2..], OptsFor::GetEx)?;
    let Some(value) = string_for_write(store, db, key, ctx)? else {
        return Ok(Reply::Nil);
    };
    match opts.ttl_change(TtlChange::Keep, ctx.now_ms, "getex")? {
        TtlChange::Keep => {}
        TtlChange::Clear => {
            store.db_mut(db).set_expire(key, None);
        }
        TtlChange::At(at) if at <= ctx.now_ms => {
            store.db_mut(db).remove(key);
        }
        TtlChange::At(at) => {
            store.db_mut(db).set_expire(key, Some(at));
        }
    }
    Ok(Reply::Bulk(value))
}

fn getset<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let req = SetReq {
        cond: SetCond::Always,
        want_old: true,
        ttl: TtlChange::Clear,
    };
    let out = set_generic(store, db, &args[1], &args[2], req, ctx)?;
    Ok(bulk_or_nil(out.old))
}

/// MGET: missing keys and keys of other types read as nil.
fn mget<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let replies = args[1..]
        .iter()
        .map(|k| {
            let v = store.live(db, k, ctx.now_ms);
            bulk_or_nil(v.and_then(|e| value_bytes(e.value).ok()))
        })
        .collect();
    Ok(Reply::Array(replies))
}

// ---------------------------------------------------------------------------
// SET family
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetCond {
    Always,
    /// NX: only when the key does not exist.
    IfMissing,
    /// XX: only when the key exists.
    IfExists,
}

#[derive(Debug, Clone, Copy)]
struct SetReq {
    cond: SetCond,
    /// Fetch the old string first (SET ... GET, GETSET).
    want_old: bool,
    ttl: TtlChange,
}

struct SetOutcome {
    stored: bool,
    old: Option<Bytes>,
}

/// SET's core (setGenericCommand): the old value is fetched before anything
/// changes, so a WRONGTYPE leaves the key alone; then NX/XX decide whether
/// `value` is stored, with its TTL cleared, kept or set.
fn set_generic<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    key: &[u8],
    value: &[u8],
    req: SetReq,
    ctx: &Ctx,
) -> Result<SetOutcome, CmdError> {
    // A plain SET (no condition, no GET, no KEEPTTL): one lookup unless
    // the key is there but expired, which takes the full path below.
    let mut value = Value::from_bytes(value);
    if matches!(req.cond, SetCond::Always) && !req.want_old {
        let expire = match req.ttl {
            TtlChange::Keep => None,
            TtlChange::Clear => Some(None),
            TtlChange::At(at) => Some(Some(at)),
        };
        if let Some(expire) = expire {
            match store
                .keyspace_mut()
                .set_unless_expired(db, key, value, expire, ctx.now_ms)
            {
                Ok(()) => {
                    return Ok(SetOutcome {
                        stored: true,
                        old: None,
                    })
                }
                Err(v) => value = v,
            }
        }
    }
    let exists = store.expire_if_needed(db, key, ctx);
    let old = if req.want_old {
        string_for_write(store, db, key, ctx)?
    } else {
        None
    };
    let blocked = match req.cond {
        SetCond::Always => false,
        SetCond::IfMissing => exists,
        SetCond::IfExists => !exists,
    };
    if blocked {
        return Ok(SetOutcome { stored: false, old });
    }
    let expire = match req.ttl {
        TtlChange::Keep => store.db(db).get(key).and_then(|e| e.expire_at()),
        TtlChange::Clear => None,
        TtlChange::At(at) => Some(at),
    };
    store.db_mut(db).set(key, value, expire);
    Ok(SetOutcome { stored: true, old })
}

/// SET key value [NX | XX] [GET] [EX | PX | EXAT | PXAT | KEEPTTL].
fn set<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let opts = parse_options(&args[3..], OptsFor::Set)?;
    let cond = if opts.nx {
        SetCond::IfMissing
    } else if opts.xx {
        SetCond::IfExists
    } else {
        SetCond::Always
    };
    let req = SetReq {
        cond,
        want_old: opts.get,
        ttl: opts.ttl_change(TtlChange::Clear, ctx.now_ms, "set")?,
    };
    let out = set_generic(store, db, &args[1], &args[2], req, ctx)?;
    Ok(match (opts.get, out.stored) {
        (true, _) => bulk_or_nil(out.old),
        (false, true) => Reply::ok(),
        (false, false) => Reply::Nil,
    })
}

fn setnx<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let req = SetReq {
        cond: SetCond::IfMissing,
        want_old: false,
        ttl: TtlChange::Clear,
    };
    let out = set_generic(store, db, &args[1], &args[2], req, ctx)?;
    Ok(Reply::Int(out.stored as i64))
}

fn setex<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    set_with_ttl(store, db, args, ctx, TtlOpt::Ex, "setex")
}

fn psetex<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    set_with_ttl(store, db, args, ctx, TtlOpt::Px, "psetex")
}

/// SETEX / PSETEX key ttl value.
fn set_with_ttl<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    unit: TtlOpt,
    name: &'static str,
) -> CmdResult {
    let req = SetReq {
        cond: SetCond::Always,
        want_old: false,
        ttl: TtlChange::At(expire_at(unit, &args[2], ctx.now_ms, name)?),
    };
    set_generic(store, db, &args[1], &args[3], req, ctx)?;
    Ok(Reply::ok())
}

/// The key/value pairs of MSET/MSETNX; an odd count is an arity error
/// (the table's arity can only say "at least 3").
fn key_value_pairs<'a>(
    args: &'a [Bytes],
    name: &str,
) -> Result<impl Iterator<Item = (&'a Bytes, &'a Bytes)>, CmdError> {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.to_string()));
    }
    Ok(args[1..].chunks_exact(2).map(|kv| (&kv[0], &kv[1])))
}

/// Stores every pair with its TTL cleared; later duplicates win.
fn store_pairs<'a, K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    pairs: impl Iterator<Item = (&'a Bytes, &'a Bytes)>,
    ctx: &Ctx,
) {
    for (k, v) in pairs {
        // Lazy expiry first, so an expired key is counted as expired.
        store.expire_if_needed(db, k, ctx);
        store.db_mut(db).set(k, Value::from_bytes(v), None);
    }
}

fn mset<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let pairs = key_value_pairs(args, "mset")?;
    store_pairs(store, db, pairs, ctx);
    Ok(Reply::ok())
}

/// MSETNX: all or nothing; 0 if any key exists.
fn msetnx<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let mut any_exists = false;
    for (k, _) in key_value_pairs(args, "msetnx")? {
        any_exists |= store.expire_if_needed(db, k, ctx);
    }
    if any_exists {
        return Ok(Reply::Int(0));
    }
    store_pairs(store, db, key_value_pairs(args, "msetnx")?, ctx);
    Ok(Reply::Int(1))
}

// ---------------------------------------------------------------------------
// Lengths and ranges
// ---------------------------------------------------------------------------

/// APPEND: creates the key when missing, otherwise grows the string in
/// place (keeping its TTL). Returns the new length.
fn append<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let (key, tail) = (&args[1], &args[2]);
    let Some(v) = store.live_value_mut(db, key, ctx) else {
        store.db_mut(db).set(key, Value::from_bytes(tail), None);
        return Ok(Reply::Int(tail.len() as i64));
    };
    let len = as_str(v)?.len();
    check_string_length(len as u64 + tail.len() as u64)?;
    let len = edit_raw(v, |s| s.extend_from_slice(tail))?;
    Ok(Reply::Int(len as i64))
}

fn strlen<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let len = match store.live(db, &args[1], ctx.now_ms) {
        Some(e) => as_str(e.value)?.len(),
        None => 0,
    };
    Ok(Reply::Int(len as i64))
}

/// GETRANGE (and SUBSTR) key start end, both inclusive; negative indexes
/// count from the end. A missing key reads as the empty string.
fn getrange<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let start = parse_i64(&args[2])?;
    let end = parse_i64(&args[3])?;
    let Some(e) = store.live(db, &args[1], ctx.now_ms) else {
        return Ok(Reply::Bulk(Bytes::new()));
    };
    let s = as_str(e.value)?;
    Ok(Reply::Bulk(Bytes::copy_from_slice(substring(
        &s, start, end,
    ))))
}

/// Redis's getrangeCommand index rules: both negative with start > end is
/// empty; negatives count from the end and clamp to 0; end clamps to the
/// last byte; start past end is empty.
fn substring(s: &[u8], start: i64, end: i64) -> &[u8] {
    let len = s.len() as i64;
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return &[];
    }
    let from_end = |i: i64| {
        if i < 0 {
            len.saturating_add(i).max(0)
        } else {
            i
        }
    };
    let start = from_end(start);
    let end = from_end(end).min(len - 1);
    if start > end {
        return &[];
    }
    &s[start as usize..=end as usize]
}

/// SETRANGE key offset value: overwrites from `offset`, zero-padding as
/// needed; the TTL stays. An empty value changes nothing (and creates no
/// key) and answers the current length.
fn setrange<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let (key, value) = (&args[1], &args[3]);
    let offset = parse_i64(&args[2])?;
    let Ok(offset) = u64::try_from(offset) else {
        return Err(CmdError::other("ERR offset is out of range"));
    };
    let total = offset.saturating_add(value.len() as u64);
    let Some(v) = store.live_value_mut(db, key, ctx) else {
        if value.is_empty() {
            return Ok(Reply::Int(0));
        }
        let mut bytes = CompactBytes::new();
        bytes.resize(check_string_length(total)?, 0);
        overwrite_at(&mut bytes, offset as usize, value);
        store.db_mut(db).set(key, Value::Raw(bytes), None);
        return Ok(Reply::Int(total as i64));
    };
    let len = as_str(v)?.len();
    if value.is_empty() {
        return Ok(Reply::Int(len as i64));
    }
    check_string_length(total)?;
    let len = edit_raw(v, |s| overwrite_at(s, offset as usize, value))?;
    Ok(Reply::Int(len as i64))
}

/// Writes `value` at `offset`, growing `s` with zero bytes first if needed.
/// The caller has checked `offset + value.len()` against the size limit.
fn overwrite_at(s: &mut CompactBytes, offset: usize, value: &[u8]) {
    let end = offset + value.len();
    if s.len() < end {
        s.resize(end, 0);
    }
    s[offset..end].copy_from_slice(value);
}

// ---------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------

fn incr<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    incr_by(store, db, &args[1], 1, ctx)
}

fn decr<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    incr_by(store, db, &args[1], -1, ctx)
}

fn incrby<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let delta = parse_i64(&args[2])?;
    incr_by(store, db, &args[1], delta, ctx)
}

fn decrby<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let delta = parse_i64(&args[2])?;
    // -i64::MIN does not exist; Redis answers with its own text.
    let Some(delta) = delta.checked_neg() else {
        return Err(CmdError::other("ERR decrement would overflow"));
    };
    incr_by(store, db, &args[1], delta, ctx)
}

/// Adds `delta` to the integer at `key` (0 when missing), keeping the TTL.
fn incr_by<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    key: &[u8],
    delta: i64,
    ctx: &Ctx,
) -> CmdResult {
    // Read and write through one mutable lookup (after lazy expiry); a
    // missing key starts at 0, with no TTL.
    if let Some(v) = store.live_value_mut(db, key, ctx) {
        let next = int_value(v)?.checked_add(delta).ok_or(CmdError::Overflow)?;
        *v = Value::Int(next);
        return Ok(Reply::Int(next));
    }
    store.keyspace_mut().set(db, key, Value::Int(delta), None);
    Ok(Reply::Int(delta))
}

/// INCRBYFLOAT key increment: the stored value is checked (type, then
/// float syntax) before the increment, as in Redis. The TTL stays.
fn incrbyfloat<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let key = &args[1];
    let sum = match live_for_write(store, db, key, ctx) {
        Some(v) => float::add(&as_str(v)?, &args[2])?,
        None => float::add(b"0", &args[2])?,
    };
    put_keep_ttl(store, db, key, Value::from_bytes(sum.as_bytes()));
    Ok(Reply::Bulk(Bytes::from(sum)))
}

// ---------------------------------------------------------------------------
// LCS
// ---------------------------------------------------------------------------

#[derive(Debug, Default)]
struct LcsOpts {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: u64,
}

fn parse_lcs_options(args: &[Bytes]) -> Result<LcsOpts, CmdError> {
    let mut o = LcsOpts::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if eq_ic(a, "IDX") {
            o.idx = true;
        } else if eq_ic(a, "LEN") {
            o.len = true;
        } else if eq_ic(a, "WITHMATCHLEN") {
            o.with_match_len = true;
        } else if eq_ic(a, "MINMATCHLEN") && i + 1 < args.len() {
            // Negative lengths mean "no minimum", as in Redis.
            o.min_match_len = parse_i64(&args[i + 1])?.max(0) as u64;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if o.idx && o.len {
        return Err(CmdError::other(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(o)
}

/// A key's string for LCS: missing reads as empty, other types are an error
/// with LCS's own text.
fn lcs_operand<'a, K: Keyspace>(
    store: &'a Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Cow<'a, [u8]>, CmdError> {
    match store.live(db, key, ctx.now_ms) {
        None => Ok(Cow::Borrowed(&[])),
        Some(e) => as_str(e.value)
            .map_err(|_| CmdError::other("ERR The specified keys must contain string values")),
    }
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN].
fn lcs<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let a = lcs_operand(store, db, &args[1], ctx);
    let b = lcs_operand(store, db, &args[2], ctx);
    let (a, b) = (a?, b?);
    let opts = parse_lcs_options(&args[3..])?;
    let table = LcsTable::build(&a, &b)?;
    if opts.len && !opts.idx {
        return Ok(Reply::Int(table.at(a.len(), b.len()) as i64));
    }
    let (common, matches) = table.backtrack(&a, &b, opts.min_match_len);
    if !opts.idx {
        return Ok(Reply::Bulk(Bytes::from(common)));
    }
    let matches = matches
        .iter()
        .map(|m| m.reply(opts.with_match_len))
        .collect();
    Ok(Reply::Map(vec![
        (Reply::bulk_str("matches"), Reply::Array(matches)),
        (Reply::bulk_str("len"), Reply::Int(common.len() as i64)),
    ]))
}

/// One IDX match: inclusive byte ranges in each string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LcsMatch {
    a: (usize, usize),
    b: (usize, usize),
}

impl LcsMatch {
    fn len(&self) -> usize {
        self.a.1 - self.a.0 + 1
    }

    fn reply(&self, with_len: bool) -> Reply {
        let range =
            |(s, e): (usize, usize)| Reply::Array(vec![Reply::Int(s as i64), Reply::Int(e as i64)]);
        let mut r = vec![range(self.a), range(self.b)];
        if with_len {
            r.push(Reply::Int(self.len() as i64));
        }
        Reply::Array(r)
    }
}

/// The dynamic-programming table: cell (i, j) holds the LCS length of
/// a[..i] and b[..j].
struct LcsTable {
    cells: Vec<u32>,
    width: usize,
}

impl LcsTable {
    fn build(a: &[u8], b: &[u8]) -> Result<LcsTable, CmdError> {
        if a.len() as u64 >= u32::MAX as u64 - 1 || b.len() as u64 >= u32::MAX as u64 - 1 {
            return Err(CmdError::other("ERR String too long for LCS"));
        }
        let width = b.len() + 1;
        let n = (a.len() as u64 + 1) * width as u64;
        // Like Redis, bound the transient memory and fail softly when the
        // allocation is refused instead of aborting.
        if n * 4 > MAX_STRING_LEN {
            return Err(CmdError::other(
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
            ));
        }
        let mut cells = Vec::new();
        cells.try_reserve_exact(n as usize).map_err(|_| {
            CmdError::other("ERR Insufficient memory, failed allocating transient memory for LCS")
        })?;
        cells.resize(n as usize, 0);
        let mut t = LcsTable { cells, width };
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let v = if a[i - 1] == b[j - 1] {
                    t.at(i - 1, j - 1) + 1
                } else {
                    t.at(i - 1, j).max(t.at(i, j - 1))
                };
                t.cells[i * width + j] = v;
            }
        }
        Ok(t)
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// Walks back from the end as Redis's lcsCommand does, collecting the
    /// common string and the matched ranges (last match first) of at least
    /// `min_len` bytes (0: all).
    fn backtrack(&self, a: &[u8], b: &[u8], min_len: u64) -> (Vec<u8>, Vec<LcsMatch>) {
        let mut common = Vec::with_capacity(self.at(a.len(), b.len()) as usize);
        let mut matches = Vec::new();
        let mut current: Option<LcsMatch> = None;
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                common.push(a[i - 1]);
                match current.as_mut() {
                    None => {
                        current = Some(LcsMatch {
                            a: (i - 1, i - 1),
                            b: (j - 1, j - 1),
                        })
                    }
                    // Contiguous with the match in progress: extend it back.
                    Some(m) if m.a.0 == i && m.b.0 == j => {
                        m.a.0 -= 1;
                        m.b.0 -= 1;
                    }
                    Some(_) => emit = true,
                }
                if current.is_some_and(|m| m.a.0 == 0 || m.b.0 == 0) {
                    emit = true;
                }
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit = current.is_some();
            }
            if emit {
                if let Some(m) = current.take() {
                    if min_len == 0 || m.len() as u64 >= min_len {
                        matches.push(m);
                    }
                }
            }
        }
        common.reverse();
        (common, matches)
    }
}

// ---------------------------------------------------------------------------
// INCRBYFLOAT arithmetic
// ---------------------------------------------------------------------------

/// INCRBYFLOAT's number handling. Redis parses both operands with strtold,
/// adds them as x87 long doubles and prints the sum with "%.17Lf", trailing
/// zeros and dot trimmed. Plain f64 lacks those extra bits: 0.2 + 0.1 would
/// print as 0.30000000000000004 where Redis prints 0.3. So the sum is
/// computed exactly in decimal and rounded to 17 places, which is what the
/// long double gives whenever the result fits its ~19 significant digits.
/// The accepted range follows long double too (about ±1.19e4932, non-zero
/// values below ~3.6e-4951 underflow and are rejected like strtold's ERANGE).
pub(crate) mod float {
    use crate::error::CmdError;
    use std::cmp::Ordering;

    /// Redis's MAX_LONG_DOUBLE_CHARS: inputs this long or longer are refused.
    const MAX_INPUT_LEN: usize = 5 * 1024;
    /// "%.17Lf".
    const FRACTION_DIGITS: i64 = 17;
    /// Long double's largest finite value is 1.18973149535723176502e4932.
    const MAX_EXP10: i64 = 4932;
    const MAX_LEADING: [u8; 21] = [
        1, 1, 8, 9, 7, 3, 1, 4, 9, 5, 3, 5, 7, 2, 3, 1, 7, 6, 5, 0, 2,
    ];
    /// Below the smallest long double denormal (~3.6e-4951) strtold gives 0.
    const MIN_EXP10: i64 = -4951;
    /// Clamp for parsed exponents, far outside the range above.
    const EXP_CLAMP: i64 = 1_000_000_000_000_000;

    fn not_float() -> CmdError {
        CmdError::NotFloat
    }

    fn nan_or_inf() -> CmdError {
        CmdError::other("ERR increment would produce NaN or Infinity")
    }

    /// `current + incr` in Redis's text form. `current` is the stored
    /// string ("0" for a missing key); either operand may be invalid.
    pub fn add(current: &[u8], incr: &[u8]) -> Result<String, CmdError> {
        let a = parse(current)?;
        let b = parse(incr)?;
        let (Some(a), Some(b)) = (a, b) else {
            // An infinity in, an infinity or NaN out.
            return Err(nan_or_inf());
        };
        let sum = a.add(&b);
        if sum.exceeds_range() {
            return Err(nan_or_inf());
        }
        Ok(sum.round_fraction(FRACTION_DIGITS).to_plain_string())
    }

    /// A finite decimal: (-1)^neg × digits × 10^exp. Digits (0..=9) are most
    /// significant first without leading zeros; zero has none (and exp 0).
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Decimal {
        neg: bool,
        digits: Vec<u8>,
        exp: i64,
    }

    /// Parses strtold's decimal syntax: [+-] digits [. digits] [e [+-] digits],
    /// or [+-]inf / infinity (None). No spaces, no NaN, within long double's
    /// range. Hex floats, which strtold also reads, are read within a
    /// double's range (past it, refused: a long double reaches further).
    fn parse(s: &[u8]) -> Result<Option<Decimal>, CmdError> {
        if s.is_empty() || s.len() >= MAX_INPUT_LEN {
            return Err(not_float());
        }
        let unsigned = s.strip_prefix(b"-").or(s.strip_prefix(b"+")).unwrap_or(s);
        if unsigned.len() > 1 && unsigned[0] == b'0' && unsigned[1].eq_ignore_ascii_case(&b'x') {
            let v = std::str::from_utf8(s)
                .ok()
                .and_then(crate::args::parse_hex_float)
                .filter(|v| v.is_finite())
                .ok_or_else(not_float)?;
            // A double's exact decimal expansion has at most 767
            // significant digits.
            return parse(format!("{v:.800e}").as_bytes());
        }
        let (neg, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Ok(None);
        }
        let (mantissa, exponent) = match body.iter().position(|c| matches!(c, b'e' | b'E')) {
            Some(p) => (&body[..p], Some(&body[p + 1..])),
            None => (body, None),
        };
        let (digits, fraction_len) = parse_mantissa(mantissa)?;
        let exp10 = exponent.map_or(Ok(0), parse_exponent)?;
        let d = Decimal::new(neg, digits, exp10 - fraction_len);
        if d.exceeds_range() || (!d.digits.is_empty() && d.magnitude() < MIN_EXP10) {
            return Err(not_float());
        }
        Ok(Some(d))
    }

    /// Digits (leading zeros dropped) and how many followed the dot.
    fn parse_mantissa(m: &[u8]) -> Result<(Vec<u8>, i64), CmdError> {
        let mut digits = Vec::with_capacity(m.len());
        let mut fraction_len = 0;
        let mut seen_dot = false;
        let mut seen_digit = false;
        for &c in m {
            match c {
                b'0'..=b'9' => {
                    seen_digit = true;
                    if !(digits.is_empty() && c == b'0') {
                        digits.push(c - b'0');
                    }
                    fraction_len += seen_dot as i64;
                }
                b'.' if !seen_dot => seen_dot = true,
                _ => return Err(not_float()),
            }
        }
        if !seen_digit {
            return Err(not_float());
        }
        Ok((digits, fraction_len))
    }

    /// [+-] digits, clamped far beyond any representable exponent.
    fn parse_exponent(e: &[u8]) -> Result<i64, CmdError> {
        let (neg, digits) = match e.first() {
            Some(b'-') => (true, &e[1..]),
            Some(b'+') => (false, &e[1..]),
            _ => (false, e),
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return Err(not_float());
        }
        let v = digits
            .iter()
            .fold(0i64, |v, &c| (v * 10 + (c - b'0') as i64).min(EXP_CLAMP));
        Ok(if neg { -v } else { v })
    }

    impl Decimal {
        fn new(neg: bool, mut digits: Vec<u8>, exp: i64) -> Decimal {
            let zeros = digits.iter().take_while(|&&d| d == 0).count();
            digits.drain(..zeros);
            if digits.is_empty() {
                return Decimal {
                    neg: false,
                    digits,
                    exp: 0,
                };
            }
            Decimal { neg, digits, exp }
        }

        /// The power of ten of the most significant digit.
        fn magnitude(&self) -> i64 {
            self.exp.saturating_add(self.digits.len() as i64 - 1)
        }

        /// Beyond long double's largest finite value (an overflow to inf).
        fn exceeds_range(&self) -> bool {
            if self.digits.is_empty() {
                return false;
            }
            match self.magnitude().cmp(&MAX_EXP10) {
                Ordering::Greater => true,
                Ordering::Less => false,
                Ordering::Equal => {
                    let leading = self.digits.iter().copied().chain(std::iter::repeat(0));
                    leading.take(MAX_LEADING.len()).cmp(MAX_LEADING) == Ordering::Greater
                }
            }
        }

        /// The digits scaled to exponent `exp` (not above `self.exp`).
        fn scaled_to(&self, exp: i64) -> Vec<u8> {
            let mut d = self.digits.clone();
            if !d.is_empty() {
                d.resize(d.len() + (self.exp - exp) as usize, 0);
            }
            d
        }

        /// The exact sum. Exponents are bounded by the parse range, so the
        /// aligned digit strings stay around 10^4 digits at most.
        fn add(&self, other: &Decimal) -> Decimal {
            let exp = self.exp.min(other.exp);
            let (a, b) = (self.scaled_to(exp), other.scaled_to(exp));
            if self.neg == other.neg {
                return Decimal::new(self.neg, add_digits(&a, &b), exp);
            }
            match cmp_digits(&a, &b) {
                Ordering::Less => Decimal::new(other.neg, sub_digits(&b, &a), exp),
                _ => Decimal::new(self.neg, sub_digits(&a, &b), exp),
            }
        }

        /// Rounds to `places` digits after the point, ties to even, as
        /// printf does on an exactly representable value.
        fn round_fraction(self, places: i64) -> Decimal {
            let drop = -places - self.exp;
            if drop <= 0 {
                return self;
            }
            let drop = drop as usize;
            if drop > self.digits.len() {
                // Every digit lies below half a unit of the last place.
                return Decimal::new(false, Vec::new(), 0);
            }
            let keep = self.digits.len() - drop;
            let (kept, dropped) = self.digits.split_at(keep);
            let first = dropped[0];
            let rest_nonzero = dropped[1..].iter().any(|&d| d != 0);
            let odd = kept.last().is_some_and(|d| d % 2 == 1);
            let mut kept = kept.to_vec();
            if first > 5 || (first == 5 && (rest_nonzero || odd)) {
                kept = add_digits(&kept, &[1]);
            }
            Decimal::new(self.neg, kept, -places)
        }

        /// Fixed-point text without exponent, trailing fraction zeros, a
        /// bare dot or a negative zero.
        fn to_plain_string(&self) -> String {
            if self.digits.is_empty() {
                return "0".to_string();
            }
            let text = |d: &[u8]| d.iter().map(|&x| char::from(b'0' + x)).collect::<String>();
            let mut out = String::new();
            if self.neg {
                out.push('-');
            }
            if self.exp >= 0 {
                out.push_str(&text(&self.digits));
                out.push_str(&"0".repeat(self.exp as usize));
                return out;
            }
            let fraction_len = (-self.exp) as usize;
            let len = self.digits.len();
            let (int_part, mut fraction) = if len > fraction_len {
                let (i, f) = self.digits.split_at(len - fraction_len);
                (text(i), text(f))
            } else {
                (
                    "0".to_string(),
                    "0".repeat(fraction_len - len) + &text(&self.digits),
                )
            };
            out.push_str(&int_part);
            fraction.truncate(fraction.trim_end_matches('0').len());
            if !fraction.is_empty() {
                out.push('.');
                out.push_str(&fraction);
            }
            out
        }
    }

    fn digit_from_right(d: &[u8], k: usize) -> u8 {
        if k < d.len() {
            d[d.len() - 1 - k]
        } else {
            0
        }
    }

    fn add_digits(a: &[u8], b: &[u8]) -> Vec<u8> {
        let n = a.len().max(b.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0;
        for k in 0..n {
            let s = digit_from_right(a, k) + digit_from_right(b, k) + carry;
            out.push(s % 10);
            carry = s / 10;
        }
        if carry > 0 {
            out.push(carry);
        }
        out.reverse();
        out
    }

    /// `a - b` for `a >= b`.
    fn sub_digits(a: &[u8], b: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(a.len());
        let mut borrow = 0;
        for k in 0..a.len() {
            let (x, y) = (digit_from_right(a, k), digit_from_right(b, k) + borrow);
            if x >= y {
                out.push(x - y);
                borrow = 0;
            } else {
                out.push(x + 10 - y);
                borrow = 1;
            }
        }
        out.reverse();
        out
    }

    /// Compares magnitudes of digit strings without leading zeros.
    fn cmp_digits(a: &[u8], b: &[u8]) -> Ordering {
        a.len().cmp(&b.len()).then_with(|| a.cmp(b))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn sum(a: &str, b: &str) -> Result<String, String> {
            add(a.as_bytes(), b.as_bytes()).map_err(|e| e.text().into_owned())
        }

        #[test]
        fn formats_like_redis() {
            assert_eq!(sum("10.50", "0.1"), Ok("10.6".into()));
            assert_eq!(sum("5.0e3", "2.0e2"), Ok("5200".into()));
            assert_eq!(sum("10", "3.0e3"), Ok("3010".into()));
            assert_eq!(sum("0.2", "0.1"), Ok("0.3".into()));
            assert_eq!(sum("1", "-1.1"), Ok("-0.1".into()));
            assert_eq!(sum("17179869184", "1.5"), Ok("17179869185.5".into()));
            assert_eq!(sum("0", "1e-17"), Ok("0.00000000000000001".into()));
            assert_eq!(sum("0", "-1e-20"), Ok("0".into()));
            assert_eq!(sum("0", "1e20"), Ok("100000000000000000000".into()));
            assert_eq!(
                sum("0.024390243902439025", "-0.024390243902439025"),
                Ok("0".into())
            );
            assert_eq!(sum("+.5", "5."), Ok("5.5".into()));
            assert_eq!(sum("0", "0e-999999999999999999999"), Ok("0".into()));
        }

        #[test]
        fn rounds_half_to_even_at_17_places() {
            // 2^-18 is exact in binary and ends in 5 at the 18th place.
            assert_eq!(
                sum("0", "0.000003814697265625"),
                Ok("0.00000381469726562".into())
            );
            assert_eq!(
                sum("0", "0.000000000000000015"),
                Ok("0.00000000000000002".into())
            );
            assert_eq!(
                sum("0", "0.0000000000000000151"),
                Ok("0.00000000000000002".into())
            );
            assert_eq!(
                sum("0.99999999999999999", "0.000000000000000009"),
                Ok("1".into())
            );
            assert_eq!(sum("0", "0.000000000000000005"), Ok("0".into()));
        }

        #[test]
        fn rejects_what_strtold_rejects() {
            let bad = "ERR value is not a valid float";
            for s in [
                "", " 1", "1 ", "abc", "1e", "1e+", ".", "-", "nan", "1.2.3", "0xg", "0x",
                "1e4933", "1e-5000",
            ] {
                assert_eq!(sum("0", s), Err(bad.to_string()), "{s:?}");
                assert_eq!(sum(s, "1"), Err(bad.to_string()), "{s:?}");
            }
            // strtold reads hexadecimal floats.
            assert_eq!(sum("0x10", "-0x1p-2"), Ok("15.75".into()));
            assert_eq!(sum("0", "0x1p-60"), Ok("0".into()));
            assert_eq!(sum("0", &"1".repeat(5120)), Err(bad.to_string()));
        }

        #[test]
        fn infinities_and_overflow() {
            let e = "ERR increment would produce NaN or Infinity";
            assert_eq!(sum("0", "+inf"), Err(e.to_string()));
            assert_eq!(sum("inf", "-Infinity"), Err(e.to_string()));
            assert_eq!(sum("1.1e4932", "1.1e4932"), Err(e.to_string()));
            assert!(sum("1e4000", "1e4000").is_ok_and(|s| s.len() == 4001 && s.starts_with('2')));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000;

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    fn ctx(now_ms: u64) -> Ctx {
        Ctx { now_ms, seed: 7 }
    }

    /// Runs a command through `Store::apply` at `now_ms`.
    fn at(s: &mut Store, now_ms: u64, a: &[&str]) -> Result<Reply, String> {
        s.apply(0, &args(a), &ctx(now_ms))
            .map_err(|e| e.text().into_owned())
    }

    fn run(s: &mut Store, a: &[&str]) -> Result<Reply, String> {
        at(s, T0, a)
    }

    /// Runs a read-only command through `Store::read` at `now_ms`.
    fn read_at(s: &Store, now_ms: u64, a: &[&str]) -> Result<Reply, String> {
        s.read(0, &args(a), &ctx(now_ms))
            .map_err(|e| e.text().into_owned())
    }

    fn read(s: &Store, a: &[&str]) -> Result<Reply, String> {
        read_at(s, T0, a)
    }

    fn bulk(s: &str) -> Result<Reply, String> {
        Ok(Reply::Bulk(Bytes::from(s.to_string())))
    }

    fn int(n: i64) -> Result<Reply, String> {
        Ok(Reply::Int(n))
    }

    fn ok() -> Result<Reply, String> {
        Ok(Reply::ok())
    }

    fn nil() -> Result<Reply, String> {
        Ok(Reply::Nil)
    }

    fn err(text: &str) -> Result<Reply, String> {
        Err(text.to_string())
    }

    fn ttl(s: &Store, key: &str) -> Option<u64> {
        s.db(0).get(key.as_bytes()).and_then(|e| e.expire_at())
    }

    fn exists(s: &Store, key: &str) -> bool {
        s.db(0).get(key.as_bytes()).is_some()
    }

    const NOT_INT: &str = "ERR value is not an integer or out of range";
    const SYNTAX: &str = "ERR syntax error";

    #[test]
    fn table_entries_match_redis() {
        let spec = |n: &str| {
            crate::table::lookup(n.as_bytes()).map(|c| (c.arity, c.first_key, c.last_key, c.step))
        };
        assert_eq!(spec("mset"), Some((-3, 1, -1, 2)));
        assert_eq!(spec("msetnx"), Some((-3, 1, -1, 2)));
        assert_eq!(spec("mget"), Some((-2, 1, -1, 1)));
        assert_eq!(spec("lcs"), Some((-3, 1, 2, 1)));
        assert_eq!(spec("getex"), Some((-2, 1, 1, 1)));
        assert_eq!(spec("setrange"), Some((4, 1, 1, 1)));
        let flags = |n: &str| crate::table::lookup(n.as_bytes()).map(|c| c.flags.names());
        assert_eq!(flags("mset"), Some(vec!["write", "denyoom"]));
        assert_eq!(flags("mget"), Some(vec!["readonly", "fast"]));
        assert_eq!(flags("getdel"), Some(vec!["write", "fast"]));
        assert_eq!(flags("incr"), Some(vec!["write", "denyoom", "fast"]));
        assert_eq!(flags("getrange"), Some(vec!["readonly"]));
    }

    #[test]
    fn get_and_set_basics() {
        let mut s = Store::default();
        assert_eq!(read(&s, &["get", "k"]), nil());
        assert_eq!(run(&mut s, &["set", "k", "v"]), ok());
        assert_eq!(read(&s, &["GET", "k"]), bulk("v"));
        assert_eq!(run(&mut s, &["set", "n", "123"]), ok());
        assert_eq!(
            s.db(0).get(b"n").map(|e| e.value.clone()),
            Some(Value::Int(123))
        );
        assert_eq!(read(&s, &["get", "n"]), bulk("123"));
        assert_eq!(
            run(&mut s, &["set", "k"]),
            err("ERR wrong number of arguments for 'set' command")
        );
    }

    #[test]
    fn set_nx_xx_get() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["set", "k", "a", "XX"]), nil());
        assert!(!exists(&s, "k"));
        assert_eq!(run(&mut s, &["set", "k", "a", "nx"]), ok());
        assert_eq!(run(&mut s, &["set", "k", "b", "NX"]), nil());
        assert_eq!(run(&mut s, &["set", "k", "b", "XX", "GET"]), bulk("a"));
        assert_eq!(run(&mut s, &["set", "k", "c", "NX", "GET"]), bulk("b"));
        assert_eq!(read(&s, &["get", "k"]), bulk("b"));
        assert_eq!(run(&mut s, &["set", "new", "x", "GET"]), nil());
        assert_eq!(read(&s, &["get", "new"]), bulk("x"));
        assert_eq!(run(&mut s, &["set", "k", "c", "NX", "XX"]), err(SYNTAX));
        assert_eq!(run(&mut s, &["set", "k", "c", "XX", "NX"]), err(SYNTAX));
        assert_eq!(run(&mut s, &["set", "k", "c", "NX", "NX"]), nil());
        assert_eq!(run(&mut s, &["set", "k", "c", "bogus"]), err(SYNTAX));
    }

    #[test]
    fn set_expiry_options() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["set", "k", "v", "EX", "10"]), ok());
        assert_eq!(ttl(&s, "k"), Some(T0 + 10_000));
        assert_eq!(run(&mut s, &["set", "k", "v", "px", "1500"]), ok());
        assert_eq!(ttl(&s, "k"), Some(T0 + 1500));
        assert_eq!(run(&mut s, &["set", "k", "v", "EXAT", "1800000000"]), ok());
        assert_eq!(ttl(&s, "k"), Some(1_800_000_000_000));
        assert_eq!(
            run(&mut s, &["set", "k", "v", "PXAT", "1800000000123"]),
            ok()
        );
        assert_eq!(ttl(&s, "k"), Some(1_800_000_000_123));
        // The same option twice: the last value wins, as in Redis.
        assert_eq!(run(&mut s, &["set", "k", "v", "EX", "1", "EX", "2"]), ok());
        assert_eq!(ttl(&s, "k"), Some(T0 + 2000));
        assert_eq!(run(&mut s, &["set", "k", "v2", "KEEPTTL"]), ok());
        assert_eq!(ttl(&s, "k"), Some(T0 + 2000));
        assert_eq!(run(&mut s, &["set", "k", "v3"]), ok());
        assert_eq!(ttl(&s, "k"), None);

        for bad in [
            vec!["set", "k", "v", "EX", "1", "PX", "1"],
            vec!["set", "k", "v", "EX", "1", "KEEPTTL"],
            vec!["set", "k", "v", "KEEPTTL", "PXAT", "1"],
            vec!["set", "k", "v", "EX"],
            vec!["set", "k", "v", "PERSIST"],
        ] {
            assert_eq!(run(&mut s, &bad), err(SYNTAX), "{bad:?}");
        }
        let invalid = "ERR invalid expire time in 'set' command";
        assert_eq!(run(&mut s, &["set", "k", "v", "EX", "0"]), err(invalid));
        assert_eq!(run(&mut s, &["set", "k", "v", "PX", "-5"]), err(invalid));
        assert_eq!(
            run(&mut s, &["set", "k", "v", "EX", "9223372036854776"]),
            err(invalid)
        );
        assert_eq!(
            run(&mut s, &["set", "k", "v", "PX", "9223372036854775807"]),
            err(invalid)
        );
        assert_eq!(run(&mut s, &["set", "k", "v", "EX", "1.5"]), err(NOT_INT));
        assert_eq!(read(&s, &["get", "k"]), bulk("v3"));
    }

    #[test]
    fn expired_keys_read_as_missing_and_writes_replace_them() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["set", "k", "old", "PX", "100"]), ok());
        assert_eq!(read_at(&s, T0 + 99, &["get", "k"]), bulk("old"));
        assert_eq!(read_at(&s, T0 + 100, &["get", "k"]), nil());
        assert!(exists(&s, "k"), "reads never remove");
        assert_eq!(
            at(&mut s, T0 + 100, &["set", "k", "new", "NX", "GET"]),
            nil()
        );
        assert_eq!(ttl(&s, "k"), None);
        assert_eq!(read_at(&s, T0 + 100, &["get", "k"]), bulk("new"));
        // An absolute time in the past stores a key that is already gone.
        assert_eq!(run(&mut s, &["set", "p", "v", "PXAT", "1"]), ok());
        assert_eq!(read(&s, &["get", "p"]), nil());
    }

    #[test]
    fn setnx_setex_psetex() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["setnx", "k", "a"]), int(1));
        assert_eq!(run(&mut s, &["setnx", "k", "b"]), int(0));
        assert_eq!(read(&s, &["get", "k"]), bulk("a"));
        assert_eq!(run(&mut s, &["setex", "k", "5", "b"]), ok());
        assert_eq!(ttl(&s, "k"), Some(T0 + 5000));
        assert_eq!(read(&s, &["get", "k"]), bulk("b"));
        assert_eq!(run(&mut s, &["psetex", "k", "5", "c"]), ok());
        assert_eq!(ttl(&s, "k"), Some(T0 + 5));
        assert_eq!(at(&mut s, T0 + 5, &["setnx", "k", "d"]), int(1));
        assert_eq!(ttl(&s, "k"), None);
        assert_eq!(
            run(&mut s, &["setex", "k", "0", "v"]),
            err("ERR invalid expire time in 'setex' command")
        );
        assert_eq!(
            run(&mut s, &["setex", "k", "-1", "v"]),
            err("ERR invalid expire time in 'setex' command")
        );
        assert_eq!(
            run(&mut s, &["psetex", "k", "0", "v"]),
            err("ERR invalid expire time in 'psetex' command")
        );
        assert_eq!(run(&mut s, &["setex", "k", "x", "v"]), err(NOT_INT));
        assert_eq!(read(&s, &["get", "k"]), bulk("d"));
    }

    #[test]
    fn getset_getdel() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["getset", "k", "a"]), nil());
        assert_eq!(run(&mut s, &["set", "k", "b", "EX", "100"]), ok());
        assert_eq!(run(&mut s, &["getset", "k", "c"]), bulk("b"));
        assert_eq!(ttl(&s, "k"), None, "GETSET clears the TTL");
        assert_eq!(run(&mut s, &["getdel", "k"]), bulk("c"));
        assert!(!exists(&s, "k"));
        assert_eq!(run(&mut s, &["getdel", "k"]), nil());
        assert_eq!(run(&mut s, &["set", "n", "42"]), ok());
        assert_eq!(run(&mut s, &["getdel", "n"]), bulk("42"));
    }

    #[test]
    fn getex_options() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["getex", "missing", "EX", "0"]), nil());
        assert_eq!(run(&mut s, &["getex", "missing", "FOO"]), err(SYNTAX));
        assert_eq!(run(&mut s, &["set", "k", "v"]), ok());
        assert_eq!(run(&mut s, &["getex", "k"]), bulk("v"));
        assert_eq!(run(&mut s, &["getex", "k", "EX", "10"]), bulk("v"));
        assert_eq!(ttl(&s, "k"), Some(T0 + 10_000));
        assert_eq!(run(&mut s, &["getex", "k"]), bulk("v"));
        assert_eq!(ttl(&s, "k"), Some(T0 + 10_000));
        assert_eq!(run(&mut s, &["getex", "k", "PX", "20"]), bulk("v"));
        assert_eq!(ttl(&s, "k"), Some(T0 + 20));
        assert_eq!(run(&mut s, &["getex", "k", "PERSIST"]), bulk("v"));
        assert_eq!(ttl(&s, "k"), None);
        assert_eq!(
            run(&mut s, &["getex", "k", "EXAT", "1800000000"]),
            bulk("v")
        );
        assert_eq!(ttl(&s, "k"), Some(1_800_000_000_000));
        assert_eq!(
            run(&mut s, &["getex", "k", "PXAT", "1800000000001"]),
            bulk("v")
        );
        assert_eq!(ttl(&s, "k"), Some(1_800_000_000_001));
        // An absolute time already past deletes the key after replying.
        assert_eq!(
            run(&mut s, &["getex", "k", "PXAT", &T0.to_string()]),
            bulk("v")
        );
        assert!(!exists(&s, "k"));

        assert_eq!(run(&mut s, &["set", "k", "v"]), ok());
        for bad in [
            vec!["getex", "k", "NX"],
            vec!["getex", "k", "KEEPTTL"],
            vec!["getex", "k", "GET"],
            vec!["getex", "k", "EX", "1", "PERSIST"],
            vec!["getex", "k", "PERSIST", "EX", "1"],
            vec!["getex", "k", "PX"],
        ] {
            assert_eq!(run(&mut s, &bad), err(SYNTAX), "{bad:?}");
        }
        assert_eq!(
            run(&mut s, &["getex", "k", "EX", "-1"]),
            err("ERR invalid expire time in 'getex' command")
        );
        assert_eq!(run(&mut s, &["getex", "k", "PX", "x"]), err(NOT_INT));
        assert_eq!(ttl(&s, "k"), None);
        // Expired at the command's time: nil, and the key is removed.
        assert_eq!(run(&mut s, &["set", "e", "v", "PX", "10"]), ok());
        assert_eq!(at(&mut s, T0 + 10, &["getex", "e", "PERSIST"]), nil());
        assert!(!exists(&s, "e"));
    }

    #[test]
    fn mget_mset_msetnx() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["mset", "a", "1", "b", "x", "a", "2"]), ok());
        assert_eq!(
            read(&s, &["mget", "a", "b", "c"]),
            Ok(Reply::Array(vec![
                Reply::Bulk("2".into()),
                Reply::Bulk("x".into()),
                Reply::Nil
            ]))
        );
        assert_eq!(
            run(&mut s, &["mset", "a", "1", "b"]),
            err("ERR wrong number of arguments for 'mset' command")
        );
        assert_eq!(
            run(&mut s, &["msetnx", "a", "1", "b"]),
            err("ERR wrong number of arguments for 'msetnx' command")
        );
        assert_eq!(
            run(&mut s, &["mset", "a"]),
            err("ERR wrong number of arguments for 'mset' command")
        );
        assert_eq!(run(&mut s, &["msetnx", "c", "1", "a", "9"]), int(0));
        assert!(!exists(&s, "c"), "MSETNX sets nothing when one key exists");
        assert_eq!(run(&mut s, &["msetnx", "c", "1", "d", "2"]), int(1));
        assert_eq!(
            read(&s, &["mget", "c", "d"]),
            Ok(Reply::Array(vec![
                Reply::Bulk("1".into()),
                Reply::Bulk("2".into())
            ]))
        );
        // MSET clears TTLs; MSETNX treats an expired key as missing.
        assert_eq!(run(&mut s, &["set", "t", "v", "PX", "5"]), ok());
        assert_eq!(run(&mut s, &["mset", "t", "w"]), ok());
        assert_eq!(ttl(&s, "t"), None);
        assert_eq!(run(&mut s, &["set", "t", "v", "PX", "5"]), ok());
        assert_eq!(at(&mut s, T0 + 5, &["msetnx", "t", "new"]), int(1));
        assert_eq!(read_at(&s, T0 + 5, &["get", "t"]), bulk("new"));
    }

    #[test]
    fn append_and_strlen() {
        let mut s = Store::default();
        assert_eq!(read(&s, &["strlen", "k"]), int(0));
        assert_eq!(run(&mut s, &["append", "k", "12"]), int(2));
        assert_eq!(run(&mut s, &["append", "k", "34"]), int(4));
        assert_eq!(read(&s, &["get", "k"]), bulk("1234"));
        assert_eq!(read(&s, &["strlen", "k"]), int(4));
        assert_eq!(run(&mut s, &["set", "n", "-15"]), ok());
        assert_eq!(read(&s, &["strlen", "n"]), int(3));
        assert_eq!(run(&mut s, &["append", "n", "x"]), int(4));
        assert_eq!(read(&s, &["get", "n"]), bulk("-15x"));
        // APPEND keeps the TTL; an empty append on a missing key creates it.
        assert_eq!(run(&mut s, &["set", "t", "a", "EX", "9"]), ok());
        assert_eq!(run(&mut s, &["append", "t", "b"]), int(2));
        assert_eq!(ttl(&s, "t"), Some(T0 + 9000));
        assert_eq!(run(&mut s, &["append", "e", ""]), int(0));
        assert!(exists(&s, "e"));
        // An expired key is replaced, not appended to.
        assert_eq!(at(&mut s, T0 + 9000, &["append", "t", "z"]), int(1));
        assert_eq!(ttl(&s, "t"), None);
    }

    #[test]
    fn string_length_limit() {
        assert_eq!(
            check_string_length(MAX_STRING_LEN),
            Ok(MAX_STRING_LEN as usize)
        );
        assert_eq!(
            check_string_length(MAX_STRING_LEN + 1).map_err(|e| e.text().into_owned()),
            Err("ERR string exceeds maximum allowed size (proto-max-bulk-len)".to_string())
        );
    }

    #[test]
    fn getrange_index_rules() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["set", "k", "This is a string"]), ok());
        let cases: &[(&str, &str, &str)] = &[
            ("0", "3", "This"),
            ("-3", "-1", "ing"),
            ("0", "-1", "This is a string"),
            ("10", "100", "string"),
            ("-100", "3", "This"),
            ("-1", "-3", ""),
            ("5", "3", ""),
            ("16", "20", ""),
            ("-100", "-50", "T"),
            ("0", "0", "T"),
            (
                "-9223372036854775808",
                "9223372036854775807",
                "This is a string",
            ),
        ];
        for (start, end, want) in cases {
            assert_eq!(
                read(&s, &["getrange", "k", start, end]),
                bulk(want),
                "{start} {end}"
            );
        }
        assert_eq!(read(&s, &["substr", "k", "-6", "-1"]), bulk("string"));
        assert_eq!(read(&s, &["getrange", "missing", "0", "-1"]), bulk(""));
        assert_eq!(read(&s, &["getrange", "k", "a", "1"]), err(NOT_INT));
        assert_eq!(read(&s, &["getrange", "missing", "0", "1.5"]), err(NOT_INT));
        assert_eq!(run(&mut s, &["set", "n", "12345"]), ok());
        assert_eq!(read(&s, &["getrange", "n", "1", "-2"]), bulk("234"));
        assert_eq!(run(&mut s, &["set", "e", ""]), ok());
        assert_eq!(read(&s, &["getrange", "e", "0", "-1"]), bulk(""));
    }

    #[test]
    fn setrange_rules() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["setrange", "k", "0", ""]), int(0));
        assert!(
            !exists(&s, "k"),
            "empty SETRANGE on a missing key creates nothing"
        );
        assert_eq!(run(&mut s, &["setrange", "k", "3", "ab"]), int(5));
        assert_eq!(
            read(&s, &["get", "k"]),
            Ok(Reply::Bulk(Bytes::from_static(b"\0\0\0ab")))
        );
        assert_eq!(run(&mut s, &["set", "k", "Hello World", "EX", "50"]), ok());
        assert_eq!(run(&mut s, &["setrange", "k", "6", "Redis"]), int(11));
        assert_eq!(read(&s, &["get", "k"]), bulk("Hello Redis"));
        assert_eq!(ttl(&s, "k"), Some(T0 + 50_000), "SETRANGE keeps the TTL");
        assert_eq!(run(&mut s, &["setrange", "k", "13", "!"]), int(14));
        assert_eq!(
            read(&s, &["get", "k"]),
            Ok(Reply::Bulk(Bytes::from_static(b"Hello Redis\0\0!")))
        );
        assert_eq!(run(&mut s, &["setrange", "k", "100", ""]), int(14));
        assert_eq!(run(&mut s, &["set", "n", "1234"]), ok());
        assert_eq!(run(&mut s, &["setrange", "n", "1", "x"]), int(4));
        assert_eq!(read(&s, &["get", "n"]), bulk("1x34"));

        assert_eq!(
            run(&mut s, &["setrange", "k", "-1", "x"]),
            err("ERR offset is out of range")
        );
        assert_eq!(run(&mut s, &["setrange", "k", "x", "x"]), err(NOT_INT));
        let too_big = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
        assert_eq!(
            run(&mut s, &["setrange", "k", "536870912", "x"]),
            err(too_big)
        );
        assert_eq!(
            run(&mut s, &["setrange", "new", "536870912", "x"]),
            err(too_big)
        );
        assert_eq!(
            run(&mut s, &["setrange", "new", "9223372036854775807", "x"]),
            err(too_big)
        );
        assert_eq!(run(&mut s, &["setrange", "new", "536870912", ""]), int(0));
        assert!(!exists(&s, "new"));
    }

    #[test]
    fn incr_decr_family() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["incr", "c"]), int(1));
        assert_eq!(run(&mut s, &["incrby", "c", "10"]), int(11));
        assert_eq!(run(&mut s, &["decr", "c"]), int(10));
        assert_eq!(run(&mut s, &["decrby", "c", "-5"]), int(15));
        assert_eq!(run(&mut s, &["decrby", "c", "20"]), int(-5));
        assert_eq!(read(&s, &["get", "c"]), bulk("-5"));
        assert_eq!(run(&mut s, &["decr", "fresh"]), int(-1));
        assert_eq!(
            s.db(0).get(b"c").map(|e| e.value.clone()),
            Some(Value::Int(-5))
        );

        assert_eq!(run(&mut s, &["set", "s", "41"]), ok());
        assert_eq!(run(&mut s, &["append", "s", "0"]), int(3));
        assert_eq!(
            run(&mut s, &["incr", "s"]),
            int(411),
            "raw digits still count"
        );
        for bad in [
            "abc",
            " 1",
            "1 ",
            "1.0",
            "+1",
            "01",
            "9223372036854775808",
            "",
        ] {
            assert_eq!(run(&mut s, &["set", "b", bad]), ok());
            assert_eq!(run(&mut s, &["incr", "b"]), err(NOT_INT), "{bad:?}");
            assert_eq!(read(&s, &["get", "b"]), bulk(bad));
        }
        assert_eq!(run(&mut s, &["incrby", "c", "1.5"]), err(NOT_INT));
        assert_eq!(run(&mut s, &["decrby", "c", "x"]), err(NOT_INT));
        assert_eq!(
            run(&mut s, &["incrby", "c", "9223372036854775808"]),
            err(NOT_INT)
        );
    }

    #[test]
    fn counter_overflow_edges() {
        let mut s = Store::default();
        let overflow = "ERR increment or decrement would overflow";
        assert_eq!(run(&mut s, &["set", "max", "9223372036854775807"]), ok());
        assert_eq!(run(&mut s, &["incr", "max"]), err(overflow));
        assert_eq!(run(&mut s, &["incrby", "max", "0"]), int(i64::MAX));
        assert_eq!(run(&mut s, &["decrby", "max", "-1"]), err(overflow));
        assert_eq!(run(&mut s, &["set", "min", "-9223372036854775808"]), ok());
        assert_eq!(run(&mut s, &["decr", "min"]), err(overflow));
        assert_eq!(run(&mut s, &["incrby", "min", "-1"]), err(overflow));
        assert_eq!(
            run(&mut s, &["incrby", "zero", "-9223372036854775808"]),
            int(i64::MIN)
        );
        assert_eq!(
            run(&mut s, &["decrby", "zero", "-9223372036854775808"]),
            err("ERR decrement would overflow")
        );
        assert_eq!(
            run(&mut s, &["decrby", "max", "9223372036854775807"]),
            int(0)
        );
        assert_eq!(read(&s, &["get", "min"]), bulk("-9223372036854775808"));
    }

    #[test]
    fn counters_keep_ttl_and_respect_expiry() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["set", "c", "5", "EX", "10"]), ok());
        assert_eq!(run(&mut s, &["incr", "c"]), int(6));
        assert_eq!(ttl(&s, "c"), Some(T0 + 10_000));
        assert_eq!(run(&mut s, &["incrbyfloat", "c", "0.5"]), bulk("6.5"));
        assert_eq!(ttl(&s, "c"), Some(T0 + 10_000));
        // Once expired the counter starts over from 0, without a TTL.
        assert_eq!(at(&mut s, T0 + 10_000, &["incrby", "c", "3"]), int(3));
        assert_eq!(ttl(&s, "c"), None);
        assert_eq!(run(&mut s, &["set", "f", "1.5", "PX", "1"]), ok());
        assert_eq!(at(&mut s, T0 + 1, &["incrbyfloat", "f", "1"]), bulk("1"));
        assert_eq!(ttl(&s, "f"), None);
    }

    #[test]
    fn incrbyfloat_replies() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["incrbyfloat", "f", "1"]), bulk("1"));
        assert_eq!(run(&mut s, &["incrbyfloat", "f", "0.25"]), bulk("1.25"));
        assert_eq!(read(&s, &["get", "f"]), bulk("1.25"));
        assert_eq!(run(&mut s, &["set", "f", "10.50"]), ok());
        assert_eq!(run(&mut s, &["incrbyfloat", "f", "0.1"]), bulk("10.6"));
        assert_eq!(run(&mut s, &["incrbyfloat", "f", "-5"]), bulk("5.6"));
        assert_eq!(run(&mut s, &["set", "f", "5.0e3"]), ok());
        assert_eq!(run(&mut s, &["incrbyfloat", "f", "2.0e2"]), bulk("5200"));
        assert_eq!(
            s.db(0).get(b"f").map(|e| e.value.clone()),
            Some(Value::Int(5200))
        );
        assert_eq!(run(&mut s, &["set", "f", "10"]), ok());
        assert_eq!(run(&mut s, &["incrbyfloat", "f", "3.0e3"]), bulk("3010"));
        assert_eq!(run(&mut s, &["set", "f", "17179869184"]), ok());
        assert_eq!(
            run(&mut s, &["incrbyfloat", "f", "17179869184"]),
            bulk("34359738368")
        );
        for want in ["0.1", "0.2", "0.3", "0.4"] {
            assert_eq!(run(&mut s, &["incrbyfloat", "tenth", "0.1"]), bulk(want));
        }
        assert_eq!(run(&mut s, &["incrbyfloat", "z", "-0.0"]), bulk("0"));

        let not_float = "ERR value is not a valid float";
        assert_eq!(run(&mut s, &["set", "sp", "    11"]), ok());
        assert_eq!(run(&mut s, &["incrbyfloat", "sp", "1.0"]), err(not_float));
        assert_eq!(run(&mut s, &["incrbyfloat", "f", "abc"]), err(not_float));
        assert_eq!(run(&mut s, &["incrbyfloat", "f", "nan"]), err(not_float));
        assert_eq!(run(&mut s, &["set", "nul", "1"]), ok());
        assert_eq!(run(&mut s, &["setrange", "nul", "2", "2"]), int(3));
        assert_eq!(run(&mut s, &["incrbyfloat", "nul", "1"]), err(not_float));
        let nan_inf = "ERR increment would produce NaN or Infinity";
        assert_eq!(run(&mut s, &["incrbyfloat", "f", "+inf"]), err(nan_inf));
        assert_eq!(run(&mut s, &["set", "i", "inf"]), ok());
        assert_eq!(run(&mut s, &["incrbyfloat", "i", "-inf"]), err(nan_inf));
        assert_eq!(read(&s, &["get", "f"]), bulk("34359738368"));
    }

    #[test]
    fn lcs_variants() {
        let mut s = Store::default();
        assert_eq!(
            run(&mut s, &["mset", "key1", "ohmytext", "key2", "mynewtext"]),
            ok()
        );
        assert_eq!(read(&s, &["lcs", "key1", "key2"]), bulk("mytext"));
        assert_eq!(read(&s, &["lcs", "key1", "key2", "LEN"]), int(6));
        let range = |a: i64, b: i64| Reply::Array(vec![Reply::Int(a), Reply::Int(b)]);
        let idx = |matches: Vec<Reply>| {
            Ok(Reply::Map(vec![
                (Reply::bulk_str("matches"), Reply::Array(matches)),
                (Reply::bulk_str("len"), Reply::Int(6)),
            ]))
        };
        assert_eq!(
            read(&s, &["lcs", "key1", "key2", "IDX"]),
            idx(vec![
                Reply::Array(vec![range(4, 7), range(5, 8)]),
                Reply::Array(vec![range(2, 3), range(0, 1)]),
            ])
        );
        assert_eq!(
            read(
                &s,
                &[
                    "lcs",
                    "key1",
                    "key2",
                    "idx",
                    "minmatchlen",
                    "4",
                    "withmatchlen"
                ]
            ),
            idx(vec![Reply::Array(vec![
                range(4, 7),
                range(5, 8),
                Reply::Int(4)
            ])])
        );
        assert_eq!(read(&s, &["lcs", "key1", "missing"]), bulk(""));
        assert_eq!(read(&s, &["lcs", "missing", "key2", "LEN"]), int(0));
        assert_eq!(
            read(&s, &["lcs", "key1", "key2", "LEN", "IDX"]),
            err("ERR If you want both the length and indexes, please just use IDX.")
        );
        assert_eq!(
            read(&s, &["lcs", "key1", "key2", "MINMATCHLEN"]),
            err(SYNTAX)
        );
        assert_eq!(
            read(&s, &["lcs", "key1", "key2", "MINMATCHLEN", "x"]),
            err(NOT_INT)
        );
        assert_eq!(
            read(&s, &["lcs", "key1"]),
            err("ERR wrong number of arguments for 'lcs' command")
        );
    }

    #[test]
    fn substring_never_panics() {
        let s = b"abc";
        let edges = [i64::MIN, -4, -3, -1, 0, 1, 2, 3, 4, i64::MAX];
        for &a in &edges {
            for &b in &edges {
                let got = substring(s, a, b);
                assert!(got.len() <= 3, "{a} {b}");
            }
            assert!(substring(b"", a, a).is_empty());
        }
    }
}
