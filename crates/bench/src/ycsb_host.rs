//! `kvssd bench ycsb --host`: YCSB through the host layer (KAML Fig. 10).
//!
//! Every request is a transaction of the host ([`kvssd_host`]) run by closed-loop clients on the
//! virtual clock ([`kvssd_host::sim`]): a read is a one-record read transaction (read, commit),
//! an update a one-record update (update, commit), an insert (workload D) a one-record insert,
//! a read-modify-write (F) a read for update, an update and a commit. Reads the cache holds
//! never reach the device; every commit is one atomic batch on the KAML path. The cache is
//! sized to a target hit ratio as in `kvssd bench tpcb` ([`crate::tpcb::cache_bytes_for`]), and
//! the ratio measured is reported.
//!
//! One table of `records` records (keys the record number, 8 bytes big-endian, so record
//! locks and the conventional path's pages follow key order; YCSB's key choice — zipfian,
//! uniform, latest — picks the numbers), loaded through the host, on a fresh device per
//! (commit path, lock granularity, hit ratio); the workloads then run one after another on it.
//! The host has no range scan, so workload E is refused. After each workload the table must hold
//! exactly the records loaded plus those inserted by committed transactions, and no request may
//! have been refused.

use std::time::Instant;

use kvssd_flash::SimTime;
use kvssd_host::sim::{Program, Step, Workload};
use kvssd_host::{CommitPath, Host, TableId};

use crate::oltp::{self, OltpConfig, OltpReport, OltpResult};
use crate::tpcb::{cache_bytes_for, key_of};
use crate::workload::{self, Request, WorkloadSpec};

/// `kvssd bench ycsb --host`'s configuration.
#[derive(Debug, Clone)]
pub struct YcsbHostConfig {
    /// The run grid and device; `transactions` is the requests per workload.
    pub oltp: OltpConfig,
    /// Records loaded.
    pub records: u64,
    /// Bytes of every value.
    pub value_bytes: usize,
    /// Workloads, run in order after the load (not `e`; `load` is implicit).
    pub workloads: Vec<WorkloadSpec>,
}

impl YcsbHostConfig {
    /// Defaults: 100,000 records of 1 KiB, workloads A, B, C, D and F, 20,000 requests each from
    /// 16 clients, the KAML path with record locks at hit ratios 0.8 and 1.0.
    pub fn default_config() -> YcsbHostConfig {
        let mut oltp = OltpConfig::default_config();
        oltp.commit_paths = vec![CommitPath::Kaml];
        oltp.lock_granularities = vec![1];
        YcsbHostConfig {
            oltp,
            records: 100_000,
            value_bytes: 1024,
            workloads: ["a", "b", "c", "d", "f"]
                .iter()
                .filter_map(|name| WorkloadSpec::by_name(name))
                .collect(),
        }
    }
}

/// One YCSB request as a transaction.
struct Request1 {
    table: TableId,
    request: Request,
    value: Vec<u8>,
}

impl Program for Request1 {
    fn step(&mut self, results: &[Option<Vec<u8>>]) -> Step {
        let table = self.table;
        match (self.request, results.len()) {
            (Request::Read(number), 0) => Step::Read(table, key_of(number)),
            (Request::Update(number), 0) => Step::Update(table, key_of(number), self.value.clone()),
            (Request::Insert(number), 0) => Step::Insert(table, key_of(number), self.value.clone()),
            (Request::ReadModifyWrite(number), 0) => Step::ReadForUpdate(table, key_of(number)),
            (Request::ReadModifyWrite(number), 1) => {
                Step::Update(table, key_of(number), self.value.clone())
            }
            _ => Step::Commit,
        }
    }
}

/// Draws requests from YCSB's generator, one transaction each.
struct Requests {
    generator: workload::Generator,
    table: TableId,
    value_bytes: usize,
    issued: u64,
    inserts: u64,
}

impl Workload for Requests {
    fn next(&mut self, _client: u32) -> Box<dyn Program> {
        let request = self.generator.next_request();
        self.issued += 1;
        let number = match request {
            Request::Read(number)
            | Request::Update(number)
            | Request::Insert(number)
            | Request::ReadModifyWrite(number) => number,
            Request::Scan { start, .. } => start,
        };
        if matches!(request, Request::Insert(_)) {
            self.inserts += 1;
        }
        Box::new(Request1 {
            table: self.table,
            request,
            value: workload::value_of(number, self.issued, self.value_bytes),
        })
    }
}

/// Runs the grid: every commit path × lock granularity × hit ratio, each workload in turn.
pub fn run(
    config: &YcsbHostConfig,
    progress: crate::oltp::Progress<'_>,
) -> Result<OltpReport, String> {
    if let Some(spec) = config.workloads.iter().find(|spec| spec.scan > 0.0) {
        return Err(format!(
            "workload {} scans, and the host layer has no range scan (run a, b, c, d or f)",
            spec.name
        ));
    }
    let mut results = Vec::new();
    for &path in &config.oltp.commit_paths {
        for &granularity in &config.oltp.lock_granularities {
            for &hit_ratio in &config.oltp.hit_ratios {
                results.extend(run_one(config, path, granularity, hit_ratio, progress)?);
            }
        }
    }
    Ok(OltpReport {
        benchmark: "ycsb-host".into(),
        simulated: true,
        seed: config.oltp.seed,
        setup: format!(
            "YCSB through the host layer, one transaction per request: {} records of 8 B keys \
             and {} B values, {} clients, {} requests per workload, {} ns host CPU per step \
             (scale = records loaded)",
            config.records,
            config.value_bytes,
            config.oltp.clients,
            config.oltp.transactions,
            config.oltp.step_ns
        ),
        results,
    })
}

fn run_one(
    config: &YcsbHostConfig,
    path: CommitPath,
    granularity: u64,
    hit_ratio: f64,
    progress: crate::oltp::Progress<'_>,
) -> Result<Vec<OltpResult>, String> {
    let wall = Instant::now();
    let inserts_max: u64 = config
        .workloads
        .iter()
        .map(|spec| (spec.insert * config.oltp.transactions as f64).ceil() as u64 * 2)
        .sum();
    let mut host = oltp::open_host(
        &config.oltp,
        path,
        granularity,
        cache_bytes_for(hit_ratio, config.records, config.value_bytes),
        config.records + inserts_max,
        config.value_bytes,
    )?;
    let e = |error: kvssd_host::HostError| error.to_string();
    let table = host
        .create_table("usertable", config.value_bytes)
        .map_err(e)?;
    let mut t: SimTime = 0;
    let mut chunk = Vec::with_capacity(4096);
    for number in 0..config.records {
        chunk.push((
            table,
            key_of(number),
            workload::value_of(number, 0, config.value_bytes),
        ));
        if chunk.len() == 4096 {
            t = host.load(t, &chunk).map_err(e)?;
            chunk.clear();
        }
    }
    t = host.load(t, &chunk).map_err(e)?;
    let mut start = t.max(host.device().quiescent_at().map_err(|e| e.to_string())?);
    progress(&format!(
        "ycsb --host {} granularity {granularity} hit {hit_ratio}: loaded {} records ({:.1} s)",
        path.name(),
        config.records,
        wall.elapsed().as_secs_f64()
    ));
    let mut loaded = config.records;
    let mut results = Vec::new();
    for (index, spec) in config.workloads.iter().enumerate() {
        let wall = Instant::now();
        let mut requests = Requests {
            generator: workload::Generator::new(
                spec.clone(),
                loaded,
                config.oltp.transactions,
                config.oltp.seed.wrapping_add(index as u64 + 1),
            ),
            table,
            value_bytes: config.value_bytes,
            issued: 0,
            inserts: 0,
        };
        let (outcome, before, after) = config.oltp.simulate(&mut host, &mut requests, start)?;
        start = outcome
            .finished_at
            .max(host.device().quiescent_at().map_err(|e| e.to_string())?);
        // Inserted keys are numbered on from the loaded ones; every insert began committed
        // unless refused.
        let expected = loaded + requests.inserts;
        let (present, done) = count_present(&mut host, start, table, expected + 16)?;
        start = done;
        loaded = expected;
        let invariants = format!(
            "{present} records present, {expected} expected ({} loaded before, {} inserted)",
            expected - requests.inserts,
            requests.inserts
        );
        let result = OltpResult::from_run(
            format!("ycsb-{}", spec.name),
            config.oltp.params(
                path,
                granularity,
                hit_ratio,
                u32::try_from(config.records).unwrap_or(u32::MAX),
            ),
            &outcome,
            (&before, &after),
            (present == expected, invariants),
            wall.elapsed().as_secs_f64(),
        );
        progress(&format!(
            "ycsb --host {} granularity {granularity} hit {hit_ratio} workload {}: {:.0} tps \
             (simulated), hit ratio {:.3}",
            path.name(),
            spec.name,
            result.throughput_tps,
            result.hit_ratio_measured
        ));
        results.push(result);
    }
    Ok(results)
}

/// Records of `0..upto` the table holds (committed state), read at `at`.
fn count_present(
    host: &mut Host,
    mut at: SimTime,
    table: TableId,
    upto: u64,
) -> Result<(u64, SimTime), String> {
    let mut present = 0u64;
    for number in 0..upto {
        let (value, done) = host
            .read_committed(at, table, &key_of(number))
            .map_err(|error| error.to_string())?;
        at = at.max(done);
        present += u64::from(value.is_some());
    }
    Ok((present, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ycsb_through_the_host_runs_every_workload_and_keeps_its_records() {
        let mut config = YcsbHostConfig::default_config();
        config.records = 2000;
        config.value_bytes = 256;
        config.oltp.flash = kvssd_flash::Profile::pink_with_blocks(4);
        config.oltp.transactions = 400;
        config.oltp.clients = 8;
        config.oltp.hit_ratios = vec![0.5, 1.0];
        let report = run(&config, &mut |_| {}).expect("run");
        assert_eq!(report.results.len(), 10);
        for result in &report.results {
            assert!(result.invariants_hold, "{}", result.invariants);
            assert_eq!(result.committed, 400);
            assert!(result.throughput_tps > 0.0);
        }
        let c = |hit: f64| {
            report
                .results
                .iter()
                .find(|r| r.transaction == "ycsb-c" && r.params.hit_ratio == hit)
                .map(|r| r.hit_ratio_measured)
                .unwrap_or(0.0)
        };
        assert!(c(1.0) > 0.99, "a cache that holds everything hits");
        assert!(c(0.5) < c(1.0), "a smaller cache misses more");
        crate::oltp_report::assert_plots_written(&report);

        config.workloads = vec![WorkloadSpec::by_name("e").expect("e")];
        assert!(run(&config, &mut |_| {}).is_err(), "no scans on the host");
    }
}
