//! Atomic batches: every operation checked before any is applied, then staged where nothing can
//! refuse it.

use std::collections::BTreeMap;

use kvssd_flash::SimTime;

use super::{check_key, Core};
use crate::{BatchOp, DeviceError, NamespaceId, Result, StoreMode};

impl Core {
    /// Applies a batch; if its namespaces could not free the blocks it needs from their own
    /// garbage, collects other namespaces' and tries once more (a refused batch changed nothing:
    /// its checks and the flushes that make room in L0 change no key's value). A new namespace
    /// holds no garbage of its own, and its first write needs room for its whole index.
    pub(super) fn batch(&mut self, at: SimTime, operations: &[BatchOp]) -> Result<SimTime> {
        match self.batch_once(at, operations) {
            Err(error) if is_capacity(&error) => {
                let t = self.device_gc(at, true)?;
                self.batch_once(t, operations)
            }
            other => other,
        }
    }

    fn batch_once(&mut self, at: SimTime, operations: &[BatchOp]) -> Result<SimTime> {
        let refuse = |index: usize, error: DeviceError| DeviceError::BatchOperation {
            index,
            source: Box::new(error),
        };
        if operations.len() > self.config.batch_operations_max {
            return Err(DeviceError::BatchTooLarge {
                len: operations.len(),
                max: self.config.batch_operations_max,
            });
        }
        // 1. Limits and namespaces.
        for (index, operation) in operations.iter().enumerate() {
            let (namespace, key) = match operation {
                BatchOp::Store {
                    namespace,
                    key,
                    value,
                    ..
                } => {
                    self.check_value(value).map_err(|e| refuse(index, e))?;
                    (*namespace, key)
                }
                BatchOp::Delete { namespace, key } => (*namespace, key),
            };
            check_key(key).map_err(|e| refuse(index, e))?;
            if !self.namespaces.contains_key(&namespace.0) {
                return Err(refuse(index, DeviceError::NamespaceUnknown(namespace)));
            }
        }
        // 2. Presence conditions, each seeing the batch's earlier operations.
        let mut t = at;
        let mut overlay: BTreeMap<(u32, &[u8]), bool> = BTreeMap::new();
        for (index, operation) in operations.iter().enumerate() {
            match operation {
                BatchOp::Store {
                    namespace,
                    key,
                    mode,
                    ..
                } => {
                    if *mode != StoreMode::Upsert {
                        let present = match overlay.get(&(namespace.0, key.as_slice())) {
                            Some(&present) => present,
                            None => {
                                let (space, engine) = self.split(*namespace)?;
                                let (present, done) = engine.contains(space, t, key)?;
                                t = done;
                                present
                            }
                        };
                        match (mode, present) {
                            (StoreMode::UpdateOnly, false) => {
                                return Err(refuse(index, DeviceError::KeyMissing))
                            }
                            (StoreMode::InsertOnly, true) => {
                                return Err(refuse(index, DeviceError::KeyExists))
                            }
                            _ => {}
                        }
                    }
                    overlay.insert((namespace.0, key.as_slice()), true);
                }
                BatchOp::Delete { namespace, key } => {
                    overlay.insert((namespace.0, key.as_slice()), false);
                }
            }
        }
        // 3. Room in each L0 for its part of the batch (flushing first changes no key's value).
        let mut l0_share: BTreeMap<u32, u64> = BTreeMap::new();
        for operation in operations {
            let (namespace, key, value) = operation.parts();
            let bytes = match self.namespaces.get(&namespace.0) {
                Some(found) => found.engine.staged_bytes(key, value),
                None => return Err(DeviceError::NamespaceUnknown(namespace)),
            };
            *l0_share.entry(namespace.0).or_insert(0) += bytes;
        }
        for (&namespace, &bytes) in &l0_share {
            let (space, engine) = self.split(NamespaceId(namespace))?;
            t = engine.prepare_stage(space, t, bytes)?;
        }
        // 4. Capacity and quotas, counting the batch's earlier stores.
        let mut staged_device = 0u64;
        let mut staged_namespace: BTreeMap<u32, u64> = BTreeMap::new();
        for (index, operation) in operations.iter().enumerate() {
            let BatchOp::Store {
                namespace,
                key,
                value,
                ..
            } = operation
            else {
                continue;
            };
            let staged = staged_namespace.entry(namespace.0).or_insert(0);
            self.check_quota(*namespace, key, value.len(), *staged)
                .map_err(|e| refuse(index, e))?;
            let footprint = self.space.record_footprint(key.len(), value.len());
            *staged += footprint;
            let engine = match self.namespaces.get(&namespace.0) {
                Some(found) => &found.engine,
                None => return Err(refuse(index, DeviceError::NamespaceUnknown(*namespace))),
            };
            engine
                .admit_put(&self.space, key, value.len(), staged_device)
                .map_err(|e| refuse(index, e.into()))?;
            staged_device += footprint;
        }
        // The record is durable (as the sync policy says) before anything is applied; from here
        // on nothing can refuse the batch.
        t = self.log_operations(t, operations)?;
        // 5. Apply: staging into L0 cannot fail.
        for operation in operations {
            let (namespace, key, value) = operation.parts();
            if let Some(found) = self.namespaces.get_mut(&namespace.0) {
                found.engine.stage(key, value);
            }
        }
        // 6. Flush what grew past its size; GC.
        for &namespace in l0_share.keys() {
            let space = &mut self.space;
            if let Some(found) = self.namespaces.get_mut(&namespace) {
                t = found.engine.settle(space, t)?;
            }
        }
        let t = self.gc_after_command(t)?;
        self.after_logged_command(t)
    }
}

/// Whether a command was refused for want of room (alone or for one of a batch's operations).
fn is_capacity(error: &DeviceError) -> bool {
    match error {
        DeviceError::CapacityExceeded(_) => true,
        DeviceError::BatchOperation { source, .. } => is_capacity(source),
        _ => false,
    }
}
