//! Compact media ([`crate::MediaKind::Compact`]): page slots kept in memory in an encoding that
//! stores runs of a repeating 16-byte pattern as the pattern and their length, so that a page full
//! of values that are descriptions of themselves (a 16-byte description repeated to the value's
//! length, as the benchmarks write them) costs a few bytes per record instead of its size.
//!
//! The encoding is faithful: any slot decodes to exactly the bytes programmed, periodic or not (bytes
//! that are not periodic are kept as literals). Everything above the media sees the same bytes as on
//! [`crate::MediaKind::Ram`], so the flash layer's checksums, rules, timing and counters are unchanged.
//!
//! A page programmed as dense ([`crate::Flash::program_dense`]: meta and bucket pages, keys and
//! pointers that hardly repeat) is encoded without the search for runs ([`encode_dense`]): its OOB
//! area as any slot, then its payload as one literal and a run of the zero bytes at its end.
//!
//! A block's page encodings lie end to end in chunks ([`crate::arena`]), freed when every page in
//! them is erased or discarded ([`crate::Flash::discard`]). A slot is encoded with its OOB area
//! first, so that a read of the trailer and of one record ([`crate::Flash::read_parts`]) decodes
//! only the operations up to that record.
//!
//! # Encoding of one slot (the whole OOB area, then the payload)
//!
//! A sequence of operations which together cover the slot exactly. Each starts with a byte whose
//! top two bits say what it is and whose low six bits give its length in units, 1 to 63 of them;
//! a unit is 32 bytes for a pattern run and one byte otherwise. A length that does not fit there
//! (0 in the six bits) follows the byte, in bytes, as a LEB128.
//!
//! ```text
//! 0  LITERAL  then `length` bytes
//! 1  PATTERN  then 16 bytes: the run is the pattern repeated (and cut) to `length` bytes
//! 2  FILL     then 1 byte: the run is that byte repeated
//! 3  ZEROS    the run is zero bytes
//! ```
//!
//! A record of a 32-byte key and a 1 KiB value a description repeats costs 67 bytes: its
//! header and key as a literal (1 + 48), its value as a pattern run (1 + 16), and its zero padding
//! to the next record (1). With a tag byte and a LEB128 length for every operation, it cost 72.
//!
//! A run is a stretch in which every byte equals the byte 16 before it, at least [`RUN_MIN`] bytes
//! long, or more than [`FILL_MIN`] bytes if it is one byte repeated. Decoding checks every length
//! against the slot and the encoding: a malformed encoding is an error, never wrong bytes.

mod decode;
mod media;

#[cfg(test)]
pub(crate) use decode::decode;
pub(crate) use decode::{decode_into, decode_span, Malformed, SpanReader};
pub(crate) use media::{CompactMedia, Unreadable};

/// Period of the runs the encoding recognises: a value description's size.
pub const PATTERN_BYTES: usize = 16;
/// Shortest stretch stored as a pattern run: shorter ones cost less as literals.
const RUN_MIN: usize = 48;
/// Shortest stretch of one repeated byte stored as a fill run (a record's zero padding).
const FILL_MIN: usize = PATTERN_BYTES;

const LITERAL: u8 = 0;
const PATTERN: u8 = 1;
const FILL: u8 = 2;
const ZEROS: u8 = 3;
/// Bits of an operation's first byte that hold its length in units (above them, its kind).
const SHORT_BITS: u32 = 6;
const SHORT_MASK: u8 = (1 << SHORT_BITS) - 1;
/// Bytes of a unit of a pattern run's length: a 1 KiB value's run is 32 of them.
const PATTERN_UNIT: usize = 32;

/// Bytes of a unit of the length of an operation of `kind`.
fn unit(kind: u8) -> usize {
    if kind == PATTERN {
        PATTERN_UNIT
    } else {
        1
    }
}

/// Appends the first byte of an operation of `kind` covering `length` bytes, and the LEB128 of
/// `length` after it if the byte cannot hold it.
fn push_header(out: &mut Vec<u8>, kind: u8, length: usize) {
    let units = length / unit(kind);
    if length % unit(kind) == 0 && (1..=usize::from(SHORT_MASK)).contains(&units) {
        out.push(kind << SHORT_BITS | units as u8);
    } else {
        out.push(kind << SHORT_BITS);
        push_length(out, length);
    }
}

/// The kind of the operation whose first byte is `first`, and its length in bytes if the byte
/// holds it (`None`: a LEB128 length follows).
fn header(first: u8) -> (u8, Option<usize>) {
    let kind = first >> SHORT_BITS;
    let units = usize::from(first & SHORT_MASK);
    (kind, (units != 0).then(|| units * unit(kind)))
}

/// Whether `bytes` repeats its first [`PATTERN_BYTES`] bytes to its end: true of every value that is
/// a description of itself, and of every value of at most 16 bytes. Such values cost the compact
/// media a constant number of bytes however long they are.
pub fn is_periodic(bytes: &[u8]) -> bool {
    bytes.len() <= PATTERN_BYTES || periodic_end(bytes, PATTERN_BYTES) == bytes.len()
}

/// The first position at or after `from` (>= 16) whose byte differs from the byte 16 before it, or
/// the length of `bytes`.
fn periodic_end(bytes: &[u8], mut from: usize) -> usize {
    let length = bytes.len();
    // Whole 32-byte stretches first, compared as arrays (a few vector instructions): a periodic
    // value of 1 KiB is all such stretches, and every value written to compact media is checked.
    while from + 32 <= length {
        let (Ok(here), Ok(before)) = (
            <&[u8; 32]>::try_from(&bytes[from..from + 32]),
            <&[u8; 32]>::try_from(&bytes[from - PATTERN_BYTES..from - PATTERN_BYTES + 32]),
        ) else {
            break;
        };
        if here != before {
            break;
        }
        from += 32;
    }
    while from + 8 <= length {
        let here = word(bytes, from);
        let before = word(bytes, from - PATTERN_BYTES);
        let differ = here ^ before;
        if differ != 0 {
            return from + (differ.trailing_zeros() / 8) as usize;
        }
        from += 8;
    }
    while from < length && bytes[from] == bytes[from - PATTERN_BYTES] {
        from += 1;
    }
    from
}

/// The high bit of each byte of `word` that is not zero, and no other bit.
fn nonzero_bytes(word: u64) -> u64 {
    const LOW_SEVEN: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    (((word & LOW_SEVEN) + LOW_SEVEN) | word) & !LOW_SEVEN
}

/// Whether the eight bytes of `word` are one byte repeated.
fn is_one_byte(word: u64) -> bool {
    word == (word & 0xFF) * 0x0101_0101_0101_0101
}

fn word(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

fn push_length(out: &mut Vec<u8>, mut length: usize) {
    loop {
        let low = (length & 0x7F) as u8;
        length >>= 7;
        if length == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

fn push_literal(out: &mut Vec<u8>, bytes: &[u8]) {
    if !bytes.is_empty() {
        push_header(out, LITERAL, bytes.len());
        out.extend_from_slice(bytes);
    }
}

fn push_run(out: &mut Vec<u8>, run: &[u8]) {
    let pattern = &run[..PATTERN_BYTES];
    if pattern.iter().all(|&byte| byte == pattern[0]) {
        if pattern[0] == 0 {
            push_header(out, ZEROS, run.len());
        } else {
            push_header(out, FILL, run.len());
            out.push(pattern[0]);
        }
    } else {
        push_header(out, PATTERN, run.len());
        out.extend_from_slice(pattern);
    }
}

/// Appends the encoding of `slot` to `out`.
pub(crate) fn encode(slot: &[u8], out: &mut Vec<u8>) {
    encode_ruling_out::<true>(slot, out);
}

/// [`encode`], with or without ruling out most run candidates eight positions at a time
/// (`RULE_OUT`); the encodings are the same byte for byte (a property test compares them), so the
/// media hold what they held.
fn encode_ruling_out<const RULE_OUT: bool>(slot: &[u8], out: &mut Vec<u8>) {
    let length = slot.len();
    let mut literal_from = 0;
    let mut at = PATTERN_BYTES;
    while at < length {
        // Sixteen positions at once, where none of them can start a run. A pattern run from a
        // position `c` of `at..at + 16` needs positions `c..c + 32` to repeat the bytes 16
        // before, which takes in all of `at + 16..at + 32`; a fill needs sixteen bytes of one
        // byte within `c - 16..c + 16`, inside `at - 16..at + 32`, and any sixteen such bytes
        // hold one of that stretch's six eight-byte words whole. When neither holds, the scan
        // below would look at each candidate here, find no run, and go on past `at + 15`.
        // Pages of keys and pointers (index and bucket pages) are mostly such stretches.
        // (Only where no earlier run is within 16 bytes, as below.)
        if RULE_OUT && literal_from + PATTERN_BYTES <= at && at + 32 <= length {
            let repeats = slot[at + 16..at + 32] == slot[at..at + 16];
            let one_byte = (0..6).any(|index| is_one_byte(word(slot, at - 16 + 8 * index)));
            if !repeats && !one_byte {
                at += 16;
                continue;
            }
        }
        // Eight positions at once, where none of them can start a run: a pattern run from a
        // position `c` of `at..at + 8` needs positions `c..c + 32` to repeat the bytes 16 before,
        // which takes in all of `at + 8..at + 16`; a fill needs bytes `c - 16..c` to be one byte,
        // which takes in all of `at - 8..at`. When neither holds, the scan below would look at
        // each candidate here and go on past the stretch holding `at + 7`, if there is one.
        // (Only where no earlier run is within 16 bytes, so each candidate's run would start 16
        // before it.)
        if RULE_OUT && literal_from + PATTERN_BYTES <= at && at + 16 <= length {
            let before = word(slot, at - 8);
            let next = nonzero_bytes(word(slot, at + 8) ^ before);
            if next != 0 && !is_one_byte(before) {
                let last_repeats = (word(slot, at) ^ word(slot, at - PATTERN_BYTES)) >> 56 == 0;
                at += 8;
                if last_repeats {
                    // The stretch holding `at - 1` ends at the first byte of `next` that differs.
                    at += (next.trailing_zeros() / 8) as usize + 1;
                }
                continue;
            }
        }
        if at + 8 <= length {
            // Eight positions at once: a run needs a position whose byte equals the byte 16
            // before it, so where no byte of the eight does, none starts here. (A run of exactly 16
            // equal bytes may be missed; it stays a literal: compression, never correctness.)
            let differ = word(slot, at) ^ word(slot, at - PATTERN_BYTES);
            let zero_bytes =
                differ.wrapping_sub(0x0101_0101_0101_0101) & !differ & 0x8080_8080_8080_8080;
            if zero_bytes == 0 {
                at += 8;
                continue;
            }
            // The lowest flagged byte is a true zero (borrows only flag bytes above one).
            at += (zero_bytes.trailing_zeros() / 8) as usize;
            // Most such positions start no run (a page of keys matches the byte 16 before here
            // and there): where the next eight positions do not all match, the stretch is too
            // short for a pattern, and unless the sixteen bytes before are one byte repeated it
            // is no fill either. Then it ends at the first mismatch, as `periodic_end` finds.
            // (Only where no earlier run cut the stretch before it short.)
            if RULE_OUT && at + 8 <= length && literal_from + PATTERN_BYTES <= at {
                let before = word(slot, at - PATTERN_BYTES);
                let differ = word(slot, at) ^ before;
                let one_byte = is_one_byte(before) && before == word(slot, at - 8);
                if differ != 0 && !one_byte {
                    at += (differ.trailing_zeros() / 8) as usize + 1;
                    continue;
                }
            }
        }
        if slot[at] != slot[at - PATTERN_BYTES] {
            // No stretch starts here. (Only the last seven positions get here without the test
            // above: taken as candidates, they found a fill of exactly 16 bytes ending at one of
            // them, wherever a scan happened to stop there, so the two scans could differ.)
            at += 1;
            continue;
        }
        let end = periodic_end(slot, at);
        // Bytes [at - 16, end) repeat with period 16; what an earlier run took is not available.
        let start = (at - PATTERN_BYTES).max(literal_from);
        let length = end - start;
        let fill = || {
            let first = slot[start];
            slot[start..start + PATTERN_BYTES]
                .iter()
                .all(|&byte| byte == first)
        };
        let mut end = end;
        if length >= RUN_MIN || (length >= FILL_MIN && fill()) {
            push_literal(out, &slot[literal_from..start]);
            push_run(out, &slot[start..end]);
            literal_from = end;
            // One byte repeated right after a run (a record's zero padding after its value) does
            // not repeat the run's bytes 16 before it, so the scan above misses a fill of 16 to
            // 31 bytes there: look for it directly.
            let fill_end = slot[end..]
                .iter()
                .position(|&byte| byte != slot[end])
                .map_or(slot.len(), |offset| end + offset);
            if end < slot.len() && fill_end - end >= FILL_MIN {
                push_run(out, &slot[end..fill_end]);
                literal_from = fill_end;
                end = fill_end;
            }
        }
        at = end + 1;
    }
    push_literal(out, &slot[literal_from..]);
}

/// Appends an encoding of `slot` that looks for no run but the zero bytes at its end (of at least
/// [`FILL_MIN`]): for pages whose bytes hardly repeat, the index pages of keys and pointers, in
/// which [`encode`] finds next to nothing and spends most of the page's write looking. A
/// `hash` bucket page's write-back is such a page, and its encoding took 37% of `hash`'s Load
/// on the paper card at 32 blocks per die. The encoding is as faithful as [`encode`]'s, and no
/// longer than the slot by more than an operation's header.
pub(crate) fn encode_dense(slot: &[u8], out: &mut Vec<u8>) {
    let words = slot.len() / 8;
    // The zero tail, a word at a time, then the bytes of the last word that is not zero.
    let mut end = if slot[8 * words..].iter().any(|&byte| byte != 0) {
        slot.len()
    } else {
        (0..words)
            .rev()
            .find(|&index| word(slot, 8 * index) != 0)
            .map_or(0, |index| 8 * index + 8)
    };
    while end > 0 && slot[end - 1] == 0 {
        end -= 1;
    }
    if slot.len() - end >= FILL_MIN {
        push_literal(out, &slot[..end]);
        push_header(out, ZEROS, slot.len() - end);
    } else {
        push_literal(out, slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(slot: &[u8]) -> Vec<u8> {
        let mut encoded = Vec::new();
        encode(slot, &mut encoded);
        let mut back = vec![0xA5; slot.len()];
        decode(&encoded, &mut back).expect("an encoding decodes");
        back
    }

    /// A page of records as the benchmarks write them: a header and key that are not periodic, then
    /// a value that is its 16-byte description repeated, each starting anywhere.
    fn records_page(seed: u64, bytes: usize) -> Vec<u8> {
        let mut page = Vec::with_capacity(bytes);
        let mut state = seed;
        while page.len() < bytes {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            page.extend_from_slice(&state.to_le_bytes()[..(state % 7) as usize + 1]);
            let description = (state ^ 0x5555).to_le_bytes().repeat(2);
            for index in 0..(state % 1500) as usize {
                page.push(description[index % PATTERN_BYTES]);
            }
        }
        page.truncate(bytes);
        page
    }

    #[test]
    fn descriptions_cost_a_few_bytes_per_record_and_round_trip() {
        let page = records_page(7, 8192 + 256);
        let mut encoded = Vec::new();
        encode(&page, &mut encoded);
        // About a dozen records: their headers and keys, plus 17 bytes per value.
        assert!(
            encoded.len() < page.len() / 16,
            "encoded {} bytes",
            encoded.len()
        );
        assert_eq!(round_trip(&page), page);
        // A record's zero padding between a value and the next header is a fill run.
        let mut padded = vec![7u8; 40];
        padded.extend_from_slice(&[0u8; 20]);
        padded.extend(1..=40u8);
        encoded.clear();
        encode(&padded, &mut encoded);
        assert!(encoded.contains(&(ZEROS << SHORT_BITS | 20)), "{encoded:?}");
        assert_eq!(round_trip(&padded), padded);
        // So is padding of exactly 16 bytes right after a value's run, which no byte 16 before
        // it repeats: a value of 64 periodic bytes, then 16 zeros, then the next header.
        let mut after_run: Vec<u8> = (0..64).map(|at| (at % 16) as u8 + 1).collect();
        after_run.extend_from_slice(&[0u8; 16]);
        after_run.extend(100..=140u8);
        encoded.clear();
        encode(&after_run, &mut encoded);
        // The pattern run (two units of 32 bytes, then its 16 bytes), then 16 zeros.
        assert_eq!(encoded[0], PATTERN << SHORT_BITS | 2, "{encoded:?}");
        assert_eq!(encoded[17], ZEROS << SHORT_BITS | 16, "{encoded:?}");
        assert_eq!(round_trip(&after_run), after_run);
        let zeros = vec![0u8; 8192];
        encoded.clear();
        encode(&zeros, &mut encoded);
        assert_eq!(encoded.len(), 3, "one run of zeros, its length after it");
        assert_eq!(round_trip(&zeros), zeros);
    }

    #[test]
    fn periodic_values_are_recognised() {
        let description: Vec<u8> = (0..16).collect();
        let value: Vec<u8> = description.iter().cycle().take(1000).copied().collect();
        assert!(is_periodic(&value));
        assert!(is_periodic(&value[..16]));
        assert!(is_periodic(b"short"));
        let mut broken = value.clone();
        broken[999] ^= 1;
        assert!(!is_periodic(&broken));
        broken[999] ^= 1;
        broken[16] ^= 1;
        assert!(!is_periodic(&broken));
    }

    #[test]
    fn malformed_encodings_are_errors() {
        let short = |kind: u8, units: u8| kind << SHORT_BITS | units;
        let mut slot = vec![0u8; 64];
        let malformed: [(&[u8], &str); 12] = [
            (&[], "too short"),
            (&[short(LITERAL, 0), 65], "past the end"),
            (&[short(ZEROS, 63), 1], "past the end"),
            (&[short(PATTERN, 3)], "past the end"),
            (&[short(LITERAL, 0), 64, 1, 2], "cut short"),
            (&[short(LITERAL, 2), 1], "cut short"),
            (&[short(PATTERN, 2), 1], "pattern cut"),
            (&[short(FILL, 0), 64], "fill byte missing"),
            (&[short(FILL, 63)], "fill byte missing"),
            (&[short(ZEROS, 0)], "length missing"),
            (
                &[short(FILL, 0), 0xFF, 0xFF, 0xFF, 0xFF, 0],
                "length too long",
            ),
            (&[short(ZEROS, 32), short(ZEROS, 31)], "short of the slot"),
        ];
        for (encoded, why) in malformed {
            assert!(decode(encoded, &mut slot).is_err(), "{why}: {encoded:?}");
        }
        assert!(decode(&[short(FILL, 0), 64, 7], &mut slot).is_ok());
        assert_eq!(slot, vec![7u8; 64]);
        assert!(decode(&[short(FILL, 60), 7, short(ZEROS, 4)], &mut slot).is_ok());
        assert_eq!(slot[..60], [7u8; 60]);
        assert_eq!(slot[60..], [0u8; 4]);
        let pattern: Vec<u8> = (1..=16).collect();
        let mut encoded = vec![short(PATTERN, 2)];
        encoded.extend_from_slice(&pattern);
        assert!(decode(&encoded, &mut slot).is_ok());
        assert_eq!(slot, pattern.repeat(4));
    }

    proptest! {
        /// Pages of index entries (decimal keys, small pointers) and of records (fills and
        /// periodic values): the same encoding as looking at every candidate.
        #[test]
        fn ruling_out_candidates_keeps_the_encoding(
            pieces in proptest::collection::vec((0u8..5, any::<u64>(), 1usize..90), 1..200),
        ) {
            let mut slot = Vec::new();
            for (kind, seed, length) in pieces {
                match kind {
                    0 => slot.extend(format!("user{seed:020}xxxxxxxx").bytes().take(length)),
                    1 => slot.extend(seed.to_le_bytes().iter().cycle().take(length)),
                    2 => slot.extend(std::iter::repeat_n((seed % 3) as u8, length)),
                    // Hash bucket slots: an empty one (all-ones pointer) or a small pointer, then
                    // a one-byte signature.
                    3 => {
                        for index in 0..length / 4 {
                            if (seed >> (index % 64)) & 1 == 0 {
                                slot.extend([0xFF; 8]);
                                slot.push(0);
                            } else {
                                slot.extend((seed >> 24 ^ index as u64).to_le_bytes());
                                slot.push(seed as u8 ^ index as u8);
                            }
                        }
                    }
                    _ => slot.extend(seed.to_le_bytes().repeat(2).iter().cycle().take(length * 3)),
                }
            }
            let (mut fast, mut reference) = (Vec::new(), Vec::new());
            encode(&slot, &mut fast);
            encode_ruling_out::<false>(&slot, &mut reference);
            prop_assert_eq!(fast, reference);
        }

        #[test]
        fn any_span_decodes_as_the_whole_slot(
            seed in 0u64..1_000,
            spans in proptest::collection::vec((0usize..8_448, 0usize..3_000), 1..8),
        ) {
            let slot = records_page(seed, 8_448);
            let mut encoded = Vec::new();
            encode(&slot, &mut encoded);
            // Split the encoding as a chunk boundary would.
            let cut = (seed as usize * 37) % encoded.len().max(1);
            let pieces = [&encoded[..cut], &encoded[cut..]];
            // Each span fresh, and all of them through one reader that goes on from the last
            // (forward, within the last operation, or back to the start).
            let mut reader = SpanReader::new(pieces);
            for (offset, length) in spans {
                let length = length.min(slot.len() - offset);
                let mut out = vec![0u8; length];
                decode_span(pieces, offset, &mut out).expect("decodes");
                prop_assert_eq!(&out[..], &slot[offset..offset + length]);
                let mut again = vec![0u8; length];
                reader.read(offset, &mut again).expect("decodes");
                prop_assert_eq!(&again[..], &slot[offset..offset + length]);
            }
        }

        #[test]
        fn a_literal_byte_found_is_the_slot_byte(
            seed in 0u64..1_000,
            offsets in proptest::collection::vec(0usize..8_448, 1..40),
            dense in any::<bool>(),
        ) {
            // Records (literals between runs), or a page of bytes that repeat nothing with a
            // zero tail, encoded as a bucket page is.
            let mut slot = records_page(seed, 8_448);
            if dense {
                let end = 8_448 - (seed as usize * 7) % 2_000;
                for (index, byte) in slot.iter_mut().enumerate() {
                    *byte = if index < end {
                        ((seed + index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8
                    } else {
                        0
                    };
                }
            }
            let mut encoded = Vec::new();
            if dense {
                encode_dense(&slot, &mut encoded);
            } else {
                encode(&slot, &mut encoded);
            }
            let cut = (seed as usize * 53) % encoded.len().max(1);
            let pieces = [&encoded[..cut], &encoded[cut..]];
            let mut reader = SpanReader::new(pieces);
            for offset in offsets {
                let rest = reader.literal_from(offset).expect("decodes");
                if let Some(rest) = rest {
                    prop_assert!(!rest.is_empty());
                    prop_assert_eq!(rest, &slot[offset..offset + rest.len()]);
                }
                let byte = reader.literal_at(offset).expect("decodes");
                if let Some(&byte) = byte {
                    prop_assert_eq!(byte, slot[offset], "offset {}", offset);
                }
                // A dense page keeps every byte before its zero tail in its one literal.
                if dense && slot[offset..].iter().any(|&byte| byte != 0) {
                    prop_assert!(byte.is_some(), "offset {} of a dense page", offset);
                }
            }
        }

        #[test]
        fn a_reader_reads_a_record_in_pieces_as_one_span(
            seed in 0u64..1_000,
            offset in 0usize..8_000,
            cuts in proptest::collection::vec(0usize..1_200, 1..5),
        ) {
            // Records, and a stretch of bytes that repeat nothing (one long literal).
            let mut slot = records_page(seed, 8_448);
            let noise = (seed as usize * 131) % 6_000;
            for (index, byte) in slot[noise..noise + 2_000].iter_mut().enumerate() {
                *byte = ((seed + index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8;
            }
            let mut encoded = Vec::new();
            encode(&slot, &mut encoded);
            let mut reader = SpanReader::new([&encoded, &[]]);
            let mut at = offset;
            for cut in cuts {
                let length = cut.min(slot.len() - at);
                let mut out = vec![0u8; length];
                reader.read(at, &mut out).expect("decodes");
                prop_assert_eq!(&out[..], &slot[at..at + length]);
                at += length;
            }
        }

        #[test]
        fn any_slot_round_trips(
            bytes in proptest::collection::vec(any::<u8>(), 0..3000),
            pattern in proptest::collection::vec(any::<u8>(), 16),
            runs in proptest::collection::vec((0usize..3000, 0usize..600), 0..6),
            encoded_cut in any::<usize>(),
            slot_split in any::<usize>(),
        ) {
            // Arbitrary bytes with periodic stretches of arbitrary phase and length laid over them.
            let mut slot = bytes;
            for (start, length) in runs {
                let start = start.min(slot.len());
                let end = (start + length).min(slot.len());
                for (offset, byte) in slot[start..end].iter_mut().enumerate() {
                    *byte = pattern[offset % 16];
                }
            }
            prop_assert_eq!(round_trip(&slot), slot.clone());
            // Split anywhere, in the encoding (a page straddling chunks) and in the slot (payload
            // and OOB), it decodes the same.
            let mut encoded = Vec::new();
            encode(&slot, &mut encoded);
            let cut = encoded_cut % (encoded.len() + 1);
            let split = slot_split % (slot.len() + 1);
            let mut back = vec![0xA5; slot.len()];
            let (data, oob) = back.split_at_mut(split);
            decode_into([&encoded[..cut], &encoded[cut..]], [data, oob]).expect("decodes");
            prop_assert_eq!(back, slot);
        }

        #[test]
        fn a_dense_encoding_round_trips_and_keeps_its_zero_tail_short(
            bytes in proptest::collection::vec(any::<u8>(), 0..3000),
            zeros in 0usize..3000,
            slot_split in any::<usize>(),
        ) {
            let mut slot = bytes;
            slot.resize(slot.len() + zeros, 0);
            let mut encoded = Vec::new();
            encode_dense(&slot, &mut encoded);
            let split = slot_split % (slot.len() + 1);
            let mut back = vec![0xA5; slot.len()];
            let (data, oob) = back.split_at_mut(split);
            decode_into([&encoded, &[]], [data, oob]).expect("decodes");
            prop_assert_eq!(&back, &slot);
            // One literal and at most one run of zeros, each with a header of a few bytes.
            let nonzero = slot.iter().rposition(|&byte| byte != 0).map_or(0, |last| last + 1);
            let kept = if slot.len() - nonzero >= FILL_MIN { nonzero } else { slot.len() };
            prop_assert!(encoded.len() <= kept + 8, "{} bytes for {kept}", encoded.len());
        }

        #[test]
        fn periodic_end_is_the_first_byte_off_the_period(
            pattern in proptest::collection::vec(any::<u8>(), 16),
            length in 16usize..400,
            flip in proptest::option::of(0usize..400),
            from in 16usize..64,
        ) {
            let mut bytes: Vec<u8> = (0..length).map(|at| pattern[at % 16]).collect();
            if let Some(at) = flip.filter(|&at| at < length) {
                bytes[at] ^= 0x5A;
            }
            let from = from.min(length);
            let mut expected = from;
            while expected < length && bytes[expected] == bytes[expected - PATTERN_BYTES] {
                expected += 1;
            }
            prop_assert_eq!(periodic_end(&bytes, from), expected);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(
            encoded in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut slot = vec![0u8; 300];
            let _ = decode(&encoded, &mut slot);
        }
    }
}
