//! The write buffer being flushed by the controller's background thread.
//!
//! Under the threads model of the controller (`kvssd_flash::ControllerModel::Threads`) a full
//! write buffer (L0, or the hash engine's buffer) becomes **immutable** and is flushed as a job of
//! the background thread while a new, empty buffer takes writes. The flush's effects on the index
//! happen at once; its flash work runs on the timeline as the job is played. Until the job has
//! finished, GETs find the flushed pairs in the immutable buffer (DRAM), as the prototype serves
//! them. Immutable buffers take at most [`FLUSHING_BYTES_MAX`] of DRAM; a writer that needs
//! another while that many are in flight **stalls** until the oldest flush has finished, and
//! the LSM engine also stalls a writer whose flush queues a merge while the previous merge still
//! runs (one merge waiting at a time). Stalls are the only way background work delays a write,
//! and they are counted.
//!
//! Under the interchangeable model the flash layer records no jobs, so nothing is ever immutable
//! and a flush completes before the write that triggered it, as in earlier releases.

use kvssd_flash::{JobId, Lane, SimTime};
use kvssd_space::Space;

/// DRAM the controller keeps for write buffers being flushed: PinK's L0, 1 MiB (§5.1). Profiles
/// that scale the tree's L0 down with the card (to keep the tree's shape) keep this much in
/// flight, as several immutable buffers, so a small card can keep as many page programs in flight
/// as PinK's did.
pub const FLUSHING_BYTES_MAX: u64 = 1 << 20;

/// GC jobs queued for the background thread before a writer whose write queues another waits for
/// the oldest: the one running and one behind it, as for merges. GC's effects on the space happen
/// at once (the blocks it frees are free for the next write), so without this wait writers could
/// run ahead of GC's flash work without bound, and the work queued would grow in memory.
pub const GC_JOBS_IN_FLIGHT_MAX: usize = 2;

/// The immutable buffers of one engine and its stall counters.
#[derive(Debug, Clone)]
pub(crate) struct Flushing<B> {
    /// Oldest first.
    immutable: std::collections::VecDeque<(B, JobId)>,
    /// How many may be in flight before a writer waits for the oldest.
    limit: usize,
    stalls: u64,
    stall_ns: u64,
}

impl<B> Flushing<B> {
    /// Room for buffers of `buffer_bytes` up to [`FLUSHING_BYTES_MAX`] (at least one).
    pub(crate) fn new(buffer_bytes: u64) -> Self {
        Self::with_limit((FLUSHING_BYTES_MAX / buffer_bytes.max(1)).max(1) as usize)
    }

    /// At most `limit` jobs in flight.
    pub(crate) fn with_limit(limit: usize) -> Self {
        Flushing {
            immutable: std::collections::VecDeque::new(),
            limit: limit.max(1),
            stalls: 0,
            stall_ns: 0,
        }
    }

    /// Before a new flush at `at`: drops the buffers whose flush has finished and, if as many as
    /// the limit are still in flight, returns when the oldest has finished, counting the wait as
    /// a write stall. Returns `at` when there is room.
    pub(crate) fn wait(&mut self, space: &mut Space, at: SimTime) -> SimTime {
        self.retire(space, at);
        if self.immutable.len() < self.limit {
            return at;
        }
        let Some((_, job)) = self.immutable.pop_front() else {
            return at;
        };
        let done = space.project_done(job).max(at);
        self.stalls += 1;
        self.stall_ns += done - at;
        done
    }

    /// Drops the buffers whose flush finished by `at`.
    fn retire(&mut self, space: &mut Space, at: SimTime) {
        while let Some((_, job)) = self.immutable.front() {
            if space.job_done_at(*job, at).is_none() {
                break;
            }
            self.immutable.pop_front();
        }
    }

    /// A flush of `buffer` was recorded as `job` (`None`: it ran at once, so nothing is
    /// immutable, and older immutable buffers would shadow what it wrote: they are dropped, and
    /// `buffer` is handed back for its owner to drop).
    pub(crate) fn started(&mut self, buffer: B, job: Option<JobId>) -> Option<B> {
        match job {
            Some(job) => {
                self.immutable.push_back((buffer, job));
                None
            }
            None => {
                self.clear();
                Some(buffer)
            }
        }
    }

    /// Drops every immutable buffer: for a flush that does not go through the background thread,
    /// after which they would shadow newer data. Always safe: they only save flash reads.
    pub(crate) fn clear(&mut self) {
        self.immutable.clear();
    }

    /// Every immutable buffer held, whether or not its flush has finished, oldest first.
    pub(crate) fn held(&self) -> impl Iterator<Item = &B> {
        self.immutable.iter().map(|(buffer, _)| buffer)
    }

    /// The immutable buffers whose flush has not finished by `at`, newest first.
    pub(crate) fn visible(&mut self, space: &mut Space, at: SimTime) -> impl Iterator<Item = &B> {
        self.retire(space, at);
        self.immutable.iter().rev().map(|(buffer, _)| buffer)
    }

    /// Writes that waited for a flush, and the simulated nanoseconds they waited in all.
    pub(crate) fn stalls(&self) -> (u64, u64) {
        (self.stalls, self.stall_ns)
    }
}

impl Flushing<()> {
    /// After a GC step that ended at `t` and queued `job` (if any): if as many GC jobs as allowed
    /// are still running, waits for the oldest (a write stall, counted here). Returns when the
    /// writer may go on.
    pub(crate) fn collected(
        &mut self,
        space: &mut Space,
        t: SimTime,
        job: Option<JobId>,
    ) -> SimTime {
        if job.is_none() {
            return t;
        }
        let t = self.wait(space, t);
        let _ = self.started((), job);
        t
    }
}

/// Runs `step` (a flush, or GC) as a background step issued at `at`: see
/// `kvssd_flash::Flash::begin_background`. Returns the step's result and its job, if one was
/// queued.
pub(crate) fn in_background<T>(
    space: &mut Space,
    at: SimTime,
    lane: Lane,
    step: impl FnOnce(&mut Space) -> T,
) -> (T, Option<JobId>) {
    space.begin_background(at, lane);
    let result = step(space);
    let job = space.end_background();
    (result, job)
}
