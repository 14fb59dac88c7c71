//! The benchmark commands' arguments and the parsers that check them at the boundary.

use clap::Args;
use kvssd_bench::flash_bench::Pattern;
use kvssd_flash::Profile;

/// Where a benchmark writes its results besides the terminal.
#[derive(Debug, Args)]
pub(crate) struct OutputArgs {
    /// Write the results as one JSON object to this file.
    #[arg(long)]
    pub(crate) json: Option<std::path::PathBuf>,
    /// Write plots (SVG) and a self-contained HTML page into this directory.
    #[arg(long)]
    pub(crate) report: Option<std::path::PathBuf>,
}

/// How a benchmark of several presets runs.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// No progress bar.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Presets simulated at once, each on its own thread (figures do not depend on it; `ycsb`
    /// starts the hash presets first, as they take the longest).
    #[arg(long, default_value_t = default_threads(), value_parser = parse_threads)]
    pub(crate) threads: usize,
    /// Start even if the run's estimated memory exceeds what the system has available.
    #[arg(long)]
    pub(crate) no_memory_check: bool,
}

#[derive(Debug, Args)]
pub(crate) struct KamlMicroArgs {
    /// Record sizes of the Fetch / Update / Insert experiment, comma-separated (KAML Figs. 5, 6).
    #[arg(long, default_value = "64,256,1024,4096", value_delimiter = ',', value_parser = parse_value_bytes)]
    pub(crate) value_sizes: Vec<usize>,
    /// Records per atomic batch in the batch experiment, comma-separated (Fig. 7).
    #[arg(long, default_value = "1,2,4,8", value_delimiter = ',', value_parser = parse_batch)]
    pub(crate) batch_sizes: Vec<usize>,
    /// Logs the namespace writes to in the logs experiment, comma-separated, at most the dies
    /// (Fig. 8).
    #[arg(long, default_value = "16,32,64", value_delimiter = ',', value_parser = parse_logs)]
    pub(crate) logs: Vec<u32>,
    /// Record size of the batch experiment.
    #[arg(long, default_value_t = 256, value_parser = parse_value_bytes)]
    pub(crate) value_bytes: usize,
    /// Record size of the logs experiment.
    #[arg(long, default_value_t = 4096, value_parser = parse_value_bytes)]
    pub(crate) logs_value_bytes: usize,
    /// Records inserted (the Insert experiment and the data set of Update and Fetch).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) records: u64,
    /// Records of the logs experiment's data set.
    #[arg(long, default_value_t = 25_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) logs_records: u64,
    /// kaml's per-log free-block lists (KAML §IV-E): a namespace on fewer logs keeps its data on
    /// their dies; false lets its logs borrow other dies' blocks.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub(crate) log_free_lists: bool,
    /// Commands of each Update and Fetch bandwidth run.
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) ops: u64,
    /// Commands of each single-client latency run (KAML measures latency with one thread).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) latency_ops: u64,
    /// Closed-loop clients of the bandwidth runs, one command outstanding each (KAML's bandwidth
    /// runs use 8 host threads).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) clients: u32,
    /// Load factor of kaml's fixed-size mapping table once the records are in (KAML Fig. 5:
    /// 0.1 to 0.7; Fig. 6: 0.4).
    #[arg(long, default_value_t = 0.4)]
    pub(crate) load_factor: f64,
    /// Controller time per command besides its records, nanoseconds, on both presets.
    #[arg(long, default_value_t = 4_000)]
    pub(crate) command_ns: u64,
    /// Controller time per record of a command, nanoseconds, on both presets.
    #[arg(long, default_value_t = 11_000)]
    pub(crate) operation_ns: u64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
}

#[derive(Debug, Args)]
pub(crate) struct SeekArgs {
    /// LSM presets, comma-separated.
    #[arg(long, default_value = "pink", value_delimiter = ',')]
    pub(crate) presets: Vec<String>,
    /// Value prefetch degrees D, comma-separated; each runs on the same loaded device.
    #[arg(long, default_value = "0,8", value_delimiter = ',')]
    pub(crate) prefetch: Vec<usize>,
    /// Nexts after each Seek, comma-separated; each runs on the same loaded device.
    #[arg(long, default_value = "100", value_delimiter = ',', value_parser = parse_scan_length)]
    pub(crate) scan_length: Vec<usize>,
    /// Value sizes, bytes, comma-separated; each is loaded on its own fresh device. With --keys,
    /// the data must fit in 80% of the card's user capacity, and the indexing DRAM must hold the
    /// level lists of a card full of such pairs (small values may need --dram-fraction).
    #[arg(long, default_value = "4096", value_delimiter = ',', value_parser = parse_value_bytes)]
    pub(crate) value_bytes: Vec<usize>,
    /// Keys loaded.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) keys: u64,
    /// Seeks per combination of value size, scan length, index prefetch and prefetch degree.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) seeks: u64,
    /// Index prefetch settings, comma-separated (on, off): each runs on the same loaded device.
    #[arg(long, default_value = "on", value_delimiter = ',', value_parser = parse_on_off)]
    pub(crate) index_prefetch: Vec<bool>,
    /// Turn index prefetch off (the same as --index-prefetch off).
    #[arg(long, conflicts_with = "index_prefetch")]
    pub(crate) no_index_prefetch: bool,
    /// DRAM for indexing as a share of the card's capacity (the default profile's: 0.001, PinK's
    /// 0.1%).
    #[arg(long, default_value_t = 0.001, value_parser = parse_dram_fraction)]
    pub(crate) dram_fraction: f64,
    /// Key size, bytes: 12 and more are text keys ("user" and digits), 4 to 11 binary (IterKVSSD
    /// loads 4 B keys).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(4..=255))]
    pub(crate) key_bytes: u16,
    /// Size the card: blocks per die (default: 32, a 4 GiB card; 4096 makes a 512 GiB card, which
    /// IterKVSSD's 3M pairs of 128 KiB values need).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub(crate) blocks_per_die: Option<u32>,
    /// Where the simulated flash keeps its pages: ram (every page's bytes) or compact (values as
    /// their 16-byte descriptions, pages freed on erase: the same figures in a fraction of the
    /// memory). Default: ram.
    #[arg(long, value_parser = parse_media)]
    pub(crate) media: Option<kvssd_flash::MediaKind>,
    /// Seed of the load order and the seek keys.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    /// Engine presets, comma-separated (pink-gcrewrite is pink with GC rewriting meta segments).
    #[arg(
        long,
        default_value = "pink,pink-gcrewrite,lightstore",
        value_delimiter = ',',
        value_parser = parse_bench_preset
    )]
    pub(crate) presets: Vec<String>,
    /// Benchmark profile: default or paper.
    #[arg(long, default_value = "default", value_parser = parse_bench_profile)]
    pub(crate) profile: kvssd_bench::ycsb::BenchProfile,
    /// Size the card: blocks per die (default profile: 32, PinK's card: 512). The keys loaded, L0 and
    /// L1 scale with it, keeping the card as full and the tree the same shape (--records still wins).
    /// Per-die costs do not scale: below 13, the card cannot hold the profile's Load (refused).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub(crate) blocks_per_die: Option<u32>,
    /// Where the simulated flash keeps its pages: ram (every page's bytes) or compact (values as
    /// their 16-byte descriptions, pages freed on erase: the same figures in a fraction of the
    /// memory). Default: compact on the paper profile, ram otherwise.
    #[arg(long, value_parser = parse_media)]
    pub(crate) media: Option<kvssd_flash::MediaKind>,
    /// How the simulated controller runs its work: threads (PinK's prototype: a request thread,
    /// flush, compaction and GC as background jobs issued one operation per die at a time;
    /// docs/design.md, "The controller: threads and background work") or interchangeable (the
    /// model of earlier releases: any core takes any work, and a flush's cascade is booked when
    /// it is triggered).
    #[arg(long, default_value = "threads", value_parser = parse_controller)]
    pub(crate) controller: kvssd_flash::ControllerModel,
    /// Override the number of keys loaded.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) records: Option<u64>,
    /// Overwrites after the load (default: 100/44 per key, as PinK's 100M over 44M pairs).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) overwrites: Option<u64>,
    /// Seed of every request stream.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Debug, Args)]
pub(crate) struct YcsbArgs {
    /// Presets, comma-separated, each on its own identical fresh device (pink, pink-noopt, pink-range,
    /// pink-gcrewrite, pink-hw, lightstore, hash, kaml).
    #[arg(long, default_value = "pink,lightstore,hash", value_delimiter = ',', value_parser = parse_bench_preset)]
    pub(crate) presets: Vec<String>,
    /// Workloads, comma-separated (load, a, b, c, d, e, f). Load always runs first to build the data set.
    #[arg(long, default_value = "load,a,b,c,d,e,f", value_delimiter = ',', value_parser = parse_workload)]
    pub(crate) workloads: Vec<kvssd_bench::workload::WorkloadSpec>,
    /// Benchmark profile: default (PinK's setup scaled to 4 GiB, same shape) or paper (64 GiB, 44M pairs).
    #[arg(long, default_value = "default", value_parser = parse_bench_profile)]
    pub(crate) profile: kvssd_bench::ycsb::BenchProfile,
    /// Size the card: blocks per die (default profile: 32, PinK's card: 512). The keys loaded, L0 and
    /// L1 scale with it, keeping the card as full and the tree the same shape (--records still wins).
    /// Per-die costs do not scale: below 13, the card cannot hold the profile's Load (refused).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub(crate) blocks_per_die: Option<u32>,
    /// Where the simulated flash keeps its pages: ram (every page's bytes) or compact (values as
    /// their 16-byte descriptions, pages freed on erase: the same figures in a fraction of the
    /// memory). Default: compact on the paper profile, ram otherwise.
    #[arg(long, value_parser = parse_media)]
    pub(crate) media: Option<kvssd_flash::MediaKind>,
    /// How the simulated controller runs its work: threads (PinK's prototype: a request thread,
    /// flush, compaction and GC as background jobs issued one operation per die at a time;
    /// docs/design.md, "The controller: threads and background work") or interchangeable (the
    /// model of earlier releases: any core takes any work, and a flush's cascade is booked when
    /// it is triggered).
    #[arg(long, default_value = "threads", value_parser = parse_controller)]
    pub(crate) controller: kvssd_flash::ControllerModel,
    /// Override the number of keys loaded.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) records: Option<u64>,
    /// Override the requests per workload.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) ops: Option<u64>,
    /// Longest scan of workload E: scans are 1 to this many records, uniformly (YCSB's
    /// maxscanlength).
    #[arg(long, default_value_t = kvssd_bench::workload::SCAN_LENGTH_MAX, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) scan_length_max: u32,
    /// Override the number of closed-loop clients (64 by default, PinK's queue depth).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) clients: Option<u32>,
    /// Seed of every request stream.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Sweep the LSM-tree's height (PinK Fig. 13): heights h, comma-separated (h counts L0), each
    /// on its own fresh device with the same data, L0 and DRAM budget, for LSM presets. The
    /// profile's own height (5) keeps its tree (T = 10); any other h gets h - 1 levels below L0,
    /// the smallest size factor T with L0 pairs x T^(h-1) >= records, i.e.
    /// T = ceil((records / L0 pairs)^(1/(h-1))), and L1 = T x L0 pairs. Prints the plan (T, k
    /// pinned, worst-case index reads h - k - 1) beside flash and index reads per GET (avg,
    /// p99.99, max).
    #[arg(long, value_delimiter = ',', value_parser = parse_height, conflicts_with = "host")]
    pub(crate) heights: Vec<u32>,
    /// Run through the host layer instead (KAML Fig. 10): each request a one-record transaction
    /// through the record cache, on a `kaml` table (presets, profile and controller are not
    /// used; --records defaults to 100000 of 1 KiB, --ops to 20000, --clients to 16; no
    /// workload E: the host has no range scan).
    #[arg(long)]
    pub(crate) host: bool,
    /// With --host: cache hit ratios, comma-separated (the cache holds this share of the records).
    #[arg(long, default_value = "0.8,1.0", value_delimiter = ',', value_parser = crate::oltp::parse_hit_ratio)]
    pub(crate) hit_ratio: Vec<f64>,
    /// With --host: commit paths, comma-separated (kaml, conventional).
    #[arg(long, default_value = "kaml", value_delimiter = ',', value_parser = crate::oltp::parse_commit_path)]
    pub(crate) commit_path: Vec<kvssd_host::CommitPath>,
    /// With --host: records per lock, comma-separated.
    #[arg(long, default_value = "1", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) lock_granularity: Vec<u64>,
    /// With --host: bytes of every value.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub(crate) value_bytes: u64,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Debug, Args)]
pub(crate) struct FlashBenchArgs {
    /// Access pattern: randread, seqwrite, randwrite or mixed.
    #[arg(long, default_value = "randread", value_parser = parse_pattern)]
    pub(crate) pattern: Pattern,
    /// Closed-loop clients, each with one operation outstanding.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub(crate) qd: u32,
    /// Timed operations.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) ops: u64,
    /// Device profile: pink or test_min.
    #[arg(long, default_value = "pink", value_parser = parse_profile)]
    pub(crate) profile: Profile,
    /// Override the profile's blocks per die (its capacity).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub(crate) blocks_per_die: Option<u32>,
    /// Share of reads in the mixed pattern, in percent.
    #[arg(long, default_value_t = 70, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub(crate) read_percent: u32,
    /// Seed of the address generator.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Verify the page checksum of every read (by default ram and compact media verify only pages a
    /// fault may have touched).
    #[arg(long)]
    pub(crate) verify_every_read: bool,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct SimSpeedArgs {
    /// Random page operations for each of the two measurements.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) ops: u64,
    /// Seed of the address generator.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn parse_workload(name: &str) -> Result<kvssd_bench::workload::WorkloadSpec, String> {
    kvssd_bench::workload::WorkloadSpec::by_name(name).ok_or_else(|| {
        format!(
            "unknown workload (expected one of {})",
            kvssd_bench::workload::WorkloadSpec::NAMES.join(", ")
        )
    })
}

pub(crate) fn parse_controller(name: &str) -> Result<kvssd_flash::ControllerModel, String> {
    match name {
        "threads" => Ok(kvssd_flash::ControllerModel::Threads),
        "interchangeable" => Ok(kvssd_flash::ControllerModel::Interchangeable),
        _ => Err("unknown controller model (expected threads or interchangeable)".to_string()),
    }
}

pub(crate) fn parse_bench_profile(name: &str) -> Result<kvssd_bench::ycsb::BenchProfile, String> {
    kvssd_bench::ycsb::BenchProfile::by_name(name).ok_or_else(|| {
        format!(
            "unknown profile (expected one of {})",
            kvssd_bench::ycsb::BenchProfile::NAMES.join(", ")
        )
    })
}

/// A whole number from `low` to `high`, or the one-line reason it is not.
pub(crate) fn whole_number_in(text: &str, low: usize, high: usize) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(number) if (low..=high).contains(&number) => Ok(number),
        _ => Err(format!("must be a whole number from {low} to {high}")),
    }
}

pub(crate) fn parse_height(text: &str) -> Result<u32, String> {
    use kvssd_bench::heights::{HEIGHT_MAX, HEIGHT_MIN};
    whole_number_in(text, HEIGHT_MIN as usize, HEIGHT_MAX as usize).map(|height| height as u32)
}

pub(crate) fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err("expected on or off".to_string()),
    }
}

pub(crate) fn parse_dram_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(fraction) if fraction > 0.0 && fraction <= 0.1 => Ok(fraction),
        _ => Err("must be a number above 0 and at most 0.1".to_string()),
    }
}

pub(crate) fn parse_scan_length(text: &str) -> Result<usize, String> {
    whole_number_in(text, 1, 1_000_000)
}

pub(crate) fn parse_value_bytes(text: &str) -> Result<usize, String> {
    whole_number_in(text, 1, 2 << 20)
}

pub(crate) fn parse_batch(text: &str) -> Result<usize, String> {
    whole_number_in(text, 1, 1024)
}

/// Logs of the pink card: one per die.
pub(crate) fn parse_logs(text: &str) -> Result<u32, String> {
    whole_number_in(text, 1, 64).map(|logs| logs as u32)
}

pub(crate) fn parse_threads(text: &str) -> Result<usize, String> {
    whole_number_in(text, 1, 256)
}

pub(crate) fn parse_bench_preset(name: &str) -> Result<String, String> {
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

pub(crate) fn parse_pattern(name: &str) -> Result<Pattern, String> {
    Pattern::by_name(name).ok_or_else(|| {
        format!(
            "unknown pattern (expected one of {})",
            Pattern::NAMES.join(", ")
        )
    })
}

pub(crate) fn parse_media(name: &str) -> Result<kvssd_flash::MediaKind, String> {
    match name {
        "ram" => Ok(kvssd_flash::MediaKind::Ram),
        "compact" => Ok(kvssd_flash::MediaKind::Compact),
        _ => Err("unknown media (expected ram or compact)".to_string()),
    }
}

pub(crate) fn parse_profile(name: &str) -> Result<Profile, String> {
    Profile::by_name(name).ok_or_else(|| {
        format!(
            "unknown profile (expected one of {})",
            Profile::NAMES.join(", ")
        )
    })
}

/// Presets simulated at once, by default: one per core.
pub(crate) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// `kvssd report figures`: runs (a `--json` file and the `--command` that wrote it, paired in
/// order) and where the markdown goes.
#[derive(Debug, Args)]
pub(crate) struct FiguresArgs {
    /// A benchmark's `--json` output; repeat for several runs.
    #[arg(long, required = true)]
    pub(crate) json: Vec<std::path::PathBuf>,
    /// The command that wrote the matching `--json` file (the section's heading).
    #[arg(long, required = true)]
    pub(crate) command: Vec<String>,
    /// The markdown file to write.
    #[arg(long, default_value = "docs/figures.md")]
    pub(crate) out: std::path::PathBuf,
}

/// `kvssd serve`: the device on the network, speaking RESP2 (the Redis protocol).
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Image file (formatted first, with --profile, if it does not exist); omit with --simulated.
    pub(crate) path: Option<std::path::PathBuf>,
    /// Serve a simulated device in memory instead of an image (loses everything at exit).
    #[arg(long, conflicts_with = "path")]
    pub(crate) simulated: bool,
    /// Flash profile to format a missing image with, or of the simulated device (required then):
    /// pink or test_min.
    #[arg(long, value_parser = parse_profile)]
    pub(crate) profile: Option<Profile>,
    /// Override the profile's blocks per die (its capacity).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub(crate) blocks_per_die: Option<u32>,
    /// Address to listen on; anything but loopback needs --password.
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) bind: std::net::IpAddr,
    /// TCP port (0: any free port; the one chosen is printed).
    #[arg(long, default_value_t = 6379)]
    pub(crate) port: u16,
    /// Password clients must give with AUTH.
    #[arg(long)]
    pub(crate) password: Option<String>,
    /// When a write is answered: every (each write syncs the log), group (writes of all
    /// connections share syncs; answered once durable), none (answered at once; see docs/server.md).
    #[arg(long, default_value = "group", value_parser = parse_sync)]
    pub(crate) sync: kvssd_server::SyncMode,
    /// Connections served at once.
    #[arg(long, default_value_t = kvssd_server::CLIENTS_MAX_DEFAULT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub(crate) max_clients: usize,
    /// Bytes a connection may buffer of a request not yet complete (and the longest argument).
    #[arg(long, default_value_t = kvssd_server::CLIENT_BUFFER_BYTES_DEFAULT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..=(1 << 30)))]
    pub(crate) client_buffer_bytes: usize,
    /// Databases (SELECT 0 to N-1): namespaces 1 to N, created at start if missing.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) databases: u32,
    /// Preset of the namespaces created at start (pink, pink-noopt, pink-range, lightstore, hash, kaml).
    #[arg(long, default_value = "pink", value_parser = parse_namespace_preset)]
    pub(crate) preset: kvssd_device::PresetKind,
    /// Close connections silent for this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    pub(crate) timeout: u64,
    #[command(flatten)]
    pub(crate) cache: crate::image::CacheArgs,
}

pub(crate) fn parse_sync(name: &str) -> Result<kvssd_server::SyncMode, String> {
    kvssd_server::SyncMode::by_name(name).ok_or_else(|| {
        format!(
            "unknown sync policy (expected one of {})",
            kvssd_server::SyncMode::NAMES.join(", ")
        )
    })
}

pub(crate) fn parse_namespace_preset(name: &str) -> Result<kvssd_device::PresetKind, String> {
    crate::image::parse_preset_name(name)?;
    name.parse()
        .map_err(|error| format!("preset {name}: {error}"))
}
