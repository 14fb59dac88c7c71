//! `kvssd bench seek`: db_bench's SeekRandom on the device's iterators, as IterKVSSD evaluates them.
//!
//! The run is a grid: every value size, scan length, index prefetch setting and prefetch degree in
//! the lists (IterKVSSD's sweeps: D = 0 to 8, values of 128 B to 128 KiB, scans of 128 to 2,048,
//! index prefetch on and off at a long scan). For each preset and value size, a fresh device gets
//! one namespace loaded with `keys` pairs in random order; every other combination runs on that
//! loaded device: `seeks` iterators each open at a random key and return the entry there (the
//! Seek), then take `scan_length` Nexts of one entry. The run reports the simulated latency of
//! each Seek and of each Next: value prefetch keeps D value reads in flight ahead of the cursor,
//! and index prefetch reads each flash level's next meta segment before the cursor needs it. All
//! figures are simulated time; one client, as db_bench runs SeekRandom by default.
//!
//! [`SeekConfig::check`] refuses, before anything runs, a value the device cannot store, a data
//! set the card cannot hold and a value size whose namespace cannot open (at small values the
//! level lists of a full card can outgrow the indexing DRAM).

use std::time::Instant;

use kvssd_device::{Device, Durability, IterOptions, IterStart, NamespaceSpec, StoreMode};
use kvssd_engine::Preset;
use kvssd_flash::{Flash, Purpose, SimTime};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::latency::LatencyRecorder;
use crate::report::{BenchReport, BenchResult, PerRequest};
use crate::workload::{described, distinct_keys_max, key_of, value_of};
use crate::ycsb::{report_presets, BenchProfile};

/// One SeekRandom run's configuration.
#[derive(Debug, Clone)]
pub struct SeekConfig {
    /// The device (flash, key size, DRAM fraction, tree shape).
    pub profile: BenchProfile,
    /// LSM presets (iterators need key order).
    pub presets: Vec<String>,
    /// Prefetch degrees D to measure, each on the same loaded device.
    pub degrees: Vec<usize>,
    /// Keys loaded.
    pub keys: u64,
    /// Value sizes, bytes (IterKVSSD: 4 KiB by default), each on its own loaded device.
    pub value_bytes: Vec<usize>,
    /// Nexts after each Seek, one measurement per length.
    pub scan_lengths: Vec<usize>,
    /// Seeks per combination.
    pub seeks: u64,
    /// Index prefetch settings to measure (on, off or both).
    pub index_prefetch: Vec<bool>,
    /// Seed of the load order and the seek keys.
    pub seed: u64,
}

/// Data the card may hold before a run, in percent of its user capacity: the rest is for the
/// index, compaction and GC (the default profile's YCSB Load fills 77%).
pub const FILL_MAX_PERCENT: u64 = 80;

/// Why a SeekRandom configuration cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeekError {
    /// A value above what the device stores.
    #[error("--value-bytes {value_bytes}: the device stores values of at most {max} B")]
    ValueTooLarge {
        /// The value size asked for.
        value_bytes: usize,
        /// The device's largest value.
        max: usize,
    },
    /// More data than the card takes.
    #[error("--keys {keys} of {value_bytes} B values need {needed_mib} MiB of flash, above the {limit_mib} MiB ({FILL_MAX_PERCENT}% of the card's user capacity) a run may fill; use fewer keys or smaller values")]
    TooMuchData {
        /// Keys asked for.
        keys: u64,
        /// Their value size.
        value_bytes: usize,
        /// Flash they take, MiB.
        needed_mib: u64,
        /// Flash a run may fill, MiB.
        limit_mib: u64,
    },
    /// An empty list.
    #[error("--{0} needs at least one value")]
    Empty(&'static str),
    /// More keys than the key size has distinct keys.
    #[error("--keys {keys}: {key_bytes} B keys have only {max} distinct keys; use longer keys or fewer keys")]
    TooManyKeys {
        /// Keys asked for.
        keys: u64,
        /// The key size.
        key_bytes: usize,
        /// Distinct keys of that size.
        max: u64,
    },
    /// The device could not be set up to check.
    #[error("{0}")]
    Device(String),
    /// A preset's namespace cannot be created for a value size (its DRAM budget cannot hold the
    /// level lists of a card full of such pairs, ...).
    #[error(
        "{preset} with {value_bytes} B values: {reason} (--dram-fraction sets the indexing DRAM)"
    )]
    Namespace {
        /// The preset.
        preset: String,
        /// The value size.
        value_bytes: usize,
        /// The device's reason.
        reason: String,
    },
}

impl SeekConfig {
    /// Checks every value size against the device and the data set against the card, before
    /// anything runs.
    pub fn check(&self) -> Result<(), SeekError> {
        for (list, empty) in [
            (self.value_bytes.is_empty(), "value-bytes"),
            (self.scan_lengths.is_empty(), "scan-length"),
            (self.degrees.is_empty(), "prefetch"),
            (self.index_prefetch.is_empty(), "index-prefetch"),
        ] {
            if list {
                return Err(SeekError::Empty(empty));
            }
        }
        let max = distinct_keys_max(self.profile.key_bytes);
        if self.keys > max {
            return Err(SeekError::TooManyKeys {
                keys: self.keys,
                key_bytes: self.profile.key_bytes,
                max,
            });
        }
        let geometry = self.profile.flash.geometry;
        let device = self
            .profile
            .device_config(Preset::Pink.into(), Durability::Volatile);
        let flash = Flash::new_on(&self.profile.media, geometry, None)
            .map_err(|error| SeekError::Device(error.to_string()))?;
        let space = kvssd_space::Space::open(flash, device.space.clone())
            .map_err(|error| SeekError::Device(error.to_string()))?;
        let max = device.engine.value_bytes_max(&geometry);
        let limit = space.user_capacity_bytes() / 100 * FILL_MAX_PERCENT;
        for &value_bytes in &self.value_bytes {
            if value_bytes > max {
                return Err(SeekError::ValueTooLarge { value_bytes, max });
            }
            let needed = u128::from(self.keys)
                * u128::from(space.record_footprint(self.profile.key_bytes, value_bytes));
            if needed > u128::from(limit) {
                return Err(SeekError::TooMuchData {
                    keys: self.keys,
                    value_bytes,
                    needed_mib: u64::try_from(needed >> 20).unwrap_or(u64::MAX),
                    limit_mib: limit >> 20,
                });
            }
            for preset in &self.presets {
                self.open_device(preset, value_bytes, None)
                    .map_err(|reason| SeekError::Namespace {
                        preset: preset.clone(),
                        value_bytes,
                        reason,
                    })?;
            }
        }
        Ok(())
    }

    /// A fresh device of `preset` for values of `value_bytes` (with the timing model when
    /// `timing` is given) and its namespace.
    fn open_device(
        &self,
        preset_name: &str,
        value_bytes: usize,
        timing: Option<kvssd_flash::TimingProfile>,
    ) -> Result<(Device, kvssd_device::NamespaceId), String> {
        let preset: Preset = preset_name.parse().map_err(|_| {
            format!("{preset_name}: SeekRandom needs an LSM preset (iterators need key order)")
        })?;
        let mut profile = self.profile.clone();
        profile.value_bytes = value_bytes;
        let device_config = profile.device_config(preset.into(), Durability::Volatile);
        let flash = Flash::new_on(&profile.media, profile.flash.geometry, timing)
            .map_err(|error| error.to_string())?;
        let device = Device::open(flash, device_config).map_err(|error| error.to_string())?;
        let namespace = device
            .create_namespace(NamespaceSpec::new(preset))
            .map_err(|error| error.to_string())?;
        Ok((device, namespace))
    }
}

/// Runs SeekRandom for every preset and every combination of the lists, after
/// [`SeekConfig::check`].
pub fn run(
    config: &SeekConfig,
    threads: usize,
    progress: &(dyn Fn(&str, &str, u64, u64) + Sync),
) -> Result<BenchReport, String> {
    config.check().map_err(|error| error.to_string())?;
    report_presets(
        config.profile.name,
        config.seed,
        &config.presets,
        threads,
        |preset| {
            let mut results = Vec::new();
            for &value_bytes in &config.value_bytes {
                results.extend(run_value_size(config, preset, value_bytes, progress)?);
            }
            Ok((results, Vec::new()))
        },
    )
}

/// One measurement's settings.
#[derive(Debug, Clone, Copy)]
struct Combination {
    scan_length: usize,
    index_prefetch: bool,
    degree: usize,
}

/// A fresh device of one preset loaded with values of `value_bytes`, and every scan length, index
/// prefetch setting and degree measured on it.
fn run_value_size(
    config: &SeekConfig,
    preset_name: &str,
    value_bytes: usize,
    progress: &(dyn Fn(&str, &str, u64, u64) + Sync),
) -> Result<Vec<BenchResult>, String> {
    let profile = &config.profile;
    let (device, namespace) = config
        .open_device(
            preset_name,
            value_bytes,
            Some(config.profile.flash.timing.clone()),
        )
        .map_err(|error| format!("{preset_name}: {error}"))?;
    let failed = |error: kvssd_device::DeviceError| format!("{preset_name}: {error}");

    // Load: key numbers 0..keys, whose keys sort in a random order (see `workload::key_of`).
    let mut now: SimTime = 0;
    let load = format!("load v={value_bytes}");
    for number in 0..config.keys {
        let value = value_of(number, 1, value_bytes);
        now = device
            .store(
                now,
                namespace,
                &key_of(number, profile.key_bytes),
                &value,
                StoreMode::Upsert,
            )
            .map_err(failed)?;
        if number % 1024 == 0 {
            progress(preset_name, &load, number, config.keys);
        }
    }
    now = device.flush_all(now).map_err(failed)?;

    let mut results = Vec::new();
    let combinations = config.scan_lengths.iter().flat_map(|&scan_length| {
        config
            .index_prefetch
            .iter()
            .flat_map(move |&index_prefetch| {
                config.degrees.iter().map(move |&degree| Combination {
                    scan_length,
                    index_prefetch,
                    degree,
                })
            })
    });
    for combination in combinations {
        let Combination {
            scan_length,
            index_prefetch,
            degree,
        } = combination;
        let phase = format!(
            "v={value_bytes} s={scan_length} ip={} D={degree}",
            on_off(index_prefetch)
        );
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(config.seed);
        let mut nexts = LatencyRecorder::new();
        let mut seeks = LatencyRecorder::new();
        let before = device.stats().map_err(failed)?.flash;
        let started_at = now;
        let wall = Instant::now();
        let mut reads_max = 0u64;
        let mut entries = 0u64;
        let mut checked = Checked::default();
        for seek in 0..config.seeks {
            let counters_before = device.stats().map_err(failed)?.flash;
            let start = key_of(rng.next_u64() % config.keys, profile.key_bytes);
            let options = IterOptions {
                index_prefetch,
                ..IterOptions::new(IterStart::Key(start), degree)
            };
            // A Seek positions the iterator and returns the entry there (as db_bench's does); the
            // device opens iterators lazily, so that is the open and the first entry together.
            let (iterator, opened) = device.iter_open(now, namespace, options).map_err(failed)?;
            let (first, positioned) = device.iter_next(opened, iterator, 1).map_err(failed)?;
            entries += first.entries.len() as u64;
            checked.entries(&first.entries, profile.key_bytes, value_bytes);
            seeks.record(positioned - now);
            now = positioned;
            for _ in 0..if first.end { 0 } else { scan_length } {
                let (batch, done) = device.iter_next(now, iterator, 1).map_err(failed)?;
                entries += batch.entries.len() as u64;
                checked.entries(&batch.entries, profile.key_bytes, value_bytes);
                nexts.record(done - now);
                now = done;
                if batch.end {
                    break;
                }
            }
            device.iter_close(iterator).map_err(failed)?;
            let used = device.stats().map_err(failed)?.flash - counters_before;
            reads_max =
                reads_max.max(used.of(Purpose::UserData).reads + used.of(Purpose::Index).reads);
            if seek % 16 == 0 {
                progress(preset_name, &phase, seek, config.seeks);
            }
        }
        let used = device.stats().map_err(failed)?.flash - before;
        let elapsed_s = (now - started_at) as f64 / 1e9;
        let mut params = serde_json::Map::new();
        params.insert("prefetch_degree".into(), degree.into());
        params.insert("scan_length".into(), scan_length.into());
        params.insert("value_bytes".into(), value_bytes.into());
        params.insert("keys".into(), config.keys.into());
        params.insert("index_prefetch".into(), index_prefetch.into());

        results.push(BenchResult {
            preset: preset_name.to_string(),
            workload: "seekrandom".into(),
            ops: config.seeks,
            throughput_kops: config.seeks as f64 / elapsed_s.max(1e-12) / 1e3,
            read_latency_us: nexts.summary(),
            flash_reads_per_query: PerRequest {
                avg: (used.of(Purpose::UserData).reads + used.of(Purpose::Index).reads) as f64
                    / config.seeks.max(1) as f64,
                max: reads_max,
            },
            params: Some(params),
            next_latency_us: Some(nexts.summary()),
            // The Seeks' and Nexts' entries: IterKVSSD's I/O throughput.
            value_mb_per_s: Some(entries as f64 * value_bytes as f64 / 1e6 / elapsed_s.max(1e-12)),
            seek_latency_us: Some(seeks.summary()),
            sim_requests_per_wall_s: config.seeks as f64 / wall.elapsed().as_secs_f64().max(1e-9),
            read_latency_cdf: nexts.cdf_points(),
            value_mismatches: checked.mismatches,
            first_value_mismatch: checked.first,
            note: Some(format!(
                "{phase}: latency columns are per Next; ops are seeks of {scan_length} nexts"
            )),
            ..BenchResult::default()
        });
    }
    Ok(results)
}

/// Every entry an iterator returned, checked against what the load wrote: the value must be the
/// description of the load's write of that very key, whole and of the loaded size.
#[derive(Debug, Default)]
struct Checked {
    mismatches: u64,
    first: Option<String>,
}

impl Checked {
    fn entries(
        &mut self,
        entries: &[kvssd_device::IterEntry],
        key_bytes: usize,
        value_bytes: usize,
    ) {
        for entry in entries {
            let value = entry.value.as_deref().unwrap_or_default();
            let right = value.len() == value_bytes
                && described(value).is_some_and(|written| {
                    written.version == 1 && key_of(written.number, key_bytes) == entry.key
                });
            if !right {
                self.mismatches += 1;
                self.first.get_or_insert_with(|| {
                    format!(
                        "key {:02x?}: a value of {} B that is not the one loaded",
                        entry.key,
                        value.len()
                    )
                });
            }
        }
    }
}

/// `on` or `off`.
pub fn on_off(flag: bool) -> &'static str {
    if flag {
        "on"
    } else {
        "off"
    }
}

/// The parameters that tell a grid's results apart, as (parameter, short name) for
/// [`BenchReport::labelled`].
pub const GRID_LABELS: [(&str, &str); 4] = [
    ("value_bytes", "v"),
    ("scan_length", "s"),
    ("index_prefetch", "ip"),
    ("prefetch_degree", "D"),
];

#[cfg(test)]
mod tests;
