//! TPC-B on file media under real process death: a child `kvssd tpcb-loop` runs AccountUpdates
//! from four OS threads through one shared host on a file image (write-ahead log synced on every
//! command) and prints `ack N`, N the transaction's history key, once each commit is durable.
//! The test SIGKILLs it after a seeded number of acknowledgements, reopens the image
//! (`kvssd tpcb-loop --check`, which recovers it) and checks that every acknowledged commit's
//! history row is there, that any other row is the one commit each thread had in flight, and
//! that TPC-B's invariant holds (the balance sums and the history deltas equal: no transaction
//! half-applied). The next child continues on the same image with new history keys, so
//! recovery after recovery is exercised; `kvssd check` must find the image clean at the end.
//!
//! Bounded: `KILLS` children (`KVSSD_KILLS=<n>` for more) of at most `ACKS_MAX` acknowledged
//! commits each. Seeded: `KVSSD_SEED=<n>` replays a run's kill points (the threads' interleaving
//! is the OS's).

mod common;

use common::{kvssd, Rng};

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const KILLS: u64 = 4;
const ACKS_MAX: u64 = 150;
const THREADS: u64 = 4;
/// Where a history key keeps its client number (as `kvssd_bench::tpcb`).
const CLIENT_SHIFT: u32 = 40;

/// Adds an `ack N` line to the acknowledged set; other lines are ignored.
fn apply_line(line: &str, acked: &mut BTreeSet<u64>) -> bool {
    match line.strip_prefix("ack ") {
        Some(number) => {
            acked.insert(number.trim().parse().expect("a history key"));
            true
        }
        None => false,
    }
}

/// The image's history rows and whether its balances are consistent.
fn check_image(image: &Path) -> (BTreeSet<u64>, String) {
    let path = image.to_str().expect("utf-8 temp path");
    let output = kvssd(&["tpcb-loop", path, "--check"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "reopening after the kill failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("text output");
    let mut rows = BTreeSet::new();
    let mut state = String::new();
    for line in text.lines() {
        if let Some(row) = line.strip_prefix("row ") {
            rows.insert(row.parse().expect("a history key"));
        } else if let Some(rest) = line.strip_prefix("state ") {
            state = rest.to_string();
        }
    }
    (rows, state)
}

#[test]
fn sigkill_multithreaded_tpcb_keeps_every_acknowledged_commit() {
    let seed: u64 = std::env::var("KVSSD_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1);
    eprintln!("tpcb sigkill test: seed {seed} (replay: KVSSD_SEED={seed} cargo test -p kvssd-cli --test tpcb_sigkill)");
    let directory = tempfile::tempdir().expect("temporary directory");
    let image = directory.path().join("tpcb.img");
    let path = image.to_str().expect("utf-8 temp path");

    let kills: u64 = std::env::var("KVSSD_KILLS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(KILLS);
    let mut rng = Rng::new(seed);
    // Every commit known to be on the image: acknowledged, or found there after a kill.
    let mut known: BTreeSet<u64> = BTreeSet::new();
    let mut acks_total = 0u64;
    let mut in_flight_applied = 0u64;
    for round in 0..kills {
        // At least one acknowledgement, so the first child has finished loading the tables.
        let target = 1 + rng.below(ACKS_MAX);
        let run = round.to_string();
        let child_seed = seed.wrapping_mul(1000).wrapping_add(round).to_string();
        let threads = THREADS.to_string();
        let mut child = Command::new(env!("CARGO_BIN_EXE_kvssd"))
            .args([
                "tpcb-loop",
                path,
                "--threads",
                &threads,
                "--run",
                &run,
                "--seed",
                &child_seed,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the kvssd binary starts");
        let mut reader = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut acked = BTreeSet::new();
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
            if apply_line(line.trim_end(), &mut acked) {
                acks += 1;
            }
        }
        child.kill().expect("SIGKILL the child");
        let status = child.wait().expect("reap the child");
        // What the child printed before it died is acknowledged too.
        for rest in reader.lines() {
            apply_line(&rest.expect("read the child's output"), &mut acked);
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
        assert!(
            !acked.is_empty(),
            "seed {seed} round {round}: the child acknowledged nothing"
        );
        acks_total += acked.len() as u64;

        let (rows, state) = check_image(&image);
        assert!(
            state.ends_with(" balanced"),
            "seed {seed} round {round}: TPC-B's invariant is broken after recovery: {state}"
        );
        for key in known.iter().chain(&acked) {
            assert!(
                rows.contains(key),
                "seed {seed} round {round}: acknowledged commit {key} lost (replay: KVSSD_SEED={seed} cargo test -p kvssd-cli --test tpcb_sigkill)"
            );
        }
        // Rows nobody acknowledged: at most the one commit each thread of this child had in
        // flight, the next of its sequence.
        let mut acked_per_client: BTreeMap<u64, u64> = BTreeMap::new();
        for key in &acked {
            *acked_per_client.entry(key >> CLIENT_SHIFT).or_default() += 1;
        }
        let first_client = round * THREADS;
        for key in rows.difference(&known) {
            if acked.contains(key) {
                continue;
            }
            let client = key >> CLIENT_SHIFT;
            let sequence = key & ((1 << CLIENT_SHIFT) - 1);
            assert!(
                (first_client..first_client + THREADS).contains(&client)
                    && sequence == acked_per_client.get(&client).copied().unwrap_or(0),
                "seed {seed} round {round}: history row {key} (client {client}, sequence {sequence}) was neither acknowledged nor in flight"
            );
            in_flight_applied += 1;
        }
        known = rows;
        eprintln!(
            "  kill {round}: {} acknowledged, {} history rows, state {state}",
            acked.len(),
            known.len()
        );
    }
    let checked = kvssd(&["check", path]);
    assert_eq!(
        checked.status.code(),
        Some(0),
        "seed {seed}: check found problems: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    eprintln!(
        "tpcb sigkill test: {kills} kills of {THREADS}-thread TPC-B, {acks_total} acknowledged commits all found, {in_flight_applied} unacknowledged in-flight commits found applied whole, {} history rows, invariant held after every kill",
        known.len()
    );
}
