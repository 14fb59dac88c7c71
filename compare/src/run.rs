//! One store's run, in a process of its own: YCSB Load and the workloads, one after another on
//! the same data, from `--threads` client threads, every read checked.
//!
//! The requests of each workload are drawn before it starts, from kvssd's YCSB generators with
//! a seed fixed per workload, so every store is given exactly the same requests; the client
//! threads take them in order, a few at a time. Versions are counted per key: a write takes the
//! next version of its key (`issued`) and, once the store has returned, records it as the
//! newest it knows to be written (`written`). Writes of one key never overlap (a lock per stripe
//! of keys, taken before the clock starts), so the store's last write is the newest version. A read must then find a value that is exactly a
//! write of its key, no older than the newest written before the read began and no newer than
//! the newest issued after it ended; a key written before the read began must be found.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use kvssd_bench::workload::{key_of, Generator, Request, WorkloadSpec};
use serde::{Deserialize, Serialize};

use crate::stores::{self, GroupCommit, Store, SyncMode};
use crate::values;

/// Bytes of every key (the YCSB key format of kvssd's benchmarks: `user` and 20 digits, padded).
pub const KEY_BYTES: usize = 32;
/// Requests a client thread takes at a time.
const CHUNK_REQUESTS: usize = 16;
/// Latencies above this are recorded as this (one minute, in microseconds).
const LATENCY_US_MAX: u64 = 60_000_000;
/// Stripes of keys whose writes are serialised (see the module's comment).
const WRITE_STRIPES: usize = 4096;
/// Mismatches described in the output, per workload (the rest are only counted).
const MISMATCHES_SHOWN_MAX: usize = 5;

/// What one store's run is asked to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunConfig {
    /// `kvssd`, `rocksdb` or `fjall`.
    pub store: String,
    /// Records loaded.
    pub records: u64,
    /// Requests per workload after the load.
    pub ops: u64,
    /// Bytes of every value.
    pub value_bytes: usize,
    /// Client threads.
    pub threads: usize,
    /// `none`, `group` or `every`.
    pub sync: String,
    /// Block cache (RocksDB, fjall) and kvssd's indexing DRAM, MiB.
    pub cache_mib: u64,
    /// Workloads in order (`load` first if given).
    pub workloads: Vec<String>,
    /// Seed of the request streams.
    pub seed: u64,
}

/// Latency percentiles of one kind of request, microseconds of wall clock.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Requests measured.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
}

impl Latency {
    fn of(histogram: &Histogram<u64>) -> Latency {
        if histogram.is_empty() {
            return Latency::default();
        }
        Latency {
            count: histogram.len(),
            mean: histogram.mean(),
            p50: histogram.value_at_quantile(0.5),
            p99: histogram.value_at_quantile(0.99),
            p999: histogram.value_at_quantile(0.999),
            max: histogram.max(),
        }
    }
}

/// One workload's figures on one store.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// `load`, `a` .. `f`.
    pub workload: String,
    /// Requests completed.
    pub ops: u64,
    /// Wall-clock seconds from the first request to the last.
    pub seconds: f64,
    /// Thousands of requests per second.
    pub kops: f64,
    /// Point reads (reads, and the read of a read-modify-write).
    pub read_us: Latency,
    /// Writes (updates, inserts, the write of a read-modify-write), sync included.
    pub write_us: Latency,
    /// Scans (workload E).
    pub scan_us: Latency,
    /// Reads (point or in scans) that did not return what was written.
    pub mismatches: u64,
    /// The first few mismatches, described.
    pub mismatch_examples: Vec<String>,
    /// Shared syncs done (`--sync group`).
    pub group_syncs: u64,
}

/// One store's whole run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StoreRun {
    /// The store.
    pub store: String,
    /// Its settings, as it describes them.
    pub settings: String,
    /// What `--sync` means for it.
    pub sync_mapping: String,
    /// Per workload, in order.
    pub workloads: Vec<WorkloadResult>,
    /// The process's resident memory just before the store was opened, MiB (the harness's own
    /// share of the peak).
    pub rss_before_open_mib: f64,
    /// The process's peak resident memory (VmHWM), MiB.
    pub peak_rss_mib: f64,
    /// Bytes the store's directory holds at the end, before it is closed.
    pub disk_bytes: u64,
}

/// The request streams of a run: per workload, its requests, drawn from its own seed over the
/// keys inserted by the workloads before it.
pub fn streams(config: &RunConfig) -> Result<Vec<(WorkloadSpec, Vec<Request>)>, String> {
    let mut inserted = 0u64;
    let mut streams = Vec::new();
    for (index, name) in config.workloads.iter().enumerate() {
        let spec = WorkloadSpec::by_name(name).ok_or_else(|| format!("unknown workload {name}"))?;
        let ops = if name == "load" {
            config.records
        } else {
            config.ops
        };
        let seed = config.seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut generator = Generator::new(spec.clone(), inserted, ops, seed);
        let requests: Vec<Request> = (0..ops).map(|_| generator.next_request()).collect();
        inserted = generator.inserted();
        streams.push((spec, requests));
    }
    Ok(streams)
}

/// Keys a run's streams insert in all (the size of the version tables).
fn keys_total(streams: &[(WorkloadSpec, Vec<Request>)]) -> u64 {
    streams
        .iter()
        .flat_map(|(_, requests)| requests.iter())
        .filter_map(|request| match request {
            Request::Insert(number) => Some(number + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// The version tables shared by the client threads.
struct Versions {
    issued: Vec<AtomicU32>,
    written: Vec<AtomicU32>,
    stripes: Vec<Mutex<()>>,
}

impl Versions {
    fn new(keys: u64) -> Versions {
        Versions {
            issued: (0..keys).map(|_| AtomicU32::new(0)).collect(),
            written: (0..keys).map(|_| AtomicU32::new(0)).collect(),
            stripes: (0..WRITE_STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }
}

/// What one client thread measured.
struct ThreadFigures {
    read: Histogram<u64>,
    write: Histogram<u64>,
    scan: Histogram<u64>,
    mismatches: u64,
    examples: Vec<String>,
}

impl ThreadFigures {
    fn new() -> Result<ThreadFigures, String> {
        let histogram = || {
            Histogram::<u64>::new_with_bounds(1, LATENCY_US_MAX, 3)
                .map_err(|error| format!("histogram: {error}"))
        };
        Ok(ThreadFigures {
            read: histogram()?,
            write: histogram()?,
            scan: histogram()?,
            mismatches: 0,
            examples: Vec::new(),
        })
    }

    fn mismatch(&mut self, what: String) {
        self.mismatches += 1;
        if self.examples.len() < MISMATCHES_SHOWN_MAX {
            self.examples.push(what);
        }
    }
}

fn micros(elapsed: Duration) -> u64 {
    (elapsed.as_micros() as u64).clamp(1, LATENCY_US_MAX)
}

/// Everything a client thread needs.
struct Client<'a> {
    store: &'a dyn Store,
    versions: &'a Versions,
    group: Option<&'a GroupCommit>,
    value_bytes: usize,
}

impl Client<'_> {
    fn write(&self, number: u64, figures: &mut ThreadFigures) -> Result<(), String> {
        let index = number as usize;
        let stripe = self.versions.stripes[index % WRITE_STRIPES]
            .lock()
            .map_err(|_| "a client thread panicked".to_string())?;
        let version = self.versions.issued[index].fetch_add(1, Ordering::SeqCst) + 1;
        let value = values::value_of(number, version, self.value_bytes);
        let key = key_of(number, KEY_BYTES);
        let started = Instant::now();
        self.store.put(&key, &value)?;
        self.versions.written[index].store(version, Ordering::SeqCst);
        drop(stripe);
        if let Some(group) = self.group {
            group.commit(self.store)?;
        }
        let _ = figures.write.record(micros(started.elapsed()));
        Ok(())
    }

    fn read(&self, number: u64, figures: &mut ThreadFigures) -> Result<(), String> {
        let index = number as usize;
        let written_before = self.versions.written[index].load(Ordering::SeqCst);
        let key = key_of(number, KEY_BYTES);
        let started = Instant::now();
        let found = self.store.get(&key)?;
        let _ = figures.read.record(micros(started.elapsed()));
        let issued_after = self.versions.issued[index].load(Ordering::SeqCst);
        match found {
            None if written_before > 0 => {
                figures.mismatch(format!("key {number}: missing, version {written_before} was written"))
            }
            None => {}
            Some(value) => match values::check_for(&value, number, self.value_bytes) {
                Err(mismatch) => figures.mismatch(format!("key {number}: {mismatch}")),
                Ok(version) if version < written_before || version > issued_after => {
                    figures.mismatch(format!(
                        "key {number}: version {version}, expected {written_before}..={issued_after}"
                    ))
                }
                Ok(_) => {}
            },
        }
        Ok(())
    }

    fn scan(
        &self,
        start: u64,
        length: u32,
        pairs: &mut Vec<(Vec<u8>, Vec<u8>)>,
        figures: &mut ThreadFigures,
    ) -> Result<(), String> {
        let start_key = key_of(start, KEY_BYTES);
        let started = Instant::now();
        self.store.scan(&start_key, length as usize, pairs)?;
        let _ = figures.scan.record(micros(started.elapsed()));
        if pairs.len() > length as usize {
            figures.mismatch(format!(
                "scan from key {start}: {} pairs for {length}",
                pairs.len()
            ));
        }
        let mut previous: &[u8] = &start_key;
        for (position, (key, value)) in pairs.iter().enumerate() {
            let ordered = if position == 0 {
                key.as_slice() >= previous
            } else {
                key.as_slice() > previous
            };
            if !ordered {
                figures.mismatch(format!(
                    "scan from key {start}: pair {position} out of key order"
                ));
            }
            previous = key;
            match values::check(value, self.value_bytes) {
                Err(mismatch) => figures.mismatch(format!(
                    "scan from key {start}: pair {position}: {mismatch}"
                )),
                Ok((number, version)) => {
                    let issued = self
                        .versions
                        .issued
                        .get(number as usize)
                        .map(|issued| issued.load(Ordering::SeqCst));
                    if key_of(number, KEY_BYTES) != *key
                        || issued.is_none_or(|issued| version == 0 || version > issued)
                    {
                        figures.mismatch(format!(
                            "scan from key {start}: pair {position} holds version {version} of key {number}, not a write of its key"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn serve(
        &self,
        request: Request,
        pairs: &mut Vec<(Vec<u8>, Vec<u8>)>,
        figures: &mut ThreadFigures,
    ) -> Result<(), String> {
        match request {
            Request::Read(number) => self.read(number, figures),
            Request::Update(number) | Request::Insert(number) => self.write(number, figures),
            Request::Scan { start, length } => self.scan(start, length, pairs, figures),
            Request::ReadModifyWrite(number) => {
                self.read(number, figures)?;
                self.write(number, figures)
            }
        }
    }
}

/// Runs one workload's requests from `threads` client threads.
fn run_workload(
    spec: &WorkloadSpec,
    requests: &[Request],
    store: &dyn Store,
    versions: &Versions,
    config: &RunConfig,
    mode: SyncMode,
) -> Result<WorkloadResult, String> {
    let group = GroupCommit::default();
    let client = Client {
        store,
        versions,
        group: (mode == SyncMode::Group).then_some(&group),
        value_bytes: config.value_bytes,
    };
    let next = AtomicUsize::new(0);
    let completed = AtomicU64::new(0);
    let started = Instant::now();
    let figures: Vec<Result<ThreadFigures, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.threads.max(1))
            .map(|_| {
                scope.spawn(|| -> Result<ThreadFigures, String> {
                    let mut figures = ThreadFigures::new()?;
                    let mut pairs = Vec::new();
                    loop {
                        let first = next.fetch_add(CHUNK_REQUESTS, Ordering::Relaxed);
                        if first >= requests.len() {
                            return Ok(figures);
                        }
                        let last = (first + CHUNK_REQUESTS).min(requests.len());
                        for request in &requests[first..last] {
                            client.serve(*request, &mut pairs, &mut figures)?;
                        }
                        completed.fetch_add((last - first) as u64, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err("a client thread panicked".to_string()))
            })
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut total = ThreadFigures::new()?;
    for thread in figures {
        let thread = thread?;
        let add = |into: &mut Histogram<u64>, from: &Histogram<u64>| {
            into.add(from)
                .map_err(|error| format!("histogram: {error}"))
        };
        add(&mut total.read, &thread.read)?;
        add(&mut total.write, &thread.write)?;
        add(&mut total.scan, &thread.scan)?;
        total.mismatches += thread.mismatches;
        for example in thread.examples {
            if total.examples.len() < MISMATCHES_SHOWN_MAX {
                total.examples.push(example);
            }
        }
    }
    let ops = completed.load(Ordering::Relaxed);
    Ok(WorkloadResult {
        workload: spec.name.to_string(),
        ops,
        seconds,
        kops: if seconds > 0.0 {
            ops as f64 / seconds / 1000.0
        } else {
            0.0
        },
        read_us: Latency::of(&total.read),
        write_us: Latency::of(&total.write),
        scan_us: Latency::of(&total.scan),
        mismatches: total.mismatches,
        mismatch_examples: total.examples,
        group_syncs: group.syncs(),
    })
}

/// A field of `/proc/self/status` in MiB (`VmRSS`, `VmHWM`), 0 where there is none.
pub fn status_mib(field: &str) -> f64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0.0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// Bytes of the files under `path`.
fn disk_bytes(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(metadata) if metadata.is_dir() => disk_bytes(&entry.path()),
            // Allocated bytes: kvssd's image is a sparse file of the card's size.
            Ok(metadata) => metadata.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// Runs every workload of `config` on a fresh store in `directory`.
pub fn run_store(config: &RunConfig, directory: &std::path::Path) -> Result<StoreRun, String> {
    let mode = SyncMode::parse(&config.sync)
        .ok_or_else(|| format!("unknown sync mode {}", config.sync))?;
    let streams = streams(config)?;
    let keys = keys_total(&streams);
    let versions = Versions::new(keys);
    let written_bytes_max = (config.records + config.ops * streams.len() as u64)
        * (config.value_bytes + KEY_BYTES) as u64;
    let rss_before_open_mib = status_mib("VmRSS");
    let store = stores::open(
        &config.store,
        directory,
        mode,
        config.cache_mib << 20,
        written_bytes_max,
    )?;
    let mut run = StoreRun {
        store: config.store.clone(),
        settings: store.settings(),
        sync_mapping: stores::sync_mapping(&config.store, mode).to_string(),
        rss_before_open_mib,
        ..StoreRun::default()
    };
    for (spec, requests) in &streams {
        let result = run_workload(spec, requests, store.as_ref(), &versions, config, mode)?;
        eprintln!(
            "  {:<8} {:<5} {:>9.1} kops/s  read p99 {:>6} us  p99.9 {:>6} us  mismatches {}",
            config.store,
            spec.name,
            result.kops,
            result.read_us.p99,
            result.read_us.p999,
            result.mismatches
        );
        run.workloads.push(result);
    }
    run.disk_bytes = disk_bytes(directory);
    store.close()?;
    run.peak_rss_mib = status_mib("VmHWM");
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(workloads: &[&str]) -> RunConfig {
        RunConfig {
            store: "kvssd".into(),
            records: 1000,
            ops: 500,
            value_bytes: 100,
            threads: 2,
            sync: "none".into(),
            cache_mib: 8,
            workloads: workloads.iter().map(|name| name.to_string()).collect(),
            seed: 7,
        }
    }

    #[test]
    fn run_streams_are_identical_for_every_store_and_insert_after_the_load() {
        let first = streams(&config(&["load", "a", "d", "e"])).expect("streams");
        let mut other = config(&["load", "a", "d", "e"]);
        other.store = "rocksdb".into();
        let second = streams(&other).expect("streams");
        let requests = |streams: &[(WorkloadSpec, Vec<Request>)]| -> Vec<Vec<Request>> {
            streams
                .iter()
                .map(|(_, requests)| requests.clone())
                .collect()
        };
        assert_eq!(requests(&first), requests(&second));
        assert_eq!(first[0].1.len(), 1000);
        assert!(first[0]
            .1
            .iter()
            .enumerate()
            .all(|(n, r)| *r == Request::Insert(n as u64)));
        // D's inserts continue after the load; E's after D's.
        let inserts = |requests: &[Request]| -> Vec<u64> {
            requests
                .iter()
                .filter_map(|r| {
                    if let Request::Insert(n) = r {
                        Some(*n)
                    } else {
                        None
                    }
                })
                .collect()
        };
        let d = inserts(&first[2].1);
        let e = inserts(&first[3].1);
        assert_eq!(d.first(), Some(&1000));
        assert_eq!(e.first(), Some(&(1000 + d.len() as u64)));
        assert_eq!(keys_total(&first), 1000 + (d.len() + e.len()) as u64);
    }

    #[test]
    fn run_status_reads_the_peak() {
        assert!(status_mib("VmHWM") > 0.0);
        assert_eq!(status_mib("NoSuchField"), 0.0);
    }
}
