//! The latency monitor (LATENCY LATEST / HISTORY / GRAPH / RESET / DOCTOR), as
//! Redis 7.0 keeps it: with `latency-monitor-threshold` N > 0 (ms), every
//! command that took N ms or more is a sample of the event `command`, or
//! of `fast-command` for commands flagged fast. Each event keeps its last
//! 160 samples, one per second (the worst of that second), and its all-time
//! maximum. The active expiry cycle is the event `expire-cycle`
//! (`router::expire_loop`). Redis's other events (fork, AOF, eviction...)
//! have no counterpart here: Kvasir does not fork, and its log writes and
//! evictions are not sampled.

use bytes::Bytes;
use kvasir_resp::Reply;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;

/// Samples an event keeps (Redis's LATENCY_TS_LEN).
const HISTORY_LEN: usize = 160;

struct EventHistory {
    /// (unix seconds, worst latency in that second, ms), oldest first.
    samples: VecDeque<(i64, u64)>,
    max: u64,
}

/// Every event's history.
#[derive(Default)]
pub struct LatencyMonitor {
    events: BTreeMap<&'static str, EventHistory>,
}

impl LatencyMonitor {
    /// Records a latency of `ms` for `event` at `now` (unix seconds).
    pub fn add(&mut self, event: &'static str, ms: u64, now: i64) {
        let h = self.events.entry(event).or_insert_with(|| EventHistory {
            samples: VecDeque::new(),
            max: 0,
        });
        h.max = h.max.max(ms);
        match h.samples.back_mut() {
            Some((t, worst)) if *t == now => *worst = (*worst).max(ms),
            _ => {
                if h.samples.len() == HISTORY_LEN {
                    h.samples.pop_front();
                }
                h.samples.push_back((now, ms));
            }
        }
    }

    /// LATENCY LATEST: [event, time of the latest sample, its latency, the
    /// all-time maximum] per event.
    pub fn latest(&self) -> Reply {
        Reply::Array(
            self.events
                .iter()
                .filter_map(|(name, h)| {
                    let (t, ms) = *h.samples.back()?;
                    Some(Reply::Array(vec![
                        Reply::bulk_str(name),
                        Reply::Int(t),
                        Reply::Int(ms as i64),
                        Reply::Int(h.max as i64),
                    ]))
                })
                .collect(),
        )
    }

    /// The event named `event`, with its history.
    fn find(&self, event: &[u8]) -> Option<(&'static str, &EventHistory)> {
        self.events
            .iter()
            .find(|(name, _)| name.as_bytes() == event)
            .map(|(name, h)| (*name, h))
    }

    /// LATENCY HISTORY event: [time, latency] pairs, oldest first.
    pub fn history(&self, event: &[u8]) -> Reply {
        let samples = self.find(event).map(|(_, h)| &h.samples);
        Reply::Array(
            samples
                .into_iter()
                .flatten()
                .map(|&(t, ms)| Reply::Array(vec![Reply::Int(t), Reply::Int(ms as i64)]))
                .collect(),
        )
    }

    /// LATENCY GRAPH event: Redis's ASCII sparkline of the event's samples
    /// (80 columns, 4 rows, each column labelled vertically with the age of
    /// its sample), or None when the event has no samples. `now` is the
    /// unix time in seconds.
    pub fn graph(&self, event: &[u8], now: i64) -> Option<String> {
        let (name, h) = self.find(event)?;
        let samples: Vec<(u64, String)> = h
            .samples
            .iter()
            .map(|&(t, ms)| (ms, age_label(now - t)))
            .collect();
        let high = samples.iter().map(|s| s.0).max().unwrap_or(0);
        let low = samples.iter().map(|s| s.0).min().unwrap_or(0);
        let mut out = format!(
            "{name} - high {high} ms, low {low} ms (all time high {} ms)\n",
            h.max
        );
        out.push_str(&"-".repeat(GRAPH_COLUMNS));
        out.push('\n');
        for (i, chunk) in samples.chunks(GRAPH_COLUMNS).enumerate() {
            if i > 0 {
                out.push('\n');
            }
            render_sparkline(&mut out, chunk, low, high);
        }
        Some(out)
    }

    /// LATENCY RESET [event ...]: how many events were reset.
    pub fn reset(&mut self, events: &[Bytes]) -> Reply {
        if events.is_empty() {
            let n = self.events.len();
            self.events.clear();
            return Reply::Int(n as i64);
        }
        let mut n = 0;
        for e in events {
            if let Some((name, _)) = self.find(e) {
                self.events.remove(name);
                n += 1;
            }
        }
        Reply::Int(n)
    }

    /// LATENCY DOCTOR: Redis's report, for the events Kvasir samples.
    /// `now` is the unix time in seconds.
    pub fn doctor(&self, threshold_ms: u64, now: i64) -> String {
        if threshold_ms == 0 && self.events.is_empty() {
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this \
                    Kvasir instance. You may use \"CONFIG SET latency-monitor-threshold \
                    <milliseconds>.\" in order to enable it.\n"
                .to_string();
        }
        if self.events.is_empty() {
            return "Dave, no latency spike was observed during the lifetime of this Kvasir \
                    instance, not in the slightest bit. I honestly think you ought to sleep \
                    tonight.\n"
                .to_string();
        }
        let mut out = String::from(
            "Dave, I have observed latency spikes in this Kvasir instance. You don't mind \
             talking about it, do you Dave?\n\n",
        );
        for (i, (name, h)) in self.events.iter().enumerate() {
            let n = h.samples.len() as u64;
            let sum: u64 = h.samples.iter().map(|&(_, ms)| ms).sum();
            let avg = sum / n.max(1);
            let dev = h
                .samples
                .iter()
                .map(|&(_, ms)| ms.abs_diff(avg))
                .sum::<u64>()
                / n.max(1);
            // Redis's: seconds since the oldest sample (at least 1) per
            // sample.
            let oldest = h.samples.front().map_or(now, |&(t, _)| t);
            let period = (now - oldest).max(1) as f64 / n.max(1) as f64;
            let _ = writeln!(
                out,
                "{}. {name}: {n} latency spikes (average {avg}ms, mean deviation {dev}ms, \
                 period {period:.2} sec). Worst all time event {}ms.",
                i + 1,
                h.max
            );
        }
        out.push_str(
            "\nI have a few advices for you:\n\n- Check your system for slow commands: \
             SLOWLOG GET shows the commands that took longest, and CONFIG SET \
             slowlog-log-slower-than <microseconds> sets what counts as slow. Commands \
             over large values (LRANGE, SMEMBERS, HGETALL, KEYS of many elements) are the \
             usual cause.\n",
        );
        out
    }
}

/// Columns of a LATENCY GRAPH before it wraps (Redis's LATENCY_GRAPH_COLS).
const GRAPH_COLUMNS: usize = 80;
/// Rows of bars of a LATENCY GRAPH.
const GRAPH_ROWS: usize = 4;
/// The bar characters within one row, low to high; a column higher than
/// the row is `|` (Redis's sparkline with SPARKLINE_FILL).
const BAR_CHARS: &[u8] = b"_o#";

/// How long ago a sample was, as Redis labels a graph's columns.
fn age_label(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// Appends the rows of one graph line of at most GRAPH_COLUMNS samples
/// (latency, label): GRAPH_ROWS rows of bars scaled from `low` to `high`,
/// an empty row, then the labels written downwards one character per row.
fn render_sparkline(out: &mut String, samples: &[(u64, String)], low: u64, high: u64) {
    let levels = (BAR_CHARS.len() * GRAPH_ROWS) as u64;
    let span = (high - low).max(1);
    let level = |ms: u64| (((ms - low) * levels) / span).min(levels - 1) as usize;
    for row in 0..GRAPH_ROWS {
        // The level at which this row's bar characters start.
        let base = (GRAPH_ROWS - row - 1) * BAR_CHARS.len();
        out.extend(
            samples
                .iter()
                .map(|(ms, _)| match level(*ms).checked_sub(base) {
                    Some(i) if i < BAR_CHARS.len() => BAR_CHARS[i] as char,
                    Some(_) => '|',
                    None => ' ',
                }),
        );
        out.push('\n');
    }
    out.push_str(&" ".repeat(samples.len()));
    out.push('\n');
    let longest = samples.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    for i in 0..longest {
        out.extend(
            samples
                .iter()
                .map(|(_, l)| l.as_bytes().get(i).map_or(' ', |&c| c as char)),
        );
        out.push('\n');
    }
}

/// The event a command's latency counts in.
pub fn event_of(fast: bool) -> &'static str {
    if fast {
        "fast-command"
    } else {
        "command"
    }
}

pub const HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_keeps_the_worst_and_the_last_160() {
        let mut m = LatencyMonitor::default();
        m.add("command", 5, 100);
        m.add("command", 9, 100);
        m.add("command", 3, 100);
        m.add("command", 4, 101);
        assert_eq!(
            m.history(b"command"),
            Reply::Array(vec![
                Reply::Array(vec![Reply::Int(100), Reply::Int(9)]),
                Reply::Array(vec![Reply::Int(101), Reply::Int(4)]),
            ])
        );
        assert_eq!(
            m.latest(),
            Reply::Array(vec![Reply::Array(vec![
                Reply::bulk_str("command"),
                Reply::Int(101),
                Reply::Int(4),
                Reply::Int(9),
            ])])
        );
        for t in 0..200 {
            m.add("fast-command", 1, 1000 + t);
        }
        let Reply::Array(h) = m.history(b"fast-command") else {
            panic!("not an array");
        };
        assert_eq!(h.len(), HISTORY_LEN);
        assert_eq!(
            h[0],
            Reply::Array(vec![Reply::Int(1040), Reply::Int(1)]),
            "the oldest kept"
        );
        assert_eq!(m.reset(&[Bytes::from_static(b"command")]), Reply::Int(1));
        assert_eq!(m.history(b"command"), Reply::Array(vec![]));
        assert_eq!(m.reset(&[]), Reply::Int(1));
        assert_eq!(m.latest(), Reply::Array(vec![]));
    }

    #[test]
    fn the_graph_draws_redis_sparkline_with_vertical_age_labels() {
        let mut m = LatencyMonitor::default();
        m.add("command", 10, 100);
        m.add("command", 30, 101);
        m.add("command", 20, 170);
        // Twelve levels from 10 to 30 ms: 10 is level 0 (`_` on the bottom
        // row), 30 the top level (`#` over `|`), 20 level 6 (`_` on the
        // second row); ages 100 s, 99 s and 30 s read downwards.
        let expected = format!(
            "command - high 30 ms, low 10 ms (all time high 30 ms)\n{}\n \
             # \n |_\n ||\n_||\n   \n113\nmm0\n  s\n",
            "-".repeat(80)
        );
        assert_eq!(m.graph(b"command", 200).as_deref(), Some(&*expected));
        assert_eq!(m.graph(b"fast-command", 200), None);
        // More than 80 samples wrap into a second graph line.
        for t in 0..85 {
            m.add("fast-command", 5, 1000 + t);
        }
        let graph = m.graph(b"fast-command", 1084).unwrap_or_default();
        let lines: Vec<&str> = graph.lines().collect();
        assert_eq!(lines[2], " ".repeat(80));
        assert_eq!(lines[5], "_".repeat(80));
        assert_eq!(lines[6], " ".repeat(80));
        assert_eq!(lines[10], "");
        assert_eq!(lines[14], "_".repeat(5));
        assert_eq!(lines[16..], ["43210", "sssss"]);
    }
}
