//! The node loop: one task drives every Raft group of this node, TiKV
//! style. Each round steps what peers sent, ticks, turns queued client
//! proposals into one entry per group and queued reads into one ReadIndex
//! request per group, and takes every group's Ready: a leader's messages go
//! out at once, committed entries apply to the group's state machine (and
//! waiting clients hear back), entries and hard states join the next log
//! write. All groups' writes share ONE raft-engine batch with one fsync
//! (group commit), run off the loop while the next rounds go on; when it
//! completes, its Readies count as persisted and the messages that needed
//! that (a follower's acknowledgements, votes) are sent. Sessions never
//! touch a RawNode: they only queue work and wake the loop.
//!
//! A node may run several loops, one per shard thread, each over its own
//! groups ([`MultiRaft::start_lane`]): they share the raft-engine log
//! (whose write queue merges concurrent synced writes into one fsync) and
//! the transport (which delivers each group's messages to its loop).

use crate::entry::{self, EntryBuilder, EntryCtx};
use crate::snapfile;
use crate::storage::GroupStorage;
use crate::transport::{self, BroadcastHandler, Inbox, Inboxes, Transport};
use bytes::Bytes;
use raft::eraftpb::{EntryType, SnapshotMetadata};
use raft::{RawNode, ReadOnlyOption, SnapshotStatus, StateRole, Storage};
use raft_engine::{Engine, LogBatch};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tracing::{error, info, warn};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalMode {
    /// Acknowledge only entries a majority has fsynced.
    Fsync,
    /// Write the log without waiting for fsync; synced once a second.
    Async,
    /// Pure cache: the log is written without sync and dropped at start.
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadMode {
    ReadIndex,
    Lease,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub node_id: u64,
    pub cluster_id: u64,
    /// Every member (including this node): id and cluster address.
    pub peers: Vec<(u64, String)>,
    pub dir: PathBuf,
    pub wal: WalMode,
    pub read_mode: ReadMode,
    pub tick: Duration,
    pub election_ticks: usize,
    pub heartbeat_ticks: usize,
    /// Take a snapshot (and compact the log) after this many applied entries.
    pub snapshot_entries: u64,
    /// Largest entry payload built from batched proposals.
    pub max_entry_bytes: usize,
    /// The cluster secret peers prove on every bus connection (empty:
    /// none, and then peers with a secret refuse this node).
    pub secret: Vec<u8>,
}

/// Why a proposal or read got no result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RaftError {
    /// This node does not lead the group; the leader if known.
    NotLeader(Option<u64>),
    /// Leadership changed before the entry committed: it may or may not
    /// have been applied.
    Dropped,
    /// The log could not be written: nothing was acknowledged.
    Storage(String),
    /// The read or proposal waited too long for a quorum.
    Timeout,
    /// Leadership is being handed to another node; nothing was proposed.
    Transferring,
    /// The command is larger than a peer accepts in one Raft message
    /// ([`MAX_PROPOSAL`]); nothing was proposed.
    TooLarge { bytes: usize, limit: usize },
}

/// Largest encoded command proposed: its entry travels alone in a
/// MsgAppend, which peers reassemble up to [`transport::MAX_MESSAGE`]; the
/// margin covers the entry's context and the message around it. A larger
/// one could never replicate and would stall its group's followers.
pub const MAX_PROPOSAL: usize = transport::MAX_MESSAGE - (1 << 20);

/// A group's replicated state machine.
pub trait StateMachine: 'static {
    type Cmd;
    type Out;
    fn encode(cmd: &Self::Cmd, out: &mut Vec<u8>);
    /// Applies one proposal; must be deterministic in (state, ctx, bytes),
    /// which is why it is not told whether this replica leads.
    fn apply(&mut self, ctx: &EntryCtx, proposal: &[u8]) -> Self::Out;
    /// Serves a read at the current applied state.
    fn read(&self, cmd: &Self::Cmd, now_ms: u64) -> Self::Out;
    fn snapshot(&self) -> Vec<u8>;
    fn restore(&mut self, image: &[u8]) -> Result<(), String>;
}

/// Bootstrap description of one group.
/// One raft-engine write being filled by rounds or in flight: the entries
/// and hard states of the Readies it carries, and what its completion
/// releases.
struct LogWrite {
    /// Its sequence number (what `GroupStorage::append` tags entries with).
    number: u64,
    batch: LogBatch,
    /// Some Ready in it must be on disk before it counts as persisted.
    sync: bool,
    /// It carries a received snapshot: written before the loop steps on.
    urgent: bool,
    /// (group position, Ready number, messages to send once persisted).
    readies: Vec<(usize, u64, Vec<raft::eraftpb::Message>)>,
}

impl LogWrite {
    fn new(number: u64) -> LogWrite {
        LogWrite {
            number,
            batch: LogBatch::default(),
            sync: false,
            urgent: false,
            readies: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.batch.is_empty() && self.readies.is_empty()
    }
}

/// Fault injection for tests of the disk path, set by environment
/// variables a test gives one node (never set in production):
/// `KVASIR_FAULT_LOG_WRITE_DELAY_MS` stalls every synced log write that
/// long (a slow or stuck disk), `KVASIR_FAULT_LOG_WRITE_FAIL_IF_EXISTS=PATH`
/// makes every synced write fail once that file exists (a failed fsync, at
/// a moment the test chooses).
#[derive(Default)]
struct LogFaults {
    delay: Duration,
    fail_if_exists: Option<PathBuf>,
}

impl LogFaults {
    fn from_env() -> LogFaults {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let faults = LogFaults {
            delay: Duration::from_millis(var("KVASIR_FAULT_LOG_WRITE_DELAY_MS").unwrap_or(0)),
            fail_if_exists: std::env::var_os("KVASIR_FAULT_LOG_WRITE_FAIL_IF_EXISTS")
                .map(PathBuf::from),
        };
        if !faults.delay.is_zero() || faults.fail_if_exists.is_some() {
            warn!(
                delay_ms = faults.delay.as_millis() as u64,
                fail_if_exists = ?faults.fail_if_exists,
                "log write faults injected (test only)"
            );
        }
        faults
    }

    /// Writes `batch` to the log, after the injected delay or failure.
    fn write(&self, engine: &Engine, batch: &mut LogBatch, sync: bool) -> Result<(), String> {
        if sync {
            if !self.delay.is_zero() {
                std::thread::sleep(self.delay);
            }
            if self.fail_if_exists.as_ref().is_some_and(|p| p.exists()) {
                return Err("fsync failed (injected fault)".into());
            }
        }
        engine
            .write(batch, sync)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// What a completed log write gives back: its outcome and the write (its
/// Readies are then persisted).
type Written = (Result<(), String>, LogWrite);

/// A node's shared log writer when it runs several loops (shard threads):
/// one thread takes every write the loops submitted while its previous
/// fsync ran, merges them into one raft-engine batch and syncs once, so
/// group commit spans the loops (and rounds) as it spans groups within
/// one loop. Completions come back in submission order.
pub struct LogWriter {
    submit: std::sync::mpsc::Sender<Submission>,
    /// Its writes and fsyncs (INFO raft adds them to the loops').
    pub counters: Arc<LogCounters>,
}

struct Submission {
    write: LogWrite,
    faults: Arc<LogFaults>,
    done: oneshot::Sender<Written>,
}

impl LogWriter {
    /// Starts the writer thread (`kvasir-log`) over the node's log.
    pub fn start(engine: Arc<Engine>) -> Result<Arc<LogWriter>, String> {
        let (submit, rx) = std::sync::mpsc::channel::<Submission>();
        let counters = Arc::new(LogCounters::default());
        let counted = counters.clone();
        std::thread::Builder::new()
            .name("kvasir-log".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut group = vec![first];
                    while let Ok(next) = rx.try_recv() {
                        group.push(next);
                    }
                    let result = Self::write_group(&engine, &mut group);
                    counted.fsyncs.fetch_add(1, Relaxed);
                    counted.log_writes.fetch_add(1, Relaxed);
                    for s in group {
                        let _ = s.done.send((result.clone(), s.write));
                    }
                }
            })
            .map_err(|e| format!("starting the log writer thread: {e}"))?;
        Ok(Arc::new(LogWriter { submit, counters }))
    }

    /// Writes the group's batches as one synced write. When merging would
    /// pass raft-engine's batch limit, what was merged so far is written
    /// first, and a batch too large to merge even alone is written as it is
    /// (its loop would have written it so without the shared writer).
    fn write_group(engine: &Engine, group: &mut [Submission]) -> Result<(), String> {
        let faults = group[0].faults.clone();
        let mut batch = LogBatch::default();
        for s in group.iter_mut() {
            if batch.merge(&mut s.write.batch).is_ok() {
                continue;
            }
            faults.write(engine, &mut batch, true)?;
            batch = LogBatch::default();
            if batch.merge(&mut s.write.batch).is_err() {
                faults.write(engine, &mut s.write.batch, true)?;
            }
        }
        faults.write(engine, &mut batch, true)
    }

    fn submit(&self, write: LogWrite, faults: Arc<LogFaults>) -> oneshot::Receiver<Written> {
        let (done, rx) = oneshot::channel();
        // A stopped writer drops `done`: the loop sees the write fail.
        let _ = self.submit.send(Submission {
            write,
            faults,
            done,
        });
        rx
    }
}

/// A synced log write in flight: on the blocking pool (one loop per node)
/// or with the shared writer (shard threads).
enum InFlight {
    Pool(tokio::task::JoinHandle<Written>),
    Shared(oneshot::Receiver<Written>),
}

impl std::future::Future for InFlight {
    type Output = Result<Written, String>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            InFlight::Pool(h) => std::pin::Pin::new(h)
                .poll(cx)
                .map(|r| r.map_err(|e| e.to_string())),
            InFlight::Shared(rx) => std::pin::Pin::new(rx)
                .poll(cx)
                .map(|r| r.map_err(|_| "the log writer stopped".to_string())),
        }
    }
}

/// Whether a follower's message tells the leader its log holds entries up
/// to some index (an accepted append): it may only leave once every Ready
/// before it is persisted, as raft-rs's persisted messages require.
fn claims_persisted_log(m: &raft::eraftpb::Message) -> bool {
    m.get_msg_type() == raft::eraftpb::MessageType::MsgAppendResponse && !m.reject
}

/// A record in a region no group uses, written with sync to make raft-engine
/// fsync what earlier writes left in the page cache.
fn sync_marker() -> Result<LogBatch, raft_engine::Error> {
    let mut batch = LogBatch::default();
    batch.put(u64::MAX, b"sync".to_vec(), b"1".to_vec())?;
    Ok(batch)
}

pub struct GroupSpec<S> {
    pub id: u64,
    pub voters: Vec<u64>,
    /// The node that should lead when healthy (leaders spread evenly).
    pub preferred_leader: u64,
    pub sm: S,
}

/// Where a proposal's or read's outcome goes.
pub type Reply<S> = oneshot::Sender<Result<<S as StateMachine>::Out, RaftError>>;

struct Waiter<S: StateMachine> {
    index: u64,
    term: u64,
    replies: Vec<Reply<S>>,
}

struct ReadBatch<S: StateMachine> {
    since: Instant,
    reads: Vec<(S::Cmd, Reply<S>)>,
}

/// Counters for INFO raft.
#[derive(Default, Clone, Copy, Debug)]
pub struct GroupStats {
    pub proposals: u64,
    pub entries: u64,
    pub snapshots_taken: u64,
    pub snapshots_installed: u64,
    pub reads: u64,
}

struct Group<S: StateMachine> {
    id: u64,
    raw: RawNode<GroupStorage>,
    sm: S,
    preferred: u64,
    proposals: Vec<(Vec<u8>, Reply<S>)>,
    /// Proposals without a reply, forwarded to the leader by raft-rs when
    /// this node follows (cluster-map updates from any node).
    forwards: Vec<Vec<u8>>,
    reads: Vec<(S::Cmd, Reply<S>)>,
    waiters: VecDeque<Waiter<S>>,
    reads_in_flight: HashMap<u64, ReadBatch<S>>,
    reads_ready: Vec<(u64, ReadBatch<S>)>,
    applied: u64,
    applied_term: u64,
    last_role: StateRole,
    stats: GroupStats,
    /// Readies handed to the log writer and not yet persisted.
    unpersisted: usize,
    /// The number of the last Ready taken.
    last_ready: u64,
}

/// A snapshot of one group's state, for INFO and CLUSTER commands.
#[derive(Clone, Debug)]
pub struct GroupStatus {
    pub id: u64,
    pub role: StateRole,
    pub leader: u64,
    pub term: u64,
    pub commit: u64,
    pub applied: u64,
    pub first_index: u64,
    pub last_index: u64,
    pub snapshot_index: u64,
    pub voters: Vec<u64>,
    /// Followers' matched index (leader only).
    pub matched: Vec<(u64, u64)>,
    /// Entries proposed here whose clients still wait for the apply.
    pub waiting_entries: usize,
    /// Reads sent for a ReadIndex or waiting for the applied index.
    pub reads_in_flight: usize,
    pub stats: GroupStats,
}

struct Inner<S: StateMachine> {
    groups: Vec<Group<S>>,
    index: HashMap<u64, usize>,
    next_read_id: u64,
    seed: u64,
    failed: Option<String>,
    ticks: u64,
}

/// Why a node's Raft side stopped for good. The library never exits the
/// process itself: the binary waits on [`MultiRaft::fatal`] and decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fatal {
    /// The node loop ended (a panic inside it).
    LoopStopped(String),
    /// The recovered log lacks entries this node had acknowledged.
    LostAcknowledgedEntries(String),
    /// Writing (or syncing) the Raft log failed.
    LogWriteFailed(String),
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fatal::LoopStopped(why) => write!(f, "the Raft loop stopped unexpectedly ({why})"),
            Fatal::LostAcknowledgedEntries(why) | Fatal::LogWriteFailed(why) => f.write_str(why),
        }
    }
}

/// Log writes and fsyncs (INFO raft), summed over a node's loops.
#[derive(Default, Debug)]
pub struct LogCounters {
    pub fsyncs: AtomicU64,
    pub log_writes: AtomicU64,
}

/// Each group's role as its loop last saw it (at the end of every round),
/// for routing from other threads: a stale answer is safe, since a loop
/// that no longer leads answers a proposal or read with `NotLeader`.
pub struct GroupRoles {
    /// In the loop's group order, so a round records by position.
    cells: Vec<RoleCell>,
    index: HashMap<u64, usize>,
}

#[derive(Default)]
struct RoleCell {
    group: u64,
    leader: AtomicU64,
    term: AtomicU64,
    leading: AtomicBool,
}

impl GroupRoles {
    fn new(groups: impl IntoIterator<Item = u64>) -> GroupRoles {
        let cells: Vec<RoleCell> = groups
            .into_iter()
            .map(|group| RoleCell {
                group,
                ..RoleCell::default()
            })
            .collect();
        let index = cells
            .iter()
            .enumerate()
            .map(|(i, c)| (c.group, i))
            .collect();
        GroupRoles { cells, index }
    }

    /// Records the role of the loop's `i`-th group.
    fn record(&self, i: usize, leader: u64, term: u64, leading: bool) {
        if let Some(c) = self.cells.get(i) {
            c.leader.store(leader, Relaxed);
            c.term.store(term, Relaxed);
            c.leading.store(leading, Relaxed);
        }
    }

    fn cell(&self, group: u64) -> Option<&RoleCell> {
        self.cells.get(*self.index.get(&group)?)
    }

    pub fn is_leader(&self, group: u64) -> bool {
        self.cell(group).is_some_and(|c| c.leading.load(Relaxed))
    }

    pub fn leader_of(&self, group: u64) -> Option<u64> {
        let l = self.cell(group)?.leader.load(Relaxed);
        (l != 0).then_some(l)
    }

    pub fn leader_and_term(&self, group: u64) -> Option<(Option<u64>, u64)> {
        let c = self.cell(group)?;
        let l = c.leader.load(Relaxed);
        Some(((l != 0).then_some(l), c.term.load(Relaxed)))
    }

    /// (group, leader, term) of every group whose leader is known.
    pub fn known_leaders(&self) -> Vec<(u64, u64, u64)> {
        self.cells
            .iter()
            .filter_map(|c| {
                let l = c.leader.load(Relaxed);
                (l != 0).then(|| (c.group, l, c.term.load(Relaxed)))
            })
            .collect()
    }
}

pub struct MultiRaft<S: StateMachine> {
    cfg: Config,
    engine: Arc<Engine>,
    inner: RefCell<Inner<S>>,
    inbox: Arc<Inbox>,
    transport: Arc<Transport>,
    fatal: RefCell<Option<Fatal>>,
    fatal_notify: tokio::sync::Notify,
    counters: Arc<LogCounters>,
    roles: Arc<GroupRoles>,
    /// This loop's index among the node's (see [`Transport`]'s lanes); 0:
    /// the node's first loop, which also syncs (`--wal async`) and purges
    /// the shared log.
    lane: usize,
    /// The node's shared log writer when it runs several loops.
    writer: Option<Arc<LogWriter>>,
    faults: Arc<LogFaults>,
    /// The node is stopping gracefully: it hands the groups it leads to
    /// peers and takes none back (see [`MultiRaft::leave`]).
    leaving: std::cell::Cell<bool>,
}

/// Opens the node's Raft log (recovering it) after checking that the data
/// folder belongs to this node of this cluster; shared by the node's loops.
pub async fn open_log(cfg: &Config) -> Result<Arc<Engine>, String> {
    std::fs::create_dir_all(&cfg.dir)
        .map_err(|e| format!("creating {}: {e}", cfg.dir.display()))?;
    let raft_dir = cfg.dir.join("raft");
    let snap_dir = cfg.dir.join("snap");
    if cfg.wal == WalMode::None {
        let _ = std::fs::remove_dir_all(&raft_dir);
        let _ = std::fs::remove_dir_all(&snap_dir);
    }
    check_identity(&cfg.dir, cfg.cluster_id, cfg.node_id)?;
    std::fs::create_dir_all(&snap_dir)
        .map_err(|e| format!("creating {}: {e}", snap_dir.display()))?;
    let engine_cfg = raft_engine::Config {
        dir: raft_dir.to_string_lossy().into_owned(),
        recovery_mode: raft_engine::RecoveryMode::TolerateTailCorruption,
        purge_threshold: raft_engine::ReadableSize::mb(256),
        target_file_size: raft_engine::ReadableSize::mb(64),
        ..Default::default()
    };
    let engine = tokio::task::spawn_blocking(move || Engine::open(engine_cfg))
        .await
        .map_err(|e| format!("opening the Raft log: {e}"))?
        .map_err(|e| {
            format!(
                "the Raft log in {} could not be recovered: {e}",
                raft_dir.display()
            )
        })?;
    Ok(Arc::new(engine))
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Checks (or, on first start, writes) the data folder's identity file so a
/// folder from another cluster or node is refused with a clear message.
fn check_identity(dir: &Path, cluster_id: u64, node_id: u64) -> Result<(), String> {
    let path = dir.join("kvasir-node.id");
    let want = format!("cluster-id={cluster_id:016x}\nnode-id={node_id}\n");
    match std::fs::read_to_string(&path) {
        Ok(have) if have == want => Ok(()),
        Ok(have) => Err(format!(
            "data folder {} belongs to another cluster or node ({}), this node is cluster-id={cluster_id:016x} node-id={node_id}; refusing to start",
            dir.display(),
            have.trim().replace('\n', " ")
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let non_empty = std::fs::read_dir(dir)
                .map(|mut d| d.next().is_some())
                .unwrap_or(false);
            if non_empty && dir.join("raft").exists() {
                return Err(format!(
                    "data folder {} has a Raft log but no identity file; refusing to start",
                    dir.display()
                ));
            }
            snapfile::write_synced(&path, want.as_bytes())
                .map_err(|e| format!("writing {}: {e}", path.display()))
        }
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

impl<S: StateMachine> MultiRaft<S> {
    /// Opens the node's log (recovering it), restores every group from its
    /// snapshot, starts the transport and the node loop on the current
    /// `LocalSet`: every group on one loop.
    pub async fn start(
        cfg: Config,
        listener: TcpListener,
        specs: Vec<GroupSpec<S>>,
        on_broadcast: BroadcastHandler,
    ) -> Result<Rc<MultiRaft<S>>, String> {
        let engine = open_log(&cfg).await?;
        let inbox = Arc::new(Inbox::default());
        let transport = Transport::start(
            cfg.node_id,
            cfg.cluster_id,
            Arc::from(cfg.secret.as_slice()),
            listener,
            &cfg.peers,
            1,
            Arc::new(Inboxes::single(inbox.clone())),
            on_broadcast,
        );
        Self::start_lane(cfg, engine, transport, inbox, specs, 0, None)
    }

    /// Restores `specs`' groups from the shared log and their snapshots and
    /// starts a loop driving them on the current `LocalSet`. `lane`: the
    /// loop's index (0: the node's first loop, which also syncs and purges
    /// the log; another runs its own links to the peers, see
    /// [`Transport::run_lane`]). `writer`: the node's shared log writer
    /// when it runs several loops.
    pub fn start_lane(
        cfg: Config,
        engine: Arc<Engine>,
        transport: Arc<Transport>,
        inbox: Arc<Inbox>,
        specs: Vec<GroupSpec<S>>,
        lane: usize,
        writer: Option<Arc<LogWriter>>,
    ) -> Result<Rc<MultiRaft<S>>, String> {
        let snap_dir = cfg.dir.join("snap");
        let mut groups = Vec::new();
        let mut index = HashMap::new();
        let mut init = LogBatch::default();
        for spec in specs {
            let mut storage = GroupStorage::open(engine.clone(), spec.id, &spec.voters)?;
            let last = storage.last_index().unwrap_or(0);
            if last < storage.commit_index() {
                // raft-engine dropped damaged records this node had already
                // persisted (and acknowledged): running on would break Raft.
                return Err(format!(
                    "the Raft log in {} is damaged: group {} ends at index {last} but index {} was committed (corrupted records were dropped at recovery); this node cannot safely rejoin with it (replacing a node's data is not supported yet: restore the folder from a backup)",
                    cfg.dir.join("raft").display(),
                    spec.id,
                    storage.commit_index()
                ));
            }
            storage.verify_entries().map_err(|e| {
                format!(
                    "the Raft log in {} is damaged: group {}: {e} (a corrupted record that recovery could not drop); this node cannot safely rejoin with it (replacing a node's data is not supported yet: restore the folder from a backup)",
                    cfg.dir.join("raft").display(),
                    spec.id
                )
            })?;
            let mut sm = spec.sm;
            let snap_index = storage.snapshot_index();
            if snap_index > 0 {
                let path = snapfile::path(&snap_dir, spec.id);
                let image = std::fs::read(&path).map_err(|e| {
                    format!(
                        "group {}: reading snapshot {}: {e}",
                        spec.id,
                        path.display()
                    )
                })?;
                let data = snapfile::unwrap(&image)
                    .map_err(|e| format!("group {}: snapshot {}: {e}", spec.id, path.display()))?;
                sm.restore(data)
                    .map_err(|e| format!("group {}: restoring snapshot: {e}", spec.id))?;
                storage.load_snapshot_data(Bytes::copy_from_slice(data));
            } else if storage.is_fresh() {
                storage.persist_conf_state(&mut init)?;
            }
            let applied = snap_index;
            let applied_term = storage.snapshot_meta().term;
            let rcfg = raft::Config {
                id: cfg.node_id,
                election_tick: cfg.election_ticks,
                heartbeat_tick: cfg.heartbeat_ticks,
                applied,
                max_size_per_msg: 1024 * 1024,
                max_inflight_msgs: 256,
                check_quorum: true,
                pre_vote: true,
                read_only_option: match cfg.read_mode {
                    ReadMode::ReadIndex => ReadOnlyOption::Safe,
                    ReadMode::Lease => ReadOnlyOption::LeaseBased,
                },
                max_committed_size_per_ready: 16 * 1024 * 1024,
                ..Default::default()
            };
            let logger = slog::Logger::root(slog::Discard, slog::o!());
            let raw = RawNode::new(&rcfg, storage, &logger)
                .map_err(|e| format!("group {}: {e}", spec.id))?;
            index.insert(spec.id, groups.len());
            groups.push(Group {
                id: spec.id,
                raw,
                sm,
                preferred: spec.preferred_leader,
                proposals: Vec::new(),
                forwards: Vec::new(),
                reads: Vec::new(),
                waiters: VecDeque::new(),
                reads_in_flight: HashMap::new(),
                reads_ready: Vec::new(),
                applied,
                applied_term,
                last_role: StateRole::Follower,
                stats: GroupStats::default(),
                unpersisted: 0,
                last_ready: 0,
            });
        }
        if !init.is_empty() {
            engine
                .write(&mut init, true)
                .map_err(|e| format!("writing the Raft log: {e}"))?;
        }
        let roles = Arc::new(GroupRoles::new(groups.iter().map(|g| g.id)));
        let node = Rc::new(MultiRaft {
            cfg,
            engine,
            inner: RefCell::new(Inner {
                groups,
                index,
                next_read_id: 1,
                seed: unix_ms() ^ 0x6b76_6173_6972_0001,
                failed: None,
                ticks: 0,
            }),
            inbox,
            transport,
            fatal: RefCell::new(None),
            fatal_notify: tokio::sync::Notify::new(),
            counters: Arc::default(),
            roles,
            lane,
            writer,
            faults: Arc::new(LogFaults::from_env()),
            leaving: std::cell::Cell::new(false),
        });
        node.transport.run_lane(lane);
        let driver = tokio::task::spawn_local(node.clone().run());
        let watcher = node.clone();
        tokio::task::spawn_local(async move {
            // A node whose Raft loop died must not keep answering clients.
            if let Err(e) = driver.await {
                let fatal = Fatal::LoopStopped(e.to_string());
                error!("{fatal}");
                watcher.set_fatal(fatal);
            }
        });
        if node.lane == 0 && node.cfg.wal == WalMode::Async {
            tokio::task::spawn_local(node.clone().sync_loop());
        }
        Ok(node)
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    /// This loop's log counters, readable from other threads.
    pub fn counters(&self) -> &Arc<LogCounters> {
        &self.counters
    }

    /// This loop's groups' roles, readable from other threads.
    pub fn roles(&self) -> &Arc<GroupRoles> {
        &self.roles
    }

    /// Queues a write; the reply comes after the entry is committed and
    /// applied here.
    pub fn propose(
        &self,
        group: u64,
        cmd: &S::Cmd,
    ) -> oneshot::Receiver<Result<S::Out, RaftError>> {
        let (tx, rx) = oneshot::channel();
        let mut bytes = Vec::new();
        S::encode(cmd, &mut bytes);
        self.propose_encoded(group, bytes, tx);
        rx
    }

    /// Queues a write already encoded with `S::encode` (by a thread other
    /// than this loop's); `reply` hears the outcome.
    pub fn propose_encoded(&self, group: u64, bytes: Vec<u8>, reply: Reply<S>) {
        let mut inner = self.inner.borrow_mut();
        if let Some(e) = &inner.failed {
            let _ = reply.send(Err(RaftError::Storage(e.clone())));
            return;
        }
        match inner.index.get(&group).copied() {
            Some(i) => {
                if bytes.len() > MAX_PROPOSAL {
                    let _ = reply.send(Err(RaftError::TooLarge {
                        bytes: bytes.len(),
                        limit: MAX_PROPOSAL,
                    }));
                    return;
                }
                inner.groups[i].proposals.push((bytes, reply));
                drop(inner);
                self.inbox.wake.notify_one();
            }
            None => {
                let _ = reply.send(Err(RaftError::NotLeader(None)));
            }
        }
    }

    /// Queues a proposal whose outcome nobody waits for; a follower
    /// forwards it to the leader. The caller checks the applied state.
    pub fn propose_forwarded(&self, group: u64, cmd: &S::Cmd) {
        let mut inner = self.inner.borrow_mut();
        if let Some(i) = inner.index.get(&group).copied() {
            let mut bytes = Vec::new();
            S::encode(cmd, &mut bytes);
            if bytes.len() > MAX_PROPOSAL {
                warn!(
                    group,
                    bytes = bytes.len(),
                    "forwarded proposal too large, dropped"
                );
                return;
            }
            inner.groups[i].forwards.push(bytes);
            drop(inner);
            self.inbox.wake.notify_one();
        }
    }

    /// Queues a linearizable read (ReadIndex or lease, per the config).
    pub fn read(&self, group: u64, cmd: S::Cmd) -> oneshot::Receiver<Result<S::Out, RaftError>> {
        let (tx, rx) = oneshot::channel();
        self.read_to(group, cmd, tx);
        rx
    }

    /// Queues a linearizable read whose outcome `reply` hears.
    pub fn read_to(&self, group: u64, cmd: S::Cmd, reply: Reply<S>) {
        let mut inner = self.inner.borrow_mut();
        if let Some(e) = &inner.failed {
            let _ = reply.send(Err(RaftError::Storage(e.clone())));
            return;
        }
        match inner.index.get(&group).copied() {
            Some(i) => {
                inner.groups[i].reads.push((cmd, reply));
                drop(inner);
                self.inbox.wake.notify_one();
            }
            None => {
                let _ = reply.send(Err(RaftError::NotLeader(None)));
            }
        }
    }

    /// Runs `f` on a group's local state machine (stale reads, admin);
    /// `None` when this node holds no replica of the group.
    pub fn with_sm<R>(&self, group: u64, f: impl FnOnce(Option<&S>) -> R) -> R {
        let inner = self.inner.borrow();
        let sm = inner.index.get(&group).map(|&i| &inner.groups[i].sm);
        f(sm)
    }

    /// The group's leader as this node knows it.
    pub fn leader_of(&self, group: u64) -> Option<u64> {
        let inner = self.inner.borrow();
        let g = &inner.groups[*inner.index.get(&group)?];
        let l = g.raw.raft.leader_id;
        (l != 0).then_some(l)
    }

    /// The leader this node's Raft knows for a group (if any) and the
    /// group's current term here.
    pub fn leader_and_term(&self, group: u64) -> Option<(Option<u64>, u64)> {
        let inner = self.inner.borrow();
        let r = &inner.groups[*inner.index.get(&group)?].raw.raft;
        Some(((r.leader_id != 0).then_some(r.leader_id), r.term))
    }

    /// (group, leader, term) of every group whose leader this node knows.
    pub fn known_leaders(&self) -> Vec<(u64, u64, u64)> {
        let inner = self.inner.borrow();
        inner
            .groups
            .iter()
            .filter(|g| g.raw.raft.leader_id != 0)
            .map(|g| (g.id, g.raw.raft.leader_id, g.raw.raft.term))
            .collect()
    }

    pub fn is_leader(&self, group: u64) -> bool {
        let inner = self.inner.borrow();
        inner
            .index
            .get(&group)
            .is_some_and(|&i| inner.groups[i].raw.raft.state == StateRole::Leader)
    }

    pub fn status(&self) -> Vec<GroupStatus> {
        let inner = self.inner.borrow();
        inner
            .groups
            .iter()
            .map(|g| {
                let r = &g.raw.raft;
                let store = g.raw.store();
                let matched = if r.state == StateRole::Leader {
                    r.prs().iter().map(|(id, p)| (*id, p.matched)).collect()
                } else {
                    Vec::new()
                };
                GroupStatus {
                    id: g.id,
                    role: r.state,
                    leader: r.leader_id,
                    term: r.term,
                    commit: r.raft_log.committed,
                    applied: g.applied,
                    first_index: store.first_index().unwrap_or(0),
                    last_index: r.raft_log.last_index(),
                    snapshot_index: store.snapshot_index(),
                    voters: store.conf_state().voters.clone(),
                    matched,
                    waiting_entries: g.waiters.len(),
                    reads_in_flight: g.reads_in_flight.len() + g.reads_ready.len() + g.reads.len(),
                    stats: g.stats,
                }
            })
            .collect()
    }

    /// Bytes the Raft log uses on disk.
    pub fn log_size(&self) -> usize {
        self.engine.get_used_size()
    }

    /// `--wal async`: everything written so far reaches the disk once a
    /// second. raft-engine syncs only as part of a non-empty write, so the
    /// loop writes a small marker record with sync.
    async fn sync_loop(self: Rc<Self>) {
        let mut t = tokio::time::interval(Duration::from_secs(1));
        loop {
            t.tick().await;
            let engine = self.engine.clone();
            let synced = tokio::task::spawn_blocking(move || {
                let mut batch = sync_marker()?;
                engine.write(&mut batch, true)
            })
            .await;
            if let Ok(Err(e)) = synced {
                error!("raft log sync failed: {e}");
            }
        }
    }

    /// The node loop. Each round steps and proposes, then hands every
    /// group's Ready to the log writer without waiting for it: raft-rs is
    /// told at once (`advance_append_async`) and keeps stepping, so
    /// proposals reach followers and acknowledgements are counted while a
    /// previous round's fsync is still running (Raft thesis 10.2.1). One
    /// write (with one fsync for every group: group commit) is in flight at
    /// a time; the rounds meanwhile fill the next one. A Ready counts as
    /// persisted (`on_persist_ready`, and the messages that needed it are
    /// sent) only when the write carrying it completes, so nothing is
    /// acknowledged before a majority has it on disk.
    async fn run(self: Rc<Self>) {
        let mut ticker = tokio::time::interval(self.cfg.tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_purge = Instant::now();
        let mut pending = LogWrite::new(1);
        // Synced writes in flight, completing in order. One at a time on
        // the blocking pool (the rounds meanwhile fill the next); with the
        // shared writer a loop submits each round's write at once, so the
        // writer's one fsync covers every loop's writes since its last.
        let max_in_flight = if self.writer.is_some() { 64 } else { 1 };
        let mut in_flight: VecDeque<InFlight> = VecDeque::new();
        loop {
            let mut tick = false;
            let mut done = None;
            tokio::select! {
                _ = ticker.tick() => tick = true,
                _ = self.inbox.wake.notified() => {}
                res = async {
                    match in_flight.front_mut() {
                        Some(h) => h.await,
                        None => std::future::pending().await,
                    }
                }, if !in_flight.is_empty() => {
                    in_flight.pop_front();
                    done = Some(res);
                }
            }
            if let Some(res) = done {
                if !self.finish_write(res) {
                    return;
                }
            }
            self.round(tick, &mut pending);
            if self.fatal.borrow().is_some() {
                // The binary stops the process; nothing more is done here.
                return;
            }
            if pending.urgent {
                // A received snapshot replaced a group's log: it is written
                // before raft-rs reads that log again, after any earlier
                // write.
                while let Some(h) = in_flight.pop_front() {
                    if !self.finish_write(h.await) {
                        return;
                    }
                }
                let next = LogWrite::new(pending.number + 1);
                let mut write = std::mem::replace(&mut pending, next);
                let sync = self.cfg.wal != WalMode::None;
                if let Err(e) = self.write_log(&mut write, sync) {
                    return self.log_write_failed(e);
                }
                self.on_written(write);
                self.inbox.wake.notify_one();
            } else if in_flight.len() < max_in_flight
                && !pending.is_empty()
                && (in_flight.is_empty() || (self.cfg.wal == WalMode::Fsync && pending.sync))
            {
                let next = LogWrite::new(pending.number + 1);
                let mut write = std::mem::replace(&mut pending, next);
                if self.cfg.wal == WalMode::Fsync && write.sync {
                    // The fsync runs off the loop; the loop goes on stepping.
                    match &self.writer {
                        // The writer counts its fsyncs.
                        Some(writer) => in_flight
                            .push_back(InFlight::Shared(writer.submit(write, self.faults.clone()))),
                        None => {
                            self.count_write(true);
                            let engine = self.engine.clone();
                            let faults = self.faults.clone();
                            in_flight.push_back(InFlight::Pool(tokio::task::spawn_blocking(
                                move || {
                                    let res = faults.write(&engine, &mut write.batch, true);
                                    (res, write)
                                },
                            )));
                        }
                    }
                } else {
                    // A write to the page cache is cheaper than the thread
                    // hand-off: done here, and what it releases is handled
                    // in the next round, at once.
                    if let Err(e) = self.write_log(&mut write, false) {
                        return self.log_write_failed(e);
                    }
                    self.on_written(write);
                    self.inbox.wake.notify_one();
                }
            }
            if self.lane == 0 && last_purge.elapsed() > Duration::from_secs(10) {
                last_purge = Instant::now();
                let engine = self.engine.clone();
                let _ = tokio::task::spawn_blocking(move || engine.purge_expired_files()).await;
            }
        }
    }

    /// Writes a log batch on the loop (small or rare writes).
    fn write_log(&self, write: &mut LogWrite, sync: bool) -> Result<(), String> {
        if write.batch.is_empty() {
            return Ok(());
        }
        self.count_write(sync);
        self.faults.write(&self.engine, &mut write.batch, sync)
    }

    /// INFO raft's `log_writes` and `fsyncs`.
    fn count_write(&self, sync: bool) {
        if sync {
            self.counters.fsyncs.fetch_add(1, Relaxed);
        }
        self.counters.log_writes.fetch_add(1, Relaxed);
    }

    /// Takes the outcome of the write that ran off the loop: its Readies
    /// are persisted (true), or the log failed and the node stops (false).
    fn finish_write(&self, res: Result<Written, String>) -> bool {
        match res {
            Ok((Ok(()), write)) => {
                self.on_written(write);
                true
            }
            Ok((Err(e), _)) | Err(e) => {
                self.log_write_failed(e);
                false
            }
        }
    }

    /// Tells raft-rs what the state machine applied. A received snapshot
    /// counts as applied only once its write is persisted: raft-rs refuses
    /// an applied index past the persisted one, and an earlier write may
    /// complete (and come here) while the snapshot's write is still queued.
    fn advance_applied(g: &mut Group<S>) {
        let log = &g.raw.raft.raft_log;
        if g.applied <= log.committed.min(log.persisted) {
            g.raw.advance_apply_to(g.applied);
        }
    }

    /// The log cannot be written: nothing waiting was acknowledged, every
    /// client hears an error, and the node stops (the binary exits), so
    /// the other replicas elect new leaders and clients move to them.
    fn log_write_failed(&self, e: String) {
        let why = format!("Raft log write failed: {e}");
        self.fail(why.clone());
        self.set_fatal(Fatal::LogWriteFailed(why));
    }

    /// A log write completed: its entries are read from raft-engine now,
    /// its Readies count as persisted, and the messages that waited for
    /// that go out.
    fn on_written(&self, write: LogWrite) {
        let mut inner = self.inner.borrow_mut();
        for (i, number, msgs) in write.readies {
            let Some(g) = inner.groups.get_mut(i) else {
                continue;
            };
            g.raw.mut_store().written(write.number);
            g.raw.on_persist_ready(number);
            g.unpersisted = g.unpersisted.saturating_sub(1);
            if g.unpersisted == 0 {
                // Later Readies that needed no write are persisted too.
                g.raw.on_persist_ready(g.last_ready);
            }
            Self::advance_applied(g);
            if !msgs.is_empty() {
                self.transport.send(self.lane, g.id, msgs);
            }
        }
    }

    /// Records why the node must stop (the first reason wins) and wakes
    /// whoever waits in [`MultiRaft::fatal`].
    fn set_fatal(&self, fatal: Fatal) {
        self.fatal.borrow_mut().get_or_insert(fatal);
        self.fatal_notify.notify_waiters();
        self.fatal_notify.notify_one();
    }

    /// Resolves when the node's Raft side stopped for good; the caller
    /// (the binary) stops the process.
    pub async fn fatal(&self) -> Fatal {
        loop {
            let notified = self.fatal_notify.notified();
            if let Some(f) = self.fatal.borrow().clone() {
                return f;
            }
            notified.await;
        }
    }

    /// The log cannot be written: every waiting client gets an error (none
    /// was acknowledged), and the node stops taking work.
    fn fail(&self, why: String) {
        error!("{why}; this node stops serving writes and reads");
        let mut inner = self.inner.borrow_mut();
        inner.failed = Some(why.clone());
        for g in &mut inner.groups {
            for w in g.waiters.drain(..) {
                for r in w.replies {
                    let _ = r.send(Err(RaftError::Storage(why.clone())));
                }
            }
            for (_, r) in g.proposals.drain(..) {
                let _ = r.send(Err(RaftError::Storage(why.clone())));
            }
            for (_, r) in g.reads.drain(..) {
                let _ = r.send(Err(RaftError::Storage(why.clone())));
            }
            for (_, b) in g.reads_in_flight.drain() {
                for (_, r) in b.reads {
                    let _ = r.send(Err(RaftError::Storage(why.clone())));
                }
            }
        }
    }

    /// One round: steps what peers sent, ticks, proposes and queues reads,
    /// then takes every group's Ready (see [`MultiRaft::take_ready`]).
    fn round(&self, tick: bool, log: &mut LogWrite) {
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        let msgs = self.inbox.take_messages();
        let mut lost: Option<String> = None;
        for (group, m) in msgs {
            match inner.index.get(&group) {
                Some(&i) => {
                    let raw = &mut inner.groups[i].raw;
                    if self.leaving.get()
                        && m.get_msg_type() == raft::eraftpb::MessageType::MsgTimeoutNow
                    {
                        // A peer's rebalancer handing leadership back to
                        // its preferred node, which is on its way out: the
                        // transfer lapses at the peer after an election
                        // timeout and it keeps leading.
                        continue;
                    }
                    if m.get_msg_type() == raft::eraftpb::MessageType::MsgHeartbeat
                        && m.term >= raw.raft.term
                        && m.commit > raw.raft.raft_log.last_index()
                    {
                        // The leader only sends a commit this node has
                        // acknowledged: our log lost persisted entries
                        // (damaged and truncated at recovery).
                        let why = if self.cfg.wal == WalMode::None {
                            "with --wal none a node restarted alone comes back empty and cannot rejoin: restart the whole cluster"
                        } else {
                            "the data folder is damaged and this node cannot safely rejoin with it (the leaders remember what it acknowledged; replacing a node's data is not supported yet: restore the folder from a backup)"
                        };
                        lost = Some(format!(
                            "the Raft log in {} lost acknowledged entries: group {group} ends at index {} but the leader has index {} stored here; {why}",
                            self.cfg.dir.join("raft").display(),
                            raw.raft.raft_log.last_index(),
                            m.commit
                        ));
                        break;
                    }
                    let _ = raw.step(m);
                }
                None => warn!(group, from = m.from, "message for an unknown group dropped"),
            }
        }
        if let Some(msg) = lost {
            drop(guard);
            self.fail(msg.clone());
            self.set_fatal(Fatal::LostAcknowledgedEntries(msg));
            return;
        }
        for (group, to, ok) in self.inbox.take_snapshot_reports() {
            if let Some(&i) = inner.index.get(&group) {
                let status = if ok {
                    SnapshotStatus::Finish
                } else {
                    SnapshotStatus::Failure
                };
                inner.groups[i].raw.report_snapshot(to, status);
            }
        }
        for (group, to) in self.inbox.take_unreachable() {
            if let Some(&i) = inner.index.get(&group) {
                inner.groups[i].raw.report_unreachable(to);
            }
        }
        if tick {
            inner.ticks += 1;
            let me = self.cfg.node_id;
            let ticks = inner.ticks;
            // After a start, a group's first leader should be its preferred
            // node: it campaigns at once, and the other replicas hold their
            // election timers for two election timeouts while it is
            // reachable. Otherwise whoever times out first wins, and the
            // rebalancer moves a third of the leaders a second later, a
            // burst of MOVED for every client.
            let grace = ticks <= 2 * self.cfg.election_ticks as u64;
            for g in &mut inner.groups {
                let leaderless = g.raw.raft.leader_id == raft::INVALID_ID;
                if leaderless && ticks == 2 && g.preferred == me {
                    let _ = g.raw.campaign();
                }
                if grace
                    && leaderless
                    && g.preferred != me
                    && self.transport.is_connected(g.preferred)
                {
                    continue;
                }
                g.raw.tick();
            }
            if self.leaving.get() {
                self.hand_over(inner);
            } else if inner.ticks.is_multiple_of(20) {
                self.rebalance(inner);
            }
            self.expire_reads(inner);
        }
        let now_ms = unix_ms();
        for g in &mut inner.groups {
            for bytes in std::mem::take(&mut g.forwards) {
                inner.seed = inner.seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut b = EntryBuilder::new(now_ms, inner.seed);
                b.push(&bytes);
                let _ = g.raw.propose(Vec::new(), b.finish());
            }
            if !g.proposals.is_empty() {
                inner.seed = inner.seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
                Self::propose_batch(g, now_ms, inner.seed, self.cfg.max_entry_bytes);
            }
            if !g.reads.is_empty() {
                if g.raw.raft.state == StateRole::Leader && !g.raw.raft.commit_to_current_term() {
                    // raft-rs drops a ReadIndex until the leader's first
                    // entry of its term commits; keep the reads queued.
                } else if g.raw.raft.state == StateRole::Leader {
                    let id = inner.next_read_id;
                    inner.next_read_id += 1;
                    let reads = std::mem::take(&mut g.reads);
                    g.stats.reads += reads.len() as u64;
                    g.raw.read_index(id.to_le_bytes().to_vec());
                    g.reads_in_flight.insert(
                        id,
                        ReadBatch {
                            since: Instant::now(),
                            reads,
                        },
                    );
                } else {
                    let hint = Self::leader_hint(g);
                    for (_, r) in g.reads.drain(..) {
                        let _ = r.send(Err(RaftError::NotLeader(hint)));
                    }
                }
            }
        }
        let snap_dir = self.cfg.dir.join("snap");
        for (i, g) in inner.groups.iter_mut().enumerate() {
            if g.raw.has_ready() {
                self.take_ready(i, g, log, &snap_dir);
            } else if !g.reads_ready.is_empty() {
                // Reads whose index an earlier round's apply reached.
                Self::serve_reads(g);
            }
            let r = &g.raw.raft;
            self.roles
                .record(i, r.leader_id, r.term, r.state == StateRole::Leader);
        }
    }

    /// Handles one group's Ready without waiting for the disk: messages a
    /// leader may send before persisting go out now, committed entries
    /// apply (raft-rs gives only entries this node has persisted, and a
    /// majority has them), entries and hard state join the next log write,
    /// and raft-rs is advanced at once. The messages that must wait for
    /// persistence (a follower's acknowledgements, votes) travel with the
    /// write. A Ready with nothing to persist durably (no entries, no
    /// snapshot, no vote or term change) counts as persisted at once when
    /// no earlier Ready of the group is still being written.
    fn take_ready(&self, i: usize, g: &mut Group<S>, log: &mut LogWrite, snap_dir: &Path) {
        let mut rd = g.raw.ready();
        g.last_ready = rd.number();
        if let Some(ss) = rd.ss() {
            if ss.raft_state != StateRole::Leader && g.last_role == StateRole::Leader {
                Self::lost_leadership(g, ss.leader_id);
            }
            if ss.raft_state == StateRole::Leader && g.last_role != StateRole::Leader {
                info!(group = g.id, term = g.raw.raft.term, "became leader");
            }
            g.last_role = ss.raft_state;
        }
        let msgs = rd.take_messages();
        if !msgs.is_empty() {
            self.transport.send(self.lane, g.id, msgs);
        }
        // raft-rs sets must_sync for entries, a snapshot, a term or a vote.
        let durable = rd.must_sync() || !rd.entries().is_empty() || !rd.snapshot().is_empty();
        let snapshot = !rd.snapshot().is_empty();
        if snapshot {
            Self::install_snapshot(g, rd.snapshot().clone(), snap_dir, &mut log.batch);
            log.urgent = true;
        }
        let committed = rd.take_committed_entries();
        Self::apply_entries(g, committed);
        if let Err(e) = g
            .raw
            .mut_store()
            .append(rd.entries(), &mut log.batch, log.number)
        {
            error!(group = g.id, "appending entries: {e}");
        }
        if let Some(hs) = rd.hs() {
            let hs = hs.clone();
            if let Err(e) = g.raw.mut_store().set_hard_state(&hs, &mut log.batch) {
                error!(group = g.id, "hard state: {e}");
            }
        }
        for rs in rd.take_read_states() {
            let mut id = [0u8; 8];
            if rs.request_ctx.len() == 8 {
                id.copy_from_slice(&rs.request_ctx);
            }
            if let Some(b) = g.reads_in_flight.remove(&u64::from_le_bytes(id)) {
                g.reads_ready.push((rs.index, b));
            }
        }
        let number = rd.number();
        let persisted = rd.take_persisted_messages();
        g.raw.advance_append_async(rd);
        if durable {
            g.unpersisted += 1;
            log.sync = true;
            log.readies.push((i, number, persisted));
        } else if g.unpersisted == 0 {
            g.raw.on_persist_ready(number);
            if !persisted.is_empty() {
                self.transport.send(self.lane, g.id, persisted);
            }
        } else if persisted.iter().any(claims_persisted_log) {
            // An acknowledgement of entries an earlier Ready appended (and
            // whose write is still running) would let the leader count this
            // node before they are on disk: it leaves with that write, or a
            // later one (writes complete in order), needing no sync itself.
            g.unpersisted += 1;
            log.readies.push((i, number, persisted));
        } else if !persisted.is_empty() {
            // Heartbeat and read-index answers, rejections: they state
            // nothing about what is on disk.
            self.transport.send(self.lane, g.id, persisted);
        }
        Self::advance_applied(g);
        Self::drop_overwritten_waiters(g);
        Self::serve_reads(g);
        if g.applied >= g.raw.store().snapshot_index() + self.cfg.snapshot_entries {
            self.take_snapshot(g);
        }
    }

    fn propose_batch(g: &mut Group<S>, now_ms: u64, seed: u64, max_bytes: usize) {
        let proposals = std::mem::take(&mut g.proposals);
        if g.raw.raft.state != StateRole::Leader {
            let hint = Self::leader_hint(g);
            for (_, r) in proposals {
                let _ = r.send(Err(RaftError::NotLeader(hint)));
            }
            return;
        }
        g.stats.proposals += proposals.len() as u64;
        let mut seed = seed;
        let mut builder = EntryBuilder::new(now_ms, seed);
        let mut replies = Vec::new();
        for (bytes, reply) in proposals {
            if !builder.is_empty() && builder.len() + bytes.len() > max_bytes {
                seed = seed.wrapping_add(0x2545_F491_4F6C_DD1D);
                let full = std::mem::replace(&mut builder, EntryBuilder::new(now_ms, seed));
                Self::propose_entry(g, full, std::mem::take(&mut replies));
            }
            builder.push(&bytes);
            replies.push(reply);
        }
        if !builder.is_empty() {
            Self::propose_entry(g, builder, replies);
        }
    }

    fn propose_entry(g: &mut Group<S>, builder: EntryBuilder, replies: Vec<Reply<S>>) {
        match g.raw.propose(Vec::new(), builder.finish()) {
            Ok(()) => {
                g.stats.entries += 1;
                let index = g.raw.raft.raft_log.last_index();
                // Waiters at or past this index proposed entries our log no
                // longer has (it was overwritten while we followed): they
                // can never commit.
                while g.waiters.back().is_some_and(|w| w.index >= index) {
                    if let Some(w) = g.waiters.pop_back() {
                        for r in w.replies {
                            let _ = r.send(Err(RaftError::Dropped));
                        }
                    }
                }
                g.waiters.push_back(Waiter {
                    index,
                    term: g.raw.raft.term,
                    replies,
                });
            }
            Err(_) => {
                // Dropped by raft-rs, e.g. during a leadership transfer.
                let err = if g.raw.raft.lead_transferee.is_some() {
                    RaftError::Transferring
                } else {
                    RaftError::NotLeader(Self::leader_hint(g))
                };
                for r in replies {
                    let _ = r.send(Err(err.clone()));
                }
            }
        }
    }

    /// The leader a client should be sent to, if known.
    fn leader_hint(g: &Group<S>) -> Option<u64> {
        let l = g.raw.raft.leader_id;
        (l != 0 && l != g.raw.raft.id).then_some(l)
    }

    /// Reads queued at a leader that lost its role never get a read state:
    /// fail them so the client can retry at the new leader.
    fn lost_leadership(g: &mut Group<S>, leader: u64) {
        let hint = (leader != 0 && leader != g.raw.raft.id).then_some(leader);
        for (_, b) in g.reads_in_flight.drain() {
            for (_, r) in b.reads {
                let _ = r.send(Err(RaftError::NotLeader(hint)));
            }
        }
    }

    fn expire_reads(&self, inner: &mut Inner<S>) {
        let limit = self.cfg.tick * (self.cfg.election_ticks as u32) * 2;
        for g in &mut inner.groups {
            let stale: Vec<u64> = g
                .reads_in_flight
                .iter()
                .filter(|(_, b)| b.since.elapsed() > limit)
                .map(|(id, _)| *id)
                .collect();
            for id in stale {
                if let Some(b) = g.reads_in_flight.remove(&id) {
                    for (_, r) in b.reads {
                        let _ = r.send(Err(RaftError::Timeout));
                    }
                }
            }
        }
    }

    fn install_snapshot(
        g: &mut Group<S>,
        snap: raft::eraftpb::Snapshot,
        snap_dir: &Path,
        batch: &mut LogBatch,
    ) {
        let meta: SnapshotMetadata = snap.get_metadata().clone();
        let data = snap.data.clone();
        if let Err(e) = g.sm.restore(&data) {
            error!(group = g.id, "received snapshot does not restore: {e}");
            return;
        }
        let path = snapfile::path(snap_dir, g.id);
        if let Err(e) = snapfile::write_synced(&path, &snapfile::wrap(&data)) {
            error!(group = g.id, "writing snapshot {}: {e}", path.display());
        }
        info!(
            group = g.id,
            index = meta.index,
            bytes = data.len(),
            "installed snapshot"
        );
        g.applied = meta.index;
        g.applied_term = meta.term;
        g.stats.snapshots_installed += 1;
        // Entries this node proposed up to the snapshot have unknown fate.
        while g.waiters.front().is_some_and(|w| w.index <= meta.index) {
            if let Some(w) = g.waiters.pop_front() {
                for r in w.replies {
                    let _ = r.send(Err(RaftError::Dropped));
                }
            }
        }
        if let Err(e) = g.raw.mut_store().set_snapshot(meta, data, true, batch) {
            error!(group = g.id, "recording snapshot: {e}");
        }
    }

    /// A deposed leader's entries that a new leader overwrote: their
    /// index may never be reached again if no one writes to the shard, so
    /// answer their clients now (outcome unknown) instead of waiting.
    fn drop_overwritten_waiters(g: &mut Group<S>) {
        if g.waiters.is_empty() || g.raw.raft.state == StateRole::Leader {
            return;
        }
        let log = &g.raw.raft.raft_log;
        let applied = g.applied;
        let gone = |w: &Waiter<S>| {
            w.index > applied
                && (w.index > log.last_index() || log.term(w.index).ok() != Some(w.term))
        };
        let (dropped, keep): (Vec<_>, Vec<_>) = g.waiters.drain(..).partition(gone);
        g.waiters = keep.into();
        for w in dropped {
            for r in w.replies {
                let _ = r.send(Err(RaftError::Dropped));
            }
        }
    }

    fn serve_reads(g: &mut Group<S>) {
        if g.reads_ready.is_empty() {
            return;
        }
        let now = unix_ms();
        let applied = g.applied;
        let mut keep = Vec::new();
        for (index, batch) in std::mem::take(&mut g.reads_ready) {
            if index <= applied {
                for (cmd, r) in batch.reads {
                    let _ = r.send(Ok(g.sm.read(&cmd, now)));
                }
            } else {
                keep.push((index, batch));
            }
        }
        g.reads_ready = keep;
    }

    fn apply_entries(g: &mut Group<S>, entries: Vec<raft::eraftpb::Entry>) {
        for e in entries {
            if e.index <= g.applied {
                continue;
            }
            let mut outs = Vec::new();
            if e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty() {
                match entry::decode(&e.data) {
                    Ok((now_ms, seed, proposals)) => {
                        for (k, p) in proposals.iter().enumerate() {
                            let ctx = EntryCtx {
                                index: e.index,
                                term: e.term,
                                now_ms,
                                seed: entry::proposal_seed(seed, k),
                            };
                            outs.push(g.sm.apply(&ctx, p));
                        }
                    }
                    Err(err) => error!(group = g.id, index = e.index, "skipping entry: {err}"),
                }
            }
            g.applied = e.index;
            g.applied_term = e.term;
            while let Some(w) = g.waiters.front() {
                if w.index > e.index {
                    break;
                }
                let Some(w) = g.waiters.pop_front() else {
                    break;
                };
                if w.index == e.index && w.term == e.term && w.replies.len() == outs.len() {
                    for (r, out) in w.replies.into_iter().zip(outs.drain(..)) {
                        let _ = r.send(Ok(out));
                    }
                } else {
                    for r in w.replies {
                        let _ = r.send(Err(RaftError::Dropped));
                    }
                }
            }
        }
        g.raw.mut_store().applied(g.applied);
    }

    fn take_snapshot(&self, g: &mut Group<S>) {
        let image = g.sm.snapshot();
        let path = snapfile::path(&self.cfg.dir.join("snap"), g.id);
        if let Err(e) = snapfile::write_synced(&path, &snapfile::wrap(&image)) {
            error!(group = g.id, "writing snapshot {}: {e}", path.display());
            return;
        }
        let mut meta = SnapshotMetadata {
            index: g.applied,
            term: g.applied_term,
            ..Default::default()
        };
        meta.set_conf_state(g.raw.store().conf_state().clone());
        let mut batch = LogBatch::default();
        if let Err(e) = g
            .raw
            .mut_store()
            .set_snapshot(meta, Bytes::from(image), false, &mut batch)
        {
            error!(group = g.id, "recording snapshot: {e}");
            return;
        }
        if let Err(e) = self.engine.write(&mut batch, true) {
            error!(group = g.id, "compacting the log: {e}");
            return;
        }
        g.stats.snapshots_taken += 1;
        info!(
            group = g.id,
            index = g.applied,
            "snapshot taken, log compacted"
        );
    }

    /// Starts a graceful stop: every group this node leads is handed to a
    /// peer (one caught up if there is one, spread over them), and this
    /// node takes no leadership back, so the clients of its shards see a
    /// leadership transfer (TRYAGAIN, then MOVED) instead of waiting an
    /// election timeout after it exits, as etcd hands over on a graceful
    /// stop. Entries it proposed stay in its log and commit under the new
    /// leader; [`MultiRaft::handed_over`] says when all are answered.
    pub fn leave(&self) {
        if self.leaving.replace(true) {
            return;
        }
        self.hand_over(&mut self.inner.borrow_mut());
        // The transfers' messages leave with the next round.
        self.inbox.wake.notify_one();
    }

    /// Whether a node that [`leave`](MultiRaft::leave)s is done: it leads
    /// no group it has a peer to hand to (none may be left when the others
    /// are stopping too, or unreachable), and every client waiting on it
    /// for an entry it proposed before it stepped down was answered: it
    /// may exit without anyone waiting an election timeout or losing a
    /// reply.
    pub fn handed_over(&self) -> bool {
        let inner = self.inner.borrow();
        inner.groups.iter().all(|g| {
            let r = &g.raw.raft;
            if r.state == StateRole::Leader {
                r.lead_transferee.is_none() && self.successor(g).is_none()
            } else {
                g.waiters.is_empty() && g.proposals.is_empty()
            }
        })
    }

    /// The groups this node leads, each transferred to its
    /// [`successor`](MultiRaft::successor).
    fn hand_over(&self, inner: &mut Inner<S>) {
        for g in &mut inner.groups {
            let r = &g.raw.raft;
            if r.state != StateRole::Leader || r.lead_transferee.is_some() {
                continue;
            }
            if let Some(to) = self.successor(g) {
                info!(group = g.id, to, "handing leadership over before stopping");
                g.raw.transfer_leader(to);
            }
        }
    }

    /// Whether a leadership may go to `node`: it is connected and was
    /// heard within two election timeouts. A stopped (SIGSTOP) or hung
    /// process keeps its connections open; a transfer to it would stall
    /// the group's writes until raft-rs gives the transfer up, and be
    /// tried again on it.
    fn peer_is_live(&self, node: u64) -> bool {
        let window = self.cfg.tick * (self.cfg.election_ticks as u32) * 2;
        self.transport.heard_within(node, window)
    }

    /// Who takes over a group this node leads when it stops: a live peer
    /// ([`MultiRaft::peer_is_live`]) that is not stopping itself, one
    /// caught up with the commit index if there is one (chosen by group id
    /// among them, so the groups spread), else the furthest ahead (raft-rs
    /// brings it up to date before it hands over).
    fn successor(&self, g: &Group<S>) -> Option<u64> {
        let r = &g.raw.raft;
        let me = self.cfg.node_id;
        let mut peers: Vec<(u64, u64)> = r
            .prs()
            .iter()
            .filter(|(id, _)| {
                **id != me && self.peer_is_live(**id) && !self.transport.is_leaving(**id)
            })
            .map(|(id, p)| (*id, p.matched))
            .collect();
        peers.sort_unstable();
        let caught_up: Vec<u64> = peers
            .iter()
            .filter(|(_, matched)| *matched >= r.raft_log.committed)
            .map(|(id, _)| *id)
            .collect();
        if caught_up.is_empty() {
            peers
                .iter()
                .max_by_key(|(_, matched)| *matched)
                .map(|(id, _)| *id)
        } else {
            Some(caught_up[(g.id % caught_up.len() as u64) as usize])
        }
    }

    /// Moves leadership back to each group's preferred node when that node
    /// is caught up, so leaders stay spread evenly after a failover.
    fn rebalance(&self, inner: &mut Inner<S>) {
        for g in &mut inner.groups {
            let r = &g.raw.raft;
            if r.state != StateRole::Leader || g.preferred == r.id || r.lead_transferee.is_some() {
                continue;
            }
            let caught_up = r
                .prs()
                .get(g.preferred)
                // Not `recent_active`: with check-quorum raft-rs clears it
                // every election timeout, on the very tick this runs.
                .is_some_and(|p| p.matched >= r.raft_log.committed);
            if caught_up
                && self.peer_is_live(g.preferred)
                && !self.transport.is_leaving(g.preferred)
            {
                info!(
                    group = g.id,
                    to = g.preferred,
                    "transferring leadership to the preferred node"
                );
                g.raw.transfer_leader(g.preferred);
            }
        }
    }

    /// Sends a broadcast payload (PUBLISH) to every peer node.
    pub fn broadcast(&self, payload: Bytes) {
        self.transport.broadcast(payload);
    }
}
