//! The session side of cluster mode: routing keyed commands to their
//! shard (MOVED, CROSSSLOT, CLUSTERDOWN), commands without keys that act on
//! the shards this node leads (DBSIZE, KEYS, SCAN, FLUSHALL...), EXEC as
//! one Raft proposal, and the CLUSTER command family.

use super::sm::{Cmd, Out};
use super::{raft_error_reply, ClusterNode, Route};
use crate::session::{Outcome, PendingOp, Session};
use bytes::Bytes;
use kvasir_cluster::reply as creply;
use kvasir_cluster::{command_slot, key_slot, SLOTS};
use kvasir_core::args::parse_i64;
use kvasir_core::table::{help_reply, Handler};
use kvasir_core::{CommandSpec, Ctx};
use kvasir_resp::Reply;
use std::rc::Rc;

fn now_ctx() -> Ctx {
    let now = crate::shard::unix_ms();
    Ctx {
        now_ms: now,
        seed: now,
    }
}

/// Runs a keyspace command (Write or Read handler) in cluster mode.
pub fn dispatch(
    s: &mut Session,
    node: &Rc<ClusterNode>,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Outcome {
    let write = matches!(spec.handler, Handler::Write(_));
    let slot = match command_slot(spec, args) {
        Err(e) => return e.reply().into(),
        Ok(slot) => slot,
    };
    let Some(slot) = slot else {
        return keyless(s, node, spec, args);
    };
    match node.route(slot, write, s.readonly) {
        Route::Leader(shard) => {
            let cmd = Cmd::Commands {
                db: s.db,
                cmds: vec![args.to_vec()],
                multi: false,
            };
            let rx = if write {
                node.propose(shard, &cmd)
            } else {
                node.read(shard, cmd)
            };
            let blocking = spec.flags.contains(kvasir_core::table::Flags::BLOCKING);
            Outcome::Pending(Box::new(PendingOp {
                rxs: vec![rx],
                slot: Some(slot),
                shard,
                db: s.db,
                write,
                blocking,
                args: blocking.then(|| args.to_vec()),
            }))
        }
        Route::LocalReplica(shard) => node
            .with_store(shard, |store| {
                store
                    .read(s.db, args, &now_ctx())
                    .unwrap_or_else(|e| e.to_reply())
            })
            // route() only picks a replica this node holds.
            .unwrap_or_else(kvasir_cluster::route::try_again)
            .into(),
        Route::Redirect(reply) => reply.into(),
    }
}

/// Commands without keys act on the shards this node leads, as a Redis
/// Cluster master answers for its own slots.
fn keyless(
    s: &mut Session,
    node: &Rc<ClusterNode>,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Outcome {
    let led = node.led_shards();
    match spec.name {
        "dbsize" => {
            let n: usize = led
                .iter()
                .filter_map(|&sh| node.with_store(sh, |st| st.db(s.db).len()))
                .sum();
            Reply::Int(n as i64).into()
        }
        "keys" => {
            let mut all = Vec::new();
            for sh in led {
                let r = node.with_store(sh, |st| st.read(s.db, args, &now_ctx()));
                match r {
                    Some(Ok(Reply::Array(items))) => all.extend(items),
                    Some(Ok(Reply::BulkArray(buf, ends))) => {
                        let mut start = 0;
                        for end in ends {
                            all.push(Reply::Bulk(buf.slice(start..end)));
                            start = end;
                        }
                    }
                    Some(Err(e)) => return e.to_reply().into(),
                    _ => {}
                }
            }
            Reply::Array(all).into()
        }
        "randomkey" => {
            for sh in led {
                if let Some(Ok(r)) = node.with_store(sh, |st| st.read(s.db, args, &now_ctx())) {
                    if !matches!(r, Reply::Nil) {
                        return r.into();
                    }
                }
            }
            Reply::Nil.into()
        }
        "scan" => scan(s, node, &led, args),
        "flushall" | "flushdb" => {
            let rxs = led
                .iter()
                .map(|&sh| {
                    node.propose(
                        sh,
                        &Cmd::Commands {
                            db: s.db,
                            cmds: vec![args.to_vec()],
                            multi: false,
                        },
                    )
                })
                .collect();
            Outcome::Pending(Box::new(PendingOp {
                rxs,
                slot: None,
                shard: 0,
                db: s.db,
                write: true,
                blocking: false,
                args: None,
            }))
        }
        name => Reply::error(format!("ERR '{name}' is not supported in cluster mode")).into(),
    }
}

/// SCAN over the shards this node leads: the cursor's top 16 bits are the
/// position in that list, the rest the shard's own cursor.
fn scan(s: &Session, node: &ClusterNode, led: &[u64], args: &[Bytes]) -> Outcome {
    let cursor = match kvasir_core::args::parse_cursor(&args[1]) {
        Ok(c) => c,
        Err(e) => return e.to_reply().into(),
    };
    let mut pos = (cursor >> 48) as usize;
    let mut inner = cursor & ((1 << 48) - 1);
    let mut keys = Vec::new();
    while pos < led.len() {
        let mut a = args.to_vec();
        a[1] = Bytes::from(inner.to_string());
        let r = node.with_store(led[pos], |st| st.read(s.db, &a, &now_ctx()));
        match r {
            Some(Ok(Reply::Array(mut parts))) if parts.len() == 2 => {
                let next = match &parts[0] {
                    Reply::Bulk(b) => std::str::from_utf8(b)
                        .ok()
                        .and_then(|t| t.parse::<u64>().ok())
                        .unwrap_or(0),
                    _ => 0,
                };
                if let Reply::Array(found) = parts.pop().unwrap_or(Reply::Nil) {
                    keys.extend(found);
                }
                if next != 0 {
                    let c = ((pos as u64) << 48) | next;
                    return Reply::Array(vec![
                        Reply::Bulk(Bytes::from(c.to_string())),
                        Reply::Array(keys),
                    ])
                    .into();
                }
                pos += 1;
                inner = 0;
                if !keys.is_empty() {
                    break;
                }
            }
            Some(Err(e)) => return e.to_reply().into(),
            _ => pos += 1,
        }
    }
    let next = if pos < led.len() {
        (pos as u64) << 48
    } else {
        0
    };
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(next.to_string())),
        Reply::Array(keys),
    ])
    .into()
}

/// EXEC in cluster mode: every queued command must hash to one slot; the
/// block is one proposal, applied atomically on every replica.
pub fn exec(s: &mut Session, node: &Rc<ClusterNode>) -> Outcome {
    let queue = match crate::transaction::take_queue(s) {
        Ok(q) => q,
        Err(reply) => return reply.into(),
    };
    let mut slot = None;
    for (spec, args) in &queue {
        if !matches!(spec.handler, Handler::Write(_) | Handler::Read(_)) {
            return Reply::error(format!(
                "ERR '{}' inside MULTI is not supported in cluster mode",
                spec.name
            ))
            .into();
        }
        match command_slot(spec, args) {
            Err(e) => return e.reply().into(),
            Ok(None) => {}
            Ok(Some(sl)) if slot.is_some_and(|x| x != sl) => {
                return kvasir_cluster::RouteError::CrossSlot.reply().into()
            }
            Ok(Some(sl)) => slot = Some(sl),
        }
    }
    let Some(slot) = slot else {
        return Reply::error("ERR a transaction in cluster mode needs at least one key").into();
    };
    match node.route(slot, true, false) {
        Route::Leader(shard) => {
            let cmd = Cmd::Commands {
                db: s.db,
                cmds: queue.into_iter().map(|(_, a)| a).collect(),
                multi: true,
            };
            Outcome::Pending(Box::new(PendingOp {
                rxs: vec![node.propose(shard, &cmd)],
                slot: Some(slot),
                shard,
                db: s.db,
                write: true,
                blocking: false,
                args: None,
            }))
        }
        Route::LocalReplica(_) => kvasir_cluster::route::try_again().into(),
        Route::Redirect(r) => r.into(),
    }
}

/// Turns a finished proposal or read into the client's reply.
pub fn out_reply(
    node: &ClusterNode,
    r: Result<Out, kvasir_raft::RaftError>,
    slot: Option<u16>,
) -> Reply {
    match r {
        Ok(Out::Reply(r)) => r,
        Ok(Out::Block(on, _)) => on.on_timeout,
        Err(e) => raft_error_reply(node, e, slot),
    }
}

const CLUSTER_HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDDIGEST <shard-id>",
    "    Kvasir: this node's replica of a shard: [applied index, keys, digest].",
    "HELP",
    "    Print this help.",
];

fn parse_slot(arg: &[u8]) -> Result<u16, Reply> {
    match parse_i64(arg) {
        Ok(n) if (0..SLOTS as i64).contains(&n) => Ok(n as u16),
        _ => Err(Reply::error("ERR Invalid or out of range slot")),
    }
}

/// Keys of `slot` in this node's replica of its shard (up to `limit`).
fn keys_in_slot(node: &ClusterNode, slot: u16, limit: usize) -> Vec<Bytes> {
    let shard = node.shard_of_slot(slot);
    node.with_store(shard, |st| {
        let mut out = Vec::new();
        for db in 0..st.databases() {
            for e in st.db(db).iter() {
                if out.len() >= limit {
                    return out;
                }
                if key_slot(&e.key) == slot {
                    out.push(Bytes::copy_from_slice(&e.key));
                }
            }
        }
        out
    })
    .unwrap_or_default()
}

/// CLUSTER <sub>.
pub fn cluster(s: &Session, sub: &str, args: &[Bytes]) -> Reply {
    if sub == "help" {
        return help_reply(CLUSTER_HELP);
    }
    let Some(node) = s.server.cluster.clone() else {
        return Reply::error("ERR This instance has cluster support disabled");
    };
    match sub {
        "slots" => node.with_view(creply::cluster_slots),
        "shards" => node.with_view(creply::cluster_shards),
        "nodes" => node.with_view(creply::cluster_nodes_reply),
        "info" => node.with_view(creply::cluster_info_reply),
        "myid" => node.with_view(creply::cluster_myid),
        "keyslot" => Reply::Int(key_slot(&args[2]) as i64),
        "countkeysinslot" => match parse_slot(&args[2]) {
            Ok(slot) => Reply::Int(keys_in_slot(&node, slot, usize::MAX).len() as i64),
            Err(r) => r,
        },
        "getkeysinslot" => {
            let slot = match parse_slot(&args[2]) {
                Ok(s) => s,
                Err(r) => return r,
            };
            match parse_i64(&args[3]) {
                Ok(n) if n >= 0 => Reply::Array(
                    keys_in_slot(&node, slot, n as usize)
                        .into_iter()
                        .map(Reply::Bulk)
                        .collect(),
                ),
                _ => Reply::error("ERR Invalid number of keys"),
            }
        }
        "sharddigest" => shard_digest(&node, &args[2]),
        _ => Reply::error(format!("ERR unknown subcommand '{sub}'. Try CLUSTER HELP.")),
    }
}

/// CLUSTER SHARDDIGEST <id>: this node's replica of a shard, to compare
/// replicas: [applied index, keys, content digest].
fn shard_digest(node: &ClusterNode, arg: &[u8]) -> Reply {
    let id = match parse_i64(arg) {
        Ok(n) if n > 0 => n as u64,
        _ => return Reply::error("ERR Invalid shard id"),
    };
    let applied = node
        .raft
        .status()
        .into_iter()
        .find(|g| g.id == id)
        .map(|g| g.applied);
    let found = node.with_store(id, |st| {
        let keys: usize = (0..st.databases()).map(|d| st.db(d).len()).sum();
        (keys, kvasir_core::snapshot::digest(st))
    });
    match (applied, found) {
        (Some(applied), Some((keys, digest))) => Reply::Array(vec![
            Reply::Int(applied as i64),
            Reply::Int(keys as i64),
            Reply::Bulk(Bytes::from(format!("{digest:016x}"))),
        ]),
        _ => Reply::error("ERR this node holds no replica of that shard"),
    }
}
