//! The session side of cluster mode: routing keyed commands to their
//! shard (MOVED, CROSSSLOT, CLUSTERDOWN), commands without keys that act on
//! the shards this node leads (DBSIZE, KEYS, SCAN, FLUSHALL...), EXEC as
//! one Raft proposal, and the CLUSTER command family.

use super::batch::BatchRound;
use super::sm::{Cmd, NodeSm, Out};
use super::{raft_error_reply, ClusterNode, Route};
use crate::session::{Finished, Outcome, PendingOp, Session};
use bytes::Bytes;
use kvasir_cluster::reply as creply;
use kvasir_cluster::{command_slot, key_slot, SLOTS};
use kvasir_core::args::parse_i64;
use kvasir_core::connection::ClusterCmd;
use kvasir_core::keyspace::Keyspace;
use kvasir_core::machine::ShardCmd;
use kvasir_core::table::{help_reply, Handler, Keyless};
use kvasir_core::{CommandSpec, Ctx};
use kvasir_raft::RaftError;
use kvasir_resp::Reply;
use std::rc::Rc;
use std::sync::Arc;
use tokio::sync::oneshot;

/// The caller of a script command when its ACL user is restricted: its
/// permissions travel with the command, so every replica (or the replica
/// that reads) checks each `redis.call` against the same rules.
type Caller = Option<Arc<kvasir_core::acl::User>>;

/// `cmd`, run as `caller` when there is one.
fn as_caller(caller: &Caller, cmd: ShardCmd) -> ShardCmd {
    match caller {
        Some(user) => ShardCmd::AsUser {
            rules: user.permission_rules(),
            cmd: Box::new(cmd),
        },
        None => cmd,
    }
}

fn now_ctx() -> Ctx {
    let now = crate::local_store::unix_ms();
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
    // A blocking read (XREAD) is proposed like a write: only an applied
    // entry can report that it blocks, and its re-runs are proposals too.
    let blocking = spec.flags.contains(kvasir_core::table::Flags::BLOCKING);
    let write = matches!(spec.handler, Handler::Write(_)) || blocking;
    let slot = match command_slot(spec, args) {
        Err(e) => {
            s.rejected.set(true);
            return e.reply().into();
        }
        Ok(slot) => slot,
    };
    let Some(slot) = slot else {
        propose_open_batch(s);
        return keyless(s, node, spec, args);
    };
    let caller = crate::acl::script_caller(s, spec);
    if !blocking && caller.is_none() && !s.readonly {
        // A shard new to the round only where this node leads now: a
        // redirect or a wait for an election is answered as for a lone
        // command.
        let leads =
            |node: &Rc<ClusterNode>| matches!(node.route(slot, true, false), Route::Leader(_));
        if let Some(round) = s.open_batch.clone() {
            if round.accepts(slot, s.db, write) && (round.has_shard_of(slot) || leads(node)) {
                return round.push(slot, args);
            }
        }
        propose_open_batch(s);
        if write && leads(node) {
            let round = BatchRound::new(node, s.db);
            let outcome = round.push(slot, args);
            s.open_batch = Some(round);
            return outcome;
        }
    } else {
        propose_open_batch(s);
    }
    let cmd = Cmd::Shard(as_caller(
        &caller,
        ShardCmd::Commands {
            db: s.db,
            cmds: vec![args.to_vec()],
            multi: false,
        },
    ));
    let rx = match submit(node, slot, write, s.readonly, cmd) {
        Ok(rx) => rx,
        Err(Route::LocalReplica(shard)) => {
            let read = local_read(node, shard, s.db, args.to_vec(), caller);
            return pending_read(async move { Finished::Reply(read.await) });
        }
        Err(route) => {
            // MOVED, ASK, TRYAGAIN: refused here, as Redis Cluster counts it.
            s.rejected.set(true);
            return not_submitted(route).into();
        }
    };
    if blocking {
        return Outcome::Parked(super::blocked::park(s, node, slot, spec, args, rx));
    }
    Outcome::Pending(Box::new(PendingOp {
        reply: Box::pin(finish(node.clone(), vec![rx], Some(slot))),
        write,
        blocking: false,
    }))
}

/// Proposes the connection's open batch round, if any: a command that
/// does not join it must not overtake it.
fn propose_open_batch(s: &mut Session) {
    if let Some(round) = s.open_batch.take() {
        round.propose();
    }
}

/// Whether a read would join the connection's open batch round (the
/// session lets it into the round instead of waiting for its writes).
pub fn joins_open_batch(s: &Session, spec: &'static CommandSpec, args: &[Bytes]) -> bool {
    let Some(round) = s.open_batch.as_ref() else {
        return false;
    };
    if s.readonly || spec.flags.contains(kvasir_core::table::Flags::BLOCKING) {
        return false;
    }
    match command_slot(spec, args) {
        Ok(Some(slot)) => {
            round.accepts(slot, s.db, false) && crate::acl::script_caller(s, spec).is_none()
        }
        _ => false,
    }
}

/// Hands a batch of writes (and the commands after them) to the shard of
/// `slot`; the refusal every command of it gets otherwise (MOVED...).
pub(super) fn submit_for_batch(
    node: &Rc<ClusterNode>,
    slot: u16,
    cmd: Cmd,
) -> Result<Answer, Reply> {
    submit(node, slot, true, false, cmd).map_err(not_submitted)
}

/// The reply of a proposal or read; for several (a write to every led
/// shard: FLUSHALL, SCRIPT LOAD) the first error, else the first reply.
async fn finish(node: Rc<ClusterNode>, rxs: Vec<Answer>, slot: Option<u16>) -> Finished {
    let mut first_err = None;
    let mut first = None;
    for rx in rxs {
        let r = match rx.await {
            Ok(r) => out_reply(&node, r, slot),
            Err(_) => Reply::error("ERR request dropped"),
        };
        if r.is_error() {
            first_err.get_or_insert(r);
        } else {
            first.get_or_insert(r);
        }
    }
    Finished::Reply(first_err.or(first).unwrap_or_else(Reply::ok))
}

/// Hands `cmd` to the shard of `slot`: proposed or read if this node leads
/// it, held until a leader is known if none is. Otherwise the route the
/// caller answers with (a redirect, or a READONLY read of a local replica).
fn submit(
    node: &Rc<ClusterNode>,
    slot: u16,
    write: bool,
    readonly: bool,
    cmd: Cmd,
) -> Result<Answer, Route> {
    match node.route(slot, write, readonly) {
        Route::Leader(shard) if write => Ok(node.propose(shard, &cmd)),
        Route::Leader(shard) => Ok(node.read(shard, cmd)),
        Route::NoLeader(_) => Ok(held(node, slot, write, readonly, cmd)),
        other => Err(other),
    }
}

/// The refusal a write for `slot` gets from this node (MOVED...), for
/// the commands of a batch [`submit_for_batch`] refused.
pub(super) fn refusal(node: &ClusterNode, slot: u16) -> Reply {
    not_submitted(node.route(slot, true, false))
}

/// The reply for a route [`submit`] did not take.
fn not_submitted(route: Route) -> Reply {
    match route {
        Route::Redirect(reply) => reply,
        // Only READONLY reads are served by a local replica.
        _ => kvasir_cluster::route::try_again(),
    }
}

/// A read served by this node's replica (READONLY connections).
fn local_read(
    node: &ClusterNode,
    shard: u64,
    db: usize,
    args: Vec<Bytes>,
    caller: Caller,
) -> impl std::future::Future<Output = Reply> + 'static {
    let read = node.on_store(shard, move |store| {
        store
            .read_as(caller, db, &args, &now_ctx())
            .unwrap_or_else(|e| e.to_reply())
    });
    // route() only picks a replica this node holds.
    async move { read.await.unwrap_or_else(kvasir_cluster::route::try_again) }
}

/// A reply computed off the session (on shard threads), as a read in
/// flight.
fn pending_read(reply: impl std::future::Future<Output = Finished> + 'static) -> Outcome {
    Outcome::Pending(Box::new(PendingOp {
        reply: Box::pin(reply),
        write: false,
        blocking: false,
    }))
}

/// `args` run as a read on this node's replica of `shard`.
fn shard_read(
    node: &ClusterNode,
    shard: u64,
    db: usize,
    args: Vec<Bytes>,
    caller: Caller,
) -> impl std::future::Future<Output = Option<Result<Reply, Reply>>> + 'static {
    node.on_store(shard, move |st| {
        st.read_as(caller, db, &args, &now_ctx())
            .map_err(|e| e.to_reply())
    })
}

type Answer = oneshot::Receiver<Result<Out, RaftError>>;

/// A request for a shard without a leader (an election at start or after
/// a failure): held until the shard has one, then proposed, read or
/// redirected as usual, so clients see a slower reply instead of an error.
/// CLUSTERDOWN only if no leader appears within the node's leader wait.
fn held(node: &Rc<ClusterNode>, slot: u16, write: bool, readonly: bool, cmd: Cmd) -> Answer {
    let (tx, rx) = oneshot::channel();
    let node = node.clone();
    tokio::task::spawn_local(async move {
        let result = match node.route_when_led(slot, write, readonly).await {
            Some(Route::Leader(shard)) => {
                let rx = if write {
                    node.propose(shard, &cmd)
                } else {
                    node.read(shard, cmd)
                };
                rx.await.unwrap_or(Err(RaftError::Dropped))
            }
            Some(Route::LocalReplica(shard)) => {
                let (plain, caller) = match &cmd {
                    Cmd::Shard(ShardCmd::AsUser { rules, cmd }) => {
                        (&**cmd, Some(kvasir_core::machine::caller_of(rules)))
                    }
                    Cmd::Shard(plain) => (plain, None),
                    _ => return,
                };
                let ShardCmd::Commands { db, cmds, .. } = plain else {
                    return;
                };
                let args = cmds.first().cloned().unwrap_or_default();
                Ok(Out::Reply(
                    local_read(&node, shard, *db, args, caller).await,
                ))
            }
            Some(Route::Redirect(reply)) => Ok(Out::Reply(reply)),
            Some(Route::NoLeader(_)) | None => Ok(Out::Reply(ClusterNode::no_leader_reply())),
        };
        let _ = tx.send(result);
    });
    rx
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
    let (db, owned) = (s.db, args.to_vec());
    match spec.keyless {
        Keyless::Count => {
            let node = node.clone();
            pending_read(async move {
                let mut n = 0;
                for sh in led {
                    match shard_read(&node, sh, db, owned.clone(), None).await {
                        Some(Ok(Reply::Int(count))) => n += count,
                        Some(Err(e)) => return Finished::Reply(e),
                        _ => {}
                    }
                }
                Finished::Reply(Reply::Int(n))
            })
        }
        Keyless::List => {
            let node = node.clone();
            pending_read(async move {
                let mut all = Vec::new();
                for sh in led {
                    match shard_read(&node, sh, db, owned.clone(), None).await {
                        Some(Ok(Reply::Array(items))) => all.extend(items),
                        Some(Ok(Reply::BulkArray(buf, ends))) => {
                            let mut start = 0;
                            for end in ends {
                                all.push(Reply::Bulk(buf.slice(start..end)));
                                start = end;
                            }
                        }
                        Some(Err(e)) => return Finished::Reply(e),
                        _ => {}
                    }
                }
                Finished::Reply(Reply::Array(all))
            })
        }
        Keyless::Pick => {
            let node = node.clone();
            pending_read(async move {
                for sh in led {
                    if let Some(Ok(r)) = shard_read(&node, sh, db, owned.clone(), None).await {
                        if !matches!(r, Reply::Nil) {
                            return Finished::Reply(r);
                        }
                    }
                }
                Finished::Reply(Reply::Nil)
            })
        }
        Keyless::Cursor => {
            let node = node.clone();
            pending_read(async move { Finished::Reply(scan(&node, db, &led, &owned).await) })
        }
        Keyless::AnyShard => {
            let Some(&sh) = led.first() else {
                return kvasir_cluster::route::try_again().into();
            };
            let caller = crate::acl::script_caller(s, spec);
            if !matches!(spec.handler, Handler::Write(_)) {
                let read = shard_read(node, sh, db, owned, caller);
                return pending_read(async move {
                    Finished::Reply(match read.await {
                        Some(Ok(r) | Err(r)) => r,
                        None => kvasir_cluster::route::try_again(),
                    })
                });
            }
            let rx = node.propose(
                sh,
                &Cmd::Shard(as_caller(
                    &caller,
                    ShardCmd::Commands {
                        db: s.db,
                        cmds: vec![args.to_vec()],
                        multi: false,
                    },
                )),
            );
            Outcome::Pending(Box::new(PendingOp {
                reply: Box::pin(finish(node.clone(), vec![rx], None)),
                write: true,
                blocking: false,
            }))
        }
        Keyless::FlushAll | Keyless::FlushDb | Keyless::EveryShard => {
            let rxs = led
                .iter()
                .map(|&sh| {
                    node.propose(
                        sh,
                        &Cmd::Shard(ShardCmd::Commands {
                            db: s.db,
                            cmds: vec![args.to_vec()],
                            multi: false,
                        }),
                    )
                })
                .collect();
            Outcome::Pending(Box::new(PendingOp {
                reply: Box::pin(finish(node.clone(), rxs, None)),
                write: true,
                blocking: false,
            }))
        }
        Keyless::No => without_keys(s, spec, args).into(),
        Keyless::SwapDb => not_in_cluster(spec).into(),
    }
}

fn not_in_cluster(spec: &CommandSpec) -> Reply {
    Reply::error(format!(
        "ERR '{}' is not supported in cluster mode",
        spec.name
    ))
}

/// A keyed command whose arguments name no key: a HELP subcommand, or a
/// bad key count (`ZUNION abc k`). A Redis Cluster node runs such a
/// command where it is, so its own checks answer; here it runs on an
/// empty scratch store, and only its errors and read replies are given:
/// a write that went through on the scratch store changed nothing real.
fn without_keys(s: &Session, spec: &CommandSpec, args: &[Bytes]) -> Reply {
    let mut scratch = kvasir_core::Store::new(s.db + 1);
    let ctx = Ctx {
        now_ms: crate::local_store::unix_ms(),
        seed: 0,
    };
    match kvasir_core::machine::execute(&mut scratch, spec, s.db, args, &ctx) {
        Err(e) => e.to_reply(),
        Ok(reply) if !spec.is_write() => reply,
        Ok(_) => not_in_cluster(spec),
    }
}

/// SCAN over the shards this node leads: the cursor's top 16 bits are the
/// position in that list, the rest the shard's own cursor. One call goes
/// on to the next shards until it has COUNT keys (as one dict walk would
/// in Redis), so a small keyspace comes back in one call.
async fn scan(node: &ClusterNode, db: usize, led: &[u64], args: &[Bytes]) -> Reply {
    let cursor = match kvasir_core::args::parse_cursor(&args[1]) {
        Ok(c) => c,
        Err(e) => return e.to_reply(),
    };
    let count = match kvasir_core::keys::scan_count(&args[2..]) {
        Ok(c) => usize::try_from(c).unwrap_or(usize::MAX),
        Err(e) => return e.to_reply(),
    };
    let mut pos = (cursor >> 48) as usize;
    let mut inner = cursor & ((1 << 48) - 1);
    let mut keys = Vec::new();
    while pos < led.len() {
        let mut a = args.to_vec();
        a[1] = Bytes::from(inner.to_string());
        match shard_read(node, led[pos], db, a, None).await {
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
                    ]);
                }
                pos += 1;
                inner = 0;
                if keys.len() >= count {
                    break;
                }
            }
            Some(Err(e)) => return e,
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
}

/// WATCH in cluster mode: every watched key must hash to one slot (the
/// slot of keys watched before too): that slot, or the reply refusing it.
pub fn watch_slot(s: &Session, keys: &[Bytes]) -> Result<u16, Reply> {
    let mut slot = s.txn.cluster_watch.as_ref().map(|w| w.slot);
    for k in keys {
        let ks = key_slot(k);
        if slot.is_some_and(|x| x != ks) {
            return Err(kvasir_cluster::RouteError::CrossSlot.reply());
        }
        slot = Some(ks);
    }
    slot.ok_or_else(|| Reply::error("ERR wrong number of arguments for 'watch' command"))
}

/// The slot's leader reads the watched keys' digests linearizably
/// (ReadIndex); EXEC carries them into the log.
pub fn watch(s: &mut Session, node: &Rc<ClusterNode>, slot: u16, keys: &[Bytes]) -> Outcome {
    let cmd = Cmd::Shard(ShardCmd::WatchDigests {
        db: s.db,
        keys: keys.to_vec(),
    });
    let rx = match submit(node, slot, false, false, cmd) {
        Ok(rx) => rx,
        Err(route) => return not_submitted(route).into(),
    };
    let node = node.clone();
    let keys = keys.to_vec();
    let reply = async move {
        let r = match rx.await {
            Ok(r) => r,
            Err(_) => return Finished::Reply(Reply::error("ERR request dropped")),
        };
        let digests = match r {
            Ok(Out::Reply(Reply::Array(ds))) => ds
                .into_iter()
                .map(|d| match d {
                    // Carried as the integer's bits.
                    Reply::Int(d) => Some(d as u64),
                    _ => None,
                })
                .collect::<Option<Vec<u64>>>(),
            other => return Finished::Reply(out_reply(&node, other, Some(slot))),
        };
        match digests {
            Some(digests) => Finished::Watched {
                slot,
                keys,
                digests,
            },
            None => Finished::Reply(Reply::error("ERR WATCH read returned a damaged reply")),
        }
    };
    Outcome::Pending(Box::new(PendingOp {
        reply: Box::pin(reply),
        write: false,
        blocking: false,
    }))
}

/// EXEC in cluster mode: every queued command (and every watched key) must
/// hash to one slot; the block is one proposal, applied atomically on
/// every replica, after the replica checked the watched keys' digests.
pub fn exec(
    s: &mut Session,
    node: &Rc<ClusterNode>,
    queue: Vec<crate::transaction::Queued>,
    watch: Option<crate::transaction::ClusterWatch>,
) -> Outcome {
    let mut slot = watch.as_ref().map(|w| w.slot);
    for q in &queue {
        if !matches!(q.spec.handler, Handler::Write(_) | Handler::Read(_)) {
            return Reply::error(format!(
                "ERR '{}' inside MULTI is not supported in cluster mode",
                q.spec.name
            ))
            .into();
        }
        match command_slot(q.spec, &q.args) {
            Err(e) => return e.reply().into(),
            Ok(None) => {}
            Ok(Some(sl)) if slot.is_some_and(|x| x != sl) => {
                return kvasir_cluster::RouteError::CrossSlot.reply().into()
            }
            Ok(Some(sl)) => slot = Some(sl),
        }
    }
    let Some(slot) = slot else {
        if queue.is_empty() {
            return Reply::Array(Vec::new()).into();
        }
        return Reply::error("ERR a transaction in cluster mode needs at least one key").into();
    };
    // Scripts in the block have their calls checked as at top level.
    let caller = queue
        .iter()
        .find_map(|q| crate::acl::script_caller(s, q.spec));
    let cmds = queue.into_iter().map(|q| q.args).collect();
    let cmd = Cmd::Shard(as_caller(
        &caller,
        match watch {
            Some(w) => ShardCmd::WatchedExec {
                db: s.db,
                cmds,
                watched: w.keys,
            },
            None => ShardCmd::Commands {
                db: s.db,
                cmds,
                multi: true,
            },
        },
    ));
    match submit(node, slot, true, false, cmd) {
        Ok(rx) => Outcome::Pending(Box::new(PendingOp {
            reply: Box::pin(finish(node.clone(), vec![rx], Some(slot))),
            write: true,
            blocking: false,
        })),
        Err(route) => not_submitted(route).into(),
    }
}

/// Turns a finished proposal or read into the client's reply.
pub fn out_reply(node: &ClusterNode, r: Result<Out, RaftError>, slot: Option<u16>) -> Reply {
    // What the write wrote reaches watchers and trackers first.
    node.settle();
    match r {
        Ok(Out::Reply(r)) => r,
        Ok(Out::Block(on)) => on.on_timeout,
        Err(e) => raft_error_reply(node, e, slot),
    }
}

const CLUSTER_HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node (refused: every slot is assigned).",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node (refused: every slot is assigned).",
    "BUMPEPOCH",
    "    Advance the cluster config epoch (Kvasir's changes only with the map: STILL).",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node (refused: slots belong to shards).",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node (refused).",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master (a Kvasir node is a master; shards fail over by Raft election).",
    "FLUSHSLOTS",
    "    Delete current node own slots information (refused: slots belong to shards).",
    "FORGET <node-id>",
    "    Remove a node from the cluster (refused: Kvasir's members are fixed at bootstrap).",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster (a member's own address: OK; new nodes cannot join).",
    "MYID",
    "    Return the node id.",
    "MYSHARDID",
    "    Return the node's shard id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id> (refused: every node replicates every shard).",
    "RESET [HARD|SOFT]",
    "    Reset current node (refused: members are fixed when the cluster is bootstrapped).",
    "SAVECONFIG",
    "    Save current cluster configuration to disk (Kvasir's map is stored at bootstrap: OK).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node (refused: the node knows its peers).",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state (refused: shards move with their Raft leadership).",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDDIGEST <shard-id>",
    "    Kvasir: this node's replica of a shard: [applied index, keys, digest].",
    "HELP",
    "    Prints this help.",
];

/// An integer argument, or Redis's not-an-integer error.
fn int_arg(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).map_err(|e| e.to_reply())
}

fn slot_in_range(n: i64) -> Option<u16> {
    (0..SLOTS as i64).contains(&n).then_some(n as u16)
}

/// Runs `f` on the store of `slot`'s shard if this node leads it. Clients
/// see each slot on one master, its shard's leader: the other nodes'
/// replicas of it are not theirs to list or count (a client that asks every
/// node, as rueidis does, would get each key three times).
async fn on_led_store<R: Default + Send + 'static>(
    node: &ClusterNode,
    slot: u16,
    f: impl FnOnce(&kvasir_core::Store) -> R + Send + 'static,
) -> R {
    let shard = node.shard_of_slot(slot);
    if !node.is_leader(shard) {
        return R::default();
    }
    node.on_store(shard, f).await.unwrap_or_default()
}

/// Up to `limit` keys of `slot` in `st`: the engine's per-slot list, or
/// a walk of the keys where it keeps none (bounded by its count if it
/// keeps that).
fn slot_keys(st: &kvasir_core::Store, slot: u16, limit: usize) -> Vec<Bytes> {
    if let Some(keys) = st.keyspace().slot_keys(slot, limit) {
        return keys.into_iter().map(Bytes::copy_from_slice).collect();
    }
    let limit = st
        .keyspace()
        .keys_in_slot(slot)
        .map_or(limit, |n| n.min(limit));
    let mut out = Vec::new();
    if limit == 0 {
        return out;
    }
    for db in 0..st.databases() {
        for e in st.db(db).iter() {
            if key_slot(e.key) == slot {
                out.push(Bytes::copy_from_slice(e.key));
                if out.len() >= limit {
                    return out;
                }
            }
        }
    }
    out
}

/// Keys of `slot` (up to `limit`) if this node leads the slot's shard.
async fn keys_in_slot(node: &ClusterNode, slot: u16, limit: usize) -> Vec<Bytes> {
    on_led_store(node, slot, move |st| slot_keys(st, slot, limit)).await
}

/// How many keys `slot` holds if this node leads its shard (0 otherwise):
/// the store's count, or a walk where the engine keeps none.
async fn count_keys_in_slot(node: &ClusterNode, slot: u16) -> usize {
    on_led_store(node, slot, move |st| {
        st.keyspace()
            .keys_in_slot(slot)
            .unwrap_or_else(|| slot_keys(st, slot, usize::MAX).len())
    })
    .await
}

/// CLUSTER <sub>.
pub fn cluster(s: &Session, sub: ClusterCmd, args: &[Bytes]) -> Outcome {
    if sub == ClusterCmd::Help {
        return help_reply(CLUSTER_HELP).into();
    }
    let Some(node) = s.server.cluster.clone() else {
        return Reply::error("ERR This instance has cluster support disabled").into();
    };
    let reply = match sub {
        ClusterCmd::Slots => node.with_view(creply::cluster_slots),
        ClusterCmd::Shards => node.with_view(creply::cluster_shards),
        ClusterCmd::Nodes => node.with_view(creply::cluster_nodes_checked),
        ClusterCmd::Info => node.with_view(creply::cluster_info_reply),
        ClusterCmd::Myid => node.with_view(creply::cluster_myid),
        ClusterCmd::Keyslot => Reply::Int(key_slot(&args[2]) as i64),
        ClusterCmd::Myshardid => node.with_view(creply::cluster_myshardid),
        ClusterCmd::Links => node.with_view(creply::cluster_links),
        ClusterCmd::Replicas | ClusterCmd::Slaves => {
            node.with_view(|v| creply::cluster_replicas(v, &args[2]))
        }
        ClusterCmd::Meet => {
            let rest: Vec<&[u8]> = args[2..].iter().map(|a| a.as_ref()).collect();
            if rest.len() > 3 {
                return Reply::error(format!(
                    "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
                    String::from_utf8_lossy(&args[1])
                ))
                .into();
            }
            node.with_view(|v| creply::cluster_meet(v, &rest))
        }
        ClusterCmd::Forget => node.with_view(|v| creply::cluster_forget(v, &args[2])),
        ClusterCmd::Replicate => node.with_view(|v| creply::cluster_replicate(v, &args[2])),
        ClusterCmd::Reset => creply::cluster_reset(&args[2..]),
        ClusterCmd::CountFailureReports => {
            node.with_view(|v| creply::cluster_count_failure_reports(v, &args[2]))
        }
        ClusterCmd::Failover => creply::cluster_failover(&args[1], &args[2..]),
        ClusterCmd::Addslots => creply::cluster_addslots(&args[2..], false),
        ClusterCmd::Delslots => creply::cluster_delslots(&args[2..], false),
        ClusterCmd::Addslotsrange | ClusterCmd::Delslotsrange if args.len() % 2 == 1 => {
            Reply::error(format!(
                "ERR wrong number of arguments for 'cluster|{}' command",
                String::from_utf8_lossy(&args[1]).to_ascii_lowercase()
            ))
        }
        ClusterCmd::Addslotsrange => creply::cluster_addslots(&args[2..], true),
        ClusterCmd::Delslotsrange => creply::cluster_delslots(&args[2..], true),
        ClusterCmd::Flushslots => creply::cluster_flushslots(),
        ClusterCmd::Setslot => node.with_view(|v| creply::cluster_setslot(v, &args[2..])),
        // The map is stored durably when the cluster is bootstrapped and
        // never changes by hand: there is nothing left to save.
        ClusterCmd::Saveconfig => Reply::ok(),
        ClusterCmd::SetConfigEpoch => {
            node.with_view(|v| creply::cluster_set_config_epoch(v, &args[2]))
        }
        ClusterCmd::Bumpepoch => node.with_view(creply::cluster_bumpepoch),
        ClusterCmd::Help => help_reply(CLUSTER_HELP),
        // These read a shard's store, on the shard's thread.
        ClusterCmd::Countkeysinslot => match int_arg(&args[2]).map(slot_in_range) {
            Ok(Some(slot)) => {
                return pending_read(async move {
                    let n = count_keys_in_slot(&node, slot).await;
                    Finished::Reply(Reply::Int(n as i64))
                })
            }
            Ok(None) => Reply::error("ERR Invalid slot"),
            Err(r) => r,
        },
        ClusterCmd::Getkeysinslot => {
            let (slot, count) = match (int_arg(&args[2]), int_arg(&args[3])) {
                (Ok(slot), Ok(count)) => (slot, count),
                (Err(r), _) | (_, Err(r)) => return r.into(),
            };
            match slot_in_range(slot) {
                Some(slot) if count >= 0 => {
                    return pending_read(async move {
                        let keys = keys_in_slot(&node, slot, count as usize).await;
                        Finished::Reply(Reply::Array(keys.into_iter().map(Reply::Bulk).collect()))
                    })
                }
                _ => Reply::error("ERR Invalid slot or number of keys"),
            }
        }
        ClusterCmd::Sharddigest => {
            let arg = args[2].clone();
            return pending_read(async move { Finished::Reply(shard_digest(&node, &arg).await) });
        }
    };
    reply.into()
}

/// CLUSTER SHARDDIGEST <id>: this node's replica of a shard, to compare
/// replicas: [applied index, keys, content digest].
async fn shard_digest(node: &ClusterNode, arg: &[u8]) -> Reply {
    let id = match parse_i64(arg) {
        Ok(n) if n > 0 => n as u64,
        _ => return Reply::error("ERR Invalid shard id"),
    };
    // The applied index and the content at the same point, on the
    // shard's thread.
    let found = node
        .on_loop(id, move |raft| {
            let applied = raft
                .status()
                .into_iter()
                .find(|g| g.id == id)
                .map(|g| g.applied);
            let content = raft.with_sm(id, |sm| match sm {
                Some(NodeSm::Shard(s)) => {
                    let st = &s.store;
                    let keys: usize = (0..st.databases()).map(|d| st.db(d).len()).sum();
                    Some((keys, kvasir_core::snapshot::digest(st)))
                }
                _ => None,
            });
            (applied, content)
        })
        .await;
    let (applied, found) = found.unwrap_or((None, None));
    match (applied, found) {
        (Some(applied), Some((keys, digest))) => Reply::Array(vec![
            Reply::Int(applied as i64),
            Reply::Int(keys as i64),
            Reply::Bulk(Bytes::from(format!("{digest:016x}"))),
        ]),
        _ => Reply::error("ERR this node holds no replica of that shard"),
    }
}
