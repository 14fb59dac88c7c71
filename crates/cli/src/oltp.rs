//! `kvssd bench tpcb` and `kvssd bench tpcc`: the OLTP benchmarks through the host layer.

use std::process::ExitCode;

use clap::Args;
use kvssd_bench::oltp::{self, OltpConfig, OltpReport};
use kvssd_host::CommitPath;

/// The run grid and device, shared by both benchmarks.
#[derive(Debug, Args)]
pub(crate) struct OltpArgs {
    /// Closed-loop clients, one transaction in flight each.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) clients: u32,
    /// Transactions committed per run.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) transactions: u64,
    /// Records per lock, comma-separated (KAML Fig. 9: 1 and 16).
    #[arg(long, default_value = "1,16", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) lock_granularity: Vec<u64>,
    /// Cache hit ratios, comma-separated: the cache holds this share of the records (KAML Fig. 9:
    /// 0.8 and 1.0).
    #[arg(long, default_value = "0.8,1.0", value_delimiter = ',', value_parser = parse_hit_ratio)]
    pub(crate) hit_ratio: Vec<f64>,
    /// Commit paths, comma-separated: kaml (one atomic batch per commit) and conventional
    /// (records in pages on the block preset, one central synchronous log; Shore-MT's shape, not
    /// Shore-MT).
    #[arg(long, default_value = "kaml,conventional", value_delimiter = ',', value_parser = parse_commit_path)]
    pub(crate) commit_path: Vec<CommitPath>,
    /// Host CPU per transaction step, nanoseconds.
    #[arg(long, default_value_t = 2_000)]
    pub(crate) step_ns: u64,
    /// Size the simulated card: blocks per die (PinK's card shape, 8 x 8 dies of 2 MiB blocks).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(4..=1_048_576))]
    pub(crate) blocks_per_die: u32,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Write the results as one JSON object to this file.
    #[arg(long)]
    pub(crate) json: Option<std::path::PathBuf>,
    /// Write plots (SVG: throughput, abort rate, latency percentiles) and a self-contained HTML
    /// page into this directory.
    #[arg(long)]
    pub(crate) report: Option<std::path::PathBuf>,
}

impl OltpArgs {
    fn config(&self) -> OltpConfig {
        OltpConfig {
            flash: kvssd_flash::Profile::pink_with_blocks(self.blocks_per_die),
            commit_paths: self.commit_path.clone(),
            lock_granularities: self.lock_granularity.clone(),
            hit_ratios: self.hit_ratio.clone(),
            clients: self.clients,
            transactions: self.transactions,
            step_ns: self.step_ns,
            seed: self.seed,
            ..OltpConfig::default_config()
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct TpcbArgs {
    /// Scale factor: branches (TPC-B; KAML ran 100).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) scale: u32,
    /// Accounts per branch (TPC-B: 100000).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) accounts_per_branch: u64,
    /// Run on a file image at this path instead (created if absent, with --blocks-per-die;
    /// loaded if not yet), with real OS threads on the KAML commit path: wall-clock throughput.
    /// Uses the first --lock-granularity and --hit-ratio; --transactions in all.
    #[arg(long)]
    pub(crate) file: Option<std::path::PathBuf>,
    /// With --file: OS threads running transactions at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) threads: u32,
    #[command(flatten)]
    pub(crate) oltp: OltpArgs,
}

/// `kvssd tpcb-loop` (hidden): the SIGKILL test's child.
#[derive(Debug, Args)]
pub(crate) struct TpcbLoopArgs {
    /// Image file (created if absent).
    path: std::path::PathBuf,
    /// OS threads running AccountUpdates at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// AccountUpdates each thread commits.
    #[arg(long, default_value_t = 1_000_000)]
    transactions: u64,
    /// This run's number on the image (history keys never repeat across runs).
    #[arg(long, default_value_t = 0)]
    run: u64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Branches.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1000))]
    scale: u32,
    /// Accounts per branch.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    accounts_per_branch: u64,
    /// Run nothing: print every history row (`row N`) and the balances (`state ...`), then
    /// close cleanly.
    #[arg(long)]
    check: bool,
}

/// The SIGKILL test's child: prints `ack N` (N the history key) once each commit is durable;
/// with --check prints the image's history rows and balance sums instead.
pub(crate) fn run_tpcb_loop(args: TpcbLoopArgs) -> ExitCode {
    use kvssd_bench::tpcb_threads::{self, ThreadsConfig};
    use std::io::Write;
    let mut config = ThreadsConfig::new(args.threads, args.transactions);
    config.scale = args.scale;
    config.accounts_per_branch = args.accounts_per_branch;
    config.run = args.run;
    config.seed = args.seed;
    let geometry = kvssd_flash::Profile::pink_with_blocks(4).geometry;
    let result = (|| -> Result<(), String> {
        let device = tpcb_threads::open_image(&args.path, &geometry)?;
        let (shared, tables) = tpcb_threads::open_host(device, &config)?;
        if args.check {
            let state = tpcb_threads::read_state(&shared, tables, &config)?;
            let mut out = std::io::stdout().lock();
            for row in &state.history {
                writeln!(out, "row {row}").map_err(|e| e.to_string())?;
            }
            writeln!(
                out,
                "state {} {} {} {} {}",
                state.accounts,
                state.tellers,
                state.branches,
                state.deltas,
                if state.balanced() {
                    "balanced"
                } else {
                    "unbalanced"
                }
            )
            .map_err(|e| e.to_string())?;
        } else {
            println!("ready");
            tpcb_threads::run_threads(&shared, tables, &config, &|history| {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "ack {history}").and_then(|()| out.flush());
            })?;
        }
        tpcb_threads::close(shared)
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kvssd: tpcb-loop: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `kvssd bench tpcb --file PATH`: real threads on a file image.
fn run_tpcb_file(args: &TpcbArgs, path: &std::path::Path) -> ExitCode {
    use kvssd_bench::tpcb_threads::{self, ThreadsConfig};
    let granularity = args.oltp.lock_granularity.first().copied().unwrap_or(1);
    let hit_ratio = args.oltp.hit_ratio.first().copied().unwrap_or(1.0);
    let records = u64::from(args.scale) * (args.accounts_per_branch + 11);
    let mut config = ThreadsConfig::new(
        args.threads,
        args.oltp.transactions.div_ceil(u64::from(args.threads)),
    );
    config.scale = args.scale;
    config.accounts_per_branch = args.accounts_per_branch;
    config.seed = args.oltp.seed;
    config.lock_granularity = granularity;
    config.cache_bytes =
        kvssd_bench::tpcb::cache_bytes_for(hit_ratio, records, kvssd_bench::tpcb::VALUE_BYTES);
    // A run number from the history already there keeps its keys apart from earlier runs'.
    let geometry = kvssd_flash::Profile::pink_with_blocks(args.oltp.blocks_per_die).geometry;
    eprintln!(
        "kvssd bench tpcb --file {}: scale {} ({} accounts per branch, {} B values), {} OS \
         threads x {} transactions, kaml commit path, lock granularity {granularity}, hit ratio \
         {hit_ratio}; file media, write-ahead log synced per command; seed {} (wall-clock)",
        path.display(),
        config.scale,
        config.accounts_per_branch,
        kvssd_bench::tpcb::VALUE_BYTES,
        config.threads,
        config.transactions_per_thread,
        config.seed
    );
    let started = std::time::Instant::now();
    let run = (|| -> Result<_, String> {
        if path.exists() {
            // Find this image's next run number.
            let device = tpcb_threads::open_image(path, &geometry)?;
            let (shared, tables) = tpcb_threads::open_host(device, &config)?;
            let state = tpcb_threads::read_state(&shared, tables, &config)?;
            let clients = state
                .history
                .iter()
                .map(|&key| tpcb_threads::history_client(key).0 + 1)
                .max()
                .unwrap_or(0);
            config.run = clients.div_ceil(u64::from(config.threads));
            tpcb_threads::close(shared)?;
        }
        tpcb_threads::run_on_file(path, &geometry, &config)
    })();
    let (outcome, state, rows_match) = match run {
        Ok(run) => run,
        Err(error) => {
            eprintln!("kvssd: tpcb failed: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "tpcb on file: {} threads, {} committed in {:.2} s: {:.0} tps (wall-clock), {} wait-die \
         restarts, {} lock waits (total {:.1} s with open, load and check)",
        config.threads,
        outcome.committed,
        outcome.wall_s,
        outcome.wall_tps(),
        outcome.restarts,
        outcome.lock_waits,
        started.elapsed().as_secs_f64()
    );
    println!(
        "invariants: {state}; this run's history rows match its {} acknowledged commits: {}",
        outcome.committed,
        if rows_match { "yes" } else { "NO" }
    );
    if state.balanced() && rows_match {
        ExitCode::SUCCESS
    } else {
        eprintln!("kvssd: a consistency condition was violated");
        ExitCode::FAILURE
    }
}

#[derive(Debug, Args)]
pub(crate) struct TpccArgs {
    /// Scale factor: warehouses (KAML ran 100, about 27 GB of values; 10 is the comparison
    /// point here).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) scale: u32,
    /// Transactions, comma-separated, each run alone: new-order, payment.
    #[arg(long, default_value = "new-order,payment", value_delimiter = ',', value_parser = parse_transaction)]
    pub(crate) transaction: Vec<kvssd_bench::tpcc::Transaction>,
    #[command(flatten)]
    pub(crate) oltp: OltpArgs,
}

fn parse_transaction(text: &str) -> Result<kvssd_bench::tpcc::Transaction, String> {
    match text {
        "new-order" => Ok(kvssd_bench::tpcc::Transaction::NewOrder),
        "payment" => Ok(kvssd_bench::tpcc::Transaction::Payment),
        _ => Err("unknown transaction (expected new-order or payment)".into()),
    }
}

pub(crate) fn run_tpcc(args: TpccArgs) -> ExitCode {
    use kvssd_bench::tpcc;
    let config = tpcc::TpccConfig {
        oltp: args.oltp.config(),
        scale: args.scale,
        transactions: args.transaction,
    };
    eprintln!(
        "kvssd bench tpcc: scale {} warehouses, transactions {:?}, {} clients, {} transactions \
         per run, {}",
        config.scale,
        config
            .transactions
            .iter()
            .map(|transaction| transaction.name())
            .collect::<Vec<_>>(),
        config.oltp.clients,
        config.oltp.transactions,
        grid(&config.oltp)
    );
    let report = match run_timed("tpcc", |progress| tpcc::run(&config, progress)) {
        Ok(report) => report,
        Err(code) => return code,
    };
    let warehouses = f64::from(config.scale);
    let estimate = conflict_estimate(
        "per table a transaction updates (uniform keys; TPC-C's terminals and NURand make the \
         real ones hotter)",
        &[
            ("warehouse", warehouses),
            ("district", warehouses * tpcc::DISTRICTS as f64),
            (
                "customer",
                warehouses * (tpcc::DISTRICTS * tpcc::CUSTOMERS) as f64,
            ),
            ("stock", warehouses * tpcc::ITEMS as f64),
        ],
        &config.oltp,
    );
    finish(
        &report,
        &estimate,
        args.oltp.json.as_deref(),
        args.oltp.report.as_deref(),
    )
}

/// What every OLTP benchmark's header line says of its run grid, card and seed.
fn grid(oltp: &OltpConfig) -> String {
    format!(
        "commit paths {:?}, lock granularity {:?}, hit ratio {:?}; pink card [{}]; seed {} \
         (simulated time)",
        oltp.commit_paths
            .iter()
            .map(|path| path.name())
            .collect::<Vec<_>>(),
        oltp.lock_granularities,
        oltp.hit_ratios,
        oltp.flash.geometry,
        oltp.seed
    )
}

/// Runs an OLTP benchmark with its progress lines stamped with the wall time; a failure is
/// printed and becomes the exit code.
fn run_timed(
    name: &str,
    benchmark: impl FnOnce(&mut dyn FnMut(&str)) -> Result<OltpReport, String>,
) -> Result<OltpReport, ExitCode> {
    let started = std::time::Instant::now();
    let mut progress =
        |line: &str| eprintln!("  [{:>6.1} s] {line}", started.elapsed().as_secs_f64());
    benchmark(&mut progress).map_err(|error| {
        eprintln!("kvssd: {name} failed: {error}");
        ExitCode::FAILURE
    })
}

pub(crate) fn parse_hit_ratio(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(ratio) if ratio > 0.0 && ratio <= 1.0 => Ok(ratio),
        _ => Err("must be a number in (0, 1]".into()),
    }
}

pub(crate) fn parse_commit_path(text: &str) -> Result<CommitPath, String> {
    match text {
        "kaml" => Ok(CommitPath::Kaml),
        "conventional" => Ok(CommitPath::Conventional),
        _ => Err("unknown commit path (expected kaml or conventional)".into()),
    }
}

pub(crate) fn run_tpcb(args: TpcbArgs) -> ExitCode {
    use kvssd_bench::tpcb;
    if let Some(path) = &args.file {
        return run_tpcb_file(&args, path);
    }
    let config = tpcb::TpcbConfig {
        oltp: args.oltp.config(),
        scale: args.scale,
        accounts_per_branch: args.accounts_per_branch,
    };
    eprintln!(
        "kvssd bench tpcb: scale {} ({} accounts per branch, {} B values), {} clients, {} \
         transactions per run, {}",
        config.scale,
        config.accounts_per_branch,
        tpcb::VALUE_BYTES,
        config.oltp.clients,
        config.oltp.transactions,
        grid(&config.oltp)
    );
    let report = match run_timed("tpcb", |progress| tpcb::run(&config, progress)) {
        Ok(report) => report,
        Err(code) => return code,
    };
    let branches = f64::from(config.scale);
    let estimate = conflict_estimate(
        "per table a transaction updates",
        &[
            ("branch", branches),
            ("teller", branches * tpcb::TELLERS_PER_BRANCH as f64),
            ("account", branches * config.accounts_per_branch as f64),
        ],
        &config.oltp,
    );
    finish(
        &report,
        &estimate,
        args.oltp.json.as_deref(),
        args.oltp.report.as_deref(),
    )
}

/// Prints the table, the estimate and the 1 → coarser drop, writes the JSON and the plots; fails
/// if an invariant was violated.
pub(crate) fn finish(
    report: &OltpReport,
    estimate: &str,
    json: Option<&std::path::Path>,
    plots: Option<&std::path::Path>,
) -> ExitCode {
    println!("{}", report.setup);
    print!("{}", oltp::table(report));
    print!("{estimate}");
    for result in &report.results {
        if result.params.lock_granularity == 1 {
            continue;
        }
        let fine = report.results.iter().find(|other| {
            other.transaction == result.transaction
                && other.params.lock_granularity == 1
                && other.params.commit_path == result.params.commit_path
                && other.params.hit_ratio == result.params.hit_ratio
        });
        if let Some(fine) = fine {
            println!(
                "{} {} hit {}: granularity 1 -> {}: throughput {:+.1}%",
                result.transaction,
                result.params.commit_path,
                result.params.hit_ratio,
                result.params.lock_granularity,
                (result.throughput_tps / fine.throughput_tps.max(1e-9) - 1.0) * 100.0
            );
        }
    }
    if let Some(path) = json {
        let written = serde_json::to_string_pretty(report)
            .map_err(|error| error.to_string())
            .and_then(|json| std::fs::write(path, json + "\n").map_err(|error| error.to_string()));
        if let Err(error) = written {
            eprintln!("kvssd: cannot write {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    if let Some(directory) = plots {
        let written = kvssd_bench::oltp_report::write_plots(report, directory);
        if !crate::bench::plots_written(written, directory) {
            return ExitCode::FAILURE;
        }
    }
    if report.results.iter().any(|result| !result.invariants_hold) {
        eprintln!("kvssd: a consistency condition was violated (see the invariants column)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// `kvssd bench ycsb --host`: YCSB through the host layer (KAML Fig. 10).
pub(crate) fn run_ycsb_host(args: crate::args::YcsbArgs) -> ExitCode {
    use kvssd_bench::ycsb_host;
    let mut config = ycsb_host::YcsbHostConfig::default_config();
    if let Some(blocks_per_die) = args.blocks_per_die {
        config.oltp.flash = kvssd_flash::Profile::pink_with_blocks(blocks_per_die);
    }
    config.oltp.commit_paths = args.commit_path.clone();
    config.oltp.lock_granularities = args.lock_granularity.clone();
    config.oltp.hit_ratios = args.hit_ratio.clone();
    config.oltp.seed = args.seed;
    if let Some(clients) = args.clients {
        config.oltp.clients = clients;
    }
    if let Some(ops) = args.ops {
        config.oltp.transactions = ops;
    }
    if let Some(records) = args.records {
        config.records = records;
    }
    config.value_bytes = args.value_bytes as usize;
    // Load runs first anyway; E scans, which the host cannot (the default list has it).
    if args.workloads.iter().any(|spec| spec.scan > 0.0) {
        eprintln!("kvssd bench ycsb --host: skipping workload e: the host layer has no range scan");
    }
    config.workloads = args
        .workloads
        .iter()
        .filter(|spec| spec.name != "load" && spec.scan == 0.0)
        .cloned()
        .collect();
    eprintln!(
        "kvssd bench ycsb --host: {} records of 8 B keys and {} B values, workloads {:?}, {} \
         clients, {} requests per workload, {}",
        config.records,
        config.value_bytes,
        config
            .workloads
            .iter()
            .map(|spec| spec.name)
            .collect::<Vec<_>>(),
        config.oltp.clients,
        config.oltp.transactions,
        grid(&config.oltp)
    );
    match run_timed("ycsb --host", |progress| ycsb_host::run(&config, progress)) {
        Ok(report) => finish(
            &report,
            "",
            args.output.json.as_deref(),
            args.output.report.as_deref(),
        ),
        Err(code) => code,
    }
}

/// KAML's balls-into-bins estimate (§V-D2) of conflicting updates among the clients' updates
/// arriving together, a line per table of `(name, keys)` and a column per lock granularity.
fn conflict_estimate(about: &str, tables: &[(&str, f64)], oltp: &OltpConfig) -> String {
    let clients = f64::from(oltp.clients);
    let width = tables.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut estimate = format!(
        "balls into bins (KAML §V-D2), expected conflicting updates among N = clients updates \
         arriving together, {about}:\n"
    );
    for &(name, keys) in tables {
        estimate.push_str(&format!("  {name:<width$} K={keys:<10}"));
        for &granularity in &oltp.lock_granularities {
            estimate.push_str(&format!(
                "  l={granularity}: {:.2}",
                oltp::expected_conflicts(keys, granularity as f64, clients)
            ));
        }
        estimate.push('\n');
    }
    estimate
}
