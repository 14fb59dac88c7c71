//! Reading parts of a page: [`Flash::read_parts`] reads a page once, with the time, counters and
//! rules of [`Flash::read`], and lets the caller copy out only the byte ranges it needs, or read
//! them where they lie ([`PageView::in_place`]). On compact media with nothing to verify, only
//! those ranges are decoded (a GET's one record of a page of eight costs an eighth of the page),
//! and a copy that starts at or after where the last one ended goes on from there; otherwise the
//! whole page is read and the ranges are copied from it.
//! [`Flash::prefetch`] touches the pages a reader of many is about to read, for the host's speed
//! alone.

use std::cell::Cell;

use crate::compact::SpanReader;
use crate::retry::READ_ATTEMPTS_MAX;
use crate::{Flash, FlashError, PageAddress, PageRead, Purpose, Result, SimTime};

/// The payload of a page being read, copied out a range at a time.
pub struct PageView<'a> {
    page: PageAddress,
    page_bytes: usize,
    bytes: Bytes<'a>,
}

enum Bytes<'a> {
    /// The whole payload.
    Whole(&'a [u8]),
    /// The page's encoding on compact media, read from where the last copy left it (a record's
    /// header, then the record): its OOB area of this many bytes, then the payload.
    Encoded(Cell<SpanReader<'a>>, usize),
}

impl<'a> PageView<'a> {
    /// The whole payload, when the read copied it (media other than compact, or a page with
    /// something to verify); `None` when ranges are decoded from where the page lies.
    pub fn whole(&self) -> Option<&[u8]> {
        match self.bytes {
            Bytes::Whole(whole) => Some(whole),
            Bytes::Encoded(..) => None,
        }
    }

    /// Bytes of the page's payload.
    pub fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    /// Payload bytes from `offset` on, as far as they lie together in host memory, to be read
    /// where they are: the rest of the payload when the read copied it whole; on compact media,
    /// the rest of the literal that holds byte `offset` (of a dense page, its payload up to the
    /// zero bytes at its end), or `None` where a run holds it. Bytes past what it returns are
    /// read with [`PageView::copy`]. An offset past the page is a [`FlashError::BufferSize`]
    /// error.
    pub fn in_place(&self, offset: usize) -> Result<Option<&'a [u8]>> {
        if offset >= self.page_bytes {
            return Err(FlashError::BufferSize {
                what: "range of a page",
                expected: self.page_bytes,
                actual: offset,
            });
        }
        match self.bytes {
            Bytes::Whole(whole) => Ok(whole.get(offset..)),
            Bytes::Encoded(ref reader, oob_bytes) => {
                let mut span = reader.get();
                let found = span.literal_from(oob_bytes + offset);
                reader.set(span);
                let end = self.page_bytes - offset;
                found
                    .map(|bytes| bytes.map(|bytes| &bytes[..bytes.len().min(end)]))
                    .map_err(|what| FlashError::MediaMalformed {
                        page: self.page,
                        what,
                    })
            }
        }
    }

    /// Copies payload bytes `offset..offset + out.len()` into `out`. A range past the page is a
    /// [`FlashError::BufferSize`] error.
    pub fn copy(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        if offset
            .checked_add(out.len())
            .is_none_or(|end| end > self.page_bytes)
        {
            return Err(FlashError::BufferSize {
                what: "range of a page",
                expected: self.page_bytes.saturating_sub(offset),
                actual: out.len(),
            });
        }
        match self.bytes {
            Bytes::Whole(whole) => {
                out.copy_from_slice(&whole[offset..offset + out.len()]);
                Ok(())
            }
            Bytes::Encoded(ref reader, oob_bytes) => {
                let mut span = reader.get();
                let copied = span.read(oob_bytes + offset, out);
                reader.set(span);
                copied.map_err(|what| FlashError::MediaMalformed {
                    page: self.page,
                    what,
                })
            }
        }
    }
}

impl Flash {
    /// Reads page `page` issued at `at`, as [`Flash::read_retrying`] does (the same time, counters,
    /// rules and retries of a page whose checksum fails), and calls `parts` with a view of its
    /// payload to copy out what it needs. Returns what `parts` returned, and the read.
    pub fn read_parts<R>(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
        parts: impl FnOnce(&PageView<'_>) -> R,
    ) -> Result<(R, PageRead)> {
        let page_bytes = self.geometry().page_bytes as usize;
        let oob_bytes = self.geometry().oob_bytes as usize;
        let mut attempt = 1;
        loop {
            match self.read_encoded(at, page, purpose) {
                None => break,
                Some(Ok(read)) => {
                    let encoded = self.encoding(page)?;
                    let view = PageView {
                        page,
                        page_bytes,
                        bytes: Bytes::Encoded(Cell::new(SpanReader::new(encoded)), oob_bytes),
                    };
                    return Ok((parts(&view), read));
                }
                Some(Err(FlashError::Corrupt { .. })) if attempt < READ_ATTEMPTS_MAX => {
                    attempt += 1;
                }
                Some(Err(error)) => return Err(error),
            }
        }
        let mut whole = vec![0u8; page_bytes];
        let read = self.read_retrying(at, page, purpose, &mut whole, &mut [])?;
        let view = PageView {
            page,
            page_bytes: whole.len(),
            bytes: Bytes::Whole(&whole),
        };
        Ok((parts(&view), read))
    }

    /// Copies payload bytes `offset..offset + out.len()` of page `page` as they are now, with no
    /// time, counter or rule: for a hint about what a reader will need next ([`Flash::prefetch`]
    /// of the page it points to), never for what the simulation serves. Only compact media
    /// answer. Returns whether `out` was filled (not for a page unprogrammed, discarded, or on
    /// other media, or a range past the page).
    pub fn peek(&self, page: PageAddress, offset: usize, out: &mut [u8]) -> bool {
        let page_bytes = self.geometry().page_bytes as usize;
        let oob_bytes = self.geometry().oob_bytes as usize;
        if offset
            .checked_add(out.len())
            .is_none_or(|end| end > page_bytes)
            || self.readable_slot(page).is_err()
        {
            return false;
        }
        self.encoding(page).is_ok_and(|encoded| {
            SpanReader::new(encoded)
                .read(oob_bytes + offset, out)
                .is_ok()
        })
    }

    /// Touches what reads of `pages` will touch first in host memory: each page's block state
    /// and, on compact media, where its encoding lies and the encoding's head, a step for every
    /// page before the next step. The host's memory then fetches them together rather than one
    /// read at a time (a scan's records lie on random pages among gigabytes of
    /// encodings). Nothing the simulation sees changes: no time, counter or state; pages outside
    /// the card, never programmed or discarded are skipped.
    pub fn prefetch(&self, pages: &[PageAddress]) {
        let indices: Vec<u64> = pages
            .iter()
            .filter(|&&page| self.readable_slot(page).is_ok())
            .map(|&page| self.geometry().page_index(page))
            .collect();
        self.media().prefetch(&indices);
    }

    /// [`Flash::prefetch`] for reads of a few payload bytes of each page: for each `(page,
    /// offset, length)` of `spans`, the head of the page's encoding and then where payload bytes
    /// `offset..offset + length` lie in it, rather than the encoding's first KiB. The same
    /// guarantees; spans past the page are skipped too.
    pub fn prefetch_spans(&self, spans: &[(PageAddress, usize, usize)]) {
        let page_bytes = self.geometry().page_bytes as usize;
        let oob_bytes = self.geometry().oob_bytes as usize;
        let spans: Vec<(u64, usize, usize)> = spans
            .iter()
            .filter(|&&(page, offset, length)| {
                offset
                    .checked_add(length)
                    .is_some_and(|end| end <= page_bytes)
                    && self.readable_slot(page).is_ok()
            })
            .map(|&(page, offset, length)| {
                (self.geometry().page_index(page), oob_bytes + offset, length)
            })
            .collect();
        self.media().prefetch_spans(&spans);
    }
}
