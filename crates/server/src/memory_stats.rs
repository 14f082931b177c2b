//! MEMORY STATS, DOCTOR, MALLOC-STATS and PURGE, from jemalloc's counters
//! and the process's resident size, with Redis 7.0's field names and
//! ratios. What Kvasir does not have reads 0 (replication backlog, AOF
//! buffer, replica buffers); client buffers are estimated from the query
//! buffers only; the Lua and function caches are not measured (0).

use crate::listener::Server;
use kvasir_resp::Reply;

/// jemalloc's counters, refreshed.
struct Allocator {
    allocated: u64,
    active: u64,
    resident: u64,
}

fn allocator() -> Allocator {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    Allocator {
        allocated: stats::allocated::read().unwrap_or(0) as u64,
        active: stats::active::read().unwrap_or(0) as u64,
        resident: stats::resident::read().unwrap_or(0) as u64,
    }
}

/// Everything MEMORY STATS and DOCTOR report.
struct MemoryReport {
    peak: u64,
    total: u64,
    startup: u64,
    clients_normal: u64,
    keys: u64,
    rss: u64,
    alloc: Allocator,
}

impl MemoryReport {
    fn take(server: &Server) -> MemoryReport {
        let alloc = allocator();
        let total = alloc.allocated;
        let peak = server.peak_memory.get().max(total);
        server.peak_memory.set(peak);
        let clients_normal = server
            .clients
            .borrow()
            .iter()
            .map(|c| c.query_buffer() as u64)
            .sum();
        MemoryReport {
            peak,
            total,
            startup: server.startup_memory,
            clients_normal,
            keys: key_count(server),
            rss: crate::info::rss_bytes(),
            alloc,
        }
    }

    fn overhead(&self) -> u64 {
        self.startup + self.clients_normal
    }

    /// Allocated beyond what the server had at startup.
    fn net(&self) -> u64 {
        self.total.saturating_sub(self.startup)
    }
}

/// Keys this node holds (in cluster mode, as INFO keyspace counts them: the
/// shards it leads).
fn key_count(server: &Server) -> u64 {
    match &server.cluster {
        Some(node) => node
            .led_shards()
            .into_iter()
            .filter_map(|shard| node.key_counts(shard))
            .map(|(keys, _)| keys as u64)
            .sum(),
        None => {
            let shard = server.local_store.borrow();
            let store = shard.store();
            (0..store.databases())
                .map(|i| store.db(i).len() as u64)
                .sum()
        }
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn signed(a: u64, b: u64) -> i64 {
    a as i64 - b as i64
}

/// MEMORY STATS: a map in RESP3, name/value pairs in RESP2.
pub fn stats(server: &Server) -> Reply {
    let r = MemoryReport::take(server);
    let overhead = r.overhead();
    let dataset = r.total.saturating_sub(overhead);
    let int = |name: &'static str, v: i64| (Reply::bulk_str(name), Reply::Int(v));
    let float = |name: &'static str, v: f64| (Reply::bulk_str(name), Reply::Double(v));
    let pairs = vec![
        int("peak.allocated", r.peak as i64),
        int("total.allocated", r.total as i64),
        int("startup.allocated", r.startup as i64),
        int("replication.backlog", 0),
        int("clients.slaves", 0),
        int("clients.normal", r.clients_normal as i64),
        int("cluster.links", 0),
        int("aof.buffer", 0),
        int("lua.caches", 0),
        int("functions.caches", 0),
        int("overhead.total", overhead as i64),
        int("keys.count", r.keys as i64),
        int(
            "keys.bytes-per-key",
            r.net().checked_div(r.keys).unwrap_or(0) as i64,
        ),
        int("dataset.bytes", dataset as i64),
        float("dataset.percentage", ratio(dataset, r.net()) * 100.0),
        float("peak.percentage", ratio(r.total, r.peak) * 100.0),
        int("allocator.allocated", r.alloc.allocated as i64),
        int("allocator.active", r.alloc.active as i64),
        int("allocator.resident", r.alloc.resident as i64),
        float(
            "allocator-fragmentation.ratio",
            ratio(r.alloc.active, r.alloc.allocated),
        ),
        int(
            "allocator-fragmentation.bytes",
            signed(r.alloc.active, r.alloc.allocated),
        ),
        float(
            "allocator.rss-ratio",
            ratio(r.alloc.resident, r.alloc.active),
        ),
        int(
            "allocator.rss-bytes",
            signed(r.alloc.resident, r.alloc.active),
        ),
        float("rss-overhead.ratio", ratio(r.rss, r.alloc.resident)),
        int("rss-overhead.bytes", signed(r.rss, r.alloc.resident)),
        float("fragmentation", ratio(r.rss, r.total)),
        int("fragmentation.bytes", signed(r.rss, r.total)),
    ];
    Reply::Map(pairs)
}

/// MEMORY DOCTOR: Redis's report for what Kvasir measures (an almost
/// empty instance, a past peak, fragmentation).
pub fn doctor(server: &Server) -> String {
    let r = MemoryReport::take(server);
    if r.total < 5 * 1024 * 1024 {
        return "Hi Sam, this instance is empty or is using very little memory, my issues \
                detector can't be used in these conditions. Please, leave for your mission on \
                Earth and fill it with some data. The new Sam and I will be back to our \
                programming as soon as I finished rebooting.\n"
            .to_string();
    }
    let mut issues = Vec::new();
    if ratio(r.peak, r.total) > 1.5 {
        issues.push(
            " * Peak memory: In the past this instance used more than 150% the memory that is \
             currently using. The allocator is normally not able to release memory after a \
             peak, so you can expect to see a big fragmentation ratio, however this is \
             actually harmless and is only due to the memory peak, and if the instance \
             Resident Set Size (RSS) is currently bigger than expected, the memory will be \
             used as soon as you fill the instance with more data. If the memory peak was \
             only occasional and you want to try to reclaim memory, please try the MEMORY \
             PURGE command, otherwise the only other option is to shutdown and restart the \
             instance.\n\n",
        );
    }
    if ratio(r.alloc.active, r.alloc.allocated) > 1.1
        && signed(r.alloc.active, r.alloc.allocated) > 10 << 20
    {
        issues.push(
            " * High allocator fragmentation: This instance has an allocator external \
             fragmentation greater than 1.1. This problem is usually due either to a large \
             peak memory (check if there is a peak memory entry above in the report) or may \
             result from a workload that causes the allocator to fragment memory a lot. You \
             can try MEMORY PURGE.\n\n",
        );
    }
    if ratio(r.rss, r.alloc.resident) > 1.1 && signed(r.rss, r.alloc.resident) > 10 << 20 {
        issues.push(
            " * High process RSS overhead: This instance has non-allocator RSS memory overhead \
             greater than 1.1 (this reports the memory the process holds beyond what the \
             allocator keeps resident).\n\n",
        );
    }
    if issues.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for \
                what occurs on this base.\n"
            .to_string();
    }
    let mut out =
        String::from("Sam, I detected a few issues in this instance memory implants:\n\n");
    for i in issues {
        out.push_str(i);
    }
    out.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    out
}

/// MEMORY MALLOC-STATS: jemalloc's own statistics text.
pub fn malloc_stats() -> String {
    let mut text = Vec::new();
    let options = tikv_jemalloc_ctl::stats_print::Options::default();
    match tikv_jemalloc_ctl::stats_print::stats_print(&mut text, options) {
        Ok(()) => String::from_utf8_lossy(&text).into_owned(),
        Err(e) => format!("Stats not supported for the current allocator ({e})"),
    }
}

/// MEMORY PURGE: asks jemalloc to return every arena's dirty pages to the
/// system.
pub fn purge() {
    // SAFETY: "arena.<i>.purge" takes and returns nothing (null pointers,
    // length 0); MALLCTL_ARENAS_ALL (4096) names every arena.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

/// `jemalloc-bg-thread`: jemalloc's background threads return freed
/// memory (idle connections' buffers, deleted keys) to the system over
/// time, as redis-server enables them by default; without them pages are
/// purged only when the allocator is busy, so an idle server's RSS stays
/// at its peak. Logged, not fatal, where jemalloc cannot start them.
pub fn set_background_purge(on: bool) {
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(on) {
        tracing::warn!("jemalloc-bg-thread {}: {e}", if on { "yes" } else { "no" });
    }
}
