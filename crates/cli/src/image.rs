//! Image tools, as RocksDB's `ldb` is for its files: format a file-media device, put, get, delete,
//! scan, manage namespaces, print statistics and check consistency. Every command opens the image
//! (recovering it if the last writer crashed), does its work and closes cleanly (a checkpoint, so
//! the next open replays nothing).
//!
//! File-media devices run with timing off (simulated time stays at zero; the wall clock is what
//! counts) and a write-ahead log synced on every command. The device configuration is derived
//! from the geometry recorded in the image, so no other setting has to be remembered.
//!
//! Namespaces are named by their numeric id (`--ns 3`). `kvssd format` creates namespace
//! [`DEFAULT_NAMESPACE`], which every command uses when `--ns` is not given. Ids are never reused:
//! after `kvssd ns delete PATH 1` a command without `--ns` fails with "namespace 1 does not
//! exist". Keeping names out of the device means nothing beyond the device's own namespace table
//! (which the write-ahead log already makes durable) has to survive a crash.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use kvssd_device::{
    Device, DeviceConfig, DeviceError, IterOptions, IterStart, NamespaceId, NamespaceSpec,
    StoreMode, VALUE_BYTES_MAX,
};
use kvssd_flash::{Flash, Geometry, Profile, Purpose};

mod write_loop;
pub use write_loop::WriteLoopArgs;

/// The namespace `kvssd format` creates, and the one commands use without `--ns`.
pub const DEFAULT_NAMESPACE: u32 = 1;

/// Byte budget of one iterator batch while scanning.
const SCAN_BATCH_BYTES: usize = 64 << 10;

/// The image tools (flattened into the program's commands).
#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Create a file-media device at PATH (sparse file) with one namespace, id 1, the default.
    Format(FormatArgs),
    /// Store a value under KEY (VALUE from the argument, or standard input if absent or "-").
    Put(PutArgs),
    /// Print KEY's value bytes, raw, to standard output (exit 1 if the key is absent).
    Get(KeyArgs),
    /// Delete KEY (deleting an absent key is not an error).
    Delete(KeyArgs),
    /// Print pairs in key order, one per line: KEY, a tab, VALUE, escaped (or hex with --hex).
    Scan(ScanArgs),
    /// Create, delete or list namespaces (named by numeric id).
    #[command(subcommand)]
    Ns(NsCommand),
    /// Print levels, DRAM by part, flash counters, write amplification and free space.
    Stats(PathArgs),
    /// Read every live page, verify checksums and the index invariants; exit 1 on any problem.
    Check(PathArgs),
    /// Store seeded keys one by one, printing each acknowledged write (for the SIGKILL test).
    #[command(hide = true)]
    WriteLoop(WriteLoopArgs),
}

/// `kvssd format`.
#[derive(Debug, Args)]
pub struct FormatArgs {
    /// Image file (or block device) to create.
    path: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
    /// Flash profile: pink (64 GiB sparse unless --blocks-per-die) or test_min (256 KiB).
    #[arg(long, value_parser = parse_profile)]
    profile: Profile,
    /// Preset of the default namespace (pink, pink-noopt, pink-range, lightstore, ...).
    #[arg(long, default_value = "pink", value_parser = parse_preset_name)]
    preset: String,
    /// Override the profile's blocks per die (its capacity).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    blocks_per_die: Option<u32>,
    /// Overwrite an existing file, even a kvssd image.
    #[arg(long)]
    force: bool,
}

/// `--cache`: the host memory an image's indexes may use.
#[derive(Debug, Clone, Copy, Args)]
pub struct CacheArgs {
    /// Indexing DRAM per namespace, in MiB (the LSM presets' write buffer, an eighth of it from 1
    /// to 32 MiB, and their pinned levels; cached bucket pages of `hash`). Default: a sixteenth of
    /// the image's capacity, at most 256 MiB, never less than PinK's 0.1% of capacity plus the
    /// write buffer.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub cache: Option<u64>,
}

impl CacheArgs {
    /// The budget in bytes, if one was given.
    pub fn bytes(self) -> Option<u64> {
        self.cache.map(|mib| mib << 20)
    }
}

/// An image path.
#[derive(Debug, Args)]
pub struct PathArgs {
    /// Image file created by `kvssd format`.
    path: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
}

/// `kvssd put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    /// Image file created by `kvssd format`.
    path: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
    /// Namespace id (default 1, created by format).
    #[arg(long, default_value_t = DEFAULT_NAMESPACE)]
    ns: u32,
    /// The key (1 to 255 bytes).
    key: OsString,
    /// The value; "-" or absent reads it from standard input (binary-safe).
    value: Option<OsString>,
}

/// `kvssd get` and `kvssd delete`.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// Image file created by `kvssd format`.
    path: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
    /// Namespace id (default 1, created by format).
    #[arg(long, default_value_t = DEFAULT_NAMESPACE)]
    ns: u32,
    /// The key.
    key: OsString,
}

/// `kvssd scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Image file created by `kvssd format`.
    path: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
    /// Namespace id (default 1, created by format).
    #[arg(long, default_value_t = DEFAULT_NAMESPACE)]
    ns: u32,
    /// First key (the scan starts at the first key >= this one).
    #[arg(long)]
    start: Option<OsString>,
    /// Most pairs printed.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    /// Print keys and values as hex instead of escaped text.
    #[arg(long)]
    hex: bool,
}

/// `kvssd ns`.
#[derive(Debug, Subcommand)]
pub enum NsCommand {
    /// Create a namespace; prints its id.
    Create(NsCreateArgs),
    /// Delete a namespace and all its keys (its id is never reused).
    Delete(NsDeleteArgs),
    /// List namespaces: id, preset, keys in L0, levels, blocks and valid bytes.
    List(PathArgs),
}

/// `kvssd ns create`.
#[derive(Debug, Args)]
pub struct NsCreateArgs {
    /// Image file created by `kvssd format`.
    path: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
    /// Engine preset of the namespace.
    #[arg(long, default_value = "pink", value_parser = parse_preset_name)]
    preset: String,
    /// Most bytes of flash its live data may take.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    quota_bytes: Option<u64>,
}

/// `kvssd ns delete`.
#[derive(Debug, Args)]
pub struct NsDeleteArgs {
    /// Image file created by `kvssd format`.
    path: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
    /// Namespace id.
    id: u32,
}

fn parse_profile(name: &str) -> Result<Profile, String> {
    Profile::by_name(name).ok_or_else(|| {
        format!(
            "unknown profile (expected one of {})",
            Profile::NAMES.join(", ")
        )
    })
}

/// Preset names a namespace may be given: the four LSM presets and the two hash ones.
pub const PRESET_NAMES: [&str; 6] = [
    "pink",
    "pink-noopt",
    "pink-range",
    "lightstore",
    "hash",
    "kaml",
];

/// Checks a preset name on the command line.
pub fn parse_preset_name(name: &str) -> Result<String, String> {
    if PRESET_NAMES.contains(&name) {
        Ok(name.to_string())
    } else {
        Err(format!(
            "unknown preset (expected one of {})",
            PRESET_NAMES.join(", ")
        ))
    }
}

/// The attributes of a new namespace of the named preset (LSM or hash).
fn namespace_spec(name: &str) -> Result<NamespaceSpec, Failure> {
    let preset: kvssd_device::PresetKind = name
        .parse()
        .map_err(|error| Failure::work(format!("preset {name}: {error}")))?;
    Ok(NamespaceSpec::new(preset))
}

/// Runs an image tool.
pub fn run(command: ImageCommand) -> ExitCode {
    let result = match command {
        ImageCommand::Format(args) => format(args),
        ImageCommand::Put(args) => put(args),
        ImageCommand::Get(args) => get(args),
        ImageCommand::Delete(args) => delete(args),
        ImageCommand::Scan(args) => scan(args),
        ImageCommand::Ns(NsCommand::Create(args)) => ns_create(args),
        ImageCommand::Ns(NsCommand::Delete(args)) => ns_delete(args),
        ImageCommand::Ns(NsCommand::List(args)) => ns_list(args),
        ImageCommand::Stats(args) => stats(args),
        ImageCommand::Check(args) => check(args),
        ImageCommand::WriteLoop(args) => write_loop::write_loop(args),
    };
    match result {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("kvssd: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Why a tool failed: a one-line message and the exit code (1 work failed, 2 bad arguments).
struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    fn work(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 1,
        }
    }

    fn usage(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 2,
        }
    }
}

type Outcome = Result<ExitCode, Failure>;

/// The device configuration of an image: a function of its geometry and of `--cache`, so format
/// and every later open agree without recording anything else.
fn image_config(geometry: &Geometry, cache: CacheArgs) -> Result<DeviceConfig, Failure> {
    DeviceConfig::for_file_image_with_dram(geometry, cache.bytes())
        .map_err(|error| Failure::usage(error.to_string()))
}

fn bytes_of(text: &OsStr) -> Vec<u8> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        text.as_bytes().to_vec()
    }
    #[cfg(not(unix))]
    {
        text.to_string_lossy().into_owned().into_bytes()
    }
}

fn device_failure(path: &Path, error: DeviceError) -> Failure {
    Failure::work(format!("{}: {error}", path.display()))
}

/// Opens an image: it must exist and hold a kvssd device (never formats a blank array).
fn open(path: &Path, cache: CacheArgs) -> Result<Device, Failure> {
    let geometry = Flash::probe(path).map_err(|error| Failure::work(error.to_string()))?;
    open_with(path, image_config(&geometry, cache)?)
}

/// [`open`] with a configuration of the image's geometry.
fn open_with(path: &Path, config: DeviceConfig) -> Result<Device, Failure> {
    let device =
        Device::open_path(path, None, config).map_err(|error| device_failure(path, error))?;
    if device
        .recovery_report()
        .map_err(|error| device_failure(path, error))?
        .is_none()
    {
        // Opening formatted a blank array: the image was never formatted by `kvssd format` (or
        // lost both superblock copies). Leave it as found as far as possible.
        let _ = device.into_flash();
        return Err(Failure::work(format!(
            "{}: not a kvssd device: no superblock copy found (format it first)",
            path.display()
        )));
    }
    Ok(device)
}

fn close(path: &Path, device: Device) -> Result<(), Failure> {
    device
        .close(0)
        .map(drop)
        .map_err(|error| device_failure(path, error))
}

fn format(args: FormatArgs) -> Outcome {
    let mut profile = args.profile;
    if let Some(blocks_per_die) = args.blocks_per_die {
        profile.geometry.blocks_per_die = blocks_per_die;
        profile
            .geometry
            .validate()
            .map_err(|error| Failure::usage(error.to_string()))?;
    }
    if let Ok(metadata) = std::fs::metadata(&args.path) {
        if !args.force {
            let what = if Flash::probe(&args.path).is_ok() {
                "holds a kvssd image"
            } else if metadata.len() > 0 {
                "exists"
            } else {
                "exists (empty)"
            };
            return Err(Failure::work(format!(
                "{}: {what}; pass --force to overwrite it",
                args.path.display()
            )));
        }
        if metadata.is_file() {
            std::fs::remove_file(&args.path)
                .map_err(|error| Failure::work(format!("{}: {error}", args.path.display())))?;
        }
    }
    let config = image_config(&profile.geometry, args.cache)?;
    let device = Device::create(&args.path, profile.geometry, None, config)
        .map_err(|error| device_failure(&args.path, error))?;
    let spec = match namespace_spec(&args.preset) {
        Ok(spec) => spec,
        Err(failure) => {
            drop(device);
            let _ = std::fs::remove_file(&args.path);
            return Err(failure);
        }
    };
    let id = match device.create_namespace(spec) {
        Ok(id) => id,
        Err(error) => {
            drop(device);
            let _ = std::fs::remove_file(&args.path);
            return Err(Failure::work(format!(
                "{}: cannot create the default namespace: {error}",
                args.path.display()
            )));
        }
    };
    if id != NamespaceId(DEFAULT_NAMESPACE) {
        return Err(Failure::work(format!(
            "{}: the first namespace got id {id}, not {DEFAULT_NAMESPACE}",
            args.path.display()
        )));
    }
    close(&args.path, device)?;
    println!(
        "formatted {}: profile {} [{}], {} bytes of flash; namespace {id} ({}) is the default",
        args.path.display(),
        profile.name,
        profile.geometry,
        profile.geometry.pages_total() * u64::from(profile.geometry.page_bytes),
        args.preset
    );
    Ok(ExitCode::SUCCESS)
}

fn read_value(value: Option<&OsString>) -> Result<Vec<u8>, Failure> {
    match value {
        Some(value) if value != "-" => Ok(bytes_of(value)),
        _ => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .lock()
                .take(VALUE_BYTES_MAX as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|error| Failure::work(format!("standard input: {error}")))?;
            Ok(bytes)
        }
    }
}

fn put(args: PutArgs) -> Outcome {
    let value = read_value(args.value.as_ref())?;
    let device = open(&args.path, args.cache)?;
    let key = bytes_of(&args.key);
    let stored = device.store(0, NamespaceId(args.ns), &key, &value, StoreMode::Upsert);
    if let Err(error) = stored {
        let _ = device.close(0);
        return Err(device_failure(&args.path, error));
    }
    close(&args.path, device)?;
    Ok(ExitCode::SUCCESS)
}

fn get(args: KeyArgs) -> Outcome {
    let device = open(&args.path, args.cache)?;
    let key = bytes_of(&args.key);
    let found = device.retrieve(0, NamespaceId(args.ns), &key, None);
    close(&args.path, device)?;
    let (found, _) = found.map_err(|error| device_failure(&args.path, error))?;
    let Some(found) = found else {
        return Err(Failure::work(format!(
            "key '{}' not found in namespace {}",
            escape(&key),
            args.ns
        )));
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&found.value)
        .and_then(|()| stdout.flush())
        .map_err(|error| Failure::work(format!("standard output: {error}")))?;
    Ok(ExitCode::SUCCESS)
}

fn delete(args: KeyArgs) -> Outcome {
    let device = open(&args.path, args.cache)?;
    let key = bytes_of(&args.key);
    let deleted = device.delete(0, NamespaceId(args.ns), &key);
    close(&args.path, device)?;
    deleted.map_err(|error| device_failure(&args.path, error))?;
    Ok(ExitCode::SUCCESS)
}

/// Escapes bytes for one line of text: printable ASCII as is (backslash doubled), the rest as
/// `\t`, `\n`, `\r` or `\xNN`.
fn escape(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    for &byte in bytes {
        match byte {
            b'\\' => text.push_str("\\\\"),
            b'\t' => text.push_str("\\t"),
            b'\n' => text.push_str("\\n"),
            b'\r' => text.push_str("\\r"),
            0x20..=0x7e => text.push(char::from(byte)),
            _ => text.push_str(&format!("\\x{byte:02x}")),
        }
    }
    text
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn scan(args: ScanArgs) -> Outcome {
    let device = open(&args.path, args.cache)?;
    let result = scan_pairs(&device, &args);
    close(&args.path, device)?;
    let lines = result.map_err(|error| device_failure(&args.path, error))?;
    let mut stdout = std::io::stdout().lock();
    for line in lines {
        writeln!(stdout, "{line}")
            .map_err(|error| Failure::work(format!("standard output: {error}")))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn scan_pairs(device: &Device, args: &ScanArgs) -> Result<Vec<String>, DeviceError> {
    let start = args.start.as_deref().map(bytes_of).unwrap_or_default();
    let (iterator, mut t) = device.iter_open(
        0,
        NamespaceId(args.ns),
        IterOptions::new(IterStart::Key(start), 0),
    )?;
    let limit = args.limit.unwrap_or(u64::MAX);
    let mut lines = Vec::new();
    'scan: loop {
        let (batch, done) = device.iter_next(t, iterator, SCAN_BATCH_BYTES)?;
        t = done;
        for entry in batch.entries {
            if lines.len() as u64 >= limit {
                break 'scan;
            }
            let value = entry.value.unwrap_or_default();
            lines.push(if args.hex {
                format!("{}\t{}", hex(&entry.key), hex(&value))
            } else {
                format!("{}\t{}", escape(&entry.key), escape(&value))
            });
        }
        if batch.end || lines.len() as u64 >= limit {
            break;
        }
    }
    device.iter_close(iterator)?;
    Ok(lines)
}

fn ns_create(args: NsCreateArgs) -> Outcome {
    let device = open(&args.path, args.cache)?;
    let mut spec = namespace_spec(&args.preset)?;
    spec.quota_bytes = args.quota_bytes;
    let created = device.create_namespace(spec);
    close(&args.path, device)?;
    let id = created.map_err(|error| device_failure(&args.path, error))?;
    println!("{id}");
    Ok(ExitCode::SUCCESS)
}

fn ns_delete(args: NsDeleteArgs) -> Outcome {
    let device = open(&args.path, args.cache)?;
    let deleted = device.delete_namespace(0, NamespaceId(args.id));
    close(&args.path, device)?;
    deleted.map_err(|error| device_failure(&args.path, error))?;
    Ok(ExitCode::SUCCESS)
}

fn ns_list(args: PathArgs) -> Outcome {
    let device = open(&args.path, args.cache)?;
    let listed = device.list_namespaces();
    close(&args.path, device)?;
    let namespaces = listed.map_err(|error| device_failure(&args.path, error))?;
    println!("id\tpreset\tl0_entries\tlevels\tblocks\tvalid_bytes\tquota_bytes");
    for info in namespaces {
        println!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}",
            info.id,
            info.spec.preset.name(),
            info.l0_entries,
            info.levels,
            info.blocks,
            info.valid_bytes,
            info.spec
                .quota_bytes
                .map_or_else(|| "-".to_string(), |quota| quota.to_string())
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Erase counts from the image's block table (they persist; the device's counters do not).
fn lifetime_erases(path: &Path) -> Result<(u64, u32), Failure> {
    let flash = Flash::open(path, None, None).map_err(|error| Failure::work(error.to_string()))?;
    let geometry = *flash.geometry();
    let mut total = 0u64;
    let mut most = 0u32;
    for block in 0..geometry.blocks_total() {
        let count = flash
            .erase_count(geometry.block_at(block))
            .map_err(|error| Failure::work(error.to_string()))?;
        total += u64::from(count);
        most = most.max(count);
    }
    Ok((total, most))
}

fn stats(args: PathArgs) -> Outcome {
    let (erases_total, erases_max) = lifetime_erases(&args.path)?;
    let device = open(&args.path, args.cache)?;
    let gathered = device
        .stats()
        .and_then(|stats| Ok((stats, device.list_namespaces()?)));
    let value_bytes_max = device.value_bytes_max().unwrap_or(0);
    close(&args.path, device)?;
    let (stats, namespaces) = gathered.map_err(|error| device_failure(&args.path, error))?;
    let geometry = Flash::probe(&args.path).map_err(|error| Failure::work(error.to_string()))?;
    let block_bytes = geometry.block_bytes();
    let blocks_total = geometry.blocks_total();
    println!("image {}", args.path.display());
    println!("geometry {geometry}");
    println!("capacity_bytes {}", blocks_total * block_bytes);
    println!("value_bytes_max {value_bytes_max}");
    println!(
        "free_blocks {} of {blocks_total} ({} bytes free)",
        stats.free_blocks,
        stats.free_blocks * block_bytes
    );
    println!("erases_lifetime {erases_total} (most on one block: {erases_max})");
    println!("device_gc_victims {}", stats.device_gc_victims);
    let config = image_config(&geometry, args.cache)?;
    println!(
        "dram_budget_bytes {} per namespace ({})",
        config.engine.dram_budget_bytes,
        match args.cache.cache {
            Some(mib) => format!("--cache {mib}"),
            None => "default; --cache MIB sets it".into(),
        }
    );
    // The cache gets what the indexes' plans leave of their budgets (pinned levels first).
    let cache = stats.index_cache.unwrap_or_default();
    println!(
        "index_page_cache capacity {} hits {} misses {} pages {} bytes {} (since this open)",
        cache.capacity_bytes, cache.hits, cache.misses, cache.pages, cache.bytes
    );
    println!("namespaces {}", stats.namespaces);
    for info in &namespaces {
        println!(
            "namespace {} preset {}: l0_entries {} levels {} blocks {} valid_bytes {} flushes {} compactions {} gc_victims {}",
            info.id,
            info.spec.preset.name(),
            info.l0_entries,
            info.levels,
            info.blocks,
            info.valid_bytes,
            info.flushes,
            info.compactions,
            info.gc_victims
        );
        println!(
            "namespace {} dram_bytes: l0 {} level_lists {} pinned_segments {} bloom_filters {} total {} budget {}",
            info.id,
            info.dram.l0,
            info.dram.level_lists,
            info.dram.pinned_segments,
            info.dram.bloom_filters,
            info.dram.total(),
            info.dram.budget
        );
        println!("namespace {} shape {}", info.id, info.shape);
        if !info.counters.is_empty() {
            let counters: Vec<String> = info
                .counters
                .iter()
                .map(|(name, value)| format!("{name} {value}"))
                .collect();
            println!("namespace {} counters: {}", info.id, counters.join(" "));
        }
    }
    println!("flash counters since this open (recovery and the closing checkpoint):");
    for purpose in Purpose::ALL {
        let counts = stats.flash.of(purpose);
        println!(
            "flash {}: reads {} programs {} erases {}",
            purpose.name(),
            counts.reads,
            counts.programs,
            counts.erases
        );
    }
    match stats.flash.write_amplification() {
        Some(waf) => println!("write_amplification {waf:.3} (since this open)"),
        None => println!("write_amplification n/a (no user data programmed since this open)"),
    }
    Ok(ExitCode::SUCCESS)
}

fn check(args: PathArgs) -> Outcome {
    let device = open(&args.path, args.cache)?;
    // A checkpoint first trims the log, so a torn page a crash left at its tail is not reported.
    let checked = device.checkpoint(0).and_then(|t| device.check(t));
    close(&args.path, device)?;
    let (report, _) = checked.map_err(|error| device_failure(&args.path, error))?;
    println!(
        "checked {}: {} namespaces, {} levels, {} meta pages read, {} pinned segments, {} index entries, {} records read, {} checkpoint and log pages read",
        args.path.display(),
        report.namespaces,
        report.levels,
        report.meta_pages_read,
        report.pinned_segments,
        report.entries,
        report.records_read,
        report.system_pages_read
    );
    if report.namespaces_skipped > 0 {
        println!(
            "skipped {} namespaces whose engine the checker cannot inspect",
            report.namespaces_skipped
        );
    }
    for problem in &report.problems {
        println!("problem: {problem}");
    }
    if report.is_clean() {
        println!("no problems found");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "kvssd: {}: {} problems found",
            args.path.display(),
            report.problems.len()
        );
        Ok(ExitCode::FAILURE)
    }
}
