//! The operations that change the array: programs (of a borrowed page or of a buffer handed
//! over), erases, and discards.

use super::{BlockState, Flash};
use crate::fault::InFlight;
use crate::media::PageBytes;
use crate::trailer::{page_crc, Trailer, PAGE_MAGIC};
use crate::{BlockAddress, FlashError, PageAddress, Purpose, Result, SimTime, OOB_RESERVED_BYTES};

impl Flash {
    /// Programs a page issued at `at` with `data` (exactly `page_bytes`) and `oob` (at most
    /// `oob_user_bytes`, zero-padded); returns when the program completes.
    pub fn program(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
        data: &[u8],
        oob: &[u8],
    ) -> Result<SimTime> {
        self.program_bytes(at, page, purpose, PageBytes::Borrowed(data), oob, false)
    }

    /// [`Flash::program`] of a page whose bytes hardly repeat: an index page of keys and
    /// pointers. The same operation in every figure, count and rule; compact media keep such a
    /// page as it is (but for a run of zero bytes at its end) instead of looking for runs in it,
    /// which costs more host time than any other part of writing it
    /// ([`crate::MediaKind::Compact`]). Any page may be programmed either way: the bytes read back
    /// are the same.
    pub fn program_dense(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
        data: &[u8],
        oob: &[u8],
    ) -> Result<SimTime> {
        self.program_bytes(at, page, purpose, PageBytes::Borrowed(data), oob, true)
    }

    /// [`Flash::program`] of a page buffer the caller is done with: file media writing behind
    /// queue the buffer itself, with the OOB area appended, instead of a copy of it. A buffer
    /// from [`Flash::page_buffer`] has room for that area already. Other media copy it as
    /// [`Flash::program`] does; figures, counters and timing are the same either way.
    pub fn program_owned(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
        data: Vec<u8>,
        oob: &[u8],
    ) -> Result<SimTime> {
        self.program_bytes(at, page, purpose, PageBytes::Owned(data), oob, false)
    }

    /// A zeroed page of `page_bytes`, with room after it for the OOB area of a slot of file
    /// media, for [`Flash::program_owned`].
    pub fn page_buffer(&self) -> Vec<u8> {
        let page = self.geometry.page_bytes as usize;
        let mut buffer = Vec::with_capacity(page + self.geometry.oob_bytes as usize);
        buffer.resize(page, 0);
        buffer
    }

    fn program_bytes(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
        bytes: PageBytes<'_>,
        oob: &[u8],
        dense: bool,
    ) -> Result<SimTime> {
        let data = bytes.as_slice();
        self.check_buffers(data.len(), oob.len())?;
        let slot = self.page_slot(page)?;
        if self.faults.power_cut {
            return Err(FlashError::PowerCut);
        }
        let next = self.blocks[slot].next_page;
        if page.page < next {
            return Err(FlashError::ProgramTwice { page });
        }
        if page.page > next {
            return Err(FlashError::ProgramOutOfOrder { page, next });
        }
        self.operations += 1;
        let in_flight = !self.faults.is_quiet() && self.faults.begin_operation();
        if self.faults.is_bad(page.block()) {
            return Err(if in_flight {
                FlashError::PowerCut
            } else {
                FlashError::ProgramFailed { page }
            });
        }
        let index = self.geometry.page_index(page);
        if let Some(cache) = self.index_cache.as_mut() {
            cache.forget(index, index + 1);
        }
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let reserved = OOB_RESERVED_BYTES as usize;
        self.oob_scratch.fill(0);
        self.oob_scratch[reserved..reserved + oob.len()].copy_from_slice(oob);
        let crc = page_crc(data, &self.oob_scratch[reserved..], index, sequence);
        Trailer {
            magic: PAGE_MAGIC,
            crc,
            sequence,
        }
        .encode(&mut self.oob_scratch);
        if in_flight {
            match self.faults.in_flight_program() {
                InFlight::Lost => {}
                InFlight::Completed => {
                    self.media.write(
                        index,
                        PageBytes::Borrowed(data),
                        &self.oob_scratch,
                        false,
                        dense,
                    )?;
                    self.blocks[slot].next_page += 1;
                    self.counters
                        .record_program(purpose, u64::from(self.geometry.page_bytes));
                }
                InFlight::Torn => {
                    // The cells from a random byte on did not finish programming.
                    let cut = (self.faults.next_u64() % data.len() as u64) as usize;
                    let mut torn = data.to_vec();
                    for byte in &mut torn[cut..] {
                        *byte = !*byte;
                    }
                    self.media.write(
                        index,
                        PageBytes::Borrowed(&torn),
                        &self.oob_scratch,
                        false,
                        dense,
                    )?;
                    self.torn_pages.insert(index);
                    self.blocks[slot].next_page += 1;
                    self.counters
                        .record_program(purpose, u64::from(self.geometry.page_bytes));
                }
            }
            return Err(FlashError::PowerCut);
        }
        let behind_allowed = self.faults.is_quiet();
        self.media
            .write(index, bytes, &self.oob_scratch, behind_allowed, dense)?;
        self.blocks[slot].next_page += 1;
        self.counters
            .record_program(purpose, u64::from(self.geometry.page_bytes));
        Ok(match &mut self.timeline {
            Some(timeline) => timeline.program(at, page.die, u64::from(self.geometry.page_bytes)),
            None => at,
        })
    }

    /// Tells the media that nothing will read programmed page `page` again before its block is
    /// erased (the layer above no longer references it, and no snapshot or durable state can
    /// reach it). Compact media free its bytes, and a later read of it, which still takes its
    /// time and is counted, fails with [`FlashError::Discarded`]; other media keep the page as it
    /// is. Not a NAND operation: it takes no time and changes no counter. Returns whether bytes
    /// were freed.
    pub fn discard(&mut self, page: PageAddress) -> Result<bool> {
        let slot = self.page_slot(page)?;
        if page.page >= self.blocks[slot].next_page {
            return Err(FlashError::ReadErased { page });
        }
        let index = self.geometry.page_index(page);
        if let Some(cache) = self.index_cache.as_mut() {
            cache.forget(index, index + 1);
        }
        Ok(self.media.discard(index))
    }

    /// Erases a whole block issued at `at`; returns when the erase completes.
    pub fn erase(&mut self, at: SimTime, block: BlockAddress, purpose: Purpose) -> Result<SimTime> {
        let slot = self.block_slot(block)?;
        if self.faults.power_cut {
            return Err(FlashError::PowerCut);
        }
        self.operations += 1;
        let in_flight = !self.faults.is_quiet() && self.faults.begin_operation();
        if self.faults.is_bad(block) {
            return Err(if in_flight {
                FlashError::PowerCut
            } else {
                FlashError::EraseFailed { block }
            });
        }
        if in_flight && !self.faults.coin() {
            return Err(FlashError::PowerCut);
        }
        if let Some(cache) = self.index_cache.as_mut() {
            let first = slot as u64 * u64::from(self.geometry.pages_per_block);
            cache.forget(first, first + u64::from(self.geometry.pages_per_block));
        }
        let erase_count = self.blocks[slot].erase_count.saturating_add(1);
        self.media
            .erase(slot as u64, erase_count, self.next_sequence)?;
        if !self.torn_pages.is_empty() {
            let first = slot as u64 * u64::from(self.geometry.pages_per_block);
            let last = first + u64::from(self.geometry.pages_per_block);
            let erased: Vec<u64> = self.torn_pages.range(first..last).copied().collect();
            for index in erased {
                self.torn_pages.remove(&index);
            }
        }
        self.blocks[slot] = BlockState {
            next_page: 0,
            erase_count,
            erase_sequence: self.next_sequence,
        };
        self.counters
            .record_erase(purpose, self.geometry.block_bytes());
        if in_flight {
            return Err(FlashError::PowerCut);
        }
        Ok(match &mut self.timeline {
            Some(timeline) => timeline.erase(at, block.die),
            None => at,
        })
    }
}
