//! Slots, key hashing and the byte layout of a bucket page.
//!
//! A bucket page is one flash page of the `hash` table (little-endian):
//!
//! ```text
//! offset  size  field
//!      0     4  magic "HBKT" (0x544b_4248 as u32 LE)
//!      4     4  table page number (which part of the table this is)
//!      8     8  write sequence (engine-wide counter, larger = newer copy)
//!     16     2  slot count
//!     18     1  signature bytes per slot (1 to 8)
//!     19     1  format version (1)
//!     20     4  CRC-32C of bytes 0..20 and of the slot array
//!     24     …  slots: pointer u64, then the signature in `signature bytes`
//! ```
//!
//! A slot's pointer is a [`kvssd_space::RecordPointer`] in raw form, or [`EMPTY`] (never used: a
//! probe stops here) or [`TOMBSTONE`] (deleted: a probe goes on, an insert may reuse it). Neither
//! marker can be a record pointer: they would name chunk 4095 of page 2^40 - 1, past the largest
//! device a pointer can address.

use super::{HashError, Result};
use kvssd_space::{Contents, PageIndex, Space};

/// Pointer of a slot never used.
pub(crate) const EMPTY: u64 = u64::MAX;
/// Pointer of a slot whose key was deleted.
pub(crate) const TOMBSTONE: u64 = u64::MAX - 1;
/// Bytes before the slot array.
pub(crate) const HEADER_BYTES: usize = 24;
/// Bytes of a slot at most: a pointer and an 8-byte signature.
const SLOT_BYTES_MAX: usize = 16;
const MAGIC: u32 = u32::from_le_bytes(*b"HBKT");
const FORMAT_VERSION: u8 = 1;
const CRC_AT: usize = 20;

/// One slot: the key's signature and where its record starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) signature: u64,
    pub(crate) pointer: u64,
}

impl Slot {
    pub(crate) const EMPTY: Slot = Slot {
        signature: 0,
        pointer: EMPTY,
    };

    pub(crate) fn is_empty(self) -> bool {
        self.pointer == EMPTY
    }

    pub(crate) fn is_tombstone(self) -> bool {
        self.pointer == TOMBSTONE
    }

    pub(crate) fn is_live(self) -> bool {
        !self.is_empty() && !self.is_tombstone()
    }
}

/// The 64-bit hash of a key (FNV-1a, then the SplitMix64 finaliser to spread every input bit).
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in key {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(hash)
}

/// The hash of an 8-byte key held in its slot (`key_in_slot`): a bijection of the key, so equal
/// 64-bit signatures mean equal keys.
pub(crate) fn fixed_key_hash(key: [u8; 8]) -> u64 {
    mix(u64::from_be_bytes(key))
}

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The signature of a key hash: its top `bits` bits.
pub(crate) fn signature(hash: u64, bits: u32) -> u64 {
    if bits >= 64 {
        hash
    } else {
        hash >> (64 - bits)
    }
}

/// The home slot of a key hash in a table of `slots` slots. Mixed again, so the home slot and the
/// signature (the top bits) are independent: keys sharing a home do not share signatures.
pub(crate) fn home_slot(hash: u64, slots: u64) -> u64 {
    mix(hash ^ 0x9e37_79b9_7f4a_7c15) % slots.max(1)
}

/// Bytes of the signature field for a width in bits.
pub(crate) fn signature_bytes(bits: u32) -> usize {
    bits.div_ceil(8) as usize
}

/// Bytes of one slot on flash (and in DRAM for `kaml`).
pub(crate) fn slot_bytes(bits: u32) -> usize {
    8 + signature_bytes(bits)
}

/// Slots one bucket page holds.
pub(crate) fn slots_per_page(page_bytes: usize, bits: u32) -> usize {
    (page_bytes.saturating_sub(HEADER_BYTES) / slot_bytes(bits)).min(u16::MAX as usize)
}

/// The bytes of bucket page `table_page`.
pub(crate) fn encode(
    slots: &[Slot],
    table_page: u64,
    sequence: u64,
    bits: u32,
    page_bytes: usize,
) -> Vec<u8> {
    let signature_len = signature_bytes(bits);
    let mut bytes = vec![0u8; page_bytes];
    bytes[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    bytes[4..8].copy_from_slice(&(table_page as u32).to_le_bytes());
    bytes[8..16].copy_from_slice(&sequence.to_le_bytes());
    bytes[16..18].copy_from_slice(&(slots.len() as u16).to_le_bytes());
    bytes[18] = signature_len as u8;
    bytes[19] = FORMAT_VERSION;
    let array_len = slots.len() * (8 + signature_len);
    let array = &mut bytes[HEADER_BYTES..HEADER_BYTES + array_len];
    match signature_len {
        0 => encode_array::<8>(slots, array),
        1 => encode_array::<9>(slots, array),
        2 => encode_array::<10>(slots, array),
        3 => encode_array::<11>(slots, array),
        4 => encode_array::<12>(slots, array),
        5 => encode_array::<13>(slots, array),
        6 => encode_array::<14>(slots, array),
        7 => encode_array::<15>(slots, array),
        // Eight bytes: a configuration allows signatures of 1 to 64 bits.
        _ => encode_array::<16>(slots, array),
    }
    let crc = page_crc(&bytes, HEADER_BYTES + array_len);
    bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// Decodes bucket page `table_page` read from flash page `flash_page`, checking its fields
/// against what this table writes (its checksum and slots as `contents` says, see [`check`]);
/// never panics on bad bytes.
pub(crate) fn decode(
    bytes: &[u8],
    table_page: u64,
    slot_count: usize,
    bits: u32,
    flash_page: u64,
    contents: Contents,
) -> Result<Vec<Slot>> {
    check(bytes, table_page, slot_count, bits, flash_page, contents)?;
    decode_slots(bytes, slot_count, bits, flash_page)
}

/// Checks bucket page `table_page` read from flash page `flash_page` as [`decode`] does (its
/// header always, its checksum and slots as `contents` says), without decoding its slots: the
/// cache keeps the page as these bytes and reads a slot where it lies ([`Slots::Encoded`]). Never
/// panics on bad bytes.
pub(crate) fn check(
    bytes: &[u8],
    table_page: u64,
    slot_count: usize,
    bits: u32,
    flash_page: u64,
    contents: Contents,
) -> Result<()> {
    let bad = |what| HashError::MalformedBucket {
        page: flash_page,
        what,
    };
    check_header(bytes, bytes.len(), table_page, slot_count, bits, flash_page)?;
    if contents == Contents::Trust {
        return Ok(());
    }
    let end = HEADER_BYTES + slot_count * slot_bytes(bits);
    if read_u32(bytes, CRC_AT) != Some(page_crc(bytes, end)) {
        return Err(bad("checksum mismatch"));
    }
    // Whole signature bytes hold no value wider than the table's; otherwise look.
    if bits % 8 != 0 && bits < 64 {
        let limit = (1u64 << bits) - 1;
        let array = Slots::Encoded {
            array: &bytes[HEADER_BYTES..end],
            width: slot_bytes(bits),
        };
        if (0..slot_count).any(|index| array.get(index).is_some_and(|slot| slot.signature > limit))
        {
            return Err(bad("signature wider than the table's"));
        }
    }
    Ok(())
}

/// Checks the header of bucket page `table_page` read from flash page `flash_page` (`header`, the
/// page's first bytes, of a page of `page_bytes`) as [`check`] does: the part of the check that
/// does not read the slots. Never panics on bad bytes.
pub(crate) fn check_header(
    header: &[u8],
    page_bytes: usize,
    table_page: u64,
    slot_count: usize,
    bits: u32,
    flash_page: u64,
) -> Result<()> {
    let bad = |what| HashError::MalformedBucket {
        page: flash_page,
        what,
    };
    let (number, _) = decode_header(header, flash_page)?;
    if u64::from(number) != table_page {
        return Err(bad("holds another part of the table"));
    }
    let signature_len = signature_bytes(bits);
    if read_u16(header, 16) != Some(slot_count as u16)
        || header.get(18) != Some(&(signature_len as u8))
    {
        return Err(bad(
            "slot count or signature width differs from the table's",
        ));
    }
    if HEADER_BYTES + slot_count * slot_bytes(bits) > page_bytes {
        return Err(bad("slot array runs past the page"));
    }
    Ok(())
}

/// The slot array of bucket-page bytes `page` (as [`encode`] lays it out), for a table of
/// `slot_count` slots of `bits`-bit signatures; an array cut short by the page is cut here too.
pub(crate) fn slots_in(page: &[u8], slot_count: usize, bits: u32) -> Slots<'_> {
    let width = slot_bytes(bits);
    let end = (HEADER_BYTES + slot_count * width).min(page.len());
    Slots::Encoded {
        array: page.get(HEADER_BYTES..end).unwrap_or_default(),
        width,
    }
}

/// Sets slot `index` of bucket-page bytes `page`; `false` if the page has no such slot.
pub(crate) fn set_slot(page: &mut [u8], bits: u32, index: usize, slot: Slot) -> bool {
    let width = slot_bytes(bits);
    let at = HEADER_BYTES + index * width;
    let Some(bytes) = page.get_mut(at..at + width) else {
        return false;
    };
    bytes[..8].copy_from_slice(&slot.pointer.to_le_bytes());
    bytes[8..].copy_from_slice(&slot.signature.to_le_bytes()[..width - 8]);
    true
}

/// Stamps bucket-page bytes `page` (a page [`encode`] made or [`check`] passed, its slots since
/// changed with [`set_slot`]) with write sequence `sequence` and its checksum: the bytes
/// [`encode`] would make of its slots.
pub(crate) fn seal(page: &mut [u8], sequence: u64, slot_count: usize, bits: u32) {
    page[8..16].copy_from_slice(&sequence.to_le_bytes());
    let crc = page_crc(page, HEADER_BYTES + slot_count * slot_bytes(bits));
    page[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Slots read one at a time: decoded (`kaml`'s table, a page GC peeked at), where they lie in a
/// cached bucket page's bytes, or where they lie in a clean cached page's flash copy.
#[derive(Clone, Copy)]
pub(crate) enum Slots<'a> {
    Decoded(&'a [Slot]),
    /// A checked page's slot array of `width`-byte slots (a pointer, then the signature).
    Encoded {
        array: &'a [u8],
        width: usize,
    },
    /// The `count` slots of `width` bytes of a checked bucket page on flash page `page`, read
    /// where they lie with no time or counter ([`Space::peek_page`]): a clean cached page on
    /// compact media, whose bytes are its flash copy's.
    InPlace {
        space: &'a Space,
        page: PageIndex,
        count: usize,
        width: usize,
    },
}

impl Slots<'_> {
    pub(crate) fn len(self) -> usize {
        match self {
            Slots::Decoded(slots) => slots.len(),
            Slots::Encoded { array, width } => array.len() / width,
            Slots::InPlace { count, .. } => count,
        }
    }

    pub(crate) fn get(self, index: usize) -> Option<Slot> {
        match self {
            Slots::Decoded(slots) => slots.get(index).copied(),
            Slots::Encoded { array, width } => {
                array.get(index * width..(index + 1) * width).map(slot_of)
            }
            Slots::InPlace {
                space,
                page,
                count,
                width,
            } => {
                let mut bytes = [0u8; SLOT_BYTES_MAX];
                let bytes = bytes.get_mut(..width).filter(|_| index < count)?;
                space
                    .peek_page(page, HEADER_BYTES + index * width, bytes)
                    .then(|| slot_of(bytes))
            }
        }
    }

    /// Copies slots `start..start + out.len()` into `out`, with one look at a page in place;
    /// `false` if they are not all there.
    pub(crate) fn read_run(self, start: usize, out: &mut [Slot]) -> bool {
        /// Slots read in place with one look: a probe usually stops within a few.
        const RUN_MAX: usize = 16;
        let Some(end) = start
            .checked_add(out.len())
            .filter(|&end| end <= self.len())
        else {
            return false;
        };
        match self {
            Slots::Decoded(slots) => out.copy_from_slice(&slots[start..end]),
            Slots::Encoded { .. } => {
                for (offset, place) in (start..end).zip(out.iter_mut()) {
                    match self.get(offset) {
                        Some(slot) => *place = slot,
                        None => return false,
                    }
                }
            }
            Slots::InPlace {
                space, page, width, ..
            } => {
                let mut bytes = [0u8; RUN_MAX * SLOT_BYTES_MAX];
                for (first, chunk) in (start..end).step_by(RUN_MAX).zip(out.chunks_mut(RUN_MAX)) {
                    let Some(bytes) = bytes.get_mut(..chunk.len() * width) else {
                        return false;
                    };
                    if !space.peek_page(page, HEADER_BYTES + first * width, bytes) {
                        return false;
                    }
                    for (place, slot) in chunk.iter_mut().zip(bytes.chunks_exact(width)) {
                        *place = slot_of(slot);
                    }
                }
            }
        }
        true
    }

    /// Every slot; `None` if slots in place cannot be read (their flash page is gone).
    pub(crate) fn to_vec(self) -> Option<Vec<Slot>> {
        if let Slots::InPlace {
            space,
            page,
            count,
            width,
        } = self
        {
            // One copy of the array, not one look per slot.
            let mut array = vec![0u8; count * width];
            return space
                .peek_page(page, HEADER_BYTES, &mut array)
                .then(|| Slots::Encoded {
                    array: &array,
                    width,
                })
                .and_then(Slots::to_vec);
        }
        Some(
            (0..self.len())
                .filter_map(|index| self.get(index))
                .collect(),
        )
    }
}

/// The slot whose bytes are `bytes`: the pointer, then the signature (at most eight bytes).
fn slot_of(bytes: &[u8]) -> Slot {
    let mut pointer = [0u8; 8];
    pointer.copy_from_slice(&bytes[..8]);
    let mut signature = [0u8; 8];
    signature[..bytes.len() - 8].copy_from_slice(&bytes[8..]);
    Slot {
        signature: u64::from_le_bytes(signature),
        pointer: u64::from_le_bytes(pointer),
    }
}

/// The slot array of a bucket page whose header and checksum [`decode`] has checked: what is left
/// to decode once the CRC matched (the fuzz target calls it directly, since random bytes never
/// pass the CRC). Never panics on bad bytes.
pub(crate) fn decode_slots(
    bytes: &[u8],
    slot_count: usize,
    bits: u32,
    flash_page: u64,
) -> Result<Vec<Slot>> {
    let bad = |what| HashError::MalformedBucket {
        page: flash_page,
        what,
    };
    let signature_len = signature_bytes(bits);
    let limit = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let slot_len = 8 + signature_len;
    // One bounds check for the whole array, then fixed-size slots (a miss of the bucket cache
    // decodes a whole page, so this runs once per bucket read).
    let array = HEADER_BYTES
        .checked_add(slot_count * slot_len)
        .and_then(|end| bytes.get(HEADER_BYTES..end))
        .ok_or(bad("slot runs past the page"))?;
    // A slot width known to the compiler, so each slot is a few loads and no loop.
    let (slots, widest) = match slot_len {
        8 => decode_array::<8>(array),
        9 => decode_array::<9>(array),
        10 => decode_array::<10>(array),
        11 => decode_array::<11>(array),
        12 => decode_array::<12>(array),
        13 => decode_array::<13>(array),
        14 => decode_array::<14>(array),
        15 => decode_array::<15>(array),
        16 => decode_array::<16>(array),
        _ => return Err(bad("signature wider than eight bytes")),
    };
    if widest > limit {
        return Err(bad("signature wider than the table's"));
    }
    Ok(slots)
}

/// Writes `slots` into `array` as `WIDTH`-byte slots (see [`decode_array`]).
fn encode_array<const WIDTH: usize>(slots: &[Slot], array: &mut [u8]) {
    for (slot, bytes) in slots.iter().zip(array.chunks_exact_mut(WIDTH)) {
        bytes[..8].copy_from_slice(&slot.pointer.to_le_bytes());
        bytes[8..].copy_from_slice(&slot.signature.to_le_bytes()[..WIDTH - 8]);
    }
}

/// The slots of an array of `WIDTH`-byte slots (`WIDTH` from 8 to 16: a pointer, then a
/// signature of `WIDTH - 8` bytes), and the largest signature among them.
fn decode_array<const WIDTH: usize>(array: &[u8]) -> (Vec<Slot>, u64) {
    let mut widest = 0u64;
    let slots = array
        .chunks_exact(WIDTH)
        .map(|slot| {
            let mut pointer = [0u8; 8];
            pointer.copy_from_slice(&slot[..8]);
            // Little-endian, `WIDTH - 8` bytes.
            let mut signature = [0u8; 8];
            signature[..WIDTH - 8].copy_from_slice(&slot[8..WIDTH]);
            let signature = u64::from_le_bytes(signature);
            widest = widest.max(signature);
            Slot {
                signature,
                pointer: u64::from_le_bytes(pointer),
            }
        })
        .collect();
    (slots, widest)
}

/// The table page number and write sequence of a bucket page (magic and version checked).
pub(crate) fn decode_header(bytes: &[u8], flash_page: u64) -> Result<(u32, u64)> {
    let bad = |what| HashError::MalformedBucket {
        page: flash_page,
        what,
    };
    if bytes.len() < HEADER_BYTES || read_u32(bytes, 0) != Some(MAGIC) {
        return Err(bad("no bucket-page magic"));
    }
    if bytes[19] != FORMAT_VERSION {
        return Err(bad("unknown format version"));
    }
    let number = read_u32(bytes, 4).ok_or(bad("short header"))?;
    let sequence = read_u64(bytes, 8).ok_or(bad("short header"))?;
    Ok((number, sequence))
}

fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// CRC-32C of the header (checksum field excluded) and the slot array ending at `end`.
fn page_crc(bytes: &[u8], end: usize) -> u32 {
    let header = crc32c::crc32c(&bytes[..CRC_AT]);
    crc32c::crc32c_append(header, &bytes[HEADER_BYTES..end.min(bytes.len())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_bucket_page_round_trips_and_rejects_damage() {
        let slots = vec![
            Slot {
                signature: 0xab,
                pointer: 42,
            },
            Slot::EMPTY,
            Slot {
                signature: 3,
                pointer: TOMBSTONE,
            },
        ];
        let bytes = encode(&slots, 7, 9, 8, 512);
        assert_eq!(
            decode(&bytes, 7, 3, 8, 100, Contents::Verify).ok(),
            Some(slots)
        );
        assert!(decode(&bytes, 8, 3, 8, 100, Contents::Verify).is_err());
        let mut damaged = bytes.clone();
        damaged[HEADER_BYTES + 1] ^= 1;
        assert!(matches!(
            decode(&damaged, 7, 3, 8, 100, Contents::Verify),
            Err(HashError::MalformedBucket {
                what: "checksum mismatch",
                ..
            })
        ));
        assert!(decode(&[0u8; 10], 7, 3, 8, 100, Contents::Verify).is_err());
        assert!(decode(&bytes[..30], 7, 3, 8, 100, Contents::Verify).is_err());
    }

    #[test]
    fn hash_bucket_check_trusting_contents_still_checks_the_header() {
        let slots = vec![Slot {
            signature: 0x3f,
            pointer: 42,
        }];
        // Six-bit signatures: a slot holding a wider one is damage the checksum and the width
        // check both see.
        let bytes = encode(&slots, 7, 9, 6, 512);
        let mut damaged = bytes.clone();
        damaged[HEADER_BYTES + 8] = 0xff;
        for contents in [Contents::Verify, Contents::Trust] {
            assert!(check(&bytes, 7, 1, 6, 100, contents).is_ok());
            assert!(
                check(&bytes, 8, 1, 6, 100, contents).is_err(),
                "another page"
            );
            assert!(
                check(&bytes[..30], 7, 1, 6, 100, contents).is_err(),
                "cut short"
            );
        }
        assert!(matches!(
            check(&damaged, 7, 1, 6, 100, Contents::Verify),
            Err(HashError::MalformedBucket {
                what: "checksum mismatch",
                ..
            })
        ));
        assert!(check(&damaged, 7, 1, 6, 100, Contents::Trust).is_ok());
    }

    #[test]
    fn hash_bucket_slots_round_trip_at_every_signature_width() {
        for bits in 1..=64u32 {
            let limit = if bits >= 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
            let slots: Vec<Slot> = (0..50u64)
                .map(|i| Slot {
                    signature: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & limit,
                    pointer: i * 7,
                })
                .chain([Slot::EMPTY])
                .collect();
            let bytes = encode(&slots, 3, 1, bits, 1024);
            assert_eq!(
                decode(&bytes, 3, slots.len(), bits, 0, Contents::Verify).ok(),
                Some(slots.clone()),
                "bits {bits}"
            );
            if bits % 8 != 0 {
                // The signature bytes can hold a value the table's width cannot.
                let mut wide = slots;
                wide[1].signature = limit + 1;
                let bytes = encode(&wide, 3, 1, bits, 1024);
                for checked in [
                    decode(&bytes, 3, wide.len(), bits, 0, Contents::Verify).map(|_| ()),
                    check(&bytes, 3, wide.len(), bits, 0, Contents::Verify),
                ] {
                    assert!(
                        matches!(
                            checked,
                            Err(HashError::MalformedBucket {
                                what: "signature wider than the table's",
                                ..
                            })
                        ),
                        "bits {bits}"
                    );
                }
            }
        }
    }

    #[test]
    fn hash_bucket_page_edited_where_it_lies_is_the_page_encode_makes() {
        for bits in [1u32, 8, 12, 33, 64] {
            let limit = if bits >= 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
            let mut slots: Vec<Slot> = (0..40u64)
                .map(|i| Slot {
                    signature: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & limit,
                    pointer: i * 11,
                })
                .collect();
            let mut page = encode(&slots, 5, 1, bits, 1024);
            check(&page, 5, slots.len(), bits, 0, Contents::Verify)
                .expect("a page encode made passes");
            let view = slots_in(&page, slots.len(), bits);
            assert_eq!(view.len(), slots.len(), "bits {bits}");
            assert_eq!(view.to_vec(), Some(slots.clone()), "bits {bits}");
            assert_eq!(view.get(slots.len()), None, "bits {bits}");
            for (index, slot) in [
                (0, Slot::EMPTY),
                (
                    7,
                    Slot {
                        signature: limit,
                        pointer: TOMBSTONE,
                    },
                ),
                (
                    39,
                    Slot {
                        signature: 1,
                        pointer: 99,
                    },
                ),
            ] {
                assert!(set_slot(&mut page, bits, index, slot));
                slots[index] = slot;
            }
            assert!(
                !set_slot(&mut page, bits, 1024, Slot::EMPTY),
                "past the page"
            );
            seal(&mut page, 77, slots.len(), bits);
            assert_eq!(page, encode(&slots, 5, 77, bits, 1024), "bits {bits}");
            let mut damaged = page.clone();
            damaged[HEADER_BYTES + 3] ^= 4;
            assert!(check(&damaged, 5, slots.len(), bits, 0, Contents::Verify).is_err());
        }
    }
}
