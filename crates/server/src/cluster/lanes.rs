//! Shard threads. With `--threads N` a cluster node spreads the Raft
//! groups of its shards over N loops ("lanes"): lane 0 is the main
//! thread's (which also runs group 0, the cluster bus and the sessions),
//! lanes 1..N-1 each run on a thread of their own. A shard's group, its
//! store and the apply of its entries belong to exactly one lane, so the
//! data path has no locks; the lanes share the node's raft-engine log (its
//! write queue merges concurrent synced writes into one fsync, which keeps
//! group commit across lanes) and its transport (which hands each received
//! message to the inbox of its group's lane).
//!
//! The main thread reaches a lane only through jobs it sends it
//! (proposals already encoded, reads, reads of the store) and hears of
//! what the lane's applies wrote through one ordered channel
//! ([`LaneWrite`]), which it drains before it uses a reply from a lane.

use super::sm::{HookSink, LaneWrite, NodeSm, ShardCounts, ShardSm};
use kvasir_raft::transport::{Inbox, Transport};
use kvasir_raft::{Fatal, GroupRoles, GroupSpec, GroupStatus, LogCounters, LogWriter, MultiRaft};
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tracing::error;

/// Work for a lane, run on its thread with its loop.
pub type Job = Box<dyn FnOnce(&MultiRaft<NodeSm>) + Send>;

/// How often a lane publishes its groups' status (INFO raft, cluster
/// status): routing does not use it (see [`GroupRoles`]).
const STATUS_EVERY: Duration = Duration::from_millis(50);

/// The main thread's handle on a shard thread.
pub struct Lane {
    jobs: mpsc::UnboundedSender<Job>,
    pub roles: Arc<GroupRoles>,
    pub counters: Arc<LogCounters>,
    status: Arc<Mutex<Vec<GroupStatus>>>,
}

impl Lane {
    /// Sends a job. If the lane has stopped the job is dropped, and with it
    /// any reply sender it holds: the caller's receiver sees the end.
    pub fn run(&self, job: Job) {
        let _ = self.jobs.send(job);
    }

    /// What an I/O thread needs to hand this lane requests itself.
    pub fn handle(&self) -> super::direct::LoopHandle {
        super::direct::LoopHandle {
            jobs: self.jobs.clone(),
            roles: self.roles.clone(),
        }
    }

    /// The lane's groups as it last published them.
    pub fn status(&self) -> Vec<GroupStatus> {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// One shard replica a lane is to run.
pub struct LaneShard {
    pub id: u64,
    pub voters: Vec<u64>,
    pub preferred_leader: u64,
    pub counts: Arc<ShardCounts>,
}

/// What a shard thread needs to start.
pub struct LaneSetup {
    pub lane: usize,
    pub cfg: kvasir_raft::Config,
    pub engine: Arc<kvasir_raft::LogEngine>,
    pub transport: Arc<Transport>,
    pub inbox: Arc<Inbox>,
    pub shards: Vec<LaneShard>,
    pub writes: mpsc::UnboundedSender<LaneWrite>,
    pub notify: Arc<AtomicU32>,
    pub keys_wanted: Arc<AtomicBool>,
    pub fatal: mpsc::UnboundedSender<Fatal>,
    pub writer: Arc<LogWriter>,
}

/// Tells the main thread when a shard thread ends for any reason (a panic
/// in a job included): its shards are gone, so the node must stop rather
/// than answer for them with errors.
struct StopGuard {
    lane: usize,
    fatal: mpsc::UnboundedSender<Fatal>,
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        let _ = self.fatal.send(Fatal::LoopStopped(format!(
            "shard thread {} stopped",
            self.lane
        )));
    }
}

/// Starts a shard thread, which restores its groups from the log and runs
/// their loop; returns once they are restored (or could not be).
pub async fn spawn(setup: LaneSetup) -> Result<Lane, String> {
    let (jobs, mut job_rx) = mpsc::unbounded_channel::<Job>();
    let (ready_tx, ready_rx) = oneshot::channel();
    let status: Arc<Mutex<Vec<GroupStatus>>> = Arc::default();
    let published = status.clone();
    let name = format!("kvasir-shard-{}", setup.lane);
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let _stop = StopGuard {
                lane: setup.lane,
                fatal: setup.fatal.clone(),
            };
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("{name}: {e}")));
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let LaneSetup {
                    lane,
                    cfg,
                    engine,
                    transport,
                    inbox,
                    shards,
                    writes,
                    notify,
                    keys_wanted,
                    fatal,
                    writer,
                } = setup;
                let specs = shards
                    .into_iter()
                    .map(|s| {
                        let hooks = HookSink::Lane {
                            events: writes.clone(),
                            notify: notify.clone(),
                            keys_wanted: keys_wanted.clone(),
                        };
                        GroupSpec {
                            id: s.id,
                            voters: s.voters,
                            preferred_leader: s.preferred_leader,
                            sm: NodeSm::Shard(ShardSm::new(s.id, hooks, s.counts)),
                        }
                    })
                    .collect();
                let started =
                    MultiRaft::start_lane(cfg, engine, transport, inbox, specs, lane, Some(writer));
                let raft = match started {
                    Ok(raft) => raft,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((raft.roles().clone(), raft.counters().clone())));
                let r = raft.clone();
                tokio::task::spawn_local(async move {
                    loop {
                        let groups = r.status();
                        *published.lock().unwrap_or_else(|e| e.into_inner()) = groups;
                        tokio::time::sleep(STATUS_EVERY).await;
                    }
                });
                let r = raft.clone();
                tokio::task::spawn_local(async move {
                    let f = r.fatal().await;
                    let _ = fatal.send(f);
                });
                while let Some(job) = job_rx.recv().await {
                    job(&raft);
                }
            });
        })
        .map_err(|e| format!("starting a shard thread: {e}"))?;
    match ready_rx.await {
        Ok(Ok((roles, counters))) => Ok(Lane {
            jobs,
            roles,
            counters,
            status,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            let e = "a shard thread stopped while starting".to_string();
            error!("{e}");
            Err(e)
        }
    }
}
