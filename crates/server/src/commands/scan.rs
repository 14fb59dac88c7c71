//! SCAN and DBSIZE, on keys-only snapshot iterators.

use kvssd_device::{IterOptions, IterStart, NamespaceId};

use super::{device_error, parse_i64, NOT_INTEGER};
use crate::glob;
use crate::resp::Reply;
use crate::server::Shared;

/// Keys in the namespace, counted on a keys-only snapshot iterator (exact, O(keys)).
pub(super) fn count_keys(shared: &Shared, namespace: NamespaceId) -> Result<u64, String> {
    shared.cursors.make_room(&shared.device);
    let options = IterOptions {
        start: IterStart::Key(Vec::new()),
        keys_only: true,
        prefetch_degree: 0,
        index_prefetch: true,
    };
    let (iterator, _) = shared
        .device
        .iter_open(0, namespace, options)
        .map_err(|error| device_error(&error))?;
    let mut count = 0u64;
    let result = loop {
        match shared.device.iter_next(0, iterator, 256 << 10) {
            Ok((batch, _)) => {
                count += batch.entries.len() as u64;
                if batch.end {
                    break Ok(count);
                }
            }
            Err(error) => break Err(device_error(&error)),
        }
    };
    let _ = shared.device.iter_close(iterator);
    result
}

/// Keys a SCAN returns at most, whatever COUNT asks.
const SCAN_COUNT_MAX: usize = 10_000;
/// Bytes of keys asked of the iterator per key a SCAN still wants.
const SCAN_BYTES_PER_KEY: usize = 32;
/// Most bytes of keys asked of the iterator at once.
const SCAN_BATCH_BYTES_MAX: usize = 256 << 10;

pub(super) fn scan(
    shared: &Shared,
    namespace: NamespaceId,
    args: &[Vec<u8>],
    reply: &mut Reply<'_>,
) {
    let Some(cursor) = std::str::from_utf8(&args[0])
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    else {
        reply.error("ERR invalid cursor");
        return;
    };
    let mut pattern: Vec<u8> = b"*".to_vec();
    let mut count = 10usize;
    let mut strings_only = true;
    let mut at = 1;
    while at < args.len() {
        let option = args[at].to_ascii_uppercase();
        let Some(value) = args.get(at + 1) else {
            reply.error("ERR syntax error");
            return;
        };
        match option.as_slice() {
            b"MATCH" => pattern = value.clone(),
            b"COUNT" => match parse_i64(value) {
                Some(n) if n >= 1 => count = (n as usize).min(SCAN_COUNT_MAX),
                Some(_) => {
                    reply.error("ERR syntax error");
                    return;
                }
                None => {
                    reply.error(NOT_INTEGER);
                    return;
                }
            },
            // Every value is a string: any other type matches nothing.
            b"TYPE" => strings_only = value.eq_ignore_ascii_case(b"string"),
            _ => {
                reply.error("ERR syntax error");
                return;
            }
        }
        at += 2;
    }
    // The iterator walks the pattern's literal prefix; the rest of the pattern filters.
    let (id, open) = if cursor == 0 {
        shared.cursors.make_room(&shared.device);
        let options = IterOptions {
            start: IterStart::Prefix(glob::literal_prefix(&pattern).to_vec()),
            keys_only: true,
            prefetch_degree: 0,
            index_prefetch: true,
        };
        let iterator = match shared.device.iter_open(0, namespace, options) {
            Ok((iterator, _)) => iterator,
            Err(error) => {
                reply.error(&device_error(&error));
                return;
            }
        };
        let Some(id) = shared.cursors.insert(iterator, namespace) else {
            let _ = shared.device.iter_close(iterator);
            reply.error("ERR the cursor table is unusable");
            return;
        };
        match shared.cursors.take(id) {
            Some(open) => (id, open),
            None => {
                reply.error("ERR the cursor was closed at once: too many scans at the same time");
                return;
            }
        }
    } else {
        match shared.cursors.take(cursor) {
            Some(open) if open.namespace == namespace => (cursor, open),
            Some(open) => {
                shared.cursors.put_back(cursor, open);
                reply.error("ERR the cursor belongs to another database");
                return;
            }
            None => {
                reply.error("ERR invalid cursor: unknown or expired (idle scans are closed); start again from 0");
                return;
            }
        }
    };
    // Exactly COUNT keys are walked (fewer at the end); what the iterator returned beyond them
    // waits in the cursor for the next SCAN.
    let mut open = open;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut walked = 0usize;
    while walked < count {
        let Some(key) = open.buffered.pop_front() else {
            if open.end {
                break;
            }
            let budget = ((count - walked) * SCAN_BYTES_PER_KEY).min(SCAN_BATCH_BYTES_MAX);
            match shared.device.iter_next(0, open.iterator, budget) {
                Ok((batch, _)) => {
                    open.end = batch.end;
                    open.buffered
                        .extend(batch.entries.into_iter().map(|entry| entry.key));
                }
                Err(error) => {
                    let _ = shared.device.iter_close(open.iterator);
                    reply.error(&device_error(&error));
                    return;
                }
            }
            continue;
        };
        walked += 1;
        if strings_only && glob::matches(&pattern, &key) {
            keys.push(key);
        }
    }
    let end = open.end && open.buffered.is_empty();
    reply.array(2);
    if end {
        let _ = shared.device.iter_close(open.iterator);
        reply.bulk(b"0");
    } else {
        shared.cursors.put_back(id, open);
        reply.bulk(id.to_string().as_bytes());
    }
    reply.array(keys.len());
    for key in &keys {
        reply.bulk(key);
    }
}
