//! `kvssd bench gc`: the GC stress of PinK §5.2 ("Garbage Collection").
//!
//! Each preset's fresh device is loaded with the profile's records, then receives uniformly random
//! overwrites of existing keys (PinK: 100M SETs over 44M pairs, about 2.3 per key) until GC runs
//! constantly. The result reports the write amplification over time and where the page writes went:
//! user data, data that GC moved, index pages written by compaction, and index pages GC wrote to
//! follow moved data (`lightstore` and `pink-gcrewrite` rewrite meta segments; `pink` re-inserts the
//! moved pairs into L0 and lets compaction write their index, PinK's GC optimisation).

use kvssd_flash::{Purpose, SimTime};

use crate::report::{BenchReport, BenchResult};
use crate::runner::SimTarget;
use crate::runner::{self, RunConfig};
use crate::target::DeviceTarget;
use crate::workload::{Distribution, WorkloadSpec};
use crate::ycsb::{report_presets, BenchProfile};

/// Overwrites per loaded key in PinK's GC experiment (100M SETs / 44M pairs).
pub const PINK_OVERWRITES_PER_KEY: f64 = 100.0 / 44.0;

/// One GC stress run's configuration.
#[derive(Debug, Clone)]
pub struct GcConfig {
    /// Device and data set.
    pub profile: BenchProfile,
    /// Presets, one after another on identical fresh devices.
    pub presets: Vec<String>,
    /// Overwrites after the load.
    pub overwrites: u64,
    /// Seed of every request stream.
    pub seed: u64,
}

/// The overwrite workload: 100% updates of uniformly chosen existing keys.
pub fn overwrite_workload() -> WorkloadSpec {
    WorkloadSpec {
        name: "gc",
        read: 0.0,
        update: 1.0,
        insert: 0.0,
        scan: 0.0,
        read_modify_write: 0.0,
        distribution: Distribution::Uniform,
        scan_length_max: crate::workload::SCAN_LENGTH_MAX,
    }
}

/// Runs the stress for every preset.
pub fn run(
    config: &GcConfig,
    threads: usize,
    progress: &(dyn Fn(&str, &str, u64, u64) + Sync),
) -> Result<BenchReport, String> {
    report_presets(
        config.profile.name,
        config.seed,
        &config.presets,
        threads,
        |preset| Ok((vec![run_preset(config, preset, progress)?], Vec::new())),
    )
}

fn run_preset(
    config: &GcConfig,
    preset: &str,
    progress: &(dyn Fn(&str, &str, u64, u64) + Sync),
) -> Result<BenchResult, String> {
    let profile = &config.profile;
    {
        let preset = preset.to_string();
        let mut target = DeviceTarget::open(profile, &preset)?;
        let load = RunConfig {
            preset: preset.clone(),
            workload: WorkloadSpec::by_name("load").ok_or("the load workload is missing")?,
            loaded: 0,
            operations: profile.records,
            clients: profile.clients,
            key_bytes: profile.key_bytes,
            value_bytes: profile.value_bytes,
            seed: config.seed,
            waf_sample_every: 0,
        };
        let mut tick = |done: u64| progress(&preset, "load", done, profile.records);
        let loaded = runner::run(&mut target, &load, 0, &mut tick)
            .map_err(|error| format!("{preset}, load: {error}"))?;
        let before = target.counters();
        let stress = RunConfig {
            workload: overwrite_workload(),
            loaded: loaded.keys,
            operations: config.overwrites,
            seed: config.seed.wrapping_add(1),
            waf_sample_every: (config.overwrites / 50).max(1),
            ..load
        };
        let mut tick = |done: u64| progress(&preset, "gc", done, config.overwrites);
        let start: SimTime = loaded.finished_at;
        let outcome = runner::run(&mut target, &stress, start, &mut tick)
            .map_err(|error| format!("{preset}, overwrites: {error}"))?;
        let phase = target.counters() - before;
        let mut result: BenchResult = outcome.result;
        let mut params = serde_json::Map::new();
        params.insert("records".into(), profile.records.into());
        params.insert("overwrites".into(), config.overwrites.into());
        params.insert(
            "user_pages_written".into(),
            phase.of(Purpose::UserData).programs.into(),
        );
        params.insert(
            "gc_pages_written".into(),
            phase.of(Purpose::Gc).programs.into(),
        );
        params.insert(
            "compaction_pages_written".into(),
            phase.of(Purpose::Compaction).programs.into(),
        );
        params.insert(
            "index_pages_written".into(),
            phase.of(Purpose::Index).programs.into(),
        );
        params.insert("blocks_erased".into(), phase.total().erases.into());
        for (key, value) in target.extra_stats() {
            params.insert(key, value.into());
        }
        result.params = Some(params);
        Ok(result)
    }
}
