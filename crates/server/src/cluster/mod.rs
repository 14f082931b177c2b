//! Cluster mode: this node's share of the multi-raft cluster. Keyed
//! commands are routed by slot to their shard; the shard's leader proposes
//! writes through Raft and serves reads by ReadIndex (or lease); any other
//! node answers `-MOVED` to the leader, as Redis Cluster does. Group 0
//! holds the cluster map (nodes and their client addresses, shards, slot
//! ranges, replica sets).

pub mod batch;
pub mod blocked;
pub mod commands;
pub mod direct;
pub mod lanes;
pub mod sm;

use crate::config::Config;
use bytes::{BufMut, Bytes, BytesMut};
use kvasir_cluster::{ClusterMap, NodeInfo, View};
use kvasir_core::Store;
use kvasir_raft::transport::{Inbox, Inboxes, Transport};
use kvasir_raft::{Fatal, GroupSpec, GroupStatus, MultiRaft, RaftError, ReadMode, WalMode};
use kvasir_resp::Reply;
use lanes::{Lane, LaneSetup, LaneShard};
use sm::{Cmd, HookSink, LaneWrite, MetaSm, NodeSm, Out, ShardCounts, ShardSm, WriteHooks};
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::rc::{Rc, Weak};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tracing::info;

/// The metadata group.
pub const META_GROUP: u64 = 0;

pub struct ClusterNode {
    pub node_id: u64,
    pub cluster_id: u64,
    /// The main thread's loop (lane 0): group 0 and the shards not on a
    /// shard thread.
    pub raft: Rc<MultiRaft<NodeSm>>,
    /// Shard threads (lanes 1..N-1, `--threads N`), see [`lanes`].
    lanes: Vec<Lane>,
    /// The lane of every shard this node holds a replica of.
    lane_of: HashMap<u64, usize>,
    /// With shard threads: the routes the I/O threads take themselves.
    direct: Option<Arc<direct::DirectRoutes>>,
    /// Writes applied on shard threads, for the hooks (main thread).
    lane_writes: RefCell<mpsc::UnboundedReceiver<LaneWrite>>,
    lane_fatal: RefCell<mpsc::UnboundedReceiver<Fatal>>,
    /// Key counts of each shard replica after its last apply.
    counts: HashMap<u64, Arc<ShardCounts>>,
    /// The log writer the loops share when there are shard threads.
    writer: Option<Arc<kvasir_raft::LogWriter>>,
    /// The bootstrap layout: slot ranges and replica sets never change
    /// after bootstrap (no resharding yet), so routing reads it directly.
    layout: ClusterMap,
    pub host: String,
    pub port: u16,
    pub cluster_addr: String,
    /// How long a request for a shard without a leader waits for one
    /// (about three election timeouts) before it answers CLUSTERDOWN.
    pub leader_wait: Duration,
    /// Leaders other nodes report (see [`leader_hints_loop`]), by shard.
    hints: RefCell<HashMap<u64, LeaderHint>>,
    /// The nodes each peer reports unreachable, and when it last said so.
    down_reports: RefCell<HashMap<u64, (Vec<u64>, std::time::Instant)>>,
    /// The apply hooks of this node's shards (keyspace notifications read
    /// their setting from it).
    pub hooks: Rc<WriteHooks>,
}

/// A peer's word that `leader` leads a shard in `term`: the peer knows it
/// from Raft and has a live link to it.
#[derive(Clone, Copy, Debug)]
struct LeaderHint {
    leader: u64,
    term: u64,
    at: std::time::Instant,
}

/// How often each node tells its peers which leaders it knows, and how long
/// such a hint is trusted without being repeated.
const HINT_EVERY: Duration = Duration::from_millis(200);
const HINT_FRESH: Duration = Duration::from_millis(1000);

/// What the session should do with a keyed command.
pub enum Route {
    /// This node leads the slot's shard.
    Leader(u64),
    /// A READONLY connection reading from a replica.
    LocalReplica(u64),
    Redirect(Reply),
    /// The shard has no leader this node knows of (an election), or the
    /// leader's client address is not known yet: hold the request.
    NoLeader(u64),
}

/// Renders a Raft failure for the client.
pub fn raft_error_reply(node: &ClusterNode, e: RaftError, slot: Option<u16>) -> Reply {
    match e {
        RaftError::NotLeader(Some(leader)) => match slot {
            Some(slot) => node.moved(slot, leader),
            None => kvasir_cluster::route::try_again(),
        },
        e => raft_error_text(e),
    }
}

/// The reply for a Raft error other than a known leader elsewhere.
pub fn raft_error_text(e: RaftError) -> Reply {
    match e {
        RaftError::NotLeader(_) => Reply::error(
            "CLUSTERDOWN The cluster is down: the slot's shard has no leader right now",
        ),
        RaftError::Dropped => Reply::error(
            "ERR write outcome unknown: leadership changed before the entry committed (it may or may not have been applied)",
        ),
        RaftError::Timeout => {
            Reply::error("TRYAGAIN no quorum answered in time; the read was not served")
        }
        RaftError::Storage(e) => Reply::error(format!("ERR {e}")),
        RaftError::Transferring => {
            Reply::error("TRYAGAIN the slot's leadership is moving to another node; retry")
        }
        RaftError::TooLarge { bytes, limit } => Reply::error(format!(
            "ERR command of {bytes} bytes exceeds the largest replicated entry ({limit} bytes)"
        )),
    }
}

/// The cluster secret from `--cluster-secret` or the first line of
/// `--cluster-secret-file` (not both); empty when neither is set.
fn cluster_secret(config: &Config) -> Result<Vec<u8>, String> {
    match (&config.cluster_secret, &config.cluster_secret_file) {
        (Some(_), Some(_)) => Err(
            "give the cluster secret with --cluster-secret or --cluster-secret-file, not both"
                .into(),
        ),
        (Some(s), None) if s.is_empty() => Err("--cluster-secret is empty".into()),
        (Some(s), None) => Ok(s.as_bytes().to_vec()),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cluster secret file {path}: {e}"))?;
            let line = text.lines().next().unwrap_or("").trim();
            if line.is_empty() {
                return Err(format!("cluster secret file {path} is empty"));
            }
            Ok(line.as_bytes().to_vec())
        }
        (None, None) => Ok(Vec::new()),
    }
}

pub(crate) fn parse_wal(s: &str) -> Result<WalMode, String> {
    match s.to_ascii_lowercase().as_str() {
        "fsync" => Ok(WalMode::Fsync),
        "async" => Ok(WalMode::Async),
        "none" => Ok(WalMode::None),
        other => Err(format!("wal must be fsync, async or none, not '{other}'")),
    }
}

fn parse_read_mode(s: &str) -> Result<ReadMode, String> {
    match s.to_ascii_lowercase().as_str() {
        "readindex" | "read-index" => Ok(ReadMode::ReadIndex),
        "lease" => Ok(ReadMode::Lease),
        other => Err(format!(
            "read-mode must be readindex or lease, not '{other}'"
        )),
    }
}

/// Handles frames other nodes broadcast: PUBLISH reaches local subscribers.
pub type ServerCell = Rc<RefCell<Weak<crate::Server>>>;

/// A message broadcast to every node: PUBLISH (every subscriber of the
/// cluster hears it) or SPUBLISH (READONLY shard-channel subscribers on
/// the shard's followers hear it).
const BROADCAST_PUBLISH: u8 = 0;
const BROADCAST_SPUBLISH: u8 = 1;
/// The leaders a node knows and can reach: (shard, leader, term) triples.
const BROADCAST_LEADERS: u8 = 2;
/// The nodes a node has lost its link to.
const BROADCAST_DOWN: u8 = 3;
/// The sender is stopping gracefully and hands its leaderships away:
/// give it none meanwhile. Older nodes ignore the tag.
const BROADCAST_LEAVING: u8 = 4;
/// How long a LEAVING word holds; a stopping node repeats it every second.
const LEAVING_HOLDS_MS: u64 = 3000;

fn encode_down(down: &[u64]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + 8 * down.len());
    b.put_u8(BROADCAST_DOWN);
    b.put_u32_le(down.len() as u32);
    for &n in down {
        b.put_u64_le(n);
    }
    b.freeze()
}

fn decode_down(b: &[u8]) -> Option<Vec<u64>> {
    let rest = b.strip_prefix(&[BROADCAST_DOWN])?;
    let n = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let body = rest.get(4..)?;
    if body.len() != n.checked_mul(8)? {
        return None;
    }
    Some(
        body.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
    )
}

fn encode_leaders(known: &[(u64, u64, u64)]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + 24 * known.len());
    b.put_u8(BROADCAST_LEADERS);
    b.put_u32_le(known.len() as u32);
    for &(shard, leader, term) in known {
        b.put_u64_le(shard);
        b.put_u64_le(leader);
        b.put_u64_le(term);
    }
    b.freeze()
}

/// The triples of a leaders frame, `None` if it is damaged.
fn decode_leaders(b: &[u8]) -> Option<Vec<(u64, u64, u64)>> {
    let rest = b.strip_prefix(&[BROADCAST_LEADERS])?;
    let n = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let body = rest.get(4..)?;
    if body.len() != n.checked_mul(24)? {
        return None;
    }
    let u = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
    Some(
        body.chunks_exact(24)
            .map(|c| (u(&c[..8]), u(&c[8..16]), u(&c[16..])))
            .collect(),
    )
}

pub fn encode_publish(shard: bool, channel: &[u8], message: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(9 + channel.len() + message.len());
    b.put_u8(if shard {
        BROADCAST_SPUBLISH
    } else {
        BROADCAST_PUBLISH
    });
    b.put_u32_le(channel.len() as u32);
    b.put_slice(channel);
    b.put_slice(message);
    b.freeze()
}

/// (shard channel?, channel, message), `None` for a damaged frame.
fn decode_publish(mut b: Bytes) -> Option<(bool, Bytes, Bytes)> {
    if b.len() < 5 {
        return None;
    }
    let shard = match b[0] {
        BROADCAST_PUBLISH => false,
        BROADCAST_SPUBLISH => true,
        _ => return None,
    };
    let n = u32::from_le_bytes([b[1], b[2], b[3], b[4]]) as usize;
    let _ = b.split_to(5);
    if b.len() < n {
        return None;
    }
    let channel = b.split_to(n);
    Some((shard, channel, b))
}

impl ClusterNode {
    /// The routes I/O threads take themselves (with shard threads).
    pub fn direct(&self) -> Option<&Arc<direct::DirectRoutes>> {
        self.direct.as_ref()
    }

    /// The node's shard threads (lanes 1.., beside the main thread's).
    pub fn lane_count(&self) -> usize {
        self.lanes.len()
    }

    /// Joins (or bootstraps) the cluster described by the config.
    pub async fn start(
        config: &Config,
        client_port: u16,
        server: ServerCell,
        watches: Rc<RefCell<crate::watch::Watches>>,
        blocking: crate::blocking::SharedBlocking,
        tracking: crate::tracking::SharedTracking,
    ) -> Result<Rc<ClusterNode>, String> {
        let initial = config
            .initial_cluster
            .clone()
            .ok_or("cluster mode needs --initial-cluster")?;
        let members = kvasir_cluster::parse_members(&initial)?;
        let node_id = config
            .node_id
            .ok_or("cluster mode needs --node-id (this node's id in --initial-cluster)")?;
        let Some(me) = members.iter().find(|m| m.id == node_id) else {
            return Err(format!(
                "--node-id {node_id} is not one of the members of --initial-cluster ({initial})"
            ));
        };
        let cluster_addr = me.bus_addr.clone();
        let cluster_id =
            kvasir_cluster::cluster_id_from(&initial, config.shards_per_node, config.replicas);
        // Client addresses written in the list are known to every node from
        // the start; the others are announced through group 0 once it runs.
        let nodes: Vec<NodeInfo> = members
            .iter()
            .map(|m| {
                let (client_host, client_port) = m.client.clone().unwrap_or_default();
                NodeInfo {
                    id: m.id,
                    client_host,
                    client_port,
                    cluster_addr: m.bus_addr.clone(),
                }
            })
            .collect();
        let layout =
            ClusterMap::bootstrap(cluster_id, nodes, config.shards_per_node, config.replicas)?;
        let host = match &me.client {
            Some((host, _)) => host.clone(),
            None => config
                .bind
                .split_whitespace()
                .next()
                .unwrap_or("127.0.0.1")
                .to_string(),
        };
        let hooks = Rc::new(WriteHooks::new(watches, blocking.clone(), tracking));
        hooks.notify.store(config.notify_keyspace_events, Relaxed);
        let publish_cell = server.clone();
        let mut specs = vec![GroupSpec {
            id: META_GROUP,
            voters: members.iter().map(|m| m.id).collect(),
            preferred_leader: members.iter().map(|m| m.id).min().unwrap_or(node_id),
            sm: NodeSm::Meta(MetaSm {
                map: layout.clone(),
            }),
        }];
        // The node's shards, round-robin over the lanes (lane 0: this
        // thread).
        let lane_count = config.threads.max(1);
        let mut lane_shards: Vec<Vec<LaneShard>> = (1..lane_count).map(|_| Vec::new()).collect();
        let mut lane_of = HashMap::new();
        let mut counts = HashMap::new();
        for (i, shard) in layout.shards_with_replica(node_id).enumerate() {
            let lane = i % lane_count;
            let count = Arc::new(ShardCounts::default());
            lane_of.insert(shard.id, lane);
            counts.insert(shard.id, count.clone());
            let preferred_leader = shard.preferred_leader().unwrap_or(node_id);
            if lane == 0 {
                let hooks = HookSink::Local(hooks.clone());
                specs.push(GroupSpec {
                    id: shard.id,
                    voters: shard.replicas.clone(),
                    preferred_leader,
                    sm: NodeSm::Shard(ShardSm::new(shard.id, hooks, count)),
                });
            } else {
                lane_shards[lane - 1].push(LaneShard {
                    id: shard.id,
                    voters: shard.replicas.clone(),
                    preferred_leader,
                    counts: count,
                });
            }
        }
        let listener = TcpListener::bind(&cluster_addr)
            .await
            .map_err(|e| format!("cluster port {cluster_addr}: {e}"))?;
        let raft_cfg = kvasir_raft::Config {
            node_id,
            cluster_id,
            peers: members.iter().map(|m| (m.id, m.bus_addr.clone())).collect(),
            dir: std::path::PathBuf::from(&config.dir),
            wal: parse_wal(&config.wal)?,
            read_mode: parse_read_mode(&config.read_mode)?,
            tick: Duration::from_millis(config.raft_tick_ms.max(1)),
            election_ticks: config.election_ticks.max(3),
            heartbeat_ticks: config.heartbeat_ticks.max(1),
            snapshot_entries: config.snapshot_entries.max(1),
            max_entry_bytes: 1024 * 1024,
            secret: cluster_secret(config)?,
        };
        let on_broadcast: kvasir_raft::transport::BroadcastHandler =
            Rc::new(move |from: u64, payload: Bytes| {
                let Some(server) = server.borrow().upgrade() else {
                    return;
                };
                if payload.first() == Some(&BROADCAST_DOWN) {
                    if let (Some(node), Some(down)) =
                        (server.cluster.as_ref(), decode_down(&payload))
                    {
                        node.down_reports
                            .borrow_mut()
                            .insert(from, (down, std::time::Instant::now()));
                    }
                    return;
                }
                if payload.as_ref() == [BROADCAST_LEAVING] {
                    if let Some(node) = server.cluster.as_ref() {
                        node.raft.transport().mark_leaving(from, LEAVING_HOLDS_MS);
                    }
                    return;
                }
                if payload.first() == Some(&BROADCAST_LEADERS) {
                    if let (Some(node), Some(known)) =
                        (server.cluster.as_ref(), decode_leaders(&payload))
                    {
                        node.record_hints(&known);
                    }
                    return;
                }
                if let Some((shard, channel, message)) = decode_publish(payload) {
                    let pubsub = server.pubsub.borrow();
                    if shard {
                        pubsub.spublish(&channel, &message);
                    } else {
                        pubsub.publish(&channel, &message);
                    }
                }
            });
        let engine = kvasir_raft::open_log(&raft_cfg).await?;
        let main_inbox = Arc::new(Inbox::default());
        let lane_inboxes: Vec<Arc<Inbox>> = lane_shards
            .iter()
            .map(|_| Arc::new(Inbox::default()))
            .collect();
        let by_group = lane_shards
            .iter()
            .zip(&lane_inboxes)
            .flat_map(|(shards, inbox)| shards.iter().map(|s| (s.id, inbox.clone())))
            .collect();
        let inboxes = Arc::new(Inboxes::new(main_inbox.clone(), by_group));
        let secret: Arc<[u8]> = Arc::from(raft_cfg.secret.as_slice());
        // With shard threads the bus gets a thread of its own too, so the
        // main thread is not the one relaying every lane's Raft messages.
        let transport = if lane_shards.is_empty() {
            Transport::start(
                node_id,
                cluster_id,
                secret,
                listener,
                &raft_cfg.peers,
                lane_count,
                inboxes,
                on_broadcast,
            )
        } else {
            Transport::start_on_thread(
                node_id,
                cluster_id,
                secret,
                listener,
                raft_cfg.peers.clone(),
                lane_count,
                inboxes,
                on_broadcast,
            )
            .await?
        };
        // Several loops share one log writer, so one fsync still covers
        // every shard's writes (group commit across the threads).
        let writer = if lane_shards.is_empty() {
            None
        } else {
            Some(kvasir_raft::LogWriter::start(engine.clone())?)
        };
        let (writes_tx, lane_writes) = mpsc::unbounded_channel();
        let (fatal_tx, lane_fatal) = mpsc::unbounded_channel();
        let mut lanes = Vec::new();
        for (i, (shards, inbox)) in lane_shards.into_iter().zip(lane_inboxes).enumerate() {
            lanes.push(
                lanes::spawn(LaneSetup {
                    lane: i + 1,
                    cfg: raft_cfg.clone(),
                    engine: engine.clone(),
                    transport: transport.clone(),
                    inbox,
                    shards,
                    writes: writes_tx.clone(),
                    notify: hooks.notify.clone(),
                    keys_wanted: hooks.keys_wanted.clone(),
                    fatal: fatal_tx.clone(),
                    writer: writer.clone().ok_or("no log writer")?,
                })
                .await?,
            );
        }
        if !lanes.is_empty() {
            info!("Spreading the node's shards over {lane_count} threads.");
        }
        let raft = MultiRaft::start_lane(
            raft_cfg,
            engine,
            transport,
            main_inbox,
            specs,
            0,
            writer.clone(),
        )?;
        // With shard threads the I/O threads route the plain requests
        // themselves; lane 0's jobs run on this thread's loop.
        let (direct, main_jobs) = if lanes.is_empty() {
            (None, None)
        } else {
            let (jobs, rx) = mpsc::unbounded_channel();
            let mut loops = vec![direct::LoopHandle {
                jobs,
                roles: raft.roles().clone(),
            }];
            loops.extend(lanes.iter().map(|l| l.handle()));
            let slot_shard = (0..kvasir_cluster::SLOTS)
                .map(|slot| layout.shard_of_slot(slot).id)
                .collect();
            let routes = direct::DirectRoutes::new(slot_shard, lane_of.clone(), loops);
            (Some(Arc::new(routes)), Some(rx))
        };
        let node = Rc::new(ClusterNode {
            node_id,
            cluster_id,
            raft,
            lanes,
            lane_of,
            direct,
            lane_writes: RefCell::new(lane_writes),
            lane_fatal: RefCell::new(lane_fatal),
            counts,
            writer,
            layout,
            host,
            port: client_port,
            cluster_addr,
            leader_wait: Duration::from_millis(
                config.raft_tick_ms.max(1) * config.election_ticks.max(3) as u64 * 3,
            ),
            hints: RefCell::new(HashMap::new()),
            down_reports: RefCell::new(HashMap::new()),
            hooks: hooks.clone(),
        });
        tokio::task::spawn_local(leader_hints_loop(node.clone()));
        tokio::task::spawn_local(publish_loop(node.clone(), publish_cell));
        tokio::task::spawn_local(blocked::serve_loop(node.clone(), hooks, blocking));
        tokio::task::spawn_local(announce_loop(node.clone()));
        if !node.lanes.is_empty() {
            tokio::task::spawn_local(lane_writes_loop(node.clone()));
        }
        if let Some(mut jobs) = main_jobs {
            let weak = Rc::downgrade(&node);
            tokio::task::spawn_local(async move {
                while let Some(job) = jobs.recv().await {
                    let Some(node) = weak.upgrade() else {
                        return;
                    };
                    job(&node.raft);
                }
            });
        }
        info!(
            node_id,
            cluster_id = format!("{cluster_id:016x}"),
            shards = node.layout.shards.len(),
            "cluster node started"
        );
        Ok(node)
    }

    /// Runs `f` on the current cluster map (group 0's state).
    pub fn with_map<R>(&self, f: impl FnOnce(&ClusterMap) -> R) -> R {
        self.raft.with_sm(META_GROUP, |sm| match sm {
            Some(NodeSm::Meta(m)) => f(&m.map),
            _ => f(&self.layout),
        })
    }

    /// Runs `f` with the node's view of the cluster (CLUSTER commands).
    pub fn with_view<R>(&self, f: impl FnOnce(&View) -> R) -> R {
        let leader_of = |shard: u64| self.reachable_leader(shard);
        let node_up = |n: u64| self.raft.transport().is_connected(n);
        let fail_agreed = |n: u64| self.fail_agreed(n);
        let failure_reports = |n: u64| self.failure_reports(n);
        let links = |n: u64| {
            let t = self.raft.transport();
            kvasir_cluster::reply::Links {
                to_since: t.connected_since(n),
                from_since: t.accepted_since(n),
                queued: t.queued_bytes(n),
            }
        };
        self.with_map(|map| {
            f(&View {
                map,
                myself: self.node_id,
                leader_of: &leader_of,
                node_up: &node_up,
                fail_agreed: &fail_agreed,
                failure_reports: &failure_reports,
                links: &links,
            })
        })
    }

    /// Whether a majority of the cluster's nodes (this one included) has
    /// lost its link to `node`, by fresh reports (Redis's FAIL).
    pub fn fail_agreed(&self, node: u64) -> bool {
        let total = self.layout.nodes.len();
        let mine = usize::from(!self.raft.transport().is_connected(node));
        (mine + self.failure_reports(node)) * 2 > total
    }

    /// How many other nodes report `node` unreachable, by fresh reports
    /// (CLUSTER COUNT-FAILURE-REPORTS).
    pub fn failure_reports(&self, node: u64) -> usize {
        self.down_reports
            .borrow()
            .iter()
            .filter(|(from, (down, at))| {
                **from != node && at.elapsed() <= HINT_FRESH && down.contains(&node)
            })
            .count()
    }

    pub fn layout(&self) -> &ClusterMap {
        &self.layout
    }

    pub fn leader_of(&self, shard: u64) -> Option<u64> {
        match self.lane(shard) {
            Some(lane) => lane.roles.leader_of(shard),
            None => self.raft.leader_of(shard),
        }
    }

    /// The shard thread that runs `shard`, if not this one.
    fn lane(&self, shard: u64) -> Option<&Lane> {
        if self.lanes.is_empty() {
            return None;
        }
        match self.lane_of.get(&shard) {
            Some(&l) if l > 0 => self.lanes.get(l - 1),
            _ => None,
        }
    }

    /// The shard thread of `shard`, about to be handed a job: the flag
    /// that tells shard threads whether written keys are wanted is set
    /// first, so it is in force for every write applied after the job.
    fn lane_for_job(&self, shard: u64) -> Option<&Lane> {
        let lane = self.lane(shard)?;
        self.hooks.refresh_keys_wanted();
        Some(lane)
    }

    pub fn is_leader(&self, shard: u64) -> bool {
        match self.lane(shard) {
            Some(lane) => lane.roles.is_leader(shard),
            None => self.raft.is_leader(shard),
        }
    }

    fn leader_and_term(&self, shard: u64) -> Option<(Option<u64>, u64)> {
        match self.lane(shard) {
            Some(lane) => lane.roles.leader_and_term(shard),
            None => self.raft.leader_and_term(shard),
        }
    }

    /// (group, leader, term) of every group whose leader this node knows.
    fn known_leaders(&self) -> Vec<(u64, u64, u64)> {
        let mut known = self.raft.known_leaders();
        for lane in &self.lanes {
            known.extend(lane.roles.known_leaders());
        }
        known
    }

    /// Every group of the node (shard threads' as last published), by id.
    pub fn status(&self) -> Vec<GroupStatus> {
        let mut groups = self.raft.status();
        for lane in &self.lanes {
            groups.extend(lane.status());
        }
        groups.sort_by_key(|g| g.id);
        groups
    }

    /// (fsyncs, log writes) of all the node's loops.
    pub fn log_counters(&self) -> (u64, u64) {
        let main = self.raft.counters();
        let mut totals = (main.fsyncs.load(Relaxed), main.log_writes.load(Relaxed));
        let counters = self
            .lanes
            .iter()
            .map(|l| &l.counters)
            .chain(self.writer.as_ref().map(|w| &w.counters));
        for c in counters {
            totals.0 += c.fsyncs.load(Relaxed);
            totals.1 += c.log_writes.load(Relaxed);
        }
        totals
    }

    /// Keys expired and keys evicted by this node's replica of `shard`
    /// since it was made here (its applies, as leader or follower).
    pub fn removal_counts(&self, shard: u64) -> Option<(u64, u64)> {
        let c = self.counts.get(&shard)?;
        Some((c.expired.load(Relaxed), c.evicted.load(Relaxed)))
    }

    /// Keyspace hits and misses of this node's replica of `shard` after its
    /// last apply or read.
    pub fn lookup_counts(&self, shard: u64) -> Option<(u64, u64)> {
        let c = self.counts.get(&shard)?;
        Some((c.hits.load(Relaxed), c.misses.load(Relaxed)))
    }

    /// Keys and keys with a TTL of this node's replica of `shard` after its
    /// last apply.
    pub fn key_counts(&self, shard: u64) -> Option<(usize, usize)> {
        let c = self.counts.get(&shard)?;
        Some((c.keys.load(Relaxed), c.expires.load(Relaxed)))
    }

    /// Hands the writes applied on shard threads so far to the hooks
    /// (watchers, tracking, blocked clients, keyspace events). Called
    /// before a reply from a shard thread is used: the write it answers
    /// was queued before the reply was sent.
    pub fn settle(&self) {
        if self.lanes.is_empty() {
            return;
        }
        loop {
            let next = self.lane_writes.borrow_mut().try_recv();
            let Ok(w) = next else {
                return;
            };
            self.hooks
                .after_write(w.shard, w.db, w.written.as_written());
        }
    }

    /// A graceful stop's first step: every shard this node leads is
    /// handed to a peer ([`MultiRaft::leave`]), so its clients are
    /// redirected at once instead of waiting an election timeout after the
    /// node exits. Resolves with whether the node leads nothing and every
    /// client waiting on an entry it proposed was answered, within `limit`.
    pub async fn hand_over_leadership(&self, limit: Duration) -> bool {
        // The peers hear it before the transfers (the same links, in
        // order), so none of them moves a leadership back here.
        let leaving = Bytes::from_static(&[BROADCAST_LEAVING]);
        self.raft.broadcast(leaving.clone());
        let mut said = std::time::Instant::now();
        self.raft.leave();
        for lane in &self.lanes {
            lane.run(Box::new(|raft| raft.leave()));
        }
        let deadline = std::time::Instant::now() + limit;
        loop {
            if self.handed_over().await {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            if said.elapsed() >= Duration::from_secs(1) {
                self.raft.broadcast(leaving.clone());
                said = std::time::Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether every loop of the node has handed over (a stopped shard
    /// thread leads nothing).
    async fn handed_over(&self) -> bool {
        if !self.raft.handed_over() {
            return false;
        }
        for lane in &self.lanes {
            let (tx, rx) = oneshot::channel();
            lane.run(Box::new(move |raft| {
                let _ = tx.send(raft.handed_over());
            }));
            if !rx.await.unwrap_or(true) {
                return false;
            }
        }
        true
    }

    /// Resolves when any of the node's loops stopped for good.
    pub async fn fatal(&self) -> Fatal {
        let from_lanes = async {
            loop {
                let next = std::future::poll_fn(|cx| self.lane_fatal.borrow_mut().poll_recv(cx));
                match next.await {
                    Some(f) => return f,
                    // No shard threads (or all gone without a word).
                    None => std::future::pending::<()>().await,
                }
            }
        };
        tokio::select! {
            f = self.raft.fatal() => f,
            f = from_lanes => f,
        }
    }

    /// Stores the leaders a peer reports; a hint never replaces one of a
    /// later term.
    fn record_hints(&self, known: &[(u64, u64, u64)]) {
        let now = std::time::Instant::now();
        let mut hints = self.hints.borrow_mut();
        for &(shard, leader, term) in known {
            let replace = hints
                .get(&shard)
                .is_none_or(|h| term >= h.term || now.duration_since(h.at) > HINT_FRESH);
            if replace {
                hints.insert(
                    shard,
                    LeaderHint {
                        leader,
                        term,
                        at: now,
                    },
                );
            }
        }
    }

    /// The node clients should be sent to for a shard: the leader this
    /// node's Raft knows while this node can reach it; otherwise a leader a
    /// peer that can reach it reports, for the same or a later term (a
    /// bridge partition: this node is cut off from the leader, its clients
    /// are not); `None` while no reachable leader is known.
    pub fn reachable_leader(&self, shard: u64) -> Option<u64> {
        let (own, term) = self.leader_and_term(shard)?;
        if let Some(l) = own {
            if l == self.node_id || self.raft.transport().is_connected(l) {
                return Some(l);
            }
        }
        let hint = *self.hints.borrow().get(&shard)?;
        (hint.at.elapsed() <= HINT_FRESH && hint.term >= term).then_some(hint.leader)
    }

    pub fn shard_of_slot(&self, slot: u16) -> u64 {
        self.layout.shard_of_slot(slot).id
    }

    /// `-MOVED slot host:port` towards `node`, or TRYAGAIN while its client
    /// address is not known yet.
    pub fn moved(&self, slot: u16, node: u64) -> Reply {
        self.moved_if_addressed(slot, node)
            .unwrap_or_else(kvasir_cluster::route::try_again)
    }

    /// `-MOVED slot host:port` towards `node` (never this node), if its
    /// client address is known.
    fn moved_if_addressed(&self, slot: u16, node: u64) -> Option<Reply> {
        if node == self.node_id {
            return None;
        }
        self.with_map(|m| {
            m.node(node)
                .filter(|n| n.client_port != 0)
                .map(|n| kvasir_cluster::route::moved_to(slot, n))
        })
    }

    /// Where a keyed command for `slot` goes.
    pub fn route(&self, slot: u16, write: bool, readonly_conn: bool) -> Route {
        let shard = self.shard_of_slot(slot);
        if self.is_leader(shard) {
            return Route::Leader(shard);
        }
        let replica = self
            .layout
            .shard(shard)
            .is_some_and(|s| s.replicas.contains(&self.node_id));
        if !write && readonly_conn && replica {
            return Route::LocalReplica(shard);
        }
        // A leader nobody reachable vouches for (killed, cut off) is most
        // likely being replaced: hold the request for the election rather
        // than send the client to a dead address.
        match self
            .reachable_leader(shard)
            .and_then(|l| self.moved_if_addressed(slot, l))
        {
            Some(moved) => Route::Redirect(moved),
            None => Route::NoLeader(shard),
        }
    }

    /// The reply for a shard that stayed without a leader for
    /// `leader_wait`.
    pub fn no_leader_reply() -> Reply {
        Reply::error("CLUSTERDOWN The cluster is down: the slot's shard has no leader right now")
    }

    /// Waits (up to `leader_wait`) until the shard of `slot` has a leader
    /// with a known address that this node can reach, then routes again:
    /// the route, or `None` if the wait ran out with no leader known.
    /// Elections (at start, after a failure) are thus hidden from clients
    /// instead of answered with CLUSTERDOWN.
    pub async fn route_when_led(
        &self,
        slot: u16,
        write: bool,
        readonly_conn: bool,
    ) -> Option<Route> {
        let deadline = tokio::time::Instant::now() + self.leader_wait;
        loop {
            match self.route(slot, write, readonly_conn) {
                Route::NoLeader(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
                Route::NoLeader(shard) => {
                    // Still the old leader after the wait: it may well be
                    // alive behind a broken link; let the client try it.
                    return self
                        .leader_of(shard)
                        .and_then(|l| self.moved_if_addressed(slot, l))
                        .map(Route::Redirect);
                }
                route => return Some(route),
            }
        }
    }

    /// Shards this node currently leads.
    pub fn led_shards(&self) -> Vec<u64> {
        self.layout
            .shards
            .iter()
            .map(|s| s.id)
            .filter(|&id| self.is_leader(id))
            .collect()
    }

    /// Runs `f` with the loop that owns `shard`, on that loop's thread (at
    /// once when it is this one); `None` if the loop has stopped.
    pub fn on_loop<R: Send + 'static>(
        &self,
        shard: u64,
        f: impl FnOnce(&MultiRaft<NodeSm>) -> R + Send + 'static,
    ) -> impl Future<Output = Option<R>> + 'static {
        let ran = match self.lane_for_job(shard) {
            Some(lane) => {
                let (tx, rx) = oneshot::channel();
                lane.run(Box::new(move |raft| {
                    let _ = tx.send(f(raft));
                }));
                Err(rx)
            }
            None => Ok(f(&self.raft)),
        };
        async move {
            match ran {
                Ok(r) => Some(r),
                Err(rx) => rx.await.ok(),
            }
        }
    }

    /// Runs `f` on this node's replica of a shard (a possibly stale read),
    /// on the shard's thread; `None` if the node holds no replica.
    pub fn on_store<R: Send + 'static>(
        &self,
        shard: u64,
        f: impl FnOnce(&Store) -> R + Send + 'static,
    ) -> impl Future<Output = Option<R>> + 'static {
        let ran = self.on_loop(shard, move |raft| {
            raft.with_sm(shard, |sm| match sm {
                Some(NodeSm::Shard(s)) => Some(f(&s.store)),
                _ => None,
            })
        });
        async move { ran.await.flatten() }
    }

    pub fn propose(&self, shard: u64, cmd: &Cmd) -> oneshot::Receiver<Result<Out, RaftError>> {
        let Some(lane) = self.lane_for_job(shard) else {
            return self.raft.propose(shard, cmd);
        };
        // Encoded here, so the shard thread only orders and applies.
        let mut bytes = Vec::new();
        sm::encode(cmd, &mut bytes);
        let (tx, rx) = oneshot::channel();
        lane.run(Box::new(move |raft| raft.propose_encoded(shard, bytes, tx)));
        rx
    }

    pub fn read(&self, shard: u64, cmd: Cmd) -> oneshot::Receiver<Result<Out, RaftError>> {
        let Some(lane) = self.lane_for_job(shard) else {
            return self.raft.read(shard, cmd);
        };
        let (tx, rx) = oneshot::channel();
        lane.run(Box::new(move |raft| raft.read_to(shard, cmd, tx)));
        rx
    }

    pub fn publish(&self, channel: &[u8], message: &[u8]) {
        self.raft.broadcast(encode_publish(false, channel, message));
    }

    pub fn spublish(&self, channel: &[u8], message: &[u8]) {
        self.raft.broadcast(encode_publish(true, channel, message));
    }
}

/// Tells every peer which shard leaders this node knows and can reach, so
/// a node cut off from a leader (while its clients are not) redirects to it
/// instead of answering CLUSTERDOWN, and which nodes it has lost (a node
/// lost by a majority is FAIL rather than PFAIL in CLUSTER NODES).
async fn leader_hints_loop(node: Rc<ClusterNode>) {
    loop {
        tokio::time::sleep(HINT_EVERY).await;
        let transport = node.raft.transport();
        let known: Vec<(u64, u64, u64)> = node
            .known_leaders()
            .into_iter()
            .filter(|&(shard, leader, _)| {
                shard != META_GROUP && (leader == node.node_id || transport.is_connected(leader))
            })
            .collect();
        if !known.is_empty() {
            node.raft.broadcast(encode_leaders(&known));
        }
        let down: Vec<u64> = node
            .layout
            .nodes
            .iter()
            .map(|n| n.id)
            .filter(|&n| n != node.node_id && !transport.is_connected(n))
            .collect();
        node.raft.broadcast(encode_down(&down));
    }
}

/// Makes sure group 0 knows where clients reach this node (for -MOVED).
async fn announce_loop(node: Rc<ClusterNode>) {
    loop {
        let known = node.with_map(|m| {
            m.node(node.node_id)
                .is_some_and(|n| n.client_host == node.host && n.client_port == node.port)
        });
        if !known && node.raft.leader_of(META_GROUP).is_some() {
            node.raft.propose_forwarded(
                META_GROUP,
                &Cmd::SetNodeAddr {
                    node: node.node_id,
                    host: node.host.clone(),
                    port: node.port,
                },
            );
        }
        let pause = if known { 1000 } else { 200 };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Hands writes applied on shard threads to the hooks as they come (a
/// reply from a shard thread drains them first, see
/// [`ClusterNode::settle`]).
async fn lane_writes_loop(node: Rc<ClusterNode>) {
    loop {
        let next = std::future::poll_fn(|cx| node.lane_writes.borrow_mut().poll_recv(cx)).await;
        let Some(w) = next else {
            return;
        };
        node.hooks
            .after_write(w.shard, w.db, w.written.as_written());
        node.settle();
    }
}

/// Publishes the keyspace events applied on this node for the shards it
/// leads when it publishes them, and the messages scripts published there
/// (cluster-wide, once: only the leader sends them); followers' events are
/// dropped. Node-local
/// like Redis Cluster's: a subscriber hears the events of the keys whose
/// shard this node leads, and when leadership moves the events move with it.
async fn publish_loop(node: Rc<ClusterNode>, server: ServerCell) {
    loop {
        node.hooks.events_notify.notified().await;
        let events = node.hooks.take_events();
        let Some(server) = server.borrow().upgrade() else {
            continue;
        };
        let flags = node.hooks.notify.load(Relaxed);
        let pubsub = server.pubsub.borrow();
        let mut led: Option<(u64, bool)> = None;
        for (shard, event) in events {
            let leads = match led {
                Some((s, l)) if s == shard => l,
                _ => {
                    let l = node.is_leader(shard);
                    led = Some((shard, l));
                    l
                }
            };
            if !leads {
                continue;
            }
            match event.class {
                // A script's PUBLISH: cluster-wide, as the command.
                kvasir_core::notify::SCRIPT_PUBLISH => {
                    pubsub.publish(&event.key, &event.message);
                    node.publish(&event.key, &event.message);
                }
                kvasir_core::notify::SCRIPT_SPUBLISH => {
                    pubsub.spublish(&event.key, &event.message);
                    node.spublish(&event.key, &event.message);
                }
                _ => crate::notify::publish(&pubsub, flags, std::slice::from_ref(&event)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_frames_round_trip_and_refuse_damage() {
        let known = vec![(1, 2, 3), (24, 1, u64::MAX)];
        let b = encode_leaders(&known);
        assert_eq!(decode_leaders(&b), Some(known));
        for cut in 0..b.len() {
            assert_eq!(decode_leaders(&b[..cut]), None, "cut at {cut}");
        }
        let mut long = b.to_vec();
        long.push(0);
        assert_eq!(decode_leaders(&long), None);
        // A huge count with no body is refused without allocating.
        let mut huge = vec![BROADCAST_LEADERS];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_leaders(&huge), None);

        let d = encode_down(&[2, 3]);
        assert_eq!(decode_down(&d), Some(vec![2, 3]));
        for cut in 0..d.len() {
            assert_eq!(decode_down(&d[..cut]), None);
        }
        let p = encode_publish(true, b"ch", b"msg");
        assert_eq!(
            decode_publish(p),
            Some((true, Bytes::from("ch"), Bytes::from("msg")))
        );
        assert_eq!(decode_publish(Bytes::from_static(&[9, 0, 0, 0, 0])), None);
    }
}
