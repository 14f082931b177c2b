//! `maxmemory` and `maxmemory-policy`. While the allocator's used memory is
//! above `maxmemory`:
//! - under an evicting policy, keys are evicted before the next command
//!   runs (Redis's `performEvictions`): `kvasir_core::evict` picks them from
//!   the shards this node orders, and a `ShardCmd::Evict` deletes them, so
//!   under Raft every replica removes the same keys;
//! - under `noeviction`, or when nothing is left to evict, commands that
//!   may grow the dataset (DENYOOM in the command table) are refused with
//!   Redis's OOM error, so is queuing any command in MULTI (which aborts
//!   the transaction), and an EXEC whose queue holds a DENYOOM one is
//!   refused; reads, deletions and everything else go on.
//!
//! The decision is made when the node admits a command, never when an
//! entry applies, so every replica still applies every entry alike.

use crate::config::Config;
use crate::router::LOCAL_SHARD;
use bytes::Bytes;
use kvasir_core::evict::{self, Policy};
use kvasir_core::keyspace::AccessMode;
use kvasir_core::machine::ShardCmd;
use kvasir_core::table::Flags;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Redis's reply to a command refused for memory.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The least one eviction round frees.
const MIN_EVICTION_BYTES: usize = 16 * 1024;

/// How often the used-memory reading is refreshed from jemalloc's
/// statistics, which cost more to refresh than a command to run (a fresh
/// reading at every command made SET -P 16 seven times slower). Between
/// refreshes the reading follows this thread's own allocations
/// ([`ThreadBytes`]).
const REFRESH: Duration = Duration::from_millis(1);

/// jemalloc's counters of the bytes this thread allocated and freed, read
/// through pointers: a plain load each, so the reading can follow every
/// command's growth between refreshes (a SETBIT that grows a string by
/// 200 KB is over the limit at the very next command, as in Redis).
#[derive(Clone, Copy)]
struct ThreadBytes {
    allocated: tikv_jemalloc_ctl::thread::ThreadLocal<u64>,
    deallocated: tikv_jemalloc_ctl::thread::ThreadLocal<u64>,
}

impl ThreadBytes {
    fn of_this_thread() -> Option<ThreadBytes> {
        Some(ThreadBytes {
            allocated: tikv_jemalloc_ctl::thread::allocatedp::read().ok()?,
            deallocated: tikv_jemalloc_ctl::thread::deallocatedp::read().ok()?,
        })
    }

    /// Bytes allocated less bytes freed by this thread (wrapping).
    fn net(self) -> u64 {
        self.allocated.get().wrapping_sub(self.deallocated.get())
    }
}

/// The node's used memory as last read, for the admission check, and the
/// state of eviction.
pub struct MemoryGuard {
    read_at: Cell<Option<Instant>>,
    used: Cell<u64>,
    /// This (the data) thread's counters, and their net value at the last
    /// refresh.
    thread: Cell<Option<ThreadBytes>>,
    thread_net_at_read: Cell<u64>,
    /// Random state for sampling keys.
    rng: Cell<u64>,
    /// A cluster eviction round is running (it awaits the shard threads).
    evicting: Cell<bool>,
    /// The last eviction round found nothing to evict.
    futile: Cell<bool>,
    /// [`eviction_settings`] of the configuration, parsed once per CONFIG
    /// SET.
    settings: Cell<Option<(Policy, usize, AccessMode)>>,
    /// Keys were evicted (standalone) since the last [`MemoryGuard::take_evicted`]:
    /// the invalidations of tracked keys that caused precede the reply of
    /// the command that made room, as in Redis.
    evicted: Cell<bool>,
    /// The index growth (database, bytes) an eviction round already made
    /// room for: if that round could not keep the index from growing (no
    /// key of its database was evicted), it may grow, rather than every
    /// command evicting again for it.
    growth_tried: Cell<Option<(usize, usize)>>,
}

impl Default for MemoryGuard {
    fn default() -> Self {
        MemoryGuard {
            read_at: Cell::new(None),
            used: Cell::new(0),
            thread: Cell::new(None),
            thread_net_at_read: Cell::new(0),
            rng: Cell::new(crate::local_store::unix_ms() ^ 0x6576_6963_7421),
            evicting: Cell::new(false),
            futile: Cell::new(false),
            settings: Cell::new(None),
            evicted: Cell::new(false),
            growth_tried: Cell::new(None),
        }
    }
}

impl MemoryGuard {
    /// Whether keys were evicted since the last call.
    pub fn take_evicted(&self) -> bool {
        self.evicted.replace(false)
    }

    /// Used memory: read again if the last reading is older than REFRESH,
    /// else that reading moved by what this thread allocated and freed
    /// since.
    fn used(&self) -> u64 {
        let now = Instant::now();
        if self.thread.get().is_none() {
            self.thread.set(ThreadBytes::of_this_thread());
        }
        let net = self.thread.get().map_or(0, ThreadBytes::net);
        if self
            .read_at
            .get()
            .is_none_or(|at| now.duration_since(at) >= REFRESH)
        {
            self.used.set(crate::info::used_memory());
            self.read_at.set(Some(now));
            self.thread_net_at_read.set(net);
        }
        let moved = net.wrapping_sub(self.thread_net_at_read.get()) as i64;
        self.used.get().saturating_add_signed(moved)
    }

    /// Whether used memory is above `maxmemory` (0: no limit).
    pub fn over(&self, maxmemory: u64) -> bool {
        self.over_with(maxmemory, 0)
    }

    /// Whether used memory and `growth` more bytes are above `maxmemory`.
    fn over_with(&self, maxmemory: u64, growth: usize) -> bool {
        maxmemory != 0 && self.used() + growth as u64 > maxmemory
    }

    /// Takes `bytes` off the reading until its next refresh: what an
    /// eviction just freed (estimated), so the commands right after it do
    /// not evict again for the same excess. The reading keeps its age: a
    /// credit that restarted it kept a stale figure alive for as long as
    /// commands came within REFRESH of each other (an eviction round that
    /// freed nothing, at every command, after a FLUSHALL had freed
    /// everything: OOM on an empty server).
    fn credit(&self, bytes: u64) {
        self.used.set(self.used.get().saturating_sub(bytes));
    }

    /// Drops the parsed settings (after CONFIG SET).
    pub fn forget_settings(&self) {
        self.settings.set(None);
    }

    /// The seed of an eviction round's draws. Mixed, not a plain step:
    /// a round's n-th draw is a function of `seed + n * step` with the
    /// same step, so seeds one step apart made each round draw the
    /// previous round's positions again, shifted by one; since deleting a
    /// key moves the newest entry into its slot, those positions came to
    /// hold new keys, and allkeys-lru evicted recently written and read
    /// keys while thousands of idle ones remained.
    fn next_seed(&self) -> u64 {
        let s = self.rng.get().wrapping_add(1);
        self.rng.set(s);
        kvasir_core::store::Ctx { now_ms: 0, seed: 0 }.random(s)
    }
}

/// The eviction settings of `config`: the policy, `maxmemory-samples` and
/// how accesses are stamped (`lfu-log-factor`, `lfu-decay-time`).
pub fn eviction_settings(config: &Config) -> (Policy, usize, AccessMode) {
    let policy = Policy::parse(&config.maxmemory_policy).unwrap_or(Policy::NoEviction);
    let number = |name: &str, default: u32| {
        config
            .stored
            .get(name)
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(default)
    };
    let samples = number("maxmemory-samples", 5).clamp(1, 64) as usize;
    let mode = policy.access_mode(number("lfu-log-factor", 10), number("lfu-decay-time", 1));
    (policy, samples, mode)
}

impl crate::Server {
    /// Whether a command whose call has `flags` (see
    /// `Session::invocation_flags`) must be refused now for lack of
    /// memory; evicts first when the policy allows (for every command, as
    /// Redis does).
    pub fn refuses_for_memory(self: &Rc<Self>, flags: impl FnOnce() -> Flags) -> bool {
        let maxmemory = self.config.borrow().maxmemory;
        if maxmemory == 0 {
            return false;
        }
        let growth = self.index_growth();
        let growth_bytes = growth.map_or(0, |(_, bytes)| bytes);
        if !self.memory_guard.over_with(maxmemory, growth_bytes) {
            return false;
        }
        // Evict or refuse only on a fresh reading: the cached one may
        // predate a FLUSHALL or a deletion of the last millisecond.
        self.memory_guard.read_at.set(None);
        if !self.memory_guard.over_with(maxmemory, growth_bytes) {
            return false;
        }
        if self.client_pause.in_force() {
            // Redis evicts nothing during CLIENT PAUSE (no DEL reaches
            // its replicas) and admits the command.
            return false;
        }
        let (policy, samples, _) = self.eviction();
        if policy.evicts() {
            if growth.is_some() {
                self.memory_guard.growth_tried.set(growth);
            }
            self.evict(policy, samples, maxmemory, growth_bytes);
            // As Redis's EVICT_RUNNING: a round that stopped at its bound
            // (or, in cluster mode, is on its way through the log) admits
            // the command; a policy that ran out of keys while memory is
            // still over refuses it.
            if !self.memory_guard.futile.get() || !self.memory_guard.over(maxmemory) {
                return false;
            }
        }
        // Worked out only now: commands below the limit never need it.
        flags().contains(Flags::DENYOOM)
    }

    /// The index growth the next new key of a database would cause
    /// (standalone, under an evicting policy): (database, bytes), the
    /// largest, unless an eviction round was already run for it. Counted
    /// against `maxmemory` so that keys are evicted before the index
    /// doubles past the limit, as Redis does not expand a dict that would
    /// take used memory over it.
    fn index_growth(&self) -> Option<(usize, usize)> {
        if self.cluster.is_some() || !self.eviction().0.evicts() {
            return None;
        }
        let store = self.local_store.borrow();
        let store = store.store();
        let largest = (0..store.databases())
            .map(|db| {
                (
                    db,
                    kvasir_core::keyspace::Keyspace::growth_reserve(store.keyspace(), db),
                )
            })
            .max_by_key(|&(_, bytes)| bytes)
            .filter(|&(_, bytes)| bytes > 0);
        let guard = &self.memory_guard;
        match largest {
            None => {
                guard.growth_tried.set(None);
                None
            }
            Some(g) if guard.growth_tried.get() == Some(g) => None,
            some => some,
        }
    }

    /// Evicts at once if used memory is above `maxmemory` (after CONFIG
    /// SET lowers it: Redis evicts then, not at the next command).
    pub fn evict_if_over(self: &Rc<Self>) {
        let maxmemory = self.config.borrow().maxmemory;
        if !self.memory_guard.over(maxmemory) || self.client_pause.in_force() {
            return;
        }
        let (policy, samples, _) = self.eviction();
        if policy.evicts() {
            self.evict(policy, samples, maxmemory, 0);
        }
    }

    /// Whether used memory is above `maxmemory`: then Redis refuses to
    /// queue any command in MULTI (the queue itself takes memory).
    pub fn over_maxmemory(&self) -> bool {
        self.memory_guard.over(self.config.borrow().maxmemory)
    }

    /// Orders the eviction of enough keys to bring used memory down to
    /// `maxmemory`: at once on the standalone store, by a task that asks
    /// each led shard's thread in cluster mode.
    fn evict(self: &Rc<Self>, policy: Policy, samples: usize, maxmemory: u64, growth: usize) {
        let guard = &self.memory_guard;
        if self.cluster.is_none() {
            // Decided again by this round: a verdict left from an earlier
            // round (another policy, before a FLUSHALL, a round skipped
            // below) must not refuse the command that follows.
            guard.futile.set(false);
        }
        let over = (guard.used() + growth as u64).saturating_sub(maxmemory) as usize;
        if over == 0 {
            return;
        }
        // A little more than the excess, so that the next commands do
        // not each run a round of their own for a few bytes.
        let to_free = over.max(MIN_EVICTION_BYTES);
        if self.cluster.is_some() {
            if guard.evicting.replace(true) {
                return;
            }
            let shards = self.led_shards();
            let share = to_free / shards.len().max(1) + 1;
            let server = self.clone();
            tokio::task::spawn_local(async move {
                let mut freed = 0usize;
                for shard in shards {
                    let seed = server.memory_guard.next_seed();
                    let picked = server
                        .on_shard(shard, move |store| {
                            evict::select(store, policy, samples, share, seed)
                        })
                        .await
                        .unwrap_or_default();
                    freed += picked.iter().map(|v| v.size).sum::<usize>();
                    for (db, keys) in by_db(picked) {
                        server.order(shard, ShardCmd::Evict { db, keys });
                    }
                }
                let g = &server.memory_guard;
                g.credit(freed as u64);
                g.futile.set(freed == 0);
                g.evicting.set(false);
            });
            return;
        }
        if self.busy_script().is_some() {
            return;
        }
        let picked = evict::select(
            self.local_store.borrow().store(),
            policy,
            samples,
            to_free,
            guard.next_seed(),
        );
        let freed: usize = picked.iter().map(|v| v.size).sum();
        // Redis's EVICT_FAIL: the policy ran out of keys before freeing
        // the excess (not merely a round's bound).
        guard
            .futile
            .set(freed < over && picked.len() < evict::MAX_VICTIMS);
        guard.evicted.set(!picked.is_empty());
        for (db, keys) in by_db(picked) {
            self.order(LOCAL_SHARD, ShardCmd::Evict { db, keys });
        }
        guard.credit(freed as u64);
    }

    /// The configuration's [`eviction_settings`], parsed once per CONFIG
    /// SET.
    fn eviction(&self) -> (Policy, usize, AccessMode) {
        let guard = &self.memory_guard;
        guard.settings.get().unwrap_or_else(|| {
            let s = eviction_settings(&self.config.borrow());
            guard.settings.set(Some(s));
            s
        })
    }

    /// How shard stores stamp accesses under the current policy (the
    /// expiry cycle hands it to every shard it visits, so shards created
    /// later get it too).
    pub fn access_mode(&self) -> AccessMode {
        self.eviction().2
    }
}

fn by_db(victims: Vec<evict::Victim>) -> BTreeMap<usize, Vec<Bytes>> {
    let mut out: BTreeMap<usize, Vec<Bytes>> = BTreeMap::new();
    for v in victims {
        out.entry(v.db).or_default().push(v.key);
    }
    out
}
