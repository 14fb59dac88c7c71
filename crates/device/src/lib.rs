//! The device layer of kvssd: what applications and benchmarks talk to.
//!
//! A [`Device`] holds namespaces — each indexed by its own engine preset, all sharing one flash
//! array, free-block pool and timing model — and serves the command set of KAML (Table I) and
//! IterKVSSD:
//!
//! * namespaces: [`Device::create_namespace`] (preset, logs, optional quota, optional name),
//!   [`Device::delete_namespace`], [`Device::list_namespaces`], [`Device::namespace_by_name`];
//! * [`Device::store`] (upsert, update-only, insert-only), [`Device::retrieve`] (whole value or a
//!   byte range, with the full length), [`Device::delete`], [`Device::exist`];
//! * [`Device::scan`]: up to N pairs from a start key, in key order (PinK's range query);
//! * [`Device::batch`]: stores and deletes across namespaces, all or none;
//! * iterators over snapshots: [`Device::iter_open`] (start key or prefix, keys-only or with
//!   values, prefetch degree D), [`Device::iter_seek`], [`Device::iter_next`] (a batch of entries
//!   up to a byte budget), [`Device::iter_close`].
//!
//! Every command takes the simulated time at which it is issued and returns the time at which it
//! completes. Every violation is a typed [`DeviceError`] with a one-line message, and a refused
//! command changes nothing. Threading: see [`Device`]. Design: `docs/design.md` §17.
//!
//! * [`durability`]: the layer under the commands that makes acknowledged writes survive power
//!   loss — the on-flash formats (log framing, superblock, log records, checkpoints, the
//!   power-loss dump) and the code that reads and writes them; the device decides when.
//!
//! ```
//! use kvssd_device::{
//!     BatchOp, Device, DeviceConfig, IterOptions, IterStart, NamespaceSpec, StoreMode,
//! };
//! use kvssd_engine::Preset;
//! use kvssd_flash::{Flash, Profile};
//!
//! let profile = Profile::test_min();
//! let flash = Flash::new(profile.geometry, Some(profile.timing)).unwrap();
//! let device = Device::open(flash, DeviceConfig::test_min()).unwrap();
//! let users = device.create_namespace(NamespaceSpec::new(Preset::Pink)).unwrap();
//! let logs = device.create_namespace(NamespaceSpec::new(Preset::Lightstore)).unwrap();
//!
//! let t = device.store(0, users, b"alice", b"admin", StoreMode::InsertOnly).unwrap();
//! let t = device
//!     .batch(t, &[
//!         BatchOp::Store { namespace: users, key: b"bob".to_vec(), value: b"user".to_vec(),
//!                          mode: StoreMode::Upsert },
//!         BatchOp::Store { namespace: logs, key: b"login:bob".to_vec(), value: vec![1],
//!                          mode: StoreMode::Upsert },
//!     ])
//!     .unwrap();
//!
//! // An iterator sees the namespace as it was when it opened.
//! let (iterator, t) = device.iter_open(t, users, IterOptions::new(IterStart::Key(vec![]), 4)).unwrap();
//! let t = device.delete(t, users, b"alice").unwrap();
//! let (batch, _) = device.iter_next(t, iterator, 4096).unwrap();
//! let keys: Vec<&[u8]> = batch.entries.iter().map(|entry| entry.key.as_slice()).collect();
//! assert_eq!(keys, [&b"alice"[..], &b"bob"[..]]);
//! assert!(batch.end);
//! device.iter_close(iterator).unwrap();
//! ```

pub mod check;
mod config;
pub mod crash;
#[cfg(test)]
mod decoder_properties;
mod device;
pub mod durability;
mod error;
mod file_config;
#[doc(hidden)]
pub mod fuzzing;
mod presets;
mod types;

pub use device::{supports_iterators, Device, DeviceConfig, Durability};
pub use durability::{DurabilityCounts, RecoveryReport, SyncPolicy};
pub use error::{DeviceError, Result};
pub use file_config::{
    FILE_DRAM_BUDGET_BYTES_MAX, FILE_DRAM_DEFAULT_BYTES_MAX, FILE_DRAM_DEFAULT_CAPACITY_DIVISOR,
    FILE_L0_BUDGET_DIVISOR, FILE_L0_BYTES_MAX,
};
pub use types::{
    BatchOp, ByteRange, DeviceStats, IterEntry, IterOptions, IterStart, IteratorId, IteratorInfo,
    NamespaceId, NamespaceInfo, NamespaceSpec, NextBatch, Pairs, PresetKind, Retrieved, StoreMode,
};

/// Longest key, in bytes (keys are 1 to 255 bytes).
pub const KEY_BYTES_MAX: usize = 255;
/// Longest value, in bytes (a device on a tiny geometry may take less:
/// [`Device::value_bytes_max`]).
pub const VALUE_BYTES_MAX: usize = 2 << 20;
/// Iterators open at once, by default ([`DeviceConfig::iterators_open_max`]).
pub const ITERATORS_OPEN_MAX: usize = 16;
/// Namespaces at once, by default ([`DeviceConfig::namespaces_max`]).
pub const NAMESPACES_MAX: usize = 64;
/// Longest namespace name, in bytes (names are 1 to 255 bytes without a NUL byte).
pub const NAMESPACE_NAME_BYTES_MAX: usize = 255;
/// Operations in one batch, by default ([`DeviceConfig::batch_operations_max`]).
pub const BATCH_OPERATIONS_MAX: usize = 1024;
/// Highest value-prefetch degree D an iterator may ask for.
pub const PREFETCH_DEGREE_MAX: usize = 64;
/// Most pairs one scan returns (YCSB-E's scans take up to 100).
pub const SCAN_PAIRS_MAX: usize = 1024;

// The device's limits are the engine's: a key or value the device accepts, every engine takes.
const _: () = assert!(KEY_BYTES_MAX == kvssd_engine::KEY_BYTES_MAX);
const _: () = assert!(VALUE_BYTES_MAX == kvssd_engine::VALUE_BYTES_MAX);
