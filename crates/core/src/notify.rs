//! Keyspace notifications (Redis's `notify-keyspace-events`): the event
//! classes, the setting's text form, and the events of a write.
//!
//! Events are produced where the change is made: store helpers emit
//! "expired" (lazy and active expiry), and every write that succeeded
//! adds the events its table entry describes ([`Events`], next to the
//! command in its family's `COMMANDS`). They collect in the store's buffer
//! ([`Store::events`]) and leave through the apply hook
//! (`Written::Events`); nothing here publishes (no I/O in this crate).
//!
//! When the setting is empty (the default) [`Store::notify`] is 0 and
//! nothing is computed: no key lookups, no strings, no vectors.

use crate::store::{Ctx, Store};
use crate::table::CommandSpec;
use crate::CmdError;
use bytes::Bytes;
use kvasir_resp::Reply;

/// Event classes, as Redis's NOTIFY_* flags.
pub const KEYSPACE: u32 = 1 << 0; // K
pub const KEYEVENT: u32 = 1 << 1; // E
pub const GENERIC: u32 = 1 << 2; // g
pub const STRING: u32 = 1 << 3; // $
pub const LIST: u32 = 1 << 4; // l
pub const SET: u32 = 1 << 5; // s
pub const HASH: u32 = 1 << 6; // h
pub const ZSET: u32 = 1 << 7; // z
pub const EXPIRED: u32 = 1 << 8; // x
pub const EVICTED: u32 = 1 << 9; // e
pub const STREAM: u32 = 1 << 10; // t
pub const KEY_MISS: u32 = 1 << 11; // m
pub const MODULE: u32 = 1 << 13; // d
pub const NEW: u32 = 1 << 14; // n
/// `A`: every class but `m` and `n`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Not a keyspace class: a PUBLISH a script called under Raft. It travels
/// with the entry's events so that the node leading the shard publishes
/// it cluster-wide once, after the entry applied (`key`: the channel,
/// `message`: the message); no `notify-keyspace-events` setting filters it.
pub const SCRIPT_PUBLISH: u32 = 1 << 30;
/// The same for SPUBLISH.
pub const SCRIPT_SPUBLISH: u32 = 1 << 31;

/// Redis's error text for a character that names no class.
pub const INVALID: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// Parses the setting (keyspaceEventsStringToFlags); `None` for an
/// unknown character.
pub fn parse_flags(text: &str) -> Option<u32> {
    let mut flags = 0;
    for c in text.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The canonical text CONFIG GET shows (keyspaceEventsFlagsToString):
/// "KEA" reads back as "AKE".
pub fn format_flags(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (f, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & f != 0 {
                s.push(c);
            }
        }
    }
    for (f, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & f != 0 {
            s.push(c);
        }
    }
    s
}

/// One keyspace event: published on `__keyspace@<db>__:<key>` (message:
/// the name) and `__keyevent@<db>__:<name>` (message: the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub class: u32,
    pub db: usize,
    pub name: &'static str,
    pub key: Bytes,
    /// The message of a [`SCRIPT_PUBLISH`] / [`SCRIPT_SPUBLISH`] event;
    /// empty for keyspace events.
    pub message: Bytes,
}

/// The events of a write command that succeeded, declared in its table
/// entry.
#[derive(Clone, Copy)]
pub enum Events {
    /// The command's own name on every key it names, in its group's
    /// class; "del" after it for a key it emptied.
    Default,
    /// Like `Default` under another name (INCR: "incrby").
    Named(&'static str),
    /// A store command: the name on the destination (the first key) if
    /// it holds a result, else "del" if it existed.
    Dest(&'static str),
    /// Computed by the command's own function.
    Custom(fn(&mut Notes)),
    /// No events (scripts: their calls emit; XACK...).
    None,
}

/// The class of a command group's events.
pub fn group_class(group: &str) -> u32 {
    match group {
        "string" | "bitmap" | "hyperloglog" => STRING,
        "list" => LIST,
        "hash" => HASH,
        "set" => SET,
        "sorted-set" | "geo" => ZSET,
        "stream" => STREAM,
        _ => GENERIC,
    }
}

/// Whether the settings `notify` produce events of `class`.
#[inline]
fn enabled(notify: u32, class: u32) -> bool {
    notify & class != 0 && notify & (KEYSPACE | KEYEVENT) != 0
}

/// [`Store::emit`] on the store's two fields, for code that holds a borrow
/// of the store's keyspace meanwhile.
#[inline]
pub(crate) fn push(
    events: &mut Vec<Event>,
    notify: u32,
    class: u32,
    name: &'static str,
    db: usize,
    key: &[u8],
) {
    if enabled(notify, class) {
        events.push(Event {
            class,
            db,
            name,
            key: Bytes::copy_from_slice(key),
            message: Bytes::new(),
        });
    }
}

impl<K: crate::keyspace::Keyspace> Store<K> {
    /// Whether events of `class` are to be produced at all.
    #[inline]
    pub fn notifying(&self, class: u32) -> bool {
        enabled(self.notify, class)
    }

    /// Buffers an event if its class is enabled.
    #[inline]
    pub fn emit(&mut self, class: u32, name: &'static str, db: usize, key: &[u8]) {
        push(&mut self.events, self.notify, class, name, db, key);
    }

    /// Takes the buffered events.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}

/// Runs a write handler and adds the events of its success (the one way
/// `machine::execute` and scripts run a write).
pub fn write<K: crate::keyspace::Keyspace>(
    store: &mut Store<K>,
    spec: &CommandSpec,
    f: crate::table::WriteFn<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> Result<Reply, CmdError> {
    store.unchanged.set(false);
    if store.notify == 0 || matches!(spec.events, Events::None) {
        return f(store, db, args, ctx);
    }
    let keys = spec.keys_of(args);
    let live = |st: &Store<K>, k: &[u8]| {
        db < st.databases() && st.db(db).get(k).is_some_and(|e| !e.is_expired(ctx.now_ms))
    };
    let before: Vec<bool> = keys.iter().map(|&i| live(store, &args[i])).collect();
    let reply = f(store, db, args, ctx)?;
    if store.changed_nothing(spec, args, &reply) {
        return Ok(reply);
    }
    let after: Vec<bool> = keys.iter().map(|&i| live(store, &args[i])).collect();
    let mut n = Notes {
        db,
        args,
        reply: &reply,
        keys,
        before,
        after,
        class: group_class(spec.group),
        out: Vec::new(),
    };
    match spec.events {
        Events::Default => n.each(spec.name),
        Events::Named(name) => n.each(name),
        Events::Dest(name) => {
            n.new_keys();
            n.store_result(0, name);
        }
        Events::Custom(f) => f(&mut n),
        Events::None => {}
    }
    for e in n.out {
        if store.notifying(e.class) {
            store.events.push(e);
        }
    }
    Ok(reply)
}

/// What a command's event function sees: its arguments and reply, and
/// whether each of its keys was live before and after it ran.
pub struct Notes<'a> {
    pub db: usize,
    pub args: &'a [Bytes],
    pub reply: &'a Reply,
    /// Argument indexes of the keys.
    pub keys: Vec<usize>,
    before: Vec<bool>,
    after: Vec<bool>,
    /// The command group's class.
    pub class: u32,
    out: Vec<Event>,
}

impl Notes<'_> {
    /// An event on argument `i` in this command's database.
    pub fn arg(&mut self, class: u32, name: &'static str, i: usize) {
        if let Some(k) = self.args.get(i) {
            let key = k.clone();
            self.key(class, name, self.db, key);
        }
    }

    pub fn key(&mut self, class: u32, name: &'static str, db: usize, key: Bytes) {
        self.out.push(Event {
            class,
            db,
            name,
            key,
            message: Bytes::new(),
        });
    }

    fn pos(&self, arg: usize) -> Option<usize> {
        self.keys.iter().position(|&i| i == arg)
    }

    /// Whether the key at argument `arg` was live before the command.
    pub fn existed(&self, arg: usize) -> bool {
        self.pos(arg).is_some_and(|p| self.before[p])
    }

    /// Whether the key at argument `arg` is live after the command.
    pub fn exists(&self, arg: usize) -> bool {
        self.pos(arg).is_some_and(|p| self.after[p])
    }

    /// The argument index of a key named in the reply (BLPOP's key).
    pub fn arg_of(&self, key: &[u8]) -> Option<usize> {
        self.keys
            .iter()
            .copied()
            .find(|&i| self.args[i].as_ref() == key)
    }

    /// "new" for every key the command created.
    pub fn new_keys(&mut self) {
        for p in 0..self.keys.len() {
            if !self.before[p] && self.after[p] {
                self.arg(NEW, "new", self.keys[p]);
            }
        }
    }

    /// "new" for argument `arg` if the command created it.
    pub fn new_key(&mut self, arg: usize) {
        if !self.existed(arg) && self.exists(arg) {
            self.arg(NEW, "new", arg);
        }
    }

    /// "del" for argument `arg` if the command emptied it.
    pub fn del_if_emptied(&mut self, arg: usize) {
        if self.existed(arg) && !self.exists(arg) {
            self.arg(GENERIC, "del", arg);
        }
    }

    /// `name` in the group's class on every key (new keys announced
    /// first), "del" after it for emptied ones.
    pub fn each(&mut self, name: &'static str) {
        self.new_keys();
        for i in self.keys.clone() {
            self.arg(self.class, name, i);
            self.del_if_emptied(i);
        }
    }

    /// A one-key command: `name` on its key, then "del" if emptied.
    pub fn popped(&mut self, name: &'static str, arg: usize) {
        self.arg(self.class, name, arg);
        self.del_if_emptied(arg);
    }

    /// A store command's destination (the `nth` key): `name` if it holds
    /// a result, "del" if it existed and now does not.
    pub fn store_result(&mut self, nth: usize, name: &'static str) {
        let Some(&i) = self.keys.get(nth) else { return };
        if self.exists(i) {
            self.arg(self.class, name, i);
        } else {
            self.del_if_emptied(i);
        }
    }

    /// Whether an argument after the first `from` equals `word`
    /// (case-insensitive): an option of the command.
    pub fn has_option(&self, from: usize, word: &str) -> bool {
        self.args
            .iter()
            .skip(from)
            .any(|a| a.eq_ignore_ascii_case(word.as_bytes()))
    }

    /// The first key of the reply array (BLPOP, LMPOP, BZPOPMIN...).
    pub fn reply_key(&self) -> Option<Bytes> {
        match self.reply {
            Reply::Array(items) => match items.first() {
                Some(Reply::Bulk(k)) => Some(k.clone()),
                _ => None,
            },
            _ => None,
        }
    }
}

// The event functions of commands whose events are not their name on
// each key; each is named in its command's table entry.

/// DEL, UNLINK, GETDEL: "del" for every key that went.
pub fn del(n: &mut Notes) {
    for i in n.keys.clone() {
        n.del_if_emptied(i);
    }
}

/// RENAME, RENAMENX: the destination is added anew, then "rename_from"
/// on the source and "rename_to" on the destination.
pub fn rename(n: &mut Notes) {
    if n.args[1] == n.args[2] {
        return;
    }
    n.arg(NEW, "new", 2);
    n.arg(GENERIC, "rename_from", 1);
    n.arg(GENERIC, "rename_to", 2);
}

fn db_option(n: &Notes, after: usize) -> Option<usize> {
    let i = n
        .args
        .iter()
        .skip(after)
        .position(|a| a.eq_ignore_ascii_case(b"db"))?;
    std::str::from_utf8(n.args.get(after + i + 1)?)
        .ok()?
        .parse()
        .ok()
}

/// COPY: "copy_to" on the destination (in the DB option's database).
pub fn copy(n: &mut Notes) {
    let db = db_option(n, 3).unwrap_or(n.db);
    let key = n.args[2].clone();
    n.key(NEW, "new", db, key.clone());
    n.key(GENERIC, "copy_to", db, key);
}

/// MOVE: "move_from" here, "move_to" in the target database.
pub fn move_key(n: &mut Notes) {
    let Some(to) = std::str::from_utf8(&n.args[2])
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
    else {
        return;
    };
    let key = n.args[1].clone();
    n.key(NEW, "new", to, key.clone());
    n.key(GENERIC, "move_from", n.db, key.clone());
    n.key(GENERIC, "move_to", to, key);
}

/// EXPIRE and friends: "expire", or "del" when the time was past.
pub fn expire(n: &mut Notes) {
    if n.exists(1) {
        n.arg(GENERIC, "expire", 1);
    } else {
        n.del_if_emptied(1);
    }
}

/// RESTORE: the key is added anew, then "restore".
pub fn restore(n: &mut Notes) {
    n.arg(NEW, "new", 1);
    n.arg(GENERIC, "restore", 1);
}

/// SET: "set", then "expire" with EX/PX/EXAT/PXAT; nothing when NX or XX
/// kept it from setting.
pub fn set(n: &mut Notes) {
    let get = n.has_option(3, "get");
    if !get && matches!(n.reply, Reply::Nil) {
        return;
    }
    if get && (n.has_option(3, "nx") || n.has_option(3, "xx")) && !n.exists(1) {
        return;
    }
    n.new_keys();
    n.arg(STRING, "set", 1);
    if ["ex", "px", "exat", "pxat"]
        .iter()
        .any(|o| n.has_option(3, o))
    {
        n.arg(GENERIC, "expire", 1);
    }
}

/// SETEX, PSETEX: "set" then "expire".
pub fn setex(n: &mut Notes) {
    n.new_keys();
    n.arg(STRING, "set", 1);
    n.arg(GENERIC, "expire", 1);
}

/// GETEX: "persist" with PERSIST, "expire" with a time, else nothing.
pub fn getex(n: &mut Notes) {
    if !n.existed(1) {
        return;
    }
    if n.has_option(2, "persist") {
        n.arg(GENERIC, "persist", 1);
    } else if ["ex", "px", "exat", "pxat"]
        .iter()
        .any(|o| n.has_option(2, o))
    {
        if n.exists(1) {
            n.arg(GENERIC, "expire", 1);
        } else {
            n.del_if_emptied(1);
        }
    }
}

fn list_move(n: &mut Notes, from_left: bool, to_left: bool) {
    n.new_key(2);
    n.arg(LIST, if to_left { "lpush" } else { "rpush" }, 2);
    n.arg(LIST, if from_left { "lpop" } else { "rpop" }, 1);
    n.del_if_emptied(1);
}

fn is_left(a: Option<&Bytes>) -> bool {
    a.is_some_and(|a| a.eq_ignore_ascii_case(b"left"))
}

/// LMOVE, BLMOVE: a pop from the source, a push to the destination.
pub fn lmove(n: &mut Notes) {
    let (from, to) = (is_left(n.args.get(3)), is_left(n.args.get(4)));
    list_move(n, from, to);
}

/// RPOPLPUSH, BRPOPLPUSH.
pub fn rpoplpush(n: &mut Notes) {
    list_move(n, false, true);
}

fn pop_reply_key(n: &mut Notes, name: &'static str) {
    if let Some(i) = n.reply_key().and_then(|k| n.arg_of(&k)) {
        n.popped(name, i);
    }
}

/// BLPOP: "lpop" on the key popped from.
pub fn blpop(n: &mut Notes) {
    pop_reply_key(n, "lpop");
}

/// BRPOP.
pub fn brpop(n: &mut Notes) {
    pop_reply_key(n, "rpop");
}

/// LMPOP, BLMPOP: "lpop" or "rpop" on the key popped from.
pub fn lmpop(n: &mut Notes) {
    let name = if n.has_option(2, "left") {
        "lpop"
    } else {
        "rpop"
    };
    pop_reply_key(n, name);
}

/// BZPOPMIN.
pub fn bzpopmin(n: &mut Notes) {
    pop_reply_key(n, "zpopmin");
}

/// BZPOPMAX.
pub fn bzpopmax(n: &mut Notes) {
    pop_reply_key(n, "zpopmax");
}

/// ZMPOP, BZMPOP: "zpopmin" or "zpopmax".
pub fn zmpop(n: &mut Notes) {
    let name = if n.has_option(2, "min") {
        "zpopmin"
    } else {
        "zpopmax"
    };
    pop_reply_key(n, name);
}

/// ZADD: "zadd", or "zincr" with INCR.
pub fn zadd(n: &mut Notes) {
    if matches!(n.reply, Reply::Nil) {
        return;
    }
    n.new_keys();
    let name = if n.has_option(2, "incr") {
        "zincr"
    } else {
        "zadd"
    };
    n.arg(ZSET, name, 1);
}

fn optional_store(n: &mut Notes, class: u32, name: &'static str) {
    if let Some(&i) = n.keys.get(1) {
        n.new_key(i);
        n.class = class;
        n.store_result(1, name);
    }
}

/// SORT ... STORE: "sortstore" (class l) (or "del" for an empty result).
pub fn sortstore(n: &mut Notes) {
    optional_store(n, LIST, "sortstore");
}

/// GEORADIUS[BYMEMBER] ... STORE.
pub fn georadiusstore(n: &mut Notes) {
    optional_store(n, ZSET, "georadiusstore");
}

/// BITFIELD: "setbit" when it has SET or INCRBY operations.
pub fn bitfield(n: &mut Notes) {
    if n.has_option(2, "set") || n.has_option(2, "incrby") {
        n.new_keys();
        n.arg(STRING, "setbit", 1);
    }
}

/// PFADD: "pfadd" when a register changed (or the key was created).
pub fn pfadd(n: &mut Notes) {
    if matches!(n.reply, Reply::Int(1)) {
        n.new_keys();
        n.arg(STRING, "pfadd", 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_back_in_redis_canonical_form() {
        let f = |s: &str| format_flags(parse_flags(s).expect("valid"));
        assert_eq!(f("KEA"), "AKE");
        assert_eq!(f("Anm"), "Am");
        assert_eq!(f("nmKE"), "nKEm");
        assert_eq!(f("gx$"), "g$x");
        assert_eq!(f("Kg"), "gK");
        assert_eq!(f("gl$shzxetd"), "A");
        assert_eq!(f(""), "");
        assert_eq!(parse_flags("Z"), None);
    }
}
