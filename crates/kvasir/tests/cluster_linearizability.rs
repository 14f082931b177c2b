//! Linearizability under crashes: five clients run random SET / GET / INCR
//! on four keys (two hash tags, so two shards) while the leader of one of
//! those shards is killed with -9 and restarted, three times. Every
//! operation's invocation, completion and outcome is recorded (a write with
//! an unknown outcome is indeterminate, a failed read is dropped) and the
//! history is checked for a linearization of a per-key register.

#[path = "common/cluster.rs"]
mod cluster;
#[path = "common/linearizability.rs"]
mod linearizability;

use cluster::{key_slot, Cluster, Outcome};
use linearizability::{History, OpKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: usize = 5;
const KEYS: [&str; 4] = ["{a}x", "{a}y", "{b}x", "{b}y"];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[derive(Default)]
struct Stats {
    ok: AtomicU64,
    unknown_writes: AtomicU64,
    failed_reads: AtomicU64,
}

#[test]
fn random_ops_with_leader_crashes_are_linearizable() {
    random_ops_with_leader_crashes(&[]);
}

/// The same under `--read-mode lease` (reads served from the leader's
/// state while its lease lasts, no quorum round): a crashed leader's lease
/// must not outlive it.
#[test]
fn random_ops_with_leader_crashes_are_linearizable_with_lease_reads() {
    random_ops_with_leader_crashes(&["--read-mode", "lease"]);
}

fn random_ops_with_leader_crashes(extra: &[&str]) {
    let t0 = Instant::now();
    let mut c = Cluster::start(extra);
    println!("cluster ready in {:?}", t0.elapsed());

    let history = History::new();
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(Stats::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (history, stop, stats) = (history.clone(), stop.clone(), stats.clone());
            let mut router = cluster::Router::new(
                c.nodes.iter().map(|n| n.port).collect(),
                Duration::from_secs(2),
            );
            std::thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((client as u64 + 1) * 0x1234_5678));
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = KEYS[(rng.next() % KEYS.len() as u64) as usize];
                    let slot = key_slot(key.as_bytes());
                    let budget = Duration::from_secs(4);
                    match rng.next() % 20 {
                        0..=7 => {
                            let inv = history.invoke(client, key);
                            let out = router.run(redis::cmd("GET").arg(key), slot, budget);
                            match out {
                                Outcome::Reply(Ok(v)) => {
                                    let v: Option<String> =
                                        redis::from_redis_value(v).expect("GET reply");
                                    history.complete(inv, OpKind::Get(v));
                                    stats.ok.fetch_add(1, Ordering::Relaxed);
                                }
                                _ => {
                                    history.fail(inv, OpKind::Get(None));
                                    stats.failed_reads.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        8..=14 => {
                            seq += 1;
                            let v = (client as u64 * 1_000_000 + seq * 10).to_string();
                            let inv = history.invoke(client, key);
                            let out = router.run(redis::cmd("SET").arg(key).arg(&v), slot, budget);
                            match out {
                                Outcome::Reply(Ok(_)) => {
                                    history.complete(inv, OpKind::Set(v));
                                    stats.ok.fetch_add(1, Ordering::Relaxed);
                                }
                                _ => {
                                    history.fail(inv, OpKind::Set(v));
                                    stats.unknown_writes.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        _ => {
                            let inv = history.invoke(client, key);
                            let out = router.run(redis::cmd("INCR").arg(key), slot, budget);
                            match out {
                                Outcome::Reply(Ok(redis::Value::Int(n))) => {
                                    history.complete(inv, OpKind::Incr(n));
                                    stats.ok.fetch_add(1, Ordering::Relaxed);
                                }
                                _ => {
                                    history.fail(inv, OpKind::IncrUnknown);
                                    stats.unknown_writes.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                    }
                    std::thread::sleep(Duration::from_millis(rng.next() % 8));
                }
            })
        })
        .collect();

    // Chaos: kill -9 the leader of {a}'s shard, restart it, three times.
    let slot_a = key_slot(b"{a}");
    std::thread::sleep(Duration::from_millis(1500));
    for round in 1..=3 {
        let leader = c.wait_leader_of_slot(slot_a, Duration::from_secs(30));
        let ok_before = stats.ok.load(Ordering::Relaxed);
        c.kill(leader);
        println!(
            "round {round}: killed node {leader}, leader of slot {slot_a} ({:?})",
            t0.elapsed()
        );
        std::thread::sleep(Duration::from_millis(2500));
        c.restart(leader);
        c.wait_ready(Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(1500));
        let ok_after = stats.ok.load(Ordering::Relaxed);
        println!(
            "round {round}: node {leader} back; {} ops succeeded meanwhile",
            ok_after - ok_before
        );
        assert!(
            ok_after > ok_before,
            "no operation succeeded during round {round}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for h in clients {
        h.join().expect("client thread");
    }
    println!(
        "history: {} ops ({} ok, {} writes indeterminate, {} reads dropped) in {:?}",
        history.len(),
        stats.ok.load(Ordering::Relaxed),
        stats.unknown_writes.load(Ordering::Relaxed),
        stats.failed_reads.load(Ordering::Relaxed),
        t0.elapsed()
    );
    assert!(stats.ok.load(Ordering::Relaxed) > 200, "too few operations");
    let t = Instant::now();
    let result = history.check();
    println!("checked in {:?}", t.elapsed());
    if let Err(v) = result {
        panic!("history is not linearizable (key {}):\n{v}", v.key());
    }
    c.wait_digests_equal(Duration::from_secs(90));
    println!("total {:?}", t0.elapsed());
}
