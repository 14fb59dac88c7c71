//! Namespace names: checked at the boundary (empty, too long, NUL byte, taken), found by
//! `namespace_by_name`, freed by deleting the namespace, and kept durably on a file device both
//! through write-ahead-log replay (the device abandoned without a close) and through a checkpoint
//! (a clean close).

use std::path::PathBuf;

use kvssd_device::{
    Device, DeviceConfig, DeviceError, Durability, NamespaceSpec, StoreMode, SyncPolicy,
    NAMESPACE_NAME_BYTES_MAX,
};
use kvssd_engine::hash::HashPreset;
use kvssd_engine::Preset;
use kvssd_flash::Profile;

fn image(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "kvssd-device-names-{}-{name}.img",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

fn config() -> DeviceConfig {
    let mut config = DeviceConfig::test_min();
    config.durability = Durability::WriteAheadLog(SyncPolicy::EveryCommand);
    config
}

fn names(device: &Device) -> Vec<(u32, Option<String>)> {
    device
        .list_namespaces()
        .expect("list")
        .into_iter()
        .map(|info| (info.id.0, info.spec.name))
        .collect()
}

#[test]
fn names_are_checked_unique_and_found() {
    let profile = Profile::test_min();
    let flash = kvssd_flash::Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let device = Device::open(flash, DeviceConfig::test_min()).expect("open");
    let too_long = "n".repeat(NAMESPACE_NAME_BYTES_MAX + 1);
    for bad in ["", "a\0b", too_long.as_str()] {
        let refused = device.create_namespace(NamespaceSpec::new(Preset::Pink).with_name(bad));
        assert!(
            matches!(refused, Err(DeviceError::NamespaceNameInvalid(_))),
            "name {bad:?}: {refused:?}"
        );
    }
    assert!(
        names(&device).is_empty(),
        "a refused create changed nothing"
    );
    let longest = "n".repeat(NAMESPACE_NAME_BYTES_MAX);
    let users = device
        .create_namespace(NamespaceSpec::new(Preset::Pink).with_name("users"))
        .expect("users");
    let long = device
        .create_namespace(NamespaceSpec::new(HashPreset::Kaml).with_name(longest.clone()))
        .expect("longest name");
    let unnamed = device
        .create_namespace(NamespaceSpec::new(Preset::Pink))
        .expect("unnamed");
    let taken = device.create_namespace(NamespaceSpec::new(Preset::Lightstore).with_name("users"));
    let message = match taken {
        Err(error @ DeviceError::NamespaceNameTaken(_)) => error.to_string(),
        other => panic!("a taken name was not refused: {other:?}"),
    };
    assert_eq!(message, "a namespace named 'users' exists already");
    assert_eq!(
        device.namespace_by_name("users").expect("find"),
        Some(users)
    );
    assert_eq!(
        device.namespace_by_name(&longest).expect("find"),
        Some(long)
    );
    assert_eq!(device.namespace_by_name("nobody").expect("find"), None);
    assert_ne!(unnamed, users);
    // Deleting a namespace frees its name; the new namespace gets a new id.
    device.delete_namespace(0, users).expect("delete");
    assert_eq!(device.namespace_by_name("users").expect("find"), None);
    let again = device
        .create_namespace(NamespaceSpec::new(Preset::Pink).with_name("users"))
        .expect("the name is free again");
    assert!(again.0 > unnamed.0);
}

#[test]
fn names_survive_log_replay_and_checkpoints_on_a_file() {
    let path = image("durable");
    let geometry = Profile::test_min().geometry;
    let device = Device::create(&path, geometry, None, config()).expect("create");
    let alpha = device
        .create_namespace(NamespaceSpec::new(Preset::Pink).with_name("alpha"))
        .expect("alpha");
    let plain = device
        .create_namespace(NamespaceSpec::new(Preset::Pink))
        .expect("plain");
    device
        .store(0, alpha, b"key", b"value", StoreMode::Upsert)
        .expect("store");
    let expected = vec![(alpha.0, Some("alpha".to_string())), (plain.0, None)];
    // Abandoned without a close: the names come back from the log records.
    drop(device);
    let device = Device::open_path(&path, None, config()).expect("reopen after abandon");
    let report = device
        .recovery_report()
        .expect("report")
        .expect("recovered");
    assert!(
        report.records_replayed > 0,
        "the log was replayed: {report:?}"
    );
    assert_eq!(names(&device), expected);
    // A name created after recovery, then a clean close: the names come back from the checkpoint.
    let beta = device
        .create_namespace(NamespaceSpec::new(HashPreset::Hash).with_name("beta"))
        .expect("beta");
    device.close(0).expect("close");
    let device = Device::open_path(&path, None, config()).expect("reopen after close");
    let mut expected = expected;
    expected.push((beta.0, Some("beta".to_string())));
    assert_eq!(names(&device), expected);
    assert_eq!(
        device.namespace_by_name("alpha").expect("find"),
        Some(alpha)
    );
    let (found, _) = device.retrieve(0, alpha, b"key", None).expect("retrieve");
    assert_eq!(found.expect("present").value, b"value");
    drop(device);
    let _ = std::fs::remove_file(&path);
}
