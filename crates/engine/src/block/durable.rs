//! The `block` FTL's DRAM state as bytes, for checkpoints and power-loss dumps, and its
//! restoration.
//!
//! ```text
//! "KBLK" | version u32 = 1 | logical block bytes u32 | logical blocks u64
//! map: logical blocks x slot u64 (flash page x blocks per page + place; u64::MAX: unmapped)
//! buffer: count u32, then per entry: lba u64 | kind u8 (0 trim, 1 block, 2 patches) |
//!         block: the block's bytes | patches: count u32, then per patch: offset u32 | len u32 | bytes
//! ```
//!
//! Little-endian. The map is saved whole (8 bytes per logical block, what it takes in DRAM), so
//! the state is bounded by the DRAM budget; the slots' owners are rebuilt from it. The write buffer is saved whole because GC and later
//! applications may have moved or superseded what the log would replay into it.

use kvssd_flash::codec::ByteReader;
use kvssd_flash::SimTime;
use kvssd_space::Space;

use super::{BlockConfig, BlockIndex, Staged, UNMAPPED};
use crate::contract::Result;
use crate::EngineError;

const MAGIC: &[u8; 4] = b"KBLK";
const VERSION: u32 = 1;

fn bad(what: &'static str) -> EngineError {
    EngineError::CheckpointMalformed(what)
}

impl BlockIndex {
    /// Bytes staged in the write buffer.
    pub fn buffered_bytes(&self) -> u64 {
        self.buffer_bytes
    }

    /// The FTL's DRAM state as bytes; see the module documentation for the layout.
    pub fn durable_state(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + self.map.len() * 8 + self.buffer_bytes as usize);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.config.logical_block_bytes.to_le_bytes());
        out.extend_from_slice(&self.config.logical_blocks.to_le_bytes());
        for entry in &self.map {
            out.extend_from_slice(&entry.to_le_bytes());
        }
        out.extend_from_slice(&(self.buffer.len() as u32).to_le_bytes());
        for (lba, staged) in &self.buffer {
            out.extend_from_slice(&lba.to_le_bytes());
            match staged {
                Staged::Trim => out.push(0),
                Staged::Block(bytes) => {
                    out.push(1);
                    out.extend_from_slice(bytes);
                }
                Staged::Patch(patches) => {
                    out.push(2);
                    out.extend_from_slice(&(patches.len() as u32).to_le_bytes());
                    for (offset, bytes) in patches {
                        out.extend_from_slice(&offset.to_le_bytes());
                        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                        out.extend_from_slice(bytes);
                    }
                }
            }
        }
        out
    }

    /// An FTL rebuilt from [`BlockIndex::durable_state`] bytes, writing to `space` under
    /// `config.namespace`. Never panics on bad bytes: they give
    /// [`EngineError::CheckpointMalformed`]. Call [`BlockIndex::account_valid`] once every index
    /// is restored.
    pub fn restore(space: &Space, config: BlockConfig, bytes: &[u8]) -> Result<BlockIndex> {
        let mut reader = ByteReader::new(bytes);
        if reader.take(4)? != MAGIC {
            return Err(bad("wrong magic"));
        }
        if reader.u32()? != VERSION {
            return Err(bad("unsupported version"));
        }
        let block_bytes = reader.u32()?;
        let logical_blocks = reader.u64()?;
        if block_bytes != config.logical_block_bytes {
            return Err(bad("saved with another logical block size"));
        }
        if config.logical_blocks != 0 && logical_blocks != config.logical_blocks {
            return Err(bad("saved with another number of logical blocks"));
        }
        if logical_blocks == 0 || reader.remaining() as u64 / 8 < logical_blocks {
            return Err(bad("the map is cut short"));
        }
        let mut config = config;
        config.logical_blocks = logical_blocks;
        let mut index = BlockIndex::open(space, config)?;
        let mut mapped = 0;
        for lba in 0..logical_blocks {
            let slot = reader.u64()?;
            if slot != UNMAPPED {
                match index.owners.get_mut(slot as usize) {
                    None => return Err(bad("a map entry points past the flash")),
                    Some(owner) if *owner != UNMAPPED => {
                        return Err(bad("two logical blocks in one slot"))
                    }
                    Some(owner) => *owner = lba,
                }
                mapped += 1;
            }
            index.map[lba as usize] = slot;
        }
        index.mapped = mapped;
        let count = reader.count(9)?;
        for _ in 0..count {
            let lba = reader.u64()?;
            if lba >= logical_blocks {
                return Err(bad("a buffered block past the logical space"));
            }
            let staged = match reader.u8()? {
                0 => Staged::Trim,
                1 => Staged::Block(reader.take(block_bytes as usize)?.to_vec()),
                2 => {
                    let patches = reader.count(8)?;
                    let mut list = Vec::with_capacity(patches);
                    for _ in 0..patches {
                        let offset = reader.u32()?;
                        let len = reader.u32()? as usize;
                        if offset as usize + len > block_bytes as usize {
                            return Err(bad("a patch past the end of its block"));
                        }
                        list.push((offset, reader.take(len)?.to_vec()));
                    }
                    if index.slot_of(lba).is_none() {
                        return Err(bad("a patch of a block with nothing on flash"));
                    }
                    index.unresolved.push(lba);
                    Staged::Patch(list)
                }
                _ => return Err(bad("unknown buffer entry kind")),
            };
            if !matches!(staged, Staged::Trim) && index.slot_of(lba).is_none() {
                index.buffered_new += 1;
            }
            index.buffer_bytes += Self::entry_bytes(&staged);
            if index.buffer.insert(lba, staged).is_some() {
                return Err(bad("a logical block buffered twice"));
            }
        }
        reader.finish()?;
        Ok(index)
    }

    /// Reports every slot the map references to the space layer's accounting (after a restart).
    /// Reads nothing: a slot's share of its page is fixed.
    pub fn account_valid(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        for lba in 0..self.config.logical_blocks {
            if let Some(slot) = self.slot_of(lba) {
                let (page, _) = self.page_of(slot);
                space.account_meta_bytes(page, self.slot_share_bytes);
            }
        }
        Ok(at)
    }
}
