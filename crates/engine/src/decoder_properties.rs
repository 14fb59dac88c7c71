//! Property tests of the engines' decoders: a meta segment page, a bucket page and each engine's
//! saved state, as their encoders wrote them, decode back to what was written; and any mutation of
//! them (flipped bytes, truncation, extension, overwritten length fields) is refused with a typed
//! error or accepted, never a panic.

use kvssd_flash::fuzzing::{mutate, Mutation};
use kvssd_flash::{Flash, Profile};
use kvssd_space::Space;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

use crate::cpu::CpuCounts;
use crate::fuzzing;
use crate::hash::{HashConfig, HashIndex, HashPreset};
use crate::lsm::segment::{self, Entry, SegmentPage};
use crate::{EngineConfig, LsmTree, Preset};

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

/// Sorted entries that fit one page.
fn entries() -> impl Strategy<Value = Vec<Entry>> {
    btree_map(vec(any::<u8>(), 1..24), (any::<u64>(), any::<u32>()), 1..20).prop_map(|map| {
        let mut used = segment::HEADER_BYTES;
        map.into_iter()
            .map(|(key, (pointer, value_len))| Entry {
                key: key.into(),
                pointer,
                value_len,
                from_gc: false,
            })
            .take_while(|entry| {
                used += entry.encoded_bytes();
                used <= PAGE_BYTES
            })
            .collect()
    })
}

fn pairs() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>)>> {
    vec((vec(any::<u8>(), 1..16), vec(any::<u8>(), 0..64)), 0..60)
}

/// The saved state of an LSM tree of `preset` after `pairs` were stored (flushes included).
fn lsm_state(preset: Preset, pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let config = EngineConfig::test_min(preset);
    let flash = Flash::new(Profile::test_min().geometry, None).expect("valid geometry");
    let mut space = Space::open(flash, config.space.clone()).expect("erased flash");
    let mut tree = LsmTree::open(&space, config).expect("test_min opens");
    let mut at = 0;
    for (key, value) in pairs {
        at = tree
            .put(&mut space, at, key, value)
            .expect("a few pairs fit");
    }
    tree.durable_state()
}

/// The saved state of a hash index of `preset` after `pairs` were stored.
fn hash_state(preset: HashPreset, pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let config = HashConfig::test_min(preset);
    let flash = Flash::new(Profile::test_min().geometry, None).expect("valid geometry");
    let mut space = Space::open(flash, config.space.clone()).expect("erased flash");
    let mut index = HashIndex::open(&space, config).expect("test_min opens");
    let mut at = 0;
    for (key, value) in pairs {
        at = index
            .put(&mut space, at, key, value)
            .expect("a few pairs fit");
    }
    index.durable_state()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decoder_segment_page_round_trips_and_survives_mutation(
        entries in entries(),
        mutations in vec(mutation(), 1..4),
    ) {
        let page = segment::encode(&entries, PAGE_BYTES);
        let view = SegmentPage::parse(&page, 0).expect("a valid page parses");
        prop_assert_eq!(view.entries().expect("its entries decode"), entries.clone());
        let found = view.find(&entries[0].key, &mut CpuCounts::default()).expect("search");
        prop_assert_eq!(found.as_ref(), Some(&entries[0]));
        let damaged = mutate(&page, &mutations);
        let _ = fuzzing::segment_page(&damaged, &entries[0].key);
    }

    #[test]
    fn decoder_bucket_page_round_trips_and_survives_mutation(
        slots in vec((any::<u64>(), any::<u64>()), 1..40),
        bits in 1u32..=64,
        table_page in 0u64..1000,
        mutations in vec(mutation(), 1..4),
    ) {
        let limit = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let slots: Vec<(u64, u64)> = slots
            .into_iter()
            .map(|(pointer, signature)| (pointer, signature & limit))
            .collect();
        let page = fuzzing::encode_bucket_page(&slots, table_page, 9, bits, 1024);
        prop_assert_eq!(
            fuzzing::bucket_page(&page, table_page, slots.len(), bits).expect("a valid page"),
            slots.len()
        );
        let damaged = mutate(&page, &mutations);
        let _ = fuzzing::bucket_page(&damaged, table_page, slots.len(), bits);
        let _ = fuzzing::bucket_page_slots(&damaged);
    }
}

proptest! {
    // Each case writes and restores an index: fewer cases keep the suite fast.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn decoder_lsm_state_round_trips_and_survives_mutation(
        preset in 0usize..Preset::ALL.len(),
        pairs in pairs(),
        mutations in vec(mutation(), 1..4),
    ) {
        let preset = Preset::ALL[preset];
        let state = lsm_state(preset, &pairs);
        let restored = fuzzing::lsm_restore(preset, &state).expect("a saved state restores");
        prop_assert_eq!(restored.durable_state(), state.clone());
        let _ = fuzzing::lsm_restore(preset, &mutate(&state, &mutations));
    }

    #[test]
    fn decoder_hash_state_round_trips_and_survives_mutation(
        preset in 0usize..HashPreset::ALL.len(),
        pairs in pairs(),
        mutations in vec(mutation(), 1..4),
    ) {
        let preset = HashPreset::ALL[preset];
        let state = hash_state(preset, &pairs);
        let restored = fuzzing::hash_restore(preset, &state).expect("a saved state restores");
        prop_assert_eq!(restored.durable_state(), state.clone());
        let _ = fuzzing::hash_restore(preset, &mutate(&state, &mutations));
    }
}
