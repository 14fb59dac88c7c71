//! SeekRandom on the `pink` profile (IterKVSSD's evaluation, db_bench style): seek to a random key,
//! then 100 nexts of one entry each, 4 KiB values; and long scans. Simulated time only, so the
//! figures are deterministic and asserting on them is sound.
//!
//! * Value prefetch: the mean simulated latency of one Next with D = 8 must be below D = 0 (reads
//!   of the next 8 values are in flight on other dies while the cursor returns earlier ones).
//! * Index prefetch: over long scans (D = 0), the p99.9 of per-Next latency must be lower with
//!   index prefetch, which reads a flash level's next meta segment before the cursor crosses into
//!   it, than without, where a crossing Next waits for a meta read and then its value read.
//!
//! Run with `--nocapture` to see the figures.

use kvssd_device::{Device, DeviceConfig, IterOptions, IterStart, NamespaceSpec, StoreMode};
use kvssd_engine::Preset;
use kvssd_flash::{Flash, Profile};

const KEYS: u64 = 24_000;
const VALUE_BYTES: usize = 4096;
const SEEKS: u64 = 150;
const NEXTS_PER_SEEK: usize = 100;
const LONG_SCANS: u64 = 6;
const LONG_SCAN_NEXTS: usize = 3_000;

fn key_of(id: u64) -> Vec<u8> {
    format!("user{id:010}").into_bytes()
}

fn loaded_device() -> (Device, kvssd_device::NamespaceId, u64) {
    let profile = Profile::pink_with_blocks(8);
    let mut config = DeviceConfig::new(&profile);
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    // L0 (1 MiB), the largest value and a GC victim, plus a little: L1 is pinned, deeper levels
    // stay on flash, which is where index prefetch matters.
    config.engine.dram_budget_bytes = 5 * 1024 * 1024 + 512 * 1024;
    config.engine.expected_value_bytes = VALUE_BYTES as u32;
    config.engine.expected_key_bytes = 14;
    let device = Device::open(flash, config).expect("device");
    let namespace = device
        .create_namespace(NamespaceSpec::new(Preset::Pink))
        .expect("namespace");
    let mut now = 0;
    let value = vec![7u8; VALUE_BYTES];
    for index in 0..KEYS {
        // A permutation of the key ids, so levels are built from random-order inserts.
        let id = (index * 7_919) % KEYS;
        now = device
            .store(now, namespace, &key_of(id), &value, StoreMode::Upsert)
            .expect("load");
    }
    now = device.flush_all(now).expect("flush");
    let info = &device.list_namespaces().expect("list")[0];
    println!(
        "loaded {KEYS} keys of {VALUE_BYTES} B: {} levels below L0, {} flushes, {} compactions",
        info.levels, info.flushes, info.compactions
    );
    (device, namespace, now)
}

/// Per-Next latencies of `seeks` runs of `nexts` one-entry Nexts from pseudo-random start keys.
fn scan_latencies(
    device: &Device,
    namespace: kvssd_device::NamespaceId,
    mut now: u64,
    seeks: u64,
    nexts: usize,
    degree: usize,
    index_prefetch: bool,
) -> (Vec<u64>, u64) {
    let mut latencies = Vec::new();
    for seek in 0..seeks {
        let start = (seek * 104_729 + 17) % (KEYS - nexts as u64);
        let options = IterOptions {
            index_prefetch,
            ..IterOptions::new(IterStart::Key(key_of(start)), degree)
        };
        let (iterator, done) = device.iter_open(now, namespace, options).expect("open");
        now = done;
        for _ in 0..nexts {
            let (batch, done) = device.iter_next(now, iterator, 1).expect("next");
            assert_eq!(batch.entries.len(), 1);
            assert_eq!(batch.entries[0].value_len, VALUE_BYTES);
            latencies.push(done - now);
            now = done;
        }
        device.iter_close(iterator).expect("close");
    }
    (latencies, now)
}

fn mean(values: &[u64]) -> f64 {
    values.iter().sum::<u64>() as f64 / values.len() as f64
}

fn percentile(values: &[u64], fraction: f64) -> u64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = ((sorted.len() as f64 * fraction).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[test]
fn seek_random_value_and_index_prefetch() {
    let (device, namespace, now) = loaded_device();

    let (d0, now) = scan_latencies(&device, namespace, now, SEEKS, NEXTS_PER_SEEK, 0, true);
    let (d8, now) = scan_latencies(&device, namespace, now, SEEKS, NEXTS_PER_SEEK, 8, true);
    let (mean_d0, mean_d8) = (mean(&d0), mean(&d8));
    println!(
        "SeekRandom, seek + {NEXTS_PER_SEEK} nexts, 4 KiB values: per-Next latency D=0 {:.1} us, D=8 {:.1} us",
        mean_d0 / 1000.0,
        mean_d8 / 1000.0
    );

    let (without, now) = scan_latencies(
        &device,
        namespace,
        now,
        LONG_SCANS,
        LONG_SCAN_NEXTS,
        0,
        false,
    );
    let (with, _) = scan_latencies(
        &device,
        namespace,
        now,
        LONG_SCANS,
        LONG_SCAN_NEXTS,
        0,
        true,
    );
    let (p_without, p_with) = (percentile(&without, 0.999), percentile(&with, 0.999));
    println!(
        "long scans ({LONG_SCANS} x {LONG_SCAN_NEXTS} nexts, D=0): p99.9 per-Next latency without index prefetch {:.1} us, with {:.1} us (means {:.1} / {:.1} us)",
        p_without as f64 / 1000.0,
        p_with as f64 / 1000.0,
        mean(&without) / 1000.0,
        mean(&with) / 1000.0
    );

    assert!(
        mean_d8 < mean_d0,
        "D=8 {mean_d8} ns is not below D=0 {mean_d0} ns"
    );
    assert!(
        p_with < p_without,
        "index prefetch p99.9 {p_with} ns is not below {p_without} ns"
    );
}
