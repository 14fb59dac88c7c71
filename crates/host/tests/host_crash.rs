//! Power cuts in the middle of commits. A small TPC-B (two branches, four tellers, 32 accounts
//! and a history table, each a `kaml` namespace) runs through the host layer from several
//! clients on simulated flash under the device's write-ahead log (sync per command, the crash
//! harness's configuration). A dry run counts its flash operations; then, for a spread of crash
//! points after the load, the same seeded run loses power after N flash operations (in-flight
//! programs torn or lost by the fault model), the flash is reopened (recovery), and the test
//! checks:
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
use kvssd_host::{Host, HostConfig, TableId};
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
    namespaces: Vec<kvssd_device::NamespaceId>,
    flash: Flash,
    load_operations: u64,
}

fn run(seed: u64, cut_after: Option<u64>) -> Result<Run, String> {
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
    let mut host = Host::open(device, HostConfig::new(1 << 20)).map_err(|e| e.to_string())?;
    let mut tables = [TableId(0); 4];
    for (slot, name) in ["account", "teller", "branch", "history"]
        .iter()
        .enumerate()
    {
        tables[slot] = host
            .create_table(name, VALUE_BYTES)
            .map_err(|e| e.to_string())?;
    }
    let tables = Tables(tables);
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
        .map(|&table| {
            host.table_namespace(table)
                .ok()
                .flatten()
                .ok_or_else(|| "a table without a namespace".to_string())
        })
        .collect::<Result<_, _>>()?;
    let device = Arc::try_unwrap(host.into_device()).map_err(|_| "device still shared")?;
    let flash = device.into_flash().map_err(|e| e.to_string())?;
    Ok(Run {
        outcome,
        initial,
        tables,
        namespaces,
        flash,
        load_operations,
    })
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
fn check_point(seed: u64, cut_after: u64) -> Result<InFlight, String> {
    let Run {
        outcome,
        initial,
        tables,
        namespaces,
        mut flash,
        ..
    } = run(seed, Some(cut_after))?;
    flash.restore_power();
    flash.set_faults(FaultConfig::default());
    let (_, device_config) =
        harness_config_for(Durability::WriteAheadLog(SyncPolicy::EveryCommand));
    let device = Device::open(flash, device_config).map_err(|e| format!("recovery: {e}"))?;
    let mut acknowledged = initial;
    for committed in &outcome.log {
        apply(&mut acknowledged, &committed.steps);
    }
    let in_flight = outcome.failed_commits.first();
    let mut with_in_flight = acknowledged.clone();
    if let Some(failed) = in_flight {
        apply(&mut with_in_flight, &failed.steps);
    }
    // Read back every key either state names.
    let mut recovered = State::new();
    for (slot, &table) in tables.0.iter().enumerate() {
        let numbers: Vec<u64> = match slot {
            0 => (0..ACCOUNTS).collect(),
            1 => (0..TELLERS).collect(),
            2 => (0..BRANCHES).collect(),
            _ => (1..=TRANSACTIONS + u64::from(CLIENTS)).collect(),
        };
        for number in numbers {
            let (found, _) = device
                .retrieve(0, namespaces[slot], &key(number), None)
                .map_err(|e| e.to_string())?;
            if let Some(found) = found {
                recovered.insert((table, key(number)), found.value);
            }
        }
    }
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
    Ok(match in_flight {
        None => InFlight::None,
        Some(_) if recovered == with_in_flight && recovered != acknowledged => InFlight::Applied,
        Some(_) => InFlight::Dropped,
    })
}

#[test]
fn host_crash_every_acknowledged_commit_survives_and_none_is_half_applied() {
    let seed = 11;
    let dry = run(seed, None).expect("dry run");
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
        match check_point(seed, point) {
            Ok(in_flight) => *counts.entry(format!("{in_flight:?}")).or_insert(0) += 1,
            Err(error) => failures.push(format!(
                "seed {seed}, cut after flash operation {point}: {error}"
            )),
        }
    }
    println!(
        "host crash: {} crash points over the {} flash operations after the load; the commit in \
         flight at the cut: {counts:?}; {} failed",
        points.len(),
        total - first + 1,
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        counts.contains_key("Applied") && counts.contains_key("Dropped"),
        "cuts never landed inside a commit both before and after it became durable: {counts:?}"
    );
}
