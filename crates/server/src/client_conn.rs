//! What a session needs from its connection, and the two kinds of
//! connection it runs on.
//!
//! - `TcpStream`: the session owns the socket and reads and writes it on the
//!   data thread (`--threads 1`, the default: exactly the path Kvasir always
//!   had, no channels, no extra thread).
//! - [`ChannelConn`]: the socket lives on an I/O thread (`--threads N`,
//!   N > 1, Valkey 8's I/O threads) whose pump ([`crate::io_threads`]) does
//!   the `read`/`write` system calls and parses the requests; the session on
//!   the data thread gets the parsed requests (or, where the pump cannot
//!   parse exactly as the session would, the bytes) through a bounded
//!   channel and hands its replies back through another. A profile of a standalone node under 50 clients
//!   showed ~80% of the data thread in the kernel (TCP send/recv, epoll), so
//!   moving the system calls off it is the first step to use more cores.
//!
//! `session::run` is generic over [`ClientConn`], so each kind gets its own
//! monomorphised copy: no `dyn`, no boxing per request.

use crate::io_threads::{Input, ParseGate};
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::mpsc;

pub use crate::clients::ClientAddr;

/// Requests a connection parsed ahead of the session (an I/O thread's).
#[derive(Default)]
pub struct ParsedRequests {
    /// In the order they were sent.
    pub commands: VecDeque<Vec<Bytes>>,
    /// The bytes they were sent as: while they run they are the session's
    /// query buffer (CLIENT LIST's qbuf), as in Redis, which trims its
    /// query buffer after a read's commands ran.
    pub bytes: usize,
}

/// One client connection as the session sees it.
// `async fn` in a public trait cannot promise `Send` futures; none is
// wanted: sessions run on the data thread's `LocalSet`.
#[allow(async_fn_in_trait)]
pub trait ClientConn {
    /// Reads what the client sent: bytes for the session to parse are
    /// appended to `buf`, commands the connection parsed already (an I/O
    /// thread's) to `parsed`, which come before anything in `buf`. Returns
    /// the bytes read from the socket; `Ok(0)` when the client closed.
    /// Cancel safe: the session selects it against pushes and kills, and a
    /// cancelled read must lose nothing.
    async fn read_input(
        &mut self,
        buf: &mut BytesMut,
        parsed: &mut ParsedRequests,
    ) -> io::Result<usize>;

    /// Whether, and with which `proto-max-bulk-len`, the connection may
    /// parse ahead of the session: None while the client must still
    /// authenticate (AUTH inside a pipeline changes the limits for the
    /// commands after it). The session checks every parsed command against
    /// its limits anyway; this keeps it from getting commands it must refuse.
    fn parse_ahead(&self, _max_bulk_len: Option<usize>) {}

    /// The session parsed every byte it was given (its query buffer is
    /// empty): a connection that handed it bytes may parse again.
    fn query_buffer_empty(&self) {}

    /// The session answered every request it read so far and is about to
    /// write the last of their replies (`writes`: it has some);
    /// `direct`: whether, and in which protocol, the connection's next
    /// requests may skip the session (`cluster::direct`). The I/O thread
    /// knows before the client can see those replies.
    fn will_have_answered(&mut self, _writes: bool, _direct: Option<kvasir_resp::Protocol>) {}

    /// Where the connection says how much of a request it holds that it
    /// has not handed over yet (an I/O thread's pump).
    fn parse_gate(&self) -> Option<Arc<ParseGate>> {
        None
    }

    /// Writes all of `out` and leaves it empty (its capacity may change).
    async fn write_out(&mut self, out: &mut BytesMut) -> io::Result<()>;

    /// Closes the sending side after everything written so far (QUIT, a
    /// protocol error, CLIENT KILL).
    async fn shutdown(&mut self);

    /// Waits until the client sent more or closed, without consuming what it
    /// sent: true if it closed (or the connection failed). A blocked client
    /// that went away must not be served.
    async fn closed_or_more(&mut self) -> bool;

    /// The server's end of the connection (CLIENT LIST laddr).
    fn local_addr(&self) -> io::Result<ClientAddr>;

    /// The socket's file descriptor (CLIENT LIST fd).
    fn fd(&self) -> i32;
}

impl ClientConn for TcpStream {
    async fn read_input(
        &mut self,
        buf: &mut BytesMut,
        _parsed: &mut ParsedRequests,
    ) -> io::Result<usize> {
        AsyncReadExt::read_buf(self, buf).await
    }

    async fn write_out(&mut self, out: &mut BytesMut) -> io::Result<()> {
        AsyncWriteExt::write_all(self, out).await?;
        out.clear();
        Ok(())
    }

    async fn shutdown(&mut self) {
        let _ = AsyncWriteExt::shutdown(self).await;
    }

    async fn closed_or_more(&mut self) -> bool {
        let mut probe = [0u8; 1];
        !matches!(self.peek(&mut probe).await, Ok(n) if n > 0)
    }

    fn local_addr(&self) -> io::Result<ClientAddr> {
        TcpStream::local_addr(self).map(ClientAddr::Tcp)
    }

    fn fd(&self) -> i32 {
        self.as_raw_fd()
    }
}

/// A client on the Unix socket (`unixsocket`) whose socket the data thread
/// reads and writes itself (`--threads 1`).
pub struct UnixConn {
    pub stream: UnixStream,
    /// The socket's path, as CLIENT LIST shows it.
    pub path: std::rc::Rc<str>,
}

impl ClientConn for UnixConn {
    async fn read_input(
        &mut self,
        buf: &mut BytesMut,
        _parsed: &mut ParsedRequests,
    ) -> io::Result<usize> {
        AsyncReadExt::read_buf(&mut self.stream, buf).await
    }

    async fn write_out(&mut self, out: &mut BytesMut) -> io::Result<()> {
        AsyncWriteExt::write_all(&mut self.stream, out).await?;
        out.clear();
        Ok(())
    }

    async fn shutdown(&mut self) {
        let _ = AsyncWriteExt::shutdown(&mut self.stream).await;
    }

    async fn closed_or_more(&mut self) -> bool {
        // A Unix stream has no peek in tokio: wait for readability, then
        // look without consuming (a spurious wake-up waits again).
        loop {
            if self.stream.readable().await.is_err() {
                return true;
            }
            let fd = self.stream.as_raw_fd();
            let peeked = self.stream.try_io(tokio::io::Interest::READABLE, || {
                let mut probe = [0u8; 1];
                // SAFETY: recv(2) with MSG_PEEK into a local one-byte buffer.
                let n = unsafe { libc::recv(fd, probe.as_mut_ptr().cast(), 1, libc::MSG_PEEK) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n)
                }
            });
            match peeked {
                Ok(n) => return n == 0,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return true,
            }
        }
    }

    fn local_addr(&self) -> io::Result<ClientAddr> {
        Ok(ClientAddr::Unix(self.path.clone()))
    }

    fn fd(&self) -> i32 {
        self.stream.as_raw_fd()
    }
}

/// Bytes read in one go from the inbound channel before the session
/// parses: enough to batch a pipelined burst, bounded so the query buffer
/// limit is checked often.
const MAX_READ_BATCH: usize = 256 * 1024;

/// A connection whose socket an I/O thread reads and writes.
pub struct ChannelConn {
    /// What the pump read from the socket, one message per read (or per
    /// few, when reads held only part of a command); closed on EOF or a
    /// socket error.
    inbound: mpsc::Receiver<Input>,
    /// Replies for the pump to write; dropped by `shutdown` (the pump then
    /// flushes what is queued and shuts the socket down).
    outbound: Option<mpsc::Sender<Bytes>>,
    /// Reply chunks sent to the pump so far.
    chunks: u64,
    /// A message `closed_or_more` received, or one that must wait for the
    /// next read: it belongs to the next read.
    held: Option<Input>,
    /// What the session and the pump tell each other about parsing.
    gate: Arc<ParseGate>,
    /// Bytes the pump handed over unparsed, so far.
    raw_received: u64,
    /// Messages of the pump read so far.
    taken: u64,
    local: ClientAddr,
    fd: i32,
}

impl ChannelConn {
    pub(crate) fn new(
        inbound: mpsc::Receiver<Input>,
        outbound: mpsc::Sender<Bytes>,
        gate: Arc<ParseGate>,
        local: ClientAddr,
        fd: i32,
    ) -> ChannelConn {
        ChannelConn {
            inbound,
            outbound: Some(outbound),
            chunks: 0,
            held: None,
            gate,
            raw_received: 0,
            taken: 0,
            local,
            fd,
        }
    }

    fn take(&mut self, input: Input, buf: &mut BytesMut, parsed: &mut ParsedRequests) {
        self.raw_received += input.raw.len() as u64;
        self.taken += 1;
        parsed.commands.extend(input.commands);
        parsed.bytes += input.command_bytes;
        buf.extend_from_slice(&input.raw);
    }
}

impl ClientConn for ChannelConn {
    async fn read_input(
        &mut self,
        buf: &mut BytesMut,
        parsed: &mut ParsedRequests,
    ) -> io::Result<usize> {
        let first = match self.held.take() {
            Some(input) => input,
            // The only await: `recv` is cancel safe, and nothing was taken
            // before it.
            None => match self.inbound.recv().await {
                Some(input) => input,
                None => return Ok(0),
            },
        };
        let mut n = first.read;
        let mut raw = !first.raw.is_empty();
        self.take(first, buf, parsed);
        // Whatever else the pump already read goes to the same pass, as one
        // larger socket read would.
        while n < MAX_READ_BATCH {
            match self.inbound.try_recv() {
                // Parsed commands come after unparsed bytes only once the
                // session parsed those (the pump waits for that), so they
                // cannot follow them in one pass; kept for the next one.
                Ok(input) if raw && !input.commands.is_empty() => {
                    self.held = Some(input);
                    break;
                }
                Ok(input) => {
                    n += input.read;
                    raw |= !input.raw.is_empty();
                    self.take(input, buf, parsed);
                }
                Err(_) => break,
            }
        }
        // A socket read is never empty: a message is at least one byte.
        Ok(n.max(1))
    }

    fn parse_ahead(&self, max_bulk_len: Option<usize>) {
        self.gate.allow(max_bulk_len);
    }

    fn query_buffer_empty(&self) {
        self.gate.consumed(self.raw_received);
    }

    fn parse_gate(&self) -> Option<Arc<ParseGate>> {
        Some(self.gate.clone())
    }

    fn will_have_answered(&mut self, writes: bool, direct: Option<kvasir_resp::Protocol>) {
        let chunks = self.chunks + u64::from(writes);
        self.gate.will_have_answered(self.taken, chunks, direct);
    }

    async fn write_out(&mut self, out: &mut BytesMut) -> io::Result<()> {
        let Some(tx) = &self.outbound else {
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        // `split` hands the bytes over without copying; once the pump wrote
        // and dropped them, `out` can reuse the allocation.
        self.chunks += 1;
        tx.send(out.split().freeze())
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
    }

    async fn shutdown(&mut self) {
        self.outbound = None;
    }

    async fn closed_or_more(&mut self) -> bool {
        if self.held.is_some() {
            return false;
        }
        match self.inbound.recv().await {
            Some(input) => {
                self.held = Some(input);
                false
            }
            None => true,
        }
    }

    fn local_addr(&self) -> io::Result<ClientAddr> {
        Ok(self.local.clone())
    }

    fn fd(&self) -> i32 {
        self.fd
    }
}
