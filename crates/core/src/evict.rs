//! `maxmemory-policy`: which keys go when used memory is above
//! `maxmemory`. Redis's approximation: each pick samples
//! `maxmemory-samples` keys of every database (of those with an expiry for
//! the `volatile-*` policies) into a pool of the best candidates seen so
//! far and takes the best by the policy: the longest idle (LRU), the least
//! used (LFU), the nearest expiry (TTL); the random policies take the
//! first key drawn.
//!
//! Picking is a read of the shard's state and its node-local access stamps;
//! the keys picked are then deleted by a `ShardCmd::Evict` entry, so under
//! Raft the leader decides and every replica removes the same keys.

use crate::keyspace::{AccessMode, Keyspace};
use crate::store::{Ctx, Store};
use bytes::Bytes;
use std::collections::HashSet;
use std::hash::BuildHasher;

/// Keys picked so far in one selection, by hash of database and key (a
/// collision only makes a key look taken: another one is picked).
type Taken = HashSet<u64, foldhash::fast::FixedState>;

fn taken_hash(db: usize, key: &[u8]) -> u64 {
    foldhash::fast::FixedState::with_seed(db as u64).hash_one(key)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

const NAMES: &[(&str, Policy)] = &[
    ("noeviction", Policy::NoEviction),
    ("allkeys-lru", Policy::AllKeysLru),
    ("allkeys-lfu", Policy::AllKeysLfu),
    ("allkeys-random", Policy::AllKeysRandom),
    ("volatile-lru", Policy::VolatileLru),
    ("volatile-lfu", Policy::VolatileLfu),
    ("volatile-random", Policy::VolatileRandom),
    ("volatile-ttl", Policy::VolatileTtl),
];

impl Policy {
    /// The policy named `name` (case-insensitive, as CONFIG SET takes it).
    pub fn parse(name: &str) -> Option<Policy> {
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, p)| p)
    }

    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|&&(_, p)| p == self)
            .map_or("noeviction", |&(n, _)| n)
    }

    pub fn evicts(self) -> bool {
        self != Policy::NoEviction
    }

    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }

    fn volatile_only(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    /// How key accesses are stamped under this policy.
    pub fn access_mode(self, log_factor: u32, decay_minutes: u32) -> AccessMode {
        if self.is_lfu() {
            AccessMode::Lfu {
                log_factor,
                decay_minutes,
            }
        } else {
            AccessMode::Lru
        }
    }
}

/// A key chosen for eviction and the bytes its removal frees (estimated,
/// as MEMORY USAGE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victim {
    pub db: usize,
    pub key: Bytes,
    pub size: usize,
}

/// Keys one selection picks at most: a limit lowered far below the data
/// is reached over several commands (as Redis bounds each eviction run's
/// time), and each pick checks the ones before it.
pub const MAX_VICTIMS: usize = 512;

/// Picks in a row that draw only keys taken already before a selection
/// ends short of its goal.
const MAX_EMPTY_PICKS: usize = 16;

/// Draws for one pick of keys with an expiry among all keys, before a
/// database whose volatile keys are rare is walked instead.
const VOLATILE_DRAWS_PER_SAMPLE: usize = 8;

/// Candidates kept between picks, best last (Redis's eviction pool of 16):
/// each pick samples a few keys and merges them in, so a key stays a
/// candidate until a better one is seen, and picks over many calls approach
/// a true LRU (LFU, TTL) order. Scores are those of the policy in `policy`.
#[derive(Default)]
pub struct Pool {
    policy: Option<Policy>,
    /// (score, database, key), ascending by score.
    entries: Vec<(u64, usize, Bytes)>,
}

const POOL_SIZE: usize = 16;

impl Pool {
    fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        if self.entries.len() == POOL_SIZE && self.entries[0].0 >= score {
            return;
        }
        if self.entries.iter().any(|(_, d, k)| *d == db && k == key) {
            return;
        }
        let at = self.entries.partition_point(|(s, _, _)| *s < score);
        self.entries
            .insert(at, (score, db, Bytes::copy_from_slice(key)));
        if self.entries.len() > POOL_SIZE {
            self.entries.remove(0);
        }
    }
}

/// Picks keys to evict by `policy` until their estimated sizes add up to
/// `to_free` bytes, [`MAX_VICTIMS`] keys, or nothing evictable is left
/// (an empty result: the policy cannot free memory). The keys are drawn
/// from `seed`.
pub fn select<K: Keyspace>(
    store: &Store<K>,
    policy: Policy,
    samples: usize,
    to_free: usize,
    seed: u64,
) -> Vec<Victim> {
    let mut draws = Draws {
        ctx: Ctx { now_ms: 0, seed },
        n: 0,
    };
    let mut picked: Vec<Victim> = Vec::new();
    let mut taken = Taken::default();
    let mut freed = 0usize;
    let mut misses = 0;
    let mut pool = store.evict_pool.borrow_mut();
    if pool.policy != Some(policy) {
        *pool = Pool {
            policy: Some(policy),
            entries: Vec::new(),
        };
    }
    while freed < to_free && picked.len() < MAX_VICTIMS && policy.evicts() {
        let Some((db, key)) =
            pick_one(store, policy, samples.max(1), &mut draws, &taken, &mut pool)
        else {
            // Nothing evictable, or every key drawn was taken already:
            // a few more draws, then the caller tries again later.
            misses += 1;
            if misses == MAX_EMPTY_PICKS || picked.is_empty() {
                break;
            }
            continue;
        };
        let size = store.keyspace().entry_size(db, &key).max(1);
        freed += size;
        taken.insert(taken_hash(db, &key));
        picked.push(Victim { db, key, size });
    }
    picked
}

/// One pick: a sampling round merged into the pool, then the best
/// candidate that still exists and is not taken. A random policy takes
/// the first key drawn.
fn pick_one<K: Keyspace>(
    store: &Store<K>,
    policy: Policy,
    samples: usize,
    rng: &mut Draws,
    taken: &Taken,
    pool: &mut Pool,
) -> Option<(usize, Bytes)> {
    let ks = store.keyspace();
    let random = matches!(policy, Policy::AllKeysRandom | Policy::VolatileRandom);
    let mut first: Option<(usize, Bytes)> = None;
    for db in 0..ks.databases() {
        let len = ks.len(db);
        if len == 0 || (policy.volatile_only() && ks.expires_count(db) == 0) {
            continue;
        }
        let mut consider = |e: crate::keyspace::EntryRef<'_, K>| {
            if !taken.is_empty() && taken.contains(&taken_hash(db, e.key)) {
                return;
            }
            if random {
                if first.is_none() {
                    first = Some((db, Bytes::copy_from_slice(e.key)));
                }
                return;
            }
            let score = match policy {
                Policy::AllKeysLru | Policy::VolatileLru => ks.idle_seconds(&e),
                Policy::AllKeysLfu | Policy::VolatileLfu => 255 - ks.access_frequency(&e) as u64,
                Policy::VolatileTtl => u64::MAX - e.expire_at().unwrap_or(u64::MAX),
                Policy::AllKeysRandom | Policy::VolatileRandom | Policy::NoEviction => 0,
            };
            pool.offer(score, db, e.key);
        };
        if !policy.volatile_only() {
            for _ in 0..samples {
                if let Some(e) = ks.random_entry(db, rng.next()) {
                    consider(e);
                }
            }
            continue;
        }
        let mut found = 0;
        for _ in 0..samples * VOLATILE_DRAWS_PER_SAMPLE {
            if found == samples {
                break;
            }
            if let Some(e) = ks.random_entry(db, rng.next()) {
                if e.expire_at().is_some() {
                    found += 1;
                    consider(e);
                }
            }
        }
        if found == 0 {
            // Few keys have an expiry: walk the database for some.
            let mut cursor = 0;
            let mut visited = 0;
            while found < samples && visited < len {
                let before = visited;
                cursor = ks.scan(db, cursor, samples * 16, |e| {
                    visited += 1;
                    if found < samples && e.expire_at().is_some() {
                        found += 1;
                        consider(e);
                    }
                });
                if cursor == 0 || visited == before {
                    break;
                }
            }
        }
    }
    if random {
        return first;
    }
    // The best candidate still there (a key may have gone since it was
    // offered, or be picked already in this selection).
    while let Some((_, db, key)) = pool.entries.pop() {
        if taken.contains(&taken_hash(db, &key)) {
            continue;
        }
        let still = ks
            .get(db, &key)
            .is_some_and(|e| !policy.volatile_only() || e.expire_at().is_some());
        if still {
            return Some((db, key));
        }
    }
    None
}

/// The random numbers of one selection: the `n`-th of its seed.
struct Draws {
    ctx: Ctx,
    n: u64,
}

impl Draws {
    fn next(&mut self) -> u64 {
        self.n += 1;
        self.ctx.random(self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(store: &mut Store, key: &str, expire_at: Option<u64>) {
        store.db_mut(0).set(
            key.as_bytes(),
            crate::keyspace::Value::from_bytes(b"v"),
            expire_at,
        );
    }

    #[test]
    fn policies_parse_and_print_as_redis_names_them() {
        for (name, p) in NAMES {
            assert_eq!(Policy::parse(name), Some(*p));
            assert_eq!(Policy::parse(&name.to_uppercase()), Some(*p));
            assert_eq!(p.name(), *name);
        }
        assert_eq!(Policy::parse("lru"), None);
    }

    #[test]
    fn lru_picks_the_key_idle_longest_and_lfu_the_least_used() {
        let mut store = Store::default();
        store.keyspace().set_access_clock(1_000);
        for i in 0..5 {
            put(&mut store, &format!("k{i}"), None);
        }
        // Everything but k3 is read 100 s later.
        store.keyspace().set_access_clock(101_000);
        for i in [0, 1, 2, 4] {
            assert!(store.live(0, format!("k{i}").as_bytes(), 101_000).is_some());
        }
        let rng = 1;
        // 5 keys, 64 samples: every key is seen.
        let v = select(&store, Policy::AllKeysLru, 64, 1, rng);
        assert_eq!(v.len(), 1);
        assert_eq!(&v[0].key[..], b"k3");

        let mut store = Store::default();
        store.keyspace().set_access_mode(AccessMode::Lfu {
            log_factor: 0,
            decay_minutes: 0,
        });
        for i in 0..5 {
            put(&mut store, &format!("k{i}"), None);
        }
        for _ in 0..20 {
            for i in [0, 1, 3, 4] {
                assert!(store.live(0, format!("k{i}").as_bytes(), 0).is_some());
            }
        }
        let v = select(&store, Policy::AllKeysLfu, 64, 1, rng);
        assert_eq!(&v[0].key[..], b"k2");
    }

    #[test]
    fn volatile_policies_pick_only_keys_with_an_expiry() {
        let mut store = Store::default();
        for i in 0..2_000 {
            put(&mut store, &format!("p{i}"), None);
        }
        put(&mut store, "soon", Some(5_000));
        put(&mut store, "later", Some(9_000));
        let rng = 7;
        let v = select(&store, Policy::VolatileTtl, 5, 1, rng);
        assert_eq!(&v[0].key[..], b"soon");
        let v = select(&store, Policy::VolatileRandom, 5, usize::MAX, rng);
        let mut keys: Vec<_> = v.iter().map(|v| v.key.clone()).collect();
        keys.sort();
        assert_eq!(keys, vec![Bytes::from("later"), Bytes::from("soon")]);
        // With no key carrying an expiry nothing can be freed.
        let mut store = Store::default();
        put(&mut store, "p", None);
        assert!(select(&store, Policy::VolatileLru, 5, 1, rng).is_empty());
        assert!(select(&store, Policy::NoEviction, 5, 1, rng).is_empty());
    }

    #[test]
    fn selection_stops_once_enough_is_freed_and_never_takes_a_key_twice() {
        let mut store = Store::default();
        for i in 0..50 {
            put(&mut store, &format!("k{i}"), None);
        }
        let rng = 3;
        let one = store.keyspace().entry_size(0, b"k0");
        let v = select(&store, Policy::AllKeysRandom, 5, one * 10, rng);
        assert_eq!(v.len(), 10);
        let all = select(&store, Policy::AllKeysRandom, 5, usize::MAX, rng);
        assert!(all.len() <= MAX_VICTIMS);
        let distinct: HashSet<_> = all.iter().map(|v| v.key.clone()).collect();
        assert_eq!(distinct.len(), all.len());
        assert!(all.len() >= 40, "{}", all.len());
    }
}
