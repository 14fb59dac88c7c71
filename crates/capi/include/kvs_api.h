/*
 * kvs_api.h - the SNIA Key Value Storage API v1.1 as libkvssd implements it.
 *
 * libkvssd is a key-value SSD in software (kvssd): a device kept in a file, or PinK's card
 * simulated. The functions, types and codes are those of OpenMPDK/KVSSD v1.6.0, so programs
 * written for Samsung's library build and run unchanged:
 *
 *     cc app.c -I crates/capi/include -L target/release -lkvssd -pthread
 *
 * Devices are named by URI (kvs_open_device): a file path ("dev.img", "dev.img?create") or a
 * simulated card ("sim:pink?blocks-per-die=32", "sim:pink?pacing"). docs/kv-api.md lists every
 * option and every difference from the specification and from Samsung's emulator.
 *
 * Threads: every function may be called from any thread. Asynchronous (_async) functions check
 * their arguments and return at once; the command runs later and its callback is called from a
 * completion thread of the device. Buffers given to an asynchronous call must stay valid until
 * its callback; a callback may submit further commands.
 */
#ifndef KVS_API_H
#define KVS_API_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kvs_const.h"
#include "kvs_result.h"
#include "kvs_struct.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Buffers ----------------------------------------------------------------------------- */

/* The macros record where a buffer was allocated (the location is not used by libkvssd).
 * Buffers are aligned to `alignment` (rounded up to a power of two, at least 16); kvs_free or
 * free releases them. */
#define _KVS_STRINGIFY(x) #x
#define _KVS_LINE_STRING(x) _KVS_STRINGIFY(x)
#define _KVS_LOCATION __FILE__ ":" _KVS_LINE_STRING(__LINE__)

void *_kvs_malloc(size_t size_bytes, size_t alignment, const char *file);
void *_kvs_zalloc(size_t size_bytes, size_t alignment, const char *file);
void _kvs_free(void *buf, const char *file);

#define kvs_malloc(size, alignment) _kvs_malloc(size, alignment, _KVS_LOCATION)
#define kvs_zalloc(size, alignment) _kvs_zalloc(size, alignment, _KVS_LOCATION)
#define kvs_free(buf) _kvs_free(buf, _KVS_LOCATION)

/* ---- Devices ----------------------------------------------------------------------------- */

/* Opens the device URI names. KVS_ERR_PARAM_INVALID for a NULL argument or a malformed URI
 * (the reason goes to standard error), KVS_ERR_DEV_NOT_EXIST for a missing file, KVS_ERR_SYS_IO
 * if the device is open already (here or in another process) or cannot be read. */
kvs_result kvs_open_device(char *URI, kvs_device_handle *dev_hd);

/* Waits for the device's asynchronous commands, closes its key spaces and iterators, and closes
 * it (a file device is checkpointed). KVS_ERR_DEV_NOT_OPENED for a handle that is not open. */
kvs_result kvs_close_device(kvs_device_handle dev_hd);

kvs_result kvs_get_device_info(kvs_device_handle dev_hd, kvs_device *dev_info);
kvs_result kvs_get_device_capacity(kvs_device_handle dev_hd, uint64_t *dev_capacity);
/* Live pairs' share of the capacity, 0 (0.00%) to 10000 (100.00%). */
kvs_result kvs_get_device_utilization(kvs_device_handle dev_hd, uint32_t *dev_utilization);
kvs_result kvs_get_min_key_length(kvs_device_handle dev_hd, uint32_t *min_key_length);
kvs_result kvs_get_max_key_length(kvs_device_handle dev_hd, uint32_t *max_key_length);
kvs_result kvs_get_min_value_length(kvs_device_handle dev_hd, uint32_t *min_value_length);
kvs_result kvs_get_max_value_length(kvs_device_handle dev_hd, uint32_t *max_value_length);
kvs_result kvs_get_optimal_value_length(kvs_device_handle dev_hd, uint32_t *opt_value_length);

/* ---- Key spaces -------------------------------------------------------------------------- */

/* Creates a key space of `size` bytes (0: no limit but the device's). Names are 1 to
 * MAX_KEYSPACE_NAME_LEN bytes of UTF-8 without NUL, unique on the device, and kept durably. */
kvs_result kvs_create_key_space(kvs_device_handle dev_hd, kvs_key_space_name *key_space_name,
                                uint64_t size, kvs_option_key_space opt);

/* Deletes a key space and all its pairs; its open handles and iterators are closed. */
kvs_result kvs_delete_key_space(kvs_device_handle dev_hd, kvs_key_space_name *key_space_name);

/* Lists names from the index-th (1 is the first) into names[0], names[1], ... as many as
 * buffer_size bytes of kvs_key_space_name hold. Each names[i].name must hold
 * names[i].name_len + 1 bytes; the name is written NUL-terminated and name_len set to its
 * length. *ks_cnt is the number written. */
kvs_result kvs_list_key_spaces(kvs_device_handle dev_hd, uint32_t index, uint32_t buffer_size,
                               kvs_key_space_name *names, uint32_t *ks_cnt);

kvs_result kvs_open_key_space(kvs_device_handle dev_hd, char *name, kvs_key_space_handle *ks_hd);
kvs_result kvs_close_key_space(kvs_key_space_handle ks_hd);
kvs_result kvs_get_key_space_info(kvs_key_space_handle ks_hd, kvs_key_space *ks);

/* ---- Pairs ------------------------------------------------------------------------------- */

/* Key length, key and value length of a pair (info->key must hold key->length bytes). */
kvs_result kvs_get_kvp_info(kvs_key_space_handle ks_hd, kvs_key *key, kvs_kvp_info *info);

/* Reads a value from value->offset into value->value (value->length bytes). A buffer too small
 * for the rest of the value gets what fits and KVS_ERR_BUFFER_SMALL. opt may be NULL. */
kvs_result kvs_retrieve_kvp(kvs_key_space_handle ks_hd, kvs_key *key, kvs_option_retrieve *opt,
                            kvs_value *value);
kvs_result kvs_retrieve_kvp_async(kvs_key_space_handle ks_hd, kvs_key *key,
                                  kvs_option_retrieve *opt, void *private1, void *private2,
                                  kvs_value *value, kvs_postprocess_function post_fn);

/* Writes a pair as opt->st_type says (opt may be NULL: KVS_STORE_POST). Each store is atomic,
 * APPEND included, and durable on a file device when it returns (or calls back). */
kvs_result kvs_store_kvp(kvs_key_space_handle ks_hd, kvs_key *key, kvs_value *value,
                         kvs_option_store *opt);
kvs_result kvs_store_kvp_async(kvs_key_space_handle ks_hd, kvs_key *key, kvs_value *value,
                               kvs_option_store *opt, void *private1, void *private2,
                               kvs_postprocess_function post_fn);

/* Deletes a pair (opt may be NULL). */
kvs_result kvs_delete_kvp(kvs_key_space_handle ks_hd, kvs_key *key, kvs_option_delete *opt);
kvs_result kvs_delete_kvp_async(kvs_key_space_handle ks_hd, kvs_key *key, kvs_option_delete *opt,
                                void *private1, void *private2, kvs_postprocess_function post_fn);

/* Deletes every pair whose key is in the group. */
kvs_result kvs_delete_key_group(kvs_key_space_handle ks_hd, kvs_key_group_filter *grp_fltr);
kvs_result kvs_delete_key_group_async(kvs_key_space_handle ks_hd, kvs_key_group_filter *grp_fltr,
                                      void *private1, void *private2,
                                      kvs_postprocess_function post_fn);

/* Checks key_cnt keys; list->result_buffer (list->length bytes, at least (key_cnt + 7) / 8)
 * gets one bit per key. */
kvs_result kvs_exist_kv_pairs(kvs_key_space_handle ks_hd, uint32_t key_cnt, kvs_key *keys,
                              kvs_exist_list *list);
kvs_result kvs_exist_kv_pairs_async(kvs_key_space_handle ks_hd, uint32_t key_cnt, kvs_key *keys,
                                    kvs_exist_list *list, void *private1, void *private2,
                                    kvs_postprocess_function post_fn);

/* ---- Iterators --------------------------------------------------------------------------- */

/* Opens an iterator over a snapshot of the key space: later writes do not show in it. */
kvs_result kvs_create_iterator(kvs_key_space_handle ks_hd, kvs_option_iterator *iter_op,
                               kvs_key_group_filter *iter_fltr, kvs_iterator_handle *iter_hd);
kvs_result kvs_delete_iterator(kvs_key_space_handle ks_hd, kvs_iterator_handle iter_hd);

/* Fills iter_list->it_list (iter_list->size must be KVS_ITERATOR_BUFFER_SIZE). */
kvs_result kvs_iterate_next(kvs_key_space_handle ks_hd, kvs_iterator_handle iter_hd,
                            kvs_iterator_list *iter_list);
kvs_result kvs_iterate_next_async(kvs_key_space_handle ks_hd, kvs_iterator_handle iter_hd,
                                  kvs_iterator_list *iter_list, void *private1, void *private2,
                                  kvs_postprocess_function post_fn);

#ifdef __cplusplus
}
#endif

#endif /* KVS_API_H */
