//! `kvssd bench ycsb`: PinK's YCSB experiments, side by side on identical fresh devices.
//!
//! For each preset, a fresh simulated device of the chosen [`BenchProfile`] is loaded with
//! `records` unique keys in uniformly random order (YCSB Load), then each requested workload runs
//! `operations` requests from 64 closed-loop clients. Every preset sees the identical request stream
//! (same seed). The engines run on the virtual clock of the flash model; every figure is simulated
//! time except the simulator's own speed.

use std::collections::BTreeMap;

use kvssd_engine::{EngineConfig, EngineError, LsmEngine, Preset};
use kvssd_flash::{Counters, Flash, Profile, SimTime};

use crate::report::{BenchReport, BenchResult};
use crate::runner::{self, RunConfig, SimTarget, TargetError};
use crate::workload::WorkloadSpec;

/// A device and data-set size for the workload benchmarks.
#[derive(Debug, Clone)]
pub struct BenchProfile {
    /// Name users type (`--profile NAME`).
    pub name: &'static str,
    /// The simulated flash.
    pub flash: Profile,
    /// Keys loaded before the workloads.
    pub records: u64,
    /// Requests per workload (A-F).
    pub operations: u64,
    /// Closed-loop clients.
    pub clients: u32,
    /// Key size, bytes.
    pub key_bytes: usize,
    /// Value size, bytes.
    pub value_bytes: usize,
    /// L0 (write buffer) size, bytes.
    pub l0_bytes: u64,
    /// Size factor between levels.
    pub size_factor: u32,
    /// Capacity of L1 in entries.
    pub l1_entries: u64,
    /// Levels below L0; the last one takes whatever the levels above it do not hold.
    pub levels_below_l0: u32,
    /// DRAM budget for indexing, as a fraction of the flash capacity.
    pub dram_fraction: f64,
}

impl BenchProfile {
    /// Names accepted by [`BenchProfile::by_name`].
    pub const NAMES: [&'static str; 2] = ["default", "paper"];

    /// PinK's setup scaled down so that Load and A-F for three presets run in minutes on a laptop:
    /// the same card (8 x 8 dies, 8 KiB pages, 2 MiB blocks) with 1/16 of the capacity (4 GiB), the
    /// same DRAM ratio for indexing (0.1%), the same key and value sizes, a data set that fills it to
    /// 69% like PinK's 44 GB on 64 GB, and the same tree shape: L0 and four levels below it (h = 5),
    /// L1-L3 pinned in DRAM, only the last level on flash. (Smaller devices leave too few blocks: 64
    /// append points keep 128 blocks open, and GC keeps its reserve.)
    pub fn scaled() -> BenchProfile {
        BenchProfile {
            name: "default",
            flash: Profile::pink_with_blocks(32),
            records: 2_800_000,
            operations: 100_000,
            clients: 64,
            key_bytes: 32,
            value_bytes: 1024,
            l0_bytes: 300 << 10,
            size_factor: 10,
            l1_entries: 2_800,
            levels_below_l0: 4,
            dram_fraction: 0.001,
        }
    }

    /// PinK's evaluation at full size (§5.1): 64 GiB, 64 MiB of DRAM for indexing, 44M pairs of 32 B
    /// keys and 1 KiB values, 10M requests per workload, 64 clients.
    pub fn paper() -> BenchProfile {
        BenchProfile {
            name: "paper",
            flash: Profile::pink(),
            records: 44_000_000,
            operations: 10_000_000,
            l0_bytes: 1 << 20,
            l1_entries: 10_000,
            ..BenchProfile::scaled()
        }
    }

    /// The profile with a name, if there is one.
    pub fn by_name(name: &str) -> Option<BenchProfile> {
        match name {
            "default" => Some(BenchProfile::scaled()),
            "paper" => Some(BenchProfile::paper()),
            _ => None,
        }
    }

    /// The engine configuration of a preset on this profile.
    pub fn engine_config(&self, preset: Preset) -> EngineConfig {
        let mut config = EngineConfig::new(preset, &self.flash.geometry);
        let geometry = &self.flash.geometry;
        config.l0_bytes = self.l0_bytes;
        config.size_factor = self.size_factor;
        config.l1_entries = self.l1_entries;
        config.levels_max = self.levels_below_l0;
        // PinK's budget (0.1% of capacity) is for indexing: level lists and pinned segments. Its write
        // buffer comes on top (§5.1), and so does the engine's reservation for it: L0, the largest
        // value, and for GC re-insertion a block's worth of relocated values.
        let indexing = (geometry.capacity_bytes() as f64 * self.dram_fraction) as u64;
        let reinsertion = if config.features.gc == kvssd_engine::GcPolicy::Reinsert {
            geometry.block_bytes()
        } else {
            0
        };
        config.dram_budget_bytes =
            indexing + self.l0_bytes + config.value_bytes_max(geometry) as u64 + reinsertion;
        config.expected_key_bytes = self.key_bytes as u32;
        config.expected_value_bytes = self.value_bytes as u32;
        config
    }
}

/// An LSM engine as a benchmark target.
pub struct LsmTarget {
    engine: LsmEngine,
}

impl LsmTarget {
    /// A fresh device of `profile` with a `preset` engine on it.
    pub fn open(profile: &BenchProfile, preset: Preset) -> Result<LsmTarget, EngineError> {
        LsmTarget::open_with(profile, profile.engine_config(preset))
    }

    /// A fresh device of `profile` with an engine of configuration `config` on it.
    pub fn open_with(
        profile: &BenchProfile,
        config: EngineConfig,
    ) -> Result<LsmTarget, EngineError> {
        let flash = Flash::new(profile.flash.geometry, Some(profile.flash.timing.clone()))?;
        let engine = LsmEngine::open(flash, config)?;
        Ok(LsmTarget { engine })
    }

    /// The engine.
    pub fn engine(&self) -> &LsmEngine {
        &self.engine
    }
}

fn failed(error: EngineError) -> TargetError {
    TargetError::Failed(error.to_string())
}

impl SimTarget for LsmTarget {
    fn put(&mut self, at: SimTime, key: &[u8], value: &[u8]) -> Result<SimTime, TargetError> {
        self.engine.put(at, key, value).map_err(failed)
    }

    fn get(&mut self, at: SimTime, key: &[u8]) -> Result<(Option<Vec<u8>>, SimTime), TargetError> {
        self.engine.get(at, key).map_err(failed)
    }

    fn scan(
        &mut self,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(usize, SimTime), TargetError> {
        let (pairs, done) = self.engine.scan(at, start, count).map_err(failed)?;
        Ok((pairs.len(), done))
    }

    fn counters(&self) -> Counters {
        self.engine.space().flash().counters()
    }

    fn extra_stats(&self) -> BTreeMap<String, u64> {
        let stats = self.engine.stats();
        BTreeMap::from([
            ("flushes".to_string(), stats.flushes),
            ("compactions".to_string(), stats.compactions),
            ("gc_meta_victims".to_string(), stats.gc_meta_victims),
            ("gc_data_victims".to_string(), stats.gc_data_victims),
            ("gc_meta_pages_moved".to_string(), stats.gc_meta_pages_moved),
            (
                "gc_records_reinserted".to_string(),
                stats.gc_records_reinserted,
            ),
            (
                "gc_records_rewritten".to_string(),
                stats.gc_records_rewritten,
            ),
            (
                "gc_segments_rewritten".to_string(),
                stats.gc_segments_rewritten,
            ),
        ])
    }

    fn dram_bytes(&self) -> BTreeMap<String, u64> {
        let usage = self.engine.dram_usage();
        BTreeMap::from([
            ("l0".to_string(), usage.l0),
            ("level_lists".to_string(), usage.level_lists),
            ("pinned_segments".to_string(), usage.pinned_segments),
            ("bloom_filters".to_string(), usage.bloom_filters),
        ])
    }
}

/// `pink` with GC that rewrites moved records' meta segments instead of re-inserting them into L0:
/// PinK without its GC optimisation (PinK §4.5, "PinK" against "PinK+GCOPT" in Fig. 12).
pub const PINK_GC_REWRITE: &str = "pink-gcrewrite";

/// Builds the target of a preset name on a fresh device of `profile`.
pub fn open_target(profile: &BenchProfile, preset: &str) -> Result<Box<dyn SimTarget>, String> {
    let (parsed, rewrite) = if preset == PINK_GC_REWRITE {
        (Preset::Pink, true)
    } else {
        let parsed: Preset = preset
            .parse()
            .map_err(|error: EngineError| error.to_string())?;
        (parsed, false)
    };
    let mut config = profile.engine_config(parsed);
    if rewrite {
        config.features.gc = kvssd_engine::GcPolicy::Rewrite;
    }
    LsmTarget::open_with(profile, config)
        .map(|target| Box::new(target) as Box<dyn SimTarget>)
        .map_err(|error| format!("cannot open a {preset} device: {error}"))
}

/// Presets the benchmarks accept.
pub fn preset_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Preset::ALL.iter().map(|preset| preset.name()).collect();
    names.push(PINK_GC_REWRITE);
    names
}

/// One side-by-side run's configuration.
#[derive(Debug, Clone)]
pub struct YcsbConfig {
    /// Device and data set.
    pub profile: BenchProfile,
    /// Presets, run one after another on identical fresh devices.
    pub presets: Vec<String>,
    /// Workloads, in order; Load always runs first (it builds the data set) and is reported if listed.
    pub workloads: Vec<WorkloadSpec>,
    /// Seed of every request stream.
    pub seed: u64,
}

/// Progress callback: (preset, workload, requests done, requests in the phase).
pub type YcsbProgress<'a> = &'a mut dyn FnMut(&str, &str, u64, u64);

/// Runs every preset through Load and the workloads; returns the report.
pub fn run(config: &YcsbConfig, progress: YcsbProgress<'_>) -> Result<BenchReport, String> {
    let profile = &config.profile;
    let mut report = BenchReport {
        profile: profile.name.to_string(),
        simulated: true,
        seed: config.seed,
        results: Vec::new(),
    };
    for preset in &config.presets {
        let mut target = open_target(profile, preset)?;
        let mut clock: SimTime = 0;
        let mut keys = 0u64;
        let load = WorkloadSpec::by_name("load").ok_or("the load workload is missing")?;
        let mut phases = vec![load];
        phases.extend(
            config
                .workloads
                .iter()
                .filter(|spec| spec.name != "load")
                .cloned(),
        );
        let report_load = config.workloads.iter().any(|spec| spec.name == "load");
        for (index, spec) in phases.into_iter().enumerate() {
            let operations = if spec.name == "load" {
                profile.records
            } else {
                profile.operations
            };
            let run_config = RunConfig {
                preset: preset.clone(),
                workload: spec.clone(),
                loaded: keys,
                operations,
                clients: profile.clients,
                key_bytes: profile.key_bytes,
                value_bytes: profile.value_bytes,
                // Identical streams for every preset; a different stream per phase.
                seed: config.seed.wrapping_add(index as u64),
                waf_sample_every: 0,
            };
            let mut tick = |done: u64| progress(preset, spec.name, done, operations);
            let outcome = runner::run(target.as_mut(), &run_config, clock, &mut tick)
                .map_err(|error| format!("{preset}, workload {}: {error}", spec.name))?;
            clock = outcome.finished_at;
            keys = outcome.keys;
            if spec.name != "load" || report_load {
                report.results.push(outcome.result);
            }
        }
    }
    Ok(report)
}

/// The results of one preset, for tests and summaries.
pub fn results_of<'a>(report: &'a BenchReport, preset: &str) -> Vec<&'a BenchResult> {
    report
        .results
        .iter()
        .filter(|result| result.preset == preset)
        .collect()
}
