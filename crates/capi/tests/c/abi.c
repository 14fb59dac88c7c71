/*
 * abi.c - the headers' layouts are OpenMPDK/KVSSD v1.6.0's on LP64 (x86-64, AArch64): every
 * struct's size and the offsets programs depend on, every enum value and limit. The Rust side
 * checks the same numbers (crates/capi/src/ffi.rs), so a change on one side fails a test.
 */
#include <stddef.h>

#include "check.h"
#include "kvs_api.h"
#include "kvssd_ext.h"

int main(void) {
  CHECK(sizeof(kvs_result) == 4, "kvs_result is %zu bytes", sizeof(kvs_result));
  CHECK(sizeof(kvs_key) == 16 && offsetof(kvs_key, length) == 8, "kvs_key");
  CHECK(sizeof(kvs_value) == 24 && offsetof(kvs_value, length) == 8 &&
            offsetof(kvs_value, actual_value_size) == 12 && offsetof(kvs_value, offset) == 16,
        "kvs_value");
  CHECK(sizeof(kvs_option_store) == 16 && offsetof(kvs_option_store, assoc) == 8, "option store");
  CHECK(sizeof(kvs_association) == 8 && offsetof(kvs_association, assoc_hint) == 4, "assoc");
  CHECK(sizeof(kvs_option_retrieve) == 1 && sizeof(kvs_option_delete) == 1, "bool options");
  CHECK(sizeof(kvs_option_iterator) == 4 && sizeof(kvs_option_key_space) == 4, "enum options");
  CHECK(sizeof(kvs_key_space_name) == 16 && offsetof(kvs_key_space_name, name) == 8, "ks name");
  CHECK(sizeof(kvs_key_space) == 40 && offsetof(kvs_key_space, capacity) == 8 &&
            offsetof(kvs_key_space, free_size) == 16 && offsetof(kvs_key_space, count) == 24 &&
            offsetof(kvs_key_space, name) == 32,
        "kvs_key_space");
  CHECK(sizeof(kvs_device) == 40 && offsetof(kvs_device, unalloc_capacity) == 8 &&
            offsetof(kvs_device, max_value_len) == 16 && offsetof(kvs_device, max_key_len) == 20 &&
            offsetof(kvs_device, optimal_value_len) == 24 &&
            offsetof(kvs_device, optimal_value_granularity) == 28 &&
            offsetof(kvs_device, extended_info) == 32,
        "kvs_device");
  CHECK(sizeof(kvs_exist_list) == 32 && offsetof(kvs_exist_list, keys) == 8 &&
            offsetof(kvs_exist_list, length) == 16 && offsetof(kvs_exist_list, result_buffer) == 24,
        "kvs_exist_list");
  CHECK(sizeof(kvs_key_group_filter) == 8 && offsetof(kvs_key_group_filter, bit_pattern) == 4,
        "filter");
  CHECK(sizeof(kvs_iterator_list) == 24 && offsetof(kvs_iterator_list, end) == 4 &&
            offsetof(kvs_iterator_list, size) == 8 && offsetof(kvs_iterator_list, it_list) == 16,
        "kvs_iterator_list");
  CHECK(sizeof(kvs_postprocess_context) == 72 && offsetof(kvs_postprocess_context, ks_hd) == 8 &&
            offsetof(kvs_postprocess_context, key) == 16 &&
            offsetof(kvs_postprocess_context, value) == 24 &&
            offsetof(kvs_postprocess_context, option) == 32 &&
            offsetof(kvs_postprocess_context, private1) == 40 &&
            offsetof(kvs_postprocess_context, private2) == 48 &&
            offsetof(kvs_postprocess_context, result) == 56 &&
            offsetof(kvs_postprocess_context, iter_hd) == 60 &&
            offsetof(kvs_postprocess_context, result_buffer) == 64,
        "kvs_postprocess_context");
  CHECK(sizeof(kvs_kvp_info) == 24 && offsetof(kvs_kvp_info, key) == 8 &&
            offsetof(kvs_kvp_info, value_len) == 16,
        "kvs_kvp_info");
  CHECK(sizeof(kvs_iterator_handle) == 1 && sizeof(((kvs_key *)0)->length) == 2, "handle/len");
  CHECK(sizeof(kvs_api_version) == 3, "kvs_api_version");
  CHECK(sizeof(kvssd_latency_report) == 80, "kvssd_latency_report");

  CHECK(KVS_SUCCESS == 0 && KVS_ERR_BUFFER_SMALL == 1 && KVS_ERR_DEV_CAPAPCITY == 2 &&
            KVS_ERR_DEV_NOT_EXIST == 3 && KVS_ERR_KS_CAPACITY == 4 && KVS_ERR_KS_EXIST == 5 &&
            KVS_ERR_KS_INDEX == 6 && KVS_ERR_KS_NAME == 7 && KVS_ERR_KS_NOT_EXIST == 8 &&
            KVS_ERR_KS_NOT_OPEN == 9 && KVS_ERR_KS_OPEN == 0xA &&
            KVS_ERR_ITERATOR_FILTER_INVALID == 0xB && KVS_ERR_ITERATOR_MAX == 0xC &&
            KVS_ERR_ITERATOR_NOT_EXIST == 0xD && KVS_ERR_ITERATOR_OPEN == 0xE &&
            KVS_ERR_KEY_LENGTH_INVALID == 0xF && KVS_ERR_KEY_NOT_EXIST == 0x10 &&
            KVS_ERR_OPTION_INVALID == 0x11 && KVS_ERR_PARAM_INVALID == 0x12 &&
            KVS_ERR_SYS_IO == 0x13 && KVS_ERR_VALUE_LENGTH_INVALID == 0x14 &&
            KVS_ERR_VALUE_OFFSET_INVALID == 0x15 && KVS_ERR_VALUE_OFFSET_MISALIGNED == 0x16 &&
            KVS_ERR_VALUE_UPDATE_NOT_ALLOWED == 0x17 && KVS_ERR_DEV_NOT_OPENED == 0x18,
        "result codes");
  CHECK(KVS_CMD_DELETE == 1 && KVS_CMD_DELETE_GROUP == 2 && KVS_CMD_EXIST == 3 &&
            KVS_CMD_ITER_CREATE == 4 && KVS_CMD_ITER_DELETE == 5 && KVS_CMD_ITER_NEXT == 6 &&
            KVS_CMD_RETRIEVE == 7 && KVS_CMD_STORE == 8,
        "contexts");
  CHECK(KVS_STORE_POST == 0 && KVS_STORE_UPDATE_ONLY == 1 && KVS_STORE_NOOVERWRITE == 2 &&
            KVS_STORE_APPEND == 3 && KVS_ITERATOR_KEY == 0 && KVS_ITERATOR_KEY_VALUE == 1 &&
            KVS_KEY_ORDER_NONE == 0 && KVS_KEY_ORDER_ASCEND == 1 && KVS_KEY_ORDER_DESCEND == 2 &&
            KVS_NOASSOCIATION == 0 && KVS_ASSOCIATION_STREAM == 1,
        "option values");
  CHECK(KVS_MIN_KEY_LENGTH == 4 && KVS_MAX_KEY_LENGTH == 255 && KVS_MIN_VALUE_LENGTH == 0 &&
            KVS_MAX_VALUE_LENGTH == 2 * 1024 * 1024 && KVS_OPTIMAL_VALUE_LENGTH == 4096 &&
            KVS_ALIGNMENT_UNIT == 512 && KVS_VALUE_LENGTH_ALIGNMENT_UNIT == 4 &&
            KVS_MAX_ITERATE_HANDLE == 16 && KVS_MAX_KEY_GROUP_BYTES == 4 &&
            KVS_ITERATOR_BUFFER_SIZE == 32 * 1024 && MAX_KEYSPACE_NAME_LEN == 255,
        "limits");
  return check_finish("abi");
}
