//! The write-ahead log under the device's commands: every command is logged before it is applied,
//! checkpoints follow the log's growth, and replay at recovery applies logged
//! operations as a batch. The durability layer below frames the records and writes the log, the
//! checkpoints and the superblock.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use kvssd_engine::EngineError;
use kvssd_flash::SimTime;

use super::{poisoned, Core};
use crate::durability::journal::Journal;
use crate::durability::wal::{WalOp, WalRecord};
use crate::{BatchOp, Device, DeviceError, DurabilityCounts, Result};

/// The log may grow to this many times the live checkpoint's pages before the next checkpoint.
pub(crate) const CHECKPOINT_LOG_RATIO: u64 = 8;

impl Core {
    /// Copies the namespace table into the journal (it goes into every checkpoint).
    pub(super) fn sync_table(&mut self) -> Result<()> {
        let Some(shared) = self.journal.clone() else {
            return Ok(());
        };
        self.sync_table_with(&shared)
    }

    pub(super) fn sync_table_with(&mut self, shared: &Arc<Mutex<Journal>>) -> Result<()> {
        let mut journal = shared.lock().map_err(poisoned)?;
        journal.next_namespace = self.next_namespace;
        journal.namespaces = self
            .namespaces
            .iter()
            .map(|(&id, namespace)| (id, namespace.spec.clone()))
            .collect();
        Ok(())
    }

    /// Publishes every tree's state and writes a checkpoint that trims the log.
    pub(super) fn full_checkpoint(&mut self, at: SimTime) -> Result<SimTime> {
        let Some(shared) = self.journal.clone() else {
            return Ok(at);
        };
        let (flushed, at) = self.flush_before_checkpoint(at)?;
        let mut journal = self.publish_for_checkpoint(&shared)?;
        let t = journal.checkpoint(&mut self.space, at, true)?;
        self.checkpoint_flushed_pages = flushed;
        drop(journal);
        self.checkpoint_due = false;
        self.checkpoint_overdue = false;
        Ok(t)
    }

    /// Before a checkpoint that trims the log: each namespace flushes what it has staged if the
    /// checkpoint would otherwise carry enough of it (an L0 at least a quarter full;
    /// [`kvssd_engine::Engine::flush_before_checkpoint`]). Runs before the journal is locked, as
    /// any flush does: GC may erase a block, and the erase hook writes a checkpoint of its own.
    /// Returns the pages the pairs flushed would have taken in the checkpoint, and when the
    /// flushes finished.
    fn flush_before_checkpoint(&mut self, at: SimTime) -> Result<(u64, SimTime)> {
        let mut t = at;
        let mut bytes = 0;
        for namespace in self.namespaces.values_mut() {
            let (flushed, done) = namespace
                .engine
                .flush_before_checkpoint(&mut self.space, t)?;
            bytes += flushed;
            t = done;
        }
        let page_bytes = u64::from(self.space.geometry().page_bytes);
        Ok((bytes.div_ceil(page_bytes), t))
    }

    /// The namespace table and every tree's state published for a checkpoint that trims the
    /// log; returns the journal, locked, to write it.
    fn publish_for_checkpoint<'a>(
        &mut self,
        shared: &'a Arc<Mutex<Journal>>,
    ) -> Result<MutexGuard<'a, Journal>> {
        self.sync_table_with(shared)?;
        let journal = shared.lock().map_err(poisoned)?;
        let next_lsn = journal.next_lsn;
        self.publish_engine_states(next_lsn);
        self.space.set_replay_lsn(next_lsn);
        Ok(journal)
    }

    /// The first step of [`Core::full_checkpoint`] for the checkpoint thread
    /// ([`crate::durability::journal::Journal::prepare_checkpoint`]): the sync it must run
    /// without the lock before [`Core::name_checkpoint`], or `None` if the checkpoint is
    /// already whole.
    /// `flushed_bytes`: pairs the caller flushed for it just before (the checkpoint thread's
    /// flush, [`kvssd_engine::Engine::detach_flush`]), counted with those it flushes itself.
    pub(super) fn prepare_checkpoint(
        &mut self,
        at: SimTime,
        flushed_bytes: u64,
    ) -> Result<Option<(kvssd_flash::SyncHandle, u32)>> {
        let Some(shared) = self.journal.clone() else {
            return Ok(None);
        };
        let (flushed, at) = self.flush_before_checkpoint(at)?;
        let page_bytes = u64::from(self.space.geometry().page_bytes);
        let flushed = flushed + flushed_bytes.div_ceil(page_bytes);
        let mut journal = self.publish_for_checkpoint(&shared)?;
        let (_, sync) = journal.prepare_checkpoint(&mut self.space, at)?;
        self.checkpoint_flushed_pages = flushed;
        drop(journal);
        self.checkpoint_due = false;
        self.checkpoint_overdue = false;
        Ok(sync)
    }

    /// Names the checkpoint `id` prepared by [`Core::prepare_checkpoint`], whose pages the
    /// caller's sync made durable, in a superblock copy (unless a command committed it first);
    /// the caller syncs again without the lock, then calls [`Core::release_checkpoint`].
    pub(super) fn name_checkpoint(&mut self, at: SimTime, id: u32) -> Result<SimTime> {
        let Some(shared) = self.journal.clone() else {
            return Ok(at);
        };
        let mut journal = shared.lock().map_err(poisoned)?;
        Ok(journal.name_prepared(&mut self.space, at, Some(id))?)
    }

    /// Once a sync has made the copy naming a checkpoint durable: erases what it superseded.
    pub(super) fn release_checkpoint(&mut self, at: SimTime) -> Result<SimTime> {
        let Some(shared) = self.journal.clone() else {
            return Ok(at);
        };
        let mut journal = shared.lock().map_err(poisoned)?;
        Ok(journal.release_named(&mut self.space, at)?)
    }

    /// With a log: a checkpoint after a namespace was created or deleted.
    pub(super) fn checkpoint_if_durable(&mut self) -> Result<()> {
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

    pub(super) fn log_namespace_created(
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

    pub(super) fn log_namespace_deleted(&mut self, at: SimTime, id: u32) -> Result<SimTime> {
        let t = self.append(at, &WalRecord::DeleteNamespace { namespace: id })?;
        self.space.remove_part(id);
        Ok(t)
    }

    /// Logs a validated batch (stores as upserts) before it is applied.
    pub(super) fn log_operations(
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

    /// After a logged command: a checkpoint (which trims the log) once the log holds
    /// `checkpoint_log_blocks` blocks or [`CHECKPOINT_LOG_RATIO`] times the pages of the live
    /// checkpoint, whichever is more. A checkpoint rewrites every index's DRAM state (the pinned
    /// levels with it), so checkpointing after every flush made its cost grow with the index on
    /// every flush; tied to the log's growth, the checkpoints write at most
    /// 1 / `CHECKPOINT_LOG_RATIO` of what the log writes, and replay at recovery reads at most
    /// that many times the checkpoint. Flushes, merges and GC between checkpoints need none of
    /// their own: their new pages go to blocks the checkpoint calls free (recovery erases them and
    /// replay writes them again), and a block the checkpoint reaches is erased only after the
    /// space layer's erase hook has written a newer one.
    pub(super) fn after_logged_command(&mut self, at: SimTime) -> Result<SimTime> {
        let Some(shared) = self.journal.clone() else {
            return Ok(at);
        };
        let journal = shared.lock().map_err(poisoned)?;
        let floor =
            self.config.checkpoint_log_blocks.max(1) as u64 * u64::from(journal.pages_per_block());
        let checkpoint_pages = journal.checkpoint_pages() + self.checkpoint_flushed_pages;
        let limit = floor.max(CHECKPOINT_LOG_RATIO * checkpoint_pages);
        let due = journal.log_pages() >= limit;
        let overdue = journal.log_pages() >= 2 * limit;
        drop(journal);
        if due && self.unlocked_file_io {
            // Written once the lock is released and the file synced without it
            // (`Device::after_command`, by the checkpoint thread if it runs), so that the lock is
            // not held while the writes of the whole log's span go to stable storage.
            self.checkpoint_due = true;
            self.checkpoint_overdue = overdue;
            return Ok(at);
        }
        if due {
            return self.full_checkpoint(at);
        }
        Ok(at)
    }

    /// A store or delete under a log: validated, logged and applied as a batch of one.
    pub(super) fn logged_single(&mut self, at: SimTime, operation: BatchOp) -> Result<SimTime> {
        let unwrap = |error: DeviceError| match error {
            DeviceError::BatchOperation { source, .. } => *source,
            other => other,
        };
        // A batch collects other namespaces' garbage and tries once more when refused for room.
        self.batch(at, &[operation]).map_err(unwrap)
    }

    /// Applies replayed operations (every namespace exists): staged into L0 as a batch.
    pub(super) fn apply_replayed(&mut self, at: SimTime, ops: &[WalOp]) -> Result<SimTime> {
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
                t = match found.engine.prepare_stage(&mut self.space, t, bytes) {
                    Ok(done) => done,
                    // As a batch does: other namespaces' garbage first, then once more (making
                    // room changes no key's value).
                    Err(EngineError::CapacityExceeded(_)) => {
                        let t = self.device_gc(t, true)?;
                        match self.namespaces.get_mut(&namespace) {
                            Some(found) => found.engine.prepare_stage(&mut self.space, t, bytes)?,
                            None => t,
                        }
                    }
                    Err(error) => return Err(error.into()),
                };
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

    /// Publishes every namespace's engine state as the part the next checkpoint or dump saves
    /// (replayed from log record `replay_from` on), and drops the parts of deleted namespaces.
    pub(super) fn publish_engine_states(&mut self, replay_from: u64) {
        for (&id, namespace) in &self.namespaces {
            let state = namespace.engine.durable_state();
            self.space.publish_part_at(id, replay_from, state);
        }
        let stale: Vec<u32> = self
            .space
            .parts()
            .keys()
            .copied()
            .filter(|id| !self.namespaces.contains_key(id))
            .collect();
        for id in stale {
            self.space.remove_part(id);
        }
    }
}

/// Syncs that may run at once ([`SyncGate`]).
const SYNCS_AT_ONCE_MAX: usize = 2;

/// Group commit: a writer whose records a running sync covers waits for it; any other starts a
/// sync of its own at once, beside those running (at most [`SYNCS_AT_ONCE_MAX`]), for itself and
/// every writer that logged before it: one partly filled log page and one `fdatasync` for all of
/// them. The file system runs concurrent `fdatasync`s of one file in parallel (on this machine,
/// writing a fresh 8,448-byte slot and syncing it: 4.5K times a second from one thread, 7.8K from
/// two), where one sync at a time made two writers that sync after every store take turns. Four
/// at once did worse than two for four such writers (`scripts/compare.sh --sync every --threads
/// 4 --workloads load,a --records 50000 --ops 50000`: Load at 7.2K stores a second, against 9.5K
/// and 11.8K in two runs with two).
#[derive(Debug, Default)]
pub(crate) struct SyncGate {
    /// The newest record each running sync covers at least (`None`: nothing was logged).
    running: Mutex<Vec<Option<u64>>>,
    finished: Condvar,
}

/// Removes a sync from the gate's running ones when dropped, so a failing (or panicking) sync
/// never leaves writers waiting.
struct Running<'a> {
    gate: &'a SyncGate,
    covers: Option<u64>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut running = self
            .gate
            .running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(position) = running.iter().position(|&covers| covers == self.covers) {
            running.swap_remove(position);
        }
        self.gate.finished.notify_all();
    }
}

impl Device {
    /// Makes every logged command durable (programs the log's partly filled page); returns when
    /// it is. A no-op without a log.
    ///
    /// On file media the `fdatasync` runs without the device's lock: the page is written under
    /// it, then commands and reads go on while the sync runs, and the records logged before it
    /// began are published as durable ([`Device::durable_sequence`]) once it returns; syncs that
    /// finish out of order never move it back. Concurrent calls share syncs (group commit; see
    /// docs/design.md, "Write-ahead log"): a call whose records a running sync covers waits for
    /// it; any other starts its own beside the running ones.
    pub fn sync(&self, at: SimTime) -> Result<SimTime> {
        let logged = self.logged_sequence()?;
        let gate = &self.shared.syncing;
        let mut running = gate.running.lock().map_err(poisoned)?;
        loop {
            if logged.is_some() && self.durable_sequence()? >= logged {
                return Ok(at);
            }
            let covered = logged.is_some() && running.iter().any(|&covers| covers >= logged);
            if !covered && running.len() < SYNCS_AT_ONCE_MAX {
                break;
            }
            running = gate.finished.wait(running).map_err(poisoned)?;
        }
        running.push(logged);
        drop(running);
        let _running = Running {
            gate,
            covers: logged,
        };
        self.sync_now(at)
    }

    /// One sync of the log: see [`Device::sync`].
    fn sync_now(&self, at: SimTime) -> Result<SimTime> {
        let (t, pending, shared) = {
            let mut core = self.lock()?;
            let core = &mut *core;
            let Some(shared) = core.journal.clone() else {
                return Ok(at);
            };
            let (t, pending) = shared
                .lock()
                .map_err(poisoned)?
                .begin_sync(&mut core.space, at)?;
            (t, pending, shared)
        };
        if let Some(pending) = pending {
            pending
                .handle
                .sync()
                .map_err(kvssd_space::SpaceError::Flash)?;
            shared.lock().map_err(poisoned)?.finish_sync(pending);
        }
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

    /// The sequence number of the newest log record written, durable or not (`None` before the
    /// first, or without a log). Once a command returns its record is at most this, so a reader
    /// that waits until [`Device::durable_sequence`] reaches it has seen nothing a crash can undo.
    pub fn logged_sequence(&self) -> Result<Option<u64>> {
        let core = self.lock()?;
        match &core.journal {
            Some(shared) => Ok(shared.lock().map_err(poisoned)?.next_lsn.checked_sub(1)),
            None => Ok(None),
        }
    }

    /// Writes a checkpoint now (and trims the log). A no-op without a log.
    pub fn checkpoint(&self, at: SimTime) -> Result<SimTime> {
        self.lock()?.full_checkpoint(at)
    }

    /// What the durability machinery has written and synced since open (all zero without a log).
    pub fn durability_counts(&self) -> Result<DurabilityCounts> {
        let core = self.lock()?;
        match &core.journal {
            Some(shared) => {
                let journal = shared.lock().map_err(poisoned)?;
                Ok(DurabilityCounts {
                    checkpoints_written: journal.checkpoints_written,
                    log_pages_written: journal.log_pages_written,
                    media_syncs: journal.media_syncs,
                })
            }
            None => Ok(DurabilityCounts::default()),
        }
    }

    /// Whether every record logged so far is durable (always, without a log).
    pub(crate) fn all_records_durable(&self) -> bool {
        let Ok(core) = self.lock() else {
            return false;
        };
        match &core.journal {
            None => true,
            Some(shared) => shared.lock().is_ok_and(|journal| {
                journal.durable_lsn.map_or(0, |lsn| lsn + 1) >= journal.next_lsn
            }),
        }
    }
}
