//! `kvssd flash-bench`: the simulated NAND array driven directly by closed-loop clients.
//!
//! `qd` clients each keep one operation outstanding: a client issues its next operation at the
//! simulated time its previous one completed. Operations are issued in time order (a priority queue of
//! client ready times), so the busy-until timing model sees a causal stream. A request's latency is its
//! completion time minus its issue time on the virtual clock.
//!
//! Patterns:
//! * `randread`: reads of pages chosen uniformly from a region that is programmed (untimed) first.
//! * `seqwrite`: programs striped over dies in die order, each die filling its blocks page by page —
//!   the order an FTL's append stream uses to reach full parallelism.
//! * `randwrite`: each program goes to the next free page of a die chosen uniformly at random (NAND
//!   cannot program pages in place, so "random" writes are random placement).
//! * `mixed`: reads of the prepared region with probability `read_percent`, otherwise a `seqwrite`
//!   program into the blocks outside the region.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::time::Instant;

use kvssd_flash::{BlockAddress, Flash, FlashError, PageAddress, Profile, Purpose, SimTime};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::latency::{LatencyRecorder, LatencySummary};

/// Blocks per die the randread region covers at most (on `pink`: 64 dies x 2 blocks x 2 MiB = 256 MiB).
pub const READ_REGION_BLOCKS_PER_DIE_MAX: u32 = 2;

/// What the clients do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Uniform random page reads.
    RandRead,
    /// Programs striped over dies in order.
    SeqWrite,
    /// Programs to the next page of a random die.
    RandWrite,
    /// Random reads and striped programs.
    Mixed,
}

impl Pattern {
    /// Names accepted on the command line.
    pub const NAMES: [&'static str; 4] = ["randread", "seqwrite", "randwrite", "mixed"];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::RandRead => "randread",
            Pattern::SeqWrite => "seqwrite",
            Pattern::RandWrite => "randwrite",
            Pattern::Mixed => "mixed",
        }
    }

    /// The pattern with a command-line name.
    pub fn by_name(name: &str) -> Option<Pattern> {
        match name {
            "randread" => Some(Pattern::RandRead),
            "seqwrite" => Some(Pattern::SeqWrite),
            "randwrite" => Some(Pattern::RandWrite),
            "mixed" => Some(Pattern::Mixed),
            _ => None,
        }
    }
}

/// One run's configuration.
#[derive(Debug, Clone)]
pub struct FlashBenchConfig {
    /// The simulated device.
    pub profile: Profile,
    /// What the clients do.
    pub pattern: Pattern,
    /// Closed-loop clients (queue depth).
    pub queue_depth: u32,
    /// Timed operations.
    pub operations: u64,
    /// Seed of the address generator.
    pub seed: u64,
    /// Share of reads in `mixed`, in percent.
    pub read_percent: u32,
    /// Verify the checksum of every read (ram media otherwise verifies only where a fault may have
    /// struck; see `kvssd_flash::Flash::set_verify_every_read`).
    pub verify_every_read: bool,
}

impl FlashBenchConfig {
    /// Checks that the run can be made: at least one client and one operation, and room on the
    /// device for every program the pattern issues.
    pub fn validate(&self) -> Result<(), FlashBenchError> {
        let geometry = self.profile.geometry;
        if self.queue_depth == 0 {
            return Err(FlashBenchError::Config("--qd must be at least 1".into()));
        }
        if self.operations == 0 {
            return Err(FlashBenchError::Config("--ops must be at least 1".into()));
        }
        if self.read_percent > 100 {
            return Err(FlashBenchError::Config(
                "--read-percent must be at most 100".into(),
            ));
        }
        let region_blocks = self.read_region_blocks();
        let writable_pages =
            u64::from(geometry.blocks_per_die - region_blocks.min(geometry.blocks_per_die))
                * u64::from(geometry.pages_per_block)
                * u64::from(geometry.dies());
        let writes_possible = match self.pattern {
            Pattern::RandRead => true,
            Pattern::SeqWrite | Pattern::Mixed => self.operations <= writable_pages,
            // Random placement may fill one die early; leave every die a block of slack.
            Pattern::RandWrite => {
                self.operations
                    <= writable_pages.saturating_sub(
                        u64::from(geometry.dies()) * u64::from(geometry.pages_per_block),
                    )
            }
        };
        if !writes_possible {
            return Err(FlashBenchError::Config(format!(
                        "--ops {} programs more pages than the device has free ({writable_pages}); use fewer operations or more --blocks-per-die",
                        self.operations
                )));
        }

        Ok(())
    }

    /// Blocks per die programmed (untimed) before the run, as the region reads go to.
    fn read_region_blocks(&self) -> u32 {
        let blocks_per_die = self.profile.geometry.blocks_per_die;
        match self.pattern {
            Pattern::RandRead | Pattern::Mixed => {
                READ_REGION_BLOCKS_PER_DIE_MAX.min(blocks_per_die.saturating_sub(1).max(1))
            }
            Pattern::SeqWrite | Pattern::RandWrite => 0,
        }
    }
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum FlashBenchError {
    /// The configuration cannot be run.
    #[error("{0}")]
    Config(String),
    /// The flash model refused an operation (a bug in the driver if it happens).
    #[error("flash error: {0}")]
    Flash(#[from] FlashError),
}

/// One run's figures. Everything but `sim_ops_per_wall_s` is simulated time.
#[derive(Debug, Clone, Serialize)]
pub struct FlashBenchReport {
    /// Profile name.
    pub profile: String,
    /// Pattern name.
    pub pattern: String,
    /// Queue depth.
    pub qd: u32,
    /// Timed operations.
    pub ops: u64,
    /// Seed of the address generator.
    pub seed: u64,
    /// Always true: the figures below come from the virtual clock.
    pub simulated: bool,
    /// Simulated operations per simulated second.
    pub sim_iops: f64,
    /// Simulated payload megabytes (10^6 bytes) per simulated second.
    pub sim_bandwidth_mb_s: f64,
    /// Simulated latency percentiles in microseconds.
    pub latency_us: LatencySummary,
    /// Simulated operations per wall-clock second: the simulator's own speed.
    pub sim_ops_per_wall_s: f64,
    /// The profile's bandwidth limit for this pattern, MB/s (reads for randread, programs for the
    /// write patterns and for mixed, whose real bound lies between the two).
    pub profile_limit_mb_s: f64,
}

impl fmt::Display for FlashBenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "flash-bench: profile {} pattern {} qd {} ops {} seed {} (simulated time)",
            self.profile, self.pattern, self.qd, self.ops, self.seed
        )?;
        if self.pattern == Pattern::Mixed.name() {
            // Reads and programs share the dies and channels: no single limit applies.
            writeln!(
                f,
                "  simulated throughput  {:>10.0} IOPS   {:>8.1} MB/s   (reads and programs mixed)",
                self.sim_iops, self.sim_bandwidth_mb_s
            )?;
        } else {
            writeln!(
                f,
                "  simulated throughput  {:>10.0} IOPS   {:>8.1} MB/s   (profile limit {:.1} MB/s, {:.1}%)",
                self.sim_iops,
                self.sim_bandwidth_mb_s,
                self.profile_limit_mb_s,
                100.0 * self.sim_bandwidth_mb_s / self.profile_limit_mb_s
            )?;
        }
        let l = &self.latency_us;
        writeln!(
            f,
            "  simulated latency us  avg {:.1}  p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
            l.avg, l.p50, l.p99, l.p999, l.max
        )?;
        write!(
            f,
            "  simulator speed       {:.0} simulated ops per wall-clock second",
            self.sim_ops_per_wall_s
        )
    }
}

/// Next page of a striped append stream over all dies, block after block on each die.
struct StripedWriter {
    next: u64,
    first_block: u32,
    dies: u32,
    pages_per_block: u32,
}

impl StripedWriter {
    fn next_page(&mut self) -> PageAddress {
        let stripe = self.next / u64::from(self.dies);
        let die = (self.next % u64::from(self.dies)) as u32;
        self.next += 1;
        let block = self.first_block + (stripe / u64::from(self.pages_per_block)) as u32;
        let page = (stripe % u64::from(self.pages_per_block)) as u32;
        BlockAddress { die, block }.page(page)
    }
}

/// Runs one benchmark and returns its figures.
pub fn run(config: &FlashBenchConfig) -> Result<FlashBenchReport, FlashBenchError> {
    config.validate()?;
    let geometry = config.profile.geometry;
    let region_blocks = config.read_region_blocks();
    let mut flash = Flash::new(geometry, Some(config.profile.timing.clone()))?;
    flash.set_verify_every_read(config.verify_every_read);
    let page_bytes = geometry.page_bytes as usize;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(config.seed);
    let mut buffer = vec![0u8; page_bytes];

    // Untimed preparation: fill the read region with distinct pages.
    let region_pages_per_die = u64::from(region_blocks) * u64::from(geometry.pages_per_block);
    let mut region = StripedWriter {
        next: 0,
        first_block: 0,
        dies: geometry.dies(),
        pages_per_block: geometry.pages_per_block,
    };
    for _ in 0..region_pages_per_die * u64::from(geometry.dies()) {
        let page = region.next_page();
        buffer[..8].copy_from_slice(&geometry.page_index(page).to_le_bytes());
        flash.program(0, page, Purpose::UserData, &buffer, &[])?;
    }
    let region_pages = region.next;
    let start = flash.quiescent_at();
    let counters_before = flash.counters();

    let mut writer = StripedWriter {
        next: 0,
        first_block: region_blocks,
        dies: geometry.dies(),
        pages_per_block: geometry.pages_per_block,
    };
    let mut die_next_page: Vec<u64> = vec![0; geometry.dies() as usize];
    let mut clients: BinaryHeap<Reverse<(SimTime, u32)>> = (0..config.queue_depth)
        .map(|client| Reverse((start, client)))
        .collect();
    let mut latencies = LatencyRecorder::new();
    let mut last_done = start;
    let wall = Instant::now();
    for _ in 0..config.operations {
        let Some(Reverse((issue, client))) = clients.pop() else {
            break;
        };
        // Every later operation is issued at or after this client's ready time.
        flash.advance_horizon(issue);
        let read = match config.pattern {
            Pattern::RandRead => true,
            Pattern::SeqWrite | Pattern::RandWrite => false,
            Pattern::Mixed => rng.next_u64() % 100 < u64::from(config.read_percent),
        };
        let done = if read {
            let page = geometry.page_at(region_page_index(
                &geometry,
                rng.next_u64() % region_pages,
                region_blocks,
            ));
            flash
                .read(issue, page, Purpose::UserData, &mut buffer, &mut [])?
                .done_at
        } else {
            let page = match config.pattern {
                Pattern::RandWrite => {
                    let die = (rng.next_u64() % u64::from(geometry.dies())) as u32;
                    let slot = &mut die_next_page[die as usize];
                    let block =
                        region_blocks + (*slot / u64::from(geometry.pages_per_block)) as u32;
                    let page = (*slot % u64::from(geometry.pages_per_block)) as u32;
                    *slot += 1;
                    if block >= geometry.blocks_per_die {
                        return Err(FlashBenchError::Config(format!(
                            "die {die} is full after {} random writes; use fewer --ops or more --blocks-per-die",
                            writer.next
                        )));
                    }
                    BlockAddress { die, block }.page(page)
                }
                _ => writer.next_page(),
            };
            flash.program(issue, page, Purpose::UserData, &buffer, &[])?
        };
        latencies.record(done - issue);
        last_done = last_done.max(done);
        clients.push(Reverse((done, client)));
    }
    let wall_seconds = wall.elapsed().as_secs_f64();
    let phase = flash.counters() - counters_before;
    let bytes = phase.total().read_bytes + phase.total().program_bytes;
    let sim_seconds = (last_done - start) as f64 / 1e9;
    let timing = &config.profile.timing;
    let profile_limit = match config.pattern {
        Pattern::RandRead => timing.read_bandwidth_limit(&geometry),
        _ => timing.program_bandwidth_limit(&geometry),
    };
    Ok(FlashBenchReport {
        profile: config.profile.name.to_string(),
        pattern: config.pattern.name().to_string(),
        qd: config.queue_depth,
        ops: config.operations,
        seed: config.seed,
        simulated: true,
        sim_iops: config.operations as f64 / sim_seconds,
        sim_bandwidth_mb_s: bytes as f64 / sim_seconds / 1e6,
        latency_us: latencies.summary(),
        sim_ops_per_wall_s: config.operations as f64 / wall_seconds.max(1e-9),
        profile_limit_mb_s: profile_limit / 1e6,
    })
}

/// Device-wide page index of the `n`th page of the read region (region blocks `0..region_blocks` of
/// every die).
fn region_page_index(geometry: &kvssd_flash::Geometry, n: u64, region_blocks: u32) -> u64 {
    let per_die = u64::from(region_blocks) * u64::from(geometry.pages_per_block);
    let die = n / per_die;
    let within = n % per_die;
    (die * u64::from(geometry.blocks_per_die)) * u64::from(geometry.pages_per_block) + within
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pattern: Pattern, queue_depth: u32) -> FlashBenchConfig {
        FlashBenchConfig {
            profile: Profile::pink_with_blocks(4),
            pattern,
            queue_depth,
            operations: 4_000,
            seed: 1,
            read_percent: 70,
            verify_every_read: false,
        }
    }

    #[test]
    fn flash_bench_qd1_read_latency_is_one_read() {
        let report = run(&config(Pattern::RandRead, 1)).expect("run");
        let timing = Profile::pink().timing;
        let expected_us = timing.read_alone_ns(8192) as f64 / 1_000.0;
        assert!(
            (report.latency_us.max - expected_us).abs() < 0.2,
            "{report}"
        );
        assert!(
            (report.latency_us.p50 - expected_us).abs() < 0.2,
            "{report}"
        );
    }

    #[test]
    fn flash_bench_qd64_reaches_the_profile_limits() {
        for pattern in [Pattern::RandRead, Pattern::SeqWrite] {
            let report = run(&config(pattern, 64)).expect("run");
            let ratio = report.sim_bandwidth_mb_s / report.profile_limit_mb_s;
            assert!((0.9..=1.001).contains(&ratio), "{report}");
        }
    }

    #[test]
    fn flash_bench_is_deterministic() {
        for pattern in [Pattern::RandRead, Pattern::RandWrite, Pattern::Mixed] {
            let first = run(&config(pattern, 16)).expect("run");
            let second = run(&config(pattern, 16)).expect("run");
            assert_eq!(first.sim_iops, second.sim_iops);
            assert_eq!(first.latency_us, second.latency_us);
        }
    }

    #[test]
    fn flash_bench_refuses_bad_configurations() {
        let mut bad = config(Pattern::SeqWrite, 0);
        assert!(run(&bad).is_err());
        bad.queue_depth = 1;
        bad.operations = 10_000_000;
        let message = run(&bad).expect_err("too many programs").to_string();
        assert!(
            message.contains("more pages than the device has free"),
            "{message}"
        );
    }
}
