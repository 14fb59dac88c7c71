//! What the flash crate's fuzz targets found, checked for the exact error it now gives. Every kept
//! input is also replayed, for every crate, by `crates/device/tests/fuzz_regressions.rs`.

#[test]
fn fuzz_image_header_with_more_dies_than_a_u32_counts_is_refused() {
    // Found by the `image_header` target: 2^24 channels of 380 ways, one block of one page each,
    // validated (the page count fits), then counting the dies overflowed a u32.
    // The input was found under format version 1; it is replayed as the current version, so that
    // it reaches the geometry check again rather than stopping at the version.
    let mut header =
        include_bytes!("../../../fuzz/regressions/image_header/dies-overflow-u32").to_vec();
    header[8..12].copy_from_slice(&kvssd_flash::IMAGE_FORMAT_VERSION.to_le_bytes());
    assert!(matches!(
        kvssd_flash::fuzzing::image_header_fields(&header),
        Err(kvssd_flash::fuzzing::HeaderError::Geometry(
            kvssd_flash::GeometryError::TooManyDies { .. }
        ))
    ));
}
