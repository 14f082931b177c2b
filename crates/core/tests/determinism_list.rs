//! Determinism (docs/architecture.md) for the list family: two fresh stores applying the
//! same long pseudo-random sequence of list commands (every one, blocking
//! forms included) with the same contexts give the same replies at every
//! step and end in the same state, across both encodings and changes of
//! list-max-listpack-size.
//!
//! Lists make no random choices, so the seed must not matter at all: a
//! second test replays one sequence with different seeds on each store and
//! still expects identical replies and state.
//!
//! list-compress-depth is a memory representation only: a third test runs
//! the second store with inner quicklist nodes compressed and still expects
//! identical replies, state and digests.

mod common;

use common::{to_args, Rng};
use kvasir_core::keyspace::Value;
use kvasir_core::{CmdError, Ctx, Store};
use kvasir_resp::Reply;
use std::collections::BTreeMap;

/// Commands with their weights. Pushes dominate so that lists grow past
/// the listpack limit and exercise the quicklist.
const MENU: &[(&str, u64)] = &[
    ("lpush", 14),
    ("rpush", 14),
    ("lpushx", 3),
    ("rpushx", 3),
    ("lpop", 5),
    ("rpop", 5),
    ("llen", 2),
    ("lrange", 4),
    ("lindex", 3),
    ("lset", 3),
    ("lrem", 3),
    ("ltrim", 2),
    ("linsert", 4),
    ("lpos", 3),
    ("lmove", 4),
    ("rpoplpush", 2),
    ("lmpop", 3),
    ("blpop", 2),
    ("brpop", 2),
    ("blmove", 2),
    ("brpoplpush", 1),
    ("blmpop", 2),
    ("object", 2),
    ("set", 1),
    ("del", 1),
    ("pexpire", 1),
];

fn key(rng: &mut Rng) -> String {
    format!("l{}", rng.below(12))
}

fn value(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => rng.below(300).to_string(),
        1 => format!("-{}", rng.below(100_000)),
        2 => "x".repeat(rng.below(120) as usize),
        3 => "y".repeat(rng.below(3000) as usize),
        _ => format!("v{}", rng.below(20)),
    }
}

fn index(rng: &mut Rng) -> String {
    match rng.below(8) {
        0 => "-9223372036854775808".into(),
        1 => "9223372036854775807".into(),
        2 => "abc".into(),
        _ => (rng.below(60) as i64 - 30).to_string(),
    }
}

fn end(rng: &mut Rng) -> String {
    rng.pick(&["LEFT", "RIGHT", "left", "right", "middle"])
        .into()
}

fn keys(rng: &mut Rng, a: &mut Vec<String>) -> usize {
    let n = 1 + rng.below(3) as usize;
    for _ in 0..n {
        a.push(key(rng));
    }
    n
}

fn build(rng: &mut Rng, name: &str) -> Vec<String> {
    let mut a = vec![name.to_uppercase()];
    match name {
        "lpush" | "rpush" | "lpushx" | "rpushx" => {
            a.push(key(rng));
            for _ in 0..1 + rng.below(6) {
                a.push(value(rng));
            }
        }
        "lpop" | "rpop" => {
            a.push(key(rng));
            if rng.chance(50) {
                a.push(match rng.below(6) {
                    0 => "-1".into(),
                    _ => rng.below(6).to_string(),
                });
            }
        }
        "llen" => a.push(key(rng)),
        "lrange" | "ltrim" => a.extend([key(rng), index(rng), index(rng)]),
        "lindex" => a.extend([key(rng), index(rng)]),
        "lset" => a.extend([key(rng), index(rng), value(rng)]),
        "lrem" => a.extend([key(rng), index(rng), value(rng)]),
        "linsert" => a.extend([
            key(rng),
            rng.pick(&["BEFORE", "AFTER", "after", "around"]).into(),
            value(rng),
            value(rng),
        ]),
        "lpos" => {
            a.extend([key(rng), value(rng)]);
            if rng.chance(40) {
                a.extend(["RANK".into(), index(rng)]);
            }
            if rng.chance(40) {
                a.extend(["COUNT".into(), rng.below(4).to_string()]);
            }
            if rng.chance(20) {
                a.extend(["MAXLEN".into(), rng.below(20).to_string()]);
            }
        }
        "lmove" => a.extend([key(rng), key(rng), end(rng), end(rng)]),
        "rpoplpush" => a.extend([key(rng), key(rng)]),
        "lmpop" | "blmpop" => {
            if name == "blmpop" {
                a.push(rng.pick(&["0", "0.5", "-1", "x"]).into());
            }
            let mut ks = Vec::new();
            let n = keys(rng, &mut ks);
            a.push(if rng.chance(5) {
                "0".into()
            } else {
                n.to_string()
            });
            a.extend(ks);
            a.push(end(rng));
            if rng.chance(50) {
                a.extend(["COUNT".into(), rng.below(5).to_string()]);
            }
        }
        "blpop" | "brpop" => {
            keys(rng, &mut a);
            a.push(rng.pick(&["0", "1", "0.01", "-1"]).into());
        }
        "blmove" => a.extend([
            key(rng),
            key(rng),
            end(rng),
            end(rng),
            rng.pick(&["0", "2"]).into(),
        ]),
        "brpoplpush" => a.extend([key(rng), key(rng), "0".into()]),
        "object" => a.extend(["ENCODING".into(), key(rng)]),
        "set" => a.extend([key(rng), value(rng)]),
        "del" => a.push(key(rng)),
        "pexpire" => a.extend([key(rng), (1 + rng.below(500)).to_string()]),
        _ => {}
    }
    a
}

fn pick_command(rng: &mut Rng) -> &'static str {
    let total: u64 = MENU.iter().map(|(_, w)| w).sum();
    let mut x = rng.below(total);
    for (name, w) in MENU {
        if x < *w {
            return name;
        }
        x -= w;
    }
    MENU[0].0
}

/// What a run observed, to check that it exercised the family.
#[derive(Default)]
struct Coverage {
    ok: BTreeMap<String, usize>,
    blocked: usize,
    quicklists: usize,
    max_len: i64,
    /// Most compressed nodes seen in one list of the second store.
    compressed: usize,
}

/// Runs `steps` commands on two stores; `seeds` chooses each store's seed
/// from the step's drawn seed (identical, or deliberately different); the
/// second store compresses lists that become quicklists with `depths`
/// (changed as the run goes, like the node limit).
fn run(steps: u64, seeds: impl Fn(u64) -> [u64; 2], depths: &[u32]) -> Coverage {
    let mut rng = Rng(0x6c69_7374_2024_0001);
    let mut stores = [Store::default(), Store::default()];
    let mut now_ms: u64 = 1_700_000_000_000;
    let mut cov = Coverage::default();
    for step in 0..steps {
        now_ms += rng.below(20);
        let drawn = rng.next();
        let [seed0, seed1] = seeds(drawn);
        let ctx0 = Ctx {
            now_ms,
            seed: seed0,
        };
        let ctx1 = Ctx {
            now_ms,
            seed: seed1,
        };
        // The node limit is replicated configuration: both change together.
        if step.is_multiple_of(1500) {
            let fill = [-2, -1, 4, 16, -3][(step / 1500 % 5) as usize];
            for s in &mut stores {
                s.limits.list_max_listpack_size = fill;
            }
            if let Some(d) = depths.get((step / 1500) as usize % depths.len().max(1)) {
                stores[1].limits.list_compress_depth = *d;
            }
        }
        let name = pick_command(&mut rng);
        let a = build(&mut rng, name);
        let args = to_args(&a);
        let db = if rng.chance(90) { 0 } else { 1 };
        let [s0, s1] = &mut stores;
        let r0 = s0.apply(db, &args, &ctx0);
        let r1 = s1.apply(db, &args, &ctx1);
        assert_eq!(r0, r1, "step {step} {a:?}");
        match &r0 {
            Ok(Reply::Bulk(b)) if name == "object" && b.as_ref() == b"quicklist" => {
                cov.quicklists += 1;
            }
            Ok(Reply::Int(n)) if name.ends_with("push") => cov.max_len = cov.max_len.max(*n),
            Err(CmdError::WouldBlock(_)) => cov.blocked += 1,
            _ => {}
        }
        if r0.is_ok() {
            *cov.ok.entry(name.to_string()).or_default() += 1;
        }
        if step.is_multiple_of(500) {
            assert_eq!(s0.dump(), s1.dump(), "state diverged at step {step}");
            assert_eq!(
                kvasir_core::snapshot::digest(s0),
                kvasir_core::snapshot::digest(s1),
                "digests differ at step {step}"
            );
            for e in s1.db(0).iter() {
                if let Value::List(l) = e.value {
                    cov.compressed = cov.compressed.max(l.compressed_nodes());
                }
            }
        }
    }
    let [s0, s1] = &stores;
    assert_eq!(s0.dump(), s1.dump(), "final state diverged");
    assert_eq!(s0.stats, s1.stats);
    cov
}

#[test]
fn replicas_applying_list_commands_stay_identical() {
    let cov = run(15_000, |seed| [seed, seed], &[]);
    for (name, _) in MENU {
        assert!(
            cov.ok.get(*name).copied().unwrap_or(0) > 0,
            "{name} never succeeded: {:?}",
            cov.ok
        );
    }
    assert!(cov.blocked > 0, "no blocking command ever blocked");
    assert!(cov.quicklists > 0, "no list reached the quicklist encoding");
    assert!(cov.max_len >= 50, "lists stayed tiny: {}", cov.max_len);
}

#[test]
fn list_commands_do_not_depend_on_the_seed() {
    let cov = run(5_000, |seed| [seed, seed.rotate_left(17) ^ 0x5555], &[]);
    assert!(cov.ok.values().sum::<usize>() > 1000);
    assert_eq!(cov.compressed, 0);
}

#[test]
fn compressed_lists_answer_as_uncompressed_ones() {
    let cov = run(15_000, |seed| [seed, seed], &[1, 2, 0, 3]);
    assert!(cov.quicklists > 0, "no list reached the quicklist encoding");
    assert!(cov.compressed > 0, "no node was ever compressed");
}
