//! The conventional path's recovery from its write-ahead log, with the device closed and reopened
//! cleanly (power cuts are `host_crash.rs`): commits whose pages the cleaner never wrote come back
//! from the log; a full checkpoint leaves nothing to replay; a torn last record is ignored; a
//! damaged record in the middle of the live log, or a host opened with another layout, is a typed
//! error rather than a silent loss.

use std::collections::BTreeMap;
use std::sync::Arc;

use kvssd_device::crash::harness_config_for;
use kvssd_device::{Device, Durability, StoreMode, SyncPolicy};
use kvssd_engine::block::lba_key;
use kvssd_flash::Flash;
use kvssd_host::{
    Access, CommitPath, ConventionalConfig, Host, HostConfig, HostError, CONVENTIONAL_NAMESPACE,
};

const RECORDS: u64 = 8;
const COMMITS: u64 = 5;

fn key(number: u64) -> Vec<u8> {
    number.to_be_bytes().to_vec()
}

fn config(log_blocks: u64) -> HostConfig {
    let mut config = HostConfig::new(1 << 20);
    config.commit_path = CommitPath::Conventional;
    config.conventional = ConventionalConfig {
        page_bytes: 128,
        log_blocks,
        directory_blocks: 8,
        // The cleaner never runs: every commit lives only in the log.
        checkpoint_dirty_bytes: u64::MAX,
        clean_records_per_commit: 4,
        // ... nor to truncate the log: only a full ring makes a checkpoint.
        clean_log_share: 1.0,
    };
    config
}

fn device(flash: Flash) -> Device {
    let (_, device_config) =
        harness_config_for(Durability::WriteAheadLog(SyncPolicy::EveryCommand));
    Device::open(flash, device_config).expect("device")
}

fn close(host: Host) -> Flash {
    let device = Arc::try_unwrap(host.into_device()).unwrap_or_else(|_| panic!("shared"));
    device.into_flash().expect("flash")
}

/// When a call that had nothing to wait for completed.
fn done<T: std::fmt::Debug>(access: Access<T>) -> u64 {
    match access {
        Access::Done { at, .. } => at,
        other => panic!("expected the call to complete, got {other:?}"),
    }
}

type State = BTreeMap<u64, Vec<u8>>;

/// Loads the records, then commits one update per commit (record `i` set to `commit i`); returns
/// the flash and the state after each commit (index 0: after the load).
fn run(checkpoint: bool) -> (Flash, Vec<State>) {
    let (profile, _) = harness_config_for(Durability::WriteAheadLog(SyncPolicy::EveryCommand));
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let mut host = Host::open(Arc::new(device(flash)), config(16)).expect("host");
    let table = host.create_table("t", 16).expect("table");
    let mut state: State = (0..RECORDS).map(|n| (n, b"loaded".to_vec())).collect();
    let records: Vec<_> = state
        .iter()
        .map(|(&n, v)| (table, key(n), v.clone()))
        .collect();
    let mut at = host.load(0, &records).expect("load");
    let mut states = vec![state.clone()];
    for commit in 0..COMMITS {
        let txn = host.begin().expect("begin");
        let value = format!("commit {commit}").into_bytes();
        at = done(
            host.update(at, txn, table, &key(commit), &value)
                .expect("update"),
        );
        at = done(host.commit(at, txn).expect("commit"));
        host.free(txn).expect("free");
        state.insert(commit, value);
        states.push(state.clone());
    }
    if checkpoint {
        host.checkpoint(at).expect("checkpoint");
    }
    (close(host), states)
}

/// Opens a host over the flash and reads every record; returns the state, the log entries
/// replayed and the flash.
fn reopen(flash: Flash, log_blocks: u64) -> Result<(State, u64, Flash), HostError> {
    let mut host = Host::open(Arc::new(device(flash)), config(log_blocks))?;
    let replayed = host.stats().replayed_records;
    let (table, existed) = host.open_table("t", 16)?;
    assert!(existed, "the device holds the table (replayed {replayed})");
    let mut state = State::new();
    for n in 0..RECORDS {
        if let (Some(value), _) = host.read_committed(0, table, &key(n))? {
            state.insert(n, value);
        }
    }
    Ok((state, replayed, close(host)))
}

/// Overwrites a block of the log ring (LBA 0 is the anchor, the ring follows) with bytes that
/// are not a record.
fn damage_log_block(flash: Flash, block: u64) -> Flash {
    let device = device(flash);
    let namespace = device
        .namespace_by_name(CONVENTIONAL_NAMESPACE)
        .expect("names")
        .expect("the conventional namespace");
    device
        .store(
            0,
            namespace,
            &lba_key(1 + block),
            &[0x5a; 128],
            StoreMode::Upsert,
        )
        .expect("store");
    device.into_flash().expect("flash")
}

#[test]
fn host_recovery_replays_the_log_and_refuses_a_damaged_one() {
    // Nothing reached the pages but the load: the log alone brings every commit back, and
    // replaying again on the next open gives the same.
    let (flash, states) = run(false);
    let (state, replayed, flash) = reopen(flash, 16).expect("recovery");
    assert_eq!(state, states[COMMITS as usize]);
    assert_eq!(replayed, COMMITS, "one log entry per commit redone");
    let (again, _, _) = reopen(flash, 16).expect("second recovery");
    assert_eq!(again, state);

    // A full checkpoint truncates the whole log.
    let (flash, states) = run(true);
    let (state, replayed, _) = reopen(flash, 16).expect("recovery after a checkpoint");
    assert_eq!((state, replayed), (states[COMMITS as usize].clone(), 0));

    // The last record torn (never acknowledged, in a real cut): the commits before it.
    let (flash, states) = run(false);
    let flash = damage_log_block(flash, COMMITS - 1);
    let (state, replayed, _) = reopen(flash, 16).expect("recovery with a torn tail");
    assert_eq!(state, states[COMMITS as usize - 1]);
    assert_eq!(replayed, COMMITS - 1);

    // A damaged record with an intact one after it: an acknowledged commit would be lost.
    let (flash, _) = run(false);
    let flash = damage_log_block(flash, 1);
    match reopen(flash, 16).map(|(state, replayed, _)| (state, replayed)) {
        Err(HostError::Corrupt(message)) => assert!(message.contains("LSN 1"), "{message}"),
        other => panic!("expected a damaged log to be refused, got {other:?}"),
    }

    // Another layout than the namespace was created with.
    let (flash, _) = run(false);
    match reopen(flash, 32).map(|(state, replayed, _)| (state, replayed)) {
        Err(HostError::Invalid(message)) => {
            assert!(message.contains("log of 16 blocks"), "{message}")
        }
        other => panic!("expected the layout to be refused, got {other:?}"),
    }
}

#[test]
fn host_recovery_refuses_a_cleaner_share_outside_the_ring() {
    for share in [0.0, -0.5, 1.5, f64::NAN] {
        let (profile, _) = harness_config_for(Durability::WriteAheadLog(SyncPolicy::EveryCommand));
        let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
        let mut config = config(16);
        config.conventional.clean_log_share = share;
        match Host::open(Arc::new(device(flash)), config).map(|_| ()) {
            Err(HostError::Invalid(message)) => {
                assert!(message.contains("share of the log ring"), "{message}")
            }
            other => panic!("expected a share of {share} to be refused, got {other:?}"),
        }
    }
}
