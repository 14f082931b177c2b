//! A connection's pipelined commands, one Raft entry per slot.
//!
//! Redis runs the commands of one client's read for a node back to back,
//! so no other client's command comes between them; applications (and
//! redis-py's concurrent-pipeline test) rely on it although pipelines
//! promise no atomicity. A cluster node proposing each write on its own
//! would let other connections' writes land between a pipeline's commands.
//! So the keyed commands of one read, from the first write on, are gathered
//! per slot (reads included: the log orders them, no ReadIndex round is
//! needed), and each slot's run goes as one `ShardCmd::Commands
//! { multi: true }` entry, applied back to back on every replica, its
//! array of replies handed back per command. Commands of different slots
//! may apply in another order than sent: nothing orders them across slots
//! in Redis Cluster either (they may live on different nodes).
//!
//! A round is proposed, every slot of it at once, when a command that
//! cannot join arrives (keyless, blocking, a session command, a read of a
//! slot without writes in the round...) and at the latest when one of its
//! replies is first awaited, so no path that waits for a reply can wait
//! for a batch that was never proposed.

use super::commands::{out_reply, submit_for_batch};
use super::sm::Cmd;
use super::ClusterNode;
use crate::session::{Finished, Outcome, PendingOp};
use bytes::Bytes;
use kvasir_core::machine::ShardCmd;
use kvasir_resp::Reply;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use tokio::sync::oneshot;

/// Slots one round gathers at most, and commands per slot: beyond them the
/// round is proposed and a new one starts.
const MAX_SLOTS: usize = 64;
const MAX_PER_SLOT: usize = 1024;

/// One slot's commands of a round.
struct SlotRun {
    slot: u16,
    cmds: Vec<Vec<Bytes>>,
    replies: Vec<oneshot::Sender<Reply>>,
}

/// The commands of one connection's read gathered per slot.
pub struct BatchRound {
    node: Rc<ClusterNode>,
    db: usize,
    runs: RefCell<Vec<SlotRun>>,
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
    /// where the round has writes for its slot already.
    pub fn accepts(&self, slot: u16, db: usize, write: bool) -> bool {
        if self.proposed.get() || self.db != db {
            return false;
        }
        let runs = self.runs.borrow();
        match runs.iter().find(|r| r.slot == slot) {
            Some(run) => run.cmds.len() < MAX_PER_SLOT,
            None => write && runs.len() < MAX_SLOTS,
        }
    }

    /// Whether the round has commands for `slot`.
    pub fn has_slot(&self, slot: u16) -> bool {
        self.runs.borrow().iter().any(|r| r.slot == slot)
    }

    /// Adds a command (see [`BatchRound::accepts`]); its reply comes when
    /// its slot's entry is applied.
    pub fn push(self: &Rc<Self>, slot: u16, args: &[Bytes]) -> Outcome {
        let (tx, rx) = oneshot::channel();
        {
            let mut runs = self.runs.borrow_mut();
            let at = match runs.iter().position(|r| r.slot == slot) {
                Some(at) => at,
                None => {
                    runs.push(SlotRun {
                        slot,
                        cmds: Vec::new(),
                        replies: Vec::new(),
                    });
                    runs.len() - 1
                }
            };
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

    /// Proposes the round (once): per slot, one command as it is, several
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

fn propose_run(node: &Rc<ClusterNode>, db: usize, run: SlotRun) {
    let SlotRun {
        slot,
        cmds,
        replies,
    } = run;
    let multi = cmds.len() > 1;
    let cmd = Cmd::Shard(ShardCmd::Commands { db, cmds, multi });
    let answer = match submit_for_batch(node, slot, cmd) {
        Ok(answer) => answer,
        Err(refusal) => {
            for tx in replies {
                let _ = tx.send(refusal.clone());
            }
            return;
        }
    };
    let node = node.clone();
    tokio::task::spawn_local(async move {
        let reply = match answer.await {
            Ok(r) => out_reply(&node, r, Some(slot)),
            Err(_) => Reply::error("ERR request dropped"),
        };
        match reply {
            Reply::Array(items) if multi && items.len() == replies.len() => {
                for (tx, item) in replies.into_iter().zip(items) {
                    let _ = tx.send(item);
                }
            }
            // One command, or the entry failed as a whole (a leader
            // change: every command gets the error).
            other => {
                for tx in replies {
                    let _ = tx.send(other.clone());
                }
            }
        }
    });
}
