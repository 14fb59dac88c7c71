//! The NAND flash model of kvssd: the bottom layer every engine runs on.
//!
//! * [`Geometry`]: channels, ways (dies), blocks, pages, page and OOB sizes, and the addresses in them.
//! * [`Flash`]: an array that enforces the NAND rules with typed errors, keeps each page's checksum,
//!   schedules every operation on a virtual clock ([`TimingProfile`]), counts every operation by
//!   [`Purpose`] ([`Counters`]) and injects faults deterministically ([`FaultConfig`]).
//! * [`Flash::read_retrying`]: the one read-retry policy ([`READ_ATTEMPTS_MAX`]) for every layer.
//! * Media: in memory (as is, or compact: runs of a repeating 16-byte pattern kept as the pattern),
//!   or a file or block device that survives close and reopen ([`MediaKind`]).
//! * [`Profile`]: named geometry and timing pairs (`pink`, `test_min`).
//!
//! ```
//! use kvssd_flash::{Flash, Profile, Purpose};
//!
//! let profile = Profile::test_min();
//! let mut flash = Flash::new(profile.geometry, Some(profile.timing)).unwrap();
//! let page = kvssd_flash::BlockAddress { die: 0, block: 0 }.page(0);
//! let data = vec![7u8; profile.geometry.page_bytes as usize];
//! let programmed_at = flash.program(0, page, Purpose::UserData, &data, b"oob").unwrap();
//!
//! let mut back = vec![0u8; data.len()];
//! let mut oob = [0u8; 3];
//! let read = flash.read(programmed_at, page, Purpose::UserData, &mut back, &mut oob).unwrap();
//! assert_eq!((back, &oob), (data, b"oob"));
//! assert!(read.done_at > programmed_at);
//! ```

mod arena;
mod background;
pub mod codec;
mod compact;
mod counters;
mod detached;
mod error;
mod fault;
mod flash;
#[doc(hidden)]
pub mod fuzzing;
mod geometry;
mod index_cache;
mod media;
mod pool;
pub mod prefetch;
mod profile;
mod retry;
pub mod timing;
mod trailer;
mod view;
mod write_behind;

pub use arena::chunk_bytes_for as compact_chunk_bytes;
pub use background::{JobId, Lane};
pub use compact::{is_periodic, PATTERN_BYTES};
pub use counters::{Counters, OperationCounts, Purpose};
pub use detached::DetachedRead;
pub use error::{FlashError, Result};
pub use fault::FaultConfig;
pub use flash::{Flash, PageRead};
pub use geometry::{
    BlockAddress, Geometry, GeometryError, PageAddress, DEVICE_PAGES_MAX, OOB_BYTES_MAX,
    OOB_RESERVED_BYTES, PAGE_BYTES_MAX, PAGE_BYTES_MIN,
};
pub use index_cache::IndexCacheStats;
pub use media::{FileIo, MediaKind, SyncHandle, IMAGE_FORMAT_VERSION};
pub use profile::{Profile, PINK_BLOCKS_PER_DIE};
pub use retry::READ_ATTEMPTS_MAX;
pub use timing::{Busy, ControllerModel, SimTime, TimingProfile, BOOKING_WINDOW_NS};
pub use view::PageView;
pub use write_behind::WriteBehind;
