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
