//! `kvasir bench` end to end: each workload runs for about two seconds
//! against a real `kvasir server` and must show non-zero throughput, zero
//! errors, exit code 0, "OK:" as its last line and a well-formed JSON
//! report; a server that answers GET with a wrong value makes the run fail
//! (exit code 1, "FAILED: ... wrong values" as the last line).

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use common::{ChildGuard, Kvasir};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

struct BenchRun {
    status: ExitStatus,
    stdout: String,
    json: Option<serde_json::Value>,
}

impl BenchRun {
    fn last_line(&self) -> &str {
        self.stdout.lines().last().unwrap_or("")
    }
}

fn temp_json(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "kvasir-bench-{}-{name}-{}.json",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ))
}

/// Runs `kvasir bench ARGS --json FILE`, killing it after `limit`.
fn bench(name: &str, args: &[&str], limit: Duration) -> BenchRun {
    let json = temp_json(name);
    let child = Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn kvasir bench");
    let mut guard = ChildGuard(Some(child));
    let mut stdout_pipe = guard.0.as_mut().unwrap().stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout_pipe.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Ok(Some(status)) = guard.0.as_mut().unwrap().try_wait() {
            break status;
        }
        if Instant::now() > deadline {
            drop(guard);
            panic!("kvasir bench {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = reader.join().unwrap_or_default();
    let report = std::fs::read_to_string(&json)
        .ok()
        .map(|t| serde_json::from_str(&t).expect("the JSON report parses"));
    let _ = std::fs::remove_file(&json);
    BenchRun {
        status,
        stdout,
        json: report,
    }
}

/// Exit 0, "OK:" last line, and a JSON report whose runs all have
/// throughput, operation counts, latency percentiles and no errors.
fn assert_clean(run: &BenchRun, workload: &str, runs: usize) -> serde_json::Value {
    assert!(
        run.status.success() && run.last_line().starts_with("OK:"),
        "bench {workload} failed ({:?}):\n{}",
        run.status,
        run.stdout
    );
    let json = run.json.clone().expect("a JSON report was written");
    assert_eq!(json["tool"], "kvasir bench");
    assert_eq!(json["workload"], workload);
    assert_eq!(json["ok"], true);
    assert_eq!(json["errors"]["total"], 0, "{}", run.stdout);
    assert!(json["ops_per_sec"].as_f64().unwrap() > 0.0);
    assert!(json["params"].is_object());
    let list = json["runs"].as_array().expect("runs");
    assert_eq!(list.len(), runs, "{}", run.stdout);
    for r in list {
        assert!(r["ops_per_sec"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["ops_total"].as_u64().unwrap() > 0, "{r}");
        assert_eq!(r["errors"]["total"], 0);
        let lat = r["latency_us"].as_object().expect("latency_us");
        assert!(!lat.is_empty());
        let measured: Vec<_> = lat
            .values()
            .filter(|l| l["count"].as_u64() > Some(0))
            .collect();
        assert!(!measured.is_empty(), "{r}");
        for l in measured {
            for p in ["p50_us", "p95_us", "p99_us", "p999_us", "max_us"] {
                assert!(l[p].as_f64().unwrap() > 0.0, "{p} in {l}");
            }
            assert!(l["p50_us"].as_f64() <= l["p99_us"].as_f64());
        }
        assert!(r["per_second"].as_array().is_some_and(|a| !a.is_empty()));
        assert!(r["timeline"].is_array());
    }
    json
}

const LIMIT: Duration = Duration::from_secs(90);

#[test]
fn bench_kv_readers_and_writers_against_kvasir() {
    let server = Kvasir::start(&[]);
    let port = server.port.to_string();
    let pid = server.child.id().to_string();
    let run = bench(
        "kv",
        &[
            "kv",
            "--port",
            &port,
            "--writers",
            "4",
            "--readers",
            "4",
            "--keyspace",
            "2000",
            "--duration",
            "2",
            "--server-pid",
            &pid,
        ],
        LIMIT,
    );
    let json = assert_clean(&run, "kv", 1);
    let r = &json["runs"][0];
    assert!(r["ops"]["read"].as_u64().unwrap() > 0);
    assert!(r["ops"]["write"].as_u64().unwrap() > 0);
    assert_eq!(json["load"]["ops"], 2000);
    // The seed-000 table, with server CPU rows from --server-pid.
    assert!(run
        .stdout
        .contains("## Workload kv with 4 writers and 4 readers:"));
    assert!(run.stdout.contains("| Read throughput, ops/sec       |"));
    assert!(run.stdout.contains("| Server CPU, user, %            |"));
}

#[test]
fn bench_pipelined_kv_against_kvasir() {
    let server = Kvasir::start(&[]);
    let port = server.port.to_string();
    let run = bench(
        "pkv",
        &[
            "pipelined-kv",
            "--port",
            &port,
            "--writers",
            "2",
            "--readers",
            "2",
            "-P",
            "16",
            "--keyspace",
            "5000",
            "--duration",
            "2",
        ],
        LIMIT,
    );
    let json = assert_clean(&run, "pipelined-kv", 1);
    assert_eq!(json["runs"][0]["params"]["pipeline"], 16);
}

#[test]
fn bench_kv_rheakv_mix_prints_timers() {
    let server = Kvasir::start(&[]);
    let port = server.port.to_string();
    let run = bench(
        "rhea",
        &[
            "kv",
            "--port",
            &port,
            "--clients",
            "4",
            "--write-ratio",
            "0.9",
            "--key-size",
            "16",
            "--value-size",
            "16",
            "--keyspace",
            "1000",
            "--duration",
            "2",
        ],
        LIMIT,
    );
    assert_clean(&run, "kv", 1);
    for timer in [
        "benchmark_timer",
        "get_benchmark_timer",
        "put_benchmark_timer",
    ] {
        assert!(
            run.stdout.contains(&format!("\n{timer}\n")),
            "{}",
            run.stdout
        );
    }
    assert!(run.stdout.contains("     1-minute rate = "));
}

#[test]
fn bench_sweep_against_kvasir() {
    let server = Kvasir::start(&[]);
    let port = server.port.to_string();
    let run = bench(
        "sweep",
        &[
            "sweep",
            "--port",
            &port,
            "--op",
            "GET",
            "--threads",
            "1,2",
            "--runtime",
            "1",
            "--dbsize",
            "20000",
            "--valuelength",
            "32",
        ],
        LIMIT,
    );
    let json = assert_clean(&run, "sweep", 2);
    assert_eq!(json["load"]["command"], "MSET");
    assert_eq!(json["load"]["ops"], 20000);
    assert!(json["load"]["ops_per_sec"].as_f64().unwrap() > 0.0);
    assert!(run.stdout.contains("Operation type: MSET"));
    assert!(run.stdout.contains("Operation type: GET\nNum threads: 2\n"));
}

#[test]
fn bench_online_against_kvasir() {
    let server = Kvasir::start(&[]);
    let port = server.port.to_string();
    let run = bench(
        "online",
        &[
            "online",
            "--port",
            &port,
            "--op-workload",
            "GET,SET",
            "--op-percent",
            "80,20",
            "--threads",
            "2",
            "--runtime",
            "2.5",
        ],
        LIMIT,
    );
    let json = assert_clean(&run, "online", 1);
    assert!(json["runs"][0]["ops"]["GET"].as_u64().unwrap() > 0);
    assert!(json["runs"][0]["ops"]["SET"].as_u64().unwrap() > 0);
    let lines = run
        .stdout
        .lines()
        .filter(|l| l.contains("|online| "))
        .count();
    assert!(
        lines >= 2,
        "header and at least one 2 s line:\n{}",
        run.stdout
    );
}

/// Needs HMSET, HGETALL, ZADD and ZRANGEBYSCORE in the server.
#[test]
fn bench_ycsb_all_workloads_against_kvasir() {
    let server = Kvasir::start(&[]);
    let port = server.port.to_string();
    let run = bench(
        "ycsb",
        &[
            "ycsb",
            "--port",
            &port,
            "--workload",
            "all",
            "--recordcount",
            "500",
            "--operationcount",
            "1500",
            "--threads",
            "4",
            "--runtime",
            "2",
        ],
        Duration::from_secs(120),
    );
    // The load phase and workloads a, b, c, f, d, e.
    let json = assert_clean(&run, "ycsb", 7);
    let names: Vec<&str> = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "ycsb load",
            "ycsb workloada",
            "ycsb workloadb",
            "ycsb workloadc",
            "ycsb workloadf",
            "ycsb workloadd",
            "ycsb workloade"
        ]
    );
    assert!(run
        .stdout
        .contains("| Workload     | Throughput (ops/sec) | Op Type            | Avg Latency (us)   | 99th% Latency (us) |"));
    assert!(json["runs"][6]["ops"]["SCAN"].as_u64().unwrap() > 0);
    assert!(
        json["runs"][4]["ops"]["READ-MODIFY-WRITE"]
            .as_u64()
            .unwrap()
            > 0
    );
}

/// A RESP server that answers every GET with a wrong value and everything
/// else with +OK; it serves until the test process ends.
fn wrong_value_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || serve_wrong_values(stream));
        }
    });
    port
}

fn serve_wrong_values(stream: TcpStream) {
    let mut out = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        // A request: *N, then N bulk strings ($len, bytes).
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let n: usize = line.trim_start_matches('*').trim().parse().unwrap_or(0);
        let mut name = Vec::new();
        for i in 0..n {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let len: usize = line.trim_start_matches('$').trim().parse().unwrap_or(0);
            let mut arg = vec![0; len + 2];
            if reader.read_exact(&mut arg).is_err() {
                return;
            }
            if i == 0 {
                name = arg[..len].to_ascii_uppercase();
            }
        }
        let reply: &[u8] = if name == b"GET" {
            b"$5\r\nwrong\r\n"
        } else {
            b"+OK\r\n"
        };
        if out.write_all(reply).is_err() {
            return;
        }
    }
}

#[test]
fn bench_fails_when_the_server_returns_wrong_values() {
    let port = wrong_value_server().to_string();
    let run = bench(
        "wrong",
        &[
            "kv",
            "--port",
            &port,
            "--writers",
            "1",
            "--readers",
            "2",
            "--keyspace",
            "100",
            "--duration",
            "1",
        ],
        LIMIT,
    );
    assert_eq!(run.status.code(), Some(1), "{}", run.stdout);
    let last = run.last_line();
    assert!(
        last.starts_with("FAILED:") && last.contains("wrong values"),
        "last line: {last}"
    );
    let json = run.json.expect("the JSON report is written on failure too");
    assert_eq!(json["ok"], false);
    assert!(json["errors"]["wrong_values"].as_u64().unwrap() > 0);
    assert_eq!(json["errors"]["error_replies"], 0);
}

#[test]
fn bench_reports_an_unreachable_server() {
    // Bind and drop a listener: the port is very likely closed afterwards.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let run = bench(
        "unreachable",
        &[
            "kv",
            "--port",
            &port.to_string(),
            "--duration",
            "1",
            "--writers",
            "1",
        ],
        LIMIT,
    );
    assert_eq!(run.status.code(), Some(2), "{}", run.stdout);
    assert!(
        run.last_line().starts_with("FAILED: cannot connect"),
        "{}",
        run.stdout
    );
}

#[test]
fn bench_cluster_run_goes_on_after_the_first_node_of_its_map_dies() {
    // The bench's slot map lists nodes in CLUSTER SLOTS order, so the
    // leader of slot 0 is its first node: the one it used to dial first on
    // every reconnect, which stopped the whole run when that node died.
    let mut c = cluster::Cluster::start(&[]);
    let victim = c.wait_leader_of_slot(0, Duration::from_secs(30));
    let via = (1..=cluster::NODES).find(|&id| id != victim).unwrap();
    let pid = c.node(victim).pid().expect("victim runs") as i32;
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: kill(2) on the pid of a child this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        Instant::now()
    });
    let started = Instant::now();
    let run = bench(
        "cluster-kill",
        &[
            "kv",
            "--cluster",
            "--port",
            &c.port(via).to_string(),
            "--writers",
            "8",
            "--readers",
            "0",
            "--no-load",
            "--duration",
            "7",
        ],
        LIMIT,
    );
    let killed_at = killer.join().unwrap().duration_since(started).as_secs_f64();
    c.kill(victim);
    let json = run.json.expect("a JSON report is written on failure too");
    // The requests in flight to the killed node fail; nothing is wrong.
    assert_eq!(json["errors"]["wrong_values"], 0, "{}", run.stdout);
    assert_eq!(json["errors"]["error_replies"], 0, "{}", run.stdout);
    let timeline = json["runs"][0]["timeline"].as_array().expect("timeline");
    let before: Vec<f64> = timeline
        .iter()
        .filter(|p| p["t"].as_f64().unwrap() < killed_at)
        .map(|p| p["ops_per_sec"].as_f64().unwrap())
        .collect();
    // Leaders of the killed node's shards are elected within ~1 s here;
    // the last seconds of the run must be served by the two survivors.
    let late: Vec<f64> = timeline
        .iter()
        .filter(|p| p["t"].as_f64().unwrap() > killed_at + 3.5)
        .map(|p| p["ops_per_sec"].as_f64().unwrap())
        .collect();
    assert!(before.iter().any(|&r| r > 0.0), "{}", run.stdout);
    assert!(!late.is_empty(), "timeline too short: {}", run.stdout);
    assert!(
        late.iter().all(|&r| r > 0.0),
        "the run stopped after node {victim} was killed at {killed_at:.1} s: {}",
        run.stdout
    );
}
