//! Active expiry: Redis's sampling cycle, adapted to deterministic apply.
//!
//! Redis samples 20 keys that carry a TTL, deletes the expired ones, and
//! repeats while more than 10% of a sample had expired, within a time
//! budget. Here the cycle only *chooses* keys (a read of the store); the
//! shard then applies them through [`Store::apply_expired`] like any other
//! write, so under Raft the leader proposes the deletions and followers
//! replay them (determinism, docs/architecture.md). Sampling walks each database with a
//! moving cursor instead of random picks, which keeps it reproducible.

use crate::keyspace::Keyspace;
use crate::store::Store;
use bytes::Bytes;

/// Keys with a TTL examined per sample (Redis: ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP).
pub const KEYS_PER_SAMPLE: usize = 20;
/// Keep sampling a database while more than this percentage was expired.
pub const ACCEPTABLE_STALE_PERCENT: usize = 10;

/// Cursor state of the cycle, one scan cursor per database.
#[derive(Debug, Default)]
pub struct ActiveExpire {
    cursors: Vec<u64>,
}

impl ActiveExpire {
    /// Picks expired keys at `now_ms`, visiting at most `max_visits` entries
    /// in all. Returns (db, keys) groups to hand to `Store::apply_expired`.
    pub fn collect<K: Keyspace>(
        &mut self,
        store: &Store<K>,
        now_ms: u64,
        max_visits: usize,
    ) -> Vec<(usize, Vec<Bytes>)> {
        self.cursors.resize(store.databases(), 0);
        let mut out = Vec::new();
        let mut visits = 0;
        for dbi in 0..store.databases() {
            let db = store.db(dbi);
            if db.expires_count() == 0 || db.is_empty() {
                continue;
            }
            let mut expired = Vec::new();
            // Each entry is visited at most once per cycle, so a key can
            // not be picked twice (no de-duplication needed), and a sparse
            // TTL population cannot make the cycle walk a database twice.
            let mut walked = 0;
            loop {
                let mut sampled = 0;
                let mut stale = 0;
                while sampled < KEYS_PER_SAMPLE && walked < db.len() && visits < max_visits {
                    walked += 1;
                    visits += 1;
                    // A cursor back at 0 wraps around to a new walk.
                    self.cursors[dbi] = db.scan(self.cursors[dbi], 1, |e| {
                        if e.expire_at().is_some() {
                            sampled += 1;
                            if e.is_expired(now_ms) {
                                stale += 1;
                                expired.push(Bytes::copy_from_slice(e.key));
                            }
                        }
                    });
                }
                let keep_going = sampled > 0
                    && stale * 100 > sampled * ACCEPTABLE_STALE_PERCENT
                    && visits < max_visits
                    && walked < db.len();
                if !keep_going {
                    break;
                }
            }
            if !expired.is_empty() {
                out.push((dbi, expired));
            }
            if visits >= max_visits {
                break;
            }
        }
        out
    }
}
