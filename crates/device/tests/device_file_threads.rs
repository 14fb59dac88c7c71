//! Several threads on one device on a real file: retrieves and scans read their values after
//! releasing the device's lock, and programs reach the file after the command releases it. While GC erases and
//! reuses blocks under them, every retrieve must see its own thread's latest store and a value
//! some store of that key wrote; after a close and a reopen, every last store must be there.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use kvssd_device::{
    Device, DeviceConfig, Durability, NamespaceId, NamespaceSpec, StoreMode, SyncPolicy,
};
use kvssd_engine::Preset;
use kvssd_flash::{Profile, Purpose};

const THREADS: usize = 4;
const KEYS_PER_THREAD: usize = 12;
const ROUNDS: u32 = 1_000;

fn key(thread: usize, slot: usize) -> Vec<u8> {
    format!("t{thread}-key{slot:02}").into_bytes()
}

fn value(thread: usize, slot: usize, version: u32) -> Vec<u8> {
    // Padded so that a few thousand stores fill the tiny card several times over.
    format!("t{thread}-key{slot:02} version {version:06}{:>100}", "").into_bytes()
}

/// Stores `thread`'s key `slot` at version `round`.
fn store(device: &Device, namespace: NamespaceId, thread: usize, slot: usize, round: u32) {
    device
        .store(
            0,
            namespace,
            &key(thread, slot),
            &value(thread, slot, round),
            StoreMode::Upsert,
        )
        .expect("store");
}

fn version_of(thread: usize, slot: usize, found: &[u8]) -> u32 {
    let text = std::str::from_utf8(found).expect("values are text");
    let (owner, version) = text.split_once(" version ").expect("a value names its key");
    assert_eq!(
        owner.as_bytes(),
        key(thread, slot),
        "a value of another key"
    );
    version.trim_end().parse().expect("a version")
}

/// The last of rounds `1..=rounds` that stored `slot` (round `r` stores slot `r % KEYS_PER_THREAD`).
fn last_round(rounds: u32, slot: usize) -> u32 {
    (1..=rounds)
        .rev()
        .find(|round| *round as usize % KEYS_PER_THREAD == slot)
        .expect("every slot is stored")
}

/// The version `thread`'s key `slot` holds on the device, if any.
fn stored_version(
    device: &Device,
    namespace: NamespaceId,
    thread: usize,
    slot: usize,
) -> Option<u32> {
    device
        .retrieve(0, namespace, &key(thread, slot), None)
        .expect("retrieve")
        .0
        .map(|found| version_of(thread, slot, &found.value))
}

#[test]
fn device_file_threads_read_their_writes_while_gc_reuses_blocks() {
    for preset in [Preset::Pink, Preset::Lightstore] {
        let name = format!("threads-{}", preset.name());
        let (path, config, device, namespace) = on_a_file(&name, preset, SyncPolicy::None, |_| {});
        let latest: Arc<Vec<AtomicU32>> = Arc::new(
            (0..THREADS * KEYS_PER_THREAD)
                .map(|_| AtomicU32::new(0))
                .collect(),
        );
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let device = Arc::clone(&device);
                let latest = Arc::clone(&latest);
                std::thread::spawn(move || {
                    for round in 1..=ROUNDS {
                        let slot = (round as usize * 5 + thread) % KEYS_PER_THREAD;
                        store(&device, namespace, thread, slot, round);
                        latest[thread * KEYS_PER_THREAD + slot].store(round, Ordering::SeqCst);
                        // How often L0 fills depends on how the threads interleave; flushing
                        // as well makes sure data pages are written, so GC has blocks to erase.
                        if round % 10 == 0 {
                            device.flush_all(0).expect("flush");
                        }
                        // A scan over every thread's keys: in order, each value its key's.
                        if round % 5 == 0 {
                            let (pairs, _) = device
                                .scan(0, namespace, b"t", 2 * KEYS_PER_THREAD)
                                .expect("scan");
                            assert!(pairs.windows(2).all(|pair| pair[0].0 < pair[1].0));
                            for (found, value) in &pairs {
                                let text = std::str::from_utf8(found).expect("text");
                                let (owner, slot) = text.split_once("-key").expect("a key");
                                let owner: usize = owner[1..].parse().expect("thread");
                                let slot: usize = slot.parse().expect("slot");
                                version_of(owner, slot, value);
                            }
                        }
                        // Own keys: exactly the latest store.
                        let own = (round as usize * 7) % KEYS_PER_THREAD;
                        let expected =
                            latest[thread * KEYS_PER_THREAD + own].load(Ordering::SeqCst);
                        let found = device
                            .retrieve(0, namespace, &key(thread, own), None)
                            .expect("retrieve")
                            .0;
                        match found {
                            Some(found) => assert_eq!(
                                version_of(thread, own, &found.value),
                                expected,
                                "{preset:?}: thread {thread} key {own}"
                            ),
                            None => assert_eq!(expected, 0, "{preset:?}: a stored key is gone"),
                        }
                        // Another thread's key: a version that thread stored, not newer than
                        // what it has stored by now.
                        let other = (thread + 1 + round as usize) % THREADS;
                        let slot = round as usize % KEYS_PER_THREAD;
                        let found = device
                            .retrieve(0, namespace, &key(other, slot), None)
                            .expect("retrieve")
                            .0;
                        let newest = latest[other * KEYS_PER_THREAD + slot].load(Ordering::SeqCst);
                        if let Some(found) = found {
                            let version = version_of(other, slot, &found.value);
                            assert!(version <= newest.max(ROUNDS), "{preset:?}");
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().expect("worker");
        }
        let stats = device.stats().expect("stats");
        assert!(
            stats.flash.of(Purpose::Gc).erases > 0,
            "{preset:?}: GC never erased a block, so reads never raced an erase"
        );
        // On a file, device-wide GC runs on the device's background thread (commands collect
        // only when their engine's own threshold is reached first).
        assert!(
            stats.device_gc_victims > 0,
            "{preset:?}: device-wide GC never collected a victim"
        );
        let device = Arc::into_inner(device).expect("the workers are done");
        device.close(0).expect("close");
        let device = Device::open_path(&path, None, config).expect("reopen");
        for thread in 0..THREADS {
            for slot in 0..KEYS_PER_THREAD {
                let expected = latest[thread * KEYS_PER_THREAD + slot].load(Ordering::SeqCst);
                let found = device
                    .retrieve(0, namespace, &key(thread, slot), None)
                    .expect("retrieve")
                    .0
                    .map(|found| version_of(thread, slot, &found.value));
                assert_eq!(found, (expected > 0).then_some(expected), "{preset:?}");
            }
        }
        drop(device);
        let _ = std::fs::remove_file(&path);
    }
}

/// A new `test_min` image named after `name`, under a log synced by `policy`, with one `pink`
/// namespace.
fn pink_on_a_file(
    name: &str,
    policy: SyncPolicy,
) -> (std::path::PathBuf, DeviceConfig, Arc<Device>, NamespaceId) {
    pink_on_a_file_with(name, policy, |_| {})
}

fn pink_on_a_file_with(
    name: &str,
    policy: SyncPolicy,
    adjust: impl FnOnce(&mut DeviceConfig),
) -> (std::path::PathBuf, DeviceConfig, Arc<Device>, NamespaceId) {
    on_a_file(name, Preset::Pink, policy, adjust)
}

/// A new `test_min` image named after `name`, under a log synced by `policy`, with one
/// namespace of `preset`.
fn on_a_file(
    name: &str,
    preset: Preset,
    policy: SyncPolicy,
    adjust: impl FnOnce(&mut DeviceConfig),
) -> (std::path::PathBuf, DeviceConfig, Arc<Device>, NamespaceId) {
    let path = std::env::temp_dir().join(format!(
        "kvssd-device-file-{name}-{}.img",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let mut config = DeviceConfig::test_min();
    config.durability = Durability::WriteAheadLog(policy);
    adjust(&mut config);
    let device =
        Device::create(&path, Profile::test_min().geometry, None, config.clone()).expect("create");
    let namespace = device
        .create_namespace(NamespaceSpec::new(preset))
        .expect("namespace");
    (path, config, Arc::new(device), namespace)
}

#[test]
fn device_file_every_command_returns_durable_with_the_sync_outside_the_lock() {
    let (path, _, device, namespace) = pink_on_a_file("every", SyncPolicy::EveryCommand);
    // One writer: every store is durable when it returns, and nothing else is logged.
    for round in 1..=50 {
        let syncs = device.durability_counts().expect("counts").media_syncs;
        store(&device, namespace, 0, 0, round);
        assert_eq!(
            device.durable_sequence().expect("durable"),
            device.logged_sequence().expect("logged"),
            "round {round}: a store returned before its record was durable"
        );
        assert!(device.durability_counts().expect("counts").media_syncs > syncs);
    }
    // Several writers: the first record logged after a writer looked at the log is at most its
    // own store's, so once the store returns the durable sequence must have reached it.
    let workers: Vec<_> = (1..4)
        .map(|thread| {
            let device = Arc::clone(&device);
            std::thread::spawn(move || {
                for round in 1..=100 {
                    let before = device.logged_sequence().expect("logged");
                    let slot = round as usize % KEYS_PER_THREAD;
                    store(&device, namespace, thread, slot, round);
                    let first_after = before.map_or(0, |lsn| lsn + 1);
                    let durable = device.durable_sequence().expect("durable");
                    assert!(
                        durable >= Some(first_after),
                        "thread {thread} round {round}: durable {durable:?}, logged before {before:?}"
                    );
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    drop(device);
    let _ = std::fs::remove_file(&path);
}

/// Checkpoints on the device's own thread: four writers fill the log many times over, the
/// checkpoints keep coming, the log never holds much more than twice its limit (what the next open
/// replays is bounded), and after a sync and a drop without a close every store is there again.
#[test]
fn device_file_checkpoint_thread_keeps_the_log_bounded() {
    let (path, config, device, namespace) = pink_on_a_file("checkpoints", SyncPolicy::None);
    let profile = Profile::test_min();
    let before = device.durability_counts().expect("counts");
    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let device = Arc::clone(&device);
            std::thread::spawn(move || {
                for round in 1..=ROUNDS {
                    store(
                        &device,
                        namespace,
                        thread,
                        round as usize % KEYS_PER_THREAD,
                        round,
                    );
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    let after = device.durability_counts().expect("counts");
    let log_pages = after.log_pages_written - before.log_pages_written;
    let checkpoints = after.checkpoints_written - before.checkpoints_written;
    assert!(
        checkpoints >= 3,
        "{checkpoints} checkpoints while {log_pages} log pages were written"
    );
    device.sync(0).expect("sync");
    drop(Arc::into_inner(device).expect("the workers are done"));

    let device = Device::open_path(&path, None, config.clone()).expect("reopen");
    let report = device
        .recovery_report()
        .expect("report")
        .expect("a recovered device");
    // The limit the live checkpoint set (`CHECKPOINT_LOG_RATIO` is 8), counting the pages of
    // an L0 it flushed first instead of carrying it (at most L0's size); commands in flight when
    // the log reached twice it may each add a page.
    let floor = config.checkpoint_log_blocks as u64 * u64::from(profile.geometry.pages_per_block);
    let l0_pages = config
        .engine
        .l0_bytes
        .div_ceil(u64::from(profile.geometry.page_bytes));
    let limit = floor.max(8 * (report.checkpoint_pages + l0_pages));
    assert!(
        report.log_pages_read <= 2 * limit + THREADS as u64 + 1,
        "the reopen read {} log pages; the checkpoint of {} pages set a limit of {limit}",
        report.log_pages_read,
        report.checkpoint_pages
    );
    for thread in 0..THREADS {
        for slot in 0..KEYS_PER_THREAD {
            assert_eq!(
                stored_version(&device, namespace, thread, slot),
                Some(last_round(ROUNDS, slot)),
                "thread {thread} slot {slot}"
            );
        }
    }
    drop(device);
    let _ = std::fs::remove_file(&path);
}

/// A crash between the steps of the checkpoint thread's checkpoint. After the first (its pages
/// written and the log restarted; no superblock copy naming them yet), the reopen recovers the
/// previous checkpoint and the log it trimmed: every store synced before is there, and none of
/// those after, which only the new log holds. A sync after the first step commits the checkpoint
/// first, so what it acknowledges survives. Once a copy names the checkpoint (its superseded
/// blocks erased or not yet), the stores after are there too, and the next open replays only the
/// new log.
#[test]
fn device_file_crash_between_a_checkpoints_halves_loses_no_synced_store() {
    const ROUNDS_AFTER: u32 = 60;
    let mut log_pages_read = Vec::new();
    for case in ["crash", "sync", "named", "commit"] {
        // A log long enough that the checkpoint thread writes no checkpoint of its own here.
        let (path, config, device, namespace) =
            pink_on_a_file_with(&format!("halves-{case}"), SyncPolicy::None, |config| {
                config.checkpoint_log_blocks = 64;
            });
        for round in 1..=100 {
            store(
                &device,
                namespace,
                0,
                round as usize % KEYS_PER_THREAD,
                round,
            );
        }
        device.sync(0).expect("sync");
        device.wait_for_background().expect("idle");
        let id = device
            .prepare_checkpoint_now()
            .expect("first half")
            .expect("file media sync without the lock");
        // Enough to fill several of the new log's blocks.
        for round in 1..=ROUNDS_AFTER {
            store(
                &device,
                namespace,
                1,
                round as usize % KEYS_PER_THREAD,
                round,
            );
        }
        match case {
            "sync" => {
                device.sync(0).expect("sync");
            }
            "named" => {
                device
                    .commit_prepared_checkpoint(id, false)
                    .expect("named, not released");
                device.sync(0).expect("sync");
            }
            "commit" => {
                device
                    .commit_prepared_checkpoint(id, true)
                    .expect("the other steps");
                device.sync(0).expect("sync");
            }
            _ => {}
        }
        device.wait_for_background().expect("idle");
        std::mem::forget(Arc::into_inner(device).expect("one owner"));

        let device = Device::open_path(&path, None, config).expect("reopen");
        let report = device
            .recovery_report()
            .expect("report")
            .expect("recovered");
        log_pages_read.push(report.log_pages_read);
        for (thread, rounds) in [(0, 100), (1, ROUNDS_AFTER)] {
            for slot in 0..KEYS_PER_THREAD {
                let expected = (thread == 0 || case != "crash").then(|| last_round(rounds, slot));
                assert_eq!(
                    stored_version(&device, namespace, thread, slot),
                    expected,
                    "{case}: thread {thread} slot {slot}"
                );
            }
        }
        drop(device);
        let _ = std::fs::remove_file(&path);
    }
    assert!(
        log_pages_read[2] < log_pages_read[0] && log_pages_read[3] < log_pages_read[0],
        "the named checkpoint trimmed the log: pages read {log_pages_read:?}"
    );
}

/// Two threads storing, overwriting and deleting while the device's background thread flushes
/// L0 each time it is half full, packing its values without the lock: pairs written between the
/// packing and the placing stay in L0. Every read sees its own thread's latest write, the
/// background thread placed flushes, and after a close and a reopen every last write is there.
#[test]
fn device_file_background_flushes_keep_writes_made_while_they_pack() {
    const WRITERS: usize = 2;
    const SLOTS: usize = 6;
    const WRITES: u32 = 3_000;
    for preset in [Preset::Pink, Preset::Lightstore] {
        let name = format!("background-{}", preset.name());
        let (path, config, device, namespace) = on_a_file(&name, preset, SyncPolicy::None, |_| {});
        let writers: Vec<_> = (0..WRITERS)
            .map(|thread| {
                let device = Arc::clone(&device);
                std::thread::spawn(move || {
                    let mut model: Vec<Option<u32>> = vec![None; SLOTS];
                    for round in 1..=WRITES {
                        let slot = (round as usize * 5) % SLOTS;
                        if round % 11 == 0 {
                            device
                                .delete(0, namespace, &key(thread, slot))
                                .expect("delete");
                            model[slot] = None;
                        } else {
                            store(&device, namespace, thread, slot, round);
                            model[slot] = Some(round);
                        }
                        let own = (round as usize * 7 + 1) % SLOTS;
                        assert_eq!(
                            stored_version(&device, namespace, thread, own),
                            model[own],
                            "{preset:?}: thread {thread} key {own} after write {round}"
                        );
                    }
                    model
                })
            })
            .collect();
        let models: Vec<Vec<Option<u32>>> = writers
            .into_iter()
            .map(|writer| writer.join().expect("writer"))
            .collect();
        device.wait_for_background().expect("background");
        let check = |device: &Device, when: &str| {
            for (thread, model) in models.iter().enumerate() {
                for (slot, expected) in model.iter().enumerate() {
                    assert_eq!(
                        stored_version(device, namespace, thread, slot),
                        *expected,
                        "{preset:?} {when}: thread {thread} key {slot}"
                    );
                }
            }
        };
        check(&device, "after the writes");
        let infos = device.list_namespaces().expect("list");
        let counter = |name: &str| {
            infos[0]
                .counters
                .iter()
                .find(|(counter, _)| *counter == name)
                .map_or(0, |(_, value)| *value)
        };
        assert!(
            counter("flushes_detached") > 0,
            "{preset:?}: the background thread placed no flush ({} in all)",
            counter("flushes")
        );
        let device = Arc::into_inner(device).expect("the writers are done");
        device.close(0).expect("close");
        let device = Device::open_path(&path, None, config).expect("reopen");
        check(&device, "after a reopen");
        drop(device);
        let _ = std::fs::remove_file(&path);
    }
}
