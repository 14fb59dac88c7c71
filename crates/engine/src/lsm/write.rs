//! Writes: puts and deletes into L0, batches staged into L0 and settled, and the data records an L0
//! flush appends.

use std::sync::Arc;

use kvssd_flash::{Lane, Purpose, SimTime};
use kvssd_space::Space;

use super::segment::{Entry, ENTRY_OVERHEAD_BYTES, HEADER_BYTES, TOMBSTONE};
use super::{
    in_background, Admission, L0Key, L0Map, L0Value, LsmTree, Result, L0_ENTRY_OVERHEAD_BYTES,
};
use crate::EngineError;

/// A checkpoint that trims the log flushes L0 first when L0 holds at least this share (one over
/// it) of its size ([`LsmTree::flush_before_checkpoint`]). Below it, encoding L0 costs less than
/// a flush's merge into L1, which does not shrink with L0.
pub(crate) const CHECKPOINT_FLUSH_SHARE: u64 = 4;

impl LsmTree {
    /// Stores `value` under `key`, replacing any older version.
    ///
    /// Refused with [`EngineError::CapacityExceeded`] (and nothing changed) when user data would
    /// exceed the raw capacity less over-provisioning, when flushing L0 would need blocks that GC
    /// cannot free without touching the delete and GC reserves, or when the index's DRAM is full.
    pub fn put(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        value: &[u8],
    ) -> Result<SimTime> {
        self.check_key(key)?;
        if value.len() > self.value_bytes_max {
            return Err(EngineError::ValueTooLarge {
                len: value.len(),
                max: self.value_bytes_max,
            });
        }
        self.admit_put(space, key, value.len(), 0)?;
        self.snapshot_cache = None;
        self.insert(space, at, key, Some(value), Admission::Put)
    }

    /// Checks that a put of `key` with a value of `value_len` bytes would be admitted, with
    /// `staged_bytes` more already promised to earlier stores of the same batch. Changes nothing.
    pub fn admit_put(
        &self,
        space: &Space,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()> {
        self.check_key(key)?;
        if value_len > self.value_bytes_max {
            return Err(EngineError::ValueTooLarge {
                len: value_len,
                max: self.value_bytes_max,
            });
        }
        let footprint = space.record_footprint(key.len(), value_len);
        // User data, plus the room a merge of the whole tree needs while old and new meta segments
        // coexist, must fit the capacity less over-provisioning.
        let fits = |transient_blocks: u64| {
            space.valid_bytes()
                + self.l0_bytes
                + staged_bytes
                + footprint
                + transient_blocks * space.block_bytes()
                <= space.user_capacity_bytes()
        };
        // The bound is cheap and settles all but the puts near capacity.
        if !fits(self.cascade_reserve_blocks_at_most(space))
            && !fits(self.cascade_reserve_blocks(space))
        {
            return Err(EngineError::CapacityExceeded(
                "user data would exceed the capacity less over-provisioning",
            ));
        }
        // The index's DRAM: the level lists must leave room for L0 and one flush's new entries.
        // A flush adds at most one level-list entry per page of L0's entries, plus one per level
        // for the ragged ends of the merged runs.
        debug_assert_eq!(
            self.l0_key_bytes,
            self.l0.keys().map(|key| key.len() as u64).sum::<u64>()
        );
        let l0_keys = self.l0_key_bytes + key.len() as u64;
        let l0_meta = l0_keys + (self.l0.len() as u64 + 1) * ENTRY_OVERHEAD_BYTES as u64;
        let usable =
            (self.page_bytes - HEADER_BYTES - ENTRY_OVERHEAD_BYTES - crate::KEY_BYTES_MAX) as u64;
        let new_segments = l0_meta.div_ceil(usable.max(1)) + self.levels.len() as u64 + 1;
        let growth = new_segments * (8 + 4 + 4 + self.key_len_max_seen as u64);
        if self.dram_fixed_parts() + self.l0_reservation + growth > self.dram_budget
            && self.pinned_levels() == 0
        {
            return Err(EngineError::CapacityExceeded(
                "the level lists fill the DRAM budget",
            ));
        }
        Ok(())
    }

    /// Makes room in L0 for a batch that will stage `bytes` of pairs (key, value and per-entry
    /// overhead) with [`LsmTree::stage`]: flushes L0 first if they would not fit. Changes no
    /// key's value; may fail with [`EngineError::CapacityExceeded`].
    pub fn prepare_stage(&mut self, space: &mut Space, at: SimTime, bytes: u64) -> Result<SimTime> {
        if self.l0_bytes + bytes > self.config.l0_bytes && !self.l0.is_empty() {
            self.snapshot_cache = None;
            return self.flush_in_background(space, at, Admission::Reserve);
        }
        Ok(at)
    }

    /// DRAM an L0 pair takes: what [`LsmTree::prepare_stage`] counts per pair.
    pub fn staged_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
        Self::l0_pair_bytes(key, value)
    }

    /// Puts a pair (`Some` value) or a tombstone (`None`) into L0 without flushing: cannot fail,
    /// which is what makes a batch all-or-nothing once validated. Keys must have been checked
    /// (by [`LsmTree::admit_put`] for stores). [`LsmTree::settle`] flushes afterwards.
    pub fn stage(&mut self, key: &[u8], value: Option<&[u8]>) {
        debug_assert!(!key.is_empty() && key.len() <= crate::KEY_BYTES_MAX);
        self.snapshot_cache = None;
        let added = Self::l0_pair_bytes(key, value);
        self.count_l0_search(key);
        self.cpu_pending.bytes_copied += added;
        self.key_len_max_seen = self.key_len_max_seen.max(key.len());
        self.l0_insert(L0Key::new(key), value.map(Arc::from), false);
    }

    /// After staging: flushes L0 if it is over its size and runs background GC. A flush that
    /// cannot get its space leaves L0 over its size (the next write retries), so staged pairs stay
    /// applied.
    pub fn settle(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        self.snapshot_cache = None;
        let mut t = at;
        if self.l0_bytes > self.config.l0_bytes {
            t = match self.flush_in_background(space, t, Admission::Reserve) {
                Ok(t) => t,
                Err(EngineError::CapacityExceeded(_)) => t,
                Err(error) => return Err(error),
            };
        }
        t = self.gc_in_background(space, t)?;
        Ok(self.charge(space, t))
    }

    /// Before a checkpoint that trims the log: flushes L0 if it holds at least
    /// 1 / `CHECKPOINT_FLUSH_SHARE` (a quarter) of its size, so that the checkpoint does not
    /// carry it. Encoding L0 into a checkpoint costs about what flushing it costs, and is thrown
    /// away by the next checkpoint, while the flush is work L0 needs anyway. Returns the bytes of
    /// pairs flushed (0: none) and when the writer may go on; a flush refused for space leaves L0
    /// to the checkpoint.
    pub fn flush_before_checkpoint(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<(u64, SimTime)> {
        let bytes = self.l0_bytes;
        if self.l0.is_empty() || bytes * CHECKPOINT_FLUSH_SHARE < self.config.l0_bytes {
            return Ok((0, at));
        }
        self.snapshot_cache = None;
        let t = match self.flush_in_background(space, at, Admission::Reserve) {
            Ok(t) => t,
            Err(EngineError::CapacityExceeded(_)) => return Ok((0, at)),
            Err(error) => return Err(error),
        };
        let t = self.gc_in_background(space, t)?;
        Ok((bytes, self.charge(space, t)))
    }

    /// Deletes `key` (stores a tombstone). Deletes may use the delete reserve, so they proceed on a
    /// device that refuses puts.
    pub fn delete(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime> {
        self.check_key(key)?;
        self.snapshot_cache = None;
        self.insert(space, at, key, None, Admission::Reserve)
    }

    /// Flushes L0 as jobs of the background thread (see `crate::background`): the flush into L1
    /// on the flush lane, each merge it makes due on the compaction lane.
    /// Waits first if the immutable L0s already fill their DRAM, and in `cascade` for the previous
    /// flash merge if this flush queues another (write stalls). Keeps this L0 readable as an
    /// immutable L0 until its flush has finished. Returns when the writer may go on.
    pub(super) fn flush_in_background(
        &mut self,
        space: &mut Space,
        at: SimTime,
        admission: Admission,
    ) -> Result<SimTime> {
        let t = self.flushing.wait(space, at);
        let l0 = Arc::clone(&self.l0);
        let (result, job) = in_background(space, t, Lane::Flush, |space| {
            self.flush_into_l1(space, t, admission)
        });
        let t = result?;
        // A flush that ran at once hands its L0 back: kept for the caller to drop
        // (`Engine::take_released`), so that freeing it need not hold the caller's locks.
        self.released = self.flushing.started(l0, job);
        // The merges it made due, each a job of the compaction lane (see `cascade`).
        self.compact(space, t)
    }

    /// Runs background GC (if free blocks are short) as a job of the background thread.
    pub(super) fn gc_in_background(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let (result, job) =
            in_background(space, at, Lane::Gc, |space| self.background_gc(space, at));
        Ok(self.collecting.collected(space, result?, job))
    }

    pub(super) fn l0_pair_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
        key.len() as u64 + value.map_or(0, |value| value.len() as u64) + L0_ENTRY_OVERHEAD_BYTES
    }

    pub(super) fn insert(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        value: Option<&[u8]>,
        admission: Admission,
    ) -> Result<SimTime> {
        let mut t = at;
        let added = Self::l0_pair_bytes(key, value);
        if self.l0_bytes + added > self.config.l0_bytes && !self.l0.is_empty() {
            t = self.flush_in_background(space, t, admission)?;
        }
        self.count_l0_search(key);
        self.cpu_pending.bytes_copied += added;
        self.key_len_max_seen = self.key_len_max_seen.max(key.len());
        self.l0_insert(L0Key::new(key), value.map(Arc::from), false);
        t = self.gc_in_background(space, t)?;
        Ok(self.charge(space, t))
    }

    pub(super) fn l0_insert(&mut self, key: L0Key, value: Option<Arc<[u8]>>, from_gc: bool) {
        let added = Self::l0_pair_bytes(&key, value.as_deref());
        let key_bytes = key.len() as u64;
        match Arc::make_mut(&mut self.l0).insert(key.clone(), L0Value { value, from_gc }) {
            Some(old) => self.l0_bytes -= Self::l0_pair_bytes(&key, old.value.as_deref()),
            None => self.l0_key_bytes += key_bytes,
        }
        self.l0_bytes += added;
    }

    /// Writes data records for pairs; returns their entries and when the programs complete.
    pub(super) fn write_values(
        &mut self,
        space: &mut Space,
        at: SimTime,
        pairs: &L0Map,
    ) -> Result<(Vec<Entry>, SimTime)> {
        let mut done = at;
        let mut entries = Vec::with_capacity(pairs.len());
        for (key, value) in pairs {
            let entry = match &value.value {
                Some(bytes) => {
                    let purpose = if value.from_gc {
                        Purpose::Gc
                    } else {
                        Purpose::UserData
                    };
                    let (pointer, finished) =
                        space.append_record(at, purpose, self.config.namespace, key, bytes)?;
                    self.cpu_pending.bytes_copied += (key.len() + bytes.len()) as u64;
                    done = done.max(finished);
                    Entry {
                        key: super::segment::Key::from_slice(key),
                        pointer: pointer.raw(),
                        value_len: bytes.len() as u32,
                        from_gc: false,
                    }
                }
                None => Entry {
                    key: super::segment::Key::from_slice(key),
                    pointer: TOMBSTONE,
                    value_len: 0,
                    from_gc: false,
                },
            };
            entries.push(entry);
        }
        Ok((entries, done))
    }
}
