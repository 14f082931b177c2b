//! Bitmap commands (SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD
//! BITFIELD_RO) run side by side against Kvasir and a real `redis-server`
//! (7.0): the same few hundred commands, fixed edge cases and pseudo-random
//! ones from a fixed seed, must get identical replies, error texts included.
//!
//! Needs `redis-server` on PATH (scripts/install-test-deps.sh); fails, does
//! not skip, when it is missing.

mod common;

use common::redis_server::{run, start_redis, Rng};
use common::Kvasir;

type Script = Vec<Vec<Vec<u8>>>;

fn line(script: &mut Script, args: &[&str]) {
    script.push(args.iter().map(|a| a.as_bytes().to_vec()).collect());
}

/// Hand-picked edge cases: errors, limits, missing keys, encodings.
fn fixed_cases(s: &mut Script) {
    let cases: &[&[&str]] = &[
        // SETBIT / GETBIT
        &["SETBIT", "fx", "0", "1"],
        &["SETBIT", "fx", "0", "1"],
        &["SETBIT", "fx", "7", "1"],
        &["SETBIT", "fx", "100", "1"],
        &["SETBIT", "fx", "100", "0"],
        &["GET", "fx"],
        &["GETBIT", "fx", "0"],
        &["GETBIT", "fx", "1"],
        &["GETBIT", "fx", "4294967295"],
        &["GETBIT", "nokey", "0"],
        &["SETBIT", "fx", "-1", "1"],
        &["SETBIT", "fx", "4294967296", "1"],
        &["SETBIT", "fx", "x", "1"],
        &["SETBIT", "fx", "1", "2"],
        &["SETBIT", "fx", "1", "-1"],
        &["SETBIT", "fx", "1", "x"],
        &["SETBIT", "fx", "1"],
        &["GETBIT", "fx", "-1"],
        &["GETBIT", "fx", "4294967296"],
        &["GETBIT", "fx", "1.5"],
        &["SET", "num", "12345"],
        &["GETBIT", "num", "2"],
        &["SETBIT", "num", "6", "1"],
        &["GET", "num"],
        &["SET", "neg", "-7"],
        &["BITCOUNT", "neg"],
        &["RPUSH", "lst", "a"],
        &["SETBIT", "lst", "0", "1"],
        &["GETBIT", "lst", "0"],
        &["BITCOUNT", "lst"],
        &["BITPOS", "lst", "1"],
        &["BITFIELD", "lst", "GET", "u8", "0"],
        &["BITFIELD", "lst"],
        &["BITFIELD_RO", "lst", "GET", "u8", "0"],
        &["SET", "ttlk", "abc", "EX", "1000"],
        &["SETBIT", "ttlk", "3", "1"],
        &["SETBIT", "big", "1000000", "1"],
        &["STRLEN", "big"],
        &["BITCOUNT", "big"],
        &["BITPOS", "big", "1"],
        &["BITPOS", "big", "0"],
        &["BITPOS", "big", "1", "-1"],
        // BITCOUNT
        &["SET", "fb", "foobar"],
        &["BITCOUNT", "fb"],
        &["BITCOUNT", "fb", "0", "0"],
        &["BITCOUNT", "fb", "1", "1"],
        &["BITCOUNT", "fb", "1", "1", "BYTE"],
        &["BITCOUNT", "fb", "5", "30", "BIT"],
        &["BITCOUNT", "fb", "5", "30", "bit"],
        &["BITCOUNT", "fb", "-2", "-1"],
        &["BITCOUNT", "fb", "-1", "-2"],
        &["BITCOUNT", "fb", "-1", "-2", "foo"],
        &["BITCOUNT", "fb", "0", "-100"],
        &["BITCOUNT", "fb", "-100", "100", "BIT"],
        &["BITCOUNT", "fb", "100", "200"],
        &["BITCOUNT", "fb", "1"],
        &["BITCOUNT", "fb", "1", "2", "3"],
        &["BITCOUNT", "fb", "1", "2", "BYTE", "x"],
        &["BITCOUNT", "fb", "a", "1"],
        &["BITCOUNT", "fb", "1", "a"],
        &[
            "BITCOUNT",
            "fb",
            "-9223372036854775808",
            "9223372036854775807",
        ],
        &[
            "BITCOUNT",
            "fb",
            "-9223372036854775808",
            "-9223372036854775808",
            "BIT",
        ],
        &["BITCOUNT", "nokey"],
        &["BITCOUNT", "nokey", "a", "b"],
        &["BITCOUNT", "nokey", "1"],
        &["BITCOUNT"],
        &["SET", "empty", ""],
        &["BITCOUNT", "empty"],
        &["BITCOUNT", "empty", "0", "-1", "BIT"],
        // BITPOS
        &["BITPOS", "fb", "1"],
        &["BITPOS", "fb", "0"],
        &["BITPOS", "fb", "1", "2"],
        &["BITPOS", "fb", "0", "2", "-1"],
        &["BITPOS", "fb", "1", "7", "15", "BIT"],
        &["BITPOS", "fb", "0", "7", "15", "bit"],
        &["BITPOS", "fb", "1", "100"],
        &["BITPOS", "fb", "1", "-1", "-3"],
        &["BITPOS", "fb", "1", "0", "1", "bits"],
        &["BITPOS", "fb", "1", "0", "1", "BIT", "x"],
        &["BITPOS", "fb", "2"],
        &["BITPOS", "fb", "-1"],
        &["BITPOS", "fb", "x"],
        &["BITPOS", "fb", "1", "x"],
        &["BITPOS", "fb", "1", "0", "x"],
        &["BITPOS", "nokey", "0"],
        &["BITPOS", "nokey", "1"],
        &["BITPOS", "nokey", "1", "x"],
        &["BITPOS", "nokey", "0", "5", "10", "BIT"],
        &["BITPOS", "nokey", "3"],
        &["BITPOS", "empty", "0"],
        &["BITPOS", "empty", "1"],
        &["SET", "ones", "\u{7f}"],
        &["SETBIT", "ones", "0", "1"],
        &["BITPOS", "ones", "0"],
        &["BITPOS", "ones", "0", "0"],
        &["BITPOS", "ones", "0", "0", "-1"],
        &["BITPOS", "ones", "0", "0", "-1", "BIT"],
        &["BITPOS", "ones", "1", "3", "5", "BIT"],
        // BITOP
        &["BITOP", "AND", "dst", "fb", "fx"],
        &["GET", "dst"],
        &["BITOP", "or", "dst", "fb", "fx", "nokey"],
        &["GET", "dst"],
        &["BITOP", "XOR", "dst", "fb", "fx", "num"],
        &["GET", "dst"],
        &["BITOP", "NOT", "dst", "fb"],
        &["GET", "dst"],
        &["BITOP", "NOT", "dst", "fb", "fx"],
        &["BITOP", "NAND", "dst", "fb"],
        &["BITOP", "AND", "dst"],
        &["BITOP", "AND", "dst", "fb", "lst"],
        &["BITOP", "AND", "dst", "nokey", "fb"],
        &["GET", "dst"],
        &["SET", "dst", "x", "EX", "100"],
        &["BITOP", "OR", "dst", "fb"],
        &["TTL", "dst"],
        &["BITOP", "OR", "dst", "nokey", "nokey2"],
        &["EXISTS", "dst"],
        &["BITOP", "NOT", "dst", "empty"],
        &["EXISTS", "dst"],
        &["BITOP", "AND", "fb2", "fb", "fb"],
        &["GET", "fb2"],
        &["BITOP", "AND", "lst", "fb"],
        &["TYPE", "lst"],
        // BITFIELD
        &["BITFIELD", "bf", "SET", "i8", "0", "-100", "GET", "u8", "0"],
        &["BITFIELD", "bf", "INCRBY", "i8", "0", "-100"],
        &[
            "BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "-200",
        ],
        &[
            "BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "i8", "0", "-1", "GET", "i8", "0",
        ],
        &[
            "BITFIELD", "bf", "overflow", "wrap", "incrby", "i8", "0", "-1",
        ],
        &["BITFIELD", "bf", "SET", "u4", "#1", "-1", "GET", "u8", "0"],
        &["BITFIELD", "bf", "OVERFLOW", "SAT", "SET", "u4", "0", "-1"],
        &[
            "BITFIELD", "bf", "OVERFLOW", "SAT", "SET", "i4", "0", "-100",
        ],
        &["BITFIELD", "bf", "OVERFLOW", "FAIL", "SET", "u4", "0", "16"],
        &["BITFIELD", "bf", "OVERFLOW", "FAIL", "SET", "u4", "0", "15"],
        &[
            "BITFIELD",
            "bf",
            "INCRBY",
            "i64",
            "0",
            "9223372036854775807",
        ],
        &["BITFIELD", "bf", "INCRBY", "i64", "0", "1"],
        &[
            "BITFIELD",
            "bf",
            "OVERFLOW",
            "SAT",
            "INCRBY",
            "i64",
            "0",
            "-9223372036854775808",
        ],
        &[
            "BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i64", "0", "-1",
        ],
        &[
            "BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "u63", "0", "-1",
        ],
        &[
            "BITFIELD",
            "bf",
            "OVERFLOW",
            "WRAP",
            "INCRBY",
            "u63",
            "3",
            "-9223372036854775808",
        ],
        &[
            "BITFIELD", "bf", "GET", "u63", "1", "GET", "i64", "5", "GET", "i1", "7", "GET", "u1",
            "7",
        ],
        &["GET", "bf"],
        &["BITFIELD", "bf", "GET", "u8", "#1000"],
        &["BITFIELD", "bf", "GET", "u8", "#2305843009213693953"],
        &["BITFIELD", "bf", "GET", "u8", "#-1"],
        &["BITFIELD", "bf", "GET", "u8", "#"],
        &["BITFIELD", "bf", "GET", "u8", "#536870912"],
        &["BITFIELD", "bf", "GET", "u8", "4294967295"],
        &["BITFIELD", "bf", "GET", "u8", "4294967296"],
        &["BITFIELD", "bf", "GET", "u64", "0"],
        &["BITFIELD", "bf", "GET", "i65", "0"],
        &["BITFIELD", "bf", "GET", "i0", "0"],
        &["BITFIELD", "bf", "GET", "I8", "0"],
        &["BITFIELD", "bf", "GET", "", "0"],
        &["BITFIELD", "bf", "GET", "u", "0"],
        &["BITFIELD", "bf", "GET", "u8"],
        &["BITFIELD", "bf", "SET", "u8", "0"],
        &["BITFIELD", "bf", "SET", "u8", "0", "x"],
        &["BITFIELD", "bf", "INCRBY", "u8", "0", "1.5"],
        &["BITFIELD", "bf", "FOO"],
        &["BITFIELD", "bf", "OVERFLOW"],
        &["BITFIELD", "bf", "OVERFLOW", "UP"],
        &[
            "BITFIELD", "bf", "GET", "u8", "0", "SET", "u8", "0", "1", "BAD",
        ],
        &["GET", "bf"],
        &["BITFIELD", "bf"],
        &["BITFIELD", "nokey", "GET", "i8", "0"],
        &["EXISTS", "nokey"],
        &["BITFIELD", "nokey"],
        &[
            "BITFIELD", "newbf", "OVERFLOW", "FAIL", "SET", "u2", "10", "9",
        ],
        &["GET", "newbf"],
        &["BITFIELD", "num", "GET", "u8", "0", "SET", "u8", "0", "57"],
        &["GET", "num"],
        &["BITFIELD_RO", "bf", "GET", "i8", "0", "GET", "u4", "#3"],
        &["BITFIELD_RO", "bf", "GET", "i8", "0", "SET", "u1", "0", "1"],
        &["BITFIELD_RO", "bf", "INCRBY", "u1", "0", "x"],
        &["BITFIELD_RO", "bf", "OVERFLOW", "SAT", "GET", "u2", "0"],
        &["BITFIELD_RO", "nokey", "GET", "u2", "0"],
        &["BITFIELD_RO", "bf"],
        &["BITFIELD_RO"],
    ];
    for c in cases {
        line(s, c);
    }
}

/// Pseudo-random commands over a few keys, offsets and values.
fn random_cases(s: &mut Script, rng: &mut Rng, n: usize) {
    const KEYS: &[&str] = &["r0", "r1", "r2", "r3", "num", "lst", "nokey"];
    const TYPES: &[&str] = &[
        "u1", "u3", "u8", "u13", "u32", "u63", "i1", "i5", "i8", "i16", "i33", "i64",
    ];
    const OVERFLOWS: &[&str] = &["WRAP", "SAT", "FAIL"];
    for _ in 0..n {
        let key = rng.pick(KEYS);
        let small = rng.below(300).to_string();
        let a = rng.signed(40).to_string();
        let b = rng.signed(40).to_string();
        match rng.below(9) {
            0 | 1 => {
                let bit = rng.below(2).to_string();
                line(s, &["SETBIT", key, &small, &bit]);
            }
            2 => line(s, &["GETBIT", key, &small]),
            3 => match rng.below(3) {
                0 => line(s, &["BITCOUNT", key]),
                1 => line(s, &["BITCOUNT", key, &a, &b]),
                _ => line(
                    s,
                    &["BITCOUNT", key, &a, &b, rng.pick(&["BIT", "BYTE", "bit"])],
                ),
            },
            4 => {
                let bit = rng.pick(&["0", "1"]);
                match rng.below(4) {
                    0 => line(s, &["BITPOS", key, bit]),
                    1 => line(s, &["BITPOS", key, bit, &a]),
                    2 => line(s, &["BITPOS", key, bit, &a, &b]),
                    _ => line(s, &["BITPOS", key, bit, &a, &b, rng.pick(&["BIT", "BYTE"])]),
                }
            }
            5 => {
                let op = rng.pick(&["AND", "OR", "XOR", "NOT", "and"]);
                let dest = rng.pick(&["r0", "r1", "r2", "r3", "d"]);
                let srcs = if op.eq_ignore_ascii_case("NOT") {
                    1
                } else {
                    1 + rng.below(3) as usize
                };
                let mut args = vec!["BITOP", op, dest];
                for _ in 0..srcs {
                    args.push(rng.pick(KEYS));
                }
                line(s, &args);
            }
            6 | 7 => {
                let mut args: Vec<String> = vec!["BITFIELD".into(), key.into()];
                for _ in 0..1 + rng.below(4) {
                    if rng.below(4) == 0 {
                        args.push("OVERFLOW".into());
                        args.push(rng.pick(OVERFLOWS).into());
                    }
                    let ty = rng.pick(TYPES);
                    let offset = if rng.below(4) == 0 {
                        format!("#{}", rng.below(8))
                    } else {
                        rng.below(200).to_string()
                    };
                    let value = match rng.below(3) {
                        0 => rng.signed(300).to_string(),
                        1 => (rng.next() as i64).to_string(),
                        _ => rng.signed(1 << 20).to_string(),
                    };
                    match rng.below(3) {
                        0 => args.extend(["GET".into(), ty.into(), offset]),
                        1 => args.extend(["SET".into(), ty.into(), offset, value]),
                        _ => args.extend(["INCRBY".into(), ty.into(), offset, value]),
                    }
                }
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                line(s, &refs);
            }
            _ => line(s, &["GET", key]),
        }
    }
    for k in ["r0", "r1", "r2", "r3", "d", "num"] {
        line(s, &["GET", k]);
    }
}

#[test]
fn bitmap_commands_match_redis() {
    let (mut redis_guard, redis_port) = start_redis();
    let kvasir = Kvasir::start(&[]);
    let mut real = redis::Client::open(format!("redis://127.0.0.1:{redis_port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect to redis-server");
    let mut ours = kvasir.conn();

    let mut script = Script::new();
    fixed_cases(&mut script);
    random_cases(&mut script, &mut Rng(0x5EED_B175), 400);

    let mut mismatches = Vec::new();
    let (mut errors, mut nils) = (0, 0);
    for args in &script {
        let (want, got) = (run(&mut real, args), run(&mut ours, args));
        errors += usize::from(want.is_err());
        nils += usize::from(
            matches!(&want, Ok(redis::Value::Array(v)) if v.contains(&redis::Value::Nil)),
        );
        if want != got {
            let shown: Vec<_> = args.iter().map(|a| String::from_utf8_lossy(a)).collect();
            mismatches.push(format!("{shown:?}\n  redis:  {want:?}\n  kvasir: {got:?}"));
        }
    }
    // SETBIT keeps a TTL (the exact seconds left may differ by the time
    // between the two calls).
    for conn in [&mut real, &mut ours] {
        let ttl = run(conn, &[b"TTL".to_vec(), b"ttlk".to_vec()]);
        assert!(
            matches!(ttl, Ok(redis::Value::Int(990..=1000))),
            "TTL of ttlk: {ttl:?}"
        );
    }
    // The script must exercise both paths (and FAIL overflows) to mean much.
    eprintln!(
        "{} commands, {errors} errors, {nils} with FAIL nils",
        script.len()
    );
    assert!(script.len() >= 500, "script has {} commands", script.len());
    assert!(errors >= 50 && script.len() - errors >= 300 && nils >= 5);
    assert!(
        mismatches.is_empty(),
        "{} of {} replies differ:\n{}",
        mismatches.len(),
        script.len(),
        mismatches.join("\n")
    );
    if let Some(mut child) = redis_guard.0.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    drop(kvasir);
}
