//! The `kvssd` binary as users run it: bad command lines give one line on standard error and exit
//! code 2; `flash-bench --json` prints one JSON object with the documented keys.

mod common;

use common::kvssd;

#[test]
fn cli_bad_arguments_give_one_line_and_exit_code_2() {
    let cases: &[&[&str]] = &[
        &[],
        &["no-such-command"],
        &["flash-bench", "--pattern", "bogus"],
        &["flash-bench", "--qd", "0"],
        &["flash-bench", "--qd", "many"],
        &["flash-bench", "--ops", "0"],
        &["flash-bench", "--profile", "huge"],
        &["flash-bench", "--read-percent", "101"],
        &["flash-bench", "--unknown-flag"],
        &[
            "flash-bench",
            "--profile",
            "test_min",
            "--pattern",
            "seqwrite",
            "--ops",
            "100000",
        ],
        &["sim-speed", "--ops", "-3"],
        &["bench", "ycsb", "--presets", "pink,nope"],
        &["bench", "gc", "--presets", "bad"],
        &["bench", "gc", "--blocks-per-die", "1"],
        &["bench", "ycsb", "--blocks-per-die", "0"],
        &["bench", "ycsb", "--blocks-per-die", "8"],
        &[
            "bench",
            "ycsb",
            "--blocks-per-die",
            "32",
            "--records",
            "4000000",
        ],
        &["bench", "ycsb", "--blocks-per-die", "8", "--heights", "6"],
        &[
            "bench",
            "gc",
            "--profile",
            "paper",
            "--blocks-per-die",
            "12",
        ],
        &["bench", "ycsb", "--media", "tape"],
        &["bench", "gc", "--media", "disk"],
        &["bench", "seek", "--prefetch", "100"],
        &["bench", "ycsb", "--heights", "1"],
        &[
            "bench",
            "ycsb",
            "--heights",
            "5,6",
            "--presets",
            "pink,hash",
        ],
        &["bench", "ycsb", "--heights", "9", "--records", "100"],
        &["bench", "ycsb", "--heights", "6", "--host"],
        &["bench", "seek", "--value-bytes", "4096,131072"],
        &["bench", "seek", "--value-bytes", "128"],
        &["bench", "seek", "--scan-length", "128,0"],
        &["bench", "seek", "--index-prefetch", "on,maybe"],
        &["bench", "kaml-micro", "--logs", "65"],
    ];
    for args in cases {
        let output = kvssd(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("kvssd: "), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn cli_help_and_version_succeed() {
    for args in [&["--help"][..], &["--version"], &["flash-bench", "--help"]] {
        let output = kvssd(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert!(!output.stdout.is_empty());
    }
}

#[test]
fn cli_flash_bench_json_has_the_documented_keys() {
    let output = kvssd(&[
        "flash-bench",
        "--profile",
        "test_min",
        "--pattern",
        "mixed",
        "--qd",
        "4",
        "--ops",
        "200",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON object on standard output");
    assert_eq!(json["profile"], "test_min");
    assert_eq!(json["pattern"], "mixed");
    assert_eq!(json["qd"], 4);
    assert_eq!(json["ops"], 200);
    assert_eq!(json["simulated"], true);
    for key in ["sim_iops", "sim_bandwidth_mb_s", "sim_ops_per_wall_s"] {
        assert!(
            json[key].as_f64().is_some_and(|value| value > 0.0),
            "{key}: {json}"
        );
    }
    for key in ["avg", "p50", "p99", "p999", "max"] {
        assert!(
            json["latency_us"][key]
                .as_f64()
                .is_some_and(|value| value > 0.0),
            "{key}"
        );
    }
    assert!(json["latency_us"]["p50"].as_f64() <= json["latency_us"]["max"].as_f64());
}

#[test]
fn cli_crash_test_runs_every_durability_mode_on_hash_presets() {
    for (mode, preset) in [("plp", "kaml"), ("wal/group-commit-4", "hash")] {
        let output = kvssd(&[
            "crash-test",
            "--mode",
            mode,
            "--preset",
            preset,
            "--points",
            "12",
            "--commands",
            "60",
        ]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{mode}: {stdout}");
        let words: Vec<&str> = stdout.split_whitespace().collect();
        // "survived S of N crash points ..."
        assert_eq!(words.first(), Some(&"survived"), "{stdout}");
        let survived: u64 = words[1].parse().expect("a count");
        let points: u64 = words[3].parse().expect("a count");
        assert!(points > 0 && survived == points, "{mode}: {stdout}");
    }
}

/// `bench ycsb --heights` on a small card: one result per height, preset and workload, each
/// tree built to its height, and the sweep's table printed.
#[test]
fn cli_height_sweep_reports_every_height_in_its_json() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let json = dir.path().join("heights.json");
    let output = kvssd(&[
        "bench",
        "ycsb",
        "--presets",
        "pink",
        "--workloads",
        "load,c",
        "--heights",
        "3,4",
        "--blocks-per-die",
        "4",
        "--records",
        "3000",
        "--ops",
        "500",
        "--quiet",
        "--json",
        json.to_str().expect("a UTF-8 path"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("flash reads/GET avg"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the JSON file")).expect("JSON");
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), 4, "load and c at two heights");
    for result in results {
        let params = &result["params"];
        assert_eq!(params["levels_after_load"], params["height"], "{result}");
        if result["workload"] == "c" {
            let p9999 = result["point_get_reads"]["flash"]["p9999"].as_u64();
            let bound = params["worst_case_index_reads"]
                .as_u64()
                .map(|reads| reads + 1);
            assert!(p9999.is_some() && p9999 <= bound, "{result}");
        }
    }
}

/// `bench seek` with lists: every combination in the JSON.
#[test]
fn cli_seek_grid_reports_every_combination() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let json = dir.path().join("seek.json");
    let output = kvssd(&[
        "bench",
        "seek",
        "--keys",
        "400",
        "--seeks",
        "4",
        "--value-bytes",
        "4096,16384",
        "--scan-length",
        "4,8",
        "--prefetch",
        "0,2",
        "--index-prefetch",
        "on,off",
        "--quiet",
        "--json",
        json.to_str().expect("a UTF-8 path"),
    ]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the JSON file")).expect("JSON");
    let mut combinations: Vec<String> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|result| {
            let params = &result["params"];
            format!(
                "{} {} {} {}",
                params["value_bytes"],
                params["scan_length"],
                params["index_prefetch"],
                params["prefetch_degree"]
            )
        })
        .collect();
    combinations.sort();
    combinations.dedup();
    assert_eq!(combinations.len(), 16, "{combinations:?}");
}

/// A long run logged to a file (stderr not a terminal) prints plain progress lines, one as each
/// phase starts; `--quiet` prints none.
#[test]
fn cli_bench_logs_progress_lines_when_stderr_is_not_a_terminal() {
    let run = |quiet: bool| {
        let mut args = vec![
            "bench",
            "ycsb",
            "--presets",
            "pink",
            "--workloads",
            "load,c",
            "--blocks-per-die",
            "4",
            "--records",
            "3000",
            "--ops",
            "500",
        ];
        if quiet {
            args.push("--quiet");
        }
        let output = kvssd(&args);
        assert_eq!(output.status.code(), Some(0));
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let logged = run(false);
    for phase in [
        "pink load: started, 3000 requests",
        "pink c: started, 500 requests",
    ] {
        assert!(logged.contains(phase), "{logged}");
    }
    assert!(!run(true).contains("started,"));
}
