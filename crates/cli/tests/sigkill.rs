//! File media under real process death: a child `kvssd write-loop` stores seeded keys and prints
//! each write's intent before it and an acknowledgement after it; the test kills it with SIGKILL
//! after a seeded number of acknowledgements (zero included, which can land during recovery),
//! reopens the image through `kvssd scan` and checks that every acknowledged write is there with
//! its exact value, that a write in flight is either wholly there or not at all, and that no other
//! key appears. Every few rounds `kvssd check` must find the image clean. The next child then
//! continues on the same image, so recovery after recovery is exercised.
//!
//! Three setups: one writer with the log synced on every command, and several writer threads with
//! group commit (no sync per command; each writer calls `Device::sync` after its store and shares
//! the syncs running beside it), where each writer has a write of its own in flight at the kill,
//! both on the `test_min` profile (256 KiB); and several writers with group commit on PinK's
//! geometry (a 512 MiB sparse image) with values of 1 KiB and a write buffer of megabytes.
//!
//! Bounded: a few dozen children of at most `ACKS_MAX` acknowledged writes each (2,500 on PinK's
//! geometry), in a temporary directory. Seeded: `KVSSD_SEED=<n>` replays a run.

mod common;

use common::{kvssd, Rng};

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const ACKS_MAX: u64 = 120;
/// Distinct keys the writes are drawn from (so later rounds overwrite earlier ones).
const KEYS: u64 = 150;

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex from kvssd"))
        .collect()
}

type Pair = (Vec<u8>, Vec<u8>);

/// The writes in flight, by writer thread.
type Pending = BTreeMap<u64, Pair>;

/// Applies one line of the child's output: an intent becomes its writer's pending write, an
/// acknowledgement applies that writer's pending write to the model. Returns whether it was an
/// acknowledgement.
fn apply_line(line: &str, pending: &mut Pending, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> bool {
    let mut words = line.split(' ');
    let word = words.next();
    let thread: u64 = words
        .next()
        .and_then(|thread| thread.parse().ok())
        .unwrap_or_else(|| panic!("no writer in a line from write-loop: {line:?}"));
    match word {
        Some("pending") => {
            let key = unhex(words.next().expect("pending key"));
            let value = unhex(words.next().expect("pending value"));
            assert!(
                pending.insert(thread, (key, value)).is_none(),
                "writer {thread} began a write before its last was acknowledged"
            );
            false
        }
        Some("ack") => {
            let (key, value) = pending
                .remove(&thread)
                .expect("an ack follows its writer's intent");
            model.insert(key, value);
            true
        }
        other => panic!("unexpected line from write-loop: {other:?} in {line:?}"),
    }
}

fn scan(image: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let path = image.to_str().expect("utf-8 temp path");
    let output = kvssd(&["scan", path, "--hex"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "scan after the kill failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("hex output is text")
        .lines()
        .map(|line| {
            let (key, value) = line.split_once('\t').expect("KEY<TAB>VALUE");
            (unhex(key), unhex(value))
        })
        .collect()
}

/// How the child writes, and on what image.
struct Setup {
    name: &'static str,
    threads: u64,
    group: bool,
    rounds: u64,
    /// Fewest acknowledged writes a child makes before the kill.
    acks_min: u64,
    /// Most acknowledged writes a child makes before the kill.
    acks_max: u64,
    /// Distinct keys the writes are drawn from.
    keys: u64,
    /// `kvssd format`'s profile arguments.
    format: &'static [&'static str],
    /// More `write-loop` arguments.
    write: &'static [&'static str],
}

/// The `test_min` image (256 KiB): flushes, merges and GC within a few hundred writes.
const TEST_MIN: &[&str] = &["--profile", "test_min"];

/// Kills `setup.rounds` children at seeded points and checks the image after each kill.
fn run_kills(setup: &Setup) {
    let seed: u64 = std::env::var("KVSSD_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1);
    let replay = format!(
        "replay: KVSSD_SEED={seed} cargo test -p kvssd-cli --test sigkill {}",
        setup.name
    );
    eprintln!("sigkill test {}: seed {seed} ({replay})", setup.name);
    let directory = tempfile::tempdir().expect("temporary directory");
    let image = directory.path().join("device.img");
    let path = image.to_str().expect("utf-8 temp path");
    let mut format = vec!["format", path];
    format.extend_from_slice(setup.format);
    let formatted = kvssd(&format);
    assert_eq!(formatted.status.code(), Some(0), "{formatted:?}");

    let mut rng = Rng::new(seed);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut acks_total = 0u64;
    let mut killed_in_flight = 0u64;
    for round in 0..setup.rounds {
        let target = setup.acks_min + rng.below(setup.acks_max - setup.acks_min);
        let child_seed = seed.wrapping_mul(1000).wrapping_add(round).to_string();
        let keys = setup.keys.to_string();
        let threads = setup.threads.to_string();
        let mut args = vec![
            "write-loop",
            path,
            "--seed",
            &child_seed,
            "--count",
            "1000000",
            "--keys",
            &keys,
            "--threads",
            &threads,
        ];
        if setup.group {
            args.push("--group");
        }
        args.extend_from_slice(setup.write);
        let mut child = Command::new(env!("CARGO_BIN_EXE_kvssd"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the kvssd binary starts");
        let mut reader = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut pending = Pending::new();
        let mut acks = 0u64;
        let mut line = String::new();
        while acks < target {
            line.clear();
            if reader
                .read_line(&mut line)
                .expect("read the child's output")
                == 0
            {
                break;
            }
            if apply_line(line.trim_end(), &mut pending, &mut model) {
                acks += 1;
            }
        }
        child.kill().expect("SIGKILL the child");
        let status = child.wait().expect("reap the child");
        // What the child printed before it died is acknowledged too.
        for rest in reader.lines() {
            let rest = rest.expect("read the child's output");
            if apply_line(&rest, &mut pending, &mut model) {
                acks += 1;
            }
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            if status.signal() != Some(9) {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                panic!("round {round}: the child was not killed but ended with {status:?}: {stderr} ({replay})");
            }
        }
        acks_total += acks;

        let found = scan(&image);
        let in_flight = |key: &[u8], value: Option<&Vec<u8>>| {
            pending.values().any(|(pending_key, pending_value)| {
                pending_key == key && value == Some(pending_value)
            })
        };
        for (key, value) in &model {
            let actual = found.get(key);
            assert!(
                actual == Some(value) || in_flight(key, actual),
                "round {round}: key {:?} holds {:?}, acknowledged {:?} ({replay})",
                String::from_utf8_lossy(key),
                actual,
                value
            );
        }
        for (key, value) in &found {
            assert!(
                model.get(key) == Some(value) || in_flight(key, Some(value)),
                "round {round}: key {:?} holds a value never acknowledged nor in flight ({replay})",
                String::from_utf8_lossy(key)
            );
        }
        // The writes in flight are resolved now: the image says whether each happened.
        for (_, (key, value)) in std::mem::take(&mut pending) {
            if found.get(&key) == Some(&value) {
                killed_in_flight += 1;
                model.insert(key, value);
            }
        }
        if round % 4 == 3 {
            let checked = kvssd(&["check", path]);
            assert_eq!(
                checked.status.code(),
                Some(0),
                "round {round}: check found problems: {}{} ({replay})",
                String::from_utf8_lossy(&checked.stdout),
                String::from_utf8_lossy(&checked.stderr)
            );
        }
    }
    eprintln!(
        "sigkill test {}: {} kills, {acks_total} acknowledged writes checked, {} keys, {killed_in_flight} in-flight writes found applied",
        setup.name,
        setup.rounds,
        model.len()
    );
    assert!(acks_total > 0, "no child acknowledged anything");
    // The kills fell across flushes: the image has levels below L0.
    let stats = kvssd(&["stats", path]);
    let stats = String::from_utf8_lossy(&stats.stdout);
    assert!(
        stats.contains(" preset ") && !stats.contains(" levels 0 "),
        "no flush reached the levels: {stats} ({replay})"
    );
}

#[test]
fn sigkill_acknowledged_writes_survive_every_kill() {
    run_kills(&Setup {
        name: "sigkill_acknowledged_writes_survive_every_kill",
        threads: 1,
        group: false,
        rounds: 24,
        acks_min: 0,
        acks_max: ACKS_MAX,
        keys: KEYS,
        format: TEST_MIN,
        write: &[],
    });
}

#[test]
fn sigkill_group_commit_with_several_writers_loses_no_acknowledged_write() {
    run_kills(&Setup {
        name: "sigkill_group_commit_with_several_writers_loses_no_acknowledged_write",
        threads: 4,
        group: true,
        rounds: 16,
        acks_min: 0,
        acks_max: ACKS_MAX,
        keys: KEYS,
        format: TEST_MIN,
        write: &[],
    });
}

/// PinK's geometry (a 512 MiB sparse image) with a write buffer of megabytes, as file images of
/// that size get: the writers' budget of 8 MiB gives L0 1 MiB, and the image tools that check
/// it open it with the default budget (32 MiB, L0 4 MiB), so each recovery restores a tree
/// formed under another L0. Values of 1 KiB fill L0 in about 950 writes, so every child writes
/// at least 1,200: seed 213 drew about 700 a child, and its image ended with every pair in L0
/// (3,653 keys, within the tools' 4 MiB) and no level, so no kill was known to have fallen
/// across a flush.
#[test]
fn sigkill_writers_on_pinks_geometry_lose_nothing_across_flushes() {
    run_kills(&Setup {
        name: "sigkill_writers_on_pinks_geometry_lose_nothing_across_flushes",
        threads: 4,
        group: true,
        rounds: 8,
        acks_min: 1_200,
        acks_max: 2_500,
        keys: 1_500,
        format: &["--profile", "pink", "--blocks-per-die", "4"],
        write: &["--cache", "8", "--value-bytes", "1024"],
    });
}
