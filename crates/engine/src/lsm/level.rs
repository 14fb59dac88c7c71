//! Levels and their level lists: per meta segment its start key, flash address, 4-byte prefix and
//! range pointer into the next level's list (PinK §4.1, §4.3).
//!
//! PinK keeps "exactly the first four bytes of a start key" as its prefix. Keys of one store often
//! share their first bytes (every YCSB key starts with `user`), and then every prefix comparison
//! ties and falls through to a full comparison, so the prefix saves nothing. Here the prefix is the
//! four bytes that follow the part every start key of the level shares (the level's common
//! prefix, whose length the level keeps): with distinct first bytes it is PinK's prefix, and with a
//! shared head it still tells segments apart.

use std::sync::{Arc, OnceLock};

use kvssd_space::PageIndex;

use super::bloom::Bloom;
use super::segment::{find_in, shared_head, word_of, Entry, EntryPrefixes, Key};
use crate::cpu::CpuCounts;

/// One meta segment as the level list sees it.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    /// The first key of the segment.
    pub(crate) start_key: Key,
    /// Index in the next level's list of the entry with the greatest start key `<=` this start key
    /// (0 when there is none).
    pub(crate) range_pointer: u32,
    /// Where the segment is on flash; `None` while its level is pinned.
    pub(crate) page: Option<PageIndex>,
    /// The entries, when the level is pinned.
    pub(crate) entries: Option<Arc<Vec<Entry>>>,
    /// Their keys' prefixes ([`EntryPrefixes::of`], `None` if they have none), made by the first
    /// search that needs them: most pinned segments a Load's merges make are replaced before any
    /// GET reaches them. The keys never change while the entries are pinned (GC changes pointers
    /// only).
    pub(crate) entry_prefixes: OnceLock<Option<Arc<EntryPrefixes>>>,
    /// `lightstore`'s filter over the segment's keys.
    pub(crate) bloom: Option<Arc<Bloom>>,
}

impl Segment {
    /// A segment on flash at `page`, or pinned with `entries` (and their prefixes).
    pub(crate) fn new(
        start_key: Key,
        page: Option<PageIndex>,
        entries: Option<Arc<Vec<Entry>>>,
        bloom: Option<Arc<Bloom>>,
    ) -> Segment {
        Segment {
            start_key,
            range_pointer: 0,
            page,
            entry_prefixes: OnceLock::new(),
            entries,
            bloom,
        }
    }

    /// The slot of `key` among the pinned entries, counting comparisons.
    pub(crate) fn find_pinned(&self, key: &[u8], cpu: &mut CpuCounts) -> Option<usize> {
        let entries = self.entries.as_deref()?;
        let prefixes = self
            .entry_prefixes
            .get_or_init(|| EntryPrefixes::of(entries).map(Arc::new));
        match prefixes {
            Some(prefixes) => prefixes.find(entries, key, cpu),
            None => find_in(entries, key, cpu),
        }
    }

    /// Moves the segment to flash at `page`, dropping its entries.
    pub(crate) fn unpin(&mut self, page: PageIndex) {
        self.page = Some(page);
        self.entries = None;
        self.entry_prefixes = OnceLock::new();
    }
}

/// The words of a sorted list's start keys ([`Level::words`]), the length of the list's common
/// prefix (the bytes every start key shares), which they are taken after, and whether every start
/// key fills its word. The start keys are sorted, so what the first and the last share, all share.
fn words_of(segments: &[Segment]) -> (usize, Vec<u64>, bool) {
    let offset = match (segments.first(), segments.last()) {
        (Some(first), Some(last)) => shared_head(&first.start_key, &last.start_key),
        _ => 0,
    };
    let words = segments
        .iter()
        .map(|segment| word_of(&segment.start_key[offset..]))
        .collect();
    let filled = !segments.is_empty()
        && segments
            .iter()
            .all(|segment| segment.start_key.len() >= offset + 8);
    (offset, words, filled)
}

/// A level below L0: one sorted run of meta segments with disjoint, ordered key ranges.
///
/// The level list is an immutable, reference-counted run: snapshots share it with the live tree,
/// and the live tree copies it on write (`Arc::make_mut`) while a snapshot holds it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Level {
    /// Set with [`Level::set_segments`], which keeps `words`, `words_filled` and `prefix_offset`
    /// with them.
    pub(crate) segments: Arc<Vec<Segment>>,
    /// Per segment, the eight bytes of its start key after the level's common prefix,
    /// big-endian, zero-padded. The upper four are the segment's prefix: for keys that begin with
    /// the common prefix, comparing prefixes orders them the same way as comparing the keys
    /// whenever the prefixes differ. The whole word lets the simulator tell most tied prefixes
    /// apart without reading the start key, counting the comparison PinK makes there (see
    /// [`Level::find_segment`]). The words lie apart from the segments, eight bytes each, so that
    /// a search's probes touch a few cache lines rather than one per segment.
    pub(crate) words: Arc<Vec<u64>>,
    /// Whether every start key has eight bytes after the common prefix, so that where two words
    /// differ, so do the keys, at the same byte.
    pub(crate) words_filled: bool,
    pub(crate) entries: u64,
    /// Sum of the entries' key lengths (sizes merges before they run).
    pub(crate) key_bytes: u64,
    pub(crate) pinned: bool,
    /// Length of the common prefix of every start key; segment prefixes are taken after it.
    pub(crate) prefix_offset: usize,
    /// Filter probes on keys not in the probed segment, and how many of them passed.
    pub(crate) bloom_negatives: u64,
    pub(crate) bloom_false_positives: u64,
    /// Sum over those probes of the probed filter's predicted rate (for the expected count).
    pub(crate) bloom_expected_false_positives: f64,
}

/// How a level list is searched.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SearchMode {
    pub(crate) prefixes: bool,
}

impl Level {
    /// Makes `segments`, sorted, the level's list, with their words, and returns the list it
    /// held.
    pub(crate) fn set_segments(&mut self, segments: Vec<Segment>) -> Arc<Vec<Segment>> {
        let (offset, words, filled) = words_of(&segments);
        self.prefix_offset = offset;
        self.words = Arc::new(words);
        self.words_filled = filled;
        std::mem::replace(&mut self.segments, Arc::new(segments))
    }

    /// The segment whose range holds `key` — the one with the greatest start key `<= key` — searched
    /// among segments `low..=high` only. `None` if `key` is before every start key.
    pub(crate) fn find_segment(
        &self,
        key: &[u8],
        low: usize,
        high: usize,
        mode: SearchMode,
        cpu: &mut CpuCounts,
    ) -> Option<usize> {
        if self.segments.is_empty() {
            return None;
        }
        let high = high.min(self.segments.len() - 1);
        // Prefixes order only keys that begin with the level's common prefix: one comparison of
        // that head, against the bytes kept with the level, decides whether they can be used.
        let offset = self.prefix_offset;
        let use_prefixes = mode.prefixes && self.words.len() == self.segments.len() && {
            cpu.bytes_compared += offset as u64;
            key.get(..offset) == self.segments[0].start_key.get(..offset)
        };
        let key_word = if use_prefixes {
            word_of(&key[offset..])
        } else {
            0
        };
        let words_decide = use_prefixes && self.words_filled && key.len() >= offset + 8;
        // Invariant: every segment before `first` starts <= key; every one from `last` on starts > key.
        let (mut first, mut last) = (low.min(high), high + 1);
        while first < last {
            let middle = (first + last) / 2;
            let order = if use_prefixes {
                cpu.prefix_comparisons += 1;
                let word = self.words[middle];
                if word >> 32 != key_word >> 32 {
                    (word >> 32).cmp(&(key_word >> 32))
                } else if words_decide && word != key_word {
                    // The prefixes tie and PinK compares the keys, which first differ where the
                    // words do: count that comparison without reading the start key.
                    cpu.count_differing_at(offset + (word ^ key_word).leading_zeros() as usize / 8);
                    word.cmp(&key_word)
                } else {
                    cpu.compare(&self.segments[middle].start_key, key)
                }
            } else {
                cpu.compare(&self.segments[middle].start_key, key)
            };
            if order == std::cmp::Ordering::Greater {
                last = middle;
            } else {
                first = middle + 1;
            }
        }
        first.checked_sub(1).filter(|&found| found >= low.min(high))
    }

    /// Bytes of DRAM the level list takes: per segment an 8-byte address-and-key-pointer pair, the
    /// start key, and the prefix and range pointer if kept (prefixes also keep the common prefix's
    /// length, a word per level).
    pub(crate) fn list_dram_bytes(&self, prefixes: bool, range_pointers: bool) -> u64 {
        let per_entry = 8 + if prefixes { 4 } else { 0 } + if range_pointers { 4 } else { 0 };
        let per_level = if prefixes && !self.segments.is_empty() {
            8
        } else {
            0
        };
        per_level
            + self
                .segments
                .iter()
                .map(|segment| per_entry + segment.start_key.len() as u64)
                .sum::<u64>()
    }
}

impl Level {
    /// Checks the level's invariants; `next` is the level below, into which the range pointers
    /// point. `Err` names the first one broken.
    ///
    /// * Segments are sorted by start key, strictly increasing (so their ranges are disjoint).
    /// * A pinned level holds every segment's entries in DRAM and no page; an unpinned one holds
    ///   a page and no entries.
    /// * For entries in DRAM: each segment is non-empty, starts with its start key, is sorted
    ///   strictly, and ends before the next segment starts; the level's `entries` and
    ///   `key_bytes` are their count and their keys' bytes.
    /// * For a level on flash: `entries` is zero exactly when there are no segments, and at least
    ///   one per segment (each meta page holds one entry or more).
    /// * Every range pointer is an index into `next`'s list (0 when `next` is absent or empty).
    /// * The words and the common prefix's length are those of the start keys
    ///   ([`Level::set_segments`]).
    ///
    /// Cost: O(segments) for a level on flash; O(entries) for a pinned one, which only ever
    /// follows a merge in DRAM of at least as many entries.
    pub(crate) fn check_invariants(&self, next: Option<&Level>) -> Result<(), &'static str> {
        let next_segments = next.map_or(0, |level| level.segments.len());
        let mut dram_entries = 0u64;
        let mut dram_key_bytes = 0u64;
        for (slot, segment) in self.segments.iter().enumerate() {
            if let Some(following) = self.segments.get(slot + 1) {
                if segment.start_key >= following.start_key {
                    return Err("start keys are not strictly increasing");
                }
            }
            if segment.range_pointer as usize >= next_segments.max(1) {
                return Err("a range pointer is outside the next level's list");
            }
            match (&segment.entries, segment.page, self.pinned) {
                (Some(entries), None, true) => {
                    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
                        return Err("a pinned segment is empty");
                    };
                    if first.key != segment.start_key {
                        return Err("a pinned segment does not begin with its start key");
                    }
                    if entries.windows(2).any(|pair| pair[0].key >= pair[1].key) {
                        return Err("a pinned segment's entries are not strictly sorted");
                    }
                    let prefixes_right = match segment.entry_prefixes.get() {
                        None => true,
                        Some(Some(prefixes)) => prefixes.are_of(entries),
                        Some(None) => EntryPrefixes::of(entries).is_none(),
                    };
                    if !prefixes_right {
                        return Err("a pinned segment's prefixes are not its keys'");
                    }
                    if let Some(following) = self.segments.get(slot + 1) {
                        if last.key >= following.start_key {
                            return Err("a pinned segment overlaps the next one");
                        }
                    }
                    dram_entries += entries.len() as u64;
                    dram_key_bytes += entries.iter().map(|e| e.key.len() as u64).sum::<u64>();
                }
                (None, Some(_), false) => {}
                _ => return Err("a segment is not held as its level's pinning says"),
            }
        }
        if self.pinned {
            if self.entries != dram_entries {
                return Err("the entry count differs from the pinned segments'");
            }
            if self.key_bytes != dram_key_bytes {
                return Err("the key bytes differ from the pinned segments'");
            }
        } else if (self.entries == 0) != self.segments.is_empty()
            || self.entries < self.segments.len() as u64
        {
            return Err("the entry count cannot fill the level's segments");
        }
        let (offset, words, filled) = words_of(&self.segments);
        if offset != self.prefix_offset || words != *self.words || filled != self.words_filled {
            return Err("the words are not the start keys'");
        }
        Ok(())
    }

    /// [`Level::check_invariants`] as an assertion, kept in release builds: a level that breaks
    /// them would answer GETs and scans wrongly from then on, so the process stops where the
    /// level was installed. `index` names the level in the message.
    pub(crate) fn assert_invariants(&self, index: usize, next: Option<&Level>) {
        let checked = self.check_invariants(next);
        assert!(
            checked.is_ok(),
            "level L{} broken when installed: {}",
            index + 1,
            checked.err().unwrap_or_default()
        );
    }
}

/// Asserts the invariants of the level at `index` of `levels` just installed, and of the level
/// above it, whose range pointers were relinked into it.
pub(crate) fn assert_installed(levels: &[Level], index: usize) {
    if index > 0 {
        levels[index - 1].assert_invariants(index - 1, levels.get(index));
    }
    levels[index].assert_invariants(index, levels.get(index + 1));
}

/// Sets each segment's range pointer of `upper` into `lower` (a merge-like walk of both lists).
pub(crate) fn link(upper: &mut Level, lower: &Level, cpu: &mut CpuCounts) {
    let mut cursor = 0usize;
    // Unchanged pointers leave a list shared with a snapshot shared.
    let unchanged = upper.segments.iter().all(|segment| {
        while cursor + 1 < lower.segments.len()
            && lower.segments[cursor + 1].start_key <= segment.start_key
        {
            cursor += 1;
        }
        cpu.entries_merged += 1;
        segment.range_pointer == cursor as u32
    });
    if unchanged {
        return;
    }
    let mut cursor = 0usize;
    for segment in Arc::make_mut(&mut upper.segments).iter_mut() {
        while cursor + 1 < lower.segments.len()
            && lower.segments[cursor + 1].start_key <= segment.start_key
        {
            cursor += 1;
        }
        cpu.entries_merged += 1;
        segment.range_pointer = cursor as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(keys: &[&str]) -> Level {
        let segments: Vec<Segment> = keys
            .iter()
            .map(|key| Segment::new(Key::from_slice(key.as_bytes()), None, None, None))
            .collect();
        let mut level = Level::default();
        level.set_segments(segments);
        level
    }

    #[test]
    fn level_find_segment_with_and_without_prefixes() {
        let level = level(&["a", "abcd1", "abcd5", "b", "c\0", "c\0\0x"]);
        for prefixes in [false, true] {
            let mode = SearchMode { prefixes };
            let mut cpu = CpuCounts::default();
            let find = |key: &str, cpu: &mut CpuCounts| {
                level.find_segment(key.as_bytes(), 0, 99, mode, cpu)
            };
            assert_eq!(find("0", &mut cpu), None);
            assert_eq!(find("a", &mut cpu), Some(0));
            assert_eq!(find("abcd3", &mut cpu), Some(1));
            assert_eq!(find("abcd9", &mut cpu), Some(2));
            assert_eq!(find("bzz", &mut cpu), Some(3));
            assert_eq!(find("c\0\0", &mut cpu), Some(4));
            assert_eq!(find("zz", &mut cpu), Some(5));
        }
    }

    /// PinK's search of a level list as the model counts it: four-byte prefixes after the common
    /// prefix, and a full comparison of the keys wherever they tie.
    fn find_as_pink_counts(
        level: &Level,
        key: &[u8],
        low: usize,
        high: usize,
        cpu: &mut CpuCounts,
    ) -> Option<usize> {
        let segments = &level.segments;
        if segments.is_empty() {
            return None;
        }
        let high = high.min(segments.len() - 1);
        let offset = level.prefix_offset;
        cpu.bytes_compared += offset as u64;
        let use_prefixes = key.get(..offset) == segments[0].start_key.get(..offset);
        let prefix = |bytes: &[u8]| word_of(&bytes[..bytes.len().min(4)]) >> 32;
        let (mut first, mut last) = (low.min(high), high + 1);
        while first < last {
            let middle = (first + last) / 2;
            let start_key = &segments[middle].start_key;
            let order = if use_prefixes {
                cpu.prefix_comparisons += 1;
                match prefix(&start_key[offset..]).cmp(&prefix(&key[offset..])) {
                    std::cmp::Ordering::Equal => cpu.compare(start_key, key),
                    other => other,
                }
            } else {
                cpu.compare(start_key, key)
            };
            if order == std::cmp::Ordering::Greater {
                last = middle;
            } else {
                first = middle + 1;
            }
        }
        first.checked_sub(1).filter(|&found| found >= low.min(high))
    }

    proptest::proptest! {
        /// The search finds, and counts, what PinK's search with four-byte prefixes does, for
        /// start keys that fill their words or not, and keys with and without the common head,
        /// shorter or longer than a word.
        #[test]
        fn level_search_counts_as_pink_does(
            head in proptest::collection::vec(0u8..3, 0..4),
            shortest in proptest::sample::select(vec![1usize, 8]),
            tails in proptest::collection::btree_set(proptest::collection::vec(0u8..3, 0..12), 1..40),
            probes in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..14), 1..20),
            bounds in (0usize..40, 0usize..40),
        ) {
            let key = |tail: &[u8]| head.iter().chain(tail).copied().collect::<Vec<u8>>();
            // Tails of at least 8 bytes make start keys that fill their words (unless the list's
            // common prefix is long).
            let tails: std::collections::BTreeSet<Vec<u8>> = tails
                .into_iter()
                .map(|mut tail| {
                    tail.resize(tail.len().max(shortest), 1);
                    tail
                })
                .collect();
            let segments = tails
                .iter()
                .map(|tail| Segment::new(Key::from_slice(&key(tail)), None, None, None))
                .collect();
            let mut level = Level::default();
            level.set_segments(segments);
            let wanted = tails.iter().chain(&probes).map(|tail| key(tail)).chain(probes.clone());
            for wanted in wanted {
                for (low, high) in [(0, usize::MAX), bounds] {
                    let (mut counted, mut expected) = (CpuCounts::default(), CpuCounts::default());
                    let mode = SearchMode { prefixes: true };
                    let found = level.find_segment(&wanted, low, high, mode, &mut counted);
                    let pink = find_as_pink_counts(&level, &wanted, low, high, &mut expected);
                    proptest::prop_assert_eq!(found, pink);
                    proptest::prop_assert_eq!(counted, expected);
                }
            }
        }
    }

    #[test]
    fn level_prefixes_are_taken_after_the_common_prefix() {
        let level = level(&["user0100", "user0200", "user0300", "user0400"]);
        assert_eq!(level.prefix_offset, 5);
        let mode = SearchMode { prefixes: true };
        let mut cpu = CpuCounts::default();
        // Keys with the common head are ordered by prefixes alone unless a prefix ties.
        assert_eq!(
            level.find_segment(b"user0250", 0, 99, mode, &mut cpu),
            Some(1)
        );
        assert_eq!(
            cpu.key_comparisons, 0,
            "no prefix tied, so no full comparison"
        );
        assert_eq!(
            level.find_segment(b"user0300", 0, 99, mode, &mut cpu),
            Some(2)
        );
        assert!(
            cpu.key_comparisons > 0,
            "a tied prefix falls back to the full key"
        );
        // Keys without the head are searched by full comparisons, and found the same.
        for key in [&b"a"[..], b"user", b"user0", b"user1", b"v"] {
            let with = level.find_segment(key, 0, 99, mode, &mut cpu);
            let without = level.find_segment(key, 0, 99, SearchMode { prefixes: false }, &mut cpu);
            assert_eq!(with, without, "key {:?}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn level_range_pointers_bound_the_next_search() {
        let mut upper = level(&["b", "m", "t"]);
        let lower = level(&["a", "c", "f", "k", "n", "q", "u", "x"]);
        let mut cpu = CpuCounts::default();
        link(&mut upper, &lower, &mut cpu);
        let pointers: Vec<u32> = upper.segments.iter().map(|s| s.range_pointer).collect();
        assert_eq!(pointers, vec![0, 3, 5]);
        let mode = SearchMode { prefixes: true };
        // "p" is in upper segment 1 ("m"); the lower search runs over 3..=5 and finds "n" (4).
        let j = upper.find_segment(b"p", 0, 99, mode, &mut cpu);
        assert_eq!(j, Some(1));
        let found = lower.find_segment(b"p", 3, 5, mode, &mut cpu);
        assert_eq!(found, lower.find_segment(b"p", 0, 99, mode, &mut cpu));
    }

    fn entry(key: &str) -> Entry {
        Entry {
            key: Key::from_slice(key.as_bytes()),
            pointer: 1,
            value_len: 1,
            from_gc: false,
        }
    }

    /// A pinned level with one segment per group of keys.
    fn pinned(groups: &[&[&str]]) -> Level {
        let segments: Vec<Segment> = groups
            .iter()
            .map(|keys| {
                let entries = keys.iter().map(|key| entry(key)).collect();
                Segment::new(
                    Key::from_slice(keys[0].as_bytes()),
                    None,
                    Some(Arc::new(entries)),
                    None,
                )
            })
            .collect();
        let keys = groups.iter().flat_map(|keys| keys.iter());
        let mut level = Level {
            entries: keys.clone().count() as u64,
            key_bytes: keys.map(|key| key.len() as u64).sum(),
            pinned: true,
            ..Level::default()
        };
        level.set_segments(segments);
        level
    }

    /// A level on flash with the given start keys.
    fn on_flash(keys: &[&str], entries: u64) -> Level {
        let mut level = level(keys);
        for (slot, segment) in Arc::make_mut(&mut level.segments).iter_mut().enumerate() {
            segment.page = Some(PageIndex(slot as u64));
        }
        level.entries = entries;
        level
    }

    #[test]
    fn level_invariants_hold_for_sorted_disjoint_levels() {
        let upper = pinned(&[&["a", "b"], &["c", "d"]]);
        let lower = on_flash(&["a", "m"], 40);
        assert_eq!(upper.check_invariants(Some(&lower)), Ok(()));
        assert_eq!(lower.check_invariants(None), Ok(()));
        assert_eq!(Level::default().check_invariants(None), Ok(()));
    }

    #[test]
    fn level_invariants_catch_each_broken_rule() {
        let broken = |level: &Level, next: Option<&Level>| level.check_invariants(next).is_err();
        // Start keys out of order, and overlapping pinned segments.
        assert!(broken(&on_flash(&["b", "a"], 2), None));
        assert!(broken(&pinned(&[&["a", "d"], &["c", "e"]]), None));
        // Entries unsorted within a segment, or not starting at the start key.
        assert!(broken(&pinned(&[&["b", "a"]]), None));
        let mut level = pinned(&[&["a", "b"]]);
        Arc::make_mut(&mut level.segments)[0].start_key = Key::from_slice(b"0");
        assert!(broken(&level, None));
        // Counts that disagree with the segments.
        let mut level = pinned(&[&["a", "b"]]);
        level.entries = 3;
        assert!(broken(&level, None));
        assert!(broken(&on_flash(&["a", "b"], 1), None));
        // A range pointer past the next level's list, or any pointer without a next level.
        let mut level = on_flash(&["a", "b"], 2);
        Arc::make_mut(&mut level.segments)[1].range_pointer = 2;
        assert!(broken(&level, Some(&on_flash(&["a", "b"], 2))));
        assert!(broken(&level, None));
        // A segment held against its level's pinning.
        let mut level = pinned(&[&["a"]]);
        level.pinned = false;
        assert!(broken(&level, None));
        // Pinned entries without the prefixes their keys have, or with another segment's.
        let mut level = pinned(&[&["aaaa1111", "bbbb2222"], &["cccc3333", "dddd4444"]]);
        let mut cpu = CpuCounts::default();
        for segment in level.segments.iter() {
            segment.find_pinned(b"bbbb2222", &mut cpu);
        }
        assert!(!broken(&level, None));
        Arc::make_mut(&mut level.segments)[0].entry_prefixes = OnceLock::from(None);
        assert!(broken(&level, None));
        let segments = Arc::make_mut(&mut level.segments);
        segments[0].entry_prefixes = segments[1].entry_prefixes.clone();
        assert!(broken(&level, None));
        // Words that are not the start keys', or a list set without its words.
        let mut level = on_flash(&["a", "b"], 2);
        Arc::make_mut(&mut level.words)[1] ^= 1;
        assert!(broken(&level, None));
        let mut level = on_flash(&["a", "b"], 2);
        level.segments = Arc::new(on_flash(&["a", "c"], 2).segments.to_vec());
        assert!(broken(&level, None));
    }

    #[test]
    #[should_panic(expected = "level L2 broken when installed")]
    fn level_assert_invariants_panics_with_the_level_and_the_rule() {
        on_flash(&["b", "a"], 2).assert_invariants(1, None);
    }
}
