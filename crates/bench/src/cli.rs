//! The command line of `kvasir bench`: one subcommand per workload, each
//! with the common connection and report flags. Flag names follow the tools
//! users know: Garnet's Resp.benchmark for `sweep` and `online`, YCSB's
//! property names for `ycsb`, redis-benchmark's `-P` and `-a`.

use clap::{Args, Parser, Subcommand};
use serde::Serialize;
use std::path::PathBuf;

/// `kvasir bench WORKLOAD ...` (the bench subcommand of the binary).
#[derive(Parser, Debug, Clone, Serialize)]
#[command(
    name = "kvasir bench",
    about = "Load generator: kv, pipelined-kv, ycsb, sweep, online"
)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub workload: Workload,
}

#[derive(Subcommand, Debug, Clone, Serialize)]
pub enum Workload {
    /// Writers SET and readers GET (and check) keys, one request in flight
    /// per connection (YugabyteDB's RedisKeyValue; RheaKV with
    /// --key-size 16 --value-size 16 --write-ratio 0.9).
    Kv(KvArgs),
    /// The kv workload with -P requests in flight per connection
    /// (YugabyteDB's RedisPipelinedKeyValue).
    PipelinedKv(KvArgs),
    /// YCSB core workloads A-F, records stored as YCSB's Redis binding does.
    Ycsb(YcsbArgs),
    /// Garnet Resp.benchmark throughput sweep over thread counts.
    Sweep(SweepArgs),
    /// Garnet Resp.benchmark online mode: mixed GET/SET with latency lines.
    Online(OnlineArgs),
}

/// Flags every workload has.
#[derive(Args, Debug, Clone, Serialize)]
pub struct Common {
    /// Server host.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port.
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Redis Cluster mode: read CLUSTER SLOTS, send each key to its slot's
    /// node, follow MOVED/ASK.
    #[arg(long)]
    pub cluster: bool,
    /// Write the full report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw throughput and p99 over time (ops/s per thread count for sweep)
    /// into this PNG file.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// Server process ids whose CPU use is sampled from /proc (comma list).
    #[arg(long, value_delimiter = ',', value_name = "PID,...")]
    pub server_pid: Vec<u32>,
    /// Show the per-second progress line even when stderr is not a terminal.
    #[arg(long)]
    pub progress: bool,
    /// Never show the progress line.
    #[arg(long, conflicts_with = "progress")]
    pub no_progress: bool,
    /// Threads of the load generator's runtime (connections are tasks).
    #[arg(long, default_value_t = 1)]
    pub io_threads: usize,
    /// Seconds to wait for a reply before counting a timeout.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// Seed of the random generators (runs are reproducible).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Password (AUTH) for every connection.
    #[arg(short = 'a', long = "auth", value_name = "PASSWORD")]
    pub password: Option<String>,
    /// User name for AUTH with --auth.
    #[arg(long)]
    pub user: Option<String>,
    /// Name of the system under test, shown in reports.
    #[arg(long)]
    pub label: Option<String>,
}

/// Flags of `kv` and `pipelined-kv`.
#[derive(Args, Debug, Clone, Serialize)]
pub struct KvArgs {
    #[command(flatten)]
    pub common: Common,
    /// Writer connections (SET).
    #[arg(long, default_value_t = 256)]
    pub writers: usize,
    /// Reader connections (GET and check the value).
    #[arg(long, default_value_t = 0)]
    pub readers: usize,
    /// Mixed mode: every connection writes with this probability and reads
    /// otherwise (RheaKV: 0.9). Connections: --clients, or writers + readers.
    #[arg(long)]
    pub write_ratio: Option<f64>,
    /// Connections in mixed mode.
    #[arg(long)]
    pub clients: Option<usize>,
    /// Requests in flight per connection (default 1 for kv, 16 for
    /// pipelined-kv).
    #[arg(short = 'P', long)]
    pub pipeline: Option<usize>,
    /// Key size in bytes ("key:" and a zero-padded number).
    #[arg(long, default_value_t = 24)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 40)]
    pub value_size: usize,
    /// Number of distinct keys; requests pick keys uniformly among them.
    #[arg(long, default_value_t = 100_000)]
    pub keyspace: u64,
    /// Seconds to run.
    #[arg(long, alias = "runtime", default_value_t = 30.0)]
    pub duration: f64,
    /// Do not write the key space before the run (readers then count
    /// missing keys as wrong values).
    #[arg(long)]
    pub no_load: bool,
    /// Keys per MSET when loading.
    #[arg(long, default_value_t = 1000)]
    pub load_batch: usize,
}

/// Flags of `ycsb`.
#[derive(Args, Debug, Clone, Serialize)]
pub struct YcsbArgs {
    #[command(flatten)]
    pub common: Common,
    /// Core workload: a, b, c, d, e, f, or "all" (load once, then each).
    #[arg(long, default_value = "a")]
    pub workload: String,
    /// Records loaded (YCSB recordcount).
    #[arg(long)]
    pub recordcount: Option<u64>,
    /// Operations in the run phase (YCSB operationcount).
    #[arg(long)]
    pub operationcount: Option<u64>,
    /// Client threads (connections; YCSB -threads / threadcount).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Upper bound on each run phase in seconds (YCSB maxexecutiontime).
    #[arg(long, alias = "maxexecutiontime")]
    pub runtime: Option<f64>,
    /// Which phases: load, run, or both.
    #[arg(long, default_value = "both")]
    pub phase: String,
    /// YCSB properties: -p requestdistribution=zipfian -p fieldcount=10 ...
    #[arg(short = 'p', value_name = "NAME=VALUE")]
    pub props: Vec<String>,
}

/// Flags of `sweep` (Garnet Resp.benchmark names).
#[derive(Args, Debug, Clone, Serialize)]
pub struct SweepArgs {
    #[command(flatten)]
    pub common: Common,
    /// GET or SET.
    #[arg(long, default_value = "GET")]
    pub op: String,
    /// Thread counts to run, one after the other.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64,128")]
    pub threads: Vec<usize>,
    /// Commands per round trip.
    #[arg(long, alias = "batchsize", default_value_t = 1)]
    pub batch: usize,
    /// Seconds per thread count.
    #[arg(long, default_value_t = 15.0)]
    pub runtime: f64,
    /// Keys preloaded and requested.
    #[arg(long, default_value_t = 1 << 20)]
    pub dbsize: u64,
    /// Key length in bytes.
    #[arg(long, default_value_t = 8)]
    pub keylength: usize,
    /// Value length in bytes.
    #[arg(long, default_value_t = 8)]
    pub valuelength: usize,
    /// Skip the MSET preload.
    #[arg(long)]
    pub skipload: bool,
    /// Keys per MSET in the preload.
    #[arg(long, default_value_t = 4096)]
    pub load_batch: usize,
    /// Connections used for the preload.
    #[arg(long, default_value_t = 8)]
    pub load_threads: usize,
}

/// Flags of `online` (Garnet Resp.benchmark names).
#[derive(Args, Debug, Clone, Serialize)]
pub struct OnlineArgs {
    #[command(flatten)]
    pub common: Common,
    /// Operations mixed in the workload.
    #[arg(long, value_delimiter = ',', default_value = "GET,SET")]
    pub op_workload: Vec<String>,
    /// Percent of each operation (same order, sums to 100).
    #[arg(long, value_delimiter = ',', default_value = "80,20")]
    pub op_percent: Vec<u32>,
    /// Client threads (connections).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Commands per round trip.
    #[arg(long, alias = "batchsize", default_value_t = 1)]
    pub batch: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 35.0)]
    pub runtime: f64,
    /// Keys preloaded and requested.
    #[arg(long, default_value_t = 1024)]
    pub dbsize: u64,
    /// Key length in bytes.
    #[arg(long, default_value_t = 8)]
    pub keylength: usize,
    /// Value length in bytes.
    #[arg(long, default_value_t = 8)]
    pub valuelength: usize,
    /// Skip the MSET preload.
    #[arg(long)]
    pub skipload: bool,
    /// Seconds between latency lines.
    #[arg(long, default_value_t = 2.0)]
    pub report_interval: f64,
}
