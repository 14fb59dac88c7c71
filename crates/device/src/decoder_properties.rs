//! Property tests of the durability layer's decoders: log records, checkpoints, root records,
//! superblock copies and power-loss dumps, as their encoders wrote them, decode back to what was
//! written; and any mutation of them (flipped bytes, truncation, extension, overwritten length
//! fields) is refused with a typed error or accepted, never a panic.

use kvssd_engine::{EngineConfig, LsmTree, Preset};
use kvssd_flash::fuzzing::{mutate, Mutation};
use kvssd_flash::{Flash, Profile};
use kvssd_space::Space;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use crate::durability::checkpoint::{Checkpoint, CheckpointLocation, Extent, Mode, Root};
use crate::durability::superblock::{self, SuperblockCopy};
use crate::durability::wal::{self, WalOp, WalRecord};
use crate::{fuzzing, DeviceConfig, NamespaceSpec, PresetKind};

fn mutation() -> impl Strategy<Value = Mutation> {
    (
        any::<u8>(),
        any::<usize>(),
        any::<u32>(),
        vec(any::<u8>(), 0..32),
    )
        .prop_map(|(kind, at, value, bytes)| Mutation::from_parts(kind, at, value, bytes))
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 1..=255)
}

fn spec() -> impl Strategy<Value = NamespaceSpec> {
    (
        0..PresetKind::ALL.len(),
        option::of(vec(any::<u32>(), 0..4)),
        option::of(any::<u64>()),
        option::of("[a-z_é]{1,40}"),
    )
        .prop_map(|(preset, logs, quota_bytes, name)| NamespaceSpec {
            preset: PresetKind::ALL[preset],
            logs,
            quota_bytes,
            name,
        })
}

fn op() -> impl Strategy<Value = WalOp> {
    prop_oneof![
        (any::<u32>(), key(), vec(any::<u8>(), 0..100)).prop_map(|(namespace, key, value)| {
            WalOp::Store {
                namespace,
                key,
                value,
            }
        }),
        (any::<u32>(), key()).prop_map(|(namespace, key)| WalOp::Delete { namespace, key }),
    ]
}

fn record() -> impl Strategy<Value = WalRecord> {
    prop_oneof![
        vec(op(), 0..6).prop_map(WalRecord::Ops),
        (any::<u32>(), spec())
            .prop_map(|(namespace, spec)| WalRecord::CreateNamespace { namespace, spec }),
        any::<u32>().prop_map(|namespace| WalRecord::DeleteNamespace { namespace }),
    ]
}

fn checkpoint() -> impl Strategy<Value = Checkpoint> {
    (
        any::<u64>(),
        any::<u32>(),
        vec((any::<u32>(), spec()), 0..4),
        vec(any::<u8>(), 0..64),
        vec((any::<u32>(), any::<u64>(), vec(any::<u8>(), 0..64)), 0..4),
    )
        .prop_map(
            |(next_lsn, next_namespace, namespaces, space, parts)| Checkpoint {
                next_lsn,
                next_namespace,
                namespaces,
                space,
                parts,
            },
        )
}

fn root() -> impl Strategy<Value = Root> {
    let extent =
        (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(block, first_page, pages)| Extent {
            block,
            first_page,
            pages,
        });
    let location = (any::<u32>(), vec(extent, 0..4))
        .prop_map(|(log_id, extents)| CheckpointLocation { log_id, extents });
    (
        any::<bool>(),
        any::<u32>(),
        option::of(location),
        any::<u32>(),
        vec(any::<u64>(), 0..8),
    )
        .prop_map(|(plp, next_log_id, checkpoint, log_id, log_blocks)| Root {
            mode: if plp { Mode::Plp } else { Mode::Wal },
            next_log_id,
            checkpoint,
            log_id,
            log_blocks,
        })
}

/// A power-loss dump record of a `test_min` device holding one `pink` namespace (id 1) whose
/// tree holds `pairs`.
fn dump(pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let config = DeviceConfig::test_min();
    let flash = Flash::new(Profile::test_min().geometry, None).expect("valid geometry");
    let mut space = Space::open(flash, config.space.clone()).expect("erased flash");
    let mut engine: EngineConfig = config.engine.clone();
    engine.namespace = 1;
    engine.space = space.config().clone();
    let mut tree = LsmTree::open(&space, engine).expect("test_min opens");
    let mut at = 0;
    for (key, value) in pairs {
        at = tree
            .put(&mut space, at, key, value)
            .expect("a few pairs fit");
    }
    space
        .sync_all(at, kvssd_flash::Purpose::Checkpoint)
        .expect("sync");
    Checkpoint {
        next_lsn: 1,
        next_namespace: 2,
        namespaces: vec![(1, NamespaceSpec::new(Preset::Pink))],
        space: space.export_state(),
        parts: vec![(1, 0, tree.durable_state())],
    }
    .encode()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decoder_wal_record_round_trips_and_survives_mutation(
        lsn in any::<u64>(),
        record in record(),
        mutations in vec(mutation(), 1..4),
    ) {
        let bytes = wal::encode(lsn, &record);
        prop_assert_eq!(wal::decode(&bytes), Ok((lsn, record)));
        let _ = wal::decode(&mutate(&bytes, &mutations));
    }

    #[test]
    fn decoder_checkpoint_round_trips_and_survives_mutation(
        checkpoint in checkpoint(),
        mutations in vec(mutation(), 1..4),
    ) {
        let bytes = checkpoint.encode();
        prop_assert_eq!(Checkpoint::decode(&bytes), Ok(checkpoint));
        let _ = Checkpoint::decode(&mutate(&bytes, &mutations));
    }

    #[test]
    fn decoder_root_round_trips_and_survives_mutation(
        root in root(),
        mutations in vec(mutation(), 1..4),
    ) {
        let bytes = root.encode();
        prop_assert_eq!(Root::decode(&bytes), Ok(root));
        let _ = Root::decode(&mutate(&bytes, &mutations));
    }

    #[test]
    fn decoder_superblock_round_trips_and_survives_mutation(
        sequence in any::<u64>(),
        body in vec(any::<u8>(), 0..200),
        mutations in vec(mutation(), 1..4),
    ) {
        let copy = SuperblockCopy { sequence, body };
        let page = superblock::encode(&copy, 256).expect("the body fits");
        prop_assert_eq!(superblock::decode(&page), Ok(copy.clone()));
        prop_assert_eq!(fuzzing::superblock_fields(&page), Ok(copy));
        let damaged = mutate(&page, &mutations);
        let _ = superblock::decode(&damaged);
        let _ = fuzzing::superblock_fields(&damaged);
    }
}

proptest! {
    // Each case writes an index and rebuilds a device from its dump: fewer cases keep it fast.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn decoder_plp_dump_round_trips_and_survives_mutation(
        pairs in vec((vec(any::<u8>(), 1..16), vec(any::<u8>(), 0..64)), 0..40),
        mutations in vec(mutation(), 1..4),
    ) {
        let record = dump(&pairs);
        prop_assert_eq!(fuzzing::restore_dump(&record).expect("a valid dump restores"), 1);
        let _ = fuzzing::restore_dump(&mutate(&record, &mutations));
    }
}

/// Writes valid encodings of every structure a fuzz target decodes under `fuzz/seeds/TARGET/`,
/// so the targets start from inputs that pass their magic numbers and framing. Run by hand when a
/// format changes: `cargo test -p kvssd-device --lib write_fuzz_seeds -- --ignored`.
#[test]
#[ignore = "writes files into fuzz/seeds; run by hand"]
fn write_fuzz_seeds() {
    use kvssd_engine::hash::{HashConfig, HashIndex, HashPreset};

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let directory = root.join(target);
        std::fs::create_dir_all(&directory).expect("create the seeds directory");
        std::fs::write(directory.join(name), bytes).expect("write a seed");
    };
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..60u32)
        .map(|i| (format!("key{i:03}").into_bytes(), vec![i as u8; 40]))
        .collect();
    let spec = NamespaceSpec::new(Preset::Pink).with_name("users");
    write(
        "wal_record",
        "ops",
        &wal::encode(
            7,
            &WalRecord::Ops(vec![
                WalOp::Store {
                    namespace: 1,
                    key: b"k".to_vec(),
                    value: b"v".to_vec(),
                },
                WalOp::Delete {
                    namespace: 1,
                    key: b"gone".to_vec(),
                },
            ]),
        ),
    );
    write(
        "wal_record",
        "create-named",
        &wal::encode(
            8,
            &WalRecord::CreateNamespace {
                namespace: 2,
                spec: spec.clone(),
            },
        ),
    );
    let dump_record = dump(&pairs);
    write("checkpoint", "one-namespace", &dump_record);
    write("plp_dump", "one-namespace", &dump_record);
    write("plp_dump", "few-pairs", &dump(&pairs[..5]));
    let root_record = Root {
        mode: Mode::Wal,
        next_log_id: 9,
        checkpoint: Some(CheckpointLocation {
            log_id: 7,
            extents: vec![Extent {
                block: 4,
                first_page: 0,
                pages: 3,
            }],
        }),
        log_id: 8,
        log_blocks: vec![5, 6],
    }
    .encode();
    write("root_record", "wal", &root_record);
    let copy = SuperblockCopy {
        sequence: 3,
        body: root_record,
    };
    write(
        "superblock",
        "copy",
        &superblock::encode(&copy, 512).expect("fits"),
    );
    write(
        "image_header",
        "test-min",
        &kvssd_flash::fuzzing::encode_image_header(&Profile::test_min().geometry),
    );
    write(
        "bucket_page",
        "slots",
        &kvssd_engine::fuzzing::encode_bucket_page(&[(1, 3), (u64::MAX, 0), (9, 1)], 0, 1, 12, 512),
    );
    // The space state and index states, saved after enough writes to flush and compact.
    let flash = Flash::new(Profile::test_min().geometry, None).expect("valid geometry");
    let config = EngineConfig::test_min(Preset::Pink);
    let mut space = Space::open(flash, config.space.clone()).expect("erased flash");
    let mut tree = LsmTree::open(&space, config).expect("test_min opens");
    let mut at = 0;
    for (key, value) in &pairs {
        at = tree.put(&mut space, at, key, value).expect("fits");
    }
    let mut state = vec![0u8];
    state.extend(tree.durable_state());
    write("lsm_restore", "pink", &state);
    // The space target restores onto its own configuration's layer.
    let mut space = kvssd_space::fuzzing::blank_space();
    let mut at = 0;
    for (index, (key, value)) in pairs.iter().enumerate() {
        let purpose = kvssd_flash::Purpose::UserData;
        at = space
            .append_record(at, purpose, (index % 3) as u32, key, value)
            .expect("fits")
            .1;
    }
    space
        .sync_all(at, kvssd_flash::Purpose::Checkpoint)
        .expect("sync");
    write("space_restore", "after-writes", &space.export_state());
    for (choice, preset) in HashPreset::ALL.into_iter().enumerate() {
        let config = HashConfig::test_min(preset);
        let flash = Flash::new(Profile::test_min().geometry, None).expect("valid geometry");
        let mut space = Space::open(flash, config.space.clone()).expect("erased flash");
        let mut index = HashIndex::open(&space, config).expect("test_min opens");
        let mut at = 0;
        for (key, value) in &pairs {
            at = index.put(&mut space, at, key, value).expect("fits");
        }
        let mut state = vec![choice as u8];
        state.extend(index.durable_state());
        write("hash_restore", preset.name(), &state);
    }
}
