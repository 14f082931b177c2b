//! Generic key commands: DEL, EXISTS, TYPE, RENAME, COPY, the expiry
//! family, KEYS, SCAN, RANDOMKEY and OBJECT, with Redis 7.0 replies.
//!
//! Writes expire the keys they touch lazily first (`Store::expire_if_needed`
//! at `ctx.now_ms`); reads see expired keys as missing and change nothing.

use crate::args::{eq_ic, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::glob;
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags, Handler};
use bytes::Bytes;
use kvasir_engine_memory::{Db, Entry, Value};
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
    cmd("del", -2, W, ALL_KEYS, ACL_WS, G, "1.0.0", "Deletes one or more keys.", Handler::Write(del)),
    cmd("unlink", -2, WF, ALL_KEYS, ACL_WF, G, "4.0.0", "Asynchronously deletes one or more keys.", Handler::Write(del)),
    cmd("exists", -2, RF, ALL_KEYS, ACL_RF, G, "1.0.0", "Determines whether one or more keys exist.", Handler::Read(exists)),
    cmd("touch", -2, RF, ALL_KEYS, ACL_RF, G, "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", Handler::Read(exists)),
    cmd("type", 2, RF, KEY, ACL_RF, G, "1.0.0", "Determines the type of value stored at a key.", Handler::Read(type_of)),
    cmd("rename", 3, W, TWO_KEYS, ACL_WS, G, "1.0.0", "Renames a key and overwrites the destination.", Handler::Write(rename)),
    cmd("renamenx", 3, WF, TWO_KEYS, ACL_WF, G, "1.0.0", "Renames a key only when the target key name doesn't exist.", Handler::Write(renamenx)),
    cmd("copy", -3, W.union(Flags::DENYOOM), TWO_KEYS, ACL_WS, G, "6.2.0", "Copies the value of a key to a new key.", Handler::Write(copy)),
    cmd("expire", -3, WF, KEY, ACL_WF, G, "1.0.0", "Sets the expiration time of a key in seconds.", Handler::Write(expire)),
    cmd("pexpire", -3, WF, KEY, ACL_WF, G, "2.6.0", "Sets the expiration time of a key in milliseconds.", Handler::Write(pexpire)),
    cmd("expireat", -3, WF, KEY, ACL_WF, G, "1.2.0", "Sets the expiration time of a key to a Unix timestamp.", Handler::Write(expireat)),
    cmd("pexpireat", -3, WF, KEY, ACL_WF, G, "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp.", Handler::Write(pexpireat)),
    cmd("persist", 2, WF, KEY, ACL_WF, G, "2.2.0", "Removes the expiration time of a key.", Handler::Write(persist)),
    cmd("ttl", 2, RF, KEY, ACL_RF, G, "1.0.0", "Returns the expiration time in seconds of a key.", Handler::Read(ttl)),
    cmd("pttl", 2, RF, KEY, ACL_RF, G, "2.6.0", "Returns the expiration time in milliseconds of a key.", Handler::Read(pttl)),
    cmd("expiretime", 2, RF, KEY, ACL_RF, G, "7.0.0", "Returns the expiration time of a key as a Unix timestamp.", Handler::Read(expiretime)),
    cmd("pexpiretime", 2, RF, KEY, ACL_RF, G, "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp.", Handler::Read(pexpiretime)),
    cmd("keys", 2, R, NO_KEYS, &["keyspace", "read", "slow", "dangerous"], G, "1.0.0", "Returns all key names that match a pattern.", Handler::Read(keys)),
    cmd("scan", -2, R, NO_KEYS, ACL_RS, G, "2.8.0", "Iterates over the key names in the database.", Handler::Read(scan)),
    cmd("randomkey", 1, R, NO_KEYS, ACL_RS, G, "1.0.0", "Returns a random key name from the database.", Handler::Read(randomkey)),
    CommandSpec {
        name: "object",
        arity: -2,
        flags: Flags::NONE,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["slow"],
        group: G,
        since: "2.2.3",
        summary: "A container for object introspection commands.",
        handler: Handler::Container,
        subcommands: OBJECT_SUBS,
    },
];

#[rustfmt::skip]
const OBJECT_SUBS: &[CommandSpec] = &[
    cmd("encoding", 3, R, SUB_KEY, ACL_RS, G, "2.2.3", "Returns the internal encoding of a Redis object.", Handler::Read(object_encoding)),
    cmd("freq", 3, R, SUB_KEY, ACL_RS, G, "4.0.0", "Returns the logarithmic access frequency counter of a Redis object.", Handler::Read(object_freq)),
    cmd("idletime", 3, R, SUB_KEY, ACL_RS, G, "2.2.3", "Returns the time since the last access to a Redis object.", Handler::Read(object_idletime)),
    cmd("refcount", 3, R, SUB_KEY, ACL_RS, G, "2.2.3", "Returns the reference count of a value of a key.", Handler::Read(object_refcount)),
    cmd("help", 2, Flags::LOADING.union(Flags::STALE), NO_KEYS, &["keyspace", "slow"], G, "6.2.0", "Returns helpful text about the different subcommands.", Handler::Read(object_help)),
];

fn key_reply(e: &Entry) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(&e.key))
}

// ---- DEL, EXISTS, TYPE ----------------------------------------------------

/// DEL and UNLINK (there is no background freeing to hand work to).
fn del(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let mut n = 0;
    for k in &args[1..] {
        if store.expire_if_needed(db, k, ctx) {
            store.db_mut(db).remove(k);
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

/// EXISTS and TOUCH: a key named twice counts twice, as in Redis. TOUCH
/// has no access time to update (OBJECT IDLETIME is always 0).
fn exists(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let n = args[1..]
        .iter()
        .filter(|k| store.live(db, k, ctx.now_ms).is_some())
        .count();
    Ok(Reply::Int(n as i64))
}

fn type_of(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let name = store
        .live(db, &args[1], ctx.now_ms)
        .map_or("none", |e| e.value.type_name());
    Ok(Reply::simple(name))
}

// ---- RENAME, RENAMENX, COPY ------------------------------------------------

fn rename(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    rename_key(store, db, args, ctx, false)
}

fn renamenx(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    rename_key(store, db, args, ctx, true)
}

/// Moves the value and the expiry of `args[1]` to `args[2]`. Renaming a
/// key to itself only checks that it exists (RENAMENX then answers 0).
fn rename_key(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx, nx: bool) -> CmdResult {
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
    let d = store.db_mut(db);
    let entry = d.remove(src).ok_or(CmdError::NoSuchKey)?;
    let expire_at = entry.expire_at();
    d.set(dst, entry.value, expire_at);
    Ok(if nx { Reply::Int(1) } else { Reply::ok() })
}

/// COPY source destination [DB n] [REPLACE]. Cluster mode's "only DB 0"
/// rule belongs to the session layer, which knows the mode.
fn copy(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let (src, dst) = (&args[1], &args[2]);
    let mut replace = false;
    let mut dst_db = db;
    let mut i = 3;
    while i < args.len() {
        if eq_ic(&args[i], "REPLACE") {
            replace = true;
        } else if eq_ic(&args[i], "DB") && i + 1 < args.len() {
            dst_db = copy_db_index(store, &args[i + 1])?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
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

/// COPY's DB argument: Redis parses a C int (anything else is "not an
/// integer") and then range-checks it.
fn copy_db_index(store: &Store, arg: &[u8]) -> Result<usize, CmdError> {
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

fn expire(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cmd = ExpireCmd {
        name: "expire",
        seconds: true,
        relative: true,
    };
    set_expiry(store, db, args, ctx, cmd)
}

fn pexpire(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cmd = ExpireCmd {
        name: "pexpire",
        seconds: false,
        relative: true,
    };
    set_expiry(store, db, args, ctx, cmd)
}

fn expireat(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cmd = ExpireCmd {
        name: "expireat",
        seconds: true,
        relative: false,
    };
    set_expiry(store, db, args, ctx, cmd)
}

fn pexpireat(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
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
            Some(cur) => !self.nx && !(self.gt && when <= cur) && !(self.lt && when >= cur),
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

fn set_expiry(
    store: &mut Store,
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

fn persist(store: &mut Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
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
fn ttl_reply(store: &Store, db: usize, key: &[u8], ctx: &Ctx, form: TtlForm) -> CmdResult {
    let Some(e) = store.live(db, key, ctx.now_ms) else {
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

fn ttl(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    ttl_reply(store, db, &args[1], ctx, TtlForm::RemainingSecs)
}

fn pttl(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    ttl_reply(store, db, &args[1], ctx, TtlForm::RemainingMs)
}

fn expiretime(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    ttl_reply(store, db, &args[1], ctx, TtlForm::AtSecs)
}

fn pexpiretime(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    ttl_reply(store, db, &args[1], ctx, TtlForm::AtMs)
}

// ---- KEYS, SCAN, RANDOMKEY -----------------------------------------------------

fn keys(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let filter = KeyFilter {
        pattern: pattern_arg(&args[1]),
        type_name: None,
    };
    let out = store
        .db(db)
        .iter()
        .filter(|e| filter.wants(e, ctx.now_ms))
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
    fn wants(&self, e: &Entry, now_ms: u64) -> bool {
        !e.is_expired(now_ms)
            && self.pattern.is_none_or(|p| glob::matches(p, &e.key, false))
            && self
                .type_name
                .is_none_or(|t| t.eq_ignore_ascii_case(e.value.type_name().as_bytes()))
    }
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE t].
///
/// The cursor is a position in the Db's dense entry vector, walked from
/// the end towards the start: the cursor is the number of positions left
/// to visit, and 0 both starts and ends an iteration. Walking backwards is
/// what keeps SCAN's guarantee under deletions: `Db::remove` moves the
/// *last* entry into the hole, and the last entry is always one already
/// visited (or, when the vector shrank below the cursor, one not yet
/// visited moving to another unvisited slot), so a key present for the
/// whole iteration is never skipped. Keys added during it land past the
/// cursor and may be missed, which SCAN allows.
fn scan(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let cursor = parse_cursor(&args[1])?;
    let (filter, count) = parse_scan_options(&args[2..])?;
    let (next, keys) = scan_db(store.db(db), cursor, count, &filter, ctx.now_ms);
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(keys),
    ]))
}

/// Redis parses the cursor with strtoul: decimal, no leading space (an
/// empty cursor is 0).
fn parse_cursor(arg: &[u8]) -> Result<u64, CmdError> {
    if arg.is_empty() {
        return Ok(0);
    }
    std::str::from_utf8(arg)
        .ok()
        .filter(|s| s.bytes().all(|c| c.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or(CmdError::other("ERR invalid cursor"))
}

/// Redis's default SCAN COUNT.
const SCAN_DEFAULT_COUNT: u64 = 10;

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

/// Visits up to `count` positions below `cursor` (see [`scan`]) and returns
/// the next cursor and the keys that pass the filter.
fn scan_db(d: &Db, cursor: u64, count: u64, filter: &KeyFilter, now_ms: u64) -> (u64, Vec<Reply>) {
    let len = d.len() as u64;
    // 0 starts over; a cursor beyond the end (the Db shrank) resumes at it.
    let mut pos = if cursor == 0 { len } else { cursor.min(len) };
    let mut keys = Vec::new();
    let mut visited = 0;
    while pos > 0 && visited < count {
        pos -= 1;
        visited += 1;
        if let Some(e) = d.entry_at(pos as usize).filter(|e| filter.wants(e, now_ms)) {
            keys.push(key_reply(e));
        }
    }
    (pos, keys)
}

/// Random picks RANDOMKEY tries before deciding the database holds only
/// expired keys (it cannot delete them: it is a read).
const RANDOMKEY_ATTEMPTS: u64 = 100;

/// Picks with the command's seed, so every replica picks the same key.
fn randomkey(store: &Store, db: usize, _args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let d = store.db(db);
    if d.is_empty() {
        return Ok(Reply::Nil);
    }
    let len = d.len() as u64;
    let live = (0..RANDOMKEY_ATTEMPTS)
        .filter_map(|n| d.entry_at((ctx.random(n) % len) as usize))
        .find(|e| !e.is_expired(ctx.now_ms));
    Ok(live.map_or(Reply::Nil, key_reply))
}

// ---- OBJECT ---------------------------------------------------------------------

/// Redis keeps strings up to this length in one allocation with their
/// header ("embstr"); longer ones are "raw".
const EMBSTR_MAX_LEN: usize = 44;

/// Redis shares the integer objects 0..OBJ_SHARED_INTEGERS, whose refcount
/// reads as INT_MAX.
const SHARED_INTEGERS: i64 = 10_000;

/// The encoding name OBJECT ENCODING reports for a value.
pub fn encoding_name(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "int",
        Value::Str(s) if s.len() <= EMBSTR_MAX_LEN => "embstr",
        Value::Str(_) => "raw",
    }
}

fn object_encoding(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    Ok(match store.live(db, &args[2], ctx.now_ms) {
        Some(e) => Reply::Bulk(Bytes::from_static(encoding_name(&e.value).as_bytes())),
        None => Reply::Nil,
    })
}

/// Without an LFU maxmemory policy (the default, and the only one here)
/// Redis refuses FREQ for existing keys.
fn object_freq(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    match store.live(db, &args[2], ctx.now_ms) {
        Some(_) => Err(CmdError::other(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
             Please note that when switching between policies at runtime LRU and LFU data \
             will take some time to adjust.",
        )),
        None => Ok(Reply::Nil),
    }
}

/// Access times are not tracked (they would differ between replicas), so
/// every key reads as just touched.
fn object_idletime(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    Ok(match store.live(db, &args[2], ctx.now_ms) {
        Some(_) => Reply::Int(0),
        None => Reply::Nil,
    })
}

fn object_refcount(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    Ok(
        match store.live(db, &args[2], ctx.now_ms).map(|e| &e.value) {
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

/// A HELP reply: one status line per entry, as Redis's addReplyHelp.
pub fn help_reply(lines: &[&'static str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::simple(l)).collect())
}

fn object_help(_store: &Store, _db: usize, _args: &[Bytes], _ctx: &Ctx) -> CmdResult {
    Ok(help_reply(OBJECT_HELP))
}
