//! `kvssd bench seek`: db_bench's SeekRandom on the device's iterators, as IterKVSSD evaluates them.
//!
//! Each preset's fresh device gets one namespace loaded with `keys` pairs in random order. Then, for
//! every prefetch degree D in the list, `seeks` iterators each open at a random key and return the
//! entry there (the Seek), then take `scan_length` Nexts of one entry. The run reports the simulated latency of each Seek and
//! of each Next: value prefetch keeps D value reads in flight ahead of the cursor, and index
//! prefetch reads each flash level's next meta segment before the cursor needs it. All figures are
//! simulated time; one client, as db_bench runs SeekRandom by default.

use std::time::Instant;

use kvssd_device::{Device, Durability, IterOptions, IterStart, NamespaceSpec, StoreMode};
use kvssd_engine::Preset;
use kvssd_flash::{Flash, Purpose, SimTime};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::latency::LatencyRecorder;
use crate::report::{BenchReport, BenchResult, PerRequest};
use crate::workload::{key_of, value_of};
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
    /// Value size, bytes (IterKVSSD: 4 KiB by default).
    pub value_bytes: usize,
    /// Nexts after each Seek.
    pub scan_length: usize,
    /// Seeks per degree.
    pub seeks: u64,
    /// Index prefetch on or off.
    pub index_prefetch: bool,
    /// Seed of the load order and the seek keys.
    pub seed: u64,
}

/// Runs SeekRandom for every preset and degree.
pub fn run(
    config: &SeekConfig,
    threads: usize,
    progress: &(dyn Fn(&str, &str, u64, u64) + Sync),
) -> Result<BenchReport, String> {
    report_presets(
        config.profile.name,
        config.seed,
        &config.presets,
        threads,
        |preset| Ok((run_preset(config, preset, progress)?, Vec::new())),
    )
}

fn run_preset(
    config: &SeekConfig,
    preset_name: &str,
    progress: &(dyn Fn(&str, &str, u64, u64) + Sync),
) -> Result<Vec<BenchResult>, String> {
    let preset: Preset = preset_name.parse().map_err(|_| {
        format!("{preset_name}: SeekRandom needs an LSM preset (iterators need key order)")
    })?;
    let mut profile = config.profile.clone();
    profile.value_bytes = config.value_bytes;
    let flash_profile = &profile.flash;
    let device_config = profile.device_config(preset.into(), Durability::Volatile);
    let flash = Flash::new(flash_profile.geometry, Some(flash_profile.timing.clone()))
        .map_err(|error| error.to_string())?;
    let device = Device::open(flash, device_config).map_err(|error| error.to_string())?;
    let namespace = device
        .create_namespace(NamespaceSpec::new(preset))
        .map_err(|error| error.to_string())?;
    let failed = |error: kvssd_device::DeviceError| format!("{preset_name}: {error}");

    // Load: key numbers 0..keys, whose keys sort in a random order (see `workload::key_of`).
    let mut now: SimTime = 0;
    for number in 0..config.keys {
        let value = value_of(number, 1, config.value_bytes);
        now = device
            .store(
                now,
                namespace,
                &key_of(number, profile.key_bytes),
                &value,
                StoreMode::Upsert,
            )
            .map_err(failed)?;
        if number % 4096 == 0 {
            progress(preset_name, "load", number, config.keys);
        }
    }
    now = device.flush_all(now).map_err(failed)?;

    let mut results = Vec::new();
    for &degree in &config.degrees {
        let phase = format!("D={degree}");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(config.seed);
        let mut nexts = LatencyRecorder::new();
        let mut seeks = LatencyRecorder::new();
        let before = device.stats().map_err(failed)?.flash;
        let started_at = now;
        let wall = Instant::now();
        let mut reads_max = 0u64;
        for seek in 0..config.seeks {
            let counters_before = device.stats().map_err(failed)?.flash;
            let start = key_of(rng.next_u64() % config.keys, profile.key_bytes);
            let options = IterOptions {
                index_prefetch: config.index_prefetch,
                ..IterOptions::new(IterStart::Key(start), degree)
            };
            // A Seek positions the iterator and returns the entry there (as db_bench's does); the
            // device opens iterators lazily, so that is the open and the first entry together.
            let (iterator, opened) = device.iter_open(now, namespace, options).map_err(failed)?;
            let (first, positioned) = device.iter_next(opened, iterator, 1).map_err(failed)?;
            seeks.record(positioned - now);
            now = positioned;
            for _ in 0..if first.end { 0 } else { config.scan_length } {
                let (batch, done) = device.iter_next(now, iterator, 1).map_err(failed)?;
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
            if seek % 64 == 0 {
                progress(preset_name, &phase, seek, config.seeks);
            }
        }
        let used = device.stats().map_err(failed)?.flash - before;
        let elapsed_s = (now - started_at) as f64 / 1e9;
        let mut params = serde_json::Map::new();
        params.insert("prefetch_degree".into(), degree.into());
        params.insert("scan_length".into(), config.scan_length.into());
        params.insert("value_bytes".into(), config.value_bytes.into());
        params.insert("keys".into(), config.keys.into());
        params.insert("index_prefetch".into(), config.index_prefetch.into());
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
            seek_latency_us: Some(seeks.summary()),
            sim_requests_per_wall_s: config.seeks as f64 / wall.elapsed().as_secs_f64().max(1e-9),
            read_latency_cdf: nexts.cdf_points(),
            note: Some(format!(
                "D={degree}: latency columns are per Next; ops are seeks of {} nexts",
                config.scan_length
            )),
            ..BenchResult::default()
        });
    }
    Ok(results)
}
