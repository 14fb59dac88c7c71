//! The hash engines' contract beyond the model test: scans refused with a typed error, key and
//! value limits, signature collisions resolved by key comparison (1-bit signatures force them),
//! a full table refused with a typed error, DRAM budgets too small to open, a write-buffer
//! flush that reads its bucket pages in parallel, and GETs served from the buffer a flush in
//! flight applies.

use kvssd_engine::hash::{HashConfig, HashEngine, HashError, HashPreset};
use kvssd_engine::EngineError;
use kvssd_flash::{ControllerModel, Flash, Profile};

fn engine(config: HashConfig) -> HashEngine {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    HashEngine::open(flash, config).expect("open")
}

#[test]
fn hash_scans_are_refused_as_unsupported() {
    for preset in HashPreset::ALL {
        let mut engine = engine(HashConfig::test_min(preset));
        let done = engine.put(0, b"a", b"1").expect("put");
        assert!(matches!(
            engine.scan(done, b"a", 10),
            Err(HashError::Unsupported {
                operation: "scan",
                ..
            })
        ));
    }
}

#[test]
fn hash_limits_give_typed_errors() {
    for preset in HashPreset::ALL {
        let mut engine = engine(HashConfig::test_min(preset));
        assert!(matches!(
            engine.put(0, b"", b"v"),
            Err(HashError::Engine(EngineError::KeyEmpty))
        ));
        assert!(matches!(
            engine.put(0, &[1u8; 256], b"v"),
            Err(HashError::Engine(EngineError::KeyTooLong { len: 256 }))
        ));
        assert!(matches!(
            engine.get(0, b""),
            Err(HashError::Engine(EngineError::KeyEmpty))
        ));
        let too_big = vec![0u8; engine.value_bytes_max() + 1];
        assert!(matches!(
            engine.put(0, b"k", &too_big),
            Err(HashError::Engine(EngineError::ValueTooLarge { .. }))
        ));
        // The largest value and the longest key are taken.
        let largest = vec![7u8; engine.value_bytes_max()];
        let key = [9u8; 255];
        let mut t = engine.put(0, &key, &largest).expect("largest put");
        t = engine.sync(t).expect("sync");
        let (value, _) = engine.get(t, &key).expect("get");
        assert_eq!(value.as_deref(), Some(&largest[..]));
    }
}

#[test]
fn hash_signature_collisions_resolve_by_key() {
    for preset in HashPreset::ALL {
        let mut config = HashConfig::test_min(preset);
        config.signature_bits = 1;
        let mut engine = engine(config);
        let mut t = 0;
        for id in 0..300u32 {
            t = engine
                .put(t, format!("key{id}").as_bytes(), &id.to_le_bytes())
                .expect("put");
        }
        t = engine.sync(t).expect("sync");
        for id in 0..300u32 {
            let (value, done) = engine.get(t, format!("key{id}").as_bytes()).expect("get");
            t = done;
            assert_eq!(value.as_deref(), Some(&id.to_le_bytes()[..]), "key{id}");
        }
        // Absent keys: every signature match is a collision, and the answer is still None.
        for id in 0..2000u32 {
            let (value, done) = engine.get(t, format!("nokey{id}").as_bytes()).expect("get");
            t = done;
            assert_eq!(value, None);
        }
        let stats = engine.stats();
        println!("{preset} with 1-bit signatures\n{stats}");
        assert!(
            stats.signature_collisions > 100,
            "{preset}: only {} collisions",
            stats.signature_collisions
        );
        assert!(stats.data_reads_per_get.max() > 1);
    }
}

#[test]
fn hash_full_table_is_a_typed_error() {
    // A fixed table of one page, probe window of 4 slots: the table refuses at its load limit or
    // when a window is full, never silently.
    let mut config = HashConfig::test_min(HashPreset::Hash);
    config.table_slots = 8;
    config.probe_slots_max = 4;
    let mut engine = engine(config);
    let mut t = 0;
    let mut stored = Vec::new();
    let mut refused = None;
    for id in 0..100u32 {
        let key = format!("key{id}");
        match engine
            .put(t, key.as_bytes(), b"v")
            .and_then(|done| engine.sync(done))
        {
            Ok(done) => {
                t = done;
                stored.push(key);
            }
            Err(error) => {
                refused = Some(error);
                break;
            }
        }
    }
    let refused = refused.expect("a full table refuses");
    assert!(
        matches!(
            refused,
            HashError::TableFull { probe_slots: 4 }
                | HashError::Engine(EngineError::CapacityExceeded(_))
        ),
        "{refused}"
    );
    // What was stored is still there.
    for key in stored {
        let (value, done) = engine.get(t, key.as_bytes()).expect("get");
        t = done;
        assert_eq!(value.as_deref(), Some(&b"v"[..]), "{key}");
    }
}

#[test]
fn hash_budget_too_small_is_refused() {
    for preset in HashPreset::ALL {
        let mut config = HashConfig::test_min(preset);
        config.dram_budget_bytes = config.write_buffer_bytes + 100;
        let profile = Profile::test_min();
        let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
        assert!(matches!(
            HashEngine::open(flash, config),
            Err(HashError::Engine(EngineError::DramBudgetTooSmall { .. }))
        ));
    }
}

#[test]
fn hash_preset_names_round_trip() {
    for preset in HashPreset::ALL {
        assert_eq!(preset.name().parse::<HashPreset>().ok(), Some(preset));
    }
    assert!("pink".parse::<HashPreset>().is_err());
}

/// A flush knows every bucket page it will touch, so it reads them at once: on PinK's card its
/// misses overlap across dies and the flush takes far less than the same reads one after another
/// (which is how it ran before, each pair waiting for the previous pair's miss).
#[test]
fn hash_flush_reads_its_bucket_pages_in_parallel() {
    let profile = Profile::pink_with_blocks(16);
    let flash = Flash::new(profile.geometry, Some(profile.timing.clone())).expect("flash");
    let mut config = HashConfig::new(HashPreset::Hash, &profile.geometry);
    config.write_buffer_bytes = 64 << 10;
    let mut engine = HashEngine::open(flash, config).expect("open");
    let value = vec![5u8; 1024];
    let mut t = 0;
    for id in 0..20_000u32 {
        t = engine
            .put(t, format!("old{id:08}").as_bytes(), &value)
            .expect("put");
    }
    t = engine.sync(t).expect("sync");
    let start = t.max(engine.space().flash().quiescent_at());
    let reads_before = engine.stats().bucket_page_reads;
    let flushes_before = engine.stats().flushes;
    // New keys, all issued at once: the put that overflows the buffer flushes it.
    let mut finished = start;
    let mut id = 0u32;
    while engine.stats().flushes == flushes_before {
        let done = engine
            .put(start, format!("new{id:08}").as_bytes(), &value)
            .expect("put");
        finished = finished.max(done);
        id += 1;
    }
    let reads = engine.stats().bucket_page_reads - reads_before;
    let took = finished - start;
    println!("a flush of {id} pairs read {reads} bucket pages in {took} ns");
    assert!(
        reads >= 20,
        "the flush should miss the cache: {reads} reads"
    );
    // One after another, each read costs at least tR plus its transfer; overlapped, the whole flush
    // (reads, slot updates, data programs) fits in less than tR per read.
    assert!(
        took < reads * profile.timing.read_ns,
        "a flush of {reads} bucket reads took {took} ns"
    );
    for check in [0, id / 2, id - 1] {
        let (got, _) = engine
            .get(finished, format!("new{check:08}").as_bytes())
            .expect("get");
        assert_eq!(got.as_deref(), Some(&value[..]));
    }
}

/// Regression (kaml-micro at 100K records ran 19 minutes, nearly all of it copying slots): GC's
/// liveness check copied the slots of a resident bucket page for every record of a data victim,
/// and `kaml`'s whole table is one resident page, so each victim cost records × table size. The
/// check now borrows resident pages and peeks at each other page once per victim, so the slots it
/// touches grow with the records checked, whatever the table's size.
#[test]
fn hash_gc_liveness_check_touches_each_slot_once() {
    for preset in HashPreset::ALL {
        let mut config = HashConfig::test_min(preset);
        if preset == HashPreset::Kaml {
            // A table of thousands of slots, where a copy per record would dwarf the window.
            config.table_slots = 4096;
            config.dram_budget_bytes = 2048 + 64 * 4096;
        }
        let mut engine = engine(config);
        let value = vec![3u8; 48];
        let mut t = 0;
        for round in 0..6u32 {
            for id in 0..1_000u32 {
                let key = format!("key{id:06}");
                t = engine
                    .put(t, key.as_bytes(), &value)
                    .unwrap_or_else(|e| panic!("{preset} round {round} put {key}: {e}"));
            }
        }
        t = engine.sync(t).expect("sync");
        let stats = engine.stats();
        assert!(
            stats.gc_data_victims >= 3 && stats.gc_records_checked >= 100,
            "{preset}: GC should have checked records\n{stats}"
        );
        assert!(
            stats.gc_slots_examined <= stats.gc_records_checked * stats.probe_slots,
            "{preset}: {} slots examined for {} records (window {})",
            stats.gc_slots_examined,
            stats.gc_records_checked,
            stats.probe_slots
        );
        let slots_per_page = stats.table_slots / stats.table_pages.max(1);
        match preset {
            HashPreset::Kaml => assert_eq!(
                stats.gc_slots_copied, 0,
                "kaml: every slot is resident, none need copying"
            ),
            HashPreset::Hash => assert!(
                stats.gc_slots_copied <= stats.bucket_page_reads * slots_per_page,
                "hash: {} slots copied, {} bucket pages read",
                stats.gc_slots_copied,
                stats.bucket_page_reads
            ),
        }
        let (got, _) = engine.get(t, b"key000500").expect("get");
        assert_eq!(got.as_deref(), Some(&value[..]));
    }
}

/// `kaml` with its keys in the slots (KAML's 64-bit keys, §IV-C): other key lengths are refused,
/// every answer matches a map through flushes, resizes and GC, and an update stages and applies
/// without waiting for the replaced record (the signature is the key).
#[test]
fn hash_kaml_key_in_slot_keeps_64_bit_keys_without_reading_them() {
    let mut config = HashConfig::test_min(HashPreset::Kaml);
    config.key_in_slot = true;
    let mut engine = engine(config);
    assert!(matches!(
        engine.put(0, b"short", b"v"),
        Err(HashError::Engine(EngineError::Unsupported { .. }))
    ));
    let mut model = std::collections::BTreeMap::new();
    let mut t = 0;
    for step in 0..12_000u64 {
        let key = (step * 7 % 900).to_be_bytes();
        let mut value = format!("value {step}").into_bytes();
        value.resize(48, b'.');
        t = engine.put(t, &key, &value).expect("put");
        model.insert(key, value);
    }
    t = engine.sync(t).expect("sync");
    for (key, value) in &model {
        let (found, done) = engine.get(t, key).expect("get");
        t = done;
        assert_eq!(found.as_ref(), Some(value));
    }
    let stats = engine.stats();
    assert!(stats.resizes >= 1 && stats.gc_data_victims >= 1, "{stats}");
}

/// While the background thread applies a write buffer, GETs of its keys are answered from it
/// (the immutable buffer) with no flash read; once the flush has finished they read the table.
/// The keys the buffers may hold are kept apart from the trees for speed: they must cover the
/// buffer in flight as well as the one being filled.
#[test]
fn hash_gets_of_keys_a_flush_in_flight_holds_read_nothing() {
    let profile = Profile::test_min();
    let mut timing = profile.timing;
    timing.controller = ControllerModel::Threads;
    let flash = Flash::new(profile.geometry, Some(timing)).expect("flash");
    let mut engine = HashEngine::open(flash, HashConfig::test_min(HashPreset::Hash)).expect("open");
    let value = vec![7u8; 64];
    let key = |id: u32| format!("key{id:08}").into_bytes();
    let mut t = 0;
    let mut id = 0;
    // A first flush, so that the table holds pages on flash.
    while engine.stats().flushes == 0 {
        t = engine.put(t, &key(id), &value).expect("put");
        id += 1;
    }
    t = engine.sync(t).expect("sync");
    let start = t.max(engine.space().flash().quiescent_at());
    // The next buffer's keys, all issued at once: the put that overflows it starts its flush.
    let first = id;
    let flushes = engine.stats().flushes;
    let mut issued = start;
    while engine.stats().flushes == flushes {
        issued = issued.max(engine.put(start, &key(id), &value).expect("put"));
        id += 1;
    }
    let (got, _) = engine.get(issued, &key(first)).expect("get");
    assert_eq!(got.as_deref(), Some(&value[..]));
    assert_eq!(
        (engine.last_get_index_reads(), engine.last_get_data_reads()),
        (0, 0),
        "a key of the buffer in flight"
    );
    let later = engine.sync(issued).expect("sync");
    let later = later.max(engine.space().flash().quiescent_at()) + 1_000_000_000;
    let (got, _) = engine.get(later, &key(first)).expect("get");
    assert_eq!(got.as_deref(), Some(&value[..]));
    assert!(
        engine.last_get_data_reads() > 0,
        "once the flush has finished, the key is read from the table"
    );
}
