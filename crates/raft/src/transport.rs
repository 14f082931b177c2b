//! Peer transport: one outbound TCP connection per peer node carrying
//! length-prefixed frames that batch Raft messages of many groups; inbound
//! connections are read and handed to the node's inbox. Every connection
//! starts with a handshake naming the cluster and both node ids, so a frame
//! from another cluster or an unknown node is refused. Snapshot messages
//! travel on a connection of their own so a large image never delays the
//! heartbeats of other groups.

use crate::bus_auth;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use protobuf::Message as _;
use raft::eraftpb::Message;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tracing::{debug, info, warn};

const MAGIC: &[u8; 4] = b"KVR1";
const KIND_RAFT: u8 = 1;
const KIND_BROADCAST: u8 = 2;
/// Largest frame accepted: a snapshot image travels in one frame.
pub const MAX_FRAME: usize = 1 << 30;
/// Most messages coalesced into one frame.
const MAX_BATCH: usize = 4096;
/// A peer link that accepts no data for this long (a write that does not
/// complete, data the kernel cannot get acknowledged, a connect that does
/// not finish) is dropped and dialled again: a dead or cut-off peer is
/// noticed within about one election timeout instead of after the kernel's
/// retransmission give-up (minutes), and a healed link is used again within
/// a reconnect backoff.
pub const LINK_TIMEOUT: Duration = Duration::from_secs(1);

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

/// What arrived from peers, drained by the node loop each round.
#[derive(Default)]
pub struct Inbox {
    pub messages: RefCell<Vec<(u64, Message)>>,
    /// (group, peer, delivered) for snapshot sends.
    pub snapshot_reports: RefCell<Vec<(u64, u64, bool)>>,
    /// (group, peer) whose message could not be sent.
    pub unreachable: RefCell<Vec<(u64, u64)>>,
    pub wake: Notify,
}

/// Called with (from node, payload) for each broadcast frame (PUBLISH).
pub type BroadcastHandler = Rc<dyn Fn(u64, Bytes)>;

enum Out {
    Raft(Vec<(u64, Message)>),
    Broadcast(Bytes),
}

struct Peer {
    addr: String,
    /// Each item with its cost, computed once when queued.
    tx: mpsc::UnboundedSender<(Out, usize)>,
    connected: Rc<Cell<bool>>,
    /// Bytes (estimated) of the messages queued for the sender task.
    queued: Rc<Cell<usize>>,
}

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

pub struct Transport {
    node_id: u64,
    cluster_id: u64,
    /// The cluster secret peers prove in the handshake (empty: none).
    secret: Rc<[u8]>,
    peers: HashMap<u64, Peer>,
    inbox: Rc<Inbox>,
    pub sent_messages: Cell<u64>,
    pub received_messages: Rc<Cell<u64>>,
}

fn handshake(cluster_id: u64, from: u64, to: u64) -> [u8; bus_auth::HELLO_LEN] {
    let mut h = [0u8; bus_auth::HELLO_LEN];
    h[..4].copy_from_slice(MAGIC);
    h[4..12].copy_from_slice(&cluster_id.to_le_bytes());
    h[12..20].copy_from_slice(&from.to_le_bytes());
    h[20..28].copy_from_slice(&to.to_le_bytes());
    h
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
        if !ok {
            // Cannot happen for a well-formed message; drop it (Raft resends).
            out.truncate(at);
            continue;
        }
        let n = (out.len() - body_at) as u32;
        out[body_at - 4..body_at].copy_from_slice(&n.to_le_bytes());
        count += 1;
    }
    let n = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&n.to_le_bytes());
    out[start + 5..start + 9].copy_from_slice(&count.to_le_bytes());
}

fn encode_broadcast(payload: &[u8], out: &mut BytesMut) {
    out.put_u32_le(payload.len() as u32 + 1);
    out.put_u8(KIND_BROADCAST);
    out.put_slice(payload);
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
    Ok(out)
}

impl Transport {
    /// Starts the sender tasks (one per peer) and the accept loop on the
    /// current `LocalSet`.
    pub fn start(
        node_id: u64,
        cluster_id: u64,
        secret: Rc<[u8]>,
        listener: TcpListener,
        peers: &[(u64, String)],
        inbox: Rc<Inbox>,
        on_broadcast: BroadcastHandler,
    ) -> Rc<Transport> {
        let mut map = HashMap::new();
        for (id, addr) in peers {
            if *id == node_id {
                continue;
            }
            let (tx, rx) = mpsc::unbounded_channel();
            let connected = Rc::new(Cell::new(false));
            let queued = Rc::new(Cell::new(0));
            tokio::task::spawn_local(sender_loop(
                node_id,
                cluster_id,
                secret.clone(),
                *id,
                addr.clone(),
                Queue {
                    rx,
                    queued: queued.clone(),
                },
                inbox.clone(),
                connected.clone(),
            ));
            map.insert(
                *id,
                Peer {
                    addr: addr.clone(),
                    tx,
                    connected,
                    queued,
                },
            );
        }
        let known: Vec<u64> = map.keys().copied().collect();
        let received = Rc::new(Cell::new(0));
        tokio::task::spawn_local(accept_loop(
            listener,
            node_id,
            cluster_id,
            secret.clone(),
            known,
            inbox.clone(),
            on_broadcast,
            received.clone(),
        ));
        Rc::new(Transport {
            node_id,
            cluster_id,
            secret,
            peers: map,
            inbox,
            sent_messages: Cell::new(0),
            received_messages: received,
        })
    }

    /// Queues messages for their peers; snapshot messages go on their own
    /// connection.
    pub fn send(&self, group: u64, msgs: Vec<Message>) {
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
        for (to, batch) in per_peer {
            self.sent_messages
                .set(self.sent_messages.get() + batch.len() as u64);
            let out = Out::Raft(batch);
            let cost = queued_cost(&out);
            match self.peers.get(&to) {
                Some(p) if p.queued.get() + cost > MAX_QUEUED_BYTES => {
                    if let Out::Raft(batch) = out {
                        for (g, _) in batch {
                            self.inbox.unreachable.borrow_mut().push((g, to));
                        }
                    }
                    self.inbox.wake.notify_one();
                }
                Some(p) => {
                    p.queued.set(p.queued.get() + cost);
                    let _ = p.tx.send((out, cost));
                }
                None => debug!(to, "message for an unknown node dropped"),
            }
        }
    }

    fn send_snapshot(&self, group: u64, m: Message) {
        let to = m.to;
        let Some(peer) = self.peers.get(&to) else {
            return;
        };
        let addr = peer.addr.clone();
        let hello = handshake(self.cluster_id, self.node_id, to);
        let secret = self.secret.clone();
        let inbox = self.inbox.clone();
        tokio::task::spawn_local(async move {
            let mut buf = BytesMut::new();
            encode_raft(&[(group, m)], &mut buf);
            let size = buf.len();
            let sent = async {
                let mut s = TcpStream::connect(&addr).await?;
                s.set_nodelay(true)?;
                bus_auth::connect(&mut s, &hello, &secret)
                    .await
                    .map_err(std::io::Error::other)?;
                s.write_all(&buf).await?;
                s.flush().await?;
                // Wait for the peer to close: it has read the frame.
                let mut probe = [0u8; 1];
                let _ = tokio::time::timeout(Duration::from_secs(60), s.read(&mut probe)).await;
                Ok::<_, std::io::Error>(())
            }
            .await;
            match &sent {
                Ok(()) => info!(group, to, bytes = size, "snapshot sent"),
                Err(e) => warn!(group, to, "snapshot send failed: {e}"),
            }
            inbox
                .snapshot_reports
                .borrow_mut()
                .push((group, to, sent.is_ok()));
            inbox.wake.notify_one();
        });
    }

    /// Sends a broadcast payload (e.g. a PUBLISH) to every peer.
    pub fn broadcast(&self, payload: Bytes) {
        for p in self.peers.values() {
            // Best effort, like PUBLISH across Redis Cluster's bus.
            let out = Out::Broadcast(payload.clone());
            let cost = queued_cost(&out);
            if p.queued.get() + cost <= MAX_QUEUED_BYTES {
                p.queued.set(p.queued.get() + cost);
                let _ = p.tx.send((out, cost));
            }
        }
    }

    /// Bytes queued for a peer and not yet handed to its socket.
    pub fn queued_bytes(&self, node: u64) -> usize {
        self.peers.get(&node).map_or(0, |p| p.queued.get())
    }

    pub fn is_connected(&self, node: u64) -> bool {
        node == self.node_id || self.peers.get(&node).is_some_and(|p| p.connected.get())
    }
}

#[allow(clippy::too_many_arguments)]
async fn sender_loop(
    me: u64,
    cluster_id: u64,
    secret: Rc<[u8]>,
    to: u64,
    addr: String,
    mut queue: Queue,
    inbox: Rc<Inbox>,
    connected: Rc<Cell<bool>>,
) {
    let mut backoff = Duration::from_millis(20);
    let hello = handshake(cluster_id, me, to);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        let connect = tokio::time::timeout(LINK_TIMEOUT, TcpStream::connect(&addr)).await;
        let stream = match connect.unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connect timed out",
            ))
        }) {
            Ok(s) => s,
            Err(e) => {
                debug!(to, %addr, "connect failed: {e}");
                // Messages queued meanwhile are stale; Raft resends.
                drain_unreachable(&mut queue, to, &inbox);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
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
        connected.set(true);
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
            // A frame stays small enough to be written well within
            // LINK_TIMEOUT on a healthy link.
            while raft.len() < MAX_BATCH && buf.len() + payload < MAX_BATCH_BYTES {
                match queue.try_recv() {
                    Some(o) => payload += push(o, &mut buf, &mut raft),
                    None => break,
                }
            }
            if !raft.is_empty() {
                encode_raft(&raft, &mut buf);
            }
            let written = tokio::time::timeout(LINK_TIMEOUT, stream.write_all(&buf))
                .await
                .unwrap_or_else(|_| {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no progress for {LINK_TIMEOUT:?}"),
                    ))
                });
            if let Err(e) = written {
                warn!(to, "peer connection lost: {e}");
                connected.set(false);
                for (g, _) in raft {
                    inbox.unreachable.borrow_mut().push((g, to));
                }
                inbox.wake.notify_one();
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
    queued: Rc<Cell<usize>>,
}

impl Queue {
    fn taken(&self, item: (Out, usize)) -> (Out, usize) {
        self.queued.set(self.queued.get().saturating_sub(item.1));
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

fn drain_unreachable(queue: &mut Queue, to: u64, inbox: &Inbox) {
    let mut any = false;
    while let Some((o, _)) = queue.try_recv() {
        if let Out::Raft(b) = o {
            for (g, _) in b {
                inbox.unreachable.borrow_mut().push((g, to));
                any = true;
            }
        }
    }
    if any {
        inbox.wake.notify_one();
    }
}

#[allow(clippy::too_many_arguments)]
async fn accept_loop(
    listener: TcpListener,
    me: u64,
    cluster_id: u64,
    secret: Rc<[u8]>,
    known: Vec<u64>,
    inbox: Rc<Inbox>,
    on_broadcast: BroadcastHandler,
    received: Rc<Cell<u64>>,
) {
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        tune(&stream);
        let known = known.clone();
        let inbox = inbox.clone();
        let on_broadcast = on_broadcast.clone();
        let received = received.clone();
        let secret = secret.clone();
        tokio::task::spawn_local(async move {
            if let Err(e) = read_peer(
                stream,
                me,
                cluster_id,
                &secret,
                &known,
                &inbox,
                &on_broadcast,
                &received,
            )
            .await
            {
                warn!(%addr, "peer connection closed: {e}");
            }
        });
    }
}

#[allow(clippy::too_many_arguments)]
async fn read_peer(
    mut stream: TcpStream,
    me: u64,
    cluster_id: u64,
    secret: &[u8],
    known: &[u64],
    inbox: &Inbox,
    on_broadcast: &BroadcastHandler,
    received: &Cell<u64>,
) -> Result<(), String> {
    let mut hello = [0u8; 28];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut hello))
        .await
        .map_err(|_| "no handshake within 5 s".to_string())?
        .map_err(|e| format!("handshake: {e}"))?;
    let field = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&hello[i..i + 8]);
        u64::from_le_bytes(b)
    };
    if &hello[..4] != MAGIC {
        return Err("rejected: not a Kvasir peer (bad magic)".into());
    }
    let (their_cluster, from, to) = (field(4), field(12), field(20));
    if their_cluster != cluster_id {
        return Err(format!(
            "rejected node {from}: cluster id {their_cluster:016x} is not ours ({cluster_id:016x})"
        ));
    }
    if to != me || !known.contains(&from) {
        return Err(format!(
            "rejected: frame from node {from} to node {to}, but this is node {me} and {from} is not a member"
        ));
    }
    // Nothing beyond the fixed-size handshake is read from a peer that has
    // not proven the cluster secret.
    bus_auth::accept(&mut stream, &hello, secret)
        .await
        .map_err(|e| format!("rejected node {from}: {e}"))?;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        while buf.len() < 4 {
            if stream.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
                return Ok(());
            }
        }
        let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len == 0 || len > MAX_FRAME {
            return Err(format!("rejected frame of {len} bytes from node {from}"));
        }
        if buf.capacity() < len + 4 {
            buf.reserve(len + 4 - buf.len());
        }
        while buf.len() < len + 4 {
            if stream.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
                return Err("truncated frame".into());
            }
        }
        buf.advance(4);
        let mut body = buf.split_to(len).freeze();
        let kind = body.get_u8();
        match kind {
            KIND_RAFT => {
                let msgs = decode_raft(body).map_err(|e| format!("node {from}: {e}"))?;
                received.set(received.get() + msgs.len() as u64);
                inbox.messages.borrow_mut().extend(msgs);
                inbox.wake.notify_one();
            }
            KIND_BROADCAST => on_broadcast(from, body),
            k => return Err(format!("unknown frame kind {k} from node {from}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A peer that completes the handshake and then never reads (a dead
    /// switch, a frozen process behind a full buffer): the link is declared
    /// lost within about LINK_TIMEOUT once its buffers fill, the queued
    /// messages are reported unreachable, and the peer is dialled again.
    #[test]
    fn a_peer_that_stops_reading_is_dropped_and_redialled() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
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
            let inbox = Rc::new(Inbox::default());
            let t = Transport::start(
                1,
                9,
                Rc::from(&b""[..]),
                me,
                &[(2, hole_addr)],
                inbox.clone(),
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
                t.send(1, vec![m]);
                assert!(t.queued_bytes(2) <= MAX_QUEUED_BYTES);
            }
            assert!(!inbox.unreachable.borrow().is_empty());
            inbox.unreachable.borrow_mut().clear();
            let started = tokio::time::Instant::now();
            // Keep the link busy until the sender gives up on it (it
            // reports the batch it could not send as unreachable).
            while started.elapsed() < Duration::from_secs(15)
                && inbox.unreachable.borrow().is_empty()
            {
                let mut e = raft::eraftpb::Entry::default();
                e.set_data(Bytes::from(vec![7u8; 256 * 1024]));
                let mut m = Message::default();
                m.set_msg_type(raft::eraftpb::MessageType::MsgAppend);
                m.to = 2;
                m.from = 1;
                m.set_entries(vec![e].into());
                t.send(1, vec![m]);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(
                !inbox.unreachable.borrow().is_empty(),
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
}
