//! The main thread's side of the requests I/O threads route themselves
//! (`cluster::direct`): whether the node lets them (kept after every batch
//! a session answered and on a timer), and the merge of their stats into
//! the server's.

use crate::listener::{CmdStat, Server};
use std::time::Duration;

/// Opens or closes the direct routes from the node's state: nothing a
/// session would do for a plain keyed command (hooks of watchers,
/// trackers and blocked clients, keyspace events, MONITOR, CLIENT PAUSE,
/// ACL checks, the per-command checks of maxmemory, the latency
/// monitor, slowlog thresholds under 1 ms, renamed commands, output
/// limits) may be wanted while they are open.
pub fn refresh(server: &Server) {
    let Some(node) = &server.cluster else {
        return;
    };
    let Some(routes) = node.direct() else {
        return;
    };
    node.hooks.refresh_keys_wanted();
    let hooks_idle = !node
        .hooks
        .keys_wanted
        .load(std::sync::atomic::Ordering::Relaxed)
        && node.hooks.notify.load(std::sync::atomic::Ordering::Relaxed) == 0;
    let settings_plain = {
        let c = server.config.borrow();
        let normal = server.clients.borrow().output_limits.get().normal;
        c.maxmemory == 0
            && c.latency_monitor_threshold == 0
            && (c.slowlog_log_slower_than < 0 || c.slowlog_log_slower_than >= 1000)
            && c.renames.is_empty()
            && normal.hard == 0
            && normal.soft == 0
    };
    let open = hooks_idle
        && settings_plain
        && server.monitors.borrow().is_empty()
        && !server.client_pause.is_set()
        && !server.loading.active()
        && server.acl.borrow().all_unrestricted();
    routes.set_open(open, server.stats.borrow().latency_tracking);
}

/// Moves the direct calls' counts into the server's stats (before they
/// are read: INFO, LATENCY HISTOGRAM, CONFIG RESETSTAT).
pub fn merge_stats(server: &Server) {
    let Some(routes) = server.cluster.as_ref().and_then(|n| n.direct()) else {
        return;
    };
    let tally = routes.take_tally();
    if tally.processed == 0 && tally.net_input_bytes == 0 && tally.net_output_bytes == 0 {
        return;
    }
    let mut stats = server.stats.borrow_mut();
    let tracking = stats.latency_tracking;
    for (key, (spec, direct)) in tally.commands {
        let entry = stats
            .commands
            .entry(key)
            .or_insert_with(|| CmdStat::named(spec.name, ""));
        entry.calls += direct.calls;
        entry.usec += direct.usec;
        entry.failed += direct.failed;
        if tracking && !direct.samples.is_empty() {
            if entry.latency.is_none() {
                entry.latency = crate::command_latency::CommandLatency::new();
            }
            if let Some(latency) = entry.latency.as_mut() {
                for micros in direct.samples {
                    latency.record(micros as u64);
                }
            }
        }
    }
    stats.total_commands_processed += tally.processed;
    stats.total_error_replies += tally.error_replies;
    for (code, n) in tally.errors {
        *stats.errors.entry(code).or_insert(0) += n;
    }
    stats.net_input_bytes += tally.net_input_bytes;
    stats.net_output_bytes += tally.net_output_bytes;
    drop(stats);
    server.dirty.set(server.dirty.get() + tally.writes);
}

/// Keeps the gate and the stats current between commands: a pause that
/// ends, a watcher that leaves, the ops-per-second samples.
pub async fn cron(server: std::rc::Rc<Server>) {
    loop {
        tokio::time::sleep(crate::cluster::direct::MERGE_EVERY.min(Duration::from_millis(20)))
            .await;
        refresh(&server);
        merge_stats(&server);
    }
}
