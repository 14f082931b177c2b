//! MULTI / EXEC / DISCARD / WATCH with Redis 7's replies, over real
//! connections.

mod common;

use common::Kvasir;

#[test]
fn exec_runs_queued_commands_in_order_and_replies_with_all_results() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    assert_eq!(c.cmd_str(&["MULTI"]), "+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "a", "1"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_str(&["INCR", "a"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_str(&["GET", "a"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_str(&["EXEC"]), "*3\r\n+OK\r\n:2\r\n$1\r\n2\r\n");
}

#[test]
fn queuing_error_aborts_exec_with_execabort() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["SET", "k", "v"]);
    let err = c.cmd_str(&["GET"]);
    assert_eq!(err, "-ERR wrong number of arguments for 'get' command\r\n");
    assert_eq!(
        c.cmd_str(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // Nothing of the aborted transaction was applied.
    assert_eq!(c.cmd_str(&["EXISTS", "k"]), ":0\r\n");
}

#[test]
fn runtime_errors_inside_exec_do_not_stop_the_other_commands() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    c.cmd_str(&["SET", "s", "notanumber"]);
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["INCR", "s"]);
    c.cmd_str(&["SET", "t", "1"]);
    assert_eq!(
        c.cmd_str(&["EXEC"]),
        "*2\r\n-ERR value is not an integer or out of range\r\n+OK\r\n"
    );
}

#[test]
fn misuse_errors_match_redis() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    assert_eq!(c.cmd_str(&["EXEC"]), "-ERR EXEC without MULTI\r\n");
    assert_eq!(c.cmd_str(&["DISCARD"]), "-ERR DISCARD without MULTI\r\n");
    c.cmd_str(&["MULTI"]);
    assert_eq!(
        c.cmd_str(&["MULTI"]),
        "-ERR MULTI calls can not be nested\r\n"
    );
    assert_eq!(
        c.cmd_str(&["WATCH", "x"]),
        "-ERR WATCH inside MULTI is not allowed\r\n"
    );
    assert_eq!(c.cmd_str(&["DISCARD"]), "+OK\r\n");
    assert_eq!(c.cmd_str(&["PING"]), "+PONG\r\n");
}

#[test]
fn discard_drops_the_queue() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["SET", "k", "v"]);
    assert_eq!(c.cmd_str(&["DISCARD"]), "+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "k"]), "$-1\r\n");
}

#[test]
fn watch_aborts_exec_when_another_client_writes_the_key() {
    let server = Kvasir::start(&[]);
    let mut a = server.conn();
    let mut b = server.conn();
    let _: () = redis::cmd("SET")
        .arg("balance")
        .arg(10)
        .query(&mut a)
        .expect("set");
    let _: () = redis::cmd("WATCH")
        .arg("balance")
        .query(&mut a)
        .expect("watch");
    let _: () = redis::cmd("SET")
        .arg("balance")
        .arg(20)
        .query(&mut b)
        .expect("set by b");
    let _: () = redis::cmd("MULTI").query(&mut a).expect("multi");
    let _: () = redis::cmd("SET")
        .arg("balance")
        .arg(0)
        .query(&mut a)
        .expect("queued");
    let res: Option<Vec<String>> = redis::cmd("EXEC").query(&mut a).expect("exec");
    assert_eq!(res, None, "EXEC must fail after a watched key changed");
    let v: i64 = redis::cmd("GET").arg("balance").query(&mut a).expect("get");
    assert_eq!(v, 20);
}

#[test]
fn watch_lets_exec_through_when_nothing_changed_and_unwatch_forgets() {
    let server = Kvasir::start(&[]);
    let mut a = server.conn();
    let mut b = server.conn();
    let _: () = redis::cmd("WATCH").arg("k").query(&mut a).expect("watch");
    let _: () = redis::cmd("SET")
        .arg("other")
        .arg(1)
        .query(&mut b)
        .expect("set other");
    let _: () = redis::cmd("MULTI").query(&mut a).expect("multi");
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("mine")
        .query(&mut a)
        .expect("queued");
    let res: Option<Vec<String>> = redis::cmd("EXEC").query(&mut a).expect("exec");
    assert_eq!(res, Some(vec!["OK".to_string()]));

    let _: () = redis::cmd("WATCH").arg("k").query(&mut a).expect("watch");
    let _: () = redis::cmd("UNWATCH").query(&mut a).expect("unwatch");
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("theirs")
        .query(&mut b)
        .expect("set by b");
    let _: () = redis::cmd("MULTI").query(&mut a).expect("multi");
    let _: () = redis::cmd("GET").arg("k").query(&mut a).expect("queued");
    let res: Option<Vec<String>> = redis::cmd("EXEC").query(&mut a).expect("exec");
    assert_eq!(res, Some(vec!["theirs".to_string()]));
}

#[test]
fn watch_is_dirtied_by_flushall_and_by_expiry() {
    let server = Kvasir::start(&[]);
    let mut a = server.raw_conn();
    let mut b = server.raw_conn();
    a.cmd_str(&["SET", "k", "v"]);
    a.cmd_str(&["WATCH", "k"]);
    b.cmd_str(&["FLUSHALL"]);
    a.cmd_str(&["MULTI"]);
    a.cmd_str(&["PING"]);
    assert_eq!(a.cmd_str(&["EXEC"]), "*-1\r\n");

    a.cmd_str(&["SET", "t", "v", "PX", "50"]);
    a.cmd_str(&["WATCH", "t"]);
    std::thread::sleep(std::time::Duration::from_millis(120));
    a.cmd_str(&["MULTI"]);
    a.cmd_str(&["PING"]);
    assert_eq!(a.cmd_str(&["EXEC"]), "*-1\r\n");
}

#[test]
fn redis_rs_atomic_pipeline_works() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let (x, y): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCRBY")
        .arg("x")
        .arg(5)
        .cmd("INCRBY")
        .arg("x")
        .arg(7)
        .query(&mut c)
        .expect("atomic pipe");
    assert_eq!((x, y), (5, 12));
}

/// WATCH is dirtied only by writes that change the key, as in Redis 7.0
/// (its multi.tcl): FLUSHALL/FLUSHDB touch only watched keys that existed,
/// SETNX that does not set, DEL of a missing key, SADD of a present member
/// or EXPIRE of a missing key leave the watch clean, while SET to the same
/// value dirties it. Every script runs on Kvasir and redis-server 7.0.15
/// and the EXEC replies must be equal byte for byte.
#[test]
fn watch_is_dirtied_only_by_real_changes_like_redis() {
    let server = Kvasir::start(&[]);
    let (_redis, redis_port) = common::redis_server::start_redis();
    let scripts: &[(&str, &[&[&str]])] = &[
        (
            "flushall, key missing",
            &[&["DEL", "x"], &["WATCH", "x"], &["FLUSHALL"]],
        ),
        (
            "flushall, key present",
            &[&["SET", "x", "30"], &["WATCH", "x"], &["FLUSHALL"]],
        ),
        (
            "flushdb, key missing",
            &[&["DEL", "x"], &["WATCH", "x"], &["FLUSHDB"]],
        ),
        (
            "flushdb, key present",
            &[&["SET", "x", "30"], &["WATCH", "x"], &["FLUSHDB"]],
        ),
        (
            "flushdb, other db",
            &[
                &["SET", "x", "1"],
                &["WATCH", "x"],
                &["SELECT", "1"],
                &["FLUSHDB"],
                &["SELECT", "0"],
            ],
        ),
        (
            "setnx not set",
            &[&["SET", "x", "1"], &["WATCH", "x"], &["SETNX", "x", "2"]],
        ),
        (
            "setnx set",
            &[&["DEL", "x"], &["WATCH", "x"], &["SETNX", "x", "2"]],
        ),
        (
            "del missing",
            &[&["DEL", "y"], &["WATCH", "y"], &["DEL", "y"]],
        ),
        (
            "sadd present",
            &[
                &["DEL", "s"],
                &["SADD", "s", "a"],
                &["WATCH", "s"],
                &["SADD", "s", "a"],
            ],
        ),
        (
            "srem absent",
            &[
                &["DEL", "s"],
                &["SADD", "s", "a"],
                &["WATCH", "s"],
                &["SREM", "s", "b"],
            ],
        ),
        (
            "expire missing",
            &[&["DEL", "z"], &["WATCH", "z"], &["EXPIRE", "z", "10"]],
        ),
        (
            "lpushx missing",
            &[&["DEL", "l"], &["WATCH", "l"], &["LPUSHX", "l", "a"]],
        ),
        (
            "set same value",
            &[&["SET", "x", "1"], &["WATCH", "x"], &["SET", "x", "1"]],
        ),
        (
            "hdel absent",
            &[
                &["DEL", "h"],
                &["HSET", "h", "f", "v"],
                &["WATCH", "h"],
                &["HDEL", "h", "g"],
            ],
        ),
    ];
    for (name, script) in scripts {
        let mut outcomes = Vec::new();
        for port in [server.port, redis_port] {
            let mut c = common::RawConn::to_port(port);
            c.cmd_str(&["FLUSHALL"]);
            for cmd in script.iter() {
                c.cmd_str(cmd);
            }
            c.cmd_str(&["MULTI"]);
            c.cmd_str(&["PING"]);
            outcomes.push(c.cmd_str(&["EXEC"]));
        }
        assert_eq!(outcomes[0], outcomes[1], "{name}: Kvasir vs Redis");
    }
}
