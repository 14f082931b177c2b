//! INFO: Redis's sections and field names, so that tools parsing
//! redis-server's INFO (redis-cli, exporters, benchmarks) read Kvasir's.

use crate::session::Session;
use bytes::Bytes;
use kvasir_resp::Reply;
use std::fmt::Write;

/// The Redis version Kvasir is compatible with, as reported to clients.
/// The Redis version whose behaviour Kvasir follows (INFO, HELLO, scripts).
pub use kvasir_core::server::REDIS_VERSION;

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
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
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "raft",
    "keyspace",
];

/// Bytes the process has allocated and not freed (Redis's used_memory):
/// jemalloc's `stats.allocated` less what its thread caches hold. The
/// allocator counts a freed block kept in a thread cache, and a batch of
/// blocks a cache took ahead of use, as allocated, so that figure moves in
/// steps of tens of KB and does not drop when keys are deleted: under a
/// tight `maxmemory` eviction then saw no memory come back and evicted
/// every key. Redis counts its allocations itself (zmalloc); this reads
/// the same quantity from the allocator.
pub fn used_memory() -> u64 {
    AllocatorStats::read().used()
}

/// One reading of jemalloc's statistics (one epoch advance).
struct AllocatorStats {
    allocated: u64,
    active: u64,
    resident: u64,
    /// Bytes in the thread caches, over every arena.
    thread_cached: u64,
}

impl AllocatorStats {
    fn read() -> AllocatorStats {
        use tikv_jemalloc_ctl::stats;
        let _ = tikv_jemalloc_ctl::epoch::advance();
        // SAFETY: a NUL-terminated mallctl name whose value is a size_t.
        let cached =
            unsafe { tikv_jemalloc_ctl::raw::read::<usize>(b"stats.arenas.4096.tcache_bytes\0") };
        AllocatorStats {
            allocated: stats::allocated::read().unwrap_or(0) as u64,
            active: stats::active::read().unwrap_or(0) as u64,
            resident: stats::resident::read().unwrap_or(0) as u64,
            thread_cached: cached.unwrap_or(0) as u64,
        }
    }

    fn used(&self) -> u64 {
        self.allocated.saturating_sub(self.thread_cached)
    }
}

pub fn rss_bytes() -> u64 {
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
    cpu_seconds_of("/proc/self/stat")
}

/// (user, system) CPU seconds of the process or thread whose `stat` file
/// is `path`.
fn cpu_seconds_of(path: &str) -> (f64, f64) {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
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
    crate::direct_gate::merge_stats(&s.server);
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
                "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:{}\r\nkvasir_version:{}\r\nredis_mode:{}\r\nos:{}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:{}\r\n",
                env!("CARGO_PKG_VERSION").replace('.', ""),
                env!("CARGO_PKG_VERSION"),
                if server.cluster.is_some() { "cluster" } else { "standalone" },
                os_name(),
                std::process::id(),
                crate::supervision::supervisor(&config).unwrap_or("no"),
                server.run_id,
                server.port.get(),
                now_us,
                uptime,
                uptime / 86400,
                config.hz,
                config.hz,
                // Redis's LRU clock: seconds, 24 bits.
                (now_us / 1_000_000) & ((1 << 24) - 1),
                std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
                config.config_file.as_deref().unwrap_or(""),
                u8::from(config.threads > 1),
            );
        }
        "clients" => {
            let _ = write!(
                out,
                "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:0\r\n",
                server.clients.borrow().len(),
                config.maxclients,
                server.blocking.borrow().len() + server.paused_clients.get(),
                server.tracking.borrow().clients_count(),
            );
        }
        "memory" => {
            let alloc = AllocatorStats::read();
            let used = alloc.used();
            let peak = server.peak_memory.get().max(used);
            server.peak_memory.set(peak);
            let rss = rss_bytes();
            // What the keyspace and its state take beyond the server at
            // start (Redis's dataset is what is not overhead).
            let startup = server.startup_memory.min(used);
            let dataset = used - startup;
            let system = total_system_memory();
            let AllocatorStats {
                allocated,
                active,
                resident,
                ..
            } = alloc;
            let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
            let diff = |a: u64, b: u64| a as i64 - b as i64;
            // What the clients hold: their unread queries and their queued
            // replies and messages (CLIENT LIST qbuf and omem).
            let clients_mem: u64 = server
                .clients
                .borrow()
                .iter()
                .map(|c| c.waiting_bytes() + c.query_buffer() as u64)
                .sum();
            let _ = write!(
                out,
                "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\nused_memory_overhead:{startup}\r\nused_memory_startup:{startup}\r\nused_memory_dataset:{dataset}\r\nused_memory_dataset_perc:{:.2}%\r\nallocator_allocated:{allocated}\r\nallocator_active:{active}\r\nallocator_resident:{resident}\r\ntotal_system_memory:{system}\r\ntotal_system_memory_human:{}\r\n",
                human(used),
                human(rss),
                human(peak),
                if peak > 0 { used as f64 * 100.0 / peak as f64 } else { 0.0 },
                if used > 0 { dataset as f64 * 100.0 / used as f64 } else { 0.0 },
                human(system),
            );
            if server.cluster.is_none() {
                // A cluster node's scripts live in each shard's store.
                let store = server.local_store.borrow();
                let scripts = &store.store().scripts;
                let lua = scripts.vm_memory() as u64;
                let eval = scripts.bodies_bytes();
                let functions: usize = scripts.libraries.values().map(|l| l.functions.len()).sum();
                let _ = write!(
                    out,
                    "used_memory_lua:{lua}\r\nused_memory_vm_eval:{lua}\r\nused_memory_lua_human:{}\r\nused_memory_scripts_eval:{eval}\r\nnumber_of_cached_scripts:{}\r\nnumber_of_functions:{functions}\r\nnumber_of_libraries:{}\r\nused_memory_vm_total:{lua}\r\nused_memory_vm_total_human:{}\r\n",
                    human(lua),
                    scripts.bodies.len(),
                    scripts.libraries.len(),
                    human(lua),
                );
            }
            let _ = write!(
                out,
                "maxmemory:{}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nallocator_frag_ratio:{:.2}\r\nallocator_frag_bytes:{}\r\nallocator_rss_ratio:{:.2}\r\nallocator_rss_bytes:{}\r\nrss_overhead_ratio:{:.2}\r\nrss_overhead_bytes:{}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\nmem_not_counted_for_evict:0\r\nmem_replication_backlog:0\r\nmem_total_replication_buffers:0\r\nmem_clients_slaves:0\r\nmem_clients_normal:{clients_mem}\r\nmem_cluster_links:0\r\nmem_aof_buffer:0\r\nmem_allocator:jemalloc-5.3.0\r\nactive_defrag_running:0\r\nlazyfree_pending_objects:0\r\nlazyfreed_objects:0\r\n",
                config.maxmemory,
                human(config.maxmemory),
                config.maxmemory_policy,
                ratio(active, allocated),
                diff(active, allocated),
                ratio(resident, active),
                diff(resident, active),
                ratio(rss, resident),
                diff(rss, resident),
                ratio(rss, used),
                diff(rss, used),
            );
        }
        "persistence" => {
            let child = server.persistence.child.borrow();
            let (keys_processed, keys_total) = child
                .as_ref()
                .map_or((0, 0), |c| (c.progress.done(), c.progress.total()));
            let cow = child.as_ref().map(|c| c.progress.cow()).unwrap_or_default();
            let cow_age = match cow.updated_ms {
                0 => 0,
                at => crate::local_store::unix_ms().saturating_sub(at) / 1000,
            };
            let running_secs = |kind| {
                child
                    .as_ref()
                    .filter(|c| c.kind == kind)
                    .map_or(-1, |c| c.started.elapsed().as_secs() as i64)
            };
            let current_secs = running_secs(crate::persistence::ChildKind::Rdb);
            let rewrite_secs = running_secs(crate::persistence::ChildKind::Aof);
            drop(child);
            let fork_perc = if keys_total == 0 {
                0.0
            } else {
                keys_processed as f64 * 100.0 / keys_total as f64
            };
            let _ = write!(
                out,
                "# Persistence\r\nloading:{}\r\nasync_loading:0\r\ncurrent_cow_peak:{}\r\ncurrent_cow_size:{}\r\ncurrent_cow_size_age:{}\r\ncurrent_fork_perc:{:.2}\r\ncurrent_save_keys_processed:{}\r\ncurrent_save_keys_total:{}\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\nrdb_last_cow_size:{}\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_loaded:{}\r\naof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_rewrites_consecutive_failures:{}\r\naof_last_write_status:{}\r\naof_last_cow_size:{}\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\n",
                u8::from(server.loading.active()),
                cow.peak,
                cow.current,
                cow_age,
                fork_perc,
                keys_processed,
                keys_total,
                server.dirty.get(),
                u8::from(server.persistence.bgsave_in_progress.get()),
                server.persistence.last_save.get(),
                if server.persistence.last_bgsave_ok.get() { "ok" } else { "err" },
                server.persistence.last_bgsave_secs.get(),
                current_secs,
                server.persistence.saves.get(),
                server.persistence.rdb_last_cow.get(),
                server.persistence.last_load.get().1,
                server.persistence.last_load.get().0,
                u8::from(server.config.borrow().appendonly),
                u8::from(crate::aof_persistence::rewrite_in_progress(server)),
                u8::from(server.persistence.aof_rewrite_scheduled.get()),
                server.persistence.aof_last_rewrite_secs.get(),
                rewrite_secs,
                if server.persistence.aof_last_rewrite_ok.get() { "ok" } else { "err" },
                server.persistence.aof_rewrites.get(),
                server.persistence.aof_rewrite_failures.get(),
                if crate::aof_persistence::write_error(server).is_some() { "err" } else { "ok" },
                server.persistence.aof_last_cow.get(),
            );
            if let Some(aof) = server.local_store.borrow().aof.as_ref() {
                let _ = write!(
                    out,
                    "aof_current_size:{}\r\naof_base_size:0\r\naof_pending_rewrite:0\r\naof_buffer_length:{}\r\naof_pending_bio_fsync:0\r\naof_delayed_fsync:0\r\n",
                    aof.size(),
                    aof.buffered(),
                );
            }
            out.push_str(&server.loading.info_fields());
        }
        "stats" => {
            let stats = server.stats.borrow();
            let store_stats = server.local_store.borrow().store().stats.clone();
            // In cluster mode, as a Redis Cluster master counts its own:
            // the keys expired and evicted in the shards this node leads.
            let (expired_keys, evicted_keys) = match &server.cluster {
                Some(node) => node
                    .led_shards()
                    .into_iter()
                    .filter_map(|shard| node.removal_counts(shard))
                    .fold((0, 0), |(x, e), (dx, de)| (x + dx, e + de)),
                None => (store_stats.expired_keys, store_stats.evicted_keys),
            };
            let (hits, misses) = match &server.cluster {
                Some(node) => node
                    .led_shards()
                    .into_iter()
                    .filter_map(|shard| node.lookup_counts(shard))
                    .fold((0, 0), |(h, m), (dh, dm)| (h + dh, m + dm)),
                None => (
                    store_stats.keyspace_hits.get(),
                    store_stats.keyspace_misses.get(),
                ),
            };
            let (ops, in_kbps, out_kbps) = stats.rates.rates();
            let tracked = server.tracking.borrow().totals();
            let _ = write!(
                out,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ntotal_net_repl_input_bytes:0\r\ntotal_net_repl_output_bytes:0\r\ninstantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}\r\ninstantaneous_input_repl_kbps:0.00\r\ninstantaneous_output_repl_kbps:0.00\r\nrejected_connections:{}\r\nsync_full:0\r\nsync_partial_ok:0\r\nsync_partial_err:0\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nevicted_clients:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\nlatest_fork_usec:{}\r\ntotal_forks:{}\r\nmigrate_cached_sockets:{}\r\nslave_expires_tracked_keys:0\r\nactive_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\nactive_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\ncurrent_active_defrag_time:0\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\nunexpected_error_replies:0\r\ntotal_error_replies:{}\r\n",
                stats.total_connections_received,
                stats.total_commands_processed,
                ops.round() as u64,
                stats.net_input_bytes,
                stats.net_output_bytes,
                in_kbps,
                out_kbps,
                stats.rejected_connections,
                expired_keys,
                evicted_keys,
                hits,
                misses,
                server.pubsub.borrow().channel_count(),
                server.pubsub.borrow().numpat(),
                server.pubsub.borrow().shard_channel_count(),
                server.persistence.latest_fork_usec.get(),
                server.persistence.total_forks.get(),
                server.migrate_sockets.len(),
                tracked.0,
                tracked.1,
                tracked.2,
                stats.total_error_replies,
            );
        }
        "replication" => {
            let _ = write!(
                out,
                "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n",
                server.repl_id,
                config.stored.get("repl-backlog-size").unwrap_or("1048576"),
            );
        }
        "cpu" => {
            let (user, sys) = cpu_seconds();
            // INFO runs on the main thread: its own share.
            let (main_user, main_sys) = cpu_seconds_of("/proc/thread-self/stat");
            let _ = write!(
                out,
                "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\nused_cpu_sys_main_thread:{main_sys:.6}\r\nused_cpu_user_main_thread:{main_user:.6}\r\n"
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
        // Kvasir loads no modules.
        "modules" => out.push_str("# Modules\r\n"),
        "latencystats" => {
            out.push_str("# Latencystats\r\n");
            let percentiles = server.config.borrow().latency_percentiles();
            let stats = server.stats.borrow();
            let mut rows: Vec<_> = stats.commands.values().collect();
            rows.sort_by_key(|st| st.name);
            for st in rows {
                if let Some(latency) = &st.latency {
                    let _ = write!(out, "latency_percentiles_usec_{}:", st.full_name());
                    latency.percentiles_line(&percentiles, out);
                    out.push_str("\r\n");
                }
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
        "keyspace" if server.cluster.is_some() => {
            // As a Redis Cluster master reports its own slots: the keys of
            // the shards this node leads.
            out.push_str("# Keyspace\r\n");
            if let Some(node) = &server.cluster {
                let (mut keys, mut expires) = (0, 0);
                for shard in node.led_shards() {
                    if let Some((k, e)) = node.key_counts(shard) {
                        keys += k;
                        expires += e;
                    }
                }
                if keys > 0 {
                    let _ = write!(out, "db0:keys={keys},expires={expires},avg_ttl=0\r\n");
                }
            }
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            let shard = server.local_store.borrow();
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
        "cluster" => cluster_section(s, out),
        "raft" => raft_section(s, out),
        _ => {}
    }
}

/// `# Cluster`, as Redis has it (`cluster_enabled`), plus this node's
/// share of the multi-Raft cluster. Field names are unique across sections
/// because clients (redis-py's `info()`) merge all sections into one map.
fn cluster_section(s: &Session, out: &mut String) {
    out.push_str("# Cluster\r\n");
    let Some(node) = s.server.cluster.as_ref() else {
        out.push_str("cluster_enabled:0\r\n");
        return;
    };
    let info = node.with_view(kvasir_cluster::reply::cluster_info);
    let state = info
        .lines()
        .find_map(|l| l.strip_prefix("cluster_state:"))
        .unwrap_or("fail")
        .trim()
        .to_string();
    let (known_nodes, shards) = node.with_map(|m| (m.nodes.len(), m.shards.len()));
    let (mut led, mut followed, mut leaderless) = (0, 0, 0);
    for g in node.status() {
        if g.id == crate::cluster::META_GROUP {
            continue;
        }
        if g.leader == 0 {
            leaderless += 1;
        }
        if g.role == kvasir_raft::StateRole::Leader {
            led += 1;
        } else {
            followed += 1;
        }
    }
    let peers_connected = node
        .raft
        .config()
        .peers
        .iter()
        .filter(|(id, _)| *id != node.node_id && node.raft.transport().is_connected(*id))
        .count();
    let _ = write!(
        out,
        "cluster_enabled:1\r\ncluster_state:{state}\r\ncluster_node_id:{}\r\ncluster_node_name:{}\r\ncluster_id:{:016x}\r\ncluster_bus_addr:{}\r\ncluster_known_nodes:{known_nodes}\r\ncluster_peers_connected:{peers_connected}\r\ncluster_shards:{shards}\r\ncluster_shards_led:{led}\r\ncluster_shards_followed:{followed}\r\ncluster_shards_without_leader:{leaderless}\r\n",
        node.node_id,
        kvasir_cluster::map::node_name(node.cluster_id, node.node_id),
        node.cluster_id,
        node.cluster_addr,
    );
}

thread_local! {
    /// (when, proposals total, rate) at the last INFO raft sample at least
    /// a second older than the one before.
    static PROPOSAL_RATE: std::cell::Cell<Option<(std::time::Instant, u64, f64)>> =
        const { std::cell::Cell::new(None) };
}

/// Proposals per second: averaged since the previous sample taken at least
/// a second earlier (since start for the first INFO raft).
fn proposals_per_sec(started: std::time::Instant, total: u64) -> f64 {
    let now = std::time::Instant::now();
    PROPOSAL_RATE.with(|cell| {
        let (since, base, last_rate) = cell.get().unwrap_or((started, 0, 0.0));
        let elapsed = now.duration_since(since).as_secs_f64();
        if elapsed < 1.0 {
            return last_rate;
        }
        let rate = total.saturating_sub(base) as f64 / elapsed;
        cell.set(Some((now, total, rate)));
        rate
    })
}

/// `# Raft`: this node's Raft groups (group 0 holds the cluster map, the
/// others are shards), totals and one line per group. Empty in standalone
/// mode.
fn raft_section(s: &Session, out: &mut String) {
    let Some(node) = s.server.cluster.as_ref() else {
        return;
    };
    out.push_str("# Raft\r\n");
    let groups = node.status();
    let (mut led, mut following, mut candidates) = (0, 0, 0);
    let (mut commit_sum, mut applied_sum) = (0u64, 0u64);
    let mut totals = kvasir_raft::node::GroupStats::default();
    for g in &groups {
        commit_sum += g.commit;
        applied_sum += g.applied;
        totals.proposals += g.stats.proposals;
        totals.entries += g.stats.entries;
        totals.snapshots_taken += g.stats.snapshots_taken;
        totals.snapshots_installed += g.stats.snapshots_installed;
        totals.reads += g.stats.reads;
        if g.id == crate::cluster::META_GROUP {
            continue;
        }
        match g.role {
            kvasir_raft::StateRole::Leader => led += 1,
            kvasir_raft::StateRole::Follower => following += 1,
            _ => candidates += 1,
        }
    }
    let cfg = node.raft.config();
    let log_size = node.raft.log_size() as u64;
    let (fsyncs, log_writes) = node.log_counters();
    let _ = write!(
        out,
        "raft_node_id:{}\r\nraft_wal:{}\r\nraft_read_mode:{}\r\nraft_groups:{}\r\nshards_led:{led}\r\nshards_following:{following}\r\nshards_candidate:{candidates}\r\ncommit_index_sum:{commit_sum}\r\napplied_index_sum:{applied_sum}\r\nraft_log_size_bytes:{log_size}\r\nraft_log_size_human:{}\r\nsnapshots_taken:{}\r\nsnapshots_installed:{}\r\nproposals_total:{}\r\nproposals_per_sec:{:.2}\r\nentries_proposed:{}\r\nlinearizable_reads:{}\r\nfsyncs:{}\r\nlog_writes:{}\r\nbus_links_read_by_shard_threads:{}\r\nio_thread_routed_commands:{}\r\n",
        node.node_id,
        format!("{:?}", cfg.wal).to_ascii_lowercase(),
        format!("{:?}", cfg.read_mode).to_ascii_lowercase(),
        groups.len(),
        human(log_size),
        totals.snapshots_taken,
        totals.snapshots_installed,
        totals.proposals,
        proposals_per_sec(s.server.started, totals.proposals),
        totals.entries,
        totals.reads,
        fsyncs,
        log_writes,
        (1..=node.lane_count())
            .map(|lane| node.raft.transport().links_taken_over(lane))
            .sum::<u64>(),
        node.direct().map_or(0, |d| d.routed()),
    );
    let layout = node.layout();
    let meta_preferred = cfg.peers.iter().map(|(id, _)| *id).min().unwrap_or(0);
    for g in &groups {
        let role = format!("{:?}", g.role).to_ascii_lowercase();
        let voters: Vec<String> = g.voters.iter().map(|v| v.to_string()).collect();
        // The node leadership returns to when it is caught up.
        let (slots, preferred) = match layout.shard(g.id) {
            Some(shard) if g.id != crate::cluster::META_GROUP => (
                format!("{}-{}", shard.slots.0, shard.slots.1),
                shard.preferred_leader().unwrap_or(0),
            ),
            _ => ("meta".to_string(), meta_preferred),
        };
        let _ = write!(
            out,
            "group{}:role={role},term={},leader={},preferred={preferred},commit={},applied={},first={},last={},snapshot={},voters={},slots={slots},proposals={},snapshots_taken={},snapshots_installed={},waiting_entries={},reads_in_flight={}\r\n",
            g.id,
            g.term,
            g.leader,
            g.commit,
            g.applied,
            g.first_index,
            g.last_index,
            g.snapshot_index,
            voters.join("/"),
            g.stats.proposals,
            g.stats.snapshots_taken,
            g.stats.snapshots_installed,
            g.waiting_entries,
            g.reads_in_flight,
        );
    }
}

/// `uname -s -r -m`, as Redis's INFO `os` line gives it.
fn os_name() -> String {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let kernel = read("/proc/sys/kernel/ostype");
    let kernel = if kernel.is_empty() {
        "Linux".to_string()
    } else {
        kernel
    };
    format!(
        "{kernel} {} {}",
        read("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH
    )
}

/// A fresh run id: 40 random hex characters, as redis-server makes one at
/// each start.
pub fn new_run_id() -> String {
    let mut bytes = [0u8; 20];
    if getrandom::fill(&mut bytes).is_err() {
        // No entropy source: the time and pid still tell runs apart.
        let t = crate::local_store::unix_ms() as u128 * 1_000_003 + std::process::id() as u128;
        bytes[..16].copy_from_slice(&t.to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `MemTotal` of /proc/meminfo in bytes (INFO total_system_memory); 0 if
/// unknown.
fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
