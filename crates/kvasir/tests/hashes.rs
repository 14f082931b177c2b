//! The hash family end to end, as Redis 7.0 answers it: HSET HSETNX HMSET
//! HGET HMGET HGETALL HDEL HEXISTS HLEN HKEYS HVALS HSTRLEN HINCRBY
//! HINCRBYFLOAT HRANDFIELD HSCAN, their error texts, encodings, expiry,
//! RESP2 and RESP3 reply shapes (byte-exact on raw sockets) and the memory
//! cost of YCSB-shaped records.

mod common;

use common::{err, q, sorted, Kvasir};
use redis::{Connection, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn set_get_and_friends() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]), 2);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "a", "10", "c", "3"]), 1);
    assert_eq!(
        q::<String>(&mut c, &["HMSET", "h", "d", "4", "e", "5"]),
        "OK"
    );
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "a", "x"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "f", "6"]), 1);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "a"]), "10");
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "h", "zz"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "nokey", "a"]), None);
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["HMGET", "h", "b", "zz", "c"]),
        vec![Some("2".into()), None, Some("3".into())]
    );
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["HMGET", "nokey", "a", "b"]),
        vec![None, None]
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 6);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "nokey"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "zz"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "a"]), 2);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "zz"]), 0);
    let all: BTreeMap<String, String> = q(&mut c, &["HGETALL", "h"]);
    let want: BTreeMap<String, String> = [
        ("a", "10"),
        ("b", "2"),
        ("c", "3"),
        ("d", "4"),
        ("e", "5"),
        ("f", "6"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(all, want);
    // HKEYS and HVALS come in the same order as HGETALL.
    let keys: Vec<String> = q(&mut c, &["HKEYS", "h"]);
    let vals: Vec<String> = q(&mut c, &["HVALS", "h"]);
    let flat: Vec<String> = q(&mut c, &["HGETALL", "h"]);
    let zipped: Vec<String> = keys
        .iter()
        .zip(&vals)
        .flat_map(|(k, v)| [k.clone(), v.clone()])
        .collect();
    assert_eq!(flat, zipped);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HKEYS", "nokey"]),
        Vec::<String>::new()
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HGETALL", "nokey"]),
        Vec::<String>::new()
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "hash");

    // Binary-safe fields and values.
    let bin_field = b"\x00\r\n\xff".to_vec();
    let bin_value = b"v\x00\xfe".to_vec();
    let added: i64 = redis::cmd("HSET")
        .arg("bin")
        .arg(&bin_field)
        .arg(&bin_value)
        .query(&mut c)
        .expect("hset bin");
    assert_eq!(added, 1);
    let got: Vec<u8> = redis::cmd("HGET")
        .arg("bin")
        .arg(&bin_field)
        .query(&mut c)
        .expect("hget bin");
    assert_eq!(got, bin_value);
}

#[test]
fn hdel_removes_fields_and_empty_hashes() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]),
        3
    );
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "a", "zz", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "nokey", "a"]), 0);
    assert_eq!(sorted(q(&mut c, &["HKEYS", "h"])), vec!["b", "c"]);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "b", "c"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    // The same for a hashtable-encoded hash.
    let long = "x".repeat(100);
    assert_eq!(q::<i64>(&mut c, &["HSET", "t", "a", &long, "b", "1"]), 2);
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "t"]),
        "hashtable"
    );
    assert_eq!(q::<i64>(&mut c, &["HDEL", "t", "a", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "t"]), 0);
}

#[test]
fn counters() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "5"]), 5);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "-8"]), -3);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "n"]), "-3");
    assert_eq!(err(&mut c, &["HINCRBY", "h", "n", "x"]), NOT_INT);
    assert_eq!(err(&mut c, &["HINCRBY", "h", "n", "1.5"]), NOT_INT);
    let _: i64 = q(&mut c, &["HSET", "h", "s", "abc", "sp", " 1"]);
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "s", "1"]),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "sp", "1"]),
        "ERR hash value is not an integer"
    );
    let _: i64 = q(&mut c, &["HSET", "h", "max", "9223372036854775807"]);
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "max", "1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        q::<i64>(&mut c, &["HINCRBY", "h", "min", "-9223372036854775808"]),
        i64::MIN
    );
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "min", "-1"]),
        "ERR increment or decrement would overflow"
    );

    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "f", "10.5"]),
        "10.5"
    );
    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "f", "0.1"]),
        "10.6"
    );
    assert_eq!(q::<String>(&mut c, &["HINCRBYFLOAT", "h", "n", "3"]), "0");
    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "e", "5.0e3"]),
        "5000"
    );
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "e"]), "5000");
    assert_eq!(err(&mut c, &["HINCRBYFLOAT", "h", "f", "x"]), NOT_FLOAT);
    assert_eq!(err(&mut c, &["HINCRBYFLOAT", "h", "f", "nan"]), NOT_FLOAT);
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "f", "inf"]),
        "ERR value is NaN or Infinity"
    );
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "s", "1"]),
        "ERR hash value is not a float"
    );
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "sp", "1"]),
        "ERR hash value is not a float"
    );
    let _: i64 = q(&mut c, &["HSET", "h", "i", "inf"]);
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "i", "1"]),
        "ERR increment would produce NaN or Infinity"
    );
    // Failed increments create nothing.
    assert_eq!(err(&mut c, &["HINCRBY", "new", "n", "x"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "new", "n", "-inf"]),
        "ERR value is NaN or Infinity"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "new"]), 0);
}

#[test]
fn errors_arity_and_wrongtype() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for (name, args) in [
        ("hset", &["HSET", "h", "a", "1", "b"][..]),
        ("hset", &["HSET", "h", "a"]),
        ("hmset", &["HMSET", "h", "a", "1", "b"]),
        ("hsetnx", &["HSETNX", "h", "a"]),
        ("hget", &["HGET", "h"]),
        ("hmget", &["HMGET", "h"]),
        ("hdel", &["HDEL", "h"]),
        ("hgetall", &["HGETALL", "h", "x"]),
        ("hkeys", &["HKEYS"]),
        ("hvals", &["HVALS"]),
        ("hlen", &["HLEN", "h", "x"]),
        ("hexists", &["HEXISTS", "h"]),
        ("hstrlen", &["HSTRLEN", "h"]),
        ("hincrby", &["HINCRBY", "h", "a"]),
        ("hincrbyfloat", &["HINCRBYFLOAT", "h", "a"]),
        ("hrandfield", &["HRANDFIELD"]),
        ("hscan", &["HSCAN", "h"]),
    ] {
        assert_eq!(
            err(&mut c, args),
            format!("ERR wrong number of arguments for '{name}' command"),
            "{args:?}"
        );
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);

    let _: () = q(&mut c, &["SET", "s", "x"]);
    for args in [
        &["HSET", "s", "a", "1"][..],
        &["HMSET", "s", "a", "1"],
        &["HSETNX", "s", "a", "1"],
        &["HGET", "s", "a"],
        &["HMGET", "s", "a"],
        &["HGETALL", "s"],
        &["HDEL", "s", "a"],
        &["HEXISTS", "s", "a"],
        &["HLEN", "s"],
        &["HKEYS", "s"],
        &["HVALS", "s"],
        &["HSTRLEN", "s", "a"],
        &["HINCRBY", "s", "a", "1"],
        &["HINCRBYFLOAT", "s", "a", "1"],
        &["HRANDFIELD", "s"],
        &["HRANDFIELD", "s", "1"],
        &["HSCAN", "s", "0"],
    ] {
        assert_eq!(err(&mut c, args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "x");
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1"]);
    assert_eq!(err(&mut c, &["GET", "h"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["LPUSH", "h", "x"]), WRONGTYPE);
}

#[test]
fn encodings_follow_the_listpack_limits() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let enc = |c: &mut Connection, k: &str| q::<String>(c, &["OBJECT", "ENCODING", k]);
    let _: i64 = q(&mut c, &["HSET", "h", "a", &"v".repeat(64)]);
    assert_eq!(enc(&mut c, "h"), "listpack");
    let _: i64 = q(&mut c, &["HSET", "h", "b", &"v".repeat(65)]);
    assert_eq!(enc(&mut c, "h"), "hashtable");
    let _: i64 = q(&mut c, &["HDEL", "h", "b"]);
    assert_eq!(enc(&mut c, "h"), "hashtable", "never converts back");
    let _: i64 = q(&mut c, &["HSET", "f", &"k".repeat(65), "1"]);
    assert_eq!(enc(&mut c, "f"), "hashtable");
    for i in 0..128 {
        let _: i64 = q(&mut c, &["HSET", "n", &format!("f{i}"), "v"]);
    }
    assert_eq!(enc(&mut c, "n"), "listpack");
    let _: i64 = q(&mut c, &["HSETNX", "n", "f128", "v"]);
    assert_eq!(enc(&mut c, "n"), "hashtable");
    assert_eq!(q::<i64>(&mut c, &["HLEN", "n"]), 129);
}

#[test]
fn hrandfield_counts_and_values() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    let fields: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    for _ in 0..20 {
        let one: String = q(&mut c, &["HRANDFIELD", "h"]);
        assert!(fields.contains(&one));
    }
    assert_eq!(q::<Option<String>>(&mut c, &["HRANDFIELD", "nokey"]), None);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HRANDFIELD", "nokey", "3"]),
        Vec::<String>::new()
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HRANDFIELD", "h", "0"]),
        Vec::<String>::new()
    );
    let two: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "2"]);
    assert_eq!(two.len(), 2);
    assert_ne!(two[0], two[1]);
    assert_eq!(
        sorted(q(&mut c, &["HRANDFIELD", "h", "10"])),
        vec!["a", "b", "c"]
    );
    let many: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "-30"]);
    assert_eq!(many.len(), 30);
    assert!(many.iter().all(|f| fields.contains(f)));
    assert_eq!(
        many.iter().collect::<BTreeSet<_>>().len(),
        3,
        "30 picks cover 3 fields"
    );
    // WITHVALUES: flat field/value pairs in RESP2.
    let flat: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "-6", "WITHVALUES"]);
    assert_eq!(flat.len(), 12);
    for pair in flat.chunks(2) {
        let want = match pair[0].as_str() {
            "a" => "1",
            "b" => "2",
            _ => "3",
        };
        assert_eq!(pair[1], want);
    }
    // Errors, in Redis's order.
    assert_eq!(err(&mut c, &["HRANDFIELD", "h", "x"]), NOT_INT);
    assert_eq!(err(&mut c, &["HRANDFIELD", "h", "1", "WITHSCORES"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "1", "WITHVALUES", "x"]),
        SYNTAX
    );
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(
        err(
            &mut c,
            &["HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"]
        ),
        "ERR value is out of range"
    );
}

/// Walks HSCAN to the end; returns (calls, field -> value).
fn hscan_all(c: &mut Connection, key: &str, opts: &[&str]) -> (usize, BTreeMap<String, String>) {
    let mut cursor = "0".to_string();
    let mut calls = 0;
    let mut seen = BTreeMap::new();
    loop {
        let mut args = vec!["HSCAN", key, cursor.as_str()];
        args.extend_from_slice(opts);
        let (next, items): (String, Vec<String>) = q(c, &args);
        calls += 1;
        for pair in items.chunks(2) {
            seen.insert(pair[0].clone(), pair[1].clone());
        }
        cursor = next;
        if cursor == "0" {
            return (calls, seen);
        }
    }
}

#[test]
fn hscan_iterates_both_encodings() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for i in 0..50 {
        let _: i64 = q(&mut c, &["HSET", "small", &format!("f{i}"), &i.to_string()]);
    }
    let (calls, seen) = hscan_all(&mut c, "small", &["COUNT", "5"]);
    assert_eq!((calls, seen.len()), (1, 50), "a listpack comes in one call");
    assert_eq!(seen["f7"], "7");
    let (_, seen) = hscan_all(&mut c, "small", &["MATCH", "f1*"]);
    assert_eq!(seen.len(), 11);

    for i in 0..1000 {
        let _: i64 = q(&mut c, &["HSET", "big", &format!("f{i}"), &i.to_string()]);
    }
    let (calls, seen) = hscan_all(&mut c, "big", &["COUNT", "100"]);
    assert!(calls >= 10, "{calls}");
    assert_eq!(seen.len(), 1000);
    assert_eq!(seen["f999"], "999");
    let (_, seen) = hscan_all(&mut c, "big", &["MATCH", "f99?", "COUNT", "50"]);
    assert_eq!(seen.len(), 10);

    // Fields deleted during a scan never hide the ones that stay.
    let mut cursor = "0".to_string();
    let mut seen = BTreeSet::new();
    let mut round = 0;
    loop {
        let (next, items): (String, Vec<String>) =
            q(&mut c, &["HSCAN", "big", &cursor, "COUNT", "20"]);
        seen.extend(items.chunks(2).map(|p| p[0].clone()));
        for j in 0..10 {
            let _: i64 = q(
                &mut c,
                &["HDEL", "big", &format!("f{}", (round * 10 + j) * 2)],
            );
        }
        round += 1;
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    for i in (1..1000).step_by(2) {
        assert!(seen.contains(&format!("f{i}")), "f{i} missed");
    }

    assert_eq!(
        q::<(String, Vec<String>)>(&mut c, &["HSCAN", "nokey", "0"]),
        ("0".into(), vec![])
    );
    assert_eq!(err(&mut c, &["HSCAN", "small", "x"]), "ERR invalid cursor");
    assert_eq!(err(&mut c, &["HSCAN", "small", "0", "COUNT", "0"]), SYNTAX);
    assert_eq!(err(&mut c, &["HSCAN", "small", "0", "COUNT", "x"]), NOT_INT);
    assert_eq!(err(&mut c, &["HSCAN", "small", "0", "MATCH"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["HSCAN", "small", "0", "TYPE", "hash"]),
        SYNTAX
    );
}

#[test]
fn expired_hashes_are_gone() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "h", "50"]), 1);
    // HSET on a live hash keeps its TTL.
    let _: i64 = q(&mut c, &["HSET", "h", "b", "2"]);
    assert!(q::<i64>(&mut c, &["PTTL", "h"]) > 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    while q::<i64>(&mut c, &["EXISTS", "h"]) == 1 {
        assert!(Instant::now() < deadline, "h never expired");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "h", "a"]), None);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "c", "3"]), 1);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "h"]), vec!["c"]);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "h"]), -1);
}

/// Byte-exact replies in both protocols. HGETALL is a map in RESP3,
/// HRANDFIELD WITHVALUES an array of [field, value] pairs, HSCAN stays a
/// flat array; nils change shape.
#[test]
fn resp2_and_resp3_reply_shapes() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    assert_eq!(r.cmd_str(&["HSET", "h", "a", "1", "b", "2"]), ":2\r\n");
    let pairs2 = "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n";
    assert_eq!(r.cmd_str(&["HGETALL", "h"]), pairs2);
    assert_eq!(r.cmd_str(&["HGETALL", "nokey"]), "*0\r\n");
    assert_eq!(r.cmd_str(&["HRANDFIELD", "h", "5", "WITHVALUES"]), pairs2);
    assert_eq!(r.cmd_str(&["HRANDFIELD", "h", "0", "WITHVALUES"]), "*0\r\n");
    assert_eq!(r.cmd_str(&["HRANDFIELD", "nokey"]), "$-1\r\n");
    assert_eq!(
        r.cmd_str(&["HMGET", "h", "a", "zz"]),
        "*2\r\n$1\r\n1\r\n$-1\r\n"
    );
    assert_eq!(
        r.cmd_str(&["HSCAN", "h", "0"]),
        format!("*2\r\n$1\r\n0\r\n{pairs2}")
    );
    assert_eq!(
        r.cmd_str(&["HINCRBYFLOAT", "h", "f", "1.5"]),
        "$3\r\n1.5\r\n"
    );

    let hello = r.cmd_str(&["HELLO", "3"]);
    assert!(hello.starts_with('%'), "{hello}");
    assert_eq!(r.cmd_str(&["HDEL", "h", "f"]), ":1\r\n");
    assert_eq!(
        r.cmd_str(&["HGETALL", "h"]),
        "%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(r.cmd_str(&["HGETALL", "nokey"]), "%0\r\n");
    assert_eq!(
        r.cmd_str(&["HRANDFIELD", "h", "5", "WITHVALUES"]),
        "*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        r.cmd_str(&["HRANDFIELD", "h", "5"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(r.cmd_str(&["HRANDFIELD", "nokey"]), "_\r\n");
    assert_eq!(
        r.cmd_str(&["HRANDFIELD", "nokey", "2", "WITHVALUES"]),
        "*0\r\n"
    );
    assert_eq!(r.cmd_str(&["HGET", "h", "zz"]), "_\r\n");
    assert_eq!(
        r.cmd_str(&["HMGET", "h", "a", "zz"]),
        "*2\r\n$1\r\n1\r\n_\r\n"
    );
    assert_eq!(
        r.cmd_str(&["HSCAN", "h", "0"]),
        format!("*2\r\n$1\r\n0\r\n{pairs2}")
    );
    assert_eq!(
        r.cmd_str(&["HINCRBYFLOAT", "h", "f", "1.5"]),
        "$3\r\n1.5\r\n"
    );
}

#[test]
fn resp3_client_reads_maps_and_pairs() {
    let server = Kvasir::start(&[]);
    let mut c = server.client_resp3().get_connection().expect("resp3");
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    let Value::Map(map) = q::<Value>(&mut c, &["HGETALL", "h"]) else {
        panic!("HGETALL is a map in RESP3");
    };
    assert_eq!(map.len(), 2);
    let as_map: BTreeMap<String, String> = q(&mut c, &["HGETALL", "h"]);
    assert_eq!(as_map.get("b").map(String::as_str), Some("2"));
    let Value::Array(pairs) = q::<Value>(&mut c, &["HRANDFIELD", "h", "-3", "WITHVALUES"]) else {
        panic!("HRANDFIELD WITHVALUES is an array in RESP3");
    };
    assert_eq!(pairs.len(), 3);
    for p in pairs {
        let Value::Array(pair) = p else {
            panic!("each pick is a [field, value] array");
        };
        assert_eq!(pair.len(), 2);
    }
    assert_eq!(q::<Value>(&mut c, &["HGET", "h", "zz"]), Value::Nil);
}

/// MEMORY USAGE of a YCSB record (10 fields of 100 bytes): Redis 7.0.15
/// reports 1736 bytes for it.
#[test]
fn ycsb_records_are_compact() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let value = "x".repeat(100);
    let used = |c: &mut Connection| -> i64 {
        let info: String = q(c, &["INFO", "memory"]);
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("used_memory")
    };
    let before = used(&mut c);
    const N: usize = 5000;
    let mut pipe = redis::pipe();
    for i in 0..N {
        let mut hset = redis::cmd("HSET");
        hset.arg(format!("user{}", 1_000_000_000 + i));
        for f in 0..10 {
            hset.arg(format!("field{f}")).arg(&value);
        }
        pipe.add_command(hset).ignore();
    }
    let _: () = pipe.query(&mut c).expect("load");
    let after = used(&mut c);
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "user1000000000"]),
        "hashtable"
    );
    let usage: i64 = q(&mut c, &["MEMORY", "USAGE", "user1000000000"]);
    assert!((1060..1736).contains(&usage), "MEMORY USAGE {usage}");
    // Redis 7.0.15's used_memory grows by about 1851 bytes per such hash.
    let per_hash = (after - before) / N as i64;
    assert!(per_hash < 1851, "{per_hash} bytes per hash");
}
