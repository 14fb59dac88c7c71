//! Plots of the OLTP benchmarks (`tpcb`, `tpcc`, `ycsb --host`; `--report DIR`), drawn with
//! [`crate::report`]'s charts and page:
//!
//! * `throughput.svg`: committed transactions per simulated second, one group per transaction and
//!   hit ratio, one bar per commit path and lock granularity (KAML Fig. 9's layout);
//! * `abort_rate.svg`: aborts (wait-die victims, rollbacks and refusals) per transaction begun,
//!   `aborts / (committed + aborts)`, in the same layout;
//! * `latency_<transaction>.svg`: transaction latency p50, p99 and p99.9 of each run;
//! * `index.html`: a self-contained page with all of them inline and the table.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::oltp::{self, OltpReport, OltpResult};
use crate::report::{clock_label, clock_name, escape, grouped_bars, html_page, unique};

/// A run's series name: commit path and lock granularity.
fn series(result: &OltpResult) -> String {
    format!(
        "{} g{}",
        result.params.commit_path, result.params.lock_granularity
    )
}

/// A run's group in the throughput and abort charts: transaction and hit ratio.
fn group(result: &OltpResult) -> String {
    format!("{} hit {}", result.transaction, result.params.hit_ratio)
}

/// A name safe in a file name: lower case letters, digits and `-`.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// Aborts per transaction begun (0 when nothing ran).
pub fn abort_rate(result: &OltpResult) -> f64 {
    let begun = result.committed + result.aborts;
    if begun == 0 {
        0.0
    } else {
        result.aborts as f64 / begun as f64
    }
}

/// Writes the plots and `index.html` of an OLTP report into `directory` (created if needed);
/// returns the files.
pub fn write_plots(report: &OltpReport, directory: &Path) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(directory)?;
    let mut files = Vec::new();
    let all_series = unique(report.results.iter().map(series));
    let groups = unique(report.results.iter().map(group));
    let find = |name: &str, in_group: &str| {
        report
            .results
            .iter()
            .find(|result| series(result) == name && group(result) == in_group)
    };
    let clock = clock_name(report.simulated);

    let throughput = directory.join("throughput.svg");
    grouped_bars(
        &throughput,
        &format!("{}: throughput ({clock})", report.benchmark),
        "committed transactions / s",
        &all_series,
        &groups,
        |name, in_group| find(name, in_group).map(|result| result.throughput_tps),
    )?;
    files.push(throughput);

    let aborts = directory.join("abort_rate.svg");
    grouped_bars(
        &aborts,
        &format!("{}: aborts per transaction begun", report.benchmark),
        "abort rate",
        &all_series,
        &groups,
        |name, in_group| find(name, in_group).map(abort_rate),
    )?;
    files.push(aborts);

    let percentiles = ["p50".to_string(), "p99".to_string(), "p99.9".to_string()];
    for transaction in unique(report.results.iter().map(|r| r.transaction.clone())) {
        let runs: Vec<&OltpResult> = report
            .results
            .iter()
            .filter(|result| result.transaction == transaction)
            .collect();
        let labels: Vec<String> = runs
            .iter()
            .map(|result| format!("{} h{}", series(result), result.params.hit_ratio))
            .collect();
        let path = directory.join(format!("latency_{}.svg", file_safe(&transaction)));
        grouped_bars(
            &path,
            &format!(
                "{} {transaction}: transaction latency ({clock})",
                report.benchmark
            ),
            "us",
            &percentiles,
            &labels,
            |percentile, label| {
                let run = labels.iter().position(|other| other == label)?;
                let latency = &runs[run].latency_us;
                match percentile {
                    "p50" => Some(latency.p50),
                    "p99" => Some(latency.p99),
                    _ => Some(latency.p999),
                }
            },
        )?;
        files.push(path);
    }

    let html = directory.join("index.html");
    let summary = format!(
        "{}, seed {}, {} figures. {}",
        escape(&report.benchmark),
        report.seed,
        clock_label(report.simulated),
        escape(&report.setup)
    );
    let page = html_page(
        &format!("kvssd bench {}", report.benchmark),
        &summary,
        &files,
        &oltp::table(report),
    )?;
    fs::write(&html, page)?;
    files.push(html);
    Ok(files)
}

/// Checks a report directory for tests: every file `write_plots` returned exists and is not
/// empty, and the expected charts are among them.
#[cfg(test)]
pub(crate) fn assert_plots_written(report: &OltpReport) {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = write_plots(report, dir.path()).expect("plots");
    for expected in ["throughput.svg", "abort_rate.svg", "index.html"] {
        assert!(
            files.iter().any(|file| file.ends_with(expected)),
            "{expected} in {files:?}"
        );
    }
    let transactions = unique(report.results.iter().map(|r| r.transaction.clone()));
    assert_eq!(files.len(), 3 + transactions.len(), "{files:?}");
    for file in &files {
        let bytes = fs::metadata(file).expect("written").len();
        assert!(bytes > 0, "{} is empty", file.display());
    }
    let throughput = fs::read_to_string(dir.path().join("throughput.svg")).expect("svg");
    for result in &report.results {
        assert!(
            throughput.contains(&series(result)),
            "{} in the legend",
            series(result)
        );
    }
    let html = fs::read_to_string(dir.path().join("index.html")).expect("html");
    assert!(html.contains("<svg") && html.contains("tps (sim)"));
}
