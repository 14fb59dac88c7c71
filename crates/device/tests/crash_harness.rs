//! The CI crash pass: for every preset, the small seeded workload (stores, deletes, batches across
//! namespaces, namespace create and delete, iterators) under a write-ahead log with sync per
//! command, power cut after every one of its flash operations (torn in-flight programs), bit flips
//! on every read after the cut, recovery, and a check against the model of acknowledged and
//! in-flight commands. Prints the number of crash points survived per preset; a failure prints
//! its seed, crash point and the `kvssd crash-test` command that replays it.

use kvssd_device::crash::{crash_pass, CrashConfig, CrashPoints};
use kvssd_engine::Preset;

#[test]
fn crash_every_point_of_a_small_workload_for_every_preset() {
    let mut failures = Vec::new();
    let mut total = 0;
    for (index, preset) in Preset::ALL.into_iter().enumerate() {
        let config = CrashConfig::small(0xC0FFEE + index as u64, preset);
        let outcome = crash_pass(&config, CrashPoints::All);
        println!(
            "crash pass wal/every-command preset {}: {} of {} crash points survived \
             ({} flash operations in the workload, {} log records replayed, recovery at most {} ns simulated)",
            preset.name(),
            outcome.survived,
            outcome.crash_points,
            outcome.workload_operations,
            outcome.records_replayed,
            outcome.recovery_simulated_ns_max
        );
        assert!(
            outcome.crash_points > 0,
            "the workload did no flash operation"
        );
        total += outcome.crash_points;
        failures.extend(outcome.failures);
    }
    println!("crash pass: {total} crash points in all");
    for failure in failures.iter().take(20) {
        println!("FAILED {failure}");
    }
    assert!(
        failures.is_empty(),
        "{} crash points failed",
        failures.len()
    );
}
