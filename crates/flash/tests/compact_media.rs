//! Compact media: the same operations give the same bytes, errors, times and counters as ram media,
//! whatever the pages hold and whether they were programmed as dense pages or not; erasing a block
//! frees what its pages took; a discarded page's read takes its time and fails with a typed error
//! instead of returning bytes.

use std::collections::{BTreeMap, BTreeSet};

use kvssd_flash::{
    BlockAddress, Flash, FlashError, MediaKind, PageAddress, Profile, Purpose, PATTERN_BYTES,
};
use proptest::prelude::*;

fn pair() -> (Flash, Flash) {
    let profile = Profile::test_min();
    let ram = Flash::new_on(
        &MediaKind::Ram,
        profile.geometry,
        Some(profile.timing.clone()),
    )
    .expect("ram");
    let compact = Flash::new_on(&MediaKind::Compact, profile.geometry, Some(profile.timing))
        .expect("compact");
    assert_eq!(compact.media_kind(), MediaKind::Compact);
    (ram, compact)
}

/// A page of `kind`: 0 arbitrary bytes, 1 one byte repeated, 2 a 16-byte pattern repeated from an
/// arbitrary phase, 3 a mixture of arbitrary bytes and patterns.
fn page_of(kind: u8, seed: u64, bytes: usize) -> Vec<u8> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let pattern: Vec<u8> = (0..PATTERN_BYTES).map(|_| next() as u8).collect();
    let phase = (next() % 16) as usize;
    (0..bytes)
        .map(|index| match kind % 4 {
            0 => next() as u8,
            1 => pattern[0],
            2 => pattern[(index + phase) % PATTERN_BYTES],
            _ if (index / 300) % 2 == 0 => pattern[index % PATTERN_BYTES],
            _ => next() as u8,
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Step {
    Program {
        block: u32,
        kind: u8,
        seed: u64,
    },
    Read {
        block: u32,
        page: u32,
    },
    ReadParts {
        block: u32,
        page: u32,
        offset: usize,
        length: usize,
    },
    Erase {
        block: u32,
    },
    Discard {
        block: u32,
        page: u32,
    },
    /// Pages of the compact media only, some never programmed, discarded or outside the card:
    /// a host-memory hint, so everything after must still match the ram media.
    Prefetch {
        pages: Vec<(u32, u32)>,
    },
    /// Spans of pages of the compact media only, as [`Step::Prefetch`], some past the page.
    PrefetchSpans {
        spans: Vec<(u32, u32, usize, usize)>,
    },
    /// A look at a page's bytes as they are, for hints: the programmed bytes on compact media,
    /// nothing on ram media, and nothing counted or timed on either.
    Peek {
        block: u32,
        page: u32,
        offset: usize,
        length: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u32..6, any::<u8>(), any::<u64>())
            .prop_map(|(block, kind, seed)| Step::Program { block, kind, seed }),
        3 => (0u32..6, 0u32..8).prop_map(|(block, page)| Step::Read { block, page }),
        3 => (0u32..6, 0u32..8, 0usize..600, 0usize..300).prop_map(|(block, page, offset, length)| {
            Step::ReadParts { block, page, offset, length }
        }),
        1 => (0u32..6).prop_map(|block| Step::Erase { block }),
        2 => (0u32..6, 0u32..8).prop_map(|(block, page)| Step::Discard { block, page }),
        1 => proptest::collection::vec((0u32..64, 0u32..12), 0..6)
            .prop_map(|pages| Step::Prefetch { pages }),
        1 => proptest::collection::vec((0u32..64, 0u32..12, 0usize..600, 0usize..300), 0..6)
            .prop_map(|spans| Step::PrefetchSpans { spans }),
        2 => (0u32..6, 0u32..10, 0usize..600, 0usize..300).prop_map(|(block, page, offset, length)| {
            Step::Peek { block, page, offset, length }
        }),
    ]
}

fn address(block: u32) -> BlockAddress {
    BlockAddress {
        die: block % 2,
        block: block / 2,
    }
}

/// Whether a compact read failed as a read of a discarded page must: the page named, and the time
/// the same read took on ram media.
fn read_as_discarded<T>(
    read: &Result<T, FlashError>,
    page: PageAddress,
    ram_done_at: kvssd_flash::SimTime,
) -> bool {
    matches!(
        read,
        Err(FlashError::Discarded { page: p, done_at }) if *p == page && *done_at == ram_done_at
    )
}

proptest! {
    #[test]
    fn compact_media_behave_as_ram_media(steps in proptest::collection::vec(step(), 1..60)) {
        let (mut ram, mut compact) = pair();
        let geometry = *ram.geometry();
        let mut at = 0;
        let mut discarded: BTreeSet<(u32, u32)> = BTreeSet::new();
        // The payload of every page programmed since its block's erase.
        let mut programmed: BTreeMap<(u32, u32), Vec<u8>> = BTreeMap::new();
        for step in steps {
            match step {
                Step::Program { block, kind, seed } => {
                    let block_number = block;
                    let block = address(block);
                    let page = block.page(ram.programmed_pages(block).expect("in range"));
                    let data = page_of(kind, seed, geometry.page_bytes as usize);
                    let oob = seed.to_le_bytes();
                    let a = ram.program(at, page, Purpose::UserData, &data, &oob);
                    // A page programmed as dense is the same operation, and reads back the same.
                    let b = if kind & 0x80 != 0 {
                        compact.program_dense(at, page, Purpose::UserData, &data, &oob)
                    } else {
                        compact.program(at, page, Purpose::UserData, &data, &oob)
                    };
                    prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                    if a.is_ok() {
                        programmed.insert((block_number, page.page), data);
                    }
                    at = a.unwrap_or(at);
                }
                Step::Read { block, page } => {
                    let page: PageAddress = address(block).page(page);
                    let mut data_a = vec![0u8; geometry.page_bytes as usize];
                    let mut data_b = data_a.clone();
                    let (mut oob_a, mut oob_b) = ([0u8; 8], [0u8; 8]);
                    let a = ram.read(at, page, Purpose::UserData, &mut data_a, &mut oob_a);
                    let b = compact.read(at, page, Purpose::UserData, &mut data_b, &mut oob_b);
                    if discarded.contains(&(block, page.page)) {
                        let read = a.expect("ram media keep a discarded page");
                        prop_assert!(
                            read_as_discarded(&b, page, read.done_at),
                            "compact read of a discarded page: {:?}",
                            b
                        );
                        continue;
                    }
                    prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                    if a.is_ok() {
                        prop_assert!(data_a == data_b, "page bytes differ");
                        prop_assert_eq!(oob_a, oob_b);
                    }
                }
                Step::ReadParts { block, page, offset, length } => {
                    // Two ranges of one read, the second possibly past the page (an error).
                    let page: PageAddress = address(block).page(page);
                    let parts = |view: &kvssd_flash::PageView<'_>| {
                        let mut first = vec![0u8; length];
                        let mut second = vec![0u8; length / 2];
                        (
                            view.copy(offset, &mut first).map(|()| first),
                            view.copy(offset / 3, &mut second).map(|()| second),
                            view.in_place(offset).map(|bytes| bytes.map(<[u8]>::to_vec)),
                        )
                    };
                    let a = ram.read_parts(at, page, Purpose::UserData, parts);
                    let b = compact.read_parts(at, page, Purpose::UserData, parts);
                    if discarded.contains(&(block, page.page)) {
                        let read = a.expect("ram media keep a discarded page").1;
                        prop_assert!(
                            read_as_discarded(&b, page, read.done_at),
                            "compact read of a discarded page: {:?}",
                            b
                        );
                        continue;
                    }
                    let split = |read: Result<_, FlashError>| match read {
                        Ok(((first, second, in_place), read)) => {
                            (Ok(((first, second), read)), Some(in_place))
                        }
                        Err(error) => (Err(error), None),
                    };
                    let ((a, in_place_ram), (b, in_place_compact)) = (split(a), split(b));
                    prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                    // What lies in place differs by media (ram media copied the whole payload,
                    // compact media keep literals): the page's bytes from `offset` on, as far as
                    // they go, and on ram media all of them.
                    let page_bytes = geometry.page_bytes as usize;
                    let data = programmed.get(&(block, page.page));
                    let views = [("ram", in_place_ram), ("compact", in_place_compact)];
                    for (media, in_place) in views {
                        match in_place {
                            Some(Ok(Some(bytes))) => {
                                prop_assert!(!bytes.is_empty(), "{} media: none in place", media);
                                if media == "ram" {
                                    prop_assert_eq!(bytes.len(), page_bytes - offset);
                                }
                                if let Some(data) = data {
                                    prop_assert!(data[offset..].starts_with(&bytes), "{}", media);
                                }
                            }
                            Some(Ok(None)) => prop_assert_eq!(media, "compact"),
                            Some(Err(_)) => prop_assert!(offset >= page_bytes, "offset {}", offset),
                            None => {}
                        }
                    }
                }
                Step::Erase { block } => {
                    let a = ram.erase(at, address(block), Purpose::Gc);
                    let b = compact.erase(at, address(block), Purpose::Gc);
                    prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                    if a.is_ok() {
                        discarded.retain(|&(discarded_block, _)| discarded_block != block);
                        programmed.retain(|&(programmed_block, _), _| programmed_block != block);
                    }
                }
                Step::Discard { block, page } => {
                    let address = address(block).page(page);
                    let a = ram.discard(address);
                    let b = compact.discard(address);
                    match (a, b) {
                        (Ok(kept), Ok(freed)) => {
                            prop_assert!(!kept, "ram media keep every page");
                            prop_assert_eq!(freed, discarded.insert((block, page)));
                        }
                        (a, b) => prop_assert_eq!(format!("{a:?}"), format!("{b:?}")),
                    }
                }
                Step::Prefetch { pages } => {
                    let pages: Vec<PageAddress> = pages
                        .into_iter()
                        .map(|(block, page)| address(block).page(page))
                        .collect();
                    compact.prefetch(&pages);
                }
                Step::PrefetchSpans { spans } => {
                    let spans: Vec<(PageAddress, usize, usize)> = spans
                        .into_iter()
                        .map(|(block, page, offset, length)| {
                            (address(block).page(page), offset, length)
                        })
                        .collect();
                    compact.prefetch_spans(&spans);
                }
                Step::Peek { block, page, offset, length } => {
                    let address = address(block).page(page);
                    let mut out = vec![0u8; length];
                    prop_assert!(!ram.peek(address, offset, &mut out), "ram media answer no peek");
                    let expected = programmed
                        .get(&(block, page))
                        .filter(|_| !discarded.contains(&(block, page)))
                        .and_then(|data| data.get(offset..offset + length));
                    let peeked = compact.peek(address, offset, &mut out);
                    prop_assert_eq!(peeked, expected.is_some(), "peek of {:?}", address);
                    if let Some(expected) = expected {
                        prop_assert!(out == expected, "peeked bytes differ");
                    }
                }
            }
        }
        prop_assert_eq!(ram.counters(), compact.counters());
        prop_assert_eq!(ram.quiescent_at(), compact.quiescent_at());
    }
}

#[test]
fn discarding_and_erasing_free_pages_on_compact_media() {
    // PinK's page size, so that a block's arbitrary pages fill several of the media's chunks.
    let mut profile = Profile::test_min();
    profile.geometry.page_bytes = 8192;
    profile.geometry.oob_bytes = 256;
    let mut flash = Flash::new_on(&MediaKind::Compact, profile.geometry, Some(profile.timing))
        .expect("compact");
    let geometry = *flash.geometry();
    let pages = geometry.pages_per_block;
    let block = address(3);
    assert_eq!(flash.media_bytes(), 0);
    for page in 0..pages {
        let data = page_of(0, u64::from(page) + 1, geometry.page_bytes as usize);
        flash
            .program(0, block.page(page), Purpose::UserData, &data, b"")
            .expect("program");
    }
    let arbitrary = flash.media_bytes();
    assert!(
        arbitrary >= u64::from(pages * geometry.page_bytes),
        "{arbitrary}"
    );
    // Discarding every page but one frees the memory of all the others; the one left reads as
    // before, the others are refused.
    for page in (0..pages).filter(|&page| page != 1) {
        assert!(flash.discard(block.page(page)).expect("programmed"));
    }
    assert!(!flash.discard(block.page(2)).expect("programmed"), "once");
    assert!(
        flash.media_bytes() < arbitrary / 2,
        "{}",
        flash.media_bytes()
    );
    let mut back = vec![0u8; geometry.page_bytes as usize];
    flash
        .read(0, block.page(1), Purpose::UserData, &mut back, &mut [])
        .expect("a kept page reads");
    assert_eq!(back, page_of(0, 2, geometry.page_bytes as usize));
    assert!(matches!(
        flash.read(0, block.page(3), Purpose::UserData, &mut back, &mut []),
        Err(FlashError::Discarded { .. })
    ));
    flash.erase(0, block, Purpose::Gc).expect("erase");
    assert_eq!(flash.media_bytes(), 0, "erase frees the block's pages");
    for page in 0..pages {
        let data = page_of(2, u64::from(page) + 1, geometry.page_bytes as usize);
        flash
            .program(0, block.page(page), Purpose::UserData, &data, b"")
            .expect("program");
    }
    assert!(
        flash.media_bytes() < u64::from(geometry.page_bytes) * 3,
        "a block of periodic pages takes less than three pages: {}",
        flash.media_bytes()
    );
}
