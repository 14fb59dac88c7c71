//! What the durability layer above needs from the space layer: blocks of its own outside the
//! namespaces' pools, the layer's DRAM state as bytes (and back), a recount of valid bytes from the
//! index after a restart, and a guard that writes a checkpoint before a block a durable checkpoint
//! may reach is erased.
//!
//! Valid bytes are not part of the exported state: after a restart the indexes report every page
//! and record they reference ([`Space::account_meta_page`], [`Space::account_record`]), so the
//! accounting always matches the index that was actually recovered, even when that index is older
//! than the space state it was saved with.

use std::collections::{BTreeMap, BTreeSet};

use kvssd_flash::codec::ByteReader;
use kvssd_flash::{BlockAddress, Flash, PageAddress, Purpose, SimTime};

use crate::{
    BlockInfo, BlockUse, LogCursor, OpenBlock, PageIndex, RecordPointer, Result, Space,
    SpaceConfig, SpaceError, Stream, Writer,
};

/// The owner recorded for blocks the durability layer holds.
pub const SYSTEM_OWNER: u32 = u32::MAX;
/// OOB kind byte of pages the durability layer programs.
pub const OOB_KIND_SYSTEM: u8 = 0x53;

const STATE_MAGIC: &[u8; 4] = b"KSPC";
const STATE_VERSION: u32 = 1;

/// Called by the space layer before it erases a GC victim that was allocated before the latest
/// durable checkpoint: the implementation writes a newer checkpoint (from the published parts and
/// the layer's state), so no durable state can reach the block once it is erased.
pub trait EraseHook: Send {
    /// Writes a checkpoint; returns when it is durable.
    fn before_erase(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime>;
}

/// One part of a checkpoint published by the layer above: opaque bytes and the first log sequence
/// number whose effects they may lack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Log records from this sequence number on must be replayed over the part.
    pub replay_from: u64,
    /// The encoded state, shared so that a checkpoint can frame it while it programs pages
    /// through the space layer.
    pub bytes: std::sync::Arc<Vec<u8>>,
}

#[derive(Default)]
pub(crate) struct DurableState {
    hook: Option<Box<dyn EraseHook>>,
    parts: BTreeMap<u32, Part>,
    replay_lsn: u64,
    /// The allocation counter when the latest durable checkpoint was written.
    durable_allocations: u64,
    /// The GC victim the erase hook is writing a checkpoint for: erased right after it, so the
    /// checkpoint records it as free ([`Space::export_state`]).
    erasing: Option<u64>,
    /// The die [`Space::take_system_block`] looks at first (the one after the die it took last),
    /// so consecutive system blocks spread over the dies and their programs run in parallel.
    next_system_die: u32,
}

fn malformed(what: &'static str) -> SpaceError {
    SpaceError::StateMalformed(what)
}

impl From<kvssd_flash::codec::DecodeError> for SpaceError {
    /// The space layer decodes bytes only when it restores its saved state.
    fn from(error: kvssd_flash::codec::DecodeError) -> Self {
        malformed(error.0)
    }
}

fn put_opt(out: &mut Vec<u8>, value: Option<u64>) {
    match value {
        None => out.push(0),
        Some(value) => {
            out.push(1);
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
}

impl Space {
    /// Installs the hook that writes a checkpoint before a block a durable checkpoint may reach is
    /// erased. Without a hook the layer erases at once (volatile or PLP operation).
    pub fn set_erase_hook(&mut self, hook: Option<Box<dyn EraseHook>>) {
        self.durable.hook = hook;
    }

    /// Whether a durability layer is listening: indexes publish their state before erases only then.
    pub fn wants_parts(&self) -> bool {
        self.durable.hook.is_some()
    }

    /// Publishes (replaces) a part of the next checkpoint, tagged with the current replay sequence
    /// number ([`Space::set_replay_lsn`]).
    pub fn publish_part(&mut self, key: u32, bytes: Vec<u8>) {
        let replay_from = self.durable.replay_lsn;
        let bytes = std::sync::Arc::new(bytes);
        self.durable.parts.insert(key, Part { replay_from, bytes });
    }

    /// Publishes a part with an explicit replay sequence number.
    pub fn publish_part_at(&mut self, key: u32, replay_from: u64, bytes: Vec<u8>) {
        let bytes = std::sync::Arc::new(bytes);
        self.durable.parts.insert(key, Part { replay_from, bytes });
    }

    /// Drops a part (a deleted namespace).
    pub fn remove_part(&mut self, key: u32) {
        self.durable.parts.remove(&key);
    }

    /// The parts published so far.
    pub fn parts(&self) -> &BTreeMap<u32, Part> {
        &self.durable.parts
    }

    /// Sets the sequence number of the log record being applied: a part published from now on may
    /// lack its effects (and those of later records), never those of earlier ones.
    pub fn set_replay_lsn(&mut self, lsn: u64) {
        self.durable.replay_lsn = lsn;
    }

    /// Records that a checkpoint of the current state is durable: blocks allocated from now on are
    /// unknown to it and may be erased without a new one.
    pub fn mark_durable(&mut self) {
        self.durable.durable_allocations = self.allocations;
    }

    /// The allocation counter when the latest durable checkpoint was written: blocks allocated
    /// before it may hold pages that checkpoint reaches.
    pub(crate) fn durable_allocations(&self) -> u64 {
        self.durable.durable_allocations
    }

    pub(crate) fn before_erase(&mut self, at: SimTime, block: u64) -> Result<SimTime> {
        let allocated = self
            .blocks
            .get(block as usize)
            .map_or(0, |info| info.allocated);
        if allocated >= self.durable.durable_allocations {
            return Ok(at);
        }
        let Some(mut hook) = self.durable.hook.take() else {
            return Ok(at);
        };
        self.durable.erasing = Some(block);
        let result = hook.before_erase(self, at);
        self.durable.erasing = None;
        self.durable.hook = Some(hook);
        result
    }

    /// Mutable access to the flash, for the durability layer's own pages (the superblock blocks it
    /// reserved and its sync). Programming pages of blocks the layer manages breaks its invariants.
    pub fn flash_mut(&mut self) -> &mut Flash {
        &mut self.flash
    }

    /// Takes a block out of the free pool for good (the superblock's blocks); it must be free.
    pub fn reserve_block(&mut self, block: u64) -> Result<()> {
        let address = self.block_address(block);
        let list = &mut self.free_by_die[address.die as usize];
        let Some(slot) = list.iter().position(|&b| b == address.block) else {
            return Err(SpaceError::Config(format!(
                "{address} cannot be reserved: it is not free"
            )));
        };
        list.swap_remove(slot);
        self.free_count -= 1;
        self.blocks[block as usize] = BlockInfo {
            usage: BlockUse::System,
            owner: SYSTEM_OWNER,
            ..BlockInfo::FREE
        };
        Ok(())
    }

    /// Takes a free block for the durability layer (log or checkpoint pages), looking at the die
    /// after the one it took last first: on flash the least-erased (wear levelling); on a file
    /// image the most-erased, a block the file already holds. Files do not wear, and a log page
    /// synced on its own costs less where the file system has allocated its bytes already: on
    /// this machine's ext4, writing an 8,448-byte slot and `fdatasync` took 141 µs over written
    /// bytes and 205 µs into a hole of the sparse image, and with a sync per store a fresh image
    /// put every log page into a hole.
    pub fn take_system_block(&mut self) -> Result<u64> {
        let dies = self.geometry.dies();
        let on_file = matches!(self.flash.media_kind(), kvssd_flash::MediaKind::File(_));
        let mut best: Option<(u32, u32, usize)> = None;
        for offset in 0..dies {
            let die = (self.durable.next_system_die + offset) % dies.max(1);
            for (slot, &block) in self.free_by_die[die as usize].iter().enumerate() {
                let count = self.flash.erase_count(BlockAddress { die, block })?;
                let better = match best {
                    None => true,
                    Some((best_count, _, _)) if on_file => count > best_count,
                    Some((best_count, _, _)) => count < best_count,
                };
                if better {
                    best = Some((count, die, slot));
                }
            }
        }
        let Some((_, die, slot)) = best else {
            return Err(SpaceError::NoFreeBlock);
        };
        let block = self.free_by_die[die as usize].swap_remove(slot);
        self.durable.next_system_die = (die + 1) % dies.max(1);
        self.free_count -= 1;
        let index = self.geometry.block_index(BlockAddress { die, block });
        self.blocks[index as usize] = BlockInfo {
            usage: BlockUse::System,
            owner: SYSTEM_OWNER,
            allocated: self.allocations,
            ..BlockInfo::FREE
        };
        self.allocations += 1;
        Ok(index)
    }

    /// Erases a block of the durability layer and returns it to the free pool.
    pub fn release_system_block(&mut self, at: SimTime, block: u64) -> Result<SimTime> {
        if self.blocks.get(block as usize).map(|info| info.usage) != Some(BlockUse::System) {
            return Err(SpaceError::Config(format!(
                "block {block} is not a system block"
            )));
        }
        let address = self.block_address(block);
        let mut done = at;
        if self.flash.programmed_pages(address)? > 0 {
            done = self.flash.erase(at, address, Purpose::Checkpoint)?;
        }
        self.blocks[block as usize] = BlockInfo::FREE;
        self.free_by_die[address.die as usize].push(address.block);
        self.free_count += 1;
        Ok(done)
    }

    /// Programs a page of a system block.
    pub fn program_system_page(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
        data: &[u8],
    ) -> Result<SimTime> {
        Ok(self
            .flash
            .program(at, page, purpose, data, &[OOB_KIND_SYSTEM])?)
    }

    /// Programs every namespace's partly filled data page, so every record appended so far is on
    /// flash.
    pub fn sync_all(&mut self, at: SimTime, purpose: Purpose) -> Result<SimTime> {
        let namespaces: Vec<u32> = self.writers.keys().copied().collect();
        let mut done = at;
        for namespace in namespaces {
            done = done.max(self.close_open_page(at, namespace, purpose)?);
        }
        Ok(done)
    }

    /// Adds a meta page the index references to the accounting (after a restart).
    pub fn account_meta_page(&mut self, page: PageIndex) {
        self.account_meta_bytes(page, u64::from(self.geometry.page_bytes));
    }

    /// Adds `bytes` of a meta page the index references to the accounting (after a restart); the
    /// mirror of [`Space::invalidate_meta_bytes`].
    pub fn account_meta_bytes(&mut self, page: PageIndex, bytes: u64) {
        let block = page.0 / u64::from(self.geometry.pages_per_block);
        if matches!(
            self.blocks.get(block as usize).map(|info| info.usage),
            Some(BlockUse::Used(Stream::Meta))
        ) {
            self.add_valid(block, bytes);
        }
    }

    /// Adds a record the index references to the accounting (after a restart); the mirror of
    /// [`Space::invalidate_record`].
    pub fn account_record(&mut self, pointer: RecordPointer, key_len: usize, value_len: usize) {
        let Ok(true) = self.check_generation(pointer) else {
            return;
        };
        let per_block = u64::from(self.geometry.pages_per_block);
        let is_data = |space: &Space, block: u64| {
            matches!(
                space.blocks.get(block as usize).map(|info| info.usage),
                Some(BlockUse::Used(Stream::Data))
            )
        };
        if self.is_large(key_len, value_len) {
            let pages = self.large_record_pages(key_len, value_len);
            if let Ok(all) = self.large_pages(pointer, pages) {
                for page in all {
                    if is_data(self, page.0 / per_block) {
                        self.add_valid(page.0 / per_block, u64::from(self.geometry.page_bytes));
                    }
                }
            }
        } else {
            let block = pointer.page().0 / per_block;
            if is_data(self, block) {
                let bytes = self.record_footprint(key_len, value_len);
                self.add_valid(block, bytes);
            }
        }
    }

    /// The layer's DRAM state as bytes: block owners and streams, large-record successors, the
    /// logs' and namespaces' write positions. Open data pages must have been programmed first
    /// ([`Space::sync_all`]); valid bytes are recounted after a restart, not saved.
    pub fn export_state(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(STATE_MAGIC);
        out.extend_from_slice(&STATE_VERSION.to_le_bytes());
        out.extend_from_slice(&(self.blocks.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.allocations.to_le_bytes());
        for (index, info) in self.blocks.iter().enumerate() {
            // The victim the erase hook checkpoints for is erased next: saved as free, so that
            // recovery from this checkpoint erases it again rather than keep it as used. (The
            // block may already hold other pages by then: the next checkpoint's, say, if the
            // power went before that checkpoint's superblock copy.)
            let info = if self.durable.erasing == Some(index as u64) {
                &BlockInfo::FREE
            } else {
                info
            };
            out.push(match info.usage {
                BlockUse::Free => 0,
                BlockUse::Used(Stream::Meta) => 1,
                BlockUse::Used(Stream::Data) => 2,
                BlockUse::System => 3,
            });
            out.extend_from_slice(&info.owner.to_le_bytes());
            out.extend_from_slice(&info.allocated.to_le_bytes());
            match info.successor {
                None => out.push(0),
                Some((block, generation)) => {
                    out.push(1);
                    out.extend_from_slice(&block.to_le_bytes());
                    out.extend_from_slice(&generation.to_le_bytes());
                }
            }
        }
        out.extend_from_slice(&(self.logs.len() as u32).to_le_bytes());
        for log in &self.logs {
            out.extend_from_slice(&(log.next_die as u32).to_le_bytes());
        }
        out.extend_from_slice(&(self.writers.len() as u32).to_le_bytes());
        for (&namespace, writer) in &self.writers {
            out.extend_from_slice(&namespace.to_le_bytes());
            out.extend_from_slice(&(writer.next_meta as u32).to_le_bytes());
            out.extend_from_slice(&(writer.next_data as u32).to_le_bytes());
            out.extend_from_slice(&(writer.cursors.len() as u32).to_le_bytes());
            for cursor in &writer.cursors {
                out.extend_from_slice(&(cursor.log as u32).to_le_bytes());
                put_opt(&mut out, cursor.meta.map(|open| open.block));
                put_opt(&mut out, cursor.data.map(|open| open.block));
                put_opt(&mut out, cursor.last_meta);
                put_opt(&mut out, cursor.last_data);
            }
        }
        out
    }

    /// Rebuilds the layer over a flash array from [`Space::export_state`] bytes. `system_blocks`
    /// are the durability layer's live blocks (kept as system blocks); every other block that the
    /// state calls free or system but that has programmed pages (written after the state was saved)
    /// is erased and freed. Open blocks continue after their last programmed page. Valid bytes start
    /// at zero: the indexes report what they reference.
    pub fn restore(
        flash: Flash,
        config: SpaceConfig,
        state: &[u8],
        system_blocks: &BTreeSet<u64>,
        at: SimTime,
    ) -> Result<(Space, SimTime)> {
        let mut space = Space::build(flash, config, false)?;
        let mut cursor = ByteReader::new(state);
        if cursor.take(4)? != STATE_MAGIC {
            return Err(malformed("space state has the wrong magic"));
        }
        if cursor.u32()? != STATE_VERSION {
            return Err(malformed("space state has an unsupported version"));
        }
        let blocks = cursor.u64()?;
        if blocks != space.geometry.blocks_total() {
            return Err(malformed("space state was saved for another geometry"));
        }
        space.allocations = cursor.u64()?;
        let mut infos = Vec::with_capacity(blocks as usize);
        for _ in 0..blocks {
            let usage = match cursor.u8()? {
                0 => BlockUse::Free,
                1 => BlockUse::Used(Stream::Meta),
                2 => BlockUse::Used(Stream::Data),
                3 => BlockUse::System,
                _ => return Err(malformed("space state has an unknown block use")),
            };
            let owner = cursor.u32()?;
            let allocated = cursor.u64()?;
            let successor = match cursor.u8()? {
                0 => None,
                _ => {
                    let block = cursor.u64()?;
                    if block >= blocks {
                        return Err(malformed("space state names a block outside the device"));
                    }
                    Some((block, cursor.u32()?))
                }
            };
            let erase_count = space
                .flash
                .erase_count(space.geometry.block_at(infos.len() as u64))?;
            infos.push(BlockInfo {
                usage,
                valid_bytes: 0,
                successor,
                owner,
                allocated,
                erase_count,
            });
        }
        let logs = cursor.u32()? as usize;
        if logs != space.logs.len() {
            return Err(malformed(
                "space state was saved with another number of logs",
            ));
        }
        for log in 0..logs {
            let next = cursor.u32()? as usize;
            space.logs[log].next_die = next % space.logs[log].dies.len().max(1);
        }
        let writers = cursor.u32()?;
        let per_block = space.geometry.pages_per_block;
        let mut restored = BTreeMap::new();
        for _ in 0..writers {
            let namespace = cursor.u32()?;
            let next_meta = cursor.u32()? as usize;
            let next_data = cursor.u32()? as usize;
            let count = cursor.u32()? as usize;
            if count == 0 || count > logs {
                return Err(malformed("space state has a writer with a bad log count"));
            }
            let mut cursors = Vec::with_capacity(count);
            for _ in 0..count {
                let log = cursor.u32()? as usize;
                if log >= logs {
                    return Err(malformed("space state names a log that does not exist"));
                }
                let mut open = [None, None];
                for slot in &mut open {
                    if let Some(block) = cursor.opt_u64()? {
                        if block >= blocks {
                            return Err(malformed("space state names a block outside the device"));
                        }
                        let next_page = space.flash.programmed_pages(space.block_address(block))?;
                        *slot = (next_page < per_block).then_some(OpenBlock { block, next_page });
                    }
                }
                let last_meta = cursor.opt_u64()?;
                let last_data = cursor.opt_u64()?;
                cursors.push(LogCursor {
                    log,
                    meta: open[0],
                    data: open[1],
                    last_meta,
                    last_data,
                });
            }
            restored.insert(
                namespace,
                Writer {
                    cursors,
                    next_meta: next_meta % count,
                    next_data: next_data % count,
                    ..Writer::default()
                },
            );
        }
        space.writers = restored;
        // Reconcile with the flash: what was written after the state was saved is garbage.
        let mut done = at;
        space.free_by_die.iter_mut().for_each(Vec::clear);
        space.free_count = 0;
        for (index, mut info) in infos.into_iter().enumerate() {
            let index = index as u64;
            let address = space.block_address(index);
            if system_blocks.contains(&index) {
                info = BlockInfo {
                    usage: BlockUse::System,
                    owner: SYSTEM_OWNER,
                    ..info
                };
            } else if matches!(info.usage, BlockUse::Free | BlockUse::System) {
                if space.flash.programmed_pages(address)? > 0 {
                    done = done.max(space.flash.erase(at, address, Purpose::Recovery)?);
                }
                info = BlockInfo::FREE;
            }
            if info.usage == BlockUse::Free {
                space.free_by_die[address.die as usize].push(address.block);
                space.free_count += 1;
            }
            space.blocks[index as usize] = info;
        }
        // Open blocks must be blocks in use by their namespace.
        for (&namespace, writer) in &mut space.writers {
            for cursor in &mut writer.cursors {
                for open in [&mut cursor.meta, &mut cursor.data] {
                    if let Some(block) = open.map(|open| open.block) {
                        let info = space.blocks[block as usize];
                        if !matches!(info.usage, BlockUse::Used(_)) || info.owner != namespace {
                            *open = None;
                        }
                    }
                }
            }
        }
        Ok((space, done))
    }

    /// Gives the flash back (after a power cut, to recover from it).
    pub fn into_flash(self) -> Flash {
        self.flash
    }

    /// Blocks the durability layer holds.
    pub fn system_blocks(&self) -> Vec<u64> {
        (0..self.blocks.len() as u64)
            .filter(|&block| self.blocks[block as usize].usage == BlockUse::System)
            .collect()
    }

    /// The namespaces that own blocks.
    pub fn block_owners(&self) -> BTreeSet<u32> {
        self.blocks
            .iter()
            .filter(|info| matches!(info.usage, BlockUse::Used(_)))
            .map(|info| info.owner)
            .collect()
    }
}
