//! Namespaces confined to their logs' dies (KAML §IV-E: "a list of erased flash blocks for each
//! log"): a confined namespace takes free blocks only from the dies of its logs, so its data, its
//! free pool, its GC reserve and its share of the capacity are those dies'. An unconfined namespace
//! (the default) may borrow any die's block when its own run out, and sees the device's pool.
//!
//! Every query here answers for an unconfined namespace exactly what the device-wide query
//! answers ([`Space::free_blocks`], [`Space::valid_bytes`], ...), so an engine may call these
//! unconditionally.

use crate::Space;

impl Space {
    /// Confines `namespace` to the dies of its logs (`true`) or lets it borrow other dies' blocks
    /// (`false`, the default). A setting of the namespace, not saved with the layer's state: the
    /// engine that owns the namespace sets it again when it is reopened.
    pub fn set_namespace_confined(&mut self, namespace: u32, confined: bool) {
        if confined {
            self.confined.insert(namespace);
        } else {
            self.confined.remove(&namespace);
        }
    }

    /// Whether `namespace` is confined to its logs' dies.
    pub fn is_confined(&self, namespace: u32) -> bool {
        self.confined.contains(&namespace)
    }

    /// The dies a confined namespace may take blocks from (its logs' dies, sorted); `None` for an
    /// unconfined one.
    pub(crate) fn confined_dies(&self, namespace: u32) -> Option<Vec<u32>> {
        if !self.is_confined(namespace) {
            return None;
        }
        let logs: Vec<usize> = match self.writers.get(&namespace) {
            Some(writer) => writer.cursors.iter().map(|cursor| cursor.log).collect(),
            None => (0..self.logs.len()).collect(),
        };
        let mut dies: Vec<u32> = logs
            .iter()
            .flat_map(|&log| self.logs[log].dies.iter().copied())
            .collect();
        dies.sort_unstable();
        dies.dedup();
        Some(dies)
    }

    /// Share of the device a namespace may use, as (its dies, all dies).
    fn die_share(&self, namespace: u32) -> (u64, u64) {
        let all = u64::from(self.geometry.dies());
        match self.confined_dies(namespace) {
            Some(dies) => (dies.len() as u64, all),
            None => (all, all),
        }
    }

    /// Free blocks `namespace` may take: on its dies when confined, else the whole pool.
    pub fn free_blocks_for(&self, namespace: u32) -> u64 {
        match self.confined_dies(namespace) {
            Some(dies) => dies
                .iter()
                .map(|&die| self.free_by_die[die as usize].len() as u64)
                .sum(),
            None => self.free_count,
        }
    }

    /// Valid bytes that count against `namespace`'s capacity: its own when confined (its dies hold
    /// nothing else), else the device's.
    pub fn valid_bytes_for(&self, namespace: u32) -> u64 {
        if self.is_confined(namespace) {
            self.namespace_valid_bytes(namespace)
        } else {
            self.valid_bytes_total
        }
    }

    /// Bytes of user data `namespace` may hold: its dies' share of
    /// [`Space::user_capacity_bytes`] when confined, else all of it.
    pub fn user_capacity_for(&self, namespace: u32) -> u64 {
        let (mine, all) = self.die_share(namespace);
        let capacity = self.user_capacity_bytes();
        if mine == all {
            capacity
        } else {
            capacity / all * mine
        }
    }

    /// The GC reserve of `namespace`: its dies' share of [`crate::SpaceConfig::gc_reserve_blocks`]
    /// (rounded up) when confined, else all of it.
    pub fn gc_reserve_for(&self, namespace: u32) -> u64 {
        let (mine, all) = self.die_share(namespace);
        let reserve = u64::from(self.config.gc_reserve_blocks);
        if mine == all {
            reserve
        } else {
            (reserve * mine).div_ceil(all)
        }
    }

    /// Logs `namespace` writes to when confined; the device's logs otherwise.
    pub fn logs_for(&self, namespace: u32) -> u64 {
        match (self.is_confined(namespace), self.writers.get(&namespace)) {
            (true, Some(writer)) => writer.cursors.len() as u64,
            _ => u64::from(self.config.logs),
        }
    }
}
