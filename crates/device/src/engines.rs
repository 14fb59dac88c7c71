//! The index of a namespace: an LSM tree or a hash index, behind one set of operations the
//! device's commands, batches, GC and durability use. Adding an engine kind means adding a
//! variant and its arms here.

use kvssd_engine::hash::{HashError, HashIndex};
use kvssd_engine::{DramUsage, EngineError, LsmTree};
use kvssd_flash::SimTime;
use kvssd_space::Space;

use crate::DeviceError;

/// A namespace's index.
pub(crate) enum NamespaceEngine {
    /// `pink`, `pink-noopt`, `pink-range`, `lightstore`.
    Lsm(LsmTree),
    /// `hash`, `kaml`.
    Hash(HashIndex),
}

impl From<HashError> for DeviceError {
    fn from(error: HashError) -> Self {
        match error {
            HashError::Engine(error) => DeviceError::from(error),
            HashError::TableFull { .. } => {
                DeviceError::CapacityExceeded("every slot of the key's probe window holds a key")
            }
            other => DeviceError::Hash(other),
        }
    }
}

/// What `list_namespaces` reports of an index.
pub(crate) struct EngineSummary {
    pub(crate) l0_entries: u64,
    pub(crate) levels: usize,
    pub(crate) flushes: u64,
    pub(crate) compactions: u64,
    pub(crate) gc_victims: u64,
    pub(crate) dram: DramUsage,
}

type Result<T, E = DeviceError> = std::result::Result<T, E>;

impl NamespaceEngine {
    pub(crate) fn get(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        match self {
            NamespaceEngine::Lsm(tree) => Ok(tree.get(space, at, key)?),
            NamespaceEngine::Hash(index) => Ok(index.get(space, at, key)?),
        }
    }

    pub(crate) fn contains(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(bool, SimTime)> {
        match self {
            NamespaceEngine::Lsm(tree) => Ok(tree.contains(space, at, key)?),
            NamespaceEngine::Hash(index) => Ok(index.contains(space, at, key)?),
        }
    }

    /// A put; `Err(CapacityExceeded)` changed nothing.
    pub(crate) fn put(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        value: &[u8],
    ) -> Result<SimTime> {
        match self {
            NamespaceEngine::Lsm(tree) => Ok(tree.put(space, at, key, value)?),
            NamespaceEngine::Hash(index) => Ok(index.put(space, at, key, value)?),
        }
    }

    pub(crate) fn delete(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime> {
        match self {
            NamespaceEngine::Lsm(tree) => Ok(tree.delete(space, at, key)?),
            NamespaceEngine::Hash(index) => Ok(index.delete(space, at, key)?),
        }
    }

    pub(crate) fn admit_put(
        &self,
        space: &Space,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()> {
        match self {
            NamespaceEngine::Lsm(tree) => {
                Ok(tree.admit_put(space, key, value_len, staged_bytes)?)
            }
            NamespaceEngine::Hash(index) => {
                Ok(index.admit_put(space, key, value_len, staged_bytes)?)
            }
        }
    }

    pub(crate) fn staged_bytes(&self, key: &[u8], value: Option<&[u8]>) -> u64 {
        match self {
            NamespaceEngine::Lsm(_) => LsmTree::staged_bytes(key, value),
            NamespaceEngine::Hash(_) => HashIndex::staged_bytes(key, value),
        }
    }

    pub(crate) fn prepare_stage(
        &mut self,
        space: &mut Space,
        at: SimTime,
        bytes: u64,
    ) -> Result<SimTime> {
        match self {
            NamespaceEngine::Lsm(tree) => Ok(tree.prepare_stage(space, at, bytes)?),
            NamespaceEngine::Hash(index) => Ok(index.prepare_stage(space, at, bytes)?),
        }
    }

    /// Stages a pair or delete in DRAM: cannot fail.
    pub(crate) fn stage(&mut self, key: &[u8], value: Option<&[u8]>) {
        match self {
            NamespaceEngine::Lsm(tree) => tree.stage(key, value),
            NamespaceEngine::Hash(index) => index.stage(key, value),
        }
    }

    pub(crate) fn settle(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        match self {
            NamespaceEngine::Lsm(tree) => Ok(tree.settle(space, at)?),
            NamespaceEngine::Hash(index) => Ok(index.settle(space, at)?),
        }
    }

    /// Bytes of pairs staged in DRAM (L0 or the write buffer): counted against quotas.
    pub(crate) fn staged_dram_bytes(&self) -> u64 {
        match self {
            NamespaceEngine::Lsm(tree) => tree.l0_bytes(),
            NamespaceEngine::Hash(index) => index.buffered_bytes(),
        }
    }

    pub(crate) fn gc_candidate(&self, space: &Space) -> Option<u64> {
        match self {
            NamespaceEngine::Lsm(tree) => tree.gc_candidate(space),
            NamespaceEngine::Hash(index) => index.gc_candidate(space),
        }
    }

    /// Collects a victim; `None` when it could not be relocated now (left as it was).
    pub(crate) fn collect_victim(
        &mut self,
        space: &mut Space,
        at: SimTime,
        block: u64,
    ) -> Result<Option<SimTime>> {
        match self {
            NamespaceEngine::Lsm(tree) => Ok(Some(tree.collect_victim(space, at, block)?)),
            NamespaceEngine::Hash(index) => Ok(index.collect_victim(space, at, block)?),
        }
    }

    /// Writes staged pairs to flash (L0 flush, write-buffer application).
    pub(crate) fn flush(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        match self {
            NamespaceEngine::Lsm(tree) => Ok(tree.flush_l0(space, at)?),
            NamespaceEngine::Hash(index) => Ok(index.flush_write_buffer(space, at)?),
        }
    }

    /// The index's DRAM state for a checkpoint or dump.
    pub(crate) fn durable_state(&self) -> Vec<u8> {
        match self {
            NamespaceEngine::Lsm(tree) => tree.durable_state(),
            NamespaceEngine::Hash(index) => index.durable_state(),
        }
    }

    pub(crate) fn activity_count(&self) -> u64 {
        match self {
            NamespaceEngine::Lsm(tree) => tree.activity_count(),
            NamespaceEngine::Hash(index) => index.activity_count(),
        }
    }

    /// Reports what the index references to the space layer's accounting (after a restart).
    pub(crate) fn account_valid(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> std::result::Result<SimTime, String> {
        match self {
            NamespaceEngine::Lsm(tree) => tree
                .account_valid(space, at)
                .map_err(|error: EngineError| error.to_string()),
            NamespaceEngine::Hash(index) => index
                .account_valid(space, at)
                .map_err(|error| error.to_string()),
        }
    }

    pub(crate) fn summary(&self, space: &Space) -> EngineSummary {
        match self {
            NamespaceEngine::Lsm(tree) => {
                let stats = tree.stats(space);
                EngineSummary {
                    l0_entries: stats.l0_entries,
                    levels: stats.levels.len(),
                    flushes: stats.flushes,
                    compactions: stats.compactions,
                    gc_victims: stats.gc_meta_victims + stats.gc_data_victims,
                    dram: stats.dram,
                }
            }
            NamespaceEngine::Hash(index) => {
                let stats = index.stats(space);
                EngineSummary {
                    l0_entries: stats.write_buffer_entries,
                    levels: 0,
                    flushes: stats.flushes,
                    compactions: 0,
                    gc_victims: stats.gc_meta_victims + stats.gc_data_victims,
                    dram: DramUsage {
                        l0: stats.dram.write_buffer,
                        level_lists: stats.dram.bucket_directory
                            + stats.dram.bucket_cache
                            + stats.dram.table,
                        pinned_segments: 0,
                        bloom_filters: 0,
                        budget: stats.dram.budget,
                    },
                }
            }
        }
    }
}
