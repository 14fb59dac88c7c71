//! Entry points for devices, buffers and the latency report.

use std::ffi::{c_char, c_void, CStr};

use crate::ffi::*;
use crate::guard::{guard, write_out};
use crate::state::{self, OpenDevice};
use crate::uri::DeviceUri;

/// Opens the device `URI` names (see `docs/kv-api.md`): a file path, or `sim:PROFILE`.
///
/// # Safety
/// `uri` is NULL or a NUL-terminated string; `dev_hd` is NULL or points to writable storage for
/// a handle.
#[no_mangle]
pub unsafe extern "C" fn kvs_open_device(uri: *mut c_char, dev_hd: *mut *mut c_void) -> KvsResult {
    guard(|| {
        if uri.is_null() || dev_hd.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        // SAFETY: non-NULL and NUL-terminated by the caller's contract.
        let text = unsafe { CStr::from_ptr(uri) };
        let Ok(text) = text.to_str() else {
            eprintln!("kvssd: the device URI is not UTF-8");
            return KVS_ERR_PARAM_INVALID;
        };
        let parsed = match DeviceUri::parse(text) {
            Ok(parsed) => parsed,
            Err(reason) => {
                eprintln!("kvssd: {text}: {reason}");
                return KVS_ERR_PARAM_INVALID;
            }
        };
        match state::uri_open(text) {
            Ok(true) => {
                eprintln!("kvssd: {text}: the device is open already");
                return KVS_ERR_SYS_IO;
            }
            Ok(false) => {}
            Err(code) => return code,
        }
        let device = match OpenDevice::open(text, &parsed) {
            Ok(device) => device,
            Err((code, reason)) => {
                eprintln!("kvssd: {reason}");
                return code;
            }
        };
        match state::add_device(device) {
            Ok(handle) => {
                // SAFETY: `dev_hd` is non-NULL and writable by the caller's contract.
                unsafe { dev_hd.write(handle) };
                KVS_SUCCESS
            }
            Err(code) => code,
        }
    })
}

/// Closes a device: waits for its asynchronous commands, closes its key spaces and iterators, and
/// (on a file) writes a checkpoint.
///
/// # Safety
/// Any handle value is accepted; one that is not an open device is refused.
#[no_mangle]
pub unsafe extern "C" fn kvs_close_device(dev_hd: *mut c_void) -> KvsResult {
    guard(|| {
        let device = match state::remove_device(dev_hd) {
            Ok(device) => device,
            Err(code) => return code,
        };
        match device.close() {
            Ok(()) => KVS_SUCCESS,
            Err(code) => code,
        }
    })
}

fn used_bytes(device: &OpenDevice) -> Result<u64, KvsResult> {
    let listed = device
        .with_device(|device| device.list_namespaces())?
        .map_err(|error| crate::errors::result_of(&error))?;
    Ok(listed.iter().map(|info| info.valid_bytes).sum())
}

fn quota_bytes(device: &OpenDevice) -> Result<u64, KvsResult> {
    let listed = device
        .with_device(|device| device.list_namespaces())?
        .map_err(|error| crate::errors::result_of(&error))?;
    Ok(listed.iter().filter_map(|info| info.spec.quota_bytes).sum())
}

/// Fills `dev_info`.
///
/// # Safety
/// `dev_info` is NULL or points to a writable `kvs_device`.
#[no_mangle]
pub unsafe extern "C" fn kvs_get_device_info(
    dev_hd: *mut c_void,
    dev_info: *mut KvsDevice,
) -> KvsResult {
    guard(|| {
        if dev_info.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        let device = match state::device(dev_hd, KVS_ERR_DEV_NOT_OPENED) {
            Ok(device) => device,
            Err(code) => return code,
        };
        let promised = match quota_bytes(&device) {
            Ok(bytes) => bytes,
            Err(code) => return code,
        };
        let info = KvsDevice {
            capacity: device.capacity_bytes,
            unalloc_capacity: device.capacity_bytes.saturating_sub(promised),
            max_value_len: device.value_bytes_max as u32,
            max_key_len: KVS_MAX_KEY_LENGTH as u32,
            optimal_value_len: KVS_OPTIMAL_VALUE_LENGTH,
            optimal_value_granularity: device.chunk_bytes,
            extended_info: std::ptr::null_mut(),
        };
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { write_out(dev_info, info) }
    })
}

/// The device's capacity in bytes.
///
/// # Safety
/// `dev_capacity` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn kvs_get_device_capacity(
    dev_hd: *mut c_void,
    dev_capacity: *mut u64,
) -> KvsResult {
    guard(|| {
        if dev_capacity.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        match state::device(dev_hd, KVS_ERR_DEV_NOT_OPENED) {
            // SAFETY: non-NULL and writable by the caller's contract.
            Ok(device) => unsafe { write_out(dev_capacity, device.capacity_bytes) },
            Err(code) => code,
        }
    })
}

/// The share of the capacity live pairs take, from 0 to 10000 (100.00%).
///
/// # Safety
/// `dev_utilization` is NULL or points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn kvs_get_device_utilization(
    dev_hd: *mut c_void,
    dev_utilization: *mut u32,
) -> KvsResult {
    guard(|| {
        if dev_utilization.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        let device = match state::device(dev_hd, KVS_ERR_DEV_NOT_OPENED) {
            Ok(device) => device,
            Err(code) => return code,
        };
        let used = match used_bytes(&device) {
            Ok(used) => used,
            Err(code) => return code,
        };
        let share =
            (u128::from(used) * 10_000 / u128::from(device.capacity_bytes.max(1))).min(10_000);
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { write_out(dev_utilization, share as u32) }
    })
}

/// Writes one of the device's limits.
fn limit(dev_hd: *mut c_void, out: *mut u32, value: impl FnOnce(&OpenDevice) -> u32) -> KvsResult {
    guard(|| {
        if out.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        match state::device(dev_hd, KVS_ERR_DEV_NOT_OPENED) {
            // SAFETY: non-NULL and writable by the contract of the entry point that called.
            Ok(device) => unsafe { write_out(out, value(&device)) },
            Err(code) => code,
        }
    })
}

/// The shortest key (4 bytes).
///
/// # Safety
/// `min_key_length` is NULL or points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn kvs_get_min_key_length(
    dev_hd: *mut c_void,
    min_key_length: *mut u32,
) -> KvsResult {
    limit(dev_hd, min_key_length, |_| KVS_MIN_KEY_LENGTH as u32)
}

/// The longest key (255 bytes).
///
/// # Safety
/// `max_key_length` is NULL or points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn kvs_get_max_key_length(
    dev_hd: *mut c_void,
    max_key_length: *mut u32,
) -> KvsResult {
    limit(dev_hd, max_key_length, |_| KVS_MAX_KEY_LENGTH as u32)
}

/// The shortest value (0 bytes).
///
/// # Safety
/// `min_value_length` is NULL or points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn kvs_get_min_value_length(
    dev_hd: *mut c_void,
    min_value_length: *mut u32,
) -> KvsResult {
    limit(dev_hd, min_value_length, |_| 0)
}

/// The longest value this device takes (2 MiB, less on tiny geometries).
///
/// # Safety
/// `max_value_length` is NULL or points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn kvs_get_max_value_length(
    dev_hd: *mut c_void,
    max_value_length: *mut u32,
) -> KvsResult {
    limit(dev_hd, max_value_length, |device| {
        device.value_bytes_max as u32
    })
}

/// The value length the device works best with (4096).
///
/// # Safety
/// `opt_value_length` is NULL or points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn kvs_get_optimal_value_length(
    dev_hd: *mut c_void,
    opt_value_length: *mut u32,
) -> KvsResult {
    limit(dev_hd, opt_value_length, |_| KVS_OPTIMAL_VALUE_LENGTH)
}

/// The alignment every buffer from [`_kvs_malloc`] has at least (what `malloc` gives).
const ALIGNMENT_MIN: usize = 16;

fn allocate(size_bytes: usize, alignment: usize, zeroed: bool) -> *mut c_void {
    let alignment = alignment.max(ALIGNMENT_MIN);
    let Some(alignment) = alignment.checked_next_power_of_two() else {
        return std::ptr::null_mut();
    };
    let mut buffer: *mut c_void = std::ptr::null_mut();
    // SAFETY: posix_memalign writes one pointer to `buffer`, a valid local; the alignment is a
    // power of two and a multiple of sizeof(void *).
    let failed = unsafe { libc::posix_memalign(&mut buffer, alignment, size_bytes.max(1)) };
    if failed != 0 {
        return std::ptr::null_mut();
    }
    if zeroed {
        // SAFETY: `buffer` was just allocated with at least `size_bytes` bytes.
        unsafe { std::ptr::write_bytes(buffer.cast::<u8>(), 0, size_bytes) };
    }
    buffer
}

/// Allocates `size_bytes` aligned to `alignment` (rounded up to a power of two, at least 16);
/// free it with `kvs_free` or `free`.
///
/// # Safety
/// `file` is unused (the `kvs_malloc` macro passes its location).
#[no_mangle]
pub unsafe extern "C" fn _kvs_malloc(
    size_bytes: usize,
    alignment: usize,
    file: *const c_char,
) -> *mut c_void {
    let _ = file;
    std::panic::catch_unwind(|| allocate(size_bytes, alignment, false))
        .unwrap_or(std::ptr::null_mut())
}

/// As [`_kvs_malloc`], zeroed.
///
/// # Safety
/// `file` is unused.
#[no_mangle]
pub unsafe extern "C" fn _kvs_zalloc(
    size_bytes: usize,
    alignment: usize,
    file: *const c_char,
) -> *mut c_void {
    let _ = file;
    std::panic::catch_unwind(|| allocate(size_bytes, alignment, true))
        .unwrap_or(std::ptr::null_mut())
}

/// Frees a buffer from `kvs_malloc` or `kvs_zalloc` (NULL is ignored).
///
/// # Safety
/// `buf` is NULL or a buffer from `_kvs_malloc`/`_kvs_zalloc` not freed yet.
#[no_mangle]
pub unsafe extern "C" fn _kvs_free(buf: *mut c_void, file: *const c_char) {
    let _ = file;
    // SAFETY: the buffer came from posix_memalign (or is NULL), whose memory free releases.
    unsafe { libc::free(buf) };
}

/// Fills `report` with the device's per-command latencies since it was opened or last reset.
///
/// # Safety
/// `report` is NULL or points to a writable `kvssd_latency_report`.
#[no_mangle]
pub unsafe extern "C" fn kvssd_get_latency_report(
    dev_hd: *mut c_void,
    report: *mut KvssdLatencyReport,
) -> KvsResult {
    guard(|| {
        if report.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        match state::device(dev_hd, KVS_ERR_DEV_NOT_OPENED) {
            // SAFETY: non-NULL and writable by the caller's contract.
            Ok(device) => unsafe { write_out(report, device.latencies.report()) },
            Err(code) => code,
        }
    })
}

/// Forgets the device's recorded latencies.
///
/// # Safety
/// Any handle value is accepted; one that is not an open device is refused.
#[no_mangle]
pub unsafe extern "C" fn kvssd_reset_latency_report(dev_hd: *mut c_void) -> KvsResult {
    guard(|| match state::device(dev_hd, KVS_ERR_DEV_NOT_OPENED) {
        Ok(device) => {
            device.latencies.reset();
            KVS_SUCCESS
        }
        Err(code) => code,
    })
}
