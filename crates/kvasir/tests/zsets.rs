//! The sorted set family end to end, as Redis 7.0 answers it: ZADD (every
//! option) ZINCRBY ZREM ZSCORE ZMSCORE ZCARD ZCOUNT ZLEXCOUNT, ranges by
//! rank, score and lex (ZRANGE with every option and the older commands),
//! ZRANGESTORE, ZRANK ZREVRANK, ZREMRANGEBY*, pops (ZPOPMIN ZPOPMAX ZMPOP
//! and the blocking ones when they can serve at once), ZRANDMEMBER, the set
//! operations with WEIGHTS and AGGREGATE, ZSCAN, error texts, encodings and
//! memory. RESP3 reply shapes are checked on raw sockets, byte for byte.

mod common;

use common::{err, q, Kvasir};
use redis::{Connection, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

fn strs(conn: &mut Connection, args: &[&str]) -> Vec<String> {
    q(conn, args)
}

/// Member/score pairs of a RESP2 WITHSCORES reply.
fn scored(conn: &mut Connection, args: &[&str]) -> Vec<(String, f64)> {
    let flat: Vec<String> = q(conn, args);
    flat.chunks(2)
        .map(|p| (p[0].clone(), p[1].parse().expect("score")))
        .collect()
}

fn pairs(items: &[(&str, f64)]) -> Vec<(String, f64)> {
    items.iter().map(|(m, s)| (m.to_string(), *s)).collect()
}

fn list(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// z = a:1 b:2 c:3 d:4 e:5
fn abcde(c: &mut Connection, key: &str) {
    let n: i64 = q(
        c,
        &[
            "ZADD", key, "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    assert_eq!(n, 5);
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const SYNTAX: &str = "ERR syntax error";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const NOT_INT: &str = "ERR value is not an integer or out of range";

#[test]
fn zadd_options_and_scores() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "CH", "5", "a", "2", "b", "3", "c"]),
        2
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "NX", "9", "a", "4", "d"]),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "XX", "CH", "6", "a", "7", "nope"]),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "GT", "CH", "1", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "LT", "CH", "1", "a"]), 1);
    assert_eq!(q::<Option<f64>>(&mut c, &["ZSCORE", "z", "a"]), Some(1.0));
    assert_eq!(q::<Option<f64>>(&mut c, &["ZSCORE", "z", "nope"]), None);
    assert_eq!(q::<f64>(&mut c, &["ZADD", "z", "INCR", "2.5", "a"]), 3.5);
    assert_eq!(
        q::<Option<f64>>(&mut c, &["ZADD", "z", "NX", "INCR", "1", "a"]),
        None
    );
    assert_eq!(q::<f64>(&mut c, &["ZINCRBY", "z", "-0.5", "a"]), 3.0);
    assert_eq!(q::<f64>(&mut c, &["ZINCRBY", "z", "10", "new"]), 10.0);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), 5);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "none"]), 0);
    let ms: Vec<Option<f64>> = q(&mut c, &["ZMSCORE", "z", "a", "x", "new"]);
    assert_eq!(ms, vec![Some(3.0), None, Some(10.0)]);
    // Scores: infinities, exponents, shortest round-trip formatting.
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZADD", "f", "-inf", "lo", "+inf", "hi", "1e3", "k", "0.1", "t"]
        ),
        4
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "f", "lo"]), "-inf");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "f", "hi"]), "inf");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "f", "k"]), "1000");
    // Redis 7.0 prints doubles with %.17g.
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "f", "t"]),
        "0.10000000000000001"
    );
    // Binary members.
    let _: i64 = redis::cmd("ZADD")
        .arg("bin")
        .arg(1)
        .arg(b"\x00\xff\r\n".as_slice())
        .query(&mut c)
        .unwrap();
    let got: Vec<Vec<u8>> = q(&mut c, &["ZRANGE", "bin", "0", "-1"]);
    assert_eq!(got, vec![b"\x00\xff\r\n".to_vec()]);
}

#[test]
fn zadd_and_zincrby_errors() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert_eq!(
        err(&mut c, &["ZADD", "z", "1"]),
        "ERR wrong number of arguments for 'zadd' command"
    );
    assert_eq!(err(&mut c, &["ZADD", "z", "NX", "XX"]), SYNTAX);
    assert_eq!(err(&mut c, &["ZADD", "z", "1", "a", "2"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["ZADD", "z", "NX", "XX", "1", "a"]),
        "ERR XX and NX options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "GT", "LT", "1", "a"]),
        "ERR GT, LT, and/or NX options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "NX", "GT", "1", "a"]),
        "ERR GT, LT, and/or NX options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "INCR", "1", "a", "2", "b"]),
        "ERR INCR option supports a single increment-element pair"
    );
    for bad in ["x", "nan", "1e400", " 1"] {
        assert_eq!(
            err(&mut c, &["ZADD", "z", "1", "a", bad, "b"]),
            NOT_FLOAT,
            "{bad:?}"
        );
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0, "nothing written");
    assert_eq!(
        q::<f64>(&mut c, &["ZINCRBY", "z", "inf", "a"]),
        f64::INFINITY
    );
    assert_eq!(
        err(&mut c, &["ZINCRBY", "z", "-inf", "a"]),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(err(&mut c, &["ZINCRBY", "z", "x", "a"]), NOT_FLOAT);
    let _: () = q(&mut c, &["SET", "s", "v"]);
    for a in [
        &["ZADD", "s", "1", "a"][..],
        &["ZINCRBY", "s", "1", "a"],
        &["ZREM", "s", "a"],
        &["ZSCORE", "s", "a"],
        &["ZCARD", "s"],
        &["ZRANGE", "s", "0", "-1"],
        &["ZRANK", "s", "a"],
        &["ZPOPMIN", "s"],
        &["ZRANDMEMBER", "s"],
        &["ZSCAN", "s", "0"],
        &["ZUNION", "1", "s"],
        &["ZUNIONSTORE", "d", "1", "s"],
        &["ZREMRANGEBYRANK", "s", "0", "1"],
        &["ZCOUNT", "s", "0", "1"],
    ] {
        assert_eq!(err(&mut c, a), WRONGTYPE, "{a:?}");
    }
}

#[test]
fn ranges_by_rank_score_and_lex() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    abcde(&mut c, "z");
    assert_eq!(
        strs(&mut c, &["ZRANGE", "z", "0", "-1"]),
        list(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(
        strs(&mut c, &["ZRANGE", "z", "-2", "100"]),
        list(&["d", "e"])
    );
    assert_eq!(strs(&mut c, &["ZRANGE", "z", "3", "1"]), list(&[]));
    assert_eq!(
        strs(&mut c, &["ZRANGE", "z", "0", "1", "REV"]),
        list(&["e", "d"])
    );
    assert_eq!(
        scored(&mut c, &["ZRANGE", "z", "0", "1", "WITHSCORES"]),
        pairs(&[("a", 1.0), ("b", 2.0)])
    );
    assert_eq!(
        strs(&mut c, &["ZREVRANGE", "z", "0", "1"]),
        list(&["e", "d"])
    );
    assert_eq!(
        strs(&mut c, &["ZRANGE", "z", "(1", "3", "BYSCORE"]),
        list(&["b", "c"])
    );
    assert_eq!(
        strs(
            &mut c,
            &["ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2"]
        ),
        list(&["d", "c"])
    );
    assert_eq!(
        strs(&mut c, &["ZRANGEBYSCORE", "z", "-inf", "(3"]),
        list(&["a", "b"])
    );
    assert_eq!(
        scored(&mut c, &["ZRANGEBYSCORE", "z", "4", "+inf", "WITHSCORES"]),
        pairs(&[("d", 4.0), ("e", 5.0)])
    );
    assert_eq!(
        strs(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "2", "-1"]
        ),
        list(&["c", "d", "e"])
    );
    assert_eq!(
        strs(&mut c, &["ZREVRANGEBYSCORE", "z", "(5", "(2"]),
        list(&["d", "c"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(1", "+inf"]), 4);
    assert_eq!(q::<Option<i64>>(&mut c, &["ZRANK", "z", "c"]), Some(2));
    assert_eq!(q::<Option<i64>>(&mut c, &["ZREVRANK", "z", "c"]), Some(2));
    assert_eq!(q::<Option<i64>>(&mut c, &["ZREVRANK", "z", "e"]), Some(0));
    assert_eq!(q::<Option<i64>>(&mut c, &["ZRANK", "z", "x"]), None);

    let _: i64 = q(
        &mut c,
        &[
            "ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e",
        ],
    );
    assert_eq!(
        strs(&mut c, &["ZRANGEBYLEX", "l", "[b", "(d"]),
        list(&["b", "c"])
    );
    assert_eq!(
        strs(&mut c, &["ZRANGEBYLEX", "l", "-", "+", "LIMIT", "1", "2"]),
        list(&["b", "c"])
    );
    assert_eq!(
        strs(&mut c, &["ZREVRANGEBYLEX", "l", "+", "(c"]),
        list(&["e", "d"])
    );
    assert_eq!(
        strs(&mut c, &["ZRANGE", "l", "[c", "+", "BYLEX"]),
        list(&["c", "d", "e"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "l", "(a", "[c"]), 2);

    let cases: &[(&[&str], &str)] = &[
        (
            &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"],
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ),
        (
            &["ZRANGE", "l", "-", "+", "BYLEX", "WITHSCORES"],
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ),
        (&["ZRANGE", "z", "0", "-1", "BOGUS"], SYNTAX),
        (&["ZRANGEBYSCORE", "z", "0", "1", "REV"], SYNTAX),
        (&["ZRANGE", "z", "x", "1"], NOT_INT),
        (
            &["ZRANGEBYSCORE", "z", "x", "1"],
            "ERR min or max is not a float",
        ),
        (&["ZCOUNT", "z", "(", "(x"], "ERR min or max is not a float"),
        (
            &["ZRANGEBYLEX", "l", "a", "+"],
            "ERR min or max not valid string range item",
        ),
        (
            &["ZLEXCOUNT", "l", "-", "c"],
            "ERR min or max not valid string range item",
        ),
    ];
    for (a, e) in cases {
        assert_eq!(err(&mut c, a), *e, "{a:?}");
    }
}

#[test]
fn stores_and_removals() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    abcde(&mut c, "z");
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", "dst", "z", "1", "3"]), 3);
    assert_eq!(
        strs(&mut c, &["ZRANGE", "dst", "0", "-1"]),
        list(&["b", "c", "d"])
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "ZRANGESTORE",
                "dst",
                "z",
                "5",
                "3",
                "BYSCORE",
                "REV",
                "LIMIT",
                "0",
                "1"
            ]
        ),
        1
    );
    assert_eq!(strs(&mut c, &["ZRANGE", "dst", "0", "-1"]), list(&["e"]));
    assert_eq!(
        q::<i64>(&mut c, &["ZRANGESTORE", "dst", "none", "0", "-1"]),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);
    assert_eq!(
        err(
            &mut c,
            &["ZRANGESTORE", "dst", "z", "0", "-1", "WITHSCORES"]
        ),
        SYNTAX
    );

    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "a", "x"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "0", "0"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "(3", "4"]), 1);
    assert_eq!(strs(&mut c, &["ZRANGE", "z", "0", "-1"]), list(&["c", "e"]));
    let _: i64 = q(&mut c, &["ZADD", "l", "0", "a", "0", "b", "0", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYLEX", "l", "-", "(c"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "l", "c"]), 1);
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", "l"]),
        0,
        "empty sets are deleted"
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"]),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
}

#[test]
fn pops() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    abcde(&mut c, "z");
    assert_eq!(strs(&mut c, &["ZPOPMIN", "z"]), list(&["a", "1"]));
    assert_eq!(
        strs(&mut c, &["ZPOPMAX", "z", "2"]),
        list(&["e", "5", "d", "4"])
    );
    assert_eq!(strs(&mut c, &["ZPOPMIN", "z", "0"]), list(&[]));
    assert_eq!(strs(&mut c, &["ZPOPMIN", "none"]), list(&[]));
    assert_eq!(
        err(&mut c, &["ZPOPMIN", "z", "-1"]),
        "ERR value is out of range, must be positive"
    );
    let got: (String, Vec<(String, f64)>) =
        q(&mut c, &["ZMPOP", "2", "none", "z", "MIN", "COUNT", "5"]);
    assert_eq!(got, ("z".to_string(), pairs(&[("b", 2.0), ("c", 3.0)])));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    assert_eq!(q::<Value>(&mut c, &["ZMPOP", "1", "z", "MIN"]), Value::Nil);
    assert_eq!(
        err(&mut c, &["ZMPOP", "0", "z", "MIN"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["ZMPOP", "1", "z", "MIN", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    assert_eq!(err(&mut c, &["ZMPOP", "1", "z", "LEFT"]), SYNTAX);
    // Blocking pops serve at once when they can.
    abcde(&mut c, "z");
    assert_eq!(
        strs(&mut c, &["BZPOPMIN", "none", "z", "1"]),
        list(&["z", "a", "1"])
    );
    assert_eq!(
        strs(&mut c, &["BZPOPMAX", "z", "0"]),
        list(&["z", "e", "5"])
    );
    let got: (String, Vec<(String, f64)>) =
        q(&mut c, &["BZMPOP", "1", "1", "z", "MAX", "COUNT", "2"]);
    assert_eq!(got, ("z".to_string(), pairs(&[("d", 4.0), ("c", 3.0)])));
    assert_eq!(
        err(&mut c, &["BZPOPMIN", "z", "x"]),
        "ERR timeout is not a float or out of range"
    );
    assert_eq!(
        err(&mut c, &["BZPOPMIN", "z", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        err(&mut c, &["BZMPOP", "0", "0", "z", "MIN"]),
        "ERR numkeys should be greater than 0"
    );
    // Inside MULTI a blocking pop that finds nothing answers nil at once.
    let mut pipe = redis::pipe();
    pipe.atomic().cmd("BZPOPMIN").arg("empty").arg(0);
    let got: (Value,) = pipe.query(&mut c).unwrap();
    assert_eq!(got.0, Value::Nil);
}

#[test]
fn zrandmember() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    abcde(&mut c, "z");
    let all: BTreeSet<String> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let one: String = q(&mut c, &["ZRANDMEMBER", "z"]);
    assert!(all.contains(&one));
    let three: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "3"]);
    assert_eq!(three.iter().collect::<BTreeSet<_>>().len(), 3);
    assert_eq!(
        strs(&mut c, &["ZRANDMEMBER", "z", "10"]),
        list(&["e", "d", "c", "b", "a"])
    );
    let many: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "-12"]);
    assert_eq!(many.len(), 12);
    assert!(many.iter().all(|m| all.contains(m)));
    let with = scored(&mut c, &["ZRANDMEMBER", "z", "-4", "WITHSCORES"]);
    assert!(with
        .iter()
        .all(|(m, s)| (m.as_bytes()[0] - b'a' + 1) as f64 == *s));
    assert_eq!(q::<Option<String>>(&mut c, &["ZRANDMEMBER", "none"]), None);
    assert_eq!(strs(&mut c, &["ZRANDMEMBER", "none", "5"]), list(&[]));
    assert_eq!(err(&mut c, &["ZRANDMEMBER", "z", "1", "SCORES"]), SYNTAX);
    assert_eq!(
        err(
            &mut c,
            &["ZRANDMEMBER", "z", "-9223372036854775807", "WITHSCORES"]
        ),
        "ERR value is out of range"
    );
}

#[test]
fn set_operations() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["ZADD", "a", "1", "x", "2", "y"]);
    let _: i64 = q(&mut c, &["ZADD", "b", "10", "y", "20", "z"]);
    let _: i64 = q(&mut c, &["SADD", "s", "x", "q"]);
    assert_eq!(
        scored(&mut c, &["ZUNION", "2", "a", "b", "WITHSCORES"]),
        pairs(&[("x", 1.0), ("y", 12.0), ("z", 20.0)])
    );
    assert_eq!(
        scored(
            &mut c,
            &[
                "ZUNION",
                "2",
                "a",
                "b",
                "WEIGHTS",
                "2",
                "1",
                "AGGREGATE",
                "MAX",
                "WITHSCORES"
            ]
        ),
        pairs(&[("x", 2.0), ("y", 10.0), ("z", 20.0)])
    );
    assert_eq!(strs(&mut c, &["ZINTER", "2", "a", "b"]), list(&["y"]));
    assert_eq!(
        scored(
            &mut c,
            &["ZINTER", "2", "a", "b", "AGGREGATE", "MIN", "WITHSCORES"]
        ),
        pairs(&[("y", 2.0)])
    );
    assert_eq!(strs(&mut c, &["ZDIFF", "2", "a", "b"]), list(&["x"]));
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "2", "a", "b"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "1", "a", "LIMIT", "1"]), 1);
    // Plain sets count as sorted sets of score 1.
    assert_eq!(
        scored(&mut c, &["ZUNION", "2", "a", "s", "WITHSCORES"]),
        pairs(&[("q", 1.0), ("x", 2.0), ("y", 2.0)])
    );
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "u", "2", "a", "b"]), 3);
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZINTERSTORE", "i", "2", "a", "b", "WEIGHTS", "1", "3"]
        ),
        1
    );
    assert_eq!(q::<Option<f64>>(&mut c, &["ZSCORE", "i", "y"]), Some(32.0));
    assert_eq!(q::<i64>(&mut c, &["ZDIFFSTORE", "d", "2", "a", "s"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZINTERSTORE", "d", "2", "a", "none"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]), 0);
    let cases: &[(&[&str], &str)] = &[
        (
            &["ZUNIONSTORE", "d", "0", "a"],
            "ERR at least 1 input key is needed for 'zunionstore' command",
        ),
        (
            &["ZINTER", "0", "a"],
            "ERR at least 1 input key is needed for 'zinter' command",
        ),
        (&["ZUNION", "3", "a"], SYNTAX),
        (
            &["ZUNION", "1", "a", "WEIGHTS", "x"],
            "ERR weight value is not a float",
        ),
        (&["ZUNION", "1", "a", "AGGREGATE", "AVG"], SYNTAX),
        (&["ZDIFF", "1", "a", "WEIGHTS", "1"], SYNTAX),
        (&["ZUNIONSTORE", "d", "1", "a", "WITHSCORES"], SYNTAX),
        (
            &["ZINTERCARD", "1", "a", "LIMIT", "-1"],
            "ERR LIMIT can't be negative",
        ),
    ];
    for (a, e) in cases {
        assert_eq!(err(&mut c, a), *e, "{a:?}");
    }
}

#[test]
fn zscan_iterates_everything() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["ZADD", "small", "1", "a", "2", "b"]);
    let (cursor, items): (String, Vec<String>) = q(&mut c, &["ZSCAN", "small", "0"]);
    assert_eq!((cursor.as_str(), items), ("0", list(&["a", "1", "b", "2"])));
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("ZADD")
            .arg("big")
            .arg(i)
            .arg(format!("m{i}"))
            .ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) =
            q(&mut c, &["ZSCAN", "big", &cursor, "COUNT", "50"]);
        calls += 1;
        for p in items.chunks(2) {
            assert_eq!(format!("m{}", p[1]), p[0]);
            seen.insert(p[0].clone());
        }
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 1000);
    assert!(calls >= 20);
    let (_, items): (String, Vec<String>) = q(
        &mut c,
        &["ZSCAN", "big", "0", "MATCH", "m99*", "COUNT", "5000"],
    );
    assert_eq!(items.len(), 2 * 11);
    let (cursor, items): (String, Vec<String>) = q(&mut c, &["ZSCAN", "none", "0"]);
    assert_eq!((cursor.as_str(), items.len()), ("0", 0));
    assert_eq!(err(&mut c, &["ZSCAN", "big", "x"]), "ERR invalid cursor");
    assert_eq!(err(&mut c, &["ZSCAN", "big", "0", "COUNT", "0"]), SYNTAX);
}

#[test]
fn encodings_and_memory() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let enc = |c: &mut Connection, k: &str| q::<String>(c, &["OBJECT", "ENCODING", k]);
    let mut pipe = redis::pipe();
    for i in 0..128 {
        pipe.cmd("ZADD")
            .arg("z")
            .arg(i)
            .arg(format!("member:{i}"))
            .ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    assert_eq!(enc(&mut c, "z"), "listpack");
    let small: i64 = q(&mut c, &["MEMORY", "USAGE", "z"]);
    assert!(small < 128 * 20, "listpack of 128: {small} bytes");
    let _: i64 = q(&mut c, &["ZADD", "z", "128", "member:128"]);
    assert_eq!(enc(&mut c, "z"), "skiplist");
    let _: i64 = q(&mut c, &["ZREMRANGEBYRANK", "z", "0", "-3"]);
    assert_eq!(enc(&mut c, "z"), "skiplist", "no conversion back");
    let _: i64 = q(&mut c, &["ZADD", "long", "1", &"x".repeat(65)]);
    assert_eq!(enc(&mut c, "long"), "skiplist");
    // The indexed encoding: well under Redis's ~110 bytes per member.
    let n = 100_000;
    for start in (0..n).step_by(1000) {
        let mut pipe = redis::pipe();
        let mut zadd = redis::cmd("ZADD");
        zadd.arg("big");
        for i in start..start + 1000 {
            zadd.arg(i).arg(format!("member:{i}"));
        }
        pipe.add_command(zadd).ignore();
        let _: () = pipe.query(&mut c).unwrap();
    }
    let bytes: i64 = q(&mut c, &["MEMORY", "USAGE", "big"]);
    assert!(bytes / n < 80, "{} bytes per member", bytes / n);
}

#[test]
fn reply_shapes_in_resp2_and_resp3() {
    let server = Kvasir::start(&[]);
    let mut r2 = server.raw_conn();
    assert_eq!(
        r2.cmd_str(&["ZADD", "z", "1", "a", "2.5", "b", "3", "c"]),
        ":3\r\n"
    );
    let flat = "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\n2.5\r\n";
    let nested = "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n";
    assert_eq!(r2.cmd_str(&["ZRANGE", "z", "0", "1", "WITHSCORES"]), flat);
    assert_eq!(
        r2.cmd_str(&["ZRANGEBYSCORE", "z", "1", "2.5", "WITHSCORES"]),
        flat
    );
    assert_eq!(
        r2.cmd_str(&["ZUNION", "1", "z", "WITHSCORES"]),
        "*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\n2.5\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    assert_eq!(r2.cmd_str(&["ZSCORE", "z", "b"]), "$3\r\n2.5\r\n");
    assert_eq!(
        r2.cmd_str(&["ZMSCORE", "z", "a", "x"]),
        "*2\r\n$1\r\n1\r\n$-1\r\n"
    );
    assert_eq!(r2.cmd_str(&["ZSCORE", "z", "x"]), "$-1\r\n");
    assert_eq!(r2.cmd_str(&["ZINCRBY", "z", "0", "a"]), "$1\r\n1\r\n");
    assert_eq!(
        r2.cmd_str(&["ZADD", "z", "XX", "INCR", "1", "x"]),
        "$-1\r\n"
    );
    assert_eq!(
        r2.cmd_str(&["ZSCAN", "z", "0", "MATCH", "a"]),
        "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(r2.cmd_str(&["ZRANDMEMBER", "none"]), "$-1\r\n");
    assert_eq!(r2.cmd_str(&["ZMPOP", "1", "none", "MIN"]), "*-1\r\n");
    assert_eq!(
        r2.cmd_str(&["ZPOPMIN", "z", "1"]),
        "*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(
        r2.cmd_str(&["ZMPOP", "1", "z", "MIN"]),
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$3\r\n2.5\r\n"
    );
    assert_eq!(
        r2.cmd_str(&["BZPOPMIN", "z", "0"]),
        "*3\r\n$1\r\nz\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );

    let mut r3 = server.raw_conn();
    assert!(r3.cmd_str(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(
        r3.cmd_str(&["ZADD", "z", "1", "a", "2.5", "b", "3", "c"]),
        ":3\r\n"
    );
    assert_eq!(r3.cmd_str(&["ZRANGE", "z", "0", "1", "WITHSCORES"]), nested);
    assert_eq!(
        r3.cmd_str(&["ZREVRANGEBYSCORE", "z", "2.5", "1", "WITHSCORES"]),
        "*2\r\n*2\r\n$1\r\nb\r\n,2.5\r\n*2\r\n$1\r\na\r\n,1\r\n"
    );
    assert_eq!(
        r3.cmd_str(&["ZRANGE", "z", "0", "1"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        r3.cmd_str(&["ZRANDMEMBER", "z", "2", "WITHSCORES"])
            .matches("*2\r\n")
            .count(),
        3
    );
    assert_eq!(r3.cmd_str(&["ZSCORE", "z", "b"]), ",2.5\r\n");
    assert_eq!(r3.cmd_str(&["ZSCORE", "z", "x"]), "_\r\n");
    assert_eq!(r3.cmd_str(&["ZMSCORE", "z", "a", "x"]), "*2\r\n,1\r\n_\r\n");
    assert_eq!(r3.cmd_str(&["ZINCRBY", "z", "0", "a"]), ",1\r\n");
    assert_eq!(
        r3.cmd_str(&["ZSCAN", "z", "0", "MATCH", "a"]),
        "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(r3.cmd_str(&["ZMPOP", "1", "none", "MIN"]), "_\r\n");
    assert_eq!(r3.cmd_str(&["ZPOPMIN", "z"]), "*2\r\n$1\r\na\r\n,1\r\n");
    assert_eq!(
        r3.cmd_str(&["ZPOPMIN", "z", "1"]),
        "*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"
    );
    assert_eq!(r3.cmd_str(&["ZADD", "z", "1", "a", "2", "b"]), ":2\r\n");
    assert_eq!(
        r3.cmd_str(&["ZMPOP", "1", "z", "MAX", "COUNT", "1"]),
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nc\r\n,3\r\n"
    );
    assert_eq!(
        r3.cmd_str(&["BZPOPMIN", "z", "0"]),
        "*3\r\n$1\r\nz\r\n$1\r\na\r\n,1\r\n"
    );
    assert_eq!(r3.cmd_str(&["ZPOPMIN", "none"]), "*0\r\n");
}

#[test]
fn resp3_client_reads_sorted_sets() {
    let server = Kvasir::start(&[]);
    let mut c = server
        .client_resp3()
        .get_connection()
        .expect("resp3 connection");
    let _: i64 = q(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    match q::<Value>(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]) {
        Value::Array(items) => {
            assert_eq!(items.len(), 2);
            assert_eq!(
                items[0],
                Value::Array(vec![Value::BulkString(b"a".to_vec()), Value::Double(1.0)])
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        q::<Value>(&mut c, &["ZSCORE", "z", "b"]),
        Value::Double(2.0)
    );
    assert_eq!(q::<f64>(&mut c, &["ZINCRBY", "z", "1", "a"]), 2.0);
    assert_eq!(q::<Value>(&mut c, &["ZSCORE", "z", "x"]), Value::Nil);
}

#[test]
fn benchmark_style_zadd_and_zpopmin_stay_fast() {
    // redis-benchmark's ZADD / ZPOPMIN: one sorted set, random scores and
    // members "element:<rand>", then pops of the minimum. Pipelined so the
    // time measured is the server's.
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let n = 100_000i64;
    let start = Instant::now();
    let mut pipe = redis::pipe();
    for i in 0..n {
        let r = i * 7919 % 1_000_003;
        pipe.cmd("ZADD")
            .arg("myzset")
            .arg(r % 10_000)
            .arg(format!("element:{r:012}"))
            .ignore();
        if pipe.len() >= 1000 {
            let _: () = pipe.query(&mut c).unwrap();
            pipe = redis::pipe();
        }
    }
    if !pipe.is_empty() {
        let _: () = pipe.query(&mut c).unwrap();
    }
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "myzset"]), n);
    let mut last = f64::NEG_INFINITY;
    let mut popped = 0;
    while popped < n {
        let mut pipe = redis::pipe();
        for _ in 0..1000 {
            pipe.cmd("ZPOPMIN").arg("myzset");
        }
        let got: Vec<Vec<String>> = pipe.query(&mut c).unwrap();
        for p in got.iter().filter(|p| !p.is_empty()) {
            let s: f64 = p[1].parse().unwrap();
            assert!(s >= last, "pops come in order");
            last = s;
            popped += 1;
        }
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "myzset"]), 0);
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "{n} ZADD + ZPOPMIN took {took:?}"
    );
}

/// Scores come back byte for byte as redis-server 7.0 sends them (%.17g),
/// in RESP2 bulk strings and RESP3 doubles alike.
#[test]
fn scores_print_like_redis_7_0() {
    let server = Kvasir::start(&[]);
    let (_redis, redis_port) = common::redis_server::start_redis();
    let script: &[&[&str]] = &[
        &[
            "ZADD",
            "z",
            "0.1",
            "a",
            "1.1",
            "b",
            "1e20",
            "c",
            "1e-5",
            "d",
            "123456789012345678",
            "e",
            "3",
            "f",
            "2.5e-7",
            "h",
            "-1.5",
            "i",
            "inf",
            "j",
            "-inf",
            "k",
        ],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["ZINCRBY", "z", "0.2", "a"],
        &["ZSCORE", "z", "b"],
        &["ZMSCORE", "z", "a", "c", "missing"],
        &[
            "ZRANGEBYSCORE",
            "z",
            "(0",
            "+inf",
            "WITHSCORES",
            "LIMIT",
            "1",
            "3",
        ],
        &["ZPOPMIN", "z"],
        &["ZADD", "z", "INCR", "0.7", "d"],
    ];
    for proto in ["2", "3"] {
        let mut kv = server.raw_conn();
        let mut rs = common::RawConn::to_port(redis_port);
        for c in [&mut kv, &mut rs] {
            c.cmd_str(&["HELLO", proto]);
            c.cmd_str(&["DEL", "z"]);
        }
        for cmd in script {
            assert_eq!(kv.cmd_str(cmd), rs.cmd_str(cmd), "RESP{proto} {cmd:?}");
        }
    }
}

/// ZRANK / ZREVRANK WITHSCORE (Redis 7.2): the rank and the score (a bulk
/// string in RESP2, a double in RESP3), a null array for a missing member
/// or key; other options are syntax errors.
#[test]
fn zrank_withscore_answers_rank_and_score() {
    let server = Kvasir::start(&[]);
    let mut r2 = server.raw_conn();
    r2.cmd_str(&["ZADD", "z", "1", "a", "2.5", "b", "10", "c"]);
    assert_eq!(
        r2.cmd_str(&["ZRANK", "z", "b", "WITHSCORE"]),
        "*2\r\n:1\r\n$3\r\n2.5\r\n"
    );
    assert_eq!(
        r2.cmd_str(&["ZREVRANK", "z", "c", "withscore"]),
        "*2\r\n:0\r\n$2\r\n10\r\n"
    );
    assert_eq!(r2.cmd_str(&["ZRANK", "z", "x", "WITHSCORE"]), "*-1\r\n");
    assert_eq!(r2.cmd_str(&["ZRANK", "nokey", "x", "WITHSCORE"]), "*-1\r\n");
    assert_eq!(r2.cmd_str(&["ZRANK", "nokey", "x"]), "$-1\r\n");
    assert_eq!(
        r2.cmd_str(&["ZRANK", "z", "a", "WITHSCORES"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        r2.cmd_str(&["ZREVRANK", "z", "a", "WITHSCORE", "x"]),
        "-ERR wrong number of arguments for 'zrevrank' command\r\n"
    );
    r2.cmd_str(&["SET", "s", "v"]);
    assert!(r2
        .cmd_str(&["ZRANK", "s", "a", "WITHSCORE"])
        .starts_with("-WRONGTYPE"));
    let mut r3 = server.raw_conn();
    assert!(r3.cmd_str(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(
        r3.cmd_str(&["ZRANK", "z", "b", "WITHSCORE"]),
        "*2\r\n:1\r\n,2.5\r\n"
    );
    assert_eq!(r3.cmd_str(&["ZRANK", "z", "x", "WITHSCORE"]), "_\r\n");
    // In a script, as Lua sees the RESP2 reply.
    assert_eq!(
        r2.cmd_str(&[
            "EVAL",
            "return redis.call('ZRANK', KEYS[1], 'c', 'WITHSCORE')",
            "1",
            "z"
        ]),
        "*2\r\n:2\r\n$2\r\n10\r\n"
    );
}
