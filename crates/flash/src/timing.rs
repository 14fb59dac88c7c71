//! The timing model: a virtual clock in nanoseconds, with every die, channel and controller core a
//! resource that is busy until some time.
//!
//! Operations are scheduled, never slept: each takes the simulated time at which it is issued and
//! returns the time at which it completes. A caller may issue many operations before it waits for any,
//! which is how channel and die parallelism (and later, prefetching) show up in simulated time.
//!
//! * A **read** waits for its die, occupies it for `tR` (array to page register), then takes the
//!   earliest free slot of its channel for the transfer of the page to the controller. The die stays
//!   busy until the transfer ends, because its page register holds the data until then.
//! * A **program** waits for its die, takes the earliest free slot of its channel at or after that for
//!   the transfer of the page into the die's register, then occupies the die for `tPROG`.
//! * An **erase** waits for its die and occupies it for `tBERS`; it uses no channel.
//! * **Controller work** of a given cost occupies the earliest-free controller core.
//!
//! A die executes its commands in the order they are issued. A channel is shared by the dies on it, and
//! a controller transfers whichever die's data is ready: so each channel keeps a calendar of the
//! transfers already booked, and a new transfer takes the earliest gap long enough for it, even one
//! before a transfer booked earlier (a single busy-until time per channel would leave such gaps idle
//! and understate the bandwidth of random reads by about a fifth at queue depth 64).
//!
//! Callers must issue operations in non-decreasing issue time for the result to be causal: bookings
//! that end before the latest issue time are forgotten. Closed-loop drivers achieve this with a
//! priority queue of client ready times.

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

/// Busy-until times of every die, channel and controller core.
#[derive(Debug, Clone)]
pub(crate) struct Timeline {
    profile: TimingProfile,
    channels: u32,
    die_busy_until: Vec<SimTime>,
    channel_calendars: Vec<Calendar>,
    core_busy_until: Vec<SimTime>,
}

/// Booked, disjoint, sorted busy intervals `[start, end)` of one channel.
#[derive(Debug, Clone, Default)]
struct Calendar {
    booked: std::collections::VecDeque<(SimTime, SimTime)>,
}

impl Calendar {
    /// Books `duration` at the earliest gap starting at or after `ready`; returns the end. Bookings
    /// that ended by `horizon` (the latest issue time) can no longer matter and are dropped.
    fn book(&mut self, horizon: SimTime, ready: SimTime, duration: u64) -> SimTime {
        while self.booked.front().is_some_and(|&(_, end)| end <= horizon) {
            self.booked.pop_front();
        }
        let mut start = ready;
        let mut position = self.booked.len();
        for (index, &(booked_start, booked_end)) in self.booked.iter().enumerate() {
            if booked_end <= start {
                continue;
            }
            if booked_start >= start + duration {
                position = index;
                break;
            }
            start = booked_end;
        }
        let end = start + duration;
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
        end
    }

    fn busy_until(&self) -> SimTime {
        self.booked.back().map_or(0, |&(_, end)| end)
    }
}

impl Timeline {
    pub(crate) fn new(profile: TimingProfile, geometry: &Geometry) -> Self {
        let cores = profile.controller_cores.max(1) as usize;
        Timeline {
            channels: geometry.channels,
            die_busy_until: vec![0; geometry.dies() as usize],
            channel_calendars: vec![Calendar::default(); geometry.channels as usize],
            core_busy_until: vec![0; cores],
            profile,
        }
    }

    pub(crate) fn profile(&self) -> &TimingProfile {
        &self.profile
    }

    pub(crate) fn read(&mut self, at: SimTime, die: u32, bytes: u64) -> SimTime {
        let channel = (die % self.channels) as usize;
        let die = die as usize;
        let sensed = at.max(self.die_busy_until[die]) + self.profile.read_ns;
        let transfer_ns = self.profile.transfer_ns(bytes);
        let transferred = self.channel_calendars[channel].book(at, sensed, transfer_ns);
        self.die_busy_until[die] = transferred;
        transferred
    }

    pub(crate) fn program(&mut self, at: SimTime, die: u32, bytes: u64) -> SimTime {
        let channel = (die % self.channels) as usize;
        let die = die as usize;
        let die_ready = at.max(self.die_busy_until[die]);
        let transfer_ns = self.profile.transfer_ns(bytes);
        let transferred = self.channel_calendars[channel].book(at, die_ready, transfer_ns);
        let programmed = transferred + self.profile.program_ns;
        self.die_busy_until[die] = programmed;
        programmed
    }

    pub(crate) fn erase(&mut self, at: SimTime, die: u32) -> SimTime {
        let die = die as usize;
        let erased = at.max(self.die_busy_until[die]) + self.profile.erase_ns;
        self.die_busy_until[die] = erased;
        erased
    }

    pub(crate) fn cpu(&mut self, at: SimTime, cost_ns: u64) -> SimTime {
        // The earliest-free core; ties go to the lowest-numbered core so runs are reproducible.
        let (core, busy_until) = self
            .core_busy_until
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(index, busy)| (busy, index))
            .unwrap_or((0, 0));
        let done = at.max(busy_until) + cost_ns;
        if let Some(slot) = self.core_busy_until.get_mut(core) {
            *slot = done;
        }
        done
    }

    /// The time by which every resource is idle.
    pub(crate) fn quiescent_at(&self) -> SimTime {
        self.die_busy_until
            .iter()
            .chain(&self.core_busy_until)
            .copied()
            .chain(self.channel_calendars.iter().map(Calendar::busy_until))
            .max()
            .unwrap_or(0)
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
    fn timing_channel_calendar_fills_gaps() {
        let mut calendar = Calendar::default();
        assert_eq!(calendar.book(0, 100, 10), 110);
        // Fits before the booking at 100.
        assert_eq!(calendar.book(0, 20, 10), 30);
        // Does not fit in [30, 100) when it needs 80: goes after 110.
        assert_eq!(calendar.book(0, 30, 80), 190);
        // Exactly fills [30, 100).
        assert_eq!(calendar.book(0, 30, 70), 100);
        // [20, 30) [30, 100) [100, 110) [110, 190) touch end to end and merge into one booking.
        assert_eq!(calendar.booked, [(20, 190)]);
        assert_eq!(calendar.busy_until(), 190);
        assert_eq!(calendar.book(150, 150, 5), 195);
        // Bookings that end before the issue horizon are forgotten.
        assert_eq!(calendar.book(300, 300, 5), 305);
        assert_eq!(calendar.booked, [(300, 305)]);
    }

    #[test]
    fn timing_cpu_uses_earliest_free_core() {
        let geometry = crate::Profile::test_min().geometry;
        let mut profile = TimingProfile::pink();
        profile.controller_cores = 2;
        let mut timeline = Timeline::new(profile, &geometry);
        assert_eq!(timeline.cpu(0, 100), 100);
        assert_eq!(timeline.cpu(0, 50), 50);
        // Core 1 frees first (at 50).
        assert_eq!(timeline.cpu(10, 10), 60);
        assert_eq!(timeline.cpu(0, 10), 70);
        assert_eq!(timeline.quiescent_at(), 100);
    }
}
