//! I/O threads (`--threads N`, N > 1): N-1 threads that do the socket
//! reads and writes of client connections, as Valkey 8's I/O threads do,
//! while the data thread keeps everything else (parsing, routing, every
//! shard, pub/sub, blocking, the Raft loop).
//!
//! The accept loops stay on the data thread (maxclients, stats) and hand
//! each accepted socket, TCP or Unix, round-robin to an I/O thread, where a
//! pump moves bytes between the socket and the session's [`ChannelConn`]:
//!
//! - reads: as much as the socket has (a 16 KiB buffer at least), each read
//!   forwarded as one `Bytes` chunk into a bounded channel. A session that
//!   does not consume stops the pump from reading, so the query buffer limit
//!   and TCP flow control still bound memory. EOF or a socket error closes
//!   the channel: the session sees EOF as it would on the socket.
//! - writes: every chunk from the session's bounded channel, the chunks
//!   already queued coalesced into one vectored write. When the session
//!   ends (its channel ends dropped), the pump writes what is queued, shuts
//!   the socket down and exits.

use crate::client_conn::{ChannelConn, ClientAddr};
use bytes::{Buf, Bytes, BytesMut};
use std::cell::Cell;
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::rc::Rc;
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

/// A client socket, deregistered from the data thread's reactor.
enum Socket {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

/// A socket on its way to an I/O thread with the pump's channel ends.
struct Handoff {
    stream: Socket,
    to_session: mpsc::Sender<Bytes>,
    from_session: mpsc::Receiver<Bytes>,
}

/// The I/O threads of a node, owned by the data thread.
pub struct IoThreads {
    threads: Vec<mpsc::UnboundedSender<Handoff>>,
    next: Cell<usize>,
}

impl IoThreads {
    /// Starts `n` I/O threads (`kvasir-io-1` ... `kvasir-io-n`), each a
    /// tokio current-thread runtime.
    pub fn start(n: usize) -> io::Result<IoThreads> {
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
        let i = self.next.get();
        self.next.set((i + 1) % self.threads.len());
        self.threads[i]
            .send(Handoff {
                stream,
                to_session,
                from_session,
            })
            .map_err(|_| io::Error::other("I/O thread stopped"))?;
        Ok(ChannelConn::new(inbound, outbound, local, fd))
    }
}

/// Runs on an I/O thread: registers the socket there and pumps it.
async fn pump(handoff: Handoff) {
    let Handoff {
        stream,
        to_session,
        from_session,
    } = handoff;
    // `from_std` wants a non-blocking socket; `into_std` leaves it so, but
    // this is cheap and makes the requirement explicit.
    match stream {
        Socket::Tcp(s) => match s
            .set_nonblocking(true)
            .and_then(|()| TcpStream::from_std(s))
        {
            Ok(s) => run_pump(s, to_session, from_session).await,
            Err(e) => not_registered(e),
        },
        Socket::Unix(s) => match s
            .set_nonblocking(true)
            .and_then(|()| UnixStream::from_std(s))
        {
            Ok(s) => run_pump(s, to_session, from_session).await,
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
    to_session: mpsc::Sender<Bytes>,
    mut from_session: mpsc::Receiver<Bytes>,
) {
    // None once the client closed or the session stopped reading for good.
    let mut to_session = Some(to_session);
    let mut buf = BytesMut::new();
    let mut queued: VecDeque<Bytes> = VecDeque::with_capacity(MAX_IOV);
    loop {
        let mut stop_reading = false;
        tokio::select! {
            // Replies first: a client may only send more after it read them.
            biased;
            chunk = from_session.recv() => {
                let Some(chunk) = chunk else {
                    // The session ended: everything it queued was written.
                    break;
                };
                queued.push_back(chunk);
                while queued.len() < MAX_IOV {
                    match from_session.try_recv() {
                        Ok(more) => queued.push_back(more),
                        Err(_) => break,
                    }
                }
                if write_all_vectored(&mut stream, &mut queued).await.is_err() {
                    // The client is gone: dropping both channel ends makes
                    // the session see EOF (and its writes fail).
                    return;
                }
            }
            // Room in the channel first, then the read: if the select drops
            // this future, no byte was read yet (`read_buf` is cancel safe)
            // and the slot returns. A read is never stuck waiting for the
            // session while replies wait to be written.
            r = read_with_permit(&mut stream, &mut buf, to_session.as_ref()), if to_session.is_some() => {
                match r {
                    Some((permit, n)) => {
                        debug_assert!(n > 0);
                        // A copy the size of what was read: the read
                        // buffer stays this thread's own, one allocation
                        // for the connection's life (chunks cut from it
                        // made a new 16 KB buffer at most reads, since
                        // the session still held the last one).
                        permit.send(Bytes::copy_from_slice(&buf[..n]));
                    }
                    // EOF, a socket error, or the session stopped reading:
                    // closing the channel is the session's EOF. Replies it
                    // still sends are written until it ends.
                    None => stop_reading = true,
                }
            }
        }
        // Outside the select: its output still borrows the sender.
        if stop_reading {
            to_session = None;
        }
    }
    let _ = stream.shutdown().await;
}

/// Waits for room in the session's channel, then reads what the socket has.
/// None: EOF, an error, or the session is gone.
async fn read_with_permit<'a, S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut BytesMut,
    to_session: Option<&'a mpsc::Sender<Bytes>>,
) -> Option<(mpsc::Permit<'a, Bytes>, usize)> {
    let permit = to_session?.reserve().await.ok()?;
    buf.clear();
    buf.reserve(READ_CHUNK);
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
