//! The keys family end to end, as Redis 7.0 answers it: DEL UNLINK EXISTS
//! TOUCH TYPE RENAME RENAMENX COPY, the expiry commands with NX/XX/GT/LT,
//! TTL PTTL EXPIRETIME PEXPIRETIME PERSIST, KEYS, SCAN, RANDOMKEY, OBJECT
//! ENCODING, and the keyspace server commands DBSIZE FLUSHDB FLUSHALL SWAPDB
//! MEMORY USAGE, across databases with SELECT.

mod common;

use common::{err, eventually, now_secs, q, sorted, Kvasir};
use redis::{Connection, Value};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

const SYNTAX: &str = "ERR syntax error";
const NOT_INT: &str = "ERR value is not an integer or out of range";

#[test]
fn del_and_unlink_count_removed_keys() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["MSET", "a", "1", "b", "2", "c", "3", "d", "4"]);
    assert_eq!(q::<i64>(&mut c, &["DEL", "a", "b", "missing"]), 2);
    assert_eq!(q::<i64>(&mut c, &["DEL", "c", "c"]), 1);
    assert_eq!(q::<i64>(&mut c, &["UNLINK", "d", "zz"]), 1);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    assert_eq!(q::<i64>(&mut c, &["DEL", "nothing"]), 0);
}

#[test]
fn exists_counts_repeats_and_touch_counts_existing() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "a", "1"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "a", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "b"]), 0);
    let _: () = q(&mut c, &["SET", "b", "2"]);
    assert_eq!(q::<i64>(&mut c, &["TOUCH", "a", "b", "c"]), 2);
}

#[test]
fn type_reports_string_or_none() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "s", "v"]);
    assert_eq!(
        q::<Value>(&mut c, &["TYPE", "s"]),
        Value::SimpleString("string".into())
    );
    assert_eq!(
        q::<Value>(&mut c, &["TYPE", "nope"]),
        Value::SimpleString("none".into())
    );
}

#[test]
fn rename_moves_value_and_ttl() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "a", "v", "EX", "100"]);
    let _: () = q(&mut c, &["SET", "b", "old"]);
    assert_eq!(q::<Value>(&mut c, &["RENAME", "a", "b"]), Value::Okay);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "b"]), "v");
    let ttl: i64 = q(&mut c, &["TTL", "b"]);
    assert!((99..=100).contains(&ttl), "ttl not carried: {ttl}");
    // A destination TTL does not survive: the source's (none) wins.
    let _: () = q(&mut c, &["SET", "c", "x"]);
    let _: () = q(&mut c, &["SET", "d", "y", "EX", "100"]);
    let _: () = q(&mut c, &["RENAME", "c", "d"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "d"]), -1);
    // Renaming a key onto itself is fine.
    assert_eq!(q::<Value>(&mut c, &["RENAME", "d", "d"]), Value::Okay);
    assert_eq!(q::<String>(&mut c, &["GET", "d"]), "x");
    assert_eq!(err(&mut c, &["RENAME", "missing", "x"]), "ERR no such key");
}

#[test]
fn renamenx_only_renames_onto_missing_keys() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["MSET", "a", "1", "b", "2"]);
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "a", "b"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "a"]), "1");
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "a", "c"]), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "c"]), "1");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "c", "c"]), 0);
    assert_eq!(
        err(&mut c, &["RENAMENX", "missing", "x"]),
        "ERR no such key"
    );
}

#[test]
fn copy_within_and_across_databases() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "src", "v", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["COPY", "src", "dst"]), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "dst"]), "v");
    let ttl: i64 = q(&mut c, &["TTL", "dst"]);
    assert!((99..=100).contains(&ttl), "COPY keeps the TTL: {ttl}");
    let _: () = q(&mut c, &["SET", "src", "w"]);
    assert_eq!(q::<i64>(&mut c, &["COPY", "src", "dst"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "dst"]), "v");
    assert_eq!(q::<i64>(&mut c, &["COPY", "src", "dst", "REPLACE"]), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "dst"]), "w");
    assert_eq!(q::<i64>(&mut c, &["TTL", "dst"]), -1);
    assert_eq!(q::<i64>(&mut c, &["COPY", "missing", "x"]), 0);

    assert_eq!(q::<i64>(&mut c, &["COPY", "src", "src", "DB", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["COPY", "src", "other", "DB", "2"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "other"]), 0);
    let _: () = q(&mut c, &["SELECT", "1"]);
    assert_eq!(q::<String>(&mut c, &["GET", "src"]), "w");
    let _: () = q(&mut c, &["SELECT", "2"]);
    assert_eq!(q::<String>(&mut c, &["GET", "other"]), "w");
    let _: () = q(&mut c, &["SELECT", "0"]);

    assert_eq!(
        err(&mut c, &["COPY", "src", "src"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        err(&mut c, &["COPY", "src", "x", "DB", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(err(&mut c, &["COPY", "src", "x", "DB", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["COPY", "src", "x", "FOO"]), SYNTAX);
}

#[test]
fn expire_sets_ttl_and_negative_expire_deletes() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "missing", "100"]), 0);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100"]), 1);
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "k", "50000"]), 1);
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!((48_000..=50_000).contains(&pttl), "{pttl}");
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "-1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "k", "0"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["EXPIREAT", "k", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
}

#[test]
fn expire_options_nx_xx_gt_lt() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    // No TTL yet: XX and GT refuse (no TTL counts as infinite), NX and LT set.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "GT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "NX"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "200", "NX"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "200", "XX"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "150", "GT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "300", "GT"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "400", "LT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "50", "lt"]), 1);
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((49..=50).contains(&ttl), "{ttl}");
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "k", "40000", "XX", "LT"]), 1);
    let _: () = q(&mut c, &["SET", "fresh", "v"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "fresh", "40000", "LT"]), 1);

    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "10", "NX", "XX"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "10", "NX", "GT"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "10", "GT", "LT"]),
        "ERR GT and LT options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "10", "FOO"]),
        "ERR Unsupported option FOO"
    );
    assert_eq!(err(&mut c, &["EXPIRE", "k", "ten"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'expire' command"
    );
    assert_eq!(
        err(&mut c, &["PEXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'pexpire' command"
    );
}

#[test]
fn expiretime_and_pexpiretime_report_absolute_deadlines() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "missing"]), -2);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "missing"]), -2);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "k"]), -1);
    let at = now_secs() + 1000;
    assert_eq!(q::<i64>(&mut c, &["EXPIREAT", "k", &at.to_string()]), 1);
    assert_eq!(q::<u64>(&mut c, &["EXPIRETIME", "k"]), at);
    assert_eq!(q::<u64>(&mut c, &["PEXPIRETIME", "k"]), at * 1000);
    let at_ms = at * 1000 + 1234;
    assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", "k", &at_ms.to_string()]), 1);
    assert_eq!(q::<u64>(&mut c, &["PEXPIRETIME", "k"]), at_ms);
    assert_eq!(q::<u64>(&mut c, &["EXPIRETIME", "k"]), at + 1);
    assert_eq!(
        q::<i64>(&mut c, &["EXPIREAT", "k", &(at + 10).to_string(), "GT"]),
        1
    );
}

#[test]
fn persist_removes_ttl() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "missing"]), 0);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 0);
    let _: () = q(&mut c, &["EXPIRE", "k", "100"]);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
}

#[test]
fn expire_over_real_time_removes_key() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "k", "200"]), 1);
    let gone = eventually(Duration::from_secs(5), || {
        q::<i64>(&mut c, &["EXISTS", "k"]) == 0
    });
    assert!(gone);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -2);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 0);
    let keys: Vec<String> = q(&mut c, &["KEYS", "*"]);
    assert!(keys.is_empty(), "{keys:?}");
}

#[test]
fn keys_glob_patterns() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for k in ["hello", "hallo", "hxllo", "hllo", "heeeello", "a*b", "axb"] {
        let _: () = q(&mut c, &["SET", k, "1"]);
    }
    let cases: &[(&str, &[&str])] = &[
        ("h?llo", &["hallo", "hello", "hxllo"]),
        ("h*llo", &["hallo", "heeeello", "hello", "hllo", "hxllo"]),
        ("h[ae]llo", &["hallo", "hello"]),
        ("h[^e]llo", &["hallo", "hxllo"]),
        ("h[a-b]llo", &["hallo"]),
        ("a\\*b", &["a*b"]),
        ("a*b", &["a*b", "axb"]),
        ("nomatch*", &[]),
        (
            "*",
            &["a*b", "axb", "hallo", "heeeello", "hello", "hllo", "hxllo"],
        ),
    ];
    for (pattern, want) in cases {
        let got = sorted(q(&mut c, &["KEYS", pattern]));
        assert_eq!(got, *want, "KEYS {pattern}");
    }
}

/// Iterates SCAN to the end, returning every key it produced (with repeats).
fn scan_all(c: &mut Connection, opts: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    for _ in 0..100_000 {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(opts);
        let (next, keys): (String, Vec<String>) = q(c, &args);
        out.extend(keys);
        if next == "0" {
            return out;
        }
        cursor = next;
    }
    panic!("SCAN never returned cursor 0");
}

fn counts(keys: &[String]) -> HashMap<&str, usize> {
    let mut m = HashMap::new();
    for k in keys {
        *m.entry(k.as_str()).or_insert(0) += 1;
    }
    m
}

#[test]
fn scan_returns_every_key_exactly_once() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let all: BTreeSet<String> = (0..1000).map(|i| format!("key:{i}")).collect();
    for chunk in all.iter().collect::<Vec<_>>().chunks(100) {
        let mut m = redis::cmd("MSET");
        for k in chunk {
            m.arg(k.as_str()).arg("v");
        }
        let _: () = m.query(&mut c).unwrap();
    }
    for opts in [
        &[][..],
        &["COUNT", "10"][..],
        &["COUNT", "1000"][..],
        &["COUNT", "1"][..],
    ] {
        let got = scan_all(&mut c, opts);
        let dup: Vec<_> = counts(&got).into_iter().filter(|(_, n)| *n > 1).collect();
        assert!(dup.is_empty(), "SCAN {opts:?} repeated keys: {dup:?}");
        let got: BTreeSet<String> = got.into_iter().collect();
        assert_eq!(got, all, "SCAN {opts:?} missed keys");
    }
}

#[test]
fn scan_match_and_type_filters() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for i in 0..300 {
        let _: () = q(&mut c, &["SET", &format!("user:{i}"), "v"]);
        let _: () = q(&mut c, &["SET", &format!("item:{i}"), "v"]);
    }
    let got = scan_all(&mut c, &["MATCH", "user:1*", "COUNT", "7"]);
    assert!(counts(&got).values().all(|&n| n == 1), "repeats");
    let got: BTreeSet<String> = got.into_iter().collect();
    let want: BTreeSet<String> = (0..300)
        .map(|i| format!("user:{i}"))
        .filter(|k| k.starts_with("user:1"))
        .collect();
    assert_eq!(got, want);

    let strings = scan_all(&mut c, &["TYPE", "string", "COUNT", "50"]);
    assert_eq!(strings.len(), 600);
    assert_eq!(strings.iter().collect::<BTreeSet<_>>().len(), 600);
    let lists = scan_all(&mut c, &["TYPE", "list"]);
    assert!(lists.is_empty(), "{lists:?}");
    let both = scan_all(&mut c, &["MATCH", "item:2?", "TYPE", "string"]);
    assert_eq!(
        sorted(both),
        sorted((20..30).map(|i| format!("item:{i}")).collect())
    );
}

#[test]
fn scan_errors_and_empty_database() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let (cursor, keys): (String, Vec<String>) = q(&mut c, &["SCAN", "0"]);
    assert_eq!(cursor, "0");
    assert!(keys.is_empty());
    assert_eq!(err(&mut c, &["SCAN", "abc"]), "ERR invalid cursor");
    assert_eq!(err(&mut c, &["SCAN", "1x"]), "ERR invalid cursor");
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT", "0"]), SYNTAX);
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT", "x"]), NOT_INT);
    assert_eq!(err(&mut c, &["SCAN", "0", "MATCH"]), SYNTAX);
    assert_eq!(err(&mut c, &["SCAN", "0", "FOO", "bar"]), SYNTAX);
}

#[test]
fn scan_only_sees_the_selected_database() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "zero", "v"]);
    let _: () = q(&mut c, &["SELECT", "3"]);
    let _: () = q(&mut c, &["SET", "three", "v"]);
    assert_eq!(scan_all(&mut c, &[]), vec!["three".to_string()]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(scan_all(&mut c, &[]), vec!["zero".to_string()]);
}

#[test]
fn randomkey_picks_an_existing_key() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<Value>(&mut c, &["RANDOMKEY"]), Value::Nil);
    let _: () = q(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]);
    let mut seen = BTreeSet::new();
    for _ in 0..50 {
        let k: String = q(&mut c, &["RANDOMKEY"]);
        assert!(["a", "b", "c"].contains(&k.as_str()), "{k}");
        seen.insert(k);
    }
    assert!(seen.len() > 1, "RANDOMKEY always returned {seen:?}");
}

#[test]
fn object_encoding_of_strings() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let long = "x".repeat(45);
    let _: () = q(
        &mut c,
        &["MSET", "int", "12345", "neg", "-5", "emb", "hello"],
    );
    let _: () = q(&mut c, &["SET", "raw", &long]);
    let _: () = q(&mut c, &["SET", "huge", "12345678901234567890"]);
    let _: () = q(&mut c, &["SET", "app", "ab"]);
    let _: i64 = q(&mut c, &["APPEND", "app", "c"]);
    // APPEND and SETRANGE unshare the value into a raw string (Redis's
    // dbUnshareStringValue), whatever its length or former encoding.
    let _: () = q(&mut c, &["SET", "intapp", "1"]);
    let _: i64 = q(&mut c, &["APPEND", "intapp", "2"]);
    let _: () = q(&mut c, &["SET", "rng", "hello"]);
    let _: i64 = q(&mut c, &["SETRANGE", "rng", "0", "J"]);
    for (key, want) in [
        ("int", "int"),
        ("neg", "int"),
        ("emb", "embstr"),
        ("raw", "raw"),
        ("huge", "embstr"),
        ("app", "raw"),
        ("intapp", "raw"),
        ("rng", "raw"),
    ] {
        assert_eq!(
            q::<String>(&mut c, &["OBJECT", "ENCODING", key]),
            want,
            "{key}"
        );
    }
    assert_eq!(
        q::<Value>(&mut c, &["OBJECT", "ENCODING", "missing"]),
        Value::Nil
    );
}

#[test]
fn memory_usage_reports_bytes_or_nil() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "small", "v"]);
    let _: () = q(&mut c, &["SET", "big", &"x".repeat(10_000)]);
    let small: i64 = q(&mut c, &["MEMORY", "USAGE", "small"]);
    let big: i64 = q(&mut c, &["MEMORY", "USAGE", "big", "SAMPLES", "0"]);
    assert!(small > 0, "{small}");
    assert!(big >= 10_000 && big > small, "{big}");
    assert_eq!(
        q::<Value>(&mut c, &["MEMORY", "USAGE", "missing"]),
        Value::Nil
    );
}

#[test]
fn select_isolates_databases() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "zero"]);
    assert_eq!(q::<Value>(&mut c, &["SELECT", "1"]), Value::Okay);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None);
    let _: () = q(&mut c, &["SET", "k", "one"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
    let _: () = q(&mut c, &["SELECT", "15"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "zero");
    // Another connection starts in db 0.
    let mut other = server.conn();
    assert_eq!(q::<String>(&mut other, &["GET", "k"]), "zero");
}

#[test]
fn dbsize_counts_keys_of_the_selected_database() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    let _: () = q(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 3);
    let _: i64 = q(&mut c, &["DEL", "a"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
}

#[test]
fn flushdb_clears_only_the_selected_database() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["MSET", "a", "1", "b", "2"]);
    let _: () = q(&mut c, &["SELECT", "1"]);
    let _: () = q(&mut c, &["SET", "c", "3"]);
    assert_eq!(q::<Value>(&mut c, &["FLUSHDB", "ASYNC"]), Value::Okay);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
    assert_eq!(q::<Value>(&mut c, &["FLUSHDB", "SYNC"]), Value::Okay);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    assert_eq!(q::<Value>(&mut c, &["FLUSHDB"]), Value::Okay);
    assert_eq!(err(&mut c, &["FLUSHDB", "NOW"]), SYNTAX);
}

#[test]
fn flushall_async_clears_every_database() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for db in ["0", "1", "7"] {
        let _: () = q(&mut c, &["SELECT", db]);
        let _: () = q(&mut c, &["SET", "k", "v", "EX", "100"]);
        let _: () = q(&mut c, &["SET", "j", "v"]);
    }
    assert_eq!(err(&mut c, &["FLUSHALL", "FOO"]), SYNTAX);
    assert_eq!(
        q::<i64>(&mut c, &["DBSIZE"]),
        2,
        "refused flush changed data"
    );
    assert_eq!(q::<Value>(&mut c, &["FLUSHALL", "ASYNC"]), Value::Okay);
    for db in ["0", "1", "7"] {
        let _: () = q(&mut c, &["SELECT", db]);
        assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0, "db {db}");
    }
    let info: String = q(&mut c, &["INFO", "keyspace"]);
    assert!(!info.contains("db0:"), "{info}");
    let _: () = q(&mut c, &["SET", "x", "1"]);
    assert_eq!(q::<Value>(&mut c, &["FLUSHALL"]), Value::Okay);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
}

#[test]
fn swapdb_swaps_contents_seen_by_other_connections() {
    let server = Kvasir::start(&[]);
    let mut a = server.conn();
    let mut b = server.conn();
    let _: () = q(&mut a, &["SET", "in0", "zero"]);
    let _: () = q(&mut b, &["SELECT", "1"]);
    let _: () = q(&mut b, &["SET", "in1", "one", "EX", "100"]);
    assert_eq!(q::<Value>(&mut a, &["SWAPDB", "0", "1"]), Value::Okay);
    // Connections keep their database index; the data moved under them.
    assert_eq!(q::<String>(&mut a, &["GET", "in1"]), "one");
    assert_eq!(q::<Option<String>>(&mut a, &["GET", "in0"]), None);
    let ttl: i64 = q(&mut a, &["TTL", "in1"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(q::<String>(&mut b, &["GET", "in0"]), "zero");
    assert_eq!(
        err(&mut a, &["SWAPDB", "0", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err(&mut a, &["SWAPDB", "x", "1"]),
        "ERR invalid first DB index"
    );
    assert_eq!(
        err(&mut a, &["SWAPDB", "0", "y"]),
        "ERR invalid second DB index"
    );
}

#[test]
fn rename_and_copy_respect_the_selected_database() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SELECT", "5"]);
    let _: () = q(&mut c, &["SET", "a", "five"]);
    let _: () = q(&mut c, &["RENAME", "a", "b"]);
    assert_eq!(q::<i64>(&mut c, &["COPY", "b", "b", "DB", "0"]), 1);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<String>(&mut c, &["GET", "b"]), "five");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(err(&mut c, &["RENAME", "a", "x"]), "ERR no such key");
}

#[test]
fn wrong_arity_for_key_commands() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for (args, name) in [
        (&["DEL"][..], "del"),
        (&["EXISTS"][..], "exists"),
        (&["TYPE"][..], "type"),
        (&["RENAME", "a"][..], "rename"),
        (&["EXPIRE", "a"][..], "expire"),
        (&["TTL"][..], "ttl"),
        (&["KEYS"][..], "keys"),
        (&["SCAN"][..], "scan"),
        (&["RANDOMKEY", "x"][..], "randomkey"),
        (&["DBSIZE", "x"][..], "dbsize"),
        (&["SWAPDB", "0"][..], "swapdb"),
        (&["COPY", "a"][..], "copy"),
        (&["OBJECT", "ENCODING"][..], "object|encoding"),
        (&["MEMORY", "USAGE"][..], "memory|usage"),
    ] {
        assert_eq!(
            err(&mut c, args),
            format!("ERR wrong number of arguments for '{name}' command"),
            "{args:?}"
        );
    }
}

/// MOVE answers as redis-server 7.0.15 does, byte for byte: moved with its
/// TTL, refused onto an existing key, errors for bad and equal databases.
#[test]
fn move_like_redis() {
    let server = Kvasir::start(&[]);
    let (_redis, redis_port) = common::redis_server::start_redis();
    let script: &[&[&str]] = &[
        &["SET", "k", "v", "EX", "100"],
        &["MOVE", "k", "1"],
        &["EXISTS", "k"],
        &["SELECT", "1"],
        &["GET", "k"],
        &["TTL", "k"],
        &["SET", "j", "in-1"],
        &["SELECT", "0"],
        &["SET", "j", "in-0"],
        &["MOVE", "j", "1"],
        &["GET", "j"],
        &["MOVE", "missing", "1"],
        &["MOVE", "j", "0"],
        &["MOVE", "j", "16"],
        &["MOVE", "j", "-1"],
        &["MOVE", "j", "abc"],
        &["MOVE", "j", "99999999999"],
        &["RPUSH", "l", "a", "b"],
        &["MOVE", "l", "2"],
        &["SELECT", "2"],
        &["LRANGE", "l", "0", "-1"],
        &["MOVE", "l"],
    ];
    let mut kv = server.raw_conn();
    let mut rs = common::RawConn::to_port(redis_port);
    for cmd in script {
        assert_eq!(kv.cmd_str(cmd), rs.cmd_str(cmd), "{cmd:?}");
    }
}
