//! A real network partition: three nodes, each in its own network
//! namespace behind a veth pair on a test bridge. Taking a node's link down
//! drops its packets silently (no RST, as a dead switch or a cut cable
//! does). The other two must see it as failed, elect leaders for its
//! shards and keep serving; after the link comes back the isolated node must
//! rejoin and the whole cluster serve every slot again quickly.
//!
//! Needs root and iproute2 (the test machine and CI have both); every
//! namespace, link and process is removed when the test ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NODES: u8 = 3;
const PORT: u16 = 7001;
const BUS: u16 = 17001;

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("iproute2 `ip` is needed for this test: {e}"));
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The namespaces, bridge and node processes of one run, removed on drop.
struct Net {
    tag: String,
    subnet: String,
    children: Vec<Option<Child>>,
    dir: std::path::PathBuf,
}

impl Net {
    fn new() -> Net {
        // Distinct names and subnet per test of a process and per process,
        // so tests and runs can overlap.
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 4;
        let pid = std::process::id();
        let tag = format!("kvp{}{seq}", pid % 100_000);
        let subnet = format!("10.{}.{}", 100 + seq * 40 + (pid / 250) % 40, pid % 250);
        let dir = std::env::temp_dir().join(format!("kvasir-partition-{pid}-{seq}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let net = Net {
            tag,
            subnet,
            children: Vec::new(),
            dir,
        };
        let br = net.bridge();
        ip(&["link", "add", &br, "type", "bridge"]);
        ip(&["addr", "add", &format!("{}.254/24", net.subnet), "dev", &br]);
        ip(&["link", "set", &br, "up"]);
        for i in 1..=NODES {
            let ns = net.ns(i);
            ip(&["netns", "add", &ns]);
            ip(&[
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
            ]);
            ip(&["link", "set", &net.veth(i), "master", &br, "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", net.addr(i)),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        net
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }
    fn ns(&self, i: u8) -> String {
        format!("{}n{i}", self.tag)
    }
    fn veth(&self, i: u8) -> String {
        format!("{}v{i}", self.tag)
    }
    fn addr(&self, i: u8) -> String {
        format!("{}.{i}", self.subnet)
    }

    fn start(&mut self) {
        let initial: Vec<String> = (1..=NODES)
            .map(|i| format!("{i}={}:{PORT}@{BUS}", self.addr(i)))
            .collect();
        let initial = initial.join(",");
        for i in 1..=NODES {
            let data = self.dir.join(format!("node{i}"));
            let log = std::fs::File::create(self.dir.join(format!("node{i}.log"))).unwrap();
            let child = Command::new("ip")
                .args(["netns", "exec", &self.ns(i)])
                .arg(env!("CARGO_BIN_EXE_kvasir"))
                .args(["server", "--node-id", &i.to_string()])
                .args(["--port", &PORT.to_string(), "--bind", &self.addr(i)])
                .args(["--initial-cluster", &initial])
                .arg("--dir")
                .arg(&data)
                .stdout(Stdio::from(log.try_clone().unwrap()))
                .stderr(Stdio::from(log))
                .spawn()
                .expect("spawn kvasir in its namespace");
            self.children.push(Some(child));
        }
    }

    /// Drops node i's packets (link down on the bridge side).
    fn cut(&self, i: u8) {
        ip(&["link", "set", &self.veth(i), "down"]);
    }

    fn heal(&self, i: u8) {
        ip(&["link", "set", &self.veth(i), "up"]);
    }

    /// Cuts only the link between nodes i and j (both still reach the
    /// third): their packets to each other are dropped by blackhole routes.
    fn cut_between(&self, i: u8, j: u8) {
        ip(&[
            "-n",
            &self.ns(i),
            "route",
            "add",
            "blackhole",
            &format!("{}/32", self.addr(j)),
        ]);
        ip(&[
            "-n",
            &self.ns(j),
            "route",
            "add",
            "blackhole",
            &format!("{}/32", self.addr(i)),
        ]);
    }

    fn heal_between(&self, i: u8, j: u8) {
        ip(&[
            "-n",
            &self.ns(i),
            "route",
            "del",
            "blackhole",
            &format!("{}/32", self.addr(j)),
        ]);
        ip(&[
            "-n",
            &self.ns(j),
            "route",
            "del",
            "blackhole",
            &format!("{}/32", self.addr(i)),
        ]);
    }

    fn log(&self, i: u8) -> String {
        std::fs::read_to_string(self.dir.join(format!("node{i}.log"))).unwrap_or_default()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for i in 1..=NODES {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(i)])
                .status();
            let _ = Command::new("ip")
                .args(["link", "del", &self.veth(i)])
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge()])
            .status();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            for i in 1..=NODES {
                eprintln!("----- node {i} log tail:\n{}", tail(&self.log(i), 15));
            }
        }
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One RESP command over a fresh connection (bounded); the reply as text.
fn call(addr: &str, args: &[&str]) -> Option<String> {
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

fn state_ok(addr: &str) -> bool {
    call(addr, &["CLUSTER", "INFO"]).is_some_and(|t| t.contains("cluster_state:ok"))
}

/// Waits until `ok` holds, polling; the time it took, or None.
fn wait(limit: Duration, mut ok: impl FnMut() -> bool) -> Option<Duration> {
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
fn node_line(net: &Net, via: u8, of: u8) -> String {
    call(&net.addr(via), &["CLUSTER", "NODES"])
        .unwrap_or_default()
        .lines()
        .find(|l| l.contains(&format!("{}:{PORT}@", net.addr(of))))
        .unwrap_or("")
        .to_string()
}

#[test]
fn isolated_node_is_marked_failed_and_rejoins_quickly_after_the_heal() {
    let mut net = Net::new();
    net.start();
    let all: Vec<String> = (1..=NODES).map(|i| net.addr(i)).collect();
    wait(Duration::from_secs(30), || all.iter().all(|a| state_ok(a))).expect("cluster ready");

    for round in 1..=2 {
        // Node 1 vanishes from the network: no RST, packets dropped.
        net.cut(1);
        let t_cut = Instant::now();
        // Both others lost it: a majority agrees, FAIL (not PFAIL).
        let failed = wait(Duration::from_secs(10), || {
            node_line(&net, 2, 1).contains(" master,fail - ")
                && node_line(&net, 3, 1).contains(" master,fail - ")
        })
        .unwrap_or_else(|| {
            panic!(
                "round {round}: nodes 2 and 3 never marked node 1 failed: {:?}",
                node_line(&net, 2, 1)
            )
        });
        // `kvasir cluster status` (run from outside the partition, where
        // every node answers) shows the nodes' failure detectors' view.
        let status = Command::new(env!("CARGO_BIN_EXE_kvasir"))
            .args([
                "cluster",
                "status",
                "--node",
                &format!("{}:{PORT}", net.addr(2)),
            ])
            .output()
            .expect("kvasir cluster status");
        let text = String::from_utf8_lossy(&status.stdout);
        let row = text
            .lines()
            .find(|l| l.starts_with("1 ") && l.contains(&net.addr(1)))
            .unwrap_or("");
        assert!(
            row.contains("seen down by node 2, 3"),
            "round {round}: cluster status does not show node 1 cut off:\n{text}"
        );
        let served = wait(Duration::from_secs(15), || {
            state_ok(&net.addr(2)) && state_ok(&net.addr(3))
        })
        .unwrap_or_else(|| panic!("round {round}: the majority side never served every slot"));
        println!(
            "round {round}: node 1 marked failed after {failed:?}; nodes 2 and 3 serve every slot after {served:?}"
        );
        // Stay cut off for a while (the sender queues would pile up).
        std::thread::sleep(Duration::from_secs(4).saturating_sub(t_cut.elapsed()));

        net.heal(1);
        let healed = wait(Duration::from_secs(20), || {
            all.iter().all(|a| state_ok(a))
                && !node_line(&net, 2, 1).contains("fail")
                && !node_line(&net, 1, 2).contains("fail")
        })
        .unwrap_or_else(|| panic!("round {round}: the cluster did not recover after the heal"));
        println!("round {round}: every node serves every slot {healed:?} after the heal");
        // The issue's goal is 1 s; allow for a loaded 2-core machine.
        assert!(
            healed < Duration::from_secs(5),
            "round {round}: recovery took {healed:?} after the heal"
        );
    }
}

/// CRC16/XMODEM, as Redis Cluster hashes keys (no hash tags used here).
fn key_slot(key: &[u8]) -> u16 {
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
fn master_of(net: &Net, via: u8, slot: u16) -> Option<u8> {
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

/// A bridge partition: nodes 1 and 2 cannot reach each other, both reach
/// node 3. Leaders keep their quorum through node 3, so every slot stays
/// served; a node asked for a slot the other one leads must answer MOVED to
/// that leader (clients can reach it), not CLUSTERDOWN.
#[test]
fn bridge_partition_answers_moved_to_the_real_leader() {
    let mut net = Net::new();
    net.start();
    let all: Vec<String> = (1..=NODES).map(|i| net.addr(i)).collect();
    wait(Duration::from_secs(30), || all.iter().all(|a| state_ok(a))).expect("cluster ready");

    // A key whose slot node 2 masters, and one node 1 masters.
    let key_of = |owner: u8| {
        (0..10_000)
            .map(|i| format!("k{i}"))
            .find(|k| master_of(&net, 3, key_slot(k.as_bytes())) == Some(owner))
            .expect("a key for every node")
    };
    let (k2, k1) = (key_of(2), key_of(1));
    assert_eq!(
        call(&net.addr(2), &["SET", &k2, "before"]).as_deref(),
        Some("+OK\r\n")
    );

    net.cut_between(1, 2);
    let t = Instant::now();
    // Past the point where node 1's Raft has lost node 2 as leader.
    std::thread::sleep(Duration::from_secs(3));
    for (via, key, owner) in [(1u8, &k2, 2u8), (2, &k1, 1)] {
        let want = format!(
            "-MOVED {} {}:{PORT}",
            key_slot(key.as_bytes()),
            net.addr(owner)
        );
        let got = wait(Duration::from_secs(5), || {
            call(&net.addr(via), &["GET", key]).is_some_and(|r| r.starts_with(&want))
        });
        assert!(
            got.is_some(),
            "node {via} answered {:?} for {key} (led by node {owner}) during the bridge partition, not {want:?}",
            call(&net.addr(via), &["GET", key])
        );
    }
    // Node 1 alone has lost node 2 (node 3 still reaches it): PFAIL only.
    assert!(
        wait(Duration::from_secs(5), || node_line(&net, 1, 2)
            .contains(" master,fail? - "))
        .is_some(),
        "node 1's view of node 2: {:?}",
        node_line(&net, 1, 2)
    );
    assert!(
        !node_line(&net, 3, 2).contains("fail"),
        "{:?}",
        node_line(&net, 3, 2)
    );
    // The leaders themselves keep serving writes through node 3.
    assert_eq!(
        call(&net.addr(2), &["SET", &k2, "during"]).as_deref(),
        Some("+OK\r\n")
    );
    println!(
        "bridge partition: MOVED to the real leaders {:?} after the cut",
        t.elapsed()
    );

    net.heal_between(1, 2);
    let healed = wait(Duration::from_secs(20), || {
        all.iter().all(|a| state_ok(a))
            && !node_line(&net, 1, 2).contains("fail")
            && !node_line(&net, 2, 1).contains("fail")
    })
    .expect("recovered after the bridge partition");
    println!("bridge partition healed; every node ok after {healed:?}");
    assert_eq!(
        call(&net.addr(2), &["GET", &k2]).as_deref(),
        Some("during\r\n")
    );
}
