//! A standalone hash engine: one [`HashIndex`] with a [`Space`] of its own.

use kvssd_flash::{Flash, SimTime};
use kvssd_space::Space;

use super::{HashConfig, HashDramUsage, HashIndex, HashStats, Result};

/// A hash key-value engine that owns its flash: a [`HashIndex`] over a private [`Space`]. Same
/// shape as [`crate::LsmEngine`], so a device layer can hold either.
///
/// Thread safety: single-threaded; every operation takes `&mut self`.
pub struct HashEngine {
    space: Space,
    index: HashIndex,
}

impl HashEngine {
    /// Opens an engine over a fully erased flash array.
    pub fn open(flash: Flash, config: HashConfig) -> Result<HashEngine> {
        let space = Space::open(flash, config.space.clone())?;
        let index = HashIndex::open(&space, config)?;
        Ok(HashEngine { space, index })
    }

    /// The index.
    pub fn index(&self) -> &HashIndex {
        &self.index
    }

    /// The configuration.
    pub fn config(&self) -> &HashConfig {
        self.index.config()
    }

    /// The space layer (and through it the flash, its counters and geometry).
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// Bucket pages the most recent GET read.
    pub fn last_get_index_reads(&self) -> u32 {
        self.index.last_get_index_reads()
    }

    /// Records the most recent GET read.
    pub fn last_get_data_reads(&self) -> u32 {
        self.index.last_get_data_reads()
    }

    /// Longest value this engine takes.
    pub fn value_bytes_max(&self) -> usize {
        self.index.value_bytes_max()
    }

    /// The DRAM budget in bytes.
    pub fn dram_budget_bytes(&self) -> u64 {
        self.index.dram_budget_bytes()
    }

    /// See [`HashIndex::get`].
    pub fn get(&mut self, at: SimTime, key: &[u8]) -> Result<(Option<Vec<u8>>, SimTime)> {
        self.index.get(&mut self.space, at, key)
    }

    /// See [`HashIndex::put`].
    pub fn put(&mut self, at: SimTime, key: &[u8], value: &[u8]) -> Result<SimTime> {
        self.index.put(&mut self.space, at, key, value)
    }

    /// See [`HashIndex::delete`].
    pub fn delete(&mut self, at: SimTime, key: &[u8]) -> Result<SimTime> {
        self.index.delete(&mut self.space, at, key)
    }

    /// See [`HashIndex::scan`]: always refused with [`super::HashError::Unsupported`].
    pub fn scan(
        &mut self,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(crate::Pairs, SimTime)> {
        self.index.scan(&mut self.space, at, start, count)
    }

    /// See [`HashIndex::flush_write_buffer`].
    pub fn flush_write_buffer(&mut self, at: SimTime) -> Result<SimTime> {
        self.index.flush_write_buffer(&mut self.space, at)
    }

    /// See [`HashIndex::sync`].
    pub fn sync(&mut self, at: SimTime) -> Result<SimTime> {
        self.index.sync(&mut self.space, at)
    }

    /// DRAM by part.
    pub fn dram_usage(&self) -> HashDramUsage {
        self.index.dram_usage()
    }

    /// Everything the engine reports.
    pub fn stats(&self) -> HashStats {
        self.index.stats(&self.space)
    }
}
