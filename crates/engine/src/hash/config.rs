//! Configuration of the hash engines: `hash` (PinK's baseline) and `kaml` are presets of one engine.

use std::fmt;
use std::str::FromStr;

use kvssd_flash::Geometry;
use kvssd_space::SpaceConfig;

use super::HashError;
use crate::{CpuCosts, EngineError, VALUE_BYTES_MAX};

/// The hash engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashPreset {
    /// PinK's "Hash" baseline (ATC'20 §2.3, §5.1): 8-bit signatures, bucket pages on flash, an LRU
    /// cache of bucket pages in the DRAM budget, read-modify-write of bucket pages on update.
    Hash,
    /// KAML's index (HPCA'17 §IV-C): one table per namespace wholly in DRAM, doubled when its load
    /// factor passes the limit; no index I/O at all.
    Kaml,
}

impl HashPreset {
    /// Every preset.
    pub const ALL: [HashPreset; 2] = [HashPreset::Hash, HashPreset::Kaml];

    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            HashPreset::Hash => "hash",
            HashPreset::Kaml => "kaml",
        }
    }

    /// Whether the table lives on flash behind a cache (`hash`) rather than wholly in DRAM.
    pub fn on_flash(self) -> bool {
        self == HashPreset::Hash
    }
}

impl fmt::Display for HashPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HashPreset {
    type Err = EngineError;

    fn from_str(name: &str) -> Result<HashPreset, EngineError> {
        HashPreset::ALL
            .into_iter()
            .find(|preset| preset.name() == name)
            .ok_or_else(|| EngineError::UnknownPreset(name.to_string()))
    }
}

/// Widest signature, in bits (a signature of 64 bits is the whole key hash).
pub const SIGNATURE_BITS_MAX: u32 = 64;

/// Configuration of a hash engine.
#[derive(Debug, Clone, PartialEq)]
pub struct HashConfig {
    /// Which engine.
    pub preset: HashPreset,
    /// Namespace id written into every data record.
    pub namespace: u32,
    /// Bits of the key hash kept in a slot, 1 to 64. `hash`: 8 (PinK §5.1); `kaml`: 64, so the
    /// table can be resized without reading keys back and a present key costs one data read.
    pub signature_bits: u32,
    /// The write buffer (whole pairs in DRAM) is applied to the table when it holds more than this.
    pub write_buffer_bytes: u64,
    /// DRAM for the write buffer and the index (bucket directory and cache for `hash`, the table for
    /// `kaml`); 0 means 0.1% of the raw capacity, the LSM presets' budget.
    pub dram_budget_bytes: u64,
    /// Load factor at which `hash` sizes its table for a full device and `kaml` doubles its table.
    pub load_factor_max: f64,
    /// `kaml` with 64-bit signatures only: keys are exactly 8 bytes, KAML's 64-bit keys, and a
    /// slot's signature is a bijection of its key, so the slot holds the key as KAML's 16-byte slots
    /// do (key and address, §IV-C: 2 GB for 100 million pairs at load factor 0.75). A signature
    /// match is then the key itself: a put or a presence check waits for no record read (the
    /// replaced record is still read, off the command's path, for its length). Other key lengths
    /// are refused.
    pub key_in_slot: bool,
    /// `kaml`: each log keeps its own list of erased blocks (KAML §IV-E), so a namespace given a
    /// subset of the logs takes blocks only from their dies: its data, free pool, GC reserve and
    /// capacity are those dies' (see `kvssd_space::Space::set_namespace_confined`). Off, a log
    /// whose dies run short borrows any die's block. No effect on a namespace on every log.
    pub log_free_lists: bool,
    /// Slots a key may occupy, counted from its home slot (linear probing); 0 means one bucket page
    /// of slots (`hash`: a lookup touches at most two bucket pages) or 64 (`kaml`).
    pub probe_slots_max: u32,
    /// Slots of the table: `hash` fixed size (0: sized for a full device at the expected sizes and
    /// `load_factor_max`); `kaml` initial size (0: 1024).
    pub table_slots: u64,
    /// Average key length assumed when sizing the `hash` table.
    pub expected_key_bytes: u32,
    /// Average value length assumed when sizing the `hash` table.
    pub expected_value_bytes: u32,
    /// Free blocks deletes may use but puts may not.
    pub delete_reserve_blocks: u32,
    /// GC starts when the free pool falls below this many blocks; 0 derives it from the reserves.
    pub gc_threshold_blocks: u32,
    /// The space layer's configuration.
    pub space: SpaceConfig,
    /// Controller CPU cost per unit of work.
    pub cpu: CpuCosts,
}

impl HashConfig {
    /// Defaults for a preset on a geometry: 1 MiB write buffer, 0.1% DRAM, load factor 0.7, 32-byte
    /// keys and 1 KiB values (PinK §5.1).
    pub fn new(preset: HashPreset, geometry: &Geometry) -> HashConfig {
        HashConfig {
            preset,
            namespace: 0,
            signature_bits: match preset {
                HashPreset::Hash => 8,
                HashPreset::Kaml => 64,
            },
            write_buffer_bytes: 1 << 20,
            dram_budget_bytes: 0,
            load_factor_max: 0.7,
            key_in_slot: false,
            log_free_lists: preset == HashPreset::Kaml,
            probe_slots_max: 0,
            table_slots: 0,
            expected_key_bytes: 32,
            expected_value_bytes: 1024,
            delete_reserve_blocks: 2,
            gc_threshold_blocks: 0,
            space: SpaceConfig::for_geometry(geometry),
            cpu: CpuCosts::cortex_a53(),
        }
    }

    /// A configuration for `Profile::test_min()` under which write-buffer flushes, cache evictions,
    /// bucket write-backs (`hash`), table resizes (`kaml`) and GC of both block kinds happen within
    /// a few thousand operations.
    pub fn test_min(preset: HashPreset) -> HashConfig {
        let geometry = kvssd_flash::Profile::test_min().geometry;
        let mut config = HashConfig::new(preset, &geometry);
        config.write_buffer_bytes = 2048;
        config.expected_key_bytes = 12;
        config.expected_value_bytes = 48;
        config.table_slots = match preset {
            // About 1,500 pairs at load factor 0.7: 38 bucket pages of 512 bytes.
            HashPreset::Hash => 2048,
            HashPreset::Kaml => 64,
        };
        // `hash`: the write buffer, the directory and 8 cached bucket pages (a fifth of the table).
        config.dram_budget_bytes = 2048 + 4096 + 512;
        if preset == HashPreset::Kaml {
            config.dram_budget_bytes = 2048 + 16 * 4096;
        }
        config.space.logs = 2;
        config.space.gc_reserve_blocks = 4;
        config.space.over_provisioning_percent = 30;
        config
    }

    /// Longest value this configuration takes on a geometry: 2 MiB, or a quarter of the GC reserve
    /// if that is less, so GC can always relocate a live value of any size.
    pub fn value_bytes_max(&self, geometry: &Geometry) -> usize {
        let quarter = u64::from(self.space.gc_reserve_blocks) * geometry.block_bytes() / 4;
        VALUE_BYTES_MAX.min(quarter.min(u64::from(u32::MAX)) as usize)
    }

    pub(crate) fn check(&self) -> Result<(), HashError> {
        let bad = |what: String| Err(HashError::Engine(EngineError::Config(what)));
        if self.signature_bits == 0 || self.signature_bits > SIGNATURE_BITS_MAX {
            return bad(format!(
                "signature_bits {} must be 1 to {SIGNATURE_BITS_MAX}",
                self.signature_bits
            ));
        }
        if !(self.load_factor_max > 0.0 && self.load_factor_max <= 0.95) {
            return bad(format!(
                "load_factor_max {} must be in (0, 0.95]",
                self.load_factor_max
            ));
        }
        if self.write_buffer_bytes == 0 || self.expected_key_bytes == 0 {
            return bad("write_buffer_bytes and expected_key_bytes must be positive".into());
        }
        if self.key_in_slot && (self.preset != HashPreset::Kaml || self.signature_bits != 64) {
            return bad("key_in_slot needs kaml with 64-bit signatures".into());
        }
        Ok(())
    }
}
