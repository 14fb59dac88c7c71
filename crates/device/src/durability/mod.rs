//! On-flash formats of the durability protocols.
//!
//! * [`log`]: records framed into page-sized fragments, each with its own checksum, so that a reader
//!   finds every complete record and stops cleanly at a torn or unwritten tail.
//! * [`superblock`]: the root of the durable state, written alternately into two slots with a
//!   sequence number and a checksum, so a cut during an update leaves the previous copy valid.
//! * [`wal`]: the log records (one per command or batch) and [`checkpoint`]: checkpoints and the
//!   superblock's root record; [`recovery`]: reading them back, with the [`RecoveryReport`].
//! * [`plp`]: power-loss protection — the dump written at a power cut, its bound, and recovery
//!   from it.

pub mod checkpoint;
pub(crate) mod journal;
pub mod log;
pub(crate) mod open;
pub mod plp;
pub mod recovery;
pub mod superblock;
pub mod wal;

pub use journal::{SyncPolicy, SUPERBLOCK_BLOCKS};
pub use plp::{DumpBound, DumpReport};
pub use recovery::RecoveryReport;
