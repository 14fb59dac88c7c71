//! Why durable state read back from flash is refused: typed errors for the bytes the durability
//! layer decodes (log records, checkpoints, the superblock's root record) and for the checks
//! recovery makes around them. Each names what was wrong, so a caller matches on a variant rather
//! than on a message.

use kvssd_engine::EngineError;
use kvssd_flash::codec::DecodeError;

use crate::durability::log::LogEnd;

/// Bytes that passed their checksum but do not decode as a log record, a checkpoint or a root
/// record: written by a foreign or incompatible build, or damaged in a way the checksum missed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// A field runs past the end, a count is larger than the bytes that follow, a key is empty, or
    /// bytes are left over.
    #[error("{0}")]
    Bytes(#[from] DecodeError),
    /// The structure does not start with its magic number.
    #[error("not a {structure} (wrong magic)")]
    WrongMagic {
        /// What was expected.
        structure: &'static str,
    },
    /// A checkpoint format version this build does not read.
    #[error("checkpoint format version {found} is not supported (this build reads versions {min} to {max})")]
    UnsupportedVersion {
        /// The version found.
        found: u32,
        /// The oldest version this build reads.
        min: u32,
        /// The newest version this build reads.
        max: u32,
    },
    /// A preset code outside the table of presets.
    #[error("an unknown preset (code {0})")]
    UnknownPreset(u8),
    /// A durability mode code other than 1 (write-ahead log) or 2 (power-loss protection).
    #[error("unknown durability mode {0}")]
    UnknownMode(u8),
    /// A log record kind this build does not know.
    #[error("unknown record kind {0}")]
    UnknownRecordKind(u8),
    /// An operation kind other than 1 (store) or 2 (delete).
    #[error("unknown operation kind {0}")]
    UnknownOperationKind(u8),
    /// A namespace name whose bytes are not UTF-8.
    #[error("a namespace name that is not UTF-8")]
    NameNotUtf8,
    /// A namespace name holding a NUL byte.
    #[error("a namespace name with a NUL byte")]
    NameHasNul,
    /// A record of a named namespace whose name is empty.
    #[error("a named namespace without a name")]
    NameMissing,
}

/// Why the checkpoint (or power-loss dump) the superblock names cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The superblock names no checkpoint.
    #[error("the superblock names no checkpoint")]
    Missing,
    /// An extent of the checkpoint lies outside the device.
    #[error("an extent outside the device (block {block}, pages {first_page}+{pages})")]
    ExtentOutside {
        /// Its block.
        block: u64,
        /// Its first page.
        first_page: u32,
        /// Its pages.
        pages: u32,
    },
    /// The checkpoint's pages do not frame exactly one whole record.
    #[error("its pages do not hold one whole checkpoint ({records} records, {end:?})")]
    NotOneRecord {
        /// Complete records found.
        records: usize,
        /// Why reading its pages stopped.
        end: LogEnd,
    },
    /// The record does not decode as a checkpoint.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The space layer's saved state in it does not decode.
    #[error("space state: {0}")]
    SpaceState(&'static str),
    /// A namespace's saved index state in it does not restore.
    #[error("namespace {namespace}: {source}")]
    Part {
        /// The namespace.
        namespace: u32,
        /// Why its engine refused the bytes.
        #[source]
        source: EngineError,
    },
}

/// Why the live write-ahead log cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalError {
    /// The root names a log block outside the device.
    #[error("log block {block} is outside the device")]
    BlockOutside {
        /// The block index.
        block: u64,
    },
    /// A record passed its checksum but does not decode.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Records whose sequence numbers are not consecutive.
    #[error("record {lsn} follows record {previous}: sequence numbers must be consecutive")]
    SequenceGap {
        /// The record's sequence number.
        lsn: u64,
        /// The previous record's.
        previous: u64,
    },
}
