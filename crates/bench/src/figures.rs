//! `docs/figures.md` from the benchmarks' JSON: every measured figure the docs quote, in one file
//! that `scripts/figures.sh` regenerates, so a re-run can never leave a doc stale.
//!
//! Input: one or more runs, each the command that produced it and the JSON object it wrote with
//! `--json` (the schema of [`crate::report`]). Output: per run a section headed by the command,
//! then its profile and seed, and tables of throughput and latency, flash reads and write
//! amplification, and (for iterator benchmarks) Seek and Next latency. Only simulated figures are
//! written: the simulator's own speed depends on the machine, so a re-run on the same code gives
//! the same file.

use std::fmt::Write as _;

use serde_json::Value;

/// One benchmark run: the command line that produced it and the JSON object it wrote.
#[derive(Debug, Clone)]
pub struct FiguresRun {
    /// The command, as a reader would type it (`kvssd bench ycsb --presets pink`).
    pub command: String,
    /// The parsed `--json` output.
    pub json: Value,
}

/// Why a run's JSON cannot be turned into tables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{command}: {what}")]
pub struct FiguresError {
    /// The run's command.
    pub command: String,
    /// What is missing or malformed.
    pub what: String,
}

fn number(value: &Value, path: &[&str]) -> Option<f64> {
    let mut at = value;
    for key in path {
        at = at.get(key)?;
    }
    at.as_f64()
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A cell: `decimals` places, or `-` when the figure is absent (JSON `null` or missing).
fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let rule: Vec<&str> = header
        .iter()
        .enumerate()
        .map(|(column, _)| if column < 2 { "---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "| {} |", rule.join(" | "));
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
}

fn params_text(params: &serde_json::Map<String, Value>, keys: &[&String]) -> String {
    let parts: Vec<String> = keys
        .iter()
        .filter_map(|key| {
            Some(match params.get(key.as_str())? {
                Value::String(s) => format!("{key}={s}"),
                other => format!("{key}={other}"),
            })
        })
        .collect();
    parts.join(", ")
}

/// The second column of every table: the workload, with those of the result's parameters whose
/// values differ between results of the same preset and workload (a prefetch degree, say), so
/// each row names what sets it apart. The rest are listed below the tables.
fn workload_cell(result: &Value, results: &[Value]) -> String {
    let workload = text(result, "workload").to_string();
    let Some(params) = result.get("params").and_then(Value::as_object) else {
        return workload;
    };
    let siblings: Vec<&Value> = results
        .iter()
        .filter(|other| {
            text(other, "preset") == text(result, "preset") && text(other, "workload") == workload
        })
        .collect();
    let varying: Vec<&String> = params
        .keys()
        .filter(|key| {
            siblings.iter().any(|other| {
                other.get("params").and_then(|p| p.get(key.as_str())) != params.get(key.as_str())
            })
        })
        .collect();
    if varying.is_empty() {
        workload
    } else {
        format!("{workload} ({})", params_text(params, &varying))
    }
}

fn latency(result: &Value, which: &str, part: &str) -> String {
    cell(number(result, &[which, part]), 1)
}

/// Writes one run's section.
fn run_section(out: &mut String, run: &FiguresRun) -> Result<(), FiguresError> {
    let fail = |what: &str| FiguresError {
        command: run.command.clone(),
        what: what.to_string(),
    };
    let json = &run.json;
    let results = json
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| fail("no \"results\" array"))?;
    let seed = json
        .get("seed")
        .and_then(Value::as_u64)
        .ok_or_else(|| fail("no \"seed\""))?;
    let clock = match json.get("simulated").and_then(Value::as_bool) {
        Some(true) => "simulated time",
        _ => "wall-clock time",
    };
    let _ = writeln!(out, "## `{}`\n", run.command);
    let controller = json
        .get("controller")
        .and_then(Value::as_str)
        .map(|controller| format!(", controller model `{controller}`"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "Profile `{}`, seed {seed}{controller}, {clock}. Latencies in microseconds.\n",
        text(json, "profile")
    );
    if let Some(notes) = json.get("notes").and_then(Value::as_array) {
        for note in notes.iter().filter_map(Value::as_str) {
            let _ = writeln!(out, "- {note}");
        }
        if !notes.is_empty() {
            out.push('\n');
        }
    }
    for result in results {
        if result.get("preset").and_then(Value::as_str).is_none() {
            return Err(fail("a result without a \"preset\""));
        }
    }

    let _ = writeln!(out, "### Throughput and latency\n");
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|result| {
            vec![
                text(result, "preset").to_string(),
                workload_cell(result, results),
                cell(number(result, &["ops"]), 0),
                cell(number(result, &["throughput_kops"]), 1),
                latency(result, "read_latency_us", "avg"),
                latency(result, "read_latency_us", "p50"),
                latency(result, "read_latency_us", "p99"),
                latency(result, "read_latency_us", "p999"),
                latency(result, "read_latency_us", "p9999"),
                latency(result, "write_latency_us", "avg"),
                latency(result, "write_latency_us", "p99"),
            ]
        })
        .collect();
    table(
        out,
        &[
            "preset",
            "workload",
            "requests",
            "KIOPS",
            "read avg",
            "read p50",
            "read p99",
            "read p99.9",
            "read p99.99",
            "write avg",
            "write p99",
        ],
        &rows,
    );

    let _ = writeln!(out, "### Flash reads, write amplification, DRAM\n");
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|result| {
            let dram: Option<u64> = result
                .get("dram_bytes")
                .and_then(Value::as_object)
                .map(|parts| parts.values().filter_map(Value::as_u64).sum::<u64>() / 1024);
            vec![
                text(result, "preset").to_string(),
                workload_cell(result, results),
                cell(number(result, &["flash_reads_per_query", "avg"]), 2),
                cell(number(result, &["flash_reads_per_query", "max"]), 0),
                cell(number(result, &["index_reads_per_get", "avg"]), 2),
                cell(number(result, &["index_reads_per_get", "max"]), 0),
                cell(
                    number(result, &["compaction_io_share"]).map(|share| share * 100.0),
                    1,
                ),
                cell(number(result, &["waf"]), 2),
                cell(number(result, &["phase_waf"]), 2),
                cell(number(result, &["controller_cpu_us_per_op"]), 2),
                dram.map_or_else(|| "-".to_string(), |kib| kib.to_string()),
            ]
        })
        .collect();
    table(
        out,
        &[
            "preset",
            "workload",
            "flash reads/request",
            "max",
            "index reads/GET",
            "max",
            "compaction % of I/O",
            "WAF (since format)",
            "WAF (this run)",
            "controller µs/request",
            "DRAM KiB",
        ],
        &rows,
    );

    let iterators: Vec<&Value> = results
        .iter()
        .filter(|result| result.get("seek_latency_us").is_some())
        .collect();
    if !iterators.is_empty() {
        let _ = writeln!(out, "### Iterators: Seek and Next\n");
        let rows: Vec<Vec<String>> = iterators
            .iter()
            .map(|result| {
                vec![
                    text(result, "preset").to_string(),
                    workload_cell(result, results),
                    latency(result, "seek_latency_us", "avg"),
                    latency(result, "seek_latency_us", "p99"),
                    latency(result, "next_latency_us", "avg"),
                    latency(result, "next_latency_us", "p99"),
                ]
            })
            .collect();
        table(
            out,
            &[
                "preset", "workload", "seek avg", "seek p99", "next avg", "next p99",
            ],
            &rows,
        );
    }

    let with_params: Vec<String> = results
        .iter()
        .filter_map(|result| {
            let params = result.get("params")?.as_object()?;
            let keys: Vec<&String> = params.keys().collect();
            Some(format!(
                "- {} {}: {}",
                text(result, "preset"),
                workload_cell(result, results),
                params_text(params, &keys)
            ))
        })
        .collect();
    if !with_params.is_empty() {
        let _ = writeln!(out, "Parameters and counters of each result:\n");
        for line in with_params {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }

    let notes: Vec<String> = results
        .iter()
        .filter_map(|result| {
            let note = result.get("note")?.as_str()?;
            Some(format!(
                "- {} {}: {note}",
                text(result, "preset"),
                workload_cell(result, results)
            ))
        })
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(out, "Notes:\n");
        for note in notes {
            let _ = writeln!(out, "{note}");
        }
        out.push('\n');
    }
    Ok(())
}

/// The whole of `docs/figures.md` for `runs`, in the order given.
pub fn markdown(runs: &[FiguresRun]) -> Result<String, FiguresError> {
    let mut out = String::new();
    out.push_str(
        "# Measured figures\n\n\
         Generated by `scripts/figures.sh` from the benchmarks' `--json` output: do not edit by\n\
         hand, re-run the script. Each section is headed by the command that produced it. Every\n\
         figure is simulated time on the flash model's virtual clock, a pure function of the\n\
         command and its seed; the simulator's own speed (wall-clock) is left out, since it\n\
         depends on the machine. The columns are described in `crates/bench/src/report.rs`, the\n\
         terms in the glossary of `docs/design.md`.\n\n",
    );
    for run in runs {
        run_section(&mut out, run)?;
    }
    let end = out.trim_end().len();
    out.truncate(end);
    out.push('\n');
    Ok(out)
}
