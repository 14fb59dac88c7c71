//! The engine layer of kvssd: the indexes that map keys to value records on flash.
//!
//! * [`contract`]: the [`Engine`] trait, what the device asks of a namespace's index whatever its
//!   kind, with what each operation promises and what an error leaves unchanged.
//! * [`lsm`]: the LSM-tree of PinK (ATC'20 §4) and its LightStore baseline, one engine configured by a
//!   [`Preset`]: level pinning, 4-byte prefixes and range pointers (fractional cascading) for `pink`;
//!   per-segment Bloom filters sized by Monkey's allocation for `lightstore`; GC that rewrites meta
//!   segments for `lightstore` and `pink-gcrewrite`.
//! * [`block`]: a conventional SSD's page-mapped FTL (KAML's baseline firmware): keys are logical
//!   block numbers, values logical blocks, writes smaller than a block read-modify-write it.
//! * [`hash`]: PinK's hash baseline (§2.3) and KAML's in-DRAM index (§IV-C), two presets of one
//!   engine sharing the configuration, errors, CPU cost model and the space layer below.
//!
//! Every operation takes the simulated time at which it is issued and returns the time at which it
//! completes; flash I/O and controller computation ([`CpuCosts`]) both occupy simulated time.
//!
//! ```
//! use kvssd_engine::{EngineConfig, LsmEngine, Preset};
//! use kvssd_flash::{Flash, Profile};
//!
//! let profile = Profile::test_min();
//! let flash = Flash::new(profile.geometry, Some(profile.timing)).unwrap();
//! let mut engine = LsmEngine::open(flash, EngineConfig::test_min(Preset::Pink)).unwrap();
//! let done = engine.put(0, b"key", b"value").unwrap();
//! let (value, _) = engine.get(done, b"key").unwrap();
//! assert_eq!(value.as_deref(), Some(&b"value"[..]));
//! ```

mod background;
pub mod block;
mod config;
pub mod contract;
mod cpu;
#[cfg(test)]
mod decoder_properties;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod hash;
pub mod lsm;
mod stats;

pub use background::GC_JOBS_IN_FLIGHT_MAX;
pub use config::{
    EngineConfig, Features, GcPolicy, Preset, KEY_BYTES_MAX, MERGE_ACCELERATOR_NS_PER_KIB,
    VALUE_BYTES_MAX,
};
pub use contract::{
    check_record_key, Capabilities, Engine, EngineReport, LevelsView, Located, LocatedPairs,
};
pub use cpu::{CpuCosts, CpuCounts};
pub use error::EngineError;
pub use lsm::{
    DetachedFlush, IterStats, LsmEngine, LsmTree, Pairs, Plan, SnapshotEntry, SnapshotIter,
    TreeSnapshot,
};
pub use stats::{BloomLevelStats, DramUsage, EngineStats, LevelStats, ReadHistogram};
