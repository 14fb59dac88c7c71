//! A hash index's DRAM state as bytes, for checkpoints and power-loss dumps, and its restoration.
//!
//! ```text
//! "KHSH" | version u32 = 1 | preset u8 (1 hash, 2 kaml) | entries u64 | table slots u64
//! directory: count u32, then per bucket page: u8 flag | [flash page u64]      (hash; 0 for kaml)
//! sequence u64                                                                (hash write-backs)
//! pages: count u32, then per page: page u64 | used slots u32, then per slot:
//!        offset u64 | signature u64 | pointer u64     (hash: dirty cached pages; kaml: the table)
//! buffer: count u32, then per pair: key_len u8 | key | kind u8 (0 delete, 1 value) |
//!        [value_len u32 | value]
//! ```
//!
//! Little-endian. Clean cached pages are not saved (their newest copy is on flash); the LRU order
//! is not saved. The write buffer is saved whole because GC and later flushes may have moved or
//! superseded what the log would replay into it.

use kvssd_flash::codec::ByteReader;
use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{RecordPointer, Space};

use super::bucket::Slot;
use super::table::TableState;
use super::{HashConfig, HashError, HashIndex, HashPreset, Result};
use crate::EngineError;

const MAGIC: &[u8; 4] = b"KHSH";
const VERSION: u32 = 1;

fn bad(what: &'static str) -> HashError {
    HashError::Engine(EngineError::CheckpointMalformed(what))
}

impl HashIndex {
    /// Bytes of pairs in the write buffer (what a checkpoint saves whole).
    pub fn buffered_bytes(&self) -> u64 {
        self.buffer_bytes
    }

    /// The index's DRAM state as bytes; see the module documentation for the layout.
    pub fn durable_state(&self) -> Vec<u8> {
        let table = self.table.export();
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(match self.config.preset {
            HashPreset::Hash => 1,
            HashPreset::Kaml => 2,
        });
        out.extend_from_slice(&self.entries.to_le_bytes());
        out.extend_from_slice(&table.total_slots.to_le_bytes());
        out.extend_from_slice(&(table.directory.len() as u32).to_le_bytes());
        for entry in &table.directory {
            match entry {
                None => out.push(0),
                Some(page) => {
                    out.push(1);
                    out.extend_from_slice(&page.to_le_bytes());
                }
            }
        }
        out.extend_from_slice(&table.sequence.to_le_bytes());
        out.extend_from_slice(&(table.pages.len() as u32).to_le_bytes());
        for (page, used) in &table.pages {
            out.extend_from_slice(&page.to_le_bytes());
            out.extend_from_slice(&(used.len() as u32).to_le_bytes());
            for (offset, slot) in used {
                out.extend_from_slice(&offset.to_le_bytes());
                out.extend_from_slice(&slot.signature.to_le_bytes());
                out.extend_from_slice(&slot.pointer.to_le_bytes());
            }
        }
        out.extend_from_slice(&(self.buffer.len() as u32).to_le_bytes());
        for (key, value) in &self.buffer {
            out.push(key.len() as u8);
            out.extend_from_slice(key);
            match value {
                None => out.push(0),
                Some(value) => {
                    out.push(1);
                    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                    out.extend_from_slice(value);
                }
            }
        }
        out
    }

    /// An index rebuilt from [`HashIndex::durable_state`] bytes, writing to `space` under
    /// `config.namespace`. Never panics on bad bytes: they give
    /// [`EngineError::CheckpointMalformed`] (or [`HashError::MalformedBucket`]). Call
    /// [`HashIndex::account_valid`] once every index is restored.
    pub fn restore(space: &Space, config: HashConfig, bytes: &[u8]) -> Result<HashIndex> {
        let mut index = HashIndex::open(space, config)?;
        let mut reader = ByteReader::new(bytes);
        if reader.take(4)? != MAGIC {
            return Err(bad("wrong magic"));
        }
        if reader.u32()? != VERSION {
            return Err(bad("unsupported version"));
        }
        let preset = match reader.u8()? {
            1 => HashPreset::Hash,
            2 => HashPreset::Kaml,
            _ => return Err(bad("unknown hash preset")),
        };
        if preset != index.config.preset {
            return Err(bad("saved for the other hash preset"));
        }
        let entries = reader.u64()?;
        let total_slots = reader.u64()?;
        let count = reader.count(1)?;
        let mut directory = Vec::with_capacity(count);
        for _ in 0..count {
            directory.push(match reader.u8()? {
                0 => None,
                _ => Some(reader.u64()?),
            });
        }
        let sequence = reader.u64()?;
        let count = reader.count(12)?;
        let mut pages = Vec::with_capacity(count);
        for _ in 0..count {
            let page = reader.u64()?;
            let used = reader.count(24)?;
            let mut slots = Vec::with_capacity(used);
            for _ in 0..used {
                let offset = reader.u64()?;
                let signature = reader.u64()?;
                let pointer = reader.u64()?;
                slots.push((offset, Slot { signature, pointer }));
            }
            pages.push((page, slots));
        }
        if preset == HashPreset::Kaml && total_slots > index.kaml_slots_max.max(1) {
            return Err(bad("a table larger than the DRAM budget allows"));
        }
        let state = TableState {
            total_slots,
            directory,
            sequence,
            pages,
        };
        let pages_total = space.geometry().pages_total();
        index.table.import(&state, pages_total)?;
        let count = reader.count(2)?;
        for _ in 0..count {
            let len = usize::from(reader.u8()?);
            if len == 0 {
                return Err(bad("an empty key"));
            }
            let key = reader.take(len)?.to_vec();
            let value = match reader.u8()? {
                0 => None,
                1 => {
                    let len = reader.u32()? as usize;
                    Some(reader.take(len)?.to_vec())
                }
                _ => return Err(bad("unknown buffer entry kind")),
            };
            index.buffer_bytes += Self::pair_bytes(&key, value.as_deref());
            index.buffer_insert(key, value);
        }
        reader.finish()?;
        index.entries = entries;
        Ok(index)
    }

    /// Reports every bucket page and record the index references to the space layer's
    /// accounting (after a restart). Reads every bucket page not cached and one record per live
    /// slot (its lengths are on flash only).
    pub fn account_valid(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let (live, on_flash, mut t) = self.table.live_slots(space, at)?;
        for page in on_flash {
            space.account_meta_page(page);
        }
        for slot in live {
            let pointer = RecordPointer::from_raw(slot.pointer);
            let (record, done) = space.read_record(t, pointer, Purpose::Recovery)?;
            t = t.max(done);
            space.account_record(pointer, record.key.len(), record.value.len());
            if self.config.key_in_slot {
                self.record_lengths
                    .insert(slot.pointer, record.value.len() as u32);
            }
        }
        Ok(t)
    }
}
