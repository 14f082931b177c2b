//! What a run measures while it runs: per operation type, latencies into an
//! HDR histogram and counts; error counters; and a sampler thread that cuts
//! the run into intervals (1 s, or 2 s for `online`), samples the CPU time
//! of the load generator and of the server processes from /proc, prints the
//! progress line, and keeps everything the reports need.
//!
//! Connection tasks buffer latencies locally and hand them over once per
//! batch (`LocalRec::flush`), so the shared lock is taken per batch, not
//! per request.

use crate::stats::new_histogram;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Error counts of a run. Any of them non-zero fails the run.
#[derive(Default, Debug)]
pub struct ErrorCounters {
    /// Error replies (`-ERR ...`) to commands that should have succeeded.
    pub error_replies: AtomicU64,
    /// Replies with the wrong value (or type, or a missing value).
    pub wrong_values: AtomicU64,
    /// Commands whose reply did not come within the timeout.
    pub timeouts: AtomicU64,
    /// Commands lost to a broken connection.
    pub failed: AtomicU64,
    /// Connections opened again after a failure.
    pub reconnects: AtomicU64,
}

/// A copy of the error counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Errors {
    pub error_replies: u64,
    pub wrong_values: u64,
    pub timeouts: u64,
    pub failed: u64,
    pub reconnects: u64,
    pub total: u64,
}

impl Errors {
    pub fn add(&mut self, o: &Errors) {
        self.error_replies += o.error_replies;
        self.wrong_values += o.wrong_values;
        self.timeouts += o.timeouts;
        self.failed += o.failed;
        self.reconnects += o.reconnects;
        self.total += o.total;
    }

    /// "wrong values 3, error replies 1" (only the non-zero ones).
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [
            ("wrong values", self.wrong_values),
            ("error replies", self.error_replies),
            ("timeouts", self.timeouts),
            ("failed requests", self.failed),
            ("reconnects", self.reconnects),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(what, n)| format!("{what} {n}"))
        .collect();
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    }
}

impl ErrorCounters {
    pub fn snapshot(&self) -> Errors {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut e = Errors {
            error_replies: g(&self.error_replies),
            wrong_values: g(&self.wrong_values),
            timeouts: g(&self.timeouts),
            failed: g(&self.failed),
            reconnects: g(&self.reconnects),
            total: 0,
        };
        e.total = e.error_replies + e.wrong_values + e.timeouts + e.failed + e.reconnects;
        e
    }
}

struct Window {
    hist: Histogram<u64>,
    count: u64,
    sum_ns: u128,
}

impl Window {
    fn new() -> Window {
        Window {
            hist: new_histogram(),
            count: 0,
            sum_ns: 0,
        }
    }
}

/// The shared recorder of one run.
pub struct Metrics {
    pub names: Vec<String>,
    windows: Vec<Mutex<Window>>,
    pub errors: ErrorCounters,
    /// Set when the run should stop (duration over, op budget spent).
    pub stop: AtomicBool,
    /// Operations left when the run has an operation budget.
    pub budget: Option<AtomicU64>,
    /// The first problem seen, to show what went wrong.
    pub first_error: Mutex<Option<String>>,
}

impl Metrics {
    pub fn new(names: &[&str], budget: Option<u64>) -> Arc<Metrics> {
        Arc::new(Metrics {
            names: names.iter().map(|s| s.to_string()).collect(),
            windows: names.iter().map(|_| Mutex::new(Window::new())).collect(),
            errors: ErrorCounters::default(),
            stop: AtomicBool::new(false),
            budget: budget.map(AtomicU64::new),
            first_error: Mutex::new(None),
        })
    }

    /// Keeps the first error message of the run (built only if it is the first).
    pub fn note_error(&self, msg: impl FnOnce() -> String) {
        let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some(msg());
        }
    }

    /// The first error message, if any.
    pub fn first_error(&self) -> Option<String> {
        self.first_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Takes one operation from the budget; false when it is spent (and
    /// then stops the run).
    pub fn take_op(&self) -> bool {
        match &self.budget {
            None => true,
            Some(b) => {
                let ok = b
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1))
                    .is_ok();
                if !ok {
                    self.stop.store(true, Ordering::Relaxed);
                }
                ok
            }
        }
    }

    fn take_window(&self, op: usize, spare: &mut Window) -> (u64, u128) {
        let mut w = self.windows[op].lock().unwrap_or_else(|e| e.into_inner());
        std::mem::swap(&mut *w, spare);
        let taken = (spare.count, spare.sum_ns);
        w.count = 0;
        w.sum_ns = 0;
        taken
    }
}

/// A connection task's buffer of latencies, handed over once per batch.
pub struct LocalRec {
    per_op: Vec<Vec<u64>>,
}

impl LocalRec {
    pub fn new(ops: usize) -> LocalRec {
        LocalRec {
            per_op: (0..ops).map(|_| Vec::with_capacity(256)).collect(),
        }
    }

    /// Records one latency of operation `op`.
    pub fn push(&mut self, op: usize, d: Duration) {
        self.per_op[op].push(d.as_nanos().min(u64::MAX as u128) as u64);
    }

    /// Moves the buffered latencies into the shared windows.
    pub fn flush(&mut self, m: &Metrics) {
        for (op, lat) in self.per_op.iter_mut().enumerate() {
            if lat.is_empty() {
                continue;
            }
            let mut w = m.windows[op].lock().unwrap_or_else(|e| e.into_inner());
            for &ns in lat.iter() {
                w.hist.saturating_record(ns.max(1));
                w.sum_ns += ns as u128;
            }
            w.count += lat.len() as u64;
            drop(w);
            lat.clear();
        }
    }
}

/// CPU use of a process over an interval, in percent of one core (as top
/// shows it: a process busy on two cores shows 200).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuPct {
    pub user: f64,
    pub system: f64,
}

/// Cumulative user and system time of a process from /proc/PID/stat, in
/// clock ticks; `None` if it cannot be read (not Linux, process gone).
pub fn proc_cpu_ticks(pid: Option<u32>) -> Option<(u64, u64)> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    let text = std::fs::read_to_string(path).ok()?;
    // The command name may hold spaces and parentheses: fields start after
    // the last ')'. Then: state(3) ... utime(14) stime(15).
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let utime = fields.get(11)?.parse().ok()?;
    let stime = fields.get(12)?.parse().ok()?;
    Some((utime, stime))
}

fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions; it only reads a constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

struct CpuProbe {
    pids: Vec<Option<u32>>,
    last: Option<(u64, u64)>,
    tck: f64,
}

impl CpuProbe {
    fn new(pids: Vec<Option<u32>>) -> CpuProbe {
        let mut p = CpuProbe {
            pids,
            last: None,
            tck: clock_ticks_per_sec(),
        };
        p.last = p.read();
        p
    }

    fn read(&self) -> Option<(u64, u64)> {
        let mut sum = (0, 0);
        for &pid in &self.pids {
            let (u, s) = proc_cpu_ticks(pid)?;
            sum.0 += u;
            sum.1 += s;
        }
        Some(sum)
    }

    fn sample(&mut self, dt: f64) -> Option<CpuPct> {
        if self.pids.is_empty() {
            return None;
        }
        let now = self.read();
        let out = match (self.last, now) {
            (Some(a), Some(b)) if dt > 0.0 => Some(CpuPct {
                user: b.0.saturating_sub(a.0) as f64 / self.tck / dt * 100.0,
                system: b.1.saturating_sub(a.1) as f64 / self.tck / dt * 100.0,
            }),
            _ => None,
        };
        self.last = now;
        out
    }
}

/// One operation type in one interval.
#[derive(Clone, Debug, Default, Serialize)]
pub struct OpSample {
    pub count: u64,
    /// Operations per second in the interval.
    pub rate: f64,
    /// Mean latency in the interval, milliseconds.
    pub mean_ms: f64,
    /// 99th percentile latency in the interval, microseconds.
    pub p99_us: f64,
}

/// One interval of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Sample {
    /// Seconds from the start of the run to the end of the interval.
    pub t: f64,
    /// Length of the interval in seconds.
    pub dt: f64,
    pub ops: Vec<OpSample>,
    /// All operation types together.
    pub total_rate: f64,
    pub total_p99_us: f64,
    pub cpu_self: Option<CpuPct>,
    pub cpu_server: Option<CpuPct>,
}

/// What a per-interval line printer sees.
pub struct Tick<'a> {
    pub sample: &'a Sample,
    /// Histogram of every operation since the start (nanoseconds).
    pub cumulative: &'a Histogram<u64>,
    pub total_ops: u64,
    pub interval_ops: u64,
    pub errors: Errors,
}

/// A printer called at the end of every interval.
pub type LinePrinter = Box<dyn FnMut(&Tick<'_>) + Send>;

/// Everything the sampler gathered.
pub struct Recorded {
    pub names: Vec<String>,
    pub samples: Vec<Sample>,
    /// Per operation type, the whole run.
    pub totals: Vec<Histogram<u64>>,
    pub counts: Vec<u64>,
    pub sums_ns: Vec<u128>,
    pub combined: Histogram<u64>,
    pub elapsed: Duration,
    pub errors: Errors,
    pub first_error: Option<String>,
}

/// Options of the sampler thread.
pub struct SamplerOptions {
    pub interval: Duration,
    pub progress: bool,
    pub server_pids: Vec<u32>,
    pub printer: Option<LinePrinter>,
}

/// The sampler thread of one run.
pub struct Sampler {
    done: mpsc::Sender<()>,
    handle: std::thread::JoinHandle<Recorded>,
}

impl Sampler {
    /// Starts sampling now: the run's clock starts here.
    pub fn start(metrics: Arc<Metrics>, opts: SamplerOptions) -> Sampler {
        let (done, rx) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("bench-sampler".into())
            .spawn(move || sampler_loop(metrics, opts, rx))
            .expect("spawn sampler thread");
        Sampler { done, handle }
    }

    /// Takes the last (partial) interval and returns everything.
    pub fn finish(self) -> Recorded {
        let _ = self.done.send(());
        self.handle.join().expect("sampler thread panicked")
    }
}

fn sampler_loop(
    metrics: Arc<Metrics>,
    mut opts: SamplerOptions,
    done: mpsc::Receiver<()>,
) -> Recorded {
    let start = Instant::now();
    let n = metrics.names.len();
    let mut spare: Vec<Window> = (0..n).map(|_| Window::new()).collect();
    let mut totals: Vec<Histogram<u64>> = (0..n).map(|_| new_histogram()).collect();
    let mut counts = vec![0u64; n];
    let mut sums = vec![0u128; n];
    let mut combined = new_histogram();
    let mut interval_all = new_histogram();
    let mut samples = Vec::new();
    let mut cpu_self = CpuProbe::new(vec![None]);
    let mut cpu_server = CpuProbe::new(opts.server_pids.iter().map(|&p| Some(p)).collect());
    let mut last = start;
    let mut k = 1u32;
    let mut finished = false;
    while !finished {
        let deadline = start + opts.interval * k;
        let wait = deadline.saturating_duration_since(Instant::now());
        match done.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Timeout) => k += 1,
            _ => finished = true,
        }
        let now = Instant::now();
        let dt = now.duration_since(last).as_secs_f64();
        last = now;
        interval_all.reset();
        let mut sample = Sample {
            t: now.duration_since(start).as_secs_f64(),
            dt,
            ..Default::default()
        };
        let mut interval_ops = 0;
        for op in 0..n {
            let (count, sum) = metrics.take_window(op, &mut spare[op]);
            let w = &mut spare[op];
            let p99 = if count > 0 {
                w.hist.value_at_quantile(0.99) as f64 / 1000.0
            } else {
                0.0
            };
            let _ = totals[op].add(&w.hist);
            let _ = combined.add(&w.hist);
            let _ = interval_all.add(&w.hist);
            w.hist.reset();
            counts[op] += count;
            sums[op] += sum;
            interval_ops += count;
            sample.ops.push(OpSample {
                count,
                rate: if dt > 0.0 { count as f64 / dt } else { 0.0 },
                mean_ms: if count > 0 {
                    sum as f64 / count as f64 / 1e6
                } else {
                    0.0
                },
                p99_us: p99,
            });
        }
        sample.total_rate = if dt > 0.0 {
            interval_ops as f64 / dt
        } else {
            0.0
        };
        sample.total_p99_us = if interval_ops > 0 {
            interval_all.value_at_quantile(0.99) as f64 / 1000.0
        } else {
            0.0
        };
        sample.cpu_self = cpu_self.sample(dt);
        sample.cpu_server = cpu_server.sample(dt);
        let errors = metrics.errors.snapshot();
        // A last sliver of an interval would distort per-second rates.
        let keep = !finished || dt >= opts.interval.as_secs_f64() * 0.5;
        if keep {
            let total_ops: u64 = counts.iter().sum();
            if let Some(p) = opts.printer.as_mut() {
                p(&Tick {
                    sample: &sample,
                    cumulative: &combined,
                    total_ops,
                    interval_ops,
                    errors,
                });
            }
            if opts.progress {
                let mut err = std::io::stderr().lock();
                let _ = write!(
                    err,
                    "\r[{:>5.0}s] {:>11.0} ops/s   p99 {:>9.3} ms   errors {:<6}",
                    sample.t,
                    sample.total_rate,
                    sample.total_p99_us / 1000.0,
                    errors.total
                );
                let _ = err.flush();
            }
            samples.push(sample);
        }
    }
    if opts.progress {
        eprintln!();
    }
    Recorded {
        names: metrics.names.clone(),
        samples,
        totals,
        counts,
        sums_ns: sums,
        combined,
        elapsed: last.duration_since(start),
        errors: metrics.errors.snapshot(),
        first_error: metrics.first_error(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_cpu_ticks() {
        let (u, s) = proc_cpu_ticks(None).expect("/proc/self/stat");
        // Burn a little CPU and see the user time move (or at least not fall).
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(60) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let (u2, s2) = proc_cpu_ticks(None).unwrap();
        assert!(u2 >= u && s2 >= s);
        assert!(proc_cpu_ticks(Some(u32::MAX)).is_none());
    }

    #[test]
    fn sampler_collects_counts_and_latencies() {
        let m = Metrics::new(&["read", "write"], None);
        let sampler = Sampler::start(
            m.clone(),
            SamplerOptions {
                interval: Duration::from_millis(100),
                progress: false,
                server_pids: vec![std::process::id()],
                printer: None,
            },
        );
        let mut rec = LocalRec::new(2);
        for i in 0..1000u64 {
            rec.push((i % 2) as usize, Duration::from_micros(100 + i));
        }
        rec.flush(&m);
        std::thread::sleep(Duration::from_millis(250));
        m.errors.wrong_values.fetch_add(2, Ordering::Relaxed);
        let r = sampler.finish();
        assert_eq!(r.counts, vec![500, 500]);
        assert_eq!(r.totals[0].len(), 500);
        assert_eq!(r.combined.len(), 1000);
        assert!(r.samples.len() >= 2);
        assert_eq!(r.samples.iter().map(|s| s.ops[1].count).sum::<u64>(), 500);
        assert!(r.samples[0].cpu_self.is_some());
        assert!(r.samples[0].cpu_server.is_some());
        assert_eq!(r.errors.wrong_values, 2);
        assert_eq!(r.errors.total, 2);
        assert_eq!(r.errors.describe(), "wrong values 2");
    }

    #[test]
    fn op_budget_stops_the_run() {
        let m = Metrics::new(&["x"], Some(2));
        assert!(m.take_op());
        assert!(m.take_op());
        assert!(!m.stopped());
        assert!(!m.take_op());
        assert!(m.stopped());
    }
}
