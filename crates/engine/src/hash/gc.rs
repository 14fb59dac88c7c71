//! Garbage collection for the hash engines (PinK §2.3 baseline, KAML §IV-E).
//!
//! * Bucket-page victim (`hash` only): a page is live if the directory points at it; live pages
//!   are copied to a fresh meta page and the directory fixed. Cached copies stay valid (same
//!   bytes).
//! * Data victim: a record is live if its key's probe window holds a slot with its exact pointer
//!   (the pointer carries the block's erase generation, so no other record can share it). Live
//!   records are appended again and their slots updated. Liveness checks *peek* at bucket pages
//!   without caching them, so checking never evicts or writes back; the pages that change are then
//!   updated in the cache (resident ones) or installed into it as dirty.
//! * Before relocating, GC checks the free pool can take the rewritten values and the write-backs
//!   the installs may cause; if not it leaves the victim alone (and the caller tries a bucket-page
//!   victim instead, which frees blocks without needing data pages).

use std::collections::BTreeMap;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{RecordPointer, Space, Stream, Victim, VictimRecord};

use super::bucket::{self, Slot, Slots};
use super::{HashIndex, Result};

impl HashIndex {
    /// Collects one victim block: relocates what is live, then erases it. `None` when the free pool
    /// cannot take the relocation (the victim is left as it was).
    pub(super) fn collect(
        &mut self,
        space: &mut Space,
        at: SimTime,
        victim: u64,
    ) -> Result<Option<SimTime>> {
        let namespace = self.config.namespace;
        let (contents, mut t) = space.read_victim(at, victim)?;
        match contents {
            Victim::Meta(pages) => {
                let mut live = Vec::new();
                for (page, bytes) in pages {
                    if let Some(number) = self.table.owner_of(page, &bytes)? {
                        live.push((number, bytes));
                    }
                }
                let needed = space.blocks_needed(namespace, Stream::Meta, live.len() as u64);
                if needed > space.free_blocks_for(namespace) {
                    self.activity.gc_victims_skipped += 1;
                    return Ok(None);
                }
                let mut done = t;
                for (number, bytes) in live {
                    let (moved, finished) = space.write_meta(t, Purpose::Gc, namespace, &bytes)?;
                    done = done.max(finished);
                    self.table.relocate(number, moved);
                    self.activity.gc_bucket_pages_moved += 1;
                }
                t = done;
                self.activity.gc_meta_victims += 1;
            }
            Victim::Data(records) => {
                // Pages read for the check and not resident, kept so they are read only once.
                let mut peeked: BTreeMap<u64, Vec<Slot>> = BTreeMap::new();
                let mut live: Vec<(VictimRecord, u64, usize, bool)> = Vec::new();
                for record in records {
                    if record.namespace != namespace {
                        continue;
                    }
                    let hash = self.hash_of(&record.key);
                    let home = bucket::home_slot(hash, self.table.total_slots());
                    let mut found = None;
                    self.activity.gc_records_checked += 1;
                    'window: for (page, start, count) in self.table.window(home, self.probe_slots) {
                        // Borrow the page's slots where they are (the resident page, or the copy
                        // peeked once for this victim): copying them per record made the check
                        // quadratic in the table size for `kaml`, whose whole table is one page.
                        let resident = self.table.is_resident(page);
                        if !resident && !peeked.contains_key(&page) {
                            let (slots, done, _) = self.table.peek(space, t, page, Purpose::Gc)?;
                            t = t.max(done);
                            self.activity.gc_slots_copied += slots.len() as u64;
                            peeked.insert(page, slots);
                        }
                        let slots = if resident {
                            self.table
                                .resident(space, page)
                                .unwrap_or(Slots::Decoded(&[]))
                        } else {
                            Slots::Decoded(peeked.get(&page).map_or(&[], Vec::as_slice))
                        };
                        let end = (start + count).min(slots.len());
                        for offset in start..end {
                            let Some(slot) = slots.get(offset) else {
                                break;
                            };
                            self.activity.gc_slots_examined += 1;
                            if slot.is_empty() {
                                break 'window;
                            }
                            if slot.pointer == record.pointer.raw() {
                                found = Some((page, offset, resident));
                                break 'window;
                            }
                        }
                    }
                    if let Some((page, offset, resident)) = found {
                        live.push((record, page, offset, resident));
                    }
                }
                let installs = live
                    .iter()
                    .filter(|(_, _, _, resident)| !resident)
                    .map(|(_, page, _, _)| *page)
                    .collect::<std::collections::BTreeSet<u64>>()
                    .len() as u64;
                let data_pages = space.data_pages_needed(
                    namespace,
                    live.iter()
                        .map(|(record, _, _, _)| (record.key.len(), record.value_len as usize)),
                );
                let needed = space.blocks_needed(namespace, Stream::Data, data_pages)
                    + space.blocks_needed(namespace, Stream::Meta, installs);
                if needed > space.free_blocks_for(namespace) {
                    self.activity.gc_victims_skipped += 1;
                    return Ok(None);
                }
                t = self.charge(space, t);
                let issue = t;
                let mut done = t;
                let mut moved: Vec<(u64, usize, bool, u64)> = Vec::with_capacity(live.len());
                for (record, page, offset, resident) in live {
                    let value = match record.value {
                        Some(value) => value,
                        None => {
                            let (whole, read) =
                                space.read_record(issue, record.pointer, Purpose::Gc)?;
                            done = done.max(read);
                            whole.value
                        }
                    };
                    let (pointer, written): (RecordPointer, SimTime) =
                        space.append_record(done, Purpose::Gc, namespace, &record.key, &value)?;
                    self.cpu_pending.bytes_copied += (record.key.len() + value.len()) as u64;
                    if self.config.key_in_slot {
                        self.record_lengths.remove(&record.pointer.raw());
                        self.record_lengths
                            .insert(pointer.raw(), value.len() as u32);
                    }
                    t = t.max(written);
                    moved.push((page, offset, resident, pointer.raw()));
                    self.activity.gc_records_rewritten += 1;
                }
                t = t.max(done);
                // Resident pages first: installs may evict them.
                for &(page, offset, resident, pointer) in &moved {
                    if resident {
                        let signature = self
                            .table
                            .resident(space, page)
                            .and_then(|slots| slots.get(offset))
                            .map_or(0, |slot| slot.signature);
                        let slot = Slot { signature, pointer };
                        t = self.table.set(space, t, page, offset, slot, Purpose::Gc)?;
                    } else if let Some(slot) = peeked
                        .get_mut(&page)
                        .and_then(|slots| slots.get_mut(offset))
                    {
                        slot.pointer = pointer;
                    }
                }
                let changed: std::collections::BTreeSet<u64> = moved
                    .iter()
                    .filter(|(_, _, resident, _)| !resident)
                    .map(|(page, _, _, _)| *page)
                    .collect();
                for page in changed {
                    if let Some(slots) = peeked.remove(&page) {
                        if self.table.is_resident(page) {
                            // Loaded again meanwhile (only when a resident update reloaded it):
                            // update it in place instead.
                            for &(moved_page, offset, _, pointer) in &moved {
                                if moved_page == page {
                                    let signature = slots.get(offset).map_or(0, |s| s.signature);
                                    let slot = Slot { signature, pointer };
                                    t = self.table.set(
                                        space,
                                        t,
                                        page,
                                        offset,
                                        slot,
                                        Purpose::Gc,
                                    )?;
                                }
                            }
                        } else {
                            self.table.install(space, t, page, slots, Purpose::Gc)?;
                        }
                    }
                }
                self.activity.gc_data_victims += 1;
            }
        }
        t = self.charge(space, t);
        // The durability layer checkpoints before erasing a block a checkpoint may reach: publish
        // the index as it is now, without the victim, so that checkpoint cannot reach it either.
        if space.wants_parts() {
            let state = self.durable_state();
            space.publish_part(namespace, state);
        }
        Ok(Some(space.erase_victim(t, victim)?))
    }
}
