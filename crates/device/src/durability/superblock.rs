//! The superblock: the root of the durable state (where the latest checkpoint and the live log are).
//!
//! Each update programs one page holding a *copy*:
//!
//! ```text
//!  0  magic "KVSSDSB\0" (8 bytes)
//!  8  format version u32 LE (= 1)
//! 12  body length u32 LE
//! 16  sequence u64 LE        one more than the copy it replaces
//! 24  CRC-32C u32 LE         of bytes 0..24 and the body
//! 28  body                   opaque to this module (the device layer's root record)
//! ```
//!
//! Copies go alternately to two reserved blocks, page after page; a block that is full is erased
//! before the next copy goes into it, while the other block still holds the previous copy. Recovery
//! reads every programmed page of both blocks and takes the valid copy with the highest sequence. A cut
//! in the middle of writing a copy leaves that page torn (it fails its CRC, or reads as erased) and the
//! previous copy valid; a cut in the middle of an erase destroys only copies older than the newest one
//! in the other block.

/// The superblock format version this build writes and reads. It stands for the whole image's
/// device-level format: version 2 added a checksum to every data record (16-byte record headers);
/// images of version 1 are refused, not misread.
pub const SUPERBLOCK_VERSION: u32 = 2;
/// Bytes before the body.
pub const SUPERBLOCK_HEADER_BYTES: usize = 28;

const MAGIC: &[u8; 8] = b"KVSSDSB\0";

/// A decoded superblock copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuperblockCopy {
    /// Sequence number: the newest valid copy wins.
    pub sequence: u64,
    /// The device layer's root record.
    pub body: Vec<u8>,
}

/// Why a page is not a valid superblock copy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuperblockError {
    /// The page does not start with the superblock magic: not a superblock at all.
    #[error("not a kvssd superblock")]
    NotASuperblock,
    /// The magic is right but the checksum is not: a torn or damaged copy.
    #[error("superblock copy is corrupt (checksum mismatch)")]
    Corrupt,
    /// Written by an incompatible format version.
    #[error("superblock format version {found} is not supported (this build reads version {SUPERBLOCK_VERSION}; format a new image)")]
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// The body does not fit a page.
    #[error("superblock body of {body_bytes} bytes does not fit a {page_bytes}-byte page")]
    TooLarge {
        /// Body size.
        body_bytes: usize,
        /// Page size.
        page_bytes: usize,
    },
}

/// Encodes a copy into a page image of `page_bytes`.
pub fn encode(copy: &SuperblockCopy, page_bytes: usize) -> Result<Vec<u8>, SuperblockError> {
    if SUPERBLOCK_HEADER_BYTES + copy.body.len() > page_bytes {
        return Err(SuperblockError::TooLarge {
            body_bytes: copy.body.len(),
            page_bytes,
        });
    }
    let mut page = vec![0u8; page_bytes];
    page[0..8].copy_from_slice(MAGIC);
    page[8..12].copy_from_slice(&SUPERBLOCK_VERSION.to_le_bytes());
    page[12..16].copy_from_slice(&(copy.body.len() as u32).to_le_bytes());
    page[16..24].copy_from_slice(&copy.sequence.to_le_bytes());
    let body_end = SUPERBLOCK_HEADER_BYTES + copy.body.len();
    page[SUPERBLOCK_HEADER_BYTES..body_end].copy_from_slice(&copy.body);
    let crc = crc32c::crc32c_append(
        crc32c::crc32c(&page[0..24]),
        &page[SUPERBLOCK_HEADER_BYTES..body_end],
    );
    page[24..28].copy_from_slice(&crc.to_le_bytes());
    Ok(page)
}

/// Decodes a page image; never panics, whatever the bytes.
pub fn decode(page: &[u8]) -> Result<SuperblockCopy, SuperblockError> {
    if page.len() < SUPERBLOCK_HEADER_BYTES || &page[0..8] != MAGIC {
        return Err(SuperblockError::NotASuperblock);
    }
    let word = |at: usize| u32::from_le_bytes([page[at], page[at + 1], page[at + 2], page[at + 3]]);
    let body_bytes = word(12) as usize;
    let body_end = SUPERBLOCK_HEADER_BYTES.saturating_add(body_bytes);
    if body_end > page.len() {
        return Err(SuperblockError::Corrupt);
    }
    let crc = crc32c::crc32c_append(
        crc32c::crc32c(&page[0..24]),
        &page[SUPERBLOCK_HEADER_BYTES..body_end],
    );
    if crc != word(24) {
        return Err(SuperblockError::Corrupt);
    }
    decode_fields(page)
}

/// The fields of a page whose magic, body length and CRC [`decode`] has checked: what is left to
/// decode once the checksum matched (the fuzz target calls it directly, since random bytes never
/// pass the CRC). Never panics, whatever the bytes.
pub(crate) fn decode_fields(page: &[u8]) -> Result<SuperblockCopy, SuperblockError> {
    let word = |at: usize| {
        page.get(at..at + 4)
            .map(|bytes| u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
            .ok_or(SuperblockError::NotASuperblock)
    };
    let body_end = SUPERBLOCK_HEADER_BYTES.saturating_add(word(12)? as usize);
    let version = word(8)?;
    if version != SUPERBLOCK_VERSION {
        return Err(SuperblockError::UnsupportedVersion { found: version });
    }
    let mut sequence = [0u8; 8];
    sequence.copy_from_slice(page.get(16..24).ok_or(SuperblockError::NotASuperblock)?);
    let body = page
        .get(SUPERBLOCK_HEADER_BYTES..body_end)
        .ok_or(SuperblockError::Corrupt)?;
    Ok(SuperblockCopy {
        sequence: u64::from_le_bytes(sequence),
        body: body.to_vec(),
    })
}

/// The newest valid copy among decoded candidates, if any. An unsupported version among the newest
/// candidates is an error rather than a silent fall-back to an older copy.
pub fn newest<'a>(
    candidates: impl IntoIterator<Item = &'a Result<SuperblockCopy, SuperblockError>>,
) -> Result<Option<SuperblockCopy>, SuperblockError> {
    let mut best: Option<&SuperblockCopy> = None;
    for candidate in candidates {
        match candidate {
            Ok(copy) => {
                if best.is_none_or(|best| copy.sequence > best.sequence) {
                    best = Some(copy);
                }
            }
            Err(SuperblockError::UnsupportedVersion { found }) => {
                return Err(SuperblockError::UnsupportedVersion { found: *found })
            }
            Err(_) => {}
        }
    }
    Ok(best.cloned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn copy(sequence: u64, body: &[u8]) -> SuperblockCopy {
        SuperblockCopy {
            sequence,
            body: body.to_vec(),
        }
    }

    #[test]
    fn superblock_round_trips() {
        let original = copy(42, b"checkpoint at page 17, log 3 from page 0");
        let page = encode(&original, 512).expect("fits");
        assert_eq!(page.len(), 512);
        assert_eq!(decode(&page), Ok(original));
        assert_eq!(
            decode(&encode(&copy(0, b""), 64).expect("fits")),
            Ok(copy(0, b""))
        );
    }

    #[test]
    fn superblock_detects_every_single_byte_change() {
        let page = encode(&copy(7, b"root"), 128).expect("fits");
        for at in 0..SUPERBLOCK_HEADER_BYTES + 4 {
            let mut damaged = page.clone();
            damaged[at] ^= 0x01;
            assert!(decode(&damaged).is_err(), "byte {at}");
        }
    }

    #[test]
    fn superblock_refuses_other_versions_and_foreign_pages() {
        for other in [1, SUPERBLOCK_VERSION + 1] {
            let mut page = encode(&copy(1, b"x"), 128).expect("fits");
            page[8..12].copy_from_slice(&other.to_le_bytes());
            let crc = crc32c::crc32c_append(crc32c::crc32c(&page[0..24]), &page[28..29]);
            page[24..28].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(
                decode(&page),
                Err(SuperblockError::UnsupportedVersion { found: other })
            );
        }
        assert_eq!(decode(&[0u8; 128]), Err(SuperblockError::NotASuperblock));
        assert_eq!(decode(b"short"), Err(SuperblockError::NotASuperblock));
        assert!(matches!(
            encode(&copy(1, &[0; 200]), 128),
            Err(SuperblockError::TooLarge { .. })
        ));
    }

    #[test]
    fn superblock_newest_valid_copy_wins() {
        let candidates = vec![
            Ok(copy(3, b"old")),
            Err(SuperblockError::Corrupt),
            Ok(copy(5, b"new")),
            Ok(copy(4, b"middle")),
            Err(SuperblockError::NotASuperblock),
        ];
        assert_eq!(newest(&candidates), Ok(Some(copy(5, b"new"))));
        assert_eq!(newest(&[Err(SuperblockError::Corrupt)]), Ok(None));
        assert!(newest(&[
            Ok(copy(1, b"")),
            Err(SuperblockError::UnsupportedVersion { found: 9 })
        ])
        .is_err());
    }

    #[test]
    fn superblock_arbitrary_bytes_never_panic() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..5_000 {
            let length = (rng.next_u64() % 100) as usize;
            let mut page: Vec<u8> = (0..length).map(|_| rng.next_u64() as u8).collect();
            if length >= 8 && rng.next_u64() % 2 == 0 {
                page[0..8].copy_from_slice(MAGIC);
            }
            let _ = decode(&page);
        }
    }
}
