//! The bucket pages a `hash` table caches, least recently used first: an entry for every table
//! page, the cached ones linked from the oldest use to the newest, so that a use, an insert and
//! an eviction each take a few steps. (They were two ordered maps, page → cached page and
//! last-use stamp → page: a tenth of the host's time on a `hash` scan, which reads a bucket page
//! for every key it visits.) The order, and so every eviction, is the same.

/// No page: the end of the list.
const NONE: u32 = u32::MAX;

/// A bucket page in the cache.
#[derive(Debug)]
pub(super) struct CachedPage {
    /// The page as [`super::bucket::encode`] lays it out; its slots are read and set where they
    /// lie, and its sequence and checksum are stamped when it is written back. `None` while the
    /// page is clean on compact media: its slots are then read in its flash copy
    /// ([`super::Slots::InPlace`]).
    pub(super) bytes: Option<Vec<u8>>,
    pub(super) dirty: bool,
    /// Read ahead of its first use ([`super::Table::read_ahead`]): that use counts the miss.
    pub(super) read_ahead: bool,
}

#[derive(Debug)]
struct Entry {
    page: CachedPage,
    /// The page used just before this one, or [`NONE`].
    older: u32,
    /// The page used just after this one, or [`NONE`].
    newer: u32,
}

/// The cached pages of a table of a fixed number of pages, in the order of their last use.
#[derive(Debug)]
pub(super) struct PageCache {
    entries: Vec<Option<Entry>>,
    oldest: u32,
    newest: u32,
    len: usize,
}

impl PageCache {
    /// An empty cache for a table of `pages` pages.
    pub(super) fn new(pages: usize) -> PageCache {
        debug_assert!(pages < NONE as usize, "a table of {pages} pages");
        PageCache {
            entries: (0..pages).map(|_| None).collect(),
            oldest: NONE,
            newest: NONE,
            len: 0,
        }
    }

    /// Pages cached.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn contains(&self, page: u64) -> bool {
        self.get(page).is_some()
    }

    pub(super) fn get(&self, page: u64) -> Option<&CachedPage> {
        let entry = self.entries.get(usize::try_from(page).ok()?)?.as_ref()?;
        Some(&entry.page)
    }

    /// Asks the host for `page`'s entry ([`kvssd_flash::prefetch::line`]). Changes nothing.
    pub(super) fn prefetch(&self, page: u64) {
        if let Some(entry) = usize::try_from(page)
            .ok()
            .and_then(|page| self.entries.get(page))
        {
            kvssd_flash::prefetch::line(entry);
        }
    }

    pub(super) fn get_mut(&mut self, page: u64) -> Option<&mut CachedPage> {
        let entry = self
            .entries
            .get_mut(usize::try_from(page).ok()?)?
            .as_mut()?;
        Some(&mut entry.page)
    }

    /// Page `page` as just used (the newest), if it is cached.
    pub(super) fn touch(&mut self, page: u64) -> Option<&mut CachedPage> {
        let index = self.index_of(page)?;
        if self.newest != index {
            self.unlink(index);
            self.link_newest(index);
        }
        self.get_mut(page)
    }

    /// Caches `page` as just used. Refused (returns `false`, nothing changed) for a page outside
    /// the table or cached already.
    pub(super) fn insert(&mut self, page: u64, cached: CachedPage) -> bool {
        let Some(index) = u32::try_from(page).ok().filter(|&index| index != NONE) else {
            return false;
        };
        let Some(place @ None) = self.entries.get_mut(index as usize) else {
            return false;
        };
        *place = Some(Entry {
            page: cached,
            older: NONE,
            newer: NONE,
        });
        self.link_newest(index);
        self.len += 1;
        true
    }

    /// Takes the least recently used page out of the cache.
    pub(super) fn pop_oldest(&mut self) -> Option<(u64, CachedPage)> {
        let index = self.oldest;
        if index == NONE {
            return None;
        }
        self.unlink(index);
        self.len -= 1;
        let entry = self.entries.get_mut(index as usize)?.take()?;
        Some((u64::from(index), entry.page))
    }

    /// Cached pages that are dirty.
    pub(super) fn dirty_count(&self) -> usize {
        self.in_use_order()
            .filter(|(_, cached)| cached.dirty)
            .count()
    }

    /// Every cached page, in ascending page order.
    pub(super) fn by_page(&self) -> Vec<(u64, &CachedPage)> {
        let mut pages: Vec<(u64, &CachedPage)> = self.in_use_order().collect();
        pages.sort_unstable_by_key(|&(page, _)| page);
        pages
    }

    /// Every cached page, the least recently used first.
    fn in_use_order(&self) -> impl Iterator<Item = (u64, &CachedPage)> {
        let mut index = self.oldest;
        std::iter::from_fn(move || {
            let entry = self.entries.get(index as usize)?.as_ref()?;
            let page = u64::from(index);
            index = entry.newer;
            Some((page, &entry.page))
        })
    }

    /// The index of `page` if it is cached.
    fn index_of(&self, page: u64) -> Option<u32> {
        let index = u32::try_from(page).ok()?;
        self.entries.get(index as usize)?.as_ref()?;
        Some(index)
    }

    /// Takes cached page `index` out of the order (it stays cached).
    fn unlink(&mut self, index: u32) {
        let Some(entry) = self.entries.get(index as usize).and_then(Option::as_ref) else {
            return;
        };
        let (older, newer) = (entry.older, entry.newer);
        match self.entry_mut(older) {
            Some(entry) => entry.newer = newer,
            None => self.oldest = newer,
        }
        match self.entry_mut(newer) {
            Some(entry) => entry.older = older,
            None => self.newest = older,
        }
    }

    /// Puts cached page `index`, out of the order, at its newest end.
    fn link_newest(&mut self, index: u32) {
        let newest = self.newest;
        match self.entry_mut(newest) {
            Some(entry) => entry.newer = index,
            None => self.oldest = index,
        }
        if let Some(entry) = self.entry_mut(index) {
            entry.older = newest;
            entry.newer = NONE;
        }
        self.newest = index;
    }

    fn entry_mut(&mut self, index: u32) -> Option<&mut Entry> {
        self.entries.get_mut(index as usize)?.as_mut()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn page(dirty: bool) -> CachedPage {
        CachedPage {
            bytes: None,
            dirty,
            read_ahead: false,
        }
    }

    /// What the cache does, step by step.
    #[derive(Debug, Clone)]
    enum Step {
        Touch(u64),
        Insert(u64, bool),
        PopOldest,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u64..24).prop_map(Step::Touch),
            (0u64..24, any::<bool>()).prop_map(|(page, dirty)| Step::Insert(page, dirty)),
            Just(Step::PopOldest),
        ]
    }

    proptest! {
        /// The cache answers every step as the two ordered maps it replaces did (page → page,
        /// last-use stamp → page): the same pages cached, evicted in the same order.
        #[test]
        fn page_cache_keeps_the_order_of_last_use(
            steps in proptest::collection::vec(step(), 0..200),
        ) {
            // Pages 20 to 23 lie outside a table of 20.
            let mut cache = PageCache::new(20);
            let mut pages: BTreeMap<u64, (bool, u64)> = BTreeMap::new();
            let mut uses: BTreeMap<u64, u64> = BTreeMap::new();
            let mut clock = 0;
            for step in steps {
                match step {
                    Step::Touch(number) => {
                        let touched = cache.touch(number).map(|cached| cached.dirty);
                        let expected = pages.get_mut(&number).map(|(dirty, stamp)| {
                            clock += 1;
                            uses.remove(stamp);
                            uses.insert(clock, number);
                            *stamp = clock;
                            *dirty
                        });
                        prop_assert_eq!(touched, expected);
                    }
                    Step::Insert(number, dirty) => {
                        let expected = number < 20 && !pages.contains_key(&number);
                        prop_assert_eq!(cache.insert(number, page(dirty)), expected);
                        if expected {
                            clock += 1;
                            uses.insert(clock, number);
                            pages.insert(number, (dirty, clock));
                        }
                    }
                    Step::PopOldest => {
                        let popped = cache
                            .pop_oldest()
                            .map(|(number, cached)| (number, cached.dirty));
                        let expected = uses.pop_first().map(|(_, number)| {
                            let (dirty, _) = pages.remove(&number).unwrap_or_default();
                            (number, dirty)
                        });
                        prop_assert_eq!(popped, expected);
                    }
                }
                prop_assert_eq!(cache.len(), pages.len());
                let listed: Vec<(u64, bool)> = cache
                    .by_page()
                    .into_iter()
                    .map(|(number, cached)| (number, cached.dirty))
                    .collect();
                let expected: Vec<(u64, bool)> =
                    pages.iter().map(|(&number, &(dirty, _))| (number, dirty)).collect();
                prop_assert_eq!(listed, expected);
            }
        }
    }
}
