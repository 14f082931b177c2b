//! Server commands that work on the keyspace: DBSIZE, FLUSHDB, FLUSHALL,
//! SWAPDB, MEMORY USAGE. (Commands about connections and the process live
//! in the server crate; their table entries are in `connection`.)

/// The Redis version whose behaviour Kvasir follows: INFO and HELLO
/// report it, scripts read it as `redis.REDIS_VERSION`.
pub const REDIS_VERSION: &str = "7.0.15";

use crate::args::{eq_ic, parse_i64};
use crate::connection::{s, MemoryCmd, SessionCmd};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::Keyspace;
use crate::store::{Ctx, Store};
use crate::table::{cmd, container, help_reply, CommandSpec, Flags, Keyless};
use bytes::Bytes;
use kvasir_resp::Reply;

const G: &str = "server";
const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
const ACL_FLUSH: &[&str] = &["keyspace", "write", "slow", "dangerous"];

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("dbsize", 1, Flags::READONLY.union(Flags::FAST), NO_KEYS, &["keyspace", "read", "fast"], G, "1.0.0", "Returns the number of keys in the database.", crate::read_handler!(dbsize)).reaching(Keyless::Count).with_tips(&["request_policy:all_shards", "response_policy:agg_sum"]),
    cmd("flushdb", -1, Flags::WRITE, NO_KEYS, ACL_FLUSH, G, "1.0.0", "Removes all keys from the current database.", crate::write_handler!(flushdb)).reaching(Keyless::FlushDb).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd("flushall", -1, Flags::WRITE, NO_KEYS, ACL_FLUSH, G, "1.0.0", "Removes all keys from all databases.", crate::write_handler!(flushall)).reaching(Keyless::FlushAll).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd("swapdb", 3, Flags::WRITE.union(Flags::FAST), NO_KEYS, &["keyspace", "write", "fast", "dangerous"], G, "4.0.0", "Swaps two Redis databases.", crate::write_handler!(swapdb)).reaching(Keyless::SwapDb),
    container("memory", -2, &["slow"], G, "4.0.0", "A container for memory diagnostics commands.", MEMORY_SUBS),
];

#[rustfmt::skip]
const MEMORY_SUBS: &[CommandSpec] = &[
    cmd("usage", -3, Flags::READONLY, (2, 2, 1), &["read", "slow"], G, "4.0.0", "Estimates the memory usage of a key.", crate::read_handler!(memory_usage)).keys_access(crate::table::KeyAccess::Existence),
    cmd("stats", 2, Flags::NONE, NO_KEYS, &["slow"], G, "4.0.0", "Returns details about memory usage.", s(SessionCmd::Memory(MemoryCmd::Stats))).with_tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    cmd("doctor", 2, Flags::NONE, NO_KEYS, &["slow"], G, "4.0.0", "Outputs a memory problems report.", s(SessionCmd::Memory(MemoryCmd::Doctor))).with_tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    cmd("malloc-stats", 2, Flags::NONE, NO_KEYS, &["slow"], G, "4.0.0", "Returns the allocator statistics.", s(SessionCmd::Memory(MemoryCmd::MallocStats))).with_tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    cmd("purge", 2, Flags::NONE, NO_KEYS, &["slow"], G, "4.0.0", "Asks the allocator to release memory.", s(SessionCmd::Memory(MemoryCmd::Purge))).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd("help", 2, Flags::LOADING.union(Flags::STALE), NO_KEYS, &["slow"], G, "4.0.0", "Returns helpful text about the different subcommands.", crate::read_handler!(memory_help)),
];

/// Counts every stored key, including expired ones not removed yet, as
/// Redis's DBSIZE does.
fn dbsize<K: Keyspace>(store: &Store<K>, db: usize, _args: &[Bytes], _ctx: &Ctx) -> CmdResult {
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

fn flushdb<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], _ctx: &Ctx) -> CmdResult {
    check_flush_mode(args)?;
    store.db_mut(db).clear();
    Ok(Reply::ok())
}

fn flushall<K: Keyspace>(
    store: &mut Store<K>,
    _db: usize,
    args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    check_flush_mode(args)?;
    store.flush_all();
    Ok(Reply::ok())
}

/// SWAPDB's cluster-mode refusal belongs to the session layer, which knows
/// the mode.
fn swapdb<K: Keyspace>(store: &mut Store<K>, _db: usize, args: &[Bytes], _ctx: &Ctx) -> CmdResult {
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
fn memory_usage<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
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
        Some(e) => Reply::Int(store.db(db).entry_size(e.key) as i64),
        None => Reply::Nil,
    })
}

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

fn memory_help<K: Keyspace>(
    _store: &Store<K>,
    _db: usize,
    _args: &[Bytes],
    _ctx: &Ctx,
) -> CmdResult {
    Ok(help_reply(MEMORY_HELP))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::Value;

    const NOW: u64 = 1_000_000;

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

    fn apply(s: &mut Store, db: usize, a: &[&str]) -> CmdResult {
        s.apply(db, &args(a), &ctx())
    }

    fn read(s: &Store, db: usize, a: &[&str]) -> CmdResult {
        s.read(db, &args(a), &ctx())
    }

    fn err(r: CmdResult) -> String {
        match r {
            Err(e) => e.text().into_owned(),
            Ok(reply) => panic!("expected an error, got {reply:?}"),
        }
    }

    fn put(s: &mut Store, db: usize, key: &str, expire_at: Option<u64>) {
        s.db_mut(db)
            .set(key.as_bytes(), Value::from_bytes(b"v"), expire_at);
    }

    /// Two databases with keys: db 0 has a, b (b expired), db 1 has c.
    fn store() -> Store {
        let mut s = Store::default();
        put(&mut s, 0, "a", None);
        put(&mut s, 0, "b", Some(NOW));
        put(&mut s, 1, "c", None);
        s
    }

    #[test]
    fn dbsize_counts_expired_keys_not_yet_removed() {
        let s = store();
        assert_eq!(read(&s, 0, &["DBSIZE"]), Ok(Reply::Int(2)));
        assert_eq!(read(&s, 1, &["dbsize"]), Ok(Reply::Int(1)));
        assert_eq!(read(&s, 2, &["DBSIZE"]), Ok(Reply::Int(0)));
        assert_eq!(
            err(read(&s, 0, &["DBSIZE", "x"])),
            "ERR wrong number of arguments for 'dbsize' command"
        );
    }

    #[test]
    fn flushdb_clears_only_the_selected_database() {
        let mut s = store();
        assert_eq!(apply(&mut s, 0, &["FLUSHDB"]), Ok(Reply::ok()));
        assert!(s.db(0).is_empty());
        assert_eq!(s.db(0).expires_count(), 0);
        assert_eq!(s.db(1).len(), 1);
        assert_eq!(apply(&mut s, 1, &["flushdb", "async"]), Ok(Reply::ok()));
        assert!(s.db(1).is_empty());
        assert_eq!(apply(&mut s, 1, &["FLUSHDB", "SYNC"]), Ok(Reply::ok()));
        assert_eq!(
            err(apply(&mut s, 0, &["FLUSHDB", "NOW"])),
            "ERR syntax error"
        );
        assert_eq!(
            err(apply(&mut s, 0, &["FLUSHDB", "ASYNC", "SYNC"])),
            "ERR syntax error"
        );
    }

    #[test]
    fn flushall_clears_every_database() {
        let mut s = store();
        assert_eq!(
            err(apply(&mut s, 0, &["FLUSHALL", "x"])),
            "ERR syntax error"
        );
        assert_eq!(s.db(1).len(), 1, "a refused flush changes nothing");
        assert_eq!(apply(&mut s, 3, &["FLUSHALL", "ASYNC"]), Ok(Reply::ok()));
        assert!((0..s.databases()).all(|i| s.db(i).is_empty()));
        assert_eq!(apply(&mut s, 0, &["FLUSHALL"]), Ok(Reply::ok()));
    }

    #[test]
    fn swapdb_swaps_contents() {
        let mut s = store();
        assert_eq!(apply(&mut s, 5, &["SWAPDB", "0", "1"]), Ok(Reply::ok()));
        assert!(s.db(0).get(b"c").is_some());
        assert!(s.db(1).get(b"a").is_some());
        assert_eq!(s.db(1).expires_count(), 1);
        assert_eq!(apply(&mut s, 0, &["SWAPDB", "1", "1"]), Ok(Reply::ok()));
        assert!(s.db(1).get(b"a").is_some());
    }

    #[test]
    fn swapdb_errors() {
        let mut s = store();
        let cases = [
            (["SWAPDB", "x", "1"], "ERR invalid first DB index"),
            (["SWAPDB", "0", "1.5"], "ERR invalid second DB index"),
            (["SWAPDB", "x", "y"], "ERR invalid first DB index"),
            (["SWAPDB", "4294967296", "0"], "ERR invalid first DB index"),
            (["SWAPDB", "0", "16"], "ERR DB index is out of range"),
            (["SWAPDB", "-1", "0"], "ERR DB index is out of range"),
        ];
        for (a, text) in cases {
            assert_eq!(err(apply(&mut s, 0, &a)), text, "{a:?}");
        }
        assert_eq!(
            err(apply(&mut s, 0, &["SWAPDB", "0"])),
            "ERR wrong number of arguments for 'swapdb' command"
        );
    }

    #[test]
    fn memory_usage() {
        let mut s = store();
        s.db_mut(0)
            .set(b"long", Value::from_bytes(&[b'x'; 1000]), None);
        let Ok(Reply::Int(small)) = read(&s, 0, &["MEMORY", "USAGE", "a"]) else {
            panic!("no size")
        };
        let Ok(Reply::Int(big)) = read(&s, 0, &["memory", "usage", "long", "SAMPLES", "0"]) else {
            panic!("no size")
        };
        assert!(small > 0 && big >= small + 1000, "{small} {big}");
        assert_eq!(
            read(&s, 0, &["MEMORY", "USAGE", "b"]),
            Ok(Reply::Nil),
            "expired"
        );
        assert_eq!(read(&s, 0, &["MEMORY", "USAGE", "zz"]), Ok(Reply::Nil));
        assert_eq!(
            err(read(&s, 0, &["MEMORY", "USAGE", "a", "SAMPLES", "-1"])),
            "ERR syntax error"
        );
        assert_eq!(
            err(read(&s, 0, &["MEMORY", "USAGE", "a", "SAMPLES", "x"])),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err(read(&s, 0, &["MEMORY", "USAGE", "a", "SAMPLES"])),
            "ERR syntax error"
        );
        assert_eq!(
            err(read(&s, 0, &["MEMORY", "USAGE", "a", "FOO", "1"])),
            "ERR syntax error"
        );
        assert_eq!(
            err(read(&s, 0, &["MEMORY", "USAGE"])),
            "ERR wrong number of arguments for 'memory|usage' command"
        );
        assert_eq!(
            err(read(&s, 0, &["MEMORY", "NOSUCH"])),
            "ERR unknown subcommand 'NOSUCH'. Try MEMORY HELP."
        );
        let Ok(Reply::Array(help)) = read(&s, 0, &["MEMORY", "HELP"]) else {
            panic!("no help")
        };
        assert_eq!(help.len(), MEMORY_HELP.len());
    }

    #[test]
    fn table_entries() {
        let memory = crate::table::lookup(b"memory").expect("memory");
        let usage = memory
            .subcommands
            .iter()
            .find(|s| s.name == "usage")
            .expect("memory|usage");
        assert_eq!(usage.key_indexes(5), vec![2]);
        for c in COMMANDS {
            let writes = matches!(c.handler, crate::table::Handler::Write(_));
            assert_eq!(writes, c.is_write(), "{}", c.name);
        }
    }
}
