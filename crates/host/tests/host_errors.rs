//! Bad use of the transaction API is a typed error, never a panic or a hang: a read after commit,
//! a commit twice, a transaction over its private-copy budget, a wait-die victim (which then
//! retries and commits), freeing an active transaction, using a freed one, an update of a missing
//! key, an insert of an existing one, and a commit the device refuses (nothing of it applied).

use std::sync::Arc;

use kvssd_device::{Device, DeviceConfig, DeviceError};
use kvssd_flash::{Flash, Profile};
use kvssd_host::{Access, Host, HostConfig, HostError, TableId, TxnState};

fn host(cache_bytes: u64) -> (Host, TableId) {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let device = Arc::new(Device::open(flash, DeviceConfig::test_min()).expect("device"));
    let mut config = HostConfig::new(cache_bytes);
    config.private_bytes_max = 400;
    let mut host = Host::open(device, config).expect("host");
    let table = host.create_table("t", 64).expect("table");
    host.load(
        0,
        &[
            (table, b"k1".to_vec(), b"one".to_vec()),
            (table, b"k2".to_vec(), b"two".to_vec()),
        ],
    )
    .expect("load");
    (host, table)
}

fn done<T: std::fmt::Debug>(access: Access<T>) -> T {
    match access {
        Access::Done { value, .. } => value,
        other => panic!("expected the call to complete, got {other:?}"),
    }
}

#[test]
fn host_errors_read_after_commit_and_commit_twice() {
    let (mut host, table) = host(1 << 20);
    let txn = host.begin().expect("begin");
    assert_eq!(
        done(host.read(0, txn, table, b"k1").expect("read")),
        Some(b"one".to_vec())
    );
    done(host.commit(0, txn).expect("commit"));
    assert_eq!(host.state(txn).expect("state"), TxnState::Committed);
    let error = host
        .read(0, txn, table, b"k1")
        .expect_err("read after commit");
    assert!(matches!(
        error,
        HostError::NotActive {
            state: TxnState::Committed,
            call: "read",
            ..
        }
    ));
    let error = host.commit(0, txn).expect_err("commit twice");
    assert!(matches!(error, HostError::NotActive { call: "commit", .. }));
    assert!(
        host.abort(0, txn).is_err(),
        "a committed transaction cannot abort"
    );
    host.free(txn).expect("free");
    assert!(matches!(
        host.read(0, txn, table, b"k1"),
        Err(HostError::TxnUnknown(_))
    ));
}

#[test]
fn host_errors_free_needs_an_ended_transaction() {
    let (mut host, _) = host(1 << 20);
    let txn = host.begin().expect("begin");
    assert!(matches!(
        host.free(txn),
        Err(HostError::NotEnded {
            state: TxnState::Active,
            ..
        })
    ));
    host.abort(0, txn).expect("abort");
    host.abort(0, txn).expect("aborting twice is harmless");
    host.free(txn).expect("free");
}

#[test]
fn host_errors_over_budget_is_refused_and_changes_nothing() {
    let (mut host, table) = host(1 << 20);
    let txn = host.begin().expect("begin");
    done(host.update(0, txn, table, b"k1", &[1; 64]).expect("fits"));
    let mut refused = 0;
    for number in 0..10u8 {
        match host.insert(0, txn, table, &[b'n', number], &[2; 64]) {
            Ok(access) => done(access),
            Err(HostError::OverBudget { bytes, budget, .. }) => {
                assert!(bytes > budget);
                refused += 1;
            }
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert!(refused > 0, "the budget was never reached");
    assert_eq!(host.state(txn).expect("state"), TxnState::Active);
    done(host.commit(0, txn).expect("what fitted commits"));
    let (value, _) = host.read_committed(0, table, b"k1").expect("read");
    assert_eq!(value, Some(vec![1; 64]));
}

#[test]
fn host_errors_wait_die_victim_retries_and_commits() {
    let (mut host, table) = host(1 << 20);
    let old = host.begin().expect("begin");
    let young = host.begin().expect("begin");
    done(
        host.update(0, young, table, b"k2", b"young")
            .expect("update"),
    );
    done(host.update(0, old, table, b"k1", b"old").expect("update"));
    // The young transaction asks for the old one's lock: it dies.
    let error = host.read(0, young, table, b"k1").expect_err("dies");
    assert!(matches!(error, HostError::Died { txn } if txn == young));
    assert_eq!(host.state(young).expect("state"), TxnState::Aborted);
    // Its lock on k2 was released, so the old one proceeds.
    done(host.read(0, old, table, b"k2").expect("read"));
    let committed_at = match host.commit(0, old).expect("commit") {
        Access::Done { at, .. } => at,
        other => panic!("{other:?}"),
    };
    let woken = host.take_wakeups();
    assert!(
        woken.iter().any(|&(txn, _)| txn == young),
        "the victim is woken when the lock it died on is released"
    );
    host.restart(young).expect("restart");
    // Until the old commit is durable the lock is not free.
    if committed_at > 0 {
        assert_eq!(
            host.read(0, young, table, b"k1").expect("waits"),
            Access::WaitUntil(committed_at)
        );
    }
    assert_eq!(
        done(host.read(committed_at, young, table, b"k1").expect("read")),
        Some(b"old".to_vec())
    );
    done(
        host.update(committed_at, young, table, b"k2", b"young")
            .expect("update"),
    );
    done(host.commit(committed_at, young).expect("commit"));
    assert!(
        host.restart(young).is_err(),
        "only an aborted transaction restarts"
    );
}

#[test]
fn host_errors_missing_and_existing_keys() {
    let (mut host, table) = host(1 << 20);
    let txn = host.begin().expect("begin");
    assert!(matches!(
        host.update(0, txn, table, b"nope", b"x"),
        Err(HostError::KeyMissing(_))
    ));
    assert!(matches!(
        host.delete(0, txn, table, b"nope"),
        Err(HostError::KeyMissing(_))
    ));
    assert!(matches!(
        host.insert(0, txn, table, b"k1", b"x"),
        Err(HostError::KeyExists(_))
    ));
    assert!(matches!(
        host.update(0, txn, table, b"k1", &[0; 65]),
        Err(HostError::Invalid(_))
    ));
    assert!(matches!(
        host.read(0, txn, TableId(9), b"k1"),
        Err(HostError::TableUnknown(_))
    ));
    host.abort(0, txn).expect("abort");
}

#[test]
fn host_errors_a_refused_commit_applies_nothing() {
    // A cache too small to remember k1: the insert cannot be refused early, the device refuses
    // the whole batch at commit.
    let (mut host, table) = host(0);
    let txn = host.begin().expect("begin");
    done(
        host.update(0, txn, table, b"k2", b"changed")
            .expect("update"),
    );
    done(host.insert(0, txn, table, b"k1", b"again").expect("insert"));
    let error = host.commit(0, txn).expect_err("refused");
    assert!(matches!(
        error,
        HostError::Device(DeviceError::BatchOperation { .. } | DeviceError::KeyExists)
    ));
    assert_eq!(host.state(txn).expect("state"), TxnState::Aborted);
    let (value, _) = host.read_committed(0, table, b"k2").expect("read");
    assert_eq!(value, Some(b"two".to_vec()), "nothing of the batch applied");
}
