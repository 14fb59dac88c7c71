//! Configuration of the `block` FTL.

use kvssd_flash::Geometry;
use kvssd_space::SpaceConfig;

use super::{BUFFER_ENTRY_OVERHEAD_BYTES, MAP_ENTRY_BYTES};
use crate::{CpuCosts, EngineError};

/// Largest logical block, bytes (and at most a flash page, which holds whole logical blocks).
pub const LOGICAL_BLOCK_BYTES_MAX: u32 = 1 << 20;

/// Configuration of a `block` namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockConfig {
    /// Namespace id written into every data record.
    pub namespace: u32,
    /// Bytes of a logical block: 4 KiB, the unit conventional FTLs map (KAML §V-B).
    pub logical_block_bytes: u32,
    /// Logical blocks of the namespace's address space; 0 sizes it to the user capacity.
    pub logical_blocks: u64,
    /// Whole logical blocks wait in the power-protected write buffer until it holds this many
    /// bytes, then are appended to flash.
    pub write_buffer_bytes: u64,
    /// DRAM for the mapping table and the write buffer; 0 means exactly what they need.
    pub dram_budget_bytes: u64,
    /// Free blocks trims may use but writes may not.
    pub delete_reserve_blocks: u32,
    /// GC starts when the free pool falls below this many blocks; 0 derives it from the reserves.
    pub gc_threshold_blocks: u32,
    /// The space layer's configuration.
    pub space: SpaceConfig,
    /// Controller CPU cost per unit of work.
    pub cpu: CpuCosts,
}

impl BlockConfig {
    /// Defaults on a geometry: 4 KiB logical blocks over the user capacity, a 1 MiB write buffer
    /// (the key-value presets' write buffer, so both sides buffer alike).
    /// The DRAM budget covers the map of a logical space as large as the raw capacity, so it holds
    /// whatever `open` sizes the space to.
    pub fn new(geometry: &Geometry) -> BlockConfig {
        let logical_block_bytes = 4096u32;
        let write_buffer_bytes = 1 << 20;
        BlockConfig {
            namespace: 0,
            logical_block_bytes,
            logical_blocks: 0,
            write_buffer_bytes,
            dram_budget_bytes: geometry.capacity_bytes() / u64::from(logical_block_bytes)
                * MAP_ENTRY_BYTES
                + write_buffer_bytes
                + u64::from(logical_block_bytes)
                + BUFFER_ENTRY_OVERHEAD_BYTES,
            delete_reserve_blocks: 2,
            gc_threshold_blocks: 0,
            space: SpaceConfig::for_geometry(geometry),
            cpu: CpuCosts::cortex_a53(),
        }
    }

    /// A configuration for `Profile::test_min()`: 1024 logical blocks of 128 bytes (four to a
    /// 512-byte page; 70% of the user capacity) and a write buffer of a few blocks, so buffer
    /// applications, read-modify-writes and GC happen within a few hundred operations.
    pub fn test_min() -> BlockConfig {
        let geometry = kvssd_flash::Profile::test_min().geometry;
        let mut config = BlockConfig::new(&geometry);
        config.logical_block_bytes = 128;
        config.logical_blocks = 1024;
        config.write_buffer_bytes = 600;
        config.dram_budget_bytes = config.dram_needed_bytes();
        config.space.logs = 2;
        config.space.gc_reserve_blocks = 4;
        config.space.over_provisioning_percent = 30;
        config
    }

    /// DRAM the mapping table and a full write buffer take (with one block over the threshold,
    /// which is when the buffer is applied).
    pub fn dram_needed_bytes(&self) -> u64 {
        let block = u64::from(self.logical_block_bytes) + BUFFER_ENTRY_OVERHEAD_BYTES;
        self.logical_blocks * MAP_ENTRY_BYTES + self.write_buffer_bytes + block
    }

    pub(crate) fn check(&self, geometry: &Geometry) -> Result<(), EngineError> {
        let bad = |what: String| Err(EngineError::Config(what));
        if self.logical_block_bytes == 0 || self.logical_block_bytes > LOGICAL_BLOCK_BYTES_MAX {
            return bad(format!(
                "logical blocks of {} bytes: 1 to {LOGICAL_BLOCK_BYTES_MAX}",
                self.logical_block_bytes
            ));
        }
        if self.logical_block_bytes > geometry.page_bytes {
            return bad(format!(
                "logical blocks of {} bytes: a flash page of {} bytes must hold at least one",
                self.logical_block_bytes, geometry.page_bytes
            ));
        }
        if self.logical_blocks > geometry.pages_total() * 64 {
            return bad(format!(
                "{} logical blocks: more than the flash could ever map",
                self.logical_blocks
            ));
        }
        Ok(())
    }
}
