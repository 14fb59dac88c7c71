//! What an engine reports: per-level shape, DRAM by part, flash counters, reads per GET, Bloom
//! accuracy, compaction and GC work, WAF.

use std::fmt;

use kvssd_flash::{Counters, Purpose};

use crate::{CpuCounts, Preset};

/// One level below L0.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelStats {
    /// 1 for L1, and so on.
    pub level: usize,
    /// Entries (tombstones included).
    pub entries: u64,
    /// Entries the level holds before it is merged down (`u64::MAX` for the last level).
    pub capacity_entries: u64,
    /// Meta segments.
    pub segments: u64,
    /// Whether the level's meta segments are pinned in DRAM.
    pub pinned: bool,
    /// DRAM of the level: its level list, pinned segments and Bloom filters.
    pub dram_bytes: u64,
    /// Bloom filter accuracy at this level (`lightstore`).
    pub bloom: BloomLevelStats,
}

/// Bloom filter figures of one level.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BloomLevelStats {
    /// Bits per key Monkey allocated to the level (0: no filter).
    pub bits_per_key: f64,
    /// The false-positive rate Monkey's allocation predicts for the level, `e^{-b ln²2}`.
    pub monkey_fpr: f64,
    /// Probes of keys absent from the probed segment.
    pub negatives: u64,
    /// Of those, how many the filter let through.
    pub false_positives: u64,
    /// Expected false positives: the sum of the probed filters' own predicted rates.
    pub expected_false_positives: f64,
}

impl BloomLevelStats {
    /// Measured false-positive rate, if any absent key was probed.
    pub fn measured_fpr(&self) -> Option<f64> {
        (self.negatives > 0).then(|| self.false_positives as f64 / self.negatives as f64)
    }
}

/// DRAM by part, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DramUsage {
    /// L0 pairs (key, value and per-entry overhead).
    pub l0: u64,
    /// Level lists (start keys, addresses, prefixes, range pointers).
    pub level_lists: u64,
    /// Pinned meta segments (a page each).
    pub pinned_segments: u64,
    /// Bloom filters.
    pub bloom_filters: u64,
    /// The budget.
    pub budget: u64,
}

impl DramUsage {
    /// All parts added up.
    pub fn total(&self) -> u64 {
        self.l0 + self.level_lists + self.pinned_segments + self.bloom_filters
    }
}

/// A histogram of small counts (meta-page reads per GET).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadHistogram {
    /// `counts[n]` is how many GETs read `n` meta pages.
    pub counts: Vec<u64>,
}

impl ReadHistogram {
    pub(crate) fn record(&mut self, value: u32) {
        let slot = value as usize;
        if self.counts.len() <= slot {
            self.counts.resize(slot + 1, 0);
        }
        self.counts[slot] += 1;
    }

    /// Samples recorded.
    pub fn samples(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The mean.
    pub fn average(&self) -> f64 {
        let samples = self.samples();
        if samples == 0 {
            return 0.0;
        }
        let sum: u64 = self
            .counts
            .iter()
            .enumerate()
            .map(|(value, &count)| value as u64 * count)
            .sum();
        sum as f64 / samples as f64
    }

    /// The smallest value at or above which lies no more than `1 - quantile` of the samples.
    pub fn quantile(&self, quantile: f64) -> u32 {
        let samples = self.samples();
        let wanted = (quantile * samples as f64).ceil() as u64;
        let mut seen = 0;
        for (value, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= wanted.max(1) {
                return value as u32;
            }
        }
        self.max()
    }

    /// The largest value recorded.
    pub fn max(&self) -> u32 {
        self.counts
            .iter()
            .rposition(|&count| count > 0)
            .unwrap_or(0) as u32
    }
}

/// Everything an LSM engine reports.
#[derive(Debug, Clone)]
pub struct EngineStats {
    /// The preset.
    pub preset: Preset,
    /// h: levels including L0.
    pub height: usize,
    /// k: levels pinned in DRAM (L1..Lk).
    pub pinned_levels: usize,
    /// Per level below L0.
    pub levels: Vec<LevelStats>,
    /// Entries in L0.
    pub l0_entries: u64,
    /// DRAM by part.
    pub dram: DramUsage,
    /// Flash operations by purpose.
    pub flash: Counters,
    /// Meta-page reads per GET.
    pub meta_reads_per_get: ReadHistogram,
    /// L0 flushes.
    pub flushes: u64,
    /// Merges of a level into the next (the flush's merge into L1 not included).
    pub compactions: u64,
    /// Merges into the last level (flush merges included).
    pub last_level_compactions: u64,
    /// Compactions skipped for lack of space (retried at the next flush).
    pub compactions_deferred: u64,
    /// Levels unpinned because DRAM ran short.
    pub levels_unpinned: u64,
    /// Meta blocks collected by GC.
    pub gc_meta_victims: u64,
    /// Data blocks collected by GC.
    pub gc_data_victims: u64,
    /// Live meta pages GC moved.
    pub gc_meta_pages_moved: u64,
    /// Live records GC put back into L0 (`pink`).
    pub gc_records_reinserted: u64,
    /// Live records GC rewrote (`lightstore`).
    pub gc_records_rewritten: u64,
    /// Meta segments GC rewrote to point at moved records (`lightstore`).
    pub gc_segments_rewritten: u64,
    /// Controller work counted.
    pub cpu: CpuCounts,
    /// Controller time charged, in nanoseconds.
    pub cpu_ns: u64,
}

impl EngineStats {
    /// Write amplification: bytes programmed for any purpose per byte of user data programmed.
    pub fn write_amplification(&self) -> Option<f64> {
        self.flash.write_amplification()
    }

    /// Bloom figures summed over levels.
    pub fn bloom_total(&self) -> BloomLevelStats {
        let mut total = BloomLevelStats::default();
        for level in &self.levels {
            total.negatives += level.bloom.negatives;
            total.false_positives += level.bloom.false_positives;
            total.expected_false_positives += level.bloom.expected_false_positives;
        }
        total
    }
}

impl fmt::Display for EngineStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: h = {} (L0 included), k = {} pinned, L0 {} entries",
            self.preset, self.height, self.pinned_levels, self.l0_entries
        )?;
        for level in &self.levels {
            writeln!(
                f,
                "  L{}: {} entries / {} segments, {}, {} B DRAM, bloom {:.2} b/key fp {}/{} (expected {:.1})",
                level.level,
                level.entries,
                level.segments,
                if level.pinned { "pinned" } else { "flash" },
                level.dram_bytes,
                level.bloom.bits_per_key,
                level.bloom.false_positives,
                level.bloom.negatives,
                level.bloom.expected_false_positives
            )?;
        }
        let dram = &self.dram;
        writeln!(
            f,
            "  DRAM {} of {} B: L0 {}, level lists {}, pinned {}, bloom {}",
            dram.total(),
            dram.budget,
            dram.l0,
            dram.level_lists,
            dram.pinned_segments,
            dram.bloom_filters
        )?;
        writeln!(
            f,
            "  meta reads per GET: avg {:.3}, p99.99 {}, max {} over {} GETs",
            self.meta_reads_per_get.average(),
            self.meta_reads_per_get.quantile(0.9999),
            self.meta_reads_per_get.max(),
            self.meta_reads_per_get.samples()
        )?;
        let compaction = self.flash.of(Purpose::Compaction);
        writeln!(
            f,
            "  flushes {}, compactions {} ({} into the last level, {} deferred), I/O {} reads {} programs",
            self.flushes,
            self.compactions,
            self.last_level_compactions,
            self.compactions_deferred,
            compaction.reads,
            compaction.programs
        )?;
        writeln!(
            f,
            "  GC victims {} meta / {} data; {} meta pages moved, {} records re-inserted, {} rewritten, {} segments rewritten",
            self.gc_meta_victims,
            self.gc_data_victims,
            self.gc_meta_pages_moved,
            self.gc_records_reinserted,
            self.gc_records_rewritten,
            self.gc_segments_rewritten
        )?;
        writeln!(
            f,
            "  WAF {:.2}, CPU {} ns",
            self.write_amplification().unwrap_or(0.0),
            self.cpu_ns
        )?;
        write!(f, "{}", self.flash)
    }
}
