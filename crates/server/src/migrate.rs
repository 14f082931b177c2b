//! MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
//! [AUTH password] [AUTH2 username password] [KEYS key ...], as Redis 7
//! does it: the keys' DUMP payloads are sent to the target as RESTORE
//! commands over one connection (the server waits for it, as Redis's data
//! thread does, bounded by `timeout` ms), then deleted here unless COPY.
//! Connections are kept for the next MIGRATE to the same target, as Redis
//! keeps them (INFO `migrate_cached_sockets`), until idle for 10 seconds.
//! Standalone only: in cluster mode Kvasir moves slots itself.

use crate::session::Session;
use bytes::{Bytes, BytesMut};
use kvasir_core::args::{eq_ic, parse_i64};
use kvasir_core::table::resolve;
use kvasir_core::CmdError;
use kvasir_resp::{Protocol, Reply};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Connections kept at most (Redis's MIGRATE_SOCKET_CACHE_ITEMS).
const CACHED_MAX: usize = 64;
/// A kept connection idle this long is closed (MIGRATE_SOCKET_CACHE_TTL).
const CACHED_IDLE: Duration = Duration::from_secs(10);

/// A connection to a MIGRATE target kept for the next MIGRATE to it.
struct Cached {
    stream: TcpStream,
    /// The database the last MIGRATE selected on it, so the next one to the
    /// same database sends no SELECT.
    db: i64,
    last_use: Instant,
}

/// MIGRATE's connections by "host:port".
#[derive(Default)]
pub struct SocketCache {
    sockets: RefCell<HashMap<String, Cached>>,
}

impl SocketCache {
    /// INFO's `migrate_cached_sockets`.
    pub fn len(&self) -> usize {
        self.sockets.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes the connections idle for CACHED_IDLE (the server cron).
    pub fn close_idle(&self, now: Instant) {
        self.sockets
            .borrow_mut()
            .retain(|_, c| now.duration_since(c.last_use) < CACHED_IDLE);
    }

    fn take(&self, target: &str) -> Option<Cached> {
        self.sockets.borrow_mut().remove(target)
    }

    fn keep(&self, target: String, cached: Cached) {
        let mut sockets = self.sockets.borrow_mut();
        if sockets.len() >= CACHED_MAX && !sockets.contains_key(&target) {
            // Full: the least recently used goes (Redis drops a random one).
            let oldest = sockets
                .iter()
                .min_by_key(|(_, c)| c.last_use)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                sockets.remove(&k);
            }
        }
        sockets.insert(target, cached);
    }
}

struct Options {
    copy: bool,
    replace: bool,
    auth: Option<Vec<Bytes>>,
    keys: Vec<Bytes>,
}

fn options(args: &[Bytes]) -> Result<Options, CmdError> {
    let mut o = Options {
        copy: false,
        replace: false,
        auth: None,
        keys: Vec::new(),
    };
    let mut i = 6;
    let mut keys_at = None;
    while i < args.len() {
        let a = &args[i];
        let more = args.len() - i - 1;
        if eq_ic(a, "copy") {
            o.copy = true;
        } else if eq_ic(a, "replace") {
            o.replace = true;
        } else if eq_ic(a, "auth") && more >= 1 {
            o.auth = Some(vec![args[i + 1].clone()]);
            i += 1;
        } else if eq_ic(a, "auth2") && more >= 2 {
            o.auth = Some(vec![args[i + 1].clone(), args[i + 2].clone()]);
            i += 2;
        } else if eq_ic(a, "keys") {
            if !args[3].is_empty() {
                return Err(CmdError::other(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            keys_at = Some(i + 1);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    o.keys = match keys_at {
        Some(at) => args[at..].to_vec(),
        None => vec![args[3].clone()],
    };
    Ok(o)
}

/// A command as the target reads it: an array of bulk strings.
fn resp(args: &[&[u8]], out: &mut BytesMut) {
    let cmd = Reply::Array(
        args.iter()
            .map(|a| Reply::Bulk(Bytes::copy_from_slice(a)))
            .collect(),
    );
    kvasir_resp::encode(&cmd, Protocol::Resp2, out);
}

pub fn run(s: &mut Session, args: &[Bytes]) -> Result<Reply, CmdError> {
    if s.server.cluster.is_some() {
        return Err(CmdError::other(
            "ERR MIGRATE is not supported in cluster mode: Kvasir moves slots between its nodes itself",
        ));
    }
    let o = options(args)?;
    let db = parse_i64(&args[4])?;
    let timeout = parse_i64(&args[5])?;
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    // The keys that exist, with their payloads and remaining times to live.
    let now = crate::local_store::unix_ms();
    let mut found: Vec<(Bytes, Vec<u8>, u64)> = Vec::new();
    {
        let local = s.server.local_store.borrow();
        let store = local.store();
        for key in &o.keys {
            if let Some(e) = store.peek(s.db, key, now) {
                let ttl = e.expire_at().map_or(0, |at| at.saturating_sub(now).max(1));
                found.push((key.clone(), kvasir_core::rdb::dump(e.value), ttl));
            }
        }
    }
    if found.is_empty() {
        return Ok(Reply::simple("NOKEY"));
    }
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    let port = parse_i64(&args[2])?;
    let target = format!("{host}:{port}");
    let cache = &s.server.migrate_sockets;
    // A kept connection the target has closed since fails at once: then
    // once more on a new one, as Redis retries (not after a timeout).
    let (mut conn, mut from_cache) = match cache.take(&target) {
        Some(c) => (c, true),
        None => (connect(&host, port, timeout)?, false),
    };
    let replies = loop {
        match exchange(&mut conn, db, timeout, &o, &found) {
            Ok(replies) => break replies,
            Err(Failure::Io(_, kind))
                if from_cache && !matches!(kind, ErrorKind::TimedOut | ErrorKind::WouldBlock) =>
            {
                conn = connect(&host, port, timeout)?;
                from_cache = false;
            }
            Err(Failure::Io(text, _)) => return Err(CmdError::other(text)),
            Err(Failure::Target(err)) => {
                // The connection is sound; its selected database is not known.
                conn.db = -1;
                conn.last_use = Instant::now();
                cache.keep(target, conn);
                return Err(CmdError::other(format!(
                    "ERR Target instance replied with error: {err}"
                )));
            }
        }
    };
    conn.db = db;
    conn.last_use = Instant::now();
    cache.keep(target, conn);
    let mut moved = Vec::new();
    let mut first_error = None;
    for ((key, _, _), reply) in found.iter().zip(replies) {
        match reply {
            None => moved.push(key.clone()),
            Some(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    if !o.copy && !moved.is_empty() {
        // Through the ordinary write path: watchers, tracking and `del`
        // events hear of it as of a DEL.
        let mut del = vec![Bytes::from_static(b"DEL")];
        del.extend(moved);
        if let Ok((spec, _)) = resolve(&del) {
            let _ = crate::router::submit(s, spec, &del);
        }
    }
    match first_error {
        Some(err) => Err(CmdError::other(format!(
            "ERR Target instance replied with error: {err}"
        ))),
        None => Ok(Reply::ok()),
    }
}

/// Why an exchange with the target failed.
enum Failure {
    /// The connection failed (Redis's IOERR text, and what happened).
    Io(&'static str, ErrorKind),
    /// The target refused AUTH or SELECT.
    Target(String),
}

fn connect(host: &str, port: i64, timeout: Duration) -> Result<Cached, CmdError> {
    let addr = u16::try_from(port)
        .ok()
        .and_then(|p| (host, p).to_socket_addrs().ok()?.next())
        .ok_or_else(|| CmdError::other("IOERR error or timeout connecting to the client"))?;
    // A refused or timed-out connection reads as Redis reports it (its
    // non-blocking connect fails on the first write).
    let stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|_| CmdError::other("IOERR error or timeout writing to target instance"))?;
    let _ = stream.set_nodelay(true);
    Ok(Cached {
        stream,
        db: -1,
        last_use: Instant::now(),
    })
}

/// Sends AUTH, SELECT (unless the connection has `db` selected) and one
/// RESTORE per key; answers each RESTORE's error, if any, in key order.
fn exchange(
    conn: &mut Cached,
    db: i64,
    timeout: Duration,
    o: &Options,
    found: &[(Bytes, Vec<u8>, u64)],
) -> Result<Vec<Option<String>>, Failure> {
    let stream = &conn.stream;
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let mut out = BytesMut::new();
    let mut expected = 0;
    if let Some(auth) = &o.auth {
        let mut a: Vec<&[u8]> = vec![b"AUTH"];
        a.extend(auth.iter().map(|b| &b[..]));
        resp(&a, &mut out);
        expected += 1;
    }
    if conn.db != db {
        resp(&[b"SELECT", db.to_string().as_bytes()], &mut out);
        expected += 1;
    }
    for (key, payload, ttl) in found {
        let ttl = ttl.to_string();
        let mut a: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
        if o.replace {
            a.push(b"REPLACE");
        }
        resp(&a, &mut out);
    }
    let mut writer = stream;
    writer.write_all(&out).map_err(|e| {
        Failure::Io(
            "IOERR error or timeout writing to target instance",
            e.kind(),
        )
    })?;
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    let mut read_reply = || -> Result<Option<String>, Failure> {
        line.clear();
        let failed = |kind| Failure::Io("IOERR error or timeout reading to target instance", kind);
        match reader.read_until(b'\n', &mut line) {
            Ok(n) if n > 0 => {}
            Ok(_) => return Err(failed(ErrorKind::UnexpectedEof)),
            Err(e) => return Err(failed(e.kind())),
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        Ok(text.strip_prefix('-').map(str::to_string))
    };
    // Every reply is read, even after an error, so that a kept connection
    // has none left over for the next MIGRATE.
    let mut setup_error = None;
    for _ in 0..expected {
        if let Some(err) = read_reply()? {
            setup_error.get_or_insert(err);
        }
    }
    let replies = found
        .iter()
        .map(|_| read_reply())
        .collect::<Result<_, _>>()?;
    match setup_error {
        Some(err) => Err(Failure::Target(err)),
        None => Ok(replies),
    }
}
