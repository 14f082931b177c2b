//! The registry of open connections: what CLIENT LIST/INFO/KILL and INFO
//! clients report. Single-threaded (the event loop owns it), so plain
//! `Cell`/`RefCell` suffice.

use crate::io_threads::ParseGate;
use crate::output_limits::{Class, OutputLimits};
use crate::tracking::ClientTracking;
use kvasir_core::CommandSpec;
use kvasir_resp::{Protocol, Reply};
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

/// Where a connection comes from or arrives at: a TCP address, or the
/// path of the Unix socket (`unixsocket`), shown as Redis shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientAddr {
    Tcp(SocketAddr),
    Unix(Rc<str>),
}

impl ClientAddr {
    /// Whether Redis counts the client as local (protected mode, the
    /// `local` value of the `enable-*` settings): 127.0.0.1, ::1, or the
    /// Unix socket.
    pub fn is_local(&self) -> bool {
        match self {
            ClientAddr::Tcp(a) => crate::listener::is_redis_local(a.ip()),
            ClientAddr::Unix(_) => true,
        }
    }

    /// As MONITOR names the client: `ip:port`, or `unix:path`.
    pub fn monitor_text(&self) -> String {
        match self {
            ClientAddr::Tcp(a) => a.to_string(),
            ClientAddr::Unix(path) => format!("unix:{path}"),
        }
    }
}

impl std::fmt::Display for ClientAddr {
    /// `ip:port`, or `path:0` (CLIENT LIST, CLIENT KILL, SLOWLOG).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientAddr::Tcp(a) => write!(f, "{a}"),
            ClientAddr::Unix(path) => write!(f, "{path}:0"),
        }
    }
}

/// What the server knows about one connection.
pub struct ClientInfo {
    pub id: u64,
    pub addr: ClientAddr,
    pub laddr: ClientAddr,
    pub fd: i32,
    pub created: Instant,
    pub name: RefCell<String>,
    /// The ACL user the connection is authenticated as.
    pub user: RefCell<String>,
    pub db: Cell<usize>,
    pub resp: Cell<Protocol>,
    pub last_interaction: Cell<Instant>,
    pub last_cmd: Cell<&'static str>,
    pub last_sub: Cell<&'static str>,
    pub qbuf: Cell<usize>,
    /// The pump of a connection served by an I/O thread, which may hold
    /// the start of a request (counted in the query buffer).
    pub io_pump: OnceCell<Arc<ParseGate>>,
    /// Room left in the query buffer, and the reply buffer's size (CLIENT
    /// LIST qbuf-free and rbs): 0 once an idle connection gave them back.
    pub qbuf_free: Cell<usize>,
    pub reply_buf: Cell<usize>,
    /// Wakes the session of a connection idle for [`IDLE_RELEASE`] to give
    /// its buffers back; `buffers_released` until it reads again.
    pub idle_release: Notify,
    pub buffers_released: Cell<bool>,
    pub no_evict: Cell<bool>,
    /// CLIENT NO-TOUCH: the client's commands (other than TOUCH) leave the
    /// keys' LRU/LFU stamps as they are.
    pub no_touch: Cell<bool>,
    /// CLIENT SETINFO LIB-NAME / LIB-VER.
    pub lib_name: RefCell<String>,
    pub lib_ver: RefCell<String>,
    pub killed: Cell<bool>,
    pub kill: Notify,
    /// A watched key was written since WATCH: the next EXEC fails.
    pub watch_dirty: Cell<bool>,
    /// Parked by a blocking command.
    pub blocked: Cell<bool>,
    /// In MONITOR mode.
    pub monitor: Cell<bool>,
    /// The blocked-client registry's waiter of the command this
    /// connection is parked on (CLIENT UNBLOCK).
    pub parked_waiter: Cell<Option<u64>>,
    pub subscriptions: Cell<usize>,
    pub psubscriptions: Cell<usize>,
    pub ssubscriptions: Cell<usize>,
    /// Commands queued by MULTI, or -1 outside a transaction.
    pub multi: Cell<i64>,
    /// CLIENT TRACKING state (flags, redirect, prefixes).
    pub tracking: RefCell<ClientTracking>,
    /// Messages for this connection that are not replies (pub/sub,
    /// invalidations, MONITOR lines), oldest first; `push_ready` wakes the
    /// session when one is queued. A plain queue, since only the data
    /// thread queues them: a tokio channel allocated about 2 KB per
    /// connection up front, for a queue most connections never use.
    pushes: RefCell<VecDeque<Reply>>,
    pub push_ready: Notify,
    /// The session ended: nothing is queued for it any more.
    pub ended: Cell<bool>,
    /// Bytes of the messages in `pushes` (CLIENT LIST omem; their count
    /// is oll).
    pub queued_bytes: Cell<u64>,
    /// Bytes of replies encoded and not written yet, once they are more
    /// than the [`REPLY_BUFFER`] every connection has: a large reply, or
    /// a pipeline's replies, waiting for the socket.
    pub reply_bytes: Cell<u64>,
    /// Since when the queue has been over its class's soft limit.
    pub over_soft_since: Cell<Option<Instant>>,
    /// `client-output-buffer-limit`, shared by every connection.
    pub output_limits: Rc<Cell<OutputLimits>>,
}

/// How long a connection stays idle before it gives its query and reply
/// buffers back (Redis frees an idle client's query buffer after 2 s).
pub const IDLE_RELEASE: std::time::Duration = std::time::Duration::from_secs(2);

/// The reply bytes a connection may hold without counting against its
/// output limits: Redis's per-client reply buffer (PROTO_REPLY_CHUNK_BYTES),
/// past which its replies go to the reply list its limits measure. Redis
/// counts that list in allocated blocks (16 KB of replies take about 20
/// KB), so every unwritten byte counts once past the buffer, which
/// matches its limits more closely than the bytes past 16 KB would.
pub const REPLY_BUFFER: u64 = 16 * 1024;

impl ClientInfo {
    /// Queues a push message; a connection whose queue is full is killed,
    /// as Redis drops a client over its output buffer limit.
    pub fn push(&self, msg: Reply) -> bool {
        if self.killed.get() || self.ended.get() {
            return false;
        }
        let size = msg.approx_wire_len() as u64;
        if self.over_output_limit(self.waiting_bytes() + size) {
            return false;
        }
        let mut pushes = self.pushes.borrow_mut();
        if pushes.len() >= crate::pubsub::QUEUE_LIMIT {
            drop(pushes);
            self.close_over_limit();
            return false;
        }
        pushes.push_back(msg);
        self.queued_bytes.set(self.queued_bytes.get() + size);
        // A permit if the session is not waiting: no wake-up is lost.
        self.push_ready.notify_one();
        true
    }

    /// Takes the oldest message queued for this connection, if any. The
    /// session encodes it into its replies at once, where it counts as a
    /// reply waiting.
    pub fn next_push(&self) -> Option<Reply> {
        let msg = self.pushes.borrow_mut().pop_front()?;
        self.queued_bytes.set(
            self.queued_bytes
                .get()
                .saturating_sub(msg.approx_wire_len() as u64),
        );
        Some(msg)
    }

    /// Whether messages are queued for this connection.
    pub fn has_pushes(&self) -> bool {
        !self.pushes.borrow().is_empty()
    }

    /// The client's query buffer (CLIENT LIST qbuf): what the session
    /// holds and the start of a request its I/O thread holds.
    pub fn query_buffer(&self) -> usize {
        self.qbuf.get() + self.io_pump.get().map_or(0, |pump| pump.held())
    }

    /// What waits for this client: queued messages and unwritten replies
    /// (CLIENT LIST omem; what its output limits measure).
    pub fn waiting_bytes(&self) -> u64 {
        self.queued_bytes.get() + self.reply_bytes.get()
    }

    /// The class whose `client-output-buffer-limit` applies.
    pub fn output_class(&self) -> Class {
        if self.monitor.get() {
            Class::Replica
        } else if self.subscribed() {
            Class::Pubsub
        } else {
            Class::Normal
        }
    }

    /// Whether `queued` bytes waiting put this client over its class's
    /// limits (the hard one, or the soft one for longer than allowed);
    /// such a client is closed, as Redis closes it.
    pub fn over_output_limit(&self, queued: u64) -> bool {
        let limit = self.output_limits.get().of(self.output_class());
        if limit.hard == 0 && limit.soft == 0 {
            return false;
        }
        let mut since = self.over_soft_since.get();
        let over = limit.exceeded(queued, &mut since, Instant::now());
        self.over_soft_since.set(since);
        if over {
            self.close_over_limit();
        }
        over
    }

    fn close_over_limit(&self) {
        tracing::warn!(
            "Client id={} addr={} closed for overcoming of output buffer limits.",
            self.id,
            self.addr
        );
        Clients::kill(self);
    }

    /// Subscribed to any channel or pattern (Redis's CLIENT_PUBSUB).
    pub fn subscribed(&self) -> bool {
        self.subscriptions.get() + self.psubscriptions.get() + self.ssubscriptions.get() > 0
    }

    /// Whether `spec` run by this client leaves the keys' LRU/LFU stamps
    /// as they are: CLIENT NO-TOUCH, for every command but TOUCH (Redis's
    /// lookupKey).
    pub fn leaves_access_stamps(&self, spec: &CommandSpec) -> bool {
        self.no_touch.get() && spec.name != "touch"
    }

    /// When the client was last served: by its session, or a request its
    /// I/O thread routed itself (`cluster::direct`), whichever came later.
    pub fn last_active(&self) -> Instant {
        let session = self.last_interaction.get();
        match self.io_pump.get().and_then(|g| g.last_direct()) {
            Some((at, _)) if at > session => at,
            _ => session,
        }
    }

    /// One CLIENT LIST line, in Redis 7.0's field order.
    pub fn line(&self) -> String {
        let now = Instant::now();
        let last_interaction = self.last_active();
        let mut cmd = match self.last_sub.get() {
            "" => self.last_cmd.get().to_string(),
            sub => format!("{}|{}", self.last_cmd.get(), sub),
        };
        // A request its I/O thread routed itself, if that came later.
        if let Some((at, name)) = self.io_pump.get().and_then(|g| g.last_direct()) {
            if at > self.last_interaction.get() {
                cmd = name.to_string();
            }
        }
        let resp = match self.resp.get() {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        };
        let mut flags = String::new();
        if self.blocked.get() {
            flags.push('b');
        }
        if self.monitor.get() {
            flags.push('O');
        }
        if self.subscriptions.get() + self.psubscriptions.get() + self.ssubscriptions.get() > 0 {
            flags.push('P');
        }
        if self.multi.get() >= 0 {
            flags.push('x');
        }
        let tracking = self.tracking.borrow();
        if tracking.on {
            flags.push('t');
        }
        if tracking.broken_redirect {
            flags.push('R');
        }
        if tracking.bcast {
            flags.push('B');
        }
        if matches!(self.addr, ClientAddr::Unix(_)) {
            flags.push('U');
        }
        if self.no_evict.get() {
            flags.push('e');
        }
        if self.no_touch.get() {
            flags.push('T');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs={} rbp=0 obl=0 oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            self.name.borrow(),
            now.duration_since(self.created).as_secs(),
            now.duration_since(last_interaction).as_secs(),
            flags,
            self.db.get(),
            self.subscriptions.get(),
            self.psubscriptions.get(),
            self.ssubscriptions.get(),
            self.multi.get(),
            self.query_buffer(),
            self.qbuf_free.get(),
            self.reply_buf.get(),
            self.pushes.borrow().len(),
            self.waiting_bytes(),
            self.waiting_bytes()
                + (self.query_buffer() + self.qbuf_free.get() + self.reply_buf.get()) as u64,
            if cmd.is_empty() { "NULL" } else { &cmd },
            self.user.borrow(),
            tracking.redirect_reply(),
            resp,
            self.lib_name.borrow(),
            self.lib_ver.borrow(),
        )
    }
}

#[derive(Default)]
pub struct Clients {
    next_id: u64,
    open: BTreeMap<u64, Rc<ClientInfo>>,
    /// `client-output-buffer-limit` (CONFIG SET changes it for every
    /// connection at once).
    pub output_limits: Rc<Cell<OutputLimits>>,
}

impl Clients {
    pub fn register(&mut self, addr: ClientAddr, laddr: ClientAddr, fd: i32) -> Rc<ClientInfo> {
        self.next_id += 1;
        let now = Instant::now();
        let info = Rc::new(ClientInfo {
            id: self.next_id,
            addr,
            laddr,
            fd,
            created: now,
            name: RefCell::new(String::new()),
            user: RefCell::new("default".to_string()),
            db: Cell::new(0),
            resp: Cell::new(Protocol::Resp2),
            last_interaction: Cell::new(now),
            last_cmd: Cell::new(""),
            last_sub: Cell::new(""),
            qbuf: Cell::new(0),
            io_pump: OnceCell::new(),
            qbuf_free: Cell::new(0),
            reply_buf: Cell::new(0),
            idle_release: Notify::new(),
            buffers_released: Cell::new(false),
            no_evict: Cell::new(false),
            no_touch: Cell::new(false),
            lib_name: RefCell::new(String::new()),
            lib_ver: RefCell::new(String::new()),
            killed: Cell::new(false),
            kill: Notify::new(),
            watch_dirty: Cell::new(false),
            blocked: Cell::new(false),
            monitor: Cell::new(false),
            parked_waiter: Cell::new(None),
            subscriptions: Cell::new(0),
            psubscriptions: Cell::new(0),
            ssubscriptions: Cell::new(0),
            multi: Cell::new(-1),
            tracking: RefCell::new(ClientTracking::default()),
            pushes: RefCell::default(),
            push_ready: Notify::new(),
            ended: Cell::new(false),
            queued_bytes: Cell::new(0),
            reply_bytes: Cell::new(0),
            over_soft_since: Cell::new(None),
            output_limits: self.output_limits.clone(),
        });
        self.open.insert(info.id, info.clone());
        info
    }

    pub fn unregister(&mut self, id: u64) {
        self.open.remove(&id);
    }

    pub fn get(&self, id: u64) -> Option<&Rc<ClientInfo>> {
        self.open.get(&id)
    }

    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Rc<ClientInfo>> {
        self.open.values()
    }

    /// Asks a connection to close; it finishes its current reply first.
    pub fn kill(info: &ClientInfo) {
        info.killed.set(true);
        // Every wait of the session that watches for a kill (its read loop,
        // a write to a client that does not read, a parked command, a
        // CLIENT PAUSE) ends, and one that starts later finds the permit.
        info.kill.notify_waiters();
        info.kill.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<'a>(line: &'a str, name: &str) -> &'a str {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    }

    /// CLIENT LIST's oll and omem follow the push queue: what is queued,
    /// then less of it as the session takes messages, and nothing once the
    /// session ended.
    #[test]
    fn client_list_counts_the_queued_pushes() {
        let mut clients = Clients::default();
        let addr = ClientAddr::Tcp("127.0.0.1:1".parse().expect("addr"));
        let c = clients.register(addr.clone(), addr, 0);
        assert_eq!(field(&c.line(), "oll"), "0");
        assert_eq!(field(&c.line(), "omem"), "0");
        for i in 0..3 {
            assert!(c.push(Reply::bulk_str(&format!("message {i}"))));
        }
        assert_eq!(field(&c.line(), "oll"), "3");
        let omem: u64 = field(&c.line(), "omem").parse().expect("omem");
        assert!(omem > 0);
        assert_eq!(c.next_push(), Some(Reply::bulk_str("message 0")));
        assert_eq!(field(&c.line(), "oll"), "2");
        let less: u64 = field(&c.line(), "omem").parse().expect("omem");
        assert!(less < omem, "{less} after {omem}");
        while c.next_push().is_some() {}
        assert_eq!(field(&c.line(), "omem"), "0");
        c.ended.set(true);
        assert!(!c.push(Reply::bulk_str("late")));
        assert!(!c.has_pushes());
    }
}
