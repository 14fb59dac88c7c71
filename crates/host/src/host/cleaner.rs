//! The conventional path's page cleaner and checkpoints: dirty records written into their
//! pages (in key order, or those the oldest log records changed, to truncate the log), and a
//! full checkpoint that writes them all and then the log's anchor.

use kvssd_flash::SimTime;

use super::{note_evictions, Host};
use crate::error::Result;
use crate::types::TableId;

/// Which dirty records the conventional path's page cleaner writes.
pub(super) enum Clean<'a> {
    /// Up to this many, in key order (records of one page together).
    KeyOrder(usize),
    /// These (those the oldest log records changed, to truncate the log).
    Named(&'a [(TableId, Vec<u8>)]),
}

impl Host {
    /// Conventional path: writes every dirty record back and then the log's anchor, truncating
    /// the whole log (a final checkpoint), issued at `at`.
    pub fn checkpoint(&mut self, at: SimTime) -> Result<()> {
        self.full_checkpoint(at).map(|_| ())
    }

    /// Writes every dirty record back, then the anchor; returns when the anchor is durable.
    pub(super) fn full_checkpoint(&mut self, at: SimTime) -> Result<SimTime> {
        let done = self.clean(at, Clean::KeyOrder(usize::MAX))?;
        match &mut self.conventional {
            Some(conventional) => {
                self.stats.device_commands += 1;
                conventional.anchor(&self.device, done)
            }
            None => Ok(at),
        }
    }

    /// Conventional path: the page cleaner writes the dirty records `which` names and every
    /// deletion into their pages, issued at `at`; returns when they are written.
    pub(super) fn clean(&mut self, at: SimTime, which: Clean<'_>) -> Result<SimTime> {
        let Some(conventional) = &mut self.conventional else {
            return Ok(at);
        };
        let dirty = match which {
            Clean::KeyOrder(records) => self.cache.take_dirty(records),
            Clean::Named(names) => self.cache.take_dirty_named(names),
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
