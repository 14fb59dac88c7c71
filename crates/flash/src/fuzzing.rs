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

/// A fuzz target: its name and what it runs on one input.
pub type Target = (&'static str, fn(&[u8]));

/// The fuzz targets this crate owns, by name (the target's name under `fuzz/fuzz_targets/` and
/// its directory under `fuzz/regressions/`), with what each runs on one input. The targets and
/// the regression test that replays saved inputs both call these, so they cannot drift apart.
pub const TARGETS: &[Target] = &[("image_header", image_header_input)];

/// The `image_header` target: the whole input is the header.
pub fn image_header_input(data: &[u8]) {
    let _ = image_header_fields(data);
}

/// One change to a valid encoding, for the decoder property tests of every crate: they take what
/// an encoder wrote, apply a few of these, and check the decoder refuses or accepts the result
/// without a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// XOR one byte with a non-zero mask.
    Flip {
        /// Where (modulo the length).
        at: usize,
        /// The mask.
        mask: u8,
    },
    /// Cut the bytes to a shorter length.
    Truncate {
        /// The length kept (modulo the length).
        len: usize,
    },
    /// Append bytes.
    Extend {
        /// What is appended.
        bytes: Vec<u8>,
    },
    /// Overwrite four bytes (a length or count field, wherever it is) with a little-endian value.
    Word {
        /// Where (modulo the length).
        at: usize,
        /// The value written.
        value: u32,
    },
}

impl Mutation {
    /// A mutation from random parts: `kind` picks the variant, `value` is mapped onto the values
    /// that break length and count fields most often (0, 1, all ones, the top bit, one past the
    /// encoding's length) half of the time.
    pub fn from_parts(kind: u8, at: usize, value: u32, bytes: Vec<u8>) -> Mutation {
        match kind % 4 {
            0 => Mutation::Flip {
                at,
                mask: (value as u8).max(1),
            },
            1 => Mutation::Truncate { len: at },
            2 => Mutation::Extend { bytes },
            _ => Mutation::Word { at, value },
        }
    }

    /// Applies the mutation.
    pub fn apply(&self, bytes: &mut Vec<u8>) {
        let len = bytes.len();
        match self {
            Mutation::Flip { at, mask } => {
                if len > 0 {
                    bytes[at % len] ^= mask;
                }
            }
            Mutation::Truncate { len: keep } => bytes.truncate(keep % (len + 1)),
            Mutation::Extend { bytes: more } => bytes.extend_from_slice(more),
            Mutation::Word { at, value } => {
                let value = match value % 16 {
                    0 => 0,
                    1 => 1,
                    2 => u32::MAX,
                    3 => 1 << 31,
                    4 => u32::from(u16::MAX),
                    5 => len as u32 + 1,
                    6 => u32::from(u8::MAX),
                    7 => 2,
                    _ => *value,
                };
                if len > 0 {
                    let at = at % len;
                    for (offset, byte) in value.to_le_bytes().into_iter().enumerate() {
                        if let Some(slot) = bytes.get_mut(at + offset) {
                            *slot = byte;
                        }
                    }
                }
            }
        }
    }
}

/// `valid` with `mutations` applied in order.
pub fn mutate(valid: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut bytes = valid.to_vec();
    for mutation in mutations {
        mutation.apply(&mut bytes);
    }
    bytes
}
