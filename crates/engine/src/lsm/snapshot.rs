//! Snapshots of a tree and iterators over them (IterKVSSD's versioning and prefetching).
//!
//! A [`TreeSnapshot`] is the tree as it was when taken: L0 and every level list, held by reference
//! count. Nothing is copied when it is taken: the live tree copies a structure on its next write to
//! it while a snapshot still holds it (L0 by `Arc::make_mut`, a level list likewise, and a merge
//! builds a new list anyway). Snapshots taken while the tree does not change are one object
//! (pooled). The pages a snapshot references on flash are kept from erasure by the space layer's
//! protection (`Space::protect`), which the device takes for each open iterator.
//!
//! A [`SnapshotIter`] merges L0 and one cursor per level, newest source first, and skips
//! tombstones. *Index prefetch*: when a cursor enters a meta segment that lives on flash, the read
//! of that level's next segment is issued at once and collected when the cursor gets there.
//! *Value prefetch* of degree `D`: the value reads of the next `D` entries are issued ahead of the
//! cursor and waited for only when their entry is returned. Both issue reads at the current time
//! and wait later, so the overlap shows in simulated time.

use std::collections::{HashSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{RecordPointer, Space};

use super::level::Segment;
use super::segment::{Entry, SegmentPage};
use super::{L0Map, LsmTree, Result};
use crate::EngineError;

/// DRAM a snapshot's own header takes besides the structures it shares (a pointer per level, the
/// reference counts, the namespace).
const SNAPSHOT_HEADER_BYTES: u64 = 64;
/// DRAM of one level-list entry besides its start key (address, key pointer, prefix, range pointer).
const LIST_ENTRY_BYTES: u64 = 16;

/// The tree as it was when the snapshot was taken. Immutable; shared by reference count.
#[derive(Debug)]
pub struct TreeSnapshot {
    namespace: u32,
    l0: Arc<L0Map>,
    l0_bytes: u64,
    levels: Vec<Arc<Vec<Segment>>>,
    page_bytes: u64,
}

impl TreeSnapshot {
    /// The namespace of the tree.
    pub fn namespace(&self) -> u32 {
        self.namespace
    }
}

impl LsmTree {
    /// A snapshot of the tree as it is now. Taking one copies nothing; consecutive snapshots with
    /// no write between them are the same object.
    pub fn snapshot(&mut self) -> Arc<TreeSnapshot> {
        if let Some(snapshot) = &self.snapshot_cache {
            return Arc::clone(snapshot);
        }
        let snapshot = Arc::new(TreeSnapshot {
            namespace: self.config.namespace,
            l0: Arc::clone(&self.l0),
            l0_bytes: self.l0_bytes,
            levels: self
                .levels
                .iter()
                .map(|level| Arc::clone(&level.segments))
                .collect(),
            page_bytes: self.page_bytes as u64,
        });
        self.snapshot_cache = Some(Arc::clone(&snapshot));
        snapshot
    }

    /// DRAM a snapshot costs now: its header plus every structure it holds that the live tree no
    /// longer shares (a frozen L0, superseded level lists, pinned segments and filters). Right
    /// after it is taken this is only the header.
    pub fn snapshot_dram_bytes(&self, snapshot: &TreeSnapshot) -> u64 {
        let mut bytes = SNAPSHOT_HEADER_BYTES + 8 * snapshot.levels.len() as u64;
        if !Arc::ptr_eq(&snapshot.l0, &self.l0) {
            bytes += snapshot.l0_bytes;
        }
        let mut live_entries: HashSet<*const Vec<Entry>> = HashSet::new();
        for level in &self.levels {
            for segment in level.segments.iter() {
                if let Some(entries) = &segment.entries {
                    live_entries.insert(Arc::as_ptr(entries));
                }
            }
        }
        for (index, list) in snapshot.levels.iter().enumerate() {
            let shared = self
                .levels
                .get(index)
                .is_some_and(|live| Arc::ptr_eq(&live.segments, list));
            if shared {
                continue;
            }
            for segment in list.iter() {
                bytes += LIST_ENTRY_BYTES + segment.start_key.len() as u64;
                if let Some(entries) = &segment.entries {
                    if !live_entries.contains(&Arc::as_ptr(entries)) {
                        bytes += snapshot.page_bytes;
                    }
                }
                if let Some(filter) = &segment.bloom {
                    bytes += filter.dram_bytes();
                }
            }
        }
        bytes
    }
}

/// One entry an iterator returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotEntry {
    /// The key.
    pub key: Vec<u8>,
    /// The value; `None` for a keys-only iterator.
    pub value: Option<Vec<u8>>,
    /// Length of the value in bytes.
    pub value_len: usize,
}

/// What an iterator read and prefetched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IterStats {
    /// Meta pages read when the cursor needed them.
    pub meta_reads: u64,
    /// Meta pages read ahead by index prefetch.
    pub meta_prefetches: u64,
    /// Value records read when their entry was returned.
    pub value_reads: u64,
    /// Value records read ahead by value prefetch.
    pub value_prefetches: u64,
}

#[derive(Debug, Clone)]
struct LevelCursor {
    segment: usize,
    entries: Arc<Vec<Entry>>,
    position: usize,
    /// The next segment's entries, read ahead, and when that read completes.
    prefetched: Option<(usize, Arc<Vec<Entry>>, SimTime)>,
}

#[derive(Debug, Clone)]
enum AheadValue {
    /// From L0: already in DRAM.
    Known(Vec<u8>),
    /// On flash, not yet read.
    Pointer(u64),
    /// On flash, read issued; the bytes are usable at `done`.
    Reading { value: Vec<u8>, done: SimTime },
}

#[derive(Debug, Clone)]
struct Ahead {
    key: Vec<u8>,
    value_len: usize,
    value: AheadValue,
}

/// An iterator over a [`TreeSnapshot`]: positioned by [`SnapshotIter::seek`], read by
/// [`SnapshotIter::next`].
#[derive(Debug)]
pub struct SnapshotIter {
    snapshot: Arc<TreeSnapshot>,
    prefix: Vec<u8>,
    keys_only: bool,
    degree: usize,
    index_prefetch: bool,
    l0_after: Bound<Vec<u8>>,
    cursors: Vec<LevelCursor>,
    ahead: VecDeque<Ahead>,
    finished: bool,
    stats: IterStats,
}

impl SnapshotIter {
    /// An iterator over `snapshot` returning only keys that start with `prefix` (all keys when it
    /// is empty), with value prefetch of `degree` entries and index prefetch if asked. It returns
    /// nothing until [`SnapshotIter::seek`] positions it.
    pub fn new(
        snapshot: Arc<TreeSnapshot>,
        prefix: &[u8],
        keys_only: bool,
        degree: usize,
        index_prefetch: bool,
    ) -> SnapshotIter {
        SnapshotIter {
            snapshot,
            prefix: prefix.to_vec(),
            keys_only,
            degree,
            index_prefetch,
            l0_after: Bound::Unbounded,
            cursors: Vec::new(),
            ahead: VecDeque::new(),
            finished: true,
            stats: IterStats::default(),
        }
    }

    /// The snapshot it reads.
    pub fn snapshot(&self) -> &Arc<TreeSnapshot> {
        &self.snapshot
    }

    /// What it read so far.
    pub fn stats(&self) -> IterStats {
        self.stats
    }

    /// Whether every entry was returned.
    pub fn is_finished(&self) -> bool {
        self.finished && self.ahead.is_empty()
    }

    fn load(
        &mut self,
        space: &mut Space,
        at: SimTime,
        level: usize,
        segment: usize,
        prefetch: bool,
    ) -> Result<(Arc<Vec<Entry>>, SimTime)> {
        let Some(found) = self.snapshot.levels[level].get(segment) else {
            return Ok((Arc::new(Vec::new()), at));
        };
        if let Some(entries) = &found.entries {
            return Ok((Arc::clone(entries), at));
        }
        let Some(page) = found.page else {
            return Err(EngineError::Config(
                "an unpinned segment has no flash address".into(),
            ));
        };
        if prefetch {
            self.stats.meta_prefetches += 1;
        } else {
            self.stats.meta_reads += 1;
        }
        let (bytes, done) = space.read_page(at, page, Purpose::Index)?;
        Ok((
            Arc::new(SegmentPage::parse(&bytes, page.0)?.entries()?),
            done,
        ))
    }

    /// Issues the read of the segment after the cursor's, if it is on flash and index prefetch is on.
    fn prefetch_next(&mut self, space: &mut Space, at: SimTime, level: usize) -> Result<()> {
        if !self.index_prefetch {
            return Ok(());
        }
        let next = self.cursors[level].segment + 1;
        let on_flash = self.snapshot.levels[level]
            .get(next)
            .is_some_and(|segment| segment.entries.is_none());
        if !on_flash {
            return Ok(());
        }
        let (entries, done) = self.load(space, at, level, next, true)?;
        self.cursors[level].prefetched = Some((next, entries, done));
        Ok(())
    }

    /// Positions the iterator at the first key `>= key` (and `>=` the prefix). Every level's
    /// segment is read at once; returns when all have arrived.
    pub fn seek(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime> {
        let lower = if key < self.prefix.as_slice() {
            self.prefix.clone()
        } else {
            key.to_vec()
        };
        self.ahead.clear();
        self.cursors.clear();
        self.finished = false;
        self.l0_after = Bound::Included(lower.clone());
        let mut t = at;
        for level in 0..self.snapshot.levels.len() {
            let list = &self.snapshot.levels[level];
            let segment = list
                .partition_point(|segment| segment.start_key.as_slice() <= lower.as_slice())
                .saturating_sub(1);
            let (entries, done) = self.load(space, at, level, segment, false)?;
            t = t.max(done);
            let position = entries.partition_point(|entry| entry.key.as_slice() < lower.as_slice());
            self.cursors.push(LevelCursor {
                segment,
                entries,
                position,
                prefetched: None,
            });
            self.prefetch_next(space, at, level)?;
        }
        Ok(t)
    }

    /// The next live entry of the merge, or `None` at the end (of the snapshot or of the prefix).
    fn advance(&mut self, space: &mut Space, at: SimTime) -> Result<(Option<Ahead>, SimTime)> {
        let mut t = at;
        loop {
            if self.finished {
                return Ok((None, t));
            }
            for level in 0..self.cursors.len() {
                while self.cursors[level].position >= self.cursors[level].entries.len()
                    && self.cursors[level].segment + 1 < self.snapshot.levels[level].len()
                {
                    let next = self.cursors[level].segment + 1;
                    let (entries, done) = match self.cursors[level].prefetched.take() {
                        Some((segment, entries, done)) if segment == next => (entries, done),
                        _ => self.load(space, t, level, next, false)?,
                    };
                    t = t.max(done);
                    let cursor = &mut self.cursors[level];
                    cursor.segment = next;
                    cursor.entries = entries;
                    cursor.position = 0;
                    self.prefetch_next(space, t, level)?;
                }
            }
            let l0_head = self
                .snapshot
                .l0
                .range::<[u8], _>((self.l0_after.as_ref().map(Vec::as_slice), Bound::Unbounded))
                .next();
            let mut smallest: Option<&[u8]> = l0_head.map(|(key, _)| &**key);
            for cursor in &self.cursors {
                if let Some(entry) = cursor.entries.get(cursor.position) {
                    if smallest.is_none_or(|key| entry.key.as_slice() < key) {
                        smallest = Some(&entry.key);
                    }
                }
            }
            let Some(smallest) = smallest.map(<[u8]>::to_vec) else {
                self.finished = true;
                return Ok((None, t));
            };
            if !smallest.starts_with(&self.prefix) {
                self.finished = true;
                return Ok((None, t));
            }
            // The newest source holding the key decides: L0, then L1, L2, ...
            let mut decided: Option<(usize, AheadValue)> = None;
            if let Some((key, value)) = l0_head {
                if **key == *smallest {
                    decided = Some(match &value.value {
                        Some(bytes) => (bytes.len(), AheadValue::Known(bytes.to_vec())),
                        None => (usize::MAX, AheadValue::Pointer(0)),
                    });
                }
            }
            for cursor in &mut self.cursors {
                if let Some(entry) = cursor.entries.get(cursor.position) {
                    if entry.key.as_slice() == smallest.as_slice() {
                        if decided.is_none() {
                            decided = Some(if entry.is_tombstone() {
                                (usize::MAX, AheadValue::Pointer(0))
                            } else {
                                (entry.value_len as usize, AheadValue::Pointer(entry.pointer))
                            });
                        }
                        cursor.position += 1;
                    }
                }
            }
            self.l0_after = Bound::Excluded(smallest.clone());
            match decided {
                Some((value_len, value)) if value_len != usize::MAX => {
                    return Ok((
                        Some(Ahead {
                            key: smallest,
                            value_len,
                            value,
                        }),
                        t,
                    ));
                }
                _ => continue,
            }
        }
    }

    fn read_value(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        pointer: u64,
    ) -> Result<(Vec<u8>, SimTime)> {
        let pointer = RecordPointer::from_raw(pointer);
        let (record, done) = space.read_record(at, pointer, Purpose::UserData)?;
        crate::check_record_key(key, &record.key, pointer)?;
        Ok((record.value, done))
    }

    /// Keeps `degree` entries ahead of the cursor with their value reads issued at `at`.
    fn top_up(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let mut t = at;
        while self.ahead.len() < self.degree && !self.finished {
            let (found, done) = self.advance(space, t)?;
            t = done;
            let Some(mut ahead) = found else { break };
            if let (AheadValue::Pointer(pointer), false) = (&ahead.value, self.keys_only) {
                let pointer = *pointer;
                let (value, done) = self.read_value(space, t, &ahead.key, pointer)?;
                self.stats.value_prefetches += 1;
                ahead.value = AheadValue::Reading { value, done };
            }
            self.ahead.push_back(ahead);
        }
        Ok(t)
    }

    /// Returns the next entries: at least one unless the iterator is at its end, then more while
    /// their keys and values fit `byte_budget`. Returns when the last returned value has arrived.
    pub fn next(
        &mut self,
        space: &mut Space,
        at: SimTime,
        byte_budget: usize,
    ) -> Result<(Vec<SnapshotEntry>, SimTime)> {
        let mut t = self.top_up(space, at)?;
        let mut out = Vec::new();
        let mut bytes = 0usize;
        loop {
            if self.ahead.is_empty() {
                let (found, done) = self.advance(space, t)?;
                t = done;
                match found {
                    Some(ahead) => self.ahead.push_back(ahead),
                    None => break,
                }
            }
            let Some(front) = self.ahead.front() else {
                break;
            };
            let size = front.key.len() + if self.keys_only { 0 } else { front.value_len };
            if !out.is_empty() && bytes + size > byte_budget {
                break;
            }
            let Some(ahead) = self.ahead.pop_front() else {
                break;
            };
            let value = if self.keys_only {
                None
            } else {
                Some(match ahead.value {
                    AheadValue::Known(value) => value,
                    AheadValue::Pointer(pointer) => {
                        let (value, done) = self.read_value(space, t, &ahead.key, pointer)?;
                        self.stats.value_reads += 1;
                        t = done;
                        value
                    }
                    AheadValue::Reading { value, done } => {
                        t = t.max(done);
                        value
                    }
                })
            };
            bytes += size;
            out.push(SnapshotEntry {
                key: ahead.key,
                value,
                value_len: ahead.value_len,
            });
            t = self.top_up(space, t)?;
            if bytes >= byte_budget {
                break;
            }
        }
        // Look one entry ahead, so the caller learns of the end with the last entries.
        if self.ahead.is_empty() && !self.finished {
            let (found, done) = self.advance(space, t)?;
            t = done;
            if let Some(ahead) = found {
                self.ahead.push_back(ahead);
            }
        }
        Ok((out, t))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    /// The first write after a snapshot copies L0's map, and the copy shares every value with the
    /// snapshot's: it costs the map's nodes and its keys (kept in the nodes up to 32 bytes), not
    /// the values' bytes.
    #[test]
    fn a_write_after_a_snapshot_shares_l0s_values_with_it() {
        let (mut space, mut tree) = super::super::test_tree();
        for id in 0u8..10 {
            tree.put(&mut space, 0, &[b'k', id], &[id; 8]).expect("put");
        }
        let snapshot = tree.snapshot();
        tree.put(&mut space, 0, b"z", b"new").expect("put");
        assert!(
            !Arc::ptr_eq(&snapshot.l0, &tree.l0),
            "the live L0 was copied"
        );
        assert_eq!(snapshot.l0.len() + 1, tree.l0.len());
        for (key, value) in snapshot.l0.iter() {
            let live_value = tree.l0.get(&key[..]).expect("still in L0");
            let (Some(old), Some(live)) = (&value.value, &live_value.value) else {
                panic!("{key:?} lost its value");
            };
            assert!(Arc::ptr_eq(old, live), "{key:?}");
        }
    }
}
