//! One block's page encodings for compact media, packed end to end in chunks of [`CHUNK_BYTES`]
//! rather than one allocation a page.
//!
//! A page of records encodes to about 500 bytes and a meta page to a little over 8 KiB; one
//! allocation each was rounded up by the allocator's size classes (a 520-byte encoding took 640
//! bytes, an 8.2 KiB one 10 KiB), a fifth of all memory at PinK's scale. A chunk is 14 KiB, the
//! largest of jemalloc's small size classes: small allocations come from slabs, exactly, where
//! 16 KiB and more are large allocations that jemalloc pads with a page (a `pink` run on compact
//! media peaked at 482 MB resident with 16 KiB chunks, 421 MB with 14 KiB ones).
//!
//! A page may straddle two chunks. Each chunk counts the pages not yet discarded that lie in it,
//! and is freed when that count reaches zero, so discarding pages (a merge reading its lower
//! level) frees memory as it goes rather than at the block's erase.

/// Bytes of one chunk of compact media.
pub const CHUNK_BYTES: usize = 14 << 10;

/// Where a page's encoding lies in its block's stream of bytes, or that it was discarded.
#[derive(Debug, Clone, Copy)]
struct Extent {
    start: u32,
    length: u32,
}

const DISCARDED: u32 = u32::MAX;

/// The encodings of one block's programmed pages, in order.
#[derive(Default)]
pub(crate) struct BlockArena {
    pages: Vec<Extent>,
    chunks: Vec<Option<Vec<u8>>>,
    /// Pages not discarded that lie (partly) in each chunk.
    live: Vec<u32>,
    /// Bytes appended since the block's erase.
    end: usize,
    /// Chunks allocated now.
    held_chunks: usize,
}

impl BlockArena {
    /// Pages stored.
    pub(crate) fn len(&self) -> usize {
        self.pages.len()
    }

    /// Bytes of memory held: the chunks and the tables.
    pub(crate) fn held_bytes(&self) -> u64 {
        let chunks = self.held_chunks * CHUNK_BYTES;
        let tables = self.pages.capacity() * std::mem::size_of::<Extent>()
            + self.chunks.capacity() * std::mem::size_of::<Option<Vec<u8>>>()
            + self.live.capacity() * std::mem::size_of::<u32>();
        (chunks + tables) as u64
    }

    /// Appends the next page's encoding.
    pub(crate) fn push(&mut self, encoding: &[u8]) {
        let start = self.end;
        let mut rest = encoding;
        while !rest.is_empty() {
            let index = self.end / CHUNK_BYTES;
            let offset = self.end % CHUNK_BYTES;
            if index == self.chunks.len() {
                self.chunks.push(None);
                self.live.push(0);
            }
            let held_chunks = &mut self.held_chunks;
            let chunk = self.chunks[index].get_or_insert_with(|| {
                *held_chunks += 1;
                // A chunk freed while its tail was still to be written starts again at the
                // same offset (what lay before is discarded).
                let mut fresh = Vec::with_capacity(CHUNK_BYTES);
                fresh.resize(offset, 0);
                fresh
            });
            let take = rest.len().min(CHUNK_BYTES - offset);
            chunk.extend_from_slice(&rest[..take]);
            self.live[index] += 1;
            rest = &rest[take..];
            self.end += take;
        }
        self.pages.push(Extent {
            start: start as u32,
            length: encoding.len() as u32,
        });
    }

    /// The encoding of page `page`: `None` if it was discarded (or never stored). A page that
    /// straddles two chunks is copied into `scratch`.
    pub(crate) fn get<'a>(&'a self, page: usize, scratch: &'a mut Vec<u8>) -> Option<&'a [u8]> {
        let extent = *self.pages.get(page)?;
        if extent.start == DISCARDED {
            return None;
        }
        let (start, end) = (
            extent.start as usize,
            (extent.start + extent.length) as usize,
        );
        let (first, last) = (start / CHUNK_BYTES, (end - 1) / CHUNK_BYTES);
        if first == last {
            let chunk = self.chunks[first].as_ref()?;
            return chunk.get(start % CHUNK_BYTES..(end - 1) % CHUNK_BYTES + 1);
        }
        scratch.clear();
        for index in first..=last {
            let chunk = self.chunks[index].as_ref()?;
            let from = if index == first {
                start % CHUNK_BYTES
            } else {
                0
            };
            let to = if index == last {
                (end - 1) % CHUNK_BYTES + 1
            } else {
                CHUNK_BYTES
            };
            scratch.extend_from_slice(chunk.get(from..to)?);
        }
        Some(scratch.as_slice())
    }

    /// Forgets page `page`'s encoding, freeing every chunk no stored page lies in any more.
    /// Returns whether the page was stored and not yet discarded.
    pub(crate) fn discard(&mut self, page: usize) -> bool {
        let Some(extent) = self.pages.get_mut(page) else {
            return false;
        };
        if extent.start == DISCARDED {
            return false;
        }
        let (start, end) = (
            extent.start as usize,
            (extent.start + extent.length) as usize,
        );
        extent.start = DISCARDED;
        for index in start / CHUNK_BYTES..=(end - 1) / CHUNK_BYTES {
            self.live[index] -= 1;
            if self.live[index] == 0 && self.chunks[index].take().is_some() {
                self.held_chunks -= 1;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoding(seed: u8, length: usize) -> Vec<u8> {
        (0..length).map(|at| seed ^ (at as u8)).collect()
    }

    #[test]
    fn pages_straddling_chunks_read_back_and_discards_free_whole_chunks() {
        let mut arena = BlockArena::default();
        let lengths = [500, 8300, 8300, 16, 9000, 700];
        for (seed, &length) in lengths.iter().enumerate() {
            arena.push(&encoding(seed as u8, length));
        }
        let mut scratch = Vec::new();
        for (seed, &length) in lengths.iter().enumerate() {
            let got = arena.get(seed, &mut scratch).map(<[u8]>::to_vec);
            assert_eq!(got, Some(encoding(seed as u8, length)), "page {seed}");
        }
        let total: usize = lengths.iter().sum();
        let chunks = total.div_ceil(CHUNK_BYTES);
        assert!(arena.held_bytes() >= (chunks * CHUNK_BYTES) as u64);
        let held = arena.held_bytes();
        // Pages 0-2 fill the first chunk and start the second: discarding 0 and 1 frees nothing
        // (page 2 still lies in the first chunk), discarding 2 frees the first.
        assert!(arena.discard(0));
        assert!(arena.discard(1));
        assert_eq!(arena.held_bytes(), held);
        assert!(arena.discard(2));
        assert_eq!(arena.held_bytes(), held - CHUNK_BYTES as u64);
        assert!(!arena.discard(2), "once");
        assert_eq!(arena.get(1, &mut scratch), None);
        assert_eq!(
            arena.get(4, &mut scratch).map(<[u8]>::to_vec),
            Some(encoding(4, 9000))
        );
        // Every page discarded: no chunk is left, and appending starts a chunk again.
        for page in 3..lengths.len() {
            assert!(arena.discard(page));
        }
        assert!(arena.chunks.iter().all(Option::is_none));
        arena.push(&encoding(9, 300));
        let mut scratch = Vec::new();
        assert_eq!(
            arena.get(lengths.len(), &mut scratch).map(<[u8]>::to_vec),
            Some(encoding(9, 300))
        );
    }
}
