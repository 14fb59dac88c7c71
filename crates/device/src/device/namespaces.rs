//! Namespace commands: create (opening or restoring the preset's index), delete, list.

use kvssd_engine::{Engine, EngineError};
use kvssd_flash::SimTime;

use super::{Core, Namespace, OpenIterator};
use crate::durability::CheckpointError;
use crate::{
    DeviceError, NamespaceId, NamespaceInfo, NamespaceSpec, PresetKind, Result,
    NAMESPACE_NAME_BYTES_MAX,
};

/// Names are what C programs pass as strings: 1 to 255 bytes, no NUL byte.
fn check_namespace_name(name: &str) -> Result<()> {
    let problem = if name.is_empty() {
        "it is empty".to_string()
    } else if name.len() > NAMESPACE_NAME_BYTES_MAX {
        format!(
            "it is {} bytes, more than {NAMESPACE_NAME_BYTES_MAX}",
            name.len()
        )
    } else if name.contains('\0') {
        "it holds a NUL byte".to_string()
    } else {
        return Ok(());
    };
    Err(DeviceError::NamespaceNameInvalid(problem))
}

impl Core {
    pub(super) fn create_namespace(&mut self, spec: NamespaceSpec) -> Result<NamespaceId> {
        if self.namespaces.len() >= self.config.namespaces_max {
            return Err(DeviceError::NamespacesExhausted {
                max: self.config.namespaces_max,
            });
        }
        if spec.quota_bytes == Some(0) {
            return Err(DeviceError::NamespaceSpec(
                "a quota must be positive".into(),
            ));
        }
        if let Some(name) = &spec.name {
            check_namespace_name(name)?;
            let taken = self
                .namespaces
                .values()
                .any(|namespace| namespace.spec.name.as_deref() == Some(name.as_str()));
            if taken {
                return Err(DeviceError::NamespaceNameTaken(name.clone()));
            }
        }
        let logs_total = self.space.config().logs;
        let logs = spec
            .logs
            .clone()
            .unwrap_or_else(|| (0..logs_total).collect());
        let id = self.next_namespace;
        let engine = self.open_engine(id, spec.preset, None)?;
        self.space
            .set_namespace_logs(id, &logs)
            .map_err(|error| DeviceError::NamespaceSpec(error.to_string()))?;
        self.space
            .set_namespace_confined(id, engine.confined_to_logs());
        let spec = NamespaceSpec {
            logs: Some(logs),
            ..spec
        };
        self.log_namespace_created(id, &spec)?;
        self.next_namespace += 1;
        self.namespaces.insert(id, Namespace { spec, engine });
        self.size_index_cache();
        self.checkpoint_if_durable()?;
        Ok(NamespaceId(id))
    }

    /// Sizes the flash's cache of index pages (file media): what the namespaces' indexes plan
    /// never to use of their DRAM budgets, at most `config.index_cache_bytes`, so that pinned
    /// levels keep priority and the cache never takes DRAM an index may need.
    pub(super) fn size_index_cache(&mut self) {
        let spare: u64 = self
            .namespaces
            .values()
            .map(|namespace| namespace.engine.spare_dram_bytes())
            .sum();
        let bytes = spare.min(self.config.index_cache_bytes);
        let flash = self.space.flash_mut();
        let current = flash
            .index_cache_stats()
            .map_or(0, |stats| stats.capacity_bytes);
        if bytes != current {
            flash.set_index_cache_bytes(bytes);
        }
    }

    /// The index of a namespace `id` of `preset`: empty, or restored from a checkpoint's bytes.
    pub(super) fn open_engine(
        &self,
        id: u32,
        preset: PresetKind,
        saved: Option<&[u8]>,
    ) -> Result<Box<dyn Engine>> {
        preset
            .engine_factory()
            .open(&self.space, &self.config, id, saved)
            .map_err(|error| match error {
                EngineError::Config(what) => DeviceError::NamespaceSpec(what),
                EngineError::DramBudgetTooSmall { .. } => {
                    DeviceError::NamespaceSpec(error.to_string())
                }
                source if saved.is_some() => {
                    DeviceError::CheckpointCorrupt(CheckpointError::Part {
                        namespace: id,
                        source,
                    })
                }
                other => DeviceError::from(other),
            })
    }

    pub(super) fn delete_namespace(&mut self, at: SimTime, id: NamespaceId) -> Result<SimTime> {
        if !self.namespaces.contains_key(&id.0) {
            return Err(DeviceError::NamespaceUnknown(id));
        }
        let closing: Vec<u64> = self
            .iterators
            .iter()
            .filter(|(_, open)| open.namespace == id.0)
            .map(|(&iterator, _)| iterator)
            .collect();
        for iterator in closing {
            if let Some(open) = self.iterators.remove(&iterator) {
                self.space.unprotect(open.namespace, open.token);
                self.orphaned.insert(iterator);
            }
        }
        let t = self.log_namespace_deleted(at, id.0)?;
        self.namespaces.remove(&id.0);
        self.size_index_cache();
        // With a log: a checkpoint without the namespace is durable before its blocks are erased.
        self.checkpoint_if_durable()?;
        Ok(self.space.release_namespace(t, id.0)?)
    }

    pub(super) fn list_namespaces(&self) -> Vec<NamespaceInfo> {
        self.namespaces
            .iter()
            .map(|(&id, namespace)| {
                let report = namespace.engine.report(&self.space);
                let open: Vec<&OpenIterator> = self
                    .iterators
                    .values()
                    .filter(|open| open.namespace == id)
                    .collect();
                NamespaceInfo {
                    id: NamespaceId(id),
                    spec: namespace.spec.clone(),
                    valid_bytes: self.space.namespace_valid_bytes(id),
                    blocks: self.space.namespace_blocks(id),
                    l0_entries: report.staged_entries,
                    levels: report.levels,
                    flushes: report.flushes,
                    compactions: report.compactions,
                    gc_victims: report.gc_victims,
                    dram: report.dram,
                    iterators_open: open.len(),
                    snapshot_dram_bytes: open
                        .iter()
                        .map(|open| namespace.engine.snapshot_dram_bytes(open.iter.snapshot()))
                        .sum(),
                    controller_cpu_ns: report.cpu_ns,
                    dram_parts: report.dram_parts,
                    counters: report.counters,
                    shape: report.shape,
                }
            })
            .collect()
    }
}
