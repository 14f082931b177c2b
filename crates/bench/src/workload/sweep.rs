//! `sweep`: Garnet Resp.benchmark's throughput mode. Preload `--dbsize`
//! keys with batched MSET (reporting the load throughput), then for each
//! thread count run GET or SET for `--runtime` seconds, `--batch` commands
//! per round trip, and print Garnet's four lines per thread count.
//! A "thread" is a connection (a task on the generator's runtime).

use super::{check_kv, exec, load_keys, measure, push_kv, Env, KeyFormat};
use crate::cli::SweepArgs;
use crate::client::{Batch, Replies};
use crate::gen;
use crate::metrics::{LocalRec, Metrics};
use crate::report::{garnet_lines, latency_table, Report, RunReport};
use rand::RngExt;
use std::time::{Duration, Instant};

pub async fn run(env: &Env, args: &SweepArgs, report: &mut Report) -> Result<(), String> {
    let op = args.op.to_ascii_uppercase();
    if op != "GET" && op != "SET" {
        return Err(format!("--op {op}: only GET and SET are supported"));
    }
    if args.threads.is_empty() || args.threads.contains(&0) {
        return Err("--threads needs positive thread counts".into());
    }
    if args.batch == 0 || args.dbsize == 0 {
        return Err("--batch and --dbsize must be at least 1".into());
    }
    if !(args.runtime > 0.0 && args.runtime.is_finite()) {
        return Err("--runtime must be a positive number of seconds".into());
    }
    let keys = KeyFormat::new(b"", args.keylength, args.dbsize)?;
    println!("<<<<<<< Benchmark Configuration >>>>>>>>");
    println!("benchmarkType: Throughput");
    println!("DBsize: {}", args.dbsize);
    println!("Op Benchmark: {op}");
    println!("KeyLength: {}", args.keylength);
    println!("ValueLength: {}", args.valuelength);
    println!("BatchSize: {}", args.batch);
    println!("RunTime: {}", args.runtime);
    println!(
        "NumThreads: {}",
        args.threads
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    println!("----------------------------------");
    println!();
    if !args.skipload {
        let load = load_keys(
            env,
            keys,
            args.valuelength,
            args.dbsize,
            args.load_batch,
            args.load_threads,
        )
        .await?;
        print!(
            "{}",
            garnet_lines(&load.command, load.threads, load.seconds, load.ops)
        );
        println!();
        report.load = Some(load);
    }
    let set = op == "SET";
    let op_name: &'static str = if set { "SET" } else { "GET" };
    for &threads in &args.threads {
        let clients = env.clients(threads).await?;
        let metrics = Metrics::new(&[op_name], None);
        let (batch_len, dbsize, vlen, seed) =
            (args.batch, args.dbsize, args.valuelength, args.common.seed);
        let recorded = measure(
            metrics,
            env.sampler(Duration::from_secs(1)),
            clients,
            Some(Duration::from_secs_f64(args.runtime)),
            |i, mut client, m| async move {
                let mut rng = gen::rng(seed, ((threads as u64) << 32) | i as u64);
                let mut batch = Batch::new(client.routes());
                let mut replies = Replies::default();
                let mut rec = LocalRec::new(1);
                let mut ids = Vec::with_capacity(batch_len);
                while !m.stopped() {
                    batch.clear();
                    ids.clear();
                    for _ in 0..batch_len {
                        let id = rng.random_range(0..dbsize);
                        push_kv(&mut batch, keys, vlen, id, set);
                        ids.push(id);
                    }
                    let t0 = Instant::now();
                    if !exec(&mut client, &batch, &mut replies, &m).await {
                        continue;
                    }
                    for (k, &id) in ids.iter().enumerate() {
                        check_kv(replies.get(k), &m, keys, vlen, id, set);
                        rec.push(0, replies.at(k).unwrap_or(t0) - t0);
                    }
                    rec.flush(&m);
                }
            },
        )
        .await;
        let run = RunReport::new(
            format!("sweep {op_name} threads={threads}"),
            &recorded,
            serde_json::json!({"threads": threads, "batch": args.batch, "op": op_name}),
        );
        print!(
            "{}",
            garnet_lines(op_name, threads, run.duration_s, run.ops_total)
        );
        if let Some(l) = run.latency(op_name) {
            println!(
                "Latency (us): p50 {:.1}  p95 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
                l.p50_us, l.p95_us, l.p99_us, l.p999_us, l.max_us
            );
        }
        if run.errors.total > 0 {
            println!("Errors: {}", run.errors.describe());
        }
        println!();
        report.runs.push(run);
    }
    println!("| threads | ops/sec | p99 (us) |");
    println!("|---:|---:|---:|");
    for r in &report.runs {
        println!(
            "| {} | {:.2} | {:.1} |",
            r.params["threads"],
            r.ops_per_sec,
            r.latency(op_name).map(|l| l.p99_us).unwrap_or(0.0)
        );
    }
    if let Some(last) = report.runs.last() {
        println!();
        print!("{}", latency_table(last));
    }
    Ok(())
}
