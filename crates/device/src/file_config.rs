//! The configuration of a device kept in a file: a function of the geometry recorded in the image
//! and of the host memory the opener gives its indexes, so every program that opens an image (the
//! `kvssd` tools, the server, the C library) opens it as it was formatted without recording
//! anything more.

use kvssd_engine::{EngineConfig, Preset};
use kvssd_flash::{Geometry, Profile};

use crate::{DeviceConfig, DeviceError, Durability, SyncPolicy};

/// Indexing DRAM a namespace of a file image gets by default at most: a host's memory, not a
/// controller's (PinK's 0.1% of capacity pins almost nothing of an image on a host, and every
/// GET then reads index pages from the file).
pub const FILE_DRAM_DEFAULT_BYTES_MAX: u64 = 256 << 20;

/// The share of the image's capacity the default budget takes below that cap (one sixteenth).
pub const FILE_DRAM_DEFAULT_CAPACITY_DIVISOR: u64 = 16;

/// The share of a file image's DRAM budget its LSM namespaces' write buffer (L0) takes, above
/// PinK's 1 MiB: an eighth.
pub const FILE_L0_BUDGET_DIVISOR: u64 = 8;

/// The largest write buffer (L0) an LSM namespace of a file image gets: 32 MiB, half of RocksDB's
/// default memtable.
pub const FILE_L0_BYTES_MAX: u64 = 32 << 20;

/// The largest indexing DRAM budget a file image may be opened with (1 TiB), so that a typo on a
/// command line is refused instead of being planned for.
pub const FILE_DRAM_BUDGET_BYTES_MAX: u64 = 1 << 40;

impl DeviceConfig {
    /// The configuration of a file-media device of `geometry` with the default DRAM budget
    /// ([`DeviceConfig::file_image_dram_default_bytes`], used as
    /// [`DeviceConfig::for_file_image_with_dram`] says); `test_min` images get the engine's
    /// `test_min` configuration and no index page cache. A write-ahead log synced on every
    /// command.
    pub fn for_file_image(geometry: &Geometry) -> DeviceConfig {
        let mut config = if *geometry == Profile::test_min().geometry {
            DeviceConfig::test_min()
        } else {
            let mut engine = EngineConfig::new(Preset::Pink, geometry);
            let budget = DeviceConfig::file_image_dram_default_bytes(geometry);
            engine.dram_budget_bytes = budget;
            let mut config = DeviceConfig::with_engine(engine);
            config.block = kvssd_engine::block::BlockConfig::new(geometry);
            config.block.space = config.space.clone();
            split_budget(&mut config, geometry, budget);
            config
        };
        config.durability = Durability::WriteAheadLog(SyncPolicy::EveryCommand);
        config
    }

    /// [`DeviceConfig::for_file_image`] with a DRAM budget of `dram_budget_bytes` (`None`: the
    /// default): each LSM or hash namespace's index budget, and the bound of the cache of index
    /// pages (`index_cache_bytes`), which the device gives only what the indexes' plans leave
    /// unused (pinned levels first, at their capacity). Refuses a
    /// budget of zero or over [`FILE_DRAM_BUDGET_BYTES_MAX`] with
    /// [`DeviceError::DramBudgetInvalid`]; a budget too small for the image's level lists is
    /// refused when a namespace opens (`EngineError::DramBudgetTooSmall`).
    pub fn for_file_image_with_dram(
        geometry: &Geometry,
        dram_budget_bytes: Option<u64>,
    ) -> Result<DeviceConfig, DeviceError> {
        let mut config = DeviceConfig::for_file_image(geometry);
        match dram_budget_bytes {
            None => {}
            Some(bytes) if bytes == 0 || bytes > FILE_DRAM_BUDGET_BYTES_MAX => {
                return Err(DeviceError::DramBudgetInvalid {
                    bytes,
                    max: FILE_DRAM_BUDGET_BYTES_MAX,
                })
            }
            Some(bytes) => split_budget(&mut config, geometry, bytes),
        }
        Ok(config)
    }

    /// The default indexing DRAM budget of a file image: a sixteenth of its capacity, at most
    /// [`FILE_DRAM_DEFAULT_BYTES_MAX`], and never less than PinK's (0.1% of capacity for
    /// indexing, plus L0, the largest value and a block for GC re-insertion).
    pub fn file_image_dram_default_bytes(geometry: &Geometry) -> u64 {
        let host = (geometry.capacity_bytes() / FILE_DRAM_DEFAULT_CAPACITY_DIVISOR)
            .min(FILE_DRAM_DEFAULT_BYTES_MAX);
        host.max(pink_budget_bytes(geometry))
    }
}

/// Gives `bytes` of DRAM to the namespaces' indexes, and lets the index page cache use what they
/// leave of it. Outside `test_min` images (whose engine keeps its tiny L0), an LSM namespace's
/// write buffer takes an eighth of it ([`host_l0_bytes`]).
fn split_budget(config: &mut DeviceConfig, geometry: &Geometry, bytes: u64) {
    if *geometry != Profile::test_min().geometry {
        config.engine.l0_bytes = host_l0_bytes(geometry, bytes);
    }
    config.index_cache_bytes = bytes;
    config.engine.dram_budget_bytes = bytes;
    config.hash.dram_budget_bytes = bytes;
    config.kaml.dram_budget_bytes = bytes;
}

/// The write buffer (L0) of an LSM namespace on a file image of `geometry` with `budget` bytes
/// of DRAM: an eighth of it ([`FILE_L0_BUDGET_DIVISOR`]), between the engine's own (PinK's 1 MiB)
/// and [`FILE_L0_BYTES_MAX`]. A flush writes its buffer's values in key order, so the values of a range
/// of keys lie in as many places as the flushes that wrote them: a larger buffer lets a scan read
/// neighbouring values with one `pread` (`DetachedRead::run_all`).
fn host_l0_bytes(geometry: &Geometry, budget: u64) -> u64 {
    let pink = EngineConfig::new(Preset::Pink, geometry).l0_bytes;
    (budget / FILE_L0_BUDGET_DIVISOR).clamp(pink, FILE_L0_BYTES_MAX.max(pink))
}

/// PinK's DRAM (§5.1): 0.1% of capacity for indexing, plus the write buffer (L0), the largest
/// value and, for GC re-insertion, a block of relocated values on top.
fn pink_budget_bytes(geometry: &Geometry) -> u64 {
    let engine = EngineConfig::new(Preset::Pink, geometry);
    geometry.capacity_bytes() / 1000
        + engine.l0_bytes
        + engine.value_bytes_max(geometry) as u64
        + geometry.block_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_images_l0_is_an_eighth_of_its_budget_between_pinks_and_32_mib() {
        let pink = |blocks_per_die| Profile::pink_with_blocks(blocks_per_die).geometry;
        let l0_by_default =
            |geometry: &Geometry| DeviceConfig::for_file_image(geometry).engine.l0_bytes;
        let l0_with = |geometry: &Geometry, budget: u64| {
            DeviceConfig::for_file_image_with_dram(geometry, Some(budget))
                .expect("a valid budget")
                .engine
                .l0_bytes
        };
        // A 4 GiB card's default budget is 256 MiB, a 512 MiB card's 32 MiB.
        assert_eq!(l0_by_default(&pink(32)), 32 << 20);
        assert_eq!(l0_by_default(&pink(4)), 4 << 20);
        assert_eq!(l0_with(&pink(32), 16 << 20), 2 << 20);
        assert_eq!(l0_with(&pink(32), 4 << 20), 1 << 20, "never below PinK's");
        assert_eq!(l0_with(&pink(32), 1 << 30), 32 << 20, "never above 32 MiB");
        // `test_min` images keep their engine's tiny L0, so tests see flushes at once.
        let tiny = Profile::test_min().geometry;
        let test_min = EngineConfig::test_min(Preset::Pink).l0_bytes;
        assert_eq!(l0_by_default(&tiny), test_min);
        assert_eq!(l0_with(&tiny, 1 << 30), test_min);
    }
}
