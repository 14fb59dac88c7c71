//! Applying the write buffer to the table: in home-slot order with the bucket pages read ahead,
//! slot by slot, and growing a `kaml` table that would pass its load factor.

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{RecordPointer, Space};

use super::bucket;
use super::bucket::Slot;
use super::table::Table;
use super::{Admission, HashError, HashIndex, HashPreset, Hit, Pending, ProbeFor, Result};

impl HashIndex {
    /// Applies the write buffer to the table (its values are appended to data pages, its keys put
    /// into their slots). Returns when the last flash operation completes.
    pub fn flush_write_buffer(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let t = self.flush_buffer(space, at, Admission::Reserve)?;
        Ok(self.charge(space, t))
    }

    /// Makes everything durable on flash: applies the write buffer, writes every dirty cached
    /// bucket page back, and programs the data page open in DRAM.
    pub fn sync(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let mut t = self.flush_buffer(space, at, Admission::Reserve)?;
        let (_, dirty) = self.table.cached_pages();
        t = self.ensure_space(space, t, 0, dirty as u64, Admission::Reserve)?;
        t = self.table.write_back_all(space, t, Purpose::Index)?;
        t = space.sync(t, self.config.namespace, Purpose::UserData)?;
        Ok(self.charge(space, t))
    }

    pub(super) fn flush_buffer(
        &mut self,
        space: &mut Space,
        at: SimTime,
        admission: Admission,
    ) -> Result<SimTime> {
        if self.buffer.is_empty() {
            return Ok(at);
        }
        // Room first, while the pairs are still buffered: GC publishes the index for the
        // checkpoint the erase hook writes, with the log replayed from the record being applied,
        // and pairs taken out of the buffer but not yet in the table would be in neither (a
        // crash then lost every pair the buffer held from earlier records).
        let (data_pages, meta_pages) = self.pages_for(space, self.buffer.iter());
        let t = self.ensure_space(space, at, data_pages, meta_pages, admission)?;
        let pending: Vec<Pending> = std::mem::take(&mut self.buffer).into_iter().collect();
        self.buffer_bytes = 0;
        match self.apply_reserved(space, t, pending) {
            Ok(t) => Ok(t),
            Err((error, unapplied)) => {
                // What was not applied stays buffered: each pair is either in the table or here.
                for (key, value) in unapplied {
                    self.buffer_bytes += Self::pair_bytes(&key, value.as_deref());
                    self.buffer_insert(key, value);
                }
                Err(error)
            }
        }
    }

    /// Bucket pages a batch of `pairs` may load (and so evictions it may cause), `hash` only.
    pub(super) fn pages_touched_max(&self, pairs: u64) -> u64 {
        let pages = self.table.pages();
        if pages == 0 {
            return 0;
        }
        // In home-slot order each page is loaded about once; a window spans at most two pages and
        // the last windows may wrap to the first pages again.
        (pairs * 2).min(pages) + 2
    }

    /// The data and meta pages applying `pairs` to the table may write: what
    /// [`HashIndex::ensure_space`] makes room for first.
    fn pages_for<'a>(
        &self,
        space: &Space,
        pairs: impl ExactSizeIterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)>,
    ) -> (u64, u64) {
        let count = pairs.len() as u64;
        let data_pages = space.data_pages_needed(
            self.config.namespace,
            pairs.filter_map(|(key, value)| value.as_ref().map(|v| (key.len(), v.len()))),
        );
        let meta_pages = self.pages_touched_max(count) + self.table.cache_capacity() as u64;
        (data_pages, meta_pages)
    }

    /// Applies pairs to the table in home-slot order. On failure returns the pairs not applied.
    pub(super) fn apply_all(
        &mut self,
        space: &mut Space,
        at: SimTime,
        pending: Vec<Pending>,
        admission: Admission,
    ) -> std::result::Result<SimTime, (HashError, Vec<Pending>)> {
        let (data_pages, meta_pages) =
            self.pages_for(space, pending.iter().map(|(key, value)| (key, value)));
        match self.ensure_space(space, at, data_pages, meta_pages, admission) {
            Ok(t) => self.apply_reserved(space, t, pending),
            Err(error) => Err((error, pending)),
        }
    }

    /// [`HashIndex::apply_all`] once [`HashIndex::ensure_space`] has made room for the pairs.
    fn apply_reserved(
        &mut self,
        space: &mut Space,
        at: SimTime,
        pending: Vec<Pending>,
    ) -> std::result::Result<SimTime, (HashError, Vec<Pending>)> {
        // Newer than any immutable buffer: they would shadow it.
        self.flushing.clear();
        let mut t = at;
        let total = self.table.total_slots();
        let mut ordered: Vec<(u64, u64, Pending)> = pending
            .into_iter()
            .map(|pair| {
                let hash = self.hash_of(&pair.0);
                (bucket::home_slot(hash, total), hash, pair)
            })
            .collect();
        ordered.sort_by_key(|(home, _, _)| *home);
        // The bucket pages the batch will touch are known now: read them all at once, as many as
        // the cache holds, so their reads overlap across dies instead of each pair waiting for the
        // previous one's miss.
        let homes: Vec<u64> = ordered.iter().map(|(home, _, _)| *home).collect();
        t = match self.read_ahead(space, t, &homes) {
            Ok(t) => t,
            Err(error) => {
                return Err((
                    error,
                    ordered.into_iter().map(|(_, _, pair)| pair).collect(),
                ));
            }
        };
        let mut done = t;
        let mut rest = ordered.into_iter();
        while let Some((_, hash, (key, value))) = rest.next() {
            match self.apply_one(space, t, &key, hash, value.as_deref()) {
                Ok((index_done, programmed)) => {
                    t = index_done;
                    done = done.max(programmed);
                }
                Err(error) => {
                    let mut unapplied = vec![(key, value)];
                    unapplied.extend(rest.map(|(_, _, pair)| pair));
                    return Err((error, unapplied));
                }
            }
        }
        self.activity.flushes += 1;
        Ok(t.max(done))
    }

    /// Makes the bucket pages holding the home slots `homes` (in order) resident, issuing every read
    /// at `at`, up to the cache's capacity; returns when the last is in DRAM. Only the page each
    /// probe starts on: most probes end there. A table in DRAM (no cache) has nothing to read.
    pub(super) fn read_ahead(
        &mut self,
        space: &mut Space,
        at: SimTime,
        homes: &[u64],
    ) -> Result<SimTime> {
        let capacity = self.table.cache_capacity();
        if capacity == 0 {
            return Ok(at);
        }
        // Homes are sorted, so their pages come in order and a repeat is always the last one.
        let mut pages: Vec<u64> = Vec::new();
        for page in homes.iter().filter_map(|&home| self.table.page_of(home)) {
            if pages.last() != Some(&page) {
                if pages.len() == capacity {
                    break;
                }
                pages.push(page);
            }
        }
        let mut ready = at;
        for page in pages {
            ready = ready.max(self.table.read_ahead(space, at, page, Purpose::Index)?);
        }
        Ok(ready)
    }

    /// Applies one pair: finds its slot, appends the value, sets the slot, reports the old record
    /// dead. Returns when the index work is done and when the data programs are.
    pub(super) fn apply_one(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        hash: u64,
        value: Option<&[u8]>,
    ) -> Result<(SimTime, SimTime)> {
        let namespace = self.config.namespace;
        let mut t = at;
        let probe = loop {
            let (probe, done, _, _) = self.probe(space, t, key, hash, ProbeFor::Change)?;
            t = done;
            if value.is_none() || probe.hit.is_some() {
                break probe;
            }
            let full = probe.free.is_none()
                || (self.entries + 1) as f64
                    > self.config.load_factor_max * self.table.total_slots() as f64;
            if self.config.preset == HashPreset::Kaml
                && full
                && self.table.total_slots() * 2 <= self.kaml_slots_max
            {
                t = self.grow(space, t)?;
                continue;
            }
            break probe;
        };
        let signature = bucket::signature(hash, self.config.signature_bits);
        let mut programmed = t;
        match value {
            Some(value) => {
                let (page, offset) = match (&probe.hit, probe.free) {
                    (Some(hit), _) => (hit.page, hit.offset),
                    (None, Some(free)) => free,
                    (None, None) => {
                        return Err(HashError::TableFull {
                            probe_slots: self.probe_slots as u32,
                        })
                    }
                };
                let (pointer, done) =
                    space.append_record(t, Purpose::UserData, namespace, key, value)?;
                if self.config.key_in_slot {
                    self.record_lengths
                        .insert(pointer.raw(), value.len() as u32);
                }
                self.cpu_pending.bytes_copied += (key.len() + value.len()) as u64;
                programmed = done;
                let slot = Slot {
                    signature,
                    pointer: pointer.raw(),
                };
                t = self
                    .table
                    .set(space, t, page, offset, slot, Purpose::Index)?;
                match probe.hit {
                    Some(hit) => self.forget(space, key, &hit),
                    None => self.entries += 1,
                }
            }
            None => {
                if let Some(hit) = probe.hit {
                    // An empty slot may replace the key when the next slot is empty and on the
                    // same page: no probe passes through it then. Otherwise a tombstone.
                    let next_empty = self
                        .table
                        .resident(space, hit.page)
                        .and_then(|slots| slots.get(hit.offset + 1))
                        .is_some_and(|next| next.is_empty());
                    let slot = if next_empty {
                        Slot::EMPTY
                    } else {
                        Slot {
                            signature: 0,
                            pointer: bucket::TOMBSTONE,
                        }
                    };
                    t = self
                        .table
                        .set(space, t, hit.page, hit.offset, slot, Purpose::Index)?;
                    self.forget(space, key, &hit);
                    self.entries -= 1;
                }
            }
        }
        Ok((t, programmed))
    }

    /// Reports a replaced or deleted record dead to the space layer.
    pub(super) fn forget(&mut self, space: &mut Space, key: &[u8], hit: &Hit) {
        space.invalidate_record(hit.pointer, key.len(), hit.value_len);
        if self.config.key_in_slot {
            self.record_lengths.remove(&hit.pointer.raw());
        }
    }

    /// `kaml`: doubles the table (more if a key's window would not fit) and re-inserts every key.
    /// With 64-bit signatures the home slots come from the signatures; narrower signatures need the
    /// key, read back from flash (counted as index reads).
    pub(super) fn grow(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let mut t = at;
        let bits = self.config.signature_bits;
        let mut hashes = Vec::new();
        for slot in self.table.dram_slots().to_vec() {
            if !slot.is_live() {
                continue;
            }
            let hash = if bits >= 64 {
                slot.signature
            } else {
                let (record, done) =
                    space.read_record(t, RecordPointer::from_raw(slot.pointer), Purpose::Index)?;
                t = done;
                self.hash_of(&record.key)
            };
            hashes.push((hash, slot));
        }
        let mut size = self.table.total_slots() * 2;
        'sizes: while size <= self.kaml_slots_max {
            let mut table =
                Table::in_dram(size as usize, bits, self.page_bytes, self.config.namespace);
            table.counts = self.table.counts;
            for &(hash, slot) in &hashes {
                let home = bucket::home_slot(hash, size);
                let mut placed = false;
                for (page, start, count) in table.window(home, self.probe_slots) {
                    let free = table
                        .resident(space, page)
                        .filter(|slots| start + count <= slots.len())
                        .and_then(|slots| {
                            (start..start + count)
                                .position(|index| slots.get(index).is_some_and(Slot::is_empty))
                        });
                    if let Some(index) = free {
                        table.set(space, t, page, start + index, slot, Purpose::Index)?;
                        placed = true;
                        break;
                    }
                }
                if !placed {
                    size *= 2;
                    continue 'sizes;
                }
            }
            self.table = table;
            self.activity.resizes += 1;
            return Ok(t);
        }
        Ok(t)
    }
}
