//! TPC-B AccountUpdate with real threads on file media: `kvssd bench tpcb --file PATH`, and the
//! load the SIGKILL test runs.
//!
//! One device on a file image (the image tools' configuration: timing off, a write-ahead log
//! synced on every command, so a commit is acknowledged only once its batch is on the file),
//! one [`SharedHost`] over it on the KAML commit path, and N OS threads each running
//! AccountUpdates one after another through it. The tables are named namespaces of the `pink`
//! preset (so a reopened image finds them by name, and the history can be scanned); throughput
//! is wall-clock. The schema, the transaction and the invariants are those of [`crate::tpcb`].

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use kvssd_device::{Device, DeviceConfig};
use kvssd_engine::Preset;
use kvssd_flash::{Flash, Geometry};
use kvssd_host::sim::Workload;
use kvssd_host::{Host, HostConfig, SharedHost};
use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::tpcb::{
    balance, key_of, record, Generator, Tables, TpcbConfig, HISTORY_CLIENT_SHIFT, VALUE_BYTES,
};

/// A threaded run's shape.
#[derive(Debug, Clone)]
pub struct ThreadsConfig {
    /// Branches.
    pub scale: u32,
    /// Accounts per branch.
    pub accounts_per_branch: u64,
    /// OS threads, each a closed-loop client.
    pub threads: u32,
    /// AccountUpdates each thread commits.
    pub transactions_per_thread: u64,
    /// Seed of the transactions' choices.
    pub seed: u64,
    /// Which run this is on the image: history keys of run `r` use client numbers
    /// `r * threads ..`, so runs after a crash never reuse a history key.
    pub run: u64,
    /// Records per lock.
    pub lock_granularity: u64,
    /// The record cache's budget, bytes.
    pub cache_bytes: u64,
}

impl ThreadsConfig {
    /// `threads` threads of `transactions_per_thread` each on a small bank (2 branches of 1,000
    /// accounts), record locks, a cache that holds everything.
    pub fn new(threads: u32, transactions_per_thread: u64) -> ThreadsConfig {
        ThreadsConfig {
            scale: 2,
            accounts_per_branch: 1000,
            threads,
            transactions_per_thread,
            seed: 1,
            run: 0,
            lock_granularity: 1,
            cache_bytes: 64 << 20,
        }
    }

    fn tpcb(&self) -> TpcbConfig {
        let mut config = TpcbConfig::default_config();
        config.scale = self.scale;
        config.accounts_per_branch = self.accounts_per_branch;
        config
    }
}

/// What a threaded run did.
#[derive(Debug, Clone, Default)]
pub struct ThreadsOutcome {
    /// Transactions committed.
    pub committed: u64,
    /// Wait-die victims (each restarted).
    pub restarts: u64,
    /// Steps that blocked on a lock.
    pub lock_waits: u64,
    /// Wall-clock seconds of the transactions (loading excluded).
    pub wall_s: f64,
}

impl ThreadsOutcome {
    /// Committed transactions per wall-clock second.
    pub fn wall_tps(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.committed as f64 / self.wall_s
        } else {
            0.0
        }
    }
}

/// What TPC-B's consistency checks found on the device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TpcbState {
    /// Sum of the account balances.
    pub accounts: i64,
    /// Sum of the teller balances.
    pub tellers: i64,
    /// Sum of the branch balances.
    pub branches: i64,
    /// Sum of the history rows' deltas.
    pub deltas: i64,
    /// The history rows' keys (as numbers), in key order.
    pub history: Vec<u64>,
}

impl TpcbState {
    /// TPC-B's invariant: the three balance sums and the history deltas are equal.
    pub fn balanced(&self) -> bool {
        self.accounts == self.tellers
            && self.tellers == self.branches
            && self.branches == self.deltas
    }
}

impl std::fmt::Display for TpcbState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sum(accounts) {}, sum(tellers) {}, sum(branches) {}, sum(history deltas) {}; {} history rows",
            self.accounts,
            self.tellers,
            self.branches,
            self.deltas,
            self.history.len()
        )
    }
}

/// The client number and sequence of a history key.
pub fn history_client(key: u64) -> (u64, u64) {
    (
        key >> HISTORY_CLIENT_SHIFT,
        key & ((1 << HISTORY_CLIENT_SHIFT) - 1),
    )
}

/// Opens the file image at `path`, or creates it with `geometry` if there is no file there.
/// Opening recovers it if its last writer died.
pub fn open_image(path: &Path, geometry: &Geometry) -> Result<Device, String> {
    let e = |error: kvssd_device::DeviceError| format!("{}: {error}", path.display());
    if path.exists() {
        let geometry = Flash::probe(path).map_err(|error| error.to_string())?;
        Device::open_path(path, None, DeviceConfig::for_file_image(&geometry)).map_err(e)
    } else {
        Device::create(
            path,
            *geometry,
            None,
            DeviceConfig::for_file_image(geometry),
        )
        .map_err(e)
    }
}

/// A shared host on the KAML path over `device`, its tables opened by name and, if the image
/// does not hold a whole population yet, loaded (all balances zero).
pub fn open_host(device: Device, config: &ThreadsConfig) -> Result<(SharedHost, Tables), String> {
    let e = |error: kvssd_host::HostError| error.to_string();
    let mut host_config = HostConfig::new(config.cache_bytes);
    host_config.lock_granularity = config.lock_granularity;
    host_config.table_preset = Preset::Pink.into();
    host_config.private_bytes_max = 1 << 20;
    let mut host = Host::open(Arc::new(device), host_config).map_err(e)?;
    let mut open = |name: &str| host.open_table(name, VALUE_BYTES).map(|(table, _)| table);
    let tables = Tables {
        branch: open("branch").map_err(e)?,
        teller: open("teller").map_err(e)?,
        account: open("account").map_err(e)?,
        history: open("history").map_err(e)?,
    };
    let tpcb = config.tpcb();
    let mut present = |table, number: u64| {
        host.read_committed(0, table, &key_of(number))
            .map(|(value, _)| value.is_some())
    };
    // The population goes in branches last: the last branch present means all of it is. One
    // branch or account beyond it must be absent, or the image was loaded at another scale.
    let loaded = present(tables.branch, tpcb.branches() - 1).map_err(e)?;
    let other_scale = present(tables.branch, tpcb.branches()).map_err(e)?
        || present(tables.account, tpcb.accounts()).map_err(e)?
        || (loaded && !present(tables.account, tpcb.accounts() - 1).map_err(e)?);
    if other_scale || (!loaded && present(tables.branch, 0).map_err(e)?) {
        return Err(format!(
            "the image holds a TPC-B population of another scale or accounts per branch than {} \
             x {}",
            tpcb.branches(),
            tpcb.accounts_per_branch
        ));
    }
    if !loaded {
        let all = (0..tpcb.accounts())
            .map(|number| (tables.account, number))
            .chain((0..tpcb.tellers()).map(|number| (tables.teller, number)))
            .chain((0..tpcb.branches()).map(|number| (tables.branch, number)));
        let records: Vec<_> = all
            .map(|(table, number)| (table, key_of(number), record(0, b'i')))
            .collect();
        for chunk in records.chunks(4096) {
            host.load(0, chunk).map_err(e)?;
        }
    }
    Ok((SharedHost::new(host), tables))
}

/// Runs `config.threads` threads of AccountUpdates through `shared`; `on_commit(history key)`
/// is called, in the committing thread, once each commit is acknowledged (durable).
pub fn run_threads(
    shared: &SharedHost,
    tables: Tables,
    config: &ThreadsConfig,
    on_commit: &(dyn Fn(u64) + Sync),
) -> Result<ThreadsOutcome, String> {
    let tpcb = config.tpcb();
    let start = Instant::now();
    let outcomes: Vec<Result<ThreadsOutcome, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.threads)
            .map(|thread| {
                let tpcb = &tpcb;
                scope.spawn(move || {
                    let client = config.run * u64::from(config.threads) + u64::from(thread);
                    let mut generator = Generator {
                        rng: Xoshiro256PlusPlus::seed_from_u64(
                            config.seed ^ client.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                        ),
                        tables,
                        branches: tpcb.branches(),
                        accounts_per_branch: tpcb.accounts_per_branch,
                        client_base: client,
                        issued: vec![0],
                    };
                    let mut outcome = ThreadsOutcome::default();
                    for sequence in 0..config.transactions_per_thread {
                        let mut program = generator.next(0);
                        let ran = shared.run(program.as_mut()).map_err(|e| e.to_string())?;
                        outcome.restarts += ran.restarts;
                        outcome.lock_waits += ran.lock_waits;
                        if ran.committed {
                            outcome.committed += 1;
                            on_commit((client << HISTORY_CLIENT_SHIFT) | sequence);
                        }
                    }
                    Ok(outcome)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err("a transaction thread panicked".into()))
            })
            .collect()
    });
    let mut total = ThreadsOutcome {
        wall_s: start.elapsed().as_secs_f64(),
        ..ThreadsOutcome::default()
    };
    for outcome in outcomes {
        let outcome = outcome?;
        total.committed += outcome.committed;
        total.restarts += outcome.restarts;
        total.lock_waits += outcome.lock_waits;
    }
    Ok(total)
}

/// Reads the balances and the history from the device (the history by a scan of its namespace).
pub fn read_state(
    shared: &SharedHost,
    tables: Tables,
    config: &ThreadsConfig,
) -> Result<TpcbState, String> {
    let tpcb = config.tpcb();
    let e = |error: kvssd_host::HostError| error.to_string();
    shared
        .with_host(|host, mut at| {
            let mut state = TpcbState::default();
            let mut sum = |host: &mut Host, table, count: u64| {
                let mut total = 0i64;
                for number in 0..count {
                    let (value, done) = host.read_committed(at, table, &key_of(number))?;
                    at = at.max(done);
                    total += balance(value.as_ref());
                }
                Ok::<i64, kvssd_host::HostError>(total)
            };
            state.accounts = sum(host, tables.account, tpcb.accounts())?;
            state.tellers = sum(host, tables.teller, tpcb.tellers())?;
            state.branches = sum(host, tables.branch, tpcb.branches())?;
            let Some(namespace) = host.table_namespace(tables.history)? else {
                return Ok((state, at));
            };
            // A scan starts at a key (not empty): every history key is 8 bytes, so `[0]` is below all.
            let mut start = vec![0u8];
            loop {
                let (pairs, done) =
                    host.device()
                        .scan(at, namespace, &start, kvssd_device::SCAN_PAIRS_MAX)?;
                at = at.max(done);
                let last = pairs.len() < kvssd_device::SCAN_PAIRS_MAX;
                for (key, value) in &pairs {
                    let mut number = [0u8; 8];
                    if key.len() == 8 {
                        number.copy_from_slice(key);
                    }
                    state.history.push(u64::from_be_bytes(number));
                    state.deltas += balance(Some(value));
                }
                match pairs.last() {
                    Some((key, _)) if !last => {
                        start = key.clone();
                        start.push(0);
                    }
                    _ => break,
                }
            }
            Ok((state, at))
        })
        .map_err(e)
}

/// Closes the shared host and its device cleanly (a checkpoint, so the next open replays
/// nothing).
pub fn close(shared: SharedHost) -> Result<(), String> {
    let device = shared
        .into_host()
        .map_err(|error| error.to_string())?
        .into_device();
    let device = Arc::try_unwrap(device).map_err(|_| "the device is still shared".to_string())?;
    device.close(0).map(drop).map_err(|error| error.to_string())
}

/// A whole file run (`kvssd bench tpcb --file PATH`): open or create the image, load if needed,
/// run the threads, check TPC-B's invariant and that every commit of this run left its history
/// row, close. `geometry` is used only if the image is created.
pub fn run_on_file(
    path: &Path,
    geometry: &Geometry,
    config: &ThreadsConfig,
) -> Result<(ThreadsOutcome, TpcbState, bool), String> {
    let device = open_image(path, geometry)?;
    let (shared, tables) = open_host(device, config)?;
    let committed = std::sync::Mutex::new(Vec::new());
    let outcome = run_threads(&shared, tables, config, &|history| {
        if let Ok(mut committed) = committed.lock() {
            committed.push(history);
        }
    })?;
    let state = read_state(&shared, tables, config)?;
    let committed = committed.into_inner().map_err(|_| "poisoned".to_string())?;
    let first = config.run * u64::from(config.threads);
    let this_run: std::collections::BTreeSet<u64> = state
        .history
        .iter()
        .copied()
        .filter(|&key| {
            let (client, _) = history_client(key);
            client >= first && client < first + u64::from(config.threads)
        })
        .collect();
    let rows_match = committed.len() as u64 == outcome.committed
        && this_run.len() == committed.len()
        && committed.iter().all(|key| this_run.contains(key));
    close(shared)?;
    Ok((outcome, state, rows_match))
}
