//! The command table: name, arity, flags, key positions, ACL categories and
//! handler of every command. Routing, COMMAND INFO/GETKEYS/DOCS, ACLs and
//! docs/commands.md all read it; nothing else knows which arguments are keys.
//!
//! Each family module owns a `COMMANDS` slice next to its code; this module
//! joins them into one lookup.

use crate::error::{CmdError, CmdResult};
use crate::keyspace::MemoryKeyspace;
use crate::store::{Ctx, Store};
use bytes::Bytes;
use kvasir_resp::Reply;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Command flags, as named by Redis's COMMAND INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flags(pub u32);

impl Flags {
    pub const NONE: Flags = Flags(0);
    pub const WRITE: Flags = Flags(1 << 0);
    pub const READONLY: Flags = Flags(1 << 1);
    pub const DENYOOM: Flags = Flags(1 << 2);
    pub const ADMIN: Flags = Flags(1 << 3);
    pub const PUBSUB: Flags = Flags(1 << 4);
    pub const NOSCRIPT: Flags = Flags(1 << 5);
    pub const BLOCKING: Flags = Flags(1 << 6);
    pub const LOADING: Flags = Flags(1 << 7);
    pub const STALE: Flags = Flags(1 << 8);
    pub const SKIP_MONITOR: Flags = Flags(1 << 9);
    pub const SKIP_SLOWLOG: Flags = Flags(1 << 10);
    pub const FAST: Flags = Flags(1 << 11);
    pub const NO_AUTH: Flags = Flags(1 << 12);
    pub const MAY_REPLICATE: Flags = Flags(1 << 13);
    pub const NO_MULTI: Flags = Flags(1 << 14);
    pub const MOVABLEKEYS: Flags = Flags(1 << 15);
    pub const ALLOW_BUSY: Flags = Flags(1 << 16);
    /// The key arguments may be none at all (scripts and functions):
    /// COMMAND GETKEYS answers an empty list instead of an error.
    pub const NO_MANDATORY_KEYS: Flags = Flags(1 << 17);
    /// Refused while a replica loads its data asynchronously (Redis's
    /// replication commands, SAVE, MODULE LOAD): reported only.
    pub const NO_ASYNC_LOADING: Flags = Flags(1 << 18);
    /// Served on a cluster node for a slot it is importing after ASKING
    /// (RESTORE-ASKING): reported only.
    pub const ASKING: Flags = Flags(1 << 19);

    /// The flags COMMAND INFO names, in Redis's order; MAY_REPLICATE is
    /// hidden, as Redis hides it.
    const NAMES: [(Flags, &'static str); 19] = [
        (Flags::WRITE, "write"),
        (Flags::READONLY, "readonly"),
        (Flags::DENYOOM, "denyoom"),
        (Flags::ADMIN, "admin"),
        (Flags::PUBSUB, "pubsub"),
        (Flags::NOSCRIPT, "noscript"),
        (Flags::BLOCKING, "blocking"),
        (Flags::LOADING, "loading"),
        (Flags::STALE, "stale"),
        (Flags::SKIP_MONITOR, "skip_monitor"),
        (Flags::SKIP_SLOWLOG, "skip_slowlog"),
        (Flags::ASKING, "asking"),
        (Flags::FAST, "fast"),
        (Flags::NO_AUTH, "no_auth"),
        (Flags::NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (Flags::NO_ASYNC_LOADING, "no_async_loading"),
        (Flags::NO_MULTI, "no_multi"),
        (Flags::MOVABLEKEYS, "movablekeys"),
        (Flags::ALLOW_BUSY, "allow_busy"),
    ];

    pub const fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag of `other` is set.
    pub const fn intersects(self, other: Flags) -> bool {
        self.0 & other.0 != 0
    }

    pub fn names(self) -> Vec<&'static str> {
        Flags::NAMES
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }
}

/// A write handler for the engine `K`.
pub type WriteFn<K> = fn(&mut Store<K>, usize, &[Bytes], &Ctx) -> CmdResult;
/// A read handler for the engine `K`.
pub type ReadFn<K> = fn(&Store<K>, usize, &[Bytes], &Ctx) -> CmdResult;

/// One copy of a handler per engine, each monomorphised from the same
/// generic function (`fn hset<K: Keyspace>`): the table stays the one
/// source of every command while each engine gets static dispatch
/// ([`crate::keyspace::Keyspace::write_fn`] picks its copy). Built by
/// [`write_handler!`](crate::write_handler) and
/// [`read_handler!`](crate::read_handler).
#[derive(Clone, Copy)]
pub struct PerEngine<F> {
    pub memory: F,
}

/// `Handler::Write` for a generic write handler, one copy per engine.
#[macro_export]
macro_rules! write_handler {
    ($f:expr) => {
        $crate::table::Handler::Write($crate::table::PerEngine { memory: $f })
    };
}

/// `Handler::Read` for a generic read handler, one copy per engine.
#[macro_export]
macro_rules! read_handler {
    ($f:expr) => {
        $crate::table::Handler::Read($crate::table::PerEngine { memory: $f })
    };
}

/// How a command is executed.
#[derive(Clone, Copy)]
pub enum Handler {
    /// Mutates the keyspace; runs only through [`Store::apply`] so it is
    /// ordered, deterministic and replicated.
    Write(PerEngine<WriteFn<MemoryKeyspace>>),
    /// Reads the keyspace; never mutates it (expired keys read as missing).
    Read(PerEngine<ReadFn<MemoryKeyspace>>),
    /// Answered by the session/server layer (connection state, server info).
    Session(crate::connection::SessionCmd),
    /// A container (CLIENT, CONFIG...): dispatch goes to `subcommands`.
    Container,
}

/// One command's entry in the table.
pub struct CommandSpec {
    /// Lower-case name; for subcommands, just the subcommand (`setname`).
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments (name included), -N at least N.
    pub arity: i32,
    pub flags: Flags,
    /// Key positions: first key, last key (negative counts from the end),
    /// step. 0,0,0 for commands without keys.
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    /// ACL categories without the `@` (`string`, `fast`...).
    pub acl: &'static [&'static str],
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    pub handler: Handler,
    pub subcommands: &'static [CommandSpec],
    /// For commands whose keys the first/last/step range cannot describe
    /// (a `numkeys` argument: LMPOP, ZUNIONSTORE...): finds the key indexes
    /// of an invocation. Such commands are flagged MOVABLEKEYS.
    pub key_finder: Option<KeyFinder>,
    /// What a command without keys covers: the router (several shards in
    /// cluster mode) and the write hooks (watchers of a whole database)
    /// read it instead of the command's name.
    pub keyless: Keyless,
    /// A zero (or -1), nil or empty reply means the command changed
    /// nothing (SETNX that did not set, DEL of missing keys, SREM of absent
    /// members...): Redis signals no modification then, so watchers stay
    /// clean and nobody blocked on the key is served.
    pub idle_on_empty_reply: bool,
    /// For a command whose empty reply does not tell (SET answers nil both
    /// for NX that did not set and for GET of a key that did not exist):
    /// whether this run's arguments and reply mean nothing changed.
    pub unchanged_when: Option<fn(&[Bytes], &Reply) -> bool>,
    /// The keyspace events a successful run produces
    /// (`notify-keyspace-events`, [`crate::notify`]).
    pub events: crate::notify::Events,
    /// Which ACL key permissions (`%R~`, `%W~`) its keys need.
    pub key_access: KeyAccess,
    /// For a command that reads keys named by patterns in its arguments
    /// (SORT ... BY/GET): the option of this invocation that does, which
    /// only a user allowed every key may use.
    pub pattern_reads: Option<PatternReads>,
    /// Redis's key-spec flags of each key spec, in order (the n-th key
    /// found takes spec n, the last spec takes the rest): COMMAND
    /// GETKEYSANDFLAGS and COMMAND INFO. Empty: derived from `key_access`.
    pub key_specs: &'static [KeySpec],
    /// What it modified is reported by the run itself
    /// (`Store::reported_writes`), not by its key arguments; the write hooks
    /// (WATCH, tracking, blocked clients) hear of those. EVAL, EVALSHA,
    /// FCALL: the writes of the script's commands, keys declared or not;
    /// SMOVE: the destination only when the member was added.
    pub reports_writes: bool,
    /// Redis 7's command tips (COMMAND INFO's eighth field): how a cluster
    /// client routes a keyless or multi-key command and merges the
    /// replies (`request_policy:all_shards`, `response_policy:agg_sum`),
    /// and whether its output is deterministic. Cluster clients (go-redis,
    /// node-redis) route by them.
    pub tips: &'static [&'static str],
}

/// Redis 7's flags of a key spec: how the command treats the keys it
/// finds (one of RO, RW, OW, RM, then what it does to the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec(pub u16);

impl KeySpec {
    /// Read only.
    pub const RO: KeySpec = KeySpec(1 << 0);
    /// Read and written.
    pub const RW: KeySpec = KeySpec(1 << 1);
    /// Overwritten: the old value is not read.
    pub const OW: KeySpec = KeySpec(1 << 2);
    /// Removed.
    pub const RM: KeySpec = KeySpec(1 << 3);
    /// The value reaches the reply.
    pub const ACCESS: KeySpec = KeySpec(1 << 4);
    /// The value is changed.
    pub const UPDATE: KeySpec = KeySpec(1 << 5);
    /// Data is added.
    pub const INSERT: KeySpec = KeySpec(1 << 6);
    /// Data is removed.
    pub const DELETE: KeySpec = KeySpec(1 << 7);
    /// A channel, not a key (SPUBLISH, SSUBSCRIBE).
    pub const NOT_KEY: KeySpec = KeySpec(1 << 8);
    /// The spec may not find every key (MIGRATE's KEYS, SORT's STORE).
    pub const INCOMPLETE: KeySpec = KeySpec(1 << 9);
    /// The flags depend on the arguments (SET ... GET).
    pub const VARIABLE_FLAGS: KeySpec = KeySpec(1 << 10);

    const NAMES: [(KeySpec, &'static str); 11] = [
        (KeySpec::RO, "RO"),
        (KeySpec::RW, "RW"),
        (KeySpec::OW, "OW"),
        (KeySpec::RM, "RM"),
        (KeySpec::ACCESS, "access"),
        (KeySpec::UPDATE, "update"),
        (KeySpec::INSERT, "insert"),
        (KeySpec::DELETE, "delete"),
        (KeySpec::NOT_KEY, "not_key"),
        (KeySpec::INCOMPLETE, "incomplete"),
        (KeySpec::VARIABLE_FLAGS, "variable_flags"),
    ];

    pub const fn union(self, other: KeySpec) -> KeySpec {
        KeySpec(self.0 | other.0)
    }

    pub const fn contains(self, other: KeySpec) -> bool {
        self.0 & other.0 == other.0
    }

    /// The flag names in Redis's order.
    pub fn names(self) -> Vec<&'static str> {
        KeySpec::NAMES
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }

    /// Whether ACL needs (read, write) permission for a key with these
    /// flags, as Redis derives it: ACCESS reads; INSERT, DELETE and UPDATE
    /// write.
    pub const fn acl_needs(self) -> (bool, bool) {
        (
            self.contains(KeySpec::ACCESS),
            self.0 & (KeySpec::INSERT.0 | KeySpec::DELETE.0 | KeySpec::UPDATE.0) != 0,
        )
    }
}

/// Shorthands for the key specs of the command table.
pub mod ks {
    use super::KeySpec;
    pub const RO_ACCESS: KeySpec = KeySpec::RO.union(KeySpec::ACCESS);
    pub const RW_ACCESS_UPDATE: KeySpec = KeySpec::RW.union(KeySpec::ACCESS).union(KeySpec::UPDATE);
    pub const RW_ACCESS_DELETE: KeySpec = KeySpec::RW.union(KeySpec::ACCESS).union(KeySpec::DELETE);
    pub const RW_ACCESS_INSERT: KeySpec = KeySpec::RW.union(KeySpec::ACCESS).union(KeySpec::INSERT);
    pub const RW_ACCESS: KeySpec = KeySpec::RW.union(KeySpec::ACCESS);
    pub const RW_UPDATE: KeySpec = KeySpec::RW.union(KeySpec::UPDATE);
    pub const RW_INSERT: KeySpec = KeySpec::RW.union(KeySpec::INSERT);
    pub const RW_DELETE: KeySpec = KeySpec::RW.union(KeySpec::DELETE);
    pub const OW_UPDATE: KeySpec = KeySpec::OW.union(KeySpec::UPDATE);
    pub const OW_INSERT: KeySpec = KeySpec::OW.union(KeySpec::INSERT);
    pub const RM_DELETE: KeySpec = KeySpec::RM.union(KeySpec::DELETE);
}

/// What a command does to its keys, as far as ACL key permissions go: a
/// key whose value the reply can reveal needs read permission, a key the
/// command changes needs write permission (Redis's key-spec flags: ACCESS
/// is read; INSERT, DELETE, UPDATE and OW are write).
#[derive(Clone, Copy)]
pub enum KeyAccess {
    /// Every key is read only (GET, and every read-only command).
    Read,
    /// Every key is read and written (INCR, LPOP; the default of a write
    /// command).
    ReadWrite,
    /// Every key is written without its value reaching the reply (SET,
    /// DEL, LPUSH, EXPIRE).
    Write,
    /// The first key is written, the others read (SUNIONSTORE and the other
    /// `*STORE` commands, BITOP).
    WriteThenRead,
    /// The first key is read, the others written (COPY, SORT ... STORE).
    ReadThenWrite,
    /// The first key is read and written, the others written (SMOVE,
    /// LMOVE, RENAME: the source's element or value moves, the destination
    /// only receives).
    ReadWriteThenWrite,
    /// The first key is read and written, the others read (PFMERGE).
    ReadWriteThenRead,
    /// Only the key's existence, type or size is looked at, not its value
    /// (EXISTS, TYPE, HLEN, SISMEMBER...: Redis's key specs without
    /// ACCESS): a key pattern of either kind, read or write, allows it.
    Existence,
    /// Decided by the arguments (SET ... GET reads the old value).
    ByArgs(fn(&[Bytes]) -> KeyAccess),
}

impl KeyAccess {
    /// (read, write) permission needed by the `nth` key (0-based) of an
    /// invocation with arguments `args`.
    pub fn of_key(self, args: &[Bytes], nth: usize) -> (bool, bool) {
        match self {
            KeyAccess::Read => (true, false),
            KeyAccess::Existence => (false, false),
            KeyAccess::ReadWrite => (true, true),
            KeyAccess::Write => (false, true),
            KeyAccess::WriteThenRead => (nth > 0, nth == 0),
            KeyAccess::ReadThenWrite => (nth == 0, nth > 0),
            KeyAccess::ReadWriteThenWrite => (nth == 0, true),
            KeyAccess::ReadWriteThenRead => (true, nth == 0),
            KeyAccess::ByArgs(decide) => match decide(args) {
                KeyAccess::ByArgs(_) => (true, true),
                decided => decided.of_key(args, nth),
            },
        }
    }
}

/// The reach of a keyspace command that has no key arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyless {
    /// Keyed (routed by its keys), or keyless without data (MEMORY HELP):
    /// any one shard answers.
    No,
    /// Counts a database's keys (DBSIZE): the shards' counts add up.
    Count,
    /// Lists a database's keys (KEYS): the shards' lists join.
    List,
    /// Picks one key (RANDOMKEY): any shard's non-nil answer.
    Pick,
    /// Iterates a database with a cursor (SCAN): shard after shard.
    Cursor,
    /// Empties the current database (FLUSHDB): every shard, and every
    /// watcher of the database is touched.
    FlushDb,
    /// Empties every database (FLUSHALL).
    FlushAll,
    /// Swaps two databases (SWAPDB, arguments 1 and 2).
    SwapDb,
    /// Changes state every shard holds besides its keys (SCRIPT LOAD,
    /// FUNCTION LOAD): every shard the node orders applies it.
    EveryShard,
    /// Answered by any one shard (SCRIPT EXISTS, FUNCTION LIST, EVAL
    /// without keys).
    AnyShard,
}

/// Which option of an invocation reads keys through patterns (see
/// [`CommandSpec::pattern_reads`]).
pub type PatternReads = fn(&[Bytes]) -> Option<&'static str>;

/// Finds the key indexes of one invocation of a movable-keys command.
pub type KeyFinder = fn(&[Bytes]) -> Vec<usize>;

/// Key finder for `CMD ... numkeys key [key ...] ...` with numkeys at
/// index `POS`: the keys are the `numkeys` arguments after it.
pub fn keys_after_numkeys<const POS: usize>(args: &[Bytes]) -> Vec<usize> {
    let n = args
        .get(POS)
        .and_then(|a| std::str::from_utf8(a).ok())
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(0);
    // More keys announced than given: no keys, as Redis's key specs find
    // none there (the command then answers its own error).
    if (POS + 1).saturating_add(n) > args.len() {
        return Vec::new();
    }
    (POS + 1..POS + 1 + n).collect()
}

/// Key finder for `CMD destination numkeys key [key ...]`: the destination
/// at index 1, then the keys after numkeys at index 2.
pub fn dest_and_keys_after_numkeys(args: &[Bytes]) -> Vec<usize> {
    let mut keys = vec![1];
    keys.extend(keys_after_numkeys::<2>(args));
    keys
}

impl CommandSpec {
    /// Indexes of the key arguments of this invocation.
    pub fn keys_of(&self, args: &[Bytes]) -> Vec<usize> {
        match self.key_finder {
            Some(find) => find(args),
            None => self.key_indexes(args.len()),
        }
    }

    /// This entry, marked as changing nothing when its reply is empty.
    pub const fn idle_on_empty(self) -> CommandSpec {
        CommandSpec {
            idle_on_empty_reply: true,
            ..self
        }
    }

    /// Whether a successful reply of this command to `args` means nothing
    /// changed.
    pub fn changed_nothing(&self, args: &[Bytes], reply: &Reply) -> bool {
        if let Some(unchanged) = self.unchanged_when {
            return unchanged(args, reply);
        }
        self.idle_on_empty_reply
            && match reply {
                Reply::Int(n) => *n == 0 || *n == -1,
                Reply::Nil | Reply::NilArray => true,
                Reply::Array(items) => items.is_empty(),
                _ => false,
            }
    }

    /// This entry, whose runs changed nothing when `unchanged` says so.
    pub const fn unchanged_when(self, unchanged: fn(&[Bytes], &Reply) -> bool) -> CommandSpec {
        CommandSpec {
            unchanged_when: Some(unchanged),
            ..self
        }
    }

    /// This entry, first released in Redis `version` (COMMAND DOCS).
    pub const fn since(self, version: &'static str) -> CommandSpec {
        CommandSpec {
            since: version,
            ..self
        }
    }

    /// This entry, whose runs report what they modified
    /// ([`CommandSpec::reports_writes`]).
    pub const fn reporting_writes(self) -> CommandSpec {
        CommandSpec {
            reports_writes: true,
            ..self
        }
    }

    /// This entry with other keyspace events than its name on its keys.
    pub const fn events(self, events: crate::notify::Events) -> CommandSpec {
        CommandSpec { events, ..self }
    }

    /// This entry with Redis's key-spec flags, one per key spec (when
    /// they differ from what its ACL key permissions imply).
    pub const fn with_key_specs(self, key_specs: &'static [KeySpec]) -> CommandSpec {
        CommandSpec { key_specs, ..self }
    }

    /// This entry with Redis's command tips ([`CommandSpec::tips`]).
    pub const fn with_tips(self, tips: &'static [&'static str]) -> CommandSpec {
        CommandSpec { tips, ..self }
    }

    /// The key specs' flags of this entry: its own, or what its ACL key
    /// permissions imply (Redis's common cases).
    pub fn key_spec_list(&self) -> Vec<KeySpec> {
        use ks::*;
        if !self.key_specs.is_empty() {
            return self.key_specs.to_vec();
        }
        match self.key_access {
            KeyAccess::Read => vec![RO_ACCESS],
            KeyAccess::Existence => vec![KeySpec::RO],
            KeyAccess::ReadWrite => vec![RW_ACCESS_UPDATE],
            KeyAccess::Write => vec![RW_UPDATE],
            KeyAccess::WriteThenRead => vec![OW_UPDATE, RO_ACCESS],
            KeyAccess::ReadThenWrite => vec![RO_ACCESS, OW_UPDATE],
            KeyAccess::ReadWriteThenWrite => vec![RW_ACCESS_DELETE, RW_INSERT],
            KeyAccess::ReadWriteThenRead => vec![RW_ACCESS_INSERT, RO_ACCESS],
            KeyAccess::ByArgs(_) => vec![RW_ACCESS_UPDATE.union(KeySpec::VARIABLE_FLAGS)],
        }
    }

    /// The flags of the `nth` key (0-based) that this invocation names, as
    /// COMMAND GETKEYSANDFLAGS reports them: a spec whose flags vary takes
    /// those of the invocation (SET without GET overwrites).
    pub fn key_flags_of(&self, args: &[Bytes], nth: usize) -> KeySpec {
        let specs = self.key_spec_list();
        let spec = specs[nth.min(specs.len().saturating_sub(1))];
        if !spec.contains(KeySpec::VARIABLE_FLAGS) {
            // INCOMPLETE says the spec's search may miss keys; a key that
            // was found is reported without it, as Redis does.
            return KeySpec(spec.0 & !KeySpec::INCOMPLETE.0);
        }
        match self.key_access {
            KeyAccess::ByArgs(decide) => match decide(args) {
                KeyAccess::Write => ks::OW_UPDATE,
                KeyAccess::Read => ks::RO_ACCESS,
                _ => ks::RW_ACCESS_UPDATE,
            },
            _ => spec,
        }
    }

    /// This entry with other ACL key permissions than its flags imply.
    pub const fn keys_access(self, key_access: KeyAccess) -> CommandSpec {
        CommandSpec { key_access, ..self }
    }

    /// This entry reading keys through patterns (see
    /// [`CommandSpec::pattern_reads`]).
    pub const fn reading_patterns(self, f: PatternReads) -> CommandSpec {
        CommandSpec {
            pattern_reads: Some(f),
            ..self
        }
    }

    /// This entry with a keyless reach (see [`Keyless`]).
    pub const fn reaching(self, keyless: Keyless) -> CommandSpec {
        CommandSpec { keyless, ..self }
    }

    pub fn is_write(&self) -> bool {
        self.flags.contains(Flags::WRITE)
    }

    /// Whether `argc` arguments (name included) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = self.arity as i64;
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// Indexes of the key arguments of this invocation.
    pub fn key_indexes(&self, argc: usize) -> Vec<usize> {
        if self.first_key <= 0 || argc == 0 {
            return Vec::new();
        }
        let argc = argc as i64;
        let first = self.first_key as i64;
        let last = if self.last_key < 0 {
            argc + self.last_key as i64
        } else {
            self.last_key as i64
        };
        let step = self.step.max(1) as i64;
        let mut out = Vec::new();
        let mut i = first;
        while i <= last && i < argc {
            out.push(i as usize);
            i += step;
        }
        out
    }

    /// The full name Redis reports (`client|setname` for a subcommand).
    pub fn full_name(&self, parent: Option<&CommandSpec>) -> String {
        match parent {
            Some(p) => format!("{}|{}", p.name, self.name),
            None => self.name.to_string(),
        }
    }

    /// The COMMAND INFO reply entry for this command.
    pub fn info_reply(&self, parent: Option<&CommandSpec>) -> Reply {
        let full = self.full_name(parent);
        let flags = self
            .flags
            .names()
            .into_iter()
            .map(Reply::simple)
            .collect::<Vec<_>>();
        let acl = self
            .acl
            .iter()
            .map(|c| Reply::Simple(format!("@{c}").into()))
            .collect::<Vec<_>>();
        let subs = self
            .subcommands
            .iter()
            .map(|s| s.info_reply(Some(self)))
            .collect::<Vec<_>>();
        Reply::Array(vec![
            Reply::bulk_str(&full),
            Reply::Int(self.arity as i64),
            Reply::Set(flags),
            Reply::Int(self.first_key as i64),
            Reply::Int(self.last_key as i64),
            Reply::Int(self.step as i64),
            Reply::Set(acl),
            Reply::Set(self.tips.iter().map(|t| Reply::bulk_str(t)).collect()),
            Reply::Set(self.key_specs_reply(&full)),
            Reply::Set(subs),
        ])
    }

    /// Redis 7 key specs: Redis 7.0's for a command it has (its full
    /// name is `full`), else one derived from first/last/step.
    fn key_specs_reply(&self, full: &str) -> Vec<Reply> {
        if let Some(doc) = crate::command_docs::lookup(full) {
            return doc.key_specs.iter().map(|k| k.reply()).collect();
        }
        if self.first_key <= 0 {
            return Vec::new();
        }
        // One range spec covers every key; it carries the first spec's
        // flags.
        let flags = self.key_spec_list()[0].names();
        vec![Reply::Map(vec![
            (
                Reply::bulk_str("flags"),
                Reply::Set(flags.into_iter().map(Reply::simple).collect()),
            ),
            (
                Reply::bulk_str("begin_search"),
                Reply::Map(vec![
                    (Reply::bulk_str("type"), Reply::bulk_str("index")),
                    (
                        Reply::bulk_str("spec"),
                        Reply::Map(vec![(
                            Reply::bulk_str("index"),
                            Reply::Int(self.first_key as i64),
                        )]),
                    ),
                ]),
            ),
            (
                Reply::bulk_str("find_keys"),
                Reply::Map(vec![
                    (Reply::bulk_str("type"), Reply::bulk_str("range")),
                    (
                        Reply::bulk_str("spec"),
                        Reply::Map(vec![
                            (
                                Reply::bulk_str("lastkey"),
                                Reply::Int(if self.last_key < 0 {
                                    self.last_key as i64
                                } else {
                                    (self.last_key - self.first_key) as i64
                                }),
                            ),
                            (Reply::bulk_str("keystep"), Reply::Int(self.step as i64)),
                            (Reply::bulk_str("limit"), Reply::Int(0)),
                        ]),
                    ),
                ]),
            ),
        ])]
    }

    /// The COMMAND DOCS entry: summary, since, group, then Redis's
    /// reference of the command (complexity, history, arguments...).
    pub fn docs_reply(&self, parent: Option<&CommandSpec>) -> (Reply, Reply) {
        let full = self.full_name(parent);
        let doc = crate::command_docs::lookup(&full);
        // Redis's version and group for a command Redis 7.0 has; the
        // table's for the others (CLIENT SETINFO, Kvasir's own).
        let mut fields = vec![
            (Reply::bulk_str("summary"), Reply::bulk_str(self.summary)),
            (
                Reply::bulk_str("since"),
                Reply::bulk_str(doc.map_or(self.since, |d| d.since)),
            ),
            (
                Reply::bulk_str("group"),
                Reply::bulk_str(doc.map_or(self.group, |d| d.group)),
            ),
        ];
        if let Some(doc) = doc {
            fields.extend(doc.fields());
        }
        if !self.subcommands.is_empty() {
            let subs = self
                .subcommands
                .iter()
                .map(|s| {
                    let (k, v) = s.docs_reply(Some(self));
                    (k, v)
                })
                .collect();
            fields.push((Reply::bulk_str("subcommands"), Reply::Map(subs)));
        }
        (Reply::bulk_str(&full), Reply::Map(fields))
    }
}

/// Shorthand for table entries without subcommands.
#[allow(clippy::too_many_arguments)]
pub const fn cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: (i32, i32, i32),
    acl: &'static [&'static str],
    group: &'static str,
    since: &'static str,
    summary: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
        acl,
        group,
        since,
        summary,
        handler,
        subcommands: &[],
        key_finder: None,
        keyless: Keyless::No,
        idle_on_empty_reply: false,
        unchanged_when: None,
        events: crate::notify::Events::Default,
        key_access: if flags.contains(Flags::WRITE) {
            KeyAccess::ReadWrite
        } else {
            KeyAccess::Read
        },
        pattern_reads: None,
        key_specs: &[],
        reports_writes: false,
        tips: &[],
    }
}

/// Shorthand for a container command (CLIENT, CONFIG, OBJECT...): its
/// subcommands carry their own arity, flags and handlers.
pub const fn container(
    name: &'static str,
    arity: i32,
    acl: &'static [&'static str],
    group: &'static str,
    since: &'static str,
    summary: &'static str,
    subcommands: &'static [CommandSpec],
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: Flags::NONE,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl,
        group,
        since,
        summary,
        handler: Handler::Container,
        subcommands,
        key_finder: None,
        keyless: Keyless::No,
        idle_on_empty_reply: false,
        unchanged_when: None,
        events: crate::notify::Events::Default,
        key_access: KeyAccess::Read,
        pattern_reads: None,
        key_specs: &[],
        reports_writes: false,
        tips: &[],
    }
}

/// A HELP reply: one status line per entry, as Redis's addReplyHelp.
pub fn help_reply(lines: &[&'static str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::simple(l)).collect())
}

/// Every family's commands, in a fixed order.
pub fn families() -> [&'static [CommandSpec]; 15] {
    [
        crate::string::COMMANDS,
        crate::bitmap::COMMANDS,
        crate::hyperloglog::COMMANDS,
        crate::geo::COMMANDS,
        crate::keys::COMMANDS,
        crate::list::COMMANDS,
        crate::hash::COMMANDS,
        crate::set::COMMANDS,
        crate::zset::COMMANDS,
        crate::stream::COMMANDS,
        crate::sort::COMMANDS,
        crate::server::COMMANDS,
        crate::scripting::eval::COMMANDS,
        crate::scripting::function::COMMANDS,
        crate::connection::COMMANDS,
    ]
}

struct Table {
    by_name: HashMap<&'static str, &'static CommandSpec, foldhash::fast::RandomState>,
    all: Vec<&'static CommandSpec>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut all: Vec<&'static CommandSpec> = families().into_iter().flatten().collect();
        all.sort_by_key(|c| c.name);
        let by_name = all.iter().map(|c| (c.name, *c)).collect();
        Table { by_name, all }
    })
}

/// Finds a top-level command by name, case-insensitively. Clients send
/// names in any case (redis-benchmark sends `SET`), so the name is folded
/// into a stack buffer: no allocation per request.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    const LONGEST: usize = 32;
    if name.len() > LONGEST {
        return None;
    }
    let mut buf = [0u8; LONGEST];
    let folded = &mut buf[..name.len()];
    folded.copy_from_slice(name);
    folded.make_ascii_lowercase();
    let s = std::str::from_utf8(folded).ok()?;
    table().by_name.get(s).copied()
}

/// Every top-level command, sorted by name.
pub fn all_commands() -> &'static [&'static CommandSpec] {
    &table().all
}

/// The command `args` name (the subcommand's spec for a container),
/// whatever the arity: whom a refusal is counted for in INFO commandstats.
pub fn named_command(
    args: &[Bytes],
) -> Option<(&'static CommandSpec, Option<&'static CommandSpec>)> {
    let spec = lookup(args.first()?)?;
    let sub_name = match args.get(1) {
        Some(sub) if !spec.subcommands.is_empty() => sub.to_ascii_lowercase(),
        _ => return Some((spec, None)),
    };
    spec.subcommands
        .iter()
        .find(|s| s.name.as_bytes() == sub_name.as_slice())
        .map(|sub| (sub, Some(spec)))
}

/// Resolves `args` to the spec that will run them (the subcommand's for a
/// container) and checks arity, returning the spec and its parent.
pub fn resolve(
    args: &[Bytes],
) -> Result<(&'static CommandSpec, Option<&'static CommandSpec>), CmdError> {
    let Some(name) = args.first() else {
        return Err(crate::error::unknown_command(args));
    };
    let Some(spec) = lookup(name) else {
        return Err(crate::error::unknown_command(args));
    };
    if !spec.arity_ok(args.len()) {
        return Err(CmdError::WrongArity(spec.name.to_string()));
    }
    // A container called without a subcommand (plain COMMAND) runs itself.
    if spec.subcommands.is_empty() || args.len() < 2 {
        return Ok((spec, None));
    }
    let sub_name = args[1].to_ascii_lowercase();
    match spec
        .subcommands
        .iter()
        .find(|s| s.name.as_bytes() == sub_name.as_slice())
    {
        // A subcommand's arity counts the container name too, as in Redis.
        Some(sub) if sub.arity_ok(args.len()) => Ok((sub, Some(spec))),
        Some(sub) => Err(CmdError::WrongArity(sub.full_name(Some(spec)))),
        None => Err(CmdError::UnknownSubcommand {
            container: spec.name.to_string(),
            sub: String::from_utf8_lossy(&args[1]).into_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_permissions_agree_with_the_key_specs() {
        // Redis derives a key's ACL permission from its key-spec flags;
        // Kvasir keeps both in the table, so they must agree.
        let mut differ = Vec::new();
        for c in families().into_iter().flatten() {
            for spec in std::iter::once(c).chain(c.subcommands.iter()) {
                if spec.first_key == 0 && spec.key_finder.is_none() {
                    continue;
                }
                if matches!(spec.key_access, KeyAccess::ByArgs(_)) {
                    continue;
                }
                let specs = spec.key_spec_list();
                for nth in 0..specs.len().max(2) {
                    let flags = specs[nth.min(specs.len() - 1)];
                    if flags.contains(KeySpec::NOT_KEY) {
                        continue;
                    }
                    let from_specs = flags.acl_needs();
                    let from_access = spec.key_access.of_key(&[], nth);
                    if from_specs != from_access {
                        differ.push(format!(
                            "{} key {nth}: specs {:?} {from_specs:?}, access {from_access:?}",
                            spec.name,
                            flags.names()
                        ));
                    }
                }
            }
        }
        assert!(differ.is_empty(), "{}", differ.join("\n"));
    }

    #[test]
    fn names_are_unique_and_lowercase() {
        let mut seen = std::collections::HashSet::new();
        for c in families().into_iter().flatten() {
            assert_eq!(c.name, c.name.to_lowercase());
            assert!(seen.insert(c.name), "duplicate command {}", c.name);
            // A container either runs its subcommands only, or also runs
            // itself when called bare (COMMAND).
            if matches!(c.handler, Handler::Container) {
                assert!(!c.subcommands.is_empty(), "{}", c.name);
            }
        }
    }

    #[test]
    fn every_entry_runs_something() {
        // Session commands carry a SessionCmd the server matches
        // exhaustively; keyspace commands carry their function; only a
        // container may lack a handler of its own, and then its
        // subcommands all have one.
        for c in all_commands() {
            for sub in c.subcommands {
                assert!(sub.subcommands.is_empty(), "{}|{} nests", c.name, sub.name);
                assert!(
                    !matches!(sub.handler, Handler::Container),
                    "{}|{}",
                    c.name,
                    sub.name
                );
            }
        }
    }

    #[test]
    fn writes_have_write_handlers() {
        for c in all_commands() {
            for s in std::iter::once(*c).chain(c.subcommands.iter()) {
                match s.handler {
                    Handler::Write(_) => assert!(s.is_write(), "{} must be flagged write", s.name),
                    Handler::Read(_) => assert!(!s.is_write(), "{} is flagged write", s.name),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn key_positions() {
        let mset = lookup(b"MSET").map(|c| c.key_indexes(5));
        assert_eq!(mset, Some(vec![1, 3]));
        let del = lookup(b"del").map(|c| c.key_indexes(4));
        assert_eq!(del, Some(vec![1, 2, 3]));
        let ping = lookup(b"ping").map(|c| c.key_indexes(1));
        assert_eq!(ping, Some(vec![]));
    }
}

/// `rename-command old new` (a start setting, as Redis's): the command is
/// known as `new` only, or, with an empty `new`, not at all. Clients name
/// it so; inside, it keeps its own name (the log, the state machine and
/// replies see `old`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Renames {
    by_new_name: std::collections::HashMap<String, &'static str>,
    renamed: std::collections::HashSet<&'static str>,
}

/// What a name a client sent stands for under [`Renames`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renamed {
    /// Not renamed: as the table has it.
    Same,
    /// A command's old name, renamed away: unknown.
    Gone,
    /// A new name: the command's own.
    To(&'static str),
}

impl Renames {
    /// Adds one `rename-command`; Redis's errors for a command that does
    /// not exist or a new name that is taken.
    pub fn add(&mut self, old: &str, new: &str) -> Result<(), &'static str> {
        let spec = lookup(old.as_bytes())
            .filter(|s| !self.renamed.contains(s.name))
            .ok_or("No such command in rename-command")?;
        let new = new.to_ascii_lowercase();
        if !new.is_empty() {
            let taken = lookup(new.as_bytes()).is_some_and(|s| !self.renamed.contains(s.name))
                || self.by_new_name.contains_key(&new);
            if taken {
                return Err("Target command name already exists");
            }
        }
        self.renamed.insert(spec.name);
        if !new.is_empty() {
            self.by_new_name.insert(new, spec.name);
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.renamed.is_empty()
    }

    /// Whether the command named `own` in the table was disabled (renamed
    /// to ""): COMMAND no longer lists it, as Redis drops it from its
    /// command table.
    pub fn removed(&self, own: &str) -> bool {
        self.renamed.contains(own) && !self.by_new_name.values().any(|n| *n == own)
    }

    /// The table's command a client names `name` (its new name, or its own
    /// when not renamed).
    pub fn lookup(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        match self.translate(name) {
            Renamed::Same => lookup(name),
            Renamed::Gone => None,
            Renamed::To(own) => lookup(own.as_bytes()),
        }
    }

    /// What `name` (as a client sent it) stands for.
    pub fn translate(&self, name: &[u8]) -> Renamed {
        if self.is_empty() {
            return Renamed::Same;
        }
        let folded = String::from_utf8_lossy(name).to_ascii_lowercase();
        if let Some(own) = self.by_new_name.get(&folded) {
            return Renamed::To(own);
        }
        match lookup(name) {
            Some(spec) if self.renamed.contains(spec.name) => Renamed::Gone,
            _ => Renamed::Same,
        }
    }

    /// `args` with a new name replaced by the command's own; an error for
    /// a name renamed away, as for any unknown command.
    pub fn apply(&self, args: &mut [Bytes]) -> Result<(), CmdError> {
        let Some(name) = args.first() else {
            return Ok(());
        };
        match self.translate(name) {
            Renamed::Same => Ok(()),
            Renamed::Gone => Err(crate::error::unknown_command(args)),
            Renamed::To(own) => {
                args[0] = Bytes::from_static(own.as_bytes());
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod rename_tests {
    use super::*;

    #[test]
    fn renamed_commands_answer_to_their_new_name_only() {
        let mut r = Renames::default();
        assert_eq!(r.translate(b"FLUSHDB"), Renamed::Same);
        r.add("flushdb", "Badger").expect("renamed");
        r.add("flushall", "").expect("disabled");
        assert_eq!(r.translate(b"flushdb"), Renamed::Gone);
        assert_eq!(r.translate(b"FLUSHALL"), Renamed::Gone);
        assert_eq!(r.translate(b"badger"), Renamed::To("flushdb"));
        assert_eq!(r.translate(b"get"), Renamed::Same);
        let mut args = vec![Bytes::from_static(b"BADGER"), Bytes::from_static(b"ASYNC")];
        r.apply(&mut args).expect("known");
        assert_eq!(args[0], "flushdb");
        let mut gone = vec![Bytes::from_static(b"flushall")];
        assert!(matches!(
            r.apply(&mut gone),
            Err(CmdError::UnknownCommand(_))
        ));
        assert_eq!(
            r.add("nosuch", "x"),
            Err("No such command in rename-command")
        );
        assert_eq!(
            r.add("get", "set"),
            Err("Target command name already exists")
        );
        assert_eq!(
            r.add("get", "badger"),
            Err("Target command name already exists")
        );
        // A name freed by a rename may be taken.
        r.add("dbsize", "flushall").expect("freed name");
        assert_eq!(r.translate(b"flushall"), Renamed::To("dbsize"));
    }
}
