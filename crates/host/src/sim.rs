//! Many transaction clients on the virtual clock, interleaved deterministically.
//!
//! Each client runs transactions one after another (closed loop), each a [`Program`]: a pure
//! function from the results of its steps so far to its next step, so a program can be re-run
//! from its start when wait-die makes it the victim. Clients are served in simulated-time order
//! from a priority queue (ties by client number), one step at a time, so the host and the device
//! see calls in non-decreasing time, as the device requires, and a run is a pure function of its
//! workload's seed.
//!
//! Lock waits are simulated time: a step that must wait until a releasing commit is durable is
//! retried then; a step parked behind younger holders sleeps until the host wakes it (a holder
//! released), then retries; a wait-die victim sleeps until the lock it died on is released, then
//! restarts with its original age. A transaction's latency runs from its first begin to its
//! commit's completion, restarts included.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use kvssd_flash::SimTime;

use crate::{Access, Host, HostError, TableId, TxnId};

/// One step of a transaction program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Read a key (result: its value, or `None`).
    Read(TableId, Vec<u8>),
    /// Read a key under an exclusive lock, to update it next.
    ReadForUpdate(TableId, Vec<u8>),
    /// Replace an existing key's value.
    Update(TableId, Vec<u8>, Vec<u8>),
    /// Insert a new key.
    Insert(TableId, Vec<u8>, Vec<u8>),
    /// Delete an existing key.
    Delete(TableId, Vec<u8>),
    /// Commit (the last step).
    Commit,
    /// Abort by choice (the last step; TPC-C's NewOrder rolls back 1%).
    Abort,
}

impl Step {
    /// The step without its value bytes: its kind, table and key.
    pub fn describe(&self) -> String {
        match self {
            Step::Read(table, key) => format!("read table {table} key {key:?}"),
            Step::ReadForUpdate(table, key) => format!("read for update table {table} key {key:?}"),
            Step::Update(table, key, _) => format!("update table {table} key {key:?}"),
            Step::Insert(table, key, _) => format!("insert table {table} key {key:?}"),
            Step::Delete(table, key) => format!("delete table {table} key {key:?}"),
            Step::Commit => "commit".into(),
            Step::Abort => "abort".into(),
        }
    }
}

/// A transaction's logic: given the results of its steps so far (a read's value; `None` for
/// writes), its next step. Must depend on nothing else, so it can be re-run after a restart.
pub trait Program {
    /// The next step.
    fn step(&mut self, results: &[Option<Vec<u8>>]) -> Step;
}

/// Where a client's transactions come from.
pub trait Workload {
    /// The next transaction of `client`.
    fn next(&mut self, client: u32) -> Box<dyn Program>;
}

/// A run's shape.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Closed-loop clients.
    pub clients: u32,
    /// Transactions to commit (the run stops starting new ones then; those in flight finish).
    pub transactions: u64,
    /// Host CPU time of each step besides what the host and device charge (the application's
    /// own work and the layer's hash probes and lock table), nanoseconds.
    pub step_ns: u64,
    /// Keep every committed transaction's steps and results, in commit order (model tests).
    pub record: bool,
}

/// A committed transaction, as recorded.
#[derive(Debug, Clone)]
pub struct Committed {
    /// The client that ran it.
    pub client: u32,
    /// Its steps, `Commit` last.
    pub steps: Vec<Step>,
    /// Their results.
    pub results: Vec<Option<Vec<u8>>>,
    /// When its commit completed.
    pub at: SimTime,
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct SimOutcome {
    /// Transactions committed.
    pub committed: u64,
    /// Transactions that aborted by choice ([`Step::Abort`]).
    pub aborted: u64,
    /// Wait-die victims (each restarted).
    pub deaths: u64,
    /// Transactions refused (a step or commit returned an error other than a death), with the
    /// first error's text.
    pub refused: u64,
    /// The first refusal.
    pub first_refusal: Option<String>,
    /// Lock waits: steps that waited (timed or parked), and their simulated nanoseconds.
    pub lock_waits: u64,
    /// Simulated nanoseconds spent waiting for locks, summed over clients.
    pub lock_wait_ns: u64,
    /// Latency of each committed transaction (first begin to commit done), nanoseconds.
    pub latencies_ns: Vec<u64>,
    /// When the run started and when its last transaction finished.
    pub started_at: SimTime,
    /// When the last transaction finished.
    pub finished_at: SimTime,
    /// Committed transactions in commit order, if recorded.
    pub log: Vec<Committed>,
    /// Transactions whose commit the device refused, in order, if recorded (after a power cut
    /// the first of them was in flight: all of it may or may not be durable).
    pub failed_commits: Vec<Committed>,
}

impl SimOutcome {
    /// Committed transactions per simulated second.
    pub fn throughput_tps(&self) -> f64 {
        let span = self.finished_at.saturating_sub(self.started_at);
        if span == 0 {
            return 0.0;
        }
        self.committed as f64 / (span as f64 / 1e9)
    }
}

#[derive(Default)]
struct Client {
    program: Option<Box<dyn Program>>,
    txn: Option<TxnId>,
    results: Vec<Option<Vec<u8>>>,
    steps: Vec<Step>,
    began_at: SimTime,
    /// Sleeping since (parked, or a victim waiting to restart).
    asleep_since: Option<SimTime>,
    /// A wait-die victim: restart at the next wake.
    dead: bool,
}

/// Runs `config.transactions` transactions from `config.clients` clients against `host`, starting
/// at `start`. Errors only if the host or device fails in a way no retry can mend (or a client is
/// left asleep with nobody to wake it, which would be a bug).
pub fn run(
    host: &mut Host,
    workload: &mut dyn Workload,
    config: &SimConfig,
    start: SimTime,
) -> Result<SimOutcome, String> {
    let clients_count = config.clients.max(1);
    let mut clients: Vec<Client> = (0..clients_count).map(|_| Client::default()).collect();
    // Ties in time go first come, first served (a sequence number), so a client woken at the
    // same instant as others re-queue cannot be passed over for ever.
    let mut queue: BinaryHeap<Reverse<(SimTime, u64, u32)>> = (0..clients_count)
        .map(|c| Reverse((start, u64::from(c), c)))
        .collect();
    let mut sequence = u64::from(clients_count);
    let mut push =
        |queue: &mut BinaryHeap<Reverse<(SimTime, u64, u32)>>, at: SimTime, client: u32| {
            queue.push(Reverse((at, sequence, client)));
            sequence += 1;
        };
    let mut asleep: BTreeMap<TxnId, u32> = BTreeMap::new();
    let mut outcome = SimOutcome {
        started_at: start,
        finished_at: start,
        ..SimOutcome::default()
    };
    let mut begun = 0u64;
    while let Some(Reverse((now, _, index))) = queue.pop() {
        let client = &mut clients[index as usize];
        if client.program.is_none() {
            if begun >= config.transactions {
                continue;
            }
            begun += 1;
            client.program = Some(workload.next(index));
            client.txn = Some(host.begin().map_err(|e| e.to_string())?);
            client.began_at = now;
            client.results.clear();
            client.steps.clear();
        }
        let (Some(txn), Some(program)) = (client.txn, client.program.as_mut()) else {
            continue;
        };
        let aborted = host.state(txn).map_err(|e| e.to_string())? == crate::TxnState::Aborted;
        if aborted && !client.dead {
            // Condemned by wait-die while parked (an older transaction was granted the lock
            // ahead of it).
            outcome.deaths += 1;
            client.dead = true;
        }
        if client.dead {
            host.restart(txn).map_err(|e| e.to_string())?;
            client.dead = false;
            client.results.clear();
            client.steps.clear();
        }
        let step = program.step(&client.results);
        let call = match &step {
            Step::Read(table, key) => host.read(now, txn, *table, key),
            Step::ReadForUpdate(table, key) => host.read_for_update(now, txn, *table, key),
            Step::Update(table, key, value) => host.update(now, txn, *table, key, value).map(none),
            Step::Insert(table, key, value) => host.insert(now, txn, *table, key, value).map(none),
            Step::Delete(table, key) => host.delete(now, txn, *table, key).map(none),
            Step::Commit => host.commit(now, txn).map(none),
            Step::Abort => host.abort(now, txn).map(|()| Access::Done {
                value: None,
                at: now,
            }),
        };
        match call {
            Ok(Access::Done { value, at }) => {
                client.results.push(value);
                client.steps.push(step.clone());
                match step {
                    Step::Commit | Step::Abort => {
                        if step == Step::Commit {
                            outcome.committed += 1;
                            outcome.latencies_ns.push(at - client.began_at);
                            if config.record {
                                outcome.log.push(Committed {
                                    client: index,
                                    steps: std::mem::take(&mut client.steps),
                                    results: std::mem::take(&mut client.results),
                                    at,
                                });
                            }
                        } else {
                            outcome.aborted += 1;
                        }
                        host.free(txn).map_err(|e| e.to_string())?;
                        client.program = None;
                        client.txn = None;
                    }
                    _ => {}
                }
                outcome.finished_at = outcome.finished_at.max(at);
                push(&mut queue, at + config.step_ns, index);
            }
            Ok(Access::WaitUntil(until)) => {
                outcome.lock_waits += 1;
                outcome.lock_wait_ns += until.saturating_sub(now);
                push(&mut queue, until.max(now), index);
            }
            Ok(Access::Parked) => {
                outcome.lock_waits += 1;
                client.asleep_since = Some(now);
                asleep.insert(txn, index);
            }
            Err(HostError::Died { .. }) => {
                outcome.deaths += 1;
                client.dead = true;
                client.asleep_since = Some(now);
                asleep.insert(txn, index);
            }
            Err(error) => {
                if config.record && step == Step::Commit {
                    let mut steps = std::mem::take(&mut client.steps);
                    steps.push(Step::Commit);
                    outcome.failed_commits.push(Committed {
                        client: index,
                        steps,
                        results: std::mem::take(&mut client.results),
                        at: now,
                    });
                }
                outcome.refused += 1;
                outcome
                    .first_refusal
                    .get_or_insert_with(|| format!("{}: {error}", step.describe()));
                if matches!(
                    error,
                    HostError::Device(kvssd_device::DeviceError::Poisoned)
                ) {
                    return Err(error.to_string());
                }
                host.abort(now, txn).map_err(|e| e.to_string())?;
                host.free(txn).map_err(|e| e.to_string())?;
                client.program = None;
                client.txn = None;
                push(&mut queue, now + config.step_ns, index);
            }
        }
        for (woken, at) in host.take_wakeups() {
            if let Some(sleeper) = asleep.remove(&woken) {
                let client = &mut clients[sleeper as usize];
                let since = client.asleep_since.take().unwrap_or(at);
                let at = at.max(now);
                outcome.lock_wait_ns += at.saturating_sub(since);
                push(&mut queue, at, sleeper);
            }
        }
    }
    if !asleep.is_empty() {
        return Err(format!(
            "{} clients asleep with nobody left to wake them: {asleep:?}\n{}",
            asleep.len(),
            host.describe_locks()
        ));
    }
    Ok(outcome)
}

fn none(access: Access<()>) -> Access<Option<Vec<u8>>> {
    match access {
        Access::Done { at, .. } => Access::Done { value: None, at },
        Access::WaitUntil(until) => Access::WaitUntil(until),
        Access::Parked => Access::Parked,
    }
}
