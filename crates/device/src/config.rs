//! How a device is set up: the space and engine templates, limits, and durability mode.

use kvssd_engine::block::BlockConfig;
use kvssd_engine::hash::{HashConfig, HashPreset};
use kvssd_engine::{EngineConfig, Preset};
use kvssd_flash::Profile;
use kvssd_space::SpaceConfig;

use crate::{BATCH_OPERATIONS_MAX, ITERATORS_OPEN_MAX, NAMESPACES_MAX};

/// How a device is set up.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceConfig {
    /// The space layer (logs, chunk size, over-provisioning, GC reserve), shared by all namespaces.
    pub space: SpaceConfig,
    /// The engine configuration each namespace starts from; its preset, features and namespace id
    /// are replaced by the namespace's.
    pub engine: EngineConfig,
    /// The configuration `hash` namespaces start from (namespace id and space replaced).
    pub hash: HashConfig,
    /// The configuration `kaml` namespaces start from (namespace id and space replaced).
    pub kaml: HashConfig,
    /// The configuration `block` namespaces start from (namespace id and space replaced).
    pub block: BlockConfig,
    /// Controller time each store, retrieve, delete and batch command takes besides its
    /// operations (fetching and parsing the command, setting up its transfers, posting its
    /// completion), in nanoseconds; 0 (the default) leaves it out. A batch pays it once for all
    /// its operations.
    pub command_ns: u64,
    /// Controller time per operation of a command (each store, retrieve or delete, each operation
    /// of a batch) besides what its engine charges: the firmware's handling of one record (its
    /// transfer into the buffer, its lock, its completion entry), in nanoseconds; 0 by default.
    pub operation_ns: u64,
    /// Device-wide GC starts when free blocks fall below this many.
    pub gc_threshold_blocks: u64,
    /// Most iterators open at once.
    pub iterators_open_max: usize,
    /// Most namespaces at once.
    pub namespaces_max: usize,
    /// Most operations in one batch.
    pub batch_operations_max: usize,
    /// How acknowledged writes survive power loss (see [`Durability`]).
    pub durability: Durability,
    /// With a write-ahead log: a checkpoint (which trims the log) is written once the log holds
    /// this many blocks, or `CHECKPOINT_LOG_RATIO` times the pages of the last checkpoint if that
    /// is more.
    pub checkpoint_log_blocks: usize,
    /// Most bytes of host memory for a cache of index pages read from file media
    /// ([`kvssd_flash::Flash::set_index_cache_bytes`]), shared by the namespaces; the cache gets
    /// at most what their indexes plan never to use of their DRAM budgets. 0 (the default, and
    /// always on simulated flash) keeps none.
    pub index_cache_bytes: u64,
}

/// How a device keeps acknowledged writes across power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Nothing is written for durability; the device starts from an erased array at every open
    /// (benchmarks, and the papers' capacitor assumption when power never fails).
    Volatile,
    /// Write-ahead log with checkpoints; recovery = newest checkpoint + log replay. The only mode
    /// on file media.
    WriteAheadLog(crate::durability::SyncPolicy),
    /// Power-loss protection (the papers' capacitor; simulated flash only): no log; DRAM state is
    /// safe until [`crate::Device::power_cut`], which writes it to a dump (within
    /// [`crate::Device::plp_dump_bound`] page programs) before the flash loses power; recovery loads the
    /// dump.
    PowerLossProtection,
}

impl DeviceConfig {
    /// Defaults for a profile: the engine's defaults for its geometry and the limits of the crate
    /// root.
    pub fn new(profile: &Profile) -> DeviceConfig {
        let engine = EngineConfig::new(Preset::Pink, &profile.geometry);
        let mut config = DeviceConfig::with_engine(engine);
        config.hash = HashConfig::new(HashPreset::Hash, &profile.geometry);
        config.kaml = HashConfig::new(HashPreset::Kaml, &profile.geometry);
        config.block = BlockConfig::new(&profile.geometry);
        config.block.cpu = config.engine.cpu;
        config.block.delete_reserve_blocks = config.engine.delete_reserve_blocks;
        config
    }

    /// A configuration for `Profile::test_min()` under which flushes, compactions and GC happen
    /// within a few hundred operations (the engine's `test_min` configuration).
    pub fn test_min() -> DeviceConfig {
        let mut config = DeviceConfig::with_engine(EngineConfig::test_min(Preset::Pink));
        config.hash = HashConfig::test_min(HashPreset::Hash);
        // A table of 19 bucket pages with 8 cached: small enough to share the tiny flash with
        // other namespaces, large enough that evictions and write-backs happen.
        config.hash.table_slots = 1024;
        config.kaml = HashConfig::test_min(HashPreset::Kaml);
        config.block = BlockConfig::test_min();
        config
    }

    /// Limits of the crate root around an engine template.
    pub fn with_engine(engine: EngineConfig) -> DeviceConfig {
        let space = engine.space.clone();
        let hash_template = |preset: HashPreset| {
            let mut config = HashConfig::new(preset, &Profile::test_min().geometry);
            config.space = engine.space.clone();
            config.dram_budget_bytes = engine.dram_budget_bytes;
            config.delete_reserve_blocks = engine.delete_reserve_blocks;
            config.cpu = engine.cpu;
            config
        };
        let hash = hash_template(HashPreset::Hash);
        let kaml = hash_template(HashPreset::Kaml);
        let mut block = BlockConfig::new(&Profile::test_min().geometry);
        block.space = engine.space.clone();
        block.delete_reserve_blocks = engine.delete_reserve_blocks;
        block.cpu = engine.cpu;
        DeviceConfig {
            gc_threshold_blocks: u64::from(space.gc_reserve_blocks)
                + u64::from(engine.delete_reserve_blocks)
                + u64::from(space.logs)
                + 2,
            space,
            engine,
            hash,
            kaml,
            block,
            command_ns: 0,
            operation_ns: 0,
            iterators_open_max: ITERATORS_OPEN_MAX,
            namespaces_max: NAMESPACES_MAX,
            batch_operations_max: BATCH_OPERATIONS_MAX,
            durability: Durability::Volatile,
            checkpoint_log_blocks: 2,
            index_cache_bytes: 0,
        }
    }
}
