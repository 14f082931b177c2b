//! What follows a write: watchers of the written keys are marked dirty
//! (WATCH/EXEC), connections that may cache them are sent invalidations
//! (CLIENT TRACKING) and clients blocked on them are served, oldest first, by
//! re-running their command through the shard. Serving a blocked client is
//! itself a write (BLMOVE pushes to its destination), so ready keys are
//! processed as a work list until nothing more can be served, as Redis's
//! handleClientsBlockedOnKeys does.

use crate::listener::Server;
use crate::router::LOCAL_SHARD;
use crate::watch::Watches;
use bytes::Bytes;
use kvasir_core::machine::Written;
use kvasir_core::table::Keyless;
use kvasir_core::{CmdError, CommandSpec};
use std::collections::VecDeque;

/// The key arguments of an invocation, as bytes.
fn written_keys(spec: &CommandSpec, args: &[Bytes]) -> Vec<Bytes> {
    spec.keys_of(args)
        .into_iter()
        .filter_map(|i| args.get(i).cloned())
        .collect()
}

/// Marks the watchers of what a write changed dirty (WATCH): its keys, or
/// whole databases for FLUSHDB and FLUSHALL, or the keys expiry removed.
/// SWAPDB is the caller's (it also moves blocked clients' keys).
pub fn touch_watchers(watches: &Watches, db: usize, written: Written) {
    if watches.is_empty() {
        return;
    }
    match written {
        Written::Command(spec, _) if spec.keyless == Keyless::FlushDb => watches.touch_db(Some(db)),
        Written::Command(spec, _) if spec.keyless == Keyless::FlushAll => watches.touch_db(None),
        Written::Command(spec, args) => watches.touch(db, &written_keys(spec, args)),
        Written::Removed(keys) => watches.expired(db, keys),
        Written::Events(_) => {}
    }
}

/// Tells tracking connections what a write changed: its keys, the whole
/// keyspace for FLUSHDB / FLUSHALL (Redis invalidates everything on any
/// flush), or the keys expiry removed. SWAPDB invalidates nothing, as in
/// Redis 7.0.
pub fn invalidate_tracked(tracking: &crate::tracking::SharedTracking, written: Written) {
    use crate::tracking::Written as Changed;
    if tracking.borrow().is_idle() {
        return;
    }
    match written {
        Written::Command(spec, _)
            if matches!(spec.keyless, Keyless::FlushDb | Keyless::FlushAll) =>
        {
            crate::tracking::written(tracking, Changed::Flush)
        }
        Written::Command(spec, _) if spec.keyless == Keyless::SwapDb => {}
        Written::Command(spec, args) => {
            crate::tracking::written(tracking, Changed::Keys(&written_keys(spec, args)))
        }
        Written::Removed(keys) => crate::tracking::written(tracking, Changed::Keys(keys)),
        Written::Events(_) => {}
    }
}

/// Before FLUSHDB / FLUSHALL on the standalone store: the watched keys the
/// flush will remove (they exist now). Redis touches only those, so a
/// watched key that did not exist stays clean. `None` for other commands.
pub fn watched_before_flush(
    server: &Server,
    spec: &CommandSpec,
    db: usize,
) -> Option<Vec<(usize, Bytes)>> {
    let scope = match spec.keyless {
        Keyless::FlushDb => Some(db),
        Keyless::FlushAll => None,
        _ => return None,
    };
    let watches = server.watches.borrow();
    if watches.is_empty() {
        return Some(Vec::new());
    }
    let local = server.local_store.borrow();
    let now = crate::local_store::unix_ms();
    Some(
        watches
            .keys_in(scope)
            .into_iter()
            .filter(|(d, k)| {
                local
                    .store()
                    .db(*d)
                    .get(k)
                    .is_some_and(|e| !e.is_expired(now))
            })
            .collect(),
    )
}

/// Called after every change to the standalone store: watchers are
/// touched and clients blocked on the written keys served.
pub fn after_write(server: &Server, db: usize, written: Written) {
    if let Written::Events(events) = written {
        let flags = server.config.borrow().notify_keyspace_events;
        return crate::notify::publish(&server.pubsub.borrow(), flags, events);
    }
    if let Written::Command(spec, _) = written {
        // rdb_changes_since_last_save and the save points count the write
        // commands that changed something, wherever they ran (alone, in
        // EXEC, in a script), as Redis's server.dirty.
        server.dirty.set(server.dirty.get() + 1);
        if spec.keyless == Keyless::FlushAll {
            crate::persistence::flushed_all(server);
        }
    }
    invalidate_tracked(&server.tracking, written);
    // The common case: nobody watches or waits, so nothing to compute on
    // the write path.
    if server.watches.borrow().is_empty() && server.blocking.borrow().is_empty() {
        return;
    }
    let (spec, args) = match written {
        Written::Command(spec, args) => (spec, args),
        Written::Removed(_) => return touch_watchers(&server.watches.borrow(), db, written),
        Written::Events(_) => return,
    };
    match spec.keyless {
        Keyless::FlushDb | Keyless::FlushAll => {
            touch_watchers(&server.watches.borrow(), db, written);
            serve_flushed(server, spec, db);
        }
        Keyless::SwapDb => {
            let store_dbs = server.local_store.borrow().store().databases();
            let parse = |a: Option<&Bytes>| {
                a.and_then(|b| std::str::from_utf8(b).ok())
                    .and_then(|s| s.parse::<usize>().ok())
                    .filter(|&d| d < store_dbs)
            };
            let (Some(a), Some(b)) = (parse(args.get(1)), parse(args.get(2))) else {
                return;
            };
            if a == b {
                return;
            }
            {
                // Called after the swap: what `a` held is now in `b`.
                let now = crate::local_store::unix_ms();
                let local = server.local_store.borrow();
                let store = local.store();
                let state =
                    |d: usize| move |key: &[u8]| store.db(d).get(key).map(|e| e.is_expired(now));
                let watches = server.watches.borrow();
                watches.swapped(a, state(b), state(a));
                watches.swapped(b, state(a), state(b));
            }
            for d in [a, b] {
                let keys = server.blocking.borrow().keys_in_db(LOCAL_SHARD, d);
                serve_blocked(server, d, keys);
            }
        }
        _ => {
            let keys = written_keys(spec, args);
            server.watches.borrow().touch(db, &keys);
            serve_blocked(server, db, keys);
        }
    }
}

/// After FLUSHDB (of `db`) or FLUSHALL on the standalone store: the keys
/// clients are blocked on are gone, so a blocked XREADGROUP is told so (a
/// blocked pop keeps waiting), as Redis serves them.
pub fn serve_flushed(server: &Server, spec: &CommandSpec, db: usize) {
    if server.blocking.borrow().is_empty() {
        return;
    }
    let dbs = if spec.keyless == Keyless::FlushDb {
        db..db + 1
    } else {
        0..server.local_store.borrow().store().databases()
    };
    for d in dbs {
        let keys = server.blocking.borrow().keys_in_db(LOCAL_SHARD, d);
        if !keys.is_empty() {
            serve_blocked(server, d, keys);
        }
    }
}

/// Holds back the serving of blocked clients until [`end_deferral`]: EXEC
/// runs as one unit, so no blocked client may pop between its commands
/// (Redis also serves them after the whole transaction).
pub fn begin_deferral(server: &Server) {
    server
        .deferred_ready
        .borrow_mut()
        .get_or_insert_with(Vec::new);
}

/// Serves what was held back since [`begin_deferral`].
pub fn end_deferral(server: &Server) {
    let pending = server
        .deferred_ready
        .borrow_mut()
        .take()
        .unwrap_or_default();
    for (db, keys) in pending {
        serve_blocked(server, db, keys);
    }
}

/// Serves clients blocked on `keys` of `db` for as long as their commands
/// find something.
fn serve_blocked(server: &Server, db: usize, keys: Vec<Bytes>) {
    if server.blocking.borrow().is_empty() {
        return;
    }
    if let Some(pending) = server.deferred_ready.borrow_mut().as_mut() {
        pending.push((db, keys));
        return;
    }
    let mut ready: VecDeque<(usize, Bytes)> = keys.into_iter().map(|k| (db, k)).collect();
    // Each round serves at least one waiter or drops a key, and waiters are
    // finite, so this ends; the bound is a guard against a logic slip.
    let mut rounds = 0usize;
    while let Some((db, key)) = ready.pop_front() {
        loop {
            rounds += 1;
            if rounds > 1_000_000 {
                tracing::warn!("blocked-client serving loop bound reached");
                return;
            }
            let first = server.blocking.borrow().first(LOCAL_SHARD, db, &key);
            let Some((id, spec, args)) = first else {
                break;
            };
            let other_type = server
                .local_store
                .borrow()
                .waits_on_other_type(spec, db, &key);
            if other_type {
                break;
            }
            let result = server.local_store.borrow_mut().execute(spec, db, &args);
            crate::notify::publish_local(server);
            if let Err(CmdError::WouldBlock(_)) = result {
                break;
            }
            let reply = result.unwrap_or_else(|e| e.to_reply());
            server.blocking.borrow_mut().deliver(id, reply);
            let touched = written_keys(spec, &args);
            server.watches.borrow().touch(db, &touched);
            if spec.is_write() {
                invalidate_tracked(&server.tracking, Written::Command(spec, &args));
            }
            for k in touched {
                if k != key && server.blocking.borrow().is_blocked_on(LOCAL_SHARD, db, &k) {
                    ready.push_back((db, k));
                }
            }
        }
    }
}
