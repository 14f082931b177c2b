//! What a session needs from its connection, and the two kinds of
//! connection it runs on.
//!
//! - `TcpStream`: the session owns the socket and reads and writes it on the
//!   data thread (`--threads 1`, the default: exactly the path Kvasir always
//!   had, no channels, no extra thread).
//! - [`ChannelConn`]: the socket lives on an I/O thread (`--threads N`,
//!   N > 1, Valkey 8's I/O threads) whose pump ([`crate::io_threads`]) does
//!   the `read`/`write` system calls; the session on the data thread gets the
//!   bytes it read through a bounded channel and hands its replies back
//!   through another. A profile of a standalone node under 50 clients
//!   showed ~80% of the data thread in the kernel (TCP send/recv, epoll), so
//!   moving the system calls off it is the first step to use more cores.
//!
//! `session::run` is generic over [`ClientConn`], so each kind gets its own
//! monomorphised copy: no `dyn`, no boxing per request.

use bytes::{Bytes, BytesMut};
use std::io;
use std::os::fd::AsRawFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::mpsc;

pub use crate::clients::ClientAddr;

/// One client connection as the session sees it.
// `async fn` in a public trait cannot promise `Send` futures; none is
// wanted: sessions run on the data thread's `LocalSet`.
#[allow(async_fn_in_trait)]
pub trait ClientConn {
    /// Reads what the client sent into `buf` (appending); `Ok(0)` when the
    /// client closed. Cancel safe: the session selects it against pushes and
    /// kills, and a cancelled read must lose nothing.
    async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize>;

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
    async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
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
    async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
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

/// Chunks read in one go from the inbound channel before the session
/// parses: enough to batch a pipelined burst, bounded so the query buffer
/// limit is checked often.
const MAX_READ_BATCH: usize = 256 * 1024;

/// A connection whose socket an I/O thread reads and writes.
pub struct ChannelConn {
    /// What the pump read from the socket, one chunk per read; closed on
    /// EOF or a socket error.
    inbound: mpsc::Receiver<Bytes>,
    /// Replies for the pump to write; dropped by `shutdown` (the pump then
    /// flushes what is queued and shuts the socket down).
    outbound: Option<mpsc::Sender<Bytes>>,
    /// A chunk `closed_or_more` received: it belongs to the next read.
    held: Option<Bytes>,
    local: ClientAddr,
    fd: i32,
}

impl ChannelConn {
    pub(crate) fn new(
        inbound: mpsc::Receiver<Bytes>,
        outbound: mpsc::Sender<Bytes>,
        local: ClientAddr,
        fd: i32,
    ) -> ChannelConn {
        ChannelConn {
            inbound,
            outbound: Some(outbound),
            held: None,
            local,
            fd,
        }
    }
}

impl ClientConn for ChannelConn {
    async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        let first = match self.held.take() {
            Some(chunk) => chunk,
            // The only await: `recv` is cancel safe, and nothing was taken
            // before it.
            None => match self.inbound.recv().await {
                Some(chunk) => chunk,
                None => return Ok(0),
            },
        };
        buf.extend_from_slice(&first);
        let mut n = first.len();
        // Whatever else the pump already read goes to the same parse pass,
        // as one larger socket read would.
        while n < MAX_READ_BATCH {
            match self.inbound.try_recv() {
                Ok(chunk) => {
                    buf.extend_from_slice(&chunk);
                    n += chunk.len();
                }
                Err(_) => break,
            }
        }
        Ok(n)
    }

    async fn write_out(&mut self, out: &mut BytesMut) -> io::Result<()> {
        let Some(tx) = &self.outbound else {
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        // `split` hands the bytes over without copying; once the pump wrote
        // and dropped them, `out` can reuse the allocation.
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
            Some(chunk) => {
                self.held = Some(chunk);
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
