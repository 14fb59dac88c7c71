//! Property tests of the space layer's decoders: a small record, a large record's page and the
//! saved state, each as its encoder wrote it, decode back to what was written; and any mutation of
//! them (flipped bytes, truncation, extension, overwritten length fields) is refused with a typed
//! error or accepted, never a panic.

use kvssd_flash::fuzzing::{mutate, Mutation};
use kvssd_flash::Purpose;
use proptest::collection::vec;
use proptest::prelude::*;

use crate::fuzzing;
use crate::layout::RECORD_KIND_LARGE;
use crate::{RecordHeader, LARGE_HEADER_BYTES, RECORD_HEADER_BYTES};

const PAGE_BYTES: usize = 512;

fn mutation() -> impl Strategy<Value = Mutation> {
    (
        any::<u8>(),
        any::<usize>(),
        any::<u32>(),
        vec(any::<u8>(), 0..32),
    )
        .prop_map(|(kind, at, value, bytes)| Mutation::from_parts(kind, at, value, bytes))
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 1..=255)
}

/// A data page holding one small record at `offset`, as appending writes it
/// ([`crate::layout::write_small`], in chunks of one byte so that any offset is a chunk's).
fn small_page(offset: usize, namespace: u32, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut page =
        vec![0u8; (offset + RECORD_HEADER_BYTES + key.len() + value.len()).max(PAGE_BYTES)];
    let mut bitmap = vec![0u8; page.len() / 8 + 1];
    crate::layout::write_small(
        &mut page,
        &mut bitmap,
        offset as u32,
        1,
        namespace,
        key,
        value,
    );
    page
}

/// Page `part` of a large record of `value_len` bytes holding `slice`.
fn large_page(part: u16, key: &[u8], value_len: u32, slice: &[u8]) -> Vec<u8> {
    let mut page = vec![0u8; LARGE_HEADER_BYTES + key.len() + slice.len()];
    RecordHeader {
        kind: RECORD_KIND_LARGE,
        key_len: key.len() as u8,
        part,
        namespace: 3,
        value_len,
    }
    .encode(&mut page);
    page[RECORD_HEADER_BYTES..LARGE_HEADER_BYTES].copy_from_slice(&42u64.to_le_bytes());
    page[LARGE_HEADER_BYTES..LARGE_HEADER_BYTES + key.len()].copy_from_slice(key);
    page[LARGE_HEADER_BYTES + key.len()..].copy_from_slice(slice);
    crate::layout::seal(&mut page);
    page
}

/// The saved state of a space layer that wrote `records` small records in two namespaces.
fn saved_state(records: usize) -> Vec<u8> {
    let mut space = fuzzing::blank_space();
    let mut at = 0;
    for index in 0..records {
        let key = format!("key{index}");
        let (_, done) = space
            .append_record(
                at,
                Purpose::UserData,
                (index % 2) as u32,
                key.as_bytes(),
                &[7; 40],
            )
            .expect("a few records fit test_min");
        at = done;
    }
    space
        .sync_all(at, Purpose::UserData)
        .expect("syncing open pages");
    space.export_state()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decoder_small_record_round_trips_and_survives_mutation(
        offset in 0usize..256,
        namespace in any::<u32>(),
        key in key(),
        value in vec(any::<u8>(), 0..300),
        mutations in vec(mutation(), 1..4),
    ) {
        let page = small_page(offset, namespace, &key, &value);
        let record = fuzzing::small_record(&page, offset).expect("a valid record decodes");
        prop_assert_eq!((record.namespace, &record.key, &record.value), (namespace, &key, &value));
        let damaged = mutate(&page, &mutations);
        let _ = fuzzing::record_header(&damaged, offset);
        let _ = fuzzing::small_record(&damaged, offset);
    }

    #[test]
    fn decoder_small_record_refuses_any_changed_byte(
        key in key(),
        value in vec(any::<u8>(), 0..300),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        // Every byte of the record but the length fields (whose change is caught as a bound or
        // a checksum) is covered by its checksum: a record read without its page is verified.
        let mut page = small_page(0, 9, &key, &value);
        let byte = at.index(RECORD_HEADER_BYTES + key.len() + value.len());
        page[byte] ^= flip;
        prop_assert!(fuzzing::small_record(&page, 0).is_err());
    }

    #[test]
    fn decoder_record_read_alone_round_trips_and_refuses_other_records(
        key in key(),
        value in vec(any::<u8>(), 0..300),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
        mutations in vec(mutation(), 1..4),
    ) {
        // A record's bytes alone, as a read on file media made without the device's lock takes
        // them, checked against the key and value length its index filed.
        let record = small_page(0, 9, &key, &value);
        let record = &record[..RECORD_HEADER_BYTES + key.len() + value.len()];
        prop_assert_eq!(
            fuzzing::small_record_value(record, &key, value.len()).expect("a valid record"),
            value.clone()
        );
        let mut other_key = key.clone();
        other_key[at.index(key.len())] ^= flip;
        prop_assert!(fuzzing::small_record_value(record, &other_key, value.len()).is_err());
        prop_assert!(fuzzing::small_record_value(record, &key, value.len() + 1).is_err());
        let mut changed = record.to_vec();
        changed[at.index(record.len())] ^= flip;
        prop_assert!(fuzzing::small_record_value(&changed, &key, value.len()).is_err());
        let _ = fuzzing::small_record_value(&mutate(record, &mutations), &key, value.len());
    }

    #[test]
    fn decoder_large_record_page_refuses_any_changed_byte(
        key in key(),
        slice in vec(any::<u8>(), 0..400),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let mut page = large_page(0, &key, slice.len() as u32, &slice);
        let byte = at.index(page.len());
        page[byte] ^= flip;
        prop_assert!(fuzzing::large_record_page(&page).is_err());
    }

    #[test]
    fn decoder_large_record_page_round_trips_and_survives_mutation(
        part in any::<u16>(),
        key in key(),
        slice in vec(any::<u8>(), 0..400),
        mutations in vec(mutation(), 1..4),
    ) {
        let page = large_page(part, &key, slice.len() as u32, &slice);
        prop_assert_eq!(fuzzing::large_record_page(&page).expect("a valid page decodes"), slice);
        let _ = fuzzing::large_record_page(&mutate(&page, &mutations));
    }
}

proptest! {
    // Each case builds and restores a space layer: fewer cases keep the suite fast.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn decoder_space_state_round_trips_and_survives_mutation(
        records in 0usize..40,
        mutations in vec(mutation(), 1..4),
    ) {
        let state = saved_state(records);
        let restored = fuzzing::restore(&state).expect("a saved state restores");
        prop_assert_eq!(restored.export_state(), state.clone());
        let _ = fuzzing::restore(&mutate(&state, &mutations));
    }
}
