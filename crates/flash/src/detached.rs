//! Reads of part of a page on file media made without the flash's lock: the read is issued
//! (timed, counted) under it and its `pread` runs after, so that a device can serve reads in
//! parallel.
//!
//! A read takes a byte range of the page's payload ([`Flash::read_detached_range`]): one record,
//! whose own checksum the caller verifies. It copies no more than that range and checks neither
//! the trailer nor the page's checksum, which need the whole slot. A page's bytes in a file image
//! change only when it is programmed again, which needs its block erased first; the media bump a
//! per-block erase count before an erase reaches the file. A detached read notes that count when
//! it is issued and compares it after its `pread`: unchanged, the bytes it read are those of the
//! program the page held when the read was issued (it was programmed since its block's last
//! erase), or the caller's checksum fails. Changed, the read reports nothing, and the caller reads
//! again under the lock, where the retry policy and the typed errors apply.

use std::fs::File;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::media::SlotSource;
use crate::{Flash, FlashError, PageAddress, Purpose, Result, SimTime};

/// Most bytes one `pread` of [`DetachedRead::run_all`] reads.
pub const SPAN_BYTES_MAX: u64 = 256 << 10;
/// Most bytes [`DetachedRead::run_all`] reads and does not use between two ranges it reads with
/// one `pread`: a page's OOB area and a few records.
pub const GAP_BYTES_MAX: u64 = 4 << 10;

/// A read of part of a page, issued on file media, whose `pread` has not run yet
/// ([`Flash::read_detached_range`]).
pub struct DetachedRead {
    source: SlotSource,
    index: u64,
    block: usize,
    erasures_at_issue: u32,
    /// The bytes of the page's payload to read.
    range: Range<usize>,
}

impl Flash {
    /// On file media with no faults injected: issues a read of the bytes `range` of `page`'s
    /// payload at `at` with the checks, time and counters of a whole page read ([`Flash::read`]:
    /// NAND reads whole pages) and returns it detached, with when it completes, for
    /// [`DetachedRead::run`] to perform without borrowing the flash. `None` (nothing issued) on
    /// other media or while faults are injected.
    pub fn read_detached_range(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
        range: Range<usize>,
    ) -> Result<Option<(DetachedRead, SimTime)>> {
        let page_bytes = self.geometry().page_bytes as usize;
        if range.start > range.end || range.end > page_bytes {
            return Err(FlashError::BufferSize {
                what: "a detached read's range end (an upper bound)",
                expected: page_bytes,
                actual: range.end,
            });
        }
        if !self.detachable() {
            return Ok(None);
        }
        let slot = self.readable_slot(page)?;
        let index = self.geometry().page_index(page);
        let Some(source) = self.slot_source(index) else {
            return Ok(None);
        };
        let erasures_at_issue = source
            .erasures
            .get(slot)
            .map_or(0, |count| count.load(Ordering::SeqCst));
        self.count_operation();
        let done_at = self.time_read(at, page, purpose);
        let read = DetachedRead {
            source,
            index,
            block: slot,
            erasures_at_issue,
            range,
        };
        Ok(Some((read, done_at)))
    }
}

impl DetachedRead {
    /// Reads the range in one `pread` (or from the write-behind queue) and returns its bytes,
    /// unverified but for the erase count: `None` if the page's block was erased since the read
    /// was issued (read it again under the lock). Errors only if the file cannot be read.
    pub fn run(&self) -> Result<Option<Vec<u8>>> {
        let bytes = match self.queued_bytes() {
            Some(bytes) => bytes,
            None => self.read_from_file()?,
        };
        if !self.unerased() {
            return Ok(None);
        }
        Ok(Some(bytes))
    }

    /// Runs every read of `reads` as [`DetachedRead::run`] does, with the same answers in the
    /// same order, but reads ranges of one file that lie close together (a scan's values written
    /// by one flush, in key order) with one `pread` of the span that holds them: at most
    /// `SPAN_BYTES_MAX` (256 KiB), with at most `GAP_BYTES_MAX` (4 KiB) unused between two ranges.
    pub fn run_all(reads: &[&DetachedRead]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out: Vec<Option<Vec<u8>>> = vec![None; reads.len()];
        let mut from_file = Vec::with_capacity(reads.len());
        for (position, read) in reads.iter().enumerate() {
            match read.queued_bytes() {
                Some(bytes) => out[position] = Some(bytes),
                None => from_file.push(position),
            }
        }
        from_file.sort_unstable_by_key(|&position| {
            let read = reads[position];
            (
                Arc::as_ptr(&read.source.file) as usize,
                read.file_range().start,
            )
        });
        let mut span = Vec::new();
        let mut group = 0;
        while group < from_file.len() {
            let first = reads[from_file[group]];
            let start = first.file_range().start;
            let mut end = first.file_range().end;
            let mut group_end = group + 1;
            while let Some(&position) = from_file.get(group_end) {
                let range = reads[position].file_range();
                let joins = Arc::ptr_eq(&reads[position].source.file, &first.source.file)
                    && range.start <= end + GAP_BYTES_MAX
                    && range.end.max(end) - start <= SPAN_BYTES_MAX;
                if !joins {
                    break;
                }
                end = end.max(range.end);
                group_end += 1;
            }
            if group_end == group + 1 {
                out[from_file[group]] = Some(first.read_from_file()?);
            } else {
                span.resize((end - start) as usize, 0);
                read_file(&first.source.file, &mut span, start)?;
                for &position in &from_file[group..group_end] {
                    let range = reads[position].file_range();
                    let within = (range.start - start) as usize..(range.end - start) as usize;
                    out[position] = Some(span[within].to_vec());
                }
            }
            group = group_end;
        }
        for (answer, read) in out.iter_mut().zip(reads) {
            if !read.unerased() {
                *answer = None;
            }
        }
        Ok(out)
    }

    /// The range's bytes from the write-behind queue, if its page has not reached the file yet.
    fn queued_bytes(&self) -> Option<Vec<u8>> {
        let behind = self.source.behind.as_ref()?;
        behind
            .queued(self.index)
            .map(|queued| queued[self.range.clone()].to_vec())
    }

    /// The range's bytes, read from the file in one `pread`.
    fn read_from_file(&self) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; self.range.len()];
        read_file(&self.source.file, &mut bytes, self.file_range().start)?;
        Ok(bytes)
    }

    /// Where the range lies in the file.
    fn file_range(&self) -> Range<u64> {
        let start = self.source.offset + self.range.start as u64;
        start..start + self.range.len() as u64
    }

    /// Whether the page's block has not been erased since the read was issued.
    fn unerased(&self) -> bool {
        let erasures = self
            .source
            .erasures
            .get(self.block)
            .map_or(0, |count| count.load(Ordering::SeqCst));
        erasures == self.erasures_at_issue
    }
}

fn read_file(file: &File, bytes: &mut [u8], offset: u64) -> Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, bytes, offset)
        .map_err(|source| FlashError::io("read part of a page of a file image".to_string(), source))
}
