//! Latency histograms and their summary in microseconds.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Percentiles of a latency distribution, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct LatencySummary {
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// 99.99th percentile.
    pub p9999: f64,
    /// Largest.
    pub max: f64,
}

/// Records latencies in nanoseconds with three significant digits.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    histogram: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder::new()
    }
}

impl LatencyRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        LatencyRecorder {
            // 1 ns to about 18 minutes at three significant figures: valid bounds, so this cannot fail.
            histogram: Histogram::new_with_bounds(1, 1 << 40, 3)
                .unwrap_or_else(|_| unreachable!("valid histogram bounds")),
        }
    }

    /// Records one latency in nanoseconds.
    pub fn record(&mut self, latency_ns: u64) {
        self.histogram.saturating_record(latency_ns.max(1));
    }

    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The percentiles in microseconds (all zero when nothing was recorded).
    pub fn summary(&self) -> LatencySummary {
        if self.histogram.is_empty() {
            return LatencySummary::default();
        }
        let us = |quantile: f64| self.histogram.value_at_quantile(quantile) as f64 / 1_000.0;
        LatencySummary {
            avg: self.histogram.mean() / 1_000.0,
            p50: us(0.50),
            p99: us(0.99),
            p999: us(0.999),
            p9999: us(0.9999),
            max: self.histogram.max() as f64 / 1_000.0,
        }
    }

    /// Points `(latency in microseconds, fraction of requests at or below it)` of the cumulative
    /// distribution, one per distinct recorded value bucket, for plotting.
    pub fn cdf_points(&self) -> Vec<(f64, f64)> {
        let total = self.histogram.len();
        if total == 0 {
            return Vec::new();
        }
        let mut points = Vec::new();
        let mut seen = 0u64;
        for bucket in self.histogram.iter_recorded() {
            seen += bucket.count_at_value();
            points.push((
                bucket.value_iterated_to() as f64 / 1_000.0,
                seen as f64 / total as f64,
            ));
        }
        points
    }
}

/// Reads issued in one window of a run's simulated time: where tails come from shows up as the
/// windows in which background work ran.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct LatencyWindow {
    /// Start of the window, simulated milliseconds since the run started.
    pub start_ms: f64,
    /// Reads issued in the window.
    pub reads: u64,
    /// Their mean latency, simulated microseconds.
    pub avg_us: f64,
    /// Their largest latency, simulated microseconds.
    pub max_us: f64,
}

/// Windows in one run's read-latency time series.
pub const LATENCY_WINDOWS: usize = 200;

/// Splits reads `(issue time, latency)`, in nanoseconds, issued from `start` to `end` into
/// `count` equal windows of simulated time (empty windows included, with zero reads).
pub fn latency_windows(
    reads: &[(u64, u64)],
    start: u64,
    end: u64,
    count: usize,
) -> Vec<LatencyWindow> {
    if reads.is_empty() || count == 0 {
        return Vec::new();
    }
    let span = end.saturating_sub(start).max(1);
    let width = span.div_ceil(count as u64).max(1);
    let mut sums = vec![(0u64, 0u128, 0u64); count];
    for &(issue, latency) in reads {
        let index = ((issue.saturating_sub(start) / width) as usize).min(count - 1);
        let (reads, sum, max) = &mut sums[index];
        *reads += 1;
        *sum += u128::from(latency);
        *max = (*max).max(latency);
    }
    sums.into_iter()
        .enumerate()
        .map(|(index, (reads, sum, max))| LatencyWindow {
            start_ms: (index as u64 * width) as f64 / 1e6,
            reads,
            avg_us: if reads == 0 {
                0.0
            } else {
                sum as f64 / reads as f64 / 1e3
            },
            max_us: max as f64 / 1e3,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_windows_split_reads_by_issue_time() {
        // Two windows of 500 ns: reads at 0 and 400 fall in the first, 600 and 1000 in the second.
        let reads = [(0, 1_000), (400, 3_000), (600, 10_000), (1_000, 2_000)];
        let windows = latency_windows(&reads, 0, 1_000, 2);
        assert_eq!(windows.len(), 2);
        assert_eq!(windows[0].reads, 2);
        assert_eq!(windows[0].avg_us, 2.0);
        assert_eq!(windows[0].max_us, 3.0);
        assert_eq!(windows[1].reads, 2);
        assert_eq!(windows[1].avg_us, 6.0);
        assert_eq!(windows[1].max_us, 10.0);
        assert_eq!(windows[1].start_ms, 500.0 / 1e6);
        assert!(latency_windows(&[], 0, 10, 4).is_empty());
    }
}
