//! Where page bytes live: in memory ([`MediaKind::Ram`]), in memory encoded
//! ([`MediaKind::Compact`], see `compact.rs`) or in a file or block device ([`MediaKind::File`]).
//!
//! Media store raw page slots (payload plus the whole OOB area, trailer included) and per-block erase
//! counts. They enforce nothing: the NAND rules, checksums, timing and faults live in [`crate::Flash`],
//! so both media obey exactly the same rules. File media and their image format are in `file.rs`.

mod file;

use std::path::PathBuf;
use std::sync::Arc;

use crate::compact::{CompactMedia, Unreadable};
use crate::write_behind::WriteBehind;
use crate::{FlashError, Geometry, Result};

pub(crate) use file::{
    decode_header, decode_header_fields, encode_header, image_bytes, FileMedia, SlotSource,
    IMAGE_HEADER_READ_BYTES,
};
pub use file::{FileIo, HeaderError, SyncHandle, IMAGE_FORMAT_VERSION};

/// Which media a device keeps its pages on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaKind {
    /// In memory; gone when the device is dropped. Blocks are allocated when first programmed.
    Ram,
    /// In memory, each page in an encoding that keeps runs of a repeating 16-byte pattern as the
    /// pattern (values that describe themselves cost a few bytes), a block's pages freed when it
    /// is erased. Reads return exactly the bytes programmed, as on [`MediaKind::Ram`].
    Compact,
    /// A regular file or a block device, laid out as the module docs describe.
    File(PathBuf),
}

impl MediaKind {
    /// Whether the pages are gone when the device is dropped (nothing to sync).
    pub fn is_volatile(&self) -> bool {
        !matches!(self, MediaKind::File(_))
    }
}

/// A page's payload for a program: borrowed, or a buffer the caller is done with, which file
/// media writing behind queue as the page's slot without copying it.
pub(crate) enum PageBytes<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl PageBytes<'_> {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            PageBytes::Borrowed(bytes) => bytes,
            PageBytes::Owned(bytes) => bytes,
        }
    }
}

pub(crate) enum Media {
    Ram(RamMedia),
    Compact(CompactMedia),
    File(FileMedia),
}

fn malformed((page, what): (crate::PageAddress, &'static str)) -> FlashError {
    FlashError::MediaMalformed { page, what }
}

/// Why [`Media::read`] returned no bytes.
pub(crate) enum ReadFailure {
    /// The page's bytes were discarded ([`Media::discard`]); the read itself happened.
    Discarded,
    /// Anything else.
    Error(FlashError),
}

impl Media {
    /// Copies page `index`'s payload into `data` and its whole OOB area into `oob`.
    pub(crate) fn read(
        &mut self,
        index: u64,
        data: &mut [u8],
        oob: &mut [u8],
        geometry: &Geometry,
    ) -> std::result::Result<(), ReadFailure> {
        match self {
            Media::Ram(ram) => {
                ram.read(index, data, oob);
                Ok(())
            }
            Media::Compact(compact) => {
                compact
                    .read(index, data, oob)
                    .map_err(|failure| match failure {
                        Unreadable::Discarded => ReadFailure::Discarded,
                        Unreadable::Malformed(what) => {
                            ReadFailure::Error(malformed((geometry.page_at(index), what)))
                        }
                    })
            }
            Media::File(file) => file.read(index, data, oob).map_err(ReadFailure::Error),
        }
    }

    /// Drops the bytes of page `index` where the media can (compact media); returns whether it did.
    pub(crate) fn discard(&mut self, index: u64) -> bool {
        match self {
            Media::Compact(compact) => compact.discard(index),
            Media::Ram(_) | Media::File(_) => false,
        }
    }

    /// Touches what reads of pages `indices` will touch in host memory, where that is worth it
    /// (compact media: [`crate::compact::CompactMedia::prefetch`]). Changes nothing.
    pub(crate) fn prefetch(&self, indices: &[u64]) {
        if let Media::Compact(compact) = self {
            compact.prefetch(indices);
        }
    }

    /// [`Media::prefetch`] for reads of a few bytes of each page (compact media:
    /// [`crate::compact::CompactMedia::prefetch_spans`]). Changes nothing.
    pub(crate) fn prefetch_spans(&self, spans: &[(u64, usize, usize)]) {
        if let Media::Compact(compact) = self {
            compact.prefetch_spans(spans);
        }
    }

    /// Stores page `index`'s payload and OOB area; on file media with write-behind on and
    /// `behind_allowed`, queues them ([`WriteBehind`]). Compact media look for no runs in a
    /// `dense` page ([`crate::Flash::program_dense`]).
    pub(crate) fn write(
        &mut self,
        index: u64,
        data: PageBytes<'_>,
        oob: &[u8],
        behind_allowed: bool,
        dense: bool,
    ) -> Result<()> {
        match self {
            Media::Ram(ram) => {
                ram.write(index, data.as_slice(), oob);
                Ok(())
            }
            Media::Compact(compact) => compact
                .write(index, data.as_slice(), oob, dense)
                .map_err(malformed),
            Media::File(file) => file.write(index, data, oob, behind_allowed),
        }
    }

    /// File media: turns write-behind on or off ([`WriteBehind`]); memory media ignore it.
    pub(crate) fn set_write_behind(&mut self, on: bool) -> Result<()> {
        match self {
            Media::File(file) => file.set_write_behind(on),
            Media::Ram(_) | Media::Compact(_) => Ok(()),
        }
    }

    /// The write-behind queue of file media, if on.
    pub(crate) fn write_behind(&self) -> Option<Arc<WriteBehind>> {
        match self {
            Media::File(file) => file.write_behind(),
            Media::Ram(_) | Media::Compact(_) => None,
        }
    }

    /// Erases a block; `erase_sequence` is the program sequence number the next program gets.
    pub(crate) fn erase(
        &mut self,
        block_index: u64,
        erase_count: u32,
        erase_sequence: u64,
    ) -> Result<()> {
        match self {
            Media::Ram(_) => Ok(()),
            Media::Compact(compact) => {
                compact.erase(block_index);
                Ok(())
            }
            Media::File(file) => file.erase(block_index, erase_count, erase_sequence),
        }
    }

    /// The system calls file media made (none for memory media).
    pub(crate) fn file_io(&self) -> Option<FileIo> {
        match self {
            Media::File(file) => Some(file.io()),
            Media::Ram(_) | Media::Compact(_) => None,
        }
    }

    /// File media: where page `index`'s slot lies, for a read made without borrowing the media
    /// (counted as a read). `None` on memory media.
    pub(crate) fn slot_source(&mut self, index: u64) -> Option<SlotSource> {
        match self {
            Media::File(file) => Some(file.slot_source(index)),
            Media::Ram(_) | Media::Compact(_) => None,
        }
    }

    /// A handle that syncs the file media without borrowing them (`None` on memory media).
    pub(crate) fn sync_handle(&self) -> Option<SyncHandle> {
        match self {
            Media::File(file) => Some(file.sync_handle()),
            Media::Ram(_) | Media::Compact(_) => None,
        }
    }

    /// Bytes of page content held in memory (none for file media).
    pub(crate) fn held_bytes(&self) -> u64 {
        match self {
            Media::Ram(ram) => ram.held_bytes(),
            Media::Compact(compact) => compact.stored_bytes(),
            Media::File(_) => 0,
        }
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        match self {
            Media::Ram(_) | Media::Compact(_) => Ok(()),
            Media::File(file) => file.sync(),
        }
    }
}

/// Pages in memory, one allocation per block made at the block's first program, so that a large
/// geometry costs memory only for what is written.
pub(crate) struct RamMedia {
    slot_bytes: usize,
    page_bytes: usize,
    pages_per_block: u64,
    blocks: Vec<Option<Box<[u8]>>>,
    /// Blocks allocated so far (statistics read it per request: no walk over every block).
    held_blocks: u64,
}

impl RamMedia {
    pub(crate) fn new(geometry: &Geometry) -> Self {
        RamMedia {
            slot_bytes: (geometry.page_bytes + geometry.oob_bytes) as usize,
            page_bytes: geometry.page_bytes as usize,
            pages_per_block: u64::from(geometry.pages_per_block),
            blocks: (0..geometry.blocks_total()).map(|_| None).collect(),
            held_blocks: 0,
        }
    }

    fn held_bytes(&self) -> u64 {
        self.held_blocks * self.slot_bytes as u64 * self.pages_per_block
    }

    fn slot(&self, index: u64) -> (usize, usize) {
        let block = (index / self.pages_per_block) as usize;
        let offset = (index % self.pages_per_block) as usize * self.slot_bytes;
        (block, offset)
    }

    fn read(&self, index: u64, data: &mut [u8], oob: &mut [u8]) {
        let (block, offset) = self.slot(index);
        match self.blocks.get(block).and_then(Option::as_ref) {
            Some(bytes) => {
                let slot = &bytes[offset..offset + self.slot_bytes];
                data.copy_from_slice(&slot[..self.page_bytes]);
                oob.copy_from_slice(&slot[self.page_bytes..]);
            }
            None => {
                // Never programmed: the flash layer does not read such pages, but be total anyway.
                data.fill(0xFF);
                oob.fill(0);
            }
        }
    }

    fn write(&mut self, index: u64, data: &[u8], oob: &[u8]) {
        let (block, offset) = self.slot(index);
        let block_bytes = self.slot_bytes * self.pages_per_block as usize;
        let held_blocks = &mut self.held_blocks;
        let bytes = self.blocks[block].get_or_insert_with(|| {
            *held_blocks += 1;
            vec![0u8; block_bytes].into()
        });
        let slot = &mut bytes[offset..offset + self.slot_bytes];
        slot[..self.page_bytes].copy_from_slice(data);
        slot[self.page_bytes..].copy_from_slice(oob);
    }
}
