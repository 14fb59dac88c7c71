//! The page cleaner's policy: which dirty records a round writes, and when a round may start.
//!
//! The cleaner is one background writer with one round in flight, as Shore-MT's page cleaner
//! is a thread that writes a batch of pages and waits for it: a commit starts a round only once
//! the previous round's writes are done on the simulated clock (unless the log still needed
//! fills more than three quarters of the ring, when every commit starts one). A round writes
//! the records the oldest log records changed:
//!
//! * every record whose oldest unwritten change is further back in the log than
//!   `clean_log_share` of the ring, so the log still needed stays near that share and a commit
//!   rarely finds the ring full of it (the synchronous full checkpoint is the last resort);
//! * while dirty records take more than `checkpoint_dirty_bytes` of the cache, at least
//!   `clean_records_per_commit` of them (so a bounded cache has clean records to evict).
//!
//! A page the cache holds whole is written whole, so every dirty record in it is written with
//! the one the round chose ([`Conventional::with_page_mates`]), as a buffer pool writes pages,
//! not records.

use std::collections::BTreeSet;

use kvssd_flash::SimTime;

use super::Conventional;
use crate::host::Table;
use crate::locks::record_number;
use crate::TableId;

impl Conventional {
    /// Log blocks the cleaner lets the log still needed grow to before it writes the records
    /// the oldest of them changed.
    fn clean_log_blocks(&self) -> u64 {
        (self.config.log_blocks as f64 * self.config.clean_log_share) as u64
    }

    /// Whether more than three quarters of the ring hold records still needed: the cleaner then
    /// starts a round at every commit, without waiting for the previous one.
    fn log_pressed(&self) -> bool {
        self.log_head
            .saturating_sub(self.oldest_needed())
            .saturating_mul(4)
            > self.config.log_blocks.saturating_mul(3)
    }

    /// The LSN of the oldest log record a dirty record still needs (the head if none).
    fn oldest_needed(&self) -> u64 {
        self.dirty_lsns
            .first_key_value()
            .map_or(self.log_head, |(&oldest, _)| oldest)
    }

    /// The records the cleaner's round at `at` writes (empty: no round), oldest changes first,
    /// given the bytes dirty records take in the cache.
    pub(crate) fn cleaner_round(&self, at: SimTime, dirty_bytes: u64) -> Vec<(TableId, Vec<u8>)> {
        if self.cleaner_free_at > at && !self.log_pressed() {
            return Vec::new();
        }
        let target = self.log_head.saturating_sub(self.clean_log_blocks());
        let at_least = if dirty_bytes > self.config.checkpoint_dirty_bytes {
            self.config.clean_records_per_commit.max(1)
        } else {
            0
        };
        let mut names = Vec::new();
        for (&lsn, records) in &self.dirty_lsns {
            if lsn >= target && names.len() >= at_least {
                break;
            }
            names.extend(records.iter().cloned());
        }
        names
    }

    /// The cleaner's round writes until `done`: no other round starts before then.
    pub(crate) fn cleaner_busy_until(&mut self, done: SimTime) {
        self.cleaner_free_at = self.cleaner_free_at.max(done);
    }

    /// `names` and every other record of the pages the cache holds whole among theirs (a page
    /// written whole writes them all), in key order.
    pub(crate) fn with_page_mates(
        &self,
        tables: &[Table],
        names: &[(TableId, Vec<u8>)],
    ) -> Vec<(TableId, Vec<u8>)> {
        let mut all: BTreeSet<(TableId, Vec<u8>)> = names.iter().cloned().collect();
        let mut pages = BTreeSet::new();
        for (table, key) in names {
            let Some(info) = tables.get(table.0 as usize) else {
                continue;
            };
            let per_page = self.records_per_page(info.value_bytes_max).max(1) as u64;
            let (prefix, number) = record_number(key);
            let index = number / per_page;
            let name = (*table, prefix.to_vec(), index);
            let whole = self
                .pages
                .get(&name)
                .is_some_and(|lba| self.resident.contains(lba));
            if !whole || !pages.insert(name) {
                continue;
            }
            for number in index * per_page..(index + 1) * per_page {
                let mut mate = prefix.to_vec();
                mate.extend_from_slice(&number.to_be_bytes());
                all.insert((*table, mate));
            }
        }
        all.into_iter().collect()
    }
}
