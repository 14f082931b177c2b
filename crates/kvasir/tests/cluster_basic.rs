//! Cluster mode, healthy path: a 3-node cluster (24 shards, 3 replicas)
//! serves every slot through MOVED with real cluster clients (redis-rs
//! cluster-async and `redis-cli -c`), CLUSTER SLOTS covers the slot space
//! exactly once on every node, CROSSSLOT and hash tags behave as in Redis
//! Cluster, MULTI/EXEC runs within one slot, and replicas converge.

#[path = "common/cluster.rs"]
mod cluster;

use cluster::{key_slot, Cluster, NODES};
use redis::AsyncCommands;
use std::time::{Duration, Instant};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli")
        .args(["-c", "-p", &port.to_string()])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("redis-cli is needed for this test: {e}"));
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn err_text(r: redis::RedisResult<redis::Value>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => match (e.code(), e.detail()) {
            (Some(c), Some(d)) => format!("{c} {d}"),
            (Some(c), None) => c.to_string(),
            _ => e.to_string(),
        },
    }
}

/// Requests in flight at once through the cluster client (see
/// cluster_redis_rs_inflight.rs for why this once had to be 10).
const CONCURRENCY: usize = 100;

#[test]
fn cluster_serves_all_slots_through_moved() {
    let t0 = Instant::now();
    let mut c = Cluster::start(&[]);
    println!("cluster ready in {:?}", t0.elapsed());

    // CLUSTER SLOTS on every node: 0..=16383 covered exactly once, each
    // range with its master only (a node listed as a replica anywhere
    // would lose its master role in redis-py and go-redis), masters
    // spread over the three nodes.
    for id in 1..=NODES {
        let mut slots = c.slots(id).expect("CLUSTER SLOTS");
        slots.sort_by_key(|r| r.start);
        let mut next = 0u32;
        for r in &slots {
            assert_eq!(r.start as u32, next, "gap or overlap at {r:?} on node {id}");
            assert!(r.end >= r.start);
            next = r.end as u32 + 1;
            assert_eq!(r.ports.len(), 1, "masters only: {r:?}");
            assert!(r.ports.iter().all(|p| c.id_of_port(*p).is_some()));
        }
        assert_eq!(next, 16384, "slots end at {next} on node {id}");
        let leaders: std::collections::BTreeSet<u16> = slots.iter().map(|r| r.ports[0]).collect();
        assert!(leaders.len() >= 2, "leaders not spread: {slots:?}");
        // An election on a starved CI machine can leave a shard leaderless
        // for a moment: the state must come back to ok, not stay ok.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut info = c.cluster_info(id).unwrap();
        while !info.contains("cluster_state:ok") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            info = c.cluster_info(id).unwrap();
        }
        assert!(info.contains("cluster_state:ok"), "{info}");
        assert!(info.contains("cluster_known_nodes:3"), "{info}");
        let myid: String = c.query(id, &["CLUSTER", "MYID"]).unwrap();
        assert_eq!(myid.len(), 40, "{myid}");
    }

    // CLUSTER KEYSLOT agrees with CRC16 (with and without hash tags).
    for key in [
        "foo",
        "bar",
        "{user1000}.following",
        "a{}b",
        "{}{x}",
        "x{y}z{w}",
    ] {
        let slot: i64 = c.query(1, &["CLUSTER", "KEYSLOT", key]).unwrap();
        assert_eq!(slot as u16, key_slot(key.as_bytes()), "keyslot {key}");
    }

    // 2000 keys over (almost) every slot through the cluster client.
    let slots = c.slots(1).unwrap();
    let keys: Vec<String> = (0..2000).map(|i| format!("key:{i}")).collect();
    let ranges_hit: std::collections::BTreeSet<u16> = keys
        .iter()
        .map(|k| {
            let s = key_slot(k.as_bytes());
            slots
                .iter()
                .find(|r| r.start <= s && s <= r.end)
                .unwrap()
                .start
        })
        .collect();
    assert_eq!(ranges_hit.len(), slots.len(), "keys should hit every range");
    let client = c.cluster_client();
    let rt = rt();
    let t = Instant::now();
    let ports: Vec<u16> = c.nodes.iter().map(|n| n.port).collect();
    let raft_state = move || -> String {
        ports
            .iter()
            .map(|p| {
                let out = std::process::Command::new("redis-cli")
                    .args(["-p", &p.to_string(), "info", "raft"])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
                let busy: Vec<&str> = out
                    .lines()
                    .filter(|l| !l.contains("waiting_entries=0,reads_in_flight=0"))
                    .collect();
                format!("node on port {p}:\n{}", busy.join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    rt.block_on(async {
        let mut conn = client.get_async_connection().await.expect("cluster conn");
        for chunk in keys.chunks(CONCURRENCY) {
            let futs = chunk.iter().map(|k| {
                let mut conn = conn.clone();
                let k = k.clone();
                let raft_state = raft_state.clone();
                async move {
                    let () = conn.set(&k, format!("v-{k}")).await.unwrap_or_else(|e| {
                        panic!(
                            "SET {k}: {e:?} after {:?}; raft state:\n{}",
                            t.elapsed(),
                            raft_state()
                        )
                    });
                }
            });
            futures_join(futs).await;
        }
        for chunk in keys.chunks(CONCURRENCY) {
            let futs = chunk.iter().map(|k| {
                let mut conn = conn.clone();
                let k = k.clone();
                async move {
                    let v: Option<String> = conn.get(&k).await.expect("GET");
                    assert_eq!(v, Some(format!("v-{k}")), "GET {k}");
                }
            });
            futures_join(futs).await;
        }
        // Hash-tagged multi-key commands work through the cluster client.
        let () = conn
            .mset(&[("{u}a", "1"), ("{u}b", "2")])
            .await
            .expect("MSET same slot");
        let v: Vec<Option<String>> = conn.mget(&["{u}a", "{u}b", "{u}c"]).await.unwrap();
        assert_eq!(v, vec![Some("1".into()), Some("2".into()), None]);
    });
    println!(
        "2000 SET + 2000 GET through the cluster client in {:?}",
        t.elapsed()
    );

    // A plain connection to a node that does not lead the slot: MOVED to the
    // leader's client address; the leader serves it.
    let key = "key:7";
    let slot = key_slot(key.as_bytes());
    let leader = c.wait_leader_of_slot(slot, Duration::from_secs(10));
    let other = (1..=NODES).find(|&n| n != leader).unwrap();
    let e = err_text(c.query::<redis::Value>(other, &["GET", key]));
    assert_eq!(e, format!("MOVED {slot} 127.0.0.1:{}", c.port(leader)));
    let v: String = c.query(leader, &["GET", key]).unwrap();
    assert_eq!(v, "v-key:7");
    let n: i64 = c
        .query(leader, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
        .unwrap();
    assert!(n >= 1, "COUNTKEYSINSLOT {slot} = {n}");
    let ks: Vec<String> = c
        .query(
            leader,
            &["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "100"],
        )
        .unwrap();
    assert!(ks.contains(&key.to_string()), "GETKEYSINSLOT: {ks:?}");

    // CROSSSLOT for keys of different slots, on any node; a hash tag makes
    // them one slot.
    assert_ne!(key_slot(b"a"), key_slot(b"b"));
    for id in 1..=NODES {
        let e = err_text(c.query::<redis::Value>(id, &["MSET", "a", "1", "b", "2"]));
        assert!(e.starts_with("CROSSSLOT"), "node {id}: {e}");
    }
    let tag_slot = key_slot(b"{tag}");
    let tag_leader = c.wait_leader_of_slot(tag_slot, Duration::from_secs(10));
    let ok: String = c
        .query(tag_leader, &["MSET", "{tag}a", "1", "{tag}b", "2"])
        .unwrap();
    assert_eq!(ok, "OK");

    // MULTI/EXEC within one slot on the leader.
    let mut conn = c.conn(tag_leader);
    let (r1, r2, r3, r4): (String, i64, i64, Vec<Option<String>>) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("{tag}n")
        .arg("10")
        .cmd("INCR")
        .arg("{tag}n")
        .cmd("INCRBY")
        .arg("{tag}n")
        .arg("5")
        .cmd("MGET")
        .arg("{tag}a")
        .arg("{tag}n")
        .query(&mut conn)
        .expect("MULTI/EXEC");
    assert_eq!((r1.as_str(), r2, r3), ("OK", 11, 16));
    assert_eq!(r4, vec![Some("1".to_string()), Some("16".to_string())]);
    // A transaction touching two slots fails as a whole, nothing applied.
    let r: redis::RedisResult<redis::Value> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("{tag}n")
        .arg("99")
        .cmd("SET")
        .arg("elsewhere")
        .arg("1")
        .query(&mut conn);
    assert!(r.is_err(), "cross-slot MULTI/EXEC must fail: {r:?}");
    let n: String = c.query(tag_leader, &["GET", "{tag}n"]).unwrap();
    assert_eq!(n, "16", "a failed transaction applied something");

    // redis-cli -c follows MOVED: write through one node, read through each.
    let cli_key = (0..)
        .map(|i| format!("cli:{i}"))
        .find(|k| c.leader_of_slot(key_slot(k.as_bytes())) != Some(1))
        .unwrap();
    assert_eq!(redis_cli(c.port(1), &["set", &cli_key, "from-cli"]), "OK");
    for id in 1..=NODES {
        assert_eq!(redis_cli(c.port(id), &["get", &cli_key]), "from-cli");
    }

    // Every shard's three replicas converge on the same content.
    let t = Instant::now();
    c.wait_digests_equal(Duration::from_secs(60));
    let total: u64 = (1..=cluster::SHARDS)
        .map(|s| c.shard_digest(1, s).unwrap().keys)
        .sum();
    assert_eq!(total, 2000 + 2 + 3 + 1, "keys over all shards");
    println!(
        "replicas converged in {:?}; total {:?}",
        t.elapsed(),
        t0.elapsed()
    );
}

/// Runs futures concurrently (no extra crates needed).
async fn futures_join<F: std::future::Future<Output = ()> + Send + 'static>(
    futs: impl Iterator<Item = F>,
) {
    let handles: Vec<_> = futs.map(tokio::spawn).collect();
    for h in handles {
        h.await.expect("task");
    }
}

/// Leaders end on their preferred nodes: 8 shards led by each node, as every
/// node's CLUSTER SLOTS shows, within 30 s of start-up.
#[test]
fn leaders_spread_evenly_over_the_nodes() {
    let c = Cluster::start(&[]);
    let mut last = Vec::new();
    let ok = cluster::wait_until(Duration::from_secs(30), || {
        last = (1..=NODES)
            .map(|via| {
                let slots = c.slots(via).unwrap_or_default();
                let mut per_node = [0usize; NODES as usize];
                for r in &slots {
                    if let Some(id) = r.ports.first().and_then(|p| c.id_of_port(*p)) {
                        per_node[(id - 1) as usize] += 1;
                    }
                }
                per_node
            })
            .collect::<Vec<_>>();
        last.iter().all(|p| p.iter().all(|&n| n == 8))
    });
    assert!(ok, "shards led per node (as each node sees it): {last:?}");
}
