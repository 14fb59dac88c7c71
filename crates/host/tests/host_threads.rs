//! A shared host under real OS threads: four threads move money between a few accounts (two
//! read-for-updates and two updates per transaction) and bump a counter, on both commit paths
//! and at record and coarse lock granularity, so parked waits, wait-die victims and (on the
//! conventional path) waits for the log all happen. Afterwards no money was created or lost and
//! the counter equals the commits: lost updates or half-applied transactions would show.

use std::sync::Arc;

use kvssd_device::{Device, DeviceConfig};
use kvssd_flash::{Flash, Profile};
use kvssd_host::sim::{Program, Step};
use kvssd_host::{CommitPath, ConventionalConfig, Host, HostConfig, SharedHost, TableId};

const ACCOUNTS: u64 = 6;
const THREADS: u64 = 4;
const PER_THREAD: u64 = 60;
const START: i64 = 1000;

fn key(number: u64) -> Vec<u8> {
    number.to_be_bytes().to_vec()
}

fn amount(value: Option<&Vec<u8>>) -> i64 {
    let mut bytes = [0u8; 8];
    if let Some(value) = value {
        bytes.copy_from_slice(&value[..8]);
    }
    i64::from_le_bytes(bytes)
}

/// Moves `amount` from one account to another and bumps the counter (key `ACCOUNTS`).
struct Transfer {
    table: TableId,
    from: u64,
    to: u64,
    amount: i64,
}

impl Program for Transfer {
    fn step(&mut self, results: &[Option<Vec<u8>>]) -> Step {
        // The application's own work between calls, outside the host's mutex: it makes the
        // threads' transactions overlap.
        std::thread::sleep(std::time::Duration::from_micros(50));
        let value = |index: usize, delta: i64| {
            (amount(results.get(index).and_then(Option::as_ref)) + delta)
                .to_le_bytes()
                .to_vec()
        };
        match results.len() {
            0 => Step::ReadForUpdate(self.table, key(self.from)),
            1 => Step::ReadForUpdate(self.table, key(self.to)),
            2 => Step::Update(self.table, key(self.from), value(0, -self.amount)),
            3 => Step::Update(self.table, key(self.to), value(1, self.amount)),
            4 => Step::ReadForUpdate(self.table, key(ACCOUNTS)),
            5 => Step::Update(self.table, key(ACCOUNTS), value(4, 1)),
            _ => Step::Commit,
        }
    }
}

fn run(path: CommitPath, granularity: u64) {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let device = Arc::new(Device::open(flash, DeviceConfig::test_min()).expect("device"));
    let mut config = HostConfig::new(1 << 20);
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
    let mut host = Host::open(device, config).expect("host");
    let table = host.create_table("accounts", 8).expect("table");
    let mut records: Vec<_> = (0..ACCOUNTS)
        .map(|number| (table, key(number), START.to_le_bytes().to_vec()))
        .collect();
    records.push((table, key(ACCOUNTS), 0i64.to_le_bytes().to_vec()));
    let loaded = host.load(0, &records).expect("load");
    let shared = SharedHost::new(host);
    shared
        .with_host(|_, at| Ok(((), at.max(loaded))))
        .expect("clock");
    let (restarts, waits) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|thread| {
                let shared = &shared;
                scope.spawn(move || {
                    let (mut restarts, mut waits) = (0, 0);
                    for index in 0..PER_THREAD {
                        let from = (thread + index) % ACCOUNTS;
                        let to = (from + 1 + index % (ACCOUNTS - 1)) % ACCOUNTS;
                        let mut transfer = Transfer {
                            table,
                            from,
                            to,
                            amount: (index % 7) as i64 + 1,
                        };
                        let ran = shared.run(&mut transfer).expect("transfer");
                        assert!(ran.committed);
                        restarts += ran.restarts;
                        waits += ran.lock_waits;
                    }
                    (restarts, waits)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("thread"))
            .fold((0, 0), |(r, w), (r2, w2)| (r + r2, w + w2))
    });
    let mut host = shared.into_host().expect("host");
    host.evict_clean();
    let at = host.device().quiescent_at().expect("quiescent");
    let mut total = 0;
    for number in 0..ACCOUNTS {
        total += amount(
            host.read_committed(at, table, &key(number))
                .expect("read")
                .0
                .as_ref(),
        );
    }
    let counter = amount(
        host.read_committed(at, table, &key(ACCOUNTS))
            .expect("read")
            .0
            .as_ref(),
    );
    let stats = host.stats();
    eprintln!(
        "{} path, granularity {granularity}: {} commits, {restarts} restarts, {waits} lock waits, {} log waits (ns)",
        path.name(),
        stats.commits,
        stats.log_wait_ns
    );
    assert_eq!(total, START * ACCOUNTS as i64, "money created or lost");
    assert_eq!(counter, (THREADS * PER_THREAD) as i64, "a lost update");
    assert_eq!(stats.commits, THREADS * PER_THREAD);
    assert!(waits > 0, "the threads never contended");
}

#[test]
fn shared_host_threads_conserve_money_on_the_kaml_path() {
    run(CommitPath::Kaml, 1);
    run(CommitPath::Kaml, 16);
}

#[test]
fn shared_host_threads_conserve_money_on_the_conventional_path() {
    run(CommitPath::Conventional, 1);
    run(CommitPath::Conventional, 16);
}

/// Takes the exclusive lock on account 0, then panics.
struct Panics {
    table: TableId,
}

impl Program for Panics {
    fn step(&mut self, results: &[Option<Vec<u8>>]) -> Step {
        if results.is_empty() {
            return Step::ReadForUpdate(self.table, key(0));
        }
        panic!("the application fails mid-transaction");
    }
}

#[test]
fn shared_host_a_panicking_program_releases_its_locks() {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let device = Arc::new(Device::open(flash, DeviceConfig::test_min()).expect("device"));
    let mut host = Host::open(device, HostConfig::new(1 << 20)).expect("host");
    let table = host.create_table("accounts", 8).expect("table");
    let records: Vec<_> = (0..=ACCOUNTS)
        .map(|number| (table, key(number), 0i64.to_le_bytes().to_vec()))
        .collect();
    host.load(0, &records).expect("load");
    let shared = SharedHost::new(host);
    let panicked = std::thread::scope(|scope| {
        scope
            .spawn(|| shared.run(&mut Panics { table }))
            .join()
            .is_err()
    });
    assert!(panicked);
    // Younger than the panicked transaction: had it kept its lock, this one would die and sleep
    // for ever.
    let ran = shared
        .run(&mut Transfer {
            table,
            from: 0,
            to: 1,
            amount: 5,
        })
        .expect("transfer");
    assert!(ran.committed);
    assert_eq!(ran.restarts, 0);
}
