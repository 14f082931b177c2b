//! One connection: read bytes, parse every complete request, run each in
//! order, write all replies of that read back in one write (pipelining
//! keeps request order because requests run one after another). A blocked
//! command (BLPOP...) holds the connection's later requests until it is
//! served or times out; pub/sub messages are written as they arrive.

use crate::client_conn::{ClientConn, ParsedRequests};
use crate::clients::ClientInfo;
use crate::listener::{CmdStat, Server};
use crate::transaction::Transaction;
use bytes::{Bytes, BytesMut};
use kvasir_core::error::BlockOn;
use kvasir_core::table::{resolve, Flags, Handler};
use kvasir_core::CommandSpec;
use kvasir_resp::{encode, parse_command, Limits, Parsed, Protocol, Reply};
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A command's table entry and, for a subcommand, its container's.
type CommandEntry = (&'static CommandSpec, Option<&'static CommandSpec>);

/// Replies up to this size wait for the loop's other ready connections
/// before they are written (see `serve`); larger ones go out at once, while
/// they are still in the cache (LRANGE of hundreds of elements lost 30%
/// when fifty connections' replies waited together).
const DEFER_FLUSH_MAX: usize = 8 * 1024;

const READ_CHUNK: usize = 16 * 1024;
/// Never reserve more than this at once for a declared bulk: a client that
/// announces 512 MB must send it before it costs us 512 MB.
const MAX_RESERVE: usize = 64 * 1024 * 1024;

/// The state of one connection.
pub struct Session {
    pub server: Rc<Server>,
    pub info: Rc<ClientInfo>,
    pub proto: Protocol,
    pub db: usize,
    pub authenticated: bool,
    /// The command being answered was refused before it ran (NOAUTH,
    /// NOPERM, OOM, arity, a cluster redirect...): INFO commandstats counts
    /// it as a rejected call, as Redis does, not as a call.
    pub rejected: std::cell::Cell<bool>,
    /// The ACL user the connection runs as (`default` until AUTH).
    pub user: crate::acl::UserRef,
    /// Set by QUIT and protocol errors: close after flushing replies.
    pub close: bool,
    /// Set by SHUTDOWN: the connection closes without a reply.
    pub silent: bool,
    /// MULTI state and watched keys.
    pub txn: Transaction,
    /// Channels and patterns this connection subscribes to.
    pub channels: BTreeSet<Bytes>,
    pub patterns: BTreeSet<Bytes>,
    /// Shard channels (SSUBSCRIBE).
    pub shard_channels: BTreeSet<Bytes>,
    /// Cluster mode: READONLY was sent (reads may be served by a replica).
    pub readonly: bool,
    /// REPLCONF rdb-filter-only functions: SYNC sends only the function
    /// libraries (`redis-cli --functions-rdb`).
    pub rdb_functions_only: bool,
    /// SYNC answered: its image goes out whatever the output limits, as
    /// Redis sends a replica its image outside the reply buffer.
    pub sync_transfer: bool,
    /// Cluster mode: replies of this read batch in request order, some
    /// still waiting for Raft. Consecutive writes (or consecutive reads)
    /// are in flight together; anything else waits for them first.
    pending: std::collections::VecDeque<PendingReply>,
    pending_kind: Option<PendingKind>,
    /// CLIENT REPLY: what happens to the replies of coming commands.
    pub reply_mode: ReplyMode,
    /// The parked command's reply is to be dropped (CLIENT REPLY).
    parked_silent: bool,
    /// The parked command, whose final reply may still fail it (errorstats,
    /// failed_calls), as Redis's updateStatsOnUnblock counts.
    parked_command: Option<(CommandEntry, Vec<Bytes>)>,
    /// The command being accounted has just blocked: the slow log gets
    /// it when it is served, as Redis logs a blocked command.
    blocking_now: std::cell::Cell<bool>,
    /// The commands of each EXEC in flight, in the order of its reply
    /// (`None` where the ACL recheck refused one): their errors count in
    /// errorstats and as failed calls when the EXEC's reply is accounted.
    exec_commands: std::cell::RefCell<std::collections::VecDeque<Vec<Option<CommandEntry>>>>,
    /// Pushes that go out before the reply of the command being run (the
    /// invalidations of keys evicted to make room for it).
    early_pushes: Vec<Reply>,
    /// Cluster mode: this connection's pipelined commands gathered into one
    /// entry per shard, not proposed yet ([`crate::cluster::batch`]).
    pub open_batch: Option<Rc<crate::cluster::batch::BatchRound>>,
}

/// CLIENT REPLY ON|OFF|SKIP, as Redis's CLIENT_REPLY_OFF, _SKIP and
/// _SKIP_NEXT flags: SKIP silences the command after it, OFF every command
/// until ON.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct ReplyMode {
    pub off: bool,
    /// The reply of the command running now is dropped.
    pub skip: bool,
    /// CLIENT REPLY SKIP ran: the next command's reply is dropped.
    pub skip_next: bool,
}

impl ReplyMode {
    fn silenced(&self) -> bool {
        self.off || self.skip
    }

    /// After each command (Redis's resetClient): SKIP lasts one command.
    fn command_done(&mut self) {
        self.skip = std::mem::take(&mut self.skip_next);
    }
}

/// A reply in request order: ready, or waiting for its shard (and then
/// dropped if CLIENT REPLY silenced the command).
enum PendingReply {
    Ready(Reply),
    Wait(Box<PendingOp>, bool),
    /// A command still running (`Outcome::Running`), accounted when its
    /// reply comes.
    Running(Box<PendingOp>, bool, Box<RunningCommand>),
}

/// What accounting a running command needs once it ends.
struct RunningCommand {
    args: Vec<Bytes>,
    spec: Option<(&'static CommandSpec, Option<&'static CommandSpec>)>,
    started: Instant,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PendingKind {
    Writes,
    Reads,
}

/// A command in flight (cluster mode: proposed to its shard's log or
/// waiting for a ReadIndex); the router's future yields its reply, so the
/// session knows nothing of Raft, leaders or redirects.
pub struct PendingOp {
    pub reply: std::pin::Pin<Box<dyn std::future::Future<Output = Finished>>>,
    pub write: bool,
    /// A blocking command: nothing may overtake it.
    pub blocking: bool,
}

/// What a command in flight ended with.
pub enum Finished {
    Reply(Reply),
    /// A reply already in RESP form, sent as it is: SYNC's image (as large
    /// as the data), put together on a blocking thread so that the data
    /// thread does not copy it into the connection's buffer.
    Encoded(BytesMut),
    /// WATCH: the digests the shard read for the keys, to remember in the
    /// transaction state.
    Watched {
        slot: u16,
        keys: Vec<Bytes>,
        digests: Vec<u64>,
    },
}

/// A command's answer once it finished: a reply to encode, or one
/// already encoded ([`Finished::Encoded`]).
enum Answer {
    Reply(Reply),
    Encoded(BytesMut),
}

impl Answer {
    /// The reply, where an encoded one cannot come (a script's).
    fn into_reply(self) -> Reply {
        match self {
            Answer::Reply(r) => r,
            Answer::Encoded(_) => Reply::error("ERR internal: an encoded reply from a script"),
        }
    }
}

/// What running one request produced.
pub enum Outcome {
    Reply(Reply),
    /// Several top-level replies (SUBSCRIBE a b answers once per channel).
    Replies(Vec<Reply>),
    /// A blocking command found nothing on the standalone store: park the
    /// client.
    Block(Box<BlockOn>),
    /// A blocking command in cluster mode, registered as a waiter before it
    /// was proposed: its reply comes through the registry.
    Parked(Parked),
    /// Cluster mode: proposed or queued for a ReadIndex.
    Pending(Box<PendingOp>),
    /// Still running on this node (a script paused past
    /// busy-reply-threshold): accounted in commandstats and the slow log
    /// when it ends, with its whole duration.
    Running(Box<PendingOp>),
}

impl From<Reply> for Outcome {
    fn from(r: Reply) -> Self {
        Outcome::Reply(r)
    }
}

/// A parked command waiting for its reply.
pub struct Parked {
    /// The waiter in the blocked-client registry (none for WAIT).
    pub id: Option<u64>,
    pub rx: oneshot::Receiver<Reply>,
}

/// Serves one connection until it closes. Generic over the connection:
/// the session's own socket (`--threads 1`) or an I/O thread's
/// ([`crate::client_conn::ChannelConn`]); each gets its own compiled copy.
pub async fn run<C: ClientConn>(server: Rc<Server>, mut conn: C, addr: crate::clients::ClientAddr) {
    let laddr = conn.local_addr().unwrap_or_else(|_| addr.clone());
    let info = server.clients.borrow_mut().register(addr, laddr, conn.fd());
    if let Some(gate) = conn.parse_gate() {
        let _ = info.io_pump.set(gate);
    }
    server.stats.borrow_mut().total_connections_received += 1;
    let user = server.acl.borrow().default_user();
    let authenticated = !server.acl.borrow().auth_required();
    let mut session = Session {
        rejected: std::cell::Cell::new(false),
        user,
        server: server.clone(),
        info: info.clone(),
        proto: Protocol::Resp2,
        db: 0,
        authenticated,
        close: false,
        silent: false,
        txn: Transaction::default(),
        channels: BTreeSet::new(),
        patterns: BTreeSet::new(),
        shard_channels: BTreeSet::new(),
        readonly: false,
        rdb_functions_only: false,
        sync_transfer: false,
        pending: std::collections::VecDeque::new(),
        pending_kind: None,
        reply_mode: ReplyMode::default(),
        parked_silent: false,
        parked_command: None,
        blocking_now: std::cell::Cell::new(false),
        exec_commands: Default::default(),
        early_pushes: Vec::new(),
        open_batch: None,
    };
    session.serve(&mut conn).await;
    info.ended.set(true);
    session.cleanup();
    server.clients.borrow_mut().unregister(info.id);
}

impl Session {
    /// Commands other than AUTH, HELLO... are refused until the
    /// connection authenticates, while the default user has a password or
    /// is off.
    pub fn auth_required(&self) -> bool {
        !self.authenticated && self.server.acl.borrow().auth_required()
    }

    fn limits(&self) -> (Limits, usize) {
        let c = self.server.config.borrow();
        let limits = Limits {
            max_bulk_len: c.proto_max_bulk_len,
            unauthenticated: self.auth_required(),
            ..Limits::default()
        };
        (limits, c.client_query_buffer_limit)
    }

    /// Drops everything the connection registered with the server.
    fn cleanup(&mut self) {
        self.txn.unwatch_all(&self.server, self.info.id);
        crate::pubsub::unsubscribe_all(self);
        crate::monitor::stop(self);
        if self.info.tracking.borrow().on {
            self.server.tracking.borrow_mut().disable(&self.info);
        }
    }

    async fn serve<C: ClientConn>(&mut self, conn: &mut C) {
        let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
        // Requests the connection parsed (an I/O thread's), before `inbuf`.
        let mut parsed = ParsedRequests::default();
        // A request larger than a few chunks made `inbuf` reserve for it.
        let mut grown = false;
        let mut out = BytesMut::with_capacity(READ_CHUNK);
        // Created once: polling a fresh `notified()` every read would
        // register a waiter (a lock) per request.
        let info = self.info.clone();
        let kill = info.kill.notified();
        tokio::pin!(kill);
        let release = info.idle_release.notified();
        tokio::pin!(release);
        let pushed = info.push_ready.notified();
        tokio::pin!(pushed);
        // The buffers were given back while idle: the next read starts
        // small (BytesMut grows its first chunk) instead of reserving.
        let mut released = false;
        loop {
            let (mut limits, qbuf_limit) = self.limits();
            conn.parse_ahead((!limits.unauthenticated).then_some(limits.max_bulk_len));
            if !released && inbuf.capacity() - inbuf.len() < READ_CHUNK / 4 {
                inbuf.reserve(READ_CHUNK);
            }
            let n = tokio::select! {
                biased;
                _ = &mut kill => return,
                () = &mut release => {
                    // Idle (the clients cron says so): 32 KB per
                    // connection add up over a pool of idle connections.
                    if inbuf.is_empty() {
                        inbuf = BytesMut::new();
                    }
                    if out.is_empty() {
                        out = BytesMut::new();
                    }
                    released = true;
                    self.info.qbuf_free.set(inbuf.capacity() - inbuf.len());
                    self.info.reply_buf.set(out.capacity());
                    release.set(info.idle_release.notified());
                    continue;
                }
                () = &mut pushed => {
                    pushed.set(info.push_ready.notified());
                    // Taken, they count as replies waiting (`flush`): a
                    // client that does not read is over its output limit
                    // either way.
                    let mut taken = false;
                    while let Some(msg) = self.info.next_push() {
                        encode(&msg, self.proto, &mut out);
                        taken = true;
                        if out.len() > READ_CHUNK * 4 {
                            break;
                        }
                    }
                    if self.info.has_pushes() {
                        // The rest after this write.
                        self.info.push_ready.notify_one();
                    }
                    if !taken {
                        // Taken already, after the command that queued it.
                        continue;
                    }
                    if !self.flush(conn, &mut out).await {
                        return;
                    }
                    continue;
                }
                r = conn.read_input(&mut inbuf, &mut parsed) => match r {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                },
            };
            self.server.stats.borrow_mut().net_input_bytes += n as u64;
            if released {
                released = false;
                self.info.buffers_released.set(false);
            }
            // While its commands run, the query buffer holds them (CLIENT
            // LIST's qbuf, as in Redis); what is left is set after.
            self.info.qbuf.set(parsed.bytes + inbuf.len());
            self.info.qbuf_free.set(inbuf.capacity() - inbuf.len());
            self.info.reply_buf.set(out.capacity());
            self.server.local_store.borrow_mut().refresh_clock();
            let mut clock = Instant::now();
            self.info.last_interaction.set(clock);
            // Whether a reply of this read came from a shard thread (the
            // task has waited, so the loop's other connections had their
            // turn already).
            let mut waited = false;
            loop {
                let next = match parsed.commands.pop_front() {
                    // Parsed under the limits of when it was read.
                    Some(args) => limits.check_parsed(&args).map(|()| Parsed::Command(args)),
                    None => parse_command(&mut inbuf, &limits),
                };
                match next {
                    Ok(Parsed::Command(args)) => {
                        if args.is_empty() {
                            continue;
                        }
                        if !self.pending.is_empty() && !self.joins_pending(&args) {
                            self.drain_pending(&mut out).await;
                            waited = true;
                        }
                        if self.server.client_pause.is_set() {
                            if let Ok((spec, _)) = resolve(&args) {
                                if crate::client_pause::holds_now(self, spec, &args) {
                                    // Earlier replies go out; this one waits.
                                    if !self.pending.is_empty() {
                                        self.drain_pending(&mut out).await;
                                    }
                                    if !self.flush(conn, &mut out).await
                                        || !crate::client_pause::wait_while_held(self, spec, &args)
                                            .await
                                    {
                                        return;
                                    }
                                    clock = Instant::now();
                                }
                            }
                        }
                        if let Some(parked) = self.handle(args, &mut out, &mut clock) {
                            // Replies so far go out first; the blocked reply
                            // and everything after it wait. A client that
                            // waits on keys closes the direct routes.
                            crate::direct_gate::refresh(&self.server);
                            if !self.flush(conn, &mut out).await {
                                return;
                            }
                            let Some(reply) = self.wait_parked(parked, conn, &mut kill).await
                            else {
                                return;
                            };
                            self.account_unblocked(&reply);
                            if !self.parked_silent {
                                encode(&reply, self.proto, &mut out);
                            }
                            self.server.local_store.borrow_mut().refresh_clock();
                            clock = Instant::now();
                        }
                        // AUTH inside a pipeline lifts the limits for the
                        // requests after it.
                        limits.unauthenticated = self.auth_required();
                        if self.close {
                            break;
                        }
                    }
                    Ok(Parsed::Incomplete { min_total }) => {
                        if min_total > inbuf.len() {
                            inbuf.reserve((min_total - inbuf.len()).min(MAX_RESERVE));
                            grown |= min_total > 2 * READ_CHUNK;
                        }
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(client = self.info.id, "protocol error: {e}");
                        out.extend_from_slice(&e.reply_line());
                        self.close = true;
                        break;
                    }
                }
            }
            if !self.pending.is_empty() {
                self.drain_pending(&mut out).await;
                waited = true;
            }
            // A buffer a large request grew is given back once it is
            // parsed, as Redis shrinks an idle query buffer: kept, the
            // allocation (which the request's arguments shared) stayed
            // counted in used memory for the connection's lifetime.
            if inbuf.is_empty() && (grown || inbuf.capacity() > 2 * READ_CHUNK) {
                inbuf = BytesMut::with_capacity(READ_CHUNK);
                grown = false;
            }
            if parsed.commands.is_empty() {
                parsed.bytes = 0;
            }
            if inbuf.is_empty() {
                conn.query_buffer_empty();
            }
            self.info.qbuf.set(parsed.bytes + inbuf.len());
            self.info.qbuf_free.set(inbuf.capacity() - inbuf.len());
            if inbuf.len() > qbuf_limit {
                tracing::warn!(
                    client = self.info.id,
                    "closing client that reached max query buffer length"
                );
                self.close = true;
            }
            if !waited && !out.is_empty() && out.len() <= DEFER_FLUSH_MAX {
                // Small replies go out after every connection that is
                // ready has had its turn (Redis writes in beforeSleep): a
                // client then gets its replies in one burst per loop rather
                // than one wake-up per connection.
                tokio::task::yield_now().await;
            }
            // State this batch took on (MONITOR, WATCH, CLIENT PAUSE...)
            // closes the I/O threads' direct routes before its reply goes.
            crate::direct_gate::refresh(&self.server);
            conn.will_have_answered(!out.is_empty(), self.direct_protocol());
            if !self.flush(conn, &mut out).await {
                return;
            }
            if self.close || self.info.killed.get() {
                conn.shutdown().await;
                return;
            }
        }
    }

    /// The protocol to answer in if this connection's requests may go
    /// from its I/O thread to their shard directly: nothing of its state
    /// needs the session (`cluster::direct`).
    fn direct_protocol(&self) -> Option<Protocol> {
        let plain = self.server.cluster.is_some()
            && self.db == 0
            && !self.auth_required()
            && self.user.borrow().unrestricted
            && !self.txn.in_multi()
            && self.txn.watches_nothing()
            && self.channels.is_empty()
            && self.patterns.is_empty()
            && self.shard_channels.is_empty()
            && !self.readonly
            && self.reply_mode == ReplyMode::default()
            && !self.silent
            && self.pending.is_empty()
            && self.open_batch.as_ref().is_none_or(|r| r.is_proposed())
            && !self.info.monitor.get()
            && !self.info.no_touch.get()
            && !self.info.blocked.get()
            && !self.info.tracking.borrow().on;
        plain.then_some(self.proto)
    }

    /// Encodes a reply now, or queues it behind replies still in flight.
    fn emit(&mut self, reply: Reply, out: &mut BytesMut) {
        if self.pending.is_empty() {
            encode(&reply, self.proto, out);
        } else {
            self.pending.push_back(PendingReply::Ready(reply));
        }
    }

    /// Whether a command may be sent while the connection's earlier
    /// commands are still in flight: writes behind writes and reads behind
    /// reads keep their order (one log, one ReadIndex batch); a read behind
    /// a write must see it, so it waits.
    fn joins_pending(&self, args: &[Bytes]) -> bool {
        let Some(kind) = self.pending_kind else {
            return false;
        };
        if self.txn.in_multi() {
            return false;
        }
        match resolve(args) {
            Ok((spec, None)) => match spec.handler {
                Handler::Write(_) => {
                    kind == PendingKind::Writes && !spec.flags.contains(Flags::BLOCKING)
                }
                // A read of a shard the open batch round writes goes in it,
                // behind the writes it must see.
                Handler::Read(_) => {
                    kind == PendingKind::Reads
                        || crate::cluster::commands::joins_open_batch(self, spec, args)
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// Waits for every reply in flight and encodes all queued replies.
    async fn drain_pending(&mut self, out: &mut BytesMut) {
        while let Some(slot) = self.pending.pop_front() {
            let reply = match slot {
                PendingReply::Ready(r) => r,
                PendingReply::Wait(op, silent) => match self.finish_pending(*op).await {
                    _ if silent => continue,
                    Answer::Reply(reply) => reply,
                    Answer::Encoded(bytes) if out.is_empty() => {
                        *out = bytes;
                        continue;
                    }
                    Answer::Encoded(bytes) => {
                        out.extend_from_slice(&bytes);
                        continue;
                    }
                },
                PendingReply::Running(op, silent, cmd) => {
                    let reply = self.finish_pending(*op).await.into_reply();
                    self.account(&cmd.args, cmd.spec, &reply, cmd.started.elapsed());
                    if silent {
                        continue;
                    }
                    reply
                }
            };
            encode(&reply, self.proto, out);
        }
        self.pending_kind = None;
    }

    /// The reply of a command in flight; a kill ends the wait.
    async fn finish_pending(&mut self, op: PendingOp) -> Answer {
        let info = self.info.clone();
        let kill = info.kill.notified();
        tokio::pin!(kill);
        let finished = tokio::select! {
            f = op.reply => f,
            // The connection closes; this reply is never sent.
            _ = &mut kill => return Answer::Reply(Reply::Nil),
        };
        Answer::Reply(match finished {
            Finished::Reply(r) => r,
            Finished::Encoded(bytes) => return Answer::Encoded(bytes),
            Finished::Watched {
                slot,
                keys,
                digests,
            } => crate::transaction::remember_watch(self, slot, keys, &digests),
        })
    }

    /// Writes out pending replies; false if the connection is gone.
    async fn flush<C: ClientConn>(&self, conn: &mut C, out: &mut BytesMut) -> bool {
        if out.is_empty() {
            return true;
        }
        // Replies past the connection's reply buffer count against its
        // output limits, as Redis's reply list does: a client over them is
        // closed before any of it is written (a huge LRANGE or KEYS, a
        // pipeline of large GETs), so the server does not hold it.
        let unwritten = out.len() as u64;
        if unwritten > crate::clients::REPLY_BUFFER && !self.sync_transfer {
            self.info.reply_bytes.set(unwritten);
            if self.info.over_output_limit(self.info.waiting_bytes()) {
                self.info.reply_bytes.set(0);
                return false;
            }
        }
        // No reply goes out before the writes it may tell of are in the
        // append-only file.
        if !crate::aof_persistence::before_reply(&self.server).await {
            return false;
        }
        self.server.stats.borrow_mut().net_output_bytes += out.len() as u64;
        // A client that does not read is still closed when killed (CLIENT
        // KILL, its output limit).
        let kill = self.info.kill.notified();
        tokio::select! {
            biased;
            written = conn.write_out(out) => {
                if written.is_err() {
                    return false;
                }
            }
            _ = kill => return false,
        }
        self.info.reply_bytes.set(0);
        if self.info.queued_bytes.get() == 0 {
            // Everything waiting went out: a later reply over the soft
            // limit starts its own clock, as Redis's does once a client
            // is back under it.
            self.info.over_soft_since.set(None);
        }
        // A buffer a large reply (or a burst of invalidations) grew is
        // given back once written, as Redis frees its reply list: kept, it
        // counted in used memory for the connection's lifetime, and under
        // maxmemory eviction emptied the keyspace to pay for it.
        if out.capacity() > 2 * READ_CHUNK {
            *out = BytesMut::with_capacity(READ_CHUNK);
        }
        true
    }

    /// Waits for a parked command's reply (served or timed out by the
    /// registry), a kill, or the peer closing. None: the connection is
    /// finished.
    async fn wait_parked<C: ClientConn>(
        &mut self,
        mut parked: Parked,
        conn: &mut C,
        kill: &mut std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    ) -> Option<Reply> {
        self.info.parked_waiter.set(parked.id);
        let mut watch_close = true;
        let outcome = loop {
            tokio::select! {
                biased;
                r = &mut parked.rx => break r.ok(),
                _ = kill.as_mut() => break None,
                closed = conn.closed_or_more(), if watch_close => {
                    if closed {
                        // The client went away: it must not be served.
                        break None;
                    }
                    // It pipelined more requests: they wait their turn.
                    watch_close = false;
                }
            }
        };
        self.info.blocked.set(false);
        self.info.parked_waiter.set(None);
        if outcome.is_none() {
            // Whatever ended the wait, the waiter must not be served later;
            // a reply that raced the end wins.
            if let Some(id) = parked.id {
                self.server.blocking.borrow_mut().remove(id);
            }
            if let Ok(reply) = parked.rx.try_recv() {
                return Some(reply);
            }
        }
        outcome
    }

    /// Runs one request and appends its reply to `out`, or returns the
    /// parked command if it blocks. `clock` is when it started and becomes
    /// when it finished (one clock read per command).
    fn handle(
        &mut self,
        mut args: Vec<Bytes>,
        out: &mut BytesMut,
        clock: &mut Instant,
    ) -> Option<Parked> {
        // rename-command: from here on the command has its own name.
        let renamed = self.server.config.borrow().renames.apply(&mut args);
        let resolved = renamed.and_then(|()| resolve(&args));
        let early = self
            .refuse_while_loading(&resolved)
            .or_else(|| self.refuse_while_busy(&resolved))
            .or_else(|| match &resolved {
                Ok((spec, _)) if crate::monitor::refuses(&self.info, spec) => {
                    Some(Reply::error(crate::monitor::KEYSPACE_REFUSED))
                }
                _ => None,
            })
            .or_else(|| crate::transaction::queue_if_in_multi(self, &resolved, &args))
            .or_else(|| crate::pubsub::check_subscribed_mode(self, &resolved));
        if let Some(reply) = early {
            // A refusal before the command ran (BUSY, a queueing error,
            // subscribed mode) is a rejected call; +QUEUED is no call yet.
            if reply.is_error() {
                let named = match &resolved {
                    Ok(found) => Some(*found),
                    Err(_) => kvasir_core::table::named_command(&args),
                };
                self.rejected.set(true);
                self.account(&args, named, &reply, Duration::ZERO);
            }
            if !self.reply_mode.silenced() {
                self.emit(reply, out);
            }
            self.reply_mode.command_done();
            return None;
        }
        let tracking = self.info.tracking.borrow().on;
        if tracking && self.server.cluster.is_none() {
            // NOLOOP: the writes of this command are this client's own.
            // Standalone only: in cluster mode writes apply later, from the
            // Raft log, where the writer is not known (see operations.md).
            self.server.tracking.borrow().current.set(self.info.id);
        }
        let (outcome, spec) = match resolved {
            // Counted for the command it names (Redis's rejected_calls).
            Err(e @ kvasir_core::CmdError::WrongArity(_)) => {
                self.rejected.set(true);
                (
                    Outcome::Reply(e.to_reply()),
                    kvasir_core::table::named_command(&args),
                )
            }
            Err(e) => {
                self.rejected.set(true);
                (Outcome::Reply(e.to_reply()), None)
            }
            Ok((spec, parent)) => (self.dispatch(spec, parent, &args), Some((spec, parent))),
        };
        let end = Instant::now();
        let elapsed = end - *clock;
        *clock = end;
        // Read after the command ran: CLIENT REPLY ON lifts it for its
        // own +OK, as in Redis.
        let silenced = self.reply_mode.silenced();
        self.reply_mode.command_done();
        let tracking = tracking || self.info.tracking.borrow().on;
        if tracking {
            self.after_tracked_command(spec);
        }
        self.parked_silent = silenced;
        for msg in std::mem::take(&mut self.early_pushes) {
            self.emit(msg, out);
        }
        let parked = self.deliver(outcome, &args, spec, elapsed, silenced, out);
        if tracking && parked.is_none() {
            self.emit_queued_pushes(out);
        }
        parked
    }

    /// Redis's `-LOADING` while the data loads at start, for every command
    /// without the `loading` flag (after the authentication check, as in
    /// Redis); inside MULTI the transaction then fails at EXEC.
    fn refuse_while_loading(
        &mut self,
        resolved: &Result<
            (&'static CommandSpec, Option<&'static CommandSpec>),
            kvasir_core::CmdError,
        >,
    ) -> Option<Reply> {
        let Ok((spec, parent)) = resolved else {
            return None;
        };
        let top = parent.unwrap_or(spec);
        if !crate::loading::refuses(&self.server, spec)
            || (self.auth_required() && !top.flags.contains(Flags::NO_AUTH))
        {
            return None;
        }
        self.txn.refused_one();
        Some(Reply::error(crate::loading::LOADING_ERROR))
    }

    /// Redis's `-BUSY` while a script runs past busy-reply-threshold, for
    /// every command without the `allow_busy` flag (which SCRIPT KILL,
    /// FUNCTION KILL, FUNCTION STATS, SHUTDOWN, MULTI and the like have);
    /// inside MULTI the transaction then fails at EXEC.
    fn refuse_while_busy(
        &mut self,
        resolved: &Result<
            (&'static CommandSpec, Option<&'static CommandSpec>),
            kvasir_core::CmdError,
        >,
    ) -> Option<Reply> {
        let busy = self.server.busy_script()?;
        match resolved {
            // EXEC refused ends the transaction (Redis's execCommandAbort):
            // none of it runs, and the connection leaves MULTI.
            Ok((spec, _))
                if matches!(
                    spec.handler,
                    Handler::Session(kvasir_core::SessionCmd::Exec)
                ) && self.txn.in_multi() =>
            {
                crate::transaction::discard(self);
                Some(Reply::error(format!(
                    "EXECABORT Transaction discarded because of: {}",
                    busy.busy_error()
                )))
            }
            Ok((spec, _)) if !spec.flags.contains(Flags::ALLOW_BUSY) => {
                self.txn.refused_one();
                Some(Reply::error(busy.busy_error()))
            }
            _ => None,
        }
    }

    /// Accounts for a command's outcome and emits its reply (unless
    /// silenced), or returns the parked command.
    fn deliver(
        &mut self,
        outcome: Outcome,
        args: &[Bytes],
        spec: Option<(&'static CommandSpec, Option<&'static CommandSpec>)>,
        elapsed: Duration,
        silenced: bool,
        out: &mut BytesMut,
    ) -> Option<Parked> {
        match outcome {
            Outcome::Reply(reply) => {
                self.account(args, spec, &reply, elapsed);
                if !self.silent && !silenced {
                    self.emit(reply, out);
                }
                None
            }
            Outcome::Replies(replies) => {
                self.account(args, spec, &Reply::ok(), elapsed);
                for r in replies {
                    // (Un)subscribe confirmations are pushes, not replies:
                    // CLIENT REPLY does not silence them, in RESP2 either.
                    if !silenced || matches!(r, Reply::Push(_)) {
                        self.emit(r, out);
                    }
                }
                None
            }
            Outcome::Pending(op) => {
                self.account(args, spec, &Reply::ok(), elapsed);
                let kind = if op.write {
                    PendingKind::Writes
                } else {
                    PendingKind::Reads
                };
                self.pending_kind = Some(kind);
                if op.blocking {
                    // Nothing of this connection may overtake a blocked pop.
                    self.pending_kind = None;
                }
                self.pending.push_back(PendingReply::Wait(op, silenced));
                None
            }
            Outcome::Running(op) => {
                let cmd = RunningCommand {
                    args: args.to_vec(),
                    spec,
                    started: Instant::now() - elapsed,
                };
                // Nothing of this connection overtakes it.
                self.pending_kind = None;
                self.pending
                    .push_back(PendingReply::Running(op, silenced, Box::new(cmd)));
                None
            }
            Outcome::Block(on) => {
                self.blocking_now.set(true);
                self.account(args, spec, &Reply::ok(), elapsed);
                self.parked_command = spec.map(|entry| (entry, args.to_vec()));
                let (spec, _) = spec?;
                Some(self.park(spec, args.to_vec(), *on))
            }
            Outcome::Parked(parked) => {
                self.blocking_now.set(true);
                self.account(args, spec, &Reply::ok(), elapsed);
                self.parked_command = spec.map(|entry| (entry, args.to_vec()));
                self.info.blocked.set(true);
                Some(parked)
            }
        }
    }

    /// After a command of a tracking connection: NOLOOP's notion of "own
    /// writes" ends, and CLIENT CACHING lasts one command, or one
    /// transaction, unless the command was CLIENT itself (Redis's
    /// resetClient).
    fn after_tracked_command(
        &mut self,
        spec: Option<(&'static CommandSpec, Option<&'static CommandSpec>)>,
    ) {
        self.server.tracking.borrow().current.set(0);
        let was_client = spec.is_some_and(|(s, p)| p.unwrap_or(s).name == "client");
        if !self.txn.in_multi() && !was_client {
            self.info.tracking.borrow_mut().caching = false;
        }
    }

    /// Keys evicted to make room for this command: the invalidations this
    /// connection got for them are set aside to go out before its reply
    /// (Redis evicts before it runs the command), not after it with the
    /// command's own.
    fn take_eviction_pushes(&mut self) {
        if !self.server.memory_guard.take_evicted() {
            return;
        }
        while let Some(msg) = self.info.next_push() {
            self.early_pushes.push(msg);
        }
    }

    /// Emits the push messages queued for this connection (its own
    /// invalidations) right after the reply that caused them, as Redis
    /// sends them after the command instead of in the next event-loop turn.
    fn emit_queued_pushes(&mut self, out: &mut BytesMut) {
        while let Some(msg) = self.info.next_push() {
            self.emit(msg, out);
        }
    }

    fn park(&mut self, spec: &'static CommandSpec, args: Vec<Bytes>, on: BlockOn) -> Parked {
        let blocking = &self.server.blocking;
        // A command that rewrote its arguments when it blocked (XREAD's
        // `$`) runs the rewritten form when woken.
        let args = on.rerun.unwrap_or(args);
        let (id, rx) = blocking.borrow_mut().park(
            crate::router::LOCAL_SHARD,
            self.db,
            spec,
            args,
            on.keys,
            Some(on.on_timeout),
        );
        crate::blocking::arm_timeout(blocking, id, on.timeout_ms);
        self.info.blocked.set(true);
        Parked { id: Some(id), rx }
    }

    /// Runs a resolved command. `in_exec` is true inside EXEC, where
    /// blocking commands answer at once.
    pub fn dispatch(
        &mut self,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
        args: &[Bytes],
    ) -> Outcome {
        let top = parent.unwrap_or(spec);
        if self.auth_required() && !top.flags.contains(Flags::NO_AUTH) {
            self.rejected.set(true);
            return Reply::error("NOAUTH Authentication required.").into();
        }
        self.info.last_cmd.set(top.name);
        self.info
            .last_sub
            .set(if parent.is_some() { spec.name } else { "" });
        if let Some(refused) =
            crate::acl::refuse(self, spec, parent, args, crate::acl::Context::Toplevel)
        {
            self.rejected.set(true);
            return refused.into();
        }
        if let Some(refused) = crate::acl::refuse_patterns(self, spec, parent, args) {
            return refused.into();
        }
        match spec.handler {
            Handler::Write(_) | Handler::Read(_) => {
                let refused = self
                    .server
                    .refuses_for_memory(|| self.invocation_flags(spec, args));
                self.take_eviction_pushes();
                if refused {
                    self.rejected.set(true);
                    return Reply::error(crate::maxmemory::OOM).into();
                }
                if let Some(error) = self.disk_refusal(spec, args) {
                    self.rejected.set(true);
                    return Reply::error(error).into();
                }
                crate::tracking::remember_read(self, spec, args);
                crate::router::submit(self, spec, args)
            }
            Handler::Session(kvasir_core::SessionCmd::Ping) => {
                match self.disk_refusal(spec, args) {
                    Some(error) => {
                        self.rejected.set(true);
                        Reply::error(error).into()
                    }
                    None => crate::admin::run(self, kvasir_core::SessionCmd::Ping, args),
                }
            }
            Handler::Session(cmd) => crate::admin::run(self, cmd, args),
            // resolve() hands out a container only when it runs itself.
            Handler::Container => kvasir_core::error::unknown_command(args).to_reply().into(),
        }
    }

    /// A blocked command's final reply: an error (NOGROUP when its group
    /// was destroyed, UNBLOCKED...) counts in errorstats and as a failed
    /// call; the call itself was counted when it blocked.
    fn account_unblocked(&mut self, reply: &Reply) {
        let Some((entry, args)) = self.parked_command.take() else {
            return;
        };
        if let Reply::Error(text) = reply {
            let mut stats = self.server.stats.borrow_mut();
            count_error(&mut stats, text);
            count_failed(&mut stats, entry.0);
        }
        // Served now: its time here is the serving, not the wait.
        self.log_slow(Some(entry), &args, 0);
    }

    /// Updates commandstats, errorstats and the slow log.
    fn account(
        &self,
        args: &[Bytes],
        spec: Option<(&'static CommandSpec, Option<&'static CommandSpec>)>,
        reply: &Reply,
        elapsed: Duration,
    ) {
        let micros = elapsed.as_micros() as u64;
        let rejected = self.rejected.replace(false);
        let blocked = self.blocking_now.replace(false);
        let exec_commands = spec
            .filter(|(s, _)| {
                matches!(
                    s.handler,
                    Handler::Session(kvasir_core::connection::SessionCmd::Exec)
                )
            })
            .and_then(|_| self.exec_commands.borrow_mut().pop_front());
        {
            let mut stats = self.server.stats.borrow_mut();
            let from_script = spec.is_some_and(|(s, p)| p.unwrap_or(s).group == "scripting");
            if let Reply::Error(text) = reply {
                if !(from_script && counted_in_script(&mut stats, text)) {
                    count_error(&mut stats, text);
                }
            }
            if from_script {
                stats.script_errors_counted.clear();
            }
            // The errors of EXEC's commands, as Redis counts each command
            // of the block as a call of its own.
            if let (Some(commands), Reply::Array(items)) = (exec_commands, reply) {
                if commands.len() == items.len() {
                    for (command, item) in commands.into_iter().zip(items) {
                        if let Reply::Error(text) = item {
                            count_error(&mut stats, text);
                            if let Some((spec, _)) = command {
                                count_failed(&mut stats, spec);
                            }
                        }
                    }
                }
            }
            if rejected {
                // Not run: no call, no latency, no MONITOR or slow log line.
                if let Some((spec, parent)) = spec {
                    count_rejected(&mut stats, spec, parent);
                }
                return;
            }
            stats.total_commands_processed += 1;
            if let Some((spec, parent)) = spec {
                count_call(&mut stats, spec, parent, micros, reply.is_error());
            }
        }
        // Standalone, the write hooks count changes (`events::after_write`).
        if let Some((spec, _)) = spec.filter(|_| self.server.cluster.is_some()) {
            if spec.flags.contains(Flags::WRITE) && !reply.is_error() {
                self.server.dirty.set(self.server.dirty.get() + 1);
            }
        }
        if let Some((spec, parent)) = spec {
            let top = parent.unwrap_or(spec);
            crate::monitor::feed(&self.server, &self.info, self.db, top, spec, args);
        }
        let latency_ms = self.server.config.borrow().latency_monitor_threshold;
        if latency_ms > 0 && micros / 1000 >= latency_ms {
            let fast = spec.is_some_and(|(s, p)| p.unwrap_or(s).flags.contains(Flags::FAST));
            self.server.latency.borrow_mut().add(
                crate::latency::event_of(fast),
                micros / 1000,
                (crate::local_store::unix_ms() / 1000) as i64,
            );
        }
        if !blocked {
            self.log_slow(spec, args, micros);
        }
    }

    /// Puts a command that took `micros` in the slow log if that is long
    /// enough.
    fn log_slow(&self, spec: Option<CommandEntry>, args: &[Bytes], micros: u64) {
        let (threshold, max_len) = {
            let c = self.server.config.borrow();
            (c.slowlog_log_slower_than, c.slowlog_max_len)
        };
        // EXEC is not logged on a standalone server: its commands are,
        // each on its own (`transaction.rs`), as Redis logs them.
        let skip = spec.is_some_and(|(s, p)| {
            p.unwrap_or(s).flags.contains(Flags::SKIP_SLOWLOG) && self.server.cluster.is_none()
        });
        if threshold >= 0 && micros >= threshold as u64 && !skip {
            let command = spec.map_or("", |(s, p)| p.unwrap_or(s).name);
            self.server.slowlog.borrow_mut().record(
                max_len,
                micros,
                command,
                args,
                self.info.addr.to_string(),
                self.info.name.borrow().clone(),
                (crate::local_store::unix_ms() / 1000) as i64,
            );
        }
    }

    /// MISCONF for a command while the data cannot be persisted: writes
    /// and, as in Redis, PING, so that a health check sees it. Inside EXEC
    /// the transaction was checked as a whole (Redis checks a call, not
    /// what EXEC runs).
    pub fn disk_refusal(&self, spec: &CommandSpec, args: &[Bytes]) -> Option<String> {
        if self.txn.executing {
            return None;
        }
        let refused = match spec.handler {
            Handler::Write(_) | Handler::Read(_) => self.may_write(spec, args),
            Handler::Session(kvasir_core::SessionCmd::Ping) => true,
            _ => false,
        };
        match refused {
            true => crate::persistence::write_refusal(&self.server),
            false => None,
        }
    }

    /// Whether a command is refused as a write when the data cannot be
    /// persisted (Redis's MISCONF): a script without a shebang is not
    /// (its calls that write are refused as they run, Redis's
    /// scriptVerifyWriteCommandAllow); one with flags by what they declare.
    pub fn may_write(&self, spec: &CommandSpec, args: &[Bytes]) -> bool {
        if spec.group != "scripting" {
            return spec.is_write();
        }
        let local = self.server.local_store.borrow();
        let declared =
            kvasir_core::scripting::declared_flags(Some(&local.store().scripts), spec, args);
        declared.is_some_and(|d| {
            kvasir_core::scripting::command_flags(spec, Some(d)).contains(Flags::WRITE)
        })
    }

    /// The flags of this call of `spec`: a script's declared flags replace
    /// its command's, as Redis's getCommandFlags (a `no-writes` script runs
    /// during CLIENT PAUSE WRITE, a script that may write without
    /// `allow-oom` is refused over `maxmemory`). Standalone, bodies and
    /// functions are looked up in the store; in cluster mode they live on
    /// the shards, and only EVAL's own shebang is known here.
    pub fn invocation_flags(&self, spec: &CommandSpec, args: &[Bytes]) -> Flags {
        use kvasir_core::scripting;
        if spec.group != "scripting" {
            return spec.flags;
        }
        if spec.name == "load"
            && args
                .first()
                .is_some_and(|a| a.eq_ignore_ascii_case(b"script"))
        {
            // SCRIPT LOAD writes the script cache, replicated state here,
            // but Redis flags it neither write nor may-replicate: a WRITE
            // pause lets it through.
            return Flags(spec.flags.0 & !Flags::WRITE.0);
        }
        let declared = if self.server.cluster.is_none() {
            let local = self.server.local_store.borrow();
            scripting::declared_flags(Some(&local.store().scripts), spec, args)
        } else {
            scripting::declared_flags::<kvasir_core::keyspace::MemoryKeyspace>(None, spec, args)
        };
        scripting::command_flags(spec, declared)
    }

    /// Puts one command of an EXEC in the slow log if it took long enough.
    pub fn slowlog_queued(&self, q: &crate::transaction::Queued, micros: u64) {
        let (threshold, max_len) = {
            let c = self.server.config.borrow();
            (c.slowlog_log_slower_than, c.slowlog_max_len)
        };
        if threshold < 0 || micros < threshold as u64 {
            return;
        }
        self.server.slowlog.borrow_mut().record(
            max_len,
            micros,
            q.parent.unwrap_or(q.spec).name,
            &q.args,
            self.info.addr.to_string(),
            self.info.name.borrow().clone(),
            (crate::local_store::unix_ms() / 1000) as i64,
        );
    }
}

/// One call of `spec` in INFO commandstats. Keyed by the spec's address:
/// no string hashing per call.
/// A command refused before it ran (Redis's rejected_calls).
fn count_rejected(
    stats: &mut crate::listener::Stats,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
) {
    stats
        .commands
        .entry(spec as *const CommandSpec as usize)
        .or_insert_with(|| match parent {
            Some(p) => CmdStat::named(p.name, spec.name),
            None => CmdStat::named(spec.name, ""),
        })
        .rejected += 1;
}

/// INFO commandstats of the commands a script ran: each counts as a call
/// of its own command, as in Redis (and in total_commands_processed).
pub(crate) fn account_script_calls(
    server: &crate::listener::Server,
    calls: Vec<kvasir_core::store::ScriptCallStat>,
) {
    if calls.is_empty() {
        return;
    }
    let mut stats = server.stats.borrow_mut();
    for (spec, parent, micros, error) in calls {
        stats.total_commands_processed += 1;
        count_call(&mut stats, spec, parent, micros, error.is_some());
        if let Some(text) = error {
            count_error(&mut stats, &text);
            // Bounded: only the last few can still be a script's reply.
            if stats.script_errors_counted.len() >= 16 {
                stats.script_errors_counted.pop_front();
            }
            stats.script_errors_counted.push_back(text);
        }
    }
}

/// Whether a script's error reply `text` carries the error of a command
/// it ran, already counted in errorstats (forgotten once matched).
fn counted_in_script(stats: &mut crate::listener::Stats, text: &str) -> bool {
    let found = stats
        .script_errors_counted
        .iter()
        .position(|inner| text.starts_with(inner.as_str()));
    found
        .map(|i| stats.script_errors_counted.remove(i))
        .is_some()
}

/// A counted call of `spec` that ended in an error.
fn count_failed(stats: &mut crate::listener::Stats, spec: &'static CommandSpec) {
    if let Some(entry) = stats
        .commands
        .get_mut(&(spec as *const CommandSpec as usize))
    {
        entry.failed += 1;
    }
}

/// An error reply in INFO errorstats and total_error_replies, by its
/// code (the first word).
fn count_error(stats: &mut crate::listener::Stats, text: &str) {
    stats.total_error_replies += 1;
    let code = text.split(' ').next().unwrap_or("ERR").to_string();
    *stats.errors.entry(code).or_insert(0) += 1;
}

fn count_call(
    stats: &mut crate::listener::Stats,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    micros: u64,
    failed: bool,
) {
    let tracking = stats.latency_tracking;
    let entry = stats
        .commands
        .entry(spec as *const CommandSpec as usize)
        .or_insert_with(|| match parent {
            Some(p) => CmdStat::named(p.name, spec.name),
            None => CmdStat::named(spec.name, ""),
        });
    entry.calls += 1;
    entry.usec += micros;
    if tracking {
        if entry.latency.is_none() {
            entry.latency = crate::command_latency::CommandLatency::new();
        }
        if let Some(latency) = entry.latency.as_mut() {
            latency.record(micros);
        }
    }
    if failed {
        entry.failed += 1;
    }
}

impl Session {
    /// Counts the commands EXEC runs, as Redis does (each is a call in
    /// commandstats and in total_commands_processed).
    /// `refused`: the positions in EXEC's reply of the commands the ACL
    /// recheck refused.
    pub fn account_queued(&self, queued: &[crate::transaction::Queued], refused: &[usize]) {
        let mut in_reply: Vec<Option<CommandEntry>> =
            queued.iter().map(|q| Some((q.spec, q.parent))).collect();
        for &i in refused {
            in_reply.insert(i.min(in_reply.len()), None);
        }
        self.exec_commands.borrow_mut().push_back(in_reply);
        let mut stats = self.server.stats.borrow_mut();
        for q in queued {
            stats.total_commands_processed += 1;
            count_call(&mut stats, q.spec, q.parent, 0, false);
            let top = q.parent.unwrap_or(q.spec);
            crate::monitor::feed(&self.server, &self.info, self.db, top, q.spec, &q.args);
        }
    }
}
