//! Requests the I/O threads route themselves (`--threads N`, cluster
//! mode): a keyed command of one slot from a connection with no state the
//! main thread must see goes from the I/O thread that parsed it straight
//! to the loop that owns the slot's shard, whose reply comes straight
//! back. Sessions stay on the main thread for everything else; a node's
//! throughput is then no longer bounded by one thread running every
//! request (Dragonfly's connection fibers on the shard threads, Garnet's
//! network threads running the session).
//!
//! Which requests: a `Write` or `Read` handler that is no subcommand, not
//! blocking and not a script, whose keys are in one slot whose shard this
//! node leads; anything else (a redirect, a wait for an election,
//! CROSSSLOT, arity and unknown-command errors) goes to the session, which
//! answers as before. Which connections (the session says so before it
//! sends the last replies of each batch it answered,
//! `ParseGate::will_have_answered`): authenticated as an unrestricted
//! user, database 0, no MULTI, WATCH, subscriptions, tracking, READONLY,
//! MONITOR, CLIENT REPLY, NO-TOUCH or blocked command, nothing in flight
//! on the main thread. When (`direct_gate`, which opens [`DirectRoutes`]
//! before every batch's replies are written and on a timer): nobody
//! watches, tracks or waits on keys (the writes' hooks then have nothing
//! to tell) and no keyspace events are wanted, no MONITOR, no CLIENT
//! PAUSE, no ACL user restricted, not loading, and none of the settings
//! whose per-command checks live in the session is set (maxmemory,
//! latency-monitor-threshold, a slowlog threshold under 1 ms,
//! rename-command, a normal-client output limit). A connection or the
//! node that takes on such state closes the way before the reply of the
//! command that did it is written, so no request sent after that reply
//! goes directly.
//!
//! Replies keep request order: the pump sends a connection's requests to
//! its session only while none of its direct ones is in flight, and routes
//! directly only once the session answered everything it was sent. Reads
//! and writes keep it too ([`JobBatch`], [`InFlight`]): a read's writes to
//! a shard go as one entry that the reads of that shard join, and
//! otherwise reads and writes of a connection are not in flight together. The
//! calls are counted in INFO commandstats, latencystats, errorstats and
//! `total_commands_processed` as the session counts them (their time is
//! the routing on the I/O thread, as a session's is the dispatch without
//! the Raft round), merged into the server's stats when those are read.

use super::lanes::Job;
use super::sm::{self, Cmd, NodeSm, Out};
use bytes::Bytes;
use kvasir_core::machine::ShardCmd;
use kvasir_core::table::{resolve, Flags, Handler};
use kvasir_core::CommandSpec;
use kvasir_raft::{GroupRoles, MultiRaft, RaftError};
use kvasir_resp::{Protocol, Reply};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// A loop of the node (lane 0 the main thread's, then the shard threads'):
/// where its jobs go and the roles it publishes.
pub struct LoopHandle {
    pub jobs: mpsc::UnboundedSender<Job>,
    pub roles: Arc<GroupRoles>,
}

/// What I/O threads need to route requests to the node's loops, shared
/// with the main thread.
pub struct DirectRoutes {
    /// The shard of every slot (the bootstrap layout never changes).
    slot_shard: Vec<u64>,
    /// The loop of every shard this node holds a replica of.
    loop_of: HashMap<u64, usize>,
    loops: Vec<LoopHandle>,
    /// The node-wide condition (see the module comment), kept by the main
    /// thread.
    open: AtomicBool,
    /// `latency-tracking`, as the main thread last saw it.
    latency_tracking: AtomicBool,
    /// Requests routed by I/O threads since the start (INFO stats
    /// `io_threaded_routed_commands`).
    routed: AtomicU64,
    /// The calls' stats, until the main thread merges them.
    tally: Mutex<Tally>,
}

/// A command's direct calls since the main thread last merged them.
#[derive(Default)]
pub struct DirectStat {
    pub calls: u64,
    pub usec: u64,
    pub failed: u64,
    /// Each call's time (µs), for the latency histograms the main thread
    /// keeps (`latency-tracking`); at most [`MAX_SAMPLES`] between merges.
    pub samples: Vec<u32>,
}

/// Latency samples kept between two merges (the main thread merges every
/// [`MERGE_EVERY`] and whenever the stats are read).
const MAX_SAMPLES: usize = 1 << 20;

/// How often the main thread merges the direct calls' stats at least.
pub const MERGE_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The stats of direct calls since the main thread last merged them.
#[derive(Default)]
pub struct Tally {
    /// Keyed as the server's stats are (the command's table entry).
    pub commands: HashMap<usize, (&'static CommandSpec, DirectStat)>,
    pub processed: u64,
    /// Writes that did not fail (the server's `dirty` counter).
    pub writes: u64,
    /// Error replies by code (`WRONGTYPE`...).
    pub errors: HashMap<String, u64>,
    pub error_replies: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
}

impl Tally {
    /// Moves `other`'s counts into this one, leaving `other` counting from
    /// zero with its allocations kept.
    fn take_from(&mut self, other: &mut Tally, latency_tracking: bool) {
        for (key, (spec, stat)) in other.commands.iter_mut() {
            if stat.calls == 0 {
                continue;
            }
            let (_, mine) = self
                .commands
                .entry(*key)
                .or_insert_with(|| (*spec, DirectStat::default()));
            mine.calls += std::mem::take(&mut stat.calls);
            mine.usec += std::mem::take(&mut stat.usec);
            mine.failed += std::mem::take(&mut stat.failed);
            if latency_tracking && mine.samples.len() < MAX_SAMPLES {
                mine.samples.append(&mut stat.samples);
            } else {
                stat.samples.clear();
            }
        }
        self.processed += std::mem::take(&mut other.processed);
        self.writes += std::mem::take(&mut other.writes);
        for (code, n) in other.errors.drain() {
            *self.errors.entry(code).or_insert(0) += n;
        }
        self.error_replies += std::mem::take(&mut other.error_replies);
        self.net_input_bytes += std::mem::take(&mut other.net_input_bytes);
        self.net_output_bytes += std::mem::take(&mut other.net_output_bytes);
    }

    fn is_empty(&self) -> bool {
        self.processed == 0 && self.net_input_bytes == 0 && self.net_output_bytes == 0
    }
}

/// A request routed to a loop, waiting for its reply.
pub struct DirectCall {
    pub reply: oneshot::Receiver<Result<Out, RaftError>>,
    spec: &'static CommandSpec,
    write: bool,
    /// The routing's time on the I/O thread.
    micros: u64,
}

/// Jobs for the loops gathered over one read: one hand-off per loop. Like
/// the session's rounds (`cluster::batch`), a read's writes to one shard
/// go as one entry, and a read of a shard that has writes in the batch
/// joins them (the log orders it after them); other reads go as reads.
#[derive(Default)]
pub struct JobBatch {
    /// Per shard with writes: its lane and commands, with their repliers.
    runs: Vec<Run>,
    /// Reads of shards without writes in the batch.
    reads: Vec<(usize, u64, Cmd, Replier)>,
}

type Replier = oneshot::Sender<Result<Out, RaftError>>;

struct Run {
    shard: u64,
    lane: usize,
    cmds: Vec<Vec<Bytes>>,
    replies: Vec<Replier>,
}

/// What a request routed directly is, found before it is batched.
pub struct Routable {
    spec: &'static CommandSpec,
    write: bool,
    shard: u64,
    lane: usize,
}

/// Whether the calls in flight on a connection read or write: a read is
/// not routed while writes of the connection are in flight (unless it
/// joins their entry), nor a write while reads are, as the session keeps
/// consecutive reads or writes in flight together and nothing else.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum InFlight {
    Reads,
    Writes,
}

impl DirectRoutes {
    pub fn new(
        slot_shard: Vec<u64>,
        loop_of: HashMap<u64, usize>,
        loops: Vec<LoopHandle>,
    ) -> DirectRoutes {
        DirectRoutes {
            slot_shard,
            loop_of,
            loops,
            open: AtomicBool::new(false),
            latency_tracking: AtomicBool::new(true),
            routed: AtomicU64::new(0),
            tally: Mutex::default(),
        }
    }

    /// The main thread's side: whether the node-wide condition holds.
    pub fn set_open(&self, open: bool, latency_tracking: bool) {
        if self.open.load(Ordering::Relaxed) != open {
            self.open.store(open, Ordering::SeqCst);
        }
        if self.latency_tracking.load(Ordering::Relaxed) != latency_tracking {
            self.latency_tracking
                .store(latency_tracking, Ordering::Relaxed);
        }
    }

    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    pub fn routed(&self) -> u64 {
        self.routed.load(Ordering::Relaxed)
    }

    /// The main thread's side: the calls' stats since the last take.
    pub fn take_tally(&self) -> Tally {
        std::mem::take(&mut *self.tally.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// What `args` is, if it may go directly (see the module comment; the
    /// connection's and node's conditions are the caller's).
    pub fn routable(&self, args: &[Bytes]) -> Option<Routable> {
        let (spec, parent) = resolve(args).ok()?;
        let write = match spec.handler {
            Handler::Write(_) => true,
            Handler::Read(_) => false,
            _ => return None,
        };
        if parent.is_some() || spec.flags.contains(Flags::BLOCKING) || spec.group == "scripting" {
            return None;
        }
        let slot = kvasir_cluster::command_slot(spec, args).ok()??;
        let shard = *self.slot_shard.get(slot as usize)?;
        let lane = *self.loop_of.get(&shard)?;
        if !self.loops.get(lane)?.roles.is_leader(shard) {
            return None;
        }
        Some(Routable {
            spec,
            write,
            shard,
            lane,
        })
    }

    /// Adds `args` (found [`DirectRoutes::routable`]) to `batch`, if it
    /// may go with what is in flight (`in_flight`, updated), to be handed
    /// over with [`JobBatch::send`]; else gives them back.
    pub fn add(
        &self,
        r: Routable,
        args: Vec<Bytes>,
        batch: &mut JobBatch,
        in_flight: &mut Option<InFlight>,
        started: Instant,
    ) -> Result<DirectCall, Vec<Bytes>> {
        let (tx, rx) = oneshot::channel();
        let joins = batch.runs.iter().position(|run| run.shard == r.shard);
        if r.write || joins.is_some() {
            if *in_flight == Some(InFlight::Reads) {
                return Err(args);
            }
            let at = match joins {
                Some(at) if batch.runs[at].cmds.len() < super::batch::MAX_PER_SHARD => at,
                Some(_) => return Err(args),
                None if batch.runs.len() < super::batch::MAX_SHARDS => {
                    batch.runs.push(Run {
                        shard: r.shard,
                        lane: r.lane,
                        cmds: Vec::new(),
                        replies: Vec::new(),
                    });
                    batch.runs.len() - 1
                }
                None => return Err(args),
            };
            batch.runs[at].cmds.push(args);
            batch.runs[at].replies.push(tx);
            *in_flight = Some(InFlight::Writes);
        } else {
            if *in_flight == Some(InFlight::Writes) {
                return Err(args);
            }
            let cmd = Cmd::Shard(ShardCmd::Commands {
                db: 0,
                cmds: vec![args],
                multi: false,
            });
            batch.reads.push((r.lane, r.shard, cmd, tx));
            *in_flight = Some(InFlight::Reads);
        }
        self.routed.fetch_add(1, Ordering::Relaxed);
        Ok(DirectCall {
            reply: rx,
            spec: r.spec,
            write: r.write,
            micros: started.elapsed().as_micros() as u64,
        })
    }

    /// Hands an I/O thread's counts of finished calls (and of the bytes
    /// they came and went as) to the main thread.
    pub fn count(&self, tally: &mut Tally) {
        if tally.is_empty() {
            return;
        }
        let tracking = self.latency_tracking();
        self.tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_from(tally, tracking);
    }

    pub fn latency_tracking(&self) -> bool {
        self.latency_tracking.load(Ordering::Relaxed)
    }
}

impl JobBatch {
    /// Hands each loop its jobs of this batch, in one job per loop: each
    /// shard's writes (and the reads that joined them) as one entry, then
    /// the reads.
    pub fn send(&mut self, routes: &DirectRoutes) {
        let mut per_loop: Vec<Vec<Routed>> = Vec::new();
        per_loop.resize_with(routes.loops.len(), Vec::new);
        for run in self.runs.drain(..) {
            let Some(jobs) = per_loop.get_mut(run.lane) else {
                continue;
            };
            let multi = run.cmds.len() > 1;
            let cmd = Cmd::Shard(ShardCmd::Commands {
                db: 0,
                cmds: run.cmds,
                multi,
            });
            let mut bytes = Vec::new();
            sm::encode(&cmd, &mut bytes);
            let mut replies = run.replies;
            let tx = if multi {
                let (tx, rx) = oneshot::channel();
                tokio::spawn(hand_out(rx, replies));
                tx
            } else {
                match replies.pop() {
                    Some(tx) => tx,
                    None => continue,
                }
            };
            jobs.push(Routed::Propose(run.shard, bytes, tx));
        }
        for (lane, shard, cmd, tx) in self.reads.drain(..) {
            if let Some(jobs) = per_loop.get_mut(lane) {
                jobs.push(Routed::Read(shard, cmd, tx));
            }
        }
        for (handle, routed) in routes.loops.iter().zip(per_loop) {
            if routed.is_empty() {
                continue;
            }
            // A stopped loop drops the job and its senders: the calls
            // answer "request dropped".
            let _ = handle.jobs.send(Box::new(move |raft: &MultiRaft<NodeSm>| {
                for r in routed {
                    match r {
                        Routed::Propose(shard, bytes, tx) => raft.propose_encoded(shard, bytes, tx),
                        Routed::Read(shard, cmd, tx) => raft.read_to(shard, cmd, tx),
                    }
                }
            }));
        }
    }
}

enum Routed {
    Propose(u64, Vec<u8>, Replier),
    Read(u64, Cmd, Replier),
}

/// Hands each command of a batched entry its own reply (the entry answers
/// an array of them, in order), or each the entry's error.
async fn hand_out(entry: oneshot::Receiver<Result<Out, RaftError>>, replies: Vec<Replier>) {
    let Ok(outcome) = entry.await else {
        // Dropped: so are the repliers ("request dropped").
        return;
    };
    match outcome {
        Ok(Out::Reply(Reply::Array(items))) if items.len() == replies.len() => {
            for (tx, item) in replies.into_iter().zip(items) {
                let _ = tx.send(Ok(Out::Reply(item)));
            }
        }
        Ok(Out::Reply(other)) => {
            for tx in replies {
                let _ = tx.send(Ok(Out::Reply(other.clone())));
            }
        }
        Ok(Out::Block(on)) => {
            for tx in replies {
                let _ = tx.send(Ok(Out::Reply(on.on_timeout.clone())));
            }
        }
        Err(e) => {
            for tx in replies {
                let _ = tx.send(Err(e.clone()));
            }
        }
    }
}

impl DirectCall {
    pub fn name(&self) -> &'static str {
        self.spec.name
    }

    /// The client's reply to a finished call, counted in `tally`.
    pub fn finish(
        self,
        result: Option<Result<Out, RaftError>>,
        tally: &mut Tally,
        latency_tracking: bool,
    ) -> Reply {
        let reply = match result {
            Some(Ok(Out::Reply(r))) => r,
            Some(Ok(Out::Block(on))) => on.on_timeout,
            // The leadership moved between the routing and the proposal:
            // the retry reaches the session, which redirects.
            Some(Err(RaftError::NotLeader(_))) => kvasir_cluster::route::try_again(),
            Some(Err(e)) => super::raft_error_text(e),
            None => Reply::error("ERR request dropped"),
        };
        let (_, stat) = tally
            .commands
            .entry(self.spec as *const CommandSpec as usize)
            .or_insert_with(|| (self.spec, DirectStat::default()));
        stat.calls += 1;
        stat.usec += self.micros;
        if latency_tracking {
            stat.samples.push(self.micros.min(u32::MAX as u64) as u32);
        }
        tally.processed += 1;
        if let Reply::Error(text) = &reply {
            stat.failed += 1;
            tally.error_replies += 1;
            let code = text.split(' ').next().unwrap_or("ERR").to_string();
            *tally.errors.entry(code).or_insert(0) += 1;
        } else if self.write && self.spec.flags.contains(Flags::WRITE) {
            tally.writes += 1;
        }
        reply
    }
}

/// The protocol a connection's gate stores (0: no direct routing).
pub fn protocol_code(proto: Protocol) -> u8 {
    match proto {
        Protocol::Resp2 => 2,
        Protocol::Resp3 => 3,
    }
}

pub fn protocol_of(code: u8) -> Option<Protocol> {
    match code {
        2 => Some(Protocol::Resp2),
        3 => Some(Protocol::Resp3),
        _ => None,
    }
}
