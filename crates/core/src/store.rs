//! The state machine: 16 databases and the single entry points through
//! which commands read ([`Store::read`]) and write ([`Store::apply`]) them.
//!
//! Determinism (docs/architecture.md): a write's outcome depends only on
//! the store, the arguments and the [`Ctx`] (time and seed chosen by the
//! orderer). Reads treat logically expired keys as missing and never remove
//! them; removal happens in writes (lazily, at `ctx.now_ms`) or through the
//! active expiry cycle, which proposes `Store::apply_expired` like any write.

use crate::error::{CmdError, CmdResult};
use crate::keyspace::{EntryRef, Keyspace, MemoryKeyspace, OwnedEntry, Value};
use crate::table::{resolve, Handler};
use bytes::Bytes;
use std::cell::Cell;

pub const DEFAULT_DATABASES: usize = 16;

/// What a write needs from its orderer: the time (Unix ms) and a seed for
/// any random choice. Identical ctx + identical command = identical result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    pub now_ms: u64,
    pub seed: u64,
}

impl Ctx {
    /// A deterministic pseudo-random number for the `n`-th pick of this
    /// command (splitmix64 over the seed).
    pub fn random(&self, n: u64) -> u64 {
        let mut z = self
            .seed
            .wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(n.wrapping_add(1)));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Counters the server reports in INFO stats. Hits and misses are counted
/// by reads, which see the store only through `&self`; they are local
/// observations (not replicated state), hence the `Cell`s.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    pub expired_keys: u64,
    pub evicted_keys: u64,
    pub keyspace_hits: Cell<u64>,
    pub keyspace_misses: Cell<u64>,
}

/// Thresholds at which small collections switch from their compact
/// encoding (listpack, intset) to an indexed one; Redis's settings of the
/// same names. Part of the state machine (a replicated CONFIG SET changes
/// them), so every replica converts at the same moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodingLimits {
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    pub set_max_intset_entries: usize,
    pub set_max_listpack_entries: usize,
    pub set_max_listpack_value: usize,
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
    /// Redis's list-max-listpack-size: positive = entries per node,
    /// negative = -1..-5 for 4 KB..64 KB per node.
    pub list_max_listpack_size: i64,
    /// Redis's list-compress-depth: a list that becomes a quicklist keeps
    /// its nodes compressed except this many at each end (0: none). A
    /// memory representation only; replies, images and digests are of the
    /// content.
    pub list_compress_depth: u32,
    /// Redis's stream-node-max-entries: entries (deleted ones counted) in
    /// a stream node before an append starts another; 0: no limit by
    /// count. Node boundaries decide what an approximate trim removes, so
    /// replicas must agree on it.
    pub stream_node_max_entries: u64,
    /// Redis's stream-node-max-bytes: a node's data size before an append
    /// starts another; 0: no limit (1 GB).
    pub stream_node_max_bytes: u64,
    /// Lua instructions after which a script is stopped (Kvasir's
    /// `script-max-instructions`). A count, not a time, so every replica
    /// stops the same script at the same point.
    pub script_max_instructions: u64,
}

/// The default of `script-max-instructions`: 1.4-2.8 s of simple Lua loops on
/// one core of this era.
pub const DEFAULT_SCRIPT_MAX_INSTRUCTIONS: u64 = 1_000_000_000;

/// Lua instructions a library's code may run while FUNCTION LOAD loads it
/// (Redis stops it after 500 ms): 200M took 0.95-1.10 s of `a = a + 1` on
/// a release build here, so half that stands for Redis's 500 ms. A count,
/// as the scripts' limit, so every replica loads the same libraries.
pub const LIBRARY_LOAD_MAX_INSTRUCTIONS: u64 = 100_000_000;

impl EncodingLimits {
    /// What the memory engine's lists take from these limits.
    #[inline]
    pub fn list(&self) -> kvasir_engine_memory::list::ListLimits {
        kvasir_engine_memory::list::ListLimits {
            fill: self.list_max_listpack_size,
            compress_depth: self.list_compress_depth,
        }
    }

    /// When a stream append starts a new node.
    #[inline]
    pub fn stream_nodes(&self) -> crate::keyspace::stream_ops::StreamNodeLimits {
        crate::keyspace::stream_ops::StreamNodeLimits {
            max_entries: self.stream_node_max_entries,
            max_bytes: self.stream_node_max_bytes,
        }
    }
}

impl Default for EncodingLimits {
    fn default() -> Self {
        EncodingLimits {
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            stream_node_max_entries: kvasir_engine_memory::stream::NODE_MAX_ENTRIES,
            stream_node_max_bytes: kvasir_engine_memory::stream::NODE_MAX_BYTES,
            script_max_instructions: DEFAULT_SCRIPT_MAX_INSTRUCTIONS,
        }
    }
}

/// A shard's state: the keyspace (an engine behind [`Keyspace`]) and
/// the engine-neutral state around it.
pub struct Store<K: Keyspace = MemoryKeyspace> {
    ks: K,
    pub stats: Stats,
    pub limits: EncodingLimits,
    /// Whether this store is a cluster shard. Commands whose behaviour
    /// Redis changes under `cluster-enabled yes` read it (SORT refuses BY
    /// and GET patterns that may name keys in other slots). Local
    /// configuration of the node, not replicated state: snapshots do not
    /// carry it, whoever creates or restores a shard store sets it.
    pub cluster_mode: bool,
    /// In cluster mode, the slot of a key (scripts check that every key
    /// they touch is in one slot). Local configuration like
    /// `cluster_mode`.
    pub key_slot: Option<fn(&[u8]) -> u16>,
    /// Script bodies and FUNCTION libraries: replicated state.
    pub scripts: crate::scripting::Scripts<K>,
    /// The keyspace event classes to produce (`notify-keyspace-events`,
    /// [`crate::notify`]); 0 produces none at no cost. Local configuration
    /// like `cluster_mode`: the server sets it on every store it creates or
    /// restores, and on CONFIG SET.
    pub notify: u32,
    /// Events produced by the current apply, taken by the apply hook.
    pub events: Vec<crate::notify::Event>,
    /// Set while a script's `redis.call` runs a command (Redis's
    /// CLIENT_SCRIPT flag): SORT BY nosort of a set then sorts, as Redis
    /// does so that scripts see one order. A cell because read-only
    /// scripts reach the store shared; never replicated or imaged.
    pub(crate) script_call: std::cell::Cell<bool>,
    /// Set by a write whose run changed nothing although its reply
    /// cannot tell (a SETBIT of a bit already so): as in Redis it then
    /// counts no change, fires no keyspace event, touches no WATCH and is
    /// not logged. Cleared before each write ([`crate::notify::write`]).
    pub(crate) unchanged: std::cell::Cell<bool>,
    /// A script run since this was last cleared called a read-only
    /// command: how many of its writes ([`Store::reported_writes`]) came
    /// before its last read. CLIENT TRACKING tracks the script's declared
    /// keys at that read, as Redis does at each read the script makes, so
    /// the writes before it invalidate first and those after it then.
    pub script_read: std::cell::Cell<Option<usize>>,
    /// Used memory was over `maxmemory` when the script started (a
    /// standalone server sets it; under Raft it stays false, as memory
    /// differs by replica): its first command that may grow the data is
    /// refused, as Redis refuses it.
    pub script_oom: std::cell::Cell<bool>,
    /// Why writes are refused when the script starts (a standalone server
    /// that cannot persist: Redis's MISCONF): its commands that write are
    /// refused with it.
    pub script_write_refusal: std::cell::RefCell<Option<String>>,
    /// `rename-command` of a standalone server: scripts call commands by
    /// the names clients use (cluster nodes' scripts do not: a script
    /// must run the same on every replica whatever its settings).
    pub renames: std::sync::Arc<crate::table::Renames>,
    /// Set while connections MONITOR this store (standalone): the commands
    /// scripts run are recorded in `script_calls` as (db, argv).
    pub monitored: std::cell::Cell<bool>,
    pub script_calls: std::cell::RefCell<Vec<(usize, Vec<Bytes>)>>,
    /// Set by a standalone server around a client's command: a script
    /// that runs longer than this pauses (`busy-reply-threshold`), so the
    /// server can answer other clients `-BUSY` and take SCRIPT KILL, and
    /// is then resumed to its end ([`Store::resume_script`]). None (the
    /// default, and always under Raft): scripts run through.
    pub script_pause_after: Option<std::time::Duration>,
    /// Set around a restricted user's command (standalone: by the server;
    /// under Raft: by the entry, [`crate::machine::ShardCmd::AsUser`], so
    /// every replica checks the same rules): each `redis.call` of a script
    /// it runs is checked against this user's ACL rules. None: unchecked.
    pub script_caller: std::cell::RefCell<Option<std::sync::Arc<crate::acl::User>>>,
    /// Calls that check refused, as (why, the command's full name or the
    /// key or channel), for the server's ACL LOG.
    pub script_refusals: std::cell::RefCell<Vec<(crate::acl::Denied, String)>>,
    /// The best eviction candidates seen so far (see [`crate::evict`]):
    /// node-local, like the access stamps it ranks.
    pub evict_pool: std::cell::RefCell<crate::evict::Pool>,
    /// Set by a standalone server around a client's read: PFCOUNT then
    /// notes the cardinality it computed (`hll_counted`), which the server
    /// stores in the HLL's header right after, as Redis caches it. Never
    /// under Raft, where a read must not change a replica's bytes.
    pub cache_hll_counts: bool,
    pub(crate) hll_counted: std::cell::RefCell<Vec<(usize, Bytes, u64)>>,
    /// Set by a standalone server around a client's read: a key the read
    /// found expired is noted (`expired_reads`), and the server then
    /// deletes it as Redis's lazy expiry does. Never under Raft, where a
    /// read must not change a replica (the active cycle orders those).
    pub note_expired_reads: bool,
    pub expired_reads: std::cell::RefCell<Vec<(usize, Bytes)>>,
    /// Set by a standalone server around a client's command: each command
    /// a script runs is noted in `script_stats` (its entry, parent, time
    /// in microseconds, whether it failed) for INFO commandstats, which
    /// count a script's commands as Redis does.
    pub record_script_stats: bool,
    pub script_stats: std::cell::RefCell<Vec<ScriptCallStat>>,
    /// What the running command modified, when its entry
    /// `reports_writes` (database, entry, arguments of a write with the
    /// same keys), in order: its write hooks are these, as Redis signals
    /// only the keys a command modifies (a script's calls; SMOVE's
    /// destination only if the member was added). Taken with
    /// [`Store::take_reported_writes`] after every such command.
    pub reported_writes: std::cell::RefCell<Vec<ReportedWrite>>,
}

/// One write a command reported: database, table entry, arguments.
pub type ReportedWrite = (usize, &'static crate::table::CommandSpec, Vec<Bytes>);

/// One command a script ran, for INFO commandstats and errorstats: its
/// table entry, its parent (for a subcommand), microseconds, and its error
/// reply if it failed.
pub type ScriptCallStat = (
    &'static crate::table::CommandSpec,
    Option<&'static crate::table::CommandSpec>,
    u64,
    Option<String>,
);

/// Accounts a key that lazy expiry removed: `expired_keys` and its
/// `expired` event. On the store's fields, so that a caller still holding
/// a borrow of the keyspace can call it.
fn count_expired(
    stats: &mut Stats,
    events: &mut Vec<crate::notify::Event>,
    notify: u32,
    db: usize,
    key: &[u8],
) {
    stats.expired_keys += 1;
    crate::notify::push(events, notify, crate::notify::EXPIRED, "expired", db, key);
}

impl Default for Store {
    fn default() -> Self {
        Store::new(DEFAULT_DATABASES)
    }
}

impl Store {
    /// A store of `databases` empty databases in the memory engine.
    pub fn new(databases: usize) -> Store {
        Store::with_keyspace(MemoryKeyspace::with_databases(databases))
    }
}

impl<K: Keyspace> Store<K> {
    /// Whether the write `spec` that just ran with `args` and answered
    /// `reply` changed nothing: its reply says so, or it said so itself.
    pub fn changed_nothing(
        &self,
        spec: &crate::table::CommandSpec,
        args: &[Bytes],
        reply: &kvasir_resp::Reply,
    ) -> bool {
        self.unchanged.get() || spec.changed_nothing(args, reply)
    }

    /// A store over the keyspace `ks`.
    pub fn with_keyspace(ks: K) -> Store<K> {
        Store {
            ks,
            stats: Stats::default(),
            limits: EncodingLimits::default(),
            cluster_mode: false,
            key_slot: None,
            scripts: Default::default(),
            notify: 0,
            events: Vec::new(),
            script_call: std::cell::Cell::new(false),
            unchanged: std::cell::Cell::new(false),
            script_read: std::cell::Cell::new(None),
            script_oom: std::cell::Cell::new(false),
            script_write_refusal: std::cell::RefCell::new(None),
            renames: std::sync::Arc::default(),
            monitored: std::cell::Cell::new(false),
            script_calls: Default::default(),
            script_pause_after: None,
            script_caller: Default::default(),
            script_refusals: Default::default(),
            evict_pool: Default::default(),
            cache_hll_counts: false,
            hll_counted: Default::default(),
            note_expired_reads: false,
            expired_reads: Default::default(),
            record_script_stats: false,
            script_stats: Default::default(),
            reported_writes: Default::default(),
        }
    }

    /// Runs the paused script on for a slice: its reply once it ended
    /// (or was killed), None while it is still running or if none was
    /// paused.
    pub fn resume_script(&mut self) -> Option<kvasir_resp::Reply> {
        match crate::scripting::vm::resume(crate::scripting::vm::Access::Write(self))? {
            crate::scripting::vm::RunOutcome::Done(reply) => Some(reply),
            crate::scripting::vm::RunOutcome::Paused => None,
        }
    }

    pub fn databases(&self) -> usize {
        self.ks.databases()
    }

    /// Makes this store a cluster shard's: `key_slot` gives a key's hash
    /// slot, to scripts' slot checks and to the engine, which counts and
    /// lists keys per slot from now on (CLUSTER COUNTKEYSINSLOT and
    /// GETKEYSINSLOT).
    pub fn set_cluster_mode(&mut self, key_slot: fn(&[u8]) -> u16) {
        self.cluster_mode = true;
        self.key_slot = Some(key_slot);
        self.ks.index_slots(key_slot);
    }

    /// The engine.
    pub fn keyspace(&self) -> &K {
        &self.ks
    }

    pub fn keyspace_mut(&mut self) -> &mut K {
        &mut self.ks
    }

    /// The writes the last command reported (see
    /// [`Store::reported_writes`]).
    pub fn take_reported_writes(&self) -> Vec<ReportedWrite> {
        std::mem::take(&mut self.reported_writes.borrow_mut())
    }

    /// One database of the keyspace, to read.
    pub fn db(&self, db: usize) -> DbRef<'_, K> {
        DbRef { ks: &self.ks, db }
    }

    /// One database of the keyspace, to change.
    pub fn db_mut(&mut self, db: usize) -> DbMut<'_, K> {
        DbMut {
            ks: &mut self.ks,
            db,
        }
    }

    /// Checks a database index argument (SELECT, SWAPDB, COPY DB, MOVE).
    pub fn check_db_index(&self, arg: &[u8]) -> Result<usize, CmdError> {
        let i = crate::args::parse_i64_or(
            arg,
            CmdError::other("ERR value is not an integer or out of range"),
        )?;
        if i < 0 || i as usize >= self.ks.databases() {
            return Err(CmdError::DbIndexOutOfRange);
        }
        Ok(i as usize)
    }

    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        self.ks.swap_dbs(a, b);
    }

    /// Runs a write command. `args[0]` is the command name.
    pub fn apply(&mut self, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
        let (spec, _) = resolve(args)?;
        self.ks.set_access_clock(ctx.now_ms);
        match spec.handler {
            Handler::Write(f) => K::write_fn(&f)(self, db, args, ctx),
            Handler::Read(f) => K::read_fn(&f)(self, db, args, ctx),
            _ => Err(crate::error::unknown_command(args)),
        }
    }

    /// Runs a read-only command; never changes the store.
    /// Sets the ACL user scripts check their calls against (see
    /// `script_caller`) until [`Store::end_script_caller`].
    pub fn begin_script_caller(&self, caller: Option<std::sync::Arc<crate::acl::User>>) {
        self.script_caller.replace(caller);
    }

    /// Ends it, dropping the refusals nobody took: a replica's users are
    /// node-local, so under Raft they go to no log.
    pub fn end_script_caller(&self) {
        self.script_caller.replace(None);
        self.script_refusals.borrow_mut().clear();
    }

    /// [`Store::read`] with scripts checked against `caller`.
    pub fn read_as(
        &self,
        caller: Option<std::sync::Arc<crate::acl::User>>,
        db: usize,
        args: &[Bytes],
        ctx: &Ctx,
    ) -> CmdResult {
        self.begin_script_caller(caller);
        let result = self.read(db, args, ctx);
        self.end_script_caller();
        result
    }

    pub fn read(&self, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
        let (spec, _) = resolve(args)?;
        self.ks.set_access_clock(ctx.now_ms);
        match spec.handler {
            Handler::Read(f) => K::read_fn(&f)(self, db, args, ctx),
            _ => Err(crate::error::unknown_command(args)),
        }
    }

    /// [`Store::live`] without recording an access (Redis's
    /// LOOKUP_NOTOUCH: OBJECT, TYPE, TTL, EXISTS).
    pub fn peek(&self, db: usize, key: &[u8], now_ms: u64) -> Option<EntryRef<'_, K>> {
        let found = self.unexpired(db, key, self.ks.get(db, key), now_ms);
        self.count_lookup(found.is_some());
        found
    }

    /// `entry` unless it expired at `now_ms`; an expired one is noted for
    /// lazy deletion when the server asked for it.
    fn unexpired<'a>(
        &self,
        db: usize,
        key: &[u8],
        entry: Option<EntryRef<'a, K>>,
        now_ms: u64,
    ) -> Option<EntryRef<'a, K>> {
        match entry {
            Some(e) if e.is_expired(now_ms) => {
                if self.note_expired_reads {
                    self.expired_reads
                        .borrow_mut()
                        .push((db, Bytes::copy_from_slice(key)));
                }
                None
            }
            live => live,
        }
    }

    /// The live entry of `key` at `now_ms` (expired keys read as missing);
    /// its access is recorded.
    pub fn live(&self, db: usize, key: &[u8], now_ms: u64) -> Option<EntryRef<'_, K>> {
        let found = self.unexpired(db, key, self.ks.get_touched(db, key, now_ms), now_ms);
        self.count_lookup(found.is_some());
        found
    }

    /// INFO's keyspace_hits or keyspace_misses, for one lookup.
    fn count_lookup(&self, hit: bool) {
        let counter = match hit {
            true => &self.stats.keyspace_hits,
            false => &self.stats.keyspace_misses,
        };
        counter.set(counter.get() + 1);
    }

    /// For writes: removes `key` if it has expired at `ctx.now_ms` (lazy
    /// expiry, deterministic because the time comes from the ctx), then
    /// returns whether it exists.
    pub fn expire_if_needed(&mut self, db: usize, key: &[u8], ctx: &Ctx) -> bool {
        match self.ks.get(db, key) {
            Some(e) if e.is_expired(ctx.now_ms) => {
                self.ks.remove(db, key);
                count_expired(&mut self.stats, &mut self.events, self.notify, db, key);
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    /// For writes: the live value of `key`, mutable, after lazy expiry
    /// (one lookup where the engine can).
    pub fn live_value_mut(&mut self, db: usize, key: &[u8], ctx: &Ctx) -> Option<&mut Value<K>> {
        match self.ks.live_value_mut(db, key, ctx.now_ms) {
            Ok(value) => value,
            Err(_expired) => {
                count_expired(&mut self.stats, &mut self.events, self.notify, db, key);
                None
            }
        }
    }

    /// For writes: the live value of `key`, mutable, after lazy expiry;
    /// when the key is missing (or was expired), `make()` is stored under
    /// it first, with no expiry. One lookup where the engine can.
    pub fn live_value_mut_or_insert(
        &mut self,
        db: usize,
        key: &[u8],
        ctx: &Ctx,
        make: impl FnOnce() -> Value<K>,
    ) -> &mut Value<K> {
        let (value, expired) = self.ks.live_value_mut_or_insert(db, key, ctx.now_ms, make);
        if expired.is_some() {
            count_expired(&mut self.stats, &mut self.events, self.notify, db, key);
        }
        value
    }

    /// Applies the deletions chosen by the active expiry cycle: each key is
    /// removed only if it is still expired at `ctx.now_ms`, so a key that was
    /// rewritten after the cycle picked it survives. Returns how many went.
    pub fn apply_expired(&mut self, db: usize, keys: &[Bytes], ctx: &Ctx) -> usize {
        let mut n = 0;
        for k in keys {
            if self.ks.get(db, k).is_some_and(|e| e.is_expired(ctx.now_ms)) {
                self.ks.remove(db, k);
                n += 1;
                self.emit(crate::notify::EXPIRED, "expired", db, k);
            }
        }
        self.stats.expired_keys += n as u64;
        n
    }

    /// Applies the deletions `maxmemory-policy` chose (see
    /// [`crate::evict`]): each key that still exists goes, with an
    /// `evicted` event. Returns how many went.
    pub fn apply_evicted(&mut self, db: usize, keys: &[Bytes]) -> usize {
        let mut n = 0;
        for k in keys {
            if self.ks.remove(db, k).is_some() {
                n += 1;
                self.emit(crate::notify::EVICTED, "evicted", db, k);
            }
        }
        self.stats.evicted_keys += n as u64;
        n
    }

    /// Removes every key of every database.
    pub fn flush_all(&mut self) {
        for db in 0..self.ks.databases() {
            self.ks.clear(db);
        }
    }

    /// A canonical dump of the whole state, for determinism checks:
    /// (db, key, value, expiry) sorted.
    pub fn dump(&self) -> Vec<DumpedEntry<K>> {
        let mut out: Vec<_> = (0..self.ks.databases())
            .flat_map(|i| {
                self.ks
                    .iter(i)
                    .map(move |e| (i, e.key.to_vec(), e.value.clone(), e.expire_at()))
            })
            .collect();
        out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        out
    }
}

/// One entry of [`Store::dump`]: database, key, value and expiry.
pub type DumpedEntry<K> = (usize, Vec<u8>, Value<K>, Option<u64>);

/// One database of a store, read through the engine.
pub struct DbRef<'a, K: Keyspace> {
    ks: &'a K,
    db: usize,
}

impl<'a, K: Keyspace> DbRef<'a, K> {
    /// The entry of `key`, expired or not.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<EntryRef<'a, K>> {
        self.ks.get(self.db, key)
    }

    /// Number of keys, logically expired ones not yet removed included.
    #[inline]
    pub fn len(&self) -> usize {
        self.ks.len(self.db)
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ks.is_empty(self.db)
    }

    #[inline]
    pub fn expires_count(&self) -> usize {
        self.ks.expires_count(self.db)
    }

    /// Every entry, in the engine's deterministic order.
    pub fn iter(&self) -> impl Iterator<Item = EntryRef<'a, K>> + 'a {
        self.ks.iter(self.db)
    }

    /// See [`Keyspace::scan`].
    pub fn scan(&self, cursor: u64, count: usize, visit: impl FnMut(EntryRef<'_, K>)) -> u64 {
        self.ks.scan(self.db, cursor, count, visit)
    }

    /// See [`Keyspace::random_entry`].
    pub fn random_entry(&self, r: u64) -> Option<EntryRef<'a, K>> {
        self.ks.random_entry(self.db, r)
    }

    /// See [`Keyspace::entry_size`].
    pub fn entry_size(&self, key: &[u8]) -> usize {
        self.ks.entry_size(self.db, key)
    }
}

/// One database of a store, changed through the engine.
pub struct DbMut<'a, K: Keyspace> {
    ks: &'a mut K,
    db: usize,
}

impl<'a, K: Keyspace> DbMut<'a, K> {
    /// The entry of `key`, expired or not.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<EntryRef<'_, K>> {
        self.ks.get(self.db, key)
    }

    /// The value of `key` to change in place, for as long as this view
    /// lives (it is consumed).
    #[inline]
    pub fn get_value_mut(self, key: &[u8]) -> Option<&'a mut Value<K>> {
        self.ks.get_value_mut(self.db, key)
    }

    /// See [`Keyspace::set`].
    #[inline]
    pub fn set(
        &mut self,
        key: &[u8],
        value: Value<K>,
        expire_at: Option<u64>,
    ) -> Option<OwnedEntry<K>> {
        self.ks.set(self.db, key, value, expire_at)
    }

    #[inline]
    pub fn set_expire(&mut self, key: &[u8], expire_at: Option<u64>) -> bool {
        self.ks.set_expire(self.db, key, expire_at)
    }

    #[inline]
    pub fn remove(&mut self, key: &[u8]) -> Option<OwnedEntry<K>> {
        self.ks.remove(self.db, key)
    }

    pub fn reserve(&mut self, additional: usize) {
        self.ks.reserve(self.db, additional)
    }

    pub fn clear(&mut self) {
        self.ks.clear(self.db)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctx_random_is_a_function_of_seed_and_n() {
        let a = Ctx { now_ms: 1, seed: 7 };
        let b = Ctx { now_ms: 2, seed: 7 };
        assert_eq!(a.random(3), b.random(3));
        assert_ne!(a.random(3), a.random(4));
    }
}
