//! Opening a device on a flash array that holds durable state, or formatting a blank one, and
//! closing it: the device's side of the write-ahead-log and power-loss-protection protocols. The
//! durability layer below reads and writes the bytes (superblock, checkpoint, log, dump); this
//! module decides what to read, rebuilds the device from it and replays the log through the
//! device's own commands.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kvssd_flash::{Flash, Geometry, SimTime, TimingProfile};
use kvssd_space::{Space, SpaceError};

use super::{poisoned, Core, Namespace};
use crate::durability::checkpoint::{Checkpoint, Mode, Root};
use crate::durability::error::CheckpointError;
use crate::durability::journal::{Hook, Journal, SyncPolicy, SUPERBLOCK_BLOCKS};
use crate::durability::recovery::{self, RecoveryReport};
use crate::durability::wal::{WalOp, WalRecord};
use crate::{Device, DeviceConfig, DeviceError, Durability, NamespaceId, Result};

/// The sync policy of a configuration's log (every command, for modes without one).
fn policy(config: &DeviceConfig) -> SyncPolicy {
    match config.durability {
        Durability::WriteAheadLog(policy) => policy,
        Durability::Volatile | Durability::PowerLossProtection => SyncPolicy::EveryCommand,
    }
}

/// Takes over a blank array for formatting; an array that holds something else is not a device.
fn take_blank(flash: Flash, config: &DeviceConfig) -> Result<Space> {
    Space::open(flash, config.space.clone()).map_err(|error| match error {
        SpaceError::NotErased { .. } => DeviceError::NotADevice,
        other => DeviceError::Space(other),
    })
}

/// What recovery read from the superblock.
struct Found {
    sequence: u64,
    root: Root,
    next_pages: [u32; 2],
    start: SimTime,
    at: SimTime,
    wall: Instant,
}

impl Device {
    /// A device over a flash array that holds durable state or is blank (every mode but
    /// [`Durability::Volatile`]): formats a blank one, recovers one that holds a device, refuses
    /// anything else with a typed error naming what is wrong.
    pub(super) fn open_durable(mut flash: Flash, config: DeviceConfig) -> Result<Device> {
        let wall = Instant::now();
        let start = flash.quiescent_at();
        let plp = config.durability == Durability::PowerLossProtection;
        if plp && !flash.media_kind().is_volatile() {
            return Err(DeviceError::ModeMismatch(
                "power-loss protection is simulated flash only; file media need a write-ahead log"
                    .into(),
            ));
        }
        let core = match recovery::read_superblock(&mut flash, start)? {
            None if plp => Core::format_plp(flash, config)?,
            None => Core::format_wal(flash, config)?,
            Some((sequence, root, next_pages, at)) => {
                let found = Found {
                    sequence,
                    root,
                    next_pages,
                    start,
                    at,
                    wall,
                };
                match (found.root.mode, plp) {
                    (Mode::Plp, true) => Core::recover_plp(flash, config, found)?,
                    (Mode::Wal, false) => Core::recover_wal(flash, config, found)?,
                    (Mode::Plp, false) => return Err(DeviceError::ModeMismatch(
                        "the image was written with power-loss protection, not a write-ahead log"
                            .into(),
                    )),
                    (Mode::Wal, true) => return Err(DeviceError::ModeMismatch(
                        "the image was written with a write-ahead log, not power-loss protection"
                            .into(),
                    )),
                }
            }
        };
        let mut core = core;
        core.size_index_cache();
        Device::assemble(core)
    }

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

    /// Closes cleanly: a checkpoint (so the next open replays nothing) and a sync of the media.
    pub fn close(self, at: SimTime) -> Result<Flash> {
        let mut core = self.into_core()?;
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

    /// Gives the flash back without writing anything (after a power cut: recover by opening it
    /// again).
    pub fn into_flash(self) -> Result<Flash> {
        let mut core = self.into_core()?;
        core.space.set_erase_hook(None);
        core.journal = None;
        Ok(core.space.into_flash())
    }
}

impl Core {
    /// Hands the journal to the core and to the space layer's erase hook.
    fn install(&mut self, journal: Journal) -> Arc<Mutex<Journal>> {
        let shared = Arc::new(Mutex::new(journal));
        self.space
            .set_erase_hook(Some(Box::new(Hook(Arc::clone(&shared)))));
        self.journal = Some(Arc::clone(&shared));
        shared
    }

    /// Formats a blank array under a write-ahead log: superblock blocks reserved, a first
    /// checkpoint of the empty device.
    fn format_wal(flash: Flash, config: DeviceConfig) -> Result<Core> {
        let at = flash.quiescent_at();
        let mut space = take_blank(flash, &config)?;
        for block in SUPERBLOCK_BLOCKS {
            space.reserve_block(block)?;
        }
        let sync = policy(&config);
        let journal = Journal::fresh(&space, Mode::Wal, sync)?;
        let mut core = Core::new(space, config);
        core.install(journal);
        core.full_checkpoint(at)?;
        Ok(core)
    }

    /// Formats a blank array for power-loss protection: superblock blocks reserved, a superblock
    /// copy that names no dump.
    fn format_plp(flash: Flash, config: DeviceConfig) -> Result<Core> {
        let at = flash.quiescent_at();
        let mut space = take_blank(flash, &config)?;
        for block in SUPERBLOCK_BLOCKS {
            space.reserve_block(block)?;
        }
        let mut journal = Journal::fresh(&space, Mode::Plp, SyncPolicy::EveryCommand)?;
        journal.mark_running(&mut space, at)?;
        let mut core = Core::new(space, config);
        core.plp = Some(journal);
        Ok(core)
    }

    /// Recovers a device under a write-ahead log: the newest checkpoint, then the log's records
    /// replayed through the device's commands.
    fn recover_wal(mut flash: Flash, config: DeviceConfig, found: Found) -> Result<Core> {
        let Found {
            sequence,
            root,
            next_pages,
            start,
            at,
            wall,
        } = found;
        let (checkpoint, checkpoint_pages, t) = recovery::read_checkpoint(&mut flash, at, &root)?;
        let (records, log_pages_read, log_end, t) = recovery::read_log(&mut flash, t, &root)?;
        let mut system: BTreeSet<u64> = SUPERBLOCK_BLOCKS.into_iter().collect();
        system.extend(root.log_blocks.iter().copied());
        if let Some(location) = &root.checkpoint {
            system.extend(location.extents.iter().map(|extent| extent.block));
        }
        let (mut core, mut t) = Core::restore(flash, config, &checkpoint, &system, t)?;
        // Each engine's part goes on into later checkpoints, and log records it already holds are
        // not replayed into it again.
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
        let shared = core.install(journal);
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
            let applies =
                |namespace: u32| replay_from.get(&namespace).is_none_or(|&from| lsn >= from);
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
        Ok(core)
    }

    /// Recovers a device from the power-loss dump its superblock names.
    fn recover_plp(mut flash: Flash, config: DeviceConfig, found: Found) -> Result<Core> {
        let Found {
            sequence,
            root,
            next_pages,
            start,
            at,
            ..
        } = found;
        let wall = Instant::now();
        if root.checkpoint.is_none() {
            return Err(DeviceError::DumpMissing);
        }
        let (checkpoint, checkpoint_pages, t) = recovery::read_checkpoint(&mut flash, at, &root)?;
        let mut system: BTreeSet<u64> = SUPERBLOCK_BLOCKS.into_iter().collect();
        if let Some(location) = &root.checkpoint {
            system.extend(location.extents.iter().map(|extent| extent.block));
        }
        let (mut core, mut t) = Core::restore(flash, config, &checkpoint, &system, t)?;
        let mut journal = Journal::resume(
            &core.space,
            Mode::Plp,
            SyncPolicy::EveryCommand,
            sequence,
            next_pages,
            root.next_log_id,
        )?;
        journal.adopt(&root);
        t = journal.mark_running(&mut core.space, t)?;
        core.plp = Some(journal);
        core.recovery = Some(RecoveryReport {
            superblock_sequence: sequence,
            checkpoint_lsn: checkpoint.next_lsn,
            checkpoint_pages,
            namespaces: checkpoint.namespaces.len(),
            log_pages_read: 0,
            records_found: 0,
            records_replayed: 0,
            operations_replayed: 0,
            log_end: "no log (power-loss protection)".into(),
            simulated_ns: t.saturating_sub(start),
            wall: wall.elapsed(),
        });
        Ok(core)
    }

    /// Rebuilds the device's DRAM state from a checkpoint (or a power-loss dump): the space layer,
    /// with `system` blocks (superblock, log, the checkpoint itself) kept out of its pool; every
    /// namespace's engine from its saved part; then each index's valid bytes, recounted by reading
    /// it.
    pub(crate) fn restore(
        flash: Flash,
        config: DeviceConfig,
        checkpoint: &Checkpoint,
        system: &BTreeSet<u64>,
        at: SimTime,
    ) -> Result<(Core, SimTime)> {
        let (space, mut t) =
            Space::restore(flash, config.space.clone(), &checkpoint.space, system, at).map_err(
                |error| match error {
                    SpaceError::StateMalformed(what) => {
                        DeviceError::CheckpointCorrupt(CheckpointError::SpaceState(what))
                    }
                    other => DeviceError::Space(other),
                },
            )?;
        let mut core = Core::new(space, config);
        core.next_namespace = checkpoint.next_namespace;
        for (id, spec) in &checkpoint.namespaces {
            let saved = checkpoint
                .parts
                .iter()
                .find(|(namespace, _, _)| namespace == id)
                .map(|(_, _, bytes)| bytes.as_slice());
            let engine = core.open_engine(*id, spec.preset, saved)?;
            if let Some(logs) = &spec.logs {
                // Only takes effect for a namespace that never wrote (its writer was not saved).
                let _ = core.space.set_namespace_logs(*id, logs);
            }
            core.space
                .set_namespace_confined(*id, engine.confined_to_logs());
            core.namespaces.insert(
                *id,
                Namespace {
                    spec: spec.clone(),
                    engine,
                },
            );
        }
        for (&id, namespace) in &mut core.namespaces {
            t = namespace
                .engine
                .account_valid(&mut core.space, t)
                .map_err(|source| DeviceError::Recovery {
                    namespace: id,
                    source,
                })?;
        }
        Ok((core, t))
    }
}
