//! Entry points for the fuzz targets (`fuzz/` at the repository root) and the decoder property
//! tests: the superblock's fields below its checksum, and the rebuild of a device from a
//! power-loss dump (or checkpoint) record.
//!
//! Hidden from the documentation and not part of the crate's API. The log record, checkpoint and
//! root record decoders are public in [`crate::durability`] and the targets call them there; what
//! sits behind a checksum or inside the device's open path is reached through the thin wrappers
//! here, so an out-of-tree fuzz crate can call it.

use std::collections::BTreeSet;

use kvssd_flash::{Flash, Profile};

use crate::device::Core;
use crate::durability::checkpoint::Checkpoint;
use crate::durability::superblock::{self, SuperblockCopy, SuperblockError};
use crate::{DeviceConfig, Durability, Result};

/// Decodes a superblock copy's fields as recovery does once its magic and CRC matched (the CRC is
/// not checked).
pub fn superblock_fields(page: &[u8]) -> std::result::Result<SuperblockCopy, SuperblockError> {
    superblock::decode_fields(page)
}

/// Decodes a power-loss dump record (a checkpoint record) and rebuilds a device's DRAM state from
/// it as opening a power-loss-protected device does: the space layer's state, every namespace's
/// engine from its saved part, then each index recounted by reading it back (from a blank
/// `test_min` flash array here, so reads of the pages it names fail cleanly). Returns the number
/// of namespaces rebuilt.
pub fn restore_dump(record: &[u8]) -> Result<usize> {
    let checkpoint = Checkpoint::decode(record)
        .map_err(|error| crate::DeviceError::CheckpointCorrupt(error.into()))?;
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, None).expect("test_min is a valid geometry");
    let mut config = DeviceConfig::test_min();
    config.durability = Durability::PowerLossProtection;
    let system: BTreeSet<u64> = crate::durability::SUPERBLOCK_BLOCKS.into_iter().collect();
    Core::restore(flash, config, &checkpoint, &system, 0)?;
    Ok(checkpoint.namespaces.len())
}
