//! Client-side caching (CLIENT TRACKING), after Redis's src/tracking.c.
//!
//! Two ways for a connection to hear that a key it may have cached changed:
//! - default mode: the keys it read with read-only commands are remembered
//!   (the key table, key -> reader ids); the first write to one sends each
//!   reader one invalidation and forgets the key, until it is read again.
//!   OPTIN/OPTOUT narrow which reads count (CLIENT CACHING).
//! - BCAST: the connection names key prefixes; every written key matching
//!   one is collected for the prefix and sent to its subscribers in one
//!   message per prefix once the current work is done (Redis does it in
//!   beforeSleep), so a burst of writes becomes one array of keys.
//!
//! Invalidations reach a RESP3 connection as `>2 invalidate [keys]` pushes;
//! with REDIRECT they go to another connection, which in RESP2 receives
//! them as pub/sub messages on `__redis__:invalidate` (if it subscribes to
//! anything, as Redis checks). FLUSHDB/FLUSHALL send a null key list to
//! every tracking connection.
//!
//! The tables are node-local: written keys arrive from the write hooks of
//! the standalone store and of every shard replica this node applies
//! (`events`, `cluster::sm`), as WATCH's do. Like Redis, the key table
//! ignores the database number, and a connection that stops tracking
//! leaves its ids behind until the keys are written or evicted.

use crate::clients::{ClientInfo, Clients};
use bytes::Bytes;
use kvasir_core::table::Flags;
use kvasir_core::{CmdError, CommandSpec};
use kvasir_resp::{Protocol, Reply};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

/// The channel RESP2 redirect targets receive invalidations on.
pub const CHANNEL: &str = "__redis__:invalidate";

/// The registry, shared by the server and the cluster's write hooks.
pub type SharedTracking = Rc<RefCell<Tracking>>;

/// One connection's CLIENT TRACKING state (its flags in Redis).
#[derive(Default, Clone, Debug)]
pub struct ClientTracking {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    /// CLIENT CACHING YES (OPTIN) or NO (OPTOUT) applies to the next
    /// command (or the whole next transaction).
    pub caching: bool,
    pub noloop: bool,
    /// The redirect target was gone when an invalidation was due.
    pub broken_redirect: bool,
    /// Client id invalidations go to; 0 for none.
    pub redirect: u64,
    pub prefixes: BTreeSet<Bytes>,
}

impl ClientTracking {
    /// Whether a read now should be remembered (default mode, and
    /// OPTIN/OPTOUT as CLIENT CACHING said).
    fn remembers_reads(&self) -> bool {
        let opted_out = if self.optin {
            !self.caching
        } else {
            self.optout && self.caching
        };
        self.on && !self.bcast && !opted_out
    }

    /// CLIENT TRACKINGINFO's flags, in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.on { "on" } else { "off" }];
        if self.bcast {
            flags.push("bcast");
        }
        if self.optin {
            flags.push("optin");
            if self.caching {
                flags.push("caching-yes");
            }
        }
        if self.optout {
            flags.push("optout");
            if self.caching {
                flags.push("caching-no");
            }
        }
        if self.noloop {
            flags.push("noloop");
        }
        if self.broken_redirect {
            flags.push("broken_redirect");
        }
        flags
    }

    /// CLIENT GETREDIR and the `redirect` of TRACKINGINFO: -1 when off.
    pub fn redirect_reply(&self) -> i64 {
        if self.on {
            self.redirect as i64
        } else {
            -1
        }
    }
}

/// Why CLIENT TRACKING or CLIENT CACHING was refused; rendered as Redis's
/// error strings by [`TrackingError::to_cmd_error`].
#[derive(Debug, PartialEq, Eq)]
pub enum TrackingError {
    Syntax,
    NotAnInteger,
    NoSuchRedirect,
    SecondRedirect,
    PrefixWithoutBcast,
    SwitchBcast,
    OptWithBcast,
    OptinAndOptout,
    SwitchOpt,
    OverlapsExisting(Bytes, Bytes),
    OverlapsProvided(Bytes, Bytes),
    CachingWithoutOpt,
    CachingYesWithoutOptin,
    CachingNoWithoutOptout,
}

impl TrackingError {
    pub fn to_cmd_error(&self) -> CmdError {
        let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
        match self {
            TrackingError::Syntax => CmdError::Syntax,
            TrackingError::NotAnInteger => CmdError::NotInteger,
            TrackingError::NoSuchRedirect => {
                CmdError::other("ERR The client ID you want redirect to does not exist")
            }
            TrackingError::SecondRedirect => {
                CmdError::other("ERR A client can only redirect to a single other client")
            }
            TrackingError::PrefixWithoutBcast => {
                CmdError::other("ERR PREFIX option requires BCAST mode to be enabled")
            }
            TrackingError::SwitchBcast => CmdError::other("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."),
            TrackingError::OptWithBcast => {
                CmdError::other("ERR OPTIN and OPTOUT are not compatible with BCAST")
            }
            TrackingError::OptinAndOptout => {
                CmdError::other("ERR You can't specify both OPTIN mode and OPTOUT mode")
            }
            TrackingError::SwitchOpt => CmdError::other("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."),
            TrackingError::OverlapsExisting(new, old) => CmdError::other(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                text(new),
                text(old)
            )),
            TrackingError::OverlapsProvided(a, b) => CmdError::other(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                text(a),
                text(b)
            )),
            TrackingError::CachingWithoutOpt => CmdError::other("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"),
            TrackingError::CachingYesWithoutOptin => CmdError::other(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ),
            TrackingError::CachingNoWithoutOptout => CmdError::other(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ),
        }
    }
}

/// The arguments of `CLIENT TRACKING ON|OFF [options]`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TrackingRequest {
    pub on: bool,
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Bytes>,
}

fn eq_ic(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// Parses `ON|OFF [options]` (`args` after the subcommand) in Redis's
/// order: options first (a redirect target must exist now), then ON/OFF.
pub fn parse_request(
    args: &[Bytes],
    exists: impl Fn(u64) -> bool,
) -> Result<TrackingRequest, TrackingError> {
    let Some((mode, opts)) = args.split_first() else {
        return Err(TrackingError::Syntax);
    };
    let mut req = TrackingRequest::default();
    let mut i = 0;
    while i < opts.len() {
        let more = i + 1 < opts.len();
        let o = &opts[i];
        if eq_ic(o, "redirect") && more {
            i += 1;
            if req.redirect != 0 {
                return Err(TrackingError::SecondRedirect);
            }
            let id = std::str::from_utf8(&opts[i])
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
                .ok_or(TrackingError::NotAnInteger)?;
            if id <= 0 || !exists(id as u64) {
                return Err(TrackingError::NoSuchRedirect);
            }
            req.redirect = id as u64;
        } else if eq_ic(o, "bcast") {
            req.bcast = true;
        } else if eq_ic(o, "optin") {
            req.optin = true;
        } else if eq_ic(o, "optout") {
            req.optout = true;
        } else if eq_ic(o, "noloop") {
            req.noloop = true;
        } else if eq_ic(o, "prefix") && more {
            i += 1;
            req.prefixes.push(opts[i].clone());
        } else {
            return Err(TrackingError::Syntax);
        }
        i += 1;
    }
    req.on = if eq_ic(mode, "on") {
        true
    } else if eq_ic(mode, "off") {
        false
    } else {
        return Err(TrackingError::Syntax);
    };
    Ok(req)
}

/// Either is a prefix of the other (Redis's stringCheckPrefix).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Checks an ON request against itself and the connection's state, with
/// Redis's errors in Redis's order.
pub fn check_enable(state: &ClientTracking, req: &TrackingRequest) -> Result<(), TrackingError> {
    if !req.bcast && !req.prefixes.is_empty() {
        return Err(TrackingError::PrefixWithoutBcast);
    }
    if state.on && state.bcast != req.bcast {
        return Err(TrackingError::SwitchBcast);
    }
    if req.bcast && (req.optin || req.optout) {
        return Err(TrackingError::OptWithBcast);
    }
    if req.optin && req.optout {
        return Err(TrackingError::OptinAndOptout);
    }
    if (req.optin && state.optout) || (req.optout && state.optin) {
        return Err(TrackingError::SwitchOpt);
    }
    if req.bcast {
        for (i, p) in req.prefixes.iter().enumerate() {
            if let Some(old) = state.prefixes.iter().find(|old| overlap(old, p)) {
                return Err(TrackingError::OverlapsExisting(p.clone(), old.clone()));
            }
            if let Some(other) = req.prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                return Err(TrackingError::OverlapsProvided(p.clone(), other.clone()));
            }
        }
    }
    Ok(())
}

/// CLIENT CACHING YES|NO.
pub fn caching(state: &mut ClientTracking, arg: &[u8]) -> Result<(), TrackingError> {
    if !state.on {
        return Err(TrackingError::CachingWithoutOpt);
    }
    if eq_ic(arg, "yes") {
        if !state.optin {
            return Err(TrackingError::CachingYesWithoutOptin);
        }
    } else if eq_ic(arg, "no") {
        if !state.optout {
            return Err(TrackingError::CachingNoWithoutOptout);
        }
    } else {
        return Err(TrackingError::Syntax);
    }
    state.caching = true;
    Ok(())
}

/// A default-mode key: who may cache it, and when it was first read
/// (eviction order under `tracking-table-max-keys`).
struct TrackedKey {
    seq: u64,
    /// Ascending client ids: a sorted vector (most keys have one or two
    /// readers; a B-tree set cost ~100 bytes per key more).
    readers: Vec<u64>,
}

/// A BCAST prefix: its subscribers and the keys written since the last
/// broadcast, with the client that last wrote each (for NOLOOP).
#[derive(Default)]
struct Prefix {
    clients: BTreeSet<u64>,
    pending: BTreeMap<Bytes, u64>,
}

/// What an invalidation carries.
enum Payload {
    Keys(Vec<Bytes>),
    /// FLUSHDB / FLUSHALL: everything.
    Null,
}

/// The node's tracking tables.
pub struct Tracking {
    clients: Rc<RefCell<Clients>>,
    keys: HashMap<Bytes, TrackedKey>,
    by_age: BTreeMap<u64, Bytes>,
    next_seq: u64,
    /// (key, reader) pairs: INFO's tracking_total_items.
    items: usize,
    prefixes: BTreeMap<Bytes, Prefix>,
    /// Connections with tracking on.
    tracking: BTreeSet<u64>,
    /// The connection whose command runs now (NOLOOP); 0 for none, as for
    /// writes the node issues itself (expiry) or applies from Raft.
    pub current: Cell<u64>,
    /// `tracking-table-max-keys`; 0 for no limit.
    pub max_keys: usize,
    /// A broadcast task is scheduled.
    bcast_scheduled: bool,
}

impl Tracking {
    pub fn new(clients: Rc<RefCell<Clients>>) -> Tracking {
        Tracking {
            clients,
            keys: HashMap::new(),
            by_age: BTreeMap::new(),
            next_seq: 0,
            items: 0,
            prefixes: BTreeMap::new(),
            tracking: BTreeSet::new(),
            current: Cell::new(0),
            max_keys: 1_000_000,
            bcast_scheduled: false,
        }
    }

    /// Nothing tracked and nobody tracking: writes need no work here.
    pub fn is_idle(&self) -> bool {
        self.tracking.is_empty() && self.keys.is_empty()
    }

    /// INFO clients' tracking_clients.
    pub fn clients_count(&self) -> usize {
        self.tracking.len()
    }

    /// INFO stats: (tracking_total_keys, tracking_total_items,
    /// tracking_total_prefixes).
    pub fn totals(&self) -> (usize, usize, usize) {
        (self.keys.len(), self.items, self.prefixes.len())
    }

    /// CLIENT TRACKING ON with a checked request.
    pub fn enable(&mut self, info: &ClientInfo, req: TrackingRequest) {
        let mut st = info.tracking.borrow_mut();
        self.tracking.insert(info.id);
        st.on = true;
        st.broken_redirect = false;
        st.redirect = req.redirect;
        st.bcast = req.bcast;
        st.optin = req.optin;
        st.optout = req.optout;
        st.noloop = req.noloop;
        if req.bcast {
            let prefixes = if req.prefixes.is_empty() {
                vec![Bytes::new()]
            } else {
                req.prefixes
            };
            for p in prefixes {
                self.prefixes
                    .entry(p.clone())
                    .or_default()
                    .clients
                    .insert(info.id);
                st.prefixes.insert(p);
            }
        }
    }

    /// CLIENT TRACKING OFF, RESET, disconnect.
    pub fn disable(&mut self, info: &ClientInfo) {
        let mut st = info.tracking.borrow_mut();
        for p in std::mem::take(&mut st.prefixes) {
            if let Some(prefix) = self.prefixes.get_mut(&p) {
                prefix.clients.remove(&info.id);
                if prefix.clients.is_empty() {
                    self.prefixes.remove(&p);
                }
            }
        }
        self.tracking.remove(&info.id);
        if self.tracking.is_empty() {
            // Nobody left to tell: drop what the last ones read, so that
            // writes cost nothing here again.
            self.keys.clear();
            self.by_age.clear();
            self.items = 0;
        }
        // The redirect id stays, as in Redis (GETREDIR says -1 while off).
        let redirect = st.redirect;
        *st = ClientTracking {
            redirect,
            ..ClientTracking::default()
        };
    }

    /// Remembers the keys a read-only command of `info` read, if its mode
    /// says so; evicts (and invalidates) the oldest keys over the limit.
    pub fn remember(&mut self, info: &ClientInfo, keys: &[Bytes]) {
        if keys.is_empty() || !info.tracking.borrow().remembers_reads() {
            return;
        }
        for k in keys {
            let entry = self.keys.entry(k.clone()).or_insert_with(|| {
                self.next_seq += 1;
                self.by_age.insert(self.next_seq, k.clone());
                TrackedKey {
                    seq: self.next_seq,
                    readers: Vec::new(),
                }
            });
            if let Err(at) = entry.readers.binary_search(&info.id) {
                entry.readers.insert(at, info.id);
                self.items += 1;
            }
        }
        self.trim();
    }

    /// Forgets the oldest keys over `tracking-table-max-keys`, as Redis's
    /// trackingLimitUsedSlots: readers are told, so that no cached copy
    /// outlives its entry here. After a read, and when CONFIG SET lowers
    /// the limit.
    pub fn trim(&mut self) {
        while self.max_keys > 0 && self.keys.len() > self.max_keys {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.invalidate_key(&oldest, false);
        }
    }

    /// A key was written or expired (`written`), or evicted from the table:
    /// default-mode readers hear of it once; a written key is also
    /// collected by the BCAST prefixes it matches, and NOLOOP readers do
    /// not hear of their own writes.
    fn invalidate_key(&mut self, key: &Bytes, written: bool) {
        let writer = self.current.get();
        if written && !self.prefixes.is_empty() {
            let mut any = false;
            for (p, prefix) in self.prefixes.iter_mut() {
                if key.starts_with(p) {
                    prefix.pending.insert(key.clone(), writer);
                    any = true;
                }
            }
            self.bcast_scheduled |= any;
        }
        let Some(tracked) = self.keys.remove(key) else {
            return;
        };
        self.by_age.remove(&tracked.seq);
        self.items -= tracked.readers.len();
        for id in tracked.readers {
            if written && id == writer && self.noloop(id) {
                continue;
            }
            self.send(id, Payload::Keys(vec![key.clone()]), true);
        }
    }

    fn noloop(&self, id: u64) -> bool {
        self.clients
            .borrow()
            .get(id)
            .is_some_and(|c| c.tracking.borrow().noloop)
    }

    /// Written keys (standalone write, applied shard entry, expiry).
    /// Returns whether a broadcast is now due ([`schedule_broadcast`]).
    pub fn invalidate(&mut self, keys: &[Bytes]) -> bool {
        for k in keys {
            self.invalidate_key(k, true);
        }
        self.bcast_scheduled
    }

    /// FLUSHDB / FLUSHALL: every tracking connection hears a null
    /// invalidation (its own flush too: NOLOOP does not apply, as in
    /// Redis), and the key table is emptied.
    pub fn flush(&mut self) {
        for id in self.tracking.clone() {
            self.send(id, Payload::Null, false);
        }
        self.keys.clear();
        self.by_age.clear();
        self.items = 0;
    }

    /// Sends what BCAST prefixes collected: one message per prefix and
    /// subscriber, without the subscriber's own writes under NOLOOP.
    pub fn broadcast(&mut self) {
        self.bcast_scheduled = false;
        let mut messages = Vec::new();
        for prefix in self.prefixes.values_mut() {
            if prefix.pending.is_empty() {
                continue;
            }
            let pending = std::mem::take(&mut prefix.pending);
            for &id in &prefix.clients {
                messages.push((id, pending.clone()));
            }
        }
        for (id, pending) in messages {
            let noloop = self.noloop(id);
            let keys: Vec<Bytes> = pending
                .into_iter()
                .filter(|(_, writer)| !(noloop && *writer == id))
                .map(|(k, _)| k)
                .collect();
            if !keys.is_empty() {
                self.send(id, Payload::Keys(keys), false);
            }
        }
    }

    /// Delivers one invalidation for tracking connection `id`, to itself
    /// or its redirect target (Redis's sendTrackingMessage). `default_mode`
    /// skips connections that stopped tracking or switched to BCAST.
    fn send(&self, id: u64, payload: Payload, default_mode: bool) {
        let clients = self.clients.borrow();
        let Some(client) = clients.get(id) else {
            return;
        };
        let mut st = client.tracking.borrow_mut();
        if !st.on || (default_mode && st.bcast) {
            return;
        }
        let value = match payload {
            Payload::Keys(keys) => Reply::Array(keys.into_iter().map(Reply::Bulk).collect()),
            Payload::Null => Reply::Nil,
        };
        let target = match st.redirect {
            0 => client,
            r => match clients.get(r) {
                Some(t) => t,
                None => {
                    st.broken_redirect = true;
                    if client.resp.get() == Protocol::Resp3 {
                        client.push(Reply::Push(vec![
                            Reply::bulk_str("tracking-redir-broken"),
                            Reply::Int(r as i64),
                        ]));
                    }
                    return;
                }
            },
        };
        if target.resp.get() == Protocol::Resp3 {
            target.push(Reply::Push(vec![Reply::bulk_str("invalidate"), value]));
        } else if st.redirect != 0 && target.subscribed() {
            target.push(Reply::Push(vec![
                Reply::bulk_str("message"),
                Reply::bulk_str(CHANNEL),
                value,
            ]));
        }
        // A RESP2 connection without a redirect cannot be told anything.
    }
}

/// Remembers the keys a read-only command of a tracking session reads
/// (before it runs: a write racing it can only cause an extra
/// invalidation, never a missed one). Keys of shard-channel commands are
/// channels, not keys, as Redis notes.
pub fn remember_read(s: &crate::session::Session, spec: &CommandSpec, args: &[Bytes]) {
    // Standalone, a script's keys are tracked after it ran, if it read
    // (`router::submit_local`), EVAL_RO's too, as Redis does; in cluster
    // mode EVAL_RO's keys are tracked before it runs (an invalidation too
    // many at worst).
    if !spec.flags.contains(Flags::READONLY)
        || spec.flags.contains(Flags::PUBSUB)
        || (spec.group == "scripting" && s.server.cluster.is_none())
        || !s.info.tracking.borrow().on
    {
        return;
    }
    remember_keys_of(s, spec, args);
}

/// Remembers the key arguments of `spec` in `args` as read by the session
/// (a read-only command, or a script at its last read).
pub fn remember_keys_of(s: &crate::session::Session, spec: &CommandSpec, args: &[Bytes]) {
    let keys: Vec<Bytes> = spec
        .keys_of(args)
        .into_iter()
        .filter_map(|i| args.get(i).cloned())
        .collect();
    s.server.tracking.borrow_mut().remember(&s.info, &keys);
}

/// Runs the pending broadcast once the current work yields (Redis sends
/// it in beforeSleep), so the writes of one batch go out together.
pub fn schedule_broadcast(tracking: &SharedTracking) {
    let tracking = tracking.clone();
    tokio::task::spawn_local(async move {
        tracking.borrow_mut().broadcast();
    });
}

/// The write hook: keys written in a database, or the whole keyspace for a
/// flush. Cheap when nobody tracks.
pub fn written(tracking: &SharedTracking, keys: Written<'_>) {
    let mut t = tracking.borrow_mut();
    if t.is_idle() {
        return;
    }
    let was_scheduled = t.bcast_scheduled;
    match keys {
        Written::Keys(keys) => {
            if t.invalidate(keys) && !was_scheduled {
                drop(t);
                schedule_broadcast(tracking);
            }
        }
        Written::Flush => t.flush(),
    }
}

/// What a write changed, for [`written`].
pub enum Written<'a> {
    Keys(&'a [Bytes]),
    Flush,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::ClientAddr;
    use std::net::SocketAddr;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    struct Fixture {
        clients: Rc<RefCell<Clients>>,
        tracking: Tracking,
    }

    fn fixture() -> Fixture {
        let clients = Rc::new(RefCell::new(Clients::default()));
        Fixture {
            tracking: Tracking::new(clients.clone()),
            clients,
        }
    }

    fn connect(f: &Fixture, proto: Protocol) -> Rc<ClientInfo> {
        let addr: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let info = f
            .clients
            .borrow_mut()
            .register(ClientAddr::Tcp(addr), ClientAddr::Tcp(addr), 0);
        info.resp.set(proto);
        info
    }

    fn on(args: &[&str]) -> TrackingRequest {
        let mut all = vec![b("on")];
        all.extend(args.iter().map(|a| b(a)));
        parse_request(&all, |_| true).expect("valid request")
    }

    /// What was queued for the client since the last look.
    fn invalidated(client: &ClientInfo) -> Vec<Reply> {
        std::iter::from_fn(|| client.next_push()).collect()
    }

    fn push(keys: &[&str]) -> Reply {
        Reply::Push(vec![
            Reply::bulk_str("invalidate"),
            Reply::Array(keys.iter().map(|k| Reply::Bulk(b(k))).collect()),
        ])
    }

    #[test]
    fn a_read_key_is_invalidated_once_then_forgotten() {
        let mut f = fixture();
        let c = connect(&f, Protocol::Resp3);
        f.tracking.enable(&c, on(&[]));
        f.tracking.remember(&c, &[b("k")]);
        f.tracking.invalidate(&[b("k"), b("other")]);
        assert_eq!(invalidated(&c), vec![push(&["k"])]);
        f.tracking.invalidate(&[b("k")]);
        assert!(invalidated(&c).is_empty());
        assert_eq!(f.tracking.totals(), (0, 0, 0));
    }

    #[test]
    fn the_last_tracking_client_leaving_empties_the_key_table() {
        let mut f = fixture();
        let c = connect(&f, Protocol::Resp3);
        f.tracking.enable(&c, on(&[]));
        f.tracking.remember(&c, &[b("k")]);
        assert!(!f.tracking.is_idle());
        f.tracking.disable(&c);
        assert!(f.tracking.is_idle());
        assert_eq!(f.tracking.totals(), (0, 0, 0));
    }

    #[test]
    fn optin_remembers_only_after_caching_yes() {
        let mut f = fixture();
        let c = connect(&f, Protocol::Resp3);
        f.tracking.enable(&c, on(&["optin"]));
        f.tracking.remember(&c, &[b("a")]);
        caching(&mut c.tracking.borrow_mut(), b"yes").expect("optin");
        f.tracking.remember(&c, &[b("b")]);
        f.tracking.invalidate(&[b("a"), b("b")]);
        assert_eq!(invalidated(&c), vec![push(&["b"])]);
    }

    #[test]
    fn bcast_collects_keys_per_prefix_and_noloop_skips_own_writes() {
        let mut f = fixture();
        let c = connect(&f, Protocol::Resp3);
        f.tracking
            .enable(&c, on(&["bcast", "prefix", "a", "prefix", "b", "noloop"]));
        assert!(f.tracking.invalidate(&[b("a2"), b("a1"), b("c"), b("b1")]));
        f.tracking.current.set(c.id);
        f.tracking.invalidate(&[b("a3")]);
        f.tracking.current.set(0);
        f.tracking.broadcast();
        assert_eq!(invalidated(&c), vec![push(&["a1", "a2"]), push(&["b1"])]);
    }

    #[test]
    fn the_oldest_keys_are_evicted_over_the_limit() {
        let mut f = fixture();
        let c = connect(&f, Protocol::Resp3);
        f.tracking.max_keys = 2;
        f.tracking.enable(&c, on(&[]));
        f.tracking.remember(&c, &[b("k1"), b("k2"), b("k3")]);
        assert_eq!(invalidated(&c), vec![push(&["k1"])]);
        assert_eq!(f.tracking.totals().0, 2);
    }

    #[test]
    fn redirects_reach_a_resp2_subscriber_and_break_when_it_leaves() {
        let mut f = fixture();
        let target = connect(&f, Protocol::Resp2);
        target.subscriptions.set(1);
        let c = connect(&f, Protocol::Resp3);
        f.tracking
            .enable(&c, on(&["redirect", &target.id.to_string()]));
        f.tracking.remember(&c, &[b("k")]);
        f.tracking.flush();
        assert_eq!(
            invalidated(&target),
            vec![Reply::Push(vec![
                Reply::bulk_str("message"),
                Reply::bulk_str(CHANNEL),
                Reply::Nil
            ])]
        );
        f.clients.borrow_mut().unregister(target.id);
        f.tracking.flush();
        assert_eq!(
            invalidated(&c),
            vec![Reply::Push(vec![
                Reply::bulk_str("tracking-redir-broken"),
                Reply::Int(target.id as i64)
            ])]
        );
        assert!(c.tracking.borrow().broken_redirect);
    }

    #[test]
    fn requests_are_checked_with_redis_errors() {
        let state = ClientTracking::default();
        let check = |args: &[&str]| {
            let all: Vec<Bytes> = args.iter().map(|a| b(a)).collect();
            parse_request(&all, |id| id == 7).and_then(|r| check_enable(&state, &r))
        };
        assert_eq!(
            check(&["on", "prefix", "a"]),
            Err(TrackingError::PrefixWithoutBcast)
        );
        assert_eq!(
            check(&["on", "optin", "optout"]),
            Err(TrackingError::OptinAndOptout)
        );
        assert_eq!(
            check(&["on", "bcast", "optin"]),
            Err(TrackingError::OptWithBcast)
        );
        assert_eq!(
            check(&["on", "redirect", "8"]),
            Err(TrackingError::NoSuchRedirect)
        );
        assert_eq!(
            check(&["on", "redirect", "x"]),
            Err(TrackingError::NotAnInteger)
        );
        assert_eq!(
            check(&["on", "redirect", "7", "redirect", "7"]),
            Err(TrackingError::SecondRedirect)
        );
        assert_eq!(check(&["maybe"]), Err(TrackingError::Syntax));
        assert_eq!(
            check(&["on", "bcast", "prefix", "a", "prefix", "ab"]),
            Err(TrackingError::OverlapsProvided(b("a"), b("ab")))
        );
        assert_eq!(
            check(&["on", "bcast", "prefix", "a", "prefix", "b"]),
            Ok(())
        );
    }
}
