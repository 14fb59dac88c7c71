//! The crash harness: a seeded workload on simulated flash, power cut after flash operation N,
//! recovery, and a check against a model of what was acknowledged and what was in flight.
//!
//! The workload (stores, deletes, batches across namespaces, namespace create and delete,
//! iterators) is a pure function of the seed. For a preset of logical blocks (`block`) its keys are
//! LBAs and its stores whole blocks or a few bytes at an offset in one (read-modify-writes), which
//! the model applies to its copy of the block. A dry run counts its flash operations; a pass then
//! cuts power after each of them (or a seeded sample) with torn in-flight programs, injects bit
//! flips on every read after the cut, reopens the device (recovery) and checks:
//!
//! * every acknowledged store, delete and batch is there (nothing acknowledged is lost);
//! * the command in flight at the cut is either wholly applied or not at all (a batch is never
//!   half-applied);
//! * no deleted namespace or key comes back, and no key appears that was never written (a full scan
//!   of every namespace sees exactly the model's keys).
//!
//! Under a write-ahead log with [`SyncPolicy::GroupCommit`] or [`SyncPolicy::None`] the promise is
//! weaker and so is the check: the recovered state must be the state after some prefix of the
//! commands that is at least as long as the prefix the device had reported durable
//! ([`crate::Device::durable_sequence`]); an unsynced tail may be lost, never half a batch.
//!
//! Under power-loss protection the cut is announced ([`crate::Device::power_cut`]) between two
//! commands (crash point N: before command N); the device writes its
//! dump, which must stay within its bound ([`crate::durability::DumpBound`]); recovery must give
//! back every command exactly.
//!
//! Bit flips are injected on reads during the workload too: reads retry, so no command may fail
//! and none may return wrong data.
//!
//! A failure names its seed, preset and crash point, and the `kvssd crash-test` command that
//! replays it.

use std::collections::{BTreeMap, BTreeSet};

use kvssd_flash::{ControllerModel, FaultConfig, Flash, Profile, SimTime};

use crate::{
    BatchOp, Device, DeviceConfig, DeviceError, Durability, IterOptions, IterStart, NamespaceId,
    NamespaceSpec, PresetKind, StoreMode, SyncPolicy,
};

/// One crash pass's settings.
#[derive(Debug, Clone)]
pub struct CrashConfig {
    /// Seed of workload and faults.
    pub seed: u64,
    /// Engine preset of the workload's namespaces.
    pub preset: PresetKind,
    /// The durability mode under test.
    pub durability: Durability,
    /// Commands in the workload.
    pub commands: usize,
    /// Probability that a program in flight at the cut leaves a torn page.
    pub torn_program_probability: f64,
    /// Probability that a read after the cut flips a bit.
    pub bit_flip_probability: f64,
    /// Probability that a read during the workload flips a bit.
    pub workload_bit_flip_probability: f64,
    /// How the controller runs flushes, merges and GC: under
    /// [`ControllerModel::Threads`] the cut can fall in the middle of a background merge.
    pub controller: ControllerModel,
}

impl CrashConfig {
    /// The CI workload for a preset: small enough to cut at every flash operation.
    pub fn small(seed: u64, preset: impl Into<PresetKind>) -> CrashConfig {
        CrashConfig {
            seed,
            preset: preset.into(),
            durability: Durability::WriteAheadLog(SyncPolicy::EveryCommand),
            commands: 150,
            torn_program_probability: 1.0 / 3.0,
            bit_flip_probability: 0.01,
            workload_bit_flip_probability: 0.002,
            controller: ControllerModel::Interchangeable,
        }
    }

    /// The same workload under another controller model.
    pub fn with_controller(self, controller: ControllerModel) -> CrashConfig {
        CrashConfig { controller, ..self }
    }

    /// The same workload under another durability mode.
    pub fn with_durability(self, durability: Durability) -> CrashConfig {
        CrashConfig { durability, ..self }
    }

    /// The durability mode's name, for reports.
    pub fn mode_name(&self) -> String {
        durability_name(self.durability)
    }
}

/// Which crash points a pass runs.
#[derive(Debug, Clone, Copy)]
pub enum CrashPoints {
    /// After every flash operation of the workload.
    All,
    /// A seeded sample of this many.
    Sample(u64),
}

/// What a pass found.
#[derive(Debug, Clone, Default)]
pub struct CrashOutcome {
    /// Flash operations of the whole workload (dry run).
    pub workload_operations: u64,
    /// Of those, the ones issued inside background jobs (flushes, merges, GC) under
    /// [`ControllerModel::Threads`]: crash points that fall in the middle of background work.
    pub background_operations: u64,
    /// Crash points run.
    pub crash_points: u64,
    /// Crash points after which recovery and every check passed.
    pub survived: u64,
    /// Failures, each with its seed and replay command.
    pub failures: Vec<String>,
    /// Log records replayed, summed over the points.
    pub records_replayed: u64,
    /// Largest simulated recovery time, in nanoseconds.
    pub recovery_simulated_ns_max: u64,
    /// Sum of simulated recovery times, in nanoseconds.
    pub recovery_simulated_ns_total: u64,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // SplitMix64.
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A command of the workload, in model terms (namespaces by slot: 0 always exists, 1 comes and
/// goes).
#[derive(Debug, Clone)]
enum Command {
    Store(usize, Vec<u8>, Vec<u8>),
    Delete(usize, Vec<u8>),
    Batch(Vec<(usize, Vec<u8>, Option<Vec<u8>>)>),
    CreateFirst,
    CreateSecond,
    DeleteSecond,
    Scan(usize),
}

/// Keys the workload uses.
const KEYS: u64 = 24;

/// The workload's key number `number`: `key000` to `key023`, or for a preset of logical blocks the
/// LBA as 8 big-endian bytes.
fn key_name(number: u64, blocks: bool) -> Vec<u8> {
    if blocks {
        number.to_be_bytes().to_vec()
    } else {
        format!("key{number:03}").into_bytes()
    }
}

/// Writes a store into a namespace's model: a key of 12 bytes (a preset of logical blocks: LBA and
/// byte offset) writes part of the block, whose other bytes stay (zeros if it had none).
fn store_into(map: &mut BTreeMap<Vec<u8>, Vec<u8>>, key: &[u8], value: &[u8]) {
    if key.len() != 12 {
        map.insert(key.to_vec(), value.to_vec());
        return;
    }
    let offset = u32::from_be_bytes([key[8], key[9], key[10], key[11]]) as usize;
    let block = map
        .entry(key[..8].to_vec())
        .or_insert_with(|| vec![0; HARNESS_LOGICAL_BLOCK_BYTES as usize]);
    block[offset..offset + value.len()].copy_from_slice(value);
}

/// Bytes of a logical block in the harness's configuration (the `block` preset).
const HARNESS_LOGICAL_BLOCK_BYTES: u32 = 128;

fn workload(config: &CrashConfig) -> Vec<Command> {
    let mut rng = Rng(config.seed ^ 0x6b76_7373_6463_7261);
    let mut second = false;
    let (_, device_config) = harness_config_for(config.durability);
    let block_bytes = config.preset.logical_block_bytes(&device_config);
    let blocks = block_bytes.is_some();
    let key = |rng: &mut Rng| key_name(rng.below(KEYS), blocks);
    let mut commands = Vec::with_capacity(config.commands);
    for index in 0..config.commands {
        let value = |rng: &mut Rng| {
            let len = 1 + rng.below(90) as usize;
            let mut value = format!("v{index}:").into_bytes();
            value.extend((0..len).map(|_| b'a' + rng.below(26) as u8));
            value
        };
        // For logical blocks: a whole block (the value padded), or a few bytes at an offset in it
        // (a read-modify-write).
        let store = |rng: &mut Rng| -> (Vec<u8>, Vec<u8>) {
            let mut v = value(rng);
            match block_bytes {
                None => (key(rng), v),
                Some(block) => {
                    let block = block as usize;
                    if rng.below(2) == 0 {
                        v.resize(block, b'.');
                        (key(rng), v)
                    } else {
                        v.truncate(1 + rng.below(16) as usize);
                        let offset = rng.below((block - v.len()) as u64 + 1) as u32;
                        let mut k = key(rng);
                        k.extend_from_slice(&offset.to_be_bytes());
                        (k, v)
                    }
                }
            }
        };
        let slot = |rng: &mut Rng| usize::from(second && rng.below(2) == 1);
        let roll = rng.below(100);
        let command = if roll < 45 {
            let s = slot(&mut rng);
            let (k, v) = store(&mut rng);
            Command::Store(s, k, v)
        } else if roll < 60 {
            let s = slot(&mut rng);
            Command::Delete(s, key(&mut rng))
        } else if roll < 80 {
            let n = 2 + rng.below(3) as usize;
            let mut ops = Vec::new();
            let mut seen = BTreeSet::new();
            for _ in 0..n {
                let s = slot(&mut rng);
                let (k, v) = if rng.below(4) != 0 {
                    let (k, v) = store(&mut rng);
                    (k, Some(v))
                } else {
                    (key(&mut rng), None)
                };
                // One operation per block: a batch must not name a key twice.
                if !seen.insert((s, k[..k.len().min(8)].to_vec())) {
                    continue;
                }
                ops.push((s, k, v));
            }
            Command::Batch(ops)
        } else if roll < 88 {
            if second {
                second = false;
                Command::DeleteSecond
            } else {
                second = true;
                Command::CreateSecond
            }
        } else {
            Command::Scan(slot(&mut rng))
        };
        commands.push(command);
    }
    commands
}

type State = BTreeMap<usize, BTreeMap<Vec<u8>, Vec<u8>>>;

/// The device configuration the harness uses (write-ahead log, sync per command).
pub fn harness_config() -> (Profile, DeviceConfig) {
    harness_config_for(Durability::WriteAheadLog(SyncPolicy::EveryCommand))
}

/// The device configuration the harness uses under a durability mode.
pub fn harness_config_for(durability: Durability) -> (Profile, DeviceConfig) {
    let profile = Profile::test_min();
    let mut config = DeviceConfig::test_min();
    // A small L0 and write buffer, so the workload flushes, compacts and collects garbage many
    // times.
    config.engine.l0_bytes = 600;
    config.hash.write_buffer_bytes = 600;
    config.kaml.write_buffer_bytes = 600;
    config.block.write_buffer_bytes = 600;
    config.block.logical_block_bytes = HARNESS_LOGICAL_BLOCK_BYTES;
    config.durability = durability;
    (profile, config)
}

struct Run {
    /// Acknowledged state.
    state: State,
    /// Namespace id by slot (acknowledged).
    ids: BTreeMap<usize, u32>,
    /// The state after each prefix of the acknowledged commands (index k: after k commands).
    prefixes: Vec<(State, BTreeMap<usize, u32>)>,
    /// The longest prefix the device reported durable.
    durable_prefix: usize,
    /// The command in flight at the cut, if any.
    in_flight: Option<Command>,
    /// Flash operations at the end of each acknowledged command.
    boundaries: Vec<u64>,
    /// Power-loss protection: what the dump wrote at the cut.
    dump: Option<crate::durability::DumpReport>,
}

fn apply(state: &mut State, ids: &mut BTreeMap<usize, u32>, command: &Command, new_id: u32) {
    match command {
        Command::Store(s, k, v) => store_into(state.entry(*s).or_default(), k, v),
        Command::Delete(s, k) => {
            state.entry(*s).or_default().remove(k);
        }
        Command::Batch(ops) => {
            for (s, k, v) in ops {
                let map = state.entry(*s).or_default();
                match v {
                    Some(v) => store_into(map, k, v),
                    None => {
                        map.remove(k);
                    }
                }
            }
        }
        Command::CreateFirst => {
            ids.insert(0, new_id);
            state.insert(0, BTreeMap::new());
        }
        Command::CreateSecond => {
            ids.insert(1, new_id);
            state.insert(1, BTreeMap::new());
        }
        Command::DeleteSecond => {
            ids.remove(&1);
            state.remove(&1);
        }
        Command::Scan(_) => {}
    }
}

fn execute(
    device: &Device,
    t: SimTime,
    ids: &BTreeMap<usize, u32>,
    command: &Command,
    preset: PresetKind,
) -> Result<(SimTime, u32), DeviceError> {
    let id = |s: &usize| NamespaceId(ids.get(s).copied().unwrap_or(0));
    match command {
        Command::Store(s, k, v) => Ok((device.store(t, id(s), k, v, StoreMode::Upsert)?, 0)),
        Command::Delete(s, k) => Ok((device.delete(t, id(s), k)?, 0)),
        Command::Batch(ops) => {
            let ops: Vec<BatchOp> = ops
                .iter()
                .map(|(s, k, v)| match v {
                    Some(v) => BatchOp::Store {
                        namespace: id(s),
                        key: k.clone(),
                        value: v.clone(),
                        mode: StoreMode::Upsert,
                    },
                    None => BatchOp::Delete {
                        namespace: id(s),
                        key: k.clone(),
                    },
                })
                .collect();
            Ok((device.batch(t, &ops)?, 0))
        }
        Command::CreateFirst | Command::CreateSecond => {
            // Named, so that names are checked across crashes like the namespaces themselves.
            let name = if matches!(command, Command::CreateFirst) {
                "first"
            } else {
                "second"
            };
            let created = device.create_namespace(NamespaceSpec::new(preset).with_name(name))?;
            Ok((t, created.0))
        }
        Command::DeleteSecond => Ok((device.delete_namespace(t, id(&1))?, 0)),
        Command::Scan(s) => {
            if !crate::supports_iterators(preset) {
                return Ok((t, 0));
            }
            let (iterator, mut t) =
                device.iter_open(t, id(s), IterOptions::new(IterStart::Key(Vec::new()), 2))?;
            let result = device.iter_next(t, iterator, 512);
            device.iter_close(iterator)?;
            t = result?.1;
            Ok((t, 0))
        }
    }
}

fn flash_operations(device: &Device) -> u64 {
    device.flash_operations()
}

/// Whether every record logged so far is durable (always, without a log).
fn all_durable(device: &Device) -> bool {
    device.all_records_durable()
}

/// Runs the workload with power cut after `cut_after` flash operations (`None`: no cut).
fn run(config: &CrashConfig, cut_after: Option<u64>) -> Result<(Run, Flash), String> {
    let (mut profile, device_config) = harness_config_for(config.durability);
    profile.timing.controller = config.controller;
    let announced = config.durability == Durability::PowerLossProtection;
    let mut flash =
        Flash::new(profile.geometry, Some(profile.timing)).map_err(|e| e.to_string())?;
    flash.set_faults(FaultConfig {
        seed: config.seed,
        power_cut_after_operations: if announced { None } else { cut_after },
        torn_program_probability: config.torn_program_probability,
        bit_flip_probability: config.workload_bit_flip_probability,
        ..FaultConfig::default()
    });
    let mut state = State::new();
    let mut ids = BTreeMap::new();
    let commands = workload(config);
    let device = match Device::open(flash, device_config) {
        Ok(device) => device,
        Err(error) => {
            // The cut came while formatting: nothing was acknowledged.
            return Err(format!("format failed: {error}"));
        }
    };
    let mut in_flight = None;
    let mut t: SimTime = 0;
    let mut prefixes = vec![(state.clone(), ids.clone())];
    let mut durable_prefix = 0;
    let mut boundaries = Vec::new();
    let mut dump = None;
    // Slot 0 is created first (an acknowledged command like any other).
    let mut all = vec![Command::CreateFirst];
    all.extend(commands);
    for (index, command) in all.into_iter().enumerate() {
        if announced && cut_after == Some(index as u64) {
            dump = device
                .power_cut(t)
                .map_err(|e| format!("the dump failed: {e}"))?;
            break;
        }
        match execute(&device, t, &ids, &command, config.preset) {
            Ok((done, new_id)) => {
                t = done;
                apply(&mut state, &mut ids, &command, new_id);
                prefixes.push((state.clone(), ids.clone()));
                boundaries.push(flash_operations(&device));
                if all_durable(&device) {
                    durable_prefix = prefixes.len() - 1;
                }
            }
            Err(error) => {
                if device.is_power_cut().unwrap_or(true) {
                    in_flight = Some(command);
                    break;
                }
                return Err(format!(
                    "command {index} ({command:?}) failed without a cut: {error}"
                ));
            }
        }
    }
    if announced && cut_after.is_some() && dump.is_none() && in_flight.is_none() {
        // The cut comes after the last command.
        dump = device
            .power_cut(t)
            .map_err(|e| format!("the dump failed: {e}"))?;
    }
    let flash = device.into_flash().map_err(|e| e.to_string())?;
    Ok((
        Run {
            state,
            ids,
            prefixes,
            durable_prefix,
            in_flight,
            boundaries,
            dump,
        },
        flash,
    ))
}

/// Reads a namespace whole through an iterator (retrying a read that fails its checksum, as a
/// host would).
fn scan_all(device: &Device, id: u32) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, String> {
    let mut last_error = String::new();
    for _ in 0..8 {
        let attempt = (|| -> Result<BTreeMap<Vec<u8>, Vec<u8>>, DeviceError> {
            let (iterator, mut t) = device.iter_open(
                0,
                NamespaceId(id),
                IterOptions::new(IterStart::Key(Vec::new()), 0),
            )?;
            let mut out = BTreeMap::new();
            loop {
                let next = device.iter_next(t, iterator, 1 << 16);
                let (batch, done) = match next {
                    Ok(next) => next,
                    Err(error) => {
                        device.iter_close(iterator)?;
                        return Err(error);
                    }
                };
                t = done;
                for entry in batch.entries {
                    out.insert(entry.key, entry.value.unwrap_or_default());
                }
                if batch.end {
                    break;
                }
            }
            device.iter_close(iterator)?;
            Ok(out)
        })();
        match attempt {
            Ok(out) => return Ok(out),
            Err(error) => last_error = error.to_string(),
        }
    }
    Err(format!("scan of namespace {id} failed: {last_error}"))
}

fn get(device: &Device, id: u32, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut last = String::new();
    for _ in 0..8 {
        match device.retrieve(0, NamespaceId(id), key, None) {
            Ok((value, _)) => return Ok(value.map(|retrieved| retrieved.value)),
            Err(error) => last = error.to_string(),
        }
    }
    Err(format!("retrieve failed: {last}"))
}

/// What a recovered device holds: namespace ids and each one's pairs.
type Found = BTreeMap<u32, BTreeMap<Vec<u8>, Vec<u8>>>;

/// Reads every namespace whole: a full scan where iterators exist, and a retrieve of every key the
/// workload uses (which must agree with the scan).
fn read_device(device: &Device, preset: PresetKind) -> Result<Found, String> {
    let infos = device.list_namespaces().map_err(|e| e.to_string())?;
    let names: BTreeSet<Option<&str>> =
        infos.iter().map(|info| info.spec.name.as_deref()).collect();
    if names.len() != infos.len() || names.contains(&None) {
        return Err(format!(
            "namespace names lost or repeated after recovery: {names:?}"
        ));
    }
    let listed: Vec<u32> = infos.iter().map(|info| info.id.0).collect();
    let mut found = Found::new();
    for id in listed {
        let mut pairs = BTreeMap::new();
        let blocks = preset
            .logical_block_bytes(&DeviceConfig::test_min())
            .is_some();
        for key in 0..KEYS {
            let key = key_name(key, blocks);
            if let Some(value) = get(device, id, &key)? {
                pairs.insert(key, value);
            }
        }
        if crate::supports_iterators(preset) {
            let scanned = scan_all(device, id)?;
            if scanned != pairs {
                let diff: Vec<String> = scanned
                    .keys()
                    .chain(pairs.keys())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .filter(|key| scanned.get(*key) != pairs.get(*key))
                    .map(|key| String::from_utf8_lossy(key).into_owned())
                    .collect();
                return Err(format!(
                    "namespace {id}: scan and retrieve disagree at keys {diff:?}"
                ));
            }
        }
        found.insert(id, pairs);
    }
    Ok(found)
}

/// Checks a recovered device against the model; `Err` says what is wrong.
fn check(device: &Device, run: &Run, preset: PresetKind) -> Result<(), String> {
    let found = read_device(device, preset)?;
    let listed: BTreeSet<u32> = found.keys().copied().collect();
    let mut candidates: Vec<(State, BTreeMap<usize, u32>)> = Vec::new();
    if let Some(command) = &run.in_flight {
        // A namespace created in flight gets the next id; find it among the listed ones.
        let new_id = listed
            .iter()
            .copied()
            .find(|id| !run.ids.values().any(|known| known == id))
            .unwrap_or(0);
        let mut after_state = run.state.clone();
        let mut after_ids = run.ids.clone();
        apply(&mut after_state, &mut after_ids, command, new_id);
        candidates.push((after_state, after_ids));
    }
    // Newest first: the acknowledged state, then (without sync per command) shorter prefixes down
    // to the one the device had reported durable.
    let newest = run.prefixes.len().saturating_sub(1);
    for k in (run.durable_prefix.min(newest)..=newest).rev() {
        candidates.push(run.prefixes[k].clone());
    }
    let mut reasons = Vec::new();
    for (state, ids) in &candidates {
        match matches(&found, state, ids) {
            Ok(()) => return Ok(()),
            Err(reason) => reasons.push(reason),
        }
    }
    reasons.truncate(2);
    Err(reasons.join("; or "))
}

fn matches(found: &Found, state: &State, ids: &BTreeMap<usize, u32>) -> Result<(), String> {
    let expected: BTreeSet<u32> = ids.values().copied().collect();
    let listed: BTreeSet<u32> = found.keys().copied().collect();
    if expected != listed {
        return Err(format!(
            "namespaces {listed:?} where the model has {expected:?}"
        ));
    }
    let empty = BTreeMap::new();
    for (slot, id) in ids {
        let model = state.get(slot).unwrap_or(&empty);
        let pairs = found.get(id).unwrap_or(&empty);
        if pairs != model {
            let diff: Vec<String> = model
                .keys()
                .chain(pairs.keys())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .filter(|key| model.get(*key) != pairs.get(*key))
                .map(|key| {
                    format!(
                        "{}: {:?} (model {:?})",
                        String::from_utf8_lossy(key),
                        pairs
                            .get(key)
                            .map(|v| String::from_utf8_lossy(v).into_owned()),
                        model
                            .get(key)
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                    )
                })
                .collect();
            return Err(format!("namespace {id} differs at {diff:?}"));
        }
    }
    Ok(())
}

/// Runs one crash point: the workload cut after `cut_after` flash operations, recovery, checks.
/// Returns the recovery's simulated time and records replayed.
pub fn crash_point(config: &CrashConfig, cut_after: u64) -> Result<(u64, u64), String> {
    let (run, mut flash) = match run(config, Some(cut_after)) {
        Ok(run) => run,
        // The cut came while formatting: nothing was acknowledged.
        Err(error) if error.starts_with("format failed") => return Ok((0, 0)),
        Err(error) => return Err(error),
    };
    if let Some(dump) = run.dump {
        let bound = dump.bound;
        if dump.page_programs > bound.page_programs
            || dump.erases > bound.erases
            || dump.record_bytes > bound.record_bytes
        {
            return Err(format!("the dump exceeded its bound: {dump:?}"));
        }
    }
    flash.restore_power();
    flash.set_faults(FaultConfig {
        seed: config.seed ^ cut_after,
        power_cut_after_operations: None,
        bit_flip_probability: config.bit_flip_probability,
        ..FaultConfig::default()
    });
    let (_, device_config) = harness_config_for(config.durability);
    let device = match Device::open(flash, device_config) {
        Ok(device) => device,
        Err(error) => return Err(format!("recovery failed: {error}")),
    };
    let report = device.recovery_report().map_err(|e| e.to_string())?;
    if report.is_none() && (!run.ids.is_empty() || run.in_flight.is_some()) {
        return Err("the device formatted afresh instead of recovering".into());
    }
    check(&device, &run, config.preset)?;
    Ok(report.map_or((0, 0), |report| {
        (report.simulated_ns, report.records_replayed)
    }))
}

/// Flash operations of the whole workload (a dry run without a cut).
pub fn workload_operations(config: &CrashConfig) -> Result<u64, String> {
    Ok(dry_run(config)?.0)
}

/// The dry run: flash operations of the whole workload and at the end of each command.
fn dry_run(config: &CrashConfig) -> Result<(u64, Vec<u64>, u64), String> {
    let (run, flash) = run(config, None)?;
    if run.in_flight.is_some() {
        return Err("the dry run lost power".into());
    }
    Ok((
        flash.operations(),
        run.boundaries,
        flash.background_operations(),
    ))
}

/// The durability mode's name as `kvssd crash-test --mode` takes it.
pub fn durability_name(durability: Durability) -> String {
    match durability {
        Durability::Volatile => "volatile".into(),
        Durability::PowerLossProtection => "plp".into(),
        Durability::WriteAheadLog(SyncPolicy::EveryCommand) => "wal/every-command".into(),
        Durability::WriteAheadLog(SyncPolicy::GroupCommit { max_records }) => {
            format!("wal/group-commit-{max_records}")
        }
        Durability::WriteAheadLog(SyncPolicy::None) => "wal/none".into(),
    }
}

/// The controller model's name as `kvssd crash-test --controller` takes it.
pub fn controller_name(controller: ControllerModel) -> &'static str {
    match controller {
        ControllerModel::Threads => "threads",
        ControllerModel::Interchangeable => "interchangeable",
    }
}

/// The command line that replays one crash point.
pub fn replay_command(config: &CrashConfig, cut_after: u64) -> String {
    format!(
        "kvssd crash-test --seed {} --preset {} --mode {} --controller {} --commands {} --at {cut_after}",
        config.seed,
        config.preset.name(),
        config.mode_name(),
        controller_name(config.controller),
        config.commands
    )
}

/// Runs a pass: every crash point of the workload, or a seeded sample.
pub fn crash_pass(config: &CrashConfig, points: CrashPoints) -> CrashOutcome {
    crash_pass_with_progress(config, points, &mut |_, _| {})
}

/// [`crash_pass`], calling `progress` after each crash point with the outcome so far and the
/// number of crash points the pass runs (for a long pass's progress line).
pub fn crash_pass_with_progress(
    config: &CrashConfig,
    points: CrashPoints,
    progress: &mut dyn FnMut(&CrashOutcome, u64),
) -> CrashOutcome {
    let mut outcome = CrashOutcome::default();
    let (total, boundaries, background) = match dry_run(config) {
        Ok(total) => total,
        Err(error) => {
            outcome.failures.push(format!(
                "seed {} preset {} mode {}: dry run failed: {error}",
                config.seed,
                config.preset.name(),
                config.mode_name()
            ));
            return outcome;
        }
    };
    outcome.workload_operations = total;
    outcome.background_operations = background;
    let mut cuts: Vec<u64> = match points {
        CrashPoints::All => (0..total).collect(),
        CrashPoints::Sample(n) => {
            let mut rng = Rng(config.seed ^ 0x5eed);
            (0..n).map(|_| rng.below(total)).collect()
        }
    };
    if config.durability == Durability::PowerLossProtection {
        // An announced cut happens between commands: a point before each command and one after
        // the last (the point is the command's index).
        let commands = boundaries.len() as u64;
        cuts = match points {
            CrashPoints::All => (0..=commands).collect(),
            CrashPoints::Sample(n) => {
                let mut rng = Rng(config.seed ^ 0x5eed);
                (0..n).map(|_| rng.below(commands + 1)).collect()
            }
        };
    }
    let planned = cuts.len() as u64;
    for cut in cuts {
        outcome.crash_points += 1;
        match crash_point(config, cut) {
            Ok((simulated_ns, replayed)) => {
                outcome.survived += 1;
                outcome.records_replayed += replayed;
                outcome.recovery_simulated_ns_max =
                    outcome.recovery_simulated_ns_max.max(simulated_ns);
                outcome.recovery_simulated_ns_total += simulated_ns;
            }
            Err(error) => outcome.failures.push(format!(
                "seed {} preset {} mode {} cut after {cut}: {error} (replay: {})",
                config.seed,
                config.preset.name(),
                config.mode_name(),
                replay_command(config, cut)
            )),
        }
        progress(&outcome, planned);
    }
    outcome
}
