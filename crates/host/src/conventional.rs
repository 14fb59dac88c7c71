//! The conventional commit path: a storage engine in the shape of Shore-MT (KAML's baseline,
//! §V-D), built from this project's parts. It is not Shore-MT; it keeps the two costs KAML blames
//! for Shore-MT's slower commits:
//!
//! * **Records in pages** on a `block` namespace (one logical block per page): a page holds
//!   `page_bytes / (2 + value_bytes_max)` records of one table at fixed slots (a little-endian
//!   `u16` of length + 1, 0 for an empty slot, then the value), record `n` of a key prefix in page
//!   `n / records_per_page`. A cache miss reads the whole page and fills the cache with all its
//!   records, as a buffer pool would.
//! * **One central, synchronous commit log**: a commit writes its records (table, key, value) to
//!   the log, whole logical blocks at the log's head in a circular region of `log_blocks` blocks,
//!   and waits for the write to be durable; only one transaction writes the log at a time (the log
//!   latch), so commits queue behind each other even when their records do not conflict. No group
//!   commit.
//! * **No-force, a background page cleaner** ([`cleaner`]): committed records stay dirty in
//!   the cache; the cleaner, one writer with one round in flight on the simulated clock, writes
//!   the records the oldest log records changed into their pages, competing with foreground
//!   work for the flash: every record changed further back than `clean_log_share` of the ring
//!   (so the log still needed stays near that share), and while dirty records take more than
//!   `checkpoint_dirty_bytes`, at least `clean_records_per_commit` of them. Whole pages when the
//!   cache holds the page whole (read whole, or allocated during the run, and none of its
//!   records evicted since), with every dirty record in it; else a sub-block write per record
//!   (the `block` preset reads the rest of the page, a read-modify-write).
//! * **A write-ahead log, replayed at open**: the log is the only durable copy of a commit until
//!   the cleaner has written its pages. Every record carries its LSN, the truncation point and a
//!   checksum ([`format`]); opening a device that already holds this path's namespace (named
//!   [`CONVENTIONAL_NAMESPACE`]) reads the page directory and the committed tail of the log back
//!   ([`recovery`]) and redoes it into the pages before the host serves anything. The log is
//!   truncated as the cleaner writes pages: each record names the oldest LSN a dirty record
//!   still needs. A full checkpoint writes every dirty record and then the anchor: on
//!   [`crate::Host::checkpoint`], and, the last resort, before a commit that would overwrite a
//!   record still needed (the cleaner fell behind), which waits for it holding its locks.
//!
//! Device layout (one `block` namespace, one logical block per page): LBA 0 the anchor, then
//! `log_blocks` blocks of log ring, then `directory_blocks` blocks of page directory (which LBA
//! holds page `index` of a table's key prefix: written with the first write of a page), then the
//! pages.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use kvssd_device::{BatchOp, Device, NamespaceId, NamespaceSpec, PresetKind, StoreMode};
use kvssd_engine::block::{lba_key, lba_offset_key};
use kvssd_flash::SimTime;

use crate::error::{HostError, Result};
use crate::host::Table;
use crate::locks::record_number;
use crate::TableId;

mod cleaner;
mod format;
mod recovery;

use format::{DirectoryEntry, LogEntry};

/// The name of the conventional path's namespace on the device.
pub const CONVENTIONAL_NAMESPACE: &str = "host-conventional";

/// Bytes of a slot's length field.
const SLOT_HEADER_BYTES: usize = 2;

/// The conventional path's settings.
#[derive(Debug, Clone)]
pub struct ConventionalConfig {
    /// Bytes of a page: must equal the device's `block` logical block (8 KiB, Shore-MT's page).
    pub page_bytes: usize,
    /// Logical blocks of the circular commit log. A commit that would overwrite a record still
    /// needed (one whose pages the cleaner has not written) first has every dirty record
    /// written (a full checkpoint).
    pub log_blocks: u64,
    /// Logical blocks reserved for the page directory.
    pub directory_blocks: u64,
    /// While dirty records take more than this many cache bytes, each round of the page
    /// cleaner writes at least `clean_records_per_commit` of them.
    pub checkpoint_dirty_bytes: u64,
    /// Dirty records a round of the page cleaner writes at least while dirty records take more
    /// than `checkpoint_dirty_bytes` (those the oldest log records changed, each with the other
    /// dirty records of its page).
    pub clean_records_per_commit: usize,
    /// Share of the log ring, in (0, 1], the log still needed may fill before the page cleaner
    /// writes the records the oldest log records changed (every record changed further back).
    pub clean_log_share: f64,
}

impl ConventionalConfig {
    /// The anchor sits at LBA 0 whatever the layout, so a host opened with another one finds
    /// it and is refused.
    fn anchor_lba(&self) -> u64 {
        0
    }

    fn log_lba(&self, block: u64) -> u64 {
        1 + block % self.log_blocks
    }

    fn directory_lba(&self, index: u64) -> u64 {
        1 + self.log_blocks + index
    }

    fn first_page_lba(&self) -> u64 {
        self.directory_lba(self.directory_blocks)
    }

    fn anchor(&self, oldest: u64) -> format::Anchor {
        format::Anchor {
            oldest,
            page_bytes: self.page_bytes as u32,
            log_blocks: self.log_blocks,
            directory_blocks: self.directory_blocks,
        }
    }
}

impl Default for ConventionalConfig {
    fn default() -> Self {
        ConventionalConfig {
            page_bytes: 8192,
            log_blocks: 8192,
            directory_blocks: 4096,
            checkpoint_dirty_bytes: 4 << 20,
            clean_records_per_commit: 64,
            clean_log_share: 0.5,
        }
    }
}

/// A record of a commit for the log: table, key, value (`None`: deleted).
pub(crate) type LogRecord<'a> = (TableId, &'a [u8], Option<&'a [u8]>);

/// The cache's value of a key, if it holds one (a checkpoint builds whole pages from it).
pub(crate) type CachedValue<'a> = &'a dyn Fn(TableId, &[u8]) -> Option<Vec<u8>>;

pub(crate) struct Conventional {
    namespace: NamespaceId,
    config: ConventionalConfig,
    /// Page number of (table, key prefix, page index) → LBA.
    pages: HashMap<(TableId, Vec<u8>, u64), u64>,
    next_lba: u64,
    /// The LSN of the next log record (log blocks ever written; block `lsn % log_blocks`).
    log_head: u64,
    /// The truncation point on the device: records before it are in their pages, and the ring
    /// must keep every block from it on.
    log_oldest: u64,
    log_free_at: SimTime,
    /// When the page cleaner's round in flight is written: the next starts then.
    cleaner_free_at: SimTime,
    /// Dirty or deleted records not yet in their pages → the LSN of the oldest log record that
    /// changed them since (redo must start there), and how many records each such LSN holds.
    dirty_since: HashMap<(TableId, Vec<u8>), u64>,
    dirty_lsns: BTreeMap<u64, BTreeSet<(TableId, Vec<u8>)>>,
    /// Records deleted since the last checkpoint (their pages still hold them).
    deleted: BTreeSet<(TableId, Vec<u8>)>,
    /// Pages the cache holds whole (read from the device, or allocated during the run and never
    /// partly evicted), as a buffer pool would hold them: a key missing from the cache but in
    /// such a page is absent, with no device read (an insert into a page in memory).
    resident: HashSet<u64>,
    /// Directory entries of pages allocated since the directory was last written.
    directory_pending: Vec<DirectoryEntry>,
    /// The directory's last block on the device: its index, entry count and entry bytes.
    directory_tail: Option<(u64, u32, Vec<u8>)>,
    /// Each table's slot size as the device knows it (pages or log).
    slots: HashMap<TableId, usize>,
    /// Log entries recovery redid when the path opened.
    replayed: u64,
}

impl Conventional {
    /// Opens the path's namespace: recovers it if the device has one (directory, log replayed
    /// into the pages), else creates it.
    pub(crate) fn open(device: &Device, config: ConventionalConfig) -> Result<Conventional> {
        let page_bytes_min = format::DIRECTORY_HEADER_BYTES + format::DIRECTORY_ENTRY_BYTES;
        if config.page_bytes < page_bytes_min
            || config.page_bytes > u32::MAX as usize
            || config.log_blocks == 0
        {
            return Err(HostError::Invalid(format!(
                "the conventional path needs pages of at least {page_bytes_min} bytes and a log \
                 of at least one block, not {} bytes and {} blocks",
                config.page_bytes, config.log_blocks
            )));
        }
        if !(config.clean_log_share > 0.0 && config.clean_log_share <= 1.0) {
            return Err(HostError::Invalid(format!(
                "the page cleaner's share of the log ring must be in (0, 1], not {}",
                config.clean_log_share
            )));
        }
        let mut conventional = Conventional {
            namespace: NamespaceId(0),
            next_lba: config.first_page_lba(),
            pages: HashMap::new(),
            log_head: 0,
            log_oldest: 0,
            log_free_at: 0,
            cleaner_free_at: 0,
            dirty_since: HashMap::new(),
            dirty_lsns: BTreeMap::new(),
            deleted: BTreeSet::new(),
            resident: HashSet::new(),
            directory_pending: Vec::new(),
            directory_tail: None,
            slots: HashMap::new(),
            replayed: 0,
            config,
        };
        match device.namespace_by_name(CONVENTIONAL_NAMESPACE)? {
            Some(namespace) => {
                conventional.namespace = namespace;
                conventional.recover(device)?;
            }
            None => {
                let preset: PresetKind = "block"
                    .parse()
                    .map_err(|error| HostError::Invalid(format!("{error}")))?;
                conventional.namespace = device.create_namespace(
                    NamespaceSpec::new(preset).with_name(CONVENTIONAL_NAMESPACE),
                )?;
                // The layout, for recovery to check it is read as it was written.
                conventional.anchor(device, 0)?;
            }
        }
        Ok(conventional)
    }

    /// Reads the directory and the log back and redoes the committed records into their pages
    /// (their after-images, in LSN order: redoing twice, after a crash during recovery, gives
    /// the same pages).
    fn recover(&mut self, device: &Device) -> Result<()> {
        let Some(recovered) = recovery::recover(device, self.namespace, &self.config)? else {
            self.anchor(device, 0)?;
            return Ok(());
        };
        for entry in recovered.directory {
            self.learn_slot(entry.table, entry.value_bytes_max)?;
            let next = entry
                .lba
                .checked_add(1)
                .filter(|_| entry.lba >= self.config.first_page_lba())
                .ok_or_else(|| {
                    HostError::Corrupt(format!(
                        "the page directory names LBA {}, outside the pages",
                        entry.lba
                    ))
                })?;
            self.next_lba = self.next_lba.max(next);
            self.pages
                .insert((entry.table, entry.prefix, entry.index), entry.lba);
        }
        self.directory_tail = recovered.directory_tail;
        self.log_head = recovered.next_lsn;
        self.log_oldest = recovered.oldest;
        let mut slots: BTreeMap<(u64, u32), Vec<u8>> = BTreeMap::new();
        for LogEntry {
            table,
            value_bytes_max,
            key,
            value,
        } in recovered
            .records
            .into_iter()
            .flat_map(|record| record.entries)
        {
            self.learn_slot(table, value_bytes_max)?;
            self.check_slot(value_bytes_max)?;
            let (lba, slot, _) = self.place(table, value_bytes_max, &key)?;
            let offset = (slot * (SLOT_HEADER_BYTES + value_bytes_max)) as u32;
            slots.insert((lba, offset), Self::encode_slot(value.as_deref()));
            self.replayed += 1;
        }
        let patches: Vec<BatchOp> = slots
            .into_iter()
            .map(|((lba, offset), slot)| self.store(lba_offset_key(lba, offset).to_vec(), slot))
            .collect();
        self.write(device, 0, patches, 256)?;
        Ok(())
    }

    /// Log entries recovery redid when the path opened.
    pub(crate) fn replayed(&self) -> u64 {
        self.replayed
    }

    /// Records a table's slot size, refusing one that contradicts what the device holds.
    fn learn_slot(&mut self, table: TableId, value_bytes_max: usize) -> Result<()> {
        let known = *self.slots.entry(table).or_insert(value_bytes_max);
        if known != value_bytes_max {
            return Err(HostError::Corrupt(format!(
                "table {table} has values of at most {known} bytes and of at most \
                 {value_bytes_max} bytes on the device"
            )));
        }
        Ok(())
    }

    /// Checks a table created on a host opened over an existing namespace against what the
    /// device holds of it; returns whether the device holds any of it.
    pub(crate) fn check_table(&self, table: TableId, value_bytes_max: usize) -> Result<bool> {
        match self.slots.get(&table) {
            Some(&known) if known != value_bytes_max => Err(HostError::Invalid(format!(
                "table {table} holds values of at most {known} bytes on the device, not \
                 {value_bytes_max}: create the tables in the order and with the sizes they had"
            ))),
            known => Ok(known.is_some()),
        }
    }

    fn store(&self, key: Vec<u8>, value: Vec<u8>) -> BatchOp {
        BatchOp::Store {
            namespace: self.namespace,
            key,
            value,
            mode: StoreMode::Upsert,
        }
    }

    /// Writes page operations in batches of `chunk`, the directory blocks naming any page
    /// allocated since the directory was last written first; returns when the last is done and
    /// the commands issued.
    fn write(
        &mut self,
        device: &Device,
        at: SimTime,
        operations: Vec<BatchOp>,
        chunk: usize,
    ) -> Result<(SimTime, u64)> {
        let mut operations = operations;
        let directory = self.directory_operations()?;
        if !directory.is_empty() {
            operations.splice(0..0, directory);
        }
        let mut done = at;
        let mut commands = 0;
        for chunk in operations.chunks(chunk) {
            done = done.max(device.batch(at, chunk)?);
            commands += 1;
        }
        Ok((done, commands))
    }

    /// The directory blocks to write for the pages allocated since it was last written.
    fn directory_operations(&mut self) -> Result<Vec<BatchOp>> {
        if self.directory_pending.is_empty() {
            return Ok(Vec::new());
        }
        let room = self.config.page_bytes - format::DIRECTORY_HEADER_BYTES;
        let (mut index, mut count, mut bytes) = self.directory_tail.take().unwrap_or_default();
        let mut blocks = Vec::new();
        for entry in std::mem::take(&mut self.directory_pending) {
            let encoded = format::encode_directory_entry(&entry);
            if encoded.len() > room {
                return Err(HostError::Invalid(format!(
                    "a key prefix of {} bytes does not fit a page directory block of {} bytes",
                    entry.prefix.len(),
                    self.config.page_bytes
                )));
            }
            if bytes.len() + encoded.len() > room {
                blocks.push((index, count, std::mem::take(&mut bytes)));
                index += 1;
                count = 0;
            }
            bytes.extend_from_slice(&encoded);
            count += 1;
        }
        blocks.push((index, count, bytes));
        if index >= self.config.directory_blocks {
            return Err(HostError::Invalid(format!(
                "the page directory is full ({} blocks): raise directory_blocks",
                self.config.directory_blocks
            )));
        }
        let operations = blocks
            .iter()
            .map(|(index, count, bytes)| {
                let block = format::encode_directory_block(*count, bytes, self.config.page_bytes);
                self.store(lba_key(self.config.directory_lba(*index)).to_vec(), block)
            })
            .collect();
        self.directory_tail = blocks.pop();
        Ok(operations)
    }

    fn records_per_page(&self, value_bytes_max: usize) -> usize {
        self.config.page_bytes / (SLOT_HEADER_BYTES + value_bytes_max)
    }

    pub(crate) fn check_slot(&self, value_bytes_max: usize) -> Result<()> {
        if self.records_per_page(value_bytes_max) == 0 || value_bytes_max >= u16::MAX as usize {
            return Err(HostError::Invalid(format!(
                "a page of {} bytes cannot hold a value of {value_bytes_max} bytes",
                self.config.page_bytes
            )));
        }
        Ok(())
    }

    pub(crate) fn log_free_at(&self) -> SimTime {
        self.log_free_at
    }

    /// The page of a key: its LBA (allocated on first use), its slot, its key prefix and index.
    fn place(
        &mut self,
        table: TableId,
        value_bytes_max: usize,
        key: &[u8],
    ) -> Result<(u64, usize, u64)> {
        if key.len() < 8 {
            return Err(HostError::Invalid(
                "the conventional path needs keys of at least 8 bytes (a record number last)"
                    .into(),
            ));
        }
        let per_page = self.records_per_page(value_bytes_max) as u64;
        if per_page == 0 {
            self.check_slot(value_bytes_max)?;
        }
        let (prefix, number) = record_number(key);
        let index = number / per_page.max(1);
        let name = (table, prefix.to_vec(), index);
        if let Some(&lba) = self.pages.get(&name) {
            return Ok((lba, (number % per_page) as usize, index));
        }
        let lba = self.next_lba;
        self.next_lba = lba
            .checked_add(1)
            .ok_or_else(|| HostError::Invalid("no logical block is left for a page".into()))?;
        self.directory_pending.push(DirectoryEntry {
            lba,
            index,
            table,
            value_bytes_max,
            prefix: prefix.to_vec(),
        });
        self.pages.insert(name, lba);
        Ok((lba, (number % per_page) as usize, index))
    }

    /// Whether the cache holds the whole page of `key` (so a key it lacks is absent). A page
    /// that does not exist yet is allocated empty, and so is whole.
    pub(crate) fn page_resident(&mut self, table: TableId, info: &Table, key: &[u8]) -> bool {
        let per_page = self.records_per_page(info.value_bytes_max).max(1) as u64;
        let (prefix, number) = record_number(key);
        let name = (table, prefix.to_vec(), number / per_page);
        match self.pages.get(&name) {
            Some(lba) => self.resident.contains(lba),
            None => match self.place(table, info.value_bytes_max, key) {
                Ok((lba, _, _)) => {
                    self.resident.insert(lba);
                    true
                }
                Err(_) => false,
            },
        }
    }

    /// A record of the page left the cache: the page is no longer whole there.
    pub(crate) fn evicted(&mut self, table: TableId, info: &Table, key: &[u8]) {
        let per_page = self.records_per_page(info.value_bytes_max).max(1) as u64;
        let (prefix, number) = record_number(key);
        if let Some(lba) = self.pages.get(&(table, prefix.to_vec(), number / per_page)) {
            self.resident.remove(lba);
        }
    }

    fn slot_bytes(info: &Table) -> usize {
        SLOT_HEADER_BYTES + info.value_bytes_max
    }

    fn encode_slot(value: Option<&[u8]>) -> Vec<u8> {
        let mut slot = Vec::with_capacity(SLOT_HEADER_BYTES + value.map_or(0, <[u8]>::len));
        let len = value.map_or(0, |value| value.len() as u16 + 1);
        slot.extend_from_slice(&len.to_le_bytes());
        if let Some(value) = value {
            slot.extend_from_slice(value);
        }
        slot
    }

    /// Reads the page holding `key`: every record in it (less those deleted since the last
    /// checkpoint).
    #[allow(clippy::type_complexity)]
    pub(crate) fn read_page(
        &mut self,
        device: &Device,
        at: SimTime,
        table: TableId,
        info: &Table,
        key: &[u8],
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, SimTime)> {
        let (lba, _, index) = self.place(table, info.value_bytes_max, key)?;
        let (prefix, _) = record_number(key);
        let (page, done) = device.retrieve(at, self.namespace, &lba_key(lba), None)?;
        self.resident.insert(lba);
        let Some(page) = page else {
            return Ok((Vec::new(), done));
        };
        let slot_bytes = Self::slot_bytes(info);
        let per_page = self.records_per_page(info.value_bytes_max);
        let mut records = Vec::new();
        for slot in 0..per_page {
            let start = slot * slot_bytes;
            let Some(header) = page.value.get(start..start + SLOT_HEADER_BYTES) else {
                break;
            };
            let len = u16::from_le_bytes([header[0], header[1]]) as usize;
            if len == 0 {
                continue;
            }
            let body = start + SLOT_HEADER_BYTES;
            let Some(value) = page.value.get(body..body + len - 1) else {
                return Err(HostError::Invalid(format!(
                    "page {lba} holds a slot longer than the page"
                )));
            };
            let mut record_key = prefix.to_vec();
            record_key.extend_from_slice(&(index * per_page as u64 + slot as u64).to_be_bytes());
            if !self.deleted.contains(&(table, record_key.clone())) {
                records.push((record_key, value.to_vec()));
            }
        }
        Ok((records, done))
    }

    /// Writes records into fresh pages, whole pages at a time; returns when the last is done and
    /// the commands issued.
    pub(crate) fn load(
        &mut self,
        device: &Device,
        at: SimTime,
        tables: &[Table],
        records: &[(TableId, Vec<u8>, Vec<u8>)],
    ) -> Result<(SimTime, u64)> {
        let mut images: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        // Records of a page an earlier call already wrote are patched in, so a page that spans
        // two loads keeps the first one's records.
        let mut patches = Vec::new();
        for (table, key, value) in records {
            let info = tables
                .get(table.0 as usize)
                .ok_or(HostError::TableUnknown(*table))?;
            let (prefix, number) = record_number(key);
            let index = number / self.records_per_page(info.value_bytes_max).max(1) as u64;
            let existed = self.pages.contains_key(&(*table, prefix.to_vec(), index));
            let (lba, slot, _) = self.place(*table, info.value_bytes_max, key)?;
            let slot_bytes = Self::slot_bytes(info);
            let encoded = Self::encode_slot(Some(value));
            if existed && !images.contains_key(&lba) {
                patches.push(self.store(
                    lba_offset_key(lba, (slot * slot_bytes) as u32).to_vec(),
                    encoded,
                ));
                continue;
            }
            let image = images
                .entry(lba)
                .or_insert_with(|| vec![0; self.config.page_bytes]);
            image[slot * slot_bytes..slot * slot_bytes + encoded.len()].copy_from_slice(&encoded);
        }
        // The host caches what it loads, so these pages start whole in the cache (until one of
        // their records is evicted).
        self.resident.extend(images.keys().copied());
        let images: Vec<BatchOp> = images
            .into_iter()
            .map(|(lba, image)| self.store(lba_key(lba).to_vec(), image))
            .collect();
        let (images_done, image_commands) = self.write(device, at, images, 64)?;
        let (patches_done, patch_commands) = self.write(device, at, patches, 256)?;
        Ok((
            images_done.max(patches_done),
            image_commands + patch_commands,
        ))
    }

    /// A commit's log entries: its records with their tables' slot sizes.
    fn log_entries<'a>(
        tables: &[Table],
        records: &[LogRecord<'a>],
    ) -> Result<Vec<format::EntryRef<'a>>> {
        records
            .iter()
            .map(|&(table, key, value)| {
                let info = tables
                    .get(table.0 as usize)
                    .ok_or(HostError::TableUnknown(table))?;
                Ok((table, info.value_bytes_max, key, value))
            })
            .collect()
    }

    /// Log blocks a commit of these records takes.
    fn log_blocks_for(&self, records: &[LogRecord<'_>]) -> u64 {
        let bytes = format::LOG_HEADER_BYTES
            + records
                .iter()
                .map(|(_, key, value)| {
                    format::LOG_ENTRY_HEADER_BYTES + key.len() + value.map_or(0, <[u8]>::len)
                })
                .sum::<usize>();
        bytes.div_ceil(self.config.page_bytes) as u64
    }

    /// Whether the ring has room for a commit of these records without overwriting a record
    /// still needed; if not, every dirty record must be written first ([`Self::anchor`]). A
    /// commit larger than the whole ring is refused.
    pub(crate) fn log_has_room(&self, records: &[LogRecord<'_>]) -> Result<bool> {
        let blocks = self.log_blocks_for(records);
        if blocks > self.config.log_blocks {
            return Err(HostError::Invalid(format!(
                "a commit of {blocks} log blocks does not fit the log of {} blocks",
                self.config.log_blocks
            )));
        }
        Ok(self.log_head.saturating_add(blocks)
            <= self.log_oldest.saturating_add(self.config.log_blocks))
    }

    /// Writes a commit's records to the log (whole blocks at its head) under the log latch;
    /// returns when they are durable. The caller has made room ([`Self::log_has_room`]).
    pub(crate) fn log_commit(
        &mut self,
        device: &Device,
        at: SimTime,
        tables: &[Table],
        records: &[LogRecord<'_>],
    ) -> Result<SimTime> {
        if !self.log_has_room(records)? {
            return Err(HostError::Invalid(
                "the commit log is full of records whose pages are not written".into(),
            ));
        }
        let entries = Self::log_entries(tables, records)?;
        let lsn = self.log_head;
        let head = lsn
            .checked_add(self.log_blocks_for(records))
            .ok_or_else(|| HostError::Invalid("the log's LSNs are exhausted".into()))?;
        let oldest = self
            .dirty_lsns
            .first_key_value()
            .map_or(lsn, |(&oldest, _)| oldest.min(lsn))
            .max(self.log_oldest);
        let mut log = format::encode_log(lsn, oldest, &entries);
        let blocks = log.len().div_ceil(self.config.page_bytes);
        log.resize(blocks * self.config.page_bytes, 0);
        let operations: Vec<BatchOp> = log
            .chunks(self.config.page_bytes)
            .enumerate()
            .map(|(offset, block)| {
                let lba = self.config.log_lba(lsn + offset as u64);
                self.store(lba_key(lba).to_vec(), block.to_vec())
            })
            .collect();
        let done = device.batch(at, &operations)?;
        self.log_head = head;
        self.log_oldest = oldest;
        self.log_free_at = done;
        for (table, key, value) in records {
            let name = (*table, key.to_vec());
            if value.is_none() {
                self.deleted.insert(name.clone());
            } else {
                self.deleted.remove(&name);
            }
            if let std::collections::hash_map::Entry::Vacant(entry) =
                self.dirty_since.entry(name.clone())
            {
                entry.insert(lsn);
                self.dirty_lsns.entry(lsn).or_default().insert(name);
            }
        }
        Ok(done)
    }

    /// A record is in its page: the log no longer needs it for it.
    fn written(&mut self, name: &(TableId, Vec<u8>)) {
        if let Some(lsn) = self.dirty_since.remove(name) {
            if let Some(names) = self.dirty_lsns.get_mut(&lsn) {
                names.remove(name);
                if names.is_empty() {
                    self.dirty_lsns.remove(&lsn);
                }
            }
        }
    }

    /// After a full checkpoint (every dirty record and deletion written, durable by `at`):
    /// writes the anchor, truncating the whole log; returns when it is durable.
    pub(crate) fn anchor(&mut self, device: &Device, at: SimTime) -> Result<SimTime> {
        let oldest = self
            .dirty_lsns
            .first_key_value()
            .map_or(self.log_head, |(&oldest, _)| oldest)
            .max(self.log_oldest);
        let block = format::encode_anchor(&self.config.anchor(oldest));
        let operation = self.store(lba_key(self.config.anchor_lba()).to_vec(), block);
        let done = device.batch(at, &[operation])?;
        self.log_oldest = oldest;
        Ok(done)
    }

    /// Writes dirty records (and deletions since the last checkpoint) into their pages, issued at
    /// `at` in the background; returns when the last write is done and the commands issued.
    pub(crate) fn checkpoint(
        &mut self,
        device: &Device,
        at: SimTime,
        tables: &[Table],
        dirty: &[(TableId, Vec<u8>, Vec<u8>)],
        cached: CachedValue<'_>,
    ) -> Result<(SimTime, u64)> {
        let deleted = std::mem::take(&mut self.deleted);
        let names: Vec<(TableId, Vec<u8>)> = dirty
            .iter()
            .map(|(table, key, _)| (*table, key.clone()))
            .chain(deleted.iter().cloned())
            .collect();
        let mut patches = Vec::new();
        // Pages the cache holds whole are written whole (no read-modify-write), as a buffer
        // pool writes its pages; the others get a sub-block write per record.
        let mut whole: BTreeMap<u64, (TableId, Vec<u8>, u64)> = BTreeMap::new();
        let writes = dirty
            .iter()
            .map(|(table, key, value)| (*table, key.clone(), Some(value.as_slice())))
            .chain(deleted.into_iter().map(|(table, key)| (table, key, None)));
        for (table, key, value) in writes {
            let info = tables
                .get(table.0 as usize)
                .ok_or(HostError::TableUnknown(table))?;
            let (lba, slot, index) = self.place(table, info.value_bytes_max, &key)?;
            if self.resident.contains(&lba) {
                let (prefix, _) = record_number(&key);
                whole.insert(lba, (table, prefix.to_vec(), index));
                continue;
            }
            let offset = (slot * Self::slot_bytes(info)) as u32;
            patches.push(self.store(
                lba_offset_key(lba, offset).to_vec(),
                Self::encode_slot(value),
            ));
        }
        for (lba, (table, prefix, index)) in whole {
            let info = tables
                .get(table.0 as usize)
                .ok_or(HostError::TableUnknown(table))?;
            let per_page = self.records_per_page(info.value_bytes_max);
            let slot_bytes = Self::slot_bytes(info);
            let mut image = vec![0u8; self.config.page_bytes];
            for slot in 0..per_page {
                let mut key = prefix.clone();
                key.extend_from_slice(&(index * per_page as u64 + slot as u64).to_be_bytes());
                let encoded = Self::encode_slot(cached(table, &key).as_deref());
                image[slot * slot_bytes..slot * slot_bytes + encoded.len()]
                    .copy_from_slice(&encoded);
            }
            patches.push(self.store(lba_key(lba).to_vec(), image));
        }
        let written = self.write(device, at, patches, 256)?;
        for name in &names {
            self.written(name);
        }
        Ok(written)
    }
}
