//! Determinism (docs/architecture.md): a command sequence with the same contexts (time,
//! seed) applies identically on every replica. Two fresh stores replay one
//! long pseudo-random sequence, active expiry cycles included, and must give
//! the same replies and end in the same state.
//!
//! The sequence only uses commands present in the table when the test runs
//! (families are being added over time), so it grows with the table.

mod common;

use common::{to_args, Rng};
use kvasir_core::expire::ActiveExpire;
use kvasir_core::{lookup, CmdError, Ctx, Store};
use kvasir_resp::Reply;
use std::collections::BTreeMap;

/// Commands the generator knows how to build, with their weights.
const MENU: &[(&str, u64)] = &[
    ("set", 20),
    ("get", 4),
    ("incr", 5),
    ("incrby", 3),
    ("decr", 2),
    ("append", 5),
    ("setrange", 3),
    ("getrange", 1),
    ("strlen", 1),
    ("mset", 3),
    ("msetnx", 1),
    ("getdel", 2),
    ("getex", 2),
    ("getset", 1),
    ("setnx", 1),
    ("setex", 1),
    ("psetex", 1),
    ("del", 4),
    ("unlink", 1),
    ("exists", 2),
    ("type", 1),
    ("rename", 3),
    ("renamenx", 2),
    ("copy", 3),
    ("expire", 5),
    ("pexpire", 3),
    ("expireat", 1),
    ("pexpireat", 1),
    ("persist", 2),
    ("ttl", 2),
    ("pttl", 1),
    ("expiretime", 1),
    ("keys", 1),
    ("scan", 2),
    ("randomkey", 3),
    ("object", 1),
    ("dbsize", 1),
    ("swapdb", 1),
    ("flushdb", 1),
];

fn key(rng: &mut Rng) -> String {
    format!("k{}", rng.below(40))
}

fn value(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => rng.below(1000).to_string(),
        1 => format!("-{}", rng.below(50)),
        2 => "x".repeat(rng.below(60) as usize),
        _ => format!("v{}", rng.below(100_000)),
    }
}

fn small_int(rng: &mut Rng, max: u64) -> String {
    rng.below(max).to_string()
}

/// The arguments of one command called `name` (without RANDOMKEY's
/// follow-up DEL, which depends on its reply).
fn build(rng: &mut Rng, name: &str, now_ms: u64, scan_cursor: &str) -> Vec<String> {
    let mut a = vec![name.to_uppercase()];
    match name {
        "set" => {
            a.extend([key(rng), value(rng)]);
            match rng.below(6) {
                0 => a.extend(["EX".into(), small_int(rng, 3)]),
                1 => a.extend(["PX".into(), (1 + rng.below(3000)).to_string()]),
                2 => a.push(rng.pick(&["NX", "XX", "KEEPTTL", "GET"]).into()),
                _ => {}
            }
        }
        "get" | "getdel" | "incr" | "decr" | "strlen" | "type" | "persist" | "ttl" | "pttl"
        | "expiretime" => a.push(key(rng)),
        "incrby" => a.extend([key(rng), format!("{}", rng.below(200) as i64 - 100)]),
        "append" | "getset" | "setnx" => a.extend([key(rng), value(rng)]),
        "setrange" => a.extend([key(rng), small_int(rng, 70), value(rng)]),
        "getrange" => a.extend([key(rng), small_int(rng, 10), small_int(rng, 40)]),
        "mset" | "msetnx" => {
            for _ in 0..1 + rng.below(3) {
                a.extend([key(rng), value(rng)]);
            }
        }
        "getex" => {
            a.push(key(rng));
            match rng.below(3) {
                0 => a.extend(["PX".into(), (1 + rng.below(3000)).to_string()]),
                1 => a.push("PERSIST".into()),
                _ => {}
            }
        }
        "setex" => a.extend([key(rng), (1 + rng.below(3)).to_string(), value(rng)]),
        "psetex" => a.extend([key(rng), (1 + rng.below(3000)).to_string(), value(rng)]),
        "del" | "unlink" | "exists" => {
            for _ in 0..1 + rng.below(3) {
                a.push(key(rng));
            }
        }
        "rename" | "renamenx" => a.extend([key(rng), key(rng)]),
        "copy" => {
            a.extend([key(rng), key(rng)]);
            if rng.chance(30) {
                a.extend(["DB".into(), small_int(rng, 3)]);
            }
            if rng.chance(30) {
                a.push("REPLACE".into());
            }
        }
        "expire" => {
            a.extend([key(rng), format!("{}", rng.below(5) as i64 - 1)]);
            if rng.chance(30) {
                a.push(rng.pick(&["NX", "XX", "GT", "LT"]).into());
            }
        }
        "pexpire" => a.extend([key(rng), format!("{}", rng.below(4000) as i64 - 500)]),
        "expireat" => a.extend([key(rng), ((now_ms / 1000) + rng.below(4)).to_string()]),
        "pexpireat" => a.extend([key(rng), (now_ms + rng.below(4000) - 1000).to_string()]),
        "keys" => a.push(rng.pick(&["*", "k1*", "k?", "k[0-3]*", "*[^0-9]*"]).into()),
        "scan" => {
            a.push(scan_cursor.into());
            a.extend(["COUNT".into(), (1 + rng.below(10)).to_string()]);
            if rng.chance(30) {
                a.extend(["MATCH".into(), "k*1".into()]);
            }
        }
        "object" => a.extend(["ENCODING".into(), key(rng)]),
        "swapdb" => a.extend([small_int(rng, 3), small_int(rng, 3)]),
        _ => {}
    }
    a
}

/// Two replicas applying the same sequence, each with its own expiry cycle
/// state (as every node has).
struct Pair {
    stores: [Store; 2],
    cycles: [ActiveExpire; 2],
    steps: usize,
    ok_replies: BTreeMap<String, usize>,
    expired_by_cycle: usize,
}

impl Pair {
    fn new() -> Pair {
        Pair {
            stores: [Store::default(), Store::default()],
            cycles: [ActiveExpire::default(), ActiveExpire::default()],
            steps: 0,
            ok_replies: BTreeMap::new(),
            expired_by_cycle: 0,
        }
    }

    /// Applies one command to both stores; their replies must agree.
    fn apply(&mut self, db: usize, a: &[String], ctx: &Ctx) -> Result<Reply, CmdError> {
        let args = to_args(a);
        let [s0, s1] = &mut self.stores;
        let r0 = s0.apply(db, &args, ctx);
        let r1 = s1.apply(db, &args, ctx);
        assert_eq!(r0, r1, "step {} {a:?} at {ctx:?}", self.steps);
        self.steps += 1;
        if r0.is_ok() {
            *self.ok_replies.entry(a[0].clone()).or_default() += 1;
        }
        r0
    }

    /// One active expiry cycle: each node picks on its own and must pick
    /// the same keys; the picks are then applied like a replicated write.
    fn expire_cycle(&mut self, ctx: &Ctx, max_visits: usize) {
        let picks0 = self.cycles[0].collect(&self.stores[0], ctx.now_ms, max_visits);
        let picks1 = self.cycles[1].collect(&self.stores[1], ctx.now_ms, max_visits);
        assert_eq!(
            picks0, picks1,
            "expiry picks diverged at step {}",
            self.steps
        );
        for (db, keys) in &picks0 {
            let n0 = self.stores[0].apply_expired(*db, keys, ctx);
            let n1 = self.stores[1].apply_expired(*db, keys, ctx);
            assert_eq!(n0, n1);
            self.expired_by_cycle += n0;
        }
    }

    fn assert_same_state(&self) {
        let [s0, s1] = &self.stores;
        assert_eq!(
            s0.dump(),
            s1.dump(),
            "state diverged at step {}",
            self.steps
        );
        assert_eq!(s0.stats, s1.stats);
    }
}

fn available_menu() -> Vec<(&'static str, u64)> {
    MENU.iter()
        .copied()
        .filter(|(name, _)| lookup(name.as_bytes()).is_some())
        .collect()
}

fn pick_command(rng: &mut Rng, menu: &[(&'static str, u64)]) -> &'static str {
    let total: u64 = menu.iter().map(|(_, w)| w).sum();
    let mut x = rng.below(total);
    for (name, w) in menu {
        if x < *w {
            return name;
        }
        x -= w;
    }
    menu[0].0
}

#[test]
fn replicas_applying_the_same_sequence_stay_identical() {
    let menu = available_menu();
    assert!(menu.iter().any(|(n, _)| *n == "set"), "SET must exist");
    let mut rng = Rng(0x6b76_6173_6972_2024);
    let mut pair = Pair::new();
    let mut now_ms: u64 = 1_700_000_000_000;
    let mut scan_cursor = "0".to_string();
    let mut max_keys = 0;
    for i in 0..20_000u64 {
        now_ms += rng.below(40);
        let ctx = Ctx {
            now_ms,
            seed: rng.next(),
        };
        let db = if rng.chance(80) {
            0
        } else {
            rng.below(3) as usize
        };
        let name = pick_command(&mut rng, &menu);
        // FLUSHDB is on the menu with a small weight; most draws are
        // rerolled so it stays rare enough for the keyspace to fill up.
        if name == "flushdb" && !rng.chance(5) {
            continue;
        }
        let a = build(&mut rng, name, now_ms, &scan_cursor);
        let reply = pair.apply(db, &a, &ctx);
        match (name, reply) {
            // RANDOMKEY drives a delete of whatever it picked.
            ("randomkey", Ok(Reply::Bulk(k))) if lookup(b"del").is_some() => {
                let del = vec!["DEL".to_string(), String::from_utf8_lossy(&k).into_owned()];
                assert_eq!(pair.apply(db, &del, &ctx), Ok(Reply::Int(1)));
            }
            ("scan", Ok(Reply::Array(parts))) => {
                if let Some(Reply::Bulk(next)) = parts.first() {
                    scan_cursor = String::from_utf8_lossy(next).into_owned();
                }
            }
            _ => {}
        }
        if i % 25 == 0 {
            pair.expire_cycle(&ctx, 1 + rng.below(200) as usize);
        }
        if i % 1000 == 0 {
            pair.assert_same_state();
        }
        max_keys = max_keys.max(pair.stores[0].db(0).len());
    }
    pair.assert_same_state();
    // The run must have exercised something: keys accumulated, expiry
    // cycles removed some, and the key commands succeeded.
    assert!(max_keys >= 20, "keyspace never filled: {max_keys}");
    assert!(
        pair.expired_by_cycle > 0,
        "no key expired through the cycle"
    );
    for name in [
        "SET",
        "DEL",
        "EXPIRE",
        "RENAME",
        "COPY",
        "RANDOMKEY",
        "SWAPDB",
    ] {
        assert!(
            pair.ok_replies.get(name).copied().unwrap_or(0) > 0,
            "{name} never succeeded: {:?}",
            pair.ok_replies
        );
    }
}

fn set_px(store: &mut Store, db: usize, key: &str, px: Option<u64>, ctx: &Ctx) {
    let mut a = vec!["SET".to_string(), key.to_string(), "v".to_string()];
    if let Some(px) = px {
        a.extend(["PX".to_string(), px.to_string()]);
    }
    assert_eq!(store.apply(db, &to_args(&a), ctx), Ok(Reply::ok()));
}

/// Counts (live, expired) keys of a database at `now_ms`.
fn census(store: &Store, db: usize, now_ms: u64) -> (usize, usize) {
    let d = store.db(db);
    let expired = d.iter().filter(|e| e.is_expired(now_ms)).count();
    (d.len() - expired, expired)
}

#[test]
fn active_expiry_removes_expired_keys_and_never_live_ones() {
    let t0: u64 = 1_000_000;
    let ctx0 = Ctx {
        now_ms: t0,
        seed: 1,
    };
    let mut store = Store::default();
    // db 0: a mix of persistent keys, keys expiring over the next 2 s and
    // keys expiring far in the future; db 2: volatile keys only.
    let mut live_forever = Vec::new();
    for i in 0..2000u64 {
        let key = format!("key:{i}");
        let px = match i % 4 {
            0 => None,
            3 => Some(3_600_000),
            _ => Some(1 + (i * 37) % 2000),
        };
        set_px(&mut store, 0, &key, px, &ctx0);
        if px.is_none_or(|ms| ms > 10_000) {
            live_forever.push(key);
        }
    }
    for i in 0..300u64 {
        set_px(&mut store, 2, &format!("v:{i}"), Some(1 + i), &ctx0);
    }
    let mut cycle = ActiveExpire::default();
    let mut now = t0;
    let mut removed = 0;
    for round in 0.. {
        assert!(
            round < 2000,
            "expired keys are still there after {round} cycles"
        );
        now += 50;
        let ctx = Ctx {
            now_ms: now,
            seed: round,
        };
        let picks = cycle.collect(&store, now, 100);
        for (db, keys) in &picks {
            for k in keys {
                let e = store.db(*db).get(k).expect("picked keys exist");
                assert!(e.is_expired(now), "picked a live key {k:?}");
            }
            removed += store.apply_expired(*db, keys, &ctx);
        }
        for k in &live_forever {
            assert!(store.db(0).get(k.as_bytes()).is_some(), "{k} was removed");
        }
        let expired = census(&store, 0, now).1 + census(&store, 2, now).1;
        if now > t0 + 2_000 && expired == 0 {
            break;
        }
    }
    assert_eq!(census(&store, 0, now), (live_forever.len(), 0));
    assert!(store.db(2).is_empty());
    assert_eq!(removed, 2000 - live_forever.len() + 300);
    assert_eq!(store.stats.expired_keys, removed as u64);
}

#[test]
fn an_expiry_pick_does_not_remove_a_key_rewritten_since() {
    let t0: u64 = 1_000_000;
    let mut store = Store::default();
    let ctx0 = Ctx {
        now_ms: t0,
        seed: 1,
    };
    for i in 0..10 {
        set_px(&mut store, 0, &format!("k{i}"), Some(10), &ctx0);
    }
    let later = Ctx {
        now_ms: t0 + 100,
        seed: 2,
    };
    let picks = ActiveExpire::default().collect(&store, later.now_ms, 1000);
    assert_eq!(picks.len(), 1);
    // Between the pick and its application, k3 is written again.
    set_px(&mut store, 0, "k3", None, &later);
    let (db, keys) = &picks[0];
    assert_eq!(keys.len(), 10);
    assert_eq!(store.apply_expired(*db, keys, &later), 9);
    assert_eq!(store.db(0).len(), 1);
    assert!(store.db(0).get(b"k3").is_some());
}
