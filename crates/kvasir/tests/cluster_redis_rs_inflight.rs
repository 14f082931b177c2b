//! The redis-rs cluster-async client with 100 requests in flight: 20 runs
//! in a row over keys of every slot, with the leader of one slot killed
//! (kill -9) during one of the runs. No run may stall (each is bounded far
//! below the client's own 15 s budget) and every acknowledged write reads
//! back afterwards.
//!
//! What stalled this before (redis-rs 1.8.1 logs "async cluster client
//! recovery: beginning slot refresh" and never "complete"): the client
//! stops polling its in-flight requests while it refreshes the slot map,
//! and the refresh waits for the connection-map lock that those unpolled
//! requests were already granted (tokio's RwLock hands permits to queued
//! waiters in order) - a client-side deadlock, the hazard valkey-glide
//! describes in its PR 2643. Each MOVED starts such a refresh, so the
//! server made it likely twice: a second after start it moved a third of
//! the leaders to their preferred nodes at once (a burst of MOVED; now the
//! preferred node wins the first election), and after a kill its peers
//! answered MOVED to the dead leader's address until the election (now
//! they hold the request until a reachable leader is known).

#[path = "common/cluster.rs"]
mod cluster;

use cluster::{key_slot, Cluster};
use redis::AsyncCommands;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const IN_FLIGHT: usize = 100;
const RUNS: usize = 20;
const KEYS_PER_RUN: usize = 500;
/// A run that takes longer than this stalled (a healthy run takes well
/// under a second on a loaded 2-core machine; a kill adds an election).
const RUN_LIMIT: Duration = Duration::from_secs(12);

#[test]
fn hundred_in_flight_twenty_runs_with_a_leader_kill() {
    let mut c = Cluster::start(&[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = c.cluster_client();
    let conn = rt
        .block_on(client.get_async_connection())
        .expect("cluster connection");
    let victim_slot = key_slot(b"victim");
    let mut acked: BTreeMap<String, String> = BTreeMap::new();
    let mut killed = None;
    for run in 0..RUNS {
        if run == RUNS / 2 {
            let victim = c.wait_leader_of_slot(victim_slot, Duration::from_secs(20));
            println!("run {run}: killing node {victim}, leader of slot {victim_slot}");
            killed = Some(victim);
        }
        let keys: Vec<String> = (0..KEYS_PER_RUN)
            .map(|i| {
                if i % 10 == 0 {
                    format!("{{victim}}:{run}:{i}")
                } else {
                    format!("k:{run}:{i}")
                }
            })
            .collect();
        let t = Instant::now();
        let kill_now = killed.filter(|_| run == RUNS / 2);
        let results: Vec<(String, Result<(), String>)> = rt.block_on(async {
            let mut out = Vec::with_capacity(keys.len());
            for (n, chunk) in keys.chunks(IN_FLIGHT).enumerate() {
                let futs: Vec<_> = chunk
                    .iter()
                    .map(|k| {
                        let mut conn = conn.clone();
                        let k = k.clone();
                        tokio::spawn(async move {
                            let r: redis::RedisResult<()> = conn.set(&k, format!("v{k}")).await;
                            (k, r.map_err(|e| format!("{e:?}")))
                        })
                    })
                    .collect();
                if n == 1 {
                    if let Some(victim) = kill_now {
                        // While 100 requests are in flight.
                        let pid = c.node(victim).pid();
                        if let Some(pid) = pid {
                            let _ = std::process::Command::new("kill")
                                .args(["-9", &pid.to_string()])
                                .status();
                        }
                    }
                }
                let joined = tokio::time::timeout(RUN_LIMIT, futures_all(futs))
                    .await
                    .unwrap_or_else(|_| panic!("run {run}: requests stalled for {RUN_LIMIT:?}"));
                out.extend(joined);
            }
            out
        });
        let elapsed = t.elapsed();
        assert!(elapsed < RUN_LIMIT, "run {run} took {elapsed:?}");
        let failed: Vec<&(String, Result<(), String>)> =
            results.iter().filter(|(_, r)| r.is_err()).collect();
        println!(
            "run {run}: {} SETs in {elapsed:?}, {} failed",
            results.len(),
            failed.len()
        );
        if killed.is_none() || run != RUNS / 2 {
            // Outside the kill, every request succeeds.
            assert!(
                failed.is_empty(),
                "run {run}: {:?}",
                &failed[..failed.len().min(5)]
            );
        }
        for (k, r) in results {
            if r.is_ok() {
                acked.insert(k.clone(), format!("v{k}"));
            }
        }
    }
    if let Some(victim) = killed {
        c.kill(victim);
    }
    // Every acknowledged write reads back through the same client.
    rt.block_on(async {
        let mut conn = conn.clone();
        for (k, v) in &acked {
            let got: Option<String> = conn.get(k).await.expect("GET");
            assert_eq!(got.as_ref(), Some(v), "acknowledged {k} lost");
        }
    });
    println!("{} acknowledged writes read back", acked.len());
}

async fn futures_all<T>(handles: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}
