//! Side-by-side tests against a real `redis-server` (7.0): starting one on
//! a free port, sending a command to either server, and a seeded generator
//! so every run sends the same script.

use super::{error_text, ChildGuard};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `redis-server` without persistence on a free loopback port;
/// killed when the guard drops. Fails (never skips) when it is missing.
pub fn start_redis() -> (ChildGuard, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start redis-server ({e}); run scripts/install-test-deps.sh")
        });
    let guard = ChildGuard(Some(child));
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (guard, port)
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
