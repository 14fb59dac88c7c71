//! The lock table: shared and exclusive record locks held to the end of the transaction (strong
//! strict two-phase locking), with wait-die against deadlock, on the virtual clock.
//!
//! **Granularity.** One lock covers `granularity` records by key range: a key's last 8 bytes are
//! read as a big-endian record number (shorter keys are zero-padded on the left) and divided by
//! the granularity; the rest of the key and the table stay in the lock's name. So with
//! granularity 16 records 0-15 of a table share a lock, as they would share a page of 16 records
//! in a page store, which is the case KAML §V-D2's balls-into-bins estimate describes (K keys in
//! K / l bins). Key ranges rather than a hash keep the estimate exact and the conventional path's
//! page locks the same as its pages.
//!
//! **Deadlock: wait-die.** A transaction asking for a lock held in a conflicting mode waits only if
//! it is older (began earlier) than every conflicting holder; otherwise it dies (is aborted) and
//! is restarted later with its original age. Every wait is then from an older transaction to
//! younger ones, so the waits-for graph has no cycle and no deadlock can form; and because a
//! restarted transaction keeps its age, it eventually becomes the oldest and cannot starve.
//! Wait-die needs no detector and no timeout, so it is deterministic on the virtual clock, where a
//! timeout would be a tuning knob that changes figures. Its cost is some needless aborts of young
//! transactions, counted in the results.
//!
//! **Time.** A transaction's locks are released when its commit is durable, at the simulated time
//! its batch (or log write) completes, not when the host handles the commit: until then a
//! requester waits until that time ([`Grant::WaitUntil`]). A parked waiter is woken (and retries)
//! when a holder releases.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kvssd_flash::SimTime;

use crate::{TableId, TxnId};

/// A lock mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LockMode {
    /// Reading: compatible with other shared holders.
    Shared,
    /// Writing: compatible with nothing.
    Exclusive,
}

/// A lock's name: the table, the key without its last 8 bytes, and the record number divided by
/// the granularity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockName {
    table: TableId,
    prefix: Vec<u8>,
    group: u64,
}

/// A key's record number (its last 8 bytes, big-endian) and the bytes before them.
pub fn record_number(key: &[u8]) -> (&[u8], u64) {
    let split = key.len().saturating_sub(8);
    let (prefix, tail) = key.split_at(split);
    let mut bytes = [0u8; 8];
    bytes[8 - tail.len()..].copy_from_slice(tail);
    (prefix, u64::from_be_bytes(bytes))
}

impl LockName {
    /// The lock covering `key` of `table` when one lock covers `granularity` records.
    pub fn of(table: TableId, key: &[u8], granularity: u64) -> LockName {
        let (prefix, number) = record_number(key);
        LockName {
            table,
            prefix: prefix.to_vec(),
            group: number / granularity.max(1),
        }
    }
}

#[derive(Default)]
struct Lock {
    holders: BTreeMap<TxnId, LockMode>,
    /// Released by a committed transaction whose commit is durable only at this time.
    busy_until: SimTime,
    /// Transactions parked behind younger holders, oldest first, with the mode they asked for:
    /// at a release they are granted the lock in that order while their modes are compatible
    /// with the holders, so a younger transaction restarting at the same instant cannot take it
    /// from them.
    parked: BTreeMap<(u64, TxnId), LockMode>,
    /// Wait-die victims that died on this lock, woken to restart at its next release.
    victims: BTreeSet<TxnId>,
}

/// What a lock request got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// Held now.
    Granted,
    /// Free only once an earlier commit is durable: retry at that time.
    WaitUntil(SimTime),
    /// Parked behind younger conflicting holders until a release grants it.
    Parked,
    /// Wait-die: a conflicting holder is older; the requester must abort.
    Die,
}

fn compatible(holders: &BTreeMap<TxnId, LockMode>, txn: TxnId, mode: LockMode) -> bool {
    holders.iter().all(|(&holder, &held)| {
        holder == txn || (mode == LockMode::Shared && held == LockMode::Shared)
    })
}

/// The lock table.
#[derive(Default)]
pub(crate) struct LockTable {
    locks: HashMap<LockName, Lock>,
    /// Locks granted to parked transactions at a release, not yet taken into their control
    /// blocks.
    granted: HashMap<TxnId, Vec<LockName>>,
    /// Parked transactions wait-die now condemns (see [`LockTable::release`]).
    doomed: Vec<TxnId>,
    /// Transactions to wake and when, drained by the host.
    pub(crate) wakeups: Vec<(TxnId, SimTime)>,
}

impl LockTable {
    /// Asks for `name` in `mode` for `txn` of age `age` (smaller is older) at `now`; `ages` gives
    /// every transaction's age.
    pub(crate) fn acquire(
        &mut self,
        now: SimTime,
        txn: TxnId,
        age: u64,
        name: &LockName,
        mode: LockMode,
        ages: &dyn Fn(TxnId) -> u64,
    ) -> Grant {
        let lock = self.locks.entry(name.clone()).or_default();
        if let Some(&held) = lock.holders.get(&txn) {
            if held >= mode {
                return Grant::Granted;
            }
        }
        // Parked transactions whose requests conflict with this one count as holders: a request
        // never overtakes them, so a parked transaction never finds an older holder ahead of it
        // (which would break wait-die's rule that waits go from older to younger only).
        let conflicts = |other: TxnId, held: LockMode| {
            other != txn && (mode == LockMode::Exclusive || held == LockMode::Exclusive)
        };
        let parked_conflict = lock
            .parked
            .iter()
            .any(|(&(_, other), &wanted)| conflicts(other, wanted));
        if compatible(&lock.holders, txn, mode) && !parked_conflict {
            lock.parked.remove(&(age, txn));
            if lock.busy_until > now {
                return Grant::WaitUntil(lock.busy_until);
            }
            lock.holders.insert(txn, mode);
            return Grant::Granted;
        }
        let older_than_every_conflicting_holder = lock
            .holders
            .iter()
            .filter(|(&holder, &held)| conflicts(holder, held))
            .map(|(&holder, _)| holder)
            .chain(
                lock.parked
                    .iter()
                    .filter(|(&(_, other), &wanted)| conflicts(other, wanted))
                    .map(|(&(_, other), _)| other),
            )
            .all(|other| age < ages(other));
        if older_than_every_conflicting_holder {
            lock.parked.insert((age, txn), mode);
            Grant::Parked
        } else {
            // The host aborts the victim (releasing what it holds, this lock included if it held
            // it shared) and then registers it to be woken when this lock is next released
            // ([`LockTable::wait_for`]), to restart.
            Grant::Die
        }
    }

    /// Locks granted to `txn` while it was parked (the host adds them to its control block).
    pub(crate) fn take_granted(&mut self, txn: TxnId) -> Vec<LockName> {
        self.granted.remove(&txn).unwrap_or_default()
    }

    /// Releases `txn`'s hold on each of `names` (and anything it was parked on), durable at `at`;
    /// grants each lock to its parked transactions, oldest first, while compatible, and wakes
    /// them and the victims that died on it.
    pub(crate) fn release(
        &mut self,
        txn: TxnId,
        age: u64,
        names: &[LockName],
        at: SimTime,
        ages: &dyn Fn(TxnId) -> u64,
    ) {
        for name in names {
            let Some(lock) = self.locks.get_mut(name) else {
                continue;
            };
            lock.holders.remove(&txn);
            lock.parked.remove(&(age, txn));
            // Not removed from `victims`: a transaction condemned while parked here is ended
            // (releasing this lock) after it was registered as a victim, and must still be woken.
            lock.busy_until = lock.busy_until.max(at);
            let wake_at = lock.busy_until;
            let mut granted = Vec::new();
            for (&(_, waiter), &mode) in &lock.parked {
                if !compatible(&lock.holders, waiter, mode) {
                    break;
                }
                lock.holders.insert(waiter, mode);
                granted.push(waiter);
            }
            for waiter in granted {
                lock.parked.retain(|&(_, parked), _| parked != waiter);
                self.granted.entry(waiter).or_default().push(name.clone());
                self.wakeups.push((waiter, wake_at));
            }
            // A waiter left parked behind a holder older than itself (one just granted ahead of
            // it) would break wait-die's order: it dies instead.
            let doomed: Vec<(u64, TxnId)> = lock
                .parked
                .iter()
                .filter(|(&(waiter_age, waiter), &mode)| {
                    lock.holders.iter().any(|(&holder, &held)| {
                        holder != waiter
                            && (mode == LockMode::Exclusive || held == LockMode::Exclusive)
                            && ages(holder) < waiter_age
                    })
                })
                .map(|(&key, _)| key)
                .collect();
            for victim in std::mem::take(&mut lock.victims) {
                self.wakeups.push((victim, wake_at));
            }
            for key in doomed {
                lock.parked.remove(&key);
                lock.victims.insert(key.1);
                self.doomed.push(key.1);
            }
        }
    }

    /// Parked transactions that must now die (wait-die), drained by the host, which aborts them
    /// and wakes them to restart.
    pub(crate) fn take_doomed(&mut self) -> Vec<TxnId> {
        std::mem::take(&mut self.doomed)
    }

    /// Drops lock entries nobody holds or waits for and whose release time is at or before
    /// `now` (requests come in time order, so they can no longer make anyone wait).
    pub(crate) fn tidy(&mut self, now: SimTime) {
        self.locks.retain(|_, lock| {
            !lock.holders.is_empty()
                || !lock.parked.is_empty()
                || !lock.victims.is_empty()
                || lock.busy_until > now
        });
    }

    /// Registers a wait-die victim to be woken at the next release of `name`.
    pub(crate) fn wait_for(&mut self, txn: TxnId, name: &LockName, now: SimTime) {
        let lock = self.locks.entry(name.clone()).or_default();
        if lock.holders.is_empty() {
            self.wakeups.push((txn, now.max(lock.busy_until)));
        } else {
            lock.victims.insert(txn);
        }
    }

    /// A description of every lock (debugging).
    pub(crate) fn describe(&self) -> String {
        let mut out = String::new();
        for (name, lock) in &self.locks {
            out.push_str(&format!(
                "{name:?}: holders {:?} parked {:?} victims {:?} busy {}\n",
                lock.holders, lock.parked, lock.victims, lock.busy_until
            ));
        }
        out
    }

    /// Locks in the table (held, waited for, or releasing).
    pub(crate) fn len(&self) -> usize {
        self.locks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_group_records_by_key_range() {
        let table = TableId(1);
        let name = |n: u64, g| LockName::of(table, &n.to_be_bytes(), g);
        assert_eq!(name(0, 16), name(15, 16));
        assert_ne!(name(15, 16), name(16, 16));
        assert_ne!(name(0, 1), name(1, 1));
        assert_eq!(record_number(&[1, 2]), (&[][..], 0x0102));
        assert_eq!(record_number(b"ab\0\0\0\0\0\0\0\x05"), (&b"ab"[..], 5));
    }

    #[test]
    fn locks_wait_when_older_and_die_when_younger() {
        let mut table = LockTable::default();
        let ages = |txn: TxnId| u64::from(txn.0);
        let name = LockName::of(TableId(0), &[1], 1);
        let (old, middle, young) = (TxnId(1), TxnId(2), TxnId(3));
        assert_eq!(
            table.acquire(0, middle, 2, &name, LockMode::Shared, &ages),
            Grant::Granted
        );
        assert_eq!(
            table.acquire(0, young, 3, &name, LockMode::Shared, &ages),
            Grant::Granted,
            "shared locks are compatible"
        );
        assert_eq!(
            table.acquire(0, old, 1, &name, LockMode::Exclusive, &ages),
            Grant::Parked
        );
        assert_eq!(
            table.acquire(0, young, 3, &name, LockMode::Exclusive, &ages),
            Grant::Die,
            "an upgrade by a younger holder against an older shared holder dies"
        );
        table.release(young, 3, std::slice::from_ref(&name), 5, &ages);
        assert!(table.wakeups.is_empty(), "the middle one still holds it");
        table.release(middle, 2, std::slice::from_ref(&name), 10, &ages);
        assert_eq!(
            table.wakeups,
            [(old, 10)],
            "granted to the parked one once the releasing commit is durable"
        );
        assert_eq!(table.take_granted(old), std::slice::from_ref(&name));
        assert_eq!(
            table.acquire(10, old, 1, &name, LockMode::Exclusive, &ages),
            Grant::Granted
        );
        let other = LockName::of(TableId(0), &[2], 1);
        table.release(old, 1, std::slice::from_ref(&name), 20, &ages);
        assert_eq!(
            table.acquire(15, young, 3, &name, LockMode::Shared, &ages),
            Grant::WaitUntil(20),
            "the lock is free only once the commit that released it is durable"
        );
        assert_eq!(
            table.acquire(15, young, 3, &other, LockMode::Shared, &ages),
            Grant::Granted
        );
    }
}
