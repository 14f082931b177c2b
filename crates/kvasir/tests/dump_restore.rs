//! DUMP and RESTORE side by side with a real `redis-server` (7.0): every
//! type and encoding is built with the same commands on both servers, then
//! a payload DUMPed by redis-server is RESTOREd into Kvasir, one DUMPed by
//! Kvasir is RESTOREd into redis-server (and into Kvasir itself), and the
//! values read back (GET, LRANGE, sorted SMEMBERS, sorted HGETALL, ZRANGE
//! WITHSCORES, XRANGE and stream/group metadata) and TTLs are compared
//! with the source's. Error cases (damaged checksum, newer RDB version,
//! undecodable bodies, BUSYKEY, bad TTL/IDLETIME/FREQ, syntax) must give
//! redis-server's exact replies.
//!
//! Needs `redis-server` on PATH (scripts/install-test-deps.sh); fails, does
//! not skip, when it is missing.

mod common;

use common::redis_server::{run, start_redis_in, Outcome};
use common::Kvasir;
use redis::Value;

fn words(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Redis's CRC64 (Jones, reflected), to forge payloads with a valid
/// checksum around a damaged body.
fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// `body` + version + checksum.
fn seal(body: &[u8], version: u16) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Str,
    List,
    Set,
    Hash,
    ZSet,
    Stream,
}

struct Case {
    name: &'static str,
    kind: Kind,
    build: Vec<Vec<Vec<u8>>>,
}

fn case(name: &'static str, kind: Kind, build: Vec<Vec<Vec<u8>>>) -> Case {
    Case { name, kind, build }
}

/// A command `head` followed by `items`.
fn with_items(head: &[&str], items: impl IntoIterator<Item = String>) -> Vec<Vec<u8>> {
    let mut c = words(head);
    c.extend(items.into_iter().map(String::into_bytes));
    c
}

fn cases() -> Vec<Case> {
    use Kind::*;
    let k = "KEY";
    let mut v = vec![
        case("str", Str, vec![words(&["SET", k, "hello"])]),
        case("empty", Str, vec![words(&["SET", k, ""])]),
        case("int8", Str, vec![words(&["SET", k, "-5"])]),
        case("int16", Str, vec![words(&["SET", k, "12345"])]),
        case("int32", Str, vec![words(&["SET", k, "100000"])]),
        case(
            "int64",
            Str,
            vec![words(&["SET", k, "9223372036854775807"])],
        ),
        case("leading0", Str, vec![words(&["SET", k, "007"])]),
        case("lzf", Str, vec![words(&["SET", k, &"abc".repeat(400)])]),
        case(
            "binary",
            Str,
            vec![vec![b"SET".to_vec(), k.into(), b"a\0b\r\n\xff".to_vec()]],
        ),
        case(
            "incompressible",
            Str,
            vec![with_items(
                &["SET", k],
                [(0..400)
                    .map(|i| ((i * 7919 % 93) as u8 + 33) as char)
                    .collect::<String>()],
            )],
        ),
        case(
            "append",
            Str,
            vec![words(&["SET", k, "12"]), words(&["APPEND", k, "34"])],
        ),
        case(
            "list_small",
            List,
            vec![words(&[
                "RPUSH",
                k,
                "a",
                "1",
                "-300",
                "bbb",
                "70000",
                "-9223372036854775808",
                &"x".repeat(70),
            ])],
        ),
        case(
            "list_many_nodes",
            List,
            (0..10)
                .map(|b| {
                    with_items(
                        &["RPUSH", k],
                        (0..500).map(move |i| format!("item-{b}-{i}")),
                    )
                })
                .collect(),
        ),
        case(
            "list_ints",
            List,
            vec![with_items(
                &["RPUSH", k],
                (0..3000).map(|i| (i * 7919 - 1_000_000).to_string()),
            )],
        ),
        case(
            "list_long_elems",
            List,
            vec![with_items(
                &["RPUSH", k],
                (0..40).map(|i| format!("{i}{}", "z".repeat(3000 + i))),
            )],
        ),
        case(
            "intset",
            Set,
            vec![words(&["SADD", k, "1", "2", "3", "-70000"])],
        ),
        case(
            "intset_big",
            Set,
            vec![with_items(
                &["SADD", k],
                (0..500).map(|i| (i * 1_000_003 - 7).to_string()),
            )],
        ),
        case(
            "intset_64",
            Set,
            vec![words(&[
                "SADD",
                k,
                "9223372036854775807",
                "-9223372036854775808",
                "0",
            ])],
        ),
        case("set_small", Set, vec![words(&["SADD", k, "a", "b", "1"])]),
        case(
            "set_table",
            Set,
            vec![with_items(
                &["SADD", k],
                (0..1000).map(|i| format!("member:{i}")),
            )],
        ),
        case(
            "hash_small",
            Hash,
            vec![words(&["HSET", k, "f", "v", "n", "5", "", "empty"])],
        ),
        case(
            "hash_table",
            Hash,
            (0..300)
                .map(|i| {
                    with_items(
                        &["HSET", k],
                        [format!("field{i}"), format!("value{}", i * 3)],
                    )
                })
                .collect(),
        ),
        case(
            "hash_long_value",
            Hash,
            vec![words(&["HSET", k, "a", "1", "long", &"q".repeat(200)])],
        ),
        case(
            "zset_small",
            ZSet,
            vec![words(&[
                "ZADD", k, "1.5", "a", "-2", "b", "3", "c", "inf", "top", "-inf", "bottom", "0.1",
                "tenth",
            ])],
        ),
        case(
            "zset_skiplist",
            ZSet,
            (0..300)
                .map(|i| {
                    with_items(
                        &["ZADD", k],
                        [format!("{}", i as f64 / 3.0 - 20.0), format!("m{i}")],
                    )
                })
                .collect(),
        ),
        case(
            "zset_long_member",
            ZSet,
            vec![words(&["ZADD", k, "1", "a", "2", &"m".repeat(100)])],
        ),
        case(
            "stream",
            Stream,
            vec![
                words(&["XADD", k, "1-1", "a", "1", "b", "2"]),
                words(&["XADD", k, "2-0", "a", "3", "b", "4"]),
                words(&["XADD", k, "3-0", "c", "x"]),
                words(&["XADD", k, "3-5", "a", "-4000", "b", "12345678901"]),
                words(&["XDEL", k, "2-0"]),
                words(&["XGROUP", "CREATE", k, "grp", "0"]),
                words(&[
                    "XREADGROUP",
                    "GROUP",
                    "grp",
                    "alice",
                    "COUNT",
                    "1",
                    "STREAMS",
                    k,
                    ">",
                ]),
                words(&[
                    "XREADGROUP",
                    "GROUP",
                    "grp",
                    "bob",
                    "COUNT",
                    "2",
                    "STREAMS",
                    k,
                    ">",
                ]),
                words(&["XACK", k, "grp", "3-0"]),
                words(&["XGROUP", "CREATECONSUMER", k, "grp", "carol"]),
                words(&["XGROUP", "CREATE", k, "late", "$"]),
            ],
        ),
        case(
            "stream_big",
            Stream,
            (1..=350)
                .map(|i| {
                    let id = format!("{}-{}", 1000 + i / 3, i % 3);
                    if i % 7 == 0 {
                        words(&["XADD", k, &id, "other", &i.to_string()])
                    } else {
                        words(&[
                            "XADD",
                            k,
                            &id,
                            "f",
                            &format!("v{i}"),
                            "g",
                            &"w".repeat(i % 50),
                        ])
                    }
                })
                .chain([
                    words(&["XTRIM", k, "MAXLEN", "300"]),
                    words(&["XGROUP", "CREATE", k, "g", "1050-0"]),
                ])
                .collect(),
        ),
        case(
            "stream_empty",
            Stream,
            vec![
                words(&["XADD", k, "5-5", "a", "b"]),
                words(&["XDEL", k, "5-5"]),
                words(&["XGROUP", "CREATE", k, "g", "$"]),
            ],
        ),
    ];
    for c in &mut v {
        for cmd in &mut c.build {
            for a in cmd.iter_mut() {
                if a == b"KEY" {
                    *a = format!("src:{}", c.name).into_bytes();
                }
            }
        }
    }
    v
}

/// A reply with unordered collections sorted and time-dependent stream
/// metadata left out, so that equal values read equal.
fn reads(conn: &mut redis::Connection, kind: Kind, key: &str) -> Vec<Outcome> {
    let q = |conn: &mut redis::Connection, args: &[&str]| run(conn, &words(args));
    let mut out = vec![q(conn, &["TYPE", key]), q(conn, &["EXISTS", key])];
    match kind {
        Kind::Str => {
            out.push(q(conn, &["GET", key]));
            out.push(q(conn, &["STRLEN", key]));
        }
        Kind::List => {
            out.push(q(conn, &["LRANGE", key, "0", "-1"]));
            out.push(q(conn, &["LLEN", key]));
        }
        Kind::Set => out.push(sorted(q(conn, &["SMEMBERS", key]), 1)),
        Kind::Hash => {
            out.push(sorted(q(conn, &["HGETALL", key]), 2));
            out.push(q(conn, &["HLEN", key]));
        }
        Kind::ZSet => out.push(q(conn, &["ZRANGE", key, "0", "-1", "WITHSCORES"])),
        Kind::Stream => {
            out.push(q(conn, &["XRANGE", key, "-", "+"]));
            out.push(q(conn, &["XLEN", key]));
            out.push(pick(
                q(conn, &["XINFO", "STREAM", key]),
                &[
                    "length",
                    "last-generated-id",
                    "max-deleted-entry-id",
                    "entries-added",
                    "recorded-first-entry-id",
                    "groups",
                    "first-entry",
                    "last-entry",
                ],
            ));
            out.push(q(conn, &["XINFO", "GROUPS", key]));
            for g in ["grp", "g", "late"] {
                // NOGROUP names the key: compare it without.
                let r = q(conn, &["XPENDING", key, g]);
                out.push(r.map_err(|e| e.replace(key, "KEY")));
            }
        }
    }
    out
}

/// An array reply's elements sorted in groups of `n`.
fn sorted(o: Outcome, n: usize) -> Outcome {
    o.map(|v| match v {
        Value::Array(items) => {
            let mut groups: Vec<Vec<Value>> = items.chunks(n).map(<[Value]>::to_vec).collect();
            groups.sort_by_key(|g| format!("{g:?}"));
            Value::Array(groups.concat())
        }
        other => other,
    })
}

/// The named fields of a flat key/value array reply (XINFO STREAM).
fn pick(o: Outcome, names: &[&str]) -> Outcome {
    o.map(|v| match v {
        Value::Array(items) => Value::Array(
            items
                .chunks(2)
                .filter(|kv| {
                    matches!(&kv[0], Value::BulkString(k) if names.iter().any(|n| n.as_bytes() == k.as_slice()))
                })
                .flat_map(|kv| kv.to_vec())
                .collect(),
        ),
        other => other,
    })
}

fn bulk(o: Outcome) -> Vec<u8> {
    match o {
        Ok(Value::BulkString(b)) => b,
        other => panic!("expected a bulk payload, got {other:?}"),
    }
}

struct Pair {
    real: redis::Connection,
    ours: redis::Connection,
    mismatches: Vec<String>,
}

impl Pair {
    /// Sends `args` to both; records a mismatch; returns Redis's reply.
    fn same(&mut self, what: &str, args: &[Vec<u8>]) -> Outcome {
        let (want, got) = (run(&mut self.real, args), run(&mut self.ours, args));
        if want != got {
            self.mismatches
                .push(format!("{what}\n  redis:  {want:?}\n  kvasir: {got:?}"));
        }
        want
    }

    /// Records the reads that differ (by position).
    fn check(&mut self, what: String, want: Vec<Outcome>, got: Vec<Outcome>) {
        if want.len() != got.len() {
            self.mismatches.push(format!(
                "{what}: {} reads, expected {}",
                got.len(),
                want.len()
            ));
            return;
        }
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            if w != g {
                let short = |o: &Outcome| {
                    let s = format!("{o:?}");
                    s.chars().take(400).collect::<String>()
                };
                self.mismatches.push(format!(
                    "{what} (read {i})\n  want: {}\n  got:  {}",
                    short(w),
                    short(g)
                ));
            }
        }
    }
}

#[test]
fn dump_and_restore_between_redis_and_kvasir() {
    // Deep sanitization: Kvasir's payloads are checked as strictly as Redis
    // checks any.
    let (_redis_guard, redis_port) = start_redis_in(None, &["--sanitize-dump-payload", "yes"]);
    let kvasir = Kvasir::start(&[]);
    let real = redis::Client::open(format!("redis://127.0.0.1:{redis_port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect to redis-server");
    let mut p = Pair {
        real,
        ours: kvasir.conn(),
        mismatches: Vec::new(),
    };

    let cases = cases();
    for c in &cases {
        for cmd in &c.build {
            let _ = p.same(&format!("build {}", c.name), cmd);
        }
        let key = format!("src:{}", c.name);
        // The sources must be equal before their payloads are compared.
        let (want, got) = (
            reads(&mut p.real, c.kind, &key),
            reads(&mut p.ours, c.kind, &key),
        );
        p.check(format!("source {}", c.name), want, got);
    }

    for c in &cases {
        let src = format!("src:{}", c.name);
        let from_redis = bulk(run(&mut p.real, &words(&["DUMP", &src])));
        let from_ours = bulk(run(&mut p.ours, &words(&["DUMP", &src])));
        let want = reads(&mut p.real, c.kind, &src);

        // redis-server's payload into Kvasir, with a relative TTL.
        let dst = format!("from-redis:{}", c.name);
        let r = run(
            &mut p.ours,
            &[
                b"RESTORE".to_vec(),
                dst.clone().into(),
                b"100000".to_vec(),
                from_redis.clone(),
            ],
        );
        p.check(
            format!("RESTORE into kvasir {}", c.name),
            vec![Ok(Value::Okay)],
            vec![r],
        );
        let got = reads(&mut p.ours, c.kind, &dst);
        p.check(format!("redis -> kvasir {}", c.name), want.clone(), got);
        let ttl = run(&mut p.ours, &words(&["TTL", &dst]));
        p.check(
            format!("TTL redis -> kvasir {}", c.name),
            vec![Ok(Value::Int(100))],
            vec![ttl],
        );

        // Kvasir's payload into redis-server, without a TTL.
        let dst = format!("from-kvasir:{}", c.name);
        let r = run(
            &mut p.real,
            &[
                b"RESTORE".to_vec(),
                dst.clone().into(),
                b"0".to_vec(),
                from_ours.clone(),
            ],
        );
        p.check(
            format!("RESTORE into redis {}", c.name),
            vec![Ok(Value::Okay)],
            vec![r],
        );
        let got = reads(&mut p.real, c.kind, &dst);
        p.check(format!("kvasir -> redis {}", c.name), want.clone(), got);
        let ttl = run(&mut p.real, &words(&["TTL", &dst]));
        p.check(
            format!("TTL kvasir -> redis {}", c.name),
            vec![Ok(Value::Int(-1))],
            vec![ttl],
        );

        // Kvasir's payload into Kvasir, and each server's own round trip.
        let dst = format!("self:{}", c.name);
        let r = run(
            &mut p.ours,
            &[
                b"RESTORE".to_vec(),
                dst.clone().into(),
                b"0".to_vec(),
                from_ours.clone(),
            ],
        );
        p.check(
            format!("RESTORE kvasir self {}", c.name),
            vec![Ok(Value::Okay)],
            vec![r],
        );
        let got = reads(&mut p.ours, c.kind, &dst);
        p.check(format!("kvasir -> kvasir {}", c.name), want.clone(), got);

        // A payload taken from the restored copy restores in redis too.
        let again = bulk(run(
            &mut p.ours,
            &words(&["DUMP", &format!("from-redis:{}", c.name)]),
        ));
        let dst = format!("twice:{}", c.name);
        let r = run(
            &mut p.real,
            &[
                b"RESTORE".to_vec(),
                dst.clone().into(),
                b"0".to_vec(),
                again,
            ],
        );
        p.check(
            format!("RESTORE twice {}", c.name),
            vec![Ok(Value::Okay)],
            vec![r],
        );
        let got = reads(&mut p.real, c.kind, &dst);
        p.check(format!("redis -> kvasir -> redis {}", c.name), want, got);
    }

    error_cases(&mut p);
    ttl_cases(&mut p);

    assert!(
        p.mismatches.is_empty(),
        "{} mismatches:\n{}",
        p.mismatches.len(),
        p.mismatches.join("\n")
    );
}

fn restore_args(key: &str, ttl: &str, payload: &[u8], opts: &[&str]) -> Vec<Vec<u8>> {
    let mut a = vec![
        b"RESTORE".to_vec(),
        key.into(),
        ttl.into(),
        payload.to_vec(),
    ];
    a.extend(opts.iter().map(|o| o.as_bytes().to_vec()));
    a
}

fn error_cases(p: &mut Pair) {
    let payload = bulk(run(&mut p.real, &words(&["DUMP", "src:list_small"])));
    let n = payload.len();
    let body = payload[..n - 10].to_vec();

    let mut bad_crc = payload.clone();
    bad_crc[n - 1] ^= 0x55;
    let mut bad_body = payload.clone();
    bad_body[2] ^= 1;
    let v11 = seal(&body, 11);
    let v9 = seal(&body, 9);
    let short = b"\x0a\x00abc".to_vec();
    let cases: Vec<(&str, Vec<Vec<u8>>)> = vec![
        ("bad checksum", restore_args("e1", "0", &bad_crc, &[])),
        ("damaged body", restore_args("e1", "0", &bad_body, &[])),
        ("newer version", restore_args("e1", "0", &v11, &[])),
        ("older version", restore_args("e1", "0", &v9, &[])),
        ("short payload", restore_args("e1", "0", &short, &[])),
        ("empty payload", restore_args("e1", "0", b"", &[])),
        (
            "unknown type",
            restore_args("e1", "0", &seal(&[200, 1, b'a'], 10), &[]),
        ),
        (
            "module type",
            restore_args("e1", "0", &seal(&[7, 1, b'a'], 10), &[]),
        ),
        (
            "truncated body",
            restore_args("e1", "0", &seal(&body[..body.len() - 3], 10), &[]),
        ),
        (
            "empty set",
            restore_args("e1", "0", &seal(&[2, 0], 10), &[]),
        ),
        (
            "duplicate set members",
            restore_args("e1", "0", &seal(&[2, 2, 1, b'a', 1, b'a'], 10), &[]),
        ),
        (
            "bad listpack",
            restore_args("e1", "0", &seal(&[16, 3, 1, 2, 3], 10), &[]),
        ),
        ("negative ttl", restore_args("e1", "-1", &payload, &[])),
        ("ttl not a number", restore_args("e1", "abc", &payload, &[])),
        (
            "idletime negative",
            restore_args("e1", "0", &payload, &["IDLETIME", "-1"]),
        ),
        (
            "idletime not a number",
            restore_args("e1", "0", &payload, &["IDLETIME", "x"]),
        ),
        (
            "freq too big",
            restore_args("e1", "0", &payload, &["FREQ", "256"]),
        ),
        (
            "freq negative",
            restore_args("e1", "0", &payload, &["FREQ", "-1"]),
        ),
        (
            "idletime and freq",
            restore_args("e1", "0", &payload, &["IDLETIME", "1", "FREQ", "1"]),
        ),
        (
            "freq and idletime",
            restore_args("e1", "0", &payload, &["FREQ", "1", "IDLETIME", "1"]),
        ),
        (
            "idletime without value",
            restore_args("e1", "0", &payload, &["IDLETIME"]),
        ),
        (
            "unknown option",
            restore_args("e1", "0", &payload, &["NOPE"]),
        ),
        ("wrong arity", words(&["RESTORE", "e1", "0"])),
        ("dump arity", words(&["DUMP"])),
        ("dump missing", words(&["DUMP", "nosuchkey"])),
        // The options are checked before the key: a bad option on an
        // existing key is a syntax error, not BUSYKEY.
        ("busykey", restore_args("src:str", "0", &payload, &[])),
        (
            "busykey before ttl",
            restore_args("src:str", "-5", &bad_crc, &[]),
        ),
        (
            "option before busykey",
            restore_args("src:str", "0", &payload, &["FREQ", "300"]),
        ),
        (
            "bad payload keeps old key",
            restore_args("src:str", "0", &bad_body, &["REPLACE"]),
        ),
        (
            "freq and idletime ok",
            restore_args("e2", "0", &payload, &["IDLETIME", "10"]),
        ),
        (
            "freq ok",
            restore_args("e3", "0", &payload, &["FREQ", "5", "REPLACE", "ABSTTL"]),
        ),
    ];
    for (what, args) in cases {
        let _ = p.same(what, &args);
    }
    for k in ["e1", "e2", "e3", "src:str"] {
        let _ = p.same(&format!("after errors {k}"), &words(&["TYPE", k]));
    }
}

fn ttl_cases(p: &mut Pair) {
    let payload = bulk(run(&mut p.real, &words(&["DUMP", "src:hash_small"])));
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let future = (now_ms + 200_000).to_string();
    let past = (now_ms - 10_000).to_string();
    let steps: Vec<(&str, Vec<Vec<u8>>)> = vec![
        ("ttl 0", restore_args("t0", "0", &payload, &[])),
        ("ttl 0 read", words(&["TTL", "t0"])),
        ("relative", restore_args("t1", "50000", &payload, &[])),
        ("relative read", words(&["TTL", "t1"])),
        (
            "absttl future",
            restore_args("t2", &future, &payload, &["ABSTTL"]),
        ),
        ("absttl future read", words(&["TTL", "t2"])),
        (
            "absttl past",
            restore_args("t3", &past, &payload, &["ABSTTL"]),
        ),
        ("absttl past read", words(&["EXISTS", "t3"])),
        (
            "replace with past deletes",
            restore_args("t0", &past, &payload, &["ABSTTL", "REPLACE"]),
        ),
        ("replace with past read", words(&["EXISTS", "t0"])),
        ("absttl 1", restore_args("t4", "1", &payload, &["ABSTTL"])),
        ("absttl 1 read", words(&["EXISTS", "t4"])),
        (
            "overflowing ttl",
            restore_args("t5", "9223372036854775807", &payload, &[]),
        ),
        ("overflowing ttl read", words(&["EXISTS", "t5"])),
        (
            "replace keeps type",
            restore_args("t1", "0", &payload, &["REPLACE"]),
        ),
        ("replace read", words(&["TTL", "t1"])),
        (
            "replace other type",
            restore_args("src:str", "0", &payload, &["REPLACE"]),
        ),
        ("replace other type read", words(&["HGETALL", "src:str"])),
    ];
    for (what, args) in steps {
        let _ = p.same(what, &args);
    }
}
