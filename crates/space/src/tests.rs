//! Unit tests of the space layer on the `test_min` geometry: packing, large records, victim scans.

use super::*;
use kvssd_flash::{MediaKind, Profile, Purpose};

fn space() -> Space {
    space_with(2, 4)
}

/// A space on `test_min` with `logs` logs and a GC reserve of `reserve` blocks.
fn space_with(logs: u32, reserve: u32) -> Space {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let mut config = SpaceConfig::for_geometry(&profile.geometry);
    config.logs = logs;
    config.gc_reserve_blocks = reserve;
    Space::open(flash, config).expect("space")
}

#[test]
fn space_small_records_pack_and_read_back() {
    let mut space = space();
    let mut pointers = Vec::new();
    for i in 0..100u32 {
        let key = format!("key{i}");
        let value = vec![i as u8; (i % 40) as usize];
        let predicted = space.data_pages_needed(7, std::iter::once((key.len(), value.len())));
        let before = space.flash().counters().total().programs;
        let (pointer, _) = space
            .append_record(0, Purpose::UserData, 7, key.as_bytes(), &value)
            .expect("append");
        let programmed = space.flash().counters().total().programs - before;
        assert!(programmed <= predicted, "packing plan under-counts");
        pointers.push((pointer, key, value));
    }
    for (pointer, key, value) in &pointers {
        let (record, _) = space
            .read_record(0, *pointer, Purpose::UserData)
            .expect("read");
        assert_eq!(record.key, key.as_bytes());
        assert_eq!(&record.value, value);
        assert_eq!(record.namespace, 7);
    }
    assert!(space.stats().records_appended == 100);
}

#[test]
fn space_large_records_span_blocks() {
    let mut space = space();
    let value: Vec<u8> = (0..9000u32).map(|i| (i * 7) as u8).collect();
    let (pointer, _) = space
        .append_record(0, Purpose::UserData, 1, b"big", &value)
        .expect("append");
    // 9000 bytes over ~490-byte parts: more than one 8-page block.
    assert!(space.large_record_pages(3, value.len()) > 8);
    let (record, _) = space
        .read_record(0, pointer, Purpose::UserData)
        .expect("read");
    assert_eq!(record.value, value);
    let footprint = space.record_footprint(3, value.len());
    assert_eq!(space.valid_bytes(), footprint);
    space.invalidate_record(pointer, 3, value.len());
    assert_eq!(space.valid_bytes(), 0);
}

#[test]
fn space_victim_scan_finds_records_and_erase_frees() {
    let mut space = space();
    let mut pointers = Vec::new();
    // Fill several blocks of the data stream.
    for i in 0..200u32 {
        let key = format!("k{i:04}");
        let (pointer, _) = space
            .append_record(0, Purpose::UserData, 0, key.as_bytes(), &[1u8; 40])
            .expect("append");
        pointers.push((pointer, key));
    }
    for (pointer, key) in &pointers[..150] {
        space.invalidate_record(*pointer, key.len(), 40);
    }
    let free_before = space.free_blocks();
    let victim = space.pick_victim().expect("a victim");
    let (contents, _) = space.read_victim(0, victim).expect("scan");
    let Victim::Data(records) = contents else {
        panic!("expected a data victim");
    };
    assert!(!records.is_empty());
    for record in &records {
        let known = pointers
            .iter()
            .find(|(pointer, _)| *pointer == record.pointer);
        assert_eq!(known.map(|(_, key)| key.as_bytes()), Some(&record.key[..]));
    }
    space.erase_victim(0, victim).expect("erase");
    assert_eq!(space.free_blocks(), free_before + 1);
    // Pointers into the erased block are stale now.
    let stale = records[0].pointer;
    assert!(matches!(
        space.read_record(0, stale, Purpose::UserData),
        Err(SpaceError::StalePointer(_))
    ));
}

#[test]
fn space_meta_pages_and_pool_exhaustion() {
    let mut space = space();
    let page = vec![9u8; 512];
    let mut written = 0u64;
    loop {
        match space.write_meta(0, Purpose::Index, 0, &page) {
            Ok((index, _)) => {
                written += 1;
                if written == 1 {
                    let (back, _) = space.read_page(0, index, Purpose::Index).expect("read");
                    assert_eq!(back, page);
                }
            }
            Err(SpaceError::NoFreeBlock) => break,
            Err(error) => panic!("unexpected {error}"),
        }
    }
    assert_eq!(written, space.geometry().pages_total());
    assert_eq!(space.free_blocks(), 0);
}

/// Regression: a load that fills the device with pages that stay valid while a small set of meta
/// pages is rewritten over and over (as `hash` rewrites its bucket pages during a load) must
/// spread the programs over every die. GC broke score ties by block index, which is die-major, so
/// it erased die 0's blocks first; logs whose own die had no free block borrowed from the
/// lowest-numbered die with one; and the writes piled onto dies 0, 1, 2, ... while the others
/// idled (`hash`'s YCSB Load of 1M keys ran at 6.4K puts per simulated second instead of 29.8K).
#[test]
fn space_regression_overwrites_spread_programs_over_dies() {
    let profile = Profile::test_min();
    let geometry = Geometry {
        channels: 4,
        ways_per_channel: 4,
        blocks_per_die: 32,
        pages_per_block: 16,
        ..profile.geometry
    };
    let dies = geometry.dies() as usize;
    let flash = Flash::new(geometry, Some(profile.timing)).expect("flash");
    let mut config = SpaceConfig::for_geometry(&geometry);
    config.gc_reserve_blocks = 4;
    let mut space = Space::open(flash, config).expect("space");
    let page_bytes = geometry.page_bytes as usize;
    // Rewritten pages: a few blocks' worth. Permanent pages: written once, one in five writes (five
    // and the sixteen logs share no factor, so they spread over every die),
    // until they fill 60% of the device.
    let hot_pages = u64::from(geometry.pages_per_block) * 4;
    let permanent_max = geometry.pages_total() * 6 / 10;
    let mut location: Vec<Option<PageIndex>> = vec![None; hot_pages as usize];
    let mut owner: BTreeMap<u64, usize> = BTreeMap::new();
    let mut programs_per_die = vec![0u64; dies];
    let die_of = |page: PageIndex| {
        geometry
            .block_at(page.0 / u64::from(geometry.pages_per_block))
            .die as usize
    };
    let mut permanent = 0u64;
    let mut round = 0u64;
    while permanent < permanent_max {
        while space.free_blocks() <= u64::from(space.config().gc_reserve_blocks) {
            let victim = space.pick_victim().expect("a victim");
            let (contents, _) = space.read_victim(0, victim).expect("read victim");
            let Victim::Meta(pages) = contents else {
                panic!("only meta pages are written");
            };
            let live: Vec<usize> = pages
                .iter()
                .filter_map(|(page, _)| owner.get(&page.0).copied())
                .collect();
            for logical in live {
                let (page, _) = space
                    .write_meta(0, Purpose::Gc, 0, &vec![1u8; page_bytes])
                    .expect("relocate");
                programs_per_die[die_of(page)] += 1;
                if let Some(old) = location[logical].replace(page) {
                    owner.remove(&old.0);
                }
                owner.insert(page.0, logical);
            }
            space.erase_victim(0, victim).expect("erase");
        }
        let bytes = vec![round as u8; page_bytes];
        let (page, _) = space
            .write_meta(0, Purpose::Index, 0, &bytes)
            .expect("write");
        programs_per_die[die_of(page)] += 1;
        if round % 5 == 0 {
            // Permanent: valid for good, never a GC candidate once its block is full of them.
            permanent += 1;
        } else {
            let logical = (round % hot_pages) as usize;
            if let Some(old) = location[logical].replace(page) {
                owner.remove(&old.0);
                space.invalidate_meta(old);
            }
            owner.insert(page.0, logical);
        }
        round += 1;
    }
    let most = *programs_per_die.iter().max().expect("dies");
    let least = *programs_per_die.iter().min().expect("dies");
    // With the tie-breaks fixed the spread is about 9%; before, the low dies took 27% more.
    assert!(
        most * 100 <= least * 115,
        "programs per die should be within 15% of each other: {programs_per_die:?}"
    );
}

#[test]
fn space_confined_namespace_takes_blocks_only_from_its_logs_dies() {
    let mut space = space_with(4, 8);
    let geometry = *space.geometry();
    // Namespace 7 on logs 0 and 1 (dies 0 and 1), confined; namespace 8 on log 2, not confined.
    space.set_namespace_logs(7, &[0, 1]).expect("logs");
    space.set_namespace_confined(7, true);
    space.set_namespace_logs(8, &[2]).expect("logs");
    assert!(space.is_confined(7) && !space.is_confined(8));
    let per_die = u64::from(geometry.blocks_per_die);
    assert_eq!(space.free_blocks_for(7), 2 * per_die);
    assert_eq!(space.free_blocks_for(8), space.free_blocks());
    assert_eq!(
        space.user_capacity_for(7),
        space.user_capacity_bytes() / 4 * 2
    );
    assert_eq!(space.user_capacity_for(8), space.user_capacity_bytes());
    assert_eq!(space.gc_reserve_for(7), 4);
    assert_eq!(space.gc_reserve_for(8), 8);
    assert_eq!((space.logs_for(7), space.logs_for(8)), (2, 4));
    // Fill namespace 7 until its dies run out: it never borrows dies 2 and 3.
    let value = vec![7u8; 200];
    let mut appended = 0u64;
    loop {
        match space.append_record(0, Purpose::UserData, 7, b"key", &value) {
            Ok(_) => appended += 1,
            Err(SpaceError::NoFreeBlock) => break,
            Err(error) => panic!("unexpected {error}"),
        }
        assert!(
            appended < 10_000,
            "a confined namespace must run out of blocks"
        );
    }
    assert_eq!(space.free_blocks_for(7), 0);
    assert_eq!(space.namespace_blocks(7), 2 * per_die);
    for block in 0..geometry.blocks_total() {
        if space.block_owner(block) == Some(7) {
            assert!(geometry.block_at(block).die < 2, "block {block}");
        }
    }
    assert_eq!(space.valid_bytes_for(7), space.namespace_valid_bytes(7));
    // Namespace 8 still writes, and once log 2's die is used up it borrows another die's block
    // (dies 0 and 1 have none left, so die 3).
    for _ in 0..(per_die * 8 * 2 + 4) {
        space
            .append_record(0, Purpose::UserData, 8, b"key", &value)
            .expect("an unconfined namespace borrows");
    }
    let borrowed = (0..geometry.blocks_total())
        .filter(|&block| space.block_owner(block) == Some(8))
        .any(|block| geometry.block_at(block).die == 3);
    assert!(borrowed, "namespace 8 borrowed die 3's blocks");
    // Releasing the namespace forgets its confinement.
    space.release_namespace(0, 7).expect("release");
    assert!(!space.is_confined(7));
}

/// `blocks_needed_at_most` bounds `blocks_needed` whatever the logs' open blocks hold.
#[test]
fn space_blocks_needed_bound_is_never_below_the_exact_count() {
    let mut space = space();
    for round in 0..60u32 {
        for stream in [Stream::Meta, Stream::Data] {
            for pages in 0..40u64 {
                let exact = space.blocks_needed(7, stream, pages);
                let bound = space.blocks_needed_at_most(7, stream, pages);
                assert!(
                    exact <= bound,
                    "round {round}, {stream:?}, {pages} pages: {exact} > {bound}"
                );
            }
        }
        let value = vec![round as u8; 100 + (round as usize * 37) % 300];
        space
            .append_record(
                0,
                Purpose::UserData,
                7,
                format!("key{round}").as_bytes(),
                &value,
            )
            .expect("append");
        let image = vec![round as u8; space.geometry().page_bytes as usize];
        space
            .write_meta(0, Purpose::Compaction, 7, &image)
            .expect("meta");
    }
}

/// A space of one log over compact media, on `test_min`'s geometry with PinK's page size (so that
/// a page's encoding fills a good part of one of the media's chunks, which are freed whole), and
/// its page size.
fn compact_space() -> (Space, Profile, usize) {
    let mut profile = Profile::test_min();
    profile.geometry.page_bytes = 8192;
    profile.geometry.oob_bytes = 256;
    let flash = Flash::new_on(
        &kvssd_flash::MediaKind::Compact,
        profile.geometry,
        Some(profile.timing.clone()),
    )
    .expect("flash");
    let mut config = SpaceConfig::for_geometry(&profile.geometry);
    config.logs = 1;
    config.gc_reserve_blocks = 4;
    let space = Space::open(flash, config).expect("space");
    let page_bytes = profile.geometry.page_bytes as usize;
    (space, profile, page_bytes)
}

#[test]
fn space_invalidated_meta_pages_are_discarded_unless_a_snapshot_reaches_them() {
    let (mut space, profile, page_bytes) = compact_space();
    let page_of = |seed: u8| -> Vec<u8> { (0..page_bytes).map(|i| (i as u8) ^ seed).collect() };
    let (dead, _) = space
        .write_meta(0, Purpose::Index, 0, &page_of(1))
        .expect("write");
    let (also_dead, _) = space
        .write_meta(0, Purpose::Index, 0, &page_of(3))
        .expect("write");
    let (kept, _) = space
        .write_meta(0, Purpose::Index, 0, &page_of(2))
        .expect("write");
    let held = space.flash().media_bytes();
    space.invalidate_meta(dead);
    space.invalidate_meta(also_dead);
    assert!(
        space.flash().media_bytes() < held,
        "their bytes are freed: {held} then {}",
        space.flash().media_bytes()
    );
    assert!(matches!(
        space.read_page(0, dead, Purpose::Index),
        Err(SpaceError::Flash(kvssd_flash::FlashError::Discarded { .. }))
    ));
    // A snapshot taken now may still read `kept` after it is invalidated.
    let token = space.protect(0);
    space.invalidate_meta(kept);
    let (bytes, _) = space.read_page(0, kept, Purpose::Index).expect("kept");
    assert_eq!(bytes, page_of(2));
    space.unprotect(0, token);
    // GC reads the whole block, discarded pages included, and reports only what it could read.
    let block = dead.0 / u64::from(profile.geometry.pages_per_block);
    let address = profile.geometry.block_at(block);
    for _ in 0..100 {
        if space.flash().programmed_pages(address).expect("in range")
            == profile.geometry.pages_per_block
        {
            break;
        }
        space
            .write_meta(0, Purpose::Index, 0, &page_of(4))
            .expect("write");
    }
    let reads = space.flash().counters().total().reads;
    let (contents, _) = space.read_victim(0, block).expect("victim");
    let Victim::Meta(pages) = contents else {
        panic!("a meta block");
    };
    assert!(pages
        .iter()
        .all(|(page, _)| *page != dead && *page != also_dead));
    assert!(pages.iter().any(|(page, _)| *page == kept));
    assert_eq!(
        space.flash().counters().total().reads - reads,
        u64::from(profile.geometry.pages_per_block),
        "every page of the victim is read"
    );
}

#[test]
fn space_consumed_meta_pages_free_their_bytes_but_stay_valid_until_invalidated() {
    let (mut space, _, page_bytes) = compact_space();
    let page_of = |seed: u8| -> Vec<u8> { (0..page_bytes).map(|i| (i as u8) ^ seed).collect() };
    let (protected, _) = space
        .write_meta(0, Purpose::Index, 0, &page_of(2))
        .expect("write");
    let (read_once, _) = space
        .write_meta(0, Purpose::Index, 0, &page_of(1))
        .expect("write");
    let valid = space.valid_bytes();
    // A snapshot taken now may still read `protected`: its bytes stay.
    let token = space.protect(0);
    space.discard_consumed_meta(protected);
    let (bytes, _) = space.read_page(0, protected, Purpose::Index).expect("kept");
    assert_eq!(bytes, page_of(2));
    space.unprotect(0, token);
    let held = space.flash().media_bytes();
    space.discard_consumed_meta(read_once);
    assert!(space.flash().media_bytes() < held, "its bytes are freed");
    assert_eq!(space.valid_bytes(), valid, "both pages are still valid");
    assert!(matches!(
        space.read_page(0, read_once, Purpose::Index),
        Err(SpaceError::Flash(kvssd_flash::FlashError::Discarded { .. }))
    ));
    space.invalidate_meta(read_once);
    assert_eq!(space.valid_bytes(), valid - page_bytes as u64);
}

/// Among blocks with as much to reclaim, GC takes the one erased fewest times (KAML §IV-E): every
/// page here is invalidated as soon as it is written, so only wear tells the candidates apart.
#[test]
fn space_victims_with_equal_garbage_go_least_erased_first() {
    let mut space = space();
    let geometry = *space.geometry();
    let page = vec![5u8; geometry.page_bytes as usize];
    let mut picks = 0u64;
    for _ in 0..geometry.pages_total() * 6 {
        while space.free_blocks() <= u64::from(space.config().gc_reserve_blocks) {
            let victim = space.pick_victim().expect("a victim");
            let count = |block: u64| {
                space
                    .flash()
                    .erase_count(geometry.block_at(block))
                    .expect("on the device")
            };
            let closed = |block: u64| {
                space
                    .flash()
                    .programmed_pages(geometry.block_at(block))
                    .expect("on the device")
                    == geometry.pages_per_block
            };
            let least = (0..geometry.blocks_total())
                .filter(|&block| closed(block))
                .map(count)
                .min()
                .expect("closed blocks");
            assert_eq!(count(victim), least, "pick {picks}");
            space.read_victim(0, victim).expect("read victim");
            space.erase_victim(0, victim).expect("erase victim");
            picks += 1;
        }
        let (written, _) = space
            .write_meta(0, Purpose::Index, 0, &page)
            .expect("write");
        space.invalidate_meta(written);
    }
    assert!(
        picks > 2 * geometry.blocks_total(),
        "every block is erased more than once"
    );
}

/// A data page's payload and the user part of its OOB area (the kind byte and the bitmap).
fn data_page(space: &mut Space, page: PageIndex) -> (Vec<u8>, Vec<u8>) {
    let address = space.geometry().page_at(page.0);
    let mut data = vec![0u8; space.geometry().page_bytes as usize];
    let mut oob = vec![0u8; layout::oob_bytes(space.chunks_per_page())];
    space
        .flash_mut()
        .read(0, address, Purpose::UserData, &mut data, &mut oob)
        .expect("read");
    (data, oob)
}

/// A fresh space with `records` appended as user data of `namespace`, synced, and where each
/// went: what packing the same records must reproduce.
fn appended_space<'a>(
    namespace: u32,
    records: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> (Space, Vec<RecordPointer>) {
    let mut appended = space();
    let pointers = records
        .map(|(key, value)| {
            let (pointer, _) = appended
                .append_record(0, Purpose::UserData, namespace, key, value)
                .expect("append");
            pointer
        })
        .collect();
    appended
        .sync(0, namespace, Purpose::UserData)
        .expect("sync");
    (appended, pointers)
}

#[test]
fn space_packed_records_program_the_pages_appending_would() {
    let records: Vec<(Vec<u8>, Vec<u8>, bool)> = (0..120u32)
        .map(|i| {
            let key = format!("key{i:04}").into_bytes();
            // A record larger than a page among them: not packed.
            let len = if i == 50 { 700 } else { (i * 7 % 90) as usize };
            (key, vec![(i % 251) as u8; len], i % 5 == 0)
        })
        .collect();
    let (mut appended, expected) =
        appended_space(3, records.iter().map(|(k, v, _)| (&k[..], &v[..])));

    let mut packed_space = space();
    let packer = packed_space.record_packer(3);
    let packed = packer.pack(
        records
            .iter()
            .map(|(key, value, gc)| (key.as_slice(), value.as_slice(), *gc)),
    );
    assert_eq!(packed.placements()[50], Placement::Unpacked);
    let live = vec![true; records.len()];
    // The large record goes where appending it would: after the packed pages, so this space
    // programs it last; compare the small records and their pages.
    let (pointers, _) = packed_space
        .program_packed(0, packed, &live)
        .expect("program");
    assert_eq!(pointers[50], None);
    let (key, value, _) = &records[50];
    packed_space
        .append_record(0, Purpose::UserData, 3, key, value)
        .expect("append the large record");
    packed_space.sync(0, 3, Purpose::UserData).expect("sync");
    for (i, (key, value, _)) in records.iter().enumerate() {
        if i == 50 {
            continue;
        }
        let pointer = pointers[i].expect("a live packed record has a pointer");
        let (record, _) = packed_space
            .read_record(0, pointer, Purpose::UserData)
            .expect("read");
        assert_eq!((&record.key, &record.value), (key, value), "record {i}");
        if i < 50 {
            // Before the large record both spaces wrote the same pages in the same places.
            assert_eq!(pointer, expected[i], "record {i}");
            let page = pointer.page();
            assert!(
                data_page(&mut appended, page) == data_page(&mut packed_space, page),
                "page of record {i} differs"
            );
        }
    }
    assert_eq!(
        packed_space.stats().records_appended,
        appended.stats().records_appended
    );
}

#[test]
fn space_packed_records_not_live_are_not_counted_and_empty_pages_are_dropped() {
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..60u32)
        .map(|i| (format!("k{i:03}").into_bytes(), vec![i as u8; 100]))
        .collect();
    let mut space = space();
    let packed = space.record_packer(1).pack(
        records
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice(), false)),
    );
    let pages = packed.pages();
    // Only the records of the first page are live.
    let first_page_records = packed
        .placements()
        .iter()
        .filter(|placement| matches!(placement, Placement::Packed { page: 0, .. }))
        .count();
    assert!(first_page_records > 0 && pages > 2);
    let live: Vec<bool> = (0..records.len())
        .map(|i| i < first_page_records / 2)
        .collect();
    let before = space.flash().counters().total().programs;
    let (pointers, _) = space.program_packed(0, packed, &live).expect("program");
    space.sync(0, 1, Purpose::UserData).expect("sync");
    assert_eq!(space.flash().counters().total().programs - before, 1);
    let footprint = space.record_footprint(4, 100);
    assert_eq!(
        space.valid_bytes(),
        footprint * (first_page_records / 2) as u64
    );
    for (i, pointer) in pointers.iter().enumerate() {
        assert_eq!(pointer.is_some(), live[i], "record {i}");
        if let Some(pointer) = pointer {
            let (record, _) = space
                .read_record(0, *pointer, Purpose::UserData)
                .expect("read");
            assert_eq!(record.value, records[i].1);
        }
    }
}

mod packed_properties {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    fn record() -> impl Strategy<Value = (Vec<u8>, Vec<u8>, bool)> {
        // Values up to past the `test_min` page (512 bytes), so some records are not packed.
        (
            vec(any::<u8>(), 1..40),
            0usize..600,
            any::<u8>(),
            any::<bool>(),
        )
            .prop_map(|(key, len, fill, gc)| (key, vec![fill; len], gc))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Packed records that fit a page land where appending them would, on the same bytes;
        /// every live one reads back, only live ones count valid, and the others get no pointer.
        #[test]
        fn packed_records_match_appended_ones(
            records in vec(record(), 1..80),
            live in vec(any::<bool>(), 80),
        ) {
            let small: Vec<&(Vec<u8>, Vec<u8>, bool)> = records
                .iter()
                .filter(|(key, value, _)| RECORD_HEADER_BYTES + key.len() + value.len() <= 512)
                .collect();
            let (mut appended, expected) =
                appended_space(2, small.iter().map(|(k, v, _)| (&k[..], &v[..])));

            // All live, small records only: the same places and the same page bytes.
            let mut packed_space = space();
            let packed = packed_space
                .record_packer(2)
                .pack(small.iter().map(|(k, v, gc)| (k.as_slice(), v.as_slice(), *gc)));
            let all = vec![true; small.len()];
            let (pointers, _) = packed_space.program_packed(0, packed, &all).expect("program");
            packed_space.sync(0, 2, Purpose::UserData).expect("sync");
            for (i, pointer) in pointers.iter().enumerate() {
                prop_assert_eq!(*pointer, Some(expected[i]));
                let page = expected[i].page();
                prop_assert!(
                    data_page(&mut appended, page) == data_page(&mut packed_space, page),
                    "page of record {} differs",
                    i
                );
            }
            prop_assert_eq!(packed_space.valid_bytes(), appended.valid_bytes());

            // Any records, some not live.
            let mut space = space();
            let packed = space
                .record_packer(2)
                .pack(records.iter().map(|(k, v, gc)| (k.as_slice(), v.as_slice(), *gc)));
            let live = &live[..records.len()];
            let (pointers, _) = space.program_packed(0, packed, live).expect("program");
            let mut valid = 0;
            for (i, ((key, value, _), pointer)) in records.iter().zip(&pointers).enumerate() {
                let fits = RECORD_HEADER_BYTES + key.len() + value.len() <= 512;
                prop_assert_eq!(pointer.is_some(), live[i] && fits, "record {}", i);
                if let Some(pointer) = pointer {
                    valid += space.record_footprint(key.len(), value.len());
                    let (found, _) = space
                        .read_record(0, *pointer, Purpose::UserData)
                        .expect("read");
                    prop_assert_eq!(&found.key, key);
                    prop_assert_eq!(&found.value, value);
                }
            }
            prop_assert_eq!(space.valid_bytes(), valid);
        }
    }
}

#[test]
fn space_reads_trust_contents_only_where_the_flash_returns_exactly_what_was_programmed() {
    let profile = Profile::test_min();
    let config = SpaceConfig::for_geometry(&profile.geometry);
    let on = |flash: Flash| Space::open(flash, config.clone()).expect("space");
    let timing = || Some(profile.timing.clone());
    for media in [MediaKind::Ram, MediaKind::Compact] {
        let flash = Flash::new_on(&media, profile.geometry, timing()).expect("flash");
        assert_eq!(on(flash).read_contents(), Contents::Trust, "{media:?}");
        let mut verifying = Flash::new_on(&media, profile.geometry, timing()).expect("flash");
        verifying.set_verify_every_read(true);
        assert_eq!(on(verifying).read_contents(), Contents::Verify, "{media:?}");
    }
    let dir = tempfile::tempdir().expect("dir");
    let file =
        Flash::create(&dir.path().join("image"), profile.geometry, timing()).expect("file media");
    assert_eq!(on(file).read_contents(), Contents::Verify);
}

mod victims;
