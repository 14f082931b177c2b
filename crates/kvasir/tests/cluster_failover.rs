//! Cluster mode under a crash: kill -9 the leader of a slot while several
//! tasks write increasing values through the redis-rs cluster client. Writes
//! resume after a new leader is elected, no acknowledged value is lost or
//! rolled back, and the killed node rejoins and catches up (every shard's
//! three replicas end with the same content).

#[path = "common/cluster.rs"]
mod cluster;

use cluster::{key_slot, Cluster};
use redis::AsyncCommands;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default, Clone, Copy, Debug)]
struct KeyState {
    /// Highest value sent (acknowledged or not).
    attempted: u64,
    /// Last value the server acknowledged.
    acked: u64,
}

#[test]
fn kill_leader_during_writes_loses_nothing_and_node_rejoins() {
    let t0 = Instant::now();
    let mut c = Cluster::start(&[]);
    println!("cluster ready in {:?}", t0.elapsed());

    let target_slot = key_slot(b"victim");
    let victim = c.wait_leader_of_slot(target_slot, Duration::from_secs(20));
    println!("slot {target_slot} is led by node {victim}");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = c.cluster_client();
    let conn = rt
        .block_on(client.get_async_connection())
        .expect("cluster connection");

    let stop = Arc::new(AtomicBool::new(false));
    let state: Arc<Mutex<HashMap<String, KeyState>>> = Arc::default();
    let start = Instant::now();
    // Kill time and first acknowledged write on the victim's slot invoked
    // after it, as offsets from `start`.
    let killed_at: Arc<Mutex<Option<Duration>>> = Arc::default();
    let resumed_at: Arc<Mutex<Option<Duration>>> = Arc::default();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));

    let mut tasks = Vec::new();
    for t in 0..4 {
        // Two keys in the victim's slot, two spread elsewhere.
        let keys = vec![
            format!("{{victim}}w{t}a"),
            format!("{{victim}}w{t}b"),
            format!("spread:{t}:x"),
            format!("spread:{t}:y"),
        ];
        let (mut conn, stop, state, killed_at, resumed_at, errors) = (
            conn.clone(),
            stop.clone(),
            state.clone(),
            killed_at.clone(),
            resumed_at.clone(),
            errors.clone(),
        );
        tasks.push(rt.spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                for k in &keys {
                    state
                        .lock()
                        .unwrap()
                        .entry(k.clone())
                        .or_default()
                        .attempted = n;
                    let invoked = start.elapsed();
                    let r: redis::RedisResult<()> =
                        tokio::time::timeout(Duration::from_secs(20), conn.set(k.as_str(), n))
                            .await
                            .unwrap_or_else(|_| {
                                Err(redis::RedisError::from((
                                    redis::ErrorKind::Io,
                                    "client timeout",
                                )))
                            });
                    match r {
                        Ok(()) => {
                            state.lock().unwrap().get_mut(k).unwrap().acked = n;
                            let k_at = *killed_at.lock().unwrap();
                            if let Some(k_at) = k_at {
                                if invoked >= k_at && k.starts_with("{victim}") {
                                    let mut r = resumed_at.lock().unwrap();
                                    if r.is_none() {
                                        *r = Some(start.elapsed());
                                    }
                                }
                            }
                        }
                        Err(e) => {
                            let mut errs = errors.lock().unwrap();
                            if errs.len() < 50 {
                                errs.push(format!("SET {k} {n}: {e}"));
                            }
                        }
                    }
                }
            }
        }));
    }

    // Let the writers run, then kill the leader mid-stream.
    std::thread::sleep(Duration::from_millis(1500));
    let before: u64 = state.lock().unwrap().values().map(|s| s.acked).sum();
    assert!(before > 0, "no write acknowledged before the kill");
    // The kill reaps the process: only writes invoked after it count.
    c.kill(victim);
    *killed_at.lock().unwrap() = Some(start.elapsed());
    let kill_instant = Instant::now();
    println!("killed node {victim} (leader of slot {target_slot})");

    let resumed = cluster::wait_until(Duration::from_secs(30), || {
        resumed_at.lock().unwrap().is_some()
    });
    let new_leader = c.wait_leader_of_slot(target_slot, Duration::from_secs(20));
    assert_ne!(new_leader, victim);
    // Keep writing a little on the new leader, then stop.
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        rt.block_on(t).expect("writer task");
    }
    let errors = errors.lock().unwrap().clone();
    println!(
        "{} write errors, e.g. {:?}",
        errors.len(),
        errors.iter().take(5).collect::<Vec<_>>()
    );
    assert!(
        resumed,
        "no write on slot {target_slot} succeeded within 30 s of the kill"
    );
    let resume = resumed_at.lock().unwrap().unwrap() - killed_at.lock().unwrap().unwrap();
    println!(
        "time to first successful write after the kill: {resume:?} (new leader: node {new_leader}, observed {:?} after kill)",
        kill_instant.elapsed()
    );
    assert!(
        resume < Duration::from_secs(5),
        "writes resumed only after {resume:?}"
    );

    // Every acknowledged value is there (or a later attempted one), never older.
    let check = |conn: &mut redis::cluster_async::ClusterConnection, when: &str| {
        let snapshot = state.lock().unwrap().clone();
        let mut acked_after_kill = 0;
        for (k, s) in &snapshot {
            let v: Option<u64> = rt
                .block_on(conn.get(k.as_str()))
                .unwrap_or_else(|e| panic!("GET {k} ({when}): {e}"));
            let v = v.unwrap_or(0);
            assert!(
                v >= s.acked && v <= s.attempted,
                "{when}: {k} = {v}, but last acknowledged = {}, last attempted = {}",
                s.acked,
                s.attempted
            );
            acked_after_kill += s.acked;
        }
        acked_after_kill
    };
    let mut conn2 = conn.clone();
    let total = check(&mut conn2, "after failover");
    assert!(total > before, "nothing acknowledged after the kill");

    // The killed node comes back, catches up, and all replicas agree.
    let t = Instant::now();
    c.restart(victim);
    c.wait_ready(Duration::from_secs(60));
    c.wait_digests_equal(Duration::from_secs(90));
    println!(
        "node {victim} rejoined and replicas converged in {:?}",
        t.elapsed()
    );
    let fresh = rt
        .block_on(c.cluster_client().get_async_connection())
        .expect("cluster connection");
    let mut fresh = fresh;
    check(&mut fresh, "after the restart");
    println!("total {:?}", t0.elapsed());
}

/// A value larger than one bus frame (20 MiB against the 16 MiB frame
/// limit) replicates as fragments: every replica of its shard serves it
/// after READONLY, and it survives the loss of the leader.
#[test]
fn a_value_larger_than_a_frame_replicates_and_survives_failover() {
    let mut c = Cluster::start(&[]);
    let key = "{huge}value";
    let value: String = (0..20usize << 20)
        .map(|i| (b'a' + (i * 7 % 26) as u8) as char)
        .collect();
    let t = Instant::now();
    let ok: String = c.router().retry(key, &["SET", key, &value]);
    assert_eq!(ok, "OK");
    println!("SET of {} bytes in {:?}", value.len(), t.elapsed());
    // Every node holds a replica of every shard of a 3-node cluster.
    for id in 1..=cluster::NODES {
        let port = c.port(id);
        let mut conn = cluster::connect(port).expect("connect");
        let _: () = redis::cmd("READONLY").query(&mut conn).expect("READONLY");
        let served = cluster::wait_until(Duration::from_secs(30), || {
            let got: Option<String> = redis::cmd("GET").arg(key).query(&mut conn).ok().flatten();
            got.as_deref() == Some(value.as_str())
        });
        assert!(served, "the replica on node {id} does not serve the value");
    }
    let slot = key_slot(key.as_bytes());
    let leader = c.wait_leader_of_slot(slot, Duration::from_secs(20));
    c.kill(leader);
    println!("killed node {leader}, the leader of slot {slot}");
    let got: String = c.router().retry(key, &["GET", key]);
    assert!(got == value, "after failover: {} bytes read", got.len());
}

/// A node stopped gracefully (SIGTERM, as `docker stop` or systemd does)
/// hands the leadership of its shards to the other nodes before it exits:
/// the moment it is gone they already lead every slot (without the
/// hand-over they would still name it until an election timeout, 500 ms
/// or more, later), the writes of a client writing through the stop are
/// all kept, and a SHUTDOWN NOW on a second node skips the hand-over.
#[test]
fn a_graceful_stop_hands_the_leadership_over_first() {
    let mut c = Cluster::start(&[]);
    let led_by = |c: &Cluster, via: u64, id: u64| c.leads_some_slots_via(via, id);
    // After the start every node leads its preferred shards.
    assert!(
        cluster::wait_until(Duration::from_secs(30), || led_by(&c, 2, 1)),
        "node 1 leads no shard: {:?}",
        c.slots(2)
    );

    let stop = Arc::new(AtomicBool::new(false));
    let mut router = c.router();
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // key -> the last value acknowledged; writes of unknown outcome.
            let mut acked = HashMap::new();
            let mut unknown = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && n < 200_000 {
                n += 1;
                let key = format!("stop:{}", n % 64);
                let value = n.to_string();
                match router.run_args(&key, &["SET", &key, &value], Duration::from_secs(20)) {
                    cluster::Outcome::Reply(Ok(_)) => {
                        acked.insert(key, value);
                    }
                    cluster::Outcome::Reply(Err(e)) => panic!("SET {key}: {e}"),
                    cluster::Outcome::Unknown(e) => unknown.push(format!("SET {key}: {e}")),
                }
            }
            (acked, unknown)
        })
    };
    std::thread::sleep(Duration::from_millis(500));

    c.terminate(1);
    let status = c
        .wait_exit(1, Duration::from_secs(30))
        .expect("node 1 did not exit after SIGTERM");
    let after_exit = c.slots(2).expect("CLUSTER SLOTS from node 2");
    assert!(status.success(), "node 1 exited with {status}");
    let covered: usize = after_exit
        .iter()
        .map(|r| (r.end - r.start) as usize + 1)
        .sum();
    assert_eq!(covered, 16384, "slots missing: {after_exit:?}");
    for r in &after_exit {
        let leader = r.ports.first().and_then(|p| c.id_of_port(*p));
        assert!(
            matches!(leader, Some(2 | 3)),
            "slots {}-{} still led by node {leader:?} right after node 1 exited: {after_exit:?}",
            r.start,
            r.end
        );
    }
    let log = c.log(1);
    assert!(
        log.contains("Handing over the leadership of") && log.contains("Leadership handed over in"),
        "{}",
        cluster::tail(&log, 20)
    );

    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (acked, unknown) = writer.join().expect("writer");
    println!(
        "{} keys written through the stop; {} writes of unknown outcome: {unknown:?}",
        acked.len(),
        unknown.len()
    );
    assert!(!acked.is_empty(), "no write acknowledged");
    let mut router = c.router();
    for (key, value) in &acked {
        // A write of unknown outcome may have replaced the acknowledged
        // value of its key with a later one, never an earlier one.
        let got: String = router.retry(key, &["GET", key]);
        let (got_n, acked_n): (u64, u64) = (got.parse().unwrap(), value.parse().unwrap());
        assert!(
            got_n >= acked_n,
            "{key}: {got} after {value} was acknowledged"
        );
    }

    // SHUTDOWN NOW: no hand-over.
    let _ = c.query::<redis::Value>(2, &["SHUTDOWN", "NOW"]);
    c.wait_exit(2, Duration::from_secs(30))
        .expect("node 2 did not exit after SHUTDOWN NOW");
    let log = c.log(2);
    assert!(
        !log.contains("Handing over the leadership of"),
        "{}",
        cluster::tail(&log, 20)
    );
}
