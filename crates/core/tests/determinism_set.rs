//! Determinism (docs/architecture.md) for the set family: two replicas applying one long
//! pseudo-random sequence of set commands (random picks included: SPOP,
//! SRANDMEMBER) with identical contexts give identical replies at every
//! step and end in identical states, encodings and member order included.
//! And the picks really come from the context's seed: different seeds pick
//! differently.

mod common;

use common::{run_both, to_args, Rng};
use kvasir_core::{Ctx, Store};
use kvasir_resp::Reply;
use std::collections::BTreeMap;

/// Commands and their weights; set commands dominate, a few generic and
/// string ones make keys vanish, expire or change type.
const MENU: &[(&str, u64)] = &[
    ("sadd", 30),
    ("srem", 8),
    ("spop", 8),
    ("srandmember", 8),
    ("smove", 5),
    ("smembers", 2),
    ("sismember", 2),
    ("smismember", 2),
    ("scard", 2),
    ("sinter", 2),
    ("sintercard", 2),
    ("sinterstore", 3),
    ("sunion", 2),
    ("sunionstore", 3),
    ("sdiff", 2),
    ("sdiffstore", 3),
    ("sscan", 3),
    ("object", 2),
    ("set", 2),
    ("del", 2),
    ("pexpire", 2),
];

fn key(rng: &mut Rng) -> String {
    format!("s{}", rng.below(12))
}

/// Members: mostly small integers (intsets), some strings (hashtables),
/// some long ones (heap-stored), enough of them to cross 512 sometimes.
fn member(rng: &mut Rng) -> String {
    match rng.below(10) {
        0..=4 => rng.below(700).to_string(),
        5 => format!("-{}", rng.below(100_000)),
        6 => format!("a-long-member-name-{}", rng.below(200)),
        _ => format!("m{}", rng.below(400)),
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
        "sadd" | "srem" | "smismember" => {
            a.push(key(rng));
            let n = if rng.chance(10) { 60 } else { 1 + rng.below(5) };
            for _ in 0..n {
                a.push(member(rng));
            }
        }
        "spop" | "srandmember" => {
            a.push(key(rng));
            if rng.chance(70) {
                let c = rng.below(30) as i64 - if name == "srandmember" { 10 } else { 0 };
                a.push(c.to_string());
            }
        }
        "smove" => a.extend([key(rng), key(rng), member(rng)]),
        "smembers" | "scard" => a.push(key(rng)),
        "sismember" => a.extend([key(rng), member(rng)]),
        "sinter" | "sunion" | "sdiff" => {
            for _ in 0..1 + rng.below(3) {
                a.push(key(rng));
            }
        }
        "sinterstore" | "sunionstore" | "sdiffstore" => {
            for _ in 0..2 + rng.below(3) {
                a.push(key(rng));
            }
        }
        "sintercard" => {
            let n = 1 + rng.below(3);
            a.push(n.to_string());
            for _ in 0..n {
                a.push(key(rng));
            }
            if rng.chance(50) {
                a.extend(["LIMIT".into(), rng.below(5).to_string()]);
            }
        }
        "sscan" => {
            a.extend([key(rng), cursor.to_string()]);
            a.extend(["COUNT".into(), (1 + rng.below(20)).to_string()]);
            if rng.chance(30) {
                a.extend(["MATCH".into(), "*1*".into()]);
            }
        }
        "object" => a.extend(["ENCODING".into(), key(rng)]),
        "set" => a.extend([key(rng), "string".into()]),
        "del" => a.push(key(rng)),
        "pexpire" => a.extend([key(rng), (1 + rng.below(500)).to_string()]),
        _ => {}
    }
    a
}

#[test]
fn replicas_applying_the_same_set_commands_stay_identical() {
    let mut rng = Rng(0x7365_7473_2d64_6574);
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
            ("sscan", Ok(Reply::Array(parts))) => {
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
        if step % 1000 == 0 {
            assert_eq!(stores[0].dump(), stores[1].dump(), "diverged at {step}");
        }
    }
    assert_eq!(stores[0].dump(), stores[1].dump());
    for name in [
        "SADD",
        "SREM",
        "SPOP",
        "SRANDMEMBER",
        "SMOVE",
        "SINTERSTORE",
        "SUNIONSTORE",
        "SDIFFSTORE",
        "SINTERCARD",
        "SSCAN",
    ] {
        assert!(ok.get(name).copied().unwrap_or(0) > 50, "{name}: {ok:?}");
    }
    // Both encodings were exercised.
    assert!(
        encodings.get("intset").copied().unwrap_or(0) > 0,
        "{encodings:?}"
    );
    assert!(
        encodings.get("hashtable").copied().unwrap_or(0) > 0,
        "{encodings:?}"
    );
}

fn filled_store(members: usize, intset: bool) -> Store {
    let mut st = Store::default();
    let mut a = vec!["SADD".to_string(), "s".to_string()];
    a.extend((0..members).map(|i| {
        if intset {
            i.to_string()
        } else {
            format!("element:{i}")
        }
    }));
    let ctx = Ctx { now_ms: 1, seed: 0 };
    assert_eq!(
        st.apply(0, &to_args(&a), &ctx),
        Ok(Reply::Int(members as i64))
    );
    st
}

#[test]
fn random_picks_depend_on_the_seed() {
    for intset in [true, false] {
        for cmd in [
            vec!["SPOP", "s"],
            vec!["SPOP", "s", "3"],
            vec!["SRANDMEMBER", "s"],
            vec!["SRANDMEMBER", "s", "3"],
            vec!["SRANDMEMBER", "s", "-3"],
        ] {
            let args: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
            let pick = |seed: u64| {
                let mut st = filled_store(100, intset);
                let ctx = Ctx { now_ms: 1, seed };
                let r = st.apply(0, &to_args(&args), &ctx);
                (r, st.dump())
            };
            // Same seed: same pick and same state, every time.
            assert_eq!(pick(7), pick(7), "{cmd:?}");
            // Different seeds: different picks (at least sometimes).
            let first = pick(0).0;
            let differ = (1..20).filter(|&s| pick(s).0 != first).count();
            assert!(
                differ >= 10,
                "{cmd:?} intset={intset}: only {differ} of 19 seeds differ"
            );
        }
    }
}

#[test]
fn spop_drains_a_big_set_identically() {
    let mut a = filled_store(20_000, false);
    let mut b = filled_store(20_000, false);
    let spop = to_args(&["SPOP".to_string(), "s".to_string()]);
    for i in 0..20_000u64 {
        let ctx = Ctx {
            now_ms: 1,
            seed: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        };
        let ra = a.apply(0, &spop, &ctx);
        assert_eq!(ra, b.apply(0, &spop, &ctx), "pop {i}");
        assert!(matches!(ra, Ok(Reply::Bulk(_))));
    }
    assert!(a.db(0).is_empty() && b.db(0).is_empty());
}
