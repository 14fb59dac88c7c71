//! The conventional path's bytes on the device: commit-log records, the log anchor and the page
//! directory. Every structure carries a CRC-32C; decoding checks it and every length against the
//! bytes at hand before using them (bytes from the medium are never trusted), and a structure
//! that fails is reported, never indexed past.
//!
//! All integers are little-endian.
//!
//! * **Log record** (one per commit, starting at a block boundary of the log ring, spanning
//!   `ceil((32 + payload) / page_bytes)` blocks): header `magic "KHLG" u32 | lsn u64 | oldest
//!   u64 | count u32 | payload_bytes u32 | crc u32`, the CRC over the header's first 28 bytes
//!   and the payload; then `count` entries `table u32 | value_bytes_max u32 | key_bytes u32 |
//!   value_bytes u32 (u32::MAX: deleted) | key | value`. `lsn` numbers the record's first block
//!   among every log block ever written (block `lsn % log_blocks` of the ring); `oldest` is the
//!   lowest LSN recovery must replay as the commit was written (every record before it had its
//!   pages written).
//! * **Anchor** (one block): `magic "KHAN" u32 | oldest u64 | page_bytes u32 | log_blocks u64 |
//!   directory_blocks u64 | crc u32`: the layout the namespace was created with, and a full
//!   checkpoint's truncation point (0 until the first).
//! * **Directory block**: `magic "KHDR" u32 | count u32 | bytes u32 | crc u32`, then `count`
//!   entries in `bytes` bytes, each `lba u64 | index u64 | table u32 | value_bytes_max u32 |
//!   prefix_bytes u8 | prefix`: page `index` of a table's key prefix lives at `lba`.

use crate::TableId;

const LOG_MAGIC: u32 = u32::from_le_bytes(*b"KHLG");
const ANCHOR_MAGIC: u32 = u32::from_le_bytes(*b"KHAN");
const DIRECTORY_MAGIC: u32 = u32::from_le_bytes(*b"KHDR");

/// Bytes of a log record's header.
pub(crate) const LOG_HEADER_BYTES: usize = 32;
/// Bytes of each log entry's header (table, value_bytes_max, key and value lengths).
pub(crate) const LOG_ENTRY_HEADER_BYTES: usize = 16;
/// Bytes of a directory block's header.
pub(crate) const DIRECTORY_HEADER_BYTES: usize = 16;
/// Bytes of a directory entry besides its prefix.
pub(crate) const DIRECTORY_ENTRY_BYTES: usize = 25;
/// Bytes of the anchor.
const ANCHOR_BYTES: usize = 36;

/// What the anchor holds: the truncation point and the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Anchor {
    pub(crate) oldest: u64,
    pub(crate) page_bytes: u32,
    pub(crate) log_blocks: u64,
    pub(crate) directory_blocks: u64,
}

/// One change of a logged commit: table, the table's largest value, key, value (`None`:
/// deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogEntry {
    pub(crate) table: TableId,
    pub(crate) value_bytes_max: usize,
    pub(crate) key: Vec<u8>,
    pub(crate) value: Option<Vec<u8>>,
}

/// A change to encode: table, the table's largest value, key, value (`None`: deleted).
pub(crate) type EntryRef<'a> = (TableId, usize, &'a [u8], Option<&'a [u8]>);

/// A decoded log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogRecord {
    pub(crate) lsn: u64,
    pub(crate) oldest: u64,
    pub(crate) entries: Vec<LogEntry>,
}

/// A page directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DirectoryEntry {
    pub(crate) lba: u64,
    pub(crate) index: u64,
    pub(crate) table: TableId,
    pub(crate) value_bytes_max: usize,
    pub(crate) prefix: Vec<u8>,
}

/// Why a structure read from the device was refused.
pub(crate) type Refusal = String;

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let field = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(field.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let field = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(field.try_into().ok()?))
}

/// Encodes a commit's log record: its bytes, unpadded.
pub(crate) fn encode_log(lsn: u64, oldest: u64, entries: &[EntryRef<'_>]) -> Vec<u8> {
    let mut bytes = vec![0u8; LOG_HEADER_BYTES];
    for (table, value_bytes_max, key, value) in entries {
        bytes.extend_from_slice(&table.0.to_le_bytes());
        bytes.extend_from_slice(&(*value_bytes_max as u32).to_le_bytes());
        bytes.extend_from_slice(&(key.len() as u32).to_le_bytes());
        bytes.extend_from_slice(
            &value
                .map_or(u32::MAX, |value| value.len() as u32)
                .to_le_bytes(),
        );
        bytes.extend_from_slice(key);
        if let Some(value) = value {
            bytes.extend_from_slice(value);
        }
    }
    let payload = (bytes.len() - LOG_HEADER_BYTES) as u32;
    bytes[..4].copy_from_slice(&LOG_MAGIC.to_le_bytes());
    bytes[4..12].copy_from_slice(&lsn.to_le_bytes());
    bytes[12..20].copy_from_slice(&oldest.to_le_bytes());
    bytes[20..24].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    bytes[24..28].copy_from_slice(&payload.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..28]), &bytes[LOG_HEADER_BYTES..]);
    bytes[28..32].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// The header of a log record at the start of `block`, if it looks like one: (lsn, total bytes
/// of the record). Its checksum is checked by [`decode_log`] once all its blocks are read.
pub(crate) fn log_header(block: &[u8]) -> Option<(u64, usize)> {
    if u32_at(block, 0)? != LOG_MAGIC {
        return None;
    }
    let lsn = u64_at(block, 4)?;
    let payload = u32_at(block, 24)? as usize;
    Some((lsn, LOG_HEADER_BYTES.checked_add(payload)?))
}

/// Decodes a whole log record (`bytes` holds at least its header and payload). `None`: it is
/// not one (a torn write, a stale or foreign block); `Err`: its checksum holds but its contents
/// do not (corruption the checksum missed, or a bug).
pub(crate) fn decode_log(bytes: &[u8]) -> Result<Option<LogRecord>, Refusal> {
    let Some((lsn, total)) = log_header(bytes) else {
        return Ok(None);
    };
    let (Some(record), Some(oldest), Some(count), Some(crc)) = (
        bytes.get(..total),
        u64_at(bytes, 12),
        u32_at(bytes, 20),
        u32_at(bytes, 28),
    ) else {
        return Ok(None);
    };
    let computed =
        crc32c::crc32c_append(crc32c::crc32c(&record[..28]), &record[LOG_HEADER_BYTES..]);
    if computed != crc {
        return Ok(None);
    }
    let corrupt = |what: &str| format!("log record at LSN {lsn}: {what}");
    if oldest > lsn {
        return Err(corrupt("its truncation point is past the record"));
    }
    let payload = &record[LOG_HEADER_BYTES..];
    if count as usize > payload.len() / LOG_ENTRY_HEADER_BYTES {
        return Err(corrupt("more entries than its payload can hold"));
    }
    let mut entries = Vec::with_capacity(count as usize);
    let mut at = 0usize;
    for _ in 0..count {
        let (Some(table), Some(value_bytes_max), Some(key_bytes), Some(value_bytes)) = (
            u32_at(payload, at),
            u32_at(payload, at + 4),
            u32_at(payload, at + 8),
            u32_at(payload, at + 12),
        ) else {
            return Err(corrupt("an entry header runs past the payload"));
        };
        at += LOG_ENTRY_HEADER_BYTES;
        let key_end = at
            .checked_add(key_bytes as usize)
            .filter(|&end| end <= payload.len())
            .ok_or_else(|| corrupt("a key runs past the payload"))?;
        let key = payload[at..key_end].to_vec();
        at = key_end;
        let value = if value_bytes == u32::MAX {
            None
        } else {
            if value_bytes > value_bytes_max {
                return Err(corrupt("a value is longer than its table's slot"));
            }
            let end = at
                .checked_add(value_bytes as usize)
                .filter(|&end| end <= payload.len())
                .ok_or_else(|| corrupt("a value runs past the payload"))?;
            let value = payload[at..end].to_vec();
            at = end;
            Some(value)
        };
        entries.push(LogEntry {
            table: TableId(table),
            value_bytes_max: value_bytes_max as usize,
            key,
            value,
        });
    }
    if at != payload.len() {
        return Err(corrupt("bytes left over after its entries"));
    }
    Ok(Some(LogRecord {
        lsn,
        oldest,
        entries,
    }))
}

/// Encodes the anchor.
pub(crate) fn encode_anchor(anchor: &Anchor) -> Vec<u8> {
    let mut bytes = vec![0u8; ANCHOR_BYTES];
    bytes[..4].copy_from_slice(&ANCHOR_MAGIC.to_le_bytes());
    bytes[4..12].copy_from_slice(&anchor.oldest.to_le_bytes());
    bytes[12..16].copy_from_slice(&anchor.page_bytes.to_le_bytes());
    bytes[16..24].copy_from_slice(&anchor.log_blocks.to_le_bytes());
    bytes[24..32].copy_from_slice(&anchor.directory_blocks.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..32]);
    bytes[32..36].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// Decodes the anchor block.
pub(crate) fn decode_anchor(block: &[u8]) -> Result<Anchor, Refusal> {
    match (
        u32_at(block, 0),
        u64_at(block, 4),
        u32_at(block, 12),
        u64_at(block, 16),
        u64_at(block, 24),
        u32_at(block, 32),
    ) {
        (
            Some(ANCHOR_MAGIC),
            Some(oldest),
            Some(page_bytes),
            Some(log_blocks),
            Some(directory_blocks),
            Some(crc),
        ) if crc32c::crc32c(&block[..32]) == crc => Ok(Anchor {
            oldest,
            page_bytes,
            log_blocks,
            directory_blocks,
        }),
        _ => Err("the log anchor is damaged (bad magic or checksum)".into()),
    }
}

/// Encodes one directory entry.
pub(crate) fn encode_directory_entry(entry: &DirectoryEntry) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(DIRECTORY_ENTRY_BYTES + entry.prefix.len());
    bytes.extend_from_slice(&entry.lba.to_le_bytes());
    bytes.extend_from_slice(&entry.index.to_le_bytes());
    bytes.extend_from_slice(&entry.table.0.to_le_bytes());
    bytes.extend_from_slice(&(entry.value_bytes_max as u32).to_le_bytes());
    bytes.push(entry.prefix.len() as u8);
    bytes.extend_from_slice(&entry.prefix);
    bytes
}

/// A directory block of `count` encoded entries.
pub(crate) fn encode_directory_block(count: u32, entries: &[u8], page_bytes: usize) -> Vec<u8> {
    let mut block = vec![0u8; page_bytes.max(DIRECTORY_HEADER_BYTES + entries.len())];
    block[..4].copy_from_slice(&DIRECTORY_MAGIC.to_le_bytes());
    block[4..8].copy_from_slice(&count.to_le_bytes());
    block[8..12].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&block[..12]), entries);
    block[12..16].copy_from_slice(&crc.to_le_bytes());
    block[DIRECTORY_HEADER_BYTES..DIRECTORY_HEADER_BYTES + entries.len()].copy_from_slice(entries);
    block
}

/// Decodes a directory block: its entries and their encoded bytes (to append to).
pub(crate) fn decode_directory_block(
    block: &[u8],
) -> Result<(Vec<DirectoryEntry>, Vec<u8>), Refusal> {
    let damaged = |what: &str| format!("a page directory block is damaged: {what}");
    let (Some(DIRECTORY_MAGIC), Some(count), Some(bytes), Some(crc)) = (
        u32_at(block, 0),
        u32_at(block, 4),
        u32_at(block, 8),
        u32_at(block, 12),
    ) else {
        return Err(damaged("bad magic"));
    };
    let encoded = block
        .get(DIRECTORY_HEADER_BYTES..DIRECTORY_HEADER_BYTES.saturating_add(bytes as usize))
        .ok_or_else(|| damaged("its entries run past the block"))?;
    if crc32c::crc32c_append(crc32c::crc32c(&block[..12]), encoded) != crc {
        return Err(damaged("bad checksum"));
    }
    let mut entries = Vec::new();
    let mut at = 0usize;
    for _ in 0..count {
        let (Some(lba), Some(index), Some(table), Some(value_bytes_max), Some(&prefix_bytes)) = (
            u64_at(encoded, at),
            u64_at(encoded, at + 8),
            u32_at(encoded, at + 16),
            u32_at(encoded, at + 20),
            encoded.get(at + 24),
        ) else {
            return Err(damaged("an entry runs past its bytes"));
        };
        at += DIRECTORY_ENTRY_BYTES;
        let prefix = encoded
            .get(at..at + prefix_bytes as usize)
            .ok_or_else(|| damaged("a key prefix runs past its bytes"))?
            .to_vec();
        at += prefix.len();
        entries.push(DirectoryEntry {
            lba,
            index,
            table: TableId(table),
            value_bytes_max: value_bytes_max as usize,
            prefix,
        });
    }
    if at != encoded.len() {
        return Err(damaged("bytes left over after its entries"));
    }
    Ok((entries, encoded.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_record_round_trips_and_any_flipped_bit_or_cut_is_refused() {
        let entries: Vec<EntryRef<'_>> = vec![
            (TableId(1), 16, b"key-0001", Some(b"value")),
            (TableId(2), 16, b"key-0002", None),
        ];
        let bytes = encode_log(7, 3, &entries);
        let record = decode_log(&bytes).expect("valid").expect("a record");
        assert_eq!((record.lsn, record.oldest), (7, 3));
        assert_eq!(record.entries.len(), 2);
        assert_eq!(record.entries[0].value.as_deref(), Some(&b"value"[..]));
        assert_eq!(record.entries[1].value, None);
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(
                !matches!(decode_log(&damaged), Ok(Some(ref r)) if *r == record),
                "bit {bit} flipped and the record still decoded as itself"
            );
        }
        for cut in 0..bytes.len() {
            assert_eq!(decode_log(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn a_directory_block_and_the_anchor_round_trip_and_damage_is_refused() {
        let entry = DirectoryEntry {
            lba: 9,
            index: 4,
            table: TableId(3),
            value_bytes_max: 24,
            prefix: b"ab".to_vec(),
        };
        let encoded = encode_directory_entry(&entry);
        let block = encode_directory_block(1, &encoded, 128);
        let (entries, bytes) = decode_directory_block(&block).expect("valid");
        assert_eq!((entries, bytes), (vec![entry], encoded));
        let mut damaged = block.clone();
        damaged[DIRECTORY_HEADER_BYTES] ^= 1;
        assert!(decode_directory_block(&damaged).is_err());
        assert!(decode_directory_block(&block[..10]).is_err());
        let anchor = Anchor {
            oldest: 42,
            page_bytes: 128,
            log_blocks: 16,
            directory_blocks: 4,
        };
        assert_eq!(decode_anchor(&encode_anchor(&anchor)), Ok(anchor));
        let mut damaged = encode_anchor(&anchor);
        damaged[5] ^= 1;
        assert!(decode_anchor(&damaged).is_err());
        assert!(decode_anchor(&encode_anchor(&anchor)[..20]).is_err());
    }
}
