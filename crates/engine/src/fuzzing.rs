//! Entry points for the fuzz targets (`fuzz/` at the repository root) and the decoder property
//! tests: the meta segment and bucket page decoders, and the engines' restore from saved state,
//! run on untrusted bytes.
//!
//! Hidden from the documentation and not part of the crate's API. The page decoders are
//! crate-private and sit below the flash layer's page checksum (and, for bucket pages, below the
//! page's own CRC), so random bytes could never reach them through a read; each function here is a
//! thin wrapper that runs one of them on the bytes given, so an out-of-tree fuzz crate can call it.
//! [`LsmTree::restore`] and [`HashIndex::restore`] are public already; the wrappers only supply a
//! small space layer to restore onto.

use kvssd_flash::{Flash, Profile};
use kvssd_space::Space;

use crate::cpu::CpuCounts;
use crate::hash::bucket;
use crate::hash::{HashConfig, HashError, HashIndex, HashPreset};
use crate::lsm::segment::SegmentPage;
use crate::{EngineConfig, EngineError, LsmTree, Preset};

/// Parses a meta segment page and reads it every way the engine does: each entry in order, the
/// start key, and a binary search for `probe`. Returns the number of entries.
pub fn segment_page(page: &[u8], probe: &[u8]) -> Result<usize, EngineError> {
    let view = SegmentPage::parse(page, 0)?;
    let entries = view.entries()?;
    let _ = view.first_key();
    let _ = view.find(probe, &mut CpuCounts::default());
    Ok(entries.len())
}

/// Decodes a bucket page's slot array as [`crate::hash`] does once the page's header and CRC
/// matched, with the slot count and signature width its header states (the CRC is not checked).
/// Returns the number of live slots.
pub fn bucket_page_slots(page: &[u8]) -> Result<usize, HashError> {
    let _ = bucket::decode_header(page, 0)?;
    let slot_count = usize::from(u16::from_le_bytes([page[16], page[17]]));
    let signature_len = u32::from(page[18]);
    if !(1..=8).contains(&signature_len) {
        return Err(HashError::MalformedBucket {
            page: 0,
            what: "signature width outside 1 to 8 bytes",
        });
    }
    // A width in bits the header's byte count allows, so the signature range check is reached.
    let bits = (signature_len - 1) * 8 + 1 + u32::from(page[8] % 8);
    let slots = bucket::decode_slots(page, slot_count, bits, 0)?;
    Ok(slots.iter().filter(|slot| slot.is_live()).count())
}

/// Decodes a whole bucket page, header and CRC included, as table page `table_page` of a table of
/// `slot_count` slots per page with `bits`-bit signatures.
pub fn bucket_page(
    page: &[u8],
    table_page: u64,
    slot_count: usize,
    bits: u32,
) -> Result<usize, HashError> {
    Ok(bucket::decode(
        page,
        table_page,
        slot_count,
        bits,
        0,
        kvssd_space::Contents::Verify,
    )?
    .len())
}

/// Encodes a bucket page of `slots` (pointer, signature) pairs, for the property tests.
pub fn encode_bucket_page(
    slots: &[(u64, u64)],
    table_page: u64,
    sequence: u64,
    bits: u32,
    page_bytes: usize,
) -> Vec<u8> {
    let slots: Vec<bucket::Slot> = slots
        .iter()
        .map(|&(pointer, signature)| bucket::Slot { signature, pointer })
        .collect();
    bucket::encode(&slots, table_page, sequence, bits, page_bytes)
}

fn space_for(config: kvssd_space::SpaceConfig) -> Space {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, None).expect("test_min is a valid geometry");
    Space::open(flash, config).expect("a fresh array is erased and test_min fits it")
}

/// Restores an LSM-tree index of `preset` (under its `test_min` configuration, on a fresh space
/// layer) from [`LsmTree::durable_state`] bytes, as recovery does with a checkpoint's part.
pub fn lsm_restore(preset: Preset, state: &[u8]) -> Result<LsmTree, EngineError> {
    let config = EngineConfig::test_min(preset);
    let space = space_for(config.space.clone());
    LsmTree::restore(&space, config, state)
}

/// Restores a hash index of `preset` (under its `test_min` configuration, on a fresh space layer)
/// from [`HashIndex::durable_state`] bytes, as recovery does with a checkpoint's part.
pub fn hash_restore(preset: HashPreset, state: &[u8]) -> Result<HashIndex, HashError> {
    let config = HashConfig::test_min(preset);
    let space = space_for(config.space.clone());
    HashIndex::restore(&space, config, state)
}

/// The fuzz targets this crate owns, by name (the target's name under `fuzz/fuzz_targets/` and
/// its directory under `fuzz/regressions/`), with what each runs on one input. The targets and
/// the regression test that replays saved inputs both call these, so they cannot drift apart.
pub const TARGETS: &[kvssd_flash::fuzzing::Target] = &[
    ("segment_page", segment_page_input),
    ("bucket_page", bucket_page_input),
    ("lsm_restore", lsm_restore_input),
    ("hash_restore", hash_restore_input),
];

/// The `segment_page` target: the first byte is the length of the key searched for, taken from
/// the end of the input; the bytes between are the page.
pub fn segment_page_input(data: &[u8]) {
    let Some((&probe_len, rest)) = data.split_first() else {
        return;
    };
    let split = rest.len().saturating_sub(usize::from(probe_len));
    let (page, probe) = rest.split_at(split);
    let _ = segment_page(page, probe);
}

/// The `bucket_page` target: the whole input is the page.
pub fn bucket_page_input(data: &[u8]) {
    let _ = bucket_page_slots(data);
}

/// The `lsm_restore` target: the first byte picks the preset, the rest is the saved state.
pub fn lsm_restore_input(data: &[u8]) {
    let Some((&choice, state)) = data.split_first() else {
        return;
    };
    let preset = Preset::ALL[usize::from(choice) % Preset::ALL.len()];
    let _ = lsm_restore(preset, state);
}

/// The `hash_restore` target: the first byte picks the preset, the rest is the saved state.
pub fn hash_restore_input(data: &[u8]) {
    let Some((&choice, state)) = data.split_first() else {
        return;
    };
    let preset = HashPreset::ALL[usize::from(choice) % HashPreset::ALL.len()];
    let _ = hash_restore(preset, state);
}
