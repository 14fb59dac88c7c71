//! Garbage collection for the `block` FTL: a slot of a victim page is live when the mapping entry
//! of its owner (the LBA written there) still names the slot. Live blocks are packed into new pages
//! and their entries updated; one array lookup per slot, whatever the logical space's size.

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{Space, Stream, Victim};

use super::{BlockIndex, UNMAPPED};
use crate::contract::Result;

impl BlockIndex {
    /// The block this FTL's GC would collect next among its namespace's, if any.
    pub fn gc_candidate(&self, space: &Space) -> Option<u64> {
        space.pick_victim_with(Some(self.config.namespace), |_, _| true)
    }

    /// Collects one victim block: relocates what is live, then erases it. `None` when the free
    /// pool cannot take the relocation (the victim is left as it was).
    pub fn collect(
        &mut self,
        space: &mut Space,
        at: SimTime,
        victim: u64,
    ) -> Result<Option<SimTime>> {
        let namespace = self.config.namespace;
        let block = self.config.logical_block_bytes as usize;
        let (contents, t) = space.read_victim(at, victim)?;
        // This FTL writes whole pages on the meta stream only; a data block of its namespace holds
        // nothing it references.
        let pages = match contents {
            Victim::Meta(pages) => pages,
            Victim::Data(_) => Vec::new(),
        };
        let mut live: Vec<(u64, Vec<u8>)> = Vec::new();
        for (page, bytes) in &pages {
            for place in 0..self.blocks_per_page {
                let slot = page.0 * self.blocks_per_page + place;
                let owner = self.owners.get(slot as usize).copied().unwrap_or(UNMAPPED);
                if owner == UNMAPPED || self.map.get(owner as usize) != Some(&slot) {
                    continue;
                }
                let start = place as usize * block;
                if let Some(data) = bytes.get(start..start + block) {
                    live.push((owner, data.to_vec()));
                }
            }
        }
        let needed = space.blocks_needed(
            namespace,
            Stream::Meta,
            (live.len() as u64).div_ceil(self.blocks_per_page),
        );
        if needed > space.free_blocks() {
            self.activity.gc_victims_skipped += 1;
            return Ok(None);
        }
        let mut done = t;
        for page in live.chunks(self.blocks_per_page as usize) {
            done = done.max(self.write_blocks(space, t, Purpose::Gc, page)?);
            self.activity.gc_records_rewritten += page.len() as u64;
        }
        // Every slot of the victim is free once it is erased.
        for (page, _) in &pages {
            let first = (page.0 * self.blocks_per_page) as usize;
            if let Some(owners) = self
                .owners
                .get_mut(first..first + self.blocks_per_page as usize)
            {
                owners.fill(UNMAPPED);
            }
        }
        self.activity.gc_data_victims += 1;
        let t = self.charge(space, done);
        // The durability layer checkpoints before erasing a block a checkpoint may reach: publish
        // the map as it is now, without the victim, so that checkpoint cannot reach it either.
        if space.wants_parts() {
            let state = self.durable_state();
            space.publish_part(namespace, state);
        }
        Ok(Some(space.erase_victim(t, victim)?))
    }
}
