//! Namespace commands: create (opening or restoring the preset's index), delete, list.

use kvssd_engine::hash::{HashIndex, HashPreset};
use kvssd_engine::{EngineError, LsmTree};
use kvssd_flash::SimTime;

use super::{Core, Namespace, NamespaceEngine, OpenIterator};
use crate::{DeviceError, NamespaceId, NamespaceInfo, NamespaceSpec, PresetKind, Result};

impl Core {
    pub(crate) fn create_namespace(&mut self, spec: NamespaceSpec) -> Result<NamespaceId> {
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
        let spec = NamespaceSpec {
            logs: Some(logs),
            ..spec
        };
        self.log_namespace_created(id, &spec)?;
        self.next_namespace += 1;
        self.namespaces.insert(id, Namespace { spec, engine });
        self.checkpoint_if_durable()?;
        Ok(NamespaceId(id))
    }

    /// The index of a namespace `id` of `preset`: empty, or restored from a checkpoint's bytes.
    pub(crate) fn open_engine(
        &self,
        id: u32,
        preset: PresetKind,
        saved: Option<&[u8]>,
    ) -> Result<NamespaceEngine> {
        let config_error = |what: String| DeviceError::NamespaceSpec(what);
        match preset {
            PresetKind::Lsm(preset) => {
                let mut config = self.config.engine.clone();
                config.preset = preset;
                config.features = preset.features();
                config.namespace = id;
                config.space = self.space.config().clone();
                let tree = match saved {
                    None => LsmTree::open(&self.space, config),
                    Some(bytes) => LsmTree::restore(&self.space, config, bytes),
                };
                tree.map(NamespaceEngine::Lsm).map_err(|error| match error {
                    EngineError::Config(what) => config_error(what),
                    EngineError::DramBudgetTooSmall { .. } => config_error(error.to_string()),
                    other if saved.is_some() => {
                        DeviceError::CheckpointCorrupt(format!("namespace {id}: {other}"))
                    }
                    other => DeviceError::from(other),
                })
            }
            PresetKind::Hash(preset) => {
                let mut config = match preset {
                    HashPreset::Hash => self.config.hash.clone(),
                    HashPreset::Kaml => self.config.kaml.clone(),
                };
                config.preset = preset;
                config.namespace = id;
                config.space = self.space.config().clone();
                let index = match saved {
                    None => HashIndex::open(&self.space, config),
                    Some(bytes) => HashIndex::restore(&self.space, config, bytes),
                };
                index
                    .map(NamespaceEngine::Hash)
                    .map_err(|error| match error {
                        kvssd_engine::hash::HashError::Engine(
                            EngineError::Config(_) | EngineError::DramBudgetTooSmall { .. },
                        ) => config_error(error.to_string()),
                        other if saved.is_some() => {
                            DeviceError::CheckpointCorrupt(format!("namespace {id}: {other}"))
                        }
                        other => DeviceError::from(other),
                    })
            }
        }
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
        // With a log: a checkpoint without the namespace is durable before its blocks are erased.
        self.checkpoint_if_durable()?;
        Ok(self.space.release_namespace(t, id.0)?)
    }

    pub(super) fn list_namespaces(&self) -> Vec<NamespaceInfo> {
        self.namespaces
            .iter()
            .map(|(&id, namespace)| {
                let summary = namespace.engine.summary(&self.space);
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
                    l0_entries: summary.l0_entries,
                    levels: summary.levels,
                    flushes: summary.flushes,
                    compactions: summary.compactions,
                    gc_victims: summary.gc_victims,
                    dram: summary.dram,
                    iterators_open: open.len(),
                    snapshot_dram_bytes: namespace.lsm_ref().map_or(0, |tree| {
                        open.iter()
                            .map(|open| tree.snapshot_dram_bytes(open.iter.snapshot()))
                            .sum()
                    }),
                }
            })
            .collect()
    }
}
