//! The `block` FTL under the engine contract: keys are logical block numbers, values are logical
//! blocks (or parts of one, with an offset in the key); a delete is a trim.

use kvssd_flash::SimTime;
use kvssd_space::Space;

use super::BlockIndex;
use crate::contract::{Capabilities, Engine, EngineReport, Result};
use crate::DramUsage;

impl Engine for BlockIndex {
    fn preset_name(&self) -> &'static str {
        "block"
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
        let lba = self.parse_block_key(key)?;
        self.read_block(space, at, lba)
    }

    fn contains(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<(bool, SimTime)> {
        let _ = space;
        let lba = self.parse_block_key(key)?;
        let present = match self.buffer.get(&lba) {
            Some(staged) => !matches!(staged, super::Staged::Trim),
            None => self.slot_of(lba).is_some(),
        };
        Ok((present, at))
    }

    fn put(&mut self, space: &mut Space, at: SimTime, key: &[u8], value: &[u8]) -> Result<SimTime> {
        BlockIndex::put(self, space, at, key, value)
    }

    fn delete(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime> {
        BlockIndex::delete(self, space, at, key)
    }

    fn admit_put(
        &self,
        space: &Space,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()> {
        BlockIndex::admit_put(self, space, key, value_len, staged_bytes)
    }

    fn staged_bytes(&self, key: &[u8], value: Option<&[u8]>) -> u64 {
        let _ = key;
        self.staged_entry_bytes(value)
    }

    fn prepare_stage(&mut self, space: &mut Space, at: SimTime, bytes: u64) -> Result<SimTime> {
        BlockIndex::prepare_stage(self, space, at, bytes)
    }

    fn stage(&mut self, key: &[u8], value: Option<&[u8]>) {
        BlockIndex::stage(self, key, value);
    }

    fn settle(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        BlockIndex::settle(self, space, at)
    }

    fn staged_dram_bytes(&self) -> u64 {
        self.buffered_bytes()
    }

    fn flush(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        BlockIndex::flush(self, space, at)
    }

    fn gc_candidate(&self, space: &Space) -> Option<u64> {
        BlockIndex::gc_candidate(self, space)
    }

    fn collect_victim(
        &mut self,
        space: &mut Space,
        at: SimTime,
        block: u64,
    ) -> Result<Option<SimTime>> {
        self.collect(space, at, block)
    }

    fn durable_state(&self) -> Vec<u8> {
        BlockIndex::durable_state(self)
    }

    fn account_valid(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        BlockIndex::account_valid(self, space, at)
    }

    fn report(&self, space: &Space) -> EngineReport {
        let _ = space;
        let activity = self.activity;
        let table = self.config.logical_blocks * super::MAP_ENTRY_BYTES;
        EngineReport {
            staged_entries: self.buffer.len() as u64,
            levels: 0,
            flushes: activity.flushes,
            compactions: 0,
            gc_victims: activity.gc_data_victims,
            cpu_ns: self.cpu_ns,
            dram: DramUsage {
                l0: self.buffer_bytes,
                level_lists: table,
                pinned_segments: 0,
                bloom_filters: 0,
                budget: self.dram_budget,
            },
            dram_parts: vec![
                ("write_buffer", self.buffer_bytes),
                ("mapping_table", table),
            ],
            counters: vec![
                ("mapped_blocks", self.mapped),
                ("whole_block_writes", activity.whole_block_writes),
                ("read_modify_writes", activity.read_modify_writes),
                ("read_modify_write_reads", activity.read_modify_write_reads),
                ("trims", activity.trims),
                ("gc_data_victims", activity.gc_data_victims),
                ("gc_victims_skipped", activity.gc_victims_skipped),
                ("gc_records_rewritten", activity.gc_records_rewritten),
            ],
            shape: format!(
                "{} logical blocks of {} B ({} mapped), map {} B in DRAM, write buffer {} B, {} applications, {} read-modify-write reads",
                self.config.logical_blocks,
                self.config.logical_block_bytes,
                self.mapped,
                table,
                self.config.write_buffer_bytes,
                activity.flushes,
                activity.read_modify_write_reads
            ),
        }
    }

    fn dram_budget_bytes(&self) -> u64 {
        BlockIndex::dram_budget_bytes(self)
    }
}
