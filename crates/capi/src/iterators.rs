//! Iterators over key groups: the 4-byte bitmask filter as OpenMPDK v1.6.0 applies it, the
//! iterator buffer layout it fills, and the table of (at most 16) open iterators of a device.
//!
//! **The filter.** `kvs_key_group_filter` holds `bitmask[4]` and `bit_pattern[4]`. OpenMPDK packs
//! each into a 32-bit number with byte 0 as the most significant byte, accepts only masks whose
//! set bits are leading (contiguous from the top), and then compares the mask with the key's first
//! four bytes read as a little-endian number: a key matches when `(K & mask) == (pattern & mask)`
//! with `K = key[0] | key[1] << 8 | key[2] << 16 | key[3] << 24`. So `bitmask[0]` lines up with
//! `key[3]`, not `key[0]` as the specification's picture suggests. A mask of 0 matches every key.
//!
//! **The buffer.** Each entry is `[u32 key length][key]`, and for a key-and-value iterator
//! `[u32 value length][value]` after it, packed without padding, little-endian; `size` returns
//! the bytes used and `end` is set on the batch after which nothing remains. This is what
//! OpenMPDK's emulator writes with variable-length keys and what its driver makes of the device's
//! buffer.
//!
//! **What an iterator sees.** It iterates a snapshot of its key space taken when it was created
//! (later stores and deletes do not show), in ascending byte order of keys.

use std::collections::VecDeque;

use kvssd_device::{Device, IterEntry, IterOptions, IterStart, IteratorId, NamespaceId};
use kvssd_flash::SimTime;

use crate::errors::result_of;
use crate::ffi::{
    KvsKeyGroupFilter, KvsResult, KVS_ERR_BUFFER_SMALL, KVS_ERR_ITERATOR_FILTER_INVALID,
    KVS_ERR_ITERATOR_MAX, KVS_ERR_ITERATOR_NOT_EXIST, KVS_ERR_ITERATOR_OPEN,
    KVS_MAX_ITERATE_HANDLE,
};

/// Bytes the device is asked for per batch while filling a buffer.
const DEVICE_BATCH_BYTES: usize = 32 * 1024;
/// Values a key-and-value iterator keeps reading ahead (the device's prefetch degree).
const VALUE_PREFETCH_DEGREE: usize = 8;
/// Bytes of each length field in the buffer.
const LENGTH_FIELD_BYTES: usize = 4;

/// A key-group filter, checked and packed as OpenMPDK does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyGroup {
    mask: u32,
    pattern: u32,
}

impl KeyGroup {
    /// Packs and checks a filter: `KVS_ERR_ITERATOR_FILTER_INVALID` unless the mask's set bits
    /// are leading.
    pub fn new(filter: &KvsKeyGroupFilter) -> Result<KeyGroup, KvsResult> {
        let mask = u32::from_be_bytes(filter.bitmask);
        let pattern = u32::from_be_bytes(filter.bit_pattern);
        if mask.leading_ones() + mask.trailing_zeros() != 32 {
            return Err(KVS_ERR_ITERATOR_FILTER_INVALID);
        }
        Ok(KeyGroup { mask, pattern })
    }

    /// Whether a key is in the group (a key shorter than four bytes reads as zero-padded).
    pub fn matches(&self, key: &[u8]) -> bool {
        let mut head = [0u8; 4];
        let len = key.len().min(4);
        head[..len].copy_from_slice(&key[..len]);
        (u32::from_le_bytes(head) & self.mask) == (self.pattern & self.mask)
    }

    /// The byte prefix every key of the group has, when the mask covers all four bytes (then
    /// the device can seek to it instead of scanning).
    fn prefix(&self) -> Option<Vec<u8>> {
        (self.mask == u32::MAX).then(|| self.pattern.to_le_bytes().to_vec())
    }
}

/// One open iterator.
struct OpenIterator {
    key_space: usize,
    filter: KvsKeyGroupFilter,
    group: KeyGroup,
    with_values: bool,
    device_iterator: IteratorId,
    /// Entries read from the device that did not fit the caller's last buffer.
    pending: VecDeque<IterEntry>,
    device_end: bool,
}

/// The iterators open on one device, by handle (1 to 16).
#[derive(Default)]
pub struct IteratorTable {
    slots: [Option<OpenIterator>; KVS_MAX_ITERATE_HANDLE],
}

/// What one `kvs_iterate_next` produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filled {
    /// Entries written.
    pub entries: u32,
    /// Bytes written.
    pub bytes: u32,
    /// Whether nothing remains.
    pub end: bool,
}

fn entry_bytes(entry: &IterEntry, with_values: bool) -> usize {
    let mut bytes = LENGTH_FIELD_BYTES + entry.key.len();
    if with_values {
        bytes += LENGTH_FIELD_BYTES + entry.value_len;
    }
    bytes
}

impl IteratorTable {
    /// Opens an iterator over a snapshot of a key space. The same filter open on the same key
    /// space is `KVS_ERR_ITERATOR_OPEN` (with that iterator's handle, as OpenMPDK gives it).
    pub fn create(
        &mut self,
        device: &Device,
        at: SimTime,
        key_space: usize,
        namespace: NamespaceId,
        filter: KvsKeyGroupFilter,
        with_values: bool,
    ) -> (Result<u8, (KvsResult, u8)>, SimTime) {
        let group = match KeyGroup::new(&filter) {
            Ok(group) => group,
            Err(code) => return (Err((code, 0)), at),
        };
        for (index, slot) in self.slots.iter().enumerate() {
            if let Some(open) = slot {
                if open.key_space == key_space && open.filter == filter {
                    return (Err((KVS_ERR_ITERATOR_OPEN, index as u8 + 1)), at);
                }
            }
        }
        let Some(index) = self.slots.iter().position(Option::is_none) else {
            return (Err((KVS_ERR_ITERATOR_MAX, 0)), at);
        };
        let start = match group.prefix() {
            Some(prefix) => IterStart::Prefix(prefix),
            None => IterStart::Key(Vec::new()),
        };
        let mut options = IterOptions::new(
            start,
            if with_values {
                VALUE_PREFETCH_DEGREE
            } else {
                0
            },
        );
        options.keys_only = !with_values;
        let (device_iterator, t) = match device.iter_open(at, namespace, options) {
            Ok(opened) => opened,
            Err(error) => return (Err((result_of(&error), 0)), at),
        };
        self.slots[index] = Some(OpenIterator {
            key_space,
            filter,
            group,
            with_values,
            device_iterator,
            pending: VecDeque::new(),
            device_end: false,
        });
        (Ok(index as u8 + 1), t)
    }

    fn slot(
        &mut self,
        key_space: usize,
        handle: u8,
    ) -> Result<&mut Option<OpenIterator>, KvsResult> {
        let index = usize::from(handle)
            .checked_sub(1)
            .filter(|&index| index < KVS_MAX_ITERATE_HANDLE)
            .ok_or(KVS_ERR_ITERATOR_NOT_EXIST)?;
        let slot = &mut self.slots[index];
        match slot {
            Some(open) if open.key_space == key_space => Ok(slot),
            _ => Err(KVS_ERR_ITERATOR_NOT_EXIST),
        }
    }

    /// Closes an iterator of a key space.
    pub fn delete(
        &mut self,
        device: &Device,
        key_space: usize,
        handle: u8,
    ) -> Result<(), KvsResult> {
        let slot = self.slot(key_space, handle)?;
        if let Some(open) = slot.take() {
            // The device may have closed it already (its namespace was deleted).
            let _ = device.iter_close(open.device_iterator);
        }
        Ok(())
    }

    /// Closes every iterator of a key space (it is being closed or deleted).
    pub fn close_key_space(&mut self, device: &Device, key_space: usize) {
        for slot in &mut self.slots {
            if slot
                .as_ref()
                .is_some_and(|open| open.key_space == key_space)
            {
                if let Some(open) = slot.take() {
                    let _ = device.iter_close(open.device_iterator);
                }
            }
        }
    }

    /// Closes every iterator (the device is being closed).
    pub fn close_all(&mut self, device: &Device) {
        for slot in &mut self.slots {
            if let Some(open) = slot.take() {
                let _ = device.iter_close(open.device_iterator);
            }
        }
    }

    /// Fills `buffer` with the next entries of an iterator. An entry too large for an empty
    /// buffer (a key-and-value iterator over a value near 32 KiB or more) is
    /// `KVS_ERR_BUFFER_SMALL`, and the iterator stays on it.
    pub fn next(
        &mut self,
        device: &Device,
        at: SimTime,
        key_space: usize,
        handle: u8,
        buffer: &mut [u8],
    ) -> (Result<Filled, KvsResult>, SimTime) {
        let open = match self.slot(key_space, handle) {
            Ok(Some(open)) => open,
            Ok(None) | Err(_) => return (Err(KVS_ERR_ITERATOR_NOT_EXIST), at),
        };
        let mut t = at;
        let mut filled = Filled {
            entries: 0,
            bytes: 0,
            end: false,
        };
        let mut position = 0usize;
        loop {
            while let Some(entry) = open.pending.front() {
                let bytes = entry_bytes(entry, open.with_values);
                if position + bytes > buffer.len() {
                    if filled.entries == 0 {
                        return (Err(KVS_ERR_BUFFER_SMALL), t);
                    }
                    filled.bytes = position as u32;
                    return (Ok(filled), t);
                }
                write_entry(
                    &mut buffer[position..position + bytes],
                    entry,
                    open.with_values,
                );
                position += bytes;
                filled.entries += 1;
                open.pending.pop_front();
            }
            if open.device_end {
                filled.bytes = position as u32;
                filled.end = true;
                return (Ok(filled), t);
            }
            match device.iter_next(t, open.device_iterator, DEVICE_BATCH_BYTES) {
                Ok((batch, done)) => {
                    t = done;
                    open.device_end = batch.end;
                    let group = open.group;
                    open.pending.extend(
                        batch
                            .entries
                            .into_iter()
                            .filter(|entry| group.matches(&entry.key)),
                    );
                }
                Err(error) => return (Err(result_of(&error)), t),
            }
        }
    }
}

fn write_entry(out: &mut [u8], entry: &IterEntry, with_values: bool) {
    let key_end = LENGTH_FIELD_BYTES + entry.key.len();
    out[..LENGTH_FIELD_BYTES].copy_from_slice(&(entry.key.len() as u32).to_le_bytes());
    out[LENGTH_FIELD_BYTES..key_end].copy_from_slice(&entry.key);
    if with_values {
        let value = entry.value.as_deref().unwrap_or(&[]);
        out[key_end..key_end + LENGTH_FIELD_BYTES]
            .copy_from_slice(&(value.len() as u32).to_le_bytes());
        out[key_end + LENGTH_FIELD_BYTES..key_end + LENGTH_FIELD_BYTES + value.len()]
            .copy_from_slice(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(bitmask: [u8; 4], bit_pattern: [u8; 4]) -> Result<KeyGroup, KvsResult> {
        KeyGroup::new(&KvsKeyGroupFilter {
            bitmask,
            bit_pattern,
        })
    }

    #[test]
    fn key_group_masks_must_be_leading_ones() {
        for mask in [[0, 0, 0, 0], [0xff, 0, 0, 0], [0xff, 0xf0, 0, 0], [0xff; 4]] {
            assert!(group(mask, [0; 4]).is_ok(), "{mask:?}");
        }
        for mask in [
            [0, 0xff, 0, 0],
            [0xff, 0, 0xff, 0],
            [0x7f, 0, 0, 0],
            [0, 0, 0, 1],
        ] {
            assert_eq!(
                group(mask, [0; 4]),
                Err(KVS_ERR_ITERATOR_FILTER_INVALID),
                "{mask:?}"
            );
        }
    }

    #[test]
    fn key_group_compares_the_key_little_endian_as_openmpdk_does() {
        // bitmask[0] covers key[3]: the pattern's first byte must be the key's fourth.
        let first_byte = group([0xff, 0, 0, 0], [b'z', 0, 0, 0]).expect("valid");
        assert!(first_byte.matches(b"abcz-tail"));
        assert!(!first_byte.matches(b"zbcd"));
        let all = group([0; 4], [1, 2, 3, 4]).expect("valid");
        assert!(all.matches(b"anything"));
        let full = group([0xff; 4], *b"dcba").expect("valid");
        assert!(full.matches(b"abcd1234"));
        assert_eq!(full.prefix(), Some(b"abcd".to_vec()));
        assert!(!full.matches(b"abce"));
        // A short key reads as zero-padded.
        let short = group([0xff, 0, 0, 0], [0, 0, 0, 0]).expect("valid");
        assert!(short.matches(b"ab"));
    }

    #[test]
    fn buffer_entries_are_length_prefixed_little_endian() {
        let entry = IterEntry {
            key: b"key1".to_vec(),
            value: Some(b"vv".to_vec()),
            value_len: 2,
        };
        let mut out = vec![0u8; entry_bytes(&entry, true)];
        write_entry(&mut out, &entry, true);
        assert_eq!(out, b"\x04\0\0\0key1\x02\0\0\0vv");
        let mut out = vec![0u8; entry_bytes(&entry, false)];
        write_entry(&mut out, &entry, false);
        assert_eq!(out, b"\x04\0\0\0key1");
    }
}
