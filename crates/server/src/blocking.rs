//! Clients blocked on keys (BLPOP, BZPOPMIN, ...), served in arrival order.
//!
//! A blocking command that finds nothing parks its client here. When a
//! write touches one of the keys, the server re-runs the parked command
//! through the shard — the same write path as any other write (under Raft,
//! a proposal) — and hands the reply to the waiting session.

use bytes::Bytes;
use kvasir_core::CommandSpec;
use kvasir_resp::Reply;
use std::collections::{BTreeMap, HashMap, VecDeque};
use tokio::sync::oneshot;

/// One parked command.
pub struct Waiter {
    pub client: u64,
    pub db: usize,
    pub spec: &'static CommandSpec,
    pub args: Vec<Bytes>,
    pub keys: Vec<Bytes>,
    pub tx: oneshot::Sender<Reply>,
}

#[derive(Default)]
pub struct Blocking {
    next_id: u64,
    waiters: BTreeMap<u64, Waiter>,
    /// Waiter ids per (db, key), oldest first.
    by_key: HashMap<(usize, Bytes), VecDeque<u64>>,
}

impl Blocking {
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Number of blocked clients (INFO blocked_clients).
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    pub fn is_blocked_on(&self, db: usize, key: &Bytes) -> bool {
        self.by_key.contains_key(&(db, key.clone()))
    }

    /// Parks a waiter; returns its id.
    pub fn park(&mut self, waiter: Waiter) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        for k in &waiter.keys {
            let queue = self.by_key.entry((waiter.db, k.clone())).or_default();
            if !queue.contains(&id) {
                queue.push_back(id);
            }
        }
        self.waiters.insert(id, waiter);
        id
    }

    /// Removes a waiter (served, timed out or disconnected).
    pub fn remove(&mut self, id: u64) -> Option<Waiter> {
        let w = self.waiters.remove(&id)?;
        for k in &w.keys {
            let slot = (w.db, k.clone());
            if let Some(q) = self.by_key.get_mut(&slot) {
                q.retain(|&x| x != id);
                if q.is_empty() {
                    self.by_key.remove(&slot);
                }
            }
        }
        Some(w)
    }

    /// The oldest waiter on (db, key): its id, spec and arguments.
    pub fn first(&self, db: usize, key: &Bytes) -> Option<(u64, &'static CommandSpec, Vec<Bytes>)> {
        let id = *self.by_key.get(&(db, key.clone()))?.front()?;
        let w = self.waiters.get(&id)?;
        Some((id, w.spec, w.args.clone()))
    }

    /// Databases that have waiters (SWAPDB / FLUSH wake-ups).
    pub fn keys_in_db(&self, db: usize) -> Vec<Bytes> {
        self.by_key
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }
}
