//! MULTI / EXEC / DISCARD / WATCH / UNWATCH.
//!
//! Commands after MULTI are checked (name, arity, auth) and queued; EXEC
//! runs them back to back with no other client in between — the event loop
//! never yields inside EXEC — so the transaction applies as one unit. Any
//! queuing error makes EXEC answer EXECABORT; a write to a watched key (or
//! its expiry) makes EXEC answer a nil array.

use crate::listener::Server;
use crate::session::{Outcome, Session};
use bytes::Bytes;
use kvasir_core::table::{Flags, Handler};
use kvasir_core::SessionCmd;
use kvasir_core::{CmdError, CommandSpec};
use kvasir_resp::Reply;

type Resolved = Result<(&'static CommandSpec, Option<&'static CommandSpec>), CmdError>;

/// One queued command.
pub struct Queued {
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    args: Vec<Bytes>,
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
    if !s.authenticated && !top.flags.contains(Flags::NO_AUTH) {
        s.txn.failed = true;
        return Some(Reply::error("NOAUTH Authentication required."));
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

/// A watched key that is logically expired now counts as changed (Redis 7).
fn watched_key_expired(s: &Session) -> bool {
    let shard = s.server.local_store.borrow();
    let now = crate::local_store::unix_ms();
    s.txn.watched.iter().any(|(db, key)| {
        shard
            .store()
            .db(*db)
            .get(key)
            .is_some_and(|e| e.is_expired(now))
    })
}

pub fn exec(s: &mut Session) -> Reply {
    let Some(queue) = s.txn.queue.take() else {
        return Reply::error("ERR EXEC without MULTI");
    };
    if s.txn.failed {
        end_multi(s);
        return Reply::error("EXECABORT Transaction discarded because of previous errors.");
    }
    if s.info.watch_dirty.get() || watched_key_expired(s) {
        end_multi(s);
        return Reply::NilArray;
    }
    s.txn.executing = true;
    crate::events::begin_deferral(&s.server);
    let mut replies = Vec::with_capacity(queue.len());
    for q in &queue {
        let reply = match s.dispatch(q.spec, q.parent, &q.args) {
            Outcome::Reply(r) => r,
            Outcome::Replies(rs) => Reply::Array(rs),
            Outcome::Block(on) => on.on_timeout,
            // Only cluster mode hands commands to Raft; its EXEC is separate.
            Outcome::Pending(_) => Reply::error("ERR internal: command left the transaction"),
        };
        replies.push(reply);
    }
    s.txn.executing = false;
    crate::events::end_deferral(&s.server);
    end_multi(s);
    Reply::Array(replies)
}

pub fn discard(s: &mut Session) -> Reply {
    if !s.txn.in_multi() {
        return Reply::error("ERR DISCARD without MULTI");
    }
    end_multi(s);
    Reply::ok()
}

pub fn watch(s: &mut Session, keys: &[Bytes]) -> Reply {
    if s.txn.in_multi() {
        return Reply::error("ERR WATCH inside MULTI is not allowed");
    }
    let mut watches = s.server.watches.borrow_mut();
    for k in keys {
        if !s
            .txn
            .watched
            .iter()
            .any(|(db, key)| *db == s.db && key == k)
        {
            watches.watch(s.db, k, &s.info);
            s.txn.watched.push((s.db, k.clone()));
        }
    }
    Reply::ok()
}

pub fn unwatch(s: &mut Session) -> Reply {
    let server = s.server.clone();
    s.txn.unwatch_all(&server, s.info.id);
    s.info.watch_dirty.set(false);
    Reply::ok()
}

/// EXEC in cluster mode: ends the transaction and hands over the queued
/// commands (spec, args), or the reply that ends it without running them.
pub fn take_queue(s: &mut Session) -> Result<Vec<(&'static CommandSpec, Vec<Bytes>)>, Reply> {
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
    Ok(queue.into_iter().map(|q| (q.spec, q.args)).collect())
}

/// Clears MULTI and WATCH state (RESET, disconnect).
pub fn reset(s: &mut Session) {
    end_multi(s);
}
