//! Meta segments: one flash page of sorted `<key, value pointer>` entries with an offset header, so
//! a variable-sized key is found by binary search in one page read.
//!
//! ```text
//! 0        4        6          8                  8+2n
//! | "MSEG" | n: u16 | reserved | offset[0..n]: u16 | entries … (zero padding to the page end)
//! entry: | key_len: u8 | key | pointer: u64 | value_len: u32 |
//! ```
//! Little-endian. `pointer` is a `RecordPointer`, or `u64::MAX` for a tombstone.

use crate::cpu::CpuCounts;
use crate::EngineError;

const MAGIC: [u8; 4] = *b"MSEG";
/// Bytes before the offset array.
pub(crate) const HEADER_BYTES: usize = 8;
/// Bytes of an entry besides its key (length byte, pointer, value length) plus its offset slot.
pub(crate) const ENTRY_OVERHEAD_BYTES: usize = 1 + 8 + 4 + 2;
/// The pointer value of a tombstone.
pub(crate) const TOMBSTONE: u64 = u64::MAX;

/// An index entry's key: kept inline up to 32 bytes (YCSB's key size), so that an entry is one
/// allocation-free value and a search over entries reads keys without following a pointer.
pub(crate) type Key = smallvec::SmallVec<[u8; 32]>;

/// One index entry: a key and where its newest value is (or a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) key: Key,
    pub(crate) pointer: u64,
    pub(crate) value_len: u32,
    /// Set on entries that GC put back into L0 (their flush is GC work, not user work).
    pub(crate) from_gc: bool,
}

impl Entry {
    pub(crate) fn is_tombstone(&self) -> bool {
        self.pointer == TOMBSTONE
    }

    /// Bytes the entry takes in a meta segment, its offset slot included.
    pub(crate) fn encoded_bytes(&self) -> usize {
        self.key.len() + ENTRY_OVERHEAD_BYTES
    }
}

/// Splits sorted entries into meta segments as they come, filling each page greedily.
pub(crate) struct Packing {
    page_bytes: usize,
    used: usize,
    current: Vec<Entry>,
}

impl Packing {
    pub(crate) fn new(page_bytes: usize) -> Packing {
        Packing {
            page_bytes,
            used: HEADER_BYTES,
            current: Vec::new(),
        }
    }

    /// Adds the next entry; returns the segment it closed, if it did not fit after it.
    pub(crate) fn push(&mut self, entry: Entry) -> Option<Vec<Entry>> {
        let closed = (self.used + entry.encoded_bytes() > self.page_bytes
            && !self.current.is_empty())
        .then(|| self.finish())
        .flatten();
        self.used += entry.encoded_bytes();
        self.current.push(entry);
        closed
    }

    /// The last segment, if any entry is left.
    pub(crate) fn finish(&mut self) -> Option<Vec<Entry>> {
        self.used = HEADER_BYTES;
        let segment = std::mem::take(&mut self.current);
        (!segment.is_empty()).then_some(segment)
    }
}

/// Encodes one segment into a page image.
pub(crate) fn encode(entries: &[Entry], page_bytes: usize) -> Vec<u8> {
    let mut page = vec![0u8; page_bytes];
    page[..4].copy_from_slice(&MAGIC);
    page[4..6].copy_from_slice(&(entries.len() as u16).to_le_bytes());
    let mut at = HEADER_BYTES + 2 * entries.len();
    for (slot, entry) in entries.iter().enumerate() {
        let offset_at = HEADER_BYTES + 2 * slot;
        page[offset_at..offset_at + 2].copy_from_slice(&(at as u16).to_le_bytes());
        page[at] = entry.key.len() as u8;
        at += 1;
        page[at..at + entry.key.len()].copy_from_slice(&entry.key);
        at += entry.key.len();
        page[at..at + 8].copy_from_slice(&entry.pointer.to_le_bytes());
        at += 8;
        page[at..at + 4].copy_from_slice(&entry.value_len.to_le_bytes());
        at += 4;
    }
    debug_assert!(at <= page_bytes, "segment overflows its page");
    page
}

/// A decoded view of a segment page, with bounds checks on every access.
pub(crate) struct SegmentPage<'a> {
    page: &'a [u8],
    count: usize,
    index: u64,
}

fn malformed(index: u64, what: &'static str) -> EngineError {
    EngineError::MalformedSegment { page: index, what }
}

impl<'a> SegmentPage<'a> {
    pub(crate) fn parse(page: &'a [u8], index: u64) -> Result<SegmentPage<'a>, EngineError> {
        if page.len() < HEADER_BYTES || page[..4] != MAGIC {
            return Err(malformed(index, "no segment magic"));
        }
        let count = usize::from(u16::from_le_bytes([page[4], page[5]]));
        if HEADER_BYTES + 2 * count > page.len() {
            return Err(malformed(index, "offset array runs past the page"));
        }
        Ok(SegmentPage { page, count, index })
    }

    fn key_at(&self, slot: usize) -> Result<(&'a [u8], usize), EngineError> {
        let offset_at = HEADER_BYTES + 2 * slot;
        let at = usize::from(u16::from_le_bytes([
            self.page[offset_at],
            self.page[offset_at + 1],
        ]));
        let key_len = usize::from(
            *self
                .page
                .get(at)
                .ok_or(malformed(self.index, "entry offset past the page"))?,
        );
        let key = self
            .page
            .get(at + 1..at + 1 + key_len)
            .ok_or(malformed(self.index, "key runs past the page"))?;
        if key.is_empty() {
            return Err(malformed(self.index, "empty key"));
        }
        Ok((key, at + 1 + key_len))
    }

    pub(crate) fn entry(&self, slot: usize) -> Result<Entry, EngineError> {
        let (key, at) = self.key_at(slot)?;
        let tail = self
            .page
            .get(at..at + 12)
            .ok_or(malformed(self.index, "pointer runs past the page"))?;
        let mut pointer = [0u8; 8];
        pointer.copy_from_slice(&tail[..8]);
        let mut value_len = [0u8; 4];
        value_len.copy_from_slice(&tail[8..]);
        Ok(Entry {
            key: Key::from_slice(key),
            pointer: u64::from_le_bytes(pointer),
            value_len: u32::from_le_bytes(value_len),
            from_gc: false,
        })
    }

    /// Every entry, in order.
    pub(crate) fn entries(&self) -> Result<Vec<Entry>, EngineError> {
        (0..self.count).map(|slot| self.entry(slot)).collect()
    }

    /// The first (start) key.
    pub(crate) fn first_key(&self) -> Result<&'a [u8], EngineError> {
        if self.count == 0 {
            return Err(malformed(self.index, "segment has no entries"));
        }
        Ok(self.key_at(0)?.0)
    }

    /// Binary search for `key`, counting comparisons.
    pub(crate) fn find(
        &self,
        key: &[u8],
        cpu: &mut CpuCounts,
    ) -> Result<Option<Entry>, EngineError> {
        let (mut low, mut high) = (0usize, self.count);
        while low < high {
            let middle = (low + high) / 2;
            let (probe, _) = self.key_at(middle)?;
            match cpu.compare(probe, key) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return self.entry(middle).map(Some),
            }
        }
        Ok(None)
    }
}

/// Binary search for `key` in entries held in DRAM, counting comparisons.
pub(crate) fn find_in(entries: &[Entry], key: &[u8], cpu: &mut CpuCounts) -> Option<usize> {
    let (mut low, mut high) = (0usize, entries.len());
    while low < high {
        let middle = (low + high) / 2;
        match cpu.compare(&entries[middle].key, key) {
            std::cmp::Ordering::Less => low = middle + 1,
            std::cmp::Ordering::Greater => high = middle,
            std::cmp::Ordering::Equal => return Some(middle),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, pointer: u64) -> Entry {
        Entry {
            key: Key::from_slice(key.as_bytes()),
            pointer,
            value_len: 3,
            from_gc: false,
        }
    }

    #[test]
    fn segment_round_trip_and_search() {
        let entries: Vec<Entry> = (0..40).map(|i| entry(&format!("k{i:03}"), i)).collect();
        let mut packing = Packing::new(512);
        let mut segments: Vec<Vec<Entry>> = entries
            .iter()
            .filter_map(|entry| packing.push(entry.clone()))
            .collect();
        segments.extend(packing.finish());
        assert!(segments.len() > 1);
        let mut all = Vec::new();
        for segment in &segments {
            let page = encode(segment, 512);
            let view = SegmentPage::parse(&page, 0).expect("parse");
            let mut cpu = CpuCounts::default();
            for wanted in segment {
                let found = view.find(&wanted.key, &mut cpu).expect("find");
                assert_eq!(found.as_ref(), Some(wanted));
            }
            assert_eq!(view.find(b"zzz", &mut cpu).expect("find"), None);
            assert!(cpu.key_comparisons > 0);
            all.extend(view.entries().expect("entries"));
        }
        assert_eq!(all, entries);
    }

    #[test]
    fn segment_decoder_rejects_garbage() {
        let mut page = encode(&[entry("abc", 1)], 512);
        assert!(SegmentPage::parse(&[0u8; 512], 0).is_err());
        // An offset pointing past the page must be an error, not a panic.
        page[HEADER_BYTES] = 0xff;
        page[HEADER_BYTES + 1] = 0xff;
        let view = SegmentPage::parse(&page, 0).expect("header is fine");
        assert!(view.entries().is_err());
        page[4] = 0xff;
        page[5] = 0xff;
        assert!(SegmentPage::parse(&page, 0).is_err());
    }
}
