//! `kvssd`: the command-line program.
//!
//! Exit codes: 0 on success, 1 when the work itself fails, 2 for a bad command line (always one line on
//! standard error).

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use kvssd_bench::flash_bench::{self, FlashBenchConfig, Pattern};
use kvssd_bench::sim_speed;
use kvssd_flash::Profile;

/// kvssd: a key-value SSD in software, over simulated NAND flash or a file.
#[derive(Debug, Parser)]
#[command(name = "kvssd", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Drive the simulated NAND array directly and print simulated IOPS, bandwidth and latency.
    FlashBench(FlashBenchArgs),
    /// Compare the simulator's page-read speed with a plain random memory copy on this machine.
    SimSpeed(SimSpeedArgs),
}

#[derive(Debug, Args)]
struct FlashBenchArgs {
    /// Access pattern: randread, seqwrite, randwrite or mixed.
    #[arg(long, default_value = "randread", value_parser = parse_pattern)]
    pattern: Pattern,
    /// Closed-loop clients, each with one operation outstanding.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    qd: u32,
    /// Timed operations.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    ops: u64,
    /// Device profile: pink or test_min.
    #[arg(long, default_value = "pink", value_parser = parse_profile)]
    profile: Profile,
    /// Override the profile's blocks per die (its capacity).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    blocks_per_die: Option<u32>,
    /// Share of reads in the mixed pattern, in percent.
    #[arg(long, default_value_t = 70, value_parser = clap::value_parser!(u32).range(0..=100))]
    read_percent: u32,
    /// Seed of the address generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Verify the page checksum of every read (by default ram media verifies only pages a fault may
    /// have touched).
    #[arg(long)]
    verify_every_read: bool,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SimSpeedArgs {
    /// Random page operations for each of the two measurements.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    ops: u64,
    /// Seed of the address generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    json: bool,
}

fn parse_pattern(name: &str) -> Result<Pattern, String> {
    Pattern::by_name(name).ok_or_else(|| {
        format!(
            "unknown pattern (expected one of {})",
            Pattern::NAMES.join(", ")
        )
    })
}

fn parse_profile(name: &str) -> Result<Profile, String> {
    Profile::by_name(name).ok_or_else(|| {
        format!(
            "unknown profile (expected one of {})",
            Profile::NAMES.join(", ")
        )
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            use clap::error::ErrorKind;
            match error.kind() {
                // Help and version are answers, not errors.
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = error.print();
                    return ExitCode::SUCCESS;
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                | ErrorKind::MissingSubcommand => {
                    eprintln!("kvssd: a command is required (see kvssd --help)");
                    return ExitCode::from(2);
                }
                _ => {}
            }
            let rendered = error.to_string();
            let first_line = rendered.lines().next().unwrap_or("invalid command line");
            eprintln!(
                "kvssd: {} (see kvssd --help)",
                first_line.trim_start_matches("error: ")
            );
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::FlashBench(args) => run_flash_bench(args),
        Command::SimSpeed(args) => run_sim_speed(args),
    }
}

fn run_flash_bench(args: FlashBenchArgs) -> ExitCode {
    let mut profile = args.profile;
    if let Some(blocks_per_die) = args.blocks_per_die {
        profile.geometry.blocks_per_die = blocks_per_die;
        if let Err(error) = profile.geometry.validate() {
            eprintln!("kvssd: {error}");
            return ExitCode::from(2);
        }
    }
    let config = FlashBenchConfig {
        profile: profile.clone(),
        pattern: args.pattern,
        queue_depth: args.qd,
        operations: args.ops,
        seed: args.seed,
        read_percent: args.read_percent,
        verify_every_read: args.verify_every_read,
    };
    if let Err(error) = config.validate() {
        eprintln!("kvssd: {error}");
        return ExitCode::from(2);
    }
    if !args.json {
        eprintln!(
            "kvssd flash-bench: profile {} [{}], pattern {}, qd {}, ops {}, seed {}",
            profile.name,
            profile.geometry,
            args.pattern.name(),
            args.qd,
            args.ops,
            args.seed
        );
    }
    match flash_bench::run(&config) {
        Ok(report) => {
            if args.json {
                print_json(&report)
            } else {
                println!("{report}");
                ExitCode::SUCCESS
            }
        }
        Err(flash_bench::FlashBenchError::Config(message)) => {
            eprintln!("kvssd: {message}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("kvssd: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run_sim_speed(args: SimSpeedArgs) -> ExitCode {
    if !args.json {
        eprintln!(
            "kvssd sim-speed: {} random 8 KiB page copies, then {} simulated random page reads (pink, ram media, one thread), seed {}",
            args.ops, args.ops, args.seed
        );
    }
    match sim_speed::run(args.ops, args.seed) {
        Ok(report) => {
            if args.json {
                return print_json(&report);
            }
            println!(
                "random {} B memory copies ({} MiB region)   {:>12.0} per wall-clock second",
                report.page_bytes,
                report.region_bytes >> 20,
                report.memcpy_per_s
            );
            println!(
                "simulated random page reads (flash model)   {:>12.0} per wall-clock second   ratio {:.2}",
                report.sim_reads_per_s, report.ratio
            );
            println!(
                "  the same, checksum verified on every read {:>12.0} per wall-clock second   ratio {:.2}",
                report.sim_reads_verified_per_s, report.ratio_verified
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("kvssd: {error}");
            ExitCode::FAILURE
        }
    }
}

fn print_json(value: &impl serde::Serialize) -> ExitCode {
    match serde_json::to_string(value) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("kvssd: cannot encode the report as JSON: {error}");
            ExitCode::FAILURE
        }
    }
}
