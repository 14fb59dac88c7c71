//! `Device::sync` on a file, which runs `fdatasync` without the device's lock: with writers and
//! syncers on several threads, every sync makes durable at least every record logged before it
//! began, the durable sequence never moves backwards, and what was synced is there after reopen.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use kvssd_device::{
    Device, DeviceConfig, Durability, NamespaceId, NamespaceSpec, StoreMode, SyncPolicy,
};
use kvssd_engine::Preset;
use kvssd_flash::Profile;

fn image(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "kvssd-device-file-sync-{}-{name}.img",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

/// A fresh `test_min` image named `name` under a log that syncs only on `Device::sync`, with one
/// `pink` namespace.
fn unsynced_device(name: &str) -> (PathBuf, DeviceConfig, Device, NamespaceId) {
    let path = image(name);
    let mut config = DeviceConfig::test_min();
    config.durability = Durability::WriteAheadLog(SyncPolicy::None);
    let device =
        Device::create(&path, Profile::test_min().geometry, None, config.clone()).expect("create");
    let namespace = device
        .create_namespace(NamespaceSpec::new(Preset::Pink))
        .expect("namespace");
    (path, config, device, namespace)
}

#[test]
fn device_file_sync_outside_the_lock_publishes_what_was_logged_before_it() {
    let (path, config, device, namespace) = unsynced_device("threads");
    let writers_done = AtomicBool::new(false);
    let syncs = std::thread::scope(|scope| {
        let mut writers = Vec::new();
        for writer in 0..2u32 {
            let device = &device;
            writers.push(scope.spawn(move || {
                for step in 0..150u32 {
                    let key = format!("w{writer}-{:02}", step % 40).into_bytes();
                    let value = format!("value {step} from {writer}").into_bytes();
                    device
                        .store(0, namespace, &key, &value, StoreMode::Upsert)
                        .expect("store");
                }
            }));
        }
        let syncer = scope.spawn(|| {
            let mut syncs = 0u32;
            let mut durable_before = None;
            while !writers_done.load(Ordering::Acquire) || syncs == 0 {
                let logged = device.logged_sequence().expect("logged");
                device.sync(0).expect("sync");
                let durable = device.durable_sequence().expect("durable");
                assert!(
                    durable >= logged,
                    "sync returned before {logged:?} was durable"
                );
                assert!(durable >= durable_before, "the durable sequence went back");
                durable_before = durable;
                syncs += 1;
            }
            syncs
        });
        for writer in writers {
            writer.join().expect("writer");
        }
        writers_done.store(true, Ordering::Release);
        syncer.join().expect("syncer")
    });
    assert!(syncs > 0);
    device.sync(0).expect("final sync");
    let counts = device.durability_counts().expect("counts");
    // A sync that finds nothing written since the last one costs no `fdatasync`.
    assert!(counts.media_syncs > 0, "{counts:?}");
    assert_eq!(
        device.durable_sequence().expect("durable"),
        device.logged_sequence().expect("logged")
    );
    let mut expected = Vec::new();
    for writer in 0..2u32 {
        for slot in 0..40u32 {
            let last = (0..150u32)
                .filter(|step| step % 40 == slot)
                .max()
                .expect("a step");
            expected.push((
                format!("w{writer}-{slot:02}").into_bytes(),
                format!("value {last} from {writer}").into_bytes(),
            ));
        }
    }
    // Abandoned without a close: only what the syncs made durable is there to find.
    device.wait_for_background().expect("checkpoints");
    std::mem::forget(device);
    let device = Device::open_path(&path, None, config).expect("reopen");
    for (key, value) in &expected {
        let (found, _) = device.retrieve(0, namespace, key, None).expect("retrieve");
        assert_eq!(found.map(|retrieved| retrieved.value).as_ref(), Some(value));
    }
    drop(device);
    let _ = std::fs::remove_file(&path);
}

/// Group commit: writers that each store and then sync, all at once. A writer whose sync waited
/// for another's and returned without one of its own still finds its record durable.
#[test]
fn device_file_group_commit_makes_each_writers_record_durable_before_sync_returns() {
    let (path, config, device, namespace) = unsynced_device("group");
    std::thread::scope(|scope| {
        for writer in 0..4u32 {
            let device = &device;
            scope.spawn(move || {
                for step in 0..100u32 {
                    let key = format!("g{writer}-{:02}", step % 30).into_bytes();
                    let value = format!("value {step} from {writer}").into_bytes();
                    device
                        .store(0, namespace, &key, &value, StoreMode::Upsert)
                        .expect("store");
                    let mine = device.logged_sequence().expect("logged");
                    device.sync(0).expect("sync");
                    let durable = device.durable_sequence().expect("durable");
                    assert!(durable >= mine, "sync returned before {mine:?} was durable");
                }
            });
        }
    });
    let counts = device.durability_counts().expect("counts");
    assert!(counts.media_syncs > 0, "{counts:?}");
    // Abandoned without a close: every writer's last value was synced.
    device.wait_for_background().expect("checkpoints");
    std::mem::forget(device);
    let device = Device::open_path(&path, None, config).expect("reopen");
    for writer in 0..4u32 {
        for slot in 0..30u32 {
            let last = (0..100u32)
                .filter(|step| step % 30 == slot)
                .max()
                .expect("a step");
            let key = format!("g{writer}-{slot:02}").into_bytes();
            let (found, _) = device.retrieve(0, namespace, &key, None).expect("retrieve");
            assert_eq!(
                found.map(|retrieved| retrieved.value),
                Some(format!("value {last} from {writer}").into_bytes())
            );
        }
    }
    drop(device);
    let _ = std::fs::remove_file(&path);
}
