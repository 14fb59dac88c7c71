//! The LSM-tree under the engine contract: every method is the tree's own operation.

use std::sync::Arc;

use kvssd_flash::SimTime;
use kvssd_space::Space;

use super::{DetachedFlush, LsmTree, Pairs, TreeSnapshot};
use crate::contract::{
    Capabilities, Engine, EngineReport, LevelsView, Located, LocatedPairs, Result,
};

impl Engine for LsmTree {
    fn preset_name(&self) -> &'static str {
        self.config.preset.name()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { ordered: true }
    }

    fn get(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        LsmTree::get(self, space, at, key)
    }

    fn locate(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<(Located, SimTime)> {
        LsmTree::locate(self, space, at, key)
    }

    fn contains(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<(bool, SimTime)> {
        LsmTree::contains(self, space, at, key)
    }

    fn put(&mut self, space: &mut Space, at: SimTime, key: &[u8], value: &[u8]) -> Result<SimTime> {
        LsmTree::put(self, space, at, key, value)
    }

    fn delete(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime> {
        LsmTree::delete(self, space, at, key)
    }

    fn admit_put(
        &self,
        space: &Space,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()> {
        LsmTree::admit_put(self, space, key, value_len, staged_bytes)
    }

    fn staged_bytes(&self, key: &[u8], value: Option<&[u8]>) -> u64 {
        LsmTree::staged_bytes(key, value)
    }

    fn prepare_stage(&mut self, space: &mut Space, at: SimTime, bytes: u64) -> Result<SimTime> {
        LsmTree::prepare_stage(self, space, at, bytes)
    }

    fn stage(&mut self, key: &[u8], value: Option<&[u8]>) {
        LsmTree::stage(self, key, value);
    }

    fn settle(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        LsmTree::settle(self, space, at)
    }

    fn staged_dram_bytes(&self) -> u64 {
        self.l0_bytes()
    }

    fn flush(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        self.flush_l0(space, at)
    }

    fn flush_before_checkpoint(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<(u64, SimTime)> {
        LsmTree::flush_before_checkpoint(self, space, at)
    }

    fn flush_detachable(&self) -> bool {
        LsmTree::flush_detachable(self)
    }

    fn detach_flush(&mut self, space: &Space, for_checkpoint: bool) -> Option<DetachedFlush> {
        LsmTree::detach_flush(self, space, for_checkpoint)
    }

    fn attach_flush(
        &mut self,
        space: &mut Space,
        at: SimTime,
        flush: DetachedFlush,
    ) -> Result<SimTime> {
        LsmTree::attach_flush(self, space, at, flush)
    }

    fn gc_candidate(&self, space: &Space) -> Option<u64> {
        LsmTree::gc_candidate(self, space)
    }

    fn collect_victim(
        &mut self,
        space: &mut Space,
        at: SimTime,
        block: u64,
    ) -> Result<Option<SimTime>> {
        LsmTree::collect_victim(self, space, at, block).map(Some)
    }

    fn scan(
        &mut self,
        space: &mut Space,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(Pairs, SimTime)> {
        LsmTree::scan(self, space, at, start, count)
    }

    fn scan_locate(
        &mut self,
        space: &mut Space,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(LocatedPairs, SimTime)> {
        LsmTree::scan_locate(self, space, at, start, count)
    }

    fn snapshot(&mut self) -> Result<Arc<TreeSnapshot>> {
        Ok(LsmTree::snapshot(self))
    }

    fn snapshot_dram_bytes(&self, snapshot: &TreeSnapshot) -> u64 {
        LsmTree::snapshot_dram_bytes(self, snapshot)
    }

    fn durable_state(&self) -> Vec<u8> {
        LsmTree::durable_state(self)
    }

    fn account_valid(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        LsmTree::account_valid(self, space, at)
    }

    fn report(&self, space: &Space) -> EngineReport {
        let stats = self.stats(space);
        let entries: Vec<String> = stats
            .levels
            .iter()
            .map(|level| format!("{}{}", level.entries, if level.pinned { "*" } else { "" }))
            .collect();
        let shape = format!(
            "h = {} (L0 + {} levels), k = {} pinned, entries per level [{}] (* pinned), worst case {} index reads per GET",
            stats.height,
            stats.levels.len(),
            stats.pinned_levels,
            entries.join(", "),
            stats.height.saturating_sub(stats.pinned_levels + 1)
        );
        EngineReport {
            staged_entries: stats.l0_entries,
            levels: stats.levels.len(),
            flushes: stats.flushes,
            compactions: stats.compactions,
            gc_victims: stats.gc_meta_victims + stats.gc_data_victims,
            cpu_ns: stats.cpu_ns,
            dram: stats.dram,
            dram_parts: vec![
                ("l0", stats.dram.l0),
                ("level_lists", stats.dram.level_lists),
                ("pinned_segments", stats.dram.pinned_segments),
                ("bloom_filters", stats.dram.bloom_filters),
            ],
            counters: vec![
                ("flushes", stats.flushes),
                ("flushes_detached", self.activity.flushes_detached),
                ("compactions", stats.compactions),
                ("gc_meta_victims", stats.gc_meta_victims),
                ("gc_data_victims", stats.gc_data_victims),
                ("gc_meta_pages_moved", stats.gc_meta_pages_moved),
                ("pinned_levels", stats.pinned_levels as u64),
                ("levels_unpinned", stats.levels_unpinned),
                ("compactions_deferred", stats.compactions_deferred),
                ("gc_records_reinserted", stats.gc_records_reinserted),
                ("gc_records_rewritten", stats.gc_records_rewritten),
                ("gc_segments_rewritten", stats.gc_segments_rewritten),
                ("write_stalls_flush", self.flushing.stalls().0),
                ("write_stall_flush_us", self.flushing.stalls().1 / 1_000),
                ("write_stalls_gc", self.collecting.stalls().0),
                ("write_stall_gc_us", self.collecting.stalls().1 / 1_000),
                ("write_stalls_compaction", self.compacting.stalls().0),
                (
                    "write_stall_compaction_us",
                    self.compacting.stalls().1 / 1_000,
                ),
            ],
            shape,
        }
    }

    fn dram_budget_bytes(&self) -> u64 {
        LsmTree::dram_budget_bytes(self)
    }

    fn spare_dram_bytes(&self) -> u64 {
        LsmTree::spare_dram_bytes(self)
    }

    fn levels_view(&self) -> Option<LevelsView> {
        Some(LevelsView {
            l0: self.inspect_l0(),
            levels: self.inspect_levels(),
        })
    }

    fn take_released(&mut self) -> Option<Box<dyn Send>> {
        let detached = std::mem::take(&mut self.released_detached);
        match self.released.take() {
            None if detached.is_empty() => None,
            l0 => Some(Box::new((l0, detached)) as Box<dyn Send>),
        }
    }
}

#[cfg(test)]
mod tests {
    use kvssd_flash::{ControllerModel, Flash, Profile, TimingProfile};
    use kvssd_space::Space;

    use crate::{Engine, EngineConfig, LsmTree, Preset};

    /// Puts until the tree has flushed once; returns how many pairs the L0 it left for the caller
    /// to drop held, if it left one.
    fn released_pairs_after_a_flush(timing: Option<TimingProfile>) -> Option<usize> {
        let profile = Profile::test_min();
        let flash = Flash::new(profile.geometry, timing).expect("flash");
        let config = EngineConfig::test_min(Preset::Pink);
        let mut space = Space::open(flash, config.space.clone()).expect("space");
        let mut tree = LsmTree::open(&space, config).expect("tree");
        let mut t = 0;
        let mut id = 0u32;
        while tree.activity.flushes == 0 {
            t = tree
                .put(&mut space, t, &id.to_be_bytes(), &[7; 16])
                .expect("put");
            id += 1;
        }
        let pairs = tree.released.as_ref().map(|l0| l0.len());
        assert_eq!(tree.take_released().is_some(), pairs.is_some());
        assert!(tree.take_released().is_none(), "handed over once");
        pairs
    }

    /// A flush that ran at once leaves its write buffer for the caller to drop (a device drops it
    /// after its lock); a flush of the controller's background thread keeps it readable instead.
    #[test]
    fn a_flush_that_ran_at_once_leaves_its_write_buffer_to_the_caller() {
        let pairs = released_pairs_after_a_flush(None).expect("the flushed L0");
        assert!(
            pairs > 1,
            "the flushed pairs, not the one that found L0 full"
        );
        let mut timing = TimingProfile::pink();
        timing.controller = ControllerModel::Threads;
        assert_eq!(released_pairs_after_a_flush(Some(timing)), None);
    }
}

#[cfg(test)]
mod checkpoint_tests {
    use kvssd_space::Space;

    use super::super::write::CHECKPOINT_FLUSH_SHARE;
    use crate::LsmTree;

    /// Before a checkpoint, an L0 holding at least its share is flushed (and its bytes
    /// reported); a smaller one is left for the checkpoint to carry.
    #[test]
    fn a_checkpoint_flushes_an_l0_past_its_share_and_leaves_a_smaller_one() {
        let (mut space, mut tree) = super::super::test_tree();
        let l0_bytes = tree.config.l0_bytes;
        let mut t = 0;
        let mut id = 0u32;
        let mut put_until = |tree: &mut LsmTree, space: &mut Space, t: &mut u64, bytes: u64| {
            while tree.l0_bytes() < bytes {
                *t = tree
                    .put(space, *t, &id.to_be_bytes(), &[7; 64])
                    .expect("put");
                id += 1;
            }
        };
        let share = l0_bytes / CHECKPOINT_FLUSH_SHARE;
        put_until(&mut tree, &mut space, &mut t, share / 2);
        let (flushed, done) = tree
            .flush_before_checkpoint(&mut space, t)
            .expect("checkpoint flush");
        assert_eq!((flushed, done), (0, t), "under its share, L0 stays");
        assert_eq!(tree.activity.flushes, 0);

        put_until(&mut tree, &mut space, &mut t, share);
        let staged = tree.l0_bytes();
        let (flushed, _) = tree
            .flush_before_checkpoint(&mut space, t)
            .expect("checkpoint flush");
        assert_eq!(flushed, staged, "the whole L0 is flushed and reported");
        assert_eq!(tree.l0_bytes(), 0);
        assert_eq!(tree.activity.flushes, 1);
        let (found, _) = tree.get(&mut space, t, &0u32.to_be_bytes()).expect("get");
        assert_eq!(
            found.as_deref(),
            Some(&[7u8; 64][..]),
            "flushed pairs read back"
        );
    }
}
