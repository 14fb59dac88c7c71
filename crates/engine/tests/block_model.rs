//! Model-based test of the `block` FTL against a `BTreeMap` of logical blocks, on the `test_min`
//! geometry: whole-block writes, writes of part of a block (read-modify-write), trims, reads, and
//! batches staged and settled, through the engine contract.
//!
//! Each run is driven by one seed. Every read must equal the model's block, the state saved for a
//! checkpoint must restore to an FTL that reads the same, the space layer must count exactly the
//! mapped blocks' shares of their pages valid, and the run must have applied its write
//! buffer, read blocks for read-modify-writes and collected GC victims with live blocks many times.
//! A failure prints the seed and how to replay it:
//! `KVSSD_SEED=<seed> cargo test -p kvssd-engine --test block_model`.

use std::collections::BTreeMap;

use kvssd_engine::block::{lba_key, lba_offset_key, BlockConfig, BlockIndex};
use kvssd_engine::{Engine, EngineError};
use kvssd_flash::{Flash, Profile};
use kvssd_space::Space;
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const OPERATIONS: usize = 20_000;
/// Logical blocks the workload touches (of the 1024 the configuration has).
const BLOCKS_USED: u64 = 900;

fn counter(engine: &BlockIndex, space: &Space, name: &str) -> u64 {
    engine
        .report(space)
        .counters
        .iter()
        .find(|(counter, _)| *counter == name)
        .map_or(0, |(_, value)| *value)
}

fn check_all(
    engine: &mut BlockIndex,
    space: &mut Space,
    now: &mut u64,
    model: &BTreeMap<u64, Vec<u8>>,
    what: &str,
) -> Result<(), String> {
    for lba in 0..BLOCKS_USED {
        let (found, done) = engine
            .get(space, *now, &lba_key(lba))
            .map_err(|e| format!("{what}: get {lba}: {e}"))?;
        *now = done;
        if found.as_ref() != model.get(&lba) {
            return Err(format!(
                "{what}: block {lba} reads {:?}, the model has {:?}",
                found.map(|block| block[..8].to_vec()),
                model.get(&lba).map(|block| block[..8].to_vec())
            ));
        }
    }
    Ok(())
}

fn run(seed: u64) -> Result<String, String> {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).map_err(|e| e.to_string())?;
    let config = BlockConfig::test_min();
    let block = config.logical_block_bytes as usize;
    let mut space = Space::open(flash, config.space.clone()).map_err(|e| e.to_string())?;
    let mut engine = BlockIndex::open(&space, config.clone()).map_err(|e| e.to_string())?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut now = 0u64;
    let fill = |rng: &mut Xoshiro256PlusPlus, len: usize| -> Vec<u8> {
        (0..len).map(|_| rng.next_u64() as u8).collect()
    };
    for step in 0..OPERATIONS {
        let lba = rng.next_u64() % BLOCKS_USED;
        let roll = rng.next_u64() % 100;
        let context = |what: &str| format!("step {step}, {what} of block {lba}");
        if roll < 30 {
            let value = fill(&mut rng, block);
            now = engine
                .put(&mut space, now, &lba_key(lba), &value)
                .map_err(|e| format!("{}: {e}", context("write")))?;
            model.insert(lba, value);
        } else if roll < 55 {
            let offset = (rng.next_u64() % block as u64) as usize;
            let len = 1 + (rng.next_u64() % (block - offset) as u64) as usize;
            let value = fill(&mut rng, len);
            now = engine
                .put(&mut space, now, &lba_offset_key(lba, offset as u32), &value)
                .map_err(|e| format!("{}: {e}", context("partial write")))?;
            let old = model.entry(lba).or_insert_with(|| vec![0; block]);
            old[offset..offset + len].copy_from_slice(&value);
        } else if roll < 62 {
            now = engine
                .delete(&mut space, now, &lba_key(lba))
                .map_err(|e| format!("{}: {e}", context("trim")))?;
            model.remove(&lba);
        } else if roll < 70 {
            // A batch: stores (whole and partial) and trims staged, then settled at once.
            let mut staged = 0;
            let mut ops = Vec::new();
            for _ in 0..1 + rng.next_u64() % 4 {
                let lba = rng.next_u64() % BLOCKS_USED;
                let kind = rng.next_u64() % 3;
                let (key, value): (Vec<u8>, Option<Vec<u8>>) = match kind {
                    0 => (lba_key(lba).to_vec(), Some(fill(&mut rng, block))),
                    1 => {
                        let offset = (rng.next_u64() % block as u64) as usize;
                        let len = 1 + (rng.next_u64() % (block - offset) as u64) as usize;
                        (
                            lba_offset_key(lba, offset as u32).to_vec(),
                            Some(fill(&mut rng, len)),
                        )
                    }
                    _ => (lba_key(lba).to_vec(), None),
                };
                if let Some(value) = &value {
                    engine
                        .admit_put(&space, &key, value.len(), staged)
                        .map_err(|e| format!("{}: {e}", context("batch admission")))?;
                }
                staged += engine.staged_bytes(&key, value.as_deref());
                ops.push((lba, key, value));
            }
            now = engine
                .prepare_stage(&mut space, now, staged)
                .map_err(|e| format!("{}: {e}", context("batch preparation")))?;
            for (lba, key, value) in &ops {
                engine.stage(key, value.as_deref());
                match value {
                    None => {
                        model.remove(lba);
                    }
                    Some(value) => {
                        let offset = if key.len() == 12 {
                            u32::from_be_bytes([key[8], key[9], key[10], key[11]]) as usize
                        } else {
                            0
                        };
                        let old = model.entry(*lba).or_insert_with(|| vec![0; block]);
                        old[offset..offset + value.len()].copy_from_slice(value);
                    }
                }
            }
            now = engine
                .settle(&mut space, now)
                .map_err(|e| format!("{}: {e}", context("batch settle")))?;
        } else {
            let (found, done) = engine
                .get(&mut space, now, &lba_key(lba))
                .map_err(|e| format!("{}: {e}", context("read")))?;
            now = done;
            if found.as_ref() != model.get(&lba) {
                return Err(format!("{}: differs from the model", context("read")));
            }
            let (present, _) = engine
                .contains(&mut space, now, &lba_key(lba))
                .map_err(|e| format!("{}: {e}", context("contains")))?;
            if present != model.contains_key(&lba) {
                return Err(format!("{}: presence differs", context("contains")));
            }
        }
        if step % 5_000 == 4_999 {
            // What a checkpoint saves restores to an FTL that reads the same.
            let saved = engine.durable_state();
            let mut restored = BlockIndex::restore(&space, config.clone(), &saved)
                .map_err(|e| format!("step {step}: restore: {e}"))?;
            check_all(&mut restored, &mut space, &mut now, &model, "restored")?;
        }
    }
    now = engine
        .flush(&mut space, now)
        .map_err(|e| format!("final flush: {e}"))?;
    check_all(
        &mut engine,
        &mut space,
        &mut now,
        &model,
        "after the last flush",
    )?;
    let report = engine.report(&space);
    if counter(&engine, &space, "mapped_blocks") != model.len() as u64 {
        return Err(format!(
            "the map holds {} blocks, the model {}",
            counter(&engine, &space, "mapped_blocks"),
            model.len()
        ));
    }
    // The space layer counts each mapped block's share of its page valid, and nothing else.
    let share = u64::from(space.geometry().page_bytes)
        / u64::from(space.geometry().page_bytes / config.logical_block_bytes);
    if space.valid_bytes() != model.len() as u64 * share {
        return Err(format!(
            "the space counts {} valid bytes, {} blocks of {share} B share are mapped",
            space.valid_bytes(),
            model.len()
        ));
    }
    let checks = [
        ("write-buffer applications", report.flushes, 100),
        (
            "read-modify-write reads of flash",
            counter(&engine, &space, "read_modify_write_reads"),
            1_000,
        ),
        ("GC victims", report.gc_victims, 20),
        (
            "live blocks rewritten by GC",
            counter(&engine, &space, "gc_records_rewritten"),
            20,
        ),
    ];
    for (what, happened, at_least) in checks {
        if happened < at_least {
            return Err(format!(
                "{what} happened {happened} times, expected at least {at_least}\n{}",
                report.shape
            ));
        }
    }
    Ok(report.shape)
}

fn seeds() -> Vec<u64> {
    match std::env::var("KVSSD_SEED") {
        Ok(seed) => vec![seed.parse().expect("KVSSD_SEED is a u64")],
        Err(_) => vec![1, 2, 3],
    }
}

#[test]
fn block_model_against_a_map_of_logical_blocks() {
    for seed in seeds() {
        match run(seed) {
            Ok(report) => println!("block seed {seed}: {report}"),
            Err(error) => panic!(
                "block failed with seed {seed}: {error}\nreplay: KVSSD_SEED={seed} cargo test -p kvssd-engine --test block_model"
            ),
        }
    }
}

/// Keys that are not logical block numbers, blocks past the end, writes past the end of a block
/// and reads of part of a block are refusals that change nothing.
#[test]
fn block_refuses_what_is_not_a_logical_block() {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let config = BlockConfig::test_min();
    let block = config.logical_block_bytes as usize;
    let mut space = Space::open(flash, config.space.clone()).expect("space");
    let mut engine = BlockIndex::open(&space, config.clone()).expect("open");
    let value = vec![1u8; block];
    assert!(matches!(
        engine.put(&mut space, 0, b"key", &value),
        Err(EngineError::Unsupported { .. })
    ));
    assert!(matches!(
        engine.put(&mut space, 0, &lba_key(config.logical_blocks), &value),
        Err(EngineError::Unsupported { .. })
    ));
    assert!(matches!(
        engine.put(&mut space, 0, &lba_key(0), &vec![1u8; block + 1]),
        Err(EngineError::ValueTooLarge { .. })
    ));
    assert!(matches!(
        engine.put(&mut space, 0, &lba_offset_key(0, 1), &value),
        Err(EngineError::ValueTooLarge { .. })
    ));
    assert!(matches!(
        engine.get(&mut space, 0, &lba_offset_key(0, 0)),
        Err(EngineError::Unsupported { .. })
    ));
    assert!(matches!(
        engine.get(&mut space, 0, &lba_key(0)),
        Ok((None, _))
    ));
    // A write of part of a never-written block reads nothing and zero-fills the rest.
    let done = engine
        .put(&mut space, 0, &lba_offset_key(5, 4), b"abc")
        .expect("partial write");
    assert!(
        done < Profile::test_min().timing.read_ns,
        "a write of part of an unmapped block read flash: done at {done} ns"
    );
    let (found, _) = engine.get(&mut space, done, &lba_key(5)).expect("get");
    let mut expected = vec![0u8; block];
    expected[4..7].copy_from_slice(b"abc");
    assert_eq!(found, Some(expected));
}
