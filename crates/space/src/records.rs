//! Meta pages and data records: programming them, reading them back, and dropping them from the
//! valid-byte accounting when the index no longer references them.

use crate::layout;
use crate::pointer;
use crate::{BlockInfo, OpenPage, Result};
use crate::{
    BlockUse, PageIndex, Record, RecordHeader, RecordPointer, Space, SpaceError, Stream,
    KEY_BYTES_MAX, LARGE_HEADER_BYTES, OOB_KIND_DATA, OOB_KIND_LARGE, OOB_KIND_META,
    RECORD_HEADER_BYTES,
};
use kvssd_flash::{PageAddress, PageView, Purpose, SimTime};

impl Space {
    /// Programs one meta page (exactly `page_bytes`) on the next log; returns its index and when the
    /// program completes. A meta page is keys and pointers, programmed as a dense page
    /// ([`kvssd_flash::Flash::program_dense`]).
    pub fn write_meta(
        &mut self,
        at: SimTime,
        purpose: Purpose,
        namespace: u32,
        data: &[u8],
    ) -> Result<(PageIndex, SimTime)> {
        let writer = self.writer(namespace);
        let cursor = writer.next_meta;
        writer.next_meta = (cursor + 1) % writer.cursors.len();
        let page = self.reserve_page(namespace, cursor, Stream::Meta)?;
        let done = self
            .flash
            .program_dense(at, page, purpose, data, &[OOB_KIND_META])?;
        let index = self.geometry.page_index(page);
        self.add_valid(
            index / u64::from(self.geometry.pages_per_block),
            u64::from(self.geometry.page_bytes),
        );
        Ok((PageIndex(index), done))
    }

    /// Reads a whole page (meta pages are read this way), with the flash layer's read retry
    /// ([`kvssd_flash::Flash::read_retrying`]).
    pub fn read_page(
        &mut self,
        at: SimTime,
        page: PageIndex,
        purpose: Purpose,
    ) -> Result<(Vec<u8>, SimTime)> {
        let mut data = Vec::new();
        let done = self.read_page_into(at, page, purpose, &mut data)?;
        Ok((data, done))
    }

    /// [`Space::read_page`] into `data`, resized to a page: a reader of many pages in turn (a
    /// merge) reuses one buffer.
    pub fn read_page_into(
        &mut self,
        at: SimTime,
        page: PageIndex,
        purpose: Purpose,
        data: &mut Vec<u8>,
    ) -> Result<SimTime> {
        data.resize(self.geometry.page_bytes as usize, 0);
        let address = self.page_address(page)?;
        let read = self
            .flash
            .read_retrying(at, address, purpose, data, &mut [])?;
        Ok(read.done_at)
    }

    /// Reads page `page` with the time, counters and retries of [`Space::read_page`], and calls
    /// `parts` with a view of its payload ([`kvssd_flash::Flash::read_parts`]): a reader that
    /// needs a few ranges of the page copies only those. Returns what `parts` returned, and when
    /// the read completed.
    pub fn read_page_parts<R>(
        &mut self,
        at: SimTime,
        page: PageIndex,
        purpose: Purpose,
        parts: impl FnOnce(&PageView<'_>) -> R,
    ) -> Result<(R, SimTime)> {
        let address = self.page_address(page)?;
        let (found, read) = self.flash.read_parts(at, address, purpose, parts)?;
        Ok((found, read.done_at))
    }

    pub(crate) fn page_address(&self, page: PageIndex) -> Result<PageAddress> {
        if page.0 >= self.geometry.pages_total() {
            return Err(SpaceError::Malformed {
                page,
                what: "page index outside the device",
            });
        }
        Ok(self.geometry.page_at(page.0))
    }

    /// Reports that a meta page is no longer referenced. If no reader can reach it any more (no
    /// live snapshot protects its block, and no durable checkpoint predates the block), the flash
    /// is told to discard it ([`kvssd_flash::Flash::discard`]): compact media free its bytes.
    /// GC still reads it with its block, at the same cost, and skips it.
    pub fn invalidate_meta(&mut self, page: PageIndex) {
        self.invalidate_meta_bytes(page, u64::from(self.geometry.page_bytes));
        self.discard_consumed_meta(page);
    }

    /// Frees the media's bytes of a meta page that a step in progress has read for the last time
    /// and will report invalid when it completes ([`Space::invalidate_meta`]), if no other reader
    /// can reach it (the same rule as there). The page stays valid for the space's accounting
    /// until then, so GC and the counters see exactly what they would without this call; only
    /// compact media free anything. A merge streams its lower level through this, so that the
    /// old level and the new one never both sit in memory. A step that fails after this call
    /// leaves a reference to a page that reads as [`kvssd_flash::FlashError::Discarded`] — a
    /// typed error, never wrong bytes.
    pub fn discard_consumed_meta(&mut self, page: PageIndex) {
        let block = page.0 / u64::from(self.geometry.pages_per_block);
        let unreachable = self.blocks.get(block as usize).is_some_and(|info| {
            info.usage == BlockUse::Used(Stream::Meta)
                && info.allocated >= self.durable_allocations()
        }) && !self.is_protected(block);
        if unreachable {
            // A page the flash cannot find is simply not discarded: this is only a hint.
            let _ = self.flash.discard(self.geometry.page_at(page.0));
        }
    }

    /// Reports that `bytes` of meta page `page` are no longer referenced: for an index that packs
    /// several items into a page and frees them one at a time (the `block` FTL's logical blocks).
    pub fn invalidate_meta_bytes(&mut self, page: PageIndex, bytes: u64) {
        let block = page.0 / u64::from(self.geometry.pages_per_block);
        if let Some(BlockInfo {
            usage: BlockUse::Used(Stream::Meta),
            ..
        }) = self.blocks.get(block as usize)
        {
            self.sub_valid(block, bytes);
        }
    }

    /// Programs the data page open in DRAM, padded after its last record.
    pub(crate) fn close_open_page(
        &mut self,
        at: SimTime,
        namespace: u32,
        purpose: Purpose,
    ) -> Result<SimTime> {
        let Some(open) = self.writer(namespace).open_page.take() else {
            return Ok(at);
        };
        if open.used_chunks < self.chunks_per_page() {
            self.stats.data_pages_padded += 1;
        }
        let mut oob = vec![OOB_KIND_DATA];
        oob.extend_from_slice(&open.bitmap);
        let done = self
            .flash
            .program_owned(at, open.page, purpose, open.buffer, &oob)?;
        let _ = open.log;
        Ok(done)
    }

    /// Programs the partly filled data page, if any, so everything appended so far is on flash.
    pub fn sync(&mut self, at: SimTime, namespace: u32, purpose: Purpose) -> Result<SimTime> {
        self.close_open_page(at, namespace, purpose)
    }

    /// Appends a data record; returns where it is and when the last program it caused completes.
    /// Small records are packed into the page open in DRAM, which is programmed when the next record
    /// does not fit; a large record is programmed at once on whole pages of one log.
    pub fn append_record(
        &mut self,
        at: SimTime,
        purpose: Purpose,
        namespace: u32,
        key: &[u8],
        value: &[u8],
    ) -> Result<(RecordPointer, SimTime)> {
        if key.is_empty() || key.len() > KEY_BYTES_MAX || value.len() > u32::MAX as usize {
            return Err(SpaceError::RecordTooLarge(format!(
                "key of {} bytes, value of {} bytes",
                key.len(),
                value.len()
            )));
        }
        if self.is_large(key.len(), value.len()) {
            return self.append_large(at, purpose, namespace, key, value);
        }
        let chunk = self.config.chunk_bytes as usize;
        let chunks = (RECORD_HEADER_BYTES + key.len() + value.len()).div_ceil(chunk) as u32;
        let mut done = at;
        let per_page = self.chunks_per_page();
        if let Some(open) = &self.writer(namespace).open_page {
            if open.used_chunks + chunks > per_page {
                done = self.close_open_page(at, namespace, purpose)?;
            }
        }
        if self.writer(namespace).open_page.is_none() {
            let writer = self.writer(namespace);
            let cursor = writer.next_data;
            writer.next_data = (cursor + 1) % writer.cursors.len();
            let page = self.reserve_page(namespace, cursor, Stream::Data)?;
            let open = OpenPage {
                page,
                log: cursor,
                buffer: self.flash.page_buffer(),
                bitmap: vec![0u8; layout::bitmap_bytes(per_page)],
                used_chunks: 0,
            };
            self.writer(namespace).open_page = Some(open);
        }
        let geometry = self.geometry;
        let page_index = match &self.writer(namespace).open_page {
            Some(open) => geometry.page_index(open.page),
            None => unreachable!("a page was opened above"),
        };
        let block = page_index / u64::from(self.geometry.pages_per_block);
        let generation = self.erase_generation(block)?;
        let Some(open) = self.writer(namespace).open_page.as_mut() else {
            unreachable!("a page was opened above")
        };
        let start = open.used_chunks;
        let written = layout::write_small(
            &mut open.buffer,
            &mut open.bitmap,
            start,
            chunk,
            namespace,
            key,
            value,
        );
        debug_assert_eq!(written, chunks);
        open.used_chunks += chunks;
        self.add_valid(block, u64::from(chunks) * chunk as u64);
        self.stats.records_appended += 1;
        let pointer = RecordPointer::new(PageIndex(page_index), start, generation);
        Ok((pointer, done))
    }

    pub(crate) fn append_large(
        &mut self,
        at: SimTime,
        purpose: Purpose,
        namespace: u32,
        key: &[u8],
        value: &[u8],
    ) -> Result<(RecordPointer, SimTime)> {
        let pages = self.large_record_pages(key.len(), value.len());
        if pages > u64::from(u16::MAX) {
            return Err(SpaceError::RecordTooLarge(format!(
                "a value of {} bytes needs {pages} pages, more than a record can span",
                value.len()
            )));
        }
        let writer = self.writer(namespace);
        let cursor = writer.next_data;
        writer.next_data = (cursor + 1) % writer.cursors.len();
        let mut done = at;
        // The open small-record page may hold the log's next page; it must be programmed first.
        if self
            .writer(namespace)
            .open_page
            .as_ref()
            .is_some_and(|open| open.log == cursor)
        {
            done = self.close_open_page(at, namespace, purpose)?;
        }
        let per_page = self.geometry.page_bytes as usize - LARGE_HEADER_BYTES - key.len();
        let mut head: Option<RecordPointer> = None;
        for (part, slice) in value.chunks(per_page.max(1)).enumerate() {
            let page = self.reserve_page(namespace, cursor, Stream::Data)?;
            let index = self.geometry.page_index(page);
            let block = index / u64::from(self.geometry.pages_per_block);
            let pointer = match head {
                Some(pointer) => pointer,
                None => {
                    let pointer =
                        RecordPointer::new(PageIndex(index), 0, self.erase_generation(block)?);
                    head = Some(pointer);
                    pointer
                }
            };
            let mut buffer = vec![0u8; self.geometry.page_bytes as usize];
            let header = RecordHeader {
                kind: layout::RECORD_KIND_LARGE,
                key_len: key.len() as u8,
                part: part as u16,
                namespace,
                value_len: value.len() as u32,
            };
            header.encode(&mut buffer[..RECORD_HEADER_BYTES]);
            buffer[RECORD_HEADER_BYTES..LARGE_HEADER_BYTES]
                .copy_from_slice(&pointer.raw().to_le_bytes());
            buffer[LARGE_HEADER_BYTES..LARGE_HEADER_BYTES + key.len()].copy_from_slice(key);
            let value_at = LARGE_HEADER_BYTES + key.len();
            buffer[value_at..value_at + slice.len()].copy_from_slice(slice);
            layout::seal(&mut buffer);
            let programmed = self
                .flash
                .program(at, page, purpose, &buffer, &[OOB_KIND_LARGE])?;
            done = done.max(programmed);
            self.add_valid(block, u64::from(self.geometry.page_bytes));
        }
        self.stats.large_records_appended += 1;
        match head {
            Some(pointer) => Ok((pointer, done)),
            None => Err(SpaceError::RecordTooLarge(
                "a large record with no pages".into(),
            )),
        }
    }

    /// The pages of a large record, head first, following each block's successor in its log.
    pub(crate) fn large_pages(&self, head: RecordPointer, pages: u64) -> Result<Vec<PageIndex>> {
        let per_block = u64::from(self.geometry.pages_per_block);
        let mut out = Vec::with_capacity(pages as usize);
        let mut current = head.page().0;
        for part in 0..pages {
            if part > 0 {
                if (current + 1) % per_block != 0 {
                    current += 1;
                } else {
                    let block = current / per_block;
                    let Some((next, generation)) = self
                        .blocks
                        .get(block as usize)
                        .and_then(|info| info.successor)
                    else {
                        return Err(SpaceError::StalePointer(head));
                    };
                    if self.erase_generation(next)? != generation {
                        return Err(SpaceError::StalePointer(head));
                    }
                    current = next * per_block;
                }
            }
            out.push(PageIndex(current));
        }
        Ok(out)
    }

    pub(crate) fn check_generation(&self, pointer: RecordPointer) -> Result<bool> {
        let block = pointer.page().0 / u64::from(self.geometry.pages_per_block);
        if block >= self.geometry.blocks_total() {
            return Ok(false);
        }
        Ok(self.erase_generation(block)? & pointer::GENERATION_MASK == pointer.generation())
    }

    /// The open page in DRAM that will be programmed at `page`, if a writer holds one.
    pub(crate) fn open_page_holding(&self, page: PageIndex) -> Option<&OpenPage> {
        self.writers.values().find_map(|writer| {
            writer
                .open_page
                .as_ref()
                .filter(|open| self.geometry.page_index(open.page) == page.0)
        })
    }

    /// Warns the host's memory of the records about to be read ([`kvssd_flash::Flash::prefetch`]):
    /// a reader of many records at once (a scan) touches their pages together first. Changes
    /// nothing the simulation sees.
    pub fn prefetch_records(&self, pointers: impl IntoIterator<Item = RecordPointer>) {
        self.prefetch_pages(pointers.into_iter().map(|pointer| pointer.page()));
    }

    /// Warns the host's memory of pages about to be read ([`kvssd_flash::Flash::prefetch`]), as
    /// [`Space::prefetch_records`] does for records. Changes nothing the simulation sees; pages
    /// outside the device are skipped.
    pub fn prefetch_pages(&self, pages: impl IntoIterator<Item = PageIndex>) {
        let pages: Vec<PageAddress> = pages
            .into_iter()
            .filter_map(|page| self.page_address(page).ok())
            .collect();
        self.flash.prefetch(&pages);
    }

    /// Warns the host's memory of reads of a few bytes of pages: for each `(page, offset,
    /// length)`, payload bytes `offset..offset + length` ([`kvssd_flash::Flash::prefetch_spans`]).
    /// Changes nothing the simulation sees; pages outside the device are skipped.
    pub fn prefetch_page_spans(&self, spans: impl IntoIterator<Item = (PageIndex, usize, usize)>) {
        let spans: Vec<(PageAddress, usize, usize)> = spans
            .into_iter()
            .filter_map(|(page, offset, length)| {
                Some((self.page_address(page).ok()?, offset, length))
            })
            .collect();
        self.flash.prefetch_spans(&spans);
    }

    /// Payload bytes of page `page` as they are now, with no time, counter or rule
    /// ([`kvssd_flash::Flash::peek`]): for a hint about what a reader will need next, never for
    /// what the simulation serves. Returns whether `out` was filled.
    pub fn peek_page(&self, page: PageIndex, offset: usize, out: &mut [u8]) -> bool {
        self.page_address(page)
            .is_ok_and(|address| self.flash.peek(address, offset, out))
    }

    /// Reads the record a pointer names (from the open page in DRAM if it is still there).
    pub fn read_record(
        &mut self,
        at: SimTime,
        pointer: RecordPointer,
        purpose: Purpose,
    ) -> Result<(Record, SimTime)> {
        if !self.check_generation(pointer)? {
            return Err(SpaceError::StalePointer(pointer));
        }
        let page = pointer.page();
        let chunk = self.config.chunk_bytes as usize;
        if let Some(open) = self.open_page_holding(page) {
            {
                let record =
                    layout::decode_small(&open.buffer, pointer.chunk() as usize * chunk, page)?;
                return Ok((record, at));
            }
        }
        // A small record is copied out of the page alone: on compact media only its bytes are
        // decoded. Any other kind needs the whole page.
        let offset = pointer.chunk() as usize * chunk;
        let page_bytes = self.geometry.page_bytes as usize;
        let contents = self.read_contents();
        let (found, done) = self.read_page_parts(at, page, purpose, |view| {
            if offset + RECORD_HEADER_BYTES > page_bytes {
                return Err(SpaceError::Malformed {
                    page,
                    what: "record header runs past the page",
                });
            }
            let mut head = [0u8; RECORD_HEADER_BYTES];
            view.copy(offset, &mut head)?;
            let header = RecordHeader::decode(&head, 0, page)?;
            if header.kind == layout::RECORD_KIND_SMALL {
                let length =
                    RECORD_HEADER_BYTES + header.key_len as usize + header.value_len as usize;
                if offset + length > page_bytes {
                    return Err(SpaceError::Malformed {
                        page,
                        what: "record runs past the page",
                    });
                }
                // Key and value straight into their own buffers, each copy going on where the
                // last one left the page.
                let key_at = offset + RECORD_HEADER_BYTES;
                let mut key = vec![0u8; header.key_len as usize];
                view.copy(key_at, &mut key)?;
                let mut value = vec![0u8; header.value_len as usize];
                view.copy(key_at + key.len(), &mut value)?;
                return Ok(Found::Small(layout::small_from_parts(
                    &head, &header, key, value, page, contents,
                )?));
            }
            let mut whole = vec![0u8; page_bytes];
            view.copy(0, &mut whole)?;
            Ok(Found::Whole(header, whole))
        })?;
        let (header, data) = match found? {
            Found::Small(record) => return Ok((record, done)),
            Found::Whole(header, data) => (header, data),
        };
        if header.kind != layout::RECORD_KIND_LARGE || header.part != 0 || pointer.chunk() != 0 {
            return Err(SpaceError::Malformed {
                page,
                what: "pointer does not name the start of a record",
            });
        }
        let key_len = header.key_len as usize;
        let value_len = header.value_len as usize;
        let pages = self.large_record_pages(key_len, value_len);
        let all = self.large_pages(pointer, pages)?;
        let per_page = self.geometry.page_bytes as usize - LARGE_HEADER_BYTES - key_len;
        let key = layout::decode_large_head(&data, page)?.1.to_vec();
        let mut value = Vec::with_capacity(value_len);
        let mut finished = done;
        for (part, &part_page) in all.iter().enumerate() {
            let (bytes, part_done) = if part == 0 {
                (data.clone(), done)
            } else {
                // Later parts are issued at the same time: they are on one die, which serialises them.
                self.read_page(at, part_page, purpose)?
            };
            finished = finished.max(part_done);
            let take = per_page.min(value_len - value.len());
            value.extend_from_slice(layout::decode_large_part(
                &bytes, part, &key, take, part_page,
            )?);
        }
        Ok((
            Record {
                namespace: header.namespace,
                key,
                value,
            },
            finished,
        ))
    }

    /// Reports that a record is no longer referenced. Pointers into blocks erased since the record
    /// was written are ignored (the erase already dropped their bytes from the accounting).
    pub fn invalidate_record(&mut self, pointer: RecordPointer, key_len: usize, value_len: usize) {
        let Ok(true) = self.check_generation(pointer) else {
            return;
        };
        let per_block = u64::from(self.geometry.pages_per_block);
        if self.is_large(key_len, value_len) {
            let pages = self.large_record_pages(key_len, value_len);
            if let Ok(all) = self.large_pages(pointer, pages) {
                for page in all {
                    self.sub_valid(page.0 / per_block, u64::from(self.geometry.page_bytes));
                }
            }
        } else {
            let bytes = self.record_footprint(key_len, value_len);
            self.sub_valid(pointer.page().0 / per_block, bytes);
        }
    }
}

/// What a record read found in its page.
enum Found {
    /// A small record, whole.
    Small(Record),
    /// The first page of a large record: its header and the page.
    Whole(RecordHeader, Vec<u8>),
}
