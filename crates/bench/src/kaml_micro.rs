//! `kvssd bench kaml-micro`: KAML's micro-benchmarks (HPCA'17 §V-B, V-C, Figs. 5-8), with Get/Put
//! on a `kaml` namespace beside read/write on a `block` namespace of the same simulated card, as
//! KAML compares its firmware with the block firmware it was built from.
//!
//! * **Fetch / Update / Insert by record size** (Figs. 5, 6): Insert stores new records, Update
//!   overwrites random existing ones, Fetch reads random existing ones, one record per command.
//!   On `block` a record of `s` bytes is the `s` bytes at offset `i * s` of the logical space, so a
//!   record smaller than a logical block is a write of part of one (a read-modify-write) and
//!   consecutive records share a block; a read returns the record's whole logical block. The block
//!   side's logical blocks are written once before the runs, as KAML preconditioned its SSD, so
//!   Insert's writes land on mapped blocks as they did there. Bandwidth runs use `clients`
//!   closed-loop clients (KAML: eight host threads); latency runs use one (KAML: "a single
//!   thread").
//! * **Batch size** (Fig. 7): Insert and Update on `kaml` with atomic batches of 1 to 8 records per
//!   command; throughput counts records.
//! * **Number of logs** (Fig. 8): Update on `kaml` with the namespace's writes confined to 16, 32
//!   or 64 logs, on its own data set (`logs_records`). With KAML's per-log free-block lists
//!   (§IV-E) the namespace's blocks stay on its logs' dies, so fewer logs also mean fuller dies
//!   and earlier GC.
//!
//! KAML's setup as far as the paper gives it: 64-bit keys held in the mapping table's slots
//! (§IV-C), a table sized so the records fill it to `load_factor` (Fig. 5 reports load factors
//! 0.1 to 0.7, Fig. 6 is at 0.4), a per-command controller cost on both sides, and a queue depth of
//! one command per client. Every figure is simulated time; every phase reports progress.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use kvssd_device::{
    BatchOp, Device, DeviceConfig, NamespaceId, NamespaceSpec, PresetKind, StoreMode,
};
use kvssd_engine::block::{lba_key, lba_offset_key};
use kvssd_engine::hash::HashPreset;
use kvssd_flash::{Flash, Profile, Purpose, SimTime};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::latency::LatencyRecorder;
use crate::report::{BenchReport, BenchResult, PerRequest};
use crate::workload::value_of;
use crate::ycsb::BenchProfile;

/// Bytes of a key: KAML's keys are 64-bit integers.
pub const KEY_BYTES: usize = 8;

/// The micro-benchmarks' configuration.
#[derive(Debug, Clone)]
pub struct KamlMicroConfig {
    /// The simulated flash.
    pub flash: Profile,
    /// Record sizes of the Fetch / Update / Insert experiment.
    pub value_sizes: Vec<usize>,
    /// Batch sizes of the batch experiment.
    pub batch_sizes: Vec<usize>,
    /// Log counts of the logs experiment.
    pub log_counts: Vec<u32>,
    /// Record size of the batch experiment.
    pub value_bytes: usize,
    /// Record size of the logs experiment: 4 KiB, so the dies' program bandwidth, which the logs
    /// share out, is what bounds Update (with smaller records the controller is).
    pub logs_value_bytes: usize,
    /// Records inserted (the Insert experiment, and the data set of Update and Fetch).
    pub records: u64,
    /// Records of the logs experiment's data set (written before its Update runs). Default
    /// 25 000: a 4 KiB record takes a page, so they fill the 16 logs' dies (16 x 32 MiB) to the
    /// 38% that the 100 000 records of the record-size runs fill the whole card to.
    pub logs_records: u64,
    /// `kaml`'s per-log free-block lists (KAML §IV-E, [`HashConfig::log_free_lists`]): a
    /// namespace on fewer logs keeps its data on fewer dies. Off, its logs borrow other dies'
    /// blocks. Only the logs experiment gives a namespace fewer than all logs.
    ///
    /// [`HashConfig::log_free_lists`]: kvssd_engine::hash::HashConfig::log_free_lists
    pub log_free_lists: bool,
    /// Commands of each Update and Fetch bandwidth run.
    pub operations: u64,
    /// Commands of each single-client latency run.
    pub latency_operations: u64,
    /// Closed-loop clients of the bandwidth runs, each with one command outstanding (the queue
    /// depth).
    pub clients: u32,
    /// Load factor of `kaml`'s mapping table once the records are in (its size is fixed).
    pub load_factor: f64,
    /// Controller time per command besides its records, nanoseconds (both presets).
    pub command_ns: u64,
    /// Controller time per record of a command, nanoseconds (both presets).
    pub operation_ns: u64,
    /// Bytes of a `block` logical block.
    pub logical_block_bytes: u32,
    /// The power-protected write buffer of both presets, bytes: KAML buffers Puts "until a page's
    /// worth of data is ready" (§IV-B), a page per log, 64 x 8 KiB on this card.
    pub write_buffer_bytes: u64,
    /// Seed.
    pub seed: u64,
}

impl KamlMicroConfig {
    /// Defaults: PinK's card at 2 GiB (the largest data set, 100K records of 4 KiB, takes 40%
    /// of it: `kaml` puts one such record in an 8 KiB page), records of 64 B to 4 KiB, 8 clients,
    /// load factor 0.4, 4 KiB logical blocks, 512 KiB write buffers, and 4 us of controller time
    /// per command plus 11 us per record (calibrated from two of KAML's figures, see
    /// `docs/design.md`).
    pub fn default_config() -> KamlMicroConfig {
        KamlMicroConfig {
            flash: Profile::pink_with_blocks(16),
            value_sizes: vec![64, 256, 1024, 4096],
            batch_sizes: vec![1, 2, 4, 8],
            log_counts: vec![16, 32, 64],
            value_bytes: 256,
            logs_value_bytes: 4096,
            records: 100_000,
            logs_records: 25_000,
            log_free_lists: true,
            operations: 50_000,
            latency_operations: 1_000,
            clients: 8,
            load_factor: 0.4,
            command_ns: 4_000,
            operation_ns: 11_000,
            logical_block_bytes: 4096,
            write_buffer_bytes: 512 << 10,
            seed: 1,
        }
    }
}

/// The key of record `number`.
fn key_of(number: u64) -> Vec<u8> {
    number.to_be_bytes().to_vec()
}

/// Which side of the comparison a bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Get/Put on `kaml`.
    Kaml,
    /// read/write on `block`.
    Block,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Kaml => "kaml",
            Side::Block => "block",
        }
    }
}

struct Bench<'a> {
    config: &'a KamlMicroConfig,
    side: Side,
    value_bytes: usize,
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

type Progress<'p> = &'p mut dyn FnMut(&str);

impl<'a> Bench<'a> {
    fn new(
        config: &'a KamlMicroConfig,
        side: Side,
        value_bytes: usize,
        logs: Option<u32>,
    ) -> Result<Bench<'a>, String> {
        let mut device_config = DeviceConfig::new(&config.flash);
        device_config.command_ns = config.command_ns;
        device_config.operation_ns = config.operation_ns;
        let profile = BenchProfile {
            flash: config.flash.clone(),
            key_bytes: KEY_BYTES,
            value_bytes,
            ..BenchProfile::scaled()
        };
        let mut kaml = profile.hash_config(HashPreset::Kaml);
        kaml.key_in_slot = true;
        kaml.log_free_lists = config.log_free_lists;
        // One table of fixed size, as KAML's 1024 MB table, filled to the load factor.
        kaml.table_slots = ((config.records as f64 / config.load_factor).ceil() as u64).max(1024);
        kaml.write_buffer_bytes = config.write_buffer_bytes;
        kaml.dram_budget_bytes = kaml
            .dram_budget_bytes
            .max(kaml.table_slots * 16 * 2 + config.write_buffer_bytes);
        device_config.kaml = kaml;
        device_config.block.logical_block_bytes = config.logical_block_bytes;
        device_config.block.write_buffer_bytes = config.write_buffer_bytes;
        device_config.block.dram_budget_bytes = 0;
        let flash = Flash::new(config.flash.geometry, Some(config.flash.timing.clone()))
            .map_err(|error| error.to_string())?;
        let device = Device::open(flash, device_config).map_err(|error| error.to_string())?;
        let preset = match side {
            Side::Kaml => PresetKind::from(HashPreset::Kaml),
            Side::Block => "block".parse::<PresetKind>().map_err(|e| e.to_string())?,
        };
        let mut spec = NamespaceSpec::new(preset);
        spec.logs = logs.map(|count| (0..count).collect());
        let namespace = device
            .create_namespace(spec)
            .map_err(|error| error.to_string())?;
        Ok(Bench {
            config,
            side,
            value_bytes,
            device,
            namespace,
            now: 0,
        })
    }

    /// Runs `commands` commands from `clients` closed-loop clients; `command(index, at)` issues
    /// one. Reports progress every quarter.
    fn run(
        &mut self,
        label: &str,
        clients: u32,
        commands: u64,
        progress: Progress<'_>,
        mut command: impl FnMut(&Device, NamespaceId, u64, SimTime) -> Result<SimTime, String>,
    ) -> Result<Measured, String> {
        // Runs start on an idle device, so one run's background work does not tax the next.
        let start = self
            .now
            .max(self.device.quiescent_at().map_err(|e| e.to_string())?);
        let before = self
            .device
            .stats()
            .map_err(|error| error.to_string())?
            .flash;
        let mut queue: BinaryHeap<Reverse<(SimTime, u32)>> = (0..clients.max(1))
            .map(|client| Reverse((start, client)))
            .collect();
        let mut latencies = LatencyRecorder::new();
        let mut finished = start;
        let wall = Instant::now();
        let quarter = commands.div_ceil(4).max(1);
        for index in 0..commands {
            let Some(Reverse((issue, client))) = queue.pop() else {
                break;
            };
            let done = command(&self.device, self.namespace, index, issue)?;
            latencies.record(done - issue);
            finished = finished.max(done);
            queue.push(Reverse((done, client)));
            if (index + 1) % quarter == 0 && index + 1 < commands {
                progress(&format!(
                    "{label}: {}/{commands} commands ({:.1} s)",
                    index + 1,
                    wall.elapsed().as_secs_f64()
                ));
            }
        }
        self.now = finished;
        let used = self
            .device
            .stats()
            .map_err(|error| error.to_string())?
            .flash
            - before;
        let wall_s = wall.elapsed().as_secs_f64();
        progress(&format!(
            "{label}: done, {commands} commands in {wall_s:.1} s"
        ));
        Ok(Measured {
            latencies,
            commands,
            elapsed_ns: finished - start,
            wall_s,
            page_reads: used.of(Purpose::UserData).reads + used.of(Purpose::Index).reads,
        })
    }

    /// Where record `number` lives on `block`: its key (LBA, with the byte offset when the record
    /// is smaller than a logical block) and the offset.
    fn block_place(&self, number: u64) -> (Vec<u8>, usize) {
        let block = u64::from(self.config.logical_block_bytes);
        let byte = number * self.value_bytes as u64;
        let (lba, offset) = (byte / block, (byte % block) as u32);
        if self.value_bytes as u64 >= block {
            (lba_key(lba).to_vec(), 0)
        } else {
            (lba_offset_key(lba, offset).to_vec(), offset as usize)
        }
    }

    /// Writes every logical block the records `0..records` occupy once, whole, and waits for the
    /// device to go idle (KAML preconditioned its SSD before measuring). Not measured.
    fn precondition(&mut self, records: u64, progress: Progress<'_>) -> Result<(), String> {
        let block = u64::from(self.config.logical_block_bytes);
        let blocks = (records * self.value_bytes as u64).div_ceil(block);
        let filler = vec![0xA5u8; block as usize];
        let mut t = self.now;
        for lba in 0..blocks {
            t = self
                .device
                .store(t, self.namespace, &lba_key(lba), &filler, StoreMode::Upsert)
                .map_err(|error| format!("precondition: {error}"))?;
        }
        self.now = t.max(self.device.quiescent_at().map_err(|e| e.to_string())?);
        progress(&format!("block: preconditioned {blocks} logical blocks"));
        Ok(())
    }

    /// Stores records `first..first + count` in order, `batch` per command.
    fn insert(
        &mut self,
        first: u64,
        count: u64,
        batch: usize,
        clients: u32,
        progress: Progress<'_>,
    ) -> Result<Measured, String> {
        let commands = count.div_ceil(batch as u64);
        let label = format!(
            "{} insert {} B x{batch} qd{clients}",
            self.side.name(),
            self.value_bytes
        );
        let places: Vec<(Vec<u8>, usize)> = match self.side {
            Side::Kaml => Vec::new(),
            Side::Block => (first..first + count)
                .map(|number| self.block_place(number))
                .collect(),
        };
        let (side, value_bytes) = (self.side, self.value_bytes);
        self.run(
            &label,
            clients,
            commands,
            progress,
            |device, namespace, index, at| {
                let start = index * batch as u64;
                let end = (start + batch as u64).min(count);
                let operations: Vec<BatchOp> = (start..end)
                    .map(|offset| {
                        let number = first + offset;
                        let value = value_of(number, 1, value_bytes);
                        match side {
                            Side::Kaml => BatchOp::Store {
                                namespace,
                                key: key_of(number),
                                value,
                                mode: StoreMode::InsertOnly,
                            },
                            Side::Block => BatchOp::Store {
                                namespace,
                                key: places[offset as usize].0.clone(),
                                value,
                                mode: StoreMode::Upsert,
                            },
                        }
                    })
                    .collect();
                submit(device, at, operations).map_err(|error| format!("insert: {error}"))
            },
        )
    }

    /// Overwrites random records of `0..records`, `batch` per command.
    fn update(
        &mut self,
        records: u64,
        commands: u64,
        batch: usize,
        clients: u32,
        progress: Progress<'_>,
    ) -> Result<Measured, String> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.config.seed ^ u64::from(clients));
        let label = format!(
            "{} update {} B x{batch} qd{clients}",
            self.side.name(),
            self.value_bytes
        );
        let numbers: Vec<u64> = (0..commands * batch as u64)
            .map(|_| rng.next_u64() % records)
            .collect();
        let keys: Vec<Vec<u8>> = numbers
            .iter()
            .map(|&number| match self.side {
                Side::Kaml => key_of(number),
                Side::Block => self.block_place(number).0,
            })
            .collect();
        let value_bytes = self.value_bytes;
        self.run(
            &label,
            clients,
            commands,
            progress,
            |device, namespace, index, at| {
                let operations: Vec<BatchOp> = (0..batch)
                    .map(|slot| {
                        let at_slot = index as usize * batch + slot;
                        BatchOp::Store {
                            namespace,
                            key: keys[at_slot].clone(),
                            value: value_of(numbers[at_slot], 2 + index, value_bytes),
                            mode: StoreMode::Upsert,
                        }
                    })
                    .collect();
                submit(device, at, operations).map_err(|error| format!("update: {error}"))
            },
        )
    }

    /// Reads random records of `0..records`, checking each holds its own record.
    fn fetch(
        &mut self,
        records: u64,
        commands: u64,
        clients: u32,
        progress: Progress<'_>,
    ) -> Result<Measured, String> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.config.seed.wrapping_add(1));
        let label = format!(
            "{} fetch {} B qd{clients}",
            self.side.name(),
            self.value_bytes
        );
        let numbers: Vec<u64> = (0..commands).map(|_| rng.next_u64() % records).collect();
        let places: Vec<(Vec<u8>, usize)> = numbers
            .iter()
            .map(|&number| match self.side {
                Side::Kaml => (key_of(number), 0),
                Side::Block => {
                    let (key, offset) = self.block_place(number);
                    (key[..8].to_vec(), offset)
                }
            })
            .collect();
        self.run(
            &label,
            clients,
            commands,
            progress,
            |device, namespace, index, at| {
                let number = numbers[index as usize];
                let (key, offset) = &places[index as usize];
                let (value, done) = device
                    .retrieve(at, namespace, key, None)
                    .map_err(|error| format!("fetch: {error}"))?;
                let header = value
                    .as_ref()
                    .and_then(|found| found.value.get(*offset..offset + 8));
                match header {
                    Some(bytes) if bytes == number.to_le_bytes() => Ok(done),
                    Some(_) => Err(format!("fetch: record {number} holds another record")),
                    None => Err(format!("fetch: record {number} is missing")),
                }
            },
        )
    }

    /// The `kaml` mapping table's load factor now, from the engine's report.
    fn load_factor(&self) -> Option<f64> {
        let info = self.device.list_namespaces().ok()?;
        let namespace = info.iter().find(|info| info.id == self.namespace)?;
        let table = namespace
            .dram_parts
            .iter()
            .find(|(part, _)| *part == "table")?
            .1;
        let entries = self.config.records as f64;
        Some(entries / (table as f64 / 16.0).max(1.0))
    }
}

/// Issues one command: a store for a single operation, an atomic batch for several.
fn submit(
    device: &Device,
    at: SimTime,
    mut operations: Vec<BatchOp>,
) -> Result<SimTime, kvssd_device::DeviceError> {
    if operations.len() == 1 {
        if let Some(BatchOp::Store {
            namespace,
            key,
            value,
            mode,
        }) = operations.pop()
        {
            return device.store(at, namespace, &key, &value, mode);
        }
    }
    device.batch(at, &operations)
}

/// Parameters of one result.
struct Params {
    experiment: &'static str,
    side: Side,
    workload: &'static str,
    value_bytes: usize,
    batch: usize,
    logs: Option<u32>,
    clients: u32,
    load_factor: Option<f64>,
}

fn result(measured: &Measured, params: &Params) -> BenchResult {
    let seconds = measured.elapsed_ns as f64 / 1e9;
    let records = measured.commands as f64 * params.batch as f64;
    let mut map = serde_json::Map::new();
    map.insert("experiment".into(), params.experiment.into());
    map.insert("value_bytes".into(), params.value_bytes.into());
    map.insert("batch".into(), params.batch.into());
    map.insert("queue_depth".into(), params.clients.into());
    if let Some(logs) = params.logs {
        map.insert("logs".into(), logs.into());
    }
    if let Some(load) = params.load_factor {
        map.insert("load_factor".into(), load.into());
    }
    map.insert(
        "bandwidth_mb_s".into(),
        (records * params.value_bytes as f64 / seconds.max(1e-12) / 1e6).into(),
    );
    let latency = measured.latencies.summary();
    let is_read = params.workload == "fetch";
    BenchResult {
        preset: params.side.name().into(),
        workload: params.workload.into(),
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
            "throughput counts records ({} per command), {} client(s) with one command each",
            params.batch, params.clients
        )),
        ..BenchResult::default()
    }
}

/// Runs the experiments; `progress` is told of every phase as it goes.
pub fn run(config: &KamlMicroConfig, progress: Progress<'_>) -> Result<BenchReport, String> {
    let mut report = BenchReport::simulated("kaml-micro", config.seed);
    let records = config.records;
    let latency_ops = config.latency_operations.min(records).max(1);
    let sizes = config.value_sizes.len();
    for (step, &value_bytes) in config.value_sizes.iter().enumerate() {
        for side in [Side::Kaml, Side::Block] {
            progress(&format!(
                "record sizes {}/{sizes}: {} B on {}",
                step + 1,
                value_bytes,
                side.name()
            ));
            let mut bench = Bench::new(config, side, value_bytes, None)?;
            if side == Side::Block {
                bench.precondition(records + latency_ops, progress)?;
            }
            let insert = bench.insert(0, records, 1, config.clients, progress)?;
            let insert_latency = bench.insert(records, latency_ops, 1, 1, progress)?;
            let load_factor = match side {
                Side::Kaml => bench.load_factor(),
                Side::Block => None,
            };
            let update = bench.update(records, config.operations, 1, config.clients, progress)?;
            let update_latency = bench.update(records, latency_ops, 1, 1, progress)?;
            let fetch = bench.fetch(records, config.operations, config.clients, progress)?;
            let fetch_latency = bench.fetch(records, latency_ops, 1, progress)?;
            for (workload, measured, clients) in [
                ("insert", &insert, config.clients),
                ("insert", &insert_latency, 1),
                ("update", &update, config.clients),
                ("update", &update_latency, 1),
                ("fetch", &fetch, config.clients),
                ("fetch", &fetch_latency, 1),
            ] {
                report.results.push(result(
                    measured,
                    &Params {
                        experiment: "record_size",
                        side,
                        workload,
                        value_bytes,
                        batch: 1,
                        logs: None,
                        clients,
                        load_factor,
                    },
                ));
            }
        }
    }
    let batches = config.batch_sizes.len();
    for (step, &batch) in config.batch_sizes.iter().enumerate() {
        progress(&format!(
            "batch sizes {}/{batches}: {batch} records per command",
            step + 1
        ));
        let mut bench = Bench::new(config, Side::Kaml, config.value_bytes, None)?;
        let insert = bench.insert(0, records, batch, config.clients, progress)?;
        let update = bench.update(
            records,
            config.operations.div_ceil(batch as u64),
            batch,
            config.clients,
            progress,
        )?;
        for (workload, measured) in [("insert", &insert), ("update", &update)] {
            report.results.push(result(
                measured,
                &Params {
                    experiment: "batch_size",
                    side: Side::Kaml,
                    workload,
                    value_bytes: config.value_bytes,
                    batch,
                    logs: None,
                    clients: config.clients,
                    load_factor: None,
                },
            ));
        }
    }
    let logs = config.log_counts.len();
    for (step, &count) in config.log_counts.iter().enumerate() {
        progress(&format!("logs {}/{logs}: {count} logs", step + 1));
        let mut bench = Bench::new(config, Side::Kaml, config.logs_value_bytes, Some(count))?;
        bench.insert(0, config.logs_records, 8, config.clients, progress)?;
        let update = bench.update(
            config.logs_records,
            config.operations,
            1,
            config.clients,
            progress,
        )?;
        report.results.push(result(
            &update,
            &Params {
                experiment: "logs",
                side: Side::Kaml,
                workload: "update",
                value_bytes: config.logs_value_bytes,
                batch: 1,
                logs: Some(count),
                clients: config.clients,
                load_factor: None,
            },
        ));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'r>(
        report: &'r BenchReport,
        preset: &str,
        experiment: &str,
        workload: &str,
        key: &str,
        value: u64,
        clients: u64,
    ) -> &'r BenchResult {
        report
            .results
            .iter()
            .find(|result| {
                let params = result.params.clone().unwrap_or_default();
                result.preset == preset
                    && result.workload == workload
                    && params.get("experiment").and_then(|v| v.as_str()) == Some(experiment)
                    && params.get(key).and_then(|v| v.as_u64()) == Some(value)
                    && params.get("queue_depth").and_then(|v| v.as_u64()) == Some(clients)
            })
            .unwrap_or_else(|| panic!("no {preset} {experiment} {workload} {key}={value}"))
    }

    #[test]
    fn kaml_micro_runs_every_experiment_and_reproduces_the_figures_direction() {
        let config = KamlMicroConfig {
            flash: Profile::pink_with_blocks(4),
            value_sizes: vec![256, 4096],
            batch_sizes: vec![1, 4],
            log_counts: vec![16, 64],
            records: 2_000,
            logs_records: 2_000,
            operations: 1_000,
            latency_operations: 100,
            ..KamlMicroConfig::default_config()
        };
        let mut lines = 0;
        let report = run(&config, &mut |_| lines += 1).expect("runs");
        assert!(lines > 20, "every phase reports progress: {lines} lines");
        // 2 sizes x 2 presets x 6 runs + 2 batch sizes x 2 operations + 2 log counts.
        assert_eq!(report.results.len(), 24 + 4 + 2);
        let clients = u64::from(config.clients);
        let update = |preset: &str| {
            find(
                &report,
                preset,
                "record_size",
                "update",
                "value_bytes",
                256,
                clients,
            )
            .throughput_kops
        };
        // A 256 B write is a read-modify-write of a 4 KiB block; a Put is not.
        assert!(
            update("kaml") > 2.0 * update("block"),
            "kaml {} block {}",
            update("kaml"),
            update("block")
        );
        let batch = |size: u64| {
            find(
                &report,
                "kaml",
                "batch_size",
                "update",
                "batch",
                size,
                clients,
            )
            .throughput_kops
        };
        assert!(
            batch(4) > batch(1),
            "batch 4 {} batch 1 {}",
            batch(4),
            batch(1)
        );
        // The logs share out the dies' program bandwidth: 4x the logs, well over 2x the Puts.
        let logs = |count: u64| {
            find(&report, "kaml", "logs", "update", "logs", count, clients).throughput_kops
        };
        assert!(
            logs(64) > 2.0 * logs(16),
            "64 logs {} 16 logs {}",
            logs(64),
            logs(16)
        );
        assert!(report
            .results
            .iter()
            .all(|result| result.throughput_kops > 0.0));
    }
}
