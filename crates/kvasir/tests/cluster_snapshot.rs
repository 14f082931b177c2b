//! Snapshot catch-up: with `--snapshot-entries 200`, a node that was down
//! while thousands of writes went in (so the leaders snapshotted and
//! compacted their logs past what it has) comes back, receives snapshots,
//! and ends with exactly the same content as the other replicas. One
//! shard holds a few MiB of large values, so its image is streamed in more
//! than one chunk.

#[path = "common/cluster.rs"]
mod cluster;

use cluster::{Cluster, NODES, SHARDS};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const KEYS: usize = 8000;
const WRITERS: usize = 4;
/// Large values in one shard (hash tag `{big}`): together more than one
/// snapshot chunk (4 MiB).
const BIG_VALUES: usize = 6;
const BIG_VALUE_BYTES: usize = 1 << 20;
/// Sequential small writes to the same shard after the large values, so
/// it passes `--snapshot-entries 200` and compacts them away.
const BIG_SHARD_WRITES: usize = 300;
/// The transport's snapshot chunk size.
const SNAPSHOT_CHUNK: usize = 4 << 20;

/// (group, bytes) of the log lines that contain `what` and a `bytes=N`.
fn sizes_logging(log: &str, what: &str) -> Vec<(u64, usize)> {
    let field = |l: &str, name: &str| -> Option<u64> {
        l.split(name)
            .nth(1)?
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    log.lines()
        .filter(|l| l.contains(what))
        .filter_map(|l| Some((field(l, "group=")?, field(l, "bytes=")? as usize)))
        .collect()
}

fn big_value(i: usize) -> String {
    (0..BIG_VALUE_BYTES)
        .map(|j| (b'a' + ((i * 131 + j * 7 + j / 26) % 26) as u8) as char)
        .collect()
}

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
    // Meanwhile, one shard gets an image larger than a snapshot chunk.
    let mut router = c.router();
    for i in 0..BIG_VALUES {
        let k = format!("{{big}}:{i}");
        let ok: String = router.retry(&k, &["SET", &k, &big_value(i)]);
        assert_eq!(ok, "OK");
    }
    for i in 0..BIG_SHARD_WRITES {
        let k = format!("{{big}}:small:{i}");
        let ok: String = router.retry(&k, &["SET", &k, "x"]);
        assert_eq!(ok, "OK");
    }
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
    assert_eq!(
        keys,
        (KEYS + BIG_VALUES + BIG_SHARD_WRITES) as u64,
        "keys on the restarted node"
    );
    let installed = groups_logging(&c.log(down), "installed snapshot");
    println!("groups that installed a snapshot on node {down}: {installed:?}");
    assert!(
        !installed.is_empty(),
        "node {down} caught up without installing any snapshot"
    );
    let sizes = sizes_logging(&c.log(down), "installed snapshot");
    let largest = sizes.iter().map(|&(_, b)| b).max().unwrap_or(0);
    println!("largest snapshot installed on node {down}: {largest} bytes");
    assert!(
        largest > SNAPSHOT_CHUNK,
        "no snapshot larger than one chunk was installed: {sizes:?}"
    );
    // A sample of values through the cluster.
    let mut router = c.router();
    for i in (0..KEYS).step_by(97) {
        let k = format!("snap:{i}");
        let v: String = router.retry(&k, &["GET", &k]);
        assert_eq!(v, format!("value-{i}"));
    }
    for i in 0..BIG_VALUES {
        let k = format!("{{big}}:{i}");
        let v: String = router.retry(&k, &["GET", &k]);
        assert!(v == big_value(i), "{k}: {} bytes read", v.len());
    }
    println!("total {:?}", t0.elapsed());
}
