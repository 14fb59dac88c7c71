//! The workload benchmarks (`kvssd bench ycsb | gc | seek | kaml-micro`): run them with progress
//! bars and write their table, JSON and plots.

use std::process::ExitCode;

use crate::args::{GcArgs, KamlMicroArgs, OutputArgs, RunArgs, SeekArgs, YcsbArgs};

pub(crate) fn run_ycsb(args: YcsbArgs) -> ExitCode {
    use kvssd_bench::ycsb;
    if args.host {
        return crate::oltp::run_ycsb_host(args);
    }
    let mut profile = match sized(args.profile, args.blocks_per_die) {
        Ok(profile) => profile,
        Err(code) => return code,
    };
    profile.flash.timing.controller = args.controller;
    if let Some(media) = args.media {
        profile.media = media;
    }
    if let Some(records) = args.records {
        profile.records = records;
    }
    if let Some(ops) = args.ops {
        profile.operations = ops;
    }
    if let Some(clients) = args.clients {
        profile.clients = clients;
    }
    let mut workloads = args.workloads;
    for spec in &mut workloads {
        spec.scan_length_max = args.scan_length_max;
    }
    let config = ycsb::YcsbConfig {
        presets: args.presets,
        workloads,
        seed: args.seed,
        profile,
    };
    // A card that cannot hold the Load is bad input: refused before anything is printed.
    if let Err(code) = fits_on_card(&config.profile) {
        return code;
    }
    if !args.heights.is_empty() {
        return run_heights(
            kvssd_bench::heights::HeightsConfig {
                ycsb: config,
                heights: args.heights,
            },
            &args.run,
            &args.output,
        );
    }
    let workload_names: Vec<&str> = config.workloads.iter().map(|spec| spec.name).collect();
    eprintln!(
        "kvssd bench ycsb: profile {} [{}, {} media, L0 {} KiB, L1 {} entries], {} records of {} B keys and {} B values, {} requests per workload, {} clients, presets {}, workloads {}, scans up to {} records, controller {}, seed {} (simulated time)",
        config.profile.name,
        config.profile.flash.geometry,
        media_name(&config.profile.media),
        config.profile.l0_bytes >> 10,
        config.profile.l1_entries,
        config.profile.records,
        config.profile.key_bytes,
        config.profile.value_bytes,
        config.profile.operations,
        config.profile.clients,
        config.presets.join(","),
        workload_names.join(","),
        args.scan_length_max,
        controller_name(args.controller),
        config.seed
    );
    if let Err(code) = fits_in_memory(&config.profile, config.presets.len(), &args.run) {
        return code;
    }
    let started = std::time::Instant::now();
    let report = match run_presets_with_bars(&config.presets, &args.run, |threads, progress| {
        ycsb::run(&config, threads, progress)
    }) {
        Ok(mut report) => {
            report.controller = Some(controller_name(args.controller).to_string());
            report
        }
        Err(code) => return code,
    };
    write_outputs(
        &report,
        started,
        args.output.json.as_deref(),
        args.output.report.as_deref(),
    )
}

/// `kvssd bench ycsb --heights`: every preset at every height (PinK Fig. 13).
fn run_heights(
    config: kvssd_bench::heights::HeightsConfig,
    run: &RunArgs,
    output: &OutputArgs,
) -> ExitCode {
    if let Err(code) = lsm_presets_only(&config.ycsb.presets, "the height sweep") {
        return code;
    }
    let profiles = match config.profiles() {
        Ok(profiles) => profiles,
        Err(error) => {
            eprintln!("kvssd: {error}");
            return ExitCode::from(2);
        }
    };
    let base = &config.ycsb.profile;
    eprintln!(
        "kvssd bench ycsb --heights: profile {} [{}], {} records (L0 of {} pairs), DRAM for indexing {:.2}% of capacity at every height, presets {}, workloads {}, seed {} (simulated time)",
        base.name,
        base.flash.geometry,
        base.records,
        base.l0_pairs(),
        base.dram_fraction * 100.0,
        config.ycsb.presets.join(","),
        config.ycsb.workloads.iter().map(|spec| spec.name).collect::<Vec<_>>().join(","),
        config.ycsb.seed
    );
    for (height, profile) in &profiles {
        eprintln!(
            "  h = {height}: T = {}, L1 = {} entries, entries per level after load {:?}",
            profile.size_factor,
            profile.l1_entries,
            profile.tree_after_load()
        );
    }
    let largest = profiles
        .iter()
        .map(|(_, profile)| profile)
        .max_by_key(|profile| kvssd_bench::memory::preset_peak_bytes(profile))
        .unwrap_or(base);
    if let Err(code) = fits_in_memory(largest, config.labels().len(), run) {
        return code;
    }
    let started = std::time::Instant::now();
    let report = match run_presets_with_bars(&config.labels(), run, |threads, progress| {
        kvssd_bench::heights::run(&config, threads, progress)
    }) {
        Ok(report) => report,
        Err(code) => return code,
    };
    let shown = report.labelled(&[("height", "h")]);
    let code = write_outputs_as(
        &report,
        &shown,
        started,
        output.json.as_deref(),
        output.report.as_deref(),
    );
    print!("{}", kvssd_bench::heights::table(&report));
    code
}

/// A one-line usage error unless every preset is an LSM preset (`what` needs key order or levels).
fn lsm_presets_only(presets: &[String], what: &str) -> Result<(), ExitCode> {
    match presets
        .iter()
        .find(|preset| preset.parse::<kvssd_engine::Preset>().is_err())
    {
        Some(unknown) => {
            eprintln!("kvssd: '{unknown}' is not an LSM preset ({what} needs one: pink, pink-noopt, pink-range, pink-gcrewrite, pink-hw, lightstore)");
            Err(ExitCode::from(2))
        }
        None => Ok(()),
    }
}

/// The media's name as `--media` takes it.
fn media_name(media: &kvssd_flash::MediaKind) -> &'static str {
    match media {
        kvssd_flash::MediaKind::Compact => "compact",
        _ => "ram",
    }
}

/// The controller model's name as `--controller` takes it.
fn controller_name(controller: kvssd_flash::ControllerModel) -> &'static str {
    kvssd_device::crash::controller_name(controller)
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
    let bars = crate::progress::PresetBars::new(presets, run.quiet);
    let result = benchmark(run.threads, &|preset, phase, done, total| {
        bars.update(preset, phase, done, total)
    });
    bars.finish();
    result.map_err(|error| {
        eprintln!("kvssd: {error}");
        ExitCode::FAILURE
    })
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

pub(crate) fn run_gc(args: GcArgs) -> ExitCode {
    use kvssd_bench::gc;
    let mut profile = match sized(args.profile, args.blocks_per_die) {
        Ok(profile) => profile,
        Err(code) => return code,
    };
    if let Some(records) = args.records {
        profile.records = records;
    }
    if let Some(media) = args.media {
        profile.media = media;
    }
    let controller = args.controller;
    profile.flash.timing.controller = controller;
    let overwrites = args
        .overwrites
        .unwrap_or((profile.records as f64 * gc::PINK_OVERWRITES_PER_KEY) as u64);
    let config = gc::GcConfig {
        presets: args.presets,
        overwrites,
        seed: args.seed,
        profile,
    };
    if let Err(code) = fits_on_card(&config.profile) {
        return code;
    }
    eprintln!(
        "kvssd bench gc: profile {} [{}, {} media, L0 {} KiB, L1 {} entries], {} records, then {} uniformly random overwrites, presets {}, controller {}, seed {} (simulated time)",
        config.profile.name,
        config.profile.flash.geometry,
        media_name(&config.profile.media),
        config.profile.l0_bytes >> 10,
        config.profile.l1_entries,
        config.profile.records,
        config.overwrites,
        config.presets.join(","),
        controller_name(controller),
        config.seed
    );
    if let Err(code) = fits_in_memory_overwriting(
        &config.profile,
        config.overwrites,
        config.presets.len(),
        &args.run,
    ) {
        return code;
    }
    let started = std::time::Instant::now();
    let report = match run_presets_with_bars(&config.presets, &args.run, |threads, progress| {
        gc::run(&config, threads, progress)
    }) {
        Ok(mut report) => {
            report.controller = Some(controller_name(controller).to_string());
            report
        }
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

pub(crate) fn run_seek(args: SeekArgs) -> ExitCode {
    use kvssd_bench::seek;
    if let Err(code) = lsm_presets_only(&args.presets, "SeekRandom") {
        return code;
    }
    if let Some(degree) = args.prefetch.iter().find(|&&degree| degree > 64) {
        eprintln!("kvssd: prefetch degree {degree} is above the limit of 64");
        return ExitCode::from(2);
    }
    let mut profile = match sized(
        kvssd_bench::ycsb::BenchProfile::scaled(),
        args.blocks_per_die,
    ) {
        Ok(profile) => profile,
        Err(code) => return code,
    };
    profile.dram_fraction = args.dram_fraction;
    profile.key_bytes = usize::from(args.key_bytes);
    if let Some(media) = args.media {
        profile.media = media;
    }
    let config = seek::SeekConfig {
        profile,
        presets: args.presets,
        degrees: args.prefetch,
        keys: args.keys,
        value_bytes: args.value_bytes,
        scan_lengths: args.scan_length,
        seeks: args.seeks,
        index_prefetch: if args.no_index_prefetch {
            vec![false]
        } else {
            args.index_prefetch
        },
        seed: args.seed,
    };
    if let Err(error) = config.check() {
        eprintln!("kvssd: {error}");
        return ExitCode::from(2);
    }
    // One loaded device at a time per preset.
    let mut loaded = config.profile.clone();
    loaded.records = config.keys;
    if let Err(code) = fits_in_memory(&loaded, config.presets.len(), &args.run) {
        return code;
    }
    let on_off: Vec<&str> = config
        .index_prefetch
        .iter()
        .map(|&on| seek::on_off(on))
        .collect();
    eprintln!(
        "kvssd bench seek: profile default [{}, {} media], DRAM for indexing {}% of capacity, {} keys of {} B, value sizes {:?} B (a device loaded per size), {} seeks per combination of scan lengths {:?}, index prefetch {}, prefetch degrees {:?}; presets {}, seed {} (simulated time)",
        config.profile.flash.geometry,
        media_name(&config.profile.media),
        config.profile.dram_fraction * 100.0,
        config.keys,
        config.profile.key_bytes,
        config.value_bytes,
        config.seeks,
        config.scan_lengths,
        on_off.join(","),
        config.degrees,
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
    let shown = report.labelled(&seek::GRID_LABELS);
    let code = write_outputs_as(
        &report,
        &shown,
        started,
        args.output.json.as_deref(),
        args.output.report.as_deref(),
    );
    for result in &shown.results {
        if let (Some(next), Some(seek)) = (&result.next_latency_us, &result.seek_latency_us) {
            println!(
                "{:<36} per Next: avg {:>7.1} us  p99 {:>7.1}  p99.9 {:>7.1}   per Seek: avg {:>7.1} us   flash reads per seek+scan {:>7.1}   values {:>7.1} MB/s",
                result.preset,
                next.avg,
                next.p99,
                next.p999,
                seek.avg,
                result.flash_reads_per_query.avg,
                result.value_mb_per_s.unwrap_or(0.0)
            );
        }
    }
    code
}

pub(crate) fn run_kaml_micro(args: KamlMicroArgs) -> ExitCode {
    use kvssd_bench::kaml_micro;
    if !(args.load_factor > 0.0 && args.load_factor <= 0.9) {
        eprintln!("kvssd: --load-factor must be in (0, 0.9]");
        return ExitCode::FAILURE;
    }
    let config = kaml_micro::KamlMicroConfig {
        value_sizes: args.value_sizes,
        batch_sizes: args.batch_sizes,
        log_counts: args.logs,
        value_bytes: args.value_bytes,
        logs_value_bytes: args.logs_value_bytes,
        records: args.records,
        logs_records: args.logs_records,
        log_free_lists: args.log_free_lists,
        operations: args.ops,
        latency_operations: args.latency_ops,
        clients: args.clients,
        load_factor: args.load_factor,
        command_ns: args.command_ns,
        operation_ns: args.operation_ns,
        seed: args.seed,
        ..kaml_micro::KamlMicroConfig::default_config()
    };
    eprintln!(
        "kvssd bench kaml-micro: pink card [{}]; kaml (Get/Put, {} B keys in the slots, table at load factor {}) beside block (read/write, {} B logical blocks, preconditioned); {} records, {} commands per update/fetch bandwidth run and {} per latency run; bandwidth at queue depth {} ({} closed-loop clients, one command each), latency at queue depth 1; controller time {} ns per command and {} ns per record; record sizes {:?}, batch sizes {:?} at {} B, logs {:?} at {} B with {} records (per-log free lists: {}); seed {} (simulated time)",
        config.flash.geometry,
        kaml_micro::KEY_BYTES,
        config.load_factor,
        config.logical_block_bytes,
        config.records,
        config.operations,
        config.latency_operations,
        config.clients,
        config.clients,
        config.command_ns,
        config.operation_ns,
        config.value_sizes,
        config.batch_sizes,
        config.value_bytes,
        config.log_counts,
        config.logs_value_bytes,
        config.logs_records,
        config.log_free_lists,
        config.seed
    );
    let started = std::time::Instant::now();
    let result = kaml_micro::run(&config, &mut |line| {
        eprintln!("  [{:>6.1} s] {line}", started.elapsed().as_secs_f64());
    });
    let report = match result {
        Ok(report) => report,
        Err(error) => {
            eprintln!("kvssd: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "{:<12} {:<6} {:<7} {:>6} {:>6} {:>5} {:>3} {:>12} {:>10} {:>10} {:>10}",
        "experiment",
        "preset",
        "op",
        "value",
        "batch",
        "logs",
        "qd",
        "records/s",
        "MB/s",
        "lat avg",
        "lat p99"
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
            "{:<12} {:<6} {:<7} {:>6} {:>6} {:>5} {:>3} {:>12.0} {:>10.1} {:>10.1} {:>10.1}",
            get("experiment").as_str().unwrap_or(""),
            result.preset,
            result.workload,
            get("value_bytes"),
            get("batch"),
            get("logs")
                .as_u64()
                .map_or("all".to_string(), |logs| logs.to_string()),
            get("queue_depth"),
            result.throughput_kops * 1e3,
            get("bandwidth_mb_s").as_f64().unwrap_or(0.0),
            latency.avg,
            latency.p99
        );
    }
    print!("{}", kaml_micro_ratios(&report, &config));
    write_outputs(
        &report,
        started,
        args.output.json.as_deref(),
        args.output.report.as_deref(),
    )
}

/// The ratios KAML's figures state, ours beside them.
fn kaml_micro_ratios(
    report: &kvssd_bench::report::BenchReport,
    config: &kvssd_bench::kaml_micro::KamlMicroConfig,
) -> String {
    use std::fmt::Write as _;
    let find = |preset: &str, experiment: &str, workload: &str, key: &str, value: u64, qd: u64| {
        report.results.iter().find(|result| {
            let params = result.params.clone().unwrap_or_default();
            result.preset == preset
                && result.workload == workload
                && params.get("experiment").and_then(|v| v.as_str()) == Some(experiment)
                && params.get(key).and_then(|v| v.as_u64()) == Some(value)
                && params.get("queue_depth").and_then(|v| v.as_u64()) == Some(qd)
        })
    };
    let qd = u64::from(config.clients);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nKAML's figures beside ours (bandwidth at queue depth {qd}; latency at queue depth 1):"
    );
    let _ = writeln!(
        out,
        "{:>6}  {:>13} {:>13} {:>13}   {:>14} {:>14} {:>14}",
        "value",
        "Update Put/wr",
        "Insert Put/wr",
        "Fetch Get/rd",
        "Update lat P/w",
        "Insert lat P/w",
        "Fetch lat G/r"
    );
    for &size in &config.value_sizes {
        let size = size as u64;
        let ratio = |workload: &str, queue: u64, latency: bool| -> String {
            let kaml = find("kaml", "record_size", workload, "value_bytes", size, queue);
            let block = find("block", "record_size", workload, "value_bytes", size, queue);
            match (kaml, block) {
                (Some(kaml), Some(block)) => {
                    let value = if latency {
                        let pick = |r: &kvssd_bench::report::BenchResult| {
                            if workload == "fetch" {
                                r.read_latency_us.avg
                            } else {
                                r.write_latency_us.avg
                            }
                        };
                        pick(kaml) / pick(block).max(1e-9)
                    } else {
                        kaml.throughput_kops / block.throughput_kops.max(1e-9)
                    };
                    format!("{value:.2}x")
                }
                _ => "-".into(),
            }
        };
        let _ = writeln!(
            out,
            "{:>6}  {:>13} {:>13} {:>13}   {:>14} {:>14} {:>14}",
            size,
            ratio("update", qd, false),
            ratio("insert", qd, false),
            ratio("fetch", qd, false),
            ratio("update", 1, true),
            ratio("insert", 1, true),
            ratio("fetch", 1, true)
        );
    }
    let _ = writeln!(
        out,
        "  KAML: Update Put 6.7-7.9x write below 4 KiB, write slightly ahead at 4 KiB; Insert Put within 10% of write below 4 KiB, write ahead at 4 KiB; Get up to 1.2x read (load factor 0.1), equal at 0.4; latency: Update Put 0.2x write below 4 KiB, Insert Put 0.63-0.75x below 4 KiB and 2.9x at 4 KiB, Get = read"
    );
    let gain = |workload: &str, from: u64, to: u64| -> String {
        let at = |batch: u64| {
            find("kaml", "batch_size", workload, "batch", batch, qd).map(|r| r.throughput_kops)
        };
        match (at(from), at(to)) {
            (Some(a), Some(b)) => format!("{:.2}x", b / a.max(1e-9)),
            _ => "-".into(),
        }
    };
    let _ = writeln!(
        out,
        "batch 1->4: Update {} (KAML 1.2-1.3x), Insert {}; batch 1->8: Update {}, Insert {} (KAML: populating takes 40% less time, 1.67x)",
        gain("update", 1, 4),
        gain("insert", 1, 4),
        gain("update", 1, 8),
        gain("insert", 1, 8)
    );
    let logs =
        |count: u64| find("kaml", "logs", "update", "logs", count, qd).map(|r| r.throughput_kops);
    let logs_gain = match (logs(16), logs(64)) {
        (Some(a), Some(b)) => format!("{:.2}x", b / a.max(1e-9)),
        _ => "-".into(),
    };
    let _ = writeln!(out, "logs 16->64: Update {logs_gain} (KAML 5.8x)");
    out
}

fn write_outputs(
    report: &kvssd_bench::report::BenchReport,
    started: std::time::Instant,
    json: Option<&std::path::Path>,
    plots: Option<&std::path::Path>,
) -> ExitCode {
    write_outputs_as(report, report, started, json, plots)
}

/// The table and plots of `shown` (the report with its results labelled apart), the JSON of
/// `report`.
fn write_outputs_as(
    report: &kvssd_bench::report::BenchReport,
    shown: &kvssd_bench::report::BenchReport,
    started: std::time::Instant,
    json: Option<&std::path::Path>,
    plots: Option<&std::path::Path>,
) -> ExitCode {
    print!("{}", shown.table());
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
        if !plots_written(shown.write_plots(directory), directory) {
            return ExitCode::FAILURE;
        }
    }
    // The figures and JSON are written first, so a failed run can be looked into.
    if let Some(error) = report.value_mismatch_error() {
        eprintln!("kvssd: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Says where the plots went, or why they could not be written (then false).
pub(crate) fn plots_written(
    written: std::io::Result<Vec<std::path::PathBuf>>,
    directory: &std::path::Path,
) -> bool {
    match written {
        Ok(files) => {
            println!(
                "wrote {} files into {} (open index.html)",
                files.len(),
                directory.display()
            );
            true
        }
        Err(error) => {
            eprintln!(
                "kvssd: cannot write plots into {}: {error}",
                directory.display()
            );
            false
        }
    }
}

/// Refuses, with one line, a run whose Load the card cannot hold
/// ([`kvssd_bench::profile::BenchProfile::check_capacity`]).
fn fits_on_card(profile: &kvssd_bench::profile::BenchProfile) -> Result<(), ExitCode> {
    profile.check_capacity().map_err(|line| {
        eprintln!("kvssd: {line}");
        ExitCode::from(2)
    })
}

/// Refuses, with one line, a run whose presets would not fit in the memory the system has
/// available (`kvssd_bench::memory`), unless `--no-memory-check`.
pub(crate) fn fits_in_memory(
    profile: &kvssd_bench::profile::BenchProfile,
    presets: usize,
    run: &RunArgs,
) -> Result<(), ExitCode> {
    fits_in_memory_overwriting(profile, 0, presets, run)
}

/// [`fits_in_memory`] for a run that overwrites `overwrites` records after Load.
pub(crate) fn fits_in_memory_overwriting(
    profile: &kvssd_bench::profile::BenchProfile,
    overwrites: u64,
    presets: usize,
    run: &RunArgs,
) -> Result<(), ExitCode> {
    use kvssd_bench::memory;
    if run.no_memory_check {
        return Ok(());
    }
    let Some(available) = memory::available_bytes() else {
        return Ok(());
    };
    let per_preset = memory::preset_peak_bytes_overwriting(profile, overwrites);
    memory::check_fits(per_preset, presets, run.threads, available).map_err(|line| {
        eprintln!("kvssd: {line}");
        ExitCode::from(2)
    })
}
