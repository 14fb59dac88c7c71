//! The host layer of kvssd: KAML's caching layer (HPCA'17 §III-C, §III-D, Table II, Fig. 2) —
//! a cache of committed records in host memory and transactions with strong strict two-phase
//! locking, committed with one atomic multi-key batch of the device — and, configured in the same
//! layer, a conventional commit path to compare it with.
//!
//! * [`Host`]: tables, the cache, the transaction API (begin, read, update, insert, delete,
//!   commit, abort, free; [`TxnState`]: IDLE → ACTIVE → COMMITTED | ABORTED), the commit paths
//!   ([`CommitPath`]). Every call takes the simulated time it is issued at and returns when it
//!   completes, or says it must wait for a lock ([`Access`]).
//! * Locks ([`LockName`], [`LockMode`]): shared and exclusive, `lock_granularity` records per
//!   lock by key range, wait-die against deadlock (see the module's documentation in
//!   `locks.rs`).
//! * [`sim`]: many transaction clients on the virtual clock, interleaved deterministically, with
//!   lock waits in simulated time.
//! * [`shared`]: [`SharedHost`], one host used by many OS threads at once (file media, the wall
//!   clock), lock waits blocking on a condition variable.
//!
//! **Isolation.** Serialisable: every read takes a shared lock and every write an exclusive one,
//! all held until the commit is durable (SS2PL), so the committed transactions are equivalent to
//! running them one at a time in commit order. Reads see the transaction's own writes.
//!
//! **Durability and crashes.** A commit on the KAML path is one [`kvssd_device::Device::batch`]:
//! acknowledged only once the device has made it durable (under its write-ahead log's sync
//! policy, or its power-loss protection), all of it or none. The cache holds only committed
//! data, so a crash loses nothing acknowledged and exposes nothing uncommitted; after recovery a
//! new host starts with a cold cache. On the conventional path a commit is acknowledged once its
//! record in the central write-ahead log is durable; [`Host::open`] over a device that already
//! holds the path's namespace replays the committed records its pages lack. docs/host.md has
//! the whole contract and the log's format.

mod cache;
mod conventional;
mod error;
mod host;
mod locks;
pub mod shared;
pub mod sim;
mod types;

pub use conventional::{ConventionalConfig, CONVENTIONAL_NAMESPACE};
pub use error::{HostError, Result};
pub use host::Host;
pub use locks::{record_number, LockMode, LockName};
pub use shared::{RunOutcome, SharedHost};
pub use types::{Access, CommitPath, HostConfig, HostStats, TableId, TxnId, TxnState};

/// Transaction control blocks allocated at once, by default.
pub const TXNS_MAX: usize = 4096;
