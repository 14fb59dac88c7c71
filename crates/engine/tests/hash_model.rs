//! Model-based test of the hash engines: random puts, gets and deletes (no scans: a hash index
//! refuses them) against a `BTreeMap`, for `hash` and `kaml` on the `test_min` geometry.
//!
//! Each run is driven by one seed. The engine's answers must equal the model's after every
//! operation, and DRAM must stay within its budget. At the end the run must have exercised
//! write-buffer flushes, GC of data blocks (and for `hash`: cache evictions, bucket write-backs and
//! GC of bucket-page blocks; for `kaml`: table resizes) many times, and a final sync must keep every
//! pair; for `kaml` the space layer must then count exactly the live records valid. `kaml` also
//! runs with its 64-bit keys in the slots (`key_in_slot`). A failure prints the seed and how to replay it:
//! `KVSSD_SEED=<seed> cargo test -p kvssd-engine --test hash_model`.

use std::collections::BTreeMap;

use kvssd_engine::hash::{HashConfig, HashEngine, HashPreset};
use kvssd_flash::{Flash, Profile};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

mod common;
use common::{key_of, value_of};

const OPERATIONS: usize = 30_000;
const KEY_SPACE: u64 = 500;

fn run(preset: HashPreset, seed: u64) -> Result<String, String> {
    run_with(preset, seed, false)
}

/// With `key_in_slot` (`kaml` only) keys are 8 bytes: the id, big-endian.
fn run_with(preset: HashPreset, seed: u64, key_in_slot: bool) -> Result<String, String> {
    let key_of = |id: u64| {
        if key_in_slot {
            id.to_be_bytes().to_vec()
        } else {
            key_of(id)
        }
    };
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).map_err(|e| e.to_string())?;
    let mut config = HashConfig::test_min(preset);
    config.key_in_slot = key_in_slot;
    // Collect early, so bucket-page victims still hold live pages to move.
    config.gc_threshold_blocks = 24;
    let mut engine = HashEngine::open(flash, config).map_err(|e| e.to_string())?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut now = 0u64;
    let value_max = engine.value_bytes_max().min(1500);
    for step in 0..OPERATIONS {
        let id = rng.next_u64() % KEY_SPACE;
        let key = key_of(id);
        let roll = rng.next_u64() % 100;
        let context = |what: &str| {
            format!(
                "step {step}, {what} key {:?}",
                String::from_utf8_lossy(&key)
            )
        };
        if roll < 50 {
            let value = value_of(&mut rng, id, step as u64, value_max);
            now = engine
                .put(now, &key, &value)
                .map_err(|e| format!("{}: {e}", context("put")))?;
            model.insert(key.clone(), value);
        } else if roll < 60 {
            now = engine
                .delete(now, &key)
                .map_err(|e| format!("{}: {e}", context("delete")))?;
            model.remove(&key);
        } else {
            // Some GETs go to keys never stored (ids past the key space).
            let key = if roll >= 90 {
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
            if preset == HashPreset::Kaml && engine.last_get_index_reads() != 0 {
                return Err(format!("{}: kaml read a bucket page", context("get")));
            }
        }
        let dram = engine.dram_usage();
        if dram.total() > dram.budget {
            return Err(format!("step {step}: DRAM {dram:?} exceeds the budget"));
        }
    }
    // Everything is still there after a sync (buffer applied, dirty buckets written back).
    now = engine.sync(now).map_err(|e| e.to_string())?;
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
    if preset == HashPreset::Kaml {
        // Every live record, and nothing else, is counted valid (kaml keeps no pages of its own):
        // replaced and deleted records were reported dead with their right lengths.
        let live: u64 = model
            .iter()
            .map(|(key, value)| engine.space().record_footprint(key.len(), value.len()))
            .sum();
        if engine.space().valid_bytes() != live {
            return Err(format!(
                "the space counts {} valid bytes, the live records take {live}",
                engine.space().valid_bytes()
            ));
        }
    }
    let stats = engine.stats();
    if stats.entries != model.len() as u64 {
        return Err(format!(
            "the table counts {} keys, the model {}",
            stats.entries,
            model.len()
        ));
    }
    let report = stats.to_string();
    let mut checks = vec![
        ("write-buffer flushes", stats.flushes, 100),
        ("GC of data blocks", stats.gc_data_victims, 10),
        (
            "live records rewritten by GC",
            stats.gc_records_rewritten,
            10,
        ),
    ];
    match preset {
        HashPreset::Hash => checks.extend([
            ("cache evictions", stats.cache_evictions, 100),
            ("bucket write-backs", stats.bucket_write_backs, 100),
            ("bucket pages read", stats.bucket_page_reads, 100),
            ("GC of bucket-page blocks", stats.gc_meta_victims, 10),
            (
                "live bucket pages moved by GC",
                stats.gc_bucket_pages_moved,
                1,
            ),
        ]),
        HashPreset::Kaml => checks.push(("table resizes", stats.resizes, 3)),
    }
    for (what, happened, at_least) in checks {
        if happened < at_least {
            return Err(format!(
                "{what} happened {happened} times, expected at least {at_least}\n{report}"
            ));
        }
    }
    Ok(report)
}

fn seeds() -> Vec<u64> {
    match std::env::var("KVSSD_SEED") {
        Ok(seed) => vec![seed.parse().expect("KVSSD_SEED is a u64")],
        Err(_) => vec![1, 2, 3],
    }
}

fn check(preset: HashPreset) {
    for seed in seeds() {
        match run(preset, seed) {
            Ok(report) => println!("{preset} seed {seed}\n{report}"),
            Err(error) => panic!(
                "{preset} failed with seed {seed}: {error}\nreplay: KVSSD_SEED={seed} cargo test -p kvssd-engine --test hash_model {}",
                preset.name()
            ),
        }
    }
}

#[test]
fn hash_model_hash() {
    check(HashPreset::Hash);
}

#[test]
fn hash_model_kaml() {
    check(HashPreset::Kaml);
}

/// `kaml` with its 64-bit keys in the slots: puts find replaced records' lengths in DRAM, so GC
/// relocation and the valid-byte accounting must keep those lengths right.
#[test]
fn hash_model_kaml_key_in_slot() {
    for seed in seeds() {
        match run_with(HashPreset::Kaml, seed, true) {
            Ok(report) => println!("kaml key_in_slot seed {seed}\n{report}"),
            Err(error) => panic!(
                "kaml key_in_slot failed with seed {seed}: {error}\nreplay: KVSSD_SEED={seed} cargo test -p kvssd-engine --test hash_model kaml_key_in_slot"
            ),
        }
    }
}
