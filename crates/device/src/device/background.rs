//! The device's background threads, on an untimed file image with a write-ahead log.
//!
//! The checkpoint thread writes the checkpoint a full log calls for, so the command that filled
//! the log returns at once and the others go on while the file is synced. The writer thread
//! flushes write buffers (L0) once they are half full: it packs their values onto pages without
//! the lock ([`kvssd_engine::DetachedFlush::prepare`]), then takes the lock to place the pages,
//! merge the keys into L1 and compact ([`kvssd_engine::Engine::attach_flush`]), so that a command
//! rarely finds L0 full and flushes it itself. It also runs device-wide GC when a command finds
//! free blocks below the device's threshold, one victim per hold of the lock. Two threads, so
//! that a flush never waits for a checkpoint's syncs.
//!
//! A command that finds the log at its limit asks the checkpoint thread for a checkpoint
//! ([`Signal::request`]) after releasing the device's lock. The thread syncs the file without the
//! lock (every page written since the last sync reaches stable storage meanwhile, while commands
//! go on), then takes the lock and writes the checkpoint, whose own two syncs find little left to
//! write. Commands keep logging meanwhile; once the log holds twice its limit, a command waits
//! for the thread before it returns ([`Signal::wait_checkpoint`]), so the log, and the replay at
//! the next open, stay bounded. A checkpoint, flush or GC a thread fails makes every later
//! command fail with [`DeviceError::Background`]: what was logged stays in the log, and reopening
//! the image recovers it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use kvssd_space::SpaceError;

use super::Shared;
use crate::{DeviceError, Result};

/// Victims the writer thread collects for one request of device-wide GC.
const GC_VICTIMS_PER_JOB: usize = 16;

/// Requests to the device's background threads and what they report back.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    state: Mutex<State>,
    changed: Condvar,
    /// Whether a job failed (so that commands need not take the mutex to learn it).
    failed: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// A checkpoint was asked for and the checkpoint thread has not started on it.
    checkpoint_requested: bool,
    /// A flush of the write buffers was asked for and the writer thread has not started on it.
    flush_requested: bool,
    /// Device-wide GC was asked for and the writer thread has not started on it.
    gc_requested: bool,
    /// The checkpoint thread is writing a checkpoint.
    checkpointing: bool,
    /// The writer thread is flushing or collecting.
    writing: bool,
    /// The writer thread is flushing.
    flushing: bool,
    /// Flushes the writer thread has finished.
    flushes_finished: u64,
    /// The device is being dropped or closed: the threads end.
    stop: bool,
    /// Why a job failed; the threads end.
    failure: Option<String>,
}

/// The device's background threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Writes the checkpoints a full log calls for.
    Checkpoints,
    /// Flushes write buffers half full, and runs device-wide GC.
    Writes,
}

/// What a thread was asked for.
enum Job {
    Checkpoint,
    Flush,
    Gc,
}

impl Signal {
    fn state(&self) -> MutexGuard<'_, State> {
        // The state's fields are plain flags, consistent between statements.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets a request flag (one request stands for any number made before its thread starts on
    /// it).
    fn ask(&self, flag: impl FnOnce(&mut State) -> &mut bool) {
        let mut state = self.state();
        let flag = flag(&mut state);
        if !*flag {
            *flag = true;
            self.changed.notify_all();
        }
    }

    /// Asks the checkpoint thread for a checkpoint.
    pub(crate) fn request(&self) {
        self.ask(|state| &mut state.checkpoint_requested);
    }

    /// Asks the writer thread to flush the write buffers that are half full.
    pub(crate) fn request_flush(&self) {
        self.ask(|state| &mut state.flush_requested);
    }

    /// Asks the writer thread for device-wide GC, one victim at a time, until free blocks are
    /// back at the threshold.
    pub(crate) fn request_gc(&self) {
        self.ask(|state| &mut state.gc_requested);
    }

    /// Waits while `busy` holds and no thread has ended, then reports a failure.
    fn wait_while(&self, busy: impl Fn(&State) -> bool) -> Result<()> {
        let mut state = self.state();
        while busy(&state) && !state.stop && state.failure.is_none() {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(state);
        self.failure()
    }

    /// Returns once the threads have done all that was asked of them (or have ended).
    pub(crate) fn wait_idle(&self) -> Result<()> {
        self.wait_while(|state| {
            state.checkpoint_requested
                || state.flush_requested
                || state.gc_requested
                || state.checkpointing
                || state.writing
        })
    }

    /// Returns once the checkpoint asked for is written (or the thread has ended).
    pub(crate) fn wait_checkpoint(&self) -> Result<()> {
        self.wait_while(|state| state.checkpoint_requested || state.checkpointing)
    }

    /// Returns once the flushes asked for or running now have finished (not those asked for
    /// later: under a steady stream of writes they would never end).
    fn wait_flushes(&self) -> Result<()> {
        let target = {
            let state = self.state();
            state.flushes_finished + u64::from(state.flushing) + u64::from(state.flush_requested)
        };
        self.wait_while(|state| state.flushes_finished < target)
    }

    /// Ends the threads once they have finished the jobs they are running, if any.
    pub(crate) fn stop(&self) {
        self.state().stop = true;
        self.changed.notify_all();
    }

    /// An error if a job of a thread failed.
    pub(crate) fn failure(&self) -> Result<()> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(DeviceError::Background(
            self.state().failure.clone().unwrap_or_default(),
        ))
    }

    /// Waits for a request to `role`'s thread; `None` once the thread is to end. The writer
    /// thread flushes before it collects: a full write buffer stops commands sooner.
    fn next(&self, role: Role) -> Option<Job> {
        let mut state = self.state();
        loop {
            if state.stop || state.failure.is_some() {
                return None;
            }
            match role {
                Role::Checkpoints if state.checkpoint_requested => {
                    state.checkpoint_requested = false;
                    state.checkpointing = true;
                    return Some(Job::Checkpoint);
                }
                Role::Writes if state.flush_requested => {
                    state.flush_requested = false;
                    state.writing = true;
                    state.flushing = true;
                    return Some(Job::Flush);
                }
                Role::Writes if state.gc_requested => {
                    state.gc_requested = false;
                    state.writing = true;
                    return Some(Job::Gc);
                }
                _ => {}
            }
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Records the end of a job of `role`'s thread; `false` if it failed (the threads end).
    fn finished(&self, role: Role, outcome: Result<()>) -> bool {
        let mut state = self.state();
        match role {
            Role::Checkpoints => state.checkpointing = false,
            Role::Writes => {
                state.writing = false;
                if std::mem::take(&mut state.flushing) {
                    state.flushes_finished += 1;
                }
            }
        }
        let ok = match outcome {
            Ok(()) => true,
            Err(error) => {
                state.failure.get_or_insert(error.to_string());
                self.failed.store(true, Ordering::Release);
                false
            }
        };
        self.changed.notify_all();
        ok
    }
}

/// Starts `role`'s thread of a device.
pub(super) fn spawn(shared: Arc<Shared>, role: Role) -> std::io::Result<JoinHandle<()>> {
    let name = match role {
        Role::Checkpoints => "kvssd-checkpoint",
        Role::Writes => "kvssd-writer",
    };
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            while let Some(job) = shared.background.next(role) {
                let outcome = match job {
                    Job::Checkpoint => shared.checkpoint_in_background(),
                    Job::Flush => shared.flush_detached(false).map(|_| ()),
                    Job::Gc => shared.collect_in_background(),
                };
                if !shared.background.finished(role, outcome) {
                    break;
                }
            }
        })
}

impl Shared {
    /// Flushes the write buffers that hold enough (a quarter of their size `for_checkpoint`,
    /// half otherwise): their values are packed onto pages without the lock, then the pages are
    /// placed and the keys merged under it. Returns the bytes of pairs flushed.
    fn flush_detached(&self, for_checkpoint: bool) -> Result<u64> {
        let mut flushes: Vec<_> = {
            let mut locked = self.lock_background()?;
            let core = &mut *locked;
            let space = &core.space;
            core.namespaces
                .values_mut()
                .filter_map(|namespace| namespace.engine.detach_flush(space, for_checkpoint))
                .collect()
        };
        if flushes.is_empty() {
            return Ok(0);
        }
        for flush in &mut flushes {
            flush.prepare();
        }
        let mut locked = self.lock_background()?;
        let core = &mut *locked;
        let mut flushed = 0;
        for flush in flushes {
            // A namespace deleted meanwhile has nothing to flush (ids are never reused).
            let Some(namespace) = core.namespaces.get_mut(&flush.namespace()) else {
                continue;
            };
            let before = namespace.engine.staged_dram_bytes();
            let at = core.space.flash().quiescent_at();
            namespace.engine.attach_flush(&mut core.space, at, flush)?;
            flushed += before.saturating_sub(namespace.engine.staged_dram_bytes());
        }
        Ok(flushed)
    }

    /// Device-wide GC, one victim under each hold of the lock, so that commands run between
    /// victims, until free blocks are back at the threshold, no namespace offers a victim, or
    /// [`GC_VICTIMS_PER_JOB`] were collected (the next command short of blocks asks again, and a
    /// flush asked for meanwhile goes first).
    fn collect_in_background(&self) -> Result<()> {
        for _ in 0..GC_VICTIMS_PER_JOB {
            let mut core = self.lock_background()?;
            let at = core.space.flash().quiescent_at();
            if core.collect_one_victim(at)?.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// The checkpoint a full log asked for (nothing, if another command wrote one meanwhile).
    fn checkpoint_in_background(&self) -> Result<()> {
        // Every page written so far goes to stable storage first, without the lock. Then, under
        // `SyncPolicy::None`, three short steps under the lock: the checkpoint's pages are
        // programmed and the log restarted; a superblock copy names them; what they superseded
        // is erased. Between them the file is synced without the lock while commands go on.
        // Under the other policies the checkpoint is written whole under the lock, and its own
        // syncs find little left after the first.
        let handle = {
            let core = self.lock_background()?;
            if !core.checkpoint_due {
                return Ok(());
            }
            core.space.flash().sync_handle()
        };
        if let Some(handle) = handle {
            handle.sync().map_err(SpaceError::from)?;
        }
        // A write buffer the checkpoint would otherwise carry is flushed first, its values
        // packed without the lock, once the writer thread's flush, if one runs, is placed.
        self.background.wait_flushes()?;
        let flushed = self.flush_detached(true)?;
        let prepared = {
            let mut core = self.lock_background()?;
            if !core.checkpoint_due {
                return Ok(());
            }
            let at = core.space.flash().quiescent_at();
            core.prepare_checkpoint(at, flushed)?
        };
        let Some((handle, id)) = prepared else {
            return Ok(());
        };
        self.finish_checkpoint(&handle, id, true)
    }

    /// The steps of a prepared checkpoint after the first: sync, name, and (with `release`) sync
    /// and release.
    fn finish_checkpoint(
        &self,
        handle: &kvssd_flash::SyncHandle,
        id: u32,
        release: bool,
    ) -> Result<()> {
        handle.sync().map_err(SpaceError::from)?;
        {
            let mut core = self.lock_background()?;
            let at = core.space.flash().quiescent_at();
            core.name_checkpoint(at, id)?;
        }
        if !release {
            return Ok(());
        }
        handle.sync().map_err(SpaceError::from)?;
        let mut core = self.lock_background()?;
        let at = core.space.flash().quiescent_at();
        core.release_checkpoint(at)?;
        Ok(())
    }
}

impl super::Device {
    /// The first step of the checkpoint thread's checkpoint, run now: its pages programmed and
    /// the log restarted, no superblock copy naming them yet. Returns the checkpoint's id for
    /// [`super::Device::commit_prepared_checkpoint`], or `None` if it was written whole (media
    /// that cannot be synced without the lock, or a sync policy other than `None`). For tests
    /// of a crash between the steps; call [`super::Device::wait_for_background`] first.
    #[doc(hidden)]
    pub fn prepare_checkpoint_now(&self) -> Result<Option<u32>> {
        let mut core = self.shared.lock()?;
        let at = core.space.flash().quiescent_at();
        Ok(core.prepare_checkpoint(at, 0)?.map(|(_, id)| id))
    }

    /// The rest: syncs without the lock, names checkpoint `id` in a superblock copy (unless a
    /// command committed it first) and, with `release`, syncs again and erases what it
    /// superseded.
    #[doc(hidden)]
    pub fn commit_prepared_checkpoint(&self, id: u32, release: bool) -> Result<()> {
        let handle = self.shared.lock()?.space.flash().sync_handle();
        let Some(handle) = handle else {
            return Ok(());
        };
        self.shared.finish_checkpoint(&handle, id, release)
    }
}
