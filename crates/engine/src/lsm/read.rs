//! Reads: point lookups (GET, presence) through L0 and each level's one candidate segment, and
//! range scans merging every level.

use std::sync::Arc;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{RecordPointer, Space};

use super::level::{Level, SearchMode};
use super::segment::{Entry, SegmentPage};
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
                if !filter.may_contain(key, &mut self.cpu_pending) {
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
                t = space.read_page_into(t, page, purpose, &mut self.meta_page)?;
                meta_reads += 1;
                SegmentPage::parse(&self.meta_page, page.0)?.find(key, &mut self.cpu_pending)?
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
        struct Cursor {
            segment: usize,
            entries: Arc<Vec<Entry>>,
            position: usize,
        }
        let mode = SearchMode { prefixes: false };
        let mut cursors = Vec::new();
        let mut issued_at = t;
        for index in 0..self.levels.len() {
            let first = self.levels[index]
                .find_segment(start, 0, usize::MAX, mode, &mut self.cpu_pending)
                .unwrap_or(0);
            let (entries, done) =
                self.segment_entries(space, issued_at, index, first, Purpose::Index)?;
            t = t.max(done);
            let position = entries.partition_point(|entry| entry.key.as_slice() < start);
            cursors.push(Cursor {
                segment: first,
                entries,
                position,
            });
        }
        let mut picked: Vec<Picked> = Vec::new();
        while picked.len() < count {
            // Refill exhausted cursors from their next segment.
            for (index, cursor) in cursors.iter_mut().enumerate() {
                while cursor.position >= cursor.entries.len()
                    && cursor.segment + 1 < self.levels[index].segments.len()
                {
                    cursor.segment += 1;
                    issued_at = issued_at.max(t);
                    let (entries, done) = Self::segment_entries_of(
                        space,
                        &self.levels[index],
                        issued_at,
                        cursor.segment,
                        Purpose::Index,
                    )?;
                    t = t.max(done);
                    cursor.entries = entries;
                    cursor.position = 0;
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
    pub(super) fn segment_entries(
        &mut self,
        space: &mut Space,
        at: SimTime,
        level: usize,
        segment: usize,
        purpose: Purpose,
    ) -> Result<(Arc<Vec<Entry>>, SimTime)> {
        Self::segment_entries_of(space, &self.levels[level], at, segment, purpose)
    }

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
