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
            out.extend_from_slice(&(cmds.len() as u32).to_le_bytes());
            for args in cmds {
                out.extend_from_slice(&(args.len() as u32).to_le_bytes());
                for a in args {
                    put_bytes(out, a);
                }
            }
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
    }
}

/// Decodes a proposal; `None` for damaged bytes (never a panic).
pub fn decode(b: &[u8]) -> Option<Cmd> {
    let mut r = Reader { b };
    let cmd = match r.u8()? {
        TAG_COMMANDS => {
            let db = r.u32()? as usize;
            let multi = r.u8()? != 0;
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
            _ => Out::Reply(Reply::error("ERR command sent to the wrong group")),
        }
    }

    fn read(&self, cmd: &Cmd, now_ms: u64) -> Out {
        let NodeSm::Shard(s) = self else {
            return Out::Reply(Reply::error("ERR not a shard"));
        };
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
                s.store = kvasir_core::snapshot::decode(image).map_err(|e| e.to_string())?;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
