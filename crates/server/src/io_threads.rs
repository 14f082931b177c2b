//! I/O threads (`--threads N`, N > 1): N-1 threads that do the socket
//! reads and writes of client connections and parse the requests, as
//! Valkey 8's I/O threads do, while the data thread keeps everything else
//! (running the commands, routing, every shard, pub/sub, blocking, the Raft
//! loop).
//!
//! The accept loops stay on the data thread (maxclients, stats) and hand
//! each accepted socket, TCP or Unix, round-robin to an I/O thread, where a
//! pump moves bytes between the socket and the session's [`ChannelConn`]:
//!
//! - reads: as much as the socket has (a 16 KiB buffer at least), each read
//!   forwarded as one [`Input`] into a bounded channel. A session that does
//!   not consume stops the pump from reading, so TCP flow control still
//!   bounds memory. EOF or a socket error closes the channel: the session
//!   sees EOF as it would on the socket.
//! - parsing: the pump splits every complete multibulk request off what it
//!   read and hands the session the arguments, the session's parser's work
//!   done on this thread. What it cannot parse exactly as the session would
//!   it hands over as bytes (raw) for the session's own parser, and parses
//!   again only once the session has parsed all of those ([`ParseGate`]):
//!   a client that still has to authenticate (AUTH inside a pipeline lifts
//!   the limits for the requests after it), an inline request, a protocol
//!   error, a request larger than [`PARSE_AHEAD_MAX`] (the query buffer
//!   limit, CLIENT LIST's qbuf and the reservation for a large argument stay
//!   the session's). The session checks each parsed request against its
//!   limits of the moment ([`kvasir_resp::Limits::check_parsed`]), so a
//!   CONFIG SET of `proto-max-bulk-len` or an ACL change applies from the
//!   next request on, as in Redis.
//! - writes: every chunk from the session's bounded channel, the chunks
//!   already queued coalesced into one vectored write. When the session
//!   ends (its channel ends dropped), the pump writes what is queued, shuts
//!   the socket down and exits.
//! - direct routes (cluster mode with shard threads): a plain keyed
//!   request goes from the pump to its shard's loop and its reply back to
//!   the pump, without the session ([`crate::cluster::direct`]). The
//!   session says (`ParseGate::will_have_answered`) when it answered
//!   everything and whether the connection may; the pump routes only then,
//!   and sends what it cannot route to the session only once the routed
//!   replies before it are written, so replies keep request order.

use crate::client_conn::{ChannelConn, ClientAddr};
use crate::cluster::direct::{DirectCall, DirectRoutes, InFlight, JobBatch, Tally};
use bytes::{Buf, Bytes, BytesMut};
use kvasir_resp::{parse_command, Limits, Parsed};
use std::cell::Cell;
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::mpsc;

/// The pump's read buffer: Redis's PROTO_IOBUF_LEN. An idle connection
/// holds one of these; a busy one reads up to its free space at once.
const READ_CHUNK: usize = 16 * 1024;
/// Chunks in flight each way per connection. Inbound this bounds what sits
/// between the socket and the query buffer (at most this many reads);
/// outbound it bounds the replies not yet written.
const CHANNEL_CHUNKS: usize = 16;
/// Most chunks handed to one `writev`.
const MAX_IOV: usize = 32;
/// The largest part of a request the pump holds while it waits for the
/// rest; a longer one goes to the session unparsed, whose query buffer
/// accounting and limit then apply to it.
pub const PARSE_AHEAD_MAX: usize = 64 * 1024;

/// What one or more socket reads brought, for the session.
#[derive(Default)]
pub struct Input {
    /// Requests the pump parsed, in order; they come before `raw`.
    pub commands: Vec<Vec<Bytes>>,
    /// Their size as they were sent: the part of the query buffer they
    /// are while they run (CLIENT LIST's qbuf).
    pub command_bytes: usize,
    /// Bytes for the session's own parser (may be empty).
    pub raw: Bytes,
    /// Bytes read from the socket since the last message (INFO's
    /// total_net_input_bytes).
    pub read: usize,
}

/// Two wrapping counts in one word (compared for equality only).
fn pack_counts(high: u64, low: u64) -> u64 {
    (high << 32) | (low & 0xffff_ffff)
}

impl Input {
    fn is_empty(&self) -> bool {
        self.commands.is_empty() && self.raw.is_empty()
    }
}

/// What a session and its pump tell each other about parsing.
#[derive(Default)]
pub struct ParseGate {
    /// The `proto-max-bulk-len` the pump parses with; 0 while it must not
    /// parse (the client has not authenticated).
    max_bulk_len: AtomicUsize,
    /// How many of the raw bytes the session had parsed, all of them, when
    /// its query buffer was last empty.
    raw_consumed: AtomicU64,
    /// The start of a request the pump holds until its rest comes: part
    /// of the client's query buffer (CLIENT LIST's qbuf, INFO's client
    /// memory), as it would be in Redis's.
    held: AtomicUsize,
    /// The session's side: the messages it answered and the reply chunks
    /// it will have sent once their replies are (each a wrapping count, in
    /// the high and low half), stored before it sends the last chunk so the
    /// pump knows before the client can see the reply.
    answered: AtomicU64,
    /// The session's side, stored before `answered`: the protocol of a
    /// connection whose requests may go to their shard directly
    /// (`cluster::direct`), 0 while they may not.
    direct_proto: AtomicU8,
    /// The last request routed directly and when (CLIENT LIST's cmd and
    /// idle).
    last_direct: Mutex<Option<(Instant, &'static str)>>,
}

impl ParseGate {
    /// The session's side: whether, and with which bulk limit, the pump
    /// may parse.
    pub fn allow(&self, max_bulk_len: Option<usize>) {
        // The setting's minimum is 1 MB, so 0 is free to mean "no".
        let v = max_bulk_len.unwrap_or(0);
        if self.max_bulk_len.load(Ordering::Relaxed) != v {
            self.max_bulk_len.store(v, Ordering::Relaxed);
        }
    }

    /// The session's side: it parsed the first `raw` raw bytes, and holds
    /// none it has not.
    pub fn consumed(&self, raw: u64) {
        if self.raw_consumed.load(Ordering::Relaxed) != raw {
            self.raw_consumed.store(raw, Ordering::Release);
        }
    }

    /// The session's side: it answered `messages` messages of the pump
    /// and is about to send its last replies (`chunks` chunks sent then);
    /// `direct`: whether, and in which protocol, the pump may route the
    /// connection's next requests itself.
    pub fn will_have_answered(
        &self,
        messages: u64,
        chunks: u64,
        direct: Option<kvasir_resp::Protocol>,
    ) {
        let code = direct.map_or(0, crate::cluster::direct::protocol_code);
        if self.direct_proto.load(Ordering::Relaxed) != code {
            self.direct_proto.store(code, Ordering::Relaxed);
        }
        self.answered
            .store(pack_counts(messages, chunks), Ordering::Release);
    }

    /// The pump's side: the protocol to answer in if it may route the
    /// connection's requests itself, having sent `sent` messages and
    /// received `chunks` chunks: the session answered all of them and every
    /// reply it sent for them is in.
    fn direct_protocol(&self, sent: u64, chunks: u64) -> Option<kvasir_resp::Protocol> {
        if self.answered.load(Ordering::Acquire) != pack_counts(sent, chunks) {
            return None;
        }
        crate::cluster::direct::protocol_of(self.direct_proto.load(Ordering::Relaxed))
    }

    /// The last request routed directly, and when.
    pub fn last_direct(&self) -> Option<(Instant, &'static str)> {
        *self.last_direct.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes of a request the pump holds, not yet handed to the session.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The pump's side: the limits it may parse with now that it has
    /// handed over `raw_sent` raw bytes, or None. It may once the session
    /// has parsed all of them: a request after them can only be parsed
    /// after theirs.
    fn limits(&self, raw_sent: u64) -> Option<Limits> {
        let max_bulk_len = self.max_bulk_len.load(Ordering::Relaxed);
        (max_bulk_len > 0 && self.raw_consumed.load(Ordering::Acquire) == raw_sent).then(|| {
            Limits {
                max_bulk_len,
                ..Limits::default()
            }
        })
    }
}

/// A client socket, deregistered from the data thread's reactor.
enum Socket {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

/// A socket on its way to an I/O thread with the pump's channel ends.
struct Handoff {
    stream: Socket,
    to_session: mpsc::Sender<Input>,
    from_session: mpsc::Receiver<Bytes>,
    gate: Arc<ParseGate>,
    routes: Option<Arc<DirectRoutes>>,
}

/// The I/O threads of a node, owned by the data thread.
pub struct IoThreads {
    threads: Vec<mpsc::UnboundedSender<Handoff>>,
    next: Cell<usize>,
    /// Cluster mode with shard threads: the requests the pumps route
    /// themselves.
    routes: Option<Arc<DirectRoutes>>,
}

impl IoThreads {
    /// Starts `n` I/O threads (`kvasir-io-1` ... `kvasir-io-n`), each a
    /// tokio current-thread runtime.
    pub fn start(n: usize, routes: Option<Arc<DirectRoutes>>) -> io::Result<IoThreads> {
        let mut threads = Vec::with_capacity(n);
        for i in 1..=n {
            // Built here so a failure stops the start-up instead of
            // leaving a thread that cannot serve.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (tx, mut rx) = mpsc::unbounded_channel::<Handoff>();
            std::thread::Builder::new()
                .name(format!("kvasir-io-{i}"))
                .spawn(move || {
                    runtime.block_on(async move {
                        while let Some(handoff) = rx.recv().await {
                            tokio::spawn(pump(handoff));
                        }
                    })
                })?;
            threads.push(tx);
        }
        Ok(IoThreads {
            threads,
            next: Cell::new(0),
            routes,
        })
    }

    /// Moves an accepted socket to the next I/O thread (round-robin) and
    /// returns the session's end of it.
    pub fn hand_off(&self, stream: TcpStream) -> io::Result<ChannelConn> {
        let local = ClientAddr::Tcp(stream.local_addr()?);
        // Deregisters it from the data thread's reactor; the I/O thread
        // registers it with its own.
        let stream = stream.into_std()?;
        let fd = stream.as_raw_fd();
        self.send(Socket::Tcp(stream), local, fd)
    }

    /// [`IoThreads::hand_off`] for a client of the Unix socket at `path`.
    pub fn hand_off_unix(&self, stream: UnixStream, path: Rc<str>) -> io::Result<ChannelConn> {
        let stream = stream.into_std()?;
        let fd = stream.as_raw_fd();
        self.send(Socket::Unix(stream), ClientAddr::Unix(path), fd)
    }

    fn send(&self, stream: Socket, local: ClientAddr, fd: i32) -> io::Result<ChannelConn> {
        let (to_session, inbound) = mpsc::channel(CHANNEL_CHUNKS);
        let (outbound, from_session) = mpsc::channel(CHANNEL_CHUNKS);
        let gate = Arc::new(ParseGate::default());
        let i = self.next.get();
        self.next.set((i + 1) % self.threads.len());
        self.threads[i]
            .send(Handoff {
                stream,
                to_session,
                from_session,
                gate: gate.clone(),
                routes: self.routes.clone(),
            })
            .map_err(|_| io::Error::other("I/O thread stopped"))?;
        Ok(ChannelConn::new(inbound, outbound, gate, local, fd))
    }
}

/// Runs on an I/O thread: registers the socket there and pumps it.
async fn pump(handoff: Handoff) {
    let Handoff {
        stream,
        to_session,
        from_session,
        gate,
        routes,
    } = handoff;
    // `from_std` wants a non-blocking socket; `into_std` leaves it so, but
    // this is cheap and makes the requirement explicit.
    match stream {
        Socket::Tcp(s) => match s
            .set_nonblocking(true)
            .and_then(|()| TcpStream::from_std(s))
        {
            Ok(s) => run_pump(s, to_session, from_session, gate, routes).await,
            Err(e) => not_registered(e),
        },
        Socket::Unix(s) => match s
            .set_nonblocking(true)
            .and_then(|()| UnixStream::from_std(s))
        {
            Ok(s) => run_pump(s, to_session, from_session, gate, routes).await,
            Err(e) => not_registered(e),
        },
    }
}

/// Dropping the channel ends ends the session (it sees EOF).
fn not_registered(e: io::Error) {
    tracing::warn!("cannot register a client socket on an I/O thread: {e}");
}

async fn run_pump<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    to_session: mpsc::Sender<Input>,
    mut from_session: mpsc::Receiver<Bytes>,
    gate: Arc<ParseGate>,
    routes: Option<Arc<DirectRoutes>>,
) {
    // None once the client closed or the session stopped reading for good.
    let mut to_session = Some(to_session);
    let mut reader = Reader::default();
    let mut queued: VecDeque<Bytes> = VecDeque::with_capacity(MAX_IOV);
    let mut direct = Direct::default();
    // False once the socket reached EOF (or failed) or the session stopped
    // reading.
    let mut reading = true;
    // False once the session ended: what it queued was written, and the
    // replies of requests routed directly are still to come.
    let mut session_open = true;
    loop {
        let mut stop_reading = false;
        tokio::select! {
            // Replies first: a client may only send more after it read them.
            biased;
            chunk = from_session.recv(), if session_open => {
                let Some(chunk) = chunk else {
                    session_open = false;
                    if direct.inflight.is_empty() {
                        break;
                    }
                    continue;
                };
                direct.take_chunk(chunk, &mut queued);
                while queued.len() < MAX_IOV {
                    match from_session.try_recv() {
                        Ok(more) => direct.take_chunk(more, &mut queued),
                        Err(_) => break,
                    }
                }
                if write_all_vectored(&mut stream, &mut queued).await.is_err() {
                    // The client is gone: dropping both channel ends makes
                    // the session see EOF (and its writes fail).
                    return;
                }
            }
            first = next_direct_reply(&mut direct.inflight), if !direct.inflight.is_empty() => {
                if let Some(routes) = &routes {
                    direct.replies(first, routes, &gate, &mut queued);
                }
                if write_all_vectored(&mut stream, &mut queued).await.is_err() {
                    return;
                }
                if !session_open && direct.inflight.is_empty() {
                    break;
                }
            }
            // What the pump could not route waits for the direct replies
            // before it, then goes to the session.
            permit = reserve(to_session.as_ref()), if direct.held.is_some() && direct.inflight.is_empty() => {
                match (permit, direct.held.take()) {
                    (Some(permit), Some(input)) => {
                        permit.send(input);
                        direct.sent += 1;
                    }
                    _ => stop_reading = true,
                }
            }
            // Room in the channel first, then the read: if the select drops
            // this future, no byte was read yet (`read_buf` is cancel safe)
            // and the slot returns. A read is never stuck waiting for the
            // session while replies wait to be written.
            r = read_with_permit(&mut stream, &mut reader.buf, to_session.as_ref()), if reading && to_session.is_some() && direct.held.is_none() => {
                match r {
                    Some((permit, n)) => {
                        debug_assert!(n > 0);
                        if let Some(mut input) = reader.take(n, &gate) {
                            if let Some(routes) = &routes {
                                // The session's replies so far go first.
                                while let Ok(chunk) = from_session.try_recv() {
                                    direct.take_chunk(chunk, &mut queued);
                                }
                                if let Some(proto) = gate.direct_protocol(direct.sent, direct.chunks).filter(|_| routes.is_open()) {
                                    input = direct.route(input, routes, proto).unwrap_or_default();
                                }
                            }
                            if input.is_empty() {
                                drop(permit);
                            } else if direct.inflight.is_empty() {
                                permit.send(input);
                                direct.sent += 1;
                            } else {
                                direct.held = Some(input);
                            }
                        }
                        if !queued.is_empty() && write_all_vectored(&mut stream, &mut queued).await.is_err() {
                            return;
                        }
                    }
                    // EOF, a socket error, or the session stopped reading:
                    // closing the channel is the session's EOF. Replies it
                    // still sends are written until it ends.
                    None => stop_reading = true,
                }
            }
        }
        // Outside the select: its output still borrows the sender. What
        // waits for routed replies still goes to the session first.
        if stop_reading {
            reading = false;
        }
        if !reading && direct.held.is_none() {
            to_session = None;
        }
        if !session_open && direct.inflight.is_empty() {
            break;
        }
    }
    let _ = stream.shutdown().await;
}

/// A connection's requests the pump routed itself (`cluster::direct`).
#[derive(Default)]
struct Direct {
    /// Routed, in request order, their replies not written yet.
    inflight: VecDeque<(DirectCall, kvasir_resp::Protocol)>,
    /// What came after a request the pump could not route, while routed
    /// ones before it are in flight.
    held: Option<Input>,
    /// Messages sent to the session.
    sent: u64,
    /// Reply chunks received from the session.
    chunks: u64,
    /// Whether the calls in flight read or write (None: none in flight).
    kind: Option<InFlight>,
    /// Jobs for the loops, gathered over a read.
    batch: JobBatch,
    /// Counts for the main thread's stats, handed over with each write.
    tally: Tally,
    out: BytesMut,
}

impl Direct {
    /// Queues a chunk of the session's replies for writing.
    fn take_chunk(&mut self, chunk: Bytes, queued: &mut VecDeque<Bytes>) {
        self.chunks += 1;
        queued.push_back(chunk);
    }

    /// Routes the requests at the front of `input` that may go directly;
    /// the rest (from the first that may not), if any.
    fn route(
        &mut self,
        input: Input,
        routes: &DirectRoutes,
        proto: kvasir_resp::Protocol,
    ) -> Option<Input> {
        let Input {
            commands,
            command_bytes,
            raw,
            read,
        } = input;
        let started = Instant::now();
        let mut routed_bytes = 0;
        let mut rest = Vec::new();
        let mut commands = commands.into_iter();
        for args in commands.by_ref() {
            let Some(routable) = routes.routable(&args) else {
                rest.push(args);
                break;
            };
            let len = request_len(&args);
            match routes.add(routable, args, &mut self.batch, &mut self.kind, started) {
                Ok(call) => {
                    routed_bytes += len;
                    self.inflight.push_back((call, proto));
                }
                Err(args) => {
                    rest.push(args);
                    break;
                }
            }
        }
        rest.extend(commands);
        self.batch.send(routes);
        if rest.is_empty() && raw.is_empty() {
            self.tally.net_input_bytes += read as u64;
            return None;
        }
        Some(Input {
            commands: rest,
            command_bytes: command_bytes.saturating_sub(routed_bytes),
            raw,
            read,
        })
    }

    /// Encodes the reply that came (`first`, the oldest call's) and every
    /// reply after it that is ready, for writing; counts them.
    fn replies(
        &mut self,
        first: CallResult,
        routes: &DirectRoutes,
        gate: &ParseGate,
        queued: &mut VecDeque<Bytes>,
    ) {
        let tracking = routes.latency_tracking();
        let mut result = Some(first);
        let mut last = None;
        while let Some(r) = result.take() {
            let Some((call, proto)) = self.inflight.pop_front() else {
                break;
            };
            last = Some(call.name());
            let reply = call.finish(r, &mut self.tally, tracking);
            kvasir_resp::encode(&reply, proto, &mut self.out);
            if let Some((next, _)) = self.inflight.front_mut() {
                match next.reply.try_recv() {
                    Ok(r) => result = Some(Some(r)),
                    Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {}
                    Err(tokio::sync::oneshot::error::TryRecvError::Closed) => result = Some(None),
                }
            }
        }
        if self.inflight.is_empty() {
            self.kind = None;
        }
        self.tally.net_output_bytes += self.out.len() as u64;
        queued.push_back(self.out.split().freeze());
        if let Some(name) = last {
            *gate.last_direct.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((Instant::now(), name));
        }
        routes.count(&mut self.tally);
    }
}

type CallResult = Option<Result<crate::cluster::sm::Out, kvasir_raft::RaftError>>;

/// The reply of the oldest routed call (None: its loop dropped it).
async fn next_direct_reply(
    inflight: &mut VecDeque<(DirectCall, kvasir_resp::Protocol)>,
) -> CallResult {
    match inflight.front_mut() {
        Some((call, _)) => (&mut call.reply).await.ok(),
        None => std::future::pending().await,
    }
}

/// Room in the session's channel (None: the session is gone).
async fn reserve(to_session: Option<&mpsc::Sender<Input>>) -> Option<mpsc::Permit<'_, Input>> {
    to_session?.reserve().await.ok()
}

/// The size of a request as a client sends it (its part of the query
/// buffer).
fn request_len(args: &[Bytes]) -> usize {
    fn header(n: usize) -> usize {
        // `*` or `$`, the digits, CRLF.
        1 + n.checked_ilog10().unwrap_or(0) as usize + 1 + 2
    }
    header(args.len())
        + args
            .iter()
            .map(|a| header(a.len()) + a.len() + 2)
            .sum::<usize>()
}

/// The pump's read side: its buffer and what it parsed ahead.
#[derive(Default)]
struct Reader {
    /// What was read and not handed over: between reads, nothing or the
    /// start of a request whose rest has not come.
    buf: BytesMut,
    /// Raw bytes handed to the session so far.
    raw_sent: u64,
    /// Bytes read since the last message.
    unsent: usize,
}

impl Reader {
    /// Turns the `n` bytes just read (at the end of `buf`) into a message,
    /// or None while they are only the start of a request.
    fn take(&mut self, n: usize, gate: &ParseGate) -> Option<Input> {
        self.unsent += n;
        // After raw bytes `buf` holds only these: parsing can start with
        // them once the session has parsed every raw byte.
        let limits = gate.limits(self.raw_sent);
        // Moved out as a copy the size of what was read, parsed or not:
        // the read buffer stays this thread's own, one allocation for the
        // connection's life. Parsed in place, the arguments shared it until
        // the data thread dropped them, so every 12-25 KB of input
        // `reserve` allocated a new 16 KB buffer here while the data thread
        // still held the old one: 16 KB more for a moment per connection,
        // the likely cause of eviction.rs's 100 KB test over-evicting in 4
        // of 6 runs with --threads 2 (with the copy it passes, at the same
        // speed: docs/benchmarks.md).
        let mut read = BytesMut::from(&self.buf[..]);
        let mut commands = Vec::new();
        let mut command_bytes = 0;
        let mut raw = Bytes::new();
        match limits {
            Some(limits) => {
                let before = read.len();
                let complete = parse_requests(&mut read, &limits, &mut commands);
                command_bytes = before - read.len();
                if !complete {
                    // The rest, from the request the pump cannot parse on,
                    // is the session's to parse.
                    self.buf.clear();
                    raw = read.freeze();
                } else if command_bytes > 0 {
                    // The start of a request whose rest has not come (or
                    // nothing); with nothing parsed `buf` holds it still.
                    self.buf.clear();
                    self.buf.extend_from_slice(&read);
                }
            }
            None => {
                self.buf.clear();
                raw = read.freeze();
            }
        }
        if !raw.is_empty() {
            self.raw_sent += raw.len() as u64;
        }
        if gate.held() != self.buf.len() {
            gate.held.store(self.buf.len(), Ordering::Relaxed);
        }
        if commands.is_empty() && raw.is_empty() {
            return None;
        }
        let read = std::mem::take(&mut self.unsent);
        Some(Input {
            commands,
            command_bytes,
            raw,
            read,
        })
    }
}

/// Parses the complete requests at the front of `buf`. False when it
/// stopped at one the session must parse: inline, a protocol error under
/// these limits (the session's may differ), or an incomplete one longer
/// than [`PARSE_AHEAD_MAX`].
fn parse_requests(buf: &mut BytesMut, limits: &Limits, commands: &mut Vec<Vec<Bytes>>) -> bool {
    while !buf.is_empty() {
        if buf[0] != b'*' {
            return false;
        }
        match parse_command(buf, limits) {
            Ok(Parsed::Command(args)) => {
                // `*0` and `*-1`: Redis skips them, and so does the session.
                if !args.is_empty() {
                    commands.push(args);
                }
            }
            Ok(Parsed::Incomplete { min_total }) => {
                return buf.len().max(min_total) <= PARSE_AHEAD_MAX;
            }
            Err(_) => return false,
        }
    }
    true
}

/// Waits for room in the session's channel, then reads what the socket has
/// (appended to `buf`). None: EOF, an error, or the session is gone.
async fn read_with_permit<'a, S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut BytesMut,
    to_session: Option<&'a mpsc::Sender<Input>>,
) -> Option<(mpsc::Permit<'a, Input>, usize)> {
    let permit = to_session?.reserve().await.ok()?;
    if buf.capacity() - buf.len() < READ_CHUNK / 4 {
        buf.reserve(READ_CHUNK);
    }
    match tokio::io::AsyncReadExt::read_buf(stream, buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some((permit, n)),
    }
}

/// Writes every queued chunk, several per system call.
async fn write_all_vectored<S: AsyncWrite + Unpin>(
    stream: &mut S,
    queued: &mut VecDeque<Bytes>,
) -> io::Result<()> {
    while !queued.is_empty() {
        let mut slices = [IoSlice::new(&[]); MAX_IOV];
        let mut count = 0;
        for (slot, chunk) in slices.iter_mut().zip(queued.iter()) {
            *slot = IoSlice::new(chunk);
            count += 1;
        }
        let mut n = stream.write_vectored(&slices[..count]).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let Some(front) = queued.front_mut() else {
                break;
            };
            if n >= front.len() {
                n -= front.len();
                queued.pop_front();
            } else {
                front.advance(n);
                n = 0;
            }
        }
    }
    Ok(())
}
