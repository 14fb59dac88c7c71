//! Unit tests of the space layer on the `test_min` geometry: packing, large records, victim scans.

use super::*;
use kvssd_flash::Profile;

fn space() -> Space {
    let profile = Profile::test_min();
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let mut config = SpaceConfig::for_geometry(&profile.geometry);
    config.logs = 2;
    config.gc_reserve_blocks = 4;
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
