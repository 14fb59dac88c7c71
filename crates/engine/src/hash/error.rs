//! The errors of the hash engines: the engine layer's errors plus what only a hash index can say.

use kvssd_flash::FlashError;
use kvssd_space::SpaceError;

use crate::EngineError;

/// What went wrong with a hash-engine operation or configuration.
///
/// Key and value limits, capacity, configuration and I/O failures are the engine layer's
/// [`EngineError`], wrapped in [`HashError::Engine`], so the device layer sees the same errors from
/// every engine.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    /// An error every engine can return.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The operation needs an order of keys, which a hash index does not keep.
    #[error(
        "{operation} is not supported by the {preset} engine: a hash index keeps no key order"
    )]
    Unsupported {
        /// The operation refused.
        operation: &'static str,
        /// The preset that refused it.
        preset: &'static str,
    },
    /// Every slot of a key's probe window holds another live key.
    #[error("the hash table is full: the {probe_slots} slots a key may use all hold other keys")]
    TableFull {
        /// The probe bound.
        probe_slots: u32,
    },
    /// Bytes read from flash that do not decode as a bucket page.
    #[error("bucket page at flash page {page} is malformed: {what}")]
    MalformedBucket {
        /// The flash page index.
        page: u64,
        /// What is wrong.
        what: &'static str,
    },
}

impl From<SpaceError> for HashError {
    fn from(error: SpaceError) -> Self {
        HashError::Engine(EngineError::from(error))
    }
}

impl From<FlashError> for HashError {
    fn from(error: FlashError) -> Self {
        HashError::Engine(EngineError::Flash(error))
    }
}

/// The result type of the hash engines.
pub type Result<T, E = HashError> = std::result::Result<T, E>;

impl From<kvssd_flash::codec::DecodeError> for HashError {
    fn from(error: kvssd_flash::codec::DecodeError) -> Self {
        HashError::Engine(error.into())
    }
}

impl From<HashError> for EngineError {
    /// The hash engine's errors under the engine contract: the engine layer's own as they are, a
    /// full probe window as the capacity refusal it is, the rest boxed.
    fn from(error: HashError) -> Self {
        match error {
            HashError::Engine(error) => error,
            HashError::TableFull { .. } => {
                EngineError::CapacityExceeded("every slot of the key's probe window holds a key")
            }
            HashError::Unsupported { operation, preset } => EngineError::Unsupported {
                operation,
                engine: preset,
                why: "a hash index keeps no key order",
            },
            other => EngineError::Index(Box::new(other)),
        }
    }
}
