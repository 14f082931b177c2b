//! Shard threads: with `--threads 3` every node spreads its shards over
//! its main thread and two shard threads. Writes to every shard are
//! applied on every replica alike, what they write reaches blocked
//! clients, WATCH and key counts on the main thread, and a node killed
//! with -9 recovers all its threads' shards from the shared log.

#[path = "common/cluster.rs"]
mod cluster;

use cluster::{wait_until, Cluster, NODES};
use std::time::Duration;

/// The names of a process's threads (Linux), if readable.
fn thread_names(pid: u32) -> Option<Vec<String>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    Some(
        tasks
            .filter_map(|t| t.ok())
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .map(|n| n.trim().to_string())
            .collect(),
    )
}

fn keyspace_keys(c: &Cluster, id: u64) -> i64 {
    let info: String = c.query(id, &["INFO", "keyspace"]).expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix("db0:keys="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn shards_on_threads_serve_and_replicate_every_command() {
    let mut c = Cluster::start(&["--threads", "3"]);
    for id in 1..=NODES {
        let pid = c.node(id).pid().expect("running");
        if thread_names(pid).is_none() {
            break; // not Linux: nothing to look at
        }
        let mut names = Vec::new();
        let found = wait_until(Duration::from_secs(5), || {
            names = thread_names(pid).unwrap_or_default();
            ["kvasir-shard-1", "kvasir-shard-2"]
                .iter()
                .all(|want| names.iter().any(|n| n == want))
        });
        assert!(found, "node {id}: no shard threads in {names:?}");
        assert!(
            !names.iter().any(|n| n == "kvasir-shard-3"),
            "node {id}: {names:?}"
        );
    }

    // Each shard thread reads its own connection from each peer's same
    // shard thread: 2 shard threads x 2 peers on every node.
    for id in 1..=NODES {
        let mut taken = 0;
        let all = wait_until(Duration::from_secs(10), || {
            let info: String = c.query(id, &["INFO", "raft"]).unwrap_or_default();
            taken = info
                .lines()
                .find_map(|l| l.strip_prefix("bus_links_read_by_shard_threads:"))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            taken >= 2 * (NODES - 1)
        });
        assert!(all, "node {id}: shard threads read {taken} peer links");
    }

    // Keys in every shard, through a cluster client.
    let client = c.cluster_client();
    let mut conn = client.get_connection().expect("cluster connection");
    const KEYS: usize = 600;
    for i in 0..KEYS {
        let key = format!("key:{i}");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(i)
            .query(&mut conn)
            .expect("set");
        let n: i64 = redis::cmd("INCR").arg(&key).query(&mut conn).expect("incr");
        assert_eq!(n, i as i64 + 1);
    }
    for i in (0..KEYS).step_by(7) {
        let v: i64 = redis::cmd("GET")
            .arg(format!("key:{i}"))
            .query(&mut conn)
            .expect("get");
        assert_eq!(v, i as i64 + 1);
    }

    // Key counts: DBSIZE (read on the shards' threads) and INFO keyspace
    // (counted after each apply) over the nodes add up to every key.
    let dbsize: i64 = (1..=NODES)
        .map(|id| c.query::<i64>(id, &["DBSIZE"]).expect("dbsize"))
        .sum();
    assert_eq!(dbsize, KEYS as i64);
    let info_keys: i64 = (1..=NODES).map(|id| keyspace_keys(&c, id)).sum();
    assert_eq!(info_keys, KEYS as i64);
    let slot = cluster::key_slot(b"key:1").to_string();
    let leader = c.wait_leader_of_slot(cluster::key_slot(b"key:1"), Duration::from_secs(10));
    let in_slot: i64 = c
        .query(leader, &["CLUSTER", "COUNTKEYSINSLOT", &slot])
        .expect("countkeysinslot");
    assert!(in_slot >= 1, "key:1's slot holds key:1");

    // A client blocked on one thread's shard is served by a push.
    let list_slot = cluster::key_slot(b"queue");
    let leader = c.wait_leader_of_slot(list_slot, Duration::from_secs(10));
    let port = c.port(leader);
    let waiter = std::thread::spawn(move || {
        let mut blocked = cluster::connect(port).expect("connect");
        redis::cmd("BLPOP")
            .arg("queue")
            .arg(10)
            .query::<Option<(String, String)>>(&mut blocked)
    });
    std::thread::sleep(Duration::from_millis(300));
    let _: i64 = redis::cmd("RPUSH")
        .arg("queue")
        .arg("job")
        .query(&mut conn)
        .expect("rpush");
    let popped = waiter.join().expect("waiter").expect("blpop");
    assert_eq!(popped, Some(("queue".into(), "job".into())));

    // WATCH on the main thread hears a write applied on a shard thread.
    let mut watcher = c.conn(leader);
    let _: () = redis::cmd("WATCH")
        .arg("queue")
        .query(&mut watcher)
        .expect("watch");
    let _: i64 = redis::cmd("RPUSH")
        .arg("queue")
        .arg("other")
        .query(&mut conn)
        .expect("rpush");
    let exec: Option<Vec<i64>> = redis::pipe()
        .atomic()
        .cmd("RPUSH")
        .arg("queue")
        .arg("mine")
        .query(&mut watcher)
        .expect("exec");
    assert_eq!(
        exec, None,
        "a watched key written by another client aborts EXEC"
    );

    // Any write of a watched key aborts EXEC, one that leaves its value as
    // it was too (the digests EXEC carries would not tell): the shard
    // thread must send the written key to the main thread's watchers, for
    // keys of shards on every thread.
    for i in 0..12 {
        let key = format!("watched:{i}");
        let leader =
            c.wait_leader_of_slot(cluster::key_slot(key.as_bytes()), Duration::from_secs(10));
        let mut watcher = c.conn(leader);
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("same")
            .query(&mut conn)
            .expect("set");
        let _: () = redis::cmd("WATCH")
            .arg(&key)
            .query(&mut watcher)
            .expect("watch");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("same")
            .query(&mut conn)
            .expect("set");
        let exec: Option<Vec<String>> = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(&key)
            .arg("mine")
            .query(&mut watcher)
            .expect("exec");
        assert_eq!(exec, None, "{key}: a write of the same value aborts EXEC");
    }

    // Every replica holds the same content.
    c.wait_digests_equal(Duration::from_secs(20));

    // kill -9 and restart: every thread's shards come back from the log.
    c.kill(2);
    c.restart(2);
    c.wait_ready(Duration::from_secs(60));
    c.wait_digests_equal(Duration::from_secs(30));
    for i in (0..KEYS).step_by(11) {
        let v: i64 = redis::cmd("GET")
            .arg(format!("key:{i}"))
            .query(&mut client.get_connection().expect("connection"))
            .expect("get after restart");
        assert_eq!(v, i as i64 + 1);
    }
}
