//! Free space: the blocks each step (flush, merge, unpin) needs from the pool, and the GC that runs
//! until the pool can supply them and the reserves.

use kvssd_flash::SimTime;
use kvssd_space::{Space, Stream};

use super::segment::{ENTRY_OVERHEAD_BYTES, HEADER_BYTES};
use super::{Admission, LsmTree, Result, Step};
use crate::config::GcPolicy;
use crate::EngineError;

impl LsmTree {
    /// Blocks the free pool must supply for `step`.
    pub(super) fn blocks_needed(&self, space: &Space, step: Step) -> u64 {
        let (data_pages, meta_pages) = match step {
            Step::Nothing => (0, 0),
            Step::Flush | Step::FlushPacked(_) => {
                let mut data = space.data_pages_needed(
                    self.config.namespace,
                    self.l0.iter().filter_map(|(key, value)| {
                        value.value.as_ref().map(|v| (key.len(), v.len()))
                    }),
                );
                if let Step::FlushPacked(packed) = step {
                    // Pairs overwritten since they were packed are programmed all the same.
                    data = data.max(packed);
                }
                let upper = self.l0_key_bytes + self.l0.len() as u64 * ENTRY_OVERHEAD_BYTES as u64;
                (data, self.merge_pages_needed(upper, 0))
            }
            Step::Merge(index) => {
                let upper = self.level_encoded_bytes(index);
                (0, self.merge_pages_needed(upper, index + 1))
            }
            Step::Unpin(index) => (0, self.levels[index].segments.len() as u64),
        };
        space.blocks_needed(self.config.namespace, Stream::Data, data_pages)
            + space.blocks_needed(self.config.namespace, Stream::Meta, meta_pages)
    }

    /// Blocks a merge of every level into the last one could write: the worst case of the cascade
    /// a flush may start (pinned levels included, as they may have to be unpinned).
    pub(super) fn cascade_reserve_blocks(&self, space: &Space) -> u64 {
        space.blocks_needed(
            self.config.namespace,
            Stream::Meta,
            self.cascade_reserve_pages(),
        )
    }

    /// An upper bound of [`LsmTree::cascade_reserve_blocks`], without walking the logs.
    pub(super) fn cascade_reserve_blocks_at_most(&self, space: &Space) -> u64 {
        space.blocks_needed_at_most(
            self.config.namespace,
            Stream::Meta,
            self.cascade_reserve_pages(),
        )
    }

    fn cascade_reserve_pages(&self) -> u64 {
        let mut total = self.l0_key_bytes + self.l0.len() as u64 * ENTRY_OVERHEAD_BYTES as u64;
        for index in 0..self.levels.len() {
            total += self.level_encoded_bytes(index);
        }
        let usable = (self.page_bytes - HEADER_BYTES)
            .saturating_sub(self.key_len_max_seen + ENTRY_OVERHEAD_BYTES)
            .max(1) as u64;
        total.div_ceil(usable) + self.levels.len() as u64 + 1
    }

    pub(super) fn level_encoded_bytes(&self, index: usize) -> u64 {
        self.levels.get(index).map_or(0, |level| {
            level.key_bytes + level.entries * ENTRY_OVERHEAD_BYTES as u64
        })
    }

    /// Meta pages a merge of `upper_bytes` of entries into level `target` may write.
    pub(super) fn merge_pages_needed(&self, upper_bytes: u64, target: usize) -> u64 {
        let pinned = self.levels.get(target).map_or(
            target < self.pinned_target && self.features.pinning,
            |level| level.pinned,
        );
        if pinned {
            return 0;
        }
        let total = upper_bytes + self.level_encoded_bytes(target);
        // Each page may leave less than one entry unused at its end.
        let usable = (self.page_bytes - HEADER_BYTES)
            .saturating_sub(self.key_len_max_seen + ENTRY_OVERHEAD_BYTES)
            .max(1) as u64;
        total.div_ceil(usable) + 1
    }

    /// Runs GC until the free pool can supply `step` plus the reserves, or fails with
    /// [`EngineError::CapacityExceeded`] if GC cannot free enough.
    pub(super) fn ensure_space(
        &mut self,
        space: &mut Space,
        at: SimTime,
        step: Step,
        admission: Admission,
    ) -> Result<SimTime> {
        let mut t = at;
        let gc_reserve = u64::from(space.config().gc_reserve_blocks);
        let mut rounds = 0u64;
        loop {
            let mut needed = self.blocks_needed(space, step);
            if let Step::Flush | Step::FlushPacked(_) = step {
                // What L0 adds must not leave the tree unable to merge all the way down: that merge
                // is what turns deletes and overwrites into free space. Deletes may use half of
                // this reserve: they add no data, and their merges are what give space back.
                let cascade = self.cascade_reserve_blocks(space);
                needed += match admission {
                    Admission::Put => cascade,
                    Admission::Reserve => cascade / 2,
                };
            }
            let hard = needed
                + gc_reserve
                + if admission == Admission::Put {
                    u64::from(self.config.delete_reserve_blocks)
                } else {
                    0
                };
            let soft = hard.max(self.gc_threshold);
            let free = space.free_blocks();
            if free >= soft {
                return Ok(t);
            }
            rounds += 1;
            let victim = if rounds > space.geometry().blocks_total() {
                None
            } else {
                self.pick_victim(space)
            };
            let Some(victim) = victim else {
                if free >= hard {
                    return Ok(t);
                }
                // `pink`: L0 may be too full of re-inserted records for any data victim; flushing it
                // into a pinned L1 costs only its data pages and lets GC go on.
                if self.features.gc == GcPolicy::Reinsert
                    && !self.l0.is_empty()
                    && !self.flushing_for_gc
                    && rounds <= space.geometry().blocks_total()
                    && self.levels.first().is_some_and(|level| level.pinned)
                {
                    self.flushing_for_gc = true;
                    let flushed = self.flush_for_gc(space, t);
                    self.flushing_for_gc = false;
                    t = flushed?;
                    continue;
                }
                return Err(EngineError::CapacityExceeded(
                    "GC cannot free the blocks this write needs",
                ));
            };
            t = self.collect(space, t, victim)?;
        }
    }

    /// The next GC victim. `pink` takes a data block only while L0 can absorb its live records.
    pub(super) fn pick_victim(&self, space: &Space) -> Option<u64> {
        if self.features.gc == GcPolicy::Reinsert {
            let room = self
                .l0_reservation
                .saturating_sub(self.config.l0_bytes.max(self.l0_bytes));
            let l0_room = self
                .l0_reservation
                .saturating_sub(self.l0_bytes)
                .min(room + space.block_bytes());
            space.pick_victim_with(Some(self.config.namespace), |stream, valid| {
                // Re-inserted pairs take about their record size in L0 plus the per-entry overhead.
                stream == Stream::Meta || valid * 2 <= l0_room
            })
        } else {
            space.pick_victim_with(Some(self.config.namespace), |_, _| true)
        }
    }

    /// Collects blocks while the free pool is below the GC threshold (never fails for lack of
    /// victims: the threshold is a wish, the reserves are the requirement).
    pub(super) fn background_gc(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        if space.free_blocks() >= self.gc_threshold {
            return Ok(at);
        }
        match self.ensure_space(space, at, Step::Nothing, Admission::Reserve) {
            Ok(t) => Ok(t),
            Err(EngineError::CapacityExceeded(_)) => Ok(at),
            Err(error) => Err(error),
        }
    }
}
