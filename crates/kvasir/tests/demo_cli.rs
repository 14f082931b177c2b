//! `kvasir demo` end to end: three nodes come up, redis-cli -c reads and
//! writes through them, `kvasir cluster status` and INFO cluster/raft
//! describe them, SIGTERM stops every node, and a second run on the same
//! folder brings the data back.
//!
//! Needs `redis-cli` on PATH (scripts/test.sh installs it).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}
const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) on a pid (or process group) this test started.
    unsafe {
        kill(pid, sig);
    }
}

fn alive(pid: u32) -> bool {
    // A reaped child's /proc entry is gone; a zombie shows state Z.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn port_open(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(300),
    )
    .is_ok()
}

fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

fn temp_dir() -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("kvasir-demo-test-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Runs a program with a time limit; returns (status, stdout, stderr).
fn run(program: &str, args: &[&str], limit: Duration) -> (ExitStatus, String, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e} (is it installed?)"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{program} {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, t_out.join().unwrap(), t_err.join().unwrap())
}

/// `redis-cli -c -p PORT args...`. A shard briefly without a leader (an
/// election on a loaded test machine) answers CLUSTERDOWN or TRYAGAIN,
/// which clients retry: so does this, for a few seconds.
fn redis_cli(port: u16, args: &[&str]) -> String {
    let port = port.to_string();
    let mut all = vec!["-c", "-p", port.as_str()];
    all.extend_from_slice(args);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (status, out, err) = run("redis-cli", &all, Duration::from_secs(20));
        assert!(status.success(), "redis-cli {all:?} failed: {err}");
        let out = out.trim_end().to_string();
        let transient = out.starts_with("CLUSTERDOWN") || out.starts_with("TRYAGAIN");
        if !transient || Instant::now() > deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A running `kvasir demo`; killed (with its nodes) if the test fails.
struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
    output: Vec<String>,
    node_pids: Vec<u32>,
    base: u16,
}

impl Demo {
    /// Starts the demo and waits for its "redis-cli -c -p" line. Returns
    /// None when its ports turned out to be busy (the caller retries).
    fn start(dir: &Path, base: Option<u16>) -> Option<Demo> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kvasir"));
        cmd.arg("demo").arg("--dir").arg(dir);
        if let Some(b) = base {
            cmd.arg("--base-port").arg(b.to_string());
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn kvasir demo");
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for stream in [Box::new(out) as Box<dyn Read + Send>, Box::new(err)] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut demo = Demo {
            child,
            lines,
            output: Vec::new(),
            node_pids: Vec::new(),
            base: base.unwrap_or(0),
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(line) = demo.lines.recv_timeout(Duration::from_millis(100)) {
                if let Some(rest) = line.split(": pid ").nth(1) {
                    let pid: Option<u32> =
                        rest.split_whitespace().next().and_then(|p| p.parse().ok());
                    demo.node_pids.extend(pid);
                    if let Some(port) = line.split("client 127.0.0.1:").nth(1) {
                        let port: Option<u16> =
                            port.split_whitespace().next().and_then(|p| p.parse().ok());
                        if demo.node_pids.len() == 1 {
                            demo.base = port.expect("client port in the pid line");
                        }
                    }
                }
                let ready = line.contains("redis-cli -c -p");
                demo.output.push(line);
                if ready {
                    return Some(demo);
                }
                continue;
            }
            if let Ok(Some(status)) = demo.child.try_wait() {
                while let Ok(line) = demo.lines.recv_timeout(Duration::from_millis(200)) {
                    demo.output.push(line);
                }
                if demo.output.iter().any(|l| l.contains("is in use")) {
                    return None;
                }
                panic!(
                    "kvasir demo exited early ({status}):\n{}",
                    demo.output.join("\n")
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "kvasir demo was not ready within 90s:\n{}",
                    demo.output.join("\n")
                );
            }
        }
    }

    /// SIGTERM, then wait (bounded) for the demo to exit; returns its
    /// status and the rest of its output.
    fn stop(&mut self) -> ExitStatus {
        signal(self.child.id() as i32, SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            while let Ok(line) = self.lines.try_recv() {
                self.output.push(line);
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.output.push(line);
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "kvasir demo did not exit within 30s of SIGTERM:\n{}",
                self.output.join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            signal(-(self.child.id() as i32), SIGKILL);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        for &pid in &self.node_pids {
            if alive(pid) {
                signal(pid as i32, SIGKILL);
            }
        }
    }
}

/// Starts a demo on random free ports (retrying when they are taken).
fn start_on_free_ports(dir: &Path) -> Demo {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
        ^ std::process::id();
    for attempt in 0..8u32 {
        // Client ports 12000..22000, cluster ports 10000 above: both below
        // Linux's ephemeral range, so outgoing connections do not take them.
        let base = 12_000
            + ((seed.wrapping_mul(2_654_435_761) >> 8).wrapping_add(attempt * 1_237) % 9_990)
                as u16;
        if !(0..3).all(|i| port_free(base + i) && port_free(base + 10_000 + i)) {
            continue;
        }
        if let Some(demo) = Demo::start(dir, Some(base)) {
            return demo;
        }
    }
    panic!("no free ports for kvasir demo after 8 attempts");
}

fn assert_all_stopped(demo: &mut Demo) {
    let status = demo.stop();
    assert!(
        status.success(),
        "kvasir demo exited with {status}:\n{}",
        demo.output.join("\n")
    );
    assert_eq!(demo.node_pids.len(), 3, "{:?}", demo.output);
    let deadline = Instant::now() + Duration::from_secs(10);
    while demo.node_pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    for &pid in &demo.node_pids {
        assert!(
            !alive(pid),
            "node pid {pid} still running after the demo stopped"
        );
    }
    for i in 0..3 {
        assert!(
            !port_open(demo.base + i),
            "port {} still open",
            demo.base + i
        );
    }
    let stopped = demo
        .output
        .iter()
        .filter(|l| l.contains(") stopped ("))
        .count();
    assert_eq!(stopped, 3, "{}", demo.output.join("\n"));
}

#[test]
fn demo_runs_a_cluster_and_stops_it() {
    let dir = temp_dir();
    let mut demo = start_on_free_ports(&dir);
    let base = demo.base;
    let text = demo.output.join("\n");
    assert!(text.contains("24 shards"), "{text}");
    assert!(text.contains(&format!("redis-cli -c -p {base}")), "{text}");
    for n in 1..=3 {
        assert!(dir.join(format!("node{n}")).is_dir());
        assert!(dir.join(format!("node{n}.log")).is_file());
    }

    // Writes and reads through redis-cli -c, entering at different nodes.
    for i in 0..20 {
        let key = format!("demo-key-{i}");
        assert_eq!(
            redis_cli(base + (i % 3), &["SET", &key, &format!("v{i}")]),
            "OK"
        );
    }
    for i in 0..20 {
        let key = format!("demo-key-{i}");
        assert_eq!(
            redis_cli(base + ((i + 1) % 3), &["GET", &key]),
            format!("v{i}")
        );
    }

    // kvasir cluster status: every shard and node.
    let node = format!("127.0.0.1:{base}");
    let (status, out, err) = run(
        env!("CARGO_BIN_EXE_kvasir"),
        &["cluster", "status", "--node", &node],
        Duration::from_secs(30),
    );
    assert!(status.success(), "cluster status failed: {err}\n{out}");
    for shard in 1..=24 {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("{shard} ")) && l.contains("1,2,3")),
            "shard {shard} missing from:\n{out}"
        );
    }
    for n in 0..3u16 {
        let addr = format!("127.0.0.1:{}", base + n);
        assert!(
            out.lines().any(|l| l.contains(&addr) && l.contains(" up ")),
            "node {addr} not up in:\n{out}"
        );
    }
    assert!(
        out.contains("24 of 24 shards have a leader; 3 of 3 nodes up"),
        "{out}"
    );

    // INFO cluster and raft.
    let mut led = 0;
    let mut proposals = 0;
    for n in 0..3 {
        let cluster = redis_cli(base + n, &["INFO", "cluster"]);
        assert!(cluster.contains("cluster_enabled:1"), "{cluster}");
        assert!(cluster.contains("cluster_state:ok"), "{cluster}");
        assert!(
            cluster.contains(&format!("cluster_node_id:{}", n + 1)),
            "{cluster}"
        );
        let raft = redis_cli(base + n, &["INFO", "raft"]);
        for field in [
            "shards_led:",
            "shards_following:",
            "commit_index_sum:",
            "applied_index_sum:",
            "raft_log_size_bytes:",
            "snapshots_taken:",
            "snapshots_installed:",
            "proposals_total:",
            "proposals_per_sec:",
            "fsyncs:",
            "log_writes:",
            "group0:role=",
            "group24:role=",
        ] {
            assert!(raft.contains(field), "INFO raft lacks {field}:\n{raft}");
        }
        let get = |name: &str| -> u64 {
            raft.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        led += get("shards_led:");
        proposals += get("proposals_total:");
        let all = redis_cli(base + n, &["INFO", "all"]);
        assert!(all.contains("# Raft") && all.contains("# Cluster"), "{all}");
    }
    assert!(led <= 24, "more leaders than shards: {led}");
    assert!(proposals >= 20, "only {proposals} proposals for 20 SETs");

    // SIGTERM stops the demo and every node.
    assert_all_stopped(&mut demo);
    drop(demo);

    // Same folder again (its ports come from DIR/demo.toml): data is back.
    let mut again = None;
    for _ in 0..5 {
        again = Demo::start(&dir, None);
        if again.is_some() {
            break;
        }
        // Its ports were taken meanwhile; give them a moment.
        std::thread::sleep(Duration::from_secs(1));
    }
    let mut again = again.expect("the demo's ports stayed busy after it stopped");
    assert_eq!(again.base, base);
    assert!(
        again
            .output
            .iter()
            .any(|l| l.contains("the data comes back")),
        "{:?}",
        again.output
    );
    for i in 0..20 {
        let key = format!("demo-key-{i}");
        assert_eq!(redis_cli(base + (i % 3), &["GET", &key]), format!("v{i}"));
    }
    assert_all_stopped(&mut again);
    drop(again);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cluster_status_explains_unreachable_and_standalone_nodes() {
    // Nothing listens on a port we just had bound and released.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let node = format!("127.0.0.1:{port}");
    let (status, _, err) = run(
        env!("CARGO_BIN_EXE_kvasir"),
        &["cluster", "status", "--node", &node],
        Duration::from_secs(30),
    );
    assert!(!status.success());
    assert!(err.contains("cannot connect"), "{err}");

    let server = common::Kvasir::start(&[]);
    let node = format!("127.0.0.1:{}", server.port);
    let (status, _, err) = run(
        env!("CARGO_BIN_EXE_kvasir"),
        &["cluster", "status", "--node", &node],
        Duration::from_secs(30),
    );
    assert!(!status.success());
    assert!(err.contains("not in cluster mode"), "{err}");
    let info = redis_cli(server.port, &["INFO"]);
    assert!(info.contains("cluster_enabled:0"), "{info}");
    assert!(info.contains("redis_mode:standalone"), "{info}");
    let raft = redis_cli(server.port, &["INFO", "raft"]);
    assert!(!raft.contains("shards_led"), "{raft}");
}
