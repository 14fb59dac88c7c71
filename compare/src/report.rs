//! Medians over the rounds: the table, the JSON and the throughput plot.
//!
//! JSON (`--out`):
//!
//! ```text
//! {"config": {records, ops, value_bytes, threads, sync, rounds, cache_mib, seed, stores, workloads},
//!  "stores": [{"store", "settings", "sync_mapping",
//!              "peak_rss_mib": {"median", "max"}, "rss_before_open_mib": median,
//!              "disk_mib": median,
//!              "workloads": [{"workload", "kops", "read_p99_us", "read_p999_us",
//!                             "write_p99_us", "scan_p99_us", "mismatches"}]}],  // medians
//!  "rounds": [[StoreRun per store, in the round's order]]}
//! ```

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::run::StoreRun;
use crate::stores::SyncMode;
use crate::Args;

/// The median of some figures (the mean of the middle two for an even count; 0 for none).
pub fn median(mut figures: Vec<f64>) -> f64 {
    if figures.is_empty() {
        return 0.0;
    }
    figures.sort_by(f64::total_cmp);
    let middle = figures.len() / 2;
    if figures.len() % 2 == 1 {
        figures[middle]
    } else {
        (figures[middle - 1] + figures[middle]) / 2.0
    }
}

/// The run's shape, as given.
#[derive(Debug, Serialize)]
pub struct RunShape {
    records: u64,
    ops: u64,
    value_bytes: usize,
    threads: usize,
    sync: &'static str,
    rounds: usize,
    cache_mib: u64,
    seed: u64,
    stores: Vec<String>,
    workloads: Vec<String>,
}

/// A store's medians on one workload.
#[derive(Debug, Serialize)]
pub struct WorkloadMedian {
    workload: String,
    kops: f64,
    read_p99_us: f64,
    read_p999_us: f64,
    write_p99_us: f64,
    scan_p99_us: f64,
    /// Summed over the rounds, not a median: any is a failure.
    mismatches: u64,
}

/// Median and largest over the rounds.
#[derive(Debug, Serialize)]
pub struct MedianMax {
    median: f64,
    max: f64,
}

/// One store's medians.
#[derive(Debug, Serialize)]
pub struct StoreMedians {
    store: String,
    settings: String,
    sync_mapping: String,
    peak_rss_mib: MedianMax,
    rss_before_open_mib: f64,
    disk_mib: f64,
    workloads: Vec<WorkloadMedian>,
}

/// Everything the run writes.
#[derive(Debug, Serialize)]
pub struct Summary {
    config: RunShape,
    stores: Vec<StoreMedians>,
    rounds: Vec<Vec<StoreRun>>,
}

impl Summary {
    /// Medians of `rounds` per store and workload.
    pub fn new(args: &Args, mode: SyncMode, seed: u64, rounds: &[Vec<StoreRun>]) -> Summary {
        let runs_of = |store: &str| -> Vec<&StoreRun> {
            rounds
                .iter()
                .flatten()
                .filter(|run| run.store == store)
                .collect()
        };
        let stores = args
            .stores
            .iter()
            .map(|store| {
                let runs = runs_of(store);
                let over = |figure: &dyn Fn(&StoreRun) -> f64| {
                    median(runs.iter().map(|run| figure(run)).collect())
                };
                let workloads = args
                    .workloads
                    .iter()
                    .map(|workload| {
                        let results: Vec<_> = runs
                            .iter()
                            .filter_map(|run| {
                                run.workloads
                                    .iter()
                                    .find(|result| result.workload == *workload)
                            })
                            .collect();
                        let of = |figure: &dyn Fn(&crate::run::WorkloadResult) -> f64| {
                            median(results.iter().map(|result| figure(result)).collect())
                        };
                        WorkloadMedian {
                            workload: workload.clone(),
                            kops: of(&|result| result.kops),
                            read_p99_us: of(&|result| result.read_us.p99 as f64),
                            read_p999_us: of(&|result| result.read_us.p999 as f64),
                            write_p99_us: of(&|result| result.write_us.p99 as f64),
                            scan_p99_us: of(&|result| result.scan_us.p99 as f64),
                            mismatches: results.iter().map(|result| result.mismatches).sum(),
                        }
                    })
                    .collect();
                StoreMedians {
                    store: store.clone(),
                    settings: runs
                        .first()
                        .map(|run| run.settings.clone())
                        .unwrap_or_default(),
                    sync_mapping: runs
                        .first()
                        .map(|run| run.sync_mapping.clone())
                        .unwrap_or_default(),
                    peak_rss_mib: MedianMax {
                        median: over(&|run| run.peak_rss_mib),
                        max: runs.iter().map(|run| run.peak_rss_mib).fold(0.0, f64::max),
                    },
                    rss_before_open_mib: over(&|run| run.rss_before_open_mib),
                    disk_mib: over(&|run| run.disk_bytes as f64 / f64::from(1 << 20)),
                    workloads,
                }
            })
            .collect();
        Summary {
            config: RunShape {
                records: args.records,
                ops: args.ops,
                value_bytes: args.value_bytes,
                threads: args.threads,
                sync: mode.name(),
                rounds: rounds.len(),
                cache_mib: args.cache_mib,
                seed,
                stores: args.stores.clone(),
                workloads: args.workloads.clone(),
            },
            stores,
            rounds: rounds.to_vec(),
        }
    }

    /// Reads that did not return what was written, every store and round.
    pub fn mismatches_total(&self) -> u64 {
        self.stores
            .iter()
            .flat_map(|store| store.workloads.iter())
            .map(|workload| workload.mismatches)
            .sum()
    }

    /// The table: per workload, per store, medians over the rounds; then memory per store.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let config = &self.config;
        let _ = writeln!(
            out,
            "medians of {} rounds, wall clock; {} records, {} requests per workload, {} B values, {} threads, --sync {}",
            config.rounds, config.records, config.ops, config.value_bytes, config.threads, config.sync
        );
        let _ = writeln!(
            out,
            "{:<8} {:<8} {:>10} {:>14} {:>16} {:>15} {:>14} {:>10}",
            "workload",
            "store",
            "kops/s",
            "read p99 us",
            "read p99.9 us",
            "write p99 us",
            "scan p99 us",
            "mismatches"
        );
        for workload in &config.workloads {
            for store in &self.stores {
                let Some(figures) = store
                    .workloads
                    .iter()
                    .find(|figures| figures.workload == *workload)
                else {
                    continue;
                };
                let latency = |value: f64| {
                    if value > 0.0 {
                        format!("{value:.0}")
                    } else {
                        "-".to_string()
                    }
                };
                let _ = writeln!(
                    out,
                    "{:<8} {:<8} {:>10.1} {:>14} {:>16} {:>15} {:>14} {:>10}",
                    workload,
                    store.store,
                    figures.kops,
                    latency(figures.read_p99_us),
                    latency(figures.read_p999_us),
                    latency(figures.write_p99_us),
                    latency(figures.scan_p99_us),
                    figures.mismatches
                );
            }
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<8} {:>22} {:>19} {:>22} {:>14}",
            "store",
            "peak RSS MiB (median)",
            "peak RSS MiB (max)",
            "harness before open MiB",
            "disk MiB"
        );
        for store in &self.stores {
            let _ = writeln!(
                out,
                "{:<8} {:>22.0} {:>19.0} {:>22.0} {:>14.0}",
                store.store,
                store.peak_rss_mib.median,
                store.peak_rss_mib.max,
                store.rss_before_open_mib,
                store.disk_mib
            );
        }
        let _ = writeln!(out);
        for store in &self.stores {
            let _ = writeln!(out, "{}: {}", store.store, store.settings);
        }
        out
    }
}

/// Bars of each store's median throughput, side by side in one group per workload (the
/// benchmarks' own grouped bars).
pub fn plot_throughput(path: &Path, summary: &Summary) -> std::io::Result<()> {
    let names: Vec<String> = summary
        .stores
        .iter()
        .map(|store| store.store.clone())
        .collect();
    let title = format!(
        "YCSB on a file, wall clock: median of {} rounds ({} threads, --sync {})",
        summary.config.rounds, summary.config.threads, summary.config.sync
    );
    kvssd_bench::report::grouped_bars(
        path,
        &title,
        "thousand requests per second",
        &names,
        &summary.config.workloads,
        |store, workload| {
            summary
                .stores
                .iter()
                .find(|medians| medians.store == store)?
                .workloads
                .iter()
                .find(|figures| figures.workload == workload)
                .map(|figures| figures.kops)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![7.0]), 7.0);
        assert_eq!(median(Vec::new()), 0.0);
    }
}
