//! `kvasir bench`: a load generator that speaks RESP to any server
//! (Kvasir, redis-server, a proxy, a Redis Cluster), verifies every reply,
//! and reports in the forms of the seed benchmark reports.
//!
//! Modules:
//! - `cli`: the command line (one subcommand per workload).
//! - `resp`: request encoding and in-place reply recognition.
//! - `client`: batches, connections, cluster routing (MOVED/ASK).
//! - `cluster`: CRC16 key slots, the CLUSTER SLOTS map, redirections.
//! - `gen`: keys, values and YCSB's request distributions.
//! - `metrics`: latency/count recording, errors, the sampler thread, CPU.
//! - `stats`: per-second summaries and HDR percentiles.
//! - `report`: the seed report formats and the JSON document.
//! - `plot`: PNG charts.
//! - `workload`: kv, pipelined-kv, ycsb, sweep, online.
//!
//! Design: a tokio runtime with few threads (`--io-threads`, 1 by default)
//! runs one task per connection; a task encodes a batch of requests into one
//! buffer, writes it with one call and cuts the replies out of one read
//! buffer, so the hot path makes no allocation per request.

pub mod cli;
pub mod client;
pub mod cluster;
pub mod gen;
pub mod metrics;
pub mod plot;
pub mod report;
pub mod resp;
pub mod stats;
pub mod workload;

use cli::{BenchArgs, Workload};
use report::Report;
use std::sync::atomic::Ordering;

/// The outcome of a bench invocation.
pub struct Outcome {
    pub report: Report,
}

impl Outcome {
    /// Process exit code: 0 without errors, 1 with.
    pub fn exit_code(&self) -> i32 {
        if self.report.ok {
            0
        } else {
            1
        }
    }
}

fn common(w: &Workload) -> &cli::Common {
    match w {
        Workload::Kv(a) | Workload::PipelinedKv(a) => &a.common,
        Workload::Ycsb(a) => &a.common,
        Workload::Sweep(a) => &a.common,
        Workload::Online(a) => &a.common,
    }
}

fn workload_name(w: &Workload) -> &'static str {
    match w {
        Workload::Kv(_) => "kv",
        Workload::PipelinedKv(_) => "pipelined-kv",
        Workload::Ycsb(_) => "ycsb",
        Workload::Sweep(_) => "sweep",
        Workload::Online(_) => "online",
    }
}

/// Runs a workload on the current tokio runtime; prints its reports to
/// stdout and writes the JSON and PNG files asked for. `Err` means the run
/// could not be made (bad flags, server unreachable); errors during the run
/// are in the report.
pub async fn run(args: &BenchArgs) -> Result<Outcome, String> {
    let w = &args.workload;
    let c = common(w);
    let params = serde_json::to_value(w).unwrap_or_default();
    let mut report = Report::new(
        workload_name(w),
        format!("{}:{}", c.host, c.port),
        c.cluster,
        c.label.clone(),
        params,
    );
    let env = workload::Env::new(c).await?;
    match w {
        Workload::Kv(a) => workload::kv::run(&env, a, false, &mut report).await,
        Workload::PipelinedKv(a) => workload::kv::run(&env, a, true, &mut report).await,
        Workload::Ycsb(a) => workload::ycsb::run(&env, a, &mut report).await,
        Workload::Sweep(a) => workload::sweep::run(&env, a, &mut report).await,
        Workload::Online(a) => workload::online::run(&env, a, &mut report).await,
    }?;
    if let Some(shared) = &env.cluster {
        note_redirects(&mut report, shared);
    }
    report.finish();
    if let Some(path) = &c.plot {
        let title = format!("kvasir bench {} against {}", report.workload, report.target);
        let drawn = if let Workload::Sweep(_) = w {
            let points: Vec<(usize, f64)> = report
                .runs
                .iter()
                .map(|r| {
                    (
                        r.params["threads"].as_u64().unwrap_or(0) as usize,
                        r.ops_per_sec,
                    )
                })
                .collect();
            plot::sweep(path, &title, &points)
        } else {
            plot::timeline(path, &title, &report.runs)
        };
        drawn?;
        println!("Plot written to {}", path.display());
    }
    if let Some(path) = &c.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("JSON report written to {}", path.display());
    }
    Ok(Outcome { report })
}

/// Records the cluster redirection counters in the report.
pub fn note_redirects(report: &mut Report, shared: &client::ClusterShared) {
    let c = &shared.counters;
    report.redirects = Some(serde_json::json!({
        "moved": c.moved.load(Ordering::Relaxed),
        "ask": c.ask.load(Ordering::Relaxed),
        "retry": c.retry.load(Ordering::Relaxed),
        "map_refreshes": c.refreshes.load(Ordering::Relaxed),
    }));
}

/// The `kvasir bench` entry point: builds the runtime, runs, prints the
/// verdict as the last line. Exit code 0 (no errors), 1 (errors during the
/// run), 2 (the run could not be made).
pub fn main(args: BenchArgs) -> i32 {
    let threads = common(&args.workload).io_threads.max(1);
    let rt = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kvasir bench: cannot start the runtime: {e}");
            return 2;
        }
    };
    match rt.block_on(run(&args)) {
        Ok(outcome) => {
            println!("{}", outcome.report.verdict());
            outcome.exit_code()
        }
        Err(e) => {
            println!("FAILED: {e}");
            2
        }
    }
}
