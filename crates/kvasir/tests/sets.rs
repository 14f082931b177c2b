//! The set family end to end, as Redis 7.0 answers it: SADD SREM SMEMBERS
//! SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SMOVE SINTER SINTERCARD
//! SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE SSCAN, their errors, the
//! intset/hashtable encodings and the reply shapes that differ between
//! RESP2 and RESP3 (sets are `~` in RESP3), checked on raw sockets.

mod common;

use common::{cmd, err, q, Kvasir};
use redis::{Connection, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The members a command replies, as a sorted set.
fn members(conn: &mut Connection, args: &[&str]) -> BTreeSet<String> {
    q::<Vec<String>>(conn, args).into_iter().collect()
}

fn set_of(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// SADD of many members in one command.
fn sadd_all(conn: &mut Connection, key: &str, items: &[String]) -> i64 {
    let mut c = redis::cmd("SADD");
    c.arg(key);
    for m in items {
        c.arg(m);
    }
    c.query(conn).expect("SADD")
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const SYNTAX: &str = "ERR syntax error";

#[test]
fn add_remove_and_membership() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "a", "b", "a"]), 2);
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "b", "c"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 3);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "none"]), 0);
    assert_eq!(
        members(&mut c, &["SMEMBERS", "s"]),
        set_of(&["a", "b", "c"])
    );
    assert!(members(&mut c, &["SMEMBERS", "none"]).is_empty());
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "z"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "none", "a"]), 0);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SMISMEMBER", "s", "a", "z", "c"]),
        [1, 0, 1]
    );
    assert_eq!(q::<Vec<i64>>(&mut c, &["SMISMEMBER", "none", "a"]), [0]);
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "a", "z"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SREM", "none", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "b", "c"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", "s"]),
        0,
        "empty sets are deleted"
    );
    // Binary members round-trip.
    let bin: &[u8] = b"\x00\xff\r\n";
    let added: i64 = redis::cmd("SADD").arg("b").arg(bin).query(&mut c).unwrap();
    assert_eq!(added, 1);
    let got: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg("b").query(&mut c).unwrap();
    assert_eq!(got, [bin.to_vec()]);
    for (args, name) in [
        (&["SADD", "s"][..], "sadd"),
        (&["SREM", "s"][..], "srem"),
        (&["SMEMBERS"][..], "smembers"),
        (&["SISMEMBER", "s"][..], "sismember"),
        (&["SMISMEMBER", "s"][..], "smismember"),
        (&["SCARD"][..], "scard"),
        (&["SMOVE", "a", "b"][..], "smove"),
        (&["SINTERCARD", "1"][..], "sintercard"),
        (&["SSCAN", "s"][..], "sscan"),
        (&["SINTERSTORE", "d"][..], "sinterstore"),
    ] {
        assert_eq!(
            err(&mut c, args),
            format!("ERR wrong number of arguments for '{name}' command")
        );
    }
}

#[test]
fn wrong_type_errors_and_no_partial_writes() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "str", "x"]);
    let _: i64 = q(&mut c, &["SADD", "s", "1"]);
    let cases: &[&[&str]] = &[
        &["SADD", "str", "a"],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SPOP", "str"],
        &["SPOP", "str", "2"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "2"],
        &["SMOVE", "str", "s", "1"],
        &["SMOVE", "s", "str", "1"],
        &["SINTER", "none", "str"],
        &["SINTERCARD", "2", "none", "str"],
        &["SINTERSTORE", "d", "none", "str"],
        &["SUNION", "s", "str"],
        &["SUNIONSTORE", "d", "s", "str"],
        &["SDIFF", "none", "str"],
        &["SDIFFSTORE", "d", "s", "str"],
        &["SSCAN", "str", "0"],
    ];
    for args in cases {
        assert_eq!(err(&mut c, args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(q::<String>(&mut c, &["GET", "str"]), "x");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]), 0);
    assert_eq!(members(&mut c, &["SMEMBERS", "s"]), set_of(&["1"]));
    // Using a set as a string is WRONGTYPE too.
    assert_eq!(err(&mut c, &["GET", "s"]), WRONGTYPE);
    assert_eq!(q::<String>(&mut c, &["TYPE", "s"]), "set");
}

#[test]
fn spop_and_srandmember() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<Option<String>>(&mut c, &["SPOP", "none"]), None);
    assert!(q::<Vec<String>>(&mut c, &["SPOP", "none", "2"]).is_empty());
    assert_eq!(q::<Option<String>>(&mut c, &["SRANDMEMBER", "none"]), None);
    assert!(q::<Vec<String>>(&mut c, &["SRANDMEMBER", "none", "2"]).is_empty());
    let all = set_of(&["a", "b", "c", "d", "e", "f"]);
    let _: i64 = q(&mut c, &["SADD", "s", "a", "b", "c", "d", "e", "f"]);
    let one: String = q(&mut c, &["SRANDMEMBER", "s"]);
    assert!(all.contains(&one));
    let three = q::<Vec<String>>(&mut c, &["SRANDMEMBER", "s", "3"]);
    assert_eq!(three.iter().collect::<BTreeSet<_>>().len(), 3);
    assert_eq!(members(&mut c, &["SRANDMEMBER", "s", "100"]), all);
    let repeats = q::<Vec<String>>(&mut c, &["SRANDMEMBER", "s", "-20"]);
    assert_eq!(repeats.len(), 20);
    assert!(repeats.iter().all(|m| all.contains(m)));
    assert!(q::<Vec<String>>(&mut c, &["SRANDMEMBER", "s", "0"]).is_empty());
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 6);

    let popped: String = q(&mut c, &["SPOP", "s"]);
    assert!(all.contains(&popped));
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", &popped]), 0);
    let two = q::<Vec<String>>(&mut c, &["SPOP", "s", "2"]);
    assert_eq!(two.len(), 2);
    assert!(q::<Vec<String>>(&mut c, &["SPOP", "s", "0"]).is_empty());
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 3);
    let rest = q::<Vec<String>>(&mut c, &["SPOP", "s", "10"]);
    assert_eq!(rest.len(), 3);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s"]), 0);
    let mut seen: BTreeSet<String> = rest.into_iter().chain(two).collect();
    seen.insert(popped);
    assert_eq!(seen, all, "every member popped exactly once");

    let positive = "ERR value is out of range, must be positive";
    assert_eq!(err(&mut c, &["SPOP", "s", "-1"]), positive);
    assert_eq!(err(&mut c, &["SPOP", "s", "x"]), positive);
    assert_eq!(err(&mut c, &["SPOP", "s", "1", "2"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["SRANDMEMBER", "s", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["SRANDMEMBER", "s", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(err(&mut c, &["SRANDMEMBER", "s", "1", "2"]), SYNTAX);
}

#[test]
fn smove_between_sets() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["SADD", "a", "1", "x"]);
    let _: () = q(&mut c, &["SET", "str", "v"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "none", "str", "1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "a", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "a", "zz"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "zz"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "1"]), 1);
    assert_eq!(members(&mut c, &["SMEMBERS", "b"]), set_of(&["1"]));
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "x"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(members(&mut c, &["SMEMBERS", "b"]), set_of(&["1", "x"]));
}

#[test]
fn intersections_unions_differences() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["SADD", "a", "1", "2", "3", "4"]);
    let _: i64 = q(&mut c, &["SADD", "b", "3", "4", "5"]);
    let _: i64 = q(&mut c, &["SADD", "c", "4", "x"]);
    assert_eq!(members(&mut c, &["SINTER", "a", "b"]), set_of(&["3", "4"]));
    assert_eq!(members(&mut c, &["SINTER", "a", "b", "c"]), set_of(&["4"]));
    assert!(members(&mut c, &["SINTER", "a", "none"]).is_empty());
    assert_eq!(
        members(&mut c, &["SUNION", "a", "c", "none"]),
        set_of(&["1", "2", "3", "4", "x"])
    );
    assert_eq!(
        members(&mut c, &["SDIFF", "a", "b", "c"]),
        set_of(&["1", "2"])
    );
    assert!(members(&mut c, &["SDIFF", "none", "a"]).is_empty());
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", "a", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "1", "a", "LIMIT", "3"]), 3);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "1", "a", "LIMIT", "0"]), 4);

    // The *STORE forms overwrite whatever the destination held.
    let _: () = q(&mut c, &["SET", "dst", "string", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "dst", "a", "b"]), 2);
    assert_eq!(q::<String>(&mut c, &["TYPE", "dst"]), "set");
    assert_eq!(q::<i64>(&mut c, &["TTL", "dst"]), -1);
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "dst", "a", "b"]), 5);
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "dst", "a", "b"]), 2);
    assert_eq!(members(&mut c, &["SMEMBERS", "dst"]), set_of(&["1", "2"]));
    // An empty result deletes the destination.
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "dst", "a", "none"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);
    let _: i64 = q(&mut c, &["SADD", "dst", "z"]);
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "dst", "a", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);

    assert_eq!(
        err(&mut c, &["SINTERCARD", "0", "a"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["SINTERCARD", "x", "a"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["SINTERCARD", "3", "a", "b"]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        err(&mut c, &["SINTERCARD", "1", "a", "LIMIT", "-1"]),
        "ERR LIMIT can't be negative"
    );
    assert_eq!(err(&mut c, &["SINTERCARD", "1", "a", "LIMIT"]), SYNTAX);
    assert_eq!(err(&mut c, &["SINTERCARD", "1", "a", "b"]), SYNTAX);
    // COMMAND GETKEYS knows where SINTERCARD's keys are.
    let keys: Result<Vec<String>, _> = cmd(&[
        "COMMAND",
        "GETKEYS",
        "SINTERCARD",
        "2",
        "a",
        "b",
        "LIMIT",
        "1",
    ])
    .query(&mut c);
    if let Ok(keys) = keys {
        assert_eq!(keys, ["a", "b"]);
    }
}

#[test]
fn sscan_iterates_everything() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    // An intset answers in one call with cursor 0, sorted.
    let _: i64 = q(&mut c, &["SADD", "i", "3", "1", "2", "10"]);
    let (cursor, got): (String, Vec<String>) = q(&mut c, &["SSCAN", "i", "0", "COUNT", "1"]);
    assert_eq!(
        (cursor.as_str(), got),
        ("0", vec!["1".into(), "2".into(), "3".into(), "10".into()])
    );
    let (_, got): (String, Vec<String>) = q(&mut c, &["SSCAN", "i", "0", "MATCH", "1*"]);
    assert_eq!(got, ["1", "10"]);
    // A hashtable is walked by cursor.
    let items: Vec<String> = (0..1000).map(|i| format!("member:{i}")).collect();
    assert_eq!(sadd_all(&mut c, "h", &items), 1000);
    let mut cursor = "0".to_string();
    let mut seen = BTreeSet::new();
    let mut calls = 0;
    loop {
        let (next, got): (String, Vec<String>) = q(&mut c, &["SSCAN", "h", &cursor, "COUNT", "50"]);
        seen.extend(got);
        calls += 1;
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen, items.iter().cloned().collect::<BTreeSet<_>>());
    assert!(calls > 1);
    // redis-rs's iterator drives the cursor too.
    let matched: BTreeSet<String> = redis::cmd("SSCAN")
        .arg("h")
        .cursor_arg(0)
        .arg("MATCH")
        .arg("member:99*")
        .clone()
        .iter(&mut c)
        .unwrap()
        .map(|m: redis::RedisResult<String>| m.unwrap())
        .collect();
    assert_eq!(matched.len(), 11);
    let (cursor, got): (String, Vec<String>) = q(&mut c, &["SSCAN", "none", "0"]);
    assert_eq!((cursor.as_str(), got.len()), ("0", 0));
    assert_eq!(err(&mut c, &["SSCAN", "h", "x"]), "ERR invalid cursor");
    assert_eq!(err(&mut c, &["SSCAN", "h", "0", "COUNT", "0"]), SYNTAX);
    assert_eq!(err(&mut c, &["SSCAN", "h", "0", "TYPE", "set"]), SYNTAX);
    assert_eq!(err(&mut c, &["SSCAN", "h", "0", "MATCH"]), SYNTAX);
}

#[test]
fn encodings_and_memory() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let enc = |c: &mut Connection, k: &str| q::<String>(c, &["OBJECT", "ENCODING", k]);
    let ints: Vec<String> = (0..512).map(|i| i.to_string()).collect();
    assert_eq!(sadd_all(&mut c, "i", &ints), 512);
    assert_eq!(enc(&mut c, "i"), "intset");
    let intset_bytes: i64 = q(&mut c, &["MEMORY", "USAGE", "i"]);
    assert_eq!(q::<i64>(&mut c, &["SADD", "i", "512"]), 1);
    assert_eq!(enc(&mut c, "i"), "hashtable");
    assert_eq!(q::<i64>(&mut c, &["SREM", "i", "512"]), 1);
    assert_eq!(enc(&mut c, "i"), "hashtable", "no conversion back");
    let _: i64 = q(&mut c, &["SADD", "s", "1", "x"]);
    assert_eq!(enc(&mut c, "s"), "hashtable");
    let _: i64 = q(&mut c, &["SADD", "n", "01"]);
    assert_eq!(enc(&mut c, "n"), "hashtable");
    // Intsets of small numbers cost about 2 bytes per member.
    assert!(
        intset_bytes < 512 * 4 + 200,
        "intset of 512: {intset_bytes} bytes"
    );
    let items: Vec<String> = (0..10_000).map(|i| format!("element:{i}")).collect();
    for chunk in items.chunks(1000) {
        sadd_all(&mut c, "h", chunk);
    }
    let table_bytes: i64 = q(&mut c, &["MEMORY", "USAGE", "h"]);
    assert!(
        table_bytes / 10_000 <= 64,
        "hashtable: {} bytes per member",
        table_bytes / 10_000
    );
}

#[test]
fn reply_shapes_in_resp2_and_resp3() {
    let server = Kvasir::start(&[]);
    let mut r2 = server.raw_conn();
    assert_eq!(r2.cmd_str(&["SADD", "s", "3", "1", "2"]), ":3\r\n");
    let sorted = "3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n";
    assert_eq!(r2.cmd_str(&["SMEMBERS", "s"]), format!("*{sorted}"));
    assert_eq!(r2.cmd_str(&["SINTER", "s", "s"]), format!("*{sorted}"));
    assert_eq!(r2.cmd_str(&["SUNION", "s"]), format!("*{sorted}"));
    assert_eq!(r2.cmd_str(&["SDIFF", "s"]), format!("*{sorted}"));
    assert_eq!(r2.cmd_str(&["SRANDMEMBER", "s", "5"]), format!("*{sorted}"));
    assert_eq!(r2.cmd_str(&["SMEMBERS", "none"]), "*0\r\n");
    assert_eq!(r2.cmd_str(&["SPOP", "none"]), "$-1\r\n");
    assert_eq!(r2.cmd_str(&["SPOP", "none", "1"]), "*0\r\n");
    assert_eq!(r2.cmd_str(&["SRANDMEMBER", "none"]), "$-1\r\n");
    assert_eq!(r2.cmd_str(&["SRANDMEMBER", "none", "1"]), "*0\r\n");
    assert_eq!(
        r2.cmd_str(&["SSCAN", "s", "0"]),
        format!("*2\r\n$1\r\n0\r\n*{sorted}")
    );

    let mut r3 = server.raw_conn();
    assert!(r3.cmd_str(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(r3.cmd_str(&["SMEMBERS", "s"]), format!("~{sorted}"));
    assert_eq!(r3.cmd_str(&["SINTER", "s", "s"]), format!("~{sorted}"));
    assert_eq!(r3.cmd_str(&["SUNION", "s"]), format!("~{sorted}"));
    assert_eq!(r3.cmd_str(&["SDIFF", "s"]), format!("~{sorted}"));
    // SRANDMEMBER with a count is an array even in RESP3, as in Redis 7.0.
    assert_eq!(r3.cmd_str(&["SRANDMEMBER", "s", "5"]), format!("*{sorted}"));
    assert_eq!(r3.cmd_str(&["SMEMBERS", "none"]), "~0\r\n");
    assert_eq!(r3.cmd_str(&["SPOP", "none"]), "_\r\n");
    assert_eq!(r3.cmd_str(&["SPOP", "none", "1"]), "~0\r\n");
    assert_eq!(r3.cmd_str(&["SPOP", "s", "0"]), "~0\r\n");
    assert_eq!(r3.cmd_str(&["SRANDMEMBER", "none"]), "_\r\n");
    assert_eq!(r3.cmd_str(&["SRANDMEMBER", "none", "1"]), "*0\r\n");
    assert_eq!(
        r3.cmd_str(&["SMISMEMBER", "s", "1", "9"]),
        "*2\r\n:1\r\n:0\r\n"
    );
    assert_eq!(
        r3.cmd_str(&["SSCAN", "s", "0"]),
        format!("*2\r\n$1\r\n0\r\n*{sorted}")
    );
    // SPOP with a count replies a set; popping everything deletes the key.
    assert_eq!(r3.cmd_str(&["SPOP", "s", "3"]), format!("~{sorted}"));
    assert_eq!(r3.cmd_str(&["EXISTS", "s"]), ":0\r\n");
}

#[test]
fn resp3_client_reads_sets() {
    let server = Kvasir::start(&[]);
    let mut c = server
        .client_resp3()
        .get_connection()
        .expect("resp3 connection");
    let _: i64 = q(&mut c, &["SADD", "s", "a", "b"]);
    match q::<Value>(&mut c, &["SMEMBERS", "s"]) {
        Value::Set(items) => assert_eq!(items.len(), 2),
        other => panic!("SMEMBERS is a set in RESP3: {other:?}"),
    }
    assert_eq!(
        members(&mut c, &["SUNION", "s", "none"]),
        set_of(&["a", "b"])
    );
    assert!(matches!(
        q::<Value>(&mut c, &["SPOP", "s", "1"]),
        Value::Set(_)
    ));
    assert!(matches!(
        q::<Value>(&mut c, &["SRANDMEMBER", "s", "1"]),
        Value::Array(_)
    ));
    assert_eq!(q::<Value>(&mut c, &["SPOP", "none"]), Value::Nil);
}

#[test]
fn benchmark_style_sadd_and_spop_stay_fast() {
    // redis-benchmark's SADD/SPOP: one set, members "element:<rand>", then
    // pops. Pipelined here so the time measured is the server's.
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let n = 100_000;
    let start = Instant::now();
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("SADD")
            .arg("myset")
            .arg(format!("element:{:012}", i * 7919 % 1_000_003))
            .ignore();
        if pipe.len() >= 1000 {
            let _: () = pipe.query(&mut c).unwrap();
            pipe = redis::pipe();
        }
    }
    if !pipe.is_empty() {
        let _: () = pipe.query(&mut c).unwrap();
    }
    assert_eq!(q::<i64>(&mut c, &["SCARD", "myset"]), n);
    let mut popped = 0;
    while popped < n {
        let mut pipe = redis::pipe();
        for _ in 0..1000 {
            pipe.cmd("SPOP").arg("myset");
        }
        let got: Vec<Option<String>> = pipe.query(&mut c).unwrap();
        popped += got.iter().flatten().count() as i64;
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "myset"]), 0);
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "100k SADD + 100k SPOP took {took:?}"
    );
}
