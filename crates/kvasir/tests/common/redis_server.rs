//! Side-by-side tests against a real `redis-server` (7.0): starting one on
//! a free port, sending a command to either server, and a seeded generator
//! so every run sends the same script.

use super::{error_text, ChildGuard};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `redis-server` without persistence on a free loopback port;
/// killed when the guard drops. Fails (never skips) when it is missing.
/// The port is free when picked but another test's server may take it
/// first; then this redis-server exits and a new port is tried.
pub fn start_redis() -> (ChildGuard, u16) {
    start_redis_in(None, &[])
}

/// [`start_redis`] working in `dir` (where it loads and saves dump.rdb),
/// with `extra` flags.
pub fn start_redis_in(dir: Option<&std::path::Path>, extra: &[&str]) -> (ChildGuard, u16) {
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra);
        if let Some(dir) = dir {
            command.arg("--dir").arg(dir);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start redis-server ({e}); run scripts/install-test-deps.sh")
            });
        let mut guard = ChildGuard(Some(child));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if !matches!(guard.child().try_wait(), Ok(None)) {
                break; // it could not bind: pick another port
            }
            if answers_ping(port) {
                // Another server may have answered: ours exits at once
                // when it cannot bind, so it must still run a moment later.
                std::thread::sleep(Duration::from_millis(100));
                if matches!(guard.child().try_wait(), Ok(None)) {
                    return (guard, port);
                }
                break;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("redis-server did not start on any of 5 free ports");
}

/// Whether the server on `port` answers PING (ours is the only one that
/// does while our child runs: a port has one listener).
fn answers_ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// A reply, or its error text.
pub type Outcome = Result<redis::Value, String>;

/// Sends one command (`args[0]` is its name).
pub fn run<A: AsRef<[u8]>>(conn: &mut redis::Connection, args: &[A]) -> Outcome {
    let mut c = redis::cmd(&String::from_utf8_lossy(args[0].as_ref()));
    for a in &args[1..] {
        c.arg(a.as_ref());
    }
    c.query::<redis::Value>(conn).map_err(|e| error_text(&e))
}

/// Deterministic generator (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }

    /// A signed number in -n..n.
    pub fn signed(&mut self, n: u64) -> i64 {
        self.below(2 * n) as i64 - n as i64
    }

    /// A uniform float in lo..hi.
    pub fn float(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.next() >> 11) as f64 / (1u64 << 53) as f64 * (hi - lo)
    }
}
