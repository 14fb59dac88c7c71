//! The hash engines: PinK's "Hash" baseline (ATC'20 §2.3, §5.1) and KAML's in-DRAM hash index
//! (HPCA'17 §IV-C), as two presets of one engine ([`HashPreset`]).
//!
//! * **Slots** hold a short **signature** of the key (the top `signature_bits` of a 64-bit hash)
//!   and a record pointer. The full key lives with the value on flash; a signature match is
//!   confirmed by reading the record and comparing keys, so a signature collision costs a data read,
//!   never a wrong answer.
//! * **Collisions**: linear probing from the key's home slot over at most `probe_slots` consecutive
//!   slots (its **probe window**, wrapping at the end of the table). A lookup stops at the first
//!   never-used slot or at the end of the window; a delete leaves a tombstone (or an empty slot when
//!   the next slot is empty and on the same page); an insert takes the first tombstone or empty slot
//!   of the window after checking the key is not further on. With `hash` the window is at most one
//!   bucket page of slots, so a lookup touches at most two bucket pages. A window without a free
//!   slot is [`HashError::TableFull`] (`kaml` first doubles its table).
//! * `hash`: the table is bucket pages on flash; the DRAM budget holds the write buffer, the bucket
//!   directory and an LRU cache of bucket pages (see `table.rs`). Updates are read-modify-writes of
//!   bucket pages: a miss reads the page, a dirty page is written back when evicted.
//! * `kaml`: the table is in DRAM and doubles when its load factor would pass `load_factor_max`;
//!   a GET of a present key reads the value's page and nothing else.
//! * A **write buffer** of whole pairs (1 MiB by default) is applied to the table when full, in
//!   home-slot order, so values are packed into data pages and each bucket page is loaded at most
//!   about once per flush.
//! * **GC** (see `gc.rs`): a data record is live if its key's probe window holds its pointer; live
//!   records are appended again and their slots updated. A bucket page is live if the directory
//!   points at it; live pages are copied and the directory fixed.
//! * Range scans are refused with [`HashError::Unsupported`].
//!
//! Thread safety: single-threaded; every operation takes `&mut self`.

mod bucket;
mod config;
mod durable;
mod engine;
mod error;
mod gc;
mod stats;
pub(crate) mod table;

use std::collections::BTreeMap;

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{Record, RecordPointer, Space, Stream};

pub use config::{HashConfig, HashPreset, SIGNATURE_BITS_MAX};
pub use engine::HashEngine;
pub use error::{HashError, Result};
pub use stats::{HashDramUsage, HashStats};

use crate::cpu::CpuCounts;
use crate::stats::ReadHistogram;
use crate::EngineError;
use bucket::Slot;
use table::Table;

/// DRAM a buffered pair takes besides its key and value (tree node, lengths).
const BUFFER_ENTRY_OVERHEAD_BYTES: u64 = 16;
/// DRAM one directory entry takes (the flash page of a bucket page).
const DIRECTORY_ENTRY_BYTES: u64 = 8;
/// `hash` refuses puts that would fill its fixed table past this load factor.
const HASH_LOAD_FACTOR_HARD: f64 = 0.9;
/// Default probe window of `kaml`.
const KAML_PROBE_SLOTS: u64 = 64;
/// Default initial size of a `kaml` table.
const KAML_INITIAL_SLOTS: u64 = 1024;

/// Who is asking for space: puts may not use the delete reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    Put,
    Reserve,
}

#[derive(Debug, Clone, Copy, Default)]
struct Activity {
    flushes: u64,
    resizes: u64,
    signature_collisions: u64,
    gc_meta_victims: u64,
    gc_data_victims: u64,
    gc_victims_skipped: u64,
    gc_bucket_pages_moved: u64,
    gc_records_rewritten: u64,
}

/// Where a key's probe window holds the key.
struct Hit {
    page: u64,
    offset: usize,
    pointer: RecordPointer,
    record: Record,
}

/// What a walk of a key's probe window found.
struct Probe {
    hit: Option<Hit>,
    /// The first tombstone or empty slot of the window.
    free: Option<(u64, usize)>,
}

/// A pair waiting in the write buffer, or being applied: the value, `None` for a delete.
type Pending = (Vec<u8>, Option<Vec<u8>>);

/// The hash index of one namespace, over a space layer it may share with other namespaces: every
/// operation takes the [`Space`] it writes to. [`HashEngine`] is an index with a space of its own.
pub struct HashIndex {
    config: HashConfig,
    table: Table,
    buffer: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    buffer_bytes: u64,
    entries: u64,
    probe_slots: u64,
    page_bytes: usize,
    slot_bytes: u64,
    dram_budget: u64,
    /// `kaml`: the largest table the DRAM budget holds.
    kaml_slots_max: u64,
    value_bytes_max: usize,
    gc_threshold: u64,
    cpu_pending: CpuCounts,
    cpu_total: CpuCounts,
    cpu_ns: u64,
    activity: Activity,
    index_reads: ReadHistogram,
    data_reads: ReadHistogram,
    last_get_index_reads: u32,
    last_get_data_reads: u32,
}

impl HashIndex {
    /// Opens an empty index that writes to `space` under namespace `config.namespace`.
    ///
    /// Refuses a DRAM budget that cannot hold the write buffer and the smallest index
    /// (`hash`: the directory and two cached bucket pages; `kaml`: the initial table) with
    /// [`EngineError::DramBudgetTooSmall`].
    pub fn open(space: &Space, config: HashConfig) -> Result<HashIndex> {
        config.check()?;
        let geometry = *space.geometry();
        let page_bytes = geometry.page_bytes as usize;
        let bits = config.signature_bits;
        let slot_bytes = bucket::slot_bytes(bits) as u64;
        let dram_budget = if config.dram_budget_bytes == 0 {
            geometry.capacity_bytes() / 1000
        } else {
            config.dram_budget_bytes
        };
        let too_small = |needed: u64| {
            HashError::Engine(EngineError::DramBudgetTooSmall {
                needed,
                budget: dram_budget,
            })
        };
        let (table, probe_slots, kaml_slots_max) = match config.preset {
            HashPreset::Hash => {
                let per_page = bucket::slots_per_page(page_bytes, bits);
                if per_page == 0 {
                    return Err(HashError::Engine(EngineError::Config(format!(
                        "pages of {page_bytes} bytes cannot hold a bucket page"
                    ))));
                }
                let slots = if config.table_slots > 0 {
                    config.table_slots
                } else {
                    let footprint = space.record_footprint(
                        config.expected_key_bytes as usize,
                        config.expected_value_bytes as usize,
                    );
                    let entries_max = space.user_capacity_bytes() / footprint.max(1);
                    (entries_max as f64 / config.load_factor_max).ceil() as u64
                };
                let pages = slots.div_ceil(per_page as u64).max(1);
                let probe = match config.probe_slots_max {
                    0 => per_page as u64,
                    probe => u64::from(probe).min(per_page as u64),
                };
                // A probe window spans at most two pages; both must fit the cache at once.
                let window_pages = pages.min(2);
                let directory = pages * DIRECTORY_ENTRY_BYTES;
                let fixed = config.write_buffer_bytes + directory;
                let cache = dram_budget.saturating_sub(fixed) / page_bytes as u64;
                if cache < window_pages {
                    return Err(too_small(fixed + window_pages * page_bytes as u64));
                }
                let table = Table::on_flash(
                    pages,
                    per_page,
                    cache.min(pages) as usize,
                    bits,
                    page_bytes,
                    config.namespace,
                );
                (table, probe, 0)
            }
            HashPreset::Kaml => {
                let initial = if config.table_slots > 0 {
                    config.table_slots
                } else {
                    KAML_INITIAL_SLOTS
                };
                let needed = config.write_buffer_bytes + initial * slot_bytes;
                if needed > dram_budget {
                    return Err(too_small(needed));
                }
                let mut largest = initial;
                while config.write_buffer_bytes + largest * 2 * slot_bytes <= dram_budget {
                    largest *= 2;
                }
                let probe = match config.probe_slots_max {
                    0 => KAML_PROBE_SLOTS,
                    probe => u64::from(probe),
                };
                let table = Table::in_dram(initial as usize, bits, page_bytes, config.namespace);
                (table, probe, largest)
            }
        };
        let gc_threshold = if config.gc_threshold_blocks > 0 {
            u64::from(config.gc_threshold_blocks)
        } else {
            u64::from(space.config().gc_reserve_blocks)
                + u64::from(config.delete_reserve_blocks)
                + u64::from(space.config().logs)
                + 2
        };
        Ok(HashIndex {
            value_bytes_max: config.value_bytes_max(&geometry),
            table,
            buffer: BTreeMap::new(),
            buffer_bytes: 0,
            entries: 0,
            probe_slots,
            page_bytes,
            slot_bytes,
            dram_budget,
            kaml_slots_max,
            gc_threshold,
            cpu_pending: CpuCounts::default(),
            cpu_total: CpuCounts::default(),
            cpu_ns: 0,
            activity: Activity::default(),
            index_reads: ReadHistogram::default(),
            data_reads: ReadHistogram::default(),
            last_get_index_reads: 0,
            last_get_data_reads: 0,
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &HashConfig {
        &self.config
    }

    /// Longest value this index takes.
    pub fn value_bytes_max(&self) -> usize {
        self.value_bytes_max
    }

    /// The DRAM budget in bytes.
    pub fn dram_budget_bytes(&self) -> u64 {
        self.dram_budget
    }

    /// Keys the table holds (pairs still in the write buffer not counted).
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Slots of the table now.
    pub fn table_slots(&self) -> u64 {
        self.table.total_slots()
    }

    /// The probe bound: slots a key may occupy from its home slot on.
    pub fn probe_slots(&self) -> u64 {
        self.probe_slots
    }

    /// Bucket pages read by the most recent GET.
    pub fn last_get_index_reads(&self) -> u32 {
        self.last_get_index_reads
    }

    /// Records read by the most recent GET (the value, plus one per signature collision).
    pub fn last_get_data_reads(&self) -> u32 {
        self.last_get_data_reads
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.is_empty() {
            return Err(EngineError::KeyEmpty.into());
        }
        if key.len() > crate::KEY_BYTES_MAX {
            return Err(EngineError::KeyTooLong { len: key.len() }.into());
        }
        Ok(())
    }

    /// Charges the counted CPU work to the controller; returns when it completes.
    fn charge(&mut self, space: &mut Space, at: SimTime) -> SimTime {
        let ns = self.cpu_pending.cost_ns(&self.config.cpu);
        self.cpu_total.add(&self.cpu_pending);
        self.cpu_pending = CpuCounts::default();
        self.cpu_ns += ns;
        space.compute(at, ns)
    }

    fn hash_of(&mut self, key: &[u8]) -> u64 {
        self.cpu_pending.bytes_hashed += key.len() as u64;
        bucket::key_hash(key)
    }

    /// Walks a key's probe window. Returns what it found, when, and the bucket pages and records
    /// it read.
    fn probe(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        hash: u64,
        purpose: Purpose,
        data_purpose: Purpose,
    ) -> Result<(Probe, SimTime, u32, u32)> {
        let signature = bucket::signature(hash, self.config.signature_bits);
        let home = bucket::home_slot(hash, self.table.total_slots());
        let runs = self.table.window(home, self.probe_slots);
        let reads_before = self.table.counts.page_reads;
        let mut records = 0;
        let mut t = at;
        let mut free = None;
        for (page, start, count) in runs {
            t = self.table.load(space, t, page, purpose)?;
            let slots: Vec<Slot> = self
                .table
                .resident(page)
                .and_then(|slots| slots.get(start..start + count))
                .ok_or(HashError::MalformedBucket {
                    page,
                    what: "probe window outside the bucket page",
                })?
                .to_vec();
            for (index, slot) in slots.into_iter().enumerate() {
                let offset = start + index;
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
                let (record, done) =
                    space.read_record(t, RecordPointer::from_raw(slot.pointer), data_purpose)?;
                t = done;
                records += 1;
                self.cpu_pending.compare(&record.key, key);
                if record.key == key {
                    let reads = (self.table.counts.page_reads - reads_before) as u32;
                    let hit = Hit {
                        page,
                        offset,
                        pointer: RecordPointer::from_raw(slot.pointer),
                        record,
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
        if let Some(buffered) = self.buffer.get(key) {
            let value = buffered.clone();
            self.record_get(0, 0);
            return Ok((value, self.charge(space, at)));
        }
        let hash = self.hash_of(key);
        let (probe, t, index_reads, records) =
            self.probe(space, at, key, hash, Purpose::Index, Purpose::UserData)?;
        self.record_get(index_reads, records);
        let value = probe.hit.map(|hit| hit.record.value);
        Ok((value, self.charge(space, t)))
    }

    fn record_get(&mut self, index_reads: u32, records: u32) {
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

    /// Keys the table may hold at most (`hash`: its fixed size at the hard load factor; `kaml`: the
    /// largest table the DRAM budget holds, at `load_factor_max`).
    fn entries_max(&self) -> u64 {
        match self.config.preset {
            HashPreset::Hash => (self.table.total_slots() as f64 * HASH_LOAD_FACTOR_HARD) as u64,
            HashPreset::Kaml => (self.kaml_slots_max as f64 * self.config.load_factor_max) as u64,
        }
    }

    /// Stores `value` under `key`, replacing any older version.
    ///
    /// Refused with [`EngineError::CapacityExceeded`] (and nothing changed) when user data would
    /// exceed the raw capacity less over-provisioning, when the table is as full as it may get, or
    /// when GC cannot free the blocks applying the write buffer needs.
    pub fn put(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        value: &[u8],
    ) -> Result<SimTime> {
        self.check_key(key)?;
        if value.len() > self.value_bytes_max {
            return Err(EngineError::ValueTooLarge {
                len: value.len(),
                max: self.value_bytes_max,
            }
            .into());
        }
        let footprint = space.record_footprint(key.len(), value.len());
        let unwritten_pages = self.table.pages() - self.table.pages_on_flash();
        let index_reserve = unwritten_pages * self.page_bytes as u64;
        if space.valid_bytes() + self.buffer_bytes + footprint + index_reserve
            > space.user_capacity_bytes()
        {
            return Err(EngineError::CapacityExceeded(
                "user data would exceed the capacity less over-provisioning",
            )
            .into());
        }
        if self.entries + self.buffer.len() as u64 + 1 > self.entries_max() {
            return Err(EngineError::CapacityExceeded(match self.config.preset {
                HashPreset::Hash => "the hash table is as full as its load factor allows",
                HashPreset::Kaml => "the in-DRAM hash table has reached the DRAM budget",
            })
            .into());
        }
        self.insert(space, at, key, Some(value), Admission::Put)
    }

    /// Deletes `key`. Deletes may use the delete reserve, so they proceed on a device that refuses
    /// puts.
    pub fn delete(&mut self, space: &mut Space, at: SimTime, key: &[u8]) -> Result<SimTime> {
        self.check_key(key)?;
        self.insert(space, at, key, None, Admission::Reserve)
    }

    /// Checks that a put of `key` with a value of `value_len` bytes would be admitted, with
    /// `staged_bytes` more already promised to earlier stores of the same batch. Changes nothing.
    pub fn admit_put(
        &self,
        space: &Space,
        key: &[u8],
        value_len: usize,
        staged_bytes: u64,
    ) -> Result<()> {
        self.check_key(key)?;
        if value_len > self.value_bytes_max {
            return Err(EngineError::ValueTooLarge {
                len: value_len,
                max: self.value_bytes_max,
            }
            .into());
        }
        let footprint = space.record_footprint(key.len(), value_len);
        let unwritten_pages = self.table.pages() - self.table.pages_on_flash();
        let index_reserve = unwritten_pages * self.page_bytes as u64;
        if space.valid_bytes() + self.buffer_bytes + staged_bytes + footprint + index_reserve
            > space.user_capacity_bytes()
        {
            return Err(EngineError::CapacityExceeded(
                "user data would exceed the capacity less over-provisioning",
            )
            .into());
        }
        if self.entries + self.buffer.len() as u64 + 1 > self.entries_max() {
            return Err(EngineError::CapacityExceeded(match self.config.preset {
                HashPreset::Hash => "the hash table is as full as its load factor allows",
                HashPreset::Kaml => "the in-DRAM hash table has reached the DRAM budget",
            })
            .into());
        }
        Ok(())
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
        if let Some(buffered) = self.buffer.get(key) {
            let present = buffered.is_some();
            return Ok((present, self.charge(space, at)));
        }
        let hash = self.hash_of(key);
        let (probe, t, _, _) = self.probe(space, at, key, hash, Purpose::Index, Purpose::Index)?;
        Ok((probe.hit.is_some(), self.charge(space, t)))
    }

    /// DRAM a buffered pair takes: what [`HashIndex::prepare_stage`] counts per pair.
    pub fn staged_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
        Self::pair_bytes(key, value)
    }

    /// Makes room in the write buffer for a batch that will stage `bytes` of pairs with
    /// [`HashIndex::stage`]: applies the buffer first if they would not fit. Changes no key's
    /// value; may fail with [`EngineError::CapacityExceeded`].
    pub fn prepare_stage(&mut self, space: &mut Space, at: SimTime, bytes: u64) -> Result<SimTime> {
        if self.buffer_bytes + bytes > self.config.write_buffer_bytes && !self.buffer.is_empty() {
            let t = self.flush_buffer(space, at, Admission::Reserve)?;
            return Ok(self.charge(space, t));
        }
        Ok(at)
    }

    /// Puts a pair (`Some` value) or a delete (`None`) into the write buffer without applying it:
    /// cannot fail, which is what makes a batch all-or-nothing once validated. Keys must have been
    /// checked. [`HashIndex::settle`] applies the buffer afterwards.
    pub fn stage(&mut self, key: &[u8], value: Option<&[u8]>) {
        debug_assert!(!key.is_empty() && key.len() <= crate::KEY_BYTES_MAX);
        let added = Self::pair_bytes(key, value);
        self.cpu_pending.bytes_copied += added;
        if let Some(old) = self.buffer.insert(key.to_vec(), value.map(<[u8]>::to_vec)) {
            self.buffer_bytes -= Self::pair_bytes(key, old.as_deref());
        }
        self.buffer_bytes += added;
    }

    /// After staging: applies the write buffer if it is over its size and runs background GC. An
    /// apply that cannot get its space leaves the pairs buffered (the next write retries), so
    /// staged pairs stay applied.
    pub fn settle(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let mut t = at;
        if self.buffer_bytes > self.config.write_buffer_bytes {
            t = match self.flush_buffer(space, t, Admission::Reserve) {
                Ok(t) => t,
                Err(HashError::Engine(EngineError::CapacityExceeded(_)))
                | Err(HashError::TableFull { .. }) => t,
                Err(error) => return Err(error),
            };
        }
        t = self.background_gc(space, t)?;
        Ok(self.charge(space, t))
    }

    /// The block this index's GC would collect next among its own, if any (the device compares
    /// namespaces' candidates and hands the chosen one to [`HashIndex::collect_victim`]).
    pub fn gc_candidate(&self, space: &Space) -> Option<u64> {
        space.pick_victim_with(Some(self.config.namespace), |_, _| true)
    }

    /// Collects one GC victim of this namespace chosen by the device (relocating what is live,
    /// then erasing it). `None` when the free pool cannot take the relocation now (the victim is
    /// left as it was).
    pub fn collect_victim(
        &mut self,
        space: &mut Space,
        at: SimTime,
        victim: u64,
    ) -> Result<Option<SimTime>> {
        self.collect(space, at, victim)
    }

    fn pair_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
        key.len() as u64 + value.map_or(0, |value| value.len() as u64) + BUFFER_ENTRY_OVERHEAD_BYTES
    }

    fn insert(
        &mut self,
        space: &mut Space,
        at: SimTime,
        key: &[u8],
        value: Option<&[u8]>,
        admission: Admission,
    ) -> Result<SimTime> {
        let mut t = at;
        let added = Self::pair_bytes(key, value);
        if self.buffer_bytes + added > self.config.write_buffer_bytes && !self.buffer.is_empty() {
            t = self.flush_buffer(space, t, admission)?;
        }
        self.cpu_pending.bytes_copied += added;
        if added > self.config.write_buffer_bytes {
            // A pair larger than the whole buffer goes straight to flash (the buffer is empty).
            let pending = vec![(key.to_vec(), value.map(<[u8]>::to_vec))];
            t = self
                .apply_all(space, t, pending, admission)
                .map_err(|(error, _)| error)?;
        } else {
            if let Some(old) = self.buffer.insert(key.to_vec(), value.map(<[u8]>::to_vec)) {
                self.buffer_bytes -= Self::pair_bytes(key, old.as_deref());
            }
            self.buffer_bytes += added;
        }
        t = self.background_gc(space, t)?;
        Ok(self.charge(space, t))
    }

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

    fn flush_buffer(
        &mut self,
        space: &mut Space,
        at: SimTime,
        admission: Admission,
    ) -> Result<SimTime> {
        if self.buffer.is_empty() {
            return Ok(at);
        }
        let pending: Vec<Pending> = std::mem::take(&mut self.buffer).into_iter().collect();
        self.buffer_bytes = 0;
        match self.apply_all(space, at, pending, admission) {
            Ok(t) => Ok(t),
            Err((error, unapplied)) => {
                // What was not applied stays buffered: each pair is either in the table or here.
                for (key, value) in unapplied {
                    self.buffer_bytes += Self::pair_bytes(&key, value.as_deref());
                    self.buffer.insert(key, value);
                }
                Err(error)
            }
        }
    }

    /// Bucket pages a batch of `pairs` may load (and so evictions it may cause), `hash` only.
    fn pages_touched_max(&self, pairs: u64) -> u64 {
        let pages = self.table.pages();
        if pages == 0 {
            return 0;
        }
        // In home-slot order each page is loaded about once; a window spans at most two pages and
        // the last windows may wrap to the first pages again.
        (pairs * 2).min(pages) + 2
    }

    /// Applies pairs to the table in home-slot order. On failure returns the pairs not applied.
    fn apply_all(
        &mut self,
        space: &mut Space,
        at: SimTime,
        pending: Vec<Pending>,
        admission: Admission,
    ) -> std::result::Result<SimTime, (HashError, Vec<Pending>)> {
        let namespace = self.config.namespace;
        let data_pages = space.data_pages_needed(
            namespace,
            pending
                .iter()
                .filter_map(|(key, value)| value.as_ref().map(|v| (key.len(), v.len()))),
        );
        let meta_pages =
            self.pages_touched_max(pending.len() as u64) + self.table.cache_capacity() as u64;
        let mut t = match self.ensure_space(space, at, data_pages, meta_pages, admission) {
            Ok(t) => t,
            Err(error) => return Err((error, pending)),
        };
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
    fn read_ahead(&mut self, space: &mut Space, at: SimTime, homes: &[u64]) -> Result<SimTime> {
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
    fn apply_one(
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
            let (probe, done, _, _) =
                self.probe(space, t, key, hash, Purpose::Index, Purpose::UserData)?;
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
                        .resident(hit.page)
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
    fn forget(&self, space: &mut Space, key: &[u8], hit: &Hit) {
        space.invalidate_record(hit.pointer, key.len(), hit.record.value.len());
    }

    /// `kaml`: doubles the table (more if a key's window would not fit) and re-inserts every key.
    /// With 64-bit signatures the home slots come from the signatures; narrower signatures need the
    /// key, read back from flash (counted as index reads).
    fn grow(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
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
                        .resident(page)
                        .and_then(|slots| slots.get(start..start + count))
                        .and_then(|slots| slots.iter().position(|slot| slot.is_empty()));
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

    /// Runs GC until the free pool can supply `data_pages` and `meta_pages` plus the reserves, or
    /// fails with [`EngineError::CapacityExceeded`] if GC cannot free enough.
    fn ensure_space(
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
                + u64::from(space.config().gc_reserve_blocks)
                + if admission == Admission::Put {
                    u64::from(self.config.delete_reserve_blocks)
                } else {
                    0
                };
            let soft = hard.max(self.gc_threshold);
            let free = space.free_blocks();
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

    /// Collects blocks while the free pool is below the GC threshold (never fails for lack of
    /// victims: the threshold is a wish, the reserves are the requirement).
    fn background_gc(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        if space.free_blocks() >= self.gc_threshold {
            return Ok(at);
        }
        match self.ensure_space(space, at, 0, 0, Admission::Reserve) {
            Ok(t) => Ok(t),
            Err(HashError::Engine(EngineError::CapacityExceeded(_))) => Ok(at),
            Err(error) => Err(error),
        }
    }
}
