//! Determinism (docs/architecture.md) for the hash family: two replicas applying one
//! long pseudo-random sequence of hash commands (HRANDFIELD included) with
//! identical contexts give identical replies at every step and end in
//! identical states, encodings and field order included. And the picks
//! really come from the context's seed: different seeds pick differently.

mod common;

use common::{run_both, to_args, Rng};
use kvasir_core::{Ctx, Store};
use kvasir_resp::Reply;
use std::collections::BTreeMap;

/// Commands and their weights: hash writes dominate; a few generic and
/// string commands make keys vanish, expire or change type.
const MENU: &[(&str, u64)] = &[
    ("hset", 30),
    ("hmset", 3),
    ("hsetnx", 4),
    ("hdel", 10),
    ("hincrby", 5),
    ("hincrbyfloat", 4),
    ("hrandfield", 10),
    ("hscan", 5),
    ("hgetall", 2),
    ("hkeys", 1),
    ("hvals", 1),
    ("hmget", 2),
    ("hget", 2),
    ("hlen", 1),
    ("hexists", 1),
    ("hstrlen", 1),
    ("object", 2),
    ("set", 1),
    ("del", 1),
    ("pexpire", 2),
];

fn key(rng: &mut Rng) -> String {
    format!("h{}", rng.below(10))
}

/// Fields: enough distinct ones to cross 128 entries sometimes.
fn field(rng: &mut Rng) -> String {
    format!("f{}", rng.below(200))
}

/// Values: numbers (for the counters), short strings, and now and then one
/// longer than 64 bytes (which converts to a hashtable).
fn value(rng: &mut Rng) -> String {
    match rng.below(20) {
        0 => "v".repeat(65 + rng.below(60) as usize),
        1..=8 => rng.below(1000).to_string(),
        9 => format!("{}.{}", rng.below(100), rng.below(100)),
        _ => format!("val{}", rng.below(50)),
    }
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

fn build(rng: &mut Rng, name: &str, cursor: &str) -> Vec<String> {
    let mut a = vec![name.to_uppercase()];
    match name {
        "hset" | "hmset" => {
            a.push(key(rng));
            let n = if rng.chance(5) { 80 } else { 1 + rng.below(4) };
            for _ in 0..n {
                a.push(field(rng));
                a.push(value(rng));
            }
        }
        "hsetnx" => a.extend([key(rng), field(rng), value(rng)]),
        "hdel" | "hmget" => {
            a.push(key(rng));
            let n = if rng.chance(5) { 60 } else { 1 + rng.below(4) };
            for _ in 0..n {
                a.push(field(rng));
            }
        }
        "hincrby" => a.extend([
            key(rng),
            field(rng),
            (rng.below(200) as i64 - 100).to_string(),
        ]),
        "hincrbyfloat" => a.extend([key(rng), field(rng), format!("{}.5", rng.below(10))]),
        "hrandfield" => {
            a.push(key(rng));
            if rng.chance(70) {
                a.push((rng.below(40) as i64 - 15).to_string());
                if rng.chance(50) {
                    a.push("WITHVALUES".into());
                }
            }
        }
        "hscan" => {
            a.extend([key(rng), cursor.to_string()]);
            a.extend(["COUNT".into(), (1 + rng.below(20)).to_string()]);
            if rng.chance(30) {
                a.extend(["MATCH".into(), "f1*".into()]);
            }
        }
        "hget" | "hexists" | "hstrlen" => a.extend([key(rng), field(rng)]),
        "hgetall" | "hkeys" | "hvals" | "hlen" | "del" => a.push(key(rng)),
        "object" => a.extend(["ENCODING".into(), key(rng)]),
        "set" => a.extend([key(rng), "string".into()]),
        "pexpire" => a.extend([key(rng), (1 + rng.below(500)).to_string()]),
        _ => {}
    }
    a
}

#[test]
fn replicas_applying_the_same_hash_commands_stay_identical() {
    let mut rng = Rng(0x6861_7368_2d64_6574);
    let mut stores = [Store::default(), Store::default()];
    let mut now_ms: u64 = 1_700_000_000_000;
    let mut cursor = "0".to_string();
    let mut ok: BTreeMap<String, usize> = BTreeMap::new();
    let mut encodings: BTreeMap<String, usize> = BTreeMap::new();
    for step in 0..30_000usize {
        now_ms += rng.below(20);
        let ctx = Ctx {
            now_ms,
            seed: rng.next(),
        };
        let name = pick_command(&mut rng);
        let a = build(&mut rng, name, &cursor);
        let reply = run_both(&mut stores, &a, &ctx, step);
        if reply.is_ok() {
            *ok.entry(a[0].clone()).or_default() += 1;
        }
        match (name, reply) {
            ("hscan", Ok(Reply::Array(parts))) => {
                if let Some(Reply::Bulk(next)) = parts.first() {
                    cursor = String::from_utf8_lossy(next).into_owned();
                }
            }
            ("object", Ok(Reply::Bulk(enc))) => {
                *encodings
                    .entry(String::from_utf8_lossy(&enc).into_owned())
                    .or_default() += 1;
            }
            _ => {}
        }
        if step.is_multiple_of(1000) {
            assert_eq!(stores[0].dump(), stores[1].dump(), "diverged at {step}");
        }
    }
    assert_eq!(stores[0].dump(), stores[1].dump());
    // The sequence really exercised the family, both encodings included.
    for (name, _) in MENU {
        let n = ok.get(&name.to_uppercase()).copied().unwrap_or(0);
        assert!(n > 10, "{name} succeeded only {n} times");
    }
    for enc in ["listpack", "hashtable"] {
        assert!(
            encodings.get(enc).copied().unwrap_or(0) > 10,
            "{enc}: {encodings:?}"
        );
    }
}

/// HRANDFIELD's picks are a function of the seed: the same seed picks the
/// same fields, and different seeds pick different ones.
#[test]
fn hrandfield_picks_follow_the_seed() {
    let mut s = Store::default();
    let ctx = Ctx { now_ms: 1, seed: 0 };
    for (k, n) in [("small", 20), ("big", 500)] {
        let mut a = vec!["HSET".to_string(), k.to_string()];
        for i in 0..n {
            a.extend([format!("f{i}"), format!("v{i}")]);
        }
        assert!(s.apply(0, &to_args(&a), &ctx).is_ok());
    }
    for args in [
        &["HRANDFIELD", "small"][..],
        &["HRANDFIELD", "small", "5"],
        &["HRANDFIELD", "small", "-5", "WITHVALUES"],
        &["HRANDFIELD", "big"],
        &["HRANDFIELD", "big", "5"],
        &["HRANDFIELD", "big", "300"],
        &["HRANDFIELD", "big", "-5"],
    ] {
        let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let pick = |seed| {
            s.read(0, &to_args(&a), &Ctx { now_ms: 1, seed })
                .expect("hrandfield")
        };
        assert_eq!(pick(42), pick(42), "{args:?}");
        let distinct: std::collections::BTreeSet<String> =
            (0..20).map(|seed| format!("{:?}", pick(seed))).collect();
        assert!(distinct.len() > 1, "{args:?} ignores the seed");
    }
}
