//! A device on a real file: written with sync per command, closed or abandoned, reopened, and
//! checked; then damaged (superblock copies, a log-framed page of the checkpoint or log, a foreign
//! file, an unsupported image version): open must give a typed error or recover a state that is a
//! prefix of the commands, never wrong data.

use std::path::PathBuf;

use kvssd_device::{
    Device, DeviceConfig, DeviceError, Durability, NamespaceSpec, StoreMode, SyncPolicy,
};
use kvssd_engine::hash::HashPreset;
use kvssd_engine::Preset;
use kvssd_flash::Profile;

fn image(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "kvssd-device-file-{}-{name}.img",
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

/// Values after each prefix of the writes: (namespace slot, key) -> value.
type History = Vec<Vec<Option<Vec<u8>>>>;

/// Writes 120 commands into a pink and a kaml namespace; returns the states after each prefix.
fn write(device: &Device) -> History {
    let pink = device
        .create_namespace(NamespaceSpec::new(Preset::Pink))
        .expect("create pink");
    let kaml = device
        .create_namespace(NamespaceSpec::new(HashPreset::Kaml))
        .expect("create kaml");
    let mut current: Vec<Option<Vec<u8>>> = vec![None; 40];
    let mut history = vec![current.clone()];
    let mut t = 0;
    for step in 0..120u32 {
        let slot = (step * 7 % 40) as usize;
        let namespace = if slot < 20 { pink } else { kaml };
        let key = format!("key{slot:02}").into_bytes();
        if step % 9 == 8 {
            t = device.delete(t, namespace, &key).expect("delete");
            current[slot] = None;
        } else {
            let value = format!("value {step} of {slot}").into_bytes();
            t = device
                .store(t, namespace, &key, &value, StoreMode::Upsert)
                .expect("store");
            current[slot] = Some(value);
        }
        history.push(current.clone());
    }
    history
}

fn read(device: &Device) -> Result<Vec<Option<Vec<u8>>>, DeviceError> {
    let infos = device.list_namespaces()?;
    let ids: Vec<_> = infos.iter().map(|info| info.id).collect();
    let mut out = Vec::new();
    for slot in 0..40 {
        let namespace = if slot < 20 { ids[0] } else { ids[1] };
        let key = format!("key{slot:02}").into_bytes();
        out.push(
            device
                .retrieve(0, namespace, &key, None)?
                .0
                .map(|found| found.value),
        );
    }
    Ok(out)
}

#[test]
fn device_file_keeps_every_acknowledged_write_across_close_and_abandon() {
    for close in [true, false] {
        let path = image(if close { "close" } else { "abandon" });
        let profile = Profile::test_min();
        let device = Device::create(&path, profile.geometry, None, config()).expect("create");
        let history = write(&device);
        if close {
            device.close(0).expect("close");
        } else {
            drop(device);
        }
        let device = Device::open_path(&path, None, config()).expect("reopen");
        let found = read(&device).expect("read");
        assert_eq!(&found, history.last().expect("history"), "close {close}");
        drop(device);
        let _ = std::fs::remove_file(&path);
    }
}

fn damage(path: &PathBuf, offset: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open image");
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, offset).expect("read");
    byte[0] ^= 0x5a;
    file.write_all_at(&byte, offset).expect("write");
}

fn header_u64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

#[test]
fn device_file_damage_gives_a_typed_error_or_a_prefix_never_wrong_data() {
    let profile = Profile::test_min();
    let geometry = profile.geometry;
    let page_bytes = u64::from(geometry.page_bytes);
    let pages_per_block = u64::from(geometry.pages_per_block);
    let path = image("pristine");
    let device = Device::create(&path, geometry, None, config()).expect("create");
    let history = write(&device);
    drop(device);
    let pristine = std::fs::read(&path).expect("read image");
    // Image format 2: page n's slot (payload, then OOB area) at slot offset + n x slot bytes.
    let data_offset = header_u64(&pristine, 44);
    let slot_bytes = header_u64(&pristine, 52);
    assert!(
        slot_bytes > page_bytes,
        "a slot holds the payload and the OOB area"
    );
    let mut cases: Vec<(String, Vec<u64>)> = Vec::new();
    // Every superblock page (blocks 0 and 1) at once.
    cases.push((
        "superblock".into(),
        (0..2 * pages_per_block)
            .map(|page| data_offset + page * slot_bytes + 20)
            .collect(),
    ));
    // Each programmed log-framed page (checkpoint or log), one at a time.
    let pages_total = geometry.pages_total();
    for page in 2 * pages_per_block..pages_total {
        let at = (data_offset + page * slot_bytes) as usize;
        if pristine.get(at..at + 4) == Some(&b"KLOG"[..]) {
            cases.push((format!("log-framed page {page}"), vec![at as u64 + 40]));
        }
    }
    assert!(cases.len() > 2, "the image holds no checkpoint or log page");
    let mut errors = 0;
    let mut prefixes = 0;
    for (what, offsets) in &cases {
        let damaged = image("damaged");
        std::fs::write(&damaged, &pristine).expect("copy image");
        for &offset in offsets {
            damage(&damaged, offset);
        }
        match Device::open_path(&damaged, None, config()) {
            Err(error) => {
                let message = error.to_string();
                assert!(
                    !message.is_empty() && !message.contains('\n'),
                    "{what}: {message}"
                );
                errors += 1;
            }
            Ok(device) => match read(&device) {
                Ok(found) => {
                    assert!(
                        history.contains(&found),
                        "{what}: recovered a state that no prefix of the writes had"
                    );
                    prefixes += 1;
                }
                Err(error) => {
                    assert!(!error.to_string().contains('\n'));
                    errors += 1;
                }
            },
        }
        let _ = std::fs::remove_file(&damaged);
    }
    println!(
        "{} damaged images: {errors} typed errors, {prefixes} recovered prefixes",
        cases.len()
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn device_file_refuses_foreign_files_and_unsupported_versions() {
    let profile = Profile::test_min();
    let path = image("version");
    let device = Device::create(&path, profile.geometry, None, config()).expect("create");
    drop(device);
    let mut bytes = std::fs::read(&path).expect("read image");
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..68]);
    bytes[68..72].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).expect("write image");
    match Device::open_path(&path, None, config()) {
        Err(error) => assert!(error.to_string().contains("version"), "{error}"),
        Ok(_) => panic!("an image of version 99 was opened"),
    }
    std::fs::write(&path, vec![0x42u8; bytes.len()]).expect("write foreign");
    match Device::open_path(&path, None, config()) {
        Err(error) => assert!(!error.to_string().contains('\n'), "{error}"),
        Ok(_) => panic!("a foreign file was opened"),
    }
    let mut plp = config();
    plp.durability = Durability::PowerLossProtection;
    assert!(matches!(
        Device::create(&path, profile.geometry, None, plp),
        Err(DeviceError::ModeMismatch(_))
    ));
    let _ = std::fs::remove_file(&path);
}

/// `block` on a file image under the write-ahead log: whole-block writes, writes of part of a
/// block (read-modify-writes) and trims, closed or abandoned, reopen to the last acknowledged
/// logical blocks.
#[test]
fn device_file_keeps_block_writes_across_close_and_abandon() {
    use kvssd_engine::block::{lba_key, lba_offset_key};
    for close in [true, false] {
        let path = image(if close {
            "block-close"
        } else {
            "block-abandon"
        });
        let profile = Profile::test_min();
        let config = config();
        let block = config.block.logical_block_bytes as usize;
        let device = Device::create(&path, profile.geometry, None, config.clone()).expect("create");
        let preset: kvssd_device::PresetKind = "block".parse().expect("block preset");
        let namespace = device
            .create_namespace(NamespaceSpec::new(preset))
            .expect("create block");
        let mut model: Vec<Option<Vec<u8>>> = vec![None; 30];
        let mut t = 0;
        for step in 0..200u32 {
            let lba = u64::from(step * 7 % 30);
            let current = &mut model[lba as usize];
            if step % 11 == 10 {
                t = device.delete(t, namespace, &lba_key(lba)).expect("trim");
                *current = None;
            } else if step % 3 == 0 {
                let value = vec![(step % 251) as u8; block];
                t = device
                    .store(t, namespace, &lba_key(lba), &value, StoreMode::Upsert)
                    .expect("write");
                *current = Some(value);
            } else {
                let offset = (step as usize * 13) % (block - 8);
                let value = step.to_le_bytes().repeat(2);
                t = device
                    .store(
                        t,
                        namespace,
                        &lba_offset_key(lba, offset as u32),
                        &value,
                        StoreMode::Upsert,
                    )
                    .expect("partial write");
                let data = current.get_or_insert_with(|| vec![0; block]);
                data[offset..offset + value.len()].copy_from_slice(&value);
            }
        }
        if close {
            device.close(t).expect("close");
        } else {
            drop(device);
        }
        let device = Device::open_path(&path, None, config.clone()).expect("reopen");
        for (lba, expected) in model.iter().enumerate() {
            let found = device
                .retrieve(0, namespace, &lba_key(lba as u64), None)
                .expect("read")
                .0
                .map(|found| found.value);
            assert_eq!(&found, expected, "close {close}, logical block {lba}");
        }
        drop(device);
        let _ = std::fs::remove_file(&path);
    }
}

/// A sync only where the policy asks for one: `SyncPolicy::None` writes the log pages that fill
/// without syncing them (a sync comes only with a checkpoint, a new log block, which recovery
/// must find, or `Device::sync`), where a group that never fills syncs every page that does. Either way,
/// what a sync made durable is there after reopening.
#[test]
fn device_file_syncs_only_where_the_policy_asks() {
    let profile = Profile::test_min();
    let mut syncs_by_policy = Vec::new();
    for (name, policy) in [
        ("none", SyncPolicy::None),
        (
            "group",
            SyncPolicy::GroupCommit {
                max_records: u32::MAX,
            },
        ),
    ] {
        let path = image(&format!("sync-{name}"));
        let mut config = config();
        config.durability = Durability::WriteAheadLog(policy);
        let device = Device::create(&path, profile.geometry, None, config.clone()).expect("create");
        let before = device.durability_counts().expect("counts");
        let history = write(&device);
        let after = device.durability_counts().expect("counts");
        let pages = after.log_pages_written - before.log_pages_written;
        let syncs = after.media_syncs - before.media_syncs;
        // Creating the namespaces checkpoints: a checkpoint syncs its superblock copy. Under
        // `None` the copy that names a new log block is written, not synced.
        let checkpoints = after.checkpoints_written - before.checkpoints_written;
        assert!(pages >= 4, "{name}: the writes filled {pages} log pages");
        match policy {
            SyncPolicy::None => {
                assert!(
                    syncs <= 2 * checkpoints + 1,
                    "none: {syncs} syncs for {pages} log pages, {before:?} -> {after:?}"
                );
                assert!(
                    device.durable_sequence().expect("durable")
                        < device.logged_sequence().expect("logged"),
                    "none: records durable without a sync"
                );
            }
            _ => assert!(
                syncs >= pages - 1,
                "group: {syncs} syncs for {pages} log pages"
            ),
        }
        syncs_by_policy.push(syncs);
        device.sync(0).expect("sync");
        assert_eq!(
            device.durable_sequence().expect("durable"),
            device.logged_sequence().expect("logged"),
            "{name}"
        );
        drop(device);
        let device = Device::open_path(&path, None, config).expect("reopen");
        let found = read(&device).expect("read");
        assert_eq!(&found, history.last().expect("history"), "{name}");
        drop(device);
        let _ = std::fs::remove_file(&path);
    }
    assert!(
        syncs_by_policy[0] < syncs_by_policy[1],
        "{syncs_by_policy:?}"
    );
}

/// A checkpoint flushes an L0 that holds at least a quarter of its size instead of carrying it,
/// carries a smaller one, and either way the image reopens with every store. Each store waits
/// for the device's background thread, which flushes L0 once it is half full.
#[test]
fn device_file_checkpoint_flushes_a_filled_l0_first_and_loses_nothing() {
    let path = image("checkpoint-flush");
    let mut config = config();
    // No checkpoint but the ones this test writes.
    config.checkpoint_log_blocks = 6;
    let profile = Profile::test_min();
    let device = Device::create(&path, profile.geometry, None, config.clone()).expect("create");
    let pink = device
        .create_namespace(NamespaceSpec::new(Preset::Pink))
        .expect("create pink");
    let info = |device: &Device| {
        let infos = device.list_namespaces().expect("list");
        (infos[0].flushes, infos[0].l0_entries)
    };
    let mut stored = 0u32;
    let mut t = 0;
    let store = |device: &Device, t: &mut u64, stored: &mut u32| {
        let key = format!("key{stored:04}").into_bytes();
        let value = format!("value of {stored:04}").into_bytes();
        *t = device
            .store(*t, pink, &key, &value, StoreMode::Upsert)
            .expect("store");
        device.wait_for_background().expect("background");
        *stored += 1;
    };
    while info(&device).0 == 0 {
        store(&device, &mut t, &mut stored);
    }
    // The background thread flushed L0 half full.
    let half = stored as u64;
    assert!(
        half >= 8,
        "half an L0 of {half} pairs is too small for this test"
    );
    for _ in 0..half / 2 + 1 {
        store(&device, &mut t, &mut stored);
    }
    let (flushes, quarter) = info(&device);
    assert_eq!(flushes, 1);
    assert!(
        quarter > half / 2,
        "L0 holds {quarter} of about {} pairs",
        2 * half
    );

    t = device.checkpoint(t).expect("checkpoint");
    assert_eq!(info(&device), (2, 0), "flushed before the checkpoint");
    for _ in 0..2 {
        store(&device, &mut t, &mut stored);
    }
    device.checkpoint(t).expect("checkpoint");
    assert_eq!(info(&device), (2, 2), "an L0 under its share is carried");

    drop(device);
    let device = Device::open_path(&path, None, config).expect("reopen");
    for n in 0..stored {
        let key = format!("key{n:04}").into_bytes();
        let found = device.retrieve(0, pink, &key, None).expect("retrieve").0;
        assert_eq!(
            found.map(|found| found.value),
            Some(format!("value of {n:04}").into_bytes()),
            "key {n} of {stored}"
        );
    }
    drop(device);
    let _ = std::fs::remove_file(&path);
}
