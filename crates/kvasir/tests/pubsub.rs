//! Pub/Sub with pattern subscriptions, in RESP2 (arrays) and RESP3 (push).

mod common;

use common::Kvasir;
use std::time::Duration;

#[test]
fn subscribers_receive_published_messages_and_publish_counts_them() {
    let server = Kvasir::start(&[]);
    let mut sub = server.raw_conn();
    assert_eq!(
        sub.cmd_str(&["SUBSCRIBE", "news", "sport"]),
        "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
    );
    let second = sub.read_reply();
    assert_eq!(second, b"*3\r\n$9\r\nsubscribe\r\n$5\r\nsport\r\n:2\r\n");
    let mut psub = server.raw_conn();
    assert_eq!(
        psub.cmd_str(&["PSUBSCRIBE", "n*"]),
        "*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:1\r\n"
    );

    let mut c = server.conn();
    let n: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("hello")
        .query(&mut c)
        .expect("publish");
    assert_eq!(n, 2, "one channel subscriber and one pattern subscriber");
    assert_eq!(
        sub.read_reply(),
        b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
    );
    assert_eq!(
        psub.read_reply(),
        b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
    );
    let n: i64 = redis::cmd("PUBLISH")
        .arg("nobody")
        .arg("x")
        .query(&mut c)
        .expect("publish");
    assert_eq!(n, 1, "only the n* pattern matches");
    let n: i64 = redis::cmd("PUBLISH")
        .arg("weather")
        .arg("x")
        .query(&mut c)
        .expect("publish");
    assert_eq!(n, 0);
}

#[test]
fn resp3_subscribers_get_push_frames_and_can_run_other_commands() {
    let server = Kvasir::start(&[]);
    let mut sub = server.raw_conn();
    let hello = sub.cmd_str(&["HELLO", "3"]);
    assert!(hello.starts_with("%7\r\n"), "{hello}");
    assert_eq!(
        sub.cmd_str(&["SUBSCRIBE", "ch"]),
        ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    );
    // RESP3 connections are not restricted while subscribed.
    assert_eq!(sub.cmd_str(&["SET", "k", "v"]), "+OK\r\n");
    let mut c = server.conn();
    let _: i64 = redis::cmd("PUBLISH")
        .arg("ch")
        .arg("m")
        .query(&mut c)
        .expect("publish");
    assert_eq!(
        sub.read_reply(),
        b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n"
    );
}

#[test]
fn resp2_subscribed_mode_allows_only_pubsub_commands_and_ping() {
    let server = Kvasir::start(&[]);
    let mut sub = server.raw_conn();
    sub.cmd_str(&["SUBSCRIBE", "ch"]);
    assert_eq!(
        sub.cmd_str(&["GET", "k"]),
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    );
    assert_eq!(sub.cmd_str(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(
        sub.cmd_str(&["PING", "hi"]),
        "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n"
    );
    assert_eq!(
        sub.cmd_str(&["UNSUBSCRIBE"]),
        "*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n"
    );
    assert_eq!(sub.cmd_str(&["GET", "k"]), "$-1\r\n");
    assert_eq!(
        sub.cmd_str(&["UNSUBSCRIBE"]),
        "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
    );
}

#[test]
fn pubsub_introspection_counts_channels_and_patterns() {
    let server = Kvasir::start(&[]);
    let mut a = server.raw_conn();
    let mut b = server.raw_conn();
    a.cmd_str(&["SUBSCRIBE", "alpha"]);
    b.cmd_str(&["SUBSCRIBE", "alpha"]);
    b.read_reply_within(Duration::from_millis(10));
    b.cmd_str(&["PSUBSCRIBE", "a*"]);
    let mut c = server.raw_conn();
    assert_eq!(c.cmd_str(&["PUBSUB", "CHANNELS"]), "*1\r\n$5\r\nalpha\r\n");
    assert_eq!(c.cmd_str(&["PUBSUB", "CHANNELS", "b*"]), "*0\r\n");
    assert_eq!(
        c.cmd_str(&["PUBSUB", "NUMSUB", "alpha", "beta"]),
        "*4\r\n$5\r\nalpha\r\n:2\r\n$4\r\nbeta\r\n:0\r\n"
    );
    assert_eq!(c.cmd_str(&["PUBSUB", "NUMPAT"]), ":1\r\n");
    drop(a);
    // A closed subscriber is forgotten.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let reply = c.cmd_str(&["PUBSUB", "NUMSUB", "alpha"]);
        if reply.ends_with(":1\r\n") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{reply}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn redis_rs_pubsub_client_receives_messages() {
    let server = Kvasir::start(&[]);
    let mut conn = server.conn();
    let mut publisher = server.conn();
    let mut pubsub = conn.as_pubsub();
    pubsub.psubscribe("events.*").expect("psubscribe");
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _: i64 = redis::cmd("PUBLISH")
        .arg("events.login")
        .arg("alice")
        .query(&mut publisher)
        .expect("publish");
    let msg = pubsub.get_message().expect("message");
    assert_eq!(msg.get_channel_name(), "events.login");
    assert_eq!(msg.get_pattern::<String>().expect("pattern"), "events.*");
    assert_eq!(msg.get_payload::<String>().expect("payload"), "alice");
}
