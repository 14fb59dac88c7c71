//! `kvssd bench ycsb`: PinK's YCSB experiments, side by side on identical fresh devices.
//!
//! For each preset, a fresh simulated device of the chosen [`BenchProfile`], in power-loss
//! protection mode, gets one namespace of the preset, which is loaded with `records` unique keys in
//! uniformly random order (YCSB Load); then each requested workload runs `operations` requests from
//! 64 closed-loop clients through the device's commands (store, retrieve, scan: see
//! [`DeviceTarget`]). Every preset sees the identical request stream (same seed). The device runs
//! on the virtual clock of the flash model; every figure is simulated time except the simulator's
//! own speed.

use kvssd_device::PresetKind;
use kvssd_flash::SimTime;

use crate::report::{BenchReport, BenchResult};
use crate::runner::{self, RunConfig, SimTarget};
use crate::target::DeviceTarget;
use crate::workload::WorkloadSpec;

pub use crate::profile::{preset_names, BenchProfile};

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

/// Progress callback: (preset, workload, requests done, requests in the phase). Called from the
/// threads that run the presets.
pub type YcsbProgress<'a> = &'a (dyn Fn(&str, &str, u64, u64) + Sync);

/// Runs every preset through Load and the workloads, `threads` presets at a time (each preset is a
/// separate simulated device and a pure function of the configuration, so running them side by side
/// changes no figure); returns the report with results in preset order.
pub fn run(
    config: &YcsbConfig,
    threads: usize,
    progress: YcsbProgress<'_>,
) -> Result<BenchReport, String> {
    let order = if threads > 1 {
        longest_first(&config.presets)
    } else {
        (0..config.presets.len()).collect()
    };
    report_presets_in_order(
        config.profile.name,
        config.seed,
        &config.presets,
        &order,
        threads,
        |preset| run_preset(config, preset, progress),
    )
}

/// The order in which presets start when several run side by side: those that keep no key order
/// (the hash presets) first, the others as given. They take the longest by far, so started last
/// they would run alone at the end while the other threads sat idle. At PinK's scale `hash` took
/// 55 of the whole suite's 72 minutes, started after `pink` and `lightstore` (18 and 22 minutes
/// side by side): its Load rewrites bucket pages (WAF 7.4) and a scan costs it a point GET a pair
/// (about 480M for E). The order changes no figure (each preset is its own device) and results
/// are reported in the order given.
fn longest_first(presets: &[String]) -> Vec<usize> {
    let keeps_order = |preset: &String| {
        preset
            .parse::<PresetKind>()
            .map_or(true, |kind| kind.supports_iterators())
    };
    let mut order: Vec<usize> = (0..presets.len()).collect();
    order.sort_by_key(|&index| keeps_order(&presets[index]));
    order
}

/// Runs `work` for every preset on up to `threads` threads ([`run_jobs`]) and gathers the results
/// and notes it returns into one report, in preset order; the first failure is the error.
pub fn report_presets(
    profile: &str,
    seed: u64,
    presets: &[String],
    threads: usize,
    work: impl Fn(&str) -> Result<(Vec<BenchResult>, Vec<String>), String> + Sync,
) -> Result<BenchReport, String> {
    let order: Vec<usize> = (0..presets.len()).collect();
    report_presets_in_order(profile, seed, presets, &order, threads, work)
}

/// [`report_presets`], the presets started in `order` (indices into `presets`, each once).
fn report_presets_in_order(
    profile: &str,
    seed: u64,
    presets: &[String],
    order: &[usize],
    threads: usize,
    work: impl Fn(&str) -> Result<(Vec<BenchResult>, Vec<String>), String> + Sync,
) -> Result<BenchReport, String> {
    let mut report = BenchReport::simulated(profile, seed);
    for outcome in run_jobs_in_order(presets, order, threads, |preset| work(preset)) {
        let (results, notes) = outcome?;
        report.results.extend(results);
        report.notes.extend(notes);
    }
    Ok(report)
}

/// Runs `work` for every job on up to `threads` threads; results in job order.
pub fn run_jobs<J: Sync, T: Send>(
    jobs: &[J],
    threads: usize,
    work: impl Fn(&J) -> T + Sync,
) -> Vec<T> {
    let order: Vec<usize> = (0..jobs.len()).collect();
    run_jobs_in_order(jobs, &order, threads, work)
}

/// [`run_jobs`], the jobs started in `order` (indices into `jobs`, each once); results in job
/// order all the same.
fn run_jobs_in_order<J: Sync, T: Send>(
    jobs: &[J],
    order: &[usize],
    threads: usize,
    work: impl Fn(&J) -> T + Sync,
) -> Vec<T> {
    debug_assert_eq!(order.len(), jobs.len(), "every job once");
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<T>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| loop {
                let turn = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((index, job)) = order
                    .get(turn)
                    .and_then(|&index| Some((index, jobs.get(index)?)))
                else {
                    break;
                };
                let outcome = work(job);
                if let Ok(mut slot) = slots[index].lock() {
                    *slot = Some(outcome);
                }
            });
        }
    });
    slots
        .into_iter()
        .filter_map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

/// Load and the workloads for one preset: its results and notes.
fn run_preset(
    config: &YcsbConfig,
    preset: &str,
    progress: YcsbProgress<'_>,
) -> Result<(Vec<BenchResult>, Vec<String>), String> {
    run_phases(config, preset, preset, progress).map(|(results, notes, _)| (results, notes))
}

/// Load and the workloads for one preset on a fresh device, its progress reported under `label`:
/// its results, its notes and the device it leaves.
pub(crate) fn run_phases(
    config: &YcsbConfig,
    preset: &str,
    label: &str,
    progress: YcsbProgress<'_>,
) -> Result<(Vec<BenchResult>, Vec<String>, DeviceTarget), String> {
    let profile = &config.profile;
    let mut results = Vec::new();
    let mut notes = Vec::new();
    let mut target = DeviceTarget::open(profile, preset)?;
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
            preset: preset.to_string(),
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
        let mut tick = |done: u64| progress(label, spec.name, done, operations);
        let outcome = runner::run(&mut target, &run_config, clock, &mut tick)
            .map_err(|error| format!("{preset}, workload {}: {error}", spec.name))?;
        clock = outcome.finished_at;
        keys = outcome.keys;
        if spec.name != "load" || report_load {
            results.push(outcome.result);
        }
        if spec.name == "load" {
            let shape = target.describe();
            if !shape.is_empty() {
                notes.push(format!("{preset} after load: {shape}"));
            }
            let media_bytes = target.device().stats().map_or(0, |stats| stats.media_bytes);
            if media_bytes > 0 {
                notes.push(format!(
                    "{preset} after load: the simulated media hold {:.0} MiB of page content",
                    media_bytes as f64 / (1 << 20) as f64
                ));
            }
        }
    }
    Ok((results, notes, target))
}

/// The results of one preset, for tests and summaries.
pub fn results_of<'a>(report: &'a BenchReport, preset: &str) -> Vec<&'a BenchResult> {
    report
        .results
        .iter()
        .filter(|result| result.preset == preset)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_that_keep_no_key_order_start_first_and_results_keep_the_given_order() {
        let presets: Vec<String> = ["pink", "hash", "lightstore", "kaml"]
            .iter()
            .map(|name| name.to_string())
            .collect();
        let order = longest_first(&presets);
        let first: Vec<&str> = order.iter().map(|&index| presets[index].as_str()).collect();
        assert_eq!(first, ["hash", "kaml", "pink", "lightstore"]);
        // One thread takes the jobs strictly in that order; the results still come back in the
        // order the presets were given.
        let started = std::sync::Mutex::new(Vec::new());
        let results = run_jobs_in_order(&presets, &order, 1, |preset| {
            started.lock().expect("lock").push(preset.clone());
            format!("ran {preset}")
        });
        assert_eq!(started.into_inner().expect("lock"), first);
        assert_eq!(
            results,
            ["ran pink", "ran hash", "ran lightstore", "ran kaml"]
        );
    }
}
