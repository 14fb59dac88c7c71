//! Record framing of the write-ahead log.
//!
//! The log is a sequence of flash pages. A record (a store, a delete, a whole batch, a namespace
//! change: whatever the device layer encodes) is cut into *fragments* that fill pages, in the manner of
//! LevelDB's log format, adapted to flash pages instead of 32 KiB file blocks. Every page starts with a
//! page header, followed by fragments:
//!
//! ```text
//! page header (16 bytes)
//!   0  magic u32 LE "KLOG"
//!   4  log id u32 LE           which incarnation of the log this page belongs to
//!   8  page number u64 LE      position of the page in the log, from 0
//! fragment (7-byte header, then payload)
//!   0  CRC-32C u32 LE          of type, length and payload
//!   4  length u16 LE           payload bytes
//!   6  type u8                 1 = FULL, 2 = FIRST, 3 = MIDDLE, 4 = LAST
//!   7  payload
//! ```
//!
//! A fragment never spans pages. Fewer than 7 bytes left at a page's end are zero padding; a zero type
//! byte also ends a page (the rest is padding). The log id and page number in every page header let a
//! reader reject pages of an older incarnation of the log that happen to sit where the log continues.
//!
//! Reading stops at the first page or fragment that is missing, corrupt, of another log id or out of
//! sequence: everything before it is the log; a record whose fragments are not all present is dropped.
//! Since a record is acknowledged only after all the pages holding it are programmed (and, on file
//! media, synced), every acknowledged record is before that point.

use std::fmt;

/// Bytes of the page header.
pub const PAGE_HEADER_BYTES: usize = 16;
/// Bytes of a fragment header.
pub const FRAGMENT_HEADER_BYTES: usize = 7;
/// Longest record the log accepts: the value limit plus room for keys and framing of a batch.
pub const RECORD_BYTES_MAX: usize = 64 << 20;

const PAGE_MAGIC: u32 = u32::from_le_bytes(*b"KLOG");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FragmentType {
    Full = 1,
    First = 2,
    Middle = 3,
    Last = 4,
}

impl FragmentType {
    fn from_byte(byte: u8) -> Option<FragmentType> {
        match byte {
            1 => Some(FragmentType::Full),
            2 => Some(FragmentType::First),
            3 => Some(FragmentType::Middle),
            4 => Some(FragmentType::Last),
            _ => None,
        }
    }
}

/// Why a record could not be appended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// The record is larger than [`RECORD_BYTES_MAX`].
    #[error("log record of {bytes} bytes is larger than the {RECORD_BYTES_MAX}-byte limit")]
    RecordTooLarge {
        /// Its size.
        bytes: usize,
    },
    /// The page size cannot hold a page header and a fragment with payload.
    #[error("log pages of {page_bytes} bytes are too small")]
    PageTooSmall {
        /// The page size.
        page_bytes: usize,
    },
}

/// Cuts records into page images. The caller programs each finished page and, once every page of a
/// record is durable, acknowledges the record.
pub struct LogWriter {
    page_bytes: usize,
    log_id: u32,
    next_page_number: u64,
    page: Vec<u8>,
    used: usize,
}

impl fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogWriter")
            .field("log_id", &self.log_id)
            .field("next_page_number", &self.next_page_number)
            .field("used", &self.used)
            .finish()
    }
}

impl LogWriter {
    /// A writer of log `log_id` whose first page will be `first_page_number`.
    pub fn new(
        page_bytes: usize,
        log_id: u32,
        first_page_number: u64,
    ) -> Result<LogWriter, LogError> {
        if !(PAGE_HEADER_BYTES + FRAGMENT_HEADER_BYTES + 1..=1 << 16).contains(&page_bytes) {
            return Err(LogError::PageTooSmall { page_bytes });
        }
        let mut writer = LogWriter {
            page_bytes,
            log_id,
            next_page_number: first_page_number,
            page: vec![0; page_bytes],
            used: 0,
        };
        writer.start_page();
        Ok(writer)
    }

    /// Starts the next page: its header (the bytes after it are overwritten by fragments, and
    /// those after the last are zeroed when the page is handed out).
    fn start_page(&mut self) {
        self.page[0..4].copy_from_slice(&PAGE_MAGIC.to_le_bytes());
        self.page[4..8].copy_from_slice(&self.log_id.to_le_bytes());
        self.page[8..16].copy_from_slice(&self.next_page_number.to_le_bytes());
        self.used = PAGE_HEADER_BYTES;
    }

    /// The page number the current (unfinished) page will have.
    pub fn current_page_number(&self) -> u64 {
        self.next_page_number
    }

    /// Whether the current page holds any fragment.
    pub fn has_pending(&self) -> bool {
        self.used > PAGE_HEADER_BYTES
    }

    /// Appends a record; returns the pages it filled, each ready to program, in order. The record's
    /// tail may stay in the current page: call [`LogWriter::flush`] to get that page too (a record is
    /// durable only when the page holding its last fragment is).
    pub fn append(&mut self, record: &[u8]) -> Result<Vec<Vec<u8>>, LogError> {
        if record.len() > RECORD_BYTES_MAX {
            return Err(LogError::RecordTooLarge {
                bytes: record.len(),
            });
        }
        let mut full_pages = Vec::new();
        let appended: Result<(), std::convert::Infallible> =
            self.append_pieces(&[record], |page| {
                full_pages.push(page.to_vec());
                Ok(())
            });
        let Ok(()) = appended;
        Ok(full_pages)
    }

    /// Appends the record the `pieces` make end to end, as [`LogWriter::append`] does but without
    /// [`RECORD_BYTES_MAX`], handing each page to `emit` as it fills. For a checkpoint: one record
    /// of every index's DRAM state, which grows with the data (pinned levels of a few million keys
    /// take more than 64 MiB), framed from the parts it is made of a page at a time, with no copy
    /// of itself. Its reader needs no limit either: the root names the pages it lies in. Stops at
    /// the first error `emit` returns (the caller then abandons the writer).
    pub fn append_pieces<E>(
        &mut self,
        pieces: &[&[u8]],
        mut emit: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut pieces = pieces.iter().copied().filter(|piece| !piece.is_empty());
        let mut piece: &[u8] = pieces.next().unwrap_or(&[]);
        let mut left: usize = piece.len() + pieces.clone().map(<[u8]>::len).sum::<usize>();
        let mut first = true;
        loop {
            let room = self.page_bytes - self.used;
            if room < FRAGMENT_HEADER_BYTES + 1 {
                self.emit_page(&mut emit)?;
                continue;
            }
            let take = left
                .min(room - FRAGMENT_HEADER_BYTES)
                .min(usize::from(u16::MAX));
            let last = take == left;
            let kind = match (first, last) {
                (true, true) => FragmentType::Full,
                (true, false) => FragmentType::First,
                (false, false) => FragmentType::Middle,
                (false, true) => FragmentType::Last,
            };
            // The fragment's payload, gathered from the pieces it spans.
            let at = self.used + FRAGMENT_HEADER_BYTES;
            let mut filled = 0;
            while filled < take {
                if piece.is_empty() {
                    piece = pieces.next().unwrap_or(&[]);
                    continue;
                }
                let n = piece.len().min(take - filled);
                self.page[at + filled..at + filled + n].copy_from_slice(&piece[..n]);
                piece = &piece[n..];
                filled += n;
            }
            self.seal_fragment(kind, take);
            left -= take;
            first = false;
            if last {
                return Ok(());
            }
            self.emit_page(&mut emit)?;
        }
    }

    /// Finishes the current page if it holds anything and returns it; the next record starts a new page.
    pub fn flush(&mut self) -> Option<Vec<u8>> {
        if !self.has_pending() {
            return None;
        }
        let mut page = None;
        let emitted: Result<(), std::convert::Infallible> = self.emit_page(|bytes: &[u8]| {
            page = Some(bytes.to_vec());
            Ok(())
        });
        let Ok(()) = emitted;
        page
    }

    /// Hands the current page to `emit`, its bytes after the last fragment zeroed, and starts the
    /// next.
    fn emit_page<E>(&mut self, mut emit: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        self.page[self.used..].fill(0);
        emit(&self.page)?;
        self.next_page_number += 1;
        self.start_page();
        Ok(())
    }

    /// Writes the header of the fragment whose `length` payload bytes are in place after it.
    fn seal_fragment(&mut self, kind: FragmentType, length: usize) {
        let at = self.used;
        self.page[at + 4..at + 6].copy_from_slice(&(length as u16).to_le_bytes());
        self.page[at + 6] = kind as u8;
        let crc = crc32c::crc32c(&self.page[at + 4..at + FRAGMENT_HEADER_BYTES + length]);
        self.page[at..at + 4].copy_from_slice(&crc.to_le_bytes());
        self.used += FRAGMENT_HEADER_BYTES + length;
    }
}

/// Why reading stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEnd {
    /// No more pages were offered.
    Exhausted,
    /// A page had no log header, another log id, or the wrong page number: the log ends before it.
    ForeignPage {
        /// The page number expected.
        expected: u64,
    },
    /// A fragment failed its checksum or was malformed: the log ends at it (a torn write).
    CorruptFragment {
        /// The page number.
        page: u64,
    },
}

/// Reassembles records from log pages offered in order.
#[derive(Debug)]
pub struct LogReader {
    log_id: u32,
    next_page_number: u64,
    partial: Option<Vec<u8>>,
    records: Vec<Vec<u8>>,
    end: Option<LogEnd>,
}

impl LogReader {
    /// A reader of log `log_id` starting at page `first_page_number`.
    pub fn new(log_id: u32, first_page_number: u64) -> LogReader {
        LogReader {
            log_id,
            next_page_number: first_page_number,
            partial: None,
            records: Vec::new(),
            end: None,
        }
    }

    /// Whether the log has ended (no further page can add records).
    pub fn ended(&self) -> Option<&LogEnd> {
        self.end.as_ref()
    }

    /// The page number the reader expects next.
    pub fn next_page_number(&self) -> u64 {
        self.next_page_number
    }

    /// Offers the next page of the log (`None` if it could not be read: missing, erased or corrupt at
    /// the flash level). Returns false once the log has ended.
    pub fn offer(&mut self, page: Option<&[u8]>) -> bool {
        if self.end.is_some() {
            return false;
        }
        let expected = self.next_page_number;
        let Some(page) = page else {
            self.end = Some(LogEnd::ForeignPage { expected });
            return false;
        };
        let header_ok = page.len() >= PAGE_HEADER_BYTES
            && page[0..4] == PAGE_MAGIC.to_le_bytes()
            && page[4..8] == self.log_id.to_le_bytes()
            && page[8..16] == expected.to_le_bytes();
        if !header_ok {
            self.end = Some(LogEnd::ForeignPage { expected });
            return false;
        }
        let mut at = PAGE_HEADER_BYTES;
        while page.len() - at >= FRAGMENT_HEADER_BYTES {
            let kind_byte = page[at + 6];
            if kind_byte == 0 {
                break;
            }
            let length = usize::from(u16::from_le_bytes([page[at + 4], page[at + 5]]));
            let end = at + FRAGMENT_HEADER_BYTES + length;
            let stored = u32::from_le_bytes([page[at], page[at + 1], page[at + 2], page[at + 3]]);
            let kind = FragmentType::from_byte(kind_byte);
            if end > page.len() || kind.is_none() || crc32c::crc32c(&page[at + 4..end]) != stored {
                self.end = Some(LogEnd::CorruptFragment { page: expected });
                return false;
            }
            let payload = &page[at + FRAGMENT_HEADER_BYTES..end];
            match (kind, self.partial.as_mut()) {
                (Some(FragmentType::Full), None) => self.records.push(payload.to_vec()),
                (Some(FragmentType::First), None) => self.partial = Some(payload.to_vec()),
                (Some(FragmentType::Middle), Some(partial)) => partial.extend_from_slice(payload),
                (Some(FragmentType::Last), Some(partial)) => {
                    partial.extend_from_slice(payload);
                    if let Some(record) = self.partial.take() {
                        self.records.push(record);
                    }
                }
                _ => {
                    // A fragment out of order cannot come from a correct writer: treat it as the end.
                    self.end = Some(LogEnd::CorruptFragment { page: expected });
                    return false;
                }
            }
            at = end;
        }
        self.next_page_number += 1;
        true
    }

    /// Takes the complete records read so far. A record whose last fragment was not found is never
    /// returned.
    pub fn take_records(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.records)
    }

    /// Ends reading: returns the complete records not yet taken and why the log ended.
    pub fn finish(mut self) -> (Vec<Vec<u8>>, LogEnd) {
        let end = self.end.take().unwrap_or(LogEnd::Exhausted);
        (self.records, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn write_all(page_bytes: usize, records: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut writer = LogWriter::new(page_bytes, 7, 0).expect("writer");
        let mut pages = Vec::new();
        for record in records {
            pages.extend(writer.append(record).expect("append"));
        }
        pages.extend(writer.flush());
        pages
    }

    fn read_all(pages: &[Vec<u8>]) -> (Vec<Vec<u8>>, LogEnd) {
        let mut reader = LogReader::new(7, 0);
        for page in pages {
            if !reader.offer(Some(page)) {
                break;
            }
        }
        reader.finish()
    }

    fn random_records(seed: u64, count: usize, size_max: usize) -> Vec<Vec<u8>> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..count)
            .map(|_| {
                let length = (rng.next_u64() % size_max as u64) as usize;
                (0..length).map(|_| rng.next_u64() as u8).collect()
            })
            .collect()
    }

    #[test]
    fn log_round_trips_records_of_every_size() {
        for page_bytes in [64, 512, 8192] {
            for seed in 0..20 {
                let records = random_records(seed, 50, page_bytes * 3);
                let pages = write_all(page_bytes, &records);
                assert!(pages.iter().all(|page| page.len() == page_bytes));
                let (read, end) = read_all(&pages);
                assert_eq!(read, records, "page {page_bytes} seed {seed}");
                assert_eq!(end, LogEnd::Exhausted);
            }
        }
    }

    #[test]
    fn log_empty_records_and_exact_fits() {
        let page_bytes = 64;
        let exact = vec![9u8; page_bytes - PAGE_HEADER_BYTES - FRAGMENT_HEADER_BYTES];
        let records = vec![Vec::new(), exact.clone(), Vec::new(), exact];
        let (read, _) = read_all(&write_all(page_bytes, &records));
        assert_eq!(read, records);
    }

    #[test]
    fn log_torn_tail_drops_only_the_incomplete_record() {
        let records = random_records(3, 40, 300);
        let pages = write_all(128, &records);
        for cut in 0..pages.len() {
            // Pages after the cut were never written; the page at the cut is torn.
            let mut damaged: Vec<Vec<u8>> = pages[..=cut].to_vec();
            let last = damaged.len() - 1;
            let middle = damaged[last].len() / 2;
            for byte in &mut damaged[last][middle..] {
                *byte ^= 0x5A;
            }
            let (read, end) = read_all(&damaged);
            assert!(matches!(
                end,
                LogEnd::CorruptFragment { .. } | LogEnd::Exhausted
            ));
            assert!(read.len() <= records.len());
            assert_eq!(
                read[..],
                records[..read.len()],
                "a prefix of the records, cut {cut}"
            );
        }
    }

    #[test]
    fn log_stops_at_pages_of_another_log_or_out_of_order() {
        let records = random_records(4, 30, 200);
        let pages = write_all(128, &records);
        let old = {
            let mut writer = LogWriter::new(128, 6, 3).expect("writer");
            let mut old_pages = writer.append(&[1; 500]).expect("append");
            old_pages.extend(writer.flush());
            old_pages
        };
        let mut mixed = pages[..3].to_vec();
        mixed.push(old[0].clone());
        mixed.extend_from_slice(&pages[3..]);
        let mut reader = LogReader::new(7, 0);
        for page in &mixed {
            if !reader.offer(Some(page)) {
                break;
            }
        }
        let (read, end) = reader.finish();
        assert_eq!(end, LogEnd::ForeignPage { expected: 3 });
        let full = read_all(&pages[..3]).0;
        assert_eq!(read, full);

        // An unreadable page ends the log too.
        let mut reader = LogReader::new(7, 0);
        assert!(reader.offer(Some(&pages[0])));
        assert!(!reader.offer(None));
        assert!(
            !reader.offer(Some(&pages[1])),
            "nothing is read after the end"
        );
    }

    #[test]
    fn log_arbitrary_bytes_never_panic() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
        for _ in 0..2_000 {
            let mut page: Vec<u8> = (0..128).map(|_| rng.next_u64() as u8).collect();
            if rng.next_u64() % 2 == 0 {
                page[0..4].copy_from_slice(b"KLOG");
                page[4..8].copy_from_slice(&7u32.to_le_bytes());
                page[8..16].copy_from_slice(&0u64.to_le_bytes());
            }
            let mut reader = LogReader::new(7, 0);
            reader.offer(Some(&page));
            let _ = reader.finish();
        }
    }

    #[test]
    fn log_refuses_oversized_records_and_tiny_pages() {
        assert!(matches!(
            LogWriter::new(16, 1, 0),
            Err(LogError::PageTooSmall { .. })
        ));
        let mut writer = LogWriter::new(512, 1, 0).expect("writer");
        let huge = vec![0u8; RECORD_BYTES_MAX + 1];
        assert!(matches!(
            writer.append(&huge),
            Err(LogError::RecordTooLarge { .. })
        ));
        assert!(!writer.has_pending(), "a refused record writes nothing");
    }

    /// A record past the log's limit, as a large checkpoint is, frames and reads back whole, and
    /// framed from pieces (cut anywhere, some empty) it makes the same pages.
    #[test]
    fn log_frames_a_record_past_the_limit_from_pieces() {
        let page_bytes = 8192;
        let record: Vec<u8> = (0..RECORD_BYTES_MAX + 3 * page_bytes + 5)
            .map(|n| (n % 251) as u8)
            .collect();
        let frame = |pieces: &[&[u8]]| {
            let mut writer = LogWriter::new(page_bytes, 9, 0).expect("writer");
            let mut pages: Vec<Vec<u8>> = Vec::new();
            writer
                .append_pieces(pieces, |page| {
                    pages.push(page.to_vec());
                    Ok::<(), ()>(())
                })
                .expect("framed");
            pages.extend(writer.flush());
            pages
        };
        let pages = frame(&[&record]);
        assert!(pages.len() * page_bytes > RECORD_BYTES_MAX);
        let mut reader = LogReader::new(9, 0);
        for page in &pages {
            assert!(reader.offer(Some(page)));
        }
        let (records, end) = reader.finish();
        assert_eq!(end, LogEnd::Exhausted);
        assert_eq!(records.len(), 1);
        assert!(records[0] == record, "the record reads back unchanged");

        let cuts = [
            0,
            1,
            1,
            7,
            page_bytes - 3,
            5 * page_bytes + 11,
            record.len() - 2,
            record.len(),
        ];
        let pieces: Vec<&[u8]> = cuts.windows(2).map(|cut| &record[cut[0]..cut[1]]).collect();
        assert!(
            frame(&pieces) == pages,
            "pieces frame as the whole record does"
        );
    }
}
