//! The merge of sorted entries into a level, streamed: the lower level's segments are read one
//! page at a time as the merge reaches them, and the merged entries are packed into segments as
//! they come. Host memory then holds one lower page and the new level's page images, not both
//! levels' entries decoded: at PinK's scale (44M pairs) a merge into the last level would
//! otherwise hold several GiB of entries.
//!
//! The flash sees exactly what a merge of fully decoded levels would issue, in the same order:
//! every lower page read issued when the merge starts, the merge's CPU charged, then the new pages
//! written in order. Only the order of host work differs, so figures do not depend on streaming.

use std::sync::Arc;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{PageIndex, RecordPointer, Space};

use super::bloom::Bloom;
use super::level::{self, Level, Segment};
use super::segment::{self, Entry, SegmentPage};
use super::{LsmTree, Result};
use crate::{EngineError, MERGE_ACCELERATOR_NS_PER_KIB};

/// The entries of a level, in order, read one segment at a time, every read issued at `at`.
struct LowerRun {
    segments: Arc<Vec<Segment>>,
    next: usize,
    buffer: std::iter::Peekable<std::vec::IntoIter<Entry>>,
    at: SimTime,
    /// When the last read issued so far completes.
    done: SimTime,
}

impl LowerRun {
    fn new(level: &Level, at: SimTime) -> LowerRun {
        LowerRun {
            segments: Arc::clone(&level.segments),
            next: 0,
            buffer: Vec::new().into_iter().peekable(),
            at,
            done: at,
        }
    }

    /// The next entry, reading the next segment when the current one is used up. A page read is
    /// read for the last time: compact media may free its bytes at once.
    fn peek(&mut self, space: &mut Space) -> Result<Option<&Entry>> {
        while self.buffer.peek().is_none() && self.next < self.segments.len() {
            let segment = &self.segments[self.next];
            self.next += 1;
            let entries = match (&segment.entries, segment.page) {
                (Some(entries), _) => entries.as_ref().clone(),
                (None, Some(page)) => {
                    let (bytes, done) = space.read_page(self.at, page, Purpose::Compaction)?;
                    self.done = self.done.max(done);
                    let entries = SegmentPage::parse(&bytes, page.0)?.entries()?;
                    space.discard_consumed_meta(page);
                    entries
                }
                (None, None) => {
                    return Err(EngineError::Config(
                        "an unpinned segment has no flash address".into(),
                    ))
                }
            };
            self.buffer = entries.into_iter().peekable();
        }
        Ok(self.buffer.peek())
    }

    fn next(&mut self, space: &mut Space) -> Result<Option<Entry>> {
        self.peek(space)?;
        Ok(self.buffer.next())
    }
}

/// One segment of the new level, until it is installed: its entries (pinned) or its page image.
struct Packed {
    start_key: segment::Key,
    entries: Option<Vec<Entry>>,
    image: Option<Vec<u8>>,
}

/// Packs merged entries into the new level's segments as they come.
struct Packer {
    page_bytes: usize,
    pinned: bool,
    packing: segment::Packing,
    done: Vec<Packed>,
    count: u64,
    key_bytes: u64,
}

impl Packer {
    fn push(&mut self, entry: Entry) {
        self.count += 1;
        self.key_bytes += entry.key.len() as u64;
        if let Some(entries) = self.packing.push(entry) {
            self.seal(entries);
        }
    }

    fn finish(&mut self) {
        if let Some(entries) = self.packing.finish() {
            self.seal(entries);
        }
    }

    fn seal(&mut self, entries: Vec<Entry>) {
        let start_key = entries[0].key.clone();
        self.done.push(if self.pinned {
            Packed {
                start_key,
                entries: Some(entries),
                image: None,
            }
        } else {
            Packed {
                start_key,
                image: Some(segment::encode(&entries, self.page_bytes)),
                entries: None,
            }
        });
    }
}

impl LsmTree {
    /// Merges sorted `upper` entries (newer) into level `target` (creating it if it is the next
    /// one), writing the level anew. Superseded records are reported to the space layer; tombstones
    /// are dropped when `target` is the last level.
    pub(super) fn merge_into(
        &mut self,
        space: &mut Space,
        at: SimTime,
        upper: Vec<Entry>,
        target: usize,
    ) -> Result<SimTime> {
        let mut t = at;
        if target == self.levels.len() {
            self.levels.push(Level {
                pinned: self.features.pinning && target < self.pinned_target,
                ..Level::default()
            });
        }
        let mut lower = LowerRun::new(&self.levels[target], t);
        let last = target + 1 == self.levels.len();
        // PinK+HW: the accelerator does the sort, so its comparisons and copies are not the
        // cores' (they are counted, then handed to the accelerator by the bytes streamed).
        let cpu_before = self.cpu_pending;
        let accelerated = self.features.merge_accelerator;
        let mut streamed_bytes = 0u64;
        let mut packer = Packer {
            page_bytes: self.page_bytes,
            pinned: self.levels[target].pinned,
            packing: segment::Packing::new(self.page_bytes),
            done: Vec::new(),
            count: 0,
            key_bytes: 0,
        };
        let mut superseded: Vec<Entry> = Vec::new();
        let mut upper = upper.into_iter().peekable();
        loop {
            let take_upper = match (upper.peek(), lower.peek(space)?) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(u), Some(l)) => match self.cpu_pending.compare(&u.key, &l.key) {
                    std::cmp::Ordering::Less => true,
                    std::cmp::Ordering::Greater => false,
                    std::cmp::Ordering::Equal => {
                        // The newer entry wins; the older one's record is garbage now.
                        if let Some(old) = lower.next(space)? {
                            if accelerated {
                                streamed_bytes += old.encoded_bytes() as u64;
                            }
                            superseded.push(old);
                        }
                        true
                    }
                },
            };
            let next = if take_upper {
                upper.next()
            } else {
                lower.next(space)?
            };
            let Some(entry) = next else { break };
            if accelerated {
                streamed_bytes += entry.encoded_bytes() as u64;
            }
            self.cpu_pending.entries_merged += 1;
            self.cpu_pending.bytes_copied += entry.encoded_bytes() as u64;
            if last && entry.is_tombstone() {
                continue;
            }
            packer.push(entry);
        }
        packer.finish();
        t = t.max(lower.done);
        drop(lower);
        if accelerated {
            self.cpu_pending = cpu_before;
            let cost_ns = streamed_bytes * MERGE_ACCELERATOR_NS_PER_KIB / 1024;
            t = space.accelerate(t, cost_ns);
        }
        t = self.charge(space, t);
        let (count, key_bytes) = (packer.count, packer.key_bytes);
        t = self.install(space, t, target, packer.done)?;
        for entry in superseded {
            if !entry.is_tombstone() {
                space.invalidate_record(
                    RecordPointer::from_raw(entry.pointer),
                    entry.key.len(),
                    entry.value_len as usize,
                );
            }
        }
        let level = &mut self.levels[target];
        level.entries = count;
        level.key_bytes = key_bytes;
        self.relink(target);
        level::assert_installed(&self.levels, target);
        if last {
            self.activity.last_level_compactions += 1;
        }
        Ok(self.charge(space, t))
    }

    /// Writes the packed segments of level `target` in order (filters built first, for presets
    /// that keep them) and puts them in place of the level's list; the old list's pages are
    /// reported invalid.
    fn install(
        &mut self,
        space: &mut Space,
        t: SimTime,
        target: usize,
        packed: Vec<Packed>,
    ) -> Result<SimTime> {
        let bits = self.bloom_bits_for(target);
        let filters = self.features.bloom_filters && bits > 0.0;
        let mut new_segments = Vec::with_capacity(packed.len());
        let mut done = t;
        for Packed {
            start_key,
            entries,
            image,
        } in packed
        {
            let bloom = if filters {
                let keys = match (&entries, &image) {
                    (Some(entries), _) => entries.iter().map(|e| e.key.clone()).collect(),
                    (None, Some(image)) => SegmentPage::parse(image, 0)?
                        .entries()?
                        .into_iter()
                        .map(|e| e.key)
                        .collect(),
                    (None, None) => Vec::new(),
                };
                Some(Arc::new(Bloom::build(
                    keys.iter().map(|key| key.as_slice()),
                    bits,
                    &mut self.cpu_pending,
                )))
            } else {
                None
            };
            let page: Option<PageIndex> = match image {
                Some(image) => {
                    let (page, finished) =
                        space.write_meta(t, Purpose::Compaction, self.config.namespace, &image)?;
                    done = done.max(finished);
                    Some(page)
                }
                None => None,
            };
            new_segments.push(Segment {
                prefix: 0,
                start_key,
                range_pointer: 0,
                page,
                entries: entries.map(Arc::new),
                bloom,
            });
        }
        let prefix_offset = level::set_prefixes(&mut new_segments);
        let level = &mut self.levels[target];
        level.prefix_offset = prefix_offset;
        let old = std::mem::replace(&mut level.segments, Arc::new(new_segments));
        for segment in old.iter() {
            if let Some(page) = segment.page {
                space.invalidate_meta(page);
            }
        }
        Ok(done)
    }
}
