//! A connection's pipelined commands, one Raft entry per shard.
//!
//! Redis runs the commands of one client's read for a node back to back,
//! so no other client's command comes between them; applications (and
//! redis-py's concurrent-pipeline test) rely on it although pipelines
//! promise no atomicity. A cluster node proposing each write on its own
//! would let other connections' writes land between a pipeline's commands.
//! So the keyed commands of one read, from the first write on, are gathered
//! per shard (reads included: the log orders them, no ReadIndex round is
//! needed), and each shard's run goes as one `ShardCmd::Commands
//! { multi: true }` entry, applied back to back on every replica, its
//! array of replies handed back per command. One proposal per shard rather
//! than per slot: a pipeline of random keys (a cluster client's pipeline
//! split per node) touches as many slots as it has commands but only the
//! few shards the node leads, and every proposal costs its encoding, a
//! hand-off to the shard's loop, an apply call and a reply on each replica
//! (the loop already packs a round's proposals to one group into one log
//! entry).
//! Commands of different shards may apply in another order than sent:
//! nothing orders them across slots in Redis Cluster either (they may live
//! on different nodes).
//!
//! A round is proposed, every slot of it at once, when a command that
//! cannot join arrives (keyless, blocking, a session command, a read of a
//! shard without writes in the round...) and at the latest when one of its
//! replies is first awaited, so no path that waits for a reply can wait
//! for a batch that was never proposed.

use super::commands::{out_reply, refusal, submit_for_batch};
use super::sm::Cmd;
use super::{raft_error_reply, ClusterNode};
use crate::session::{Finished, Outcome, PendingOp};
use bytes::Bytes;
use kvasir_core::machine::ShardCmd;
use kvasir_resp::Reply;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use tokio::sync::oneshot;

/// Shards one round gathers at most, and commands per shard: beyond them
/// the round is proposed and a new one starts.
pub(crate) const MAX_SHARDS: usize = 64;
pub(crate) const MAX_PER_SHARD: usize = 1024;

/// One shard's commands of a round, with each command's slot (a refusal
/// redirects each command to its own slot).
struct ShardRun {
    shard: u64,
    slots: Vec<u16>,
    cmds: Vec<Vec<Bytes>>,
    replies: Vec<oneshot::Sender<Reply>>,
}

/// The commands of one connection's read gathered per shard.
pub struct BatchRound {
    node: Rc<ClusterNode>,
    db: usize,
    runs: RefCell<Vec<ShardRun>>,
    proposed: Cell<bool>,
}

impl BatchRound {
    pub fn new(node: &Rc<ClusterNode>, db: usize) -> Rc<BatchRound> {
        Rc::new(BatchRound {
            node: node.clone(),
            db,
            runs: RefCell::new(Vec::new()),
            proposed: Cell::new(false),
        })
    }

    /// Whether a command for `slot` in database `db` may join: a read only
    /// where the round has writes for its shard already.
    pub fn accepts(&self, slot: u16, db: usize, write: bool) -> bool {
        if self.proposed.get() || self.db != db {
            return false;
        }
        let shard = self.node.shard_of_slot(slot);
        let runs = self.runs.borrow();
        match runs.iter().find(|r| r.shard == shard) {
            Some(run) => run.cmds.len() < MAX_PER_SHARD,
            None => write && runs.len() < MAX_SHARDS,
        }
    }

    /// Whether the round has commands for the shard of `slot`.
    pub fn has_shard_of(&self, slot: u16) -> bool {
        let shard = self.node.shard_of_slot(slot);
        self.runs.borrow().iter().any(|r| r.shard == shard)
    }

    /// Adds a command (see [`BatchRound::accepts`]); its reply comes when
    /// its slot's entry is applied.
    pub fn push(self: &Rc<Self>, slot: u16, args: &[Bytes]) -> Outcome {
        let (tx, rx) = oneshot::channel();
        let shard = self.node.shard_of_slot(slot);
        {
            let mut runs = self.runs.borrow_mut();
            let at = match runs.iter().position(|r| r.shard == shard) {
                Some(at) => at,
                None => {
                    runs.push(ShardRun {
                        shard,
                        slots: Vec::new(),
                        cmds: Vec::new(),
                        replies: Vec::new(),
                    });
                    runs.len() - 1
                }
            };
            runs[at].slots.push(slot);
            runs[at].cmds.push(args.to_vec());
            runs[at].replies.push(tx);
        }
        let round = self.clone();
        Outcome::Pending(Box::new(PendingOp {
            reply: Box::pin(async move {
                round.propose();
                Finished::Reply(
                    rx.await
                        .unwrap_or_else(|_| Reply::error("ERR request dropped")),
                )
            }),
            // In flight as a write whatever it is: the connection's next
            // commands, reads or writes, may still join the round.
            write: true,
            blocking: false,
        }))
    }

    /// Whether the round was proposed (nothing joins it any more).
    pub fn is_proposed(&self) -> bool {
        self.proposed.get()
    }

    /// Proposes the round (once): per shard, one command as it is, several
    /// as one entry whose replies are handed out in order.
    pub fn propose(&self) {
        if self.proposed.replace(true) {
            return;
        }
        for run in std::mem::take(&mut *self.runs.borrow_mut()) {
            propose_run(&self.node, self.db, run);
        }
    }
}

fn propose_run(node: &Rc<ClusterNode>, db: usize, run: ShardRun) {
    let ShardRun {
        slots,
        cmds,
        replies,
        ..
    } = run;
    let multi = cmds.len() > 1;
    let cmd = Cmd::Shard(ShardCmd::Commands { db, cmds, multi });
    // Every slot of the run maps to its shard: the first routes it.
    let answer = match submit_for_batch(node, slots[0], cmd) {
        Ok(answer) => answer,
        Err(_) => {
            for (tx, slot) in replies.into_iter().zip(slots) {
                let _ = tx.send(refusal(node, slot));
            }
            return;
        }
    };
    let node = node.clone();
    tokio::task::spawn_local(async move {
        let Ok(outcome) = answer.await else {
            for tx in replies {
                let _ = tx.send(Reply::error("ERR request dropped"));
            }
            return;
        };
        if let Err(e) = outcome {
            // The entry failed as a whole (a leader change): every command
            // gets the error, a redirect to its own slot.
            node.settle();
            for (tx, slot) in replies.into_iter().zip(slots) {
                let _ = tx.send(raft_error_reply(&node, e.clone(), Some(slot)));
            }
            return;
        }
        match out_reply(&node, outcome, Some(slots[0])) {
            Reply::Array(items) if multi && items.len() == replies.len() => {
                for (tx, item) in replies.into_iter().zip(items) {
                    let _ = tx.send(item);
                }
            }
            other => {
                for tx in replies {
                    let _ = tx.send(other.clone());
                }
            }
        }
    });
}
