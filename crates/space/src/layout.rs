//! Byte layouts of data pages: record headers, the OOB kind byte and the record-end bitmap.
//!
//! All integers are little-endian. A small record is `header (16 B) · key · value`, padded to whole
//! chunks; a large record's every page is `header (16 B) · head pointer (8 B) · key · value slice`.
//!
//! Every record carries its own checksum, so that a small record can be read and verified without
//! its page (a read on file media copies the record's bytes alone, see `detached.rs`). Images
//! written before the checksum (12-byte headers) are refused by the superblock's format version.

use crate::{Contents, PageIndex, Record, Result, SpaceError};

/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 16;
/// Where a record header keeps the record's checksum.
const CHECKSUM_AT: usize = 12;
/// Bytes before the key on each page of a large record (header and head pointer).
pub const LARGE_HEADER_BYTES: usize = RECORD_HEADER_BYTES + 8;

/// First OOB byte of a meta page.
pub const OOB_KIND_META: u8 = 0x4d;
/// First OOB byte of a data page of small records (the record-end bitmap follows).
pub const OOB_KIND_DATA: u8 = 0x44;
/// First OOB byte of a page of a large record.
pub const OOB_KIND_LARGE: u8 = 0x4c;

pub(crate) const RECORD_KIND_SMALL: u8 = 1;
pub(crate) const RECORD_KIND_LARGE: u8 = 2;

/// Bytes of a record-end bitmap for `chunks` chunks.
pub(crate) fn bitmap_bytes(chunks: u32) -> usize {
    chunks.div_ceil(8) as usize
}

/// User OOB bytes a data page uses: the kind byte and the bitmap.
pub(crate) fn oob_bytes(chunks: u32) -> usize {
    1 + bitmap_bytes(chunks)
}

/// The header at the start of every record (and of every page of a large record).
///
/// ```text
/// 0      1         2        4            8             12         16
/// | kind | key_len | part   | namespace  | value_len   | checksum |
/// ```
///
/// The checksum is the CRC-32C of the header's first 12 bytes followed by the rest of the record:
/// key and value for a small record, and for a page of a large record everything after the header
/// to the end of the page. `RecordHeader::encode` leaves it to `seal`, once the record's bytes
/// are in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// 1 = small record, 2 = page of a large record.
    pub kind: u8,
    /// Length of the key (1..=255).
    pub key_len: u8,
    /// Which page of a large record this is (0 for small records and heads).
    pub part: u16,
    /// Namespace id.
    pub namespace: u32,
    /// Length of the whole value.
    pub value_len: u32,
}

impl RecordHeader {
    pub(crate) fn encode(&self, out: &mut [u8]) {
        out[0] = self.kind;
        out[1] = self.key_len;
        out[2..4].copy_from_slice(&self.part.to_le_bytes());
        out[4..8].copy_from_slice(&self.namespace.to_le_bytes());
        out[8..12].copy_from_slice(&self.value_len.to_le_bytes());
    }

    /// Reads a header's fields (not its checksum, which [`decode_small`] and
    /// [`decode_large_head`] verify over the whole record).
    pub(crate) fn decode(data: &[u8], offset: usize, page: PageIndex) -> Result<RecordHeader> {
        let bytes =
            data.get(offset..offset + RECORD_HEADER_BYTES)
                .ok_or(SpaceError::Malformed {
                    page,
                    what: "record header runs past the page",
                })?;
        let header = RecordHeader {
            kind: bytes[0],
            key_len: bytes[1],
            part: u16::from_le_bytes([bytes[2], bytes[3]]),
            namespace: u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
            value_len: u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]),
        };
        if header.key_len == 0
            || (header.kind != RECORD_KIND_SMALL && header.kind != RECORD_KIND_LARGE)
        {
            return Err(SpaceError::Malformed {
                page,
                what: "no record header at this offset",
            });
        }
        Ok(header)
    }
}

/// The checksum a record's bytes (header first) should carry.
fn checksum(record: &[u8]) -> u32 {
    checksum_of_parts(
        &record[..RECORD_HEADER_BYTES],
        &[&record[RECORD_HEADER_BYTES..]],
    )
}

/// [`checksum`] of a record held as its header and the parts that follow it, in order.
fn checksum_of_parts(header: &[u8], rest: &[&[u8]]) -> u32 {
    let crc = crc32c::crc32c(&header[..CHECKSUM_AT]);
    rest.iter()
        .fold(crc, |crc, part| crc32c::crc32c_append(crc, part))
}

/// Writes a record's checksum into its header; `record` is the record's bytes, header first, with
/// every other byte in place.
pub(crate) fn seal(record: &mut [u8]) {
    let sum = checksum(record);
    record[CHECKSUM_AT..RECORD_HEADER_BYTES].copy_from_slice(&sum.to_le_bytes());
}

/// Writes a small record of namespace `namespace` on a data page being filled, from chunk
/// `start` (chunks of `chunk_bytes`): header, key, value and checksum, and marks its last chunk
/// in the page's OOB `bitmap`. Returns the chunks it takes. The record must fit the page.
pub(crate) fn write_small(
    page: &mut [u8],
    bitmap: &mut [u8],
    start: u32,
    chunk_bytes: usize,
    namespace: u32,
    key: &[u8],
    value: &[u8],
) -> u32 {
    let bytes = RECORD_HEADER_BYTES + key.len() + value.len();
    let chunks = bytes.div_ceil(chunk_bytes) as u32;
    let offset = start as usize * chunk_bytes;
    RecordHeader {
        kind: RECORD_KIND_SMALL,
        key_len: key.len() as u8,
        part: 0,
        namespace,
        value_len: value.len() as u32,
    }
    .encode(&mut page[offset..offset + RECORD_HEADER_BYTES]);
    let key_at = offset + RECORD_HEADER_BYTES;
    page[key_at..key_at + key.len()].copy_from_slice(key);
    page[key_at + key.len()..offset + bytes].copy_from_slice(value);
    seal(&mut page[offset..offset + bytes]);
    let end = start + chunks - 1;
    bitmap[(end / 8) as usize] |= 1 << (end % 8);
    chunks
}

/// Checks the checksum of a record whose header and bounds are already checked.
fn verify(record: &[u8], page: PageIndex) -> Result<()> {
    verify_parts(
        &record[..RECORD_HEADER_BYTES],
        &[&record[RECORD_HEADER_BYTES..]],
        page,
    )
}

/// [`verify`] of a record held as its header and the parts that follow it, in order.
fn verify_parts(header: &[u8], rest: &[&[u8]], page: PageIndex) -> Result<()> {
    let stored = u32::from_le_bytes([
        header[CHECKSUM_AT],
        header[CHECKSUM_AT + 1],
        header[CHECKSUM_AT + 2],
        header[CHECKSUM_AT + 3],
    ]);
    if stored != checksum_of_parts(header, rest) {
        return Err(SpaceError::Malformed {
            page,
            what: "record checksum does not match its bytes",
        });
    }
    Ok(())
}

pub(crate) fn read_u64(data: &[u8], offset: usize, page: PageIndex) -> Result<u64> {
    let bytes: [u8; 8] = data
        .get(offset..offset + 8)
        .and_then(|slice| slice.try_into().ok())
        .ok_or(SpaceError::Malformed {
            page,
            what: "field runs past the page",
        })?;
    Ok(u64::from_le_bytes(bytes))
}

/// The small record whose header is `head` (decoded as `header`), with the key and value its
/// header gives the lengths of, read apart: its checksum is verified over the three unless
/// `contents` trusts them.
pub(crate) fn small_from_parts(
    head: &[u8; RECORD_HEADER_BYTES],
    header: &RecordHeader,
    key: Vec<u8>,
    value: Vec<u8>,
    page: PageIndex,
    contents: Contents,
) -> Result<Record> {
    if header.kind != RECORD_KIND_SMALL {
        return Err(SpaceError::Malformed {
            page,
            what: "expected a small record",
        });
    }
    if contents == Contents::Verify {
        verify_parts(head, &[&key, &value], page)?;
    }
    Ok(Record {
        namespace: header.namespace,
        key,
        value,
    })
}

/// The value of the small record whose bytes, alone, are `record`, checked: a small record's
/// header with key `expected` and a value of `value_len` bytes, filling `record`, and its checksum.
/// The value is moved to the start of `record`'s buffer, which is returned.
pub(crate) fn small_value_in_place(
    mut record: Vec<u8>,
    expected: &[u8],
    value_len: usize,
    page: PageIndex,
) -> Result<Vec<u8>> {
    let header = RecordHeader::decode(&record, 0, page)?;
    let value_at = RECORD_HEADER_BYTES + expected.len();
    if header.kind != RECORD_KIND_SMALL
        || usize::from(header.key_len) != expected.len()
        || header.value_len as usize != value_len
        || record.len() != value_at + value_len
    {
        return Err(SpaceError::Malformed {
            page,
            what: "record is not a small record of the lengths its index filed",
        });
    }
    verify(&record, page)?;
    if &record[RECORD_HEADER_BYTES..value_at] != expected {
        return Err(SpaceError::Malformed {
            page,
            what: "record holds another key",
        });
    }
    record.drain(..value_at);
    Ok(record)
}

/// Decodes the small record at `offset` of a page, with bounds checks and its checksum verified.
pub(crate) fn decode_small(data: &[u8], offset: usize, page: PageIndex) -> Result<Record> {
    let header = RecordHeader::decode(data, offset, page)?;
    if header.kind != RECORD_KIND_SMALL {
        return Err(SpaceError::Malformed {
            page,
            what: "expected a small record",
        });
    }
    let key_at = offset + RECORD_HEADER_BYTES;
    let value_at = key_at + header.key_len as usize;
    let end = value_at + header.value_len as usize;
    if end > data.len() {
        return Err(SpaceError::Malformed {
            page,
            what: "record runs past the page",
        });
    }
    verify(&data[offset..end], page)?;
    Ok(Record {
        namespace: header.namespace,
        key: data[key_at..value_at].to_vec(),
        value: data[value_at..end].to_vec(),
    })
}

/// The header and key at the start of a large record's page (`data` is the whole page), with
/// bounds checks and the page's checksum verified.
pub(crate) fn decode_large_head(data: &[u8], page: PageIndex) -> Result<(RecordHeader, &[u8])> {
    let header = RecordHeader::decode(data, 0, page)?;
    if header.kind != RECORD_KIND_LARGE {
        return Err(SpaceError::Malformed {
            page,
            what: "expected a page of a large record",
        });
    }
    let key = data
        .get(LARGE_HEADER_BYTES..LARGE_HEADER_BYTES + usize::from(header.key_len))
        .ok_or(SpaceError::Malformed {
            page,
            what: "large record key runs past the page",
        })?;
    verify(data, page)?;
    Ok((header, key))
}

/// The value bytes page `part` of a large record holds, at most `want` of them, after checking
/// that the page belongs to the record whose key is `key`.
pub(crate) fn decode_large_part<'a>(
    data: &'a [u8],
    part: usize,
    key: &[u8],
    want: usize,
    page: PageIndex,
) -> Result<&'a [u8]> {
    let foreign = || SpaceError::Malformed {
        page,
        what: "large record part does not belong to its head",
    };
    let (header, part_key) = decode_large_head(data, page).map_err(|_| foreign())?;
    if usize::from(header.part) != part || part_key != key {
        return Err(foreign());
    }
    let from = LARGE_HEADER_BYTES + key.len();
    data.get(from..from.saturating_add(want))
        .ok_or(SpaceError::Malformed {
            page,
            what: "large record value runs past the page",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_read_in_parts_is_verified_unless_its_contents_are_trusted() {
        let mut page = vec![0u8; 256];
        let mut bitmap = [0u8; 8];
        write_small(&mut page, &mut bitmap, 0, 32, 3, b"key", b"value");
        let head: [u8; RECORD_HEADER_BYTES] =
            page[..RECORD_HEADER_BYTES].try_into().expect("a header");
        let header = RecordHeader::decode(&head, 0, PageIndex(9)).expect("a small record header");
        let read = |value: &[u8], contents| {
            small_from_parts(
                &head,
                &header,
                b"key".to_vec(),
                value.to_vec(),
                PageIndex(9),
                contents,
            )
        };
        for contents in [Contents::Verify, Contents::Trust] {
            let record = read(b"value", contents).expect("a sealed record reads back");
            assert_eq!((record.namespace, &record.value[..]), (3, &b"value"[..]));
        }
        assert!(matches!(
            read(b"valuf", Contents::Verify),
            Err(SpaceError::Malformed {
                what: "record checksum does not match its bytes",
                ..
            })
        ));
        assert!(read(b"valuf", Contents::Trust).is_ok());
    }
}
