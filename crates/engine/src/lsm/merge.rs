//! The merge of sorted entries into a level, streamed: the lower level's segments are read one
//! page at a time as the merge reaches them, and the merged entries are packed into segments as
//! they come. Host memory then holds one lower page and, unless the pages are written as they
//! fill (see [`Sealing`]), the new level's page images, not both levels' entries decoded: at
//! PinK's scale (44M pairs) a merge into the last level would otherwise hold several GiB of
//! entries.
//!
//! The timing model sees exactly what a merge of fully decoded levels would issue, in the same
//! order: every lower page read issued when the merge starts, the merge's CPU charged, then the new
//! pages written in order. Only the order of host work (and of writes reaching the media) differs,
//! so figures do not depend on streaming.

use std::sync::Arc;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{PageIndex, RecordPointer, Space};

use super::bloom::Bloom;
use super::level::{self, Level, Segment};
use super::segment::{self, Entry, PageBuilder, RawEntry, SegmentPage};
use super::{LsmTree, Result};
use crate::cpu::CpuCounts;
use crate::{EngineError, MERGE_ACCELERATOR_NS_PER_KIB};

/// Where the lower run's current segment's entries are.
enum Source {
    /// None yet, or every segment used up.
    Empty,
    /// A pinned segment's entries, shared with the level.
    Pinned(Arc<Vec<Entry>>),
    /// A segment page read from flash, its entries still encoded: they are copied into the new
    /// level's pages as they are, and decoded only where a merge needs the whole entry.
    Page { bytes: Vec<u8>, index: u64 },
}

/// The lower run's current entry: one of a pinned segment, or one still encoded in its page.
#[derive(Clone, Copy)]
enum Current<'a> {
    Pinned(&'a Entry),
    Raw(RawEntry<'a>),
}

impl Current<'_> {
    fn encoded_bytes(&self) -> usize {
        match self {
            Current::Pinned(entry) => entry.encoded_bytes(),
            Current::Raw(raw) => raw.encoded_bytes(),
        }
    }

    fn to_entry(self) -> Entry {
        match self {
            Current::Pinned(entry) => entry.clone(),
            Current::Raw(raw) => raw.to_entry(),
        }
    }
}

/// The entries of a level, in order, read one segment at a time, every read issued at `at`.
struct LowerRun {
    segments: Arc<Vec<Segment>>,
    next: usize,
    source: Source,
    /// The current entry's slot in `source`.
    slot: usize,
    /// Entries in `source`.
    count: usize,
    /// On a page: the current entry's bytes in it, bounds checked by [`LowerRun::fill`].
    span: std::ops::Range<usize>,
    at: SimTime,
    /// When the last read issued so far completes.
    done: SimTime,
}

impl LowerRun {
    fn new(level: &Level, at: SimTime) -> LowerRun {
        LowerRun {
            segments: Arc::clone(&level.segments),
            next: 0,
            source: Source::Empty,
            slot: 0,
            count: 0,
            span: 0..0,
            at,
            done: at,
        }
    }

    /// Makes the next entry current, reading the next segment when the current one is used up;
    /// returns whether there is one. A page read is read for the last time: compact media may
    /// free its bytes at once.
    fn fill(&mut self, space: &mut Space) -> Result<bool> {
        while self.slot >= self.count {
            let Some(segment) = self.segments.get(self.next) else {
                self.source = Source::Empty;
                return Ok(false);
            };
            self.next += 1;
            self.slot = 0;
            match (&segment.entries, segment.page) {
                (Some(entries), _) => {
                    self.count = entries.len();
                    self.source = Source::Pinned(Arc::clone(entries));
                }
                (None, Some(page)) => {
                    // The last page's buffer takes the next one.
                    let mut bytes = match std::mem::replace(&mut self.source, Source::Empty) {
                        Source::Page { bytes, .. } => bytes,
                        _ => Vec::new(),
                    };
                    let done =
                        space.read_page_into(self.at, page, Purpose::Compaction, &mut bytes)?;
                    self.done = self.done.max(done);
                    self.count = SegmentPage::parse(&bytes, page.0)?.count();
                    self.source = Source::Page {
                        bytes,
                        index: page.0,
                    };
                    space.discard_consumed_meta(page);
                }
                (None, None) => {
                    return Err(EngineError::Config(
                        "an unpinned segment has no flash address".into(),
                    ))
                }
            }
        }
        if let Source::Page { bytes, index } = &self.source {
            self.span = SegmentPage::parse(bytes, *index)?.raw_span(self.slot)?;
        }
        Ok(true)
    }

    /// The current entry. REQUIRES: the last [`LowerRun::fill`] returned true and nothing
    /// advanced since.
    fn current(&self) -> Current<'_> {
        match &self.source {
            Source::Pinned(entries) => Current::Pinned(&entries[self.slot]),
            Source::Page { bytes, .. } => Current::Raw(RawEntry::new(&bytes[self.span.clone()])),
            Source::Empty => unreachable!("no current entry past the end of the lower level"),
        }
    }

    /// Moves past the current entry.
    fn advance(&mut self) {
        self.slot += 1;
    }

    /// Takes the entries of the current segment, from the current one on, that come before
    /// `upper` (all of them if it is `None`), packing each into `packer` as the merge loop of
    /// [`LsmTree::merge_into`] would, one comparison each, counted in `run`. Returns the ordering
    /// of `upper` against the first entry not taken, which stays current (`Less` or `Equal`), or
    /// `None` when the segment is used up. REQUIRES: [`LowerRun::fill`] returned true.
    fn take_run(
        &mut self,
        space: &mut Space,
        packer: &mut Packer,
        upper: Option<&[u8]>,
        run: &mut Run<'_>,
    ) -> Result<Option<std::cmp::Ordering>> {
        match &self.source {
            Source::Page { bytes, index } => {
                let page = SegmentPage::parse(bytes, *index)?;
                let mut span = self.span.clone();
                loop {
                    let raw = RawEntry::new(&bytes[span]);
                    if let Some(order) = run.compare(upper, raw.key()) {
                        return Ok(Some(order));
                    }
                    run.take(raw.encoded_bytes());
                    if !(run.last && raw.is_tombstone()) {
                        packer.push_current(space, Current::Raw(raw))?;
                    }
                    self.slot += 1;
                    if self.slot >= self.count {
                        return Ok(None);
                    }
                    span = page.raw_span(self.slot)?;
                    self.span = span.clone();
                }
            }
            Source::Pinned(entries) => loop {
                let entry = &entries[self.slot];
                if let Some(order) = run.compare(upper, &entry.key) {
                    return Ok(Some(order));
                }
                run.take(entry.encoded_bytes());
                if !(run.last && entry.is_tombstone()) {
                    packer.push_current(space, Current::Pinned(entry))?;
                }
                self.slot += 1;
                if self.slot >= self.count {
                    return Ok(None);
                }
            },
            Source::Empty => unreachable!("no current entry past the end of the lower level"),
        }
    }
}

/// What a merge counts for each entry it takes.
struct Run<'a> {
    cpu: &'a mut crate::cpu::CpuCounts,
    /// Bytes streamed through the merge accelerator, if the preset has one.
    streamed: Option<&'a mut u64>,
    /// Whether the merge is into the last level (its tombstones are dropped).
    last: bool,
}

impl Run<'_> {
    /// Compares `upper`, if any, with the key of the lower entry at hand: `None` if that entry
    /// comes first (and is taken), else the ordering.
    fn compare(&mut self, upper: Option<&[u8]>, lower: &[u8]) -> Option<std::cmp::Ordering> {
        let order = self.cpu.compare(upper?, lower);
        (order != std::cmp::Ordering::Greater).then_some(order)
    }

    fn take(&mut self, encoded_bytes: usize) {
        if let Some(streamed) = self.streamed.as_deref_mut() {
            *streamed += encoded_bytes as u64;
        }
        self.cpu.entries_merged += 1;
        self.cpu.bytes_copied += encoded_bytes as u64;
    }
}

/// One segment of the new level, until it is installed.
struct Packed {
    start_key: segment::Key,
    contents: Sealed,
    /// The segment's filter, for presets that keep them.
    bloom: Option<Arc<Bloom>>,
}

/// What a sealed segment holds until it is installed.
enum Sealed {
    /// A pinned level's entries.
    Entries(Vec<Entry>),
    /// The page image install writes.
    Image(Vec<u8>),
    /// The page it was already written to.
    Written(PageIndex),
}

/// Where an unpinned level's sealed segments go.
enum Sealing {
    /// Kept as page images, for [`LsmTree::install`] to write in order.
    Images,
    /// Written at once, in order, while the background job holds the writes back
    /// ([`Space::defer_writes`]) until the merge's reads and computation are recorded: the job's
    /// work is what writing at install would record, but the new level's pages never all sit in
    /// host memory at once (at PinK's scale, 2 GiB for a merge into the last level).
    Written { at: SimTime, namespace: u32 },
}

/// Packs merged entries into the new level's segments as they come: a pinned level's as
/// entries, any other's straight into page images.
struct Packer {
    page_bytes: usize,
    pinned: bool,
    sealing: Sealing,
    /// Bits per key of each segment's filter, for presets that keep them: a filter is built from
    /// the segment's keys when it is sealed, so a page written at once needs no image kept.
    filter_bits: Option<f64>,
    /// The filters' work, charged at install as if they were built there.
    filter_cpu: CpuCounts,
    packing: segment::Packing,
    /// The segment being filled: its first key, and its entries (pinned) or page (else).
    start_key: segment::Key,
    entries: Vec<Entry>,
    page: PageBuilder,
    done: Vec<Packed>,
    count: u64,
    key_bytes: u64,
}

impl Packer {
    fn new(page_bytes: usize, pinned: bool, sealing: Sealing, filter_bits: Option<f64>) -> Packer {
        Packer {
            page_bytes,
            pinned,
            sealing,
            filter_bits,
            filter_cpu: CpuCounts::default(),
            packing: segment::Packing::new(page_bytes),
            start_key: segment::Key::new(),
            entries: Vec::new(),
            page: PageBuilder::default(),
            done: Vec::new(),
            count: 0,
            key_bytes: 0,
        }
    }

    /// Seals the segment being filled if `entry` does not fit after it, and notes its key.
    fn make_room(&mut self, space: &mut Space, key: &[u8], encoded_bytes: usize) -> Result<()> {
        self.count += 1;
        self.key_bytes += key.len() as u64;
        if self.packing.closes(encoded_bytes) {
            self.seal(space)?;
        }
        if self.entries.is_empty() && self.page.is_empty() {
            self.start_key = segment::Key::from_slice(key);
        }
        Ok(())
    }

    fn push(&mut self, space: &mut Space, entry: Entry) -> Result<()> {
        self.make_room(space, &entry.key, entry.encoded_bytes())?;
        if self.pinned {
            self.entries.push(entry);
        } else {
            self.page.push(&entry);
        }
        Ok(())
    }

    fn push_current(&mut self, space: &mut Space, current: Current<'_>) -> Result<()> {
        match current {
            Current::Raw(raw) if !self.pinned => {
                self.make_room(space, raw.key(), raw.encoded_bytes())?;
                self.page.push_raw(raw);
                Ok(())
            }
            current => self.push(space, current.to_entry()),
        }
    }

    /// Seals the last segment, if any entry is left.
    fn finish(&mut self, space: &mut Space) -> Result<()> {
        self.seal(space)
    }

    fn seal(&mut self, space: &mut Space) -> Result<()> {
        if self.entries.is_empty() && self.page.is_empty() {
            return Ok(());
        }
        let start_key = std::mem::take(&mut self.start_key);
        let (contents, bloom) = if self.pinned {
            let keys = self.entries.iter().map(|e| Ok(e.key.as_slice()));
            let bloom = filter(self.filter_bits, &mut self.filter_cpu, keys)?;
            // The next segment takes about as many entries: room for them saves its growing.
            let capacity = self.entries.len();
            let entries = std::mem::replace(&mut self.entries, Vec::with_capacity(capacity));
            (Sealed::Entries(entries), bloom)
        } else {
            let image = self.page.take_image(self.page_bytes);
            let bloom = if self.filter_bits.is_some() {
                // The keys where they lie: a filter needs their bytes, not decoded entries.
                let page = SegmentPage::parse(&image, 0)?;
                let keys = (0..page.count()).map(|slot| page.raw(slot).map(|raw| raw.key()));
                filter(self.filter_bits, &mut self.filter_cpu, keys)?
            } else {
                None
            };
            let contents = match self.sealing {
                Sealing::Images => Sealed::Image(image),
                Sealing::Written { at, namespace } => {
                    let (page, _) = space.write_meta(at, Purpose::Compaction, namespace, &image)?;
                    Sealed::Written(page)
                }
            };
            (contents, bloom)
        };
        self.done.push(Packed {
            start_key,
            contents,
            bloom,
        });
        Ok(())
    }
}

/// The filter of a segment of `keys` with `bits` bits per key (`None`: the preset keeps no
/// filters), its work counted in `cpu`.
fn filter<'a>(
    bits: Option<f64>,
    cpu: &mut CpuCounts,
    keys: impl Iterator<Item = Result<&'a [u8]>>,
) -> Result<Option<Arc<Bloom>>> {
    let Some(bits) = bits else {
        return Ok(None);
    };
    let keys: Vec<&[u8]> = keys.collect::<Result<_>>()?;
    Ok(Some(Arc::new(Bloom::build(keys.into_iter(), bits, cpu))))
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
        let pinned = self.levels[target].pinned;
        // Under the threads model a merge is a background job: its new pages are written as
        // they fill, their writes recorded after its reads and computation (a page's filter is
        // built from its image first).
        let sealing = if !pinned && space.defer_writes() {
            Sealing::Written {
                at: t,
                namespace: self.config.namespace,
            }
        } else {
            Sealing::Images
        };
        let deferring = matches!(sealing, Sealing::Written { .. });
        let bits = self.bloom_bits_for(target);
        let filter_bits = (self.features.bloom_filters && bits > 0.0).then_some(bits);
        let mut packer = Packer::new(self.page_bytes, pinned, sealing, filter_bits);
        let mut superseded: Vec<Entry> = Vec::new();
        let mut upper = upper.into_iter().peekable();
        loop {
            // Lower entries are taken in runs, up to the next upper entry; then that entry is.
            if lower.fill(space)? {
                let mut run = Run {
                    cpu: &mut self.cpu_pending,
                    streamed: accelerated.then_some(&mut streamed_bytes),
                    last,
                };
                let upper_key = upper.peek().map(|entry| entry.key.as_slice());
                match lower.take_run(space, &mut packer, upper_key, &mut run)? {
                    None => continue,
                    Some(std::cmp::Ordering::Equal) => {
                        // The newer entry wins; the older one's record is garbage now.
                        let l = lower.current();
                        if accelerated {
                            streamed_bytes += l.encoded_bytes() as u64;
                        }
                        superseded.push(l.to_entry());
                        lower.advance();
                    }
                    Some(_) => {}
                }
            }
            let Some(entry) = upper.next() else {
                break;
            };
            let encoded_bytes = entry.encoded_bytes();
            if accelerated {
                streamed_bytes += encoded_bytes as u64;
            }
            self.cpu_pending.entries_merged += 1;
            self.cpu_pending.bytes_copied += encoded_bytes as u64;
            if !(last && entry.is_tombstone()) {
                packer.push(space, entry)?;
            }
        }
        packer.finish(space)?;
        t = t.max(lower.done);
        drop(lower);
        if accelerated {
            self.cpu_pending = cpu_before;
            let cost_ns = streamed_bytes * MERGE_ACCELERATOR_NS_PER_KIB / 1024;
            t = space.accelerate(t, cost_ns);
        }
        t = self.charge(space, t);
        if deferring {
            space.record_deferred_writes();
        }
        let (count, key_bytes) = (packer.count, packer.key_bytes);
        // The filters' work, charged where building them at install would be.
        self.cpu_pending.add(&packer.filter_cpu);
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

    /// Writes the packed segments of level `target` in order, where they are not written yet, and
    /// puts them (with their filters) in place of the level's list; the old list's pages are
    /// reported invalid.
    fn install(
        &mut self,
        space: &mut Space,
        t: SimTime,
        target: usize,
        packed: Vec<Packed>,
    ) -> Result<SimTime> {
        let mut new_segments = Vec::with_capacity(packed.len());
        let mut done = t;
        for Packed {
            start_key,
            contents,
            bloom,
        } in packed
        {
            let (page, entries) = match contents {
                Sealed::Entries(entries) => (None, Some(Arc::new(entries))),
                Sealed::Image(image) => {
                    let (page, finished) =
                        space.write_meta(t, Purpose::Compaction, self.config.namespace, &image)?;
                    done = done.max(finished);
                    (Some(page), None)
                }
                Sealed::Written(page) => (Some(page), None),
            };
            new_segments.push(Segment::new(start_key, page, entries, bloom));
        }
        let old = self.levels[target].set_segments(new_segments);
        for segment in old.iter() {
            if let Some(page) = segment.page {
                space.invalidate_meta(page);
            }
        }
        Ok(done)
    }
}
