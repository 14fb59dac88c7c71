//! Which free block the durability layer takes for its log and checkpoints: on simulated flash
//! the least-erased one (wear levelling, as a controller would); on a file image one the file
//! already holds, so that a log page synced on its own overwrites bytes the file system has
//! allocated instead of filling a hole.

use kvssd_flash::{Flash, Profile, Purpose};
use kvssd_space::{Space, SpaceConfig};

/// Takes a system block, programs its first page, releases it (which erases it), and takes
/// another: returns both.
fn take_release_take(flash: Flash) -> (u64, u64) {
    let geometry = Profile::test_min().geometry;
    let mut space = Space::open(flash, SpaceConfig::for_geometry(&geometry)).expect("space");
    let first = space.take_system_block().expect("a free block");
    let page = geometry.block_at(first).page(0);
    space
        .program_system_page(
            0,
            page,
            Purpose::Log,
            &vec![7u8; geometry.page_bytes as usize],
        )
        .expect("program");
    space.release_system_block(0, first).expect("release");
    let second = space.take_system_block().expect("a free block");
    (first, second)
}

#[test]
fn on_a_file_the_log_takes_again_a_block_the_file_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flash = Flash::create(
        &dir.path().join("device.kvssd"),
        Profile::test_min().geometry,
        None,
    )
    .expect("create");
    let (first, second) = take_release_take(flash);
    assert_eq!(
        second, first,
        "the block just erased, which the file holds, is taken again"
    );
}

#[test]
fn on_simulated_flash_the_log_takes_the_least_erased_block() {
    let flash = Flash::new(Profile::test_min().geometry, None).expect("flash");
    let (first, second) = take_release_take(flash);
    assert_ne!(
        second, first,
        "a block never erased is taken before the one just erased"
    );
}
