//! Replays every input a fuzz target of this crate crashed on, kept under
//! `fuzz/regressions/TARGET/` at the repository root, through the same entry point the target
//! calls (`kvssd_flash::fuzzing::TARGETS`). Ordinary `cargo test` runs (and CI) so keep each fix
//! fixed without a nightly toolchain or cargo-fuzz: an input must now be refused, or accepted,
//! without a panic.

use std::path::Path;

#[test]
fn fuzz_regressions_replay_without_panicking() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    for (target, run) in kvssd_flash::fuzzing::TARGETS {
        let Ok(entries) = std::fs::read_dir(root.join(target)) else {
            continue;
        };
        let mut paths: Vec<_> = entries
            .map(|entry| entry.expect("a readable regressions directory").path())
            .collect();
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).expect("a readable regression input");
            println!("{target}: {}", path.display());
            run(&bytes);
        }
    }
}

#[test]
fn fuzz_image_header_with_more_dies_than_a_u32_counts_is_refused() {
    // Found by the `image_header` target: 2^24 channels of 380 ways, one block of one page each,
    // validated (the page count fits), then counting the dies overflowed a u32.
    let header = include_bytes!("../../../fuzz/regressions/image_header/dies-overflow-u32");
    assert!(matches!(
        kvssd_flash::fuzzing::image_header_fields(header),
        Err(kvssd_flash::fuzzing::HeaderError::Geometry(
            kvssd_flash::GeometryError::TooManyDies { .. }
        ))
    ));
}
