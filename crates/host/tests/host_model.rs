//! The host's transactions are serialisable: random transactions (reads, updates, inserts,
//! deletes, deliberate aborts) from many clients on the virtual clock, on both commit paths and
//! at several lock granularities, and then a serial replay in commit order against an ordered
//! map must see exactly the values each transaction read, and end in exactly the state the host
//! and device hold. Each run also asserts that contention happened (lock waits, wait-die
//! victims), so the test cannot pass by running transactions one at a time. A failure prints the
//! seed and configuration that replay it.

use std::collections::BTreeMap;
use std::sync::Arc;

use kvssd_device::{Device, DeviceConfig};
use kvssd_flash::{Flash, Profile};
use kvssd_host::sim::{self, Program, SimConfig, Step, Workload};
use kvssd_host::{CommitPath, ConventionalConfig, Host, HostConfig, TableId};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const KEYS: u64 = 24;
const VALUE_BYTES: usize = 16;

fn key(number: u64) -> Vec<u8> {
    number.to_be_bytes().to_vec()
}

/// A transaction of up to four steps on random keys, decided up front; what it writes depends on
/// what it reads.
struct Random {
    ops: Vec<(u8, TableId, u64)>,
    stamp: u64,
    abort: bool,
}

impl Program for Random {
    fn step(&mut self, results: &[Option<Vec<u8>>]) -> Step {
        // Each op is a read followed by a write chosen from what the read saw.
        let index = results.len();
        let op = index / 2;
        if op >= self.ops.len() {
            return if self.abort {
                Step::Abort
            } else {
                Step::Commit
            };
        }
        let (kind, table, number) = self.ops[op];
        if index % 2 == 0 {
            return Step::Read(table, key(number));
        }
        let mut value = vec![0u8; VALUE_BYTES];
        value[..8].copy_from_slice(&self.stamp.to_le_bytes());
        value[8..].copy_from_slice(&(op as u64).to_le_bytes());
        match (&results[index - 1], kind % 4) {
            // Present: update, or delete one time in four; a read-only op rereads it.
            (Some(_), 0) => Step::Delete(table, key(number)),
            (Some(_), 1) => Step::ReadForUpdate(table, key(number)),
            (Some(_), _) => Step::Update(table, key(number), value),
            (None, _) => Step::Insert(table, key(number), value),
        }
    }
}

struct Mix {
    rng: Xoshiro256PlusPlus,
    tables: [TableId; 2],
    stamp: u64,
}

impl Workload for Mix {
    fn next(&mut self, _client: u32) -> Box<dyn Program> {
        self.stamp += 1;
        let ops = 1 + (self.rng.next_u64() % 4) as usize;
        let ops = (0..ops)
            .map(|_| {
                let kind = (self.rng.next_u64() % 4) as u8;
                let table = self.tables[(self.rng.next_u64() % 2) as usize];
                // Skewed: half the ops on the first six keys.
                let number = if self.rng.next_u64() % 2 == 0 {
                    self.rng.next_u64() % 6
                } else {
                    self.rng.next_u64() % KEYS
                };
                (kind, table, number)
            })
            .collect();
        Box::new(Random {
            ops,
            stamp: self.stamp,
            abort: self.rng.next_u64() % 10 == 0,
        })
    }
}

type Model = BTreeMap<(TableId, Vec<u8>), Vec<u8>>;

fn open(path: CommitPath, granularity: u64, cache_bytes: u64) -> Host {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let device = Arc::new(Device::open(flash, DeviceConfig::test_min()).expect("device"));
    let mut config = HostConfig::new(cache_bytes);
    config.lock_granularity = granularity;
    config.commit_path = path;
    config.conventional = ConventionalConfig {
        page_bytes: 128,
        log_blocks: 64,
        directory_blocks: 64,
        checkpoint_dirty_bytes: 400,
        clean_records_per_commit: 3,
        clean_log_share: 0.5,
    };
    Host::open(device, config).expect("host")
}

fn run_model(seed: u64, path: CommitPath, granularity: u64, cache_bytes: u64) {
    let replay = format!(
        "seed {seed}, {} path, granularity {granularity}, cache {cache_bytes} B",
        path.name()
    );
    let mut host = open(path, granularity, cache_bytes);
    let tables = [
        host.create_table("a", VALUE_BYTES).expect("table"),
        host.create_table("b", VALUE_BYTES).expect("table"),
    ];
    let mut model = Model::new();
    let mut initial = Vec::new();
    for table in tables {
        for number in (0..KEYS).step_by(2) {
            let value = vec![number as u8; VALUE_BYTES];
            initial.push((table, key(number), value.clone()));
            model.insert((table, key(number)), value);
        }
    }
    // In small pieces: a page of the conventional path then spans several loads, each of which
    // must keep the records the others wrote.
    let mut t = 0;
    for piece in initial.chunks(5) {
        t = host.load(t, piece).expect("load");
    }
    let mut workload = Mix {
        rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        tables,
        stamp: 0,
    };
    let config = SimConfig {
        clients: 8,
        transactions: 400,
        step_ns: 1_000,
        record: true,
    };
    let outcome = sim::run(&mut host, &mut workload, &config, t).expect(&replay);
    assert_eq!(outcome.refused, 0, "{replay}: {:?}", outcome.first_refusal);
    assert_eq!(outcome.committed + outcome.aborted, 400, "{replay}");
    assert!(outcome.lock_waits > 0, "{replay}: no lock waits");
    assert!(outcome.deaths > 0, "{replay}: no wait-die victims");
    // Commit order: a transaction that commits later saw everything committed before it.
    for (position, txn) in outcome.log.iter().enumerate() {
        let mut own: BTreeMap<(TableId, Vec<u8>), Option<Vec<u8>>> = BTreeMap::new();
        for (step, result) in txn.steps.iter().zip(&txn.results) {
            match step {
                Step::Read(table, k) | Step::ReadForUpdate(table, k) => {
                    let expected = own
                        .get(&(*table, k.clone()))
                        .cloned()
                        .unwrap_or_else(|| model.get(&(*table, k.clone())).cloned());
                    assert_eq!(
                        result, &expected,
                        "{replay}: committed transaction {position} read a value a serial \
                         replay does not give"
                    );
                }
                Step::Update(table, k, v) | Step::Insert(table, k, v) => {
                    own.insert((*table, k.clone()), Some(v.clone()));
                }
                Step::Delete(table, k) => {
                    own.insert((*table, k.clone()), None);
                }
                Step::Commit | Step::Abort => {}
            }
        }
        for (name, value) in own {
            match value {
                Some(value) => model.insert(name, value),
                None => model.remove(&name),
            };
        }
    }
    host.checkpoint(outcome.finished_at).expect("checkpoint");
    let mut t = host.device().quiescent_at().expect("quiescent");
    // Through the cache, then through a cold cache (what the device holds).
    for pass in ["cache", "device"] {
        if pass == "device" {
            host.evict_clean();
        }
        for table in tables {
            for number in 0..KEYS {
                let (value, done) = host.read_committed(t, table, &key(number)).expect("read");
                t = done;
                assert_eq!(
                    value,
                    model.get(&(table, key(number))).cloned(),
                    "{replay}: key {number} of table {table} differs from the serial replay \
                     (read from the {pass})"
                );
            }
        }
    }
}

#[test]
fn host_model_serialisable_on_the_kaml_path() {
    for seed in 1..=3 {
        run_model(seed, CommitPath::Kaml, 1, 1 << 20);
        run_model(seed, CommitPath::Kaml, 4, 1 << 20);
    }
    // A cache smaller than the data: misses go to the device.
    run_model(7, CommitPath::Kaml, 1, 600);
}

#[test]
fn host_model_serialisable_on_the_conventional_path() {
    for seed in 1..=3 {
        run_model(seed, CommitPath::Conventional, 1, 1 << 20);
        run_model(seed, CommitPath::Conventional, 7, 1 << 20);
    }
    run_model(7, CommitPath::Conventional, 1, 1200);
}
