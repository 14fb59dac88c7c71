//! What the tree reports: DRAM by part (with the cached fixed part admission checks read) and the
//! engine's statistics.

use std::sync::Arc;

use kvssd_space::Space;

use super::bloom;
use super::LsmTree;
use crate::stats::{BloomLevelStats, DramUsage, EngineStats, LevelStats};

/// One level's DRAM: its list, its pinned segments and its Bloom filters, in bytes.
pub(super) type LevelDram = (u64, u64, u64);

impl LsmTree {
    /// DRAM of the level lists, pinned segments and Bloom filters.
    pub(super) fn dram_fixed_parts(&self) -> u64 {
        (0..self.levels.len())
            .map(|index| {
                let (list, pinned, bloom) = self.level_dram(index);
                list + pinned + bloom
            })
            .sum()
    }

    /// A fingerprint of what level `index`'s DRAM depends on: its segment list (a new list
    /// whenever a merge rebuilds it), its length, entries, key bytes, pinned flag (unpinning clears
    /// it) and whether it is the last level. Debug builds check every cache hit against a full
    /// recomputation.
    fn level_fingerprint(&self, index: usize) -> u64 {
        let level = &self.levels[index];
        let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
        for word in [
            Arc::as_ptr(&level.segments) as usize as u64,
            level.segments.len() as u64,
            level.entries,
            level.key_bytes,
            u64::from(level.pinned),
            u64::from(index + 1 == self.levels.len()),
        ] {
            hash = (hash ^ word).wrapping_mul(0x0000_0100_0000_01B3);
        }
        hash
    }

    pub(super) fn level_dram(&self, index: usize) -> LevelDram {
        let fingerprint = self.level_fingerprint(index);
        if let Some(Some((cached_for, parts))) = self.dram_level_cache.borrow().get(index) {
            if *cached_for == fingerprint {
                debug_assert_eq!(*parts, self.level_dram_walked(index));
                return *parts;
            }
        }
        let parts = self.level_dram_walked(index);
        let mut cache = self.dram_level_cache.borrow_mut();
        if cache.len() <= index {
            cache.resize(index + 1, None);
        }
        cache[index] = Some((fingerprint, parts));
        parts
    }

    fn level_dram_walked(&self, index: usize) -> LevelDram {
        let level = &self.levels[index];
        let last = index + 1 == self.levels.len();
        let list = level.list_dram_bytes(
            self.features.prefixes,
            self.features.range_pointers && !last,
        );
        let pinned = level
            .segments
            .iter()
            .filter(|segment| segment.entries.is_some())
            .count() as u64
            * self.page_bytes as u64;
        let bloom = level
            .segments
            .iter()
            .filter_map(|segment| segment.bloom.as_ref())
            .map(|filter| filter.dram_bytes())
            .sum();
        (list, pinned, bloom)
    }

    /// DRAM by part.
    pub fn dram_usage(&self) -> DramUsage {
        let mut usage = DramUsage {
            l0: self.l0_bytes,
            budget: self.dram_budget,
            ..DramUsage::default()
        };
        for index in 0..self.levels.len() {
            let (list, pinned, bloom) = self.level_dram(index);
            usage.level_lists += list;
            usage.pinned_segments += pinned;
            usage.bloom_filters += bloom;
        }
        usage
    }

    /// Everything the engine reports.
    pub fn stats(&self, space: &Space) -> EngineStats {
        let levels = (0..self.levels.len())
            .map(|index| {
                let level = &self.levels[index];
                let (list, pinned, bloom) = self.level_dram(index);
                let bits = self.bloom_bits_for(index);
                LevelStats {
                    level: index + 1,
                    entries: level.entries,
                    capacity_entries: if index + 1 == self.levels_max {
                        u64::MAX
                    } else {
                        self.level_capacity(index)
                    },
                    segments: level.segments.len() as u64,
                    pinned: level.pinned,
                    dram_bytes: list + pinned + bloom,
                    bloom: BloomLevelStats {
                        bits_per_key: bits,
                        monkey_fpr: if bits > 0.0 {
                            bloom::monkey_fpr(bits)
                        } else {
                            1.0
                        },
                        negatives: level.bloom_negatives,
                        false_positives: level.bloom_false_positives,
                        expected_false_positives: level.bloom_expected_false_positives,
                    },
                }
            })
            .collect();
        let flash = space.flash().counters();
        EngineStats {
            preset: self.config.preset,
            height: self.height(),
            pinned_levels: self.pinned_levels(),
            levels,
            l0_entries: self.l0.len() as u64,
            dram: self.dram_usage(),
            flash,
            meta_reads_per_get: self.gets.clone(),
            flushes: self.activity.flushes,
            compactions: self.activity.compactions,
            last_level_compactions: self.activity.last_level_compactions,
            compactions_deferred: self.activity.compactions_deferred,
            levels_unpinned: self.activity.levels_unpinned,
            gc_meta_victims: self.activity.gc_meta_victims,
            gc_data_victims: self.activity.gc_data_victims,
            gc_meta_pages_moved: self.activity.gc_meta_pages_moved,
            gc_records_reinserted: self.activity.gc_records_reinserted,
            gc_records_rewritten: self.activity.gc_records_rewritten,
            gc_segments_rewritten: self.activity.gc_segments_rewritten,
            cpu: self.cpu_total,
            cpu_ns: self.cpu_ns,
        }
    }

    pub(super) fn bloom_bits_for(&self, level: usize) -> f64 {
        if !self.features.bloom_filters {
            return 0.0;
        }
        self.bloom_bits_per_key
            .get(level)
            .or(self.bloom_bits_per_key.last())
            .copied()
            .unwrap_or(0.0)
    }
}
