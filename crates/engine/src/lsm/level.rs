//! Levels and their level lists: per meta segment its start key, flash address, 4-byte prefix and
//! range pointer into the next level's list (PinK §4.1, §4.3).

use std::sync::Arc;

use kvssd_space::PageIndex;

use super::bloom::Bloom;
use super::segment::Entry;
use crate::cpu::CpuCounts;

/// One meta segment as the level list sees it.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    /// The first key of the segment.
    pub(crate) start_key: Vec<u8>,
    /// The first four bytes of the start key, big-endian, zero-padded: comparing prefixes orders
    /// keys the same way as comparing the keys whenever the prefixes differ.
    pub(crate) prefix: u32,
    /// Index in the next level's list of the entry with the greatest start key `<=` this start key
    /// (0 when there is none).
    pub(crate) range_pointer: u32,
    /// Where the segment is on flash; `None` while its level is pinned.
    pub(crate) page: Option<PageIndex>,
    /// The entries, when the level is pinned.
    pub(crate) entries: Option<Arc<Vec<Entry>>>,
    /// `lightstore`'s filter over the segment's keys.
    pub(crate) bloom: Option<Arc<Bloom>>,
}

pub(crate) fn prefix_of(key: &[u8]) -> u32 {
    let mut bytes = [0u8; 4];
    for (slot, byte) in bytes.iter_mut().zip(key) {
        *slot = *byte;
    }
    u32::from_be_bytes(bytes)
}

/// A level below L0: one sorted run of meta segments with disjoint, ordered key ranges.
///
/// The level list is an immutable, reference-counted run: snapshots share it with the live tree,
/// and the live tree copies it on write (`Arc::make_mut`) while a snapshot holds it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Level {
    pub(crate) segments: Arc<Vec<Segment>>,
    pub(crate) entries: u64,
    /// Sum of the entries' key lengths (sizes merges before they run).
    pub(crate) key_bytes: u64,
    pub(crate) pinned: bool,
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
        let key_prefix = prefix_of(key);
        // Invariant: every segment before `first` starts <= key; every one from `last` on starts > key.
        let (mut first, mut last) = (low.min(high), high + 1);
        while first < last {
            let middle = (first + last) / 2;
            let segment = &self.segments[middle];
            let order = if mode.prefixes {
                cpu.prefix_comparisons += 1;
                match segment.prefix.cmp(&key_prefix) {
                    std::cmp::Ordering::Equal => cpu.compare(&segment.start_key, key),
                    other => other,
                }
            } else {
                cpu.compare(&segment.start_key, key)
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
    /// start key, and the prefix and range pointer if kept.
    pub(crate) fn list_dram_bytes(&self, prefixes: bool, range_pointers: bool) -> u64 {
        let per_entry = 8 + if prefixes { 4 } else { 0 } + if range_pointers { 4 } else { 0 };
        self.segments
            .iter()
            .map(|segment| per_entry + segment.start_key.len() as u64)
            .sum()
    }
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
        Level {
            segments: Arc::new(
                keys.iter()
                    .map(|key| Segment {
                        start_key: key.as_bytes().to_vec(),
                        prefix: prefix_of(key.as_bytes()),
                        range_pointer: 0,
                        page: None,
                        entries: None,
                        bloom: None,
                    })
                    .collect(),
            ),
            ..Level::default()
        }
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
}
