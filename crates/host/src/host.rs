//! The host: tables, the record cache, transaction control blocks, the lock table, and the two
//! commit paths.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kvssd_device::{BatchOp, Device, NamespaceId, NamespaceSpec, StoreMode};
use kvssd_flash::SimTime;

use crate::cache::Cache;
use crate::conventional::Conventional;
use crate::error::{HostError, Result};
use crate::locks::{Grant, LockMode, LockName, LockTable};
use crate::types::{Access, CommitPath, HostConfig, HostStats, TableId, TxnId, TxnState};

mod cleaner;
mod writes;

/// What a transaction will do to a key at commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// Store, the key known to exist (or known deleted earlier in this transaction).
    Upsert,
    /// Store only if absent (the device checks at commit).
    InsertOnly,
    /// Delete.
    Delete,
}

/// A pending write at commit: table, key, new value (`None`: delete), and how.
type PendingWrite = (TableId, Vec<u8>, Option<Vec<u8>>, Write);

/// What [`Host::write_access`] learnt: the private copy if any, whether the key exists (`None`:
/// not known without a device read that was not needed), and when it knew.
type Found = (Option<Private>, Option<bool>, SimTime);

/// A private copy: the transaction's view of a key, and its pending write.
#[derive(Debug, Clone)]
struct Private {
    value: Option<Vec<u8>>,
    write: Option<Write>,
}

/// A transaction control block.
struct Xcb {
    state: TxnState,
    /// Wait-die age: the order of the first begin (kept across restarts).
    age: u64,
    private: BTreeMap<(TableId, Vec<u8>), Private>,
    private_bytes: u64,
    /// Locks held, and the one it is parked on if any.
    locks: BTreeSet<LockName>,
}

/// A table's attributes.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub(crate) name: String,
    /// Largest value the table takes (the conventional path's slot size).
    pub(crate) value_bytes_max: usize,
    /// Its namespace on the KAML path.
    pub(crate) namespace: Option<NamespaceId>,
}

/// KAML's caching layer (§III-C, §III-D, Table II): a cache of committed records in host memory
/// and transactions with strong strict two-phase locking over a [`Device`].
///
/// Every call takes the simulated time it is issued at; calls must come in non-decreasing time
/// (the device's rule), which [`crate::sim`] guarantees for many clients. Single-threaded: for
/// many OS threads, share it as a [`crate::SharedHost`].
pub struct Host {
    device: Arc<Device>,
    config: HostConfig,
    tables: Vec<Table>,
    cache: Cache,
    locks: LockTable,
    xcbs: HashMap<TxnId, Xcb>,
    next_txn: u32,
    next_age: u64,
    conventional: Option<Conventional>,
    stats: HostStats,
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() || key.len() > kvssd_device::KEY_BYTES_MAX {
        return Err(HostError::Invalid(format!(
            "a key must be 1 to {} bytes, not {}",
            kvssd_device::KEY_BYTES_MAX,
            key.len()
        )));
    }
    Ok(())
}

fn private_bytes(key: &[u8], value: Option<&Vec<u8>>) -> u64 {
    (key.len() + value.map_or(0, Vec::len)) as u64 + crate::cache::CACHE_ENTRY_OVERHEAD_BYTES
}

impl Host {
    /// A host over `device`. The conventional path creates its `block` namespace now, or, if the
    /// device already has it (reopened after a crash or a clean close), recovers it: the
    /// committed records of its log are redone into their pages before this returns.
    pub fn open(device: Arc<Device>, config: HostConfig) -> Result<Host> {
        let conventional = match config.commit_path {
            CommitPath::Kaml => None,
            CommitPath::Conventional => {
                Some(Conventional::open(&device, config.conventional.clone())?)
            }
        };
        let mut cache = Cache::new(config.cache_bytes);
        let mut stats = HostStats::default();
        if let Some(conventional) = &conventional {
            cache.keep_evicted();
            stats.replayed_records = conventional.replayed();
        }
        Ok(Host {
            device,
            cache,
            config,
            tables: Vec::new(),
            locks: LockTable::default(),
            xcbs: HashMap::new(),
            next_txn: 1,
            next_age: 1,
            conventional,
            stats,
        })
    }

    /// The device underneath.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// Closes the host (its cache and control blocks are dropped: they hold nothing that is not
    /// on the device) and hands back the device.
    pub fn into_device(self) -> Arc<Device> {
        self.device
    }

    /// The device namespace of a table on the KAML path.
    pub fn table_namespace(&self, table: TableId) -> Result<Option<NamespaceId>> {
        Ok(self.table(table)?.namespace)
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// Creates a table whose values are at most `value_bytes_max` bytes.
    pub fn create_table(&mut self, name: &str, value_bytes_max: usize) -> Result<TableId> {
        let namespace = match self.config.commit_path {
            CommitPath::Kaml => Some(
                self.device
                    .create_namespace(NamespaceSpec::new(self.config.table_preset))?,
            ),
            CommitPath::Conventional => None,
        };
        if let Some(conventional) = &self.conventional {
            conventional.check_slot(value_bytes_max)?;
            conventional.check_table(TableId(self.tables.len() as u32), value_bytes_max)?;
        }
        self.tables.push(Table {
            name: name.to_string(),
            value_bytes_max,
            namespace,
        });
        Ok(TableId(self.tables.len() as u32 - 1))
    }

    /// Opens the table named `name` on the KAML path: the namespace of that name if the device
    /// has one (a device reopened after a crash or a clean close), else a new namespace given
    /// that name. Returns the table and whether it existed. The conventional path keeps no
    /// names on the device, only table numbers: there it is [`Host::create_table`] (tables
    /// created in the order and with the sizes they had), and the table existed if the device
    /// holds pages or log records of its number.
    pub fn open_table(&mut self, name: &str, value_bytes_max: usize) -> Result<(TableId, bool)> {
        if let Some(conventional) = &self.conventional {
            let existed =
                conventional.check_table(TableId(self.tables.len() as u32), value_bytes_max)?;
            return Ok((self.create_table(name, value_bytes_max)?, existed));
        }
        let (namespace, existed) = match self.device.namespace_by_name(name)? {
            Some(namespace) => (namespace, true),
            None => (
                self.device.create_namespace(
                    NamespaceSpec::new(self.config.table_preset).with_name(name),
                )?,
                false,
            ),
        };
        self.tables.push(Table {
            name: name.to_string(),
            value_bytes_max,
            namespace: Some(namespace),
        });
        Ok((TableId(self.tables.len() as u32 - 1), existed))
    }

    fn table(&self, table: TableId) -> Result<&Table> {
        self.tables
            .get(table.0 as usize)
            .ok_or(HostError::TableUnknown(table))
    }

    /// The table's name.
    pub fn table_name(&self, table: TableId) -> Result<&str> {
        Ok(&self.table(table)?.name)
    }

    /// Writes records outside any transaction (the initial population of a benchmark), through
    /// to the device, issued at `at`; returns when the last is done. Fills the cache as reads
    /// would.
    pub fn load(
        &mut self,
        at: SimTime,
        records: &[(TableId, Vec<u8>, Vec<u8>)],
    ) -> Result<SimTime> {
        for (table, key, value) in records {
            check_key(key)?;
            self.check_value(*table, value)?;
        }
        let done = match &mut self.conventional {
            Some(conventional) => {
                let tables = &self.tables;
                let (done, commands) = conventional.load(&self.device, at, tables, records)?;
                self.stats.device_commands += commands;
                done
            }
            None => {
                let mut done = at;
                for chunk in records.chunks(256) {
                    let operations: Vec<BatchOp> = chunk
                        .iter()
                        .map(|(table, key, value)| {
                            Ok(BatchOp::Store {
                                namespace: self.namespace(*table)?,
                                key: key.clone(),
                                value: value.clone(),
                                mode: StoreMode::Upsert,
                            })
                        })
                        .collect::<Result<_>>()?;
                    done = done.max(self.device.batch(at, &operations)?);
                    self.stats.device_commands += 1;
                }
                done
            }
        };
        for (table, key, value) in records {
            self.cache.put(*table, key, value.clone(), false);
        }
        Ok(done)
    }

    fn namespace(&self, table: TableId) -> Result<NamespaceId> {
        self.table(table)?
            .namespace
            .ok_or(HostError::TableUnknown(table))
    }

    fn check_value(&self, table: TableId, value: &[u8]) -> Result<()> {
        let max = self.table(table)?.value_bytes_max;
        if value.len() > max {
            return Err(HostError::Invalid(format!(
                "a value of table {table} is at most {max} bytes, not {}",
                value.len()
            )));
        }
        Ok(())
    }

    /// The committed value of a key outside any transaction (checks after a run), issued at
    /// `at`: from the cache, else the device. Takes no lock and changes no counter.
    pub fn read_committed(
        &mut self,
        at: SimTime,
        table: TableId,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        if let Some(value) = self.cache.peek(table, key) {
            return Ok((Some(value.to_vec()), at));
        }
        self.fetch(at, table, key)
    }

    /// Conventional path: pages that lost a record to eviction are no longer whole in memory.
    fn note_evictions(&mut self) {
        if let Some(conventional) = &mut self.conventional {
            note_evictions(&mut self.cache, conventional, &self.tables);
        }
    }

    /// Reads a key from the device (no cache).
    fn fetch(
        &mut self,
        at: SimTime,
        table: TableId,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        self.stats.device_commands += 1;
        match &mut self.conventional {
            Some(conventional) => {
                let info = self.tables[table.0 as usize].clone();
                let (records, done) =
                    conventional.read_page(&self.device, at, table, &info, key)?;
                let mut found = None;
                for (record_key, value) in records {
                    if record_key == key {
                        found = Some(value.clone());
                    }
                    self.cache.fill(table, &record_key, value);
                }
                Ok((found, done))
            }
            None => {
                let namespace = self.namespace(table)?;
                let (retrieved, done) = self.device.retrieve(at, namespace, key, None)?;
                Ok((retrieved.map(|retrieved| retrieved.value), done))
            }
        }
    }

    // ---- transactions (KAML Table II) ----

    /// TransactionBegin: allocates a control block, ACTIVE, younger than every transaction begun
    /// before it.
    pub fn begin(&mut self) -> Result<TxnId> {
        if self.xcbs.len() >= self.config.txns_max {
            return Err(HostError::TxnsExhausted(self.config.txns_max));
        }
        let txn = TxnId(self.next_txn);
        self.next_txn += 1;
        let age = self.next_age;
        self.next_age += 1;
        self.xcbs.insert(
            txn,
            Xcb {
                state: TxnState::Active,
                age,
                private: BTreeMap::new(),
                private_bytes: 0,
                locks: BTreeSet::new(),
            },
        );
        Ok(txn)
    }

    /// Runs an ABORTED transaction again: ACTIVE, nothing read or written, with its original age
    /// (so a wait-die victim cannot starve).
    pub fn restart(&mut self, txn: TxnId) -> Result<()> {
        let xcb = self.xcbs.get_mut(&txn).ok_or(HostError::TxnUnknown(txn))?;
        if xcb.state != TxnState::Aborted {
            return Err(HostError::NotEnded {
                txn,
                state: xcb.state,
                call: "restart (which needs ABORTED)",
            });
        }
        xcb.state = TxnState::Active;
        Ok(())
    }

    /// A transaction's state.
    pub fn state(&self, txn: TxnId) -> Result<TxnState> {
        Ok(self.xcb(txn)?.state)
    }

    fn xcb(&self, txn: TxnId) -> Result<&Xcb> {
        self.xcbs.get(&txn).ok_or(HostError::TxnUnknown(txn))
    }

    fn active(&self, txn: TxnId, call: &'static str) -> Result<&Xcb> {
        let xcb = self.xcb(txn)?;
        if xcb.state != TxnState::Active {
            return Err(HostError::NotActive {
                txn,
                state: xcb.state,
                call,
            });
        }
        Ok(xcb)
    }

    /// Takes `mode` on the lock covering `key`. `Ok(None)`: held; `Ok(Some(access))`: the caller
    /// must wait; `Err(Died)`: the transaction was aborted as a wait-die victim.
    fn lock(
        &mut self,
        at: SimTime,
        txn: TxnId,
        table: TableId,
        key: &[u8],
        mode: LockMode,
    ) -> Result<Option<Access<()>>> {
        let name = LockName::of(table, key, self.config.lock_granularity);
        let age = self.xcb(txn)?.age;
        let xcbs = &self.xcbs;
        let ages = |other: TxnId| xcbs.get(&other).map_or(u64::MAX, |xcb| xcb.age);
        let grant = self.locks.acquire(at, txn, age, &name, mode, &ages);
        let xcb = self.xcbs.get_mut(&txn).ok_or(HostError::TxnUnknown(txn))?;
        match grant {
            Grant::Granted => {
                xcb.locks.insert(name.clone());
                xcb.locks.extend(self.locks.take_granted(txn));
                Ok(None)
            }
            Grant::WaitUntil(until) => {
                self.stats.timed_waits += 1;
                Ok(Some(Access::WaitUntil(until)))
            }
            Grant::Parked => {
                self.stats.parks += 1;
                xcb.locks.insert(name);
                Ok(Some(Access::Parked))
            }
            Grant::Die => {
                self.stats.deaths += 1;
                self.end(at, txn, TxnState::Aborted, at);
                self.locks.wait_for(txn, &name, at);
                Err(HostError::Died { txn })
            }
        }
    }

    /// Ends a transaction: its locks released (durable at `release_at`), private copies dropped.
    /// Parked transactions that wait-die condemns as a result are aborted too, and woken (when
    /// the lock they were parked on is next released) to restart.
    fn end(&mut self, at: SimTime, txn: TxnId, state: TxnState, release_at: SimTime) {
        let mut ending = vec![(txn, state, release_at)];
        while let Some((txn, state, release_at)) = ending.pop() {
            let Some(xcb) = self.xcbs.get_mut(&txn) else {
                continue;
            };
            xcb.state = state;
            xcb.private.clear();
            xcb.private_bytes = 0;
            // A lock it is parked on is in its set too, so releasing drops the registration.
            let mut names: BTreeSet<LockName> = std::mem::take(&mut xcb.locks);
            let age = xcb.age;
            names.extend(self.locks.take_granted(txn));
            let names: Vec<LockName> = names.into_iter().collect();
            let xcbs = &self.xcbs;
            let ages = |other: TxnId| xcbs.get(&other).map_or(u64::MAX, |xcb| xcb.age);
            self.locks.release(txn, age, &names, release_at, &ages);
            for doomed in self.locks.take_doomed() {
                self.stats.deaths += 1;
                ending.push((doomed, TxnState::Aborted, at));
            }
        }
    }

    /// TransactionRead: reads a key for `txn` under a shared lock (a private copy once read):
    /// `None` if absent.
    pub fn read(
        &mut self,
        at: SimTime,
        txn: TxnId,
        table: TableId,
        key: &[u8],
    ) -> Result<Access<Option<Vec<u8>>>> {
        self.read_locked(at, txn, table, key, LockMode::Shared)
    }

    /// Reads a key the transaction means to update, taking the exclusive lock at once (SELECT
    /// ... FOR UPDATE): two transactions that read and then update the same record would
    /// otherwise both hold it shared and one would die upgrading.
    pub fn read_for_update(
        &mut self,
        at: SimTime,
        txn: TxnId,
        table: TableId,
        key: &[u8],
    ) -> Result<Access<Option<Vec<u8>>>> {
        self.read_locked(at, txn, table, key, LockMode::Exclusive)
    }

    fn read_locked(
        &mut self,
        at: SimTime,
        txn: TxnId,
        table: TableId,
        key: &[u8],
        mode: LockMode,
    ) -> Result<Access<Option<Vec<u8>>>> {
        self.active(txn, "read")?;
        check_key(key)?;
        self.table(table)?;
        if let Some(wait) = self.lock(at, txn, table, key, mode)? {
            return Ok(retype(wait));
        }
        if let Some(private) = self.xcb(txn)?.private.get(&(table, key.to_vec())) {
            return Ok(Access::Done {
                value: private.value.clone(),
                at,
            });
        }
        let (value, done) = self.current(at, table, key)?;
        self.add_private(
            txn,
            table,
            key,
            Private {
                value: value.clone(),
                write: None,
            },
        )?;
        Ok(Access::Done { value, at: done })
    }

    /// The committed value (cache, else device; a device read fills the cache).
    fn current(
        &mut self,
        at: SimTime,
        table: TableId,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        self.note_evictions();
        if let Some(conventional) = &mut self.conventional {
            if self.cache.peek(table, key).is_none() {
                let info = &self.tables[table.0 as usize];
                if conventional.page_resident(table, info, key) {
                    // Absent: its page is in memory whole.
                    return Ok((None, at));
                }
            }
        }
        if let Some(value) = self.cache.get(table, key) {
            return Ok((Some(value), at));
        }
        let (value, done) = self.fetch(at, table, key)?;
        if let Some(value) = &value {
            self.cache.fill(table, key, value.clone());
        }
        Ok((value, done))
    }

    /// Adds or replaces a private copy, within the transaction's budget.
    fn add_private(
        &mut self,
        txn: TxnId,
        table: TableId,
        key: &[u8],
        private: Private,
    ) -> Result<()> {
        let budget = self.config.private_bytes_max;
        let xcb = self.xcbs.get_mut(&txn).ok_or(HostError::TxnUnknown(txn))?;
        let old = xcb
            .private
            .get(&(table, key.to_vec()))
            .map_or(0, |old| private_bytes(key, old.value.as_ref()));
        let bytes = xcb.private_bytes - old + private_bytes(key, private.value.as_ref());
        if bytes > budget {
            return Err(HostError::OverBudget { txn, bytes, budget });
        }
        xcb.private_bytes = bytes;
        xcb.private.insert((table, key.to_vec()), private);
        Ok(())
    }

    /// Commits: on the KAML path one atomic batch of the private copies; on the conventional path
    /// one write of the central log. Once that is durable the transaction is COMMITTED, its
    /// changes are in the cache and its locks are released (at the returned time). A refused
    /// batch aborts the transaction and applies nothing.
    pub fn commit(&mut self, at: SimTime, txn: TxnId) -> Result<Access<()>> {
        self.active(txn, "commit")?;
        if let Some(conventional) = &self.conventional {
            let free_at = conventional.log_free_at();
            if free_at > at {
                self.stats.log_wait_ns += free_at - at;
                return Ok(Access::WaitUntil(free_at));
            }
        }
        let writes: Vec<PendingWrite> = self
            .xcb(txn)?
            .private
            .iter()
            .filter_map(|((table, key), private)| {
                private
                    .write
                    .map(|write| (*table, key.clone(), private.value.clone(), write))
            })
            .collect();
        let done = if writes.is_empty() {
            at
        } else {
            match self.write_commit(at, &writes) {
                Ok(done) => done,
                Err(error) => {
                    self.stats.aborts += 1;
                    self.end(at, txn, TxnState::Aborted, at);
                    return Err(error);
                }
            }
        };
        let dirty = self.conventional.is_some();
        for (table, key, value, _) in writes {
            match value {
                Some(value) => self.cache.put(table, &key, value, dirty),
                None => self.cache.remove(table, &key),
            }
        }
        self.clean_in_background(at)?;
        self.stats.commits += 1;
        self.end(at, txn, TxnState::Committed, done);
        self.locks.tidy(at);
        Ok(Access::Done {
            value: (),
            at: done,
        })
    }

    /// Makes a transaction's writes durable; returns when they are.
    fn write_commit(&mut self, at: SimTime, writes: &[PendingWrite]) -> Result<SimTime> {
        self.stats.device_commands += 1;
        if self.conventional.is_some() {
            self.stats.log_writes += 1;
            let records: Vec<crate::conventional::LogRecord<'_>> = writes
                .iter()
                .map(|(table, key, value, _)| (*table, key.as_slice(), value.as_deref()))
                .collect();
            let mut at = at;
            if let Some(conventional) = &self.conventional {
                if !conventional.log_has_room(&records)? {
                    // The ring would overwrite a record whose pages are not written: write them
                    // all first, and wait for it.
                    at = self.full_checkpoint(at)?;
                    self.stats.log_full_checkpoints += 1;
                }
            }
            if let Some(conventional) = &mut self.conventional {
                return conventional.log_commit(&self.device, at, &self.tables, &records);
            }
        }
        let operations: Vec<BatchOp> = writes
            .iter()
            .map(|(table, key, value, write)| {
                let namespace = self.namespace(*table)?;
                Ok(match (write, value) {
                    (Write::Delete, _) | (_, None) => BatchOp::Delete {
                        namespace,
                        key: key.clone(),
                    },
                    (Write::Upsert, Some(value)) => BatchOp::Store {
                        namespace,
                        key: key.clone(),
                        value: value.clone(),
                        mode: StoreMode::Upsert,
                    },
                    (Write::InsertOnly, Some(value)) => BatchOp::Store {
                        namespace,
                        key: key.clone(),
                        value: value.clone(),
                        mode: StoreMode::InsertOnly,
                    },
                })
            })
            .collect::<Result<_>>()?;
        Ok(self.device.batch(at, &operations)?)
    }

    /// Aborts: private copies discarded, locks released now. Aborting an ABORTED transaction (a
    /// wait-die victim) is allowed and does nothing.
    pub fn abort(&mut self, at: SimTime, txn: TxnId) -> Result<()> {
        let state = self.xcb(txn)?.state;
        match state {
            TxnState::Aborted => Ok(()),
            TxnState::Active => {
                self.stats.aborts += 1;
                self.end(at, txn, TxnState::Aborted, at);
                Ok(())
            }
            state => Err(HostError::NotActive {
                txn,
                state,
                call: "abort",
            }),
        }
    }

    /// TransactionFree: releases an ended transaction's control block; its id is then unknown.
    pub fn free(&mut self, txn: TxnId) -> Result<()> {
        let state = self.xcb(txn)?.state;
        if !matches!(state, TxnState::Committed | TxnState::Aborted) {
            return Err(HostError::NotEnded {
                txn,
                state,
                call: "free",
            });
        }
        self.xcbs.remove(&txn);
        Ok(())
    }

    /// Transactions woken since the last call, with the time to retry at: parked waiters whose
    /// holders released, and wait-die victims whose lock was released (they restart then).
    pub fn take_wakeups(&mut self) -> Vec<(TxnId, SimTime)> {
        std::mem::take(&mut self.locks.wakeups)
    }

    /// Activity counters.
    pub fn stats(&self) -> HostStats {
        HostStats {
            cache_hits: self.cache.hits,
            cache_misses: self.cache.misses,
            cache_evictions: self.cache.evictions,
            ..self.stats
        }
    }

    /// Empties the cache of clean entries, so later reads go to the device (tests that check
    /// what the device holds; a cold start).
    pub fn evict_clean(&mut self) {
        self.cache.evict_clean();
        self.note_evictions();
    }

    /// Bytes the cache holds.
    pub fn cache_used_bytes(&self) -> u64 {
        self.cache.used_bytes()
    }

    /// Every lock's holders and waiters, one line each (debugging).
    pub fn describe_locks(&self) -> String {
        self.locks.describe()
    }

    /// Locks in the lock table (held, waited for, or releasing).
    pub fn locks_in_table(&self) -> usize {
        self.locks.len()
    }
}

/// Tells the conventional path which pages lost a record to eviction since the last call.
fn note_evictions(cache: &mut Cache, conventional: &mut Conventional, tables: &[Table]) {
    for (table, key) in cache.take_evicted() {
        if let Some(info) = tables.get(table.0 as usize) {
            conventional.evicted(table, info, &key);
        }
    }
}

fn retype<T>(wait: Access<()>) -> Access<T> {
    match wait {
        Access::WaitUntil(until) => Access::WaitUntil(until),
        Access::Parked | Access::Done { .. } => Access::Parked,
    }
}
