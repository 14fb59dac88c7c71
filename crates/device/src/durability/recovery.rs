//! Reading the durable state back: the newest superblock copy, the checkpoint it names and the
//! records of the live log, each checked, with a typed error naming what is wrong.

use std::time::Duration;

use kvssd_flash::{Flash, FlashError, PageAddress, Purpose, SimTime};

use crate::durability::checkpoint::{Checkpoint, Root};
use crate::durability::error::{CheckpointError, WalError};
use crate::durability::journal::SUPERBLOCK_BLOCKS;
use crate::durability::log::{LogEnd, LogReader};
use crate::durability::superblock::{self, SuperblockError};
use crate::durability::wal::{self, WalRecord};
use crate::DeviceError;

/// What recovery found and did.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryReport {
    /// The superblock copy used.
    pub superblock_sequence: u64,
    /// Sequence number the checkpoint was written at (records from there on were replayed).
    pub checkpoint_lsn: u64,
    /// Pages of the checkpoint read.
    pub checkpoint_pages: u64,
    /// Namespaces in the checkpoint.
    pub namespaces: usize,
    /// Log pages read.
    pub log_pages_read: u64,
    /// Log records found complete.
    pub records_found: u64,
    /// Records replayed (found, less those every part already held).
    pub records_replayed: u64,
    /// Stores and deletes replayed.
    pub operations_replayed: u64,
    /// Why the log ended: a clean end, or a torn or foreign page (the unacknowledged tail).
    pub log_end: String,
    /// Simulated time recovery took on the flash model, in nanoseconds.
    pub simulated_ns: u64,
    /// Wall-clock time recovery took.
    pub wall: Duration,
}

/// The newest superblock copy's sequence, its root, each superblock block's write position, and
/// when the reads completed.
pub(crate) type SuperblockFound = (u64, Root, [u32; 2], SimTime);
/// The log's records with their sequence numbers, pages read, why it ended, and when.
pub(crate) type LogFound = (Vec<(u64, WalRecord)>, u64, LogEnd, SimTime);

/// Reads a page; `Ok(None)` when it is erased or stays corrupt after the flash layer's retries
/// ([`kvssd_flash::READ_ATTEMPTS_MAX`] reads).
pub(crate) fn read_page(
    flash: &mut Flash,
    at: SimTime,
    page: PageAddress,
) -> Result<(Option<Vec<u8>>, SimTime), DeviceError> {
    let mut data = vec![0u8; flash.geometry().page_bytes as usize];
    match flash.read_retrying(at, page, Purpose::Recovery, &mut data, &mut []) {
        Ok(read) => Ok((Some(data), read.done_at)),
        Err(FlashError::ReadErased { .. } | FlashError::Corrupt { .. }) => Ok((None, at)),
        Err(error) => Err(DeviceError::Space(error.into())),
    }
}

/// The newest valid superblock copy and each block's write position; `Ok(None)` when both
/// superblock blocks are erased (a blank array).
pub(crate) fn read_superblock(
    flash: &mut Flash,
    at: SimTime,
) -> Result<Option<SuperblockFound>, DeviceError> {
    let geometry = *flash.geometry();
    let mut candidates = Vec::new();
    let mut next_pages = [0u32; 2];
    let mut t = at;
    for (slot, &index) in SUPERBLOCK_BLOCKS.iter().enumerate() {
        let block = geometry.block_at(index);
        let programmed = flash
            .programmed_pages(block)
            .map_err(|error| DeviceError::Space(error.into()))?;
        next_pages[slot] = programmed;
        for page in 0..programmed {
            let (bytes, done) = read_page(flash, at, block.page(page))?;
            t = t.max(done);
            candidates.push(match bytes {
                Some(bytes) => superblock::decode(&bytes),
                None => Err(SuperblockError::Corrupt),
            });
        }
    }
    if next_pages == [0, 0] {
        return Ok(None);
    }
    let newest = superblock::newest(&candidates).map_err(DeviceError::Superblock)?;
    let Some(copy) = newest else {
        let foreign = candidates
            .iter()
            .all(|candidate| matches!(candidate, Err(SuperblockError::NotASuperblock)));
        return Err(if foreign {
            DeviceError::NotADevice
        } else {
            DeviceError::Superblock(SuperblockError::Corrupt)
        });
    };
    let root = Root::decode(&copy.body).map_err(DeviceError::RootCorrupt)?;
    Ok(Some((copy.sequence, root, next_pages, t)))
}

/// The checkpoint the root names, and the pages it took.
pub(crate) fn read_checkpoint(
    flash: &mut Flash,
    at: SimTime,
    root: &Root,
) -> Result<(Checkpoint, u64, SimTime), DeviceError> {
    let geometry = *flash.geometry();
    let Some(location) = &root.checkpoint else {
        return Err(DeviceError::CheckpointCorrupt(CheckpointError::Missing));
    };
    let mut reader = LogReader::new(location.log_id, 0);
    let mut t = at;
    let mut pages = 0;
    for extent in &location.extents {
        if extent.block >= geometry.blocks_total()
            || u64::from(extent.first_page) + u64::from(extent.pages)
                > u64::from(geometry.pages_per_block)
        {
            return Err(DeviceError::CheckpointCorrupt(
                CheckpointError::ExtentOutside {
                    block: extent.block,
                    first_page: extent.first_page,
                    pages: extent.pages,
                },
            ));
        }
        let block = geometry.block_at(extent.block);
        for page in extent.first_page..extent.first_page + extent.pages {
            let (bytes, done) = read_page(flash, at, block.page(page))?;
            t = t.max(done);
            pages += 1;
            reader.offer(bytes.as_deref());
        }
    }
    let (records, end) = reader.finish();
    if end != LogEnd::Exhausted || records.len() != 1 {
        return Err(DeviceError::CheckpointCorrupt(
            CheckpointError::NotOneRecord {
                records: records.len(),
                end,
            },
        ));
    }
    let checkpoint = Checkpoint::decode(&records[0])
        .map_err(|error| DeviceError::CheckpointCorrupt(error.into()))?;
    Ok((checkpoint, pages, t))
}

/// The complete records of the live log, in order, how many pages were read and why it ended.
pub(crate) fn read_log(
    flash: &mut Flash,
    at: SimTime,
    root: &Root,
) -> Result<LogFound, DeviceError> {
    let geometry = *flash.geometry();
    let mut reader = LogReader::new(root.log_id, 0);
    let mut t = at;
    let mut pages = 0;
    'blocks: for &index in &root.log_blocks {
        if index >= geometry.blocks_total() {
            return Err(DeviceError::LogCorrupt(WalError::BlockOutside {
                block: index,
            }));
        }
        let block = geometry.block_at(index);
        for page in 0..geometry.pages_per_block {
            let (bytes, done) = read_page(flash, at, block.page(page))?;
            t = t.max(done);
            pages += 1;
            if !reader.offer(bytes.as_deref()) {
                break 'blocks;
            }
        }
    }
    let (raw, end) = reader.finish();
    let mut records = Vec::with_capacity(raw.len());
    let mut previous: Option<u64> = None;
    for bytes in raw {
        let (lsn, record) =
            wal::decode(&bytes).map_err(|error| DeviceError::LogCorrupt(error.into()))?;
        if let Some(previous) = previous.filter(|&previous| previous.checked_add(1) != Some(lsn)) {
            return Err(DeviceError::LogCorrupt(WalError::SequenceGap {
                lsn,
                previous,
            }));
        }
        previous = Some(lsn);
        records.push((lsn, record));
    }
    Ok((records, pages, end, t))
}
