//! Reads: probe windows, GETs, presence checks, and the refused scan.

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{PageIndex, Record, RecordPointer, Space};

use super::bucket;
use super::bucket::{Slot, Slots};
use super::{HashError, HashIndex, Hit, Probe, ProbeFor, Result};

/// Slots a probe reads from its bucket page at a time.
const PROBE_RUN: usize = 8;

impl HashIndex {
    /// Walks a key's probe window for `intent`, reading a matching slot's record (unless the slot
    /// holds the key, the record's length is known and `intent` is not a GET: then the hit's
    /// record has the key and no value). Returns what it found, when, and the bucket pages and
    /// records it read.
    pub(super) fn probe(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        hash: u64,
        intent: ProbeFor,
    ) -> Result<(Probe, SimTime, u32, u32)> {
        let wait_for_record = intent == ProbeFor::Get;
        let data_purpose = match intent {
            ProbeFor::Get | ProbeFor::Change => Purpose::UserData,
            ProbeFor::Presence => Purpose::Index,
        };
        let signature = bucket::signature(hash, self.config.signature_bits);
        let home = bucket::home_slot(hash, self.table.total_slots());
        let runs = self.table.window(home, self.probe_slots);
        let reads_before = self.table.counts.page_reads;
        let mut records = 0;
        let mut t = at;
        let mut free = None;
        for (page, start, count) in runs {
            t = self
                .table
                .load(space, t, page, Purpose::Index, intent == ProbeFor::Change)?;
            let outside = || HashError::MalformedBucket {
                page,
                what: "probe window outside the bucket page",
            };
            // A few slots at a time, not a copy of the window: a probe usually stops a few slots
            // into a window that may span the page, and nothing in the loop changes the table.
            let mut run = [Slot::EMPTY; PROBE_RUN];
            let mut run_start = start;
            for offset in start..start + count {
                if offset == start || offset - run_start == PROBE_RUN {
                    run_start = offset;
                    let length = (start + count - offset).min(PROBE_RUN);
                    let read = self.table.resident(space, page).is_some_and(|slots| {
                        slots.len() >= start + count && slots.read_run(offset, &mut run[..length])
                    });
                    if !read {
                        return Err(outside());
                    }
                }
                let slot = run[offset - run_start];
                if slot.is_empty() {
                    free.get_or_insert((page, offset));
                    let reads = (self.table.counts.page_reads - reads_before) as u32;
                    return Ok((Probe { hit: None, free }, t, reads, records));
                }
                if slot.is_tombstone() {
                    free.get_or_insert((page, offset));
                    continue;
                }
                if slot.signature != signature {
                    continue;
                }
                t = self.charge(space, t);
                let pointer = RecordPointer::from_raw(slot.pointer);
                // With the key in the slot the match is the key: a put or presence check needs
                // only the replaced record's length, which DRAM holds, so it reads nothing.
                let known_len = self.record_lengths.get(&slot.pointer).copied();
                let (record, value_len, same) = match known_len {
                    Some(len) if self.config.key_in_slot && !wait_for_record => {
                        let record = Record {
                            namespace: self.config.namespace,
                            key: key.to_vec(),
                            value: Vec::new(),
                        };
                        (record, len as usize, true)
                    }
                    _ => {
                        let (record, done) = space.read_record(t, pointer, data_purpose)?;
                        t = done;
                        records += 1;
                        let same = if self.config.key_in_slot {
                            debug_assert_eq!(record.key, key, "a 64-bit key in the slot matched");
                            true
                        } else {
                            self.cpu_pending.compare(&record.key, key);
                            record.key == key
                        };
                        let len = record.value.len();
                        (record, len, same)
                    }
                };
                if same {
                    let reads = (self.table.counts.page_reads - reads_before) as u32;
                    let hit = Hit {
                        page,
                        offset,
                        pointer,
                        record,
                        value_len,
                    };
                    return Ok((
                        Probe {
                            hit: Some(hit),
                            free,
                        },
                        t,
                        reads,
                        records,
                    ));
                }
                self.activity.signature_collisions += 1;
            }
        }
        let reads = (self.table.counts.page_reads - reads_before) as u32;
        Ok((Probe { hit: None, free }, t, reads, records))
    }

    /// Reads the value of `key`, or `None` if it has none (never stored or deleted). Returns when
    /// the value is at the controller.
    pub fn get(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, SimTime)> {
        self.check_key(key)?;
        self.cpu_pending.key_comparisons += 1;
        let hash = self.key_hash(key);
        let buffered = self.buffered_keys.may_hold(hash);
        let in_buffer = if buffered { self.buffer.get(key) } else { None };
        if let Some(value) = in_buffer {
            let value = value.clone();
            self.record_get(0, 0);
            return Ok((value, self.charge(space, at)));
        }
        // Asked whether or not the key may be buffered: the question retires the immutable
        // buffers whose flush has finished, which issues background work due by `at`.
        let flushing = {
            let mut immutable = self.flushing.visible(space, at);
            if buffered {
                immutable.find_map(|immutable| immutable.get(key)).cloned()
            } else {
                None
            }
        };
        if let Some(value) = flushing {
            self.record_get(0, 0);
            return Ok((value, self.charge(space, at)));
        }
        // What `hash_of` charges, for the hash made above.
        self.cpu_pending.bytes_hashed += key.len() as u64;
        let (probe, t, index_reads, records) = self.probe(space, at, key, hash, ProbeFor::Get)?;
        self.record_get(index_reads, records);
        let value = probe.hit.map(|hit| hit.record.value);
        Ok((value, self.charge(space, t)))
    }

    /// Warns the host's memory of GETs of `keys` about to be made. Where each key's bucket page
    /// is (its cache and directory entries) is asked for first, then the heads of the bucket
    /// pages they will read from flash and the lines of the first slots of each key's probe
    /// window ([`Space::prefetch_page_spans`]); those slots are then looked at where they lie,
    /// and the records whose slots match are fetched together ([`Space::prefetch_records`]):
    /// a few rounds of misses of host memory for the batch rather than a chain of them for each
    /// GET. Changes nothing the simulation sees: no time, counter, cache or state.
    pub fn prefetch_gets(&self, space: &Space, keys: &[&[u8]]) {
        /// Slots of each window looked at: a probe usually stops within a few.
        const PEEK_SLOTS: usize = 4;
        /// Bytes of a slot at most (a 64-bit signature and the pointer).
        const SLOT_BYTES_MAX: usize = 16;
        /// Where a GET of a warned key starts its probe.
        struct Start {
            page: u64,
            slot: usize,
            slots: usize,
            signature: u64,
            on_flash: Option<PageIndex>,
        }
        let total = self.table.total_slots();
        let bits = self.config.signature_bits;
        let width = bucket::slot_bytes(bits);
        let mut starts: Vec<Start> = keys
            .iter()
            .filter_map(|key| {
                let hash = self.key_hash(key);
                let home = bucket::home_slot(hash, total);
                let &(page, slot, slots) = self.table.window(home, self.probe_slots).first()?;
                self.table.prefetch_page_state(page);
                Some(Start {
                    page,
                    slot,
                    slots: slots.min(PEEK_SLOTS),
                    signature: bucket::signature(hash, bits),
                    on_flash: None,
                })
            })
            .collect();
        for start in &mut starts {
            start.on_flash = self.table.page_to_read(start.page);
        }
        space.prefetch_page_spans(starts.iter().filter_map(|start| {
            let page = start.on_flash?;
            Some((
                page,
                bucket::HEADER_BYTES + start.slot * width,
                start.slots * width,
            ))
        }));
        let mut peeked = [0u8; PEEK_SLOTS * SLOT_BYTES_MAX];
        let mut pointers = Vec::with_capacity(starts.len());
        for start in &starts {
            let (slots, first) = match start.on_flash {
                Some(flash_page) => {
                    let at = bucket::HEADER_BYTES + start.slot * width;
                    let Some(bytes) = peeked.get_mut(..start.slots * width) else {
                        continue;
                    };
                    if !space.peek_page(flash_page, at, bytes) {
                        continue;
                    }
                    (
                        Slots::Encoded {
                            array: bytes,
                            width,
                        },
                        0,
                    )
                }
                None => match self.table.resident(space, start.page) {
                    Some(slots) => (slots, start.slot),
                    None => continue,
                },
            };
            let found = (first..first + start.slots)
                .map_while(|index| slots.get(index).filter(|slot| !slot.is_empty()))
                .find(|slot| slot.is_live() && slot.signature == start.signature);
            if let Some(slot) = found {
                pointers.push(RecordPointer::from_raw(slot.pointer));
            }
        }
        space.prefetch_records(pointers);
    }

    pub(super) fn record_get(&mut self, index_reads: u32, records: u32) {
        self.last_get_index_reads = index_reads;
        self.last_get_data_reads = records;
        self.index_reads.record(index_reads);
        self.data_reads.record(records);
    }

    /// Refused: a hash index keeps no key order, so it cannot return keys from `start` on. The
    /// error is typed so a caller can fall back (e.g. a full scan that says so).
    pub fn scan(
        &mut self,
        _space: &mut Space,
        _at: SimTime,
        start: &[u8],
        _count: usize,
    ) -> Result<(crate::Pairs, SimTime)> {
        self.check_key(start)?;
        Err(HashError::Unsupported {
            operation: "scan",
            preset: self.config.preset.name(),
        })
    }

    /// Whether `key` has a live value. Returns when the index search (and the record read that
    /// confirms a signature match) ends.
    pub fn contains(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
    ) -> Result<(bool, SimTime)> {
        self.check_key(key)?;
        let hash = self.key_hash(key);
        let buffered = self.buffered_keys.may_hold(hash);
        let in_buffer = if buffered { self.buffer.get(key) } else { None };
        if let Some(value) = in_buffer {
            let present = value.is_some();
            return Ok((present, self.charge(space, at)));
        }
        // What `hash_of` charges, for the hash made above.
        self.cpu_pending.bytes_hashed += key.len() as u64;
        let (probe, t, _, _) = self.probe(space, at, key, hash, ProbeFor::Presence)?;
        Ok((probe.hit.is_some(), self.charge(space, t)))
    }
}
