//! Warnings of reads to come (`Device::prefetch_gets`) change nothing the simulation sees. A hash
//! namespace on compact media (where the warnings touch memory and look at bucket pages) is driven
//! twice with the same seeded stores, deletes and retrieves over a table too large for its bucket
//! cache; before each retrieve one of the two devices is warned of its key, of others stored and
//! of one never stored. Both answer every command with the same value at the same simulated time,
//! and end with the same flash counters and namespace figures. A hash namespace says it takes the
//! warnings and a tree's says it has no use for them. A warning for a namespace that does not
//! exist is refused with a typed error.
//!
//! A failure prints its seed; replay with `KVSSD_SEED=<seed> cargo test -p kvssd-device --test
//! prefetch_hints`.

use kvssd_device::{
    Device, DeviceConfig, DeviceError, NamespaceId, NamespaceSpec, PresetKind, StoreMode,
};
use kvssd_engine::hash::HashPreset;
use kvssd_engine::Preset;
use kvssd_flash::{Flash, MediaKind, Profile};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Keys the commands use.
const KEYS: u64 = 400;

fn key(number: u64) -> Vec<u8> {
    format!("key{number:05}").into_bytes()
}

/// A value compact media take: a 16-byte description (key number, version) repeated to `len`.
fn value(number: u64, version: u64, len: usize) -> Vec<u8> {
    let mut description = number.to_le_bytes().to_vec();
    description.extend_from_slice(&version.to_le_bytes());
    description.iter().cycle().take(len).copied().collect()
}

fn open(preset: PresetKind) -> (Device, NamespaceId) {
    let profile = Profile::test_min();
    let flash =
        Flash::new_on(&MediaKind::Compact, profile.geometry, Some(profile.timing)).expect("flash");
    let device = Device::open(flash, DeviceConfig::test_min()).expect("device");
    let namespace = device
        .create_namespace(NamespaceSpec::new(preset))
        .expect("namespace");
    (device, namespace)
}

/// Every command's answer and time, then the device's figures, as text.
fn drive(seed: u64, preset: PresetKind, warned: bool) -> Vec<String> {
    let (device, namespace) = open(preset);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut trace = Vec::new();
    let mut t = 0;
    for step in 0..3000u64 {
        let number = rng.next_u64() % KEYS;
        let roll = rng.next_u64() % 100;
        if roll < 45 {
            let len = 16 + (rng.next_u64() % 100) as usize;
            let value = value(number, step, len);
            let result = device.store(t, namespace, &key(number), &value, StoreMode::Upsert);
            if let Ok(done) = result {
                t = done;
            }
            trace.push(format!("store {number}: {result:?}"));
        } else if roll < 55 {
            let result = device.delete(t, namespace, &key(number));
            if let Ok(done) = result {
                t = done;
            }
            trace.push(format!("delete {number}: {result:?}"));
        } else {
            if warned {
                let others: Vec<Vec<u8>> = (0..3)
                    .map(|_| key(rng.next_u64() % KEYS))
                    .chain([key(KEYS + step)])
                    .collect();
                let mut keys: Vec<&[u8]> = others.iter().map(Vec::as_slice).collect();
                let own = key(number);
                keys.push(&own);
                let taken = device
                    .prefetch_gets(namespace, &keys)
                    .expect("a warning for a namespace that exists is answered");
                assert_eq!(taken, preset == HashPreset::Hash.into(), "{preset:?}");
            } else {
                // The same draws, so that both devices see the same commands.
                for _ in 0..3 {
                    rng.next_u64();
                }
            }
            let result = device.retrieve(t, namespace, &key(number), None);
            if let Ok((_, done)) = &result {
                t = *done;
            }
            let answer = result.map(|(found, done)| (found.map(|found| found.value), done));
            trace.push(format!("retrieve {number}: {answer:?}"));
        }
    }
    let stats = device.stats().expect("stats");
    trace.push(format!("flash counters: {:?}", stats.flash));
    let info = device
        .list_namespaces()
        .expect("namespaces")
        .into_iter()
        .find(|info| info.id == namespace)
        .expect("the namespace");
    trace.push(format!("namespace counters: {:?}", info.counters));
    trace.push(format!("namespace DRAM: {:?}", info.dram_parts));
    trace
}

fn seed() -> u64 {
    std::env::var("KVSSD_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(7)
}

#[test]
fn warnings_of_reads_to_come_change_nothing_the_simulation_sees() {
    let seed = seed();
    let presets: [PresetKind; 2] = [HashPreset::Hash.into(), Preset::Pink.into()];
    for preset in presets {
        let plain = drive(seed, preset, false);
        let warned = drive(seed, preset, true);
        assert_eq!(plain.len(), warned.len());
        let found = plain
            .iter()
            .filter(|line| line.starts_with("retrieve") && line.contains("Some"))
            .count();
        assert!(found > 500, "seed {seed}: {found} retrieves found a value");
        for (step, (a, b)) in plain.iter().zip(&warned).enumerate() {
            assert_eq!(a, b, "seed {seed}, {preset:?}, step {step}");
        }
    }
}

#[test]
fn a_warning_for_a_namespace_that_does_not_exist_is_refused() {
    let (device, namespace) = open(HashPreset::Hash.into());
    let missing = NamespaceId(namespace.0 + 1);
    let error = device
        .prefetch_gets(missing, &[b"key00001".as_slice()])
        .expect_err("no such namespace");
    assert!(
        matches!(error, DeviceError::NamespaceUnknown(id) if id == missing),
        "{error}"
    );
}
