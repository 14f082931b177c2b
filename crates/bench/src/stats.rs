//! Summaries of numbers: the per-second sample columns of the seed reports
//! (mean, min, max, std.dev, median, 1%, 5%, 10%, 90%, 95%, 99%), computed
//! as Apache Commons Math's DescriptiveStatistics does (sample standard
//! deviation, percentile position p(n+1)/100 with linear interpolation), and
//! exact latency percentiles from an HDR histogram.

use hdrhistogram::Histogram;
use serde::Serialize;

/// The seed-000 columns for one metric.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub std_dev: f64,
    pub median: f64,
    pub p1: f64,
    pub p5: f64,
    pub p10: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
}

/// Commons Math `Percentile` (legacy estimation) over sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    match n {
        0 => return 0.0,
        1 => return sorted[0],
        _ => {}
    }
    let pos = p * (n as f64 + 1.0) / 100.0;
    let fpos = pos.floor();
    let dif = pos - fpos;
    if pos < 1.0 {
        return sorted[0];
    }
    if pos >= n as f64 {
        return sorted[n - 1];
    }
    let i = fpos as usize;
    let lower = sorted[i - 1];
    let upper = sorted[i];
    lower + dif * (upper - lower)
}

impl Summary {
    /// All zeros for no values, as the seed shows for an idle metric.
    pub fn of(values: &[f64]) -> Summary {
        if values.is_empty() {
            return Summary::default();
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = if values.len() > 1 {
            values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Summary {
            mean,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            std_dev: var.sqrt(),
            median: percentile(&sorted, 50.0),
            p1: percentile(&sorted, 1.0),
            p5: percentile(&sorted, 5.0),
            p10: percentile(&sorted, 10.0),
            p90: percentile(&sorted, 90.0),
            p95: percentile(&sorted, 95.0),
            p99: percentile(&sorted, 99.0),
        }
    }

    /// Values in column order.
    pub fn columns(&self) -> [f64; 11] {
        [
            self.mean,
            self.min,
            self.max,
            self.std_dev,
            self.median,
            self.p1,
            self.p5,
            self.p10,
            self.p90,
            self.p95,
            self.p99,
        ]
    }
}

/// Formats as the seed tables do: two decimals, without ".00" ("22", "7.50").
pub fn fmt_num(v: f64) -> String {
    let s = format!("{v:.2}");
    match s.strip_suffix(".00") {
        Some("-0") => "0".to_string(),
        Some(int) => int.to_string(),
        None => s,
    }
}

/// Exact latency percentiles of one operation type, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub min_us: f64,
    pub p5_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latency {
    /// From a histogram of nanoseconds.
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            count: h.len(),
            mean_us: h.mean() / 1000.0,
            min_us: us(h.min()),
            p5_us: us(h.value_at_quantile(0.05)),
            p50_us: us(h.value_at_quantile(0.50)),
            p95_us: us(h.value_at_quantile(0.95)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// A histogram of latencies in nanoseconds, 1 ns to 100 s, 3 digits.
pub fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("histogram bounds");
    h.auto(true);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_as_commons_math() {
        let v: Vec<f64> = (1..=10).map(|x| x as f64).collect();
        // pos = p(n+1)/100 = 5.5 -> between the 5th and 6th values.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(percentile(&v, 50.0), 5.5));
        assert!(close(percentile(&v, 90.0), 9.9));
        assert!(close(percentile(&v, 1.0), 1.0));
        assert!(close(percentile(&v, 99.0), 10.0));
        assert!(close(percentile(&v, 10.0), 1.1));
        assert_eq!(percentile(&[3.0], 50.0), 3.0);
    }

    #[test]
    fn summary_columns() {
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.mean, 5.0);
        assert_eq!(s.min, 2.0);
        assert_eq!(s.max, 9.0);
        // Sample standard deviation: sqrt(32 / 7).
        assert!((s.std_dev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.median, 4.5);
        assert_eq!(Summary::of(&[]), Summary::default());
        assert_eq!(Summary::of(&[1.5]).std_dev, 0.0);
    }

    #[test]
    fn numbers_format_like_the_seed() {
        assert_eq!(fmt_num(99366.968), "99366.97");
        assert_eq!(fmt_num(22.0), "22");
        assert_eq!(fmt_num(7.5), "7.50");
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(-0.001), "0");
        assert_eq!(fmt_num(0.004), "0");
        assert_eq!(fmt_num(1.0 / 3.0), "0.33");
    }

    #[test]
    fn hdr_latency_percentiles() {
        let mut h = new_histogram();
        for us in 1..=1000u64 {
            h.record(us * 1000).unwrap();
        }
        let l = Latency::of(&h);
        assert_eq!(l.count, 1000);
        assert!((l.p50_us - 500.0).abs() <= 1.0, "{}", l.p50_us);
        assert!((l.p99_us - 990.0).abs() <= 1.0, "{}", l.p99_us);
        assert!((l.p999_us - 999.0).abs() <= 1.0);
        assert!((l.max_us - 1000.0).abs() <= 1.0);
        assert!((l.mean_us - 500.5).abs() <= 1.0);
        assert_eq!(Latency::of(&new_histogram()), Latency::default());
    }
}
