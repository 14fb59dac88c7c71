//! Model-based test of the LSM engine: random puts, gets, deletes and scans against a `BTreeMap`,
//! for every preset on the `test_min` geometry.
//!
//! Each run is driven by one seed. The engine's answers must equal the model's after every
//! operation; DRAM must stay within its budget; with the `pink` presets every GET must read at most
//! `h - k - 1` meta pages. At the end the run must have exercised flushes, compactions into the last
//! level, and GC of meta and data blocks many times. A failure prints the seed and how to replay it:
//! `KVSSD_SEED=<seed> cargo test -p kvssd-engine --test model`.
//!
//! The `detached` runs also prepare flushes as a device on a file does
//! (`LsmEngine::detach_flush`), and attach each after a random number of further operations, so
//! that pairs are overwritten, deleted and added between the two, and some flushes come between.

use std::collections::BTreeMap;

use kvssd_engine::{EngineConfig, EngineError, LsmEngine, Preset};
use kvssd_flash::{Flash, Profile};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

mod common;
use common::{key_of, value_of};

const OPERATIONS: usize = 30_000;
const KEY_SPACE: u64 = 500;

fn run(preset: Preset, seed: u64, detached: bool) -> Result<String, String> {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).map_err(|e| e.to_string())?;
    let mut config = EngineConfig::test_min(preset);
    // Collect early, so victims still hold live meta pages and records to move.
    config.gc_threshold_blocks = 24;
    // A budget that pins L1 only, so GETs read meta pages of two flash levels (bound h - k - 1 = 2
    // once the tree has four levels) and pink's meta blocks mix live and dead pages.
    config.dram_budget_bytes = 20 * 1024;
    let mut engine = LsmEngine::open(flash, config).map_err(|e| e.to_string())?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut now = 0u64;
    let value_max = engine.value_bytes_max().min(1500);
    let bounded = preset != Preset::Lightstore;
    let mut max_reads = 0;
    // A prepared flush and the step at which it is attached.
    let mut out: Option<(kvssd_engine::DetachedFlush, usize)> = None;
    let mut attached = 0u64;
    let mut kept_pairs = 0u64;
    for step in 0..OPERATIONS {
        if detached {
            match out.take() {
                Some((mut flush, due)) if due <= step => {
                    flush.prepare();
                    let flushes = engine.stats().flushes;
                    now = engine
                        .attach_flush(now, flush)
                        .map_err(|e| format!("step {step}, attach: {e}"))?;
                    if engine.stats().flushes > flushes {
                        attached += 1;
                        // Pairs written since it was detached stayed in L0.
                        kept_pairs += u64::from(engine.tree().l0_bytes() > 0);
                    }
                }
                Some(pending) => out = Some(pending),
                None => {
                    let for_checkpoint = rng.next_u64() % 4 == 0;
                    out = engine
                        .detach_flush(for_checkpoint)
                        .map(|flush| (flush, step + (rng.next_u64() % 40) as usize));
                }
            }
        }
        let id = rng.next_u64() % KEY_SPACE;
        let key = key_of(id);
        let roll = rng.next_u64() % 100;
        let context = |what: &str| {
            format!(
                "step {step}, {what} key {:?}",
                String::from_utf8_lossy(&key)
            )
        };
        if roll < 45 {
            let value = value_of(&mut rng, id, step as u64, value_max);
            now = engine
                .put(now, &key, &value)
                .map_err(|e| format!("{}: {e}", context("put")))?;
            model.insert(key.clone(), value);
        } else if roll < 55 {
            now = engine
                .delete(now, &key)
                .map_err(|e| format!("{}: {e}", context("delete")))?;
            model.remove(&key);
        } else if roll < 95 {
            // Some GETs go to keys never stored (ids past the key space).
            let key = if roll >= 88 {
                key_of(KEY_SPACE + id)
            } else {
                key.clone()
            };
            let (value, done) = engine
                .get(now, &key)
                .map_err(|e| format!("{}: {e}", context("get")))?;
            now = done;
            if value.as_ref() != model.get(&key) {
                return Err(format!(
                    "{}: engine has {:?} bytes, model {:?}",
                    context("get"),
                    value.map(|v| v.len()),
                    model.get(&key).map(Vec::len)
                ));
            }
            let reads = engine.last_get_meta_reads();
            max_reads = max_reads.max(reads);
            let bound = engine.height() - engine.pinned_levels() - 1;
            if bounded && reads as usize > bound {
                return Err(format!(
                    "{}: read {reads} meta pages, bound h - k - 1 = {bound}",
                    context("get")
                ));
            }
        } else {
            let count = 1 + (rng.next_u64() % 20) as usize;
            let (pairs, done) = engine
                .scan(now, &key, count)
                .map_err(|e| format!("{}: {e}", context("scan")))?;
            now = done;
            let expected: Vec<(Vec<u8>, Vec<u8>)> = model
                .range(key.clone()..)
                .take(count)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if pairs != expected {
                return Err(format!(
                    "{}: scan of {count} returned keys {:?}, model {:?}",
                    context("scan"),
                    pairs
                        .iter()
                        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                        .collect::<Vec<_>>(),
                    expected
                        .iter()
                        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                        .collect::<Vec<_>>()
                ));
            }
        }
        let dram = engine.dram_usage();
        if dram.total() > dram.budget {
            return Err(format!("step {step}: DRAM {dram:?} exceeds the budget"));
        }
    }
    // Everything is still there after a final flush.
    now = engine.flush_l0(now).map_err(|e| e.to_string())?;
    for (key, value) in &model {
        let (found, done) = engine.get(now, key).map_err(|e| e.to_string())?;
        now = done;
        if found.as_ref() != Some(value) {
            return Err(format!(
                "final check: key {:?} lost",
                String::from_utf8_lossy(key)
            ));
        }
    }
    let stats = engine.stats();
    let report = format!(
        "{stats}\n  max meta reads per GET {max_reads}, flushes attached {attached} ({kept_pairs} \
         keeping pairs written since)"
    );
    if detached && (attached < 100 || kept_pairs < 50) {
        return Err(format!(
            "only {attached} prepared flushes were attached\n{report}"
        ));
    }
    let checks = [
        ("flushes", stats.flushes, 100),
        ("compactions", stats.compactions, 20),
        (
            "merges into the last level",
            stats.last_level_compactions,
            20,
        ),
        ("GC of meta blocks", stats.gc_meta_victims, 10),
        ("GC of data blocks", stats.gc_data_victims, 10),
        ("live meta pages moved by GC", stats.gc_meta_pages_moved, 1),
        (
            "live records relocated by GC",
            stats.gc_records_reinserted + stats.gc_records_rewritten,
            10,
        ),
    ];
    for (what, happened, at_least) in checks {
        if happened < at_least {
            return Err(format!(
                "{what} happened {happened} times, expected at least {at_least}\n{report}"
            ));
        }
    }
    if bounded && stats.pinned_levels == 0 {
        return Err(format!(
            "no level was pinned, so the bound says little\n{report}"
        ));
    }
    Ok(report)
}

fn seeds() -> Vec<u64> {
    match std::env::var("KVSSD_SEED") {
        Ok(seed) => vec![seed.parse().expect("KVSSD_SEED is a u64")],
        Err(_) => vec![1, 2, 3],
    }
}

fn check(preset: Preset) {
    check_with(preset, false);
}

fn check_with(preset: Preset, detached: bool) {
    for seed in seeds() {
        match run(preset, seed, detached) {
            Ok(report) => println!("{preset} seed {seed}\n{report}"),
            Err(error) => panic!(
                "{preset} failed with seed {seed}: {error}\nreplay: KVSSD_SEED={seed} cargo test -p kvssd-engine --test model {}{}",
                preset.name().replace('-', "_"),
                if detached { "_detached" } else { "" }
            ),
        }
    }
}

#[test]
fn model_pink() {
    check(Preset::Pink);
}

#[test]
fn model_pink_noopt() {
    check(Preset::PinkNoopt);
}

#[test]
fn model_pink_range() {
    check(Preset::PinkRange);
}

#[test]
fn model_lightstore() {
    check(Preset::Lightstore);
}

#[test]
fn model_pink_detached() {
    check_with(Preset::Pink, true);
}

#[test]
fn model_lightstore_detached() {
    check_with(Preset::Lightstore, true);
}

#[test]
fn model_rejects_bad_keys_and_values() {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let mut engine = LsmEngine::open(flash, EngineConfig::test_min(Preset::Pink)).expect("open");
    assert!(matches!(
        engine.put(0, b"", b"v"),
        Err(EngineError::KeyEmpty)
    ));
    assert!(matches!(
        engine.put(0, &[1u8; 256], b"v"),
        Err(EngineError::KeyTooLong { len: 256 })
    ));
    let too_big = vec![0u8; engine.value_bytes_max() + 1];
    assert!(matches!(
        engine.put(0, b"k", &too_big),
        Err(EngineError::ValueTooLarge { .. })
    ));
}
