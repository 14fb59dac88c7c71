//! The values every store is given and how a read is checked against them.
//!
//! A value is a function of its key number, its version and its length: a 16-byte header (key
//! number u64, version u32, a seal of the three u32, little-endian) and then bytes of a
//! pseudo-random stream seeded by the key number and version. The body is incompressible, as
//! real payloads mostly are, so no store gains from compressing it; the header lets a reader say
//! which write it sees, and the seal and the regenerated body catch any byte that differs.

use std::fmt;

/// Bytes of a value's header.
pub const HEADER_BYTES: usize = 16;

/// A bijective 64-bit mix (the splitmix64 finaliser).
fn mix64(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seal of a header: binds key number, version and length.
fn seal(number: u64, version: u32, value_bytes: usize) -> u32 {
    mix64(mix64(number ^ u64::from(version).rotate_left(32)) ^ value_bytes as u64) as u32
}

/// Fills `body` with the pseudo-random stream of write `version` of key `number`.
fn fill_body(number: u64, version: u32, body: &mut [u8]) {
    let mut state = mix64(number) ^ u64::from(version).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    for chunk in body.chunks_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let word = mix64(state).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// The value of write `version` of key number `number`, `value_bytes` long (at least the
/// header: shorter lengths are raised to it).
pub fn value_of(number: u64, version: u32, value_bytes: usize) -> Vec<u8> {
    let value_bytes = value_bytes.max(HEADER_BYTES);
    let mut value = vec![0u8; value_bytes];
    value[..8].copy_from_slice(&number.to_le_bytes());
    value[8..12].copy_from_slice(&version.to_le_bytes());
    value[12..16].copy_from_slice(&seal(number, version, value_bytes).to_le_bytes());
    fill_body(number, version, &mut value[HEADER_BYTES..]);
    value
}

/// Why a value read back is not one [`value_of`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// Another length than every write of the run.
    Length {
        /// Bytes read.
        read: usize,
    },
    /// The header's seal does not match its fields (a damaged header).
    Seal,
    /// A valid header of another key.
    OtherKey {
        /// The key number the header names.
        number: u64,
    },
    /// The body differs from the write the header names.
    Body {
        /// Offset of the first differing byte.
        offset: usize,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Length { read } => write!(f, "a value of {read} bytes"),
            Mismatch::Seal => write!(f, "a damaged header"),
            Mismatch::OtherKey { number } => write!(f, "the value of key number {number}"),
            Mismatch::Body { offset } => write!(f, "a body differing at byte {offset}"),
        }
    }
}

/// Checks a value read back: returns the key number and version of the write it is, if every
/// byte is that write's.
pub fn check(value: &[u8], value_bytes: usize) -> Result<(u64, u32), Mismatch> {
    let value_bytes = value_bytes.max(HEADER_BYTES);
    if value.len() != value_bytes {
        return Err(Mismatch::Length { read: value.len() });
    }
    let mut number = [0u8; 8];
    number.copy_from_slice(&value[..8]);
    let number = u64::from_le_bytes(number);
    let mut word = [0u8; 4];
    word.copy_from_slice(&value[8..12]);
    let version = u32::from_le_bytes(word);
    word.copy_from_slice(&value[12..16]);
    if u32::from_le_bytes(word) != seal(number, version, value_bytes) {
        return Err(Mismatch::Seal);
    }
    let mut expected = vec![0u8; value_bytes - HEADER_BYTES];
    fill_body(number, version, &mut expected);
    if let Some(offset) = value[HEADER_BYTES..]
        .iter()
        .zip(&expected)
        .position(|(read, wanted)| read != wanted)
    {
        return Err(Mismatch::Body {
            offset: HEADER_BYTES + offset,
        });
    }
    Ok((number, version))
}

/// Checks a value read under key number `number`: [`check`], and the header must name that key.
pub fn check_for(value: &[u8], number: u64, value_bytes: usize) -> Result<u32, Mismatch> {
    let (found, version) = check(value, value_bytes)?;
    if found != number {
        return Err(Mismatch::OtherKey { number: found });
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_differ_per_write() {
        let value = value_of(42, 3, 1024);
        assert_eq!(value.len(), 1024);
        assert_eq!(check(&value, 1024), Ok((42, 3)));
        assert_eq!(check_for(&value, 42, 1024), Ok(3));
        assert_ne!(value, value_of(42, 4, 1024));
        assert_ne!(value, value_of(43, 3, 1024));
        assert_eq!(value, value_of(42, 3, 1024), "a pure function");
        // Short lengths still carry a whole header.
        assert_eq!(value_of(1, 1, 3).len(), HEADER_BYTES);
        assert_eq!(check(&value_of(1, 1, 3), 3), Ok((1, 1)));
    }

    #[test]
    fn values_a_wrong_byte_anywhere_is_caught() {
        let value = value_of(7, 1, 300);
        for offset in 0..value.len() {
            let mut damaged = value.clone();
            damaged[offset] ^= 0x20;
            let result = check_for(&damaged, 7, 300);
            assert!(result.is_err(), "byte {offset} changed and not caught");
            if offset >= HEADER_BYTES {
                assert_eq!(result, Err(Mismatch::Body { offset }));
            }
        }
    }

    #[test]
    fn values_another_keys_or_lengths_value_is_caught() {
        let other = value_of(8, 1, 300);
        assert_eq!(
            check_for(&other, 7, 300),
            Err(Mismatch::OtherKey { number: 8 })
        );
        assert_eq!(
            check(&other[..299], 300),
            Err(Mismatch::Length { read: 299 })
        );
        // A value cut to another run's length fails its seal.
        assert_eq!(check(&other[..200], 200), Err(Mismatch::Seal));
    }

    #[test]
    fn values_body_is_not_compressible_by_repetition() {
        let value = value_of(1, 1, 4096);
        let body = &value[HEADER_BYTES..];
        let distinct: std::collections::BTreeSet<&[u8]> = body.chunks(16).collect();
        assert_eq!(distinct.len(), body.len() / 16);
    }
}
