//! A store with one key of every type in every encoding, built by a
//! fixed command sequence: the determinism pins and the snapshot
//! compatibility tests start from it.

#![allow(dead_code)]

use kvasir_core::{Ctx, EncodingLimits, Store};

pub const CTX: Ctx = Ctx {
    now_ms: 1_700_000_000_000,
    seed: 7,
};

pub fn run(st: &mut Store, db: usize, a: &[&str]) {
    let a: Vec<bytes::Bytes> = a
        .iter()
        .map(|s| bytes::Bytes::copy_from_slice(s.as_bytes()))
        .collect();
    if let Err(e) = st.apply(db, &a, &CTX) {
        panic!("{a:?}: {e:?}");
    }
}

/// Small limits, so that a few elements reach every encoding.
pub fn limits() -> EncodingLimits {
    EncodingLimits {
        hash_max_listpack_entries: 4,
        hash_max_listpack_value: 16,
        set_max_intset_entries: 5,
        set_max_listpack_entries: 4,
        set_max_listpack_value: 16,
        zset_max_listpack_entries: 4,
        zset_max_listpack_value: 16,
        list_max_listpack_size: 3,
        ..EncodingLimits::default()
    }
}

/// One key of every type in every encoding, several in encodings that
/// only their history explains, with expiries, in two databases.
pub fn every_type(st: &mut Store) {
    st.limits = limits();
    let long = "L".repeat(40);
    run(st, 0, &["set", "str", "hello"]);
    run(st, 0, &["set", "int", "-42"]);
    run(st, 0, &["set", "raw", "ab"]);
    run(st, 0, &["append", "raw", "cd"]);
    run(st, 0, &["set", "ttl", "v", "px", "5000"]);
    run(st, 0, &["rpush", "lp", "a", "1", "-5"]);
    run(
        st,
        0,
        &["rpush", "ql", "a", "b", "c", "d", "e", "7", "g", &long],
    );
    run(st, 0, &["lpush", "ql", "x", "y"]);
    run(st, 0, &["rpush", "qshrunk", "1", "2", "3", "4", "5", "6"]);
    run(st, 0, &["ltrim", "qshrunk", "0", "1"]);
    run(st, 0, &["hset", "hlp", "f1", "v1", "f2", "2"]);
    run(st, 0, &["hset", "hlong", "f", &long]);
    for i in 0..9 {
        let (f, v) = (format!("f{i}"), i.to_string());
        run(st, 0, &["hset", "hbig", &f, &v]);
        run(st, 0, &["hset", "hshrunk", &f, "v"]);
    }
    for i in 2..9 {
        run(st, 0, &["hdel", "hshrunk", &format!("f{i}")]);
    }
    run(st, 1, &["sadd", "i16", "3", "1", "2"]);
    run(st, 1, &["sadd", "iwide", "1", "2", "10000000000"]);
    run(st, 1, &["srem", "iwide", "10000000000"]);
    run(st, 1, &["sadd", "packed", "b", "a", "c"]);
    run(st, 1, &["sadd", "table", "a", "b", "c", "d", "e", "f"]);
    run(
        st,
        1,
        &["sadd", "tshrunk", "1", "2", "3", "4", "5", "6", "7"],
    );
    run(st, 1, &["spop", "tshrunk", "5"]);
    run(st, 1, &["zadd", "zlp", "1", "a", "2.5", "b", "-inf", "c"]);
    for i in 0..9 {
        let score = ((i * 37) % 11).to_string();
        run(st, 1, &["zadd", "zbig", &score, &format!("m{i}")]);
        run(st, 1, &["zadd", "zshrunk", &score, &format!("m{i}")]);
    }
    run(st, 1, &["zadd", "zbig", "-0", "negzero", "inf", "top"]);
    run(st, 1, &["zrem", "zbig", "m3"]);
    run(st, 1, &["zremrangebyrank", "zshrunk", "2", "-1"]);
    for i in 1..=12 {
        let id = format!("{i}-1");
        let v = i.to_string();
        if i % 4 == 0 {
            run(st, 0, &["xadd", "xs", &id, "other", &v]);
        } else {
            run(st, 0, &["xadd", "xs", &id, "a", &v, "b", "x"]);
        }
    }
    run(st, 0, &["xdel", "xs", "1-1", "6-1"]);
    run(st, 0, &["xgroup", "create", "xs", "g1", "0"]);
    run(st, 0, &["xgroup", "create", "xs", "g2", "$"]);
    run(
        st,
        0,
        &[
            "xreadgroup",
            "group",
            "g1",
            "alice",
            "count",
            "3",
            "streams",
            "xs",
            ">",
        ],
    );
    run(
        st,
        0,
        &[
            "xreadgroup",
            "group",
            "g1",
            "bob",
            "count",
            "2",
            "streams",
            "xs",
            ">",
        ],
    );
    run(st, 0, &["xack", "xs", "g1", "3-1"]);
    run(st, 0, &["xgroup", "createconsumer", "xs", "g2", "carol"]);
    run(st, 0, &["xadd", "xs", "maxlen", "10", "*", "a", "z"]);
    for (db, key) in [
        (0, "str"),
        (0, "ql"),
        (0, "hbig"),
        (1, "i16"),
        (1, "zlp"),
        (0, "xs"),
    ] {
        run(st, db, &["pexpireat", key, "1800000000123"]);
    }
}

/// The keys `every_type` makes, by database.
pub const KEYS: [&[&str]; 2] = [
    &[
        "str", "int", "raw", "ttl", "lp", "ql", "qshrunk", "hlp", "hlong", "hbig", "hshrunk", "xs",
    ],
    &[
        "i16", "iwide", "packed", "table", "tshrunk", "zlp", "zbig", "zshrunk",
    ],
];
