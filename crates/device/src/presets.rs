//! The preset table: every kind of namespace the device offers, and how each opens its engine.
//!
//! A namespace's index is a `Box<dyn Engine>` (the contract of `kvssd_engine::contract`); the
//! device never asks which engine it is. Adding an engine is one type implementing
//! [`kvssd_engine::Engine`] with a [`Factory`] that opens it, and one line in [`PRESETS`].

use kvssd_engine::block::BlockIndex;
use kvssd_engine::hash::{HashIndex, HashPreset};
use kvssd_engine::{Capabilities, Engine, EngineError, LsmTree, Preset};
use kvssd_space::Space;

use crate::DeviceConfig;

/// How a preset opens (or restores) the engine of a namespace.
pub(crate) trait Factory: Sync {
    /// The name users type.
    fn name(&self) -> &'static str;

    /// What its engines serve beyond point operations (known before any is open, so the device
    /// can refuse iterators on a preset that cannot serve them).
    fn capabilities(&self) -> Capabilities;

    /// The DRAM budget its engines get under `config` (0: derived from the capacity), for the
    /// power-loss dump's bound.
    fn dram_budget_bytes(&self, config: &DeviceConfig) -> u64;

    /// For an engine whose keys are logical block numbers: the bytes of a logical block under
    /// `config` (`None` for key-value engines).
    fn logical_block_bytes(&self, config: &DeviceConfig) -> Option<u32> {
        let _ = config;
        None
    }

    /// An empty engine for namespace `namespace` (`saved`: `None`), or one restored from the
    /// bytes of its [`Engine::durable_state`].
    fn open(
        &self,
        space: &Space,
        config: &DeviceConfig,
        namespace: u32,
        saved: Option<&[u8]>,
    ) -> Result<Box<dyn Engine>, EngineError>;
}

/// An LSM-tree preset: the device's engine template with the preset's switches.
struct Lsm(Preset);

impl Factory for Lsm {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { ordered: true }
    }

    fn dram_budget_bytes(&self, config: &DeviceConfig) -> u64 {
        config.engine.dram_budget_bytes
    }

    fn open(
        &self,
        space: &Space,
        config: &DeviceConfig,
        namespace: u32,
        saved: Option<&[u8]>,
    ) -> Result<Box<dyn Engine>, EngineError> {
        let mut engine = config.engine.clone();
        engine.preset = self.0;
        engine.features = self.0.features();
        engine.namespace = namespace;
        engine.space = space.config().clone();
        let tree = match saved {
            None => LsmTree::open(space, engine)?,
            Some(bytes) => LsmTree::restore(space, engine, bytes)?,
        };
        Ok(Box::new(tree))
    }
}

/// A hash preset: the device's template for it.
struct Hash(HashPreset);

impl Hash {
    fn template<'a>(&self, config: &'a DeviceConfig) -> &'a kvssd_engine::hash::HashConfig {
        match self.0 {
            HashPreset::Hash => &config.hash,
            HashPreset::Kaml => &config.kaml,
        }
    }
}

impl Factory for Hash {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { ordered: false }
    }

    fn dram_budget_bytes(&self, config: &DeviceConfig) -> u64 {
        self.template(config).dram_budget_bytes
    }

    fn open(
        &self,
        space: &Space,
        config: &DeviceConfig,
        namespace: u32,
        saved: Option<&[u8]>,
    ) -> Result<Box<dyn Engine>, EngineError> {
        let mut engine = self.template(config).clone();
        engine.preset = self.0;
        engine.namespace = namespace;
        engine.space = space.config().clone();
        let index = match saved {
            None => HashIndex::open(space, engine)?,
            Some(bytes) => HashIndex::restore(space, engine, bytes)?,
        };
        Ok(Box::new(index))
    }
}

/// `block`: a conventional SSD's page-mapped FTL, keys being logical block numbers.
struct Block;

impl Factory for Block {
    fn name(&self) -> &'static str {
        "block"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { ordered: false }
    }

    fn dram_budget_bytes(&self, config: &DeviceConfig) -> u64 {
        // What `open` derives for a budget of 0: the map and the write buffer (sized to the
        // capacity when the logical space is, so the dump's bound never falls short of it).
        let block = &config.block;
        if block.dram_budget_bytes > 0 {
            block.dram_budget_bytes
        } else {
            block.dram_needed_bytes()
        }
    }

    fn logical_block_bytes(&self, config: &DeviceConfig) -> Option<u32> {
        Some(config.block.logical_block_bytes)
    }

    fn open(
        &self,
        space: &Space,
        config: &DeviceConfig,
        namespace: u32,
        saved: Option<&[u8]>,
    ) -> Result<Box<dyn Engine>, EngineError> {
        let mut engine = config.block.clone();
        engine.namespace = namespace;
        engine.space = space.config().clone();
        let index = match saved {
            None => BlockIndex::open(space, engine)?,
            Some(bytes) => BlockIndex::restore(space, engine, bytes)?,
        };
        Ok(Box::new(index))
    }
}

/// Every preset, in the order of their on-flash codes: a namespace's preset is stored as its
/// position here, so entries are only ever appended.
pub(crate) const PRESETS: &[&dyn Factory] = &[
    &Lsm(Preset::Pink),
    &Lsm(Preset::PinkNoopt),
    &Lsm(Preset::PinkRange),
    &Lsm(Preset::Lightstore),
    &Hash(HashPreset::Hash),
    &Hash(HashPreset::Kaml),
    &Lsm(Preset::PinkGcRewrite),
    &Block,
    &Lsm(Preset::PinkHw),
];

/// How many presets there are.
pub(crate) const PRESET_COUNT: usize = PRESETS.len();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_distinct_names_and_cover_every_engine_preset() {
        let names: Vec<&str> = PRESETS.iter().map(|preset| preset.name()).collect();
        for (index, name) in names.iter().enumerate() {
            assert!(!names[..index].contains(name), "{name} appears twice");
        }
        for preset in Preset::ALL {
            assert!(names.contains(&preset.name()), "{preset} has no entry");
        }
        for preset in HashPreset::ALL {
            assert!(names.contains(&preset.name()), "{preset} has no entry");
        }
    }
}
