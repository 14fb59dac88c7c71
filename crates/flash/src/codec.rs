//! Bounds-checked little-endian decoding of bytes read back from flash.
//!
//! Every layer that decodes a structure it wrote (the space layer's state, the engines'
//! checkpoints, the device's log records and checkpoints) reads it through a [`ByteReader`]: bytes
//! from flash are never trusted, so every read is checked against what is left, and counts are
//! checked against the bytes that could hold them before anything is allocated. A failure is a
//! [`DecodeError`] naming what was wrong; each layer turns it into its own error type.

use std::fmt;

/// What was wrong with bytes being decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for DecodeError {}

/// Reads little-endian values from a byte slice, refusing to read past its end.
#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> ByteReader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> ByteReader<'a> {
        ByteReader { bytes, at: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(DecodeError("truncated"))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    /// The next `N` bytes as an array.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A flag byte (0: none) followed, if set, by a `u64`.
    pub fn opt_u64(&mut self) -> Result<Option<u64>, DecodeError> {
        Ok(match self.u8()? {
            0 => None,
            _ => Some(self.u64()?),
        })
    }

    /// A `u32` length followed by that many bytes.
    pub fn bytes32(&mut self) -> Result<&'a [u8], DecodeError> {
        let length = self.u32()? as usize;
        self.take(length)
    }

    /// A key: a length byte (1 to 255) followed by the key.
    pub fn key(&mut self) -> Result<Vec<u8>, DecodeError> {
        let length = usize::from(self.u8()?);
        if length == 0 {
            return Err(DecodeError("an empty key"));
        }
        Ok(self.take(length)?.to_vec())
    }

    /// A `u32` count of items of at least `min_bytes` each, refused if the bytes left cannot hold
    /// that many (so a damaged count never makes the caller allocate for it).
    pub fn count(&mut self, min_bytes: usize) -> Result<usize, DecodeError> {
        let count = self.u32()? as usize;
        if count.saturating_mul(min_bytes) > self.remaining() {
            return Err(DecodeError("a count larger than the bytes that follow"));
        }
        Ok(count)
    }

    /// Succeeds only if every byte was read.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_reads_values_and_refuses_to_overrun() {
        let mut bytes = vec![7u8];
        bytes.extend_from_slice(&0x0102u16.to_le_bytes());
        bytes.extend_from_slice(&0x0304_0506u32.to_le_bytes());
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        bytes.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 9, 0]);
        bytes.extend_from_slice(&[3, b'k', b'e', b'y']);
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(b"ab");
        let mut reader = ByteReader::new(&bytes);
        assert_eq!(reader.u8(), Ok(7));
        assert_eq!(reader.u16(), Ok(0x0102));
        assert_eq!(reader.u32(), Ok(0x0304_0506));
        assert_eq!(reader.u64(), Ok(u64::MAX));
        assert_eq!(reader.opt_u64(), Ok(Some(9 << 56)));
        assert_eq!(reader.opt_u64(), Ok(None));
        assert_eq!(reader.key(), Ok(b"key".to_vec()));
        assert_eq!(reader.bytes32(), Ok(&b"ab"[..]));
        assert_eq!(reader.finish(), Ok(()));
        assert_eq!(reader.u8(), Err(DecodeError("truncated")));
    }

    #[test]
    fn codec_refuses_damaged_lengths_counts_and_leftovers() {
        assert_eq!(
            ByteReader::new(&[0]).key(),
            Err(DecodeError("an empty key"))
        );
        assert_eq!(
            ByteReader::new(&[5, 1]).key(),
            Err(DecodeError("truncated"))
        );
        let huge = u32::MAX.to_le_bytes();
        assert!(ByteReader::new(&huge).bytes32().is_err());
        assert!(ByteReader::new(&huge).count(1).is_err());
        let mut reader = ByteReader::new(&[2, 0, 0, 0, 1, 2, 3, 4]);
        assert_eq!(reader.count(2), Ok(2));
        assert_eq!(reader.finish(), Err(DecodeError("trailing bytes")));
    }
}
