//! The string family and counters end to end, as Redis 7.0 answers them:
//! GET SET (every option) SETNX SETEX PSETEX GETSET GETDEL GETEX MGET MSET
//! MSETNX APPEND STRLEN GETRANGE SETRANGE INCR DECR INCRBY DECRBY
//! INCRBYFLOAT, their errors, TTL conventions, expiry observed over real
//! time and active expiry. RESP3 reply shapes are checked on raw sockets.

mod common;

use common::{err, eventually, q, Kvasir};
use redis::Value;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";
const OVERFLOW: &str = "ERR increment or decrement would overflow";

#[test]
fn get_and_set_round_trip_binary_values() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = redis::cmd("SET")
        .arg(b"bin\x00key".as_slice())
        .arg(b"\x00\xff\r\n\x01".as_slice())
        .query(&mut c)
        .unwrap();
    let v: Vec<u8> = redis::cmd("GET")
        .arg(b"bin\x00key".as_slice())
        .query(&mut c)
        .unwrap();
    assert_eq!(v, b"\x00\xff\r\n\x01");
    let _: () = q(&mut c, &["SET", "empty", ""]);
    let v: Vec<u8> = q(&mut c, &["GET", "empty"]);
    assert!(v.is_empty());
    let missing: Option<String> = q(&mut c, &["GET", "nope"]);
    assert_eq!(missing, None);
}

#[test]
fn set_overwrites_and_returns_ok() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let ok: Value = q(&mut c, &["SET", "k", "v1"]);
    assert_eq!(ok, Value::Okay);
    let ok: Value = q(&mut c, &["SET", "k", "v2"]);
    assert_eq!(ok, Value::Okay);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v2");
}

#[test]
fn set_nx_and_xx_conditions() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<Value>(&mut c, &["SET", "k", "a", "XX"]), Value::Nil);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None);
    assert_eq!(q::<Value>(&mut c, &["SET", "k", "a", "NX"]), Value::Okay);
    assert_eq!(q::<Value>(&mut c, &["SET", "k", "b", "NX"]), Value::Nil);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "a");
    assert_eq!(q::<Value>(&mut c, &["SET", "k", "c", "xx"]), Value::Okay);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "c");
}

#[test]
fn set_with_get_returns_old_value() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "k", "v1", "GET"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "k", "v2", "GET"]),
        Some("v1".into())
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v2");
    // Redis 7.0 allows NX together with GET: the old value comes back and
    // nothing is written when the key exists.
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "k", "v3", "NX", "GET"]),
        Some("v2".into())
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v2");
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "fresh", "x", "NX", "GET"]),
        None
    );
    assert_eq!(q::<String>(&mut c, &["GET", "fresh"]), "x");
    // XX with GET on a missing key: nil and no key.
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "absent", "x", "XX", "GET"]),
        None
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "absent"]), 0);
}

#[test]
fn set_expiry_options_set_ttl() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "ex", "v", "EX", "100"]);
    let ttl: i64 = q(&mut c, &["TTL", "ex"]);
    assert!((99..=100).contains(&ttl), "EX ttl {ttl}");

    let _: () = q(&mut c, &["SET", "px", "v", "PX", "100000"]);
    let pttl: i64 = q(&mut c, &["PTTL", "px"]);
    assert!((98_000..=100_000).contains(&pttl), "PX pttl {pttl}");

    let at = now_ms() / 1000 + 200;
    let _: () = q(&mut c, &["SET", "exat", "v", "EXAT", &at.to_string()]);
    assert_eq!(q::<u64>(&mut c, &["EXPIRETIME", "exat"]), at);

    let at_ms = now_ms() + 300_000;
    let _: () = q(&mut c, &["SET", "pxat", "v", "PXAT", &at_ms.to_string()]);
    assert_eq!(q::<u64>(&mut c, &["PEXPIRETIME", "pxat"]), at_ms);
}

#[test]
fn set_without_keepttl_clears_ttl_and_keepttl_keeps_it() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "v", "EX", "100"]);
    let _: () = q(&mut c, &["SET", "k", "v2", "KEEPTTL"]);
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "KEEPTTL lost the ttl: {ttl}");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v2");
    let _: () = q(&mut c, &["SET", "k", "v3"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
}

#[test]
fn set_syntax_errors() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let cases: &[&[&str]] = &[
        &["SET", "k", "v", "NX", "XX"],
        &["SET", "k", "v", "EX", "10", "PX", "100"],
        &["SET", "k", "v", "KEEPTTL", "EX", "10"],
        &["SET", "k", "v", "PXAT", "1", "EXAT", "1"],
        &["SET", "k", "v", "FOO"],
        &["SET", "k", "v", "EX"],
        &["SET", "k", "v", "GET", "GET", "x"],
    ];
    for args in cases {
        assert_eq!(err(&mut c, args), SYNTAX, "{args:?}");
    }
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", "k"]),
        0,
        "a refused SET wrote nothing"
    );
}

#[test]
fn set_invalid_expire_time_errors() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let invalid = "ERR invalid expire time in 'set' command";
    for args in [
        ["SET", "k", "v", "EX", "0"],
        ["SET", "k", "v", "EX", "-1"],
        ["SET", "k", "v", "PX", "0"],
        ["SET", "k", "v", "PX", "-100"],
        ["SET", "k", "v", "EXAT", "0"],
        ["SET", "k", "v", "PXAT", "-5"],
        ["SET", "k", "v", "EX", "9223372036854775807"],
    ] {
        assert_eq!(err(&mut c, &args), invalid, "{args:?}");
    }
    assert_eq!(err(&mut c, &["SET", "k", "v", "EX", "ten"]), NOT_INT);
    assert_eq!(err(&mut c, &["SET", "k", "v", "PX", "1.5"]), NOT_INT);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
}

#[test]
fn setnx_sets_only_missing_keys() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "b"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "a");
}

#[test]
fn setex_and_psetex_set_value_and_ttl() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<Value>(&mut c, &["SETEX", "k", "100", "v"]), Value::Okay);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(
        q::<Value>(&mut c, &["PSETEX", "p", "100000", "w"]),
        Value::Okay
    );
    let pttl: i64 = q(&mut c, &["PTTL", "p"]);
    assert!((98_000..=100_000).contains(&pttl), "{pttl}");
    assert_eq!(
        err(&mut c, &["SETEX", "k", "0", "v"]),
        "ERR invalid expire time in 'setex' command"
    );
    assert_eq!(
        err(&mut c, &["PSETEX", "k", "-10", "v"]),
        "ERR invalid expire time in 'psetex' command"
    );
    assert_eq!(err(&mut c, &["SETEX", "k", "abc", "v"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["SETEX", "k", "10"]),
        "ERR wrong number of arguments for 'setex' command"
    );
}

#[test]
fn getset_returns_old_value_and_clears_ttl() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<Option<String>>(&mut c, &["GETSET", "k", "a"]), None);
    let _: () = q(&mut c, &["EXPIRE", "k", "100"]);
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETSET", "k", "b"]),
        Some("a".into())
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "b");
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
}

#[test]
fn getdel_returns_value_and_deletes_key() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETDEL", "k"]),
        Some("v".into())
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    assert_eq!(q::<Option<String>>(&mut c, &["GETDEL", "k"]), None);
}

#[test]
fn getex_changes_or_removes_ttl() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETEX", "nope", "EX", "10"]),
        None
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "nope"]), 0);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<String>(&mut c, &["GETEX", "k"]), "v");
    assert_eq!(
        q::<i64>(&mut c, &["TTL", "k"]),
        -1,
        "plain GETEX changes nothing"
    );
    assert_eq!(q::<String>(&mut c, &["GETEX", "k", "EX", "100"]), "v");
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(q::<String>(&mut c, &["GETEX", "k", "PX", "200000"]), "v");
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!((198_000..=200_000).contains(&pttl), "{pttl}");
    let at = now_ms() / 1000 + 500;
    assert_eq!(
        q::<String>(&mut c, &["GETEX", "k", "EXAT", &at.to_string()]),
        "v"
    );
    assert_eq!(q::<u64>(&mut c, &["EXPIRETIME", "k"]), at);
    assert_eq!(q::<String>(&mut c, &["GETEX", "k", "PERSIST"]), "v");
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(
        err(&mut c, &["GETEX", "k", "EX", "0"]),
        "ERR invalid expire time in 'getex' command"
    );
    assert_eq!(err(&mut c, &["GETEX", "k", "EX", "10", "PX", "10"]), SYNTAX);
    assert_eq!(err(&mut c, &["GETEX", "k", "PERSIST", "EX", "10"]), SYNTAX);
    assert_eq!(err(&mut c, &["GETEX", "k", "FOO"]), SYNTAX);
    assert_eq!(err(&mut c, &["GETEX", "k", "EX", "x"]), NOT_INT);
}

#[test]
fn mget_returns_nil_for_missing_keys() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "a", "1"]);
    let _: () = q(&mut c, &["SET", "c", "3"]);
    let got: Vec<Option<String>> = q(&mut c, &["MGET", "a", "b", "c", "a"]);
    assert_eq!(
        got,
        vec![Some("1".into()), None, Some("3".into()), Some("1".into())]
    );
}

#[test]
fn mset_sets_every_pair_and_rejects_odd_arguments() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(
        q::<Value>(&mut c, &["MSET", "a", "1", "b", "2", "a", "3"]),
        Value::Okay
    );
    let got: Vec<String> = q(&mut c, &["MGET", "a", "b"]);
    assert_eq!(got, vec!["3", "2"], "the last pair for a key wins");
    assert_eq!(
        err(&mut c, &["MSET", "a", "1", "b"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "a"]), "3");
}

#[test]
fn msetnx_is_all_or_nothing() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "a", "1", "b", "2"]), 1);
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "b", "x", "c", "3"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "c"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "b"]), "2");
    assert_eq!(
        err(&mut c, &["MSETNX", "a", "1", "b"]),
        "ERR wrong number of arguments for 'msetnx' command"
    );
}

#[test]
fn append_and_strlen() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "k"]), 0);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "k", "Hello"]), 5);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "k", " World"]), 11);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "Hello World");
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "k"]), 11);
    // An integer-encoded value appends as its decimal text.
    let _: () = q(&mut c, &["SET", "n", "12"]);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "n", "34"]), 4);
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 1235);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "n"]), 4);
}

#[test]
fn append_keeps_ttl() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "a", "EX", "100"]);
    let _: i64 = q(&mut c, &["APPEND", "k", "b"]);
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
}

#[test]
fn getrange_handles_negative_and_out_of_range_indexes() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "This is a string"]);
    for (start, end, want) in [
        ("0", "3", "This"),
        ("-3", "-1", "ing"),
        ("0", "-1", "This is a string"),
        ("10", "100", "string"),
        ("5", "3", ""),
        ("-1", "-5", ""),
        ("-100", "3", "This"),
        ("100", "200", ""),
    ] {
        assert_eq!(
            q::<String>(&mut c, &["GETRANGE", "k", start, end]),
            want,
            "GETRANGE {start} {end}"
        );
    }
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "missing", "0", "-1"]), "");
    assert_eq!(err(&mut c, &["GETRANGE", "k", "a", "1"]), NOT_INT);
}

#[test]
fn setrange_overwrites_pads_and_validates() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "Hello World"]);
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "6", "Redis"]), 11);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "Hello Redis");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "11", "!!"]), 13);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "Hello Redis!!");

    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "pad", "6", "Redis"]), 11);
    let v: Vec<u8> = q(&mut c, &["GET", "pad"]);
    assert_eq!(v, b"\0\0\0\0\0\0Redis");

    // An empty value on a missing key creates nothing.
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "none", "5", ""]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "none"]), 0);
    // An empty value on an existing key returns its length.
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "100", ""]), 13);

    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "-1", "x"]),
        "ERR offset is out of range"
    );
    assert_eq!(err(&mut c, &["SETRANGE", "k", "x", "y"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "536870911", "ab"]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
}

#[test]
fn incr_decr_family() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 1);
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 2);
    assert_eq!(q::<i64>(&mut c, &["DECR", "n"]), 1);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "n", "10"]), 11);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "n", "-20"]), -9);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "n", "1"]), -10);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "n", "-15"]), 5);
    assert_eq!(q::<String>(&mut c, &["GET", "n"]), "5");
    assert_eq!(q::<i64>(&mut c, &["DECR", "fresh"]), -1);
    let _: () = q(&mut c, &["SET", "s", "-42"]);
    assert_eq!(q::<i64>(&mut c, &["INCR", "s"]), -41);
}

#[test]
fn incr_rejects_non_integers() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for v in ["abc", "1.5", " 1", "1 ", "", "9223372036854775808", "0x10"] {
        let _: () = q(&mut c, &["SET", "k", v]);
        assert_eq!(err(&mut c, &["INCR", "k"]), NOT_INT, "value {v:?}");
        assert_eq!(q::<String>(&mut c, &["GET", "k"]), v, "value changed");
    }
    assert_eq!(err(&mut c, &["INCRBY", "n", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["DECRBY", "n", "1.0"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["INCRBY", "n", "99999999999999999999"]),
        NOT_INT
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "n"]), 0);
}

#[test]
fn incr_overflow_is_an_error() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "max", "9223372036854775807"]);
    assert_eq!(err(&mut c, &["INCR", "max"]), OVERFLOW);
    assert_eq!(err(&mut c, &["INCRBY", "max", "1"]), OVERFLOW);
    assert_eq!(q::<String>(&mut c, &["GET", "max"]), "9223372036854775807");
    let _: () = q(&mut c, &["SET", "min", "-9223372036854775808"]);
    assert_eq!(err(&mut c, &["DECR", "min"]), OVERFLOW);
    assert_eq!(err(&mut c, &["DECRBY", "min", "1"]), OVERFLOW);
    assert_eq!(err(&mut c, &["INCRBY", "min", "-1"]), OVERFLOW);
    assert_eq!(
        q::<i64>(&mut c, &["INCRBY", "min", "9223372036854775807"]),
        -1
    );
}

#[test]
fn incr_keeps_ttl() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "n", "1", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 2);
    let ttl: i64 = q(&mut c, &["TTL", "n"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
}

#[test]
fn incrbyfloat_adds_and_formats_like_redis() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "f", "10.50"]);
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "0.1"]), "10.6");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "-5"]), "5.6");
    assert_eq!(q::<String>(&mut c, &["GET", "f"]), "5.6");
    let _: () = q(&mut c, &["SET", "e", "5.0e3"]);
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "e", "2.0e2"]), "5200");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "new", "3"]), "3");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "new", "-3.5"]), "-0.5");
    let _: () = q(&mut c, &["SET", "i", "7"]);
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "i", "1.25"]), "8.25");
}

#[test]
fn incrbyfloat_rejects_invalid_floats() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "f", "abc"]), NOT_FLOAT);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "f", ""]), NOT_FLOAT);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "f", "1.5x"]), NOT_FLOAT);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "f", "nan"]), NOT_FLOAT);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "f"]), 0);
    let _: () = q(&mut c, &["SET", "s", "hello"]);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "s", "1"]), NOT_FLOAT);
    let _: () = q(&mut c, &["SET", "n", "1"]);
    assert_eq!(
        err(&mut c, &["INCRBYFLOAT", "n", "inf"]),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "n"]), "1");
}

#[test]
fn ttl_and_pttl_conventions() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["TTL", "missing"]), -2);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "missing"]), -2);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), -1);
    let _: () = q(&mut c, &["SET", "t", "v", "PX", "1500"]);
    let ttl: i64 = q(&mut c, &["TTL", "t"]);
    assert!((1..=2).contains(&ttl), "TTL rounds to seconds: {ttl}");
    let pttl: i64 = q(&mut c, &["PTTL", "t"]);
    assert!(pttl > 0 && pttl <= 1500, "{pttl}");
}

#[test]
fn key_with_px_expires_over_real_time() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "v", "PX", "300"]);
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!(pttl > 0 && pttl <= 300, "{pttl}");
    let gone = eventually(Duration::from_secs(5), || {
        q::<Option<String>>(&mut c, &["GET", "k"]).is_none()
    });
    assert!(gone, "key with PX 300 still readable after 5 s");
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    // Writes treat it as missing too.
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "again"]), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
}

#[test]
fn psetex_and_getex_px_expire_over_real_time() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["PSETEX", "a", "200", "v"]);
    let _: () = q(&mut c, &["SET", "b", "v"]);
    assert_eq!(q::<String>(&mut c, &["GETEX", "b", "PX", "200"]), "v");
    let gone = eventually(Duration::from_secs(5), || {
        q::<i64>(&mut c, &["EXISTS", "a", "b"]) == 0
    });
    assert!(gone, "keys still there after 5 s");
}

#[test]
fn active_expiry_removes_keys_nobody_touches() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for i in 0..200 {
        let _: () = q(&mut c, &["SET", &format!("vol:{i}"), "v", "PX", "100"]);
    }
    let _: () = q(&mut c, &["SET", "keep", "v"]);
    // Other databases are swept as well.
    let _: () = q(&mut c, &["SELECT", "9"]);
    for i in 0..50 {
        let _: () = q(&mut c, &["SET", &format!("vol9:{i}"), "v", "PX", "100"]);
    }
    let db9_dropped = eventually(Duration::from_secs(5), || {
        q::<i64>(&mut c, &["DBSIZE"]) == 0
    });
    assert!(db9_dropped, "active expiry skipped db 9");
    let _: () = q(&mut c, &["SELECT", "0"]);
    // DBSIZE counts keys that expired but were not removed yet, so only
    // the background cycle can bring it down to 1 here.
    let dropped = eventually(Duration::from_secs(5), || {
        q::<i64>(&mut c, &["DBSIZE"]) == 1
    });
    assert!(
        dropped,
        "active expiry did not remove the keys: DBSIZE {}",
        q::<i64>(&mut c, &["DBSIZE"])
    );
    let info: String = q(&mut c, &["INFO", "stats"]);
    let expired: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("expired_keys:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("expired_keys in INFO stats");
    assert!(expired >= 250, "expired_keys:{expired}");
    assert_eq!(q::<String>(&mut c, &["GET", "keep"]), "v");
}

#[test]
fn wrong_arity_for_string_commands() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for (args, name) in [
        (&["GET"][..], "get"),
        (&["GET", "a", "b"][..], "get"),
        (&["SET", "k"][..], "set"),
        (&["SETNX", "k"][..], "setnx"),
        (&["GETSET", "k"][..], "getset"),
        (&["GETDEL"][..], "getdel"),
        (&["MGET"][..], "mget"),
        (&["APPEND", "k"][..], "append"),
        (&["STRLEN"][..], "strlen"),
        (&["GETRANGE", "k", "0"][..], "getrange"),
        (&["SETRANGE", "k", "0"][..], "setrange"),
        (&["INCR"][..], "incr"),
        (&["INCRBY", "k"][..], "incrby"),
        (&["DECRBY", "k"][..], "decrby"),
        (&["INCRBYFLOAT", "k"][..], "incrbyfloat"),
        (&["PSETEX", "k", "1"][..], "psetex"),
    ] {
        assert_eq!(
            err(&mut c, args),
            format!("ERR wrong number of arguments for '{name}' command"),
            "{args:?}"
        );
    }
}

/// RESP3 changes the shape of nulls; INCRBYFLOAT stays a bulk string (Redis
/// does not answer it with a double).
#[test]
fn resp3_reply_shapes_for_strings() {
    let server = Kvasir::start(&[]);
    let mut r = server.raw_conn();
    // RESP2 first.
    assert_eq!(r.cmd_str(&["GET", "missing"]), "$-1\r\n");
    assert_eq!(r.cmd_str(&["SET", "a", "1"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["MGET", "a", "b"]), "*2\r\n$1\r\n1\r\n$-1\r\n");
    assert_eq!(r.cmd_str(&["SET", "a", "2", "NX"]), "$-1\r\n");
    assert_eq!(r.cmd_str(&["INCRBYFLOAT", "f", "1.5"]), "$3\r\n1.5\r\n");
    assert_eq!(r.cmd_str(&["INCR", "n"]), ":1\r\n");

    let hello = r.cmd_str(&["HELLO", "3"]);
    assert!(hello.starts_with("%7\r\n"), "{hello}");
    assert_eq!(r.cmd_str(&["GET", "missing"]), "_\r\n");
    assert_eq!(r.cmd_str(&["MGET", "a", "b"]), "*2\r\n$1\r\n1\r\n_\r\n");
    assert_eq!(r.cmd_str(&["SET", "a", "2", "NX"]), "_\r\n");
    assert_eq!(r.cmd_str(&["SET", "a", "3", "GET"]), "$1\r\n1\r\n");
    assert_eq!(r.cmd_str(&["GETDEL", "zz"]), "_\r\n");
    assert_eq!(r.cmd_str(&["INCRBYFLOAT", "f", "1"]), "$3\r\n2.5\r\n");
    assert_eq!(r.cmd_str(&["INCR", "n"]), ":2\r\n");
    assert_eq!(
        r.cmd_str(&["INCR", "a", "x"]),
        "-ERR wrong number of arguments for 'incr' command\r\n"
    );
}

#[test]
fn resp3_client_reads_strings() {
    let server = Kvasir::start(&[]);
    let mut c = server.client_resp3().get_connection().expect("resp3");
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    assert_eq!(q::<Value>(&mut c, &["GET", "nope"]), Value::Nil);
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "2.5"]), "2.5");
    let got: Vec<Option<String>> = q(&mut c, &["MGET", "k", "nope"]);
    assert_eq!(got, vec![Some("v".into()), None]);
}
