//! Cluster test harness: starts three real `kvasir server` processes in
//! cluster mode (24 shards, 3 replicas each) on free loopback ports, each in
//! its own folder under one temporary root, and can kill -9, SIGSTOP,
//! SIGCONT and restart any of them with the same flags and folder.
//!
//! Include it with `#[path = "common/cluster.rs"] mod cluster;`. It is
//! self-contained (it does not need `common/mod.rs`). Every wait is bounded.
//! Processes are stopped by pid when the `Cluster` is dropped (also on a
//! panic); the folder is removed unless the test panicked, in which case its
//! path and the tail of each node's log are printed.

#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Number of nodes in a test cluster.
pub const NODES: u64 = 3;
/// Shards of a 3-node cluster with the default 8 shards per node.
pub const SHARDS: u64 = 24;

/// Polls `check` every 50 ms until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// CRC16/XMODEM as Redis Cluster uses it (written here independently of the
/// server's own code so tests check it).
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash slot of a key, honouring `{hash tags}`.
pub fn key_slot(key: &[u8]) -> u16 {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return crc16(&key[open + 1..open + 1 + len]) % 16384;
            }
        }
    }
    crc16(key) % 16384
}

/// One entry of CLUSTER SLOTS: a slot range and the client ports of its
/// nodes (leader first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
    pub ports: Vec<u16>,
}

/// `[applied index, key count, digest]` of one replica of a shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digest {
    pub applied: u64,
    pub keys: u64,
    pub digest: String,
}

pub struct Node {
    pub id: u64,
    pub port: u16,
    pub cluster_port: u16,
    pub dir: PathBuf,
    pub log_path: PathBuf,
    child: Option<Child>,
    stopped: bool,
}

impl Node {
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

pub struct Cluster {
    pub root: PathBuf,
    pub nodes: Vec<Node>,
    pub initial_cluster: String,
    pub extra: Vec<String>,
    /// Environment variables given to one node's process (fault injection).
    pub env: Vec<(u64, String, String)>,
}

fn unique_root() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "kvasir-cluster-test-{}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        nanos
    ));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Asks the OS for `n` distinct free loopback ports (all held open at once
/// so they differ, then released).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local addr").port())
        .collect()
}

/// A blocking connection with bounded connect/read/write times.
pub fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    conn.set_write_timeout(Some(Duration::from_secs(5)))?;
    Ok(conn)
}

/// Runs one command on a fresh bounded connection.
pub fn query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    let mut conn = connect(port)?;
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut conn)
}

fn as_int(v: &redis::Value) -> Option<i64> {
    match v {
        redis::Value::Int(i) => Some(*i),
        redis::Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        redis::Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

fn as_string(v: &redis::Value) -> Option<String> {
    match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        redis::Value::VerbatimString { text, .. } => Some(text.clone()),
        redis::Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// Parses a CLUSTER SLOTS reply.
pub fn parse_slots(v: &redis::Value) -> Option<Vec<SlotRange>> {
    let redis::Value::Array(entries) = v else {
        return None;
    };
    let mut out = Vec::new();
    for e in entries {
        let redis::Value::Array(items) = e else {
            return None;
        };
        if items.len() < 3 {
            return None;
        }
        let start = as_int(&items[0])? as u16;
        let end = as_int(&items[1])? as u16;
        let mut ports = Vec::new();
        for n in &items[2..] {
            let redis::Value::Array(node) = n else {
                return None;
            };
            ports.push(as_int(node.get(1)?)? as u16);
        }
        out.push(SlotRange { start, end, ports });
    }
    Some(out)
}

impl Cluster {
    /// Starts a 3-node cluster with extra server flags and waits until it is
    /// ready (see [`Cluster::wait_ready`]). Retries with new ports if a port
    /// picked as free was taken meanwhile.
    pub fn start(extra: &[&str]) -> Cluster {
        let mut last_err = String::new();
        for _attempt in 0..3 {
            let mut c = Cluster::spawn_new(extra);
            match c.try_wait_ready(Duration::from_secs(90)) {
                Ok(()) => return c,
                Err(e) => {
                    let port_clash = (1..=NODES).any(|id| {
                        let log = c.log(id);
                        log.contains("in use") || log.contains("AddrInUse")
                    });
                    last_err = e;
                    if !port_clash {
                        panic!("cluster did not become ready: {last_err}");
                    }
                    eprintln!("port clash while starting the cluster, retrying: {last_err}");
                }
            }
        }
        panic!("cluster did not start after 3 attempts: {last_err}");
    }

    /// Creates the folders, picks ports and spawns the three nodes without
    /// waiting for them.
    pub fn spawn_new(extra: &[&str]) -> Cluster {
        let root = unique_root();
        let ports = free_ports(2 * NODES as usize);
        let initial_cluster = (1..=NODES)
            .map(|id| {
                format!(
                    "{id}=127.0.0.1:{}@{}",
                    ports[(id - 1) as usize],
                    ports[(NODES + id - 1) as usize]
                )
            })
            .collect::<Vec<_>>()
            .join(",");
        let nodes = (1..=NODES)
            .map(|id| Node {
                id,
                port: ports[(id - 1) as usize],
                cluster_port: ports[(NODES + id - 1) as usize],
                dir: root.join(format!("node{id}")),
                log_path: root.join(format!("node{id}.log")),
                child: None,
                stopped: false,
            })
            .collect();
        let mut c = Cluster {
            root,
            nodes,
            initial_cluster,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
        };
        for id in 1..=NODES {
            c.spawn(id);
        }
        c
    }

    pub fn node(&self, id: u64) -> &Node {
        &self.nodes[(id - 1) as usize]
    }

    fn node_mut(&mut self, id: u64) -> &mut Node {
        &mut self.nodes[(id - 1) as usize]
    }

    pub fn port(&self, id: u64) -> u16 {
        self.node(id).port
    }

    /// The node whose client port is `port`.
    pub fn id_of_port(&self, port: u16) -> Option<u64> {
        self.nodes.iter().find(|n| n.port == port).map(|n| n.id)
    }

    /// The `kvasir server` arguments of node `id` (the same on every start).
    pub fn args(&self, id: u64) -> Vec<String> {
        let n = self.node(id);
        let mut a: Vec<String> = vec![
            "server".into(),
            "--node-id".into(),
            id.to_string(),
            "--port".into(),
            n.port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--cluster-port".into(),
            n.cluster_port.to_string(),
            "--initial-cluster".into(),
            self.initial_cluster.clone(),
            "--dir".into(),
        ];
        a.push(n.dir.to_string_lossy().into_owned());
        // KVASIR_TEST_THREADS=N: every node runs with I/O threads (see
        // scripts/test.sh), unless the test chose its own --threads.
        if let Ok(threads) = std::env::var("KVASIR_TEST_THREADS") {
            if !threads.is_empty() && !self.extra.iter().any(|e| e == "--threads") {
                a.extend(["--threads".to_string(), threads]);
            }
        }
        a.extend(self.extra.iter().cloned());
        a
    }

    /// Spawns node `id` (which must not be running), appending its stdout
    /// and stderr to its log file.
    pub fn spawn(&mut self, id: u64) {
        self.spawn_with_args(id, &self.args(id));
    }

    /// Spawns node `id` with the given arguments instead of its usual ones.
    pub fn spawn_with_args(&mut self, id: u64, args: &[String]) {
        assert!(
            self.node(id).child.is_none(),
            "node {id} is already running"
        );
        let log_path = self.node(id).log_path.clone();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("open log");
        let _ = writeln!(log, "===== harness: starting node {id}: kvasir {args:?}");
        let err = log.try_clone().expect("clone log");
        let env = self
            .env
            .iter()
            .filter(|(node, _, _)| *node == id)
            .map(|(_, k, v)| (k.clone(), v.clone()));
        let child = Command::new(env!("CARGO_BIN_EXE_kvasir"))
            .args(args)
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("spawn kvasir");
        let n = self.node_mut(id);
        n.child = Some(child);
        n.stopped = false;
    }

    /// Sets an environment variable for node `id`'s next starts.
    pub fn set_env(&mut self, id: u64, key: &str, value: &str) {
        self.env.retain(|(n, k, _)| !(*n == id && k == key));
        self.env.push((id, key.to_string(), value.to_string()));
    }

    /// Whether node `id`'s process is alive (stopped counts as alive).
    pub fn is_running(&mut self, id: u64) -> bool {
        match self.node_mut(id).child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Waits up to `limit` for node `id` to exit by itself; returns its
    /// status (and forgets the process) if it did.
    pub fn wait_exit(&mut self, id: u64, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(c) = self.node_mut(id).child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.node_mut(id).child = None;
                    return Some(status);
                }
            } else {
                return None;
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&self, id: u64, sig: i32) {
        if let Some(pid) = self.node(id).pid() {
            // SAFETY: kill(2) on the pid of a child we spawned and have not
            // reaped yet, so the pid cannot have been reused.
            unsafe {
                libc::kill(pid as libc::pid_t, sig);
            }
        }
    }

    /// kill -9 node `id` and reap it.
    pub fn kill(&mut self, id: u64) {
        if let Some(mut child) = self.node_mut(id).child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.node_mut(id).stopped = false;
        let path = self.node(id).log_path.clone();
        if let Ok(mut f) = OpenOptions::new().append(true).open(path) {
            let _ = writeln!(f, "===== harness: node {id} killed (SIGKILL)");
        }
    }

    /// SIGTERM node `id`: a graceful stop (reap it with `wait_exit`).
    pub fn terminate(&mut self, id: u64) {
        self.signal(id, libc::SIGTERM);
    }

    /// SIGSTOP node `id` (it keeps its sockets but answers nothing).
    pub fn pause(&mut self, id: u64) {
        self.signal(id, libc::SIGSTOP);
        self.node_mut(id).stopped = true;
    }

    /// SIGCONT node `id`.
    pub fn resume(&mut self, id: u64) {
        self.signal(id, libc::SIGCONT);
        self.node_mut(id).stopped = false;
    }

    /// Restarts a killed node with the same arguments and folder.
    pub fn restart(&mut self, id: u64) {
        if self.node(id).child.is_some() {
            self.kill(id);
        }
        self.spawn(id);
    }

    /// Nodes whose process runs and is not SIGSTOPped.
    pub fn live(&mut self) -> Vec<u64> {
        (1..=NODES)
            .filter(|&id| self.is_running(id) && !self.node(id).stopped)
            .collect()
    }

    /// Everything node `id` logged so far (all its runs).
    pub fn log(&self, id: u64) -> String {
        std::fs::read(&self.node(id).log_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The cluster id this cluster's nodes logged at start-up.
    pub fn cluster_id(&self) -> Option<u64> {
        let log = self.log(1);
        let rest = log.split("cluster_id=\"").nth(1)?;
        u64::from_str_radix(rest.get(..16)?, 16).ok()
    }

    // -------------------------------------------------------------------
    // Queries

    pub fn conn(&self, id: u64) -> redis::Connection {
        connect(self.port(id)).unwrap_or_else(|e| panic!("connect to node {id}: {e}"))
    }

    pub fn query<T: redis::FromRedisValue>(&self, id: u64, args: &[&str]) -> redis::RedisResult<T> {
        query(self.port(id), args)
    }

    pub fn cluster_info(&self, id: u64) -> Option<String> {
        self.query::<String>(id, &["CLUSTER", "INFO"]).ok()
    }

    pub fn state_ok(&self, id: u64) -> bool {
        self.cluster_info(id)
            .is_some_and(|s| s.contains("cluster_state:ok"))
    }

    /// Whether node `id`'s CLUSTER NODES lists every node with its client
    /// and cluster ports.
    pub fn knows_all_addresses(&self, id: u64) -> bool {
        let Ok(text) = self.query::<String>(id, &["CLUSTER", "NODES"]) else {
            return false;
        };
        self.nodes.iter().all(|n| {
            let addr = format!("127.0.0.1:{}@{}", n.port, n.cluster_port);
            text.lines().filter(|l| l.contains(&addr)).count() == 1
        })
    }

    pub fn slots(&self, id: u64) -> Option<Vec<SlotRange>> {
        let v: redis::Value = self.query(id, &["CLUSTER", "SLOTS"]).ok()?;
        parse_slots(&v)
    }

    /// Whether node `via` sees node `id` lead some slots (CLUSTER SLOTS).
    pub fn leads_some_slots_via(&self, via: u64, id: u64) -> bool {
        self.slots(via).is_some_and(|ranges| {
            ranges
                .iter()
                .any(|r| r.ports.first() == Some(&self.port(id)))
        })
    }

    /// The leader of `slot` as node `via` sees it (first node of the
    /// CLUSTER SLOTS entry).
    pub fn leader_of_slot_via(&self, via: u64, slot: u16) -> Option<u64> {
        let slots = self.slots(via)?;
        let r = slots.iter().find(|r| r.start <= slot && slot <= r.end)?;
        self.id_of_port(*r.ports.first()?)
    }

    /// The leader of `slot` as the first live node sees it.
    pub fn leader_of_slot(&mut self, slot: u16) -> Option<u64> {
        let live = self.live();
        live.iter()
            .find_map(|&via| self.leader_of_slot_via(via, slot))
    }

    /// The leader of `slot`, once all live nodes agree on it and it is live.
    pub fn wait_leader_of_slot(&mut self, slot: u16, limit: Duration) -> u64 {
        let mut found = None;
        let ok = wait_until(limit, || {
            let live = self.live();
            let seen: Vec<Option<u64>> = live
                .iter()
                .map(|&via| self.leader_of_slot_via(via, slot))
                .collect();
            match seen.first() {
                Some(Some(l)) if live.contains(l) && seen.iter().all(|s| s == &Some(*l)) => {
                    found = Some(*l);
                    true
                }
                _ => false,
            }
        });
        assert!(ok, "no agreed live leader for slot {slot} within {limit:?}");
        found.unwrap()
    }

    pub fn shard_digest(&self, id: u64, shard: u64) -> Option<Digest> {
        let v: redis::Value = self
            .query(id, &["CLUSTER", "SHARDDIGEST", &shard.to_string()])
            .ok()?;
        let redis::Value::Array(items) = v else {
            return None;
        };
        Some(Digest {
            applied: as_int(items.first()?)? as u64,
            keys: as_int(items.get(1)?)? as u64,
            digest: as_string(items.get(2)?)?,
        })
    }

    /// Shards whose three replicas do not (yet) report the same applied
    /// index, key count and digest, with what each node said.
    pub fn digest_mismatches(&self) -> Vec<(u64, Vec<Option<Digest>>)> {
        let mut bad = Vec::new();
        for shard in 1..=SHARDS {
            let ds: Vec<Option<Digest>> =
                (1..=NODES).map(|id| self.shard_digest(id, shard)).collect();
            let same = ds[0].is_some() && ds.iter().all(|d| d == &ds[0]);
            if !same {
                bad.push((shard, ds));
            }
        }
        bad
    }

    /// Waits until every shard's replicas agree (same applied index, then
    /// same key count and digest); panics with the last mismatch otherwise,
    /// and at once if replicas at the same applied index differ (divergence).
    pub fn wait_digests_equal(&self, limit: Duration) {
        let mut last = Vec::new();
        let mut diverged = Vec::new();
        let ok = wait_until(limit, || {
            last = self.digest_mismatches();
            diverged = last
                .iter()
                .filter(|(_, ds)| {
                    ds.iter().all(|d| d.is_some())
                        && ds.iter().all(|d| {
                            d.as_ref().map(|d| d.applied) == ds[0].as_ref().map(|d| d.applied)
                        })
                })
                .cloned()
                .collect();
            last.is_empty() || !diverged.is_empty()
        });
        assert!(
            diverged.is_empty(),
            "replicas DIVERGED: same applied index, different content: {diverged:#?}"
        );
        assert!(
            ok,
            "replicas did not converge within {limit:?}; mismatching shards: {last:#?}"
        );
    }

    /// Waits until the given nodes all report cluster_state:ok and list
    /// every node's address.
    pub fn try_wait_ready_on(&mut self, ids: &[u64], limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            for &id in ids {
                if !self.is_running(id) {
                    return Err(format!(
                        "node {id} exited; log tail:\n{}",
                        tail(&self.log(id), 30)
                    ));
                }
            }
            if ids
                .iter()
                .all(|&id| self.state_ok(id) && self.knows_all_addresses(id))
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let states: Vec<String> = ids
                    .iter()
                    .map(|&id| {
                        format!(
                            "node {id}: {:?}",
                            self.cluster_info(id).map(|s| tail(&s, 0))
                        )
                    })
                    .collect();
                return Err(format!("not ready within {limit:?}: {states:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn try_wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let ids: Vec<u64> = (1..=NODES).collect();
        self.try_wait_ready_on(&ids, limit)
    }

    /// All three nodes report cluster_state:ok and know every address.
    pub fn wait_ready(&mut self, limit: Duration) {
        if let Err(e) = self.try_wait_ready(limit) {
            panic!("cluster not ready: {e}");
        }
    }

    /// URLs of every node, for cluster clients.
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}/", n.port))
            .collect()
    }

    /// A cluster-aware async client with bounded timeouts and quick retries.
    pub fn cluster_client(&self) -> redis::cluster::ClusterClient {
        redis::cluster::ClusterClientBuilder::new(self.urls())
            .connection_timeout(Duration::from_secs(2))
            .response_timeout(Duration::from_secs(3))
            .overall_response_timeout(Some(Duration::from_secs(15)))
            .retries(25)
            .min_retry_wait(20)
            .max_retry_wait(400)
            .build()
            .expect("cluster client")
    }

    /// A [`Router`] over every node's client port.
    pub fn router(&self) -> Router {
        Router::new(
            self.nodes.iter().map(|n| n.port).collect(),
            Duration::from_secs(3),
        )
    }

    /// The log files of the nodes.
    pub fn log_paths(&self) -> Vec<PathBuf> {
        self.nodes.iter().map(|n| n.log_path.clone()).collect()
    }
}

/// The last `n` lines of `text` (everything when n == 0).
pub fn tail(text: &str, n: usize) -> String {
    if n == 0 {
        return text.to_string();
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut child) = n.child.take() {
                // SAFETY: as in `signal`: our own unreaped child.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, libc::SIGCONT);
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() || std::env::var_os("KVASIR_KEEP_TEST_DIRS").is_some() {
            eprintln!("cluster test folder kept: {}", self.root.display());
            for id in 1..=NODES {
                eprintln!(
                    "----- node {id} log tail ({}):\n{}",
                    self.node(id).log_path.display(),
                    tail(&self.log(id), 25)
                );
            }
        } else {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// How [`damage_raft_log_tail`] damages a Raft log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Garbage after the last complete record: a torn write of a batch that
    /// was never synced, so never acknowledged (within Raft's fault model).
    GarbageAfterTail,
    /// Bytes a few KiB before the end overwritten: disk corruption of
    /// synced (acknowledged) records, so recovery that drops everything
    /// from the damaged record on loses acknowledged entries.
    CorruptRecentRecords,
}

/// Damages the newest raft-engine log file in `dir/raft`; returns its path.
pub fn damage_raft_log_tail(dir: &Path, how: Damage) -> PathBuf {
    let raft = dir.join("raft");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&raft)
        .expect("read raft dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "raftlog"))
        .collect();
    files.sort();
    let path = files.pop().expect("a .raftlog file");
    let mut data = std::fs::read(&path).expect("read raftlog");
    // raft-engine may pad the file with zeros: find the end of what was written.
    let end = data
        .iter()
        .rposition(|&b| b != 0)
        .map(|p| p + 1)
        .unwrap_or(0);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut noise = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    };
    match how {
        Damage::GarbageAfterTail => {
            let from = end + 64;
            if data.len() < from + 256 {
                data.resize(from + 256, 0);
            }
            for b in &mut data[from..from + 256] {
                *b = noise();
            }
        }
        Damage::CorruptRecentRecords => {
            let from = end.saturating_sub(4096).max(end / 2);
            for b in &mut data[from..(from + 24).min(end)] {
                *b = noise();
            }
        }
    }
    let mut f = File::create(&path).expect("rewrite raftlog");
    f.write_all(&data).expect("write raftlog");
    f.sync_all().expect("sync raftlog");
    path
}

// ---------------------------------------------------------------------------
// A small blocking cluster router with explicit outcomes, for tests that must
// know whether a request may have been applied (redis-rs' cluster client
// retries internally, which hides that).

/// How a routed request ended.
#[derive(Debug)]
pub enum Outcome {
    /// The server answered (the reply may itself be a non-routing error
    /// such as WRONGTYPE, which applied nothing).
    Reply(redis::RedisResult<redis::Value>),
    /// The request may or may not have been applied: the connection broke or
    /// timed out after sending, the server said the outcome is unknown, or
    /// the time budget ran out.
    Unknown(String),
}

/// Follows MOVED to the slot's leader over per-node blocking connections;
/// retries only where the server certainly did not apply the request
/// (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, refused connections).
pub struct Router {
    pub ports: Vec<u16>,
    conns: std::collections::HashMap<u16, redis::Connection>,
    hint: std::collections::HashMap<u16, u16>,
    failed: std::collections::HashMap<u16, Instant>,
    next: usize,
    pub io_timeout: Duration,
    /// Redirects and retries seen (for reports).
    pub redirects: u64,
}

impl Router {
    pub fn new(ports: Vec<u16>, io_timeout: Duration) -> Router {
        Router {
            ports,
            conns: Default::default(),
            hint: Default::default(),
            failed: Default::default(),
            next: 0,
            io_timeout,
            redirects: 0,
        }
    }

    fn conn(&mut self, port: u16) -> redis::RedisResult<&mut redis::Connection> {
        if !self.conns.contains_key(&port) {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
            let c = client.get_connection_with_timeout(self.io_timeout)?;
            c.set_read_timeout(Some(self.io_timeout))?;
            c.set_write_timeout(Some(self.io_timeout))?;
            self.conns.insert(port, c);
        }
        Ok(self.conns.get_mut(&port).unwrap())
    }

    /// Learns every slot's leader from the first node that answers
    /// CLUSTER SLOTS (starting after the last one tried).
    pub fn refresh(&mut self) {
        // Nodes that failed in the last 10 s are asked last.
        let n = self.ports.len();
        self.next = (self.next + 1) % n;
        let mut order: Vec<u16> = (0..n).map(|i| self.ports[(self.next + i) % n]).collect();
        order.sort_by_key(|p| {
            self.failed
                .get(p)
                .is_some_and(|t| t.elapsed() < Duration::from_secs(10))
        });
        for port in order {
            let Ok(conn) = self.conn(port) else {
                self.forget(port);
                continue;
            };
            let v = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query::<redis::Value>(conn);
            match v.ok().as_ref().and_then(parse_slots) {
                Some(ranges) => {
                    for r in ranges {
                        if let Some(&p) = r.ports.first() {
                            for slot in r.start..=r.end {
                                self.hint.insert(slot, p);
                            }
                        }
                    }
                    return;
                }
                None => self.forget(port),
            }
        }
    }

    fn forget(&mut self, port: u16) {
        self.failed.insert(port, Instant::now());
        self.conns.remove(&port);
        self.hint.retain(|_, p| *p != port);
    }

    /// Runs `cmd` (whose keys hash to `slot`) within `budget`.
    pub fn run(&mut self, cmd: &redis::Cmd, slot: u16, budget: Duration) -> Outcome {
        let deadline = Instant::now() + budget;
        let mut busy = 0u32;
        loop {
            if Instant::now() >= deadline {
                return Outcome::Unknown("time budget exhausted while retrying".into());
            }
            if !self.hint.contains_key(&slot) {
                self.refresh();
            }
            let port = match self.hint.get(&slot) {
                Some(p) => *p,
                None => {
                    self.next = (self.next + 1) % self.ports.len();
                    self.ports[self.next]
                }
            };
            let conn = match self.conn(port) {
                Ok(c) => c,
                Err(_) => {
                    // Nothing was sent: try another node.
                    self.forget(port);
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            match cmd.query::<redis::Value>(conn) {
                Ok(v) => {
                    self.hint.insert(slot, port);
                    return Outcome::Reply(Ok(v));
                }
                Err(e) => match e.code() {
                    Some("MOVED") | Some("ASK") => {
                        self.redirects += 1;
                        let to = e
                            .detail()
                            .and_then(|d| d.rsplit(':').next())
                            .and_then(|p| p.trim().parse::<u16>().ok());
                        match to {
                            Some(p) => {
                                self.hint.insert(slot, p);
                            }
                            None => return Outcome::Unknown(format!("bad redirect: {e}")),
                        }
                    }
                    Some("TRYAGAIN") | Some("CLUSTERDOWN") => {
                        // Usually an election or a leader transfer in
                        // progress: ask the same node again shortly, and
                        // the others now and then.
                        self.redirects += 1;
                        busy += 1;
                        if busy.is_multiple_of(10) {
                            self.hint.remove(&slot);
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Some(_) => {
                        let text = format!("{e}");
                        if text.contains("outcome unknown") {
                            return Outcome::Unknown(text);
                        }
                        return Outcome::Reply(Err(e));
                    }
                    None => {
                        // I/O error or timeout after sending: unknown fate.
                        self.forget(port);
                        return Outcome::Unknown(format!("{e}"));
                    }
                },
            }
        }
    }

    /// Runs a command given as strings, keys hashed from `key`.
    pub fn run_args(&mut self, key: &str, args: &[&str], budget: Duration) -> Outcome {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        self.run(&c, key_slot(key.as_bytes()), budget)
    }

    /// For idempotent commands (SET of a fixed value, GET): runs it again
    /// after an unknown outcome (e.g. the node died mid-request) until the
    /// server answers, within 60 s; panics on an error reply.
    pub fn retry<T: redis::FromRedisValue>(&mut self, key: &str, args: &[&str]) -> T {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match self.run_args(key, args, Duration::from_secs(30)) {
                Outcome::Reply(Ok(v)) => {
                    return redis::from_redis_value(v).unwrap_or_else(|e| panic!("{args:?}: {e}"))
                }
                Outcome::Reply(Err(e)) => panic!("{args:?}: {e}"),
                Outcome::Unknown(e) => {
                    assert!(Instant::now() < deadline, "{args:?}: still failing: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    /// Like [`Router::run_args`], panicking unless the server answered
    /// without error (no retry after an unknown outcome).
    pub fn must<T: redis::FromRedisValue>(&mut self, key: &str, args: &[&str]) -> T {
        match self.run_args(key, args, Duration::from_secs(30)) {
            Outcome::Reply(Ok(v)) => {
                redis::from_redis_value(v).unwrap_or_else(|e| panic!("{args:?}: {e}"))
            }
            other => panic!("{args:?}: {other:?}"),
        }
    }
}
