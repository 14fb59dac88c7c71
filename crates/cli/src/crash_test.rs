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
    /// Seed of the workload, the torn programs and the bit flips.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Crash points to run: every flash operation of the workload if it has this many or fewer,
    /// else a seeded sample of this many.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    points: u64,
    /// Engine preset of the workload's namespaces (pink, pink-noopt, pink-range, lightstore,
    /// pink-gcrewrite, hash, kaml, block, pink-hw).
    #[arg(long, default_value = "pink", value_parser = parse_preset)]
    preset: PresetKind,
    /// Durability protocol: wal (write-ahead log, sync per command; also wal/every-command),
    /// wal/group-commit-N, wal/none, or plp (power-loss protection: a dump at the cut).
    #[arg(long, default_value = "wal", value_parser = parse_mode)]
    mode: Durability,
    /// Controller model: interchangeable (flushes and merges complete inside the write that
    /// triggers them) or threads (they run as background jobs, so a cut can fall mid-merge).
    #[arg(long, default_value = "interchangeable", value_parser = crate::args::parse_controller)]
    controller: kvssd_flash::ControllerModel,
    /// Commands in the workload (CI runs 150).
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(1..=100_000).map(|n| n as usize))]
    commands: usize,
    /// Replay one crash point: cut after this many flash operations.
    #[arg(long)]
    at: Option<u64>,
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

/// Runs the crash test.
pub fn run(args: CrashTestArgs) -> ExitCode {
    let mut config = CrashConfig::small(args.seed, args.preset)
        .with_durability(args.mode)
        .with_controller(args.controller);
    config.commands = args.commands;
    if args.at.is_none() && args.mode != Durability::WriteAheadLog(SyncPolicy::EveryCommand) {
        // Power-loss protection is cut between commands, and the other sync policies promise a
        // prefix of the commands: the harness chooses those crash points itself.
        eprintln!(
            "kvssd crash-test: seed {} preset {} mode {} controller {} commands {}",
            args.seed,
            args.preset.name(),
            config.mode_name(),
            crash::controller_name(config.controller),
            args.commands
        );
        let points = CrashPoints::Sample(args.points);
        let outcome = crash::crash_pass(&config, points);
        println!(
            "survived {} of {} crash points (seed {}, preset {}, mode {}, controller {}, {} commands, {} flash operations)",
            outcome.survived,
            outcome.crash_points,
            args.seed,
            args.preset.name(),
            config.mode_name(),
            crash::controller_name(config.controller),
            args.commands,
            outcome.workload_operations
        );
        for failure in &outcome.failures {
            println!("failure: {failure}");
        }
        return if outcome.failures.is_empty() && outcome.survived == outcome.crash_points {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let total = match crash::workload_operations(&config) {
        Ok(total) => total,
        Err(error) => {
            eprintln!(
                "kvssd: seed {} preset {}: the workload without a cut failed: {error}",
                args.seed,
                args.preset.name()
            );
            return ExitCode::FAILURE;
        }
    };
    let cuts: Vec<u64> = match args.at {
        Some(at) => vec![at],
        None if args.points >= total => (0..total).collect(),
        None => sample(args.seed, args.points, total),
    };
    eprintln!(
        "kvssd crash-test: seed {} preset {} mode {} controller {} commands {}: {} flash operations, {} crash points",
        args.seed,
        args.preset.name(),
        config.mode_name(),
        crash::controller_name(config.controller),
        args.commands,
        total,
        cuts.len()
    );
    let mut survived = 0u64;
    let mut failures = Vec::new();
    let step = (cuts.len() / 10).max(1);
    for (done, &cut) in cuts.iter().enumerate() {
        match crash::crash_point(&config, cut) {
            Ok(_) => survived += 1,
            Err(error) => {
                let line = format!(
                    "seed {} preset {} cut after {cut}: {error} (replay: {})",
                    args.seed,
                    args.preset.name(),
                    crash::replay_command(&config, cut)
                );
                eprintln!("FAILED {line}");
                failures.push(line);
            }
        }
        if (done + 1) % step == 0 || done + 1 == cuts.len() {
            eprintln!(
                "  {} of {} crash points run, {} survived",
                done + 1,
                cuts.len(),
                survived
            );
        }
    }
    println!(
        "survived {survived} of {} crash points (seed {}, preset {}, mode {}, controller {}, {} commands, {total} flash operations)",
        cuts.len(),
        args.seed,
        args.preset.name(),
        config.mode_name(),
        crash::controller_name(config.controller),
        args.commands
    );
    if failures.is_empty() {
        return ExitCode::SUCCESS;
    }
    for failure in &failures {
        println!("failure: {failure}");
    }
    ExitCode::FAILURE
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
