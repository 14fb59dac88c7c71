//! Property tests of the image header decoder: a header the encoder wrote decodes to the geometry
//! it was written for, and any mutation of it (flipped bytes, truncation, extension, overwritten
//! length fields) is refused or accepted without a panic, whether or not the CRC is checked.

use kvssd_flash::fuzzing::{self, Mutation};
use kvssd_flash::{Geometry, Profile};
use proptest::collection::vec;
use proptest::prelude::*;

fn mutation() -> impl Strategy<Value = Mutation> {
    (
        any::<u8>(),
        any::<usize>(),
        any::<u32>(),
        vec(any::<u8>(), 0..32),
    )
        .prop_map(|(kind, at, value, bytes)| Mutation::from_parts(kind, at, value, bytes))
}

fn geometry() -> impl Strategy<Value = Geometry> {
    (1u32..8, 1u32..8, 1u32..64, 1u32..64, 1u32..64, 0u32..2).prop_map(
        |(channels, ways_per_channel, blocks_per_die, pages_per_block, page_64s, large_oob)| {
            Geometry {
                channels,
                ways_per_channel,
                blocks_per_die,
                pages_per_block,
                page_bytes: (page_64s * 64).max(Profile::test_min().geometry.page_bytes),
                oob_bytes: if large_oob == 1 { 128 } else { 64 },
            }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decoder_image_header_round_trips(geometry in geometry()) {
        prop_assume!(geometry.validate().is_ok());
        let header = fuzzing::encode_image_header(&geometry);
        prop_assert_eq!(fuzzing::image_header(&header), Ok(geometry));
        prop_assert_eq!(fuzzing::image_header_fields(&header), Ok(geometry));
    }

    #[test]
    fn decoder_image_header_survives_mutation(
        geometry in geometry(),
        mutations in vec(mutation(), 1..4),
    ) {
        prop_assume!(geometry.validate().is_ok());
        let header = fuzzing::mutate(&fuzzing::encode_image_header(&geometry), &mutations);
        let _ = fuzzing::image_header(&header);
        let _ = fuzzing::image_header_fields(&header);
    }
}
