//! Reports in the forms of the seed benchmark reports:
//! - the YugabyteDB table (per-second samples summarised: mean, min, max,
//!   std.dev, median, 1%, 5%, 10%, 90%, 95%, 99%) for throughput, latency
//!   and CPU;
//! - the YCSB table (Workload | Throughput | Op Type | Avg | 99th%);
//! - RheaKV's (Dropwizard) timer blocks;
//! - Garnet Resp.benchmark's load and per-thread-count lines and its online
//!   latency lines;
//!
//! plus exact HDR percentiles and the JSON document with everything.

use crate::metrics::{Errors, Recorded, Sample};
use crate::stats::{fmt_num, Latency, Summary};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write;

/// The preload of a run (MSET batches).
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    pub command: String,
    pub ops: u64,
    pub threads: usize,
    pub seconds: f64,
    pub ops_per_sec: f64,
}

/// One row of the per-second summary table.
#[derive(Clone, Debug, Serialize)]
pub struct MetricRow {
    pub metric: String,
    #[serde(flatten)]
    pub summary: Summary,
}

/// One point of the throughput / p99 timeline.
#[derive(Clone, Debug, Serialize)]
pub struct TimePoint {
    pub t: f64,
    pub ops_per_sec: f64,
    pub p99_us: f64,
}

/// Everything about one measured run.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub name: String,
    pub duration_s: f64,
    pub ops_per_sec: f64,
    pub ops_total: u64,
    /// Operations per type.
    #[serde(serialize_with = "as_map")]
    pub ops: Vec<(String, u64)>,
    pub errors: Errors,
    /// Exact latency percentiles per operation type and for all ("ALL").
    #[serde(serialize_with = "as_map")]
    pub latency_us: Vec<(String, Latency)>,
    /// Per-second samples summarised (the seed-000 table).
    pub per_second: Vec<MetricRow>,
    pub timeline: Vec<TimePoint>,
    /// Run-specific parameters (thread count, workload letter...).
    pub params: serde_json::Value,
    pub first_error: Option<String>,
    #[serde(skip)]
    pub samples: Vec<Sample>,
}

/// Serialises name/value pairs as a JSON object (in their order).
fn as_map<S: serde::Serializer, V: Serialize>(v: &[(String, V)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(v.iter().map(|(k, v)| (k, v)))
}

fn title_case(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

impl RunReport {
    /// Builds the report of a run from what its sampler recorded.
    pub fn new(name: impl Into<String>, r: &Recorded, params: serde_json::Value) -> RunReport {
        let secs = r.elapsed.as_secs_f64();
        let ops_total: u64 = r.counts.iter().sum();
        let mut per_second = Vec::new();
        for (i, name) in r.names.iter().enumerate() {
            let label = title_case(name);
            let rates: Vec<f64> = r.samples.iter().map(|s| s.ops[i].rate).collect();
            let lat: Vec<f64> = r
                .samples
                .iter()
                .filter(|s| s.ops[i].count > 0)
                .map(|s| s.ops[i].mean_ms)
                .collect();
            per_second.push(MetricRow {
                metric: format!("{label} throughput, ops/sec"),
                summary: Summary::of(&rates),
            });
            per_second.push(MetricRow {
                metric: format!("{label} latency, ms/op"),
                summary: Summary::of(&lat),
            });
        }
        let cpu = |f: &dyn Fn(&Sample) -> Option<f64>| -> Option<Summary> {
            let v: Vec<f64> = r.samples.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| Summary::of(&v))
        };
        let rows: [(&str, Option<Summary>); 4] = [
            (
                "Load tester CPU, user, %",
                cpu(&|s| s.cpu_self.map(|c| c.user)),
            ),
            (
                "Load tester CPU, system, %",
                cpu(&|s| s.cpu_self.map(|c| c.system)),
            ),
            (
                "Server CPU, user, %",
                cpu(&|s| s.cpu_server.map(|c| c.user)),
            ),
            (
                "Server CPU, system, %",
                cpu(&|s| s.cpu_server.map(|c| c.system)),
            ),
        ];
        for (metric, summary) in rows {
            if let Some(summary) = summary {
                per_second.push(MetricRow {
                    metric: metric.to_string(),
                    summary,
                });
            }
        }
        let mut latency_us: Vec<(String, Latency)> = r
            .names
            .iter()
            .zip(&r.totals)
            .map(|(n, h)| (n.clone(), Latency::of(h)))
            .collect();
        if r.names.len() > 1 {
            latency_us.push(("ALL".to_string(), Latency::of(&r.combined)));
        }
        RunReport {
            name: name.into(),
            duration_s: secs,
            ops_per_sec: if secs > 0.0 {
                ops_total as f64 / secs
            } else {
                0.0
            },
            ops_total,
            ops: r
                .names
                .iter()
                .cloned()
                .zip(r.counts.iter().copied())
                .collect(),
            errors: r.errors,
            latency_us,
            per_second,
            timeline: r
                .samples
                .iter()
                .map(|s| TimePoint {
                    t: s.t,
                    ops_per_sec: s.total_rate,
                    p99_us: s.total_p99_us,
                })
                .collect(),
            params,
            first_error: r.first_error.clone(),
            samples: r.samples.clone(),
        }
    }

    /// Exact latency of one operation type.
    pub fn latency(&self, op: &str) -> Option<&Latency> {
        self.latency_us
            .iter()
            .find(|(n, _)| n == op)
            .map(|(_, l)| l)
    }

    /// Operation count of one type.
    pub fn count(&self, op: &str) -> u64 {
        self.ops
            .iter()
            .find(|(n, _)| n == op)
            .map(|(_, c)| *c)
            .unwrap_or(0)
    }
}

const METRIC_W: usize = 30;
const COL_W: usize = 9;
const COLUMNS: [&str; 11] = [
    "mean", "min", "max", "std.dev", "median", "1%", "5%", "10%", "90%", "95%", "99%",
];

/// The YugabyteDB-style table of per-second samples.
pub fn seed_table(rows: &[MetricRow]) -> String {
    let mut rule = format!("+{}+", "-".repeat(METRIC_W + 2));
    for _ in COLUMNS {
        rule.push_str(&"-".repeat(COL_W + 2));
        rule.push('+');
    }
    let mut out = String::new();
    out.push_str(&rule);
    out.push('\n');
    let _ = write!(out, "| {:<METRIC_W$} |", "Metric");
    for c in COLUMNS {
        let _ = write!(out, " {c:<COL_W$} |");
    }
    out.push('\n');
    for row in rows {
        let _ = write!(out, "| {:<METRIC_W$} |", row.metric);
        for v in row.summary.columns() {
            let _ = write!(out, " {:<COL_W$} |", fmt_num(v));
        }
        out.push('\n');
    }
    out.push_str(&rule);
    out.push('\n');
    out
}

/// Exact HDR percentiles, one line per operation type.
pub fn latency_table(run: &RunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| {:<18} | {:>10} | {:>12} | {:>9} | {:>9} | {:>9} | {:>9} | {:>9} | {:>9} |",
        "Op (latency in us)", "ops", "ops/sec", "mean", "p50", "p95", "p99", "p99.9", "max"
    );
    let _ = writeln!(
        out,
        "|{}|{}|{}|{}|{}|{}|{}|{}|{}|",
        "-".repeat(20),
        "-".repeat(12),
        "-".repeat(14),
        "-".repeat(11),
        "-".repeat(11),
        "-".repeat(11),
        "-".repeat(11),
        "-".repeat(11),
        "-".repeat(11)
    );
    for (name, l) in run.latency_us.iter().filter(|(_, l)| l.count > 0) {
        let rate = if run.duration_s > 0.0 {
            l.count as f64 / run.duration_s
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "| {:<18} | {:>10} | {:>12.2} | {:>9.1} | {:>9.1} | {:>9.1} | {:>9.1} | {:>9.1} | {:>9.1} |",
            name, l.count, rate, l.mean_us, l.p50_us, l.p95_us, l.p99_us, l.p999_us, l.max_us
        );
    }
    out
}

/// One workload's lines of the YCSB table: name, throughput, then one row
/// per operation type (average and 99th percentile in microseconds).
pub struct YcsbRow {
    pub workload: String,
    pub throughput: f64,
    pub ops: Vec<(String, f64, f64)>,
}

/// The YCSB run table of the seed.
pub fn ycsb_table(rows: &[YcsbRow]) -> String {
    let widths = [12usize, 20, 18, 18, 18];
    let rule = {
        let mut s = String::from("+");
        for w in widths {
            s.push_str(&"-".repeat(w + 2));
            s.push('+');
        }
        s
    };
    let line = |cells: [&str; 5]| {
        let mut s = String::from("|");
        for (c, w) in cells.iter().zip(widths) {
            let _ = write!(s, " {c:<w$} |");
        }
        s
    };
    let mut out = String::new();
    let _ = writeln!(out, "{rule}");
    let _ = writeln!(
        out,
        "{}",
        line([
            "Workload",
            "Throughput (ops/sec)",
            "Op Type",
            "Avg Latency (us)",
            "99th% Latency (us)"
        ])
    );
    for row in rows {
        for (i, (op, avg, p99)) in row.ops.iter().enumerate() {
            let (w, t) = if i == 0 {
                (row.workload.clone(), format!("{:.2}", row.throughput))
            } else {
                (String::new(), String::new())
            };
            let avg = format!("{avg:.2}");
            let p99 = format!("{}", p99.round() as u64);
            let _ = writeln!(out, "{}", line([&w, &t, op, &avg, &p99]));
        }
        if row.ops.is_empty() {
            let _ = writeln!(
                out,
                "{}",
                line([&row.workload, &format!("{:.2}", row.throughput), "", "", ""])
            );
        }
        let _ = writeln!(out, "{}", line(["", "", "", "", ""]));
    }
    let _ = writeln!(out, "{rule}");
    out
}

/// Dropwizard's exponentially weighted moving average over 5 s ticks.
fn ewma_rate(samples: &[Sample], op: Option<usize>, minutes: f64) -> f64 {
    let alpha = 1.0 - (-5.0 / 60.0 / minutes).exp();
    let mut rate: Option<f64> = None;
    let mut acc = 0.0;
    let mut acc_t = 0.0;
    for s in samples {
        acc += match op {
            Some(i) => s.ops[i].count as f64,
            None => s.ops.iter().map(|o| o.count as f64).sum(),
        };
        acc_t += s.dt;
        if acc_t >= 5.0 - 1e-6 {
            let instant = acc / acc_t;
            rate = Some(match rate {
                None => instant,
                Some(r) => r + alpha * (instant - r),
            });
            acc = 0.0;
            acc_t = 0.0;
        }
    }
    rate.unwrap_or(0.0)
}

/// A RheaKV-style (Dropwizard ConsoleReporter) timer block.
pub fn timer_block(
    name: &str,
    h: &Histogram<u64>,
    samples: &[Sample],
    op: Option<usize>,
    secs: f64,
) -> String {
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut out = String::new();
    let _ = writeln!(out, "{name}");
    let count = h.len();
    let mean_rate = if secs > 0.0 { count as f64 / secs } else { 0.0 };
    let _ = writeln!(out, "{:>18} = {}", "count", count);
    let _ = writeln!(out, "{:>18} = {:.2} calls/second", "mean rate", mean_rate);
    for (label, m) in [
        ("1-minute rate", 1.0),
        ("5-minute rate", 5.0),
        ("15-minute rate", 15.0),
    ] {
        let _ = writeln!(
            out,
            "{:>18} = {:.2} calls/second",
            label,
            ewma_rate(samples, op, m)
        );
    }
    let (min, max, mean, sd) = if count > 0 {
        (ms(h.min()), ms(h.max()), h.mean() / 1e6, h.stdev() / 1e6)
    } else {
        (0.0, 0.0, 0.0, 0.0)
    };
    let _ = writeln!(out, "{:>18} = {:.2} milliseconds", "min", min);
    let _ = writeln!(out, "{:>18} = {:.2} milliseconds", "max", max);
    let _ = writeln!(out, "{:>18} = {:.2} milliseconds", "mean", mean);
    let _ = writeln!(out, "{:>18} = {:.2} milliseconds", "stddev", sd);
    let q = |p: f64| {
        if count > 0 {
            ms(h.value_at_quantile(p))
        } else {
            0.0
        }
    };
    let _ = writeln!(out, "{:>18} = {:.2} milliseconds", "median", q(0.5));
    for (label, p) in [
        ("75%", 0.75),
        ("95%", 0.95),
        ("98%", 0.98),
        ("99%", 0.99),
        ("99.9%", 0.999),
    ] {
        let _ = writeln!(out, "{:>17} <= {:.2} milliseconds", label, q(p));
    }
    out
}

/// "15,005.00": two decimals with thousands separators, as Garnet prints.
pub fn fmt_thousands(v: f64) -> String {
    let s = format!("{:.2}", v.abs());
    let (int, frac) = s.split_once('.').unwrap_or((&s, "00"));
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    format!("{}{grouped}.{frac}", if v < 0.0 { "-" } else { "" })
}

/// Garnet's four lines for one measured phase.
pub fn garnet_lines(op: &str, threads: usize, secs: f64, ops: u64) -> String {
    let tput = if secs > 0.0 { ops as f64 / secs } else { 0.0 };
    format!(
        "Operation type: {op}\nNum threads: {threads}\nTotal time: {}ms for {} ops\nThroughput: {} ops/sec\n",
        fmt_thousands(secs * 1000.0),
        fmt_thousands(ops as f64),
        fmt_thousands(tput)
    )
}

/// Header of Garnet's online lines.
pub fn online_header() -> String {
    let cols = [
        "min (us);",
        "5th (us);",
        "median (us);",
        "avg (us);",
        "95th (us);",
        "99th (us);",
        "99.9th (us);",
        "total_ops;",
        "iter_tops;",
        "tpt (Kops/sec)",
    ];
    let mut s = String::from("|online| ");
    for c in cols {
        let _ = write!(s, "{c:<15}");
    }
    s.trim_end().to_string()
}

/// One online line: cumulative latency percentiles (us), total operations,
/// operations in the interval and throughput in Kops/s.
pub fn online_line(h: &Histogram<u64>, total_ops: u64, iter_ops: u64, dt: f64) -> String {
    let us = |ns: u64| ns as f64 / 1000.0;
    let (min, p5, p50, avg, p95, p99, p999) = if h.is_empty() {
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    } else {
        (
            us(h.min()),
            us(h.value_at_quantile(0.05)),
            us(h.value_at_quantile(0.5)),
            h.mean() / 1000.0,
            us(h.value_at_quantile(0.95)),
            us(h.value_at_quantile(0.99)),
            us(h.value_at_quantile(0.999)),
        )
    };
    let tpt = if dt > 0.0 {
        iter_ops as f64 / dt / 1000.0
    } else {
        0.0
    };
    let mut s = String::from("|online| ");
    for v in [min, p5, p50, avg, p95, p99, p999] {
        let _ = write!(s, "{:<15}", fmt_num(v));
    }
    let _ = write!(s, "{:<15}{:<15}{}", total_ops, iter_ops, fmt_num(tpt));
    s
}

/// The whole JSON document.
#[derive(Debug, Serialize)]
pub struct Report {
    pub tool: String,
    pub version: String,
    pub workload: String,
    pub target: String,
    pub cluster: bool,
    pub label: Option<String>,
    /// Overall: all runs' operations over all runs' time.
    pub ops_per_sec: f64,
    pub params: serde_json::Value,
    pub load: Option<LoadReport>,
    pub runs: Vec<RunReport>,
    pub errors: Errors,
    pub redirects: Option<serde_json::Value>,
    pub ok: bool,
}

impl Report {
    pub fn new(
        workload: &str,
        target: String,
        cluster: bool,
        label: Option<String>,
        params: serde_json::Value,
    ) -> Report {
        Report {
            tool: "kvasir bench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            workload: workload.into(),
            target,
            cluster,
            label,
            ops_per_sec: 0.0,
            params,
            load: None,
            runs: Vec::new(),
            errors: Errors::default(),
            redirects: None,
            ok: true,
        }
    }

    /// Sums errors and throughput over the runs.
    pub fn finish(&mut self) {
        let mut e = Errors::default();
        let mut ops = 0u64;
        let mut secs = 0.0;
        for r in &self.runs {
            e.add(&r.errors);
            ops += r.ops_total;
            secs += r.duration_s;
        }
        self.errors = e;
        self.ops_per_sec = if secs > 0.0 { ops as f64 / secs } else { 0.0 };
        self.ok = e.total == 0;
    }

    /// The last line of the run: OK, or FAILED with the error counts.
    pub fn verdict(&self) -> String {
        if self.ok {
            format!(
                "OK: {} ops, {} ops/sec, no errors",
                self.runs.iter().map(|r| r.ops_total).sum::<u64>(),
                fmt_num(self.ops_per_sec)
            )
        } else {
            let first = self
                .runs
                .iter()
                .find_map(|r| r.first_error.clone())
                .map(|e| format!("; first: {e}"))
                .unwrap_or_default();
            format!(
                "FAILED: {} errors ({}){first}",
                self.errors.total,
                self.errors.describe()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{CpuPct, OpSample};
    use std::time::Duration;

    fn recorded() -> Recorded {
        let mut h = crate::stats::new_histogram();
        for v in [1_000_000u64, 2_000_000, 3_000_000] {
            h.record(v).unwrap();
        }
        let samples = (0..3)
            .map(|i| Sample {
                t: i as f64 + 1.0,
                dt: 1.0,
                ops: vec![
                    OpSample::default(),
                    OpSample {
                        count: 1,
                        rate: 1.0 + i as f64,
                        mean_ms: 2.0,
                        p99_us: 2000.0,
                    },
                ],
                total_rate: 1.0 + i as f64,
                total_p99_us: 2000.0,
                cpu_self: Some(CpuPct {
                    user: 20.0,
                    system: 5.5,
                }),
                cpu_server: None,
            })
            .collect();
        Recorded {
            names: vec!["read".into(), "write".into()],
            samples,
            totals: vec![crate::stats::new_histogram(), h.clone()],
            counts: vec![0, 3],
            sums_ns: vec![0, 6_000_000],
            combined: h,
            elapsed: Duration::from_secs(3),
            errors: Errors::default(),
            first_error: None,
        }
    }

    #[test]
    fn seed_table_has_the_seed_layout() {
        let run = RunReport::new("kv", &recorded(), serde_json::json!({}));
        let t = seed_table(&run.per_second);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "+--------------------------------+-----------+-----------+-----------+-----------+-----------+-----------+-----------+-----------+-----------+-----------+-----------+"
        );
        assert_eq!(
            lines[1],
            "| Metric                         | mean      | min       | max       | std.dev   | median    | 1%        | 5%        | 10%       | 90%       | 95%       | 99%       |"
        );
        assert_eq!(
            lines[2],
            "| Read throughput, ops/sec       | 0         | 0         | 0         | 0         | 0         | 0         | 0         | 0         | 0         | 0         | 0         |"
        );
        assert_eq!(
            lines[4],
            "| Write throughput, ops/sec      | 2         | 1         | 3         | 1         | 2         | 1         | 1         | 1         | 3         | 3         | 3         |"
        );
        assert!(lines[5].starts_with("| Write latency, ms/op           | 2         |"));
        assert!(lines[6].starts_with("| Load tester CPU, user, %       | 20        |"));
        assert!(lines[7].starts_with("| Load tester CPU, system, %     | 5.50      |"));
        assert_eq!(lines.len(), 9, "no server rows without --server-pid");
        assert_eq!(run.ops_total, 3);
        assert!((run.ops_per_sec - 1.0).abs() < 1e-9);
        assert_eq!(run.count("write"), 3);
        assert!((run.latency("write").unwrap().p50_us - 2000.0).abs() < 2.0);
    }

    #[test]
    fn ycsb_table_matches_the_seed() {
        let t = ycsb_table(&[
            YcsbRow {
                workload: "workloada".into(),
                throughput: 105895.18,
                ops: vec![
                    ("READ".into(), 1212.72, 2993.0),
                    ("UPDATE".into(), 3456.98, 8711.0),
                ],
            },
            YcsbRow {
                workload: "workloadc".into(),
                throughput: 118690.14,
                ops: vec![("READ".into(), 2080.24, 4491.0)],
            },
        ]);
        let expect = "\
+--------------+----------------------+--------------------+--------------------+--------------------+
| Workload     | Throughput (ops/sec) | Op Type            | Avg Latency (us)   | 99th% Latency (us) |
| workloada    | 105895.18            | READ               | 1212.72            | 2993               |
|              |                      | UPDATE             | 3456.98            | 8711               |
|              |                      |                    |                    |                    |
| workloadc    | 118690.14            | READ               | 2080.24            | 4491               |
|              |                      |                    |                    |                    |
+--------------+----------------------+--------------------+--------------------+--------------------+
";
        assert_eq!(t, expect);
    }

    #[test]
    fn garnet_and_online_lines() {
        assert_eq!(fmt_thousands(16777216.0), "16,777,216.00");
        assert_eq!(fmt_thousands(3221.0), "3,221.00");
        assert_eq!(fmt_thousands(999.5), "999.50");
        assert_eq!(
            garnet_lines("GET", 1, 15.005, 373268),
            "Operation type: GET\nNum threads: 1\nTotal time: 15,005.00ms for 373,268.00 ops\nThroughput: 24,876.24 ops/sec\n"
        );
        assert_eq!(
            online_header(),
            "|online| min (us);      5th (us);      median (us);   avg (us);      95th (us);     99th (us);     99.9th (us);   total_ops;     iter_tops;     tpt (Kops/sec)"
        );
        let mut h = crate::stats::new_histogram();
        h.record(20_000).unwrap();
        let line = online_line(&h, 100, 100, 2.0);
        assert!(line.starts_with("|online| 20             20"), "{line}");
        assert!(
            line.ends_with("100            100            0.05"),
            "{line}"
        );
    }

    #[test]
    fn timer_block_layout() {
        let r = recorded();
        let t = timer_block(
            "put_benchmark_timer",
            &r.totals[1],
            &r.samples,
            Some(1),
            3.0,
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "put_benchmark_timer");
        assert_eq!(lines[1], "             count = 3");
        assert_eq!(lines[2], "         mean rate = 1.00 calls/second");
        assert_eq!(lines[3], "     1-minute rate = 0.00 calls/second");
        assert!(lines[5].starts_with("    15-minute rate = "));
        assert_eq!(lines[6], "               min = 1.00 milliseconds");
        assert_eq!(lines[10], "            median = 2.00 milliseconds");
        assert_eq!(lines[11], "              75% <= 3.00 milliseconds");
        assert_eq!(lines[15], "            99.9% <= 3.00 milliseconds");
    }

    #[test]
    fn json_is_well_formed_and_verdict_reports_errors() {
        let mut rep = Report::new(
            "kv",
            "127.0.0.1:1".into(),
            false,
            None,
            serde_json::json!({"x": 1}),
        );
        rep.runs
            .push(RunReport::new("kv", &recorded(), serde_json::json!({})));
        rep.finish();
        assert!(rep.ok);
        assert!(rep.verdict().starts_with("OK: 3 ops"));
        let v: serde_json::Value = serde_json::to_value(&rep).unwrap();
        assert_eq!(v["runs"][0]["ops_total"], 3);
        assert_eq!(v["runs"][0]["ops"]["write"], 3);
        assert!(
            v["runs"][0]["latency_us"]["write"]["p99_us"]
                .as_f64()
                .unwrap()
                > 2000.0
        );
        assert!(v["runs"][0]["per_second"][0]["mean"].is_number());
        let mut r = recorded();
        r.errors.wrong_values = 2;
        r.errors.total = 2;
        r.first_error = Some("GET key:1: wrong reply".into());
        rep.runs
            .push(RunReport::new("kv2", &r, serde_json::json!({})));
        rep.finish();
        assert!(!rep.ok);
        assert_eq!(
            rep.verdict(),
            "FAILED: 2 errors (wrong values 2); first: GET key:1: wrong reply"
        );
    }
}
