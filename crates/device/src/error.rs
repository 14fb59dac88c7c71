//! The errors of the device layer: one variant per way a command can be refused, each with a
//! one-line message. A refused command changes nothing.

use kvssd_engine::EngineError;
use kvssd_space::SpaceError;

use crate::durability::{CheckpointError, FormatError, WalError};
use crate::{IteratorId, NamespaceId};

/// The result type of the device.
pub type Result<T, E = DeviceError> = std::result::Result<T, E>;

/// Why a command was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A key of length zero.
    #[error("the key is empty: keys are 1 to 255 bytes")]
    KeyEmpty,
    /// A key (or iterator start, prefix or seek key) longer than [`crate::KEY_BYTES_MAX`].
    #[error("the key is {len} bytes: keys are 1 to 255 bytes")]
    KeyTooLong {
        /// Its length.
        len: usize,
    },
    /// A value longer than the device takes.
    #[error("the value is {len} bytes, more than the {max} this device takes")]
    ValueTooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// On compact media (the benchmarks' full-size runs), a value that does not repeat its first
    /// 16 bytes to its end: such media keep only values that describe themselves.
    #[error(
        "the value ({len} bytes) does not repeat its first 16 bytes: compact media take only \
         values that are a 16-byte description repeated to their length (use ram media for others)"
    )]
    ValueNotPeriodic {
        /// Its length.
        len: usize,
    },
    /// No namespace has this id (never created, or deleted).
    #[error("namespace {0} does not exist")]
    NamespaceUnknown(NamespaceId),
    /// The device holds [`crate::DeviceConfig::namespaces_max`] namespaces already.
    #[error("the device already holds {max} namespaces")]
    NamespacesExhausted {
        /// The limit.
        max: usize,
    },
    /// A namespace name that is empty, longer than [`crate::NAMESPACE_NAME_BYTES_MAX`] bytes or
    /// holds a NUL byte.
    #[error("invalid namespace name: {0}")]
    NamespaceNameInvalid(String),
    /// Another namespace already has this name.
    #[error("a namespace named '{0}' exists already")]
    NamespaceNameTaken(String),
    /// Namespace attributes that cannot be honoured.
    #[error("invalid namespace attributes: {0}")]
    NamespaceSpec(String),
    /// An update-only store of a key that has no value.
    #[error("update-only store of a key that is not present")]
    KeyMissing,
    /// An insert-only store of a key that has a value.
    #[error("insert-only store of a key that is already present")]
    KeyExists,
    /// The namespace's quota would be exceeded.
    #[error("namespace {namespace} would exceed its quota of {quota_bytes} bytes")]
    QuotaExceeded {
        /// The namespace.
        namespace: NamespaceId,
        /// Its quota.
        quota_bytes: u64,
    },
    /// Flash (after GC) or index DRAM cannot take the write.
    #[error("capacity exceeded: {0}")]
    CapacityExceeded(&'static str),
    /// A byte range that does not lie within the value.
    #[error("byte range {offset}+{len} lies outside the value of {value_len} bytes")]
    RangeOutsideValue {
        /// Start of the range.
        offset: usize,
        /// Its length.
        len: usize,
        /// The value's length.
        value_len: usize,
    },
    /// A batch with more operations than the device takes.
    #[error("the batch has {len} operations, more than the {max} a batch may have")]
    BatchTooLarge {
        /// Operations in the batch.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A batch operation was refused; nothing of the batch was applied.
    #[error("batch operation {index} refused: {source}")]
    BatchOperation {
        /// Position of the operation in the batch.
        index: usize,
        /// Why.
        #[source]
        source: Box<DeviceError>,
    },
    /// [`crate::DeviceConfig::iterators_open_max`] iterators are open already.
    #[error("{max} iterators are open already: close one first")]
    IteratorsExhausted {
        /// The limit.
        max: usize,
    },
    /// The namespace's engine cannot iterate in key order.
    #[error("namespaces of preset {0} do not support iterators")]
    IteratorsUnsupported(String),
    /// The namespace's engine keeps no key order, so it cannot return a range of keys.
    #[error("namespaces of preset {0} do not support scans: their keys are in no order")]
    ScansUnsupported(String),
    /// A scan asking for more pairs than [`crate::SCAN_PAIRS_MAX`].
    #[error("a scan of {count} pairs asks for more than the {max} a scan may return")]
    ScanTooLong {
        /// Pairs asked for.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A prefetch degree above [`crate::PREFETCH_DEGREE_MAX`].
    #[error("prefetch degree {degree} exceeds the maximum of {max}")]
    PrefetchDegreeTooLarge {
        /// Asked for.
        degree: usize,
        /// The limit.
        max: usize,
    },
    /// No open iterator has this id.
    #[error("iterator {0} is not open")]
    IteratorUnknown(IteratorId),
    /// The iterator's namespace was deleted while it was open; it was closed.
    #[error("iterator {0} was closed because its namespace was deleted")]
    IteratorNamespaceDeleted(IteratorId),
    /// A thread panicked while holding the device; its state may be inconsistent.
    #[error("the device is unusable: a thread panicked during a command")]
    Poisoned,
    /// The engine failed (flash or malformed data).
    #[error(transparent)]
    Engine(EngineError),
    /// The flash holds no kvssd superblock (a foreign or unformatted image).
    #[error("not a kvssd device: no superblock copy found (format it first)")]
    NotADevice,
    /// The superblock is unreadable or of an incompatible version.
    #[error("superblock: {0}")]
    Superblock(#[from] crate::durability::superblock::SuperblockError),
    /// The superblock's root record does not decode.
    #[error("superblock root record is corrupt: {0}")]
    RootCorrupt(#[source] FormatError),
    /// The checkpoint the superblock names is unreadable, corrupt or of an incompatible version.
    #[error("checkpoint is unusable: {0}")]
    CheckpointCorrupt(#[source] CheckpointError),
    /// A log record passed its checksum but does not decode (a foreign or incompatible log), or
    /// the log is not where the root says.
    #[error("write-ahead log is corrupt: {0}")]
    LogCorrupt(#[source] WalError),
    /// The image was written under another durability mode than the one asked for.
    #[error("durability mode mismatch: {0}")]
    ModeMismatch(String),
    /// Power-loss protection: the superblock names no dump, so the last power cut's dump did not
    /// complete (the capacitor ran out) and the DRAM state is lost.
    #[error("no power-loss dump: the last power cut's dump did not complete, the device's state is lost")]
    DumpMissing,
    /// A recovered index could not be read back to recount what it references.
    #[error("recovery failed: reading the index of namespace {namespace}: {source}")]
    Recovery {
        /// The namespace.
        namespace: u32,
        /// Why its engine failed.
        #[source]
        source: EngineError,
    },
    /// The space layer failed.
    #[error(transparent)]
    Space(#[from] SpaceError),
    /// On a file image, a background thread of the device failed to write a checkpoint, flush a
    /// write buffer or collect; every later command is refused. What was logged is still in the
    /// log: reopening the image recovers it.
    #[error("background work failed ({0}); reopen the image to recover what was logged")]
    Background(String),
    /// The operation is not available in this device's durability mode or on its media.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// An indexing DRAM budget of zero, or over the limit, was asked for.
    #[error("an indexing DRAM budget of {bytes} bytes is outside 1..={max} bytes")]
    DramBudgetInvalid {
        /// The budget asked for.
        bytes: u64,
        /// The largest budget taken.
        max: u64,
    },
}

impl From<EngineError> for DeviceError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::KeyEmpty => DeviceError::KeyEmpty,
            EngineError::KeyTooLong { len } => DeviceError::KeyTooLong { len },
            EngineError::ValueTooLarge { len, max } => DeviceError::ValueTooLarge { len, max },
            EngineError::CapacityExceeded(what) => DeviceError::CapacityExceeded(what),
            other => DeviceError::Engine(other),
        }
    }
}
