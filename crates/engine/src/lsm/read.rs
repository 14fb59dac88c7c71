//! Reads: point lookups (GET, presence) through L0 and each level's one candidate segment, and
//! range scans merging every level.

use std::sync::Arc;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{RecordPointer, Space};

use super::bloom;
use super::level::{Level, SearchMode};
use super::segment::{find_in_view, Entry, SegmentPage};
use super::{Found, LsmTree, Pairs, Picked, Result};
use crate::{check_record_key, EngineError, Located, LocatedPairs};

impl LsmTree {
    /// Finds the newest version of `key`: L0, then each level's one candidate segment. Returns what
    /// it found, when, and how many meta pages it read.
    pub(super) fn lookup(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        purpose: Purpose,
    ) -> Result<(Found, SimTime, u32)> {
        let mut t = at;
        self.count_l0_search(key);
        if let Some(found) = self.l0.get(key) {
            return Ok((Found::L0(found.value.as_deref().map(<[u8]>::to_vec)), t, 0));
        }
        // An immutable buffer's pairs are already in the levels (a flush changes the index at
        // once; only its flash work runs later), so it is a DRAM copy that saves a read. GC must
        // not take it for the newest version: the level entry may point into the victim, and
        // dropping that record would leave the entry dangling once the victim is erased.
        if purpose != Purpose::Gc {
            if let Some(found) = self
                .flushing
                .visible(space, at)
                .find_map(|immutable| immutable.get(key))
            {
                return Ok((Found::L0(found.value.as_deref().map(<[u8]>::to_vec)), t, 0));
            }
        }
        let mode = self.search_mode();
        // The key's filter hash, once, for every level with a filter.
        let mut key_hash = None;
        let mut bounds: Option<(usize, usize)> = None;
        let mut meta_reads = 0;
        for index in 0..self.levels.len() {
            let (low, high) = bounds.unwrap_or((0, usize::MAX));
            let level = &self.levels[index];
            let found = level.find_segment(key, low, high, mode, &mut self.cpu_pending);
            bounds = None;
            if self.features.range_pointers
                && index + 1 < self.levels.len()
                && !level.segments.is_empty()
            {
                bounds = Some(match found {
                    Some(j) => (
                        level.segments[j].range_pointer as usize,
                        level
                            .segments
                            .get(j + 1)
                            .map_or(usize::MAX, |next| next.range_pointer as usize),
                    ),
                    None => (0, level.segments[0].range_pointer as usize),
                });
            }
            let Some(j) = found else {
                continue;
            };
            let mut filter_passed = false;
            if let Some(filter) = &level.segments[j].bloom {
                let predicted = filter.predicted_fpr();
                let key_hash = *key_hash.get_or_insert_with(|| bloom::hash(key));
                if !filter.may_contain_hashed(key, key_hash, &mut self.cpu_pending) {
                    let level = &mut self.levels[index];
                    level.bloom_negatives += 1;
                    level.bloom_expected_false_positives += predicted;
                    continue;
                }
                filter_passed = true;
            }
            let segment = &self.levels[index].segments[j];
            let entry = if let Some(entries) = &segment.entries {
                segment
                    .find_pinned(key, &mut self.cpu_pending)
                    .map(|slot| entries[slot].clone())
            } else {
                let Some(page) = segment.page else {
                    return Err(EngineError::Config(
                        "an unpinned segment has no flash address".into(),
                    ));
                };
                t = self.charge(space, t);
                let cpu = &mut self.cpu_pending;
                let scratch = &mut self.meta_page;
                let (found, done) = space.read_page_parts(t, page, purpose, |view| {
                    find_in_view(view, page.0, key, cpu, scratch)
                })?;
                t = done;
                meta_reads += 1;
                found?
            };
            if let Some(entry) = entry {
                return Ok((
                    Found::Level {
                        level: index,
                        segment: j,
                        entry,
                    },
                    t,
                    meta_reads,
                ));
            }
            if filter_passed {
                let predicted = self.levels[index].segments[j]
                    .bloom
                    .as_ref()
                    .map_or(0.0, |filter| filter.predicted_fpr());
                let level = &mut self.levels[index];
                level.bloom_negatives += 1;
                level.bloom_false_positives += 1;
                level.bloom_expected_false_positives += predicted;
            }
        }
        Ok((Found::Absent, t, meta_reads))
    }

    /// Finds where the newest version of `key` is without reading its value: in DRAM (L0 or an
    /// immutable buffer), absent or deleted, or a record on flash. Counts the GET's meta reads.
    pub fn locate(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(Located, SimTime)> {
        self.check_key(key)?;
        let (found, t, meta_reads) = self.lookup(space, at, key, Purpose::Index)?;
        self.last_get_meta_reads = meta_reads;
        self.gets.record(meta_reads);
        let located = match found {
            Found::Absent => Located::Value(None),
            Found::L0(value) => Located::Value(value),
            Found::Level { entry, .. } if entry.is_tombstone() => Located::Value(None),
            Found::Level { entry, .. } => Located::Record {
                pointer: RecordPointer::from_raw(entry.pointer),
                value_len: entry.value_len,
            },
        };
        Ok((located, t))
    }

    /// Reads the value of the newest version of `key`, or `None` if it has none (never stored or
    /// deleted). Returns when the value is at the controller.
    pub fn get(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        let (located, mut t) = self.locate(space, at, key)?;
        let value = match located {
            Located::Value(value) => value,
            Located::Record { pointer, .. } => {
                t = self.charge(space, t);
                let (record, done) = space.read_record(t, pointer, Purpose::UserData)?;
                t = done;
                check_record_key(key, &record.key, pointer)?;
                Some(record.value)
            }
        };
        Ok((value, self.charge(space, t)))
    }

    /// Whether `key` has a live value (no value read). Returns when the index search ends.
    pub fn contains(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(bool, SimTime)> {
        self.check_key(key)?;
        let (found, t, _) = self.lookup(space, at, key, Purpose::Index)?;
        let present = match found {
            Found::Absent => false,
            Found::L0(value) => value.is_some(),
            Found::Level { entry, .. } => !entry.is_tombstone(),
        };
        Ok((present, self.charge(space, t)))
    }

    /// Up to `count` pairs with keys `>= start`, in key order, from one consistent view (the engine
    /// is single-threaded, so the view is the state at the call).
    pub fn scan(
        &mut self,
        space: &mut Space,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(Pairs, SimTime)> {
        let (picked, mut t) = self.scan_pick(space, at, start, count)?;
        let issue = t;
        space.prefetch_records(picked.iter().filter_map(|(_, value)| {
            value
                .as_ref()
                .err()
                .map(|&(pointer, _)| RecordPointer::from_raw(pointer))
        }));
        let mut out = Vec::with_capacity(picked.len());
        for (key, value) in picked {
            let value = match value {
                Ok(value) => value,
                Err((pointer, _)) => {
                    let (record, done) = space.read_record(
                        issue,
                        RecordPointer::from_raw(pointer),
                        Purpose::UserData,
                    )?;
                    t = t.max(done);
                    record.value
                }
            };
            out.push((key, value));
        }
        Ok((out, self.charge(space, t)))
    }

    /// The pairs [`LsmTree::scan`] returns, with the values on flash left unread: each key with
    /// its value in DRAM or its record's pointer.
    pub fn scan_locate(
        &mut self,
        space: &mut Space,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(LocatedPairs, SimTime)> {
        let (picked, t) = self.scan_pick(space, at, start, count)?;
        let located = picked
            .into_iter()
            .map(|(key, value)| {
                let located = match value {
                    Ok(value) => Located::Value(Some(value)),
                    Err((pointer, value_len)) => Located::Record {
                        pointer: RecordPointer::from_raw(pointer),
                        value_len,
                    },
                };
                (key, located)
            })
            .collect();
        Ok((located, t))
    }

    /// The newest version of up to `count` keys `>= start`, in key order, live ones only: a
    /// value in DRAM, or the pointer of its record. Returns when the value reads may be issued.
    fn scan_pick(
        &mut self,
        space: &mut Space,
        at: SimTime,
        start: &[u8],
        count: usize,
    ) -> Result<(Vec<Picked>, SimTime)> {
        self.check_key(start)?;
        let mut t = at;
        // Source 0 is L0; source i + 1 is level i. A lower source number is newer.
        // L0 is walked as the scan consumes it (a scan takes at most a few of its pairs).
        let l0_map = Arc::clone(&self.l0);
        let mut l0 = l0_map
            .range::<[u8], _>((std::ops::Bound::Included(start), std::ops::Bound::Unbounded))
            .peekable();
        let mode = SearchMode { prefixes: false };
        let mut cursors = Vec::new();
        let mut issued_at = t;
        for index in 0..self.levels.len() {
            let first = self.levels[index]
                .find_segment(start, 0, usize::MAX, mode, &mut self.cpu_pending)
                .unwrap_or(0);
            let (cursor, done) =
                ScanCursor::open(space, &self.levels[index], issued_at, first, start, count)?;
            t = t.max(done);
            cursors.push(cursor);
        }
        let mut picked: Vec<Picked> = Vec::new();
        while picked.len() < count {
            // Refill exhausted cursors: from the page they read, or from their next segment.
            let wanted = count - picked.len();
            for (index, cursor) in cursors.iter_mut().enumerate() {
                while cursor.position >= cursor.entries.len() {
                    if cursor.decode_more(wanted)? {
                        continue;
                    }
                    if cursor.segment + 1 >= self.levels[index].segments.len() {
                        break;
                    }
                    issued_at = issued_at.max(t);
                    let (next, done) = ScanCursor::open(
                        space,
                        &self.levels[index],
                        issued_at,
                        cursor.segment + 1,
                        &[],
                        wanted,
                    )?;
                    t = t.max(done);
                    *cursor = next;
                }
            }
            let mut smallest: Option<&[u8]> = l0.peek().map(|&(key, _)| &**key);
            for cursor in &cursors {
                if let Some(entry) = cursor.entries.get(cursor.position) {
                    if smallest.is_none_or(|key| entry.key.as_slice() < key) {
                        smallest = Some(&entry.key);
                    }
                }
            }
            let Some(smallest) = smallest.map(<[u8]>::to_vec) else {
                break;
            };
            self.cpu_pending.key_comparisons += cursors.len() as u64 + 1;
            // The newest source holding the key decides; older ones are skipped.
            let mut decided: Option<Result<Option<Vec<u8>>, Entry>> = None;
            if let Some((_, value)) = l0.next_if(|&(key, _)| **key == *smallest) {
                decided = Some(Ok(value.value.as_deref().map(<[u8]>::to_vec)));
            }
            for cursor in &mut cursors {
                if cursor
                    .entries
                    .get(cursor.position)
                    .is_some_and(|entry| entry.key.as_slice() == smallest.as_slice())
                {
                    if decided.is_none() {
                        decided = Some(Err(cursor.entries[cursor.position].clone()));
                    }
                    cursor.position += 1;
                }
            }
            match decided {
                Some(Ok(Some(value))) => picked.push((smallest, Ok(value))),
                Some(Err(entry)) if !entry.is_tombstone() => {
                    picked.push((smallest, Err((entry.pointer, entry.value_len))));
                }
                _ => {}
            }
        }
        Ok((picked, self.charge(space, t)))
    }

    /// The entries of one segment of a level (from DRAM if pinned, else read at `at`).
    pub(super) fn segment_entries_of(
        space: &mut Space,
        level: &Level,
        at: SimTime,
        segment: usize,
        purpose: Purpose,
    ) -> Result<(Arc<Vec<Entry>>, SimTime)> {
        let Some(segment) = level.segments.get(segment) else {
            return Ok((Arc::new(Vec::new()), at));
        };
        if let Some(entries) = &segment.entries {
            return Ok((Arc::clone(entries), at));
        }
        let Some(page) = segment.page else {
            return Err(EngineError::Config(
                "an unpinned segment has no flash address".into(),
            ));
        };
        let (bytes, done) = space.read_page(at, page, purpose)?;
        Ok((
            Arc::new(SegmentPage::parse(&bytes, page.0)?.entries()?),
            done,
        ))
    }
}

/// A scan's place in one level: the segment it is in, the entries of it decoded so far and the
/// next of them. A segment read from flash keeps its page, whose entries are decoded as the
/// scan reaches them, a scan's worth at a time: a scan takes a few of a page's hundreds.
struct ScanCursor {
    segment: usize,
    entries: Arc<Vec<Entry>>,
    position: usize,
    /// The page of a segment read from flash, its index, and the slot of its next entry not
    /// decoded yet.
    page: Option<(Vec<u8>, u64, usize)>,
}

impl ScanCursor {
    /// A cursor at the first entry `>= start` of segment `segment` of `level`: a pinned
    /// segment's entries from DRAM, or its page read at `at`, with `wanted` entries decoded.
    fn open(
        space: &mut Space,
        level: &Level,
        at: SimTime,
        segment: usize,
        start: &[u8],
        wanted: usize,
    ) -> Result<(ScanCursor, SimTime)> {
        let mut cursor = ScanCursor {
            segment,
            entries: Arc::new(Vec::new()),
            position: 0,
            page: None,
        };
        let Some(found) = level.segments.get(segment) else {
            return Ok((cursor, at));
        };
        if let Some(entries) = &found.entries {
            cursor.position = entries.partition_point(|entry| entry.key.as_slice() < start);
            cursor.entries = Arc::clone(entries);
            return Ok((cursor, at));
        }
        let Some(page) = found.page else {
            return Err(EngineError::Config(
                "an unpinned segment has no flash address".into(),
            ));
        };
        let (bytes, done) = space.read_page(at, page, Purpose::Index)?;
        let first = SegmentPage::parse(&bytes, page.0)?.lower_bound(start)?;
        cursor.page = Some((bytes, page.0, first));
        cursor.decode_more(wanted)?;
        Ok((cursor, done))
    }

    /// Decodes up to `wanted` more entries of its page in place of those it holds; whether
    /// there were any.
    fn decode_more(&mut self, wanted: usize) -> Result<bool> {
        let Some((bytes, index, next)) = &mut self.page else {
            return Ok(false);
        };
        let entries = SegmentPage::parse(bytes, *index)?.entries_in(*next, wanted.max(1))?;
        if entries.is_empty() {
            return Ok(false);
        }
        *next += entries.len();
        self.entries = Arc::new(entries);
        self.position = 0;
        Ok(true)
    }
}
