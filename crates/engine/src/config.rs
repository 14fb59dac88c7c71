//! Engine configuration: presets are configuration of one engine, never copies of code.

use std::fmt;
use std::str::FromStr;

use kvssd_flash::Geometry;
use kvssd_space::SpaceConfig;

use crate::{CpuCosts, EngineError};

/// Longest key, in bytes.
pub const KEY_BYTES_MAX: usize = kvssd_space::KEY_BYTES_MAX;
/// Longest value, in bytes (a device may take less: see [`EngineConfig::value_bytes_max`]).
pub const VALUE_BYTES_MAX: usize = 2 << 20;

/// The engines of PinK §5.2, as switches of one LSM-tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    /// PinK: level pinning, prefixes, range pointers, no Bloom filters, GC re-insertion into L0.
    Pink,
    /// PinK without prefixes and range pointers (ablation).
    PinkNoopt,
    /// PinK with range pointers only (ablation).
    PinkRange,
    /// LightStore: nothing pinned, per-segment Bloom filters sized by Monkey, plain binary search of
    /// level lists, GC rewrite of values and their meta segments.
    Lightstore,
    /// PinK without its GC optimisation (PinK §4.5, "PinK" against "PinK+GCOPT" in Fig. 12): GC
    /// rewrites moved records' meta segments instead of re-inserting the records into L0.
    PinkGcRewrite,
    /// PinK+HW (PinK §4.4, Fig. 7): PinK with compaction's merge sort done by a hardware merge
    /// accelerator at wire speed instead of by the controller's cores.
    PinkHw,
}

/// How data-block GC relocates live values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcPolicy {
    /// Put live pairs back into L0; old meta entries are dropped by later compactions (PinK §4.5).
    Reinsert,
    /// Append live values again and rewrite the meta segments that point at them.
    Rewrite,
}

/// The switches a preset sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// Keep the top levels' meta segments in DRAM when they fit the budget.
    pub pinning: bool,
    /// Keep a 4-byte prefix of each start key in the level list and compare it first.
    pub prefixes: bool,
    /// Keep a range pointer into the next level's list per level-list entry.
    pub range_pointers: bool,
    /// Build Bloom filters per meta segment, bits per key by Monkey's allocation.
    pub bloom_filters: bool,
    /// How GC relocates live values.
    pub gc: GcPolicy,
    /// Merge sorted entries in a hardware accelerator (PinK+HW) instead of on the controller's
    /// cores: see [`MERGE_ACCELERATOR_NS_PER_KIB`].
    pub merge_accelerator: bool,
}

/// The merge accelerator's cost per KiB of entries streamed through it (both input levels):
/// PinK §4.4 has it merge meta segments "as they are streamed from flash at wire speed", and §3.2
/// gives the card's read throughput, 1.1 GB/s, so 1 KiB takes 1024 / 1.1 ns. Pinned levels are
/// merged by the same design over DMA from DRAM (§4.4, last paragraph), taken at the same rate.
pub const MERGE_ACCELERATOR_NS_PER_KIB: u64 = 931;

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 6] = [
        Preset::Pink,
        Preset::PinkNoopt,
        Preset::PinkRange,
        Preset::Lightstore,
        Preset::PinkGcRewrite,
        Preset::PinkHw,
    ];

    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Pink => "pink",
            Preset::PinkNoopt => "pink-noopt",
            Preset::PinkRange => "pink-range",
            Preset::Lightstore => "lightstore",
            Preset::PinkGcRewrite => "pink-gcrewrite",
            Preset::PinkHw => "pink-hw",
        }
    }

    /// The switches of this preset.
    pub fn features(self) -> Features {
        let pink = Features {
            pinning: true,
            prefixes: true,
            range_pointers: true,
            bloom_filters: false,
            gc: GcPolicy::Reinsert,
            merge_accelerator: false,
        };
        match self {
            Preset::Pink => pink,
            Preset::PinkNoopt => Features {
                prefixes: false,
                range_pointers: false,
                ..pink
            },
            Preset::PinkRange => Features {
                prefixes: false,
                ..pink
            },
            Preset::Lightstore => Features {
                pinning: false,
                prefixes: false,
                range_pointers: false,
                bloom_filters: true,
                gc: GcPolicy::Rewrite,
                merge_accelerator: false,
            },
            Preset::PinkGcRewrite => Features {
                gc: GcPolicy::Rewrite,
                ..pink
            },
            Preset::PinkHw => Features {
                merge_accelerator: true,
                ..pink
            },
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = EngineError;

    fn from_str(name: &str) -> Result<Preset, EngineError> {
        Preset::ALL
            .into_iter()
            .find(|preset| preset.name() == name)
            .ok_or_else(|| EngineError::UnknownPreset(name.to_string()))
    }
}

/// Configuration of an LSM-tree engine.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Which engine.
    pub preset: Preset,
    /// The switches; [`EngineConfig::new`] takes them from the preset, tests may override them.
    pub features: Features,
    /// Namespace id written into every data record.
    pub namespace: u32,
    /// L0 (the in-DRAM write buffer) is flushed when its pairs take more than this.
    pub l0_bytes: u64,
    /// T: each level holds T times the entries of the one above.
    pub size_factor: u32,
    /// Entries L1 holds before it is merged down; 0 derives `T ×` the entries of one L0 flush at the
    /// expected sizes.
    pub l1_entries: u64,
    /// Most levels below L0; 0 derives it from the capacity (one more than a full device needs at
    /// the expected sizes). The last level grows without limit.
    pub levels_max: u32,
    /// DRAM for L0, level lists, pinned segments and Bloom filters; 0 means 0.1% of the raw capacity
    /// (PinK's ratio).
    pub dram_budget_bytes: u64,
    /// Average key length assumed when sizing levels and the DRAM budget.
    pub expected_key_bytes: u32,
    /// Average value length assumed when sizing levels and the DRAM budget.
    pub expected_value_bytes: u32,
    /// Free blocks deletes (and the flushes and compactions they cause) may use but puts may not.
    pub delete_reserve_blocks: u32,
    /// GC starts when the free pool falls below this many blocks; 0 derives it from the reserves.
    pub gc_threshold_blocks: u32,
    /// The space layer's configuration.
    pub space: SpaceConfig,
    /// Controller CPU cost per unit of work.
    pub cpu: CpuCosts,
}

impl EngineConfig {
    /// Defaults for a preset on a geometry: 1 MiB L0, T = 10, 0.1% DRAM, 32-byte keys and 1 KiB values
    /// (PinK §3, §4.1).
    pub fn new(preset: Preset, geometry: &Geometry) -> EngineConfig {
        EngineConfig {
            preset,
            features: preset.features(),
            namespace: 0,
            l0_bytes: 1 << 20,
            size_factor: 10,
            l1_entries: 0,
            levels_max: 0,
            dram_budget_bytes: 0,
            expected_key_bytes: 32,
            expected_value_bytes: 1024,
            delete_reserve_blocks: 2,
            gc_threshold_blocks: 0,
            space: SpaceConfig::for_geometry(geometry),
            cpu: CpuCosts::cortex_a53(),
        }
    }

    /// A configuration for `Profile::test_min()` under which flushes, compactions down to the last
    /// level, and GC of meta and data blocks all happen within a few thousand operations.
    pub fn test_min(preset: Preset) -> EngineConfig {
        let geometry = kvssd_flash::Profile::test_min().geometry;
        let mut config = EngineConfig::new(preset, &geometry);
        config.l0_bytes = 2048;
        config.size_factor = 4;
        config.l1_entries = 48;
        config.dram_budget_bytes = 32 * 1024;
        config.expected_key_bytes = 12;
        config.expected_value_bytes = 48;
        config.space.logs = 2;
        config.space.gc_reserve_blocks = 4;
        config.space.over_provisioning_percent = 30;
        config.delete_reserve_blocks = 2;
        config
    }

    /// Longest value this configuration takes on a geometry: 2 MiB, or a quarter of the GC reserve if
    /// that is less, so GC can always relocate a live value of any size (it matters on tiny devices).
    pub fn value_bytes_max(&self, geometry: &Geometry) -> usize {
        let quarter = u64::from(self.space.gc_reserve_blocks) * geometry.block_bytes() / 4;
        VALUE_BYTES_MAX.min(quarter.min(u64::from(u32::MAX)) as usize)
    }
}
