//! One connection: read bytes, parse every complete request, run each in
//! order, write all replies of that read back in one write (pipelining
//! keeps request order because requests run one after another).

use crate::clients::ClientInfo;
use crate::listener::{CmdStat, Server};
use bytes::{Bytes, BytesMut};
use kvasir_core::table::{resolve, Flags, Handler};
use kvasir_core::CommandSpec;
use kvasir_resp::{encode, parse_command, Limits, Parsed, Protocol, Reply};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const READ_CHUNK: usize = 16 * 1024;
/// Never reserve more than this at once for a declared bulk: a client that
/// announces 512 MB must send it before it costs us 512 MB.
const MAX_RESERVE: usize = 64 * 1024 * 1024;

/// The state of one connection.
pub struct Session {
    pub server: Rc<Server>,
    pub info: Rc<ClientInfo>,
    pub proto: Protocol,
    pub db: usize,
    pub authenticated: bool,
    /// Set by QUIT and protocol errors: close after flushing replies.
    pub close: bool,
    /// Set by SHUTDOWN: the connection closes without a reply.
    pub silent: bool,
}

pub async fn run(server: Rc<Server>, mut stream: TcpStream, addr: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let laddr = stream.local_addr().unwrap_or(addr);
    let info = server
        .clients
        .borrow_mut()
        .register(addr, laddr, stream.as_raw_fd());
    server.stats.borrow_mut().total_connections_received += 1;
    let authenticated = server.config.borrow().requirepass.is_none();
    let mut session = Session {
        server: server.clone(),
        info: info.clone(),
        proto: Protocol::Resp2,
        db: 0,
        authenticated,
        close: false,
        silent: false,
    };
    session.serve(&mut stream).await;
    server.clients.borrow_mut().unregister(info.id);
}

impl Session {
    fn limits(&self) -> (Limits, usize) {
        let c = self.server.config.borrow();
        let limits = Limits {
            max_bulk_len: c.proto_max_bulk_len,
            unauthenticated: !self.authenticated,
            ..Limits::default()
        };
        (limits, c.client_query_buffer_limit)
    }

    async fn serve(&mut self, stream: &mut TcpStream) {
        let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
        let mut out = BytesMut::with_capacity(READ_CHUNK);
        // Created once: polling a fresh `notified()` every read would
        // register a waiter (a lock) per request.
        let info = self.info.clone();
        let kill = info.kill.notified();
        tokio::pin!(kill);
        loop {
            let (mut limits, qbuf_limit) = self.limits();
            if inbuf.capacity() - inbuf.len() < READ_CHUNK / 4 {
                inbuf.reserve(READ_CHUNK);
            }
            let n = tokio::select! {
                biased;
                _ = &mut kill => return,
                r = stream.read_buf(&mut inbuf) => match r {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                },
            };
            self.server.stats.borrow_mut().net_input_bytes += n as u64;
            self.server.shard.borrow_mut().refresh_clock();
            let mut clock = Instant::now();
            self.info.last_interaction.set(clock);
            loop {
                match parse_command(&mut inbuf, &limits) {
                    Ok(Parsed::Command(args)) => {
                        if args.is_empty() {
                            continue;
                        }
                        clock = self.handle(args, &mut out, clock);
                        // AUTH inside a pipeline lifts the limits for the
                        // requests after it.
                        limits.unauthenticated = !self.authenticated;
                        if self.close {
                            break;
                        }
                    }
                    Ok(Parsed::Incomplete { min_total }) => {
                        if min_total > inbuf.len() {
                            inbuf.reserve((min_total - inbuf.len()).min(MAX_RESERVE));
                        }
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(client = self.info.id, "protocol error: {e}");
                        out.extend_from_slice(&e.reply_line());
                        self.close = true;
                        break;
                    }
                }
            }
            self.info.qbuf.set(inbuf.len());
            if inbuf.len() > qbuf_limit {
                tracing::warn!(
                    client = self.info.id,
                    "closing client that reached max query buffer length"
                );
                self.close = true;
            }
            if !out.is_empty() {
                self.server.stats.borrow_mut().net_output_bytes += out.len() as u64;
                if stream.write_all(&out).await.is_err() {
                    return;
                }
                out.clear();
                if out.capacity() > 4 * 1024 * 1024 {
                    out = BytesMut::with_capacity(READ_CHUNK);
                }
            }
            if self.close || self.info.killed.get() {
                let _ = stream.shutdown().await;
                return;
            }
        }
    }

    /// Runs one request started at `start` and appends its reply to `out`;
    /// returns when it finished, which is when the next request starts (one
    /// clock read per command).
    pub fn handle(&mut self, args: Vec<Bytes>, out: &mut BytesMut, start: Instant) -> Instant {
        let (reply, spec) = match resolve(&args) {
            Err(e) => (e.to_reply(), None),
            Ok((spec, parent)) => (self.dispatch(spec, parent, &args), Some((spec, parent))),
        };
        let end = Instant::now();
        self.account(&args, spec, &reply, end - start);
        if !self.silent {
            encode(&reply, self.proto, out);
        }
        end
    }

    fn dispatch(
        &mut self,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
        args: &[Bytes],
    ) -> Reply {
        let top = parent.unwrap_or(spec);
        if !self.authenticated && !top.flags.contains(Flags::NO_AUTH) {
            return Reply::error("NOAUTH Authentication required.");
        }
        self.info.last_cmd.set(top.name);
        self.info
            .last_sub
            .set(if parent.is_some() { spec.name } else { "" });
        match spec.handler {
            Handler::Write(_) | Handler::Read(_) => self
                .server
                .shard
                .borrow_mut()
                .execute(spec, self.db, args)
                .unwrap_or_else(|e| e.to_reply()),
            Handler::Session | Handler::Container => crate::admin::run(self, spec, parent, args),
        }
    }

    /// Updates commandstats, errorstats and the slow log.
    fn account(
        &self,
        args: &[Bytes],
        spec: Option<(&'static CommandSpec, Option<&'static CommandSpec>)>,
        reply: &Reply,
        elapsed: Duration,
    ) {
        let micros = elapsed.as_micros() as u64;
        {
            let mut stats = self.server.stats.borrow_mut();
            stats.total_commands_processed += 1;
            if let Reply::Error(text) = reply {
                stats.total_error_replies += 1;
                let code = text.split(' ').next().unwrap_or("ERR").to_string();
                *stats.errors.entry(code).or_insert(0) += 1;
            }
            if let Some((spec, parent)) = spec {
                // Keyed by the spec's address: no string hashing per call.
                let entry = stats
                    .commands
                    .entry(spec as *const CommandSpec as usize)
                    .or_insert_with(|| match parent {
                        Some(p) => CmdStat::named(p.name, spec.name),
                        None => CmdStat::named(spec.name, ""),
                    });
                entry.calls += 1;
                entry.usec += micros;
                if reply.is_error() {
                    entry.failed += 1;
                }
            }
        }
        let (threshold, max_len) = {
            let c = self.server.config.borrow();
            (c.slowlog_log_slower_than, c.slowlog_max_len)
        };
        if threshold >= 0 && micros >= threshold as u64 {
            self.server.slowlog.borrow_mut().record(
                max_len,
                micros,
                args,
                self.info.addr.to_string(),
                self.info.name.borrow().clone(),
                (crate::shard::unix_ms() / 1000) as i64,
            );
        }
    }
}
