//! The space layer of kvssd: where index (meta) pages and value (data) records go on flash.
//!
//! * **Logs** (append points, KAML's multi-log): `logs` of them, log `l` owning the dies
//!   `l, l + logs, l + 2·logs, …`. Consecutive pages of one stream go to consecutive logs, so with at
//!   least as many logs as channels consecutive pages land on different channels.
//! * **Streams**: every log has one open block for [`Stream::Meta`] pages and one for [`Stream::Data`]
//!   pages, so meta and data never share a block (hot/cold separation, PinK §4.5).
//! * **Record packing** (KAML §IV-B, Fig. 4): data records are packed into a page in fixed chunks of
//!   `chunk_bytes`; the page's OOB carries a bitmap whose bit `i` is set when a record ends in chunk
//!   `i`. A record larger than a page is a *large record*: it takes whole pages, consecutive in its
//!   log, each page repeating the key so GC can check any of them.
//! * **Free-block pool** with wear-aware allocation (lowest erase count first), over-provisioning and a
//!   GC reserve (see [`SpaceConfig`]).
//! * **GC support**: per-block valid-byte accounting, victim choice ([`Space::pick_victim`]), victim
//!   scanning ([`Space::read_victim`]) and release ([`Space::erase_victim`]). The layer above decides
//!   which records are live: it implements [`Liveness`] or inspects [`Victim`] itself, so the
//!   dependency points down.
//!
//! Byte layouts are in `docs/design.md` §15 ("Byte layouts").

mod durable;
mod layout;
mod pointer;

use std::collections::BTreeMap;

use kvssd_flash::{BlockAddress, Flash, FlashError, Geometry, PageAddress, Purpose, SimTime};

pub use durable::{EraseHook, Part, OOB_KIND_SYSTEM, SYSTEM_OWNER};
pub use layout::{
    RecordHeader, LARGE_HEADER_BYTES, OOB_KIND_DATA, OOB_KIND_LARGE, OOB_KIND_META,
    RECORD_HEADER_BYTES,
};
pub use pointer::{PageIndex, RecordPointer};

/// Longest key a record can carry, in bytes (its length is one byte in the header).
pub const KEY_BYTES_MAX: usize = 255;

/// What went wrong in the space layer.
#[derive(Debug, thiserror::Error)]
pub enum SpaceError {
    /// A flash operation failed.
    #[error(transparent)]
    Flash(#[from] FlashError),
    /// The free-block pool is empty: nothing can be written until GC reclaims a block.
    #[error("no free block is left: GC must reclaim space first")]
    NoFreeBlock,
    /// The configuration does not fit the geometry.
    #[error("space configuration does not fit the geometry: {0}")]
    Config(String),
    /// Bytes read from flash do not decode as what the layer wrote there.
    #[error("{page:?}: {what}")]
    Malformed {
        /// The page.
        page: PageIndex,
        /// What is wrong.
        what: &'static str,
    },
    /// A record pointer names a block that was erased since the record was written.
    #[error("record pointer {0:?} is stale: its block was erased since the record was written")]
    StalePointer(RecordPointer),
    /// A record does not fit the limits of the layout.
    #[error("record too large: {0}")]
    RecordTooLarge(String),
}

/// The result type of the space layer.
pub type Result<T, E = SpaceError> = std::result::Result<T, E>;

/// Which kind of pages a block holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Index pages (meta segments).
    Meta,
    /// Value records (data segments).
    Data,
}

/// How the space layer uses the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpaceConfig {
    /// Number of logs (append points); each has one open block per stream. Clamped to the number of
    /// dies.
    pub logs: u32,
    /// Bytes of one packing chunk; a power of two, at least 16, with `page_bytes / chunk_bytes` at
    /// most 4096 and its bitmap fitting the user OOB.
    pub chunk_bytes: u32,
    /// Share of the raw capacity, in percent, that user data may never occupy, so GC always finds
    /// victims with garbage in them.
    pub over_provisioning_percent: u32,
    /// Free blocks kept back for GC itself (relocations need somewhere to go).
    pub gc_reserve_blocks: u32,
}

impl SpaceConfig {
    /// Defaults for a geometry: one log per die, 32-byte chunks (16 on small pages), 10%
    /// over-provisioning, a GC reserve of two blocks per stream plus one per log.
    pub fn for_geometry(geometry: &Geometry) -> SpaceConfig {
        let logs = geometry.dies();
        SpaceConfig {
            logs,
            chunk_bytes: if geometry.page_bytes >= 4096 { 32 } else { 16 },
            over_provisioning_percent: 10,
            gc_reserve_blocks: 4 + logs,
        }
    }

    /// Checks this configuration against a geometry: chunk size, pointer and OOB limits,
    /// over-provisioning, and room for every log's open blocks and the GC reserve. `Space::open`
    /// runs the same check; callers sizing a card can run it before building one.
    pub fn check(&self, geometry: &Geometry) -> Result<()> {
        let chunk = self.chunk_bytes;
        if chunk < 16 || !chunk.is_power_of_two() || chunk > geometry.page_bytes {
            return Err(SpaceError::Config(format!(
                "chunk_bytes {chunk} must be a power of two between 16 and the page size"
            )));
        }
        let chunks = geometry.page_bytes / chunk;
        if chunks > pointer::CHUNKS_PER_PAGE_MAX {
            return Err(SpaceError::Config(format!(
                "{chunks} chunks per page exceed the pointer's {}",
                pointer::CHUNKS_PER_PAGE_MAX
            )));
        }
        if layout::oob_bytes(chunks) > geometry.oob_user_bytes() as usize {
            return Err(SpaceError::Config(format!(
                "the record-end bitmap of {chunks} chunks does not fit {} user OOB bytes",
                geometry.oob_user_bytes()
            )));
        }
        if geometry.pages_total() > pointer::PAGES_MAX {
            return Err(SpaceError::Config(
                "too many pages for a record pointer".into(),
            ));
        }
        if (geometry.page_bytes as usize) < LARGE_HEADER_BYTES + KEY_BYTES_MAX + 1 {
            return Err(SpaceError::Config(format!(
                "pages of {} bytes cannot hold a record header and a {KEY_BYTES_MAX}-byte key",
                geometry.page_bytes
            )));
        }
        if u64::from(self.over_provisioning_percent) >= 100 {
            return Err(SpaceError::Config(
                "over-provisioning must be below 100%".into(),
            ));
        }
        let logs = self.logs.clamp(1, geometry.dies());
        let reserve_needed = u64::from(self.gc_reserve_blocks) + 2 * u64::from(logs) + 2;
        if reserve_needed >= geometry.blocks_total() {
            return Err(SpaceError::Config(format!(
                "{} blocks cannot hold {} open blocks and a GC reserve of {}",
                geometry.blocks_total(),
                2 * logs,
                self.gc_reserve_blocks
            )));
        }
        Ok(())
    }
}

/// A data record as read back from flash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Namespace id.
    pub namespace: u32,
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
}

/// One data record found in a GC victim.
#[derive(Debug, Clone)]
pub struct VictimRecord {
    /// Where the record starts (for a large record: its head, which may be in another block).
    pub pointer: RecordPointer,
    /// Namespace id.
    pub namespace: u32,
    /// The key.
    pub key: Vec<u8>,
    /// Length of the value.
    pub value_len: u32,
    /// The value, when the whole record is in the victim's page (small records). Large records are
    /// read with [`Space::read_record`] if they turn out live.
    pub value: Option<Vec<u8>>,
}

/// What a GC victim holds.
#[derive(Debug, Clone)]
pub enum Victim {
    /// A meta block: every programmed page with its bytes.
    Meta(Vec<(PageIndex, Vec<u8>)>),
    /// A data block: every record that starts in it or has a part in it (large records once each).
    Data(Vec<VictimRecord>),
}

/// The question GC asks the index. Implemented by the engine; the call goes up, the dependency points
/// down.
pub trait Liveness {
    /// Whether the meta page `page`, whose bytes are `bytes`, is still referenced by the index.
    fn meta_is_live(&self, page: PageIndex, bytes: &[u8]) -> bool;
}

/// Counters of the space layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpaceStats {
    /// Meta blocks chosen as GC victims and erased.
    pub gc_meta_victims: u64,
    /// Data blocks chosen as GC victims and erased.
    pub gc_data_victims: u64,
    /// Small records appended.
    pub records_appended: u64,
    /// Large (multi-page) records appended.
    pub large_records_appended: u64,
    /// Pages programmed with padding after their last record (closed before full).
    pub data_pages_padded: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockUse {
    Free,
    Used(Stream),
    /// Held by the durability layer (log, checkpoints, superblock): never a GC victim.
    System,
}

#[derive(Debug, Clone, Copy)]
struct BlockInfo {
    usage: BlockUse,
    valid_bytes: u64,
    /// The block its log opened after this one for the same stream and namespace, with that block's
    /// erase count at the time: a large record continues there.
    successor: Option<(u64, u32)>,
    /// The namespace whose pages the block holds (every used block belongs to exactly one).
    owner: u32,
    /// When the block left the free pool, counted in allocations (see [`Space::protect`]).
    allocated: u64,
}

impl BlockInfo {
    const FREE: BlockInfo = BlockInfo {
        usage: BlockUse::Free,
        valid_bytes: 0,
        successor: None,
        owner: 0,
        allocated: 0,
    };
}

#[derive(Debug, Clone, Copy)]
struct OpenBlock {
    block: u64,
    next_page: u32,
}

/// A log: an append point spread over its dies.
#[derive(Debug, Clone, Default)]
struct Log {
    dies: Vec<u32>,
    next_die: usize,
}

/// One namespace's open blocks in one log.
#[derive(Debug, Clone, Default)]
struct LogCursor {
    /// The global log index.
    log: usize,
    meta: Option<OpenBlock>,
    data: Option<OpenBlock>,
    last_meta: Option<u64>,
    last_data: Option<u64>,
}

/// Where one namespace writes: its logs, their open blocks and its data page open in DRAM. Blocks
/// are never shared between namespaces, so a victim belongs to one index and deleting a namespace
/// frees its blocks outright.
#[derive(Debug, Clone, Default)]
struct Writer {
    cursors: Vec<LogCursor>,
    next_meta: usize,
    next_data: usize,
    open_page: Option<OpenPage>,
    valid_bytes: u64,
    /// Live snapshot protections: allocation counter at each protection, with its count.
    floors: BTreeMap<u64, u32>,
}

/// The data page currently being filled in DRAM (capacitor-backed, like L0), with its reserved
/// address.
#[derive(Debug, Clone)]
struct OpenPage {
    page: PageAddress,
    log: usize,
    buffer: Vec<u8>,
    bitmap: Vec<u8>,
    used_chunks: u32,
}

/// The space layer: owns the flash and decides where every page goes.
///
/// Every used block belongs to one namespace (the `namespace` argument of the writing calls); a
/// namespace writes through the logs [`Space::set_namespace_logs`] gave it (all logs by default).
///
/// Thread safety: single-threaded; every method takes `&mut self` or `&self`.
pub struct Space {
    flash: Flash,
    geometry: Geometry,
    config: SpaceConfig,
    blocks: Vec<BlockInfo>,
    free_by_die: Vec<Vec<u32>>,
    free_count: u64,
    logs: Vec<Log>,
    writers: BTreeMap<u32, Writer>,
    allocations: u64,
    valid_bytes_total: u64,
    stats: SpaceStats,
    durable: durable::DurableState,
}

impl Space {
    /// Takes over a fully erased flash array.
    pub fn open(flash: Flash, config: SpaceConfig) -> Result<Space> {
        Space::build(flash, config, true)
    }

    /// Checks the configuration against the geometry and sets up an empty layer (every block free);
    /// with `require_erased`, refuses a flash array with any programmed page.
    fn build(flash: Flash, mut config: SpaceConfig, require_erased: bool) -> Result<Space> {
        let geometry = *flash.geometry();
        config.logs = config.logs.clamp(1, geometry.dies());
        config.check(&geometry)?;
        let mut free_by_die = vec![Vec::new(); geometry.dies() as usize];
        let mut free_count = 0;
        for index in 0..geometry.blocks_total() {
            let address = geometry.block_at(index);
            if require_erased && flash.programmed_pages(address)? != 0 {
                return Err(SpaceError::Config(format!(
                    "{address} is not erased: the space layer takes over an erased array"
                )));
            }
            free_by_die[address.die as usize].push(address.block);
            free_count += 1;
        }
        let mut logs = vec![Log::default(); config.logs as usize];
        for die in 0..geometry.dies() {
            logs[(die % config.logs) as usize].dies.push(die);
        }
        Ok(Space {
            blocks: vec![BlockInfo::FREE; geometry.blocks_total() as usize],
            flash,
            geometry,
            config,
            free_by_die,
            free_count,
            logs,
            writers: BTreeMap::new(),
            allocations: 0,
            valid_bytes_total: 0,
            stats: SpaceStats::default(),
            durable: durable::DurableState::default(),
        })
    }

    /// The geometry of the flash.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The configuration in force (after clamping).
    pub fn config(&self) -> &SpaceConfig {
        &self.config
    }

    /// The flash, for counters and timing queries.
    pub fn flash(&self) -> &Flash {
        &self.flash
    }

    /// Charges `cost_ns` of controller computation issued at `at`; returns when it completes.
    pub fn compute(&mut self, at: SimTime, cost_ns: u64) -> SimTime {
        if cost_ns == 0 {
            return at;
        }
        self.flash.compute(at, cost_ns)
    }

    /// Counters of this layer.
    pub fn stats(&self) -> SpaceStats {
        self.stats
    }

    /// Blocks in the free pool.
    pub fn free_blocks(&self) -> u64 {
        self.free_count
    }

    /// Bytes the accounting holds valid (live meta pages and data records, as told by the layer
    /// above). An over-estimate: records superseded but not yet reported stay counted until reported
    /// or until their block is collected.
    pub fn valid_bytes(&self) -> u64 {
        self.valid_bytes_total
    }

    /// Bytes user data may occupy: the raw capacity less over-provisioning.
    pub fn user_capacity_bytes(&self) -> u64 {
        self.geometry.capacity_bytes() / 100
            * u64::from(100 - self.config.over_provisioning_percent)
    }

    /// Bytes one block holds.
    pub fn block_bytes(&self) -> u64 {
        self.geometry.block_bytes()
    }

    /// Bytes of one packing chunk.
    pub fn chunk_bytes(&self) -> u32 {
        self.config.chunk_bytes
    }

    fn chunks_per_page(&self) -> u32 {
        self.geometry.page_bytes / self.config.chunk_bytes
    }

    /// Whether a record with these lengths is written as a large (multi-page) record.
    pub fn is_large(&self, key_len: usize, value_len: usize) -> bool {
        RECORD_HEADER_BYTES + key_len + value_len > self.geometry.page_bytes as usize
    }

    /// Pages a large record takes; 0 for a small record.
    pub fn large_record_pages(&self, key_len: usize, value_len: usize) -> u64 {
        if !self.is_large(key_len, value_len) {
            return 0;
        }
        let per_page = self.geometry.page_bytes as usize - LARGE_HEADER_BYTES - key_len;
        value_len.div_ceil(per_page) as u64
    }

    /// Bytes of flash a record occupies (chunks for a small record, whole pages for a large one).
    pub fn record_footprint(&self, key_len: usize, value_len: usize) -> u64 {
        if self.is_large(key_len, value_len) {
            self.large_record_pages(key_len, value_len) * u64::from(self.geometry.page_bytes)
        } else {
            let chunk = self.config.chunk_bytes as usize;
            (RECORD_HEADER_BYTES + key_len + value_len).div_ceil(chunk) as u64 * chunk as u64
        }
    }

    /// Pages appending `records` (key and value lengths, in order) would program, counting the page
    /// currently open in DRAM as already started. Exact for the packing rule of
    /// [`Space::append_record`].
    pub fn data_pages_needed(
        &self,
        namespace: u32,
        records: impl Iterator<Item = (usize, usize)>,
    ) -> u64 {
        let per_page = self.chunks_per_page();
        let chunk = self.config.chunk_bytes as usize;
        let mut used = self
            .writers
            .get(&namespace)
            .and_then(|writer| writer.open_page.as_ref())
            .map(|open| open.used_chunks);
        let mut pages = 0;
        for (key_len, value_len) in records {
            if self.is_large(key_len, value_len) {
                pages += self.large_record_pages(key_len, value_len);
                continue;
            }
            let chunks = (RECORD_HEADER_BYTES + key_len + value_len).div_ceil(chunk) as u32;
            match used {
                Some(now) if now + chunks <= per_page => used = Some(now + chunks),
                _ => {
                    pages += 1;
                    used = Some(chunks);
                }
            }
        }
        pages
    }

    /// Free blocks that programming `pages` more pages of `stream` may take from the pool, counting
    /// the room left in each log's open block (pages go to the logs round-robin).
    pub fn blocks_needed(&self, namespace: u32, stream: Stream, pages: u64) -> u64 {
        let fresh;
        let writer = match self.writers.get(&namespace) {
            Some(writer) => writer,
            None => {
                fresh = self.new_writer(None);
                &fresh
            }
        };
        let logs = writer.cursors.len() as u64;
        let per_block = u64::from(self.geometry.pages_per_block);
        let start = match stream {
            Stream::Meta => writer.next_meta,
            Stream::Data => writer.next_data,
        };
        let mut blocks = 0;
        for offset in 0..logs {
            let log = (start + offset as usize) % writer.cursors.len();
            // Pages this log receives out of `pages` dealt round-robin from `start`.
            let share = pages / logs + u64::from(offset < pages % logs);
            let open = match stream {
                Stream::Meta => writer.cursors[log].meta,
                Stream::Data => writer.cursors[log].data,
            };
            let room = open.map_or(0, |open| per_block - u64::from(open.next_page));
            blocks += share.saturating_sub(room).div_ceil(per_block);
        }
        // Large records take their pages from one log, which may need one more block.
        blocks + u64::from(stream == Stream::Data && pages > 0)
    }

    fn block_address(&self, block: u64) -> BlockAddress {
        self.geometry.block_at(block)
    }

    fn erase_generation(&self, block: u64) -> Result<u32> {
        Ok(self.flash.erase_count(self.block_address(block))?)
    }

    fn new_writer(&self, logs: Option<&[u32]>) -> Writer {
        let cursors = match logs {
            Some(logs) => logs
                .iter()
                .map(|&log| LogCursor {
                    log: log as usize,
                    ..LogCursor::default()
                })
                .collect(),
            None => (0..self.logs.len())
                .map(|log| LogCursor {
                    log,
                    ..LogCursor::default()
                })
                .collect(),
        };
        Writer {
            cursors,
            ..Writer::default()
        }
    }

    fn writer(&mut self, namespace: u32) -> &mut Writer {
        if !self.writers.contains_key(&namespace) {
            let writer = self.new_writer(None);
            self.writers.insert(namespace, writer);
        }
        match self.writers.get_mut(&namespace) {
            Some(writer) => writer,
            None => unreachable!("inserted above"),
        }
    }

    /// Gives a namespace the logs it writes to (indexes below [`SpaceConfig::logs`]). Only before
    /// the namespace wrote anything; by default a namespace writes to every log.
    pub fn set_namespace_logs(&mut self, namespace: u32, logs: &[u32]) -> Result<()> {
        if logs.is_empty() {
            return Err(SpaceError::Config(
                "a namespace needs at least one log".into(),
            ));
        }
        let mut sorted = logs.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != logs.len() {
            return Err(SpaceError::Config(format!(
                "log set {logs:?} repeats a log"
            )));
        }
        if let Some(&bad) = logs.iter().find(|&&log| log as usize >= self.logs.len()) {
            return Err(SpaceError::Config(format!(
                "log {bad} does not exist: the device has {} logs",
                self.logs.len()
            )));
        }
        if self
            .blocks
            .iter()
            .any(|info| info.usage != BlockUse::Free && info.owner == namespace)
        {
            return Err(SpaceError::Config(format!(
                "namespace {namespace} already wrote: its logs can no longer change"
            )));
        }
        let writer = self.new_writer(Some(logs));
        self.writers.insert(namespace, writer);
        Ok(())
    }

    /// Erases every block of a namespace and returns them to the free pool; its open page in DRAM
    /// is dropped. Nothing of the namespace can be read afterwards. Returns when the erases end.
    pub fn release_namespace(&mut self, at: SimTime, namespace: u32) -> Result<SimTime> {
        let mut done = at;
        for index in 0..self.blocks.len() {
            let info = self.blocks[index];
            if info.usage == BlockUse::Free || info.owner != namespace {
                continue;
            }
            let address = self.block_address(index as u64);
            if self.flash.programmed_pages(address)? > 0 {
                done = done.max(self.flash.erase(at, address, Purpose::Gc)?);
            }
            self.valid_bytes_total -= info.valid_bytes;
            self.blocks[index] = BlockInfo::FREE;
            self.free_by_die[address.die as usize].push(address.block);
            self.free_count += 1;
        }
        self.writers.remove(&namespace);
        Ok(done)
    }

    /// Blocks a namespace holds.
    pub fn namespace_blocks(&self, namespace: u32) -> u64 {
        self.blocks
            .iter()
            .filter(|info| info.usage != BlockUse::Free && info.owner == namespace)
            .count() as u64
    }

    /// Valid bytes the accounting holds for a namespace.
    pub fn namespace_valid_bytes(&self, namespace: u32) -> u64 {
        self.writers
            .get(&namespace)
            .map_or(0, |writer| writer.valid_bytes)
    }

    /// The namespace a used block belongs to.
    pub fn block_owner(&self, block: u64) -> Option<u32> {
        self.blocks
            .get(block as usize)
            .filter(|info| info.usage != BlockUse::Free)
            .map(|info| info.owner)
    }

    /// Protects what a snapshot of `namespace` taken now can reach: until the matching
    /// [`Space::unprotect`], no block of the namespace that left the free pool before this call is
    /// chosen as a GC victim (a snapshot only references pages written before it was taken).
    /// Returns the token to unprotect with.
    pub fn protect(&mut self, namespace: u32) -> u64 {
        let floor = self.allocations;
        *self.writer(namespace).floors.entry(floor).or_insert(0) += 1;
        floor
    }

    /// Ends one protection made by [`Space::protect`].
    pub fn unprotect(&mut self, namespace: u32, token: u64) {
        if let Some(writer) = self.writers.get_mut(&namespace) {
            if let Some(count) = writer.floors.get_mut(&token) {
                *count -= 1;
                if *count == 0 {
                    writer.floors.remove(&token);
                }
            }
        }
    }

    /// Whether a live snapshot may still reach pages of `block`.
    pub fn is_protected(&self, block: u64) -> bool {
        let Some(info) = self.blocks.get(block as usize) else {
            return false;
        };
        if info.usage == BlockUse::Free {
            return false;
        }
        self.writers
            .get(&info.owner)
            .and_then(|writer| writer.floors.keys().next_back())
            .is_some_and(|&newest| info.allocated < newest)
    }

    fn take_free_block(&mut self, namespace: u32, cursor: usize, stream: Stream) -> Result<u64> {
        let log = self.writer(namespace).cursors[cursor].log;
        let dies = self.logs[log].dies.clone();
        let start = self.logs[log].next_die;
        // The log's own dies first, round-robin; then, so one busy log cannot starve, another die:
        // the one with the most free blocks (the nearest after the log's first die on a tie).
        // Taking the lowest-numbered die instead piled every borrowed block, and so the writes
        // and reads that follow them, onto dies 0, 1, 2, ...
        let mut order: Vec<u32> = (0..dies.len())
            .map(|offset| dies[(start + offset) % dies.len()])
            .collect();
        let die_count = self.geometry.dies();
        let home = dies.first().copied().unwrap_or(0);
        let borrowed = (1..die_count)
            .map(|offset| (home + offset) % die_count)
            .filter(|die| !dies.contains(die))
            .max_by_key(|&die| {
                let distance = (die + die_count - home) % die_count;
                (
                    self.free_by_die[die as usize].len(),
                    std::cmp::Reverse(distance),
                )
            });
        order.extend(borrowed);
        for die in order {
            let candidates = &self.free_by_die[die as usize];
            if candidates.is_empty() {
                continue;
            }
            // Wear levelling: the least-erased free block of the die.
            let mut best = 0;
            let mut best_count = u32::MAX;
            for (slot, &block) in candidates.iter().enumerate() {
                let count = self.flash.erase_count(BlockAddress { die, block })?;
                if count < best_count {
                    best = slot;
                    best_count = count;
                }
            }
            let block = self.free_by_die[die as usize].swap_remove(best);
            self.free_count -= 1;
            self.logs[log].next_die = (start + 1) % dies.len().max(1);
            let index = self.geometry.block_index(BlockAddress { die, block });
            self.blocks[index as usize] = BlockInfo {
                usage: BlockUse::Used(stream),
                valid_bytes: 0,
                successor: None,
                owner: namespace,
                allocated: self.allocations,
            };
            self.allocations += 1;
            let state = &mut self.writer(namespace).cursors[cursor];
            let last = match stream {
                Stream::Meta => state.last_meta.replace(index),
                Stream::Data => state.last_data.replace(index),
            };
            if let Some(previous) = last {
                let generation = self.erase_generation(index)?;
                self.blocks[previous as usize].successor = Some((index, generation));
            }
            return Ok(index);
        }
        Err(SpaceError::NoFreeBlock)
    }

    /// Reserves the next page of a log's open block of `stream`, opening a new block if needed.
    fn reserve_page(
        &mut self,
        namespace: u32,
        cursor: usize,
        stream: Stream,
    ) -> Result<PageAddress> {
        let state = &self.writer(namespace).cursors[cursor];
        let open = match stream {
            Stream::Meta => state.meta,
            Stream::Data => state.data,
        };
        let mut open = match open {
            Some(open) => open,
            None => OpenBlock {
                block: self.take_free_block(namespace, cursor, stream)?,
                next_page: 0,
            },
        };
        let page = self.block_address(open.block).page(open.next_page);
        open.next_page += 1;
        let keep = (open.next_page < self.geometry.pages_per_block).then_some(open);
        let state = &mut self.writer(namespace).cursors[cursor];
        match stream {
            Stream::Meta => state.meta = keep,
            Stream::Data => state.data = keep,
        }
        Ok(page)
    }

    fn add_valid(&mut self, block: u64, bytes: u64) {
        self.blocks[block as usize].valid_bytes += bytes;
        self.valid_bytes_total += bytes;
        let owner = self.blocks[block as usize].owner;
        self.writer(owner).valid_bytes += bytes;
    }

    fn sub_valid(&mut self, block: u64, bytes: u64) {
        let info = &mut self.blocks[block as usize];
        let taken = bytes.min(info.valid_bytes);
        info.valid_bytes -= taken;
        self.valid_bytes_total -= taken;
        let owner = info.owner;
        if let Some(writer) = self.writers.get_mut(&owner) {
            writer.valid_bytes = writer.valid_bytes.saturating_sub(taken);
        }
    }

    /// Programs one meta page (exactly `page_bytes`) on the next log; returns its index and when the
    /// program completes.
    pub fn write_meta(
        &mut self,
        at: SimTime,
        purpose: Purpose,
        namespace: u32,
        data: &[u8],
    ) -> Result<(PageIndex, SimTime)> {
        let writer = self.writer(namespace);
        let cursor = writer.next_meta;
        writer.next_meta = (cursor + 1) % writer.cursors.len();
        let page = self.reserve_page(namespace, cursor, Stream::Meta)?;
        let done = self
            .flash
            .program(at, page, purpose, data, &[OOB_KIND_META])?;
        let index = self.geometry.page_index(page);
        self.add_valid(
            index / u64::from(self.geometry.pages_per_block),
            u64::from(self.geometry.page_bytes),
        );
        Ok((PageIndex(index), done))
    }

    /// Reads a whole page (meta pages are read this way).
    pub fn read_page(
        &mut self,
        at: SimTime,
        page: PageIndex,
        purpose: Purpose,
    ) -> Result<(Vec<u8>, SimTime)> {
        let mut data = vec![0u8; self.geometry.page_bytes as usize];
        let address = self.page_address(page)?;
        let read = self.read_retrying(at, address, purpose, &mut data, &mut [])?;
        Ok((data, read.done_at))
    }

    fn page_address(&self, page: PageIndex) -> Result<PageAddress> {
        if page.0 >= self.geometry.pages_total() {
            return Err(SpaceError::Malformed {
                page,
                what: "page index outside the device",
            });
        }
        Ok(self.geometry.page_at(page.0))
    }

    /// Reports that a meta page is no longer referenced.
    pub fn invalidate_meta(&mut self, page: PageIndex) {
        let block = page.0 / u64::from(self.geometry.pages_per_block);
        if let Some(BlockInfo {
            usage: BlockUse::Used(Stream::Meta),
            ..
        }) = self.blocks.get(block as usize)
        {
            self.sub_valid(block, u64::from(self.geometry.page_bytes));
        }
    }

    /// Programs the data page open in DRAM, padded after its last record.
    fn close_open_page(
        &mut self,
        at: SimTime,
        namespace: u32,
        purpose: Purpose,
    ) -> Result<SimTime> {
        let Some(open) = self.writer(namespace).open_page.take() else {
            return Ok(at);
        };
        if open.used_chunks < self.chunks_per_page() {
            self.stats.data_pages_padded += 1;
        }
        let mut oob = vec![OOB_KIND_DATA];
        oob.extend_from_slice(&open.bitmap);
        let done = self
            .flash
            .program(at, open.page, purpose, &open.buffer, &oob)?;
        let _ = open.log;
        Ok(done)
    }

    /// Programs the partly filled data page, if any, so everything appended so far is on flash.
    pub fn sync(&mut self, at: SimTime, namespace: u32, purpose: Purpose) -> Result<SimTime> {
        self.close_open_page(at, namespace, purpose)
    }

    /// Appends a data record; returns where it is and when the last program it caused completes.
    /// Small records are packed into the page open in DRAM, which is programmed when the next record
    /// does not fit; a large record is programmed at once on whole pages of one log.
    pub fn append_record(
        &mut self,
        at: SimTime,
        purpose: Purpose,
        namespace: u32,
        key: &[u8],
        value: &[u8],
    ) -> Result<(RecordPointer, SimTime)> {
        if key.is_empty() || key.len() > KEY_BYTES_MAX || value.len() > u32::MAX as usize {
            return Err(SpaceError::RecordTooLarge(format!(
                "key of {} bytes, value of {} bytes",
                key.len(),
                value.len()
            )));
        }
        if self.is_large(key.len(), value.len()) {
            return self.append_large(at, purpose, namespace, key, value);
        }
        let chunk = self.config.chunk_bytes as usize;
        let chunks = (RECORD_HEADER_BYTES + key.len() + value.len()).div_ceil(chunk) as u32;
        let mut done = at;
        let per_page = self.chunks_per_page();
        if let Some(open) = &self.writer(namespace).open_page {
            if open.used_chunks + chunks > per_page {
                done = self.close_open_page(at, namespace, purpose)?;
            }
        }
        if self.writer(namespace).open_page.is_none() {
            let writer = self.writer(namespace);
            let cursor = writer.next_data;
            writer.next_data = (cursor + 1) % writer.cursors.len();
            let page = self.reserve_page(namespace, cursor, Stream::Data)?;
            let open = OpenPage {
                page,
                log: cursor,
                buffer: vec![0u8; self.geometry.page_bytes as usize],
                bitmap: vec![0u8; layout::bitmap_bytes(per_page)],
                used_chunks: 0,
            };
            self.writer(namespace).open_page = Some(open);
        }
        let geometry = self.geometry;
        let page_index = match &self.writer(namespace).open_page {
            Some(open) => geometry.page_index(open.page),
            None => unreachable!("a page was opened above"),
        };
        let block = page_index / u64::from(self.geometry.pages_per_block);
        let generation = self.erase_generation(block)?;
        let Some(open) = self.writer(namespace).open_page.as_mut() else {
            unreachable!("a page was opened above")
        };
        let start = open.used_chunks;
        let offset = start as usize * chunk;
        let header = RecordHeader {
            kind: layout::RECORD_KIND_SMALL,
            key_len: key.len() as u8,
            part: 0,
            namespace,
            value_len: value.len() as u32,
        };
        header.encode(&mut open.buffer[offset..offset + RECORD_HEADER_BYTES]);
        let key_at = offset + RECORD_HEADER_BYTES;
        open.buffer[key_at..key_at + key.len()].copy_from_slice(key);
        open.buffer[key_at + key.len()..key_at + key.len() + value.len()].copy_from_slice(value);
        let end = start + chunks - 1;
        open.bitmap[(end / 8) as usize] |= 1 << (end % 8);
        open.used_chunks += chunks;
        let _ = per_page;
        self.add_valid(block, u64::from(chunks) * chunk as u64);
        self.stats.records_appended += 1;
        let pointer = RecordPointer::new(PageIndex(page_index), start, generation);
        Ok((pointer, done))
    }

    fn append_large(
        &mut self,
        at: SimTime,
        purpose: Purpose,
        namespace: u32,
        key: &[u8],
        value: &[u8],
    ) -> Result<(RecordPointer, SimTime)> {
        let pages = self.large_record_pages(key.len(), value.len());
        if pages > u64::from(u16::MAX) {
            return Err(SpaceError::RecordTooLarge(format!(
                "a value of {} bytes needs {pages} pages, more than a record can span",
                value.len()
            )));
        }
        let writer = self.writer(namespace);
        let cursor = writer.next_data;
        writer.next_data = (cursor + 1) % writer.cursors.len();
        let mut done = at;
        // The open small-record page may hold the log's next page; it must be programmed first.
        if self
            .writer(namespace)
            .open_page
            .as_ref()
            .is_some_and(|open| open.log == cursor)
        {
            done = self.close_open_page(at, namespace, purpose)?;
        }
        let per_page = self.geometry.page_bytes as usize - LARGE_HEADER_BYTES - key.len();
        let mut head: Option<RecordPointer> = None;
        for (part, slice) in value.chunks(per_page.max(1)).enumerate() {
            let page = self.reserve_page(namespace, cursor, Stream::Data)?;
            let index = self.geometry.page_index(page);
            let block = index / u64::from(self.geometry.pages_per_block);
            let pointer = match head {
                Some(pointer) => pointer,
                None => {
                    let pointer =
                        RecordPointer::new(PageIndex(index), 0, self.erase_generation(block)?);
                    head = Some(pointer);
                    pointer
                }
            };
            let mut buffer = vec![0u8; self.geometry.page_bytes as usize];
            let header = RecordHeader {
                kind: layout::RECORD_KIND_LARGE,
                key_len: key.len() as u8,
                part: part as u16,
                namespace,
                value_len: value.len() as u32,
            };
            header.encode(&mut buffer[..RECORD_HEADER_BYTES]);
            buffer[RECORD_HEADER_BYTES..LARGE_HEADER_BYTES]
                .copy_from_slice(&pointer.raw().to_le_bytes());
            buffer[LARGE_HEADER_BYTES..LARGE_HEADER_BYTES + key.len()].copy_from_slice(key);
            let value_at = LARGE_HEADER_BYTES + key.len();
            buffer[value_at..value_at + slice.len()].copy_from_slice(slice);
            let programmed = self
                .flash
                .program(at, page, purpose, &buffer, &[OOB_KIND_LARGE])?;
            done = done.max(programmed);
            self.add_valid(block, u64::from(self.geometry.page_bytes));
        }
        self.stats.large_records_appended += 1;
        match head {
            Some(pointer) => Ok((pointer, done)),
            None => Err(SpaceError::RecordTooLarge(
                "a large record with no pages".into(),
            )),
        }
    }

    /// The pages of a large record, head first, following each block's successor in its log.
    fn large_pages(&self, head: RecordPointer, pages: u64) -> Result<Vec<PageIndex>> {
        let per_block = u64::from(self.geometry.pages_per_block);
        let mut out = Vec::with_capacity(pages as usize);
        let mut current = head.page().0;
        for part in 0..pages {
            if part > 0 {
                if (current + 1) % per_block != 0 {
                    current += 1;
                } else {
                    let block = current / per_block;
                    let Some((next, generation)) = self
                        .blocks
                        .get(block as usize)
                        .and_then(|info| info.successor)
                    else {
                        return Err(SpaceError::StalePointer(head));
                    };
                    if self.erase_generation(next)? != generation {
                        return Err(SpaceError::StalePointer(head));
                    }
                    current = next * per_block;
                }
            }
            out.push(PageIndex(current));
        }
        Ok(out)
    }

    fn check_generation(&self, pointer: RecordPointer) -> Result<bool> {
        let block = pointer.page().0 / u64::from(self.geometry.pages_per_block);
        if block >= self.geometry.blocks_total() {
            return Ok(false);
        }
        Ok(self.erase_generation(block)? & pointer::GENERATION_MASK == pointer.generation())
    }

    /// Reads the record a pointer names (from the open page in DRAM if it is still there).
    pub fn read_record(
        &mut self,
        at: SimTime,
        pointer: RecordPointer,
        purpose: Purpose,
    ) -> Result<(Record, SimTime)> {
        if !self.check_generation(pointer)? {
            return Err(SpaceError::StalePointer(pointer));
        }
        let page = pointer.page();
        let chunk = self.config.chunk_bytes as usize;
        let in_dram = self.writers.values().find_map(|writer| {
            writer
                .open_page
                .as_ref()
                .filter(|open| self.geometry.page_index(open.page) == page.0)
        });
        if let Some(open) = in_dram {
            {
                let record =
                    layout::decode_small(&open.buffer, pointer.chunk() as usize * chunk, page)?;
                return Ok((record, at));
            }
        }
        let (data, done) = self.read_page(at, page, purpose)?;
        let header = RecordHeader::decode(&data, pointer.chunk() as usize * chunk, page)?;
        if header.kind == layout::RECORD_KIND_SMALL {
            let record = layout::decode_small(&data, pointer.chunk() as usize * chunk, page)?;
            return Ok((record, done));
        }
        if header.kind != layout::RECORD_KIND_LARGE || header.part != 0 || pointer.chunk() != 0 {
            return Err(SpaceError::Malformed {
                page,
                what: "pointer does not name the start of a record",
            });
        }
        let key_len = header.key_len as usize;
        let value_len = header.value_len as usize;
        let pages = self.large_record_pages(key_len, value_len);
        let all = self.large_pages(pointer, pages)?;
        let per_page = self.geometry.page_bytes as usize - LARGE_HEADER_BYTES - key_len;
        let key = data[LARGE_HEADER_BYTES..LARGE_HEADER_BYTES + key_len].to_vec();
        let mut value = Vec::with_capacity(value_len);
        let mut finished = done;
        for (part, &part_page) in all.iter().enumerate() {
            let (bytes, part_done) = if part == 0 {
                (data.clone(), done)
            } else {
                // Later parts are issued at the same time: they are on one die, which serialises them.
                self.read_page(at, part_page, purpose)?
            };
            finished = finished.max(part_done);
            let part_header = RecordHeader::decode(&bytes, 0, part_page)?;
            if part_header.kind != layout::RECORD_KIND_LARGE
                || usize::from(part_header.part) != part
                || part_header.key_len as usize != key_len
                || bytes[LARGE_HEADER_BYTES..LARGE_HEADER_BYTES + key_len] != key[..]
            {
                return Err(SpaceError::Malformed {
                    page: part_page,
                    what: "large record part does not belong to its head",
                });
            }
            let take = per_page.min(value_len - value.len());
            let from = LARGE_HEADER_BYTES + key_len;
            value.extend_from_slice(&bytes[from..from + take]);
        }
        Ok((
            Record {
                namespace: header.namespace,
                key,
                value,
            },
            finished,
        ))
    }

    /// Reports that a record is no longer referenced. Pointers into blocks erased since the record
    /// was written are ignored (the erase already dropped their bytes from the accounting).
    pub fn invalidate_record(&mut self, pointer: RecordPointer, key_len: usize, value_len: usize) {
        let Ok(true) = self.check_generation(pointer) else {
            return;
        };
        let per_block = u64::from(self.geometry.pages_per_block);
        if self.is_large(key_len, value_len) {
            let pages = self.large_record_pages(key_len, value_len);
            if let Ok(all) = self.large_pages(pointer, pages) {
                for page in all {
                    self.sub_valid(page.0 / per_block, u64::from(self.geometry.page_bytes));
                }
            }
        } else {
            let bytes = self.record_footprint(key_len, value_len);
            self.sub_valid(pointer.page().0 / per_block, bytes);
        }
    }

    /// The block GC should collect next, or `None` if no closed block has anything to reclaim.
    ///
    /// Score (lower is better): `valid_fraction + 0.1 × wear`, with `wear` the block's erase count
    /// scaled to 0..1 between the least- and most-erased blocks. The valid fraction is what GC must
    /// copy, so it dominates; among blocks with about as much garbage the younger one goes first,
    /// which spreads erases (KAML §IV-E). A block whose every byte is valid is never a victim: it
    /// would cost a copy and reclaim nothing.
    ///
    /// Blocks a live snapshot may reach ([`Space::protect`]) are never victims.
    pub fn pick_victim(&self) -> Option<u64> {
        self.pick_victim_with(None, |_, _| true)
    }

    /// Like [`Space::pick_victim`], among the blocks of `namespace` (any when `None`) that
    /// `allow(stream, valid_bytes)` accepts.
    pub fn pick_victim_with(
        &self,
        namespace: Option<u32>,
        allow: impl Fn(Stream, u64) -> bool,
    ) -> Option<u64> {
        let per_block = self.geometry.pages_per_block;
        let block_bytes = self.geometry.block_bytes();
        let counts: Vec<u32> = (0..self.geometry.blocks_total())
            .map(|index| {
                self.flash
                    .erase_count(self.block_address(index))
                    .unwrap_or(0)
            })
            .collect();
        let least = counts.iter().copied().min().unwrap_or(0);
        let most = counts.iter().copied().max().unwrap_or(0);
        // Ties in score (blocks with nothing valid and equal wear are common) go to the die with
        // the fewest free blocks, so GC refills the dies that are short, then to the block
        // allocated first (allocations rotate over the dies). Block indices are die-major:
        // breaking ties by index erased die 0's blocks first, and writes that then found free
        // blocks only there piled onto the low dies.
        let mut best: Option<(f64, usize, u64, u64)> = None;
        for (index, info) in self.blocks.iter().enumerate() {
            let BlockUse::Used(stream) = info.usage else {
                continue;
            };
            if info.valid_bytes >= block_bytes
                || namespace.is_some_and(|namespace| namespace != info.owner)
                || !allow(stream, info.valid_bytes)
                || self.is_protected(index as u64)
            {
                continue;
            }
            let address = self.block_address(index as u64);
            // Only closed blocks: every page programmed (an open page in DRAM keeps its block open).
            if self.flash.programmed_pages(address).unwrap_or(0) != per_block {
                continue;
            }
            let valid = info.valid_bytes as f64 / block_bytes as f64;
            let wear = f64::from(counts[index] - least) / f64::from(most - least + 1);
            let score = valid + 0.1 * wear;
            let free_on_die = self.free_by_die[address.die as usize].len();
            let candidate = (score, free_on_die, info.allocated, index as u64);
            if best.is_none_or(|best| {
                candidate
                    .0
                    .total_cmp(&best.0)
                    .then(candidate.1.cmp(&best.1))
                    .then(candidate.2.cmp(&best.2))
                    .is_lt()
            }) {
                best = Some(candidate);
            }
        }
        best.map(|(_, _, _, index)| index)
    }

    /// Valid bytes the accounting holds for a block.
    pub fn block_valid_bytes(&self, block: u64) -> u64 {
        self.blocks
            .get(block as usize)
            .map_or(0, |info| info.valid_bytes)
    }

    /// Reads every page of a victim block (issued at once) and parses it.
    pub fn read_victim(&mut self, at: SimTime, block: u64) -> Result<(Victim, SimTime)> {
        let stream = match self.blocks.get(block as usize).map(|info| info.usage) {
            Some(BlockUse::Used(stream)) => stream,
            _ => {
                return Err(SpaceError::Config(format!(
                    "block {block} is not in use and cannot be a victim"
                )))
            }
        };
        let per_block = u64::from(self.geometry.pages_per_block);
        let chunk = self.config.chunk_bytes as usize;
        let chunks = self.chunks_per_page();
        let mut done = at;
        let mut meta = Vec::new();
        let mut records: Vec<VictimRecord> = Vec::new();
        let mut data = vec![0u8; self.geometry.page_bytes as usize];
        let mut oob = vec![0u8; layout::oob_bytes(chunks)];
        for page_in_block in 0..per_block {
            let page = PageIndex(block * per_block + page_in_block);
            let address = self.page_address(page)?;
            let read = self.read_retrying(at, address, Purpose::Gc, &mut data, &mut oob)?;
            done = done.max(read.done_at);
            match (stream, oob[0]) {
                (Stream::Meta, OOB_KIND_META) => meta.push((page, data.clone())),
                (Stream::Data, OOB_KIND_DATA) => {
                    let bitmap = &oob[1..];
                    let mut start = 0u32;
                    for end in 0..chunks {
                        if bitmap[(end / 8) as usize] & (1 << (end % 8)) == 0 {
                            continue;
                        }
                        let offset = start as usize * chunk;
                        let record = layout::decode_small(&data, offset, page)?;
                        let expected_end =
                            (RECORD_HEADER_BYTES + record.key.len() + record.value.len())
                                .div_ceil(chunk) as u32
                                + start
                                - 1;
                        if expected_end != end {
                            return Err(SpaceError::Malformed {
                                page,
                                what: "record-end bitmap disagrees with a record header",
                            });
                        }
                        let generation = self.erase_generation(block)?;
                        records.push(VictimRecord {
                            pointer: RecordPointer::new(page, start, generation),
                            namespace: record.namespace,
                            value_len: record.value.len() as u32,
                            key: record.key,
                            value: Some(record.value),
                        });
                        start = end + 1;
                    }
                }
                (Stream::Data, OOB_KIND_LARGE) => {
                    let header = RecordHeader::decode(&data, 0, page)?;
                    let head = RecordPointer::from_raw(layout::read_u64(
                        &data,
                        RECORD_HEADER_BYTES,
                        page,
                    )?);
                    let key_len = header.key_len as usize;
                    let key = data
                        .get(LARGE_HEADER_BYTES..LARGE_HEADER_BYTES + key_len)
                        .ok_or(SpaceError::Malformed {
                            page,
                            what: "large record key runs past the page",
                        })?
                        .to_vec();
                    if !records.iter().any(|known| known.pointer == head) {
                        records.push(VictimRecord {
                            pointer: head,
                            namespace: header.namespace,
                            key,
                            value_len: header.value_len,
                            value: None,
                        });
                    }
                }
                _ => {
                    return Err(SpaceError::Malformed {
                        page,
                        what: "page kind in OOB does not match its block's stream",
                    })
                }
            }
        }
        Ok((
            match stream {
                Stream::Meta => Victim::Meta(meta),
                Stream::Data => Victim::Data(records),
            },
            done,
        ))
    }

    /// Erases a victim after its live contents were relocated and returns it to the free pool.
    pub fn erase_victim(&mut self, at: SimTime, block: u64) -> Result<SimTime> {
        // What a live snapshot can reach is never erased.
        assert!(
            !self.is_protected(block),
            "block {block} holds pages a live snapshot can reach"
        );
        // A durable checkpoint may still reach a block allocated before it: write a newer one
        // first (the index published its state without this block).
        let at = self.before_erase(at, block)?;
        let usage = self.blocks[block as usize].usage;
        let owner = self.blocks[block as usize].owner;
        let address = self.block_address(block);
        let done = self.flash.erase(at, address, Purpose::Gc)?;
        match usage {
            BlockUse::Used(Stream::Meta) => self.stats.gc_meta_victims += 1,
            BlockUse::Used(Stream::Data) => self.stats.gc_data_victims += 1,
            BlockUse::Free | BlockUse::System => {}
        }
        let valid = self.blocks[block as usize].valid_bytes;
        self.sub_valid(block, valid);
        self.blocks[block as usize] = BlockInfo::FREE;
        if let Some(writer) = self.writers.get_mut(&owner) {
            for cursor in &mut writer.cursors {
                if cursor.last_meta == Some(block) {
                    cursor.last_meta = None;
                }
                if cursor.last_data == Some(block) {
                    cursor.last_data = None;
                }
            }
        }
        self.free_by_die[address.die as usize].push(address.block);
        self.free_count += 1;
        Ok(done)
    }

    /// Meta pages of a victim that the index still references, by asking it.
    pub fn live_meta_pages<'a>(
        victim: &'a [(PageIndex, Vec<u8>)],
        index: &dyn Liveness,
    ) -> Vec<&'a (PageIndex, Vec<u8>)> {
        victim
            .iter()
            .filter(|(page, bytes)| index.meta_is_live(*page, bytes))
            .collect()
    }
}

#[cfg(test)]
mod tests;
