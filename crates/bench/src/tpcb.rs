//! `kvssd bench tpcb`: TPC-B's AccountUpdate through the host layer (KAML §V-D, Fig. 9), on the
//! KAML commit path and the conventional one, at several lock granularities and cache hit
//! ratios.
//!
//! **Schema** (TPC-B §1.2), one table each, keys the record number (8 bytes, big-endian), values
//! 512 bytes as KAML stores every TPC-B record (§V-D), the balance a little-endian `i64` first:
//! `scale` branches, 10 tellers per branch, `accounts_per_branch` accounts per branch (TPC-B:
//! 100,000) and a history table that grows by one row per transaction.
//!
//! **AccountUpdate** (TPC-B §1.3): a teller chosen uniformly, its branch, an account of that
//! branch with probability 0.85 or of another branch otherwise (when there is one), a delta
//! uniform in [-999,999, +999,999]; read and update the account, the teller and the branch (each
//! read for update, taking its exclusive lock at once, as Shore-kits does), insert a history row
//! (account, teller, branch, delta), commit.
//!
//! **Invariants** (TPC-B §2, the consistency checks), after every run: the sum of the account
//! balances equals the sum of the teller balances and of the branch balances, and the sum of
//! the history deltas; the history holds exactly one row per committed transaction.

use std::time::Instant;

use kvssd_flash::SimTime;
use kvssd_host::sim::{self, Program, Step, Workload};
use kvssd_host::{CommitPath, Host, TableId};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::oltp::{self, OltpConfig, OltpReport, OltpResult, KEY_BYTES};

/// Bytes of every TPC-B value (KAML §V-D: "all values are 512 bytes").
pub const VALUE_BYTES: usize = 512;
/// Tellers per branch (TPC-B §1.2).
pub const TELLERS_PER_BRANCH: u64 = 10;
/// Accounts per branch (TPC-B §1.2).
pub const ACCOUNTS_PER_BRANCH: u64 = 100_000;
/// Largest delta magnitude (TPC-B §1.3).
const DELTA_MAX: i64 = 999_999;

/// `kvssd bench tpcb`'s configuration.
#[derive(Debug, Clone)]
pub struct TpcbConfig {
    /// The run grid and device.
    pub oltp: OltpConfig,
    /// Branches.
    pub scale: u32,
    /// Accounts per branch.
    pub accounts_per_branch: u64,
}

impl TpcbConfig {
    /// Defaults: scale 10 with TPC-B's 100,000 accounts per branch (1M accounts, 512 MB of
    /// values), the OLTP defaults.
    pub fn default_config() -> TpcbConfig {
        TpcbConfig {
            oltp: OltpConfig::default_config(),
            scale: 10,
            accounts_per_branch: ACCOUNTS_PER_BRANCH,
        }
    }

    pub(crate) fn branches(&self) -> u64 {
        u64::from(self.scale.max(1))
    }

    pub(crate) fn tellers(&self) -> u64 {
        self.branches() * TELLERS_PER_BRANCH
    }

    pub(crate) fn accounts(&self) -> u64 {
        self.branches() * self.accounts_per_branch
    }
}

/// The key of record `number`.
pub fn key_of(number: u64) -> Vec<u8> {
    number.to_be_bytes().to_vec()
}

/// A record with `balance` first.
pub(crate) fn record(balance: i64, filler: u8) -> Vec<u8> {
    let mut value = vec![filler; VALUE_BYTES];
    value[..8].copy_from_slice(&balance.to_le_bytes());
    value
}

pub(crate) fn balance(value: Option<&Vec<u8>>) -> i64 {
    value.and_then(|value| value.get(..8)).map_or(0, |bytes| {
        let mut array = [0u8; 8];
        array.copy_from_slice(bytes);
        i64::from_le_bytes(array)
    })
}

/// The four tables.
#[derive(Debug, Clone, Copy)]
pub struct Tables {
    /// BRANCH.
    pub branch: TableId,
    /// TELLER.
    pub teller: TableId,
    /// ACCOUNT.
    pub account: TableId,
    /// HISTORY.
    pub history: TableId,
}

/// One AccountUpdate.
struct AccountUpdate {
    tables: Tables,
    account: u64,
    teller: u64,
    branch: u64,
    delta: i64,
    history: u64,
}

impl Program for AccountUpdate {
    fn step(&mut self, results: &[Option<Vec<u8>>]) -> Step {
        let tables = self.tables;
        let updated = |index: usize| {
            record(
                balance(results.get(index).and_then(Option::as_ref)) + self.delta,
                b'b',
            )
        };
        match results.len() {
            0 => Step::ReadForUpdate(tables.account, key_of(self.account)),
            1 => Step::Update(tables.account, key_of(self.account), updated(0)),
            2 => Step::ReadForUpdate(tables.teller, key_of(self.teller)),
            3 => Step::Update(tables.teller, key_of(self.teller), updated(2)),
            4 => Step::ReadForUpdate(tables.branch, key_of(self.branch)),
            5 => Step::Update(tables.branch, key_of(self.branch), updated(4)),
            6 => {
                let mut row = record(self.delta, b'h');
                row[8..16].copy_from_slice(&self.account.to_le_bytes());
                row[16..24].copy_from_slice(&self.teller.to_le_bytes());
                row[24..32].copy_from_slice(&self.branch.to_le_bytes());
                Step::Insert(tables.history, key_of(self.history), row)
            }
            _ => Step::Commit,
        }
    }
}

/// History keys: the client in the top bits, its transaction sequence below.
pub(crate) const HISTORY_CLIENT_SHIFT: u32 = 40;

pub(crate) struct Generator {
    pub(crate) rng: Xoshiro256PlusPlus,
    pub(crate) tables: Tables,
    pub(crate) branches: u64,
    pub(crate) accounts_per_branch: u64,
    /// Added to the client number in history keys (threads of several processes on one image).
    pub(crate) client_base: u64,
    /// Transactions issued per client (history keys `client << 40 | 0..issued`).
    pub(crate) issued: Vec<u64>,
}

impl Workload for Generator {
    fn next(&mut self, client: u32) -> Box<dyn Program> {
        let tellers = self.branches * TELLERS_PER_BRANCH;
        let teller = self.rng.next_u64() % tellers;
        let branch = teller / TELLERS_PER_BRANCH;
        let home = self.branches == 1 || self.rng.next_u64() % 100 < 85;
        let account_branch = if home {
            branch
        } else {
            let other = self.rng.next_u64() % (self.branches - 1);
            if other >= branch {
                other + 1
            } else {
                other
            }
        };
        let account = account_branch * self.accounts_per_branch
            + self.rng.next_u64() % self.accounts_per_branch;
        let delta = (self.rng.next_u64() % (2 * DELTA_MAX as u64 + 1)) as i64 - DELTA_MAX;
        let sequence = &mut self.issued[client as usize];
        let history = ((self.client_base + u64::from(client)) << HISTORY_CLIENT_SHIFT) | *sequence;
        *sequence += 1;
        Box::new(AccountUpdate {
            tables: self.tables,
            account,
            teller,
            branch,
            delta,
            history,
        })
    }
}

pub use crate::oltp::Progress;

/// Runs the grid: every commit path × lock granularity × hit ratio.
pub fn run(config: &TpcbConfig, progress: Progress<'_>) -> Result<OltpReport, String> {
    let mut results = Vec::new();
    for &path in &config.oltp.commit_paths {
        for &granularity in &config.oltp.lock_granularities {
            for &hit_ratio in &config.oltp.hit_ratios {
                let result = run_one(config, path, granularity, hit_ratio, progress)?;
                progress(&format!(
                    "tpcb {} granularity {granularity} hit {hit_ratio}: {:.0} tps (simulated), \
                     invariants {}",
                    path.name(),
                    result.throughput_tps,
                    if result.invariants_hold {
                        "hold"
                    } else {
                        "VIOLATED"
                    }
                ));
                results.push(result);
            }
        }
    }
    Ok(OltpReport {
        benchmark: "tpcb".into(),
        simulated: true,
        seed: config.oltp.seed,
        setup: format!(
            "TPC-B AccountUpdate, scale {} ({} accounts per branch), {}-byte values, {} clients, \
             {} committed transactions per run, {} ns host CPU per step",
            config.scale,
            config.accounts_per_branch,
            VALUE_BYTES,
            config.oltp.clients,
            config.oltp.transactions,
            config.oltp.step_ns
        ),
        results,
    })
}

/// Cache bytes for a target hit ratio: that share of the records' cache footprint (1.0: no
/// limit).
pub fn cache_bytes_for(hit_ratio: f64, records: u64, value_bytes: usize) -> u64 {
    if hit_ratio >= 1.0 {
        return u64::MAX / 4;
    }
    let entry = (KEY_BYTES + value_bytes) as u64 + kvssd_host_entry_overhead();
    (hit_ratio * (records * entry) as f64) as u64
}

fn kvssd_host_entry_overhead() -> u64 {
    48
}

fn run_one(
    config: &TpcbConfig,
    path: CommitPath,
    granularity: u64,
    hit_ratio: f64,
    progress: Progress<'_>,
) -> Result<OltpResult, String> {
    let wall = Instant::now();
    let records = config.accounts() + config.tellers() + config.branches();
    let history_max = config.oltp.transactions * 2;
    let mut host = oltp::open_host(
        &config.oltp,
        path,
        granularity,
        cache_bytes_for(hit_ratio, records, VALUE_BYTES),
        records.max(history_max),
        VALUE_BYTES,
    )?;
    let e = |error: kvssd_host::HostError| error.to_string();
    let tables = Tables {
        branch: host.create_table("branch", VALUE_BYTES).map_err(e)?,
        teller: host.create_table("teller", VALUE_BYTES).map_err(e)?,
        account: host.create_table("account", VALUE_BYTES).map_err(e)?,
        history: host.create_table("history", VALUE_BYTES).map_err(e)?,
    };
    // Branches and tellers last, so they start in the cache like the hot records they are.
    let mut t: SimTime = 0;
    let mut chunk = Vec::with_capacity(4096);
    let all = (0..config.accounts())
        .map(|number| (tables.account, number))
        .chain((0..config.tellers()).map(|number| (tables.teller, number)))
        .chain((0..config.branches()).map(|number| (tables.branch, number)));
    for (table, number) in all {
        chunk.push((table, key_of(number), record(0, b'i')));
        if chunk.len() == 4096 {
            t = host.load(t, &chunk).map_err(e)?;
            chunk.clear();
        }
    }
    t = host.load(t, &chunk).map_err(e)?;
    let start = t.max(host.device().quiescent_at().map_err(|e| e.to_string())?);
    progress(&format!(
        "tpcb {} granularity {granularity} hit {hit_ratio}: loaded {records} records ({:.1} s)",
        path.name(),
        wall.elapsed().as_secs_f64()
    ));
    let mut generator = Generator {
        rng: Xoshiro256PlusPlus::seed_from_u64(config.oltp.seed),
        tables,
        branches: config.branches(),
        accounts_per_branch: config.accounts_per_branch,
        client_base: 0,
        issued: vec![0; config.oltp.clients.max(1) as usize],
    };
    let (outcome, before, after) = config.oltp.simulate(&mut host, &mut generator, start)?;
    let run_wall = wall.elapsed().as_secs_f64();
    let (invariants_hold, invariants) = check(&mut host, config, tables, &generator, &outcome)?;
    Ok(OltpResult::from_run(
        "AccountUpdate".into(),
        config
            .oltp
            .params(path, granularity, hit_ratio, config.scale),
        &outcome,
        (&before, &after),
        (invariants_hold, invariants),
        run_wall,
    ))
}

/// TPC-B's consistency checks after a run; the text says what held or what did not.
fn check(
    host: &mut Host,
    config: &TpcbConfig,
    tables: Tables,
    generator: &Generator,
    outcome: &sim::SimOutcome,
) -> Result<(bool, String), String> {
    let e = |error: kvssd_host::HostError| error.to_string();
    let mut t = outcome
        .finished_at
        .max(host.device().quiescent_at().map_err(|e| e.to_string())?);
    let mut sum = |host: &mut Host, table: TableId, count: u64| -> Result<i64, String> {
        let mut total = 0i64;
        for number in 0..count {
            let (value, done) = host.read_committed(t, table, &key_of(number)).map_err(e)?;
            t = done;
            total += balance(value.as_ref());
        }
        Ok(total)
    };
    let accounts = sum(host, tables.account, config.accounts())?;
    let tellers = sum(host, tables.teller, config.tellers())?;
    let branches = sum(host, tables.branch, config.branches())?;
    let mut rows = 0u64;
    let mut deltas = 0i64;
    for (client, &issued) in generator.issued.iter().enumerate() {
        for sequence in 0..issued {
            let key = key_of(((client as u64) << HISTORY_CLIENT_SHIFT) | sequence);
            let (value, done) = host.read_committed(t, tables.history, &key).map_err(e)?;
            t = done;
            if let Some(value) = value {
                rows += 1;
                deltas += balance(Some(&value));
            }
        }
    }
    let hold = accounts == tellers
        && tellers == branches
        && branches == deltas
        && rows == outcome.committed;
    Ok((
        hold,
        format!(
            "sum(accounts) {accounts}, sum(tellers) {tellers}, sum(branches) {branches}, \
             sum(history deltas) {deltas}; history rows {rows} for {} committed transactions",
            outcome.committed
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tpcb_small_run_keeps_its_invariants_on_both_paths() {
        let mut config = TpcbConfig::default_config();
        config.scale = 2;
        config.accounts_per_branch = 200;
        config.oltp.flash = kvssd_flash::Profile::pink_with_blocks(4);
        config.oltp.transactions = 300;
        config.oltp.clients = 8;
        config.oltp.hit_ratios = vec![0.8];
        let report = run(&config, &mut |_| {}).expect("run");
        assert_eq!(report.results.len(), 4);
        for result in &report.results {
            assert!(result.invariants_hold, "{}", result.invariants);
            assert_eq!(result.committed, 300);
            assert!(result.throughput_tps > 0.0);
            assert!(result.lock_waits > 0, "8 clients on 2 branches must wait");
        }
        crate::oltp_report::assert_plots_written(&report);
    }
}
