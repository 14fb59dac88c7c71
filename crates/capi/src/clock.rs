//! The device's simulated clock, pacing, and the latencies kept for `kvssd_get_latency_report`.
//!
//! The device takes the simulated time at which each command is issued and returns the time at
//! which it completes. A C program knows nothing of simulated time, so each open device keeps one
//! clock and maps every caller onto it:
//!
//! * **File media**: timing is off; simulated time stays 0 and the wall clock is all there is.
//! * **Simulated, no pacing**: a counter. A command is issued at the counter's value and moves it
//!   forward to its completion. Commands are therefore back to back in simulated time, as at queue
//!   depth 1, however many threads call (two that read the counter before either finishes are
//!   issued at the same time and overlap, as they would on the card).
//! * **Simulated, paced**: simulated time is the wall clock since the device was opened. A command
//!   is issued at the moment it reaches the device and does not complete, on the wall clock,
//!   before its simulated completion; commands that overlap on the wall clock overlap on the card
//!   (dies, channels and controller cores), so an application sees the card's latencies and its
//!   parallelism. If the simulator itself is slower than the card, a command completes late: the
//!   lateness is recorded.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use kvssd_flash::SimTime;

use crate::ffi::KvssdLatencyReport;

/// Below this much time to wait, a paced completion spins instead of sleeping: a sleep on Linux
/// wakes tens of microseconds late, as long as a flash read. Completion threads ask for a tight
/// timer slack ([`tighten_timer_slack`]), so this covers the wake-up alone.
pub const SPIN_BELOW: Duration = Duration::from_micros(40);
/// The same for a caller's own thread, waiting in a synchronous call: its timer slack is the
/// application's (50 us by default), which the library leaves alone, so it spins for longer.
pub const SPIN_BELOW_CALLER: Duration = Duration::from_micros(120);

/// How a device maps callers onto simulated time.
#[derive(Debug)]
pub enum Clock {
    /// File media: timing off.
    Untimed,
    /// Simulated without pacing: the latest completion so far.
    Counter(AtomicU64),
    /// Simulated with pacing: wall-clock nanoseconds since this instant.
    Paced(Instant),
}

impl Clock {
    /// The simulated time at which a command reaching the device now is issued.
    pub fn issue(&self) -> SimTime {
        match self {
            Clock::Untimed => 0,
            Clock::Counter(latest) => latest.load(Ordering::Acquire),
            Clock::Paced(start) => start.elapsed().as_nanos() as SimTime,
        }
    }

    /// Records that a command completed at `done`; returns the wall-clock instant before which
    /// it must not be reported complete (paced devices only).
    pub fn complete(&self, done: SimTime) -> Option<Instant> {
        match self {
            Clock::Untimed => None,
            Clock::Counter(latest) => {
                latest.fetch_max(done, Ordering::AcqRel);
                None
            }
            Clock::Paced(start) => Some(*start + Duration::from_nanos(done)),
        }
    }

    /// Whether completions are paced.
    pub fn is_paced(&self) -> bool {
        matches!(self, Clock::Paced(_))
    }
}

/// Waits until `deadline` on the wall clock: a sleep for most of the wait, a spin for the last
/// `spin_below`.
pub fn wait_until(deadline: Instant, spin_below: Duration) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let remaining = deadline - now;
        if remaining > spin_below {
            std::thread::sleep(remaining - spin_below);
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Asks the kernel to wake this thread's sleeps on time (the default slack is 50 us, as long as a
/// flash read): paced completions are only as exact as their wake-ups.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only this thread's timer
    // slack; the remaining arguments are ignored.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64);
    }
}

/// Latency histograms of one device.
pub struct Latencies {
    inner: Mutex<Histograms>,
}

struct Histograms {
    simulated: Histogram<u64>,
    wall: Histogram<u64>,
    lateness: Histogram<u64>,
}

fn histogram() -> Histogram<u64> {
    // One nanosecond to an hour at three significant digits: bounds hdrhistogram always accepts.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
        .expect("1 ns to 1 h at 3 significant digits are valid histogram bounds")
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            inner: Mutex::new(Histograms {
                simulated: histogram(),
                wall: histogram(),
                lateness: histogram(),
            }),
        }
    }
}

impl Latencies {
    /// Records one command: its simulated latency and wall-clock latency, and with pacing how late
    /// it completed after its simulated completion.
    pub fn record(&self, simulated_ns: u64, wall_ns: u64, lateness_ns: Option<u64>) {
        if let Ok(mut histograms) = self.inner.lock() {
            histograms.simulated.saturating_record(simulated_ns.max(1));
            histograms.wall.saturating_record(wall_ns.max(1));
            if let Some(late) = lateness_ns {
                histograms.lateness.saturating_record(late.max(1));
            }
        }
    }

    /// The figures since the last reset.
    pub fn report(&self) -> KvssdLatencyReport {
        let Ok(histograms) = self.inner.lock() else {
            return KvssdLatencyReport::default();
        };
        let quantile = |histogram: &Histogram<u64>, q: f64| {
            if histogram.is_empty() {
                0
            } else {
                histogram.value_at_quantile(q)
            }
        };
        let maximum = |histogram: &Histogram<u64>| {
            if histogram.is_empty() {
                0
            } else {
                histogram.max()
            }
        };
        KvssdLatencyReport {
            commands: histograms.wall.len(),
            simulated_p50_ns: quantile(&histograms.simulated, 0.5),
            simulated_p99_ns: quantile(&histograms.simulated, 0.99),
            simulated_max_ns: maximum(&histograms.simulated),
            wall_p50_ns: quantile(&histograms.wall, 0.5),
            wall_p99_ns: quantile(&histograms.wall, 0.99),
            wall_max_ns: maximum(&histograms.wall),
            lateness_p50_ns: quantile(&histograms.lateness, 0.5),
            lateness_p99_ns: quantile(&histograms.lateness, 0.99),
            lateness_max_ns: maximum(&histograms.lateness),
        }
    }

    /// Forgets everything recorded.
    pub fn reset(&self) {
        if let Ok(mut histograms) = self.inner.lock() {
            histograms.simulated.reset();
            histograms.wall.reset();
            histograms.lateness.reset();
        }
    }
}

/// What the latency record of one finished command needs.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// When the caller called (sync) or submitted (async), on the wall clock.
    pub submitted: Instant,
    /// Simulated issue and completion.
    pub issued_at: SimTime,
    /// Simulated completion.
    pub done_at: SimTime,
    /// The wall-clock instant before which it must not complete (paced devices).
    pub deadline: Option<Instant>,
}

impl Timing {
    /// Records the command as complete now.
    pub fn record_completion(&self, latencies: &Latencies) {
        let now = Instant::now();
        let lateness = self
            .deadline
            .map(|deadline| now.saturating_duration_since(deadline).as_nanos() as u64);
        latencies.record(
            self.done_at.saturating_sub(self.issued_at),
            now.saturating_duration_since(self.submitted).as_nanos() as u64,
            lateness,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_clock_moves_to_the_latest_completion() {
        let clock = Clock::Counter(AtomicU64::new(0));
        assert_eq!(clock.issue(), 0);
        assert_eq!(clock.complete(500), None);
        assert_eq!(clock.issue(), 500);
        clock.complete(200);
        assert_eq!(
            clock.issue(),
            500,
            "an earlier completion never moves it back"
        );
    }

    #[test]
    fn paced_clock_gives_deadlines_on_the_wall_clock() {
        let start = Instant::now();
        let clock = Clock::Paced(start);
        assert!(clock.issue() < 1_000_000_000);
        assert_eq!(
            clock.complete(2_000_000),
            Some(start + Duration::from_millis(2))
        );
        let deadline = Instant::now() + Duration::from_micros(300);
        wait_until(deadline, SPIN_BELOW);
        assert!(Instant::now() >= deadline);
    }

    #[test]
    fn latencies_report_percentiles_and_reset() {
        let latencies = Latencies::default();
        for value in 1..=100u64 {
            latencies.record(value * 1000, value * 2000, Some(value));
        }
        let report = latencies.report();
        assert_eq!(report.commands, 100);
        assert!((49_000..=51_000).contains(&report.simulated_p50_ns));
        assert!((98_000..=100_100).contains(&report.wall_p50_ns));
        assert!((98..=100).contains(&report.lateness_p99_ns));
        latencies.reset();
        assert_eq!(latencies.report().commands, 0);
    }
}
