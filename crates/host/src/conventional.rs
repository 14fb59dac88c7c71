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
//! * **No-force, a page cleaner**: committed records stay dirty in the cache; while dirty bytes
//!   exceed `checkpoint_dirty_bytes`, each commit has the cleaner write `clean_records_per_commit`
//!   of them (in key order) into their pages in its background, competing with foreground work
//!   for the flash: whole pages when
//!   the cache holds the page whole (read whole, or allocated during the run, and none of its
//!   records evicted since), else a sub-block write per record (the `block` preset reads the
//!   rest of the page, a read-modify-write).
//!
//! Recovery from this log is not implemented: the crash tests run the KAML path.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use kvssd_device::{BatchOp, Device, NamespaceId, NamespaceSpec, PresetKind, StoreMode};
use kvssd_engine::block::{lba_key, lba_offset_key};
use kvssd_flash::SimTime;

use crate::error::{HostError, Result};
use crate::host::Table;
use crate::locks::record_number;
use crate::TableId;

/// Bytes of a slot's length field.
const SLOT_HEADER_BYTES: usize = 2;
/// Bytes of a commit's log header (transaction, record count, checksum), and of each record's
/// (table, key length, value length).
const LOG_HEADER_BYTES: usize = 32;
const LOG_RECORD_HEADER_BYTES: usize = 12;

/// The conventional path's settings.
#[derive(Debug, Clone)]
pub struct ConventionalConfig {
    /// Bytes of a page: must equal the device's `block` logical block (8 KiB, Shore-MT's page).
    pub page_bytes: usize,
    /// Logical blocks of the circular commit log.
    pub log_blocks: u64,
    /// The page cleaner runs once dirty records take this many cache bytes.
    pub checkpoint_dirty_bytes: u64,
    /// Dirty records the page cleaner writes back per commit while it runs (in key order, so
    /// records of one page go together).
    pub clean_records_per_commit: usize,
}

impl Default for ConventionalConfig {
    fn default() -> Self {
        ConventionalConfig {
            page_bytes: 8192,
            log_blocks: 1024,
            checkpoint_dirty_bytes: 4 << 20,
            clean_records_per_commit: 64,
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
    log_head: u64,
    log_free_at: SimTime,
    /// Records deleted since the last checkpoint (their pages still hold them).
    deleted: BTreeSet<(TableId, Vec<u8>)>,
    /// Pages the cache holds whole (read from the device, or allocated during the run and never
    /// partly evicted), as a buffer pool would hold them: a key missing from the cache but in
    /// such a page is absent, with no device read (an insert into a page in memory).
    resident: HashSet<u64>,
}

impl Conventional {
    pub(crate) fn open(device: &Device, config: ConventionalConfig) -> Result<Conventional> {
        let preset: PresetKind = "block"
            .parse()
            .map_err(|error| HostError::Invalid(format!("{error}")))?;
        let namespace = device.create_namespace(NamespaceSpec::new(preset))?;
        Ok(Conventional {
            namespace,
            next_lba: config.log_blocks,
            config,
            pages: HashMap::new(),
            log_head: 0,
            log_free_at: 0,
            deleted: BTreeSet::new(),
            resident: HashSet::new(),
        })
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

    pub(crate) fn checkpoint_dirty_bytes(&self) -> u64 {
        self.config.checkpoint_dirty_bytes
    }

    pub(crate) fn clean_records_per_commit(&self) -> usize {
        self.config.clean_records_per_commit.max(1)
    }

    /// The page of a key: its LBA (allocated on first use), its slot, its key prefix and index.
    fn place(&mut self, table: TableId, info: &Table, key: &[u8]) -> Result<(u64, usize, u64)> {
        if key.len() < 8 {
            return Err(HostError::Invalid(
                "the conventional path needs keys of at least 8 bytes (a record number last)"
                    .into(),
            ));
        }
        let per_page = self.records_per_page(info.value_bytes_max) as u64;
        let (prefix, number) = record_number(key);
        let index = number / per_page;
        let next = &mut self.next_lba;
        let lba = *self
            .pages
            .entry((table, prefix.to_vec(), index))
            .or_insert_with(|| {
                let lba = *next;
                *next += 1;
                lba
            });
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
            None => match self.place(table, info, key) {
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
        let (lba, _, index) = self.place(table, info, key)?;
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
            let (lba, slot, _) = self.place(*table, info, key)?;
            let slot_bytes = Self::slot_bytes(info);
            let encoded = Self::encode_slot(Some(value));
            if existed && !images.contains_key(&lba) {
                patches.push(BatchOp::Store {
                    namespace: self.namespace,
                    key: lba_offset_key(lba, (slot * slot_bytes) as u32).to_vec(),
                    value: encoded,
                    mode: StoreMode::Upsert,
                });
                continue;
            }
            let image = images
                .entry(lba)
                .or_insert_with(|| vec![0; self.config.page_bytes]);
            image[slot * slot_bytes..slot * slot_bytes + encoded.len()].copy_from_slice(&encoded);
        }
        let mut done = at;
        let mut commands = 0;
        // The host caches what it loads, so these pages start whole in the cache (until one of
        // their records is evicted).
        self.resident.extend(images.keys().copied());
        let images: Vec<(u64, Vec<u8>)> = images.into_iter().collect();
        for chunk in images.chunks(64) {
            let operations: Vec<BatchOp> = chunk
                .iter()
                .map(|(lba, image)| BatchOp::Store {
                    namespace: self.namespace,
                    key: lba_key(*lba).to_vec(),
                    value: image.clone(),
                    mode: StoreMode::Upsert,
                })
                .collect();
            done = done.max(device.batch(at, &operations)?);
            commands += 1;
        }
        for chunk in patches.chunks(256) {
            done = done.max(device.batch(at, chunk)?);
            commands += 1;
        }
        Ok((done, commands))
    }

    /// Writes a commit's records to the log (whole blocks at its head) under the log latch;
    /// returns when they are durable.
    pub(crate) fn log_commit(
        &mut self,
        device: &Device,
        at: SimTime,
        records: &[LogRecord<'_>],
    ) -> Result<SimTime> {
        let mut log = vec![0u8; LOG_HEADER_BYTES];
        log[..4].copy_from_slice(&(records.len() as u32).to_le_bytes());
        for (table, key, value) in records {
            log.extend_from_slice(&table.0.to_le_bytes());
            log.extend_from_slice(&(key.len() as u32).to_le_bytes());
            log.extend_from_slice(
                &value
                    .map_or(u32::MAX, |value| value.len() as u32)
                    .to_le_bytes(),
            );
            debug_assert_eq!(LOG_RECORD_HEADER_BYTES, 12);
            log.extend_from_slice(key);
            if let Some(value) = value {
                log.extend_from_slice(value);
            }
            if value.is_none() {
                self.deleted.insert((*table, key.to_vec()));
            } else {
                self.deleted.remove(&(*table, key.to_vec()));
            }
        }
        let blocks = log.len().div_ceil(self.config.page_bytes);
        log.resize(blocks * self.config.page_bytes, 0);
        let operations: Vec<BatchOp> = log
            .chunks(self.config.page_bytes)
            .map(|block| {
                let lba = self.log_head;
                self.log_head = (self.log_head + 1) % self.config.log_blocks;
                BatchOp::Store {
                    namespace: self.namespace,
                    key: lba_key(lba).to_vec(),
                    value: block.to_vec(),
                    mode: StoreMode::Upsert,
                }
            })
            .collect();
        let done = device.batch(at, &operations)?;
        self.log_free_at = done;
        Ok(done)
    }

    /// Writes dirty records (and deletions since the last checkpoint) into their pages, issued at
    /// `at` in the background; returns the commands issued.
    pub(crate) fn checkpoint(
        &mut self,
        device: &Device,
        at: SimTime,
        tables: &[Table],
        dirty: &[(TableId, Vec<u8>, Vec<u8>)],
        cached: CachedValue<'_>,
    ) -> Result<u64> {
        let deleted = std::mem::take(&mut self.deleted);
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
            let (lba, slot, index) = self.place(table, info, &key)?;
            if self.resident.contains(&lba) {
                let (prefix, _) = record_number(&key);
                whole.insert(lba, (table, prefix.to_vec(), index));
                continue;
            }
            let offset = (slot * Self::slot_bytes(info)) as u32;
            patches.push(BatchOp::Store {
                namespace: self.namespace,
                key: lba_offset_key(lba, offset).to_vec(),
                value: Self::encode_slot(value),
                mode: StoreMode::Upsert,
            });
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
            patches.push(BatchOp::Store {
                namespace: self.namespace,
                key: lba_key(lba).to_vec(),
                value: image,
                mode: StoreMode::Upsert,
            });
        }
        let mut commands = 0;
        for chunk in patches.chunks(256) {
            device.batch(at, chunk)?;
            commands += 1;
        }
        Ok(commands)
    }
}
