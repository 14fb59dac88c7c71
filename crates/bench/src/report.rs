//! One schema for every benchmark: the JSON object, the terminal table and the plots.
//!
//! JSON (`--json PATH`):
//!
//! ```text
//! {"profile": str, "simulated": bool, "seed": int,
//!  "results": [{"preset": str, "workload": str, "ops": int, "throughput_kops": num,
//!               "read_latency_us": {"avg","p50","p99","p999","p9999","max"},
//!               "write_latency_us": {same keys},
//!               "flash_reads_per_query": {"avg": num, "max": int},
//!               "index_reads_per_get": {"avg": num, "max": int},
//!               "point_get_reads": {"flash": {"avg","p9999","max"}, "index": {same}}?,
//!               "compaction_io_share": num, "waf": num (device since format),
//!               "phase_waf": num or null (this run alone), "dram_bytes": {part: int},
//!               "params": {...}?, "next_latency_us": {...}?, "seek_latency_us": {...}?,
//!               "value_mb_per_s": num?,
//!               "note": str?, "sim_requests_per_wall_s": num}]}
//! ```
//!
//! Plots (`--report DIR`): `throughput.svg` (PinK Fig. 8), `flash_reads_per_query.svg` (Fig. 9a),
//! `read_latency_cdf_<workload>.svg` (Fig. 10), and `index.html`, a self-contained page with all of
//! them inline and the table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::Ranged;
use plotters::prelude::*;
use serde::Serialize;

use crate::counts::GetReads;
use crate::{LatencySummary, LatencyWindow};

/// Average and largest count per request.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct PerRequest {
    /// Mean over requests.
    pub avg: f64,
    /// Largest.
    pub max: u64,
}

/// The figures of one preset on one workload.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BenchResult {
    /// Engine preset.
    pub preset: String,
    /// Workload name.
    pub workload: String,
    /// Requests completed.
    pub ops: u64,
    /// Requests per simulated second, in thousands.
    pub throughput_kops: f64,
    /// Latency of reads (GETs, scans, seeks), simulated microseconds.
    pub read_latency_us: LatencySummary,
    /// Latency of writes (puts, deletes, read-modify-writes), simulated microseconds.
    pub write_latency_us: LatencySummary,
    /// Flash page reads of any purpose per request.
    pub flash_reads_per_query: PerRequest,
    /// Index (meta or bucket) page reads per GET.
    pub index_reads_per_get: PerRequest,
    /// Flash and index page reads of each point GET (a workload's read of one key): mean,
    /// p99.99 and largest. Absent when the run made none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub point_get_reads: Option<GetReads>,
    /// Share of all flash I/O (pages read plus programmed) done by compaction.
    pub compaction_io_share: f64,
    /// Write amplification of the device since it was formatted: bytes programmed for any purpose
    /// per byte programmed for user data (1.0 before any user data is written).
    pub waf: f64,
    /// Write amplification of this run alone (`null` when it wrote no user data).
    pub phase_waf: Option<f64>,
    /// DRAM in use at the end of the run, by part.
    pub dram_bytes: BTreeMap<String, u64>,
    /// Controller computation per request, simulated microseconds: everything the engine charged
    /// to the controller cores during the run (searches, merges, Bloom filters, copies), divided
    /// by the requests. Absent where the store's controller is not modelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_cpu_us_per_op: Option<f64>,
    /// Share of the run's simulated time each controller thread was busy: `request`,
    /// `background` (flush and compaction), `gc` and `accelerator`. Absent where the store's
    /// controller is not modelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_utilisation: Option<BTreeMap<String, f64>>,
    /// Simulated milliseconds writers spent waiting for background work during the run (summed
    /// over writers; see docs/design.md on write stalls). Absent where not modelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_stall_ms: Option<f64>,
    /// Parameters particular to this result (prefetch degree, scan length, value size, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<serde_json::Map<String, serde_json::Value>>,
    /// Latency of iterator Next calls, simulated microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_latency_us: Option<LatencySummary>,
    /// Latency of iterator Seek calls, simulated microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seek_latency_us: Option<LatencySummary>,
    /// Value bytes iterators returned per simulated second, MB/s (SeekRandom).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_mb_per_s: Option<f64>,
    /// How this result differs from what its name suggests, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The simulator's own speed: requests per wall-clock second.
    pub sim_requests_per_wall_s: f64,
    /// GETs whose value was not the write of its key the benchmark expected (any makes the run
    /// fail: [`BenchReport::value_mismatch_error`]).
    pub value_mismatches: u64,
    /// What was wrong with the first of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_value_mismatch: Option<String>,
    /// Flash operations and controller work the timing model scheduled behind its horizon (more
    /// than [`kvssd_flash::BOOKING_WINDOW_NS`] before the command clock), whose timing may be
    /// too optimistic: zero in a run whose figures can be trusted (absent from the JSON then).
    #[serde(skip_serializing_if = "is_zero")]
    pub late_issues: u64,
    /// Read-latency CDF points for the plots (not part of the JSON).
    #[serde(skip)]
    pub read_latency_cdf: Vec<(f64, f64)>,
    /// Write amplification of the run so far, sampled as (requests done, WAF).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waf_over_time: Vec<(u64, f64)>,
    /// Read latency over the run's simulated time, in equal windows (mean and largest per
    /// window).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read_latency_over_time: Vec<LatencyWindow>,
}

/// A whole benchmark run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BenchReport {
    /// Device profile name.
    pub profile: String,
    /// True when the figures come from the virtual clock of simulated flash.
    pub simulated: bool,
    /// Seed of every generator in the run.
    pub seed: u64,
    /// How the simulated controller ran its work (`threads` or `interchangeable`), where the run
    /// chose it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// One entry per preset and workload, in run order.
    pub results: Vec<BenchResult>,
    /// What the run observed about the stores (tree shape after load, ...), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl BenchReport {
    /// `Some(message)` if any run read a value that was not the one it expected: such a run
    /// fails, after its figures are reported.
    pub fn value_mismatch_error(&self) -> Option<String> {
        let wrong: Vec<String> = self
            .results
            .iter()
            .filter(|result| result.value_mismatches > 0)
            .map(|result| {
                format!(
                    "{} {}: {} ({})",
                    result.preset,
                    result.workload,
                    result.value_mismatches,
                    result.first_value_mismatch.as_deref().unwrap_or("")
                )
            })
            .collect();
        (!wrong.is_empty()).then(|| {
            format!(
                "GETs returned values other than the ones written: {}",
                wrong.join("; ")
            )
        })
    }

    /// An empty report of a run on simulated flash.
    pub fn simulated(profile: &str, seed: u64) -> BenchReport {
        BenchReport {
            profile: profile.to_string(),
            simulated: true,
            seed,
            controller: None,
            results: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A copy whose presets carry the named parameters as `short=value` (`pink h=6`; flags as
    /// `on` or `off`), for the
    /// table and plots, which tell results apart by preset and workload: `keys` are (parameter,
    /// short name) pairs.
    pub fn labelled(&self, keys: &[(&str, &str)]) -> BenchReport {
        let mut labelled = self.clone();
        for result in &mut labelled.results {
            let Some(params) = &result.params else {
                continue;
            };
            for (key, short) in keys {
                let shown = match params.get(*key) {
                    Some(serde_json::Value::Bool(true)) => "on".to_string(),
                    Some(serde_json::Value::Bool(false)) => "off".to_string(),
                    Some(serde_json::Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => continue,
                };
                result.preset = format!("{} {short}={shown}", result.preset);
            }
        }
        labelled
    }

    /// The terminal table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for note in &self.notes {
            let _ = writeln!(out, "{note}");
        }
        let clock = clock_name(self.simulated);
        let _ = writeln!(
            out,
            "profile {} · seed {} · latencies in {clock} microseconds · rd/q: flash reads per request · cpu/op: controller µs per request · req%/bg%: request and background threads' utilisation · stall: writers' wait for background work, ms · WAF: the device's since format",
            self.profile, self.seed
        );
        let _ = writeln!(
            out,
            "{:<11} {:<5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>5} {:>7} {:>5} {:>7} {:>9} {:>9} {:>6} {:>10}",
            "preset",
            "wkld",
            "KIOPS",
            "rd avg",
            "rd p99",
            "rd p99.9",
            "rd p99.99",
            "wr p99",
            "rd/q",
            "max",
            "idx/get",
            "max",
            "cpu/op",
            "req%/bg%",
            "stall",
            "WAF",
            "DRAM KiB"
        );
        for result in &self.results {
            let dram: u64 = result.dram_bytes.values().sum();
            let _ = writeln!(
                out,
                "{:<11} {:<5} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>6.2} {:>5} {:>7.2} {:>5} {:>7} {:>9} {:>9} {:>6.2} {:>10}",
                result.preset,
                result.workload,
                result.throughput_kops,
                result.read_latency_us.avg,
                result.read_latency_us.p99,
                result.read_latency_us.p999,
                result.read_latency_us.p9999,
                result.write_latency_us.p99,
                result.flash_reads_per_query.avg,
                result.flash_reads_per_query.max,
                result.index_reads_per_get.avg,
                result.index_reads_per_get.max,
                result
                    .controller_cpu_us_per_op
                    .map_or_else(|| "-".to_string(), |cpu| format!("{cpu:.2}")),
                result.controller_utilisation.as_ref().map_or_else(
                    || "-".to_string(),
                    |busy| {
                        let share = |name: &str| busy.get(name).copied().unwrap_or(0.0) * 100.0;
                        format!("{:.0}/{:.0}", share("request"), share("background"))
                    }
                ),
                result
                    .write_stall_ms
                    .map_or_else(|| "-".to_string(), |ms| format!("{ms:.0}")),
                result.waf,
                dram / 1024
            );
            if let Some(note) = &result.note {
                let _ = writeln!(out, "{:<17} note: {note}", "");
            }
            if result.late_issues > 0 {
                let _ = writeln!(
                    out,
                    "{:<17} LATE ISSUES: {} operations were scheduled more than the timing model's window behind its clock; their timing may be too optimistic",
                    "",
                    result.late_issues
                );
            }
            if result.value_mismatches > 0 {
                let _ = writeln!(
                    out,
                    "{:<17} VALUE MISMATCHES: {} GETs returned another value than the one written; the first: {}",
                    "",
                    result.value_mismatches,
                    result.first_value_mismatch.as_deref().unwrap_or("-")
                );
            }
        }
        out
    }

    /// Writes the plots and `index.html` into `directory` (created if needed); returns the files.
    pub fn write_plots(&self, directory: &Path) -> io::Result<Vec<PathBuf>> {
        fs::create_dir_all(directory)?;
        let mut files = Vec::new();
        let presets = unique(self.results.iter().map(|result| result.preset.clone()));
        let workloads = unique(self.results.iter().map(|result| result.workload.clone()));
        let clock = clock_name(self.simulated);

        let throughput = directory.join("throughput.svg");
        grouped_bars(
            &throughput,
            &format!("Throughput ({clock}), profile {}", self.profile),
            "KIOPS",
            &presets,
            &workloads,
            |preset, workload| {
                self.find(preset, workload)
                    .map(|result| result.throughput_kops)
            },
        )?;
        files.push(throughput);

        let reads = directory.join("flash_reads_per_query.svg");
        grouped_bars(
            &reads,
            "Flash page reads per query (average)",
            "reads / query",
            &presets,
            &workloads,
            |preset, workload| {
                self.find(preset, workload)
                    .map(|result| result.flash_reads_per_query.avg)
            },
        )?;
        files.push(reads);

        for workload in &workloads {
            let series: Vec<(String, Vec<(f64, f64)>)> = presets
                .iter()
                .filter_map(|preset| {
                    self.find(preset, workload)
                        .filter(|result| !result.read_latency_cdf.is_empty())
                        .map(|result| (preset.clone(), result.read_latency_cdf.clone()))
                })
                .collect();
            if series.is_empty() {
                continue;
            }
            let path = directory.join(format!("read_latency_cdf_{workload}.svg"));
            cdf_plot(
                &path,
                &format!("Read latency CDF, workload {workload} ({clock})"),
                &series,
            )?;
            files.push(path);
        }

        for workload in &workloads {
            let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
            for result in self.results.iter().filter(|result| {
                &result.workload == workload && !result.read_latency_over_time.is_empty()
            }) {
                let windows = result
                    .read_latency_over_time
                    .iter()
                    .filter(|window| window.reads > 0);
                series.push((
                    format!("{} max", result.preset),
                    windows
                        .clone()
                        .map(|window| (window.start_ms, window.max_us))
                        .collect(),
                ));
                series.push((
                    format!("{} mean", result.preset),
                    windows
                        .map(|window| (window.start_ms, window.avg_us))
                        .collect(),
                ));
            }
            if series.is_empty() {
                continue;
            }
            let path = directory.join(format!("read_latency_over_time_{workload}.svg"));
            line_plot(
                &path,
                &format!(
                    "Read latency over the run, workload {workload} ({clock}; largest and mean per window)"
                ),
                "simulated ms since the workload started",
                "read latency, us",
                &series,
            )?;
            files.push(path);
        }

        let waf_series: Vec<(String, Vec<(f64, f64)>)> = self
            .results
            .iter()
            .filter(|result| !result.waf_over_time.is_empty())
            .map(|result| {
                let points = result
                    .waf_over_time
                    .iter()
                    .map(|&(requests, waf)| (requests as f64, waf))
                    .collect();
                (format!("{} {}", result.preset, result.workload), points)
            })
            .collect();
        if !waf_series.is_empty() {
            let path = directory.join("waf_over_time.svg");
            line_plot(
                &path,
                "Write amplification over time",
                "requests",
                "WAF",
                &waf_series,
            )?;
            files.push(path);
        }

        let html = directory.join("index.html");
        fs::write(&html, self.html(&files)?)?;
        files.push(html);
        Ok(files)
    }

    fn find(&self, preset: &str, workload: &str) -> Option<&BenchResult> {
        self.results
            .iter()
            .find(|result| result.preset == preset && result.workload == workload)
    }

    fn html(&self, svgs: &[PathBuf]) -> io::Result<String> {
        let summary = format!(
            "profile <b>{}</b>, seed {}{}, {} figures.",
            escape(&self.profile),
            self.seed,
            self.controller
                .as_deref()
                .map(|controller| format!(", controller model {}", escape(controller)))
                .unwrap_or_default(),
            clock_label(self.simulated)
        );
        html_page("kvssd bench", &summary, svgs, &self.table())
    }
}

/// A self-contained page: a heading, a line of summary (HTML), every SVG inline, and the table.
pub(crate) fn html_page(
    title: &str,
    summary: &str,
    svgs: &[PathBuf],
    table: &str,
) -> io::Result<String> {
    let title = escape(title);
    let mut page = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}pre{{font-size:12px}}figure{{margin:1em 0}}</style>\
         </head><body>\n"
    );
    let _ = writeln!(page, "<h1>{title}</h1><p>{summary}</p>");
    for svg in svgs {
        let content = fs::read_to_string(svg)?;
        let _ = writeln!(page, "<figure>{content}</figure>");
    }
    let _ = writeln!(page, "<h2>Table</h2><pre>{}</pre>", escape(table));
    page.push_str("</body></html>\n");
    Ok(page)
}

pub(crate) fn unique(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Whether a count is zero (counts that are zero are left out of the JSON).
fn is_zero(count: &u64) -> bool {
    *count == 0
}

fn plot_error(error: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("plot: {error}"))
}

/// Bars of each series (`presets`) side by side in one group per `workloads` entry.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    y_label: &str,
    presets: &[String],
    workloads: &[String],
    value: impl Fn(&str, &str) -> Option<f64>,
) -> io::Result<()> {
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let group = presets.len() as f64 + 1.0;
    let width = workloads.len() as f64 * group;
    let top = workloads
        .iter()
        .flat_map(|workload| presets.iter().filter_map(|preset| value(preset, workload)))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..width, 0f64..top)
        .map_err(plot_error)?;
    let label_of = |x: &f64| {
        let group_index = (*x / group).floor() as usize;
        let within = *x - group_index as f64 * group;
        if (within - group / 2.0).abs() < 0.5 {
            workloads.get(group_index).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(workloads.len() * group as usize * 2)
        .x_label_formatter(&label_of)
        .y_desc(y_label)
        .draw()
        .map_err(plot_error)?;
    for (index, preset) in presets.iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        let bars: Vec<Rectangle<(f64, f64)>> = workloads
            .iter()
            .enumerate()
            .filter_map(|(group_index, workload)| {
                value(preset, workload).map(|height| {
                    let left = group_index as f64 * group + 0.5 + index as f64;
                    Rectangle::new([(left, 0.0), (left + 0.9, height)], color.filled())
                })
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(plot_error)?
            .label(preset.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)
}

fn cdf_plot(path: &Path, title: &str, series: &[(String, Vec<(f64, f64)>)]) -> io::Result<()> {
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let all = series.iter().flat_map(|(_, points)| points.iter());
    let (low, high) = all.fold((f64::MAX, 0.0f64), |(low, high), &(x, _)| {
        (low.min(x), high.max(x))
    });
    let low = (low * 0.8).max(0.01);
    let high = (high * 1.25).max(low * 10.0);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d((low..high).log_scale(), 0f64..1.0)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("latency (us, log scale)")
        .y_desc("fraction of reads")
        .draw()
        .map_err(plot_error)?;
    draw_lines(&mut chart, series)?;
    root.present().map_err(plot_error)
}

/// Draws each named series as a line, with a legend in the lower right.
fn draw_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    series: &[(String, Vec<(f64, f64)>)],
) -> io::Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (index, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(plot_error)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(plot_error)
}

fn line_plot(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> io::Result<()> {
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let points = series.iter().flat_map(|(_, points)| points.iter());
    let (x_max, y_max) = points.fold((1.0f64, 1.0f64), |(x, y), &(px, py)| (x.max(px), y.max(py)));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max * 1.15)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(plot_error)?;
    draw_lines(&mut chart, series)?;
    root.present().map_err(plot_error)
}

/// How a result's times were measured, in a few words: "simulated" or "wall-clock".
pub(crate) fn clock_name(simulated: bool) -> &'static str {
    if simulated {
        "simulated"
    } else {
        "wall-clock"
    }
}

/// The same, as a report page's summary says it.
pub(crate) fn clock_label(simulated: bool) -> &'static str {
    if simulated {
        "simulated (virtual clock)"
    } else {
        "wall-clock"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::LatencyRecorder;

    fn result(preset: &str, workload: &str, kops: f64) -> BenchResult {
        let mut latencies = LatencyRecorder::new();
        for ns in [1_000, 2_000, 5_000, 100_000] {
            latencies.record(ns);
        }
        BenchResult {
            preset: preset.into(),
            workload: workload.into(),
            ops: 4,
            throughput_kops: kops,
            read_latency_us: latencies.summary(),
            read_latency_cdf: latencies.cdf_points(),
            dram_bytes: BTreeMap::from([("l0".to_string(), 4096)]),
            ..BenchResult::default()
        }
    }

    fn report() -> BenchReport {
        BenchReport {
            profile: "test".into(),
            simulated: true,
            seed: 3,
            controller: Some("threads".into()),
            notes: Vec::new(),
            results: vec![
                result("pink", "a", 10.0),
                result("hash", "a", 5.0),
                result("pink", "c", 12.0),
            ],
        }
    }

    #[test]
    fn report_json_has_the_schema_keys() {
        let json = serde_json::to_value(report()).expect("serialises");
        assert_eq!(json["profile"], "test");
        assert_eq!(json["simulated"], true);
        let first = &json["results"][0];
        for key in [
            "preset",
            "workload",
            "ops",
            "throughput_kops",
            "read_latency_us",
            "write_latency_us",
            "flash_reads_per_query",
            "index_reads_per_get",
            "compaction_io_share",
            "waf",
            "dram_bytes",
        ] {
            assert!(first.get(key).is_some(), "{key} missing: {first}");
        }
        for key in ["avg", "p50", "p99", "p999", "p9999", "max"] {
            assert!(first["read_latency_us"].get(key).is_some(), "{key}");
        }
        assert!(
            first.get("read_latency_cdf").is_none(),
            "plot data stays out of the JSON"
        );
        assert!(first.get("params").is_none(), "absent options are omitted");
        assert_eq!(first["dram_bytes"]["l0"], 4096);
    }

    #[test]
    fn report_plots_and_page_are_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = report().write_plots(dir.path()).expect("plots");
        let names: Vec<String> = files
            .iter()
            .filter_map(|path| {
                path.file_name()
                    .map(|name| name.to_string_lossy().into_owned())
            })
            .collect();
        for expected in [
            "throughput.svg",
            "flash_reads_per_query.svg",
            "read_latency_cdf_a.svg",
            "read_latency_cdf_c.svg",
            "index.html",
        ] {
            assert!(
                names.iter().any(|name| name == expected),
                "{expected} in {names:?}"
            );
        }
        let svg = fs::read_to_string(dir.path().join("throughput.svg")).expect("svg");
        assert!(svg.starts_with("<svg") && svg.contains("pink") && svg.contains("hash"));
        let html = fs::read_to_string(dir.path().join("index.html")).expect("html");
        assert!(html.contains("<svg") && html.contains("KIOPS"));
        assert!(!html.contains("src=\""), "the page is self-contained");
    }

    #[test]
    fn report_table_lists_every_result() {
        let table = report().table();
        assert_eq!(table.lines().count(), 2 + 3, "{table}");
        assert!(table.contains("simulated microseconds"));
    }

    /// Late issues are said in the table and the JSON when there are any, and left out of both
    /// when there are none.
    #[test]
    fn report_says_late_issues_only_when_there_are_some() {
        let mut report = report();
        report.results[1].late_issues = 17;
        let table = report.table();
        assert_eq!(
            table.matches("LATE ISSUES: 17 operations").count(),
            1,
            "{table}"
        );
        let json = serde_json::to_value(&report).expect("serialises");
        assert_eq!(json["results"][1]["late_issues"], 17);
        assert!(json["results"][0].get("late_issues").is_none());
    }
}
