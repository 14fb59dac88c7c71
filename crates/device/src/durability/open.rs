//! The device side of the write-ahead-log protocol: format, recovery (checkpoint + replay),
//! logging of commands, checkpoints, and the file-media entry points.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kvssd_flash::{Flash, Geometry, SimTime, TimingProfile};
use kvssd_space::{Space, SpaceError};

use crate::device::{Core, Durability};
use crate::durability::checkpoint::Mode;
use crate::durability::journal::{Hook, Journal, SyncPolicy, SUPERBLOCK_BLOCKS};
use crate::durability::recovery::{self, RecoveryReport};
use crate::durability::wal::{WalOp, WalRecord};
use crate::{BatchOp, Device, DeviceConfig, DeviceError, NamespaceId, Result};

fn policy(config: &DeviceConfig) -> SyncPolicy {
    match config.durability {
        Durability::WriteAheadLog(policy) => policy,
        Durability::Volatile | Durability::PowerLossProtection => SyncPolicy::EveryCommand,
    }
}

fn poisoned<T>(_: T) -> DeviceError {
    DeviceError::Poisoned
}

fn install(core: &mut Core, journal: Journal) -> Arc<Mutex<Journal>> {
    let shared = Arc::new(Mutex::new(journal));
    core.space
        .set_erase_hook(Some(Box::new(Hook(Arc::clone(&shared)))));
    core.journal = Some(Arc::clone(&shared));
    shared
}

/// Opens a flash array under a write-ahead log: formats a blank one, recovers one that holds a
/// device.
pub(crate) fn open_durable(mut flash: Flash, config: DeviceConfig) -> Result<Device> {
    let wall = Instant::now();
    let start = flash.quiescent_at();
    let plp = config.durability == Durability::PowerLossProtection;
    if plp && flash.media_kind() != kvssd_flash::MediaKind::Ram {
        return Err(DeviceError::ModeMismatch(
            "power-loss protection is simulated flash only; file media need a write-ahead log"
                .into(),
        ));
    }
    match recovery::read_superblock(&mut flash, start)? {
        None if plp => crate::durability::plp::format(flash, config),
        None => format(flash, config),
        Some((sequence, root, next_pages, t)) => match (root.mode, plp) {
            (Mode::Plp, true) => {
                crate::durability::plp::recover(flash, config, sequence, root, next_pages, start, t)
            }
            (Mode::Wal, false) => {
                recover(flash, config, sequence, root, next_pages, start, t, wall)
            }
            (Mode::Plp, false) => Err(DeviceError::ModeMismatch(
                "the image was written with power-loss protection, not a write-ahead log".into(),
            )),
            (Mode::Wal, true) => Err(DeviceError::ModeMismatch(
                "the image was written with a write-ahead log, not power-loss protection".into(),
            )),
        },
    }
}

fn format(flash: Flash, config: DeviceConfig) -> Result<Device> {
    let at = flash.quiescent_at();
    let mut space = Space::open(flash, config.space.clone()).map_err(|error| match error {
        SpaceError::Config(what) if what.contains("not erased") => DeviceError::NotADevice,
        other => DeviceError::Space(other),
    })?;
    for block in SUPERBLOCK_BLOCKS {
        space.reserve_block(block)?;
    }
    let sync = policy(&config);
    let journal = Journal::fresh(&space, Mode::Wal, sync)?;
    let mut core = Core::new(space, config);
    install(&mut core, journal);
    core.full_checkpoint(at)?;
    Ok(Device {
        core: Mutex::new(core),
    })
}

#[allow(clippy::too_many_arguments)]
fn recover(
    mut flash: Flash,
    config: DeviceConfig,
    sequence: u64,
    root: crate::durability::checkpoint::Root,
    next_pages: [u32; 2],
    start: SimTime,
    at: SimTime,
    wall: Instant,
) -> Result<Device> {
    let (checkpoint, checkpoint_pages, t) = recovery::read_checkpoint(&mut flash, at, &root)?;
    let (records, log_pages_read, log_end, t) = recovery::read_log(&mut flash, t, &root)?;
    let mut system: BTreeSet<u64> = SUPERBLOCK_BLOCKS.into_iter().collect();
    system.extend(root.log_blocks.iter().copied());
    if let Some(location) = &root.checkpoint {
        system.extend(location.extents.iter().map(|extent| extent.block));
    }
    let (mut core, mut t) = recovery::restore_core(flash, config, &checkpoint, &system, t)?;
    // Each engine's part goes on into later checkpoints, and log records it already holds are not
    // replayed into it again.
    let mut replay_from: BTreeMap<u32, u64> = BTreeMap::new();
    for (namespace, from, bytes) in &checkpoint.parts {
        if core.namespaces.contains_key(namespace) {
            replay_from.insert(*namespace, *from);
            core.space.publish_part_at(*namespace, *from, bytes.clone());
        }
    }
    // Blocks of namespaces deleted before the checkpoint whose erase the cut interrupted.
    let owners = core.space.block_owners();
    for owner in owners {
        if !core.namespaces.contains_key(&owner) {
            t = core.space.release_namespace(t, owner)?;
        }
    }
    let mut journal = Journal::resume(
        &core.space,
        Mode::Wal,
        policy(&core.config),
        sequence,
        next_pages,
        root.next_log_id,
    )?;
    journal.adopt(&root);
    journal.next_lsn = checkpoint.next_lsn;
    let shared = install(&mut core, journal);
    core.sync_table()?;
    core.space.mark_durable();
    // Replay without logging: the records are in the log already.
    core.journal = None;
    let mut records_replayed = 0;
    let mut operations_replayed = 0;
    let records_found = records.len() as u64;
    for (lsn, record) in records {
        {
            let mut journal = shared.lock().map_err(poisoned)?;
            journal.next_lsn = journal.next_lsn.max(lsn + 1);
        }
        core.space.set_replay_lsn(lsn);
        let applies = |namespace: u32| replay_from.get(&namespace).is_none_or(|&from| lsn >= from);
        match record {
            WalRecord::Ops(ops) => {
                let ops: Vec<WalOp> = ops
                    .into_iter()
                    .filter(|op| {
                        core.namespaces.contains_key(&op.namespace()) && applies(op.namespace())
                    })
                    .collect();
                if ops.is_empty() {
                    continue;
                }
                operations_replayed += ops.len() as u64;
                t = core.apply_replayed(t, &ops)?;
            }
            WalRecord::CreateNamespace { namespace, spec } => {
                if core.namespaces.contains_key(&namespace) || namespace < core.next_namespace {
                    continue;
                }
                core.next_namespace = namespace;
                let created = core.create_namespace(spec)?;
                debug_assert_eq!(created, NamespaceId(namespace));
                core.sync_table_with(&shared)?;
            }
            WalRecord::DeleteNamespace { namespace } => {
                if core.namespaces.remove(&namespace).is_none() {
                    continue;
                }
                core.space.remove_part(namespace);
                core.sync_table_with(&shared)?;
                // A checkpoint without the namespace before its blocks are erased.
                t = shared
                    .lock()
                    .map_err(poisoned)?
                    .checkpoint(&mut core.space, t, false)?;
                t = core.space.release_namespace(t, namespace)?;
            }
        }
        records_replayed += 1;
    }
    core.journal = Some(shared);
    t = core.full_checkpoint(t)?;
    core.recovery = Some(RecoveryReport {
        superblock_sequence: sequence,
        checkpoint_lsn: checkpoint.next_lsn,
        checkpoint_pages,
        namespaces: checkpoint.namespaces.len(),
        log_pages_read,
        records_found,
        records_replayed,
        operations_replayed,
        log_end: format!("{log_end:?}"),
        simulated_ns: t.saturating_sub(start),
        wall: wall.elapsed(),
    });
    Ok(Device {
        core: Mutex::new(core),
    })
}

impl Core {
    /// Copies the namespace table into the journal (it goes into every checkpoint).
    pub(crate) fn sync_table(&mut self) -> Result<()> {
        let Some(shared) = self.journal.clone() else {
            return Ok(());
        };
        self.sync_table_with(&shared)
    }

    fn sync_table_with(&mut self, shared: &Arc<Mutex<Journal>>) -> Result<()> {
        let mut journal = shared.lock().map_err(poisoned)?;
        journal.next_namespace = self.next_namespace;
        journal.namespaces = self
            .namespaces
            .iter()
            .map(|(&id, namespace)| (id, namespace.spec.clone()))
            .collect();
        Ok(())
    }

    fn activity(&self) -> u64 {
        self.namespaces
            .values()
            .map(|namespace| namespace.engine.activity_count())
            .sum()
    }

    /// Publishes every tree's state and writes a checkpoint that trims the log.
    pub(crate) fn full_checkpoint(&mut self, at: SimTime) -> Result<SimTime> {
        let Some(shared) = self.journal.clone() else {
            return Ok(at);
        };
        self.sync_table_with(&shared)?;
        let mut journal = shared.lock().map_err(poisoned)?;
        let next_lsn = journal.next_lsn;
        self.publish_engine_states(next_lsn);
        self.space.set_replay_lsn(next_lsn);
        let t = journal.checkpoint(&mut self.space, at, true)?;
        drop(journal);
        self.activity_at_checkpoint = self.activity();
        Ok(t)
    }

    /// With a log: a checkpoint after a namespace was created or deleted.
    pub(crate) fn checkpoint_if_durable(&mut self) -> Result<()> {
        if self.journal.is_some() {
            let at = self.space.flash().quiescent_at();
            self.full_checkpoint(at)?;
        }
        Ok(())
    }

    fn append(&mut self, at: SimTime, record: &WalRecord) -> Result<SimTime> {
        let Some(shared) = self.journal.clone() else {
            return Ok(at);
        };
        let (lsn, t) = shared
            .lock()
            .map_err(poisoned)?
            .append(&mut self.space, at, record)?;
        self.space.set_replay_lsn(lsn);
        Ok(t)
    }

    pub(crate) fn log_namespace_created(
        &mut self,
        id: u32,
        spec: &crate::NamespaceSpec,
    ) -> Result<()> {
        let at = self.space.flash().quiescent_at();
        self.append(
            at,
            &WalRecord::CreateNamespace {
                namespace: id,
                spec: spec.clone(),
            },
        )?;
        Ok(())
    }

    pub(crate) fn log_namespace_deleted(&mut self, at: SimTime, id: u32) -> Result<SimTime> {
        let t = self.append(at, &WalRecord::DeleteNamespace { namespace: id })?;
        self.space.remove_part(id);
        Ok(t)
    }

    /// Logs a validated batch (stores as upserts) before it is applied.
    pub(crate) fn log_operations(
        &mut self,
        at: SimTime,
        operations: &[BatchOp],
    ) -> Result<SimTime> {
        if self.journal.is_none() {
            return Ok(at);
        }
        let ops = operations
            .iter()
            .map(|operation| match operation {
                BatchOp::Store {
                    namespace,
                    key,
                    value,
                    ..
                } => WalOp::Store {
                    namespace: namespace.0,
                    key: key.clone(),
                    value: value.clone(),
                },
                BatchOp::Delete { namespace, key } => WalOp::Delete {
                    namespace: namespace.0,
                    key: key.clone(),
                },
            })
            .collect();
        self.append(at, &WalRecord::Ops(ops))
    }

    /// After a logged command: a checkpoint if the trees wrote or erased flash structure, or the
    /// log has grown to its limit.
    pub(crate) fn after_logged_command(&mut self, at: SimTime) -> Result<SimTime> {
        let Some(shared) = self.journal.clone() else {
            return Ok(at);
        };
        let log_blocks = shared.lock().map_err(poisoned)?.log_blocks();
        if self.activity() != self.activity_at_checkpoint
            || log_blocks >= self.config.checkpoint_log_blocks.max(1)
        {
            return self.full_checkpoint(at);
        }
        Ok(at)
    }

    /// A store or delete under a log: validated, logged and applied as a batch of one.
    pub(crate) fn logged_single(&mut self, at: SimTime, operation: BatchOp) -> Result<SimTime> {
        let unwrap = |error: DeviceError| match error {
            DeviceError::BatchOperation { source, .. } => *source,
            other => other,
        };
        let operations = [operation];
        match self.batch(at, &operations).map_err(unwrap) {
            // Collect other namespaces' garbage and try once more (a refused batch changed nothing).
            Err(DeviceError::CapacityExceeded(_)) => {
                let t = self.device_gc(at, true)?;
                self.batch(t, &operations).map_err(unwrap)
            }
            other => other,
        }
    }

    /// Applies replayed operations (every namespace exists): staged into L0 as a batch.
    fn apply_replayed(&mut self, at: SimTime, ops: &[WalOp]) -> Result<SimTime> {
        let mut t = at;
        let mut share: BTreeMap<u32, u64> = BTreeMap::new();
        for op in ops {
            let (key, value) = match op {
                WalOp::Store { key, value, .. } => (key, Some(value.as_slice())),
                WalOp::Delete { key, .. } => (key, None),
            };
            if let Some(found) = self.namespaces.get(&op.namespace()) {
                *share.entry(op.namespace()).or_insert(0) += found.engine.staged_bytes(key, value);
            }
        }
        for (&namespace, &bytes) in &share {
            if let Some(found) = self.namespaces.get_mut(&namespace) {
                t = found.engine.prepare_stage(&mut self.space, t, bytes)?;
            }
        }
        for op in ops {
            let (namespace, key, value) = match op {
                WalOp::Store {
                    namespace,
                    key,
                    value,
                } => (namespace, key, Some(value.as_slice())),
                WalOp::Delete { namespace, key } => (namespace, key, None),
            };
            if let Some(found) = self.namespaces.get_mut(namespace) {
                found.engine.stage(key, value);
            }
        }
        for &namespace in share.keys() {
            if let Some(found) = self.namespaces.get_mut(&namespace) {
                t = found.engine.settle(&mut self.space, t)?;
            }
        }
        self.device_gc(t, false)
    }
}

impl Device {
    /// Formats a file (or block device) at `path` as a new device under a write-ahead log.
    pub fn create(
        path: &Path,
        geometry: Geometry,
        timing: Option<TimingProfile>,
        config: DeviceConfig,
    ) -> Result<Device> {
        if !matches!(config.durability, Durability::WriteAheadLog(_)) {
            return Err(DeviceError::ModeMismatch(
                "file media keep data only under a write-ahead log".into(),
            ));
        }
        let flash = Flash::create(path, geometry, timing).map_err(SpaceError::Flash)?;
        Device::open(flash, config)
    }

    /// Opens the device in the file (or block device) at `path` and recovers it.
    pub fn open_path(
        path: &Path,
        timing: Option<TimingProfile>,
        config: DeviceConfig,
    ) -> Result<Device> {
        if !matches!(config.durability, Durability::WriteAheadLog(_)) {
            return Err(DeviceError::ModeMismatch(
                "file media keep data only under a write-ahead log".into(),
            ));
        }
        let flash = Flash::open(path, None, timing).map_err(SpaceError::Flash)?;
        let device = Device::open(flash, config)?;
        Ok(device)
    }

    /// What the recovery at open found and did (`None` for a device formatted or volatile).
    pub fn recovery_report(&self) -> Result<Option<RecoveryReport>> {
        Ok(self.lock()?.recovery.clone())
    }

    /// Makes every logged command durable (programs the log's partly filled page); returns when
    /// it is. A no-op without a log.
    pub fn sync(&self, at: SimTime) -> Result<SimTime> {
        let mut core = self.lock()?;
        let core = &mut *core;
        let Some(shared) = core.journal.clone() else {
            return Ok(at);
        };
        let t = shared
            .lock()
            .map_err(poisoned)?
            .sync_log(&mut core.space, at)?;
        Ok(t)
    }

    /// The sequence number of the newest log record that is durable (`None` before the first, or
    /// without a log). Under group commit a command is acknowledged once this reaches its record.
    pub fn durable_sequence(&self) -> Result<Option<u64>> {
        let core = self.lock()?;
        match &core.journal {
            Some(shared) => Ok(shared.lock().map_err(poisoned)?.durable_lsn),
            None => Ok(None),
        }
    }

    /// Writes a checkpoint now (and trims the log). A no-op without a log.
    pub fn checkpoint(&self, at: SimTime) -> Result<SimTime> {
        self.lock()?.full_checkpoint(at)
    }

    /// Checkpoints counts: (checkpoints written, log pages written) since open.
    pub fn durability_counts(&self) -> Result<(u64, u64)> {
        let core = self.lock()?;
        match &core.journal {
            Some(shared) => {
                let journal = shared.lock().map_err(poisoned)?;
                Ok((journal.checkpoints_written, journal.log_pages_written))
            }
            None => Ok((0, 0)),
        }
    }

    /// Closes cleanly: a checkpoint (so the next open replays nothing) and a sync of the media.
    pub fn close(self, at: SimTime) -> Result<Flash> {
        let mut core = self.core.into_inner().map_err(poisoned)?;
        if core.plp.is_some() {
            // Power-loss protection: a clean close is a dump without the cut.
            let report = core.write_dump(at)?;
            core.last_dump = Some(report);
        }
        core.full_checkpoint(at)?;
        core.space.set_erase_hook(None);
        core.journal = None;
        let mut flash = core.space.into_flash();
        flash.sync().map_err(SpaceError::Flash)?;
        Ok(flash)
    }

    /// Whether the flash has lost power (a command that failed this way may or may not have been
    /// applied: it was in flight).
    pub fn is_power_cut(&self) -> Result<bool> {
        Ok(self.lock()?.space.flash().is_power_cut())
    }

    /// Gives the flash back without writing anything (after a power cut: recover by opening it
    /// again).
    pub fn into_flash(self) -> Result<Flash> {
        let mut core = self.core.into_inner().map_err(poisoned)?;
        core.space.set_erase_hook(None);
        core.journal = None;
        Ok(core.space.into_flash())
    }
}
