//! The figures generator (`kvssd report figures`, `scripts/figures.sh`): a small JSON fixture in
//! the benchmarks' schema turns into exactly the expected markdown (`fixtures/figures.md`,
//! checked by hand), so a change to the tables shows up as a diff of that file. Also: a run
//! without results is refused with the run's command in the error.

use kvssd_bench::figures::{markdown, FiguresRun};

fn fixture_run() -> FiguresRun {
    let json = include_str!("fixtures/figures.json");
    FiguresRun {
        command: "kvssd bench seek --seed 7".to_string(),
        json: serde_json::from_str(json).expect("the fixture is JSON"),
    }
}

#[test]
fn figures_fixture_turns_into_the_expected_markdown() {
    let expected = include_str!("fixtures/figures.md");
    let produced = markdown(&[fixture_run()]).expect("the fixture is well-formed");
    assert_eq!(produced, expected);
}

#[test]
fn figures_every_run_gets_its_own_section_in_order() {
    let mut second = fixture_run();
    second.command = "kvssd bench ycsb --presets pink".to_string();
    let produced = markdown(&[fixture_run(), second]).expect("well-formed");
    let first = produced
        .find("## `kvssd bench seek --seed 7`")
        .expect("first");
    let second = produced
        .find("## `kvssd bench ycsb --presets pink`")
        .expect("second");
    assert!(first < second);
    assert!(
        !produced.contains("12345.6"),
        "the simulator's wall-clock speed is left out"
    );
}

#[test]
fn figures_run_without_results_is_refused_naming_the_command() {
    let run = FiguresRun {
        command: "kvssd bench gc".to_string(),
        json: serde_json::json!({"profile": "default", "seed": 1}),
    };
    let error = markdown(&[run]).expect_err("no results");
    assert_eq!(error.to_string(), "kvssd bench gc: no \"results\" array");
}
