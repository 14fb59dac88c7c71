//! On-flash formats of the durability protocols.
//!
//! * [`log`]: records framed into page-sized fragments, each with its own checksum, so that a reader
//!   finds every complete record and stops cleanly at a torn or unwritten tail.
//! * [`superblock`]: the root of the durable state, written alternately into two slots with a
//!   sequence number and a checksum, so a cut during an update leaves the previous copy valid.

pub mod log;
pub mod superblock;
