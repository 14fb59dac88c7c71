//! Free space: GC until the pool can supply a flush and the reserves.

use kvssd_flash::SimTime;
use kvssd_space::{Space, Stream};

use super::{Admission, HashError, HashIndex, Result};
use crate::EngineError;

impl HashIndex {
    /// Runs GC until the free pool can supply `data_pages` and `meta_pages` plus the reserves, or
    /// fails with [`EngineError::CapacityExceeded`] if GC cannot free enough.
    pub(super) fn ensure_space(
        &mut self,
        space: &mut Space,
        at: SimTime,
        data_pages: u64,
        meta_pages: u64,
        admission: Admission,
    ) -> Result<SimTime> {
        let namespace = self.config.namespace;
        let mut t = at;
        let mut rounds = 0u64;
        let mut meta_only = false;
        loop {
            let needed = space.blocks_needed(namespace, Stream::Data, data_pages)
                + space.blocks_needed(namespace, Stream::Meta, meta_pages);
            let hard = needed
                + space.gc_reserve_for(namespace)
                + if admission == Admission::Put {
                    u64::from(self.config.delete_reserve_blocks)
                } else {
                    0
                };
            let soft = hard.max(self.gc_threshold(space));
            let free = space.free_blocks_for(namespace);
            if free >= soft {
                return Ok(t);
            }
            rounds += 1;
            let victim = if rounds > space.geometry().blocks_total() {
                None
            } else {
                space.pick_victim_with(Some(namespace), |stream, _| {
                    !meta_only || stream == Stream::Meta
                })
            };
            let Some(victim) = victim else {
                if free >= hard {
                    return Ok(t);
                }
                return Err(EngineError::CapacityExceeded(
                    "GC cannot free the blocks this write needs",
                )
                .into());
            };
            match self.collect(space, t, victim)? {
                Some(done) => {
                    t = done;
                    meta_only = false;
                }
                None => meta_only = true,
            }
        }
    }

    /// GC starts when the namespace's free pool falls below this many blocks: the configured
    /// threshold, or the reserves plus a block per log and two (for a namespace confined to its
    /// logs' dies, its share of the GC reserve and its own logs).
    pub(super) fn gc_threshold(&self, space: &Space) -> u64 {
        if self.config.gc_threshold_blocks > 0 {
            return u64::from(self.config.gc_threshold_blocks);
        }
        let namespace = self.config.namespace;
        space.gc_reserve_for(namespace)
            + u64::from(self.config.delete_reserve_blocks)
            + space.logs_for(namespace)
            + 2
    }

    /// Collects blocks while the free pool is below the GC threshold (never fails for lack of
    /// victims: the threshold is a wish, the reserves are the requirement).
    pub(super) fn background_gc(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        if space.free_blocks_for(self.config.namespace) >= self.gc_threshold(space) {
            return Ok(at);
        }
        match self.ensure_space(space, at, 0, 0, Admission::Reserve) {
            Ok(t) => Ok(t),
            Err(HashError::Engine(EngineError::CapacityExceeded(_))) => Ok(at),
            Err(error) => Err(error),
        }
    }
}
