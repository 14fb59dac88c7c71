//! `kvssd-compare`: kvssd on a file image beside RocksDB and fjall, on YCSB Load and A-F with
//! identical request and value streams, wall clock, every read checked.
//!
//! Each store runs in a process of its own (this program again, with a hidden flag), so the
//! peak resident memory it reports is that store's whole process. Rounds interleave the stores
//! and rotate their order, so slow drift of the machine (another build, the page cache, the
//! disk's own state) falls on every store alike; the table gives medians over the rounds.

mod report;
mod run;
mod stores;
mod values;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use clap::Parser;
use kvssd_bench::workload::WorkloadSpec;

use crate::run::{RunConfig, StoreRun};
use crate::stores::{SyncMode, STORE_NAMES};

/// Seed of the request streams (one for every store and round).
const SEED: u64 = 0x6b76_7373_6463_6d70;

/// kvssd on a file beside RocksDB and fjall: YCSB Load and A-F, identical streams, wall clock.
#[derive(Debug, Parser)]
#[command(name = "kvssd-compare")]
struct Args {
    /// Records loaded.
    #[arg(long, default_value_t = 200_000)]
    records: u64,
    /// Requests per workload after the load.
    #[arg(long, default_value_t = 200_000)]
    ops: u64,
    /// Bytes of every value.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// none | group | every: when a write is durable (the output says what each store does).
    #[arg(long, default_value = "none")]
    sync: String,
    /// Rounds; each runs every store once, in an order rotated by one per round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Stores, in round 1's order (comma-separated).
    #[arg(long, default_value = "kvssd,rocksdb,fjall", value_delimiter = ',')]
    stores: Vec<String>,
    /// Workloads, in order (comma-separated; `load` should come first).
    #[arg(long, default_value = "load,a,b,c,d,e,f", value_delimiter = ',')]
    workloads: Vec<String>,
    /// Scratch directory for the stores' files (default: a new temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Block cache of RocksDB and fjall, MiB, and kvssd's indexing DRAM budget (if larger than
    /// its file-image default).
    #[arg(long, default_value_t = 256)]
    cache_mib: u64,
    /// JSON output; the plot goes beside it (same name, `.svg`).
    #[arg(long, default_value = "results/compare.json")]
    out: PathBuf,
    /// Runs one store in this process and prints its figures as JSON (what each round spawns).
    #[arg(long, hide = true)]
    child_store: Option<String>,
    /// The directory the child's store is created in.
    #[arg(long, hide = true)]
    child_dir: Option<PathBuf>,
}

impl Args {
    fn run_config(&self, store: &str) -> RunConfig {
        RunConfig {
            store: store.to_string(),
            records: self.records,
            ops: self.ops,
            value_bytes: self.value_bytes,
            threads: self.threads,
            sync: self.sync.clone(),
            cache_mib: self.cache_mib,
            workloads: self.workloads.clone(),
            seed: SEED,
        }
    }

    /// The flags a child is given: this run's, for one store.
    fn child_flags(&self, store: &str, directory: &Path) -> Vec<String> {
        vec![
            format!("--records={}", self.records),
            format!("--ops={}", self.ops),
            format!("--value-bytes={}", self.value_bytes),
            format!("--threads={}", self.threads),
            format!("--sync={}", self.sync),
            format!("--cache-mib={}", self.cache_mib),
            format!("--workloads={}", self.workloads.join(",")),
            format!("--child-store={store}"),
            format!("--child-dir={}", directory.display()),
        ]
    }

    fn validate(&self) -> Result<SyncMode, String> {
        let mode = SyncMode::parse(&self.sync)
            .ok_or_else(|| format!("--sync {}: expected none, group or every", self.sync))?;
        for store in &self.stores {
            if !STORE_NAMES.contains(&store.as_str()) {
                return Err(format!(
                    "--stores: unknown store {store} (stores: {})",
                    STORE_NAMES.join(", ")
                ));
            }
        }
        for workload in &self.workloads {
            if WorkloadSpec::by_name(workload).is_none() {
                return Err(format!(
                    "--workloads: unknown workload {workload} (workloads: {})",
                    WorkloadSpec::NAMES.join(", ")
                ));
            }
        }
        if self.workloads.first().map(String::as_str) != Some("load") {
            return Err(
                "--workloads: the first must be load (the others read what it loaded)".into(),
            );
        }
        if self.stores.is_empty() || self.rounds == 0 || self.threads == 0 || self.records == 0 {
            return Err(
                "--stores, --rounds, --threads and --records must not be empty or 0".into(),
            );
        }
        if self.value_bytes < values::HEADER_BYTES
            || self.value_bytes > kvssd_device::VALUE_BYTES_MAX
        {
            return Err(format!(
                "--value-bytes: {}..={}",
                values::HEADER_BYTES,
                kvssd_device::VALUE_BYTES_MAX
            ));
        }
        Ok(mode)
    }
}

/// The stores' order in round `round` (0-based): the given order rotated left by `round`.
fn round_order(stores: &[String], round: usize) -> Vec<String> {
    let mut order = stores.to_vec();
    if !order.is_empty() {
        let shift = round % order.len();
        order.rotate_left(shift);
    }
    order
}

/// Runs one store in a child process and reads its figures.
fn spawn_store(args: &Args, store: &str, directory: &Path) -> Result<StoreRun, String> {
    let program =
        std::env::current_exe().map_err(|error| format!("this program's path: {error}"))?;
    let output = Command::new(program)
        .args(args.child_flags(store, directory))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|error| format!("{store}: cannot start: {error}"))?;
    if !output.status.success() {
        return Err(format!("{store}: the run failed ({})", output.status));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(text.trim())
        .map_err(|error| format!("{store}: unreadable figures: {error}"))
}

/// The hidden child: one store, figures as one JSON line on standard output.
fn child(args: &Args, store: &str) -> ExitCode {
    let Some(directory) = args.child_dir.as_deref() else {
        eprintln!("kvssd-compare: --child-store needs --child-dir");
        return ExitCode::from(2);
    };
    match run::run_store(&args.run_config(store), directory) {
        Ok(run) => match serde_json::to_string(&run) {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("kvssd-compare: {store}: {error}");
                ExitCode::FAILURE
            }
        },
        Err(error) => {
            eprintln!("kvssd-compare: {store}: {error}");
            ExitCode::FAILURE
        }
    }
}

fn parent(args: &Args, mode: SyncMode) -> Result<u64, String> {
    let scratch;
    let base = match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
            dir.clone()
        }
        None => {
            scratch = tempfile::Builder::new()
                .prefix("kvssd-compare-")
                .tempdir()
                .map_err(|error| format!("a scratch directory: {error}"))?;
            scratch.path().to_path_buf()
        }
    };
    println!(
        "kvssd-compare: {} records, {} requests per workload, {} B values, {} client threads, --sync {}, {} rounds, cache {} MiB, seed {SEED:#x}",
        args.records,
        args.ops,
        args.value_bytes,
        args.threads,
        mode.name(),
        args.rounds,
        args.cache_mib
    );
    println!("scratch directory: {}", base.display());
    for store in &args.stores {
        println!(
            "  --sync {} on {store}: {}",
            mode.name(),
            stores::sync_mapping(store, mode)
        );
    }
    let mut rounds: Vec<Vec<StoreRun>> = Vec::new();
    for round in 0..args.rounds {
        let order = round_order(&args.stores, round);
        println!(
            "round {} of {}: {}",
            round + 1,
            args.rounds,
            order.join(", ")
        );
        let mut runs = Vec::new();
        for store in &order {
            let directory = base.join(format!("{store}-round{}", round + 1));
            let result = spawn_store(args, store, &directory);
            // Each run starts on an empty directory; the next must not inherit this one's files.
            let _ = std::fs::remove_dir_all(&directory);
            let run = result?;
            println!(
                "  {store}: peak RSS {:.0} MiB (harness {:.0} MiB before opening), {:.0} MiB on disk",
                run.peak_rss_mib,
                run.rss_before_open_mib,
                run.disk_bytes as f64 / f64::from(1 << 20)
            );
            runs.push(run);
        }
        rounds.push(runs);
    }
    let summary = report::Summary::new(args, mode, SEED, &rounds);
    println!();
    print!("{}", summary.table());
    if let Some(parent) = args.out.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent)
                .map_err(|error| format!("{}: {error}", parent.display()))?;
        }
    }
    let json = serde_json::to_string_pretty(&summary).map_err(|error| format!("JSON: {error}"))?;
    std::fs::write(&args.out, json + "\n")
        .map_err(|error| format!("{}: {error}", args.out.display()))?;
    let plot = args.out.with_extension("svg");
    report::plot_throughput(&plot, &summary)
        .map_err(|error| format!("{}: {error}", plot.display()))?;
    println!("wrote {} and {}", args.out.display(), plot.display());
    Ok(summary.mismatches_total())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mode = match args.validate() {
        Ok(mode) => mode,
        Err(error) => {
            eprintln!("kvssd-compare: {error}");
            return ExitCode::from(2);
        }
    };
    if let Some(store) = args.child_store.clone() {
        return child(&args, &store);
    }
    match parent(&args, mode) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(mismatches) => {
            eprintln!("kvssd-compare: {mismatches} reads did not return what was written");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("kvssd-compare: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn rounds_rotate_the_order_so_each_store_takes_each_place() {
        let stores = names(&["kvssd", "rocksdb", "fjall"]);
        assert_eq!(
            round_order(&stores, 0),
            names(&["kvssd", "rocksdb", "fjall"])
        );
        assert_eq!(
            round_order(&stores, 1),
            names(&["rocksdb", "fjall", "kvssd"])
        );
        assert_eq!(
            round_order(&stores, 2),
            names(&["fjall", "kvssd", "rocksdb"])
        );
        assert_eq!(round_order(&stores, 3), round_order(&stores, 0));
        for place in 0..3 {
            let at_place: std::collections::BTreeSet<String> = (0..3)
                .map(|round| round_order(&stores, round)[place].clone())
                .collect();
            assert_eq!(
                at_place.len(),
                3,
                "place {place} is taken by every store once"
            );
        }
        assert!(round_order(&[], 5).is_empty());
    }

    #[test]
    fn child_flags_carry_the_run() {
        let args = Args::parse_from([
            "kvssd-compare",
            "--records=10",
            "--sync=every",
            "--workloads=load,c",
        ]);
        let flags = args.child_flags("fjall", Path::new("/tmp/x"));
        let child = Args::parse_from(std::iter::once("kvssd-compare".to_string()).chain(flags));
        assert_eq!(child.child_store.as_deref(), Some("fjall"));
        assert_eq!(child.run_config("fjall").records, 10);
        assert_eq!(child.run_config("fjall").sync, "every");
        assert_eq!(child.run_config("fjall").workloads, names(&["load", "c"]));
    }
}
