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

/// `io_thread_routed_commands` of INFO raft: requests the node's I/O
/// threads handed to their shard's loop themselves.
fn routed(c: &Cluster, id: u64) -> u64 {
    let info: String = c.query(id, &["INFO", "raft"]).expect("info raft");
    info.lines()
        .find_map(|l| l.strip_prefix("io_thread_routed_commands:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("io_thread_routed_commands in INFO raft")
}

fn info_field(info: &str, line_prefix: &str, field: &str) -> Option<u64> {
    let line = info.lines().find(|l| l.starts_with(line_prefix))?;
    line.split([',', ':'])
        .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))
        .and_then(|n| n.parse().ok())
}

/// `args` as a RESP multibulk request (what clients send; inline
/// requests are parsed by the session).
fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// Sends `request` on a raw connection and reads until the reply bytes
/// end with `until` (or 5 s pass).
fn raw_exchange(s: &mut std::net::TcpStream, request: &[u8], until: &[u8]) -> Vec<u8> {
    use std::io::{Read, Write};
    s.write_all(request).expect("write");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(until) && std::time::Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("read: {e}"),
        }
    }
    got
}

/// With I/O threads in cluster mode the I/O thread hands a plain keyed
/// request to its shard's loop itself and writes the reply: replies stay
/// in request order among requests the session answers, in either
/// protocol, after the client half-closes too; the calls are counted as
/// the session counts them; and MONITOR (which the session must feed)
/// sends every request through the session again.
#[test]
fn io_threads_route_plain_requests_to_their_shard_in_order() {
    let mut c = Cluster::start(&["--threads", "2"]);
    let slot = cluster::key_slot(b"{d}");
    let leader = c.wait_leader_of_slot(slot, Duration::from_secs(10));
    let port = c.port(leader);
    let mut conn = c.conn(leader);
    let _: () = redis::cmd("SET")
        .arg("{d}n")
        .arg(0)
        .query(&mut conn)
        .expect("set");
    let client_id: u64 = redis::cmd("CLIENT")
        .arg("ID")
        .query(&mut conn)
        .expect("client id");

    // One request at a time: the session answered everything before
    // each, so every one goes directly.
    let before = routed(&c, leader);
    for i in 1..=50 {
        let n: i64 = redis::cmd("INCR")
            .arg("{d}n")
            .query(&mut conn)
            .expect("incr");
        assert_eq!(n, i);
    }
    let direct = routed(&c, leader) - before;
    assert!(
        direct >= 50,
        "{direct} of 50 INCRs routed by the I/O thread"
    );
    // A connection whose first request, a write, the session proposed:
    // the next ones go directly all the same.
    let mut fresh = c.conn(leader);
    let _: () = redis::cmd("SET")
        .arg("{d}f")
        .arg(0)
        .query(&mut fresh)
        .expect("set");
    let before = routed(&c, leader);
    for _ in 0..20 {
        let _: i64 = redis::cmd("INCR")
            .arg("{d}f")
            .query(&mut fresh)
            .expect("incr");
    }
    let direct = routed(&c, leader) - before;
    assert!(
        direct >= 20,
        "{direct} of 20 INCRs after a SET routed directly"
    );
    drop(fresh);
    let list: String = c.query(leader, &["CLIENT", "LIST"]).expect("client list");
    let line = list
        .lines()
        .find(|l| l.starts_with(&format!("id={client_id} ")))
        .expect("the connection in CLIENT LIST");
    assert!(line.contains(" cmd=incr "), "{line}");

    // A pipeline mixing requests the I/O thread routes (INCR, GET) with
    // ones only the session answers (ECHO, OBJECT ENCODING): in order.
    let mut pipe = redis::pipe();
    for i in 0..100 {
        pipe.cmd("INCR").arg("{d}n");
        pipe.cmd("ECHO").arg(i);
        pipe.cmd("GET").arg("{d}n");
        pipe.cmd("OBJECT").arg("ENCODING").arg("{d}n");
    }
    let replies: Vec<redis::Value> = pipe.query(&mut conn).expect("pipeline");
    assert_eq!(replies.len(), 400);
    for i in 0..100usize {
        let at = &replies[4 * i..4 * i + 4];
        let n = 51 + i as i64;
        assert_eq!(at[0], redis::Value::Int(n), "INCR #{i}");
        let echo: String = redis::from_redis_value(at[1].clone()).expect("echo");
        assert_eq!(echo, i.to_string(), "ECHO #{i}");
        let got: i64 = redis::from_redis_value(at[2].clone()).expect("get");
        assert_eq!(got, n, "GET #{i}");
        let enc: String = redis::from_redis_value(at[3].clone()).expect("encoding");
        assert_eq!(enc, "int", "OBJECT ENCODING #{i}");
    }

    // Routed writes in flight (a Raft round each) before a request the
    // session answers at once: its reply still comes after theirs.
    for round in 0..5 {
        let mut pipe = redis::pipe();
        for _ in 0..20 {
            pipe.cmd("INCR").arg("{d}w");
        }
        pipe.cmd("ECHO").arg("after");
        let replies: Vec<redis::Value> = pipe.query(&mut conn).expect("pipeline");
        for (i, r) in replies[..20].iter().enumerate() {
            assert_eq!(
                *r,
                redis::Value::Int(round * 20 + i as i64 + 1),
                "round {round}"
            );
        }
        let echo: String = redis::from_redis_value(replies[20].clone()).expect("echo");
        assert_eq!(echo, "after");
    }

    // Reads and writes of one pipeline see each other in request order:
    // a read after a write of its shard goes with the write's entry, and
    // a write after reads in flight waits for them (the session's rule).
    // A tag of another shard this node leads (slots over 1000 apart are
    // never in one of the 24 shards' ranges of 683).
    let other_tag = (0..2000)
        .map(|i| format!("o{i}"))
        .find(|t| {
            let s = cluster::key_slot(t.as_bytes());
            s.abs_diff(slot) > 1000 && c.wait_leader_of_slot(s, Duration::from_secs(10)) == leader
        })
        .expect("another shard led by the same node");
    for round in 0..10i64 {
        let key = format!("{{d}}rw{round}");
        let other = format!("{{{other_tag}}}rw{round}");
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(&key);
        pipe.cmd("SET").arg(&key).arg(1);
        pipe.cmd("GET").arg(&key);
        pipe.cmd("INCR").arg(&key);
        pipe.cmd("GET").arg(&key);
        pipe.cmd("GET").arg(&other);
        pipe.cmd("SET").arg(&key).arg("last");
        pipe.cmd("GET").arg(&key);
        let replies: Vec<redis::Value> = pipe.query(&mut conn).expect("pipeline");
        let text = |v: &redis::Value| -> Option<String> { redis::from_redis_value(v.clone()).ok() };
        assert_eq!(
            replies[0],
            redis::Value::Nil,
            "round {round}: GET before SET"
        );
        assert_eq!(replies[1], redis::Value::Okay);
        assert_eq!(text(&replies[2]).as_deref(), Some("1"), "round {round}");
        assert_eq!(replies[3], redis::Value::Int(2));
        assert_eq!(text(&replies[4]).as_deref(), Some("2"), "round {round}");
        assert_eq!(replies[5], redis::Value::Nil);
        assert_eq!(replies[6], redis::Value::Okay);
        assert_eq!(text(&replies[7]).as_deref(), Some("last"), "round {round}");
    }

    // Counted as the session counts: every INCR is a call of INCR.
    let stats: String = c
        .query(leader, &["INFO", "commandstats"])
        .expect("commandstats");
    assert_eq!(
        info_field(&stats, "cmdstat_incr:", "calls"),
        Some(280),
        "{stats}"
    );

    // RESP3 replies encoded by the I/O thread, and replies of requests
    // sent before the client half-closed.
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    raw.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let get_missing = resp(&["GET", "{d}missing"]);
    raw_exchange(&mut raw, b"HELLO 3\r\nPING\r\n", b"+PONG\r\n");
    let before = routed(&c, leader);
    let nil = raw_exchange(&mut raw, &get_missing, b"\r\n");
    assert_eq!(nil, b"_\r\n", "RESP3 null");
    raw_exchange(&mut raw, b"HELLO 2\r\nPING\r\n", b"+PONG\r\n");
    let nil = raw_exchange(&mut raw, &get_missing, b"\r\n");
    assert_eq!(nil, b"$-1\r\n", "RESP2 null");
    assert!(routed(&c, leader) - before >= 2);
    raw.shutdown(std::net::Shutdown::Write).ok();
    drop(raw);
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    raw.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    raw_exchange(&mut raw, b"PING\r\n", b"+PONG\r\n");
    {
        use std::io::Write;
        raw.write_all(&resp(&["INCR", "{d}n"]).repeat(3))
            .expect("write");
    }
    raw.shutdown(std::net::Shutdown::Write).expect("half-close");
    let rest = raw_exchange(&mut raw, b"", b":153\r\n");
    assert_eq!(rest, b":151\r\n:152\r\n:153\r\n");

    // MONITOR: the session must feed it, so requests go through it while
    // a monitor is connected, and directly again once it left.
    let mut monitor = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    monitor
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    raw_exchange(&mut monitor, b"MONITOR\r\n", b"+OK\r\n");
    let before = routed(&c, leader);
    let _: i64 = redis::cmd("INCR")
        .arg("{d}n")
        .query(&mut conn)
        .expect("incr");
    let fed = raw_exchange(&mut monitor, b"", b"\"INCR\" \"{d}n\"\r\n");
    assert!(
        fed.ends_with(b"\"INCR\" \"{d}n\"\r\n"),
        "MONITOR got {:?}",
        String::from_utf8_lossy(&fed)
    );
    assert_eq!(routed(&c, leader), before, "nothing routed past MONITOR");
    drop(monitor);
    let again = wait_until(Duration::from_secs(10), || {
        let before = routed(&c, leader);
        let _: i64 = redis::cmd("INCR")
            .arg("{d}n")
            .query(&mut conn)
            .expect("incr");
        routed(&c, leader) > before
    });
    assert!(again, "routed directly again after MONITOR left");

    // The idle timeout sees requests that skipped the session: a client
    // that only sends those for longer than `timeout` stays connected.
    let _: () = c
        .query(leader, &["CONFIG", "SET", "timeout", "1"])
        .expect("config set timeout");
    let before = routed(&c, leader);
    let until = std::time::Instant::now() + Duration::from_millis(2500);
    while std::time::Instant::now() < until {
        let _: i64 = redis::cmd("INCR")
            .arg("{d}n")
            .query(&mut conn)
            .expect("a client busy with direct requests is not idle");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        routed(&c, leader) - before >= 10,
        "routed with a timeout set"
    );
    let _: () = c
        .query(leader, &["CONFIG", "SET", "timeout", "0"])
        .expect("config set timeout");
}
