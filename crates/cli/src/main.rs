//! `kvssd`: the command-line program.
//!
//! Exit codes: 0 on success, 1 when the work itself fails, 2 for a bad command line (always one line on
//! standard error).

mod args;
mod bench;
mod crash_test;
mod image;
mod oltp;
mod progress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kvssd_bench::figures;
use kvssd_bench::flash_bench::{self, FlashBenchConfig};
use kvssd_bench::sim_speed;

use crate::args::{
    FiguresArgs, FlashBenchArgs, GcArgs, KamlMicroArgs, SeekArgs, ServeArgs, SimSpeedArgs, YcsbArgs,
};
use crate::bench::{run_gc, run_kaml_micro, run_seek, run_ycsb};

/// jemalloc rather than the system allocator: a simulated run allocates and frees small buffers
/// (keys, values, merge outputs, calendar entries) at a high rate, and glibc's allocator took about
/// 40% of a Load's time. (mimalloc was as fast but kept each exited thread's memory, so `kvssd
/// serve`'s resident memory grew with the connections it had closed.) Its options are compiled in
/// from `.cargo/config.toml`.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    /// Run the workload benchmarks (YCSB, ...) on simulated devices, preset after preset.
    #[command(subcommand)]
    Bench(BenchCommand),
    #[command(flatten)]
    Image(image::ImageCommand),
    /// Cut power at flash operations of a seeded workload, recover, and check nothing acknowledged
    /// was lost; prints the crash points survived.
    CrashTest(crash_test::CrashTestArgs),
    /// Serve a device over TCP in RESP2, the Redis protocol (see docs/server.md).
    Serve(Box<ServeArgs>),
    /// Turn benchmarks' JSON into documents.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Run TPC-B from several threads on a file image, printing each acknowledged commit (for the
    /// SIGKILL test).
    #[command(hide = true)]
    TpcbLoop(Box<oltp::TpcbLoopArgs>),
}

#[derive(Debug, Subcommand)]
enum ReportCommand {
    /// Write docs/figures.md: tables of every run given, each headed by its command and seed.
    Figures(FiguresArgs),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// YCSB Load and A-F, as PinK's evaluation runs them, side by side on identical fresh devices.
    Ycsb(Box<YcsbArgs>),
    /// GC stress (PinK §5.2): load, then uniformly random overwrites; write amplification over time.
    Gc(Box<GcArgs>),
    /// db_bench SeekRandom on iterators (IterKVSSD): Seek, then Nexts, per prefetch degree.
    Seek(Box<SeekArgs>),
    /// KAML's micro-benchmarks on a kaml namespace: Fetch/Update/Insert by value size, batch sizes, logs.
    KamlMicro(Box<KamlMicroArgs>),
    /// TPC-B AccountUpdate through the host layer: KAML's commit path and a conventional one, by
    /// lock granularity and cache hit ratio (KAML Fig. 9).
    Tpcb(Box<oltp::TpcbArgs>),
    /// TPC-C NewOrder and Payment through the host layer, each alone: KAML's commit path and a
    /// conventional one, by lock granularity and cache hit ratio (KAML Fig. 9).
    Tpcc(Box<oltp::TpccArgs>),
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
        Command::Image(command) => image::run(command),
        Command::CrashTest(args) => crash_test::run(args),
        Command::Bench(BenchCommand::Ycsb(args)) => run_ycsb(*args),
        Command::Bench(BenchCommand::Gc(args)) => run_gc(*args),
        Command::Bench(BenchCommand::Seek(args)) => run_seek(*args),
        Command::Bench(BenchCommand::KamlMicro(args)) => run_kaml_micro(*args),
        Command::Bench(BenchCommand::Tpcb(args)) => oltp::run_tpcb(*args),
        Command::Bench(BenchCommand::Tpcc(args)) => oltp::run_tpcc(*args),
        Command::Report(ReportCommand::Figures(args)) => run_figures(args),
        Command::Serve(args) => run_serve(*args),
        Command::TpcbLoop(args) => oltp::run_tpcb_loop(*args),
    }
}

fn run_serve(args: ServeArgs) -> ExitCode {
    let source = match args.path {
        Some(path) => kvssd_server::Source::Image {
            path,
            profile: args.profile,
            blocks_per_die: args.blocks_per_die,
        },
        None if !args.simulated => {
            eprintln!("kvssd: serve needs an image PATH, or --simulated (see kvssd serve --help)");
            return ExitCode::from(2);
        }
        // A simulated device keeps every page it writes in memory: its size is asked for, never
        // assumed (PinK's whole card would be 64 GiB of RAM once written).
        None => match args.profile {
            Some(profile) => kvssd_server::Source::Simulated {
                profile,
                blocks_per_die: args.blocks_per_die,
            },
            None => {
                eprintln!("kvssd: --simulated needs --profile (test_min, or pink with --blocks-per-die to size it)");
                return ExitCode::from(2);
            }
        },
    };
    let config = kvssd_server::Config {
        source,
        bind: args.bind,
        port: args.port,
        password: args.password,
        clients_max: args.max_clients,
        client_buffer_bytes: args.client_buffer_bytes,
        sync: args.sync,
        databases: args.databases,
        preset: args.preset,
        idle_timeout: (args.timeout > 0).then(|| std::time::Duration::from_secs(args.timeout)),
        dram_budget_bytes: args.cache.bytes(),
    };
    match kvssd_server::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error @ kvssd_server::ServerError::Config(_)) => {
            eprintln!("kvssd: {error}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("kvssd: {error}");
            ExitCode::FAILURE
        }
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

fn run_figures(args: FiguresArgs) -> ExitCode {
    if args.json.len() != args.command.len() {
        eprintln!(
            "kvssd: give one --command per --json ({} --json, {} --command)",
            args.json.len(),
            args.command.len()
        );
        return ExitCode::from(2);
    }
    let mut runs = Vec::new();
    for (path, command) in args.json.iter().zip(args.command) {
        let json = match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text),
            Err(error) => {
                eprintln!("kvssd: cannot read {}: {error}", path.display());
                return ExitCode::FAILURE;
            }
        };
        match json {
            Ok(json) => runs.push(figures::FiguresRun { command, json }),
            Err(error) => {
                eprintln!("kvssd: {} is not JSON: {error}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let markdown = match figures::markdown(&runs) {
        Ok(markdown) => markdown,
        Err(error) => {
            eprintln!("kvssd: {error}");
            return ExitCode::FAILURE;
        }
    };
    match std::fs::write(&args.out, markdown) {
        Ok(()) => {
            eprintln!("wrote {}", args.out.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("kvssd: cannot write {}: {error}", args.out.display());
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
