//! Garbage collection of meta and data blocks (PinK §4.5, KAML §IV-E).
//!
//! * Meta victim: a page is live if the level list still has an entry with the page's start key
//!   that points at it; live pages are copied to a fresh meta page and the entry is fixed in DRAM.
//! * Data victim: a record is live if the newest version of its key in the index points at it.
//!   `pink` puts live pairs back into L0; the stale entries below are dropped by later compactions.
//!   `lightstore` appends live values again and rewrites each affected meta segment once.

use std::collections::BTreeMap;
use std::sync::Arc;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{PageIndex, RecordPointer, Space, Victim};

use super::level::SearchMode;
use super::segment::{self, SegmentPage};
use super::{Found, LsmTree, Result};
use crate::config::GcPolicy;
use crate::cpu::CpuCounts;

/// A live record GC read back: key, old pointer, value, and the level and segment indexing it.
type LiveValue = (Vec<u8>, RecordPointer, Vec<u8>, usize, usize);
/// New pointers by (level, segment) they belong to.
type Relocations = BTreeMap<(usize, usize), Vec<(Vec<u8>, u64)>>;

impl LsmTree {
    /// The level and segment whose level-list entry points at meta page `page`.
    fn meta_owner(
        &self,
        page: PageIndex,
        bytes: &[u8],
        cpu: &mut CpuCounts,
    ) -> Option<(usize, usize)> {
        let view = SegmentPage::parse(bytes, page.0).ok()?;
        let start = view.first_key().ok()?;
        let mode = SearchMode {
            prefixes: self.features.prefixes,
        };
        for (index, level) in self.levels.iter().enumerate() {
            if let Some(slot) = level.find_segment(start, 0, usize::MAX, mode, cpu) {
                let segment = &level.segments[slot];
                if segment.page == Some(page) && segment.start_key.as_slice() == start {
                    return Some((index, slot));
                }
            }
        }
        None
    }

    /// Collects one victim block: relocates what is live, then erases it.
    pub(super) fn collect(
        &mut self,
        space: &mut Space,
        at: SimTime,
        victim: u64,
    ) -> Result<SimTime> {
        let (contents, mut t) = space.read_victim(at, victim)?;
        match contents {
            Victim::Meta(pages) => {
                self.activity.gc_meta_victims += 1;
                // A page is live if the level list still has an entry with its start key that
                // points at it. Moving a page repoints only that entry, so the owners of the
                // victim's other pages stay as they were found.
                let mut done = t;
                for (page, bytes) in &pages {
                    let mut cpu = CpuCounts::default();
                    let Some((level, slot)) = self.meta_owner(*page, bytes, &mut cpu) else {
                        continue;
                    };
                    self.cpu_pending.add(&cpu);
                    let (moved, finished) =
                        space.write_meta(t, Purpose::Gc, self.config.namespace, bytes)?;
                    done = done.max(finished);
                    Arc::make_mut(&mut self.levels[level].segments)[slot].page = Some(moved);
                    self.activity.gc_meta_pages_moved += 1;
                }
                t = done;
            }
            Victim::Data(records) => {
                self.activity.gc_data_victims += 1;
                let mut live = Vec::new();
                for record in records {
                    if record.namespace != self.config.namespace {
                        continue;
                    }
                    let (found, done, _) = self.lookup(space, t, &record.key, Purpose::Gc)?;
                    t = done;
                    if let Found::Level {
                        level,
                        segment,
                        entry,
                    } = found
                    {
                        if entry.pointer == record.pointer.raw() {
                            live.push((record, level, segment));
                        }
                    }
                }
                t = self.charge(space, t);
                let mut values = Vec::with_capacity(live.len());
                let issue = t;
                for (record, level, segment) in live {
                    let value = match record.value {
                        Some(value) => value,
                        None => {
                            let (whole, done) =
                                space.read_record(issue, record.pointer, Purpose::Gc)?;
                            t = t.max(done);
                            whole.value
                        }
                    };
                    values.push((record.key, record.pointer, value, level, segment));
                }
                t = match self.features.gc {
                    GcPolicy::Reinsert => {
                        let pairs: BTreeMap<Vec<u8>, Vec<u8>> = values
                            .into_iter()
                            .map(|(key, _, value, _, _)| (key, value))
                            .collect();
                        self.reinsert(pairs);
                        t
                    }
                    GcPolicy::Rewrite => self.rewrite(space, t, values)?,
                };
            }
        }
        t = self.charge(space, t);
        // The durability layer checkpoints before erasing a block a checkpoint may reach: publish
        // the index as it is now, without the victim, so that checkpoint cannot reach it either.
        if space.wants_parts() {
            let state = self.durable_state();
            space.publish_part(self.config.namespace, state);
        }
        Ok(space.erase_victim(t, victim)?)
    }

    /// `lightstore`: appends live values again and points their entries at the new records,
    /// rewriting each affected unpinned meta segment once.
    fn rewrite(
        &mut self,
        space: &mut Space,
        at: SimTime,
        values: Vec<LiveValue>,
    ) -> Result<SimTime> {
        let mut done = at;
        let mut updates: Relocations = BTreeMap::new();
        for (key, _, value, level, slot) in values {
            let (pointer, finished) =
                space.append_record(at, Purpose::Gc, self.config.namespace, &key, &value)?;
            self.cpu_pending.bytes_copied += (key.len() + value.len()) as u64;
            done = done.max(finished);
            updates
                .entry((level, slot))
                .or_default()
                .push((key, pointer.raw()));
            self.activity.gc_records_rewritten += 1;
        }
        let t = self.charge(space, done);
        let mut finished_all = t;
        for ((level, slot), moved) in updates {
            let segment = &mut Arc::make_mut(&mut self.levels[level].segments)[slot];
            if let Some(entries) = segment.entries.as_mut() {
                let entries = Arc::make_mut(entries);
                for (key, pointer) in moved {
                    if let Some(position) = segment::find_in(entries, &key, &mut self.cpu_pending) {
                        entries[position].pointer = pointer;
                    }
                }
                continue;
            }
            let Some(page) = segment.page else { continue };
            // The page is the encoding of its entries, so pointing them elsewhere is writing the
            // new pointers where the old ones lie: the page `segment::encode` would make of the
            // entries with their new pointers.
            let (mut image, read) = space.read_page(t, page, Purpose::Gc)?;
            let view = SegmentPage::parse(&image, page.0)?;
            let mut patches = Vec::with_capacity(moved.len());
            for (key, pointer) in moved {
                if let Some(slot) = view.find_slot(&key, &mut self.cpu_pending)? {
                    patches.push((view.pointer_span(slot)?, pointer));
                }
            }
            for (span, pointer) in patches {
                image[span].copy_from_slice(&pointer.to_le_bytes());
            }
            let (new_page, written) =
                space.write_meta(read, Purpose::Gc, self.config.namespace, &image)?;
            finished_all = finished_all.max(written);
            space.invalidate_meta(page);
            Arc::make_mut(&mut self.levels[level].segments)[slot].page = Some(new_page);
            self.activity.gc_segments_rewritten += 1;
        }
        Ok(finished_all)
    }
}
