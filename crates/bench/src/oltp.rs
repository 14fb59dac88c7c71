//! What the OLTP benchmarks (`tpcb`, `tpcc`) share: the simulated device under the host layer,
//! the grid of runs (commit path × lock granularity × hit ratio), and the one result schema.
//!
//! Each run gets a fresh device and host, loads its tables through the host, and runs its
//! clients on the virtual clock ([`kvssd_host::sim`]), then checks the benchmark's consistency
//! conditions. The device runs with the papers' power-loss protection assumption (volatile
//! simulation: nothing written for durability besides the commits themselves), with KAML's
//! calibrated controller costs (`kvssd bench kaml-micro`'s defaults) on both presets.

use std::sync::Arc;

use kvssd_device::{Device, DeviceConfig};
use kvssd_engine::hash::HashPreset;
use kvssd_flash::{Profile, SimTime};
use kvssd_host::sim::{self, SimConfig, SimOutcome, Workload};
use kvssd_host::{CommitPath, ConventionalConfig, Host, HostConfig, HostStats};
use serde::Serialize;

use crate::latency::{LatencyRecorder, LatencySummary};
use crate::profile::BenchProfile;

/// Bytes of every key: a table's record number, big-endian.
pub const KEY_BYTES: usize = 8;
/// Bytes of a conventional page (Shore-MT's default page size, KAML §V-D).
pub const PAGE_BYTES: u32 = 8192;

/// Most blocks of the conventional path's log ring (512 MiB of 8 KiB pages).
pub const CONVENTIONAL_LOG_BLOCKS_MAX: u64 = 65_536;

/// Called with a line of progress.
pub type Progress<'p> = &'p mut dyn FnMut(&str);

/// The run grid and the device shared by the OLTP benchmarks.
#[derive(Debug, Clone)]
pub struct OltpConfig {
    /// The simulated flash.
    pub flash: Profile,
    /// Commit paths to run.
    pub commit_paths: Vec<CommitPath>,
    /// Records per lock to run.
    pub lock_granularities: Vec<u64>,
    /// Target cache hit ratios to run (the cache is sized to hold this share of the records).
    pub hit_ratios: Vec<f64>,
    /// Closed-loop clients.
    pub clients: u32,
    /// Transactions committed per run.
    pub transactions: u64,
    /// Host CPU per transaction step, nanoseconds.
    pub step_ns: u64,
    /// Controller time per command, nanoseconds (both presets).
    pub command_ns: u64,
    /// Controller time per record of a command, nanoseconds (both presets).
    pub operation_ns: u64,
    /// Seed.
    pub seed: u64,
}

impl OltpConfig {
    /// Defaults: a 2 GiB card of PinK's shape, both commit paths, granularity 1 and 16, hit ratios
    /// 0.8 and 1.0, 16 clients, 2 us of host CPU per step, KAML's controller costs.
    pub fn default_config() -> OltpConfig {
        OltpConfig {
            flash: Profile::pink_with_blocks(16),
            commit_paths: vec![CommitPath::Kaml, CommitPath::Conventional],
            lock_granularities: vec![1, 16],
            hit_ratios: vec![0.8, 1.0],
            clients: 16,
            transactions: 20_000,
            step_ns: 2_000,
            command_ns: 4_000,
            operation_ns: 11_000,
            seed: 1,
        }
    }
}

impl OltpConfig {
    /// One run's parameters in the JSON's names.
    pub(crate) fn params(
        &self,
        path: CommitPath,
        lock_granularity: u64,
        hit_ratio: f64,
        scale: u32,
    ) -> OltpParams {
        OltpParams {
            lock_granularity,
            hit_ratio,
            commit_path: path.name().into(),
            clients: self.clients,
            scale,
        }
    }

    /// Runs `workload`'s clients on the virtual clock from `start` with this grid's clients,
    /// transactions and host CPU; returns the outcome and the host's counters before and after.
    pub(crate) fn simulate(
        &self,
        host: &mut Host,
        workload: &mut dyn Workload,
        start: SimTime,
    ) -> Result<(SimOutcome, HostStats, HostStats), String> {
        let before = host.stats();
        let outcome = sim::run(
            host,
            workload,
            &SimConfig {
                clients: self.clients,
                transactions: self.transactions,
                step_ns: self.step_ns,
                record: false,
            },
            start,
        )?;
        Ok((outcome, before, host.stats()))
    }
}

/// A run's parameters, as the JSON names them.
#[derive(Debug, Clone, Serialize)]
pub struct OltpParams {
    /// Records per lock.
    pub lock_granularity: u64,
    /// Target hit ratio (the cache's size).
    pub hit_ratio: f64,
    /// `kaml` or `conventional`.
    pub commit_path: String,
    /// Closed-loop clients.
    pub clients: u32,
    /// Scale factor.
    pub scale: u32,
}

/// One run's figures (simulated time).
#[derive(Debug, Clone, Serialize)]
pub struct OltpResult {
    /// The transaction (`AccountUpdate`, `NewOrder`, `Payment`).
    pub transaction: String,
    /// Its parameters.
    pub params: OltpParams,
    /// Committed transactions per simulated second.
    pub throughput_tps: f64,
    /// Transactions committed.
    pub committed: u64,
    /// Aborts of every kind: wait-die victims (each restarted) plus the transaction's own
    /// rollbacks and refusals.
    pub aborts: u64,
    /// Wait-die victims.
    pub deadlock_victims: u64,
    /// Rollbacks the transaction profile asks for (TPC-C NewOrder's 1%).
    pub rollbacks: u64,
    /// Lock requests that waited.
    pub lock_waits: u64,
    /// Simulated milliseconds spent waiting for locks, summed over clients.
    pub lock_wait_ms: f64,
    /// Conventional path: simulated milliseconds commits waited for the log latch.
    pub log_wait_ms: f64,
    /// Transaction latency (first begin to durable commit), microseconds.
    pub latency_us: LatencySummary,
    /// Share of record reads the cache served.
    pub hit_ratio_measured: f64,
    /// Device commands per committed transaction.
    pub device_commands_per_txn: f64,
    /// The benchmark's consistency conditions held after the run.
    pub invariants_hold: bool,
    /// What was checked, and any violation.
    pub invariants: String,
    /// Wall-clock seconds of the run (the simulator's speed, not a result).
    pub wall_s: f64,
}

impl OltpResult {
    /// A run's figures from the simulator's outcome and the host's counters around it. A step the
    /// device refused breaks the run's consistency, so it is added to what was checked.
    pub(crate) fn from_run(
        transaction: String,
        params: OltpParams,
        outcome: &SimOutcome,
        (before, after): (&HostStats, &HostStats),
        (invariants_hold, invariants): (bool, String),
        wall_s: f64,
    ) -> OltpResult {
        let mut latencies = LatencyRecorder::new();
        for &latency in &outcome.latencies_ns {
            latencies.record(latency);
        }
        let hits = after.cache_hits - before.cache_hits;
        let reads = hits + (after.cache_misses - before.cache_misses);
        OltpResult {
            transaction,
            params,
            throughput_tps: outcome.throughput_tps(),
            committed: outcome.committed,
            aborts: outcome.deaths + outcome.aborted + outcome.refused,
            deadlock_victims: outcome.deaths,
            rollbacks: outcome.aborted,
            lock_waits: outcome.lock_waits,
            lock_wait_ms: outcome.lock_wait_ns as f64 / 1e6,
            log_wait_ms: (after.log_wait_ns - before.log_wait_ns) as f64 / 1e6,
            latency_us: latencies.summary(),
            hit_ratio_measured: if reads == 0 {
                1.0
            } else {
                hits as f64 / reads as f64
            },
            device_commands_per_txn: (after.device_commands - before.device_commands) as f64
                / outcome.committed.max(1) as f64,
            invariants_hold: invariants_hold && outcome.refused == 0,
            invariants: match &outcome.first_refusal {
                Some(refusal) => format!(
                    "{invariants}; {} refused, first: {refusal}",
                    outcome.refused
                ),
                None => invariants,
            },
            wall_s,
        }
    }
}

/// A benchmark's whole output.
#[derive(Debug, Clone, Serialize)]
pub struct OltpReport {
    /// `tpcb` or `tpcc`.
    pub benchmark: String,
    /// Every figure is simulated time.
    pub simulated: bool,
    /// Seed.
    pub seed: u64,
    /// How the run was set up, in words.
    pub setup: String,
    /// The runs.
    pub results: Vec<OltpResult>,
}

/// A fresh device for a run whose tables hold up to `records` records of up to `value_bytes`.
pub fn open_device(
    config: &OltpConfig,
    records: u64,
    value_bytes: usize,
) -> Result<Device, String> {
    let mut device_config = DeviceConfig::new(&config.flash);
    device_config.command_ns = config.command_ns;
    device_config.operation_ns = config.operation_ns;
    device_config.batch_operations_max = 4096;
    let profile = BenchProfile {
        flash: config.flash.clone(),
        key_bytes: KEY_BYTES,
        value_bytes,
        ..BenchProfile::scaled()
    };
    let mut kaml = profile.hash_config(HashPreset::Kaml);
    kaml.key_in_slot = true;
    // Every table's namespace gets a table of this size (KAML sizes its mapping tables to fit
    // the benchmark, §V-D): load factor at most 0.5.
    kaml.table_slots = (records * 2).max(1024);
    kaml.write_buffer_bytes = 512 << 10;
    kaml.dram_budget_bytes = kaml
        .dram_budget_bytes
        .max(kaml.table_slots * 16 * 2 + kaml.write_buffer_bytes);
    device_config.kaml = kaml;
    device_config.block.logical_block_bytes = PAGE_BYTES;
    device_config.block.write_buffer_bytes = 512 << 10;
    device_config.block.dram_budget_bytes = 0;
    let flash = kvssd_flash::Flash::new(config.flash.geometry, Some(config.flash.timing.clone()))
        .map_err(|error| error.to_string())?;
    Device::open(flash, device_config).map_err(|error| error.to_string())
}

/// A host over a fresh device for one run.
pub fn open_host(
    config: &OltpConfig,
    path: CommitPath,
    granularity: u64,
    cache_bytes: u64,
    records: u64,
    value_bytes: usize,
) -> Result<Host, String> {
    let device = Arc::new(open_device(config, records, value_bytes)?);
    let mut host_config = HostConfig::new(cache_bytes);
    host_config.lock_granularity = granularity;
    host_config.commit_path = path;
    host_config.private_bytes_max = 1 << 20;
    // A log of a quarter of the card, at most 512 MiB (a production engine's log is sized for
    // its checkpoint interval); the page cleaner keeps the log still needed near half of it
    // (docs/host.md).
    let card_pages = config.flash.geometry.capacity_bytes() / u64::from(PAGE_BYTES);
    host_config.conventional = ConventionalConfig {
        page_bytes: PAGE_BYTES as usize,
        log_blocks: (card_pages / 4).min(CONVENTIONAL_LOG_BLOCKS_MAX),
        // A buffer pool's cleaner keeps a share of the pool dirty, not a few MiB: records wait
        // in the cache for more updates before their page is written.
        checkpoint_dirty_bytes: cache_bytes / 4,
        ..ConventionalConfig::default()
    };
    Host::open(device, host_config).map_err(|error| error.to_string())
}

/// KAML §V-D2's balls-into-bins estimate: with `keys` records in bins of `per_lock` and `updates`
/// updates arriving together, each to a uniformly chosen record, the expected number of updates
/// that find their lock already taken: N - (K/l) [1 - (1 - l/K)^N].
pub fn expected_conflicts(keys: f64, per_lock: f64, updates: f64) -> f64 {
    let bins = (keys / per_lock).max(1.0);
    updates - bins * (1.0 - (1.0 - 1.0 / bins).powf(updates))
}

/// The text table of a report.
pub fn table(report: &OltpReport) -> String {
    let mut out = format!(
        "{:<14} {:<13} {:>5} {:>5} {:>8} {:>12} {:>8} {:>9} {:>11} {:>9} {:>9} {:>6} {:>10}\n",
        "transaction",
        "commit path",
        "gran",
        "hit",
        "clients",
        "tps (sim)",
        "aborts",
        "waits",
        "wait ms",
        "p50 us",
        "p99 us",
        "hit%",
        "invariants"
    );
    for result in &report.results {
        out.push_str(&format!(
            "{:<14} {:<13} {:>5} {:>5.2} {:>8} {:>12.0} {:>8} {:>9} {:>11.1} {:>9.0} {:>9.0} {:>6.1} {:>10}\n",
            result.transaction,
            result.params.commit_path,
            result.params.lock_granularity,
            result.params.hit_ratio,
            result.params.clients,
            result.throughput_tps,
            result.aborts,
            result.lock_waits,
            result.lock_wait_ms,
            result.latency_us.p50,
            result.latency_us.p99,
            result.hit_ratio_measured * 100.0,
            if result.invariants_hold { "hold" } else { "VIOLATED" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balls_into_bins_has_no_conflicts_with_one_update_and_more_with_bigger_bins() {
        assert!(expected_conflicts(1000.0, 1.0, 1.0).abs() < 1e-9);
        let fine = expected_conflicts(1000.0, 1.0, 16.0);
        let coarse = expected_conflicts(1000.0, 16.0, 16.0);
        assert!(coarse > fine);
        // 16 updates into one bin: 15 of them conflict.
        assert!((expected_conflicts(16.0, 16.0, 16.0) - 15.0).abs() < 1e-9);
    }
}
