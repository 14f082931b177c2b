//! Lua scripting: EVAL and EVALSHA, SCRIPT, FUNCTION and FCALL, with the
//! script environment of Redis 7.0 (Lua 5.1 through `mlua`).
//!
//! A script is one command: a write script is one log entry and runs at
//! apply time on every replica of its shard, atomically and in log order.
//! Everything it can observe comes from the store and the entry's [`Ctx`]:
//! `TIME` answers the entry's time, `math.random` is seeded from the
//! entry's seed, commands inside the script pick with seeds derived from
//! it. Script bodies (SCRIPT LOAD, and every EVAL) and FUNCTION libraries
//! are shard state ([`Scripts`]): they are written by log entries and
//! carried in snapshots, so every replica resolves an EVALSHA or an FCALL
//! alike. Read-only scripts (EVAL_RO, EVALSHA_RO, FCALL_RO) run as reads.
//!
//! - [`vm`]: the sandboxed interpreter and one script run.
//! - [`convert`]: replies to Lua values and back, as Redis documents.
//! - [`eval`]: EVAL, EVALSHA, their `_RO` forms and SCRIPT.
//! - [`function`]: FUNCTION and FCALL.
//! - [`libs`]: `cjson`, `cmsgpack`, `bit`, `struct`.
//! - [`hook`]: the instruction-count hook that stops, kills and pauses
//!   runs.
//!
//! [`Ctx`]: crate::Ctx

pub mod convert;
pub mod dump;
pub mod eval;
pub mod function;
pub mod hook;
pub mod libs;
pub mod vm;

use crate::keyspace::{Keyspace, MemoryKeyspace};
use crate::table::{CommandSpec, Flags};
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

/// A map by SHA1 or function name, looked up on every EVALSHA and FCALL:
/// foldhash (randomly seeded per process, so names cannot be chosen to
/// collide) instead of SipHash.
pub type ScriptMap<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// What a script or a function declares it may do (a `#!lua flags=`
/// line, or `register_function`'s `flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScriptFlags(pub u8);

impl ScriptFlags {
    pub const NO_WRITES: ScriptFlags = ScriptFlags(1);
    pub const ALLOW_OOM: ScriptFlags = ScriptFlags(2);
    pub const ALLOW_STALE: ScriptFlags = ScriptFlags(4);
    pub const NO_CLUSTER: ScriptFlags = ScriptFlags(8);
    pub const ALLOW_CROSS_SLOT: ScriptFlags = ScriptFlags(16);

    pub const NAMES: [(ScriptFlags, &'static str); 5] = [
        (ScriptFlags::NO_WRITES, "no-writes"),
        (ScriptFlags::ALLOW_OOM, "allow-oom"),
        (ScriptFlags::ALLOW_STALE, "allow-stale"),
        (ScriptFlags::NO_CLUSTER, "no-cluster"),
        (ScriptFlags::ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
    ];

    pub fn contains(self, f: ScriptFlags) -> bool {
        self.0 & f.0 == f.0
    }

    pub fn from_name(name: &str) -> Option<ScriptFlags> {
        ScriptFlags::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(f, _)| *f)
    }

    pub fn names(self) -> Vec<&'static str> {
        ScriptFlags::NAMES
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }
}

/// The flags a script declares for this call of `spec` (EVAL's shebang,
/// the shebang of the body EVALSHA names, or the flags FCALL's function
/// registered), `scripts` being the shard's state if it is at hand;
/// `None` for an old-style script, a script not known here, or another
/// command.
pub fn declared_flags<K: Keyspace>(
    scripts: Option<&Scripts<K>>,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Option<ScriptFlags> {
    let named = args.get(1)?;
    match spec.name {
        "eval" | "eval_ro" => eval::shebang_flags(named).ok().flatten(),
        "evalsha" | "evalsha_ro" => {
            let sha = std::str::from_utf8(named).ok()?.to_ascii_lowercase();
            eval::shebang_flags(scripts?.bodies.get(&sha)?)
                .ok()
                .flatten()
        }
        "fcall" | "fcall_ro" => {
            let name = std::str::from_utf8(named).ok()?;
            scripts?.function(name).map(|(_, f)| f.flags)
        }
        _ => None,
    }
}

/// The command flags of a call of `spec` whose script declared `declared`,
/// as Redis's scriptFlagsToCmdFlags derives them: what the script
/// declares replaces the command's WRITE, DENYOOM, STALE and
/// MAY_REPLICATE (CLIENT PAUSE WRITE lets a `no-writes` script run).
pub fn command_flags(spec: &CommandSpec, declared: Option<ScriptFlags>) -> Flags {
    let Some(declared) = declared else {
        return spec.flags;
    };
    let mut flags = Flags(
        spec.flags.0
            & !(Flags::STALE.0 | Flags::DENYOOM.0 | Flags::WRITE.0 | Flags::MAY_REPLICATE.0),
    );
    if !declared.contains(ScriptFlags::NO_WRITES) {
        flags = flags.union(Flags::WRITE);
        if !declared.contains(ScriptFlags::ALLOW_OOM) {
            flags = flags.union(Flags::DENYOOM);
        }
    }
    if declared.contains(ScriptFlags::ALLOW_STALE) {
        flags = flags.union(Flags::STALE);
    }
    flags
}

/// One function of a library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionInfo {
    pub description: Option<String>,
    pub flags: ScriptFlags,
}

/// A FUNCTION library: its code (the `#!lua name=...` text) and the
/// functions it registered when loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    pub name: String,
    pub code: Bytes,
    pub functions: BTreeMap<String, FunctionInfo>,
}

/// The scripting state of a shard. `bodies` and `libraries` are
/// replicated state (written only by applied commands, carried in
/// snapshots) and the same whatever the engine; the interpreter is a cache
/// rebuilt from them on demand. It is typed by the store's engine `K`
/// because its `redis.call` is compiled once against that engine's copy of
/// the command handlers (static dispatch on every call).
pub struct Scripts<K: Keyspace = MemoryKeyspace> {
    /// EVAL bodies by their lower-case SHA1 hex.
    pub bodies: ScriptMap<Bytes>,
    pub libraries: BTreeMap<String, Library>,
    /// Bumped when `libraries` change, so the interpreter reloads them.
    pub generation: u64,
    vm: RefCell<Option<Box<vm::ScriptVm<K>>>>,
    /// A run that paused past `busy-reply-threshold` (standalone only),
    /// holding the interpreter until it is resumed to its end.
    paused: RefCell<Option<Box<vm::PausedRun<K>>>>,
}

impl<K: Keyspace> Default for Scripts<K> {
    fn default() -> Self {
        Scripts {
            bodies: ScriptMap::default(),
            libraries: BTreeMap::new(),
            generation: 0,
            vm: RefCell::new(None),
            paused: RefCell::new(None),
        }
    }
}

impl<K: Keyspace> Scripts<K> {
    /// Bytes the Lua interpreter uses (INFO used_memory_lua); 0 before
    /// the first script or function made one.
    pub fn vm_memory(&self) -> usize {
        self.vm
            .try_borrow()
            .ok()
            .and_then(|vm| vm.as_ref().map(|vm| vm.used_memory()))
            .unwrap_or(0)
    }

    /// Bytes of the cached EVAL bodies (INFO used_memory_scripts_eval).
    pub fn bodies_bytes(&self) -> usize {
        self.bodies.values().map(|b| b.len()).sum()
    }

    /// The function `name` and the library that holds it.
    /// Function names are case-insensitive, as in Redis.
    pub fn function(&self, name: &str) -> Option<(&Library, &FunctionInfo)> {
        self.libraries.values().find_map(|lib| {
            lib.functions
                .get(name)
                .or_else(|| {
                    lib.functions
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case(name))
                        .map(|(_, f)| f)
                })
                .map(|f| (lib, f))
        })
    }

    /// Forgets every cached EVAL body (SCRIPT FLUSH).
    pub fn flush_bodies(&mut self) {
        self.bodies.clear();
        // Compiled bodies go with them.
        *self.vm.get_mut() = None;
    }

    /// Replaces the libraries (FUNCTION LOAD, DELETE, FLUSH, RESTORE).
    pub fn set_libraries(&mut self, libraries: BTreeMap<String, Library>) {
        self.libraries = libraries;
        self.generation += 1;
    }

    /// Takes the interpreter out for one run (creating it if needed), so
    /// the store can be borrowed by the script's commands meanwhile.
    fn take_vm(&self) -> Result<Box<vm::ScriptVm<K>>, mlua::Error> {
        match self.vm.borrow_mut().take() {
            Some(vm) => Ok(vm),
            None => vm::ScriptVm::new().map(Box::new),
        }
    }

    fn put_vm(&self, vm: Box<vm::ScriptVm<K>>) {
        *self.vm.borrow_mut() = Some(vm);
    }

    fn park(&self, run: Box<vm::PausedRun<K>>) {
        *self.paused.borrow_mut() = Some(run);
    }

    fn take_paused(&self) -> Option<Box<vm::PausedRun<K>>> {
        self.paused.borrow_mut().take()
    }

    /// The run that is paused in the middle, if one is: while it is, the
    /// shard serves nothing but SCRIPT KILL, FUNCTION KILL and FUNCTION
    /// STATS.
    pub fn busy(&self) -> Option<BusyRun> {
        self.paused.borrow().as_ref().map(|run| BusyRun {
            is_function: run.is_function(),
            name: run.name().to_string(),
            command: run.command().to_vec(),
            started: run.started(),
        })
    }

    /// Whether the paused run was killed (it then ends at its next slice
    /// without having written anything).
    pub fn paused_killed(&self) -> bool {
        self.paused.borrow().as_ref().is_some_and(|run| run.killed)
    }

    /// SCRIPT KILL (`by_function_kill` false) or FUNCTION KILL: marks the
    /// paused run to end with an error before it runs again. Redis's
    /// errors when none runs, when it wrote already (it must then finish,
    /// or the server be stopped with SHUTDOWN NOSAVE) and when the kind
    /// does not match.
    pub fn kill(&self, by_function_kill: bool) -> Result<(), crate::CmdError> {
        let mut paused = self.paused.borrow_mut();
        let Some(run) = paused.as_mut() else {
            return Err(crate::CmdError::other(
                "NOTBUSY No scripts in execution right now.",
            ));
        };
        if run.wrote {
            return Err(crate::CmdError::other(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
            ));
        }
        match (run.is_function(), by_function_kill) {
            (true, false) => Err(crate::CmdError::other(BUSY_FUNCTION)),
            (false, true) => Err(crate::CmdError::other(BUSY_EVAL)),
            _ => {
                run.killed = true;
                Ok(())
            }
        }
    }
}

/// The run a busy shard is in the middle of.
#[derive(Debug, Clone)]
pub struct BusyRun {
    pub is_function: bool,
    /// The script's SHA1 or the function's name.
    pub name: String,
    pub command: Vec<Bytes>,
    pub started: std::time::Instant,
}

impl BusyRun {
    /// The `-BUSY` error other clients get meanwhile.
    pub fn busy_error(&self) -> &'static str {
        if self.is_function {
            BUSY_FUNCTION
        } else {
            BUSY_EVAL
        }
    }
}

/// Redis's replies to commands sent while a script is busy.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

impl<K: Keyspace> std::fmt::Debug for Scripts<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripts")
            .field("bodies", &self.bodies.len())
            .field("libraries", &self.libraries.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A script-running command's table entry: its keys are the `numkeys`
/// arguments after the body or name, and it produces no keyspace events of
/// its own (the commands it calls do).
pub(crate) const fn with_script_keys(spec: crate::table::CommandSpec) -> crate::table::CommandSpec {
    crate::table::CommandSpec {
        key_finder: Some(crate::table::keys_after_numkeys::<2>),
        events: crate::notify::Events::None,
        reports_writes: true,
        flags: spec.flags.union(crate::table::Flags::NO_MANDATORY_KEYS),
        // A script may read and write every key it is given (EVAL_RO
        // only reads them).
        key_access: if spec.flags.contains(crate::table::Flags::READONLY) {
            crate::table::KeyAccess::Read
        } else {
            crate::table::KeyAccess::ReadWrite
        },
        ..spec
    }
}

/// Delivers a PUBLISH (`shard`: SPUBLISH) a script calls and returns the
/// number of subscribers that received it.
pub type PublishHook = Box<dyn Fn(&Bytes, &Bytes, bool) -> i64>;

thread_local! {
    /// Set by a standalone server on the thread that runs its scripts: the
    /// subscribers live there. Unset (and PUBLISH refused in scripts)
    /// under Raft, where every replica runs the script and a receiver
    /// count that differs by node could make replicas diverge.
    static PUBLISH_HOOK: RefCell<Option<PublishHook>> = const { RefCell::new(None) };
}

/// Installs (or, with None, removes) this thread's [`PublishHook`].
pub fn set_publish_hook(hook: Option<PublishHook>) {
    PUBLISH_HOOK.with(|h| *h.borrow_mut() = hook);
}

/// Publishes through this thread's hook; None when there is none.
pub(crate) fn publish_from_script(channel: &Bytes, message: &Bytes, shard: bool) -> Option<i64> {
    PUBLISH_HOOK.with(|h| {
        h.borrow()
            .as_ref()
            .map(|hook| hook(channel, message, shard))
    })
}

pub(crate) fn ro_write_flag_error() -> crate::CmdError {
    crate::CmdError::other("ERR Can not execute a script with write flag using *_ro command.")
}

/// SCRIPT FLUSH / FUNCTION FLUSH `[ASYNC|SYNC]`: both empty at once.
pub(crate) fn check_flush_mode(args: &[Bytes], error: &'static str) -> Result<(), crate::CmdError> {
    match args.get(2) {
        None => Ok(()),
        Some(a)
            if args.len() == 3
                && (crate::args::eq_ic(a, "async") || crate::args::eq_ic(a, "sync")) =>
        {
            Ok(())
        }
        Some(_) => Err(crate::CmdError::other(error)),
    }
}

/// SCRIPT KILL and FUNCTION KILL. Only a paused run can be killed: under
/// Raft a script runs to its end (or its instruction limit) before its
/// shard serves anything else, so there is never one to kill there.
pub(crate) fn kill<K: Keyspace>(
    store: &crate::Store<K>,
    _db: usize,
    args: &[Bytes],
    _ctx: &crate::Ctx,
) -> crate::error::CmdResult {
    let by_function_kill = crate::args::eq_ic(&args[0], "function");
    store.scripts.kill(by_function_kill)?;
    Ok(kvasir_resp::Reply::ok())
}

/// The lower-case SHA1 hex of `body`, the name EVALSHA uses.
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}
