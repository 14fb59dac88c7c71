//! Every class of invalid command is refused with its typed error and changes nothing.
//!
//! Each test builds a device with two namespaces holding a few keys, takes a fingerprint (every
//! key's value in every namespace, each namespace's L0 entries, valid bytes and blocks, and the
//! flash's program and erase counts), issues the invalid command, checks the error, and checks the
//! fingerprint again.

use kvssd_device::{
    BatchOp, ByteRange, Device, DeviceConfig, DeviceError, IterOptions, IterStart, NamespaceId,
    NamespaceSpec, StoreMode, ITERATORS_OPEN_MAX, KEY_BYTES_MAX, SCAN_PAIRS_MAX,
};
use kvssd_engine::Preset;
use kvssd_flash::{Flash, MediaKind, Profile};

const KEYS: [&[u8]; 4] = [b"apple", b"banana", b"cherry", b"date"];

struct Fixture {
    device: Device,
    pink: NamespaceId,
    light: NamespaceId,
    now: u64,
}

type Fingerprint = (Vec<Option<Vec<u8>>>, Vec<(u64, u64, u64)>, u64, u64);

impl Fixture {
    fn new() -> Fixture {
        Fixture::on(&MediaKind::Ram)
    }

    fn on(media: &MediaKind) -> Fixture {
        let profile = Profile::test_min();
        let flash = Flash::new_on(media, profile.geometry, Some(profile.timing)).expect("flash");
        let device = Device::open(flash, DeviceConfig::test_min()).expect("device");
        let pink = device
            .create_namespace(NamespaceSpec::new(Preset::Pink))
            .expect("pink");
        let light = device
            .create_namespace(NamespaceSpec::new(Preset::Lightstore))
            .expect("lightstore");
        let mut now = 0;
        for (index, key) in KEYS.iter().enumerate() {
            now = device
                .store(now, pink, key, &[index as u8; 40], StoreMode::Upsert)
                .expect("store");
            now = device
                .store(now, light, key, &vec![9; index * 10], StoreMode::Upsert)
                .expect("store");
        }
        // Some of it on flash, some in L0.
        now = device.flush_all(now).expect("flush");
        now = device
            .store(now, pink, b"elder", b"in L0", StoreMode::Upsert)
            .expect("store");
        Fixture {
            device,
            pink,
            light,
            now,
        }
    }

    fn fingerprint(&mut self) -> Fingerprint {
        let mut values = Vec::new();
        for namespace in [self.pink, self.light] {
            for key in KEYS.iter().chain([&&b"elder"[..], &&b"fig"[..]]) {
                let (found, done) = self
                    .device
                    .retrieve(self.now, namespace, key, None)
                    .expect("retrieve");
                self.now = done;
                values.push(found.map(|found| found.value));
            }
        }
        let namespaces = self
            .device
            .list_namespaces()
            .expect("list")
            .iter()
            .map(|info| (info.l0_entries, info.valid_bytes, info.blocks))
            .collect();
        let flash = self.device.stats().expect("stats").flash.total();
        (values, namespaces, flash.programs, flash.erases)
    }

    /// Runs `command`, which must fail as `expected` says, and checks nothing changed.
    fn refused(
        &mut self,
        command: impl FnOnce(&Device, u64) -> Result<(), DeviceError>,
        expected: impl FnOnce(&DeviceError) -> bool,
    ) {
        let before = self.fingerprint();
        let error = command(&self.device, self.now).expect_err("the command must be refused");
        assert!(expected(&error), "unexpected error: {error}");
        assert!(!error.to_string().contains('\n'), "one-line message");
        assert_eq!(
            self.fingerprint(),
            before,
            "a refused command changed state"
        );
    }
}

#[test]
fn device_errors_empty_and_long_keys() {
    let mut fixture = Fixture::new();
    let pink = fixture.pink;
    fixture.refused(
        |device, at| {
            device
                .store(at, pink, b"", b"v", StoreMode::Upsert)
                .map(drop)
        },
        |error| matches!(error, DeviceError::KeyEmpty),
    );
    let long = vec![b'k'; KEY_BYTES_MAX + 1];
    fixture.refused(
        |device, at| {
            device
                .store(at, pink, &long, b"v", StoreMode::Upsert)
                .map(drop)
        },
        |error| matches!(error, DeviceError::KeyTooLong { len: 256 }),
    );
    fixture.refused(
        |device, at| device.delete(at, pink, &long).map(drop),
        |error| matches!(error, DeviceError::KeyTooLong { .. }),
    );
    fixture.refused(
        |device, at| device.retrieve(at, pink, b"", None).map(drop),
        |error| matches!(error, DeviceError::KeyEmpty),
    );
    fixture.refused(
        |device, at| device.exist(at, pink, &[b"apple", b""]).map(drop),
        |error| matches!(error, DeviceError::KeyEmpty),
    );
    fixture.refused(
        |device, at| device.scan(at, pink, &long, 4).map(drop),
        |error| matches!(error, DeviceError::KeyTooLong { .. }),
    );
    fixture.refused(
        |device, at| device.scan(at, pink, b"apple", SCAN_PAIRS_MAX + 1).map(drop),
        |error| matches!(error, DeviceError::ScanTooLong { count, .. } if *count == SCAN_PAIRS_MAX + 1),
    );
    fixture.refused(
        |device, at| {
            device
                .iter_open(
                    at,
                    pink,
                    IterOptions::new(IterStart::Prefix(long.clone()), 0),
                )
                .map(drop)
        },
        |error| matches!(error, DeviceError::KeyTooLong { .. }),
    );
    // The longest key is accepted.
    let longest = vec![b'k'; KEY_BYTES_MAX];
    fixture
        .device
        .store(fixture.now, pink, &longest, b"v", StoreMode::Upsert)
        .expect("a 255-byte key is valid");
}

#[test]
fn device_errors_value_over_the_limit() {
    let mut fixture = Fixture::new();
    let pink = fixture.pink;
    let max = fixture.device.value_bytes_max().expect("max");
    let value = vec![0u8; max + 1];
    fixture.refused(
        |device, at| device.store(at, pink, b"apple", &value, StoreMode::Upsert).map(drop),
        |error| matches!(error, DeviceError::ValueTooLarge { len, max: limit } if *len == max + 1 && *limit == max),
    );
}

#[test]
fn device_errors_value_not_periodic_on_compact_media() {
    let mut fixture = Fixture::on(&MediaKind::Compact);
    let pink = fixture.pink;
    let description: Vec<u8> = (0..16).collect();
    let mut value: Vec<u8> = description.iter().cycle().take(1000).copied().collect();
    let now = fixture
        .device
        .store(fixture.now, pink, b"fig", &value, StoreMode::Upsert)
        .expect("a description repeated to its length is taken");
    fixture.now = now;
    value[999] ^= 1;
    fixture.refused(
        |device, at| {
            device
                .store(at, pink, b"apple", &value, StoreMode::Upsert)
                .map(drop)
        },
        |error| {
            matches!(error, DeviceError::ValueNotPeriodic { len } if *len == 1000)
                && error.to_string().contains("compact media")
        },
    );
    // Ram media take any value.
    let ram = Fixture::new();
    ram.device
        .store(ram.now, ram.pink, b"apple", &value, StoreMode::Upsert)
        .expect("ram media take any value");
}

#[test]
fn device_errors_unknown_namespace() {
    let mut fixture = Fixture::new();
    let unknown = NamespaceId(999);
    fixture.refused(
        |device, at| {
            device
                .store(at, unknown, b"apple", b"v", StoreMode::Upsert)
                .map(drop)
        },
        |error| matches!(error, DeviceError::NamespaceUnknown(NamespaceId(999))),
    );
    fixture.refused(
        |device, at| device.retrieve(at, unknown, b"apple", None).map(drop),
        |error| matches!(error, DeviceError::NamespaceUnknown(_)),
    );
    fixture.refused(
        |device, at| device.delete_namespace(at, unknown).map(drop),
        |error| matches!(error, DeviceError::NamespaceUnknown(_)),
    );
}

#[test]
fn device_errors_update_only_missing_and_insert_only_present() {
    let mut fixture = Fixture::new();
    let (pink, light) = (fixture.pink, fixture.light);
    fixture.refused(
        |device, at| {
            device
                .store(at, pink, b"fig", b"v", StoreMode::UpdateOnly)
                .map(drop)
        },
        |error| matches!(error, DeviceError::KeyMissing),
    );
    // Present on flash and present in L0.
    fixture.refused(
        |device, at| {
            device
                .store(at, light, b"banana", b"v", StoreMode::InsertOnly)
                .map(drop)
        },
        |error| matches!(error, DeviceError::KeyExists),
    );
    fixture.refused(
        |device, at| {
            device
                .store(at, pink, b"elder", b"v", StoreMode::InsertOnly)
                .map(drop)
        },
        |error| matches!(error, DeviceError::KeyExists),
    );
    // And the valid cases pass.
    let at = fixture.now;
    let at = fixture
        .device
        .store(at, pink, b"fig", b"v", StoreMode::InsertOnly)
        .expect("insert-only of an absent key");
    fixture
        .device
        .store(at, pink, b"fig", b"w", StoreMode::UpdateOnly)
        .expect("update-only of a present key");
}

#[test]
fn device_errors_too_many_iterators() {
    let mut fixture = Fixture::new();
    let pink = fixture.pink;
    let mut open = Vec::new();
    for _ in 0..ITERATORS_OPEN_MAX {
        let (id, done) = fixture
            .device
            .iter_open(
                fixture.now,
                pink,
                IterOptions::new(IterStart::Key(vec![]), 2),
            )
            .expect("open");
        fixture.now = done;
        open.push(id);
    }
    fixture.refused(
        |device, at| {
            device
                .iter_open(at, pink, IterOptions::new(IterStart::Key(vec![]), 2))
                .map(drop)
        },
        |error| matches!(error, DeviceError::IteratorsExhausted { max } if *max == ITERATORS_OPEN_MAX),
    );
    fixture.device.iter_close(open[0]).expect("close");
    fixture
        .device
        .iter_open(
            fixture.now,
            pink,
            IterOptions::new(IterStart::Key(vec![]), 2),
        )
        .expect("room again after a close");
}

#[test]
fn device_errors_batch_naming_a_deleted_namespace() {
    let mut fixture = Fixture::new();
    let (pink, light) = (fixture.pink, fixture.light);
    let doomed = fixture
        .device
        .create_namespace(NamespaceSpec::new(Preset::PinkRange))
        .expect("create");
    fixture.now = fixture
        .device
        .delete_namespace(fixture.now, doomed)
        .expect("delete namespace");
    let operations = vec![
        BatchOp::Store {
            namespace: pink,
            key: b"apple".to_vec(),
            value: b"changed".to_vec(),
            mode: StoreMode::Upsert,
        },
        BatchOp::Delete {
            namespace: light,
            key: b"banana".to_vec(),
        },
        BatchOp::Store {
            namespace: doomed,
            key: b"x".to_vec(),
            value: b"y".to_vec(),
            mode: StoreMode::Upsert,
        },
    ];
    fixture.refused(
        |device, at| device.batch(at, &operations).map(drop),
        |error| {
            matches!(error, DeviceError::BatchOperation { index: 2, source }
                if matches!(**source, DeviceError::NamespaceUnknown(id) if id == doomed))
        },
    );
    // A failing condition late in a batch also leaves the earlier operations unapplied.
    let conditional = vec![
        operations[0].clone(),
        operations[1].clone(),
        BatchOp::Store {
            namespace: pink,
            key: b"fig".to_vec(),
            value: b"v".to_vec(),
            mode: StoreMode::UpdateOnly,
        },
    ];
    fixture.refused(
        |device, at| device.batch(at, &conditional).map(drop),
        |error| matches!(error, DeviceError::BatchOperation { index: 2, .. }),
    );
    // Without the bad operation the batch applies in full.
    fixture.now = fixture
        .device
        .batch(fixture.now, &operations[..2])
        .expect("batch");
    let (apple, _) = fixture
        .device
        .retrieve(fixture.now, pink, b"apple", None)
        .expect("retrieve");
    assert_eq!(apple.map(|found| found.value), Some(b"changed".to_vec()));
    let (banana, _) = fixture
        .device
        .retrieve(fixture.now, light, b"banana", None)
        .expect("retrieve");
    assert_eq!(banana, None);
}

#[test]
fn device_errors_byte_range_past_the_value() {
    let mut fixture = Fixture::new();
    let pink = fixture.pink;
    // "apple" holds 40 bytes.
    for (offset, len) in [(0, 41), (40, 1), (41, 0), (usize::MAX, 2)] {
        fixture.refused(
            |device, at| {
                device
                    .retrieve(at, pink, b"apple", Some(ByteRange { offset, len }))
                    .map(drop)
            },
            |error| matches!(error, DeviceError::RangeOutsideValue { value_len: 40, .. }),
        );
    }
    let (found, _) = fixture
        .device
        .retrieve(
            fixture.now,
            pink,
            b"apple",
            Some(ByteRange {
                offset: 30,
                len: 10,
            }),
        )
        .expect("a range inside the value");
    let found = found.expect("present");
    assert_eq!((found.value.len(), found.value_len), (10, 40));
}

#[test]
fn device_errors_iterators_refused_past_their_namespace() {
    let fixture = Fixture::new();
    let pink = fixture.pink;
    let (iterator, done) = fixture
        .device
        .iter_open(
            fixture.now,
            pink,
            IterOptions::new(IterStart::Key(vec![]), 0),
        )
        .expect("open");
    // Right after opening, the snapshot shares everything with the live index.
    let fresh = fixture
        .device
        .iter_info(iterator)
        .expect("info")
        .snapshot_dram_bytes;
    let mut now = done;
    for index in 0..40u32 {
        now = fixture
            .device
            .store(
                now,
                pink,
                format!("new{index}").as_bytes(),
                &[1; 30],
                StoreMode::Upsert,
            )
            .expect("store");
    }
    // After writes (and a flush) the snapshot holds a frozen L0 and old level lists alone.
    let later = fixture
        .device
        .iter_info(iterator)
        .expect("info")
        .snapshot_dram_bytes;
    assert!(later > fresh, "snapshot DRAM {fresh} -> {later}");
    now = fixture.device.delete_namespace(now, pink).expect("delete");
    assert!(matches!(
        fixture.device.iter_next(now, iterator, 100),
        Err(DeviceError::IteratorNamespaceDeleted(_))
    ));
}
