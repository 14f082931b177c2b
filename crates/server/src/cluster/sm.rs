//! The replicated state machines of a cluster node: group 0 holds the
//! cluster map, every other group one shard's keyspace. A proposal is one
//! client command, one MULTI/EXEC block, or one batch of expiry deletions;
//! applying it runs the same handlers as the single-node server, with the
//! time and seed of the entry, on every replica.

use crate::blocking::SharedBlocking;
use bytes::Bytes;
use kvasir_cluster::{ClusterMap, NodeInfo};
use kvasir_core::error::BlockOn;
use kvasir_core::machine::{self, Applied, ShardCmd, Written};
use kvasir_core::{Ctx, Store};
use kvasir_raft::{EntryCtx, StateMachine};
use kvasir_resp::Reply;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed,
    Ordering::Release,
};
use std::sync::Arc;
use tokio::sync::{mpsc, Notify};

/// What a proposal or read asks of a group: a shard command (see
/// [`kvasir_core::machine`]) or, in group 0, a cluster-map change.
#[derive(Clone, Debug)]
pub enum Cmd {
    Shard(ShardCmd),
    /// Group 0: a node announces where clients reach it.
    SetNodeAddr {
        node: u64,
        host: String,
        port: u16,
    },
}

impl From<ShardCmd> for Cmd {
    fn from(c: ShardCmd) -> Cmd {
        Cmd::Shard(c)
    }
}

/// The result of one proposal or read.
#[derive(Debug)]
pub enum Out {
    Reply(Reply),
    /// A blocking command found nothing: its waiter (registered by the
    /// node that proposed it) stays parked until a write to one of the keys.
    Block(Box<BlockOn>),
}

/// What a write applied on this node must reach outside the store:
/// clients watching its keys, and clients blocked on them.
pub struct WriteHooks {
    watches: Rc<RefCell<crate::watch::Watches>>,
    blocking: SharedBlocking,
    /// Client-side caching: this node's tracking connections hear of every
    /// write it applies, leader or follower (node-local, as in Redis
    /// Cluster, where each node invalidates for its own clients).
    tracking: crate::tracking::SharedTracking,
    /// (shard, db, key) written while clients are parked on them, for the
    /// serving task (`cluster::blocked`): proposals cannot be made from
    /// inside an apply.
    ready: RefCell<Vec<(u64, usize, Bytes)>>,
    pub ready_notify: Notify,
    /// notify-keyspace-events (class flags): every shard store of the node
    /// takes it before an apply, on whichever thread. Local configuration,
    /// not replicated.
    pub notify: Arc<AtomicU32>,
    /// Whether a client of this node watches, tracks or waits on keys:
    /// shard threads send the keys they write only while it is set (see
    /// [`WriteHooks::refresh_keys_wanted`]).
    pub keys_wanted: Arc<AtomicBool>,
    /// Keyspace events applied on this node, by shard, for the publishing
    /// task (`cluster::publish_loop`), which publishes those of the shards
    /// this node leads.
    events: RefCell<Vec<(u64, kvasir_core::notify::Event)>>,
    pub events_notify: Notify,
}

impl WriteHooks {
    pub fn new(
        watches: Rc<RefCell<crate::watch::Watches>>,
        blocking: SharedBlocking,
        tracking: crate::tracking::SharedTracking,
    ) -> WriteHooks {
        WriteHooks {
            watches,
            blocking,
            tracking,
            ready: RefCell::default(),
            ready_notify: Notify::new(),
            notify: Arc::default(),
            keys_wanted: Arc::default(),
            events: RefCell::default(),
            events_notify: Notify::new(),
        }
    }

    /// A write applied on this node (leader or follower): watchers of its
    /// keys become dirty, clients blocked on them are to be served.
    pub fn after_write(&self, shard: u64, db: usize, written: Written) {
        if let Written::Events(events) = written {
            let mut queued = self.events.borrow_mut();
            queued.extend(events.iter().map(|e| (shard, e.clone())));
            self.events_notify.notify_one();
            return;
        }
        crate::events::touch_watchers(&self.watches.borrow(), db, written);
        crate::events::invalidate_tracked(&self.tracking, written);
        let Written::Command(spec, args) = written else {
            return;
        };
        let mut blocking = self.blocking.borrow_mut();
        if blocking.is_empty() {
            return;
        }
        for i in spec.keys_of(args) {
            if let Some(k) = args.get(i) {
                if blocking.note_write(shard, db, k) {
                    self.ready.borrow_mut().push((shard, db, k.clone()));
                    self.ready_notify.notify_one();
                }
            }
        }
    }

    /// Sets [`WriteHooks::keys_wanted`] from the registries. The main
    /// thread calls it before it hands a shard thread a job and when a
    /// client starts tracking: a client registers before the command that
    /// makes it care is sent (WATCH's digest read, a blocking command's
    /// proposal, a tracked read), and the job's channel orders the flag
    /// before every write the shard thread applies after the job. Only
    /// this thread registers, so a flag it clears stays right until it
    /// registers again.
    pub fn refresh_keys_wanted(&self) {
        let wanted = !self.watches.borrow().is_empty()
            || !self.tracking.borrow().is_idle()
            || !self.blocking.borrow().is_empty();
        if self.keys_wanted.load(Relaxed) != wanted {
            self.keys_wanted.store(wanted, Release);
        }
    }

    /// The keyspace events applied since the last call, by shard.
    pub fn take_events(&self) -> Vec<(u64, kvasir_core::notify::Event)> {
        std::mem::take(&mut self.events.borrow_mut())
    }

    /// The keys written since the last call that have parked waiters.
    pub fn take_ready(&self) -> Vec<(u64, usize, Bytes)> {
        std::mem::take(&mut self.ready.borrow_mut())
    }
}

pub struct MetaSm {
    pub map: ClusterMap,
}

/// Where a shard's applies report their writes: the hooks themselves on
/// the main thread, or the channel to them from a shard thread (one
/// ordered stream per thread, drained before a reply from that thread is
/// used, so a client sees the effects of a write it was answered for).
pub enum HookSink {
    Local(Rc<WriteHooks>),
    Lane {
        events: mpsc::UnboundedSender<LaneWrite>,
        notify: Arc<AtomicU32>,
        keys_wanted: Arc<AtomicBool>,
    },
}

/// A write applied on a shard thread, for the main thread's hooks.
pub struct LaneWrite {
    pub shard: u64,
    pub db: usize,
    pub written: OwnedWritten,
}

/// [`Written`] with its keys owned, to cross threads.
pub enum OwnedWritten {
    Command(&'static kvasir_core::CommandSpec, Vec<Bytes>),
    Removed(Vec<Bytes>),
    Events(Vec<kvasir_core::notify::Event>),
}

impl OwnedWritten {
    fn of(w: Written) -> OwnedWritten {
        match w {
            Written::Command(spec, args) => OwnedWritten::Command(spec, args.to_vec()),
            Written::Removed(keys) => OwnedWritten::Removed(keys.to_vec()),
            Written::Events(events) => OwnedWritten::Events(events.to_vec()),
        }
    }

    pub fn as_written(&self) -> Written<'_> {
        match self {
            OwnedWritten::Command(spec, args) => Written::Command(spec, args),
            OwnedWritten::Removed(keys) => Written::Removed(keys),
            OwnedWritten::Events(events) => Written::Events(events),
        }
    }
}

impl HookSink {
    fn notify_flags(&self) -> u32 {
        match self {
            HookSink::Local(h) => h.notify.load(Relaxed),
            HookSink::Lane { notify, .. } => notify.load(Relaxed),
        }
    }

    fn after_write(&self, shard: u64, db: usize, written: Written) {
        match self {
            HookSink::Local(h) => h.after_write(shard, db, written),
            HookSink::Lane {
                events,
                keys_wanted,
                ..
            } => {
                // Keyspace events are only made when notify-keyspace-events
                // asks for them; written keys only matter to watchers,
                // trackers and waiters, and nothing else of the main
                // thread reads them.
                let is_events = matches!(written, Written::Events(_));
                if !is_events && !keys_wanted.load(Acquire) {
                    return;
                }
                let _ = events.send(LaneWrite {
                    shard,
                    db,
                    written: OwnedWritten::of(written),
                });
            }
        }
    }
}

/// A shard's key counts in database 0, its expired and evicted keys and its
/// keyspace hits and misses after its last apply or read, for INFO from
/// any thread.
#[derive(Default, Debug)]
pub struct ShardCounts {
    pub keys: AtomicUsize,
    pub expires: AtomicUsize,
    pub expired: AtomicU64,
    pub evicted: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
}

pub struct ShardSm {
    pub id: u64,
    pub store: Store,
    pub hooks: HookSink,
    pub counts: Arc<ShardCounts>,
}

// One per group, built once and never moved on the request path: boxing
// the shard would add an indirection to every apply for nothing.
#[allow(clippy::large_enum_variant)]
pub enum NodeSm {
    Meta(MetaSm),
    Shard(ShardSm),
}

pub fn encode(cmd: &Cmd, out: &mut Vec<u8>) {
    match cmd {
        Cmd::Shard(c) => machine::encode(c, out),
        Cmd::SetNodeAddr { node, host, port } => {
            out.push(machine::TAG_RESERVED_META);
            out.extend_from_slice(&node.to_le_bytes());
            out.extend_from_slice(&port.to_le_bytes());
            machine::put_bytes(out, host.as_bytes());
        }
    }
}

/// Decodes a proposal; `None` for damaged bytes (never a panic).
pub fn decode(b: &[u8]) -> Option<Cmd> {
    if b.first() != Some(&machine::TAG_RESERVED_META) {
        return machine::decode(b).map(Cmd::Shard);
    }
    let mut r = machine::Reader { b: &b[1..] };
    let node = r.u64()?;
    let p = r.take(2)?;
    let port = u16::from_le_bytes([p[0], p[1]]);
    let host = String::from_utf8(r.bytes()?.to_vec()).ok()?;
    r.b.is_empty()
        .then_some(Cmd::SetNodeAddr { node, host, port })
}

impl ShardSm {
    /// A shard replica with an empty store in cluster mode.
    pub fn new(id: u64, hooks: HookSink, counts: Arc<ShardCounts>) -> ShardSm {
        // Encoding thresholds are replicated state: every replica starts
        // from the same ones (Redis's defaults), whatever its config says.
        let mut store = Store::new(1);
        store.set_cluster_mode(kvasir_cluster::key_slot);
        ShardSm {
            id,
            store,
            hooks,
            counts,
        }
    }

    fn record_counts(&self) {
        let db = self.store.db(0);
        self.counts.keys.store(db.len(), Relaxed);
        self.counts.expires.store(db.expires_count(), Relaxed);
        let stats = &self.store.stats;
        self.counts.expired.store(stats.expired_keys, Relaxed);
        self.counts.evicted.store(stats.evicted_keys, Relaxed);
        self.record_lookups();
    }

    fn record_lookups(&self) {
        let stats = &self.store.stats;
        self.counts.hits.store(stats.keyspace_hits.get(), Relaxed);
        self.counts
            .misses
            .store(stats.keyspace_misses.get(), Relaxed);
    }

    fn apply(&mut self, cmd: &ShardCmd, ctx: &Ctx) -> Out {
        let (id, hooks) = (self.id, &self.hooks);
        self.store.notify = hooks.notify_flags();
        let applied = machine::apply(&mut self.store, cmd, ctx, |db, written| {
            hooks.after_write(id, db, written)
        });
        self.record_counts();
        match applied {
            Applied::Reply(r) => Out::Reply(r),
            Applied::Block(on) => Out::Block(on),
        }
    }
}

impl MetaSm {
    fn set_node_addr(&mut self, node: u64, host: String, port: u16) -> Out {
        let mut nodes = self.map.nodes.clone();
        let Some(n) = nodes.iter_mut().find(|n| n.id == node) else {
            return Out::Reply(Reply::error("ERR unknown node"));
        };
        if n.client_host == host && n.client_port == port {
            return Out::Reply(Reply::ok());
        }
        *n = NodeInfo {
            client_host: host,
            client_port: port,
            ..n.clone()
        };
        match ClusterMap::new(
            self.map.cluster_id,
            self.map.epoch + 1,
            nodes,
            self.map.shards.clone(),
        ) {
            Ok(m) => {
                self.map = m;
                Out::Reply(Reply::ok())
            }
            Err(e) => Out::Reply(Reply::error(format!("ERR {e}"))),
        }
    }
}

impl StateMachine for NodeSm {
    type Cmd = Cmd;
    type Out = Out;

    fn encode(cmd: &Cmd, out: &mut Vec<u8>) {
        encode(cmd, out)
    }

    fn apply(&mut self, ectx: &EntryCtx, proposal: &[u8]) -> Out {
        let Some(cmd) = decode(proposal) else {
            return Out::Reply(Reply::error("ERR damaged log entry"));
        };
        let ctx = Ctx {
            now_ms: ectx.now_ms,
            seed: ectx.seed,
        };
        match (self, cmd) {
            (NodeSm::Shard(s), Cmd::Shard(c)) => s.apply(&c, &ctx),
            (NodeSm::Meta(m), Cmd::SetNodeAddr { node, host, port }) => {
                m.set_node_addr(node, host, port)
            }
            _ => Out::Reply(Reply::error("ERR command sent to the wrong group")),
        }
    }

    fn read(&self, cmd: &Cmd, now_ms: u64) -> Out {
        match (self, cmd) {
            (NodeSm::Shard(s), Cmd::Shard(c)) => {
                let reply = machine::read(&s.store, c, now_ms);
                s.record_lookups();
                Out::Reply(reply)
            }
            _ => Out::Reply(Reply::error("ERR not a shard")),
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        match self {
            NodeSm::Meta(m) => m.map.encode(),
            NodeSm::Shard(s) => {
                let mut out = Vec::new();
                kvasir_core::snapshot::encode(&s.store, &mut out);
                out
            }
        }
    }

    fn restore(&mut self, image: &[u8]) -> Result<(), String> {
        match self {
            NodeSm::Meta(m) => {
                m.map = ClusterMap::decode(image)?;
                Ok(())
            }
            NodeSm::Shard(s) => {
                let mut store = kvasir_core::snapshot::decode(image).map_err(|e| e.to_string())?;
                // Not part of the image: a shard store is always in cluster
                // mode (this also counts the restored keys per slot).
                store.set_cluster_mode(kvasir_cluster::key_slot);
                s.store = store;
                s.record_counts();
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocking::AfterBlock;

    #[test]
    fn group_commands_round_trip_and_damage_is_refused() {
        let cmds = [
            Cmd::SetNodeAddr {
                node: 2,
                host: "127.0.0.1".into(),
                port: 7002,
            },
            Cmd::Shard(ShardCmd::Expire {
                db: 0,
                keys: vec![Bytes::from("a")],
            }),
        ];
        for c in &cmds {
            let mut b = Vec::new();
            encode(c, &mut b);
            let back = decode(&b).expect("round trip");
            assert_eq!(format!("{back:?}"), format!("{c:?}"));
            for cut in 0..b.len() {
                assert!(decode(&b[..cut]).is_none());
            }
        }
    }

    /// A replica that takes a snapshot instead of the log counts the
    /// restored keys per slot (CLUSTER COUNTKEYSINSLOT reads the count).
    #[test]
    fn a_restored_shard_counts_and_lists_its_keys_per_slot() {
        use kvasir_core::keyspace::Keyspace;
        let hooks = || {
            let clients = Rc::default();
            let tracking = Rc::new(RefCell::new(crate::tracking::Tracking::new(clients)));
            Rc::new(WriteHooks::new(Rc::default(), Rc::default(), tracking))
        };
        let mut first = ShardSm::new(1, HookSink::Local(hooks()), Arc::default());
        let ctx = Ctx { now_ms: 1, seed: 1 };
        for k in ["{a}1", "{a}2", "{a}3", "{b}1", "x"] {
            let set = ShardCmd::Commands {
                db: 0,
                cmds: vec![vec![Bytes::from("SET"), Bytes::from(k), Bytes::from("v")]],
                multi: false,
            };
            first.apply(&set, &ctx);
        }
        let image = NodeSm::Shard(first).snapshot();
        let mut second = NodeSm::Shard(ShardSm::new(1, HookSink::Local(hooks()), Arc::default()));
        second.restore(&image).expect("restore");
        let NodeSm::Shard(s) = &second else {
            unreachable!()
        };
        let slot = |k: &str| kvasir_cluster::key_slot(k.as_bytes());
        assert_eq!(s.store.keyspace().keys_in_slot(slot("{a}")), Some(3));
        assert_eq!(s.store.keyspace().keys_in_slot(slot("{b}")), Some(1));
        assert_eq!(s.store.keyspace().keys_in_slot(slot("x")), Some(1));
        let mut keys = s
            .store
            .keyspace()
            .slot_keys(slot("{a}"), 10)
            .expect("indexed");
        keys.sort();
        assert_eq!(keys, [&b"{a}1"[..], b"{a}2", b"{a}3"]);
        assert_eq!(
            s.store
                .keyspace()
                .slot_keys(slot("{a}"), 2)
                .map(|k| k.len()),
            Some(2)
        );
    }

    #[test]
    fn writes_to_keys_with_parked_waiters_are_queued_for_serving() {
        let blocking: SharedBlocking = Rc::default();
        let clients = Rc::default();
        let tracking = Rc::new(RefCell::new(crate::tracking::Tracking::new(clients)));
        let hooks = Rc::new(WriteHooks::new(Rc::default(), blocking.clone(), tracking));
        let mut sm = ShardSm::new(1, HookSink::Local(hooks.clone()), Arc::default());
        let ctx = Ctx { now_ms: 1, seed: 1 };
        let cmd = |words: &[&str]| ShardCmd::Commands {
            db: 0,
            cmds: vec![words
                .iter()
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect()],
            multi: false,
        };
        let Out::Block(on) = sm.apply(&cmd(&["BLPOP", "l", "0"]), &ctx) else {
            panic!("an empty list blocks")
        };
        let spec = kvasir_core::lookup(b"blpop").expect("blpop");
        let (id, _rx) = blocking
            .borrow_mut()
            .park(1, 0, spec, vec![], on.keys.clone(), None);
        // In flight: a write marks it for a rerun, nothing to serve yet.
        sm.apply(&cmd(&["RPUSH", "l", "a"]), &ctx);
        assert!(hooks.take_ready().is_empty());
        let (next, _) =
            blocking
                .borrow_mut()
                .blocked(id, on.keys.clone(), None, on.on_timeout.clone());
        assert!(matches!(next, AfterBlock::Retry));
        let (next, _) = blocking
            .borrow_mut()
            .blocked(id, on.keys, None, on.on_timeout);
        assert!(matches!(next, AfterBlock::Parked));
        // Parked now: a write to another key serves nobody, one to l does.
        sm.apply(&cmd(&["SET", "other", "1"]), &ctx);
        assert!(hooks.take_ready().is_empty());
        sm.apply(&cmd(&["RPUSH", "l", "b"]), &ctx);
        assert_eq!(hooks.take_ready(), vec![(1, 0, Bytes::from("l"))]);
    }
}
