//! Cluster mode with frozen processes (SIGSTOP): a stopped follower does not
//! stop writes; a stopped leader is replaced, and when it wakes up it never
//! serves a stale read: asked directly for a key of a slot it used to lead,
//! it answers MOVED (or the current value once leadership is back).

#[path = "common/cluster.rs"]
mod cluster;

use cluster::{key_slot, Cluster, NODES};
use redis::AsyncCommands;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A raw RESP connection, so a request can be queued at a stopped process
/// and answered the moment it resumes.
struct Probe {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Probe {
    fn connect(port: u16) -> Probe {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect probe");
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        Probe { s, buf: Vec::new() }
    }

    fn send_get(&mut self, key: &str) {
        let req = format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len());
        self.s.write_all(req.as_bytes()).expect("send");
    }

    /// One reply as text: `+..`, `-..`, `$-1` or the bulk string itself.
    fn reply(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..pos]).into_owned();
                if let Some(n) = line.strip_prefix('$') {
                    let n: i64 = n.parse().expect("bulk length");
                    if n < 0 {
                        self.buf.drain(..pos + 2);
                        return "(nil)".into();
                    }
                    let total = pos + 2 + n as usize + 2;
                    if self.buf.len() >= total {
                        let v = String::from_utf8_lossy(&self.buf[pos + 2..pos + 2 + n as usize])
                            .into_owned();
                        self.buf.drain(..total);
                        return v;
                    }
                } else {
                    self.buf.drain(..pos + 2);
                    return line;
                }
            }
            assert!(Instant::now() < deadline, "no reply from the probe");
            let mut chunk = [0u8; 4096];
            match self.s.read(&mut chunk) {
                Ok(0) => panic!("probe connection closed"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => panic!("probe read: {e}"),
            }
        }
    }
}

/// A direct answer for `key` must be a redirect/retry error or `want`.
fn assert_not_stale(answer: &str, want: &str, what: &str) -> bool {
    let redirect = answer.starts_with("-MOVED")
        || answer.starts_with("-TRYAGAIN")
        || answer.starts_with("-CLUSTERDOWN");
    assert!(
        redirect || answer == want,
        "{what}: stale or wrong read: got {answer:?}, the last acknowledged value is {want:?}"
    );
    !redirect
}

#[test]
fn paused_follower_and_paused_leader() {
    let t0 = Instant::now();
    let mut c = Cluster::start(&[]);
    println!("cluster ready in {:?}", t0.elapsed());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut cc = rt
        .block_on(c.cluster_client().get_async_connection())
        .expect("cluster connection");

    let slot = key_slot(b"paused");
    let leader = c.wait_leader_of_slot(slot, Duration::from_secs(20));
    let follower = (1..=NODES).find(|&n| n != leader).unwrap();

    // 1. A stopped follower: the slot's leader keeps committing with the
    //    remaining replica, and the cluster as a whole keeps taking writes.
    // Keys of slots the stopped node does not lead. (Slots it leads stall
    // until the others elect a new leader, and a client connected to a
    // frozen process only sees timeouts: that is the leader case below.)
    let ranges = c.slots(leader).expect("CLUSTER SLOTS");
    let follower_port = c.port(follower);
    let keys: Vec<String> = (0..)
        .map(|i| format!("during-follower-pause:{i}"))
        .filter(|k| {
            let s = key_slot(k.as_bytes());
            ranges
                .iter()
                .any(|r| r.start <= s && s <= r.end && r.ports[0] != follower_port)
        })
        .take(200)
        .collect();
    // The router learns the slot map now; a frozen node cannot answer it.
    let mut router = c.router();
    router.refresh();
    c.pause(follower);
    let t = Instant::now();
    let mut direct = c.conn(leader);
    for i in 1..=50i64 {
        let n: i64 = redis::cmd("INCR")
            .arg("{paused}ctr")
            .query(&mut direct)
            .unwrap_or_else(|e| panic!("INCR {i} on the leader with a follower stopped: {e}"));
        assert_eq!(n, i);
    }
    println!(
        "50 writes with follower {follower} stopped in {:?}",
        t.elapsed()
    );
    let t = Instant::now();
    // Through a router that follows MOVED over plain connections: the
    // redis-rs cluster client may refresh its slot map from the frozen node
    // and wait out its timeouts, which measures the client, not the cluster.
    let mut slowest = Duration::ZERO;
    for (i, k) in keys.iter().enumerate() {
        let ti = Instant::now();
        let ok: String = router.must(k, &["SET", k, &i.to_string()]);
        assert_eq!(ok, "OK");
        slowest = slowest.max(ti.elapsed());
    }
    println!("slowest write: {slowest:?}");
    assert!(
        slowest < Duration::from_secs(5),
        "a write took {slowest:?} with only a follower stopped"
    );
    println!(
        "200 writes over all slots with node {follower} stopped in {:?}",
        t.elapsed()
    );
    c.resume(follower);
    c.wait_ready(Duration::from_secs(60));

    // 2. A stopped leader: the other two elect a new one for its slots.
    let leader = c.wait_leader_of_slot(slot, Duration::from_secs(30));
    let key = "{paused}k";
    let ok: String = c.query(leader, &["SET", key, "v0"]).unwrap();
    assert_eq!(ok, "OK");
    let mut probe = Probe::connect(c.port(leader));
    c.pause(leader);
    let t = Instant::now();
    let others: Vec<u64> = (1..=NODES).filter(|&n| n != leader).collect();
    let moved = cluster::wait_until(Duration::from_secs(30), || {
        others.iter().all(|&o| {
            c.leader_of_slot_via(o, slot)
                .is_some_and(|l| l != leader && l != 0)
        })
    });
    assert!(
        moved,
        "no new leader for slot {slot} within 30 s of stopping node {leader}: {:?}",
        others
            .iter()
            .map(|&o| c.leader_of_slot_via(o, slot))
            .collect::<Vec<_>>()
    );
    let new_leader = c.leader_of_slot_via(others[0], slot).unwrap();
    println!(
        "node {leader} stopped; node {new_leader} leads slot {slot} after {:?}",
        t.elapsed()
    );
    // Written on the new leader directly: a client that still routes the
    // slot to the frozen process would only time out.
    let ok: String = c.query(new_leader, &["SET", key, "v1"]).unwrap();
    assert_eq!(ok, "OK");
    // Queued at the stopped process: answered the moment it resumes, while
    // it may still believe it leads.
    probe.send_get(key);
    c.resume(leader);
    let first = probe.reply();
    println!("old leader's first answer after SIGCONT: {first:?}");
    assert_not_stale(&first, "v1", "first read after SIGCONT");

    // 3. Write through the cluster, then ask the old leader directly: MOVED
    //    while it follows, the new value once leadership moves back to it,
    //    never an older value.
    let (mut redirects, mut served) = (0, 0);
    let t = Instant::now();
    let mut n = 1;
    // Until the old leader (the slot's preferred node) has served current
    // values for a while after the rebalancer gave leadership back to it.
    while t.elapsed() < Duration::from_secs(6)
        || (served < 5 && t.elapsed() < Duration::from_secs(30))
    {
        n += 1;
        let v = format!("v{n}");
        rt.block_on(async {
            let () = cc
                .set(key, v.as_str())
                .await
                .unwrap_or_else(|e| panic!("SET {key} {v}: {e}"));
        });
        probe.send_get(key);
        let got = probe.reply();
        if assert_not_stale(&got, &v, &format!("read {n} from node {leader}")) {
            served += 1;
        } else {
            redirects += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let back = c.leader_of_slot_via(leader, slot);
    println!(
        "old leader answered {redirects} redirects and {served} current values; slot {slot} now led by {back:?}"
    );
    assert!(
        served >= 5,
        "the old leader never served the current value again ({redirects} redirects)"
    );

    c.wait_ready(Duration::from_secs(60));
    c.wait_digests_equal(Duration::from_secs(90));
    let ctr: i64 = rt.block_on(cc.get("{paused}ctr")).unwrap();
    assert_eq!(ctr, 50);
    println!("total {:?}", t0.elapsed());
}

/// A graceful stop while another node is frozen (SIGSTOP, as a hung
/// process or a VM paused by its host): the stopping node hands the shards
/// it leads to the live peer only. The frozen one keeps its connections
/// open (its kernel acknowledges what is sent), so it looked as reachable
/// as any; a transfer to it stalled its group until raft-rs gave the
/// transfer up, was tried on it again, and the stop waited out
/// shutdown-timeout still leading those shards.
#[test]
fn a_graceful_stop_hands_over_to_live_peers_only() {
    let mut c = Cluster::start(&["--shutdown-timeout", "20"]);
    let led_by = |c: &Cluster, via: u64, id: u64| c.leads_some_slots_via(via, id);
    assert!(
        cluster::wait_until(Duration::from_secs(30), || led_by(&c, 3, 1)),
        "node 1 leads no shard: {:?}",
        c.slots(3)
    );
    c.pause(2);
    // Nodes 1 and 3 elect leaders for node 2's shards; node 1 then leads
    // some of them too.
    assert!(
        cluster::wait_until(Duration::from_secs(30), || !led_by(&c, 3, 2)),
        "node 2 still leads shards while stopped: {:?}",
        c.slots(3)
    );
    c.terminate(1);
    let status = c
        .wait_exit(1, Duration::from_secs(60))
        .expect("node 1 did not exit after SIGTERM");
    assert!(status.success(), "node 1 exited with {status}");
    let log = c.log(1);
    assert!(
        log.contains("Leadership handed over in")
            && !log.contains("not handed over within shutdown-timeout")
            && !log.contains("had no peer to take them"),
        "{}",
        cluster::tail(&log, 20)
    );
    // With node 2 back, nodes 2 and 3 are a majority again: every slot
    // takes writes.
    c.resume(2);
    let mut router = c.router();
    for i in 0..64 {
        let key = format!("after-stop:{i}");
        let _: () = router.retry(&key, &["SET", &key, "v"]);
        let got: String = router.retry(&key, &["GET", &key]);
        assert_eq!(got, "v", "{key}");
    }
}
