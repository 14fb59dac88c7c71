//! The values commands take and return.

use std::fmt;
use std::str::FromStr;

use kvssd_engine::hash::HashPreset;
use kvssd_engine::{DramUsage, EngineError, IterStats, Preset};

use crate::presets::{Factory, PRESETS, PRESET_COUNT};

/// A namespace's id. Ids are never reused, so a deleted namespace's keys cannot reappear under
/// a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamespaceId(pub u32);

impl fmt::Display for NamespaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An open iterator's id (never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IteratorId(pub u64);

impl fmt::Display for IteratorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The engine preset of a namespace: one entry of the device's preset table (the LSM presets
/// `pink`, `pink-noopt`, `pink-range`, `lightstore`, `pink-gcrewrite`, `pink-hw`; the hash presets `hash`,
/// `kaml`; the page-mapped FTL `block`). Made from an LSM [`Preset`], a [`HashPreset`] or a name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PresetKind(u8);

impl PresetKind {
    /// Every preset a namespace may have, in the order of their on-flash codes.
    pub const ALL: [PresetKind; PRESET_COUNT] = {
        let mut all = [PresetKind(0); PRESET_COUNT];
        let mut index = 0;
        while index < PRESET_COUNT {
            all[index] = PresetKind(index as u8);
            index += 1;
        }
        all
    };

    fn factory(self) -> &'static dyn Factory {
        PRESETS[usize::from(self.0)]
    }

    /// The name users type.
    pub fn name(self) -> &'static str {
        self.factory().name()
    }

    /// Whether namespaces of this preset serve iterators (engines that keep their keys in order).
    pub fn supports_iterators(self) -> bool {
        self.factory().capabilities().ordered
    }

    /// For a preset whose keys are logical block numbers (`block`: 8-byte big-endian LBAs, with a
    /// 4-byte offset to write part of a block), the bytes of a logical block under `config`.
    pub fn logical_block_bytes(self, config: &crate::DeviceConfig) -> Option<u32> {
        self.factory().logical_block_bytes(config)
    }

    /// The code stored on flash (its position in [`PresetKind::ALL`]).
    pub(crate) fn code(self) -> u8 {
        self.0
    }

    /// The table entry that opens its engines.
    pub(crate) fn engine_factory(self) -> &'static dyn Factory {
        self.factory()
    }

    /// The preset of this name, if the table has one.
    fn named(name: &str) -> Option<PresetKind> {
        PresetKind::ALL
            .into_iter()
            .find(|preset| preset.name() == name)
    }
}

impl From<Preset> for PresetKind {
    fn from(preset: Preset) -> PresetKind {
        // Every engine preset has an entry (checked by the preset table's tests).
        PresetKind::named(preset.name()).unwrap_or(PresetKind(0))
    }
}

impl From<HashPreset> for PresetKind {
    fn from(preset: HashPreset) -> PresetKind {
        PresetKind::named(preset.name()).unwrap_or(PresetKind(0))
    }
}

impl fmt::Debug for PresetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PresetKind({})", self.name())
    }
}

impl fmt::Display for PresetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PresetKind {
    type Err = EngineError;

    fn from_str(name: &str) -> Result<PresetKind, EngineError> {
        PresetKind::named(name).ok_or_else(|| EngineError::UnknownPreset(name.to_string()))
    }
}

/// The attributes a namespace is created with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceSpec {
    /// Which engine indexes it.
    pub preset: PresetKind,
    /// The logs it writes to (indexes below the device's log count); `None` for all of them.
    pub logs: Option<Vec<u32>>,
    /// Most bytes of flash its live data may take; `None` for no quota beyond the device's.
    pub quota_bytes: Option<u64>,
    /// Its name, unique on the device (1 to [`crate::NAMESPACE_NAME_BYTES_MAX`] bytes, no NUL
    /// byte), kept durably with the namespace; `None` for a namespace known by id only.
    pub name: Option<String>,
}

impl NamespaceSpec {
    /// A namespace of `preset` (an LSM [`Preset`], a [`HashPreset`] or a [`PresetKind`]) on
    /// every log, without a quota.
    pub fn new(preset: impl Into<PresetKind>) -> NamespaceSpec {
        NamespaceSpec {
            preset: preset.into(),
            logs: None,
            quota_bytes: None,
            name: None,
        }
    }

    /// The same attributes with a name.
    pub fn with_name(self, name: impl Into<String>) -> NamespaceSpec {
        NamespaceSpec {
            name: Some(name.into()),
            ..self
        }
    }
}

/// A namespace and its statistics, as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceInfo {
    /// Its id.
    pub id: NamespaceId,
    /// Its attributes, with `logs` resolved to the actual set.
    pub spec: NamespaceSpec,
    /// Bytes of flash its live data holds (valid meta pages and records).
    pub valid_bytes: u64,
    /// Flash blocks it holds.
    pub blocks: u64,
    /// Entries in L0 (hash presets: in the write buffer).
    pub l0_entries: u64,
    /// Levels below L0 (0 for the hash presets).
    pub levels: usize,
    /// L0 flushes (hash presets: write-buffer applications) so far.
    pub flushes: u64,
    /// Level merges so far.
    pub compactions: u64,
    /// GC victims (meta and data blocks) collected so far.
    pub gc_victims: u64,
    /// The index's DRAM by part (hash presets: write buffer as `l0`, the bucket directory and
    /// cache or the in-DRAM table as `level_lists`).
    pub dram: DramUsage,
    /// Iterators open on it.
    pub iterators_open: usize,
    /// DRAM its open iterators' snapshots hold beyond what the live index shares with them.
    pub snapshot_dram_bytes: u64,
    /// Controller computation its index charged so far, in simulated nanoseconds.
    pub controller_cpu_ns: u64,
    /// The index's DRAM by its engine's own parts (`l0`, `level_lists`, ... for the LSM presets;
    /// `write_buffer`, `bucket_directory`, `bucket_cache`, `table` for the hash presets).
    pub dram_parts: Vec<(&'static str, u64)>,
    /// The engine's own counters (GC records moved, cache hits, ...), by name.
    pub counters: Vec<(&'static str, u64)>,
    /// One line describing the index's shape.
    pub shape: String,
}

/// How a store treats a key's presence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreMode {
    /// Store whether or not the key is present.
    #[default]
    Upsert,
    /// Store only if the key is present, else [`crate::DeviceError::KeyMissing`].
    UpdateOnly,
    /// Store only if the key is absent, else [`crate::DeviceError::KeyExists`].
    InsertOnly,
}

/// A byte range of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub offset: usize,
    /// Bytes.
    pub len: usize,
}

/// What a retrieve returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retrieved {
    /// The value, or the asked range of it.
    pub value: Vec<u8>,
    /// The length of the whole value.
    pub value_len: usize,
}

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    /// A store.
    Store {
        /// Namespace.
        namespace: NamespaceId,
        /// Key.
        key: Vec<u8>,
        /// Value.
        value: Vec<u8>,
        /// Presence condition.
        mode: StoreMode,
    },
    /// A delete.
    Delete {
        /// Namespace.
        namespace: NamespaceId,
        /// Key.
        key: Vec<u8>,
    },
}

impl BatchOp {
    /// Its namespace, key and value (`None` for a delete).
    pub fn parts(&self) -> (NamespaceId, &[u8], Option<&[u8]>) {
        match self {
            BatchOp::Store {
                namespace,
                key,
                value,
                ..
            } => (*namespace, key, Some(value)),
            BatchOp::Delete { namespace, key } => (*namespace, key, None),
        }
    }
}

/// Where an iterator starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IterStart {
    /// At the first key `>=` this one (empty: the first key of the namespace).
    Key(Vec<u8>),
    /// At the first key with this prefix; the iterator ends after the last such key.
    Prefix(Vec<u8>),
}

/// How an iterator is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IterOptions {
    /// Where it starts.
    pub start: IterStart,
    /// Return keys (and value lengths) without reading values.
    pub keys_only: bool,
    /// D: value reads kept in flight ahead of the cursor (0: read each value when returned).
    pub prefetch_degree: usize,
    /// Read each flash level's next meta segment ahead (on by default).
    pub index_prefetch: bool,
}

impl IterOptions {
    /// Keys and values from `start`, with value prefetch of degree `prefetch_degree` and index
    /// prefetch.
    pub fn new(start: IterStart, prefetch_degree: usize) -> IterOptions {
        IterOptions {
            start,
            keys_only: false,
            prefetch_degree,
            index_prefetch: true,
        }
    }
}

/// One entry an iterator returns.
pub use kvssd_engine::SnapshotEntry as IterEntry;

/// Pairs a scan returns, in key order.
pub use kvssd_engine::Pairs;

/// What one `next` returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NextBatch {
    /// Entries in key order: at least one unless `end`, then as many as fit the byte budget.
    pub entries: Vec<IterEntry>,
    /// Whether the iterator has returned its last entry.
    pub end: bool,
}

/// An open iterator's state, as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IteratorInfo {
    /// Its namespace.
    pub namespace: NamespaceId,
    /// DRAM its snapshot holds beyond what the live index shares with it.
    pub snapshot_dram_bytes: u64,
    /// Reads it made and prefetched.
    pub stats: IterStats,
}

/// Device-wide figures.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceStats {
    /// Free flash blocks.
    pub free_blocks: u64,
    /// Namespaces.
    pub namespaces: usize,
    /// Open iterators.
    pub iterators_open: usize,
    /// GC victims the device collected on behalf of namespaces (device-wide GC).
    pub device_gc_victims: u64,
    /// Flash operations by purpose.
    pub flash: kvssd_flash::Counters,
    /// Controller work booked so far, by thread (simulated nanoseconds; zero without timing).
    pub controller: kvssd_flash::Busy,
    /// Bytes of host memory the simulated media keeps its pages in (zero on file media).
    pub media_bytes: u64,
    /// The cache of index pages read from file media (`None` without one).
    pub index_cache: Option<kvssd_flash::IndexCacheStats>,
    /// Operations the timing model scheduled behind its horizon, where their timing may be too
    /// optimistic ([`kvssd_flash::Flash::late_issues`]): zero when its assumption held.
    pub late_issues: u64,
}
