//! File media under real process death: a child `kvssd write-loop` stores seeded keys with a
//! write-ahead log synced on every command and prints each write's intent before it and an
//! acknowledgement after it; the test kills it with SIGKILL after a seeded number of
//! acknowledgements (zero included, which can land during recovery), reopens the image through
//! `kvssd scan` and checks that every acknowledged write is there with its exact value, that the
//! one write in flight is either wholly there or not at all, and that no other key appears. Every
//! few rounds `kvssd check` must find the image clean. The next child then continues on the same
//! image, so recovery after recovery is exercised.
//!
//! Bounded: `ROUNDS` children of at most `ACKS_MAX` acknowledged writes each, on the `test_min`
//! profile (256 KiB) in a temporary directory. Seeded: `KVSSD_SEED=<n>` replays a run.

mod common;

use common::{kvssd, Rng};

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const ROUNDS: u64 = 24;
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

/// Applies one line of the child's output: an intent becomes the pending write, an
/// acknowledgement applies it to the model.
fn apply_line(
    line: &str,
    pending: &mut Option<Pair>,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) -> bool {
    let mut words = line.split(' ');
    match words.next() {
        Some("pending") => {
            let key = unhex(words.next().expect("pending key"));
            let value = unhex(words.next().expect("pending value"));
            *pending = Some((key, value));
            false
        }
        Some("ack") => {
            let (key, value) = pending.take().expect("an ack follows an intent");
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

#[test]
fn sigkill_acknowledged_writes_survive_every_kill() {
    let seed: u64 = std::env::var("KVSSD_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1);
    eprintln!("sigkill test: seed {seed} (replay: KVSSD_SEED={seed} cargo test -p kvssd-cli --test sigkill)");
    let directory = tempfile::tempdir().expect("temporary directory");
    let image = directory.path().join("device.img");
    let path = image.to_str().expect("utf-8 temp path");
    let formatted = kvssd(&["format", path, "--profile", "test_min"]);
    assert_eq!(formatted.status.code(), Some(0), "{formatted:?}");

    let mut rng = Rng::new(seed);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut acks_total = 0u64;
    let mut killed_in_flight = 0u64;
    for round in 0..ROUNDS {
        let target = rng.below(ACKS_MAX);
        let child_seed = seed.wrapping_mul(1000).wrapping_add(round).to_string();
        let keys = KEYS.to_string();
        let mut child = Command::new(env!("CARGO_BIN_EXE_kvssd"))
            .args([
                "write-loop",
                path,
                "--seed",
                &child_seed,
                "--count",
                "1000000",
                "--keys",
                &keys,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the kvssd binary starts");
        let mut reader = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut pending = None;
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
                panic!("seed {seed} round {round}: the child was not killed but ended with {status:?}: {stderr}");
            }
        }
        acks_total += acks;

        let found = scan(&image);
        for (key, value) in &model {
            let maybe = pending
                .as_ref()
                .filter(|(pending_key, _)| pending_key == key);
            let actual = found.get(key);
            let ok = actual == Some(value)
                || maybe.is_some_and(|(_, pending_value)| actual == Some(pending_value));
            assert!(
                ok,
                "seed {seed} round {round}: key {:?} holds {:?}, acknowledged {:?} (replay: KVSSD_SEED={seed} cargo test -p kvssd-cli --test sigkill)",
                String::from_utf8_lossy(key),
                actual,
                value
            );
        }
        for (key, value) in &found {
            let acknowledged = model.get(key) == Some(value);
            let in_flight = pending
                .as_ref()
                .is_some_and(|(pending_key, pending_value)| {
                    pending_key == key && pending_value == value
                });
            assert!(
                acknowledged || in_flight,
                "seed {seed} round {round}: key {:?} holds a value never acknowledged nor in flight (replay: KVSSD_SEED={seed} cargo test -p kvssd-cli --test sigkill)",
                String::from_utf8_lossy(key)
            );
        }
        // The write in flight is resolved now: the image says whether it happened.
        if let Some((key, value)) = pending.take() {
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
                "seed {seed} round {round}: check found problems: {}{}",
                String::from_utf8_lossy(&checked.stdout),
                String::from_utf8_lossy(&checked.stderr)
            );
        }
    }
    eprintln!(
        "sigkill test: {ROUNDS} kills, {acks_total} acknowledged writes checked, {} keys, {killed_in_flight} in-flight writes found applied",
        model.len()
    );
    assert!(acks_total > 0, "no child acknowledged anything");
}
