//! Distributions of small per-request counts (flash pages read by one GET): mean, a tail
//! percentile and the largest, exact (every count is kept, by value).

use std::collections::BTreeMap;

use serde::Serialize;

/// Mean, 99.99th percentile (nearest rank) and largest of a count per request.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct CountSummary {
    /// Mean over requests.
    pub avg: f64,
    /// 99.99th percentile: the smallest count at least 99.99% of the requests do not exceed.
    pub p9999: u64,
    /// Largest.
    pub max: u64,
}

/// Flash page reads of each point GET of a run (one GET per request).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct GetReads {
    /// Pages read for user data and index together.
    pub flash: CountSummary,
    /// Index (meta or bucket) pages read.
    pub index: CountSummary,
}

/// Every count recorded, by value.
#[derive(Debug, Clone, Default)]
pub struct CountRecorder {
    by_value: BTreeMap<u64, u64>,
    requests: u64,
    sum: u128,
}

impl CountRecorder {
    /// An empty recorder.
    pub fn new() -> CountRecorder {
        CountRecorder::default()
    }

    /// Records one request's count.
    pub fn record(&mut self, count: u64) {
        *self.by_value.entry(count).or_insert(0) += 1;
        self.requests += 1;
        self.sum += u128::from(count);
    }

    /// Requests recorded.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// The smallest count that `per_ten_thousand` / 10,000 of the requests do not exceed (nearest
    /// rank, in integers so 99.99% of 10,000 is exactly 9,999), or `None` before any request.
    pub fn quantile(&self, per_ten_thousand: u64) -> Option<u64> {
        if self.requests == 0 {
            return None;
        }
        let rank = (u128::from(self.requests) * u128::from(per_ten_thousand.min(10_000)))
            .div_ceil(10_000)
            .max(1) as u64;
        let mut seen = 0u64;
        for (&value, &times) in &self.by_value {
            seen += times;
            if seen >= rank {
                return Some(value);
            }
        }
        self.by_value.keys().next_back().copied()
    }

    /// Mean, p99.99 and largest, or `None` before any request.
    pub fn summary(&self) -> Option<CountSummary> {
        Some(CountSummary {
            avg: self.sum as f64 / self.requests.max(1) as f64,
            p9999: self.quantile(9_999)?,
            max: self.by_value.keys().next_back().copied()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::CountRecorder;

    #[test]
    fn percentile_is_the_nearest_rank() {
        let mut counts = CountRecorder::new();
        assert_eq!(counts.summary(), None);
        // 9,999 requests of 1 read and one of 7: p99.99 is 1 (rank 9,999), the largest 7.
        for _ in 0..9_999 {
            counts.record(1);
        }
        counts.record(7);
        let summary = counts.summary().expect("recorded");
        assert_eq!(summary.p9999, 1);
        assert_eq!(summary.max, 7);
        assert!((summary.avg - 1.0006).abs() < 1e-9, "{summary:?}");
        // Two of 10,001 above 1: rank 10,001 is the second largest.
        counts.record(3);
        assert_eq!(counts.summary().expect("recorded").p9999, 3);
        assert_eq!(counts.quantile(5_000), Some(1));
        assert_eq!(counts.requests(), 10_001);
    }
}
