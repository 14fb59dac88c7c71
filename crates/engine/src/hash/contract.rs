//! The hash index under the engine contract: every method is the index's own operation, its
//! errors turned into the engine layer's (a full probe window is a capacity refusal).

use kvssd_flash::SimTime;
use kvssd_space::Space;

use super::{HashIndex, HashPreset};
use crate::contract::{Capabilities, Engine, EngineReport, Result};
use crate::DramUsage;

impl Engine for HashIndex {
    fn preset_name(&self) -> &'static str {
        self.config.preset.name()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { ordered: false }
    }

    fn get(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        Ok(HashIndex::get(self, space, at, key)?)
    }

    fn contains(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<(bool, SimTime)> {
        Ok(HashIndex::contains(self, space, at, key)?)
    }

    fn prefetch_gets(&self, space: &Space, keys: &[&[u8]]) -> bool {
        HashIndex::prefetch_gets(self, space, keys);
        true
    }

    fn put(&mut self, space: &mut Space, at: SimTime, key: &[u8], value: &[u8]) -> Result<SimTime> {
        Ok(HashIndex::put(self, space, at, key, value)?)
    }

    fn delete(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime> {
        Ok(HashIndex::delete(self, space, at, key)?)
    }

    fn admit_put(
        &self,
        space: &Space,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()> {
        Ok(HashIndex::admit_put(
            self,
            space,
            key,
            value_len,
            staged_bytes,
        )?)
    }

    fn staged_bytes(&self, key: &[u8], value: Option<&[u8]>) -> u64 {
        HashIndex::staged_bytes(key, value)
    }

    fn prepare_stage(&mut self, space: &mut Space, at: SimTime, bytes: u64) -> Result<SimTime> {
        Ok(HashIndex::prepare_stage(self, space, at, bytes)?)
    }

    fn stage(&mut self, key: &[u8], value: Option<&[u8]>) {
        HashIndex::stage(self, key, value);
    }

    fn settle(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        Ok(HashIndex::settle(self, space, at)?)
    }

    fn staged_dram_bytes(&self) -> u64 {
        self.buffered_bytes()
    }

    fn flush(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        Ok(self.flush_write_buffer(space, at)?)
    }

    fn gc_candidate(&self, space: &Space) -> Option<u64> {
        HashIndex::gc_candidate(self, space)
    }

    fn collect_victim(
        &mut self,
        space: &mut Space,
        at: SimTime,
        block: u64,
    ) -> Result<Option<SimTime>> {
        Ok(HashIndex::collect_victim(self, space, at, block)?)
    }

    fn durable_state(&self) -> Vec<u8> {
        HashIndex::durable_state(self)
    }

    fn account_valid(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        Ok(HashIndex::account_valid(self, space, at)?)
    }

    fn report(&self, space: &Space) -> EngineReport {
        let stats = self.stats(space);
        let lookups = stats.cache_hits + stats.cache_misses;
        let shape = format!(
            "{} bucket pages ({} slots of {} probes), cache of {} pages, hit rate {:.2}, {} write-backs, {} flushes of the write buffer, GC victims {} bucket / {} data",
            stats.table_pages,
            stats.table_slots,
            stats.probe_slots,
            stats.cache_pages_max,
            stats.cache_hits as f64 / lookups.max(1) as f64,
            stats.bucket_write_backs,
            stats.flushes,
            stats.gc_meta_victims,
            stats.gc_data_victims
        );
        let dram = stats.dram;
        EngineReport {
            staged_entries: stats.write_buffer_entries,
            levels: 0,
            flushes: stats.flushes,
            compactions: 0,
            gc_victims: stats.gc_meta_victims + stats.gc_data_victims,
            cpu_ns: stats.cpu_ns,
            dram: DramUsage {
                l0: dram.write_buffer,
                level_lists: dram.bucket_directory + dram.bucket_cache + dram.table,
                pinned_segments: 0,
                bloom_filters: 0,
                budget: dram.budget,
            },
            dram_parts: vec![
                ("write_buffer", dram.write_buffer),
                ("bucket_directory", dram.bucket_directory),
                ("bucket_cache", dram.bucket_cache),
                ("table", dram.table),
            ],
            counters: vec![
                ("cache_hits", stats.cache_hits),
                ("cache_misses", stats.cache_misses),
                ("bucket_write_backs", stats.bucket_write_backs),
                ("gc_meta_victims", stats.gc_meta_victims),
                ("gc_data_victims", stats.gc_data_victims),
                ("gc_records_rewritten", stats.gc_records_rewritten),
                ("gc_bucket_pages_moved", stats.gc_bucket_pages_moved),
                ("gc_records_checked", stats.gc_records_checked),
                ("gc_slots_examined", stats.gc_slots_examined),
                ("gc_slots_copied", stats.gc_slots_copied),
                ("write_stalls_flush", self.flushing.stalls().0),
                ("write_stall_flush_us", self.flushing.stalls().1 / 1_000),
                ("write_stalls_gc", self.collecting.stalls().0),
                ("write_stall_gc_us", self.collecting.stalls().1 / 1_000),
            ],
            shape,
        }
    }

    fn dram_budget_bytes(&self) -> u64 {
        HashIndex::dram_budget_bytes(self)
    }

    fn confined_to_logs(&self) -> bool {
        self.config().preset == HashPreset::Kaml && self.config().log_free_lists
    }
}
