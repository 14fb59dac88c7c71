//! `kaml`'s per-log free-block lists (`HashConfig::log_free_lists`, KAML §IV-E): a namespace
//! given one of four logs keeps every block on that log's die, collects its own blocks when that
//! die runs short (while the other dies stay free), and answers as a `BTreeMap` model does under
//! random puts, overwrites, deletes and gets. A failure prints the seed; replay with
//! `KVSSD_SEED=<seed> cargo test -p kvssd-engine --test hash_confined`.

use std::collections::BTreeMap;

use kvssd_engine::hash::{HashConfig, HashIndex, HashPreset};
use kvssd_flash::{Flash, Profile};
use kvssd_space::{Space, SpaceConfig};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const NAMESPACE: u32 = 3;
const OPERATIONS: usize = 20_000;
const KEY_SPACE: u64 = 150;

fn run(seed: u64) -> Result<String, String> {
    let profile = Profile::test_min();
    let geometry = profile.geometry;
    let flash = Flash::new(geometry, Some(profile.timing)).map_err(|e| e.to_string())?;
    let mut config = HashConfig::test_min(HashPreset::Kaml);
    assert!(
        config.log_free_lists,
        "the kaml preset keeps a free list per log"
    );
    config.namespace = NAMESPACE;
    config.key_in_slot = true;
    let space_config = SpaceConfig {
        logs: geometry.dies(),
        ..config.space.clone()
    };
    let mut space = Space::open(flash, space_config).map_err(|e| e.to_string())?;
    let mut index = HashIndex::open(&space, config).map_err(|e| e.to_string())?;
    // What the device does when it creates the namespace on log 1 alone.
    space
        .set_namespace_logs(NAMESPACE, &[1])
        .map_err(|e| e.to_string())?;
    space.set_namespace_confined(NAMESPACE, true);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut now = 0;
    let mut min_free_elsewhere = u64::MAX;
    for step in 0..OPERATIONS {
        let id = rng.next_u64() % KEY_SPACE;
        let key = id.to_be_bytes().to_vec();
        let roll = rng.next_u64() % 100;
        if roll < 60 {
            let len = (rng.next_u64() % 120) as usize;
            let value: Vec<u8> = (0..len).map(|i| (id as usize + step + i) as u8).collect();
            now = index
                .put(&mut space, now, &key, &value)
                .map_err(|e| format!("step {step}: put {id}: {e}"))?;
            model.insert(key, value);
        } else if roll < 70 {
            now = index
                .delete(&mut space, now, &key)
                .map_err(|e| format!("step {step}: delete {id}: {e}"))?;
            model.remove(&key);
        } else {
            let (found, done) = index
                .get(&mut space, now, &key)
                .map_err(|e| format!("step {step}: get {id}: {e}"))?;
            now = done;
            if found.as_ref() != model.get(&key) {
                return Err(format!("step {step}: get {id} disagrees with the model"));
            }
        }
        for block in 0..geometry.blocks_total() {
            if space.block_owner(block) == Some(NAMESPACE) && geometry.block_at(block).die != 1 {
                return Err(format!("step {step}: block {block} is off the log's die"));
            }
        }
        min_free_elsewhere =
            min_free_elsewhere.min(space.free_blocks() - space.free_blocks_for(NAMESPACE));
    }
    now = index.sync(&mut space, now).map_err(|e| e.to_string())?;
    for (key, value) in &model {
        let (found, done) = index.get(&mut space, now, key).map_err(|e| e.to_string())?;
        now = done;
        if found.as_ref() != Some(value) {
            return Err(format!("final check: key {key:?} lost"));
        }
    }
    let stats = index.stats(&space);
    let others = u64::from(geometry.blocks_per_die) * u64::from(geometry.dies() - 1);
    if min_free_elsewhere != others {
        return Err(format!(
            "the other dies lent blocks: {min_free_elsewhere} of {others} stayed free"
        ));
    }
    if stats.gc_data_victims < 20 || stats.gc_records_rewritten < 10 {
        return Err(format!("GC ran too little on the log's die\n{stats}"));
    }
    Ok(stats.to_string())
}

#[test]
fn hash_kaml_namespace_on_one_log_stays_on_its_die_and_collects_there() {
    let seeds: Vec<u64> = match std::env::var("KVSSD_SEED") {
        Ok(seed) => vec![seed.parse().expect("KVSSD_SEED is a u64")],
        Err(_) => vec![1, 2, 3],
    };
    for seed in seeds {
        match run(seed) {
            Ok(report) => println!("seed {seed}\n{report}"),
            Err(error) => panic!(
                "seed {seed}: {error}\nreplay: KVSSD_SEED={seed} cargo test -p kvssd-engine --test hash_confined"
            ),
        }
    }
}
