//! The durable state on flash: the superblock's two reserved blocks, the live write-ahead log and
//! the checkpoint area, and the protocol that updates them.
//!
//! Order of every update (the crash analysis is in `docs/design.md` §14):
//!
//! * **log append**: the record's pages are programmed (a new log block is first recorded in a new
//!   superblock copy); under [`SyncPolicy::EveryCommand`] the command is acknowledged only then.
//! * **checkpoint**: open data pages are programmed; the checkpoint's pages are programmed into
//!   checkpoint blocks; a superblock copy naming it (and, when the log is trimmed, a fresh empty log)
//!   is programmed; only then are the previous checkpoint's blocks and the trimmed log's blocks
//!   erased. The checkpoint thread takes the same steps with syncs run without the device's lock
//!   between them ([`Journal::prepare_checkpoint`], [`Journal::name_prepared`],
//!   [`Journal::release_named`]): records logged after the first step go to a log that only the
//!   superblock copy naming the checkpoint names, and nothing that would acknowledge one as
//!   durable runs before that copy is synced ([`Journal::commit_prepared`]).

use std::sync::{Arc, Mutex};

use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{EraseHook, Space, SpaceError, OOB_KIND_SYSTEM};

use crate::durability::checkpoint::{
    part_header, Checkpoint, CheckpointLocation, Extent, Mode, Root,
};
use crate::durability::log::LogWriter;
use crate::durability::superblock::{self, SuperblockCopy};
use crate::{DeviceError, NamespaceSpec};

/// The blocks (device-wide block indexes) that hold superblock copies.
pub const SUPERBLOCK_BLOCKS: [u64; 2] = [0, 1];

/// When a logged command is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Every command's record is programmed (and, on file media, `fdatasync`ed) before the command
    /// returns: an acknowledged command survives any crash.
    EveryCommand,
    /// Records are collected into the log page and programmed when `max_records` have gathered (or
    /// the page is full, or [`crate::Device::sync`] is called). A command is acknowledged when its
    /// record is durable, which [`crate::Device::durable_sequence`] reports; a crash loses only
    /// records not yet durable, never an acknowledged one, and always a suffix of the log.
    GroupCommit {
        /// Records per group.
        max_records: u32,
    },
    /// Records are programmed only when the log page fills or on [`crate::Device::sync`]: a crash
    /// may lose the records not yet synced (a suffix of the commands; never part of a batch). On
    /// a file image that suffix may include programmed records: those of a page not yet synced,
    /// and those logged while the checkpoint thread's checkpoint awaits its superblock copy.
    None,
}

/// What the durability machinery has written and synced since a device was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DurabilityCounts {
    /// Checkpoints written.
    pub checkpoints_written: u64,
    /// Write-ahead log pages written.
    pub log_pages_written: u64,
    /// Syncs (`fdatasync`) of a medium that keeps writes in a cache: file media only.
    pub media_syncs: u64,
}

/// Write-side state of the durable structures.
pub(crate) struct Journal {
    pub(crate) mode: Mode,
    pub(crate) sync: SyncPolicy,
    page_bytes: usize,
    pages_per_block: u32,
    sync_media: bool,
    sb_sequence: u64,
    sb_next_page: [u32; 2],
    next_log_id: u32,
    checkpoint: Option<CheckpointLocation>,
    ckpt_blocks: Vec<u64>,
    ckpt_next_page: u32,
    log_id: u32,
    log_blocks: Vec<u64>,
    log_next_page: u32,
    writer: LogWriter,
    pending_records: u32,
    /// `EveryCommand` kept by the device syncing after each command releases its lock (file
    /// media): the log itself then writes as under `None` ([`Journal::policy`]).
    pub(crate) every_command_after_unlock: bool,
    /// Sequence number of the newest record known durable.
    pub(crate) durable_lsn: Option<u64>,
    /// The sequence number the next record gets.
    pub(crate) next_lsn: u64,
    pub(crate) next_namespace: u32,
    pub(crate) namespaces: Vec<(u32, NamespaceSpec)>,
    pub(crate) checkpoints_written: u64,
    pub(crate) log_pages_written: u64,
    /// Syncs of a medium that keeps writes in a cache (file media) since open.
    pub(crate) media_syncs: u64,
    /// Log pages written to such a medium since its last sync (`SyncPolicy::None` writes a page
    /// that fills without syncing it).
    unsynced_pages: bool,
    /// Counts the times `unsynced_pages` was set, so that a sync that ran without the journal's
    /// lock clears it only if no page was written meanwhile.
    unsynced_generation: u64,
    /// A checkpoint whose pages are programmed but that no superblock copy names yet.
    prepared: Option<Prepared>,
    /// A checkpoint a superblock copy names that no sync has made durable yet.
    named: Option<Named>,
}

/// What a checkpoint named by a superblock copy not yet synced superseded: released (and its
/// records published as durable) once a sync has made the copy durable.
struct Named {
    /// The previous checkpoint's blocks and the trimmed log's.
    superseded: Vec<u64>,
    /// The newest record the checkpoint holds.
    covers: Option<u64>,
}

/// A checkpoint written by [`Journal::prepare_checkpoint`] and not yet committed: its pages are
/// programmed, the log it trimmed is kept until a superblock copy names it, and records appended
/// meanwhile go to the new log, which only that copy names.
struct Prepared {
    location: CheckpointLocation,
    /// Where the next checkpoint's pages go in its last block.
    next_page: u32,
    /// The blocks of the log it trimmed.
    old_log: Vec<u64>,
    /// The newest record it holds.
    covers: Option<u64>,
}

/// A sync of the medium begun by [`Journal::begin_sync`] and run by its caller without the
/// device's lock; [`Journal::finish_sync`] publishes what it made durable.
pub(crate) struct PendingSync {
    pub(crate) handle: kvssd_flash::SyncHandle,
    /// The newest record written to the medium when the sync was begun.
    target: Option<u64>,
    generation: u64,
}

fn flash_error(error: kvssd_flash::FlashError) -> SpaceError {
    SpaceError::Flash(error)
}

fn log_error(error: crate::durability::log::LogError) -> SpaceError {
    SpaceError::Config(error.to_string())
}

impl Journal {
    /// A journal for a freshly formatted device (its superblock blocks erased and reserved).
    pub(crate) fn fresh(
        space: &Space,
        mode: Mode,
        sync: SyncPolicy,
    ) -> Result<Journal, DeviceError> {
        Journal::resume(space, mode, sync, 0, [0, 0], 1)
    }

    /// A journal continuing after recovery: the superblock's sequence and write positions.
    pub(crate) fn resume(
        space: &Space,
        mode: Mode,
        sync: SyncPolicy,
        sb_sequence: u64,
        sb_next_page: [u32; 2],
        next_log_id: u32,
    ) -> Result<Journal, DeviceError> {
        let geometry = space.geometry();
        let page_bytes = geometry.page_bytes as usize;
        let writer = LogWriter::new(page_bytes, 0, 0)
            .map_err(|error| DeviceError::Space(log_error(error)))?;
        Ok(Journal {
            mode,
            sync,
            page_bytes,
            pages_per_block: geometry.pages_per_block,
            sync_media: !space.flash().media_kind().is_volatile(),
            sb_sequence,
            sb_next_page,
            next_log_id,
            checkpoint: None,
            ckpt_blocks: Vec::new(),
            ckpt_next_page: 0,
            log_id: 0,
            log_blocks: Vec::new(),
            log_next_page: 0,
            writer,
            pending_records: 0,
            every_command_after_unlock: false,
            durable_lsn: None,
            next_lsn: 0,
            next_namespace: 1,
            namespaces: Vec::new(),
            checkpoints_written: 0,
            log_pages_written: 0,
            media_syncs: 0,
            unsynced_pages: false,
            unsynced_generation: 0,
            prepared: None,
            named: None,
        })
    }

    /// Keeps the replayed log and checkpoint as the live ones until the first checkpoint after
    /// recovery replaces them (nothing is appended to a log whose tail may be torn).
    pub(crate) fn adopt(&mut self, root: &Root) {
        self.checkpoint = root.checkpoint.clone();
        self.ckpt_blocks = root
            .checkpoint
            .iter()
            .flat_map(|location| location.extents.iter().map(|extent| extent.block))
            .collect();
        self.ckpt_next_page = self.pages_per_block;
        self.log_id = root.log_id;
        self.log_blocks = root.log_blocks.clone();
        self.log_next_page = self.pages_per_block;
    }

    /// How the log writes: its policy, or `None` for an `EveryCommand` the device keeps by
    /// syncing after each command ([`Journal::every_command_after_unlock`]).
    fn policy(&self) -> SyncPolicy {
        if self.every_command_after_unlock {
            SyncPolicy::None
        } else {
            self.sync
        }
    }

    /// Pages the log holds (programmed or being filled).
    pub(crate) fn log_pages(&self) -> u64 {
        let Some(full) = self.log_blocks.len().checked_sub(1) else {
            return 0;
        };
        full as u64 * u64::from(self.pages_per_block) + u64::from(self.log_next_page)
    }

    /// Pages the live checkpoint took (0 before the first).
    pub(crate) fn checkpoint_pages(&self) -> u64 {
        self.checkpoint.as_ref().map_or(0, |location| {
            location
                .extents
                .iter()
                .map(|extent| u64::from(extent.pages))
                .sum()
        })
    }

    /// Pages per block.
    pub(crate) fn pages_per_block(&self) -> u32 {
        self.pages_per_block
    }

    fn root(&self) -> Root {
        Root {
            mode: self.mode,
            next_log_id: self.next_log_id,
            checkpoint: self.checkpoint.clone(),
            log_id: self.log_id,
            log_blocks: self.log_blocks.clone(),
        }
    }

    fn sync_flash(&mut self, space: &mut Space) -> Result<(), SpaceError> {
        if self.sync_media {
            space.flash_mut().sync().map_err(flash_error)?;
            self.media_syncs += 1;
            self.unsynced_pages = false;
        }
        Ok(())
    }

    /// Programs the next superblock copy (erasing its block first when full) and syncs.
    fn write_root(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime, SpaceError> {
        let done = self.program_root(space, at)?;
        self.sync_flash(space)?;
        self.release_named(space, done)
    }

    /// Programs the next superblock copy (erasing its block first when full), without a sync.
    fn program_root(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime, SpaceError> {
        debug_assert!(
            self.prepared.is_none(),
            "a superblock copy names the new log only with the checkpoint that trimmed the old"
        );
        let sequence = self.sb_sequence + 1;
        let slot = (sequence % 2) as usize;
        let block = space.geometry().block_at(SUPERBLOCK_BLOCKS[slot]);
        let mut t = at;
        if self.sb_next_page[slot] >= self.pages_per_block {
            t = space
                .flash_mut()
                .erase(t, block, Purpose::Checkpoint)
                .map_err(flash_error)?;
            self.sb_next_page[slot] = 0;
        }
        let copy = SuperblockCopy {
            sequence,
            body: self.root().encode(),
        };
        let page = superblock::encode(&copy, self.page_bytes)
            .map_err(|error| SpaceError::Config(error.to_string()))?;
        let done = space
            .flash_mut()
            .program(
                t,
                block.page(self.sb_next_page[slot]),
                Purpose::Checkpoint,
                &page,
                &[OOB_KIND_SYSTEM],
            )
            .map_err(flash_error)?;
        self.sb_next_page[slot] += 1;
        self.sb_sequence = sequence;
        Ok(done)
    }

    fn program_log_page(
        &mut self,
        space: &mut Space,
        at: SimTime,
        page: &[u8],
    ) -> Result<SimTime, SpaceError> {
        let mut t = at;
        if self.log_blocks.is_empty() || self.log_next_page >= self.pages_per_block {
            let block = space.take_system_block()?;
            self.log_blocks.push(block);
            self.log_next_page = 0;
            // Recovery must know of the block before any record in it can be acknowledged.
            // Under `SyncPolicy::None` no record is acknowledged before the next sync, which
            // covers this copy too: it is written, and synced with the records. While a
            // checkpoint is prepared, no record of the new log is acknowledged before the copy
            // that commits it, which names every block the new log has taken by then.
            if self.prepared.is_none() {
                if self.policy() == SyncPolicy::None && self.sync_media {
                    t = self.program_root(space, t)?;
                    self.mark_unsynced();
                } else {
                    t = self.write_root(space, t)?;
                }
            }
        }
        let Some(&block) = self.log_blocks.last() else {
            return Err(SpaceError::Config("the log has no block".into()));
        };
        let address = space.geometry().block_at(block).page(self.log_next_page);
        let done = space.program_system_page(t, address, Purpose::Log, page)?;
        self.log_next_page += 1;
        self.log_pages_written += 1;
        Ok(done)
    }

    /// Appends a record with the next sequence number; programs pages as the sync policy says.
    /// Returns the record's sequence number and when it is as durable as the policy makes it.
    pub(crate) fn append(
        &mut self,
        space: &mut Space,
        at: SimTime,
        record: &crate::durability::wal::WalRecord,
    ) -> Result<(u64, SimTime), SpaceError> {
        let lsn = self.next_lsn;
        let bytes = crate::durability::wal::encode(lsn, record);
        let mut pages = self.writer.append(&bytes).map_err(log_error)?;
        self.pending_records += 1;
        let flush = match self.policy() {
            SyncPolicy::EveryCommand => true,
            SyncPolicy::GroupCommit { max_records } => self.pending_records >= max_records.max(1),
            SyncPolicy::None => false,
        };
        if flush {
            pages.extend(self.writer.flush());
        }
        let mut t = at;
        let programmed = !pages.is_empty();
        for page in pages {
            t = t.max(self.program_log_page(space, at, &page)?);
        }
        self.next_lsn += 1;
        if programmed {
            // Under `SyncPolicy::None` a page that fills is written, not synced: the policy asks
            // for no sync, so its records become durable at the next sync (on media without a
            // write cache, at once).
            if flush || self.policy() != SyncPolicy::None || !self.sync_media {
                // A checkpoint is prepared only under `SyncPolicy::None` on synced media, where
                // this sync is never made (a record of its new log is durable only once a
                // superblock copy names that log).
                debug_assert!(self.prepared.is_none());
                self.sync_flash(space)?;
                if flush {
                    self.pending_records = 0;
                    self.durable_lsn = Some(lsn);
                } else {
                    // Pages that filled hold every record before this one entirely.
                    self.durable_lsn = lsn.checked_sub(1).or(self.durable_lsn);
                }
            } else {
                self.mark_unsynced();
            }
        }
        Ok((lsn, t))
    }

    fn mark_unsynced(&mut self) {
        self.unsynced_pages = true;
        self.unsynced_generation += 1;
    }

    /// Programs the log's partly filled page, if any: every record appended so far is then on
    /// the medium, awaiting a sync.
    fn program_partial_page(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<SimTime, SpaceError> {
        let mut t = at;
        if let Some(page) = self.writer.flush() {
            t = self.program_log_page(space, t, &page)?;
            if self.sync_media {
                self.mark_unsynced();
            }
        }
        self.pending_records = 0;
        Ok(t)
    }

    /// Makes every record appended so far durable, in two halves for file media: programs the
    /// log's partly filled page and, if the medium holds writes not yet synced, returns the sync
    /// for the caller to run once it has released the device's lock; [`Journal::finish_sync`] then publishes the
    /// records as durable. Without a medium to sync (or while faults are injected) it syncs here
    /// and returns no pending sync.
    pub(crate) fn begin_sync(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<(SimTime, Option<PendingSync>), SpaceError> {
        // Records in the new log of a prepared checkpoint are durable only once it is committed.
        let t = self.commit_prepared(space, at)?;
        let t = self.program_partial_page(space, t)?;
        let target = self.next_lsn.checked_sub(1);
        if self.unsynced_pages {
            if let Some(handle) = space.flash().sync_handle() {
                return Ok((
                    t,
                    Some(PendingSync {
                        handle,
                        target,
                        generation: self.unsynced_generation,
                    }),
                ));
            }
            self.sync_flash(space)?;
        }
        self.durable_lsn = target.max(self.durable_lsn);
        Ok((t, None))
    }

    /// Publishes a sync begun by [`Journal::begin_sync`] that has completed: every record up to
    /// its target was written before the sync began, so it is durable now.
    pub(crate) fn finish_sync(&mut self, pending: PendingSync) {
        self.media_syncs += 1;
        if self.unsynced_generation == pending.generation {
            self.unsynced_pages = false;
        }
        self.durable_lsn = pending.target.max(self.durable_lsn);
    }

    /// Writes a checkpoint of the published parts, the space layer's state and the namespace
    /// table; with `trim`, starts a new empty log (every part must then be current). Returns when
    /// the new superblock copy is durable and the superseded blocks are erased. A prepared
    /// checkpoint is committed first.
    pub(crate) fn checkpoint(
        &mut self,
        space: &mut Space,
        at: SimTime,
        trim: bool,
    ) -> Result<SimTime, SpaceError> {
        let mut t = self.commit_prepared(space, at)?;
        // Write-ahead: a checkpoint that keeps the log (the erase hook's, inside a command) holds
        // parts published after records not yet on the medium (the command's own record first:
        // it is appended before it is applied). Recovery replays each part from its sequence
        // number, so those records must be durable no later than the checkpoint, or a crash
        // recovers one namespace with a batch's effects and another without them. The log's
        // partly filled page is programmed first, and the sync below covers it.
        let flushed = !trim;
        if flushed {
            t = self.program_partial_page(space, t)?;
        }
        let (mut t, location, next_page) = self.write_checkpoint_pages(space, t)?;
        // The pages must be on stable storage before a copy of the superblock names them: a
        // medium that writes in any order could otherwise keep the copy and lose the pages.
        self.sync_flash(space)?;
        if flushed {
            self.durable_lsn = self.next_lsn.checked_sub(1).max(self.durable_lsn);
        }
        t = self.release_named(space, t)?;
        let new_blocks = location_blocks(&location);
        let old_ckpt: Vec<u64> = self
            .ckpt_blocks
            .iter()
            .copied()
            .filter(|block| !new_blocks.contains(block))
            .collect();
        let mut old_log = Vec::new();
        if trim {
            old_log = self.start_new_log()?;
            self.durable_lsn = self.next_lsn.checked_sub(1);
        }
        self.checkpoint = Some(location);
        t = self.write_root(space, t)?;
        space.mark_durable();
        self.ckpt_blocks = new_blocks;
        self.ckpt_next_page = next_page;
        self.checkpoints_written += 1;
        let erase_at = t;
        for block in old_ckpt.into_iter().chain(old_log) {
            t = t.max(space.release_system_block(erase_at, block)?);
        }
        Ok(t)
    }

    /// The first step of a checkpoint that trims the log, for a caller that syncs the medium
    /// without the device's lock: programs the checkpoint's pages and starts the new log, and
    /// returns the sync to run and the checkpoint's id; once it has run, the caller calls
    /// [`Journal::name_prepared`], syncs again and calls [`Journal::release_named`]. Records
    /// appended meanwhile go to the new log; whatever needs them durable, or needs a superblock
    /// copy, commits the checkpoint first ([`Journal::commit_prepared`], with a sync under the
    /// lock). A crash before the commit recovers the previous checkpoint and the trimmed log,
    /// which is kept until then: a suffix of the records since is lost, none of them
    /// acknowledged as durable. Where the medium cannot be synced without the lock, or the sync
    /// policy is not [`SyncPolicy::None`], writes the whole checkpoint here and returns no sync.
    pub(crate) fn prepare_checkpoint(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<(SimTime, Option<(kvssd_flash::SyncHandle, u32)>), SpaceError> {
        let t = self.commit_prepared(space, at)?;
        // Under a policy whose commands sync, the next command would commit the checkpoint at
        // once, with the sync of its pages under the lock: it is written whole here instead.
        let handle = space
            .flash()
            .sync_handle()
            .filter(|_| self.sync_media && self.sync == SyncPolicy::None);
        let Some(handle) = handle else {
            return Ok((self.checkpoint(space, t, true)?, None));
        };
        let (mut t, location, next_page) = self.write_checkpoint_pages(space, t)?;
        // The old log's last records, programmed: a crash of the process before the commit
        // finds them in the file (the checkpoint holds them too).
        if let Some(page) = self.writer.flush() {
            t = t.max(self.program_log_page(space, t, &page)?);
        }
        // Blocks allocated until now may hold pages this checkpoint reaches: none of them is
        // erased without a checkpoint first (which commits this one), as for a durable one.
        space.mark_durable();
        let covers = self.next_lsn.checked_sub(1);
        let old_log = self.start_new_log()?;
        // The checkpoint's pages and the old log's last page await a sync.
        self.mark_unsynced();
        let id = location.log_id;
        self.prepared = Some(Prepared {
            location,
            next_page,
            old_log,
            covers,
        });
        Ok((t, Some((handle, id))))
    }

    /// Commits the prepared checkpoint, if any: programs a superblock copy naming it and the new
    /// log, syncs, and erases the previous checkpoint's blocks and the trimmed log's.
    pub(crate) fn commit_prepared(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<SimTime, SpaceError> {
        if self.prepared.is_none() {
            return Ok(at);
        }
        let t = self.name_prepared(space, at, None)?;
        self.sync_flash(space)?;
        self.release_named(space, t)
    }

    /// Programs a superblock copy naming the prepared checkpoint, if any, and the new log,
    /// without syncing it: a caller that syncs without the device's lock then calls
    /// [`Journal::release_named`]. `synced` is the id of the checkpoint whose pages the caller's
    /// own sync made durable since it was prepared; for any other the medium is synced before
    /// the copy is programmed.
    pub(crate) fn name_prepared(
        &mut self,
        space: &mut Space,
        at: SimTime,
        synced: Option<u32>,
    ) -> Result<SimTime, SpaceError> {
        let Some(prepared) = self.prepared.take() else {
            return Ok(at);
        };
        let mut t = at;
        if synced != Some(prepared.location.log_id) || self.named.is_some() {
            self.sync_flash(space)?;
            t = self.release_named(space, t)?;
        }
        let new_blocks = location_blocks(&prepared.location);
        let mut superseded: Vec<u64> = self
            .ckpt_blocks
            .iter()
            .copied()
            .filter(|block| !new_blocks.contains(block))
            .collect();
        superseded.extend(prepared.old_log);
        self.checkpoint = Some(prepared.location);
        t = self.program_root(space, t)?;
        self.mark_unsynced();
        self.ckpt_blocks = new_blocks;
        self.ckpt_next_page = prepared.next_page;
        self.checkpoints_written += 1;
        self.named = Some(Named {
            superseded,
            covers: prepared.covers,
        });
        Ok(t)
    }

    /// After a sync that began once the copy naming a checkpoint was programmed: publishes the
    /// checkpoint's records as durable and erases what it superseded.
    pub(crate) fn release_named(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<SimTime, SpaceError> {
        let Some(named) = self.named.take() else {
            return Ok(at);
        };
        self.durable_lsn = named.covers.max(self.durable_lsn);
        let mut t = at;
        for block in named.superseded {
            t = t.max(space.release_system_block(at, block)?);
        }
        Ok(t)
    }

    /// Programs a checkpoint's pages after the live checkpoint's in its last block, then into new
    /// blocks; returns when they are programmed, where they are and where the next checkpoint's
    /// pages go in the last block.
    fn write_checkpoint_pages(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<(SimTime, CheckpointLocation, u32), SpaceError> {
        let mut t = space.sync_all(at, Purpose::Checkpoint)?;
        let space_state = space.export_state();
        // The parts are shared, not borrowed from the space, which programs the pages.
        let parts: Vec<(u32, u64, std::sync::Arc<Vec<u8>>)> = space
            .parts()
            .iter()
            .map(|(&namespace, part)| (namespace, part.replay_from, part.bytes.clone()))
            .collect();
        let head = Checkpoint::encode_head(
            self.next_lsn,
            self.next_namespace,
            &self.namespaces,
            &space_state,
            parts.len(),
        );
        let headers: Vec<[u8; 16]> = parts
            .iter()
            .map(|(namespace, replay_from, bytes)| {
                part_header((*namespace, *replay_from, bytes.as_slice()))
            })
            .collect();
        let mut pieces: Vec<&[u8]> = vec![&head];
        for (header, (_, _, bytes)) in headers.iter().zip(&parts) {
            pieces.push(header);
            pieces.push(bytes);
        }
        let id = self.next_log_id;
        self.next_log_id += 1;
        let mut writer = LogWriter::new(self.page_bytes, id, 0).map_err(log_error)?;
        let mut extents: Vec<Extent> = Vec::new();
        let mut block = self.ckpt_blocks.last().copied();
        let mut next_page = self.ckpt_next_page;
        let issue = t;
        let pages_per_block = self.pages_per_block;
        // Each page is programmed as the record fills it: no copy of the record, nor of its pages.
        let mut program = |page: &[u8]| -> Result<(), SpaceError> {
            if block.is_none() || next_page >= pages_per_block {
                block = Some(space.take_system_block()?);
                next_page = 0;
            }
            let Some(current) = block else {
                return Err(SpaceError::NoFreeBlock);
            };
            let address = space.geometry().block_at(current).page(next_page);
            t = t.max(space.program_system_page(issue, address, Purpose::Checkpoint, page)?);
            match extents.last_mut() {
                Some(extent) if extent.block == current => extent.pages += 1,
                _ => extents.push(Extent {
                    block: current,
                    first_page: next_page,
                    pages: 1,
                }),
            }
            next_page += 1;
            Ok(())
        };
        writer.append_pieces(&pieces, &mut program)?;
        if let Some(page) = writer.flush() {
            program(&page)?;
        }
        let location = CheckpointLocation {
            log_id: id,
            extents,
        };
        Ok((t, location, next_page))
    }

    /// Starts a new, empty log; returns the blocks of the one it replaces.
    fn start_new_log(&mut self) -> Result<Vec<u64>, SpaceError> {
        let old = std::mem::take(&mut self.log_blocks);
        self.log_id = self.next_log_id;
        self.next_log_id += 1;
        self.writer = LogWriter::new(self.page_bytes, self.log_id, 0).map_err(log_error)?;
        self.log_next_page = 0;
        self.pending_records = 0;
        Ok(old)
    }
}

/// The blocks a checkpoint's pages are in.
fn location_blocks(location: &CheckpointLocation) -> Vec<u64> {
    location.extents.iter().map(|extent| extent.block).collect()
}

impl Journal {
    /// Power-loss protection: records that the device runs on its DRAM state (the superblock names
    /// no dump), then erases the dump it was recovered from. A cut that finds no dump named means
    /// the dump at the cut did not complete: recovery refuses instead of loading stale state.
    pub(crate) fn mark_running(
        &mut self,
        space: &mut Space,
        at: SimTime,
    ) -> Result<SimTime, SpaceError> {
        self.checkpoint = None;
        let mut t = self.write_root(space, at)?;
        let erase_at = t;
        for block in std::mem::take(&mut self.ckpt_blocks) {
            t = t.max(space.release_system_block(erase_at, block)?);
        }
        self.ckpt_next_page = self.pages_per_block;
        Ok(t)
    }
}

/// The space layer's hook: a checkpoint (without trimming the log) before erasing a block a
/// durable checkpoint may reach.
pub(crate) struct Hook(pub(crate) Arc<Mutex<Journal>>);

impl EraseHook for Hook {
    fn before_erase(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime, SpaceError> {
        let mut journal = self
            .0
            .lock()
            .map_err(|_| SpaceError::Config("the journal lock is poisoned".into()))?;
        journal.checkpoint(space, at, false)
    }
}
