//! Reading the conventional path's state back after a crash or a clean close: the anchor, the
//! page directory and the committed tail of the log ring ([`super::format`] gives the bytes).
//!
//! The log is scanned whole: every block of the ring that starts a record whose checksum holds
//! (and whose LSN names that block) is a committed record; the newest of them, `M`, and the
//! anchor give the truncation point `T` (the larger of the anchor's and `M`'s `oldest`). The
//! records from `T` to `M` must follow each other without a gap (the ring never overwrites a
//! record at or after the truncation point on the device, and one commit writes the log at a
//! time, so only the record being written at the cut can be torn, and it is the last); they are
//! returned for redo in LSN order. A torn or half-written record fails its checksum and is
//! ignored, as are stale records of earlier laps (older than `T`).

use std::collections::BTreeMap;

use kvssd_device::{Device, NamespaceId};
use kvssd_engine::block::lba_key;

use super::format::{self, DirectoryEntry, LogRecord};
use super::ConventionalConfig;
use crate::error::{HostError, Result};

/// What recovery read from the device.
pub(super) struct Recovered {
    /// The page directory, in the order it was written.
    pub(super) directory: Vec<DirectoryEntry>,
    /// The last directory block written: its index in the region, entry count and entry bytes.
    pub(super) directory_tail: Option<(u64, u32, Vec<u8>)>,
    /// Committed log records to redo, in LSN order.
    pub(super) records: Vec<LogRecord>,
    /// The truncation point on the device.
    pub(super) oldest: u64,
    /// The LSN the next record gets.
    pub(super) next_lsn: u64,
}

fn corrupt(what: impl Into<String>) -> HostError {
    HostError::Corrupt(what.into())
}

/// Reads one logical block (`None`: never written or trimmed).
fn block(device: &Device, namespace: NamespaceId, lba: u64) -> Result<Option<Vec<u8>>> {
    let (found, _) = device.retrieve(0, namespace, &lba_key(lba), None)?;
    Ok(found.map(|found| found.value))
}

/// Reads the anchor, the directory and the log of the conventional path's namespace; `None`: the
/// namespace was created but nothing written to it (a cut before its first write).
pub(super) fn recover(
    device: &Device,
    namespace: NamespaceId,
    config: &ConventionalConfig,
) -> Result<Option<Recovered>> {
    let Some(bytes) = block(device, namespace, config.anchor_lba())? else {
        // The anchor is the first thing written to a new namespace: without it, nothing was.
        return Ok(None);
    };
    let found = format::decode_anchor(&bytes).map_err(corrupt)?;
    let expected = config.anchor(found.oldest);
    if found != expected {
        return Err(HostError::Invalid(format!(
            "the conventional path on this device has {} B pages, a log of {} blocks and a \
             directory of {} blocks; it was opened with {} B, {} and {}",
            found.page_bytes,
            found.log_blocks,
            found.directory_blocks,
            expected.page_bytes,
            expected.log_blocks,
            expected.directory_blocks
        )));
    }
    let anchor = found.oldest;
    let mut directory = Vec::new();
    let mut directory_tail = None;
    for index in 0..config.directory_blocks {
        let Some(bytes) = block(device, namespace, config.directory_lba(index))? else {
            break;
        };
        let (entries, encoded) = format::decode_directory_block(&bytes).map_err(corrupt)?;
        directory_tail = Some((index, entries.len() as u32, encoded));
        directory.extend(entries);
    }
    let ring = read_ring(device, namespace, config)?;
    let mut valid: BTreeMap<u64, LogRecord> = BTreeMap::new();
    for (index, bytes) in ring.iter().enumerate() {
        let Some(bytes) = bytes else { continue };
        let Some((lsn, total)) = format::log_header(bytes) else {
            continue;
        };
        if lsn % config.log_blocks != index as u64 {
            continue;
        }
        let Some(whole) = gather(&ring, index, total, config.page_bytes) else {
            continue;
        };
        if let Some(record) = format::decode_log(&whole).map_err(corrupt)? {
            valid.insert(lsn, record);
        }
    }
    let Some((&newest, last)) = valid.last_key_value() else {
        return Ok(Some(Recovered {
            directory,
            directory_tail,
            records: Vec::new(),
            oldest: anchor,
            next_lsn: anchor,
        }));
    };
    let oldest = anchor.max(last.oldest);
    let past = |lsn: u64, record: &LogRecord| {
        lsn.checked_add(blocks_of(record, config.page_bytes))
            .ok_or_else(|| corrupt(format!("a log record's LSN {lsn} is out of range")))
    };
    let end = past(newest, last)?;
    if oldest > newest {
        return Ok(Some(Recovered {
            directory,
            directory_tail,
            records: Vec::new(),
            oldest,
            next_lsn: oldest.max(end),
        }));
    }
    let mut records = Vec::new();
    let mut lsn = oldest;
    while lsn <= newest {
        let record = valid.remove(&lsn).ok_or_else(|| {
            corrupt(format!(
                "the commit log has no intact record at LSN {lsn} (block {}), but a later one \
                 (LSN {newest}) is intact: an acknowledged commit would be lost",
                lsn % config.log_blocks
            ))
        })?;
        lsn = past(lsn, &record)?;
        records.push(record);
    }
    Ok(Some(Recovered {
        directory,
        directory_tail,
        records,
        oldest,
        next_lsn: end,
    }))
}

/// Blocks a decoded record spans.
fn blocks_of(record: &LogRecord, page_bytes: usize) -> u64 {
    let bytes = format::LOG_HEADER_BYTES
        + record
            .entries
            .iter()
            .map(|entry| {
                format::LOG_ENTRY_HEADER_BYTES
                    + entry.key.len()
                    + entry.value.as_ref().map_or(0, Vec::len)
            })
            .sum::<usize>();
    bytes.div_ceil(page_bytes) as u64
}

/// Every block of the ring.
fn read_ring(
    device: &Device,
    namespace: NamespaceId,
    config: &ConventionalConfig,
) -> Result<Vec<Option<Vec<u8>>>> {
    (0..config.log_blocks)
        .map(|index| block(device, namespace, config.log_lba(index)))
        .collect()
}

/// The `total` bytes of a record starting at block `index`, across the ring's end if it wraps;
/// `None` if a block it needs is missing or the record is longer than the ring.
fn gather(
    ring: &[Option<Vec<u8>>],
    index: usize,
    total: usize,
    page_bytes: usize,
) -> Option<Vec<u8>> {
    let blocks = total.div_ceil(page_bytes);
    if blocks == 0 || blocks > ring.len() {
        return None;
    }
    let mut bytes = Vec::with_capacity(blocks * page_bytes);
    for offset in 0..blocks {
        let block = ring[(index + offset) % ring.len()].as_ref()?;
        bytes.extend_from_slice(block.get(..page_bytes)?);
    }
    bytes.truncate(total);
    Some(bytes)
}
