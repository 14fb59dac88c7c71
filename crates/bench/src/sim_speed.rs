//! How fast the simulator itself is: random 8 KiB page reads on ram media through the whole flash
//! model (rules, timing, counters, checksum, copy), beside a plain random 8 KiB memory copy over a
//! buffer of the same size on the same machine and core. Both are wall-clock figures.

use std::hint::black_box;
use std::time::Instant;

use kvssd_flash::Profile;
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::flash_bench::{self, FlashBenchConfig, FlashBenchError, Pattern};

/// The two rates side by side.
#[derive(Debug, Clone, Serialize)]
pub struct SimSpeedReport {
    /// Bytes each operation copies.
    pub page_bytes: u32,
    /// Size of the region read by both, bytes.
    pub region_bytes: u64,
    /// Random page copies per wall-clock second with `copy_from_slice`.
    pub memcpy_per_s: f64,
    /// Simulated page reads per wall-clock second, checksums verified where a fault may have struck
    /// (the ram-media default).
    pub sim_reads_per_s: f64,
    /// `sim_reads_per_s / memcpy_per_s`.
    pub ratio: f64,
    /// Simulated page reads per wall-clock second with the checksum of every read verified.
    pub sim_reads_verified_per_s: f64,
    /// `sim_reads_verified_per_s / memcpy_per_s`.
    pub ratio_verified: f64,
}

/// Measures both rates with `operations` random pages each on the `pink` profile.
pub fn run(operations: u64, seed: u64) -> Result<SimSpeedReport, FlashBenchError> {
    let profile = Profile::pink_with_blocks(flash_bench::READ_REGION_BLOCKS_PER_DIE_MAX + 1);
    let geometry = profile.geometry;
    let page_bytes = geometry.page_bytes as usize;
    let region_pages = u64::from(flash_bench::READ_REGION_BLOCKS_PER_DIE_MAX)
        * u64::from(geometry.pages_per_block)
        * u64::from(geometry.dies());
    let region_bytes = region_pages * page_bytes as u64;

    // Baseline: random page-sized copies out of a buffer as large as the simulator's read region.
    let source: Vec<u8> = (0..region_bytes).map(|i| (i * 31) as u8).collect();
    let mut destination = vec![0u8; page_bytes];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let wall = Instant::now();
    for _ in 0..operations {
        let page = (rng.next_u64() % region_pages) as usize;
        destination.copy_from_slice(&source[page * page_bytes..(page + 1) * page_bytes]);
        black_box(&mut destination);
    }
    let memcpy_per_s = operations as f64 / wall.elapsed().as_secs_f64().max(1e-9);
    drop(source);

    let mut config = FlashBenchConfig {
        profile,
        pattern: Pattern::RandRead,
        queue_depth: 64,
        operations,
        seed,
        read_percent: 100,
        verify_every_read: false,
    };
    let trusted = flash_bench::run(&config)?;
    config.verify_every_read = true;
    let verified = flash_bench::run(&config)?;
    Ok(SimSpeedReport {
        page_bytes: geometry.page_bytes,
        region_bytes,
        memcpy_per_s,
        sim_reads_per_s: trusted.sim_ops_per_wall_s,
        ratio: trusted.sim_ops_per_wall_s / memcpy_per_s,
        sim_reads_verified_per_s: verified.sim_ops_per_wall_s,
        ratio_verified: verified.sim_ops_per_wall_s / memcpy_per_s,
    })
}
