//! TPC-B with real OS threads on a file image: four threads commit AccountUpdates at once
//! through one shared host; afterwards TPC-B's invariant holds and the history has exactly one
//! row per acknowledged commit, on the device after a clean close and reopen too.

use kvssd_bench::tpcb_threads::{self, ThreadsConfig};
use kvssd_flash::Profile;

#[test]
fn four_threads_on_a_file_image_keep_tpcb_consistent() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let path = directory.path().join("tpcb.img");
    let geometry = Profile::pink_with_blocks(4).geometry;
    // Two branches: threads that overlap collide on branch records.
    let mut config = ThreadsConfig::new(4, 150);
    config.accounts_per_branch = 200;
    let (outcome, state, rows_match) =
        tpcb_threads::run_on_file(&path, &geometry, &config).expect("threaded run");
    eprintln!(
        "4 threads: {} committed, {} restarts, {} lock waits, {:.0} tps (wall-clock); {state}",
        outcome.committed,
        outcome.restarts,
        outcome.lock_waits,
        outcome.wall_tps()
    );
    assert_eq!(outcome.committed, 600);
    assert!(state.balanced(), "{state}");
    assert_eq!(state.history.len(), 600);
    assert!(
        rows_match,
        "history rows differ from the acknowledged commits"
    );
    // Whether the threads' transactions overlap (lock waits, restarts) is the scheduler's call:
    // a commit's synced write is most of a transaction. host_threads.rs forces overlap.

    // Reopen: a second run continues on the same image, and its state includes the first's.
    config.run = 1;
    config.transactions_per_thread = 25;
    let (outcome, state, rows_match) =
        tpcb_threads::run_on_file(&path, &geometry, &config).expect("second run");
    assert_eq!(outcome.committed, 100);
    assert!(state.balanced(), "{state}");
    assert_eq!(state.history.len(), 700);
    assert!(rows_match);
}
