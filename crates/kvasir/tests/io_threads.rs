//! I/O threads (`--threads 3`: the data thread and two `kvasir-io` threads
//! doing the client sockets' reads and writes), checked with real clients
//! against a real server process.

mod common;

use common::{encode_cmd, Kvasir};
use std::thread;
use std::time::{Duration, Instant};

fn start() -> Kvasir {
    Kvasir::start(&["--threads", "3"])
}

fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg(section).query(c).expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .to_string()
}

fn wait_blocked(server: &Kvasir, n: usize) {
    let mut c = server.conn();
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_field(&mut c, "clients", "blocked_clients") != n.to_string() {
        assert!(Instant::now() < deadline, "never saw {n} blocked clients");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn config_get_io_threads_reports_the_flag_and_the_threads_run() {
    let server = start();
    let mut c = server.conn();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("io-threads")
        .query(&mut c)
        .expect("config get");
    assert_eq!(v, vec!["io-threads".to_string(), "3".to_string()]);
    // The OS threads exist under their names (Linux). A thread takes its
    // name from inside itself once it runs, so look again for a while.
    let task_dir = format!("/proc/{}/task", server.child.id());
    if std::fs::read_dir(&task_dir).is_err() {
        return;
    }
    let thread_names = || -> Vec<String> {
        std::fs::read_dir(&task_dir)
            .map(|tasks| {
                tasks
                    .filter_map(|t| t.ok())
                    .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                    .map(|n| n.trim().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut names = thread_names();
    while !["kvasir-io-1", "kvasir-io-2"]
        .iter()
        .all(|want| names.iter().any(|n| n == want))
        && Instant::now() < deadline
    {
        thread::sleep(Duration::from_millis(20));
        names = thread_names();
    }
    for want in ["kvasir-io-1", "kvasir-io-2"] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    assert!(!names.iter().any(|n| n == "kvasir-io-3"), "{names:?}");
}

#[test]
fn concurrent_pipelines_get_their_own_replies_in_order() {
    let server = start();
    let clients = 32;
    let per_client = 300;
    let workers: Vec<_> = (0..clients)
        .map(|client| {
            let url = server.url();
            thread::spawn(move || {
                let mut c = redis::Client::open(url)
                    .expect("client")
                    .get_connection()
                    .expect("connect");
                for round in 0..3 {
                    let mut pipe = redis::pipe();
                    for i in 0..per_client {
                        let key = format!("c{client}:k{i}");
                        // Values of different lengths, so a reply that went
                        // to the wrong connection or out of order shows.
                        let value = format!("{client}-{round}-{i}-{}", "x".repeat(i % 97));
                        pipe.cmd("SET").arg(&key).arg(&value);
                        pipe.cmd("GET").arg(&key);
                    }
                    let replies: Vec<redis::Value> = pipe.query(&mut c).expect("pipeline");
                    assert_eq!(replies.len(), 2 * per_client);
                    for i in 0..per_client {
                        let want = format!("{client}-{round}-{i}-{}", "x".repeat(i % 97));
                        assert_eq!(replies[2 * i], redis::Value::Okay);
                        assert_eq!(
                            replies[2 * i + 1],
                            redis::Value::BulkString(want.into_bytes()),
                            "client {client} round {round} reply {i}"
                        );
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let mut c = server.conn();
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(size, (clients * per_client) as i64);
}

#[test]
fn an_8_mib_value_round_trips() {
    let server = start();
    let mut c = server.conn();
    let value: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&value)
        .query(&mut c)
        .expect("set");
    let back: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).expect("get");
    assert_eq!(back.len(), value.len());
    assert!(back == value, "the value came back changed");
    let len: i64 = redis::cmd("STRLEN")
        .arg("big")
        .query(&mut c)
        .expect("strlen");
    assert_eq!(len, value.len() as i64);
}

#[test]
fn a_disconnected_blocked_client_is_not_served() {
    let server = start();
    {
        let mut gone = server.raw_conn();
        gone.send(&encode_cmd(&[b"BLPOP", b"q", b"0"]));
        wait_blocked(&server, 1);
    }
    // The I/O thread sees the close and ends the session's channel.
    wait_blocked(&server, 0);
    let mut c = server.conn();
    let _: i64 = redis::cmd("LPUSH")
        .arg("q")
        .arg("kept")
        .query(&mut c)
        .expect("push");
    let len: i64 = redis::cmd("LLEN").arg("q").query(&mut c).expect("llen");
    assert_eq!(len, 1, "nobody may pop for a closed connection");
}

#[test]
fn a_blocked_client_is_served_over_an_io_thread() {
    let server = start();
    let mut waiter = server.raw_conn();
    waiter.send(&encode_cmd(&[b"BLPOP", b"q", b"5"]));
    wait_blocked(&server, 1);
    let mut c = server.conn();
    let _: i64 = redis::cmd("LPUSH")
        .arg("q")
        .arg("v")
        .query(&mut c)
        .expect("push");
    assert_eq!(waiter.read_reply(), b"*2\r\n$1\r\nq\r\n$1\r\nv\r\n");
}

#[test]
fn client_kill_closes_a_connection_on_an_io_thread() {
    let server = start();
    let mut victim = server.raw_conn();
    let id = victim.cmd_str(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end().to_string();
    let mut c = server.conn();
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut c)
        .expect("client list");
    let line = list
        .lines()
        .find(|l| l.starts_with(&format!("id={id} ")))
        .expect("the victim is listed");
    let fd: i64 = line
        .split(' ')
        .find_map(|f| f.strip_prefix("fd="))
        .and_then(|f| f.parse().ok())
        .expect("fd field");
    assert!(fd > 0, "{line}");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&id)
        .query(&mut c)
        .expect("client kill");
    assert_eq!(killed, 1);
    let (_, closed) = victim.read_until_close(Duration::from_secs(5));
    assert!(closed, "the killed connection stayed open");
    let pong: String = redis::cmd("PING").query(&mut c).expect("ping");
    assert_eq!(pong, "PONG");
}

#[test]
fn a_client_over_the_query_buffer_limit_is_disconnected() {
    let server = start();
    let mut c = server.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-query-buffer-limit")
        .arg("1mb")
        .query(&mut c)
        .expect("config set");
    let mut big = server.raw_conn();
    // One argument of 4 MiB announced, 2 MiB of it sent: the query buffer
    // passes 1 MiB before the command is complete.
    big.send(b"*2\r\n$3\r\nGET\r\n$4194304\r\n");
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent_all = true;
    for _ in 0..32 {
        use std::io::Write;
        if big.stream.write_all(&chunk).is_err() {
            // The server may close while we still send.
            sent_all = false;
            break;
        }
    }
    let (_, closed) = big.read_until_close(Duration::from_secs(10));
    assert!(
        closed || !sent_all,
        "a client over the query buffer limit stayed connected"
    );
    let pong: String = redis::cmd("PING").query(&mut c).expect("ping");
    assert_eq!(pong, "PONG");
}

#[test]
fn pubsub_messages_reach_subscribers_on_io_threads() {
    let server = start();
    let mut subs: Vec<_> = (0..4)
        .map(|_| {
            let mut s = server.raw_conn();
            let reply = s.cmd(&[b"SUBSCRIBE", b"news"]);
            assert!(reply.starts_with(b"*3\r\n$9\r\nsubscribe\r\n"));
            s
        })
        .collect();
    let mut c = server.conn();
    let n: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("hello")
        .query(&mut c)
        .expect("publish");
    assert_eq!(n, 4);
    for s in &mut subs {
        assert_eq!(
            s.read_reply(),
            b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
        );
    }
}

/// Bytes written (wchar: write and writev; send is not counted) by the
/// process's threads whose name starts with `prefix`, from
/// /proc/<pid>/task/<tid>/io.
fn threads_wrote(pid: u32, prefix: &str) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut written = 0;
    for t in tasks.filter_map(|t| t.ok()) {
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !name.starts_with(prefix) {
            continue;
        }
        let io = std::fs::read_to_string(t.path().join("io")).ok()?;
        written += io
            .lines()
            .find_map(|l| l.strip_prefix("wchar:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(written)
}

/// With I/O threads, the Unix socket's clients are read and written there
/// like TCP clients (they stayed on the data thread before): a 4 MB value
/// read back through the socket is written by the I/O threads.
#[test]
fn unix_socket_clients_are_read_and_written_on_io_threads() {
    let dir = common::temp_dir();
    let path = dir.join("kvasir.sock");
    let path_text = path.to_str().expect("utf8").to_string();
    let server = Kvasir::start_in(&dir, &["--threads", "3", "--unixsocket", &path_text]);
    let pid = server.child.id();
    let Some(before) = threads_wrote(pid, "kvasir-io") else {
        return; // no per-thread I/O accounting here
    };
    let client = redis::Client::open(format!("redis+unix://{path_text}")).expect("unix url");
    let mut c = client.get_connection().expect("connect through the socket");
    let value = vec![b'x'; 4 << 20];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&value)
        .query(&mut c)
        .expect("set");
    let back: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).expect("get");
    assert_eq!(back.len(), value.len());
    // The pump writes with writev, counted in wchar; a Unix client served
    // on the main thread left the I/O threads' count where it was.
    let after = threads_wrote(pid, "kvasir-io").expect("io");
    assert!(
        after - before >= value.len() as u64,
        "I/O threads wrote {before} -> {after}"
    );
    // Still a Unix client in every other way.
    let info: String = redis::cmd("CLIENT")
        .arg("INFO")
        .query(&mut c)
        .expect("client info");
    assert!(
        info.contains(&format!("addr={path_text}:0 laddr={path_text}:0 ")),
        "{info}"
    );
    assert!(info.contains(" flags=U "), "{info}");
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The I/O thread parses the requests it can and hands the rest to the
/// session as bytes (inline requests, requests longer than it holds, the
/// empty `*0`), switching back once the session parsed those: whatever the
/// cut of the stream into reads, every reply comes once and in order.
#[test]
fn requests_keep_their_order_across_parsed_and_unparsed_input() {
    use std::io::{Read, Write};
    let server = start();
    let big = vec![b'b'; 100_000];
    // Just under and over the 64 KiB the I/O thread holds of one request.
    let near = vec![b'n'; 65_400];
    let over = vec![b'o'; 66_000];
    let mut wire = Vec::new();
    let mut want = Vec::new();
    let mut counter = 0;
    for round in 0..3 {
        for i in 0..300 {
            let key = format!("k{round}:{i}");
            wire.extend(encode_cmd(&[b"SET", key.as_bytes(), b"v"]));
            want.extend_from_slice(b"+OK\r\n");
            if i % 50 == 7 {
                wire.extend_from_slice(b"PING\r\n*0\r\n");
                want.extend_from_slice(b"+PONG\r\n");
            }
            if i % 100 == 42 {
                for (name, value) in [(&b"big"[..], &big), (b"near", &near), (b"over", &over)] {
                    wire.extend(encode_cmd(&[b"SET", name, value]));
                    wire.extend(encode_cmd(&[b"GET", name]));
                    want.extend_from_slice(b"+OK\r\n");
                    want.extend_from_slice(format!("${}\r\n", value.len()).as_bytes());
                    want.extend_from_slice(value);
                    want.extend_from_slice(b"\r\n");
                }
            }
            counter += 1;
            wire.extend(encode_cmd(&[b"INCR", b"counter"]));
            want.extend_from_slice(format!(":{counter}\r\n").as_bytes());
        }
    }
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    let mut reader = stream.try_clone().expect("clone");
    let expected = want.len();
    let replies = thread::spawn(move || {
        reader
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut got = Vec::with_capacity(expected);
        let mut chunk = [0u8; 65536];
        while got.len() < expected {
            match reader.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
        got
    });
    // Reads of every size: a xorshift picks each write's length.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut at = 0;
    while at < wire.len() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = match x % 4 {
            0 => 1 + (x >> 8) as usize % 16,
            1 => 1 + (x >> 8) as usize % 2_000,
            _ => 1 + (x >> 8) as usize % 70_000,
        };
        let end = (at + n).min(wire.len());
        stream.write_all(&wire[at..end]).expect("write");
        at = end;
        if x.is_multiple_of(8) {
            // A pause lets the pieces arrive as separate reads.
            thread::sleep(Duration::from_millis(1));
        }
    }
    let got = replies.join().expect("reader");
    assert_eq!(got.len(), want.len(), "reply bytes");
    if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
        panic!(
            "replies differ at byte {i}: got {:?}, want {:?}",
            String::from_utf8_lossy(&got[i.saturating_sub(40)..(i + 40).min(got.len())]),
            String::from_utf8_lossy(&want[i.saturating_sub(40)..(i + 40).min(want.len())])
        );
    }
}

/// A client that has to authenticate gets Redis's small request limits
/// until its AUTH runs, also when AUTH and larger requests come in one
/// write (the I/O thread must not parse past AUTH with either set of
/// limits).
#[test]
fn auth_inside_a_pipeline_lifts_the_limits_for_the_requests_after_it() {
    let server = Kvasir::start(&["--threads", "3", "--requirepass", "pw"]);
    let mut wire = encode_cmd(&[b"AUTH", b"pw"]);
    let mset: Vec<&[u8]> = vec![
        b"MSET", b"a", b"1", b"b", b"2", b"c", b"3", b"d", b"4", b"e", b"5",
    ];
    wire.extend(encode_cmd(&mset));
    let big = vec![b'x'; 16_385];
    wire.extend(encode_cmd(&[b"SET", b"big", &big]));
    wire.extend(encode_cmd(&[b"STRLEN", b"big"]));
    let mut r = server.raw_conn();
    r.send(&wire);
    for want in ["+OK\r\n", "+OK\r\n", "+OK\r\n", ":16385\r\n"] {
        assert_eq!(String::from_utf8_lossy(&r.read_reply()), want);
    }
    // Without AUTH first, the same MSET is a protocol error.
    let mut r = server.raw_conn();
    r.send(&encode_cmd(&mset));
    let (out, closed) = r.read_until_close(Duration::from_secs(5));
    assert_eq!(
        String::from_utf8_lossy(&out),
        "-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    assert!(closed, "the connection is closed after a protocol error");
}

#[test]
fn the_start_of_a_request_counts_in_the_query_buffer_on_either_path() {
    // The I/O thread holds a request's start until its rest comes (up to
    // 64 KiB); CLIENT LIST's qbuf counts it as the session's own query
    // buffer does with --threads 1. Then the rest comes and runs.
    let start = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc";
    for threads in ["1", "3"] {
        let server = Kvasir::start(&["--threads", threads]);
        let mut partial = server.raw_conn();
        let id = partial.cmd_str(&["CLIENT", "ID"]);
        let id = id.trim_start_matches(':').trim_end().to_string();
        partial.send(start);
        let mut c = server.conn();
        let qbuf = || {
            let line: String = redis::cmd("CLIENT")
                .arg("LIST")
                .arg("ID")
                .arg(&id)
                .query(&mut server.conn())
                .expect("client list");
            line.split(' ')
                .find_map(|f| f.strip_prefix("qbuf="))
                .unwrap_or("no qbuf")
                .to_string()
        };
        let want = start.len().to_string();
        let seen = common::eventually(Duration::from_secs(5), || qbuf() == want);
        assert!(
            seen,
            "--threads {threads}: qbuf={} with {want} bytes sent",
            qbuf()
        );
        partial.send(b"defghij\r\n");
        assert_eq!(partial.read_reply(), b"+OK\r\n");
        let v: String = redis::cmd("GET").arg("k").query(&mut c).expect("get");
        assert_eq!(v, "abcdefghij");
        assert_eq!(qbuf(), "0", "--threads {threads}: the request ran");
    }
}
