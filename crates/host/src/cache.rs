//! The record cache: (table, key) → value of committed data in host memory, within a byte budget,
//! least recently used first out.
//!
//! On the KAML commit path every entry is clean (a commit writes through before its locks are
//! released), so eviction never writes. On the conventional path committed records stay dirty
//! until a checkpoint writes their pages back; dirty entries are never evicted.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::TableId;

/// Bytes an entry takes besides its key and value (hash slot, LRU link, flags).
pub const CACHE_ENTRY_OVERHEAD_BYTES: u64 = 48;

/// A cached record: its value (`None`: known absent is not cached; every entry holds a value).
struct Entry {
    value: Vec<u8>,
    dirty: bool,
    tick: u64,
}

/// The cache. Not thread-safe: the host owns it.
pub(crate) struct Cache {
    budget_bytes: u64,
    used_bytes: u64,
    entries: HashMap<(TableId, Vec<u8>), Entry>,
    /// Recency order of the clean entries, the only ones eviction may take: tick → key. Dirty
    /// entries join it when they are cleaned, so eviction never walks past them.
    order: BTreeMap<u64, (TableId, Vec<u8>)>,
    next_tick: u64,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    pub(crate) evictions: u64,
    dirty_bytes: u64,
    /// The dirty keys, in key order.
    dirty: BTreeSet<(TableId, Vec<u8>)>,
    /// Keys evicted since the last [`Cache::take_evicted`], when asked to keep them.
    evicted: Option<Vec<(TableId, Vec<u8>)>>,
}

fn entry_bytes(key: &[u8], value: &[u8]) -> u64 {
    (key.len() + value.len()) as u64 + CACHE_ENTRY_OVERHEAD_BYTES
}

impl Cache {
    pub(crate) fn new(budget_bytes: u64) -> Cache {
        Cache {
            budget_bytes,
            used_bytes: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
            next_tick: 0,
            hits: 0,
            misses: 0,
            evictions: 0,
            dirty_bytes: 0,
            dirty: BTreeSet::new(),
            evicted: None,
        }
    }

    /// Keeps the keys it evicts, for [`Cache::take_evicted`] (the conventional path tracks which
    /// pages the cache holds whole).
    pub(crate) fn keep_evicted(&mut self) {
        self.evicted = Some(Vec::new());
    }

    /// Keys evicted since the last call.
    pub(crate) fn take_evicted(&mut self) -> Vec<(TableId, Vec<u8>)> {
        self.evicted
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The value of a key if cached (counted as a hit or a miss), marking it recently used.
    pub(crate) fn get(&mut self, table: TableId, key: &[u8]) -> Option<Vec<u8>> {
        let tick = self.next_tick;
        let Some(entry) = self.entries.get_mut(&(table, key.to_vec())) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        self.next_tick += 1;
        let old = std::mem::replace(&mut entry.tick, tick);
        let value = entry.value.clone();
        if let Some(name) = self.order.remove(&old) {
            self.order.insert(tick, name);
        }
        Some(value)
    }

    /// The value of a key if cached, without counting or reordering (checks and write-back).
    pub(crate) fn peek(&self, table: TableId, key: &[u8]) -> Option<&[u8]> {
        self.entries
            .get(&(table, key.to_vec()))
            .map(|entry| entry.value.as_slice())
    }

    /// Puts a committed value in, clean or dirty, replacing any older one, then evicts clean
    /// entries, least recently used first, until the cache fits its budget again (or only dirty
    /// ones are left).
    pub(crate) fn put(&mut self, table: TableId, key: &[u8], value: Vec<u8>, dirty: bool) {
        self.remove(table, key);
        let bytes = entry_bytes(key, &value);
        let tick = self.next_tick;
        self.next_tick += 1;
        self.used_bytes += bytes;
        if dirty {
            self.dirty_bytes += bytes;
            self.dirty.insert((table, key.to_vec()));
        } else {
            self.order.insert(tick, (table, key.to_vec()));
        }
        self.entries
            .insert((table, key.to_vec()), Entry { value, dirty, tick });
        self.evict();
    }

    /// Fills in a value read from the device unless the cache already holds the key (a cached
    /// value is never older than the device's).
    pub(crate) fn fill(&mut self, table: TableId, key: &[u8], value: Vec<u8>) {
        if !self.entries.contains_key(&(table, key.to_vec())) {
            self.put(table, key, value, false);
        }
    }

    /// Drops a key (a committed delete).
    pub(crate) fn remove(&mut self, table: TableId, key: &[u8]) {
        if let Some(entry) = self.entries.remove(&(table, key.to_vec())) {
            let bytes = entry_bytes(key, &entry.value);
            self.used_bytes -= bytes;
            if entry.dirty {
                self.dirty_bytes -= bytes;
                self.dirty.remove(&(table, key.to_vec()));
            }
            self.order.remove(&entry.tick);
        }
    }

    fn evict(&mut self) {
        if self.used_bytes <= self.budget_bytes {
            return;
        }
        let mut victims = Vec::new();
        let mut over = self.used_bytes - self.budget_bytes;
        for name in self.order.values() {
            if over == 0 {
                break;
            }
            let Some(entry) = self.entries.get(name) else {
                continue;
            };
            if entry.dirty {
                continue;
            }
            let bytes = entry_bytes(&name.1, &entry.value);
            over = over.saturating_sub(bytes);
            victims.push(name.clone());
        }
        for (table, key) in victims {
            self.remove(table, &key);
            self.evictions += 1;
            if let Some(evicted) = &mut self.evicted {
                evicted.push((table, key));
            }
        }
    }

    /// Evicts every clean entry.
    pub(crate) fn evict_clean(&mut self) {
        let budget = std::mem::replace(&mut self.budget_bytes, 0);
        self.evict();
        self.budget_bytes = budget;
    }

    /// Up to `limit` dirty entries (conventional path), in key order, marking them clean.
    pub(crate) fn take_dirty(&mut self, limit: usize) -> Vec<(TableId, Vec<u8>, Vec<u8>)> {
        let names: Vec<(TableId, Vec<u8>)> = self.dirty.iter().take(limit).cloned().collect();
        self.take_dirty_named(&names)
    }

    /// Those of `names` that are dirty, marking them clean.
    pub(crate) fn take_dirty_named(
        &mut self,
        names: &[(TableId, Vec<u8>)],
    ) -> Vec<(TableId, Vec<u8>, Vec<u8>)> {
        let mut taken = Vec::new();
        for name in names {
            if !self.dirty.remove(name) {
                continue;
            }
            if let Some(entry) = self.entries.get_mut(name) {
                entry.dirty = false;
                self.dirty_bytes -= entry_bytes(&name.1, &entry.value);
                taken.push((name.0, name.1.clone(), entry.value.clone()));
                // Clean now: evictable, at the place its last use gives it.
                self.order.insert(entry.tick, name.clone());
            }
        }
        self.evict();
        taken
    }

    pub(crate) fn dirty_bytes(&self) -> u64 {
        self.dirty_bytes
    }

    pub(crate) fn used_bytes(&self) -> u64 {
        self.used_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_evicts_least_recently_used_clean_entries_only() {
        let table = TableId(0);
        let one = entry_bytes(&[1], &[0; 10]);
        let mut cache = Cache::new(3 * one);
        cache.put(table, &[1], vec![0; 10], false);
        cache.put(table, &[2], vec![0; 10], true);
        cache.put(table, &[3], vec![0; 10], false);
        assert!(cache.get(table, &[1]).is_some());
        cache.put(table, &[4], vec![0; 10], false);
        // 3 was least recently used among the clean ones; 2 is dirty and stays.
        assert!(cache.peek(table, &[3]).is_none());
        assert!(cache.peek(table, &[2]).is_some());
        assert!(cache.peek(table, &[1]).is_some());
        assert_eq!(cache.evictions, 1);
        assert_eq!(cache.used_bytes(), 3 * one);
        let dirty = cache.take_dirty(usize::MAX);
        assert_eq!(dirty.len(), 1);
        assert_eq!(cache.dirty_bytes(), 0);
    }
}
