//! The checkpoint thread: on an untimed file image with a write-ahead log, the checkpoint a full
//! log calls for is written by a thread of the device's own, so the command that filled the log
//! returns at once and the others go on while the file is synced.
//!
//! A command that finds the log at its limit asks the thread for a checkpoint
//! ([`Signal::request`]) after releasing the device's lock. The thread syncs the file without the
//! lock (every page written since the last sync reaches stable storage meanwhile, while commands
//! go on), then takes the lock and writes the checkpoint, whose own two syncs find little left to
//! write. Commands keep logging meanwhile; once the log holds twice its limit, a command waits for
//! the thread before it returns ([`Signal::wait_idle`]), so the log, and the replay at the next
//! open, stay bounded. A checkpoint the thread fails to write makes every later command fail with
//! [`DeviceError::Background`]: what was logged stays in the log, and reopening the image
//! recovers it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use kvssd_space::SpaceError;

use super::Shared;
use crate::{DeviceError, Result};

/// Requests to the checkpoint thread and what it reports back.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    state: Mutex<State>,
    changed: Condvar,
    /// Whether a checkpoint failed (so that commands need not take the mutex to learn it).
    failed: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// A checkpoint was asked for and the thread has not started on it.
    requested: bool,
    /// The thread is writing a checkpoint.
    running: bool,
    /// The device is being dropped or closed: the thread ends.
    stop: bool,
    /// Why a checkpoint failed; the thread has ended.
    failure: Option<String>,
}

impl Signal {
    fn state(&self) -> MutexGuard<'_, State> {
        // The state's fields are plain flags, consistent between statements.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks the thread for a checkpoint (one request stands for any number made before the thread
    /// starts on it).
    pub(crate) fn request(&self) {
        let mut state = self.state();
        if !state.requested {
            state.requested = true;
            self.changed.notify_all();
        }
    }

    /// Returns once the thread has written the checkpoint asked for (or has ended).
    pub(crate) fn wait_idle(&self) -> Result<()> {
        let mut state = self.state();
        while (state.requested || state.running) && !state.stop && state.failure.is_none() {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(state);
        self.failure()
    }

    /// Ends the thread once it has finished the checkpoint it is writing, if any.
    pub(crate) fn stop(&self) {
        self.state().stop = true;
        self.changed.notify_all();
    }

    /// An error if a checkpoint written by the thread failed.
    pub(crate) fn failure(&self) -> Result<()> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(DeviceError::Background(
            self.state().failure.clone().unwrap_or_default(),
        ))
    }

    /// Waits for a request; `false` once the thread is to end.
    fn next(&self) -> bool {
        let mut state = self.state();
        while !state.requested && !state.stop {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.stop {
            return false;
        }
        state.requested = false;
        state.running = true;
        true
    }

    /// Records the end of a checkpoint; `false` if it failed (the thread ends).
    fn finished(&self, outcome: Result<()>) -> bool {
        let mut state = self.state();
        state.running = false;
        let ok = match outcome {
            Ok(()) => true,
            Err(error) => {
                state.failure = Some(error.to_string());
                self.failed.store(true, Ordering::Release);
                false
            }
        };
        self.changed.notify_all();
        ok
    }
}

/// Starts the checkpoint thread of a device.
pub(super) fn spawn(shared: Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("kvssd-checkpoint".into())
        .spawn(move || {
            while shared.background.next() {
                let outcome = shared.checkpoint_in_background();
                if !shared.background.finished(outcome) {
                    break;
                }
            }
        })
}

impl Shared {
    /// The checkpoint a full log asked for (nothing, if another command wrote one meanwhile).
    fn checkpoint_in_background(&self) -> Result<()> {
        // Every page written so far goes to stable storage first, without the lock. Then, under
        // `SyncPolicy::None`, three short steps under the lock: the checkpoint's pages are
        // programmed and the log restarted; a superblock copy names them; what they superseded
        // is erased. Between them the file is synced without the lock while commands go on.
        // Under the other policies the checkpoint is written whole under the lock, and its own
        // syncs find little left after the first.
        let handle = {
            let core = self.lock()?;
            if !core.checkpoint_due {
                return Ok(());
            }
            core.space.flash().sync_handle()
        };
        if let Some(handle) = handle {
            handle.sync().map_err(SpaceError::from)?;
        }
        let prepared = {
            let mut core = self.lock()?;
            if !core.checkpoint_due {
                return Ok(());
            }
            let at = core.space.flash().quiescent_at();
            core.prepare_checkpoint(at)?
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
            let mut core = self.lock()?;
            let at = core.space.flash().quiescent_at();
            core.name_checkpoint(at, id)?;
        }
        if !release {
            return Ok(());
        }
        handle.sync().map_err(SpaceError::from)?;
        let mut core = self.lock()?;
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
        Ok(core.prepare_checkpoint(at)?.map(|(_, id)| id))
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
