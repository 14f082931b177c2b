//! The `kvasir` binary: `kvasir server` runs a node; `kvasir commands`
//! prints the command table; `kvasir bench` runs the load generator.

mod commands_doc;

use clap::{Args, Parser, Subcommand};
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
    Server(ServerArgs),
    /// Print the command table (as docs/commands.md with --markdown).
    Commands {
        #[arg(long)]
        markdown: bool,
    },
    /// Load generator: kv, pipelined-kv, ycsb, sweep, online (see --help).
    Bench(kvasir_bench::cli::BenchArgs),
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
    /// Event-loop threads (one thread owns the keyspace; only 1 today).
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
}

fn load_config(args: &ServerArgs) -> Result<Config, String> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
            toml::from_str::<Config>(&text)
                .map_err(|e| format!("bad config file {}: {e}", path.display()))?
        }
        None => Config::default(),
    };
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
    if config.databases == 0 || config.databases > 1_000_000 {
        return Err("databases must be between 1 and 1000000".into());
    }
    if config.threads == 0 {
        return Err("threads must be at least 1".into());
    }
    Ok(config)
}

fn init_logging(level: &str) {
    let filter = match level {
        "debug" | "verbose" => "debug",
        "warning" => "warn",
        "nothing" => "off",
        _ => "info",
    };
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_ansi(std::io::stdout().is_terminal())
        .with_target(false)
        .init();
}

fn run_server(args: ServerArgs) -> ExitCode {
    let config = match load_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kvasir: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&config.log_level);
    if config.threads > 1 {
        tracing::warn!(
            "threads={} requested: the keyspace is owned by one event-loop thread; running with 1",
            config.threads
        );
    }
    if let Err(e) =
        std::fs::create_dir_all(&config.dir).and_then(|_| std::env::set_current_dir(&config.dir))
    {
        eprintln!("kvasir: cannot use dir {}: {e}", config.dir);
        return ExitCode::from(2);
    }
    match kvasir_server::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kvasir: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Server(args) => run_server(args),
        Command::Bench(args) => ExitCode::from(kvasir_bench::main(args) as u8),
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
