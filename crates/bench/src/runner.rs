//! The closed-loop runner of the workload benchmarks, on the virtual clock.
//!
//! `clients` clients (64 by default, PinK's queue depth) each keep one request outstanding. A client
//! issues its next request at the simulated time its previous one completed; requests are issued in
//! time order from a priority queue of client ready times, so the store sees a causal stream and its
//! background work (flush, compaction, GC) delays foreground requests only through the timing model
//! of the flash it shares with them. Each request's latency is its completion time minus its issue
//! time.
//!
//! A request that takes several commands (a read-modify-write: a GET, then a PUT; a scan on a store
//! that cannot scan: point GETs) issues each when the previous completed, through the same queue,
//! so commands reach the store in time order: one issued ahead of the clock would let background
//! work issued before it run ahead of other clients' earlier requests.
//!
//! Per command, the runner takes the flash counters before and after, so "flash reads per query"
//! (pages read for user data and index, averaged and maximum) and "index reads per GET" are exact
//! counts of what each request caused, including any flush or compaction it had to wait for.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::Instant;

use kvssd_device::Pairs;
use kvssd_flash::{Counters, Purpose, SimTime};

use crate::counts::{CountRecorder, GetReads};
use crate::latency::{latency_windows, LatencyRecorder, LATENCY_WINDOWS};
use crate::report::{BenchResult, PerRequest};
use crate::values::Values;
use crate::workload::{key_of, value_of, Generator, Request, WorkloadSpec};

/// Why a store refused a request.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The store does not support the operation (range scans on a hash index).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Anything else; the run stops.
    #[error("{0}")]
    Failed(String),
}

/// A key-value store driven on the virtual clock.
pub trait SimTarget {
    /// Stores `value` under `key`, issued at `at`; returns the completion time.
    fn put(&mut self, at: SimTime, key: &[u8], value: &[u8]) -> Result<SimTime, TargetError>;
    /// Reads `key`, issued at `at`; returns the value (if any) and the completion time.
    fn get(&mut self, at: SimTime, key: &[u8]) -> Result<(Option<Vec<u8>>, SimTime), TargetError>;
    /// Reads up to `count` pairs in key order from `start`; returns them and the completion time.
    fn scan(
        &mut self,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(Pairs, SimTime), TargetError>;
    /// Warns the store that `keys` are about to be read, for the host's speed alone: nothing
    /// the run measures may change. Returns whether the store has a use for such warnings; the
    /// runner makes no more once it says it has none. By default it does nothing and has none.
    fn prefetch_gets(&mut self, keys: &[&[u8]]) -> bool {
        let _ = keys;
        false
    }
    /// Operations its timing model scheduled behind its horizon so far, where their timing may
    /// be too optimistic (zero for a store without one).
    fn late_issues(&self) -> u64 {
        0
    }
    /// The flash counters so far.
    fn counters(&self) -> Counters;
    /// DRAM in use, by part.
    fn dram_bytes(&self) -> BTreeMap<String, u64>;
    /// A one-line description of the store's shape (levels, pinning, cache), for the run's output.
    fn describe(&self) -> String {
        String::new()
    }
    /// Store-specific counters worth reporting (GC victims, records moved, ...), by name.
    fn extra_stats(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }
    /// Controller computation charged so far, in simulated nanoseconds (`None` if the store does
    /// not model its controller).
    fn controller_cpu_ns(&self) -> Option<u64> {
        None
    }
    /// Controller work booked so far by thread, in simulated nanoseconds: `(request, background,
    /// gc, accelerator)` (`None` if the store does not model its controller).
    fn controller_busy_ns(&self) -> Option<[u64; 4]> {
        None
    }
}

/// Simulated nanoseconds writers have waited for background work so far, from the store's
/// counters (`None` if it reports none).
fn write_stall_ns(target: &dyn SimTarget) -> Option<u64> {
    let stats = target.extra_stats();
    let mut found = false;
    let mut total_us = 0;
    for (name, value) in &stats {
        if name.starts_with("write_stall_") && name.ends_with("_us") {
            found = true;
            total_us += value;
        }
    }
    found.then_some(total_us * 1_000)
}

/// What one workload run needs to know.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Preset name, for the result.
    pub preset: String,
    /// The workload.
    pub workload: WorkloadSpec,
    /// Keys already loaded (key numbers `0..loaded`); 0 for Load.
    pub loaded: u64,
    /// Requests to issue.
    pub operations: u64,
    /// Closed-loop clients.
    pub clients: u32,
    /// Key size, bytes.
    pub key_bytes: usize,
    /// Value size, bytes.
    pub value_bytes: usize,
    /// Seed of the request generator.
    pub seed: u64,
    /// Record the write amplification of the run so far every this many requests (0: never).
    pub waf_sample_every: u64,
}

/// The outcome of one run: its figures, where the clock stands, and how many keys exist now.
#[derive(Debug)]
pub struct RunOutcome {
    /// The figures.
    pub result: BenchResult,
    /// Simulated time when the last request completed.
    pub finished_at: SimTime,
    /// Keys inserted so far (loaded plus inserted by this run).
    pub keys: u64,
}

/// Called with the number of requests completed so far, every few thousand requests.
pub type Progress<'a> = &'a mut dyn FnMut(u64);

/// Runs one workload against `target` starting at simulated time `start`.
pub fn run(
    target: &mut dyn SimTarget,
    config: &RunConfig,
    start: SimTime,
    progress: Progress<'_>,
) -> Result<RunOutcome, TargetError> {
    let mut generator = Generator::new(
        config.workload.clone(),
        config.loaded,
        config.operations,
        config.seed,
    );
    let mut values = Values::new(config.loaded, config.value_bytes, config.key_bytes);
    let mut reads = LatencyRecorder::new();
    let mut writes = LatencyRecorder::new();
    let mut reads_per_query_max = 0u64;
    let mut index_reads_total = 0u64;
    let mut index_reads_max = 0u64;
    let mut gets = 0u64;
    // Per point GET (a workload's read of one key): its flash and index page reads.
    let mut get_flash_reads = CountRecorder::new();
    let mut get_index_reads = CountRecorder::new();
    let mut scans_as_gets = false;
    let mut waf_over_time = Vec::new();
    // (issue, latency) of every read, for the latency-over-time series.
    let mut read_samples: Vec<(SimTime, u64)> = Vec::new();
    let mut clients: BinaryHeap<Reverse<(SimTime, u32)>> = (0..config.clients.max(1))
        .map(|client| Reverse((start, client)))
        .collect();
    let before = target.counters();
    // The counters after the last command: the next request's starting point (nothing else
    // touches the store between requests, and reading them takes the device's lock).
    let mut counters_now = before;
    let cpu_before = target.controller_cpu_ns();
    let busy_before = target.controller_busy_ns();
    let stalls_before = write_stall_ns(target);
    let late_before = target.late_issues();
    let wall = Instant::now();
    let mut finished_at = start;
    let mut completed = 0u64;
    // The rest of each client's request, when it takes more than one command.
    let mut in_flight: Vec<Option<InFlight>> = (0..config.clients.max(1)).map(|_| None).collect();
    let mut hints = GetHints::new(config.clients.max(1));
    let mut upcoming = Upcoming::new(&config.workload, hints.batch);
    while completed < config.operations {
        let Some(Reverse((at, client))) = clients.pop() else {
            break;
        };
        let counters_before = counters_now;
        let (mut request, done) = match in_flight[client as usize].take() {
            Some(mut request) => {
                let done = match request.rest.take() {
                    Some(Continuation::Write { number }) => {
                        let value = values.next_update(number);
                        target.put(at, &key_of(number, config.key_bytes), &value)?
                    }
                    Some(Continuation::Gets { next, last }) => {
                        let (value, done) = target.get(at, &key_of(next, config.key_bytes))?;
                        values.check(next, value.as_deref())?;
                        if next + 1 < last {
                            request.rest = Some(Continuation::Gets {
                                next: next + 1,
                                last,
                            });
                        }
                        done
                    }
                    None => at,
                };
                (request, done)
            }
            None => match upcoming.next(&mut generator, &mut hints, config.key_bytes, target) {
                Request::Read(number) => {
                    let key = key_of(number, config.key_bytes);
                    let (value, done) = target.get(at, &key)?;
                    values.check(number, value.as_deref())?;
                    let mut request = InFlight::new(at, true, 1);
                    request.point_get = true;
                    (request, done)
                }
                request @ (Request::Update(number) | Request::Insert(number)) => {
                    let value = match request {
                        Request::Insert(_) => value_of(number, 1, config.value_bytes),
                        _ => values.next_update(number),
                    };
                    let done = target.put(at, &key_of(number, config.key_bytes), &value)?;
                    (InFlight::new(at, false, 0), done)
                }
                Request::ReadModifyWrite(number) => {
                    // The write is issued when the read completes, as its own command.
                    let key = key_of(number, config.key_bytes);
                    let (value, done) = target.get(at, &key)?;
                    values.check(number, value.as_deref())?;
                    let mut request = InFlight::new(at, false, 1);
                    request.rest = Some(Continuation::Write { number });
                    (request, done)
                }
                Request::Scan { start, length } => {
                    let key = key_of(start, config.key_bytes);
                    match target.scan(at, &key, length as usize) {
                        Ok((pairs, done)) => {
                            values.check_scan(start, length as usize, &pairs);
                            (InFlight::new(at, true, 0), done)
                        }
                        Err(TargetError::Unsupported(_)) => {
                            // A client of a hash KV-SSD scans its own key space with point GETs,
                            // as PinK's evaluation runs YCSB-E on its Hash baseline: one after
                            // another, each issued when the previous completes.
                            scans_as_gets = true;
                            let last = (start + u64::from(length)).min(generator.inserted());
                            let mut request = InFlight::new(at, true, last.saturating_sub(start));
                            let mut done = at;
                            if start < last {
                                let (value, got) = target.get(at, &key)?;
                                values.check(start, value.as_deref())?;
                                done = got;
                                if start + 1 < last {
                                    request.rest = Some(Continuation::Gets {
                                        next: start + 1,
                                        last,
                                    });
                                }
                            }
                            (request, done)
                        }
                        Err(other) => return Err(other),
                    }
                }
            },
        };
        counters_now = target.counters();
        let phase = counters_now - counters_before;
        request.page_reads += phase.of(Purpose::UserData).reads + phase.of(Purpose::Index).reads;
        request.index_reads += phase.of(Purpose::Index).reads;
        if let Some(rest) = &request.rest {
            if let Continuation::Gets { next, .. } = rest {
                hints.add(*next, config.key_bytes, target);
            }
            in_flight[client as usize] = Some(request);
            clients.push(Reverse((done, client)));
            continue;
        }
        reads_per_query_max = reads_per_query_max.max(request.page_reads);
        if request.get_count > 0 {
            index_reads_total += request.index_reads;
            index_reads_max = index_reads_max.max(request.index_reads.div_ceil(request.get_count));
            gets += request.get_count;
        }
        if request.point_get {
            get_flash_reads.record(request.page_reads);
            get_index_reads.record(request.index_reads);
        }
        let latency = done.saturating_sub(request.issue);
        if request.is_read {
            reads.record(latency);
            read_samples.push((request.issue, latency));
        } else {
            writes.record(latency);
        }
        finished_at = finished_at.max(done);
        clients.push(Reverse((done, client)));
        completed += 1;
        if completed % 4096 == 0 {
            progress(completed);
        }
        if config.waf_sample_every > 0 && completed % config.waf_sample_every == 0 {
            if let Some(waf) = (target.counters() - before).write_amplification() {
                waf_over_time.push((completed, waf));
            }
        }
    }
    progress(completed);
    let wall_seconds = wall.elapsed().as_secs_f64();
    let phase = target.counters() - before;
    let elapsed_s = (finished_at - start) as f64 / 1e9;
    let user_and_index_reads = phase.of(Purpose::UserData).reads + phase.of(Purpose::Index).reads;
    let all_io = phase.total().reads + phase.total().programs;
    let compaction = phase.of(Purpose::Compaction);
    let controller_cpu_us_per_op = cpu_before
        .zip(target.controller_cpu_ns())
        .map(|(before, after)| after.saturating_sub(before) as f64 / 1e3 / completed.max(1) as f64);
    let span_ns = finished_at.saturating_sub(start).max(1) as f64;
    let controller_utilisation =
        busy_before
            .zip(target.controller_busy_ns())
            .map(|(before, after)| {
                ["request", "background", "gc", "accelerator"]
                    .into_iter()
                    .zip(before.into_iter().zip(after))
                    .map(|(name, (before, after))| {
                        (
                            name.to_string(),
                            after.saturating_sub(before) as f64 / span_ns,
                        )
                    })
                    .collect()
            });
    let write_stall_ms = stalls_before
        .zip(write_stall_ns(target))
        .map(|(before, after)| after.saturating_sub(before) as f64 / 1e6);
    let result = BenchResult {
        preset: config.preset.clone(),
        workload: config.workload.name.to_string(),
        ops: completed,
        throughput_kops: if elapsed_s > 0.0 {
            completed as f64 / elapsed_s / 1e3
        } else {
            0.0
        },
        read_latency_us: reads.summary(),
        write_latency_us: writes.summary(),
        flash_reads_per_query: PerRequest {
            avg: user_and_index_reads as f64 / completed.max(1) as f64,
            max: reads_per_query_max,
        },
        index_reads_per_get: PerRequest {
            avg: index_reads_total as f64 / gets.max(1) as f64,
            max: index_reads_max,
        },
        point_get_reads: get_flash_reads
            .summary()
            .zip(get_index_reads.summary())
            .map(|(flash, index)| GetReads { flash, index }),
        compaction_io_share: if all_io > 0 {
            (compaction.reads + compaction.programs) as f64 / all_io as f64
        } else {
            0.0
        },
        waf: target.counters().write_amplification().unwrap_or(1.0),
        phase_waf: phase.write_amplification(),
        dram_bytes: target.dram_bytes(),
        controller_cpu_us_per_op,
        controller_utilisation,
        write_stall_ms,
        note: scans_as_gets.then(|| {
            "scans served as point GETs of the next keys of the key space (the store cannot scan)"
                .to_string()
        }),
        sim_requests_per_wall_s: completed as f64 / wall_seconds.max(1e-9),
        read_latency_cdf: reads.cdf_points(),
        waf_over_time,
        read_latency_over_time: latency_windows(&read_samples, start, finished_at, LATENCY_WINDOWS),
        value_mismatches: values.mismatches,
        first_value_mismatch: values.first_mismatch,
        late_issues: target.late_issues().saturating_sub(late_before),
        ..BenchResult::default()
    };
    Ok(RunOutcome {
        result,
        finished_at,
        keys: generator.inserted(),
    })
}

/// The rest of a request that takes more than one command. Each command is issued when the
/// previous one completed, in time order with every other client's commands, so the store never
/// sees a command from the future before one from the present.
enum Continuation {
    /// A read-modify-write's write, after its read.
    Write { number: u64 },
    /// A scan served as point GETs: the next key number to read, and the end.
    Gets { next: u64, last: u64 },
}

/// Keys that clients will read next (a scan served as point GETs knows them, and so do point
/// GETs drawn ahead, [`Upcoming`]), handed to the store in batches
/// ([`SimTarget::prefetch_gets`]) so that it can fetch their host memory together. A scan's
/// next key is read when its client's turn comes, after about a round of the other clients, so
/// a batch is at most a quarter of the clients: warned well ahead of its reads, and not so far
/// ahead that what it fetched is evicted. GETs drawn ahead are drawn two batches ahead.
struct GetHints {
    numbers: Vec<u64>,
    batch: usize,
    /// Whether the store took the warnings so far (it has a use for them).
    taken: bool,
}

impl GetHints {
    /// Keys warned at once at most.
    const BATCH_MAX: usize = 16;

    fn new(clients: u32) -> GetHints {
        GetHints {
            numbers: Vec::new(),
            batch: (clients as usize / 4).clamp(1, Self::BATCH_MAX),
            taken: true,
        }
    }

    fn add(&mut self, number: u64, key_bytes: usize, target: &mut dyn SimTarget) {
        if !self.taken {
            return;
        }
        self.numbers.push(number);
        if self.numbers.len() >= self.batch {
            let keys: Vec<Vec<u8>> = self
                .numbers
                .drain(..)
                .map(|number| key_of(number, key_bytes))
                .collect();
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            self.taken = target.prefetch_gets(&keys);
        }
    }
}

/// Requests drawn ahead of their turn, so that the keys of the point GETs among them can be
/// warned of ([`GetHints`]) before they are read. The generator's draws do not depend on the
/// store, so the requests, and their order, are the ones drawn one at a time. Only workloads
/// that insert nothing draw ahead: an insert drawn early would grow the key space that the
/// requests issued before it see.
struct Upcoming {
    drawn: VecDeque<Request>,
    /// Requests kept drawn (0: none, one at a time).
    ahead: usize,
}

impl Upcoming {
    fn new(workload: &WorkloadSpec, batch: usize) -> Upcoming {
        Upcoming {
            drawn: VecDeque::new(),
            ahead: if workload.insert > 0.0 { 0 } else { 2 * batch },
        }
    }

    /// The next request, after drawing up to `ahead` beyond it and warning of their GETs.
    fn next(
        &mut self,
        generator: &mut Generator,
        hints: &mut GetHints,
        key_bytes: usize,
        target: &mut dyn SimTarget,
    ) -> Request {
        if !hints.taken {
            // The store has no use for warnings: draw as the requests are needed.
            self.ahead = 0;
        }
        while self.drawn.len() <= self.ahead {
            let request = generator.next_request();
            if self.ahead > 0 {
                if let Request::Read(number) | Request::ReadModifyWrite(number) = request {
                    hints.add(number, key_bytes, target);
                }
            }
            self.drawn.push_back(request);
        }
        self.drawn
            .pop_front()
            .expect("at least one request was drawn")
    }
}

/// A client's request while it runs.
struct InFlight {
    /// When it was issued.
    issue: SimTime,
    /// Whether it counts as a read (GET or scan) or a write.
    is_read: bool,
    /// Point GETs it makes.
    get_count: u64,
    /// User-data and index pages read by its commands so far.
    page_reads: u64,
    /// Index pages read by its commands so far.
    index_reads: u64,
    /// Whether it is a point GET (a read of one key, nothing else).
    point_get: bool,
    /// Its next command, if any.
    rest: Option<Continuation>,
}

impl InFlight {
    fn new(issue: SimTime, is_read: bool, get_count: u64) -> InFlight {
        InFlight {
            issue,
            is_read,
            get_count,
            page_reads: 0,
            index_reads: 0,
            point_get: false,
            rest: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvssd_flash::{BlockAddress, Flash, Geometry, PageAddress, Profile};
    use std::collections::HashMap;

    /// One flash page per write, appended over the dies: a store simple enough to predict exactly.
    struct PagePerKey {
        flash: Flash,
        pages: HashMap<Vec<u8>, PageAddress>,
        next: u64,
        scans: bool,
        /// Keys warned of and keys read, in order: `true` for a warning.
        keys_seen: Vec<(bool, Vec<u8>)>,
    }

    impl PagePerKey {
        fn new(scans: bool) -> Self {
            let profile = Profile::test_min();
            let geometry = Geometry {
                blocks_per_die: 256,
                page_bytes: 2048,
                ..profile.geometry
            };
            PagePerKey {
                flash: Flash::new(geometry, Some(profile.timing)).expect("valid"),
                pages: HashMap::new(),
                next: 0,
                scans,
                keys_seen: Vec::new(),
            }
        }
    }

    impl SimTarget for PagePerKey {
        fn put(&mut self, at: SimTime, key: &[u8], value: &[u8]) -> Result<SimTime, TargetError> {
            let geometry = *self.flash.geometry();
            let dies = u64::from(geometry.dies());
            let die = (self.next % dies) as u32;
            let stripe = self.next / dies;
            self.next += 1;
            let page = BlockAddress {
                die,
                block: (stripe / u64::from(geometry.pages_per_block)) as u32,
            }
            .page((stripe % u64::from(geometry.pages_per_block)) as u32);
            let mut data = vec![0u8; geometry.page_bytes as usize];
            data[..value.len()].copy_from_slice(value);
            let done = self
                .flash
                .program(at, page, Purpose::UserData, &data, &[value.len() as u8])
                .map_err(|error| TargetError::Failed(error.to_string()))?;
            self.pages.insert(key.to_vec(), page);
            Ok(done)
        }

        fn get(
            &mut self,
            at: SimTime,
            key: &[u8],
        ) -> Result<(Option<Vec<u8>>, SimTime), TargetError> {
            self.keys_seen.push((false, key.to_vec()));
            let Some(&page) = self.pages.get(key) else {
                return Ok((None, at));
            };
            let mut data = vec![0u8; self.flash.geometry().page_bytes as usize];
            let mut length = [0u8; 1];
            let read = self
                .flash
                .read(at, page, Purpose::UserData, &mut data, &mut length)
                .map_err(|error| TargetError::Failed(error.to_string()))?;
            data.truncate(usize::from(length[0]));
            Ok((Some(data), read.done_at))
        }

        fn prefetch_gets(&mut self, keys: &[&[u8]]) -> bool {
            self.keys_seen
                .extend(keys.iter().map(|key| (true, key.to_vec())));
            true
        }

        fn scan(
            &mut self,
            at: SimTime,
            start: &[u8],
            count: usize,
        ) -> Result<(Pairs, SimTime), TargetError> {
            if !self.scans {
                return Err(TargetError::Unsupported("no scans".into()));
            }
            let mut keys: Vec<Vec<u8>> = self
                .pages
                .keys()
                .filter(|key| key.as_slice() >= start)
                .cloned()
                .collect();
            keys.sort();
            keys.truncate(count);
            let mut pairs = Vec::with_capacity(keys.len());
            let mut done = at;
            for key in keys {
                let (value, read) = self.get(at, &key)?;
                done = done.max(read);
                pairs.push((key, value.unwrap_or_default()));
            }
            Ok((pairs, done))
        }

        fn counters(&self) -> Counters {
            self.flash.counters()
        }

        fn dram_bytes(&self) -> BTreeMap<String, u64> {
            BTreeMap::from([("map".to_string(), self.pages.len() as u64 * 64)])
        }
    }

    fn config(workload: &str, loaded: u64, operations: u64, clients: u32) -> RunConfig {
        RunConfig {
            preset: "page-per-key".into(),
            workload: WorkloadSpec::by_name(workload).expect("workload"),
            loaded,
            operations,
            clients,
            key_bytes: 16,
            value_bytes: 100,
            seed: 5,
            waf_sample_every: 0,
        }
    }

    #[test]
    fn runner_counts_reads_latency_and_throughput_exactly() {
        let mut store = PagePerKey::new(true);
        let load = run(&mut store, &config("load", 0, 500, 8), 0, &mut |_| {}).expect("load");
        assert_eq!(load.keys, 500);
        assert_eq!(load.result.ops, 500);
        assert_eq!(load.result.phase_waf, Some(1.0), "one program per put");
        assert_eq!(load.result.waf, 1.0);
        let start = store.flash.quiescent_at();
        let read = run(&mut store, &config("c", 500, 2_000, 1), start, &mut |_| {}).expect("c");
        let alone = Profile::test_min().timing.read_alone_ns(2048) as f64 / 1_000.0;
        // One client, one page read per GET on an idle device: every latency is one read alone
        // (to the histogram's three significant digits).
        assert!((read.result.read_latency_us.max - alone).abs() <= alone * 0.001);
        assert!((read.result.read_latency_us.p50 - alone).abs() <= alone * 0.001);
        assert!((read.result.throughput_kops - 1_000.0 / alone).abs() < 0.01);
        assert_eq!(read.result.flash_reads_per_query.avg, 1.0);
        assert_eq!(read.result.flash_reads_per_query.max, 1);
        assert_eq!(read.result.index_reads_per_get.max, 0);
        let per_get = read
            .result
            .point_get_reads
            .expect("workload C makes point GETs");
        assert_eq!(
            (per_get.flash.avg, per_get.flash.p9999, per_get.flash.max),
            (1.0, 1, 1)
        );
        assert_eq!(per_get.index.max, 0);
        assert_eq!(load.result.point_get_reads, None, "Load makes no GETs");
        assert_eq!(
            read.result.phase_waf, None,
            "no writes, no write amplification"
        );
        assert_eq!(
            read.result.waf, 1.0,
            "the device's own WAF is still defined"
        );
        assert!(read.result.sim_requests_per_wall_s > 0.0);
    }

    #[test]
    fn runner_overlaps_clients_on_the_virtual_clock() {
        let mut serial = PagePerKey::new(true);
        run(&mut serial, &config("load", 0, 400, 64), 0, &mut |_| {}).expect("load");
        let mut parallel = PagePerKey::new(true);
        run(&mut parallel, &config("load", 0, 400, 64), 0, &mut |_| {}).expect("load");
        let start = serial.flash.quiescent_at();
        let one = run(&mut serial, &config("c", 400, 2_000, 1), start, &mut |_| {}).expect("c");
        let many = run(
            &mut parallel,
            &config("c", 400, 2_000, 16),
            start,
            &mut |_| {},
        )
        .expect("c");
        assert!(many.result.throughput_kops > 2.0 * one.result.throughput_kops);
    }

    #[test]
    fn runner_serves_scans_as_gets_when_the_store_cannot_scan() {
        let mut store = PagePerKey::new(false);
        run(&mut store, &config("load", 0, 300, 8), 0, &mut |_| {}).expect("load");
        let start = store.flash.quiescent_at();
        let scans = run(&mut store, &config("e", 300, 200, 4), start, &mut |_| {}).expect("e");
        assert!(scans
            .result
            .note
            .as_deref()
            .is_some_and(|note| note.contains("point GETs")));
        assert!(scans.result.flash_reads_per_query.avg > 5.0);
        // The keys of the scans' later GETs were warned of (one at a time for four clients),
        // each before its read; only the scans cut short when the run ends leave one unread.
        let warned: Vec<usize> = (0..store.keys_seen.len())
            .filter(|&at| store.keys_seen[at].0)
            .collect();
        assert!(warned.len() >= 100);
        let unread = warned
            .iter()
            .filter(|&&at| {
                let key = &store.keys_seen[at].1;
                !store.keys_seen[at..].contains(&(false, key.clone()))
            })
            .count();
        assert!(unread <= 4, "{unread} keys warned of and never read");
        let mut scanning = PagePerKey::new(true);
        run(&mut scanning, &config("load", 0, 300, 8), 0, &mut |_| {}).expect("load");
        let native = run(&mut scanning, &config("e", 300, 200, 4), start, &mut |_| {}).expect("e");
        assert!(native.result.note.is_none());
    }

    #[test]
    fn runner_warns_of_gets_drawn_ahead_and_issues_them_as_drawn() {
        let mut store = PagePerKey::new(true);
        run(&mut store, &config("load", 0, 300, 8), 0, &mut |_| {}).expect("load");
        assert!(
            store.keys_seen.is_empty(),
            "Load reads nothing and warns of nothing"
        );
        let start = store.flash.quiescent_at();
        let reads = config("c", 300, 500, 8);
        run(&mut store, &reads, start, &mut |_| {}).expect("c");
        // The GETs are the generator's draws made one at a time, in the order drawn.
        let mut generator = Generator::new(reads.workload.clone(), 300, 500, reads.seed);
        let expected: Vec<Vec<u8>> = (0..500)
            .map(|_| match generator.next_request() {
                Request::Read(number) => key_of(number, reads.key_bytes),
                other => panic!("workload C drew {other:?}"),
            })
            .collect();
        let read: Vec<Vec<u8>> = store
            .keys_seen
            .iter()
            .filter(|(warned, _)| !warned)
            .map(|(_, key)| key.clone())
            .collect();
        assert_eq!(read, expected);
        // Each was warned of before it was read.
        for (at, (warned, key)) in store.keys_seen.iter().enumerate() {
            if !warned {
                assert!(
                    store.keys_seen[..at].contains(&(true, key.clone())),
                    "GET {at} was not warned of"
                );
            }
        }
        // A workload that inserts draws one request at a time, so it warns of no GET.
        store.keys_seen.clear();
        let start = store.flash.quiescent_at();
        run(&mut store, &config("d", 300, 500, 8), start, &mut |_| {}).expect("d");
        assert!(store.keys_seen.iter().any(|(warned, _)| !warned));
        assert!(store.keys_seen.iter().all(|(warned, _)| !warned));
    }

    #[test]
    fn runner_counts_values_that_are_not_the_write_expected() {
        let mut store = PagePerKey::new(true);
        run(&mut store, &config("load", 0, 100, 4), 0, &mut |_| {}).expect("load");
        // Key 1 now reads key 2's value, key 3 a value with one byte changed.
        let page_two = store.pages[&key_of(2, 16)];
        store.pages.insert(key_of(1, 16), page_two);
        let mut damaged = value_of(3, 1, 100);
        damaged[50] ^= 1;
        store.put(0, &key_of(3, 16), &damaged).expect("put");
        let start = store.flash.quiescent_at();
        let outcome = run(&mut store, &config("c", 100, 3_000, 1), start, &mut |_| {})
            .expect("a wrong value is counted, not fatal");
        let result = outcome.result;
        assert!(result.value_mismatches >= 2, "{}", result.value_mismatches);
        let first = result.first_value_mismatch.clone().expect("described");
        assert!(
            first.contains("key number 1 returned the value of key number 2")
                || first.contains("key number 3 returned bytes that are not"),
            "{first}"
        );
        let json = serde_json::to_value(&result).expect("json");
        assert_eq!(json["value_mismatches"], result.value_mismatches);
        let mut report = crate::report::BenchReport::simulated("test", 5);
        report.results.push(result);
        assert!(report.table().contains("VALUE MISMATCHES"));
        let error = report.value_mismatch_error().expect("the run fails");
        assert!(error.contains("page-per-key c"), "{error}");
        // Scans check every pair they return: both damaged keys lie in most scans' ranges.
        let start = store.flash.quiescent_at();
        let scans = run(&mut store, &config("e", 100, 200, 1), start, &mut |_| {})
            .expect("a wrong value is counted, not fatal");
        assert!(scans.result.value_mismatches >= 2);
        let first = scans.result.first_value_mismatch.unwrap_or_default();
        assert!(first.starts_with("a scan from key number"), "{first}");
    }

    #[test]
    fn runner_detects_a_store_that_loses_writes() {
        let mut store = PagePerKey::new(true);
        run(&mut store, &config("load", 0, 100, 4), 0, &mut |_| {}).expect("load");
        store.pages.clear();
        let error = run(&mut store, &config("c", 100, 10, 1), 0, &mut |_| {}).expect_err("lost");
        assert!(error.to_string().contains("found nothing"));
    }
}
