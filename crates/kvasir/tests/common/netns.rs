//! Network-namespace cluster harness: three `kvasir server` processes, each
//! in its own network namespace behind a veth pair on a test bridge, so
//! faults are real network faults (dropped packets, no RST) rather than
//! killed loopback sockets. The host reaches every node over the bridge.
//!
//! Faults it can inject: a node's link down (`cut`), a cut between two
//! nodes that both still reach the third (blackhole routes, `cut_between`),
//! one-way loss on one direction of a node's veth (`drop_egress`), kill -9
//! and restart, SIGSTOP and SIGCONT. `heal_all` undoes everything.
//!
//! Needs root and iproute2. Every namespace, link, qdisc and process is
//! removed on drop (also on a panic, when the node logs' tails are printed
//! and the folder is kept). Names and subnets are distinct per process and
//! per `Net` of a process, so test processes can overlap.
//!
//! Include it with `#[path = "common/netns.rs"] mod netns;`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const NODES: u8 = 3;
pub const PORT: u16 = 7001;
pub const BUS: u16 = 17001;

/// Runs `ip`; the error output when it fails.
pub fn try_ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("iproute2 `ip` is needed: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `ip`, panicking when it fails (a fault the test asked for that
/// cannot be injected would make the test meaningless).
pub fn ip(args: &[&str]) {
    if let Err(e) = try_ip(args) {
        panic!("{e}");
    }
}

/// Runs `tc`, in namespace `ns` when given.
fn tc(ns: Option<&str>, args: &[&str]) -> Result<(), String> {
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "tc"]);
            c
        }
        None => Command::new("tc"),
    };
    let out = cmd
        .args(args)
        .output()
        .map_err(|e| format!("`tc` is needed: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "tc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Which direction of a node's veth drops everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Packets to the node (host-side veth egress): it hears nobody, its
    /// own packets still go out.
    IntoNode,
    /// Packets from the node (its eth0 egress): everybody stops hearing it,
    /// it still hears them.
    OutOfNode,
}

/// The namespaces, bridge and node processes of one cluster, removed on drop.
pub struct Net {
    tag: String,
    subnet: String,
    children: Vec<Option<Child>>,
    pub dir: PathBuf,
    /// Extra `kvasir server` flags for every node.
    extra: Vec<String>,
    /// Faults in force, so `heal_all` can undo exactly them.
    down: Vec<u8>,
    cuts: Vec<(u8, u8)>,
    losses: Vec<(u8, Direction)>,
    paused: Vec<u8>,
    /// When a fault was last undone (link up, route or qdisc removed, node
    /// continued or restarted): recovery times are measured from it.
    pub last_heal: Option<Instant>,
}

impl Net {
    /// A new network; panics when namespaces cannot be set up.
    pub fn new(prefix: &str) -> Net {
        Net::try_new(prefix).unwrap_or_else(|e| panic!("network namespaces: {e}"))
    }

    /// A new network: bridge, three namespaces, veths. Err when the machine
    /// cannot do it (not root, no iproute2); what was made is removed.
    /// `prefix` (3 letters) tells which test file made the interfaces.
    pub fn try_new(prefix: &str) -> Result<Net, String> {
        // Distinct names and subnet per Net of a process and per process,
        // so tests and runs can overlap. Interface names must stay under
        // 16 bytes: prefix(3) + 5 + 1 + "br" at most.
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 6;
        let pid = std::process::id();
        let tag = format!("{prefix}{}{seq}", pid % 100_000);
        // Second octet 100..=249, third 0..=249: unique for pids that
        // differ modulo 6250 (and per seq within a process).
        let subnet = format!("10.{}.{}", 100 + ((pid / 250) % 25) * 6 + seq, pid % 250);
        let dir = std::env::temp_dir().join(format!("kvasir-{prefix}-{pid}-{seq}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let net = Net {
            tag,
            subnet,
            children: Vec::new(),
            dir,
            extra: Vec::new(),
            down: Vec::new(),
            cuts: Vec::new(),
            losses: Vec::new(),
            paused: Vec::new(),
            last_heal: None,
        };
        // On an error `net` is dropped, which removes what was made.
        let br = net.bridge();
        try_ip(&["link", "add", &br, "type", "bridge"])?;
        try_ip(&["addr", "add", &format!("{}.254/24", net.subnet), "dev", &br])?;
        try_ip(&["link", "set", &br, "up"])?;
        // Neighbour (ARP) probes every 100 ms instead of the kernel's 1 s
        // on this network's links. A cut link leaves its neighbours'
        // entries waiting for the next probe, so with 1 s the network
        // itself delays a healed node by up to 1 s: the recovery times
        // measured here are Kvasir's (docs/reliability.md has both).
        try_ip(&[
            "ntable",
            "change",
            "name",
            "arp_cache",
            "dev",
            &br,
            "retrans",
            "100",
        ])?;
        for i in 1..=NODES {
            let ns = net.ns(i);
            try_ip(&["netns", "add", &ns])?;
            try_ip(&[
                "link",
                "add",
                &net.veth(i),
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &ns,
            ])?;
            try_ip(&["link", "set", &net.veth(i), "master", &br, "up"])?;
            try_ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", net.addr(i)),
                "dev",
                "eth0",
            ])?;
            try_ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            try_ip(&[
                "-n",
                &ns,
                "ntable",
                "change",
                "name",
                "arp_cache",
                "dev",
                "eth0",
                "retrans",
                "100",
            ])?;
            try_ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    pub fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }
    pub fn ns(&self, i: u8) -> String {
        format!("{}n{i}", self.tag)
    }
    pub fn veth(&self, i: u8) -> String {
        format!("{}v{i}", self.tag)
    }
    pub fn addr(&self, i: u8) -> String {
        format!("{}.{i}", self.subnet)
    }

    /// Starts the three nodes, each with `extra` server flags (kept for
    /// restarts).
    pub fn start_with(&mut self, extra: &[&str]) {
        self.extra = extra.iter().map(|s| s.to_string()).collect();
        for i in 1..=NODES {
            self.children.push(None);
            self.spawn(i);
        }
    }

    pub fn start(&mut self) {
        self.start_with(&[]);
    }

    fn spawn(&mut self, i: u8) {
        let initial: Vec<String> = (1..=NODES)
            .map(|i| format!("{i}={}:{PORT}@{BUS}", self.addr(i)))
            .collect();
        let initial = initial.join(",");
        let data = self.dir.join(format!("node{i}"));
        // Appended, so a restarted node's log follows its earlier life.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .expect("create the node log file");
        let log2 = log.try_clone().expect("clone the node log file handle");
        // `ip netns exec` execs kvasir in place (no fork), so the child's
        // pid is the server's: kill and signals reach it directly.
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(i)])
            .arg(env!("CARGO_BIN_EXE_kvasir"))
            .args(["server", "--node-id", &i.to_string()])
            .args(["--port", &PORT.to_string(), "--bind", &self.addr(i)])
            .args(["--initial-cluster", &initial])
            .args(self.threads_args())
            .args(&self.extra)
            .arg("--dir")
            .arg(&data)
            .stdout(Stdio::from(log2))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn kvasir in its namespace");
        self.children[usize::from(i - 1)] = Some(child);
    }

    /// `--threads N` when KVASIR_TEST_THREADS=N is set and the test chose
    /// none (see scripts/test.sh).
    fn threads_args(&self) -> Vec<String> {
        match std::env::var("KVASIR_TEST_THREADS") {
            Ok(n) if !n.is_empty() && !self.extra.iter().any(|e| e == "--threads") => {
                vec!["--threads".into(), n]
            }
            _ => Vec::new(),
        }
    }

    fn signal(&self, i: u8, sig: libc::c_int) {
        if let Some(c) = &self.children[usize::from(i - 1)] {
            // SAFETY: kill(2) on the pid of our own child, not yet reaped
            // (we hold its Child), so the pid cannot have been reused.
            unsafe {
                libc::kill(c.id() as libc::pid_t, sig);
            }
        }
    }

    /// kill -9 node i and reap it.
    pub fn kill(&mut self, i: u8) {
        if let Some(mut c) = self.children[usize::from(i - 1)].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.paused.retain(|&p| p != i);
    }

    /// Starts node i again (same flags and folder) if it is not running.
    pub fn restart(&mut self, i: u8) {
        if self.children[usize::from(i - 1)].is_none() {
            self.spawn(i);
            self.last_heal = Some(Instant::now());
        }
    }

    /// Nodes whose process exited on its own (not killed by the test),
    /// with the exit status: a crash the test must report, never mask by
    /// restarting.
    pub fn exited(&mut self) -> Vec<(u8, std::process::ExitStatus)> {
        let mut out = Vec::new();
        for (k, c) in self.children.iter_mut().enumerate() {
            if let Some(status) = c.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                out.push((k as u8 + 1, status));
            }
        }
        out
    }

    pub fn is_running(&self, i: u8) -> bool {
        self.children[usize::from(i - 1)].is_some()
    }

    /// SIGSTOP: the node keeps its sockets but answers nothing.
    pub fn pause(&mut self, i: u8) {
        self.signal(i, libc::SIGSTOP);
        if !self.paused.contains(&i) {
            self.paused.push(i);
        }
    }

    pub fn resume(&mut self, i: u8) {
        self.signal(i, libc::SIGCONT);
        self.paused.retain(|&p| p != i);
        self.last_heal = Some(Instant::now());
    }

    /// Drops node i's packets (link down on the bridge side).
    pub fn cut(&mut self, i: u8) {
        ip(&["link", "set", &self.veth(i), "down"]);
        if !self.down.contains(&i) {
            self.down.push(i);
        }
    }

    pub fn heal(&mut self, i: u8) {
        ip(&["link", "set", &self.veth(i), "up"]);
        self.down.retain(|&d| d != i);
        self.last_heal = Some(Instant::now());
    }

    /// Cuts only the link between nodes i and j (both still reach the
    /// third): their packets to each other are dropped by blackhole routes.
    pub fn cut_between(&mut self, i: u8, j: u8) {
        for (a, b) in [(i, j), (j, i)] {
            ip(&[
                "-n",
                &self.ns(a),
                "route",
                "add",
                "blackhole",
                &format!("{}/32", self.addr(b)),
            ]);
        }
        self.cuts.push((i, j));
    }

    pub fn heal_between(&mut self, i: u8, j: u8) {
        for (a, b) in [(i, j), (j, i)] {
            ip(&[
                "-n",
                &self.ns(a),
                "route",
                "del",
                "blackhole",
                &format!("{}/32", self.addr(b)),
            ]);
        }
        self.cuts.retain(|&c| c != (i, j));
        self.last_heal = Some(Instant::now());
    }

    /// One-way loss: every packet in direction `dir` of node i's veth is
    /// dropped. netem `loss 100%` when the kernel has it; otherwise a token
    /// bucket whose bucket (10 bytes) is smaller than any packet, which the
    /// kernel drops on enqueue (this machine's kernel has no sch_netem).
    pub fn drop_egress(&mut self, i: u8, dir: Direction) {
        let (ns, dev) = self.loss_device(i, dir);
        let ns = ns.as_deref();
        let netem = tc(
            ns,
            &["qdisc", "add", "dev", &dev, "root", "netem", "loss", "100%"],
        );
        if netem.is_err() {
            let tbf = tc(
                ns,
                &[
                    "qdisc", "add", "dev", &dev, "root", "tbf", "rate", "8kbit", "burst", "10",
                    "limit", "1",
                ],
            );
            if let Err(e) = tbf {
                panic!("cannot inject one-way loss: {netem:?}; {e}");
            }
        }
        self.losses.push((i, dir));
    }

    /// Rate-limits direction `dir` of node i's veth to `rate` (tc units,
    /// e.g. "4mbit"), so a large transfer such as a snapshot takes a while.
    /// Removed like a loss, by `restore_egress` or `heal_all`.
    pub fn slow_egress(&mut self, i: u8, dir: Direction, rate: &str) {
        let (ns, dev) = self.loss_device(i, dir);
        let args = [
            "qdisc", "add", "dev", &dev, "root", "tbf", "rate", rate, "burst", "32kbit", "latency",
            "500ms",
        ];
        if let Err(e) = tc(ns.as_deref(), &args) {
            panic!("cannot rate-limit node {i}'s link: {e}");
        }
        self.losses.push((i, dir));
    }

    pub fn restore_egress(&mut self, i: u8, dir: Direction) {
        let (ns, dev) = self.loss_device(i, dir);
        if let Err(e) = tc(ns.as_deref(), &["qdisc", "del", "dev", &dev, "root"]) {
            panic!("cannot remove the loss qdisc: {e}");
        }
        self.losses.retain(|&l| l != (i, dir));
        self.last_heal = Some(Instant::now());
    }

    fn loss_device(&self, i: u8, dir: Direction) -> (Option<String>, String) {
        match dir {
            Direction::IntoNode => (None, self.veth(i)),
            Direction::OutOfNode => (Some(self.ns(i)), "eth0".to_string()),
        }
    }

    /// Undoes every fault in force: links up, blackholes and loss qdiscs
    /// removed, paused nodes continued, killed nodes restarted.
    pub fn heal_all(&mut self) {
        for i in self.down.clone() {
            self.heal(i);
        }
        for (i, j) in self.cuts.clone() {
            self.heal_between(i, j);
        }
        for (i, dir) in self.losses.clone() {
            self.restore_egress(i, dir);
        }
        for i in self.paused.clone() {
            self.resume(i);
        }
        for i in 1..=NODES {
            self.restart(i);
        }
    }

    /// Bytes received so far by each established connection to node i's
    /// bus port, by peer address (`ss -ti` in its namespace). A snapshot
    /// goes on a fresh connection of its own, so a connection that grows by
    /// hundreds of KiB is a snapshot transfer in flight.
    pub fn bus_bytes_received(&self, i: u8) -> std::collections::HashMap<String, u64> {
        let mut by_peer = std::collections::HashMap::new();
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns(i),
                "ss",
                "-tinH",
                "state",
                "established",
            ])
            .arg(format!("( sport = :{BUS} )"))
            .output();
        let Ok(out) = out else { return by_peer };
        // A connection's line ("0 0 local peer") is followed by an indented
        // line of its TCP info.
        let mut peer = None;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if !line.starts_with(char::is_whitespace) {
                peer = line.split_whitespace().nth(3).map(str::to_string);
                continue;
            }
            let bytes = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("bytes_received:"))
                .and_then(|n| n.parse::<u64>().ok());
            if let (Some(p), Some(b)) = (&peer, bytes) {
                by_peer.insert(p.clone(), b);
            }
        }
        by_peer
    }

    pub fn log_path(&self, i: u8) -> PathBuf {
        self.dir.join(format!("node{i}.log"))
    }

    pub fn log(&self, i: u8) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            // A stopped process dies of SIGKILL too, but continue it first
            // so nothing lingers in the stopped state.
            // SAFETY: our own unreaped child, as in `signal`.
            unsafe {
                libc::kill(c.id() as libc::pid_t, libc::SIGCONT);
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        // Deleting a namespace deletes its eth0, hence the veth pair, its
        // qdiscs and the namespace's blackhole routes.
        for i in 1..=NODES {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(i)])
                .stderr(Stdio::null())
                .status();
            let _ = Command::new("ip")
                .args(["link", "del", &self.veth(i)])
                .stderr(Stdio::null())
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge()])
            .stderr(Stdio::null())
            .status();
        if !std::thread::panicking() && std::env::var_os("KVASIR_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("test folder kept: {}", self.dir.display());
            for i in 1..=NODES {
                eprintln!("----- node {i} log tail:\n{}", tail(&self.log(i), 15));
            }
        }
    }
}

pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One RESP command over a fresh connection (bounded); the reply as text.
pub fn call(addr: &str, args: &[&str]) -> Option<String> {
    let sock: std::net::SocketAddr = format!("{addr}:{PORT}").parse().ok()?;
    let mut s = TcpStream::connect_timeout(&sock, Duration::from_millis(300)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(1500))).ok()?;
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes()).ok()?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    if let Some(n) = line
        .strip_prefix('$')
        .and_then(|n| n.trim().parse::<usize>().ok())
    {
        let mut body = vec![0u8; n + 2];
        r.read_exact(&mut body).ok()?;
        return Some(String::from_utf8_lossy(&body).into_owned());
    }
    Some(line)
}

pub fn state_ok(addr: &str) -> bool {
    call(addr, &["CLUSTER", "INFO"]).is_some_and(|t| t.contains("cluster_state:ok"))
}

/// Waits until `ok` holds, polling; the time it took, or None.
pub fn wait(limit: Duration, mut ok: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if ok() {
            return Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Node `of`'s line in node `via`'s CLUSTER NODES.
pub fn node_line(net: &Net, via: u8, of: u8) -> String {
    call(&net.addr(via), &["CLUSTER", "NODES"])
        .unwrap_or_default()
        .lines()
        .find(|l| l.contains(&format!("{}:{PORT}@", net.addr(of))))
        .unwrap_or("")
        .to_string()
}

/// CRC16/XMODEM, as Redis Cluster hashes keys, honouring `{hash tags}`.
pub fn key_slot(key: &[u8]) -> u16 {
    let key = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    let mut crc: u16 = 0;
    for &b in key {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// Which node (1..=3) masters `slot` in node `via`'s CLUSTER NODES.
pub fn master_of(net: &Net, via: u8, slot: u16) -> Option<u8> {
    let text = call(&net.addr(via), &["CLUSTER", "NODES"])?;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 9 {
            continue;
        }
        let covers = f[8..].iter().any(|r| match r.split_once('-') {
            Some((a, b)) => {
                a.parse::<u16>().is_ok_and(|a| a <= slot)
                    && b.parse::<u16>().is_ok_and(|b| slot <= b)
            }
            None => r.parse::<u16>().is_ok_and(|s| s == slot),
        });
        if covers {
            return (1..=NODES).find(|&i| f[1].starts_with(&format!("{}:", net.addr(i))));
        }
    }
    None
}
