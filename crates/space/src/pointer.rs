//! Addresses the space layer hands out: page indexes and record pointers.

use std::fmt;

/// Bits of a record pointer that hold the chunk within the page.
const CHUNK_BITS: u32 = 12;
/// Bits of a record pointer that hold the device-wide page index.
const PAGE_BITS: u32 = 40;
/// Most chunks a page may have, so a chunk index fits its field.
pub(crate) const CHUNKS_PER_PAGE_MAX: u32 = 1 << CHUNK_BITS;
/// Most pages a device may have, so a page index fits its field.
pub(crate) const PAGES_MAX: u64 = 1 << PAGE_BITS;
/// The generation field keeps the low 12 bits of the block's erase count.
pub(crate) const GENERATION_MASK: u32 = (1 << (64 - CHUNK_BITS - PAGE_BITS)) - 1;

/// A device-wide page index (`Geometry::page_index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageIndex(pub u64);

/// Where a data record starts: page index, chunk within the page, and the low bits of the block's
/// erase count when the record was written (its *generation*), packed into one `u64`:
///
/// ```text
/// bit 63        52 51                       12 11        0
///     | generation |        page index        |   chunk   |
/// ```
///
/// The generation lets the layer tell a pointer into a block that was erased since (a stale pointer
/// left behind by GC re-insertion) from a pointer to a record that is still there.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordPointer(u64);

impl RecordPointer {
    pub(crate) fn new(page: PageIndex, chunk: u32, erase_count: u32) -> RecordPointer {
        debug_assert!(page.0 < PAGES_MAX && chunk < CHUNKS_PER_PAGE_MAX);
        RecordPointer(
            (u64::from(erase_count & GENERATION_MASK) << (CHUNK_BITS + PAGE_BITS))
                | (page.0 << CHUNK_BITS)
                | u64::from(chunk),
        )
    }

    /// The pointer as stored in meta segments.
    pub fn raw(self) -> u64 {
        self.0
    }

    /// A pointer from its stored form (no check: reading through it checks).
    pub fn from_raw(raw: u64) -> RecordPointer {
        RecordPointer(raw)
    }

    /// The page the record starts in.
    pub fn page(self) -> PageIndex {
        PageIndex((self.0 >> CHUNK_BITS) & (PAGES_MAX - 1))
    }

    /// The chunk of that page the record starts at.
    pub fn chunk(self) -> u32 {
        (self.0 & u64::from(CHUNKS_PER_PAGE_MAX - 1)) as u32
    }

    /// The generation (low bits of the block's erase count at write time).
    pub fn generation(self) -> u32 {
        (self.0 >> (CHUNK_BITS + PAGE_BITS)) as u32 & GENERATION_MASK
    }
}

impl fmt::Debug for RecordPointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "page {} chunk {} gen {}",
            self.page().0,
            self.chunk(),
            self.generation()
        )
    }
}
