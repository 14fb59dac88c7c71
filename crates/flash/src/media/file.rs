//! File media ([`super::MediaKind::File`]): page slots in a file or block device.
//!
//! # Image layout (format version 2, all integers little-endian)
//!
//! ```text
//! offset 0            header, 4096 bytes:
//!                       0  magic "KVSSDIMG" (8 bytes)
//!                       8  format version u32 (= 2)
//!                      12  channels u32, ways_per_channel u32, blocks_per_die u32,
//!                          pages_per_block u32, page_bytes u32, oob_bytes u32
//!                      36  block table offset u64, slot offset u64, slot bytes u64, image bytes u64
//!                      68  CRC-32C of bytes 0..68, u32
//!                      72  zero up to 4096
//! 4096                block table, by device-wide block index, 16 bytes a block: erase count u32,
//!                     zero u32, erase sequence u64 (the program sequence number at its last erase)
//! slot offset         page slots: page n (device-wide index) at slot offset + n x slot bytes,
//!                     each the payload (page_bytes) followed by the whole OOB area (oob_bytes);
//!                     the slot offset is rounded up to a multiple of max(4096, page_bytes)
//! ```
//!
//! A page's OOB area starts with the flash layer's 16-byte trailer (magic u32 "PAGE", CRC-32C u32,
//! program sequence u64). A page is programmed if its trailer has the magic number and a sequence
//! at least its block's erase sequence: erasing a block is one write of its table entry, and the
//! pages keep their bytes (which no read can reach). A program writes a page's payload and OOB area in one `pwrite` and a read takes both in
//! one `pread`; the CRC in the trailer covers both, so a write torn anywhere reads as corrupt, or as
//! erased if the trailer never reached the medium.
//!
//! Version 1 kept payloads and OOB areas in two regions, so every program cost two writes; its
//! images are refused with [`FlashError::UnsupportedVersion`].

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use super::PageBytes;
use crate::write_behind::WriteBehind;
use crate::{FlashError, Geometry, Result};

/// The image format version this build writes and reads.
pub const IMAGE_FORMAT_VERSION: u32 = 2;
const IMAGE_MAGIC: &[u8; 8] = b"KVSSDIMG";
const HEADER_BYTES: u64 = 4096;
const HEADER_CHECKED_BYTES: usize = 68;
/// Bytes of a block's entry in the block table: erase count u32, zero u32, erase sequence u64.
const BLOCK_ENTRY_BYTES: u64 = 16;

/// The system calls file media made since they were opened: what one program, read, erase or
/// sync costs on a file, observable without tracing the process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileIo {
    /// `pwrite` calls (page programs, erases' OOB clears and erase counts; not the header).
    pub writes: u64,
    /// `pread` calls for pages (not the header, the block table or the scan at open).
    pub reads: u64,
    /// `fdatasync` calls.
    pub syncs: u64,
}

/// Syncs a file image's writes to stable storage without holding the [`crate::Flash`] it came
/// from, so that a caller can release its locks while `fdatasync` runs. A sync covers every write
/// that returned before it began, whichever handle made it.
pub struct SyncHandle {
    file: Arc<File>,
    path: PathBuf,
    syncs: Arc<AtomicU64>,
    behind: Option<Arc<WriteBehind>>,
}

impl SyncHandle {
    /// `fdatasync` of the image, after writing what write-behind has queued.
    pub fn sync(&self) -> Result<()> {
        if let Some(behind) = &self.behind {
            behind.drain()?;
        }
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.file
            .sync_data()
            .map_err(|source| FlashError::io(format!("sync {}", self.path.display()), source))
    }
}

impl std::fmt::Debug for SyncHandle {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SyncHandle")
            .field("path", &self.path)
            .finish()
    }
}

/// Pages in a file or block device.
pub(crate) struct FileMedia {
    file: Arc<File>,
    path: PathBuf,
    geometry: Geometry,
    layout: Layout,
    /// One page slot (payload then OOB area), so that a page moves in one system call.
    slot: Vec<u8>,
    /// Writes and reads; syncs are in `syncs`, shared with [`SyncHandle`]s.
    io: FileIo,
    syncs: Arc<AtomicU64>,
    /// Per block, erases since the media were opened, bumped before an erase reaches the file:
    /// a read made without the flash's lock ([`crate::DetachedRead`]) compares it before and
    /// after, since only an erase lets a page's bytes change.
    erasures: Arc<[AtomicU32]>,
    /// With write-behind on, programs queue their slots here ([`WriteBehind`]).
    behind: Option<Arc<WriteBehind>>,
}

/// Where a page slot lies in a file image, for a read made without borrowing the media.
pub(crate) struct SlotSource {
    pub(crate) file: Arc<File>,
    pub(crate) offset: u64,
    pub(crate) erasures: Arc<[AtomicU32]>,
    pub(crate) behind: Option<Arc<WriteBehind>>,
}

#[derive(Debug, Clone, Copy)]
struct Layout {
    block_table_offset: u64,
    slot_offset: u64,
    slot_bytes: u64,
    image_bytes: u64,
}

impl Layout {
    fn of(geometry: &Geometry) -> Layout {
        let block_table_offset = HEADER_BYTES;
        let block_table_end = block_table_offset + geometry.blocks_total() * BLOCK_ENTRY_BYTES;
        let alignment = u64::from(geometry.page_bytes).max(4096);
        let slot_offset = block_table_end.div_ceil(alignment) * alignment;
        let slot_bytes = u64::from(geometry.page_bytes) + u64::from(geometry.oob_bytes);
        let image_bytes = slot_offset + geometry.pages_total() * slot_bytes;
        Layout {
            block_table_offset,
            slot_offset,
            slot_bytes,
            image_bytes,
        }
    }

    /// Where page `index`'s slot starts.
    fn slot_at(&self, index: u64) -> u64 {
        self.slot_offset + index * self.slot_bytes
    }
}

/// Opens an image with `O_NOATIME`, so that a `pread` does not ask whether the file's access
/// time needs updating (a few percent of a small read on ext4), or without it where the kernel
/// refuses it (`EPERM`: the process does not own the file).
fn open_without_atime(options: &mut OpenOptions, path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let noatime = rustix::fs::OFlags::NOATIME.bits() as i32;
    match options.clone().custom_flags(noatime).open(path) {
        Err(error) if error.raw_os_error() == Some(rustix::io::Errno::PERM.raw_os_error()) => {
            options.open(path)
        }
        opened => opened,
    }
}

/// What opening an existing image found in it.
pub(crate) struct OpenedImage {
    pub(crate) media: FileMedia,
    pub(crate) erase_counts: Vec<u32>,
    /// Per block, the program sequence number its last erase happened at: a page of the block
    /// whose trailer carries a lower sequence was programmed before that erase.
    pub(crate) erase_sequences: Vec<u64>,
}

impl FileMedia {
    /// Formats `path` (creating a regular file if there is none) for `geometry`.
    pub(crate) fn create(path: &Path, geometry: &Geometry) -> Result<FileMedia> {
        let layout = Layout::of(geometry);
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        let file = open_without_atime(&mut options, path)
            .map_err(|source| FlashError::io(format!("create {}", path.display()), source))?;
        let is_regular = file
            .metadata()
            .map_err(|source| FlashError::io(format!("stat {}", path.display()), source))?
            .is_file();
        if is_regular {
            file.set_len(0)
                .and_then(|()| file.set_len(layout.image_bytes))
                .map_err(|source| FlashError::io(format!("size {}", path.display()), source))?;
        } else {
            require_bytes(&file, path, layout.image_bytes)?;
            // A block device keeps old bytes: zero the block table and every OOB area so that no
            // page of a previous image looks programmed.
            zero_range(
                &file,
                path,
                layout.block_table_offset,
                geometry.blocks_total() * BLOCK_ENTRY_BYTES,
            )?;
            let zeros = vec![0u8; geometry.oob_bytes as usize];
            for index in 0..geometry.pages_total() {
                file.write_all_at(
                    &zeros,
                    layout.slot_at(index) + u64::from(geometry.page_bytes),
                )
                .map_err(|source| FlashError::io(format!("clear {}", path.display()), source))?;
            }
        }
        let media = FileMedia::assemble(file, path, geometry, layout);
        media.write_header()?;
        media
            .file
            .sync_all()
            .map_err(|source| FlashError::io(format!("sync {}", path.display()), source))?;
        Ok(media)
    }

    /// Reads the geometry recorded in an image without opening it for use.
    pub(crate) fn probe(path: &Path) -> Result<Geometry> {
        let file = File::open(path)
            .map_err(|source| FlashError::io(format!("open {}", path.display()), source))?;
        read_header(&file, path)
    }

    /// Opens an existing image; `expected`, if given, must match the recorded geometry.
    pub(crate) fn open(path: &Path, expected: Option<&Geometry>) -> Result<OpenedImage> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        let file = open_without_atime(&mut options, path)
            .map_err(|source| FlashError::io(format!("open {}", path.display()), source))?;
        let geometry = read_header(&file, path)?;
        if let Some(expected) = expected {
            if *expected != geometry {
                return Err(FlashError::GeometryMismatch {
                    path: path.to_path_buf(),
                    image: geometry,
                    requested: *expected,
                });
            }
        }
        let layout = Layout::of(&geometry);
        require_bytes(&file, path, layout.image_bytes)?;
        let mut table = vec![0u8; (geometry.blocks_total() * BLOCK_ENTRY_BYTES) as usize];
        file.read_exact_at(&mut table, layout.block_table_offset)
            .map_err(|source| {
                FlashError::io(format!("read block table of {}", path.display()), source)
            })?;
        let mut erase_counts = Vec::with_capacity(geometry.blocks_total() as usize);
        let mut erase_sequences = Vec::with_capacity(geometry.blocks_total() as usize);
        for entry in table.chunks_exact(BLOCK_ENTRY_BYTES as usize) {
            let mut count = [0u8; 4];
            count.copy_from_slice(&entry[0..4]);
            let mut sequence = [0u8; 8];
            sequence.copy_from_slice(&entry[8..16]);
            erase_counts.push(u32::from_le_bytes(count));
            erase_sequences.push(u64::from_le_bytes(sequence));
        }
        Ok(OpenedImage {
            media: FileMedia::assemble(file, path, &geometry, layout),
            erase_counts,
            erase_sequences,
        })
    }

    fn assemble(file: File, path: &Path, geometry: &Geometry, layout: Layout) -> FileMedia {
        FileMedia {
            file: Arc::new(file),
            path: path.to_path_buf(),
            geometry: *geometry,
            layout,
            slot: vec![0u8; layout.slot_bytes as usize],
            io: FileIo::default(),
            syncs: Arc::new(AtomicU64::new(0)),
            erasures: (0..geometry.blocks_total())
                .map(|_| AtomicU32::new(0))
                .collect(),
            behind: None,
        }
    }

    /// Turns write-behind on or off (off drains the queue first).
    pub(crate) fn set_write_behind(&mut self, on: bool) -> Result<()> {
        match (on, &self.behind) {
            (true, None) => {
                let behind = Arc::new(WriteBehind::new(
                    Arc::clone(&self.file),
                    self.path.clone(),
                    self.layout.slot_offset,
                    self.layout.slot_bytes,
                ));
                behind.start_drainer();
                self.behind = Some(behind);
            }
            (false, Some(behind)) => {
                behind.drain()?;
                self.behind = None;
            }
            _ => {}
        }
        Ok(())
    }

    /// Writes what write-behind has queued.
    fn drain(&self) -> Result<()> {
        self.behind.as_ref().map_or(Ok(()), |behind| behind.drain())
    }

    /// The write-behind queue, if on.
    pub(crate) fn write_behind(&self) -> Option<Arc<WriteBehind>> {
        self.behind.clone()
    }

    /// The system calls made since the media were opened.
    pub(crate) fn io(&self) -> FileIo {
        FileIo {
            syncs: self.syncs.load(Ordering::Relaxed),
            writes: self.io.writes + self.behind.as_ref().map_or(0, |behind| behind.writes()),
            ..self.io
        }
    }

    /// A handle that syncs the file without borrowing the media.
    pub(crate) fn sync_handle(&self) -> SyncHandle {
        SyncHandle {
            file: Arc::clone(&self.file),
            path: self.path.clone(),
            syncs: Arc::clone(&self.syncs),
            behind: self.behind.clone(),
        }
    }

    /// Writes what is queued behind, then syncs the file's data.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.drain()?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.file
            .sync_data()
            .map_err(|source| FlashError::io(format!("sync {}", self.path.display()), source))
    }

    /// Where page `index`'s slot lies, for a read made elsewhere; counts it as a read.
    pub(crate) fn slot_source(&mut self, index: u64) -> SlotSource {
        self.io.reads += 1;
        SlotSource {
            file: Arc::clone(&self.file),
            offset: self.layout.slot_at(index),
            erasures: Arc::clone(&self.erasures),
            behind: self.behind.clone(),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Whether any byte of a block's page slots may have been written: `false` only when the
    /// file system reports the whole range as a hole (`lseek(SEEK_DATA)`), so that opening a
    /// sparse image reads only the blocks ever programmed. Where the file system cannot tell,
    /// every block may hold data.
    pub(crate) fn block_may_hold_data(&self, block_index: u64) -> bool {
        let pages = u64::from(self.geometry.pages_per_block);
        let start = self.layout.slot_at(block_index * pages);
        let end = self.layout.slot_at((block_index + 1) * pages);
        match rustix::fs::seek(&*self.file, rustix::fs::SeekFrom::Data(start)) {
            Ok(data_at) => data_at < end,
            // No data at or after `start`.
            Err(rustix::io::Errno::NXIO) => false,
            Err(_) => true,
        }
    }

    /// Reads the OOB areas of every page of a block into `out` (`pages_per_block` areas of
    /// `oob_bytes`), used at open to find write pointers. The block's slots are read in one
    /// `pread` into `scratch` (resized to the block's slots).
    pub(crate) fn read_block_oob(
        &self,
        block_index: u64,
        scratch: &mut Vec<u8>,
        out: &mut [u8],
    ) -> Result<()> {
        let pages = u64::from(self.geometry.pages_per_block);
        let slot_bytes = self.layout.slot_bytes as usize;
        let page_bytes = self.geometry.page_bytes as usize;
        let oob_bytes = self.geometry.oob_bytes as usize;
        scratch.resize(pages as usize * slot_bytes, 0);
        self.file
            .read_exact_at(scratch, self.layout.slot_at(block_index * pages))
            .map_err(|source| {
                FlashError::io(format!("read OOB of {}", self.path.display()), source)
            })?;
        for (slot, area) in scratch
            .chunks_exact(slot_bytes)
            .zip(out.chunks_exact_mut(oob_bytes))
        {
            area.copy_from_slice(&slot[page_bytes..]);
        }
        Ok(())
    }

    fn write_header(&self) -> Result<()> {
        let header = encode_header(&self.geometry);
        self.file.write_all_at(&header, 0).map_err(|source| {
            FlashError::io(format!("write header of {}", self.path.display()), source)
        })
    }

    /// Reads page `index`'s slot in one `pread` and splits it into payload and OOB area.
    pub(crate) fn read(&mut self, index: u64, data: &mut [u8], oob: &mut [u8]) -> Result<()> {
        if let Some(queued) = self.behind.as_ref().and_then(|behind| behind.queued(index)) {
            let (payload, area) = queued.split_at(data.len());
            data.copy_from_slice(payload);
            oob.copy_from_slice(&area[..oob.len()]);
            return Ok(());
        }
        self.io.reads += 1;
        self.file
            .read_exact_at(&mut self.slot, self.layout.slot_at(index))
            .map_err(|source| {
                FlashError::io(format!("read page of {}", self.path.display()), source)
            })?;
        let (payload, area) = self.slot.split_at(data.len());
        data.copy_from_slice(payload);
        oob.copy_from_slice(&area[..oob.len()]);
        Ok(())
    }

    /// Writes page `index`'s payload and OOB area in one `pwrite` of its slot.
    pub(crate) fn write(
        &mut self,
        index: u64,
        data: PageBytes<'_>,
        oob: &[u8],
        behind_allowed: bool,
    ) -> Result<()> {
        if let Some(behind) = &self.behind {
            if behind_allowed {
                let slot_bytes = self.layout.slot_bytes as usize;
                let mut slot = match data {
                    PageBytes::Owned(page) => page,
                    PageBytes::Borrowed(page) => {
                        let mut slot = Vec::with_capacity(slot_bytes);
                        slot.extend_from_slice(page);
                        slot
                    }
                };
                slot.extend_from_slice(oob);
                slot.resize(slot_bytes, 0);
                behind.queue(index, slot);
                return Ok(());
            }
            behind.drain()?;
        }
        let data = data.as_slice();
        let (payload, area) = self.slot.split_at_mut(data.len());
        payload.copy_from_slice(data);
        area[..oob.len()].copy_from_slice(oob);
        area[oob.len()..].fill(0);
        self.io.writes += 1;
        self.file
            .write_all_at(&self.slot, self.layout.slot_at(index))
            .map_err(|source| {
                FlashError::io(format!("write page of {}", self.path.display()), source)
            })
    }

    /// Erases a block in one write of its block table entry: the new erase count and the
    /// program sequence number the erase happened at. Its pages keep their bytes; a trailer with
    /// a lower sequence belongs to a program before the erase, and opening the image treats
    /// such pages as erased.
    pub(crate) fn erase(
        &mut self,
        block_index: u64,
        erase_count: u32,
        erase_sequence: u64,
    ) -> Result<()> {
        if let Some(erasures) = self.erasures.get(block_index as usize) {
            erasures.fetch_add(1, Ordering::SeqCst);
        }
        let mut entry = [0u8; BLOCK_ENTRY_BYTES as usize];
        entry[0..4].copy_from_slice(&erase_count.to_le_bytes());
        entry[8..16].copy_from_slice(&erase_sequence.to_le_bytes());
        self.io.writes += 1;
        self.file
            .write_all_at(
                &entry,
                self.layout.block_table_offset + block_index * BLOCK_ENTRY_BYTES,
            )
            .map_err(|source| FlashError::io(format!("erase in {}", self.path.display()), source))
    }
}

impl Drop for FileMedia {
    /// Writes what write-behind queued: a process that drops its device without closing it
    /// leaves every program in the file, as without write-behind.
    fn drop(&mut self) {
        let _ = self.drain();
    }
}

/// The header block of an image of `geometry`.
pub(crate) fn encode_header(geometry: &Geometry) -> Vec<u8> {
    let layout = Layout::of(geometry);
    let mut header = vec![0u8; HEADER_BYTES as usize];
    header[0..8].copy_from_slice(IMAGE_MAGIC);
    header[8..12].copy_from_slice(&IMAGE_FORMAT_VERSION.to_le_bytes());
    let g = geometry;
    for (slot, value) in [
        g.channels,
        g.ways_per_channel,
        g.blocks_per_die,
        g.pages_per_block,
        g.page_bytes,
        g.oob_bytes,
    ]
    .into_iter()
    .enumerate()
    {
        header[12 + slot * 4..16 + slot * 4].copy_from_slice(&value.to_le_bytes());
    }
    for (slot, value) in [
        layout.block_table_offset,
        layout.slot_offset,
        layout.slot_bytes,
        layout.image_bytes,
    ]
    .into_iter()
    .enumerate()
    {
        header[36 + slot * 8..44 + slot * 8].copy_from_slice(&value.to_le_bytes());
    }
    let crc = crc32c::crc32c(&header[..HEADER_CHECKED_BYTES]);
    header[HEADER_CHECKED_BYTES..HEADER_CHECKED_BYTES + 4].copy_from_slice(&crc.to_le_bytes());
    header
}

fn read_header(file: &File, path: &Path) -> Result<Geometry> {
    let mut header = [0u8; IMAGE_HEADER_READ_BYTES];
    let length = device_bytes(file, path)?;
    if length < header.len() as u64 {
        return Err(FlashError::NotAnImage {
            path: path.to_path_buf(),
        });
    }
    file.read_exact_at(&mut header, 0)
        .map_err(|source| FlashError::io(format!("read header of {}", path.display()), source))?;
    decode_header(&header).map_err(|error| error.at(path))
}

/// Bytes of the header that are read back: the checked fields and their CRC.
pub(crate) const IMAGE_HEADER_READ_BYTES: usize = HEADER_CHECKED_BYTES + 4;

/// Why the first bytes of a file are not a usable image header (the file's path is added when
/// this becomes a [`FlashError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// No kvssd magic, or too short.
    #[error("no kvssd image header")]
    NotAnImage,
    /// The CRC does not match.
    #[error("the image header is corrupt (checksum mismatch)")]
    Corrupt,
    /// Another format version.
    #[error("image format version {0} is not supported")]
    UnsupportedVersion(u32),
    /// The recorded geometry is invalid.
    #[error(transparent)]
    Geometry(crate::GeometryError),
}

impl HeaderError {
    fn at(self, path: &Path) -> FlashError {
        let path = path.to_path_buf();
        match self {
            HeaderError::NotAnImage => FlashError::NotAnImage { path },
            HeaderError::Corrupt => FlashError::HeaderCorrupt { path },
            HeaderError::UnsupportedVersion(found) => FlashError::UnsupportedVersion {
                path,
                found,
                supported: IMAGE_FORMAT_VERSION,
            },
            HeaderError::Geometry(error) => FlashError::Geometry(error),
        }
    }
}

fn header_word(header: &[u8], offset: usize) -> Option<u32> {
    let bytes = header.get(offset..offset + 4)?;
    Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Decodes the header at the start of an image: magic, CRC, then the fields.
pub(crate) fn decode_header(header: &[u8]) -> std::result::Result<Geometry, HeaderError> {
    if header.len() < IMAGE_HEADER_READ_BYTES || &header[0..8] != IMAGE_MAGIC {
        return Err(HeaderError::NotAnImage);
    }
    let stored_crc = header_word(header, HEADER_CHECKED_BYTES);
    if Some(crc32c::crc32c(&header[..HEADER_CHECKED_BYTES])) != stored_crc {
        return Err(HeaderError::Corrupt);
    }
    decode_header_fields(header)
}

/// The header's fields, checked (version, geometry) but without the CRC: what
/// [`decode_header`] does once the checksum matched. The fuzz target calls this directly.
pub(crate) fn decode_header_fields(header: &[u8]) -> std::result::Result<Geometry, HeaderError> {
    let word = |offset: usize| header_word(header, offset).ok_or(HeaderError::NotAnImage);
    let version = word(8)?;
    if version != IMAGE_FORMAT_VERSION {
        return Err(HeaderError::UnsupportedVersion(version));
    }
    let geometry = Geometry {
        channels: word(12)?,
        ways_per_channel: word(16)?,
        blocks_per_die: word(20)?,
        pages_per_block: word(24)?,
        page_bytes: word(28)?,
        oob_bytes: word(32)?,
    };
    geometry.validate().map_err(HeaderError::Geometry)?;
    Ok(geometry)
}

/// Bytes a file image of `geometry` takes (header, block table and page slots).
pub(crate) fn image_bytes(geometry: &Geometry) -> u64 {
    Layout::of(geometry).image_bytes
}

/// Refuses a file or device shorter than `needed` bytes ([`FlashError::ImageTooSmall`]).
fn require_bytes(file: &File, path: &Path, needed: u64) -> Result<()> {
    let actual = device_bytes(file, path)?;
    if actual < needed {
        return Err(FlashError::ImageTooSmall {
            path: path.to_path_buf(),
            needed,
            actual,
        });
    }
    Ok(())
}

fn device_bytes(file: &File, path: &Path) -> Result<u64> {
    // `metadata().len()` is zero for block devices; seeking to the end works for both.
    let mut handle = file;
    handle
        .seek(SeekFrom::End(0))
        .map_err(|source| FlashError::io(format!("size of {}", path.display()), source))
}

fn zero_range(file: &File, path: &Path, offset: u64, bytes: u64) -> Result<()> {
    const CHUNK: u64 = 1 << 20;
    let zeros = vec![0u8; CHUNK as usize];
    let mut done = 0;
    while done < bytes {
        let length = CHUNK.min(bytes - done);
        file.write_all_at(&zeros[..length as usize], offset + done)
            .map_err(|source| FlashError::io(format!("clear {}", path.display()), source))?;
        done += length;
    }
    Ok(())
}
