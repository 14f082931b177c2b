//! `kvasir demo`: a three-node cluster on this machine, as child processes
//! of the current executable. Each node keeps its data in DIR/nodeN and
//! logs to DIR/nodeN.log, so running the demo again with the same DIR
//! brings the data back. Ctrl-C (or SIGTERM) stops every node: SIGTERM,
//! then SIGKILL after a grace period.

use crate::resp_client::{info_fields, info_get, Conn};
use clap::Args;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const NODES: u16 = 3;
/// Cluster (Raft) ports are the client ports plus this.
const CLUSTER_PORT_OFFSET: u16 = 10000;
const GRACE: Duration = Duration::from_secs(5);

#[derive(Args)]
pub struct DemoArgs {
    /// Data folder: node N keeps its data in DIR/nodeN and logs to
    /// DIR/nodeN.log. Reusing it brings the data back.
    #[arg(long, default_value = "./kvasir-demo")]
    dir: PathBuf,
    /// Client port of node 1; nodes use BASE..BASE+2 for clients and
    /// BASE+10000.. for the cluster bus (default 7001, or what DIR was
    /// created with: a cluster's identity includes its addresses).
    #[arg(long)]
    base_port: Option<u16>,
    /// Write-ahead log of every node: fsync, async, none.
    #[arg(long)]
    wal: Option<String>,
    /// Linearizable reads by readindex or lease.
    #[arg(long)]
    read_mode: Option<String>,
    /// Shards each node leads at bootstrap, the cluster has 3x as many
    /// (default 8, or what DIR was created with).
    #[arg(long)]
    shards_per_node: Option<usize>,
    /// Seconds to wait for every shard to elect a leader.
    #[arg(long, default_value_t = 60)]
    wait_secs: u64,
}

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
    fn prctl(option: i32, ...) -> i32;
}
const SIGTERM: i32 = 15;
const PR_SET_PDEATHSIG: i32 = 1;

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid of our own child; no memory is involved.
    unsafe {
        kill(pid as i32, sig);
    }
}

struct Node {
    id: u16,
    port: u16,
    cluster_port: u16,
    log: PathBuf,
    child: Child,
    /// Set once the child has exited (and been reaped).
    exited: Option<ExitStatus>,
}

impl Node {
    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn poll_exit(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exited = Some(status);
                return Some(status);
            }
        }
        None
    }
}

/// The last lines of a node's log, for error messages.
fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    let from = all.len().saturating_sub(lines);
    all[from..].iter().map(|l| format!("    {l}\n")).collect()
}

fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

pub fn run(args: DemoArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kvasir demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(demo(args))
}

/// What a data folder was created with, kept in DIR/demo.toml: the nodes'
/// addresses and the shard count make the cluster's identity, so a later
/// run must use the same ones to find its data.
#[derive(serde::Serialize, serde::Deserialize, PartialEq, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
struct Layout {
    base_port: u16,
    shards_per_node: usize,
}

const LAYOUT_FILE: &str = "demo.toml";

/// The layout to run with: the flags, else the folder's, else defaults. A
/// flag that contradicts an existing folder is an error.
fn layout(dir: &Path, args: &DemoArgs) -> Result<Layout, String> {
    let path = dir.join(LAYOUT_FILE);
    let saved: Option<Layout> = match std::fs::read_to_string(&path) {
        Ok(text) => {
            Some(toml::from_str(&text).map_err(|e| format!("bad {}: {e}", path.display()))?)
        }
        Err(_) => None,
    };
    let layout = Layout {
        base_port: args
            .base_port
            .or(saved.map(|l| l.base_port))
            .unwrap_or(7001),
        shards_per_node: args
            .shards_per_node
            .or(saved.map(|l| l.shards_per_node))
            .unwrap_or(8),
    };
    if let Some(saved) = saved {
        if saved != layout && dir.join("node1").exists() {
            return Err(format!(
                "{} holds a cluster created with --base-port {} --shards-per-node {}; run with those (or without them), or use another --dir",
                dir.display(),
                saved.base_port,
                saved.shards_per_node
            ));
        }
    }
    if layout.base_port == 0
        || layout
            .base_port
            .checked_add(NODES - 1 + CLUSTER_PORT_OFFSET)
            .is_none()
    {
        return Err(format!(
            "--base-port {} leaves no room for cluster ports (base + {CLUSTER_PORT_OFFSET} + 2 must be a port)",
            layout.base_port
        ));
    }
    if layout.shards_per_node == 0 || layout.shards_per_node * NODES as usize > 16384 {
        return Err("--shards-per-node must be between 1 and 5461".into());
    }
    Ok(layout)
}

async fn demo(args: DemoArgs) -> ExitCode {
    use tokio::signal::unix::{signal as unix_signal, SignalKind};
    let fail = |msg: String| {
        eprintln!("kvasir demo: {msg}");
        ExitCode::FAILURE
    };
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return fail(format!("cannot find the kvasir executable: {e}")),
    };
    let dir = match std::fs::create_dir_all(&args.dir).and_then(|_| args.dir.canonicalize()) {
        Ok(d) => d,
        Err(e) => return fail(format!("cannot use dir {}: {e}", args.dir.display())),
    };
    let layout = match layout(&dir, &args) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let ports: Vec<(u16, u16)> = (0..NODES)
        .map(|i| {
            let p = layout.base_port + i;
            (p, p + CLUSTER_PORT_OFFSET)
        })
        .collect();
    for &(p, c) in &ports {
        for port in [p, c] {
            if !port_free(port) {
                return fail(format!(
                    "port {port} is in use (another kvasir demo running?); pick other ports with --base-port"
                ));
            }
        }
    }
    // Signals are caught from here on, so Ctrl-C while waiting for leaders
    // still stops the children.
    let (mut sigterm, mut sigint) = match (
        unix_signal(SignalKind::terminate()),
        unix_signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => return fail("cannot install signal handlers".into()),
    };
    let saved = toml::to_string(&layout).unwrap_or_default();
    if let Err(e) = std::fs::write(dir.join(LAYOUT_FILE), saved) {
        return fail(format!(
            "cannot write {}: {e}",
            dir.join(LAYOUT_FILE).display()
        ));
    }
    let initial_cluster: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, (p, c))| format!("{}=127.0.0.1:{p}@{c}", i + 1))
        .collect();
    let initial_cluster = initial_cluster.join(",");
    println!(
        "kvasir demo: starting {NODES} nodes in {} ({})",
        dir.display(),
        if dir.join("node1").exists() {
            "existing data folder: the data comes back"
        } else {
            "new data folder"
        }
    );
    let mut nodes: Vec<Node> = Vec::new();
    for (i, &(port, cluster_port)) in ports.iter().enumerate() {
        let id = i as u16 + 1;
        match spawn_node(&exe, &dir, id, port, &initial_cluster, layout, &args) {
            Ok((child, log)) => {
                println!(
                    "  node{id}: pid {} client 127.0.0.1:{port} cluster bus 127.0.0.1:{cluster_port} data {} log {}",
                    child.id(),
                    dir.join(format!("node{id}")).display(),
                    log.display()
                );
                nodes.push(Node {
                    id,
                    port,
                    cluster_port,
                    log,
                    child,
                    exited: None,
                });
            }
            Err(e) => {
                stop_all(&mut nodes).await;
                return fail(format!("cannot start node{id}: {e}"));
            }
        }
    }

    // Wait until every node answers and sees a leader for every shard.
    let deadline = Instant::now() + Duration::from_secs(args.wait_secs);
    let mut last_progress = String::new();
    let mut readiness = Readiness::default();
    let mut last_print = Instant::now();
    loop {
        for n in nodes.iter_mut() {
            if let Some(status) = n.poll_exit() {
                let msg = format!(
                    "node{} (pid {}) exited during startup ({status}); last lines of {}:\n{}",
                    n.id,
                    n.child.id(),
                    n.log.display(),
                    log_tail(&n.log, 15)
                );
                stop_all(&mut nodes).await;
                return fail(msg);
            }
        }
        let (ready, progress) = readiness.check(&nodes);
        if ready {
            break;
        }
        if progress != last_progress || last_print.elapsed() >= Duration::from_secs(5) {
            println!("  waiting for leaders: {progress}");
            last_progress = progress;
            last_print = Instant::now();
        }
        if Instant::now() >= deadline {
            let mut msg = format!(
                "the cluster did not elect a leader for every shard within {}s ({last_progress}); see the logs:",
                args.wait_secs
            );
            for n in &nodes {
                msg.push_str(&format!(
                    "\n  {}:\n{}",
                    n.log.display(),
                    log_tail(&n.log, 5)
                ));
            }
            stop_all(&mut nodes).await;
            return fail(msg);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = sigint.recv() => {
                println!("kvasir demo: interrupted while starting; stopping the nodes");
                stop_all(&mut nodes).await;
                return ExitCode::from(130);
            }
            _ = sigterm.recv() => {
                println!("kvasir demo: terminated while starting; stopping the nodes");
                stop_all(&mut nodes).await;
                return ExitCode::from(143);
            }
        }
    }

    print_summary(&nodes);
    println!();
    println!("Connect with:    redis-cli -c -p {}", nodes[0].port);
    println!(
        "Cluster status:  kvasir cluster status --node 127.0.0.1:{}",
        nodes[0].port
    );
    println!(
        "Press Ctrl-C to stop the nodes; the data stays in {} and comes back with `kvasir demo --dir {}`.",
        dir.display(),
        dir.display()
    );
    let _ = std::io::stdout().flush();

    // Run until a signal; report any node that dies on its own.
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let code = loop {
        tokio::select! {
            _ = sigint.recv() => break ExitCode::SUCCESS,
            _ = sigterm.recv() => break ExitCode::SUCCESS,
            _ = tick.tick() => {
                for n in nodes.iter_mut() {
                    if let Some(status) = n.poll_exit() {
                        eprintln!(
                            "kvasir demo: node{} (pid {}) exited unexpectedly ({status}); last lines of {}:\n{}",
                            n.id,
                            n.child.id(),
                            n.log.display(),
                            log_tail(&n.log, 10)
                        );
                        eprintln!(
                            "kvasir demo: the other nodes keep serving while a majority of each shard is up; restart the demo to bring node{} back",
                            n.id
                        );
                    }
                }
                if nodes.iter().all(|n| n.exited.is_some()) {
                    eprintln!("kvasir demo: every node has exited");
                    break ExitCode::FAILURE;
                }
            }
        }
    };
    println!("kvasir demo: stopping the nodes");
    stop_all(&mut nodes).await;
    code
}

fn spawn_node(
    exe: &Path,
    dir: &Path,
    id: u16,
    port: u16,
    initial_cluster: &str,
    layout: Layout,
    args: &DemoArgs,
) -> Result<(Child, PathBuf), String> {
    let data = dir.join(format!("node{id}"));
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    let log_path = dir.join(format!("node{id}.log"));
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| format!("{}: {e}", log_path.display()))?;
    let _ = writeln!(
        log,
        "--- kvasir demo: starting node{id} (unix time {}) ---",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    );
    let err_log = log.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.arg("server")
        .arg("--node-id")
        .arg(id.to_string())
        .arg("--port")
        .arg(port.to_string())
        .arg("--initial-cluster")
        .arg(initial_cluster)
        .arg("--replicas")
        .arg(NODES.to_string())
        .arg("--shards-per-node")
        .arg(layout.shards_per_node.to_string())
        .arg("--dir")
        .arg(&data);
    if let Some(w) = &args.wal {
        cmd.arg("--wal").arg(w);
    }
    if let Some(r) = &args.read_mode {
        cmd.arg("--read-mode").arg(r);
    }
    cmd.stdin(Stdio::null())
        .stdout(log)
        .stderr(err_log)
        // Own process group: a terminal's Ctrl-C reaches only the demo,
        // which then stops the nodes in order.
        .process_group(0);
    // SAFETY: prctl is async-signal-safe; it makes the kernel send SIGTERM
    // to the node if the demo dies without stopping it (e.g. SIGKILL).
    unsafe {
        cmd.pre_exec(|| {
            prctl(PR_SET_PDEATHSIG, SIGTERM as std::ffi::c_ulong);
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| format!("{}: {e}", exe.display()))?;
    Ok((child, log_path))
}

/// What the nodes said in one readiness poll.
struct Poll {
    /// Every node answers, has a leader for every shard and knows every
    /// node's client address (so -MOVED works).
    serving: bool,
    /// Shards whose leader is not (yet) their preferred node: leadership
    /// still moves after the first elections.
    moving: usize,
    /// Who leads what, as each node sees it.
    leaders: Vec<String>,
    progress: String,
}

fn poll(nodes: &[Node]) -> Poll {
    let mut serving = true;
    let mut moving = std::collections::BTreeSet::new();
    let mut leaders = Vec::new();
    let mut parts = Vec::new();
    for n in nodes {
        let answer = Conn::connect(&n.addr(), Duration::from_millis(500)).and_then(|mut c| {
            let info = info_fields(&c.call_text(&["CLUSTER", "INFO"])?);
            let nodes_text = c.call_text(&["CLUSTER", "NODES"])?;
            let raft = info_fields(&c.call_text(&["INFO", "raft"])?);
            Ok((info, nodes_text, raft))
        });
        let Ok((info, nodes_text, raft)) = answer else {
            serving = false;
            parts.push(format!("node{} not answering yet", n.id));
            continue;
        };
        let state = info_get(&info, "cluster_state").unwrap_or("?");
        let ok = info_get(&info, "cluster_slots_ok").unwrap_or("0");
        let addrs_known = nodes_text.lines().count() == nodes.len() && !nodes_text.contains(":0@");
        serving &= state == "ok" && addrs_known;
        for (k, v) in &raft {
            if !k.starts_with("group") {
                continue;
            }
            let field = |name: &str| {
                v.split(',')
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                    .unwrap_or("?")
            };
            let leader = field("leader");
            if leader != field("preferred") {
                moving.insert(k.clone());
            }
            leaders.push(format!("{}:{k}={leader}", n.id));
        }
        let extra = if state == "ok" && !addrs_known {
            ", learning node addresses"
        } else {
            ""
        };
        parts.push(format!("node{} {state} ({ok}/16384 slots{extra})", n.id));
    }
    let mut progress = parts.join(", ");
    if serving && !moving.is_empty() {
        progress.push_str(&format!(
            "; {} groups moving to their preferred leader",
            moving.len()
        ));
    }
    Poll {
        serving,
        moving: moving.len(),
        leaders,
        progress,
    }
}

/// Readiness across polls: serving with every leader in place, or serving
/// with leadership unchanged for a few seconds (a node that cannot take
/// its preferred shards does not block the demo).
#[derive(Default)]
struct Readiness {
    last: Vec<String>,
    since: Option<Instant>,
}

impl Readiness {
    fn check(&mut self, nodes: &[Node]) -> (bool, String) {
        let p = poll(nodes);
        if !p.serving {
            self.since = None;
            return (false, p.progress);
        }
        if p.leaders != self.last || self.since.is_none() {
            self.last = p.leaders;
            self.since = Some(Instant::now());
        }
        let settled = self
            .since
            .is_some_and(|t| t.elapsed() >= Duration::from_secs(3));
        (p.moving == 0 || settled, p.progress)
    }
}

fn print_summary(nodes: &[Node]) {
    println!("Cluster ready:");
    let mut shards = String::from("?");
    for n in nodes {
        let fields = Conn::connect(&n.addr(), Duration::from_secs(2))
            .and_then(|mut c| c.call_text(&["INFO", "cluster"]))
            .map(|t| info_fields(&t))
            .unwrap_or_default();
        if let Some(s) = info_get(&fields, "cluster_shards") {
            shards = s.to_string();
        }
        println!(
            "  node{}  pid {:<7} 127.0.0.1:{} (bus {})  leads {} shards, follows {}",
            n.id,
            n.child.id(),
            n.port,
            n.cluster_port,
            info_get(&fields, "cluster_shards_led").unwrap_or("?"),
            info_get(&fields, "cluster_shards_followed").unwrap_or("?"),
        );
    }
    println!(
        "  {} nodes, {shards} shards, {} replicas each, 16384 slots",
        nodes.len(),
        NODES
    );
}

/// SIGTERM to every live node, then SIGKILL to those still running after
/// the grace period; reaps them all.
async fn stop_all(nodes: &mut [Node]) {
    for n in nodes.iter_mut() {
        n.poll_exit();
        if n.exited.is_none() {
            signal(n.child.id(), SIGTERM);
        }
    }
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        for n in nodes.iter_mut() {
            if let Some(status) = n.poll_exit() {
                println!("  node{} (pid {}) stopped ({status})", n.id, n.child.id());
            }
        }
        if nodes.iter().all(|n| n.exited.is_some()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for n in nodes.iter_mut() {
        if n.exited.is_none() {
            eprintln!(
                "  node{} (pid {}) did not stop within {}s; killing it",
                n.id,
                n.child.id(),
                GRACE.as_secs()
            );
            let _ = n.child.kill();
            n.exited = n.child.wait().ok();
        }
    }
}
