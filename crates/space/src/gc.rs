//! GC support: victim choice, victim scanning and release.

use crate::layout;
use crate::Result;
use crate::{
    BlockInfo, BlockUse, PageIndex, RecordHeader, RecordPointer, Space, SpaceError, Stream, Victim,
    VictimRecord, LARGE_HEADER_BYTES, OOB_KIND_DATA, OOB_KIND_LARGE, OOB_KIND_META,
    RECORD_HEADER_BYTES,
};
use kvssd_flash::{FlashError, Purpose, SimTime};

impl Space {
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
        let (least, most) = self.flash.erase_count_range();
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
            // A block's score is its valid share plus a wear term of 0 to 0.1, never less than
            // the share: a block whose share is above the best score so far cannot win. At
            // PinK's scale this scan covers 32,768 blocks for every victim, and checking each
            // block below that bound against what lies elsewhere (the namespace's snapshots,
            // the flash's block state) cost more than the scan: a block is scored from its
            // record alone, and only one that would win is checked further. The winner is the
            // least candidate in a total order, so checking it last picks what checking every
            // block first would.
            let valid = info.valid_bytes as f64 / block_bytes as f64;
            if best.is_some_and(|best| valid > best.0) {
                continue;
            }
            let wear = f64::from(info.erase_count - least) / f64::from(most - least + 1);
            let score = valid + 0.1 * wear;
            if best.is_some_and(|best| score > best.0) {
                continue;
            }
            let address = self.block_address(index as u64);
            let free_on_die = self.free_by_die[address.die as usize].len();
            let candidate = (score, free_on_die, info.allocated, index as u64);
            let better = best.is_none_or(|best| {
                candidate
                    .0
                    .total_cmp(&best.0)
                    .then(candidate.1.cmp(&best.1))
                    .then(candidate.2.cmp(&best.2))
                    .is_lt()
            });
            if !better
                || info.valid_bytes >= block_bytes
                || namespace.is_some_and(|namespace| namespace != info.owner)
                || !allow(stream, info.valid_bytes)
                || self.is_protected(index as u64)
            {
                continue;
            }
            // Only closed blocks: every page programmed (an open page in DRAM keeps its block open).
            if self.flash.programmed_pages(address).unwrap_or(0) != per_block {
                continue;
            }
            debug_assert_eq!(
                self.flash.erase_count(address).ok(),
                Some(info.erase_count),
                "block {index}'s erase count changed while it was in use"
            );
            best = Some(candidate);
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
            let read = match self
                .flash
                .read_retrying(at, address, Purpose::Gc, &mut data, &mut oob)
            {
                // A meta page discarded when it was invalidated: read (and timed) like any
                // other, and not live.
                Err(FlashError::Discarded { done_at, .. }) if stream == Stream::Meta => {
                    done = done.max(done_at);
                    continue;
                }
                other => other?,
            };
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
}
