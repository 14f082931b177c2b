//! Blocking commands (BLPOP, BZPOPMIN, BLMOVE...) in cluster mode, on the
//! one waiter registry (`crate::blocking`). The proposing node registers
//! the waiter before the first proposal, follows each proposal's result,
//! and proposes the command again when a write applied on this node reaches
//! one of its keys (`WriteHooks` queues such keys; [`serve_loop`] serves
//! the oldest parked waiter of each). A node that no longer leads the
//! shard answers the waiter with the redirect its proposal got.

use super::commands::out_reply;
use super::sm::{Cmd, Out, WriteHooks};
use super::ClusterNode;
use crate::blocking::{arm_timeout, AfterBlock, SharedBlocking};
use crate::session::{Parked, Session};
use bytes::Bytes;
use kvasir_core::machine::ShardCmd;
use kvasir_core::CommandSpec;
use kvasir_raft::RaftError;
use std::rc::Rc;
use tokio::sync::oneshot;

type Answer = oneshot::Receiver<Result<Out, RaftError>>;

/// Registers a blocking command handed to its shard (`first` answers its
/// proposal) and returns what the session waits on.
pub fn park(
    s: &Session,
    node: &Rc<ClusterNode>,
    slot: u16,
    spec: &'static CommandSpec,
    args: &[Bytes],
    first: Answer,
) -> Parked {
    let blocking = &s.server.blocking;
    let keys = spec
        .keys_of(args)
        .into_iter()
        .filter_map(|i| args.get(i).cloned())
        .collect();
    let (id, rx) = blocking.borrow_mut().park(
        node.shard_of_slot(slot),
        s.db,
        spec,
        args.to_vec(),
        keys,
        None,
    );
    tokio::task::spawn_local(follow(node.clone(), blocking.clone(), id, slot, first));
    Parked { id: Some(id), rx }
}

/// Follows a waiter's proposals until it is served or parked.
async fn follow(
    node: Rc<ClusterNode>,
    blocking: SharedBlocking,
    id: u64,
    slot: u16,
    mut answer: Answer,
) {
    loop {
        let result = answer.await.unwrap_or(Err(RaftError::Dropped));
        node.settle();
        let on = match result {
            Ok(Out::Block(on)) => on,
            Ok(Out::Reply(r)) if r.is_error() && keeps_waiting(&node, &blocking, id).await => {
                blocking.borrow_mut().repark(id);
                return;
            }
            other => {
                let reply = out_reply(&node, other, Some(slot));
                blocking.borrow_mut().deliver(id, reply);
                return;
            }
        };
        let (next, first) = blocking
            .borrow_mut()
            .blocked(id, on.keys, on.rerun, on.on_timeout);
        if first {
            arm_timeout(&blocking, id, on.timeout_ms);
        }
        match next {
            AfterBlock::Retry => {
                // Waiters parked before this one on its keys run first
                // (the serve loop would propose them too, but may run
                // after this task).
                let ahead = blocking.borrow().parked_ahead_of(id);
                for older in ahead {
                    if let Some(a) = propose_again(&node, &blocking, older) {
                        tokio::task::spawn_local(follow(
                            node.clone(),
                            blocking.clone(),
                            older,
                            slot,
                            a,
                        ));
                    }
                }
                match propose_again(&node, &blocking, id) {
                    Some(a) => answer = a,
                    None => return,
                }
            }
            AfterBlock::Parked | AfterBlock::Done => return,
        }
    }
}

/// A re-run (never the first run: the waiter knows its timeout reply by
/// then) that failed because a key now holds another type keeps waiting,
/// as Redis keeps such a client blocked.
async fn keeps_waiting(node: &ClusterNode, blocking: &SharedBlocking, id: u64) -> bool {
    let (shard, spec, db, keys) = {
        let b = blocking.borrow();
        let Some(w) = b.get(id) else {
            return false;
        };
        if !w.has_timeout_reply() {
            return false;
        }
        (w.shard, w.spec, w.db, w.keys.clone())
    };
    let now = crate::local_store::unix_ms();
    node.on_store(shard, move |st| {
        kvasir_core::machine::waits_on_other_type(st, spec, db, &keys, now)
    })
    .await
    .unwrap_or(false)
}

/// Proposes a waiter's command again (marking it in flight).
fn propose_again(node: &ClusterNode, blocking: &SharedBlocking, id: u64) -> Option<Answer> {
    let (shard, db, args) = {
        let mut b = blocking.borrow_mut();
        let w = b.get(id)?;
        let found = (w.shard, w.db, w.args.clone());
        b.set_in_flight(id);
        found
    };
    let cmd = Cmd::Shard(ShardCmd::Commands {
        db,
        cmds: vec![args],
        multi: false,
    });
    Some(node.propose(shard, &cmd))
}

/// Serves parked waiters whose keys were written: for each such key the
/// oldest parked waiter's command is proposed again (the next one follows
/// when that pop applies and writes the key again).
pub async fn serve_loop(node: Rc<ClusterNode>, hooks: Rc<WriteHooks>, blocking: SharedBlocking) {
    loop {
        hooks.ready_notify.notified().await;
        for (shard, db, key) in hooks.take_ready() {
            let first = blocking.borrow().first(shard, db, &key);
            let Some((id, spec, args)) = first else {
                continue;
            };
            let slot = kvasir_cluster::command_slot(spec, &args)
                .ok()
                .flatten()
                .unwrap_or_else(|| kvasir_cluster::key_slot(&key));
            if let Some(answer) = propose_again(&node, &blocking, id) {
                tokio::task::spawn_local(follow(node.clone(), blocking.clone(), id, slot, answer));
            }
        }
    }
}
