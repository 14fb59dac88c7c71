//! One block's page encodings for compact media, packed end to end in chunks of [`CHUNK_BYTES`]
//! rather than one allocation a page.
//!
//! A page of records encodes to about 500 bytes and a meta page to a little over 8 KiB; one
//! allocation each was rounded up by the allocator's size classes (a 520-byte encoding took 640
//! bytes, an 8.2 KiB one 10 KiB), a fifth of all memory at PinK's scale. A chunk is a slot of the
//! media's [`Pools`] ([`crate::pool`]: mappings in transparent huge pages), 14 KiB, except a full
//! block's last chunk, which [`BlockArena::trim`] moves into an allocation of what it holds.
//!
//! A page may straddle two chunks. Each chunk counts the pages not yet discarded that lie in it,
//! and is returned to the pool when that count reaches zero, so discarding pages (a merge reading
//! its lower level) frees memory as it goes rather than at the block's erase.
//!
//! An encoding of 8 KiB or more ([`LONE_MIN_BYTES`]: a meta or bucket page of 8 KiB, whose keys
//! and pointers do not repeat) is kept alone instead, in a slot of [`LONE_HEAD_BYTES`] and, past
//! those, an allocation for the rest, both freed when the page is discarded. In chunks, such a
//! page shared each chunk with one or two neighbours, and a chunk was freed only when all of them
//! were: where GC moves meta pages out of their blocks one by one (`lightstore`,
//! `pink-gcrewrite`), the meta blocks' chunks held half as much again as their pages' encodings.
//!
//! A page's entry in its block's page table names the slot its encoding lies in, where it lies
//! in one (a chunk not trimmed, or the slot of an encoding kept alone that holds all of it), so
//! that a read goes from the entry straight to the bytes, not through the chunk table or the
//! record of the encoding kept alone: at PinK's scale each such step is a miss of the host's
//! caches (docs/design.md, "The slot in the page's entry"). The page table is a slot of the pools
//! too, so that its entries, a read's first miss, lie in huge pages as the encodings do.

use crate::pool::{Slot, SlotPool};

/// Bytes of one chunk of compact media (larger for pages whose encoding may not fit in it, see
/// [`chunk_bytes_for`]). A trimmed chunk's bytes, fewer, then fall in jemalloc's small size
/// classes, allocated exactly from slabs; 16 KiB and more are large allocations padded with a
/// page (a `pink` run on compact media, when every chunk was an allocation, peaked at 482 MB
/// resident with 16 KiB chunks, 421 MB with 14 KiB ones).
pub(crate) const CHUNK_BYTES: usize = 14 << 10;

/// The chunk size for slots (payload and OOB) of `slot_bytes`: at least the longest encoding of
/// such a slot, so that an encoding lies in two chunks at most. An encoding is at most 4 bytes
/// longer than its slot (every literal costs at most 4 bytes beyond its own, and every literal but
/// the last is followed by a run of 16 bytes or more, which costs at most 20); the margin here is
/// wider.
pub fn chunk_bytes_for(slot_bytes: usize) -> usize {
    CHUNK_BYTES.max(slot_bytes + slot_bytes / 4 + 8)
}

/// Encodings at least this long are kept alone: their first [`LONE_HEAD_BYTES`] in a slot of
/// their own, the rest (if any) in an allocation of its own.
pub(crate) const LONE_MIN_BYTES: usize = 8 << 10;

/// Bytes of the slot of an encoding kept alone. A meta or bucket page of 8 KiB with a 256-byte
/// OOB area encodes to 8,208 to 8,223 bytes (every such page of a `pink` and a `hash` Load: the
/// payload as one literal, the trailer and user OOB bytes, the zeros after them as a run), so
/// the slot holds all of it and the read needs no second allocation; a slot of 8 KiB and the
/// tail apart took one more miss a page.
pub(crate) const LONE_HEAD_BYTES: usize = LONE_MIN_BYTES + 64;

/// Where a page's encoding lies in its block's stream of bytes, or that it was discarded. An
/// encoding kept alone has [`LONE`] set in its length, and its start is its index in
/// [`BlockArena::lone`]. Kept in a block's page table as [`EXTENT_BYTES`] bytes.
#[derive(Debug, Clone, Copy)]
struct Extent {
    start: u32,
    length: u32,
    /// The slot that holds the whole encoding ([`Pools::chunks`]' chunk, or [`Pools::heads`]'
    /// head for an encoding kept alone), or [`NO_SLOT`] if it lies in two chunks, in a trimmed
    /// one, or past its head: where [`BlockArena::parts`] finds the bytes without the tables.
    slot: u32,
}

/// Bytes of an [`Extent`] in a page table: its three fields, little-endian, in order.
const EXTENT_BYTES: usize = 12;

impl Extent {
    /// Entry `page` of page table `table`, if the table is that long.
    fn read(table: &[u8], page: usize) -> Option<Extent> {
        let bytes = table.get(page * EXTENT_BYTES..(page + 1) * EXTENT_BYTES)?;
        let field = |at: usize| {
            let mut word = [0u8; 4];
            word.copy_from_slice(&bytes[at..at + 4]);
            u32::from_le_bytes(word)
        };
        Some(Extent {
            start: field(0),
            length: field(4),
            slot: field(8),
        })
    }

    /// Writes the extent as entry `page` of page table `table`, which is that long.
    fn write(self, table: &mut [u8], page: usize) {
        let bytes = &mut table[page * EXTENT_BYTES..(page + 1) * EXTENT_BYTES];
        bytes[..4].copy_from_slice(&self.start.to_le_bytes());
        bytes[4..8].copy_from_slice(&self.length.to_le_bytes());
        bytes[8..].copy_from_slice(&self.slot.to_le_bytes());
    }
}

const DISCARDED: u32 = u32::MAX;
/// An extent's slot where none holds the whole encoding.
const NO_SLOT: u32 = u32::MAX;
/// The flag of an extent's length that says the encoding is kept alone.
const LONE: u32 = 1 << 31;

/// The memory every block's chunks, heads and page table come from: one media's slots.
pub(crate) struct Pools {
    /// Chunks, of [`chunk_bytes_for`] the media's slots.
    chunks: SlotPool,
    /// Heads of encodings kept alone, of [`LONE_HEAD_BYTES`].
    heads: SlotPool,
    /// Page tables, of an [`Extent`] for each page a block takes.
    tables: SlotPool,
}

impl Pools {
    /// Pools for chunks of `chunk_bytes` and blocks of up to `pages_per_block` pages, nothing
    /// mapped yet.
    pub(crate) fn new(chunk_bytes: usize, pages_per_block: usize) -> Pools {
        Pools {
            chunks: SlotPool::new(chunk_bytes),
            heads: SlotPool::new(LONE_HEAD_BYTES),
            tables: SlotPool::new(pages_per_block * EXTENT_BYTES),
        }
    }
}

/// A chunk of a block: a slot while the block takes pages, or its bytes alone once
/// [`BlockArena::trim`] cut it to what it holds.
enum Chunk {
    Slot(Slot),
    Trimmed(Vec<u8>),
}

/// An encoding kept alone: its first [`LONE_HEAD_BYTES`] in a slot, and the rest.
struct Lone {
    head: Slot,
    tail: Box<[u8]>,
}

/// The encodings of one block's programmed pages, in order. Its chunks, heads and page table are
/// slots of the media's [`Pools`], which every call that reads or changes them is given;
/// [`BlockArena::release`] returns them.
pub(crate) struct BlockArena {
    chunk_bytes: usize,
    /// The page table, an [`Extent`] a page: a slot of [`Pools::tables`] from the first page
    /// stored to the erase.
    table: Option<Slot>,
    /// Pages stored: the page table's entries in use.
    stored: usize,
    chunks: Vec<Option<Chunk>>,
    /// Pages not discarded that lie (partly) in each chunk.
    live: Vec<u32>,
    /// Bytes appended since the block's erase.
    end: usize,
    /// Chunks held now.
    held_chunks: usize,
    /// Encodings kept alone, in the order they were appended (`None` once discarded).
    lone: Vec<Option<Lone>>,
    /// Bytes of the encodings kept alone now.
    lone_bytes: usize,
    /// The chunk [`BlockArena::trim`] cut to what it holds, and the bytes it cut, while that
    /// chunk is held.
    trimmed: Option<(usize, usize)>,
}

impl BlockArena {
    /// An empty block whose chunks are `chunk_bytes` long ([`chunk_bytes_for`]), the size of the
    /// chunks of the pools it is given.
    pub(crate) fn new(chunk_bytes: usize) -> BlockArena {
        BlockArena {
            chunk_bytes,
            table: None,
            stored: 0,
            chunks: Vec::new(),
            live: Vec::new(),
            end: 0,
            held_chunks: 0,
            lone: Vec::new(),
            lone_bytes: 0,
            trimmed: None,
        }
    }

    /// Pages stored.
    pub(crate) fn len(&self) -> usize {
        self.stored
    }

    /// Page `page`'s entry in the page table, if it was stored.
    fn extent(&self, pools: &Pools, page: usize) -> Option<Extent> {
        if page >= self.stored {
            return None;
        }
        Extent::read(pools.tables.bytes(self.table?), page)
    }

    /// Sets page `page`'s entry in the page table, which holds it.
    fn set_extent(&self, pools: &mut Pools, page: usize, extent: Extent) {
        if let Some(table) = self.table {
            extent.write(pools.tables.bytes_mut(table), page);
        }
    }

    /// Appends the next page's entry to the page table, taking one if the block has none.
    fn push_extent(&mut self, pools: &mut Pools, extent: Extent) {
        let table = *self.table.get_or_insert_with(|| pools.tables.take());
        extent.write(pools.tables.bytes_mut(table), self.stored);
        self.stored += 1;
    }

    /// Bytes of memory held: the chunks and the tables.
    pub(crate) fn held_bytes(&self, pools: &Pools) -> u64 {
        let cut = self.trimmed.map_or(0, |(_, cut)| cut);
        let chunks = self.held_chunks * self.chunk_bytes - cut;
        let tables = self.table.map_or(0, |_| pools.tables.slot_bytes())
            + self.chunks.capacity() * std::mem::size_of::<Option<Chunk>>()
            + self.live.capacity() * std::mem::size_of::<u32>()
            + self.lone.capacity() * std::mem::size_of::<Option<Lone>>();
        (chunks + self.lone_bytes + tables) as u64
    }

    /// Appends the next page's encoding.
    pub(crate) fn push(&mut self, pools: &mut Pools, encoding: &[u8]) {
        debug_assert!(
            encoding.len() <= self.chunk_bytes,
            "an encoding longer than a chunk"
        );
        debug_assert_eq!(
            pools.chunks.slot_bytes(),
            self.chunk_bytes,
            "the media's pools"
        );
        if encoding.len() >= LONE_MIN_BYTES {
            let (head, tail) = encoding.split_at(encoding.len().min(LONE_HEAD_BYTES));
            let slot = pools.heads.take();
            pools.heads.bytes_mut(slot)[..head.len()].copy_from_slice(head);
            let extent = Extent {
                start: self.lone.len() as u32,
                length: encoding.len() as u32 | LONE,
                slot: if tail.is_empty() {
                    slot.number()
                } else {
                    NO_SLOT
                },
            };
            self.push_extent(pools, extent);
            self.lone.push(Some(Lone {
                head: slot,
                tail: tail.into(),
            }));
            self.lone_bytes += LONE_HEAD_BYTES + tail.len();
            return;
        }
        let start = self.end;
        // The slot that holds the whole encoding, if one does (the last chunk it lies in, once
        // it is known to be the first too).
        let mut whole = NO_SLOT;
        let mut rest = encoding;
        while !rest.is_empty() {
            let index = self.end / self.chunk_bytes;
            let offset = self.end % self.chunk_bytes;
            if index == self.chunks.len() {
                self.chunks.push(None);
                self.live.push(0);
            }
            // A chunk freed while its tail was still to be written starts again at the same
            // offset (what lay before is discarded, and its bytes are not read).
            let chunk = self.chunks[index].get_or_insert_with(|| {
                self.held_chunks += 1;
                Chunk::Slot(pools.chunks.take())
            });
            let take = rest.len().min(self.chunk_bytes - offset);
            match chunk {
                Chunk::Slot(slot) => {
                    pools.chunks.bytes_mut(*slot)[offset..offset + take]
                        .copy_from_slice(&rest[..take]);
                    whole = if take == encoding.len() {
                        slot.number()
                    } else {
                        NO_SLOT
                    };
                }
                Chunk::Trimmed(bytes) => {
                    // Appending after a trim (the block was not full after all): room again.
                    bytes.reserve_exact(self.chunk_bytes - bytes.len());
                    self.trimmed = None;
                    bytes.extend_from_slice(&rest[..take]);
                }
            }
            self.live[index] += 1;
            rest = &rest[take..];
            self.end += take;
        }
        let extent = Extent {
            start: start as u32,
            length: encoding.len() as u32,
            slot: whole,
        };
        self.push_extent(pools, extent);
    }

    /// The bytes of chunk `index`, if it is held.
    fn chunk<'a>(&'a self, pools: &'a Pools, index: usize) -> Option<&'a [u8]> {
        match self.chunks.get(index)?.as_ref()? {
            Chunk::Slot(slot) => Some(pools.chunks.bytes(*slot)),
            Chunk::Trimmed(bytes) => Some(bytes),
        }
    }

    /// The encoding of page `page`, in the (at most two) chunks it lies in: `None` if it was
    /// discarded (or never stored).
    pub(crate) fn parts<'a>(&'a self, pools: &'a Pools, page: usize) -> Option<[&'a [u8]; 2]> {
        let extent = self.extent(pools, page)?;
        if extent.start == DISCARDED {
            return None;
        }
        let length = (extent.length & !LONE) as usize;
        if extent.slot != NO_SLOT {
            let slot = Slot::from_number(extent.slot);
            let bytes = if extent.length & LONE != 0 {
                pools.heads.bytes(slot).get(..length)?
            } else {
                let offset = extent.start as usize % self.chunk_bytes;
                pools.chunks.bytes(slot).get(offset..offset + length)?
            };
            return Some([bytes, &[]]);
        }
        if extent.length & LONE != 0 {
            let lone = self.lone.get(extent.start as usize)?.as_ref()?;
            return Some([pools.heads.bytes(lone.head), &lone.tail]);
        }
        let (start, end) = (
            extent.start as usize,
            (extent.start + extent.length) as usize,
        );
        let (first, last) = (start / self.chunk_bytes, (end - 1) / self.chunk_bytes);
        if first == last {
            let bytes = self
                .chunk(pools, first)?
                .get(start % self.chunk_bytes..(end - 1) % self.chunk_bytes + 1)?;
            return Some([bytes, &[]]);
        }
        // An encoding is no longer than a chunk, so it lies in two at most.
        let head = self.chunk(pools, first)?.get(start % self.chunk_bytes..)?;
        let tail = self
            .chunk(pools, last)?
            .get(..(end - 1) % self.chunk_bytes + 1)?;
        (last == first + 1).then_some([head, tail])
    }

    /// Moves the chunk the last encoding ends in out of its slot into an allocation of what it
    /// holds, returning the slot to the pool: for a block whose pages are all programmed. A data
    /// block's 256 encodings of about 525 bytes fill nine 14 KiB chunks and a third of a tenth.
    pub(crate) fn trim(&mut self, pools: &mut Pools) {
        let index = self.end.saturating_sub(1) / self.chunk_bytes;
        let holds = self.end - index * self.chunk_bytes;
        if let Some(Some(chunk)) = self.chunks.get_mut(index) {
            if let Chunk::Slot(slot) = *chunk {
                if holds < self.chunk_bytes {
                    *chunk = Chunk::Trimmed(pools.chunks.bytes(slot)[..holds].to_vec());
                    pools.chunks.give(slot);
                    self.trimmed = Some((index, self.chunk_bytes - holds));
                    // The pages that lay in the slot, the last ones in chunks, are read from the
                    // chunk table now.
                    for page in (0..self.stored).rev() {
                        let Some(mut extent) = self.extent(pools, page) else {
                            break;
                        };
                        if extent.length & LONE != 0 {
                            continue;
                        }
                        if extent.start != DISCARDED
                            && (extent.start as usize) < index * self.chunk_bytes
                        {
                            break;
                        }
                        extent.slot = NO_SLOT;
                        self.set_extent(pools, page, extent);
                    }
                }
            }
        }
    }

    /// Where page `page`'s encoding starts in the block's stream (0 if it is not stored): a read
    /// of the page's entry in the page table, for [`BlockArena::chunk_address`] to follow.
    pub(crate) fn start_of(&self, pools: &Pools, page: usize) -> usize {
        self.extent(pools, page)
            .map_or(0, |extent| extent.start as usize)
    }

    /// Where the chunk (or the head kept alone) holding the start of page `page`'s encoding lies
    /// in memory (0 if it is not held): a read of the chunk table's entry, after
    /// [`BlockArena::start_of`] read the page's, for [`BlockArena::parts`] to follow.
    pub(crate) fn chunk_address(&self, pools: &Pools, page: usize) -> usize {
        let Some(extent) = self.extent(pools, page) else {
            return 0;
        };
        if extent.start == DISCARDED {
            return 0;
        }
        if extent.slot != NO_SLOT {
            let slot = Slot::from_number(extent.slot);
            let pool = if extent.length & LONE != 0 {
                &pools.heads
            } else {
                &pools.chunks
            };
            return pool.bytes(slot).as_ptr() as usize;
        }
        if extent.length & LONE != 0 {
            return self
                .lone
                .get(extent.start as usize)
                .and_then(Option::as_ref)
                .map_or(0, |lone| pools.heads.bytes(lone.head).as_ptr() as usize);
        }
        self.chunk(pools, extent.start as usize / self.chunk_bytes)
            .map_or(0, |chunk| chunk.as_ptr() as usize)
    }

    /// Forgets page `page`'s encoding, returning every chunk no stored page lies in any more.
    /// Returns whether the page was stored and not yet discarded.
    pub(crate) fn discard(&mut self, pools: &mut Pools, page: usize) -> bool {
        let Some(extent) = self.extent(pools, page) else {
            return false;
        };
        if extent.start == DISCARDED {
            return false;
        }
        self.set_extent(
            pools,
            page,
            Extent {
                start: DISCARDED,
                ..extent
            },
        );
        if extent.length & LONE != 0 {
            if let Some(lone) = self
                .lone
                .get_mut(extent.start as usize)
                .and_then(Option::take)
            {
                self.lone_bytes -= LONE_HEAD_BYTES + lone.tail.len();
                pools.heads.give(lone.head);
            }
            return true;
        }
        let (start, end) = (
            extent.start as usize,
            (extent.start + extent.length) as usize,
        );
        for index in start / self.chunk_bytes..=(end - 1) / self.chunk_bytes {
            self.live[index] -= 1;
            if self.live[index] == 0 {
                if let Some(chunk) = self.chunks[index].take() {
                    self.held_chunks -= 1;
                    if let Chunk::Slot(slot) = chunk {
                        pools.chunks.give(slot);
                    }
                    if self.trimmed.is_some_and(|(trimmed, _)| trimmed == index) {
                        self.trimmed = None;
                    }
                }
            }
        }
        true
    }

    /// Returns every chunk and head to the pools and forgets the block's pages (its erase).
    pub(crate) fn release(&mut self, pools: &mut Pools) {
        for chunk in self.chunks.drain(..).flatten() {
            if let Chunk::Slot(slot) = chunk {
                pools.chunks.give(slot);
            }
        }
        for lone in self.lone.drain(..).flatten() {
            pools.heads.give(lone.head);
        }
        if let Some(table) = self.table {
            pools.tables.give(table);
        }
        *self = BlockArena::new(self.chunk_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Pages a block takes in these tests: more than any test stores in one.
    const TEST_PAGES: usize = 128;

    /// A step of [`every_page_reads_back_as_stored_until_discarded`].
    #[derive(Debug, Clone)]
    enum Step {
        Push(usize),
        Discard(usize),
        Trim,
        Release,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (16usize..2_000).prop_map(Step::Push),
            2 => (LONE_MIN_BYTES - 40..LONE_HEAD_BYTES + 40).prop_map(Step::Push),
            1 => (9_000usize..CHUNK_BYTES).prop_map(Step::Push),
            3 => any::<usize>().prop_map(Step::Discard),
            1 => Just(Step::Trim),
            1 => Just(Step::Release),
        ]
    }

    proptest! {
        /// Whatever the pushes, discards, trims and erases, every page reads back the bytes
        /// pushed until it is discarded, whichever way `parts` reaches them (a slot named in
        /// the page's entry, or the chunk table and the encodings kept alone).
        #[test]
        fn every_page_reads_back_as_stored_until_discarded(
            steps in proptest::collection::vec(step(), 1..120),
        ) {
            let mut pools = Pools::new(CHUNK_BYTES, TEST_PAGES);
            let mut arena = BlockArena::new(CHUNK_BYTES);
            let mut model: Vec<Option<Vec<u8>>> = Vec::new();
            for (number, step) in steps.into_iter().enumerate() {
                match step {
                    Step::Push(length) => {
                        let bytes = encoding(number as u8, length);
                        arena.push(&mut pools, &bytes);
                        model.push(Some(bytes));
                    }
                    Step::Discard(pick) if !model.is_empty() => {
                        let page = pick % model.len();
                        prop_assert_eq!(arena.discard(&mut pools, page), model[page].is_some());
                        model[page] = None;
                    }
                    Step::Discard(_) => {}
                    Step::Trim => arena.trim(&mut pools),
                    Step::Release => {
                        arena.release(&mut pools);
                        model.clear();
                    }
                }
                prop_assert_eq!(arena.len(), model.len());
                for (page, stored) in model.iter().enumerate() {
                    let got = arena.parts(&pools, page).map(|[a, b]| [a, b].concat());
                    prop_assert_eq!(&got, stored, "page {}", page);
                    let address = arena.chunk_address(&pools, page);
                    prop_assert_eq!(address != 0, stored.is_some(), "page {}", page);
                }
            }
        }
    }

    fn encoding(seed: u8, length: usize) -> Vec<u8> {
        (0..length).map(|at| seed ^ (at as u8)).collect()
    }

    #[test]
    fn pages_straddling_chunks_read_back_and_discards_free_whole_chunks() {
        let mut pools = Pools::new(CHUNK_BYTES, TEST_PAGES);
        let mut arena = BlockArena::new(CHUNK_BYTES);
        let lengths = [500, 7000, 7000, 16, 8000, 700];
        for (seed, &length) in lengths.iter().enumerate() {
            arena.push(&mut pools, &encoding(seed as u8, length));
        }
        for (seed, &length) in lengths.iter().enumerate() {
            let got = arena.parts(&pools, seed).map(|[a, b]| [a, b].concat());
            assert_eq!(got, Some(encoding(seed as u8, length)), "page {seed}");
        }
        let total: usize = lengths.iter().sum();
        let chunks = total.div_ceil(CHUNK_BYTES);
        assert!(arena.held_bytes(&pools) >= (chunks * CHUNK_BYTES) as u64);
        let held = arena.held_bytes(&pools);
        // Pages 0-2 fill the first chunk and start the second: discarding 0 and 1 frees nothing
        // (page 2 still lies in the first chunk), discarding 2 frees the first.
        assert!(arena.discard(&mut pools, 0));
        assert!(arena.discard(&mut pools, 1));
        assert_eq!(arena.held_bytes(&pools), held);
        assert!(arena.discard(&mut pools, 2));
        assert_eq!(arena.held_bytes(&pools), held - CHUNK_BYTES as u64);
        assert!(!arena.discard(&mut pools, 2), "once");
        assert_eq!(arena.parts(&pools, 1), None);
        assert_eq!(
            arena.parts(&pools, 4).map(|[a, b]| [a, b].concat()),
            Some(encoding(4, 8000))
        );
        // Every page discarded: no chunk is left, and appending starts a chunk again.
        for page in 3..lengths.len() {
            assert!(arena.discard(&mut pools, page));
        }
        assert!(arena.chunks.iter().all(Option::is_none));
        arena.push(&mut pools, &encoding(9, 300));
        assert_eq!(
            arena
                .parts(&pools, lengths.len())
                .map(|[a, b]| [a, b].concat()),
            Some(encoding(9, 300))
        );
    }

    /// A trimmed block holds only what its last chunk holds, reads back the same, frees the
    /// chunk as before, and takes pages again if one is appended after all.
    #[test]
    fn trimming_cuts_the_last_chunk_to_what_it_holds() {
        let mut pools = Pools::new(CHUNK_BYTES, TEST_PAGES);
        let mut arena = BlockArena::new(CHUNK_BYTES);
        let lengths = [7000, 7000, 500];
        for (seed, &length) in lengths.iter().enumerate() {
            arena.push(&mut pools, &encoding(seed as u8, length));
        }
        let held = arena.held_bytes(&pools);
        arena.trim(&mut pools);
        // The second chunk holds 14,500 - 14,336 bytes of the 14,336 it was given.
        let tail = 14_500 - CHUNK_BYTES;
        assert_eq!(arena.held_bytes(&pools), held - (CHUNK_BYTES - tail) as u64);
        for (seed, &length) in lengths.iter().enumerate() {
            let got = arena.parts(&pools, seed).map(|[a, b]| [a, b].concat());
            assert_eq!(got, Some(encoding(seed as u8, length)), "page {seed}");
        }
        arena.push(&mut pools, &encoding(7, 3000));
        assert_eq!(arena.held_bytes(&pools), held, "room again");
        assert_eq!(
            arena.parts(&pools, 3).map(|[a, b]| [a, b].concat()),
            Some(encoding(7, 3000))
        );
        arena.trim(&mut pools);
        let trimmed = arena.held_bytes(&pools);
        for page in 0..4 {
            assert!(arena.discard(&mut pools, page));
        }
        assert!(arena.held_bytes(&pools) < trimmed);
        assert!(arena.chunks.iter().all(Option::is_none));
        assert_eq!(arena.held_chunks, 0);
        assert_eq!(arena.trimmed, None);
    }

    /// Encodings of 8 KiB or more are kept alone: they read back, from their slot alone where it
    /// holds all of them, and discarding one frees exactly its memory whatever its neighbours in
    /// the block do.
    #[test]
    fn encodings_of_8_kib_or_more_are_kept_alone_and_freed_alone() {
        let mut pools = Pools::new(CHUNK_BYTES, TEST_PAGES);
        let mut arena = BlockArena::new(CHUNK_BYTES);
        let lengths = [
            500,
            8226,
            LONE_MIN_BYTES,
            16,
            LONE_MIN_BYTES - 1,
            9000,
            700,
            LONE_HEAD_BYTES,
        ];
        for (seed, &length) in lengths.iter().enumerate() {
            arena.push(&mut pools, &encoding(seed as u8, length));
        }
        for (seed, &length) in lengths.iter().enumerate() {
            let got = arena.parts(&pools, seed).map(|[a, b]| [a, b].concat());
            assert_eq!(got, Some(encoding(seed as u8, length)), "page {seed}");
            let lone = length >= LONE_MIN_BYTES;
            let extent = arena.extent(&pools, seed);
            assert_eq!(
                extent.is_some_and(|extent| extent.length & LONE != 0),
                lone,
                "page {seed}"
            );
            assert_ne!(arena.chunk_address(&pools, seed), 0, "page {seed}");
            // Only page 5's encoding goes on past its slot (the others lie in one chunk).
            let whole = seed != 5;
            let named = extent.is_some_and(|extent| extent.slot != NO_SLOT);
            assert_eq!(named, whole, "page {seed}");
        }
        // Pages 0, 3, 4 and 6 share chunks; 1, 2, 5 and 7 are alone, 5 with a tail.
        let tail = 9000 - LONE_HEAD_BYTES;
        assert_eq!(arena.lone_bytes, 4 * LONE_HEAD_BYTES + tail);
        let held = arena.held_bytes(&pools);
        assert!(arena.discard(&mut pools, 1));
        assert_eq!(arena.held_bytes(&pools), held - LONE_HEAD_BYTES as u64);
        assert_eq!(arena.parts(&pools, 1), None);
        assert_eq!(arena.chunk_address(&pools, 1), 0);
        assert!(!arena.discard(&mut pools, 1), "once");
        assert!(arena.discard(&mut pools, 5));
        assert_eq!(
            arena.held_bytes(&pools),
            held - 9000 - LONE_HEAD_BYTES as u64
        );
        assert_eq!(
            arena.parts(&pools, 2).map(|[a, b]| [a, b].concat()),
            Some(encoding(2, LONE_MIN_BYTES))
        );
        for page in [0, 2, 3, 4, 6, 7] {
            assert!(arena.discard(&mut pools, page));
        }
        assert_eq!(arena.lone_bytes, 0);
        assert!(arena.chunks.iter().all(Option::is_none));
    }

    /// Blocks take their chunks, heads and page tables from the media's pools and give them back
    /// on discard and erase (a page table on erase only), so blocks written after others were
    /// erased reuse the same memory.
    #[test]
    fn erased_blocks_give_their_slots_back_for_the_next() {
        let mut pools = Pools::new(CHUNK_BYTES, TEST_PAGES);
        let mut blocks: Vec<BlockArena> = (0..4).map(|_| BlockArena::new(CHUNK_BYTES)).collect();
        let fill = |pools: &mut Pools, block: &mut BlockArena, seed: u8| {
            for page in 0..40 {
                let length = if page % 5 == 0 { 8300 } else { 520 };
                block.push(pools, &encoding(seed ^ page as u8, length));
            }
            block.trim(pools);
        };
        for (seed, block) in blocks.iter_mut().enumerate() {
            fill(&mut pools, block, seed as u8);
        }
        let carved = (
            pools.chunks.carved(),
            pools.heads.carved(),
            pools.tables.carved(),
        );
        // Each block's second chunk is trimmed, its slot then taken by the next block's.
        assert_eq!(carved, (4 + 1, 4 * 8, 4), "chunks, heads and tables carved");
        for round in 0..50u8 {
            let block = &mut blocks[usize::from(round) % 4];
            block.release(&mut pools);
            assert_eq!(block.len(), 0);
            assert_eq!(block.parts(&pools, 0), None);
            fill(&mut pools, block, round.wrapping_mul(7));
            let page = usize::from(round) % 40;
            let length = if page % 5 == 0 { 8300 } else { 520 };
            assert_eq!(
                block.parts(&pools, page).map(|[a, b]| [a, b].concat()),
                Some(encoding(round.wrapping_mul(7) ^ page as u8, length)),
                "round {round}"
            );
        }
        assert_eq!(
            (
                pools.chunks.carved(),
                pools.heads.carved(),
                pools.tables.carved()
            ),
            carved,
            "no more slots than the first four blocks'"
        );
    }
}
