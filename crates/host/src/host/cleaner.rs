//! The conventional path's page cleaner and checkpoints: a background round of the cleaner at a
//! commit (the records the oldest log records changed, with the rest of their pages: see the
//! policy in `conventional::cleaner`), and a full checkpoint that writes every dirty record and
//! then the log's anchor.

use kvssd_flash::SimTime;

use super::{note_evictions, Host};
use crate::error::Result;
use crate::types::TableId;

/// Which dirty records the conventional path's page cleaner writes.
enum Clean<'a> {
    /// Every one (a full checkpoint).
    All,
    /// These, with the other dirty records of the pages the cache holds whole among theirs.
    Pages(&'a [(TableId, Vec<u8>)]),
}

impl Host {
    /// Conventional path: writes every dirty record back and then the log's anchor, truncating
    /// the whole log (a final checkpoint), issued at `at`.
    pub fn checkpoint(&mut self, at: SimTime) -> Result<()> {
        self.full_checkpoint(at).map(|_| ())
    }

    /// Writes every dirty record back, then the anchor; returns when the anchor is durable.
    pub(super) fn full_checkpoint(&mut self, at: SimTime) -> Result<SimTime> {
        let done = self.clean(at, Clean::All)?;
        match &mut self.conventional {
            Some(conventional) => {
                self.stats.device_commands += 1;
                conventional.cleaner_busy_until(done);
                conventional.anchor(&self.device, done)
            }
            None => Ok(at),
        }
    }

    /// Conventional path, after a commit at `at`: starts a round of the page cleaner if one is
    /// due, in the background (the commit does not wait for it).
    pub(super) fn clean_in_background(&mut self, at: SimTime) -> Result<()> {
        let Some(conventional) = &self.conventional else {
            return Ok(());
        };
        let names = conventional.cleaner_round(at, self.cache.dirty_bytes());
        if names.is_empty() {
            return Ok(());
        }
        let done = self.clean(at, Clean::Pages(&names))?;
        if let Some(conventional) = &mut self.conventional {
            conventional.cleaner_busy_until(done);
        }
        Ok(())
    }

    /// Conventional path: the page cleaner writes the dirty records `which` names and every
    /// deletion into their pages, issued at `at`; returns when they are written.
    fn clean(&mut self, at: SimTime, which: Clean<'_>) -> Result<SimTime> {
        let Some(conventional) = &mut self.conventional else {
            return Ok(at);
        };
        let dirty = match which {
            Clean::All => self.cache.take_dirty(usize::MAX),
            Clean::Pages(names) => {
                let names = conventional.with_page_mates(&self.tables, names);
                self.cache.take_dirty_named(&names)
            }
        };
        note_evictions(&mut self.cache, conventional, &self.tables);
        let cache = &self.cache;
        let cached = |table: TableId, key: &[u8]| cache.peek(table, key).map(<[u8]>::to_vec);
        let (done, commands) =
            conventional.checkpoint(&self.device, at, &self.tables, &dirty, &cached)?;
        self.stats.device_commands += commands;
        self.stats.checkpoints += 1;
        Ok(done)
    }
}
