//! The replicated state machines of a cluster node: group 0 holds the
//! cluster map, every other group one shard's keyspace. A proposal is one
//! client command, one MULTI/EXEC block, or one batch of expiry deletions;
//! applying it runs the same handlers as the single-node server, with the
//! time and seed of the entry, on every replica.

use bytes::Bytes;
use kvasir_cluster::{ClusterMap, NodeInfo};
use kvasir_core::error::BlockOn;
use kvasir_core::table::{resolve, Handler};
use kvasir_core::{CmdError, Ctx, Store};
use kvasir_raft::{EntryCtx, StateMachine};
use kvasir_resp::Reply;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use tokio::sync::Notify;

/// What a proposal or read asks for.
#[derive(Clone, Debug)]
pub enum Cmd {
    /// Client commands run back to back; `multi` answers them as one
    /// array (EXEC) and never blocks.
    Commands {
        db: usize,
        cmds: Vec<Vec<Bytes>>,
        multi: bool,
    },
    /// Deletions picked by the leader's active expiry cycle: each key goes
    /// only if it is still expired at the entry's time.
    Expire { db: usize, keys: Vec<Bytes> },
    /// Group 0: a node announces where clients reach it.
    SetNodeAddr { node: u64, host: String, port: u16 },
    /// EXEC after WATCH: the block runs only if every watched key still has
    /// the digest the client saw when it watched it (checked when applied,
    /// identically on every replica); otherwise it answers a nil array.
    WatchedExec {
        db: usize,
        cmds: Vec<Vec<Bytes>>,
        watched: Vec<(Bytes, u64)>,
    },
    /// A read for WATCH: the digests of keys (see
    /// `kvasir_core::snapshot::watch_digest`), as an array of integers.
    WatchDigests { db: usize, keys: Vec<Bytes> },
}

/// The result of one proposal or read.
#[derive(Debug)]
pub enum Out {
    Reply(Reply),
    /// A blocking command found nothing: the session parks and retries
    /// when one of the keys is written (the notification is registered at
    /// apply time on the leader, so no write can slip in between).
    Block(Box<BlockOn>, Option<Rc<Notify>>),
}

/// Clients of this node blocked on keys: a write applied to one of the
/// keys wakes them (they then propose their command again).
#[derive(Default)]
pub struct WriteHooks {
    waiters: RefCell<HashMap<ShardKey, Vec<Rc<Notify>>>>,
}

/// (shard, db, key).
type ShardKey = (u64, usize, Bytes);

impl WriteHooks {
    /// One notification for any write to any of `keys`.
    pub fn watch(&self, shard: u64, db: usize, keys: &[Bytes]) -> Rc<Notify> {
        let n = Rc::new(Notify::new());
        let mut w = self.waiters.borrow_mut();
        for k in keys {
            w.entry((shard, db, k.clone())).or_default().push(n.clone());
        }
        n
    }

    fn is_active(&self) -> bool {
        !self.waiters.borrow().is_empty()
    }

    fn written(&self, shard: u64, db: usize, key: &Bytes) {
        if let Some(list) = self.waiters.borrow_mut().remove(&(shard, db, key.clone())) {
            for n in list {
                n.notify_one();
            }
        }
    }
}

pub struct MetaSm {
    pub map: ClusterMap,
}

pub struct ShardSm {
    pub id: u64,
    pub store: Store,
    pub hooks: Rc<WriteHooks>,
}

pub enum NodeSm {
    Meta(MetaSm),
    Shard(ShardSm),
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Some(h)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    }
    fn bytes(&mut self) -> Option<Bytes> {
        let n = self.u32()? as usize;
        self.take(n).map(Bytes::copy_from_slice)
    }
}

const TAG_COMMANDS: u8 = 1;
const TAG_EXPIRE: u8 = 2;
const TAG_NODE_ADDR: u8 = 3;
const TAG_WATCHED_EXEC: u8 = 4;
const TAG_WATCH_DIGESTS: u8 = 5;

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

pub fn encode(cmd: &Cmd, out: &mut Vec<u8>) {
    match cmd {
        Cmd::Commands { db, cmds, multi } => {
            out.push(TAG_COMMANDS);
            out.extend_from_slice(&(*db as u32).to_le_bytes());
            out.push(*multi as u8);
            put_cmds(out, cmds);
        }
        Cmd::Expire { db, keys } => {
            out.push(TAG_EXPIRE);
            out.extend_from_slice(&(*db as u32).to_le_bytes());
            out.extend_from_slice(&(keys.len() as u32).to_le_bytes());
            for k in keys {
                put_bytes(out, k);
            }
        }
        Cmd::SetNodeAddr { node, host, port } => {
            out.push(TAG_NODE_ADDR);
            out.extend_from_slice(&node.to_le_bytes());
            out.extend_from_slice(&port.to_le_bytes());
            put_bytes(out, host.as_bytes());
        }
        Cmd::WatchedExec { db, cmds, watched } => {
            out.push(TAG_WATCHED_EXEC);
            out.extend_from_slice(&(*db as u32).to_le_bytes());
            put_cmds(out, cmds);
            out.extend_from_slice(&(watched.len() as u32).to_le_bytes());
            for (key, digest) in watched {
                put_bytes(out, key);
                out.extend_from_slice(&digest.to_le_bytes());
            }
        }
        Cmd::WatchDigests { db, keys } => {
            out.push(TAG_WATCH_DIGESTS);
            out.extend_from_slice(&(*db as u32).to_le_bytes());
            out.extend_from_slice(&(keys.len() as u32).to_le_bytes());
            for k in keys {
                put_bytes(out, k);
            }
        }
    }
}

fn put_cmds(out: &mut Vec<u8>, cmds: &[Vec<Bytes>]) {
    out.extend_from_slice(&(cmds.len() as u32).to_le_bytes());
    for args in cmds {
        out.extend_from_slice(&(args.len() as u32).to_le_bytes());
        for a in args {
            put_bytes(out, a);
        }
    }
}

fn read_cmds(r: &mut Reader) -> Option<Vec<Vec<Bytes>>> {
    let n = r.u32()? as usize;
    let mut cmds = Vec::with_capacity(n.min(r.b.len() / 4));
    for _ in 0..n {
        let argc = r.u32()? as usize;
        let mut args = Vec::with_capacity(argc.min(r.b.len() / 4));
        for _ in 0..argc {
            args.push(r.bytes()?);
        }
        cmds.push(args);
    }
    Some(cmds)
}

/// Decodes a proposal; `None` for damaged bytes (never a panic).
pub fn decode(b: &[u8]) -> Option<Cmd> {
    let mut r = Reader { b };
    let cmd = match r.u8()? {
        TAG_COMMANDS => {
            let db = r.u32()? as usize;
            let multi = r.u8()? != 0;
            let cmds = read_cmds(&mut r)?;
            Cmd::Commands { db, cmds, multi }
        }
        TAG_EXPIRE => {
            let db = r.u32()? as usize;
            let n = r.u32()? as usize;
            let mut keys = Vec::with_capacity(n.min(r.b.len() / 4));
            for _ in 0..n {
                keys.push(r.bytes()?);
            }
            Cmd::Expire { db, keys }
        }
        TAG_NODE_ADDR => {
            let node = r.u64()?;
            let p = r.take(2)?;
            let port = u16::from_le_bytes([p[0], p[1]]);
            let host = String::from_utf8(r.bytes()?.to_vec()).ok()?;
            Cmd::SetNodeAddr { node, host, port }
        }
        TAG_WATCHED_EXEC => {
            let db = r.u32()? as usize;
            let cmds = read_cmds(&mut r)?;
            let n = r.u32()? as usize;
            let mut watched = Vec::with_capacity(n.min(r.b.len() / 12));
            for _ in 0..n {
                let key = r.bytes()?;
                watched.push((key, r.u64()?));
            }
            Cmd::WatchedExec { db, cmds, watched }
        }
        TAG_WATCH_DIGESTS => {
            let db = r.u32()? as usize;
            let n = r.u32()? as usize;
            let mut keys = Vec::with_capacity(n.min(r.b.len() / 4));
            for _ in 0..n {
                keys.push(r.bytes()?);
            }
            Cmd::WatchDigests { db, keys }
        }
        _ => return None,
    };
    r.b.is_empty().then_some(cmd)
}

impl ShardSm {
    fn run(&mut self, db: usize, cmds: &[Vec<Bytes>], multi: bool, ctx: &Ctx, leader: bool) -> Out {
        if db >= self.store.databases() {
            return Out::Reply(Reply::error("ERR DB index is out of range"));
        }
        let mut replies = Vec::with_capacity(cmds.len());
        for (i, args) in cmds.iter().enumerate() {
            let ctx = Ctx {
                now_ms: ctx.now_ms,
                seed: ctx.seed.wrapping_add(i as u64),
            };
            let result = match resolve(args) {
                Ok((spec, _)) => match spec.handler {
                    Handler::Write(f) => {
                        let r = f(&mut self.store, db, args, &ctx);
                        if r.is_ok() && self.hooks.is_active() {
                            for i in spec.keys_of(args) {
                                if let Some(k) = args.get(i) {
                                    self.hooks.written(self.id, db, k);
                                }
                            }
                        }
                        r
                    }
                    Handler::Read(f) => f(&self.store, db, args, &ctx),
                    _ => Err(kvasir_core::error::unknown_command(args)),
                },
                Err(e) => Err(e),
            };
            let reply = match result {
                Ok(r) => r,
                Err(CmdError::WouldBlock(on)) if multi => on.on_timeout,
                Err(CmdError::WouldBlock(on)) => {
                    let notify = leader.then(|| self.hooks.watch(self.id, db, &on.keys));
                    return Out::Block(on, notify);
                }
                Err(e) => e.to_reply(),
            };
            replies.push(reply);
        }
        if multi {
            Out::Reply(Reply::Array(replies))
        } else {
            Out::Reply(replies.pop().unwrap_or(Reply::Nil))
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

    fn apply(&mut self, ectx: &EntryCtx, proposal: &[u8], is_leader: bool) -> Out {
        let Some(cmd) = decode(proposal) else {
            return Out::Reply(Reply::error("ERR damaged log entry"));
        };
        let ctx = Ctx {
            now_ms: ectx.now_ms,
            seed: ectx.seed,
        };
        match (self, cmd) {
            (NodeSm::Shard(s), Cmd::Commands { db, cmds, multi }) => {
                s.run(db, &cmds, multi, &ctx, is_leader)
            }
            (NodeSm::Shard(s), Cmd::Expire { db, keys }) => {
                if db < s.store.databases() {
                    s.store.apply_expired(db, &keys, &ctx);
                }
                Out::Reply(Reply::ok())
            }
            (NodeSm::Meta(m), Cmd::SetNodeAddr { node, host, port }) => {
                m.set_node_addr(node, host, port)
            }
            (NodeSm::Shard(s), Cmd::WatchedExec { db, cmds, watched }) => {
                let changed = watched.iter().any(|(key, seen)| {
                    kvasir_core::snapshot::watch_digest(&s.store, db, key, ctx.now_ms) != *seen
                });
                if changed {
                    Out::Reply(Reply::NilArray)
                } else {
                    s.run(db, &cmds, true, &ctx, is_leader)
                }
            }
            _ => Out::Reply(Reply::error("ERR command sent to the wrong group")),
        }
    }

    fn read(&self, cmd: &Cmd, now_ms: u64) -> Out {
        let NodeSm::Shard(s) = self else {
            return Out::Reply(Reply::error("ERR not a shard"));
        };
        if let Cmd::WatchDigests { db, keys } = cmd {
            return Out::Reply(Reply::Array(
                keys.iter()
                    .map(|k| {
                        let d = kvasir_core::snapshot::watch_digest(&s.store, *db, k, now_ms);
                        // Carried as the integer's bits.
                        Reply::Int(d as i64)
                    })
                    .collect(),
            ));
        }
        let Cmd::Commands { db, cmds, .. } = cmd else {
            return Out::Reply(Reply::error("ERR not a read"));
        };
        let ctx = Ctx {
            now_ms,
            seed: now_ms,
        };
        let Some(args) = cmds.first() else {
            return Out::Reply(Reply::Nil);
        };
        if *db >= s.store.databases() {
            return Out::Reply(Reply::error("ERR DB index is out of range"));
        }
        Out::Reply(
            s.store
                .read(*db, args, &ctx)
                .unwrap_or_else(|e| e.to_reply()),
        )
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
                // Not part of the image: a shard store is always in cluster mode.
                store.cluster_mode = true;
                s.store = store;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard() -> NodeSm {
        NodeSm::Shard(ShardSm {
            id: 1,
            store: Store::new(1),
            hooks: Rc::new(WriteHooks::default()),
        })
    }

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn apply(sm: &mut NodeSm, now_ms: u64, cmd: &Cmd) -> Reply {
        let mut b = Vec::new();
        encode(cmd, &mut b);
        let ectx = EntryCtx {
            index: 1,
            term: 1,
            now_ms,
            seed: 7,
        };
        match sm.apply(&ectx, &b, true) {
            Out::Reply(r) => r,
            Out::Block(..) => panic!("blocked"),
        }
    }

    fn digests(sm: &NodeSm, now_ms: u64, keys: &[&str]) -> Vec<(Bytes, u64)> {
        let cmd = Cmd::WatchDigests {
            db: 0,
            keys: args(keys),
        };
        let Out::Reply(Reply::Array(ds)) = sm.read(&cmd, now_ms) else {
            panic!("digests")
        };
        args(keys)
            .into_iter()
            .zip(ds)
            .map(|(k, d)| match d {
                Reply::Int(d) => (k, d as u64),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn exec(watched: Vec<(Bytes, u64)>) -> Cmd {
        Cmd::WatchedExec {
            db: 0,
            cmds: vec![args(&["INCR", "n"]), args(&["GET", "n"])],
            watched,
        }
    }

    fn set(words: &[&str]) -> Cmd {
        Cmd::Commands {
            db: 0,
            cmds: vec![args(words)],
            multi: false,
        }
    }

    #[test]
    fn watched_exec_runs_only_if_the_watched_keys_are_unchanged() {
        let mut a = shard();
        apply(&mut a, 1000, &set(&["SET", "n", "1"]));
        let seen = digests(&a, 1000, &["n", "missing"]);
        assert_ne!(seen[0].1, 0);
        assert_eq!(seen[1].1, 0, "a missing key digests to 0");
        // Unchanged: the block runs.
        assert_eq!(
            apply(&mut a, 1001, &exec(seen.clone())),
            Reply::Array(vec![Reply::Int(2), Reply::bulk_str("2")])
        );
        // The block itself changed n: the old digests no longer hold.
        assert_eq!(apply(&mut a, 1002, &exec(seen)), Reply::NilArray);
        // A write between WATCH and EXEC, even back to the same type.
        let seen = digests(&a, 1003, &["n"]);
        apply(&mut a, 1004, &set(&["SET", "n", "9"]));
        assert_eq!(apply(&mut a, 1005, &exec(seen)), Reply::NilArray);
        // A key created between WATCH and EXEC.
        let seen = digests(&a, 1006, &["fresh"]);
        apply(&mut a, 1007, &set(&["SET", "fresh", "x"]));
        assert_eq!(apply(&mut a, 1008, &exec(seen)), Reply::NilArray);
        // A TTL change is a change.
        let seen = digests(&a, 1009, &["n"]);
        apply(&mut a, 1010, &set(&["PEXPIRE", "n", "100000"]));
        assert_eq!(apply(&mut a, 1011, &exec(seen)), Reply::NilArray);
    }

    #[test]
    fn watched_key_expiring_before_exec_aborts_on_every_replica() {
        let (mut a, mut b) = (shard(), shard());
        for sm in [&mut a, &mut b] {
            apply(sm, 1000, &set(&["SET", "n", "5", "PX", "100"]));
        }
        // Watched while alive; the EXEC entry is stamped after the expiry.
        let seen = digests(&a, 1050, &["n"]);
        for sm in [&mut a, &mut b] {
            assert_eq!(apply(sm, 1200, &exec(seen.clone())), Reply::NilArray);
        }
        // A key already expired when watched stays "missing": no abort.
        let seen = digests(&a, 1300, &["n"]);
        assert_eq!(seen[0].1, 0);
        for sm in [&mut a, &mut b] {
            assert_eq!(
                apply(sm, 1400, &exec(seen.clone())),
                Reply::Array(vec![Reply::Int(1), Reply::bulk_str("1")])
            );
        }
        assert_eq!(a.snapshot(), b.snapshot());
    }

    #[test]
    fn proposals_round_trip_and_damage_is_refused() {
        let cmds = [
            Cmd::Commands {
                db: 0,
                cmds: vec![vec![Bytes::from("SET"), Bytes::from("k"), Bytes::from("v")]],
                multi: true,
            },
            Cmd::Expire {
                db: 0,
                keys: vec![Bytes::from("a"), Bytes::from("b")],
            },
            Cmd::SetNodeAddr {
                node: 2,
                host: "127.0.0.1".into(),
                port: 7002,
            },
            Cmd::WatchedExec {
                db: 3,
                cmds: vec![vec![Bytes::from("INCR"), Bytes::from("k")]],
                watched: vec![(Bytes::from("k"), u64::MAX), (Bytes::from("j"), 0)],
            },
            Cmd::WatchDigests {
                db: 1,
                keys: vec![Bytes::from("k"), Bytes::new()],
            },
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
}
