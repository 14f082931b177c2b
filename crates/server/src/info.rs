//! INFO: Redis's sections and field names, so that tools parsing
//! redis-server's INFO (redis-cli, exporters, benchmarks) read Kvasir's.

use crate::session::Session;
use bytes::Bytes;
use kvasir_resp::Reply;
use std::fmt::Write;

/// The Redis version Kvasir is compatible with, as reported to clients.
pub const REDIS_VERSION: &str = "7.0.15";

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "errorstats",
    "keyspace",
];
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "commandstats",
    "errorstats",
    "keyspace",
];

/// Bytes allocated by the process's allocator (jemalloc's `stats.allocated`,
/// what Redis reports as used_memory).
pub fn used_memory() -> u64 {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0) as u64
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// (user, system) CPU seconds of this process, from /proc.
fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields overall.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 100.0
    };
    (ticks(11), ticks(12))
}

/// Formats bytes the way Redis's bytesToHuman does (`1.50M`).
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1024.0 {
        format!("{bytes}B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.2}K", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", b / (1024.0 * 1024.0))
    } else {
        format!("{:.2}G", b / (1024.0 * 1024.0 * 1024.0))
    }
}

/// Renders INFO [section ...].
pub fn render(s: &Session, args: &[Bytes]) -> Reply {
    let wanted: Vec<String> = args
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let sections: Vec<&str> = if wanted.is_empty() || wanted.iter().any(|w| w == "default") {
        DEFAULT_SECTIONS.to_vec()
    } else if wanted.iter().any(|w| w == "all" || w == "everything") {
        ALL_SECTIONS.to_vec()
    } else {
        ALL_SECTIONS
            .iter()
            .copied()
            .filter(|sec| wanted.iter().any(|w| w == sec))
            .collect()
    };
    let mut out = String::new();
    for (i, sec) in sections.iter().enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        section(s, sec, &mut out);
    }
    Reply::Verbatim("txt", Bytes::from(out))
}

fn section(s: &Session, name: &str, out: &mut String) {
    let server = &s.server;
    let config = server.config.borrow();
    match name {
        "server" => {
            let uptime = server.started.elapsed().as_secs();
            let now_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros())
                .unwrap_or(0);
            let _ = write!(
                out,
                "# Server\r\nredis_version:{REDIS_VERSION}\r\nkvasir_version:{}\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\nrun_id:{:040x}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nexecutable:{}\r\n",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                std::env::consts::ARCH,
                std::process::id(),
                (server.started_unix_ms as u128 * 0x9E37_79B9) ^ std::process::id() as u128,
                server.port,
                now_us,
                uptime,
                uptime / 86400,
                config.hz,
                config.hz,
                std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            );
        }
        "clients" => {
            let _ = write!(
                out,
                "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:{}\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n",
                server.clients.borrow().len(),
                config.maxclients,
                server.blocking.borrow().len(),
            );
        }
        "memory" => {
            let used = used_memory();
            let peak = server.peak_memory.get().max(used);
            server.peak_memory.set(peak);
            let rss = rss_bytes();
            let _ = write!(
                out,
                "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nmaxmemory:{}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_allocator:jemalloc-5.3.0\r\n",
                human(used),
                human(rss),
                human(peak),
                config.maxmemory,
                human(config.maxmemory),
                config.maxmemory_policy,
                if used > 0 { rss as f64 / used as f64 } else { 0.0 },
            );
        }
        "persistence" => {
            let _ = write!(
                out,
                "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:ok\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\n",
                server.started_unix_ms / 1000,
            );
        }
        "stats" => {
            let stats = server.stats.borrow();
            let store_stats = server.shard.borrow().store().stats.clone();
            let (ops, in_kbps, out_kbps) = stats.rates.rates();
            let _ = write!(
                out,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ninstantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\ntotal_error_replies:{}\r\n",
                stats.total_connections_received,
                stats.total_commands_processed,
                ops.round() as u64,
                stats.net_input_bytes,
                stats.net_output_bytes,
                in_kbps,
                out_kbps,
                stats.rejected_connections,
                store_stats.expired_keys,
                store_stats.keyspace_hits.get(),
                store_stats.keyspace_misses.get(),
                server.pubsub.borrow().channel_count(),
                server.pubsub.borrow().numpat(),
                stats.total_error_replies,
            );
        }
        "replication" => {
            out.push_str(
                "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:0\r\n",
            );
        }
        "cpu" => {
            let (user, sys) = cpu_seconds();
            let _ = write!(
                out,
                "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\n"
            );
        }
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            let stats = server.stats.borrow();
            let mut rows: Vec<_> = stats.commands.values().collect();
            rows.sort_by_key(|st| st.name);
            for st in rows {
                let (cmd, sub) = st.name;
                let name = if sub.is_empty() {
                    cmd.to_string()
                } else {
                    format!("{cmd}|{sub}")
                };
                let per_call = if st.calls > 0 {
                    st.usec as f64 / st.calls as f64
                } else {
                    0.0
                };
                let _ = write!(
                    out,
                    "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                    st.calls, st.usec, st.rejected, st.failed,
                );
            }
        }
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            let stats = server.stats.borrow();
            let mut rows: Vec<_> = stats.errors.iter().collect();
            rows.sort();
            for (code, count) in rows {
                let _ = write!(out, "errorstat_{code}:count={count}\r\n");
            }
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            let shard = server.shard.borrow();
            let store = shard.store();
            for i in 0..store.databases() {
                let db = store.db(i);
                if !db.is_empty() {
                    let _ = write!(
                        out,
                        "db{i}:keys={},expires={},avg_ttl=0\r\n",
                        db.len(),
                        db.expires_count()
                    );
                }
            }
        }
        _ => {}
    }
}
