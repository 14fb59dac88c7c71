//! The errors of the engine layer, each with a one-line message.

use kvssd_flash::FlashError;
use kvssd_space::SpaceError;

/// What went wrong with an engine operation or configuration.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A key of length zero.
    #[error("the key is empty: keys are 1 to 255 bytes")]
    KeyEmpty,
    /// A key longer than the limit.
    #[error("the key is {len} bytes: keys are 1 to 255 bytes")]
    KeyTooLong {
        /// Its length.
        len: usize,
    },
    /// A value longer than the limit.
    #[error("the value is {len} bytes, more than the {max} this device takes")]
    ValueTooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The device cannot take the store: flash (after GC) or the index's DRAM is full.
    #[error("capacity exceeded: {0}")]
    CapacityExceeded(&'static str),
    /// The DRAM budget cannot hold L0 and the level lists of a full device.
    #[error("DRAM budget of {budget} bytes is too small: L0 and the level lists of a full device need {needed}")]
    DramBudgetTooSmall {
        /// Bytes needed.
        needed: u64,
        /// Bytes given.
        budget: u64,
    },
    /// A configuration value out of range.
    #[error("invalid engine configuration: {0}")]
    Config(String),
    /// An unknown preset name.
    #[error("unknown preset {0:?}: expected one of pink, pink-noopt, pink-range, lightstore, pink-gcrewrite, pink-hw")]
    UnknownPreset(String),
    /// Bytes read from flash that do not decode as a meta segment.
    #[error("meta segment at page {page} is malformed: {what}")]
    MalformedSegment {
        /// The page index.
        page: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// A saved index state (checkpoint part) does not decode: damaged, or from another format.
    #[error("index checkpoint is malformed: {0}")]
    CheckpointMalformed(&'static str),
    /// The engine does not serve the operation (a snapshot of an index that keeps no key order).
    #[error("{operation} is not supported by the {engine} engine: {why}")]
    Unsupported {
        /// The operation refused.
        operation: &'static str,
        /// The preset that refused it.
        engine: &'static str,
        /// Why it cannot.
        why: &'static str,
    },
    /// What only one engine can say, boxed: a hash index's malformed bucket page (a
    /// [`crate::hash::HashError`]).
    #[error(transparent)]
    Index(Box<dyn std::error::Error + Send + Sync>),
    /// A flash operation failed.
    #[error(transparent)]
    Flash(#[from] FlashError),
    /// The space layer failed.
    #[error(transparent)]
    Space(SpaceError),
}

impl From<SpaceError> for EngineError {
    fn from(error: SpaceError) -> Self {
        match error {
            SpaceError::Flash(flash) => EngineError::Flash(flash),
            SpaceError::NoFreeBlock => EngineError::CapacityExceeded("no free flash block is left"),
            other => EngineError::Space(other),
        }
    }
}

impl From<kvssd_flash::codec::DecodeError> for EngineError {
    /// The engines decode bytes only when they restore a saved index state.
    fn from(error: kvssd_flash::codec::DecodeError) -> Self {
        EngineError::CheckpointMalformed(error.0)
    }
}
