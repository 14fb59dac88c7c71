//! The values the host's calls take and return: ids, states, the configuration, what a call
//! that may wait returns, and the activity counters.

use std::fmt;

use kvssd_device::PresetKind;
use kvssd_flash::SimTime;

use crate::{ConventionalConfig, TXNS_MAX};

/// A table of the host: one device namespace on the KAML path, a set of pages on the
/// conventional one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub u32);

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A transaction control block's id (never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxnId(pub u32);

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A transaction's state (KAML Fig. 2): IDLE → ACTIVE (begin) → COMMITTED (commit) or ABORTED
/// (abort, or chosen as a deadlock victim); an ABORTED transaction may be restarted (ACTIVE again,
/// same age); free returns the control block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// Not started (a freed control block).
    Idle,
    /// In progress: it may read, write, commit or abort.
    Active,
    /// Committed: its changes are durable and its locks released.
    Committed,
    /// Aborted: its private copies discarded and its locks released.
    Aborted,
}

/// Which commit path the host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitPath {
    /// KAML's: each table is a namespace of the device; a commit is one atomic multi-key batch of
    /// the transaction's private copies, and commits that touch different records go to the
    /// device in parallel.
    Kaml,
    /// A conventional storage engine's, in the shape of Shore-MT (it is not Shore-MT): records
    /// packed in pages on the `block` preset, one central synchronous commit log that one
    /// transaction at a time writes and waits for, and dirty pages written back by checkpoints.
    Conventional,
}

impl CommitPath {
    /// The name used in results: `kaml` or `conventional`.
    pub fn name(self) -> &'static str {
        match self {
            CommitPath::Kaml => "kaml",
            CommitPath::Conventional => "conventional",
        }
    }
}

/// How a host is set up.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The record cache's budget, bytes (keys, values and per-entry overhead).
    pub cache_bytes: u64,
    /// Most bytes of private copies one transaction may hold.
    pub private_bytes_max: u64,
    /// Records per lock (1: record locks).
    pub lock_granularity: u64,
    /// The commit path.
    pub commit_path: CommitPath,
    /// The preset of each table's namespace on the KAML path.
    pub table_preset: PresetKind,
    /// The conventional path's pages and log.
    pub conventional: ConventionalConfig,
    /// Most control blocks allocated at once.
    pub txns_max: usize,
}

impl HostConfig {
    /// A cache of `cache_bytes`, record locks, the KAML path on `kaml` namespaces.
    pub fn new(cache_bytes: u64) -> HostConfig {
        HostConfig {
            cache_bytes,
            private_bytes_max: cache_bytes.max(1 << 20),
            lock_granularity: 1,
            commit_path: CommitPath::Kaml,
            table_preset: PresetKind::from(kvssd_engine::hash::HashPreset::Kaml),
            conventional: ConventionalConfig::default(),
            txns_max: TXNS_MAX,
        }
    }
}

/// The result of a call that may have to wait for a lock (or, on the conventional path, for the
/// commit log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access<T> {
    /// Done: the result, and the simulated time the call completed.
    Done {
        /// What the call returns.
        value: T,
        /// When it completed.
        at: SimTime,
    },
    /// Busy until this time (a commit that is releasing it is not yet durable, or the log is
    /// being written): call again then.
    WaitUntil(SimTime),
    /// Parked behind younger holders (wait-die): call again once [`crate::Host::take_wakeups`] names
    /// this transaction.
    Parked,
}

/// Counters of the host's activity since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Transactions committed.
    pub commits: u64,
    /// Transactions aborted by the application (including commits the device refused).
    pub aborts: u64,
    /// Transactions aborted as wait-die victims.
    pub deaths: u64,
    /// Lock requests parked behind younger holders.
    pub parks: u64,
    /// Lock requests that waited for a releasing commit to become durable.
    pub timed_waits: u64,
    /// Record reads served by the cache.
    pub cache_hits: u64,
    /// Record reads that went to the device.
    pub cache_misses: u64,
    /// Clean entries evicted.
    pub cache_evictions: u64,
    /// Device commands issued (reads, batches, log and page writes).
    pub device_commands: u64,
    /// Conventional path: commit-log writes, and checkpoints.
    pub log_writes: u64,
    /// Conventional path: checkpoints (dirty pages written back).
    pub checkpoints: u64,
    /// Conventional path: simulated nanoseconds commits waited for the log.
    pub log_wait_ns: u64,
    /// Conventional path: full checkpoints a commit waited for because the log ring was full of
    /// records whose pages were not written.
    pub log_full_checkpoints: u64,
    /// Conventional path: committed log entries redone into their pages when the host opened
    /// (recovery).
    pub replayed_records: u64,
}
