//! Streams run side by side against Kvasir and a real `redis-server` (7.0):
//! identical replies (error texts included) for XADD, XRANGE, XREAD,
//! trimming, consumer groups (XREADGROUP, XACK, XPENDING, XCLAIM,
//! XAUTOCLAIM), XINFO and XSETID. Explicit ids are used where ids would
//! depend on the clock; times (idle, seen-time, delivery times) and the
//! radix tree's internal node count are masked.
//!
//! Then Kvasir alone: blocking XREAD / XREADGROUP woken by XADD from
//! another client, timeouts, `$` semantics, MULTI; and the same in a
//! three-node cluster.
//!
//! Needs `redis-server` on PATH (scripts/install-test-deps.sh); fails, does
//! not skip, when it is missing.

mod common;

#[path = "common/cluster.rs"]
mod cluster;

use common::redis_server::{run, start_redis, Outcome, Rng};
use common::Kvasir;
use redis::Value;
use std::thread;
use std::time::{Duration, Instant};

/// Both servers, and every difference seen so far.
struct Pair {
    real: redis::Connection,
    ours: redis::Connection,
    mismatches: Vec<String>,
}

impl Pair {
    fn start() -> (Pair, common::ChildGuard, Kvasir) {
        let (guard, port) = start_redis();
        let real = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
            .expect("connect to redis-server");
        let server = Kvasir::start(&[]);
        let ours = server.conn();
        let pair = Pair {
            real,
            ours,
            mismatches: Vec::new(),
        };
        (pair, guard, server)
    }

    /// Sends `args` to both and records a difference (after `mask`).
    fn check(&mut self, args: &[&str], mask: fn(Outcome) -> Outcome) -> Outcome {
        let want = mask(run(&mut self.real, args));
        let got = mask(run(&mut self.ours, args));
        if want != got {
            self.mismatches
                .push(format!("{args:?}\n  redis:  {want:?}\n  kvasir: {got:?}"));
        }
        want
    }

    fn cmd(&mut self, args: &[&str]) {
        let _ = self.check(args, |o| o);
    }

    /// Times and internal counts masked.
    fn timed(&mut self, args: &[&str]) {
        let _ = self.check(args, |o| o.map(mask_times));
    }

    fn script(&mut self, lines: &[&[&str]]) {
        for l in lines {
            self.cmd(l);
        }
    }

    fn assert_clean(&self) {
        assert!(
            self.mismatches.is_empty(),
            "{} mismatches:\n{}",
            self.mismatches.len(),
            self.mismatches.join("\n")
        );
    }
}

const MASKED_FIELDS: [&[u8]; 3] = [b"idle", b"seen-time", b"radix-tree-nodes"];

/// Replaces time-dependent integers with 0: the values of `idle`,
/// `seen-time` and `radix-tree-nodes` in maps (flat arrays in RESP2), the
/// idle / delivery time of XPENDING and XINFO FULL pending entries
/// (`[id, consumer, time, count]` and `[id, time, count]`).
fn mask_times(v: Value) -> Value {
    match v {
        Value::Array(items) => {
            let masked_pair =
                |k: &Value| matches!(k, Value::BulkString(b) if MASKED_FIELDS.contains(&&b[..]));
            let mut out: Vec<Value> = Vec::with_capacity(items.len());
            for item in items {
                let after_masked_key = out.last().is_some_and(masked_pair) && out.len() % 2 == 1;
                out.push(if after_masked_key {
                    Value::Int(0)
                } else {
                    mask_times(item)
                });
            }
            let is_id = |v: &Value| matches!(v, Value::BulkString(b) if b.contains(&b'-') && b[0].is_ascii_digit());
            match out.as_slice() {
                [id, Value::BulkString(_), Value::Int(_), Value::Int(_)] if is_id(id) => {
                    out[2] = Value::Int(0)
                }
                [id, Value::Int(_), Value::Int(_)] if is_id(id) => out[1] = Value::Int(0),
                _ => {}
            }
            Value::Array(out)
        }
        other => other,
    }
}

#[test]
fn basic_commands_and_errors_match_redis() {
    let (mut p, _guard, _server) = Pair::start();
    p.script(&[
        &["XADD", "s", "1-1", "a", "1", "b", "2"],
        &["XADD", "s", "1-1", "a", "1"],
        &["XADD", "s", "0-0", "a", "1"],
        &["XADD", "s", "0", "a", "1"],
        &["XADD", "s", "1-*", "a", "1"],
        &["XADD", "s", "2-*", "a", "1", "b", "2"],
        &["XADD", "s", "2-5", "c", "3"],
        &["XADD", "s", "3", "x"],
        &["XADD", "s", "3", "x", "y", "z"],
        &["XADD", "s", "MAXLEN", "abc", "*", "a", "1"],
        &["XADD", "s", "MAXLEN", "-1", "*", "a", "1"],
        &["XADD", "s", "MAXLEN", "5", "MINID", "1", "*", "a", "1"],
        &["XADD", "s", "LIMIT", "5", "*", "a", "1"],
        &["XADD", "s", "MAXLEN", "5", "LIMIT", "5", "*", "a", "1"],
        &[
            "XADD", "s", "MAXLEN", "~", "5", "LIMIT", "-1", "*", "a", "1",
        ],
        &["XADD", "s", "NOMKSTREAM", "5-5", "a", "1"],
        &["XADD", "nos", "NOMKSTREAM", "*", "a", "1"],
        &["XADD", "s", "abc", "a", "1"],
        &["XADD", "s", "5-x", "a", "1"],
        &["XADD", "s", "+", "a", "1"],
        &["XADD", "s", "-", "a", "1"],
        &["XADD", "s", "6-0", "a", "1", "b", "2"],
        &["XADD", "s", "7-0", "b", "2", "a", "1"],
        &["XLEN", "s"],
        &["XLEN", "nos"],
        &["XRANGE", "s", "-", "+"],
        &["XRANGE", "s", "-", "+", "COUNT", "2"],
        &["XRANGE", "s", "-", "+", "COUNT", "0"],
        &["XRANGE", "s", "-", "+", "COUNT", "-1"],
        &["XRANGE", "s", "(1-1", "+"],
        &["XRANGE", "s", "-", "(2-1"],
        &["XRANGE", "s", "2", "2"],
        &["XRANGE", "s", "(", "+"],
        &["XRANGE", "s", "(-", "+"],
        &["XRANGE", "s", "-", "+", "FOO"],
        &["XRANGE", "s", "-", "+", "COUNT", "x"],
        &[
            "XRANGE",
            "s",
            "(18446744073709551615-18446744073709551615",
            "+",
        ],
        &["XRANGE", "s", "-", "(0-0"],
        &["XRANGE", "s", "5", "1"],
        &["XRANGE", "nos", "-", "+"],
        &["XREVRANGE", "s", "+", "-"],
        &["XREVRANGE", "s", "+", "-", "COUNT", "1"],
        &["XREVRANGE", "s", "(5-5", "(1-1"],
        &["XDEL", "s", "2-0", "9-9"],
        &["XDEL", "s", "bad"],
        &["XDEL", "nos", "1-1"],
        // The key is looked at before the IDs: a missing key answers 0,
        // another type WRONGTYPE, and one bad ID deletes nothing.
        &["XDEL", "nos", "bad"],
        &["XDEL", "s", "3-0", "bad"],
        &["XLEN", "s"],
        &["XTRIM", "s"],
        &["XTRIM", "s", "MAXLEN"],
        &["XTRIM", "s", "FOO", "1"],
        &["XTRIM", "s", "MAXLEN", "~", "2", "LIMIT", "5", "FOO"],
        &["XTRIM", "s", "MAXLEN", "4"],
        &["XRANGE", "s", "-", "+"],
        &["XTRIM", "s", "MINID", "5-5"],
        &["XRANGE", "s", "-", "+"],
        &["XTRIM", "nos", "MAXLEN", "0"],
        &["SET", "str", "x"],
        &["XADD", "str", "*", "a", "1"],
        &["XRANGE", "str", "-", "+"],
        &["XLEN", "str"],
        &["XDEL", "str", "bad"],
        &["TYPE", "s"],
        &["OBJECT", "ENCODING", "s"],
        &["XSETID", "s", "1-1"],
        &["XSETID", "s", "99-0"],
        &["XSETID", "s", "99-0", "ENTRIESADDED", "0"],
        &["XSETID", "s", "99-0", "ENTRIESADDED", "-1"],
        &[
            "XSETID",
            "s",
            "99-0",
            "ENTRIESADDED",
            "100",
            "MAXDELETEDID",
            "100-0",
        ],
        &[
            "XSETID",
            "s",
            "99-0",
            "ENTRIESADDED",
            "100",
            "MAXDELETEDID",
            "50-0",
        ],
        &["XSETID", "s", "49-0"],
        &["XSETID", "nos", "1-1"],
        &["XSETID", "s", "100-0", "FOO"],
        &["XSETID", "str", "100-0"],
        &["XINFO", "STREAM", "nos"],
        &["XINFO", "STREAM", "str"],
        &["XINFO", "STREAM", "s", "FOO"],
        &["XINFO", "STREAM", "s", "FULL", "COUNT"],
        &["XINFO", "FOO", "s"],
        &["XINFO", "HELP"],
        &["XGROUP", "HELP"],
        &["XGROUP", "FOO"],
        // The clock is behind the stream's top item: auto ids keep counting.
        &["XADD", "future", "99999999999999-5", "a", "1"],
        &["XADD", "future", "*", "a", "1"],
        &["XADD", "future", "99999999999999-*", "a", "1"],
        &[
            "XADD",
            "future",
            "18446744073709551615-18446744073709551615",
            "a",
            "1",
        ],
        &["XADD", "future", "*", "a", "1"],
        &["XADD", "future", "18446744073709551615-*", "a", "1"],
        &["DEL", "future", "nos"],
    ]);
    p.timed(&["XINFO", "STREAM", "s"]);
    p.timed(&["XINFO", "STREAM", "s", "FULL"]);
    p.assert_clean();
}

#[test]
fn auto_ids_use_the_current_time() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let now = common::now_secs() * 1000;
    let id: String = common::q(&mut c, &["XADD", "s", "*", "f", "v"]);
    let (ms, seq) = id.split_once('-').expect("an id");
    let ms: u64 = ms.parse().expect("ms");
    assert!(
        ms + 5_000 >= now && ms <= now + 5_000,
        "{id} far from {now}"
    );
    assert_eq!(seq, "0");
    let next: String = common::q(&mut c, &["XADD", "s", &format!("{ms}-*"), "f", "v"]);
    assert_eq!(next, format!("{ms}-1"));
}

#[test]
fn trimming_matches_redis_node_by_node() {
    let (mut p, _guard, _server) = Pair::start();
    for i in 1..=700 {
        let id = format!("{i}-0");
        let v = format!("value-{i}");
        p.cmd(&["XADD", "t", &id, "field", &v, "other", "x"]);
    }
    p.script(&[
        &["XTRIM", "t", "MAXLEN", "~", "650"],
        &["XLEN", "t"],
        &["XTRIM", "t", "MAXLEN", "~", "550"],
        &["XTRIM", "t", "MAXLEN", "~", "550", "LIMIT", "50"],
        &["XTRIM", "t", "MAXLEN", "~", "300", "LIMIT", "150"],
        &["XTRIM", "t", "MINID", "~", "450"],
        &["XTRIM", "t", "MINID", "=", "455-0"],
        &["XLEN", "t"],
        &["XADD", "t", "MAXLEN", "~", "100", "701-0", "field", "v"],
        &["XADD", "t", "MAXLEN", "=", "100", "702-0", "field", "v"],
        &["XLEN", "t"],
        &["XADD", "t", "MINID", "650", "703-0", "field", "v"],
        &["XRANGE", "t", "-", "+", "COUNT", "3"],
        &["XDEL", "t", "650-0", "651-0", "700-0"],
        &["XADD", "t", "MAXLEN", "0", "704-0", "field", "v"],
        &["XLEN", "t"],
    ]);
    p.timed(&["XINFO", "STREAM", "t"]);
    p.assert_clean();
}

/// stream-node-max-entries decides where nodes end, and so what `~`
/// trims remove and XINFO's radix-tree-keys (the node count): a node
/// keeps the entries it got under the old setting, appends find the new
/// one, 0 means no limit by count, and an approximate trim's default
/// LIMIT is 100 nodes of it.
#[test]
fn stream_node_max_entries_places_nodes_as_redis() {
    let (mut p, _guard, _server) = Pair::start();
    let add = |p: &mut Pair, ids: std::ops::RangeInclusive<u32>| {
        for i in ids {
            let id = format!("{i}-0");
            p.cmd(&["XADD", "s", &id, "f", "v"]);
        }
    };
    p.script(&[
        &["CONFIG", "SET", "stream-node-max-entries", "10"],
        &["CONFIG", "GET", "stream-node-max-entries"],
        &["CONFIG", "SET", "stream-node-max-entries", "-1"],
        &["CONFIG", "SET", "stream-node-max-bytes", "-1"],
        &["CONFIG", "SET", "stream-node-max-bytes", "8kb"],
        &["CONFIG", "GET", "stream-node-max-bytes"],
    ]);
    add(&mut p, 1..=95);
    p.timed(&["XINFO", "STREAM", "s"]);
    p.script(&[
        &["XTRIM", "s", "MAXLEN", "~", "58"],
        &["XLEN", "s"],
        &["XDEL", "s", "61-0", "62-0"],
        &["XTRIM", "s", "MAXLEN", "~", "40"],
        &["XTRIM", "s", "MAXLEN", "~", "10", "LIMIT", "15"],
        &["XLEN", "s"],
        &["CONFIG", "SET", "stream-node-max-entries", "3"],
    ]);
    add(&mut p, 96..=110);
    p.timed(&["XINFO", "STREAM", "s"]);
    // 100 x 3 = 300 entries at most per approximate trim without LIMIT.
    p.cmd(&["DEL", "s"]);
    add(&mut p, 1..=400);
    p.script(&[
        &["XTRIM", "s", "MAXLEN", "~", "0"],
        &["XLEN", "s"],
        &["CONFIG", "SET", "stream-node-max-entries", "0"],
    ]);
    add(&mut p, 401..=700);
    p.timed(&["XINFO", "STREAM", "s"]);
    p.script(&[
        &["XTRIM", "s", "MAXLEN", "~", "0"],
        &["XLEN", "s"],
        &["XADD", "s", "MAXLEN", "~", "5", "701-0", "f", "v"],
        &["XLEN", "s"],
    ]);
    p.assert_clean();
}

#[test]
fn consumer_groups_match_redis() {
    let (mut p, _guard, _server) = Pair::start();
    p.script(&[
        &["XGROUP", "CREATE", "s", "g", "0"],
        &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"],
        &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"],
        &["XGROUP", "CREATE", "s", "g2", "0", "FOO"],
        &["XGROUP", "CREATE", "s", "g3", "0", "ENTRIESREAD", "-2"],
        &["XGROUP", "CREATE", "s", "g3", "0", "ENTRIESREAD", "x"],
        &["XGROUP", "CREATE", "s", "g3", "bad"],
        &["XGROUP", "CREATE", "s"],
        &["XADD", "s", "1-0", "f", "v1"],
        &["XADD", "s", "2-0", "f", "v2"],
        &["XADD", "s", "3-0", "f", "v3", "g", "w"],
        &["XADD", "s", "4-0", "f", "v4"],
        &["XADD", "s", "5-0", "f", "v5"],
        &["XGROUP", "CREATE", "s", "g4", "$"],
        &["XGROUP", "CREATE", "s", "g5", "2-0", "ENTRIESREAD", "2"],
        &["XINFO", "GROUPS", "s"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
        &["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"],
        &["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "1-0"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "$"],
        &["XREADGROUP", "GROUP", "nog", "c1", "STREAMS", "s", ">"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "nos", ">"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s"],
        &["XREADGROUP", "COUNT", "1", "STREAMS", "s", ">"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c3",
            "NOACK",
            "STREAMS",
            "s",
            "0",
        ],
        &["XINFO", "GROUPS", "s"],
        &["XPENDING", "s", "g"],
        &["XPENDING", "s", "nog"],
        &["XPENDING", "nos", "g"],
        &["XPENDING", "s", "g", "-", "+", "10", "nobody"],
        &["XPENDING", "s", "g", "-", "+", "x"],
        &["XPENDING", "s", "g", "IDLE", "x", "-", "+", "10"],
        &["XPENDING", "s", "g", "IDLE", "0", "-", "+"],
        &["XPENDING", "s", "g", "-", "+"],
        &["XACK", "s", "g", "1-0", "9-9"],
        &["XACK", "s", "g", "bad"],
        &["XACK", "s", "nog", "1-0"],
        &["XACK", "nos", "g", "1-0"],
        &["XACK", "s", "g", "-"],
        &["XPENDING", "s", "g"],
        &["XDEL", "s", "2-0"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"],
        &["XCLAIM", "s", "g", "c3", "0", "2-0", "3-0"],
        &["XPENDING", "s", "g"],
        &["XCLAIM", "s", "g", "c3", "0", "4-0", "JUSTID"],
        &["XCLAIM", "s", "g", "c3", "0", "4-0", "RETRYCOUNT", "7"],
        &["XCLAIM", "s", "g", "c1", "0", "5-0", "FORCE", "JUSTID"],
        &["XCLAIM", "s", "g", "c1", "0", "1-0", "FORCE"],
        &["XCLAIM", "s", "g", "c1", "0", "1-0", "FOO"],
        &["XCLAIM", "s", "g", "c1", "x", "1-0"],
        &["XCLAIM", "s", "g", "c1", "0", "1-0", "IDLE", "x"],
        &["XCLAIM", "s", "g", "c1", "0", "1-0", "TIME", "x"],
        &["XCLAIM", "s", "g", "c1", "0", "1-0", "RETRYCOUNT", "x"],
        &["XCLAIM", "s", "g", "c1", "0", "1-0", "LASTID", "bad"],
        &["XCLAIM", "s", "nog", "c1", "0", "1-0"],
        &[
            "XCLAIM", "s", "g", "c1", "0", "1-0", "LASTID", "9-0", "JUSTID",
        ],
        &["XCLAIM", "s", "g", "c1", "3600000", "1-0"],
        &["XINFO", "GROUPS", "s"],
        &["XAUTOCLAIM", "s", "g", "c9", "0", "0"],
        &["XAUTOCLAIM", "s", "g", "c9", "0", "0", "COUNT", "1"],
        &["XAUTOCLAIM", "s", "g", "c9", "0", "0", "COUNT", "0"],
        &["XAUTOCLAIM", "s", "g", "c9", "0", "0", "COUNT", "x"],
        &["XAUTOCLAIM", "s", "g", "c9", "0", "0", "FOO"],
        &["XAUTOCLAIM", "s", "g", "c9", "x", "0"],
        &["XAUTOCLAIM", "s", "g", "c9", "0", "bad"],
        &["XAUTOCLAIM", "s", "nog", "c9", "0", "0"],
        &["XAUTOCLAIM", "s", "g", "c9", "0", "0", "JUSTID"],
        &["XAUTOCLAIM", "s", "g", "c9", "3600000", "0"],
        &["XDEL", "s", "3-0"],
        &["XAUTOCLAIM", "s", "g", "c8", "0", "0", "COUNT", "2"],
        &[
            "XAUTOCLAIM",
            "s",
            "g",
            "c8",
            "0",
            "0",
            "COUNT",
            "2",
            "JUSTID",
        ],
        &[
            "XAUTOCLAIM",
            "s",
            "g",
            "c8",
            "0",
            "(1-0",
            "COUNT",
            "2",
            "JUSTID",
        ],
        &["XINFO", "CONSUMERS", "s", "nog"],
        &["XGROUP", "CREATECONSUMER", "s", "g", "c1"],
        &["XGROUP", "CREATECONSUMER", "s", "g", "newc"],
        &["XGROUP", "CREATECONSUMER", "s", "nog", "newc"],
        &["XGROUP", "DELCONSUMER", "s", "g", "c8"],
        &["XGROUP", "DELCONSUMER", "s", "g", "zz"],
        &["XGROUP", "SETID", "s", "g", "0"],
        &["XGROUP", "SETID", "s", "g", "$", "ENTRIESREAD", "3"],
        &["XGROUP", "SETID", "s", "g", "0", "MKSTREAM"],
        &[
            "XGROUP",
            "CREATE",
            "nos",
            "g",
            "0",
            "ENTRIESREAD",
            "1",
            "ENTRIESREAD",
            "1",
        ],
        &[
            "XGROUP", "CREATE", "s", "gx", "0", "MKSTREAM", "MKSTREAM", "MKSTREAM", "MKSTREAM",
        ],
        &[
            "XGROUP",
            "SETID",
            "s",
            "g",
            "0",
            "ENTRIESREAD",
            "1",
            "ENTRIESREAD",
            "2",
        ],
        &["XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD"],
        &["XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "-1"],
        &["XGROUP", "SETID", "s", "nog", "0"],
        &["XGROUP", "SETID", "nos", "g", "0"],
        &["XGROUP", "DESTROY", "s", "g4"],
        &["XGROUP", "DESTROY", "s", "g4"],
        &["XGROUP", "DESTROY", "nos", "g4"],
        &["XINFO", "GROUPS", "s"],
        &["XADD", "s", "6-0", "f", "v6"],
        &["XINFO", "GROUPS", "s"],
        &["XREADGROUP", "GROUP", "g5", "c", "STREAMS", "s", ">"],
        &["XINFO", "GROUPS", "s"],
        &["XTRIM", "s", "MAXLEN", "0"],
        &["XINFO", "GROUPS", "s"],
        &["XREAD", "STREAMS", "s"],
        &["XREAD", "STREAMS", "s", "0"],
        &["XREAD", "COUNT", "1", "STREAMS", "s", "nos", "0", "0"],
        &["XREAD", "STREAMS", "s", "$"],
        &["XREAD", "STREAMS", "s", ">"],
        &["XREAD", "GROUP", "g", "c", "STREAMS", "s", "0"],
        &["XREAD", "NOACK", "STREAMS", "s", "0"],
        &["XREAD", "BLOCK", "x", "STREAMS", "s", "0"],
        &["XREAD", "BLOCK", "-1", "STREAMS", "s", "0"],
        &["XREAD", "FOO", "STREAMS", "s", "0"],
        &["XREAD", "COUNT", "1"],
        &["XREAD", "STREAMS", "s", "+"],
    ]);
    // Idle times differ by a few ms between the servers: masked.
    p.timed(&["XPENDING", "s", "g", "-", "+", "10", "c1"]);
    p.timed(&["XPENDING", "s", "g", "IDLE", "0", "-", "+", "10"]);
    p.timed(&["XPENDING", "s", "g", "(1-0", "+", "10"]);
    p.timed(&["XINFO", "CONSUMERS", "s", "g"]);
    p.timed(&["XINFO", "STREAM", "s", "FULL"]);
    p.timed(&["XINFO", "STREAM", "s", "FULL", "COUNT", "1"]);
    p.cmd(&["DEL", "s"]);
    p.cmd(&["XINFO", "GROUPS", "s"]);
    p.assert_clean();
}

/// A seeded random mix of stream commands on a few keys: every reply (times
/// masked) must match Redis's.
#[test]
fn random_operations_match_redis() {
    let (mut p, _guard, _server) = Pair::start();
    let mut rng = Rng(0x5eed_57ea);
    let keys = ["a", "b"];
    let groups = ["g1", "g2"];
    let consumers = ["c1", "c2", "c3"];
    for key in keys {
        p.cmd(&["XGROUP", "CREATE", key, "g1", "0", "MKSTREAM"]);
    }
    let mut next_ms = [1u64; 2];
    for _ in 0..3000 {
        let k = rng.below(2) as usize;
        let key = keys[k];
        let group = rng.pick(&groups);
        let consumer = rng.pick(&consumers);
        let id = |rng: &mut Rng, top: u64| format!("{}-{}", rng.below(top + 2), rng.below(3));
        let top = next_ms[k];
        let count = (1 + rng.below(6)).to_string();
        match rng.below(16) {
            0..=3 => {
                next_ms[k] += rng.below(3);
                let new_id = match rng.below(4) {
                    0 => format!("{}-*", next_ms[k]),
                    1 => id(&mut rng, top),
                    _ => format!("{}-{}", next_ms[k], rng.below(4)),
                };
                let v = rng.below(1000).to_string();
                let trim: Vec<String> = match rng.below(6) {
                    0 => vec!["MAXLEN".into(), "~".into(), rng.below(300).to_string()],
                    1 => vec!["MAXLEN".into(), rng.below(300).to_string()],
                    2 => vec!["MINID".into(), id(&mut rng, top / 2)],
                    _ => vec![],
                };
                let mut args: Vec<&str> = vec!["XADD", key];
                args.extend(trim.iter().map(String::as_str));
                args.extend([new_id.as_str(), "f", v.as_str()]);
                if rng.below(3) == 0 {
                    args.extend(["g", "x"]);
                }
                p.cmd(&args);
            }
            4 => p.cmd(&["XDEL", key, &id(&mut rng, top), &id(&mut rng, top)]),
            5 => p.cmd(&["XRANGE", key, &id(&mut rng, top), "+", "COUNT", &count]),
            6 => p.cmd(&[
                "XREVRANGE",
                key,
                "+",
                &format!("({}", id(&mut rng, top)),
                "COUNT",
                &count,
            ]),
            7 => p.cmd(&[
                "XREADGROUP",
                "GROUP",
                group,
                consumer,
                "COUNT",
                &count,
                "STREAMS",
                key,
                ">",
            ]),
            8 => p.cmd(&[
                "XREADGROUP",
                "GROUP",
                group,
                consumer,
                "COUNT",
                &count,
                "STREAMS",
                key,
                "0",
            ]),
            9 => p.cmd(&["XACK", key, group, &id(&mut rng, top), &id(&mut rng, top)]),
            10 => p.cmd(&[
                "XCLAIM",
                key,
                group,
                consumer,
                "0",
                &id(&mut rng, top),
                &id(&mut rng, top),
                "JUSTID",
            ]),
            11 => p.cmd(&[
                "XAUTOCLAIM",
                key,
                group,
                consumer,
                "0",
                &id(&mut rng, top),
                "COUNT",
                &count,
            ]),
            12 => {
                p.cmd(&["XPENDING", key, group]);
                p.timed(&["XPENDING", key, group, "-", "+", "20", consumer]);
            }
            13 => {
                p.cmd(&["XINFO", "GROUPS", key]);
                p.timed(&["XINFO", "CONSUMERS", key, group]);
            }
            14 => match rng.below(5) {
                0 => p.cmd(&["XGROUP", "CREATE", key, group, &id(&mut rng, top)]),
                1 => p.cmd(&["XGROUP", "SETID", key, group, &id(&mut rng, top)]),
                2 => p.cmd(&["XGROUP", "DELCONSUMER", key, group, consumer]),
                3 => p.cmd(&["XTRIM", key, "MAXLEN", "~", &rng.below(200).to_string()]),
                _ => p.cmd(&["XREAD", "COUNT", &count, "STREAMS", key, &id(&mut rng, top)]),
            },
            _ => {
                p.cmd(&["XLEN", key]);
                p.timed(&["XINFO", "STREAM", key]);
            }
        }
        if p.mismatches.len() > 5 {
            break;
        }
    }
    for key in keys {
        p.timed(&["XINFO", "STREAM", key, "FULL", "COUNT", "0"]);
    }
    // The mix did real work: entries, deliveries and pending entries.
    let len = run(&mut p.real, &["XLEN", "a"]);
    assert!(matches!(len, Ok(Value::Int(n)) if n > 10), "{len:?}");
    let pending = run(&mut p.real, &["XPENDING", "a", "g1"]);
    assert!(
        matches!(&pending, Ok(Value::Array(s)) if s.first() != Some(&Value::Int(0))),
        "{pending:?}"
    );
    p.assert_clean();
}

// ---------------------------------------------------------------------------
// Blocking (Kvasir alone)
// ---------------------------------------------------------------------------

/// Sends a blocking command on its own raw connection; the handle yields
/// the raw reply and how long it took.
fn block(server: &Kvasir, args: &[&str]) -> thread::JoinHandle<(String, Duration)> {
    let mut conn = server.raw_conn();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    thread::spawn(move || {
        let started = Instant::now();
        let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
        let reply = conn.cmd_str(&refs);
        (reply, started.elapsed())
    })
}

/// Waits until INFO reports `n` blocked clients on `port` (bounded).
fn wait_blocked(port: u16, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = cluster::query(port, &["INFO", "clients"]).unwrap_or_default();
        if info.contains(&format!("blocked_clients:{n}\r\n")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {n} blocked clients: {info}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

fn entry(key: &str, id: &str, f: &str, v: &str) -> String {
    format!(
        "*1\r\n*2\r\n${}\r\n{key}\r\n*1\r\n*2\r\n${}\r\n{id}\r\n*2\r\n${}\r\n{f}\r\n${}\r\n{v}\r\n",
        key.len(),
        id.len(),
        f.len(),
        v.len()
    )
}

#[test]
fn blocking_xread_is_served_by_a_later_xadd_and_dollar_means_after_blocking() {
    let server = Kvasir::start(&[]);
    let port = server.port;
    let mut c = server.conn();
    let _: String = common::q(&mut c, &["XADD", "s", "1-0", "old", "x"]);
    // Two readers of `$`: both see only what comes after they blocked.
    let a = block(&server, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    let b = block(
        &server,
        &[
            "XREAD", "COUNT", "5", "BLOCK", "0", "STREAMS", "other", "s", "$", "$",
        ],
    );
    wait_blocked(port, 2);
    let _: String = common::q(&mut c, &["XADD", "s", "2-0", "new", "y"]);
    let want = entry("s", "2-0", "new", "y");
    assert_eq!(a.join().expect("a").0, want);
    assert_eq!(b.join().expect("b").0, want);
    wait_blocked(port, 0);

    // A timeout answers a nil array.
    let (reply, took) = block(&server, &["XREAD", "BLOCK", "200", "STREAMS", "s", "$"])
        .join()
        .expect("timeout");
    assert_eq!(reply, "*-1\r\n");
    assert!(took >= Duration::from_millis(180), "{took:?}");

    // An id already behind the top answers at once, blocking or not.
    let (reply, _) = block(&server, &["XREAD", "BLOCK", "0", "STREAMS", "s", "1-0"])
        .join()
        .expect("at once");
    assert_eq!(reply, want);

    // Inside MULTI a blocking read answers at once, as at its timeout.
    let mut raw = server.raw_conn();
    raw.cmd_str(&["MULTI"]);
    raw.cmd_str(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    assert_eq!(raw.cmd_str(&["EXEC"]), "*1\r\n*-1\r\n");
}

#[test]
fn blocking_xreadgroup_gets_new_entries_once() {
    let server = Kvasir::start(&[]);
    let port = server.port;
    let mut c = server.conn();
    let _: String = common::q(&mut c, &["XGROUP", "CREATE", "q", "g", "$", "MKSTREAM"]);
    let one = block(
        &server,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "w1",
            "BLOCK",
            "0",
            "STREAMS",
            "q",
            ">",
        ],
    );
    wait_blocked(port, 1);
    let two = block(
        &server,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "w2",
            "BLOCK",
            "0",
            "STREAMS",
            "q",
            ">",
        ],
    );
    wait_blocked(port, 2);
    let _: String = common::q(&mut c, &["XADD", "q", "5-0", "job", "1"]);
    assert_eq!(one.join().expect("one").0, entry("q", "5-0", "job", "1"));
    // The second consumer is still waiting; the next entry is its.
    wait_blocked(port, 1);
    let _: String = common::q(&mut c, &["XADD", "q", "6-0", "job", "2"]);
    assert_eq!(two.join().expect("two").0, entry("q", "6-0", "job", "2"));
    let pending: Value = common::q(&mut c, &["XPENDING", "q", "g"]);
    let Value::Array(summary) = pending else {
        panic!("{pending:?}")
    };
    assert_eq!(summary.first(), Some(&Value::Int(2)));
    // A timeout answers a nil array.
    let mut raw = server.raw_conn();
    let got = raw.cmd_str(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "w1",
        "BLOCK",
        "100",
        "STREAMS",
        "q",
        ">",
    ]);
    assert_eq!(got, "*-1\r\n");
    // The stream or the group going away unblocks with Redis 7.0's errors.
    let waiter = |group: &str| {
        block(
            &server,
            &[
                "XREADGROUP",
                "GROUP",
                group,
                "w",
                "BLOCK",
                "0",
                "STREAMS",
                "q",
                ">",
            ],
        )
    };
    let gone = waiter("g");
    wait_blocked(port, 1);
    let _: String = common::q(&mut c, &["XGROUP", "CREATE", "q", "other", "$"]);
    let _: i64 = common::q(&mut c, &["XGROUP", "DESTROY", "q", "g"]);
    assert_eq!(
        gone.join().expect("gone").0,
        "-NOGROUP the consumer group this client was blocked on no longer exists\r\n"
    );
    let deleted = waiter("other");
    wait_blocked(port, 1);
    let _: i64 = common::q(&mut c, &["DEL", "q"]);
    assert_eq!(
        deleted.join().expect("deleted").0,
        "-UNBLOCKED the stream key no longer exists\r\n"
    );
}

#[test]
fn xread_replies_a_map_in_resp3() {
    let server = Kvasir::start(&[]);
    let mut raw = server.raw_conn();
    assert!(raw.cmd_str(&["HELLO", "3"]).starts_with('%'));
    raw.cmd_str(&["XADD", "s", "1-0", "f", "v"]);
    assert_eq!(
        raw.cmd_str(&["XREAD", "STREAMS", "s", "0"]),
        "%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
}

#[test]
fn streams_work_in_a_cluster_including_blocking_reads() {
    let mut c = cluster::Cluster::start(&[]);
    let slot = cluster::key_slot(b"{st}s");
    let leader = c.wait_leader_of_slot(slot, Duration::from_secs(20));
    let port = c.port(leader);
    let mut w = c.conn(leader);
    let q = |w: &mut redis::Connection, args: &[&str]| -> Value { common::q(w, args) };
    assert_eq!(
        q(&mut w, &["XADD", "{st}s", "1-0", "f", "v"]),
        Value::BulkString(b"1-0".to_vec())
    );
    let range = q(&mut w, &["XRANGE", "{st}s", "-", "+"]);
    assert!(
        matches!(&range, Value::Array(a) if a.len() == 1),
        "{range:?}"
    );
    let reader = thread::spawn(move || {
        let mut conn = cluster::connect(port).expect("connect");
        let v: Value = redis::cmd("XREAD")
            .arg("BLOCK")
            .arg(0)
            .arg("STREAMS")
            .arg("{st}s")
            .arg("$")
            .query(&mut conn)
            .expect("xread");
        v
    });
    wait_blocked(port, 1);
    q(&mut w, &["XADD", "{st}s", "2-0", "f", "w"]);
    let got = reader.join().expect("reader");
    let text = format!("{got:?}");
    assert!(text.contains("2-0") && !text.contains("1-0"), "{text}");
    // A timed-out read answers nil.
    let none = q(&mut w, &["XREAD", "BLOCK", "100", "STREAMS", "{st}s", "$"]);
    assert_eq!(none, Value::Nil);
    c.wait_digests_equal(Duration::from_secs(10));
}
