//! Real threads: one [`Host`] shared by many OS threads, each running transactions at once
//! against one device (file media, where the wall clock is what counts).
//!
//! [`SharedHost`] is `Send + Sync`; share it with `Arc`. Each thread runs a transaction as a
//! [`Program`] (the same programs [`crate::sim`] runs on the virtual clock) with
//! [`SharedHost::run`], which blocks until the transaction has committed (durably) or aborted.
//!
//! **What is serialised.** One mutex guards the host (its cache, lock table and control blocks)
//! and every host call runs inside it, including the device command the call issues (a read on
//! a cache miss, a commit's batch, which on file media returns only once the write-ahead log is
//! synced). The device itself serialises every command behind its own mutex as well
//! ([`kvssd_device::Device`]), so with real threads commands reach the flash one at a time, in
//! the order they take the lock. What runs in parallel is everything between calls: the
//! application's work, and above all the waiting — a thread blocked on a record lock sleeps on a
//! condition variable and gives the mutex up, so other transactions run meanwhile.
//!
//! **Lock waits.** SS2PL and wait-die exactly as on the virtual clock: a request that conflicts
//! with younger holders is parked, and the thread sleeps on the condition variable until a
//! release names its transaction; a request that would wait for an older holder dies: the
//! thread sleeps until the lock it died on is released, then restarts the program with the
//! transaction's original age. So every wait is of an older transaction for younger ones, no
//! thread can wait in a cycle, and no timeout is needed.
//!
//! **Time.** The host's calls still take a simulated time (the device's rule: non-decreasing).
//! A shared host issues every call at one clock, the latest completion it has seen, so calls
//! reach the device in non-decreasing time whatever the threads do. On file media opened with
//! timing off (as `kvssd`'s image tools open them) that clock stays at zero.

use std::collections::HashSet;
use std::sync::{Condvar, Mutex, MutexGuard};

use kvssd_device::DeviceError;
use kvssd_flash::SimTime;

use crate::sim::{Program, Step};
use crate::{Access, Host, HostError, HostStats, Result, TxnId, TxnState};

/// A host many threads use at once (see the module's documentation).
pub struct SharedHost {
    inner: Mutex<Inner>,
    woken: Condvar,
}

struct Inner {
    host: Host,
    /// The time every call is issued at: the latest completion seen.
    clock: SimTime,
    /// Transactions a release has woken and whose thread has not yet seen it.
    woken: HashSet<TxnId>,
}

impl Inner {
    /// Moves the host's wakeups into the set; true if there were any.
    fn collect_wakeups(&mut self) -> bool {
        let wakeups = self.host.take_wakeups();
        let any = !wakeups.is_empty();
        self.woken.extend(wakeups.into_iter().map(|(txn, _)| txn));
        any
    }
}

/// Aborts and frees a transaction whose thread unwinds (a panicking program).
struct AbortOnUnwind<'a> {
    shared: &'a SharedHost,
    txn: TxnId,
}

impl Drop for AbortOnUnwind<'_> {
    fn drop(&mut self) {
        let txn = self.txn;
        // Nothing to report to: the thread is unwinding already.
        let _ = self.shared.with_host(|host, at| {
            if host.state(txn)? == TxnState::Active {
                host.abort(at, txn)?;
            }
            Ok((host.free(txn)?, at))
        });
    }
}

/// How one transaction went under [`SharedHost::run`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOutcome {
    /// True if it committed (durably); false if its program chose [`Step::Abort`].
    pub committed: bool,
    /// The results of its steps in its last (successful) attempt.
    pub results: Vec<Option<Vec<u8>>>,
    /// Times it was a wait-die victim and restarted.
    pub restarts: u64,
    /// Lock waits: steps that blocked (parked, or waiting for a releasing commit).
    pub lock_waits: u64,
}

fn poisoned<T>(_: T) -> HostError {
    HostError::Device(DeviceError::Poisoned)
}

impl SharedHost {
    /// Shares a host (its tables created and loaded, or to be created through
    /// [`SharedHost::with_host`]).
    pub fn new(host: Host) -> SharedHost {
        SharedHost {
            inner: Mutex::new(Inner {
                host,
                clock: 0,
                woken: HashSet::new(),
            }),
            woken: Condvar::new(),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>> {
        self.inner.lock().map_err(poisoned)
    }

    /// Runs `work` on the host alone (no transaction of another thread is mid-call), with the
    /// shared clock; `work` returns its result and the time it finished, which advances the
    /// clock. For setup, loading and checks.
    pub fn with_host<R>(
        &self,
        work: impl FnOnce(&mut Host, SimTime) -> Result<(R, SimTime)>,
    ) -> Result<R> {
        let mut inner = self.lock()?;
        let at = inner.clock;
        let result = work(&mut inner.host, at);
        if inner.collect_wakeups() {
            self.woken.notify_all();
        }
        let (value, done) = result?;
        inner.clock = inner.clock.max(done);
        Ok(value)
    }

    /// The host's counters.
    pub fn stats(&self) -> Result<HostStats> {
        Ok(self.lock()?.host.stats())
    }

    /// Ends the sharing and hands the host back.
    pub fn into_host(self) -> Result<Host> {
        Ok(self.inner.into_inner().map_err(poisoned)?.host)
    }

    /// Runs one transaction to its end: begins it, plays `program`'s steps (blocking on lock
    /// waits), and returns once it has committed durably or aborted by choice. A wait-die victim
    /// is restarted (same age, the program re-run from its start) until it gets through. Any
    /// other error aborts the transaction and is returned.
    pub fn run(&self, program: &mut dyn Program) -> Result<RunOutcome> {
        let txn = self.with_host(|host, at| Ok((host.begin()?, at)))?;
        // A program that panics must not leave its locks held: other threads would sleep on
        // them for ever.
        let guard = AbortOnUnwind { shared: self, txn };
        let mut outcome = RunOutcome::default();
        let result = self.run_txn(txn, program, &mut outcome);
        std::mem::forget(guard);
        result.map(|()| outcome)
    }

    fn run_txn(
        &self,
        txn: TxnId,
        program: &mut dyn Program,
        outcome: &mut RunOutcome,
    ) -> Result<()> {
        loop {
            let step = program.step(&outcome.results);
            match self.step(txn, &step, &mut outcome.lock_waits) {
                Ok(value) => match step {
                    Step::Commit | Step::Abort => {
                        outcome.committed = step == Step::Commit;
                        self.with_host(|host, at| Ok((host.free(txn)?, at)))?;
                        return Ok(());
                    }
                    _ => outcome.results.push(value),
                },
                Err(HostError::Died { .. }) => {
                    // `step` returned once the thread may restart.
                    self.with_host(|host, at| Ok((host.restart(txn)?, at)))?;
                    outcome.results.clear();
                    outcome.restarts += 1;
                }
                Err(error) => {
                    // Whatever happens to the cleanup, the error that ended it is the news.
                    let _ = self.with_host(|host, at| {
                        host.abort(at, txn)?;
                        Ok((host.free(txn)?, at))
                    });
                    return Err(error);
                }
            }
        }
    }

    /// Plays one step, blocking while it waits for a lock. `Err(Died)` once the transaction is a
    /// wait-die victim and may restart (its lock released).
    fn step(&self, txn: TxnId, step: &Step, lock_waits: &mut u64) -> Result<Option<Vec<u8>>> {
        let mut inner = self.lock()?;
        // A wakeup from an earlier wait is spent.
        inner.woken.remove(&txn);
        loop {
            if inner.host.state(txn)? == TxnState::Aborted {
                // Condemned by wait-die while parked: woken when its lock was released.
                return Err(HostError::Died { txn });
            }
            let at = inner.clock;
            let host = &mut inner.host;
            let call = match step {
                Step::Read(table, key) => host.read(at, txn, *table, key),
                Step::ReadForUpdate(table, key) => host.read_for_update(at, txn, *table, key),
                Step::Update(table, key, value) => {
                    host.update(at, txn, *table, key, value).map(none)
                }
                Step::Insert(table, key, value) => {
                    host.insert(at, txn, *table, key, value).map(none)
                }
                Step::Delete(table, key) => host.delete(at, txn, *table, key).map(none),
                Step::Commit => host.commit(at, txn).map(none),
                Step::Abort => host
                    .abort(at, txn)
                    .map(|()| Access::Done { value: None, at }),
            };
            if inner.collect_wakeups() {
                self.woken.notify_all();
            }
            match call {
                Ok(Access::Done { value, at }) => {
                    inner.clock = inner.clock.max(at);
                    return Ok(value);
                }
                Ok(Access::WaitUntil(until)) => {
                    // The releasing commit is durable at `until`: move the clock there, retry.
                    *lock_waits += 1;
                    inner.clock = inner.clock.max(until);
                }
                Ok(Access::Parked) => {
                    *lock_waits += 1;
                    inner = self.wait_woken(inner, txn)?;
                }
                Err(HostError::Died { txn }) => {
                    inner = self.wait_woken(inner, txn)?;
                    drop(inner);
                    return Err(HostError::Died { txn });
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Sleeps (the mutex given up) until a release names `txn`.
    fn wait_woken<'a>(
        &'a self,
        mut inner: MutexGuard<'a, Inner>,
        txn: TxnId,
    ) -> Result<MutexGuard<'a, Inner>> {
        while !inner.woken.remove(&txn) {
            inner = self.woken.wait(inner).map_err(poisoned)?;
        }
        Ok(inner)
    }
}

fn none(access: Access<()>) -> Access<Option<Vec<u8>>> {
    match access {
        Access::Done { at, .. } => Access::Done { value: None, at },
        Access::WaitUntil(until) => Access::WaitUntil(until),
        Access::Parked => Access::Parked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_host_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<SharedHost>();
    }
}
