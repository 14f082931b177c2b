//! The `kvasir` binary: `kvasir server` runs a node; `kvasir demo` runs a
//! three-node cluster locally; `kvasir cluster status` shows a cluster;
//! `kvasir commands` prints the command table; `kvasir bench` runs the load
//! generator.

mod cluster_status;
mod commands_doc;
mod daemon;
mod demo;
mod logging;
mod resp_client;

use clap::{Args, CommandFactory, Parser, Subcommand};
use kvasir_server::Config;
use std::path::PathBuf;
use std::process::ExitCode;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "kvasir",
    version,
    about = "A Redis-compatible key-value database"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a Kvasir node.
    #[command(
        override_usage = "kvasir server [redis.conf] [OPTIONS] [--<redis parameter> <value>...]",
        after_help = "As redis-server, it also takes a redis.conf file as its first argument \
                      and any redis.conf parameter as --<name> <value>... (the command line \
                      over the file), e.g. `kvasir server --save \"\" --maxmemory 1gb`."
    )]
    Server(ServerArgs),
    /// Print the command table (as docs/commands.md with --markdown).
    Commands {
        #[arg(long)]
        markdown: bool,
    },
    /// Load generator: kv, pipelined-kv, ycsb, sweep, online (see --help).
    Bench(kvasir_bench::cli::BenchArgs),
    /// Run a three-node cluster on this machine (ports 7001-7003) until
    /// Ctrl-C; its data stays in --dir for the next run.
    Demo(demo::DemoArgs),
    /// Inspect a running cluster.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Shards (slots, replicas, leader, applied index and lag) and nodes
    /// (up/down) of the cluster a node belongs to.
    Status {
        /// Any node of the cluster, host:port of its client listener.
        #[arg(long, default_value = "127.0.0.1:7001")]
        node: String,
    },
}

/// Flags of `kvasir server`; each overrides the same key of `--config`.
#[derive(Args, Default)]
struct ServerArgs {
    /// TOML file with any of the settings below (kebab-case keys).
    #[arg(long)]
    config: Option<PathBuf>,
    /// TCP port to listen on (0 picks a free port).
    #[arg(long)]
    port: Option<u16>,
    /// Addresses to listen on, space separated.
    #[arg(long)]
    bind: Option<String>,
    /// Working directory for data files.
    #[arg(long)]
    dir: Option<String>,
    /// Password of the default user (AUTH / HELLO AUTH).
    #[arg(long)]
    requirepass: Option<String>,
    /// Maximum number of connected clients.
    #[arg(long)]
    maxclients: Option<usize>,
    /// Threads: 1 (default) runs everything on one thread; N > 1 adds N-1
    /// I/O threads for the client sockets' reads and writes (Valkey's
    /// io-threads) while every shard stays on the data thread. At most 128.
    #[arg(long)]
    threads: Option<usize>,
    /// Log level: debug, verbose, notice, warning.
    #[arg(long)]
    log_level: Option<String>,
    /// Number of databases (SELECT 0..N-1).
    #[arg(long)]
    databases: Option<usize>,
    /// Largest single argument in bytes (proto-max-bulk-len).
    #[arg(long)]
    proto_max_bulk_len: Option<usize>,
    /// Cluster mode: this node's id in --initial-cluster.
    #[arg(long)]
    node_id: Option<u64>,
    /// Cluster mode: the port peers reach this node on (must match this
    /// node's entry in --initial-cluster).
    #[arg(long)]
    cluster_port: Option<u16>,
    /// Cluster mode: every member, `1=127.0.0.1:17001,2=...`, the same on
    /// every node.
    #[arg(long)]
    initial_cluster: Option<String>,
    /// Cluster mode: a secret every member shares; peers prove it in the
    /// bus handshake (HMAC-SHA256 challenge-response, never sent in clear),
    /// so a process without it cannot join or talk Raft to a node.
    #[arg(long)]
    cluster_secret: Option<String>,
    /// Cluster mode: read the cluster secret from this file (first line),
    /// so it does not show in process listings.
    #[arg(long)]
    cluster_secret_file: Option<String>,
    /// Replicas per shard (default 3).
    #[arg(long)]
    replicas: Option<usize>,
    /// Shards per node at bootstrap (default 8).
    #[arg(long)]
    shards_per_node: Option<usize>,
    /// Write-ahead log: fsync (default), async, none.
    #[arg(long)]
    wal: Option<String>,
    /// Linearizable reads by readindex (default) or lease.
    #[arg(long)]
    read_mode: Option<String>,
    /// Raft tick in milliseconds (default 50).
    #[arg(long)]
    raft_tick_ms: Option<u64>,
    /// Election timeout in ticks (default 10; randomized up to twice that).
    #[arg(long)]
    election_ticks: Option<usize>,
    /// Heartbeat interval in ticks (default 2).
    #[arg(long)]
    heartbeat_ticks: Option<usize>,
    /// Applied entries after which a shard snapshots and compacts its log
    /// (default 100000).
    #[arg(long)]
    snapshot_entries: Option<u64>,
}

/// Valkey's IO_THREADS_MAX_NUM.
const MAX_THREADS: usize = 128;

/// `kvasir server` flags that are redis-server parameters too: given on
/// the command line, they are read with the other redis-server options.
const REDIS_NAMED: &[&str] = &[
    "port",
    "bind",
    "dir",
    "requirepass",
    "maxclients",
    "databases",
];

/// What `kvasir server` was given as redis-server takes it: a redis.conf
/// path first, and `--name value ...` for every parameter that is not one
/// of `kvasir server`'s own flags.
#[derive(Default)]
struct RedisStyleArgs {
    file: Option<String>,
    flags: Vec<String>,
}

/// Splits `kvasir server`'s arguments into the ones clap parses and the
/// redis-server style ones; other subcommands' are left as they are.
fn split_server_args(argv: Vec<String>) -> (Vec<String>, RedisStyleArgs) {
    let mut style = RedisStyleArgs::default();
    if argv.get(1).map(String::as_str) != Some("server") {
        return (argv, style);
    }
    let command = Cli::command();
    let known: std::collections::HashSet<String> = command
        .find_subcommand("server")
        .map(|s| {
            s.get_arguments()
                .filter_map(|a| a.get_long())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut kept = argv[..2].to_vec();
    let mut rest = argv[2..].iter().peekable();
    if let Some(first) = rest.peek() {
        if !first.starts_with('-') {
            style.file = Some((*first).clone());
            rest.next();
        }
    }
    while let Some(word) = rest.next() {
        // Bare words are redis-server's too (`loglevel verbose` after the
        // file is a parameter of its own).
        let Some(name) = word.strip_prefix("--") else {
            style.flags.push(word.clone());
            continue;
        };
        let base = name.split('=').next().unwrap_or(name);
        if name.is_empty() || base == "help" || base == "version" {
            kept.push(word.clone());
        } else if REDIS_NAMED.contains(&base) && !name.contains('=') {
            // Read as redis-server reads them, with the values that follow
            // and its errors for a missing or extra value.
            style.flags.push(word.clone());
        } else if known.contains(base) {
            kept.push(word.clone());
            // Every `kvasir server` flag takes one value; `--bind` takes
            // redis-server's list of addresses as one.
            if !name.contains('=') {
                if let Some(value) = rest.next() {
                    let mut value = value.clone();
                    while base == "bind" && rest.peek().is_some_and(|w| !w.starts_with("--")) {
                        value.push(' ');
                        value.push_str(rest.next().map_or("", String::as_str));
                    }
                    kept.push(value);
                }
            }
        } else {
            style.flags.push(word.clone());
        }
    }
    (kept, style)
}

fn load_config(args: &ServerArgs, redis_style: &RedisStyleArgs) -> Result<Config, String> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
            toml::from_str::<Config>(&text)
                .map_err(|e| format!("bad config file {}: {e}", path.display()))?
        }
        None => Config::default(),
    };
    // As redis-server: the file first, the command line over it, read as
    // one list (a `save` flag adds to the file's `save` lines).
    let mut directives = Vec::new();
    if let Some(file) = &redis_style.file {
        directives = kvasir_server::redis_conf::read_file(file, 0)?;
        // Absolute: the server moves into its data folder.
        config.config_file = std::fs::canonicalize(file)
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
    }
    directives.extend(kvasir_server::redis_conf::from_command_line(
        &redis_style.flags,
    )?);
    kvasir_server::redis_conf::apply(&mut config, &directives)?;
    // Kvasir's own flags; Redis's names are in the list above.
    if let Some(v) = args.port {
        config.port = v;
    }
    if let Some(v) = &args.bind {
        config.bind = v.clone();
    }
    if let Some(v) = &args.dir {
        config.dir = v.clone();
    }
    if let Some(v) = &args.requirepass {
        config.requirepass = Some(v.clone());
    }
    if let Some(v) = args.maxclients {
        config.maxclients = v;
    }
    if let Some(v) = args.threads {
        config.threads = v;
    }
    if let Some(v) = &args.log_level {
        config.log_level = v.clone();
    }
    if let Some(v) = args.databases {
        config.databases = v;
    }
    if let Some(v) = args.proto_max_bulk_len {
        config.proto_max_bulk_len = v;
    }
    if args.node_id.is_some() {
        config.node_id = args.node_id;
    }
    if let Some(v) = &args.initial_cluster {
        config.initial_cluster = Some(v.clone());
    }
    if let Some(v) = &args.cluster_secret {
        config.cluster_secret = Some(v.clone());
    }
    if let Some(v) = &args.cluster_secret_file {
        config.cluster_secret_file = Some(v.clone());
    }
    if let Some(v) = args.replicas {
        config.replicas = v;
    }
    if let Some(v) = args.shards_per_node {
        config.shards_per_node = v;
    }
    if let Some(v) = &args.wal {
        config.wal = v.clone();
    }
    if let Some(v) = &args.read_mode {
        config.read_mode = v.clone();
    }
    if let Some(v) = args.raft_tick_ms {
        config.raft_tick_ms = v;
    }
    if let Some(v) = args.election_ticks {
        config.election_ticks = v;
    }
    if let Some(v) = args.heartbeat_ticks {
        config.heartbeat_ticks = v;
    }
    if let Some(v) = args.snapshot_entries {
        config.snapshot_entries = v;
    }
    check_cluster_flags(&config, args.cluster_port)?;
    if config.databases == 0 || config.databases > 1_000_000 {
        return Err("databases must be between 1 and 1000000".into());
    }
    if config.threads == 0 {
        return Err("threads must be at least 1".into());
    }
    if config.threads > MAX_THREADS {
        return Err(format!("threads must be at most {MAX_THREADS}"));
    }
    Ok(config)
}

/// Cluster flags must agree with each other before anything starts.
fn check_cluster_flags(config: &Config, cluster_port: Option<u16>) -> Result<(), String> {
    let Some(initial) = &config.initial_cluster else {
        if config.node_id.is_some() || cluster_port.is_some() {
            return Err("--node-id and --cluster-port need --initial-cluster".into());
        }
        return Ok(());
    };
    let members =
        kvasir_cluster::parse_members(initial).map_err(|e| format!("--initial-cluster: {e}"))?;
    let Some(id) = config.node_id else {
        return Err("--initial-cluster needs --node-id (this node's id in it)".into());
    };
    let Some(me) = members.iter().find(|m| m.id == id) else {
        return Err(format!(
            "--node-id {id} is not a member of --initial-cluster {initial}"
        ));
    };
    let addr = &me.bus_addr;
    if let Some((_, port)) = &me.client {
        if *port != config.port {
            return Err(format!(
                "--port {} does not match node {id}'s client port {port} in --initial-cluster",
                config.port
            ));
        }
    }
    if let Some(p) = cluster_port {
        let theirs = addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok());
        if theirs != Some(p) {
            return Err(format!(
                "--cluster-port {p} does not match this node's entry {id}={addr} in --initial-cluster"
            ));
        }
    }
    if config.replicas == 0 || config.replicas > members.len() {
        return Err(format!(
            "--replicas must be between 1 and the number of members ({})",
            members.len()
        ));
    }
    if config.shards_per_node == 0 || config.shards_per_node * members.len() > 16384 {
        return Err("--shards-per-node must be at least 1 and leave at most 16384 shards".into());
    }
    Ok(())
}

fn run_server(args: ServerArgs, redis_style: RedisStyleArgs) -> ExitCode {
    let config = match load_config(&args, &redis_style) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kvasir: {e}");
            // redis-server's exit status for a configuration it refuses.
            return ExitCode::FAILURE;
        }
    };
    let mut config = config;
    // The process moves into its data folder; keep the folder absolute so
    // the Raft log does not end up in DIR/DIR.
    if let Ok(abs) =
        std::fs::create_dir_all(&config.dir).and_then(|_| std::fs::canonicalize(&config.dir))
    {
        config.dir = abs.to_string_lossy().into_owned();
    }
    if let Err(e) =
        std::fs::create_dir_all(&config.dir).and_then(|_| std::env::set_current_dir(&config.dir))
    {
        eprintln!("kvasir: cannot use dir {}: {e}", config.dir);
        return ExitCode::FAILURE;
    }
    // As redis-server, which moves into `dir` while reading its config: a
    // relative logfile or pidfile is in the data folder.
    let logfile = config.stored.get("logfile").unwrap_or("").to_string();
    if let Err(e) = logging::check_logfile(&logfile) {
        eprintln!("kvasir: {e}");
        return ExitCode::FAILURE;
    }
    let background = config.stored.get("daemonize") == Some("yes");
    if background {
        if let Err(e) = daemon::daemonize() {
            eprintln!("kvasir: cannot go to the background: {e}");
            return ExitCode::FAILURE;
        }
    }
    logging::init(&config.log_level, &logfile);
    let pidfile = match config.stored.get("pidfile").unwrap_or("") {
        "" if background => "/var/run/redis.pid",
        path => path,
    };
    let pidfile = daemon::PidFile::create(pidfile);
    match kvasir_server::run(config) {
        Ok(()) => {
            pidfile.remove();
            tracing::info!("Kvasir is now ready to exit, bye bye...");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let logged = e
                .get_ref()
                .is_some_and(|inner| inner.is::<kvasir_server::listener::Logged>());
            if !logged {
                eprintln!("kvasir: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

/// `redis-server -v` / `--version` as the only argument: its version line,
/// which tools and client test suites parse for `v=<major>.<minor>.<patch>`.
fn server_version_line() -> String {
    format!(
        "Redis server v={} sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build={} kvasir={}",
        kvasir_core::server::REDIS_VERSION,
        env!("CARGO_PKG_VERSION").replace('.', ""),
        env!("CARGO_PKG_VERSION"),
    )
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if let [_, server, flag] = argv.as_slice() {
        if server == "server" && (flag == "-v" || flag == "--version") {
            println!("{}", server_version_line());
            return ExitCode::SUCCESS;
        }
    }
    let (argv, redis_style) = split_server_args(argv);
    let cli = Cli::parse_from(argv);
    match cli.command {
        Command::Server(args) => run_server(args, redis_style),
        Command::Bench(args) => ExitCode::from(kvasir_bench::main(args) as u8),
        Command::Demo(args) => demo::run(args),
        Command::Cluster {
            command: ClusterCommand::Status { node },
        } => cluster_status::run(&node),
        Command::Commands { markdown } => {
            if markdown {
                print!("{}", commands_doc::markdown());
            } else {
                for c in kvasir_core::table::all_commands() {
                    println!("{}", c.name);
                }
            }
            ExitCode::SUCCESS
        }
    }
}
