//! Flushes prepared away from the device's lock (file media): the costly part of a flush, copying
//! and sealing every value into data pages, runs while commands go on, and only placing the pages
//! and merging the keys into L1 run under the lock.
//!
//! [`LsmTree::detach_flush`] hands out L0 as it is (shared, so commands keep writing to it; the
//! first write after copies its map) with what packing needs of the space layer.
//! [`DetachedFlush::prepare`] packs the values onto pages without any lock.
//! [`LsmTree::attach_flush`] then flushes the pairs that are still L0's newest versions: it
//! programs the packed pages, merges their entries into L1, removes the pairs from L0 and keeps
//! what was written since. A pair overwritten or deleted meanwhile stays in L0; its record, packed
//! beside others, is written as garbage and never counted valid. A flush of L0 made meanwhile
//! (L0 filled up, a checkpoint, GC) makes the prepared one moot: it is dropped unprogrammed.
//!
//! Nothing here changes what a crash can lose: the pages are placed and the index changed in one
//! step under the lock, as a flush inside a command does, and the pairs stay in L0 (and in the
//! log) until then.

use std::sync::Arc;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{PackedRecords, RecordPacker, Space};

use super::segment::{Entry, Key, TOMBSTONE};
use super::write::CHECKPOINT_FLUSH_SHARE;
use super::{Admission, L0Key, L0Map, L0Value, LsmTree, Result, Step};
use crate::EngineError;

/// A flush is prepared away from the lock once L0 holds this share (one over it) of its size, so
/// that it is usually placed before L0 fills up and a command would flush it itself.
pub(crate) const DETACHED_FLUSH_SHARE: u64 = 2;

/// A flush of one namespace's L0, its pages packed without the device's lock.
pub struct DetachedFlush {
    namespace: u32,
    /// L0's flush count when it was taken: any flush since makes this one moot.
    epoch: u64,
    pairs: Arc<L0Map>,
    packer: RecordPacker,
    packed: Option<PackedRecords>,
}

impl DetachedFlush {
    /// Packs the values onto data pages: what a flush spends most of its time on, run by the
    /// caller without its lock.
    pub fn prepare(&mut self) {
        let records = self.pairs.iter().filter_map(|(key, value)| {
            value
                .value
                .as_deref()
                .map(|bytes| (&key[..], bytes, value.from_gc))
        });
        self.packed = Some(self.packer.pack(records));
    }

    /// The namespace whose L0 this is.
    pub fn namespace(&self) -> u32 {
        self.namespace
    }
}

impl std::fmt::Debug for DetachedFlush {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetachedFlush")
            .field("namespace", &self.namespace)
            .field("epoch", &self.epoch)
            .field("pairs", &self.pairs.len())
            .field("prepared", &self.packed.is_some())
            .finish()
    }
}

/// Whether `now` is the version `taken` of a pair: the same value (shared, so compared by
/// address) or both tombstones, put by the same writer.
fn same_version(now: &L0Value, taken: &L0Value) -> bool {
    now.from_gc == taken.from_gc
        && match (&now.value, &taken.value) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
}

impl LsmTree {
    /// Whether L0 holds enough for a flush prepared away from the lock, and none is out.
    pub fn flush_detachable(&self) -> bool {
        self.detachable(DETACHED_FLUSH_SHARE)
    }

    fn detachable(&self, share: u64) -> bool {
        self.detached_epoch != Some(self.l0_epoch)
            && !self.l0.is_empty()
            && self.l0_bytes * share >= self.config.l0_bytes
    }

    /// L0 as it is, for a flush prepared away from the lock ([`DetachedFlush::prepare`], then
    /// [`LsmTree::attach_flush`]), if it holds half its size (a quarter `for_checkpoint`: what
    /// [`LsmTree::flush_before_checkpoint`] would flush) and no other is out.
    pub fn detach_flush(&mut self, space: &Space, for_checkpoint: bool) -> Option<DetachedFlush> {
        let share = if for_checkpoint {
            CHECKPOINT_FLUSH_SHARE
        } else {
            DETACHED_FLUSH_SHARE
        };
        if !self.detachable(share) {
            return None;
        }
        self.detached_epoch = Some(self.l0_epoch);
        Some(DetachedFlush {
            namespace: self.config.namespace,
            epoch: self.l0_epoch,
            pairs: Arc::clone(&self.l0),
            packer: space.record_packer(self.config.namespace),
            packed: None,
        })
    }

    /// Flushes the pairs of a prepared flush that are still L0's newest versions: programs its
    /// pages, merges their entries into L1 (and down, as a flush does), and keeps in L0 only
    /// what was written since; then runs background GC. A flush made meanwhile, a flush not
    /// prepared, or one refused for space leaves L0 as it is (a command flushes it when it
    /// fills). Returns when it finished.
    pub fn attach_flush(
        &mut self,
        space: &mut Space,
        at: SimTime,
        flush: DetachedFlush,
    ) -> Result<SimTime> {
        if self.detached_epoch == Some(flush.epoch) {
            self.detached_epoch = None;
        }
        self.released_detached.clear();
        let DetachedFlush {
            namespace,
            epoch,
            pairs,
            packed,
            ..
        } = flush;
        let Some(packed) = packed else {
            return Ok(at);
        };
        if epoch != self.l0_epoch || namespace != self.config.namespace {
            return Ok(at);
        }
        self.snapshot_cache = None;
        let step = Step::FlushPacked(packed.pages());
        let t = match self.ensure_space(space, at, step, Admission::Reserve) {
            Ok(t) => t,
            Err(EngineError::CapacityExceeded(_)) => return Ok(at),
            Err(error) => return Err(error),
        };
        // GC may have flushed L0 to make room.
        if epoch != self.l0_epoch {
            return Ok(t);
        }
        let (flushed, leftover) = self.split_l0(&pairs);
        let live: Vec<bool> = pairs
            .values()
            .zip(&flushed)
            .filter(|(value, _)| value.value.is_some())
            .map(|(_, &flushed)| flushed)
            .collect();
        let (pointers, written) = space.program_packed(t, packed, &live)?;
        let mut done = written;
        let mut entries = Vec::with_capacity(pointers.len());
        let mut records = pointers.into_iter();
        for ((key, value), &flushed) in pairs.iter().zip(&flushed) {
            let pointer = match &value.value {
                Some(bytes) => {
                    let pointer = records.next().flatten();
                    if !flushed {
                        continue;
                    }
                    self.cpu_pending.bytes_copied += (key.len() + bytes.len()) as u64;
                    let pointer = match pointer {
                        Some(pointer) => pointer,
                        None => {
                            let purpose = if value.from_gc {
                                Purpose::Gc
                            } else {
                                Purpose::UserData
                            };
                            let (pointer, finished) =
                                space.append_record(t, purpose, namespace, key, bytes)?;
                            done = done.max(finished);
                            pointer
                        }
                    };
                    pointer.raw()
                }
                None if flushed => TOMBSTONE,
                None => continue,
            };
            entries.push(Entry {
                key: Key::from_slice(key),
                pointer,
                value_len: value.value.as_ref().map_or(0, |bytes| bytes.len() as u32),
                from_gc: false,
            });
        }
        // What was written since stays in L0; the rest is freed after the caller's lock.
        self.l0_bytes = leftover
            .iter()
            .map(|(key, value)| Self::l0_pair_bytes(key, value.value.as_deref()))
            .sum();
        self.l0_key_bytes = leftover.iter().map(|(key, _)| key.len() as u64).sum();
        let old = std::mem::replace(&mut self.l0, Arc::new(leftover.into_iter().collect()));
        self.l0_epoch += 1;
        self.released_detached.push(old);
        self.released_detached.push(pairs);
        let t = self.charge(space, done);
        let t = self.merge_into(space, t, entries, 0)?;
        self.activity.flushes += 1;
        self.activity.flushes_detached += 1;
        let t = self.compact(space, t)?;
        let t = self.gc_in_background(space, t)?;
        Ok(self.charge(space, t))
    }

    /// For each pair taken, whether L0 still holds that version of it; and L0's other pairs
    /// (those written since), in key order.
    fn split_l0(&self, taken: &L0Map) -> (Vec<bool>, Vec<(L0Key, L0Value)>) {
        let mut flushed = Vec::with_capacity(taken.len());
        let mut leftover = Vec::new();
        let mut current = self.l0.iter().peekable();
        for (key, value) in taken {
            while let Some((now_key, now)) = current.next_if(|(now_key, _)| *now_key < key) {
                leftover.push((now_key.clone(), now.clone()));
            }
            let same = match current.next_if(|(now_key, _)| *now_key == key) {
                Some((now_key, now)) => {
                    let same = same_version(now, value);
                    if !same {
                        leftover.push((now_key.clone(), now.clone()));
                    }
                    same
                }
                None => false,
            };
            flushed.push(same);
        }
        leftover.extend(current.map(|(key, value)| (key.clone(), value.clone())));
        (flushed, leftover)
    }
}
