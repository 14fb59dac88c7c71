//! Entry points for iterators and key-group deletes (see `iterators` for the filter and layout).

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

use crate::commands;
use crate::ffi::*;
use crate::guard::{bytes_at_mut, guard};
use crate::iterators::KeyGroup;
use crate::queue::{submit, Notice};
use crate::state::{self, KeySpace};

/// Opens an iterator over a snapshot of the key space's pairs whose key is in the group.
///
/// # Safety
/// `iter_op` and `iter_fltr` are NULL or valid; `iter_hd` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvs_create_iterator(
    ks_hd: *mut c_void,
    iter_op: *mut KvsOptionIterator,
    iter_fltr: *mut KvsKeyGroupFilter,
    iter_hd: *mut u8,
) -> KvsResult {
    guard(|| {
        let key_space = match state::key_space(ks_hd) {
            Ok(key_space) => key_space,
            Err(code) => return code,
        };
        if iter_op.is_null() || iter_fltr.is_null() || iter_hd.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        // SAFETY: non-NULL and valid by the caller's contract.
        let (iter_type, filter) = unsafe { ((*iter_op).iter_type, *iter_fltr) };
        let with_values = match iter_type {
            KVS_ITERATOR_KEY => false,
            KVS_ITERATOR_KEY_VALUE => true,
            _ => return KVS_ERR_OPTION_INVALID,
        };
        if let Err(code) = KeyGroup::new(&filter) {
            return code;
        }
        let device = &key_space.device;
        let (result, timing) = device.command(Instant::now(), |inner, at| {
            let Ok(mut iterators) = device.iterators.lock() else {
                return (Err(KVS_ERR_SYS_IO), at);
            };
            let (created, done) = iterators.create(
                inner,
                at,
                ks_hd as usize,
                key_space.namespace,
                filter,
                with_values,
            );
            (Ok(created), done)
        });
        device.finish_sync(&timing);
        let result = match result {
            Ok(created) => created,
            Err(code) => Err((code, 0)),
        };
        match result {
            Ok(handle) => {
                // SAFETY: non-NULL and writable by the caller's contract.
                unsafe { iter_hd.write(handle) };
                KVS_SUCCESS
            }
            Err((code, existing)) => {
                if code == KVS_ERR_ITERATOR_OPEN {
                    // SAFETY: as above. OpenMPDK hands back the open iterator's handle.
                    unsafe { iter_hd.write(existing) };
                }
                code
            }
        }
    })
}

/// Closes an iterator.
///
/// # Safety
/// Any handle values are accepted; ones that are not open are refused.
#[no_mangle]
pub unsafe extern "C" fn kvs_delete_iterator(ks_hd: *mut c_void, iter_hd: u8) -> KvsResult {
    guard(|| {
        let key_space = match state::key_space(ks_hd) {
            Ok(key_space) => key_space,
            Err(code) => return code,
        };
        let device = &key_space.device;
        let closed = device.with_device(|inner| match device.iterators.lock() {
            Ok(mut iterators) => iterators.delete(inner, ks_hd as usize, iter_hd),
            Err(_) => Err(KVS_ERR_SYS_IO),
        });
        match closed {
            Ok(Ok(())) => KVS_SUCCESS,
            Ok(Err(code)) | Err(code) => code,
        }
    })
}

/// An iterate-next's checked arguments.
struct NextArguments {
    key_space: Arc<KeySpace>,
    key_space_handle: usize,
    handle: u8,
    list: usize,
    buffer: usize,
    buffer_len: usize,
}

/// Checks an iterate-next's arguments: the buffer must be exactly `KVS_ITERATOR_BUFFER_SIZE`
/// bytes, else `KVS_ERR_SYS_IO` (as OpenMPDK answers).
///
/// # Safety
/// `iter_list` is NULL or valid.
unsafe fn next_arguments(
    ks_hd: *mut c_void,
    iter_hd: u8,
    iter_list: *mut KvsIteratorList,
) -> Result<NextArguments, KvsResult> {
    // SAFETY: NULL or valid by the caller's contract.
    let Some(list) = (unsafe { iter_list.as_ref() }) else {
        return Err(KVS_ERR_PARAM_INVALID);
    };
    if list.it_list.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    let key_space = state::key_space(ks_hd)?;
    if list.size != KVS_ITERATOR_BUFFER_SIZE {
        return Err(KVS_ERR_SYS_IO);
    }
    Ok(NextArguments {
        key_space,
        key_space_handle: ks_hd as usize,
        handle: iter_hd,
        list: iter_list as usize,
        buffer: list.it_list as usize,
        buffer_len: list.size as usize,
    })
}

/// Runs a checked iterate-next and writes the list's outputs.
///
/// # Safety
/// The list and its buffer are valid and untouched by anyone else until this returns.
unsafe fn run_next(
    arguments: &NextArguments,
    submitted: Instant,
) -> (KvsResult, crate::clock::Timing) {
    // SAFETY: the caller's contract.
    let buffer = unsafe { bytes_at_mut(arguments.buffer as *mut c_void, arguments.buffer_len) };
    let device = &arguments.key_space.device;
    let (filled, timing) = device.command(submitted, |inner, at| {
        let Ok(mut iterators) = device.iterators.lock() else {
            return (Err(KVS_ERR_SYS_IO), at);
        };
        iterators.next(
            inner,
            at,
            arguments.key_space_handle,
            arguments.handle,
            buffer,
        )
    });
    // SAFETY: the caller's contract.
    let list = unsafe { &mut *(arguments.list as *mut KvsIteratorList) };
    match filled {
        Ok(filled) => {
            list.num_entries = filled.entries;
            list.size = filled.bytes;
            list.end = u8::from(filled.end);
            (KVS_SUCCESS, timing)
        }
        Err(code) => {
            list.num_entries = 0;
            (code, timing)
        }
    }
}

/// Fills `iter_list->it_list` with the iterator's next entries.
///
/// # Safety
/// `iter_list` is NULL or valid, its `it_list` holding `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn kvs_iterate_next(
    ks_hd: *mut c_void,
    iter_hd: u8,
    iter_list: *mut KvsIteratorList,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        // SAFETY: the caller's contract.
        let arguments = match unsafe { next_arguments(ks_hd, iter_hd, iter_list) } {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        // SAFETY: the caller waits for this call.
        let (result, timing) = unsafe { run_next(&arguments, submitted) };
        arguments.key_space.device.finish_sync(&timing);
        result
    })
}

/// Queues an iterate-next; `post_fn` gets `iter_hd` and `result_buffer.iter_list`.
///
/// # Safety
/// As [`kvs_iterate_next`]; the list and its buffer stay valid until `post_fn` is called.
#[no_mangle]
pub unsafe extern "C" fn kvs_iterate_next_async(
    ks_hd: *mut c_void,
    iter_hd: u8,
    iter_list: *mut KvsIteratorList,
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
        let arguments = match unsafe { next_arguments(ks_hd, iter_hd, iter_list) } {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        let notice = Notice {
            iter_hd,
            result_buffer: iter_list as usize,
            ..Notice::new(KVS_CMD_ITER_NEXT, ks_hd, private1, private2, post_fn)
        };
        let key_space = Arc::clone(&arguments.key_space);
        // SAFETY: the caller keeps the list and its buffer valid until the callback, after this.
        let run = move || unsafe { run_next(&arguments, submitted) };
        submit(&key_space, run, notice, submitted)
    })
}

/// Checks a key-group delete's arguments.
///
/// # Safety
/// `grp_fltr` is NULL or valid.
unsafe fn group_arguments(
    ks_hd: *mut c_void,
    grp_fltr: *mut KvsKeyGroupFilter,
) -> Result<(Arc<KeySpace>, KeyGroup), KvsResult> {
    let key_space = state::key_space(ks_hd)?;
    // SAFETY: NULL or valid by the caller's contract.
    let Some(filter) = (unsafe { grp_fltr.as_ref() }) else {
        return Err(KVS_ERR_PARAM_INVALID);
    };
    Ok((key_space, KeyGroup::new(filter)?))
}

/// Deletes every pair whose key is in the group (in atomic batches of up to 1024 pairs; the
/// whole is not one atomic step).
///
/// # Safety
/// `grp_fltr` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn kvs_delete_key_group(
    ks_hd: *mut c_void,
    grp_fltr: *mut KvsKeyGroupFilter,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        // SAFETY: the caller's contract.
        let (key_space, group) = match unsafe { group_arguments(ks_hd, grp_fltr) } {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        let device = &key_space.device;
        let (result, timing) =
            commands::delete_group(device, submitted, key_space.namespace, group);
        device.finish_sync(&timing);
        result
    })
}

/// Queues a key-group delete; `post_fn` is called when it completes.
///
/// # Safety
/// `grp_fltr` is NULL or valid (it is read before this returns).
#[no_mangle]
pub unsafe extern "C" fn kvs_delete_key_group_async(
    ks_hd: *mut c_void,
    grp_fltr: *mut KvsKeyGroupFilter,
    private1: *mut c_void,
    private2: *mut c_void,
    post_fn: KvsPostprocessFunction,
) -> KvsResult {
    guard(|| {
        let submitted = Instant::now();
        // SAFETY: the caller's contract.
        let (key_space, group) = match unsafe { group_arguments(ks_hd, grp_fltr) } {
            Ok(arguments) => arguments,
            Err(code) => return code,
        };
        let Some(post_fn) = post_fn else {
            return KVS_ERR_PARAM_INVALID;
        };
        let notice = Notice {
            option: grp_fltr as usize,
            ..Notice::new(KVS_CMD_DELETE_GROUP, ks_hd, private1, private2, post_fn)
        };
        let owner = Arc::clone(&key_space);
        let run = move || commands::delete_group(&owner.device, submitted, owner.namespace, group);
        submit(&key_space, run, notice, submitted)
    })
}
