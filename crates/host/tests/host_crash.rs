//! Power cuts in the middle of commits, on both commit paths. A small TPC-B (two branches, four
//! tellers, 32 accounts and a history table: each a `kaml` namespace on the KAML path, pages of
//! one `block` namespace with the central write-ahead log on the conventional one) runs through
//! the host layer from several clients on simulated flash under the device's write-ahead log
//! (sync per command, the crash harness's configuration). A dry run counts its flash operations;
//! then, for a spread of crash points after the load, the same seeded run loses power after N
//! flash operations (in-flight programs torn or lost by the fault model), the flash is reopened
//! (the device's recovery; on the conventional path a host is opened too, which replays its
//! log into the pages, and then opened again over the same flash to show that replaying twice
//! gives the same state), and the test checks:
//!
//! * every acknowledged commit is there: the recovered state is the serial replay of the
//!   acknowledged transactions in commit order, or that plus the one commit in flight at the cut
//!   (all of it: never half a transaction);
//! * TPC-B's invariant: sum of accounts = sum of tellers = sum of branches = sum of history
//!   deltas, and one history row per transaction the state contains.
//!
//! It asserts that cuts landed inside commits (a commit was in flight) so it cannot pass by
//! cutting only between them. A failure names the seed and crash point.

use std::collections::BTreeMap;
use std::sync::Arc;

use kvssd_device::crash::harness_config_for;
use kvssd_device::{Device, Durability, SyncPolicy};
use kvssd_flash::{FaultConfig, Flash};
use kvssd_host::sim::{self, Program, SimConfig, SimOutcome, Step, Workload};
use kvssd_host::{CommitPath, ConventionalConfig, Host, HostConfig, TableId};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const BRANCHES: u64 = 2;
const TELLERS: u64 = 4;
const ACCOUNTS: u64 = 32;
const VALUE_BYTES: usize = 24;
const TRANSACTIONS: u64 = 40;
const CLIENTS: u32 = 4;

fn key(number: u64) -> Vec<u8> {
    number.to_be_bytes().to_vec()
}

fn value(balance: i64) -> Vec<u8> {
    let mut value = vec![0u8; VALUE_BYTES];
    value[..8].copy_from_slice(&balance.to_le_bytes());
    value
}

fn balance(value: &[u8]) -> i64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&value[..8]);
    i64::from_le_bytes(bytes)
}

#[derive(Clone, Copy)]
struct Tables([TableId; 4]);

struct Update {
    tables: Tables,
    records: [u64; 3],
    delta: i64,
    history: u64,
}

impl Program for Update {
    fn step(&mut self, results: &[Option<Vec<u8>>]) -> Step {
        let index = results.len();
        if index < 6 {
            let table = self.tables.0[index / 2];
            let number = self.records[index / 2];
            if index % 2 == 0 {
                return Step::ReadForUpdate(table, key(number));
            }
            let old = results[index - 1].as_deref().map_or(0, balance);
            return Step::Update(table, key(number), value(old + self.delta));
        }
        if index == 6 {
            return Step::Insert(self.tables.0[3], key(self.history), value(self.delta));
        }
        Step::Commit
    }
}

struct Tpcb {
    rng: Xoshiro256PlusPlus,
    tables: Tables,
    next_history: u64,
}

impl Workload for Tpcb {
    fn next(&mut self, _client: u32) -> Box<dyn Program> {
        let teller = self.rng.next_u64() % TELLERS;
        let branch = teller % BRANCHES;
        let account = self.rng.next_u64() % ACCOUNTS;
        let delta = (self.rng.next_u64() % 2001) as i64 - 1000;
        self.next_history += 1;
        Box::new(Update {
            tables: self.tables,
            records: [account, teller, branch],
            delta,
            history: self.next_history,
        })
    }
}

type State = BTreeMap<(TableId, Vec<u8>), Vec<u8>>;

fn apply(state: &mut State, steps: &[Step]) {
    for step in steps {
        if let Step::Update(table, k, v) | Step::Insert(table, k, v) = step {
            state.insert((*table, k.clone()), v.clone());
        }
    }
}

struct Run {
    outcome: SimOutcome,
    initial: State,
    tables: Tables,
    /// The tables' namespaces on the KAML path.
    namespaces: Vec<kvssd_device::NamespaceId>,
    flash: Flash,
    load_operations: u64,
    /// Conventional path: commits that waited for a full checkpoint because the log ring was
    /// full, and page-cleaner runs.
    log_full_checkpoints: u64,
    checkpoints: u64,
}

/// A run's commit path and, on the conventional one, the share of the log ring its page
/// cleaner lets the log still needed fill (1: the cleaner never writes to truncate the log, so
/// the ring fills and full checkpoints truncate it).
#[derive(Debug, Clone, Copy)]
struct Setup {
    path: CommitPath,
    clean_log_share: f64,
}

/// The host's configuration. The conventional path gets pages of the harness's logical block
/// (128 B: four records), a log ring smaller than the run's commits need (so it fills, and
/// full checkpoints truncate it, unless the cleaner truncates it first) and a page cleaner that
/// writes at least a record a round after a dozen dirty records.
fn host_config(setup: Setup) -> HostConfig {
    let mut config = HostConfig::new(1 << 20);
    config.commit_path = setup.path;
    config.conventional = ConventionalConfig {
        page_bytes: 128,
        log_blocks: 12,
        directory_blocks: 16,
        checkpoint_dirty_bytes: 1000,
        clean_records_per_commit: 1,
        clean_log_share: setup.clean_log_share,
    };
    config
}

fn create_tables(host: &mut Host) -> Result<Tables, String> {
    let mut tables = [TableId(0); 4];
    for (slot, name) in ["account", "teller", "branch", "history"]
        .iter()
        .enumerate()
    {
        tables[slot] = host
            .create_table(name, VALUE_BYTES)
            .map_err(|e| e.to_string())?;
    }
    Ok(Tables(tables))
}

/// Every record number of a table slot the state may hold.
fn numbers(slot: usize) -> Vec<u64> {
    match slot {
        0 => (0..ACCOUNTS).collect(),
        1 => (0..TELLERS).collect(),
        2 => (0..BRANCHES).collect(),
        _ => (1..=TRANSACTIONS + u64::from(CLIENTS)).collect(),
    }
}

fn run(seed: u64, cut_after: Option<u64>, setup: Setup) -> Result<Run, String> {
    let (profile, device_config) =
        harness_config_for(Durability::WriteAheadLog(SyncPolicy::EveryCommand));
    let mut flash =
        Flash::new(profile.geometry, Some(profile.timing)).map_err(|e| e.to_string())?;
    flash.set_faults(FaultConfig {
        seed,
        power_cut_after_operations: cut_after,
        torn_program_probability: 1.0 / 3.0,
        ..FaultConfig::default()
    });
    let device = Arc::new(Device::open(flash, device_config).map_err(|e| e.to_string())?);
    let mut host = Host::open(device, host_config(setup)).map_err(|e| e.to_string())?;
    let tables = create_tables(&mut host)?;
    let mut initial = State::new();
    for (slot, count) in [ACCOUNTS, TELLERS, BRANCHES].into_iter().enumerate() {
        for number in 0..count {
            initial.insert((tables.0[slot], key(number)), value(0));
        }
    }
    let records: Vec<_> = initial
        .iter()
        .map(|((table, k), v)| (*table, k.clone(), v.clone()))
        .collect();
    let t = host.load(0, &records).map_err(|e| format!("load: {e}"))?;
    let counts = host
        .device()
        .stats()
        .map_err(|e| e.to_string())?
        .flash
        .total();
    let load_operations = counts.reads + counts.programs + counts.erases;
    let mut workload = Tpcb {
        rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        tables,
        next_history: 0,
    };
    let outcome = sim::run(
        &mut host,
        &mut workload,
        &SimConfig {
            clients: CLIENTS,
            transactions: TRANSACTIONS,
            step_ns: 1_000,
            record: true,
        },
        t,
    )?;
    let namespaces = tables
        .0
        .iter()
        .filter_map(|&table| host.table_namespace(table).ok().flatten())
        .collect();
    let stats = host.stats();
    let device = Arc::try_unwrap(host.into_device()).map_err(|_| "device still shared")?;
    let flash = device.into_flash().map_err(|e| e.to_string())?;
    Ok(Run {
        outcome,
        initial,
        tables,
        namespaces,
        flash,
        load_operations,
        log_full_checkpoints: stats.log_full_checkpoints,
        checkpoints: stats.checkpoints,
    })
}

/// Reopens cut flash (the device's recovery) and reads back every key the state may hold: on
/// the KAML path from the tables' namespaces; on the conventional path through a new host (its
/// log replayed into the pages), then once more through another (replayed again) and the two
/// must agree.
fn recover(
    setup: Setup,
    mut flash: Flash,
    tables: Tables,
    namespaces: &[kvssd_device::NamespaceId],
) -> Result<(State, u64), String> {
    flash.restore_power();
    flash.set_faults(FaultConfig::default());
    let (_, device_config) =
        harness_config_for(Durability::WriteAheadLog(SyncPolicy::EveryCommand));
    let device =
        Device::open(flash, device_config.clone()).map_err(|e| format!("recovery: {e}"))?;
    let mut recovered = State::new();
    if setup.path == CommitPath::Kaml {
        for (slot, &table) in tables.0.iter().enumerate() {
            for number in numbers(slot) {
                let (found, _) = device
                    .retrieve(0, namespaces[slot], &key(number), None)
                    .map_err(|e| e.to_string())?;
                if let Some(found) = found {
                    recovered.insert((table, key(number)), found.value);
                }
            }
        }
        return Ok((recovered, 0));
    }
    let mut device = device;
    let mut replayed = 0;
    for pass in 0..2 {
        let mut host = Host::open(Arc::new(device), host_config(setup))
            .map_err(|e| format!("host recovery (pass {pass}): {e}"))?;
        if pass == 0 {
            replayed = host.stats().replayed_records;
        }
        let reopened = create_tables(&mut host)?;
        let mut state = State::new();
        for (slot, &table) in reopened.0.iter().enumerate() {
            for number in numbers(slot) {
                let (found, _) = host
                    .read_committed(0, table, &key(number))
                    .map_err(|e| e.to_string())?;
                if let Some(found) = found {
                    state.insert((tables.0[slot], key(number)), found);
                }
            }
        }
        if pass == 1 && state != recovered {
            return Err("replaying the log a second time changed the state".into());
        }
        recovered = state;
        let shared = Arc::try_unwrap(host.into_device()).map_err(|_| "device still shared")?;
        let flash = shared.into_flash().map_err(|e| e.to_string())?;
        device = Device::open(flash, device_config.clone()).map_err(|e| e.to_string())?;
    }
    Ok((recovered, replayed))
}

/// What recovery did with the commit in flight at the cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InFlight {
    /// No commit failed (the cut came after the last one).
    None,
    /// It is wholly there although never acknowledged.
    Applied,
    /// It is wholly absent.
    Dropped,
}

/// Recovers the flash of a cut run and checks it.
/// Returns what became of the commit in flight, and how many log entries recovery replayed.
fn check_point(seed: u64, cut_after: u64, setup: Setup) -> Result<(InFlight, u64), String> {
    let Run {
        outcome,
        initial,
        tables,
        namespaces,
        flash,
        ..
    } = run(seed, Some(cut_after), setup)?;
    let mut acknowledged = initial;
    for committed in &outcome.log {
        apply(&mut acknowledged, &committed.steps);
    }
    let in_flight = outcome.failed_commits.first();
    let mut with_in_flight = acknowledged.clone();
    if let Some(failed) = in_flight {
        apply(&mut with_in_flight, &failed.steps);
    }
    let (recovered, replayed) = recover(setup, flash, tables, &namespaces)?;
    if recovered != acknowledged && recovered != with_in_flight {
        let lost: Vec<_> = acknowledged
            .iter()
            .filter(|(name, v)| recovered.get(*name) != Some(*v))
            .map(|(name, _)| name.clone())
            .collect();
        return Err(format!(
            "recovered state is neither the acknowledged commits nor those plus the one in \
             flight ({} acknowledged, {} keys differ from them: {lost:?})",
            outcome.log.len(),
            lost.len()
        ));
    }
    let sum = |slot: usize| -> i64 {
        recovered
            .iter()
            .filter(|((table, _), _)| *table == tables.0[slot])
            .map(|(_, v)| balance(v))
            .sum()
    };
    let rows = recovered
        .keys()
        .filter(|(table, _)| *table == tables.0[3])
        .count();
    let transactions_in_state =
        outcome.log.len() + usize::from(recovered == with_in_flight && recovered != acknowledged);
    if !(sum(0) == sum(1) && sum(1) == sum(2) && sum(2) == sum(3)) || rows != transactions_in_state
    {
        return Err(format!(
            "TPC-B invariant broken: accounts {}, tellers {}, branches {}, history {} in {rows} \
             rows for {transactions_in_state} transactions",
            sum(0),
            sum(1),
            sum(2),
            sum(3)
        ));
    }
    let fate = match in_flight {
        None => InFlight::None,
        Some(_) if recovered == with_in_flight && recovered != acknowledged => InFlight::Applied,
        Some(_) => InFlight::Dropped,
    };
    Ok((fate, replayed))
}

/// Cuts power after every flash operation of the run (or 400 points spread over them) and checks
/// each; returns how the commit in flight fared, by name (and `Replayed`: cuts whose recovery
/// redid log entries into pages), and the dry run.
fn crash_points(setup: Setup) -> (BTreeMap<String, u64>, Run) {
    let seed = 11;
    let dry = run(seed, None, setup).expect("dry run");
    assert_eq!(
        dry.outcome.committed, TRANSACTIONS,
        "the dry run committed everything"
    );
    assert!(dry.outcome.failed_commits.is_empty());
    let total = dry.flash.operations();
    let first = dry.load_operations + 1;
    assert!(total > first, "the transactions did flash work");
    // Every flash operation when the run is small enough, else an even spread of 400 points.
    let points: Vec<u64> = if total - first <= 400 {
        (first..=total).collect()
    } else {
        (0..400)
            .map(|i| first + i * (total - first) / 400)
            .collect()
    };
    let mut failures = Vec::new();
    let mut counts = BTreeMap::new();
    for &point in &points {
        match check_point(seed, point, setup) {
            Ok((in_flight, replayed)) => {
                *counts.entry(format!("{in_flight:?}")).or_insert(0) += 1;
                if replayed > 0 {
                    *counts.entry("Replayed".to_string()).or_insert(0) += 1;
                }
            }
            Err(error) => failures.push(format!(
                "{} path, seed {seed}, cut after flash operation {point}: {error}",
                setup.path.name()
            )),
        }
    }
    println!(
        "host crash, {} path: {} crash points over the {} flash operations after the load; the \
         commit in flight at the cut: {counts:?}; {} failed",
        setup.path.name(),
        points.len(),
        total - first + 1,
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        counts.contains_key("Applied") && counts.contains_key("Dropped"),
        "cuts never landed inside a commit both before and after it became durable: {counts:?}"
    );
    (counts, dry)
}

#[test]
fn host_crash_every_acknowledged_commit_survives_and_none_is_half_applied() {
    crash_points(Setup {
        path: CommitPath::Kaml,
        clean_log_share: 1.0,
    });
}

#[test]
fn host_crash_conventional_log_replay_keeps_every_acknowledged_commit_whole() {
    let (counts, dry) = crash_points(Setup {
        path: CommitPath::Conventional,
        clean_log_share: 1.0,
    });
    // Acknowledged commits lived only in the log at many cuts: recovery had to redo them.
    assert!(
        counts.get("Replayed").copied().unwrap_or(0) > 0,
        "no cut left an acknowledged commit only in the log: {counts:?}"
    );
    // The cuts must also have landed while acknowledged commits lived only in the log: the ring
    // filled (full checkpoints truncated it) and the page cleaner ran during the run.
    assert!(
        dry.log_full_checkpoints > 0 && dry.checkpoints > dry.log_full_checkpoints,
        "the run never filled the log ring or never ran the page cleaner: {} full, {} cleaner runs",
        dry.log_full_checkpoints,
        dry.checkpoints
    );
}

#[test]
fn host_crash_conventional_background_truncation_keeps_every_acknowledged_commit_whole() {
    // The cleaner writes whatever the log changed more than half a ring ago: it truncates the
    // log in the background, cuts land in its rounds, and the ring never fills.
    let (counts, dry) = crash_points(Setup {
        path: CommitPath::Conventional,
        clean_log_share: 0.5,
    });
    assert!(
        counts.get("Replayed").copied().unwrap_or(0) > 0,
        "no cut left an acknowledged commit only in the log: {counts:?}"
    );
    assert!(
        dry.log_full_checkpoints == 0 && dry.checkpoints > 0,
        "the cleaner did not keep the log ring from filling: {} full checkpoints, {} cleaner runs",
        dry.log_full_checkpoints,
        dry.checkpoints
    );
}
