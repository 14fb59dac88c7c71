//! Hash and kaml namespaces beside an LSM namespace on one device: a seeded random mix of stores,
//! deletes, exists and batches across the three is checked against a model (an ordered map per
//! namespace) under every durability mode, with GC of the hash namespaces' blocks; iterators on
//! hash namespaces are refused with a typed error; a namespace delete removes its keys. The power-
//! loss dump's bound is checked against the `pink` profile.
//!
//! A failure prints its seed; replay with `KVSSD_SEED=<seed> cargo test -p kvssd-device --test
//! device_hash`.

use std::collections::BTreeMap;

use kvssd_device::durability::plp::dump_bound;
use kvssd_device::{
    BatchOp, Device, DeviceConfig, DeviceError, Durability, IterOptions, IterStart, NamespaceSpec,
    PresetKind, StoreMode, SyncPolicy,
};
use kvssd_engine::hash::HashPreset;
use kvssd_engine::Preset;
use kvssd_flash::{Flash, Profile};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn run(seed: u64, durability: Durability) -> Result<String, String> {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).map_err(|e| e.to_string())?;
    let mut config = DeviceConfig::test_min();
    config.hash.write_buffer_bytes = 700;
    config.kaml.write_buffer_bytes = 700;
    config.durability = durability;
    let device = Device::open(flash, config).map_err(|e| e.to_string())?;
    let presets: [PresetKind; 3] = [
        Preset::Pink.into(),
        HashPreset::Hash.into(),
        HashPreset::Kaml.into(),
    ];
    let mut ids = Vec::new();
    for preset in presets {
        ids.push(
            device
                .create_namespace(NamespaceSpec::new(preset))
                .map_err(|e| e.to_string())?,
        );
    }
    let mut model: Vec<Map> = vec![Map::new(); 3];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut t = 0;
    let mut refused = 0;
    let key = |rng: &mut Xoshiro256PlusPlus| format!("k{:03}", rng.next_u64() % 60).into_bytes();
    for step in 0..3000 {
        let slot = (rng.next_u64() % 3) as usize;
        let roll = rng.next_u64() % 100;
        let context = |what: String| format!("step {step} namespace slot {slot}: {what}");
        if roll < 50 {
            let k = key(&mut rng);
            let value = vec![b'a' + (step % 26) as u8; 1 + (rng.next_u64() % 120) as usize];
            match device.store(t, ids[slot], &k, &value, StoreMode::Upsert) {
                Ok(done) => {
                    t = done;
                    model[slot].insert(k, value);
                }
                Err(DeviceError::CapacityExceeded(_)) => refused += 1,
                Err(error) => return Err(context(format!("store: {error}"))),
            }
        } else if roll < 65 {
            let k = key(&mut rng);
            t = device
                .delete(t, ids[slot], &k)
                .map_err(|e| context(format!("delete: {e}")))?;
            model[slot].remove(&k);
        } else if roll < 80 {
            let mut operations = Vec::new();
            let mut staged: Vec<(usize, Vec<u8>, Option<Vec<u8>>)> = Vec::new();
            for _ in 0..1 + rng.next_u64() % 4 {
                let s = (rng.next_u64() % 3) as usize;
                let k = key(&mut rng);
                if rng.next_u64() % 4 == 0 {
                    operations.push(BatchOp::Delete {
                        namespace: ids[s],
                        key: k.clone(),
                    });
                    staged.push((s, k, None));
                } else {
                    let value = vec![b'A' + (step % 26) as u8; 1 + (rng.next_u64() % 60) as usize];
                    operations.push(BatchOp::Store {
                        namespace: ids[s],
                        key: k.clone(),
                        value: value.clone(),
                        mode: StoreMode::Upsert,
                    });
                    staged.push((s, k, Some(value)));
                }
            }
            match device.batch(t, &operations) {
                Ok(done) => {
                    t = done;
                    for (s, k, v) in staged {
                        match v {
                            Some(v) => model[s].insert(k, v),
                            None => model[s].remove(&k),
                        };
                    }
                }
                Err(DeviceError::BatchOperation { source, .. })
                    if matches!(*source, DeviceError::CapacityExceeded(_)) =>
                {
                    refused += 1
                }
                Err(error) => return Err(context(format!("batch: {error}"))),
            }
        } else {
            let k = key(&mut rng);
            let (found, done) = device
                .retrieve(t, ids[slot], &k, None)
                .map_err(|e| context(format!("retrieve: {e}")))?;
            t = done;
            if found.as_ref().map(|found| &found.value) != model[slot].get(&k) {
                return Err(context(format!(
                    "key {} is {found:?}, model {:?}",
                    String::from_utf8_lossy(&k),
                    model[slot].get(&k)
                )));
            }
            let (present, done) = device
                .exist(t, ids[slot], &[k.as_slice()])
                .map_err(|e| context(format!("exist: {e}")))?;
            t = done;
            if present != [model[slot].contains_key(&k)] {
                return Err(context("exist disagrees with the model".into()));
            }
        }
    }
    for (slot, map) in model.iter().enumerate() {
        for n in 0..60 {
            let k = format!("k{n:03}").into_bytes();
            let (found, done) = device
                .retrieve(t, ids[slot], &k, None)
                .map_err(|e| e.to_string())?;
            t = done;
            if found.map(|found| found.value).as_ref() != map.get(&k) {
                return Err(format!("final check: slot {slot} key k{n:03} differs"));
            }
        }
    }
    let infos = device.list_namespaces().map_err(|e| e.to_string())?;
    let hash_gc: u64 = infos
        .iter()
        .filter(|info| !info.spec.preset.supports_iterators())
        .map(|info| info.gc_victims)
        .sum();
    let device_gc = device.stats().map_err(|e| e.to_string())?.device_gc_victims;
    if hash_gc + device_gc == 0 {
        return Err("no GC victim was collected: the test does not reach GC".into());
    }
    if refused > 600 {
        return Err(format!("{refused} commands refused: the device filled up"));
    }
    // Iterators and scans on hash namespaces are refused with typed errors; the namespaces can be
    // deleted.
    for &id in &ids[1..] {
        match device.iter_open(t, id, IterOptions::new(IterStart::Key(Vec::new()), 0)) {
            Err(DeviceError::IteratorsUnsupported(preset)) => {
                let message = DeviceError::IteratorsUnsupported(preset).to_string();
                if message.contains('\n') || !message.contains("iterators") {
                    return Err(format!("unclear refusal: {message}"));
                }
            }
            Err(other) => return Err(format!("iterator on {id}: wrong error {other}")),
            Ok(_) => return Err(format!("iterator on hash namespace {id} was opened")),
        }
        match device.scan(t, id, b"k001", 4) {
            Err(DeviceError::ScansUnsupported(_)) => {}
            other => return Err(format!("scan on hash namespace {id} answered {other:?}")),
        }
        t = device.delete_namespace(t, id).map_err(|e| e.to_string())?;
        match device.retrieve(t, id, b"k001", None) {
            Err(DeviceError::NamespaceUnknown(_)) => {}
            other => return Err(format!("deleted namespace answered {other:?}")),
        }
    }
    Ok(format!(
        "{refused} refused, hash GC victims {hash_gc}, device GC victims {device_gc}"
    ))
}

#[test]
fn device_hash_kaml_and_pink_side_by_side_match_the_model_in_every_mode() {
    let seeds: Vec<u64> = match std::env::var("KVSSD_SEED") {
        Ok(seed) => vec![seed.parse().expect("KVSSD_SEED is a u64")],
        Err(_) => vec![7, 8],
    };
    let modes = [
        Durability::Volatile,
        Durability::WriteAheadLog(SyncPolicy::EveryCommand),
        Durability::PowerLossProtection,
    ];
    for seed in seeds {
        for mode in modes {
            match run(seed, mode) {
                Ok(summary) => println!("seed {seed} {mode:?}: {summary}"),
                Err(message) => panic!(
                    "seed {seed} {mode:?}: {message}\nreplay: KVSSD_SEED={seed} cargo test -p kvssd-device --test device_hash"
                ),
            }
        }
    }
}

/// The dump at a power cut on the `pink` profile (64 GiB, 64 dies, 8 KiB pages, 814 us programs)
/// for PinK's setting (one namespace with 0.1% of the capacity as DRAM) and for one namespace of
/// each preset: how many page programs, and how long with the dump's blocks spread over the dies.
/// A capacitor must keep the controller and the array powered that long.
#[test]
fn device_plp_dump_bound_fits_the_pink_profile() {
    let profile = Profile::pink();
    let config = DeviceConfig::new(&profile);
    let geometry = profile.geometry;
    let time = |presets: &[PresetKind]| {
        let bound = dump_bound(&config, &geometry, presets);
        let striped = bound.striped_ns(
            &profile.timing,
            u64::from(geometry.dies()),
            u64::from(geometry.pages_per_block),
        );
        println!(
            "PLP dump bound on pink with {} namespace(s): {} bytes, {} page programs, {} erase(s); \
             striped over {} dies {:.1} ms",
            presets.len(),
            bound.record_bytes,
            bound.page_programs,
            bound.erases,
            geometry.dies(),
            striped as f64 / 1e6
        );
        // The bound covers every namespace's whole DRAM budget.
        assert!(bound.record_bytes >= presets.len() as u64 * (geometry.capacity_bytes() / 1000));
        striped
    };
    let one = time(&[Preset::Pink.into()]);
    let six = time(&PresetKind::ALL);
    // PinK's setting: the dump fits in under half a second of the array's program bandwidth.
    assert!(
        one < 500_000_000,
        "the dump of one namespace takes {one} ns"
    );
    // Six namespaces at 0.1% each hold six times the DRAM: the bound grows with it.
    assert!(six > 4 * one);
}
