//! The durability layer under the device's commands: the on-flash formats of the durability
//! protocols and the code that reads and writes them, working on bytes, the [`kvssd_flash::Flash`]
//! and the [`kvssd_space::Space`]. The device (`crate::device`: its `open`, `logging` and `power`
//! modules) decides when to log, checkpoint, dump and recover, and rebuilds itself from what this
//! layer reads; nothing here knows the device's state.
//!
//! * [`log`]: records framed into page-sized fragments, each with its own checksum, so that a reader
//!   finds every complete record and stops cleanly at a torn or unwritten tail.
//! * [`superblock`]: the root of the durable state, written alternately into two slots with a
//!   sequence number and a checksum, so a cut during an update leaves the previous copy valid.
//! * [`wal`]: the log records (one per command or batch) and [`checkpoint`]: checkpoints and the
//!   superblock's root record; [`recovery`]: reading them back from the flash, with the
//!   [`RecoveryReport`].
//! * `journal`: the write side — superblock copies, log appends, checkpoints — on the space
//!   layer's system blocks.
//! * [`error`]: why bytes read back are refused — [`FormatError`] for a record that does not
//!   decode, [`CheckpointError`] and [`WalError`] for what recovery checks around them.
//! * [`plp`]: power-loss protection — writing the dump at a power cut, and its bound.

pub mod checkpoint;
pub mod error;
pub(crate) mod journal;
pub mod log;
pub mod plp;
pub mod recovery;
pub mod superblock;
pub mod wal;

pub use error::{CheckpointError, FormatError, WalError};
pub use journal::{DurabilityCounts, SyncPolicy, SUPERBLOCK_BLOCKS};
pub use plp::{DumpBound, DumpReport};
pub use recovery::RecoveryReport;
