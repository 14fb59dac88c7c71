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

/// The fuzz targets this crate owns, by name (the target's name under `fuzz/fuzz_targets/` and
/// its directory under `fuzz/regressions/`), with what each runs on one input. The targets and
/// the regression test that replays saved inputs both call these, so they cannot drift apart.
pub const TARGETS: &[kvssd_flash::fuzzing::Target] = &[
    ("wal_record", wal_record_input),
    ("checkpoint", checkpoint_input),
    ("root_record", root_record_input),
    ("superblock", superblock_input),
    ("plp_dump", plp_dump_input),
];

/// The `wal_record` target: the whole input is a log record.
pub fn wal_record_input(data: &[u8]) {
    let _ = crate::durability::wal::decode(data);
}

/// The `checkpoint` target: the whole input is a checkpoint record.
pub fn checkpoint_input(data: &[u8]) {
    let _ = Checkpoint::decode(data);
}

/// The `root_record` target: the whole input is a superblock body.
pub fn root_record_input(data: &[u8]) {
    let _ = crate::durability::checkpoint::Root::decode(data);
}

/// The `superblock` target: the whole input is a superblock page.
pub fn superblock_input(data: &[u8]) {
    let _ = superblock_fields(data);
}

/// The `plp_dump` target: the whole input is a dump record.
pub fn plp_dump_input(data: &[u8]) {
    let _ = restore_dump(data);
}
