//! The LSM-tree engine of PinK (ATC'20 §4) and its LightStore baseline.
//!
//! * **L0** is a sorted in-DRAM buffer of whole pairs. A **flush** appends its values to data
//!   segments and merges its keys, with value pointers, into L1's meta segments.
//! * **L1..Lh-1** are sorted runs of meta segments (one flash page each, see [`segment`]), each
//!   level `T` times larger than the one above (leveling). Every level has a **level list** in DRAM
//!   (see [`level`]). The top `k` levels are **pinned**: their segments live in DRAM, so their
//!   merges and lookups do no flash I/O.
//! * A **GET** searches L0, then each level's list for the one candidate segment, reading it only if
//!   its level is not pinned (and, in `lightstore`, only if its Bloom filter says so). With `pink`
//!   a GET reads at most `h - k - 1` meta pages, `h` counting L0 as a level.
//! * **GC** (see [`gc`]) moves live meta pages and fixes the level lists; for data blocks it asks the
//!   index whether each record is still the newest version of its key, then re-inserts live pairs
//!   into L0 (`pink`) or rewrites them and their meta segments (`lightstore`).
//!
//! Thread safety: single-threaded; every operation takes `&mut self`.
//!
//! Definitions used in code and docs: *h* = number of levels counting L0 (`levels.len() + 1`);
//! *k* = number of pinned levels, always L1..Lk; the *last level* is the deepest existing level.

pub(crate) mod bloom;
mod compaction;
mod durable;
mod gc;
pub mod inspect;
pub(crate) mod level;
pub(crate) mod segment;

use std::collections::BTreeMap;
use std::sync::Arc;

use kvssd_flash::{Purpose, SimTime};

mod engine;
mod snapshot;
pub use engine::LsmEngine;
use kvssd_space::{RecordPointer, Space, Stream};
pub use snapshot::{IterStats, SnapshotEntry, SnapshotIter, TreeSnapshot};

use crate::config::{EngineConfig, Features, GcPolicy};
use crate::cpu::CpuCounts;
use crate::stats::{BloomLevelStats, DramUsage, EngineStats, LevelStats, ReadHistogram};
use crate::EngineError;
use level::{Level, SearchMode};
use segment::{Entry, SegmentPage, ENTRY_OVERHEAD_BYTES, HEADER_BYTES, TOMBSTONE};

/// DRAM an L0 pair takes besides its key and value (skiplist node, lengths).
const L0_ENTRY_OVERHEAD_BYTES: u64 = 16;

/// Pairs a scan returns, in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// A scan's pick: the key and its value from L0, or the pointer to read it through.
type Picked = (Vec<u8>, std::result::Result<Vec<u8>, u64>);

/// The result type of the engine.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

#[derive(Debug, Clone)]
struct L0Value {
    value: Option<Vec<u8>>,
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
    l0: Arc<BTreeMap<Vec<u8>, L0Value>>,
    l0_bytes: u64,
    /// Bytes of L0's keys, kept as L0 changes so admission checks need not walk L0 per put.
    l0_key_bytes: u64,
    /// Set while GC flushes L0 to make room for re-inserted records, so it does not recurse.
    flushing_for_gc: bool,
    levels: Vec<Level>,
    l1_entries: u64,
    levels_max: usize,
    /// Levels L1..Lk with k = this are pinned when they exist (never grows back after an unpin).
    pinned_target: usize,
    bloom_bits_per_key: Vec<f64>,
    plan: Plan,
    dram_budget: u64,
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
    /// The last snapshot taken, handed out again until the tree changes (snapshots are pooled).
    snapshot_cache: Option<Arc<TreeSnapshot>>,
    /// DRAM of the level lists, pinned segments and Bloom filters, with the fingerprint of the
    /// levels it was computed for: admission checks read it on every put, and recomputing it walks
    /// every segment.
    dram_fixed_cache: std::cell::Cell<Option<(u64, u64)>>,
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
        let l0_entries = (config.l0_bytes / (key + value + L0_ENTRY_OVERHEAD_BYTES)).max(1);
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
                // A pinned level briefly holds its own capacity plus what the level above brings.
                let worst = level_cap.max(entries) + level_cap / t;
                let bytes = worst.div_ceil(per_segment) * page_bytes as u64;
                if bytes > spare {
                    break;
                }
                spare -= bytes;
                pinned_target += 1;
                level_cap = level_cap.saturating_mul(t);
            }
        }
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
            l0_bytes: 0,
            l0_key_bytes: 0,
            flushing_for_gc: false,
            levels: Vec::new(),
            l1_entries,
            levels_max,
            pinned_target,
            bloom_bits_per_key,
            dram_budget,
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
            snapshot_cache: None,
            dram_fixed_cache: std::cell::Cell::new(None),
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

    /// Finds the newest version of `key`: L0, then each level's one candidate segment. Returns what
    /// it found, when, and how many meta pages it read.
    fn lookup(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        purpose: Purpose,
    ) -> Result<(Found, SimTime, u32)> {
        let mut t = at;
        self.count_l0_search(key);
        if let Some(found) = self.l0.get(key) {
            return Ok((Found::L0(found.value.clone()), t, 0));
        }
        let mode = self.search_mode();
        let mut bounds: Option<(usize, usize)> = None;
        let mut meta_reads = 0;
        for index in 0..self.levels.len() {
            let (low, high) = bounds.unwrap_or((0, usize::MAX));
            let level = &self.levels[index];
            let found = level.find_segment(key, low, high, mode, &mut self.cpu_pending);
            bounds = None;
            if self.features.range_pointers
                && index + 1 < self.levels.len()
                && !level.segments.is_empty()
            {
                bounds = Some(match found {
                    Some(j) => (
                        level.segments[j].range_pointer as usize,
                        level
                            .segments
                            .get(j + 1)
                            .map_or(usize::MAX, |next| next.range_pointer as usize),
                    ),
                    None => (0, level.segments[0].range_pointer as usize),
                });
            }
            let Some(j) = found else {
                continue;
            };
            let mut filter_passed = false;
            if let Some(filter) = &level.segments[j].bloom {
                let predicted = filter.predicted_fpr();
                if !filter.may_contain(key, &mut self.cpu_pending) {
                    let level = &mut self.levels[index];
                    level.bloom_negatives += 1;
                    level.bloom_expected_false_positives += predicted;
                    continue;
                }
                filter_passed = true;
            }
            let segment = &self.levels[index].segments[j];
            let entry = if let Some(entries) = &segment.entries {
                segment::find_in(entries, key, &mut self.cpu_pending)
                    .map(|slot| entries[slot].clone())
            } else {
                let Some(page) = segment.page else {
                    return Err(EngineError::Config(
                        "an unpinned segment has no flash address".into(),
                    ));
                };
                t = self.charge(space, t);
                let (bytes, done) = space.read_page(t, page, purpose)?;
                t = done;
                meta_reads += 1;
                SegmentPage::parse(&bytes, page.0)?.find(key, &mut self.cpu_pending)?
            };
            if let Some(entry) = entry {
                return Ok((
                    Found::Level {
                        level: index,
                        segment: j,
                        entry,
                    },
                    t,
                    meta_reads,
                ));
            }
            if filter_passed {
                let predicted = self.levels[index].segments[j]
                    .bloom
                    .as_ref()
                    .map_or(0.0, |filter| filter.predicted_fpr());
                let level = &mut self.levels[index];
                level.bloom_negatives += 1;
                level.bloom_false_positives += 1;
                level.bloom_expected_false_positives += predicted;
            }
        }
        Ok((Found::Absent, t, meta_reads))
    }

    /// Reads the value of the newest version of `key`, or `None` if it has none (never stored or
    /// deleted). Returns when the value is at the controller.
    pub fn get(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        self.check_key(key)?;
        let (found, mut t, meta_reads) = self.lookup(space, at, key, Purpose::Index)?;
        self.last_get_meta_reads = meta_reads;
        self.gets.record(meta_reads);
        let value = match found {
            Found::Absent => None,
            Found::L0(value) => value,
            Found::Level { entry, .. } => {
                if entry.is_tombstone() {
                    None
                } else {
                    t = self.charge(space, t);
                    let (record, done) = space.read_record(
                        t,
                        RecordPointer::from_raw(entry.pointer),
                        Purpose::UserData,
                    )?;
                    t = done;
                    // Pair assertion: the record carries the key the index filed it under.
                    if record.key != key {
                        return Err(EngineError::MalformedSegment {
                            page: RecordPointer::from_raw(entry.pointer).page().0,
                            what: "value record carries another key than its index entry",
                        });
                    }
                    Some(record.value)
                }
            }
        };
        Ok((value, self.charge(space, t)))
    }

    /// Stores `value` under `key`, replacing any older version.
    ///
    /// Refused with [`EngineError::CapacityExceeded`] (and nothing changed) when user data would
    /// exceed the raw capacity less over-provisioning, when flushing L0 would need blocks that GC
    /// cannot free without touching the delete and GC reserves, or when the index's DRAM is full.
    pub fn put(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        value: &[u8],
    ) -> Result<SimTime> {
        self.check_key(key)?;
        if value.len() > self.value_bytes_max {
            return Err(EngineError::ValueTooLarge {
                len: value.len(),
                max: self.value_bytes_max,
            });
        }
        self.admit_put(space, key, value.len(), 0)?;
        self.snapshot_cache = None;
        self.insert(space, at, key, Some(value), Admission::Put)
    }

    /// Checks that a put of `key` with a value of `value_len` bytes would be admitted, with
    /// `staged_bytes` more already promised to earlier stores of the same batch. Changes nothing.
    pub fn admit_put(
        &self,
        space: &Space,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()> {
        self.check_key(key)?;
        if value_len > self.value_bytes_max {
            return Err(EngineError::ValueTooLarge {
                len: value_len,
                max: self.value_bytes_max,
            });
        }
        let footprint = space.record_footprint(key.len(), value_len);
        // User data, plus the room a merge of the whole tree needs while old and new meta segments
        // coexist, must fit the capacity less over-provisioning.
        let transient = self.cascade_reserve_blocks(space) * space.block_bytes();
        if space.valid_bytes() + self.l0_bytes + staged_bytes + footprint + transient
            > space.user_capacity_bytes()
        {
            return Err(EngineError::CapacityExceeded(
                "user data would exceed the capacity less over-provisioning",
            ));
        }
        // The index's DRAM: the level lists must leave room for L0 and one flush's new entries.
        // A flush adds at most one level-list entry per page of L0's entries, plus one per level
        // for the ragged ends of the merged runs.
        debug_assert_eq!(
            self.l0_key_bytes,
            self.l0.keys().map(|key| key.len() as u64).sum::<u64>()
        );
        let l0_keys = self.l0_key_bytes + key.len() as u64;
        let l0_meta = l0_keys + (self.l0.len() as u64 + 1) * ENTRY_OVERHEAD_BYTES as u64;
        let usable =
            (self.page_bytes - HEADER_BYTES - ENTRY_OVERHEAD_BYTES - crate::KEY_BYTES_MAX) as u64;
        let new_segments = l0_meta.div_ceil(usable.max(1)) + self.levels.len() as u64 + 1;
        let growth = new_segments * (8 + 4 + 4 + self.key_len_max_seen as u64);
        if self.dram_fixed_parts() + self.l0_reservation + growth > self.dram_budget
            && self.pinned_levels() == 0
        {
            return Err(EngineError::CapacityExceeded(
                "the level lists fill the DRAM budget",
            ));
        }
        Ok(())
    }

    /// Whether `key` has a live value (no value read). Returns when the index search ends.
    pub fn contains(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(bool, SimTime)> {
        self.check_key(key)?;
        let (found, t, _) = self.lookup(space, at, key, Purpose::Index)?;
        let present = match found {
            Found::Absent => false,
            Found::L0(value) => value.is_some(),
            Found::Level { entry, .. } => !entry.is_tombstone(),
        };
        Ok((present, self.charge(space, t)))
    }

    /// Makes room in L0 for a batch that will stage `bytes` of pairs (key, value and per-entry
    /// overhead) with [`LsmTree::stage`]: flushes L0 first if they would not fit. Changes no
    /// key's value; may fail with [`EngineError::CapacityExceeded`].
    pub fn prepare_stage(&mut self, space: &mut Space, at: SimTime, bytes: u64) -> Result<SimTime> {
        if self.l0_bytes + bytes > self.config.l0_bytes && !self.l0.is_empty() {
            self.snapshot_cache = None;
            return self.flush(space, at, Admission::Reserve);
        }
        Ok(at)
    }

    /// DRAM an L0 pair takes: what [`LsmTree::prepare_stage`] counts per pair.
    pub fn staged_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
        Self::l0_pair_bytes(key, value)
    }

    /// Puts a pair (`Some` value) or a tombstone (`None`) into L0 without flushing: cannot fail,
    /// which is what makes a batch all-or-nothing once validated. Keys must have been checked
    /// (by [`LsmTree::admit_put`] for stores). [`LsmTree::settle`] flushes afterwards.
    pub fn stage(&mut self, key: &[u8], value: Option<&[u8]>) {
        debug_assert!(!key.is_empty() && key.len() <= crate::KEY_BYTES_MAX);
        self.snapshot_cache = None;
        let added = Self::l0_pair_bytes(key, value);
        self.count_l0_search(key);
        self.cpu_pending.bytes_copied += added;
        self.key_len_max_seen = self.key_len_max_seen.max(key.len());
        self.l0_insert(key.to_vec(), value.map(<[u8]>::to_vec), false);
    }

    /// After staging: flushes L0 if it is over its size and runs background GC. A flush that
    /// cannot get its space leaves L0 over its size (the next write retries), so staged pairs stay
    /// applied.
    pub fn settle(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        self.snapshot_cache = None;
        let mut t = at;
        if self.l0_bytes > self.config.l0_bytes {
            t = match self.flush(space, t, Admission::Reserve) {
                Ok(t) => t,
                Err(EngineError::CapacityExceeded(_)) => t,
                Err(error) => return Err(error),
            };
        }
        t = self.background_gc(space, t)?;
        Ok(self.charge(space, t))
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

    /// Deletes `key` (stores a tombstone). Deletes may use the delete reserve, so they proceed on a
    /// device that refuses puts.
    pub fn delete(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime> {
        self.check_key(key)?;
        self.snapshot_cache = None;
        self.insert(space, at, key, None, Admission::Reserve)
    }

    fn l0_pair_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
        key.len() as u64 + value.map_or(0, |value| value.len() as u64) + L0_ENTRY_OVERHEAD_BYTES
    }

    fn insert(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        value: Option<&[u8]>,
        admission: Admission,
    ) -> Result<SimTime> {
        let mut t = at;
        let added = Self::l0_pair_bytes(key, value);
        if self.l0_bytes + added > self.config.l0_bytes && !self.l0.is_empty() {
            t = self.flush(space, t, admission)?;
        }
        self.count_l0_search(key);
        self.cpu_pending.bytes_copied += added;
        self.key_len_max_seen = self.key_len_max_seen.max(key.len());
        self.l0_insert(key.to_vec(), value.map(<[u8]>::to_vec), false);
        t = self.background_gc(space, t)?;
        Ok(self.charge(space, t))
    }

    fn l0_insert(&mut self, key: Vec<u8>, value: Option<Vec<u8>>, from_gc: bool) {
        let added = Self::l0_pair_bytes(&key, value.as_deref());
        let key_bytes = key.len() as u64;
        match Arc::make_mut(&mut self.l0).insert(key.clone(), L0Value { value, from_gc }) {
            Some(old) => self.l0_bytes -= Self::l0_pair_bytes(&key, old.value.as_deref()),
            None => self.l0_key_bytes += key_bytes,
        }
        self.l0_bytes += added;
    }

    /// Up to `count` pairs with keys `>= start`, in key order, from one consistent view (the engine
    /// is single-threaded, so the view is the state at the call).
    pub fn scan(
        &mut self,
        space: &mut Space,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(Pairs, SimTime)> {
        self.check_key(start)?;
        let mut t = at;
        // Source 0 is L0; source i + 1 is level i. A lower source number is newer.
        let l0: Vec<(Vec<u8>, Option<Vec<u8>>)> = self
            .l0
            .range(start.to_vec()..)
            .map(|(key, value)| (key.clone(), value.value.clone()))
            .collect();
        let mut l0_position = 0;
        struct Cursor {
            segment: usize,
            entries: Vec<Entry>,
            position: usize,
        }
        let mode = SearchMode { prefixes: false };
        let mut cursors = Vec::new();
        let mut issued_at = t;
        for index in 0..self.levels.len() {
            let first = self.levels[index]
                .find_segment(start, 0, usize::MAX, mode, &mut self.cpu_pending)
                .unwrap_or(0);
            let (entries, done) =
                self.segment_entries(space, issued_at, index, first, Purpose::Index)?;
            t = t.max(done);
            let position = entries.partition_point(|entry| entry.key.as_slice() < start);
            cursors.push(Cursor {
                segment: first,
                entries,
                position,
            });
        }
        let mut picked: Vec<Picked> = Vec::new();
        while picked.len() < count {
            // Refill exhausted cursors from their next segment.
            for (index, cursor) in cursors.iter_mut().enumerate() {
                while cursor.position >= cursor.entries.len()
                    && cursor.segment + 1 < self.levels[index].segments.len()
                {
                    cursor.segment += 1;
                    issued_at = issued_at.max(t);
                    let (entries, done) = Self::segment_entries_of(
                        space,
                        &self.levels[index],
                        issued_at,
                        cursor.segment,
                        Purpose::Index,
                    )?;
                    t = t.max(done);
                    cursor.entries = entries;
                    cursor.position = 0;
                }
            }
            let mut smallest: Option<&[u8]> = l0.get(l0_position).map(|(key, _)| key.as_slice());
            for cursor in &cursors {
                if let Some(entry) = cursor.entries.get(cursor.position) {
                    if smallest.is_none_or(|key| entry.key.as_slice() < key) {
                        smallest = Some(&entry.key);
                    }
                }
            }
            let Some(smallest) = smallest.map(<[u8]>::to_vec) else {
                break;
            };
            self.cpu_pending.key_comparisons += cursors.len() as u64 + 1;
            // The newest source holding the key decides; older ones are skipped.
            let mut decided: Option<Result<Option<Vec<u8>>, Entry>> = None;
            if l0.get(l0_position).is_some_and(|(key, _)| *key == smallest) {
                decided = Some(Ok(l0[l0_position].1.clone()));
                l0_position += 1;
            }
            for cursor in &mut cursors {
                if cursor
                    .entries
                    .get(cursor.position)
                    .is_some_and(|entry| entry.key == smallest)
                {
                    if decided.is_none() {
                        decided = Some(Err(cursor.entries[cursor.position].clone()));
                    }
                    cursor.position += 1;
                }
            }
            match decided {
                Some(Ok(Some(value))) => picked.push((smallest, Ok(value))),
                Some(Err(entry)) if !entry.is_tombstone() => {
                    picked.push((smallest, Err(entry.pointer)));
                }
                _ => {}
            }
        }
        t = self.charge(space, t);
        let issue = t;
        let mut out = Vec::with_capacity(picked.len());
        for (key, value) in picked {
            let value = match value {
                Ok(value) => value,
                Err(pointer) => {
                    let (record, done) = space.read_record(
                        issue,
                        RecordPointer::from_raw(pointer),
                        Purpose::UserData,
                    )?;
                    t = t.max(done);
                    record.value
                }
            };
            out.push((key, value));
        }
        Ok((out, self.charge(space, t)))
    }

    /// The entries of one segment of a level (from DRAM if pinned, else read at `at`).
    fn segment_entries(
        &mut self,
        space: &mut Space,
        at: SimTime,
        level: usize,
        segment: usize,
        purpose: Purpose,
    ) -> Result<(Vec<Entry>, SimTime)> {
        Self::segment_entries_of(space, &self.levels[level], at, segment, purpose)
    }

    fn segment_entries_of(
        space: &mut Space,
        level: &Level,
        at: SimTime,
        segment: usize,
        purpose: Purpose,
    ) -> Result<(Vec<Entry>, SimTime)> {
        let Some(segment) = level.segments.get(segment) else {
            return Ok((Vec::new(), at));
        };
        if let Some(entries) = &segment.entries {
            return Ok((entries.as_ref().clone(), at));
        }
        let Some(page) = segment.page else {
            return Err(EngineError::Config(
                "an unpinned segment has no flash address".into(),
            ));
        };
        let (bytes, done) = space.read_page(at, page, purpose)?;
        Ok((SegmentPage::parse(&bytes, page.0)?.entries()?, done))
    }

    /// DRAM of the level lists, pinned segments and Bloom filters.
    fn dram_fixed_parts(&self) -> u64 {
        let fingerprint = self.levels_fingerprint();
        if let Some((cached_for, bytes)) = self.dram_fixed_cache.get() {
            if cached_for == fingerprint {
                debug_assert_eq!(bytes, {
                    let usage = self.dram_usage();
                    usage.level_lists + usage.pinned_segments + usage.bloom_filters
                });
                return bytes;
            }
        }
        let usage = self.dram_usage();
        let bytes = usage.level_lists + usage.pinned_segments + usage.bloom_filters;
        self.dram_fixed_cache.set(Some((fingerprint, bytes)));
        bytes
    }

    /// A fingerprint of what the DRAM of the levels depends on: each level's segment list (a new
    /// list whenever a merge rebuilds it), its length, entries, key bytes and pinned flag (unpinning
    /// clears it). Debug builds check every cache hit against a full recomputation.
    fn levels_fingerprint(&self) -> u64 {
        let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
        for level in &self.levels {
            for word in [
                Arc::as_ptr(&level.segments) as usize as u64,
                level.segments.len() as u64,
                level.entries,
                level.key_bytes,
                u64::from(level.pinned),
            ] {
                hash = (hash ^ word).wrapping_mul(0x0000_0100_0000_01B3);
            }
        }
        hash
    }

    fn level_dram(&self, index: usize) -> (u64, u64, u64) {
        let level = &self.levels[index];
        let last = index + 1 == self.levels.len();
        let list = level.list_dram_bytes(
            self.features.prefixes,
            self.features.range_pointers && !last,
        );
        let pinned = level
            .segments
            .iter()
            .filter(|segment| segment.entries.is_some())
            .count() as u64
            * self.page_bytes as u64;
        let bloom = level
            .segments
            .iter()
            .filter_map(|segment| segment.bloom.as_ref())
            .map(|filter| filter.dram_bytes())
            .sum();
        (list, pinned, bloom)
    }

    /// DRAM by part.
    pub fn dram_usage(&self) -> DramUsage {
        let mut usage = DramUsage {
            l0: self.l0_bytes,
            budget: self.dram_budget,
            ..DramUsage::default()
        };
        for index in 0..self.levels.len() {
            let (list, pinned, bloom) = self.level_dram(index);
            usage.level_lists += list;
            usage.pinned_segments += pinned;
            usage.bloom_filters += bloom;
        }
        usage
    }

    /// Everything the engine reports.
    pub fn stats(&self, space: &Space) -> EngineStats {
        let levels = (0..self.levels.len())
            .map(|index| {
                let level = &self.levels[index];
                let (list, pinned, bloom) = self.level_dram(index);
                let bits = self.bloom_bits_for(index);
                LevelStats {
                    level: index + 1,
                    entries: level.entries,
                    capacity_entries: if index + 1 == self.levels_max {
                        u64::MAX
                    } else {
                        self.level_capacity(index)
                    },
                    segments: level.segments.len() as u64,
                    pinned: level.pinned,
                    dram_bytes: list + pinned + bloom,
                    bloom: BloomLevelStats {
                        bits_per_key: bits,
                        monkey_fpr: if bits > 0.0 {
                            bloom::monkey_fpr(bits)
                        } else {
                            1.0
                        },
                        negatives: level.bloom_negatives,
                        false_positives: level.bloom_false_positives,
                        expected_false_positives: level.bloom_expected_false_positives,
                    },
                }
            })
            .collect();
        let flash = space.flash().counters();
        EngineStats {
            preset: self.config.preset,
            height: self.height(),
            pinned_levels: self.pinned_levels(),
            levels,
            l0_entries: self.l0.len() as u64,
            dram: self.dram_usage(),
            flash,
            meta_reads_per_get: self.gets.clone(),
            flushes: self.activity.flushes,
            compactions: self.activity.compactions,
            last_level_compactions: self.activity.last_level_compactions,
            compactions_deferred: self.activity.compactions_deferred,
            levels_unpinned: self.activity.levels_unpinned,
            gc_meta_victims: self.activity.gc_meta_victims,
            gc_data_victims: self.activity.gc_data_victims,
            gc_meta_pages_moved: self.activity.gc_meta_pages_moved,
            gc_records_reinserted: self.activity.gc_records_reinserted,
            gc_records_rewritten: self.activity.gc_records_rewritten,
            gc_segments_rewritten: self.activity.gc_segments_rewritten,
            cpu: self.cpu_total,
            cpu_ns: self.cpu_ns,
        }
    }

    fn bloom_bits_for(&self, level: usize) -> f64 {
        if !self.features.bloom_filters {
            return 0.0;
        }
        self.bloom_bits_per_key
            .get(level)
            .or(self.bloom_bits_per_key.last())
            .copied()
            .unwrap_or(0.0)
    }

    /// Blocks the free pool must supply for `step`.
    fn blocks_needed(&self, space: &Space, step: Step) -> u64 {
        let (data_pages, meta_pages) = match step {
            Step::Nothing => (0, 0),
            Step::Flush => {
                let data = space.data_pages_needed(
                    self.config.namespace,
                    self.l0.iter().filter_map(|(key, value)| {
                        value.value.as_ref().map(|v| (key.len(), v.len()))
                    }),
                );
                let upper = self.l0_key_bytes + self.l0.len() as u64 * ENTRY_OVERHEAD_BYTES as u64;
                (data, self.merge_pages_needed(upper, 0))
            }
            Step::Merge(index) => {
                let upper = self.level_encoded_bytes(index);
                (0, self.merge_pages_needed(upper, index + 1))
            }
            Step::Unpin(index) => (0, self.levels[index].segments.len() as u64),
        };
        space.blocks_needed(self.config.namespace, Stream::Data, data_pages)
            + space.blocks_needed(self.config.namespace, Stream::Meta, meta_pages)
    }

    /// Blocks a merge of every level into the last one could write: the worst case of the cascade
    /// a flush may start (pinned levels included, as they may have to be unpinned).
    fn cascade_reserve_blocks(&self, space: &Space) -> u64 {
        let mut total = self.l0_key_bytes + self.l0.len() as u64 * ENTRY_OVERHEAD_BYTES as u64;
        for index in 0..self.levels.len() {
            total += self.level_encoded_bytes(index);
        }
        let usable = (self.page_bytes - HEADER_BYTES)
            .saturating_sub(self.key_len_max_seen + ENTRY_OVERHEAD_BYTES)
            .max(1) as u64;
        let pages = total.div_ceil(usable) + self.levels.len() as u64 + 1;
        space.blocks_needed(self.config.namespace, Stream::Meta, pages)
    }

    fn level_encoded_bytes(&self, index: usize) -> u64 {
        self.levels.get(index).map_or(0, |level| {
            level.key_bytes + level.entries * ENTRY_OVERHEAD_BYTES as u64
        })
    }

    /// Meta pages a merge of `upper_bytes` of entries into level `target` may write.
    fn merge_pages_needed(&self, upper_bytes: u64, target: usize) -> u64 {
        let pinned = self.levels.get(target).map_or(
            target < self.pinned_target && self.features.pinning,
            |level| level.pinned,
        );
        if pinned {
            return 0;
        }
        let total = upper_bytes + self.level_encoded_bytes(target);
        // Each page may leave less than one entry unused at its end.
        let usable = (self.page_bytes - HEADER_BYTES)
            .saturating_sub(self.key_len_max_seen + ENTRY_OVERHEAD_BYTES)
            .max(1) as u64;
        total.div_ceil(usable) + 1
    }

    /// Runs GC until the free pool can supply `step` plus the reserves, or fails with
    /// [`EngineError::CapacityExceeded`] if GC cannot free enough.
    fn ensure_space(
        &mut self,
        space: &mut Space,
        at: SimTime,
        step: Step,
        admission: Admission,
    ) -> Result<SimTime> {
        let mut t = at;
        let gc_reserve = u64::from(space.config().gc_reserve_blocks);
        let mut rounds = 0u64;
        loop {
            let mut needed = self.blocks_needed(space, step);
            if let Step::Flush = step {
                // What L0 adds must not leave the tree unable to merge all the way down: that merge
                // is what turns deletes and overwrites into free space. Deletes may use half of
                // this reserve: they add no data, and their merges are what give space back.
                let cascade = self.cascade_reserve_blocks(space);
                needed += match admission {
                    Admission::Put => cascade,
                    Admission::Reserve => cascade / 2,
                };
            }
            let hard = needed
                + gc_reserve
                + if admission == Admission::Put {
                    u64::from(self.config.delete_reserve_blocks)
                } else {
                    0
                };
            let soft = hard.max(self.gc_threshold);
            let free = space.free_blocks();
            if free >= soft {
                return Ok(t);
            }
            rounds += 1;
            let victim = if rounds > space.geometry().blocks_total() {
                None
            } else {
                self.pick_victim(space)
            };
            let Some(victim) = victim else {
                if free >= hard {
                    return Ok(t);
                }
                // `pink`: L0 may be too full of re-inserted records for any data victim; flushing it
                // into a pinned L1 costs only its data pages and lets GC go on.
                if self.features.gc == GcPolicy::Reinsert
                    && !self.l0.is_empty()
                    && !self.flushing_for_gc
                    && rounds <= space.geometry().blocks_total()
                    && self.levels.first().is_some_and(|level| level.pinned)
                {
                    self.flushing_for_gc = true;
                    let flushed = self.flush_for_gc(space, t);
                    self.flushing_for_gc = false;
                    t = flushed?;
                    continue;
                }
                return Err(EngineError::CapacityExceeded(
                    "GC cannot free the blocks this write needs",
                ));
            };
            t = self.collect(space, t, victim)?;
        }
    }

    /// The next GC victim. `pink` takes a data block only while L0 can absorb its live records.
    fn pick_victim(&self, space: &Space) -> Option<u64> {
        if self.features.gc == GcPolicy::Reinsert {
            let room = self
                .l0_reservation
                .saturating_sub(self.config.l0_bytes.max(self.l0_bytes));
            let l0_room = self
                .l0_reservation
                .saturating_sub(self.l0_bytes)
                .min(room + space.block_bytes());
            space.pick_victim_with(Some(self.config.namespace), |stream, valid| {
                // Re-inserted pairs take about their record size in L0 plus the per-entry overhead.
                stream == Stream::Meta || valid * 2 <= l0_room
            })
        } else {
            space.pick_victim_with(Some(self.config.namespace), |_, _| true)
        }
    }

    /// Collects blocks while the free pool is below the GC threshold (never fails for lack of
    /// victims: the threshold is a wish, the reserves are the requirement).
    fn background_gc(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        if space.free_blocks() >= self.gc_threshold {
            return Ok(at);
        }
        match self.ensure_space(space, at, Step::Nothing, Admission::Reserve) {
            Ok(t) => Ok(t),
            Err(EngineError::CapacityExceeded(_)) => Ok(at),
            Err(error) => Err(error),
        }
    }

    /// Writes data records for pairs; returns their entries and when the programs complete.
    fn write_values(
        &mut self,
        space: &mut Space,
        at: SimTime,
        pairs: &BTreeMap<Vec<u8>, L0Value>,
    ) -> Result<(Vec<Entry>, SimTime)> {
        let mut done = at;
        let mut entries = Vec::with_capacity(pairs.len());
        for (key, value) in pairs {
            let entry = match &value.value {
                Some(bytes) => {
                    let purpose = if value.from_gc {
                        Purpose::Gc
                    } else {
                        Purpose::UserData
                    };
                    let (pointer, finished) =
                        space.append_record(at, purpose, self.config.namespace, key, bytes)?;
                    self.cpu_pending.bytes_copied += (key.len() + bytes.len()) as u64;
                    done = done.max(finished);
                    Entry {
                        key: key.clone(),
                        pointer: pointer.raw(),
                        value_len: bytes.len() as u32,
                        from_gc: false,
                    }
                }
                None => Entry {
                    key: key.clone(),
                    pointer: TOMBSTONE,
                    value_len: 0,
                    from_gc: false,
                },
            };
            entries.push(entry);
        }
        Ok((entries, done))
    }
}
