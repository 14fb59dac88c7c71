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
    /// Signalled (with `queued`) when a drain has written slots or failed: wakes callers waiting
    /// for the queue to shrink to its bound.
    written: Condvar,
    /// Held while a drain writes: drains run one at a time. It keeps the first write error, which
    /// every later drain (and so every sync) reports.
    draining: Mutex<Option<String>>,
    /// Whether a write failed (so that [`WriteBehind::failure`] need not wait for a drain).
    failed: std::sync::atomic::AtomicBool,
    writes: std::sync::atomic::AtomicU64,
    queued_total: std::sync::atomic::AtomicU64,
    /// Slots queued past which a caller waits for room: `QUEUED_MAX`, or that many more than
    /// are left of what a background writer was let queue ([`WriteBehind::allow_queued`]).
    room: std::sync::atomic::AtomicUsize,
    /// Wakes the drainer thread, if one runs ([`WriteBehind::start_drainer`]).
    drainer: Arc<Drainer>,
    /// Whether the drainer thread started.
    drainer_started: std::sync::atomic::AtomicBool,
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

/// Slots queued past which the drainer thread writes them, and past which a command that queued
/// more waits for the drain running to bring the queue back to it
/// ([`WriteBehind::drain_unless_draining`]): 8.25 MiB of 8 KiB pages. (Letting commands go on
/// up to eight times as many, so that the command that flushed a 32 MiB write buffer need not
/// wait at all, made `kvssd-compare`'s Load, A and F 24 to 32% slower.)
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
            written: Condvar::new(),
            draining: Mutex::new(None),
            failed: std::sync::atomic::AtomicBool::new(false),
            writes: std::sync::atomic::AtomicU64::new(0),
            queued_total: std::sync::atomic::AtomicU64::new(0),
            room: std::sync::atomic::AtomicUsize::new(QUEUED_MAX),
            drainer: Arc::new(Drainer::default()),
            drainer_started: std::sync::atomic::AtomicBool::new(false),
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
        let started = std::thread::Builder::new()
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
                let _ = queue.drain_held_unless_draining();
            })
            .is_ok();
        self.drainer_started
            .store(started, std::sync::atomic::Ordering::SeqCst);
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
        loop {
            let mut failed = lock(&self.draining);
            self.drain_held(&mut failed)?;
            drop(failed);
            // As in `drain_unless_draining`: a slot queued by a caller that found this drain
            // running after it looked at the queue for the last time is written here.
            if lock(&self.queued).is_empty() {
                return Ok(());
            }
        }
    }

    /// Writes the queued slots, unless a drain is running already: that drain writes them before
    /// it ends, and the caller goes on without waiting for it. A caller whose slots are still
    /// queued when it returns may find them in the queue (`WriteBehind::queued`) until then;
    /// a sync drains first. While more than `QUEUED_MAX` (1,024) slots are queued, waits for the
    /// running drain to bring the queue back to that bound (not to empty it), so the queue stays
    /// bounded and a caller that queued one page does not wait for the thousands a flush queued.
    ///
    /// While slots a background writer was allowed beyond the bound are queued
    /// ([`WriteBehind::allow_queued`]), they are the drainer thread's to write: a caller leaves
    /// them, and its own, to it rather than write thousands of pages it did not queue.
    pub fn drain_unless_draining(&self) -> Result<()> {
        if self
            .drainer_started
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            let queued = lock(&self.queued).len();
            let room = self.room();
            if room > QUEUED_MAX && queued <= room {
                let mut state = lock(&self.drainer.state);
                if !state.asked {
                    state.asked = true;
                    self.drainer.wake.notify_one();
                }
                return self.failure();
            }
        }
        self.drain_held_unless_draining()
    }

    /// [`WriteBehind::drain_unless_draining`] without leaving allowed slots to the drainer
    /// thread: what that thread runs.
    fn drain_held_unless_draining(&self) -> Result<()> {
        loop {
            let mut failed = match self.draining.try_lock() {
                Ok(failed) => failed,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    if !self.wait_for_room() {
                        // The drain ended with the queue still over its bound: drain here.
                        continue;
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

    /// Lets the slots queued now stay queued without counting against `QUEUED_MAX`
    /// ([`WriteBehind::drain_unless_draining`]): a background writer that queued thousands of
    /// pages at once (a flush on the device's own thread) leaves them to the drainer thread, and
    /// callers wait only once they have queued `QUEUED_MAX` more than are left of them. The
    /// allowance shrinks as the drain writes them.
    pub fn allow_queued(&self) {
        let queued = lock(&self.queued).len();
        self.room
            .fetch_max(queued + QUEUED_MAX, std::sync::atomic::Ordering::SeqCst);
    }

    fn room(&self) -> usize {
        self.room.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits while more slots are queued than there is room for (`QUEUED_MAX`, or what
    /// [`WriteBehind::allow_queued`] allowed) and a drain is writing them. Returns `true` once the
    /// queue is within its bound (or a write failed), `false` if no drain is running while it is
    /// over it.
    fn wait_for_room(&self) -> bool {
        let mut queued = lock(&self.queued);
        while queued.len() > self.room() && !self.failed.load(std::sync::atomic::Ordering::Acquire)
        {
            // A drain signals after each write; the timeout also catches a drain that ended
            // between this caller's look at the drains' lock and its wait.
            let (guard, timeout) = self
                .written
                .wait_timeout(queued, std::time::Duration::from_millis(1))
                .unwrap_or_else(PoisonError::into_inner);
            queued = guard;
            if timeout.timed_out() && queued.len() > self.room() {
                drop(queued);
                if !matches!(self.draining.try_lock(), Err(TryLockError::WouldBlock)) {
                    return false;
                }
                queued = lock(&self.queued);
            }
        }
        true
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
                    let _queued = lock(&self.queued);
                    self.written.notify_all();
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
                // An allowance shrinks with what is left of the queue.
                self.room.fetch_min(
                    queued.len() + QUEUED_MAX,
                    std::sync::atomic::Ordering::SeqCst,
                );
                self.written.notify_all();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue of 16-byte slots in a temporary file.
    fn queue_in(dir: &tempfile::TempDir) -> Arc<WriteBehind> {
        let path = dir.path().join("slots");
        let file = Arc::new(File::create(&path).expect("create"));
        Arc::new(WriteBehind::new(file, path, 0, 16))
    }

    /// Holds the drains' lock, as a running drain does, while a caller of
    /// [`WriteBehind::drain_unless_draining`] starts: the caller must wait. Then writes the
    /// first `written` slots by hand, as the drain would, and returns whether the caller then
    /// returned (within about ten seconds, so that a caller waiting for more fails the test
    /// instead of hanging it).
    fn waits_until_written(queue: &Arc<WriteBehind>, written: u64) -> bool {
        let drain = lock(&queue.draining);
        let waiter = {
            let queue = Arc::clone(queue);
            std::thread::spawn(move || queue.drain_unless_draining())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "returned over the bound");
        for index in 0..written {
            lock(&queue.queued).remove(&index);
            queue.written.notify_all();
        }
        for _ in 0..1000 {
            if waiter.is_finished() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let returned = waiter.is_finished();
        if returned {
            waiter.join().expect("the waiter").expect("no failure");
        }
        drop(drain);
        returned
    }

    #[test]
    fn a_caller_over_the_bound_waits_for_room_not_for_an_empty_queue() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = queue_in(&dir);
        for index in 0..(QUEUED_MAX as u64 + 50) {
            queue.queue(index, vec![1; 16]);
        }
        assert!(
            waits_until_written(&queue, 50),
            "still waiting with the queue at its bound"
        );
        assert_eq!(
            queue.pending(),
            QUEUED_MAX,
            "the waiter returned with the queue at its bound, and wrote nothing itself"
        );
        queue.drain().expect("drain");
        assert_eq!(queue.pending(), 0);
    }

    #[test]
    fn slots_a_background_writer_was_allowed_do_not_make_callers_wait() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = queue_in(&dir);
        let allowed = QUEUED_MAX as u64 + 500;
        for index in 0..allowed {
            queue.queue(index, vec![1; 16]);
        }
        queue.allow_queued();
        // Commands queue `QUEUED_MAX` and three more while a drain is running.
        let beyond = allowed + QUEUED_MAX as u64 + 3;
        for index in allowed..beyond {
            queue.queue(index, vec![2; 16]);
        }
        assert!(
            waits_until_written(&queue, 3),
            "waited for the allowed slots"
        );
        assert_eq!(queue.pending(), beyond as usize - 3);
        // Once written, the allowance is gone: the bound is back at `QUEUED_MAX`.
        queue.drain().expect("drain");
        assert_eq!(queue.room(), QUEUED_MAX);
        for index in 0..QUEUED_MAX as u64 + 10 {
            queue.queue(index, vec![3; 16]);
        }
        assert!(
            waits_until_written(&queue, 10),
            "still waiting with the queue at its bound"
        );
    }
}
