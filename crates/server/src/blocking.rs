//! Clients blocked on keys (BLPOP, BZPOPMIN, ...), served in arrival
//! order: one registry for both orderers.
//!
//! A blocking command that finds nothing parks its client here, on its
//! shard's keys. When a write applied on this node touches one of them,
//! the oldest waiter's command runs again through its shard: at once on
//! the standalone store (`events::serve_blocked`, before the next command,
//! as Redis does), or proposed again to the shard's Raft log in cluster
//! mode (`cluster::blocked`), where a waiter is registered before its first
//! proposal so that no write between that entry and the parking is missed.
//! The registry also times waiters out; the session only waits for the
//! reply.

use bytes::Bytes;
use kvasir_core::CommandSpec;
use kvasir_resp::Reply;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::oneshot;

/// One parked command.
pub struct Waiter {
    pub shard: u64,
    pub db: usize,
    pub spec: &'static CommandSpec,
    pub args: Vec<Bytes>,
    pub keys: Vec<Bytes>,
    tx: oneshot::Sender<Reply>,
    /// The reply at the timeout (known once the command found nothing).
    on_timeout: Option<Reply>,
    /// Cluster mode: the command is proposed and its result not back yet.
    in_flight: bool,
    /// A write to one of the keys applied while the command was in
    /// flight: its "nothing found" may be stale, so it runs again at once.
    woken: bool,
    /// The timeout fired while the command was in flight: a "nothing
    /// found" then answers `on_timeout`.
    timed_out: bool,
    /// CLIENT UNBLOCK ... ERROR came while the command was in flight: the
    /// answer to a "nothing found" instead of `on_timeout`.
    unblocked_with: Option<Reply>,
}

impl Waiter {
    /// Whether the command has found nothing once already (so this is a
    /// re-run, and its timeout reply is known).
    pub fn has_timeout_reply(&self) -> bool {
        self.on_timeout.is_some()
    }
}

/// (shard, db, key).
type WaitKey = (u64, usize, Bytes);

/// What the result of an in-flight command means for its waiter.
pub enum AfterBlock {
    /// Run it again now (a write came in while it was in flight).
    Retry,
    /// Parked until a write to one of its keys.
    Parked,
    /// Gone (served elsewhere, timed out or its client left).
    Done,
}

#[derive(Default)]
pub struct Blocking {
    next_id: u64,
    waiters: BTreeMap<u64, Waiter>,
    /// Waiter ids per (shard, db, key), oldest first.
    by_key: HashMap<WaitKey, VecDeque<u64>>,
}

pub type SharedBlocking = Rc<RefCell<Blocking>>;

impl Blocking {
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Number of blocked clients (INFO blocked_clients).
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    pub fn is_blocked_on(&self, shard: u64, db: usize, key: &Bytes) -> bool {
        self.by_key.contains_key(&(shard, db, key.clone()))
    }

    /// Parks a command; its reply (served, timed out) arrives on the
    /// returned receiver. `on_timeout` is `None` while the command has not
    /// yet found nothing (cluster mode: registered before its first
    /// proposal, `in_flight`).
    pub fn park(
        &mut self,
        shard: u64,
        db: usize,
        spec: &'static CommandSpec,
        args: Vec<Bytes>,
        keys: Vec<Bytes>,
        on_timeout: Option<Reply>,
    ) -> (u64, oneshot::Receiver<Reply>) {
        self.next_id += 1;
        let id = self.next_id;
        let (tx, rx) = oneshot::channel();
        let waiter = Waiter {
            shard,
            db,
            spec,
            args,
            keys,
            tx,
            in_flight: on_timeout.is_none(),
            on_timeout,
            woken: false,
            timed_out: false,
            unblocked_with: None,
        };
        self.index(id, &waiter);
        self.waiters.insert(id, waiter);
        (id, rx)
    }

    fn index(&mut self, id: u64, w: &Waiter) {
        self.index_keys(id, w.shard, w.db, &w.keys);
    }

    fn index_keys(&mut self, id: u64, shard: u64, db: usize, keys: &[Bytes]) {
        for k in keys {
            let queue = self.by_key.entry((shard, db, k.clone())).or_default();
            if !queue.contains(&id) {
                queue.push_back(id);
            }
        }
    }

    fn unindex(&mut self, id: u64, w: &Waiter) {
        self.unindex_keys(id, w.shard, w.db, &w.keys);
    }

    fn unindex_keys(&mut self, id: u64, shard: u64, db: usize, keys: &[Bytes]) {
        for k in keys {
            let slot = (shard, db, k.clone());
            if let Some(q) = self.by_key.get_mut(&slot) {
                q.retain(|&x| x != id);
                if q.is_empty() {
                    self.by_key.remove(&slot);
                }
            }
        }
    }

    /// Removes a waiter (served, or its client left).
    pub fn remove(&mut self, id: u64) -> Option<Waiter> {
        let w = self.waiters.remove(&id)?;
        self.unindex(id, &w);
        Some(w)
    }

    pub fn get(&self, id: u64) -> Option<&Waiter> {
        self.waiters.get(&id)
    }

    /// Answers a waiter and forgets it.
    pub fn deliver(&mut self, id: u64, reply: Reply) {
        if let Some(w) = self.remove(id) {
            let _ = w.tx.send(reply);
        }
    }

    /// The oldest waiter on (shard, db, key) whose command is not in
    /// flight: its id, spec and arguments.
    pub fn first(
        &self,
        shard: u64,
        db: usize,
        key: &Bytes,
    ) -> Option<(u64, &'static CommandSpec, Vec<Bytes>)> {
        let ids = self.by_key.get(&(shard, db, key.clone()))?;
        ids.iter().find_map(|id| {
            let w = self.waiters.get(id)?;
            (!w.in_flight).then(|| (*id, w.spec, w.args.clone()))
        })
    }

    /// The parked waiters ahead of `id` in the queue of one of its keys,
    /// oldest first: when `id` must run again after a write, they run
    /// first, so the oldest waiter is served first as in Redis.
    pub fn parked_ahead_of(&self, id: u64) -> Vec<u64> {
        let Some(w) = self.waiters.get(&id) else {
            return Vec::new();
        };
        let mut ahead: Vec<u64> = w
            .keys
            .iter()
            .filter_map(|k| self.by_key.get(&(w.shard, w.db, k.clone())))
            .flat_map(|queue| queue.iter().take_while(|&&other| other != id))
            .copied()
            .filter(|other| self.waiters.get(other).is_some_and(|o| !o.in_flight))
            .collect();
        ahead.sort_unstable();
        ahead.dedup();
        ahead
    }

    /// Marks a parked waiter's command as running again (cluster mode:
    /// proposed).
    pub fn set_in_flight(&mut self, id: u64) {
        if let Some(w) = self.waiters.get_mut(&id) {
            w.in_flight = true;
            w.woken = false;
        }
    }

    /// A write to (shard, db, key) was applied on this node: in-flight
    /// waiters on it must run again when their result comes back. Returns
    /// whether a parked waiter can be served.
    pub fn note_write(&mut self, shard: u64, db: usize, key: &Bytes) -> bool {
        let Some(ids) = self.by_key.get(&(shard, db, key.clone())) else {
            return false;
        };
        let mut parked = false;
        for id in ids {
            if let Some(w) = self.waiters.get_mut(id) {
                if w.in_flight {
                    w.woken = true;
                } else {
                    parked = true;
                }
            }
        }
        parked
    }

    /// An in-flight command found nothing (again). `keys` are the keys it
    /// waits for, `args` what to run next time (a blocking XREAD with `$`
    /// resolved), `on_timeout` its timeout reply. Returns what to do next,
    /// and the timeout to arm if this was its first "nothing found".
    pub fn blocked(
        &mut self,
        id: u64,
        keys: Vec<Bytes>,
        args: Option<Vec<Bytes>>,
        on_timeout: Reply,
    ) -> (AfterBlock, bool) {
        let Some(w) = self.waiters.get_mut(&id) else {
            return (AfterBlock::Done, false);
        };
        if let Some(args) = args {
            w.args = args;
        }
        if w.timed_out {
            let reply = w.unblocked_with.take().unwrap_or(on_timeout);
            self.deliver(id, reply);
            return (AfterBlock::Done, false);
        }
        let first = w.on_timeout.is_none();
        w.on_timeout = Some(on_timeout);
        let next = if w.woken {
            w.woken = false;
            AfterBlock::Retry
        } else {
            w.in_flight = false;
            AfterBlock::Parked
        };
        if w.keys != keys {
            // Indexed under the keys the command reported; it keeps its
            // place in the queues of the keys it already had.
            let (shard, db) = (w.shard, w.db);
            let old = std::mem::replace(&mut w.keys, keys.clone());
            let dropped: Vec<Bytes> = old.into_iter().filter(|k| !keys.contains(k)).collect();
            self.unindex_keys(id, shard, db, &dropped);
            self.index_keys(id, shard, db, &keys);
        }
        (next, first)
    }

    /// A re-run found its keys holding another type (see
    /// `machine::waits_on_other_type`): it keeps waiting, as parked before.
    pub fn repark(&mut self, id: u64) -> bool {
        let Some(w) = self.waiters.get_mut(&id) else {
            return false;
        };
        if w.on_timeout.is_none() {
            return false;
        }
        if w.timed_out {
            let reply = w
                .unblocked_with
                .take()
                .or_else(|| w.on_timeout.clone())
                .unwrap_or(Reply::NilArray);
            self.deliver(id, reply);
            return true;
        }
        w.in_flight = false;
        true
    }

    /// CLIENT UNBLOCK: the waiter ends now with `reply` (None: its timeout
    /// reply), or, if its command is in flight, when that finds nothing
    /// (what it found otherwise is its answer: nothing popped is lost).
    /// False if there is no such waiter.
    pub fn unblock(&mut self, id: u64, reply: Option<Reply>) -> bool {
        let Some(w) = self.waiters.get_mut(&id) else {
            return false;
        };
        if w.in_flight {
            w.timed_out = true;
            w.unblocked_with = reply;
            return true;
        }
        let reply = reply
            .or_else(|| w.on_timeout.clone())
            .unwrap_or(Reply::NilArray);
        self.deliver(id, reply);
        true
    }

    /// The waiter's timeout fired: a parked waiter gets its timeout reply;
    /// one in flight gets it if the command finds nothing.
    pub fn time_out(&mut self, id: u64) {
        let Some(w) = self.waiters.get_mut(&id) else {
            return;
        };
        if w.in_flight {
            w.timed_out = true;
            return;
        }
        let reply = w.on_timeout.clone().unwrap_or(Reply::NilArray);
        self.deliver(id, reply);
    }

    /// Keys of `db` on the standalone shard that have waiters (SWAPDB).
    pub fn keys_in_db(&self, shard: u64, db: usize) -> Vec<Bytes> {
        self.by_key
            .keys()
            .filter(|(s, d, _)| *s == shard && *d == db)
            .map(|(_, _, k)| k.clone())
            .collect()
    }
}

/// Arms a waiter's timeout (none for 0, which waits forever).
pub fn arm_timeout(blocking: &SharedBlocking, id: u64, timeout_ms: u64) {
    if timeout_ms == 0 {
        return;
    }
    let blocking = Rc::downgrade(blocking);
    tokio::task::spawn_local(async move {
        tokio::time::sleep(Duration::from_millis(timeout_ms)).await;
        if let Some(b) = blocking.upgrade() {
            b.borrow_mut().time_out(id);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> &'static CommandSpec {
        kvasir_core::lookup(b"blpop").expect("blpop")
    }

    fn key(k: &str) -> Bytes {
        Bytes::copy_from_slice(k.as_bytes())
    }

    #[test]
    fn oldest_parked_waiter_first_and_in_flight_ones_skipped() {
        let mut b = Blocking::default();
        let (a, _ra) = b.park(0, 0, spec(), vec![], vec![key("k")], Some(Reply::NilArray));
        let (c, _rc) = b.park(0, 0, spec(), vec![], vec![key("k")], Some(Reply::NilArray));
        assert_eq!(b.first(0, 0, &key("k")).map(|f| f.0), Some(a));
        b.set_in_flight(a);
        assert_eq!(b.first(0, 0, &key("k")).map(|f| f.0), Some(c));
        assert!(b.first(1, 0, &key("k")).is_none(), "shards are apart");
        b.remove(c);
        assert!(b.first(0, 0, &key("k")).is_none());
        assert!(b.is_blocked_on(0, 0, &key("k")));
        b.remove(a);
        assert!(b.is_empty() && !b.is_blocked_on(0, 0, &key("k")));
    }

    #[test]
    fn parked_waiters_ahead_on_shared_keys_are_listed_oldest_first() {
        let mut b = Blocking::default();
        let (a, _ra) = b.park(0, 0, spec(), vec![], vec![key("k")], Some(Reply::NilArray));
        let (x, _rx) = b.park(
            0,
            0,
            spec(),
            vec![],
            vec![key("other")],
            Some(Reply::NilArray),
        );
        let (c, _rc) = b.park(
            0,
            0,
            spec(),
            vec![],
            vec![key("j"), key("k")],
            Some(Reply::NilArray),
        );
        let (d, _rd) = b.park(0, 0, spec(), vec![], vec![key("k"), key("j")], None);
        assert_eq!(b.parked_ahead_of(d), vec![a, c]);
        assert!(b.parked_ahead_of(a).is_empty());
        assert!(!b.parked_ahead_of(d).contains(&x), "no shared key");
        // One already running again is not ahead any more.
        b.set_in_flight(a);
        assert_eq!(b.parked_ahead_of(d), vec![c]);
    }

    #[test]
    fn a_write_during_flight_makes_the_command_run_again() {
        let mut b = Blocking::default();
        let (id, _rx) = b.park(3, 0, spec(), vec![], vec![key("k")], None);
        assert!(!b.note_write(3, 0, &key("k")), "nothing parked yet");
        let (next, first) = b.blocked(id, vec![key("k")], None, Reply::NilArray);
        assert!(matches!(next, AfterBlock::Retry) && first);
        let (next, first) = b.blocked(id, vec![key("k")], None, Reply::NilArray);
        assert!(matches!(next, AfterBlock::Parked) && !first);
        assert!(b.note_write(3, 0, &key("k")), "parked: serve it");
    }

    #[test]
    fn timeouts_answer_parked_waiters_and_wait_for_flights() {
        let mut b = Blocking::default();
        let (id, mut rx) = b.park(0, 0, spec(), vec![], vec![key("k")], Some(Reply::NilArray));
        b.time_out(id);
        assert_eq!(rx.try_recv().ok(), Some(Reply::NilArray));
        assert!(b.is_empty());

        let (id, mut rx) = b.park(0, 0, spec(), vec![], vec![key("k")], None);
        b.time_out(id);
        assert!(rx.try_recv().is_err(), "in flight: the result decides");
        let (next, _) = b.blocked(id, vec![key("k")], None, Reply::Nil);
        assert!(matches!(next, AfterBlock::Done));
        assert_eq!(rx.try_recv().ok(), Some(Reply::Nil));

        let (id, mut rx) = b.park(0, 0, spec(), vec![], vec![key("k")], None);
        b.time_out(id);
        b.deliver(id, Reply::Int(1));
        assert_eq!(rx.try_recv().ok(), Some(Reply::Int(1)), "a served pop wins");
    }
}
