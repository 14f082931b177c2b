//! Durability of a whole cluster: with `--wal fsync`, every acknowledged
//! write survives kill -9 of all three nodes at once and a restart from the
//! same folders, and the replicas still agree afterwards.

#[path = "common/cluster.rs"]
mod cluster;

use cluster::{key_slot, Cluster, NODES};
use std::time::{Duration, Instant};

const KEYS: usize = 1500;

#[test]
fn full_cluster_kill_and_restart_keeps_acknowledged_writes() {
    let t0 = Instant::now();
    let mut c = Cluster::start(&["--wal", "fsync"]);
    println!("cluster ready in {:?}", t0.elapsed());

    let mut router = c.router();
    let t = Instant::now();
    for i in 0..KEYS {
        let k = format!("durable:{i}");
        let ok: String = router.must(&k, &["SET", &k, &format!("v{i}")]);
        assert_eq!(ok, "OK");
    }
    // A few counters, incremented many times, and a hash-tagged transaction.
    for _ in 0..50 {
        for ctr in ["ctr:a", "ctr:b", "{t}ctr"] {
            let _: i64 = router.must(ctr, &["INCR", ctr]);
        }
    }
    let ok: String = router.must("{t}x", &["MSET", "{t}x", "1", "{t}y", "2"]);
    assert_eq!(ok, "OK");
    let deleted: i64 = router.must("durable:0", &["DEL", "durable:0"]);
    assert_eq!(deleted, 1);
    println!("{KEYS} acknowledged writes in {:?}", t.elapsed());

    // Everything goes down at once, without any chance to flush.
    for id in 1..=NODES {
        c.kill(id);
    }
    let t = Instant::now();
    for id in 1..=NODES {
        c.restart(id);
    }
    c.wait_ready(Duration::from_secs(90));
    println!("restarted and ready in {:?}", t.elapsed());

    let mut router = c.router();
    for i in 1..KEYS {
        let k = format!("durable:{i}");
        let v: Option<String> = router.must(&k, &["GET", &k]);
        assert_eq!(
            v,
            Some(format!("v{i}")),
            "{k} (slot {})",
            key_slot(k.as_bytes())
        );
    }
    let v: Option<String> = router.must("durable:0", &["GET", "durable:0"]);
    assert_eq!(v, None, "a deleted key came back");
    for ctr in ["ctr:a", "ctr:b", "{t}ctr"] {
        let n: i64 = router.must(ctr, &["GET", ctr]);
        assert_eq!(n, 50, "{ctr}");
    }
    let v: Vec<String> = router.must("{t}x", &["MGET", "{t}x", "{t}y"]);
    assert_eq!(v, vec!["1", "2"]);
    c.wait_digests_equal(Duration::from_secs(90));
    println!("total {:?}", t0.elapsed());
}
