//! The timing model: a virtual clock in nanoseconds, with every die, channel and controller core a
//! resource that is busy until some time.
//!
//! Operations are scheduled, never slept: each takes the simulated time at which it is issued and
//! returns the time at which it completes. A caller may issue many operations before it waits for any,
//! which is how channel and die parallelism (and later, prefetching) show up in simulated time.
//!
//! * A **read** waits for its die, occupies it for `tR` (array to page register), then waits for its
//!   channel and occupies it for the transfer of the page to the controller. The die stays busy until
//!   the transfer ends, because its page register holds the data until then.
//! * A **program** waits for both its channel and its die, occupies the channel for the transfer of the
//!   page into the die's register, then occupies the die for `tPROG`.
//! * An **erase** waits for its die and occupies it for `tBERS`; it uses no channel.
//! * **Controller work** of a given cost occupies the earliest-free controller core.
//!
//! Callers must issue operations in non-decreasing issue time for the result to be causal; the model
//! does not reorder. Closed-loop drivers achieve this with a priority queue of client ready times.

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
    channel_busy_until: Vec<SimTime>,
    core_busy_until: Vec<SimTime>,
}

impl Timeline {
    pub(crate) fn new(profile: TimingProfile, geometry: &Geometry) -> Self {
        let cores = profile.controller_cores.max(1) as usize;
        Timeline {
            channels: geometry.channels,
            die_busy_until: vec![0; geometry.dies() as usize],
            channel_busy_until: vec![0; geometry.channels as usize],
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
        let transferred =
            sensed.max(self.channel_busy_until[channel]) + self.profile.transfer_ns(bytes);
        self.channel_busy_until[channel] = transferred;
        self.die_busy_until[die] = transferred;
        transferred
    }

    pub(crate) fn program(&mut self, at: SimTime, die: u32, bytes: u64) -> SimTime {
        let channel = (die % self.channels) as usize;
        let die = die as usize;
        let start = at
            .max(self.die_busy_until[die])
            .max(self.channel_busy_until[channel]);
        let transferred = start + self.profile.transfer_ns(bytes);
        let programmed = transferred + self.profile.program_ns;
        self.channel_busy_until[channel] = transferred;
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
            .chain(&self.channel_busy_until)
            .chain(&self.core_busy_until)
            .copied()
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
