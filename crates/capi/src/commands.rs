//! The key-value commands on a device, after their arguments were checked: what the sync and
//! async entry points share. Each runs at the device's simulated clock ([`OpenDevice::command`]).
//!
//! Every command that writes a key takes that key's stripe lock, so the read-modify-write ones
//! (append, retrieve-and-delete, a delete that reports a missing key) are atomic with respect to
//! every other command of this library; each writes with one device command, which is atomic
//! across crashes.

use std::time::Instant;

use kvssd_device::{Device, IterOptions, IterStart, NamespaceId, StoreMode};
use kvssd_flash::SimTime;

use crate::clock::Timing;
use crate::errors::result_of;
use crate::ffi::*;
use crate::state::OpenDevice;

/// How a store treats the key's presence (`kvs_store_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// Insert or overwrite.
    Post,
    /// Overwrite only.
    UpdateOnly,
    /// Insert only.
    NoOverwrite,
    /// Append to the value, or insert.
    Append,
}

impl StoreKind {
    /// The kind a `st_type` names; anything else is `KVS_ERR_OPTION_INVALID`.
    pub fn from_code(code: u32) -> Result<StoreKind, KvsResult> {
        match code {
            KVS_STORE_POST => Ok(StoreKind::Post),
            KVS_STORE_UPDATE_ONLY => Ok(StoreKind::UpdateOnly),
            KVS_STORE_NOOVERWRITE => Ok(StoreKind::NoOverwrite),
            KVS_STORE_APPEND => Ok(StoreKind::Append),
            _ => Err(KVS_ERR_OPTION_INVALID),
        }
    }
}

/// A device error as the command's result, completing when it was issued.
fn refused<T>(error: &kvssd_device::DeviceError, at: SimTime) -> (Result<T, KvsResult>, SimTime) {
    (Err(result_of(error)), at)
}

/// Stores a pair.
pub fn store(
    open: &OpenDevice,
    submitted: Instant,
    namespace: NamespaceId,
    key: &[u8],
    value: &[u8],
    kind: StoreKind,
) -> (KvsResult, Timing) {
    let (result, timing) = open.command(submitted, |device, at| {
        let _locked = open.key_lock(namespace, key);
        let mode = match kind {
            StoreKind::Post => StoreMode::Upsert,
            StoreKind::UpdateOnly => StoreMode::UpdateOnly,
            StoreKind::NoOverwrite => StoreMode::InsertOnly,
            StoreKind::Append => return append(open, device, at, namespace, key, value),
        };
        match device.store(at, namespace, key, value, mode) {
            Ok(done) => (Ok(()), done),
            Err(error) => refused(&error, at),
        }
    });
    (result.err().unwrap_or(KVS_SUCCESS), timing)
}

/// Appends under the key's lock: the old value and the new bytes are stored as one value.
fn append(
    open: &OpenDevice,
    device: &Device,
    at: SimTime,
    namespace: NamespaceId,
    key: &[u8],
    value: &[u8],
) -> (Result<(), KvsResult>, SimTime) {
    let (found, t) = match device.retrieve(at, namespace, key, None) {
        Ok(found) => found,
        Err(error) => return refused(&error, at),
    };
    let mut joined = found.map(|found| found.value).unwrap_or_default();
    if joined.len() + value.len() > open.value_bytes_max {
        return (Err(KVS_ERR_VALUE_LENGTH_INVALID), t);
    }
    joined.extend_from_slice(value);
    match device.store(t, namespace, key, &joined, StoreMode::Upsert) {
        Ok(done) => (Ok(()), done),
        Err(error) => refused(&error, t),
    }
}

/// What a retrieve copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retrieved {
    /// Bytes copied into the buffer.
    pub copied: u32,
    /// The value's bytes from the offset on.
    pub from_offset: u32,
}

/// Retrieves a value from `offset` into `buffer`: `KVS_ERR_BUFFER_SMALL` (with as much as fits)
/// when the rest of the value does not fit. With `delete`, a value that was retrieved whole is
/// then deleted; one that did not fit is left in place.
pub fn retrieve(
    open: &OpenDevice,
    submitted: Instant,
    namespace: NamespaceId,
    key: &[u8],
    offset: u32,
    delete: bool,
    buffer: &mut [u8],
) -> (KvsResult, Option<Retrieved>, Timing) {
    let (result, timing) = open.command(submitted, |device, at| {
        let _locked = delete.then(|| open.key_lock(namespace, key));
        let (found, t) = match device.retrieve(at, namespace, key, None) {
            Ok(found) => found,
            Err(error) => return refused(&error, at),
        };
        let Some(found) = found else {
            return (Err(KVS_ERR_KEY_NOT_EXIST), t);
        };
        let stored = found.value.len();
        let offset = offset as usize;
        if offset != 0 && offset >= stored {
            return (Err(KVS_ERR_VALUE_OFFSET_INVALID), t);
        }
        let rest = &found.value[offset..];
        let copied = rest.len().min(buffer.len());
        buffer[..copied].copy_from_slice(&rest[..copied]);
        let retrieved = Retrieved {
            copied: copied as u32,
            from_offset: rest.len() as u32,
        };
        if copied < rest.len() {
            return (Ok((KVS_ERR_BUFFER_SMALL, retrieved)), t);
        }
        if delete {
            return match device.delete(t, namespace, key) {
                Ok(done) => (Ok((KVS_SUCCESS, retrieved)), done),
                Err(error) => refused(&error, t),
            };
        }
        (Ok((KVS_SUCCESS, retrieved)), t)
    });
    match result {
        Ok((code, retrieved)) => (code, Some(retrieved), timing),
        Err(code) => (code, None, timing),
    }
}

/// Deletes a key; with `error_if_missing`, an absent key is `KVS_ERR_KEY_NOT_EXIST`.
pub fn delete(
    open: &OpenDevice,
    submitted: Instant,
    namespace: NamespaceId,
    key: &[u8],
    error_if_missing: bool,
) -> (KvsResult, Timing) {
    let (result, timing) = open.command(submitted, |device, at| {
        let _locked = open.key_lock(namespace, key);
        let mut t = at;
        if error_if_missing {
            match device.exist(t, namespace, &[key]) {
                Ok((present, done)) => {
                    t = done;
                    if !present.first().copied().unwrap_or(false) {
                        return (Err(KVS_ERR_KEY_NOT_EXIST), t);
                    }
                }
                Err(error) => return refused(&error, t),
            }
        }
        match device.delete(t, namespace, key) {
            Ok(done) => (Ok(()), done),
            Err(error) => refused(&error, t),
        }
    });
    (result.err().unwrap_or(KVS_SUCCESS), timing)
}

/// Whether each key has a value.
pub fn exist(
    open: &OpenDevice,
    submitted: Instant,
    namespace: NamespaceId,
    keys: &[&[u8]],
) -> (Result<Vec<bool>, KvsResult>, Timing) {
    open.command(submitted, |device, at| {
        match device.exist(at, namespace, keys) {
            Ok((present, done)) => (Ok(present), done),
            Err(error) => refused(&error, at),
        }
    })
}

/// Writes existence bits, least significant bit of byte 0 first; returns the bytes written.
pub fn write_exist_bits(present: &[bool], out: &mut [u8]) -> usize {
    let bytes = present.len().div_ceil(8);
    out[..bytes].fill(0);
    for (index, &here) in present.iter().enumerate() {
        if here {
            out[index / 8] |= 1 << (index % 8);
        }
    }
    bytes
}

/// The length of a key's value.
pub fn value_length(
    open: &OpenDevice,
    submitted: Instant,
    namespace: NamespaceId,
    key: &[u8],
) -> (Result<usize, KvsResult>, Timing) {
    open.command(submitted, |device, at| {
        match device.retrieve(at, namespace, key, None) {
            Ok((Some(found), done)) => (Ok(found.value_len), done),
            Ok((None, done)) => (Err(KVS_ERR_KEY_NOT_EXIST), done),
            Err(error) => refused(&error, at),
        }
    })
}

/// Pairs in a namespace, counted on a keys-only snapshot (exact, and as costly as a scan).
pub fn count_pairs(
    open: &OpenDevice,
    submitted: Instant,
    namespace: NamespaceId,
) -> (Result<u64, KvsResult>, Timing) {
    open.command(submitted, |device, at| {
        let mut options = IterOptions::new(IterStart::Key(Vec::new()), 0);
        options.keys_only = true;
        let (iterator, mut t) = match device.iter_open(at, namespace, options) {
            Ok(opened) => opened,
            Err(error) => return refused(&error, at),
        };
        let mut count = 0u64;
        let outcome = loop {
            match device.iter_next(t, iterator, 64 << 10) {
                Ok((batch, done)) => {
                    t = done;
                    count += batch.entries.len() as u64;
                    if batch.end {
                        break Ok(count);
                    }
                }
                Err(error) => break Err(result_of(&error)),
            }
        };
        let _ = device.iter_close(iterator);
        (outcome, t)
    })
}

/// Deletes every pair of a namespace whose key is in `group`, in batches of the device's
/// atomic batch size (each batch all or nothing; the whole is not atomic).
pub fn delete_group(
    open: &OpenDevice,
    submitted: Instant,
    namespace: NamespaceId,
    group: crate::iterators::KeyGroup,
) -> (KvsResult, Timing) {
    let (result, timing) = open.command(submitted, |device, at| {
        let mut options = IterOptions::new(IterStart::Key(Vec::new()), 0);
        options.keys_only = true;
        let (iterator, mut t) = match device.iter_open(at, namespace, options) {
            Ok(opened) => opened,
            Err(error) => return refused(&error, at),
        };
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        let scanned = loop {
            match device.iter_next(t, iterator, 64 << 10) {
                Ok((batch, done)) => {
                    t = done;
                    doomed.extend(
                        batch
                            .entries
                            .into_iter()
                            .map(|entry| entry.key)
                            .filter(|key| group.matches(key)),
                    );
                    if batch.end {
                        break Ok(());
                    }
                }
                Err(error) => break Err(result_of(&error)),
            }
        };
        let _ = device.iter_close(iterator);
        if let Err(code) = scanned {
            return (Err(code), t);
        }
        for chunk in doomed.chunks(kvssd_device::BATCH_OPERATIONS_MAX) {
            let operations: Vec<kvssd_device::BatchOp> = chunk
                .iter()
                .map(|key| kvssd_device::BatchOp::Delete {
                    namespace,
                    key: key.clone(),
                })
                .collect();
            match device.batch(t, &operations) {
                Ok(done) => t = done,
                Err(error) => return refused(&error, t),
            }
        }
        (Ok(()), t)
    });
    (result.err().unwrap_or(KVS_SUCCESS), timing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exist_bits_are_least_significant_first() {
        let mut out = [0xaa_u8; 3];
        let written = write_exist_bits(
            &[true, false, true, false, false, false, false, false, true],
            &mut out,
        );
        assert_eq!(written, 2);
        assert_eq!(out, [0b0000_0101, 0b0000_0001, 0xaa]);
    }

    #[test]
    fn store_kinds_follow_the_header_codes() {
        assert_eq!(StoreKind::from_code(0), Ok(StoreKind::Post));
        assert_eq!(StoreKind::from_code(3), Ok(StoreKind::Append));
        assert_eq!(StoreKind::from_code(4), Err(KVS_ERR_OPTION_INVALID));
    }
}
