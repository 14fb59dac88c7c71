//! The controller CPU cost model: the engine counts its work and charges it to the controller cores.
//!
//! Counts, never measured wall time, so a run is reproducible. Per-unit costs are for PinK's
//! controller, a 1.2 GHz ARM Cortex-A53, calibrated from PinK §3.2 on the LSM-tree baseline:
//! sorting in compaction "takes almost the same time as performing compaction I/Os", and the
//! Bloom filter rebuild, even 8-11x faster, "still takes 20-25% of total compaction time" (so
//! 2-3.7x the rest of compaction). See `docs/design.md`, "Controller CPU: calibration", for the
//! arithmetic, and which figures were left to validate it.

/// Nanoseconds per unit of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuCosts {
    /// A full key comparison through a pointer to the key string: one dependent DRAM miss for the
    /// string (level lists keep keys out of line) plus loop overhead.
    pub key_comparison_ns: u64,
    /// Each byte two keys share before they differ (compared one at a time by `memcmp`).
    pub byte_compared_ns: u64,
    /// A 4-byte prefix comparison inside the level-list array (cache-friendly, no pointer chase).
    pub prefix_comparison_ns: u64,
    /// One entry emitted by a merge (compaction or flush): the loop, the decision, the bookkeeping.
    pub entry_merged_ns: u64,
    /// Each byte copied (keys and values into pages, segments into DRAM).
    pub byte_copied_ns: u64,
    /// Each key byte hashed for a Bloom filter insert or probe.
    pub byte_hashed_ns: u64,
    /// Each bit probed or set in a Bloom filter (a likely cache miss on big filters).
    pub bloom_probe_ns: u64,
    /// Fixed cost of building one Bloom filter (allocation, zeroing, sizing).
    pub bloom_build_ns: u64,
}

impl CpuCosts {
    /// PinK's controller: 1.2 GHz Cortex-A53.
    pub fn cortex_a53() -> CpuCosts {
        CpuCosts {
            key_comparison_ns: 40,
            byte_compared_ns: 1,
            prefix_comparison_ns: 8,
            entry_merged_ns: 20,
            byte_copied_ns: 1,
            byte_hashed_ns: 6,
            bloom_probe_ns: 60,
            bloom_build_ns: 2_000,
        }
    }
}

impl Default for CpuCosts {
    fn default() -> Self {
        CpuCosts::cortex_a53()
    }
}

/// Work counted by the engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuCounts {
    /// Full key comparisons.
    pub key_comparisons: u64,
    /// Bytes compared in those comparisons.
    pub bytes_compared: u64,
    /// Prefix comparisons.
    pub prefix_comparisons: u64,
    /// Entries merged.
    pub entries_merged: u64,
    /// Bytes copied.
    pub bytes_copied: u64,
    /// Bytes hashed.
    pub bytes_hashed: u64,
    /// Bloom bits probed or set.
    pub bloom_probes: u64,
    /// Bloom filters built.
    pub bloom_builds: u64,
}

impl CpuCounts {
    /// The nanoseconds these counts cost.
    pub fn cost_ns(&self, costs: &CpuCosts) -> u64 {
        self.key_comparisons * costs.key_comparison_ns
            + self.bytes_compared * costs.byte_compared_ns
            + self.prefix_comparisons * costs.prefix_comparison_ns
            + self.entries_merged * costs.entry_merged_ns
            + self.bytes_copied * costs.byte_copied_ns
            + self.bytes_hashed * costs.byte_hashed_ns
            + self.bloom_probes * costs.bloom_probe_ns
            + self.bloom_builds * costs.bloom_build_ns
    }

    pub(crate) fn add(&mut self, other: &CpuCounts) {
        self.key_comparisons += other.key_comparisons;
        self.bytes_compared += other.bytes_compared;
        self.prefix_comparisons += other.prefix_comparisons;
        self.entries_merged += other.entries_merged;
        self.bytes_copied += other.bytes_copied;
        self.bytes_hashed += other.bytes_hashed;
        self.bloom_probes += other.bloom_probes;
        self.bloom_builds += other.bloom_builds;
    }

    /// Counts what [`CpuCounts::compare`] counts for two keys that both run past byte `common`
    /// and first differ there.
    pub(crate) fn count_differing_at(&mut self, common: usize) {
        self.key_comparisons += 1;
        self.bytes_compared += common as u64 + 1;
    }

    /// Compares two keys, counting one comparison and the bytes looked at.
    pub(crate) fn compare(&mut self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        self.key_comparisons += 1;
        let common = common_prefix(a, b);
        self.bytes_compared += (common + 1).min(a.len().min(b.len()).max(1)) as u64;
        match (a.get(common), b.get(common)) {
            (Some(x), Some(y)) => x.cmp(y),
            _ => a.len().cmp(&b.len()),
        }
    }
}

/// How many leading bytes `a` and `b` share, eight at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let shorter = a.len().min(b.len());
    let mut at = 0;
    while at + 8 <= shorter {
        let x = u64::from_le_bytes(a[at..at + 8].try_into().unwrap_or([0; 8]));
        let y = u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
        let differ = x ^ y;
        if differ != 0 {
            return at + (differ.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while at < shorter && a[at] == b[at] {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn compare_counts_and_orders_as_a_byte_loop(
            a in proptest::collection::vec(0u8..3, 0..40),
            b in proptest::collection::vec(0u8..3, 0..40),
        ) {
            let mut cpu = CpuCounts::default();
            prop_assert_eq!(cpu.compare(&a, &b), a.cmp(&b));
            let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &b), common);
            let bytes = (common + 1).min(a.len().min(b.len()).max(1)) as u64;
            prop_assert_eq!(cpu.bytes_compared, bytes);
        }
    }
}
