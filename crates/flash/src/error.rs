//! The errors of the flash layer. Every NAND rule violation has its own variant naming the address.

use std::io;
use std::path::PathBuf;

use crate::{BlockAddress, Geometry, GeometryError, PageAddress};

/// What went wrong with a flash operation or a media image.
#[derive(Debug, thiserror::Error)]
pub enum FlashError {
    /// The geometry is invalid.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// A page address outside the device.
    #[error("{page} is outside the device")]
    PageOutOfRange {
        /// The address given.
        page: PageAddress,
    },
    /// A block address outside the device.
    #[error("{block} is outside the device")]
    BlockOutOfRange {
        /// The address given.
        block: BlockAddress,
    },
    /// A program of a page that was already programmed since its block was last erased.
    #[error("{page} is already programmed: a page is programmed once between erases")]
    ProgramTwice {
        /// The page.
        page: PageAddress,
    },
    /// A program that skips pages of its block.
    #[error("{page} programmed out of order: the next page of its block to program is {next}")]
    ProgramOutOfOrder {
        /// The page.
        page: PageAddress,
        /// The page that must be programmed next.
        next: u32,
    },
    /// A read of a page that has not been programmed since its block was last erased.
    #[error("{page} is erased: it has not been programmed since its block was last erased")]
    ReadErased {
        /// The page.
        page: PageAddress,
    },
    /// A page whose checksum does not match its content: a torn program, a bit flip or media damage.
    #[error("{page} is corrupt: its checksum does not match its content")]
    Corrupt {
        /// The page.
        page: PageAddress,
    },
    /// The compact media's encoding of a page cannot be decoded (it is never returned as data).
    #[error("{page} cannot be read from the compact media: {what}")]
    MediaMalformed {
        /// The page.
        page: PageAddress,
        /// What is wrong with its encoding.
        what: &'static str,
    },
    /// A read of a page whose bytes the compact media discarded ([`crate::Flash::discard`]): the
    /// layer above said nothing would read it again.
    #[error("{page} was discarded: its bytes are no longer kept (compact media)")]
    Discarded {
        /// The page.
        page: PageAddress,
        /// Simulated time at which the read completed (it took its time as on any media).
        done_at: crate::SimTime,
    },
    /// Power is cut: nothing runs until it is restored.
    #[error("power is cut: no flash operation runs until power is restored")]
    PowerCut,
    /// A program failed because its block is bad.
    #[error("program of {page} failed: the block is bad")]
    ProgramFailed {
        /// The page.
        page: PageAddress,
    },
    /// An erase failed because the block is bad.
    #[error("erase of {block} failed: the block is bad")]
    EraseFailed {
        /// The block.
        block: BlockAddress,
    },
    /// A buffer of the wrong size was passed.
    #[error("{what} buffer is {actual} bytes, it must be {expected}")]
    BufferSize {
        /// Which buffer.
        what: &'static str,
        /// The size the geometry requires (an upper bound for OOB buffers).
        expected: usize,
        /// The size given.
        actual: usize,
    },
    /// An I/O error of the file media.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// The file does not start with a kvssd image header.
    #[error("{path} is not a kvssd flash image (no kvssd header)")]
    NotAnImage {
        /// The file.
        path: PathBuf,
    },
    /// The image header fails its checksum.
    #[error("{path}: the image header is corrupt (checksum mismatch)")]
    HeaderCorrupt {
        /// The file.
        path: PathBuf,
    },
    /// The image was written by an incompatible format version.
    #[error("{path}: image format version {found} is not supported (this build reads version {supported}; format a new image)")]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in the header.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// The image was formatted with another geometry than the one requested.
    #[error("{path} was formatted with geometry [{image}], not the requested [{requested}]")]
    GeometryMismatch {
        /// The file.
        path: PathBuf,
        /// The geometry in the image.
        image: Geometry,
        /// The geometry asked for.
        requested: Geometry,
    },
    /// The file or block device is smaller than its geometry needs.
    #[error("{path} holds {actual} bytes, the geometry needs {needed}")]
    ImageTooSmall {
        /// The file.
        path: PathBuf,
        /// Bytes needed.
        needed: u64,
        /// Bytes present.
        actual: u64,
    },
}

impl FlashError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        FlashError::Io {
            context: context.into(),
            source,
        }
    }
}

/// The result type of the flash layer.
pub type Result<T, E = FlashError> = std::result::Result<T, E>;
