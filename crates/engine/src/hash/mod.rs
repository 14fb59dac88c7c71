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

mod apply;
pub(crate) mod bucket;
mod config;
mod contract;
mod durable;
mod engine;
mod error;
mod gc;
mod read;
mod reserve;
mod stats;
pub(crate) mod table;
mod write;

use std::collections::{BTreeMap, HashMap};

use kvssd_flash::SimTime;
use kvssd_space::{Record, RecordPointer, Space};

pub use config::{HashConfig, HashPreset, SIGNATURE_BITS_MAX};
pub use engine::HashEngine;
pub use error::{HashError, Result};
pub use stats::{HashDramUsage, HashStats};

use crate::background::{in_background, Flushing};
use crate::cpu::CpuCounts;
use crate::stats::ReadHistogram;
use crate::EngineError;
use table::Table;

/// DRAM a buffered pair takes besides its key and value (tree node, lengths).
const BUFFER_ENTRY_OVERHEAD_BYTES: u64 = 16;
/// DRAM one directory entry takes (the flash page of a bucket page).
const DIRECTORY_ENTRY_BYTES: u64 = 8;
/// `hash` refuses puts that would fill its fixed table past this load factor.
const HASH_LOAD_FACTOR_HARD: f64 = 0.9;
/// Default probe window of `kaml`.
const KAML_PROBE_SLOTS: u64 = 64;
/// Bytes of a key with `key_in_slot` (KAML's 64-bit keys).
const KEY_IN_SLOT_BYTES: usize = 8;
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
    gc_records_checked: u64,
    gc_slots_examined: u64,
    gc_slots_copied: u64,
}

/// Where a key's probe window holds the key.
struct Hit {
    page: u64,
    offset: usize,
    pointer: RecordPointer,
    record: Record,
    /// Length of the record's value (the record's value is empty when it was not read).
    value_len: usize,
}

/// What a walk of a key's probe window is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeFor {
    /// A GET: a matching slot's record is read, for its value.
    Get,
    /// A put or delete: the slot found is set next, so the bucket pages are cached as bytes that
    /// can change ([`table::Table::load`]).
    Change,
    /// A presence check: a matching slot's record is read only if its key is not in the slot.
    Presence,
}

/// What a walk of a key's probe window found.
struct Probe {
    hit: Option<Hit>,
    /// The first tombstone or empty slot of the window.
    free: Option<(u64, usize)>,
}

/// A pair waiting in the write buffer, or being applied: the value, `None` for a delete.
type Pending = (Vec<u8>, Option<Vec<u8>>);

/// Which keys the write buffer and the immutable buffers may hold: one bit per value of a key's
/// hash's top bits, set for every key the write buffer takes, all cleared and set again from the
/// buffers' keys when a flush starts. A GET looks its key up in the buffers' trees only where its
/// bit is set: most GETs are of keys no buffer holds, and a tree's search is a dozen key
/// comparisons. The host's speed alone: every bit a buffered key needs is set, and the
/// controller's time for the search is counted either way.
#[derive(Debug, Clone)]
struct BufferedKeys {
    bits: Box<[u64]>,
}

impl BufferedKeys {
    /// Bits kept (a power of two): about thirty per key of two full buffers of 1 KiB pairs, so
    /// that a key no buffer holds finds its bit set about one time in thirty.
    const BITS: usize = 1 << 16;

    fn new() -> BufferedKeys {
        BufferedKeys {
            bits: vec![0; Self::BITS / 64].into_boxed_slice(),
        }
    }

    fn place(hash: u64) -> (usize, u64) {
        let bit = (hash >> (64 - Self::BITS.trailing_zeros())) as usize;
        (bit / 64, 1 << (bit % 64))
    }

    fn add(&mut self, hash: u64) {
        let (word, mask) = Self::place(hash);
        if let Some(word) = self.bits.get_mut(word) {
            *word |= mask;
        }
    }

    /// Whether a key of this hash may be buffered (`false`: no buffer holds it).
    fn may_hold(&self, hash: u64) -> bool {
        let (word, mask) = Self::place(hash);
        self.bits.get(word).is_none_or(|word| word & mask != 0)
    }

    fn clear(&mut self) {
        self.bits.fill(0);
    }
}

/// The hash index of one namespace, over a space layer it may share with other namespaces: every
/// operation takes the [`Space`] it writes to. [`HashEngine`] is an index with a space of its own.
pub struct HashIndex {
    config: HashConfig,
    table: Table,
    buffer: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The previous write buffer while the background thread applies it.
    flushing: Flushing<BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    /// Keys the write buffer and the immutable buffers may hold ([`BufferedKeys`]).
    buffered_keys: BufferedKeys,
    /// GC jobs in flight (see `crate::background::GC_JOBS_IN_FLIGHT_MAX`).
    collecting: Flushing<()>,
    buffer_bytes: u64,
    entries: u64,
    probe_slots: u64,
    page_bytes: usize,
    slot_bytes: u64,
    dram_budget: u64,
    /// `kaml`: the largest table the DRAM budget holds.
    kaml_slots_max: u64,
    value_bytes_max: usize,
    cpu_pending: CpuCounts,
    cpu_total: CpuCounts,
    cpu_ns: u64,
    activity: Activity,
    index_reads: ReadHistogram,
    data_reads: ReadHistogram,
    last_get_index_reads: u32,
    last_get_data_reads: u32,
    /// `key_in_slot`: the value length of every record the table points at, by record pointer.
    /// KAML's 8-byte slot address has room for a record's size in chunks beside its location (a
    /// 375 GB card needs about 32 bits of chunk address); this holds the same.
    record_lengths: HashMap<u64, u32>,
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
        Ok(HashIndex {
            value_bytes_max: config.value_bytes_max(&geometry),
            table,
            buffer: BTreeMap::new(),
            flushing: Flushing::new(config.write_buffer_bytes),
            buffered_keys: BufferedKeys::new(),
            collecting: Flushing::with_limit(crate::background::GC_JOBS_IN_FLIGHT_MAX),
            buffer_bytes: 0,
            entries: 0,
            probe_slots,
            page_bytes,
            slot_bytes,
            dram_budget,
            kaml_slots_max,
            cpu_pending: CpuCounts::default(),
            cpu_total: CpuCounts::default(),
            cpu_ns: 0,
            activity: Activity::default(),
            index_reads: ReadHistogram::default(),
            data_reads: ReadHistogram::default(),
            last_get_index_reads: 0,
            last_get_data_reads: 0,
            record_lengths: HashMap::new(),
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
        if self.config.key_in_slot && key.len() != KEY_IN_SLOT_BYTES {
            return Err(EngineError::Unsupported {
                operation: "a key that is not 8 bytes",
                engine: self.config.preset.name(),
                why: "its slots hold 64-bit keys",
            }
            .into());
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
        self.key_hash(key)
    }

    /// Puts a pair into the write buffer, returning the value it replaced there.
    fn buffer_insert(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) -> Option<Option<Vec<u8>>> {
        self.buffered_keys.add(self.key_hash(&key));
        self.buffer.insert(key, value)
    }

    /// Sets the keys the buffers may hold from what they hold: after a flush started.
    fn reset_buffered_keys(&mut self) {
        self.buffered_keys.clear();
        let keys = self
            .buffer
            .keys()
            .chain(self.flushing.held().flat_map(BTreeMap::keys));
        for key in keys {
            let hash = self.key_hash(key);
            self.buffered_keys.add(hash);
        }
    }

    /// The hash of `key`, charging nothing ([`HashIndex::hash_of`] charges the controller).
    fn key_hash(&self, key: &[u8]) -> u64 {
        match <[u8; KEY_IN_SLOT_BYTES]>::try_from(key) {
            Ok(fixed) if self.config.key_in_slot => bucket::fixed_key_hash(fixed),
            _ => bucket::key_hash(key),
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every hash added is answered "may hold" until the bits are cleared, and after clearing
    /// nothing is.
    #[test]
    fn buffered_keys_never_deny_a_key_they_were_given() {
        let mut keys = BufferedKeys::new();
        let hashes: Vec<u64> = (0..5_000u64)
            .map(|i| bucket::key_hash(format!("user{i:020}").as_bytes()))
            .collect();
        assert!(hashes.iter().all(|&hash| !keys.may_hold(hash)));
        for &hash in &hashes[..2_000] {
            keys.add(hash);
        }
        assert!(hashes[..2_000].iter().all(|&hash| keys.may_hold(hash)));
        // The others mostly not: a few percent share a bit with a key added.
        let denied = hashes[2_000..]
            .iter()
            .filter(|&&hash| !keys.may_hold(hash))
            .count();
        assert!(denied > 2_700, "{denied} of 3000 absent keys denied");
        keys.clear();
        assert!(hashes.iter().all(|&hash| !keys.may_hold(hash)));
    }
}
