//! How the space layer uses the device: logs, chunk size, over-provisioning, GC reserve.

use kvssd_flash::Geometry;

use crate::{layout, pointer, Result, SpaceError, KEY_BYTES_MAX, LARGE_HEADER_BYTES};

/// How the space layer uses the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpaceConfig {
    /// Number of logs (append points); each has one open block per stream. Clamped to the number of
    /// dies.
    pub logs: u32,
    /// Bytes of one packing chunk; a power of two, at least 16, with `page_bytes / chunk_bytes` at
    /// most 4096 and its bitmap fitting the user OOB.
    pub chunk_bytes: u32,
    /// Share of the raw capacity, in percent, that user data may never occupy, so GC always finds
    /// victims with garbage in them.
    pub over_provisioning_percent: u32,
    /// Free blocks kept back for GC itself (relocations need somewhere to go).
    pub gc_reserve_blocks: u32,
}

impl SpaceConfig {
    /// Defaults for a geometry: one log per die, 32-byte chunks (16 on small pages), 10%
    /// over-provisioning, a GC reserve of two blocks per stream plus one per log.
    pub fn for_geometry(geometry: &Geometry) -> SpaceConfig {
        let logs = geometry.dies();
        SpaceConfig {
            logs,
            chunk_bytes: if geometry.page_bytes >= 4096 { 32 } else { 16 },
            over_provisioning_percent: 10,
            gc_reserve_blocks: 4 + logs,
        }
    }

    /// Blocks that never hold settled data: every log's open blocks (one per stream), the GC
    /// reserve, and two spare.
    pub fn blocks_kept(&self, geometry: &Geometry) -> u64 {
        let logs = self.logs.clamp(1, geometry.dies());
        u64::from(self.gc_reserve_blocks) + 2 * u64::from(logs) + 2
    }

    /// Checks this configuration against a geometry: chunk size, pointer and OOB limits,
    /// over-provisioning, and room for every log's open blocks and the GC reserve. `Space::open`
    /// runs the same check; callers sizing a card can run it before building one.
    pub fn check(&self, geometry: &Geometry) -> Result<()> {
        let chunk = self.chunk_bytes;
        if chunk < 16 || !chunk.is_power_of_two() || chunk > geometry.page_bytes {
            return Err(SpaceError::Config(format!(
                "chunk_bytes {chunk} must be a power of two between 16 and the page size"
            )));
        }
        let chunks = geometry.page_bytes / chunk;
        if chunks > pointer::CHUNKS_PER_PAGE_MAX {
            return Err(SpaceError::Config(format!(
                "{chunks} chunks per page exceed the pointer's {}",
                pointer::CHUNKS_PER_PAGE_MAX
            )));
        }
        if layout::oob_bytes(chunks) > geometry.oob_user_bytes() as usize {
            return Err(SpaceError::Config(format!(
                "the record-end bitmap of {chunks} chunks does not fit {} user OOB bytes",
                geometry.oob_user_bytes()
            )));
        }
        if geometry.pages_total() > pointer::PAGES_MAX {
            return Err(SpaceError::Config(
                "too many pages for a record pointer".into(),
            ));
        }
        if (geometry.page_bytes as usize) < LARGE_HEADER_BYTES + KEY_BYTES_MAX + 1 {
            return Err(SpaceError::Config(format!(
                "pages of {} bytes cannot hold a record header and a {KEY_BYTES_MAX}-byte key",
                geometry.page_bytes
            )));
        }
        if u64::from(self.over_provisioning_percent) >= 100 {
            return Err(SpaceError::Config(
                "over-provisioning must be below 100%".into(),
            ));
        }
        let logs = self.logs.clamp(1, geometry.dies());
        if self.blocks_kept(geometry) >= geometry.blocks_total() {
            return Err(SpaceError::Config(format!(
                "{} blocks cannot hold {} open blocks and a GC reserve of {}",
                geometry.blocks_total(),
                2 * logs,
                self.gc_reserve_blocks
            )));
        }
        Ok(())
    }
}
