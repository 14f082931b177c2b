//! The snapshot image (`kvasir_core::snapshot`): every type and encoding
//! round-trips to an identical store (dump, digest, OBJECT ENCODING,
//! iteration order, and the behaviour of later commands), the digest
//! ignores order and layout but sees every change, and no damaged or
//! forged image makes `decode` panic.

mod common;

use bytes::Bytes;
use common::Rng;
use kvasir_core::snapshot::{
    decode, digest, encode, SnapshotError, HEADER_LEN, MAGIC, TRAILER_LEN, VERSION,
};
use kvasir_core::{Ctx, EncodingLimits, Store};
use kvasir_resp::Reply;
use proptest::prelude::*;
use std::collections::HashSet;
use std::sync::OnceLock;
use std::time::Instant;

const CTX: Ctx = Ctx {
    now_ms: 1_700_000_000_000,
    seed: 42,
};

fn args(a: &[&[u8]]) -> Vec<Bytes> {
    a.iter().map(|s| Bytes::copy_from_slice(s)).collect()
}

/// Runs a write that must succeed.
fn run(st: &mut Store, db: usize, a: &[&str]) -> Reply {
    let v: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
    st.apply(db, &args(&v), &CTX)
        .unwrap_or_else(|e| panic!("{a:?}: {e:?}"))
}

fn encoding(st: &Store, db: usize, key: &[u8]) -> Reply {
    st.read(db, &args(&[b"object", b"encoding", key]), &CTX)
        .unwrap_or_else(|e| panic!("{e:?}"))
}

/// The error decoding `b` gives (panics if it decodes).
fn err(b: &[u8]) -> SnapshotError {
    match decode(b) {
        Ok(_) => panic!("decoded"),
        Err(e) => e,
    }
}

fn image(st: &Store) -> Vec<u8> {
    let mut out = Vec::new();
    encode(st, &mut out);
    out
}

/// Encodes and decodes `st`, checks that the copy is the same state in
/// every observable way, and returns it.
fn round_trip(st: &Store) -> Store {
    let img = image(st);
    let back = decode(&img).unwrap_or_else(|e| panic!("decode: {e}"));
    assert_eq!(back.databases(), st.databases());
    assert_eq!(back.limits, st.limits);
    assert!(back.dump() == st.dump(), "dump differs after restore");
    assert_eq!(digest(&back), digest(st));
    for db in 0..st.databases() {
        let (a, b) = (st.db(db), back.db(db));
        assert_eq!(a.len(), b.len());
        assert_eq!(a.expires_count(), b.expires_count());
        // Same keys in the same iteration order (SCAN, RANDOMKEY), with
        // the same OBJECT ENCODING.
        for (x, y) in a.iter().zip(b.iter()) {
            assert_eq!(x.key, y.key);
            assert_eq!(encoding(st, db, x.key), encoding(&back, db, y.key));
        }
    }
    // Re-encoding gives the same bytes: element orders (including a
    // skiplist's slot order) were restored too.
    assert!(image(&back) == img, "re-encoded image differs");
    back
}

/// A value's representation: OBJECT ENCODING, except for lists, which it
/// names quicklist whatever their representation (as Redis 7.0 does).
fn enc_of(st: &Store, db: usize, key: &str) -> String {
    if let Some(kvasir_core::keyspace::Value::List(l)) =
        st.db(db).get(key.as_bytes()).map(|e| e.value)
    {
        return l.encoding().to_string();
    }
    match encoding(st, db, key.as_bytes()) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        r => panic!("{r:?}"),
    }
}

/// One key of every type in every encoding the engine has, several of them
/// in encodings that only their history explains.
fn every_encoding(limits: EncodingLimits) -> Store {
    let mut st = Store::new(4);
    st.limits = limits;
    let long = "x".repeat(100);
    // Strings: embstr, long Str, Raw (APPEND), Int, empty, binary.
    run(&mut st, 0, &["set", "emb", "hello"]);
    run(&mut st, 0, &["set", "long", &long]);
    run(&mut st, 0, &["set", "raw", "ab"]);
    run(&mut st, 0, &["append", "raw", "cd"]);
    run(&mut st, 0, &["set", "int", "-9223372036854775808"]);
    run(&mut st, 0, &["set", "empty", ""]);
    let bin: &[&[u8]] = &[b"set", b"\x00bin\xff\n", b"\x01\x02\x00\xfe"];
    st.apply(0, &args(bin), &CTX).unwrap();
    // Lists: listpack, quicklist, a quicklist popped down to two elements.
    run(&mut st, 0, &["rpush", "lp", "a", "1", "-5", "b"]);
    for i in 0..1000 {
        run(&mut st, 0, &["rpush", "ql", &format!("element-{i}")]);
        run(&mut st, 0, &["lpush", "ql", &i.to_string()]);
        run(&mut st, 0, &["rpush", "ql2", &long, &i.to_string()]);
    }
    run(&mut st, 0, &["ltrim", "ql2", "0", "1"]);
    // Hashes: listpack, hashtable (many fields / a long value), a
    // hashtable shrunk to two fields.
    run(&mut st, 1, &["hset", "hlp", "f1", "v1", "f2", "2"]);
    run(&mut st, 1, &["hset", "hlong", "f", &long]);
    for i in 0..300 {
        run(
            &mut st,
            1,
            &["hset", "hbig", &format!("f{i}"), &i.to_string()],
        );
        run(&mut st, 1, &["hset", "hshrunk", &format!("f{i}"), "v"]);
    }
    for i in 2..300 {
        run(&mut st, 1, &["hdel", "hshrunk", &format!("f{i}")]);
    }
    // Sets: intset at each width, an intset that widened and lost its wide
    // member, packed (also one in non-sorted integer order), table.
    run(&mut st, 2, &["sadd", "i16", "3", "1", "2"]);
    run(&mut st, 2, &["sadd", "i32", "100000", "-7"]);
    run(&mut st, 2, &["sadd", "i64", "10000000000", "5"]);
    run(&mut st, 2, &["sadd", "iwide", "1", "2", "10000000000"]);
    run(&mut st, 2, &["srem", "iwide", "10000000000"]);
    run(&mut st, 2, &["sadd", "packed", "b", "a", "c"]);
    run(&mut st, 2, &["sadd", "packed-ints", "x", "5", "3"]);
    run(&mut st, 2, &["srem", "packed-ints", "x"]);
    run(&mut st, 2, &["sadd", "slong", &long, "a"]);
    for i in 0..700 {
        run(&mut st, 2, &["sadd", "sbig", &format!("m{i}")]);
        run(&mut st, 2, &["sadd", "sbigint", &i.to_string()]);
    }
    for i in 0..100 {
        run(&mut st, 2, &["spop", "sbig"]);
        run(&mut st, 2, &["srem", "sbigint", &(i * 3).to_string()]);
    }
    // Sorted sets: listpack, skiplist (size, long member), a skiplist
    // shrunk to two, odd scores.
    run(
        &mut st,
        3,
        &["zadd", "zlp", "1", "a", "2.5", "b", "-inf", "c", "1", "aa"],
    );
    run(&mut st, 3, &["zadd", "zlong", "1", &long]);
    for i in 0..300 {
        let score = ((i * 37) % 101).to_string();
        run(&mut st, 3, &["zadd", "zbig", &score, &format!("m{i}")]);
        run(&mut st, 3, &["zadd", "zshrunk", &score, &format!("m{i}")]);
    }
    run(
        &mut st,
        3,
        &[
            "zadd", "zbig", "-0", "neg-zero", "inf", "top", "1e-300", "tiny",
        ],
    );
    run(&mut st, 3, &["zremrangebyrank", "zshrunk", "2", "-1"]);
    for i in (0..300).step_by(3) {
        run(&mut st, 3, &["zrem", "zbig", &format!("m{i}")]);
    }
    // Expiries, on every type.
    for (db, key) in [(0, "emb"), (0, "ql"), (1, "hbig"), (2, "i16"), (3, "zlp")] {
        run(&mut st, db, &["pexpireat", key, "1800000000123"]);
    }
    run(&mut st, 0, &["set", "ttl", "v", "px", "5000"]);
    st
}

#[test]
fn every_type_and_encoding_round_trips() {
    let st = every_encoding(EncodingLimits::default());
    let expect = [
        (0, "emb", "embstr"),
        (0, "long", "raw"),
        (0, "raw", "raw"),
        (0, "int", "int"),
        (0, "lp", "listpack"),
        (0, "ql", "quicklist"),
        (0, "ql2", "quicklist"),
        (1, "hlp", "listpack"),
        (1, "hlong", "hashtable"),
        (1, "hbig", "hashtable"),
        (1, "hshrunk", "hashtable"),
        (2, "i16", "intset"),
        (2, "i64", "intset"),
        (2, "iwide", "intset"),
        (2, "packed", "hashtable"),
        (2, "packed-ints", "hashtable"),
        (2, "sbig", "hashtable"),
        (2, "sbigint", "hashtable"),
        (3, "zlp", "listpack"),
        (3, "zlong", "skiplist"),
        (3, "zbig", "skiplist"),
        (3, "zshrunk", "skiplist"),
    ];
    let back = round_trip(&st);
    for (db, key, enc) in expect {
        assert_eq!(enc_of(&st, db, key), enc, "{key} in the source");
        assert_eq!(enc_of(&back, db, key), enc, "{key} restored");
    }
    assert_eq!(
        back.db(0).get(b"ttl").and_then(|e| e.expire_at()),
        Some(CTX.now_ms + 5000)
    );
}

#[test]
fn custom_limits_round_trip() {
    let limits = EncodingLimits {
        hash_max_listpack_entries: 3,
        hash_max_listpack_value: 8,
        set_max_intset_entries: 4,
        set_max_listpack_entries: 3,
        set_max_listpack_value: 8,
        zset_max_listpack_entries: 3,
        zset_max_listpack_value: 8,
        list_max_listpack_size: 2,
        ..EncodingLimits::default()
    };
    let st = every_encoding(limits);
    let mut back = round_trip(&st);
    assert_eq!(back.limits, limits);
    // The limits keep applying after a restore, from where the source was.
    let mut st = st;
    for s in [&mut st, &mut back] {
        run(s, 0, &["rpush", "newlist", "a", "b", "c"]);
        run(s, 2, &["sadd", "newset", "1", "2", "3", "4", "5"]);
    }
    assert_eq!(enc_of(&back, 0, "newlist"), "quicklist");
    assert_eq!(enc_of(&back, 2, "newset"), "hashtable");
    assert!(back.dump() == st.dump());
}

#[test]
fn values_restored_under_changed_limits_keep_their_encoding() {
    // Built under the defaults, then a (replicated) CONFIG SET shrinks the
    // limits: existing values keep their encodings, on the restored
    // replica too.
    let mut st = Store::new(1);
    run(&mut st, 0, &["hset", "h", "a", "1", "b", "2", "c", "3"]);
    run(&mut st, 0, &["sadd", "s", "1", "2", "3"]);
    run(&mut st, 0, &["zadd", "z", "1", "a", "2", "b", "3", "c"]);
    run(&mut st, 0, &["rpush", "l", "a", "b", "c", "d"]);
    st.limits.hash_max_listpack_entries = 1;
    st.limits.set_max_intset_entries = 1;
    st.limits.zset_max_listpack_entries = 1;
    st.limits.list_max_listpack_size = 1;
    let back = round_trip(&st);
    for (key, enc) in [
        ("h", "listpack"),
        ("s", "intset"),
        ("z", "listpack"),
        ("l", "listpack"),
    ] {
        assert_eq!(enc_of(&back, 0, key), enc);
    }
}

/// A random command against a small pool of keys of every type, with long
/// and integer arguments so that values convert, shrink, expire and vanish.
fn random_command(rng: &mut Rng) -> Vec<String> {
    let long = "y".repeat(70);
    let word = |rng: &mut Rng| -> String {
        match rng.below(10) {
            0 => long.clone(),
            1..=4 => rng.below(1000).to_string(),
            5 => format!("-{}", rng.below(100_000_000_000)),
            _ => format!("w{}", rng.below(300)),
        }
    };
    let k = rng.below(4);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut cmd = match rng.below(24) {
        0 => s(&["set", &format!("k{k}"), &word(rng)]),
        1 => s(&["append", &format!("k{k}"), "z"]),
        2 => s(&["incr", &format!("n{k}")]),
        3 | 4 => {
            let mut c = s(&[
                if rng.chance(50) { "rpush" } else { "lpush" },
                &format!("l{k}"),
            ]);
            c.extend((0..1 + rng.below(40)).map(|_| word(rng)));
            c
        }
        5 => s(&["lpop", &format!("l{k}"), &(1 + rng.below(30)).to_string()]),
        6 => s(&[
            "lset",
            &format!("l{k}"),
            &rng.below(20).to_string(),
            &word(rng),
        ]),
        7 => s(&["ltrim", &format!("l{k}"), &rng.below(5).to_string(), "-3"]),
        8 | 9 => {
            let mut c = s(&["hset", &format!("h{k}")]);
            for _ in 0..1 + rng.below(20) {
                c.push(format!("f{}", rng.below(200)));
                c.push(word(rng));
            }
            c
        }
        10 => s(&["hdel", &format!("h{k}"), &format!("f{}", rng.below(200))]),
        11 => s(&["hrandfield", &format!("h{k}"), "3", "withvalues"]),
        12 | 13 => {
            let mut c = s(&["sadd", &format!("s{k}")]);
            c.extend((0..1 + rng.below(30)).map(|_| word(rng)));
            c
        }
        14 => s(&["srem", &format!("s{k}"), &word(rng)]),
        15 => s(&["spop", &format!("s{k}"), &rng.below(5).to_string()]),
        16 => s(&["srandmember", &format!("s{k}"), "-4"]),
        17 | 18 => {
            let mut c = s(&["zadd", &format!("z{k}")]);
            for _ in 0..1 + rng.below(20) {
                c.push(rng.pick(&["1", "2.5", "-0", "inf", "7", "-3"]).to_string());
                c.push(word(rng));
            }
            c
        }
        19 => s(&["zrem", &format!("z{k}"), &word(rng)]),
        20 => s(&["zpopmin", &format!("z{k}"), "2"]),
        21 => s(&["zscan", &format!("z{k}"), "0", "count", "5"]),
        22 => s(&[
            "pexpireat",
            rng.pick(&["k0", "l1", "h2", "s3", "z0", "n1"]),
            &(CTX.now_ms + rng.below(100)).to_string(),
        ]),
        _ => s(&["del", rng.pick(&["k1", "l2", "h3", "s0", "z1"])]),
    };
    if rng.chance(3) {
        cmd = s(&["scan", "0", "count", "3"]);
    }
    cmd
}

fn apply_strings(st: &mut Store, db: usize, cmd: &[String], ctx: &Ctx) -> Result<Reply, String> {
    let v: Vec<Bytes> = cmd
        .iter()
        .map(|s| Bytes::copy_from_slice(s.as_bytes()))
        .collect();
    st.apply(db, &v, ctx).map_err(|e| format!("{e:?}"))
}

/// A replica restored from a snapshot taken midway then applies the rest
/// of the log exactly as the source does: same replies (random picks and
/// scans included), same final state.
#[test]
fn restored_replica_stays_in_step() {
    for (seed, small) in [(1u64, false), (2, true), (3, true)] {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
        let mut src = Store::new(3);
        if small {
            src.limits = EncodingLimits {
                hash_max_listpack_entries: 8,
                hash_max_listpack_value: 16,
                set_max_intset_entries: 8,
                set_max_listpack_entries: 8,
                set_max_listpack_value: 16,
                zset_max_listpack_entries: 8,
                zset_max_listpack_value: 16,
                list_max_listpack_size: 4,
                ..EncodingLimits::default()
            };
        }
        let step = |st: &mut Store, rng: &mut Rng, i: u64| {
            let cmd = random_command(rng);
            let db = rng.below(3) as usize;
            let ctx = Ctx {
                now_ms: CTX.now_ms + i,
                seed: rng.next(),
            };
            (cmd.clone(), db, ctx, apply_strings(st, db, &cmd, &ctx))
        };
        for i in 0..3000 {
            let _ = step(&mut src, &mut rng, i);
        }
        let mut replica = round_trip(&src);
        for i in 3000..6000 {
            let (cmd, db, ctx, r1) = step(&mut src, &mut rng, i);
            let r2 = apply_strings(&mut replica, db, &cmd, &ctx);
            assert_eq!(r1, r2, "seed {seed} step {i}: {cmd:?}");
        }
        assert!(replica.dump() == src.dump());
        assert_eq!(digest(&replica), digest(&src));
        round_trip(&src);
    }
}

#[test]
fn digest_ignores_insertion_order() {
    let build = |rev: bool| {
        let mut st = Store::new(2);
        let mut idx: Vec<usize> = (0..300).collect();
        if rev {
            idx.reverse();
        }
        for &i in &idx {
            run(&mut st, 0, &["set", &format!("k{i}"), &format!("v{i}")]);
            run(
                &mut st,
                1,
                &["hset", "hbig", &format!("f{i}"), &i.to_string()],
            );
            run(&mut st, 1, &["sadd", "sbig", &format!("m{i}")]);
            run(
                &mut st,
                1,
                &["zadd", "zbig", &(i % 7).to_string(), &format!("m{i}")],
            );
        }
        let small: Vec<usize> = if rev {
            (0..5).rev().collect()
        } else {
            (0..5).collect()
        };
        for &i in &small {
            run(&mut st, 1, &["hset", "hsmall", &format!("f{i}"), "x"]);
            run(&mut st, 1, &["sadd", "ssmall", &format!("m{i}")]);
            run(
                &mut st,
                1,
                &["zadd", "zsmall", &i.to_string(), &format!("m{i}")],
            );
        }
        run(&mut st, 0, &["pexpireat", "k7", "1800000000000"]);
        st
    };
    let (a, b) = (build(false), build(true));
    assert!(a.dump() != b.dump(), "orders really differ");
    assert_eq!(digest(&a), digest(&b));
}

#[test]
fn digest_ignores_layout() {
    // An intset and a table of the same members; Str and Raw of the same
    // text; a listpack hash and a hashtable of the same pairs.
    let mut a = Store::new(1);
    let mut b = Store::new(1);
    run(&mut a, 0, &["sadd", "s", "1", "2", "3"]);
    run(&mut b, 0, &["sadd", "s", "3", &"q".repeat(100), "2", "1"]);
    run(&mut b, 0, &["srem", "s", &"q".repeat(100)]);
    run(&mut a, 0, &["set", "str", "abcd"]);
    run(&mut b, 0, &["set", "str", "ab"]);
    run(&mut b, 0, &["append", "str", "cd"]);
    run(&mut a, 0, &["hset", "h", "f", "v", "g", "w"]);
    run(
        &mut b,
        0,
        &["hset", "h", "g", "w", "long", &"q".repeat(100), "f", "v"],
    );
    run(&mut b, 0, &["hdel", "h", "long"]);
    assert_ne!(enc_of(&a, 0, "s"), enc_of(&b, 0, "s"));
    assert_ne!(enc_of(&a, 0, "h"), enc_of(&b, 0, "h"));
    assert!(a.dump() != b.dump());
    assert_eq!(digest(&a), digest(&b));
}

#[test]
fn digest_sees_every_change() {
    let base = || {
        let mut st = Store::new(2);
        run(&mut st, 0, &["set", "k", "v"]);
        run(&mut st, 0, &["set", "n", "12"]);
        run(&mut st, 0, &["rpush", "l", "a", "b", "c"]);
        run(&mut st, 0, &["hset", "h", "f", "v", "g", "w"]);
        run(&mut st, 0, &["sadd", "s", "a", "b"]);
        run(&mut st, 0, &["zadd", "z", "1", "a", "2", "b"]);
        run(&mut st, 0, &["pexpireat", "k", "1800000000000"]);
        st
    };
    type Change = fn(&mut Store);
    let changes: &[Change] = &[
        |_| {},
        |s| drop(run(s, 0, &["set", "k", "V", "pxat", "1800000000000"])),
        |s| drop(run(s, 0, &["pexpireat", "k", "1800000000001"])),
        |s| drop(run(s, 0, &["persist", "k"])),
        |s| drop(run(s, 0, &["pexpireat", "n", "1800000000000"])),
        |s| drop(run(s, 0, &["incr", "n"])),
        |s| drop(run(s, 0, &["rename", "k", "k2"])),
        |s| drop(run(s, 0, &["lset", "l", "0", "c"])),
        |s| drop(run(s, 0, &["lset", "l", "2", "a"])),
        |s| drop(run(s, 0, &["rpush", "l", "d"])),
        |s| drop(run(s, 0, &["hset", "h", "f", "w"])),
        |s| drop(run(s, 0, &["hset", "h", "f", "w", "g", "v"])),
        |s| drop(run(s, 0, &["hdel", "h", "g"])),
        |s| drop(run(s, 0, &["sadd", "s", "c"])),
        |s| drop(run(s, 0, &["srem", "s", "a"])),
        |s| drop(run(s, 0, &["zadd", "z", "1.5", "a"])),
        |s| drop(run(s, 0, &["zadd", "z", "2", "a", "1", "b"])),
        |s| drop(run(s, 0, &["del", "z"])),
        |s| {
            let e = s.db_mut(0).remove(b"h").unwrap();
            let at = e.expire_at();
            s.db_mut(1).set(b"h", e.value, at);
        },
    ];
    let mut seen = HashSet::new();
    for (i, change) in changes.iter().enumerate() {
        let mut st = base();
        change(&mut st);
        assert!(
            seen.insert(digest(&st)),
            "change {i} did not change the digest"
        );
        assert_eq!(digest(&round_trip(&st)), digest(&st));
    }
    // Same contents, fresh store: same digest.
    assert!(seen.contains(&digest(&base())));
}

/// A small image with one key of every kind.
fn small_image() -> &'static [u8] {
    static IMG: OnceLock<Vec<u8>> = OnceLock::new();
    IMG.get_or_init(|| {
        let mut st = Store::new(2);
        run(&mut st, 0, &["set", "k", "v", "px", "100"]);
        run(&mut st, 0, &["set", "n", "7"]);
        run(&mut st, 0, &["rpush", "l", "a", "1"]);
        run(&mut st, 1, &["hset", "h", "f", "v"]);
        run(&mut st, 1, &["sadd", "i", "1", "300000"]);
        run(&mut st, 1, &["sadd", "s", "x", "y"]);
        run(&mut st, 1, &["zadd", "z", "1.5", "a", "2", "b"]);
        image(&st)
    })
}

#[test]
fn every_truncation_is_an_error() {
    let img = small_image();
    assert!(decode(img).is_ok());
    for len in 0..img.len() {
        match decode(&img[..len]) {
            Err(SnapshotError::Truncated { at, .. }) => assert_eq!(at, len),
            Err(other) => panic!("prefix of {len} bytes: {other:?}"),
            Ok(_) => panic!("prefix of {len} bytes decoded"),
        }
    }
    let e = err(&img[..40]).to_string();
    assert!(e.starts_with("snapshot truncated at byte 40"), "{e}");
    let mut longer = img.to_vec();
    longer.push(0);
    assert!(matches!(
        decode(&longer),
        Err(SnapshotError::TrailingBytes { .. })
    ));
}

#[test]
fn error_messages_are_clear() {
    let img = small_image();
    let msg = |b: &[u8]| err(b).to_string();
    let mut b = img.to_vec();
    let last = b.len() - 10;
    b[last] ^= 1;
    assert!(
        msg(&b).starts_with("snapshot checksum mismatch"),
        "{}",
        msg(&b)
    );
    assert_eq!(
        msg(b"GIF89a and more bytes here"),
        "not a Kvasir snapshot (bad magic)"
    );
    let mut b = img.to_vec();
    b[8] = 9;
    assert_eq!(
        msg(&b),
        "unsupported snapshot version 9 (this build reads 1 to 4)"
    );
    let mut b = img.to_vec();
    b[13] ^= 1;
    assert_eq!(msg(&b), "snapshot header checksum mismatch");
}

/// Wraps `body` in a valid header and trailer, as `encode` would.
fn seal(body: &[u8]) -> Vec<u8> {
    seal_version(VERSION, body)
}

/// Wraps `body` in a valid header of format `version` and a trailer.
fn seal_version(version: u32, body: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out
}

fn body_of(img: &[u8]) -> &[u8] {
    &img[HEADER_LEN..img.len() - TRAILER_LEN]
}

/// Default limits as encoded by versions 1 and 2 (no list-compress-depth),
/// one database, then `n` entries.
fn forged_body_v2(n: u8, entries: &[u8]) -> Vec<u8> {
    let mut b = vec![128, 1, 64, 128, 4, 128, 1, 64, 128, 1, 64, 3];
    b.extend_from_slice(&[1, n]);
    b.extend_from_slice(entries);
    b
}

/// Default limits as encoded by version 3 (list-compress-depth 0 after
/// the list fill, no stream node limits), one database, then `n` entries.
fn forged_body_v3(n: u8, entries: &[u8]) -> Vec<u8> {
    let mut b = vec![128, 1, 64, 128, 4, 128, 1, 64, 128, 1, 64, 3, 0];
    b.extend_from_slice(&[1, n]);
    b.extend_from_slice(entries);
    b
}

/// Default limits as encoded (stream-node-max-entries 100 and
/// stream-node-max-bytes 4096 after list-compress-depth 0), one database,
/// then `n` entries.
fn forged_body(n: u8, entries: &[u8]) -> Vec<u8> {
    let mut b = vec![
        128, 1, 64, 128, 4, 128, 1, 64, 128, 1, 64, 3, 0, 100, 0x80, 0x20,
    ];
    b.extend_from_slice(&[1, n]);
    b.extend_from_slice(entries);
    b
}

#[test]
fn list_compress_depth_is_carried_and_version_2_reads_as_depth_0() {
    let mut st = Store::default();
    st.limits.list_compress_depth = 7;
    let mut img = Vec::new();
    encode(&st, &mut img);
    assert_eq!(
        decode(&img).map(|s| s.limits.list_compress_depth).ok(),
        Some(7)
    );
    // Version 2 had no depth: the same body without it loads, depth 0.
    let v2 = seal_version(2, &forged_body_v2(1, &[0, 1, b'k', 1, b'v']));
    let restored = decode(&v2).map(|s| (s.limits.list_compress_depth, s.db(0).len()));
    assert_eq!(restored.ok(), Some((0, 1)));
    // More than Redis's 16 bits is a corrupt image.
    let mut body = forged_body(0, &[]);
    body.splice(12..13, [0x80, 0x80, 0x04]);
    let e = err(&seal(&body)).to_string();
    assert!(e.contains("list-compress-depth out of range"), "{e}");
}

#[test]
fn stream_node_limits_are_carried_and_version_3_reads_redis_defaults() {
    let mut st = Store::default();
    st.limits.stream_node_max_entries = 10;
    st.limits.stream_node_max_bytes = 0;
    let mut img = Vec::new();
    encode(&st, &mut img);
    let limits = |s: &Store| {
        (
            s.limits.stream_node_max_entries,
            s.limits.stream_node_max_bytes,
        )
    };
    assert_eq!(decode(&img).map(|s| limits(&s)).ok(), Some((10, 0)));
    // Version 3 had no stream node limits: they read as Redis's defaults.
    let v3 = seal_version(3, &forged_body_v3(1, &[0, 1, b'k', 1, b'v']));
    let restored = decode(&v3).map(|s| (limits(&s), s.db(0).len()));
    assert_eq!(restored.ok(), Some(((100, 4096), 1)));
    // The defaults are what a version 4 image of a default store holds.
    assert_eq!(
        decode(&seal(&forged_body(0, &[]))).map(|s| limits(&s)).ok(),
        Some((100, 4096))
    );
}

#[test]
fn forged_bodies_are_rejected_with_their_position() {
    assert!(decode(&seal(&forged_body(0, &[]))).is_ok());
    let cases: &[(u8, &[u8], &str)] = &[
        (
            2,
            &[0, 1, b'k', 1, b'v', 0, 1, b'k', 1, b'w'],
            "duplicate key",
        ),
        (1, &[8, 1, b'k', 1, b'v'], "unknown value type"),
        (1, &[3, 1, b'k', 9, 0], "unknown layout"),
        (1, &[4, 1, b'k', 4, 0], "a layout this type does not have"),
        (1, &[5, 1, b'k', 3, 8, 0], "bad intset width"),
        (
            1,
            &[5, 1, b'k', 3, 16, 1, 1, b'x'],
            "intset member is not an integer",
        ),
        (
            1,
            &[5, 1, b'k', 3, 16, 1, 6, b'1', b'0', b'0', b'0', b'0', b'0'],
            "wider",
        ),
        (
            1,
            &[5, 1, b'k', 2, 2, 1, b'a', 1, b'a'],
            "duplicate element",
        ),
        (
            1,
            &[6, 1, b'k', 0, 1, 1, b'a', 0, 0, 0, 0, 0, 0, 0xf8, 0x7f],
            "NaN score",
        ),
        // A node without entries.
        (
            1,
            &[7, 1, b'k', 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0],
            "bad stream",
        ),
        // A pending entry of a consumer the group does not have.
        (
            1,
            &[
                7, 1, b'k', 0, 0, 0, 0, 0, 0, 0, 1, 1, b'g', 0, 0, 0, 0, 1, 1, 0, 1, b'c', 0, 1,
            ],
            "bad stream",
        ),
        (
            1,
            &[7, 1, b'k', 0, 0, 0, 0, 0, 0, 0, 1, 1, b'g', 0, 0, 2, 0, 0],
            "bad entries-read flag",
        ),
    ];
    for (n, entries, want) in cases {
        let e = err(&seal(&forged_body(*n, entries))).to_string();
        assert!(
            e.starts_with("snapshot corrupt at byte ") && e.contains(want),
            "{want}: {e}"
        );
    }
}

/// Version 1 bodies (see `snapshot_compat.rs`) are checked as strictly.
#[test]
fn forged_version_1_bodies_are_rejected_with_their_position() {
    let body = forged_body_v2;
    let seal = |b: &[u8]| seal_version(1, b);
    assert!(decode(&seal(&body(0, &[]))).is_ok());
    let cases: &[(u8, &[u8], &str)] = &[
        (
            2,
            &[0, 1, b'k', 1, b'v', 0, 1, b'k', 1, b'w'],
            "duplicate key",
        ),
        (1, &[13, 1, b'k', 1, b'v'], "unknown value type"),
        (1, &[12, 1, b'k', 1, b'v'], "bad stream"),
        (
            1,
            &[7, 1, b'k', 16, 1, 1, b'x'],
            "intset member is not an integer",
        ),
        (
            1,
            &[7, 1, b'k', 16, 1, 6, b'1', b'0', b'0', b'0', b'0', b'0'],
            "wider",
        ),
        (1, &[7, 1, b'k', 8, 0], "bad intset width"),
        (1, &[9, 1, b'k', 2, 1, b'a', 1, b'a'], "duplicate element"),
        (
            1,
            &[10, 1, b'k', 1, 1, b'a', 0, 0, 0, 0, 0, 0, 0xf8, 0x7f],
            "NaN score",
        ),
        (1, &[3, 1, b'k', 0xff, 0xff, 0x7f], "count larger"),
        (1, &[0, 1, b'k', 5, b'v'], "past the end"),
        (
            1,
            &[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'k', 0, 0],
            "expiry of 0",
        ),
        (1, &[0, 1, b'k', 0, 0], "bytes after the last database"),
        (100, &[], "count larger"),
    ];
    for (n, entries, want) in cases {
        let e = err(&seal(&body(*n, entries))).to_string();
        assert!(
            e.starts_with("snapshot corrupt at byte ") && e.contains(want),
            "{want}: {e}"
        );
    }
    let e = err(&seal(&[128, 1, 64])).to_string();
    assert!(e.contains("past the end"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Any flipped byte anywhere is caught (by a checksum or the frame).
    #[test]
    fn byte_flips_are_errors(at in any::<prop::sample::Index>(), mask in 1u8..=255) {
        let mut b = small_image().to_vec();
        let i = at.index(b.len());
        b[i] ^= mask;
        prop_assert!(decode(&b).is_err());
    }

    /// Flips in the body behind a recomputed checksum (a forged image) get
    /// past the frame checks: the parser must still never panic, and
    /// whatever it accepts must be a store that encodes and decodes again.
    #[test]
    fn forged_flips_never_panic(flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4)) {
        let mut body = body_of(small_image()).to_vec();
        for (at, mask) in flips {
            let i = at.index(body.len());
            body[i] ^= mask;
        }
        if let Ok(st) = decode(&seal(&body)) {
            let img = image(&st);
            prop_assert!(decode(&img).is_ok());
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        prop_assert!(decode(&bytes).is_err());
        let _ = decode(&seal(&bytes));
        let mut framed = MAGIC.to_vec();
        framed.extend_from_slice(&bytes);
        prop_assert!(decode(&framed).is_err());
    }
}

/// `n` keys: mostly small strings, some with expiries, some collections.
fn many_keys(n: usize) -> Store {
    let mut st = Store::new(16);
    let mut rng = Rng(12345);
    for i in 0..n {
        let key = format!("key:{i:08}");
        let db = i % 16;
        match i % 10 {
            0 => drop(run(&mut st, db, &["rpush", &key, "a", "b", &i.to_string()])),
            1 => drop(run(&mut st, db, &["hset", &key, "f", "v", "g", "w"])),
            2 => drop(run(&mut st, db, &["sadd", &key, "1", "2", "x"])),
            3 => drop(run(&mut st, db, &["zadd", &key, "1", "a", "2", "b"])),
            4 => drop(run(&mut st, db, &["set", &key, &i.to_string()])),
            _ => drop(run(
                &mut st,
                db,
                &["set", &key, &format!("value-{}", rng.next())],
            )),
        }
        if i % 7 == 0 {
            run(
                &mut st,
                db,
                &["pexpireat", &key, &(CTX.now_ms + i as u64).to_string()],
            );
        }
    }
    st
}

#[test]
fn hundred_thousand_keys_round_trip() {
    let st = many_keys(100_000);
    let t = Instant::now();
    let img = image(&st);
    let enc = t.elapsed();
    let t = Instant::now();
    let back = decode(&img).unwrap();
    let dec = t.elapsed();
    println!(
        "100k keys: {} bytes, encode {enc:?}, decode {dec:?}",
        img.len()
    );
    assert!(back.dump() == st.dump());
    assert_eq!(digest(&back), digest(&st));
}

/// Timing for a million small string keys (run in release with
/// `--ignored --nocapture`).
#[test]
#[ignore]
fn million_keys_timing() {
    let mut st = Store::new(16);
    for i in 0..1_000_000u64 {
        let key = format!("key:{i:010}");
        let v = Bytes::from(format!("v{}", i * 7919));
        let a = [Bytes::from_static(b"set"), Bytes::from(key), v];
        st.apply((i % 16) as usize, &a, &CTX).unwrap();
    }
    let mut img = Vec::new();
    let t = Instant::now();
    encode(&st, &mut img);
    let enc = t.elapsed();
    let t = Instant::now();
    let back = decode(&img).unwrap();
    let dec = t.elapsed();
    let t = Instant::now();
    let d = digest(&back);
    let dig = t.elapsed();
    println!(
        "1M string keys: {} bytes, encode {enc:?}, decode {dec:?}, digest {dig:?}",
        img.len()
    );
    assert_eq!(d, digest(&st));
    let st = many_keys(1_000_000);
    let mut img = Vec::new();
    let t = Instant::now();
    encode(&st, &mut img);
    let enc = t.elapsed();
    let t = Instant::now();
    let back = decode(&img).unwrap();
    let dec = t.elapsed();
    println!(
        "1M mixed keys (40% collections): {} bytes, encode {enc:?}, decode {dec:?}",
        img.len()
    );
    assert_eq!(digest(&back), digest(&st));
}
