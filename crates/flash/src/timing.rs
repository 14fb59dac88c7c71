//! The timing model: a virtual clock in nanoseconds, with every die, channel and controller core a
//! resource that keeps a calendar of the intervals it is booked for.
//!
//! Operations are scheduled, never slept: each takes the simulated time at which it is issued and
//! returns the time at which it completes. A caller may issue many operations before it waits for any,
//! which is how channel and die parallelism (and later, prefetching) show up in simulated time.
//!
//! * A **read** occupies its die for `tR` (array to page register), then takes the earliest free slot
//!   of its channel for the transfer of the page to the controller. The die stays booked until the
//!   transfer ends, because its page register holds the data until then.
//! * A **program** takes the earliest slot at which its channel can transfer the page into the die's
//!   register and the die is free, then occupies the die for `tPROG`.
//! * An **erase** occupies its die for `tBERS`; it uses no channel.
//! * **Controller work** of a given cost occupies the controller core that can start it earliest
//!   under [`ControllerModel::Interchangeable`]; under [`ControllerModel::Threads`] a request's
//!   work runs on core 0 and background work on its lane's core (see `background.rs`).
//!
//! Every resource books the earliest gap long enough for the work, at or after the time the work can
//! start — even a gap before work booked earlier. That matters twice. A channel is shared by the dies
//! on it and a controller transfers whichever die's data is ready: a single busy-until time per
//! channel would leave gaps idle and understate random-read bandwidth by a fifth at queue depth 64.
//! And engines issue dependent chains (a value read when its index read completes; a compaction's
//! writes when its reads complete), so operations reach the model out of time order: a read issued
//! at time t must not queue behind a read that some other request issued for a later time.
//!
//! Bookings that ended more than [`BOOKING_WINDOW_NS`] before the command clock (the latest issue
//! time seen, while no driver keeps a clock) are forgotten, to bound memory, once the background
//! work ready by then has been issued. The model therefore assumes no operation, and no background
//! work, is issued more than that window before the clock; one that is, is still scheduled
//! (possibly too early) and counted in [`crate::Flash::late_issues`], so a driver can check the
//! assumption held. The window follows the clock rather than the latest issue because a command's
//! own operations may run far ahead of it (a write stalled behind background work), while other
//! commands go on at the clock.

use crate::background::{Background, JobId, Lane, Work};
use crate::Geometry;

/// Simulated nanoseconds.
pub type SimTime = u64;

/// The timing parameters of a flash array and its controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimingProfile {
    /// tR: nanoseconds to sense a page into the die's register.
    pub read_ns: u64,
    /// tPROG: nanoseconds to program a page from the die's register.
    pub program_ns: u64,
    /// tBERS: nanoseconds to erase a block.
    pub erase_ns: u64,
    /// Bytes per second that one channel moves between controller and die.
    pub channel_bytes_per_second: u64,
    /// Controller cores on which engine computation is charged.
    pub controller_cores: u32,
    /// Clock of a controller core, in hertz (informational: engines convert their counts with it).
    pub controller_hz: u64,
    /// How the controller's work is spread over its cores and when background work runs.
    pub controller: ControllerModel,
}

/// How the controller runs the work it is charged with.
///
/// See `docs/design.md`, "The controller: threads and background work".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControllerModel {
    /// As PinK's prototype runs: requests on one request thread (core 0), flush, compaction and
    /// GC as jobs of one background thread (core 1) whose flash operations are issued a bounded
    /// amount at a time (one per die) as simulated time advances, so user reads are served
    /// between them instead of queueing behind a whole merge.
    Threads,
    /// Every core takes any work and background work is booked in full when it is triggered, so
    /// the request that triggers a flush waits for its whole cascade (the model of earlier
    /// releases, kept so their figures can be reproduced).
    Interchangeable,
}

impl TimingProfile {
    /// PinK's card (ATC'20 §3.2, §5.1): 8 channels x 8 ways of 8 KiB pages, 1.1 GB/s read, 600 MB/s write,
    /// quad-core ARM Cortex-A53 at 1.2 GHz. See `docs/design.md` for how each number was chosen.
    pub fn pink() -> Self {
        TimingProfile {
            read_ns: 60_000,
            program_ns: 814_000,
            erase_ns: 3_500_000,
            channel_bytes_per_second: 137_500_000,
            controller_cores: 4,
            controller_hz: 1_200_000_000,
            controller: ControllerModel::Interchangeable,
        }
    }

    /// Nanoseconds a channel is busy moving `bytes`, rounded up.
    pub fn transfer_ns(&self, bytes: u64) -> u64 {
        let numerator = u128::from(bytes) * 1_000_000_000;
        let rate = u128::from(self.channel_bytes_per_second.max(1));
        numerator.div_ceil(rate) as u64
    }

    /// Time of one read on an idle device: `tR + transfer(page)`.
    pub fn read_alone_ns(&self, page_bytes: u32) -> u64 {
        self.read_ns + self.transfer_ns(u64::from(page_bytes))
    }

    /// Time of one program on an idle device: `transfer(page) + tPROG`.
    pub fn program_alone_ns(&self, page_bytes: u32) -> u64 {
        self.transfer_ns(u64::from(page_bytes)) + self.program_ns
    }

    /// The read bandwidth (bytes per second) the array can sustain with every die and channel busy.
    pub fn read_bandwidth_limit(&self, geometry: &Geometry) -> f64 {
        let page = f64::from(geometry.page_bytes);
        let channel_limit = f64::from(geometry.channels) * self.channel_bytes_per_second as f64;
        let die_limit = f64::from(geometry.dies()) * page * 1e9
            / self.read_alone_ns(geometry.page_bytes) as f64;
        channel_limit.min(die_limit)
    }

    /// The program bandwidth (bytes per second) the array can sustain with every die and channel busy.
    pub fn program_bandwidth_limit(&self, geometry: &Geometry) -> f64 {
        let page = f64::from(geometry.page_bytes);
        let channel_limit = f64::from(geometry.channels) * self.channel_bytes_per_second as f64;
        let die_limit = f64::from(geometry.dies()) * page * 1e9
            / self.program_alone_ns(geometry.page_bytes) as f64;
        channel_limit.min(die_limit)
    }
}

/// How far behind the command clock (or the latest issue time, without a clock) an operation may
/// be issued: bookings that ended earlier than this are forgotten. Two simulated seconds is far
/// longer than any chain of dependent operations an engine issues (a whole-level merge of the
/// `pink` profile takes tens of milliseconds).
pub const BOOKING_WINDOW_NS: u64 = 2_000_000_000;

/// Calendars of every die, channel and controller core, and the background thread's queue.
#[derive(Debug, Clone)]
pub(crate) struct Timeline {
    pub(crate) profile: TimingProfile,
    channels: u32,
    pub(crate) dies: Vec<Calendar>,
    channel_calendars: Vec<Calendar>,
    cores: Vec<Calendar>,
    /// The merge accelerator of PinK+HW (used only by presets that merge in hardware).
    accelerator: Calendar,
    latest_issue: SimTime,
    late_issues: u64,
    /// Operations issued before this time are late: bookings that ended by it may be forgotten.
    horizon: SimTime,
    /// When calendars were last cleared of bookings that ended by the horizon.
    forgotten_at: SimTime,
    /// Background jobs being recorded and waiting to be played ([`ControllerModel::Threads`]).
    pub(crate) background: Background,
    /// Nanoseconds each core and the accelerator were booked, for utilisation figures.
    pub(crate) busy: Busy,
    /// The command clock, once a driver sets it ([`Timeline::advance_clock`]).
    clock: Option<SimTime>,
    /// The last write-stall projection, played on, kept for the next ([`Timeline::project_done`]).
    pub(crate) projection: Option<Box<Timeline>>,
}

/// Nanoseconds of controller work booked so far, by thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Busy {
    /// Work of the request thread (searches, L0 inserts), or of any core under
    /// [`ControllerModel::Interchangeable`].
    pub request_ns: u64,
    /// Work of the background thread (flush and compaction).
    pub background_ns: u64,
    /// Work of GC.
    pub gc_ns: u64,
    /// Work of the merge accelerator.
    pub accelerator_ns: u64,
}

/// How far the horizon must advance before calendars are cleared again: clearing walks every
/// calendar, so it is done at most once per this much simulated time, not at every operation.
const FORGET_STEP_NS: u64 = 100_000;

/// Bookings a calendar's copy has room for beyond those it copies.
const COPY_ROOM: usize = 64;

/// A free interval's start, and where a booking of it goes among a calendar's bookings.
#[derive(Debug, Clone, Copy)]
struct Gap {
    start: SimTime,
    position: usize,
}

/// Booked, disjoint, sorted intervals `[start, end)` of one resource.
#[derive(Debug, Clone, Default)]
pub(crate) struct Calendar {
    booked: std::collections::VecDeque<(SimTime, SimTime)>,
}

impl Calendar {
    /// Index of the first booking that ends after `at`.
    fn first_ending_after(&self, at: SimTime) -> usize {
        self.partition_point(|&(_, end)| end <= at)
    }

    /// The index of the first booking for which `before` is false (`before` holds of a prefix).
    /// Most questions are about times at or past every booking, or past the last few hundred
    /// at most (operations of other clients queued on the same resource), while a calendar
    /// keeps thousands: the search gallops back from the end (1, 2, 4, ... bookings back) and
    /// then halves the last stride, so that it reads the recent bookings, which the host keeps
    /// in its cache, rather than halving the whole calendar from its middle, a miss a step. It
    /// searches the deque's two slices in turn, the later first, rather than indexing the
    /// deque, which wraps every index.
    fn partition_point(&self, before: impl Fn(&(SimTime, SimTime)) -> bool) -> usize {
        let (front, back) = self.booked.as_slices();
        let in_back = gallop_back(back, &before);
        if in_back > 0 || front.is_empty() {
            return front.len() + in_back;
        }
        gallop_back(front, &before)
    }

    /// The earliest start at or after `ready` of a free interval `duration` long.
    fn find(&self, ready: SimTime, duration: u64) -> SimTime {
        self.find_gap(ready, duration).start
    }

    /// [`Calendar::find`], with where a booking of the gap goes in the calendar (the first booking
    /// after it), for [`Calendar::book_in`]: every booking the search passed ends by the gap's
    /// start, and the one it stopped at starts after the gap.
    fn find_gap(&self, ready: SimTime, duration: u64) -> Gap {
        let mut start = ready;
        let first = self.first_ending_after(ready);
        let mut position = first;
        for &(booked_start, booked_end) in self.booked.range(first..) {
            if booked_start >= start + duration {
                break;
            }
            start = start.max(booked_end);
            position += 1;
        }
        Gap { start, position }
    }

    /// Whether `[start, start + duration)` is free.
    fn fits(&self, start: SimTime, duration: u64) -> bool {
        self.booked
            .get(self.first_ending_after(start))
            .is_none_or(|&(booked_start, _)| booked_start >= start + duration)
    }

    /// Books `[start, end)`. REQUIRES: the interval is free.
    fn book(&mut self, start: SimTime, end: SimTime) {
        let position = self.partition_point(|&(booked_start, _)| booked_start < start);
        self.book_at(position, start, end);
    }

    /// Books `[start, end)` within `gap` (which [`Calendar::find_gap`] found, the calendar
    /// unchanged since), without searching for where it goes again.
    fn book_in(&mut self, gap: Gap, end: SimTime) {
        debug_assert_eq!(
            gap.position,
            self.partition_point(|&(booked_start, _)| booked_start < gap.start),
            "a gap found before the calendar changed"
        );
        self.book_at(gap.position, gap.start, end);
    }

    /// Books `[start, end)` before the booking at `position`, the first that starts at or after
    /// `start`. REQUIRES: the interval is free.
    fn book_at(&mut self, position: usize, start: SimTime, end: SimTime) {
        debug_assert!(
            self.fits(start, end - start),
            "booking over a booked interval"
        );
        if start == end {
            return;
        }
        // Merge with touching neighbours so the calendar stays short.
        let touches_previous = position > 0 && self.booked[position - 1].1 == start;
        let touches_next = position < self.booked.len() && self.booked[position].0 == end;
        match (touches_previous, touches_next) {
            (true, true) => {
                let next_end = self.booked[position].1;
                self.booked[position - 1].1 = next_end;
                self.booked.remove(position);
            }
            (true, false) => self.booked[position - 1].1 = end,
            (false, true) => self.booked[position].0 = start,
            (false, false) => self.booked.insert(position, (start, end)),
        }
    }

    /// Books the earliest free interval of `duration` at or after `ready`; returns its end.
    fn book_earliest(&mut self, ready: SimTime, duration: u64) -> SimTime {
        let gap = self.find_gap(ready, duration);
        let end = gap.start + duration;
        self.book_in(gap, end);
        end
    }

    /// A copy holding only the bookings that end after `from`: all that a booking at or after
    /// `from` can meet.
    fn copy_after(&self, from: SimTime) -> Calendar {
        let kept = self.booked.range(self.first_ending_after(from)..);
        // Room for the bookings a projection adds, so the copy does not grow by reallocating.
        let mut booked = std::collections::VecDeque::with_capacity(kept.len() + COPY_ROOM);
        booked.extend(kept.copied());
        Calendar { booked }
    }

    /// Forgets bookings that ended by `horizon`.
    fn forget_before(&mut self, horizon: SimTime) {
        while self.booked.front().is_some_and(|&(_, end)| end <= horizon) {
            self.booked.pop_front();
        }
    }

    pub(crate) fn busy_until(&self) -> SimTime {
        self.booked.back().map_or(0, |&(_, end)| end)
    }
}

/// The index of the first of `bookings` for which `before` is false (`before` holds of a
/// prefix), found by galloping back from the end and halving the last stride
/// ([`Calendar::partition_point`]).
fn gallop_back(
    bookings: &[(SimTime, SimTime)],
    before: &impl Fn(&(SimTime, SimTime)) -> bool,
) -> usize {
    // Every booking from `high` on is not before.
    let mut high = bookings.len();
    let mut stride = 1;
    let low = loop {
        let Some(probe) = high.checked_sub(stride) else {
            break 0;
        };
        if before(&bookings[probe]) {
            break probe + 1;
        }
        high = probe;
        stride *= 2;
    };
    // The first booking not before lies in `low..=high`.
    low + bookings[low..high].partition_point(before)
}

impl Timeline {
    pub(crate) fn new(profile: TimingProfile, geometry: &Geometry) -> Self {
        let cores = profile.controller_cores.max(1) as usize;
        Timeline {
            channels: geometry.channels,
            dies: vec![Calendar::default(); geometry.dies() as usize],
            channel_calendars: vec![Calendar::default(); geometry.channels as usize],
            cores: vec![Calendar::default(); cores],
            accelerator: Calendar::default(),
            background: Background::new(geometry.dies()),
            busy: Busy::default(),
            clock: None,
            projection: None,
            profile,
            latest_issue: 0,
            late_issues: 0,
            horizon: 0,
            forgotten_at: 0,
        }
    }

    /// A copy to play forward from `from` on: calendars keep only the bookings that end after
    /// it, which is all that bookings at or after `from` can meet (copying whole calendars, two
    /// seconds of bookings per die, is what made projecting a write stall slow).
    pub(crate) fn copy_after(&self, from: SimTime) -> Timeline {
        let copy = |calendars: &[Calendar]| -> Vec<Calendar> {
            calendars
                .iter()
                .map(|calendar| calendar.copy_after(from))
                .collect()
        };
        Timeline {
            profile: self.profile.clone(),
            channels: self.channels,
            dies: copy(&self.dies),
            channel_calendars: copy(&self.channel_calendars),
            cores: copy(&self.cores),
            accelerator: self.accelerator.copy_after(from),
            latest_issue: self.latest_issue,
            late_issues: self.late_issues,
            horizon: self.horizon,
            forgotten_at: self.forgotten_at,
            background: self.background.clone(),
            busy: self.busy,
            clock: self.clock,
            projection: None,
        }
    }

    pub(crate) fn profile(&self) -> &TimingProfile {
        &self.profile
    }

    pub(crate) fn late_issues(&self) -> u64 {
        self.late_issues
    }

    /// Whether background work is played lazily (the threads model) rather than booked at once.
    fn threaded(&self) -> bool {
        self.profile.controller == ControllerModel::Threads
    }

    /// Notes an issue time (late if before the horizon).
    fn issue(&mut self, at: SimTime) {
        self.count_if_late(at);
        self.latest_issue = self.latest_issue.max(at);
    }

    /// Forgets bookings that ended more than the window before the command clock, or before the
    /// latest issue time while no driver keeps a clock. Called once the background work ready
    /// by then has been issued: work issued later is no earlier than the clock (a command's own
    /// operations) or than the work that made it ready.
    fn forget_behind(&mut self) {
        let now = self.clock.unwrap_or(self.latest_issue);
        self.advance_horizon(now.saturating_sub(BOOKING_WINDOW_NS));
    }

    /// Counts work issued at `at`, foreground or background, as late if `at` is before the
    /// horizon.
    pub(crate) fn count_if_late(&mut self, at: SimTime) {
        if at < self.horizon {
            self.late_issues += 1;
        }
    }

    /// Promises that no operation will be issued before `horizon` (a closed-loop driver knows
    /// this: its earliest ready client); bookings that ended by then are forgotten.
    pub(crate) fn advance_horizon(&mut self, horizon: SimTime) {
        if horizon <= self.horizon {
            return;
        }
        self.horizon = horizon;
        if horizon < self.forgotten_at + FORGET_STEP_NS {
            return;
        }
        self.forgotten_at = horizon;
        for calendar in self
            .dies
            .iter_mut()
            .chain(self.channel_calendars.iter_mut())
            .chain(self.cores.iter_mut())
            .chain(std::iter::once(&mut self.accelerator))
        {
            calendar.forget_before(horizon);
        }
    }

    /// A foreground operation issued at `at`: background work ready by then (and by the command
    /// clock, when a driver keeps one) is issued first.
    fn foreground(&mut self, at: SimTime) {
        self.issue(at);
        if self.background.has_work() {
            self.pump(self.pump_limit(at));
        }
        self.forget_behind();
    }

    /// How far the background thread may be played for work issued at `at`.
    pub(crate) fn pump_limit(&self, at: SimTime) -> SimTime {
        match self.clock {
            Some(clock) => clock.min(at),
            None => at.min(self.latest_issue),
        }
    }

    /// Advances the command clock to `at` and issues the background work ready by then.
    pub(crate) fn advance_clock(&mut self, at: SimTime) {
        let clock = self.clock.map_or(at, |clock| clock.max(at));
        self.clock = Some(clock);
        if self.background.has_work() {
            self.pump(clock);
        }
        self.forget_behind();
    }

    pub(crate) fn read(&mut self, at: SimTime, die: u32, bytes: u64) -> SimTime {
        if self.background.record(Work::Read { die, bytes }) {
            return at;
        }
        self.foreground(at);
        self.forget_projection();
        self.book_read(at, die, bytes)
    }

    pub(crate) fn program(&mut self, at: SimTime, die: u32, bytes: u64) -> SimTime {
        if self.background.record(Work::Program { die, bytes }) {
            return at;
        }
        self.foreground(at);
        self.forget_projection();
        self.book_program(at, die, bytes)
    }

    pub(crate) fn erase(&mut self, at: SimTime, die: u32) -> SimTime {
        if self.background.record(Work::Erase { die }) {
            return at;
        }
        self.foreground(at);
        self.forget_projection();
        self.book_erase(at, die)
    }

    pub(crate) fn cpu(&mut self, at: SimTime, cost_ns: u64) -> SimTime {
        if self.background.record(Work::Cpu { ns: cost_ns }) {
            return at;
        }
        self.foreground(at);
        if self.threaded() {
            // The request thread runs on core 0, which background work shares only on a
            // single-core controller.
            if self.cores.len() == 1 {
                self.forget_projection();
            }
            self.busy.request_ns += cost_ns;
            return self.cores[0].book_earliest(at, cost_ns);
        }
        // The core that can start earliest; ties go to the lowest-numbered core for reproducibility.
        let (core, start) = self
            .cores
            .iter()
            .enumerate()
            .map(|(index, calendar)| (index, calendar.find(at, cost_ns)))
            .min_by_key(|&(index, start)| (start, index))
            .unwrap_or((0, at));
        self.cores[core].book(start, start + cost_ns);
        self.busy.request_ns += cost_ns;
        start + cost_ns
    }

    /// Work of the merge accelerator, `cost_ns` long.
    pub(crate) fn accelerate(&mut self, at: SimTime, cost_ns: u64) -> SimTime {
        if self.background.record(Work::Accelerator { ns: cost_ns }) {
            return at;
        }
        self.foreground(at);
        self.forget_projection();
        self.book_accelerator(at, cost_ns)
    }

    /// Starts recording a background job issued at `at` (nested calls join the outer job).
    /// Under [`ControllerModel::Interchangeable`] nothing is recorded: work is booked at once.
    pub(crate) fn begin_background(&mut self, at: SimTime, lane: Lane) {
        if self.threaded() {
            self.background.begin(at, lane);
        }
    }

    /// Ends the recording begun by the matching [`Timeline::begin_background`]; returns the job
    /// queued for the background thread, if the outermost recording asked for any work.
    pub(crate) fn end_background(&mut self) -> Option<JobId> {
        let (id, lane) = self.background.end()?;
        self.projection_takes(lane);
        Some(id)
    }

    pub(crate) fn book_read(&mut self, at: SimTime, die: u32, bytes: u64) -> SimTime {
        let channel = (die % self.channels) as usize;
        let die = die as usize;
        let (read_ns, transfer_ns) = (self.profile.read_ns, self.profile.transfer_ns(bytes));
        // The die is held from the start of sensing to the end of the transfer, whose slot depends
        // on the channel: widen the die interval until one fits both.
        let mut hold = read_ns + transfer_ns;
        let mut start = at;
        loop {
            let die_gap = self.dies[die].find_gap(start, hold);
            start = die_gap.start;
            let transfer = self.channel_calendars[channel].find_gap(start + read_ns, transfer_ns);
            let needed = transfer.start + transfer_ns - start;
            if needed <= hold {
                // Within both gaps just found: neither calendar is searched again.
                let end = transfer.start + transfer_ns;
                self.dies[die].book_in(die_gap, end);
                self.channel_calendars[channel].book_in(transfer, end);
                return end;
            }
            hold = needed;
        }
    }

    pub(crate) fn book_program(&mut self, at: SimTime, die: u32, bytes: u64) -> SimTime {
        let channel = (die % self.channels) as usize;
        let die = die as usize;
        let (program_ns, transfer_ns) = (self.profile.program_ns, self.profile.transfer_ns(bytes));
        let hold = transfer_ns + program_ns;
        let mut ready = at;
        loop {
            let transfer = self.channel_calendars[channel].find_gap(ready, transfer_ns);
            let transfer_start = transfer.start;
            if self.dies[die].fits(transfer_start, hold) {
                self.channel_calendars[channel].book_in(transfer, transfer_start + transfer_ns);
                self.dies[die].book(transfer_start, transfer_start + hold);
                return transfer_start + hold;
            }
            ready = self.dies[die].find(transfer_start, hold);
        }
    }

    pub(crate) fn book_erase(&mut self, at: SimTime, die: u32) -> SimTime {
        let erase_ns = self.profile.erase_ns;
        self.dies[die as usize].book_earliest(at, erase_ns)
    }

    /// Background CPU work: flush and compaction on core 1, GC on core 2 (on the last core when
    /// there are fewer).
    pub(crate) fn book_background_cpu(&mut self, at: SimTime, cost_ns: u64, gc: bool) -> SimTime {
        let core = if gc { 2 } else { 1 }.min(self.cores.len() - 1);
        if gc {
            self.busy.gc_ns += cost_ns;
        } else {
            self.busy.background_ns += cost_ns;
        }
        self.cores[core].book_earliest(at, cost_ns)
    }

    pub(crate) fn book_accelerator(&mut self, at: SimTime, cost_ns: u64) -> SimTime {
        self.busy.accelerator_ns += cost_ns;
        self.accelerator.book_earliest(at, cost_ns)
    }

    /// The time by which every resource is idle and every queued background job has run (as if
    /// no more foreground work arrived).
    pub(crate) fn quiescent_at(&self) -> SimTime {
        let booked = |timeline: &Timeline| {
            timeline
                .dies
                .iter()
                .chain(&timeline.channel_calendars)
                .chain(&timeline.cores)
                .chain(std::iter::once(&timeline.accelerator))
                .map(Calendar::busy_until)
                .max()
                .unwrap_or(0)
        };
        if !self.background.has_work() {
            return booked(self);
        }
        let mut played = self.copy_after(0);
        played.pump(SimTime::MAX);
        booked(&played)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_pink_transfer_of_a_page() {
        let profile = TimingProfile::pink();
        // 8192 B at 137.5 MB/s = 59_578.18 ns, rounded up.
        assert_eq!(profile.transfer_ns(8192), 59_579);
        assert_eq!(profile.read_alone_ns(8192), 60_000 + 59_579);
    }

    #[test]
    fn timing_pink_limits_match_the_card() {
        let profile = TimingProfile::pink();
        let geometry = crate::Profile::pink().geometry;
        let read = profile.read_bandwidth_limit(&geometry);
        let write = profile.program_bandwidth_limit(&geometry);
        assert!((read - 1.1e9).abs() / 1.1e9 < 0.01, "read {read}");
        assert!((write - 600e6).abs() / 600e6 < 0.01, "write {write}");
    }

    #[test]
    fn timing_calendar_fills_gaps() {
        let mut calendar = Calendar::default();
        assert_eq!(calendar.book_earliest(100, 10), 110);
        // Fits before the booking at 100.
        assert_eq!(calendar.book_earliest(20, 10), 30);
        // Does not fit in [30, 100) when it needs 80: goes after 110.
        assert_eq!(calendar.book_earliest(30, 80), 190);
        // Exactly fills [30, 100).
        assert_eq!(calendar.book_earliest(30, 70), 100);
        // [20, 30) [30, 100) [100, 110) [110, 190) touch end to end and merge into one booking.
        assert_eq!(calendar.booked, [(20, 190)]);
        assert_eq!(calendar.busy_until(), 190);
        assert_eq!(calendar.book_earliest(150, 5), 195);
        assert!(calendar.fits(0, 20));
        assert!(!calendar.fits(0, 21));
        assert!(calendar.fits(195, 1_000));
        calendar.forget_before(300);
        assert!(calendar.booked.is_empty());
    }

    #[test]
    fn timing_calendar_search_finds_every_boundary() {
        // Calendars of every length up to 70 bookings, their deques wrapped at every point (the
        // first `split` bookings pushed at the front), asked about every time around them: the
        // galloping search answers as a search of the whole calendar does.
        for (length, split) in (0..70u64).flat_map(|length| (0..=length).map(move |s| (length, s)))
        {
            let booking = |at: u64| (10 * at, 10 * at + 5);
            let mut booked = std::collections::VecDeque::with_capacity(length as usize);
            booked.extend((split..length).map(booking));
            for at in (0..split).rev() {
                booked.push_front(booking(at));
            }
            assert_eq!(
                booked.as_slices().1.is_empty(),
                split == 0 || split == length
            );
            let calendar = Calendar { booked };
            for at in 0..=10 * length + 10 {
                let ends = |&(_, end): &(SimTime, SimTime)| end <= at;
                let starts = |&(start, _): &(SimTime, SimTime)| start < at;
                assert_eq!(
                    calendar.partition_point(ends),
                    calendar.booked.partition_point(ends),
                    "ends by {at} of {length}"
                );
                assert_eq!(
                    calendar.partition_point(starts),
                    calendar.booked.partition_point(starts),
                    "starts before {at} of {length}"
                );
            }
        }
    }

    #[test]
    fn timing_out_of_order_issue_uses_earlier_gaps() {
        let geometry = crate::Profile::test_min().geometry;
        let profile = TimingProfile::pink();
        let alone = profile.read_alone_ns(geometry.page_bytes);
        let mut timeline = Timeline::new(profile, &geometry);
        // A read dated in the future does not delay one issued afterwards for an earlier time.
        let later = timeline.read(1_000_000, 0, u64::from(geometry.page_bytes));
        assert_eq!(later, 1_000_000 + alone);
        assert_eq!(timeline.read(0, 0, u64::from(geometry.page_bytes)), alone);
        // But one that would overlap it waits for it.
        let overlapping = timeline.read(1_000_000 - alone / 2, 0, u64::from(geometry.page_bytes));
        assert_eq!(overlapping, later + alone);
        assert_eq!(timeline.late_issues(), 0);
        timeline.read(3 * BOOKING_WINDOW_NS, 1, 8);
        timeline.read(0, 1, 8);
        assert_eq!(
            timeline.late_issues(),
            1,
            "an issue older than the window is counted"
        );
    }

    /// A command's own operations may run seconds ahead of the command clock (a write stalled
    /// behind background work), and the other clients' commands go on at the clock meanwhile:
    /// the window is kept behind the clock, so their operations still meet every booking.
    #[test]
    fn timing_window_follows_the_command_clock_not_a_stalled_operation() {
        let geometry = crate::Profile::test_min().geometry;
        let page = u64::from(geometry.page_bytes);
        let profile = TimingProfile::pink();
        let alone = profile.read_alone_ns(geometry.page_bytes);
        let mut timeline = Timeline::new(profile, &geometry);
        timeline.advance_clock(0);
        let first = timeline.read(0, 0, page);
        // A stalled write's operation, three windows ahead of the clock.
        timeline.read(3 * BOOKING_WINDOW_NS, 1, page);
        // Another command at the clock queues behind the first read on the same die.
        timeline.advance_clock(1);
        assert_eq!(timeline.read(1, 0, page), first + alone);
        assert_eq!(timeline.late_issues(), 0);
        // Once the clock moves a window past a booking, the booking is forgotten, and an
        // operation dated before it is counted.
        timeline.advance_clock(BOOKING_WINDOW_NS + FORGET_STEP_NS + first + alone);
        timeline.read(2, 0, page);
        assert_eq!(timeline.late_issues(), 1);
    }

    #[test]
    fn timing_cpu_uses_earliest_free_core() {
        let geometry = crate::Profile::test_min().geometry;
        let mut profile = TimingProfile::pink();
        profile.controller_cores = 2;
        profile.controller = ControllerModel::Interchangeable;
        let mut timeline = Timeline::new(profile, &geometry);
        assert_eq!(timeline.cpu(0, 100), 100);
        assert_eq!(timeline.cpu(0, 50), 50);
        // Core 1 frees first (at 50).
        assert_eq!(timeline.cpu(10, 10), 60);
        assert_eq!(timeline.cpu(0, 10), 70);
        assert_eq!(timeline.quiescent_at(), 100);
        // Work dated after both cores' bookings fits in a gap if one is long enough.
        assert_eq!(timeline.cpu(200, 10), 210);
        assert_eq!(timeline.cpu(100, 50), 150);
    }
}
