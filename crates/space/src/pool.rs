//! The free-block pool and where each namespace writes: its logs, their open blocks, block
//! ownership, snapshot protection and the valid-byte accounting.

use kvssd_flash::{BlockAddress, PageAddress, Purpose, SimTime};

use crate::{BlockInfo, BlockUse, LogCursor, OpenBlock, Result, Space, SpaceError, Stream, Writer};

impl Space {
    pub(crate) fn block_address(&self, block: u64) -> BlockAddress {
        self.geometry.block_at(block)
    }

    pub(crate) fn erase_generation(&self, block: u64) -> Result<u32> {
        Ok(self.flash.erase_count(self.block_address(block))?)
    }

    pub(crate) fn new_writer(&self, logs: Option<&[u32]>) -> Writer {
        let cursors = match logs {
            Some(logs) => logs
                .iter()
                .map(|&log| LogCursor {
                    log: log as usize,
                    ..LogCursor::default()
                })
                .collect(),
            None => (0..self.logs.len())
                .map(|log| LogCursor {
                    log,
                    ..LogCursor::default()
                })
                .collect(),
        };
        Writer {
            cursors,
            ..Writer::default()
        }
    }

    pub(crate) fn writer(&mut self, namespace: u32) -> &mut Writer {
        if !self.writers.contains_key(&namespace) {
            let writer = self.new_writer(None);
            self.writers.insert(namespace, writer);
        }
        match self.writers.get_mut(&namespace) {
            Some(writer) => writer,
            None => unreachable!("inserted above"),
        }
    }

    /// Gives a namespace the logs it writes to (indexes below [`crate::SpaceConfig::logs`]).
    /// Only before the namespace wrote anything; by default a namespace writes to every log.
    pub fn set_namespace_logs(&mut self, namespace: u32, logs: &[u32]) -> Result<()> {
        if logs.is_empty() {
            return Err(SpaceError::Config(
                "a namespace needs at least one log".into(),
            ));
        }
        let mut sorted = logs.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != logs.len() {
            return Err(SpaceError::Config(format!(
                "log set {logs:?} repeats a log"
            )));
        }
        if let Some(&bad) = logs.iter().find(|&&log| log as usize >= self.logs.len()) {
            return Err(SpaceError::Config(format!(
                "log {bad} does not exist: the device has {} logs",
                self.logs.len()
            )));
        }
        if self
            .blocks
            .iter()
            .any(|info| info.usage != BlockUse::Free && info.owner == namespace)
        {
            return Err(SpaceError::Config(format!(
                "namespace {namespace} already wrote: its logs can no longer change"
            )));
        }
        let writer = self.new_writer(Some(logs));
        self.writers.insert(namespace, writer);
        Ok(())
    }

    /// Erases every block of a namespace and returns them to the free pool; its open page in DRAM
    /// is dropped. Nothing of the namespace can be read afterwards. Returns when the erases end.
    pub fn release_namespace(&mut self, at: SimTime, namespace: u32) -> Result<SimTime> {
        let mut done = at;
        for index in 0..self.blocks.len() {
            let info = self.blocks[index];
            if info.usage == BlockUse::Free || info.owner != namespace {
                continue;
            }
            let address = self.block_address(index as u64);
            if self.flash.programmed_pages(address)? > 0 {
                done = done.max(self.flash.erase(at, address, Purpose::Gc)?);
            }
            self.valid_bytes_total -= info.valid_bytes;
            self.blocks[index] = BlockInfo::FREE;
            self.free_by_die[address.die as usize].push(address.block);
            self.free_count += 1;
        }
        self.writers.remove(&namespace);
        self.confined.remove(&namespace);
        Ok(done)
    }

    /// Blocks a namespace holds.
    pub fn namespace_blocks(&self, namespace: u32) -> u64 {
        self.blocks
            .iter()
            .filter(|info| info.usage != BlockUse::Free && info.owner == namespace)
            .count() as u64
    }

    /// Valid bytes the accounting holds for a namespace.
    pub fn namespace_valid_bytes(&self, namespace: u32) -> u64 {
        self.writers
            .get(&namespace)
            .map_or(0, |writer| writer.valid_bytes)
    }

    /// The namespace a used block belongs to.
    pub fn block_owner(&self, block: u64) -> Option<u32> {
        self.blocks
            .get(block as usize)
            .filter(|info| info.usage != BlockUse::Free)
            .map(|info| info.owner)
    }

    /// Protects what a snapshot of `namespace` taken now can reach: until the matching
    /// [`Space::unprotect`], no block of the namespace that left the free pool before this call is
    /// chosen as a GC victim (a snapshot only references pages written before it was taken).
    /// Returns the token to unprotect with.
    pub fn protect(&mut self, namespace: u32) -> u64 {
        let floor = self.allocations;
        *self.writer(namespace).floors.entry(floor).or_insert(0) += 1;
        floor
    }

    /// Ends one protection made by [`Space::protect`].
    pub fn unprotect(&mut self, namespace: u32, token: u64) {
        if let Some(writer) = self.writers.get_mut(&namespace) {
            if let Some(count) = writer.floors.get_mut(&token) {
                *count -= 1;
                if *count == 0 {
                    writer.floors.remove(&token);
                }
            }
        }
    }

    /// Whether a live snapshot may still reach pages of `block`.
    pub fn is_protected(&self, block: u64) -> bool {
        let Some(info) = self.blocks.get(block as usize) else {
            return false;
        };
        if info.usage == BlockUse::Free {
            return false;
        }
        self.writers
            .get(&info.owner)
            .and_then(|writer| writer.floors.keys().next_back())
            .is_some_and(|&newest| info.allocated < newest)
    }

    pub(crate) fn take_free_block(
        &mut self,
        namespace: u32,
        cursor: usize,
        stream: Stream,
    ) -> Result<u64> {
        let log = self.writer(namespace).cursors[cursor].log;
        let dies = self.logs[log].dies.clone();
        let start = self.logs[log].next_die;
        // The log's own dies first, round-robin; then, so one busy log cannot starve, another die:
        // the one with the most free blocks (the nearest after the log's first die on a tie).
        // Taking the lowest-numbered die instead piled every borrowed block, and so the writes
        // and reads that follow them, onto dies 0, 1, 2, ...
        let mut order: Vec<u32> = (0..dies.len())
            .map(|offset| dies[(start + offset) % dies.len()])
            .collect();
        let die_count = self.geometry.dies();
        let home = dies.first().copied().unwrap_or(0);
        // A confined namespace borrows only from its other logs' dies (KAML's per-log free lists
        // keep its data on its logs' dies).
        let lenders = self.confined_dies(namespace);
        let borrowed = (1..die_count)
            .map(|offset| (home + offset) % die_count)
            .filter(|die| !dies.contains(die))
            .filter(|die| lenders.as_ref().is_none_or(|lenders| lenders.contains(die)))
            .max_by_key(|&die| {
                let distance = (die + die_count - home) % die_count;
                (
                    self.free_by_die[die as usize].len(),
                    std::cmp::Reverse(distance),
                )
            });
        order.extend(borrowed);
        for die in order {
            let candidates = &self.free_by_die[die as usize];
            if candidates.is_empty() {
                continue;
            }
            // Wear levelling: the least-erased free block of the die.
            let mut best = 0;
            let mut best_count = u32::MAX;
            for (slot, &block) in candidates.iter().enumerate() {
                let count = self.flash.erase_count(BlockAddress { die, block })?;
                if count < best_count {
                    best = slot;
                    best_count = count;
                }
            }
            let block = self.free_by_die[die as usize].swap_remove(best);
            self.free_count -= 1;
            self.logs[log].next_die = (start + 1) % dies.len().max(1);
            let index = self.geometry.block_index(BlockAddress { die, block });
            self.blocks[index as usize] = BlockInfo {
                usage: BlockUse::Used(stream),
                valid_bytes: 0,
                successor: None,
                owner: namespace,
                allocated: self.allocations,
                erase_count: best_count,
            };
            self.allocations += 1;
            let state = &mut self.writer(namespace).cursors[cursor];
            let last = match stream {
                Stream::Meta => state.last_meta.replace(index),
                Stream::Data => state.last_data.replace(index),
            };
            if let Some(previous) = last {
                let generation = self.erase_generation(index)?;
                self.blocks[previous as usize].successor = Some((index, generation));
            }
            return Ok(index);
        }
        Err(SpaceError::NoFreeBlock)
    }

    /// Reserves the next page of a log's open block of `stream`, opening a new block if needed.
    pub(crate) fn reserve_page(
        &mut self,
        namespace: u32,
        cursor: usize,
        stream: Stream,
    ) -> Result<PageAddress> {
        let state = &self.writer(namespace).cursors[cursor];
        let open = match stream {
            Stream::Meta => state.meta,
            Stream::Data => state.data,
        };
        let mut open = match open {
            Some(open) => open,
            None => OpenBlock {
                block: self.take_free_block(namespace, cursor, stream)?,
                next_page: 0,
            },
        };
        let page = self.block_address(open.block).page(open.next_page);
        open.next_page += 1;
        let keep = (open.next_page < self.geometry.pages_per_block).then_some(open);
        let state = &mut self.writer(namespace).cursors[cursor];
        match stream {
            Stream::Meta => state.meta = keep,
            Stream::Data => state.data = keep,
        }
        Ok(page)
    }

    pub(crate) fn add_valid(&mut self, block: u64, bytes: u64) {
        self.blocks[block as usize].valid_bytes += bytes;
        self.valid_bytes_total += bytes;
        let owner = self.blocks[block as usize].owner;
        self.writer(owner).valid_bytes += bytes;
    }

    pub(crate) fn sub_valid(&mut self, block: u64, bytes: u64) {
        let info = &mut self.blocks[block as usize];
        let taken = bytes.min(info.valid_bytes);
        info.valid_bytes -= taken;
        self.valid_bytes_total -= taken;
        let owner = info.owner;
        if let Some(writer) = self.writers.get_mut(&owner) {
            writer.valid_bytes = writer.valid_bytes.saturating_sub(taken);
        }
    }
}
