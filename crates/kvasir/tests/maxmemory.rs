//! maxmemory with the noeviction policy, side by side with redis-server:
//! over the limit, commands that may grow the data get Redis's OOM error
//! (alone, queued in MULTI, or in a queue EXEC would run), while reads and
//! deletions go on; back under it, writes work again.

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use cluster::{Cluster, NODES};
use common::redis_server::start_redis;
use common::{Kvasir, RawConn};
use std::time::Duration;

/// One connection's commands and the raw replies they got, with the limit
/// changed between steps from a second connection (as an operator would).
fn session(port: u16) -> Vec<String> {
    let mut c = RawConn::to_port(port);
    let mut admin = RawConn::to_port(port);
    let mut out = Vec::new();
    let mut run = |c: &mut RawConn, args: &[&str]| out.push(c.cmd_str(args));
    run(&mut c, &["SET", "kept", "1"]);
    run(&mut c, &["RPUSH", "list", "a", "b"]);
    run(&mut admin, &["CONFIG", "SET", "maxmemory", "1"]);
    // Over the limit: writes that may grow the data are refused...
    run(&mut c, &["SET", "k", "v"]);
    run(&mut c, &["INCR", "counter"]);
    run(&mut c, &["RPUSH", "list", "c"]);
    run(&mut c, &["HSET", "h", "f", "v"]);
    // ...reads, deletions and shrinking writes are not.
    run(&mut c, &["GET", "kept"]);
    run(&mut c, &["LRANGE", "list", "0", "-1"]);
    run(&mut c, &["LPOP", "list"]);
    run(&mut c, &["DEL", "kept"]);
    run(&mut c, &["EXISTS", "kept"]);
    // A refused command in MULTI aborts the transaction.
    run(&mut c, &["MULTI"]);
    run(&mut c, &["GET", "k"]);
    run(&mut c, &["SET", "k", "v"]);
    run(&mut c, &["EXEC"]);
    // Queued while memory allowed it, refused when EXEC runs.
    run(&mut admin, &["CONFIG", "SET", "maxmemory", "0"]);
    run(&mut c, &["MULTI"]);
    run(&mut c, &["SET", "k", "queued"]);
    run(&mut admin, &["CONFIG", "SET", "maxmemory", "1"]);
    run(&mut c, &["EXEC"]);
    run(&mut c, &["GET", "k"]);
    // Back under the limit, writes work again.
    run(&mut admin, &["CONFIG", "SET", "maxmemory", "0"]);
    run(&mut c, &["SET", "k", "v"]);
    run(&mut c, &["GET", "k"]);
    run(&mut admin, &["CONFIG", "GET", "maxmemory-policy"]);
    out
}

#[test]
fn over_maxmemory_writes_are_refused_as_redis_noeviction_does() {
    let (_redis, redis_port) = start_redis();
    let kvasir = Kvasir::start(&[]);
    let ours = session(kvasir.port);
    let theirs = session(redis_port);
    assert!(
        ours.iter()
            .any(|r| r == "-OOM command not allowed when used memory > 'maxmemory'.\r\n"),
        "{ours:?}"
    );
    assert_eq!(ours, theirs);
}

/// In cluster mode the limit is each node's own (CONFIG SET is node-local):
/// the leader that admits a write refuses it, while reads and deletions go
/// on, and every replica still holds the same content.
#[test]
fn cluster_nodes_refuse_writes_over_their_maxmemory() {
    let mut c = Cluster::start(&[]);
    let slot = cluster::key_slot(b"mm");
    let leader = c.wait_leader_of_slot(slot, Duration::from_secs(10));
    let set = |c: &Cluster, v: &str| -> Result<String, String> {
        c.query::<String>(leader, &["SET", "mm", v])
            .map_err(|e| common::error_text(&e))
    };
    assert_eq!(set(&c, "1"), Ok("OK".into()));
    for id in 1..=NODES {
        let _: () = c
            .query(id, &["CONFIG", "SET", "maxmemory", "1"])
            .expect("config set");
    }
    let refused = set(&c, "2").expect_err("refused over maxmemory");
    assert!(
        refused.starts_with("OOM command not allowed when used memory > 'maxmemory'."),
        "{refused}"
    );
    let got: Option<String> = c.query(leader, &["GET", "mm"]).expect("get");
    assert_eq!(got.as_deref(), Some("1"));
    let deleted: i64 = c.query(leader, &["DEL", "mm"]).expect("del");
    assert_eq!(deleted, 1);
    for id in 1..=NODES {
        let _: () = c
            .query(id, &["CONFIG", "SET", "maxmemory", "0"])
            .expect("config set");
    }
    assert_eq!(set(&c, "3"), Ok("OK".into()));
    c.wait_digests_equal(Duration::from_secs(20));
}
