//! `kvssd`: the command-line program.
//!
//! Exit codes: 0 on success, 1 when the work itself fails, 2 for a bad command line (always one line on
//! standard error).

mod crash_test;
mod image;

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
    /// Run the workload benchmarks (YCSB, ...) on simulated devices, preset after preset.
    #[command(subcommand)]
    Bench(BenchCommand),
    #[command(flatten)]
    Image(image::ImageCommand),
    /// Cut power at flash operations of a seeded workload, recover, and check nothing acknowledged
    /// was lost; prints the crash points survived.
    CrashTest(crash_test::CrashTestArgs),
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
}

/// Where a benchmark writes its results besides the terminal.
#[derive(Debug, Args)]
struct OutputArgs {
    /// Write the results as one JSON object to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Write plots (SVG) and a self-contained HTML page into this directory.
    #[arg(long)]
    report: Option<std::path::PathBuf>,
}

/// How a benchmark of several presets runs.
#[derive(Debug, Args)]
struct RunArgs {
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Presets simulated at once, each on its own thread (figures do not depend on it).
    #[arg(long, default_value_t = default_threads(), value_parser = parse_threads)]
    threads: usize,
}

#[derive(Debug, Args)]
struct KamlMicroArgs {
    /// Value sizes of the Fetch / Update / Insert experiment, comma-separated.
    #[arg(long, default_value = "512,1024,2048,4096", value_delimiter = ',', value_parser = parse_value_bytes)]
    value_sizes: Vec<usize>,
    /// Records per atomic batch in the batch experiment, comma-separated.
    #[arg(long, default_value = "1,2,4,8", value_delimiter = ',', value_parser = parse_batch)]
    batch_sizes: Vec<usize>,
    /// Logs the namespace writes to in the logs experiment, comma-separated (at most the dies).
    #[arg(long, default_value = "16,32,64", value_delimiter = ',', value_parser = parse_logs)]
    logs: Vec<u32>,
    /// Records inserted (the Insert experiment and the data set of Update and Fetch).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    records: u64,
    /// Commands of each Update and Fetch run.
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..))]
    ops: u64,
    /// Closed-loop clients (KAML's bandwidth runs use 8 host threads).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    clients: u32,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
struct SeekArgs {
    /// LSM presets, comma-separated.
    #[arg(long, default_value = "pink", value_delimiter = ',')]
    presets: Vec<String>,
    /// Value prefetch degrees D, comma-separated; each runs on the same loaded device.
    #[arg(long, default_value = "0,8", value_delimiter = ',')]
    prefetch: Vec<usize>,
    /// Nexts after each Seek.
    #[arg(long, default_value_t = 100, value_parser = parse_scan_length)]
    scan_length: usize,
    /// Value size, bytes.
    #[arg(long, default_value_t = 4096, value_parser = parse_value_bytes)]
    value_bytes: usize,
    /// Keys loaded.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    keys: u64,
    /// Seeks per prefetch degree.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..))]
    seeks: u64,
    /// Turn index prefetch off.
    #[arg(long)]
    no_index_prefetch: bool,
    /// Seed of the load order and the seek keys.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Args)]
struct GcArgs {
    /// Engine presets, comma-separated (pink-gcrewrite is pink with GC rewriting meta segments).
    #[arg(
        long,
        default_value = "pink,pink-gcrewrite,lightstore",
        value_delimiter = ',',
        value_parser = parse_bench_preset
    )]
    presets: Vec<String>,
    /// Benchmark profile: default or paper.
    #[arg(long, default_value = "default", value_parser = parse_bench_profile)]
    profile: kvssd_bench::ycsb::BenchProfile,
    /// Size the card: blocks per die (default profile: 32, PinK's card: 512). The keys loaded, L0 and
    /// L1 scale with it, keeping the card as full and the tree the same shape (--records still wins).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    blocks_per_die: Option<u32>,
    /// Override the number of keys loaded.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    records: Option<u64>,
    /// Overwrites after the load (default: 100/44 per key, as PinK's 100M over 44M pairs).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    overwrites: Option<u64>,
    /// Seed of every request stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Args)]
struct YcsbArgs {
    /// Presets, comma-separated, each on its own identical fresh device (pink, pink-noopt, pink-range,
    /// pink-gcrewrite, lightstore, hash, kaml).
    #[arg(long, default_value = "pink,lightstore,hash", value_delimiter = ',', value_parser = parse_bench_preset)]
    presets: Vec<String>,
    /// Workloads, comma-separated (load, a, b, c, d, e, f). Load always runs first to build the data set.
    #[arg(long, default_value = "load,a,b,c,d,e,f", value_delimiter = ',', value_parser = parse_workload)]
    workloads: Vec<kvssd_bench::workload::WorkloadSpec>,
    /// Benchmark profile: default (PinK's setup scaled to 4 GiB, same shape) or paper (64 GiB, 44M pairs).
    #[arg(long, default_value = "default", value_parser = parse_bench_profile)]
    profile: kvssd_bench::ycsb::BenchProfile,
    /// Size the card: blocks per die (default profile: 32, PinK's card: 512). The keys loaded, L0 and
    /// L1 scale with it, keeping the card as full and the tree the same shape (--records still wins).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    blocks_per_die: Option<u32>,
    /// Override the number of keys loaded.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    records: Option<u64>,
    /// Override the requests per workload.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    ops: Option<u64>,
    /// Override the number of closed-loop clients (64 by default, PinK's queue depth).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    clients: Option<u32>,
    /// Seed of every request stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    run: RunArgs,
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

fn parse_workload(name: &str) -> Result<kvssd_bench::workload::WorkloadSpec, String> {
    kvssd_bench::workload::WorkloadSpec::by_name(name).ok_or_else(|| {
        format!(
            "unknown workload (expected one of {})",
            kvssd_bench::workload::WorkloadSpec::NAMES.join(", ")
        )
    })
}

fn parse_bench_profile(name: &str) -> Result<kvssd_bench::ycsb::BenchProfile, String> {
    kvssd_bench::ycsb::BenchProfile::by_name(name).ok_or_else(|| {
        format!(
            "unknown profile (expected one of {})",
            kvssd_bench::ycsb::BenchProfile::NAMES.join(", ")
        )
    })
}

/// A whole number from `low` to `high`, or the one-line reason it is not.
fn whole_number_in(text: &str, low: usize, high: usize) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(number) if (low..=high).contains(&number) => Ok(number),
        _ => Err(format!("must be a whole number from {low} to {high}")),
    }
}

fn parse_scan_length(text: &str) -> Result<usize, String> {
    whole_number_in(text, 1, 1_000_000)
}

fn parse_value_bytes(text: &str) -> Result<usize, String> {
    whole_number_in(text, 1, 2 << 20)
}

fn parse_batch(text: &str) -> Result<usize, String> {
    whole_number_in(text, 1, 1024)
}

/// Logs of the pink card: one per die.
fn parse_logs(text: &str) -> Result<u32, String> {
    whole_number_in(text, 1, 64).map(|logs| logs as u32)
}

fn parse_threads(text: &str) -> Result<usize, String> {
    whole_number_in(text, 1, 256)
}

fn parse_bench_preset(name: &str) -> Result<String, String> {
    let known = kvssd_bench::ycsb::preset_names();
    if known.contains(&name) {
        Ok(name.to_string())
    } else {
        Err(format!(
            "unknown preset (expected one of {})",
            known.join(", ")
        ))
    }
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
        Command::Image(command) => image::run(command),
        Command::CrashTest(args) => crash_test::run(args),
        Command::Bench(BenchCommand::Ycsb(args)) => run_ycsb(*args),
        Command::Bench(BenchCommand::Gc(args)) => run_gc(*args),
        Command::Bench(BenchCommand::Seek(args)) => run_seek(*args),
        Command::Bench(BenchCommand::KamlMicro(args)) => run_kaml_micro(*args),
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

fn run_ycsb(args: YcsbArgs) -> ExitCode {
    use kvssd_bench::ycsb;
    let mut profile = match sized(args.profile, args.blocks_per_die) {
        Ok(profile) => profile,
        Err(code) => return code,
    };
    if let Some(records) = args.records {
        profile.records = records;
    }
    if let Some(ops) = args.ops {
        profile.operations = ops;
    }
    if let Some(clients) = args.clients {
        profile.clients = clients;
    }
    let config = ycsb::YcsbConfig {
        presets: args.presets,
        workloads: args.workloads,
        seed: args.seed,
        profile,
    };
    let workload_names: Vec<&str> = config.workloads.iter().map(|spec| spec.name).collect();
    eprintln!(
        "kvssd bench ycsb: profile {} [{}, L0 {} KiB, L1 {} entries], {} records of {} B keys and {} B values, {} requests per workload, {} clients, presets {}, workloads {}, seed {} (simulated time)",
        config.profile.name,
        config.profile.flash.geometry,
        config.profile.l0_bytes >> 10,
        config.profile.l1_entries,
        config.profile.records,
        config.profile.key_bytes,
        config.profile.value_bytes,
        config.profile.operations,
        config.profile.clients,
        config.presets.join(","),
        workload_names.join(","),
        config.seed
    );
    let started = std::time::Instant::now();
    let report = match run_presets_with_bars(&config.presets, &args.run, |threads, progress| {
        ycsb::run(&config, threads, progress)
    }) {
        Ok(report) => report,
        Err(code) => return code,
    };
    write_outputs(
        &report,
        started,
        args.output.json.as_deref(),
        args.output.report.as_deref(),
    )
}

/// Runs a benchmark of several presets with a progress bar per preset; a failure is printed and
/// becomes the exit code.
fn run_presets_with_bars(
    presets: &[String],
    run: &RunArgs,
    benchmark: impl FnOnce(
        usize,
        &(dyn Fn(&str, &str, u64, u64) + Sync),
    ) -> Result<kvssd_bench::report::BenchReport, String>,
) -> Result<kvssd_bench::report::BenchReport, ExitCode> {
    let bars = PresetBars::new(presets, run.quiet);
    let result = benchmark(run.threads, &|preset, phase, done, total| {
        bars.update(preset, phase, done, total)
    });
    bars.finish();
    result.map_err(|error| {
        eprintln!("kvssd: {error}");
        ExitCode::FAILURE
    })
}

/// One progress bar per preset, each naming the workload it is in.
struct PresetBars {
    bars: std::collections::HashMap<String, indicatif::ProgressBar>,
    _multi: indicatif::MultiProgress,
}

impl PresetBars {
    fn new(presets: &[String], quiet: bool) -> PresetBars {
        let multi = indicatif::MultiProgress::new();
        if quiet {
            multi.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        let style = indicatif::ProgressStyle::with_template(
            "{prefix:>24} [{bar:40}] {pos}/{len} requests ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ");
        let bars = presets
            .iter()
            .map(|preset| {
                let bar = multi.add(indicatif::ProgressBar::new(0));
                bar.set_style(style.clone());
                bar.set_prefix(format!("{preset} (waiting)"));
                (preset.clone(), bar)
            })
            .collect();
        PresetBars {
            bars,
            _multi: multi,
        }
    }

    fn update(&self, preset: &str, workload: &str, done: u64, total: u64) {
        if let Some(bar) = self.bars.get(preset) {
            let prefix = format!("{preset} {workload}");
            if bar.prefix() != prefix {
                bar.set_prefix(prefix);
                bar.reset();
                bar.set_length(total);
            }
            bar.set_position(done);
        }
    }

    fn finish(&self) {
        for bar in self.bars.values() {
            bar.finish_and_clear();
        }
    }
}

/// A bench profile on a card of `blocks_per_die`, if given; a bad size is reported as a usage error.
fn sized(
    profile: kvssd_bench::ycsb::BenchProfile,
    blocks_per_die: Option<u32>,
) -> Result<kvssd_bench::ycsb::BenchProfile, ExitCode> {
    match blocks_per_die {
        None => Ok(profile),
        Some(blocks) => profile.with_blocks_per_die(blocks).map_err(|error| {
            eprintln!("kvssd: {error}");
            ExitCode::from(2)
        }),
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

fn run_gc(args: GcArgs) -> ExitCode {
    use kvssd_bench::gc;
    let mut profile = match sized(args.profile, args.blocks_per_die) {
        Ok(profile) => profile,
        Err(code) => return code,
    };
    if let Some(records) = args.records {
        profile.records = records;
    }
    let overwrites = args
        .overwrites
        .unwrap_or((profile.records as f64 * gc::PINK_OVERWRITES_PER_KEY) as u64);
    let config = gc::GcConfig {
        presets: args.presets,
        overwrites,
        seed: args.seed,
        profile,
    };
    eprintln!(
        "kvssd bench gc: profile {} [{}, L0 {} KiB, L1 {} entries], {} records, then {} uniformly random overwrites, presets {}, seed {} (simulated time)",
        config.profile.name,
        config.profile.flash.geometry,
        config.profile.l0_bytes >> 10,
        config.profile.l1_entries,
        config.profile.records,
        config.overwrites,
        config.presets.join(","),
        config.seed
    );
    let started = std::time::Instant::now();
    let report = match run_presets_with_bars(&config.presets, &args.run, |threads, progress| {
        gc::run(&config, threads, progress)
    }) {
        Ok(report) => report,
        Err(code) => return code,
    };
    for result in &report.results {
        if let Some(params) = &result.params {
            let get = |key: &str| {
                params
                    .get(key)
                    .and_then(|value| value.as_u64())
                    .unwrap_or(0)
            };
            let index_pages = get("compaction_pages_written")
                + get("index_pages_written")
                + get("gc_meta_pages_moved")
                + get("gc_segments_rewritten");
            println!(
                "{:<15} WAF {:.2}   user pages {}   GC pages {}   index pages written (compaction + GC index updates) {}   records re-inserted {}   rewritten {}",
                result.preset,
                result.phase_waf.unwrap_or(f64::NAN),
                get("user_pages_written"),
                get("gc_pages_written"),
                index_pages,
                get("gc_records_reinserted"),
                get("gc_records_rewritten"),
            );
        }
    }
    write_outputs(
        &report,
        started,
        args.output.json.as_deref(),
        args.output.report.as_deref(),
    )
}

fn run_seek(args: SeekArgs) -> ExitCode {
    use kvssd_bench::seek;
    if let Some(unknown) = args
        .presets
        .iter()
        .find(|preset| preset.parse::<kvssd_engine::Preset>().is_err())
    {
        eprintln!("kvssd: '{unknown}' is not an LSM preset (SeekRandom needs key order: pink, pink-noopt, pink-range, lightstore)");
        return ExitCode::from(2);
    }
    if let Some(degree) = args.prefetch.iter().find(|&&degree| degree > 64) {
        eprintln!("kvssd: prefetch degree {degree} is above the limit of 64");
        return ExitCode::from(2);
    }
    let config = seek::SeekConfig {
        profile: kvssd_bench::ycsb::BenchProfile::scaled(),
        presets: args.presets,
        degrees: args.prefetch,
        keys: args.keys,
        value_bytes: args.value_bytes,
        scan_length: args.scan_length,
        seeks: args.seeks,
        index_prefetch: !args.no_index_prefetch,
        seed: args.seed,
    };
    eprintln!(
        "kvssd bench seek: profile default [{}], {} keys of {} B values, {} seeks of {} nexts per degree, prefetch degrees {:?}, index prefetch {}, presets {}, seed {} (simulated time)",
        config.profile.flash.geometry,
        config.keys,
        config.value_bytes,
        config.seeks,
        config.scan_length,
        config.degrees,
        if config.index_prefetch { "on" } else { "off" },
        config.presets.join(","),
        config.seed
    );
    let started = std::time::Instant::now();
    let report = match run_presets_with_bars(&config.presets, &args.run, |threads, progress| {
        seek::run(&config, threads, progress)
    }) {
        Ok(report) => report,
        Err(code) => return code,
    };
    for result in &report.results {
        if let (Some(next), Some(seek)) = (&result.next_latency_us, &result.seek_latency_us) {
            println!(
                "{:<11} {:<22} per Next: avg {:>7.1} us  p99 {:>7.1}  p99.9 {:>7.1}   per Seek: avg {:>7.1} us   flash reads per seek+scan {:.1}",
                result.preset,
                result.note.as_deref().unwrap_or("").split(':').next().unwrap_or(""),
                next.avg,
                next.p99,
                next.p999,
                seek.avg,
                result.flash_reads_per_query.avg
            );
        }
    }
    write_outputs(
        &report,
        started,
        args.output.json.as_deref(),
        args.output.report.as_deref(),
    )
}

fn run_kaml_micro(args: KamlMicroArgs) -> ExitCode {
    use kvssd_bench::kaml_micro;
    let config = kaml_micro::KamlMicroConfig {
        value_sizes: args.value_sizes,
        batch_sizes: args.batch_sizes,
        log_counts: args.logs,
        records: args.records,
        operations: args.ops,
        clients: args.clients,
        seed: args.seed,
        ..kaml_micro::KamlMicroConfig::default_config()
    };
    eprintln!(
        "kvssd bench kaml-micro: pink card [{}], {} records of {} B keys, {} commands per update/fetch run, {} clients, value sizes {:?}, batch sizes {:?}, logs {:?}, seed {} (simulated time)",
        config.flash.geometry,
        config.records,
        config.key_bytes,
        config.operations,
        config.clients,
        config.value_sizes,
        config.batch_sizes,
        config.log_counts,
        config.seed
    );
    let started = std::time::Instant::now();
    let result = kaml_micro::run(&config, &mut |experiment, step, steps| {
        eprintln!("  {experiment}: {}/{steps}", step + 1);
    });
    let report = match result {
        Ok(report) => report,
        Err(error) => {
            eprintln!("kvssd: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "{:<12} {:<8} {:>6} {:>6} {:>5} {:>12} {:>10} {:>10} {:>10}",
        "experiment", "op", "value", "batch", "logs", "records/s", "MB/s", "lat avg", "lat p99"
    );
    for result in &report.results {
        let params = result.params.clone().unwrap_or_default();
        let get = |key: &str| params.get(key).cloned().unwrap_or(serde_json::Value::Null);
        let latency = if result.workload == "fetch" {
            result.read_latency_us
        } else {
            result.write_latency_us
        };
        println!(
            "{:<12} {:<8} {:>6} {:>6} {:>5} {:>12.0} {:>10.1} {:>10.1} {:>10.1}",
            get("experiment").as_str().unwrap_or(""),
            result.workload,
            get("value_bytes"),
            get("batch")
                .as_u64()
                .map_or("-".to_string(), |batch| batch.to_string()),
            get("logs")
                .as_u64()
                .map_or("all".to_string(), |logs| logs.to_string()),
            result.throughput_kops * 1e3,
            get("bandwidth_mb_s").as_f64().unwrap_or(0.0),
            latency.avg,
            latency.p99
        );
    }
    write_outputs(
        &report,
        started,
        args.output.json.as_deref(),
        args.output.report.as_deref(),
    )
}

fn write_outputs(
    report: &kvssd_bench::report::BenchReport,
    started: std::time::Instant,
    json: Option<&std::path::Path>,
    plots: Option<&std::path::Path>,
) -> ExitCode {
    print!("{}", report.table());
    let requests: u64 = report.results.iter().map(|result| result.ops).sum();
    let wall = started.elapsed().as_secs_f64();
    println!(
        "simulator speed: {:.0} simulated requests per wall-clock second ({requests} reported requests plus loads in {wall:.1} s)",
        report
            .results
            .iter()
            .map(|result| result.sim_requests_per_wall_s)
            .sum::<f64>()
            / report.results.len().max(1) as f64
    );
    if let Some(path) = json {
        let written = serde_json::to_string_pretty(&report)
            .map_err(|error| error.to_string())
            .and_then(|json| std::fs::write(path, json + "\n").map_err(|error| error.to_string()));
        if let Err(error) = written {
            eprintln!("kvssd: cannot write {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    if let Some(directory) = plots {
        match report.write_plots(directory) {
            Ok(files) => println!(
                "wrote {} files into {} (open index.html)",
                files.len(),
                directory.display()
            ),
            Err(error) => {
                eprintln!(
                    "kvssd: cannot write plots into {}: {error}",
                    directory.display()
                );
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
