//! Client-side caching and CLIENT REPLY end to end, over raw RESP so that
//! RESP3 push frames and suppressed replies are seen exactly as sent:
//! default-mode invalidation (once, inline after the command that caused
//! it), RESP2 REDIRECT to a `__redis__:invalidate` subscriber, BCAST with
//! prefixes (batched) and NOLOOP, OPTIN/OPTOUT with CLIENT CACHING, the
//! null invalidation of FLUSHALL, expiry, TRACKINGINFO, GETREDIR,
//! INFO, the tracking-table-max-keys bound, CLIENT REPLY OFF/ON/SKIP, and
//! the error texts side by side with redis-server 7.0.15. One cluster test
//! shows invalidation on the node a RESP3 client is connected to.

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use common::redis_server::start_redis;
use common::Kvasir;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One RESP2/RESP3 frame, as much of the protocol as these tests need.
#[derive(Debug, Clone, PartialEq)]
enum F {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Array(Vec<F>),
    Set(Vec<F>),
    Map(Vec<(F, F)>),
    Push(Vec<F>),
}

fn bulk(s: &str) -> F {
    F::Bulk(s.as_bytes().to_vec())
}

fn keys(ks: &[&str]) -> F {
    F::Array(ks.iter().map(|k| bulk(k)).collect())
}

/// `>2 invalidate [keys]`.
fn invalidate(ks: &[&str]) -> F {
    F::Push(vec![bulk("invalidate"), keys(ks)])
}

/// Parses one frame from the front of `b`: (frame, bytes used), or None
/// while incomplete.
fn parse(b: &[u8]) -> Option<(F, usize)> {
    let end = b.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&b[1..end]).ok()?;
    let head = end + 2;
    let int = || line.parse::<i64>().ok();
    let many = |n: i64, per: usize| -> Option<(Vec<F>, usize)> {
        let mut items = Vec::new();
        let mut at = head;
        for _ in 0..n.max(0) as usize * per {
            let (f, used) = parse(&b[at..])?;
            items.push(f);
            at += used;
        }
        Some((items, at))
    };
    Some(match b[0] {
        b'+' => (F::Simple(line.to_string()), head),
        b'-' => (F::Err(line.to_string()), head),
        b':' => (F::Int(int()?), head),
        b'_' => (F::Null, head),
        b'$' | b'=' => {
            let n = int()?;
            if n < 0 {
                return Some((F::Null, head));
            }
            let n = n as usize;
            if b.len() < head + n + 2 {
                return None;
            }
            (F::Bulk(b[head..head + n].to_vec()), head + n + 2)
        }
        b'*' | b'~' | b'>' => {
            let n = int()?;
            if n < 0 {
                return Some((F::Null, head));
            }
            let (items, used) = many(n, 1)?;
            let f = match b[0] {
                b'*' => F::Array(items),
                b'~' => F::Set(items),
                _ => F::Push(items),
            };
            (f, used)
        }
        b'%' => {
            let (items, used) = many(int()?, 2)?;
            let mut it = items.into_iter();
            let mut pairs = Vec::new();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            (F::Map(pairs), used)
        }
        _ => return None,
    })
}

/// A raw connection with bounded reads.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

const WAIT: Duration = Duration::from_secs(5);

impl Conn {
    fn open(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        Conn { s, buf: Vec::new() }
    }

    /// A RESP3 connection (HELLO 3 answered).
    fn resp3(port: u16) -> Conn {
        let mut c = Conn::open(port);
        assert!(matches!(c.call(&["HELLO", "3"]), F::Map(_)));
        c
    }

    fn send(&mut self, args: &[&str]) {
        self.pipeline(&[args]);
    }

    /// Sends several commands in one write (one read on the server).
    fn pipeline(&mut self, cmds: &[&[&str]]) {
        let mut out = Vec::new();
        for args in cmds {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args.iter() {
                out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
            }
        }
        self.s.write_all(&out).expect("write");
    }

    /// The next frame, waiting at most `limit`.
    fn next_within(&mut self, limit: Duration) -> Option<F> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some((f, used)) = parse(&self.buf) {
                self.buf.drain(..used);
                return Some(f);
            }
            if Instant::now() >= deadline {
                return None;
            }
            let mut chunk = [0u8; 16384];
            match self.s.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => {}
            }
        }
    }

    fn next(&mut self) -> F {
        self.next_within(WAIT).expect("a frame within 5 s")
    }

    fn call(&mut self, args: &[&str]) -> F {
        self.send(args);
        self.next()
    }

    fn id(&mut self) -> i64 {
        match self.call(&["CLIENT", "ID"]) {
            F::Int(i) => i,
            other => panic!("CLIENT ID: {other:?}"),
        }
    }

    /// Asserts that nothing else was sent before the reply to a PING: the
    /// server writes pushes queued for a connection before reading its
    /// next request.
    fn assert_nothing_pending(&mut self) {
        self.send(&["PING", "marker"]);
        assert_eq!(self.next(), bulk("marker"));
    }
}

fn ok() -> F {
    F::Simple("OK".into())
}

#[test]
fn resp3_default_mode_invalidates_each_read_key_once() {
    let k = Kvasir::start(&[]);
    let mut a = Conn::resp3(k.port);
    let mut b = Conn::open(k.port);
    assert_eq!(a.call(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(a.call(&["GET", "k"]), F::Null);
    assert_eq!(
        a.call(&["MGET", "k", "k2"]),
        F::Array(vec![F::Null, F::Null])
    );
    // A key nobody read is not tracked.
    assert_eq!(b.call(&["SET", "untracked", "1"]), ok());
    assert_eq!(b.call(&["SET", "k", "1"]), ok());
    assert_eq!(a.next(), invalidate(&["k"]));
    // Once: until it is read again, further writes say nothing.
    assert_eq!(b.call(&["SET", "k", "2"]), ok());
    a.assert_nothing_pending();
    // Its own writes invalidate too, right after the reply that caused
    // them (as Redis orders them), before the next command's reply.
    a.send(&["SET", "k2", "x"]);
    a.send(&["GET", "k2"]);
    assert_eq!(a.next(), ok());
    assert_eq!(a.next(), invalidate(&["k2"]));
    assert_eq!(a.next(), bulk("x"));
    // FLUSHALL: a null invalidation.
    assert_eq!(b.call(&["FLUSHALL"]), ok());
    assert_eq!(a.next(), F::Push(vec![bulk("invalidate"), F::Null]));
    // Expired keys are invalidated.
    assert_eq!(b.call(&["SET", "ek", "1", "PX", "50"]), ok());
    assert_eq!(a.call(&["GET", "ek"]), bulk("1"));
    assert_eq!(a.next(), invalidate(&["ek"]));
    // OFF: nothing more, and the read keys are not remembered.
    assert_eq!(a.call(&["GET", "k"]), F::Null);
    assert_eq!(a.call(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(b.call(&["SET", "k", "3"]), ok());
    a.assert_nothing_pending();
}

#[test]
fn resp2_redirect_reaches_an_invalidate_subscriber_and_can_break() {
    let k = Kvasir::start(&[]);
    let mut sub = Conn::open(k.port);
    let sub_id = sub.id().to_string();
    assert_eq!(
        sub.call(&["SUBSCRIBE", "__redis__:invalidate"]),
        F::Array(vec![
            bulk("subscribe"),
            bulk("__redis__:invalidate"),
            F::Int(1)
        ])
    );
    let mut t = Conn::open(k.port);
    let mut w = Conn::open(k.port);
    assert_eq!(
        t.call(&["CLIENT", "TRACKING", "on", "REDIRECT", &sub_id]),
        ok()
    );
    assert_eq!(
        t.call(&["CLIENT", "GETREDIR"]),
        F::Int(sub_id.parse().expect("id"))
    );
    assert_eq!(t.call(&["GET", "rk"]), F::Null);
    assert_eq!(w.call(&["SET", "rk", "1"]), ok());
    let message = |value: F| F::Array(vec![bulk("message"), bulk("__redis__:invalidate"), value]);
    assert_eq!(sub.next(), message(keys(&["rk"])));
    assert_eq!(w.call(&["FLUSHDB"]), ok());
    assert_eq!(sub.next(), message(F::Null));

    // The target leaves: the redirect is reported broken.
    drop(sub);
    let gone = Instant::now() + WAIT;
    while Instant::now() < gone {
        let F::Bulk(list) = w.call(&["CLIENT", "LIST"]) else {
            panic!("CLIENT LIST")
        };
        if !String::from_utf8_lossy(&list).contains(&format!("id={sub_id} ")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(t.call(&["GET", "rk"]), F::Null);
    assert_eq!(w.call(&["SET", "rk", "2"]), ok());
    let info = t.call(&["CLIENT", "TRACKINGINFO"]);
    assert_eq!(
        info,
        F::Array(vec![
            bulk("flags"),
            F::Array(vec![bulk("on"), bulk("broken_redirect")]),
            bulk("redirect"),
            F::Int(sub_id.parse().expect("id")),
            bulk("prefixes"),
            F::Array(vec![]),
        ])
    );
    let F::Bulk(line) = t.call(&["CLIENT", "INFO"]) else {
        panic!("CLIENT INFO")
    };
    let line = String::from_utf8_lossy(&line).into_owned();
    assert!(line.contains(" flags=tR "), "{line}");
    assert!(line.contains(&format!(" redir={sub_id} ")), "{line}");
}

#[test]
fn resp3_redirect_target_broken_gets_a_push() {
    let k = Kvasir::start(&[]);
    let mut target = Conn::open(k.port);
    let target_id = target.id();
    let mut t = Conn::resp3(k.port);
    let mut w = Conn::open(k.port);
    let id = target_id.to_string();
    assert_eq!(t.call(&["CLIENT", "TRACKING", "on", "REDIRECT", &id]), ok());
    assert_eq!(t.call(&["GET", "x"]), F::Null);
    drop(target);
    let deadline = Instant::now() + WAIT;
    loop {
        assert_eq!(w.call(&["SET", "x", "1"]), ok());
        // Until the server saw the close, the (unsubscribed) target got
        // nothing; read the key again to stay tracked.
        if let Some(f) = t.next_within(Duration::from_millis(20)) {
            assert_eq!(
                f,
                F::Push(vec![bulk("tracking-redir-broken"), F::Int(target_id)])
            );
            break;
        }
        assert!(Instant::now() < deadline, "no tracking-redir-broken push");
        assert_eq!(t.call(&["GET", "x"]), bulk("1"));
    }
}

#[test]
fn bcast_prefixes_batch_keys_and_noloop_skips_own_writes() {
    let k = Kvasir::start(&[]);
    let mut a = Conn::resp3(k.port);
    let mut w = Conn::open(k.port);
    assert_eq!(
        a.call(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b", "NOLOOP"]),
        ok()
    );
    // One write of several keys: one message per prefix, keys in order.
    assert_eq!(
        w.call(&["MSET", "a2", "1", "a1", "2", "b1", "3", "c", "4"]),
        ok()
    );
    assert_eq!(a.next(), invalidate(&["a1", "a2"]));
    assert_eq!(a.next(), invalidate(&["b1"]));
    // NOLOOP: its own writes are not echoed back.
    assert_eq!(a.call(&["SET", "a3", "x"]), ok());
    a.assert_nothing_pending();
    // Pipelined writes of one batch come as one message, without repeats.
    w.pipeline(&[&["SET", "a3", "y"], &["SET", "a3", "z"], &["DEL", "a3"]]);
    for _ in 0..3 {
        w.next();
    }
    assert_eq!(a.next(), invalidate(&["a3"]));
    a.assert_nothing_pending();
    assert_eq!(
        a.call(&["CLIENT", "TRACKINGINFO"]),
        F::Map(vec![
            (
                bulk("flags"),
                F::Set(vec![bulk("on"), bulk("bcast"), bulk("noloop")])
            ),
            (bulk("redirect"), F::Int(0)),
            (bulk("prefixes"), keys(&["a", "b"])),
        ])
    );

    // BCAST without a prefix: every key.
    let mut all = Conn::resp3(k.port);
    assert_eq!(all.call(&["CLIENT", "TRACKING", "on", "BCAST"]), ok());
    assert_eq!(w.call(&["SET", "zzz", "1"]), ok());
    assert_eq!(all.next(), invalidate(&["zzz"]));
}

/// NOLOOP holds for a script that paused past busy-reply-threshold: its
/// writes are still its client's own when they are heard, after it ends.
#[test]
fn noloop_covers_a_script_that_paused() {
    let k = Kvasir::start(&[]);
    let mut a = Conn::resp3(k.port);
    let mut w = Conn::open(k.port);
    assert_eq!(
        a.call(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p", "NOLOOP"]),
        ok()
    );
    assert_eq!(
        w.call(&["CONFIG", "SET", "busy-reply-threshold", "0"]),
        ok()
    );
    let script = "local i = 0 while i < 1000000 do i = i + 1 end redis.call('set', KEYS[1], ARGV[1]) return i";
    assert_eq!(
        a.call(&["EVAL", script, "1", "p1", "own"]),
        F::Int(1_000_000)
    );
    a.assert_nothing_pending();
    // Another client's paused script is heard.
    assert_eq!(
        w.call(&["EVAL", script, "1", "p1", "other"]),
        F::Int(1_000_000)
    );
    assert_eq!(a.next(), invalidate(&["p1"]));
}

#[test]
fn optin_and_optout_follow_client_caching() {
    let k = Kvasir::start(&[]);
    let mut w = Conn::open(k.port);

    let mut optin = Conn::resp3(k.port);
    assert_eq!(optin.call(&["CLIENT", "TRACKING", "on", "OPTIN"]), ok());
    assert_eq!(optin.call(&["GET", "i1"]), F::Null);
    assert_eq!(optin.call(&["CLIENT", "CACHING", "yes"]), ok());
    assert_eq!(optin.call(&["GET", "i2"]), F::Null);
    assert_eq!(optin.call(&["GET", "i3"]), F::Null);
    // CACHING YES also covers a whole transaction.
    assert_eq!(optin.call(&["CLIENT", "CACHING", "yes"]), ok());
    assert_eq!(optin.call(&["MULTI"]), ok());
    assert_eq!(optin.call(&["GET", "m1"]), F::Simple("QUEUED".into()));
    assert_eq!(optin.call(&["GET", "m2"]), F::Simple("QUEUED".into()));
    assert_eq!(optin.call(&["EXEC"]), F::Array(vec![F::Null, F::Null]));
    assert_eq!(optin.call(&["GET", "m3"]), F::Null);
    assert_eq!(
        w.call(&["MSET", "i1", "1", "i2", "1", "i3", "1", "m1", "1", "m2", "1", "m3", "1"]),
        ok()
    );
    assert_eq!(optin.next(), invalidate(&["i2"]));
    assert_eq!(optin.next(), invalidate(&["m1"]));
    assert_eq!(optin.next(), invalidate(&["m2"]));
    optin.assert_nothing_pending();

    let mut optout = Conn::resp3(k.port);
    assert_eq!(optout.call(&["CLIENT", "TRACKING", "on", "OPTOUT"]), ok());
    assert_eq!(optout.call(&["GET", "o1"]), F::Null);
    assert_eq!(optout.call(&["CLIENT", "CACHING", "no"]), ok());
    // A CLIENT command in between keeps the flag (as Redis's resetClient).
    let info = optout.call(&["CLIENT", "TRACKINGINFO"]);
    let F::Map(pairs) = info else {
        panic!("TRACKINGINFO")
    };
    assert_eq!(
        pairs[0].1,
        F::Set(vec![bulk("on"), bulk("optout"), bulk("caching-no")])
    );
    assert_eq!(optout.call(&["GET", "o2"]), F::Null);
    assert_eq!(optout.call(&["GET", "o3"]), F::Null);
    assert_eq!(w.call(&["MSET", "o1", "1", "o2", "1", "o3", "1"]), ok());
    assert_eq!(optout.next(), invalidate(&["o1"]));
    assert_eq!(optout.next(), invalidate(&["o3"]));
    optout.assert_nothing_pending();
}

/// CLIENT REPLY's script; what came back, up to the last confirmation.
fn reply_script(port: u16) -> Vec<F> {
    let mut c = Conn::open(port);
    for args in [
        &["CLIENT", "REPLY", "OFF"][..],
        &["SET", "a", "1"],
        &["GET", "a"],
        &["NOSUCHCOMMAND"],
        &["CLIENT", "REPLY", "SKIP"],
        &["CLIENT", "REPLY", "ON"],
        &["CLIENT", "REPLY", "SKIP"],
        &["PING", "skipped"],
        &["PING", "sent"],
        &["CLIENT", "REPLY", "SKIP"],
        &["CLIENT", "REPLY", "SKIP"],
        &["PING", "skipped-too"],
        &["PING", "sent-too"],
        &["CLIENT", "REPLY", "SKIP"],
        &["MULTI"],
        &["PING", "queued"],
        &["EXEC"],
        &["CLIENT", "REPLY", "MAYBE"],
        &["GET", "a"],
        // Subscribe confirmations are pushes: OFF does not silence them.
        &["CLIENT", "REPLY", "OFF"],
        &["SUBSCRIBE", "ch"],
        // Silenced: in subscribed mode too.
        &["PING", "silenced"],
        &["SUBSCRIBE", "ch2"],
    ] {
        c.send(args);
    }
    let mut got = Vec::new();
    while let Some(f) = c.next_within(WAIT) {
        let done = f == F::Array(vec![bulk("subscribe"), bulk("ch2"), F::Int(2)]);
        got.push(f);
        if done {
            break;
        }
    }
    got
}

#[test]
fn client_reply_off_on_skip_as_redis() {
    let (_redis, redis_port) = start_redis();
    let k = Kvasir::start(&[]);
    let ours = reply_script(k.port);
    assert_eq!(
        ours,
        vec![
            ok(),
            bulk("sent"),
            bulk("sent-too"),
            F::Simple("QUEUED".into()),
            F::Array(vec![bulk("queued")]),
            F::Err("ERR syntax error".into()),
            bulk("1"),
            F::Array(vec![bulk("subscribe"), bulk("ch"), F::Int(1)]),
            F::Array(vec![bulk("subscribe"), bulk("ch2"), F::Int(2)]),
        ]
    );
    assert_eq!(ours, reply_script(redis_port));
}

#[test]
fn tracking_clients_info_and_the_key_table_bound() {
    let k = Kvasir::start(&[]);
    let mut a = Conn::resp3(k.port);
    let mut w = Conn::open(k.port);
    let info = |w: &mut Conn, section: &str| -> String {
        let F::Bulk(text) = w.call(&["INFO", section]) else {
            panic!("INFO")
        };
        String::from_utf8_lossy(&text).into_owned()
    };
    assert!(info(&mut w, "clients").contains("tracking_clients:0\r\n"));
    assert_eq!(a.call(&["CLIENT", "TRACKING", "on"]), ok());
    assert!(info(&mut w, "clients").contains("tracking_clients:1\r\n"));
    assert_eq!(
        w.call(&["CONFIG", "SET", "tracking-table-max-keys", "2"]),
        ok()
    );
    assert_eq!(
        a.call(&["MGET", "k1", "k2", "k3"]),
        F::Array(vec![F::Null, F::Null, F::Null])
    );
    // Over the bound, the oldest key is evicted and its readers told.
    assert_eq!(a.next(), invalidate(&["k1"]));
    let stats = info(&mut w, "stats");
    assert!(stats.contains("tracking_total_keys:2\r\n"), "{stats}");
    assert!(stats.contains("tracking_total_items:2\r\n"), "{stats}");
    drop(a);
    let deadline = Instant::now() + WAIT;
    while !info(&mut w, "clients").contains("tracking_clients:0\r\n") {
        assert!(
            Instant::now() < deadline,
            "a closed connection still counted"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Replaces the client ids in a frame with 0, so that replies of two
/// servers compare.
fn without_ids(f: F, ids: &[i64]) -> F {
    match f {
        F::Int(i) if ids.contains(&i) => F::Int(0),
        F::Array(v) => F::Array(v.into_iter().map(|x| without_ids(x, ids)).collect()),
        F::Map(v) => F::Map(
            v.into_iter()
                .map(|(a, b)| (without_ids(a, ids), without_ids(b, ids)))
                .collect(),
        ),
        other => other,
    }
}

#[test]
fn errors_and_replies_match_redis_side_by_side() {
    let (_redis, redis_port) = start_redis();
    let k = Kvasir::start(&[]);
    let script = |port: u16| -> Vec<F> {
        let mut other = Conn::open(port);
        let other_id = other.id();
        let other_id = other_id.to_string();
        let mut c = Conn::resp3(port);
        let own = c.id();
        let mut out = Vec::new();
        for args in [
            &["CLIENT", "TRACKING", "on", "PREFIX", "a"][..],
            &["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"],
            &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"],
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "ab",
            ],
            &["CLIENT", "TRACKING", "on", "REDIRECT", "999999"],
            &["CLIENT", "TRACKING", "on", "REDIRECT", "0"],
            &["CLIENT", "TRACKING", "on", "REDIRECT", "abc"],
            &[
                "CLIENT", "TRACKING", "on", "REDIRECT", &other_id, "REDIRECT", &other_id,
            ],
            &["CLIENT", "TRACKING", "maybe"],
            &["CLIENT", "TRACKING", "on", "bogus"],
            &["CLIENT", "TRACKING"],
            &["CLIENT", "CACHING", "yes"],
            &["CLIENT", "CACHING", "maybe"],
            &["CLIENT", "GETREDIR"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "GETREDIR", "x"],
            &["CLIENT", "TRACKINGINFO", "x"],
            &["CLIENT", "REPLY"],
            &["CLIENT", "REPLY", "maybe"],
            &["CLIENT", "CACHING"],
            &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"],
            &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab"],
            &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"],
            &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "b"],
            &["CLIENT", "TRACKING", "on"],
            &["CLIENT", "CACHING", "yes"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "off"],
            &["CLIENT", "TRACKING", "on", "OPTIN", "REDIRECT", &other_id],
            &["CLIENT", "TRACKING", "on", "OPTOUT"],
            &["CLIENT", "CACHING", "no"],
            &["CLIENT", "CACHING", "yes"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "GETREDIR"],
            &["CLIENT", "TRACKING", "off"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "GETREDIR"],
            &["CLIENT", "CACHING", "yes"],
            &["CLIENT", "REPLY", "ON"],
        ] {
            let reply = c.call(args);
            out.push(without_ids(reply, &[own, other_id.parse().expect("id")]));
        }
        out
    };
    let ours = script(k.port);
    let theirs = script(redis_port);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "reply {i} differs from redis-server's");
    }
    assert_eq!(ours.len(), theirs.len());
}

#[test]
fn cluster_invalidates_on_the_node_the_client_is_connected_to() {
    let mut c = cluster::Cluster::start(&[]);
    let key = "{tracked}k";
    let slot = cluster::key_slot(key.as_bytes());
    let leader = c.wait_leader_of_slot(slot, Duration::from_secs(20));
    let port = c.port(leader);
    let mut a = Conn::open(port);
    let F::Map(hello) = a.call(&["HELLO", "3"]) else {
        panic!("HELLO 3")
    };
    assert!(
        hello.contains(&(bulk("mode"), bulk("cluster"))),
        "{hello:?}"
    );
    let mut w = Conn::open(port);
    assert_eq!(a.call(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(w.call(&["SET", key, "1"]), ok());
    assert_eq!(a.call(&["GET", key]), bulk("1"));
    assert_eq!(w.call(&["SET", key, "2"]), ok());
    assert_eq!(a.next(), invalidate(&[key]));
    assert_eq!(a.call(&["GET", key]), bulk("2"));
    assert_eq!(w.call(&["DEL", key]), F::Int(1));
    assert_eq!(a.next(), invalidate(&[key]));
}

/// Lowering `tracking-table-max-keys` forgets the oldest tracked keys at
/// once and tells their readers, as Redis's trackingLimitUsedSlots (the
/// Tcl suite's "Tracking gets notification on tracking table key
/// eviction" waited for it forever: Kvasir trimmed only on a new read).
#[test]
fn lowering_the_tracking_table_limit_invalidates_the_oldest_keys() {
    let kvasir = Kvasir::start(&[]);
    let mut reader = kvasir.raw_conn();
    let mut writer = kvasir.raw_conn();
    reader.cmd_str(&["HELLO", "3"]);
    assert_eq!(reader.cmd_str(&["CLIENT", "TRACKING", "on"]), "+OK\r\n");
    writer.cmd_str(&["MSET", "key1", "1", "key2", "2"]);
    reader.cmd_str(&["GET", "key1"]);
    reader.cmd_str(&["GET", "key2"]);
    assert_eq!(
        writer.cmd_str(&["CONFIG", "SET", "tracking-table-max-keys", "1"]),
        "+OK\r\n"
    );
    let push = reader
        .read_reply_within(Duration::from_secs(5))
        .expect("an invalidation once the table is over its new limit");
    assert_eq!(
        String::from_utf8_lossy(&push),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$4\r\nkey1\r\n",
        "the oldest key goes"
    );
    // key2 is still tracked: its next write is heard of.
    writer.cmd_str(&["SET", "key2", "3"]);
    let push = reader
        .read_reply_within(Duration::from_secs(5))
        .expect("key2 still tracked");
    assert!(String::from_utf8_lossy(&push).contains("key2"));
    let _ = writer.cmd_str(&["CONFIG", "SET", "tracking-table-max-keys", "0"]);
}

/// A BCAST client hears every write its node applies, as leader or as
/// follower, whichever of the node's threads runs the key's shard (with
/// `--threads 3` most shards are on shard threads, which send written
/// keys to the main thread only while a client there tracks, watches or
/// waits: the flag is set when tracking starts, before any command).
#[test]
fn cluster_bcast_hears_every_write_its_node_applies_on_any_thread() {
    let c = cluster::Cluster::start(&["--threads", "3"]);
    let mut bcast = Conn::resp3(c.port(1));
    assert_eq!(bcast.call(&["CLIENT", "TRACKING", "on", "BCAST"]), ok());
    let client = c.cluster_client();
    let mut conn = client.get_connection().expect("cluster connection");
    let written: Vec<String> = (0..40).map(|i| format!("bcast:{i}")).collect();
    for key in &written {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(1)
            .query(&mut conn)
            .expect("set");
    }
    let mut heard = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while heard.len() < written.len() && Instant::now() < deadline {
        let Some(frame) = bcast.next_within(Duration::from_millis(200)) else {
            continue;
        };
        let F::Push(parts) = frame else {
            panic!("only invalidations are sent: {frame:?}")
        };
        let Some(F::Array(keys)) = parts.get(1) else {
            panic!("invalidate with keys: {parts:?}")
        };
        for k in keys {
            if let F::Bulk(b) = k {
                heard.insert(String::from_utf8_lossy(b).into_owned());
            }
        }
    }
    let missing: Vec<&String> = written.iter().filter(|k| !heard.contains(*k)).collect();
    assert!(missing.is_empty(), "no invalidation for {missing:?}");
}
