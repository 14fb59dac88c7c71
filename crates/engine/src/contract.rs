//! The engine contract: what the device asks of the index of one namespace, whatever its kind.
//!
//! The device holds each namespace's index as a `Box<dyn Engine>` and knows nothing else about
//! it. The LSM-tree ([`crate::LsmTree`]) and the hash index ([`crate::hash::HashIndex`]) implement
//! the contract; another engine (a page-mapped FTL whose keys are logical block numbers, say)
//! implements it too and declares in its [`Capabilities`] what it cannot serve.
//!
//! Every operation takes the [`Space`] the namespace writes to (the device shares one among all
//! namespaces) and the simulated time at which it is issued, and returns when it completes.
//!
//! # What an `Err` leaves unchanged
//! Errors fall in two kinds, and every method says which it can return:
//!
//! * **Refusals** — [`EngineError::KeyEmpty`], [`EngineError::KeyTooLong`],
//!   [`EngineError::ValueTooLarge`], [`EngineError::CapacityExceeded`] and
//!   [`EngineError::Unsupported`]: the operation did not happen and no key's value changed. The
//!   engine may have done background work on the way (GC relocating live data, a flush of pairs
//!   staged earlier), which moves values on flash but never changes what any key reads. The device
//!   relies on this to retry a refused store after device-wide GC, and to refuse a whole batch.
//! * **Failures** — everything else (the flash failed or lost power, a page read back does not
//!   decode): the operation may be half done in DRAM. The device does not go on from such a state;
//!   its durability layer (log replay or the power-loss dump) restores a consistent one at the
//!   next open.

use std::sync::Arc;

use kvssd_flash::SimTime;
use kvssd_space::{RecordPointer, Space};

use crate::lsm::inspect::SegmentView;
use crate::lsm::DetachedFlush;
use crate::{DramUsage, EngineError, Pairs, TreeSnapshot};

/// The result type of the contract.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// What an engine serves beyond the point operations every engine serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Keeps its keys in order: [`Engine::snapshot`] works, so the device opens iterators on it.
    pub ordered: bool,
}

/// What an engine reports about itself: the device lists it per namespace and the benchmarks
/// print it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineReport {
    /// Pairs and deletes held in DRAM, not yet on flash (L0's entries, the write buffer's).
    pub staged_entries: u64,
    /// Levels below L0 (0 for an engine without levels).
    pub levels: usize,
    /// Flushes of the staged pairs to flash.
    pub flushes: u64,
    /// Merges of a level into the next (0 for an engine without levels).
    pub compactions: u64,
    /// GC victims collected (index and data blocks).
    pub gc_victims: u64,
    /// Controller computation charged so far, in simulated nanoseconds.
    pub cpu_ns: u64,
    /// DRAM in the LSM's parts (an engine maps its own parts onto them: staged pairs to `l0`, its
    /// index structures to `level_lists`).
    pub dram: DramUsage,
    /// DRAM by the engine's own parts, named as it names them.
    pub dram_parts: Vec<(&'static str, u64)>,
    /// The engine's own counters (GC records moved, cache hits, ...), by name.
    pub counters: Vec<(&'static str, u64)>,
    /// One line describing the index's shape (levels and pinning, table and cache).
    pub shape: String,
}

/// A scan's pairs with their values located, not read ([`Engine::scan_locate`]).
pub type LocatedPairs = Vec<(Vec<u8>, Located)>;

/// Where [`Engine::locate`] found the newest version of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// Its value (held in DRAM), or `None` if the key has none.
    Value(Option<Vec<u8>>),
    /// A record on flash: read it and check that it carries the key (as [`Engine::get`] does).
    Record {
        /// Where the record starts.
        pointer: RecordPointer,
        /// The length of its value as the index filed it, so that a reader can fetch the record's
        /// bytes alone (the record's own header decides what is read).
        value_len: u32,
    },
}

/// The pair assertion every value read through an index makes: the record carries the key the
/// index filed it under (an index entry pointing at another key's record is a malformed index).
pub fn check_record_key(key: &[u8], record_key: &[u8], pointer: RecordPointer) -> Result<()> {
    if record_key != key {
        return Err(EngineError::MalformedSegment {
            page: pointer.page().0,
            what: "value record carries another key than its index entry",
        });
    }
    Ok(())
}

/// A read-only view of an index of sorted levels, for the device's consistency check.
#[derive(Debug, Clone, Default)]
pub struct LevelsView {
    /// L0's keys, each with whether it holds a value (`false`: a delete).
    pub l0: Vec<(Vec<u8>, bool)>,
    /// Each level's list, L1 first.
    pub levels: Vec<Vec<SegmentView>>,
}

/// The index of one namespace, as the device uses it.
///
/// Thread safety: the device calls one method at a time, holding its lock; an engine need only be
/// `Send`.
pub trait Engine: Send {
    /// The name of the engine's preset, for messages.
    fn preset_name(&self) -> &'static str;

    /// What it serves beyond point operations.
    fn capabilities(&self) -> Capabilities;

    /// The newest value of `key`, or `None` if it has none (never stored, or deleted). Returns
    /// when the value is at the controller. Changes no key's value; errors: refusals for a bad
    /// key, failures for flash that cannot be read.
    fn get(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, SimTime)>;

    /// Where the newest version of `key` is, searching the index as [`Engine::get`] does but
    /// leaving the value's record unread, so that a device on file media can read it without
    /// its lock. The default reads the value ([`Located::Value`]). Same guarantees as `get`.
    fn locate(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<(Located, SimTime)> {
        let (value, done) = self.get(space, at, key)?;
        Ok((Located::Value(value), done))
    }

    /// Warns the host's memory that GETs of `keys` are about to be made, so that what they will
    /// read first is fetched together rather than one miss after another (a simulator's speed
    /// on a card of many gigabytes). Changes nothing the simulation sees: no time, counter,
    /// cache or state. Returns whether the engine has a use for such warnings, so that a caller
    /// can stop making them for one that has none. By default it does nothing and has none.
    fn prefetch_gets(&self, space: &Space, keys: &[&[u8]]) -> bool {
        let _ = (space, keys);
        false
    }

    /// Whether `key` has a value, without reading it. Same guarantees as [`Engine::get`].
    fn contains(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<(bool, SimTime)>;

    /// Stores `value` under `key`, replacing any older version. A refusal (bad key, value too
    /// large, [`EngineError::CapacityExceeded`] when flash or the index's DRAM cannot take it even
    /// after GC) stores nothing and changes no key's value.
    fn put(&mut self, space: &mut Space, at: SimTime, key: &[u8], value: &[u8]) -> Result<SimTime>;

    /// Deletes `key` (deleting an absent key is not an error). Deletes may use the delete reserve,
    /// so they proceed where puts are refused. A refusal changes no key's value.
    fn delete(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime>;

    /// Whether a put of `key` with a value of `value_len` bytes would be admitted, with
    /// `staged_bytes` of flash already promised to earlier stores of the same batch. Changes
    /// nothing, whatever it returns; errors are refusals.
    fn admit_put(
        &self,
        space: &Space,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()>;

    /// DRAM a staged pair (`Some` value) or delete (`None`) takes: what [`Engine::prepare_stage`]
    /// is given per operation.
    fn staged_bytes(&self, key: &[u8], value: Option<&[u8]>) -> u64;

    /// Makes room in DRAM for a batch that will stage `bytes` with [`Engine::stage`], flushing
    /// what is staged first if they would not fit. Changes no key's value, `Ok` or `Err`; a
    /// refusal ([`EngineError::CapacityExceeded`]) leaves the staged pairs where they were.
    fn prepare_stage(&mut self, space: &mut Space, at: SimTime, bytes: u64) -> Result<SimTime>;

    /// Stages a pair (`Some` value) or a delete (`None`) in DRAM. Cannot fail, which is what makes
    /// a validated batch all-or-nothing; the key must have passed [`Engine::admit_put`] (stores)
    /// or the device's key check (deletes). [`Engine::settle`] follows.
    fn stage(&mut self, key: &[u8], value: Option<&[u8]>);

    /// After staging: flushes what grew past its size and runs background GC. A flush that cannot
    /// get its space leaves the pairs staged (the next write retries), so the staged operations
    /// stay applied whatever happens; only failures are returned.
    fn settle(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime>;

    /// Bytes of pairs staged in DRAM (L0, the write buffer): counted against quotas.
    fn staged_dram_bytes(&self) -> u64;

    /// Writes every staged pair to flash (an L0 flush, a write-buffer application). Changes no
    /// key's value; a refusal ([`EngineError::CapacityExceeded`]) leaves the pairs staged.
    fn flush(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime>;

    /// Before a checkpoint that trims the log: writes the staged pairs to flash if the
    /// checkpoint would otherwise carry enough of them to cost about what their flush costs, so
    /// that the checkpoint leaves them out. Returns the bytes of staged pairs written (0: none)
    /// and when it finished. Changes no key's value; a refusal for space leaves the pairs staged
    /// and is not an error. By default nothing is written.
    fn flush_before_checkpoint(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<(u64, SimTime)> {
        let _ = space;
        Ok((0, at))
    }

    /// Whether the namespace takes free blocks only from its logs' dies (see
    /// `kvssd_space::Space::set_namespace_confined`); the device tells the space layer when it
    /// creates or reopens the namespace. `false` by default.
    fn confined_to_logs(&self) -> bool {
        false
    }

    /// The block this engine's GC policy would collect next among its namespace's blocks, if any.
    /// The device compares the namespaces' candidates and hands the one it chose to
    /// [`Engine::collect_victim`]. Changes nothing.
    fn gc_candidate(&self, space: &Space) -> Option<u64>;

    /// Collects `block` (one of this namespace's): relocates what is live, fixes the index to
    /// point at the new places, erases the block. `Ok(None)`: it could not be relocated now and
    /// was left as it was. Changes no key's value.
    fn collect_victim(
        &mut self,
        space: &mut Space,
        at: SimTime,
        block: u64,
    ) -> Result<Option<SimTime>>;

    /// Up to `count` pairs with keys `>= start`, in key order, from one consistent view (PinK's
    /// range query). Changes no key's value. [`EngineError::Unsupported`] for an engine that keeps
    /// no key order (the default).
    fn scan(
        &mut self,
        space: &mut Space,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(Pairs, SimTime)> {
        let _ = (space, at, start, count);
        Err(EngineError::Unsupported {
            operation: "a scan",
            engine: self.preset_name(),
            why: "its keys are in no order",
        })
    }

    /// The pairs [`Engine::scan`] returns, leaving values on flash unread (as [`Engine::locate`]
    /// does for one key), so that a device on file media can read them without its lock. The
    /// default scans ([`Located::Value`] for every pair).
    fn scan_locate(
        &mut self,
        space: &mut Space,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(LocatedPairs, SimTime)> {
        let (pairs, done) = self.scan(space, at, start, count)?;
        let located = pairs
            .into_iter()
            .map(|(key, value)| (key, Located::Value(Some(value))))
            .collect();
        Ok((located, done))
    }

    /// A snapshot of the index as it is now, for iterators: copies nothing, shares what does not
    /// change. [`EngineError::Unsupported`] for an engine that keeps no key order (the default).
    fn snapshot(&mut self) -> Result<Arc<TreeSnapshot>> {
        Err(EngineError::Unsupported {
            operation: "a snapshot",
            engine: self.preset_name(),
            why: "its keys are in no order",
        })
    }

    /// DRAM `snapshot` holds beyond what the live index shares with it (0 by default).
    fn snapshot_dram_bytes(&self, snapshot: &TreeSnapshot) -> u64 {
        let _ = snapshot;
        0
    }

    /// The index's state in DRAM as bytes, for a checkpoint or a power-loss dump; the preset's
    /// `restore` takes them back. Changes nothing.
    fn durable_state(&self) -> Vec<u8>;

    /// After a restore: reports every page and record the index references to the space layer's
    /// valid-byte accounting, reading what it must. Only failures are returned (the index cannot
    /// be read back); the space's accounting is then incomplete and the open fails.
    fn account_valid(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime>;

    /// Its figures now. Changes nothing.
    fn report(&self, space: &Space) -> EngineReport;

    /// The DRAM budget it was given, in bytes.
    fn dram_budget_bytes(&self) -> u64;

    /// Bytes of its DRAM budget it never plans to use (0 by default: an engine that plans its
    /// whole budget, or cannot tell). A device may lend them to a cache of its index pages.
    fn spare_dram_bytes(&self) -> u64 {
        0
    }

    /// Its levels for the consistency check, if it keeps sorted levels (`None` by default:
    /// the check skips the namespace).
    fn levels_view(&self) -> Option<LevelsView> {
        None
    }

    /// Whether the staged pairs fill enough of their buffer for a flush prepared away from the
    /// caller's lock ([`Engine::detach_flush`]) and none is out. Only a caller that runs such
    /// flushes asks. By default false.
    fn flush_detachable(&self) -> bool {
        false
    }

    /// The staged pairs as they are, for a flush whose costly part runs away from the caller's
    /// lock: [`DetachedFlush::prepare`] without it, then [`Engine::attach_flush`] under it. Only
    /// if they fill enough of their buffer (a smaller share `for_checkpoint`, which then leaves
    /// them out as [`Engine::flush_before_checkpoint`] would) and none is out. Changes no key's
    /// value; the pairs stay staged and readable until the flush is attached. By default `None`
    /// (the LSM engine prepares them).
    fn detach_flush(&mut self, space: &Space, for_checkpoint: bool) -> Option<DetachedFlush> {
        let _ = (space, for_checkpoint);
        None
    }

    /// Writes what a prepared flush packed for the pairs still staged as they were when it was
    /// detached, and goes on as a flush does (merges, background GC); pairs written since stay
    /// staged. Changes no key's value. A flush made meanwhile, or a refusal for space, leaves
    /// the pairs staged and is not an error; failures are returned as a flush's are.
    fn attach_flush(
        &mut self,
        space: &mut Space,
        at: SimTime,
        flush: DetachedFlush,
    ) -> Result<SimTime> {
        let _ = (space, flush);
        Ok(at)
    }

    /// DRAM structures it has let go of and left for the caller to drop, if any (`None` by
    /// default): a caller that holds a lock while it runs commands drops them after releasing
    /// it. The LSM engine leaves the write buffer of its last flush here: freeing the pairs of
    /// a 32 MiB L0 takes milliseconds. Nothing reads them; an engine drops what it left here
    /// when it leaves more.
    fn take_released(&mut self) -> Option<Box<dyn Send>> {
        None
    }
}
