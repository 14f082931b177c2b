//! Test harness: starts the real `kvasir` binary on a free loopback port in
//! its own temporary folder and stops it (by pid) when dropped.

#![allow(dead_code)]

pub mod redis_server;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub struct Kvasir {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
    /// Whether `dir` is removed when the server is dropped (not when the
    /// test gave the folder, to restart a server in it).
    owns_dir: bool,
    /// Lines the server logged after start-up (collected in the background).
    pub log: mpsc::Receiver<String>,
}

pub fn temp_dir() -> PathBuf {
    let base = std::env::temp_dir();
    let unique = format!(
        "kvasir-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let dir = base.join(unique);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// `--threads N` when KVASIR_TEST_THREADS=N is set (scripts/test.sh runs
/// the suite once without it and once with 2, so every test also runs over
/// I/O threads); nothing otherwise, or when the test passes its own.
pub fn threads_args(extra: &[&str]) -> Vec<String> {
    match std::env::var("KVASIR_TEST_THREADS") {
        Ok(n) if !n.is_empty() && !extra.contains(&"--threads") => vec!["--threads".into(), n],
        _ => Vec::new(),
    }
}

impl Kvasir {
    /// Starts `kvasir server --port 0` with extra flags; waits until it
    /// listens and returns its port.
    pub fn start(extra: &[&str]) -> Kvasir {
        Kvasir::start_with_file(None, extra)
    }

    /// Like [`Kvasir::start`] with `--dir dir`, a folder the test keeps.
    pub fn start_in(dir: &std::path::Path, extra: &[&str]) -> Kvasir {
        Kvasir::spawn(None, dir.to_path_buf(), false, extra)
    }

    /// Like [`Kvasir::start`], with a redis.conf file given first, as
    /// redis-server takes it.
    pub fn start_with_file(conf: Option<&std::path::Path>, extra: &[&str]) -> Kvasir {
        Kvasir::spawn(conf, temp_dir(), true, extra)
    }

    fn spawn(
        conf: Option<&std::path::Path>,
        dir: PathBuf,
        owns_dir: bool,
        extra: &[&str],
    ) -> Kvasir {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kvasir"))
            .arg("server")
            .args(conf)
            .args(["--port", "0", "--bind", "127.0.0.1", "--dir"])
            .arg(&dir)
            .args(threads_args(extra))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn kvasir");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut port = None;
        while port.is_none() && std::time::Instant::now() < deadline {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                if let Some(rest) = line.split("port=").nth(1) {
                    port = rest.trim_end_matches('.').parse::<u16>().ok();
                }
            }
        }
        let port = match port {
            Some(p) => p,
            None => {
                let _ = child.kill();
                panic!("kvasir did not report its port");
            }
        };
        Kvasir {
            child,
            port,
            dir,
            owns_dir,
            log: rx,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn url_resp3(&self) -> String {
        format!("redis://127.0.0.1:{}/?protocol=resp3", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("client")
    }

    pub fn client_resp3(&self) -> redis::Client {
        redis::Client::open(self.url_resp3()).expect("client")
    }

    /// A blocking connection (RESP2).
    pub fn conn(&self) -> redis::Connection {
        self.client().get_connection().expect("connect")
    }

    /// Sends raw bytes on a fresh TCP connection and returns everything the
    /// server sends back until it closes or stays quiet for `quiet`.
    pub fn raw(&self, bytes: &[u8], quiet: Duration) -> Vec<u8> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(quiet)).expect("timeout");
        s.write_all(bytes).expect("write");
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(_) => break,
            }
        }
        out
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the process to exit on its own, up to `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Kvasir {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

// ---------------------------------------------------------------------------
// Helpers for byte-exact protocol tests and error assertions.

/// The full error text of a server error as Redis sends it after the dash
/// (`ERR value is not an integer or out of range`).
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// Runs `cmd` and returns its error text; panics if it succeeded.
pub fn query_err(conn: &mut redis::Connection, cmd: &redis::Cmd) -> String {
    match cmd.query::<redis::Value>(conn) {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => error_text(&e),
    }
}

/// Encodes a command as a RESP multibulk request.
pub fn encode_cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Length of the first complete RESP2/RESP3 reply at the start of `buf`,
/// or None while it is incomplete.
pub fn reply_len(buf: &[u8]) -> Option<usize> {
    fn line_end(buf: &[u8], from: usize) -> Option<usize> {
        buf.get(from..)?
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|p| from + p)
    }
    fn one(buf: &[u8], pos: usize) -> Option<usize> {
        let kind = *buf.get(pos)?;
        let end = line_end(buf, pos + 1)?;
        let after = end + 2;
        if matches!(kind, b'+' | b'-' | b':' | b',' | b'#' | b'_' | b'(') {
            // Line replies may carry any bytes (Redis echoes raw input).
            return Some(after);
        }
        let header = std::str::from_utf8(&buf[pos + 1..end]).ok()?;
        match kind {
            b'$' | b'=' | b'!' => {
                let n: i64 = header.parse().ok()?;
                if n < 0 {
                    return Some(after);
                }
                let total = after + n as usize + 2;
                (buf.len() >= total).then_some(total)
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n: i64 = header.parse().ok()?;
                if n < 0 {
                    return Some(after);
                }
                let items = if kind == b'%' || kind == b'|' {
                    2 * n
                } else {
                    n
                };
                let mut p = after;
                for _ in 0..items {
                    p = one(buf, p)?;
                }
                Some(p)
            }
            _ => None,
        }
    }
    one(buf, 0)
}

/// A plain TCP connection speaking raw RESP, for tests that assert the
/// exact bytes the server sends.
pub struct RawConn {
    pub stream: std::net::TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    /// Sends bytes as they are.
    pub fn send(&mut self, bytes: &[u8]) {
        use std::io::Write;
        self.stream.write_all(bytes).expect("write");
    }

    /// Reads one complete reply (its raw bytes), waiting at most `limit`.
    pub fn read_reply_within(&mut self, limit: Duration) -> Option<Vec<u8>> {
        use std::io::Read;
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(n) = reply_len(&self.buf) {
                return Some(self.buf.drain(..n).collect());
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return None;
            }
            self.stream
                .set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))
                .expect("timeout");
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    return None
                }
                Err(_) => return None,
            }
        }
    }

    /// Reads one reply, waiting up to 10 s; panics if none arrives.
    pub fn read_reply(&mut self) -> Vec<u8> {
        self.read_reply_within(Duration::from_secs(10))
            .unwrap_or_else(|| {
                panic!(
                    "no complete reply; have {:?}",
                    String::from_utf8_lossy(&self.buf)
                )
            })
    }

    /// Sends one command and returns the raw bytes of its reply.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(&encode_cmd(args));
        self.read_reply()
    }

    /// Like [`RawConn::cmd`] with string arguments, returning the reply as text.
    pub fn cmd_str(&mut self, args: &[&str]) -> String {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        String::from_utf8_lossy(&self.cmd(&args)).into_owned()
    }

    /// Everything the server sends until it closes the connection or `limit`
    /// passes; the flag says whether the server closed it.
    pub fn read_until_close(&mut self, limit: Duration) -> (Vec<u8>, bool) {
        use std::io::Read;
        let deadline = std::time::Instant::now() + limit;
        let mut out = std::mem::take(&mut self.buf);
        loop {
            let now = std::time::Instant::now();
            if now >= deadline {
                return (out, false);
            }
            self.stream
                .set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))
                .expect("timeout");
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return (out, true),
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (out, true),
                Err(_) => return (out, false),
            }
        }
    }
}

impl RawConn {
    /// A raw RESP connection to any server on loopback (nothing sent yet).
    pub fn to_port(port: u16) -> RawConn {
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let _ = stream.set_nodelay(true);
        RawConn {
            stream,
            buf: Vec::new(),
        }
    }
}

impl Kvasir {
    /// A raw RESP connection (nothing sent yet).
    pub fn raw_conn(&self) -> RawConn {
        RawConn::to_port(self.port)
    }

    /// Asserts that the server still answers PING on a fresh connection
    /// (`-NOAUTH` counts as an answer when a password is required).
    pub fn assert_alive(&mut self) {
        assert!(self.is_running(), "kvasir exited");
        let mut c = self.raw_conn();
        let reply = c.cmd(&[b"PING"]);
        assert!(
            reply == b"+PONG\r\n" || reply == b"-NOAUTH Authentication required.\r\n",
            "server does not answer PING: {:?}",
            String::from_utf8_lossy(&reply)
        );
    }
}

/// A redis-rs command from string arguments (`cmd(&["SET", "k", "v"])`).
pub fn cmd(args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

/// Runs a command and converts its reply; panics with the command on error.
pub fn q<T: redis::FromRedisValue>(conn: &mut redis::Connection, args: &[&str]) -> T {
    cmd(args)
        .query(conn)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Runs a command that must fail and returns its error text.
pub fn err(conn: &mut redis::Connection, args: &[&str]) -> String {
    query_err(conn, &cmd(args))
}

/// Polls `check` every 20 ms until it holds or `limit` passes.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `v` in ascending order.
pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Kills (and reaps) a child process when dropped, also on panic.
pub struct ChildGuard(pub Option<Child>);

impl ChildGuard {
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("child")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

/// The pids of the processes whose parent is `pid` (from /proc).
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold
            // spaces, so read after its closing parenthesis.
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}
