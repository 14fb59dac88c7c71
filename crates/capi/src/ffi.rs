//! The C types, codes and limits of the SNIA KV API v1.1 as OpenMPDK/KVSSD v1.6.0 lays them out
//! (`include/kvs_struct.h`, `kvs_result.h`, `kvs_const.h`), for x86-64 and AArch64 Linux.
//!
//! C enums are `int`-sized, so enum-typed fields are `u32`/`i32` here; C `bool` fields are `u8`,
//! because a Rust `bool` holding any byte but 0 or 1 is undefined behaviour and a C caller may
//! leave garbage in an option it did not mean to set. The layout tests below pin every size and
//! offset; `tests/c/abi.c` checks the same numbers against the headers.

use std::ffi::{c_char, c_void};

/// `kvs_result`.
pub type KvsResult = i32;

/// Success.
pub const KVS_SUCCESS: KvsResult = 0;
/// The buffer is too small.
pub const KVS_ERR_BUFFER_SMALL: KvsResult = 0x01;
/// The device has no room (the header's spelling is `KVS_ERR_DEV_CAPAPCITY`).
pub const KVS_ERR_DEV_CAPACITY: KvsResult = 0x02;
/// No device with this handle or URI.
pub const KVS_ERR_DEV_NOT_EXIST: KvsResult = 0x03;
/// The key space has no room.
pub const KVS_ERR_KS_CAPACITY: KvsResult = 0x04;
/// A key space of this name exists.
pub const KVS_ERR_KS_EXIST: KvsResult = 0x05;
/// A key-space list index out of range.
pub const KVS_ERR_KS_INDEX: KvsResult = 0x06;
/// A key-space name that is not valid.
pub const KVS_ERR_KS_NAME: KvsResult = 0x07;
/// No key space of this name.
pub const KVS_ERR_KS_NOT_EXIST: KvsResult = 0x08;
/// The key space is not open (or the handle is not one).
pub const KVS_ERR_KS_NOT_OPEN: KvsResult = 0x09;
/// The key space is open already.
pub const KVS_ERR_KS_OPEN: KvsResult = 0x0A;
/// The iterator filter is not valid.
pub const KVS_ERR_ITERATOR_FILTER_INVALID: KvsResult = 0x0B;
/// [`KVS_MAX_ITERATE_HANDLE`] iterators are open.
pub const KVS_ERR_ITERATOR_MAX: KvsResult = 0x0C;
/// No such iterator.
pub const KVS_ERR_ITERATOR_NOT_EXIST: KvsResult = 0x0D;
/// An iterator with this filter is open.
pub const KVS_ERR_ITERATOR_OPEN: KvsResult = 0x0E;
/// A key length out of range.
pub const KVS_ERR_KEY_LENGTH_INVALID: KvsResult = 0x0F;
/// No such key.
pub const KVS_ERR_KEY_NOT_EXIST: KvsResult = 0x10;
/// An option this implementation does not support.
pub const KVS_ERR_OPTION_INVALID: KvsResult = 0x11;
/// A NULL or otherwise bad parameter.
pub const KVS_ERR_PARAM_INVALID: KvsResult = 0x12;
/// An I/O error, or anything else.
pub const KVS_ERR_SYS_IO: KvsResult = 0x13;
/// A value length out of range.
pub const KVS_ERR_VALUE_LENGTH_INVALID: KvsResult = 0x14;
/// A value offset out of range.
pub const KVS_ERR_VALUE_OFFSET_INVALID: KvsResult = 0x15;
/// A value offset not a multiple of [`KVS_ALIGNMENT_UNIT`].
pub const KVS_ERR_VALUE_OFFSET_MISALIGNED: KvsResult = 0x16;
/// The key exists and the store may not overwrite it.
pub const KVS_ERR_VALUE_UPDATE_NOT_ALLOWED: KvsResult = 0x17;
/// The device handle is not an open device.
pub const KVS_ERR_DEV_NOT_OPENED: KvsResult = 0x18;

/// Shortest key, in bytes.
pub const KVS_MIN_KEY_LENGTH: usize = 4;
/// Longest key, in bytes.
pub const KVS_MAX_KEY_LENGTH: usize = 255;
/// Longest value, in bytes (a device on a tiny geometry takes less).
pub const KVS_MAX_VALUE_LENGTH: usize = 2 << 20;
/// The value length the device works best with.
pub const KVS_OPTIMAL_VALUE_LENGTH: u32 = 4096;
/// Retrieve offsets are multiples of this.
pub const KVS_ALIGNMENT_UNIT: u32 = 512;
/// Retrieve buffer lengths are multiples of this.
pub const KVS_VALUE_LENGTH_ALIGNMENT_UNIT: u32 = 4;
/// Iterators open at once on a device; handles run from 1 to this.
pub const KVS_MAX_ITERATE_HANDLE: usize = 16;
/// Bytes of a key-group filter.
pub const KVS_MAX_KEY_GROUP_BYTES: usize = 4;
/// The size an iterator buffer must have.
pub const KVS_ITERATOR_BUFFER_SIZE: u32 = 32 * 1024;
/// Longest key-space name, in bytes.
pub const MAX_KEYSPACE_NAME_LEN: usize = 255;

// The C library's limits are the device's: a key or value libkvssd accepts, the device takes.
const _: () = assert!(KVS_MAX_KEY_LENGTH == kvssd_device::KEY_BYTES_MAX);
const _: () = assert!(KVS_MAX_VALUE_LENGTH == kvssd_device::VALUE_BYTES_MAX);
const _: () = assert!(MAX_KEYSPACE_NAME_LEN == kvssd_device::NAMESPACE_NAME_BYTES_MAX);
const _: () = assert!(KVS_MAX_ITERATE_HANDLE <= kvssd_device::ITERATORS_OPEN_MAX);

/// `kvs_context`: what an asynchronous completion is for.
pub const KVS_CMD_DELETE: u32 = 0x01;
/// Delete of a key group.
pub const KVS_CMD_DELETE_GROUP: u32 = 0x02;
/// Existence check.
pub const KVS_CMD_EXIST: u32 = 0x03;
/// Iterator creation (never asynchronous in v1.6.0's API).
pub const KVS_CMD_ITER_CREATE: u32 = 0x04;
/// Iterator deletion (never asynchronous in v1.6.0's API).
pub const KVS_CMD_ITER_DELETE: u32 = 0x05;
/// Next iterator batch.
pub const KVS_CMD_ITER_NEXT: u32 = 0x06;
/// Retrieve.
pub const KVS_CMD_RETRIEVE: u32 = 0x07;
/// Store.
pub const KVS_CMD_STORE: u32 = 0x08;

/// `kvs_store_type`: upsert.
pub const KVS_STORE_POST: u32 = 0;
/// Store only over an existing key.
pub const KVS_STORE_UPDATE_ONLY: u32 = 1;
/// Store only a new key.
pub const KVS_STORE_NOOVERWRITE: u32 = 2;
/// Append to an existing value, or insert.
pub const KVS_STORE_APPEND: u32 = 3;

/// `kvs_association_type`: none.
pub const KVS_NOASSOCIATION: u32 = 0;
/// A stream association.
pub const KVS_ASSOCIATION_STREAM: u32 = 1;

/// `kvs_iterator_type`: keys only.
pub const KVS_ITERATOR_KEY: u32 = 0;
/// Keys and values.
pub const KVS_ITERATOR_KEY_VALUE: u32 = 1;

/// `kvs_key_order`: no order promised.
pub const KVS_KEY_ORDER_NONE: u32 = 0;
/// Ascending key order.
pub const KVS_KEY_ORDER_ASCEND: u32 = 1;
/// Descending key order.
pub const KVS_KEY_ORDER_DESCEND: u32 = 2;

/// `kvs_key`.
#[repr(C)]
pub struct KvsKey {
    /// The key bytes.
    pub key: *mut c_void,
    /// Their number.
    pub length: u16,
}

/// `kvs_value`.
#[repr(C)]
pub struct KvsValue {
    /// The value bytes (store) or the buffer for them (retrieve).
    pub value: *mut c_void,
    /// Bytes of the value (store), or the buffer's size in and the bytes copied out (retrieve).
    pub length: u32,
    /// Out: the stored value's size from `offset` on.
    pub actual_value_size: u32,
    /// Retrieve from this byte of the value.
    pub offset: u32,
}

/// `kvs_association`.
#[repr(C)]
pub struct KvsAssociation {
    /// `kvs_association_type`.
    pub assoc_type: u32,
    /// The stream id, for a stream association.
    pub assoc_hint: u16,
}

/// `kvs_option_store`.
#[repr(C)]
pub struct KvsOptionStore {
    /// `kvs_store_type`.
    pub st_type: u32,
    /// An association, or NULL.
    pub assoc: *mut KvsAssociation,
}

/// `kvs_option_retrieve`.
#[repr(C)]
pub struct KvsOptionRetrieve {
    /// C `bool`: delete the pair once it is read.
    pub kvs_retrieve_delete: u8,
}

/// `kvs_option_delete`.
#[repr(C)]
pub struct KvsOptionDelete {
    /// C `bool`: fail with `KVS_ERR_KEY_NOT_EXIST` when the key is absent.
    pub kvs_delete_error: u8,
}

/// `kvs_option_iterator`.
#[repr(C)]
pub struct KvsOptionIterator {
    /// `kvs_iterator_type`.
    pub iter_type: u32,
}

/// `kvs_option_key_space` (passed by value).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct KvsOptionKeySpace {
    /// `kvs_key_order`.
    pub ordering: u32,
}

/// `kvs_key_space_name`.
#[repr(C)]
pub struct KvsKeySpaceName {
    /// Bytes of the name (without a terminating NUL).
    pub name_len: u32,
    /// The name.
    pub name: *mut c_char,
}

/// `kvs_key_space`.
#[repr(C)]
pub struct KvsKeySpace {
    /// C `bool`: whether it is open.
    pub opened: u8,
    /// Its capacity, in bytes.
    pub capacity: u64,
    /// Bytes still free in it.
    pub free_size: u64,
    /// Pairs in it.
    pub count: u64,
    /// Out: its name.
    pub name: *mut KvsKeySpaceName,
}

/// `kvs_device`.
#[repr(C)]
pub struct KvsDevice {
    /// Capacity, in bytes.
    pub capacity: u64,
    /// Bytes not promised to any key space's quota.
    pub unalloc_capacity: u64,
    /// Longest value.
    pub max_value_len: u32,
    /// Longest key.
    pub max_key_len: u32,
    /// The value length the device works best with.
    pub optimal_value_len: u32,
    /// The granularity the device packs values in.
    pub optimal_value_granularity: u32,
    /// Vendor information (NULL).
    pub extended_info: *mut c_void,
}

/// `kvs_exist_list`.
#[repr(C)]
pub struct KvsExistList {
    /// Out: keys checked.
    pub num_keys: u32,
    /// Out: the keys checked.
    pub keys: *mut KvsKey,
    /// In: bytes of `result_buffer`; out: bytes written.
    pub length: u32,
    /// One bit per key, least significant bit of byte 0 first.
    pub result_buffer: *mut u8,
}

/// `kvs_key_group_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvsKeyGroupFilter {
    /// Which bits of the key's first four bytes must match.
    pub bitmask: [u8; KVS_MAX_KEY_GROUP_BYTES],
    /// What they must be.
    pub bit_pattern: [u8; KVS_MAX_KEY_GROUP_BYTES],
}

/// `kvs_iterator_list`.
#[repr(C)]
pub struct KvsIteratorList {
    /// Out: entries in `it_list`.
    pub num_entries: u32,
    /// Out, C `bool`: no entries remain.
    pub end: u8,
    /// In: the buffer's size; out: bytes used.
    pub size: u32,
    /// The buffer.
    pub it_list: *mut u8,
}

/// The union `result_buffer` of `kvs_postprocess_context`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union KvsResultBuffer {
    /// For `KVS_CMD_ITER_NEXT`.
    pub iter_list: *mut KvsIteratorList,
    /// For `KVS_CMD_EXIST`.
    pub list: *mut KvsExistList,
}

/// `kvs_postprocess_context`: what an asynchronous callback receives.
#[repr(C)]
pub struct KvsPostprocessContext {
    /// `kvs_context`.
    pub context: u32,
    /// The key space handle the command was given.
    pub ks_hd: *mut c_void,
    /// The key (for exist: the array of keys) the command was given.
    pub key: *mut KvsKey,
    /// The value the command was given.
    pub value: *mut KvsValue,
    /// The option the command was given.
    pub option: *mut c_void,
    /// The caller's first pointer.
    pub private1: *mut c_void,
    /// The caller's second pointer.
    pub private2: *mut c_void,
    /// The command's result.
    pub result: KvsResult,
    /// The iterator, for `KVS_CMD_ITER_NEXT`.
    pub iter_hd: u8,
    /// The exist list or iterator list.
    pub result_buffer: KvsResultBuffer,
}

/// `kvs_postprocess_function`.
pub type KvsPostprocessFunction = Option<unsafe extern "C" fn(*mut KvsPostprocessContext)>;

/// `kvs_kvp_info`.
#[repr(C)]
pub struct KvsKvpInfo {
    /// Out: the key's length.
    pub key_len: u16,
    /// Out: the key (a buffer of at least the key's length).
    pub key: *mut u8,
    /// Out: the value's length.
    pub value_len: u32,
}

/// `kvssd_latency_report` (`kvssd_ext.h`): per-command latencies since the last reset.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct KvssdLatencyReport {
    /// Commands measured.
    pub commands: u64,
    /// Simulated latency (completion minus issue on the device's simulated clock), median.
    pub simulated_p50_ns: u64,
    /// Simulated latency, 99th percentile.
    pub simulated_p99_ns: u64,
    /// Simulated latency, most.
    pub simulated_max_ns: u64,
    /// Wall-clock latency (call or submission to return or callback), median.
    pub wall_p50_ns: u64,
    /// Wall-clock latency, 99th percentile.
    pub wall_p99_ns: u64,
    /// Wall-clock latency, most.
    pub wall_max_ns: u64,
    /// With pacing: how long after its simulated completion a command completed, median.
    pub lateness_p50_ns: u64,
    /// With pacing: lateness, 99th percentile.
    pub lateness_p99_ns: u64,
    /// With pacing: lateness, most.
    pub lateness_max_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn ffi_layouts_match_openmpdk_v1_6_0_on_lp64() {
        assert_eq!(size_of::<KvsKey>(), 16);
        assert_eq!(offset_of!(KvsKey, length), 8);
        assert_eq!(size_of::<KvsValue>(), 24);
        assert_eq!(offset_of!(KvsValue, offset), 16);
        assert_eq!(size_of::<KvsOptionStore>(), 16);
        assert_eq!(size_of::<KvsAssociation>(), 8);
        assert_eq!(size_of::<KvsOptionRetrieve>(), 1);
        assert_eq!(size_of::<KvsOptionDelete>(), 1);
        assert_eq!(size_of::<KvsOptionIterator>(), 4);
        assert_eq!(size_of::<KvsOptionKeySpace>(), 4);
        assert_eq!(size_of::<KvsKeySpaceName>(), 16);
        assert_eq!(offset_of!(KvsKeySpaceName, name), 8);
        assert_eq!(size_of::<KvsKeySpace>(), 40);
        assert_eq!(offset_of!(KvsKeySpace, capacity), 8);
        assert_eq!(offset_of!(KvsKeySpace, name), 32);
        assert_eq!(size_of::<KvsDevice>(), 40);
        assert_eq!(offset_of!(KvsDevice, max_value_len), 16);
        assert_eq!(offset_of!(KvsDevice, extended_info), 32);
        assert_eq!(size_of::<KvsExistList>(), 32);
        assert_eq!(offset_of!(KvsExistList, keys), 8);
        assert_eq!(offset_of!(KvsExistList, length), 16);
        assert_eq!(offset_of!(KvsExistList, result_buffer), 24);
        assert_eq!(size_of::<KvsKeyGroupFilter>(), 8);
        assert_eq!(size_of::<KvsIteratorList>(), 24);
        assert_eq!(offset_of!(KvsIteratorList, end), 4);
        assert_eq!(offset_of!(KvsIteratorList, size), 8);
        assert_eq!(offset_of!(KvsIteratorList, it_list), 16);
        assert_eq!(size_of::<KvsPostprocessContext>(), 72);
        assert_eq!(offset_of!(KvsPostprocessContext, ks_hd), 8);
        assert_eq!(offset_of!(KvsPostprocessContext, private1), 40);
        assert_eq!(offset_of!(KvsPostprocessContext, result), 56);
        assert_eq!(offset_of!(KvsPostprocessContext, iter_hd), 60);
        assert_eq!(offset_of!(KvsPostprocessContext, result_buffer), 64);
        assert_eq!(size_of::<KvsKvpInfo>(), 24);
        assert_eq!(offset_of!(KvsKvpInfo, value_len), 16);
        assert_eq!(size_of::<KvssdLatencyReport>(), 80);
    }
}
