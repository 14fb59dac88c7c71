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
//!   which records and pages are live by inspecting the [`Victim`], so the dependency points down.
//!
//! Byte layouts are in `docs/design.md` §15 ("Byte layouts").

mod config;
mod confine;
#[cfg(test)]
mod decoder_properties;
mod detached;
mod durable;
#[doc(hidden)]
pub mod fuzzing;
mod gc;
mod layout;
mod packed;
mod pointer;
mod pool;
mod records;

use std::collections::BTreeMap;

use kvssd_flash::{Flash, FlashError, Geometry, JobId, Lane, PageAddress, SimTime};

pub use config::SpaceConfig;

/// Whether a reader verifies the checksum a format keeps within a page (a record's, a bucket
/// page's) besides checking its bounds and fields ([`Space::read_contents`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// Verify it: the bytes come from outside the process (file media), or every read is to be
    /// verified ([`Flash::set_verify_every_read`]).
    Verify,
    /// Trust it: the flash layer returns exactly the bytes programmed (ram and compact media,
    /// which verify a page's checksum wherever a fault may have touched it; see `Flash`'s
    /// "Checksums"), and every page and record this product programs carries its checksum, so
    /// verifying it again would only read the bytes a second time on every read.
    Trust,
}
pub use detached::{DetachedRecord, RecordRead};
pub use durable::{EraseHook, Part, OOB_KIND_SYSTEM, SYSTEM_OWNER};
pub use layout::{
    RecordHeader, LARGE_HEADER_BYTES, OOB_KIND_DATA, OOB_KIND_LARGE, OOB_KIND_META,
    RECORD_HEADER_BYTES,
};
pub use packed::{PackedRecords, Placement, RecordPacker};
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
    /// The saved state given to [`Space::restore`] does not decode: damaged, or saved by an
    /// incompatible build or for another geometry.
    #[error("saved space state is malformed: {0}")]
    StateMalformed(&'static str),
    /// [`Space::open`] was given a flash array with a programmed page: it takes over erased
    /// arrays only (one that holds something is recovered, or is not a device at all).
    #[error("{block} is not erased: the space layer takes over an erased array")]
    NotErased {
        /// The first block found programmed.
        block: kvssd_flash::BlockAddress,
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
    /// The block's erase count, which does not change while it is in use: GC's victim pick
    /// scores every block from this record alone.
    erase_count: u32,
}

impl BlockInfo {
    const FREE: BlockInfo = BlockInfo {
        usage: BlockUse::Free,
        valid_bytes: 0,
        successor: None,
        owner: 0,
        allocated: 0,
        erase_count: 0,
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
    /// Namespaces confined to their logs' dies (see `confine.rs`).
    confined: std::collections::BTreeSet<u32>,
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
                return Err(SpaceError::NotErased { block: address });
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
            confined: std::collections::BTreeSet::new(),
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

    /// Whether the layers reading pages from this space verify the checksums their own formats
    /// carry (a record's, a bucket page's), or take the bytes on trust.
    pub fn read_contents(&self) -> Contents {
        if self.flash.verifies_every_read() {
            Contents::Verify
        } else {
            Contents::Trust
        }
    }

    /// Charges `cost_ns` of controller computation issued at `at`; returns when it completes.
    pub fn compute(&mut self, at: SimTime, cost_ns: u64) -> SimTime {
        if cost_ns == 0 {
            return at;
        }
        self.flash.compute(at, cost_ns)
    }

    /// Charges `cost_ns` to the merge accelerator (PinK+HW); returns when it completes.
    pub fn accelerate(&mut self, at: SimTime, cost_ns: u64) -> SimTime {
        if cost_ns == 0 {
            return at;
        }
        self.flash.accelerate(at, cost_ns)
    }

    /// Advances the command clock to `at`: see [`Flash::advance_clock`].
    pub fn advance_clock(&mut self, at: SimTime) {
        self.flash.advance_clock(at);
    }

    /// Starts a background step (flush, compaction, GC) issued at `at`: see
    /// [`Flash::begin_background`].
    pub fn begin_background(&mut self, at: SimTime, lane: Lane) {
        self.flash.begin_background(at, lane);
    }

    /// Inside a background step, holds its programs and erases back until
    /// [`Space::record_deferred_writes`]; returns whether it does (see [`Flash::defer_writes`]).
    pub fn defer_writes(&mut self) -> bool {
        self.flash.defer_writes()
    }

    /// Records the writes held back since [`Space::defer_writes`], after everything since.
    pub fn record_deferred_writes(&mut self) {
        self.flash.record_deferred_writes();
    }

    /// Ends a background step; returns its job if it queued one (see [`Flash::end_background`]).
    pub fn end_background(&mut self) -> Option<JobId> {
        self.flash.end_background()
    }

    /// When background job `job` finished, if it has by `now`.
    pub fn job_done_at(&mut self, job: JobId, now: SimTime) -> Option<SimTime> {
        self.flash.job_done_at(job, now)
    }

    /// When background job `job` will have finished if no more foreground work arrives.
    pub fn project_done(&mut self, job: JobId) -> SimTime {
        self.flash.project_done(job)
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

    pub(crate) fn chunks_per_page(&self) -> u32 {
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

    /// An upper bound of [`Space::blocks_needed`] found without walking the logs: each log's
    /// share of the pages needs at most one block more than the pages fill, and a data stream one
    /// more for a large record.
    pub fn blocks_needed_at_most(&self, namespace: u32, stream: Stream, pages: u64) -> u64 {
        let logs = self
            .writers
            .get(&namespace)
            .map_or(self.logs.len(), |writer| writer.cursors.len()) as u64;
        let per_block = u64::from(self.geometry.pages_per_block).max(1);
        pages.div_ceil(per_block) + logs + u64::from(stream == Stream::Data && pages > 0)
    }
}

#[cfg(test)]
mod tests;
