//! A standalone LSM-tree engine: one [`LsmTree`] with a [`Space`] of its own.

use kvssd_flash::{Flash, SimTime};
use kvssd_space::Space;

use super::{LsmTree, Pairs, Plan, Result};
use crate::config::EngineConfig;
use crate::stats::{DramUsage, EngineStats};

/// An LSM-tree key-value engine that owns its flash: a [`LsmTree`] over a private [`Space`]. The
/// device layer instead keeps one space for many trees (namespaces).
///
/// Thread safety: single-threaded; every operation takes `&mut self`.
pub struct LsmEngine {
    space: Space,
    tree: LsmTree,
}

impl LsmEngine {
    /// Opens an engine over a fully erased flash array.
    ///
    /// Refuses a DRAM budget that cannot hold L0 and the level lists of a full device (at the
    /// configured expected key and value sizes) with [`crate::EngineError::DramBudgetTooSmall`].
    pub fn open(flash: Flash, config: EngineConfig) -> Result<LsmEngine> {
        let space = Space::open(flash, config.space.clone())?;
        let tree = LsmTree::open(&space, config)?;
        Ok(LsmEngine { space, tree })
    }

    /// The tree.
    pub fn tree(&self) -> &LsmTree {
        &self.tree
    }

    /// The plan made at open.
    pub fn plan(&self) -> &Plan {
        self.tree.plan()
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        self.tree.config()
    }

    /// The space layer (and through it the flash, its counters and geometry).
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// h: the number of levels, L0 included.
    pub fn height(&self) -> usize {
        self.tree.height()
    }

    /// k: the number of pinned levels (L1..Lk).
    pub fn pinned_levels(&self) -> usize {
        self.tree.pinned_levels()
    }

    /// Meta pages the most recent GET read.
    pub fn last_get_meta_reads(&self) -> u32 {
        self.tree.last_get_meta_reads()
    }

    /// Longest value this engine takes.
    pub fn value_bytes_max(&self) -> usize {
        self.tree.value_bytes_max()
    }

    /// The DRAM budget in bytes.
    pub fn dram_budget_bytes(&self) -> u64 {
        self.tree.dram_budget_bytes()
    }

    /// See [`LsmTree::get`].
    pub fn get(&mut self, at: SimTime, key: &[u8]) -> Result<(Option<Vec<u8>>, SimTime)> {
        self.tree.get(&mut self.space, at, key)
    }

    /// See [`LsmTree::put`].
    pub fn put(&mut self, at: SimTime, key: &[u8], value: &[u8]) -> Result<SimTime> {
        self.tree.put(&mut self.space, at, key, value)
    }

    /// See [`LsmTree::delete`].
    pub fn delete(&mut self, at: SimTime, key: &[u8]) -> Result<SimTime> {
        self.tree.delete(&mut self.space, at, key)
    }

    /// See [`LsmTree::scan`].
    pub fn scan(&mut self, at: SimTime, start: &[u8], count: usize) -> Result<(Pairs, SimTime)> {
        self.tree.scan(&mut self.space, at, start, count)
    }

    /// See [`LsmTree::flush_l0`].
    pub fn flush_l0(&mut self, at: SimTime) -> Result<SimTime> {
        self.tree.flush_l0(&mut self.space, at)
    }

    /// See [`LsmTree::detach_flush`].
    pub fn detach_flush(&mut self, for_checkpoint: bool) -> Option<super::DetachedFlush> {
        self.tree.detach_flush(&self.space, for_checkpoint)
    }

    /// See [`LsmTree::attach_flush`].
    pub fn attach_flush(&mut self, at: SimTime, flush: super::DetachedFlush) -> Result<SimTime> {
        self.tree.attach_flush(&mut self.space, at, flush)
    }

    /// DRAM by part.
    pub fn dram_usage(&self) -> DramUsage {
        self.tree.dram_usage()
    }

    /// Everything the engine reports.
    pub fn stats(&self) -> EngineStats {
        self.tree.stats(&self.space)
    }
}
