//! Writes into the write buffer: puts, deletes, their admission checks, and batches staged into
//! the buffer and settled.

use kvssd_flash::{Lane, SimTime};
use kvssd_space::Space;

use super::{
    in_background, Admission, HashError, HashIndex, HashPreset, Result,
    BUFFER_ENTRY_OVERHEAD_BYTES, HASH_LOAD_FACTOR_HARD,
};
use crate::EngineError;

impl HashIndex {
    /// Keys the table may hold at most (`hash`: its fixed size at the hard load factor; `kaml`: the
    /// largest table the DRAM budget holds, at `load_factor_max`).
    pub(super) fn entries_max(&self) -> u64 {
        match self.config.preset {
            HashPreset::Hash => (self.table.total_slots() as f64 * HASH_LOAD_FACTOR_HARD) as u64,
            HashPreset::Kaml => (self.kaml_slots_max as f64 * self.config.load_factor_max) as u64,
        }
    }

    /// Stores `value` under `key`, replacing any older version.
    ///
    /// Refused with [`EngineError::CapacityExceeded`] (and nothing changed) when user data would
    /// exceed the raw capacity less over-provisioning, when the table is as full as it may get, or
    /// when GC cannot free the blocks applying the write buffer needs.
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
            }
            .into());
        }
        let footprint = space.record_footprint(key.len(), value.len());
        let unwritten_pages = self.table.pages() - self.table.pages_on_flash();
        let index_reserve = unwritten_pages * self.page_bytes as u64;
        if space.valid_bytes_for(self.config.namespace)
            + self.buffer_bytes
            + footprint
            + index_reserve
            > space.user_capacity_for(self.config.namespace)
        {
            return Err(EngineError::CapacityExceeded(
                "user data would exceed the capacity less over-provisioning",
            )
            .into());
        }
        if self.entries + self.buffer.len() as u64 + 1 > self.entries_max() {
            return Err(EngineError::CapacityExceeded(match self.config.preset {
                HashPreset::Hash => "the hash table is as full as its load factor allows",
                HashPreset::Kaml => "the in-DRAM hash table has reached the DRAM budget",
            })
            .into());
        }
        self.insert(space, at, key, Some(value), Admission::Put)
    }

    /// Deletes `key`. Deletes may use the delete reserve, so they proceed on a device that refuses
    /// puts.
    pub fn delete(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime> {
        self.check_key(key)?;
        self.insert(space, at, key, None, Admission::Reserve)
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
            }
            .into());
        }
        let footprint = space.record_footprint(key.len(), value_len);
        let unwritten_pages = self.table.pages() - self.table.pages_on_flash();
        let index_reserve = unwritten_pages * self.page_bytes as u64;
        if space.valid_bytes_for(self.config.namespace)
            + self.buffer_bytes
            + staged_bytes
            + footprint
            + index_reserve
            > space.user_capacity_for(self.config.namespace)
        {
            return Err(EngineError::CapacityExceeded(
                "user data would exceed the capacity less over-provisioning",
            )
            .into());
        }
        if self.entries + self.buffer.len() as u64 + 1 > self.entries_max() {
            return Err(EngineError::CapacityExceeded(match self.config.preset {
                HashPreset::Hash => "the hash table is as full as its load factor allows",
                HashPreset::Kaml => "the in-DRAM hash table has reached the DRAM budget",
            })
            .into());
        }
        Ok(())
    }

    /// DRAM a buffered pair takes: what [`HashIndex::prepare_stage`] counts per pair.
    pub fn staged_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
        Self::pair_bytes(key, value)
    }

    /// Makes room in the write buffer for a batch that will stage `bytes` of pairs with
    /// [`HashIndex::stage`]: applies the buffer first if they would not fit. Changes no key's
    /// value; may fail with [`EngineError::CapacityExceeded`].
    pub fn prepare_stage(&mut self, space: &mut Space, at: SimTime, bytes: u64) -> Result<SimTime> {
        if self.buffer_bytes + bytes > self.config.write_buffer_bytes && !self.buffer.is_empty() {
            let t = self.flush_in_background(space, at, Admission::Reserve)?;
            return Ok(self.charge(space, t));
        }
        Ok(at)
    }

    /// Puts a pair (`Some` value) or a delete (`None`) into the write buffer without applying it:
    /// cannot fail, which is what makes a batch all-or-nothing once validated. Keys must have been
    /// checked. [`HashIndex::settle`] applies the buffer afterwards.
    pub fn stage(&mut self, key: &[u8], value: Option<&[u8]>) {
        debug_assert!(!key.is_empty() && key.len() <= crate::KEY_BYTES_MAX);
        let added = Self::pair_bytes(key, value);
        self.cpu_pending.bytes_copied += added;
        if let Some(old) = self.buffer_insert(key.to_vec(), value.map(<[u8]>::to_vec)) {
            self.buffer_bytes -= Self::pair_bytes(key, old.as_deref());
        }
        self.buffer_bytes += added;
    }

    /// After staging: applies the write buffer if it is over its size and runs background GC. An
    /// apply that cannot get its space leaves the pairs buffered (the next write retries), so
    /// staged pairs stay applied.
    pub fn settle(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let mut t = at;
        if self.buffer_bytes > self.config.write_buffer_bytes {
            t = match self.flush_in_background(space, t, Admission::Reserve) {
                Ok(t) => t,
                Err(HashError::Engine(EngineError::CapacityExceeded(_)))
                | Err(HashError::TableFull { .. }) => t,
                Err(error) => return Err(error),
            };
        }
        t = self.gc_in_background(space, t)?;
        Ok(self.charge(space, t))
    }

    /// Applies the write buffer as a job of the background thread (see `crate::background`):
    /// waits for the previous one first if it is still running (a write stall), then keeps this
    /// buffer readable as the immutable buffer until the job has finished.
    pub(super) fn flush_in_background(
        &mut self,
        space: &mut Space,
        at: SimTime,
        admission: Admission,
    ) -> Result<SimTime> {
        let t = self.flushing.wait(space, at);
        let buffer = self.buffer.clone();
        let (result, job) = in_background(space, t, Lane::Flush, |space| {
            self.flush_buffer(space, t, admission)
        });
        let done = result?;
        let _ = self.flushing.started(buffer, job);
        self.reset_buffered_keys();
        Ok(done)
    }

    /// Runs background GC (if free blocks are short) as a job of the background thread.
    pub(super) fn gc_in_background(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let (result, job) =
            in_background(space, at, Lane::Gc, |space| self.background_gc(space, at));
        Ok(self.collecting.collected(space, result?, job))
    }

    pub(super) fn pair_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
        key.len() as u64 + value.map_or(0, |value| value.len() as u64) + BUFFER_ENTRY_OVERHEAD_BYTES
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
        let added = Self::pair_bytes(key, value);
        if self.buffer_bytes + added > self.config.write_buffer_bytes && !self.buffer.is_empty() {
            t = self.flush_in_background(space, t, admission)?;
        }
        self.cpu_pending.bytes_copied += added;
        if added > self.config.write_buffer_bytes {
            // A pair larger than the whole buffer goes straight to flash (the buffer is empty).
            let pending = vec![(key.to_vec(), value.map(<[u8]>::to_vec))];
            t = self
                .apply_all(space, t, pending, admission)
                .map_err(|(error, _)| error)?;
        } else {
            if let Some(old) = self.buffer_insert(key.to_vec(), value.map(<[u8]>::to_vec)) {
                self.buffer_bytes -= Self::pair_bytes(key, old.as_deref());
            }
            self.buffer_bytes += added;
        }
        t = self.gc_in_background(space, t)?;
        Ok(self.charge(space, t))
    }
}
