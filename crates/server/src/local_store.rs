//! The standalone server's keyspace owner (RF=1, no log): every command
//! that touches data runs through [`LocalStore::execute`], which stamps
//! writes with a [`Ctx`] (wall-clock time and a fresh seed) and applies them
//! at once. In cluster mode shards are Raft groups (`cluster::sm`) instead.

use bytes::Bytes;
use kvasir_core::error::{CmdError, CmdResult};
use kvasir_core::machine::{self, Applied, ShardCmd, Written};
use kvasir_core::scripting::BusyRun;
use kvasir_core::table::{Flags, Handler};
use kvasir_core::{CommandSpec, Ctx, Store};
use kvasir_resp::Reply;
use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

pub struct LocalStore {
    store: Store,
    seed: u64,
    /// The time writes are stamped with, refreshed once per batch of
    /// requests (as Redis caches its clock per event-loop iteration): the
    /// clock is read once per read(2), not once per command.
    clock_ms: u64,
    /// The append-only file (`appendonly yes`): every write is logged
    /// with the time and seed it ran with.
    pub aof: Option<crate::aof::AofLog>,
    /// A script that paused past `busy-reply-threshold`: logged once it
    /// ends (a killed one wrote nothing and is not logged).
    paused_write: Option<(Ctx, usize, Vec<Bytes>)>,
}

/// Unix time in milliseconds.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl LocalStore {
    pub fn new(databases: usize) -> LocalStore {
        LocalStore {
            store: Store::new(databases),
            seed: unix_ms() ^ 0x5eed_0f6b_7661_7372,
            clock_ms: unix_ms(),
            aof: None,
            paused_write: None,
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// While set, commands leave the keys' LRU/LFU stamps as they are
    /// (CLIENT NO-TOUCH).
    pub fn set_access_frozen(&self, frozen: bool) {
        use kvasir_core::keyspace::Keyspace;
        self.store.keyspace().set_access_frozen(frozen);
    }

    /// Reads the wall clock; called before each batch of commands.
    pub fn refresh_clock(&mut self) {
        self.clock_ms = unix_ms();
    }

    /// The context of the next write: now, and a seed no earlier write used.
    fn next_ctx(&mut self) -> Ctx {
        self.seed = self.seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        Ctx {
            now_ms: self.clock_ms,
            seed: self.seed,
        }
    }

    /// Runs a keyspace command (spec already resolved and arity-checked).
    pub fn execute(&mut self, spec: &CommandSpec, db: usize, args: &[Bytes]) -> CmdResult {
        self.execute_pausable(spec, db, args, None)
    }

    /// Runs a client's command; a script in it pauses after `pause_after`
    /// (`CmdError::ScriptPaused`, see [`LocalStore::resume_script`]).
    /// While a script is paused only SCRIPT KILL, FUNCTION KILL and
    /// FUNCTION STATS reach the store.
    pub fn execute_pausable(
        &mut self,
        spec: &CommandSpec,
        db: usize,
        args: &[Bytes],
        pause_after: Option<Duration>,
    ) -> CmdResult {
        if let Some(busy) = self.busy() {
            if !spec.flags.contains(Flags::ALLOW_BUSY) {
                return Err(CmdError::other(busy.busy_error()));
            }
        }
        let ctx = self.next_ctx();
        let read = matches!(spec.handler, Handler::Read(_));
        self.store.script_pause_after = pause_after;
        self.store.cache_hll_counts = read;
        self.store.note_expired_reads = read;
        self.store.record_script_stats = true;
        let result = machine::execute(&mut self.store, spec, db, args, &ctx);
        self.store.script_pause_after = None;
        self.store.cache_hll_counts = false;
        self.store.note_expired_reads = false;
        self.store.record_script_stats = false;
        if self.aof.is_some() && (spec.is_write() || spec.reports_writes) {
            self.log_executed(spec, db, args, &ctx, &result);
        }
        if read {
            // A paused read-only script's counts are dropped: only a read
            // that ended may store them.
            if matches!(result, Err(CmdError::ScriptPaused)) {
                kvasir_core::hyperloglog::forget_counted(&mut self.store);
            } else {
                kvasir_core::hyperloglog::store_counted(&mut self.store, ctx.now_ms);
            }
        }
        result
    }

    /// Logs a command that ran (see [`LocalStore::execute_pausable`]): not
    /// a command that changed nothing (an error of a plain command, a
    /// blocking pop that found nothing); a paused script once it ends.
    fn log_executed(
        &mut self,
        spec: &CommandSpec,
        db: usize,
        args: &[Bytes],
        ctx: &Ctx,
        result: &CmdResult,
    ) {
        match result {
            Err(CmdError::ScriptPaused) => {
                self.paused_write = Some((*ctx, db, args.to_vec()));
                return;
            }
            Err(CmdError::WouldBlock(_)) => return,
            Err(_) if !spec.reports_writes => return,
            Ok(reply) if !spec.reports_writes && self.store.changed_nothing(spec, args, reply) => {
                return
            }
            _ => {}
        }
        self.log_command(ctx, db, args);
    }

    /// Appends a command that ran with `ctx` to the log, if there is one.
    fn log_command(&mut self, ctx: &Ctx, db: usize, args: &[Bytes]) {
        if let Some(aof) = self.aof.as_mut() {
            aof.command(ctx, db, &self.store.limits, &loggable(&self.store, args));
        }
    }

    /// Replays one write of the append-only file with the time and seed it
    /// ran with. A write without them (a file redis-server wrote) replays
    /// at time 0: nothing expires while a file loads, as in Redis, whose
    /// files hold absolute times only (PEXPIREAT, SET PXAT).
    pub fn replay(&mut self, write: crate::aof::Replayed) -> Result<(), String> {
        use crate::aof::Replayed;
        // A logged script ran: its writes are replayed whatever refused
        // writes when the last script started.
        self.store.script_write_refusal.replace(None);
        let unstamped = Ctx {
            now_ms: 0,
            seed: self.seed,
        };
        match write {
            // The writes after it ran under these; the load's caller puts
            // the config's back when it ends.
            Replayed::Limits(limits) => {
                self.store.limits = limits;
                return Ok(());
            }
            Replayed::Command { ctx, db, args } => {
                let ctx = ctx.unwrap_or(unstamped);
                let name = String::from_utf8_lossy(&args[0]).into_owned();
                let spec = match kvasir_core::table::resolve(&args) {
                    Ok((spec, _)) => spec,
                    Err(CmdError::WrongArity(_)) => {
                        return Err(format!(
                            "Wrong number of arguments for '{name}' reading the append only file"
                        ))
                    }
                    Err(_) => {
                        return Err(format!(
                            "Unknown command '{name}' reading the append only file"
                        ))
                    }
                };
                if db >= self.store.databases() {
                    return Err(format!("Invalid database {db} in the append only file"));
                }
                let _ = machine::execute(&mut self.store, spec, db, &args, &ctx);
            }
            Replayed::Block { ctx, db, cmds } => {
                let cmd = ShardCmd::Commands {
                    db,
                    cmds,
                    multi: true,
                };
                let _ = machine::apply(&mut self.store, &cmd, &ctx.unwrap_or(unstamped), |_, _| {});
            }
        }
        self.seed = self.seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        // Replayed writes raise no events and feed no script statistics.
        self.store.events.clear();
        self.store.take_reported_writes();
        Ok(())
    }

    /// Writes what the log holds to its file (before replies go out).
    pub fn flush_aof(&mut self) -> Result<(), String> {
        match self.aof.as_mut() {
            Some(aof) if aof.has_pending() => aof.flush(),
            _ => Ok(()),
        }
    }

    /// The keys the last read found expired, by database, for the server
    /// to delete (lazy expiry).
    pub fn take_expired_reads(&mut self) -> Vec<(usize, Vec<Bytes>)> {
        let mut by_db: Vec<(usize, Vec<Bytes>)> = Vec::new();
        if self.store.expired_reads.get_mut().is_empty() {
            return by_db;
        }
        for (db, key) in self.store.expired_reads.get_mut().drain(..) {
            match by_db.iter_mut().find(|(d, _)| *d == db) {
                Some((_, keys)) => keys.push(key),
                None => by_db.push((db, vec![key])),
            }
        }
        by_db
    }

    /// The commands scripts ran since the last call, for INFO
    /// commandstats.
    pub fn take_script_stats(&mut self) -> Vec<kvasir_core::store::ScriptCallStat> {
        std::mem::take(self.store.script_stats.get_mut())
    }

    /// The script paused in the middle, if one is.
    pub fn busy(&self) -> Option<BusyRun> {
        self.store.scripts.busy()
    }

    /// Runs the paused script on for a slice: its reply once it ended,
    /// None while it runs on (or if none is paused).
    pub fn resume_script(&mut self) -> Option<Reply> {
        self.store.record_script_stats = true;
        let killed = self.store.scripts.paused_killed();
        let reply = self.store.resume_script();
        self.store.record_script_stats = false;
        if reply.is_some() {
            if let Some((ctx, db, args)) = self.paused_write.take() {
                // A killed script wrote nothing (SCRIPT KILL refuses
                // after a write).
                if !killed {
                    self.log_command(&ctx, db, &args);
                }
            }
        }
        reply
    }

    /// Whether a client blocked on `key` must keep waiting because the key
    /// now holds another type than its command pops from.
    pub fn waits_on_other_type(&self, spec: &CommandSpec, db: usize, key: &Bytes) -> bool {
        machine::waits_on_other_type(&self.store, spec, db, std::slice::from_ref(key), unix_ms())
    }

    /// Applies a shard command (an EXEC block) through the state machine;
    /// `on_write` hears of each write that succeeded.
    /// Nothing is applied while a script is paused in the middle: the
    /// caller checks [`LocalStore::busy`] first.
    pub fn apply(&mut self, cmd: &ShardCmd, mut on_write: impl FnMut(usize, Written)) -> Applied {
        let ctx = self.next_ctx();
        if self.aof.is_none() {
            return machine::apply(&mut self.store, cmd, &ctx, on_write);
        }
        // Keys expired or evicted are logged as the DEL of those removed.
        let mut removed: Vec<(usize, Vec<Bytes>)> = Vec::new();
        let applied = machine::apply(&mut self.store, cmd, &ctx, |db, w| {
            if let Written::Removed(keys) = &w {
                removed.push((db, keys.to_vec()));
            }
            on_write(db, w)
        });
        if let Some(aof) = self.aof.as_mut() {
            log_applied(aof, cmd, &ctx, &self.store.limits, removed);
        }
        applied
    }

    /// Runs `f` with exclusive access to the store (FLUSHALL-like admin
    /// work done by the server layer goes through here).
    /// Runs `f` with `caller` as the ACL user scripts check their calls
    /// against (`Store::script_caller`).
    pub fn as_caller<R>(
        &mut self,
        caller: Option<std::sync::Arc<kvasir_core::acl::User>>,
        f: impl FnOnce(&mut LocalStore) -> R,
    ) -> R {
        // Ended by hand: the refusals stay for the ACL log to take.
        self.store.begin_script_caller(caller);
        let result = f(self);
        self.store.script_caller.replace(None);
        result
    }

    pub fn with_store<R>(&mut self, f: impl FnOnce(&mut Store) -> R) -> R {
        f(&mut self.store)
    }
}

/// EVALSHA as EVAL with the script's body: the log replays on a server
/// whose script cache is empty (redis-server's loader too). Other
/// commands as they are, uncopied.
fn loggable<'a>(store: &Store, args: &'a [Bytes]) -> std::borrow::Cow<'a, [Bytes]> {
    let eval = if args[0].eq_ignore_ascii_case(b"evalsha") {
        "EVAL"
    } else if args[0].eq_ignore_ascii_case(b"evalsha_ro") {
        "EVAL_RO"
    } else {
        return std::borrow::Cow::Borrowed(args);
    };
    let sha = args
        .get(1)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    match sha.and_then(|sha| store.scripts.bodies.get(&sha).cloned()) {
        Some(body) => {
            let mut out = Vec::with_capacity(args.len());
            out.push(Bytes::from_static(eval.as_bytes()));
            out.push(body);
            out.extend_from_slice(&args[2..]);
            std::borrow::Cow::Owned(out)
        }
        None => std::borrow::Cow::Borrowed(args),
    }
}

/// Logs a shard command the store applied: an EXEC block as MULTI ...
/// EXEC, expired or evicted keys as the DEL of those it removed; all ran
/// under `limits`.
fn log_applied(
    aof: &mut crate::aof::AofLog,
    cmd: &ShardCmd,
    ctx: &Ctx,
    limits: &kvasir_core::EncodingLimits,
    removed: Vec<(usize, Vec<Bytes>)>,
) {
    match cmd {
        ShardCmd::Commands { db, cmds, multi } => {
            if *multi {
                aof.block(ctx, *db, limits, cmds);
            } else {
                for args in cmds {
                    aof.command(ctx, *db, limits, args);
                }
            }
        }
        ShardCmd::AsUser { cmd, .. } => log_applied(aof, cmd, ctx, limits, removed),
        // Expire, Evict (WatchedExec and WatchDigests are cluster mode's).
        _ => {
            for (db, keys) in removed {
                if keys.is_empty() {
                    continue;
                }
                let mut args = Vec::with_capacity(keys.len() + 1);
                args.push(Bytes::from_static(b"DEL"));
                args.extend(keys);
                aof.command(ctx, db, limits, &args);
            }
        }
    }
}
