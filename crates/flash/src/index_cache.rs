//! A cache, in host memory, of index pages read from file media: the pages a read with
//! [`crate::Purpose::Index`] returned (meta segments of unpinned levels, bucket pages), kept so
//! that the next lookup through the same page costs a memory copy instead of a `pread` and a
//! checksum.
//!
//! NAND pages are immutable between their program and their block's erase, so the cache is
//! coherent if it forgets a page when it is programmed, discarded or its block erased, which
//! [`crate::Flash`] does. It holds only pages whose checksum was verified when they were read,
//! and it is bypassed while faults are injected. Eviction is CLOCK (first in, first out, with a
//! second chance for a page read again since it was last passed over), bounded by bytes.

use std::collections::{HashMap, VecDeque};

/// What the index page cache did since the array was opened, and what it holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexCacheStats {
    /// Index page reads served from the cache.
    pub hits: u64,
    /// Index page reads that went to the media (and were then kept).
    pub misses: u64,
    /// Pages held now.
    pub pages: u64,
    /// Bytes held now (payload and OOB of each page).
    pub bytes: u64,
    /// The most bytes it may hold.
    pub capacity_bytes: u64,
}

/// One cached page: its payload, its whole OOB area (trailer first) and its program sequence.
pub(crate) struct CachedPage {
    pub(crate) data: Box<[u8]>,
    pub(crate) oob: Box<[u8]>,
    pub(crate) sequence: u64,
    referenced: bool,
}

pub(crate) struct IndexCache {
    pages: HashMap<u64, CachedPage>,
    /// Page indexes in insertion order; may name pages already forgotten (skipped on eviction).
    clock: VecDeque<u64>,
    page_cost: u64,
    stats: IndexCacheStats,
}

impl IndexCache {
    /// A cache of at most `capacity_bytes`, for pages of `page_cost` bytes (payload and OOB).
    pub(crate) fn new(capacity_bytes: u64, page_cost: u64) -> IndexCache {
        IndexCache {
            pages: HashMap::new(),
            clock: VecDeque::new(),
            page_cost: page_cost.max(1),
            stats: IndexCacheStats {
                capacity_bytes,
                ..IndexCacheStats::default()
            },
        }
    }

    pub(crate) fn stats(&self) -> IndexCacheStats {
        IndexCacheStats {
            pages: self.pages.len() as u64,
            bytes: self.pages.len() as u64 * self.page_cost,
            ..self.stats
        }
    }

    /// The page, if held (counted as a hit).
    pub(crate) fn get(&mut self, index: u64) -> Option<&CachedPage> {
        let page = self.pages.get_mut(&index)?;
        page.referenced = true;
        self.stats.hits += 1;
        Some(page)
    }

    /// Keeps a page just read from the media (counted as a miss), evicting as needed.
    pub(crate) fn insert(&mut self, index: u64, data: &[u8], oob: &[u8], sequence: u64) {
        self.stats.misses += 1;
        if self.page_cost > self.stats.capacity_bytes {
            return;
        }
        while (self.pages.len() as u64 + 1) * self.page_cost > self.stats.capacity_bytes {
            let Some(victim) = self.clock.pop_front() else {
                break;
            };
            match self.pages.get_mut(&victim) {
                Some(page) if page.referenced => {
                    page.referenced = false;
                    self.clock.push_back(victim);
                }
                Some(_) => {
                    self.pages.remove(&victim);
                }
                None => {}
            }
        }
        let page = CachedPage {
            data: data.into(),
            oob: oob.into(),
            sequence,
            referenced: false,
        };
        if self.pages.insert(index, page).is_none() {
            self.clock.push_back(index);
        }
        // Forgotten pages leave their indexes in the clock; drop them once they dominate it.
        if self.clock.len() > 2 * self.pages.len() + 64 {
            let pages = &self.pages;
            self.clock.retain(|index| pages.contains_key(index));
        }
    }

    /// Forgets pages `first..last` (a page programmed or discarded, or an erased block's pages).
    pub(crate) fn forget(&mut self, first: u64, last: u64) {
        if self.pages.is_empty() {
            return;
        }
        for index in first..last {
            self.pages.remove(&index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_cache_keeps_within_its_bytes_and_forgets_on_request() {
        let mut cache = IndexCache::new(3 * 10, 10);
        for index in 0..3 {
            cache.insert(index, &[index as u8; 8], &[0; 2], index);
        }
        assert!(cache.get(0).is_some(), "page 0 is held and now referenced");
        cache.insert(3, &[3; 8], &[0; 2], 3);
        let stats = cache.stats();
        assert_eq!(stats.pages, 3);
        assert!(stats.bytes <= stats.capacity_bytes);
        assert!(
            cache.get(0).is_some(),
            "a referenced page gets a second chance"
        );
        assert!(
            cache.get(1).is_none(),
            "the oldest unreferenced page went first"
        );
        cache.forget(0, 4);
        assert_eq!(cache.stats().pages, 0);
        assert!(cache.get(3).is_none());
        assert_eq!(cache.stats().misses, 4);
        assert_eq!(cache.stats().hits, 2);
    }

    #[test]
    fn index_cache_smaller_than_a_page_holds_nothing() {
        let mut cache = IndexCache::new(5, 10);
        cache.insert(1, &[1; 8], &[0; 2], 1);
        assert_eq!(cache.stats().pages, 0);
        assert!(cache.get(1).is_none());
    }
}
