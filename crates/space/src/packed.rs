//! Data records laid out on pages away from the space layer: a flush on file media packs its
//! records while the device's lock is free ([`RecordPacker::pack`]), and the space layer then
//! programs the pages as they are ([`Space::program_packed`]) where [`Space::append_record`]
//! would have copied and sealed every record under the lock.
//!
//! The pages hold exactly what appending the same records to a fresh page would: the same
//! headers, chunks, checksums and OOB bitmaps.

use kvssd_flash::{Purpose, SimTime};

use crate::layout;
use crate::{
    OpenPage, PageIndex, RecordPointer, Result, Space, Stream, KEY_BYTES_MAX, OOB_KIND_DATA,
    RECORD_HEADER_BYTES,
};

/// What packing pages needs of the space layer's configuration, to be used without it.
#[derive(Debug, Clone)]
pub struct RecordPacker {
    namespace: u32,
    page_bytes: usize,
    /// Capacity of a page buffer: the page and the OOB area a file slot appends to it.
    buffer_bytes: usize,
    chunk_bytes: usize,
    chunks_per_page: u32,
}

/// Where packing put one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On a packed page.
    Packed {
        /// The page's ordinal among the packed pages.
        page: u32,
        /// The record's first chunk on it.
        chunk: u32,
        /// Chunks the record takes.
        chunks: u32,
    },
    /// Not packed (a large record, or lengths a record cannot have): the caller appends it with
    /// [`Space::append_record`], which writes it or says why not.
    Unpacked,
}

/// Records packed onto pages, not yet placed on flash.
#[derive(Debug)]
pub struct PackedRecords {
    namespace: u32,
    pages: Vec<PackedPage>,
    placements: Vec<Placement>,
}

#[derive(Debug)]
struct PackedPage {
    buffer: Vec<u8>,
    bitmap: Vec<u8>,
    used_chunks: u32,
    /// Every record on the page was moved by GC (the page's programs count as GC's).
    all_gc: bool,
}

impl RecordPacker {
    /// Packs records (key, value, and whether GC moved it), in order, onto fresh pages by the
    /// rule of [`Space::append_record`].
    pub fn pack<'a>(
        &self,
        records: impl IntoIterator<Item = (&'a [u8], &'a [u8], bool)>,
    ) -> PackedRecords {
        let mut pages: Vec<PackedPage> = Vec::new();
        let mut placements = Vec::new();
        for (key, value, from_gc) in records {
            let bytes = RECORD_HEADER_BYTES + key.len() + value.len();
            if key.is_empty() || key.len() > KEY_BYTES_MAX || bytes > self.page_bytes {
                placements.push(Placement::Unpacked);
                continue;
            }
            let chunks = bytes.div_ceil(self.chunk_bytes) as u32;
            if pages
                .last()
                .is_none_or(|page| page.used_chunks + chunks > self.chunks_per_page)
            {
                let mut buffer = Vec::with_capacity(self.buffer_bytes);
                buffer.resize(self.page_bytes, 0);
                pages.push(PackedPage {
                    buffer,
                    bitmap: vec![0u8; layout::bitmap_bytes(self.chunks_per_page)],
                    used_chunks: 0,
                    all_gc: true,
                });
            }
            let ordinal = pages.len() as u32 - 1;
            let Some(page) = pages.last_mut() else {
                unreachable!("a page was pushed above")
            };
            let start = page.used_chunks;
            page.used_chunks += layout::write_small(
                &mut page.buffer,
                &mut page.bitmap,
                start,
                self.chunk_bytes,
                self.namespace,
                key,
                value,
            );
            page.all_gc &= from_gc;
            placements.push(Placement::Packed {
                page: ordinal,
                chunk: start,
                chunks,
            });
        }
        PackedRecords {
            namespace: self.namespace,
            pages,
            placements,
        }
    }
}

impl PackedRecords {
    /// Where each record went, in the order given to [`RecordPacker::pack`].
    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }

    /// Pages packed (an upper bound of what [`Space::program_packed`] programs).
    pub fn pages(&self) -> u64 {
        self.pages.len() as u64
    }
}

impl Space {
    /// A packer of namespace `namespace`'s data records ([`RecordPacker::pack`]).
    pub fn record_packer(&self, namespace: u32) -> RecordPacker {
        RecordPacker {
            namespace,
            page_bytes: self.geometry.page_bytes as usize,
            buffer_bytes: (self.geometry.page_bytes + self.geometry.oob_bytes) as usize,
            chunk_bytes: self.config.chunk_bytes as usize,
            chunks_per_page: self.chunks_per_page(),
        }
    }

    /// Places packed records on flash: the data page open in DRAM is programmed first (padded),
    /// then each packed page holding a record with `live` set is programmed on the next log, as
    /// [`Space::append_record`] would have; the last one, if not full, stays open in DRAM for
    /// the next records. Records whose `live` is false are written all the same where they share
    /// a page with live ones, but are not counted valid (nothing will reference them); pages
    /// with no live record are dropped. Returns each record's pointer (`None` for a record not
    /// live or not packed) and when the last program completes.
    ///
    /// `live` has one flag per record packed, in order.
    pub fn program_packed(
        &mut self,
        at: SimTime,
        packed: PackedRecords,
        live: &[bool],
    ) -> Result<(Vec<Option<RecordPointer>>, SimTime)> {
        assert_eq!(live.len(), packed.placements.len(), "one flag per record");
        let namespace = packed.namespace;
        let chunk = self.config.chunk_bytes as u64;
        let mut live_chunks = vec![0u64; packed.pages.len()];
        for (placement, &live) in packed.placements.iter().zip(live) {
            if let (Placement::Packed { page, chunks, .. }, true) = (placement, live) {
                live_chunks[*page as usize] += u64::from(*chunks);
            }
        }
        let mut done = self.close_open_page(at, namespace, Purpose::UserData)?;
        let mut where_page: Vec<Option<(PageIndex, u32)>> = vec![None; packed.pages.len()];
        let last = packed.pages.len().saturating_sub(1);
        let per_page = self.chunks_per_page();
        for (ordinal, page) in packed.pages.into_iter().enumerate() {
            if live_chunks[ordinal] == 0 {
                continue;
            }
            let writer = self.writer(namespace);
            let cursor = writer.next_data;
            writer.next_data = (cursor + 1) % writer.cursors.len();
            let address = self.reserve_page(namespace, cursor, Stream::Data)?;
            let index = self.geometry.page_index(address);
            let block = index / u64::from(self.geometry.pages_per_block);
            let generation = self.erase_generation(block)?;
            self.add_valid(block, live_chunks[ordinal] * chunk);
            where_page[ordinal] = Some((PageIndex(index), generation));
            if ordinal == last && page.used_chunks < per_page {
                self.writer(namespace).open_page = Some(OpenPage {
                    page: address,
                    log: cursor,
                    buffer: page.buffer,
                    bitmap: page.bitmap,
                    used_chunks: page.used_chunks,
                });
                continue;
            }
            let purpose = if page.all_gc {
                Purpose::Gc
            } else {
                Purpose::UserData
            };
            let mut oob = Vec::with_capacity(1 + page.bitmap.len());
            oob.push(OOB_KIND_DATA);
            oob.extend_from_slice(&page.bitmap);
            let finished = self
                .flash
                .program_owned(at, address, purpose, page.buffer, &oob)?;
            done = done.max(finished);
        }
        let mut pointers = Vec::with_capacity(packed.placements.len());
        for (placement, &live) in packed.placements.iter().zip(live) {
            pointers.push(match placement {
                Placement::Packed { page, chunk, .. } if live => {
                    self.stats.records_appended += 1;
                    where_page[*page as usize]
                        .map(|(index, generation)| RecordPointer::new(index, *chunk, generation))
                }
                _ => None,
            });
        }
        Ok((pointers, done))
    }
}
