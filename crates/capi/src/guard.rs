//! What every entry point shares: no panic crosses into C, and pointers from C are checked before
//! they are read.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::ffi::*;

/// Runs an entry point's body; a panic becomes `KVS_ERR_SYS_IO` instead of unwinding into C.
pub fn guard(body: impl FnOnce() -> KvsResult) -> KvsResult {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(KVS_ERR_SYS_IO)
}

/// Writes an output and returns success.
///
/// # Safety
/// `out` is non-NULL, aligned and writable.
pub unsafe fn write_out<T>(out: *mut T, value: T) -> KvsResult {
    // SAFETY: the caller's contract.
    unsafe { out.write(value) };
    KVS_SUCCESS
}

/// The bytes of a `kvs_key`, checked as OpenMPDK checks them: NULL key `KVS_ERR_PARAM_INVALID`,
/// length outside 4..=255 `KVS_ERR_KEY_LENGTH_INVALID`, then NULL bytes `KVS_ERR_PARAM_INVALID`.
///
/// # Safety
/// `key` is NULL or points to a `kvs_key` whose `key` is NULL or holds `length` readable bytes.
pub unsafe fn key_bytes<'a>(key: *const KvsKey) -> Result<&'a [u8], KvsResult> {
    // SAFETY: the caller's contract: NULL or a valid `kvs_key`.
    let Some(key) = (unsafe { key.as_ref() }) else {
        return Err(KVS_ERR_PARAM_INVALID);
    };
    let length = usize::from(key.length);
    if !(KVS_MIN_KEY_LENGTH..=KVS_MAX_KEY_LENGTH).contains(&length) {
        return Err(KVS_ERR_KEY_LENGTH_INVALID);
    }
    if key.key.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    // SAFETY: non-NULL and `length` readable bytes by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(key.key.cast::<u8>(), length) })
}

/// `length` bytes at `bytes` (none when `length` is 0, whatever the pointer).
///
/// # Safety
/// `bytes` is non-NULL with `length` readable bytes, unless `length` is 0.
pub unsafe fn bytes_at<'a>(bytes: *const c_void, length: usize) -> &'a [u8] {
    if length == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(bytes.cast::<u8>(), length) }
}

/// `length` writable bytes at `bytes`.
///
/// # Safety
/// `bytes` is non-NULL with `length` writable bytes no one else touches meanwhile, unless
/// `length` is 0.
pub unsafe fn bytes_at_mut<'a>(bytes: *mut c_void, length: usize) -> &'a mut [u8] {
    if length == 0 {
        return &mut [];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(bytes.cast::<u8>(), length) }
}

/// A C `bool` read as a byte: anything but 0 is true.
///
/// # Safety
/// `flag` is NULL or points to a readable byte; NULL reads as false.
pub unsafe fn flag(flag: *const u8) -> bool {
    // SAFETY: the caller's contract.
    unsafe { flag.as_ref() }.is_some_and(|&byte| byte != 0)
}
