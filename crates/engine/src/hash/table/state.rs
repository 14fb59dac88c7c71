//! A table's DRAM state for checkpoints and power-loss dumps, and its restoration.

use kvssd_space::PageIndex;

use super::{CachedPage, Storage, Table};
use crate::hash::bucket::{self, Slot, Slots};
use crate::hash::{HashError, Result};

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
                    .by_page()
                    .into_iter()
                    .filter(|(_, page)| page.dirty)
                    .filter_map(|(number, page)| {
                        // A dirty page holds its bytes: a change copies them out first.
                        debug_assert!(page.bytes.is_some(), "dirty page {number} holds no bytes");
                        let bytes = page.bytes.as_deref()?;
                        let slots = bucket::slots_in(bytes, self.slots_per_page, self.bits);
                        Some((number, used_slots(slots)))
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
                    let cached = CachedPage {
                        bytes: Some(bucket::encode(&slots, *number, 0, bits, page_bytes)),
                        dirty: true,
                        read_ahead: false,
                    };
                    if !cache.insert(*number, cached) {
                        return Err(malformed("saved page listed twice"));
                    }
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
}
