//! MULTI / EXEC / DISCARD / WATCH / UNWATCH.
//!
//! Commands after MULTI are checked (name, arity, auth) and queued; EXEC
//! runs them back to back with no other client in between — the event loop
//! never yields inside EXEC — so the transaction applies as one unit. Any
//! queuing error makes EXEC answer EXECABORT; a write to a watched key (or
//! its expiry) makes EXEC answer a nil array.

use crate::listener::Server;
use crate::session::{Finished, Outcome, Session};
use bytes::Bytes;
use kvasir_core::machine::{Applied, ShardCmd, Written};
use kvasir_core::table::{Flags, Handler};
use kvasir_core::SessionCmd;
use kvasir_core::{CmdError, CommandSpec};
use kvasir_resp::Reply;

type Resolved = Result<(&'static CommandSpec, Option<&'static CommandSpec>), CmdError>;

/// One queued command.
pub struct Queued {
    pub spec: &'static CommandSpec,
    pub parent: Option<&'static CommandSpec>,
    pub args: Vec<Bytes>,
}

/// A connection's transaction state.
#[derive(Default)]
pub struct Transaction {
    /// Some while between MULTI and EXEC/DISCARD.
    queue: Option<Vec<Queued>>,
    /// A command failed to queue: EXEC must abort.
    failed: bool,
    /// True while EXEC runs the queue (blocking commands answer at once).
    pub executing: bool,
    /// (db, key) pairs this connection watches.
    watched: Vec<(usize, Bytes)>,
    /// Cluster mode: the keys this connection watches, all in one slot,
    /// with the digest each had when it was watched.
    pub cluster_watch: Option<ClusterWatch>,
}

/// WATCH in cluster mode: EXEC carries these digests into the Raft log and
/// every replica compares them with its state when it applies the block.
pub struct ClusterWatch {
    pub slot: u16,
    pub keys: Vec<(Bytes, u64)>,
}

impl Transaction {
    pub fn in_multi(&self) -> bool {
        self.queue.is_some()
    }

    /// No WATCH in force.
    pub fn watches_nothing(&self) -> bool {
        self.watched.is_empty() && self.cluster_watch.is_none()
    }

    /// The commands queued since MULTI.
    pub fn queued(&self) -> impl Iterator<Item = &Queued> {
        self.queue.iter().flatten()
    }

    pub fn unwatch_all(&mut self, server: &Server, client: u64) {
        self.cluster_watch = None;
        let mut watches = server.watches.borrow_mut();
        for (db, key) in self.watched.drain(..) {
            watches.unwatch(db, &key, client);
        }
    }
}

/// Commands that act on the transaction itself rather than being queued.
fn controls_transaction(spec: &CommandSpec) -> bool {
    matches!(
        spec.handler,
        Handler::Session(
            SessionCmd::Exec
                | SessionCmd::Discard
                | SessionCmd::Multi
                | SessionCmd::Watch
                | SessionCmd::Quit
                | SessionCmd::Reset
        )
    )
}

/// Inside MULTI: queues the command (or records why it cannot be) and
/// returns the reply to send now. None outside MULTI or for EXEC & co.
pub fn queue_if_in_multi(s: &mut Session, resolved: &Resolved, args: &[Bytes]) -> Option<Reply> {
    if !s.txn.in_multi() {
        return None;
    }
    let (spec, parent) = match resolved {
        Ok((spec, parent)) if parent.is_none() && controls_transaction(spec) => return None,
        Ok(found) => *found,
        Err(e) => {
            s.txn.failed = true;
            return Some(e.to_reply());
        }
    };
    let top = parent.unwrap_or(spec);
    if s.auth_required() && !top.flags.contains(Flags::NO_AUTH) {
        s.txn.failed = true;
        return Some(Reply::error("NOAUTH Authentication required."));
    }
    if let Some(refused) = crate::acl::refuse(s, spec, parent, args, crate::acl::Context::Multi) {
        s.txn.failed = true;
        return Some(refused);
    }
    // Redis answers this inside EXEC's reply; the block runs as one entry
    // here, so it is refused when queued.
    if let Some(refused) = crate::acl::refuse_patterns(s, spec, parent, args) {
        s.txn.failed = true;
        return Some(refused);
    }
    if s.server.over_maxmemory() {
        s.txn.failed = true;
        return Some(Reply::error(crate::maxmemory::OOM));
    }
    if let Some(error) = s.disk_refusal(spec, args) {
        s.txn.failed = true;
        return Some(Reply::error(error));
    }
    if top.flags.contains(Flags::NO_MULTI)
        || top.flags.contains(Flags::PUBSUB)
            && !matches!(top.handler, Handler::Session(SessionCmd::Publish))
    {
        s.txn.failed = true;
        return Some(Reply::error("ERR Command not allowed inside a transaction"));
    }
    if let Some(queue) = s.txn.queue.as_mut() {
        queue.push(Queued {
            spec,
            parent,
            args: args.to_vec(),
        });
        s.info.multi.set(queue.len() as i64);
    }
    Some(Reply::simple("QUEUED"))
}

impl Transaction {
    /// A command was refused while queuing (Redis's flagTransaction):
    /// EXEC will abort.
    pub fn refused_one(&mut self) {
        if self.in_multi() {
            self.failed = true;
        }
    }
}

pub fn multi(s: &mut Session) -> Reply {
    if s.txn.in_multi() {
        return Reply::error("ERR MULTI calls can not be nested");
    }
    s.txn.queue = Some(Vec::new());
    s.txn.failed = false;
    s.info.multi.set(0);
    Reply::ok()
}

fn end_multi(s: &mut Session) {
    s.txn.queue = None;
    s.txn.failed = false;
    s.info.multi.set(-1);
    let server = s.server.clone();
    s.txn.unwatch_all(&server, s.info.id);
    s.info.watch_dirty.set(false);
}

/// A watched key that is logically expired now counts as changed (Redis 7),
/// unless it was already expired when it was watched.
/// In cluster mode the digests carried into the log decide this.
fn watched_key_expired(s: &Session) -> bool {
    if s.server.cluster.is_some() {
        return false;
    }
    let shard = s.server.local_store.borrow();
    let watches = s.server.watches.borrow();
    let now = crate::local_store::unix_ms();
    s.txn.watched.iter().any(|(db, key)| {
        // One already expired when watched changed nothing since.
        !watches.is_stale(*db, key, s.info.id)
            && shard
                .store()
                .db(*db)
                .get(key)
                .is_some_and(|e| e.is_expired(now))
    })
}

/// EXEC: one implementation for both orderers. A watched key written on
/// this node since WATCH (or expired) aborts at once, as in Redis; a queue
/// of keyspace commands then goes to its shard as one entry (applied
/// atomically, and under Raft only if the watched keys' digests still
/// hold). A queue that mixes in session commands (PING, SELECT, CONFIG...)
/// runs command by command, which is atomic only where the shard is this
/// event loop's own store (standalone); cluster mode refuses it.
pub fn exec(s: &mut Session) -> Outcome {
    if !s.txn.in_multi() {
        return Reply::error("ERR EXEC without MULTI").into();
    }
    let dirty = s.info.watch_dirty.get() || watched_key_expired(s);
    let cluster_watch = s.txn.cluster_watch.take();
    let queue = match take_queue(s) {
        Ok(q) => q,
        Err(reply) => return reply.into(),
    };
    // Queued while memory allowed it, run when it does not: refused whole,
    // as Redis rejects such an EXEC.
    if queue.iter().any(|q| {
        s.server
            .refuses_for_memory(|| s.invocation_flags(q.spec, &q.args))
    }) {
        return Reply::error(format!(
            "EXECABORT Transaction discarded because of: {}",
            crate::maxmemory::OOM
        ))
        .into();
    }
    // A save that failed since the writes were queued: Redis refuses the
    // EXEC of a transaction that writes.
    // The refusal first: the queue is only looked through when there is one.
    if let Some(error) = crate::persistence::write_refusal(&s.server)
        .filter(|_| queue.iter().any(|q| s.may_write(q.spec, &q.args)))
    {
        return Reply::error(format!(
            "EXECABORT Transaction discarded because of: {error}"
        ))
        .into();
    }
    if dirty {
        return Reply::NilArray.into();
    }
    // Checked again: the user's rules may have changed since queueing.
    let (queue, refused) = recheck_acl(s, queue);
    let refused_at: Vec<usize> = refused.iter().map(|(i, _)| *i).collect();
    s.account_queued(&queue, &refused_at);
    let keyspace_only = queue
        .iter()
        .all(|q| matches!(q.spec.handler, Handler::Write(_) | Handler::Read(_)));
    // Queued reads bypass `Session::dispatch` on the one-entry path. The
    // standalone block tracks them in order with its writes' hooks
    // (`exec_local`); elsewhere they are tracked first (an invalidation too
    // many at worst).
    if !(keyspace_only && s.server.cluster.is_none()) {
        for q in &queue {
            crate::tracking::remember_read(s, q.spec, &q.args);
        }
    }
    let outcome = match s.server.cluster.clone() {
        Some(node) => crate::cluster::commands::exec(s, &node, queue, cluster_watch),
        None if keyspace_only => exec_local(s, queue).into(),
        None => exec_one_by_one(s, queue).into(),
    };
    if refused.is_empty() {
        return outcome;
    }
    match outcome {
        Outcome::Reply(reply) => splice_refused(reply, refused).into(),
        Outcome::Pending(mut op) => {
            let reply = op.reply;
            op.reply = Box::pin(async move {
                match reply.await {
                    Finished::Reply(r) => Finished::Reply(splice_refused(r, refused)),
                    other => other,
                }
            });
            Outcome::Pending(op)
        }
        other => other,
    }
}

/// The queued commands the user may still run, and the refusals of the
/// others by their place in the queue (Redis's check at EXEC).
fn recheck_acl(s: &Session, queue: Vec<Queued>) -> (Vec<Queued>, Vec<(usize, Reply)>) {
    let mut kept = Vec::with_capacity(queue.len());
    let mut refused = Vec::new();
    for (i, q) in queue.into_iter().enumerate() {
        match crate::acl::recheck_at_exec(s, q.spec, q.parent, &q.args) {
            Some(reply) => refused.push((i, reply)),
            None => kept.push(q),
        }
    }
    (kept, refused)
}

/// EXEC's array with each refusal put back in its command's place.
fn splice_refused(reply: Reply, refused: Vec<(usize, Reply)>) -> Reply {
    let Reply::Array(mut items) = reply else {
        return reply;
    };
    for (i, refusal) in refused {
        items.insert(i.min(items.len()), refusal);
    }
    Reply::Array(items)
}

/// The queue as one entry of the standalone store; clients blocked on the
/// written keys are served after the whole transaction, as in Redis.
fn exec_local(s: &mut Session, queue: Vec<Queued>) -> Reply {
    // Scripts in the block see the memory state EXEC started with.
    let over = s.server.over_maxmemory();
    s.server.local_store.borrow().store().script_oom.set(over);
    *s.server
        .local_store
        .borrow()
        .store()
        .script_write_refusal
        .borrow_mut() = crate::persistence::write_refusal(&s.server);
    // Scripts in the block have their calls checked as at top level.
    let caller = queue
        .iter()
        .find_map(|q| crate::acl::script_caller(s, q.spec));
    let cmd = ShardCmd::Commands {
        db: s.db,
        cmds: queue.iter().map(|q| q.args.clone()).collect(),
        multi: true,
    };
    let queued = queue;
    let no_touch =
        s.info.no_touch.get() && queued.iter().all(|q| s.info.leaves_access_stamps(q.spec));
    let mut written = Vec::new();
    let server = s.server.clone();
    let started = std::time::Instant::now();
    let applied = s
        .server
        .local_store
        .borrow_mut()
        .as_caller(caller, |local| {
            // CLIENT NO-TOUCH over the whole block (a block with a TOUCH
            // touches, the TOUCH's keys and the others').
            if no_touch {
                local.set_access_frozen(true);
            }
            let applied = local.apply(&cmd, |db, w| match w {
                Written::Command(spec, args) => written.push((db, spec, args.to_vec())),
                Written::Events(events) => {
                    let flags = server.config.borrow().notify_keyspace_events;
                    crate::notify::publish(&server.pubsub.borrow(), flags, events);
                }
                Written::Removed(_) => {}
            });
            if no_touch {
                local.set_access_frozen(false);
            }
            applied
        });
    // The commands ran as one atomic unit: each is logged with the
    // unit's time.
    let micros = started.elapsed().as_micros() as u64;
    for q in &queued {
        s.slowlog_queued(q, micros);
    }
    crate::acl::log_script_refusals(&s.server, s.info.id);
    // Served after the store is released: serving runs commands on it.
    // Reads are tracked and writes heard of in the block's order, as each
    // command of Redis's EXEC does: a key written then read stays tracked,
    // one read then written is invalidated. The writes a command reports
    // itself (a script's commands', SMOVE's) are not matched to their
    // place in the block: with one in it, reads are tracked first.
    if queued.iter().any(|q| q.spec.reports_writes) {
        for q in &queued {
            crate::tracking::remember_read(s, q.spec, &q.args);
        }
        for (db, spec, args) in written {
            crate::events::after_write(&s.server, db, Written::Command(spec, &args));
        }
    } else {
        // Without scripts each write heard of is one queued command's, in
        // order.
        let mut written = written.into_iter().peekable();
        for q in &queued {
            crate::tracking::remember_read(s, q.spec, &q.args);
            if let Some((db, spec, args)) =
                written.next_if(|(_, spec, args)| std::ptr::eq(*spec, q.spec) && *args == q.args)
            {
                crate::events::after_write(&s.server, db, Written::Command(spec, &args));
            }
        }
        for (db, spec, args) in written {
            crate::events::after_write(&s.server, db, Written::Command(spec, &args));
        }
    }
    match applied {
        Applied::Reply(r) => r,
        Applied::Block(on) => on.on_timeout,
    }
}

fn exec_one_by_one(s: &mut Session, queue: Vec<Queued>) -> Reply {
    s.txn.executing = true;
    crate::events::begin_deferral(&s.server);
    let mut replies = Vec::with_capacity(queue.len());
    for q in &queue {
        let started = std::time::Instant::now();
        let outcome = s.dispatch(q.spec, q.parent, &q.args);
        s.slowlog_queued(q, started.elapsed().as_micros() as u64);
        let reply = match outcome {
            Outcome::Reply(r) => r,
            Outcome::Replies(rs) => Reply::Array(rs),
            Outcome::Block(on) => on.on_timeout,
            // The standalone store answers at once; nothing is in flight.
            Outcome::Pending(_) | Outcome::Running(_) | Outcome::Parked(_) => {
                Reply::error("ERR internal: command left the transaction")
            }
        };
        replies.push(reply);
    }
    s.txn.executing = false;
    crate::events::end_deferral(&s.server);
    Reply::Array(replies)
}

pub fn discard(s: &mut Session) -> Reply {
    if !s.txn.in_multi() {
        return Reply::error("ERR DISCARD without MULTI");
    }
    end_multi(s);
    Reply::ok()
}

/// WATCH: a write applied on this node to a watched key marks the
/// connection dirty (both orderers); in cluster mode the keys' digests are
/// also read from the slot's leader, so a change this node did not see
/// (a leader change in between) still aborts the EXEC when it applies.
pub fn watch(s: &mut Session, keys: &[Bytes]) -> Outcome {
    if s.txn.in_multi() {
        return Reply::error("ERR WATCH inside MULTI is not allowed").into();
    }
    let cluster = s.server.cluster.clone();
    let slot = match &cluster {
        Some(_) => match crate::cluster::commands::watch_slot(s, keys) {
            Ok(slot) => Some(slot),
            Err(reply) => return reply.into(),
        },
        None => None,
    };
    {
        let mut watches = s.server.watches.borrow_mut();
        let local = s.server.local_store.borrow();
        let now = crate::local_store::unix_ms();
        for k in keys {
            if !s
                .txn
                .watched
                .iter()
                .any(|(db, key)| *db == s.db && key == k)
            {
                // Standalone: a key already expired but not yet deleted
                // is watched as such (cluster mode decides by digests).
                let stale = cluster.is_none()
                    && local
                        .store()
                        .db(s.db)
                        .get(k)
                        .is_some_and(|e| e.is_expired(now));
                watches.watch(s.db, k, &s.info, stale);
                s.txn.watched.push((s.db, k.clone()));
            }
        }
    }
    match (cluster, slot) {
        (Some(node), Some(slot)) => crate::cluster::commands::watch(s, &node, slot, keys),
        _ => Reply::ok().into(),
    }
}

pub fn unwatch(s: &mut Session) -> Reply {
    let server = s.server.clone();
    s.txn.unwatch_all(&server, s.info.id);
    s.info.watch_dirty.set(false);
    Reply::ok()
}

/// Ends the transaction and hands over the queued commands, or the reply
/// that ends it without running them.
fn take_queue(s: &mut Session) -> Result<Vec<Queued>, Reply> {
    let Some(queue) = s.txn.queue.take() else {
        return Err(Reply::error("ERR EXEC without MULTI"));
    };
    let failed = s.txn.failed;
    end_multi(s);
    if failed {
        return Err(Reply::error(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    Ok(queue)
}

/// The digests of a WATCH arrived (cluster mode): remember them (a key
/// watched twice keeps the digest of its first WATCH, as Redis keeps the
/// first watch).
pub fn remember_watch(s: &mut Session, slot: u16, keys: Vec<Bytes>, digests: &[u64]) -> Reply {
    if digests.len() != keys.len() {
        return Reply::error("ERR WATCH read returned a damaged reply");
    }
    let w = s.txn.cluster_watch.get_or_insert_with(|| ClusterWatch {
        slot,
        keys: Vec::new(),
    });
    for (key, &d) in keys.into_iter().zip(digests) {
        if !w.keys.iter().any(|(k, _)| *k == key) {
            w.keys.push((key, d));
        }
    }
    Reply::ok()
}

/// Clears MULTI and WATCH state (RESET, disconnect).
pub fn reset(s: &mut Session) {
    end_multi(s);
}
