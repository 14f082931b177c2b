//! The Raft log's disk path under faults, injected into one node through
//! the `KVASIR_FAULT_*` environment variables of kvasir-raft's node loop:
//!
//! - a leader whose fsync stalls (200 ms per synced write) while one of its
//!   followers is killed with kill -9 keeps serving its shards with the
//!   remaining follower and loses no acknowledged write;
//! - a leader whose fsync fails answers the client waiting on that write
//!   with an error (never OK), stops (exits non-zero with the reason in its
//!   log), and the other nodes take its shards over with every acknowledged
//!   write.

#[path = "common/cluster.rs"]
mod cluster;

use cluster::{key_slot, Cluster};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Per key: the highest value sent and the last one acknowledged.
type Ledger = Arc<Mutex<HashMap<String, (u64, u64)>>>;

/// Up to `n` keys whose slot node `leader` leads, as node `leader` says.
fn keys_led_by(c: &Cluster, leader: u64, n: usize) -> Vec<String> {
    let mut keys = Vec::new();
    let mut slots_seen = HashMap::new();
    for i in 0..5000 {
        let k = format!("disk:{i}");
        let slot = key_slot(k.as_bytes());
        let led = *slots_seen
            .entry(slot)
            .or_insert_with(|| c.leader_of_slot_via(leader, slot) == Some(leader));
        if led {
            keys.push(k);
            if keys.len() == n {
                break;
            }
        }
    }
    keys
}

/// Node `id`'s `cluster_shards_led` from INFO cluster.
fn shards_led(c: &Cluster, id: u64) -> Option<u64> {
    let info: String = c.query(id, &["INFO", "cluster"]).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("cluster_shards_led:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Writers: one thread per key list, each with its own cluster connection,
/// setting every key to base+1, base+2... until `stop`; the ledger records
/// what was sent and what was acknowledged.
fn start_writers(
    c: &Cluster,
    key_lists: Vec<Vec<String>>,
    base: u64,
    stop: Arc<AtomicBool>,
    ledger: Ledger,
) -> Vec<std::thread::JoinHandle<()>> {
    key_lists
        .into_iter()
        .map(|keys| {
            let client = c.cluster_client();
            let (stop, ledger) = (stop.clone(), ledger.clone());
            std::thread::spawn(move || {
                let mut conn = None;
                let mut n = base;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    for k in &keys {
                        if conn.is_none() {
                            conn = client.get_connection().ok();
                        }
                        let Some(cn) = conn.as_mut() else {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        };
                        ledger.lock().unwrap().entry(k.clone()).or_default().0 = n;
                        let r: redis::RedisResult<()> = redis::cmd("SET").arg(k).arg(n).query(cn);
                        match r {
                            Ok(()) => ledger.lock().unwrap().entry(k.clone()).or_default().1 = n,
                            Err(_) => conn = None,
                        }
                    }
                }
            })
        })
        .collect()
}

fn acked(ledger: &Ledger, keys: &[String]) -> u64 {
    let l = ledger.lock().unwrap();
    keys.iter().map(|k| l.get(k).map_or(0, |e| e.1)).sum()
}

/// Every acknowledged value is still there: each key holds a value at least
/// its last acknowledged one and at most the last one sent.
fn check_nothing_lost(c: &Cluster, ledger: &Ledger) {
    let mut conn = c
        .cluster_client()
        .get_connection()
        .expect("cluster connection");
    let ledger = ledger.lock().unwrap();
    assert!(!ledger.is_empty());
    for (k, &(sent, acked)) in ledger.iter() {
        let v: Option<u64> = redis::cmd("GET").arg(k).query(&mut conn).expect("GET");
        let v = v.unwrap_or(0);
        assert!(
            v >= acked && v <= sent,
            "{k}: holds {v}, but {acked} was acknowledged and {sent} the last sent"
        );
    }
}

#[test]
fn stalled_leader_fsync_and_killed_follower_lose_nothing() {
    let mut c = Cluster::start(&[]);
    // Node 1's synced log writes take 200 ms from its restart on.
    c.set_env(1, "KVASIR_FAULT_LOG_WRITE_DELAY_MS", "200");
    c.restart(1);
    c.wait_ready(Duration::from_secs(60));
    let ok = cluster::wait_until(Duration::from_secs(30), || shards_led(&c, 1) == Some(8));
    assert!(
        ok,
        "node 1 did not lead its 8 shards again after its restart"
    );
    assert!(c.log(1).contains("log write faults injected"));
    let slow = keys_led_by(&c, 1, 4);
    assert_eq!(slow.len(), 4, "no keys led by node 1");
    let other = vec!["disk:other:a".to_string(), "disk:other:b".to_string()];

    let stop = Arc::new(AtomicBool::new(false));
    let ledger: Ledger = Arc::default();
    let writers = start_writers(
        &c,
        vec![slow[..2].to_vec(), slow[2..].to_vec(), other.clone()],
        0,
        stop.clone(),
        ledger.clone(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    let before = acked(&ledger, &slow);
    assert!(before > 0, "nothing acknowledged by the slow leader");
    c.kill(2);
    let killed = Instant::now();
    // The slow leader goes on with node 3 alone as its follower.
    let ok = cluster::wait_until(Duration::from_secs(20), || {
        acked(&ledger, &slow) > before + 4
    });
    println!(
        "slow leader: {before} acknowledged before the kill, {} within {:?} after it",
        acked(&ledger, &slow),
        killed.elapsed()
    );
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer");
    }
    assert!(
        ok,
        "the slow leader acknowledged nothing more after its follower was killed"
    );
    check_nothing_lost(&c, &ledger);
    // The killed follower rejoins and every replica agrees again.
    c.restart(2);
    c.wait_ready(Duration::from_secs(60));
    c.wait_digests_equal(Duration::from_secs(60));
}

#[test]
fn failed_fsync_errors_waiting_client_and_node_stops() {
    let mut c = Cluster::start(&[]);
    let trigger = c.root.join("fail-fsync-now");
    c.set_env(
        1,
        "KVASIR_FAULT_LOG_WRITE_FAIL_IF_EXISTS",
        &trigger.to_string_lossy(),
    );
    c.restart(1);
    c.wait_ready(Duration::from_secs(60));
    let ok = cluster::wait_until(Duration::from_secs(30), || shards_led(&c, 1) == Some(8));
    assert!(
        ok,
        "node 1 did not lead its 8 shards again after its restart"
    );
    let keys = keys_led_by(&c, 1, 4);
    assert_eq!(keys.len(), 4, "no keys led by node 1");

    // Acknowledged writes before the fault.
    let stop = Arc::new(AtomicBool::new(false));
    let ledger: Ledger = Arc::default();
    let writers = start_writers(&c, vec![keys.clone()], 0, stop.clone(), ledger.clone());
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer");
    }
    let before = acked(&ledger, &keys);
    assert!(before > 0, "nothing acknowledged before the fault");

    // The disk fails: the client whose write needed that fsync hears an
    // error, not OK and not silence. (Its outcome is unknown, as after a
    // timeout: the followers may have it, and a new leader commit it.)
    std::fs::write(&trigger, b"").expect("create the trigger file");
    let unknown = 5_000_000u64;
    ledger.lock().unwrap().entry(keys[0].clone()).or_default().0 = unknown;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", c.port(1))).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let k = &keys[0];
    let req = format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n$7\r\n{unknown}\r\n",
        k.len()
    );
    s.write_all(req.as_bytes()).expect("send SET");
    let mut reply = Vec::new();
    let mut buf = [0u8; 512];
    while !reply.ends_with(b"\r\n") {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) => panic!("no reply to a write whose fsync failed: {e}"),
        }
    }
    let reply = String::from_utf8_lossy(&reply).into_owned();
    assert!(
        reply.starts_with("-ERR Raft log write failed: fsync failed (injected fault)"),
        "reply to a write whose fsync failed: {reply:?}"
    );

    // The node stops serving: it exits with the reason in its log.
    let status = c
        .wait_exit(1, Duration::from_secs(10))
        .expect("node 1 still runs after its log write failed");
    assert!(!status.success(), "node 1 exited with {status}");
    let log = c.log(1);
    assert!(
        log.contains("Raft log write failed: fsync failed (injected fault)"),
        "node 1's log does not say why it stopped"
    );

    // Its shards move to the other nodes, which have every acknowledged
    // write, and take new ones.
    for k in &keys {
        let l = c.wait_leader_of_slot(key_slot(k.as_bytes()), Duration::from_secs(20));
        assert_ne!(l, 1);
    }
    check_nothing_lost(&c, &ledger);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = start_writers(
        &c,
        vec![keys.clone()],
        10_000_000,
        stop.clone(),
        ledger.clone(),
    );
    let ok = cluster::wait_until(Duration::from_secs(20), || {
        acked(&ledger, &keys) > before + 4
    });
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer");
    }
    assert!(ok, "no write acknowledged after node 1 stopped");
    check_nothing_lost(&c, &ledger);
}
