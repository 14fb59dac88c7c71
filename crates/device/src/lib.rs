//! The device layer of kvssd: what applications and benchmarks talk to.
//!
//! * [`durability`]: the on-flash formats that make acknowledged writes survive power loss — the
//!   write-ahead log's record framing and the superblock.
//!
//! Byte layouts and the crash analysis of each protocol are in `docs/design.md`.

pub mod durability;
