//! Server commands that work on the keyspace: DBSIZE, FLUSHDB, FLUSHALL,
//! SWAPDB, MEMORY USAGE. (Commands about connections and the process live
//! in the server crate; their table entries are in `connection`.)

use crate::args::{eq_ic, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::keys::help_reply;
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags, Handler};
use bytes::Bytes;
use kvasir_engine_memory::Db;
use kvasir_resp::Reply;

const G: &str = "server";
const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
const ACL_FLUSH: &[&str] = &["keyspace", "write", "slow", "dangerous"];

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("dbsize", 1, Flags::READONLY.union(Flags::FAST), NO_KEYS, &["keyspace", "read", "fast"], G, "1.0.0", "Returns the number of keys in the database.", Handler::Read(dbsize)),
    cmd("flushdb", -1, Flags::WRITE, NO_KEYS, ACL_FLUSH, G, "1.0.0", "Removes all keys from the current database.", Handler::Write(flushdb)),
    cmd("flushall", -1, Flags::WRITE, NO_KEYS, ACL_FLUSH, G, "1.0.0", "Removes all keys from all databases.", Handler::Write(flushall)),
    cmd("swapdb", 3, Flags::WRITE.union(Flags::FAST), NO_KEYS, &["keyspace", "write", "fast", "dangerous"], G, "4.0.0", "Swaps two Redis databases.", Handler::Write(swapdb)),
    CommandSpec {
        name: "memory",
        arity: -2,
        flags: Flags::NONE,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["slow"],
        group: G,
        since: "4.0.0",
        summary: "A container for memory diagnostics commands.",
        handler: Handler::Container,
        subcommands: MEMORY_SUBS,
    },
];

#[rustfmt::skip]
const MEMORY_SUBS: &[CommandSpec] = &[
    cmd("usage", -3, Flags::READONLY, (2, 2, 1), &["read", "slow"], G, "4.0.0", "Estimates the memory usage of a key.", Handler::Read(memory_usage)),
    cmd("help", 2, Flags::LOADING.union(Flags::STALE), NO_KEYS, &["slow"], G, "4.0.0", "Returns helpful text about the different subcommands.", Handler::Read(memory_help)),
];

/// Counts every stored key, including expired ones not removed yet, as
/// Redis's DBSIZE does.
fn dbsize(store: &Store, db: usize, _args: &[Bytes], _ctx: &Ctx) -> CmdResult {
    Ok(Reply::Int(store.db(db).len() as i64))
}

/// FLUSHDB/FLUSHALL take an optional ASYNC or SYNC, which mean the same
/// here: nothing is freed in the background.
fn check_flush_mode(args: &[Bytes]) -> Result<(), CmdError> {
    match args {
        [_] => Ok(()),
        [_, mode] if eq_ic(mode, "ASYNC") || eq_ic(mode, "SYNC") => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

fn flushdb(store: &mut Store, db: usize, args: &[Bytes], _ctx: &Ctx) -> CmdResult {
    check_flush_mode(args)?;
    store.db_mut(db).clear();
    Ok(Reply::ok())
}

fn flushall(store: &mut Store, _db: usize, args: &[Bytes], _ctx: &Ctx) -> CmdResult {
    check_flush_mode(args)?;
    store.flush_all();
    Ok(Reply::ok())
}

/// SWAPDB's cluster-mode refusal belongs to the session layer, which knows
/// the mode.
fn swapdb(store: &mut Store, _db: usize, args: &[Bytes], _ctx: &Ctx) -> CmdResult {
    let a = swapdb_index(&args[1], "ERR invalid first DB index")?;
    let b = swapdb_index(&args[2], "ERR invalid second DB index")?;
    let in_range = |i: i32| usize::try_from(i).ok().filter(|&i| i < store.databases());
    let (Some(a), Some(b)) = (in_range(a), in_range(b)) else {
        return Err(CmdError::DbIndexOutOfRange);
    };
    store.swap_dbs(a, b);
    Ok(Reply::ok())
}

/// Redis parses SWAPDB's indexes as C ints, with its own error per argument.
fn swapdb_index(arg: &[u8], err: &'static str) -> Result<i32, CmdError> {
    parse_i64(arg)
        .ok()
        .and_then(|i| i32::try_from(i).ok())
        .ok_or(CmdError::other(err))
}

/// MEMORY USAGE key [SAMPLES n]. SAMPLES only matters for collections,
/// which are measured exactly here; it is validated like Redis does.
fn memory_usage(store: &Store, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let mut i = 3;
    while i < args.len() {
        match args.get(i + 1) {
            Some(n) if eq_ic(&args[i], "SAMPLES") => {
                if parse_i64(n)? < 0 {
                    return Err(CmdError::Syntax);
                }
            }
            _ => return Err(CmdError::Syntax),
        }
        i += 2;
    }
    Ok(match store.live(db, &args[2], ctx.now_ms) {
        Some(e) => Reply::Int(Db::entry_size(e) as i64),
        None => Reply::Nil,
    })
}

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

fn memory_help(_store: &Store, _db: usize, _args: &[Bytes], _ctx: &Ctx) -> CmdResult {
    Ok(help_reply(MEMORY_HELP))
}
