//! Page writes to a file image made after the flash's lock is released.
//!
//! With write-behind on ([`crate::Flash::set_write_behind`]), a program on file media places the
//! page's slot in a queue instead of calling `pwrite`; [`WriteBehind::drain`], called by whoever
//! holds a handle once it has released its own locks, writes the queued slots. Until a slot is
//! written, reads take it from the queue, so no reader ever sees the file without it. A slot
//! leaves the queue only after its `pwrite` returned, and only if it was not replaced meanwhile.
//! One drain runs at a time, so two versions of a slot never race to the file; a caller that
//! finds one running may leave its slots to it ([`WriteBehind::drain_unless_draining`]). A sync
//! drains first, so it covers every program made before it, as without write-behind.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};

use crate::{FlashError, Result};

/// The queue of page slots programmed but not yet written to the file. Shared by the file media
/// and the handles ([`crate::Flash::write_behind`]) that drain it.
pub struct WriteBehind {
    file: Arc<File>,
    path: PathBuf,
    slot_offset: u64,
    slot_bytes: u64,
    /// Queued slots by page index.
    queued: Mutex<BTreeMap<u64, Arc<Vec<u8>>>>,
    /// Held while a drain writes: drains run one at a time. It keeps the first write error, which
    /// every later drain (and so every sync) reports.
    draining: Mutex<Option<String>>,
    /// Whether a write failed (so that [`WriteBehind::failure`] need not wait for a drain).
    failed: std::sync::atomic::AtomicBool,
    writes: std::sync::atomic::AtomicU64,
    queued_total: std::sync::atomic::AtomicU64,
    /// Wakes the drainer thread, if one runs ([`WriteBehind::start_drainer`]).
    drainer: Arc<Drainer>,
}

/// What the drainer thread waits on.
#[derive(Default)]
struct Drainer {
    state: Mutex<DrainerState>,
    wake: Condvar,
}

#[derive(Default)]
struct DrainerState {
    /// The queue grew past `QUEUED_MAX` since the thread last looked.
    asked: bool,
    /// The queue is gone: the thread ends.
    stopped: bool,
}

/// Slots the queue may hold before a command that queued more waits for the drain running
/// ([`WriteBehind::drain_unless_draining`]): 8.25 MiB of 8 KiB pages.
const QUEUED_MAX: usize = 1024;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The queue's invariants hold between statements; a panic elsewhere leaves it usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WriteBehind {
    pub(crate) fn new(file: Arc<File>, path: PathBuf, slot_offset: u64, slot_bytes: u64) -> Self {
        WriteBehind {
            file,
            path,
            slot_offset,
            slot_bytes,
            queued: Mutex::new(BTreeMap::new()),
            draining: Mutex::new(None),
            failed: std::sync::atomic::AtomicBool::new(false),
            writes: std::sync::atomic::AtomicU64::new(0),
            queued_total: std::sync::atomic::AtomicU64::new(0),
            drainer: Arc::new(Drainer::default()),
        }
    }

    /// Starts a thread that drains the queue whenever it holds more than `QUEUED_MAX` slots, so
    /// that a command that programs many pages (a flush of a large write buffer) does not keep
    /// them all in memory until it has released its locks: they reach the file while it goes
    /// on. The thread holds no lock but the drains' own, and ends once the queue is dropped. If
    /// it cannot start, slots wait for the command's drain, as they do below that size.
    pub(crate) fn start_drainer(self: &Arc<Self>) {
        let queue = Arc::downgrade(self);
        let drainer = Arc::clone(&self.drainer);
        let _ = std::thread::Builder::new()
            .name("kvssd-write-behind".to_string())
            .spawn(move || loop {
                {
                    let mut state = lock(&drainer.state);
                    while !state.asked && !state.stopped {
                        state = drainer
                            .wake
                            .wait(state)
                            .unwrap_or_else(PoisonError::into_inner);
                    }
                    if state.stopped {
                        return;
                    }
                    state.asked = false;
                }
                let Some(queue) = queue.upgrade() else {
                    return;
                };
                // As a command does, so that a slot queued by a command that found this drain
                // running is not left behind. A failed write is kept: every later drain and sync
                // reports it.
                let _ = queue.drain_unless_draining();
            });
    }

    /// Queues page `index`'s slot (payload then OOB area), replacing an older queued version.
    pub(crate) fn queue(&self, index: u64, slot: Vec<u8>) {
        let queued = {
            let mut queued = lock(&self.queued);
            queued.insert(index, Arc::new(slot));
            queued.len()
        };
        self.queued_total
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if queued > QUEUED_MAX {
            let mut state = lock(&self.drainer.state);
            if !state.asked {
                state.asked = true;
                self.drainer.wake.notify_one();
            }
        }
    }

    /// Slots queued since the queue was made: a caller that saw it unchanged across its work
    /// queued nothing, and need not drain.
    pub fn queued_total(&self) -> u64 {
        self.queued_total.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Page `index`'s queued slot, if it has not reached the file yet.
    pub(crate) fn queued(&self, index: u64) -> Option<Arc<Vec<u8>>> {
        lock(&self.queued).get(&index).cloned()
    }

    /// Slots queued and not yet written.
    pub fn pending(&self) -> usize {
        lock(&self.queued).len()
    }

    /// `pwrite` calls made by drains.
    pub(crate) fn writes(&self) -> u64 {
        self.writes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The first write a drain failed, as an error (`Ok` if none has).
    pub fn failure(&self) -> Result<()> {
        if !self.failed.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        match lock(&self.draining).as_ref() {
            Some(message) => Err(FlashError::io(
                message.clone(),
                std::io::Error::other("a queued page write failed"),
            )),
            None => Ok(()),
        }
    }

    /// Writes every slot queued when it starts (and any queued while it runs, until none is
    /// left), after any drain already running. Returns the first write error any drain met.
    pub fn drain(&self) -> Result<()> {
        let mut failed = lock(&self.draining);
        self.drain_held(&mut failed)
    }

    /// Writes the queued slots, unless a drain is running already: that drain writes them before
    /// it ends, and the caller goes on without waiting for it. A caller whose slots are still
    /// queued when it returns may find them in the queue ([`WriteBehind::queued`]) until then;
    /// a sync drains first. Once more than `QUEUED_MAX` (1,024) slots are queued, waits as
    /// [`WriteBehind::drain`] does, so the queue stays bounded.
    pub fn drain_unless_draining(&self) -> Result<()> {
        loop {
            let mut failed = match self.draining.try_lock() {
                Ok(failed) => failed,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    if self.pending() > QUEUED_MAX {
                        return self.drain();
                    }
                    return self.failure();
                }
            };
            self.drain_held(&mut failed)?;
            drop(failed);
            // A slot queued by a caller that found this drain running after it looked at the
            // queue for the last time: that caller did not wait, so it is written here.
            if lock(&self.queued).is_empty() {
                return Ok(());
            }
        }
    }

    /// The drain itself, with the drains' lock held (`failed`).
    fn drain_held(&self, failed: &mut MutexGuard<'_, Option<String>>) -> Result<()> {
        loop {
            let batch: Vec<(u64, Arc<Vec<u8>>)> = lock(&self.queued)
                .iter()
                .map(|(&index, slot)| (index, Arc::clone(slot)))
                .collect();
            if batch.is_empty() || failed.is_some() {
                break;
            }
            // Slots of consecutive pages lie end to end in the file: each run of them is one
            // `pwrite`.
            let mut run: Vec<u8> = Vec::new();
            let mut start = 0;
            while start < batch.len() {
                let mut end = start + 1;
                while end < batch.len() && batch[end].0 == batch[end - 1].0 + 1 {
                    end += 1;
                }
                let offset = self.slot_offset + batch[start].0 * self.slot_bytes;
                let bytes: &[u8] = if end - start == 1 {
                    &batch[start].1
                } else {
                    run.clear();
                    for (_, slot) in &batch[start..end] {
                        run.extend_from_slice(slot);
                    }
                    &run
                };
                self.writes
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if let Err(error) = self.file.write_all_at(bytes, offset) {
                    **failed = Some(format!("write page of {}: {error}", self.path.display()));
                    self.failed
                        .store(true, std::sync::atomic::Ordering::Release);
                    break;
                }
                let mut queued = lock(&self.queued);
                for (index, slot) in &batch[start..end] {
                    if queued
                        .get(index)
                        .is_some_and(|current| Arc::ptr_eq(current, slot))
                    {
                        queued.remove(index);
                    }
                }
                drop(queued);
                start = end;
            }
        }
        match failed.as_ref() {
            Some(message) => Err(FlashError::io(
                message.clone(),
                std::io::Error::other("a queued page write failed"),
            )),
            None => Ok(()),
        }
    }
}

impl Drop for WriteBehind {
    /// Ends the drainer thread.
    fn drop(&mut self) {
        lock(&self.drainer.state).stopped = true;
        self.drainer.wake.notify_all();
    }
}
