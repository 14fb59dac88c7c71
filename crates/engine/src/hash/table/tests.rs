//! Tests of the slot array: probe windows and the bucket pages the cache reads.

use kvssd_flash::MediaKind;

use super::*;

/// The window as runs built slot by slot: the definition the page-at-a-time version must match.
fn window_slot_by_slot(table: &Table, home: u64, probes: u64) -> Vec<(u64, usize, usize)> {
    let total = table.total_slots();
    let per_page = table.slots_per_page as u64;
    let mut runs: Vec<(u64, usize, usize)> = Vec::new();
    let mut slot = home % total;
    for _ in 0..probes.min(total) {
        let page = slot / per_page;
        let offset = (slot % per_page) as usize;
        match runs.last_mut() {
            Some((last, start, count)) if *last == page && *start + *count == offset => *count += 1,
            _ => runs.push((page, offset, 1)),
        }
        slot = (slot + 1) % total;
    }
    runs
}

#[test]
fn hash_window_matches_slot_by_slot_definition() {
    for (pages, per_page) in [(1u64, 5usize), (3, 7), (8, 64)] {
        let table = Table::on_flash(pages, per_page, 2, 8, 512, 0);
        let total = pages * per_page as u64;
        for home in 0..total * 2 {
            for probes in [
                0,
                1,
                2,
                per_page as u64 - 1,
                per_page as u64,
                total,
                total + 3,
            ] {
                assert_eq!(
                    table.window(home, probes),
                    window_slot_by_slot(&table, home, probes),
                    "pages {pages} per page {per_page} home {home} probes {probes}"
                );
            }
        }
    }
    let dram = Table::in_dram(10, 64, 512, 0);
    assert_eq!(dram.window(7, 5), vec![(0, 7, 3), (0, 0, 2)]);
}

/// A hash table's space on `media`.
fn space_on(media: &MediaKind) -> Space {
    let config = crate::hash::HashConfig::test_min(crate::hash::HashPreset::Hash);
    let profile = kvssd_flash::Profile::test_min();
    let flash =
        kvssd_flash::Flash::new_on(media, profile.geometry, Some(profile.timing)).expect("flash");
    Space::open(flash, config.space.clone()).expect("space")
}

/// A bucket page read into the cache is checked as decoding checks it: a directory that names
/// another part of the table's page is refused, and a page as written comes back as written. On
/// compact media it is read in place, and the same slots come back.
#[test]
fn hash_table_checks_each_bucket_page_it_caches() {
    for media in [MediaKind::Ram, MediaKind::Compact] {
        let mut space = space_on(&media);
        let page_bytes = space.geometry().page_bytes as usize;
        let pages_total = space.geometry().pages_total();
        let bits = 8;
        let per_page = bucket::slots_per_page(page_bytes, bits);
        let slot_of = |page: u64| Slot {
            signature: page + 1,
            pointer: 10 + page,
        };
        let mut table = Table::on_flash(2, per_page, 2, bits, page_bytes, 0);
        for page in 0..2 {
            table
                .set(&mut space, 0, page, 3, slot_of(page), Purpose::Index)
                .expect("set");
        }
        table
            .write_back_all(&mut space, 0, Purpose::Index)
            .expect("write back");
        let reopened = |directory: Vec<Option<u64>>| {
            let mut state = table.export();
            state.directory = directory;
            state.pages.clear();
            let mut restored = Table::on_flash(2, per_page, 2, bits, page_bytes, 0);
            restored.import(&state, pages_total).expect("import");
            restored
        };
        let directory = table.export().directory;
        let mut swapped = reopened(vec![directory[1], directory[0]]);
        assert!(matches!(
            swapped.load(&mut space, 0, 0, Purpose::Index, false),
            Err(HashError::MalformedBucket {
                what: "holds another part of the table",
                ..
            })
        ));
        let mut restored = reopened(directory.clone());
        for page in 0..2 {
            // Page 1 is loaded to change: its bytes are held on every media.
            let change = page == 1;
            restored
                .load(&mut space, 0, page, Purpose::Index, change)
                .expect("load");
            let in_place = restored.page_to_read(page).is_some();
            assert_eq!(
                in_place,
                media == MediaKind::Compact && !change,
                "{media:?}, page {page}"
            );
            let slots = restored.resident(&space, page).expect("resident");
            assert_eq!(slots.len(), per_page);
            assert_eq!(slots.get(3), Some(slot_of(page)));
            assert_eq!(slots.get(4), Some(Slot::EMPTY));
            assert_eq!(slots.get(per_page), None);
            let all = slots.to_vec().expect("slots");
            assert_eq!(all.len(), per_page);
            assert_eq!(all.iter().filter(|slot| !slot.is_empty()).count(), 1);
            // A run longer than one look at a page in place, and one past the page's end.
            let mut run = [Slot::EMPTY; 20];
            assert!(slots.read_run(1, &mut run));
            assert_eq!(run[..], all[1..21]);
            assert!(!slots.read_run(per_page - 19, &mut run));
        }
        assert_eq!(restored.counts.page_reads, 2);
    }
}

/// Writes back the dirty pages of `table` (one bucket page) and opens it again from the flash
/// copy, its page loaded in place.
fn reread(table: &mut Table, space: &mut Space) -> Table {
    table
        .write_back_all(space, 0, Purpose::Index)
        .expect("write back");
    let mut state = table.export();
    state.pages.clear();
    let mut reread = Table::on_flash(1, table.slots_per_page, 1, table.bits, table.page_bytes, 0);
    reread
        .import(&state, space.geometry().pages_total())
        .expect("import");
    reread
        .load(space, 0, 0, Purpose::Index, false)
        .expect("load");
    reread
}

/// A page cached in place follows its flash copy when GC moves it, and is copied out of it when
/// it changes: the change is kept, the other slots too, and the written page reads back the same.
#[test]
fn hash_page_cached_in_place_follows_its_copy_and_is_copied_out_to_change() {
    let mut space = space_on(&MediaKind::Compact);
    let page_bytes = space.geometry().page_bytes as usize;
    let bits = 8;
    let per_page = bucket::slots_per_page(page_bytes, bits);
    let first = Slot {
        signature: 7,
        pointer: 70,
    };
    let second = Slot {
        signature: 9,
        pointer: 90,
    };
    let mut writer = Table::on_flash(1, per_page, 1, bits, page_bytes, 0);
    writer
        .set(&mut space, 0, 0, 5, first, Purpose::Index)
        .expect("set");
    let mut table = reread(&mut writer, &mut space);
    let old = table.page_to_read(0).expect("cached in place");
    // GC's move: the same bytes on another page, the old copy dropped.
    let (bytes, _) = space.read_page(0, old, Purpose::Gc).expect("read");
    let (moved, _) = space.write_meta(0, Purpose::Gc, 0, &bytes).expect("write");
    table.relocate(0, moved);
    space.invalidate_meta(old);
    assert!(
        !space.peek_page(old, 0, &mut [0u8; 8]),
        "the old copy is dropped"
    );
    assert_eq!(table.page_to_read(0), Some(moved));
    let slot = |table: &Table, space: &Space, offset| {
        table.resident(space, 0).and_then(|slots| slots.get(offset))
    };
    assert_eq!(slot(&table, &space, 5), Some(first));
    table
        .set(&mut space, 0, 0, 6, second, Purpose::Index)
        .expect("set");
    assert_eq!(table.page_to_read(0), None, "copied out to change");
    assert_eq!(slot(&table, &space, 5), Some(first));
    assert_eq!(slot(&table, &space, 6), Some(second));
    let reread = reread(&mut table, &mut space);
    assert_eq!(slot(&reread, &space, 5), Some(first));
    assert_eq!(slot(&reread, &space, 6), Some(second));
    assert_eq!(slot(&reread, &space, 7), Some(Slot::EMPTY));
}
