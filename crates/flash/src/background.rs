//! The background thread of the controller ([`crate::ControllerModel::Threads`]): flush, compaction and
//! GC run as jobs whose flash operations are issued a bounded amount at a time while requests
//! keep being served.
//!
//! An engine runs a background step's logic at once (its effects on the medium happen in the
//! order it issues them, so crash points are exactly those of a synchronous step), but while it
//! runs between [`crate::Flash::begin_background`] and [`crate::Flash::end_background`] the timing
//! model only *records* the work it asks for: page reads, programs, erases, CPU and accelerator
//! time. The recording becomes a job in the background thread's queue, and the job is *played* on
//! the calendars as foreground operations advance simulated time:
//!
//! * A job belongs to a **lane**: flush (a full write buffer's values and its merge into the first
//!   level), GC, or compaction (merges further down). Each lane runs its jobs one after another;
//!   the lanes run beside one another, as the background thread interleaves them (its I/O is
//!   asynchronous, so a flush need not wait for a long merge's I/O, only for the core). The flush
//!   and compaction lanes compute on core 1, GC on core 2.
//! * A job is a sequence of **phases**. A phase is a maximal run of reads, or of programs and
//!   erases, or one piece of CPU or accelerator work. A phase starts when the previous one has
//!   completed (a merge's writes need its reads; its sort needs both), so a job is a chain of
//!   dependent phases, as the prototype's compaction thread runs one.
//! * Within a phase the work is queued per die and each die has **at most one background
//!   operation in flight** over all lanes: the next is issued when the previous completes, taking
//!   flush work first, then GC, then compaction.
//! * Work is issued only once simulated time has reached its issue time. Before every foreground
//!   operation issued at `t`, the background work ready by `t` is issued ([`Timeline::pump`]);
//!   then the foreground operation books the earliest free slot. So a user read never waits for
//!   background work that was issued after it, and on its die it waits for at most the one
//!   background operation in flight there (one program or erase), plus the transfers of the
//!   operations in flight on the other dies of its channel. That bound is written in
//!   `docs/design.md` and checked by `crates/flash/tests/background.rs`.
//! * The background thread's events (a die looking at its queued work, a lane starting its next
//!   phase) are played in time order, so what is played does not depend on how often it is
//!   pumped.
//!
//! A writer that needs a job to have finished (a full L0 whose previous flush is still running)
//! asks [`Timeline::project_done`]: when the queue would finish if no further foreground work
//! arrived. That is the write stall; the real playback may end a little later, when reads
//! arriving meanwhile take die time first, and the next job simply starts later. The projection's
//! copy is kept and played on for the next stall while it stays exact.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::timing::{SimTime, Timeline};

mod packed;
mod projection;

/// Identifies a background job: jobs are numbered from 1 in the order they were recorded.
pub type JobId = u64;

/// The lanes of the background thread, in the order each die serves them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lane {
    /// A full write buffer: its values written, its keys merged into the first level.
    Flush = 0,
    /// Garbage collection: live data moved, victims erased.
    Gc = 1,
    /// Merges of a level into the next, and levels written out of DRAM.
    Compaction = 2,
}

const LANES: usize = 3;

/// One piece of work a background job asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    Read { die: u32, bytes: u64 },
    Program { die: u32, bytes: u64 },
    Erase { die: u32 },
    Cpu { ns: u64 },
    Accelerator { ns: u64 },
}

/// Which phase a piece of work belongs to: consecutive work of one class runs as one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Reads,
    Writes,
    Compute,
}

impl Work {
    fn class(&self) -> Class {
        match self {
            Work::Read { .. } => Class::Reads,
            Work::Program { .. } | Work::Erase { .. } => Class::Writes,
            Work::Cpu { .. } | Work::Accelerator { .. } => Class::Compute,
        }
    }

    fn die(&self) -> Option<u32> {
        match *self {
            Work::Read { die, .. } | Work::Program { die, .. } | Work::Erase { die } => Some(die),
            Work::Cpu { .. } | Work::Accelerator { .. } => None,
        }
    }
}

#[derive(Debug, Clone)]
struct Job {
    id: JobId,
    /// When the step that recorded it was issued: the job starts no earlier.
    ready_at: SimTime,
    work: JobWork,
}

/// A job's work not yet started, in order. The recording is shared, so that copying the timeline
/// to project a stall ([`Timeline::project_done`]) does not copy every queued merge's work, and
/// packed ([`packed`]).
#[derive(Debug, Clone)]
struct JobWork {
    recorded: std::sync::Arc<[u64]>,
    /// Where the first piece of `recorded` not yet taken starts.
    next: usize,
    /// A piece put back in front (what is left of a long computation cut into slices).
    head: Option<Work>,
}

impl JobWork {
    fn new(recorded: Vec<u64>) -> Self {
        JobWork {
            recorded: recorded.into(),
            next: 0,
            head: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.head.is_none() && self.next >= self.recorded.len()
    }

    fn front(&self) -> Option<Work> {
        self.head
            .or_else(|| packed::get(&self.recorded, self.next).map(|(work, _)| work))
    }

    fn pop_front(&mut self) -> Option<Work> {
        if let Some(work) = self.head.take() {
            return Some(work);
        }
        let (work, width) = packed::get(&self.recorded, self.next)?;
        self.next += width;
        Some(work)
    }

    /// Puts `work` back in front. REQUIRES: nothing was put back since the last `pop_front`.
    fn push_front(&mut self, work: Work) {
        debug_assert!(self.head.is_none(), "two pieces put back");
        self.head = Some(work);
    }
}

#[derive(Debug, Clone)]
struct Recording {
    ready_at: SimTime,
    lane: Lane,
    /// Packed ([`packed`]).
    work: Vec<u64>,
    depth: u32,
    /// Programs and erases held back while the step defers its writes
    /// ([`Background::defer_writes`]), to be recorded after what it records meanwhile.
    deferred: Option<Vec<u64>>,
}

/// One lane: its queue of jobs and the playback of its current phase.
#[derive(Debug, Clone, Default)]
struct LaneState {
    jobs: VecDeque<Job>,
    /// The latest completion of work issued so far: the end of the current phase once it has
    /// issued everything.
    phase_end: SimTime,
    /// The current phase started here.
    phase_start: SimTime,
    /// The latest issue time of the current phase's work: once a job has issued all its work,
    /// the lane's next job may start (its I/O completes asynchronously).
    issued_at: SimTime,
    /// Whether the current phase writes: the next phase need not wait for programs to complete
    /// (nothing after them reads their result but through the controller's buffers), only for
    /// them to be issued.
    writes: bool,
    /// The latest completion of any work of the current job.
    job_end: SimTime,
    /// Work of the current phase not yet issued, per die.
    per_die: Vec<VecDeque<Work>>,
    /// Operations of the current phase not yet issued.
    queued: usize,
}

impl LaneState {
    /// When `job`, at the front of this lane with the current phase wholly issued, starts its
    /// next phase: once the phase before has completed (or, after writes, been issued) and no
    /// earlier than the job's ready time.
    fn next_start(&self, job: &Job) -> SimTime {
        let gate = if self.writes {
            self.issued_at
        } else {
            self.phase_end
        };
        gate.max(job.ready_at)
    }
}

/// Background jobs: the one being recorded, the lanes, and the dies' background windows.
#[derive(Debug, Clone)]
pub(crate) struct Background {
    recording: Option<Recording>,
    lanes: [LaneState; LANES],
    next_id: JobId,
    /// Per die: when its background operation in flight completes.
    die_free: Vec<SimTime>,
    /// `(issue time, die)` of dies with queued work. Entries may be stale: an entry counts only
    /// if its time is the die's [`Background::scheduled_at`].
    ready: BinaryHeap<Reverse<(SimTime, u32)>>,
    /// Per die: when its next look at queued work is due (`SimTime::MAX`: none due). One live
    /// entry per die keeps the heap as small as the number of dies, however much work is queued.
    scheduled_at: Vec<SimTime>,
    /// Jobs recorded and not finished.
    pending_jobs: usize,
    /// The most recently finished jobs, oldest first, and when each finished (by id in
    /// `finished_at`).
    finished: VecDeque<JobId>,
    finished_at: std::collections::HashMap<JobId, SimTime>,
    /// Flash operations (reads, programs, erases) recorded into jobs so far.
    operations_recorded: u64,
    /// A projection's job: playback stops as soon as it finishes ([`Timeline::project_done`]).
    watched: Option<JobId>,
    /// Whether the watched job has finished.
    watched_done: bool,
    /// The time of the latest event played: die looks and phase starts are played in time order
    /// ([`Timeline::pump`]), so none still to come is earlier, unless a job is recorded with an
    /// earlier start.
    frontier: SimTime,
    /// The highest lane that started a phase at the frontier's time, if any did.
    started_at_frontier: Option<usize>,
}

/// The longest piece of background computation booked at once: the background thread checks for
/// work of a higher lane this often (as LevelDB's compaction loop checks for an immutable
/// memtable between keys).
pub const CPU_SLICE_NS: u64 = 100_000;

/// Finished jobs remembered for [`Timeline::job_done_at`].
const FINISHED_KEPT: usize = 256;

impl Background {
    pub(crate) fn new(dies: u32) -> Background {
        let lane = || LaneState {
            per_die: vec![VecDeque::new(); dies as usize],
            ..LaneState::default()
        };
        Background {
            recording: None,
            lanes: [lane(), lane(), lane()],
            next_id: 1,
            die_free: vec![0; dies as usize],
            ready: BinaryHeap::new(),
            scheduled_at: vec![SimTime::MAX; dies as usize],
            pending_jobs: 0,
            finished: VecDeque::new(),
            finished_at: std::collections::HashMap::new(),
            operations_recorded: 0,
            watched: None,
            watched_done: false,
            frontier: 0,
            started_at_frontier: None,
        }
    }

    /// Flash operations recorded into background jobs so far.
    pub(crate) fn operations_recorded(&self) -> u64 {
        self.operations_recorded
    }

    /// Makes sure die `die` looks at its queued work no later than `at`.
    fn schedule(&mut self, die: u32, at: SimTime) {
        let d = die as usize;
        if at < self.scheduled_at[d] {
            self.scheduled_at[d] = at;
            self.ready.push(Reverse((at, die)));
        }
    }

    /// No background work still to be issued can be booked before this time. A lane issues
    /// nothing before its latest issue (each phase starts at or after it) nor before a job's
    /// ready time; work already queued per die is issued at the die's scheduled look.
    ///
    /// A projection copies calendars from here. Bounding it by each lane's latest issue rather
    /// than by every queued job's ready time alone keeps the copy small when a lane lags far
    /// behind (GC jobs queued long ago while their lane is still busy).
    fn earliest_booking(&self) -> SimTime {
        let lanes = self.lanes.iter().filter_map(|state| {
            let ready = state.jobs.iter().map(|job| job.ready_at).min()?;
            Some(state.issued_at.max(ready))
        });
        let dies = self.scheduled_at.iter().copied();
        lanes.chain(dies).fold(SimTime::MAX, SimTime::min)
    }

    /// Notes an event played at `at`: a die's look, or `lane` starting a phase.
    fn played(&mut self, at: SimTime, lane: Option<usize>) {
        if at > self.frontier {
            self.frontier = at;
            self.started_at_frontier = None;
        }
        if at == self.frontier {
            self.started_at_frontier = self.started_at_frontier.max(lane);
        }
    }

    /// Whether a phase of `lane` starting at `start` comes after every event played so far: at the
    /// frontier's time, dies look first and lanes then start in lane order, so it does unless a
    /// lane as high or higher already started there.
    fn comes_after_played(&self, start: SimTime, lane: usize) -> bool {
        start > self.frontier
            || (start == self.frontier && self.started_at_frontier.is_none_or(|high| high < lane))
    }

    /// Jobs of `lane` recorded and not finished.
    pub(crate) fn jobs_queued(&self, lane: Lane) -> usize {
        self.lanes[lane as usize].jobs.len()
    }

    /// Whether jobs wait to be played.
    pub(crate) fn has_work(&self) -> bool {
        self.pending_jobs > 0
    }

    /// Records `work` if a job is being recorded; returns whether it was.
    pub(crate) fn record(&mut self, work: Work) -> bool {
        match &mut self.recording {
            Some(recording) => {
                if work.die().is_some() {
                    self.operations_recorded += 1;
                }
                match &mut recording.deferred {
                    Some(deferred) if work.class() == Class::Writes => {
                        packed::push(deferred, work);
                    }
                    _ => {
                        if !matches!(work, Work::Cpu { ns: 0 } | Work::Accelerator { ns: 0 }) {
                            packed::push(&mut recording.work, work);
                        }
                    }
                }
                true
            }
            None => false,
        }
    }

    /// While a job is being recorded, holds its programs and erases back until
    /// [`Background::record_deferred`], so a step may write pages before the work that must
    /// precede their writes is recorded (a merge writes each new page as it fills, before its
    /// sort's computation is charged). Returns false, and defers nothing, when no job is being
    /// recorded: then every operation is booked as it is issued.
    pub(crate) fn defer_writes(&mut self) -> bool {
        match &mut self.recording {
            Some(recording) => {
                recording.deferred.get_or_insert_with(Vec::new);
                true
            }
            None => false,
        }
    }

    /// Records the writes held back since [`Background::defer_writes`], in the order they were
    /// issued, after everything recorded meanwhile.
    pub(crate) fn record_deferred(&mut self) {
        if let Some(recording) = &mut self.recording {
            if let Some(deferred) = recording.deferred.take() {
                recording.work.extend(deferred);
            }
        }
    }

    pub(crate) fn begin(&mut self, at: SimTime, lane: Lane) {
        match &mut self.recording {
            Some(recording) => recording.depth += 1,
            None => {
                self.recording = Some(Recording {
                    ready_at: at,
                    lane,
                    work: Vec::new(),
                    depth: 1,
                    deferred: None,
                })
            }
        }
    }

    pub(crate) fn end(&mut self) -> Option<(JobId, Lane)> {
        let recording = self.recording.as_mut()?;
        recording.depth -= 1;
        if recording.depth > 0 {
            return None;
        }
        let mut recording = self.recording.take()?;
        // Writes still held back belong to the job all the same, last.
        if let Some(deferred) = recording.deferred.take() {
            recording.work.extend(deferred);
        }
        if recording.work.is_empty() {
            return None;
        }
        let job = Job {
            id: self.next_id,
            ready_at: recording.ready_at,
            work: JobWork::new(recording.work),
        };
        Some((self.enqueue(recording.lane, job), recording.lane))
    }

    /// Queues a recorded job on its lane.
    fn enqueue(&mut self, lane: Lane, job: Job) -> JobId {
        debug_assert_eq!(
            job.id, self.next_id,
            "jobs are queued in the order recorded"
        );
        let id = job.id;
        self.next_id += 1;
        self.pending_jobs += 1;
        self.lanes[lane as usize].jobs.push_back(job);
        id
    }

    /// The job just recorded on `lane`, to be queued on a kept projection too.
    fn last_job(&self, lane: Lane) -> Option<&Job> {
        self.lanes[lane as usize].jobs.back()
    }

    /// When job `id` finished, if it has.
    fn done_at(&self, id: JobId) -> Option<SimTime> {
        // A job leaves its lane as it finishes, so a queued one is not among the finished.
        if id >= self.next_id || self.is_queued(id) {
            return None;
        }
        // Among the recent ones, or it finished long ago.
        Some(self.finished_at.get(&id).copied().unwrap_or(0))
    }

    /// Whether job `id` is queued on a lane, not yet finished.
    fn is_queued(&self, id: JobId) -> bool {
        // Each lane queues its jobs in the order they were recorded, so by increasing id: only a
        // lane whose first and last jobs bound `id` is searched, and its first job is looked at
        // before the search (a search's probes each read a job of its own, and GETs ask about
        // the oldest flush still running, its lane's first job, while it runs).
        self.lanes.iter().any(|lane| {
            let jobs = &lane.jobs;
            match (jobs.front(), jobs.back()) {
                (Some(first), Some(last)) if first.id <= id && id <= last.id => {
                    first.id == id || jobs.binary_search_by_key(&id, |job| job.id).is_ok()
                }
                _ => false,
            }
        })
    }

    /// Whether this timeline can say when job `id` ends: it is queued, or finished recently enough
    /// to be remembered.
    fn remembers(&self, id: JobId) -> bool {
        self.finished_at.contains_key(&id) || self.is_queued(id)
    }

    fn finish(&mut self, id: JobId, at: SimTime) {
        if self.watched == Some(id) {
            self.watched_done = true;
        }
        self.pending_jobs -= 1;
        self.finished.push_back(id);
        self.finished_at.insert(id, at);
        if self.finished.len() > FINISHED_KEPT {
            if let Some(oldest) = self.finished.pop_front() {
                self.finished_at.remove(&oldest);
            }
        }
    }
}

impl crate::Flash {
    /// Background jobs of `lane` recorded and not finished (0 without timing).
    pub fn background_jobs_queued(&self, lane: Lane) -> usize {
        self.timeline
            .as_ref()
            .map_or(0, |timeline| timeline.background.jobs_queued(lane))
    }
}

impl Timeline {
    /// Plays the background thread up to `now`: every event due by then, in time order. An event
    /// is a die's look at its queued work (issuing one operation, flush work first) or a lane's
    /// next phase starting; at equal times dies look first, then lanes start in lane order.
    ///
    /// Because events are taken in time order, the playback does not depend on how it is cut
    /// into pumps: pumping to `a` and then to `b` plays exactly what pumping to `b` plays. That is
    /// what lets a write-stall projection be kept and played further for the next stall
    /// ([`Timeline::project_done`]).
    pub(crate) fn pump(&mut self, now: SimTime) {
        // Settling the lanes and finding the next phase look only at lanes that have issued
        // their whole phase: while a die look leaves its lane with work queued, neither can
        // change, and the next phase found before still holds.
        let mut lanes_changed = true;
        let mut phase = None;
        loop {
            if lanes_changed {
                if self.settle_lanes() {
                    return;
                }
                phase = self.next_phase().filter(|&(_, at)| at <= now);
            }
            let look = self
                .background
                .ready
                .peek()
                .map(|&Reverse((at, _))| at)
                .filter(|&at| at <= now);
            lanes_changed = match (look, phase) {
                (Some(look), Some((_, start))) if look <= start => self.issue_one(),
                (Some(_), None) => self.issue_one(),
                (_, Some((lane, start))) => {
                    self.start_phase(lane, start);
                    true
                }
                (None, None) => return,
            };
        }
    }

    /// Finishes every job that has issued all its work; returns true when a projection's watched
    /// job has finished (a job's end is fixed when it finishes, and nothing played after it could
    /// change it).
    fn settle_lanes(&mut self) -> bool {
        for lane in 0..LANES {
            loop {
                let state = &mut self.background.lanes[lane];
                if state.queued > 0 {
                    break;
                }
                let Some(job) = state.jobs.front() else {
                    break;
                };
                if !job.work.is_empty() {
                    break;
                }
                // Everything issued: the job completes when its last work does, and the lane's
                // next job may start from when it was issued.
                let id = job.id;
                let done = state.job_end.max(state.phase_end).max(job.ready_at);
                state.jobs.pop_front();
                state.writes = true;
                state.job_end = state.issued_at;
                self.background.finish(id, done);
                if self.background.watched_done {
                    return true;
                }
            }
        }
        false
    }

    /// The lane whose next phase starts first, and when (ties go to the lower lane).
    fn next_phase(&self) -> Option<(usize, SimTime)> {
        let mut first: Option<(usize, SimTime)> = None;
        for (lane, state) in self.background.lanes.iter().enumerate() {
            if state.queued > 0 {
                continue;
            }
            let Some(job) = state.jobs.front() else {
                continue;
            };
            let start = state.next_start(job);
            if first.is_none_or(|(_, at)| start < at) {
                first = Some((lane, start));
            }
        }
        first
    }

    /// Takes the earliest die look and issues that die's next operation, if it may issue one.
    /// Returns whether it issued the last operation queued in its lane's phase (only then may
    /// a lane settle or start a phase).
    fn issue_one(&mut self) -> bool {
        let Some(Reverse((issue_at, die))) = self.background.ready.pop() else {
            return false;
        };
        let d = die as usize;
        if self.background.scheduled_at[d] != issue_at {
            // Superseded by an earlier look at this die.
            return false;
        }
        self.background.played(issue_at, None);
        self.background.scheduled_at[d] = SimTime::MAX;
        let free = self.background.die_free[d];
        if free > issue_at {
            // The die took other work meanwhile.
            self.background.schedule(die, free);
            return false;
        }
        let Some(lane) = (0..LANES).find(|&lane| {
            let state = &self.background.lanes[lane];
            !state.per_die[d].is_empty() && state.phase_start <= issue_at
        }) else {
            // Only work of phases that start later: look again when the first does.
            let next = self
                .background
                .lanes
                .iter()
                .filter(|state| !state.per_die[d].is_empty())
                .map(|state| state.phase_start)
                .min();
            if let Some(next) = next {
                self.background.schedule(die, next);
            }
            return false;
        };
        let Some(work) = self.background.lanes[lane].per_die[d].pop_front() else {
            return false;
        };
        self.count_if_late(issue_at);
        let done = match work {
            Work::Read { die, bytes } => self.book_read(issue_at, die, bytes),
            Work::Program { die, bytes } => self.book_program(issue_at, die, bytes),
            Work::Erase { die } => self.book_erase(issue_at, die),
            Work::Cpu { .. } | Work::Accelerator { .. } => issue_at,
        };
        let background = &mut self.background;
        background.die_free[d] = done;
        let state = &mut background.lanes[lane];
        state.queued -= 1;
        state.phase_end = state.phase_end.max(done);
        state.job_end = state.job_end.max(done);
        state.issued_at = state.issued_at.max(issue_at);
        let phase_issued = state.queued == 0;
        if background
            .lanes
            .iter()
            .any(|state| !state.per_die[d].is_empty())
        {
            background.schedule(die, done);
        }
        phase_issued
    }

    /// Starts the next phase of `lane` at `start`: a slice of computation is booked at once, a
    /// run of reads or of writes is queued on its dies.
    fn start_phase(&mut self, lane: usize, start: SimTime) {
        self.background.played(start, Some(lane));
        self.count_if_late(start);
        let state = &mut self.background.lanes[lane];
        let Some(job) = state.jobs.front_mut() else {
            return;
        };
        let Some(first) = job.work.pop_front() else {
            return;
        };
        state.phase_start = start;
        state.job_end = state.job_end.max(state.phase_end);
        state.phase_end = start;
        state.issued_at = start;
        state.writes = first.class() == Class::Writes;
        match first {
            Work::Cpu { ns } => {
                // Long computation runs in slices, so work of a higher lane on the same core (a
                // flush beside a merge) is taken between them.
                let slice = ns.min(CPU_SLICE_NS);
                if ns > slice {
                    job.work.push_front(Work::Cpu { ns: ns - slice });
                }
                let done = self.book_background_cpu(start, slice, lane == Lane::Gc as usize);
                let state = &mut self.background.lanes[lane];
                state.phase_end = done;
                state.job_end = state.job_end.max(done);
            }
            Work::Accelerator { ns } => {
                let done = self.book_accelerator(start, ns);
                let state = &mut self.background.lanes[lane];
                state.phase_end = done;
                state.job_end = state.job_end.max(done);
            }
            io => {
                let class = io.class();
                let mut phase = vec![io];
                while job.work.front().is_some_and(|next| next.class() == class) {
                    phase.extend(job.work.pop_front());
                }
                let background = &mut self.background;
                for work in phase {
                    let Some(die) = work.die() else { continue };
                    let d = die as usize;
                    background.lanes[lane].per_die[d].push_back(work);
                    background.lanes[lane].queued += 1;
                    let at = start.max(background.die_free[d]);
                    background.schedule(die, at);
                }
            }
        }
    }

    /// When job `id` finished, if it has by `now`. Issues the background work ready by `now`,
    /// but never past the latest foreground issue time: a writer asking about a time it will only
    /// reach after a stall must not book background work ahead of other clients' requests.
    pub(crate) fn job_done_at(&mut self, id: JobId, now: SimTime) -> Option<SimTime> {
        if self.background.has_work() {
            self.pump(self.pump_limit(now));
        }
        self.background.done_at(id).filter(|&done| done <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(background: &Background, lane: Lane) -> Vec<Work> {
        background.lanes[lane as usize]
            .jobs
            .iter()
            .flat_map(|job| packed::pieces(&job.work.recorded))
            .collect()
    }

    #[test]
    fn deferred_writes_are_recorded_after_what_the_step_records_meanwhile() {
        let mut background = Background::new(4);
        assert!(
            !background.defer_writes(),
            "nothing to defer outside a step"
        );
        background.begin(0, Lane::Compaction);
        assert!(background.record(Work::Read { die: 0, bytes: 8 }));
        assert!(background.defer_writes());
        background.record(Work::Program { die: 1, bytes: 8 });
        background.record(Work::Read { die: 2, bytes: 8 });
        background.record(Work::Erase { die: 3 });
        background.record(Work::Cpu { ns: 5 });
        background.record_deferred();
        background.record(Work::Program { die: 0, bytes: 8 });
        // Held back again and never released: the job still ends with them.
        background.defer_writes();
        background.record(Work::Program { die: 2, bytes: 8 });
        background.record(Work::Cpu { ns: 7 });
        assert!(background.end().is_some());
        assert_eq!(
            recorded(&background, Lane::Compaction),
            [
                Work::Read { die: 0, bytes: 8 },
                Work::Read { die: 2, bytes: 8 },
                Work::Cpu { ns: 5 },
                Work::Program { die: 1, bytes: 8 },
                Work::Erase { die: 3 },
                Work::Program { die: 0, bytes: 8 },
                Work::Cpu { ns: 7 },
                Work::Program { die: 2, bytes: 8 },
            ]
        );
        assert_eq!(background.operations_recorded(), 6);
    }
}
