//! Per-command latency histograms, as Redis 7.0 keeps them with
//! `latency-tracking yes` (the default): INFO latencystats reports the
//! percentiles of `latency-tracking-info-percentiles`, LATENCY HISTOGRAM
//! the cumulative distribution in power-of-two microsecond buckets.
//! Durations are recorded as Redis records them, whole microseconds in
//! nanoseconds, from 1 ns to 1 s, to two significant digits.

use hdrhistogram::Histogram;
use kvasir_resp::Reply;
use std::fmt::Write;

const LOWEST_NS: u64 = 1;
const HIGHEST_NS: u64 = 1_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 2;
/// LATENCY HISTOGRAM's first bucket: 1024 ns, then doubling.
const FIRST_BUCKET_NS: u64 = 1024;

/// One command's latencies.
#[derive(Clone)]
pub struct CommandLatency(Histogram<u64>);

impl CommandLatency {
    pub fn new() -> Option<CommandLatency> {
        Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
            .ok()
            .map(CommandLatency)
    }

    /// Records one call of `micros` microseconds.
    pub fn record(&mut self, micros: u64) {
        self.0
            .saturating_record(micros.saturating_mul(1000).clamp(LOWEST_NS, HIGHEST_NS));
    }

    /// `p50=1.003,p99=2.007,...` for INFO latencystats: each percentile of
    /// `percentiles` (as configured, e.g. "50 99 99.9") in microseconds.
    pub fn percentiles_line(&self, percentiles: &str, out: &mut String) {
        for (i, p) in percentiles.split_whitespace().enumerate() {
            let Ok(value) = p.parse::<f64>() else {
                continue;
            };
            if i > 0 {
                out.push(',');
            }
            let ns = self.0.value_at_percentile(value.clamp(0.0, 100.0));
            let _ = write!(out, "p{p}={:.3}", ns as f64 / 1000.0);
        }
    }

    /// LATENCY HISTOGRAM's entry: the calls, and the cumulative count at
    /// each power-of-two bucket that added calls (upper bound in
    /// microseconds).
    pub fn cdf_reply(&self) -> Reply {
        let mut buckets = Vec::new();
        let mut cumulative = 0;
        for step in self.0.iter_log(FIRST_BUCKET_NS, 2.0) {
            let added = step.count_since_last_iteration();
            if added == 0 {
                continue;
            }
            cumulative += added;
            // The bucket's bound as Redis prints it: the highest value
            // equivalent to the power of two that ends it.
            let bound = self.0.highest_equivalent(step.value_iterated_to() + 1);
            buckets.push((
                Reply::Int((bound / 1000) as i64),
                Reply::Int(cumulative as i64),
            ));
        }
        Reply::Map(vec![
            (Reply::bulk_str("calls"), Reply::Int(self.0.len() as i64)),
            (Reply::bulk_str("histogram_usec"), Reply::Map(buckets)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_buckets_are_in_microseconds() {
        let mut h = CommandLatency::new().unwrap();
        for micros in [0, 1, 2, 2, 40] {
            h.record(micros);
        }
        let mut line = String::new();
        h.percentiles_line("50 99 99.9", &mut line);
        assert_eq!(line, "p50=2.007,p99=40.191,p99.9=40.191");
        let Reply::Map(fields) = h.cdf_reply() else {
            panic!("not a map");
        };
        assert_eq!(fields[0].1, Reply::Int(5));
        assert_eq!(
            fields[1].1,
            Reply::Map(vec![
                (Reply::Int(1), Reply::Int(2)),
                (Reply::Int(2), Reply::Int(4)),
                (Reply::Int(66), Reply::Int(5)),
            ])
        );
    }
}
