//! Flush, compaction (leveling) and level pinning.
//!
//! Every step — flush L0 into L1, merge Li into Li+1, unpin a level — first makes sure the free pool
//! can supply all the pages it may write, then runs to completion: a step that cannot get its space
//! does not start, so the tree is always consistent (levels may only stay over capacity).

use std::collections::BTreeMap;
use std::sync::Arc;

use kvssd_flash::{Lane, Purpose, SimTime};

use super::level;
use super::segment::{self, Entry};
use super::{in_background, Admission, LsmTree, Result, Step};
use crate::EngineError;
use kvssd_space::Space;

impl LsmTree {
    /// Flushes L0: values to data segments, keys and pointers merged into L1, then merges down any
    /// level over capacity and unpins levels if DRAM ran short.
    pub(super) fn flush(
        &mut self,
        space: &mut Space,
        at: SimTime,
        admission: Admission,
    ) -> Result<SimTime> {
        self.flushing.clear();
        let t = self.flush_into_l1(space, at, admission)?;
        self.compact(space, t)
    }

    /// Merges down every level over capacity and unpins levels if DRAM ran short: the work a
    /// flush leaves for compaction.
    pub(super) fn compact(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let t = self.cascade(space, at)?;
        in_background(space, t, Lane::Compaction, |space| {
            self.enforce_dram(space, t)
        })
        .0
    }

    /// Flushes L0 into L1 alone: its values to data segments, its keys merged into L1.
    pub(super) fn flush_into_l1(
        &mut self,
        space: &mut Space,
        at: SimTime,
        admission: Admission,
    ) -> Result<SimTime> {
        let mut t = self.ensure_space(space, at, Step::Flush, admission)?;
        if self.l0.is_empty() {
            return Ok(t);
        }
        // Taken as shared: the immutable buffer of a background flush holds it too, and
        // writing its values only reads it.
        let pairs = std::mem::take(&mut self.l0);
        let l0_bytes = std::mem::replace(&mut self.l0_bytes, 0);
        let l0_key_bytes = std::mem::replace(&mut self.l0_key_bytes, 0);
        self.l0_epoch += 1;
        let result = self.write_values(space, t, &pairs);
        let (entries, written) = match result {
            Ok(done) => done,
            Err(error) => {
                // Keep the pairs: the step failed before anything referenced the new records.
                self.l0 = pairs;
                self.l0_bytes = l0_bytes;
                self.l0_key_bytes = l0_key_bytes;
                return Err(error);
            }
        };
        // The values are on flash: the pairs are not needed here any more. A flush through
        // `flush_in_background` still holds them, as an immutable L0 under the threads model or
        // to leave them for its caller to free after its locks (`Engine::take_released`); a
        // direct flush frees them now, before the merge makes its pages.
        drop(pairs);
        t = self.charge(space, written);
        t = self.merge_into(space, t, entries, 0)?;
        self.activity.flushes += 1;
        Ok(t)
    }

    /// Merges down every level over capacity, top first. A merge that cannot get its space is
    /// deferred to the next flush.
    fn cascade(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let mut t = at;
        loop {
            let over = (0..self.levels.len()).find(|&index| {
                self.levels[index].entries > self.level_capacity(index)
                    && (index + 1 < self.levels.len() || self.levels.len() < self.levels_max)
            });
            let Some(index) = over else {
                return Ok(t);
            };
            // Merges run on the compaction lane; a writer whose flush queues one while two are
            // still in flight waits for the oldest.
            let (result, job) = in_background(space, t, Lane::Compaction, |space| {
                self.compact_level(space, t, index)
            });
            match result {
                Ok(done) => t = done,
                Err(EngineError::CapacityExceeded(_)) => {
                    self.activity.compactions_deferred += 1;
                    return Ok(t);
                }
                Err(error) => return Err(error),
            }
            if job.is_some() {
                t = self.compacting.wait(space, t);
                let _ = self.compacting.started((), job);
            }
        }
    }

    /// Merges level `index` into the next one and empties it.
    fn compact_level(&mut self, space: &mut Space, at: SimTime, index: usize) -> Result<SimTime> {
        let mut t = self.ensure_space(space, at, Step::Merge(index), Admission::Reserve)?;
        let (upper, read) = self.level_entries(space, t, index, Purpose::Compaction)?;
        t = read;
        t = self.merge_into(space, t, upper, index + 1)?;
        let old = self.levels[index].set_segments(Vec::new());
        for segment in old.iter() {
            if let Some(page) = segment.page {
                space.invalidate_meta(page);
            }
        }
        self.levels[index].entries = 0;
        self.levels[index].key_bytes = 0;
        if index > 0 {
            let (upper, lower) = self.levels.split_at_mut(index);
            level::link(&mut upper[index - 1], &lower[0], &mut self.cpu_pending);
        }
        self.activity.compactions += 1;
        Ok(self.charge(space, t))
    }

    /// Every entry of a level, in order (pinned: from DRAM; else read, all pages issued at `at`).
    pub(super) fn level_entries(
        &mut self,
        space: &mut Space,
        at: SimTime,
        index: usize,
        purpose: Purpose,
    ) -> Result<(Vec<Entry>, SimTime)> {
        let mut done = at;
        let Some(level) = self.levels.get(index) else {
            return Ok((Vec::new(), at));
        };
        let mut all = Vec::with_capacity(level.entries as usize);
        for segment in 0..level.segments.len() {
            let (entries, finished) =
                Self::segment_entries_of(space, &self.levels[index], at, segment, purpose)?;
            done = done.max(finished);
            // A pinned segment's entries stay shared with the level: copy them straight in.
            match Arc::try_unwrap(entries) {
                Ok(entries) => all.extend(entries),
                Err(shared) => all.extend(shared.iter().cloned()),
            }
        }
        Ok((all, done))
    }

    /// Recomputes the range pointers into and out of level `index`.
    pub(super) fn relink(&mut self, index: usize) {
        if !self.features.range_pointers {
            return;
        }
        if index > 0 {
            let (upper, lower) = self.levels.split_at_mut(index);
            level::link(&mut upper[index - 1], &lower[0], &mut self.cpu_pending);
        }
        if index + 1 < self.levels.len() {
            let (upper, lower) = self.levels.split_at_mut(index + 1);
            level::link(&mut upper[index], &lower[0], &mut self.cpu_pending);
        }
    }

    /// Unpins the deepest pinned level while DRAM exceeds the budget: its segments are written to
    /// flash and dropped from DRAM, and no level that deep is pinned again.
    pub(super) fn enforce_dram(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let mut t = at;
        // The cached sum of the levels' parts: a full count walks every segment of every level.
        while self.l0_bytes + self.dram_fixed_parts() > self.dram_budget {
            let Some(index) = self.levels.iter().rposition(|level| level.pinned) else {
                return Ok(t);
            };
            t = match self.ensure_space(space, t, Step::Unpin(index), Admission::Reserve) {
                Ok(t) => t,
                Err(EngineError::CapacityExceeded(_)) => return Ok(t),
                Err(error) => return Err(error),
            };
            let mut done = t;
            for slot in 0..self.levels[index].segments.len() {
                let Some(entries) = self.levels[index].segments[slot].entries.clone() else {
                    continue;
                };
                let image = segment::encode(&entries, self.page_bytes);
                let (page, finished) =
                    space.write_meta(t, Purpose::Compaction, self.config.namespace, &image)?;
                done = done.max(finished);
                Arc::make_mut(&mut self.levels[index].segments)[slot].unpin(page);
            }
            self.levels[index].pinned = false;
            self.pinned_target = self.pinned_target.min(index);
            self.activity.levels_unpinned += 1;
            t = done;
        }
        Ok(t)
    }

    /// Flushes L0 into a pinned L1 without cascading, for GC. `pink` re-inserts the live records of
    /// data victims into L0, and takes a data victim only while L0 has room for its records; when
    /// L0 is full of them and no victim is acceptable, GC makes room this way. A merge into a pinned
    /// L1 happens in DRAM, so this writes only the data pages of L0's values; the merges further
    /// down run at the next regular flush. REQUIRES: L1 is pinned.
    pub(super) fn flush_for_gc(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        debug_assert!(self.levels.first().is_some_and(|level| level.pinned));
        self.snapshot_cache = None;
        self.flushing.clear();
        let pairs = std::mem::take(&mut self.l0);
        let l0_bytes = std::mem::replace(&mut self.l0_bytes, 0);
        let l0_key_bytes = std::mem::replace(&mut self.l0_key_bytes, 0);
        self.l0_epoch += 1;
        match self.write_values(space, at, &pairs) {
            Ok((entries, written)) => {
                let t = self.charge(space, written);
                let t = self.merge_into(space, t, entries, 0)?;
                self.activity.flushes += 1;
                Ok(t)
            }
            Err(error) => {
                self.l0 = pairs;
                self.l0_bytes = l0_bytes;
                self.l0_key_bytes = l0_key_bytes;
                Err(error)
            }
        }
    }

    /// Flushes L0 now (for tests and shutdown paths); a no-op when L0 is empty.
    pub fn flush_l0(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        self.snapshot_cache = None;
        self.flush(space, at, Admission::Reserve)
    }

    /// Re-inserts pairs GC found live into L0 (`pink`, PinK §4.5).
    pub(super) fn reinsert(&mut self, pairs: BTreeMap<Vec<u8>, Vec<u8>>) {
        for (key, value) in pairs {
            self.cpu_pending.bytes_copied += (key.len() + value.len()) as u64;
            self.l0_insert(super::L0Key::new(&key), Some(Arc::from(value)), true);
            self.activity.gc_records_reinserted += 1;
        }
    }
}
