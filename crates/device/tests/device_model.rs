//! Model-based test of the device: random stores (all three modes), retrieves (whole and ranged),
//! deletes, exists, scans, batches across namespaces, namespace creation and deletion, and iterators
//! held open across many writes, against a model (one ordered map per namespace) on `test_min`.
//!
//! Several namespaces of different presets share the tiny flash, so flushes, compactions and GC
//! (of every namespace, and device-wide) happen constantly; namespaces deleted are recreated with
//! the presets not used yet, and the run fails unless every preset that serves iterators had one
//! (the hash presets have their own model test, `device_hash.rs`). Every iterator's output is checked
//! against a copy of the model taken when the iterator opened; at the end the run must have seen
//! flushes, compactions and GC victims while iterators were open. A refused store must be refused
//! for a reason the model allows (capacity) and must change nothing.
//!
//! One seed drives the run; a failure prints it and how to replay it:
//! `KVSSD_SEED=<seed> cargo test -p kvssd-device --test device_model`.

use std::collections::{BTreeMap, BTreeSet};

use kvssd_device::{
    BatchOp, ByteRange, Device, DeviceConfig, DeviceError, IterOptions, IterStart, IteratorId,
    NamespaceId, NamespaceSpec, PresetKind, StoreMode,
};
use kvssd_engine::Preset;
use kvssd_flash::{ControllerModel, Flash, Profile};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const OPERATIONS: usize = 20_000;
const KEY_SPACE: u64 = 200;
const ITERATORS_MAX: usize = 6;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;
/// Pairs an iterator should return, and whether it should then be at its end.
type Expected = (Vec<(Vec<u8>, Vec<u8>)>, bool);

fn key_of(id: u64) -> Vec<u8> {
    let mut key = format!("k{:02}/{id:04}", id % 7).into_bytes();
    if id % 53 == 3 {
        key.resize(255, b'z');
    }
    key
}

fn value_of(rng: &mut Xoshiro256PlusPlus, step: usize, max: usize) -> Vec<u8> {
    let roll = rng.next_u64() % 100;
    let len = if roll < 2 {
        600 + (rng.next_u64() % (max as u64 - 600)) as usize
    } else if roll < 6 {
        0
    } else {
        (rng.next_u64() % 80) as usize
    };
    (0..len).map(|i| (step * 7 + i) as u8).collect()
}

struct ModelIterator {
    id: IteratorId,
    namespace: u32,
    /// The namespace as it was at open.
    snapshot: Map,
    prefix: Vec<u8>,
    /// Entries strictly after this key (or from `from`, inclusive, before the first next).
    after: Option<Vec<u8>>,
    from: Vec<u8>,
    keys_only: bool,
    closes_at: usize,
    activity_at_open: [u64; 3],
}

impl ModelIterator {
    fn expected(&mut self, budget: usize) -> Expected {
        let lower = if self.from < self.prefix {
            self.prefix.clone()
        } else {
            self.from.clone()
        };
        let candidates = self
            .snapshot
            .range(lower..)
            .filter(|(key, _)| self.after.as_ref().is_none_or(|after| *key > after))
            .take_while(|(key, _)| key.starts_with(&self.prefix));
        let mut out = Vec::new();
        let mut bytes = 0usize;
        let mut remaining = 0;
        for (key, value) in candidates {
            let size = key.len() + if self.keys_only { 0 } else { value.len() };
            let stop = (!out.is_empty() && bytes + size > budget) || bytes >= budget;
            if stop {
                remaining += 1;
                break;
            }
            bytes += size;
            out.push((key.clone(), value.clone()));
        }
        if let Some((key, _)) = out.last() {
            self.after = Some(key.clone());
        }
        (out, remaining == 0)
    }
}

fn activity(device: &Device) -> [u64; 3] {
    let mut totals = [0u64; 3];
    for info in device.list_namespaces().unwrap_or_default() {
        totals[0] += info.flushes;
        totals[1] += info.compactions;
        totals[2] += info.gc_victims;
    }
    totals
}

fn run(seed: u64, controller: ControllerModel) -> Result<String, String> {
    let mut profile = Profile::test_min();
    profile.timing.controller = controller;
    let flash = Flash::new(profile.geometry, Some(profile.timing)).map_err(|e| e.to_string())?;
    let mut config = DeviceConfig::test_min();
    config.engine.dram_budget_bytes = 24 * 1024;
    config.gc_threshold_blocks = 30;
    config.engine.gc_threshold_blocks = 28;
    config.iterators_open_max = ITERATORS_MAX;
    let device = Device::open(flash, config).map_err(|e| e.to_string())?;
    let value_max = device
        .value_bytes_max()
        .map_err(|e| e.to_string())?
        .min(1200);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    // Every preset that serves iterators (the hash presets have their own model test).
    let presets: Vec<PresetKind> = PresetKind::ALL
        .into_iter()
        .filter(|preset| preset.supports_iterators())
        .collect();
    let mut used: BTreeSet<&str> = BTreeSet::new();
    let mut model: BTreeMap<u32, Map> = BTreeMap::new();
    let specs = [
        NamespaceSpec {
            logs: Some(vec![0]),
            ..NamespaceSpec::new(Preset::Pink)
        },
        NamespaceSpec {
            logs: Some(vec![1]),
            ..NamespaceSpec::new(Preset::Lightstore)
        },
        NamespaceSpec::new(Preset::PinkRange),
    ];
    for spec in specs {
        used.insert(spec.preset.name());
        let id = device.create_namespace(spec).map_err(|e| e.to_string())?;
        model.insert(id.0, Map::new());
    }
    let mut iterators: Vec<ModelIterator> = Vec::new();
    let mut now = 0u64;
    let mut refused = 0usize;
    let mut stores = 0usize;
    let mut namespaces_deleted = 0;
    let mut while_open = [0u64; 3];
    let mut iterator_entries = 0usize;
    for step in 0..OPERATIONS {
        let context = |what: &str| format!("step {step}: {what}");
        let ids: Vec<u32> = model.keys().copied().collect();
        let namespace = ids[(rng.next_u64() % ids.len() as u64) as usize];
        let ns = NamespaceId(namespace);
        let key = key_of(rng.next_u64() % KEY_SPACE);
        let roll = rng.next_u64() % 1000;
        // Close iterators whose time has come, checking what each saw happen.
        let mut index = 0;
        while index < iterators.len() {
            if iterators[index].closes_at <= step {
                let iterator = iterators.swap_remove(index);
                let now_activity = activity(&device);
                for (slot, total) in while_open.iter_mut().enumerate() {
                    *total += now_activity[slot].saturating_sub(iterator.activity_at_open[slot]);
                }
                device
                    .iter_close(iterator.id)
                    .map_err(|e| context(&format!("close: {e}")))?;
            } else {
                index += 1;
            }
        }
        if roll < 400 {
            let value = value_of(&mut rng, step, value_max);
            let mode = match rng.next_u64() % 10 {
                0 => StoreMode::UpdateOnly,
                1 => StoreMode::InsertOnly,
                _ => StoreMode::Upsert,
            };
            let present = model[&namespace].contains_key(&key);
            stores += 1;
            match device.store(now, ns, &key, &value, mode) {
                Ok(done) => {
                    now = done;
                    if (mode == StoreMode::UpdateOnly && !present)
                        || (mode == StoreMode::InsertOnly && present)
                    {
                        return Err(context("a conditional store succeeded against the model"));
                    }
                    model.entry(namespace).or_default().insert(key, value);
                }
                Err(DeviceError::KeyMissing) if mode == StoreMode::UpdateOnly && !present => {}
                Err(DeviceError::KeyExists) if mode == StoreMode::InsertOnly && present => {}
                Err(DeviceError::CapacityExceeded(_)) => refused += 1,
                Err(error) => return Err(context(&format!("store: {error}"))),
            }
        } else if roll < 520 {
            match device.delete(now, ns, &key) {
                Ok(done) => {
                    now = done;
                    model.entry(namespace).or_default().remove(&key);
                }
                // Iterators held open keep GC from the blocks they can reach; a full device may
                // refuse even a delete until they close. Nothing changed.
                Err(DeviceError::CapacityExceeded(_)) => refused += 1,
                Err(error) => return Err(context(&format!("delete: {error}"))),
            }
        } else if roll < 760 {
            let expected = model[&namespace].get(&key).cloned();
            let range = match (&expected, rng.next_u64() % 3) {
                (Some(value), 0) if !value.is_empty() => {
                    let offset = (rng.next_u64() % value.len() as u64) as usize;
                    let len = (rng.next_u64() % (value.len() - offset) as u64 + 1) as usize;
                    Some(ByteRange { offset, len })
                }
                _ => None,
            };
            let (found, done) = device
                .retrieve(now, ns, &key, range)
                .map_err(|e| context(&format!("retrieve: {e}")))?;
            now = done;
            let want = expected.as_ref().map(|value| match range {
                Some(range) => value[range.offset..range.offset + range.len].to_vec(),
                None => value.clone(),
            });
            if found.as_ref().map(|found| &found.value) != want.as_ref()
                || found.as_ref().map(|found| found.value_len) != expected.as_ref().map(Vec::len)
            {
                return Err(context(&format!(
                    "retrieve {:?}: device {:?} bytes, model {:?}",
                    String::from_utf8_lossy(&key),
                    found.map(|found| found.value_len),
                    expected.map(|value| value.len())
                )));
            }
        } else if roll < 800 {
            let keys: Vec<Vec<u8>> = (0..4).map(|_| key_of(rng.next_u64() % KEY_SPACE)).collect();
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let (answers, done) = device
                .exist(now, ns, &refs)
                .map_err(|e| context(&format!("exist: {e}")))?;
            now = done;
            let want: Vec<bool> = keys
                .iter()
                .map(|key| model[&namespace].contains_key(key))
                .collect();
            if answers != want {
                return Err(context(&format!(
                    "exist: device {answers:?}, model {want:?}"
                )));
            }
            // A scan from the same key: the model's pairs from there on, in order.
            let count = (rng.next_u64() % 12) as usize;
            let (pairs, done) = device
                .scan(now, ns, &keys[0], count)
                .map_err(|e| context(&format!("scan: {e}")))?;
            now = done;
            let want: Vec<(Vec<u8>, Vec<u8>)> = model[&namespace]
                .range(keys[0].clone()..)
                .take(count)
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            if pairs != want {
                return Err(context(&format!(
                    "scan of {count}: device {} pairs, model {}",
                    pairs.len(),
                    want.len()
                )));
            }
        } else if roll < 900 {
            // A batch across namespaces; conditional stores make some batches fail as a whole.
            let mut operations = Vec::new();
            let mut staged = model.clone();
            let mut valid = true;
            for _ in 0..1 + rng.next_u64() % 5 {
                let namespace = ids[(rng.next_u64() % ids.len() as u64) as usize];
                let key = key_of(rng.next_u64() % KEY_SPACE);
                let map = staged.entry(namespace).or_default();
                if rng.next_u64() % 4 == 0 {
                    map.remove(&key);
                    operations.push(BatchOp::Delete {
                        namespace: NamespaceId(namespace),
                        key,
                    });
                } else {
                    let mode = match rng.next_u64() % 8 {
                        0 => StoreMode::UpdateOnly,
                        1 => StoreMode::InsertOnly,
                        _ => StoreMode::Upsert,
                    };
                    let present = map.contains_key(&key);
                    valid &= !((mode == StoreMode::UpdateOnly && !present)
                        || (mode == StoreMode::InsertOnly && present));
                    let value = value_of(&mut rng, step, value_max.min(700));
                    map.insert(key.clone(), value.clone());
                    operations.push(BatchOp::Store {
                        namespace: NamespaceId(namespace),
                        key,
                        value,
                        mode,
                    });
                }
            }
            match device.batch(now, &operations) {
                Ok(done) => {
                    if !valid {
                        return Err(context("a batch with a failing condition was applied"));
                    }
                    now = done;
                    model = staged;
                }
                Err(DeviceError::BatchOperation { source, .. })
                    if !valid
                        && matches!(*source, DeviceError::KeyMissing | DeviceError::KeyExists) => {}
                Err(DeviceError::BatchOperation { source, .. })
                    if matches!(*source, DeviceError::CapacityExceeded(_)) =>
                {
                    refused += 1
                }
                Err(DeviceError::CapacityExceeded(_)) => refused += 1,
                Err(error) => return Err(context(&format!("batch: {error}"))),
            }
        } else if roll < 960 {
            // Iterators: open, or read from an open one.
            if iterators.len() < ITERATORS_MAX && rng.next_u64() % 2 == 0 {
                let (start, prefix, from) = if rng.next_u64() % 3 == 0 {
                    let prefix = format!("k{:02}/", rng.next_u64() % 7).into_bytes();
                    (IterStart::Prefix(prefix.clone()), prefix.clone(), prefix)
                } else {
                    let from = key[..key.len().min(6)].to_vec();
                    (IterStart::Key(from.clone()), Vec::new(), from)
                };
                let keys_only = rng.next_u64() % 4 == 0;
                let options = IterOptions {
                    start,
                    keys_only,
                    prefetch_degree: (rng.next_u64() % 9) as usize,
                    index_prefetch: rng.next_u64() % 2 == 0,
                };
                let (id, done) = device
                    .iter_open(now, ns, options)
                    .map_err(|e| context(&format!("iter_open: {e}")))?;
                now = done;
                iterators.push(ModelIterator {
                    id,
                    namespace,
                    snapshot: model[&namespace].clone(),
                    prefix,
                    after: None,
                    from,
                    keys_only,
                    closes_at: step + 50 + (rng.next_u64() % 1500) as usize,
                    activity_at_open: activity(&device),
                });
            } else if !iterators.is_empty() {
                let slot = (rng.next_u64() % iterators.len() as u64) as usize;
                let iterator = &mut iterators[slot];
                if rng.next_u64() % 10 == 0 {
                    let seek = key_of(rng.next_u64() % KEY_SPACE);
                    now = device
                        .iter_seek(now, iterator.id, &seek)
                        .map_err(|e| context(&format!("iter_seek: {e}")))?;
                    iterator.from = seek;
                    iterator.after = None;
                }
                let budget = 1 + (rng.next_u64() % 600) as usize;
                let (batch, done) = device
                    .iter_next(now, iterator.id, budget)
                    .map_err(|e| context(&format!("iter_next: {e}")))?;
                now = done;
                let (want, end) = iterator.expected(budget);
                let got: Vec<(Vec<u8>, Option<Vec<u8>>, usize)> = batch
                    .entries
                    .iter()
                    .map(|entry| (entry.key.clone(), entry.value.clone(), entry.value_len))
                    .collect();
                let keys_only = iterator.keys_only;
                let want: Vec<(Vec<u8>, Option<Vec<u8>>, usize)> = want
                    .into_iter()
                    .map(|(key, value)| {
                        let len = value.len();
                        (key, (!keys_only).then_some(value), len)
                    })
                    .collect();
                if got != want || batch.end != end {
                    return Err(context(&format!(
                        "iterator {} on namespace {}: device {:?} (end {}), snapshot model {:?} (end {end})",
                        iterator.id,
                        iterator.namespace,
                        got.iter().map(|(k, _, l)| (String::from_utf8_lossy(k).into_owned(), *l)).collect::<Vec<_>>(),
                        batch.end,
                        want.iter().map(|(k, _, l)| (String::from_utf8_lossy(k).into_owned(), *l)).collect::<Vec<_>>(),
                    )));
                }
                iterator_entries += got.len();
            }
        } else if roll < 961 && model.len() > 1 {
            // Delete a namespace (its iterators die with it) and create another.
            now = device
                .delete_namespace(now, ns)
                .map_err(|e| context(&format!("delete_namespace: {e}")))?;
            model.remove(&namespace);
            namespaces_deleted += 1;
            let mut kept = Vec::new();
            for iterator in iterators.drain(..) {
                if iterator.namespace == namespace {
                    match device.iter_next(now, iterator.id, 100) {
                        Err(DeviceError::IteratorNamespaceDeleted(_)) => {}
                        other => {
                            return Err(context(&format!(
                                "iterator of a deleted namespace answered {other:?}"
                            )))
                        }
                    }
                    device
                        .iter_close(iterator.id)
                        .map_err(|e| context(&format!("close orphan: {e}")))?;
                } else {
                    kept.push(iterator);
                }
            }
            iterators = kept;
            // Presets not used yet first, so every one gets a namespace; then any.
            let drawn = presets[(rng.next_u64() % presets.len() as u64) as usize];
            let preset = presets
                .iter()
                .copied()
                .find(|preset| !used.contains(preset.name()))
                .unwrap_or(drawn);
            used.insert(preset.name());
            let id = device
                .create_namespace(NamespaceSpec::new(preset))
                .map_err(|e| context(&format!("create_namespace: {e}")))?;
            model.insert(id.0, Map::new());
            // The deleted namespace's keys never reappear.
            match device.retrieve(now, ns, &key, None) {
                Err(DeviceError::NamespaceUnknown(_)) => {}
                other => return Err(context(&format!("deleted namespace answered {other:?}"))),
            }
        }
    }
    for iterator in iterators.drain(..) {
        let now_activity = activity(&device);
        for (slot, total) in while_open.iter_mut().enumerate() {
            *total += now_activity[slot].saturating_sub(iterator.activity_at_open[slot]);
        }
        device.iter_close(iterator.id).map_err(|e| e.to_string())?;
    }
    // Everything the model holds is still there.
    for (&namespace, map) in &model {
        for (key, value) in map {
            let (found, done) = device
                .retrieve(now, NamespaceId(namespace), key, None)
                .map_err(|e| e.to_string())?;
            now = done;
            if found.map(|found| found.value).as_ref() != Some(value) {
                return Err(format!("final check: namespace {namespace} lost a key"));
            }
        }
    }
    let stats = device.stats().map_err(|e| e.to_string())?;
    if used.len() < presets.len() {
        return Err(format!(
            "only presets {used:?} had a namespace: each of {} should",
            presets.len()
        ));
    }
    if refused * 4 > stores {
        return Err(format!(
            "{refused} of {stores} stores refused: the device filled up"
        ));
    }
    if while_open.contains(&0) {
        return Err(format!(
            "flushes, compactions, GC victims while iterators were open: {while_open:?}"
        ));
    }
    Ok(format!(
        "{stores} stores ({refused} refused for capacity), {namespaces_deleted} namespaces deleted, {iterator_entries} entries from iterators; while iterators were open: {} flushes, {} compactions, {} GC victims; device GC victims {}",
        while_open[0], while_open[1], while_open[2], stats.device_gc_victims
    ))
}

/// Runs the model under one controller model, over the seeds given by `KVSSD_SEED` or 1, 2, 3.
fn run_seeds(controller: ControllerModel) {
    let seeds: Vec<u64> = match std::env::var("KVSSD_SEED") {
        Ok(seed) => vec![seed.parse().expect("KVSSD_SEED is a u64")],
        Err(_) => vec![1, 2, 3],
    };
    for seed in seeds {
        match run(seed, controller) {
            Ok(summary) => println!("seed {seed} ({controller:?}): {summary}"),
            Err(message) => panic!(
                "seed {seed} ({controller:?}): {message}\nreplay: KVSSD_SEED={seed} cargo test -p kvssd-device --test device_model"
            ),
        }
    }
}

#[test]
fn device_model_matches_across_presets_batches_and_snapshots() {
    run_seeds(ControllerModel::Interchangeable);
}

/// The same with flushes, merges and GC as jobs of the controller's background thread: immutable
/// write buffers, merges whose flash work is played later, and GC beside them.
#[test]
fn device_model_matches_with_a_background_thread() {
    run_seeds(ControllerModel::Threads);
}
