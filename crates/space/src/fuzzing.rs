//! Entry points for the fuzz targets (`fuzz/` at the repository root) and the decoder property
//! tests: the data-page decoders and [`Space::restore`], run on untrusted bytes.
//!
//! Hidden from the documentation and not part of the crate's API. The record decoders are
//! crate-private and sit below the flash layer's page checksum (random bytes could never reach
//! them through a read); each function here is a thin wrapper that runs one of them on the bytes
//! given, so an out-of-tree fuzz crate can call it. [`Space::restore`] is public already; the
//! wrapper only supplies a small flash array to restore onto.

use std::collections::BTreeSet;

use kvssd_flash::{Flash, Profile};

use crate::layout;
use crate::{PageIndex, Record, RecordHeader, Result, Space, SpaceConfig};

/// The page index the wrappers report in their errors.
const FUZZ_PAGE: PageIndex = PageIndex(0);

/// Decodes the record header at `offset` of a data page.
pub fn record_header(page: &[u8], offset: usize) -> Result<RecordHeader> {
    RecordHeader::decode(page, offset, FUZZ_PAGE)
}

/// Decodes the small record at `offset` of a data page, as a read of its pointer does.
pub fn small_record(page: &[u8], offset: usize) -> Result<Record> {
    layout::decode_small(page, offset, FUZZ_PAGE)
}

/// Checks a small record's bytes alone (`record`, as a read made without its page takes them)
/// against the key and value length its index filed, and returns its value.
pub fn small_record_value(record: &[u8], key: &[u8], value_len: usize) -> Result<Vec<u8>> {
    layout::small_value_in_place(record.to_vec(), key, value_len, FUZZ_PAGE)
}

/// Decodes one page of a large record as a read does: its head (header and key), then the value
/// slice it holds, checked against its own header's part number and key.
pub fn large_record_page(page: &[u8]) -> Result<Vec<u8>> {
    let (header, key) = layout::decode_large_head(page, FUZZ_PAGE)?;
    let want = (header.value_len as usize).min(page.len());
    let value = layout::decode_large_part(page, usize::from(header.part), key, want, FUZZ_PAGE)?;
    Ok(value.to_vec())
}

/// An empty space layer on a fresh `test_min` flash array (64 blocks of 8 pages of 512 bytes).
pub fn blank_space() -> Space {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, None).expect("test_min is a valid geometry");
    Space::open(flash, SpaceConfig::for_geometry(&profile.geometry))
        .expect("a fresh array is erased")
}

/// Restores a space layer on a fresh `test_min` flash array from saved-state bytes, as recovery
/// does with a checkpoint's or a power-loss dump's space state.
pub fn restore(state: &[u8]) -> Result<Space> {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, None).expect("test_min is a valid geometry");
    let config = SpaceConfig::for_geometry(&profile.geometry);
    Space::restore(flash, config, state, &BTreeSet::new(), 0).map(|(space, _)| space)
}

/// The fuzz targets this crate owns, by name (the target's name under `fuzz/fuzz_targets/` and
/// its directory under `fuzz/regressions/`), with what each runs on one input. The targets and
/// the regression test that replays saved inputs both call these, so they cannot drift apart.
pub const TARGETS: &[kvssd_flash::fuzzing::Target] = &[
    ("data_record", data_record_input),
    ("large_record", large_record_input),
    ("space_restore", space_restore_input),
];

/// The `data_record` target: the first two bytes are the record's offset (little-endian), the
/// rest is the page.
pub fn data_record_input(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let offset = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let page = &data[2..];
    let _ = record_header(page, offset);
    let _ = small_record(page, offset);
}

/// The `large_record` target: the whole input is the page.
pub fn large_record_input(data: &[u8]) {
    let _ = large_record_page(data);
}

/// The `space_restore` target: the whole input is the saved state.
pub fn space_restore_input(data: &[u8]) {
    let _ = restore(data);
}
