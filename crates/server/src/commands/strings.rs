//! The string commands, each mapped onto the device's point commands and atomic batches.

use kvssd_device::{BatchOp, ByteRange, DeviceError, NamespaceId, StoreMode};

use super::{device_error, lossy, parse_i64, valid_key, Outcome, DONE, NOT_INTEGER};
use crate::resp::Reply;
use crate::server::Shared;
use crate::REPLY_BYTES_MAX;

pub(super) fn get(shared: &Shared, namespace: NamespaceId, key: &[u8], reply: &mut Reply<'_>) {
    if !valid_key(key) {
        reply.null();
        return;
    }
    match shared.device.retrieve(0, namespace, key, None) {
        Ok((Some(found), _)) => reply.bulk(&found.value),
        Ok((None, _)) => reply.null(),
        Err(error) => reply.error(&device_error(&error)),
    }
}

/// MGET: `retrieve` per key. The reply is built whole before it is sent, so it is bounded: a
/// client naming one large value a thousand times gets an error, not gigabytes of server memory.
pub(super) fn mget(
    shared: &Shared,
    namespace: NamespaceId,
    keys: &[Vec<u8>],
    reply: &mut Reply<'_>,
) {
    let mut body = Vec::new();
    for key in keys {
        get(shared, namespace, key, &mut Reply(&mut body));
        if body.len() > REPLY_BYTES_MAX {
            reply.error(&format!(
                "ERR the MGET reply would exceed {REPLY_BYTES_MAX} bytes: ask for fewer keys"
            ));
            return;
        }
    }
    reply.array(keys.len());
    reply.0.extend_from_slice(&body);
}

pub(super) fn present(shared: &Shared, namespace: NamespaceId, key: &[u8]) -> Result<bool, String> {
    if !valid_key(key) {
        return Ok(false);
    }
    let (answers, _) = shared
        .device
        .exist(0, namespace, &[key])
        .map_err(|error| device_error(&error))?;
    Ok(answers.first().copied().unwrap_or(false))
}

pub(super) fn set(
    shared: &Shared,
    namespace: NamespaceId,
    args: &[Vec<u8>],
    reply: &mut Reply<'_>,
) -> Outcome {
    let mut mode = StoreMode::Upsert;
    for option in &args[2..] {
        let upper = option.to_ascii_uppercase();
        match upper.as_slice() {
            b"NX" if mode != StoreMode::UpdateOnly => mode = StoreMode::InsertOnly,
            b"XX" if mode != StoreMode::InsertOnly => mode = StoreMode::UpdateOnly,
            // There is no expiry to keep.
            b"KEEPTTL" => {}
            b"EX" | b"PX" | b"EXAT" | b"PXAT" => {
                reply.error(&format!(
                    "ERR SET {} is not supported: kvssd keeps no expiry times",
                    lossy(&upper)
                ));
                return DONE;
            }
            b"GET" => {
                reply.error("ERR SET GET is not supported: kvssd cannot read and write a key in one command");
                return DONE;
            }
            _ => {
                reply.error("ERR syntax error");
                return DONE;
            }
        }
    }
    match shared.device.store(0, namespace, &args[0], &args[1], mode) {
        Ok(_) => {
            reply.ok();
            DONE
        }
        // NX on a present key, XX on an absent one: nothing stored, the null reply.
        Err(DeviceError::KeyExists | DeviceError::KeyMissing) => {
            reply.null();
            DONE
        }
        Err(error) => {
            reply.error(&device_error(&error));
            DONE
        }
    }
}

/// The byte range `start..=end` (Redis indexes: negative counts from the end) of a value of
/// `len` bytes, clamped; `None` if empty.
fn clamp_range(start: i64, end: i64, len: usize) -> Option<ByteRange> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end.min(len - 1) };
    if len == 0 || start > end || start >= len {
        return None;
    }
    Some(ByteRange {
        offset: start as usize,
        len: (end - start + 1) as usize,
    })
}

pub(super) fn getrange(
    shared: &Shared,
    namespace: NamespaceId,
    args: &[Vec<u8>],
    reply: &mut Reply<'_>,
) {
    let (Some(start), Some(end)) = (parse_i64(&args[1]), parse_i64(&args[2])) else {
        reply.error(NOT_INTEGER);
        return;
    };
    let key = &args[0];
    if !valid_key(key) {
        reply.bulk(b"");
        return;
    }
    // The value's length first (a range of nothing transfers no value bytes), then the range.
    let len = match shared
        .device
        .retrieve(0, namespace, key, Some(ByteRange { offset: 0, len: 0 }))
    {
        Ok((Some(found), _)) => found.value_len,
        Ok((None, _)) => {
            reply.bulk(b"");
            return;
        }
        Err(error) => {
            reply.error(&device_error(&error));
            return;
        }
    };
    let Some(range) = clamp_range(start, end, len) else {
        reply.bulk(b"");
        return;
    };
    match shared.device.retrieve(0, namespace, key, Some(range)) {
        Ok((Some(found), _)) => reply.bulk(&found.value),
        // Deleted between the two reads.
        Ok((None, _)) => reply.bulk(b""),
        // Overwritten by a shorter value between the two reads: answer from the new value.
        Err(DeviceError::RangeOutsideValue { .. }) => {
            match shared.device.retrieve(0, namespace, key, None) {
                Ok((Some(found), _)) => match clamp_range(start, end, found.value.len()) {
                    Some(range) => reply.bulk(&found.value[range.offset..range.offset + range.len]),
                    None => reply.bulk(b""),
                },
                Ok((None, _)) => reply.bulk(b""),
                Err(error) => reply.error(&device_error(&error)),
            }
        }
        Err(error) => reply.error(&device_error(&error)),
    }
}

pub(super) fn strlen(shared: &Shared, namespace: NamespaceId, key: &[u8], reply: &mut Reply<'_>) {
    if !valid_key(key) {
        reply.integer(0);
        return;
    }
    match shared
        .device
        .retrieve(0, namespace, key, Some(ByteRange { offset: 0, len: 0 }))
    {
        Ok((Some(found), _)) => reply.integer(found.value_len as i64),
        Ok((None, _)) => reply.integer(0),
        Err(error) => reply.error(&device_error(&error)),
    }
}

pub(super) fn exists(
    shared: &Shared,
    namespace: NamespaceId,
    keys: &[Vec<u8>],
    reply: &mut Reply<'_>,
) {
    let valid: Vec<&[u8]> = keys
        .iter()
        .map(Vec::as_slice)
        .filter(|key| valid_key(key))
        .collect();
    match shared.device.exist(0, namespace, &valid) {
        Ok((answers, _)) => {
            reply.integer(answers.iter().filter(|&&present| present).count() as i64)
        }
        Err(error) => reply.error(&device_error(&error)),
    }
}

/// DEL: the keys present are deleted in one atomic batch; the reply counts them.
pub(super) fn delete(
    shared: &Shared,
    namespace: NamespaceId,
    keys: &[Vec<u8>],
    reply: &mut Reply<'_>,
) -> Outcome {
    let mut unique: Vec<&[u8]> = keys
        .iter()
        .map(Vec::as_slice)
        .filter(|key| valid_key(key))
        .collect();
    unique.sort_unstable();
    unique.dedup();
    let answers = match shared.device.exist(0, namespace, &unique) {
        Ok((answers, _)) => answers,
        Err(error) => {
            reply.error(&device_error(&error));
            return DONE;
        }
    };
    let operations: Vec<BatchOp> = unique
        .iter()
        .zip(answers)
        .filter(|(_, present)| *present)
        .map(|(key, _)| BatchOp::Delete {
            namespace,
            key: key.to_vec(),
        })
        .collect();
    if operations.is_empty() {
        reply.integer(0);
        return DONE;
    }
    match shared.device.batch(0, &operations) {
        Ok(_) => {
            reply.integer(operations.len() as i64);
            DONE
        }
        Err(error) => {
            reply.error(&device_error(&error));
            DONE
        }
    }
}

/// MSET and MSETNX: one atomic batch (upserts, or insert-only stores all of which must succeed).
pub(super) fn mset(
    shared: &Shared,
    namespace: NamespaceId,
    args: &[Vec<u8>],
    insert_only: bool,
    reply: &mut Reply<'_>,
) -> Outcome {
    if args.len() % 2 != 0 {
        let name = if insert_only { "msetnx" } else { "mset" };
        reply.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        return DONE;
    }
    let mode = if insert_only {
        StoreMode::InsertOnly
    } else {
        StoreMode::Upsert
    };
    // A key given twice in MSETNX: Redis checks presence before setting any, so the second
    // occurrence is not refused for the first. Insert-only applies to the first; later ones of
    // the same key overwrite it.
    let mut seen: std::collections::BTreeSet<&[u8]> = std::collections::BTreeSet::new();
    let operations: Vec<BatchOp> = args
        .chunks_exact(2)
        .map(|pair| {
            let first = seen.insert(pair[0].as_slice());
            BatchOp::Store {
                namespace,
                key: pair[0].clone(),
                value: pair[1].clone(),
                mode: if first { mode } else { StoreMode::Upsert },
            }
        })
        .collect();
    let unwrap = |error: DeviceError| match error {
        DeviceError::BatchOperation { source, .. } => *source,
        other => other,
    };
    match shared.device.batch(0, &operations).map_err(unwrap) {
        Ok(_) => {
            if insert_only {
                reply.integer(1);
            } else {
                reply.ok();
            }
            DONE
        }
        Err(DeviceError::KeyExists) if insert_only => {
            reply.integer(0);
            DONE
        }
        Err(error) => {
            reply.error(&device_error(&error));
            DONE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_getrange_clamps_like_redis() {
        // "This is a string" (16 bytes), the examples of Redis's GETRANGE page.
        let range = |start, end| clamp_range(start, end, 16).map(|r| (r.offset, r.len));
        assert_eq!(range(0, 3), Some((0, 4)));
        assert_eq!(range(-3, -1), Some((13, 3)));
        assert_eq!(range(0, -1), Some((0, 16)));
        assert_eq!(range(10, 100), Some((10, 6)));
        assert_eq!(range(5, 3), None);
        assert_eq!(range(20, 30), None);
        assert_eq!(range(-100, 2), Some((0, 3)));
        assert_eq!(clamp_range(0, -1, 0), None);
    }
}
