//! `kv` and `pipelined-kv`: writer connections SET, reader connections GET
//! and check the value (YugabyteDB's RedisKeyValue and
//! RedisPipelinedKeyValue), or, with `--write-ratio`, every connection
//! mixes the two (RheaKV's 90/10 put/get). Keys are picked uniformly from
//! the key space; values are a function of the key, so a read can be
//! checked whichever writer wrote last. The key space is written first
//! (batched MSET) so that reads always find a value.

use super::{check_kv, exec, load_keys, measure, push_kv, Env, KeyFormat};
use crate::cli::KvArgs;
use crate::client::Replies;
use crate::gen;
use crate::metrics::{LocalRec, Metrics};
use crate::report::{latency_table, seed_table, timer_block, Report, RunReport};
use rand::RngExt;
use std::time::{Duration, Instant};

const READ: usize = 0;
const WRITE: usize = 1;

#[derive(Clone, Copy, Debug)]
enum Role {
    Writer,
    Reader,
    Mixed(f64),
}

/// Runs the workload and prints its report.
pub async fn run(
    env: &Env,
    args: &KvArgs,
    pipelined: bool,
    report: &mut Report,
) -> Result<(), String> {
    let pipeline = args.pipeline.unwrap_or(if pipelined { 16 } else { 1 });
    if pipeline == 0 {
        return Err("-P must be at least 1".into());
    }
    if args.keyspace == 0 {
        return Err("--keyspace must be at least 1".into());
    }
    if !(args.duration > 0.0 && args.duration.is_finite()) {
        return Err("--duration must be a positive number of seconds".into());
    }
    let keys = KeyFormat::new(b"key:", args.key_size, args.keyspace)?;
    let roles: Vec<Role> = match args.write_ratio {
        Some(r) if (0.0..=1.0).contains(&r) => {
            let n = args.clients.unwrap_or(args.writers + args.readers);
            vec![Role::Mixed(r); n]
        }
        Some(_) => return Err("--write-ratio must be between 0 and 1".into()),
        None => std::iter::repeat_n(Role::Writer, args.writers)
            .chain(std::iter::repeat_n(Role::Reader, args.readers))
            .collect(),
    };
    if roles.is_empty() {
        return Err("no connections: give --writers, --readers or --clients".into());
    }
    let reads = args.write_ratio.map_or(args.readers > 0, |r| r < 1.0);
    let name = if pipelined { "pipelined-kv" } else { "kv" };
    let title = match args.write_ratio {
        Some(r) => format!(
            "Workload {name} with {} clients, write ratio {r}",
            roles.len()
        ),
        None => format!(
            "Workload {name} with {} writers and {} readers",
            args.writers, args.readers
        ),
    };

    if reads && !args.no_load {
        let load = load_keys(
            env,
            keys,
            args.value_size,
            args.keyspace,
            args.load_batch,
            roles.len().clamp(1, 8),
        )
        .await?;
        println!(
            "Loaded {} keys with {} in {:.2} s ({:.0} keys/s)",
            load.ops, load.command, load.seconds, load.ops_per_sec
        );
        report.load = Some(load);
    }

    let clients = env.clients(roles.len()).await?;
    let metrics = Metrics::new(&["read", "write"], None);
    let value_size = args.value_size;
    let keyspace = args.keyspace;
    let seed = args.common.seed;
    let recorded = measure(
        metrics,
        env.sampler(Duration::from_secs(1)),
        clients,
        Some(Duration::from_secs_f64(args.duration)),
        |i, mut client, m| {
            let role = roles[i];
            async move {
                let mut rng = gen::rng(seed, i as u64 + 1);
                let mut batch = crate::client::Batch::new(client.routes());
                let mut replies = Replies::default();
                let mut rec = LocalRec::new(2);
                let mut ids: Vec<u64> = Vec::with_capacity(pipeline);
                let mut writes: Vec<bool> = Vec::with_capacity(pipeline);
                while !m.stopped() {
                    batch.clear();
                    ids.clear();
                    writes.clear();
                    for _ in 0..pipeline {
                        let id = rng.random_range(0..keyspace);
                        let write = match role {
                            Role::Writer => true,
                            Role::Reader => false,
                            Role::Mixed(r) => rng.random::<f64>() < r,
                        };
                        push_kv(&mut batch, keys, value_size, id, write);
                        ids.push(id);
                        writes.push(write);
                    }
                    let t0 = Instant::now();
                    if !exec(&mut client, &batch, &mut replies, &m).await {
                        continue;
                    }
                    for k in 0..ids.len() {
                        check_kv(replies.get(k), &m, keys, value_size, ids[k], writes[k]);
                        let at = replies.at(k).unwrap_or(t0);
                        rec.push(if writes[k] { WRITE } else { READ }, at - t0);
                    }
                    rec.flush(&m);
                }
            }
        },
    )
    .await;

    let params = serde_json::json!({
        "connections": roles.len(),
        "writers": args.writers,
        "readers": args.readers,
        "write_ratio": args.write_ratio,
        "pipeline": pipeline,
        "key_size": args.key_size,
        "value_size": args.value_size,
        "keyspace": args.keyspace,
    });
    let run = RunReport::new(name, &recorded, params);
    println!();
    println!("## {title}:");
    println!("```");
    print!("{}", seed_table(&run.per_second));
    println!("```");
    println!();
    print!("{}", latency_table(&run));
    if args.write_ratio.is_some() {
        // RheaKV's client report: all operations, gets, puts.
        println!();
        println!(
            "-- Timers ----------------------------------------------------------------------"
        );
        print!(
            "{}",
            timer_block(
                "benchmark_timer",
                &recorded.combined,
                &recorded.samples,
                None,
                run.duration_s
            )
        );
        for (name, op) in [
            ("get_benchmark_timer", READ),
            ("put_benchmark_timer", WRITE),
        ] {
            print!(
                "{}",
                timer_block(
                    name,
                    &recorded.totals[op],
                    &recorded.samples,
                    Some(op),
                    run.duration_s
                )
            );
        }
    }
    println!();
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
