//! Kvasir driven by the real Redis command-line tools: a scripted `redis-cli`
//! session (exact output pinned, and the pinned text checked against a real
//! `redis-server`), `redis-benchmark`, and `redis-cli --pipe` mass insertion.
//!
//! These tests need `redis-cli`, `redis-benchmark` and `redis-server` on PATH.
//! They fail (they do not skip) when a tool is missing: run
//! `scripts/install-test-deps.sh` to install them.

mod common;

use common::{ChildGuard, Kvasir};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Process helpers
// ---------------------------------------------------------------------------

/// Panics with an actionable message when `tool` is not installed.
fn require(tool: &str) {
    match Command::new(tool)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => {}
        Err(e) => panic!(
            "`{tool}` is not available ({e}); these tests need redis-cli, redis-benchmark \
             and redis-server: run scripts/install-test-deps.sh"
        ),
    }
}

struct Output {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `program args...`, feeding `stdin` (if any), and waits at most
/// `limit`; on timeout the process is killed and the test fails.
fn run(program: &str, args: &[&str], stdin: Option<Vec<u8>>, limit: Duration) -> Output {
    let spawned = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut guard = match spawned {
        Ok(child) => ChildGuard(Some(child)),
        Err(e) => panic!("cannot run `{program}` ({e}): run scripts/install-test-deps.sh"),
    };
    let writer = stdin.map(|bytes| {
        let mut pipe = guard.child().stdin.take().expect("stdin");
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
            // Dropping the pipe closes it: the tool sees end of input.
        })
    });
    let mut out_pipe = guard.child().stdout.take().expect("stdout");
    let mut err_pipe = guard.child().stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out_pipe.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err_pipe.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match guard.child().try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                drop(guard); // kills it
                panic!(
                    "`{program} {}` did not finish within {limit:?}",
                    args.join(" ")
                );
            }
            Err(e) => panic!("waiting for `{program}`: {e}"),
        }
    };
    if let Some(w) = writer {
        let _ = w.join();
    }
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    Output {
        status,
        stdout,
        stderr,
    }
}

/// `redis-cli -p PORT args...` (stdout is a pipe, so replies print raw).
fn cli(port: u16, args: &[&str]) -> Output {
    let port = port.to_string();
    let mut all = vec!["-h", "127.0.0.1", "-p", port.as_str()];
    all.extend_from_slice(args);
    run("redis-cli", &all, None, Duration::from_secs(30))
}

/// `redis-cli -p PORT [flags]` reading a multi-command session from stdin.
fn cli_stdin(port: u16, flags: &[&str], input: &str) -> Output {
    let port = port.to_string();
    let mut all = vec!["-h", "127.0.0.1", "-p", port.as_str()];
    all.extend_from_slice(flags);
    run(
        "redis-cli",
        &all,
        Some(input.as_bytes().to_vec()),
        Duration::from_secs(30),
    )
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
    // The listener is dropped here, freeing the port for the server.
}

/// A real `redis-server` without persistence on a free loopback port,
/// killed (and its folder removed) when dropped.
struct RedisServer {
    guard: ChildGuard,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    fn start() -> RedisServer {
        require("redis-server");
        let dir = std::env::temp_dir().join(format!(
            "kvasir-redis-tools-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        // The port can be taken between probing it and the server binding it:
        // retry on a fresh port a few times.
        for _ in 0..5 {
            let port = free_port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .arg("--dir")
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("cannot run redis-server ({e}): run scripts/install-test-deps.sh")
                });
            let mut guard = ChildGuard(Some(child));
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if !matches!(guard.child().try_wait(), Ok(None)) {
                    break; // exited: most likely the port was taken
                }
                if ping(port) {
                    return RedisServer { guard, port, dir };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        panic!("could not start redis-server on a free loopback port");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // Stop the server before removing its folder.
        drop(ChildGuard(self.guard.0.take()));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether something on `port` answers PING with +PONG.
fn ping(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Asserts two texts are equal, pointing at the first differing line.
fn assert_same_text(what: &str, actual: &str, expected: &str) {
    if actual == expected {
        return;
    }
    let a: Vec<&str> = actual.split('\n').collect();
    let e: Vec<&str> = expected.split('\n').collect();
    let line = (0..a.len().max(e.len()))
        .find(|&i| a.get(i) != e.get(i))
        .unwrap_or(0);
    panic!(
        "{what}: output differs at line {}: got {:?}, expected {:?}\n--- got ---\n{actual}\n--- expected ---\n{expected}",
        line + 1,
        a.get(line),
        e.get(line)
    );
}

// ---------------------------------------------------------------------------
// The scripted redis-cli session and what redis-cli 7 prints for it
// ---------------------------------------------------------------------------

/// One command per `redis-cli -p PORT args...` invocation, with the exact
/// stdout (raw mode: stdout is not a TTY). Run in order on an empty database.
const ARG_COMMANDS: &[(&[&str], &str)] = &[
    (&["SET", "k", "v"], "OK\n"),
    (&["GET", "k"], "v\n"),
    // nil prints as an empty line in raw mode
    (&["GET", "nothere"], "\n"),
    (&["INCR", "n"], "1\n"),
    (&["INCRBY", "n", "10"], "11\n"),
    (&["MSET", "a", "1", "b", "2"], "OK\n"),
    (&["MGET", "a", "b", "missing"], "1\n2\n\n"),
    (&["DEL", "a"], "1\n"),
    (&["EXISTS", "a", "b"], "1\n"),
    (&["TTL", "k"], "-1\n"),
    (&["EXPIRE", "k", "100"], "1\n"),
    (&["TTL", "k"], "100\n"),
    (&["DBSIZE"], "3\n"),
    (&["PING"], "PONG\n"),
    (&["ECHO", "hello world"], "hello world\n"),
    (&["CONFIG", "GET", "maxclients"], "maxclients\n10000\n"),
    // Error replies go to stdout too, followed by an empty line.
    (
        &["GET"],
        "ERR wrong number of arguments for 'get' command\n\n",
    ),
    (
        &["NOSUCHCMD", "x"],
        "ERR unknown command 'NOSUCHCMD', with args beginning with: 'x' \n\n",
    ),
];

/// The same session as one redis-cli process reading commands from stdin.
const SESSION: &str = "SET k v
GET k
GET nothere
INCR n
INCRBY n 10
MSET a 1 b 2
MGET a b missing
DEL a
EXISTS a b
TTL k
EXPIRE k 100
TTL k
DBSIZE
PING
ECHO \"hello world\"
CONFIG GET maxclients
GET
NOSUCHCMD x
";

/// What `redis-cli` prints for SESSION with stdout not a TTY (raw replies).
const SESSION_RAW: &str = "OK
v

1
11
OK
1
2

1
1
-1
1
100
3
PONG
hello world
maxclients
10000
ERR wrong number of arguments for 'get' command

ERR unknown command 'NOSUCHCMD', with args beginning with: 'x' 

";

/// What `redis-cli --no-raw` prints for SESSION: the TTY format, which shows
/// the reply types (integer vs bulk string, nil, error, array).
const SESSION_TYPED: &str = "OK
\"v\"
(nil)
(integer) 1
(integer) 11
OK
1) \"1\"
2) \"2\"
3) (nil)
(integer) 1
(integer) 1
(integer) -1
(integer) 1
(integer) 100
(integer) 3
PONG
\"hello world\"
1) \"maxclients\"
2) \"10000\"
(error) ERR wrong number of arguments for 'get' command
(error) ERR unknown command 'NOSUCHCMD', with args beginning with: 'x' 
";

fn flushall(port: u16) {
    let out = cli(port, &["FLUSHALL"]);
    assert_eq!(out.stdout, "OK\n", "FLUSHALL failed: {}", out.stderr);
}

/// Runs the whole scripted session against `port` three ways (one process
/// per command, stdin raw, stdin typed) and checks every output exactly.
fn check_cli_session(what: &str, port: u16) {
    flushall(port);
    for (args, expected) in ARG_COMMANDS {
        let out = cli(port, args);
        assert!(
            out.status.success(),
            "{what}: redis-cli {args:?} exited with {}: {}",
            out.status,
            out.stderr
        );
        assert_same_text(
            &format!("{what}: redis-cli {args:?}"),
            &out.stdout,
            expected,
        );
    }

    flushall(port);
    let out = cli_stdin(port, &[], SESSION);
    assert!(out.status.success(), "{what}: {}", out.stderr);
    assert_same_text(
        &format!("{what}: stdin session (raw)"),
        &out.stdout,
        SESSION_RAW,
    );

    flushall(port);
    let out = cli_stdin(port, &["--no-raw"], SESSION);
    assert!(out.status.success(), "{what}: {}", out.stderr);
    assert_same_text(
        &format!("{what}: stdin session (--no-raw)"),
        &out.stdout,
        SESSION_TYPED,
    );
}

#[test]
fn redis_cli_session_prints_what_redis_would() {
    require("redis-cli");
    let server = Kvasir::start(&[]);
    check_cli_session("kvasir", server.port);
}

/// Pins the expected texts above to real Redis, so that they describe what
/// redis-server actually answers (and not only what Kvasir happens to say).
#[test]
fn expected_cli_texts_match_real_redis_server() {
    require("redis-cli");
    let redis = RedisServer::start();
    check_cli_session("redis-server", redis.port);
}

// ---------------------------------------------------------------------------
// redis-benchmark
// ---------------------------------------------------------------------------

#[test]
fn redis_benchmark_runs_without_errors() {
    require("redis-benchmark");
    let server = Kvasir::start(&[]);
    let port = server.port.to_string();
    let out = run(
        "redis-benchmark",
        &[
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-q",
            "-t",
            "set,get,incr,mset",
            "-n",
            "20000",
        ],
        None,
        Duration::from_secs(300),
    );
    assert!(
        out.status.success(),
        "redis-benchmark exited with {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    // -q rewrites a progress line with '\r'; keep the final lines.
    let lines: Vec<&str> = out
        .stdout
        .split(['\r', '\n'])
        .chain(out.stderr.split(['\r', '\n']))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    for line in &lines {
        let lower = line.to_ascii_lowercase();
        assert!(
            !(lower.contains("error")
                || line.starts_with("ERR")
                || lower.contains("warning")
                || lower.contains("could not")),
            "redis-benchmark printed an error line: {line:?}\nfull output:\n{}{}",
            out.stdout,
            out.stderr
        );
    }
    for test in ["SET", "GET", "INCR", "MSET (10 keys)"] {
        let prefix = format!("{test}: ");
        let line = lines
            .iter()
            .find(|l| l.starts_with(&prefix) && l.contains("requests per second"))
            .unwrap_or_else(|| {
                panic!(
                    "no requests-per-second line for {test}\nfull output:\n{}",
                    out.stdout
                )
            });
        let rps: f64 = line[prefix.len()..]
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("cannot parse rate in {line:?}"));
        assert!(rps > 0.0, "{line}");
    }
}

// ---------------------------------------------------------------------------
// redis-cli --pipe mass insertion
// ---------------------------------------------------------------------------

fn resp_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

#[test]
fn redis_cli_pipe_mass_insertion() {
    require("redis-cli");
    let server = Kvasir::start(&[]);
    const N: usize = 10_000;
    let mut input = Vec::new();
    for i in 0..N {
        let key = format!("key:{i:06}");
        let value = format!("value:{i}");
        resp_command(&mut input, &[b"SET", key.as_bytes(), value.as_bytes()]);
    }
    let port = server.port.to_string();
    let out = run(
        "redis-cli",
        &["-h", "127.0.0.1", "-p", &port, "--pipe"],
        Some(input),
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "redis-cli --pipe exited with {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    assert!(
        out.stdout.contains(&format!("errors: 0, replies: {N}")),
        "unexpected --pipe summary:\n{}{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(cli(server.port, &["DBSIZE"]).stdout, format!("{N}\n"));
    assert_eq!(cli(server.port, &["GET", "key:000000"]).stdout, "value:0\n");
    assert_eq!(
        cli(server.port, &["GET", "key:009999"]).stdout,
        "value:9999\n"
    );

    // A pipe with a failing command reports it in the summary.
    let mut bad = Vec::new();
    resp_command(&mut bad, &[b"SET", b"x", b"1"]);
    resp_command(&mut bad, &[b"INCR", b"key:000001"]);
    let out = run(
        "redis-cli",
        &["-h", "127.0.0.1", "-p", &port, "--pipe"],
        Some(bad),
        Duration::from_secs(60),
    );
    assert!(
        out.stdout.contains("errors: 1, replies: 2"),
        "unexpected --pipe summary:\n{}{}",
        out.stdout,
        out.stderr
    );
}

/// `redis-cli --rdb` backs up a standalone server through SYNC; the file is
/// an RDB a new server starts from; `--functions-rdb` has the libraries.
#[test]
fn redis_cli_rdb_backs_up_a_standalone_server() {
    let server = Kvasir::start(&[]);
    let port = server.port;
    for args in [
        vec!["SET", "a", "1"],
        vec!["RPUSH", "l", "x", "y"],
        vec![
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('one', function() return 1 end)",
        ],
    ] {
        assert!(cli(port, &args).status.success());
    }
    let dir = std::env::temp_dir().join(format!("kvasir-cli-rdb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let backup = dir.join("dump.rdb");
    let out = cli(port, &["--rdb", backup.to_str().expect("utf8")]);
    assert!(
        out.status.success(),
        "redis-cli --rdb failed: {}",
        out.stderr
    );
    assert!(
        out.stderr.contains("Transfer finished with success"),
        "{}",
        out.stderr
    );
    let functions = dir.join("functions.rdb");
    let out = cli(
        port,
        &["--functions-rdb", functions.to_str().expect("utf8")],
    );
    assert!(out.status.success());
    // The server goes on serving after the transfer.
    assert_eq!(cli(port, &["GET", "a"]).stdout, "1\n");
    // The image came from a forked child, as Redis's: the server answers
    // while the child writes (slowed by rdb-key-save-delay, 400 ms per
    // key), and the child's file is gone once the transfer is done.
    let forks = |port| {
        cli(port, &["INFO", "stats"])
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("total_forks:").map(|v| v.trim().to_string()))
            .unwrap_or_default()
    };
    let before: u64 = forks(port).parse().expect("total_forks");
    assert!(before >= 1, "the first --rdb forked: {before}");
    assert!(
        cli(port, &["CONFIG", "SET", "rdb-key-save-delay", "400000"])
            .status
            .success()
    );
    let slow = dir.join("slow.rdb");
    let mut transfer = common::ChildGuard(Some(
        std::process::Command::new("redis-cli")
            .args([
                "-p",
                &port.to_string(),
                "--rdb",
                slow.to_str().expect("utf8"),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-cli --rdb"),
    ));
    assert!(common::eventually(Duration::from_secs(10), || {
        forks(port).parse::<u64>().is_ok_and(|n| n > before)
    }));
    assert_eq!(cli(port, &["PING"]).stdout, "PONG\n");
    assert!(
        matches!(transfer.child().try_wait(), Ok(None)),
        "the transfer waits for the child while the server answers"
    );
    assert!(transfer.child().wait().expect("wait").success());
    assert!(std::fs::metadata(&slow).is_ok_and(|m| m.len() > 0));
    let leftovers: Vec<_> = std::fs::read_dir(&server.dir)
        .expect("server dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with("-sync.rdb"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    drop(server);

    let restored = Kvasir::start_in(&dir, &[]);
    assert_eq!(
        cli(restored.port, &["LRANGE", "l", "0", "-1"]).stdout,
        "x\ny\n"
    );
    assert_eq!(cli(restored.port, &["FCALL", "one", "0"]).stdout, "1\n");
    drop(restored);
    std::fs::rename(&functions, &backup).expect("rename");
    let only_functions = Kvasir::start_in(&dir, &[]);
    assert_eq!(cli(only_functions.port, &["DBSIZE"]).stdout, "0\n");
    assert_eq!(
        cli(only_functions.port, &["FCALL", "one", "0"]).stdout,
        "1\n"
    );
    drop(only_functions);
    let _ = std::fs::remove_dir_all(&dir);
}
