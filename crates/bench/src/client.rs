//! The load generator's RESP client: a `Batch` of encoded requests goes out
//! in one write, replies are cut out of one read buffer and copied into a
//! reusable `Replies` (no allocation once the buffers have grown), and a
//! `Client` sends batches either to one server or, in cluster mode, to the
//! node that owns each key's slot, following `MOVED` / `ASK`.

use crate::cluster::{self, key_slot, Redirect, SlotMap};
use crate::resp::{self, reply_len, Reply};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why a batch did not complete. The connection is dropped after any of
/// them; the caller counts the batch's commands as failed and reconnects.
#[derive(Debug)]
pub enum ExecError {
    /// No complete reply within the timeout.
    Timeout,
    /// The connection failed or the server closed it.
    Io(io::Error),
    /// The bytes received are not RESP, or a redirect loop.
    Protocol(String),
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::Timeout => write!(f, "timed out"),
            ExecError::Io(e) => write!(f, "{e}"),
            ExecError::Protocol(e) => write!(f, "{e}"),
        }
    }
}

impl From<io::Error> for ExecError {
    fn from(e: io::Error) -> Self {
        ExecError::Io(e)
    }
}

/// Credentials sent with AUTH on every new connection.
#[derive(Clone, Debug, Default)]
pub struct Auth {
    pub user: Option<String>,
    pub password: Option<String>,
}

/// One TCP connection with its read buffer.
pub struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    pub addr: String,
}

impl Conn {
    /// Connects (TCP_NODELAY) and authenticates if asked.
    pub async fn connect(addr: &str, auth: &Auth, timeout: Duration) -> Result<Conn, ExecError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| ExecError::Timeout)??;
        stream.set_nodelay(true)?;
        let mut conn = Conn {
            stream,
            rbuf: vec![0; 16 * 1024],
            start: 0,
            end: 0,
            addr: addr.to_string(),
        };
        if let Some(password) = &auth.password {
            let mut req = Vec::new();
            match &auth.user {
                Some(user) => {
                    resp::put_cmd(&mut req, &[b"AUTH", user.as_bytes(), password.as_bytes()])
                }
                None => resp::put_cmd(&mut req, &[b"AUTH", password.as_bytes()]),
            }
            let mut replies = Replies::default();
            replies.reset(1);
            tokio::time::timeout(timeout, async {
                conn.send(&req).await?;
                conn.recv(1, |_, f, t| replies.set(0, f, t)).await
            })
            .await
            .map_err(|_| ExecError::Timeout)??;
            if !replies.get(0).is_ok() {
                return Err(ExecError::Protocol(format!(
                    "AUTH failed: {}",
                    String::from_utf8_lossy(replies.get(0).0).trim_end()
                )));
            }
        }
        Ok(conn)
    }

    /// Writes all bytes.
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Reads `n` complete replies, handing each to `sink(k, frame, when)`
    /// where `when` is the time of the read that completed it.
    pub async fn recv(
        &mut self,
        n: usize,
        mut sink: impl FnMut(usize, &[u8], Instant),
    ) -> Result<(), ExecError> {
        let mut got = 0;
        let mut when = Instant::now();
        loop {
            while got < n {
                match reply_len(&self.rbuf[self.start..self.end]) {
                    Ok(Some(len)) => {
                        sink(got, &self.rbuf[self.start..self.start + len], when);
                        self.start += len;
                        got += 1;
                    }
                    Ok(None) => break,
                    Err(e) => return Err(ExecError::Protocol(e.to_string())),
                }
            }
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            }
            if got == n {
                return Ok(());
            }
            if self.end == self.rbuf.len() {
                if self.start > 0 {
                    self.rbuf.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                } else {
                    let len = self.rbuf.len();
                    self.rbuf.resize(len * 2, 0);
                }
            }
            let k = self.stream.read(&mut self.rbuf[self.end..]).await?;
            if k == 0 {
                return Err(ExecError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the connection",
                )));
            }
            self.end += k;
            when = Instant::now();
        }
    }

    /// Sends one command and returns its reply copied out.
    pub async fn call(&mut self, args: &[&[u8]], timeout: Duration) -> Result<Vec<u8>, ExecError> {
        let mut req = Vec::new();
        resp::put_cmd(&mut req, args);
        let mut out = Vec::new();
        tokio::time::timeout(timeout, async {
            self.send(&req).await?;
            self.recv(1, |_, f, _| out.extend_from_slice(f)).await
        })
        .await
        .map_err(|_| ExecError::Timeout)??;
        Ok(out)
    }
}

#[derive(Clone, Copy, Debug)]
struct CmdSpan {
    start: usize,
    end: usize,
    slot: Option<u16>,
}

/// Requests to send together, encoded back to back in one buffer.
#[derive(Default)]
pub struct Batch {
    buf: Vec<u8>,
    cmds: Vec<CmdSpan>,
    open: Option<(usize, Option<(usize, usize)>)>,
    route: bool,
}

impl Batch {
    /// `route`: compute each command's key slot (cluster mode).
    pub fn new(route: bool) -> Batch {
        Batch {
            route,
            ..Default::default()
        }
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.cmds.clear();
        self.open = None;
    }

    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// The encoded requests.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Starts a command of `nargs` arguments (the name included).
    pub fn begin(&mut self, nargs: usize) -> &mut Self {
        debug_assert!(self.open.is_none(), "command left open");
        self.open = Some((self.buf.len(), None));
        resp::put_array_len(&mut self.buf, nargs);
        self
    }

    /// Appends an argument.
    pub fn arg(&mut self, bytes: &[u8]) -> &mut Self {
        resp::put_bulk(&mut self.buf, bytes);
        self
    }

    /// Appends an integer argument in decimal.
    pub fn arg_i64(&mut self, v: i64) -> &mut Self {
        resp::put_bulk_i64(&mut self.buf, v);
        self
    }

    /// Appends an argument of `len` bytes written in place by `fill`.
    pub fn arg_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> &mut Self {
        resp::put_bulk_with(&mut self.buf, len, fill);
        self
    }

    /// Appends the argument that routes the command (its key).
    pub fn key(&mut self, bytes: &[u8]) -> &mut Self {
        self.key_with(bytes.len(), |d| d.copy_from_slice(bytes))
    }

    /// Appends the routing key, written in place by `fill`.
    pub fn key_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> &mut Self {
        resp::put_bulk_with(&mut self.buf, len, fill);
        if let Some((_, key)) = &mut self.open {
            if key.is_none() {
                let end = self.buf.len() - 2;
                *key = Some((end - len, end));
            }
        }
        self
    }

    /// Closes the command started by `begin`.
    pub fn end(&mut self) {
        let (start, key) = self.open.take().expect("end() without begin()");
        let slot = match (self.route, key) {
            (true, Some((a, b))) => Some(key_slot(&self.buf[a..b])),
            _ => None,
        };
        self.cmds.push(CmdSpan {
            start,
            end: self.buf.len(),
            slot,
        });
    }

    fn cmd_bytes(&self, i: usize) -> &[u8] {
        let c = self.cmds[i];
        &self.buf[c.start..c.end]
    }
}

/// The replies to a batch, in request order, with the time each arrived.
#[derive(Default)]
pub struct Replies {
    data: Vec<u8>,
    spans: Vec<(usize, usize)>,
    at: Vec<Option<Instant>>,
}

impl Replies {
    /// Prepares for `n` replies.
    pub fn reset(&mut self, n: usize) {
        self.data.clear();
        self.spans.clear();
        self.spans.resize(n, (0, 0));
        self.at.clear();
        self.at.resize(n, None);
    }

    /// Stores reply `i`.
    pub fn set(&mut self, i: usize, frame: &[u8], at: Instant) {
        let start = self.data.len();
        self.data.extend_from_slice(frame);
        self.spans[i] = (start, self.data.len());
        self.at[i] = Some(at);
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Reply `i`.
    pub fn get(&self, i: usize) -> Reply<'_> {
        let (a, b) = self.spans[i];
        Reply(&self.data[a..b])
    }

    /// When reply `i` arrived.
    pub fn at(&self, i: usize) -> Option<Instant> {
        self.at[i]
    }
}

/// Counters of cluster redirections (not errors: the client follows them).
#[derive(Default, Debug)]
pub struct RedirectCounters {
    pub moved: AtomicU64,
    pub ask: AtomicU64,
    pub retry: AtomicU64,
    pub refreshes: AtomicU64,
}

/// The slot map shared by every connection of a cluster run.
pub struct ClusterShared {
    map: RwLock<SlotMap>,
    refresh_wanted: AtomicBool,
    seeds: Vec<String>,
    pub counters: RedirectCounters,
}

impl ClusterShared {
    /// Reads the slot map from the first seed that answers CLUSTER SLOTS.
    pub async fn discover(
        seeds: Vec<String>,
        auth: &Auth,
        timeout: Duration,
    ) -> Result<Arc<ClusterShared>, String> {
        let shared = Arc::new(ClusterShared {
            map: RwLock::new(SlotMap::empty()),
            refresh_wanted: AtomicBool::new(false),
            seeds,
            counters: RedirectCounters::default(),
        });
        shared.refresh(auth, timeout).await?;
        Ok(shared)
    }

    /// A copy of the current map.
    pub fn map(&self) -> SlotMap {
        self.map.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn refresh(&self, auth: &Auth, timeout: Duration) -> Result<(), String> {
        let mut candidates = self.map().nodes;
        for s in &self.seeds {
            if !candidates.contains(s) {
                candidates.push(s.clone());
            }
        }
        let mut last = String::from("no node to ask");
        for addr in candidates {
            let result = async {
                let mut conn = Conn::connect(&addr, auth, timeout)
                    .await
                    .map_err(|e| format!("{addr}: {e}"))?;
                let reply = conn
                    .call(&[b"CLUSTER", b"SLOTS"], timeout)
                    .await
                    .map_err(|e| format!("{addr}: {e}"))?;
                SlotMap::from_cluster_slots(Reply(&reply), cluster::host_of(&addr))
            }
            .await;
            match result {
                Ok(map) => {
                    *self.map.write().unwrap_or_else(|e| e.into_inner()) = map;
                    self.counters.refreshes.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

/// Commands of a batch bound for one node.
#[derive(Default)]
struct Group {
    addr: String,
    buf: Vec<u8>,
    idx: Vec<usize>,
}

/// A cluster-aware client: one connection per node, opened on first use.
pub struct ClusterClient {
    shared: Arc<ClusterShared>,
    conns: Vec<Conn>,
    groups: Vec<Group>,
    scratch: Vec<u8>,
}

const MAX_REDIRECTS: usize = 16;

impl ClusterClient {
    pub fn new(shared: Arc<ClusterShared>) -> ClusterClient {
        ClusterClient {
            shared,
            conns: Vec::new(),
            groups: Vec::new(),
            scratch: Vec::new(),
        }
    }

    async fn conn(
        &mut self,
        addr: &str,
        auth: &Auth,
        timeout: Duration,
    ) -> Result<usize, ExecError> {
        if let Some(i) = self.conns.iter().position(|c| c.addr == addr) {
            return Ok(i);
        }
        let c = Conn::connect(addr, auth, timeout).await?;
        self.conns.push(c);
        Ok(self.conns.len() - 1)
    }

    async fn exec(
        &mut self,
        batch: &Batch,
        out: &mut Replies,
        auth: &Auth,
        timeout: Duration,
    ) -> Result<(), ExecError> {
        if self.shared.refresh_wanted.swap(false, Ordering::AcqRel) {
            // A failed refresh keeps the old map; MOVED replies still steer.
            let _ = self.shared.refresh(auth, timeout).await;
        }
        // Group the commands by node.
        let mut groups = std::mem::take(&mut self.groups);
        for g in groups.iter_mut() {
            g.buf.clear();
            g.idx.clear();
        }
        {
            let map = self.shared.map.read().unwrap_or_else(|e| e.into_inner());
            for (i, c) in batch.cmds.iter().enumerate() {
                let node = c.slot.and_then(|s| map.node_of(s)).unwrap_or(0) as usize;
                let addr = map
                    .nodes
                    .get(node)
                    .or_else(|| self.shared.seeds.first())
                    .map(String::as_str)
                    .unwrap_or("");
                let g = match groups.iter().position(|g| g.addr == addr) {
                    Some(g) => g,
                    None => {
                        groups.push(Group {
                            addr: addr.to_string(),
                            ..Default::default()
                        });
                        groups.len() - 1
                    }
                };
                groups[g].buf.extend_from_slice(batch.cmd_bytes(i));
                groups[g].idx.push(i);
            }
        }
        let result = self.send_groups(&groups, out, auth, timeout).await;
        self.groups = groups;
        result?;
        // Follow redirections, one command at a time.
        for i in 0..batch.len() {
            let mut hops = 0;
            while let Some(err) = out.get(i).error() {
                let host = self
                    .conns
                    .first()
                    .map(|c| c.addr.clone())
                    .unwrap_or_default();
                let Some(redirect) = cluster::parse_redirect(err, cluster::host_of(&host)) else {
                    break;
                };
                hops += 1;
                if hops > MAX_REDIRECTS {
                    return Err(ExecError::Protocol(format!(
                        "more than {MAX_REDIRECTS} cluster redirections for one command"
                    )));
                }
                self.scratch.clear();
                let (addr, asking) = match redirect {
                    Redirect::Moved { slot, addr } => {
                        self.shared.counters.moved.fetch_add(1, Ordering::Relaxed);
                        self.shared
                            .map
                            .write()
                            .unwrap_or_else(|e| e.into_inner())
                            .set(slot, &addr);
                        self.shared.refresh_wanted.store(true, Ordering::Release);
                        (addr, false)
                    }
                    Redirect::Ask { addr, .. } => {
                        self.shared.counters.ask.fetch_add(1, Ordering::Relaxed);
                        resp::put_cmd(&mut self.scratch, &[b"ASKING"]);
                        (addr, true)
                    }
                    Redirect::Retry => {
                        self.shared.counters.retry.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        let map = self.shared.map.read().unwrap_or_else(|e| e.into_inner());
                        let node = batch.cmds[i].slot.and_then(|s| map.node_of(s)).unwrap_or(0);
                        (
                            map.nodes.get(node as usize).cloned().unwrap_or_default(),
                            false,
                        )
                    }
                };
                self.scratch.extend_from_slice(batch.cmd_bytes(i));
                let c = self.conn(&addr, auth, timeout).await?;
                let conn = &mut self.conns[c];
                conn.send(&self.scratch).await?;
                let n = if asking { 2 } else { 1 };
                conn.recv(n, |k, f, t| {
                    if k + 1 == n {
                        out.set(i, f, t)
                    }
                })
                .await?;
            }
        }
        Ok(())
    }

    async fn send_groups(
        &mut self,
        groups: &[Group],
        out: &mut Replies,
        auth: &Auth,
        timeout: Duration,
    ) -> Result<(), ExecError> {
        let mut conn_of = [usize::MAX; 64];
        for (gi, g) in groups.iter().enumerate().filter(|(_, g)| !g.idx.is_empty()) {
            let c = self.conn(&g.addr, auth, timeout).await?;
            if gi < conn_of.len() {
                conn_of[gi] = c;
            }
            self.conns[c].send(&g.buf).await?;
        }
        for (gi, g) in groups.iter().enumerate().filter(|(_, g)| !g.idx.is_empty()) {
            let c = match conn_of.get(gi) {
                Some(&c) if c != usize::MAX => c,
                _ => self.conn(&g.addr, auth, timeout).await?,
            };
            self.conns[c]
                .recv(g.idx.len(), |k, f, t| out.set(g.idx[k], f, t))
                .await?;
        }
        Ok(())
    }
}

/// Where a client sends its batches.
pub enum Target {
    Single(String),
    Cluster(Arc<ClusterShared>),
}

/// A connection (or, in cluster mode, a set of them) that executes batches.
pub struct Client {
    target: Target,
    single: Option<Conn>,
    cluster: Option<ClusterClient>,
    auth: Auth,
    pub timeout: Duration,
}

impl Client {
    /// Connects (single mode) or prepares per-node connections (cluster).
    pub async fn connect(
        target: Target,
        auth: Auth,
        timeout: Duration,
    ) -> Result<Client, ExecError> {
        let mut c = Client {
            target,
            single: None,
            cluster: None,
            auth,
            timeout,
        };
        c.open().await?;
        Ok(c)
    }

    /// Whether commands are routed by key slot.
    pub fn routes(&self) -> bool {
        matches!(self.target, Target::Cluster(_))
    }

    /// Drops every connection and opens them again; in cluster mode the
    /// slot map is read again too (the failure may have been a failover).
    pub async fn reconnect(&mut self) -> Result<(), ExecError> {
        if let Target::Cluster(shared) = &self.target {
            shared.refresh_wanted.store(true, Ordering::Release);
        }
        self.open().await
    }

    async fn open(&mut self) -> Result<(), ExecError> {
        self.single = None;
        self.cluster = None;
        match &self.target {
            Target::Single(addr) => {
                self.single = Some(Conn::connect(addr, &self.auth, self.timeout).await?);
            }
            Target::Cluster(shared) => {
                let shared = shared.clone();
                if shared.refresh_wanted.swap(false, Ordering::AcqRel) {
                    // After a failure the map may name a node that is gone
                    // (a killed leader): read it again first. A failed
                    // refresh keeps the old map.
                    let _ = shared.refresh(&self.auth, self.timeout).await;
                }
                let mut cc = ClusterClient::new(shared.clone());
                // Open a connection to a node now, so that a dead cluster
                // shows up here rather than on the first batch. Any node
                // that answers will do: the first one may be the one that
                // just died.
                let mut opened = Ok(0);
                for addr in shared.map().nodes {
                    opened = cc.conn(&addr, &self.auth, self.timeout).await;
                    if opened.is_ok() {
                        break;
                    }
                }
                opened?;
                self.cluster = Some(cc);
            }
        }
        Ok(())
    }

    /// Sends the batch and collects one reply per command into `out`.
    /// After an error the connections are gone until `reconnect`.
    pub async fn exec(&mut self, batch: &Batch, out: &mut Replies) -> Result<(), ExecError> {
        out.reset(batch.len());
        let timeout = self.timeout;
        let Client {
            single,
            cluster,
            auth,
            ..
        } = self;
        let result = match (single, cluster) {
            (Some(conn), _) => {
                tokio::time::timeout(timeout, async {
                    conn.send(batch.bytes()).await?;
                    conn.recv(batch.len(), |k, f, t| out.set(k, f, t)).await
                })
                .await
            }
            (None, Some(cc)) => {
                tokio::time::timeout(timeout, cc.exec(batch, out, auth, timeout)).await
            }
            (None, None) => {
                return Err(ExecError::Io(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "not connected",
                )))
            }
        };
        let result = result.unwrap_or(Err(ExecError::Timeout));
        if result.is_err() {
            self.single = None;
            self.cluster = None;
        }
        result
    }
}
