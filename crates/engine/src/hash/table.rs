//! The slot array of a hash index: bucket pages on flash behind an LRU cache (`hash`), or one array
//! in DRAM (`kaml`).
//!
//! Slots are numbered `0..total_slots`; slot `i` is slot `i % slots_per_page` of bucket page
//! `i / slots_per_page`. A `kaml` table is one "page" holding every slot, never written to flash.
//!
//! `hash` keeps a **directory** in DRAM (bucket page → flash page of its newest copy, `None` while
//! the page was never written: it is all empty and costs no read) and an LRU **cache** of bucket
//! pages. A miss reads the page (an index read); an update marks the cached page dirty; a dirty page
//! is written to a fresh flash page when it is evicted (the write half of the read-modify-write)
//! and its old copy is reported dead to the space layer.

use std::collections::BTreeMap;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{PageIndex, Space};

use super::bucket::{self, Slot, Slots};
use super::{HashError, Result};

/// What the table did, counted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TableCounts {
    /// Bucket pages read from flash (any purpose).
    pub(crate) page_reads: u64,
    /// Page accesses served by the cache.
    pub(crate) cache_hits: u64,
    /// Page accesses that missed the cache (read from flash, or a never-written page built empty).
    pub(crate) cache_misses: u64,
    /// Pages evicted from the cache.
    pub(crate) evictions: u64,
    /// Dirty pages written to flash.
    pub(crate) write_backs: u64,
}

#[derive(Debug)]
struct CachedPage {
    /// The page as [`bucket::encode`] lays it out; its slots are read and set where they lie,
    /// and its sequence and checksum are stamped when it is written back.
    bytes: Vec<u8>,
    dirty: bool,
    stamp: u64,
    /// Read ahead of its first use ([`Table::read_ahead`]): that use counts the miss.
    read_ahead: bool,
}

#[derive(Debug)]
enum Storage {
    Flash {
        directory: Vec<Option<PageIndex>>,
        /// Directory entries that point at a flash page (every put asks, so it is kept rather
        /// than counted).
        on_flash: u64,
        cache: BTreeMap<u64, CachedPage>,
        /// Last-use stamp → page, oldest first.
        lru: BTreeMap<u64, u64>,
        clock: u64,
        capacity: usize,
        sequence: u64,
        /// The bytes of the page last evicted, for the next read to reuse.
        spare: Vec<u8>,
    },
    Dram {
        slots: Vec<Slot>,
    },
}

/// The slot array and where it lives.
#[derive(Debug)]
pub(crate) struct Table {
    storage: Storage,
    slots_per_page: usize,
    bits: u32,
    page_bytes: usize,
    namespace: u32,
    pub(crate) counts: TableCounts,
}

impl Table {
    /// A `hash` table of `pages` bucket pages on flash with a cache of `capacity` pages.
    pub(crate) fn on_flash(
        pages: u64,
        slots_per_page: usize,
        capacity: usize,
        bits: u32,
        page_bytes: usize,
        namespace: u32,
    ) -> Table {
        Table {
            storage: Storage::Flash {
                directory: vec![None; pages as usize],
                on_flash: 0,
                cache: BTreeMap::new(),
                lru: BTreeMap::new(),
                clock: 0,
                capacity,
                sequence: 0,
                spare: Vec::new(),
            },
            slots_per_page,
            bits,
            page_bytes,
            namespace,
            counts: TableCounts::default(),
        }
    }

    /// A `kaml` table of `slots` empty slots in DRAM.
    pub(crate) fn in_dram(slots: usize, bits: u32, page_bytes: usize, namespace: u32) -> Table {
        Table {
            storage: Storage::Dram {
                slots: vec![Slot::EMPTY; slots],
            },
            slots_per_page: slots,
            bits,
            page_bytes,
            namespace,
            counts: TableCounts::default(),
        }
    }

    pub(crate) fn total_slots(&self) -> u64 {
        match &self.storage {
            Storage::Flash { directory, .. } => directory.len() as u64 * self.slots_per_page as u64,
            Storage::Dram { slots } => slots.len() as u64,
        }
    }

    /// Bucket pages of a `hash` table (0 for `kaml`).
    pub(crate) fn pages(&self) -> u64 {
        match &self.storage {
            Storage::Flash { directory, .. } => directory.len() as u64,
            Storage::Dram { .. } => 0,
        }
    }

    /// Bucket pages the cache holds at most (0 for `kaml`).
    pub(crate) fn cache_capacity(&self) -> usize {
        match &self.storage {
            Storage::Flash { capacity, .. } => *capacity,
            Storage::Dram { .. } => 0,
        }
    }

    /// Bucket pages cached now, and how many of them are dirty.
    pub(crate) fn cached_pages(&self) -> (usize, usize) {
        match &self.storage {
            Storage::Flash { cache, .. } => (
                cache.len(),
                cache.values().filter(|page| page.dirty).count(),
            ),
            Storage::Dram { .. } => (0, 0),
        }
    }

    /// Bucket pages with a copy on flash.
    pub(crate) fn pages_on_flash(&self) -> u64 {
        match &self.storage {
            Storage::Flash {
                directory,
                on_flash,
                ..
            } => {
                debug_assert_eq!(
                    *on_flash,
                    directory.iter().filter(|entry| entry.is_some()).count() as u64,
                    "the count of bucket pages on flash matches the directory"
                );
                *on_flash
            }
            Storage::Dram { .. } => 0,
        }
    }

    /// The bucket page holding slot `home` (`None` for an empty table).
    pub(crate) fn page_of(&self, home: u64) -> Option<u64> {
        let total = self.total_slots();
        (total > 0 && self.slots_per_page > 0).then(|| (home % total) / self.slots_per_page as u64)
    }

    /// The flash page a use of bucket page `page` would read now: `None` if it is cached, was
    /// never written, or lies outside the table. Changes nothing.
    pub(crate) fn page_to_read(&self, page: u64) -> Option<PageIndex> {
        match &self.storage {
            Storage::Flash {
                directory, cache, ..
            } if !cache.contains_key(&page) => directory.get(page as usize).copied().flatten(),
            _ => None,
        }
    }

    /// The slots of a key's probe window as runs `(page, first slot in page, slots)`.
    pub(crate) fn window(&self, home: u64, probes: u64) -> Vec<(u64, usize, usize)> {
        let total = self.total_slots();
        let per_page = self.slots_per_page as u64;
        let mut runs: Vec<(u64, usize, usize)> = Vec::new();
        if total == 0 || per_page == 0 {
            return runs;
        }
        // One run per page the window crosses, wrapping at the end of the table: computed a page at
        // a time, since a window may span a whole page of slots and lookups are the hot path.
        let mut slot = home % total;
        let mut left = probes.min(total);
        while left > 0 {
            let page = slot / per_page;
            let page_end = ((page + 1) * per_page).min(total);
            let take = left.min(page_end - slot);
            runs.push((page, (slot % per_page) as usize, take as usize));
            left -= take;
            slot = (slot + take) % total;
        }
        runs
    }

    /// Makes bucket page `page` resident (a cache hit, a read of its newest copy, or an empty page
    /// never written) and returns when its slots are in DRAM.
    pub(crate) fn load(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: u64,
        purpose: Purpose,
    ) -> Result<SimTime> {
        let Storage::Flash {
            cache, lru, clock, ..
        } = &mut self.storage
        else {
            return Ok(at);
        };
        *clock += 1;
        if let Some(cached) = cache.get_mut(&page) {
            lru.remove(&cached.stamp);
            cached.stamp = *clock;
            lru.insert(*clock, page);
            if std::mem::take(&mut cached.read_ahead) {
                // It had to be read for this use, only earlier.
                self.counts.cache_misses += 1;
            } else {
                self.counts.cache_hits += 1;
            }
            return Ok(at);
        }
        self.counts.cache_misses += 1;
        self.fetch(space, at, page, purpose, false)
    }

    /// Reads bucket page `page` into the cache ahead of its use, if it is not resident; returns when
    /// it is. Counts no hit or miss: the use that follows counts the miss.
    pub(crate) fn read_ahead(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: u64,
        purpose: Purpose,
    ) -> Result<SimTime> {
        let Storage::Flash { cache, .. } = &self.storage else {
            return Ok(at);
        };
        if cache.contains_key(&page) {
            return Ok(at);
        }
        self.fetch(space, at, page, purpose, true)
    }

    /// Brings a page that is not cached into the cache: a read of its newest copy, or an empty page
    /// never written. Returns when its slots are in DRAM.
    fn fetch(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: u64,
        purpose: Purpose,
        read_ahead: bool,
    ) -> Result<SimTime> {
        let Storage::Flash {
            directory, spare, ..
        } = &mut self.storage
        else {
            return Ok(at);
        };
        let location = directory
            .get(page as usize)
            .copied()
            .ok_or(HashError::MalformedBucket {
                page,
                what: "bucket page number outside the table",
            })?;
        let (bytes, done) = match location {
            Some(flash_page) => {
                let mut bytes = std::mem::take(spare);
                let done = space.read_page_into(at, flash_page, purpose, &mut bytes)?;
                self.counts.page_reads += 1;
                bucket::check(
                    &bytes,
                    page,
                    self.slots_per_page,
                    self.bits,
                    flash_page.0,
                    space.read_contents(),
                )?;
                (bytes, done)
            }
            None => (self.empty_page(page), at),
        };
        self.insert_page(space, at, page, bytes, false, purpose)?;
        if read_ahead {
            if let Storage::Flash { cache, .. } = &mut self.storage {
                if let Some(cached) = cache.get_mut(&page) {
                    cached.read_ahead = true;
                }
            }
        }
        Ok(done)
    }

    /// The bytes of bucket page `page` with every slot empty.
    fn empty_page(&self, page: u64) -> Vec<u8> {
        let slots = vec![Slot::EMPTY; self.slots_per_page];
        bucket::encode(&slots, page, 0, self.bits, self.page_bytes)
    }

    /// Puts a page into the cache, evicting least recently used pages first.
    fn insert_page(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: u64,
        bytes: Vec<u8>,
        dirty: bool,
        purpose: Purpose,
    ) -> Result<()> {
        loop {
            let Storage::Flash {
                cache, capacity, ..
            } = &self.storage
            else {
                return Ok(());
            };
            if cache.len() < (*capacity).max(1) {
                break;
            }
            self.evict_oldest(space, at, purpose)?;
        }
        let Storage::Flash {
            cache, lru, clock, ..
        } = &mut self.storage
        else {
            return Ok(());
        };
        *clock += 1;
        lru.insert(*clock, page);
        cache.insert(
            page,
            CachedPage {
                bytes,
                dirty,
                stamp: *clock,
                read_ahead: false,
            },
        );
        Ok(())
    }

    /// Evicts the least recently used page, writing it back if dirty. The write is issued at `at`
    /// and not waited for: the die and channel calendars carry its cost to later operations.
    fn evict_oldest(&mut self, space: &mut Space, at: SimTime, purpose: Purpose) -> Result<()> {
        let Storage::Flash { cache, lru, .. } = &mut self.storage else {
            return Ok(());
        };
        let Some((_, page)) = lru.pop_first() else {
            return Ok(());
        };
        let Some(mut evicted) = cache.remove(&page) else {
            return Ok(());
        };
        self.counts.evictions += 1;
        if evicted.dirty {
            self.write_back(space, at, page, &mut evicted.bytes, purpose)?;
        }
        if let Storage::Flash { spare, .. } = &mut self.storage {
            *spare = evicted.bytes;
        }
        Ok(())
    }

    /// Writes a bucket page (stamped with the next sequence) to a fresh flash page and points the
    /// directory at it.
    fn write_back(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: u64,
        bytes: &mut [u8],
        purpose: Purpose,
    ) -> Result<SimTime> {
        let Storage::Flash {
            directory,
            on_flash,
            sequence,
            ..
        } = &mut self.storage
        else {
            return Ok(at);
        };
        *sequence += 1;
        bucket::seal(bytes, *sequence, self.slots_per_page, self.bits);
        let (written, done) = space.write_meta(at, purpose, self.namespace, bytes)?;
        match directory[page as usize].replace(written) {
            Some(old) => space.invalidate_meta(old),
            None => *on_flash += 1,
        }
        self.counts.write_backs += 1;
        Ok(done)
    }

    /// Writes every dirty cached page back (they stay cached, clean). Returns when all are written.
    pub(crate) fn write_back_all(
        &mut self,
        space: &mut Space,
        at: SimTime,
        purpose: Purpose,
    ) -> Result<SimTime> {
        let dirty: Vec<u64> = match &mut self.storage {
            Storage::Flash { cache, .. } => cache
                .iter_mut()
                .filter(|(_, page)| page.dirty)
                .map(|(&number, page)| {
                    page.dirty = false;
                    number
                })
                .collect(),
            Storage::Dram { .. } => Vec::new(),
        };
        let mut done = at;
        for page in dirty {
            // Out of the cache while it is written, so the write can update the directory.
            let mut bytes = match &mut self.storage {
                Storage::Flash { cache, .. } => cache
                    .get_mut(&page)
                    .map(|cached| std::mem::take(&mut cached.bytes))
                    .unwrap_or_default(),
                Storage::Dram { .. } => Vec::new(),
            };
            let written = self.write_back(space, at, page, &mut bytes, purpose);
            if let Storage::Flash { cache, .. } = &mut self.storage {
                if let Some(cached) = cache.get_mut(&page) {
                    cached.bytes = bytes;
                }
            }
            done = done.max(written?);
        }
        Ok(done)
    }

    /// The slots of a resident page (every `kaml` slot is resident).
    pub(crate) fn resident(&self, page: u64) -> Option<Slots<'_>> {
        match &self.storage {
            Storage::Flash { cache, .. } => cache
                .get(&page)
                .map(|cached| bucket::slots_in(&cached.bytes, self.slots_per_page, self.bits)),
            Storage::Dram { slots } => (page == 0).then_some(Slots::Decoded(slots)),
        }
    }

    /// Sets one slot, loading its page first if it is not resident; the page becomes dirty.
    pub(crate) fn set(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: u64,
        offset: usize,
        slot: Slot,
        purpose: Purpose,
    ) -> Result<SimTime> {
        let done = if self.resident(page).is_some() {
            at
        } else {
            self.load(space, at, page, purpose)?
        };
        let per_page = self.slots_per_page;
        let set = match &mut self.storage {
            Storage::Flash { cache, .. } => cache.get_mut(&page).is_some_and(|cached| {
                cached.dirty = true;
                offset < per_page && bucket::set_slot(&mut cached.bytes, self.bits, offset, slot)
            }),
            Storage::Dram { slots } => slots.get_mut(offset).map(|place| *place = slot).is_some(),
        };
        if !set {
            return Err(HashError::MalformedBucket {
                page,
                what: "slot outside the bucket page",
            });
        }
        Ok(done)
    }

    /// The slots of a page without caching it: from the cache if resident, else read from flash
    /// (GC peeks at pages this way so liveness checks never evict and write back).
    pub(crate) fn peek(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: u64,
        purpose: Purpose,
    ) -> Result<(Vec<Slot>, SimTime, bool)> {
        if let Some(slots) = self.resident(page) {
            return Ok((slots.to_vec(), at, true));
        }
        let Storage::Flash { directory, .. } = &self.storage else {
            return Ok((Vec::new(), at, false));
        };
        match directory.get(page as usize).copied().flatten() {
            Some(flash_page) => {
                let (bytes, done) = space.read_page(at, flash_page, purpose)?;
                self.counts.page_reads += 1;
                let slots = bucket::decode(
                    &bytes,
                    page,
                    self.slots_per_page,
                    self.bits,
                    flash_page.0,
                    space.read_contents(),
                )?;
                Ok((slots, done, false))
            }
            None => Ok((vec![Slot::EMPTY; self.slots_per_page], at, false)),
        }
    }

    /// Caches a page GC peeked at and changed, as dirty (it is written back when evicted).
    pub(crate) fn install(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: u64,
        slots: Vec<Slot>,
        purpose: Purpose,
    ) -> Result<()> {
        if let Storage::Flash { cache, .. } = &self.storage {
            if cache.contains_key(&page) {
                return Err(HashError::MalformedBucket {
                    page,
                    what: "GC installs a page that is already cached",
                });
            }
        }
        let bytes = bucket::encode(&slots, page, 0, self.bits, self.page_bytes);
        self.insert_page(space, at, page, bytes, true, purpose)
    }

    /// The table page whose newest copy is flash page `flash_page`, if any (GC's liveness check
    /// for bucket pages).
    pub(crate) fn owner_of(&self, flash_page: PageIndex, bytes: &[u8]) -> Result<Option<u64>> {
        let Storage::Flash { directory, .. } = &self.storage else {
            return Ok(None);
        };
        let (number, _) = bucket::decode_header(bytes, flash_page.0)?;
        Ok(
            (directory.get(number as usize).copied().flatten() == Some(flash_page))
                .then_some(u64::from(number)),
        )
    }

    /// Points table page `page` at its moved copy.
    pub(crate) fn relocate(&mut self, page: u64, moved: PageIndex) {
        if let Storage::Flash {
            directory,
            on_flash,
            ..
        } = &mut self.storage
        {
            if directory[page as usize].replace(moved).is_none() {
                *on_flash += 1;
            }
        }
    }

    /// The live slots of a `kaml` table, for a resize.
    pub(crate) fn dram_slots(&self) -> &[Slot] {
        match &self.storage {
            Storage::Dram { slots } => slots,
            Storage::Flash { .. } => &[],
        }
    }
}

/// A table's DRAM state as saved in a checkpoint or power-loss dump: `hash` the directory, the
/// write-back sequence and the dirty cached pages (clean ones are on flash); `kaml` every used slot.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct TableState {
    /// Slots of the table.
    pub(crate) total_slots: u64,
    /// `hash`: flash page of each bucket page's newest copy.
    pub(crate) directory: Vec<Option<u64>>,
    /// `hash`: the write-back sequence number.
    pub(crate) sequence: u64,
    /// Pages (`hash`: dirty cached bucket pages; `kaml`: the one page) as (page, used slots by offset).
    pub(crate) pages: Vec<(u64, Vec<(u64, Slot)>)>,
}

fn used_slots(slots: Slots<'_>) -> Vec<(u64, Slot)> {
    (0..slots.len())
        .filter_map(|offset| Some((offset as u64, slots.get(offset)?)))
        .filter(|(_, slot)| !slot.is_empty())
        .collect()
}

impl Table {
    /// The state a restart needs (see [`TableState`]).
    pub(crate) fn export(&self) -> TableState {
        match &self.storage {
            Storage::Flash {
                directory,
                cache,
                sequence,
                ..
            } => TableState {
                total_slots: self.total_slots(),
                directory: directory
                    .iter()
                    .map(|entry| entry.map(|page| page.0))
                    .collect(),
                sequence: *sequence,
                pages: cache
                    .iter()
                    .filter(|(_, page)| page.dirty)
                    .map(|(&number, page)| {
                        let slots = bucket::slots_in(&page.bytes, self.slots_per_page, self.bits);
                        (number, used_slots(slots))
                    })
                    .collect(),
            },
            Storage::Dram { slots } => TableState {
                total_slots: slots.len() as u64,
                directory: Vec::new(),
                sequence: 0,
                pages: vec![(0, used_slots(Slots::Decoded(slots)))],
            },
        }
    }

    /// Loads a saved state into this (empty, freshly built) table. `hash`: the directory must have
    /// as many pages as this table; dirty pages come back into the cache, dirty. `kaml`: the table
    /// takes the saved size.
    pub(crate) fn import(&mut self, state: &TableState, pages_total: u64) -> Result<()> {
        let malformed = |what: &'static str| HashError::MalformedBucket {
            page: u64::MAX,
            what,
        };
        let per_page = self.slots_per_page;
        let (bits, page_bytes) = (self.bits, self.page_bytes);
        match &mut self.storage {
            Storage::Flash {
                directory,
                on_flash,
                cache,
                lru,
                clock,
                capacity,
                sequence,
                ..
            } => {
                if state.directory.len() != directory.len() {
                    return Err(malformed("saved bucket directory has another size"));
                }
                if state.pages.len() > (*capacity).max(1) {
                    return Err(malformed("more saved dirty pages than the cache holds"));
                }
                for (entry, saved) in directory.iter_mut().zip(&state.directory) {
                    if let Some(page) = saved {
                        if *page >= pages_total {
                            return Err(malformed(
                                "saved directory names a page outside the device",
                            ));
                        }
                    }
                    *entry = saved.map(PageIndex);
                }
                *on_flash = directory.iter().filter(|entry| entry.is_some()).count() as u64;
                *sequence = state.sequence;
                for (number, used) in &state.pages {
                    if *number >= directory.len() as u64 {
                        return Err(malformed("saved page outside the table"));
                    }
                    let mut slots = vec![Slot::EMPTY; per_page];
                    for (offset, slot) in used {
                        let place = slots
                            .get_mut(*offset as usize)
                            .ok_or_else(|| malformed("saved slot outside its page"))?;
                        *place = *slot;
                    }
                    *clock += 1;
                    lru.insert(*clock, *number);
                    cache.insert(
                        *number,
                        CachedPage {
                            bytes: bucket::encode(&slots, *number, 0, bits, page_bytes),
                            dirty: true,
                            stamp: *clock,
                            read_ahead: false,
                        },
                    );
                }
            }
            Storage::Dram { slots } => {
                if state.total_slots == 0 || state.total_slots > (1 << 40) {
                    return Err(malformed("saved table size out of range"));
                }
                let mut restored = vec![Slot::EMPTY; state.total_slots as usize];
                for (_, used) in &state.pages {
                    for (offset, slot) in used {
                        let place = restored
                            .get_mut(*offset as usize)
                            .ok_or_else(|| malformed("saved slot outside the table"))?;
                        *place = *slot;
                    }
                }
                *slots = restored;
                self.slots_per_page = state.total_slots as usize;
            }
        }
        Ok(())
    }

    /// Every live slot of the table (`hash`: resident pages from the cache, the others read from
    /// flash without caching them) and the flash pages the directory references, for recounting
    /// valid bytes after a restart.
    pub(crate) fn live_slots(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<(Vec<Slot>, Vec<PageIndex>, SimTime)> {
        let mut t = at;
        let mut live = Vec::new();
        let mut on_flash = Vec::new();
        let pages = match &self.storage {
            Storage::Dram { slots } => {
                live.extend(slots.iter().copied().filter(|slot| slot.is_live()));
                None
            }
            Storage::Flash { directory, .. } => {
                on_flash.extend(directory.iter().flatten().copied());
                Some(directory.len() as u64)
            }
        };
        if let Some(pages) = pages {
            {
                for page in 0..pages {
                    let (slots, done, _) = self.peek(space, t, page, Purpose::Recovery)?;
                    t = t.max(done);
                    live.extend(slots.into_iter().filter(|slot| slot.is_live()));
                }
            }
        }
        Ok((live, on_flash, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window as runs built slot by slot: the definition the page-at-a-time version must match.
    fn window_slot_by_slot(table: &Table, home: u64, probes: u64) -> Vec<(u64, usize, usize)> {
        let total = table.total_slots();
        let per_page = table.slots_per_page as u64;
        let mut runs: Vec<(u64, usize, usize)> = Vec::new();
        let mut slot = home % total;
        for _ in 0..probes.min(total) {
            let page = slot / per_page;
            let offset = (slot % per_page) as usize;
            match runs.last_mut() {
                Some((last, start, count)) if *last == page && *start + *count == offset => {
                    *count += 1
                }
                _ => runs.push((page, offset, 1)),
            }
            slot = (slot + 1) % total;
        }
        runs
    }

    #[test]
    fn hash_window_matches_slot_by_slot_definition() {
        for (pages, per_page) in [(1u64, 5usize), (3, 7), (8, 64)] {
            let table = Table::on_flash(pages, per_page, 2, 8, 512, 0);
            let total = pages * per_page as u64;
            for home in 0..total * 2 {
                for probes in [
                    0,
                    1,
                    2,
                    per_page as u64 - 1,
                    per_page as u64,
                    total,
                    total + 3,
                ] {
                    assert_eq!(
                        table.window(home, probes),
                        window_slot_by_slot(&table, home, probes),
                        "pages {pages} per page {per_page} home {home} probes {probes}"
                    );
                }
            }
        }
        let dram = Table::in_dram(10, 64, 512, 0);
        assert_eq!(dram.window(7, 5), vec![(0, 7, 3), (0, 0, 2)]);
    }

    /// A bucket page read into the cache is checked as decoding checks it: a directory that names
    /// another part of the table's page is refused, and a page as written comes back as written.
    #[test]
    fn hash_table_checks_each_bucket_page_it_caches() {
        let config = crate::hash::HashConfig::test_min(crate::hash::HashPreset::Hash);
        let profile = kvssd_flash::Profile::test_min();
        let flash = kvssd_flash::Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
        let mut space = Space::open(flash, config.space.clone()).expect("space");
        let page_bytes = space.geometry().page_bytes as usize;
        let pages_total = space.geometry().pages_total();
        let bits = 8;
        let per_page = bucket::slots_per_page(page_bytes, bits);
        let slot_of = |page: u64| Slot {
            signature: page + 1,
            pointer: 10 + page,
        };
        let mut table = Table::on_flash(2, per_page, 2, bits, page_bytes, 0);
        for page in 0..2 {
            table
                .set(&mut space, 0, page, 3, slot_of(page), Purpose::Index)
                .expect("set");
        }
        table
            .write_back_all(&mut space, 0, Purpose::Index)
            .expect("write back");
        let reopened = |directory: Vec<Option<u64>>| {
            let mut state = table.export();
            state.directory = directory;
            state.pages.clear();
            let mut restored = Table::on_flash(2, per_page, 2, bits, page_bytes, 0);
            restored.import(&state, pages_total).expect("import");
            restored
        };
        let directory = table.export().directory;
        let mut swapped = reopened(vec![directory[1], directory[0]]);
        assert!(matches!(
            swapped.load(&mut space, 0, 0, Purpose::Index),
            Err(HashError::MalformedBucket {
                what: "holds another part of the table",
                ..
            })
        ));
        let mut restored = reopened(directory);
        for page in 0..2 {
            restored
                .load(&mut space, 0, page, Purpose::Index)
                .expect("load");
            let slots = restored.resident(page).expect("resident");
            assert_eq!(slots.len(), per_page);
            assert_eq!(slots.get(3), Some(slot_of(page)));
            assert_eq!(slots.get(4), Some(Slot::EMPTY));
        }
        assert_eq!(restored.counts.page_reads, 2);
    }
}
