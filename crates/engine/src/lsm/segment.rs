//! Meta segments: one flash page of sorted `<key, value pointer>` entries with an offset header, so
//! a variable-sized key is found by binary search in one page read.
//!
//! ```text
//! 0        4        6          8                  8+2n
//! | "MSEG" | n: u16 | reserved | offset[0..n]: u16 | entries … (zero padding to the page end)
//! entry: | key_len: u8 | key | pointer: u64 | value_len: u32 |
//! ```
//! Little-endian. `pointer` is a `RecordPointer`, or `u64::MAX` for a tombstone.

use kvssd_flash::PageView;
use kvssd_space::SpaceError;

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
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) key: Key,
    pub(crate) pointer: u64,
    pub(crate) value_len: u32,
    /// Set on entries that GC put back into L0 (their flush is GC work, not user work).
    pub(crate) from_gc: bool,
}

/// Copies the key in one piece: `SmallVec`'s own clone collects it a byte at a time, and merges
/// and scans clone entries by the million.
impl Clone for Entry {
    fn clone(&self) -> Self {
        Entry {
            key: Key::from_slice(&self.key),
            pointer: self.pointer,
            value_len: self.value_len,
            from_gc: self.from_gc,
        }
    }
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
    entries: usize,
}

impl Packing {
    pub(crate) fn new(page_bytes: usize) -> Packing {
        Packing {
            page_bytes,
            used: HEADER_BYTES,
            entries: 0,
        }
    }

    /// Makes room for the next entry, of `encoded_bytes` (its offset slot included); returns
    /// whether it starts a new segment, the current one being full (then the caller seals that
    /// one before adding the entry).
    pub(crate) fn closes(&mut self, encoded_bytes: usize) -> bool {
        let closes = self.used + encoded_bytes > self.page_bytes && self.entries > 0;
        if closes {
            self.used = HEADER_BYTES;
            self.entries = 0;
        }
        self.used += encoded_bytes;
        self.entries += 1;
        closes
    }
}

/// One segment's page image, built an entry at a time: the entries' bytes as they will lie in the
/// page, and where each starts among them. A page read from flash hands its entries over
/// as they are encoded ([`RawEntry`]), so a merge copies bytes rather than decoding and encoding
/// every entry again.
#[derive(Default)]
pub(crate) struct PageBuilder {
    body: Vec<u8>,
    starts: Vec<u16>,
}

impl PageBuilder {
    pub(crate) fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Appends an entry.
    pub(crate) fn push(&mut self, entry: &Entry) {
        self.open_slot();
        self.body.push(entry.key.len() as u8);
        self.body.extend_from_slice(&entry.key);
        self.body.extend_from_slice(&entry.pointer.to_le_bytes());
        self.body.extend_from_slice(&entry.value_len.to_le_bytes());
    }

    /// Appends an entry as another page encoded it.
    pub(crate) fn push_raw(&mut self, entry: RawEntry<'_>) {
        self.open_slot();
        self.body.extend_from_slice(entry.bytes);
    }

    fn open_slot(&mut self) {
        self.starts.push(self.body.len() as u16);
    }

    /// The page image of the entries appended so far, which are then cleared.
    pub(crate) fn take_image(&mut self, page_bytes: usize) -> Vec<u8> {
        let count = self.starts.len();
        let mut page = vec![0u8; page_bytes];
        page[..4].copy_from_slice(&MAGIC);
        page[4..6].copy_from_slice(&(count as u16).to_le_bytes());
        let body_at = HEADER_BYTES + 2 * count;
        for (slot, &start) in self.starts.iter().enumerate() {
            let offset_at = HEADER_BYTES + 2 * slot;
            let offset = (body_at + usize::from(start)) as u16;
            page[offset_at..offset_at + 2].copy_from_slice(&offset.to_le_bytes());
        }
        debug_assert!(
            body_at + self.body.len() <= page_bytes,
            "segment overflows its page"
        );
        page[body_at..body_at + self.body.len()].copy_from_slice(&self.body);
        self.body.clear();
        self.starts.clear();
        page
    }
}

/// Encodes one segment into a page image.
pub(crate) fn encode(entries: &[Entry], page_bytes: usize) -> Vec<u8> {
    let mut builder = PageBuilder::default();
    for entry in entries {
        builder.push(entry);
    }
    builder.take_image(page_bytes)
}

/// One entry as a segment page encodes it, `| key_len | key | pointer | value_len |`, its bounds
/// checked when it was taken from the page.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawEntry<'a> {
    bytes: &'a [u8],
}

impl<'a> RawEntry<'a> {
    /// REQUIRES: `bytes` is one whole entry, as [`SegmentPage::raw_span`] bounds it.
    pub(crate) fn new(bytes: &'a [u8]) -> RawEntry<'a> {
        debug_assert!(bytes.len() > 13 && usize::from(bytes[0]) + 13 == bytes.len());
        RawEntry { bytes }
    }

    pub(crate) fn key(&self) -> &'a [u8] {
        &self.bytes[1..self.bytes.len() - 12]
    }

    pub(crate) fn pointer(&self) -> u64 {
        let at = self.bytes.len() - 12;
        let mut pointer = [0u8; 8];
        pointer.copy_from_slice(&self.bytes[at..at + 8]);
        u64::from_le_bytes(pointer)
    }

    fn value_len(&self) -> u32 {
        let at = self.bytes.len() - 4;
        let mut value_len = [0u8; 4];
        value_len.copy_from_slice(&self.bytes[at..]);
        u32::from_le_bytes(value_len)
    }

    pub(crate) fn is_tombstone(&self) -> bool {
        self.pointer() == TOMBSTONE
    }

    /// Bytes the entry takes in a meta segment, its offset slot included.
    pub(crate) fn encoded_bytes(&self) -> usize {
        self.bytes.len() + 2
    }

    /// The entry, decoded.
    pub(crate) fn to_entry(self) -> Entry {
        Entry {
            key: Key::from_slice(self.key()),
            pointer: self.pointer(),
            value_len: self.value_len(),
            from_gc: false,
        }
    }
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

    /// Entries in the page.
    pub(crate) fn count(&self) -> usize {
        self.count
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
                .ok_or_else(|| malformed(self.index, "entry offset past the page"))?,
        );
        let key = self
            .page
            .get(at + 1..at + 1 + key_len)
            .ok_or_else(|| malformed(self.index, "key runs past the page"))?;
        if key.is_empty() {
            return Err(malformed(self.index, "empty key"));
        }
        Ok((key, at + 1 + key_len))
    }

    /// Where entry `slot` lies in the page, its bounds checked: see [`RawEntry`].
    pub(crate) fn raw_span(&self, slot: usize) -> Result<std::ops::Range<usize>, EngineError> {
        let (key, key_end) = self.key_at(slot)?;
        let span = key_end - key.len() - 1..key_end + 12;
        if span.end > self.page.len() {
            return Err(malformed(self.index, "pointer runs past the page"));
        }
        Ok(span)
    }

    /// Entry `slot` as the page encodes it, its bounds checked.
    pub(crate) fn raw(&self, slot: usize) -> Result<RawEntry<'a>, EngineError> {
        Ok(RawEntry::new(&self.page[self.raw_span(slot)?]))
    }

    pub(crate) fn entry(&self, slot: usize) -> Result<Entry, EngineError> {
        self.raw(slot).map(RawEntry::to_entry)
    }

    /// Every entry, in order.
    pub(crate) fn entries(&self) -> Result<Vec<Entry>, EngineError> {
        (0..self.count).map(|slot| self.entry(slot)).collect()
    }

    /// The slot of the first entry whose key is `>= key` (the count if none is), by binary
    /// search, not counted: where a scan from `key` starts in the page.
    pub(crate) fn lower_bound(&self, key: &[u8]) -> Result<usize, EngineError> {
        let (mut low, mut high) = (0usize, self.count);
        while low < high {
            let middle = (low + high) / 2;
            if self.key_at(middle)?.0 < key {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        Ok(low)
    }

    /// Entries of slots `from..from + limit` (fewer at the end of the page), in order.
    pub(crate) fn entries_in(&self, from: usize, limit: usize) -> Result<Vec<Entry>, EngineError> {
        let end = from.saturating_add(limit).min(self.count);
        (from.min(end)..end).map(|slot| self.entry(slot)).collect()
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
        match self.find_slot(key, cpu)? {
            Some(slot) => self.entry(slot).map(Some),
            None => Ok(None),
        }
    }

    /// The slot of `key`, by binary search, counting comparisons (what [`find_in`] counts over
    /// the decoded entries).
    pub(crate) fn find_slot(
        &self,
        key: &[u8],
        cpu: &mut CpuCounts,
    ) -> Result<Option<usize>, EngineError> {
        let (mut low, mut high) = (0usize, self.count);
        while low < high {
            let middle = (low + high) / 2;
            let (probe, _) = self.key_at(middle)?;
            match cpu.compare(probe, key) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Ok(Some(middle)),
            }
        }
        Ok(None)
    }

    /// Where entry `slot`'s pointer lies in the page, its bounds checked.
    pub(crate) fn pointer_span(&self, slot: usize) -> Result<std::ops::Range<usize>, EngineError> {
        let entry = self.raw_span(slot)?;
        Ok(entry.end - 12..entry.end - 4)
    }
}

/// [`SegmentPage::find`] over the meta page `view` reads (page `index` of the card), with the
/// same result and counts: in place where the page's bytes lie together in host memory (compact
/// media keep a meta page's payload as one literal), otherwise in a copy of the whole page made
/// in `scratch`. A search in place that needs a byte past what lies together (a page split
/// between two chunks of the media, or an entry that ends in the zero bytes the encoding keeps
/// as a run) is dropped, its counts with it, and made again over the copy.
pub(crate) fn find_in_view(
    view: &PageView<'_>,
    index: u64,
    key: &[u8],
    cpu: &mut CpuCounts,
    scratch: &mut Vec<u8>,
) -> Result<Option<Entry>, EngineError> {
    if let Ok(Some(bytes)) = view.in_place(0) {
        let before = *cpu;
        // Bytes in place are the page's bytes as far as they go, and every access to a page
        // is checked against its end, so a search that ends without an error found what it
        // would have found in the whole page.
        match SegmentPage::parse(bytes, index).and_then(|page| page.find(key, cpu)) {
            Ok(found) => return Ok(found),
            Err(_) => *cpu = before,
        }
    }
    scratch.resize(view.page_bytes(), 0);
    view.copy(0, scratch).map_err(SpaceError::from)?;
    SegmentPage::parse(scratch, index)?.find(key, cpu)
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

/// The keys of a pinned segment's entries as a search first looks at them: the bytes every key
/// shares (its head), and per entry the eight bytes after it, big-endian. A search compares those
/// words, which lie together, and reads an entry only where they tie, so its probes touch a few
/// cache lines instead of one per entry. What it counts is what [`find_in`] counts: where two
/// words differ, the keys first differ at the words' first differing byte.
#[derive(Debug)]
pub(crate) struct EntryPrefixes {
    head: Key,
    words: Box<[u64]>,
}

impl EntryPrefixes {
    /// The words of sorted `entries`, or `None` if some key ends within eight bytes of the head
    /// (a zero-padded word would not say where such keys differ).
    pub(crate) fn of(entries: &[Entry]) -> Option<EntryPrefixes> {
        let (first, last) = (&entries.first()?.key, &entries.last()?.key);
        let head = shared_head(first, last);
        let mut words = Vec::with_capacity(entries.len());
        for entry in entries {
            words.push(word_at(&entry.key, head)?);
        }
        Some(EntryPrefixes {
            head: Key::from_slice(&first[..head]),
            words: words.into_boxed_slice(),
        })
    }

    /// Whether these are the words [`EntryPrefixes::of`] makes of `entries`, found without
    /// building them again.
    pub(crate) fn are_of(&self, entries: &[Entry]) -> bool {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return false;
        };
        let head = self.head.len();
        shared_head(&first.key, &last.key) == head
            && first.key.starts_with(&self.head)
            && self.words.len() == entries.len()
            && entries
                .iter()
                .zip(self.words.iter())
                .all(|(entry, &word)| word_at(&entry.key, head) == Some(word))
    }

    /// [`find_in`] over `entries`, whose words these are, with the same result and counts.
    pub(crate) fn find(&self, entries: &[Entry], key: &[u8], cpu: &mut CpuCounts) -> Option<usize> {
        let head = self.head.len();
        let key_word = match word_at(key, head) {
            Some(word) if key.starts_with(&self.head) && self.words.len() == entries.len() => word,
            _ => return find_in(entries, key, cpu),
        };
        let (mut low, mut high) = (0usize, entries.len());
        while low < high {
            let middle = (low + high) / 2;
            let word = self.words[middle];
            let order = if word == key_word {
                cpu.compare(&entries[middle].key, key)
            } else {
                cpu.count_differing_at(head + (word ^ key_word).leading_zeros() as usize / 8);
                word.cmp(&key_word)
            };
            match order {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Some(middle),
            }
        }
        None
    }
}

/// Bytes `at..at + 8` of `key`, big-endian, if it has them: words order keys that share their
/// first `at` bytes as the keys do, wherever the words differ.
pub(crate) fn word_at(key: &[u8], at: usize) -> Option<u64> {
    key.get(at..at.checked_add(8)?).map(word_of)
}

/// The first eight bytes of `bytes`, big-endian, zero-padded. Its upper four bytes are PinK's
/// prefix of `bytes`.
pub(crate) fn word_of(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    for (slot, byte) in word.iter_mut().zip(bytes) {
        *slot = *byte;
    }
    u64::from_be_bytes(word)
}

/// How many leading bytes `a` and `b` share: of a sorted run's first and last key, the bytes
/// every key of the run shares.
pub(crate) fn shared_head(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(a, b)| a == b).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(key: &str, pointer: u64) -> Entry {
        Entry {
            key: Key::from_slice(key.as_bytes()),
            pointer,
            value_len: 3,
            from_gc: false,
        }
    }

    /// A search of a meta page as it lies in the media finds what a search of the whole page
    /// finds, with the same counts, on every media: in place where the page's payload lies in
    /// one literal, and over a copy where the search needs a byte past it (the last entry's
    /// value length ends in zero bytes, which the dense encoding keeps with the page's tail).
    #[test]
    fn a_search_of_a_meta_page_in_place_finds_what_the_page_holds() {
        use kvssd_flash::{BlockAddress, Flash, MediaKind, Profile, Purpose};
        let profile = Profile::test_min();
        let page_bytes = profile.geometry.page_bytes as usize;
        let mut entries = Vec::new();
        let mut packing = Packing::new(page_bytes);
        for i in 0..1_000u64 {
            let mut next = entry(&format!("key{:05}", i * 2 + 1), 1 << 40 | i);
            next.value_len = 1_024;
            if packing.closes(next.encoded_bytes()) && !entries.is_empty() {
                break;
            }
            entries.push(next);
        }
        let image = encode(&entries, page_bytes);
        let last = entries.last().map(|entry| entry.key.to_vec());
        let mut probes: Vec<Vec<u8>> = entries.iter().map(|entry| entry.key.to_vec()).collect();
        probes.extend((0..=entries.len() as u64).map(|i| format!("key{:05}", i * 2).into_bytes()));
        for media in [MediaKind::Ram, MediaKind::Compact] {
            let mut flash = Flash::new_on(&media, profile.geometry, Some(profile.timing.clone()))
                .expect("flash");
            let page = BlockAddress { die: 0, block: 0 }.page(0);
            flash
                .program_dense(0, page, Purpose::Index, &image, &[])
                .expect("program");
            for key in &probes {
                let mut expected_cpu = CpuCounts::default();
                let expected = SegmentPage::parse(&image, 7)
                    .and_then(|page| page.find(key, &mut expected_cpu))
                    .expect("finds");
                let mut cpu = CpuCounts::default();
                let mut scratch = Vec::new();
                let (found, _) = flash
                    .read_parts(0, page, Purpose::Index, |view| {
                        find_in_view(view, 7, key, &mut cpu, &mut scratch)
                    })
                    .expect("reads");
                assert_eq!(found.expect("finds"), expected, "{media:?}");
                assert_eq!(cpu, expected_cpu, "{media:?}");
                let copied = !scratch.is_empty();
                let is_last = Some(key) == last.as_ref();
                assert_eq!(copied, media == MediaKind::Compact && is_last, "{media:?}");
            }
        }
    }

    #[test]
    fn segment_round_trip_and_search() {
        let entries: Vec<Entry> = (0..40).map(|i| entry(&format!("k{i:03}"), i)).collect();
        let mut packing = Packing::new(512);
        let mut segments: Vec<Vec<Entry>> = Vec::new();
        for entry in &entries {
            if packing.closes(entry.encoded_bytes()) || segments.is_empty() {
                segments.push(Vec::new());
            }
            segments
                .last_mut()
                .expect("a segment is open")
                .push(entry.clone());
        }
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
    fn segment_page_of_copied_raw_entries_is_the_encoded_page() {
        let entries: Vec<Entry> = (0..30).map(|i| entry(&format!("key{i:02}"), i)).collect();
        let source = encode(&entries, 1024);
        let view = SegmentPage::parse(&source, 0).expect("parse");
        // Every other entry copied as encoded, the rest pushed decoded: one page either way.
        let mut builder = PageBuilder::default();
        for (slot, wanted) in entries.iter().enumerate() {
            let raw = view.raw(slot).expect("raw entry");
            assert_eq!(raw.key(), wanted.key.as_slice());
            assert_eq!(raw.encoded_bytes(), wanted.encoded_bytes());
            assert_eq!(raw.to_entry(), *wanted);
            if slot % 2 == 0 {
                builder.push_raw(raw);
            } else {
                builder.push(wanted);
            }
        }
        assert_eq!(builder.take_image(1024), source);
        assert!(builder.is_empty(), "taking the image clears the builder");
        let tombstone = entry("gone", TOMBSTONE);
        let page = encode(std::slice::from_ref(&tombstone), 64);
        let view = SegmentPage::parse(&page, 0).expect("parse");
        assert!(view.raw(0).expect("raw entry").is_tombstone());
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

    proptest! {
        /// Writing new pointers where a page holds the old ones makes the page that encoding the
        /// entries with the new pointers makes (GC's rewrite of a segment relies on it), and
        /// finding slots in the page counts what finding them among the entries does.
        #[test]
        fn pointers_written_in_place_make_the_encoded_page(
            keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..40), 1..120),
            moved in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u64>()), 0..20),
        ) {
            let mut entries: Vec<Entry> = keys
                .iter()
                .enumerate()
                .map(|(slot, key)| Entry {
                    key: Key::from_slice(key),
                    pointer: slot as u64,
                    value_len: 7,
                    from_gc: false,
                })
                .collect();
            let mut image = encode(&entries, 8192);
            let view = SegmentPage::parse(&image, 0).expect("an encoded page parses");
            let (mut on_page, mut in_dram) = (CpuCounts::default(), CpuCounts::default());
            let mut patches = Vec::new();
            for (index, pointer) in &moved {
                let slot = index.index(entries.len());
                let key = entries[slot].key.clone();
                prop_assert_eq!(view.find_slot(&key, &mut on_page).expect("search"), Some(slot));
                prop_assert_eq!(find_in(&entries, &key, &mut in_dram), Some(slot));
                patches.push((view.pointer_span(slot).expect("span"), *pointer));
                entries[slot].pointer = *pointer;
            }
            prop_assert_eq!(on_page, in_dram);
            for (span, pointer) in patches {
                image[span].copy_from_slice(&pointer.to_le_bytes());
            }
            prop_assert_eq!(image, encode(&entries, 8192));
        }

        /// Searching with prefixes finds what a plain search finds, and counts the same.
        #[test]
        fn entry_prefixes_search_as_find_in_does(
            head in proptest::collection::vec(0u8..3, 0..6),
            tails in proptest::collection::btree_set(proptest::collection::vec(0u8..4, 8..12), 1..60),
            probes in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..13), 1..20),
        ) {
            let key = |tail: &[u8]| head.iter().chain(tail).copied().collect::<Vec<u8>>();
            let entries: Vec<Entry> = tails
                .iter()
                .map(|tail| Entry {
                    key: Key::from_slice(&key(tail)),
                    pointer: 1,
                    value_len: 1,
                    from_gc: false,
                })
                .collect();
            let prefixes = EntryPrefixes::of(&entries);
            let wanted = tails.iter().map(|tail| key(tail)).chain(probes.iter().map(|p| key(p)));
            for wanted in wanted.chain(probes.iter().cloned()) {
                let (mut plain, mut fast) = (CpuCounts::default(), CpuCounts::default());
                let expected = find_in(&entries, &wanted, &mut plain);
                let found = match &prefixes {
                    Some(prefixes) => prefixes.find(&entries, &wanted, &mut fast),
                    None => find_in(&entries, &wanted, &mut fast),
                };
                prop_assert_eq!(found, expected);
                prop_assert_eq!(fast, plain);
            }
        }
    }
}
