//! The router: the one path from a session to the data. A standalone
//! server is the degenerate cluster: one shard ([`LOCAL_SHARD`]) with one
//! replica and no log, whose writes apply at once on this event loop; a
//! cluster node routes by slot to Raft groups (`cluster::commands`), whose
//! leaders order writes in their logs. Either way a shard applies commands
//! through `kvasir_core::machine`, and what the node itself issues (expiry
//! deletions) goes through [`Server::order`].

use crate::listener::Server;
use crate::session::{Finished, Outcome, PendingOp, Session};
use bytes::Bytes;
use kvasir_core::expire::ActiveExpire;
use kvasir_core::machine::{ShardCmd, Written};
use kvasir_core::{CmdError, CommandSpec, Handler, Store};
use kvasir_resp::Reply;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

/// The standalone server's one shard.
pub const LOCAL_SHARD: u64 = 0;

/// Runs a keyspace command (a `Write` or `Read` handler) for a session.
pub fn submit(s: &mut Session, spec: &'static CommandSpec, args: &[Bytes]) -> Outcome {
    match s.server.cluster.clone() {
        Some(node) => crate::cluster::commands::dispatch(s, &node, spec, args),
        None => submit_local(s, spec, args),
    }
}

/// The standalone shard: applied now; watchers and blocked clients of the
/// written keys hear of it before the next command runs, as in Redis.
fn submit_local(s: &mut Session, spec: &'static CommandSpec, args: &[Bytes]) -> Outcome {
    let flushed = crate::events::watched_before_flush(&s.server, spec, s.db);
    // Inside EXEC a script runs through: the block is atomic.
    let pause_after = (!s.txn.executing)
        .then(|| Duration::from_millis(s.server.config.borrow().busy_reply_threshold));
    // A restricted user's scripts have each call checked against its rules.
    let caller = crate::acl::script_caller(s, spec);
    let tracks_script = spec.group == "scripting" && s.info.tracking.borrow().on;
    if tracks_script {
        s.server.local_store.borrow().store().script_read.set(None);
    }
    if spec.group == "scripting" {
        let over = s.server.over_maxmemory();
        s.server.local_store.borrow().store().script_oom.set(over);
        *s.server
            .local_store
            .borrow()
            .store()
            .script_write_refusal
            .borrow_mut() = crate::persistence::write_refusal(&s.server);
    }
    let (result, expired, script_calls) =
        s.server
            .local_store
            .borrow_mut()
            .as_caller(caller, |local| {
                let no_touch = s.info.leaves_access_stamps(spec);
                if no_touch {
                    local.set_access_frozen(true);
                }
                let result = local.execute_pausable(spec, s.db, args, pause_after);
                if no_touch {
                    local.set_access_frozen(false);
                }
                (
                    result,
                    local.take_expired_reads(),
                    local.take_script_stats(),
                )
            });
    crate::acl::log_script_refusals(&s.server, s.info.id);
    crate::session::account_script_calls(&s.server, script_calls);
    // Lazy expiry: a key the read found expired goes now, as in Redis,
    // with its `expired` event, through the deletion the active cycle
    // orders; not during CLIENT PAUSE, when nothing deletes keys on its
    // own (Redis's expireIfNeeded then only reads the key as missing).
    if !s.server.client_pause.in_force() {
        for (db, keys) in expired {
            s.server.order(LOCAL_SHARD, ShardCmd::Expire { db, keys });
        }
    }
    if matches!(result, Err(CmdError::ScriptPaused)) {
        return finish_paused_script(&s.server, spec, s.db, args, s.info.id);
    }
    crate::notify::publish_local(&s.server);
    match (&result, flushed) {
        (Ok(_), Some(removed)) => {
            let watches = s.server.watches.borrow();
            for (db, key) in removed {
                watches.touch(db, std::slice::from_ref(&key));
            }
            drop(watches);
            crate::events::invalidate_tracked(&s.server.tracking, Written::Command(spec, args));
            crate::events::serve_flushed(&s.server, spec, s.db);
            if spec.keyless == kvasir_core::table::Keyless::FlushAll {
                crate::persistence::flushed_all(&s.server);
            }
        }
        _ => {
            // A tracking caller's script: its declared keys are tracked at
            // its last read, between the writes before and after it.
            let last_read = if tracks_script {
                s.server.local_store.borrow().store().script_read.take()
            } else {
                None
            };
            let remember = || crate::tracking::remember_keys_of(s, spec, args);
            hear_of_writes(
                &s.server,
                spec,
                s.db,
                args,
                result.as_ref().ok(),
                last_read.map(|at| (at, &remember as &dyn Fn())),
            );
        }
    }
    match result {
        Ok(reply) => reply.into(),
        Err(CmdError::WouldBlock(on)) if s.txn.executing => on.on_timeout.into(),
        Err(CmdError::WouldBlock(on)) => Outcome::Block(on),
        Err(e) => e.to_reply().into(),
    }
}

/// The write hooks (WATCH, tracking, blocked clients) of a command the
/// standalone store ran: what it reported modifying (a script's
/// commands' writes, even if it then failed; SMOVE's), else its keys if it
/// is a write that changed something (`reply` is None for an error).
/// `read_at`: a script read after this many of its writes, and what
/// tracks its keys then (Redis tracks at each read of a script, and
/// invalidates at each write: a lock's `SET NX` then `GET` leaves its
/// caller tracking the key, a `GET` then `DEL` does not).
fn hear_of_writes(
    server: &Server,
    spec: &'static CommandSpec,
    db: usize,
    args: &[Bytes],
    reply: Option<&Reply>,
    read_at: Option<(usize, &dyn Fn())>,
) {
    let mut remember_at = read_at;
    let mut remember_if_at = |i: usize| {
        if let Some((at, remember)) = remember_at {
            if i >= at {
                remember();
                remember_at = None;
            }
        }
    };
    if spec.reports_writes {
        let writes = server.local_store.borrow().store().take_reported_writes();
        for (i, (db, spec, args)) in writes.into_iter().enumerate() {
            remember_if_at(i);
            crate::events::after_write(server, db, Written::Command(spec, &args));
        }
    } else if let Some(reply) = reply {
        let changed = || {
            !server
                .local_store
                .borrow()
                .store()
                .changed_nothing(spec, args, reply)
        };
        if matches!(spec.handler, Handler::Write(_)) && changed() {
            crate::events::after_write(server, db, Written::Command(spec, args));
        }
    }
    remember_if_at(usize::MAX);
}

/// A script that paused past `busy-reply-threshold`: a task of its own
/// runs it on slice by slice, letting the event loop serve other clients
/// in between (they get `-BUSY`, SCRIPT KILL reaches the paused run), and
/// does what a finished write does; the session waits for the reply like
/// for any command in flight. The task, not the session, owns the run, so
/// the script ends and its writes are heard of even if its client leaves.
fn finish_paused_script(
    server: &Rc<Server>,
    spec: &'static CommandSpec,
    db: usize,
    args: &[Bytes],
    client: u64,
) -> Outcome {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let server = server.clone();
    let args = args.to_vec();
    tokio::task::spawn_local(async move {
        let reply = loop {
            // Yielding lets the runtime poll the sockets before the next
            // slice.
            tokio::task::yield_now().await;
            let mut local = server.local_store.borrow_mut();
            match local.resume_script() {
                Some(reply) => break reply,
                None if local.busy().is_some() => {}
                None => break Reply::error("ERR the paused script was lost"),
            }
        };
        crate::acl::log_script_refusals(&server, client);
        let calls = server.local_store.borrow_mut().take_script_stats();
        crate::session::account_script_calls(&server, calls);
        crate::notify::publish_local(&server);
        // The script's writes are its client's own (CLIENT TRACKING
        // NOLOOP), as when a command ends at once.
        server.tracking.borrow().current.set(client);
        hear_of_writes(&server, spec, db, &args, Some(&reply), None);
        server.tracking.borrow().current.set(0);
        let _ = tx.send(reply);
    });
    Outcome::Running(Box::new(PendingOp {
        reply: Box::pin(async move {
            Finished::Reply(
                rx.await
                    .unwrap_or_else(|_| Reply::error("ERR the paused script was lost")),
            )
        }),
        write: true,
        // Nothing of this connection overtakes the script.
        blocking: true,
    }))
}

impl Server {
    /// The script a standalone server is busy with, if one paused.
    pub fn busy_script(&self) -> Option<kvasir_core::scripting::BusyRun> {
        if self.cluster.is_some() {
            return None;
        }
        self.local_store.borrow().busy()
    }

    /// The shards whose writes this node orders now: the standalone store,
    /// or the Raft groups this node leads.
    pub fn led_shards(&self) -> Vec<u64> {
        match &self.cluster {
            Some(node) => node.led_shards(),
            None => vec![LOCAL_SHARD],
        }
    }

    /// Runs `f` on this node's replica of `shard`, if it has one (on the
    /// shard's thread).
    pub async fn on_shard<R: Send + 'static>(
        &self,
        shard: u64,
        f: impl FnOnce(&Store) -> R + Send + 'static,
    ) -> Option<R> {
        match &self.cluster {
            Some(node) => node.on_store(shard, f).await,
            None if shard == LOCAL_SHARD => Some(f(self.local_store.borrow().store())),
            None => None,
        }
    }

    /// Orders a command the node issues itself (expiry deletions): the
    /// standalone store applies it at once, a Raft group's leader proposes
    /// it. Fire and forget: a lost proposal is redone by the next cycle.
    pub fn order(&self, shard: u64, cmd: ShardCmd) {
        if let Some(node) = &self.cluster {
            drop(node.propose(shard, &cmd.into()));
            return;
        }
        if self.busy_script().is_some() {
            // A paused script's shard takes nothing else until it ends.
            return;
        }
        let mut expired = Vec::new();
        {
            let mut local = self.local_store.borrow_mut();
            local.refresh_clock();
            local.apply(&cmd, |db, w| match w {
                Written::Removed(keys) => expired.push((db, keys.to_vec())),
                Written::Events(events) => {
                    let flags = self.config.borrow().notify_keyspace_events;
                    crate::notify::publish(&self.pubsub.borrow(), flags, events);
                }
                Written::Command(..) => {}
            });
        }
        for (db, keys) in expired {
            crate::events::after_write(self, db, Written::Removed(&keys));
        }
    }
}

/// Active expiry, `hz` times a second, for every shard this node orders:
/// the cycle picks expired keys from the shard's state (a read) and orders
/// their deletion, so under Raft every replica removes the same keys.
/// Redis bounds a cycle by time (25% of it); here by entries visited.
pub async fn expire_loop(server: Rc<Server>) {
    const MAX_VISITS_PER_CYCLE: usize = 20_000;
    let mut cursors: HashMap<u64, ActiveExpire> = HashMap::new();
    loop {
        let hz = server.config.borrow().hz.max(1);
        tokio::time::sleep(Duration::from_millis(1000 / hz as u64)).await;
        if !server.active_expire.get()
            || server.client_pause.in_force()
            || server.shutdown_state.cron_paused()
        {
            continue;
        }
        let now = crate::local_store::unix_ms();
        let started = std::time::Instant::now();
        let shards = server.led_shards();
        let budget = (MAX_VISITS_PER_CYCLE / shards.len().max(1)).max(1_000);
        let mode = server.access_mode();
        for shard in shards {
            let mut expire = cursors.remove(&shard).unwrap_or_default();
            let picked = server
                .on_shard(shard, move |store| {
                    use kvasir_core::keyspace::Keyspace;
                    store.keyspace().set_access_mode(mode);
                    let picked = expire.collect(store, now, budget);
                    (expire, picked)
                })
                .await;
            let Some((expire, picked)) = picked else {
                continue;
            };
            cursors.insert(shard, expire);
            for (db, keys) in picked {
                if !keys.is_empty() {
                    server.order(shard, ShardCmd::Expire { db, keys });
                }
            }
        }
        // LATENCY's `expire-cycle` event, as Redis's activeExpireCycle
        // samples it (standalone the deletions ran in the cycle; in
        // cluster mode they were proposed).
        let ms = started.elapsed().as_millis() as u64;
        let threshold = server.config.borrow().latency_monitor_threshold;
        if threshold > 0 && ms >= threshold {
            server
                .latency
                .borrow_mut()
                .add("expire-cycle", ms, (now / 1000) as i64);
        }
    }
}
