//! `block`: a conventional SSD's page-mapped FTL on the same simulated flash, KAML's baseline
//! firmware (HPCA'17 §V-A: "the original reference firmware supports only block-based I/O").
//!
//! * **Logical blocks** of `logical_block_bytes` (4 KiB by default) are numbered from 0 to
//!   `logical_blocks - 1`. The engine contract's key is the **logical block number** (LBA) as a
//!   big-endian `u64` (8 bytes); a store may add a big-endian `u32` **byte offset** within the
//!   block (12 bytes) to write part of it. A get returns the whole block; a delete is a trim.
//! * **Flash pages** hold `page_bytes / logical_block_bytes` logical blocks each (two 4 KiB blocks
//!   in an 8 KiB page), at fixed **slots**, with no header: a conventional FTL keeps a page's LBAs
//!   in its out-of-band area, which the space layer reserves for itself, so this FTL keeps them in
//!   DRAM instead (the **owner** of each slot, rebuilt from the map at restore). Pages are written
//!   on the space layer's meta stream (whole pages, one log after another), and each slot's share
//!   of a page is accounted and freed on its own, so GC sees how much of a page is live.
//! * **Mapping table**: one 8-byte entry per logical block in DRAM, the slot of its newest copy on
//!   flash (an array indexed by LBA: no hashing, no probing, no key comparison).
//! * **Write buffer** (the SSD's power-protected DRAM): whole logical blocks wait there until it
//!   holds `write_buffer_bytes`, then they are written in LBA order, a page's worth at a time, and
//!   their entries updated. A write of a whole block returns once it is in the buffer.
//! * **Read-modify-write**: a write smaller than a logical block needs the rest of the block. It is
//!   read from the buffer if the block is there, from flash if the block is mapped (the command
//!   returns only after that read, KAML §V-B), or taken as zeros if the block was never written or
//!   was trimmed. Sub-block writes to consecutive offsets of one block therefore read flash once.
//! * **GC**: log-structured allocation over the space layer, like the key-value presets; a slot of
//!   a victim page is live when the entry of its owner still points at it.
//!
//! Batches stage sub-block writes as patches and read their blocks when the batch settles, so a
//! batch's reads overlap.
//!
//! Thread safety: single-threaded; every operation takes `&mut self`.

mod config;
mod contract;
mod durable;
mod gc;
mod write;

use std::collections::BTreeMap;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{PageIndex, Space};

pub use config::BlockConfig;

use crate::contract::Result;
use crate::cpu::CpuCounts;
use crate::EngineError;

/// Bytes of a key naming a whole logical block: the LBA, big-endian.
pub const LBA_KEY_BYTES: usize = 8;
/// Bytes of a key naming a byte offset within a logical block: the LBA and a big-endian `u32`.
pub const LBA_OFFSET_KEY_BYTES: usize = LBA_KEY_BYTES + 4;
/// DRAM of one mapping-table entry (a slot: flash page times blocks per page, plus the slot).
pub const MAP_ENTRY_BYTES: u64 = 8;
/// A mapping-table entry of a block with no copy on flash (and an owner entry of a free slot).
const UNMAPPED: u64 = u64::MAX;
/// DRAM a buffered block or trim takes besides the block's bytes (tree node, LBA, tag).
const BUFFER_ENTRY_OVERHEAD_BYTES: u64 = 32;

/// The key of logical block `lba` (what the engine contract's get, store and delete take).
pub fn lba_key(lba: u64) -> [u8; LBA_KEY_BYTES] {
    lba.to_be_bytes()
}

/// The key of byte `offset` of logical block `lba` (a store of part of the block).
pub fn lba_offset_key(lba: u64, offset: u32) -> [u8; LBA_OFFSET_KEY_BYTES] {
    let mut key = [0u8; LBA_OFFSET_KEY_BYTES];
    key[..LBA_KEY_BYTES].copy_from_slice(&lba.to_be_bytes());
    key[LBA_KEY_BYTES..].copy_from_slice(&offset.to_be_bytes());
    key
}

/// What the write buffer holds for a logical block.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Staged {
    /// Trimmed: reads return nothing until it is written again.
    Trim,
    /// The whole block.
    Block(Vec<u8>),
    /// Writes of parts of a block whose other bytes are still on flash (or zeros if unmapped),
    /// oldest first: resolved by reading the block when the batch settles or the buffer is applied.
    Patch(Vec<(u32, Vec<u8>)>),
}

#[derive(Debug, Clone, Copy, Default)]
struct Activity {
    flushes: u64,
    read_modify_writes: u64,
    read_modify_write_reads: u64,
    whole_block_writes: u64,
    trims: u64,
    gc_data_victims: u64,
    gc_victims_skipped: u64,
    gc_records_rewritten: u64,
}

/// The page-mapped FTL of one namespace, over a space layer it may share with other namespaces.
pub struct BlockIndex {
    config: BlockConfig,
    /// The slot of each logical block's newest copy on flash ([`UNMAPPED`]: none).
    map: Vec<u64>,
    /// The LBA written to each slot of the flash ([`UNMAPPED`]: none written since its erase). A
    /// slot is live when its owner's entry in `map` is the slot.
    owners: Vec<u64>,
    /// Logical blocks a flash page holds.
    blocks_per_page: u64,
    /// Bytes of a page accounted to each slot (a page's bytes split evenly among its slots).
    slot_share_bytes: u64,
    /// Logical blocks with a copy on flash.
    mapped: u64,
    buffer: BTreeMap<u64, Staged>,
    buffer_bytes: u64,
    /// Buffered blocks (whole or patched) whose LBA has no copy on flash: what applying the buffer
    /// adds to the valid bytes.
    buffered_new: u64,
    /// LBAs staged as patches since the last [`BlockIndex::resolve`].
    unresolved: Vec<u64>,
    dram_budget: u64,
    gc_threshold: u64,
    cpu_pending: CpuCounts,
    cpu_total: CpuCounts,
    cpu_ns: u64,
    activity: Activity,
}

impl BlockIndex {
    /// Opens an empty FTL that writes to `space` under namespace `config.namespace`.
    ///
    /// `logical_blocks` 0 sizes the logical space so every block fits the user capacity (raw
    /// capacity less over-provisioning). Refuses a DRAM budget that cannot hold the mapping table
    /// and the write buffer with [`EngineError::DramBudgetTooSmall`].
    pub fn open(space: &Space, config: BlockConfig) -> Result<BlockIndex> {
        config.check(space.geometry())?;
        let mut config = config;
        let page_bytes = u64::from(space.geometry().page_bytes);
        let blocks_per_page = page_bytes / u64::from(config.logical_block_bytes);
        if config.logical_blocks == 0 {
            let share = page_bytes / blocks_per_page;
            config.logical_blocks = (space.user_capacity_bytes() / share).max(1);
        }
        let needed = config.dram_needed_bytes();
        let dram_budget = if config.dram_budget_bytes == 0 {
            needed
        } else {
            config.dram_budget_bytes
        };
        if needed > dram_budget {
            return Err(EngineError::DramBudgetTooSmall {
                needed,
                budget: dram_budget,
            });
        }
        let gc_threshold = if config.gc_threshold_blocks > 0 {
            u64::from(config.gc_threshold_blocks)
        } else {
            u64::from(space.config().gc_reserve_blocks)
                + u64::from(config.delete_reserve_blocks)
                + u64::from(space.config().logs)
                + 2
        };
        let slots = space.geometry().pages_total() * blocks_per_page;
        Ok(BlockIndex {
            map: vec![UNMAPPED; config.logical_blocks as usize],
            owners: vec![UNMAPPED; slots as usize],
            blocks_per_page,
            slot_share_bytes: page_bytes / blocks_per_page,
            mapped: 0,
            buffer: BTreeMap::new(),
            buffer_bytes: 0,
            buffered_new: 0,
            unresolved: Vec::new(),
            dram_budget,
            gc_threshold,
            cpu_pending: CpuCounts::default(),
            cpu_total: CpuCounts::default(),
            cpu_ns: 0,
            activity: Activity::default(),
            config,
        })
    }

    /// The configuration (with `logical_blocks` as sized at open).
    pub fn config(&self) -> &BlockConfig {
        &self.config
    }

    /// Logical blocks with a copy on flash (blocks only in the write buffer not counted).
    pub fn mapped_blocks(&self) -> u64 {
        self.mapped
    }

    /// The LBA a key names, and the byte offset within the block for a 12-byte key.
    fn parse_key(&self, key: &[u8]) -> Result<(u64, Option<u32>)> {
        if key.is_empty() {
            return Err(EngineError::KeyEmpty);
        }
        let (lba, offset) = match key.len() {
            LBA_KEY_BYTES => (key, None),
            LBA_OFFSET_KEY_BYTES => {
                let (lba, offset) = key.split_at(LBA_KEY_BYTES);
                let mut bytes = [0u8; 4];
                bytes.copy_from_slice(offset);
                (lba, Some(u32::from_be_bytes(bytes)))
            }
            _ => {
                return Err(EngineError::Unsupported {
                    operation: "a key that is not a logical block number",
                    engine: "block",
                    why: "its keys are 8-byte big-endian LBAs, with a 4-byte byte offset to write part of a block",
                })
            }
        };
        let mut bytes = [0u8; LBA_KEY_BYTES];
        bytes.copy_from_slice(lba);
        let lba = u64::from_be_bytes(bytes);
        if lba >= self.config.logical_blocks {
            return Err(EngineError::Unsupported {
                operation: "a logical block number past the end",
                engine: "block",
                why: "the namespace's logical space ends at its logical_blocks",
            });
        }
        Ok((lba, offset))
    }

    /// The LBA of a key that names a whole block (gets and trims take no offset).
    fn parse_block_key(&self, key: &[u8]) -> Result<u64> {
        match self.parse_key(key)? {
            (lba, None) => Ok(lba),
            (_, Some(_)) => Err(EngineError::Unsupported {
                operation: "a read or trim of part of a logical block",
                engine: "block",
                why: "reads and trims are of whole logical blocks",
            }),
        }
    }

    /// Checks a store of `value_len` bytes at `offset` fits the block.
    fn check_value(&self, offset: Option<u32>, value_len: usize) -> Result<()> {
        let block = self.config.logical_block_bytes as usize;
        let offset = offset.unwrap_or(0) as usize;
        if offset + value_len > block {
            return Err(EngineError::ValueTooLarge {
                len: offset + value_len,
                max: block,
            });
        }
        Ok(())
    }

    /// The slot holding logical block `lba` on flash, if it has a copy there.
    fn slot_of(&self, lba: u64) -> Option<u64> {
        self.map
            .get(lba as usize)
            .copied()
            .filter(|&slot| slot != UNMAPPED)
    }

    /// The flash page of a slot, and the slot's place in it.
    fn page_of(&self, slot: u64) -> (PageIndex, usize) {
        (
            PageIndex(slot / self.blocks_per_page),
            (slot % self.blocks_per_page) as usize,
        )
    }

    /// The whole block `lba` as it is on flash: `None` if unmapped. Returns when it is in DRAM.
    fn read_flash_block(
        &mut self,
        space: &mut Space,
        at: SimTime,
        lba: u64,
        purpose: Purpose,
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        let Some(slot) = self.slot_of(lba) else {
            return Ok((None, at));
        };
        // Pair assertion: the slot was written for this block (what a conventional FTL checks
        // against the LBA in the page's out-of-band area).
        if self.owners.get(slot as usize) != Some(&lba) {
            return Err(EngineError::Index(
                format!("the slot of logical block {lba} holds another block").into(),
            ));
        }
        let (page, place) = self.page_of(slot);
        let (bytes, done) = space.read_page(at, page, purpose)?;
        let block = self.config.logical_block_bytes as usize;
        let Some(found) = bytes.get(place * block..(place + 1) * block) else {
            return Err(EngineError::Index(
                format!("flash page {} is shorter than its slots", page.0).into(),
            ));
        };
        Ok((Some(found.to_vec()), done))
    }

    /// Logical block `lba` as a read sees it: the buffer's copy, else flash's; `None` if it was
    /// never written or was trimmed.
    pub fn read_block(
        &mut self,
        space: &mut Space,
        at: SimTime,
        lba: u64,
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        let block = self.config.logical_block_bytes as usize;
        let (found, done) = match self.buffer.get(&lba) {
            Some(Staged::Trim) => (None, at),
            Some(Staged::Block(bytes)) => (Some(bytes.clone()), at),
            Some(Staged::Patch(patches)) => {
                let patches = patches.clone();
                let (base, done) = self.read_flash_block(space, at, lba, Purpose::UserData)?;
                let mut bytes = base.unwrap_or_else(|| vec![0; block]);
                apply_patches(&mut bytes, &patches);
                (Some(bytes), done)
            }
            None => self.read_flash_block(space, at, lba, Purpose::UserData)?,
        };
        if let Some(bytes) = &found {
            self.cpu_pending.bytes_copied += bytes.len() as u64;
        }
        Ok((found, self.charge(space, done)))
    }

    /// Charges the counted CPU work to the controller; returns when it completes.
    fn charge(&mut self, space: &mut Space, at: SimTime) -> SimTime {
        let ns = self.cpu_pending.cost_ns(&self.config.cpu);
        self.cpu_total.add(&self.cpu_pending);
        self.cpu_pending = CpuCounts::default();
        self.cpu_ns += ns;
        space.compute(at, ns)
    }

    /// DRAM in use: the mapping table and the write buffer (the slot owners stand for the pages'
    /// out-of-band areas and are not counted).
    pub fn dram_used_bytes(&self) -> u64 {
        self.config.logical_blocks * MAP_ENTRY_BYTES + self.buffer_bytes
    }

    /// Frees slot `slot` (its block was rewritten, trimmed or moved): its share of the page is no
    /// longer valid.
    fn release_slot(&mut self, space: &mut Space, slot: u64) {
        let (page, _) = self.page_of(slot);
        space.invalidate_meta_bytes(page, self.slot_share_bytes);
        if let Some(owner) = self.owners.get_mut(slot as usize) {
            *owner = UNMAPPED;
        }
    }

    /// Writes `blocks` (LBA and bytes, at most a page's worth) into one flash page issued at `at`,
    /// points their entries at their slots and frees the slots they had. Returns when the program
    /// completes.
    fn write_page(
        &mut self,
        space: &mut Space,
        at: SimTime,
        purpose: Purpose,
        blocks: &[(u64, &[u8])],
    ) -> Result<SimTime> {
        debug_assert!(!blocks.is_empty() && blocks.len() as u64 <= self.blocks_per_page);
        let block = self.config.logical_block_bytes as usize;
        let mut bytes = vec![0u8; space.geometry().page_bytes as usize];
        for (place, (_, data)) in blocks.iter().enumerate() {
            bytes[place * block..(place + 1) * block].copy_from_slice(data);
        }
        self.cpu_pending.bytes_copied += (blocks.len() * block) as u64;
        let (page, done) = space.write_meta(at, purpose, self.config.namespace, &bytes)?;
        // The space layer counts the whole page valid; give back the shares of the empty slots.
        let empty = self.blocks_per_page - blocks.len() as u64;
        let unshared =
            u64::from(space.geometry().page_bytes) - self.blocks_per_page * self.slot_share_bytes;
        if empty > 0 || unshared > 0 {
            space.invalidate_meta_bytes(page, empty * self.slot_share_bytes + unshared);
        }
        for (place, (lba, _)) in blocks.iter().enumerate() {
            let slot = page.0 * self.blocks_per_page + place as u64;
            if let Some(old) = self.slot_of(*lba) {
                self.release_slot(space, old);
            } else {
                self.mapped += 1;
            }
            self.map[*lba as usize] = slot;
            self.owners[slot as usize] = *lba;
        }
        Ok(done)
    }

    /// The DRAM budget in bytes.
    pub fn dram_budget_bytes(&self) -> u64 {
        self.dram_budget
    }
}

/// Writes each patch over `block`, oldest first.
fn apply_patches(block: &mut [u8], patches: &[(u32, Vec<u8>)]) {
    for (offset, bytes) in patches {
        let start = *offset as usize;
        if let Some(place) = block.get_mut(start..start + bytes.len()) {
            place.copy_from_slice(bytes);
        }
    }
}
