//! The device: namespaces over one shared space, the command set, atomic batches and snapshot
//! iterators.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use kvssd_engine::hash::{HashConfig, HashIndex, HashPreset};
use kvssd_engine::{EngineConfig, EngineError, LsmTree, Preset, SnapshotIter};
use kvssd_flash::{Flash, Profile, SimTime};
use kvssd_space::{Space, SpaceConfig};

pub(crate) use crate::engines::NamespaceEngine;
use crate::{
    BatchOp, ByteRange, DeviceError, DeviceStats, IterOptions, IterStart, IteratorId, IteratorInfo,
    NamespaceId, NamespaceInfo, NamespaceSpec, NextBatch, PresetKind, Retrieved, StoreMode,
    BATCH_OPERATIONS_MAX, ITERATORS_OPEN_MAX, KEY_BYTES_MAX, NAMESPACES_MAX, PREFETCH_DEGREE_MAX,
    VALUE_BYTES_MAX,
};

/// The result type of the device.
pub type Result<T, E = DeviceError> = std::result::Result<T, E>;

/// How a device is set up.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceConfig {
    /// The space layer (logs, chunk size, over-provisioning, GC reserve), shared by all namespaces.
    pub space: SpaceConfig,
    /// The engine configuration each namespace starts from; its preset, features and namespace id
    /// are replaced by the namespace's.
    pub engine: EngineConfig,
    /// The configuration `hash` namespaces start from (namespace id and space replaced).
    pub hash: HashConfig,
    /// The configuration `kaml` namespaces start from (namespace id and space replaced).
    pub kaml: HashConfig,
    /// Device-wide GC starts when free blocks fall below this many.
    pub gc_threshold_blocks: u64,
    /// Most iterators open at once.
    pub iterators_open_max: usize,
    /// Most namespaces at once.
    pub namespaces_max: usize,
    /// Most operations in one batch.
    pub batch_operations_max: usize,
    /// How acknowledged writes survive power loss (see [`Durability`]).
    pub durability: Durability,
    /// With a write-ahead log: a checkpoint (which trims the log) is written once the log holds
    /// this many blocks, besides after every flush, compaction and GC.
    pub checkpoint_log_blocks: usize,
}

/// How a device keeps acknowledged writes across power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Nothing is written for durability; the device starts from an erased array at every open
    /// (benchmarks, and the papers' capacitor assumption when power never fails).
    Volatile,
    /// Write-ahead log with checkpoints; recovery = newest checkpoint + log replay. The only mode
    /// on file media.
    WriteAheadLog(crate::durability::SyncPolicy),
    /// Power-loss protection (the papers' capacitor; simulated flash only): no log; DRAM state is
    /// safe until [`Device::power_cut`], which writes it to a dump (within
    /// [`Device::plp_dump_bound`] page programs) before the flash loses power; recovery loads the
    /// dump.
    PowerLossProtection,
}

impl DeviceConfig {
    /// Defaults for a profile: the engine's defaults for its geometry and the limits of the crate
    /// root.
    pub fn new(profile: &Profile) -> DeviceConfig {
        let engine = EngineConfig::new(Preset::Pink, &profile.geometry);
        let mut config = DeviceConfig::with_engine(engine);
        config.hash = HashConfig::new(HashPreset::Hash, &profile.geometry);
        config.kaml = HashConfig::new(HashPreset::Kaml, &profile.geometry);
        config
    }

    /// A configuration for `Profile::test_min()` under which flushes, compactions and GC happen
    /// within a few hundred operations (the engine's `test_min` configuration).
    pub fn test_min() -> DeviceConfig {
        let mut config = DeviceConfig::with_engine(EngineConfig::test_min(Preset::Pink));
        config.hash = HashConfig::test_min(HashPreset::Hash);
        // A table of 19 bucket pages with 8 cached: small enough to share the tiny flash with
        // other namespaces, large enough that evictions and write-backs happen.
        config.hash.table_slots = 1024;
        config.kaml = HashConfig::test_min(HashPreset::Kaml);
        config
    }

    /// Limits of the crate root around an engine template.
    pub fn with_engine(engine: EngineConfig) -> DeviceConfig {
        let space = engine.space.clone();
        let hash_template = |preset: HashPreset| {
            let mut config = HashConfig::new(preset, &Profile::test_min().geometry);
            config.space = engine.space.clone();
            config.dram_budget_bytes = engine.dram_budget_bytes;
            config.delete_reserve_blocks = engine.delete_reserve_blocks;
            config.cpu = engine.cpu;
            config
        };
        let hash = hash_template(HashPreset::Hash);
        let kaml = hash_template(HashPreset::Kaml);
        DeviceConfig {
            gc_threshold_blocks: u64::from(space.gc_reserve_blocks)
                + u64::from(engine.delete_reserve_blocks)
                + u64::from(space.logs)
                + 2,
            space,
            engine,
            hash,
            kaml,
            iterators_open_max: ITERATORS_OPEN_MAX,
            namespaces_max: NAMESPACES_MAX,
            batch_operations_max: BATCH_OPERATIONS_MAX,
            durability: Durability::Volatile,
            checkpoint_log_blocks: 2,
        }
    }
}

pub(crate) struct Namespace {
    pub(crate) spec: NamespaceSpec,
    pub(crate) engine: NamespaceEngine,
}

impl Namespace {
    /// The LSM tree of an LSM namespace (iterators and snapshots need one).
    pub(crate) fn lsm(&mut self) -> Option<&mut LsmTree> {
        match &mut self.engine {
            NamespaceEngine::Lsm(tree) => Some(tree),
            NamespaceEngine::Hash(_) => None,
        }
    }

    pub(crate) fn lsm_ref(&self) -> Option<&LsmTree> {
        match &self.engine {
            NamespaceEngine::Lsm(tree) => Some(tree),
            NamespaceEngine::Hash(_) => None,
        }
    }
}

struct OpenIterator {
    namespace: u32,
    iter: SnapshotIter,
    /// The space layer's protection of the blocks the snapshot can reach.
    token: u64,
}

/// Everything behind the device's lock.
pub(crate) struct Core {
    pub(crate) space: Space,
    pub(crate) config: DeviceConfig,
    pub(crate) value_bytes_max: usize,
    pub(crate) namespaces: BTreeMap<u32, Namespace>,
    pub(crate) next_namespace: u32,
    iterators: BTreeMap<u64, OpenIterator>,
    next_iterator: u64,
    /// Iterators closed because their namespace was deleted (so `next` can say why).
    orphaned: BTreeSet<u64>,
    device_gc_victims: u64,
    /// The durable structures, with a write-ahead log (shared with the space layer's erase hook).
    pub(crate) journal: Option<std::sync::Arc<Mutex<crate::durability::journal::Journal>>>,
    /// Sum of the trees' activity counts at the last checkpoint.
    pub(crate) activity_at_checkpoint: u64,
    pub(crate) recovery: Option<crate::durability::RecoveryReport>,
    /// With power-loss protection: the durable structures the dump at a power cut updates.
    pub(crate) plp: Option<crate::durability::journal::Journal>,
    /// With power-loss protection: what the last dump wrote.
    pub(crate) last_dump: Option<crate::durability::plp::DumpReport>,
}

/// A key-value SSD: namespaces of different engines sharing one flash array, the command set of
/// KAML and IterKVSSD, atomic batches, and snapshot iterators with prefetch.
///
/// Every command takes the simulated time at which it is issued and returns the time at which it
/// completes.
///
/// # Threading
/// `Device` is `Send + Sync`; share it with `Arc`. One mutex guards all state (the space layer
/// with the flash, every namespace's index, the open iterators): a command runs entirely in the
/// calling thread while it holds the lock, so commands are linearizable in the order they take
/// it. Work the papers call background (L0 flush, compaction, GC) runs inside the command that
/// triggers it, in the caller's thread; it is background only in simulated time, where it
/// occupies dies, channels and controller cores. Callers driving simulated time from several
/// threads must issue commands in non-decreasing simulated time (the flash model's rule).
pub struct Device {
    pub(crate) core: Mutex<Core>,
}

impl Core {
    /// A core over a space, with no namespace and no durability.
    pub(crate) fn new(space: Space, config: DeviceConfig) -> Core {
        let value_bytes_max = config
            .engine
            .value_bytes_max(space.geometry())
            .min(VALUE_BYTES_MAX);
        Core {
            space,
            config,
            value_bytes_max,
            namespaces: BTreeMap::new(),
            next_namespace: 1,
            iterators: BTreeMap::new(),
            next_iterator: 1,
            orphaned: BTreeSet::new(),
            device_gc_victims: 0,
            journal: None,
            activity_at_checkpoint: 0,
            recovery: None,
            plp: None,
            last_dump: None,
        }
    }
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(DeviceError::KeyEmpty);
    }
    check_bound(key)
}

/// Start keys, prefixes and seek keys may be empty but not longer than a key.
fn check_bound(key: &[u8]) -> Result<()> {
    if key.len() > KEY_BYTES_MAX {
        return Err(DeviceError::KeyTooLong { len: key.len() });
    }
    Ok(())
}

impl Device {
    /// A device over a flash array. [`Durability::Volatile`]: the array must be fully erased and
    /// the device starts with no namespace. With a write-ahead log: a blank array is formatted; an
    /// array holding a device is recovered (newest checkpoint, then log replay; see
    /// [`Device::recovery_report`]); anything else is a typed error naming what is wrong.
    pub fn open(flash: Flash, config: DeviceConfig) -> Result<Device> {
        if config.durability != Durability::Volatile {
            return crate::durability::open::open_durable(flash, config);
        }
        let space = Space::open(flash, config.space.clone())?;
        Ok(Device {
            core: Mutex::new(Core::new(space, config)),
        })
    }

    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, Core>> {
        self.core.lock().map_err(|_| DeviceError::Poisoned)
    }

    /// Longest value this device takes (2 MiB, or less on tiny geometries).
    pub fn value_bytes_max(&self) -> Result<usize> {
        Ok(self.lock()?.value_bytes_max)
    }

    /// Creates a namespace; returns its id.
    pub fn create_namespace(&self, spec: NamespaceSpec) -> Result<NamespaceId> {
        self.lock()?.create_namespace(spec)
    }

    /// Deletes a namespace: its iterators are closed, its blocks erased and returned to the free
    /// pool, and its id is never used again.
    pub fn delete_namespace(&self, at: SimTime, namespace: NamespaceId) -> Result<SimTime> {
        self.lock()?.delete_namespace(at, namespace)
    }

    /// Every namespace with its statistics, by id.
    pub fn list_namespaces(&self) -> Result<Vec<NamespaceInfo>> {
        Ok(self.lock()?.list_namespaces())
    }

    /// Stores `value` under `key`, as `mode` allows.
    pub fn store(
        &self,
        at: SimTime,
        namespace: NamespaceId,
        key: &[u8],
        value: &[u8],
        mode: StoreMode,
    ) -> Result<SimTime> {
        self.lock()?.store(at, namespace, key, value, mode)
    }

    /// The value of `key` (or `range` of it), with the whole value's length; `None` if absent.
    pub fn retrieve(
        &self,
        at: SimTime,
        namespace: NamespaceId,
        key: &[u8],
        range: Option<ByteRange>,
    ) -> Result<(Option<Retrieved>, SimTime)> {
        self.lock()?.retrieve(at, namespace, key, range)
    }

    /// Deletes `key` (deleting an absent key is not an error).
    pub fn delete(&self, at: SimTime, namespace: NamespaceId, key: &[u8]) -> Result<SimTime> {
        self.lock()?.delete(at, namespace, key)
    }

    /// Whether each key has a value, one answer per key, in order.
    pub fn exist(
        &self,
        at: SimTime,
        namespace: NamespaceId,
        keys: &[&[u8]],
    ) -> Result<(Vec<bool>, SimTime)> {
        self.lock()?.exist(at, namespace, keys)
    }

    /// Applies stores and deletes across namespaces atomically: all of them, or (with an error)
    /// none. Operations see the effects of earlier ones in the batch (an insert-only store after
    /// a delete of the same key succeeds).
    pub fn batch(&self, at: SimTime, operations: &[BatchOp]) -> Result<SimTime> {
        self.lock()?.batch(at, operations)
    }

    /// Opens an iterator over a snapshot of the namespace as it is now, positioned at its start.
    pub fn iter_open(
        &self,
        at: SimTime,
        namespace: NamespaceId,
        options: IterOptions,
    ) -> Result<(IteratorId, SimTime)> {
        self.lock()?.iter_open(at, namespace, options)
    }

    /// Repositions an iterator at the first key `>= key` of its snapshot (within its prefix).
    pub fn iter_seek(&self, at: SimTime, iterator: IteratorId, key: &[u8]) -> Result<SimTime> {
        self.lock()?.iter_seek(at, iterator, key)
    }

    /// The next entries: at least one unless at the end, then more while they fit `byte_budget`
    /// (keys and values).
    pub fn iter_next(
        &self,
        at: SimTime,
        iterator: IteratorId,
        byte_budget: usize,
    ) -> Result<(NextBatch, SimTime)> {
        self.lock()?.iter_next(at, iterator, byte_budget)
    }

    /// Closes an iterator, releasing its snapshot (and what GC could not collect because of it).
    pub fn iter_close(&self, iterator: IteratorId) -> Result<()> {
        self.lock()?.iter_close(iterator)
    }

    /// An open iterator's snapshot DRAM and read counts.
    pub fn iter_info(&self, iterator: IteratorId) -> Result<IteratorInfo> {
        self.lock()?.iter_info(iterator)
    }

    /// Device-wide figures.
    pub fn stats(&self) -> Result<DeviceStats> {
        let core = self.lock()?;
        Ok(DeviceStats {
            free_blocks: core.space.free_blocks(),
            namespaces: core.namespaces.len(),
            iterators_open: core.iterators.len(),
            device_gc_victims: core.device_gc_victims,
            flash: core.space.flash().counters(),
        })
    }

    /// Flushes every namespace's L0 to flash (tests and shutdown paths).
    pub fn flush_all(&self, at: SimTime) -> Result<SimTime> {
        let mut core = self.lock()?;
        let core = &mut *core;
        let mut t = at;
        for namespace in core.namespaces.values_mut() {
            t = namespace.engine.flush(&mut core.space, t)?;
        }
        Ok(t)
    }
}

impl Core {
    fn namespace(&mut self, id: NamespaceId) -> Result<&mut Namespace> {
        self.namespaces
            .get_mut(&id.0)
            .ok_or(DeviceError::NamespaceUnknown(id))
    }

    fn check_value(&self, value: &[u8]) -> Result<()> {
        if value.len() > self.value_bytes_max {
            return Err(DeviceError::ValueTooLarge {
                len: value.len(),
                max: self.value_bytes_max,
            });
        }
        Ok(())
    }

    pub(crate) fn create_namespace(&mut self, spec: NamespaceSpec) -> Result<NamespaceId> {
        if self.namespaces.len() >= self.config.namespaces_max {
            return Err(DeviceError::NamespacesExhausted {
                max: self.config.namespaces_max,
            });
        }
        if spec.quota_bytes == Some(0) {
            return Err(DeviceError::NamespaceSpec(
                "a quota must be positive".into(),
            ));
        }
        let logs_total = self.space.config().logs;
        let logs = spec
            .logs
            .clone()
            .unwrap_or_else(|| (0..logs_total).collect());
        let id = self.next_namespace;
        let engine = self.open_engine(id, spec.preset, None)?;
        self.space
            .set_namespace_logs(id, &logs)
            .map_err(|error| DeviceError::NamespaceSpec(error.to_string()))?;
        let spec = NamespaceSpec {
            logs: Some(logs),
            ..spec
        };
        self.log_namespace_created(id, &spec)?;
        self.next_namespace += 1;
        self.namespaces.insert(id, Namespace { spec, engine });
        self.checkpoint_if_durable()?;
        Ok(NamespaceId(id))
    }

    /// The index of a namespace `id` of `preset`: empty, or restored from a checkpoint's bytes.
    pub(crate) fn open_engine(
        &self,
        id: u32,
        preset: PresetKind,
        saved: Option<&[u8]>,
    ) -> Result<NamespaceEngine> {
        let config_error = |what: String| DeviceError::NamespaceSpec(what);
        match preset {
            PresetKind::Lsm(preset) => {
                let mut config = self.config.engine.clone();
                config.preset = preset;
                config.features = preset.features();
                config.namespace = id;
                config.space = self.space.config().clone();
                let tree = match saved {
                    None => LsmTree::open(&self.space, config),
                    Some(bytes) => LsmTree::restore(&self.space, config, bytes),
                };
                tree.map(NamespaceEngine::Lsm).map_err(|error| match error {
                    EngineError::Config(what) => config_error(what),
                    EngineError::DramBudgetTooSmall { .. } => config_error(error.to_string()),
                    other if saved.is_some() => {
                        DeviceError::CheckpointCorrupt(format!("namespace {id}: {other}"))
                    }
                    other => DeviceError::from(other),
                })
            }
            PresetKind::Hash(preset) => {
                let mut config = match preset {
                    HashPreset::Hash => self.config.hash.clone(),
                    HashPreset::Kaml => self.config.kaml.clone(),
                };
                config.preset = preset;
                config.namespace = id;
                config.space = self.space.config().clone();
                let index = match saved {
                    None => HashIndex::open(&self.space, config),
                    Some(bytes) => HashIndex::restore(&self.space, config, bytes),
                };
                index
                    .map(NamespaceEngine::Hash)
                    .map_err(|error| match error {
                        kvssd_engine::hash::HashError::Engine(
                            EngineError::Config(_) | EngineError::DramBudgetTooSmall { .. },
                        ) => config_error(error.to_string()),
                        other if saved.is_some() => {
                            DeviceError::CheckpointCorrupt(format!("namespace {id}: {other}"))
                        }
                        other => DeviceError::from(other),
                    })
            }
        }
    }

    fn delete_namespace(&mut self, at: SimTime, id: NamespaceId) -> Result<SimTime> {
        if !self.namespaces.contains_key(&id.0) {
            return Err(DeviceError::NamespaceUnknown(id));
        }
        let closing: Vec<u64> = self
            .iterators
            .iter()
            .filter(|(_, open)| open.namespace == id.0)
            .map(|(&iterator, _)| iterator)
            .collect();
        for iterator in closing {
            if let Some(open) = self.iterators.remove(&iterator) {
                self.space.unprotect(open.namespace, open.token);
                self.orphaned.insert(iterator);
            }
        }
        let t = self.log_namespace_deleted(at, id.0)?;
        self.namespaces.remove(&id.0);
        // With a log: a checkpoint without the namespace is durable before its blocks are erased.
        self.checkpoint_if_durable()?;
        Ok(self.space.release_namespace(t, id.0)?)
    }

    fn list_namespaces(&self) -> Vec<NamespaceInfo> {
        self.namespaces
            .iter()
            .map(|(&id, namespace)| {
                let summary = namespace.engine.summary(&self.space);
                let open: Vec<&OpenIterator> = self
                    .iterators
                    .values()
                    .filter(|open| open.namespace == id)
                    .collect();
                NamespaceInfo {
                    id: NamespaceId(id),
                    spec: namespace.spec.clone(),
                    valid_bytes: self.space.namespace_valid_bytes(id),
                    blocks: self.space.namespace_blocks(id),
                    l0_entries: summary.l0_entries,
                    levels: summary.levels,
                    flushes: summary.flushes,
                    compactions: summary.compactions,
                    gc_victims: summary.gc_victims,
                    dram: summary.dram,
                    iterators_open: open.len(),
                    snapshot_dram_bytes: namespace.lsm_ref().map_or(0, |tree| {
                        open.iter()
                            .map(|open| tree.snapshot_dram_bytes(open.iter.snapshot()))
                            .sum()
                    }),
                }
            })
            .collect()
    }

    /// Refuses a store that would take the namespace past its quota.
    fn check_quota(
        &self,
        id: NamespaceId,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()> {
        let Some(namespace) = self.namespaces.get(&id.0) else {
            return Err(DeviceError::NamespaceUnknown(id));
        };
        let Some(quota_bytes) = namespace.spec.quota_bytes else {
            return Ok(());
        };
        let footprint = self.space.record_footprint(key.len(), value_len);
        let used = self.space.namespace_valid_bytes(id.0) + namespace.engine.staged_dram_bytes();
        if used + staged_bytes + footprint > quota_bytes {
            return Err(DeviceError::QuotaExceeded {
                namespace: id,
                quota_bytes,
            });
        }
        Ok(())
    }

    fn check_mode(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        key: &[u8],
        mode: StoreMode,
    ) -> Result<SimTime> {
        if mode == StoreMode::Upsert {
            return Ok(at);
        }
        let (space, engine) = self.split(id)?;
        let (present, t) = engine.contains(space, at, key)?;
        match (mode, present) {
            (StoreMode::UpdateOnly, false) => Err(DeviceError::KeyMissing),
            (StoreMode::InsertOnly, true) => Err(DeviceError::KeyExists),
            _ => Ok(t),
        }
    }

    fn store(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        key: &[u8],
        value: &[u8],
        mode: StoreMode,
    ) -> Result<SimTime> {
        if self.journal.is_some() {
            let operation = BatchOp::Store {
                namespace: id,
                key: key.to_vec(),
                value: value.to_vec(),
                mode,
            };
            return self.logged_single(at, operation);
        }
        check_key(key)?;
        self.check_value(value)?;
        self.namespace(id)?;
        let t = self.check_mode(at, id, key, mode)?;
        self.check_quota(id, key, value.len(), 0)?;
        let first = {
            let (space, engine) = self.split(id)?;
            engine.put(space, t, key, value)
        };
        let t = match first {
            Ok(t) => t,
            // The namespace could not free enough of its own blocks: collect other namespaces'
            // garbage, then try once more (a refused put changed nothing).
            Err(DeviceError::CapacityExceeded(_)) => {
                let t = self.device_gc(t, true)?;
                let (space, engine) = self.split(id)?;
                engine.put(space, t, key, value)?
            }
            Err(error) => return Err(error),
        };
        self.device_gc(t, false)
    }

    /// The space and a namespace's index, borrowed together.
    pub(crate) fn split(&mut self, id: NamespaceId) -> Result<(&mut Space, &mut NamespaceEngine)> {
        let engine = match self.namespaces.get_mut(&id.0) {
            Some(namespace) => &mut namespace.engine,
            None => return Err(DeviceError::NamespaceUnknown(id)),
        };
        Ok((&mut self.space, engine))
    }

    /// Collects victims of any namespace while free blocks are below the device-wide threshold
    /// (or, when `eager`, while any namespace offers one and the pool is below twice that).
    pub(crate) fn device_gc(&mut self, at: SimTime, eager: bool) -> Result<SimTime> {
        let mut t = at;
        let target = if eager {
            2 * self.config.gc_threshold_blocks
        } else {
            self.config.gc_threshold_blocks
        };
        let rounds_max = self.space.geometry().blocks_total();
        // Namespaces whose candidate could not be relocated this time.
        let mut skipped: BTreeSet<u32> = BTreeSet::new();
        for _ in 0..rounds_max {
            if self.space.free_blocks() >= target {
                break;
            }
            // The victim with the least valid data among those each namespace's own policy
            // accepts (pink only takes a data block L0 can absorb).
            let mut best: Option<(u64, u32, u64)> = None;
            for (&id, namespace) in &self.namespaces {
                if skipped.contains(&id) {
                    continue;
                }
                if let Some(block) = namespace.engine.gc_candidate(&self.space) {
                    let valid = self.space.block_valid_bytes(block);
                    if best.is_none_or(|(_, _, best_valid)| valid < best_valid) {
                        best = Some((block, id, valid));
                    }
                }
            }
            let Some((block, id, _)) = best else { break };
            let space = &mut self.space;
            let Some(namespace) = self.namespaces.get_mut(&id) else {
                break;
            };
            match namespace.engine.collect_victim(space, t, block)? {
                Some(done) => {
                    t = done;
                    self.device_gc_victims += 1;
                }
                None => {
                    skipped.insert(id);
                }
            }
        }
        Ok(t)
    }

    fn retrieve(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        key: &[u8],
        range: Option<ByteRange>,
    ) -> Result<(Option<Retrieved>, SimTime)> {
        check_key(key)?;
        let (space, engine) = self.split(id)?;
        let (value, t) = engine.get(space, at, key)?;
        let Some(value) = value else {
            return Ok((None, t));
        };
        let value_len = value.len();
        let value = match range {
            None => value,
            Some(ByteRange { offset, len }) => {
                let end = offset.checked_add(len).filter(|&end| end <= value_len);
                let Some(end) = end else {
                    return Err(DeviceError::RangeOutsideValue {
                        offset,
                        len,
                        value_len,
                    });
                };
                value[offset..end].to_vec()
            }
        };
        Ok((Some(Retrieved { value, value_len }), t))
    }

    fn delete(&mut self, at: SimTime, id: NamespaceId, key: &[u8]) -> Result<SimTime> {
        if self.journal.is_some() {
            let operation = BatchOp::Delete {
                namespace: id,
                key: key.to_vec(),
            };
            return self.logged_single(at, operation);
        }
        check_key(key)?;
        let (space, engine) = self.split(id)?;
        let t = match engine.delete(space, at, key) {
            Ok(t) => t,
            // As for stores: collect other namespaces' garbage and try once more.
            Err(DeviceError::CapacityExceeded(_)) => {
                let t = self.device_gc(at, true)?;
                let (space, engine) = self.split(id)?;
                engine.delete(space, t, key)?
            }
            Err(error) => return Err(error),
        };
        self.device_gc(t, false)
    }

    fn exist(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        keys: &[&[u8]],
    ) -> Result<(Vec<bool>, SimTime)> {
        for key in keys {
            check_key(key)?;
        }
        let (space, engine) = self.split(id)?;
        let mut t = at;
        let mut answers = Vec::with_capacity(keys.len());
        for key in keys {
            let (present, done) = engine.contains(space, t, key)?;
            t = done;
            answers.push(present);
        }
        Ok((answers, t))
    }

    pub(crate) fn batch(&mut self, at: SimTime, operations: &[BatchOp]) -> Result<SimTime> {
        let refuse = |index: usize, error: DeviceError| DeviceError::BatchOperation {
            index,
            source: Box::new(error),
        };
        if operations.len() > self.config.batch_operations_max {
            return Err(DeviceError::BatchTooLarge {
                len: operations.len(),
                max: self.config.batch_operations_max,
            });
        }
        // 1. Limits and namespaces.
        for (index, operation) in operations.iter().enumerate() {
            let (namespace, key) = match operation {
                BatchOp::Store {
                    namespace,
                    key,
                    value,
                    ..
                } => {
                    self.check_value(value).map_err(|e| refuse(index, e))?;
                    (*namespace, key)
                }
                BatchOp::Delete { namespace, key } => (*namespace, key),
            };
            check_key(key).map_err(|e| refuse(index, e))?;
            if !self.namespaces.contains_key(&namespace.0) {
                return Err(refuse(index, DeviceError::NamespaceUnknown(namespace)));
            }
        }
        // 2. Presence conditions, each seeing the batch's earlier operations.
        let mut t = at;
        let mut overlay: BTreeMap<(u32, &[u8]), bool> = BTreeMap::new();
        for (index, operation) in operations.iter().enumerate() {
            match operation {
                BatchOp::Store {
                    namespace,
                    key,
                    mode,
                    ..
                } => {
                    if *mode != StoreMode::Upsert {
                        let present = match overlay.get(&(namespace.0, key.as_slice())) {
                            Some(&present) => present,
                            None => {
                                let (space, engine) = self.split(*namespace)?;
                                let (present, done) = engine.contains(space, t, key)?;
                                t = done;
                                present
                            }
                        };
                        match (mode, present) {
                            (StoreMode::UpdateOnly, false) => {
                                return Err(refuse(index, DeviceError::KeyMissing))
                            }
                            (StoreMode::InsertOnly, true) => {
                                return Err(refuse(index, DeviceError::KeyExists))
                            }
                            _ => {}
                        }
                    }
                    overlay.insert((namespace.0, key.as_slice()), true);
                }
                BatchOp::Delete { namespace, key } => {
                    overlay.insert((namespace.0, key.as_slice()), false);
                }
            }
        }
        // 3. Room in each L0 for its part of the batch (flushing first changes no key's value).
        let mut l0_share: BTreeMap<u32, u64> = BTreeMap::new();
        for operation in operations {
            let (namespace, key, value) = operation.parts();
            let bytes = match self.namespaces.get(&namespace.0) {
                Some(found) => found.engine.staged_bytes(key, value),
                None => return Err(DeviceError::NamespaceUnknown(namespace)),
            };
            *l0_share.entry(namespace.0).or_insert(0) += bytes;
        }
        for (&namespace, &bytes) in &l0_share {
            let (space, engine) = self.split(NamespaceId(namespace))?;
            t = engine.prepare_stage(space, t, bytes)?;
        }
        // 4. Capacity and quotas, counting the batch's earlier stores.
        let mut staged_device = 0u64;
        let mut staged_namespace: BTreeMap<u32, u64> = BTreeMap::new();
        for (index, operation) in operations.iter().enumerate() {
            let BatchOp::Store {
                namespace,
                key,
                value,
                ..
            } = operation
            else {
                continue;
            };
            let staged = staged_namespace.entry(namespace.0).or_insert(0);
            self.check_quota(*namespace, key, value.len(), *staged)
                .map_err(|e| refuse(index, e))?;
            let footprint = self.space.record_footprint(key.len(), value.len());
            *staged += footprint;
            let engine = match self.namespaces.get(&namespace.0) {
                Some(found) => &found.engine,
                None => return Err(refuse(index, DeviceError::NamespaceUnknown(*namespace))),
            };
            engine
                .admit_put(&self.space, key, value.len(), staged_device)
                .map_err(|e| refuse(index, e))?;
            staged_device += footprint;
        }
        // The record is durable (as the sync policy says) before anything is applied; from here
        // on nothing can refuse the batch.
        t = self.log_operations(t, operations)?;
        // 5. Apply: staging into L0 cannot fail.
        for operation in operations {
            let (namespace, key, value) = operation.parts();
            if let Some(found) = self.namespaces.get_mut(&namespace.0) {
                found.engine.stage(key, value);
            }
        }
        // 6. Flush what grew past its size; GC.
        for &namespace in l0_share.keys() {
            let space = &mut self.space;
            if let Some(found) = self.namespaces.get_mut(&namespace) {
                t = found.engine.settle(space, t)?;
            }
        }
        let t = self.device_gc(t, false)?;
        self.after_logged_command(t)
    }

    fn iter_open(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        options: IterOptions,
    ) -> Result<(IteratorId, SimTime)> {
        let (start, prefix) = match &options.start {
            IterStart::Key(key) => (key.as_slice(), &[][..]),
            IterStart::Prefix(prefix) => (prefix.as_slice(), prefix.as_slice()),
        };
        check_bound(start)?;
        if options.prefetch_degree > PREFETCH_DEGREE_MAX {
            return Err(DeviceError::PrefetchDegreeTooLarge {
                degree: options.prefetch_degree,
                max: PREFETCH_DEGREE_MAX,
            });
        }
        let namespace = self.namespace(id)?;
        if !namespace.spec.preset.supports_iterators() {
            return Err(DeviceError::IteratorsUnsupported(
                namespace.spec.preset.name().to_string(),
            ));
        }
        if self.iterators.len() >= self.config.iterators_open_max {
            return Err(DeviceError::IteratorsExhausted {
                max: self.config.iterators_open_max,
            });
        }
        let snapshot = match self.namespace(id)?.lsm() {
            Some(tree) => tree.snapshot(),
            None => return Err(DeviceError::NamespaceUnknown(id)),
        };
        let token = self.space.protect(id.0);
        let mut iter = SnapshotIter::new(
            snapshot,
            prefix,
            options.keys_only,
            options.prefetch_degree,
            options.index_prefetch,
        );
        let t = match iter.seek(&mut self.space, at, start) {
            Ok(t) => t,
            Err(error) => {
                self.space.unprotect(id.0, token);
                return Err(error.into());
            }
        };
        let iterator = self.next_iterator;
        self.next_iterator += 1;
        self.iterators.insert(
            iterator,
            OpenIterator {
                namespace: id.0,
                iter,
                token,
            },
        );
        Ok((IteratorId(iterator), t))
    }

    fn open_iterator(&mut self, id: IteratorId) -> Result<&mut OpenIterator> {
        if self.orphaned.contains(&id.0) {
            return Err(DeviceError::IteratorNamespaceDeleted(id));
        }
        self.iterators
            .get_mut(&id.0)
            .ok_or(DeviceError::IteratorUnknown(id))
    }

    fn iter_seek(&mut self, at: SimTime, id: IteratorId, key: &[u8]) -> Result<SimTime> {
        check_bound(key)?;
        self.open_iterator(id)?;
        let space = &mut self.space;
        let Some(open) = self.iterators.get_mut(&id.0) else {
            return Err(DeviceError::IteratorUnknown(id));
        };
        Ok(open.iter.seek(space, at, key)?)
    }

    fn iter_next(
        &mut self,
        at: SimTime,
        id: IteratorId,
        byte_budget: usize,
    ) -> Result<(NextBatch, SimTime)> {
        self.open_iterator(id)?;
        let space = &mut self.space;
        let Some(open) = self.iterators.get_mut(&id.0) else {
            return Err(DeviceError::IteratorUnknown(id));
        };
        let (entries, t) = open.iter.next(space, at, byte_budget)?;
        Ok((
            NextBatch {
                entries,
                end: open.iter.is_finished(),
            },
            t,
        ))
    }

    fn iter_close(&mut self, id: IteratorId) -> Result<()> {
        if self.orphaned.remove(&id.0) {
            return Ok(());
        }
        let open = self
            .iterators
            .remove(&id.0)
            .ok_or(DeviceError::IteratorUnknown(id))?;
        self.space.unprotect(open.namespace, open.token);
        Ok(())
    }

    fn iter_info(&mut self, id: IteratorId) -> Result<IteratorInfo> {
        self.open_iterator(id)?;
        let Some(open) = self.iterators.get(&id.0) else {
            return Err(DeviceError::IteratorUnknown(id));
        };
        let Some(namespace) = self.namespaces.get(&open.namespace) else {
            return Err(DeviceError::IteratorUnknown(id));
        };
        Ok(IteratorInfo {
            namespace: NamespaceId(open.namespace),
            snapshot_dram_bytes: namespace
                .lsm_ref()
                .map_or(0, |tree| tree.snapshot_dram_bytes(open.iter.snapshot())),
            stats: open.iter.stats(),
        })
    }
}

/// Whether namespaces of a preset can serve iterators (the hash presets cannot: refused with
/// [`DeviceError::IteratorsUnsupported`]).
pub fn supports_iterators(preset: impl Into<PresetKind>) -> bool {
    preset.into().supports_iterators()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Device>();
    }
}
