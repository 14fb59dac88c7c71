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

use std::ops::Range;
use std::sync::atomic::Ordering;

use crate::media::SlotSource;
use crate::{Flash, FlashError, PageAddress, Purpose, Result, SimTime};

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
        let queued = self
            .source
            .behind
            .as_ref()
            .and_then(|behind| behind.queued(self.index));
        let bytes = match queued {
            Some(queued) => queued[self.range.clone()].to_vec(),
            None => {
                let mut bytes = vec![0u8; self.range.len()];
                std::os::unix::fs::FileExt::read_exact_at(
                    &*self.source.file,
                    &mut bytes,
                    self.source.offset + self.range.start as u64,
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
