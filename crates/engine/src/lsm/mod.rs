//! The LSM-tree engine of PinK (ATC'20 §4) and its LightStore baseline.
//!
//! * **L0** is a sorted in-DRAM buffer of whole pairs. A **flush** appends its values to data
//!   segments and merges its keys, with value pointers, into L1's meta segments.
//! * **L1..Lh-1** are sorted runs of meta segments (one flash page each, see `segment.rs`), each
//!   level `T` times larger than the one above (leveling). Every level has a **level list** in DRAM
//!   (see `level.rs`). The top `k` levels are **pinned**: their segments live in DRAM, so their
//!   merges and lookups do no flash I/O.
//! * A **GET** searches L0, then each level's list for the one candidate segment, reading it only if
//!   its level is not pinned (and, in `lightstore`, only if its Bloom filter says so). With `pink`
//!   a GET reads at most `h - k - 1` meta pages, `h` counting L0 as a level.
//! * **GC** (see `gc.rs`) moves live meta pages and fixes the level lists; for data blocks it asks the
//!   index whether each record is still the newest version of its key, then re-inserts live pairs
//!   into L0 (`pink`) or rewrites them and their meta segments (`lightstore`).
//!
//! Thread safety: single-threaded; every operation takes `&mut self`.
//!
//! Definitions used in code and docs: *h* = number of levels counting L0 (`levels.len() + 1`);
//! *k* = number of pinned levels, always L1..Lk; the *last level* is the deepest existing level.

pub(crate) mod bloom;
mod compaction;
mod contract;
mod detached;
mod durable;
mod gc;
pub mod inspect;
pub(crate) mod level;
mod merge;
mod read;
mod reserve;
pub(crate) mod segment;
mod stats;
mod write;

use std::collections::BTreeMap;
use std::sync::Arc;

use kvssd_flash::SimTime;

mod engine;
mod snapshot;
pub use detached::DetachedFlush;
pub use engine::LsmEngine;
use kvssd_space::Space;
pub use snapshot::{IterStats, SnapshotEntry, SnapshotIter, TreeSnapshot};

use crate::background::{in_background, Flushing};
use crate::config::{EngineConfig, Features, GcPolicy};
use crate::cpu::CpuCounts;
use crate::stats::ReadHistogram;
use crate::EngineError;
use level::{Level, SearchMode};
use segment::{Entry, ENTRY_OVERHEAD_BYTES, HEADER_BYTES};
use stats::LevelDram;

/// Merges queued for the background thread before a writer whose flush queues another waits:
/// the one running and one behind it.
const COMPACTIONS_IN_FLIGHT_MAX: usize = 2;

/// DRAM an L0 pair takes besides its key and value (skiplist node, lengths).
const L0_ENTRY_OVERHEAD_BYTES: u64 = 16;

/// Pairs of `key_bytes` keys and `value_bytes` values an L0 of `l0_bytes` holds before it is
/// flushed (at least one).
pub fn l0_pairs(l0_bytes: u64, key_bytes: u64, value_bytes: u64) -> u64 {
    (l0_bytes / (key_bytes + value_bytes + L0_ENTRY_OVERHEAD_BYTES)).max(1)
}

/// Pairs a scan returns, in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// A scan's pick: the key and its value from L0, or the pointer to read it through and the value's
/// length.
type Picked = (Vec<u8>, std::result::Result<Vec<u8>, (u64, u32)>);

/// The result type of the engine.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// L0: the write buffer's pairs by key. Values are shared, and keys of up to 32 bytes are kept in
/// the map's nodes ([`L0Key`]), so that a snapshot's copy of L0 (`Arc::make_mut` on the first
/// write after it) copies the map's nodes, keys and pointers, not the values' bytes: a file
/// image's L0 holds up to 32 MiB of pairs.
type L0Map = BTreeMap<L0Key, L0Value>;

/// A key of L0's map. Up to 32 bytes (PinK's keys) it is kept in the map's nodes, so a search
/// compares keys without following a pointer to each: with keys behind `Arc`s, inserting into
/// an L0 of 31,300 pairs of 1 KiB took about 600 ns and a lookup 430, against 330 and 230 (a
/// scratch program, allocating a value between keys as the device does). A clone is one copy
/// (a snapshot's copy-on-write of L0 clones every key; `SmallVec`'s own clone copies a byte at
/// a time).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct L0Key(segment::Key);

impl L0Key {
    fn new(key: &[u8]) -> L0Key {
        L0Key(segment::Key::from_slice(key))
    }
}

impl Clone for L0Key {
    fn clone(&self) -> L0Key {
        L0Key::new(&self.0)
    }
}

impl std::borrow::Borrow<[u8]> for L0Key {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::Deref for L0Key {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

#[derive(Debug, Clone)]
struct L0Value {
    value: Option<Arc<[u8]>>,
    from_gc: bool,
}

/// Where a lookup found the newest version of a key.
enum Found {
    Absent,
    L0(Option<Vec<u8>>),
    Level {
        level: usize,
        segment: usize,
        entry: Entry,
    },
}

/// What a step about to run needs from the free pool.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Only GC headroom (background collection).
    Nothing,
    /// Flush of L0 into L1.
    Flush,
    /// Flush of L0 into L1 whose values were packed onto this many data pages beforehand
    /// (`detached`).
    FlushPacked(u64),
    /// Merge of level `i` (0-based) into `i + 1`.
    Merge(usize),
    /// Writing a pinned level's segments to flash.
    Unpin(usize),
}

/// Who is asking for space: puts may not use the delete reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    Put,
    Reserve,
}

#[derive(Debug, Clone, Copy, Default)]
struct Activity {
    flushes: u64,
    /// Flushes whose values were packed away from the caller's lock (`detached`).
    flushes_detached: u64,
    compactions: u64,
    last_level_compactions: u64,
    compactions_deferred: u64,
    levels_unpinned: u64,
    gc_meta_victims: u64,
    gc_data_victims: u64,
    gc_meta_pages_moved: u64,
    gc_records_reinserted: u64,
    gc_records_rewritten: u64,
    gc_segments_rewritten: u64,
}

/// What the engine planned at open for a full device at the expected key and value sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Pairs a full device holds at the expected sizes.
    pub entries_max: u64,
    /// Entries per level below L0 (L1 first) on a full device.
    pub level_entries: Vec<u64>,
    /// DRAM the level lists of a full device take.
    pub level_list_bytes: u64,
    /// DRAM kept for L0 (its size, one largest value, and for `pink` one GC victim re-inserted).
    pub l0_reservation_bytes: u64,
    /// k: levels pinned (L1..Lk) while DRAM allows.
    pub pinned_levels: usize,
    /// h: levels of a full device, L0 included.
    pub height: usize,
    /// h - k - 1: meta pages a GET reads at most on a full device (without Bloom filters).
    pub worst_case_meta_reads: usize,
    /// Monkey's bits per key per level (`lightstore`).
    pub bloom_bits_per_key: Vec<f64>,
}

/// The LSM-tree index of one namespace, over a space layer it shares with other namespaces: every
/// operation takes the [`Space`] it writes to. [`LsmEngine`] is a tree with a space of its own.
pub struct LsmTree {
    config: EngineConfig,
    features: Features,
    page_bytes: usize,
    /// Shared with snapshots; copied on write while one holds it.
    l0: Arc<L0Map>,
    /// The previous L0 while the background thread flushes it.
    flushing: Flushing<Arc<L0Map>>,
    /// The last compaction job the background thread was given.
    compacting: Flushing<()>,
    /// GC jobs in flight (see `crate::background::GC_JOBS_IN_FLIGHT_MAX`).
    collecting: Flushing<()>,
    l0_bytes: u64,
    /// Bytes of L0's keys, kept as L0 changes so admission checks need not walk L0 per put.
    l0_key_bytes: u64,
    /// Set while GC flushes L0 to make room for re-inserted records, so it does not recurse.
    flushing_for_gc: bool,
    /// Flushes of L0 so far: a flush prepared away from the lock (`detached`) is placed only if
    /// none came between.
    l0_epoch: u64,
    /// The epoch of the flush prepared away from the lock and not yet placed, if any.
    detached_epoch: Option<u64>,
    levels: Vec<Level>,
    l1_entries: u64,
    levels_max: usize,
    /// Levels L1..Lk with k = this are pinned when they exist (never grows back after an unpin).
    pinned_target: usize,
    bloom_bits_per_key: Vec<f64>,
    plan: Plan,
    dram_budget: u64,
    /// DRAM of the budget the plan leaves to nothing (neither L0, level lists, pinned levels at
    /// capacity nor Bloom filters): what a cache beside the index may use without exceeding it.
    spare_dram: u64,
    l0_reservation: u64,
    gc_threshold: u64,
    value_bytes_max: usize,
    key_len_max_seen: usize,
    cpu_pending: CpuCounts,
    cpu_total: CpuCounts,
    cpu_ns: u64,
    activity: Activity,
    gets: ReadHistogram,
    last_get_meta_reads: u32,
    /// Where a GET copies a meta page it cannot search where the media keep it
    /// ([`segment::find_in_view`]): one page, filled again by each copy.
    meta_page: Vec<u8>,
    /// The last snapshot taken, handed out again until the tree changes (snapshots are pooled).
    snapshot_cache: Option<Arc<TreeSnapshot>>,
    /// The L0 of the last flush that ran at once, if the caller has not taken it to drop
    /// (`Engine::take_released`); replaced, and so dropped here, by the next one.
    released: Option<Arc<L0Map>>,
    /// What the last flush prepared away from the lock let go of (the L0 it replaced, the pairs
    /// it took), for the caller to drop likewise.
    released_detached: Vec<Arc<L0Map>>,
    /// Per level: its DRAM (list, pinned segments, Bloom filters) with the fingerprint of the level
    /// it was computed for. Admission checks read the sum on every put, and computing a level's
    /// walks its segments, so only a level that changed (a merge rebuilt it) is walked again.
    dram_level_cache: std::cell::RefCell<Vec<Option<(u64, LevelDram)>>>,
}

impl LsmTree {
    /// Opens an empty tree that writes to `space` under namespace `config.namespace`.
    ///
    /// Refuses a DRAM budget that cannot hold L0 and the level lists of a full device (at the
    /// configured expected key and value sizes) with [`EngineError::DramBudgetTooSmall`].
    pub fn open(space: &Space, config: EngineConfig) -> Result<LsmTree> {
        let geometry = *space.geometry();
        if config.size_factor < 2 {
            return Err(EngineError::Config("size_factor must be at least 2".into()));
        }
        if config.l0_bytes == 0 || config.expected_key_bytes == 0 {
            return Err(EngineError::Config(
                "l0_bytes and expected_key_bytes must be positive".into(),
            ));
        }
        let page_bytes = geometry.page_bytes as usize;
        if page_bytes < HEADER_BYTES + crate::KEY_BYTES_MAX + ENTRY_OVERHEAD_BYTES {
            return Err(EngineError::Config(format!(
                "pages of {page_bytes} bytes cannot hold a meta entry with a 255-byte key"
            )));
        }
        let features = config.features;
        let capacity = geometry.capacity_bytes();
        let dram_budget = if config.dram_budget_bytes == 0 {
            capacity / 1000
        } else {
            config.dram_budget_bytes
        };
        let value_bytes_max = config.value_bytes_max(&geometry);
        let t = u64::from(config.size_factor);

        // Projections for a full device at the expected sizes (docs: "DRAM per level").
        let key = u64::from(config.expected_key_bytes);
        let value = u64::from(config.expected_value_bytes);
        let pair_flash = space.record_footprint(key as usize, value as usize);
        let entries_max = (space.user_capacity_bytes() / pair_flash.max(1)).max(1);
        let per_segment =
            ((page_bytes - HEADER_BYTES) as u64 / (key + ENTRY_OVERHEAD_BYTES as u64)).max(1);
        let l0_entries = l0_pairs(config.l0_bytes, key, value);
        let l1_entries = if config.l1_entries > 0 {
            config.l1_entries
        } else {
            t * l0_entries
        };
        let mut projected = Vec::new();
        let mut capacity_entries = l1_entries;
        loop {
            projected.push(capacity_entries.min(entries_max));
            if capacity_entries >= entries_max {
                break;
            }
            capacity_entries = capacity_entries.saturating_mul(t);
        }
        let levels_max = if config.levels_max > 0 {
            config.levels_max as usize
        } else {
            projected.len() + 1
        };
        // With the levels capped, the last one takes whatever the levels above it do not hold.
        if projected.len() > levels_max {
            projected.truncate(levels_max);
            if let Some(last) = projected.last_mut() {
                *last = entries_max;
            }
        }
        let list_entry_bytes = 8 + key + 4 + 4;
        let list_bytes: u64 = projected
            .iter()
            .map(|&entries| entries.div_ceil(per_segment) * list_entry_bytes)
            .sum();
        let l0_reservation = config.l0_bytes
            + value_bytes_max as u64
            + if features.gc == GcPolicy::Reinsert {
                geometry.block_bytes()
            } else {
                0
            };
        let needed = l0_reservation + list_bytes;
        if needed > dram_budget {
            return Err(EngineError::DramBudgetTooSmall {
                needed,
                budget: dram_budget,
            });
        }
        let mut spare = dram_budget - needed;
        let mut pinned_target = 0;
        if features.pinning {
            let mut level_cap = l1_entries;
            for &entries in &projected {
                // A level is charged its meta segments at capacity, as PinK §4.2 sizes pinning:
                // the cascade leaves no level above the last over capacity, and `enforce_dram`
                // unpins if one ever is.
                let bytes = level_cap.max(entries).div_ceil(per_segment) * page_bytes as u64;
                if bytes > spare {
                    break;
                }
                spare -= bytes;
                pinned_target += 1;
                level_cap = level_cap.saturating_mul(t);
            }
        }
        let spare_dram = if features.bloom_filters { 0 } else { spare };
        let bloom_bits_per_key = if features.bloom_filters {
            bloom::monkey_bits_per_key(&projected, spare as f64 * 8.0)
        } else {
            Vec::new()
        };
        let gc_threshold = if config.gc_threshold_blocks > 0 {
            u64::from(config.gc_threshold_blocks)
        } else {
            u64::from(space.config().gc_reserve_blocks)
                + u64::from(config.delete_reserve_blocks)
                + u64::from(space.config().logs)
        };
        let plan = Plan {
            entries_max,
            level_entries: projected.clone(),
            level_list_bytes: list_bytes,
            l0_reservation_bytes: l0_reservation,
            pinned_levels: pinned_target,
            height: projected.len() + 1,
            worst_case_meta_reads: projected.len().saturating_sub(pinned_target),
            bloom_bits_per_key: bloom_bits_per_key.clone(),
        };
        Ok(LsmTree {
            plan,
            features,
            page_bytes,
            l0: Arc::new(BTreeMap::new()),
            flushing: Flushing::new(config.l0_bytes),
            compacting: Flushing::with_limit(COMPACTIONS_IN_FLIGHT_MAX),
            collecting: Flushing::with_limit(crate::background::GC_JOBS_IN_FLIGHT_MAX),
            l0_bytes: 0,
            l0_key_bytes: 0,
            flushing_for_gc: false,
            l0_epoch: 0,
            detached_epoch: None,
            levels: Vec::new(),
            l1_entries,
            levels_max,
            pinned_target,
            bloom_bits_per_key,
            dram_budget,
            spare_dram,
            l0_reservation,
            gc_threshold,
            value_bytes_max,
            key_len_max_seen: 1,
            cpu_pending: CpuCounts::default(),
            cpu_total: CpuCounts::default(),
            cpu_ns: 0,
            activity: Activity::default(),
            gets: ReadHistogram::default(),
            last_get_meta_reads: 0,
            meta_page: Vec::new(),
            snapshot_cache: None,
            released: None,
            released_detached: Vec::new(),
            dram_level_cache: std::cell::RefCell::new(Vec::new()),
            config,
        })
    }

    /// The plan made at open.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// h: the number of levels, L0 included.
    pub fn height(&self) -> usize {
        self.levels.len() + 1
    }

    /// k: the number of pinned levels (L1..Lk).
    pub fn pinned_levels(&self) -> usize {
        self.levels.iter().take_while(|level| level.pinned).count()
    }

    /// Meta pages the most recent GET read.
    pub fn last_get_meta_reads(&self) -> u32 {
        self.last_get_meta_reads
    }

    /// Longest value this engine takes.
    pub fn value_bytes_max(&self) -> usize {
        self.value_bytes_max
    }

    /// DRAM of the budget its plan leaves unused: the budget less L0's reservation, the level
    /// lists and the pinned levels at capacity (none with Bloom filters, which take the rest).
    pub fn spare_dram_bytes(&self) -> u64 {
        self.spare_dram
    }

    /// The DRAM budget in bytes.
    pub fn dram_budget_bytes(&self) -> u64 {
        self.dram_budget
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.is_empty() {
            return Err(EngineError::KeyEmpty);
        }
        if key.len() > crate::KEY_BYTES_MAX {
            return Err(EngineError::KeyTooLong { len: key.len() });
        }
        Ok(())
    }

    /// Charges the counted CPU work to the controller; returns when it completes.
    fn charge(&mut self, space: &mut Space, at: SimTime) -> SimTime {
        let ns = self.cpu_pending.cost_ns(&self.config.cpu);
        self.cpu_total.add(&self.cpu_pending);
        self.cpu_pending = CpuCounts::default();
        self.cpu_ns += ns;
        space.compute(at, ns)
    }

    fn search_mode(&self) -> SearchMode {
        SearchMode {
            prefixes: self.features.prefixes,
        }
    }

    fn level_capacity(&self, level: usize) -> u64 {
        let t = u64::from(self.config.size_factor);
        let mut capacity = self.l1_entries;
        for _ in 0..level {
            capacity = capacity.saturating_mul(t);
        }
        capacity
    }

    /// Counts an L0 (skiplist) search: about log2(n) full comparisons.
    fn count_l0_search(&mut self, key: &[u8]) {
        let steps = u64::from(usize::BITS - self.l0.len().leading_zeros());
        self.cpu_pending.key_comparisons += steps;
        self.cpu_pending.bytes_compared += steps * key.len().min(8) as u64;
    }

    /// Collects one GC victim of this namespace chosen by the device (relocating what is live,
    /// then erasing it).
    pub fn collect_victim(
        &mut self,
        space: &mut Space,
        at: SimTime,
        victim: u64,
    ) -> Result<SimTime> {
        self.snapshot_cache = None;
        self.collect(space, at, victim)
    }

    /// The block this tree's GC policy would collect next among its own, if any (the device
    /// compares namespaces' candidates and hands the chosen one to [`LsmTree::collect_victim`]).
    pub fn gc_candidate(&self, space: &Space) -> Option<u64> {
        self.pick_victim(space)
    }

    /// The namespace id this tree writes into its records.
    pub fn namespace(&self) -> u32 {
        self.config.namespace
    }

    /// Bytes of pairs in L0.
    pub fn l0_bytes(&self) -> u64 {
        self.l0_bytes
    }
}

/// A `pink` tree on `test_min` flash without timing, and its space: the unit tests' tree.
#[cfg(test)]
pub(crate) fn test_tree() -> (Space, LsmTree) {
    let profile = kvssd_flash::Profile::test_min();
    let flash = kvssd_flash::Flash::new(profile.geometry, None).expect("flash");
    let config = EngineConfig::test_min(crate::Preset::Pink);
    let space = Space::open(flash, config.space.clone()).expect("space");
    let tree = LsmTree::open(&space, config).expect("tree");
    (space, tree)
}
