//! Snapshot catch-up: with `--snapshot-entries 200`, a node that was down
//! while thousands of writes went in (so the leaders snapshotted and
//! compacted their logs past what it has) comes back, receives snapshots,
//! and ends with exactly the same content as the other replicas.

#[path = "common/cluster.rs"]
mod cluster;

use cluster::{Cluster, NODES, SHARDS};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const KEYS: usize = 8000;
const WRITERS: usize = 4;

/// Raft groups named (`group=N`) on the log lines that contain `what`.
fn groups_logging(log: &str, what: &str) -> BTreeSet<u64> {
    log.lines()
        .filter(|l| l.contains(what))
        .filter_map(|l| {
            l.split("group=")
                .nth(1)?
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn restarted_node_catches_up_through_snapshots() {
    let t0 = Instant::now();
    let mut c = Cluster::start(&["--snapshot-entries", "200"]);
    println!("cluster ready in {:?}", t0.elapsed());

    let down = NODES; // node 3
    c.kill(down);
    let t = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let mut router = c.router();
            // The killed node refuses connections; the router skips it.
            std::thread::spawn(move || {
                for i in (w..KEYS).step_by(WRITERS) {
                    let k = format!("snap:{i}");
                    let ok: String = router.retry(&k, &["SET", &k, &format!("value-{i}")]);
                    assert_eq!(ok, "OK");
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    println!("{KEYS} writes with node {down} down in {:?}", t.elapsed());
    let taken: BTreeSet<u64> = (1..NODES)
        .flat_map(|id| groups_logging(&c.log(id), "snapshot taken"))
        .collect();
    println!("groups that took snapshots while node {down} was down: {taken:?}");
    assert!(
        taken.len() as u64 >= SHARDS / 2,
        "expected most shards to snapshot past 200 entries, got {taken:?}"
    );

    let t = Instant::now();
    c.restart(down);
    c.wait_ready(Duration::from_secs(60));
    c.wait_digests_equal(Duration::from_secs(120));
    println!("node {down} caught up in {:?}", t.elapsed());
    let keys: u64 = (1..=SHARDS)
        .map(|s| c.shard_digest(down, s).expect("digest").keys)
        .sum();
    assert_eq!(keys, KEYS as u64, "keys on the restarted node");
    let installed = groups_logging(&c.log(down), "installed snapshot");
    println!("groups that installed a snapshot on node {down}: {installed:?}");
    assert!(
        !installed.is_empty(),
        "node {down} caught up without installing any snapshot"
    );
    // A sample of values through the cluster.
    let mut router = c.router();
    for i in (0..KEYS).step_by(97) {
        let k = format!("snap:{i}");
        let v: String = router.retry(&k, &["GET", &k]);
        assert_eq!(v, format!("value-{i}"));
    }
    println!("total {:?}", t0.elapsed());
}
