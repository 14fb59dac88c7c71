//! The configuration of a device kept in a file: a function of the geometry recorded in the image
//! and nothing else, so every program that opens an image (the `kvssd` tools, the C library)
//! opens it exactly as it was formatted without recording anything more.

use kvssd_engine::{EngineConfig, Preset};
use kvssd_flash::{Geometry, Profile};

use crate::{DeviceConfig, Durability, SyncPolicy};

impl DeviceConfig {
    /// The configuration of a file-media device of `geometry`: `test_min` images get the
    /// engine's `test_min` configuration; other geometries the defaults with PinK's DRAM budget
    /// (0.1% of capacity for indexing, plus L0, the largest value and a block for GC
    /// re-insertion). A write-ahead log synced on every command.
    pub fn for_file_image(geometry: &Geometry) -> DeviceConfig {
        let mut config = if *geometry == Profile::test_min().geometry {
            DeviceConfig::test_min()
        } else {
            // PinK's DRAM (§5.1): 0.1% of capacity for indexing, plus the write buffer (L0), the
            // largest value and, for GC re-insertion, a block of relocated values on top.
            let mut engine = EngineConfig::new(Preset::Pink, geometry);
            engine.dram_budget_bytes = geometry.capacity_bytes() / 1000
                + engine.l0_bytes
                + engine.value_bytes_max(geometry) as u64
                + geometry.block_bytes();
            let mut config = DeviceConfig::with_engine(engine);
            config.block = kvssd_engine::block::BlockConfig::new(geometry);
            config.block.space = config.space.clone();
            config
        };
        config.durability = Durability::WriteAheadLog(SyncPolicy::EveryCommand);
        config
    }
}
