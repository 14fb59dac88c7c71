//! Point commands (store, retrieve, delete, exist) with their checks, and the device-wide GC that
//! collects any namespace's garbage when one runs short.

use std::collections::BTreeSet;

use kvssd_engine::{check_record_key, Engine, EngineError, Located};
use kvssd_flash::{Lane, Purpose, SimTime};
use kvssd_space::{DetachedRecord, RecordRead, Space};

use super::{check_key, Core, Namespace};
use crate::{
    BatchOp, ByteRange, DeviceError, NamespaceId, Pairs, Result, Retrieved, StoreMode,
    SCAN_PAIRS_MAX,
};

impl Core {
    pub(super) fn namespace(&mut self, id: NamespaceId) -> Result<&mut Namespace> {
        self.namespaces
            .get_mut(&id.0)
            .ok_or(DeviceError::NamespaceUnknown(id))
    }

    pub(super) fn check_value(&self, value: &[u8]) -> Result<()> {
        if value.len() > self.value_bytes_max {
            return Err(DeviceError::ValueTooLarge {
                len: value.len(),
                max: self.value_bytes_max,
            });
        }
        if self.periodic_values_only && !kvssd_flash::is_periodic(value) {
            return Err(DeviceError::ValueNotPeriodic { len: value.len() });
        }
        Ok(())
    }

    /// Refuses a store that would take the namespace past its quota.
    pub(super) fn check_quota(
        &self,
        id: NamespaceId,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()> {
        let Some(namespace) = self.namespaces.get(&id.0) else {
            return Err(DeviceError::NamespaceUnknown(id));
        };
        let Some(quota_bytes) = namespace.spec.quota_bytes else {
            return Ok(());
        };
        let footprint = self.space.record_footprint(key.len(), value_len);
        let used = self.space.namespace_valid_bytes(id.0) + namespace.engine.staged_dram_bytes();
        if used + staged_bytes + footprint > quota_bytes {
            return Err(DeviceError::QuotaExceeded {
                namespace: id,
                quota_bytes,
            });
        }
        Ok(())
    }

    pub(super) fn check_mode(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        key: &[u8],
        mode: StoreMode,
    ) -> Result<SimTime> {
        if mode == StoreMode::Upsert {
            return Ok(at);
        }
        let (space, engine) = self.split(id)?;
        let (present, t) = engine.contains(space, at, key)?;
        match (mode, present) {
            (StoreMode::UpdateOnly, false) => Err(DeviceError::KeyMissing),
            (StoreMode::InsertOnly, true) => Err(DeviceError::KeyExists),
            _ => Ok(t),
        }
    }

    pub(super) fn store(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        key: &[u8],
        value: &[u8],
        mode: StoreMode,
    ) -> Result<SimTime> {
        if self.journal.is_some() {
            let operation = BatchOp::Store {
                namespace: id,
                key: key.to_vec(),
                value: value.to_vec(),
                mode,
            };
            return self.logged_single(at, operation);
        }
        check_key(key)?;
        self.check_value(value)?;
        self.namespace(id)?;
        let t = self.check_mode(at, id, key, mode)?;
        self.check_quota(id, key, value.len(), 0)?;
        let first = {
            let (space, engine) = self.split(id)?;
            engine.put(space, t, key, value)
        };
        let t = match first {
            Ok(t) => t,
            // The namespace could not free enough of its own blocks: collect other namespaces'
            // garbage, then try once more (a refused put changed nothing).
            Err(EngineError::CapacityExceeded(_)) => {
                let t = self.device_gc(t, true)?;
                let (space, engine) = self.split(id)?;
                engine.put(space, t, key, value)?
            }
            Err(error) => return Err(error.into()),
        };
        self.device_gc(t, false)
    }

    /// The space and a namespace's index, borrowed together.
    pub(super) fn split(&mut self, id: NamespaceId) -> Result<(&mut Space, &mut dyn Engine)> {
        let engine = match self.namespaces.get_mut(&id.0) {
            Some(namespace) => namespace.engine.as_mut(),
            None => return Err(DeviceError::NamespaceUnknown(id)),
        };
        Ok((&mut self.space, engine))
    }

    /// Collects victims of any namespace while free blocks are below the device-wide threshold
    /// (or, when `eager`, while any namespace offers one and the pool is below twice that), as a
    /// job of the controller's background thread.
    pub(super) fn device_gc(&mut self, at: SimTime, eager: bool) -> Result<SimTime> {
        self.space.begin_background(at, Lane::Gc);
        let result = self.collect_garbage(at, eager, u64::MAX);
        self.space.end_background();
        Ok(result?.0)
    }

    /// After a command: [`Core::device_gc`] while free blocks are below the device-wide
    /// threshold; with the writer thread running, only a note for it to collect once the
    /// lock is released ([`Device::after_command`]). A command's engine still collects itself
    /// when its own threshold, below the device's, is reached first.
    pub(super) fn gc_after_command(&mut self, at: SimTime) -> Result<SimTime> {
        if self.gc_on_thread {
            self.gc_wanted |= self.space.free_blocks() < self.config.gc_threshold_blocks;
            return Ok(at);
        }
        self.device_gc(at, false)
    }

    /// One victim of device-wide GC, for the writer thread: `None` if free blocks are at
    /// the threshold or no namespace offers a victim, else when it was collected.
    pub(super) fn collect_one_victim(&mut self, at: SimTime) -> Result<Option<SimTime>> {
        if self.space.free_blocks() >= self.config.gc_threshold_blocks {
            return Ok(None);
        }
        self.space.begin_background(at, Lane::Gc);
        let result = self.collect_garbage(at, false, 1);
        self.space.end_background();
        let (t, victims) = result?;
        Ok((victims > 0).then_some(t))
    }

    /// Collects up to `victims_max` victims; returns when it finished and how many it took.
    fn collect_garbage(
        &mut self,
        at: SimTime,
        eager: bool,
        victims_max: u64,
    ) -> Result<(SimTime, u64)> {
        let mut t = at;
        let mut victims = 0;
        let target = if eager {
            2 * self.config.gc_threshold_blocks
        } else {
            self.config.gc_threshold_blocks
        };
        let rounds_max = self.space.geometry().blocks_total();
        // Namespaces whose candidate could not be relocated this time.
        let mut skipped: BTreeSet<u32> = BTreeSet::new();
        for _ in 0..rounds_max {
            if self.space.free_blocks() >= target || victims >= victims_max {
                break;
            }
            // The victim with the least valid data among those each namespace's own policy
            // accepts (pink only takes a data block L0 can absorb).
            let mut best: Option<(u64, u32, u64)> = None;
            for (&id, namespace) in &self.namespaces {
                if skipped.contains(&id) {
                    continue;
                }
                if let Some(block) = namespace.engine.gc_candidate(&self.space) {
                    let valid = self.space.block_valid_bytes(block);
                    if best.is_none_or(|(_, _, best_valid)| valid < best_valid) {
                        best = Some((block, id, valid));
                    }
                }
            }
            let Some((block, id, _)) = best else { break };
            let space = &mut self.space;
            let Some(namespace) = self.namespaces.get_mut(&id) else {
                break;
            };
            match namespace.engine.collect_victim(space, t, block)? {
                Some(done) => {
                    t = done;
                    self.device_gc_victims += 1;
                    victims += 1;
                }
                None => {
                    skipped.insert(id);
                }
            }
        }
        Ok((t, victims))
    }

    pub(super) fn retrieve(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        key: &[u8],
        range: Option<ByteRange>,
    ) -> Result<(Option<Retrieved>, SimTime)> {
        check_key(key)?;
        let (space, engine) = self.split(id)?;
        let (value, t) = engine.get(space, at, key)?;
        Ok((value.map(|value| cut(value, range)).transpose()?, t))
    }

    /// A retrieve on untimed file media: the index is searched here, under the device's lock,
    /// and a value on flash is left to read after it is released ([`Retrieval::Pending`]).
    pub(super) fn retrieve_detached(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        key: &[u8],
        range: Option<ByteRange>,
    ) -> Result<Retrieval> {
        check_key(key)?;
        let (space, engine) = self.split(id)?;
        let (located, t) = engine.locate(space, at, key)?;
        let (pointer, value_len) = match located {
            Located::Value(value) => {
                return Ok(Retrieval::Done(
                    value.map(|value| cut(value, range)).transpose()?,
                    t,
                ))
            }
            Located::Record { pointer, value_len } => (pointer, value_len),
        };
        match space.read_record_detached(
            t,
            pointer,
            key.len(),
            value_len as usize,
            Purpose::UserData,
        )? {
            RecordRead::Detached(record, done) => Ok(Retrieval::Pending(record, done)),
            RecordRead::Ready(record, done) => {
                check_record_key(key, &record.key, pointer)?;
                Ok(Retrieval::Done(Some(cut(record.value, range)?), done))
            }
        }
    }

    pub(super) fn delete(&mut self, at: SimTime, id: NamespaceId, key: &[u8]) -> Result<SimTime> {
        if self.journal.is_some() {
            let operation = BatchOp::Delete {
                namespace: id,
                key: key.to_vec(),
            };
            return self.logged_single(at, operation);
        }
        check_key(key)?;
        let (space, engine) = self.split(id)?;
        let t = match engine.delete(space, at, key) {
            Ok(t) => t,
            // As for stores: collect other namespaces' garbage and try once more.
            Err(EngineError::CapacityExceeded(_)) => {
                let t = self.device_gc(at, true)?;
                let (space, engine) = self.split(id)?;
                engine.delete(space, t, key)?
            }
            Err(error) => return Err(error.into()),
        };
        self.device_gc(t, false)
    }

    /// A scan's checks: its start key, its length, and a namespace that keeps key order.
    fn check_scan(&mut self, id: NamespaceId, start: &[u8], count: usize) -> Result<()> {
        check_key(start)?;
        if count > SCAN_PAIRS_MAX {
            return Err(DeviceError::ScanTooLong {
                count,
                max: SCAN_PAIRS_MAX,
            });
        }
        let preset = self.namespace(id)?.spec.preset;
        if !preset.supports_iterators() {
            return Err(DeviceError::ScansUnsupported(preset.name().to_string()));
        }
        Ok(())
    }

    pub(super) fn scan(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        start: &[u8],
        count: usize,
    ) -> Result<(Pairs, SimTime)> {
        self.check_scan(id, start, count)?;
        let (space, engine) = self.split(id)?;
        Ok(engine.scan(space, at, start, count)?)
    }

    /// A scan on untimed file media: the pairs are picked here, under the device's lock, with
    /// their values' page reads issued; the reads run after it is released
    /// ([`ScanRetrieval::finish`]).
    pub(super) fn scan_detached(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        start: &[u8],
        count: usize,
    ) -> Result<ScanRetrieval> {
        self.check_scan(id, start, count)?;
        let (space, engine) = self.split(id)?;
        let (located, mut t) = engine.scan_locate(space, at, start, count)?;
        let issue = t;
        let mut pairs = Vec::with_capacity(located.len());
        for (key, found) in located {
            let value = match found {
                Located::Value(value) => PendingValue::Ready(value.unwrap_or_default()),
                Located::Record { pointer, value_len } => {
                    match space.read_record_detached(
                        issue,
                        pointer,
                        key.len(),
                        value_len as usize,
                        Purpose::UserData,
                    )? {
                        RecordRead::Ready(record, done) => {
                            t = t.max(done);
                            PendingValue::Ready(record.value)
                        }
                        RecordRead::Detached(record, done) => {
                            t = t.max(done);
                            PendingValue::Read(record)
                        }
                    }
                }
            };
            pairs.push((key, value));
        }
        Ok(ScanRetrieval { pairs, done: t })
    }

    pub(super) fn prefetch_gets(&mut self, id: NamespaceId, keys: &[&[u8]]) -> Result<bool> {
        let (space, engine) = self.split(id)?;
        Ok(engine.prefetch_gets(space, keys))
    }

    pub(super) fn exist(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        keys: &[&[u8]],
    ) -> Result<(Vec<bool>, SimTime)> {
        for key in keys {
            check_key(key)?;
        }
        let (space, engine) = self.split(id)?;
        let mut t = at;
        let mut answers = Vec::with_capacity(keys.len());
        for key in keys {
            let (present, done) = engine.contains(space, t, key)?;
            t = done;
            answers.push(present);
        }
        Ok((answers, t))
    }
}

/// What [`Core::retrieve_detached`] left to do.
pub(super) enum Retrieval {
    /// The answer.
    Done(Option<Retrieved>, SimTime),
    /// A record to read without the lock; its key must be the key asked for. If the read
    /// reports nothing, or another key, retrieve again under the lock.
    Pending(DetachedRecord, SimTime),
}

/// The part of a value a retrieve asked for, with the whole value's length.
pub(super) fn cut(value: Vec<u8>, range: Option<ByteRange>) -> Result<Retrieved> {
    let value_len = value.len();
    let value = match range {
        None => value,
        Some(ByteRange { offset, len }) => {
            let end = offset.checked_add(len).filter(|&end| end <= value_len);
            let Some(end) = end else {
                return Err(DeviceError::RangeOutsideValue {
                    offset,
                    len,
                    value_len,
                });
            };
            value[offset..end].to_vec()
        }
    };
    Ok(Retrieved { value, value_len })
}

/// A scan's value, read or to read.
enum PendingValue {
    Ready(Vec<u8>),
    Read(DetachedRecord),
}

/// A scan whose value reads run without the device's lock.
pub(super) struct ScanRetrieval {
    pairs: Vec<(Vec<u8>, PendingValue)>,
    done: SimTime,
}

impl ScanRetrieval {
    /// Reads the values: the pairs, or `None` if a read must be made again under the lock (a
    /// page erased since the scan, a checksum that failed, a record of another key).
    ///
    /// The values' reads run together ([`DetachedRecord::finish_values`]): values that one flush
    /// wrote side by side, in key order, come in one `pread`.
    pub(super) fn finish(self) -> Result<Option<(Pairs, SimTime)>> {
        let reads: Vec<(&DetachedRecord, &[u8])> = self
            .pairs
            .iter()
            .filter_map(|(key, value)| match value {
                PendingValue::Read(record) => Some((record, key.as_slice())),
                PendingValue::Ready(_) => None,
            })
            .collect();
        let mut read = DetachedRecord::finish_values(&reads)?.into_iter();
        drop(reads);
        let mut out = Vec::with_capacity(self.pairs.len());
        for (key, value) in self.pairs {
            let value = match value {
                PendingValue::Ready(value) => value,
                PendingValue::Read(_) => match read.next().flatten() {
                    Some(value) => value,
                    None => return Ok(None),
                },
            };
            out.push((key, value));
        }
        Ok(Some((out, self.done)))
    }
}
