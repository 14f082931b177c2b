//! The shard state machine: what one log entry (or one unlogged write of
//! a standalone node) asks of a shard, its byte codec, and the one apply
//! and read functions every replica runs.
//!
//! A standalone server and every Raft replica of a cluster shard apply the
//! same [`ShardCmd`] through [`apply`]; only the orderer differs (no log, or
//! a Raft log). The outcome depends only on the store, the command and the
//! [`Ctx`] (docs/architecture.md, determinism).

use crate::error::{BlockOn, CmdError, CmdResult};
use crate::keyspace::Keyspace;
use crate::store::{Ctx, Store};
use crate::table::{resolve, CommandSpec, Handler};
use bytes::Bytes;
use kvasir_resp::Reply;

/// What a proposal or a read asks of one shard.
#[derive(Clone, Debug, PartialEq)]
pub enum ShardCmd {
    /// Client commands run back to back; `multi` answers them as one array
    /// (EXEC) and never blocks.
    Commands {
        db: usize,
        cmds: Vec<Vec<Bytes>>,
        multi: bool,
    },
    /// Deletions picked by the active expiry cycle: each key goes only if
    /// it is still expired at the entry's time.
    Expire { db: usize, keys: Vec<Bytes> },
    /// Deletions picked by `maxmemory-policy` (on the node that orders the
    /// shard's writes, from its access stamps): each key goes if it still
    /// exists.
    Evict { db: usize, keys: Vec<Bytes> },
    /// EXEC after WATCH: the block runs only if every watched key still has
    /// the digest the client saw when it watched it (checked when applied,
    /// identically on every replica); otherwise it answers a nil array.
    WatchedExec {
        db: usize,
        cmds: Vec<Vec<Bytes>>,
        watched: Vec<(Bytes, u64)>,
    },
    /// A read for WATCH: the digests of keys (see
    /// [`crate::snapshot::watch_digest`]), as an array of integers.
    WatchDigests { db: usize, keys: Vec<Bytes> },
    /// A script command of a restricted ACL user: `cmd` runs with the
    /// user's permissions (`rules`, [`crate::acl::User::permission_rules`])
    /// checked on each `redis.call`, identically on every replica.
    AsUser {
        rules: Vec<Bytes>,
        cmd: Box<ShardCmd>,
    },
}

/// The result of applying a command.
#[derive(Debug, PartialEq)]
pub enum Applied {
    Reply(Reply),
    /// A blocking command found nothing: whoever waits for the reply parks
    /// the client on `keys` and submits the command again after a write
    /// to one of them.
    Block(Box<BlockOn>),
}

/// Runs one command: the one dispatch on a keyspace command's handler.
pub fn execute<K: Keyspace>(
    store: &mut Store<K>,
    spec: &CommandSpec,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    store.keyspace().set_access_clock(ctx.now_ms);
    match spec.handler {
        Handler::Write(f) => crate::notify::write(store, spec, K::write_fn(&f), db, args, ctx),
        Handler::Read(f) => K::read_fn(&f)(store, db, args, ctx),
        Handler::Session(_) | Handler::Container => Err(crate::error::unknown_command(args)),
    }
}

/// Runs one read-only command; writes are refused.
pub fn execute_read<K: Keyspace>(
    store: &Store<K>,
    spec: &CommandSpec,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    store.keyspace().set_access_clock(ctx.now_ms);
    match spec.handler {
        Handler::Read(f) => K::read_fn(&f)(store, db, args, ctx),
        _ => Err(crate::error::unknown_command(args)),
    }
}

/// What an applied command changed, for whoever must react to writes
/// outside the store (blocked clients, WATCH).
#[derive(Clone, Copy)]
pub enum Written<'a> {
    /// A write command that succeeded: its keys (or, for FLUSHDB and the
    /// like, its databases) changed.
    Command(&'static CommandSpec, &'a [Bytes]),
    /// Keys the expiry cycle or eviction removed.
    Removed(&'a [Bytes]),
    /// Keyspace events (`notify-keyspace-events`) the store produced, in
    /// order; heard only when the setting is not empty.
    Events(&'a [crate::notify::Event]),
}

/// Hands the store's buffered keyspace events to `on_write`.
fn flush_events<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    on_write: &mut impl FnMut(usize, Written),
) {
    if !store.events.is_empty() {
        let events = store.take_events();
        on_write(db, Written::Events(&events));
    }
}

/// Whether a blocked command must keep waiting because one of `keys` now
/// holds another type than the one it pops from: Redis serves a client
/// blocked on a key only while the key holds that type, so a key deleted
/// and recreated as a string (by one MULTI) leaves it blocked instead of
/// answering WRONGTYPE.
pub fn waits_on_other_type<K: Keyspace>(
    store: &Store<K>,
    spec: &CommandSpec,
    db: usize,
    keys: &[Bytes],
    now_ms: u64,
) -> bool {
    let wanted = match spec.group {
        "list" => "list",
        "sorted-set" => "zset",
        // A blocked XREADGROUP is told when its stream is replaced by
        // another type (Redis's unblockDeletedStreamReadgroupClients); a
        // blocked XREAD keeps waiting.
        "stream" if spec.is_write() => return false,
        "stream" => "stream",
        _ => return false,
    };
    db < store.databases()
        && keys.iter().any(|k| {
            store
                .db(db)
                .get(k)
                .filter(|e| !e.is_expired(now_ms))
                .is_some_and(|e| e.value.type_name() != wanted)
        })
}

/// Applies `cmd` at `ctx`. `on_write` hears of every change (its database
/// and what changed), so the caller can wake clients blocked on the keys
/// and dirty their watchers.
pub fn apply<K: Keyspace>(
    store: &mut Store<K>,
    cmd: &ShardCmd,
    ctx: &Ctx,
    mut on_write: impl FnMut(usize, Written),
) -> Applied {
    match cmd {
        ShardCmd::Commands { db, cmds, multi } => run(store, *db, cmds, *multi, ctx, &mut on_write),
        ShardCmd::Expire { db, keys } => {
            if *db < store.databases() && store.apply_expired(*db, keys, ctx) > 0 {
                on_write(*db, Written::Removed(keys));
                flush_events(store, *db, &mut on_write);
            }
            Applied::Reply(Reply::ok())
        }
        ShardCmd::Evict { db, keys } => {
            if *db < store.databases() && store.apply_evicted(*db, keys) > 0 {
                on_write(*db, Written::Removed(keys));
                flush_events(store, *db, &mut on_write);
            }
            Applied::Reply(Reply::ok())
        }
        ShardCmd::WatchedExec { db, cmds, watched } => {
            if *db >= store.databases() {
                return Applied::Reply(CmdError::DbIndexOutOfRange.to_reply());
            }
            let changed = watched.iter().any(|(key, seen)| {
                crate::snapshot::watch_digest(store, *db, key, ctx.now_ms) != *seen
            });
            if changed {
                Applied::Reply(Reply::NilArray)
            } else {
                run(store, *db, cmds, true, ctx, &mut on_write)
            }
        }
        ShardCmd::WatchDigests { .. } => Applied::Reply(read(store, cmd, ctx.now_ms)),
        ShardCmd::AsUser { rules, cmd } => {
            store.begin_script_caller(Some(caller_of(rules)));
            let applied = apply(store, cmd, ctx, on_write);
            store.end_script_caller();
            applied
        }
    }
}

/// The user of a [`ShardCmd::AsUser`], from the rules it carries.
pub fn caller_of(rules: &[Bytes]) -> std::sync::Arc<crate::acl::User> {
    std::sync::Arc::new(crate::acl::User::from_permission_rules(rules))
}

/// Serves a read (a command with a `Read` handler, or WATCH digests) at
/// `now_ms`, as of the store's current state.
pub fn read<K: Keyspace>(store: &Store<K>, cmd: &ShardCmd, now_ms: u64) -> Reply {
    match cmd {
        ShardCmd::WatchDigests { db, keys } => Reply::Array(
            keys.iter()
                // Carried as the integer's bits.
                .map(|k| Reply::Int(crate::snapshot::watch_digest(store, *db, k, now_ms) as i64))
                .collect(),
        ),
        ShardCmd::Commands { db, cmds, .. } => {
            let Some(args) = cmds.first() else {
                return Reply::Nil;
            };
            if *db >= store.databases() {
                return CmdError::DbIndexOutOfRange.to_reply();
            }
            let ctx = Ctx {
                now_ms,
                seed: now_ms,
            };
            resolve(args)
                .and_then(|(spec, _)| execute_read(store, spec, *db, args, &ctx))
                .unwrap_or_else(|e| e.to_reply())
        }
        ShardCmd::AsUser { rules, cmd } => {
            store.begin_script_caller(Some(caller_of(rules)));
            let reply = read(store, cmd, now_ms);
            store.end_script_caller();
            reply
        }
        ShardCmd::Expire { .. } | ShardCmd::Evict { .. } | ShardCmd::WatchedExec { .. } => {
            Reply::error("ERR not a read")
        }
    }
}

/// Client commands back to back; the i-th command's seed is the entry's
/// seed + i, so two commands of one entry never pick alike.
fn run<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    cmds: &[Vec<Bytes>],
    multi: bool,
    ctx: &Ctx,
    on_write: &mut impl FnMut(usize, Written),
) -> Applied {
    if db >= store.databases() {
        return Applied::Reply(CmdError::DbIndexOutOfRange.to_reply());
    }
    let mut replies = Vec::with_capacity(cmds.len());
    for (i, args) in cmds.iter().enumerate() {
        let ctx = Ctx {
            now_ms: ctx.now_ms,
            seed: ctx.seed.wrapping_add(i as u64),
        };
        let result = resolve(args).and_then(|(spec, _)| {
            let r = execute(store, spec, db, args, &ctx);
            if spec.reports_writes {
                // It modified what it reported (a script: what its
                // commands wrote).
                for (db, spec, args) in store.take_reported_writes() {
                    on_write(db, Written::Command(spec, &args));
                }
            } else if let Ok(reply) = &r {
                if spec.is_write() && !store.changed_nothing(spec, args, reply) {
                    on_write(db, Written::Command(spec, args));
                }
            }
            flush_events(store, db, on_write);
            r
        });
        let reply = match result {
            Ok(r) => r,
            Err(CmdError::WouldBlock(on)) if multi => on.on_timeout,
            Err(CmdError::WouldBlock(on)) => return Applied::Block(on),
            Err(e) => e.to_reply(),
        };
        replies.push(reply);
    }
    if multi {
        Applied::Reply(Reply::Array(replies))
    } else {
        Applied::Reply(replies.pop().unwrap_or(Reply::Nil))
    }
}

// The codec. Tags 1, 2, 4 and 5 are shard commands; tag 3 belongs to the
// cluster metadata group (its own commands share the log format).
const TAG_COMMANDS: u8 = 1;
const TAG_EXPIRE: u8 = 2;
/// The first byte of the cluster metadata group's commands: never a shard
/// command.
pub const TAG_RESERVED_META: u8 = 3;
const TAG_WATCHED_EXEC: u8 = 4;
const TAG_WATCH_DIGESTS: u8 = 5;
const TAG_EVICT: u8 = 6;
const TAG_AS_USER: u8 = 7;

/// Appends a length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_keys(out: &mut Vec<u8>, keys: &[Bytes]) {
    put_u32(out, keys.len());
    for k in keys {
        put_bytes(out, k);
    }
}

fn put_cmds(out: &mut Vec<u8>, cmds: &[Vec<Bytes>]) {
    put_u32(out, cmds.len());
    for args in cmds {
        put_keys(out, args);
    }
}

pub fn encode(cmd: &ShardCmd, out: &mut Vec<u8>) {
    match cmd {
        ShardCmd::Commands { db, cmds, multi } => {
            out.push(TAG_COMMANDS);
            put_u32(out, *db);
            out.push(*multi as u8);
            put_cmds(out, cmds);
        }
        ShardCmd::Expire { db, keys } => {
            out.push(TAG_EXPIRE);
            put_u32(out, *db);
            put_keys(out, keys);
        }
        ShardCmd::Evict { db, keys } => {
            out.push(TAG_EVICT);
            put_u32(out, *db);
            put_keys(out, keys);
        }
        ShardCmd::WatchedExec { db, cmds, watched } => {
            out.push(TAG_WATCHED_EXEC);
            put_u32(out, *db);
            put_cmds(out, cmds);
            put_u32(out, watched.len());
            for (key, digest) in watched {
                put_bytes(out, key);
                out.extend_from_slice(&digest.to_le_bytes());
            }
        }
        ShardCmd::WatchDigests { db, keys } => {
            out.push(TAG_WATCH_DIGESTS);
            put_u32(out, *db);
            put_keys(out, keys);
        }
        ShardCmd::AsUser { rules, cmd } => {
            out.push(TAG_AS_USER);
            put_keys(out, rules);
            encode(cmd, out);
        }
    }
}

/// A cursor over an entry's bytes; every read is bounds-checked.
pub struct Reader<'a> {
    pub b: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Some(h)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    pub fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Option<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Some(u64::from_le_bytes(a))
    }
    pub fn bytes(&mut self) -> Option<Bytes> {
        let n = self.u32()? as usize;
        self.take(n).map(Bytes::copy_from_slice)
    }
    /// A count-prefixed list of byte strings; the capacity is bounded by
    /// the bytes left, so a damaged count cannot allocate much.
    fn keys(&mut self) -> Option<Vec<Bytes>> {
        let n = self.u32()? as usize;
        let mut keys = Vec::with_capacity(n.min(self.b.len() / 4));
        for _ in 0..n {
            keys.push(self.bytes()?);
        }
        Some(keys)
    }
    fn cmds(&mut self) -> Option<Vec<Vec<Bytes>>> {
        let n = self.u32()? as usize;
        let mut cmds = Vec::with_capacity(n.min(self.b.len() / 4));
        for _ in 0..n {
            cmds.push(self.keys()?);
        }
        Some(cmds)
    }
}

/// Decodes a shard command; `None` for damaged bytes (never a panic).
pub fn decode(b: &[u8]) -> Option<ShardCmd> {
    let mut r = Reader { b };
    if r.b.first() == Some(&TAG_AS_USER) {
        r.u8()?;
        let rules = r.keys()?;
        // One level only: the wrapped command is never itself wrapped.
        let cmd = decode_plain(&mut r)?;
        return r.b.is_empty().then(|| ShardCmd::AsUser {
            rules,
            cmd: Box::new(cmd),
        });
    }
    let cmd = decode_plain(&mut r)?;
    r.b.is_empty().then_some(cmd)
}

/// A shard command other than [`ShardCmd::AsUser`], from `r`.
fn decode_plain(r: &mut Reader<'_>) -> Option<ShardCmd> {
    let cmd = match r.u8()? {
        TAG_COMMANDS => {
            let db = r.u32()? as usize;
            let multi = r.u8()? != 0;
            let cmds = r.cmds()?;
            ShardCmd::Commands { db, cmds, multi }
        }
        TAG_EXPIRE => {
            let db = r.u32()? as usize;
            ShardCmd::Expire {
                db,
                keys: r.keys()?,
            }
        }
        TAG_EVICT => {
            let db = r.u32()? as usize;
            ShardCmd::Evict {
                db,
                keys: r.keys()?,
            }
        }
        TAG_WATCHED_EXEC => {
            let db = r.u32()? as usize;
            let cmds = r.cmds()?;
            let n = r.u32()? as usize;
            let mut watched = Vec::with_capacity(n.min(r.b.len() / 12));
            for _ in 0..n {
                let key = r.bytes()?;
                watched.push((key, r.u64()?));
            }
            ShardCmd::WatchedExec { db, cmds, watched }
        }
        TAG_WATCH_DIGESTS => {
            let db = r.u32()? as usize;
            ShardCmd::WatchDigests {
                db,
                keys: r.keys()?,
            }
        }
        _ => return None,
    };
    Some(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn apply_at(store: &mut Store, now_ms: u64, cmd: &ShardCmd) -> Reply {
        let ctx = Ctx { now_ms, seed: 7 };
        match apply(store, cmd, &ctx, |_, _| {}) {
            Applied::Reply(r) => r,
            Applied::Block(_) => panic!("blocked"),
        }
    }

    fn digests(store: &Store, now_ms: u64, keys: &[&str]) -> Vec<(Bytes, u64)> {
        let cmd = ShardCmd::WatchDigests {
            db: 0,
            keys: args(keys),
        };
        let Reply::Array(ds) = read(store, &cmd, now_ms) else {
            panic!("digests")
        };
        args(keys)
            .into_iter()
            .zip(ds)
            .map(|(k, d)| match d {
                Reply::Int(d) => (k, d as u64),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn exec(watched: Vec<(Bytes, u64)>) -> ShardCmd {
        ShardCmd::WatchedExec {
            db: 0,
            cmds: vec![args(&["INCR", "n"]), args(&["GET", "n"])],
            watched,
        }
    }

    fn one(words: &[&str]) -> ShardCmd {
        ShardCmd::Commands {
            db: 0,
            cmds: vec![args(words)],
            multi: false,
        }
    }

    #[test]
    fn watched_exec_runs_only_if_the_watched_keys_are_unchanged() {
        let mut a = Store::new(1);
        apply_at(&mut a, 1000, &one(&["SET", "n", "1"]));
        let seen = digests(&a, 1000, &["n", "missing"]);
        assert_ne!(seen[0].1, 0);
        assert_eq!(seen[1].1, 0, "a missing key digests to 0");
        // Unchanged: the block runs.
        assert_eq!(
            apply_at(&mut a, 1001, &exec(seen.clone())),
            Reply::Array(vec![Reply::Int(2), Reply::bulk_str("2")])
        );
        // The block itself changed n: the old digests no longer hold.
        assert_eq!(apply_at(&mut a, 1002, &exec(seen)), Reply::NilArray);
        // A write between WATCH and EXEC, even back to the same type.
        let seen = digests(&a, 1003, &["n"]);
        apply_at(&mut a, 1004, &one(&["SET", "n", "9"]));
        assert_eq!(apply_at(&mut a, 1005, &exec(seen)), Reply::NilArray);
        // A key created between WATCH and EXEC.
        let seen = digests(&a, 1006, &["fresh"]);
        apply_at(&mut a, 1007, &one(&["SET", "fresh", "x"]));
        assert_eq!(apply_at(&mut a, 1008, &exec(seen)), Reply::NilArray);
        // A TTL change is a change.
        let seen = digests(&a, 1009, &["n"]);
        apply_at(&mut a, 1010, &one(&["PEXPIRE", "n", "100000"]));
        assert_eq!(apply_at(&mut a, 1011, &exec(seen)), Reply::NilArray);
    }

    #[test]
    fn watched_key_expiring_before_exec_aborts_on_every_replica() {
        let (mut a, mut b) = (Store::new(1), Store::new(1));
        for st in [&mut a, &mut b] {
            apply_at(st, 1000, &one(&["SET", "n", "5", "PX", "100"]));
        }
        // Watched while alive; the EXEC entry is stamped after the expiry.
        let seen = digests(&a, 1050, &["n"]);
        for st in [&mut a, &mut b] {
            assert_eq!(apply_at(st, 1200, &exec(seen.clone())), Reply::NilArray);
        }
        // A key already expired when watched stays "missing": no abort.
        let seen = digests(&a, 1300, &["n"]);
        assert_eq!(seen[0].1, 0);
        for st in [&mut a, &mut b] {
            assert_eq!(
                apply_at(st, 1400, &exec(seen.clone())),
                Reply::Array(vec![Reply::Int(1), Reply::bulk_str("1")])
            );
        }
        assert_eq!(crate::snapshot::digest(&a), crate::snapshot::digest(&b));
    }

    #[test]
    fn writes_are_reported_and_blocking_pops_block_outside_multi_only() {
        let mut st = Store::new(1);
        let mut written = Vec::new();
        let ctx = Ctx { now_ms: 1, seed: 1 };
        let cmd = ShardCmd::Commands {
            db: 0,
            cmds: vec![
                args(&["RPUSH", "l", "a"]),
                args(&["GET", "x"]),
                args(&["SET", "x", "1"]),
            ],
            multi: true,
        };
        apply(&mut st, &cmd, &ctx, |db, w| match w {
            Written::Command(spec, a) => written.push((db, spec.name, a.to_vec())),
            Written::Removed(keys) => written.push((db, "expired", keys.to_vec())),
            Written::Events(_) => {}
        });
        let names: Vec<_> = written.iter().map(|w| w.1).collect();
        assert_eq!(names, ["rpush", "set"]);
        // Expiry deletions are reported with the keys that really went.
        apply_at(&mut st, 1, &one(&["SET", "t", "1", "PX", "10"]));
        let expire = |keys: &[&str]| ShardCmd::Expire {
            db: 0,
            keys: args(keys),
        };
        let mut gone = Vec::new();
        let late = Ctx {
            now_ms: 100,
            seed: 1,
        };
        apply(&mut st, &expire(&["t"]), &late, |_, w| {
            if let Written::Removed(k) = w {
                gone.extend_from_slice(k)
            }
        });
        assert_eq!(gone, args(&["t"]));
        gone.clear();
        apply(&mut st, &expire(&["x"]), &late, |_, w| {
            if let Written::Removed(k) = w {
                gone.extend_from_slice(k)
            }
        });
        assert!(gone.is_empty(), "x has no TTL: nothing expired");
        let blpop = |multi| ShardCmd::Commands {
            db: 0,
            cmds: vec![args(&["BLPOP", "empty", "0"])],
            multi,
        };
        assert!(matches!(
            apply(&mut st, &blpop(false), &ctx, |_, _| {}),
            Applied::Block(_)
        ));
        assert_eq!(
            apply(&mut st, &blpop(true), &ctx, |_, _| {}),
            Applied::Reply(Reply::Array(vec![Reply::NilArray]))
        );
        // A database the store does not have is refused, never indexed.
        let far = ShardCmd::Commands {
            db: 99,
            cmds: vec![args(&["SET", "k", "v"])],
            multi: false,
        };
        assert!(matches!(
            apply(&mut st, &far, &ctx, |_, _| {}),
            Applied::Reply(Reply::Error(_))
        ));
        assert!(matches!(read(&st, &far, 1), Reply::Error(_)));
    }

    #[test]
    fn commands_round_trip_and_damage_is_refused() {
        let cmds = [
            ShardCmd::Commands {
                db: 0,
                cmds: vec![args(&["SET", "k", "v"])],
                multi: true,
            },
            ShardCmd::Expire {
                db: 0,
                keys: args(&["a", "b"]),
            },
            ShardCmd::Evict {
                db: 2,
                keys: args(&["c"]),
            },
            ShardCmd::WatchedExec {
                db: 3,
                cmds: vec![args(&["INCR", "k"])],
                watched: vec![(Bytes::from("k"), u64::MAX), (Bytes::from("j"), 0)],
            },
            ShardCmd::WatchDigests {
                db: 1,
                keys: vec![Bytes::from("k"), Bytes::new()],
            },
            ShardCmd::AsUser {
                rules: args(&["~a*", "-@all", "+get"]),
                cmd: Box::new(ShardCmd::Commands {
                    db: 0,
                    cmds: vec![args(&["EVAL", "return 1", "0"])],
                    multi: false,
                }),
            },
        ];
        for c in &cmds {
            let mut b = Vec::new();
            encode(c, &mut b);
            assert_eq!(decode(&b).as_ref(), Some(c));
            for cut in 0..b.len() {
                assert!(decode(&b[..cut]).is_none());
            }
            let mut long = b.clone();
            long.push(0);
            assert!(decode(&long).is_none());
        }
        assert!(decode(&[TAG_RESERVED_META]).is_none());
        // A wrapped command is never itself wrapped.
        let nested = ShardCmd::AsUser {
            rules: Vec::new(),
            cmd: Box::new(cmds[5].clone()),
        };
        let mut b = Vec::new();
        encode(&nested, &mut b);
        assert!(decode(&b).is_none());
    }

    #[test]
    fn scripts_of_a_restricted_caller_are_checked_on_every_replica() {
        let eval = |script: &str| ShardCmd::AsUser {
            rules: args(&["~a*", "-@all", "+eval", "+get"]),
            cmd: Box::new(ShardCmd::Commands {
                db: 0,
                cmds: vec![args(&["EVAL", script, "0"])],
                multi: false,
            }),
        };
        let mut st = Store::new(1);
        let ctx = Ctx { now_ms: 1, seed: 1 };
        let reply = |st: &mut Store, cmd: &ShardCmd| match apply(st, cmd, &ctx, |_, _| {}) {
            Applied::Reply(r) => r,
            Applied::Block(_) => Reply::Nil,
        };
        assert_eq!(
            reply(&mut st, &eval("return redis.call('get', 'a1')")),
            Reply::Nil
        );
        let refused = reply(&mut st, &eval("return redis.call('set', 'a1', 'v')"));
        assert!(
            matches!(&refused, Reply::Error(e) if e.contains("can't run this command")),
            "{refused:?}"
        );
        let refused = reply(&mut st, &eval("return redis.call('get', 'b1')"));
        assert!(
            matches!(&refused, Reply::Error(e) if e.contains("can't access at least one of the keys")),
            "{refused:?}"
        );
        assert!(st.script_caller.borrow().is_none());
        // Without the wrapper the same script runs unchecked.
        let plain = ShardCmd::Commands {
            db: 0,
            cmds: vec![args(&["EVAL", "return redis.call('set', 'a1', 'v')", "0"])],
            multi: false,
        };
        assert_eq!(reply(&mut st, &plain), Reply::ok());
    }
}
