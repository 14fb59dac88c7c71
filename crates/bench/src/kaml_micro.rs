//! `kvssd bench kaml-micro`: KAML's micro-benchmarks (KAML §V-B, V-C) on a `kaml` namespace.
//!
//! * **Fetch / Update / Insert across value sizes** (KAML Figs. 5, 6): Insert puts new keys, Update
//!   overwrites existing ones, Fetch gets existing ones, one record per command.
//! * **Batch size** (Fig. 7): Insert and Update with atomic batches of 1, 2, 4, 8 records per
//!   command; throughput counts records.
//! * **Number of logs** (Fig. 8): Update with the namespace's writes confined to 16, 32 or 64 logs.
//!
//! Each experiment runs on a fresh simulated device with closed-loop clients (8, as KAML's bandwidth
//! runs use eight host threads). All figures are simulated time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use kvssd_device::{
    BatchOp, Device, DeviceConfig, NamespaceId, NamespaceSpec, PresetKind, StoreMode,
};
use kvssd_engine::hash::HashPreset;
use kvssd_flash::{Flash, Profile, Purpose, SimTime};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::latency::LatencyRecorder;
use crate::report::{BenchReport, BenchResult, PerRequest};
use crate::workload::{key_of, value_of};
use crate::ycsb::BenchProfile;

/// The micro-benchmarks' configuration.
#[derive(Debug, Clone)]
pub struct KamlMicroConfig {
    /// The simulated flash.
    pub flash: Profile,
    /// Key size, bytes.
    pub key_bytes: usize,
    /// Value sizes of the Fetch / Update / Insert experiment.
    pub value_sizes: Vec<usize>,
    /// Batch sizes of the batch experiment.
    pub batch_sizes: Vec<usize>,
    /// Log counts of the logs experiment.
    pub log_counts: Vec<u32>,
    /// Value size of the batch and logs experiments.
    pub value_bytes: usize,
    /// Keys inserted (the Insert experiment, and the data set of Update and Fetch).
    pub records: u64,
    /// Commands of each Update and Fetch run.
    pub operations: u64,
    /// Closed-loop clients.
    pub clients: u32,
    /// Seed.
    pub seed: u64,
}

impl KamlMicroConfig {
    /// Defaults: PinK's card at 1 GiB, 32 B keys, values of 512 B to 4 KiB, 100K records.
    pub fn default_config() -> KamlMicroConfig {
        KamlMicroConfig {
            flash: Profile::pink_with_blocks(8),
            key_bytes: 32,
            value_sizes: vec![512, 1024, 2048, 4096],
            batch_sizes: vec![1, 2, 4, 8],
            log_counts: vec![16, 32, 64],
            value_bytes: 1024,
            records: 100_000,
            operations: 50_000,
            clients: 8,
            seed: 1,
        }
    }
}

struct Bench<'a> {
    config: &'a KamlMicroConfig,
    device: Device,
    namespace: NamespaceId,
    now: SimTime,
}

/// What one closed-loop run measured.
struct Measured {
    latencies: LatencyRecorder,
    commands: u64,
    elapsed_ns: u64,
    wall_s: f64,
    page_reads: u64,
}

impl<'a> Bench<'a> {
    fn new(config: &'a KamlMicroConfig, logs: Option<u32>) -> Result<Bench<'a>, String> {
        let mut device_config = DeviceConfig::new(&config.flash);
        let profile = BenchProfile {
            flash: config.flash.clone(),
            key_bytes: config.key_bytes,
            value_bytes: config.value_bytes,
            ..BenchProfile::scaled()
        };
        // KAML keeps its whole table in DRAM.
        device_config.kaml = profile.hash_config(HashPreset::Kaml);
        let flash = Flash::new(config.flash.geometry, Some(config.flash.timing.clone()))
            .map_err(|error| error.to_string())?;
        let device = Device::open(flash, device_config).map_err(|error| error.to_string())?;
        let mut spec = NamespaceSpec::new(PresetKind::from(HashPreset::Kaml));
        spec.logs = logs.map(|count| (0..count).collect());
        let namespace = device
            .create_namespace(spec)
            .map_err(|error| error.to_string())?;
        Ok(Bench {
            config,
            device,
            namespace,
            now: 0,
        })
    }

    /// Runs `commands` commands from the closed-loop clients; `command(index, at)` issues one.
    fn run(
        &mut self,
        commands: u64,
        mut command: impl FnMut(&Device, NamespaceId, u64, SimTime) -> Result<SimTime, String>,
    ) -> Result<Measured, String> {
        let start = self.now;
        let before = self
            .device
            .stats()
            .map_err(|error| error.to_string())?
            .flash;
        let mut clients: BinaryHeap<Reverse<(SimTime, u32)>> = (0..self.config.clients.max(1))
            .map(|client| Reverse((start, client)))
            .collect();
        let mut latencies = LatencyRecorder::new();
        let mut finished = start;
        let wall = Instant::now();
        for index in 0..commands {
            let Some(Reverse((issue, client))) = clients.pop() else {
                break;
            };
            let done = command(&self.device, self.namespace, index, issue)?;
            latencies.record(done - issue);
            finished = finished.max(done);
            clients.push(Reverse((done, client)));
        }
        self.now = finished;
        let used = self
            .device
            .stats()
            .map_err(|error| error.to_string())?
            .flash
            - before;
        Ok(Measured {
            latencies,
            commands,
            elapsed_ns: finished - start,
            wall_s: wall.elapsed().as_secs_f64(),
            page_reads: used.of(Purpose::UserData).reads + used.of(Purpose::Index).reads,
        })
    }

    /// Inserts the data set in batches of `batch`.
    fn insert(&mut self, value_bytes: usize, batch: usize) -> Result<Measured, String> {
        let key_bytes = self.config.key_bytes;
        let records = self.config.records;
        let commands = records.div_ceil(batch as u64);
        self.run(commands, |device, namespace, index, at| {
            let first = index * batch as u64;
            let operations: Vec<BatchOp> = (first..(first + batch as u64).min(records))
                .map(|number| BatchOp::Store {
                    namespace,
                    key: key_of(number, key_bytes),
                    value: value_of(number, 1, value_bytes),
                    mode: StoreMode::InsertOnly,
                })
                .collect();
            device
                .batch(at, &operations)
                .map_err(|error| format!("insert: {error}"))
        })
    }

    /// Updates random existing keys in batches of `batch`.
    fn update(&mut self, value_bytes: usize, batch: usize) -> Result<Measured, String> {
        let key_bytes = self.config.key_bytes;
        let records = self.config.records;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.config.seed);
        let commands = self.config.operations;
        self.run(commands, |device, namespace, index, at| {
            let operations: Vec<BatchOp> = (0..batch)
                .map(|_| {
                    let number = rng.next_u64() % records;
                    BatchOp::Store {
                        namespace,
                        key: key_of(number, key_bytes),
                        value: value_of(number, 2 + index, value_bytes),
                        mode: StoreMode::Upsert,
                    }
                })
                .collect();
            device
                .batch(at, &operations)
                .map_err(|error| format!("update: {error}"))
        })
    }

    /// Gets random existing keys, checking each value belongs to its key.
    fn fetch(&mut self) -> Result<Measured, String> {
        let key_bytes = self.config.key_bytes;
        let records = self.config.records;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.config.seed.wrapping_add(1));
        let commands = self.config.operations;
        self.run(commands, |device, namespace, _, at| {
            let number = rng.next_u64() % records;
            let (value, done) = device
                .retrieve(at, namespace, &key_of(number, key_bytes), None)
                .map_err(|error| format!("fetch: {error}"))?;
            match value {
                Some(found) if found.value.get(..8) == Some(&number.to_le_bytes()[..]) => Ok(done),
                Some(_) => Err(format!(
                    "fetch: key number {number} returned another key's value"
                )),
                None => Err(format!("fetch: key number {number} is missing")),
            }
        })
    }
}

fn result(
    workload: &str,
    measured: &Measured,
    records_per_command: usize,
    value_bytes: usize,
    params: &[(&str, serde_json::Value)],
) -> BenchResult {
    let seconds = measured.elapsed_ns as f64 / 1e9;
    let records = measured.commands as f64 * records_per_command as f64;
    let mut map = serde_json::Map::new();
    map.insert("value_bytes".into(), value_bytes.into());
    map.insert(
        "bandwidth_mb_s".into(),
        (records * value_bytes as f64 / seconds.max(1e-12) / 1e6).into(),
    );
    for (key, value) in params {
        map.insert((*key).into(), value.clone());
    }
    let latency = measured.latencies.summary();
    let is_read = workload == "fetch";
    BenchResult {
        preset: "kaml".into(),
        workload: workload.into(),
        ops: measured.commands,
        throughput_kops: records / seconds.max(1e-12) / 1e3,
        read_latency_us: if is_read { latency } else { Default::default() },
        write_latency_us: if is_read { Default::default() } else { latency },
        flash_reads_per_query: PerRequest {
            avg: measured.page_reads as f64 / measured.commands.max(1) as f64,
            max: 0,
        },
        params: Some(map),
        sim_requests_per_wall_s: measured.commands as f64 / measured.wall_s.max(1e-9),
        read_latency_cdf: if is_read {
            measured.latencies.cdf_points()
        } else {
            Vec::new()
        },
        note: Some(format!(
            "throughput counts records ({records_per_command} per command)"
        )),
        ..BenchResult::default()
    }
}

/// Runs the three experiments; `progress(experiment, step, steps)` is told of each step.
pub fn run(
    config: &KamlMicroConfig,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<BenchReport, String> {
    let mut report = BenchReport::simulated("kaml-micro", config.seed);
    let sizes = config.value_sizes.len() as u64;
    for (step, &value_bytes) in config.value_sizes.iter().enumerate() {
        progress("value sizes", step as u64, sizes);
        let mut bench = Bench::new(config, None)?;
        let insert = bench.insert(value_bytes, 1)?;
        let update = bench.update(value_bytes, 1)?;
        let fetch = bench.fetch()?;
        let params = [("experiment", "value_size".into()), ("batch", 1.into())];
        report
            .results
            .push(result("insert", &insert, 1, value_bytes, &params));
        report
            .results
            .push(result("update", &update, 1, value_bytes, &params));
        report
            .results
            .push(result("fetch", &fetch, 1, value_bytes, &params));
    }
    let batches = config.batch_sizes.len() as u64;
    for (step, &batch) in config.batch_sizes.iter().enumerate() {
        progress("batch sizes", step as u64, batches);
        let mut bench = Bench::new(config, None)?;
        let insert = bench.insert(config.value_bytes, batch)?;
        let update = bench.update(config.value_bytes, batch)?;
        let params = [("experiment", "batch_size".into()), ("batch", batch.into())];
        report.results.push(result(
            "insert",
            &insert,
            batch,
            config.value_bytes,
            &params,
        ));
        report.results.push(result(
            "update",
            &update,
            batch,
            config.value_bytes,
            &params,
        ));
    }
    let logs = config.log_counts.len() as u64;
    for (step, &count) in config.log_counts.iter().enumerate() {
        progress("logs", step as u64, logs);
        let mut bench = Bench::new(config, Some(count))?;
        bench.insert(config.value_bytes, 8)?;
        let update = bench.update(config.value_bytes, 1)?;
        let params = [
            ("experiment", "logs".into()),
            ("logs", count.into()),
            ("batch", 1.into()),
        ];
        report
            .results
            .push(result("update", &update, 1, config.value_bytes, &params));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kaml_micro_runs_every_experiment_and_batches_raise_update_throughput() {
        let config = KamlMicroConfig {
            flash: Profile::pink_with_blocks(4),
            value_sizes: vec![512, 4096],
            batch_sizes: vec![1, 4],
            log_counts: vec![16, 64],
            records: 3_000,
            operations: 2_000,
            ..KamlMicroConfig::default_config()
        };
        let report = run(&config, &mut |_, _, _| {}).expect("runs");
        // 2 sizes x 3 operations + 2 batch sizes x 2 operations + 2 log counts.
        assert_eq!(report.results.len(), 6 + 4 + 2);
        let update = |batch: u64| {
            report
                .results
                .iter()
                .find(|result| {
                    let params = result.params.clone().unwrap_or_default();
                    result.workload == "update"
                        && params.get("experiment").and_then(|v| v.as_str()) == Some("batch_size")
                        && params.get("batch").and_then(|v| v.as_u64()) == Some(batch)
                })
                .map(|result| result.throughput_kops)
                .expect("update result")
        };
        assert!(
            update(4) > update(1),
            "batch 4 {} vs batch 1 {}",
            update(4),
            update(1)
        );
        assert!(report
            .results
            .iter()
            .all(|result| result.throughput_kops > 0.0));
    }
}
