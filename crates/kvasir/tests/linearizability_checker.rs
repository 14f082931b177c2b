//! Unit tests of the linearizability checker used by the end-to-end tests.

#[path = "common/linearizability.rs"]
mod linearizability;

use linearizability::{check, check_with_budget, History, Op, OpKind, Violation};
use std::collections::HashMap;
use std::time::{Duration, Instant};

fn op(client: usize, key: &str, kind: OpKind, call: u64, ret: Option<u64>) -> Op {
    Op {
        client,
        key: key.to_string(),
        kind,
        call,
        ret,
    }
}

fn set(c: usize, k: &str, v: &str, call: u64, ret: u64) -> Op {
    op(c, k, OpKind::Set(v.to_string()), call, Some(ret))
}

fn get(c: usize, k: &str, v: Option<&str>, call: u64, ret: u64) -> Op {
    op(c, k, OpKind::Get(v.map(str::to_string)), call, Some(ret))
}

fn incr(c: usize, k: &str, n: i64, call: u64, ret: u64) -> Op {
    op(c, k, OpKind::Incr(n), call, Some(ret))
}

fn set_unknown(c: usize, k: &str, v: &str, call: u64) -> Op {
    op(c, k, OpKind::SetUnknown(v.to_string()), call, None)
}

fn incr_unknown(c: usize, k: &str, call: u64) -> Op {
    op(c, k, OpKind::IncrUnknown, call, None)
}

fn assert_violation(history: &[Op], key: &str) -> Violation {
    match check(history) {
        Ok(()) => panic!("expected a violation on {key:?}, history passed: {history:#?}"),
        Err(v) => {
            assert!(!v.is_budget_exceeded(), "budget exceeded: {v}");
            assert_eq!(v.key(), key, "{v}");
            v
        }
    }
}

#[test]
fn empty_history_passes() {
    check(&[]).unwrap();
}

#[test]
fn sequential_history_passes() {
    let h = vec![
        get(0, "a", None, 0, 1),
        set(0, "a", "1", 2, 3),
        get(1, "a", Some("1"), 4, 5),
        incr(1, "a", 2, 6, 7),
        incr(0, "a", 3, 8, 9),
        get(0, "a", Some("3"), 10, 11),
        set(1, "b", "x", 12, 13),
        get(0, "b", Some("x"), 14, 15),
        incr(0, "c", 1, 16, 17),
        set(1, "a", "hello", 18, 19),
        get(1, "a", Some("hello"), 20, 21),
    ];
    check(&h).unwrap();
}

#[test]
fn concurrent_orderable_ops_pass() {
    // The read of nil overlaps the SET, so it can be ordered before it.
    let h = vec![
        set(0, "a", "1", 0, 10),
        get(1, "a", None, 1, 2),
        get(2, "a", Some("1"), 5, 6),
        get(1, "a", Some("1"), 11, 12),
    ];
    check(&h).unwrap();

    // Two overlapping INCRs, the one that returned first got the larger value.
    let h = vec![
        incr(0, "n", 2, 0, 5),
        incr(1, "n", 1, 1, 10),
        get(2, "n", Some("2"), 11, 12),
    ];
    check(&h).unwrap();

    // Overlapping SETs: later reads agree on a single winner.
    let h = vec![
        set(0, "k", "x", 0, 10),
        set(1, "k", "y", 0, 10),
        get(2, "k", Some("x"), 2, 3),
        get(2, "k", Some("y"), 11, 12),
        get(0, "k", Some("y"), 13, 14),
    ];
    check(&h).unwrap();
}

#[test]
fn stale_read_after_completed_write_fails() {
    let h = vec![
        set(0, "a", "1", 0, 1),
        set(0, "a", "2", 2, 3),
        get(1, "a", Some("1"), 4, 5),
    ];
    let v = assert_violation(&h, "a");
    let text = v.to_string();
    assert!(text.contains("NOT linearizable"), "{text}");
    assert!(text.contains("GET \"a\" -> \"1\""), "{text}");
    match v {
        Violation::NotLinearizable { unplaced, .. } => {
            assert_eq!(unplaced[0].kind, OpKind::Get(Some("1".into())))
        }
        other => panic!("{other}"),
    }

    // Read of nil after the SET completed.
    let h = vec![set(0, "a", "1", 0, 1), get(1, "a", None, 2, 3)];
    assert_violation(&h, "a");

    // Values flip-flop between two reads after both writes completed.
    let h = vec![
        set(0, "a", "1", 0, 10),
        set(1, "a", "2", 0, 10),
        get(2, "a", Some("1"), 11, 12),
        get(2, "a", Some("2"), 13, 14),
    ];
    assert_violation(&h, "a");
}

#[test]
fn lost_increment_fails() {
    let h = vec![incr(0, "n", 1, 0, 1), incr(1, "n", 1, 2, 3)];
    let v = assert_violation(&h, "n");
    assert!(v.to_string().contains("INCR \"n\" -> 1"), "{v}");

    // Even when concurrent, two INCRs cannot both return 1.
    let h = vec![incr(0, "n", 1, 0, 10), incr(1, "n", 1, 1, 11)];
    assert_violation(&h, "n");

    // A skipped value without any other writer.
    let h = vec![incr(0, "n", 1, 0, 1), incr(0, "n", 3, 2, 3)];
    assert_violation(&h, "n");
}

#[test]
fn indeterminate_writes_accepted_both_ways() {
    let base = || vec![set(0, "a", "1", 0, 1), set_unknown(1, "a", "2", 2)];
    // Took effect.
    let mut h = base();
    h.push(get(0, "a", Some("2"), 10, 11));
    check(&h).unwrap();
    // Never took effect.
    let mut h = base();
    h.push(get(0, "a", Some("1"), 10, 11));
    check(&h).unwrap();
    // Took effect between two reads, long after the client gave up.
    let mut h = base();
    h.push(get(0, "a", Some("1"), 10, 11));
    h.push(get(0, "a", Some("2"), 20, 21));
    check(&h).unwrap();
    // But it cannot be undone.
    let mut h = base();
    h.push(get(0, "a", Some("2"), 10, 11));
    h.push(get(0, "a", Some("1"), 20, 21));
    assert_violation(&h, "a");
    // Nor take effect before it was called.
    let h = vec![get(0, "a", Some("2"), 0, 1), set_unknown(1, "a", "2", 5)];
    assert_violation(&h, "a");

    // `Set` / `Incr` with ret None are indeterminate too.
    let h = vec![
        op(0, "a", OpKind::Set("7".into()), 0, None),
        get(1, "a", None, 1, 2),
        get(1, "a", Some("7"), 3, 4),
    ];
    check(&h).unwrap();

    // INCR with unknown outcome: the next INCR may see it or not.
    for (n, ok) in [(2, true), (3, true), (4, false)] {
        let h = vec![
            incr(0, "n", 1, 0, 1),
            incr_unknown(1, "n", 2),
            incr(0, "n", n, 10, 11),
        ];
        assert_eq!(check(&h).is_ok(), ok, "INCR -> {n}");
    }
    for (n, ok) in [(2, true), (3, true), (4, true), (5, false)] {
        let h = vec![
            incr(0, "n", 1, 0, 1),
            incr_unknown(1, "n", 2),
            op(2, "n", OpKind::Incr(99), 3, None),
            incr(0, "n", n, 10, 11),
        ];
        assert_eq!(check(&h).is_ok(), ok, "INCR -> {n}");
    }

    // A failed read is ignored whatever it recorded.
    let h = vec![
        set(0, "a", "1", 0, 1),
        op(1, "a", OpKind::Get(Some("garbage".into())), 2, None),
    ];
    check(&h).unwrap();
}

#[test]
fn read_of_value_never_written_fails() {
    let h = vec![get(0, "a", Some("zzz"), 0, 1)];
    assert_violation(&h, "a");

    let h = vec![
        set(0, "a", "1", 0, 10),
        set(1, "a", "2", 0, 10),
        set_unknown(3, "a", "3", 0),
        get(2, "a", Some("4"), 5, 6),
    ];
    let v = assert_violation(&h, "a");
    assert!(v.to_string().contains("observed \"4\""), "{v}");
}

#[test]
fn violation_names_the_right_key() {
    let h = vec![
        set(0, "good", "1", 0, 1),
        get(1, "good", Some("1"), 2, 3),
        set(0, "bad", "1", 0, 1),
        get(1, "bad", Some("2"), 2, 3),
        incr(2, "alsogood", 1, 0, 3),
    ];
    assert_violation(&h, "bad");
}

#[test]
fn budget_exceeded_is_an_error() {
    let h = gen_history(7, 2_000, 1, 8, 3);
    let err = check_with_budget(&h, 100).unwrap_err();
    assert!(err.is_budget_exceeded(), "{err}");
    assert!(err.to_string().contains("budget"), "{err}");
    check(&h).unwrap();
}

#[test]
fn history_recorder_from_threads() {
    let history = History::new();
    let mut threads = Vec::new();
    for client in 0..4 {
        let h = history.clone();
        threads.push(std::thread::spawn(move || {
            for _ in 0..50 {
                let inv = h.invoke(client, "shared");
                h.complete(inv, OpKind::IncrUnknown);
                let inv = h.invoke(client, "shared");
                h.fail(inv, OpKind::Get(Some("x".into()))); // dropped
                let inv = h.invoke(client, format!("own{client}"));
                h.fail(inv, OpKind::Set("v".into()));
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(history.len(), 400);
    let ops = history.ops();
    assert!(ops.iter().all(|o| o.ret.is_none_or(|r| r >= o.call)));
    assert!(ops
        .iter()
        .filter(|o| o.key.starts_with("own"))
        .all(|o| o.kind == OpKind::SetUnknown("v".into()) && o.ret.is_none()));
    history.check().unwrap();
}

// ---------------------------------------------------------------------------
// Randomized histories from a simulated linearizable register
// ---------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Each client issues sequential ops with random gaps and durations; every op
/// takes effect atomically at a random point inside its interval (or, for an
/// indeterminate write, possibly never). Results come from replaying the ops
/// in linearization-point order, so the history is linearizable.
fn gen_history(
    seed: u64,
    n_ops: usize,
    n_keys: usize,
    n_clients: usize,
    indeterminate_percent: u64,
) -> Vec<Op> {
    let mut rng = Rng(seed);
    struct Planned {
        op: Op,
        lp: u64,
        which: u64,
        fate: u8, // 0 = ok, 1 = indeterminate and applied, 2 = indeterminate, never applied
    }
    let mut planned = Vec::with_capacity(n_ops);
    let mut clock = vec![0u64; n_clients];
    for i in 0..n_ops {
        let client = i % n_clients;
        let call = clock[client] + rng.below(50);
        let dur = 1 + rng.below(300);
        let lp = call + rng.below(dur + 1);
        let ret = call + dur;
        clock[client] = ret + 1;
        let fate = if rng.chance(indeterminate_percent) {
            1 + rng.below(2) as u8
        } else {
            0
        };
        planned.push(Planned {
            op: op(
                client,
                &format!("k{}", rng.below(n_keys as u64)),
                OpKind::IncrUnknown,
                call,
                Some(ret),
            ),
            lp,
            which: rng.below(100),
            fate,
        });
    }
    planned.sort_by_key(|p| p.lp);
    let mut regs: HashMap<String, Option<String>> = HashMap::new();
    let mut out = Vec::with_capacity(n_ops);
    for mut p in planned {
        let reg = regs.entry(p.op.key.clone()).or_default();
        let int = match reg {
            None => Some(0),
            Some(s) => s.parse::<i64>().ok(),
        };
        let apply = p.fate != 2;
        p.op.kind = if p.which < 35 {
            OpKind::Get(reg.clone())
        } else if p.which < 70 && int.is_some() {
            let n = int.unwrap() + 1;
            if apply {
                *reg = Some(n.to_string());
            }
            OpKind::Incr(n)
        } else {
            let v = if p.which % 10 == 0 {
                format!("s{}", rng.below(5))
            } else {
                rng.below(20).to_string()
            };
            if apply {
                *reg = Some(v.clone());
            }
            OpKind::Set(v)
        };
        if p.fate != 0 {
            if matches!(p.op.kind, OpKind::Get(_)) {
                p.op.ret = None; // failed read: dropped by the checker
            } else {
                // Either form of an indeterminate write.
                if rng.chance(50) {
                    p.op.kind = match p.op.kind {
                        OpKind::Set(v) => OpKind::SetUnknown(v),
                        _ => OpKind::IncrUnknown,
                    };
                }
                p.op.ret = None;
            }
        }
        out.push(p.op);
    }
    // Recorded in completion order, as a real recorder would.
    out.sort_by_key(|o| o.ret.unwrap_or(u64::MAX));
    out
}

#[test]
fn random_linearizable_histories_pass() {
    for seed in 0..300 {
        let clients = 2 + (seed as usize % 9);
        let keys = 1 + (seed as usize % 3);
        let h = gen_history(seed, 200, keys, clients, (seed % 3) * 3);
        if let Err(v) = check(&h) {
            panic!("seed {seed}: {v}");
        }
    }
}

#[test]
fn random_history_with_one_wrong_read_fails() {
    let mut rng = Rng(12345);
    for seed in 0..300 {
        let clients = 2 + (seed as usize % 9);
        let keys = 1 + (seed as usize % 3);
        let mut h = gen_history(seed, 200, keys, clients, (seed % 3) * 3);
        let reads: Vec<usize> = (0..h.len())
            .filter(|&i| matches!(h[i].kind, OpKind::Get(_)) && h[i].ret.is_some())
            .collect();
        let i = reads[rng.below(reads.len() as u64) as usize];
        h[i].kind = OpKind::Get(Some("never-written".into()));
        let key = h[i].key.clone();
        let v = assert_violation(&h, &key);
        assert!(v.to_string().contains("never-written"), "seed {seed}: {v}");
    }
}

#[test]
fn random_history_with_one_stale_read_fails() {
    // Sequential single-client history (no concurrency): any read changed to
    // a different value is a violation.
    let mut rng = Rng(99);
    for seed in 0..100 {
        let mut h = gen_history(seed, 100, 1, 1, 0);
        let reads: Vec<usize> = (0..h.len())
            .filter(|&i| matches!(&h[i].kind, OpKind::Get(Some(v)) if v.parse::<i64>().is_ok()))
            .collect();
        if reads.is_empty() {
            continue;
        }
        let i = reads[rng.below(reads.len() as u64) as usize];
        if let OpKind::Get(Some(v)) = &h[i].kind {
            let n: i64 = v.parse().unwrap();
            h[i].kind = OpKind::Get(Some((n + 1).to_string()));
        }
        let key = h[i].key.clone();
        assert_violation(&h, &key);
    }
}

#[test]
fn large_history_is_fast() {
    // 5,000 ops over 5 keys; `percent` of the ops are indeterminate.
    for (seed, clients, percent) in [(1, 5, 3), (2, 10, 3), (3, 10, 1)] {
        let h = gen_history(seed, 5_000, 5, clients, percent);
        let start = Instant::now();
        check(&h).unwrap();
        let took = start.elapsed();
        eprintln!("{clients} clients, {percent}% indeterminate: valid history checked in {took:?}");
        assert!(took < Duration::from_secs(2), "took {took:?}");

        // The same with a wrong read near the end, so that the whole
        // history has to be searched before giving up.
        if (clients, percent) == (10, 3) {
            continue; // many colliding indeterminate INCR/SETs: slow to refute in debug builds
        }
        let mut bad = h.clone();
        let i = (0..bad.len())
            .rev()
            .find(|&i| matches!(bad[i].kind, OpKind::Get(_)) && bad[i].ret.is_some())
            .unwrap();
        bad[i].kind = OpKind::Get(Some("bogus".into()));
        let start = Instant::now();
        let v = check(&bad).unwrap_err();
        let took = start.elapsed();
        eprintln!("{clients} clients, {percent}% indeterminate: violation found in {took:?}");
        assert!(!v.is_budget_exceeded(), "{v}");
        assert!(v.to_string().contains("bogus"), "{v}");
        assert!(took < Duration::from_secs(3), "took {took:?}");
    }
}

// ---------------------------------------------------------------------------
// Cross-check against a brute-force search on small random histories
// ---------------------------------------------------------------------------

/// Exhaustive search over all orders (no memoization, no pruning): every
/// acknowledged op must be placed; indeterminate writes may be placed or not.
fn brute_force(ops: &[Op]) -> bool {
    fn int(v: &Option<String>) -> Option<i64> {
        match v {
            None => Some(0),
            Some(s) => s.parse::<i64>().ok().filter(|n| n.to_string() == *s),
        }
    }
    fn apply(state: &Option<String>, op: &Op) -> Option<Option<String>> {
        match &op.kind {
            OpKind::Set(v) | OpKind::SetUnknown(v) => Some(Some(v.clone())),
            OpKind::Get(v) => (v == state).then(|| state.clone()),
            OpKind::Incr(_) | OpKind::IncrUnknown if op.is_indeterminate_write() => {
                Some(Some((int(state)? + 1).to_string()))
            }
            OpKind::Incr(n) => (int(state)? + 1 == *n).then(|| Some(n.to_string())),
            OpKind::IncrUnknown => unreachable!(),
        }
    }
    fn rec(ops: &[&Op], used: &mut [bool], state: Option<String>) -> bool {
        let optional = |o: &Op| o.is_indeterminate_write();
        if (0..ops.len()).all(|i| used[i] || optional(ops[i])) {
            return true;
        }
        for i in 0..ops.len() {
            if used[i] {
                continue;
            }
            // Every unplaced acknowledged op that returned before this call
            // must come first.
            let blocked = (0..ops.len())
                .any(|j| !used[j] && !optional(ops[j]) && ops[j].ret.unwrap() < ops[i].call);
            if blocked {
                continue;
            }
            if let Some(next) = apply(&state, ops[i]) {
                used[i] = true;
                if rec(ops, used, next) {
                    return true;
                }
                used[i] = false;
            }
        }
        false
    }
    let ops: Vec<&Op> = ops.iter().filter(|o| !o.is_ignored()).collect();
    rec(&ops, &mut vec![false; ops.len()], None)
}

fn random_small_history(rng: &mut Rng) -> Vec<Op> {
    let n = 1 + rng.below(7) as usize;
    let value = |rng: &mut Rng| match rng.below(5) {
        4 => "a".to_string(),
        v => v.to_string(),
    };
    (0..n)
        .map(|i| {
            let call = rng.below(20);
            let ret = call + rng.below(10);
            let kind = match rng.below(7) {
                0 | 1 => OpKind::Set(value(rng)),
                2 | 3 => OpKind::Get(if rng.chance(20) {
                    None
                } else {
                    Some(value(rng))
                }),
                4 | 5 => OpKind::Incr(1 + rng.below(4) as i64),
                _ if rng.chance(50) => OpKind::IncrUnknown,
                _ => OpKind::SetUnknown(value(rng)),
            };
            let ret = match kind {
                OpKind::IncrUnknown | OpKind::SetUnknown(_) => None,
                _ if rng.chance(10) => None,
                _ => Some(ret),
            };
            op(i, "k", kind, call, ret)
        })
        .collect()
}

#[test]
fn agrees_with_brute_force_on_small_histories() {
    let mut rng = Rng(2024);
    let (mut passed, mut failed) = (0, 0);
    for case in 0..20_000 {
        let h = if case % 2 == 0 {
            random_small_history(&mut rng)
        } else {
            // Valid histories, some with a mutated op.
            let mut h = gen_history(case, 1 + rng.below(8) as usize, 1, 3, 30);
            if rng.chance(50) {
                let i = rng.below(h.len() as u64) as usize;
                h[i].kind = match &h[i].kind {
                    OpKind::Get(_) => OpKind::Get(Some(rng.below(4).to_string())),
                    OpKind::Incr(n) => OpKind::Incr(n + 1),
                    other => other.clone(),
                };
            }
            h
        };
        let expected = brute_force(&h);
        let got = check(&h);
        assert_eq!(got.is_ok(), expected, "case {case}: {got:?}\n{h:#?}");
        if expected {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    assert!(
        passed > 3_000 && failed > 3_000,
        "{passed} passed, {failed} failed"
    );
}
