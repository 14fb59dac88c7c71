//! Page reads on file media made without the flash's lock: the read is issued (timed, counted)
//! under it and its `pread` runs after, so that a device can serve reads in parallel.
//!
//! A page's bytes in a file image change only when it is programmed again, which needs its block
//! erased first; the media bump a per-block erase count before an erase reaches the file. A
//! detached read notes that count when it is issued and compares it after its `pread`: unchanged,
//! the bytes it read are those the page held when the read was issued. Changed, or failing its
//! checksum, the read reports nothing and the caller reads again under the lock, where the retry
//! policy and the typed errors apply.
//!
//! A read may also take a byte range of the page alone ([`Flash::read_detached_range`]): one
//! record, whose own checksum the caller verifies. It copies no more than that range and checks
//! neither the trailer nor the page's checksum, which need the whole slot; the erase count is
//! checked as for a whole page, and the page was programmed since its block's last erase when
//! the read was issued, so the range holds that program's bytes or the caller's checksum fails.

use std::ops::Range;
use std::sync::atomic::Ordering;

use crate::media::SlotSource;
use crate::trailer::{page_crc, Trailer};
use crate::{Flash, FlashError, PageAddress, Purpose, Result, SimTime};

/// A page read issued on file media whose `pread` has not run yet ([`Flash::read_detached`]).
pub struct DetachedRead {
    source: SlotSource,
    index: u64,
    block: usize,
    erasures_at_issue: u32,
    erase_sequence: u64,
    page_bytes: usize,
    /// The bytes of the page to read, if not all of it.
    range: Option<Range<usize>>,
}

impl Flash {
    /// On file media with no faults injected: issues a read of `page` at `at` exactly as
    /// [`Flash::read`] does (the same checks, time and counters) and returns it detached, with
    /// when it completes, for [`DetachedRead::run`] to perform without borrowing the flash.
    /// `None` (nothing issued) on other media or while faults are injected.
    pub fn read_detached(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
    ) -> Result<Option<(DetachedRead, SimTime)>> {
        self.issue_detached(at, page, purpose, None)
    }

    /// [`Flash::read_detached`] for the bytes `range` of the page's payload only (timed and
    /// counted as a whole page read, as NAND reads whole pages). [`DetachedRead::run`] returns
    /// those bytes unverified: the caller checks them (see the module documentation).
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
        self.issue_detached(at, page, purpose, Some(range))
    }

    fn issue_detached(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
        range: Option<Range<usize>>,
    ) -> Result<Option<(DetachedRead, SimTime)>> {
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
            erase_sequence: self.erase_sequence_of(slot),
            page_bytes: self.geometry().page_bytes as usize,
            range,
        };
        Ok(Some((read, done_at)))
    }
}

impl DetachedRead {
    /// Reads the page's slot in one `pread` and verifies it: its payload, or `None` if its block
    /// was erased since the read was issued or the page fails its checksum (read it again under
    /// the lock). A read of a byte range reads and returns those bytes alone, unverified but for
    /// the erase count. Errors only if the file cannot be read.
    pub fn run(&self) -> Result<Option<Vec<u8>>> {
        if let Some(range) = &self.range {
            return self.run_range(range.clone());
        }
        let queued = self
            .source
            .behind
            .as_ref()
            .and_then(|behind| behind.queued(self.index));
        let mut slot = match queued {
            Some(queued) => queued.as_ref().clone(),
            None => {
                let mut slot = vec![0u8; self.source.slot_bytes];
                std::os::unix::fs::FileExt::read_exact_at(
                    &*self.source.file,
                    &mut slot,
                    self.source.offset,
                )
                .map_err(|source| {
                    FlashError::io("read page of a file image".to_string(), source)
                })?;
                slot
            }
        };
        let (data, oob) = slot.split_at(self.page_bytes);
        let trailer = Trailer::decode(oob);
        let user_oob = &oob[crate::OOB_RESERVED_BYTES as usize..];
        let current = trailer.names_program_since(self.erase_sequence)
            && trailer.crc == page_crc(data, user_oob, self.index, trailer.sequence);
        if !current || !self.unerased() {
            return Ok(None);
        }
        slot.truncate(self.page_bytes);
        Ok(Some(slot))
    }

    fn run_range(&self, range: Range<usize>) -> Result<Option<Vec<u8>>> {
        let queued = self
            .source
            .behind
            .as_ref()
            .and_then(|behind| behind.queued(self.index));
        let bytes = match queued {
            Some(queued) => queued[range].to_vec(),
            None => {
                let mut bytes = vec![0u8; range.len()];
                std::os::unix::fs::FileExt::read_exact_at(
                    &*self.source.file,
                    &mut bytes,
                    self.source.offset + range.start as u64,
                )
                .map_err(|source| {
                    FlashError::io("read part of a page of a file image".to_string(), source)
                })?;
                bytes
            }
        };
        if !self.unerased() {
            return Ok(None);
        }
        Ok(Some(bytes))
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
