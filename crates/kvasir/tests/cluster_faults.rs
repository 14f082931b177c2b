//! Cluster mode against bad input and damaged state:
//! * a data folder created by another cluster is refused at start-up with a
//!   clear message (non-zero exit);
//! * bytes on the cluster port from something that is not a member of this
//!   cluster (bad magic, another cluster id, an unknown node, garbage frames)
//!   are rejected and logged, and the node keeps serving;
//! * a damaged tail of a node's Raft log: the node either recovers and
//!   catches up, or refuses to start with a clear message; either way the
//!   cluster loses no acknowledged write.

#[path = "common/cluster.rs"]
mod cluster;

use cluster::{Cluster, Damage, NODES, SHARDS};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
fn data_folder_of_another_cluster_is_refused() {
    // Create the folders (and their identity) with one cluster...
    let mut c = Cluster::spawn_new(&[]);
    let ok = cluster::wait_until(Duration::from_secs(30), || {
        (1..=NODES).all(|id| c.node(id).dir.join("kvasir-node.id").exists())
    });
    assert!(ok, "nodes did not write their identity files");
    for id in 1..=NODES {
        c.kill(id);
    }
    // ...then start node 1 on its folder as a member of a different one.
    let other_ports = cluster::free_ports(2);
    let other_cluster = format!(
        "1=127.0.0.1:{},2=127.0.0.1:{},3=127.0.0.1:{}",
        c.node(1).cluster_port,
        other_ports[0],
        other_ports[1]
    );
    let mut args = c.args(1);
    let i = args.iter().position(|a| a == "--initial-cluster").unwrap();
    args[i + 1] = other_cluster;
    c.spawn_with_args(1, &args);
    let status = c
        .wait_exit(1, Duration::from_secs(30))
        .expect("node 1 kept running on another cluster's data folder");
    let log = c.log(1);
    let last_run = log.rsplit("===== harness: starting node 1").next().unwrap();
    println!("exit {status:?}; output:\n{}", cluster::tail(last_run, 5));
    assert!(!status.success(), "exit status {status:?}");
    assert!(
        last_run.contains("another cluster"),
        "the refusal does not say why: {last_run}"
    );

    // The same folder under another node id is refused too.
    let mut args = c.args(1);
    let i = args.iter().position(|a| a == "--node-id").unwrap();
    args[i + 1] = "2".into();
    let j = args.iter().position(|a| a == "--port").unwrap();
    args[j + 1] = c.node(2).port.to_string();
    let k = args.iter().position(|a| a == "--cluster-port").unwrap();
    args[k + 1] = c.node(2).cluster_port.to_string();
    c.spawn_with_args(1, &args);
    let status = c
        .wait_exit(1, Duration::from_secs(30))
        .expect("node 2 kept running on node 1's data folder");
    let log = c.log(1);
    let last_run = log.rsplit("===== harness: starting node 1").next().unwrap();
    assert!(!status.success(), "exit status {status:?}");
    assert!(
        last_run.contains("another cluster or node"),
        "the refusal does not say why: {last_run}"
    );

    // With its own flags the folder still works.
    c.spawn(1);
    std::thread::sleep(Duration::from_millis(500));
    assert!(c.is_running(1), "node 1 no longer starts on its own folder");
}

/// A member's handshake for its links' lane 0.
fn handshake(cluster_id: u64, from: u64, to: u64) -> Vec<u8> {
    let mut h = handshake_v(b"KVR3", cluster_id, from, to);
    h.extend_from_slice(&0u64.to_le_bytes());
    h
}

/// A handshake of the wire format before lanes (KVR2) or the one before
/// it (KVR1): the given magic, the cluster id and both node ids.
fn handshake_v(magic: &[u8; 4], cluster_id: u64, from: u64, to: u64) -> Vec<u8> {
    let mut h = magic.to_vec();
    h.extend_from_slice(&cluster_id.to_le_bytes());
    h.extend_from_slice(&from.to_le_bytes());
    h.extend_from_slice(&to.to_le_bytes());
    h
}

/// Sends `bytes` to a cluster port and reports whether the node closed the
/// connection within 10 s.
fn send_and_wait_close(port: u16, bytes: &[u8]) -> bool {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect cluster port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
    false
}

/// Like [`send_and_wait_close`], after proving `secret` in the bus
/// handshake as a member (`hello`) would.
fn send_authenticated_and_wait_close(port: u16, hello: &[u8], secret: &[u8], bytes: &[u8]) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect cluster port");
        let hello: [u8; kvasir_raft::bus_auth::HELLO_LEN] = hello.try_into().expect("hello size");
        kvasir_raft::bus_auth::connect(&mut s, &hello, secret)
            .await
            .expect("authenticated handshake");
        let _ = s.write_all(bytes).await;
        let mut buf = [0u8; 1024];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    })
}

fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut f = ((body.len() + 1) as u32).to_le_bytes().to_vec();
    f.push(kind);
    f.extend_from_slice(body);
    f
}

#[test]
fn bad_peers_are_rejected_and_torn_log_tail_recovers() {
    let t0 = Instant::now();
    const SECRET: &str = "correct horse battery staple";
    let mut c = Cluster::start(&["--cluster-secret", SECRET]);
    println!("cluster ready in {:?}", t0.elapsed());
    let mut router = c.router();
    for i in 0..300 {
        let k = format!("acked:{i}");
        let ok: String = router.retry(&k, &["SET", &k, &format!("v{i}")]);
        assert_eq!(ok, "OK");
    }

    // 1. Strangers on node 1's cluster port.
    let cid = c.cluster_id().expect("cluster id in node 1's log");
    let cport = c.node(1).cluster_port;
    let mut garbage = vec![0u8; 4096];
    let mut x = 0x1234_5678_9abc_def0u64;
    for b in garbage.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("garbage", garbage.clone(), "bad magic"),
        (
            "a node of the previous wire format",
            [handshake_v(b"KVR2", cid, 2, 1), garbage.clone()].concat(),
            "bad magic",
        ),
        (
            "another cluster",
            [handshake(cid ^ 0xdead_beef, 2, 1), garbage.clone()].concat(),
            "is not ours",
        ),
        (
            "unknown node",
            [handshake(cid, 99, 1), garbage.clone()].concat(),
            "is not a member",
        ),
        (
            "frame for another node",
            [handshake(cid, 2, 3), garbage.clone()].concat(),
            "this is node 1",
        ),
    ];
    // A member's handshake without the cluster secret: refused before any
    // frame is read.
    cases.push((
        "member without the secret",
        [
            handshake(cid, 2, 1),
            vec![0u8; 16],
            garbage[..32].to_vec(),
            frame(77, b"x"),
        ]
        .concat(),
        "did not prove the cluster secret",
    ));
    for (what, bytes, logged) in &cases {
        let closed = send_and_wait_close(cport, bytes);
        assert!(closed, "{what}: node 1 kept the connection open");
        let ok = cluster::wait_until(Duration::from_secs(10), || c.log(1).contains(logged));
        assert!(ok, "{what}: node 1 did not log {logged:?}");
        assert!(c.is_running(1), "{what}: node 1 exited");
    }
    // A member that proved the secret, followed by broken frames.
    let mut cases: Vec<(&str, Vec<u8>, Vec<u8>, &str)> = Vec::new();
    let mut bad_raft = 1u32.to_le_bytes().to_vec(); // one message...
    bad_raft.extend_from_slice(&7u64.to_le_bytes()); // ...for group 7...
    bad_raft.extend_from_slice(&64u32.to_le_bytes()); // ...of 64 bytes, cut short
    bad_raft.extend_from_slice(&garbage[..10]);
    cases.push((
        "truncated raft message",
        handshake(cid, 2, 1),
        frame(1, &bad_raft),
        "truncated raft message",
    ));
    cases.push((
        "unknown frame kind",
        handshake(cid, 3, 1),
        frame(77, b"hello"),
        "unknown frame kind",
    ));
    cases.push((
        "fragment without a start",
        handshake(cid, 3, 1),
        frame(4, b"more"),
        "a fragment without a start",
    ));
    let mut huge_first = vec![1u8]; // a raft frame...
    huge_first.extend_from_slice(&(8u64 << 30).to_le_bytes()); // ...of 8 GiB
    cases.push((
        "fragmented frame over the limit",
        handshake(cid, 3, 1),
        frame(3, &huge_first),
        "exceeds the limit",
    ));
    cases.push((
        "snapshot chunk without a start",
        handshake(cid, 2, 1),
        frame(6, b"image"),
        "a snapshot chunk without a start",
    ));
    cases.push((
        "frame one byte over 16 MiB",
        handshake(cid, 2, 1),
        ((16u32 << 20) + 1).to_le_bytes().to_vec(),
        "rejected frame of 16777217 bytes",
    ));
    cases.push((
        "oversized frame",
        handshake(cid, 3, 1),
        u32::MAX.to_le_bytes().to_vec(),
        "rejected frame",
    ));
    for (what, hello, bytes, logged) in &cases {
        let closed = send_authenticated_and_wait_close(cport, hello, SECRET.as_bytes(), bytes);
        assert!(closed, "{what}: node 1 kept the connection open");
        let ok = cluster::wait_until(Duration::from_secs(10), || c.log(1).contains(logged));
        assert!(ok, "{what}: node 1 did not log {logged:?}");
        assert!(c.is_running(1), "{what}: node 1 exited");
    }
    assert!(c.log(1).contains("rejected"));
    c.wait_ready(Duration::from_secs(30));
    for i in 0..300 {
        let k = format!("acked:{i}");
        let v: String = router.retry(&k, &["GET", &k]);
        assert_eq!(v, format!("v{i}"));
    }
    for i in 300..400 {
        let k = format!("acked:{i}");
        let ok: String = router.retry(&k, &["SET", &k, &format!("v{i}")]);
        assert_eq!(ok, "OK");
    }
    println!(
        "node 1 rejected {} bad peers and kept serving",
        cases.len() + 6
    );

    damaged_log_tail(&mut c, Damage::GarbageAfterTail, 400);
    println!("total {:?}", t0.elapsed());
}

/// Kills node 3, writes 100 more keys (`acked` keys were written before),
/// damages the tail of node 3's Raft log and restarts it: it must either
/// recover and catch up, or exit with a clear message; either way the
/// cluster still has every acknowledged key.
fn damaged_log_tail(c: &mut Cluster, how: Damage, acked: usize) {
    let mut router = c.router();
    let victim = 3;
    c.kill(victim);
    for i in acked..acked + 100 {
        let k = format!("acked:{i}");
        let ok: String = router.retry(&k, &["SET", &k, &format!("v{i}")]);
        assert_eq!(ok, "OK");
    }
    let file = cluster::damage_raft_log_tail(&c.node(victim).dir, how);
    println!("damaged the tail of {}", file.display());
    c.restart(victim);
    // Either it recovers and catches up, or it exits with a clear message.
    let deadline = Instant::now() + Duration::from_secs(60);
    let recovered = loop {
        if !c.is_running(victim) {
            break false;
        }
        if c.try_wait_ready(Duration::from_secs(1)).is_ok() && c.digest_mismatches().is_empty() {
            break true;
        }
        assert!(
            Instant::now() < deadline,
            "node {victim} neither recovered nor exited within 60 s (running: {}, CLUSTER INFO: {:?}); mismatching shards: {:?}; log tail:\n{}",
            c.is_running(victim),
            c.cluster_info(victim).map(|s| s.lines().next().unwrap_or_default().to_string()),
            c.digest_mismatches().iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            cluster::tail(&c.log(victim), 12)
        );
    };
    let log = c.log(victim);
    let last_run = log
        .rsplit(&format!("===== harness: starting node {victim}"))
        .next()
        .unwrap()
        .to_string();
    if recovered {
        println!("node {victim} recovered from the damaged log tail and caught up");
        let keys: u64 = (1..=SHARDS)
            .map(|s| c.shard_digest(victim, s).expect("digest").keys)
            .sum();
        assert_eq!(
            keys as usize,
            acked + 100,
            "keys on node {victim} after recovery"
        );
    } else {
        let status = c.wait_exit(victim, Duration::from_secs(5));
        println!(
            "node {victim} refused to start ({status:?}):\n{}",
            cluster::tail(&last_run, 5)
        );
        assert!(
            status.is_some_and(|s| !s.success()),
            "exit status {status:?}"
        );
        // A clear message, not a panic, among the last lines it wrote.
        let last = cluster::tail(&last_run, 8).to_lowercase();
        assert!(
            !last_run.contains("panicked")
                && ["corrupt", "checksum", "truncat", "damaged", "raft log"]
                    .iter()
                    .any(|w| last.contains(w)),
            "no clear message about the damaged log: {last_run}"
        );
    }
    // Nothing acknowledged is lost from the cluster as a whole.
    let mut router = c.router();
    for i in 0..acked + 100 {
        let k = format!("acked:{i}");
        let v: String = router.retry(&k, &["GET", &k]);
        assert_eq!(v, format!("v{i}"), "{k}");
    }
}

#[test]
fn corrupted_recent_log_records_recover_or_refuse() {
    let t0 = Instant::now();
    let mut c = Cluster::start(&[]);
    let mut router = c.router();
    for i in 0..300 {
        let k = format!("acked:{i}");
        let ok: String = router.retry(&k, &["SET", &k, &format!("v{i}")]);
        assert_eq!(ok, "OK");
    }
    damaged_log_tail(&mut c, Damage::CorruptRecentRecords, 300);
    println!("total {:?}", t0.elapsed());
}
