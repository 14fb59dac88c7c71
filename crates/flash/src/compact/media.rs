//! The compact media themselves: each block's page encodings ([`super::encode`]) in a
//! [`BlockArena`], read back whole or in spans, freed on discard and erase.

use super::{decode_into, encode, encode_dense, Malformed, SpanReader};
use crate::arena::{chunk_bytes_for, BlockArena, Pools};
use crate::{prefetch, Geometry, PageAddress};

/// Bytes of each encoding [`CompactMedia::prefetch`] fetches at most: a page of records encodes
/// to about 525.
const PREFETCH_BYTES: usize = 1024;
/// Bytes of each encoding's head [`CompactMedia::prefetch_spans`] fetches before the spans: the
/// OOB area's operations, the payload's first header and the page's own header.
const SPAN_HEAD_BYTES: usize = 128;

/// Pages in memory in the encoding above, each block's packed end to end in chunks
/// ([`crate::arena`]): no allocation a page, and a chunk freed once every page in it is discarded.
pub(crate) struct CompactMedia {
    geometry: Geometry,
    page_bytes: usize,
    slot: Vec<u8>,
    scratch: Vec<u8>,
    /// By block, its programmed pages in order.
    blocks: Vec<BlockArena>,
    /// The memory of the blocks' chunks.
    pools: Pools,
    /// Bytes the blocks hold (kept as a sum: statistics read it per request).
    stored: u64,
}

/// What reading a page of the compact media can find instead of its bytes.
pub(crate) enum Unreadable {
    /// The page's bytes were discarded.
    Discarded,
    /// The encoding is malformed (never returned as data).
    Malformed(Malformed),
}

impl CompactMedia {
    pub(crate) fn new(geometry: &Geometry) -> Self {
        let slot_bytes = (geometry.page_bytes + geometry.oob_bytes) as usize;
        CompactMedia {
            geometry: *geometry,
            page_bytes: geometry.page_bytes as usize,
            slot: vec![0u8; slot_bytes],
            scratch: Vec::new(),
            blocks: (0..geometry.blocks_total())
                .map(|_| BlockArena::new(chunk_bytes_for(slot_bytes)))
                .collect(),
            pools: Pools::new(
                chunk_bytes_for(slot_bytes),
                geometry.pages_per_block as usize,
            ),
            stored: 0,
        }
    }

    fn locate(&self, index: u64) -> (usize, usize) {
        let pages_per_block = u64::from(self.geometry.pages_per_block);
        (
            (index / pages_per_block) as usize,
            (index % pages_per_block) as usize,
        )
    }

    /// Copies page `index` into `data` and `oob`. A page never programmed reads as erased (the
    /// flash layer does not read such pages).
    pub(crate) fn read(
        &mut self,
        index: u64,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<(), Unreadable> {
        let (block, page) = self.locate(index);
        let Some(pages) = self.blocks.get(block) else {
            return Err(Unreadable::Malformed("the page is outside the media"));
        };
        if page >= pages.len() {
            data.fill(0xFF);
            oob.fill(0);
            return Ok(());
        }
        let encoded = pages
            .parts(&self.pools, page)
            .ok_or(Unreadable::Discarded)?;
        decode_into(encoded, [oob, data]).map_err(Unreadable::Malformed)
    }

    /// Page `index`'s encoding, in the (at most two) pieces it lies in, for reading parts of it
    /// ([`decode_span`]). The flash layer reads only programmed pages.
    pub(crate) fn encoded(&self, index: u64) -> Result<[&[u8]; 2], Unreadable> {
        let (block, page) = self.locate(index);
        let pages = self
            .blocks
            .get(block)
            .filter(|pages| page < pages.len())
            .ok_or(Unreadable::Malformed("the page was never stored"))?;
        pages.parts(&self.pools, page).ok_or(Unreadable::Discarded)
    }

    /// Touches what reads of pages `indices` will touch, in passes that each take one step for
    /// every page, so that the host fetches the pages' steps together rather than one miss after
    /// another: loads of the block's tables, the page's entry and its chunk's entry (read only
    /// where the page's entry does not name the slot), whose values give the next addresses,
    /// then prefetches ([`prefetch::line`]) of the first cache line of every page's encoding, and
    /// then of the other lines of its first [`PREFETCH_BYTES`]. Changes nothing.
    pub(crate) fn prefetch(&self, indices: &[u64]) {
        self.prefetch_heads(indices, PREFETCH_BYTES);
    }

    /// [`CompactMedia::prefetch`] for reads of a few bytes of each page: for each `(index, from,
    /// length)` of `spans`, the head of the page's encoding ([`SPAN_HEAD_BYTES`]), then, a pass
    /// later, the lines that hold the slot's bytes `from..from + length` (where they lie in a
    /// literal; a run's bytes are in the operation's header). A `hash` probe reads its bucket
    /// page's header and a few slots anywhere in 8 KiB: the first KiB would fetch lines it does
    /// not read and miss the ones it does. Changes nothing.
    pub(crate) fn prefetch_spans(&self, spans: &[(u64, usize, usize)]) {
        let indices: Vec<u64> = spans.iter().map(|&(index, _, _)| index).collect();
        self.prefetch_heads(&indices, SPAN_HEAD_BYTES);
        for &(index, from, length) in spans {
            let Ok(parts) = self.encoded(index) else {
                continue;
            };
            let mut reader = SpanReader::new(parts);
            let last = from + length.max(1) - 1;
            let offsets = (from..=last).step_by(prefetch::LINE_BYTES).chain([last]);
            for offset in offsets {
                match reader.literal_at(offset) {
                    Ok(Some(byte)) => prefetch::line(byte),
                    Ok(None) => {}
                    Err(_) => break,
                }
            }
        }
    }

    /// The passes of [`CompactMedia::prefetch`], fetching each encoding's first `bytes`.
    fn prefetch_heads(&self, indices: &[u64], bytes: usize) {
        let arenas: Vec<(&BlockArena, usize)> = indices
            .iter()
            .filter_map(|&index| {
                let (block, page) = self.locate(index);
                Some((self.blocks.get(block)?, page))
            })
            .collect();
        let mut sum = 0usize;
        for (arena, _) in &arenas {
            sum = sum.wrapping_add(arena.len());
        }
        for (arena, page) in &arenas {
            sum = sum.wrapping_add(arena.start_of(&self.pools, *page));
        }
        for (arena, page) in &arenas {
            sum = sum.wrapping_add(arena.chunk_address(&self.pools, *page));
        }
        std::hint::black_box(sum);
        let heads: Vec<[&[u8]; 2]> = arenas
            .iter()
            .filter_map(|(arena, page)| arena.parts(&self.pools, *page))
            .collect();
        // Each page's first line in a pass of its own: the first prefetch into a page is the one
        // that waits (in a profile, two thirds of this function's time sat on it, the others'
        // lines next to nothing), and a pass of one prefetch a page keeps many of those waits in
        // flight together, where a page's other lines between them held the processor's window
        // to one or two pages at a time.
        for [part, _] in &heads {
            if let Some(byte) = part.first() {
                prefetch::line(byte);
            }
        }
        for parts in heads {
            // The lines a read starts with: a page of records whole, a bucket or meta page's
            // head (a copy of the rest streams behind it).
            let mut left = bytes;
            for part in parts {
                for byte in part.iter().take(left).step_by(prefetch::LINE_BYTES) {
                    prefetch::line(byte);
                }
                left = left.saturating_sub(part.len());
            }
        }
    }

    /// Stores page `index`, the next page of its block (the flash layer checked the order), its
    /// payload in [`encode_dense`]'s encoding if `dense`, else in [`encode`]'s.
    pub(crate) fn write(
        &mut self,
        index: u64,
        data: &[u8],
        oob: &[u8],
        dense: bool,
    ) -> Result<(), (PageAddress, Malformed)> {
        let (block, page) = self.locate(index);
        let address = self.geometry.page_at(index);
        let Some(pages) = self.blocks.get_mut(block) else {
            return Err((address, "the page is outside the media"));
        };
        if pages.len() != page {
            return Err((address, "pages of a block must be stored in order"));
        }
        // The OOB area first: a read that wants only the trailer and one record decodes the
        // first operations, and the record's (`decode_span`).
        let oob_bytes = self.slot.len() - self.page_bytes;
        if oob.len() != oob_bytes || data.len() != self.page_bytes {
            return Err((address, "a page's payload and OOB area must fill its slot"));
        }
        self.scratch.clear();
        if dense {
            // The OOB area, mostly zeros after the trailer, as any slot; then the page, with no
            // copy into the slot first. Each encoding covers its part exactly, so the two cover
            // the slot.
            encode(oob, &mut self.scratch);
            encode_dense(data, &mut self.scratch);
        } else {
            self.slot[..oob_bytes].copy_from_slice(oob);
            self.slot[oob_bytes..].copy_from_slice(data);
            encode(&self.slot, &mut self.scratch);
        }
        let before = pages.held_bytes(&self.pools);
        pages.push(&mut self.pools, &self.scratch);
        if pages.len() == self.geometry.pages_per_block as usize {
            pages.trim(&mut self.pools);
        }
        self.stored = self.stored + pages.held_bytes(&self.pools) - before;
        Ok(())
    }

    /// Frees the bytes of programmed page `index`, which nothing will read again: reading it then
    /// fails with [`Unreadable::Discarded`]. Returns whether the page was programmed and not yet
    /// discarded.
    pub(crate) fn discard(&mut self, index: u64) -> bool {
        let (block, page) = self.locate(index);
        let Some(pages) = self.blocks.get_mut(block) else {
            return false;
        };
        let before = pages.held_bytes(&self.pools);
        let discarded = pages.discard(&mut self.pools, page);
        self.stored = self.stored + pages.held_bytes(&self.pools) - before;
        discarded
    }

    /// Forgets a block's pages and frees their memory.
    pub(crate) fn erase(&mut self, block: u64) {
        if let Some(pages) = self.blocks.get_mut(block as usize) {
            self.stored -= pages.held_bytes(&self.pools);
            pages.release(&mut self.pools);
        }
    }

    /// Bytes the media hold now: the blocks' chunks and tables.
    pub(crate) fn stored_bytes(&self) -> u64 {
        self.stored
    }
}
