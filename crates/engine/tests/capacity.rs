//! Capacity, DRAM-budget and Bloom-accuracy tests of the LSM engine on tiny geometries.
//!
//! * A device filled to capacity refuses puts with `CapacityExceeded`, stays readable, and takes puts
//!   again after deletes (and the compactions and GC they cause).
//! * A long overwrite workload never fills the device: GC keeps up.
//! * A DRAM budget too small for L0 and the level lists is refused at open.
//! * `lightstore`'s measured Bloom false-positive rate is close to Monkey's prediction.

use std::collections::BTreeMap;

use kvssd_engine::{EngineConfig, EngineError, LsmEngine, Preset};
use kvssd_flash::{Flash, Profile};

fn engine(preset: Preset) -> LsmEngine {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    LsmEngine::open(flash, EngineConfig::test_min(preset)).expect("open")
}

fn key(id: u64) -> Vec<u8> {
    format!("user{id:06}").into_bytes()
}

fn value(id: u64, version: u64) -> Vec<u8> {
    (0..100)
        .map(|i| (id * 13 + version * 5 + i) as u8)
        .collect()
}

fn check_all(engine: &mut LsmEngine, now: &mut u64, model: &BTreeMap<u64, u64>) {
    for (&id, &version) in model {
        let (found, done) = engine.get(*now, &key(id)).expect("get");
        *now = done;
        assert_eq!(found, Some(value(id, version)), "key {id}");
    }
}

#[test]
fn capacity_full_device_refuses_puts_and_recovers_after_deletes() {
    for preset in [Preset::Pink, Preset::Lightstore] {
        let mut engine = engine(preset);
        let mut now = 0;
        let mut model = BTreeMap::new();
        let mut id = 0;
        let refused = loop {
            match engine.put(now, &key(id), &value(id, 0)) {
                Ok(done) => {
                    now = done;
                    model.insert(id, 0);
                    id += 1;
                }
                Err(error) => break error,
            }
            assert!(id < 100_000, "{preset}: the device never filled");
        };
        assert!(
            matches!(refused, EngineError::CapacityExceeded(_)),
            "{preset}: {refused}"
        );
        println!("{preset}: full after {id} puts of 100-byte values: {refused}");
        // Consistent and readable when full, and still refusing.
        check_all(&mut engine, &mut now, &model);
        assert!(matches!(
            engine.put(now, &key(id), &value(id, 0)),
            Err(EngineError::CapacityExceeded(_))
        ));
        // Delete three quarters of the keys.
        for victim in 0..id {
            if victim % 4 != 0 {
                now = engine
                    .delete(now, &key(victim))
                    .expect("deletes proceed on a full device");
                model.remove(&victim);
            }
        }
        // Puts are accepted again once the tombstones reached the data they delete and GC ran.
        let mut accepted = 0;
        let mut refusals = 0;
        let mut next = id;
        while accepted < id / 2 {
            match engine.put(now, &key(next), &value(next, 1)) {
                Ok(done) => {
                    now = done;
                    model.insert(next, 1);
                    accepted += 1;
                    next += 1;
                }
                Err(EngineError::CapacityExceeded(why)) => {
                    if refusals % 2000 == 0 {
                        println!(
                            "{preset}: refused ({why}); valid {} of {}, free blocks {}\n{}",
                            engine.space().valid_bytes(),
                            engine.space().user_capacity_bytes(),
                            engine.space().free_blocks(),
                            engine.stats()
                        );
                    }
                    // Deletes of keys never stored still push L0 through flushes and compactions.
                    refusals += 1;
                    now = engine
                        .delete(now, &key(1_000_000 + refusals))
                        .expect("delete");
                    assert!(refusals < 10_000, "{preset}: puts never accepted again");
                }
                Err(error) => panic!("{preset}: {error}"),
            }
        }
        check_all(&mut engine, &mut now, &model);
        let stats = engine.stats();
        assert!(stats.gc_data_victims > 0, "{preset}: no data GC");
        println!(
            "{preset}: {accepted} puts accepted after deletes ({refusals} refusals first)\n{stats}"
        );
    }
}

#[test]
fn capacity_long_overwrite_workload_does_not_fill_the_device() {
    for preset in Preset::ALL {
        let mut engine = engine(preset);
        let mut now = 0;
        let mut model = BTreeMap::new();
        let keys = 500;
        for round in 0..40u64 {
            for id in 0..keys {
                // A deterministic shuffle of the order per round.
                let id = (id * 7919 + round * 31) % keys;
                now = engine
                    .put(now, &key(id), &value(id, round))
                    .unwrap_or_else(|error| panic!("{preset} round {round} key {id}: {error}"));
                model.insert(id, round);
            }
        }
        check_all(&mut engine, &mut now, &model);
        let stats = engine.stats();
        let written = stats.flash.of(kvssd_flash::Purpose::UserData).program_bytes;
        assert!(
            written > 4 * Profile::test_min().geometry.capacity_bytes(),
            "{preset}: the workload must write the device over several times"
        );
        assert!(
            stats.gc_data_victims > 100 && stats.gc_meta_victims > 10,
            "{preset}: {stats}"
        );
        println!("{preset}: overwrite workload\n{stats}");
    }
}

#[test]
fn capacity_dram_budget_too_small_is_refused_at_open() {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let mut config = EngineConfig::test_min(Preset::Pink);
    config.dram_budget_bytes = 4096;
    match LsmEngine::open(flash, config) {
        Err(error @ EngineError::DramBudgetTooSmall { needed, budget }) => {
            assert_eq!(budget, 4096);
            assert!(needed > budget);
            let message = error.to_string();
            assert!(message.contains("too small"), "{message}");
        }
        Err(error) => panic!("wrong error: {error}"),
        Ok(_) => panic!("a 4 KiB budget was accepted"),
    }
}

#[test]
fn bloom_lightstore_false_positive_rate_matches_monkey() {
    let profile = Profile::test_min();
    let mut config = EngineConfig::test_min(Preset::Lightstore);
    // Find what L0 and the level lists need, then leave about 4 bits per projected key for filters.
    config.dram_budget_bytes = 1;
    let needed = match LsmEngine::open(
        Flash::new(profile.geometry, Some(profile.timing.clone())).expect("flash"),
        config.clone(),
    ) {
        Err(EngineError::DramBudgetTooSmall { needed, .. }) => needed,
        other => panic!("expected DramBudgetTooSmall, got {:?}", other.err()),
    };
    config.dram_budget_bytes = needed + 2_400;
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let mut engine = LsmEngine::open(flash, config).expect("open");
    let mut now = 0;
    let keys = 600;
    for id in 0..keys {
        now = engine.put(now, &key(id), &value(id, 0)).expect("put");
    }
    // Absent keys interleaved with the stored ones probe every level's filters.
    for id in 0..20 * keys {
        let absent = format!("user{:06}x", id % keys).into_bytes();
        let (found, done) = engine.get(now, &absent).expect("get");
        now = done;
        assert_eq!(found, None);
    }
    let stats = engine.stats();
    let mut negatives = 0u64;
    let mut false_positives = 0u64;
    let mut predicted = 0.0;
    for level in &stats.levels {
        let bloom = level.bloom;
        println!(
            "L{}: {:.2} bits/key, Monkey predicts {:.4}, measured {:?} ({} of {}), filters' own formula {:.4}",
            level.level,
            bloom.bits_per_key,
            bloom.monkey_fpr,
            bloom.measured_fpr(),
            bloom.false_positives,
            bloom.negatives,
            bloom.expected_false_positives / bloom.negatives.max(1) as f64
        );
        negatives += bloom.negatives;
        false_positives += bloom.false_positives;
        predicted += bloom.negatives as f64 * bloom.monkey_fpr;
    }
    assert!(
        negatives > 10_000,
        "too few probes of absent keys: {negatives}"
    );
    let measured = false_positives as f64 / negatives as f64;
    let predicted = predicted / negatives as f64;
    println!("lightstore Bloom false-positive rate: measured {measured:.4}, Monkey predicts {predicted:.4}");
    assert!(
        predicted > 0.005,
        "the test needs filters small enough to have false positives"
    );
    assert!(
        (measured - predicted).abs() <= 0.35 * predicted,
        "measured {measured:.4} is not close to Monkey's {predicted:.4}"
    );
}

/// Regression: on PinK's card with 64 logs, sustained uniform overwrites after a load once made
/// `pink` refuse puts ("GC cannot free the blocks this write needs") while most data blocks were
/// under 20% valid: GC takes a data victim only while L0 has room for its re-inserted records, and
/// with L0 full of them and too few other victims it gave up. GC now flushes L0 into the pinned L1
/// to make room.
#[test]
fn capacity_regression_pink_gc_reinsertion_keeps_up_on_many_logs() {
    let profile = Profile::pink_with_blocks(8);
    let mut config = EngineConfig::new(Preset::Pink, &profile.geometry);
    config.l0_bytes = 64 << 10;
    config.l1_entries = 500;
    config.levels_max = 4;
    config.expected_value_bytes = 1024;
    config.dram_budget_bytes = profile.geometry.capacity_bytes() / 1000
        + config.l0_bytes
        + config.value_bytes_max(&profile.geometry) as u64
        + profile.geometry.block_bytes();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let mut engine = LsmEngine::open(flash, config).expect("open");
    let value = |id: u64, version: u64| vec![(id + version) as u8; 1024];
    let records = 250_000u64;
    let mut now = 0;
    for id in 0..records {
        now = engine.put(now, &key(id), &value(id, 0)).expect("load");
    }
    let mut state = 7u64;
    let mut versions = vec![0u64; records as usize];
    for round in 1..=900_000u64 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let id = (state >> 33) % records;
        versions[id as usize] = round;
        now = engine
            .put(now, &key(id), &value(id, round))
            .unwrap_or_else(|error| panic!("overwrite {round} refused: {error}"));
    }
    let stats = engine.stats();
    assert!(stats.gc_data_victims > 0, "data blocks were collected");
    assert!(
        stats.gc_records_reinserted > 0,
        "live records were re-inserted"
    );
    for id in (0..records).step_by(97) {
        let (found, done) = engine.get(now, &key(id)).expect("get");
        now = done;
        assert_eq!(found, Some(value(id, versions[id as usize])), "key {id}");
    }
}
