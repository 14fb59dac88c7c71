//! Latency histograms and their summary in microseconds.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Percentiles of a latency distribution, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

/// Records latencies in nanoseconds with three significant digits.
pub(crate) struct LatencyRecorder {
    histogram: Histogram<u64>,
}

impl LatencyRecorder {
    pub(crate) fn new() -> Self {
        LatencyRecorder {
            // 1 ns to about 18 minutes at three significant figures: valid bounds, so this cannot fail.
            histogram: Histogram::new_with_bounds(1, 1 << 40, 3)
                .unwrap_or_else(|_| unreachable!("valid histogram bounds")),
        }
    }

    pub(crate) fn record(&mut self, latency_ns: u64) {
        self.histogram.saturating_record(latency_ns);
    }

    pub(crate) fn summary(&self) -> LatencySummary {
        let us = |ns: u64| ns as f64 / 1_000.0;
        if self.histogram.is_empty() {
            return LatencySummary {
                avg: 0.0,
                p50: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
            };
        }
        LatencySummary {
            avg: self.histogram.mean() / 1_000.0,
            p50: us(self.histogram.value_at_quantile(0.50)),
            p99: us(self.histogram.value_at_quantile(0.99)),
            p999: us(self.histogram.value_at_quantile(0.999)),
            max: us(self.histogram.max()),
        }
    }
}
