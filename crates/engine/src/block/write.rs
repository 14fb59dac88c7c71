//! Writes: whole-block writes and sub-block writes into the write buffer, trims, their admission
//! checks, resolving sub-block writes by reading their blocks (read-modify-write), applying the
//! buffer to flash, and GC until the free pool can take it.

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{Space, Stream};

use super::{apply_patches, BlockIndex, Staged, BUFFER_ENTRY_OVERHEAD_BYTES, UNMAPPED};
use crate::contract::Result;
use crate::EngineError;

/// Who is asking for space: writes may not use the delete reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    Put,
    Reserve,
}

impl BlockIndex {
    pub(super) fn entry_bytes(staged: &Staged) -> u64 {
        BUFFER_ENTRY_OVERHEAD_BYTES
            + match staged {
                Staged::Trim => 0,
                Staged::Block(bytes) => bytes.len() as u64,
                Staged::Patch(patches) => patches
                    .iter()
                    .map(|(_, bytes)| bytes.len() as u64 + 8)
                    .sum(),
            }
    }

    /// Flash a write of `lba` adds to the valid bytes when it is applied: a block's footprint if
    /// it has no copy on flash or in the buffer yet, else nothing (its old copy is freed).
    fn added_footprint(&self, space: &Space, lba: u64) -> u64 {
        let has_data = matches!(
            self.buffer.get(&lba),
            Some(Staged::Block(_)) | Some(Staged::Patch(_))
        );
        if has_data || self.slot_of(lba).is_some() {
            0
        } else {
            self.block_footprint(space)
        }
    }

    pub(super) fn block_footprint(&self, space: &Space) -> u64 {
        let _ = space;
        self.slot_share_bytes
    }

    /// Flash the buffered blocks that have no copy on flash will add when applied.
    fn buffered_new_bytes(&self, space: &Space) -> u64 {
        self.buffered_new * self.block_footprint(space)
    }

    /// Checks a store of `value_len` bytes under `key` would be admitted, with `staged_bytes`
    /// more already promised to earlier stores of the same batch. Changes nothing.
    pub fn admit_put(
        &self,
        space: &Space,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()> {
        let (lba, offset) = self.parse_key(key)?;
        self.check_value(offset, value_len)?;
        let added = self.added_footprint(space, lba);
        if space.valid_bytes() + self.buffered_new_bytes(space) + staged_bytes + added
            > space.user_capacity_bytes()
        {
            return Err(EngineError::CapacityExceeded(
                "user data would exceed the capacity less over-provisioning",
            ));
        }
        Ok(())
    }

    /// Writes `value` at the offset `key` names (the block's start for an 8-byte key): a whole
    /// block goes to the write buffer; part of a block first reads the rest of it (from the buffer,
    /// from flash, or zeros) and returns after that read. A refusal changes nothing.
    pub fn put(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        value: &[u8],
    ) -> Result<SimTime> {
        self.admit_put(space, key, value.len(), 0)?;
        let mut t = at;
        let bytes = self.staged_entry_bytes(Some(value));
        if self.buffer_bytes + bytes > self.config.write_buffer_bytes && !self.buffer.is_empty() {
            t = self.flush_buffer(space, t, Admission::Put)?;
        }
        self.stage(key, Some(value));
        t = self.resolve(space, t)?;
        t = self.background_gc(space, t)?;
        Ok(self.charge(space, t))
    }

    /// Trims logical block `key` (trimming a block with no data is not an error). Trims may use the
    /// delete reserve.
    pub fn delete(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime> {
        let lba = self.parse_block_key(key)?;
        if self.slot_of(lba).is_none() && !self.buffer.contains_key(&lba) {
            return Ok(at);
        }
        let mut t = at;
        if self.buffer_bytes + BUFFER_ENTRY_OVERHEAD_BYTES > self.config.write_buffer_bytes
            && !self.buffer.is_empty()
        {
            t = self.flush_buffer(space, t, Admission::Reserve)?;
        }
        self.stage(key, None);
        t = self.background_gc(space, t)?;
        Ok(self.charge(space, t))
    }

    /// DRAM a staged store (`Some`) or trim (`None`) may take once resolved: a whole block.
    pub fn staged_entry_bytes(&self, value: Option<&[u8]>) -> u64 {
        BUFFER_ENTRY_OVERHEAD_BYTES
            + value.map_or(0, |_| u64::from(self.config.logical_block_bytes))
    }

    /// Makes room in the write buffer for `bytes` more, applying it first if they would not fit.
    /// Changes no block's contents; may be refused with [`EngineError::CapacityExceeded`].
    pub fn prepare_stage(&mut self, space: &mut Space, at: SimTime, bytes: u64) -> Result<SimTime> {
        if self.buffer_bytes + bytes > self.config.write_buffer_bytes && !self.buffer.is_empty() {
            let t = self.flush_buffer(space, at, Admission::Reserve)?;
            return Ok(self.charge(space, t));
        }
        Ok(at)
    }

    /// Stages a store (`Some`) or a trim (`None`) in the write buffer. Cannot fail: the key and
    /// length must have passed [`BlockIndex::admit_put`] (stores) or the key check (trims). A
    /// write of part of a block whose rest is on flash is kept as a patch until
    /// [`BlockIndex::settle`] reads the block.
    pub fn stage(&mut self, key: &[u8], value: Option<&[u8]>) {
        let Ok((lba, offset)) = self.parse_key(key) else {
            debug_assert!(false, "stage of a key that was not checked");
            return;
        };
        let block = self.config.logical_block_bytes as usize;
        let old = self.buffer.remove(&lba);
        if let Some(old) = &old {
            self.buffer_bytes -= Self::entry_bytes(old);
        }
        let had_data = matches!(old, Some(Staged::Block(_)) | Some(Staged::Patch(_)));
        let mapped = self.slot_of(lba).is_some();
        let staged = match value {
            None => {
                self.activity.trims += 1;
                Staged::Trim
            }
            Some(value) => {
                self.cpu_pending.bytes_copied += value.len() as u64;
                let offset = offset.unwrap_or(0);
                let patch = (offset, value.to_vec());
                if offset == 0 && value.len() == block {
                    self.activity.whole_block_writes += 1;
                    Staged::Block(patch.1)
                } else {
                    self.activity.read_modify_writes += 1;
                    match old {
                        Some(Staged::Block(mut bytes)) => {
                            apply_patches(&mut bytes, &[patch]);
                            Staged::Block(bytes)
                        }
                        Some(Staged::Trim) => {
                            let mut bytes = vec![0; block];
                            apply_patches(&mut bytes, &[patch]);
                            Staged::Block(bytes)
                        }
                        Some(Staged::Patch(mut patches)) => {
                            patches.push(patch);
                            Staged::Patch(patches)
                        }
                        None if !mapped => {
                            let mut bytes = vec![0; block];
                            apply_patches(&mut bytes, &[patch]);
                            Staged::Block(bytes)
                        }
                        None => {
                            self.unresolved.push(lba);
                            Staged::Patch(vec![patch])
                        }
                    }
                }
            }
        };
        let has_data = !matches!(staged, Staged::Trim);
        if !mapped {
            match (had_data, has_data) {
                (false, true) => self.buffered_new += 1,
                (true, false) => self.buffered_new -= 1,
                _ => {}
            }
        }
        self.buffer_bytes += Self::entry_bytes(&staged);
        self.buffer.insert(lba, staged);
    }

    /// Reads the blocks of every staged sub-block write, all issued at `at` so the reads overlap
    /// across dies, and merges the writes into them. Returns when the last read completes.
    pub(super) fn resolve(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let block = self.config.logical_block_bytes as usize;
        let mut done = at;
        for lba in std::mem::take(&mut self.unresolved) {
            let Some(Staged::Patch(_)) = self.buffer.get(&lba) else {
                continue;
            };
            let (base, read) = self.read_flash_block(space, at, lba, Purpose::UserData)?;
            if base.is_some() {
                self.activity.read_modify_write_reads += 1;
            }
            done = done.max(read);
            let mut bytes = base.unwrap_or_else(|| vec![0; block]);
            if let Some(Staged::Patch(patches)) = self.buffer.remove(&lba) {
                self.buffer_bytes -= Self::entry_bytes(&Staged::Patch(patches.clone()));
                apply_patches(&mut bytes, &patches);
            }
            self.cpu_pending.bytes_copied += bytes.len() as u64;
            let staged = Staged::Block(bytes);
            self.buffer_bytes += Self::entry_bytes(&staged);
            self.buffer.insert(lba, staged);
        }
        Ok(done)
    }

    /// After staging: reads the blocks sub-block writes need, applies the buffer if it is over its
    /// size, and runs background GC. An application that cannot get its space leaves the blocks
    /// buffered (the next write retries); only failures are returned.
    pub fn settle(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let mut t = self.resolve(space, at)?;
        if self.buffer_bytes > self.config.write_buffer_bytes {
            t = match self.flush_buffer(space, t, Admission::Reserve) {
                Ok(t) => t,
                Err(EngineError::CapacityExceeded(_)) => t,
                Err(error) => return Err(error),
            };
        }
        t = self.background_gc(space, t)?;
        Ok(self.charge(space, t))
    }

    /// Applies the write buffer: appends every buffered block to flash and points its entry at
    /// the new copy; trims clear their entries. A refusal leaves the buffer as it was.
    pub fn flush(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let t = self.flush_buffer(space, at, Admission::Reserve)?;
        Ok(self.charge(space, t))
    }

    /// Makes everything durable on flash: applies the buffer and programs the open data page.
    pub fn sync(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let t = self.flush_buffer(space, at, Admission::Reserve)?;
        let t = space.sync(t, self.config.namespace, Purpose::UserData)?;
        Ok(self.charge(space, t))
    }

    pub(super) fn flush_buffer(
        &mut self,
        space: &mut Space,
        at: SimTime,
        admission: Admission,
    ) -> Result<SimTime> {
        if self.buffer.is_empty() {
            return Ok(at);
        }
        let mut t = self.resolve(space, at)?;
        let blocks = self
            .buffer
            .values()
            .filter(|staged| matches!(staged, Staged::Block(_)))
            .count() as u64;
        t = self.ensure_space(space, t, blocks.div_ceil(self.blocks_per_page), admission)?;
        let buffer = std::mem::take(&mut self.buffer);
        self.buffer_bytes = 0;
        self.buffered_new = 0;
        let mut done = t;
        let mut page: Vec<(u64, Vec<u8>)> = Vec::with_capacity(self.blocks_per_page as usize);
        for (lba, staged) in buffer {
            match staged {
                Staged::Block(bytes) => {
                    page.push((lba, bytes));
                    if page.len() as u64 == self.blocks_per_page {
                        done = done.max(self.write_blocks(space, t, Purpose::UserData, &page)?);
                        page.clear();
                    }
                }
                Staged::Trim => {
                    if let Some(old) = self.slot_of(lba) {
                        self.release_slot(space, old);
                        self.map[lba as usize] = UNMAPPED;
                        self.mapped -= 1;
                    }
                }
                Staged::Patch(_) => {
                    return Err(EngineError::Index(
                        format!("logical block {lba} was applied before its read-modify-write")
                            .into(),
                    ))
                }
            }
        }
        if !page.is_empty() {
            done = done.max(self.write_blocks(space, t, Purpose::UserData, &page)?);
        }
        self.activity.flushes += 1;
        Ok(done)
    }

    /// Writes a page's worth of owned blocks (see [`BlockIndex::write_page`]).
    pub(super) fn write_blocks(
        &mut self,
        space: &mut Space,
        at: SimTime,
        purpose: Purpose,
        blocks: &[(u64, Vec<u8>)],
    ) -> Result<SimTime> {
        let borrowed: Vec<(u64, &[u8])> = blocks
            .iter()
            .map(|(lba, bytes)| (*lba, bytes.as_slice()))
            .collect();
        self.write_page(space, at, purpose, &borrowed)
    }

    /// Runs GC until the free pool can supply `pages` plus the reserves, or refuses with
    /// [`EngineError::CapacityExceeded`] if GC cannot free enough.
    pub(super) fn ensure_space(
        &mut self,
        space: &mut Space,
        at: SimTime,
        pages: u64,
        admission: Admission,
    ) -> Result<SimTime> {
        let namespace = self.config.namespace;
        let mut t = at;
        let mut rounds = 0u64;
        loop {
            let hard = space.blocks_needed(namespace, Stream::Meta, pages)
                + u64::from(space.config().gc_reserve_blocks)
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
                self.gc_candidate(space)
            };
            let Some(victim) = victim else {
                if free >= hard {
                    return Ok(t);
                }
                return Err(EngineError::CapacityExceeded(
                    "GC cannot free the blocks this write needs",
                ));
            };
            match self.collect(space, t, victim)? {
                Some(done) => t = done,
                None => {
                    if free >= hard {
                        return Ok(t);
                    }
                    return Err(EngineError::CapacityExceeded(
                        "GC cannot relocate the live data of its victim",
                    ));
                }
            }
        }
    }

    /// Collects blocks while the free pool is below the GC threshold (never fails for lack of
    /// victims: the threshold is a wish, the reserves are the requirement).
    pub(super) fn background_gc(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        if space.free_blocks() >= self.gc_threshold {
            return Ok(at);
        }
        match self.ensure_space(space, at, 0, Admission::Reserve) {
            Ok(t) => Ok(t),
            Err(EngineError::CapacityExceeded(_)) => Ok(at),
            Err(error) => Err(error),
        }
    }
}
