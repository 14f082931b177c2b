//! HyperLogLog commands (PFADD PFCOUNT PFMERGE, PFDEBUG PFSELFTEST) run side by side against
//! Kvasir and a real `redis-server` (7.0): identical replies (estimates and
//! error texts included) and byte-identical values (GET) for sparse HLLs,
//! the sparse-to-dense conversion, 10k and 200k elements, merges and
//! corrupted values.
//!
//! A single-key PFCOUNT writes the cardinality it computed into the
//! value's header (bytes 8..16, the cache) on both: values stay
//! byte-identical after it too. (Under Raft Kvasir's PFCOUNT is a pure
//! read and leaves them: see docs/operations.md.)
//!
//! Needs `redis-server` on PATH (scripts/install-test-deps.sh); fails, does
//! not skip, when it is missing.

mod common;

use common::redis_server::{run, start_redis, Outcome, Rng};
use common::Kvasir;

fn words(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

const HDR: &[u8; 16] = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80";

/// Both servers, and every difference seen so far.
struct Pair {
    real: redis::Connection,
    ours: redis::Connection,
    mismatches: Vec<String>,
    commands: usize,
    errors: usize,
}

impl Pair {
    /// Sends `args` to both; records a mismatch; returns Redis's reply.
    fn same(&mut self, args: &[Vec<u8>]) -> Outcome {
        let (want, got) = (run(&mut self.real, args), run(&mut self.ours, args));
        self.commands += 1;
        self.errors += usize::from(want.is_err());
        if want != got {
            let shown: Vec<_> = args
                .iter()
                .take(6)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            self.mismatches.push(format!(
                "{shown:?} ({} args)\n  redis:  {}\n  kvasir: {}",
                args.len(),
                short(&want),
                short(&got)
            ));
        }
        want
    }

    fn cmd(&mut self, args: &[&str]) {
        let _ = self.same(&words(args));
    }

    /// PFADD of `elements` in commands of `batch`.
    fn add_all(&mut self, key: &str, elements: &[Vec<u8>], batch: usize) {
        for chunk in elements.chunks(batch) {
            let mut args = words(&["PFADD", key]);
            args.extend(chunk.iter().cloned());
            let _ = self.same(&args);
        }
    }

    fn get(&mut self, key: &str) -> (Outcome, Outcome) {
        let args = words(&["GET", key]);
        (run(&mut self.real, &args), run(&mut self.ours, &args))
    }

    /// GET of `key` must be byte-identical.
    fn same_bytes(&mut self, key: &str) {
        let (want, got) = self.get(key);
        if want != got {
            self.mismatches.push(format!(
                "GET {key}: bytes differ\n  redis:  {}\n  kvasir: {}",
                short(&want),
                short(&got)
            ));
        }
    }

    /// The encoding byte of `key` on both sides (1 sparse, 0 dense).
    fn encoding(&mut self, key: &str) -> (Option<u8>, Option<u8>) {
        let (want, got) = self.get(key);
        let enc = |o: &Outcome| match o {
            Ok(redis::Value::BulkString(b)) => b.get(4).copied(),
            _ => None,
        };
        (enc(&want), enc(&got))
    }

    /// SET `key` to raw bytes on both.
    fn set_raw(&mut self, key: &str, bytes: &[u8]) {
        let _ = self.same(&[b"SET".to_vec(), key.as_bytes().to_vec(), bytes.to_vec()]);
    }
}

/// A reply shortened for messages (values can be 12 KB).
fn short(o: &Outcome) -> String {
    match o {
        Ok(redis::Value::BulkString(b)) if b.len() > 48 => {
            format!("{} bytes, starting {:?}", b.len(), &b[..48])
        }
        other => format!("{other:?}"),
    }
}

fn elements(prefix: &str, range: std::ops::Range<usize>) -> Vec<Vec<u8>> {
    range.map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

/// Small sets, duplicates, empty PFADD, binary elements of every tail
/// length: all sparse.
fn sparse_cases(p: &mut Pair, rng: &mut Rng) {
    p.cmd(&["PFADD", "empty"]);
    p.same_bytes("empty");
    p.cmd(&["PFADD", "empty"]);
    p.same_bytes("empty");
    p.cmd(&["PFADD", "s1", "a", "b", "c", "d", "e", "f", "g"]);
    p.same_bytes("s1");
    p.cmd(&["PFADD", "s1", "a", "b", "c"]);
    p.cmd(&["PFADD", "s1", "a", "a", "a", "h"]);
    p.same_bytes("s1");
    p.cmd(&["PFADD", "s1"]);
    p.same_bytes("s1");
    for i in 0..60 {
        let e = format!("one-{i}");
        p.cmd(&["PFADD", "s2", &e]);
        p.same_bytes("s2");
    }
    // Binary elements, lengths 0..40 (every MurmurHash tail length).
    let bin: Vec<Vec<u8>> = (0..300)
        .map(|i| (0..i % 41).map(|_| rng.next() as u8).collect())
        .collect();
    p.add_all("bin", &bin, 7);
    p.same_bytes("bin");
    p.add_all("bin", &bin, 300);
    p.same_bytes("bin");
    p.cmd(&["PFCOUNT", "s1", "s1"]);
    p.cmd(&["PFCOUNT", "bin", "s2", "nokey"]);
    p.cmd(&["PFCOUNT", "nokey"]);
    p.cmd(&["PFCOUNT", "nokey", "nokey2"]);
}

/// Sparse growth past hll-sparse-max-bytes, checked after every batch,
/// then 10k and 200k distinct elements (dense), duplicates.
fn dense_cases(p: &mut Pair) {
    let grow = elements("g:", 0..3000);
    for chunk in grow.chunks(25) {
        p.add_all("grow", chunk, 25);
        p.same_bytes("grow");
    }
    let (real, ours) = p.encoding("grow");
    assert_eq!(
        (real, ours),
        (Some(0), Some(0)),
        "grow should be dense by now"
    );
    p.add_all("grow", &elements("g:", 3000..10_000), 500);
    p.same_bytes("grow");
    // Duplicates change nothing.
    p.add_all("grow", &elements("g:", 0..10_000), 1000);
    p.same_bytes("grow");

    // More crossings of the sparse limit: each key converts at its own
    // length (3000 minus 0..2 bytes), so an off-by-one shows up.
    for t in 0..12 {
        let key = format!("t{t}");
        let all = elements(&format!("t{t}-"), 0..3000);
        let mut next = 0;
        // In batches while far from the limit, then one by one.
        while next < all.len() {
            let len = match p.get(&key).0 {
                Ok(redis::Value::BulkString(b)) => b.len(),
                _ => 0,
            };
            let batch = if len < 2900 { 50 } else { 1 };
            let end = (next + batch).min(all.len());
            p.add_all(&key, &all[next..end], batch);
            p.same_bytes(&key);
            next = end;
            if len > 3000 {
                break;
            }
        }
    }

    let big = elements("big-element-", 0..200_000);
    for (i, chunk) in big.chunks(1000).enumerate() {
        p.add_all("big", chunk, 1000);
        if i % 40 == 0 {
            p.same_bytes("big");
        }
    }
    p.same_bytes("big");
    p.add_all("big", &big[..20_000], 2000);
    p.same_bytes("big");
    // An element per command, straight into a dense HLL.
    for i in 0..50 {
        p.cmd(&["PFADD", "big", &format!("late-{i}")]);
    }
    p.same_bytes("big");
    p.cmd(&["PFCOUNT", "grow", "big"]);
    p.cmd(&["PFCOUNT", "big", "big"]);
    p.cmd(&["PFCOUNT", "grow", "grow"]);
}

/// PFMERGE: sparse+dense (dense result), sparse+sparse (stays sparse, or
/// turns dense while merging when it outgrows the limit), destination among
/// the sources, missing destination and sources.
fn merge_cases(p: &mut Pair) {
    p.cmd(&["PFMERGE", "m1", "s1", "grow"]);
    p.same_bytes("m1");
    p.cmd(&["PFMERGE", "m2", "s1", "s2", "bin"]);
    p.same_bytes("m2");
    assert_eq!(p.encoding("m2"), (Some(1), Some(1)), "m2 stays sparse");
    p.cmd(&["PFMERGE", "s2", "s1"]);
    p.same_bytes("s2");
    p.cmd(&["PFMERGE", "s2", "s2"]);
    p.same_bytes("s2");
    p.cmd(&["PFMERGE", "m3"]);
    p.same_bytes("m3");
    p.cmd(&["PFMERGE", "m4", "nokey", "nokey2"]);
    p.same_bytes("m4");
    p.cmd(&["PFMERGE", "s1", "big", "nokey"]);
    p.same_bytes("s1");
    // Sparse halves whose union no longer fits sparse.
    p.add_all("h1", &elements("h1-", 0..900), 100);
    p.add_all("h2", &elements("h2-", 0..900), 100);
    p.same_bytes("h1");
    p.same_bytes("h2");
    p.cmd(&["PFMERGE", "h12", "h1", "h2"]);
    p.same_bytes("h12");
    p.cmd(&["PFMERGE", "h1", "h2"]);
    p.same_bytes("h1");
    p.cmd(&["PFCOUNT", "h1", "h2", "h12", "m1", "m2"]);
    // A merge keeps the destination's TTL.
    p.cmd(&["PFADD", "ttl", "x"]);
    p.cmd(&["EXPIRE", "ttl", "1000"]);
    p.cmd(&["PFMERGE", "ttl", "s2"]);
    p.cmd(&["PFADD", "ttl", "y", "z"]);
    p.same_bytes("ttl");
    for conn in [&mut p.real, &mut p.ours] {
        let ttl = run(conn, &words(&["TTL", "ttl"]));
        assert!(
            matches!(ttl, Ok(redis::Value::Int(990..=1000))),
            "TTL of ttl: {ttl:?}"
        );
    }
}

/// Type errors, arity, and values that start with HYLL but are corrupt.
fn error_cases(p: &mut Pair) {
    p.cmd(&["SET", "str", "just a string"]);
    p.cmd(&["SET", "int", "12345"]);
    p.cmd(&["RPUSH", "list", "a"]);
    for k in ["str", "int", "list"] {
        p.cmd(&["PFADD", k, "x"]);
        p.cmd(&["PFADD", k]);
        p.cmd(&["PFCOUNT", k]);
        p.cmd(&["PFCOUNT", "s1", k]);
        p.cmd(&["PFCOUNT", "nokey", k, "s1"]);
        p.cmd(&["PFMERGE", k, "s1"]);
        p.cmd(&["PFMERGE", "dst", "s1", k]);
        p.cmd(&["EXISTS", "dst"]);
    }
    p.cmd(&["PFADD"]);
    p.cmd(&["PFCOUNT"]);
    p.cmd(&["PFMERGE"]);

    // Header problems: short, bad magic, bad encoding, dense of the wrong
    // size.
    let mut dense = HDR.to_vec();
    dense[4] = 0;
    let mut dense_short = dense.clone();
    dense_short.resize(12_303, 0);
    let mut dense_long = dense.clone();
    dense_long.resize(12_305, 0);
    let mut bad_magic = HDR.to_vec();
    bad_magic[3] = b'X';
    bad_magic.extend_from_slice(b"\x7f\xff");
    let mut bad_enc = HDR.to_vec();
    bad_enc[4] = 2;
    bad_enc.extend_from_slice(b"\x7f\xff");
    let header_cases: Vec<Vec<u8>> = vec![
        b"HYLL".to_vec(),
        HDR[..15].to_vec(),
        bad_magic,
        bad_enc,
        dense_short,
        dense_long,
    ];
    for v in &header_cases {
        p.set_raw("bad", v);
        p.cmd(&["PFADD", "bad", "x"]);
        p.cmd(&["PFCOUNT", "bad"]);
        p.cmd(&["PFCOUNT", "bad", "s1"]);
        p.cmd(&["PFMERGE", "bad", "s1"]);
        p.cmd(&["PFMERGE", "s1", "bad"]);
        p.same_bytes("bad");
    }

    // Sparse bodies that do not cover exactly 16384 registers.
    let bodies: &[&[u8]] = &[
        b"",
        b"\x7f\xfe",
        b"\x7f\xff\x00",
        b"\x7f",
        b"\xff\x7f\xff",
        b"\x7f\xff\xff",
        b"\x7f\xfe\xff",
        b"\x00",
        b"\x3f\x3f\x3f",
        b"\x80\x7f\xff",
    ];
    for body in bodies {
        let mut v = HDR.to_vec();
        v.extend_from_slice(body);
        for cmds in [
            &["PFADD", "bad", "a", "b", "c", "d", "e", "f"][..],
            &["PFCOUNT", "bad"],
            &["PFCOUNT", "bad", "bad"],
            &["PFCOUNT", "s1", "bad"],
            &["PFMERGE", "dst", "bad"],
            &["PFMERGE", "bad", "s1"],
        ] {
            p.set_raw("bad", &v);
            p.cmd(cmds);
            p.same_bytes("bad");
            p.cmd(&["EXISTS", "dst"]);
        }
    }
    // A valid cache is answered as is; a stale one is recomputed.
    let mut cached = b"HYLL\x01\0\0\0\x2a\0\0\0\0\0\0\0".to_vec();
    cached.extend_from_slice(b"\x7f\xff");
    p.set_raw("cached", &cached);
    p.cmd(&["PFCOUNT", "cached"]);
    p.cmd(&["PFCOUNT", "cached", "cached"]);
    p.cmd(&["PFADD", "cached", "x"]);
    p.same_bytes("cached");
    p.cmd(&["PFCOUNT", "cached"]);
    // Dense with every register at 63 (beyond what hashing produces).
    let mut full = HDR.to_vec();
    full[4] = 0;
    full.resize(12_304, 0xff);
    p.set_raw("full", &full);
    p.cmd(&["PFCOUNT", "full"]);
    p.cmd(&["PFCOUNT", "full", "s1"]);
    p.cmd(&["PFADD", "full", "x"]);
    p.cmd(&["PFMERGE", "fm", "full", "s1"]);
    p.same_bytes("fm");
}

/// Random opcode sequences covering exactly 16384 registers (valid but
/// rarely canonical), then PFADD and PFMERGE on them: exercises every
/// in-place edit of the sparse form.
fn random_sparse_cases(p: &mut Pair, rng: &mut Rng, rounds: usize) {
    for round in 0..rounds {
        let mut body = Vec::new();
        let mut left: u64 = 16_384;
        while left > 0 {
            let take = match rng.below(4) {
                0 => {
                    let n = (1 + rng.below(64)).min(left);
                    body.push((n - 1) as u8);
                    n
                }
                1 => {
                    let span = if rng.below(2) == 0 { 300 } else { 5000 };
                    let n = (1 + rng.below(span)).min(left);
                    body.push(0x40 | ((n - 1) >> 8) as u8);
                    body.push(((n - 1) & 0xff) as u8);
                    n
                }
                _ => {
                    let n = (1 + rng.below(4)).min(left);
                    let top = if rng.below(3) == 0 { 32 } else { 4 };
                    let v = 1 + rng.below(top);
                    body.push(0x80 | ((v - 1) << 2) as u8 | (n - 1) as u8);
                    n
                }
            };
            left -= take;
        }
        let mut v = HDR.to_vec();
        v.extend_from_slice(&body);
        p.set_raw("rs", &v);
        let batch: Vec<Vec<u8>> = (0..1 + rng.below(40))
            .map(|i| format!("r{round}-{i}").into_bytes())
            .collect();
        p.add_all("rs", &batch, batch.len());
        p.same_bytes("rs");
        p.cmd(&["PFCOUNT", "rs", "rs"]);
        p.set_raw("rs2", &v);
        p.cmd(&["PFMERGE", "rs2", "s1", "bin"]);
        p.same_bytes("rs2");
        p.cmd(&["PFCOUNT", "rs2"]);
    }
}

/// PFDEBUG and PFSELFTEST, Redis's debugging commands its test suite
/// uses: the same replies on both (GETREG converts a sparse HLL to the
/// same dense bytes, DECODE lists the same opcodes), errors included.
fn debug_cases(p: &mut Pair) {
    p.add_all("d1", &elements("dbg-", 0..40), 7);
    for sub in ["ENCODING", "decode", "Decode"] {
        p.cmd(&["PFDEBUG", sub, "d1"]);
    }
    p.cmd(&["PFDEBUG", "GETREG", "d1"]);
    p.same_bytes("d1");
    p.cmd(&["PFDEBUG", "encoding", "d1"]);
    p.cmd(&["PFDEBUG", "todense", "d1"]);
    p.cmd(&["PFDEBUG", "decode", "d1"]);
    p.add_all("d2", &elements("dbg2-", 0..5), 5);
    p.cmd(&["PFDEBUG", "TODENSE", "d2"]);
    p.same_bytes("d2");
    p.cmd(&["PFCOUNT", "d2"]);
    p.cmd(&["PFDEBUG", "getreg", "missing"]);
    p.cmd(&["PFDEBUG", "nosuch", "d2"]);
    p.cmd(&["PFDEBUG", "getreg"]);
    p.cmd(&["PFDEBUG", "getreg", "d2", "extra"]);
    p.cmd(&["SET", "plain", "text"]);
    p.cmd(&["PFDEBUG", "encoding", "plain"]);
    p.cmd(&["LPUSH", "alist", "x"]);
    p.cmd(&["PFDEBUG", "encoding", "alist"]);
    // The key is checked before the subcommand.
    for key in ["plain", "alist", "missing"] {
        p.cmd(&["PFDEBUG", "nosuch", key]);
    }
    p.cmd(&["PFSELFTEST"]);
    p.cmd(&["PFSELFTEST", "extra"]);
}

#[test]
fn hyperloglog_commands_match_redis() {
    let (mut redis_guard, redis_port) = start_redis();
    let kvasir = Kvasir::start(&[]);
    let real = redis::Client::open(format!("redis://127.0.0.1:{redis_port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect to redis-server");
    let mut p = Pair {
        real,
        ours: kvasir.conn(),
        mismatches: Vec::new(),
        commands: 0,
        errors: 0,
    };
    let mut rng = Rng(0x5EED_4411);

    sparse_cases(&mut p, &mut rng);
    dense_cases(&mut p);
    merge_cases(&mut p);
    error_cases(&mut p);
    random_sparse_cases(&mut p, &mut rng, 150);

    // Single-key PFCOUNT: both cache the result in the value.
    let keys = [
        "empty", "s1", "s2", "bin", "grow", "big", "m1", "m2", "m3", "m4", "h1", "h2", "h12",
        "ttl", "rs", "rs2", "fm",
    ];
    for k in keys {
        p.cmd(&["PFCOUNT", k]);
        p.same_bytes(k);
    }
    // The estimates must be plausible, not only equal.
    for (k, n) in [("grow", 10_000i64), ("big", 200_050)] {
        match p.same(&words(&["PFCOUNT", k])) {
            Ok(redis::Value::Int(c)) => {
                assert!((c - n).abs() * 100 < n * 2, "PFCOUNT {k} = {c}, want ~{n}")
            }
            other => panic!("PFCOUNT {k}: {other:?}"),
        }
    }
    // A change invalidates the cache; the next count stores it again.
    p.add_all("s1", &elements("after-", 0..100), 10);
    p.same_bytes("s1");
    p.cmd(&["PFCOUNT", "s1"]);
    p.same_bytes("s1");
    p.cmd(&["OBJECT", "ENCODING", "s1"]);
    debug_cases(&mut p);

    eprintln!("{} commands, {} errors", p.commands, p.errors);
    assert!(p.errors >= 100, "only {} errors exercised", p.errors);
    assert!(
        p.mismatches.is_empty(),
        "{} differences:\n{}",
        p.mismatches.len(),
        p.mismatches.join("\n")
    );
    if let Some(mut child) = redis_guard.0.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    drop(kvasir);
}
