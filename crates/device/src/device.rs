//! The device: namespaces over one shared space, the command set, atomic batches and snapshot
//! iterators.

mod background;
mod batch;
mod commands;
mod consistency;
mod iterators;
mod logging;
mod namespaces;
mod open;
mod power;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use kvssd_engine::{Engine, SnapshotIter};
use kvssd_flash::{Counters, Flash, SimTime, WriteBehind};
use kvssd_space::{Space, SpaceError};

use crate::{
    BatchOp, ByteRange, DeviceError, DeviceStats, IterOptions, IteratorId, IteratorInfo,
    NamespaceId, NamespaceInfo, NamespaceSpec, NextBatch, Pairs, PresetKind, Result, Retrieved,
    StoreMode, KEY_BYTES_MAX, VALUE_BYTES_MAX,
};

pub use crate::config::{DeviceConfig, Durability};

/// A namespace: its attributes and its index, whatever engine the preset opened.
struct Namespace {
    spec: NamespaceSpec,
    engine: Box<dyn Engine>,
}

struct OpenIterator {
    namespace: u32,
    iter: SnapshotIter,
    /// The space layer's protection of the blocks the snapshot can reach.
    token: u64,
}

/// Everything behind the device's lock. Its fields are this module's: the command modules below
/// it use them, nothing else in the crate does.
pub(crate) struct Core {
    space: Space,
    config: DeviceConfig,
    value_bytes_max: usize,
    /// On compact media, values must repeat their first 16 bytes ([`kvssd_flash::is_periodic`]).
    periodic_values_only: bool,
    /// On file media without timing, a retrieve reads its value's page after releasing the lock
    /// ([`kvssd_flash::DetachedRead`]) and programs reach the file after it ([`Locked`]), so
    /// commands overlap their file I/O.
    unlocked_file_io: bool,
    /// On file media: the log has reached its limit and a checkpoint is to be written once the
    /// lock is released ([`Device::after_command`]).
    checkpoint_due: bool,
    /// On file media: the log has reached twice its limit, and commands wait for the checkpoint
    /// thread to write one before they return.
    checkpoint_overdue: bool,
    /// Pages of staged pairs the live checkpoint left out because it flushed them first
    /// ([`kvssd_engine::Engine::flush_before_checkpoint`]): the log's limit counts them as part
    /// of the checkpoint, as it counted them when checkpoints carried them.
    checkpoint_flushed_pages: u64,
    /// On file media with the writer thread: device-wide GC runs there, not in commands.
    gc_on_thread: bool,
    /// A command found free blocks below the device-wide threshold: the writer thread is
    /// to collect once the lock is released.
    gc_wanted: bool,
    namespaces: BTreeMap<u32, Namespace>,
    next_namespace: u32,
    iterators: BTreeMap<u64, OpenIterator>,
    next_iterator: u64,
    /// Iterators closed because their namespace was deleted (so `next` can say why).
    orphaned: BTreeSet<u64>,
    device_gc_victims: u64,
    /// The durable structures, with a write-ahead log (shared with the space layer's erase hook).
    journal: Option<std::sync::Arc<Mutex<crate::durability::journal::Journal>>>,
    recovery: Option<crate::durability::RecoveryReport>,
    /// With power-loss protection: the durable structures the dump at a power cut updates.
    plp: Option<crate::durability::journal::Journal>,
    /// With power-loss protection: what the last dump wrote.
    last_dump: Option<crate::durability::plp::DumpReport>,
}

impl Core {
    /// The controller's work on a command besides what its engine charges: fetching and parsing
    /// it, setting up its transfers, posting its completion ([`DeviceConfig::command_ns`]), and
    /// per operation the firmware's own handling of it ([`DeviceConfig::operation_ns`]). Returns
    /// when the operations may start.
    fn begin_command(&mut self, at: SimTime, operations: usize) -> SimTime {
        let cost = self.config.command_ns + operations as u64 * self.config.operation_ns;
        self.space.compute(at, cost)
    }
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
/// it. On simulated flash, work the papers call background (L0 flush, compaction, GC) runs
/// inside the command that triggers it, in the caller's thread; it is background only in
/// simulated time, where it occupies dies, channels and controller cores, so a run stays a
/// function of its configuration and seed. Callers driving simulated time from several threads
/// must issue commands in non-decreasing simulated time (the flash model's rule). On an untimed
/// file image with a write-ahead log, two threads of the device's own (`background`) take that
/// work off the commands: one writes checkpoints, so no command waits for one unless the log has
/// grown to twice its limit; the other flushes a write buffer once it is half full (its values
/// packed without the lock), with the compaction the flush makes due, and runs device-wide GC.
/// A command still flushes or collects itself when it finds L0 full or its engine's own GC
/// threshold reached before the thread has caught up.
pub struct Device {
    shared: Arc<Shared>,
    /// On untimed file media with a log: the thread that writes checkpoints (joined on drop).
    checkpointer: Option<std::thread::JoinHandle<()>>,
    /// On untimed file media with a log: the thread that flushes write buffers and runs
    /// device-wide GC (joined on drop).
    writer: Option<std::thread::JoinHandle<()>>,
}

/// What the device's own threads share with the callers' commands.
pub(crate) struct Shared {
    core: Mutex<Core>,
    /// Log syncs in progress (group commit).
    syncing: logging::SyncGate,
    /// On untimed file media, the pages commands programmed, written to the file after the
    /// command releases the lock ([`Locked`]).
    behind: Option<Arc<WriteBehind>>,
    /// `SyncPolicy::EveryCommand` on file media: a logged command syncs after releasing the
    /// lock ([`Device::sync`], so concurrent commands share syncs).
    sync_after_commands: bool,
    /// Requests to the background threads, and their failure.
    background: background::Signal,
}

/// The device's lock, held for one command. Dropping it releases the lock, frees what the
/// engines let go of meanwhile (the pairs of a flushed write buffer), and then writes the pages
/// the command programmed on file media ([`WriteBehind`]), unless another command is writing
/// queued pages already: that one writes them too, and this command returns without waiting
/// for it while the queue is within its bound (reads find queued pages in the queue, and a sync
/// writes them first). No lock is held across the `pwrite`s, so other commands run meanwhile.
/// A write that fails is reported by every later command and sync.
pub(crate) struct Locked<'a> {
    core: Option<MutexGuard<'a, Core>>,
    behind: Option<&'a WriteBehind>,
    /// The queue's count of slots when the lock was taken: unchanged at release, the command
    /// programmed nothing and has nothing to wait for.
    queued_at_lock: u64,
    /// Held by a background thread of the device: the pages it queued (thousands, for a flush)
    /// are left to the drain without making the next commands wait for them
    /// ([`WriteBehind::allow_queued`]).
    background: bool,
}

impl Deref for Locked<'_> {
    type Target = Core;
    fn deref(&self) -> &Core {
        self.core.as_deref().expect("held until dropped")
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Core {
        self.core.as_deref_mut().expect("held until dropped")
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // What the engines let go of (a flushed write buffer) is freed after the lock.
        let released = self.core.as_mut().map(|core| core.take_released());
        if let (true, Some(behind)) = (self.background, self.behind) {
            behind.allow_queued();
        }
        drop(self.core.take());
        drop(released);
        if let Some(behind) = self.behind {
            if behind.queued_total() != self.queued_at_lock {
                // A failure stays in the queue: the next command and every sync report it.
                let _ = behind.drain_unless_draining();
            }
        }
    }
}

/// Attempts to take the device's lock before sleeping on it ([`Device::acquire`]).
const SPINS_BEFORE_SLEEP: u32 = 20_000;

/// A poisoned lock: a thread panicked while holding it.
fn poisoned<T>(_: T) -> DeviceError {
    DeviceError::Poisoned
}

impl Core {
    /// What the namespaces' engines let go of, for the caller to drop after the lock
    /// (`Engine::take_released`).
    fn take_released(&mut self) -> Vec<Box<dyn Send>> {
        self.namespaces
            .values_mut()
            .filter_map(|namespace| namespace.engine.take_released())
            .collect()
    }

    /// A core over a space, with no namespace and no durability.
    fn new(space: Space, config: DeviceConfig) -> Core {
        let value_bytes_max = config
            .engine
            .value_bytes_max(space.geometry())
            .min(VALUE_BYTES_MAX);
        let periodic_values_only = space.flash().media_kind() == kvssd_flash::MediaKind::Compact;
        let unlocked_file_io =
            matches!(space.flash().media_kind(), kvssd_flash::MediaKind::File(_))
                && space.flash().timing().is_none();
        Core {
            space,
            config,
            value_bytes_max,
            periodic_values_only,
            unlocked_file_io,
            checkpoint_due: false,
            checkpoint_overdue: false,
            checkpoint_flushed_pages: 0,
            gc_on_thread: false,
            gc_wanted: false,
            namespaces: BTreeMap::new(),
            next_namespace: 1,
            iterators: BTreeMap::new(),
            next_iterator: 1,
            orphaned: BTreeSet::new(),
            device_gc_victims: 0,
            journal: None,
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
            return Device::open_durable(flash, config);
        }
        let space = Space::open(flash, config.space.clone())?;
        Device::assemble(Core::new(space, config))
    }

    /// A device around its state: on untimed file media, with the file's writes made after each
    /// command releases the lock.
    fn assemble(mut core: Core) -> Result<Device> {
        let mut behind = None;
        let mut sync_after_commands = false;
        if core.unlocked_file_io {
            let flash = core.space.flash_mut();
            flash.set_write_behind(true).map_err(SpaceError::from)?;
            behind = flash.write_behind();
            if let Some(shared) = &core.journal {
                let mut journal = shared.lock().map_err(poisoned)?;
                if journal.sync == crate::SyncPolicy::EveryCommand {
                    journal.every_command_after_unlock = true;
                    sync_after_commands = true;
                }
            }
        }
        let background_threads = core.unlocked_file_io && core.journal.is_some();
        core.gc_on_thread = background_threads;
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            syncing: logging::SyncGate::default(),
            behind,
            sync_after_commands,
            background: background::Signal::default(),
        });
        // Should a thread not start, commands do its work themselves.
        let (checkpointer, writer) = if background_threads {
            (
                background::spawn(Arc::clone(&shared), background::Role::Checkpoints).ok(),
                background::spawn(Arc::clone(&shared), background::Role::Writes).ok(),
            )
        } else {
            (None, None)
        };
        if background_threads && writer.is_none() {
            shared.core.lock().map_err(poisoned)?.gc_on_thread = false;
        }
        Ok(Device {
            shared,
            checkpointer,
            writer,
        })
    }

    /// After a logged command returned `done` and released the lock `core`: on file media, a
    /// checkpoint that came due, then under `EveryCommand` the sync that makes the command
    /// durable, shared with concurrent commands. With the checkpoint thread running the command
    /// only asks it for the checkpoint (and waits for it only if the log has grown to twice its
    /// limit); without it, the command syncs the file without the lock (so the checkpoint's own
    /// syncs find little left to write) and writes the checkpoint itself. With the writer thread
    /// running, the command asks it to flush a write buffer half full and to collect when free
    /// blocks are below the device's threshold.
    fn after_command(&self, mut core: Locked<'_>, done: SimTime) -> Result<SimTime> {
        if std::mem::take(&mut core.gc_wanted) {
            self.shared.background.request_gc();
        }
        // A write buffer half full is flushed by the writer thread, its values packed without
        // the lock, before a command finds it full and flushes it itself.
        if self.writer.is_some()
            && core
                .namespaces
                .values()
                .any(|namespace| namespace.engine.flush_detachable())
        {
            self.shared.background.request_flush();
        }
        let due = core.checkpoint_due;
        if due && self.checkpointer.is_some() {
            let overdue = core.checkpoint_overdue;
            drop(core);
            self.shared.background.request();
            if overdue {
                self.shared.background.wait_checkpoint()?;
            }
        } else if due {
            let handle = core.space.flash().sync_handle();
            drop(core);
            if let Some(handle) = handle {
                handle.sync().map_err(SpaceError::from)?;
            }
            let mut core = self.lock()?;
            if core.checkpoint_due {
                core.full_checkpoint(done)?;
            }
        } else {
            drop(core);
        }
        if self.shared.sync_after_commands {
            return self.sync(done);
        }
        Ok(done)
    }

    fn lock(&self) -> Result<Locked<'_>> {
        self.shared.lock()
    }

    /// Locks the device for a command issued at `at`, telling the flash the command clock: the
    /// controller's background thread may issue work ready by then, and no later (a command's own
    /// dependent operations, issued later in simulated time, do not advance it).
    fn lock_at(&self, at: SimTime) -> Result<Locked<'_>> {
        let mut core = self.lock()?;
        core.space.advance_clock(at);
        Ok(core)
    }

    /// Stops the background threads (a job they are running is finished first) and hands back
    /// the device's state.
    fn into_core(mut self) -> Result<Core> {
        self.stop_background();
        let shared = Arc::clone(&self.shared);
        drop(self);
        let shared = Arc::into_inner(shared).ok_or(DeviceError::Poisoned)?;
        shared.core.into_inner().map_err(poisoned)
    }

    fn stop_background(&mut self) {
        self.shared.background.stop();
        for thread in [self.checkpointer.take(), self.writer.take()]
            .into_iter()
            .flatten()
        {
            // A panic in the thread poisoned the lock, which every later command reports.
            let _ = thread.join();
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.stop_background();
    }
}

impl Shared {
    /// Takes the lock for a command; fails if a page write or a background checkpoint has failed.
    fn lock(&self) -> Result<Locked<'_>> {
        self.lock_as(false)
    }

    /// Takes the lock for the device's background thread ([`Locked::background`]).
    fn lock_background(&self) -> Result<Locked<'_>> {
        self.lock_as(true)
    }

    fn lock_as(&self, background: bool) -> Result<Locked<'_>> {
        self.background.failure()?;
        let core = self.acquire()?;
        let behind = self.behind.as_deref();
        if let Some(behind) = behind {
            behind.failure().map_err(SpaceError::from)?;
        }
        Ok(Locked {
            core: Some(core),
            behind,
            queued_at_lock: behind.map_or(0, WriteBehind::queued_total),
            background,
        })
    }

    /// Takes the lock, spinning a while before sleeping on it: a command holds it for
    /// microseconds, less than a sleeping thread takes to be woken, so a thread that slept on
    /// every contended command would mostly wait to be scheduled.
    fn acquire(&self) -> Result<MutexGuard<'_, Core>> {
        for _ in 0..SPINS_BEFORE_SLEEP {
            match self.core.try_lock() {
                Ok(core) => return Ok(core),
                Err(std::sync::TryLockError::Poisoned(_)) => return Err(DeviceError::Poisoned),
                Err(std::sync::TryLockError::WouldBlock) => std::hint::spin_loop(),
            }
        }
        self.core.lock().map_err(poisoned)
    }
}

impl Device {
    /// Returns once the device's own threads have done the work asked of them: on an untimed file
    /// image, the checkpoint a full log asked for, the flush of a write buffer half full and
    /// device-wide GC. A no-op elsewhere. (A test that abandons a device to stand for a crash
    /// calls it first, so that no work of the abandoned device runs while the image is opened
    /// again.)
    pub fn wait_for_background(&self) -> Result<()> {
        if self.checkpointer.is_some() || self.writer.is_some() {
            self.shared.background.wait_idle()?;
        }
        Ok(())
    }

    /// Flash operations issued so far (the crash harness counts its crash points in them).
    pub(crate) fn flash_operations(&self) -> u64 {
        self.lock()
            .map_or(0, |core| core.space.flash().operations())
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

    /// The id of the namespace named `name`, if there is one.
    pub fn namespace_by_name(&self, name: &str) -> Result<Option<NamespaceId>> {
        let core = self.lock()?;
        Ok(core
            .namespaces
            .iter()
            .find(|(_, namespace)| namespace.spec.name.as_deref() == Some(name))
            .map(|(&id, _)| NamespaceId(id)))
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
        let mut core = self.lock_at(at)?;
        let at = core.begin_command(at, 1);
        let done = core.store(at, namespace, key, value, mode)?;
        self.after_command(core, done)
    }

    /// The value of `key` (or `range` of it), with the whole value's length; `None` if absent.
    pub fn retrieve(
        &self,
        at: SimTime,
        namespace: NamespaceId,
        key: &[u8],
        range: Option<ByteRange>,
    ) -> Result<(Option<Retrieved>, SimTime)> {
        let mut core = self.lock_at(at)?;
        let at = core.begin_command(at, 1);
        if core.unlocked_file_io {
            let (record, done) = match core.retrieve_detached(at, namespace, key, range)? {
                commands::Retrieval::Done(found, done) => return Ok((found, done)),
                commands::Retrieval::Pending(record, done) => (record, done),
            };
            drop(core);
            if let Some(value) = record.finish_value(key)? {
                return Ok((Some(commands::cut(value, range)?), done));
            }
            // Erased meanwhile, or failing its checks: read again under the lock.
            core = self.lock_at(at)?;
        }
        core.retrieve(at, namespace, key, range)
    }

    /// Deletes `key` (deleting an absent key is not an error).
    pub fn delete(&self, at: SimTime, namespace: NamespaceId, key: &[u8]) -> Result<SimTime> {
        let mut core = self.lock_at(at)?;
        let at = core.begin_command(at, 1);
        let done = core.delete(at, namespace, key)?;
        self.after_command(core, done)
    }

    /// Warns the device that `keys` are about to be retrieved, so that the host memory their
    /// retrieves read first is fetched together rather than one miss after another: a
    /// simulator's speed on a card of many gigabytes (a client scanning a hash namespace with
    /// point reads knows its next keys). Changes nothing the simulation sees: no time, counter
    /// or state. Returns whether the namespace's engine has a use for such warnings (one that
    /// has none ignores them, and a caller may stop making them).
    pub fn prefetch_gets(&self, namespace: NamespaceId, keys: &[&[u8]]) -> Result<bool> {
        self.lock()?.prefetch_gets(namespace, keys)
    }

    /// Whether each key has a value, one answer per key, in order.
    pub fn exist(
        &self,
        at: SimTime,
        namespace: NamespaceId,
        keys: &[&[u8]],
    ) -> Result<(Vec<bool>, SimTime)> {
        self.lock_at(at)?.exist(at, namespace, keys)
    }

    /// Up to `count` pairs of the namespace with keys `>= start`, in key order, read from one
    /// consistent view (PinK's range query; YCSB-E). Namespaces whose engine keeps no key order
    /// refuse it ([`DeviceError::ScansUnsupported`]); `count` is at most [`crate::SCAN_PAIRS_MAX`].
    pub fn scan(
        &self,
        at: SimTime,
        namespace: NamespaceId,
        start: &[u8],
        count: usize,
    ) -> Result<(Pairs, SimTime)> {
        let mut core = self.lock_at(at)?;
        if core.unlocked_file_io {
            let pending = core.scan_detached(at, namespace, start, count)?;
            drop(core);
            if let Some(found) = pending.finish()? {
                return Ok(found);
            }
            // A page erased meanwhile, or failing its checks: scan again under the lock.
            core = self.lock_at(at)?;
        }
        core.scan(at, namespace, start, count)
    }

    /// Applies stores and deletes across namespaces atomically: all of them, or (with an error)
    /// none. Operations see the effects of earlier ones in the batch (an insert-only store after
    /// a delete of the same key succeeds).
    pub fn batch(&self, at: SimTime, operations: &[BatchOp]) -> Result<SimTime> {
        let mut core = self.lock_at(at)?;
        let at = core.begin_command(at, operations.len());
        let done = core.batch(at, operations)?;
        self.after_command(core, done)
    }

    /// Opens an iterator over a snapshot of the namespace as it is now, positioned at its start.
    pub fn iter_open(
        &self,
        at: SimTime,
        namespace: NamespaceId,
        options: IterOptions,
    ) -> Result<(IteratorId, SimTime)> {
        self.lock_at(at)?.iter_open(at, namespace, options)
    }

    /// Repositions an iterator at the first key `>= key` of its snapshot (within its prefix).
    pub fn iter_seek(&self, at: SimTime, iterator: IteratorId, key: &[u8]) -> Result<SimTime> {
        self.lock_at(at)?.iter_seek(at, iterator, key)
    }

    /// The next entries: at least one unless at the end, then more while they fit `byte_budget`
    /// (keys and values).
    pub fn iter_next(
        &self,
        at: SimTime,
        iterator: IteratorId,
        byte_budget: usize,
    ) -> Result<(NextBatch, SimTime)> {
        self.lock_at(at)?.iter_next(at, iterator, byte_budget)
    }

    /// Closes an iterator, releasing its snapshot (and what GC could not collect because of it).
    pub fn iter_close(&self, iterator: IteratorId) -> Result<()> {
        self.lock()?.iter_close(iterator)
    }

    /// An open iterator's snapshot DRAM and read counts.
    pub fn iter_info(&self, iterator: IteratorId) -> Result<IteratorInfo> {
        self.lock()?.iter_info(iterator)
    }

    /// The simulated time by which every flash die and controller core is idle (benchmarks start a
    /// measured run there, so it does not inherit the previous one's background work).
    pub fn quiescent_at(&self) -> Result<SimTime> {
        Ok(self.lock()?.space.flash().quiescent_at())
    }

    /// The flash operations counted so far, by purpose: [`DeviceStats::flash`] alone, for a
    /// driver that reads them around every request.
    pub fn flash_counters(&self) -> Result<Counters> {
        Ok(self.lock()?.space.flash().counters())
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
            controller: core.space.flash().busy(),
            media_bytes: core.space.flash().media_bytes(),
            index_cache: core.space.flash().index_cache_stats(),
            late_issues: core.space.flash().late_issues(),
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
