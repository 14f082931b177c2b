//! Blocking pops (BLPOP, BRPOP, BLMOVE, BLMPOP, BZPOPMIN...) woken by
//! writes from other connections, with timeouts and arrival-order fairness.

mod common;

use common::Kvasir;
use std::thread;
use std::time::{Duration, Instant};

/// Sends a blocking command on its own raw connection and returns a handle
/// that yields the raw reply.
fn block(server: &Kvasir, args: &[&str]) -> thread::JoinHandle<(String, Duration)> {
    let mut conn = server.raw_conn();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let handle = thread::spawn(move || {
        let started = Instant::now();
        let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
        let reply = conn.cmd_str(&refs);
        (reply, started.elapsed())
    });
    handle
}

/// Waits until INFO reports `n` blocked clients (bounded).
fn wait_blocked(server: &Kvasir, n: usize) {
    let mut c = server.conn();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query(&mut c)
            .expect("info");
        if info.contains(&format!("blocked_clients:{n}\r\n")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {n} blocked clients: {info}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn blpop_wakes_on_push_from_other_client() {
    let server = Kvasir::start(&[]);
    let waiter = block(&server, &["BLPOP", "jobs", "0"]);
    wait_blocked(&server, 1);
    let mut c = server.conn();
    let _: i64 = redis::cmd("RPUSH")
        .arg("jobs")
        .arg("job-1")
        .query(&mut c)
        .expect("push");
    let (reply, _) = waiter.join().expect("waiter");
    assert_eq!(reply, "*2\r\n$4\r\njobs\r\n$5\r\njob-1\r\n");
    let len: i64 = redis::cmd("LLEN").arg("jobs").query(&mut c).expect("llen");
    assert_eq!(len, 0, "the element was consumed exactly once");
}

#[test]
fn blpop_returns_at_once_when_data_exists_and_checks_keys_in_order() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    c.cmd_str(&["RPUSH", "b", "x"]);
    assert_eq!(
        c.cmd_str(&["BLPOP", "a", "b", "1"]),
        "*2\r\n$1\r\nb\r\n$1\r\nx\r\n"
    );
}

#[test]
fn blpop_times_out_with_a_nil_array_after_a_fractional_timeout() {
    let server = Kvasir::start(&[]);
    let (reply, took) = block(&server, &["BLPOP", "empty", "0.3"])
        .join()
        .expect("waiter");
    assert_eq!(reply, "*-1\r\n");
    assert!(
        took >= Duration::from_millis(280),
        "returned after {took:?}"
    );
    assert!(took < Duration::from_secs(5), "returned after {took:?}");
    let (reply, _) = block(&server, &["BLMOVE", "empty", "dst", "LEFT", "RIGHT", "0.1"])
        .join()
        .expect("waiter");
    assert_eq!(reply, "$-1\r\n", "BLMOVE times out with a nil bulk");
}

#[test]
fn blocked_clients_are_served_in_arrival_order() {
    let server = Kvasir::start(&[]);
    let first = block(&server, &["BRPOP", "q", "5"]);
    wait_blocked(&server, 1);
    let second = block(&server, &["BRPOP", "q", "5"]);
    wait_blocked(&server, 2);
    let mut c = server.conn();
    let _: i64 = redis::cmd("LPUSH")
        .arg("q")
        .arg("one")
        .query(&mut c)
        .expect("push");
    let (r1, _) = first.join().expect("first");
    assert_eq!(r1, "*2\r\n$1\r\nq\r\n$3\r\none\r\n");
    wait_blocked(&server, 1);
    let _: i64 = redis::cmd("LPUSH")
        .arg("q")
        .arg("two")
        .query(&mut c)
        .expect("push");
    let (r2, _) = second.join().expect("second");
    assert_eq!(r2, "*2\r\n$1\r\nq\r\n$3\r\ntwo\r\n");
}

#[test]
fn one_push_of_many_elements_serves_several_blocked_clients() {
    let server = Kvasir::start(&[]);
    let a = block(&server, &["BLPOP", "q", "5"]);
    wait_blocked(&server, 1);
    let b = block(&server, &["BLPOP", "q", "5"]);
    wait_blocked(&server, 2);
    let mut c = server.conn();
    let _: i64 = redis::cmd("RPUSH")
        .arg("q")
        .arg("x")
        .arg("y")
        .arg("z")
        .query(&mut c)
        .expect("push");
    assert_eq!(a.join().expect("a").0, "*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
    assert_eq!(b.join().expect("b").0, "*2\r\n$1\r\nq\r\n$1\r\ny\r\n");
    let rest: Vec<String> = redis::cmd("LRANGE")
        .arg("q")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .expect("lrange");
    assert_eq!(rest, vec!["z"]);
}

#[test]
fn blmove_chain_wakes_a_client_blocked_on_the_destination() {
    let server = Kvasir::start(&[]);
    let mover = block(&server, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "5"]);
    wait_blocked(&server, 1);
    let consumer = block(&server, &["BLPOP", "dst", "5"]);
    wait_blocked(&server, 2);
    let mut c = server.conn();
    let _: i64 = redis::cmd("RPUSH")
        .arg("src")
        .arg("m")
        .query(&mut c)
        .expect("push");
    assert_eq!(mover.join().expect("mover").0, "$1\r\nm\r\n");
    assert_eq!(
        consumer.join().expect("consumer").0,
        "*2\r\n$3\r\ndst\r\n$1\r\nm\r\n"
    );
}

#[test]
fn bzpopmin_wakes_on_zadd_and_blmpop_pops_counts() {
    let server = Kvasir::start(&[]);
    let z = block(&server, &["BZPOPMIN", "board", "5"]);
    wait_blocked(&server, 1);
    let mut c = server.conn();
    let _: i64 = redis::cmd("ZADD")
        .arg("board")
        .arg(3)
        .arg("c")
        .arg(1)
        .arg("a")
        .query(&mut c)
        .expect("zadd");
    assert_eq!(
        z.join().expect("z").0,
        "*3\r\n$5\r\nboard\r\n$1\r\na\r\n$1\r\n1\r\n"
    );

    let m = block(
        &server,
        &["BLMPOP", "5", "2", "l1", "l2", "RIGHT", "COUNT", "2"],
    );
    wait_blocked(&server, 1);
    let _: i64 = redis::cmd("RPUSH")
        .arg("l2")
        .arg("p")
        .arg("q")
        .arg("r")
        .query(&mut c)
        .expect("push");
    assert_eq!(
        m.join().expect("m").0,
        "*2\r\n$2\r\nl2\r\n*2\r\n$1\r\nr\r\n$1\r\nq\r\n"
    );
}

#[test]
fn blocking_commands_inside_multi_answer_immediately() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["BLPOP", "nothing", "0"]);
    c.cmd_str(&["BZPOPMAX", "nothing", "0"]);
    assert_eq!(c.cmd_str(&["EXEC"]), "*2\r\n*-1\r\n*-1\r\n");
}

#[test]
fn bad_timeouts_are_rejected_before_blocking() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    assert_eq!(
        c.cmd_str(&["BLPOP", "k", "-1"]),
        "-ERR timeout is negative\r\n"
    );
    assert_eq!(
        c.cmd_str(&["BLPOP", "k", "soon"]),
        "-ERR timeout is not a float or out of range\r\n"
    );
    assert_eq!(
        c.cmd_str(&["BZPOPMIN", "k", "-0.5"]),
        "-ERR timeout is negative\r\n"
    );
}

#[test]
fn a_disconnected_blocked_client_is_not_served() {
    let server = Kvasir::start(&[]);
    {
        let mut gone = server.raw_conn();
        gone.send(&common::encode_cmd(&[b"BLPOP", b"q", b"0"]));
        wait_blocked(&server, 1);
    }
    wait_blocked(&server, 0);
    let mut c = server.conn();
    let _: i64 = redis::cmd("RPUSH")
        .arg("q")
        .arg("kept")
        .query(&mut c)
        .expect("push");
    let len: i64 = redis::cmd("LLEN").arg("q").query(&mut c).expect("llen");
    assert_eq!(
        len, 1,
        "nobody may consume on behalf of a closed connection"
    );
}

#[test]
fn requests_pipelined_after_a_blocking_command_wait_for_it() {
    let server = Kvasir::start(&[]);
    let mut c = server.raw_conn();
    let mut pipeline = common::encode_cmd(&[b"BLPOP", b"q", b"5"]);
    pipeline.extend(common::encode_cmd(&[b"PING"]));
    c.send(&pipeline);
    wait_blocked(&server, 1);
    assert!(c.read_reply_within(Duration::from_millis(100)).is_none());
    let mut p = server.conn();
    let _: i64 = redis::cmd("RPUSH")
        .arg("q")
        .arg("v")
        .query(&mut p)
        .expect("push");
    assert_eq!(c.read_reply(), b"*2\r\n$1\r\nq\r\n$1\r\nv\r\n");
    assert_eq!(c.read_reply(), b"+PONG\r\n");
}

#[test]
fn exec_serves_blocked_clients_only_after_the_whole_transaction() {
    let server = Kvasir::start(&[]);
    let waiter = block(&server, &["BLPOP", "q", "5"]);
    wait_blocked(&server, 1);
    let mut c = server.raw_conn();
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["RPUSH", "q", "a"]);
    c.cmd_str(&["LLEN", "q"]);
    assert_eq!(c.cmd_str(&["EXEC"]), "*2\r\n:1\r\n:1\r\n");
    assert_eq!(
        waiter.join().expect("waiter").0,
        "*2\r\n$1\r\nq\r\n$1\r\na\r\n"
    );
    assert_eq!(c.cmd_str(&["LLEN", "q"]), ":0\r\n");
}

/// A key pushed, deleted and recreated as a string by one MULTI leaves a
/// client blocked on it blocked (Redis serves blocked clients only from a
/// key of the type they pop), and a later push serves it.
#[test]
fn key_recreated_as_another_type_in_multi_keeps_the_client_blocked() {
    let server = Kvasir::start(&[]);
    let waiter = block(&server, &["BLPOP", "l", "0"]);
    wait_blocked(&server, 1);
    let mut c = server.conn();
    let replies: redis::Value = redis::pipe()
        .atomic()
        .cmd("LPUSH")
        .arg("l")
        .arg("x")
        .cmd("DEL")
        .arg("l")
        .cmd("SET")
        .arg("l")
        .arg("foo")
        .query(&mut c)
        .expect("exec");
    assert_eq!(
        replies,
        redis::Value::Array(vec![
            redis::Value::Int(1),
            redis::Value::Int(1),
            redis::Value::Okay
        ])
    );
    thread::sleep(Duration::from_millis(200));
    assert!(!waiter.is_finished(), "the waiter was answered");
    wait_blocked(&server, 1);
    // Still blocked on the string: a write to it serves nobody.
    let _: () = redis::cmd("SET")
        .arg("l")
        .arg("bar")
        .query(&mut c)
        .expect("set");
    thread::sleep(Duration::from_millis(100));
    assert!(!waiter.is_finished());
    let _: i64 = redis::cmd("DEL").arg("l").query(&mut c).expect("del");
    let _: i64 = redis::cmd("RPUSH")
        .arg("l")
        .arg("y")
        .query(&mut c)
        .expect("push");
    let (reply, _) = waiter.join().expect("waiter");
    assert_eq!(reply, "*2\r\n$1\r\nl\r\n$1\r\ny\r\n");
}
