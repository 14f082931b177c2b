//! Streams: XADD, XRANGE, XREAD, consumer groups (XGROUP, XREADGROUP,
//! XACK, XPENDING, XCLAIM, XAUTOCLAIM), XINFO and XSETID.
//!
//! Replies, errors and the order in which arguments are checked follow
//! Redis 7.0's `t_stream.c`. The value type is the engine's, reached
//! through [`StreamOps`] and its groups through [`ConsumerGroup`].
//!
//! Time: auto ids, delivery and idle times come from `ctx.now_ms` only, so
//! every replica computes the same ids. An auto id never goes below the
//! stream's last id, so ids stay monotonic if the clock steps back.
//!
//! Blocking (XREAD BLOCK, XREADGROUP BLOCK) answers
//! [`CmdError::WouldBlock`] like BLPOP; a blocking XREAD carries its
//! arguments with `$` replaced by the ids it resolved to, so the re-run
//! after a write serves what was added after it blocked.

use crate::args::{eq_ic, parse_i64};
use crate::error::{subcommand_syntax, BlockOn, CmdError, CmdResult};
use crate::keyspace::stream_ops::{ConsumerGroup, ConsumerInfo, StreamEntry, StreamId, Trim};
use crate::keyspace::{Collection, Keyspace, StreamOps, Value};
use crate::notify;
use crate::store::{Ctx, Store};
use crate::table::{cmd, container, help_reply, CommandSpec, Flags};
use bytes::Bytes;
use kvasir_resp::Reply;

const WDF: Flags = Flags::WRITE.union(Flags::DENYOOM).union(Flags::FAST);
const WF: Flags = Flags::WRITE.union(Flags::FAST);
const WD: Flags = Flags::WRITE.union(Flags::DENYOOM);
const W: Flags = Flags::WRITE;
const R: Flags = Flags::READONLY;
const RF: Flags = Flags::READONLY.union(Flags::FAST);
const R_BLOCK: Flags = Flags::READONLY
    .union(Flags::BLOCKING)
    .union(Flags::MOVABLEKEYS);
const W_BLOCK: Flags = Flags::WRITE
    .union(Flags::BLOCKING)
    .union(Flags::MOVABLEKEYS);
const HELP_FLAGS: Flags = Flags::LOADING.union(Flags::STALE);
const ACL_WF: &[&str] = &["write", "stream", "fast"];
const ACL_W: &[&str] = &["write", "stream", "slow"];
const ACL_RF: &[&str] = &["read", "stream", "fast"];
const ACL_R: &[&str] = &["read", "stream", "slow"];
const ACL_RB: &[&str] = &["read", "stream", "slow", "blocking"];
const ACL_WB: &[&str] = &["write", "stream", "slow", "blocking"];
const ACL_HELP: &[&str] = &["stream", "slow"];
const G: &str = "stream";
const ONE_KEY: (i32, i32, i32) = (1, 1, 1);
const SUB_KEY: (i32, i32, i32) = (2, 2, 1);
const NO_KEYS: (i32, i32, i32) = (0, 0, 0);

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("xack", -4, WF, ONE_KEY, ACL_WF, G, "5.0.0", "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group.", crate::write_handler!(xack)).idle_on_empty().events(crate::notify::Events::None).with_key_specs(&[crate::table::ks::RW_UPDATE]).keys_access(crate::table::KeyAccess::Write),
    cmd("xadd", -5, WDF, ONE_KEY, ACL_WF, G, "5.0.0", "Appends a new entry to a stream", crate::write_handler!(xadd)).idle_on_empty().events(crate::notify::Events::None).keys_access(crate::table::KeyAccess::Write).with_tips(&["nondeterministic_output"]),
    cmd("xautoclaim", -6, WF, ONE_KEY, ACL_WF, G, "6.2.0", "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.", crate::write_handler!(xautoclaim)).events(crate::notify::Events::None).with_key_specs(&[crate::table::ks::RW_DELETE]).keys_access(crate::table::KeyAccess::Write).with_tips(&["nondeterministic_output"]),
    cmd("xclaim", -6, WF, ONE_KEY, ACL_WF, G, "5.0.0", "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.", crate::write_handler!(xclaim)).events(crate::notify::Events::None).with_key_specs(&[crate::table::ks::RW_UPDATE]).keys_access(crate::table::KeyAccess::Write).with_tips(&["nondeterministic_output"]),
    cmd("xdel", -3, WF, ONE_KEY, ACL_WF, G, "5.0.0", "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.", crate::write_handler!(xdel)).idle_on_empty().keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_DELETE]),
    container("xgroup", -2, &["slow"], G, "5.0.0", "A container for consumer groups commands", XGROUP_SUBS),
    container("xinfo", -2, &["slow"], G, "5.0.0", "A container for stream introspection commands", XINFO_SUBS),
    cmd("xlen", 2, RF, ONE_KEY, ACL_RF, G, "5.0.0", "Return the number of entries in a stream", crate::read_handler!(xlen)).keys_access(crate::table::KeyAccess::Existence),
    cmd("xpending", -3, R, ONE_KEY, ACL_R, G, "5.0.0", "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.", crate::read_handler!(xpending)).with_tips(&["nondeterministic_output"]),
    cmd("xrange", -4, R, ONE_KEY, ACL_R, G, "5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval", crate::read_handler!(xrange)),
    CommandSpec { key_finder: Some(keys_after_streams), ..cmd("xread", -4, R_BLOCK, NO_KEYS, ACL_RB, G, "5.0.0", "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.", crate::read_handler!(xread)) },
    CommandSpec { key_finder: Some(keys_after_streams), ..cmd("xreadgroup", -7, W_BLOCK, NO_KEYS, ACL_WB, G, "5.0.0", "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.", crate::write_handler!(xreadgroup)) }.events(crate::notify::Events::None).with_key_specs(&[crate::table::ks::RO_ACCESS]).keys_access(crate::table::KeyAccess::Read),
    cmd("xrevrange", -4, R, ONE_KEY, ACL_R, G, "5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE", crate::read_handler!(xrevrange)),
    cmd("xsetid", -3, WDF, ONE_KEY, ACL_WF, G, "5.0.0", "An internal command for replicating stream values", crate::write_handler!(xsetid)).with_key_specs(&[crate::table::ks::RW_UPDATE]).keys_access(crate::table::KeyAccess::Write),
    cmd("xtrim", -4, W, ONE_KEY, ACL_W, G, "5.0.0", "Trims the stream to (approximately if '~' is passed) a certain size", crate::write_handler!(xtrim)).idle_on_empty().keys_access(crate::table::KeyAccess::Write).with_key_specs(&[crate::table::ks::RW_DELETE]).with_tips(&["nondeterministic_output"]),
];

#[rustfmt::skip]
const XGROUP_SUBS: &[CommandSpec] = &[
    cmd("create", -5, WD, SUB_KEY, ACL_W, G, "5.0.0", "Create a consumer group.", crate::write_handler!(xgroup_create)).events(crate::notify::Events::Named("xgroup-create")).with_key_specs(&[crate::table::ks::RW_INSERT]).keys_access(crate::table::KeyAccess::Write),
    cmd("createconsumer", 5, WD, SUB_KEY, ACL_W, G, "6.2.0", "Create a consumer in a consumer group.", crate::write_handler!(xgroup_createconsumer)).idle_on_empty().events(crate::notify::Events::Named("xgroup-createconsumer")).with_key_specs(&[crate::table::ks::RW_INSERT]).keys_access(crate::table::KeyAccess::Write),
    cmd("delconsumer", 5, W, SUB_KEY, ACL_W, G, "5.0.0", "Delete a consumer from a consumer group.", crate::write_handler!(xgroup_delconsumer)).events(crate::notify::Events::Named("xgroup-delconsumer")).with_key_specs(&[crate::table::ks::RW_DELETE]).keys_access(crate::table::KeyAccess::Write),
    cmd("destroy", 4, W, SUB_KEY, ACL_W, G, "5.0.0", "Destroy a consumer group.", crate::write_handler!(xgroup_destroy)).idle_on_empty().events(crate::notify::Events::Named("xgroup-destroy")).with_key_specs(&[crate::table::ks::RW_DELETE]).keys_access(crate::table::KeyAccess::Write),
    cmd("help", 2, HELP_FLAGS, NO_KEYS, ACL_HELP, G, "5.0.0", "Show helpful text about the different subcommands", crate::read_handler!(xgroup_help)),
    cmd("setid", -5, W, SUB_KEY, ACL_W, G, "5.0.0", "Set a consumer group to an arbitrary last delivered ID value.", crate::write_handler!(xgroup_setid)).events(crate::notify::Events::Named("xgroup-setid")).with_key_specs(&[crate::table::ks::RW_UPDATE]).keys_access(crate::table::KeyAccess::Write),
];

#[rustfmt::skip]
const XINFO_SUBS: &[CommandSpec] = &[
    cmd("consumers", 4, R, SUB_KEY, ACL_R, G, "5.0.0", "List the consumers in a consumer group", crate::read_handler!(xinfo_consumers)).with_tips(&["nondeterministic_output"]),
    cmd("groups", 3, R, SUB_KEY, ACL_R, G, "5.0.0", "List the consumer groups of a stream", crate::read_handler!(xinfo_groups)),
    cmd("help", 2, HELP_FLAGS, NO_KEYS, ACL_HELP, G, "5.0.0", "Show helpful text about the different subcommands", crate::read_handler!(xinfo_help)),
    cmd("stream", -3, R, SUB_KEY, ACL_R, G, "5.0.0", "Get information about a stream", crate::read_handler!(xinfo_stream)),
];

/// Key finder for XREAD / XREADGROUP: the first half of the arguments
/// after the STREAMS keyword.
pub fn keys_after_streams(args: &[Bytes]) -> Vec<usize> {
    let Some(pos) = args.iter().skip(1).position(|a| eq_ic(a, "streams")) else {
        return Vec::new();
    };
    let first = pos + 2;
    let n = args.len().saturating_sub(first) / 2;
    (first..first + n).collect()
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

fn invalid_id() -> CmdError {
    CmdError::other("ERR Invalid stream ID specified as stream command argument")
}

fn nogroup(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::other(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        lossy(key),
        lossy(group)
    ))
}

fn nogroup_for_key(group: &[u8], key: &[u8]) -> CmdError {
    CmdError::other(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        lossy(group),
        lossy(key)
    ))
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// ---------------------------------------------------------------------------
// Ids
// ---------------------------------------------------------------------------

/// Redis's string2ull: a canonical integer, or what strtoull accepts in
/// full (leading spaces, a plus sign, leading zeros), within u64.
fn parse_u64(b: &[u8]) -> Option<u64> {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace() && *c != 0x0b)?;
    let mut digits = &b[start..];
    if let Some(rest) = digits.strip_prefix(b"+") {
        digits = rest;
    }
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// How an id argument was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ParsedId {
    id: StreamId,
    /// False for XADD's `ms-*` form.
    seq_given: bool,
}

/// Redis's streamGenericParseIDOrReply. `strict` refuses `-` and `+`;
/// `allow_auto_seq` accepts `ms-*` (XADD only).
fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    allow_auto_seq: bool,
) -> Result<ParsedId, CmdError> {
    if arg.len() > 127 {
        return Err(invalid_id());
    }
    let given = |id| ParsedId {
        id,
        seq_given: true,
    };
    match arg {
        b"-" | b"+" if strict => return Err(invalid_id()),
        b"-" => return Ok(given(StreamId::MIN)),
        b"+" => return Ok(given(StreamId::MAX)),
        _ => {}
    }
    let (ms_part, seq_part) = match arg.iter().position(|&c| c == b'-') {
        Some(p) => (&arg[..p], Some(&arg[p + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms_part).ok_or_else(invalid_id)?;
    match seq_part {
        Some(b"*") if allow_auto_seq => Ok(ParsedId {
            id: StreamId::new(ms, 0),
            seq_given: false,
        }),
        Some(s) => Ok(given(StreamId::new(
            ms,
            parse_u64(s).ok_or_else(invalid_id)?,
        ))),
        None => Ok(given(StreamId::new(ms, missing_seq))),
    }
}

/// A strict id (no `-` / `+`), missing sequence 0.
fn parse_strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    parse_id_full(arg, 0, true, false).map(|p| p.id)
}

/// Redis's streamParseIntervalIDOrReply plus the exclusive adjustment:
/// `(id` is exclusive (strict), otherwise `-`, `+` or an id.
fn parse_range_start(arg: &[u8]) -> Result<StreamId, CmdError> {
    match arg.strip_prefix(b"(").filter(|_| arg.len() > 1) {
        Some(rest) => parse_id_full(rest, 0, true, false)?
            .id
            .next()
            .ok_or_else(|| CmdError::other("ERR invalid start ID for the interval")),
        None => Ok(parse_id_full(arg, 0, false, false)?.id),
    }
}

fn parse_range_end(arg: &[u8]) -> Result<StreamId, CmdError> {
    match arg.strip_prefix(b"(").filter(|_| arg.len() > 1) {
        Some(rest) => parse_id_full(rest, u64::MAX, true, false)?
            .id
            .prev()
            .ok_or_else(|| CmdError::other("ERR invalid end ID for the interval")),
        None => Ok(parse_id_full(arg, u64::MAX, false, false)?.id),
    }
}

/// `<ms>-<seq>`, formatted without `fmt` (one per entry of every range
/// reply).
fn id_reply(id: StreamId) -> Reply {
    let (mut ms, mut seq) = ([0u8; 20], [0u8; 20]);
    let (ms, seq) = (
        kvasir_resp::fmt_u64(id.ms, &mut ms),
        kvasir_resp::fmt_u64(id.seq, &mut seq),
    );
    let mut text = Vec::with_capacity(ms.len() + 1 + seq.len());
    text.extend_from_slice(ms);
    text.push(b'-');
    text.extend_from_slice(seq);
    Reply::Bulk(Bytes::from(text))
}

fn entry_reply(e: &StreamEntry) -> Reply {
    let mut fields = Vec::with_capacity(e.fields.len() * 2);
    for (f, v) in &e.fields {
        fields.push(Reply::Bulk(Bytes::copy_from_slice(f)));
        fields.push(Reply::Bulk(Bytes::copy_from_slice(v)));
    }
    Reply::Array(vec![id_reply(e.id), Reply::Array(fields)])
}

fn entries_reply(entries: &[StreamEntry]) -> Reply {
    Reply::Array(entries.iter().map(entry_reply).collect())
}

/// A non-negative count argument (negative reads as 0, as Redis does).
fn parse_count(arg: &[u8]) -> Result<usize, CmdError> {
    Ok(parse_i64(arg)?.max(0) as usize)
}

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

fn as_stream<K: Keyspace>(v: &Value<K>) -> Result<&K::Stream, CmdError> {
    match v {
        Value::Stream(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

fn as_stream_mut<K: Keyspace>(v: &mut Value<K>) -> Result<&mut K::Stream, CmdError> {
    match v {
        Value::Stream(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

/// For reads: the live stream at `key` (None when missing).
fn read_stream<'a, K: Keyspace>(
    store: &'a Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Option<&'a K::Stream>, CmdError> {
    store
        .live(db, key, ctx.now_ms)
        .map(|e| as_stream(e.value))
        .transpose()
}

/// For writes: the live stream at `key` after lazy expiry.
fn write_stream<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<Option<&'a mut K::Stream>, CmdError> {
    store
        .live_value_mut(db, key, ctx)
        .map(as_stream_mut)
        .transpose()
}

/// The stream at `key`, created empty when missing.
fn stream_or_create<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<&'a mut K::Stream, CmdError> {
    as_stream_mut(
        store.live_value_mut_or_insert(db, key, ctx, || Value::Stream(Box::new(K::Stream::new()))),
    )
}

// ---------------------------------------------------------------------------
// XADD / XTRIM
// ---------------------------------------------------------------------------

/// The trimming options of XADD and XTRIM.
#[derive(Debug, Default)]
struct TrimArgs {
    strategy: Option<Trim>,
    approx: bool,
    limit: u64,
    no_mkstream: bool,
    /// XADD: the id argument's index and its parsed form (None for `*`).
    id_pos: usize,
    id: Option<ParsedId>,
}

/// Redis's streamParseAddOrTrimArgsOrReply, from index 2;
/// `node_max_entries` is stream-node-max-entries (an approximate trim's
/// default LIMIT is 100 nodes of it).
fn parse_trim_args(
    args: &[Bytes],
    xadd: bool,
    node_max_entries: u64,
) -> Result<TrimArgs, CmdError> {
    let mut t = TrimArgs::default();
    let mut limit_given = false;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i][..];
        if xadd && opt == b"*" {
            break;
        } else if (eq_ic(opt, "maxlen") || eq_ic(opt, "minid")) && more > 0 {
            if t.strategy.is_some() {
                return Err(CmdError::other(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            t.approx = false;
            let next = &args[i + 1][..];
            if more >= 2 && (next == b"~" || next == b"=") {
                t.approx = next == b"~";
                i += 1;
            }
            let arg = &args[i + 1][..];
            t.strategy = Some(if eq_ic(opt, "maxlen") {
                let n = parse_i64(arg)?;
                if n < 0 {
                    return Err(CmdError::other("ERR The MAXLEN argument must be >= 0."));
                }
                Trim::MaxLen(n as u64)
            } else {
                Trim::MinId(parse_strict_id(arg)?)
            });
            i += 1;
        } else if eq_ic(opt, "limit") && more > 0 {
            let n = parse_i64(&args[i + 1])?;
            if n < 0 {
                return Err(CmdError::other("ERR The LIMIT argument must be >= 0."));
            }
            t.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && eq_ic(opt, "nomkstream") {
            t.no_mkstream = true;
        } else if xadd {
            t.id = Some(parse_id_full(opt, 0, true, true)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    t.id_pos = i;
    if t.limit > 0 && t.strategy.is_none() {
        return Err(CmdError::other(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.strategy.is_none() {
        return Err(CmdError::other(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given {
        if !t.approx {
            return Err(CmdError::other(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if t.approx {
        // Redis caps an approximate trim's work: 100 nodes' worth (none
        // when stream-node-max-entries is 0).
        t.limit = node_max_entries.saturating_mul(100);
    } else {
        t.limit = 0;
    }
    Ok(t)
}

/// The id XADD assigns: the explicit one (checked against the top item),
/// `ms-*`, or an automatic one from the ctx clock. Never below `last`.
fn next_id(last: StreamId, wanted: Option<ParsedId>, now_ms: u64) -> Result<StreamId, CmdError> {
    let too_small = || {
        CmdError::other(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        )
    };
    match wanted {
        Some(ParsedId {
            id,
            seq_given: true,
        }) => {
            if id <= last {
                return Err(too_small());
            }
            Ok(id)
        }
        Some(ParsedId { id, .. }) => {
            if id.ms < last.ms {
                return Err(too_small());
            }
            if id.ms == last.ms {
                let seq = last.seq.checked_add(1).ok_or_else(too_small)?;
                return Ok(StreamId::new(id.ms, seq));
            }
            Ok(StreamId::new(id.ms, 0))
        }
        None if now_ms > last.ms => Ok(StreamId::new(now_ms, 0)),
        // Same millisecond, or the clock went back: keep counting.
        None => last.next().ok_or_else(too_small),
    }
}

fn xadd<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let t = parse_trim_args(args, true, store.limits.stream_node_max_entries)?;
    let field_pos = t.id_pos + 1;
    let nfields = args.len().saturating_sub(field_pos);
    if nfields < 2 || nfields % 2 == 1 {
        return Err(CmdError::WrongArity("xadd".into()));
    }
    if let Some(p) = t.id {
        if p.seq_given && p.id.is_zero() {
            return Err(CmdError::other(
                "ERR The ID specified in XADD must be greater than 0-0",
            ));
        }
    }
    let key = &args[1];
    let existed = write_stream(store, db, key, ctx)?.is_some();
    if t.no_mkstream && !existed {
        return Ok(Reply::Nil);
    }
    let nodes = store.limits.stream_nodes();
    let s = stream_or_create(store, db, key, ctx)?;
    if s.last_id() == StreamId::MAX {
        return Err(CmdError::other(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let id = match next_id(s.last_id(), t.id, ctx.now_ms) {
        Ok(id) => id,
        Err(e) => {
            discard_if_new_and_empty(store, db, key);
            return Err(e);
        }
    };
    let pairs: Vec<(&[u8], &[u8])> = args[field_pos..]
        .chunks_exact(2)
        .map(|c| (&c[0][..], &c[1][..]))
        .collect();
    s.append(id, &pairs, nodes);
    let trimmed = match t.strategy {
        Some(to) => s.trim(to, t.approx, t.limit),
        None => 0,
    };
    // Redis's order: "new" when the stream was created, "xadd", then
    // "xtrim" when MAXLEN/MINID removed entries.
    if !existed {
        store.emit(notify::NEW, "new", db, key);
    }
    store.emit(notify::STREAM, "xadd", db, key);
    if trimmed > 0 {
        store.emit(notify::STREAM, "xtrim", db, key);
    }
    Ok(id_reply(id))
}

/// Whether the group `group` of `s` has the consumer `consumer`.
fn has_consumer(s: &impl StreamOps, group: &[u8], consumer: &[u8]) -> bool {
    s.group(group).is_some_and(|g| g.has_consumer(consumer))
}

/// XADD created the stream and then failed: a stream that never held
/// anything and has no groups goes again (Redis checks before creating).
fn discard_if_new_and_empty<K: Keyspace>(store: &mut Store<K>, db: usize, key: &[u8]) {
    let fresh = store.db(db).get(key).is_some_and(|e| {
        matches!(&e.value, Value::Stream(s) if s.entries_added() == 0 && s.group_count() == 0 && s.last_id().is_zero())
    });
    if fresh {
        store.db_mut(db).remove(key);
    }
}

fn xtrim<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let t = parse_trim_args(args, false, store.limits.stream_node_max_entries)?;
    let Some(s) = write_stream(store, db, &args[1], ctx)? else {
        return Ok(Reply::Int(0));
    };
    let Some(to) = t.strategy else {
        return Err(CmdError::Syntax);
    };
    Ok(Reply::Int(s.trim(to, t.approx, t.limit) as i64))
}

// ---------------------------------------------------------------------------
// XRANGE / XREVRANGE / XLEN / XDEL
// ---------------------------------------------------------------------------

fn xrange<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    range_generic(store, db, args, ctx, false)
}

fn xrevrange<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    range_generic(store, db, args, ctx, true)
}

fn range_generic<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    rev: bool,
) -> CmdResult {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = parse_range_start(start_arg)?;
    let end = parse_range_end(end_arg)?;
    let mut count: Option<usize> = None;
    let mut i = 4;
    while i < args.len() {
        if eq_ic(&args[i], "count") && i + 1 < args.len() {
            count = Some(parse_count(&args[i + 1])?);
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(s) = read_stream(store, db, &args[1], ctx)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == Some(0) {
        return Ok(Reply::NilArray);
    }
    Ok(entries_reply(&s.range(start, end, count, rev)))
}

fn xlen<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let s = read_stream(store, db, &args[1], ctx)?;
    Ok(Reply::Int(s.map_or(0, |s| s.len() as i64)))
}

fn xdel<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    // As Redis: the key first (a missing key answers 0, another type
    // WRONGTYPE), then every ID, so that none is deleted when one is bad.
    let Some(s) = write_stream(store, db, &args[1], ctx)? else {
        return Ok(Reply::Int(0));
    };
    let ids = args[2..]
        .iter()
        .map(|a| parse_strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Reply::Int(
        ids.into_iter().filter(|id| s.delete(*id)).count() as i64,
    ))
}

// ---------------------------------------------------------------------------
// XREAD / XREADGROUP
// ---------------------------------------------------------------------------

/// The parsed options of XREAD / XREADGROUP.
struct ReadArgs<'a> {
    count: usize,
    /// Milliseconds; None without BLOCK.
    block_ms: Option<u64>,
    group: Option<(&'a Bytes, &'a Bytes)>,
    noack: bool,
    /// Index of the first key; `nstreams` keys then as many ids follow.
    streams_at: usize,
    nstreams: usize,
    /// A re-run of a blocked XREADGROUP (see [`RERUN_MARK`]).
    rerun: bool,
}

/// Inserted after the name of a blocked XREADGROUP's arguments for its
/// re-runs: a key or group that went away while it waited answers Redis's
/// "no longer exists" errors instead of the first run's NOGROUP. Clients
/// cannot name it usefully (it only changes those error texts).
const RERUN_MARK: &[u8] = b"\x00rerun";

/// What the id argument of one stream asks for.
#[derive(Clone, Copy)]
enum ReadFrom {
    /// Entries after this id.
    After(StreamId),
    /// XREADGROUP `>`: entries never delivered to the group.
    New,
}

/// XREAD and XREADGROUP with BLOCK are refused inside scripts, as Redis
/// refuses them (other blocking commands there answer at once).
fn refuse_block_in_script<K: Keyspace>(
    store: &Store<K>,
    r: &ReadArgs<'_>,
    name: &str,
) -> Result<(), CmdError> {
    if r.block_ms.is_some() && store.script_call.get() {
        return Err(CmdError::other(format!(
            "ERR {name} command is not allowed with BLOCK option from scripts"
        )));
    }
    Ok(())
}

fn parse_read_args(args: &[Bytes], group_cmd: bool) -> Result<ReadArgs<'_>, CmdError> {
    let name = if group_cmd { "xreadgroup" } else { "xread" };
    let mut r = ReadArgs {
        count: 0,
        block_ms: None,
        group: None,
        noack: false,
        streams_at: 0,
        nstreams: 0,
        rerun: false,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i][..];
        if group_cmd && opt == RERUN_MARK {
            r.rerun = true;
        } else if eq_ic(opt, "block") && more > 0 {
            i += 1;
            let ms = parse_i64(&args[i])
                .map_err(|_| CmdError::other("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(CmdError::other("ERR timeout is negative"));
            }
            r.block_ms = Some(ms as u64);
        } else if eq_ic(opt, "count") && more > 0 {
            i += 1;
            r.count = parse_count(&args[i])?;
        } else if eq_ic(opt, "streams") && more > 0 {
            let n = args.len() - (i + 1);
            if !n.is_multiple_of(2) {
                let symbol = if group_cmd { '>' } else { '$' };
                return Err(CmdError::other(format!(
                    "ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{symbol}' must be specified."
                )));
            }
            r.streams_at = i + 1;
            r.nstreams = n / 2;
            break;
        } else if eq_ic(opt, "group") && more >= 2 {
            if !group_cmd {
                return Err(CmdError::other(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.group = Some((&args[i + 1], &args[i + 2]));
            i += 2;
        } else if eq_ic(opt, "noack") {
            if !group_cmd {
                return Err(CmdError::other(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if r.streams_at == 0 {
        return Err(CmdError::Syntax);
    }
    if group_cmd && r.group.is_none() {
        return Err(CmdError::other("ERR Missing GROUP option for XREADGROUP"));
    }
    Ok(r)
}

/// Resolves each stream's id argument (type and group checks included, in
/// argument order as Redis does). For XREAD, `$` becomes the stream's last
/// id (0-0 when missing).
fn resolve_read_ids<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    r: &ReadArgs,
    ctx: &Ctx,
) -> Result<Vec<ReadFrom>, CmdError> {
    let mut out = Vec::with_capacity(r.nstreams);
    for k in 0..r.nstreams {
        let key = &args[r.streams_at + k];
        let arg = &args[r.streams_at + r.nstreams + k][..];
        let s = match read_stream(store, db, key, ctx) {
            // A blocked XREADGROUP whose stream was replaced by another
            // type (SET, or DEL then SADD in one EXEC) is told it is gone.
            Err(CmdError::WrongType) if r.rerun => None,
            other => other?,
        };
        if let Some((group, _)) = r.group {
            if r.rerun {
                went_away(s, group)?;
            }
            if s.is_none_or(|s| s.group(group).is_none()) {
                return Err(CmdError::other(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    lossy(key),
                    lossy(group)
                )));
            }
        }
        let from = match arg {
            b"$" if r.group.is_some() => {
                return Err(CmdError::other("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
            }
            b"$" => ReadFrom::After(s.map_or(StreamId::MIN, |s| s.last_id())),
            b">" if r.group.is_none() => {
                return Err(CmdError::other("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
            }
            b">" => ReadFrom::New,
            _ => ReadFrom::After(parse_strict_id(arg)?),
        };
        out.push(from);
    }
    Ok(out)
}

/// A blocked XREADGROUP's stream or group was removed while it waited:
/// Redis 7.0 unblocks it with these errors.
fn went_away(s: Option<&impl StreamOps>, group: &[u8]) -> Result<(), CmdError> {
    match s {
        None => Err(CmdError::other("UNBLOCKED the stream key no longer exists")),
        Some(s) if s.group(group).is_none() => Err(CmdError::other(
            "NOGROUP the consumer group this client was blocked on no longer exists",
        )),
        Some(_) => Ok(()),
    }
}

/// The blocking outcome of a read that found nothing: BLOCK asked for it.
/// XREAD's `$` ids are rewritten to what they resolved to.
fn block_read(args: &[Bytes], r: &ReadArgs, froms: &[ReadFrom], timeout_ms: u64) -> CmdError {
    let keys = args[r.streams_at..r.streams_at + r.nstreams].to_vec();
    let mut rerun = None;
    if r.group.is_some() && !r.rerun {
        let mut marked = args.to_vec();
        marked.insert(1, Bytes::from_static(RERUN_MARK));
        rerun = Some(marked);
    } else if r.group.is_none() {
        let mut rewritten = args.to_vec();
        for (k, from) in froms.iter().enumerate() {
            let at = r.streams_at + r.nstreams + k;
            if let (b"$", ReadFrom::After(id)) = (&args[at][..], from) {
                rewritten[at] = Bytes::from(id.to_string());
            }
        }
        if rewritten != args {
            rerun = Some(rewritten);
        }
    }
    CmdError::WouldBlock(Box::new(BlockOn {
        keys,
        timeout_ms,
        on_timeout: Reply::NilArray,
        rerun,
    }))
}

fn limit_of(count: usize) -> Option<usize> {
    (count > 0).then_some(count)
}

fn xread<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let r = parse_read_args(args, false)?;
    refuse_block_in_script(store, &r, "xread")?;
    let froms = resolve_read_ids(store, db, args, &r, ctx)?;
    let mut out = Vec::new();
    for (k, from) in froms.iter().enumerate() {
        let key = &args[r.streams_at + k];
        let (Some(s), ReadFrom::After(after)) = (read_stream(store, db, key, ctx)?, *from) else {
            continue;
        };
        let Some(last) = s.last_entry().map(|e| e.id) else {
            continue;
        };
        if last <= after {
            continue;
        }
        let Some(start) = after.next() else {
            continue;
        };
        let entries = s.range(start, StreamId::MAX, limit_of(r.count), false);
        out.push((Reply::Bulk(key.clone()), entries_reply(&entries)));
    }
    if !out.is_empty() {
        return Ok(Reply::KeyedArrays(out));
    }
    match r.block_ms {
        Some(ms) => Err(block_read(args, &r, &froms, ms)),
        None => Ok(Reply::NilArray),
    }
}

fn xreadgroup<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let r = parse_read_args(args, true)?;
    refuse_block_in_script(store, &r, "xreadgroup")?;
    let froms = resolve_read_ids(store, db, args, &r, ctx)?;
    let Some((group, consumer)) = r.group else {
        return Err(CmdError::Syntax);
    };
    let mut out = Vec::new();
    for (k, from) in froms.iter().enumerate() {
        let key = &args[r.streams_at + k];
        let Some(s) = write_stream(store, db, key, ctx)? else {
            continue;
        };
        let had = has_consumer(s, group, consumer);
        let served = match *from {
            ReadFrom::New => deliver_new(s, group, consumer, r.count, r.noack, ctx.now_ms),
            ReadFrom::After(after) => {
                Some(consumer_history(s, group, consumer, after, r.count, ctx))
            }
        };
        if !had && has_consumer(s, group, consumer) {
            store.emit(notify::STREAM, "xgroup-createconsumer", db, key);
        }
        if let Some(entries) = served {
            out.push((Reply::Bulk(key.clone()), entries));
        }
    }
    if !out.is_empty() {
        return Ok(Reply::KeyedArrays(out));
    }
    match r.block_ms {
        Some(ms) => Err(block_read(args, &r, &froms, ms)),
        None => Ok(Reply::NilArray),
    }
}

/// XREADGROUP `>`: entries after the group's last delivered id go to the
/// consumer (and its pending list unless NOACK). None when there is
/// nothing new (the stream is then left out of the reply).
fn deliver_new(
    s: &mut impl StreamOps,
    group: &[u8],
    consumer: &[u8],
    count: usize,
    noack: bool,
    now_ms: u64,
) -> Option<Reply> {
    let last_entry = s.last_entry().map(|e| e.id);
    let g = s.group_mut(group)?;
    let after = g.last_id();
    if last_entry.is_none_or(|l| l <= after) {
        // Nothing to serve now: Redis neither creates the consumer nor
        // refreshes its seen time (that happens when it is served).
        return None;
    }
    g.touch_consumer(consumer, now_ms);
    let start = after.next()?;
    let (reply, ids) = {
        let entries = s.range(start, StreamId::MAX, limit_of(count), false);
        let ids: Vec<StreamId> = entries.iter().map(|e| e.id).collect();
        (entries_reply(&entries), ids)
    };
    for id in ids {
        advance_group(s, group, id);
        if !noack {
            if let Some(g) = s.group_mut(group) {
                g.add_pending(id, consumer, now_ms);
            }
        }
    }
    Some(reply)
}

/// Moves a group's last delivered id to `id`, keeping its entries_read
/// counter as Redis's streamReplyWithRange does.
fn advance_group(s: &mut impl StreamOps, group: &[u8], id: StreamId) {
    let tombstones = s.range_has_tombstones(Some(id));
    let estimate = s.estimate_entries_read(id);
    let added = s.entries_added();
    let Some(g) = s.group_mut(group) else {
        return;
    };
    if id <= g.last_id() {
        return;
    }
    match g.entries_read() {
        Some(n) if !tombstones => g.set_entries_read(Some(n + 1)),
        _ if added > 0 => g.set_entries_read(estimate),
        _ => {}
    }
    g.set_last_id(id);
}

/// XREADGROUP with an id: the consumer's pending entries after it; a
/// deleted entry reads as `[id, nil]`.
fn consumer_history(
    s: &mut impl StreamOps,
    group: &[u8],
    consumer: &[u8],
    after: StreamId,
    count: usize,
    ctx: &Ctx,
) -> Reply {
    let ids: Vec<StreamId> = match s.group_mut(group) {
        Some(g) => {
            g.touch_consumer(consumer, ctx.now_ms);
            let limit = limit_of(count).unwrap_or(usize::MAX);
            match after.next() {
                Some(start) => g
                    .consumer_pending(consumer, start, StreamId::MAX)
                    .take(limit)
                    .collect(),
                None => Vec::new(),
            }
        }
        None => Vec::new(),
    };
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let reply = entry_or_nil(s, id);
        // A re-delivery from the history counts as a delivery (deleted
        // entries, answered with a nil, do not).
        if s.contains(id) {
            if let Some(g) = s.group_mut(group) {
                g.redeliver(id, ctx.now_ms);
            }
        }
        out.push(reply);
    }
    Reply::Array(out)
}

fn entry_or_nil(s: &impl StreamOps, id: StreamId) -> Reply {
    match s.range(id, id, Some(1), false).first() {
        Some(e) => entry_reply(e),
        None => Reply::Array(vec![id_reply(id), Reply::NilArray]),
    }
}

// ---------------------------------------------------------------------------
// XGROUP
// ---------------------------------------------------------------------------

/// CREATE/SETID options from index 5: MKSTREAM (CREATE only) and
/// ENTRIESREAD. Returns (mkstream, entries_read).
fn parse_group_options(args: &[Bytes], create: bool) -> Result<(bool, Option<u64>), CmdError> {
    let (mut mkstream, mut entries_read) = (false, None);
    let mut i = 5;
    while i < args.len() {
        if create && eq_ic(&args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if eq_ic(&args[i], "entriesread") && i + 1 < args.len() {
            let n = parse_i64(&args[i + 1])?;
            if n < -1 {
                return Err(CmdError::other(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            entries_read = u64::try_from(n).ok();
            i += 2;
        } else {
            return Err(subcommand_syntax("XGROUP", &args[1]));
        }
    }
    Ok((mkstream, entries_read))
}

/// The stream a keyed XGROUP subcommand works on; Redis's error when the
/// key is missing.
fn group_stream<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    key: &[u8],
    ctx: &Ctx,
) -> Result<&'a mut K::Stream, CmdError> {
    write_stream(store, db, key, ctx)?.ok_or_else(|| {
        CmdError::other("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
    })
}

/// The named group of a keyed XGROUP subcommand that needs it.
fn existing_group<'a, S: StreamOps>(
    s: &'a mut S,
    args: &[Bytes],
) -> Result<&'a mut S::Group, CmdError> {
    s.group_mut(&args[3])
        .ok_or_else(|| nogroup_for_key(&args[3], &args[2]))
}

fn xgroup_create<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let (mkstream, entries_read) = parse_group_options(args, true)?;
    let key = &args[2];
    let existing = write_stream(store, db, key, ctx)?.map(|s| s.last_id());
    if existing.is_none() && !mkstream {
        group_stream(store, db, key, ctx)?;
    }
    // Redis checks the argument count after the key.
    if args.len() > 8 {
        return Err(subcommand_syntax("XGROUP", &args[1]));
    }
    let id = match &args[4][..] {
        b"$" => existing.unwrap_or_default(),
        arg => parse_strict_id(arg)?,
    };
    let s = stream_or_create(store, db, key, ctx)?;
    if !s.create_group(&args[3], id, entries_read) {
        return Err(CmdError::other(
            "BUSYGROUP Consumer Group name already exists",
        ));
    }
    Ok(Reply::ok())
}

fn xgroup_setid<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let (_, entries_read) = parse_group_options(args, false)?;
    let s = group_stream(store, db, &args[2], ctx)?;
    let last = s.last_id();
    let g = existing_group(s, args)?;
    if args.len() != 5 && args.len() != 7 {
        return Err(subcommand_syntax("XGROUP", &args[1]));
    }
    let id = match &args[4][..] {
        b"$" => last,
        arg => parse_id_full(arg, 0, false, false)?.id,
    };
    g.set_last_id(id);
    g.set_entries_read(entries_read);
    Ok(Reply::ok())
}

fn xgroup_destroy<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let s = group_stream(store, db, &args[2], ctx)?;
    Ok(Reply::Int(i64::from(s.destroy_group(&args[3]))))
}

fn xgroup_createconsumer<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let s = group_stream(store, db, &args[2], ctx)?;
    let g = existing_group(s, args)?;
    if g.has_consumer(&args[4]) {
        return Ok(Reply::Int(0));
    }
    g.touch_consumer(&args[4], ctx.now_ms);
    Ok(Reply::Int(1))
}

fn xgroup_delconsumer<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let s = group_stream(store, db, &args[2], ctx)?;
    let g = existing_group(s, args)?;
    let pending = g.delete_consumer(&args[4]).unwrap_or(0);
    Ok(Reply::Int(pending as i64))
}

const XGROUP_HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

fn xgroup_help<K: Keyspace>(_: &Store<K>, _: usize, _: &[Bytes], _: &Ctx) -> CmdResult {
    Ok(help_reply(XGROUP_HELP))
}

// ---------------------------------------------------------------------------
// XACK / XPENDING / XCLAIM / XAUTOCLAIM
// ---------------------------------------------------------------------------

fn xack<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let Some(s) = write_stream(store, db, &args[1], ctx)? else {
        return Ok(Reply::Int(0));
    };
    let Some(g) = s.group_mut(&args[2]) else {
        return Ok(Reply::Int(0));
    };
    let ids = args[3..]
        .iter()
        .map(|a| parse_strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let acked = ids.into_iter().filter(|id| g.remove_pending(*id)).count();
    Ok(Reply::Int(acked as i64))
}

/// The extended form's arguments of XPENDING.
struct PendingRange<'a> {
    min_idle: i64,
    start: StreamId,
    end: StreamId,
    count: usize,
    consumer: Option<&'a Bytes>,
}

fn parse_pending_range(args: &[Bytes]) -> Result<Option<PendingRange<'_>>, CmdError> {
    if args.len() != 3 && !(6..=9).contains(&args.len()) {
        return Err(CmdError::Syntax);
    }
    if args.len() == 3 {
        return Ok(None);
    }
    let mut at = 3;
    let mut min_idle = 0;
    if eq_ic(&args[3], "idle") {
        min_idle = parse_i64(&args[4])?;
        if args.len() < 8 {
            return Err(CmdError::Syntax);
        }
        at += 2;
    }
    let count = parse_count(&args[at + 2])?;
    let start = parse_range_start(&args[at])?;
    let end = parse_range_end(&args[at + 1])?;
    Ok(Some(PendingRange {
        min_idle,
        start,
        end,
        count,
        consumer: args.get(at + 3),
    }))
}

fn xpending<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let range = parse_pending_range(args)?;
    let s = read_stream(store, db, &args[1], ctx)?;
    let Some(g) = s.and_then(|s| s.group(&args[2])) else {
        return Err(nogroup(&args[1], &args[2]));
    };
    match range {
        None => Ok(pending_summary(g)),
        Some(r) => Ok(pending_entries(g, &r, ctx.now_ms)),
    }
}

fn pending_summary(g: &impl ConsumerGroup) -> Reply {
    let mut pel = g.pending_in(StreamId::MIN, StreamId::MAX).map(|(id, _)| id);
    let Some(first) = pel.next() else {
        return Reply::Array(vec![Reply::Int(0), Reply::Nil, Reply::Nil, Reply::NilArray]);
    };
    let last = pel.next_back().unwrap_or(first);
    let consumers = g
        .consumers()
        .filter(|c| c.pending > 0)
        .map(|c| {
            Reply::Array(vec![
                Reply::Bulk(Bytes::copy_from_slice(c.name)),
                Reply::Bulk(Bytes::from(c.pending.to_string())),
            ])
        })
        .collect();
    Reply::Array(vec![
        Reply::Int(g.pending_count() as i64),
        id_reply(first),
        id_reply(last),
        Reply::Array(consumers),
    ])
}

fn pending_entries(g: &impl ConsumerGroup, r: &PendingRange, now_ms: u64) -> Reply {
    if r.start > r.end {
        return Reply::Array(Vec::new());
    }
    // Lazy: a small COUNT over a long pending list reads only what it
    // returns (plus what IDLE skips).
    let ids: Box<dyn Iterator<Item = StreamId>> = match r.consumer {
        Some(name) => Box::new(g.consumer_pending(name, r.start, r.end)),
        None => Box::new(g.pending_in(r.start, r.end).map(|(id, _)| id)),
    };
    let mut out = Vec::new();
    for id in ids {
        if out.len() >= r.count {
            break;
        }
        let Some(p) = g.pending(id) else {
            continue;
        };
        let idle = now_ms.saturating_sub(p.delivery_time) as i64;
        if r.min_idle != 0 && idle < r.min_idle {
            continue;
        }
        out.push(Reply::Array(vec![
            id_reply(id),
            Reply::Bulk(Bytes::copy_from_slice(p.consumer)),
            Reply::Int(idle),
            Reply::Int(p.delivery_count as i64),
        ]));
    }
    Reply::Array(out)
}

/// XCLAIM's options after the ids.
#[derive(Default)]
struct ClaimOpts {
    force: bool,
    justid: bool,
    /// Delivery time (Unix ms), from IDLE or TIME.
    delivery_time: Option<i64>,
    retry_count: Option<u64>,
    last_id: StreamId,
}

fn parse_claim_opts(args: &[Bytes], from: usize, now_ms: u64) -> Result<ClaimOpts, CmdError> {
    let mut o = ClaimOpts::default();
    let mut j = from;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = &args[j][..];
        let int = |a: &[u8], what: &'static str| {
            parse_i64(a).map_err(|_| {
                CmdError::other(format!("ERR Invalid {what} option argument for XCLAIM"))
            })
        };
        if eq_ic(opt, "force") {
            o.force = true;
        } else if eq_ic(opt, "justid") {
            o.justid = true;
        } else if eq_ic(opt, "idle") && more > 0 {
            j += 1;
            o.delivery_time = Some((now_ms as i64).saturating_sub(int(&args[j], "IDLE")?));
        } else if eq_ic(opt, "time") && more > 0 {
            j += 1;
            o.delivery_time = Some(int(&args[j], "TIME")?);
        } else if eq_ic(opt, "retrycount") && more > 0 {
            j += 1;
            // A negative count means "not given", as Redis's -1 does.
            o.retry_count = u64::try_from(int(&args[j], "RETRYCOUNT")?).ok();
        } else if eq_ic(opt, "lastid") && more > 0 {
            j += 1;
            o.last_id = parse_strict_id(&args[j])?;
        } else {
            return Err(CmdError::other(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                lossy(opt)
            )));
        }
        j += 1;
    }
    Ok(o)
}

fn parse_min_idle(arg: &[u8], cmd: &str) -> Result<u64, CmdError> {
    let n = parse_i64(arg)
        .map_err(|_| CmdError::other(format!("ERR Invalid min-idle-time argument for {cmd}")))?;
    Ok(n.max(0) as u64)
}

/// The group of a claim, or NOGROUP.
fn claim_group<'a, K: Keyspace>(
    store: &'a mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> Result<&'a mut K::Stream, CmdError> {
    match write_stream(store, db, &args[1], ctx)? {
        Some(s) if s.group(&args[2]).is_some() => Ok(s),
        _ => Err(nogroup(&args[1], &args[2])),
    }
}

fn xclaim<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let now = ctx.now_ms;
    let s = claim_group(store, db, args, ctx)?;
    let min_idle = parse_min_idle(&args[4], "XCLAIM")?;
    let ids: Vec<StreamId> = args[5..]
        .iter()
        .map_while(|a| parse_strict_id(a).ok())
        .collect();
    let opts = parse_claim_opts(args, 5 + ids.len(), now)?;
    let delivery_time = match opts.delivery_time {
        Some(t) if t >= 0 && t as u64 <= now => t as u64,
        _ => now,
    };
    let group = &args[2][..];
    let consumer = &args[3][..];
    let had = has_consumer(s, group, consumer);
    if let Some(g) = s.group_mut(group) {
        if opts.last_id > g.last_id() {
            g.set_last_id(opts.last_id);
        }
    }
    let mut out = Vec::new();
    for id in ids {
        let exists = s.contains(id);
        let Some(g) = s.group_mut(group) else {
            break;
        };
        if !exists {
            g.remove_pending(id);
            continue;
        }
        let count = match g.pending(id) {
            Some(p) if min_idle > 0 && now.saturating_sub(p.delivery_time) < min_idle => continue,
            Some(p) => p.delivery_count,
            // FORCE claims an id nobody has pending, as delivered once now.
            None if opts.force => 1,
            None => continue,
        };
        let count = match opts.retry_count {
            Some(n) => n,
            None if !opts.justid => count + 1,
            None => count,
        };
        g.claim(id, consumer, delivery_time, count, now);
        out.push(if opts.justid {
            id_reply(id)
        } else {
            entry_or_nil(s, id)
        });
    }
    // The consumer is created by its first claim, as in Redis.
    if !had && has_consumer(s, group, consumer) {
        store.emit(notify::STREAM, "xgroup-createconsumer", db, &args[1]);
    }
    Ok(Reply::Array(out))
}

fn xautoclaim<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let now = ctx.now_ms;
    let min_idle = parse_min_idle(&args[4], "XAUTOCLAIM")?;
    let start = parse_range_start(&args[5])?;
    let (mut count, mut justid) = (100u64, false);
    let mut j = 6;
    while j < args.len() {
        if eq_ic(&args[j], "count") && j + 1 < args.len() {
            let n =
                parse_i64(&args[j + 1]).map_err(|_| CmdError::other("ERR COUNT must be > 0"))?;
            if !(1..=i64::MAX / 16).contains(&n) {
                return Err(CmdError::other("ERR COUNT must be > 0"));
            }
            count = n as u64;
            j += 1;
        } else if eq_ic(&args[j], "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let s = claim_group(store, db, args, ctx)?;
    let group = &args[2][..];
    let consumer = &args[3][..];
    let had = has_consumer(s, group, consumer);
    let mut attempts = count * 10;
    let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
    // At most `attempts` entries are looked at, plus one for the cursor.
    let pel_ids: Vec<StreamId> = match s.group(group) {
        Some(g) => g
            .pending_in(start, StreamId::MAX)
            .map(|(id, _)| id)
            .take(
                usize::try_from(attempts)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1),
            )
            .collect(),
        None => Vec::new(),
    };
    let mut cursor = StreamId::MIN;
    let mut it = pel_ids.into_iter().peekable();
    while attempts > 0 && count > 0 {
        attempts -= 1;
        let Some(id) = it.next() else {
            break;
        };
        let exists = s.contains(id);
        let Some(g) = s.group_mut(group) else {
            break;
        };
        if !exists {
            g.remove_pending(id);
            deleted.push(id_reply(id));
            count -= 1;
            continue;
        }
        let Some(p) = g.pending(id) else {
            continue;
        };
        if min_idle > 0 && now.saturating_sub(p.delivery_time) < min_idle {
            continue;
        }
        let deliveries = p.delivery_count + u64::from(!justid);
        g.claim(id, consumer, now, deliveries, now);
        claimed.push(if justid {
            id_reply(id)
        } else {
            entry_or_nil(s, id)
        });
        count -= 1;
    }
    if let Some(next) = it.peek() {
        cursor = *next;
    }
    if !had && has_consumer(s, group, consumer) {
        store.emit(notify::STREAM, "xgroup-createconsumer", db, &args[1]);
    }
    Ok(Reply::Array(vec![
        id_reply(cursor),
        Reply::Array(claimed),
        Reply::Array(deleted),
    ]))
}

// ---------------------------------------------------------------------------
// XINFO / XSETID
// ---------------------------------------------------------------------------

fn info_stream_of<'a, K: Keyspace>(
    store: &'a Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> Result<&'a K::Stream, CmdError> {
    read_stream(store, db, &args[2], ctx)?.ok_or(CmdError::NoSuchKey)
}

fn bulk_field(name: &'static str, v: Reply) -> (Reply, Reply) {
    (Reply::bulk_str(name), v)
}

fn opt_int(v: Option<u64>) -> Reply {
    v.map_or(Reply::Nil, |n| Reply::Int(n as i64))
}

fn xinfo_stream<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let s = info_stream_of(store, db, args, ctx)?;
    let rest = &args[3..];
    let (full, count) = match rest.len() {
        0 => (false, 10),
        1 if eq_ic(&rest[0], "full") => (true, 10),
        3 if eq_ic(&rest[0], "full") && eq_ic(&rest[1], "count") => {
            let n = parse_i64(&rest[2])?;
            (true, if n < 0 { 10 } else { n as usize })
        }
        _ => return Err(subcommand_syntax("XINFO", &args[1])),
    };
    let mut m = vec![
        bulk_field("length", Reply::Int(s.len() as i64)),
        bulk_field("radix-tree-keys", Reply::Int(s.node_count() as i64)),
        bulk_field("radix-tree-nodes", Reply::Int(rax_nodes_estimate(s))),
        bulk_field("last-generated-id", id_reply(s.last_id())),
        bulk_field("max-deleted-entry-id", id_reply(s.max_deleted_id())),
        bulk_field("entries-added", Reply::Int(s.entries_added() as i64)),
        bulk_field("recorded-first-entry-id", id_reply(s.first_id())),
    ];
    if !full {
        m.push(bulk_field("groups", Reply::Int(s.group_count() as i64)));
        let edge = |e: Option<StreamEntry>| e.as_ref().map_or(Reply::Nil, entry_reply);
        m.push(bulk_field("first-entry", edge(s.first_entry())));
        m.push(bulk_field("last-entry", edge(s.last_entry())));
        return Ok(Reply::Map(m));
    }
    let limit = (count > 0).then_some(count);
    let entries = s.range(StreamId::MIN, StreamId::MAX, limit, false);
    m.push(bulk_field("entries", entries_reply(&entries)));
    let groups = s
        .groups()
        .map(|(name, g)| full_group_reply(s, name, g, limit))
        .collect();
    m.push(bulk_field("groups", Reply::Array(groups)));
    Ok(Reply::Map(m))
}

/// Redis reports its radix tree's node count, an internal figure; one
/// node per key plus a root is what small streams show.
fn rax_nodes_estimate(s: &impl StreamOps) -> i64 {
    s.node_count() as i64 + 1
}

fn full_group_reply<S: StreamOps>(s: &S, name: &[u8], g: &S::Group, limit: Option<usize>) -> Reply {
    let take = limit.unwrap_or(usize::MAX);
    let pending = g
        .pending_in(StreamId::MIN, StreamId::MAX)
        .take(take)
        .map(|(id, p)| {
            Reply::Array(vec![
                id_reply(id),
                Reply::Bulk(Bytes::copy_from_slice(p.consumer)),
                Reply::Int(p.delivery_time as i64),
                Reply::Int(p.delivery_count as i64),
            ])
        })
        .collect();
    let consumers = g
        .consumers()
        .map(|c| full_consumer_reply(g, c, take))
        .collect();
    Reply::Map(vec![
        bulk_field("name", Reply::Bulk(Bytes::copy_from_slice(name))),
        bulk_field("last-delivered-id", id_reply(g.last_id())),
        bulk_field("entries-read", opt_int(g.entries_read())),
        bulk_field("lag", s.group_lag(g).map_or(Reply::Nil, Reply::Int)),
        bulk_field("pel-count", Reply::Int(g.pending_count() as i64)),
        bulk_field("pending", Reply::Array(pending)),
        bulk_field("consumers", Reply::Array(consumers)),
    ])
}

/// One consumer in XINFO STREAM FULL, with up to `take` of its pending
/// entries.
fn full_consumer_reply(g: &impl ConsumerGroup, c: ConsumerInfo, take: usize) -> Reply {
    let pending = g
        .consumer_pending(c.name, StreamId::MIN, StreamId::MAX)
        .take(take)
        .filter_map(|id| g.pending(id).map(|p| (id, p)))
        .map(|(id, p)| {
            Reply::Array(vec![
                id_reply(id),
                Reply::Int(p.delivery_time as i64),
                Reply::Int(p.delivery_count as i64),
            ])
        })
        .collect();
    Reply::Map(vec![
        bulk_field("name", Reply::Bulk(Bytes::copy_from_slice(c.name))),
        bulk_field("seen-time", Reply::Int(c.seen_time as i64)),
        bulk_field("pel-count", Reply::Int(c.pending as i64)),
        bulk_field("pending", Reply::Array(pending)),
    ])
}

fn xinfo_groups<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let s = info_stream_of(store, db, args, ctx)?;
    let groups = s
        .groups()
        .map(|(name, g)| {
            Reply::Map(vec![
                bulk_field("name", Reply::Bulk(Bytes::copy_from_slice(name))),
                bulk_field("consumers", Reply::Int(g.consumer_count() as i64)),
                bulk_field("pending", Reply::Int(g.pending_count() as i64)),
                bulk_field("last-delivered-id", id_reply(g.last_id())),
                bulk_field("entries-read", opt_int(g.entries_read())),
                bulk_field("lag", s.group_lag(g).map_or(Reply::Nil, Reply::Int)),
            ])
        })
        .collect();
    Ok(Reply::Array(groups))
}

fn xinfo_consumers<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let s = info_stream_of(store, db, args, ctx)?;
    let Some(g) = s.group(&args[3]) else {
        return Err(nogroup_for_key(&args[3], &args[2]));
    };
    let consumers = g
        .consumers()
        .map(|c| {
            Reply::Map(vec![
                bulk_field("name", Reply::Bulk(Bytes::copy_from_slice(c.name))),
                bulk_field("pending", Reply::Int(c.pending as i64)),
                bulk_field(
                    "idle",
                    Reply::Int(ctx.now_ms.saturating_sub(c.seen_time) as i64),
                ),
            ])
        })
        .collect();
    Ok(Reply::Array(consumers))
}

const XINFO_HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

fn xinfo_help<K: Keyspace>(_: &Store<K>, _: usize, _: &[Bytes], _: &Ctx) -> CmdResult {
    Ok(help_reply(XINFO_HELP))
}

fn xsetid<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let id = parse_strict_id(&args[2])?;
    let (mut entries_added, mut max_deleted) = (None, StreamId::MIN);
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if eq_ic(&args[i], "entriesadded") && more > 0 {
            let n = parse_i64(&args[i + 1])?;
            if n < 0 {
                return Err(CmdError::other("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
            i += 2;
        } else if eq_ic(&args[i], "maxdeletedid") && more > 0 {
            max_deleted = parse_strict_id(&args[i + 1])?;
            if id < max_deleted {
                return Err(CmdError::other("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    // Redis 7.0 does not compare the id with the stream's current
    // max_deleted_entry_id; only with its top item.
    let s = write_stream(store, db, &args[1], ctx)?.ok_or(CmdError::NoSuchKey)?;
    if let Some(top) = s.last_entry().map(|e| e.id) {
        if id < top {
            return Err(CmdError::other(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added.is_some_and(|n| s.len() as u64 > n) {
            return Err(CmdError::other(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    s.set_last_id(id);
    if let Some(n) = entries_added {
        s.set_entries_added(n);
    }
    if !max_deleted.is_zero() {
        s.set_max_deleted_id(max_deleted);
    }
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_formatted_as_ms_dash_seq() {
        for (ms, seq, text) in [
            (0, 0, "0-0"),
            (1526919030474, 55, "1526919030474-55"),
            (10, 1, "10-1"),
            (
                u64::MAX,
                u64::MAX,
                "18446744073709551615-18446744073709551615",
            ),
        ] {
            assert_eq!(id_reply(StreamId::new(ms, seq)), Reply::bulk_str(text));
        }
    }

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn run_at(st: &mut Store, now_ms: u64, words: &[&str]) -> CmdResult {
        st.apply(0, &args(words), &Ctx { now_ms, seed: 1 })
    }

    fn run(st: &mut Store, words: &[&str]) -> CmdResult {
        run_at(st, 1000, words)
    }

    fn bulk(s: &str) -> Reply {
        Reply::bulk_str(s)
    }

    #[test]
    fn ids_parse_as_redis_does() {
        assert_eq!(parse_strict_id(b"5"), Ok(StreamId::new(5, 0)));
        assert_eq!(parse_strict_id(b"+5-007"), Ok(StreamId::new(5, 7)));
        assert!(parse_strict_id(b"-").is_err());
        assert!(parse_strict_id(b"1-2-3").is_err());
        assert!(parse_strict_id(b"18446744073709551616").is_err());
        assert_eq!(parse_range_end(b"5"), Ok(StreamId::new(5, u64::MAX)));
        assert_eq!(parse_range_start(b"(5-1"), Ok(StreamId::new(5, 2)));
        assert!(parse_range_start(b"(18446744073709551615-18446744073709551615").is_err());
        assert!(parse_range_end(b"(0-0").is_err());
    }

    #[test]
    fn auto_ids_come_from_the_ctx_and_stay_monotonic() {
        let mut st = Store::new(1);
        assert_eq!(
            run_at(&mut st, 500, &["XADD", "s", "*", "f", "v"]),
            Ok(bulk("500-0"))
        );
        assert_eq!(
            run_at(&mut st, 500, &["XADD", "s", "*", "f", "v"]),
            Ok(bulk("500-1"))
        );
        // The clock went back: the id keeps counting from the top.
        assert_eq!(
            run_at(&mut st, 100, &["XADD", "s", "*", "f", "v"]),
            Ok(bulk("500-2"))
        );
        assert_eq!(
            run_at(&mut st, 100, &["XADD", "s", "500-*", "f", "v"]),
            Ok(bulk("500-3"))
        );
        assert_eq!(
            run_at(&mut st, 100, &["XADD", "s", "600-*", "f", "v"]),
            Ok(bulk("600-0"))
        );
        let err = run(&mut st, &["XADD", "s", "500-9", "f", "v"]);
        assert_eq!(
            err.map_err(|e| e.text()),
            Err(
                "ERR The ID specified in XADD is equal or smaller than the target stream top item"
                    .into()
            )
        );
        assert_eq!(run(&mut st, &["XLEN", "s"]), Ok(Reply::Int(5)));
    }

    #[test]
    fn failed_xadd_on_a_missing_key_creates_nothing() {
        let mut st = Store::new(1);
        assert!(run(&mut st, &["XADD", "s", "NOMKSTREAM", "*", "f", "v"]) == Ok(Reply::Nil));
        assert!(st.db(0).get(b"s").is_none());
    }

    #[test]
    fn groups_deliver_ack_and_claim() {
        let mut st = Store::new(1);
        for id in ["1-0", "2-0", "3-0"] {
            run(&mut st, &["XADD", "s", id, "f", id]).ok();
        }
        assert_eq!(
            run(&mut st, &["XGROUP", "CREATE", "s", "g", "0"]),
            Ok(Reply::ok())
        );
        let got = run_at(
            &mut st,
            2000,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c",
                "COUNT",
                "2",
                "STREAMS",
                "s",
                ">",
            ],
        );
        let Ok(Reply::KeyedArrays(streams)) = got else {
            panic!("{got:?}")
        };
        assert_eq!(streams.len(), 1);
        assert_eq!(
            run(&mut st, &["XACK", "s", "g", "1-0", "9-0"]),
            Ok(Reply::Int(1))
        );
        // Claimed by another consumer once idle for 500 ms at 2600.
        let claimed = run_at(
            &mut st,
            2600,
            &["XCLAIM", "s", "g", "d", "500", "2-0", "JUSTID"],
        );
        assert_eq!(claimed, Ok(Reply::Array(vec![bulk("2-0")])));
        let summary = run_at(&mut st, 2600, &["XPENDING", "s", "g"]);
        assert_eq!(
            summary,
            Ok(Reply::Array(vec![
                Reply::Int(1),
                bulk("2-0"),
                bulk("2-0"),
                Reply::Array(vec![Reply::Array(vec![bulk("d"), bulk("1")])]),
            ]))
        );
    }

    #[test]
    fn blocking_xread_rewrites_dollar_and_xreadgroup_blocks() {
        let mut st = Store::new(1);
        run(&mut st, &["XADD", "s", "7-0", "f", "v"]).ok();
        let r = run(
            &mut st,
            &["XREAD", "BLOCK", "0", "STREAMS", "s", "t", "$", "$"],
        );
        let Err(CmdError::WouldBlock(on)) = r else {
            panic!("{r:?}")
        };
        assert_eq!(on.keys, args(&["s", "t"]));
        assert_eq!(
            on.rerun,
            Some(args(&[
                "XREAD", "BLOCK", "0", "STREAMS", "s", "t", "7-0", "0-0"
            ]))
        );
        run(&mut st, &["XGROUP", "CREATE", "s", "g", "$"]).ok();
        let r = run(
            &mut st,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c",
                "BLOCK",
                "10",
                "STREAMS",
                "s",
                ">",
            ],
        );
        let Err(CmdError::WouldBlock(on)) = r else {
            panic!("{r:?}")
        };
        assert_eq!(on.timeout_ms, 10);
        let rerun = on.rerun.unwrap_or_default();
        assert_eq!(rerun.get(1).map(|a| &a[..]), Some(RERUN_MARK));
        // The re-run after the group went away says so.
        run(&mut st, &["XGROUP", "DESTROY", "s", "g"]).ok();
        let words: Vec<String> = rerun
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        assert_eq!(
            run(&mut st, &words).map_err(|e| e.text()),
            Err("NOGROUP the consumer group this client was blocked on no longer exists".into())
        );
        // Without BLOCK nothing to read is a nil array.
        assert_eq!(
            run(&mut st, &["XREAD", "STREAMS", "s", "$"]),
            Ok(Reply::NilArray)
        );
    }

    #[test]
    fn streams_round_trip_through_snapshots() {
        let mut st = Store::new(1);
        for i in 1..=250 {
            let id = format!("{i}-1");
            run(&mut st, &["XADD", "s", &id, "a", "1", "b", &id]).ok();
        }
        run(&mut st, &["XDEL", "s", "3-1", "120-1"]).ok();
        run(&mut st, &["XGROUP", "CREATE", "s", "g", "0"]).ok();
        run(
            &mut st,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c",
                "COUNT",
                "5",
                "STREAMS",
                "s",
                ">",
            ],
        )
        .ok();
        run(&mut st, &["XGROUP", "CREATECONSUMER", "s", "g", "idle"]).ok();
        run(
            &mut st,
            &["XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM"],
        )
        .ok();
        let mut img = Vec::new();
        crate::snapshot::encode(&st, &mut img);
        let back = match crate::snapshot::decode(&img) {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        };
        assert!(back.dump() == st.dump());
        assert_eq!(crate::snapshot::digest(&back), crate::snapshot::digest(&st));
        run(&mut st, &["XACK", "s", "g", "1-1"]).ok();
        assert_ne!(crate::snapshot::digest(&back), crate::snapshot::digest(&st));
    }

    #[test]
    fn key_finder_and_types() {
        let a = args(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "STREAMS",
            "a",
            "b",
            ">",
            ">",
        ]);
        assert_eq!(keys_after_streams(&a), vec![5, 6]);
        assert!(keys_after_streams(&args(&["XREAD", "COUNT", "1"])).is_empty());
        let mut st = Store::new(1);
        run(&mut st, &["XADD", "s", "1", "f", "v"]).ok();
        assert_eq!(run(&mut st, &["TYPE", "s"]), Ok(Reply::simple("stream")));
        assert_eq!(run(&mut st, &["SET", "k", "v"]), Ok(Reply::ok()));
        assert_eq!(run(&mut st, &["XLEN", "k"]), Err(CmdError::WrongType));
    }
}
