//! `online`: Garnet Resp.benchmark's online mode. Every connection issues a
//! GET/SET mix (`--op-workload GET,SET --op-percent 80,20`) over a small
//! preloaded key space; every `--report-interval` seconds (2 by default) a
//! line shows min, 5th, median, average, 95th, 99th and 99.9th percentile
//! latency in microseconds over the run so far, the total operations, the
//! operations of the interval and the throughput in Kops/s.

use super::{check_kv, exec, load_keys, measure, push_kv, Env, KeyFormat};
use crate::cli::OnlineArgs;
use crate::client::{Batch, Replies};
use crate::gen;
use crate::metrics::{LocalRec, Metrics};
use crate::report::{latency_table, online_header, online_line, Report, RunReport};
use rand::RngExt;
use std::time::{Duration, Instant};

fn clock() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!(
        "{:02}:{:02}:{:02}",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60
    )
}

pub async fn run(env: &Env, args: &OnlineArgs, report: &mut Report) -> Result<(), String> {
    if args.op_workload.len() != args.op_percent.len() {
        return Err("--op-workload and --op-percent need the same number of entries".into());
    }
    let mut is_set = Vec::new();
    for op in &args.op_workload {
        match op.to_ascii_uppercase().as_str() {
            "GET" => is_set.push(false),
            "SET" => is_set.push(true),
            other => {
                return Err(format!(
                    "--op-workload {other}: only GET and SET are supported"
                ))
            }
        }
    }
    if args.op_percent.iter().sum::<u32>() != 100 {
        return Err("--op-percent must add up to 100".into());
    }
    if args.threads == 0 || args.batch == 0 || args.dbsize == 0 {
        return Err("--threads, --batch and --dbsize must be at least 1".into());
    }
    let positive = |v: f64| v > 0.0 && v.is_finite();
    if !positive(args.runtime) || !positive(args.report_interval) {
        return Err("--runtime and --report-interval must be positive".into());
    }
    let keys = KeyFormat::new(b"", args.keylength, args.dbsize)?;
    println!("<<<<<<< Benchmark Configuration >>>>>>>>");
    println!("benchmarkType: Online");
    println!("DBsize: {}", args.dbsize);
    println!("KeyLength: {}", args.keylength);
    println!("ValueLength: {}", args.valuelength);
    println!("BatchSize: {}", args.batch);
    println!("RunTime: {}", args.runtime);
    println!("NumThreads: {}", args.threads);
    println!("OpWorkload {}", args.op_workload.join(","));
    println!(
        "OpPercent {}",
        args.op_percent
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    println!("----------------------------------");
    if !args.skipload {
        let load = load_keys(env, keys, args.valuelength, args.dbsize, 1024, 1).await?;
        report.load = Some(load);
    }
    // Cumulative thresholds over 0..100 pick the operation.
    let mut thresholds = Vec::new();
    let mut acc = 0u32;
    for (&p, &s) in args.op_percent.iter().zip(&is_set) {
        acc += p;
        thresholds.push((acc, s));
    }
    let clients = env.clients(args.threads).await?;
    let metrics = Metrics::new(&["GET", "SET"], None);
    let mut opts = env.sampler(Duration::from_secs_f64(args.report_interval));
    opts.progress = false;
    println!("[{}] {}", clock(), online_header());
    opts.printer = Some(Box::new(|t| {
        println!(
            "[{}] {}",
            clock(),
            online_line(t.cumulative, t.total_ops, t.interval_ops, t.sample.dt)
        );
    }));
    let (batch_len, dbsize, vlen, seed) =
        (args.batch, args.dbsize, args.valuelength, args.common.seed);
    let recorded = measure(
        metrics,
        opts,
        clients,
        Some(Duration::from_secs_f64(args.runtime)),
        |i, mut client, m| {
            let thresholds = thresholds.clone();
            async move {
                let mut rng = gen::rng(seed, i as u64 + 1);
                let mut batch = Batch::new(client.routes());
                let mut replies = Replies::default();
                let mut rec = LocalRec::new(2);
                let mut ops: Vec<(u64, bool)> = Vec::with_capacity(batch_len);
                while !m.stopped() {
                    batch.clear();
                    ops.clear();
                    for _ in 0..batch_len {
                        let id = rng.random_range(0..dbsize);
                        let roll = rng.random_range(0..100u32);
                        let set = thresholds
                            .iter()
                            .find(|(t, _)| roll < *t)
                            .map(|(_, s)| *s)
                            .unwrap_or(false);
                        push_kv(&mut batch, keys, vlen, id, set);
                        ops.push((id, set));
                    }
                    let t0 = Instant::now();
                    if !exec(&mut client, &batch, &mut replies, &m).await {
                        continue;
                    }
                    for (k, &(id, set)) in ops.iter().enumerate() {
                        check_kv(replies.get(k), &m, keys, vlen, id, set);
                        rec.push(usize::from(set), replies.at(k).unwrap_or(t0) - t0);
                    }
                    rec.flush(&m);
                }
            }
        },
    )
    .await;
    let run = RunReport::new(
        "online",
        &recorded,
        serde_json::json!({
            "threads": args.threads,
            "batch": args.batch,
            "op_workload": args.op_workload,
            "op_percent": args.op_percent,
        }),
    );
    println!();
    print!("{}", latency_table(&run));
    println!(
        "Throughput: {:.2} ops/sec ({} ops in {:.2} s), errors: {}",
        run.ops_per_sec,
        run.ops_total,
        run.duration_s,
        run.errors.describe()
    );
    report.runs.push(run);
    Ok(())
}
