//! maxmemory with the noeviction policy, side by side with redis-server:
//! over the limit, commands that may grow the data get Redis's OOM error
//! (alone, queued in MULTI, or in a queue EXEC would run), while reads and
//! deletions go on; back under it, writes work again.

mod common;

use common::redis_server::start_redis;
use common::{Kvasir, RawConn};

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
