//! Replays every input a fuzz target crashed on, kept under `fuzz/regressions/TARGET/` at the
//! repository root, through the same entry point the target calls (each crate's
//! `fuzzing::TARGETS`: flash, space, engine and device, whose tables this crate can all reach). Ordinary `cargo test` runs (and CI) so keep each fix
//! fixed without a nightly toolchain or cargo-fuzz: an input must now be refused, or accepted,
//! without a panic.

use std::path::Path;

#[test]
fn fuzz_regressions_replay_without_panicking() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    let tables = [
        kvssd_flash::fuzzing::TARGETS,
        kvssd_space::fuzzing::TARGETS,
        kvssd_engine::fuzzing::TARGETS,
        kvssd_device::fuzzing::TARGETS,
    ];
    for (target, run) in tables.into_iter().flatten() {
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
