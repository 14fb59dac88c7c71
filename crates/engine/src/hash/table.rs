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
//! and its old copy is reported dead to the space layer. On compact media a page read into the
//! cache is not copied while it stays clean: its slots are read where they lie in the flash copy
//! the directory names, which holds the same bytes (GC moves it whole), and a change copies the
//! page out first. The simulation sees the same reads, time and counters either way.

use kvssd_flash::{MediaKind, Purpose, SimTime};
use kvssd_space::{Contents, PageIndex, Space};

use super::bucket::{self, Slot, Slots};
use super::{HashError, Result};

mod cache;
mod state;

use cache::{CachedPage, PageCache};

pub(crate) use state::TableState;

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
enum Storage {
    Flash {
        directory: Vec<Option<PageIndex>>,
        /// Directory entries that point at a flash page (every put asks, so it is kept rather
        /// than counted).
        on_flash: u64,
        cache: PageCache,
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
                cache: PageCache::new(pages as usize),
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
            Storage::Flash { cache, .. } => (cache.len(), cache.dirty_count()),
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

    /// Asks the host for what [`Table::page_to_read`] of `page` will look at (its cache entry and
    /// its directory entry), so that a batch's lookups find them together. Changes nothing.
    pub(crate) fn prefetch_page_state(&self, page: u64) {
        if let Storage::Flash {
            directory, cache, ..
        } = &self.storage
        {
            cache.prefetch(page);
            if let Some(entry) = usize::try_from(page)
                .ok()
                .and_then(|page| directory.get(page))
            {
                kvssd_flash::prefetch::line(entry);
            }
        }
    }

    /// The flash page whose bytes a use of bucket page `page` would look at now: the page it
    /// would read if it is not cached, or the one its slots are read in if it is cached in place.
    /// `None` if its bytes are in the cache, it was never written, or it lies outside the table.
    /// Changes nothing.
    pub(crate) fn page_to_read(&self, page: u64) -> Option<PageIndex> {
        match &self.storage {
            Storage::Flash {
                directory, cache, ..
            } if cache.get(page).is_none_or(|cached| cached.bytes.is_none()) => {
                directory.get(page as usize).copied().flatten()
            }
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
    /// never written) and returns when its slots are in DRAM. With `change`, its bytes are held
    /// in the cache, ready to change; otherwise a page read on compact media is cached in place.
    pub(crate) fn load(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: u64,
        purpose: Purpose,
        change: bool,
    ) -> Result<SimTime> {
        let Storage::Flash { cache, .. } = &mut self.storage else {
            return Ok(at);
        };
        if let Some(cached) = cache.touch(page) {
            if std::mem::take(&mut cached.read_ahead) {
                // It had to be read for this use, only earlier.
                self.counts.cache_misses += 1;
            } else {
                self.counts.cache_hits += 1;
            }
            if change {
                self.hold_bytes(space, page)?;
            }
            return Ok(at);
        }
        self.counts.cache_misses += 1;
        self.fetch(space, at, page, purpose, false, change)
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
        if cache.contains(page) {
            return Ok(at);
        }
        // Pages are read ahead of puts, which change them.
        self.fetch(space, at, page, purpose, true, true)
    }

    /// Brings a page that is not cached into the cache: a read of its newest copy, or an empty page
    /// never written. Returns when its slots are in DRAM. With `change`, or wherever the flash
    /// layer copies the whole page, the cache holds the page's bytes; otherwise it reads them in
    /// place.
    fn fetch(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: u64,
        purpose: Purpose,
        read_ahead: bool,
        change: bool,
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
        let contents = space.read_contents();
        let in_place =
            space.flash().media_kind() == MediaKind::Compact && contents == Contents::Trust;
        let (bytes, done) = match location {
            Some(flash_page) if in_place && !change => {
                let (slot_count, bits, page_bytes) =
                    (self.slots_per_page, self.bits, self.page_bytes);
                let mut bytes = std::mem::take(spare);
                let (whole, done) = space.read_page_parts(at, flash_page, purpose, |view| {
                    if let Some(whole) = view.whole() {
                        // The flash layer had something to verify, so it copied the page: keep
                        // the copy.
                        bytes.clear();
                        bytes.extend_from_slice(whole);
                        return bucket::check(
                            &bytes,
                            page,
                            slot_count,
                            bits,
                            flash_page.0,
                            contents,
                        )
                        .map(|()| true);
                    }
                    let mut header = [0u8; bucket::HEADER_BYTES];
                    view.copy(0, &mut header)?;
                    bucket::check_header(&header, page_bytes, page, slot_count, bits, flash_page.0)
                        .map(|()| false)
                })?;
                self.counts.page_reads += 1;
                if whole? {
                    (Some(bytes), done)
                } else {
                    if let Storage::Flash { spare, .. } = &mut self.storage {
                        *spare = bytes;
                    }
                    (None, done)
                }
            }
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
                    contents,
                )?;
                (Some(bytes), done)
            }
            None => (Some(self.empty_page(page)), at),
        };
        self.insert_page(space, at, page, bytes, false, purpose)?;
        if read_ahead {
            if let Storage::Flash { cache, .. } = &mut self.storage {
                if let Some(cached) = cache.get_mut(page) {
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
        bytes: Option<Vec<u8>>,
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
        let Storage::Flash { cache, .. } = &mut self.storage else {
            return Ok(());
        };
        let cached = CachedPage {
            bytes,
            dirty,
            read_ahead: false,
        };
        if !cache.insert(page, cached) {
            return Err(HashError::MalformedBucket {
                page,
                what: "a page cached twice, or outside the table",
            });
        }
        Ok(())
    }

    /// Evicts the least recently used page, writing it back if dirty. The write is issued at `at`
    /// and not waited for: the die and channel calendars carry its cost to later operations.
    fn evict_oldest(&mut self, space: &mut Space, at: SimTime, purpose: Purpose) -> Result<()> {
        let Storage::Flash { cache, .. } = &mut self.storage else {
            return Ok(());
        };
        let Some((page, evicted)) = cache.pop_oldest() else {
            return Ok(());
        };
        self.counts.evictions += 1;
        let Some(mut bytes) = evicted.bytes else {
            // Clean and in place: nothing to write or to reuse. A change holds a page's bytes
            // before it makes the page dirty.
            return if evicted.dirty {
                Err(unheld(page))
            } else {
                Ok(())
            };
        };
        if evicted.dirty {
            self.write_back(space, at, page, &mut bytes, purpose)?;
        }
        if let Storage::Flash { spare, .. } = &mut self.storage {
            *spare = bytes;
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
            Storage::Flash { cache, .. } => {
                // In page order, as they are written.
                let dirty: Vec<u64> = cache
                    .by_page()
                    .into_iter()
                    .filter(|(_, page)| page.dirty)
                    .map(|(number, _)| number)
                    .collect();
                for &number in &dirty {
                    if let Some(page) = cache.get_mut(number) {
                        page.dirty = false;
                    }
                }
                dirty
            }
            Storage::Dram { .. } => Vec::new(),
        };
        let mut done = at;
        for page in dirty {
            // Out of the cache while it is written, so the write can update the directory.
            let Some(mut bytes) = (match &mut self.storage {
                Storage::Flash { cache, .. } => {
                    cache.get_mut(page).and_then(|cached| cached.bytes.take())
                }
                Storage::Dram { .. } => None,
            }) else {
                return Err(unheld(page));
            };
            let written = self.write_back(space, at, page, &mut bytes, purpose);
            if let Storage::Flash { cache, .. } = &mut self.storage {
                if let Some(cached) = cache.get_mut(page) {
                    cached.bytes = Some(bytes);
                }
            }
            done = done.max(written?);
        }
        Ok(done)
    }

    /// The slots of a resident page (every `kaml` slot is resident): in its cached bytes, or in
    /// its flash copy if it is cached in place (read through `space`).
    pub(crate) fn resident<'a>(&'a self, space: &'a Space, page: u64) -> Option<Slots<'a>> {
        match &self.storage {
            Storage::Flash {
                cache, directory, ..
            } => match &cache.get(page)?.bytes {
                Some(bytes) => Some(bucket::slots_in(bytes, self.slots_per_page, self.bits)),
                None => Some(Slots::InPlace {
                    space,
                    page: directory.get(page as usize).copied().flatten()?,
                    count: self.slots_per_page,
                    width: bucket::slot_bytes(self.bits),
                }),
            },
            Storage::Dram { slots } => (page == 0).then_some(Slots::Decoded(slots)),
        }
    }

    /// Whether page `page` is resident (every `kaml` slot is).
    pub(crate) fn is_resident(&self, page: u64) -> bool {
        match &self.storage {
            Storage::Flash { cache, .. } => cache.contains(page),
            Storage::Dram { .. } => page == 0,
        }
    }

    /// Copies a page cached in place out of its flash copy, so that it can change.
    fn hold_bytes(&mut self, space: &Space, page: u64) -> Result<()> {
        let Storage::Flash {
            cache,
            directory,
            spare,
            ..
        } = &mut self.storage
        else {
            return Ok(());
        };
        let Some(cached) = cache.get_mut(page).filter(|cached| cached.bytes.is_none()) else {
            return Ok(());
        };
        let unreadable = || HashError::MalformedBucket {
            page,
            what: "the flash copy of a page cached in place cannot be read",
        };
        let flash_page = directory
            .get(page as usize)
            .copied()
            .flatten()
            .ok_or_else(unreadable)?;
        let mut bytes = std::mem::take(spare);
        bytes.resize(self.page_bytes, 0);
        if !space.peek_page(flash_page, 0, &mut bytes) {
            return Err(unreadable());
        }
        cached.bytes = Some(bytes);
        Ok(())
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
        let done = if self.is_resident(page) {
            at
        } else {
            self.load(space, at, page, purpose, true)?
        };
        self.hold_bytes(space, page)?;
        let per_page = self.slots_per_page;
        let set = match &mut self.storage {
            Storage::Flash { cache, .. } => cache.get_mut(page).is_some_and(|cached| {
                cached.dirty = true;
                offset < per_page
                    && cached
                        .bytes
                        .as_mut()
                        .is_some_and(|bytes| bucket::set_slot(bytes, self.bits, offset, slot))
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
        if let Some(slots) = self.resident(space, page) {
            let slots = slots.to_vec().ok_or(HashError::MalformedBucket {
                page,
                what: "the flash copy of a page cached in place cannot be read",
            })?;
            return Ok((slots, at, true));
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
            if cache.contains(page) {
                return Err(HashError::MalformedBucket {
                    page,
                    what: "GC installs a page that is already cached",
                });
            }
        }
        let bytes = bucket::encode(&slots, page, 0, self.bits, self.page_bytes);
        self.insert_page(space, at, page, Some(bytes), true, purpose)
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

impl Table {
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

/// The error of a dirty cached page that holds no bytes: a change holds them before it makes a
/// page dirty, so this is a broken invariant, reported rather than a write lost.
fn unheld(page: u64) -> HashError {
    HashError::MalformedBucket {
        page,
        what: "a dirty cached page holds no bytes",
    }
}

#[cfg(test)]
mod tests;
