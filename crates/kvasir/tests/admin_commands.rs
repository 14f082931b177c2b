//! MONITOR, CLIENT PAUSE / UNPAUSE and CLIENT UNBLOCK end to end, with the lines, errors
//! and waits redis-server 7.0 gives (checked side by side with it).

mod common;

use common::{err, q, Kvasir, RawConn};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The monitor lines received within `limit`, with the time and the
/// client address replaced by `T` and `C` (`+T [db C] "arg" ...`).
fn monitor_lines(m: &mut RawConn, limit: Duration) -> Vec<String> {
    let mut lines = Vec::new();
    while let Some(reply) = m.read_reply_within(limit) {
        let text = String::from_utf8_lossy(&reply).trim_end().to_string();
        lines.push(mask(&text));
    }
    lines
}

fn mask(line: &str) -> String {
    // "+1700000000.123456 [0 127.0.0.1:5000] ..." -> "+T [0 C] ..."
    let Some(rest) = line.strip_prefix('+') else {
        return line.to_string();
    };
    let Some((time, rest)) = rest.split_once(' ') else {
        return line.to_string();
    };
    let (secs, micros) = time.split_once('.').unwrap_or(("", ""));
    assert!(
        secs.parse::<u64>().is_ok() && micros.len() == 6 && micros.parse::<u32>().is_ok(),
        "not a monitor time: {line:?}"
    );
    let Some((db, rest)) = rest.strip_prefix('[').and_then(|r| r.split_once(' ')) else {
        return line.to_string();
    };
    let Some((addr, args)) = rest.split_once("] ") else {
        return line.to_string();
    };
    let client = if addr == "lua" { "lua" } else { "C" };
    format!("+T [{db} {client}] {args}")
}

#[test]
fn monitor_shows_each_command_after_it_ran_as_redis_does() {
    let server = Kvasir::start(&[]);
    // Connected first: redis-rs's CLIENT SETINFO after connecting is not
    // part of this transcript.
    let mut c = server.conn();
    let mut m = server.raw_conn();
    assert_eq!(m.cmd_str(&["MONITOR"]), "+OK\r\n");
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg(&b"a\nb\"\\\x00\xff"[..])
        .query(&mut c)
        .unwrap();
    let _: () = q(&mut c, &["SELECT", "2"]);
    let _: Option<String> = q(&mut c, &["GET", "k"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    // Admin commands are not shown.
    let _: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]);
    let _: i64 = q(
        &mut c,
        &["EVAL", "return redis.call('INCR', KEYS[1])", "1", "x"],
    );
    let _: Vec<i64> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("a")
        .arg(1)
        .ignore()
        .cmd("INCR")
        .arg("a")
        .query(&mut c)
        .unwrap();
    // Credentials are redacted (AUTH fails here: no password is set).
    let _ = err(&mut c, &["AUTH", "user", "secret"]);
    // Unknown commands and arity errors never ran: not shown.
    let _ = err(&mut c, &["NOSUCHCOMMAND"]);
    let _ = err(&mut c, &["GET"]);
    let _: i64 = q(&mut c, &["LPUSH", "l", "x"]);
    let lines = monitor_lines(&mut m, Duration::from_millis(500));
    assert_eq!(
        lines,
        vec![
            r#"+T [0 C] "SET" "k" "a\nb\"\\\x00\xff""#,
            r#"+T [2 C] "SELECT" "2""#,
            r#"+T [2 C] "GET" "k""#,
            r#"+T [0 C] "SELECT" "0""#,
            r#"+T [0 C] "EVAL" "return redis.call('INCR', KEYS[1])" "1" "x""#,
            r#"+T [0 lua] "INCR" "x""#,
            r#"+T [0 C] "MULTI""#,
            r#"+T [0 C] "SET" "a" "1""#,
            r#"+T [0 C] "INCR" "a""#,
            r#"+T [0 C] "EXEC""#,
            r#"+T [0 C] "AUTH" "(redacted)" "(redacted)""#,
            r#"+T [0 C] "LPUSH" "l" "x""#,
        ]
    );

    // The monitoring connection shows as O in CLIENT LIST, may not touch
    // the keyspace, and RESET ends monitoring.
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    assert!(
        list.lines()
            .any(|l| l.contains(" flags=O ") && l.contains(" cmd=monitor ")),
        "{list}"
    );
    assert_eq!(
        m.cmd_str(&["GET", "k"]),
        "-ERR Replica can't interact with the keyspace\r\n"
    );
    assert_eq!(m.cmd_str(&["PING"]), "+PONG\r\n");
    // MONITOR again: no reply, as in Redis; RESET ends monitoring. Only
    // the line of its own PING may come first.
    m.send(b"MONITOR\r\nRESET\r\n");
    loop {
        let r = m.read_reply();
        if r == b"+RESET\r\n" {
            break;
        }
        let text = String::from_utf8_lossy(&r).into_owned();
        assert!(text.ends_with("\"PING\"\r\n"), "before +RESET: {text:?}");
    }
    let _: () = q(&mut c, &["SET", "after", "reset"]);
    // Only its own PING may still arrive (queued before RESET).
    let after: Vec<String> = monitor_lines(&mut m, Duration::from_millis(300))
        .into_iter()
        .filter(|l| !l.ends_with(r#""PING""#))
        .collect();
    assert!(after.is_empty(), "{after:?}");
    assert_eq!(m.cmd_str(&["GET", "after"]), "$5\r\nreset\r\n");
}

#[test]
fn redis_cli_monitor_prints_the_commands_of_other_clients() {
    let server = Kvasir::start(&[]);
    // Connected before MONITOR starts (its CLIENT SETINFO is not counted).
    let mut c = server.conn();
    let mut child = Command::new("redis-cli")
        .args(["-p", &server.port.to_string(), "monitor"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-cli on PATH");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // redis-cli prints OK once MONITOR is on.
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).as_deref(),
        Ok("OK")
    );
    let _: () = q(&mut c, &["SET", "tool", "value with spaces"]);
    let _: i64 = q(&mut c, &["HSET", "h", "f", "1"]);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < 2 && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.push(line);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let tails: Vec<&str> = seen
        .iter()
        .map(|l| l.split_once("] ").map_or("", |(_, args)| args))
        .collect();
    assert_eq!(
        tails,
        vec![
            r#""SET" "tool" "value with spaces""#,
            r#""HSET" "h" "f" "1""#
        ],
        "{seen:?}"
    );
}

fn blocked_clients(c: &mut redis::Connection) -> i64 {
    let info: String = q(c, &["INFO", "clients"]);
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("blocked_clients in INFO")
}

/// Sends `args` on a connection of its own; its reply (as text) and how
/// long it took arrive on the returned channel.
fn send_async(server: &Kvasir, args: &[&str]) -> mpsc::Receiver<(String, Duration)> {
    let mut conn = server.raw_conn();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let t = Instant::now();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = conn.cmd_str(&refs);
        let _ = tx.send((reply, t.elapsed()));
    });
    rx
}

#[test]
fn client_pause_write_holds_writes_until_unpause() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: i64 = q(&mut c, &["PFADD", "hll", "a"]);
    let _: () = q(&mut c, &["CLIENT", "PAUSE", "100000", "WRITE"]);
    // Reads go on.
    let v: Option<String> = q(&mut c, &["GET", "x"]);
    assert_eq!(v, None);
    assert_eq!(blocked_clients(&mut c), 0);
    // Writes, and commands that may replicate, wait.
    let set = send_async(&server, &["SET", "x", "1"]);
    let pfcount = send_async(&server, &["PFCOUNT", "hll"]);
    let publish = send_async(&server, &["PUBLISH", "ch", "m"]);
    let eval = send_async(&server, &["EVAL", "return 7", "0"]);
    assert!(
        common::eventually(Duration::from_secs(10), || blocked_clients(&mut c) == 4),
        "writes not held: blocked_clients {}",
        blocked_clients(&mut c)
    );
    let v: Option<String> = q(&mut c, &["GET", "x"]);
    assert_eq!(v, None, "the SET ran during the pause");
    // An arity error is answered at once.
    assert!(err(&mut c, &["SET", "x"]).contains("wrong number of arguments for 'set'"));
    std::thread::sleep(Duration::from_millis(200));
    let _: () = q(&mut c, &["CLIENT", "UNPAUSE"]);
    let wait = Duration::from_secs(10);
    let (reply, took) = set.recv_timeout(wait).expect("SET answered");
    assert_eq!(reply, "+OK\r\n");
    assert!(
        took >= Duration::from_millis(200),
        "SET was not held: {took:?}"
    );
    assert_eq!(pfcount.recv_timeout(wait).expect("PFCOUNT").0, ":1\r\n");
    assert_eq!(publish.recv_timeout(wait).expect("PUBLISH").0, ":0\r\n");
    assert_eq!(eval.recv_timeout(wait).expect("EVAL").0, ":7\r\n");
    assert_eq!(blocked_clients(&mut c), 0);
}

#[test]
fn client_pause_in_a_transaction_starts_at_its_end_and_all_holds_everything() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let replies: (String, String, String) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("f1")
        .arg("b")
        .cmd("CLIENT")
        .arg("PAUSE")
        .arg(100000)
        .arg("WRITE")
        .cmd("SET")
        .arg("f2")
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert_eq!(replies, ("OK".into(), "OK".into(), "OK".into()));
    let f3 = send_async(&server, &["SET", "f3", "b"]);
    assert!(common::eventually(Duration::from_secs(10), || {
        blocked_clients(&mut c) == 1
    }));
    let got: (Option<String>, Option<String>, Option<String>) = redis::pipe()
        .get("f1")
        .get("f2")
        .get("f3")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, (Some("b".into()), Some("b".into()), None));
    let _: () = q(&mut c, &["CLIENT", "UNPAUSE"]);
    assert_eq!(
        f3.recv_timeout(Duration::from_secs(10)).expect("SET f3").0,
        "+OK\r\n"
    );

    // ALL (the default mode) holds every command, PING included, until
    // the timeout.
    let _: () = q(&mut c, &["CLIENT", "PAUSE", "400"]);
    let t = Instant::now();
    let _: String = q(&mut c, &["PING"]);
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );

    for (args, text) in [
        (
            vec!["CLIENT", "PAUSE", "abc"],
            "ERR timeout is not an integer or out of range",
        ),
        (vec!["CLIENT", "PAUSE", "-1"], "ERR timeout is negative"),
        (
            vec!["CLIENT", "PAUSE", "10", "SOME"],
            "ERR CLIENT PAUSE mode must be WRITE or ALL",
        ),
    ] {
        let mut raw = server.raw_conn();
        assert_eq!(raw.cmd_str(&args), format!("-{text}\r\n"), "{args:?}");
    }
}

#[test]
fn client_unblock_answers_blocked_commands_as_redis_does() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for (mode, cmd, expect) in [
        (None, vec!["BLPOP", "nolist", "0"], "*-1\r\n"),
        (
            Some("TIMEOUT"),
            vec!["XREAD", "BLOCK", "0", "STREAMS", "s", "$"],
            "*-1\r\n",
        ),
        (
            Some("ERROR"),
            vec!["BZPOPMIN", "z", "0"],
            "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n",
        ),
    ] {
        let mut raw = server.raw_conn();
        let id = raw.cmd_str(&["CLIENT", "ID"]);
        let id = id.trim_start_matches(':').trim_end().to_string();
        let reply = {
            let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
            std::thread::spawn(move || {
                let refs: Vec<&str> = cmd.iter().map(String::as_str).collect();
                raw.cmd_str(&refs)
            })
        };
        assert!(common::eventually(Duration::from_secs(10), || {
            blocked_clients(&mut c) == 1
        }));
        let mut args = vec!["CLIENT", "UNBLOCK", id.as_str()];
        args.extend(mode);
        let n: i64 = q(&mut c, &args);
        assert_eq!(n, 1, "{cmd:?}");
        assert_eq!(reply.join().expect("thread"), expect, "{cmd:?}");
        let again: i64 = q(&mut c, &args);
        assert_eq!(again, 0);
    }
    let me: i64 = q(&mut c, &["CLIENT", "ID"]);
    let n: i64 = q(&mut c, &["CLIENT", "UNBLOCK", &me.to_string()]);
    assert_eq!(n, 0, "a connection that is not blocked");
    let n: i64 = q(&mut c, &["CLIENT", "UNBLOCK", "999999"]);
    assert_eq!(n, 0, "no such connection");
    assert_eq!(
        err(&mut c, &["CLIENT", "UNBLOCK", "1", "LATER"]),
        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"
    );
    assert_eq!(
        err(&mut c, &["CLIENT", "UNBLOCK", "x"]),
        "ERR value is not an integer or out of range"
    );
}

#[test]
fn latency_monitor_samples_slow_commands_over_the_threshold() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    // Some tens of milliseconds of work (Redis 7.0 scripts have no clock).
    let slow = "local x = 0 for i = 1, 10000000 do x = x + i end return 1";
    // Off by default: nothing is sampled.
    let _: i64 = q(&mut c, &["EVAL", slow, "0"]);
    let latest: Vec<redis::Value> = q(&mut c, &["LATENCY", "LATEST"]);
    assert!(latest.is_empty(), "{latest:?}");
    let doctor: String = q(&mut c, &["LATENCY", "DOCTOR"]);
    assert!(
        doctor.contains("Latency monitoring is disabled"),
        "{doctor}"
    );

    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "latency-monitor-threshold", "10"],
    );
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "latency-monitor-threshold"]);
    assert_eq!(got, vec!["latency-monitor-threshold", "10"]);
    let _: String = q(&mut c, &["PING"]);
    let _: i64 = q(&mut c, &["EVAL", slow, "0"]);
    let latest: Vec<(String, i64, i64, i64)> = q(&mut c, &["LATENCY", "LATEST"]);
    assert_eq!(latest.len(), 1, "{latest:?}");
    let (event, at, ms, max) = latest[0].clone();
    assert_eq!(event, "command");
    assert!((at - common::now_secs() as i64).abs() <= 5, "{at}");
    assert!(ms >= 10 && max >= ms, "{ms} {max}");
    let history: Vec<(i64, i64)> = q(&mut c, &["LATENCY", "HISTORY", "command"]);
    assert_eq!(history, vec![(at, ms)]);
    let none: Vec<(i64, i64)> = q(&mut c, &["LATENCY", "HISTORY", "fast-command"]);
    assert!(none.is_empty(), "PING was sampled: {none:?}");
    let doctor: String = q(&mut c, &["LATENCY", "DOCTOR"]);
    assert!(doctor.contains("1. command: 1 latency spikes"), "{doctor}");
    assert_eq!(
        err(&mut c, &["LATENCY", "HISTORY"]),
        "ERR wrong number of arguments for 'latency|history' command"
    );
    let n: i64 = q(&mut c, &["LATENCY", "RESET", "nosuch"]);
    assert_eq!(n, 0);
    let n: i64 = q(&mut c, &["LATENCY", "RESET"]);
    assert_eq!(n, 1);
    let latest: Vec<redis::Value> = q(&mut c, &["LATENCY", "LATEST"]);
    assert!(latest.is_empty(), "{latest:?}");
}

#[test]
fn memory_stats_doctor_malloc_stats_and_purge() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    for i in 0..100 {
        let _: () = q(&mut c, &["SET", &format!("key:{i}"), "value"]);
    }
    let stats: Vec<redis::Value> = q(&mut c, &["MEMORY", "STATS"]);
    let names: Vec<String> = stats
        .iter()
        .step_by(2)
        .map(|v| redis::from_redis_value(v.clone()).expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "peak.allocated",
            "total.allocated",
            "startup.allocated",
            "replication.backlog",
            "clients.slaves",
            "clients.normal",
            "cluster.links",
            "aof.buffer",
            "lua.caches",
            "functions.caches",
            "overhead.total",
            "keys.count",
            "keys.bytes-per-key",
            "dataset.bytes",
            "dataset.percentage",
            "peak.percentage",
            "allocator.allocated",
            "allocator.active",
            "allocator.resident",
            "allocator-fragmentation.ratio",
            "allocator-fragmentation.bytes",
            "allocator.rss-ratio",
            "allocator.rss-bytes",
            "rss-overhead.ratio",
            "rss-overhead.bytes",
            "fragmentation",
            "fragmentation.bytes",
        ]
    );
    let field = |name: &str| -> String {
        let at = names.iter().position(|n| n == name).expect(name);
        redis::from_redis_value(stats[2 * at + 1].clone()).expect("value")
    };
    assert_eq!(field("keys.count"), "100");
    let total: u64 = field("total.allocated").parse().expect("int");
    let peak: u64 = field("peak.allocated").parse().expect("int");
    let startup: u64 = field("startup.allocated").parse().expect("int");
    assert!(
        total > 0 && peak >= total && startup <= peak,
        "{total} {peak} {startup}"
    );
    let resident: u64 = field("allocator.resident").parse().expect("int");
    assert!(resident >= total, "{resident} < {total}");
    let doctor: String = q(&mut c, &["MEMORY", "DOCTOR"]);
    assert!(doctor.starts_with("Hi Sam"), "{doctor}");
    let malloc: String = q(&mut c, &["MEMORY", "MALLOC-STATS"]);
    assert!(
        malloc.contains("jemalloc statistics"),
        "{}",
        &malloc[..malloc.len().min(200)]
    );
    let _: () = q(&mut c, &["MEMORY", "PURGE"]);
    let help: Vec<String> = q(&mut c, &["MEMORY", "HELP"]);
    assert!(help.iter().any(|l| l == "STATS"), "{help:?}");
    assert_eq!(
        err(&mut c, &["MEMORY", "STATS", "extra"]),
        "ERR wrong number of arguments for 'memory|stats' command"
    );
}

#[test]
fn acl_answers_for_the_default_user_as_redis_does() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let who: String = q(&mut c, &["ACL", "WHOAMI"]);
    assert_eq!(who, "default");
    let users: Vec<String> = q(&mut c, &["ACL", "USERS"]);
    assert_eq!(users, vec!["default"]);
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert_eq!(list, vec!["user default on nopass ~* &* +@all"]);
    let user: Vec<redis::Value> = q(&mut c, &["ACL", "GETUSER", "default"]);
    assert_eq!(user.len(), 12, "{user:?}");
    let none: Option<Vec<String>> = q(&mut c, &["ACL", "GETUSER", "nosuch"]);
    assert_eq!(none, None);
    let cats: Vec<String> = q(&mut c, &["ACL", "CAT"]);
    assert_eq!(cats.len(), 21);
    assert!(cats.iter().any(|c| c == "scripting"));
    let hll: Vec<String> = q(&mut c, &["ACL", "CAT", "hyperloglog"]);
    let mut hll = hll;
    hll.sort();
    // As redis-server 7.0.15 lists them.
    assert_eq!(
        hll,
        vec!["pfadd", "pfcount", "pfdebug", "pfmerge", "pfselftest"]
    );
    let config: Vec<String> = q(&mut c, &["ACL", "CAT", "admin"]);
    assert!(config.iter().any(|n| n == "config|set"), "{config:?}");
    assert_eq!(
        err(&mut c, &["ACL", "CAT", "nosuch"]),
        "ERR Unknown category 'nosuch'"
    );
    let pass: String = q(&mut c, &["ACL", "GENPASS"]);
    assert_eq!(pass.len(), 64);
    assert!(pass.bytes().all(|b| b.is_ascii_hexdigit()));
    let other: String = q(&mut c, &["ACL", "GENPASS"]);
    assert_ne!(pass, other, "GENPASS is not random");
    let short: String = q(&mut c, &["ACL", "GENPASS", "5"]);
    assert_eq!(short.len(), 2);
    let _: () = q(&mut c, &["ACL", "DRYRUN", "default", "SET", "k", "v"]);
    assert_eq!(
        err(&mut c, &["ACL", "DRYRUN", "default", "nosuchcmd"]),
        "ERR Command 'nosuchcmd' not found"
    );
    assert_eq!(
        err(&mut c, &["ACL", "DRYRUN", "nouser", "GET", "k"]),
        "ERR User 'nouser' not found"
    );
    let log: Vec<String> = q(&mut c, &["ACL", "LOG"]);
    assert!(log.is_empty());
    assert_eq!(
        err(&mut c, &["ACL", "DELUSER", "default"]),
        "ERR The 'default' user cannot be removed"
    );
    let n: i64 = q(&mut c, &["ACL", "DELUSER", "nobody"]);
    assert_eq!(n, 0);
    assert!(err(&mut c, &["ACL", "LOAD"])
        .starts_with("ERR This Redis instance is not configured to use an ACL file."));

    // With requirepass, the default user's password is its SHA-256.
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", "secret"]);
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert_eq!(
        list,
        vec![
            "user default on #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~* &* +@all"
        ]
    );
}

#[test]
fn debug_is_refused_by_default_and_serves_test_suites_when_enabled() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    assert!(err(&mut c, &["DEBUG", "SLEEP", "0"]).starts_with("ERR DEBUG command not allowed."));
    drop(server);

    let server = Kvasir::start(&["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "hello"]);
    let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b"]);
    let obj: String = q(&mut c, &["DEBUG", "OBJECT", "k"]);
    assert!(
        obj.starts_with("Value at:") && obj.contains(" encoding:embstr serializedlength:6 "),
        "{obj}"
    );
    let obj: String = q(&mut c, &["DEBUG", "OBJECT", "l"]);
    assert!(
        obj.contains(" encoding:quicklist serializedlength:16 "),
        "{obj}"
    );
    assert_eq!(
        err(&mut c, &["DEBUG", "OBJECT", "nokey"]),
        "ERR no such key"
    );
    let before: String = q(&mut c, &["DEBUG", "DIGEST"]);
    assert_eq!(before.len(), 40);
    let values: Vec<String> = q(&mut c, &["DEBUG", "DIGEST-VALUE", "k", "nokey"]);
    assert_eq!(values[1], "0".repeat(40));
    assert_ne!(values[0], values[1]);
    // QUICKLIST-PACKED-THRESHOLD: Redis's size check (lists have no plain
    // nodes here to change).
    let _: () = q(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1b"]);
    let _: () = q(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"]);
    for bad in ["5gb", "lots"] {
        assert_eq!(
            err(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", bad]),
            "ERR argument must be a memory value bigger than 1 and smaller than 4gb"
        );
    }
    // RELOAD: saved, emptied, loaded back: the same contents.
    let _: () = q(&mut c, &["DEBUG", "RELOAD"]);
    let after: String = q(&mut c, &["DEBUG", "DIGEST"]);
    assert_eq!(before, after);
    let v: String = q(&mut c, &["GET", "k"]);
    assert_eq!(v, "hello");
    // With active expiry off an expired key stays stored (DBSIZE counts
    // it) until it is touched or expiry is on again.
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let _: () = q(&mut c, &["SET", "e", "v", "PX", "20"]);
    std::thread::sleep(Duration::from_millis(400));
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 3, "the expiry cycle ran while off");
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    assert!(common::eventually(Duration::from_secs(5), || {
        q::<i64>(&mut c, &["DBSIZE"]) == 2
    }));
    let t = Instant::now();
    let _: () = q(&mut c, &["DEBUG", "SLEEP", "0.2"]);
    assert!(t.elapsed() >= Duration::from_millis(190));
    assert!(err(&mut c, &["DEBUG", "SEGFAULT"]).starts_with("ERR unknown subcommand"));
    let _: () = q(&mut c, &["FLUSHALL"]);
    let empty: String = q(&mut c, &["DEBUG", "DIGEST"]);
    assert_eq!(empty, "0".repeat(40));
}

#[test]
fn lolwut_draws_and_names_the_version() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let art: String = q(&mut c, &["LOLWUT"]);
    assert!(art.contains("Redis ver. 7.0.15"), "{art}");
    let again: String = q(&mut c, &["LOLWUT"]);
    assert_eq!(art, again);
    let small: String = q(&mut c, &["LOLWUT", "VERSION", "5", "40", "4", "3"]);
    assert!(
        small
            .lines()
            .filter(|l| !l.contains("ver."))
            .all(|l| l.len() <= 48),
        "{small}"
    );
    assert_eq!(
        err(&mut c, &["LOLWUT", "VERSION", "x"]),
        "ERR value is not an integer or out of range"
    );
}

/// What redis-py's own test suite asks of a server beyond the data
/// commands: MODULE (no modules), REPLICAOF NO ONE, COMMAND LIST FILTERBY,
/// COMMAND GETKEYS of a script naming no key, and a consumer group's lag
/// after XGROUP CREATE ... ENTRIESREAD; the same replies as redis-server.
#[test]
fn module_replicaof_command_list_and_group_lag_answer_as_redis_does() {
    let (_redis, redis_port) = common::redis_server::start_redis();
    let server = Kvasir::start(&[]);
    let session = |port: u16| {
        let mut c = RawConn::to_port(port);
        let mut out = Vec::new();
        for args in [
            &["MODULE", "LIST"][..],
            &["MODULE", "LOAD", "/no/such/module.so"],
            &["MODULE", "UNLOAD", "nosuch"],
            &["MODULE"],
            &["REPLICAOF", "NO", "ONE"],
            &["SLAVEOF", "no", "one"],
            &["REPLICAOF", "NO ONE"],
            &["COMMAND", "LIST", "FILTERBY", "MODULE", "fakemod"],
            &["COMMAND", "LIST", "FILTERBY", "PATTERN", "xa*"],
            &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "list"],
            &["COMMAND", "LIST", "FILTERBY", "BOGUS", "x"],
            &["COMMAND", "LIST", "x"],
            &["COMMAND", "GETKEYS", "EVAL", "return 1", "0"],
            &["COMMAND", "GETKEYS", "EVAL", "return 1", "1", "k"],
            &["COMMAND", "GETKEYS", "XREAD", "COUNT", "1", "STREAMS"],
            &["COMMAND", "GETKEYS", "PING", "x"],
            &["DEL", "lagged"],
            &["XADD", "lagged", "1-1", "f", "v"],
            &["XGROUP", "CREATE", "lagged", "g", "0", "ENTRIESREAD", "7"],
            &["XINFO", "GROUPS", "lagged"],
            &["XGROUP", "SETID", "lagged", "g", "0", "ENTRIESREAD", "3"],
            &["XINFO", "GROUPS", "lagged"],
        ] {
            out.push(c.cmd_str(args));
        }
        out
    };
    // COMMAND LIST's order is Redis's dict order: compared as sets.
    let unordered = |reply: &str| {
        let mut lines = reply.split("\r\n");
        let head = lines.next().unwrap_or_default().to_string();
        let rest: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
        let mut items: Vec<String> = rest.chunks(2).map(|c| c.join("\r\n")).collect();
        items.sort();
        (head, items)
    };
    let ours = session(server.port);
    let theirs = session(redis_port);
    assert_eq!(ours.len(), theirs.len());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        if (7..=9).contains(&i) {
            assert_eq!(unordered(a), unordered(b), "reply {i}");
        } else {
            assert_eq!(a, b, "reply {i}");
        }
    }
}

/// During CLIENT PAUSE nothing deletes keys on its own, as in Redis: an
/// expired key reads as missing but stays counted until the pause ends,
/// then the active expiry cycle removes it.
#[test]
fn client_pause_suspends_active_expiry() {
    let server = Kvasir::start(&[]);
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "short", "v", "PX", "200"]);
    let _: () = q(&mut c, &["CLIENT", "PAUSE", "1500", "WRITE"]);
    std::thread::sleep(Duration::from_millis(700));
    let mut reader = server.conn();
    let gone: Option<String> = q(&mut reader, &["GET", "short"]);
    assert_eq!(gone, None, "an expired key reads as missing");
    let size: i64 = q(&mut reader, &["DBSIZE"]);
    assert_eq!(size, 1, "nothing was deleted during the pause");
    std::thread::sleep(Duration::from_millis(1_000));
    assert!(
        common::eventually(Duration::from_secs(5), || {
            let n: i64 = q(&mut reader, &["DBSIZE"]);
            n == 0
        }),
        "the expiry cycle resumed after the pause"
    );
}

/// MIGRATE from Kvasir and from redis-server to a redis-server target: the
/// same replies (moved keys gone, COPY keeps them, REPLACE overwrites,
/// BUSYKEY, NOKEY, KEYS, bad options, a refused connection), and the
/// target holds the values with their time to live.
#[test]
fn migrate_moves_keys_to_another_server_as_redis_does() {
    let (_target, target_port) = common::redis_server::start_redis();
    let (_source, source_port) = common::redis_server::start_redis();
    let server = Kvasir::start(&[]);
    let refused_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
        .to_string();
    let target = target_port.to_string();
    let session = |port: u16| {
        let mut t = RawConn::to_port(target_port);
        let _ = t.cmd_str(&["FLUSHALL"]);
        let mut c = RawConn::to_port(port);
        let mut out = Vec::new();
        for args in [
            &["FLUSHALL"][..],
            &["SET", "a", "1"],
            &["RPUSH", "l", "x", "y"],
            &["SET", "t", "v", "PX", "100000"],
            &["MIGRATE", "127.0.0.1", &target, "a", "0", "1000"],
            &["EXISTS", "a"],
            &[
                "MIGRATE",
                "127.0.0.1",
                &target,
                "",
                "0",
                "1000",
                "KEYS",
                "l",
                "t",
                "nosuch",
            ],
            &["DBSIZE"],
            &["SET", "a", "2"],
            &["MIGRATE", "127.0.0.1", &target, "a", "0", "1000"],
            &[
                "MIGRATE",
                "127.0.0.1",
                &target,
                "a",
                "0",
                "1000",
                "COPY",
                "REPLACE",
            ],
            &["GET", "a"],
            &["MIGRATE", "127.0.0.1", &target, "nosuch", "0", "1000"],
            &["MIGRATE", "127.0.0.1", &refused_port, "a", "0", "100"],
            &[
                "MIGRATE",
                "127.0.0.1",
                &target,
                "a",
                "0",
                "1000",
                "KEYS",
                "b",
            ],
            &["MIGRATE", "127.0.0.1", &target, "a", "0", "1000", "BOGUS"],
        ] {
            out.push(c.cmd_str(args));
        }
        out.push(t.cmd_str(&["GET", "a"]));
        out.push(t.cmd_str(&["LRANGE", "l", "0", "-1"]));
        let ttl = t.cmd_str(&["PTTL", "t"]);
        let ms: i64 = ttl.trim_start_matches(':').trim().parse().expect("pttl");
        assert!((90_000..=100_000).contains(&ms), "{ttl}");
        out
    };
    assert_eq!(session(server.port), session(source_port));
}

/// MIGRATE keeps its connection to a target for the next MIGRATE, as
/// redis-server does: INFO `migrate_cached_sockets` counts it, the target
/// sees no new connection for a second MIGRATE (another database too), a
/// kept connection the target closed is replaced without an error, and
/// after 10 idle seconds it is closed.
#[test]
fn migrate_keeps_its_connection_for_the_next_migrate() {
    let (_target, target_port) = common::redis_server::start_redis();
    let (_source, source_port) = common::redis_server::start_redis();
    let server = Kvasir::start(&[]);
    let target = target_port.to_string();
    let mut t = RawConn::to_port(target_port);
    let info_field = |c: &mut RawConn, name: &str| -> String {
        let info = c.cmd_str(&["INFO", "all"]);
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {info}"))
            .trim()
            .to_string()
    };
    let mut session = |port: u16| {
        let mut c = RawConn::to_port(port);
        let mut out = vec![info_field(&mut c, "migrate_cached_sockets")];
        let connections = |t: &mut RawConn| -> i64 {
            info_field(t, "total_connections_received")
                .parse()
                .expect("a count")
        };
        let before = connections(&mut t);
        for key in ["a", "b", "c", "d", "e", "f"] {
            out.push(c.cmd_str(&["SET", key, key]));
        }
        out.push(c.cmd_str(&["MIGRATE", "127.0.0.1", &target, "a", "0", "1000"]));
        out.push(info_field(&mut c, "migrate_cached_sockets"));
        out.push(c.cmd_str(&["MIGRATE", "127.0.0.1", &target, "b", "0", "1000"]));
        out.push(c.cmd_str(&["MIGRATE", "127.0.0.1", &target, "c", "1", "1000"]));
        out.push(format!("new connections: {}", connections(&mut t) - before));
        // The target closes every connection but this one: the kept one is
        // found dead and replaced (the other source's kept connection is
        // closed too: the count is not compared).
        let killed = t.cmd_str(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
        assert!(killed != ":0\r\n", "{killed}");
        out.push(c.cmd_str(&["MIGRATE", "127.0.0.1", &target, "d", "0", "1000"]));
        out.push(format!("new connections: {}", connections(&mut t) - before));
        // A refused AUTH on the kept connection: its RESTORE's reply (an
        // error: the target has the key) is read too, so the next MIGRATE
        // reads its own.
        out.push(t.cmd_str(&["SET", "e", "there"]));
        out.push(c.cmd_str(&[
            "MIGRATE",
            "127.0.0.1",
            &target,
            "e",
            "0",
            "1000",
            "AUTH",
            "nosuch",
        ]));
        out.push(c.cmd_str(&["MIGRATE", "127.0.0.1", &target, "f", "0", "1000"]));
        out.push(c.cmd_str(&["EXISTS", "e", "f"]));
        out.push(t.cmd_str(&["MGET", "a", "b", "c", "d", "e", "f"]));
        out.push(t.cmd_str(&["SELECT", "1"]));
        out.push(t.cmd_str(&["GET", "c"]));
        out.push(t.cmd_str(&["SELECT", "0"]));
        out.push(t.cmd_str(&["FLUSHALL"]));
        out
    };
    let kvasir = session(server.port);
    let redis = session(source_port);
    assert_eq!(kvasir, redis, "Kvasir (left) and redis-server (right)");
    assert_eq!(kvasir[0], "0");
    assert_eq!(kvasir[8], "1");
    assert_eq!(kvasir[11], "new connections: 1");
    assert_eq!(kvasir[13], "new connections: 2");
    assert_eq!(kvasir[16], "+OK\r\n", "the MIGRATE after a refused AUTH");
    // Redis closes a connection idle for more than 10 whole seconds, at
    // its once-a-second cron: up to 12 s.
    std::thread::sleep(Duration::from_secs(9));
    for port in [server.port, source_port] {
        let mut c = RawConn::to_port(port);
        assert_eq!(info_field(&mut c, "migrate_cached_sockets"), "1", "{port}");
        assert!(
            common::eventually(Duration::from_secs(6), || {
                info_field(&mut c, "migrate_cached_sockets") == "0"
            }),
            "{port}: still kept"
        );
    }
}

/// LATENCY HISTOGRAM and INFO latencystats: per-command latency
/// distributions as redis-server 7.0 reports them (the same commands,
/// calls, buckets shape and percentile keys; the times themselves differ).
#[test]
fn latency_histograms_and_latencystats_answer_as_redis_does() {
    use redis::Value;
    fn shape(port: u16) -> Vec<String> {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .expect("client")
            .get_connection()
            .expect("connect");
        let mut out = Vec::new();
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut c)
            .expect("resetstat");
        for i in 0..5 {
            let _: () = redis::cmd("SET")
                .arg(format!("k{i}"))
                .arg("v")
                .query(&mut c)
                .expect("set");
        }
        for i in 0..3 {
            let _: Option<String> = redis::cmd("GET")
                .arg(format!("k{i}"))
                .query(&mut c)
                .expect("get");
        }
        let _: i64 = redis::cmd("CLIENT")
            .arg("ID")
            .query(&mut c)
            .expect("client id");
        let hist: Value = redis::cmd("LATENCY")
            .arg("HISTOGRAM")
            .arg("set")
            .arg("get")
            .arg("client")
            .arg("nosuch")
            .query(&mut c)
            .expect("latency histogram");
        let Value::Array(items) = hist else {
            panic!("{hist:?}")
        };
        for pair in items.chunks(2) {
            let name = match &pair[0] {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("{other:?}"),
            };
            let Value::Array(fields) = &pair[1] else {
                panic!("{pair:?}")
            };
            let calls = match &fields[1] {
                Value::Int(n) => *n,
                other => panic!("{other:?}"),
            };
            let Value::Array(buckets) = &fields[3] else {
                panic!("{fields:?}")
            };
            let ints: Vec<i64> = buckets
                .iter()
                .map(|v| match v {
                    Value::Int(n) => *n,
                    other => panic!("{other:?}"),
                })
                .collect();
            let bounds: Vec<i64> = ints.iter().step_by(2).copied().collect();
            let counts: Vec<i64> = ints.iter().skip(1).step_by(2).copied().collect();
            assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{name}: {bounds:?}");
            assert!(counts.windows(2).all(|w| w[0] < w[1]), "{name}: {counts:?}");
            out.push(format!(
                "{name} calls={calls} last={:?} fields={:?},{:?}",
                counts.last(),
                fields[0],
                fields[2]
            ));
        }
        let info: String = redis::cmd("INFO")
            .arg("latencystats")
            .query(&mut c)
            .expect("info");
        // Redis lists them in its dict's order: compared sorted.
        let mut lines: Vec<&str> = info.lines().collect();
        lines.sort();
        for line in lines {
            // latency_percentiles_usec_set:p50=...,p99=...,p99.9=...
            let keys: Vec<&str> = line
                .split([':', ','])
                .map(|part| part.split('=').next().unwrap_or(""))
                .collect();
            if keys
                .iter()
                .any(|k| k.contains("|") && k.starts_with("latency_percentiles_usec_config"))
            {
                continue;
            }
            out.push(keys.join(" "));
        }
        out
    }
    let (_redis, redis_port) = common::redis_server::start_redis();
    let server = Kvasir::start(&[]);
    assert_eq!(shape(server.port), shape(redis_port));
}

/// INFO commandstats tells calls that ran (and failed) from calls refused
/// before they ran (arity, NOPERM, NOAUTH, unknown subcommand, queueing
/// errors): rejected_calls, not calls, and not total_commands_processed,
/// as redis-server 7.0 counts them (side by side).
#[test]
fn commandstats_count_rejected_calls_as_redis_does() {
    fn counters(port: u16) -> Vec<String> {
        let mut c = RawConn::to_port(port);
        let mut u = RawConn::to_port(port);
        for args in [
            &["CONFIG", "RESETSTAT"][..],
            &["SET", "a"],
            &["GET", "a", "b"],
            &["CONFIG", "GET"],
            &["OBJECT", "nosub", "a"],
            &["NOSUCHCMD"],
            &["LPUSH", "l", "x"],
            &["GET", "l"],
            &[
                "ACL", "SETUSER", "r", "on", "nopass", "+get", "+multi", "+exec", "~x",
            ],
        ] {
            c.cmd_str(args);
        }
        for args in [
            &["AUTH", "r", "x"][..],
            &["SET", "x", "1"],
            &["GET", "y"],
            &["GET", "x"],
            &["MULTI"],
            &["GET", "x"],
            &["SET", "x", "2"],
            &["EXEC"],
        ] {
            u.cmd_str(args);
        }
        let mut out = Vec::new();
        let info = c.cmd_str(&["INFO", "commandstats"]);
        let mut lines: Vec<String> = info
            .lines()
            .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info"))
            .map(|l| {
                // Without the times.
                let (name, fields) = l.split_once(':').unwrap_or((l, ""));
                let kept: Vec<&str> = fields
                    .split(',')
                    .filter(|f| {
                        f.starts_with("calls=")
                            || f.starts_with("rejected")
                            || f.starts_with("failed")
                    })
                    .collect();
                format!("{name}:{}", kept.join(","))
            })
            .collect();
        lines.sort();
        out.extend(lines);
        let stats = c.cmd_str(&["INFO", "stats"]);
        out.extend(
            stats
                .lines()
                .filter(|l| {
                    l.starts_with("total_commands_processed")
                        || l.starts_with("total_error_replies")
                })
                .map(str::to_string),
        );
        let errors = c.cmd_str(&["INFO", "errorstats"]);
        out.extend(
            errors
                .lines()
                .filter(|l| l.starts_with("errorstat_"))
                .map(str::to_string),
        );
        out
    }
    let (_redis, redis_port) = common::redis_server::start_redis();
    let server = Kvasir::start(&[]);
    assert_eq!(counters(server.port), counters(redis_port));
}
