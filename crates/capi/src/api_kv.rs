//! Entry points for pairs: store, retrieve, delete, exist and key information, sync and async.
//!
//! Checks run in the caller's thread in OpenMPDK's order (key space handle, NULL arguments, key
//! length, key bytes, value length, offset alignment, value bytes), so a bad argument is returned
//! by the call itself, never through a callback.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

use crate::commands::{self, StoreKind};
use crate::ffi::*;
use crate::guard::{bytes_at, bytes_at_mut, flag, guard, key_bytes};
use crate::queue::{submit, Notice};
use crate::state::{self, KeySpace};

/// A store's checked arguments.
struct StoreArguments {
    key_space: Arc<KeySpace>,
    key: Vec<u8>,
    value: Vec<u8>,
    kind: StoreKind,
}

/// Checks a store's arguments; `opt` NULL means `KVS_STORE_POST`.
///
/// # Safety
/// Each pointer is NULL or valid for what it points to, as the API describes.
unsafe fn store_arguments(
    ks_hd: *mut c_void,
    key: *mut KvsKey,
    value: *mut KvsValue,
    opt: *mut KvsOptionStore,
) -> Result<StoreArguments, KvsResult> {
    let key_space = state::key_space(ks_hd)?;
    if key.is_null() || value.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    // SAFETY: non-NULL `kvs_key` by the caller's contract.
    let key = unsafe { key_bytes(key) }?;
    // SAFETY: non-NULL `kvs_value` by the caller's contract.
    let value = unsafe { &*value };
    let length = value.length as usize;
    if length > key_space.device.value_bytes_max {
        return Err(KVS_ERR_VALUE_LENGTH_INVALID);
    }
    if value.offset % KVS_ALIGNMENT_UNIT != 0 {
        return Err(KVS_ERR_VALUE_OFFSET_MISALIGNED);
    }
    if value.offset != 0 {
        // A store writes whole values.
        return Err(KVS_ERR_VALUE_OFFSET_INVALID);
    }
    if value.value.is_null() && length > 0 {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    // SAFETY: NULL or a valid `kvs_option_store` by the caller's contract.
    let kind = match unsafe { opt.as_ref() } {
        None => StoreKind::Post,
        Some(option) => {
            // SAFETY: NULL or a valid `kvs_association`.
            if let Some(association) = unsafe { option.assoc.as_ref() } {
                // A stream id is a placement hint; the device places by namespace and log, so
                // it is accepted and has no effect.
                if association.assoc_type != KVS_NOASSOCIATION
                    && association.assoc_type != KVS_ASSOCIATION_STREAM
                {
                    return Err(KVS_ERR_OPTION_INVALID);
                }
            }
            StoreKind::from_code(option.st_type)?
        }
    };
    Ok(StoreArguments {
        // SAFETY: `value.value` holds `length` bytes by the caller's contract (checked non-NULL
        // when `length` > 0).
        value: unsafe { bytes_at(value.value, length) }.to_vec(),
        key: key.to_vec(),
        key_space,
        kind,
    })
}

/// Stores a pair.
///
/// # Safety
/// `key`, `value` and `opt` are NULL or valid, their buffers readable for their lengths.
#[no_mangle]
pub unsafe extern "C" fn kvs_store_kvp(
    ks_hd: *mut c_void,
    key: *mut KvsKey,
    value: *mut KvsValue,
    opt: *mut KvsOptionStore,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        // SAFETY: the caller's contract.
        let arguments = match unsafe { store_arguments(ks_hd, key, value, opt) } {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        let device = &arguments.key_space.device;
        let (result, timing) = commands::store(
            device,
            submitted,
            arguments.key_space.namespace,
            &arguments.key,
            &arguments.value,
            arguments.kind,
        );
        device.finish_sync(&timing);
        result
    })
}

/// Queues a store; `post_fn` is called when it completes.
///
/// # Safety
/// As [`kvs_store_kvp`]; `key`, `value` and `opt` stay valid until `post_fn` is called.
#[no_mangle]
pub unsafe extern "C" fn kvs_store_kvp_async(
    ks_hd: *mut c_void,
    key: *mut KvsKey,
    value: *mut KvsValue,
    opt: *mut KvsOptionStore,
    private1: *mut c_void,
    private2: *mut c_void,
    post_fn: KvsPostprocessFunction,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        // SAFETY: the caller's contract.
        let arguments = match unsafe { store_arguments(ks_hd, key, value, opt) } {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        let Some(post_fn) = post_fn else {
            return KVS_ERR_PARAM_INVALID;
        };
        let notice = Notice {
            key: key as usize,
            value: value as usize,
            option: opt as usize,
            ..Notice::new(KVS_CMD_STORE, ks_hd, private1, private2, post_fn)
        };
        let key_space = Arc::clone(&arguments.key_space);
        let run = move || {
            commands::store(
                &arguments.key_space.device,
                submitted,
                arguments.key_space.namespace,
                &arguments.key,
                &arguments.value,
                arguments.kind,
            )
        };
        submit(&key_space, run, notice, submitted)
    })
}

/// A retrieve's checked arguments.
struct RetrieveArguments {
    key_space: Arc<KeySpace>,
    key: Vec<u8>,
    delete: bool,
    offset: u32,
    buffer: usize,
    buffer_len: usize,
}

/// Checks a retrieve's arguments; `opt` NULL means no retrieve-and-delete.
///
/// # Safety
/// Each pointer is NULL or valid, as the API describes.
unsafe fn retrieve_arguments(
    ks_hd: *mut c_void,
    key: *mut KvsKey,
    opt: *mut KvsOptionRetrieve,
    value: *mut KvsValue,
) -> Result<RetrieveArguments, KvsResult> {
    let key_space = state::key_space(ks_hd)?;
    if key.is_null() || value.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    // SAFETY: non-NULL `kvs_key` by the caller's contract.
    let key = unsafe { key_bytes(key) }?;
    // SAFETY: non-NULL `kvs_value` by the caller's contract.
    let value = unsafe { &*value };
    if value.offset % KVS_ALIGNMENT_UNIT != 0 {
        return Err(KVS_ERR_VALUE_OFFSET_MISALIGNED);
    }
    if value.value.is_null() && value.length > 0 {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    // SAFETY: NULL or a valid `kvs_option_retrieve`, whose first byte is its `bool`.
    let delete = unsafe { flag(opt.cast::<u8>()) };
    Ok(RetrieveArguments {
        key_space,
        key: key.to_vec(),
        delete,
        offset: value.offset,
        buffer: value.value as usize,
        buffer_len: value.length as usize,
    })
}

/// Runs a checked retrieve and writes `value`'s outputs.
///
/// # Safety
/// `value` is the valid `kvs_value` the arguments came from, its buffer writable and untouched
/// by anyone else until this returns.
unsafe fn run_retrieve(
    arguments: &RetrieveArguments,
    value: *mut KvsValue,
    submitted: Instant,
) -> (KvsResult, crate::clock::Timing) {
    // SAFETY: the caller's contract.
    let buffer = unsafe { bytes_at_mut(arguments.buffer as *mut c_void, arguments.buffer_len) };
    let (result, retrieved, timing) = commands::retrieve(
        &arguments.key_space.device,
        submitted,
        arguments.key_space.namespace,
        &arguments.key,
        arguments.offset,
        arguments.delete,
        buffer,
    );
    if let Some(retrieved) = retrieved {
        // SAFETY: the caller's contract.
        let value = unsafe { &mut *value };
        value.length = retrieved.copied;
        value.actual_value_size = retrieved.from_offset;
    }
    (result, timing)
}

/// Retrieves a value (from `value->offset`, into `value->value` of `value->length` bytes).
///
/// # Safety
/// `key`, `opt` and `value` are NULL or valid; `value->value` holds `value->length` writable
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn kvs_retrieve_kvp(
    ks_hd: *mut c_void,
    key: *mut KvsKey,
    opt: *mut KvsOptionRetrieve,
    value: *mut KvsValue,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        // SAFETY: the caller's contract.
        let arguments = match unsafe { retrieve_arguments(ks_hd, key, opt, value) } {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        // SAFETY: `value` was checked non-NULL; the caller waits for this call.
        let (result, timing) = unsafe { run_retrieve(&arguments, value, submitted) };
        arguments.key_space.device.finish_sync(&timing);
        result
    })
}

/// Queues a retrieve; `post_fn` is called when it completes.
///
/// # Safety
/// As [`kvs_retrieve_kvp`]; `key`, `opt`, `value` and its buffer stay valid and untouched until
/// `post_fn` is called.
#[no_mangle]
pub unsafe extern "C" fn kvs_retrieve_kvp_async(
    ks_hd: *mut c_void,
    key: *mut KvsKey,
    opt: *mut KvsOptionRetrieve,
    private1: *mut c_void,
    private2: *mut c_void,
    value: *mut KvsValue,
    post_fn: KvsPostprocessFunction,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        // SAFETY: the caller's contract.
        let arguments = match unsafe { retrieve_arguments(ks_hd, key, opt, value) } {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        let Some(post_fn) = post_fn else {
            return KVS_ERR_PARAM_INVALID;
        };
        let notice = Notice {
            key: key as usize,
            value: value as usize,
            option: opt as usize,
            ..Notice::new(KVS_CMD_RETRIEVE, ks_hd, private1, private2, post_fn)
        };
        let key_space = Arc::clone(&arguments.key_space);
        let value_address = value as usize;
        let run = move || {
            // SAFETY: the caller keeps `value` and its buffer valid and untouched until the
            // callback, which runs after this.
            unsafe { run_retrieve(&arguments, value_address as *mut KvsValue, submitted) }
        };
        submit(&key_space, run, notice, submitted)
    })
}

/// A delete's checked arguments: the key space, the key and whether absence is an error.
type DeleteArguments = (Arc<KeySpace>, Vec<u8>, bool);

/// Checks a delete's arguments; `opt` NULL means absence is not an error.
///
/// # Safety
/// Each pointer is NULL or valid.
unsafe fn delete_arguments(
    ks_hd: *mut c_void,
    key: *mut KvsKey,
    opt: *mut KvsOptionDelete,
) -> Result<DeleteArguments, KvsResult> {
    let key_space = state::key_space(ks_hd)?;
    if key.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    // SAFETY: non-NULL `kvs_key` by the caller's contract.
    let key = unsafe { key_bytes(key) }?.to_vec();
    // SAFETY: NULL or a valid `kvs_option_delete`, whose first byte is its `bool`.
    let error_if_missing = unsafe { flag(opt.cast::<u8>()) };
    Ok((key_space, key, error_if_missing))
}

/// Deletes a pair.
///
/// # Safety
/// `key` and `opt` are NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn kvs_delete_kvp(
    ks_hd: *mut c_void,
    key: *mut KvsKey,
    opt: *mut KvsOptionDelete,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        // SAFETY: the caller's contract.
        let (key_space, key, error_if_missing) = match unsafe { delete_arguments(ks_hd, key, opt) }
        {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        let device = &key_space.device;
        let (result, timing) = commands::delete(
            device,
            submitted,
            key_space.namespace,
            &key,
            error_if_missing,
        );
        device.finish_sync(&timing);
        result
    })
}

/// Queues a delete; `post_fn` is called when it completes.
///
/// # Safety
/// As [`kvs_delete_kvp`]; `key` and `opt` stay valid until `post_fn` is called.
#[no_mangle]
pub unsafe extern "C" fn kvs_delete_kvp_async(
    ks_hd: *mut c_void,
    key: *mut KvsKey,
    opt: *mut KvsOptionDelete,
    private1: *mut c_void,
    private2: *mut c_void,
    post_fn: KvsPostprocessFunction,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        // SAFETY: the caller's contract.
        let (key_space, key_bytes, error_if_missing) =
            match unsafe { delete_arguments(ks_hd, key, opt) } {
                Ok(arguments) => arguments,
                Err(code) => return code,
            };
        let Some(post_fn) = post_fn else {
            return KVS_ERR_PARAM_INVALID;
        };
        let notice = Notice {
            key: key as usize,
            option: opt as usize,
            ..Notice::new(KVS_CMD_DELETE, ks_hd, private1, private2, post_fn)
        };
        let owner = Arc::clone(&key_space);
        let run = move || {
            commands::delete(
                &owner.device,
                submitted,
                owner.namespace,
                &key_bytes,
                error_if_missing,
            )
        };
        submit(&key_space, run, notice, submitted)
    })
}

/// An exist's checked arguments.
struct ExistArguments {
    key_space: Arc<KeySpace>,
    keys: Vec<Vec<u8>>,
    result_buffer: usize,
    list: usize,
}

/// Checks an exist's arguments (every key, in order) and records `keys` and `key_cnt` in `list`.
///
/// # Safety
/// `keys` is NULL or points to `key_cnt` valid `kvs_key`s; `list` is NULL or valid and writable.
unsafe fn exist_arguments(
    ks_hd: *mut c_void,
    key_cnt: u32,
    keys: *mut KvsKey,
    list: *mut KvsExistList,
) -> Result<ExistArguments, KvsResult> {
    if keys.is_null() || list.is_null() || key_cnt == 0 {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    // SAFETY: non-NULL, valid and writable by the caller's contract.
    let out = unsafe { &mut *list };
    if out.result_buffer.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    let mut copied = Vec::with_capacity(key_cnt as usize);
    for index in 0..key_cnt as usize {
        // SAFETY: `index` < `key_cnt` entries by the caller's contract.
        let key = unsafe { key_bytes(keys.add(index)) }?;
        copied.push(key.to_vec());
    }
    out.keys = keys;
    out.num_keys = key_cnt;
    let key_space = state::key_space(ks_hd)?;
    if (out.length as usize) < (key_cnt as usize).div_ceil(8) {
        return Err(KVS_ERR_BUFFER_SMALL);
    }
    Ok(ExistArguments {
        key_space,
        keys: copied,
        result_buffer: out.result_buffer as usize,
        list: list as usize,
    })
}

/// Runs a checked exist and writes the bits and `list->length`.
///
/// # Safety
/// `list` and its buffer are valid and untouched by anyone else until this returns.
unsafe fn run_exist(
    arguments: &ExistArguments,
    submitted: Instant,
) -> (KvsResult, crate::clock::Timing) {
    let keys: Vec<&[u8]> = arguments.keys.iter().map(Vec::as_slice).collect();
    let (present, timing) = commands::exist(
        &arguments.key_space.device,
        submitted,
        arguments.key_space.namespace,
        &keys,
    );
    let present = match present {
        Ok(present) => present,
        Err(code) => return (code, timing),
    };
    // SAFETY: the caller's contract.
    let list = unsafe { &mut *(arguments.list as *mut KvsExistList) };
    // SAFETY: `length` bytes (checked to hold a bit per key) by the caller's contract.
    let out = unsafe { bytes_at_mut(arguments.result_buffer as *mut c_void, list.length as usize) };
    list.length = commands::write_exist_bits(&present, out) as u32;
    (KVS_SUCCESS, timing)
}

/// Checks which of `key_cnt` keys exist: bit i of `list->result_buffer` (least significant bit
/// of byte 0 first) for key i.
///
/// # Safety
/// `keys` is NULL or `key_cnt` valid keys; `list` is NULL or valid, its `result_buffer` holding
/// `length` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn kvs_exist_kv_pairs(
    ks_hd: *mut c_void,
    key_cnt: u32,
    keys: *mut KvsKey,
    list: *mut KvsExistList,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        // SAFETY: the caller's contract.
        let arguments = match unsafe { exist_arguments(ks_hd, key_cnt, keys, list) } {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        // SAFETY: the caller waits for this call.
        let (result, timing) = unsafe { run_exist(&arguments, submitted) };
        arguments.key_space.device.finish_sync(&timing);
        result
    })
}

/// Queues an exist; `post_fn` gets `key` = `keys` and `result_buffer.list` = `list`.
///
/// # Safety
/// As [`kvs_exist_kv_pairs`]; `keys`, `list` and its buffer stay valid until `post_fn` is called.
#[no_mangle]
pub unsafe extern "C" fn kvs_exist_kv_pairs_async(
    ks_hd: *mut c_void,
    key_cnt: u32,
    keys: *mut KvsKey,
    list: *mut KvsExistList,
    private1: *mut c_void,
    private2: *mut c_void,
    post_fn: KvsPostprocessFunction,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        let Some(post_fn) = post_fn else {
            return KVS_ERR_PARAM_INVALID;
        };
        // SAFETY: the caller's contract.
        let arguments = match unsafe { exist_arguments(ks_hd, key_cnt, keys, list) } {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        let notice = Notice {
            key: keys as usize,
            result_buffer: list as usize,
            ..Notice::new(KVS_CMD_EXIST, ks_hd, private1, private2, post_fn)
        };
        let key_space = Arc::clone(&arguments.key_space);
        // SAFETY: the caller keeps `list` and its buffer valid until the callback, after this.
        let run = move || unsafe { run_exist(&arguments, submitted) };
        submit(&key_space, run, notice, submitted)
    })
}

/// Fills `info` with a pair's key length, key and value length.
///
/// # Safety
/// `key` is NULL or valid; `info` is NULL or writable, its `key` NULL or holding the key's length
/// in writable bytes.
#[no_mangle]
pub unsafe extern "C" fn kvs_get_kvp_info(
    ks_hd: *mut c_void,
    key: *mut KvsKey,
    info: *mut KvsKvpInfo,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        let key_space = match state::key_space(ks_hd) {
            Ok(key_space) => key_space,
            Err(code) => return code,
        };
        if key.is_null() || info.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        // SAFETY: non-NULL `kvs_key` by the caller's contract.
        let key = match unsafe { key_bytes(key) } {
            Ok(key) => key,
            Err(code) => return code,
        };
        // SAFETY: non-NULL and writable by the caller's contract.
        let info = unsafe { &mut *info };
        if info.key.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        let device = &key_space.device;
        let (length, timing) = commands::value_length(device, submitted, key_space.namespace, key);
        device.finish_sync(&timing);
        match length {
            Ok(length) => {
                info.key_len = key.len() as u16;
                info.value_len = length as u32;
                // SAFETY: `info.key` holds the key's length in bytes by the caller's contract.
                unsafe { std::ptr::copy_nonoverlapping(key.as_ptr(), info.key, key.len()) };
                KVS_SUCCESS
            }
            Err(code) => code,
        }
    })
}
