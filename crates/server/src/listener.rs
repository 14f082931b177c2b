//! The node's event loop: binds the listeners, accepts connections within
//! `maxclients`, runs the active expiry timer and stops on SIGTERM, SIGINT
//! or SHUTDOWN.

use crate::blocking::Blocking;
use crate::clients::Clients;
use crate::config::Config;
use crate::local_store::LocalStore;
use crate::pubsub::PubSub;
use crate::session;
use crate::slowlog::SlowLog;
use crate::watch::Watches;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tracing::{info, warn};

/// Keys of one database written while blocked-client serving was deferred.
pub type ReadyKeys = (usize, Vec<bytes::Bytes>);

/// Per-command counters for INFO commandstats, and the latency histogram
/// of INFO latencystats and LATENCY HISTOGRAM.
#[derive(Default, Clone)]
pub struct CmdStat {
    /// Command and subcommand ("" for none), e.g. ("client", "list").
    pub name: (&'static str, &'static str),
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
    /// With `latency-tracking yes`, from the first call.
    pub latency: Option<crate::command_latency::CommandLatency>,
}

impl CmdStat {
    pub fn named(command: &'static str, sub: &'static str) -> CmdStat {
        CmdStat {
            name: (command, sub),
            ..CmdStat::default()
        }
    }

    /// `client|list`, or the command's name.
    pub fn full_name(&self) -> String {
        match self.name {
            (cmd, "") => cmd.to_string(),
            (cmd, sub) => format!("{cmd}|{sub}"),
        }
    }
}

/// Redis's instantaneous metrics: the server samples its counters every
/// 100 ms and reports the rate over the last 16 samples.
#[derive(Default)]
pub struct RateSamples {
    /// (when, commands processed, input bytes, output bytes)
    samples: std::collections::VecDeque<(Instant, u64, u64, u64)>,
}

impl RateSamples {
    const KEPT: usize = 16;

    pub fn record(&mut self, at: Instant, commands: u64, input: u64, output: u64) {
        if self.samples.len() == Self::KEPT {
            self.samples.pop_front();
        }
        self.samples.push_back((at, commands, input, output));
    }

    /// (ops/sec, input KB/s, output KB/s) over the sampled window.
    pub fn rates(&self) -> (f64, f64, f64) {
        let (Some(first), Some(last)) = (self.samples.front(), self.samples.back()) else {
            return (0.0, 0.0, 0.0);
        };
        let secs = last.0.duration_since(first.0).as_secs_f64();
        if secs <= 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let per_sec = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
        (
            per_sec(first.1, last.1),
            per_sec(first.2, last.2) / 1024.0,
            per_sec(first.3, last.3) / 1024.0,
        )
    }
}

/// Server-wide counters for INFO stats.
#[derive(Default)]
pub struct Stats {
    pub rates: RateSamples,
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub rejected_connections: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub total_error_replies: u64,
    /// Errors of commands scripts ran, already counted: a script's error
    /// reply that carries one on (redis.call's error, pcall's error table
    /// returned) is not counted again, as Redis flags such replies.
    pub script_errors_counted: std::collections::VecDeque<String>,
    /// Keyed by the address of the command's table entry.
    pub commands: HashMap<usize, CmdStat, foldhash::fast::RandomState>,
    /// Keyed by the error code (`ERR`, `WRONGTYPE`).
    pub errors: HashMap<String, u64>,
    /// `latency-tracking`: per-command latency histograms are kept.
    pub latency_tracking: bool,
}

/// Everything the event loop shares between connections. One thread owns
/// it, so interior mutability is plain `RefCell`.
pub struct Server {
    pub config: RefCell<Config>,
    /// ACL users and log.
    pub acl: RefCell<crate::acl::Acl>,
    pub local_store: RefCell<LocalStore>,
    /// Shared with [`crate::tracking`], which looks up whom to invalidate.
    pub clients: Rc<RefCell<Clients>>,
    pub slowlog: RefCell<SlowLog>,
    pub latency: RefCell<crate::latency::LatencyMonitor>,
    /// Connections in MONITOR mode.
    pub monitors: RefCell<crate::monitor::Monitors>,
    /// CLIENT PAUSE in force.
    pub client_pause: crate::client_pause::ClientPause,
    /// Connections held by a pause (counted in INFO blocked_clients).
    pub paused_clients: Cell<usize>,
    pub stats: RefCell<Stats>,
    pub pubsub: RefCell<PubSub>,
    /// Shared with the cluster's apply hooks, which wake waiters.
    pub blocking: crate::blocking::SharedBlocking,
    /// Shared with the cluster's apply hooks, which touch watched keys.
    pub watches: Rc<RefCell<Watches>>,
    /// Client-side caching; shared with the cluster's apply hooks.
    pub tracking: crate::tracking::SharedTracking,
    /// Keys written inside EXEC, served to blocked clients after it.
    pub deferred_ready: RefCell<Option<Vec<ReadyKeys>>>,
    pub shutdown: Notify,
    /// A signal waiting to be acted on; DEBUG PAUSE-CRON.
    pub shutdown_state: crate::shutdown::ShutdownState,
    pub shutting_down: Cell<bool>,
    pub started: Instant,
    pub started_unix_ms: u64,
    /// INFO's `run_id`: random, new at every start.
    pub run_id: String,
    /// INFO's `master_replid`: random, new at every start, as a Redis
    /// master without replicas has one.
    pub repl_id: String,
    /// The client port (CONFIG SET port changes it).
    pub port: Cell<u16>,
    /// The client listeners' accept loops.
    pub listening: Listening,
    pub peak_memory: Cell<u64>,
    /// Allocated memory when the server started (MEMORY STATS).
    pub startup_memory: u64,
    /// RDB snapshots (standalone).
    pub persistence: crate::persistence::SaveState,
    /// The data loading at start (standalone).
    pub loading: crate::loading::LoadingState,
    /// Writes since the last snapshot (standalone; `save` points).
    pub dirty: Cell<u64>,
    /// The active expiry cycle runs (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire: Cell<bool>,
    /// Used memory for the `maxmemory` admission check.
    pub memory_guard: crate::maxmemory::MemoryGuard,
    /// Cluster mode: this node's Raft groups and the cluster map.
    pub cluster: Option<Rc<crate::cluster::ClusterNode>>,
    /// MIGRATE's connections kept for the next MIGRATE to the same target.
    pub migrate_sockets: crate::migrate::SocketCache,
}

impl Server {
    /// The server state around `config`, with the users `acl` holds
    /// ([`crate::acl::Acl::at_start`]).
    pub fn new(config: Config, port: u16, acl: crate::acl::Acl) -> Server {
        let databases = config.databases;
        let mut local_store = LocalStore::new(databases);
        let limits = config.encoding_limits();
        let notify = config.notify_keyspace_events;
        let access_mode = crate::maxmemory::eviction_settings(&config).2;
        local_store.with_store(|store| {
            use kvasir_core::keyspace::Keyspace;
            store.limits = limits;
            store.notify = notify;
            store.renames = std::sync::Arc::new(config.renames.clone());
            store.keyspace().set_access_mode(access_mode);
        });
        let clients = Rc::new(RefCell::new(Clients::default()));
        clients.borrow().output_limits.set(config.output_limits());
        let tracking = Rc::new(RefCell::new(crate::tracking::Tracking::new(
            clients.clone(),
        )));
        tracking.borrow_mut().max_keys = config.tracking_table_max_keys();
        let latency_tracking = config.latency_tracking();
        Server {
            acl: RefCell::new(acl),
            config: RefCell::new(config),
            local_store: RefCell::new(local_store),
            clients,
            tracking,
            slowlog: RefCell::new(SlowLog::default()),
            latency: RefCell::new(Default::default()),
            monitors: RefCell::new(Default::default()),
            client_pause: Default::default(),
            paused_clients: Cell::new(0),
            stats: RefCell::new(Stats {
                latency_tracking,
                ..Stats::default()
            }),
            pubsub: RefCell::new(PubSub::default()),
            blocking: Rc::new(RefCell::new(Blocking::default())),
            watches: Rc::new(RefCell::new(Watches::default())),
            deferred_ready: RefCell::new(None),
            shutdown: Notify::new(),
            shutdown_state: Default::default(),
            shutting_down: Cell::new(false),
            started: Instant::now(),
            started_unix_ms: crate::local_store::unix_ms(),
            run_id: crate::info::new_run_id(),
            repl_id: crate::info::new_run_id(),
            port: Cell::new(port),
            listening: Listening::default(),
            peak_memory: Cell::new(0),
            startup_memory: crate::info::used_memory(),
            persistence: crate::persistence::SaveState::new(crate::local_store::unix_ms() / 1000),
            loading: crate::loading::LoadingState::default(),
            dirty: Cell::new(0),
            active_expire: Cell::new(true),
            memory_guard: Default::default(),
            cluster: None,
            migrate_sockets: Default::default(),
        }
    }

    /// Starts a graceful shutdown (SHUTDOWN command, its final steps
    /// done): no new connection is accepted from here on.
    pub fn request_shutdown(&self) {
        self.listening.stop_now();
        self.shutting_down.set(true);
        self.shutdown.notify_one();
    }
}

/// An error [`run`] returns that is in the server's log already (the
/// binary need not print it again).
#[derive(Debug)]
pub struct Logged(pub String);

impl std::fmt::Display for Logged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Logged {}

/// Runs a node until it is told to stop. Blocks the calling thread.
pub fn run(config: Config) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, serve(config))
}

/// Listening sockets on the addresses of `bind` at `port`, read as Redis 7
/// reads the list: `*` is every IPv4 address, `::*` every IPv6 one, a
/// leading `-` marks an address that may be missing; an address this host
/// does not have or a family it does not support is skipped (logged), as
/// redis-server skips it. With port 0 the first socket picks the port and
/// the others follow. An empty list binds nothing.
pub fn bind_all(bind: &str, port: u16) -> std::io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::new();
    let mut port = port;
    for entry in bind.split_whitespace() {
        let host = entry.strip_prefix('-').unwrap_or(entry);
        let host = match host {
            "*" => "0.0.0.0",
            "::*" => "::",
            other => other,
        };
        match bind_one(host, port) {
            Ok(listener) => {
                port = listener.local_addr()?.port();
                listeners.push(listener);
            }
            Err(e) if skipped(&e) => {
                warn!("Could not create server TCP listening socket {entry}:{port}: {e}")
            }
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{entry}:{port}: {e}"),
                ))
            }
        }
    }
    Ok(listeners)
}

/// Errors for which redis-server leaves an address out instead of failing.
fn skipped(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EADDRNOTAVAIL | libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT | libc::ENOPROTOOPT)
    )
}

fn bind_one(host: &str, port: u16) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::net::ToSocketAddrs;
    let mut last_error = None;
    for addr in (host, port).to_socket_addrs()? {
        let bound = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
            .and_then(|socket| {
                socket.set_reuse_address(true)?;
                // As Redis: `::` is IPv6 only, so `* ::*` binds both.
                if addr.is_ipv6() {
                    socket.set_only_v6(true)?;
                }
                socket.bind(&addr.into())?;
                socket.listen(1024)?;
                socket.set_nonblocking(true)?;
                TcpListener::from_std(socket.into())
            });
        match bound {
            Ok(listener) => return Ok(listener),
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{host} resolves to no address"),
        )
    }))
}

/// The accept loops of the client listeners, replaced as a whole when
/// CONFIG SET changes `port` or `bind`.
#[derive(Default)]
pub struct Listening {
    /// Each listener's accept loop and the listener's descriptor.
    accepting: RefCell<Vec<(tokio::task::JoinHandle<()>, std::os::fd::RawFd)>>,
    io_threads: RefCell<Option<Rc<crate::io_threads::IoThreads>>>,
}

/// Serves clients from `listeners` from now on, in place of the listeners
/// before (connections already accepted stay).
pub fn listen_on(server: &Rc<Server>, listeners: Vec<TcpListener>) {
    if let Some(port) = listeners.first().and_then(|l| l.local_addr().ok()) {
        server.port.set(port.port());
    }
    let io_threads = server.listening.io_threads.borrow().clone();
    let tasks = listeners
        .into_iter()
        .map(|l| {
            use std::os::fd::AsRawFd;
            let fd = l.as_raw_fd();
            let task = tokio::task::spawn_local(accept_loop(server.clone(), l, io_threads.clone()));
            (task, fd)
        })
        .collect();
    for (old, _) in server.listening.accepting.replace(tasks) {
        old.abort();
    }
}

impl Listening {
    /// Stops listening at once, as a SHUTDOWN that is exiting does: a client
    /// that sees its connection close and connects again is refused, as by
    /// an exited redis-server (the accept loops, aborted, end at the
    /// runtime's next turn, later than the connection's close).
    fn stop_now(&self) {
        for (task, fd) in self.accepting.take() {
            // SAFETY: the descriptor is the listener's, open until its
            // aborted task is dropped; shutting a listening socket down
            // takes it out of the listening state (connections refused).
            unsafe {
                libc::shutdown(fd, libc::SHUT_RDWR);
            }
            task.abort();
        }
    }
}

/// CONFIG SET bind at the same port: the old sockets must be closed before
/// the new addresses can be bound (`*` overlaps `127.0.0.1`), so the old
/// accept loops are stopped and waited for first; if the new list cannot be
/// bound after all, the old one is bound again.
pub async fn rebind(server: Rc<Server>, bind: String, old_bind: String) {
    let old = server.listening.accepting.take();
    for (task, _) in &old {
        task.abort();
    }
    for (task, _) in old {
        let _ = task.await;
    }
    let port = server.port.get();
    match bind_all(&bind, port) {
        Ok(listeners) => listen_on(&server, listeners),
        Err(e) => {
            warn!("Failed to bind {bind} port {port}: {e}; listening on {old_bind} again");
            match bind_all(&old_bind, port) {
                Ok(listeners) => listen_on(&server, listeners),
                Err(e) => tracing::error!("Failed to bind {old_bind} port {port} again: {e}"),
            }
        }
    }
}

async fn serve(mut config: Config) -> std::io::Result<()> {
    // Before the port is announced: a SIGTERM sent as soon as it is (by a
    // supervisor or a test) must find the handler installed, not kill the
    // process with the default action.
    use tokio::signal::unix::{signal, SignalKind};
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let acl = crate::acl::Acl::at_start(&config).map_err(std::io::Error::other)?;
    let listeners = bind_all(&config.bind, config.port).inspect_err(|e| {
        // Redis's two lines in the log: supervisors and Redis's own test
        // harness look for them to tell a busy port from a crash.
        warn!("Warning: Could not create server TCP listening socket {e}");
        warn!("Failed listening on port {} (TCP), aborting.", config.port);
    })?;
    let Some(first) = listeners.first() else {
        return Err(std::io::Error::other(
            "Configured to not listen anywhere, exiting.",
        ));
    };
    let port = first.local_addr()?.port();
    let unix_socket = UnixSocket::bind(&config)?;
    let cell: crate::cluster::ServerCell = Rc::new(RefCell::new(std::rc::Weak::new()));
    let watches = Rc::new(RefCell::new(Watches::default()));
    let blocking: crate::blocking::SharedBlocking = Rc::default();
    if config.initial_cluster.is_some()
        && config.encoding_limits() != kvasir_core::EncodingLimits::default()
    {
        // Replicated state: every replica must convert values at the same
        // sizes, whatever its own configuration says. The configuration
        // then shows what the shards use (CONFIG GET), and CONFIG SET
        // compares with that.
        tracing::warn!(
            "The encoding thresholds of the configuration (*-max-listpack-*, set-max-intset-entries, list-compress-depth, stream-node-max-*, script-max-instructions) are ignored in cluster mode: every shard uses Redis's defaults."
        );
        config.use_default_encoding_limits();
    }
    let mut server = Server::new(config, port, acl);
    let config = server.config.borrow().clone();
    crate::memory_stats::set_background_purge(config.background_purge());
    let (oom_mode, oom_values) = config.oom_score();
    if oom_mode != "no" {
        // As redis-server: a score it cannot write is logged, not fatal.
        let _ = crate::oom_score::apply(&oom_mode, oom_values);
    }
    let cluster = match config.initial_cluster {
        Some(_) => Some(
            crate::cluster::ClusterNode::start(
                &config,
                port,
                cell.clone(),
                watches.clone(),
                blocking.clone(),
                server.tracking.clone(),
            )
            .await
            .map_err(std::io::Error::other)?,
        ),
        None => None,
    };
    let mode = if cluster.is_some() {
        "cluster"
    } else {
        "standalone"
    };
    server.cluster = cluster;
    server.watches = watches;
    server.blocking = blocking;
    // "PID: n" as in redis-server's start banner, which tools (Redis's
    // own test harness among them) wait for; before the data is loaded,
    // so that a load that fails is seen as this process's failure.
    info!(
        "Kvasir {} started, PID: {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id()
    );
    let server = Rc::new(server);
    *cell.borrow_mut() = Rc::downgrade(&server);
    // --threads N: N-1 I/O threads do the client sockets' reads and
    // writes; with 1 (the default) sessions use their sockets directly.
    let io_threads = match config.threads {
        0 | 1 => None,
        n => {
            info!("Starting {} I/O threads.", n - 1);
            let routes = server.cluster.as_ref().and_then(|c| c.direct().cloned());
            if routes.is_some() {
                tokio::task::spawn_local(crate::direct_gate::cron(server.clone()));
            }
            Some(Rc::new(crate::io_threads::IoThreads::start(n - 1, routes)?))
        }
    };
    *server.listening.io_threads.borrow_mut() = io_threads;
    // Clients are accepted while the data loads, as by redis-server: they
    // are answered -LOADING until it is in (crate::loading).
    listen_on(&server, listeners);
    if let Some(unix) = &unix_socket {
        tokio::task::spawn_local(accept_unix_loop(
            server.clone(),
            unix.listener.clone(),
            unix.path.clone(),
            server.listening.io_threads.borrow().clone(),
        ));
    }
    let appendonly = server.config.borrow().appendonly;
    server.loading.begin();
    let load = async {
        match (&server.cluster, appendonly) {
            (None, true) => crate::aof_persistence::start(&server).await,
            (None, false) => crate::persistence::load_at_start(&server).await,
            (Some(_), true) => Err(crate::aof::NOT_IN_CLUSTER.to_string()),
            (Some(_), false) => Ok(()),
        }
    };
    // A shutdown asked for during the load exits without saving: the
    // data is not all in (Redis's SHUTDOWN_NOSAVE while loading).
    let loaded = tokio::select! {
        loaded = load => Some(loaded),
        _ = sigterm.recv() => None,
        _ = sigint.recv() => None,
        _ = server.shutdown.notified() => None,
    };
    let Some(loaded) = loaded else {
        shutdown_while_loading(&server);
        return Ok(());
    };
    server.loading.end();
    if let Err(e) = loaded {
        // In the log, as redis-server reports it (and only there).
        tracing::error!("{e}");
        return Err(std::io::Error::other(Logged(e)));
    }
    if server.cluster.is_none() {
        crate::pubsub::deliver_script_publishes(&server);
    }
    info!(
        "Kvasir {} running mode={}, port={}.",
        env!("CARGO_PKG_VERSION"),
        mode,
        port
    );
    if let Some(unix) = &unix_socket {
        info!(
            "The server is now ready to accept connections at {}",
            unix.path
        );
    }
    tokio::task::spawn_local(crate::router::expire_loop(server.clone()));
    tokio::task::spawn_local(clients_cron(server.clone()));
    if server.cluster.is_none() {
        tokio::task::spawn_local(crate::aof_persistence::everysec_cron(server.clone()));
    }
    tokio::task::spawn_local(sample_rates(server.clone()));
    info!("Ready to accept connections tcp");
    {
        let config = server.config.borrow();
        if crate::supervision::supervisor(&config) == Some("systemd") {
            info!("Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit.");
        }
        crate::supervision::notify(&config, "STATUS=Ready to accept connections\nREADY=1\n");
    }

    let node = server.cluster.clone();
    let fatal = async {
        match &node {
            Some(node) => Some(node.fatal().await),
            None => std::future::pending().await,
        }
    };
    tokio::pin!(fatal);
    use crate::shutdown::{Next, Signal};
    loop {
        let next = tokio::select! {
            _ = sigterm.recv() => crate::shutdown::on_signal(&server, Signal::Term),
            _ = sigint.recv() => crate::shutdown::on_signal(&server, Signal::Int),
            // DEBUG PAUSE-CRON 0: a signal that waited is acted on now.
            _ = crate::shutdown::resumed(&server) => crate::shutdown::run_pending(&server),
            // SHUTDOWN did its final steps already.
            _ = server.shutdown.notified() => {
                info!("User requested shutdown...");
                Next::Exit
            }
            Some(f) = &mut fatal => {
                // A node whose Raft side stopped must not keep answering
                // clients; the errors its waiting clients were given get a
                // moment to reach them first.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Err(std::io::Error::other(format!("{f}; exiting")));
            }
        };
        match next {
            Next::Continue => {}
            Next::Exit => break,
            Next::Insist => {
                return Err(std::io::Error::other(
                    "a second SIGINT while a shutdown waited",
                ))
            }
        }
    }
    crate::supervision::notify(&server.config.borrow(), "STOPPING=1\n");
    if let Some(node) = &node {
        tokio::select! {
            () = hand_over_leadership(&server, node) => {}
            _ = sigint.recv() => warn!("You insist... exiting now."),
        }
    }
    if unix_socket.is_some() {
        info!("Removing the unix socket file.");
    }
    // "Kvasir is now ready to exit" is the binary's last line, after the
    // pid file is removed, as in redis-server's log.
    Ok(())
}

/// A cluster node's graceful stop: the shards it leads are handed to
/// peers first, waiting at most `shutdown-timeout` seconds (Redis's wait
/// for its replicas; 0 or SHUTDOWN NOW: no hand-over), so their clients
/// are redirected at once rather than after an election timeout.
async fn hand_over_leadership(server: &Server, node: &crate::cluster::ClusterNode) {
    let secs = server
        .config
        .borrow()
        .stored
        .get("shutdown-timeout")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(10);
    if server.shutdown_state.now() || secs == 0 {
        return;
    }
    // The count is the data shards'; the cluster map's group is handed
    // over too.
    let led = node.led_shards().len();
    info!("Handing over the leadership of {led} shards before shutting down.");
    let started = std::time::Instant::now();
    if node.hand_over_leadership(Duration::from_secs(secs)).await {
        // The clients answered last still have their replies to write.
        tokio::time::sleep(Duration::from_millis(50)).await;
        info!(
            "Leadership handed over in {} ms.",
            started.elapsed().as_millis()
        );
        let kept = node.led_shards().len();
        if kept > 0 {
            warn!(
                "{kept} shards had no peer to take them (the others are stopping or unreachable)."
            );
        }
    } else {
        warn!(
            "Leadership not handed over within shutdown-timeout ({secs} s): {} shards still led here; exiting anyway.",
            node.led_shards().len()
        );
    }
}

/// The end of a start whose load a signal or SHUTDOWN stopped.
fn shutdown_while_loading(server: &Server) {
    warn!("Received shutdown signal during loading, scheduling shutdown.");
    crate::supervision::notify(&server.config.borrow(), "STOPPING=1\n");
}

/// Redis 7.0's answer to a client protected mode turns away.
const PROTECTED_MODE_DENIED: &[u8] =
    b"-DENIED Redis is running in protected mode because protected \
mode is enabled and no password is set for the default user. In this mode connections are only \
accepted from the loopback interface. If you want to connect from external computers to Redis you \
may adopt one of the following solutions: 1) Just disable protected mode sending the command \
'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same \
host the server is running, however MAKE SURE Redis is not publicly accessible from internet if \
you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable \
the protected mode by editing the Redis configuration file, and setting the protected mode option \
to 'no', and then restarting the server. 3) If you started the server manually just for testing, \
restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the \
default user. NOTE: You only need to do one of the above things in order for the server to start \
accepting connections from the outside.\r\n";

/// Redis's protected mode, on a standalone server: with `protected-mode
/// yes` (the default) and no password for the default user, only clients
/// at 127.0.0.1 or ::1 may connect (whatever `bind` says). Cluster nodes
/// serve clients on other machines by design and do not apply it.
fn protected_mode_denies(server: &Server, peer: std::net::IpAddr) -> bool {
    if server.cluster.is_some() || is_redis_local(peer) {
        return false;
    }
    let on = server
        .config
        .borrow()
        .stored
        .get("protected-mode")
        .is_some_and(|v| v == "yes");
    on && server.acl.borrow().default_nopass()
}

/// Redis's islocalClient: exactly 127.0.0.1 or ::1.
pub fn is_redis_local(ip: std::net::IpAddr) -> bool {
    ip == std::net::Ipv4Addr::LOCALHOST || ip == std::net::Ipv6Addr::LOCALHOST
}

/// Whether a client at `ip` may do what the `enable-*` setting `name`
/// guards (`enable-debug-command`, `-module-command`, `-protected-configs`):
/// `yes`, or `local` for 127.0.0.1 / ::1, as Redis's allowProtectedAction.
pub fn enabled_for(server: &Server, name: &str, client: &crate::clients::ClientAddr) -> bool {
    match server.config.borrow().stored.get(name) {
        Some("yes") => true,
        Some("local") => client.is_local(),
        _ => false,
    }
}

/// The Unix socket of `unixsocket` (with `unixsocketperm`, octal), as
/// redis-server makes it: a file left at the path is replaced; the file
/// is removed when the server exits.
struct UnixSocket {
    listener: Rc<tokio::net::UnixListener>,
    path: Rc<str>,
}

impl UnixSocket {
    fn bind(config: &Config) -> std::io::Result<Option<UnixSocket>> {
        let path = config.stored.get("unixsocket").unwrap_or("");
        if path.is_empty() {
            return Ok(None);
        }
        let failed = |e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("Failed opening Unix socket: {e}"))
        };
        let _ = std::fs::remove_file(path);
        let listener = tokio::net::UnixListener::bind(path).map_err(failed)?;
        let perm = config.stored.get("unixsocketperm").unwrap_or("0");
        if let Ok(mode) = u32::from_str_radix(perm, 8) {
            if mode != 0 {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                    .map_err(failed)?;
            }
        }
        Ok(Some(UnixSocket {
            listener: Rc::new(listener),
            path: Rc::from(path),
        }))
    }
}

impl Drop for UnixSocket {
    /// Silent: at a clean exit the server logs it; after an error the log
    /// ends with the error.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&*self.path);
    }
}

/// Clients of the Unix socket: local by definition (protected mode does
/// not apply); with I/O threads their sockets go to them as TCP clients'.
async fn accept_unix_loop(
    server: Rc<Server>,
    listener: Rc<tokio::net::UnixListener>,
    path: Rc<str>,
    io_threads: Option<Rc<crate::io_threads::IoThreads>>,
) {
    loop {
        let mut stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                accept_failed(e).await;
                continue;
            }
        };
        if refused_for_maxclients(&server, &mut stream).await {
            continue;
        }
        let addr = crate::clients::ClientAddr::Unix(path.clone());
        match &io_threads {
            None => {
                let conn = crate::client_conn::UnixConn {
                    stream,
                    path: path.clone(),
                };
                tokio::task::spawn_local(session::run(server.clone(), conn, addr));
            }
            Some(io) => match io.hand_off_unix(stream, path.clone()) {
                Ok(conn) => {
                    tokio::task::spawn_local(session::run(server.clone(), conn, addr));
                }
                // The socket is closed (dropped); the client sees EOF.
                Err(e) => warn!("cannot hand a connection to an I/O thread: {e}"),
            },
        }
    }
}

/// Whether a new client is over `maxclients`: then it is told so (and
/// closed when dropped), counted as rejected.
async fn refused_for_maxclients<S: tokio::io::AsyncWrite + Unpin>(
    server: &Server,
    stream: &mut S,
) -> bool {
    let maxclients = server.config.borrow().maxclients;
    if server.clients.borrow().len() < maxclients {
        return false;
    }
    server.stats.borrow_mut().rejected_connections += 1;
    let _ = stream
        .write_all(b"-ERR max number of clients reached\r\n")
        .await;
    true
}

/// EMFILE and friends: logged, and a pause instead of spinning.
async fn accept_failed(e: std::io::Error) {
    warn!("accept failed: {e}");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

async fn accept_loop(
    server: Rc<Server>,
    listener: TcpListener,
    io_threads: Option<Rc<crate::io_threads::IoThreads>>,
) {
    loop {
        let (mut stream, addr) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                accept_failed(e).await;
                continue;
            }
        };
        if refused_for_maxclients(&server, &mut stream).await {
            continue;
        }
        if protected_mode_denies(&server, addr.ip()) {
            server.stats.borrow_mut().rejected_connections += 1;
            let _ = stream.write_all(PROTECTED_MODE_DENIED).await;
            continue;
        }
        let _ = stream.set_nodelay(true);
        match &io_threads {
            None => {
                tokio::task::spawn_local(session::run(
                    server.clone(),
                    stream,
                    crate::clients::ClientAddr::Tcp(addr),
                ));
            }
            Some(io) => match io.hand_off(stream) {
                Ok(conn) => {
                    tokio::task::spawn_local(session::run(
                        server.clone(),
                        conn,
                        crate::clients::ClientAddr::Tcp(addr),
                    ));
                }
                // The socket is closed (dropped); the client sees EOF.
                Err(e) => warn!("cannot hand a connection to an I/O thread: {e}"),
            },
        }
    }
}

/// Samples the counters behind INFO's instantaneous_* fields every 100 ms.
async fn sample_rates(server: Rc<Server>) {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut stats = server.stats.borrow_mut();
        let (commands, input, output) = (
            stats.total_commands_processed,
            stats.net_input_bytes,
            stats.net_output_bytes,
        );
        stats.rates.record(Instant::now(), commands, input, output);
    }
}

/// Closes clients idle for longer than `timeout` seconds (Redis's
/// clientsCron), so a CONFIG SET timeout also reaches existing connections.
async fn clients_cron(server: Rc<Server>) {
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if server.shutdown_state.cron_paused() {
            continue;
        }
        crate::persistence::save_points_cron(&server);
        crate::persistence::scheduled_cron(&server);
        server.migrate_sockets.close_idle(Instant::now());
        // A client over its soft output limit is closed once its time is
        // up even if nothing more is queued for it.
        let now = Instant::now();
        for c in server.clients.borrow().iter() {
            if c.waiting_bytes() > 0 {
                c.over_output_limit(c.waiting_bytes());
            }
            if !c.buffers_released.get()
                && now.duration_since(c.last_interaction.get()) >= crate::clients::IDLE_RELEASE
            {
                c.buffers_released.set(true);
                c.idle_release.notify_one();
            }
        }
        let timeout = server.config.borrow().timeout;
        if timeout == 0 {
            continue;
        }
        let limit = Duration::from_secs(timeout);
        for c in server.clients.borrow().iter() {
            if now.duration_since(c.last_active()) > limit {
                Clients::kill(c);
            }
        }
    }
}
