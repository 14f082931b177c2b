//! Keyspace notifications (`notify-keyspace-events`) side by side with a
//! real redis-server 7.0: the (channel, message) pairs a PSUBSCRIBE
//! '__key*__:*' subscriber receives for the same commands, class filters,
//! expiry events (active and lazy), CONFIG GET/SET validation, and one
//! cluster node publishing the events of the shards it leads.
//!
//! Needs `redis-server` on PATH; fails, does not skip, when it is missing.

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use common::redis_server::{run, start_redis};
use common::Kvasir;
use std::time::{Duration, Instant};

/// (channel, message) pairs in the order received.
type Heard = Vec<(String, String)>;

const END: &str = "__keyend__:done";

/// A subscriber to every keyspace channel of one server.
fn subscriber(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let c = client.get_connection().expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

/// Runs `cmds` on `port` with `flags` set and returns what a pattern
/// subscriber heard, up to the END marker.
fn heard(port: u16, flags: &str, cmds: &[Vec<&str>], settle: Duration) -> Heard {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut conn = client.get_connection().expect("connect");
    let _ = run(&mut conn, &["FLUSHALL"]);
    let _ = run(
        &mut conn,
        &["CONFIG", "SET", "notify-keyspace-events", flags],
    );
    let mut sub = subscriber(port);
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__key*__:*").expect("psubscribe");
    for c in cmds {
        if c[0] == "PAUSE" {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        let _ = run(&mut conn, c);
    }
    std::thread::sleep(settle);
    let _ = run(&mut conn, &["PUBLISH", END, "x"]);
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let msg = ps.get_message().expect("message");
        let ch = msg.get_channel_name().to_string();
        if ch == END {
            break;
        }
        let payload: String = msg.get_payload().unwrap_or_default();
        out.push((ch, payload));
    }
    let _ = run(&mut conn, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    out
}

fn both(flags: &str, cmds: &[Vec<&str>], settle: Duration) -> (Heard, Heard) {
    let (_guard, rport) = start_redis();
    let ours = Kvasir::start(&[]);
    (
        heard(rport, flags, cmds, settle),
        heard(ours.port, flags, cmds, settle),
    )
}

fn family_commands() -> Vec<Vec<&'static str>> {
    let lines: &[&str] = &[
        "SET s1 v",
        "SET s1 v2 EX 100",
        "SETEX s2 100 v",
        "PSETEX s3 100000 v",
        "SETNX s4 v",
        "SETNX s4 w",
        "SET s5 v NX",
        "SET s5 v NX",
        "MSET m1 a m2 b",
        "GETSET m1 c",
        "APPEND m1 d",
        "SETRANGE m2 3 xyz",
        "INCR n",
        "INCRBY n 5",
        "DECR n",
        "DECRBY n 2",
        "INCRBYFLOAT f 1.5",
        "GETDEL m2",
        "GETEX s1 PERSIST",
        "GETEX s1 EX 50",
        "SETBIT b 7 1",
        "BITOP OR b2 b s1",
        "BITFIELD b SET u8 0 255",
        "PFADD h1 a b c",
        "PFADD h1 a",
        "PFMERGE h2 h1",
        "DEL m1 nosuch s4",
        "UNLINK n",
        "EXPIRE s1 100",
        "PERSIST s1",
        "EXPIRE s1 -1",
        "RENAME s2 s2b",
        "COPY s3 s3c",
        "MOVE s3c 1",
        "LPUSH l a b c",
        "RPUSH l d",
        "LPUSHX l e",
        "RPUSHX nolist e",
        "LINSERT l BEFORE a z",
        "LSET l 0 q",
        "LREM l 1 z",
        "LTRIM l 0 3",
        "LPOP l",
        "RPOP l",
        "LMOVE l l2 LEFT RIGHT",
        "RPOPLPUSH l l2",
        "RPOP l2 5",
        "HSET h f v g w",
        "HSETNX h f v",
        "HINCRBY h n 1",
        "HINCRBYFLOAT h x 1.5",
        "HDEL h f",
        "HDEL h g n x",
        "SADD st a b c",
        "SREM st a",
        "SMOVE st st2 b",
        "SADD other c d",
        "SINTERSTORE st3 st other",
        "SUNIONSTORE st4 st other",
        "SDIFFSTORE st5 st other",
        "SPOP st",
        "ZADD z 1 a 2 b 3 c",
        "ZADD z INCR 5 a",
        "ZINCRBY z 1 b",
        "ZREM z c",
        "ZUNIONSTORE z2 1 z",
        "ZINTERSTORE z3 2 z nosuch",
        "ZPOPMIN z",
        "ZREMRANGEBYSCORE z -inf +inf",
        "GEOADD g 13.361389 38.115556 Palermo",
        "XADD x 1-1 a 1",
        "XADD x 2-1 a 2",
        "XGROUP CREATE x grp 0",
        "XGROUP CREATECONSUMER x grp alice",
        "XDEL x 1-1",
        "XTRIM x MAXLEN 0",
        "XSETID x 5-0",
        "XGROUP SETID x grp 0",
        "XGROUP DELCONSUMER x grp alice",
        "XGROUP DESTROY x grp",
        "RPUSH sl 3 1 2",
        "SORT sl STORE sorted",
        // SMOVE: "sadd" only when the member was not in the destination;
        // "del" for an emptied source, "new" for a created destination.
        "SADD sm1 a b",
        "SADD sm2 a",
        "SMOVE sm1 sm2 a",
        "SMOVE sm1 sm3 b",
        "SMOVE sm2 sm2 a",
        // XADD trimming: "xtrim" after "xadd", only when entries went.
        "XADD xt MAXLEN 1 1-1 a 1",
        "XADD xt MAXLEN 1 2-1 a 2",
        "XADD xt MINID 0 3-1 a 3",
        "XADD xt NOMKSTREAM MAXLEN = 1 4-1 a 4",
        "XADD nosuchstream NOMKSTREAM 1-1 a 1",
        // Consumers created by XREADGROUP (when served), XCLAIM and
        // XAUTOCLAIM (by their first claim).
        "XGROUP CREATE xt g2 0",
        "XREADGROUP GROUP g2 c1 STREAMS xt >",
        "XREADGROUP GROUP g2 c0 STREAMS xt >",
        "XREADGROUP GROUP g2 c1 STREAMS xt >",
        "XREADGROUP GROUP g2 c9 STREAMS xt 0",
        "XCLAIM xt g2 c2 0 0-1",
        "XCLAIM xt g2 c3 0 4-1",
        "XAUTOCLAIM xt g2 c4 0 0-0 COUNT 1",
        "XAUTOCLAIM xt g2 c5 0 9-0",
        "XINFO CONSUMERS xt g2",
        "FLUSHDB",
    ];
    lines.iter().map(|l| l.split(' ').collect()).collect()
}

fn show(v: &[(String, String)]) -> String {
    v.iter().map(|(c, m)| format!("  {c} {m}\n")).collect()
}

fn assert_same(what: &str, real: &[(String, String)], ours: &[(String, String)]) {
    assert!(!real.is_empty(), "{what}: redis published nothing");
    assert!(
        real == ours,
        "{what}: events differ\nredis:\n{}kvasir:\n{}",
        show(real),
        show(ours)
    );
}

#[test]
fn every_family_publishes_redis_events() {
    let (real, ours) = both("KEA", &family_commands(), Duration::ZERO);
    assert_same("KEA", &real, &ours);
}

#[test]
fn class_filters_select_events() {
    for flags in ["Eg", "K$", "En", "Kl", "Eh", "Esz", "Et"] {
        let (real, ours) = both(flags, &family_commands(), Duration::ZERO);
        assert_same(flags, &real, &ours);
    }
}

#[test]
fn expired_keys_are_announced_by_active_and_lazy_expiry() {
    let cmds: Vec<Vec<&str>> = vec![
        vec!["SET", "a", "1", "PX", "50"],
        vec!["SET", "b", "1", "PX", "50"],
        vec!["SET", "keep", "1"],
    ];
    // Active expiry: nobody touches them.
    let (mut real, mut ours) = both("Ex", &cmds, Duration::from_millis(1500));
    real.sort();
    ours.sort();
    assert_same("Ex active", &real, &ours);
    // Lazy: a write finds it expired first.
    let (_guard, rport) = start_redis();
    let k = Kvasir::start(&[]);
    for port in [rport, k.port] {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut c = client.get_connection().unwrap();
        let _ = run(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        let _ = run(&mut c, &["CONFIG", "SET", "hz", "1"]);
    }
    let lazy: Vec<Vec<&str>> = vec![
        vec!["SET", "c", "1", "PX", "20"],
        vec!["PAUSE"],
        vec!["APPEND", "c", "x"],
    ];
    let real = heard(rport, "Exg$n", &lazy, Duration::ZERO);
    let ours = heard(k.port, "Exg$n", &lazy, Duration::ZERO);
    assert_eq!(
        real.iter().filter(|(c, _)| c.ends_with("expired")).count(),
        1,
        "{}",
        show(&real)
    );
    assert_eq!(
        ours.iter().filter(|(c, _)| c.ends_with("expired")).count(),
        1,
        "{}",
        show(&ours)
    );
}

#[test]
fn config_get_set_like_redis() {
    let (_guard, rport) = start_redis();
    let k = Kvasir::start(&[]);
    let mut real = redis::Client::open(format!("redis://127.0.0.1:{rport}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut ours = k.conn();
    for v in [
        "KEA",
        "Anm",
        "nmKE",
        "gx$",
        "A",
        "Kg",
        "",
        "AKEmn",
        "gl$shzxetdn",
        "Z",
        "KEAq",
        "ke",
        "Elsz",
        "d",
        "$",
    ] {
        let set = ["CONFIG", "SET", "notify-keyspace-events", v];
        assert_eq!(run(&mut real, &set), run(&mut ours, &set), "set {v:?}");
        let get = ["CONFIG", "GET", "notify-keyspace-events"];
        assert_eq!(
            run(&mut real, &get),
            run(&mut ours, &get),
            "get after {v:?}"
        );
    }
}

#[test]
fn cluster_leader_publishes_its_keys_events() {
    let mut cluster = cluster::Cluster::start(&[]);
    let key = "notify-key";
    let slot = cluster::key_slot(key.as_bytes());
    let leader = cluster.wait_leader_of_slot(slot, Duration::from_secs(20));
    let port = cluster.port(leader);
    let ids: Vec<u64> = cluster.nodes.iter().map(|n| n.id).collect();
    for p in ids.iter().map(|&id| cluster.port(id)) {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{p}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let _ = run(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    }
    let mut sub = subscriber(port);
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__key*__:*").expect("psubscribe");
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let _ = run(&mut conn, &["SET", key, "1"]);
    let _ = run(&mut conn, &["INCR", key]);
    let mut got = Vec::new();
    while got.len() < 4 {
        let msg = ps.get_message().expect("message");
        let payload: String = msg.get_payload().unwrap_or_default();
        got.push((msg.get_channel_name().to_string(), payload));
    }
    let want = [
        (format!("__keyspace@0__:{key}"), "set".to_string()),
        ("__keyevent@0__:set".to_string(), key.to_string()),
        (format!("__keyspace@0__:{key}"), "incrby".to_string()),
        ("__keyevent@0__:incrby".to_string(), key.to_string()),
    ];
    assert_eq!(got, want);
}
