//! Iterators over snapshots: open, seek, next, close, and what an open one holds.

use kvssd_engine::SnapshotIter;
use kvssd_flash::SimTime;

use super::{check_bound, Core, OpenIterator};
use crate::{
    DeviceError, IterOptions, IterStart, IteratorId, IteratorInfo, NamespaceId, NextBatch, Result,
    PREFETCH_DEGREE_MAX,
};

impl Core {
    pub(super) fn iter_open(
        &mut self,
        at: SimTime,
        id: NamespaceId,
        options: IterOptions,
    ) -> Result<(IteratorId, SimTime)> {
        let (start, prefix) = match &options.start {
            IterStart::Key(key) => (key.as_slice(), &[][..]),
            IterStart::Prefix(prefix) => (prefix.as_slice(), prefix.as_slice()),
        };
        check_bound(start)?;
        if options.prefetch_degree > PREFETCH_DEGREE_MAX {
            return Err(DeviceError::PrefetchDegreeTooLarge {
                degree: options.prefetch_degree,
                max: PREFETCH_DEGREE_MAX,
            });
        }
        let namespace = self.namespace(id)?;
        if !namespace.spec.preset.supports_iterators() {
            return Err(DeviceError::IteratorsUnsupported(
                namespace.spec.preset.name().to_string(),
            ));
        }
        if self.iterators.len() >= self.config.iterators_open_max {
            return Err(DeviceError::IteratorsExhausted {
                max: self.config.iterators_open_max,
            });
        }
        let snapshot = self.namespace(id)?.engine.snapshot()?;
        let token = self.space.protect(id.0);
        let mut iter = SnapshotIter::new(
            snapshot,
            prefix,
            options.keys_only,
            options.prefetch_degree,
            options.index_prefetch,
        );
        let t = match iter.seek(&mut self.space, at, start) {
            Ok(t) => t,
            Err(error) => {
                self.space.unprotect(id.0, token);
                return Err(error.into());
            }
        };
        let iterator = self.next_iterator;
        self.next_iterator += 1;
        self.iterators.insert(
            iterator,
            OpenIterator {
                namespace: id.0,
                iter,
                token,
            },
        );
        Ok((IteratorId(iterator), t))
    }

    pub(super) fn open_iterator(&mut self, id: IteratorId) -> Result<&mut OpenIterator> {
        if self.orphaned.contains(&id.0) {
            return Err(DeviceError::IteratorNamespaceDeleted(id));
        }
        self.iterators
            .get_mut(&id.0)
            .ok_or(DeviceError::IteratorUnknown(id))
    }

    pub(super) fn iter_seek(&mut self, at: SimTime, id: IteratorId, key: &[u8]) -> Result<SimTime> {
        check_bound(key)?;
        self.open_iterator(id)?;
        let space = &mut self.space;
        let Some(open) = self.iterators.get_mut(&id.0) else {
            return Err(DeviceError::IteratorUnknown(id));
        };
        Ok(open.iter.seek(space, at, key)?)
    }

    pub(super) fn iter_next(
        &mut self,
        at: SimTime,
        id: IteratorId,
        byte_budget: usize,
    ) -> Result<(NextBatch, SimTime)> {
        self.open_iterator(id)?;
        let space = &mut self.space;
        let Some(open) = self.iterators.get_mut(&id.0) else {
            return Err(DeviceError::IteratorUnknown(id));
        };
        let (entries, t) = open.iter.next(space, at, byte_budget)?;
        Ok((
            NextBatch {
                entries,
                end: open.iter.is_finished(),
            },
            t,
        ))
    }

    pub(super) fn iter_close(&mut self, id: IteratorId) -> Result<()> {
        if self.orphaned.remove(&id.0) {
            return Ok(());
        }
        let open = self
            .iterators
            .remove(&id.0)
            .ok_or(DeviceError::IteratorUnknown(id))?;
        self.space.unprotect(open.namespace, open.token);
        Ok(())
    }

    pub(super) fn iter_info(&mut self, id: IteratorId) -> Result<IteratorInfo> {
        self.open_iterator(id)?;
        let Some(open) = self.iterators.get(&id.0) else {
            return Err(DeviceError::IteratorUnknown(id));
        };
        let Some(namespace) = self.namespaces.get(&open.namespace) else {
            return Err(DeviceError::IteratorUnknown(id));
        };
        Ok(IteratorInfo {
            namespace: NamespaceId(open.namespace),
            snapshot_dram_bytes: namespace.engine.snapshot_dram_bytes(open.iter.snapshot()),
            stats: open.iter.stats(),
        })
    }
}
