//! [`Flash`]: one NAND array with its rules, timing, counters and faults, over either media.

use std::path::Path;

use crate::background::{JobId, Lane};
use crate::compact::CompactMedia;
use crate::fault::Faults;
use crate::index_cache::{IndexCache, IndexCacheStats};
use crate::media::{FileIo, FileMedia, Media, RamMedia, ReadFailure, SyncHandle};
use crate::timing::{Busy, Timeline};
use crate::write_behind::WriteBehind;
use crate::{
    BlockAddress, Counters, FaultConfig, FlashError, Geometry, MediaKind, PageAddress, Purpose,
    Result, SimTime, TimingProfile, OOB_RESERVED_BYTES,
};

use crate::trailer::{page_crc, Trailer};

mod program;

/// What a successful read returns besides the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRead {
    /// Simulated time at which the data is at the controller.
    pub done_at: SimTime,
    /// Device-wide program sequence number of the page: later programs have larger numbers.
    pub sequence: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct BlockState {
    /// Pages `0..next_page` are programmed (or were consumed by a torn program); the rest are erased.
    next_page: u32,
    erase_count: u32,
    /// The program sequence number at the block's last erase: a trailer with a lower sequence
    /// is a page programmed before it (file media keep erased pages' old bytes).
    erase_sequence: u64,
}

/// A NAND flash array.
///
/// # Rules
/// Every rule of NAND is enforced with an error, never silently: a page is programmed once between
/// erases of its block ([`FlashError::ProgramTwice`]); the pages of a block are programmed in order
/// ([`FlashError::ProgramOutOfOrder`]); erases work on whole blocks (the API has no other kind);
/// addresses are checked ([`FlashError::PageOutOfRange`]); reading a page that was not programmed since
/// the last erase is an error ([`FlashError::ReadErased`]), never an erased pattern. A page whose checksum
/// fails is reported as [`FlashError::Corrupt`] with its address and its bytes are not returned as good.
/// Rule violations are caller bugs: they are checked before anything happens and take no time.
///
/// # Checksums
/// Every program stores a CRC-32C of the page in its OOB trailer. On file media every read verifies
/// it: those bytes come from outside the process. On ram media a page can only be damaged by this
/// model's own fault injection, so a read verifies the checksum whenever damage is possible — the page
/// was torn by a power cut, or faults are being injected — and otherwise trusts memory, which keeps
/// simulated reads close to the speed of a memory copy. Compact media are memory too, and are
/// trusted the same way: their encoding is checked as it is decoded (a malformed one is an error,
/// never bytes), and a benchmark checks every value it reads against what it wrote.
/// [`Flash::set_verify_every_read`] turns verification of every read on for ram and compact media.
///
/// # Thread safety
/// `Flash` is `Send` but takes `&mut self` for every operation; the layers above serialise access.
pub struct Flash {
    geometry: Geometry,
    pub(crate) timeline: Option<Timeline>,
    media: Media,
    blocks: Vec<BlockState>,
    counters: Counters,
    faults: Faults,
    next_sequence: u64,
    operations: u64,
    oob_scratch: Vec<u8>,
    verify_every_read: bool,
    /// Pages (device-wide indices) a torn program left damaged, until their block is erased.
    torn_pages: std::collections::BTreeSet<u64>,
    /// Index pages kept in host memory (file media only, when asked for).
    index_cache: Option<IndexCache>,
}

impl Flash {
    /// A new, fully erased array in memory. `timing: None` makes every operation take no time.
    pub fn new(geometry: Geometry, timing: Option<TimingProfile>) -> Result<Flash> {
        geometry.validate()?;
        let media = Media::Ram(RamMedia::new(&geometry));
        let blocks = vec![BlockState::default(); geometry.blocks_total() as usize];
        Ok(Flash::assemble(geometry, timing, media, blocks, 0))
    }

    /// A new, fully erased array on `media`: [`Flash::new`] for [`MediaKind::Ram`], the compact
    /// encoding for [`MediaKind::Compact`], [`Flash::create`] for a [`MediaKind::File`]. Timing,
    /// counters and rules are the same on every media.
    pub fn new_on(
        media: &MediaKind,
        geometry: Geometry,
        timing: Option<TimingProfile>,
    ) -> Result<Flash> {
        match media {
            MediaKind::Ram => Flash::new(geometry, timing),
            MediaKind::Compact => {
                geometry.validate()?;
                let media = Media::Compact(CompactMedia::new(&geometry));
                let blocks = vec![BlockState::default(); geometry.blocks_total() as usize];
                Ok(Flash::assemble(geometry, timing, media, blocks, 0))
            }
            MediaKind::File(path) => Flash::create(path, geometry, timing),
        }
    }

    /// Formats a file or block device at `path` as a new, fully erased array.
    pub fn create(path: &Path, geometry: Geometry, timing: Option<TimingProfile>) -> Result<Flash> {
        geometry.validate()?;
        let media = Media::File(FileMedia::create(path, &geometry)?);
        let blocks = vec![BlockState::default(); geometry.blocks_total() as usize];
        Ok(Flash::assemble(geometry, timing, media, blocks, 0))
    }

    /// Opens an array formatted by [`Flash::create`]. If `expected` is given the image must have been
    /// formatted with exactly that geometry. What was programmed before is readable again.
    pub fn open(
        path: &Path,
        expected: Option<&Geometry>,
        timing: Option<TimingProfile>,
    ) -> Result<Flash> {
        let opened = FileMedia::open(path, expected)?;
        let geometry = opened.media.geometry();
        let pages_per_block = geometry.pages_per_block as usize;
        let oob_bytes = geometry.oob_bytes as usize;
        let mut oob = vec![0u8; pages_per_block * oob_bytes];
        let mut scratch = Vec::new();
        let mut blocks = Vec::with_capacity(geometry.blocks_total() as usize);
        let mut next_sequence = 0;
        for (block_index, (&erase_count, &erase_sequence)) in opened
            .erase_counts
            .iter()
            .zip(&opened.erase_sequences)
            .enumerate()
        {
            next_sequence = next_sequence.max(erase_sequence);
            if !opened.media.block_may_hold_data(block_index as u64) {
                // A hole in a sparse image: never programmed.
                blocks.push(BlockState {
                    next_page: 0,
                    erase_count,
                    erase_sequence,
                });
                continue;
            }
            opened
                .media
                .read_block_oob(block_index as u64, &mut scratch, &mut oob)?;
            // The write pointer is one past the last page programmed since the block's erase, so a
            // page is never programmed twice even if an earlier page lost its trailer (it then
            // reads as corrupt). Trailers older than the erase are what the erase left behind.
            let mut next_page = 0;
            for (page, area) in oob.chunks_exact(oob_bytes).enumerate() {
                let trailer = Trailer::decode(area);
                if trailer.names_program_since(erase_sequence) {
                    next_page = page as u32 + 1;
                    next_sequence = next_sequence.max(trailer.sequence + 1);
                }
            }
            blocks.push(BlockState {
                next_page,
                erase_count,
                erase_sequence,
            });
        }
        Ok(Flash::assemble(
            geometry,
            timing,
            Media::File(opened.media),
            blocks,
            next_sequence,
        ))
    }

    /// The geometry recorded in an image, read without opening the image for use.
    pub fn probe(path: &Path) -> Result<Geometry> {
        FileMedia::probe(path)
    }

    fn assemble(
        geometry: Geometry,
        timing: Option<TimingProfile>,
        media: Media,
        blocks: Vec<BlockState>,
        next_sequence: u64,
    ) -> Flash {
        Flash {
            verify_every_read: matches!(media, Media::File(_)),
            torn_pages: std::collections::BTreeSet::new(),
            timeline: timing.map(|profile| Timeline::new(profile, &geometry)),
            oob_scratch: vec![0u8; geometry.oob_bytes as usize],
            geometry,
            media,
            blocks,
            counters: Counters::default(),
            faults: Faults::new(FaultConfig::default()),
            next_sequence,
            operations: 0,
            index_cache: None,
        }
    }

    /// Keeps up to `bytes` of index pages (reads with [`Purpose::Index`]) in host memory, on
    /// file media only, where a read is a system call and a checksum; 0 turns the cache off.
    /// Memory media keep no such cache (their reads are memory copies, and the simulated
    /// figures stay those of the array). Returns whether a cache is on.
    pub fn set_index_cache_bytes(&mut self, bytes: u64) -> bool {
        self.index_cache = (bytes > 0 && matches!(self.media, Media::File(_))).then(|| {
            IndexCache::new(
                bytes,
                u64::from(self.geometry.page_bytes) + u64::from(self.geometry.oob_bytes),
            )
        });
        self.index_cache.is_some()
    }

    /// What the index page cache did and holds (`None` without one).
    pub fn index_cache_stats(&self) -> Option<IndexCacheStats> {
        self.index_cache.as_ref().map(IndexCache::stats)
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The timing profile, or `None` if operations take no simulated time.
    pub fn timing(&self) -> Option<&TimingProfile> {
        self.timeline.as_ref().map(Timeline::profile)
    }

    /// The system calls the file media made since the array was opened (`None` on memory
    /// media): a program is one write, a read one read.
    pub fn file_io(&self) -> Option<FileIo> {
        self.media.file_io()
    }

    /// Which media the pages are on.
    pub fn media_kind(&self) -> MediaKind {
        match &self.media {
            Media::Ram(_) => MediaKind::Ram,
            Media::Compact(_) => MediaKind::Compact,
            Media::File(file) => MediaKind::File(file.path().to_path_buf()),
        }
    }

    /// Bytes of page content the media hold in memory now: every block ever programmed on ram
    /// media, the encodings of the pages programmed since their blocks' last erase on compact
    /// media, nothing on file media.
    pub fn media_bytes(&self) -> u64 {
        self.media.held_bytes()
    }

    /// Verify the checksum of every read, not only of reads that a fault may have touched. Always on
    /// for file media; off by default for ram and compact media (see "Checksums" above).
    pub fn set_verify_every_read(&mut self, verify: bool) {
        self.verify_every_read = verify || matches!(self.media, Media::File(_));
    }

    /// Whether every read verifies its page checksum.
    pub fn verifies_every_read(&self) -> bool {
        self.verify_every_read
    }

    /// A snapshot of the operation counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Reads, programs and erases attempted so far (rule violations excluded).
    pub fn operations(&self) -> u64 {
        self.operations
    }

    /// How many times a block has been erased.
    pub fn erase_count(&self, block: BlockAddress) -> Result<u32> {
        Ok(self.blocks[self.block_slot(block)?].erase_count)
    }

    /// The least and the most erase counts of any block: `(0, 0)` on an array never erased.
    pub fn erase_count_range(&self) -> (u32, u32) {
        self.blocks
            .iter()
            .fold(None, |range: Option<(u32, u32)>, block| {
                let count = block.erase_count;
                Some(range.map_or((count, count), |(least, most)| {
                    (least.min(count), most.max(count))
                }))
            })
            .unwrap_or((0, 0))
    }

    /// How many pages of a block are programmed: the next page to program is this number.
    pub fn programmed_pages(&self, block: BlockAddress) -> Result<u32> {
        Ok(self.blocks[self.block_slot(block)?].next_page)
    }

    /// Whether fault injection has marked a block bad.
    pub fn is_bad(&self, block: BlockAddress) -> bool {
        self.faults.is_bad(block)
    }

    /// Operations and background work issued more than the timing model's booking window
    /// ([`crate::timing::BOOKING_WINDOW_NS`]) before the command clock (the latest issue time,
    /// without a clock), or before a horizon promised with [`Flash::advance_horizon`]; their
    /// timing may be too optimistic. Zero in every correct run.
    pub fn late_issues(&self) -> u64 {
        self.timeline.as_ref().map_or(0, Timeline::late_issues)
    }

    /// Promises that no operation will be issued before `horizon`, so the timing model may forget
    /// bookings that ended by then and keep its calendars short. A closed-loop driver knows such a
    /// time: the earliest ready time of its clients. Breaking the promise is counted in
    /// [`Flash::late_issues`].
    pub fn advance_horizon(&mut self, horizon: SimTime) {
        if let Some(timeline) = &mut self.timeline {
            timeline.advance_horizon(horizon);
        }
    }

    /// The simulated time by which every die, channel and controller core is idle.
    pub fn quiescent_at(&self) -> SimTime {
        self.timeline.as_ref().map_or(0, Timeline::quiescent_at)
    }

    /// Replaces the fault configuration (and restarts its operation count and generator).
    pub fn set_faults(&mut self, config: FaultConfig) {
        let power_cut = self.faults.power_cut;
        self.faults = Faults::new(config);
        self.faults.power_cut = power_cut;
    }

    /// Cuts power now: every operation fails until [`Flash::restore_power`].
    pub fn cut_power(&mut self) {
        self.faults.power_cut = true;
    }

    /// Whether power is cut.
    pub fn is_power_cut(&self) -> bool {
        self.faults.power_cut
    }

    /// Restores power after a cut. Programmed pages are as the cut left them; DRAM state above this
    /// layer is the caller's to rebuild.
    pub fn restore_power(&mut self) {
        self.faults.power_cut = false;
        self.faults.config.power_cut_after_operations = None;
    }

    /// Charges `cost_ns` of controller computation issued at `at` to the earliest-free controller
    /// core; returns when it completes.
    pub fn compute(&mut self, at: SimTime, cost_ns: u64) -> SimTime {
        match &mut self.timeline {
            Some(timeline) => timeline.cpu(at, cost_ns),
            None => at,
        }
    }

    /// Charges `cost_ns` of work to the merge accelerator (PinK+HW); returns when it completes.
    pub fn accelerate(&mut self, at: SimTime, cost_ns: u64) -> SimTime {
        match &mut self.timeline {
            Some(timeline) => timeline.accelerate(at, cost_ns),
            None => at,
        }
    }

    /// Advances the command clock to `at` (it never goes back): the time up to which the
    /// background thread issues its work. A driver that issues commands in time order (the device
    /// does, per command) calls it per command; without it, each foreground operation's own issue
    /// time serves, which lets a request's later dependent reads issue background work early.
    pub fn advance_clock(&mut self, at: SimTime) {
        if let Some(timeline) = &mut self.timeline {
            timeline.advance_clock(at);
        }
    }

    /// Starts a background step issued at `at`: until the matching [`Flash::end_background`], the
    /// timing of every operation is recorded for the background thread instead of booked, and
    /// operations return their issue time. Effects on the medium happen at once, as always.
    /// Nested calls join the outer step. A no-op without timing or under
    /// [`crate::ControllerModel::Interchangeable`]. See `background.rs` for how jobs are played.
    pub fn begin_background(&mut self, at: SimTime, lane: Lane) {
        if let Some(timeline) = &mut self.timeline {
            timeline.begin_background(at, lane);
        }
    }

    /// Inside a background step under [`crate::ControllerModel::Threads`]: holds the step's
    /// programs and erases back until [`Flash::record_deferred_writes`], which records them after
    /// whatever the step records meanwhile, so the job's work is in the order its timing needs
    /// while the pages reach the medium earlier. Returns whether it defers: not outside a
    /// background step, where every operation is booked as it is issued.
    pub fn defer_writes(&mut self) -> bool {
        self.timeline
            .as_mut()
            .is_some_and(|timeline| timeline.background.defer_writes())
    }

    /// Records the writes held back since [`Flash::defer_writes`].
    pub fn record_deferred_writes(&mut self) {
        if let Some(timeline) = &mut self.timeline {
            timeline.background.record_deferred();
        }
    }

    /// Flash operations (reads, programs, erases) issued inside background steps so far: under
    /// [`crate::ControllerModel::Threads`], those whose timing the background thread plays.
    pub fn background_operations(&self) -> u64 {
        self.timeline
            .as_ref()
            .map_or(0, |timeline| timeline.background.operations_recorded())
    }

    /// Ends a background step; returns its job if it is the outermost one and asked for work.
    pub fn end_background(&mut self) -> Option<JobId> {
        self.timeline.as_mut().and_then(Timeline::end_background)
    }

    /// When background job `job` finished, if it has by `now`.
    pub fn job_done_at(&mut self, job: JobId, now: SimTime) -> Option<SimTime> {
        match &mut self.timeline {
            Some(timeline) => timeline.job_done_at(job, now),
            None => Some(0),
        }
    }

    /// When background job `job` will have finished if no more foreground work arrives: what a
    /// writer waiting for it waits until.
    pub fn project_done(&mut self, job: JobId) -> SimTime {
        self.timeline
            .as_mut()
            .map_or(0, |timeline| timeline.project_done(job))
    }

    /// Controller work booked so far, by thread.
    pub fn busy(&self) -> Busy {
        self.timeline
            .as_ref()
            .map_or(Busy::default(), |timeline| timeline.busy)
    }

    /// Forces every completed program and erase to stable storage (file media); a no-op in memory.
    pub fn sync(&mut self) -> Result<()> {
        if self.faults.power_cut {
            return Err(FlashError::PowerCut);
        }
        self.media.sync()
    }

    /// File media: turns write-behind on or off. On, a program queues its page for
    /// [`WriteBehind::drain`] to write once the caller has released its locks; reads and syncs
    /// see queued pages as written. Memory media ignore it.
    pub fn set_write_behind(&mut self, on: bool) -> Result<()> {
        self.media.set_write_behind(on)
    }

    /// The write-behind queue (file media with write-behind on), to drain without this array.
    pub fn write_behind(&self) -> Option<std::sync::Arc<WriteBehind>> {
        self.media.write_behind()
    }

    /// A handle that syncs the file media while the caller holds no lock on this array, for
    /// callers that would rather not hold one across `fdatasync`. `None` on memory media (nothing
    /// to sync) and while faults are being injected or power is cut, where [`Flash::sync`] must
    /// decide what a sync does.
    pub fn sync_handle(&self) -> Option<SyncHandle> {
        if self.faults.power_cut || !self.faults.is_quiet() {
            return None;
        }
        self.media.sync_handle()
    }

    /// Reads a page issued at `at`: its payload into `data` (exactly `page_bytes`) and the first
    /// `oob.len()` bytes of its user OOB area into `oob` (at most `oob_user_bytes`).
    pub fn read(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<PageRead> {
        self.check_buffers(data.len(), oob.len())?;
        let slot = self.readable_slot(page)?;
        let index = self.geometry.page_index(page);
        let cached = purpose == Purpose::Index && self.faults.is_quiet();
        if cached {
            if let Some(hit) = self.index_cache.as_mut().and_then(|cache| cache.get(index)) {
                // Verified when it was read, and unchanged since: the page was neither
                // programmed nor erased, or the cache would have forgotten it.
                let reserved = OOB_RESERVED_BYTES as usize;
                data.copy_from_slice(&hit.data);
                oob.copy_from_slice(&hit.oob[reserved..reserved + oob.len()]);
                return Ok(PageRead {
                    done_at: at,
                    sequence: hit.sequence,
                });
            }
        }
        self.operations += 1;
        if !self.faults.is_quiet() && self.faults.begin_operation() {
            return Err(FlashError::PowerCut);
        }
        let discarded = match self
            .media
            .read(index, data, &mut self.oob_scratch, &self.geometry)
        {
            Ok(()) => false,
            Err(ReadFailure::Discarded) => true,
            Err(ReadFailure::Error(error)) => return Err(error),
        };
        let done_at = self.time_read(at, page, purpose);
        if discarded {
            // The read took its time as on any media; only its bytes are gone.
            return Err(FlashError::Discarded { page, done_at });
        }
        let faults_active = !self.faults.is_quiet();
        if faults_active {
            let bits = (data.len() + self.oob_scratch.len()) as u64 * 8;
            if let Some(bit) = self.faults.bit_flip(bits) {
                let byte = (bit / 8) as usize;
                let mask = 1u8 << (bit % 8);
                match data.get_mut(byte) {
                    Some(value) => *value ^= mask,
                    None => self.oob_scratch[byte - data.len()] ^= mask,
                }
            }
        }
        let trailer = Trailer::decode(&self.oob_scratch);
        let user_oob = &self.oob_scratch[OOB_RESERVED_BYTES as usize..];
        let verify = self.verify_every_read
            || faults_active
            || (!self.torn_pages.is_empty() && self.torn_pages.contains(&index));
        if !self.is_current(slot, &trailer)
            || (verify && trailer.crc != page_crc(data, user_oob, index, trailer.sequence))
        {
            return Err(FlashError::Corrupt { page });
        }
        oob.copy_from_slice(&user_oob[..oob.len()]);
        if cached && verify {
            if let Some(cache) = self.index_cache.as_mut() {
                cache.insert(index, data, &self.oob_scratch, trailer.sequence);
            }
        }
        Ok(PageRead {
            done_at,
            sequence: trailer.sequence,
        })
    }

    /// The block slot of page `page` if a read may be issued to it: the page is on the device,
    /// power is on and the page was programmed since its block's erase.
    pub(crate) fn readable_slot(&self, page: PageAddress) -> Result<usize> {
        let slot = self.page_slot(page)?;
        if self.faults.power_cut {
            return Err(FlashError::PowerCut);
        }
        if page.page >= self.blocks[slot].next_page {
            return Err(FlashError::ReadErased { page });
        }
        Ok(slot)
    }

    /// Books a page read issued at `at` and counts it; returns when it completes.
    pub(crate) fn time_read(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
    ) -> SimTime {
        let done_at = match &mut self.timeline {
            Some(timeline) => timeline.read(at, page.die, u64::from(self.geometry.page_bytes)),
            None => at,
        };
        self.counters
            .record_read(purpose, u64::from(self.geometry.page_bytes));
        done_at
    }

    /// Whether a read may run detached ([`Flash::read_detached_range`]): no faults are injected.
    pub(crate) fn detachable(&self) -> bool {
        self.faults.is_quiet()
    }

    /// File media: where a page's slot lies (the read counted); `None` on memory media.
    pub(crate) fn slot_source(&mut self, index: u64) -> Option<crate::media::SlotSource> {
        self.media.slot_source(index)
    }

    /// Counts an operation issued.
    pub(crate) fn count_operation(&mut self) {
        self.operations += 1;
    }

    /// Whether a trailer names a program of the page since its block's last erase.
    fn is_current(&self, slot: usize, trailer: &Trailer) -> bool {
        trailer.names_program_since(self.blocks[slot].erase_sequence)
    }

    /// Reads page `page` of compact media as [`Flash::read`] does (the same rules, time and
    /// counters) but decodes only its OOB area; the caller then decodes the parts it needs from
    /// [`Flash::encoding`] ([`Flash::read_parts`]). `None` when a read must see the whole page:
    /// other media, or a checksum to verify (faults, a torn page, verification asked for).
    pub(crate) fn read_encoded(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
    ) -> Option<Result<PageRead>> {
        let index = self.geometry.page_index(page);
        if !matches!(self.media, Media::Compact(_))
            || self.verify_every_read
            || !self.faults.is_quiet()
            || self.torn_pages.contains(&index)
        {
            return None;
        }
        Some(self.read_encoded_checked(at, page, purpose))
    }

    fn read_encoded_checked(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
    ) -> Result<PageRead> {
        let slot = self.readable_slot(page)?;
        self.operations += 1;
        // Compact media keep a page's OOB area first.
        let mut oob = std::mem::take(&mut self.oob_scratch);
        let decoded = self.encoding(page).and_then(|encoded| {
            crate::compact::decode_span(encoded, 0, &mut oob)
                .map_err(|what| FlashError::MediaMalformed { page, what })
        });
        self.oob_scratch = oob;
        let discarded = match decoded {
            Ok(()) => false,
            Err(FlashError::Discarded { .. }) => true,
            Err(error) => return Err(error),
        };
        let done_at = self.time_read(at, page, purpose);
        if discarded {
            // The read took its time as on any media; only its bytes are gone.
            return Err(FlashError::Discarded { page, done_at });
        }
        let trailer = Trailer::decode(&self.oob_scratch);
        if !self.is_current(slot, &trailer) {
            return Err(FlashError::Corrupt { page });
        }
        Ok(PageRead {
            done_at,
            sequence: trailer.sequence,
        })
    }

    /// The media, for host-side hints ([`Flash::prefetch`]).
    pub(crate) fn media(&self) -> &Media {
        &self.media
    }

    /// Page `page`'s encoding on compact media, in the (at most two) pieces it lies in. A
    /// discarded page is [`FlashError::Discarded`] (with no time: nothing was read).
    pub(crate) fn encoding(&self, page: PageAddress) -> Result<Encoded<'_>> {
        let Media::Compact(media) = &self.media else {
            return Err(FlashError::MediaMalformed {
                page,
                what: "not compact media",
            });
        };
        media
            .encoded(self.geometry.page_index(page))
            .map_err(|failure| match failure {
                crate::compact::Unreadable::Discarded => FlashError::Discarded { page, done_at: 0 },
                crate::compact::Unreadable::Malformed(what) => {
                    FlashError::MediaMalformed { page, what }
                }
            })
    }

    fn check_buffers(&self, data: usize, oob: usize) -> Result<()> {
        if data != self.geometry.page_bytes as usize {
            return Err(FlashError::BufferSize {
                what: "page data",
                expected: self.geometry.page_bytes as usize,
                actual: data,
            });
        }
        if oob > self.geometry.oob_user_bytes() as usize {
            return Err(FlashError::BufferSize {
                what: "OOB",
                expected: self.geometry.oob_user_bytes() as usize,
                actual: oob,
            });
        }
        Ok(())
    }

    fn block_slot(&self, block: BlockAddress) -> Result<usize> {
        if !self.geometry.contains_block(block) {
            return Err(FlashError::BlockOutOfRange { block });
        }
        Ok(self.geometry.block_index(block) as usize)
    }

    fn page_slot(&self, page: PageAddress) -> Result<usize> {
        if !self.geometry.contains_page(page) {
            return Err(FlashError::PageOutOfRange { page });
        }
        Ok(self.geometry.block_index(page.block()) as usize)
    }
}

/// A page's encoding on compact media, in the (at most two) pieces it lies in.
pub(crate) type Encoded<'a> = [&'a [u8]; 2];
