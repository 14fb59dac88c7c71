//! What a hash engine reports: DRAM by part, reads per GET, cache behaviour, GC work, flash
//! counters by purpose, WAF.

use std::fmt;

use kvssd_flash::{Counters, Purpose};
use kvssd_space::Space;

use super::{HashIndex, HashPreset};
use crate::{CpuCounts, ReadHistogram};

/// DRAM by part, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HashDramUsage {
    /// Buffered pairs (key, value and per-entry overhead).
    pub write_buffer: u64,
    /// `hash`: the bucket directory (one flash address per bucket page).
    pub bucket_directory: u64,
    /// `hash`: cached bucket pages (a page each).
    pub bucket_cache: u64,
    /// `kaml`: the table (slots times slot bytes).
    pub table: u64,
    /// The budget.
    pub budget: u64,
}

impl HashDramUsage {
    /// All parts added up.
    pub fn total(&self) -> u64 {
        self.write_buffer + self.bucket_directory + self.bucket_cache + self.table
    }
}

/// Everything a hash engine reports.
#[derive(Debug, Clone)]
pub struct HashStats {
    /// The preset.
    pub preset: HashPreset,
    /// Keys in the table (the write buffer not counted).
    pub entries: u64,
    /// Slots of the table.
    pub table_slots: u64,
    /// `hash`: bucket pages of the table.
    pub table_pages: u64,
    /// Bytes the whole table takes (bucket pages for `hash`, slots for `kaml`).
    pub table_bytes: u64,
    /// `hash`: bucket pages the cache holds at most.
    pub cache_pages_max: u64,
    /// Slots a key may occupy from its home slot on.
    pub probe_slots: u64,
    /// Pairs in the write buffer.
    pub write_buffer_entries: u64,
    /// DRAM by part.
    pub dram: HashDramUsage,
    /// Flash operations by purpose.
    pub flash: Counters,
    /// Bucket pages read per GET (GETs answered by the write buffer count 0).
    pub index_reads_per_get: ReadHistogram,
    /// Records read per GET: the value, plus one per signature collision.
    pub data_reads_per_get: ReadHistogram,
    /// Bucket-page accesses served by the cache.
    pub cache_hits: u64,
    /// Bucket-page accesses that missed it.
    pub cache_misses: u64,
    /// Bucket pages evicted from the cache.
    pub cache_evictions: u64,
    /// Dirty bucket pages written back (evictions and syncs).
    pub bucket_write_backs: u64,
    /// Bucket pages read from flash for any purpose.
    pub bucket_page_reads: u64,
    /// Records read whose key differed from the one looked up (signature collisions).
    pub signature_collisions: u64,
    /// Write-buffer flushes.
    pub flushes: u64,
    /// `kaml`: table resizes.
    pub resizes: u64,
    /// Bucket-page blocks collected by GC.
    pub gc_meta_victims: u64,
    /// Data blocks collected by GC.
    pub gc_data_victims: u64,
    /// Victims GC left alone because the free pool could not take their relocation.
    pub gc_victims_skipped: u64,
    /// Live bucket pages GC moved.
    pub gc_bucket_pages_moved: u64,
    /// Live records GC rewrote.
    pub gc_records_rewritten: u64,
    /// Records of data victims whose liveness GC checked.
    pub gc_records_checked: u64,
    /// Slots GC's liveness checks looked at: at most a probe window per record checked.
    pub gc_slots_examined: u64,
    /// Slots GC copied out of bucket pages for its liveness checks: at most a page per bucket page
    /// peeked at per victim, none from resident pages (every `kaml` slot is resident).
    pub gc_slots_copied: u64,
    /// Controller work counted.
    pub cpu: CpuCounts,
    /// Controller time charged, in nanoseconds.
    pub cpu_ns: u64,
}

impl HashStats {
    /// Write amplification: bytes programmed for any purpose per byte of user data programmed.
    pub fn write_amplification(&self) -> Option<f64> {
        self.flash.write_amplification()
    }

    /// Share of bucket-page accesses the cache served, if any happened.
    pub fn cache_hit_rate(&self) -> Option<f64> {
        let accesses = self.cache_hits + self.cache_misses;
        (accesses > 0).then(|| self.cache_hits as f64 / accesses as f64)
    }
}

impl HashIndex {
    /// DRAM by part.
    pub fn dram_usage(&self) -> HashDramUsage {
        let (cached, _) = self.table.cached_pages();
        HashDramUsage {
            write_buffer: self.buffer_bytes,
            bucket_directory: self.table.pages() * super::DIRECTORY_ENTRY_BYTES,
            bucket_cache: cached as u64 * self.page_bytes as u64,
            table: if self.config.preset == HashPreset::Kaml {
                self.table.total_slots() * self.slot_bytes
            } else {
                0
            },
            budget: self.dram_budget,
        }
    }

    /// Everything the index reports.
    pub fn stats(&self, space: &Space) -> HashStats {
        let counts = self.table.counts;
        let table_bytes = match self.config.preset {
            HashPreset::Hash => self.table.pages() * self.page_bytes as u64,
            HashPreset::Kaml => self.table.total_slots() * self.slot_bytes,
        };
        HashStats {
            preset: self.config.preset,
            entries: self.entries,
            table_slots: self.table.total_slots(),
            table_pages: self.table.pages(),
            table_bytes,
            cache_pages_max: self.table.cache_capacity() as u64,
            probe_slots: self.probe_slots,
            write_buffer_entries: self.buffer.len() as u64,
            dram: self.dram_usage(),
            flash: space.flash().counters(),
            index_reads_per_get: self.index_reads.clone(),
            data_reads_per_get: self.data_reads.clone(),
            cache_hits: counts.cache_hits,
            cache_misses: counts.cache_misses,
            cache_evictions: counts.evictions,
            bucket_write_backs: counts.write_backs,
            bucket_page_reads: counts.page_reads,
            signature_collisions: self.activity.signature_collisions,
            flushes: self.activity.flushes,
            resizes: self.activity.resizes,
            gc_meta_victims: self.activity.gc_meta_victims,
            gc_data_victims: self.activity.gc_data_victims,
            gc_victims_skipped: self.activity.gc_victims_skipped,
            gc_bucket_pages_moved: self.activity.gc_bucket_pages_moved,
            gc_records_rewritten: self.activity.gc_records_rewritten,
            gc_records_checked: self.activity.gc_records_checked,
            gc_slots_examined: self.activity.gc_slots_examined,
            gc_slots_copied: self.activity.gc_slots_copied,
            cpu: self.cpu_total,
            cpu_ns: self.cpu_ns,
        }
    }
}

impl fmt::Display for HashStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} keys in {} slots (load {:.2}), {} bucket pages, cache {} pages, probe {} slots, buffer {} pairs",
            self.preset,
            self.entries,
            self.table_slots,
            self.entries as f64 / self.table_slots.max(1) as f64,
            self.table_pages,
            self.cache_pages_max,
            self.probe_slots,
            self.write_buffer_entries
        )?;
        let dram = &self.dram;
        writeln!(
            f,
            "  DRAM {} of {} B: buffer {}, directory {}, bucket cache {}, table {}",
            dram.total(),
            dram.budget,
            dram.write_buffer,
            dram.bucket_directory,
            dram.bucket_cache,
            dram.table
        )?;
        writeln!(
            f,
            "  index reads per GET: avg {:.3}, p99.99 {}, max {}; data reads per GET: avg {:.3}, max {}; over {} GETs",
            self.index_reads_per_get.average(),
            self.index_reads_per_get.quantile(0.9999),
            self.index_reads_per_get.max(),
            self.data_reads_per_get.average(),
            self.data_reads_per_get.max(),
            self.index_reads_per_get.samples()
        )?;
        writeln!(
            f,
            "  cache hit rate {:.3} ({} hits, {} misses), {} evictions, {} write-backs, {} bucket reads, {} signature collisions",
            self.cache_hit_rate().unwrap_or(0.0),
            self.cache_hits,
            self.cache_misses,
            self.cache_evictions,
            self.bucket_write_backs,
            self.bucket_page_reads,
            self.signature_collisions
        )?;
        writeln!(
            f,
            "  flushes {}, resizes {}; GC victims {} bucket / {} data ({} skipped), {} bucket pages moved, {} records rewritten",
            self.flushes,
            self.resizes,
            self.gc_meta_victims,
            self.gc_data_victims,
            self.gc_victims_skipped,
            self.gc_bucket_pages_moved,
            self.gc_records_rewritten
        )?;
        let index = self.flash.of(Purpose::Index);
        writeln!(
            f,
            "  WAF {:.2}, index I/O {} reads {} programs, CPU {} ns",
            self.write_amplification().unwrap_or(0.0),
            index.reads,
            index.programs,
            self.cpu_ns
        )?;
        write!(f, "{}", self.flash)
    }
}
