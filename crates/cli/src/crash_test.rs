//! `kvssd crash-test`: the device's crash harness from the command line, with longer workloads
//! than CI runs. A seeded workload is cut by power loss after flash operation N for each chosen N
//! (all of them, or a seeded sample), recovered and checked against what was acknowledged. A
//! failure prints its seed and the command that replays exactly that crash point.

use std::process::ExitCode;

use clap::builder::TypedValueParser;
use clap::Args;
use kvssd_device::crash::{self, CrashConfig, CrashPoints};
use kvssd_device::{Durability, PresetKind, SyncPolicy};

/// `kvssd crash-test`.
#[derive(Debug, Args)]
pub struct CrashTestArgs {
    /// Seed of the workload, the torn programs and the bit flips (the first seed of a sweep).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seeds to run, from --seed on: --seed 4000 --seeds 12 runs seeds 4000 to 4011.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    seeds: u64,
    /// Crash points to run: every flash operation of the workload if it has this many or fewer,
    /// else a seeded sample of this many.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    points: u64,
    /// Engine presets of the workload's namespaces, comma-separated, or all (pink, pink-noopt,
    /// pink-range, lightstore, pink-gcrewrite, hash, kaml, block, pink-hw).
    #[arg(long, default_value = "pink", value_parser = parse_presets)]
    preset: List<PresetKind>,
    /// Durability protocols, comma-separated, or all (wal, wal/group-commit-4, wal/none, plp):
    /// wal (write-ahead log, sync per command; also wal/every-command), wal/group-commit-N,
    /// wal/none, or plp (power-loss protection: a dump at the cut).
    #[arg(long, default_value = "wal", value_parser = parse_modes)]
    mode: List<Durability>,
    /// Controller models, comma-separated, or all: interchangeable (flushes and merges complete
    /// inside the write that triggers them) or threads (they run as background jobs, so a cut can
    /// fall mid-merge).
    #[arg(long, default_value = "interchangeable", value_parser = parse_controllers)]
    controller: List<kvssd_flash::ControllerModel>,
    /// Commands in the workload (CI runs 150).
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(1..=100_000).map(|n| n as usize))]
    commands: usize,
    /// Replay one crash point: cut after this many flash operations (one seed, preset, mode and
    /// controller only).
    #[arg(long)]
    at: Option<u64>,
    /// Runs of a sweep made at once, each on its own thread (the results do not depend on it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256).map(|n| n as usize))]
    jobs: usize,
}

/// A comma-separated list of values, or `all` of them.
#[derive(Debug, Clone)]
struct List<T>(Vec<T>);

fn parse_list<T>(
    text: &str,
    all: &[T],
    parse: fn(&str) -> Result<T, String>,
) -> Result<List<T>, String>
where
    T: Clone + PartialEq,
{
    if text == "all" {
        return Ok(List(all.to_vec()));
    }
    let mut values: Vec<T> = Vec::new();
    for name in text.split(',') {
        let value = parse(name.trim()).map_err(|error| format!("{name:?}: {error}"))?;
        if !values.contains(&value) {
            values.push(value);
        }
    }
    Ok(List(values))
}

fn parse_presets(text: &str) -> Result<List<PresetKind>, String> {
    parse_list(text, &PresetKind::ALL, parse_preset)
}

fn parse_modes(text: &str) -> Result<List<Durability>, String> {
    const ALL: [Durability; 4] = [
        Durability::WriteAheadLog(SyncPolicy::EveryCommand),
        Durability::WriteAheadLog(SyncPolicy::GroupCommit { max_records: 4 }),
        Durability::WriteAheadLog(SyncPolicy::None),
        Durability::PowerLossProtection,
    ];
    parse_list(text, &ALL, parse_mode)
}

fn parse_controllers(text: &str) -> Result<List<kvssd_flash::ControllerModel>, String> {
    const ALL: [kvssd_flash::ControllerModel; 2] = [
        kvssd_flash::ControllerModel::Interchangeable,
        kvssd_flash::ControllerModel::Threads,
    ];
    parse_list(text, &ALL, crate::args::parse_controller)
}

fn parse_preset(name: &str) -> Result<PresetKind, String> {
    name.parse::<PresetKind>().map_err(|_| {
        let names: Vec<&str> = PresetKind::ALL.iter().map(|preset| preset.name()).collect();
        format!("unknown preset (expected one of {})", names.join(", "))
    })
}

fn parse_mode(name: &str) -> Result<Durability, String> {
    let group = name
        .strip_prefix("wal/group-commit-")
        .and_then(|records| records.parse::<u32>().ok())
        .filter(|&records| records >= 1);
    match (name, group) {
        ("wal" | "wal/every-command", _) => Ok(Durability::WriteAheadLog(SyncPolicy::EveryCommand)),
        ("wal/none", _) => Ok(Durability::WriteAheadLog(SyncPolicy::None)),
        ("plp", _) => Ok(Durability::PowerLossProtection),
        (_, Some(max_records)) => Ok(Durability::WriteAheadLog(SyncPolicy::GroupCommit {
            max_records,
        })),
        _ => Err("expected wal, wal/every-command, wal/group-commit-N, wal/none or plp".into()),
    }
}

/// One run of a sweep: a seed, preset, durability mode and controller model.
#[derive(Debug, Clone)]
struct Combination {
    seed: u64,
    preset: PresetKind,
    mode: Durability,
    controller: kvssd_flash::ControllerModel,
}

/// What one run found: the line it prints and its failures.
struct RunReport {
    summary: String,
    failures: Vec<String>,
    passed: bool,
}

/// Runs the crash test: one run, or a sweep over every combination of the seeds, presets, modes
/// and controllers asked for.
pub fn run(args: CrashTestArgs) -> ExitCode {
    let mut grid = Vec::new();
    for seed in 0..args.seeds {
        let Some(seed) = args.seed.checked_add(seed) else {
            eprintln!(
                "kvssd: --seed {} --seeds {}: seeds past 2^64 - 1",
                args.seed, args.seeds
            );
            return ExitCode::from(2);
        };
        for &preset in &args.preset.0 {
            for &mode in &args.mode.0 {
                for &controller in &args.controller.0 {
                    grid.push(Combination {
                        seed,
                        preset,
                        mode,
                        controller,
                    });
                }
            }
        }
    }
    if let [combination] = grid.as_slice() {
        let report = run_one(&args, combination, true);
        println!("{}", report.summary);
        for failure in &report.failures {
            println!("failure: {failure}");
        }
        return if report.passed {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    if args.at.is_some() {
        eprintln!(
            "kvssd: --at replays a crash point of one run, and these options ask for {} runs: \
             give one seed, preset, mode and controller",
            grid.len()
        );
        return ExitCode::from(2);
    }
    sweep(&args, &grid)
}

/// Runs every combination of `grid`, `args.jobs` at a time. Each run's lines go to standard
/// output in the grid's order, whatever order they finish in; progress and failures go to
/// standard error as they come.
fn sweep(args: &CrashTestArgs, grid: &[Combination]) -> ExitCode {
    let presets: Vec<&str> = args.preset.0.iter().map(|preset| preset.name()).collect();
    let modes: Vec<String> = args
        .mode
        .0
        .iter()
        .map(|&mode| crash::durability_name(mode))
        .collect();
    let controllers: Vec<&str> = args
        .controller
        .0
        .iter()
        .map(|&controller| crash::controller_name(controller))
        .collect();
    eprintln!(
        "kvssd crash-test: a sweep of {} runs (seeds {} to {}; presets {}; modes {}; controllers \
         {}), {} commands and {} crash points each, {} at once",
        grid.len(),
        args.seed,
        args.seed + (args.seeds - 1),
        presets.join(","),
        modes.join(","),
        controllers.join(","),
        args.commands,
        args.points,
        args.jobs
    );
    let started = std::time::Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (sender, receiver) = std::sync::mpsc::channel::<(usize, RunReport)>();
    let mut failed = 0usize;
    std::thread::scope(|scope| {
        for _ in 0..args.jobs.min(grid.len()) {
            let sender = sender.clone();
            let next = &next;
            scope.spawn(move || loop {
                let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(combination) = grid.get(index) else {
                    break;
                };
                // A run that panics is a failure of the sweep, not its end.
                let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_one(args, combination, false)
                }))
                .unwrap_or_else(|_| {
                    let names = describe(&crash_config(args, combination));
                    RunReport {
                        summary: format!("panicked ({names})"),
                        failures: vec![format!("{names}: the run panicked (its message is above)")],
                        passed: false,
                    }
                });
                if sender.send((index, report)).is_err() {
                    break;
                }
            });
        }
        drop(sender);
        // Reports wait here until every run before them in the grid has printed.
        let mut finished: std::collections::BTreeMap<usize, RunReport> = Default::default();
        let mut printed = 0usize;
        for (done, (index, report)) in receiver.iter().enumerate() {
            let elapsed = started.elapsed().as_secs_f64();
            let left = elapsed / (done + 1) as f64 * (grid.len() - done - 1) as f64;
            eprintln!(
                "  [{}/{}] {} ({:.0} s, about {:.0} s left)",
                done + 1,
                grid.len(),
                report.summary,
                elapsed,
                left
            );
            for failure in &report.failures {
                eprintln!("FAILED {failure}");
            }
            if !report.passed {
                failed += 1;
            }
            finished.insert(index, report);
            while let Some(report) = finished.remove(&printed) {
                println!("{}", report.summary);
                for failure in &report.failures {
                    println!("failure: {failure}");
                }
                printed += 1;
            }
        }
    });
    println!(
        "swept {} runs: {} passed, {failed} failed ({:.0} s)",
        grid.len(),
        grid.len() - failed,
        started.elapsed().as_secs_f64()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The crash harness's settings for one combination.
fn crash_config(args: &CrashTestArgs, combination: &Combination) -> CrashConfig {
    let mut config = CrashConfig::small(combination.seed, combination.preset)
        .with_durability(combination.mode)
        .with_controller(combination.controller);
    config.commands = args.commands;
    config
}

/// How reports name a run.
fn describe(config: &CrashConfig) -> String {
    format!(
        "seed {}, preset {}, mode {}, controller {}, {} commands",
        config.seed,
        config.preset.name(),
        config.mode_name(),
        crash::controller_name(config.controller),
        config.commands
    )
}

/// Runs one combination. `verbose` prints its start and, for cuts it chooses itself, its
/// progress to standard error.
fn run_one(args: &CrashTestArgs, combination: &Combination, verbose: bool) -> RunReport {
    let config = crash_config(args, combination);
    let names = describe(&config);
    let heading = format!("kvssd crash-test: {names}");
    if args.at.is_none() && combination.mode != Durability::WriteAheadLog(SyncPolicy::EveryCommand)
    {
        // Power-loss protection is cut between commands, and the other sync policies promise a
        // prefix of the commands: the harness chooses those crash points itself.
        if verbose {
            eprintln!("{heading}");
        }
        let outcome = crash::crash_pass_with_progress(
            &config,
            CrashPoints::Sample(args.points),
            &mut |outcome, planned| {
                let done = outcome.crash_points;
                if verbose && (done % (planned / 10).max(1) == 0 || done == planned) {
                    eprintln!(
                        "  {done} of {planned} crash points run, {} survived",
                        outcome.survived
                    );
                }
            },
        );
        return RunReport {
            summary: format!(
                "survived {} of {} crash points ({names}, {} flash operations)",
                outcome.survived, outcome.crash_points, outcome.workload_operations
            ),
            passed: outcome.failures.is_empty() && outcome.survived == outcome.crash_points,
            failures: outcome.failures,
        };
    }
    let total = match crash::workload_operations(&config) {
        Ok(total) => total,
        Err(error) => {
            let failure = format!("{names}: the workload without a cut failed: {error}");
            return RunReport {
                summary: format!("survived 0 of 0 crash points ({names})"),
                failures: vec![failure],
                passed: false,
            };
        }
    };
    let cuts: Vec<u64> = match args.at {
        Some(at) => vec![at],
        None if args.points >= total => (0..total).collect(),
        None => sample(combination.seed, args.points, total),
    };
    if verbose {
        eprintln!(
            "{heading}: {total} flash operations, {} crash points",
            cuts.len()
        );
    }
    let mut survived = 0u64;
    let mut failures = Vec::new();
    let step = (cuts.len() / 10).max(1);
    for (done, &cut) in cuts.iter().enumerate() {
        match crash::crash_point(&config, cut) {
            Ok(_) => survived += 1,
            Err(error) => {
                let line = format!(
                    "seed {} preset {} cut after {cut}: {error} (replay: {})",
                    combination.seed,
                    combination.preset.name(),
                    crash::replay_command(&config, cut)
                );
                if verbose {
                    eprintln!("FAILED {line}");
                }
                failures.push(line);
            }
        }
        if verbose && ((done + 1) % step == 0 || done + 1 == cuts.len()) {
            eprintln!(
                "  {} of {} crash points run, {} survived",
                done + 1,
                cuts.len(),
                survived
            );
        }
    }
    RunReport {
        summary: format!(
            "survived {survived} of {} crash points ({names}, {total} flash operations)",
            cuts.len()
        ),
        passed: failures.is_empty(),
        failures,
    }
}

/// A seeded sample of `count` distinct crash points below `total` (in increasing order).
fn sample(seed: u64, count: u64, total: u64) -> Vec<u64> {
    let mut state = seed ^ 0x5eed_c4a5_4e57;
    let mut chosen = std::collections::BTreeSet::new();
    while (chosen.len() as u64) < count.min(total) {
        // SplitMix64.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        chosen.insert((z ^ (z >> 31)) % total);
    }
    chosen.into_iter().collect()
}
