//! The image tools as users run them: real `kvssd` processes on real files in a temporary
//! directory. Format; put, get and delete, with binary values through standard input; scan order,
//! start and limit; namespaces created, listed and deleted; the fields of `stats`; `check` on a
//! clean image and on one with bytes of a data page flipped in the file (the problem is reported
//! with its page address, the exit code is 1, and `get` of the damaged key returns an error, never
//! wrong bytes); errors for a missing file, a foreign file and an existing image; and bad command
//! lines (one line on standard error, exit code 2).

mod common;

use common::kvssd;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn kvssd_with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvssd"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the kvssd binary starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input)
        .expect("write standard input");
    child.wait_with_output().expect("the kvssd binary runs")
}

fn ok(output: &Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A failed command: the exit code, and one line on standard error starting "kvssd: ".
fn failed(output: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("kvssd: "), "{stderr}");
    stderr
}

struct Image {
    _directory: tempfile::TempDir,
    path: PathBuf,
}

impl Image {
    fn new(extra: &[&str]) -> Image {
        let directory = tempfile::tempdir().expect("temporary directory");
        let path = directory.path().join("device.img");
        let mut args = vec![
            "format",
            path.to_str().expect("utf-8 path"),
            "--profile",
            "test_min",
        ];
        args.extend_from_slice(extra);
        let stdout = ok(&kvssd(&args));
        assert!(stdout.contains("namespace 1"), "{stdout}");
        Image {
            _directory: directory,
            path,
        }
    }

    fn path(&self) -> &str {
        self.path.to_str().expect("utf-8 path")
    }
}

#[test]
fn image_put_get_delete_round_trip_with_binary_values() {
    let image = Image::new(&[]);
    let path = image.path();
    ok(&kvssd(&["put", path, "alpha", "first"]));
    assert_eq!(ok(&kvssd(&["get", path, "alpha"])), "first");
    ok(&kvssd(&["put", path, "alpha", "second"]));
    assert_eq!(ok(&kvssd(&["get", path, "alpha"])), "second");

    let binary: Vec<u8> = (0..=255u8).chain([0, 0, b'\n', 0xff]).collect();
    ok(&kvssd_with_stdin(&["put", path, "blob", "-"], &binary));
    assert_eq!(kvssd(&["get", path, "blob"]).stdout, binary);
    // A value from standard input when the argument is absent.
    ok(&kvssd_with_stdin(&["put", path, "piped"], b"from stdin"));
    assert_eq!(kvssd(&["get", path, "piped"]).stdout, b"from stdin");

    ok(&kvssd(&["delete", path, "alpha"]));
    let missing = failed(&kvssd(&["get", path, "alpha"]), 1);
    assert!(missing.contains("not found"), "{missing}");
    assert!(kvssd(&["get", path, "alpha"]).stdout.is_empty());
    // Deleting an absent key is not an error.
    ok(&kvssd(&["delete", path, "never"]));
    assert_eq!(kvssd(&["get", path, "blob"]).stdout, binary);
}

#[test]
fn image_scan_is_ordered_and_honours_start_and_limit() {
    let image = Image::new(&[]);
    let path = image.path();
    for key in ["delta", "alpha", "echo", "charlie", "bravo"] {
        ok(&kvssd(&["put", path, key, &format!("v-{key}")]));
    }
    let all = ok(&kvssd(&["scan", path]));
    assert_eq!(
        all,
        "alpha\tv-alpha\nbravo\tv-bravo\ncharlie\tv-charlie\ndelta\tv-delta\necho\tv-echo\n"
    );
    assert_eq!(
        ok(&kvssd(&["scan", path, "--limit", "2"])),
        "alpha\tv-alpha\nbravo\tv-bravo\n"
    );
    assert_eq!(
        ok(&kvssd(&["scan", path, "--start", "c", "--limit", "2"])),
        "charlie\tv-charlie\ndelta\tv-delta\n"
    );
    assert_eq!(
        ok(&kvssd(&["scan", path, "--start", "delta", "--hex"])),
        format!(
            "{}\t{}\n{}\t{}\n",
            hex(b"delta"),
            hex(b"v-delta"),
            hex(b"echo"),
            hex(b"v-echo")
        )
    );
    // Non-printable bytes are escaped in text output.
    ok(&kvssd_with_stdin(&["put", path, "zulu", "-"], b"a\tb\x00"));
    assert!(ok(&kvssd(&["scan", path, "--start", "zulu"])).contains("zulu\ta\\tb\\x00"));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[test]
fn image_namespaces_are_created_listed_and_deleted() {
    let image = Image::new(&["--preset", "lightstore"]);
    let path = image.path();
    let listed = ok(&kvssd(&["ns", "list", path]));
    assert!(listed.contains("\n1\tlightstore\t"), "{listed}");
    let id = ok(&kvssd(&["ns", "create", path, "--preset", "pink-range"]));
    assert_eq!(id.trim(), "2");
    ok(&kvssd(&["put", path, "--ns", "2", "key", "in two"]));
    ok(&kvssd(&["put", path, "key", "in one"]));
    assert_eq!(ok(&kvssd(&["get", path, "--ns", "2", "key"])), "in two");
    assert_eq!(ok(&kvssd(&["get", path, "key"])), "in one");
    let listed = ok(&kvssd(&["ns", "list", path]));
    assert!(listed.contains("\n2\tpink-range\t1\t"), "{listed}");

    ok(&kvssd(&["ns", "delete", path, "2"]));
    let listed = ok(&kvssd(&["ns", "list", path]));
    assert!(!listed.contains("\n2\t"), "{listed}");
    let gone = failed(&kvssd(&["get", path, "--ns", "2", "key"]), 1);
    assert!(gone.contains("namespace 2 does not exist"), "{gone}");
    // Hash namespaces serve point commands; scans are refused with a one-line error.
    assert_eq!(
        ok(&kvssd(&["ns", "create", path, "--preset", "kaml"])).trim(),
        "3"
    );
    ok(&kvssd(&["put", path, "--ns", "3", "key", "in kaml"]));
    assert_eq!(ok(&kvssd(&["get", path, "--ns", "3", "key"])), "in kaml");
    failed(&kvssd(&["scan", path, "--ns", "3"]), 1);
    assert!(ok(&kvssd(&["check", path])).contains("no problems found"));
    // Ids are never reused.
    assert_eq!(ok(&kvssd(&["ns", "create", path])).trim(), "4");
    failed(&kvssd(&["ns", "delete", path, "2"]), 1);
    assert_eq!(ok(&kvssd(&["get", path, "key"])), "in one");
}

#[test]
fn image_stats_prints_levels_dram_counters_and_free_space() {
    let image = Image::new(&[]);
    let path = image.path();
    ok(&kvssd(&[
        "write-loop",
        path,
        "--seed",
        "5",
        "--count",
        "200",
        "--keys",
        "1000",
    ]));
    let stats = ok(&kvssd(&["stats", path]));
    for field in [
        "geometry ",
        "capacity_bytes ",
        "free_blocks ",
        "erases_lifetime ",
        "namespace 1 preset pink: l0_entries ",
        " levels ",
        "namespace 1 dram_bytes: l0 ",
        " level_lists ",
        " pinned_segments ",
        " bloom_filters ",
        "flash user: reads ",
        "flash checkpoint: reads ",
        "write_amplification ",
    ] {
        assert!(stats.contains(field), "missing {field:?} in:\n{stats}");
    }
    let levels: u64 = stats
        .split(" levels ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|number| number.parse().ok())
        .expect("a level count");
    assert!(levels >= 1, "200 stores on test_min flush L0:\n{stats}");
}

#[test]
fn image_check_is_clean_then_reports_a_damaged_data_page() {
    let image = Image::new(&[]);
    let path = image.path();
    let written = ok(&kvssd(&[
        "write-loop",
        path,
        "--seed",
        "9",
        "--count",
        "300",
        "--keys",
        "1000000",
    ]));
    let clean = ok(&kvssd(&["check", path]));
    assert!(clean.contains("no problems found"), "{clean}");
    let records_read: u64 = clean
        .split(" records read")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|number| number.parse().ok())
        .expect("a count of records read");
    assert!(records_read > 0, "{clean}");

    // The first key written is long flushed to a data page. Flip a byte in the middle of every
    // copy of its value in the file (the live one is in a data page; stale log copies are never
    // read again).
    let first = written.lines().next().expect("an intent line");
    // "pending WRITER KEY VALUE"
    let mut words = first.split(' ').skip(2);
    let key = unhex(words.next().expect("key"));
    let value = unhex(words.next().expect("value"));
    let mut bytes = std::fs::read(&image.path).expect("read the image");
    let mut copies = 0;
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], &value) {
        let middle = at + found + value.len() / 2;
        bytes[middle] ^= 0x5a;
        copies += 1;
        at += found + value.len();
    }
    assert!(copies >= 1, "the value is somewhere in the image");
    std::fs::write(&image.path, &bytes).expect("write the image");

    let damaged = kvssd(&["check", path]);
    let stdout = String::from_utf8_lossy(&damaged.stdout);
    assert_eq!(damaged.status.code(), Some(1), "{stdout}");
    let problem = stdout
        .lines()
        .find(|line| line.starts_with("problem: "))
        .unwrap_or_else(|| panic!("a problem line in:\n{stdout}"));
    assert!(problem.contains("data page "), "{problem}");
    assert!(problem.contains("(block "), "{problem}");
    assert!(problem.contains("unreadable"), "{problem}");
    assert!(
        String::from_utf8_lossy(&damaged.stderr).contains("problems found"),
        "{damaged:?}"
    );
    // Reading the damaged key is an error, never wrong data.
    let key_text = String::from_utf8(key).expect("write-loop keys are text");
    let read = kvssd(&["get", path, &key_text]);
    assert_eq!(read.status.code(), Some(1), "{read:?}");
    assert!(read.stdout.is_empty());
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn image_errors_missing_foreign_and_existing_files() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let missing = directory.path().join("missing.img");
    let missing = missing.to_str().expect("utf-8 path");
    for args in [
        vec!["get", missing, "k"],
        vec!["put", missing, "k", "v"],
        vec!["scan", missing],
        vec!["ns", "list", missing],
        vec!["stats", missing],
        vec!["check", missing],
    ] {
        failed(&kvssd(&args), 1);
    }
    assert!(
        !Path::new(missing).exists(),
        "no command creates a file but format"
    );

    let foreign = directory.path().join("foreign.bin");
    std::fs::write(&foreign, vec![0x42u8; 64 << 10]).expect("write a foreign file");
    let foreign = foreign.to_str().expect("utf-8 path");
    let message = failed(&kvssd(&["get", foreign, "k"]), 1);
    assert!(message.contains("not a kvssd"), "{message}");
    failed(&kvssd(&["check", foreign]), 1);
    // Format refuses an existing file without --force, and then overwrites it.
    let refused = failed(&kvssd(&["format", foreign, "--profile", "test_min"]), 1);
    assert!(refused.contains("--force"), "{refused}");
    assert_eq!(std::fs::read(foreign).expect("still there")[0], 0x42);

    let image = directory.path().join("device.img");
    let image = image.to_str().expect("utf-8 path");
    ok(&kvssd(&["format", image, "--profile", "test_min"]));
    ok(&kvssd(&["put", image, "k", "v"]));
    let refused = failed(&kvssd(&["format", image, "--profile", "test_min"]), 1);
    assert!(refused.contains("kvssd image"), "{refused}");
    assert_eq!(ok(&kvssd(&["get", image, "k"])), "v");
    ok(&kvssd(&[
        "format",
        image,
        "--profile",
        "test_min",
        "--force",
    ]));
    failed(&kvssd(&["get", image, "k"]), 1);
    // A sized pink image is sparse: formatting it is quick and takes little disk.
    let pink = directory.path().join("pink.img");
    let pink = pink.to_str().expect("utf-8 path");
    ok(&kvssd(&[
        "format",
        pink,
        "--profile",
        "pink",
        "--blocks-per-die",
        "4",
    ]));
    ok(&kvssd(&["put", pink, "k", "on pink"]));
    assert_eq!(ok(&kvssd(&["get", pink, "k"])), "on pink");
}

#[test]
fn image_bad_command_lines_give_one_line_and_exit_code_2() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let image = directory.path().join("device.img");
    let image = image.to_str().expect("utf-8 path");
    ok(&kvssd(&["format", image, "--profile", "test_min"]));
    let cases: &[&[&str]] = &[
        &["format"],
        &["format", "x.img"],
        &["format", "x.img", "--profile", "huge"],
        &[
            "format",
            "x.img",
            "--profile",
            "test_min",
            "--preset",
            "bogus",
        ],
        &[
            "format",
            "x.img",
            "--profile",
            "pink",
            "--blocks-per-die",
            "0",
        ],
        &["put", image],
        &["put", image, "--ns", "one", "k", "v"],
        &["get", image],
        &["get", image, "k", "extra"],
        &["scan", image, "--limit", "0"],
        &["scan", image, "--limit", "many"],
        &["ns"],
        &["ns", "rename", image],
        &["ns", "create", image, "--preset", "bogus"],
        &["ns", "delete", image],
        &["stats"],
        &["check", image, "--deep"],
        &["crash-test", "--points", "0"],
        &["crash-test", "--mode", "magic"],
        &["crash-test", "--preset", "bogus"],
        &["crash-test", "--preset", "pink,bogus"],
        &["crash-test", "--mode", "wal,"],
        &["crash-test", "--controller", "threads,many"],
        &["crash-test", "--seeds", "0"],
        &["crash-test", "--jobs", "0"],
        &["crash-test", "--preset", "all", "--at", "5"],
    ];
    for args in cases {
        let output = kvssd(args);
        let stderr = failed(&output, 2);
        assert!(output.stdout.is_empty(), "{args:?}: {stderr}");
    }
    assert!(!Path::new("x.img").exists());
}

#[test]
fn image_crash_test_prints_the_points_survived() {
    let output = kvssd(&[
        "crash-test",
        "--seed",
        "3",
        "--points",
        "6",
        "--commands",
        "60",
    ]);
    let stdout = ok(&output);
    assert!(
        stdout.starts_with("survived 6 of 6 crash points"),
        "{stdout}"
    );
}

/// A sweep runs every combination asked for and prints each run's line in the grid's order (seed,
/// then preset, mode and controller), whatever order its jobs finish in, then a total.
#[test]
fn image_crash_test_sweeps_seeds_presets_and_modes_in_order() {
    let output = kvssd(&[
        "crash-test",
        "--seed",
        "3",
        "--seeds",
        "2",
        "--preset",
        "pink,kaml",
        "--mode",
        "wal,plp",
        "--controller",
        "all",
        "--commands",
        "40",
        "--points",
        "4",
        "--jobs",
        "3",
    ]);
    let stdout = ok(&output);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 17, "{stdout}");
    let mut expected = Vec::new();
    for seed in [3, 4] {
        for preset in ["pink", "kaml"] {
            for mode in ["wal/every-command", "plp"] {
                for controller in ["interchangeable", "threads"] {
                    expected.push(format!(
                        "(seed {seed}, preset {preset}, mode {mode}, controller {controller}, 40 commands,"
                    ));
                }
            }
        }
    }
    for (line, names) in lines.iter().zip(&expected) {
        assert!(line.starts_with("survived 4 of 4 crash points"), "{line}");
        assert!(line.contains(names.as_str()), "{line} lacks {names}");
    }
    assert!(
        lines[16].starts_with("swept 16 runs: 16 passed, 0 failed"),
        "{stdout}"
    );
}

#[test]
fn image_cache_flag_sets_the_indexing_budget_stats_shows() {
    let image = Image::new(&["--cache", "2"]);
    let path = image.path();
    ok(&kvssd(&["put", path, "--cache", "3", "alpha", "one"]));
    assert_eq!(ok(&kvssd(&["get", path, "--cache", "3", "alpha"])), "one");
    let stats = ok(&kvssd(&["stats", path, "--cache", "3"]));
    assert!(
        stats.contains("dram_budget_bytes 3145728 per namespace (--cache 3)"),
        "{stats}"
    );
    assert!(stats.contains(" budget 3145728"), "{stats}");
    assert!(stats.contains("namespace 1 shape "), "{stats}");
    // The tiny image's index plans to use little of 3 MiB: the cache gets the rest.
    let capacity: u64 = stats
        .split("index_page_cache capacity ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|number| number.parse().ok())
        .expect("a cache capacity");
    assert!(capacity > 0 && capacity < 3 << 20, "{stats}");
    // Without the flag, the image's default (test_min keeps the engine's own small budget and
    // no cache).
    let stats = ok(&kvssd(&["stats", path]));
    assert!(
        stats.contains("per namespace (default; --cache MIB sets it)"),
        "{stats}"
    );
    assert!(stats.contains("index_page_cache capacity 0 "), "{stats}");
    assert!(!stats.contains(" budget 3145728"), "{stats}");
    // Out of range or not a number: a bad command line.
    for bad in ["0", "lots", "1048577"] {
        let stderr = failed(&kvssd(&["stats", path, "--cache", bad]), 2);
        assert!(stderr.contains("--cache"), "{bad}: {stderr}");
    }
}
