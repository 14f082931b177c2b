//! Peer transport: outbound TCP connections to each peer node carrying
//! length-prefixed frames that batch Raft messages of many groups; inbound
//! connections are read and handed to the inbox of each group's loop.
//! Every connection starts with a handshake naming the cluster, both node
//! ids and the lane, so a frame from another cluster or an unknown node is
//! refused. Snapshot messages travel on a connection of their own so a
//! large image never delays the heartbeats of other groups.
//!
//! A node whose groups run on several loops ("lanes", one per shard
//! thread) gives each lane its own connection to each peer: lane k's
//! messages are framed and written on lane k's thread, and the peer hands
//! the connection, once authenticated, to its own lane k, which reads it
//! and fills its inbox itself. Lane 0 (the node's first loop) and
//! broadcasts use the links of the thread that started the transport.
//! Nodes lay their shards out over lanes alike, so a lane's link mostly
//! carries groups of the peer's same lane; whatever it carries is still
//! delivered by group, so nodes with different lane counts interoperate.
//!
//! Wire format (after the handshake of [`bus_auth`]), all integers little
//! endian:
//!
//! ```text
//! frame      = len:u32 kind:u8 body        len counts kind + body, at most MAX_FRAME
//! RAFT       body = count:u32 (group:u64 n:u32 message:n)*count
//! BROADCAST  body = payload
//! FIRST      body = inner_kind:u8 total:u64 data   a logical frame too large for one
//! NEXT       body = data                           frame, split; ends when the data
//!                                                  adds up to total (<= MAX_MESSAGE
//!                                                  plus room for a batch)
//! SNAP_START body = group:u64 size:u64 MsgSnapshot-with-empty-data
//! SNAP_CHUNK body = image bytes                    ends when they add up to size
//! ```
//!
//! The receiver acknowledges a complete snapshot with one byte, so the
//! sender reports the transfer to Raft only once it really arrived.

use crate::bus_auth;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use protobuf::Message as _;
use raft::eraftpb::{Message, MessageType};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tracing::{debug, info, warn};

/// Bumped from KVR1 when snapshots became chunked and frames fragmented,
/// from KVR2 when the handshake came to name the lane: nodes of one
/// cluster run one version, and an older node is refused at the handshake
/// instead of misreading frames.
const MAGIC: &[u8; 4] = b"KVR3";
const KIND_RAFT: u8 = 1;
const KIND_BROADCAST: u8 = 2;
const KIND_FIRST: u8 = 3;
const KIND_NEXT: u8 = 4;
const KIND_SNAP_START: u8 = 5;
const KIND_SNAP_CHUNK: u8 = 6;
/// Largest wire frame accepted (kind byte and body): a regular batch
/// (about [`MAX_BATCH_BYTES`] of payload) fits; anything larger is sent as
/// fragments, so a read buffer never exceeds this.
pub const MAX_FRAME: usize = 16 << 20;
/// Bytes of a FIRST frame (after its length) before its data: kind,
/// inner kind, total.
const FIRST_HEADER: usize = 1 + 1 + 8;
/// Largest logical frame reassembled from fragments: one Raft entry holds
/// at most one client command (below client-query-buffer-limit, 1 GiB by
/// default, which also bounds a proto-max-bulk-len value) plus its
/// encoding, and a MsgAppend carries one such entry alone.
pub const MAX_MESSAGE: usize = (1 << 30) + (64 << 20);
/// Image bytes per snapshot chunk frame.
pub const SNAPSHOT_CHUNK: usize = 4 << 20;
/// Largest snapshot image a node assembles: a shard image is built in
/// memory by the sender, so a legitimate one is far below a node's RAM;
/// this only stops a peer from streaming without end.
pub const MAX_SNAPSHOT: u64 = 64 << 30;
/// The receiver's answer once a snapshot is complete.
const SNAPSHOT_ACK: u8 = 1;
/// A snapshot transfer making no progress this long (connect, one write,
/// the acknowledgement) fails and is reported to Raft, which retries.
const SNAPSHOT_STALL: Duration = Duration::from_secs(30);
/// Writes go out in pieces of this size, each within its timeout: a large
/// frame on a slow but live link is not cut, a stalled link is noticed.
const WRITE_PIECE: usize = 1 << 20;
/// Most messages coalesced into one frame.
const MAX_BATCH: usize = 4096;
/// A peer link that accepts no data for this long (a write that does not
/// complete, data the kernel cannot get acknowledged, a connect that does
/// not finish) is dropped and dialled again: a dead or cut-off peer is
/// noticed within about one election timeout instead of after the kernel's
/// retransmission give-up (minutes), and a healed link is used again within
/// a reconnect backoff.
pub const LINK_TIMEOUT: Duration = Duration::from_secs(1);

/// While a dial is unanswered, another one starts this often. A SYN lost
/// to a cut link is sent again by the kernel only after 1 s (then 3 s, 7 s),
/// so with one attempt at a time a healed link waited for that
/// retransmission or for the connect timeout: up to 1.5 s of a node
/// serving nothing after the heal. A fresh SYN every 100 ms bounds it.
const DIAL_EVERY: Duration = Duration::from_millis(100);
/// Pause after a dial that failed at once (connection refused: the peer is
/// restarting), doubling from 20 ms up to this.
const REDIAL_MAX: Duration = Duration::from_millis(100);

/// Connects to `addr`: a new attempt starts every [`DIAL_EVERY`] while
/// none has answered, each with up to `limit` for its handshake, and the
/// first connection wins (the others are dropped). An error when every
/// attempt made so far has failed (refused, unreachable) or when none
/// connected within `limit`.
async fn dial(addr: &str, limit: Duration) -> std::io::Result<TcpStream> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut attempts = tokio::task::JoinSet::new();
    loop {
        let to = addr.to_string();
        attempts.spawn_local(async move { TcpStream::connect(to).await });
        let next = (tokio::time::Instant::now() + DIAL_EVERY).min(deadline);
        loop {
            tokio::select! {
                done = attempts.join_next() => match done {
                    Some(Ok(Ok(stream))) => return Ok(stream),
                    Some(Ok(Err(e))) if attempts.is_empty() => return Err(e),
                    Some(_) => {}
                    None => return Err(timed_out("connect", limit)),
                },
                _ = tokio::time::sleep_until(next) => break,
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(timed_out("connect", limit));
        }
    }
}

/// Socket options of every bus connection: no Nagle delay, keepalive
/// probes on an idle link, and TCP_USER_TIMEOUT so unacknowledged data
/// fails the connection after [`LINK_TIMEOUT`].
fn tune(stream: &TcpStream) {
    let sock = socket2::SockRef::from(stream);
    let _ = sock.set_tcp_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(LINK_TIMEOUT)
        .with_interval(LINK_TIMEOUT / 2)
        .with_retries(3);
    let _ = sock.set_tcp_keepalive(&keepalive);
    let _ = sock.set_tcp_user_timeout(Some(LINK_TIMEOUT));
}

/// What arrived from peers for the groups of one Raft loop, drained by
/// that loop each round. The transport fills it from its own thread (a
/// node's groups may run on several shard threads, one loop each).
#[derive(Default)]
pub struct Inbox {
    pub(crate) messages: Mutex<Vec<(u64, Message)>>,
    /// (group, peer, delivered) for snapshot sends.
    pub(crate) snapshot_reports: Mutex<Vec<(u64, u64, bool)>>,
    /// (group, peer) whose message could not be sent.
    pub(crate) unreachable: Mutex<Vec<(u64, u64)>>,
    pub wake: Notify,
}

/// A lock nobody holds across a call that can panic; a poisoned one is
/// still consistent (a `Vec` push), so it is taken anyway.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inbox {
    pub(crate) fn take_messages(&self) -> Vec<(u64, Message)> {
        std::mem::take(&mut *lock(&self.messages))
    }

    pub(crate) fn take_snapshot_reports(&self) -> Vec<(u64, u64, bool)> {
        std::mem::take(&mut *lock(&self.snapshot_reports))
    }

    pub(crate) fn take_unreachable(&self) -> Vec<(u64, u64)> {
        std::mem::take(&mut *lock(&self.unreachable))
    }
}

/// Where the transport delivers: the inbox of the Raft loop that owns each
/// group (one loop per shard thread), or the default one.
pub struct Inboxes {
    default: Arc<Inbox>,
    by_group: HashMap<u64, Arc<Inbox>>,
}

impl Inboxes {
    /// Every group on one loop.
    pub fn single(inbox: Arc<Inbox>) -> Inboxes {
        Inboxes {
            default: inbox,
            by_group: HashMap::new(),
        }
    }

    /// Groups listed in `by_group` on their loops, the others on `default`.
    pub fn new(default: Arc<Inbox>, by_group: HashMap<u64, Arc<Inbox>>) -> Inboxes {
        Inboxes { default, by_group }
    }

    fn of(&self, group: u64) -> &Arc<Inbox> {
        self.by_group.get(&group).unwrap_or(&self.default)
    }

    /// Hands received messages to their loops, waking each loop once.
    fn deliver(&self, msgs: Vec<(u64, Message)>) {
        if self.by_group.is_empty() {
            lock(&self.default.messages).extend(msgs);
            self.default.wake.notify_one();
            return;
        }
        let mut woken: Vec<&Arc<Inbox>> = Vec::new();
        for (g, m) in msgs {
            let inbox = self.of(g);
            lock(&inbox.messages).push((g, m));
            if !woken.iter().any(|w| Arc::ptr_eq(w, inbox)) {
                woken.push(inbox);
            }
        }
        for inbox in woken {
            inbox.wake.notify_one();
        }
    }

    /// Tells the loops of `groups` that their messages to `to` were lost.
    fn unreachable(&self, groups: impl IntoIterator<Item = u64>, to: u64) {
        let mut woken: Vec<&Arc<Inbox>> = Vec::new();
        for g in groups {
            let inbox = self.of(g);
            lock(&inbox.unreachable).push((g, to));
            if !woken.iter().any(|w| Arc::ptr_eq(w, inbox)) {
                woken.push(inbox);
            }
        }
        for inbox in woken {
            inbox.wake.notify_one();
        }
    }

    fn snapshot_report(&self, group: u64, to: u64, delivered: bool) {
        let inbox = self.of(group);
        lock(&inbox.snapshot_reports).push((group, to, delivered));
        inbox.wake.notify_one();
    }
}

/// Called with (from node, payload) for each broadcast frame (PUBLISH).
pub type BroadcastHandler = Rc<dyn Fn(u64, Bytes)>;

enum Out {
    Raft(Vec<(u64, Message)>),
    Broadcast(Bytes),
}

/// One outbound connection to a peer: lane 0's, or a shard thread's.
struct Link {
    /// Each item with its cost, computed once when queued.
    tx: mpsc::UnboundedSender<(Out, usize)>,
    /// Unix ms when this connection was made; 0 while it is down.
    connected_since: Arc<AtomicU64>,
    /// Bytes (estimated) of the messages queued for the sender task.
    queued: Arc<AtomicUsize>,
}

/// A sender task not started yet: its lane's thread starts it (see
/// [`Transport::run_lane`]).
struct PendingLink {
    to: u64,
    queue: Queue,
    connected: Arc<AtomicU64>,
}

/// One lane's connections to the peers.
struct LaneLinks {
    links: HashMap<u64, Link>,
    /// Whether the sender tasks run (lane 0's from the start); until they
    /// do, the lane's messages go on lane 0's links.
    running: AtomicBool,
    pending: Mutex<Vec<PendingLink>>,
    /// Peers' connections this lane's thread took over and read.
    taken_over: AtomicU64,
}

/// A peer's connection, authenticated, on its way to the lane it names.
struct HandedLink {
    stream: std::net::TcpStream,
    from: u64,
    addr: std::net::SocketAddr,
}

/// Where the acceptor hands the connections that name a lane. Peers dial
/// as soon as this node listens, before its lanes have restored their
/// groups: those connections wait for their lane (a lane's messages are
/// not read before it runs anyway).
enum Door {
    Waiting(Vec<HandedLink>),
    Open(mpsc::UnboundedSender<HandedLink>),
}

/// Most connections held for a lane that does not run yet; more are read
/// by the acceptor's thread.
const MAX_WAITING_LINKS: usize = 64;

/// Indexed by lane (lane 0's door unused: its links are read by the
/// acceptor's own thread).
type LaneDoors = Vec<Mutex<Door>>;

/// Most bytes queued for one peer. Beyond it new messages are dropped and
/// reported unreachable (Raft sends them again), so a slow or stalled link
/// never piles up memory.
pub const MAX_QUEUED_BYTES: usize = 128 << 20;

/// What a queued item costs against [`MAX_QUEUED_BYTES`]: its payload and
/// a fixed overhead per message.
fn queued_cost(o: &Out) -> usize {
    match o {
        Out::Raft(b) => payload_bytes(b) + 64 * b.len(),
        Out::Broadcast(p) => p.len() + 64,
    }
}

/// Shared by every Raft loop of the node (one per shard thread): sending
/// queues messages for the sender task of the loop's own link to the peer
/// (see the module's doc).
pub struct Transport {
    node_id: u64,
    cluster_id: u64,
    /// The cluster secret peers prove in the handshake (empty: none).
    secret: Arc<[u8]>,
    addrs: HashMap<u64, String>,
    /// Indexed by lane; lane 0's links run on the thread that started the
    /// transport.
    lanes: Vec<LaneLinks>,
    doors: Arc<LaneDoors>,
    /// Unix ms until which a peer counts as stopping (it said so, see
    /// [`Transport::mark_leaving`]); 0: it did not.
    leaving_until: HashMap<u64, AtomicU64>,
    /// What arrives from each peer on the connections it opened to this
    /// node.
    inbound: Arc<HashMap<u64, Inbound>>,
    inboxes: Arc<Inboxes>,
    pub sent_messages: AtomicU64,
    pub received_messages: Arc<AtomicU64>,
}

/// magic | cluster id | from | to | lane (u64 each, little endian).
fn handshake(cluster_id: u64, from: u64, to: u64, lane: usize) -> [u8; bus_auth::HELLO_LEN] {
    let mut h = [0u8; bus_auth::HELLO_LEN];
    h[..4].copy_from_slice(MAGIC);
    h[4..12].copy_from_slice(&cluster_id.to_le_bytes());
    h[12..20].copy_from_slice(&from.to_le_bytes());
    h[20..28].copy_from_slice(&to.to_le_bytes());
    h[28..36].copy_from_slice(&(lane as u64).to_le_bytes());
    h
}

fn timed_out(what: &str, limit: Duration) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what}: no progress for {limit:?}"),
    )
}

/// Writes `data` in pieces of [`WRITE_PIECE`], failing once one piece
/// makes no progress within `stall`.
async fn write_pieces(s: &mut TcpStream, data: &[u8], stall: Duration) -> std::io::Result<()> {
    for piece in data.chunks(WRITE_PIECE) {
        tokio::time::timeout(stall, s.write_all(piece))
            .await
            .unwrap_or_else(|_| Err(timed_out("write", stall)))?;
    }
    Ok(())
}

/// One snapshot transfer: connect, authenticate, send the message without
/// its image, the image in chunks of [`SNAPSHOT_CHUNK`], and wait for the
/// receiver's acknowledgement (it has the whole image).
async fn stream_snapshot(
    addr: &str,
    hello: &[u8; bus_auth::HELLO_LEN],
    secret: &[u8],
    group: u64,
    mut m: Message,
) -> std::io::Result<()> {
    let image = m.mut_snapshot().take_data();
    // Tuned as every bus link, so a transfer cut off mid-way fails within
    // LINK_TIMEOUT (Raft sends the snapshot again) instead of waiting
    // SNAPSHOT_STALL; a live link, however slow, keeps acknowledging data.
    let mut s = dial(addr, LINK_TIMEOUT).await?;
    tune(&s);
    bus_auth::connect(&mut s, hello, secret)
        .await
        .map_err(std::io::Error::other)?;
    let mut buf = BytesMut::new();
    encode_snapshot_start(group, &m, image.len(), &mut buf);
    write_pieces(&mut s, &buf, SNAPSHOT_STALL).await?;
    for chunk in image.chunks(SNAPSHOT_CHUNK) {
        buf.clear();
        put_frame(KIND_SNAP_CHUNK, chunk, &mut buf);
        write_pieces(&mut s, &buf, SNAPSHOT_STALL).await?;
    }
    s.flush().await?;
    let mut ack = [0u8; 1];
    tokio::time::timeout(SNAPSHOT_STALL, s.read_exact(&mut ack))
        .await
        .unwrap_or_else(|_| Err(timed_out("snapshot acknowledgement", SNAPSHOT_STALL)))?;
    if ack[0] != SNAPSHOT_ACK {
        return Err(std::io::Error::other("bad snapshot acknowledgement"));
    }
    Ok(())
}

fn encode_raft(batch: &[(u64, Message)], out: &mut BytesMut) {
    let start = out.len();
    out.put_u32_le(0);
    out.put_u8(KIND_RAFT);
    out.put_u32_le(0);
    let mut count: u32 = 0;
    for (group, m) in batch {
        let at = out.len();
        out.put_u64_le(*group);
        out.put_u32_le(0);
        let body_at = out.len();
        let ok = {
            let mut w = (&mut *out).writer();
            m.write_to_writer(&mut w).is_ok()
        };
        let n = out.len() - body_at;
        if !ok || n > MAX_MESSAGE {
            // Cannot happen for a well-formed message, and no peer would
            // accept one beyond MAX_MESSAGE; drop it (Raft resends).
            warn!(group, bytes = n, "raft message not encodable, dropped");
            out.truncate(at);
            continue;
        }
        out[body_at - 4..body_at].copy_from_slice(&(n as u32).to_le_bytes());
        count += 1;
    }
    out[start + 5..start + 9].copy_from_slice(&count.to_le_bytes());
    finish_frame(start, out);
}

/// Completes the frame that begins at `start` in `out` (a length
/// placeholder, the kind byte, the body): fills in its length, or turns it
/// into fragments if it is larger than one frame may be. Encoding in place
/// keeps the common case free of copies; only an oversized frame is copied.
fn finish_frame(start: usize, out: &mut BytesMut) {
    let len = out.len() - start - 4;
    if len <= MAX_FRAME {
        out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
        return;
    }
    let body = out.split_off(start + 5);
    let kind = out[start + 4];
    out.truncate(start);
    put_fragments(kind, &body, out);
}

/// Appends a logical frame too large for one wire frame as a FIRST frame
/// and as many NEXT frames as its body needs.
fn put_fragments(kind: u8, body: &[u8], out: &mut BytesMut) {
    let (first, rest) = body.split_at(body.len().min(MAX_FRAME - FIRST_HEADER));
    out.put_u32_le((FIRST_HEADER + first.len()) as u32);
    out.put_u8(KIND_FIRST);
    out.put_u8(kind);
    out.put_u64_le(body.len() as u64);
    out.put_slice(first);
    for piece in rest.chunks(MAX_FRAME - 1) {
        put_frame(KIND_NEXT, piece, out);
    }
}

/// Appends one frame of `kind` with `body`, fragmented if too large.
fn put_frame(kind: u8, body: &[u8], out: &mut BytesMut) {
    if body.len() + 1 > MAX_FRAME {
        put_fragments(kind, body, out);
        return;
    }
    out.put_u32_le(body.len() as u32 + 1);
    out.put_u8(kind);
    out.put_slice(body);
}

fn encode_broadcast(payload: &[u8], out: &mut BytesMut) {
    put_frame(KIND_BROADCAST, payload, out);
}

/// Encodes the start of a snapshot transfer: the message without its
/// image (`m`'s data must already be taken out) and the image's size.
fn encode_snapshot_start(group: u64, m: &Message, size: usize, out: &mut BytesMut) {
    let start = out.len();
    out.put_u32_le(0);
    out.put_u8(KIND_SNAP_START);
    out.put_u64_le(group);
    out.put_u64_le(size as u64);
    let ok = {
        let mut w = (&mut *out).writer();
        m.write_to_writer(&mut w).is_ok()
    };
    if !ok {
        // An encoding failure leaves a message the receiver refuses; the
        // transfer then fails and Raft retries.
        warn!(group, "snapshot message not encodable");
    }
    finish_frame(start, out);
}

/// Decodes a raft frame body (after the kind byte); errors on any
/// malformed length instead of panicking.
fn decode_raft(mut body: Bytes) -> Result<Vec<(u64, Message)>, String> {
    if body.remaining() < 4 {
        return Err("truncated raft frame".into());
    }
    let count = body.get_u32_le() as usize;
    let mut out = Vec::with_capacity(count.min(MAX_BATCH));
    for _ in 0..count {
        if body.remaining() < 12 {
            return Err("truncated raft frame".into());
        }
        let group = body.get_u64_le();
        let len = body.get_u32_le() as usize;
        if body.remaining() < len {
            return Err("truncated raft message".into());
        }
        let msg = body.split_to(len);
        let m = Message::parse_from_carllerche_bytes(&msg)
            .map_err(|e| format!("bad raft message: {e}"))?;
        out.push((group, m));
    }
    if body.has_remaining() {
        return Err("trailing bytes after the raft messages".into());
    }
    Ok(out)
}

/// What a connection's reader may assemble (the constants in production,
/// smaller in tests).
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// A logical frame (a batch, a broadcast) reassembled from fragments.
    message: usize,
    /// A snapshot image.
    snapshot: u64,
}

/// Largest logical frame reassembled: a batch is cut once it holds
/// [`MAX_BATCH_BYTES`] of payload, so beside one message of up to
/// [`MAX_MESSAGE`] it carries less than that of others (plus their
/// headers, far below another [`MAX_BATCH_BYTES`]).
const MAX_REASSEMBLED: usize = MAX_MESSAGE + 2 * MAX_BATCH_BYTES;

const LIMITS: Limits = Limits {
    message: MAX_REASSEMBLED,
    snapshot: MAX_SNAPSHOT,
};

/// What a complete logical frame delivers.
#[derive(Debug)]
enum Delivery {
    Raft(Vec<(u64, Message)>),
    Broadcast(Bytes),
    /// A snapshot message with its whole image, for the inbox.
    Snapshot(u64, Message),
    /// Part of a fragmented frame or of a snapshot: more to come.
    Partial,
}

/// A fragmented logical frame being reassembled.
struct Fragments {
    kind: u8,
    total: usize,
    data: BytesMut,
}

/// A snapshot image being received.
struct IncomingSnapshot {
    group: u64,
    message: Message,
    size: u64,
    image: BytesMut,
}

/// The per-connection state that turns wire frames into deliveries:
/// fragments join into one logical frame, snapshot chunks into one
/// message. Anything out of order or not adding up is an error (the
/// connection is then dropped), never a panic. Buffers grow as data
/// arrives, never to an announced size up front.
struct Reassembly {
    limits: Limits,
    fragments: Option<Fragments>,
    snapshot: Option<IncomingSnapshot>,
}

impl Reassembly {
    fn new(limits: Limits) -> Reassembly {
        Reassembly {
            limits,
            fragments: None,
            snapshot: None,
        }
    }

    /// Takes one wire frame (its kind and body).
    fn frame(&mut self, kind: u8, mut body: Bytes) -> Result<Delivery, String> {
        match kind {
            KIND_FIRST => {
                if self.fragments.is_some() {
                    return Err("a fragmented frame started inside another".into());
                }
                if body.remaining() < 9 {
                    return Err("truncated fragment header".into());
                }
                let inner = body.get_u8();
                let total = body.get_u64_le();
                if matches!(inner, KIND_FIRST | KIND_NEXT) {
                    return Err("a fragment of fragments".into());
                }
                if total > self.limits.message as u64 {
                    return Err(format!(
                        "fragmented frame of {total} bytes exceeds the limit of {}",
                        self.limits.message
                    ));
                }
                self.fragments = Some(Fragments {
                    kind: inner,
                    total: total as usize,
                    data: BytesMut::with_capacity(body.len()),
                });
                self.add_fragment(body)
            }
            KIND_NEXT => {
                if self.fragments.is_none() {
                    return Err("a fragment without a start".into());
                }
                if body.is_empty() {
                    return Err("an empty fragment".into());
                }
                self.add_fragment(body)
            }
            _ if self.fragments.is_some() => {
                Err(format!("frame of kind {kind} inside a fragmented frame"))
            }
            _ => self.logical(kind, body),
        }
    }

    fn add_fragment(&mut self, data: Bytes) -> Result<Delivery, String> {
        let Some(f) = self.fragments.as_mut() else {
            return Err("a fragment without a start".into());
        };
        if f.data.len() + data.len() > f.total {
            return Err(format!("fragments exceed the announced {} bytes", f.total));
        }
        f.data.extend_from_slice(&data);
        if f.data.len() < f.total {
            return Ok(Delivery::Partial);
        }
        match self.fragments.take() {
            Some(f) => self.logical(f.kind, f.data.freeze()),
            None => Err("a fragment without a start".into()),
        }
    }

    /// Takes one complete logical frame.
    fn logical(&mut self, kind: u8, body: Bytes) -> Result<Delivery, String> {
        if self.snapshot.is_some() && kind != KIND_SNAP_CHUNK {
            return Err(format!("frame of kind {kind} inside a snapshot transfer"));
        }
        match kind {
            KIND_RAFT => decode_raft(body).map(Delivery::Raft),
            KIND_BROADCAST => Ok(Delivery::Broadcast(body)),
            KIND_SNAP_START => self.snapshot_start(body),
            KIND_SNAP_CHUNK => self.snapshot_chunk(body),
            k => Err(format!("unknown frame kind {k}")),
        }
    }

    fn snapshot_start(&mut self, mut body: Bytes) -> Result<Delivery, String> {
        if body.remaining() < 16 {
            return Err("truncated snapshot start".into());
        }
        let group = body.get_u64_le();
        let size = body.get_u64_le();
        let message = Message::parse_from_carllerche_bytes(&body)
            .map_err(|e| format!("bad snapshot message: {e}"))?;
        if message.get_msg_type() != MessageType::MsgSnapshot {
            return Err("snapshot start without a snapshot message".into());
        }
        if !message.get_snapshot().get_data().is_empty() {
            return Err("snapshot start carrying image data".into());
        }
        if size > self.limits.snapshot {
            return Err(format!(
                "snapshot of {size} bytes exceeds the limit of {}",
                self.limits.snapshot
            ));
        }
        self.snapshot = Some(IncomingSnapshot {
            group,
            message,
            size,
            image: BytesMut::with_capacity((size as usize).min(SNAPSHOT_CHUNK)),
        });
        self.snapshot_done()
    }

    fn snapshot_chunk(&mut self, body: Bytes) -> Result<Delivery, String> {
        let Some(s) = self.snapshot.as_mut() else {
            return Err("a snapshot chunk without a start".into());
        };
        if body.is_empty() {
            return Err("an empty snapshot chunk".into());
        }
        if s.image.len() as u64 + body.len() as u64 > s.size {
            return Err(format!(
                "snapshot chunks exceed the announced {} bytes",
                s.size
            ));
        }
        s.image.extend_from_slice(&body);
        self.snapshot_done()
    }

    /// Delivers the snapshot if its image is complete.
    fn snapshot_done(&mut self) -> Result<Delivery, String> {
        match self.snapshot.take() {
            Some(mut s) if s.image.len() as u64 == s.size => {
                s.message.mut_snapshot().set_data(s.image.freeze());
                Ok(Delivery::Snapshot(s.group, s.message))
            }
            pending => {
                self.snapshot = pending;
                Ok(Delivery::Partial)
            }
        }
    }

    /// At the end of the connection: an error if it was cut mid-transfer.
    fn finish(&self) -> Result<(), String> {
        if let Some(f) = &self.fragments {
            return Err(format!(
                "connection closed after {} of {} bytes of a fragmented frame",
                f.data.len(),
                f.total
            ));
        }
        if let Some(s) = &self.snapshot {
            return Err(format!(
                "connection closed after {} of {} bytes of a snapshot for group {}",
                s.image.len(),
                s.size,
                s.group
            ));
        }
        Ok(())
    }
}

impl Transport {
    /// Starts lane 0's sender tasks (one per peer) and the accept loop on
    /// the current `LocalSet`; the links of lanes 1..`lanes` start when
    /// their threads call [`Transport::run_lane`].
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        node_id: u64,
        cluster_id: u64,
        secret: Arc<[u8]>,
        listener: TcpListener,
        peers: &[(u64, String)],
        lanes: usize,
        inboxes: Arc<Inboxes>,
        on_broadcast: BroadcastHandler,
    ) -> Arc<Transport> {
        let peers: Vec<(u64, String)> = peers
            .iter()
            .filter(|(id, _)| *id != node_id)
            .cloned()
            .collect();
        let lane_links: Vec<LaneLinks> = (0..lanes.max(1))
            .map(|_| {
                let mut links = HashMap::new();
                let mut pending = Vec::new();
                for (id, _) in &peers {
                    let (tx, rx) = mpsc::unbounded_channel();
                    let connected = Arc::new(AtomicU64::new(0));
                    let queued = Arc::new(AtomicUsize::new(0));
                    pending.push(PendingLink {
                        to: *id,
                        queue: Queue {
                            rx,
                            queued: queued.clone(),
                        },
                        connected: connected.clone(),
                    });
                    links.insert(
                        *id,
                        Link {
                            tx,
                            connected_since: connected,
                            queued,
                        },
                    );
                }
                LaneLinks {
                    links,
                    running: AtomicBool::new(false),
                    pending: Mutex::new(pending),
                    taken_over: AtomicU64::new(0),
                }
            })
            .collect();
        let inbound: Arc<HashMap<u64, Inbound>> = Arc::new(
            peers
                .iter()
                .map(|(id, _)| (*id, Inbound::default()))
                .collect(),
        );
        let doors: Arc<LaneDoors> = Arc::new(
            (0..lane_links.len())
                .map(|_| Mutex::new(Door::Waiting(Vec::new())))
                .collect(),
        );
        let received = Arc::new(AtomicU64::new(0));
        let t = Arc::new(Transport {
            node_id,
            cluster_id,
            secret: secret.clone(),
            addrs: peers.iter().cloned().collect(),
            leaving_until: peers
                .iter()
                .map(|(id, _)| (*id, AtomicU64::new(0)))
                .collect(),
            lanes: lane_links,
            doors: doors.clone(),
            inbound: inbound.clone(),
            inboxes: inboxes.clone(),
            sent_messages: AtomicU64::new(0),
            received_messages: received.clone(),
        });
        t.start_senders(0);
        tokio::task::spawn_local(accept_loop(
            listener,
            Acceptor {
                me: node_id,
                cluster_id,
                secret,
                inbound,
                doors,
            },
            inboxes,
            on_broadcast,
            received,
        ));
        t
    }

    /// Starts the sender tasks of `lane`'s links on the current `LocalSet`.
    fn start_senders(&self, lane: usize) {
        let Some(l) = self.lanes.get(lane) else {
            return;
        };
        let pending = std::mem::take(&mut *lock(&l.pending));
        for p in pending {
            let Some(addr) = self.addrs.get(&p.to) else {
                continue;
            };
            tokio::task::spawn_local(sender_loop(
                self.secret.clone(),
                handshake(self.cluster_id, self.node_id, p.to, lane),
                p.to,
                addr.clone(),
                p.queue,
                self.inboxes.clone(),
                p.connected,
            ));
        }
        l.running.store(true, Relaxed);
    }

    /// Runs `lane`'s own links on the current `LocalSet` (the lane's
    /// thread): its sender tasks, and the reading of the connections peers
    /// open for it, which deliver to the inboxes from this thread. A lane
    /// the transport was not started with keeps using lane 0's links.
    pub fn run_lane(self: &Arc<Self>, lane: usize) {
        if lane == 0 || lane >= self.lanes.len() {
            return;
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<HandedLink>();
        let opened = Door::Open(tx.clone());
        let waited = match std::mem::replace(&mut *lock(&self.doors[lane]), opened) {
            Door::Waiting(held) => held,
            Door::Open(_) => Vec::new(),
        };
        for h in waited {
            let _ = tx.send(h);
        }
        let t = self.clone();
        tokio::task::spawn_local(async move {
            while let Some(h) = rx.recv().await {
                let stream = match TcpStream::from_std(h.stream) {
                    Ok(s) => s,
                    Err(e) => {
                        warn!(addr = %h.addr, "peer connection not taken over by lane {lane}: {e}");
                        continue;
                    }
                };
                t.lanes[lane].taken_over.fetch_add(1, Relaxed);
                let t = t.clone();
                tokio::task::spawn_local(async move {
                    let Some(link) = t.inbound.get(&h.from) else {
                        return;
                    };
                    if let Err(e) =
                        serve_peer(stream, h.from, link, &t.inboxes, None, &t.received_messages)
                            .await
                    {
                        warn!(addr = %h.addr, lane, "peer connection closed: {e}");
                    }
                });
            }
        });
        self.start_senders(lane);
    }

    /// How many peer connections `lane`'s thread took over from the
    /// acceptor (lane 0: none, its links are read where they are accepted).
    pub fn links_taken_over(&self, lane: usize) -> u64 {
        self.lanes
            .get(lane)
            .map_or(0, |l| l.taken_over.load(Relaxed))
    }

    /// Starts the transport on a thread of its own (`kvasir-bus`), so the
    /// peer connections' reads, writes and framing leave the caller's
    /// thread. Broadcast frames are handed back to the caller's `LocalSet`,
    /// where `on_broadcast` runs (it touches the caller's state).
    #[allow(clippy::too_many_arguments)]
    pub async fn start_on_thread(
        node_id: u64,
        cluster_id: u64,
        secret: Arc<[u8]>,
        listener: TcpListener,
        peers: Vec<(u64, String)>,
        lanes: usize,
        inboxes: Arc<Inboxes>,
        on_broadcast: BroadcastHandler,
    ) -> Result<Arc<Transport>, String> {
        let listener = listener
            .into_std()
            .map_err(|e| format!("cluster bus listener: {e}"))?;
        let (broadcasts, mut broadcast_rx) = mpsc::unbounded_channel::<(u64, Bytes)>();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("kvasir-bus".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("the bus thread: {e}")));
                        return;
                    }
                };
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(format!("cluster bus listener: {e}")));
                            return;
                        }
                    };
                    let forward: BroadcastHandler = Rc::new(move |from, payload| {
                        let _ = broadcasts.send((from, payload));
                    });
                    let t = Transport::start(
                        node_id, cluster_id, secret, listener, &peers, lanes, inboxes, forward,
                    );
                    let _ = ready_tx.send(Ok(t));
                    // The connections' tasks run here for the life of the
                    // process.
                    std::future::pending::<()>().await;
                });
            })
            .map_err(|e| format!("starting the bus thread: {e}"))?;
        tokio::task::spawn_local(async move {
            while let Some((from, payload)) = broadcast_rx.recv().await {
                on_broadcast(from, payload);
            }
        });
        ready_rx
            .await
            .map_err(|_| "the bus thread stopped while starting".to_string())?
    }

    /// The links `lane`'s messages go on: its own once they run.
    fn links_of(&self, lane: usize) -> &HashMap<u64, Link> {
        match self.lanes.get(lane) {
            Some(l) if l.running.load(Relaxed) => &l.links,
            _ => &self.lanes[0].links,
        }
    }

    /// Queues messages of a group of `lane`'s loop for their peers;
    /// snapshot messages go on their own connection.
    pub fn send(&self, lane: usize, group: u64, msgs: Vec<Message>) {
        // A group's messages of one round go to at most a few peers: a
        // short list beats a map allocated per call.
        let mut per_peer: Vec<(u64, Vec<(u64, Message)>)> = Vec::new();
        for m in msgs {
            if m.get_msg_type() == raft::eraftpb::MessageType::MsgSnapshot {
                self.send_snapshot(group, m);
                continue;
            }
            match per_peer.iter_mut().find(|(to, _)| *to == m.to) {
                Some((_, batch)) => batch.push((group, m)),
                None => per_peer.push((m.to, vec![(group, m)])),
            }
        }
        let links = self.links_of(lane);
        for (to, batch) in per_peer {
            self.sent_messages.fetch_add(batch.len() as u64, Relaxed);
            let out = Out::Raft(batch);
            let cost = queued_cost(&out);
            match links.get(&to) {
                // An empty queue takes any item, so one entry larger than
                // the limit (a big SET) still goes out on its own.
                Some(p)
                    if p.queued.load(Relaxed) > 0
                        && p.queued.load(Relaxed) + cost > MAX_QUEUED_BYTES =>
                {
                    if let Out::Raft(batch) = out {
                        self.inboxes
                            .unreachable(batch.into_iter().map(|(g, _)| g), to);
                    }
                }
                Some(p) => {
                    p.queued.fetch_add(cost, Relaxed);
                    let _ = p.tx.send((out, cost));
                }
                None => debug!(to, "message for an unknown node dropped"),
            }
        }
    }

    /// Streams a snapshot to its peer in chunks on a connection of its
    /// own, then reports to Raft whether the peer acknowledged all of it.
    fn send_snapshot(&self, group: u64, m: Message) {
        let to = m.to;
        let Some(addr) = self.addrs.get(&to).cloned() else {
            return;
        };
        // The receiver's acceptor reads it (delivery is by group).
        let hello = handshake(self.cluster_id, self.node_id, to, 0);
        let secret = self.secret.clone();
        let inboxes = self.inboxes.clone();
        // On the sending loop's own thread.
        tokio::task::spawn_local(async move {
            let size = m.get_snapshot().get_data().len();
            let sent = stream_snapshot(&addr, &hello, &secret, group, m).await;
            match &sent {
                Ok(()) => info!(group, to, bytes = size, "snapshot sent"),
                Err(e) => warn!(group, to, bytes = size, "snapshot send failed: {e}"),
            }
            inboxes.snapshot_report(group, to, sent.is_ok());
        });
    }

    /// Sends a broadcast payload (e.g. a PUBLISH) to every peer, on lane
    /// 0's links.
    pub fn broadcast(&self, payload: Bytes) {
        for p in self.lanes[0].links.values() {
            // Best effort, like PUBLISH across Redis Cluster's bus.
            let out = Out::Broadcast(payload.clone());
            let cost = queued_cost(&out);
            if p.queued.load(Relaxed) + cost <= MAX_QUEUED_BYTES {
                p.queued.fetch_add(cost, Relaxed);
                let _ = p.tx.send((out, cost));
            }
        }
    }

    /// The links to `node` whose sender tasks run.
    fn running_links(&self, node: u64) -> impl Iterator<Item = &Link> {
        self.lanes
            .iter()
            .filter(|l| l.running.load(Relaxed))
            .filter_map(move |l| l.links.get(&node))
    }

    /// Bytes queued for a peer, over every lane, not yet handed to its
    /// sockets.
    pub fn queued_bytes(&self, node: u64) -> usize {
        self.lanes
            .iter()
            .filter_map(|l| l.links.get(&node))
            .map(|p| p.queued.load(Relaxed))
            .sum()
    }

    /// Records `node`'s word that it is stopping gracefully and hands its
    /// leaderships away: for `for_ms` it is given none (a stopping node
    /// takes none back, so a transfer to it would only stall its group for
    /// an election timeout). It repeats its word while it stops.
    pub fn mark_leaving(&self, node: u64, for_ms: u64) {
        if let Some(p) = self.leaving_until.get(&node) {
            p.store(unix_ms() + for_ms, Relaxed);
        }
    }

    /// Whether `node` said it is stopping (see [`Transport::mark_leaving`]).
    pub fn is_leaving(&self, node: u64) -> bool {
        self.leaving_until
            .get(&node)
            .is_some_and(|p| p.load(Relaxed) > unix_ms())
    }

    pub fn is_connected(&self, node: u64) -> bool {
        node == self.node_id || self.connected_since(node) != 0
    }

    /// Unix ms since when this node's connections to `node` (one per
    /// running lane) are all up; 0 while one is down.
    pub fn connected_since(&self, node: u64) -> u64 {
        let mut since = 0;
        for p in self.running_links(node) {
            match p.connected_since.load(Relaxed) {
                0 => return 0,
                t => since = since.max(t),
            }
        }
        since
    }

    /// Unix ms when `node`'s connection to this node was accepted (0:
    /// none is open).
    pub fn accepted_since(&self, node: u64) -> u64 {
        self.inbound
            .get(&node)
            .map_or(0, |t| t.accepted_since.load(Relaxed))
    }

    /// Whether `node` is connected and sent this node something within
    /// `within` (a live Raft peer answers every heartbeat): a stopped or
    /// hung process looks connected but is not heard.
    pub fn heard_within(&self, node: u64, within: Duration) -> bool {
        if node == self.node_id {
            return true;
        }
        let heard = self
            .inbound
            .get(&node)
            .map_or(0, |t| t.last_heard.load(Relaxed));
        self.is_connected(node)
            && heard != 0
            && unix_ms().saturating_sub(heard) <= within.as_millis() as u64
    }
}

async fn sender_loop(
    secret: Arc<[u8]>,
    hello: [u8; bus_auth::HELLO_LEN],
    to: u64,
    addr: String,
    mut queue: Queue,
    inbox: Arc<Inboxes>,
    connected: Arc<AtomicU64>,
) {
    let mut backoff = Duration::from_millis(20);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        let stream = match dial(&addr, LINK_TIMEOUT).await {
            Ok(s) => s,
            Err(e) => {
                debug!(to, %addr, "connect failed: {e}");
                // Messages queued meanwhile are stale; Raft resends.
                drain_unreachable(&mut queue, to, &inbox);
                // A dial that timed out has waited already.
                if e.kind() != std::io::ErrorKind::TimedOut {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(REDIAL_MAX);
                }
                if queue.rx.is_closed() {
                    return;
                }
                continue;
            }
        };
        let mut stream = stream;
        tune(&stream);
        if let Err(e) = bus_auth::connect(&mut stream, &hello, &secret).await {
            warn!(to, %addr, "peer handshake failed: {e}");
            drain_unreachable(&mut queue, to, &inbox);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
            if queue.rx.is_closed() {
                return;
            }
            continue;
        }
        info!(to, %addr, "connected to peer");
        connected.store(unix_ms().max(1), Relaxed);
        backoff = Duration::from_millis(20);
        loop {
            let Some(first) = queue.recv().await else {
                return;
            };
            buf.clear();
            let mut raft: Vec<(u64, Message)> = Vec::new();
            // Returns the queued cost it added to the Raft batch (broadcasts
            // are encoded into `buf` at once and counted by its length).
            let push = |(o, cost): (Out, usize), buf: &mut BytesMut, raft: &mut Vec<_>| match o {
                Out::Raft(mut b) => {
                    raft.append(&mut b);
                    cost
                }
                Out::Broadcast(p) => {
                    encode_broadcast(&p, buf);
                    0
                }
            };
            let mut payload = push(first, &mut buf, &mut raft);
            // A batch stays about one frame; a larger single message is
            // fragmented, and written in pieces each within LINK_TIMEOUT.
            while raft.len() < MAX_BATCH && buf.len() + payload < MAX_BATCH_BYTES {
                match queue.try_recv() {
                    Some(o) => payload += push(o, &mut buf, &mut raft),
                    None => break,
                }
            }
            if !raft.is_empty() {
                encode_raft(&raft, &mut buf);
            }
            if let Err(e) = write_pieces(&mut stream, &buf, LINK_TIMEOUT).await {
                warn!(to, "peer connection lost: {e}");
                connected.store(0, Relaxed);
                inbox.unreachable(raft.into_iter().map(|(g, _)| g), to);
                break;
            }
        }
    }
}

/// Most bytes of entries and snapshot data coalesced into one frame.
const MAX_BATCH_BYTES: usize = 8 << 20;

/// The bulk of a batch's encoded size: entry payloads and snapshot data.
fn payload_bytes(batch: &[(u64, Message)]) -> usize {
    batch
        .iter()
        .map(|(_, m)| {
            m.get_entries()
                .iter()
                .map(|e| e.get_data().len() + e.get_context().len())
                .sum::<usize>()
                + m.get_snapshot().get_data().len()
        })
        .sum()
}

/// A peer's outgoing messages and their cost (see [`MAX_QUEUED_BYTES`]).
struct Queue {
    rx: mpsc::UnboundedReceiver<(Out, usize)>,
    queued: Arc<AtomicUsize>,
}

impl Queue {
    fn taken(&self, item: (Out, usize)) -> (Out, usize) {
        // Only this task takes from the queue, so the count never
        // underflows: every item was counted before it was queued.
        self.queued.fetch_sub(item.1, Relaxed);
        item
    }

    async fn recv(&mut self) -> Option<(Out, usize)> {
        let item = self.rx.recv().await?;
        Some(self.taken(item))
    }

    fn try_recv(&mut self) -> Option<(Out, usize)> {
        let item = self.rx.try_recv().ok()?;
        Some(self.taken(item))
    }
}

fn drain_unreachable(queue: &mut Queue, to: u64, inboxes: &Inboxes) {
    let mut groups = Vec::new();
    while let Some((o, _)) = queue.try_recv() {
        if let Out::Raft(b) = o {
            groups.extend(b.into_iter().map(|(g, _)| g));
        }
    }
    if !groups.is_empty() {
        inboxes.unreachable(groups, to);
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A peer's connections to this node, as this node sees them.
#[derive(Default)]
struct Inbound {
    /// Unix ms when its connection was accepted (its first one still
    /// open); 0 while there is none.
    accepted_since: AtomicU64,
    /// Unix ms of the last frame read from it (0: none yet). A process
    /// that is stopped (SIGSTOP) or hung keeps its connections open, its
    /// kernel acknowledging what is sent, but sends nothing.
    last_heard: AtomicU64,
}

/// A peer's accepted connection as CLUSTER LINKS shows it: the first one
/// open stamps the peer's time and clears it when it closes (a snapshot's
/// connection alongside leaves it alone).
struct AcceptedLink<'a> {
    since: &'a AtomicU64,
    stamp: u64,
}

impl<'a> AcceptedLink<'a> {
    fn open(since: &'a AtomicU64) -> AcceptedLink<'a> {
        let stamp = unix_ms().max(1);
        let stamp = match since.compare_exchange(0, stamp, Relaxed, Relaxed) {
            Ok(_) => stamp,
            Err(_) => 0,
        };
        AcceptedLink { since, stamp }
    }
}

impl Drop for AcceptedLink<'_> {
    fn drop(&mut self) {
        if self.stamp != 0 {
            let _ = self.since.compare_exchange(self.stamp, 0, Relaxed, Relaxed);
        }
    }
}

/// What the accept loop needs to check a peer's handshake and to hand its
/// connection to the lane it names.
struct Acceptor {
    me: u64,
    cluster_id: u64,
    secret: Arc<[u8]>,
    inbound: Arc<HashMap<u64, Inbound>>,
    doors: Arc<LaneDoors>,
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Acceptor,
    inbox: Arc<Inboxes>,
    on_broadcast: BroadcastHandler,
    received: Arc<AtomicU64>,
) {
    let acceptor = Rc::new(acceptor);
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        tune(&stream);
        let acceptor = acceptor.clone();
        let inbox = inbox.clone();
        let on_broadcast = on_broadcast.clone();
        let received = received.clone();
        tokio::task::spawn_local(async move {
            let served = async {
                let Some((stream, from, lane)) = authenticate(stream, &acceptor).await? else {
                    return Ok(());
                };
                let stream = match acceptor.doors.get(lane).filter(|_| lane > 0) {
                    Some(door) => {
                        let stream = stream.into_std().map_err(|e| {
                            format!("node {from}: handing over to lane {lane}: {e}")
                        })?;
                        match hand_over(door, HandedLink { stream, from, addr }) {
                            None => return Ok(()),
                            Some(back) => TcpStream::from_std(back.stream)
                                .map_err(|e| format!("node {from}: {e}"))?,
                        }
                    }
                    None => stream,
                };
                let Some(link) = acceptor.inbound.get(&from) else {
                    return Ok(());
                };
                serve_peer(stream, from, link, &inbox, Some(&on_broadcast), &received).await
            };
            if let Err(e) = served.await {
                warn!(%addr, "peer connection closed: {e}");
            }
        });
    }
}

/// Hands a connection to its lane, or holds it until the lane runs; gives
/// it back when the lane stopped or too many wait.
fn hand_over(door: &Mutex<Door>, link: HandedLink) -> Option<HandedLink> {
    match &mut *lock(door) {
        Door::Open(tx) => tx.send(link).err().map(|e| e.0),
        Door::Waiting(held) if held.len() < MAX_WAITING_LINKS => {
            held.push(link);
            None
        }
        Door::Waiting(_) => Some(link),
    }
}

/// Reads and checks a peer's handshake and runs the secret's proof: the
/// stream, the peer's node id and the lane it names, or None for a
/// connection closed before a byte.
async fn authenticate(
    mut stream: TcpStream,
    acceptor: &Acceptor,
) -> Result<Option<(TcpStream, u64, usize)>, String> {
    let mut hello = [0u8; bus_auth::HELLO_LEN];
    let read_hello = async {
        let mut got = 0;
        while got < hello.len() {
            match stream.read(&mut hello[got..]).await {
                // Closed before a byte: a peer's spare dial (see `dial`)
                // or a port check, not worth a warning.
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => return Err("handshake: early eof".to_string()),
                Ok(n) => got += n,
                Err(e) => return Err(format!("handshake: {e}")),
            }
        }
        Ok(true)
    };
    let complete = tokio::time::timeout(Duration::from_secs(5), read_hello)
        .await
        .map_err(|_| "no handshake within 5 s".to_string())??;
    if !complete {
        return Ok(None);
    }
    let field = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&hello[i..i + 8]);
        u64::from_le_bytes(b)
    };
    if &hello[..4] != MAGIC {
        return Err("rejected: not a Kvasir peer of this version (bad magic)".into());
    }
    let (their_cluster, from, to, lane) = (field(4), field(12), field(20), field(28));
    let me = acceptor.me;
    if their_cluster != acceptor.cluster_id {
        return Err(format!(
            "rejected node {from}: cluster id {their_cluster:016x} is not ours ({:016x})",
            acceptor.cluster_id
        ));
    }
    if to != me || !acceptor.inbound.contains_key(&from) {
        return Err(format!(
            "rejected: frame from node {from} to node {to}, but this is node {me} and {from} is not a member"
        ));
    }
    // Nothing beyond the fixed-size handshake is read from a peer that has
    // not proven the cluster secret.
    bus_auth::accept(&mut stream, &hello, &acceptor.secret)
        .await
        .map_err(|e| format!("rejected node {from}: {e}"))?;
    // A lane this node does not run is read by the acceptor's thread.
    let lane = usize::try_from(lane).unwrap_or(0);
    Ok(Some((stream, from, lane)))
}

/// Reads an authenticated peer's frames until the connection ends,
/// delivering them to the loops of their groups. `on_broadcast`: None on
/// a lane's thread, whose links carry no broadcasts.
async fn serve_peer(
    mut stream: TcpStream,
    from: u64,
    link: &Inbound,
    inbox: &Inboxes,
    on_broadcast: Option<&BroadcastHandler>,
    received: &AtomicU64,
) -> Result<(), String> {
    let _link = AcceptedLink::open(&link.accepted_since);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut asm = Reassembly::new(LIMITS);
    loop {
        let Some((kind, body)) = read_frame(&mut stream, &mut buf).await? else {
            return asm.finish().map_err(|e| format!("node {from}: {e}"));
        };
        link.last_heard.store(unix_ms(), Relaxed);
        match asm
            .frame(kind, body)
            .map_err(|e| format!("node {from}: {e}"))?
        {
            Delivery::Raft(msgs) => {
                received.fetch_add(msgs.len() as u64, Relaxed);
                inbox.deliver(msgs);
            }
            Delivery::Broadcast(payload) => match on_broadcast {
                Some(handler) => handler(from, payload),
                None => return Err(format!("node {from}: a broadcast on a lane's link")),
            },
            Delivery::Snapshot(group, m) => {
                let bytes = m.get_snapshot().get_data().len();
                debug!(group, from, bytes, "snapshot received");
                received.fetch_add(1, Relaxed);
                inbox.deliver(vec![(group, m)]);
                // The sender reports the transfer to Raft once told.
                tokio::time::timeout(SNAPSHOT_STALL, stream.write_all(&[SNAPSHOT_ACK]))
                    .await
                    .unwrap_or_else(|_| Err(timed_out("snapshot acknowledgement", SNAPSHOT_STALL)))
                    .map_err(|e| format!("node {from}: {e}"))?;
            }
            Delivery::Partial => {}
        }
    }
}

/// Reads one wire frame: its kind and body, or None at a clean end of the
/// connection (between frames).
async fn read_frame(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
) -> Result<Option<(u8, Bytes)>, String> {
    while buf.len() < 4 {
        if stream.read_buf(buf).await.map_err(|e| e.to_string())? == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err("truncated frame header".into());
        }
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(format!("rejected frame of {len} bytes (limit {MAX_FRAME})"));
    }
    if buf.capacity() < len + 4 {
        buf.reserve(len + 4 - buf.len());
    }
    while buf.len() < len + 4 {
        if stream.read_buf(buf).await.map_err(|e| e.to_string())? == 0 {
            return Err("truncated frame".into());
        }
    }
    buf.advance(4);
    let mut body = buf.split_to(len).freeze();
    let kind = body.get_u8();
    Ok(Some((kind, body)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    async fn wait_for(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if ok() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ok()
    }

    fn append_to(to: u64, from: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(raft::eraftpb::MessageType::MsgAppend);
        m.to = to;
        m.from = from;
        m
    }

    /// Runs a test's transports on one current-thread runtime with a
    /// LocalSet, as a node's bus thread runs them.
    fn on_local_runtime(test: impl std::future::Future<Output = ()>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, test);
    }

    /// With two lanes on each node, lane 1's messages go on lane 1's own
    /// connection, which the peer's lane 1 thread takes over (once it
    /// runs) and reads into its inbox; lane 0's stay with the acceptor's
    /// thread; a message of a group the receiving node runs on another
    /// lane still reaches it.
    #[test]
    fn each_lane_has_its_own_link_read_by_the_peers_same_lane() {
        on_local_runtime(async {
            let l1 = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let l2 = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let peers = vec![
                (1, l1.local_addr().unwrap().to_string()),
                (2, l2.local_addr().unwrap().to_string()),
            ];
            let secret: Arc<[u8]> = Arc::from(&b"s3cret"[..]);
            // Node 2: group 5 on lane 0, group 7 on lane 1.
            let (in0, in1) = (Arc::new(Inbox::default()), Arc::new(Inbox::default()));
            let by_group = HashMap::from([(7u64, in1.clone())]);
            let t2 = Transport::start(
                2,
                9,
                secret.clone(),
                l2,
                &peers,
                2,
                Arc::new(Inboxes::new(in0.clone(), by_group)),
                Rc::new(|_, _| {}),
            );
            let in_a = Arc::new(Inbox::default());
            let t1 = Transport::start(
                1,
                9,
                secret.clone(),
                l1,
                &peers,
                2,
                Arc::new(Inboxes::single(in_a.clone())),
                Rc::new(|_, _| {}),
            );
            t1.run_lane(1);
            // Both of node 1's links are up before node 2's lane 1 runs
            // (as when a node's shard threads are still restoring their
            // groups): node 2 holds the lane's connection for it.
            assert!(wait_for(Duration::from_secs(5), || t1.is_connected(2)).await);
            assert_eq!(t2.links_taken_over(1), 0);
            // Node 2's lane 1 on a thread of its own, as a shard thread.
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let lane_t2 = t2.clone();
            let lane_thread = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    lane_t2.run_lane(1);
                    let _ = stop_rx.await;
                });
            });
            assert!(
                wait_for(Duration::from_secs(5), || t2.links_taken_over(1) == 1).await,
                "node 1's lane 1 link is not read by node 2's lane 1"
            );
            t1.send(1, 7, vec![append_to(2, 1)]);
            t1.send(0, 5, vec![append_to(2, 1)]);
            // Group 5 is on node 2's lane 0 though node 1 sends it from
            // lane 1: delivered by group all the same.
            t1.send(1, 5, vec![append_to(2, 1)]);
            let ok = wait_for(Duration::from_secs(5), || {
                lock(&in1.messages).len() == 1 && lock(&in0.messages).len() == 2
            })
            .await;
            let groups = |i: &Inbox| {
                lock(&i.messages)
                    .iter()
                    .map(|(g, _)| *g)
                    .collect::<Vec<_>>()
            };
            assert!(ok, "lane 1: {:?}, lane 0: {:?}", groups(&in1), groups(&in0));
            assert_eq!(groups(&in1), vec![7]);
            assert_eq!(groups(&in0), vec![5, 5]);
            // The other way too: node 2's lane 1 dialled node 1's lane 1.
            assert!(
                wait_for(Duration::from_secs(5), || t2.is_connected(1)
                    && t1.links_taken_over(1) == 1)
                .await
            );
            assert_eq!((t1.links_taken_over(0), t2.links_taken_over(0)), (0, 0));
            let _ = stop_tx.send(());
            lane_thread.join().unwrap();
        });
    }

    /// A peer that completes the handshake and then never reads (a dead
    /// switch, a frozen process behind a full buffer): the link is declared
    /// lost within about LINK_TIMEOUT once its buffers fill, the queued
    /// messages are reported unreachable, and the peer is dialled again.
    #[test]
    fn a_peer_that_stops_reading_is_dropped_and_redialled() {
        on_local_runtime(async {
            let hole = TcpListener::bind("127.0.0.1:0").await.unwrap();
            // Accepted sockets inherit a small receive buffer: the link
            // fills after a few messages.
            let _ = socket2::SockRef::from(&hole).set_recv_buffer_size(4096);
            let hole_addr = hole.local_addr().unwrap().to_string();
            let accepted = Rc::new(Cell::new(0u32));
            let count = accepted.clone();
            tokio::task::spawn_local(async move {
                let mut kept = Vec::new();
                while let Ok((mut s, _)) = hole.accept().await {
                    let mut hello = [0u8; bus_auth::HELLO_LEN];
                    if s.read_exact(&mut hello).await.is_ok()
                        && bus_auth::accept(&mut s, &hello, b"").await.is_ok()
                    {
                        count.set(count.get() + 1);
                    }
                    kept.push(s); // never read again
                }
            });
            let me = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let inbox = Arc::new(Inbox::default());
            let t = Transport::start(
                1,
                9,
                Arc::from(&b""[..]),
                me,
                &[(2, hole_addr)],
                1,
                Arc::new(Inboxes::single(inbox.clone())),
                Rc::new(|_, _| {}),
            );
            assert!(wait_for(Duration::from_secs(5), || t.is_connected(2)).await);
            // A burst far beyond the queue limit: the excess is dropped and
            // reported unreachable at once, the queue stays bounded.
            for _ in 0..1024 {
                let mut e = raft::eraftpb::Entry::default();
                e.set_data(Bytes::from(vec![7u8; 256 * 1024]));
                let mut m = Message::default();
                m.set_msg_type(raft::eraftpb::MessageType::MsgAppend);
                m.to = 2;
                m.from = 1;
                m.set_entries(vec![e].into());
                t.send(0, 1, vec![m]);
                assert!(t.queued_bytes(2) <= MAX_QUEUED_BYTES);
            }
            assert!(!lock(&inbox.unreachable).is_empty());
            lock(&inbox.unreachable).clear();
            let started = tokio::time::Instant::now();
            // Keep the link busy until the sender gives up on it (it
            // reports the batch it could not send as unreachable).
            while started.elapsed() < Duration::from_secs(15) && lock(&inbox.unreachable).is_empty()
            {
                let mut e = raft::eraftpb::Entry::default();
                e.set_data(Bytes::from(vec![7u8; 256 * 1024]));
                let mut m = Message::default();
                m.set_msg_type(raft::eraftpb::MessageType::MsgAppend);
                m.to = 2;
                m.from = 1;
                m.set_entries(vec![e].into());
                t.send(0, 1, vec![m]);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(
                !lock(&inbox.unreachable).is_empty(),
                "the link to a peer that reads nothing was never dropped"
            );
            println!("link dropped after {:?}", started.elapsed());
            assert!(
                wait_for(Duration::from_secs(5), || accepted.get() >= 2).await,
                "the peer was not dialled again"
            );
        });
    }

    #[test]
    fn raft_frames_round_trip_and_reject_garbage() {
        let m = Message {
            to: 2,
            from: 1,
            term: 7,
            ..Default::default()
        };
        let mut buf = BytesMut::new();
        encode_raft(&[(3, m.clone()), (4, m.clone())], &mut buf);
        let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        assert_eq!(len + 4, buf.len());
        assert_eq!(buf[4], KIND_RAFT);
        let body = Bytes::copy_from_slice(&buf[5..]);
        let got = decode_raft(body.clone()).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].0, got[1].0), (3, 4));
        assert_eq!(got[0].1.term, 7);
        for cut in 0..body.len() {
            assert!(decode_raft(body.slice(..cut)).is_err(), "cut at {cut}");
        }
    }

    /// Splits encoded bytes into wire frames, checking each against the
    /// frame limit.
    fn wire_frames(mut buf: &[u8]) -> Vec<(u8, Bytes)> {
        let mut out = Vec::new();
        while !buf.is_empty() {
            let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            assert!((1..=MAX_FRAME).contains(&len), "frame of {len} bytes");
            out.push((buf[4], Bytes::copy_from_slice(&buf[5..4 + len])));
            buf = &buf[4 + len..];
        }
        out
    }

    /// Feeds frames to a reassembly; every delivery but the last must be
    /// partial.
    fn feed(asm: &mut Reassembly, frames: Vec<(u8, Bytes)>) -> Result<Delivery, String> {
        let n = frames.len();
        let mut last = Delivery::Partial;
        for (i, (kind, body)) in frames.into_iter().enumerate() {
            last = asm.frame(kind, body)?;
            if i + 1 < n {
                assert!(matches!(last, Delivery::Partial), "early delivery at {i}");
            }
        }
        Ok(last)
    }

    fn image(len: usize) -> Bytes {
        Bytes::from((0..len).map(|i| (i * 31 % 251) as u8).collect::<Vec<_>>())
    }

    fn snapshot_message(data: Bytes) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgSnapshot);
        m.to = 2;
        m.from = 1;
        m.term = 5;
        m.mut_snapshot().mut_metadata().index = 77;
        m.mut_snapshot().set_data(data);
        m
    }

    /// What the snapshot sender writes, as one buffer.
    fn snapshot_wire(group: u64, mut m: Message) -> BytesMut {
        let data = m.mut_snapshot().take_data();
        let mut buf = BytesMut::new();
        encode_snapshot_start(group, &m, data.len(), &mut buf);
        for chunk in data.chunks(SNAPSHOT_CHUNK) {
            put_frame(KIND_SNAP_CHUNK, chunk, &mut buf);
        }
        buf
    }

    fn append_message(data: Bytes) -> Message {
        let mut e = raft::eraftpb::Entry {
            index: 9,
            ..Default::default()
        };
        e.set_data(data);
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.to = 2;
        m.from = 1;
        m.set_entries(vec![e].into());
        m
    }

    #[test]
    fn a_chunked_snapshot_reassembles_into_one_message() {
        for len in [0, 1, SNAPSHOT_CHUNK, 2 * SNAPSHOT_CHUNK + 12345] {
            let data = image(len);
            let frames = wire_frames(&snapshot_wire(4, snapshot_message(data.clone())));
            assert_eq!(frames.len(), 1 + len.div_ceil(SNAPSHOT_CHUNK));
            let mut asm = Reassembly::new(LIMITS);
            let Delivery::Snapshot(group, m) = feed(&mut asm, frames).unwrap() else {
                panic!("no snapshot delivered for {len} bytes");
            };
            assert_eq!(group, 4);
            assert_eq!(m.get_msg_type(), MessageType::MsgSnapshot);
            assert_eq!((m.term, m.get_snapshot().get_metadata().index), (5, 77));
            assert!(
                m.get_snapshot().get_data() == &data[..],
                "image of {len} bytes"
            );
            assert!(asm.finish().is_ok());
            // The connection can carry another transfer afterwards.
            let again = wire_frames(&snapshot_wire(4, snapshot_message(image(3))));
            assert!(matches!(
                feed(&mut asm, again),
                Ok(Delivery::Snapshot(4, _))
            ));
        }
    }

    #[test]
    fn a_message_larger_than_a_frame_is_fragmented_and_reassembled() {
        let data = image(20 << 20);
        let small = append_message(image(10));
        let mut buf = BytesMut::new();
        encode_broadcast(b"before", &mut buf);
        encode_raft(&[(3, small), (5, append_message(data.clone()))], &mut buf);
        encode_broadcast(&image(MAX_FRAME + 5), &mut buf);
        let frames = wire_frames(&buf);
        let kinds: Vec<u8> = frames.iter().map(|f| f.0).collect();
        assert_eq!(
            kinds,
            [KIND_BROADCAST, KIND_FIRST, KIND_NEXT, KIND_FIRST, KIND_NEXT],
            "a 20 MiB message and a 16 MiB broadcast take two frames each"
        );
        let mut asm = Reassembly::new(LIMITS);
        let mut it = frames.into_iter();
        let mut next = |n: usize| feed(&mut asm, it.by_ref().take(n).collect()).unwrap();
        assert!(matches!(next(1), Delivery::Broadcast(b) if &b[..] == b"before"));
        let Delivery::Raft(msgs) = next(2) else {
            panic!("raft batch not delivered");
        };
        assert_eq!(msgs.len(), 2);
        assert_eq!((msgs[0].0, msgs[1].0), (3, 5));
        assert!(msgs[1].1.get_entries()[0].get_data() == &data[..]);
        assert!(matches!(next(2), Delivery::Broadcast(b) if b.len() == MAX_FRAME + 5));
        assert!(asm.finish().is_ok());
    }

    fn first(inner: u8, total: u64, data: &[u8]) -> (u8, Bytes) {
        let mut b = BytesMut::new();
        b.put_u8(inner);
        b.put_u64_le(total);
        b.put_slice(data);
        (KIND_FIRST, b.freeze())
    }

    fn snap_start(group: u64, size: u64, m: &Message) -> (u8, Bytes) {
        let mut b = BytesMut::new();
        encode_snapshot_start(group, m, size as usize, &mut b);
        wire_frames(&b).remove(0)
    }

    #[test]
    fn malformed_sequences_are_refused() {
        let small = Limits {
            message: 1000,
            snapshot: 5000,
        };
        let head = snapshot_message(Bytes::new());
        let raft = {
            let mut b = BytesMut::new();
            encode_raft(&[(1, append_message(image(5)))], &mut b);
            wire_frames(&b).remove(0)
        };
        let chunk = |n: usize| (KIND_SNAP_CHUNK, image(n));
        let next = |n: usize| (KIND_NEXT, image(n));
        let cases: Vec<(&str, Vec<(u8, Bytes)>)> = vec![
            ("fragment without a start", vec![next(10)]),
            (
                "fragment inside another",
                vec![first(KIND_RAFT, 100, b"x"), first(KIND_RAFT, 100, b"x")],
            ),
            (
                "frame inside a fragmented frame",
                vec![first(KIND_RAFT, 100, b"x"), raft.clone()],
            ),
            (
                "fragments beyond their total",
                vec![first(KIND_BROADCAST, 20, &[1; 10]), next(11)],
            ),
            (
                "first beyond its total",
                vec![first(KIND_BROADCAST, 5, &[1; 10])],
            ),
            (
                "fragmented frame over the limit",
                vec![first(KIND_BROADCAST, 1001, b"x")],
            ),
            ("fragment of fragments", vec![first(KIND_NEXT, 100, b"x")]),
            (
                "truncated fragment header",
                vec![(KIND_FIRST, Bytes::from_static(&[KIND_RAFT, 1, 2]))],
            ),
            (
                "empty fragment",
                vec![first(KIND_BROADCAST, 20, b"x"), next(0)],
            ),
            ("unknown kind", vec![(99, Bytes::from_static(b"?"))]),
            ("unknown kind fragmented", vec![first(99, 2, b"?!")]),
            ("chunk without a start", vec![chunk(10)]),
            ("snapshot over the limit", vec![snap_start(1, 5001, &head)]),
            (
                "chunks beyond the size",
                vec![snap_start(1, 100, &head), chunk(60), chunk(41)],
            ),
            ("empty chunk", vec![snap_start(1, 100, &head), chunk(0)]),
            (
                "start inside a transfer",
                vec![snap_start(1, 100, &head), snap_start(1, 100, &head)],
            ),
            (
                "raft inside a transfer",
                vec![snap_start(1, 100, &head), chunk(10), raft.clone()],
            ),
            (
                "start with image data",
                vec![snap_start(1, 3, &snapshot_message(image(3)))],
            ),
            (
                "start with another message",
                vec![snap_start(1, 3, &append_message(image(3)))],
            ),
            (
                "truncated start",
                vec![(KIND_SNAP_START, Bytes::from_static(&[0; 15]))],
            ),
            (
                "garbage start",
                vec![(KIND_SNAP_START, Bytes::from(vec![0xff; 40]))],
            ),
        ];
        for (what, frames) in cases {
            let mut asm = Reassembly::new(small);
            assert!(feed(&mut asm, frames).is_err(), "{what} accepted");
        }
        // Cut transfers are refused when the connection ends.
        for frames in [
            vec![first(KIND_BROADCAST, 20, &[1; 10])],
            vec![snap_start(1, 100, &head), chunk(99)],
        ] {
            let mut asm = Reassembly::new(small);
            assert!(matches!(feed(&mut asm, frames), Ok(Delivery::Partial)));
            assert!(asm.finish().is_err());
        }
        // Random frames never panic.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let mut asm = Reassembly::new(small);
            for _ in 0..(rand() % 6) {
                let kind = (rand() % 8) as u8;
                let body: Vec<u8> = (0..rand() % 40).map(|_| rand() as u8).collect();
                if asm.frame(kind, Bytes::from(body)).is_err() {
                    break;
                }
            }
            let _ = asm.finish();
        }
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, a) = tokio::join!(TcpStream::connect(addr), l.accept());
        (c.unwrap(), a.unwrap().0)
    }

    #[tokio::test]
    async fn a_frame_over_the_limit_is_refused_before_it_is_read() {
        let (mut w, mut r) = pair().await;
        w.write_all(&((MAX_FRAME + 1) as u32).to_le_bytes())
            .await
            .unwrap();
        let mut buf = BytesMut::new();
        let err = read_frame(&mut r, &mut buf).await.unwrap_err();
        assert!(err.contains("rejected frame"), "{err}");
        assert!(
            buf.capacity() < MAX_FRAME,
            "a read buffer for the refused frame"
        );
        // A frame at the limit is read.
        let mut b = BytesMut::new();
        put_frame(KIND_BROADCAST, &image(MAX_FRAME - 1), &mut b);
        assert_eq!(b.len(), MAX_FRAME + 4);
        let (mut w, mut r) = pair().await;
        let mut buf = BytesMut::new();
        let writer = async move { w.write_all(&b).await.unwrap() };
        let (_, got) = tokio::join!(writer, read_frame(&mut r, &mut buf));
        let (kind, body) = got.unwrap().unwrap();
        assert_eq!((kind, body.len()), (KIND_BROADCAST, MAX_FRAME - 1));
    }

    /// Two transports on localhost: a snapshot of several chunks reaches
    /// the other node's inbox whole and is reported delivered; a receiver
    /// that hangs up mid-transfer makes the sender report a failure.
    #[test]
    fn snapshots_stream_between_nodes_and_a_cut_transfer_is_reported() {
        on_local_runtime(async {
            let l1 = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let l2 = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let cut = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let peers = vec![
                (1, l1.local_addr().unwrap().to_string()),
                (2, l2.local_addr().unwrap().to_string()),
                (3, cut.local_addr().unwrap().to_string()),
            ];
            let secret: Arc<[u8]> = Arc::from(&b"s"[..]);
            let (in1, in2) = (Arc::new(Inbox::default()), Arc::new(Inbox::default()));
            let start = |id, l, inbox: &Arc<Inbox>| {
                Transport::start(
                    id,
                    9,
                    secret.clone(),
                    l,
                    &peers,
                    1,
                    Arc::new(Inboxes::single(inbox.clone())),
                    Rc::new(|_, _| {}),
                )
            };
            let t1 = start(1, l1, &in1);
            let _t2 = start(2, l2, &in2);
            // Node 3 authenticates, reads a little, and hangs up.
            let secret3 = secret.clone();
            tokio::task::spawn_local(async move {
                while let Ok((mut s, _)) = cut.accept().await {
                    let secret3 = secret3.clone();
                    tokio::task::spawn_local(async move {
                        let mut hello = [0u8; bus_auth::HELLO_LEN];
                        if s.read_exact(&mut hello).await.is_ok()
                            && bus_auth::accept(&mut s, &hello, &secret3).await.is_ok()
                        {
                            let mut some = vec![0u8; 1 << 20];
                            let _ = s.read_exact(&mut some).await;
                        }
                    });
                }
            });
            let data = image(3 * SNAPSHOT_CHUNK + 7);
            t1.send(0, 6, vec![snapshot_message(data.clone())]);
            let mut to3 = snapshot_message(data.clone());
            to3.to = 3;
            t1.send(0, 6, vec![to3]);
            assert!(
                wait_for(Duration::from_secs(20), || lock(&in1.snapshot_reports)
                    .len()
                    == 2)
                .await,
                "both transfers reported"
            );
            let mut reports = lock(&in1.snapshot_reports).clone();
            reports.sort();
            assert_eq!(reports, [(6, 2, true), (6, 3, false)]);
            let got = lock(&in2.messages);
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].0, 6);
            assert!(got[0].1.get_snapshot().get_data() == &data[..]);
        });
    }
}
