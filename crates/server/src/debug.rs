//! DEBUG, behind Redis 7.0's `enable-debug-command` (no by default; `yes`,
//! or `local` for loopback connections, set at start): SLEEP, OBJECT,
//! DIGEST, DIGEST-VALUE, RELOAD, LOADAOF, SET-ACTIVE-EXPIRE, PAUSE-CRON,
//! CONFIG-REWRITE-FORCE-ALL, CHANGE-REPL-ID, LOG, POPULATE,
//! ERROR, PROTOCOL, QUICKLIST-PACKED-THRESHOLD (checked, no effect) and
//! HELP, as the test suites of Redis clients use them. The subcommands
//! that crash or corrupt the server on purpose (SEGFAULT, PANIC, ASSERT,
//! OOM...) are not built: no input may crash Kvasir. OBJECT, DIGEST-VALUE,
//! RELOAD and LOADAOF read the standalone store; in cluster mode they answer an
//! error.

use crate::session::Session;
use bytes::Bytes;
use kvasir_core::args::eq_ic;
use kvasir_core::CmdError;
use kvasir_resp::Reply;
use std::time::Duration;

const NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is \
     set to \"local\", you can run it from a local connection, otherwise you need to set this \
     option in the configuration file, and then restart the server.";
const STANDALONE_ONLY: &str =
    "ERR this DEBUG subcommand reads the standalone store: not in cluster mode";

/// Whether this connection may run DEBUG.
fn allowed(s: &Session) -> bool {
    crate::listener::enabled_for(&s.server, "enable-debug-command", &s.info.addr)
}

fn unknown(sub: &[u8]) -> CmdError {
    CmdError::other(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
        String::from_utf8_lossy(sub)
    ))
}

fn hex40(v: u64) -> String {
    if v == 0 {
        "0".repeat(40)
    } else {
        format!("{v:040x}")
    }
}

pub fn run(s: &mut Session, args: &[Bytes]) -> Result<Reply, CmdError> {
    if !allowed(s) {
        return Err(CmdError::other(NOT_ALLOWED));
    }
    let sub = &args[1];
    let rest = &args[2..];
    let standalone = s.server.cluster.is_none();
    match () {
        _ if eq_ic(sub, "help") => Ok(kvasir_core::table::help_reply(HELP)),
        _ if eq_ic(sub, "sleep") && rest.len() == 1 => {
            let secs: f64 = std::str::from_utf8(&rest[0])
                .ok()
                .and_then(|t| t.parse().ok())
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or(CmdError::NotFloat)?;
            // As in Redis, the whole server sleeps (the data thread).
            std::thread::sleep(Duration::from_secs_f64(secs.min(3600.0)));
            Ok(Reply::ok())
        }
        _ if eq_ic(sub, "set-active-expire") && rest.len() == 1 => {
            let on = kvasir_core::args::parse_i64(&rest[0]).map_err(|_| CmdError::NotInteger)?;
            s.server.active_expire.set(on != 0);
            Ok(Reply::ok())
        }
        // The periodic work stops (and a signal waits) until 0, as Redis's
        // serverCron; Redis reads the number with atoi.
        _ if eq_ic(sub, "pause-cron") && rest.len() == 1 => {
            let on = kvasir_core::args::parse_i64(&rest[0]).unwrap_or(0);
            s.server.shutdown_state.pause_cron(on != 0);
            Ok(Reply::ok())
        }
        _ if eq_ic(sub, "config-rewrite-force-all") && rest.is_empty() => {
            crate::admin::rewrite_config(&s.server, true)?;
            Ok(Reply::ok())
        }
        _ if eq_ic(sub, "change-repl-id") && rest.is_empty() => Ok(Reply::ok()),
        // The client libraries' test suites make the server answer an
        // error of their choosing (LOADING, READONLY, OOM...) to test
        // how they handle it.
        _ if eq_ic(sub, "error") && rest.len() == 1 => Ok(Reply::Error(
            String::from_utf8_lossy(&rest[0]).into_owned().into(),
        )),
        _ if eq_ic(sub, "protocol") && rest.len() == 1 => protocol(s, &rest[0]),
        _ if eq_ic(sub, "log") && rest.len() == 1 => {
            tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(&rest[0]));
            Ok(Reply::ok())
        }
        _ if eq_ic(sub, "digest") && rest.is_empty() => {
            if !standalone {
                return Err(CmdError::other(STANDALONE_ONLY));
            }
            let shard = s.server.local_store.borrow();
            let store = shard.store();
            let empty = (0..store.databases()).all(|i| store.db(i).is_empty());
            let digest = if empty {
                0
            } else {
                kvasir_core::snapshot::digest(store)
            };
            Ok(Reply::Simple(hex40(digest).into()))
        }
        _ if eq_ic(sub, "digest-value") => {
            if !standalone {
                return Err(CmdError::other(STANDALONE_ONLY));
            }
            let now = crate::local_store::unix_ms();
            let shard = s.server.local_store.borrow();
            let store = shard.store();
            Ok(Reply::Array(
                rest.iter()
                    .map(|key| {
                        let d = kvasir_core::snapshot::value_digest(store, s.db, key, now);
                        Reply::Simple(hex40(d).into())
                    })
                    .collect(),
            ))
        }
        _ if eq_ic(sub, "object") && rest.len() == 1 => {
            if !standalone {
                return Err(CmdError::other(STANDALONE_ONLY));
            }
            object(s, &rest[0])
        }
        // Redis stores list elements above this size in nodes of their
        // own; Kvasir's lists have no such nodes, so the size is checked
        // as Redis checks it and changes nothing.
        _ if eq_ic(sub, "quicklist-packed-threshold") && rest.len() == 1 => {
            match std::str::from_utf8(&rest[0])
                .ok()
                .and_then(crate::config::parse_memory)
            {
                Some(size) if size <= (1u64 << 32) - (1 << 20) => Ok(Reply::ok()),
                _ => Err(CmdError::other(
                    "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                )),
            }
        }
        _ if eq_ic(sub, "loadaof") => {
            if !standalone {
                return Err(CmdError::other(STANDALONE_ONLY));
            }
            refuse_while_loading(s)?;
            crate::aof_persistence::reload(&s.server).map_err(CmdError::other)?;
            // As Redis: the data now is the folder's, nothing to save.
            s.server.dirty.set(0);
            Ok(Reply::ok())
        }
        _ if eq_ic(sub, "populate") && (1..=3).contains(&rest.len()) => {
            if !standalone {
                return Err(CmdError::other(STANDALONE_ONLY));
            }
            let count = positive(&rest[0])?;
            let prefix = rest.get(1).map_or(&b"key"[..], |p| &p[..]);
            let size = rest.get(2).map(|v| positive(v)).transpose()?;
            // A value is a bulk string: no larger than one a client may send.
            if size.is_some_and(|n| n > s.server.config.borrow().proto_max_bulk_len as u64) {
                return Err(CmdError::other(
                    "ERR value size is larger than proto-max-bulk-len",
                ));
            }
            populate(s, count, prefix, size);
            Ok(Reply::ok())
        }
        _ if eq_ic(sub, "reload") => {
            if !standalone {
                return Err(CmdError::other(STANDALONE_ONLY));
            }
            refuse_while_loading(s)?;
            reload(s, rest)
        }
        _ => Err(unknown(sub)),
    }
}

/// DEBUG PROTOCOL <type>: one reply of each RESP type, the values Redis
/// sends, for client libraries to test their RESP3 parsers with.
fn protocol(s: &Session, name: &[u8]) -> Result<Reply, CmdError> {
    let resp3 = s.info.resp.get() == kvasir_resp::Protocol::Resp3;
    let counted = |wrap: fn(Vec<Reply>) -> Reply| wrap((0..3).map(Reply::Int).collect());
    Ok(match () {
        _ if eq_ic(name, "string") => Reply::bulk_str("Hello World"),
        _ if eq_ic(name, "integer") => Reply::Int(12345),
        // Redis's fixed test value (not pi).
        _ if eq_ic(name, "double") => Reply::DoubleText(Bytes::from_static(b"3.141")),
        _ if eq_ic(name, "bignum") => {
            Reply::BigNumber(Bytes::from_static(b"1234567999999999999999999999999999999"))
        }
        _ if eq_ic(name, "null") => Reply::Nil,
        _ if eq_ic(name, "array") => counted(Reply::Array),
        _ if eq_ic(name, "set") => counted(Reply::Set),
        _ if eq_ic(name, "map") => Reply::Map(
            (0..3)
                .map(|j| (Reply::Int(j), Reply::Bool(j == 1)))
                .collect(),
        ),
        _ if eq_ic(name, "attrib") => Reply::Preceded(
            Box::new(Reply::Attribute(vec![(
                Reply::bulk_str("key-popularity"),
                Reply::Array(vec![Reply::bulk_str("key:123"), Reply::Int(90)]),
            )])),
            // An attribute is data about a reply, so a reply follows it.
            Box::new(Reply::bulk_str("Some real reply following the attribute")),
        ),
        _ if eq_ic(name, "push") => {
            if !resp3 {
                return Err(CmdError::other(
                    "ERR RESP2 is not supported by this command",
                ));
            }
            Reply::Preceded(
                Box::new(Reply::Push(vec![
                    Reply::bulk_str("server-cpu-usage"),
                    Reply::Int(42),
                ])),
                // A push is not the command's reply: one follows it.
                Box::new(Reply::bulk_str("Some real reply following the push reply")),
            )
        }
        _ if eq_ic(name, "true") => Reply::Bool(true),
        _ if eq_ic(name, "false") => Reply::Bool(false),
        _ if eq_ic(name, "verbatim") => {
            Reply::Verbatim("txt", Bytes::from_static(b"This is a verbatim\nstring"))
        }
        _ => {
            return Err(CmdError::other(
                "ERR Wrong protocol type name. Please use one of the following: \
                 string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    })
}

/// DEBUG OBJECT key: Redis's line, with the encoding OBJECT ENCODING gives
/// and the value's serialized (RDB) length.
fn object(s: &Session, key: &[u8]) -> Result<Reply, CmdError> {
    let now = crate::local_store::unix_ms();
    let shard = s.server.local_store.borrow();
    let store = shard.store();
    let entry = store
        .db(s.db)
        .get(key)
        .filter(|e| !e.is_expired(now))
        .ok_or_else(|| CmdError::other("ERR no such key"))?;
    let mut body = Vec::new();
    kvasir_core::rdb::encode_value(entry.value, &mut body);
    let lru = (now / 1000) & ((1 << 24) - 1);
    Ok(Reply::Simple(
        format!(
            "Value at:{:p} refcount:1 encoding:{} serializedlength:{} lru:{lru} lru_seconds_idle:0",
            entry.value,
            kvasir_core::keys::encoding_name(entry.value),
            body.len().saturating_sub(1),
        )
        .into(),
    ))
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: saves dump.rdb (unless
/// NOSAVE), empties the store (unless NOFLUSH) and loads the file back.
/// Redis's getPositiveLongFromObjectOrReply.
fn positive(arg: &[u8]) -> Result<u64, CmdError> {
    let n = kvasir_core::args::parse_i64(arg)?;
    u64::try_from(n).map_err(|_| CmdError::other("ERR value is out of range, must be positive"))
}

/// DEBUG POPULATE: `count` string keys `prefix:0`.. in the connection's
/// database, each `value:<n>` (with `size`: cut or padded with zero
/// bytes to that size), as Redis writes them; keys that exist are left
/// as they are. Not logged or propagated, as in Redis.
fn populate(s: &Session, count: u64, prefix: &[u8], size: Option<u64>) {
    let db = s.db;
    s.server.local_store.borrow_mut().with_store(|store| {
        let mut key = Vec::with_capacity(prefix.len() + 21);
        for n in 0..count {
            key.clear();
            key.extend_from_slice(prefix);
            key.extend_from_slice(format!(":{n}").as_bytes());
            if store.db(db).get(&key).is_some() {
                continue;
            }
            let mut value = format!("value:{n}").into_bytes();
            if let Some(size) = size {
                value.resize(size as usize, 0);
            }
            store
                .db_mut(db)
                .set(&key, kvasir_core::keyspace::Value::from_bytes(&value), None);
        }
    });
}

/// DEBUG is served while the data loads (Redis flags it `loading`), but
/// not its reloads: they would save or empty a dataset half in.
fn refuse_while_loading(s: &Session) -> Result<(), CmdError> {
    match s.server.loading.active() {
        true => Err(CmdError::other(crate::loading::LOADING_ERROR)),
        false => Ok(()),
    }
}

fn reload(s: &Session, rest: &[Bytes]) -> Result<Reply, CmdError> {
    use kvasir_core::rdb_file::Existing;
    let (mut save, mut flush, mut merge) = (true, true, false);
    for opt in rest {
        if eq_ic(opt, "nosave") {
            save = false;
        } else if eq_ic(opt, "noflush") {
            flush = false;
        } else if eq_ic(opt, "merge") {
            merge = true;
        } else {
            return Err(CmdError::other(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    if save {
        crate::persistence::save(&s.server)
            .map_err(|_| CmdError::other("ERR Error trying to save the DB"))?;
    }
    if flush {
        s.server.local_store.borrow_mut().with_store(|store| {
            for i in 0..store.databases() {
                store.db_mut(i).clear();
            }
        });
    }
    // Without a flush, a key or library the file also has fails the load
    // (Redis: "RDB has duplicated key"), unless MERGE lets the file's win.
    let merging = match (flush, merge) {
        (true, _) => None,
        (false, true) => Some(Existing::Replace),
        (false, false) => Some(Existing::Refuse),
    };
    crate::persistence::load_file_merging(&s.server, merging).map_err(|e| {
        tracing::warn!("DEBUG RELOAD: {e}");
        CmdError::other("ERR Error trying to load the RDB dump")
    })?;
    Ok(Reply::ok())
}

const HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANGE-REPL-ID",
    "    Accepted; Kvasir has no Redis replication id to change.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "OBJECT <key>",
    "    Show low level info about the `key` and associated value.",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Accepted for Redis's tests: Kvasir's lists have no plain nodes.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: Merge the content of the RDB file into the current dataset.",
    "    * NOFLUSH: Do not empty the dataset before loading the RDB.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "HELP",
    "    Prints this help.",
];
