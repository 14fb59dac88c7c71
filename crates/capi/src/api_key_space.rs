//! Entry points for key spaces. A key space is a named namespace of the device (preset `pink`);
//! its name is kept durably with it, so it is found again after the device is reopened.

use std::ffi::{c_char, c_void};
use std::time::Instant;

use kvssd_device::NamespaceSpec;

use crate::commands::count_pairs;
use crate::errors::result_of;
use crate::ffi::*;
use crate::guard::{bytes_at, guard};
use crate::state::{self, KeySpace};

/// A key-space name from `(name_len, name)`: 1 to 255 bytes of UTF-8 without NUL, else
/// `KVS_ERR_KS_NAME`.
///
/// # Safety
/// `name` is non-NULL with `name_len` readable bytes when `name_len` is 1 to 255.
unsafe fn name_of(name: *const c_char, name_len: usize) -> Result<String, KvsResult> {
    if name_len == 0 || name_len > MAX_KEYSPACE_NAME_LEN {
        return Err(KVS_ERR_KS_NAME);
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { bytes_at(name.cast(), name_len) };
    if bytes.contains(&0) {
        return Err(KVS_ERR_KS_NAME);
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| KVS_ERR_KS_NAME)
}

/// The name a `kvs_key_space_name` argument holds: NULL struct or name `KVS_ERR_PARAM_INVALID`.
///
/// # Safety
/// `named` is NULL or points to a `kvs_key_space_name` whose `name` is NULL or holds `name_len`
/// readable bytes.
unsafe fn name_argument(named: *const KvsKeySpaceName) -> Result<String, KvsResult> {
    // SAFETY: the caller's contract.
    let Some(named) = (unsafe { named.as_ref() }) else {
        return Err(KVS_ERR_PARAM_INVALID);
    };
    if named.name.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    // SAFETY: `name` is non-NULL with `name_len` bytes by the caller's contract.
    unsafe { name_of(named.name, named.name_len as usize) }
}

/// A NUL-terminated key-space name: at most 255 bytes are read before the terminator must come.
///
/// # Safety
/// `name` is non-NULL and NUL-terminated (or has at least 256 readable bytes).
unsafe fn c_name_of(name: *const c_char) -> Result<String, KvsResult> {
    // SAFETY: strnlen reads at most MAX + 1 bytes, within the caller's contract.
    let length = unsafe { libc::strnlen(name, MAX_KEYSPACE_NAME_LEN + 1) };
    // SAFETY: `length` bytes were just read by strnlen.
    unsafe { name_of(name, length) }
}

/// Creates a key space of `size` bytes (0: as much as the device has).
///
/// # Safety
/// `key_space_name` is NULL or points to a `kvs_key_space_name` whose `name` holds `name_len`
/// readable bytes.
#[no_mangle]
pub unsafe extern "C" fn kvs_create_key_space(
    dev_hd: *mut c_void,
    key_space_name: *mut KvsKeySpaceName,
    size: u64,
    opt: KvsOptionKeySpace,
) -> KvsResult {
    guard(|| {
        // SAFETY: the caller's contract.
        let name = match unsafe { name_argument(key_space_name) } {
            Ok(name) => name,
            Err(code) => return code,
        };
        let device = match state::device(dev_hd, KVS_ERR_DEV_NOT_EXIST) {
            Ok(device) => device,
            Err(code) => return code,
        };
        // Keys are kept in ascending order; no order, or that one, can be honoured.
        if opt.ordering != KVS_KEY_ORDER_NONE && opt.ordering != KVS_KEY_ORDER_ASCEND {
            return KVS_ERR_OPTION_INVALID;
        }
        if size > device.capacity_bytes {
            return KVS_ERR_DEV_CAPACITY;
        }
        let mut spec = NamespaceSpec::new(kvssd_engine::Preset::Pink).with_name(name);
        spec.quota_bytes = (size > 0).then_some(size);
        match device.with_device(|device| device.create_namespace(spec)) {
            Ok(Ok(_)) => KVS_SUCCESS,
            Ok(Err(error)) => result_of(&error),
            Err(code) => code,
        }
    })
}

/// Deletes a key space and every pair in it; its open handles and iterators are closed.
///
/// # Safety
/// As [`kvs_create_key_space`].
#[no_mangle]
pub unsafe extern "C" fn kvs_delete_key_space(
    dev_hd: *mut c_void,
    key_space_name: *mut KvsKeySpaceName,
) -> KvsResult {
    guard(|| {
        // SAFETY: the caller's contract.
        let name = match unsafe { name_argument(key_space_name) } {
            Ok(name) => name,
            Err(code) => return code,
        };
        let device = match state::device(dev_hd, KVS_ERR_DEV_NOT_EXIST) {
            Ok(device) => device,
            Err(code) => return code,
        };
        let namespace = match device.with_device(|device| device.namespace_by_name(&name)) {
            Ok(Ok(Some(namespace))) => namespace,
            Ok(Ok(None)) => return KVS_ERR_KS_NOT_EXIST,
            Ok(Err(error)) => return result_of(&error),
            Err(code) => return code,
        };
        let handles = match state::remove_key_spaces_of(dev_hd as usize, namespace) {
            Ok(handles) => handles,
            Err(code) => return code,
        };
        let submitted = Instant::now();
        let (result, timing) = device.command(submitted, |inner, at| {
            if let Ok(mut iterators) = device.iterators.lock() {
                for handle in &handles {
                    iterators.close_key_space(inner, *handle);
                }
            }
            match inner.delete_namespace(at, namespace) {
                Ok(done) => (Ok(()), done),
                Err(error) => (Err(result_of(&error)), at),
            }
        });
        device.finish_sync(&timing);
        result.err().unwrap_or(KVS_SUCCESS)
    })
}

/// Lists key-space names from the `index`-th (from 1), as many as `buffer_size` bytes of
/// `kvs_key_space_name` entries hold, into `names[0..]`.
///
/// # Safety
/// `names` is NULL or points to `buffer_size` bytes of `kvs_key_space_name` entries, each with a
/// `name` buffer of `name_len + 1` writable bytes; `ks_cnt` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvs_list_key_spaces(
    dev_hd: *mut c_void,
    index: u32,
    buffer_size: u32,
    names: *mut KvsKeySpaceName,
    ks_cnt: *mut u32,
) -> KvsResult {
    guard(|| {
        if names.is_null() || ks_cnt.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        if index < 1 {
            return KVS_ERR_KS_INDEX;
        }
        let device = match state::device(dev_hd, KVS_ERR_DEV_NOT_EXIST) {
            Ok(device) => device,
            Err(code) => return code,
        };
        let listed: Vec<String> = match device.with_device(|device| device.list_namespaces()) {
            Ok(Ok(listed)) => listed
                .into_iter()
                .filter_map(|info| info.spec.name)
                .collect(),
            Ok(Err(error)) => return result_of(&error),
            Err(code) => return code,
        };
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { ks_cnt.write(0) };
        if listed.is_empty() {
            return KVS_SUCCESS;
        }
        let first = index as usize - 1;
        if first >= listed.len() {
            return KVS_ERR_KS_INDEX;
        }
        let slots = buffer_size as usize / std::mem::size_of::<KvsKeySpaceName>();
        if slots == 0 {
            return KVS_ERR_BUFFER_SMALL;
        }
        let mut written = 0u32;
        for (slot, name) in listed[first..].iter().take(slots).enumerate() {
            // SAFETY: `slot` < the entries `buffer_size` covers, by the caller's contract.
            let entry = unsafe { &mut *names.add(slot) };
            if entry.name.is_null() {
                return KVS_ERR_PARAM_INVALID;
            }
            if (entry.name_len as usize) < name.len() {
                return KVS_ERR_BUFFER_SMALL;
            }
            // SAFETY: the entry's buffer holds `name_len + 1` >= `name.len() + 1` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(name.as_ptr(), entry.name.cast::<u8>(), name.len());
                entry.name.add(name.len()).write(0);
            }
            entry.name_len = name.len() as u32;
            written += 1;
            // SAFETY: as above.
            unsafe { ks_cnt.write(written) };
        }
        KVS_SUCCESS
    })
}

/// Opens a key space by name.
///
/// # Safety
/// `name` is NULL or NUL-terminated; `ks_hd` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvs_open_key_space(
    dev_hd: *mut c_void,
    name: *mut c_char,
    ks_hd: *mut *mut c_void,
) -> KvsResult {
    guard(|| {
        if name.is_null() || ks_hd.is_null() {
            return KVS_ERR_PARAM_INVALID;
        }
        // SAFETY: non-NULL and NUL-terminated by the caller's contract.
        let name = match unsafe { c_name_of(name) } {
            Ok(name) => name,
            Err(code) => return code,
        };
        let device = match state::device(dev_hd, KVS_ERR_DEV_NOT_EXIST) {
            Ok(device) => device,
            Err(code) => return code,
        };
        let namespace = match device.with_device(|device| device.namespace_by_name(&name)) {
            Ok(Ok(Some(namespace))) => namespace,
            Ok(Ok(None)) => return KVS_ERR_KS_NOT_EXIST,
            Ok(Err(error)) => return result_of(&error),
            Err(code) => return code,
        };
        let key_space = KeySpace {
            device_handle: dev_hd as usize,
            device,
            namespace,
            name,
        };
        match state::add_key_space(key_space) {
            Ok(Some(handle)) => {
                // SAFETY: non-NULL and writable by the caller's contract.
                unsafe { ks_hd.write(handle) };
                KVS_SUCCESS
            }
            Ok(None) => KVS_ERR_KS_OPEN,
            Err(code) => code,
        }
    })
}

/// Closes a key space handle and its iterators.
///
/// # Safety
/// Any handle value is accepted; one that is not an open key space is refused.
#[no_mangle]
pub unsafe extern "C" fn kvs_close_key_space(ks_hd: *mut c_void) -> KvsResult {
    guard(|| {
        let key_space = match state::remove_key_space(ks_hd) {
            Ok(key_space) => key_space,
            Err(code) => return code,
        };
        let _ = key_space.device.with_device(|inner| {
            if let Ok(mut iterators) = key_space.device.iterators.lock() {
                iterators.close_key_space(inner, ks_hd as usize);
            }
        });
        KVS_SUCCESS
    })
}

/// Fills `ks` (the name into `ks->name->name`, which must hold 256 bytes; `count` is exact, from
/// a scan of a snapshot).
///
/// # Safety
/// `ks` is NULL or writable; its `name` is NULL or points to a `kvs_key_space_name` whose `name`
/// is NULL or holds `MAX_KEYSPACE_NAME_LEN + 1` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn kvs_get_key_space_info(
    ks_hd: *mut c_void,
    ks: *mut KvsKeySpace,
) -> KvsResult {
    guard(|| {
        // SAFETY: NULL or a valid, writable `kvs_key_space` by the caller's contract.
        let Some(out) = (unsafe { ks.as_mut() }) else {
            return KVS_ERR_PARAM_INVALID;
        };
        let key_space = match state::key_space(ks_hd) {
            Ok(key_space) => key_space,
            Err(code) => return code,
        };
        let device = &key_space.device;
        let info = match device.with_device(|inner| inner.list_namespaces()) {
            Ok(Ok(listed)) => listed
                .into_iter()
                .find(|info| info.id == key_space.namespace),
            Ok(Err(error)) => return result_of(&error),
            Err(code) => return code,
        };
        let Some(info) = info else {
            return KVS_ERR_KS_NOT_EXIST;
        };
        let (count, timing) = count_pairs(device, Instant::now(), key_space.namespace);
        device.finish_sync(&timing);
        let count = match count {
            Ok(count) => count,
            Err(code) => return code,
        };
        let capacity = info.spec.quota_bytes.unwrap_or(device.capacity_bytes);
        out.opened = 1;
        out.capacity = capacity;
        out.free_size = capacity.saturating_sub(info.valid_bytes);
        out.count = count;
        // SAFETY: NULL or a valid `kvs_key_space_name` by the caller's contract.
        if let Some(named) = unsafe { out.name.as_mut() } {
            if !named.name.is_null() {
                let name = key_space.name.as_bytes();
                // SAFETY: the buffer holds MAX_KEYSPACE_NAME_LEN + 1 bytes, and names are at
                // most MAX_KEYSPACE_NAME_LEN bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        name.as_ptr(),
                        named.name.cast::<u8>(),
                        name.len(),
                    );
                    named.name.add(name.len()).write(0);
                }
                named.name_len = name.len() as u32;
            }
        }
        KVS_SUCCESS
    })
}
