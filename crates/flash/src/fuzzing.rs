//! Entry points for the fuzz targets (`fuzz/` at the repository root) and the decoder property
//! tests: the file image header's parser *below* its checksum, which random bytes could never
//! reach through [`crate::Flash::open`] (the CRC check refuses them first).
//!
//! Hidden from the documentation and not part of the crate's API: each function is a thin wrapper
//! that runs a crate-private decoder on untrusted bytes and reports whether it refused them. The
//! decoder itself stays private; exposing it here is the smallest change that lets an
//! out-of-tree fuzz crate reach it.

use crate::media;
use crate::Geometry;

pub use crate::media::HeaderError;

/// Bytes of the header an image is opened with (its checked fields and their CRC).
pub const IMAGE_HEADER_BYTES: usize = media::IMAGE_HEADER_READ_BYTES;

/// Decodes an image header's fields as [`crate::Flash::open`] would once its CRC matched, then
/// sizes the image it describes.
pub fn image_header_fields(header: &[u8]) -> Result<Geometry, HeaderError> {
    let geometry = media::decode_header_fields(header)?;
    // What opening the image does next with a geometry that validated.
    let _ = media::image_bytes(&geometry);
    let _ = (
        geometry.dies(),
        geometry.blocks_total(),
        geometry.capacity_bytes(),
    );
    Ok(geometry)
}

/// Decodes a whole image header, checksum included (random bytes are refused at the magic or the
/// CRC; the property tests use it on mutated valid headers).
pub fn image_header(header: &[u8]) -> Result<Geometry, HeaderError> {
    media::decode_header(header)
}

/// The header bytes an image of `geometry` starts with (its first [`IMAGE_HEADER_BYTES`]).
pub fn encode_image_header(geometry: &Geometry) -> Vec<u8> {
    media::encode_header(geometry)[..IMAGE_HEADER_BYTES].to_vec()
}

/// The fuzz targets this crate owns, by name (the target's name under `fuzz/fuzz_targets/` and
/// its directory under `fuzz/regressions/`), with what each runs on one input. The targets and
/// the regression test that replays saved inputs both call these, so they cannot drift apart.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[("image_header", image_header_input)];

/// The `image_header` target: the whole input is the header.
pub fn image_header_input(data: &[u8]) {
    let _ = image_header_fields(data);
}
