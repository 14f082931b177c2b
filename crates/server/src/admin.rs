//! Commands answered by the server layer rather than the keyspace:
//! connection state (PING, SELECT, AUTH, HELLO, RESET, QUIT, CLIENT),
//! introspection (COMMAND, INFO, CONFIG, SLOWLOG, TIME, LASTSAVE) and
//! SHUTDOWN. Their arity and flags come from the command table.

use crate::clients::Clients;
use crate::config::SetError;
use crate::pubsub::Kind;
use crate::session::{Outcome, Session};
use bytes::Bytes;
use kvasir_core::args::{eq_ic, parse_i64};
use kvasir_core::connection::{
    ClientCmd, CommandCmd, ConfigCmd, LatencyCmd, MemoryCmd, SlowlogCmd,
};
use kvasir_core::glob;
use kvasir_core::keyspace::Keyspace;
use kvasir_core::table::{all_commands, help_reply as help, resolve, Renames};
use kvasir_core::{CmdError, CommandSpec, SessionCmd};
use kvasir_resp::{Protocol, Reply};

/// Runs a command the session layer answers. The match names every
/// variant of [`SessionCmd`], so a table entry cannot lack its code.
pub fn run(s: &mut Session, cmd: SessionCmd, args: &[Bytes]) -> Outcome {
    use SessionCmd as C;
    let cluster = s.server.cluster.clone();
    let result = match cmd {
        C::Ping if crate::pubsub::ping_in_subscribed_mode(s) => ping(args).map(|r| {
            let payload = if args.len() > 1 {
                r
            } else {
                Reply::bulk_str("")
            };
            Reply::Array(vec![Reply::bulk_str("pong"), payload])
        }),
        C::Ping => ping(args),
        C::Echo => Ok(Reply::Bulk(args[1].clone())),
        C::Select => select(s, &args[1]),
        C::Auth => auth(s, &args[0], &args[1..]),
        C::Hello => hello(s, &args[0], &args[1..]),
        C::Quit => {
            s.close = true;
            Ok(Reply::ok())
        }
        C::Reset => Ok(reset(s)),
        C::Info => Ok(crate::info::render(s, &args[1..])),
        C::Time => Ok(time()),
        // Every Kvasir node is a master (see docs/operations.md), with no
        // Redis-style replicas: Raft replicates below the Redis model.
        C::Role => Ok(Reply::Array(vec![
            Reply::bulk_str("master"),
            Reply::Int(0),
            Reply::Array(Vec::new()),
        ])),
        C::Lastsave => Ok(Reply::Int(s.server.persistence.last_save.get() as i64)),
        C::Save if cluster.is_some() => {
            let Some(node) = &cluster else {
                return Reply::error("ERR not in cluster mode").into();
            };
            let saved = crate::persistence::save_cluster(&s.server, node);
            return Outcome::Pending(Box::new(crate::session::PendingOp {
                reply: Box::pin(async move {
                    crate::session::Finished::Reply(match saved.await {
                        Ok(()) => Reply::ok(),
                        Err(e) => Reply::error(e),
                    })
                }),
                write: false,
                blocking: false,
            }));
        }
        C::Save => crate::persistence::save(&s.server)
            .map(|()| Reply::ok())
            .map_err(CmdError::other),
        C::Bgsave => match (args.get(1), &cluster) {
            (Some(a), _) if !eq_ic(a, "schedule") => Err(CmdError::Syntax),
            (schedule, _) => {
                crate::persistence::bgsave_of_mode(&s.server, &cluster, schedule.is_some())
                    .map(Reply::simple)
                    .map_err(CmdError::other)
            }
        },
        // With the append-only file on: a new base and incremental file.
        // Without it (and in cluster mode), what a rewrite gives a Redis
        // user, a compact image of the data on disk, is a snapshot.
        C::Bgrewriteaof if cluster.is_none() => {
            let rewriting = crate::persistence::running_child(&s.server)
                == Some(crate::persistence::ChildKind::Aof);
            if s.txn.executing && !rewriting {
                // As Redis: inside EXEC the rewrite starts after the block.
                s.server.persistence.aof_rewrite_scheduled.set(true);
                return Reply::simple("Background append only file rewriting scheduled").into();
            }
            crate::aof_persistence::rewrite(&s.server)
                .map(Reply::simple)
                .map_err(CmdError::other)
        }
        C::Bgrewriteaof => crate::persistence::rewrite_as_snapshot(&s.server, &cluster)
            .map(Reply::simple)
            .map_err(CmdError::other),
        C::Shutdown => shutdown(s, &args[1..]),
        C::Wait => return wait(s, &args[1], &args[2]),
        C::Waitaof => return waitaof(s, &args[1..]),
        C::Monitor => match crate::monitor::start(s) {
            Some(reply) => Ok(reply),
            None => return Outcome::Replies(Vec::new()),
        },
        C::Readonly | C::Readwrite | C::Asking if cluster.is_none() => Err(CmdError::other(
            "ERR This instance has cluster support disabled",
        )),
        C::Readonly => {
            s.readonly = true;
            Ok(Reply::ok())
        }
        C::Readwrite => {
            s.readonly = false;
            Ok(Reply::ok())
        }
        C::Asking => Ok(Reply::ok()),
        C::Multi => Ok(crate::transaction::multi(s)),
        C::Exec => return crate::transaction::exec(s),
        C::Discard => Ok(crate::transaction::discard(s)),
        C::Watch => return crate::transaction::watch(s, &args[1..]),
        C::Unwatch => Ok(crate::transaction::unwatch(s)),
        C::Subscribe => return crate::pubsub::subscribe(s, &args[1..], Kind::Channel),
        C::Psubscribe => return crate::pubsub::subscribe(s, &args[1..], Kind::Pattern),
        C::Unsubscribe => return crate::pubsub::unsubscribe(s, &args[1..], Kind::Channel),
        C::Punsubscribe => return crate::pubsub::unsubscribe(s, &args[1..], Kind::Pattern),
        C::Ssubscribe => return crate::pubsub::shard_subscription(s, &args[1..], true),
        C::Sunsubscribe => return crate::pubsub::shard_subscription(s, &args[1..], false),
        C::Publish => Ok(crate::pubsub::publish(s, args)),
        C::Spublish => Ok(crate::pubsub::spublish(s, args)),
        C::Pubsub(sub) => crate::pubsub::container(s, sub, args),
        C::Cluster(sub) => return crate::cluster::commands::cluster(s, sub, args),
        C::CommandAll => Ok(command_all(&s.server.config.borrow().renames)),
        C::Client(ClientCmd::Reply) => return client_reply(s, &args[2]),
        C::Client(sub) => client(s, sub, args),
        C::Config(sub) => config(s, sub, args),
        C::Command(sub) => command(&s.server.config.borrow().renames, sub, args),
        C::Slowlog(sub) => slowlog(s, sub, args),
        C::Latency(sub) => Ok(latency(s, sub, args)),
        C::Acl(sub) => crate::acl::run(s, sub, args),
        C::Debug => crate::debug::run(s, args),
        C::Module(sub) => module(s, sub),
        C::Replicaof => replicaof(s, args),
        C::Migrate => crate::migrate::run(s, args),
        C::Pfselftest => kvasir_core::hyperloglog::self_test(crate::local_store::unix_ms())
            .map(|()| Reply::ok())
            .map_err(CmdError::other),
        C::Lolwut => {
            crate::lolwut::render(&args[1..]).map(|t| Reply::Verbatim("txt", Bytes::from(t)))
        }
        C::Sync => {
            s.sync_transfer = true;
            if let Some(node) = &cluster {
                // The shards this node leads, as a Redis Cluster master
                // sends its own slots (redis-cli --rdb on each node).
                let image =
                    crate::persistence::cluster_image(&s.server, node, s.rdb_functions_only);
                s.close = true;
                return Outcome::Pending(Box::new(crate::session::PendingOp {
                    reply: Box::pin(async move {
                        crate::session::Finished::Reply(Reply::Bulk(Bytes::from(image.await)))
                    }),
                    write: false,
                    blocking: false,
                }));
            }
            s.close = true;
            if !s.rdb_functions_only {
                let reply = match crate::persistence::sync_reply_in_child(&s.server) {
                    Ok(reply) => reply,
                    Err(e) => return Reply::Error(e.into()).into(),
                };
                return Outcome::Pending(Box::new(crate::session::PendingOp {
                    reply: Box::pin(async move {
                        match reply.await {
                            Ok(encoded) => crate::session::Finished::Encoded(encoded),
                            Err(e) => crate::session::Finished::Reply(Reply::Error(e.into())),
                        }
                    }),
                    write: false,
                    blocking: false,
                }));
            }
            let image = crate::persistence::sync_image(&s.server, true);
            Ok(Reply::Bulk(Bytes::from(image)))
        }
        C::Replconf => {
            // What redis-cli --rdb and --functions-rdb send before SYNC.
            if args.len() >= 3 && eq_ic(&args[1], "rdb-filter-only") {
                s.rdb_functions_only = eq_ic(&args[2], "functions");
            }
            Ok(Reply::ok())
        }
        C::Memory(MemoryCmd::Stats) => Ok(crate::memory_stats::stats(&s.server)),
        C::Memory(MemoryCmd::Doctor) => Ok(text_reply(crate::memory_stats::doctor(&s.server))),
        C::Memory(MemoryCmd::MallocStats) => Ok(text_reply(crate::memory_stats::malloc_stats())),
        C::Memory(MemoryCmd::Purge) => {
            crate::memory_stats::purge();
            Ok(Reply::ok())
        }
    };
    result.unwrap_or_else(|e| e.to_reply()).into()
}

type AdminResult = Result<Reply, CmdError>;

/// WAIT numreplicas timeout. Standalone there are no replicas: 0, at once
/// when no replica is asked for, else after the timeout (0 waits forever),
/// as redis-server without replicas does. In cluster mode every write this
/// connection got a reply for is already on a majority of its shard's
/// replicas (fsynced with `--wal fsync`), so the count is the replicas of a
/// majority other than the leader.
fn wait(s: &mut Session, numreplicas: &[u8], timeout: &[u8]) -> Outcome {
    let wanted = match parse_i64(numreplicas) {
        Ok(n) => n,
        Err(e) => return e.to_reply().into(),
    };
    let timeout_ms = match parse_timeout_ms(timeout) {
        Ok(t) => t,
        Err(e) => return e.to_reply().into(),
    };
    let acked = replicas_acked(s);
    if wanted <= acked || s.txn.executing {
        return Reply::Int(acked).into();
    }
    reply_after(timeout_ms, Reply::Int(acked))
}

/// The replicas other than this node that have every write the client was
/// answered for: in cluster mode those of a majority, standalone none.
fn replicas_acked(s: &Session) -> i64 {
    match &s.server.cluster {
        Some(_) => (s.server.config.borrow().replicas / 2) as i64,
        None => 0,
    }
}

/// A WAIT-style timeout in milliseconds (0: forever), with Redis's errors.
fn parse_timeout_ms(arg: &[u8]) -> Result<u64, CmdError> {
    match parse_i64(arg) {
        Ok(t) if t < 0 => Err(CmdError::other("ERR timeout is negative")),
        Ok(t) => Ok(t as u64),
        Err(_) => Err(CmdError::other(
            "ERR timeout is not an integer or out of range",
        )),
    }
}

/// Parks the client until `timeout_ms` (0: until it leaves), then answers
/// `reply`: what a WAIT for more copies than there can be gets.
fn reply_after(timeout_ms: u64, reply: Reply) -> Outcome {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::task::spawn_local(async move {
        let mut tx = tx;
        let timer = async {
            match timeout_ms {
                0 => std::future::pending().await,
                ms => tokio::time::sleep(std::time::Duration::from_millis(ms)).await,
            }
        };
        tokio::select! {
            _ = timer => { let _ = tx.send(reply); }
            // The client left or was killed: nothing to answer.
            _ = tx.closed() => {}
        }
    });
    Outcome::Parked(crate::session::Parked { id: None, rx })
}

/// WAITAOF's reply on a log that waits for its first base: [1, 0] once
/// it is written (and the log fsynced), [0, 0] at the timeout (0: none).
fn reply_when_based(server: std::rc::Rc<crate::listener::Server>, timeout_ms: u64) -> Outcome {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::task::spawn_local(async move {
        let mut tx = tx;
        let deadline = (timeout_ms > 0)
            .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms));
        let local = loop {
            if !crate::aof_persistence::waiting_for_base(&server) {
                break i64::from(crate::aof_persistence::sync_now(&server));
            }
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                break 0;
            }
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
                // The client left or was killed: nothing to answer.
                _ = tx.closed() => return,
            }
        };
        let _ = tx.send(Reply::Array(vec![Reply::Int(local), Reply::Int(0)]));
    });
    Outcome::Parked(crate::session::Parked { id: None, rx })
}

/// WAITAOF numlocal numreplicas timeout (Redis 7.2): [local, replicas]
/// copies synced to disk of every write the client was answered for.
/// A standalone server with `appendonly yes` fsyncs its log and answers
/// [1, 0] (it has no replicas); without it, it is a Redis with
/// `appendonly no`. The counterpart in cluster mode is the Raft log of a
/// node with `--wal fsync`, where a write is answered only once this node
/// and a majority fsynced it: there the answer is at once [1, the other
/// replicas of a majority].
fn waitaof(s: &mut Session, args: &[Bytes]) -> Outcome {
    let parsed = (|| {
        let local = parse_i64(&args[0])?;
        if !(0..=1).contains(&local) {
            return Err(CmdError::other(
                "ERR value is out of range, value must between 0 and 1",
            ));
        }
        let replicas = parse_i64(&args[1])?;
        if replicas < 0 {
            return Err(CmdError::other(format!(
                "ERR value is out of range, value must between 0 and {}",
                i64::MAX
            )));
        }
        Ok((local, replicas, parse_timeout_ms(&args[2])?))
    })();
    let (want_local, want_replicas, timeout_ms) = match parsed {
        Ok(p) => p,
        Err(e) => return e.to_reply().into(),
    };
    // A log turned on at run time is durable once its first base is in
    // place: wait for it.
    if s.server.cluster.is_none()
        && want_local > 0
        && !s.txn.executing
        && crate::aof_persistence::waiting_for_base(&s.server)
    {
        return reply_when_based(s.server.clone(), timeout_ms);
    }
    let synced = match s.server.cluster {
        Some(_) => {
            crate::cluster::parse_wal(&s.server.config.borrow().wal)
                == Ok(kvasir_raft::WalMode::Fsync)
        }
        None => crate::aof_persistence::sync_now(&s.server),
    };
    if want_local > 0 && !synced {
        return Reply::error(
            "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        )
        .into();
    }
    let (local, replicas) = match (synced, &s.server.cluster) {
        (true, Some(_)) => (1, replicas_acked(s)),
        (true, None) => (1, 0),
        (false, _) => (0, 0),
    };
    let reply = Reply::Array(vec![Reply::Int(local), Reply::Int(replicas)]);
    if (want_local <= local && want_replicas <= replicas) || s.txn.executing {
        return reply.into();
    }
    reply_after(timeout_ms, reply)
}

fn ping(args: &[Bytes]) -> AdminResult {
    match args.len() {
        1 => Ok(Reply::simple("PONG")),
        2 => Ok(Reply::Bulk(args[1].clone())),
        _ => Err(CmdError::WrongArity("ping".into())),
    }
}

fn select(s: &mut Session, arg: &[u8]) -> AdminResult {
    let index = parse_i64(arg)?;
    if s.server.cluster.is_some() && index != 0 {
        return Err(CmdError::other("ERR SELECT is not allowed in cluster mode"));
    }
    let databases = s.server.config.borrow().databases as i64;
    if index < 0 || index >= databases {
        return Err(CmdError::DbIndexOutOfRange);
    }
    s.db = index as usize;
    s.info.db.set(s.db);
    Ok(Reply::ok())
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Authenticates the connection as `user`, or logs the failure under the
/// command's name as sent (`AUTH`, `hello`), as Redis does.
fn log_in(s: &mut Session, command: &[u8], user: &[u8], pass: &[u8]) -> Result<(), CmdError> {
    let found = s.server.acl.borrow().authenticate(user, pass);
    let Some(found) = found else {
        crate::acl::log_failed_auth(s, command, user);
        return Err(CmdError::other(WRONGPASS));
    };
    *s.info.user.borrow_mut() = found.borrow().name.clone();
    s.user = found;
    s.authenticated = true;
    Ok(())
}

fn auth(s: &mut Session, command: &[u8], rest: &[Bytes]) -> AdminResult {
    let (user, pass): (&[u8], &[u8]) = match rest {
        [pass] => {
            if s.server.acl.borrow().default_user().borrow().nopass {
                return Err(CmdError::other("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
            }
            (b"default", pass)
        }
        [user, pass] => (user, pass),
        _ => return Err(CmdError::Syntax),
    };
    log_in(s, command, user, pass)?;
    Ok(Reply::ok())
}

fn hello(s: &mut Session, command: &[u8], rest: &[Bytes]) -> AdminResult {
    let mut proto = s.proto;
    let mut i = 0;
    if let Some(v) = rest.first() {
        proto = match parse_i64(v) {
            Ok(2) => Protocol::Resp2,
            Ok(3) => Protocol::Resp3,
            Ok(_) => return Err(CmdError::other("NOPROTO unsupported protocol version")),
            Err(_) => {
                return Err(CmdError::other(
                    "ERR Protocol version is not an integer or out of range",
                ))
            }
        };
        i = 1;
    }
    let mut auth: Option<(&Bytes, &Bytes)> = None;
    let mut name: Option<&Bytes> = None;
    while i < rest.len() {
        let more = rest.len() - i - 1;
        if eq_ic(&rest[i], "AUTH") && more >= 2 {
            auth = Some((&rest[i + 1], &rest[i + 2]));
            i += 3;
        } else if eq_ic(&rest[i], "SETNAME") && more >= 1 {
            name = Some(&rest[i + 1]);
            i += 2;
        } else {
            return Err(CmdError::other(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&rest[i])
            )));
        }
    }
    if let Some((user, pass)) = auth {
        log_in(s, command, user, pass)?;
    }
    if s.auth_required() {
        return Err(CmdError::other("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(n) = name {
        set_name(s, n)?;
    }
    s.proto = proto;
    s.info.resp.set(proto);
    Ok(Reply::Map(vec![
        (Reply::bulk_str("server"), Reply::bulk_str("redis")),
        (
            Reply::bulk_str("version"),
            Reply::bulk_str(crate::info::REDIS_VERSION),
        ),
        (
            Reply::bulk_str("proto"),
            Reply::Int(if proto == Protocol::Resp3 { 3 } else { 2 }),
        ),
        (Reply::bulk_str("id"), Reply::Int(s.info.id as i64)),
        (
            Reply::bulk_str("mode"),
            Reply::bulk_str(if s.server.cluster.is_some() {
                "cluster"
            } else {
                "standalone"
            }),
        ),
        (Reply::bulk_str("role"), Reply::bulk_str("master")),
        (Reply::bulk_str("modules"), Reply::Array(Vec::new())),
    ]))
}

fn reset(s: &mut Session) -> Reply {
    s.db = 0;
    s.info.db.set(0);
    s.proto = Protocol::Resp2;
    s.info.resp.set(Protocol::Resp2);
    s.info.name.borrow_mut().clear();
    crate::transaction::reset(s);
    crate::pubsub::unsubscribe_all(s);
    crate::monitor::stop(s);
    s.reply_mode = Default::default();
    if s.info.tracking.borrow().on {
        s.server.tracking.borrow_mut().disable(&s.info);
    }
    s.user = s.server.acl.borrow().default_user();
    *s.info.user.borrow_mut() = "default".to_string();
    s.authenticated = !s.server.acl.borrow().auth_required();
    Reply::simple("RESET")
}

fn time() -> Reply {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Reply::Array(vec![
        Reply::bulk_str(&now.as_secs().to_string()),
        Reply::bulk_str(&now.subsec_micros().to_string()),
    ])
}

fn shutdown(s: &mut Session, rest: &[Bytes]) -> AdminResult {
    use crate::shutdown::Request;
    let flags = match crate::shutdown::parse_command(rest) {
        None => return Err(CmdError::Syntax),
        Some(Request::Abort) if s.server.shutdown_state.abort() => return Ok(Reply::ok()),
        Some(Request::Abort) => return Err(CmdError::other("ERR No shutdown in progress.")),
        Some(Request::Shutdown(flags)) => flags,
    };
    // As Redis: while a script is busy only SHUTDOWN NOSAVE stops the
    // server (a script that wrote cannot be killed otherwise).
    if let Some(busy) = s.server.busy_script() {
        if !flags.nosave {
            return Err(CmdError::other(busy.busy_error()));
        }
    }
    // Standalone, as redis-server: NOSAVE never saves, SAVE always does,
    // neither saves when `save` points are set. A failed save cancels
    // unless FORCE.
    if !crate::shutdown::finish(&s.server, flags) {
        return Err(CmdError::other(
            "ERR Errors trying to SHUTDOWN. Check logs.",
        ));
    }
    // Like Redis, a successful SHUTDOWN closes the connection without a reply.
    s.server.request_shutdown();
    s.close = true;
    s.silent = true;
    Ok(Reply::ok())
}

/// How CONFIG SET changes the client listeners.
enum Relisten {
    /// A new port: its sockets, bound already.
    Port(Vec<tokio::net::TcpListener>),
    /// New addresses at the same port: bound once the old ones are closed
    /// (crate::listener::rebind); each was checked to be this host's.
    Bind { old: String },
}

/// CONFIG SET `port` / `bind` to other values, checked before anything
/// changes (with Redis's error texts); None if neither changed.
fn listen_again(
    server: &crate::listener::Server,
    next: &crate::config::Config,
) -> Result<Option<Relisten>, CmdError> {
    let (name, why, old_bind) = {
        let now = server.config.borrow();
        if next.port != now.port {
            (
                "port",
                "Unable to listen on this port. Check server logs.",
                None,
            )
        } else if next.bind != now.bind {
            (
                "bind",
                "Failed to bind to specified addresses.",
                Some(now.bind.clone()),
            )
        } else {
            return Ok(None);
        }
    };
    let refused = |why: &str| {
        CmdError::other(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    if server.cluster.is_some() {
        // The cluster map tells clients where each node listens.
        return Err(refused(
            "a cluster node's client address is in the cluster map: restart the node with the new one",
        ));
    }
    // A new port is bound now; new addresses are tried at a free port.
    let port = if old_bind.is_some() { 0 } else { next.port };
    let listeners = crate::listener::bind_all(&next.bind, port).map_err(|e| {
        tracing::warn!("Could not listen on {} port {}: {e}", next.bind, next.port);
        refused(why)
    })?;
    Ok(Some(match old_bind {
        Some(old) => Relisten::Bind { old },
        None => Relisten::Port(listeners),
    }))
}

/// CONFIG REWRITE (and DEBUG CONFIG-REWRITE-FORCE-ALL, which writes every
/// parameter, defaults included): the config file the server started with,
/// rewritten in place through a temporary file.
pub fn rewrite_config(server: &crate::listener::Server, force_all: bool) -> Result<(), CmdError> {
    let path = server.config.borrow().config_file.clone();
    let Some(path) = path else {
        return Err(CmdError::other(
            "ERR The server is running without a config file",
        ));
    };
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let text = crate::redis_conf::rewrite(&old, &server.config.borrow(), force_all);
    // Through a temporary file, fsynced, renamed, the folder fsynced (as
    // Redis): a crash leaves the old file or the new one, never a torn one.
    crate::persistence::write_file(std::path::Path::new(&path), text.as_bytes()).map_err(|e| {
        tracing::warn!("CONFIG REWRITE failed: {e}");
        CmdError::other(format!("ERR Rewriting config file: {e}"))
    })
}

fn text_reply(text: String) -> Reply {
    Reply::Verbatim("txt", Bytes::from(text))
}

/// Whether `value` may be shown in a CLIENT LIST line (no spaces,
/// newlines or other characters outside `!`..`~`), else Redis's error
/// naming `what`.
fn check_client_attr(value: &[u8], what: &str) -> Result<(), CmdError> {
    if value.iter().any(|&c| c <= b' ' || c > b'~') {
        return Err(CmdError::other(format!(
            "ERR {what} cannot contain spaces, newlines or special characters."
        )));
    }
    Ok(())
}

/// An ON|OFF argument (CLIENT NO-EVICT, NO-TOUCH), else a syntax error.
fn on_off(arg: &[u8]) -> Result<bool, CmdError> {
    if eq_ic(arg, "on") {
        Ok(true)
    } else if eq_ic(arg, "off") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

fn set_name(s: &Session, name: &[u8]) -> Result<(), CmdError> {
    check_client_attr(name, "Client names")?;
    *s.info.name.borrow_mut() = String::from_utf8_lossy(name).into_owned();
    Ok(())
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value (Redis 7.2): what client
/// libraries send after connecting, shown by CLIENT LIST and CLIENT INFO;
/// an empty value clears it.
fn client_setinfo(s: &Session, attr: &[u8], value: &[u8]) -> AdminResult {
    let attr_text = String::from_utf8_lossy(attr);
    let field = if eq_ic(attr, "lib-name") {
        &s.info.lib_name
    } else if eq_ic(attr, "lib-ver") {
        &s.info.lib_ver
    } else {
        return Err(CmdError::other(format!(
            "ERR Unrecognized option '{attr_text}'"
        )));
    };
    check_client_attr(value, &attr_text)?;
    *field.borrow_mut() = String::from_utf8_lossy(value).into_owned();
    Ok(Reply::ok())
}

fn client(s: &mut Session, sub: ClientCmd, args: &[Bytes]) -> AdminResult {
    match sub {
        ClientCmd::Id => Ok(Reply::Int(s.info.id as i64)),
        ClientCmd::Setname => set_name(s, &args[2]).map(|_| Reply::ok()),
        ClientCmd::Getname => {
            let name = s.info.name.borrow();
            Ok(if name.is_empty() {
                Reply::Nil
            } else {
                Reply::bulk_str(&name)
            })
        }
        ClientCmd::Info => Ok(text_reply(format!("{}\n", s.info.line()))),
        ClientCmd::List => client_list(s, &args[2..]),
        ClientCmd::Kill => client_kill(s, &args[2..]),
        ClientCmd::NoEvict => {
            s.info.no_evict.set(on_off(&args[2])?);
            Ok(Reply::ok())
        }
        ClientCmd::NoTouch => {
            s.info.no_touch.set(on_off(&args[2])?);
            Ok(Reply::ok())
        }
        ClientCmd::Setinfo => client_setinfo(s, &args[2], &args[3]),
        ClientCmd::Tracking => client_tracking(s, &args[2..]),
        ClientCmd::Trackinginfo => Ok(tracking_info(&s.info.tracking.borrow())),
        ClientCmd::Getredir => Ok(Reply::Int(s.info.tracking.borrow().redirect_reply())),
        ClientCmd::Caching => crate::tracking::caching(&mut s.info.tracking.borrow_mut(), &args[2])
            .map(|()| Reply::ok())
            .map_err(|e| e.to_cmd_error()),
        ClientCmd::Pause => crate::client_pause::pause(s, args),
        ClientCmd::Unpause => Ok(crate::client_pause::unpause(s)),
        ClientCmd::Unblock => client_unblock(s, &args[2..]),
        // Answered by `client_reply`: OFF and SKIP have no reply.
        ClientCmd::Reply => Err(CmdError::Syntax),
        ClientCmd::Help => Ok(help(&[
            "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            // Redis 7.0's text, then what Kvasir has of 7.2 (SETINFO,
            // NO-TOUCH).
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
            "HELP",
            "    Prints this help.",
        ])),
    }
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if the connection was blocked in
/// a blocking command (BLPOP, XREAD BLOCK...) and is now answered, as at
/// its timeout or with Redis's `-UNBLOCKED` error; 0 otherwise.
fn client_unblock(s: &Session, rest: &[Bytes]) -> AdminResult {
    let id = parse_i64(&rest[0]).map_err(|_| CmdError::NotInteger)?;
    let error = match rest.get(1) {
        None => false,
        Some(m) if eq_ic(m, "timeout") => false,
        Some(m) if eq_ic(m, "error") => true,
        Some(_) => {
            return Err(CmdError::other(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    if rest.len() > 2 {
        return Err(CmdError::Syntax);
    }
    let waiter = u64::try_from(id)
        .ok()
        .and_then(|id| {
            s.server
                .clients
                .borrow()
                .get(id)
                .map(|c| c.parked_waiter.get())
        })
        .flatten();
    let reply = error.then(|| Reply::error("UNBLOCKED client unblocked via CLIENT UNBLOCK"));
    let done = waiter.is_some_and(|w| s.server.blocking.borrow_mut().unblock(w, reply));
    Ok(Reply::Int(i64::from(done)))
}

/// CLIENT REPLY ON|OFF|SKIP. OFF and SKIP answer nothing; ON answers +OK
/// (the session reads the mode after the command, so ON's own reply goes
/// out).
fn client_reply(s: &mut Session, mode: &[u8]) -> Outcome {
    if eq_ic(mode, "on") {
        s.reply_mode.off = false;
        s.reply_mode.skip = false;
        return Reply::ok().into();
    }
    if eq_ic(mode, "off") {
        s.reply_mode.off = true;
    } else if eq_ic(mode, "skip") {
        if !s.reply_mode.off {
            s.reply_mode.skip_next = true;
        }
    } else {
        return CmdError::Syntax.to_reply().into();
    }
    Outcome::Replies(Vec::new())
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP].
fn client_tracking(s: &mut Session, rest: &[Bytes]) -> AdminResult {
    let parsed = {
        let clients = s.server.clients.borrow();
        crate::tracking::parse_request(rest, |id| clients.get(id).is_some())
    };
    let req = parsed.map_err(|e| e.to_cmd_error())?;
    if req.on {
        crate::tracking::check_enable(&s.info.tracking.borrow(), &req)
            .map_err(|e| e.to_cmd_error())?;
        s.server.tracking.borrow_mut().enable(&s.info, req);
        // BCAST hears of writes this node applies as a follower too, which
        // no job of this thread precedes.
        if let Some(node) = &s.server.cluster {
            node.hooks.refresh_keys_wanted();
        }
    } else {
        s.server.tracking.borrow_mut().disable(&s.info);
    }
    Ok(Reply::ok())
}

/// CLIENT TRACKINGINFO: a map of flags (a set), redirect and prefixes.
fn tracking_info(t: &crate::tracking::ClientTracking) -> Reply {
    Reply::Map(vec![
        (
            Reply::bulk_str("flags"),
            Reply::Set(t.flag_names().into_iter().map(Reply::bulk_str).collect()),
        ),
        (Reply::bulk_str("redirect"), Reply::Int(t.redirect_reply())),
        (
            Reply::bulk_str("prefixes"),
            Reply::Array(t.prefixes.iter().cloned().map(Reply::Bulk).collect()),
        ),
    ])
}

fn client_list(s: &Session, opts: &[Bytes]) -> AdminResult {
    let mut ids: Option<Vec<u64>> = None;
    let mut i = 0;
    while i < opts.len() {
        if eq_ic(&opts[i], "TYPE") && i + 1 < opts.len() {
            let t = &opts[i + 1];
            if !(eq_ic(t, "normal")
                || eq_ic(t, "master")
                || eq_ic(t, "replica")
                || eq_ic(t, "pubsub"))
            {
                return Err(CmdError::other(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(t)
                )));
            }
            if !eq_ic(t, "normal") {
                ids = Some(Vec::new());
            }
            i += 2;
        } else if eq_ic(&opts[i], "ID") && i + 1 < opts.len() {
            let mut list = Vec::new();
            for a in &opts[i + 1..] {
                match parse_i64(a) {
                    Ok(v) if v > 0 => list.push(v as u64),
                    _ => return Err(CmdError::other("ERR Invalid client ID")),
                }
            }
            ids = Some(list);
            i = opts.len();
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let clients = s.server.clients.borrow();
    let mut text = String::new();
    for c in clients.iter() {
        if ids.as_ref().is_some_and(|ids| !ids.contains(&c.id)) {
            continue;
        }
        text.push_str(&c.line());
        text.push('\n');
    }
    Ok(text_reply(text))
}

fn client_kill(s: &mut Session, opts: &[Bytes]) -> AdminResult {
    // Old form: CLIENT KILL ip:port.
    if opts.len() == 1 {
        let addr = String::from_utf8_lossy(&opts[0]).into_owned();
        let clients = s.server.clients.borrow();
        let target = clients.iter().find(|c| c.addr.to_string() == addr).cloned();
        drop(clients);
        return match target {
            Some(c) => {
                Clients::kill(&c);
                if c.id == s.info.id {
                    s.close = true;
                }
                Ok(Reply::ok())
            }
            None => Err(CmdError::other("ERR No such client")),
        };
    }
    if !opts.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut id: Option<u64> = None;
    let mut addr: Option<String> = None;
    let mut laddr: Option<String> = None;
    let mut skipme = true;
    let mut normal_only = true;
    let mut maxage: Option<u64> = None;
    let mut user: Option<String> = None;
    for pair in opts.chunks(2) {
        let (k, v) = (&pair[0], &pair[1]);
        let text = String::from_utf8_lossy(v).into_owned();
        if eq_ic(k, "ID") {
            id = Some(match parse_i64(v) {
                Ok(n) if n > 0 => n as u64,
                _ => return Err(CmdError::other("ERR client-id should be greater than 0")),
            });
        } else if eq_ic(k, "ADDR") {
            addr = Some(text);
        } else if eq_ic(k, "LADDR") {
            laddr = Some(text);
        } else if eq_ic(k, "SKIPME") {
            skipme = match text.to_ascii_lowercase().as_str() {
                "yes" => true,
                "no" => false,
                _ => return Err(CmdError::Syntax),
            };
        } else if eq_ic(k, "TYPE") {
            match text.to_ascii_lowercase().as_str() {
                "normal" => normal_only = true,
                "master" | "replica" | "slave" | "pubsub" => normal_only = false,
                _ => return Err(CmdError::other(format!("ERR Unknown client type '{text}'"))),
            }
        } else if eq_ic(k, "USER") {
            if s.server.acl.borrow().user(&text).is_none() {
                return Err(CmdError::other(format!("ERR No such user '{text}'")));
            }
            user = Some(text);
        } else if eq_ic(k, "MAXAGE") {
            maxage = Some(parse_i64(v)?.max(0) as u64);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let targets: Vec<_> = s
        .server
        .clients
        .borrow()
        .iter()
        .filter(|_| normal_only)
        .filter(|c| id.is_none_or(|id| c.id == id))
        .filter(|c| addr.as_ref().is_none_or(|a| c.addr.to_string() == *a))
        .filter(|c| laddr.as_ref().is_none_or(|a| c.laddr.to_string() == *a))
        .filter(|c| maxage.is_none_or(|m| c.created.elapsed().as_secs() >= m))
        .filter(|c| user.as_ref().is_none_or(|u| *c.user.borrow() == *u))
        .filter(|c| !(skipme && c.id == s.info.id))
        .cloned()
        .collect();
    for c in &targets {
        Clients::kill(c);
        if c.id == s.info.id {
            s.close = true;
        }
    }
    Ok(Reply::Int(targets.len() as i64))
}

fn config(s: &mut Session, sub: ConfigCmd, args: &[Bytes]) -> AdminResult {
    match sub {
        ConfigCmd::Get => {
            let entries = s.server.config.borrow().entries();
            let mut pairs = Vec::new();
            for (name, value) in entries {
                let hidden = crate::redis_params::HIDDEN.contains(&name);
                if args[2..].iter().any(|p| {
                    if hidden {
                        p.eq_ignore_ascii_case(name.as_bytes())
                    } else {
                        glob::matches(p, name.as_bytes(), true)
                    }
                }) {
                    pairs.push((Reply::bulk_str(name), Reply::bulk_str(&value)));
                }
            }
            Ok(Reply::Map(pairs))
        }
        ConfigCmd::Set => {
            let rest = &args[2..];
            if !rest.len().is_multiple_of(2) {
                return Err(CmdError::Syntax);
            }
            // Before the other checks, as Redis (clients handle -LOADING
            // apart from a plain error).
            if s.server.loading.active()
                && rest.chunks(2).any(|pair| {
                    let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
                    crate::loading::DENIED_CONFIGS.contains(&name.as_str())
                })
            {
                return Err(CmdError::other(crate::loading::LOADING_ERROR));
            }
            let mut next = s.server.config.borrow().clone();
            let mut seen: Vec<String> = Vec::new();
            for pair in rest.chunks(2) {
                let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
                let value = String::from_utf8_lossy(&pair[1]).into_owned();
                // One parameter named twice is refused (under an alias and
                // its own name it is not, as in Redis 7.0).
                if seen.contains(&name) {
                    return Err(CmdError::other(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter")));
                }
                seen.push(name.clone());
                // Redis 7's protected configs: where the server writes files.
                if matches!(name.as_str(), "dir" | "dbfilename")
                    && !crate::listener::enabled_for(
                        &s.server,
                        "enable-protected-configs",
                        &s.info.addr,
                    )
                {
                    return Err(CmdError::other(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - can't set protected config")));
                }
                match next.set(&name, &value) {
                    Ok(()) => {}
                    Err(SetError::Unknown) => {
                        return Err(CmdError::other(format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'")))
                    }
                    Err(SetError::Immutable) => {
                        return Err(CmdError::other(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config")))
                    }
                    Err(SetError::Invalid(why)) => {
                        return Err(CmdError::other(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")))
                    }
                }
            }
            if s.server.cluster.is_some() && next.appendonly {
                return Err(CmdError::other(format!(
                    "ERR CONFIG SET failed (possibly related to argument 'appendonly') - {}",
                    crate::aof::NOT_IN_CLUSTER
                )));
            }
            // New listeners are bound before anything changes, so that a
            // port in use refuses the whole CONFIG SET.
            let listeners = listen_again(&s.server, &next)?;
            let aof_changed = {
                let now = s.server.config.borrow();
                let (a, b) = (next.aof_settings(), now.aof_settings());
                next.appendonly != now.appendonly
                    || a.fsync != b.fsync
                    || a.timestamps != b.timestamps
            };
            let limits = next.encoding_limits();
            if s.server.cluster.is_some() && limits != s.server.config.borrow().encoding_limits() {
                // The thresholds are replicated state (they decide when a
                // value converts), so a node-local change would diverge.
                return Err(CmdError::other(
                    "ERR CONFIG SET of encoding thresholds is not supported in cluster mode (every shard uses Redis's defaults)",
                ));
            }
            // The OOM score is set after the checks above and is the last
            // step that may fail: if it does, nothing has changed yet.
            let (oom_mode, oom_values) = next.oom_score();
            let (old_mode, old_values) = s.server.config.borrow().oom_score();
            if (oom_mode != old_mode || oom_values != old_values)
                && crate::oom_score::apply(&oom_mode, oom_values).is_err()
            {
                let name = if oom_mode != old_mode {
                    "oom-score-adj"
                } else {
                    "oom-score-adj-values"
                };
                return Err(CmdError::other(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - {}",
                    crate::oom_score::FAILED
                )));
            }
            let notify = next.notify_keyspace_events;
            // Redis evicts at once when maxmemory changes, else at the next
            // command.
            let maxmemory_changed = next.maxmemory != s.server.config.borrow().maxmemory;
            let access_mode = crate::maxmemory::eviction_settings(&next).2;
            s.server.memory_guard.forget_settings();
            {
                let mut tracking = s.server.tracking.borrow_mut();
                tracking.max_keys = next.tracking_table_max_keys();
                tracking.trim();
            }
            s.server
                .clients
                .borrow()
                .output_limits
                .set(next.output_limits());
            s.server.stats.borrow_mut().latency_tracking = next.latency_tracking();
            if next.requirepass != s.server.config.borrow().requirepass {
                s.server
                    .acl
                    .borrow()
                    .set_requirepass(next.requirepass.as_deref());
            }
            *s.server.config.borrow_mut() = next;
            s.server.local_store.borrow_mut().with_store(|store| {
                store.notify = notify;
                store.keyspace().set_access_mode(access_mode);
            });
            for shard in s.server.led_shards() {
                let server = s.server.clone();
                tokio::task::spawn_local(async move {
                    server
                        .on_shard(shard, move |store| {
                            store.keyspace().set_access_mode(access_mode)
                        })
                        .await;
                });
            }
            if let Some(node) = &s.server.cluster {
                node.hooks
                    .notify
                    .store(notify, std::sync::atomic::Ordering::Relaxed);
            }
            // Under Raft this becomes a replicated entry, so that every
            // replica converts encodings at the same point.
            s.server
                .local_store
                .borrow_mut()
                .with_store(|store| store.limits = limits);
            if maxmemory_changed {
                s.server.evict_if_over();
            }
            match listeners {
                None => {}
                Some(Relisten::Port(listeners)) => crate::listener::listen_on(&s.server, listeners),
                Some(Relisten::Bind { old }) => {
                    let bind = s.server.config.borrow().bind.clone();
                    tokio::task::spawn_local(crate::listener::rebind(s.server.clone(), bind, old));
                }
            }
            if aof_changed {
                crate::aof_persistence::apply_settings(&s.server, s.txn.executing).map_err(
                    |e| {
                        CmdError::other(format!(
                        "ERR CONFIG SET failed (possibly related to argument 'appendonly') - {e}"
                    ))
                    },
                )?;
            }
            Ok(Reply::ok())
        }
        ConfigCmd::Rewrite => {
            rewrite_config(&s.server, false)?;
            Ok(Reply::ok())
        }
        ConfigCmd::Resetstat => {
            // Direct calls so far are reset with the rest.
            crate::direct_gate::merge_stats(&s.server);
            let mut stats = s.server.stats.borrow_mut();
            let tracking = stats.latency_tracking;
            *stats = Default::default();
            stats.latency_tracking = tracking;
            s.server
                .local_store
                .borrow_mut()
                .with_store(|st| st.stats = Default::default());
            Ok(Reply::ok())
        }
        ConfigCmd::Help => Ok(help(&[
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
            "HELP",
            "    Prints this help.",
        ])),
    }
}

/// The commands COMMAND shows: the table's, less those `rename-command`
/// disabled; a renamed command keeps its own name there, as in Redis.
fn listed(renames: &Renames) -> impl Iterator<Item = &'static CommandSpec> + '_ {
    all_commands()
        .iter()
        .copied()
        .filter(|c| !renames.removed(c.name))
}

fn command_all(renames: &Renames) -> Reply {
    Reply::Array(listed(renames).map(|c| c.info_reply(None)).collect())
}

/// A command or `parent|sub` by the name a client uses for it.
fn find_spec(
    renames: &Renames,
    name: &[u8],
) -> Option<(&'static CommandSpec, Option<&'static CommandSpec>)> {
    let text = String::from_utf8_lossy(name).to_ascii_lowercase();
    match text.split_once('|') {
        Some((parent, sub)) => {
            let p = renames.lookup(parent.as_bytes())?;
            p.subcommands
                .iter()
                .find(|s| s.name == sub)
                .map(|s| (s, Some(p)))
        }
        None => renames.lookup(name).map(|c| (c, None)),
    }
}

fn command(renames: &Renames, sub: CommandCmd, args: &[Bytes]) -> AdminResult {
    match sub {
        CommandCmd::Count => Ok(Reply::Int(listed(renames).count() as i64)),
        // Like Redis 7, the list names subcommands too (`config|get`).
        CommandCmd::List => {
            let filter = match &args[2..] {
                [] => None,
                [by, kind, value] if eq_ic(by, "filterby") => Some((kind, value)),
                _ => return Err(CmdError::Syntax),
            };
            let keep = |spec: &CommandSpec, name: &str| -> Result<bool, CmdError> {
                Ok(match filter {
                    None => true,
                    // Kvasir has no modules.
                    Some((kind, _)) if eq_ic(kind, "module") => false,
                    Some((kind, cat)) if eq_ic(kind, "aclcat") => {
                        let cat = String::from_utf8_lossy(cat).to_ascii_lowercase();
                        spec.acl.iter().any(|c| *c == cat.trim_start_matches('@'))
                    }
                    Some((kind, pattern)) if eq_ic(kind, "pattern") => {
                        glob::matches(pattern, name.as_bytes(), true)
                    }
                    Some(_) => return Err(CmdError::Syntax),
                })
            };
            let mut names = Vec::new();
            for c in listed(renames) {
                if keep(c, c.name)? {
                    names.push(Reply::bulk_str(c.name));
                }
                for sub in c.subcommands {
                    let full = sub.full_name(Some(c));
                    if keep(sub, &full)? {
                        names.push(Reply::bulk_str(&full));
                    }
                }
            }
            Ok(Reply::Array(names))
        }
        CommandCmd::Info => {
            if args.len() == 2 {
                return Ok(command_all(renames));
            }
            Ok(Reply::Array(
                args[2..]
                    .iter()
                    .map(|n| match find_spec(renames, n) {
                        Some((spec, parent)) => spec.info_reply(parent),
                        None => Reply::Nil,
                    })
                    .collect(),
            ))
        }
        CommandCmd::Docs => {
            let specs: Vec<_> = if args.len() == 2 {
                listed(renames).map(|c| (c, None)).collect()
            } else {
                args[2..]
                    .iter()
                    .filter_map(|n| find_spec(renames, n))
                    .collect()
            };
            Ok(Reply::Map(
                specs.into_iter().map(|(s, p)| s.docs_reply(p)).collect(),
            ))
        }
        CommandCmd::Getkeys | CommandCmd::Getkeysandflags => {
            // The command as the client names it (rename-command).
            let mut target = args[2..].to_vec();
            if renames.apply(&mut target).is_err() {
                return Err(CmdError::other("ERR Invalid command specified"));
            }
            let target = &target[..];
            let (spec, _) = match resolve(target) {
                Ok(found) => found,
                Err(CmdError::WrongArity(_)) => {
                    return Err(CmdError::other(
                        "ERR Invalid number of arguments specified for command",
                    ))
                }
                Err(_) => return Err(CmdError::other("ERR Invalid command specified")),
            };
            // Channels (SPUBLISH's) are not keys here.
            let not_keys = spec
                .key_spec_list()
                .iter()
                .all(|k| k.contains(kvasir_core::table::KeySpec::NOT_KEY));
            if (spec.first_key == 0 && spec.key_finder.is_none()) || not_keys {
                return Err(CmdError::other("ERR The command has no key arguments"));
            }
            let keys = spec.keys_of(target);
            if keys.is_empty() {
                // Scripts and functions may name no key; other commands
                // must find one.
                if spec
                    .flags
                    .contains(kvasir_core::table::Flags::NO_MANDATORY_KEYS)
                {
                    return Ok(Reply::Array(Vec::new()));
                }
                return Err(CmdError::other(
                    "ERR Invalid arguments specified for command",
                ));
            }
            let with_flags = matches!(sub, CommandCmd::Getkeysandflags);
            Ok(Reply::Array(
                keys.into_iter()
                    .enumerate()
                    .map(|(nth, i)| {
                        let key = Reply::Bulk(target[i].clone());
                        if !with_flags {
                            return key;
                        }
                        let flags = spec.key_flags_of(target, nth).names();
                        Reply::Array(vec![
                            key,
                            Reply::Set(flags.into_iter().map(Reply::simple).collect()),
                        ])
                    })
                    .collect(),
            ))
        }
        CommandCmd::Help => Ok(help(&[
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
            "HELP",
            "    Prints this help.",
        ])),
    }
}

fn slowlog(s: &mut Session, sub: SlowlogCmd, args: &[Bytes]) -> AdminResult {
    match sub {
        SlowlogCmd::Get => {
            let count = match args.get(2) {
                None => None,
                Some(a) => match parse_i64(a) {
                    Ok(-1) => Some(usize::MAX),
                    Ok(n) if n >= 0 => Some(n as usize),
                    _ => {
                        return Err(CmdError::other(
                            "ERR count should be greater than or equal to -1",
                        ))
                    }
                },
            };
            if args.len() > 3 {
                return Err(CmdError::WrongArity("slowlog|get".into()));
            }
            Ok(s.server.slowlog.borrow().get(count))
        }
        SlowlogCmd::Len => Ok(Reply::Int(s.server.slowlog.borrow().len() as i64)),
        SlowlogCmd::Reset => {
            s.server.slowlog.borrow_mut().reset();
            Ok(Reply::ok())
        }
        SlowlogCmd::Help => Ok(help(&[
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
            "HELP",
            "    Prints this help.",
        ])),
    }
}

fn latency(s: &Session, sub: LatencyCmd, args: &[Bytes]) -> Reply {
    let monitor = &s.server.latency;
    match sub {
        LatencyCmd::Latest => monitor.borrow().latest(),
        LatencyCmd::History => monitor.borrow().history(&args[2]),
        LatencyCmd::Reset => monitor.borrow_mut().reset(&args[2..]),
        LatencyCmd::Doctor => {
            let threshold = s.server.config.borrow().latency_monitor_threshold;
            let now = (crate::local_store::unix_ms() / 1000) as i64;
            text_reply(monitor.borrow().doctor(threshold, now))
        }
        LatencyCmd::Graph => {
            let now = (crate::local_store::unix_ms() / 1000) as i64;
            match monitor.borrow().graph(&args[2], now) {
                Some(graph) => text_reply(graph),
                None => Reply::error(format!(
                    "ERR No samples available for event '{}'",
                    String::from_utf8_lossy(&args[2])
                )),
            }
        }
        LatencyCmd::Histogram => latency_histogram(s, &args[2..]),
        LatencyCmd::Help => help(crate::latency::HELP),
    }
}

/// LATENCY HISTOGRAM [command ...]: every command with calls (by name), or
/// the named ones in the order named (a container with its subcommands).
fn latency_histogram(s: &Session, names: &[Bytes]) -> Reply {
    crate::direct_gate::merge_stats(&s.server);
    let stats = s.server.stats.borrow();
    let mut rows: Vec<_> = stats
        .commands
        .values()
        .filter(|st| st.latency.is_some())
        .collect();
    rows.sort_by_key(|st| st.name);
    let picked: Vec<_> = if names.is_empty() {
        rows
    } else {
        let mut picked = Vec::new();
        for n in names {
            let n = String::from_utf8_lossy(n).to_ascii_lowercase();
            for st in &rows {
                let wanted = match n.split_once('|') {
                    Some((cmd, sub)) => st.name == (cmd, sub),
                    None => st.name.0 == n,
                };
                if wanted
                    && !picked
                        .iter()
                        .any(|p: &&crate::listener::CmdStat| p.name == st.name)
                {
                    picked.push(*st);
                }
            }
        }
        picked
    };
    Reply::Map(
        picked
            .into_iter()
            .filter_map(|st| {
                let latency = st.latency.as_ref()?;
                Some((Reply::bulk_str(&st.full_name()), latency.cdf_reply()))
            })
            .collect(),
    )
}

/// MODULE: Kvasir has no module system. LIST is empty; LOAD and UNLOAD
/// answer as redis-server does with `enable-module-command no` (its
/// default), or as if the module did not exist when it is `yes`.
fn module(s: &mut Session, sub: kvasir_core::connection::ModuleCmd) -> AdminResult {
    use kvasir_core::connection::ModuleCmd;
    let enabled = crate::listener::enabled_for(&s.server, "enable-module-command", &s.info.addr);
    let refused = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
    match sub {
        ModuleCmd::List => Ok(Reply::Array(Vec::new())),
        ModuleCmd::Load if !enabled => Err(CmdError::other(refused)),
        ModuleCmd::Unload if !enabled => Err(CmdError::other(refused)),
        ModuleCmd::Load => Err(CmdError::other(
            "ERR Error loading the extension. Please check the server logs.",
        )),
        ModuleCmd::Unload => Err(CmdError::other(
            "ERR Error unloading module: no such module with that name",
        )),
        ModuleCmd::Help => Ok(help(&[
            "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
            "HELP",
            "    Prints this help.",
        ])),
    }
}

/// REPLICAOF / SLAVEOF: NO ONE is what a master answers (OK, nothing to
/// do). Following a Redis master is not something Kvasir does: its
/// replicas are the Raft replicas of cluster mode.
fn replicaof(s: &mut Session, args: &[Bytes]) -> AdminResult {
    if eq_ic(&args[1], "no") && eq_ic(&args[2], "one") {
        return Ok(Reply::ok());
    }
    if s.server.cluster.is_some() {
        return Err(CmdError::other(
            "ERR REPLICAOF not allowed in cluster mode.",
        ));
    }
    Err(CmdError::other(
        "ERR REPLICAOF of another server is not supported: Kvasir replicates through Raft (start the nodes in cluster mode with --replicas)",
    ))
}
