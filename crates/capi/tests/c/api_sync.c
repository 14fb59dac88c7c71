/*
 * api_sync.c - every synchronous function of libkvssd with valid and invalid arguments: each
 * result code, each output field and each byte returned. Run against the device URI given (a
 * new file image, or a simulated card):
 *
 *   api_sync URI        URI names a device with no key spaces
 *
 * Covers: buffers; device open/close/info/capacity/utilization/limits; key spaces create,
 * delete, list, open, close, info; store (POST, UPDATE_ONLY, NOOVERWRITE, APPEND, associations,
 * NULL option); retrieve (whole, small buffer, offsets, retrieve-and-delete); delete; exist; key
 * info; iterators (filters and their byte order, snapshot, key and key-value layouts, batches,
 * limits); key-group delete; handles used after close.
 */
#include <stdint.h>

#include "check.h"
#include "kvs_api.h"

static kvs_key key_of(char *bytes, uint16_t length) {
  kvs_key key = {bytes, length};
  return key;
}

static kvs_value value_of(void *bytes, uint32_t length) {
  kvs_value value = {bytes, length, 0, 0};
  return value;
}

static kvs_key_space_name name_of(const char *name) {
  kvs_key_space_name named = {(uint32_t)strlen(name), (char *)name};
  return named;
}

static void test_buffers(void) {
  char *buffer = (char *)kvs_malloc(100, 4096);
  CHECK(buffer != NULL && ((uintptr_t)buffer % 4096) == 0, "kvs_malloc alignment");
  memset(buffer, 1, 100);
  kvs_free(buffer);
  unsigned char *zeroed = (unsigned char *)kvs_zalloc(5000, 512);
  CHECK(zeroed != NULL && ((uintptr_t)zeroed % 512) == 0, "kvs_zalloc alignment");
  int all_zero = 1;
  for (int i = 0; i < 5000; i++) all_zero &= zeroed[i] == 0;
  CHECK(all_zero, "kvs_zalloc zeroes");
  free(zeroed); /* libkvssd's buffers may also be released with free */
  char *odd = (char *)kvs_malloc(10, 3);
  CHECK(odd != NULL && ((uintptr_t)odd % 4) == 0, "alignment 3 rounds up");
  kvs_free(odd);
  kvs_free(NULL);
}

static void test_device(kvs_device_handle dev, const char *uri) {
  kvs_device_handle other;
  EXPECT(kvs_open_device(NULL, &other), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_open_device((char *)uri, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_open_device((char *)"sim:pink?colour=blue", &other), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_open_device((char *)"sim:floppy", &other), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_open_device((char *)"/nonexistent/kvssd.img", &other), KVS_ERR_DEV_NOT_EXIST);
  EXPECT(kvs_open_device((char *)uri, &other), KVS_ERR_SYS_IO); /* open already */

  kvs_device_handle bogus = (kvs_device_handle)(uintptr_t)0x7777;
  kvs_device info;
  uint64_t capacity = 0;
  uint32_t value = 0;
  EXPECT(kvs_get_device_info(NULL, &info), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_device_info(dev, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_device_info(bogus, &info), KVS_ERR_DEV_NOT_OPENED);
  EXPECT(kvs_get_device_info(dev, &info), KVS_SUCCESS);
  EXPECT(kvs_get_device_capacity(dev, &capacity), KVS_SUCCESS);
  CHECK(info.capacity == capacity && capacity > 0, "capacity %llu", (unsigned long long)capacity);
  CHECK(info.unalloc_capacity == capacity, "nothing reserved yet");
  CHECK(info.max_key_len == 255 && info.max_value_len == 2 * 1024 * 1024 &&
            info.optimal_value_len == 4096 && info.optimal_value_granularity > 0 &&
            info.extended_info == NULL,
        "device info fields");
  EXPECT(kvs_get_device_capacity(dev, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_device_capacity(bogus, &capacity), KVS_ERR_DEV_NOT_OPENED);
  EXPECT(kvs_get_device_utilization(dev, &value), KVS_SUCCESS);
  CHECK(value == 0, "utilization of an empty device %u", value);
  EXPECT(kvs_get_device_utilization(NULL, &value), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_device_utilization(dev, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_min_key_length(dev, &value), KVS_SUCCESS);
  CHECK(value == 4, "min key %u", value);
  EXPECT(kvs_get_max_key_length(dev, &value), KVS_SUCCESS);
  CHECK(value == 255, "max key %u", value);
  EXPECT(kvs_get_min_value_length(dev, &value), KVS_SUCCESS);
  CHECK(value == 0, "min value %u", value);
  EXPECT(kvs_get_max_value_length(dev, &value), KVS_SUCCESS);
  CHECK(value == 2 * 1024 * 1024, "max value %u", value);
  EXPECT(kvs_get_optimal_value_length(dev, &value), KVS_SUCCESS);
  CHECK(value == 4096, "optimal value %u", value);
  EXPECT(kvs_get_min_key_length(bogus, &value), KVS_ERR_DEV_NOT_OPENED);
  EXPECT(kvs_get_max_key_length(dev, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_min_value_length(NULL, &value), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_max_value_length(bogus, &value), KVS_ERR_DEV_NOT_OPENED);
  EXPECT(kvs_get_optimal_value_length(dev, NULL), KVS_ERR_PARAM_INVALID);
}

static void test_key_spaces(kvs_device_handle dev) {
  kvs_option_key_space none = {KVS_KEY_ORDER_NONE};
  kvs_option_key_space descend = {KVS_KEY_ORDER_DESCEND};
  kvs_key_space_name alpha = name_of("alpha");
  kvs_key_space_name beta = name_of("beta");
  kvs_device_handle bogus = (kvs_device_handle)(uintptr_t)0x7777;
  char long_name[300];
  memset(long_name, 'n', sizeof(long_name));
  long_name[299] = 0;
  kvs_key_space_name too_long = {256, long_name};
  kvs_key_space_name empty = {0, (char *)""};
  kvs_key_space_name with_nul = {5, (char *)"ab\0cd"};
  kvs_key_space_name null_name = {4, NULL};
  uint64_t capacity;
  kvs_get_device_capacity(dev, &capacity);

  EXPECT(kvs_create_key_space(dev, NULL, 0, none), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_create_key_space(dev, &null_name, 0, none), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_create_key_space(dev, &empty, 0, none), KVS_ERR_KS_NAME);
  EXPECT(kvs_create_key_space(dev, &too_long, 0, none), KVS_ERR_KS_NAME);
  EXPECT(kvs_create_key_space(dev, &with_nul, 0, none), KVS_ERR_KS_NAME);
  EXPECT(kvs_create_key_space(bogus, &alpha, 0, none), KVS_ERR_DEV_NOT_EXIST);
  EXPECT(kvs_create_key_space(dev, &alpha, 0, descend), KVS_ERR_OPTION_INVALID);
  EXPECT(kvs_create_key_space(dev, &alpha, capacity + 1, none), KVS_ERR_DEV_CAPAPCITY);
  EXPECT(kvs_create_key_space(dev, &alpha, 0, none), KVS_SUCCESS);
  EXPECT(kvs_create_key_space(dev, &alpha, 0, none), KVS_ERR_KS_EXIST);
  EXPECT(kvs_create_key_space(dev, &beta, 1 << 20, none), KVS_SUCCESS);
  kvs_device info;
  kvs_get_device_info(dev, &info);
  CHECK(info.unalloc_capacity == capacity - (1 << 20), "unallocated after a 1 MiB key space");

  /* List: index from 1, names into names[0..], name_len in is the buffer's room. */
  char buffers[3][MAX_KEYSPACE_NAME_LEN + 1];
  kvs_key_space_name names[3];
  for (int i = 0; i < 3; i++) {
    memset(buffers[i], '#', sizeof(buffers[i]));
    names[i].name = buffers[i];
    names[i].name_len = MAX_KEYSPACE_NAME_LEN;
  }
  uint32_t count = 99;
  EXPECT(kvs_list_key_spaces(dev, 1, sizeof(names), names, &count), KVS_SUCCESS);
  CHECK(count == 2 && names[0].name_len == 5 && strcmp(buffers[0], "alpha") == 0 &&
            names[1].name_len == 4 && strcmp(buffers[1], "beta") == 0 && buffers[2][0] == '#',
        "listed %u: %s %s", count, buffers[0], buffers[1]);
  names[0].name_len = MAX_KEYSPACE_NAME_LEN;
  EXPECT(kvs_list_key_spaces(dev, 2, sizeof(names), names, &count), KVS_SUCCESS);
  CHECK(count == 1 && strcmp(buffers[0], "beta") == 0, "from index 2: %u %s", count, buffers[0]);
  names[0].name_len = MAX_KEYSPACE_NAME_LEN;
  EXPECT(kvs_list_key_spaces(dev, 1, sizeof(kvs_key_space_name), names, &count), KVS_SUCCESS);
  CHECK(count == 1 && strcmp(buffers[0], "alpha") == 0, "one slot: %u", count);
  EXPECT(kvs_list_key_spaces(dev, 0, sizeof(names), names, &count), KVS_ERR_KS_INDEX);
  EXPECT(kvs_list_key_spaces(dev, 3, sizeof(names), names, &count), KVS_ERR_KS_INDEX);
  EXPECT(kvs_list_key_spaces(dev, 1, 0, names, &count), KVS_ERR_BUFFER_SMALL);
  EXPECT(kvs_list_key_spaces(dev, 1, sizeof(names), NULL, &count), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_list_key_spaces(dev, 1, sizeof(names), names, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_list_key_spaces(bogus, 1, sizeof(names), names, &count), KVS_ERR_DEV_NOT_EXIST);
  names[0].name_len = 2;
  EXPECT(kvs_list_key_spaces(dev, 1, sizeof(names), names, &count), KVS_ERR_BUFFER_SMALL);

  /* Open, info, close. */
  kvs_key_space_handle ks, again;
  EXPECT(kvs_open_key_space(dev, NULL, &ks), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_open_key_space(dev, (char *)"alpha", NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_open_key_space(dev, (char *)"", &ks), KVS_ERR_KS_NAME);
  EXPECT(kvs_open_key_space(dev, long_name, &ks), KVS_ERR_KS_NAME);
  EXPECT(kvs_open_key_space(dev, (char *)"gamma", &ks), KVS_ERR_KS_NOT_EXIST);
  EXPECT(kvs_open_key_space(bogus, (char *)"alpha", &ks), KVS_ERR_DEV_NOT_EXIST);
  EXPECT(kvs_open_key_space(dev, (char *)"beta", &ks), KVS_SUCCESS);
  EXPECT(kvs_open_key_space(dev, (char *)"beta", &again), KVS_ERR_KS_OPEN);
  char info_name[MAX_KEYSPACE_NAME_LEN + 1];
  kvs_key_space_name info_named = {0, info_name};
  kvs_key_space ks_info;
  memset(&ks_info, 0xee, sizeof(ks_info));
  ks_info.name = &info_named;
  EXPECT(kvs_get_key_space_info(ks, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_key_space_info(NULL, &ks_info), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_key_space_info(ks, &ks_info), KVS_SUCCESS);
  CHECK(ks_info.opened && ks_info.capacity == (1 << 20) && ks_info.free_size == (1 << 20) &&
            ks_info.count == 0 && info_named.name_len == 4 && strcmp(info_name, "beta") == 0,
        "beta's info");
  EXPECT(kvs_close_key_space(NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_close_key_space((kvs_key_space_handle)(uintptr_t)0x5550), KVS_ERR_KS_NOT_OPEN);
  EXPECT(kvs_close_key_space(ks), KVS_SUCCESS);
  EXPECT(kvs_close_key_space(ks), KVS_ERR_KS_NOT_OPEN);
  EXPECT(kvs_get_key_space_info(ks, &ks_info), KVS_ERR_KS_NOT_OPEN);

  /* A key space of 1 MiB takes no more than that. */
  EXPECT(kvs_open_key_space(dev, (char *)"beta", &ks), KVS_SUCCESS);
  char key[16];
  char *big = (char *)calloc(1, 300000);
  kvs_result ret = KVS_SUCCESS;
  int stored = 0;
  for (int i = 0; i < 10 && ret == KVS_SUCCESS; i++) {
    snprintf(key, sizeof(key), "big%03d", i);
    kvs_key k = key_of(key, 8);
    kvs_value v = value_of(big, 300000);
    ret = kvs_store_kvp(ks, &k, &v, NULL);
    if (ret == KVS_SUCCESS) stored++;
  }
  CHECK(ret == KVS_ERR_KS_CAPACITY && stored >= 2 && stored <= 3, "quota: %d stored, then 0x%x",
        stored, ret);
  free(big);

  /* Deleting an open key space closes its handles and drops its pairs. */
  EXPECT(kvs_delete_key_space(dev, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_delete_key_space(bogus, &beta), KVS_ERR_DEV_NOT_EXIST);
  EXPECT(kvs_delete_key_space(dev, &beta), KVS_SUCCESS);
  EXPECT(kvs_get_key_space_info(ks, &ks_info), KVS_ERR_KS_NOT_OPEN);
  EXPECT(kvs_delete_key_space(dev, &beta), KVS_ERR_KS_NOT_EXIST);
  EXPECT(kvs_create_key_space(dev, &beta, 0, none), KVS_SUCCESS);
  EXPECT(kvs_open_key_space(dev, (char *)"beta", &ks), KVS_SUCCESS);
  EXPECT(kvs_get_key_space_info(ks, &ks_info), KVS_SUCCESS);
  CHECK(ks_info.count == 0, "a recreated key space is empty: %llu",
        (unsigned long long)ks_info.count);
  EXPECT(kvs_close_key_space(ks), KVS_SUCCESS);
  EXPECT(kvs_delete_key_space(dev, &beta), KVS_SUCCESS);
}

static void test_store_retrieve(kvs_key_space_handle ks) {
  char key[300];
  memset(key, 'k', sizeof(key));
  char value[2000];
  for (int i = 0; i < 2000; i++) value[i] = (char)(i * 31);
  char out[2100];
  kvs_key_space_handle bogus = (kvs_key_space_handle)(uintptr_t)0x5550;
  kvs_option_store post = {KVS_STORE_POST, NULL};
  kvs_key k = key_of(key, 8);
  kvs_value v = value_of(value, 1000);

  /* Argument checks, in OpenMPDK's order. */
  EXPECT(kvs_store_kvp(NULL, &k, &v, &post), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_store_kvp(bogus, &k, &v, &post), KVS_ERR_KS_NOT_OPEN);
  EXPECT(kvs_store_kvp(ks, NULL, &v, &post), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_store_kvp(ks, &k, NULL, &post), KVS_ERR_PARAM_INVALID);
  kvs_key short_key = key_of(key, 3), long_key = key_of(key, 256), null_key = {NULL, 8};
  EXPECT(kvs_store_kvp(ks, &short_key, &v, &post), KVS_ERR_KEY_LENGTH_INVALID);
  EXPECT(kvs_store_kvp(ks, &long_key, &v, &post), KVS_ERR_KEY_LENGTH_INVALID);
  EXPECT(kvs_store_kvp(ks, &null_key, &v, &post), KVS_ERR_PARAM_INVALID);
  kvs_value huge = value_of(value, 2 * 1024 * 1024 + 1);
  EXPECT(kvs_store_kvp(ks, &k, &huge, &post), KVS_ERR_VALUE_LENGTH_INVALID);
  kvs_value misaligned = {value, 10, 0, 100}, offset = {value, 10, 0, 512};
  EXPECT(kvs_store_kvp(ks, &k, &misaligned, &post), KVS_ERR_VALUE_OFFSET_MISALIGNED);
  EXPECT(kvs_store_kvp(ks, &k, &offset, &post), KVS_ERR_VALUE_OFFSET_INVALID);
  kvs_value null_value = {NULL, 10, 0, 0};
  EXPECT(kvs_store_kvp(ks, &k, &null_value, &post), KVS_ERR_PARAM_INVALID);
  kvs_option_store bad_type = {(kvs_store_type)9, NULL};
  EXPECT(kvs_store_kvp(ks, &k, &v, &bad_type), KVS_ERR_OPTION_INVALID);
  kvs_association bad_assoc = {(kvs_association_type)5, 1};
  kvs_option_store with_bad_assoc = {KVS_STORE_POST, &bad_assoc};
  EXPECT(kvs_store_kvp(ks, &k, &v, &with_bad_assoc), KVS_ERR_OPTION_INVALID);
  kvs_option_retrieve plain = {false};
  kvs_value o = value_of(out, sizeof(out));
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, &o), KVS_ERR_KEY_NOT_EXIST); /* nothing was stored */

  /* Store kinds. */
  kvs_option_store update = {KVS_STORE_UPDATE_ONLY, NULL};
  kvs_option_store insert = {KVS_STORE_NOOVERWRITE, NULL};
  kvs_option_store append = {KVS_STORE_APPEND, NULL};
  kvs_association stream = {KVS_ASSOCIATION_STREAM, 7};
  kvs_option_store streamed = {KVS_STORE_POST, &stream};
  EXPECT(kvs_store_kvp(ks, &k, &v, &update), KVS_ERR_KEY_NOT_EXIST);
  EXPECT(kvs_store_kvp(ks, &k, &v, &insert), KVS_SUCCESS);
  kvs_value other = value_of(value + 1000, 1000);
  EXPECT(kvs_store_kvp(ks, &k, &other, &insert), KVS_ERR_VALUE_UPDATE_NOT_ALLOWED);
  o = value_of(out, sizeof(out));
  EXPECT(kvs_retrieve_kvp(ks, &k, NULL, &o), KVS_SUCCESS);
  CHECK(o.length == 1000 && o.actual_value_size == 1000 && memcmp(out, value, 1000) == 0,
        "NOOVERWRITE kept the first value");
  EXPECT(kvs_store_kvp(ks, &k, &other, &update), KVS_SUCCESS);
  o = value_of(out, sizeof(out));
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, &o), KVS_SUCCESS);
  CHECK(o.length == 1000 && memcmp(out, value + 1000, 1000) == 0, "UPDATE_ONLY replaced it");
  EXPECT(kvs_store_kvp(ks, &k, &v, &streamed), KVS_SUCCESS);
  EXPECT(kvs_store_kvp(ks, &k, &other, &append), KVS_SUCCESS);
  o = value_of(out, sizeof(out));
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, &o), KVS_SUCCESS);
  CHECK(o.length == 2000 && o.actual_value_size == 2000 && memcmp(out, value, 2000) == 0,
        "APPEND concatenated: %u bytes", o.length);
  kvs_key appended_new = key_of(key + 100, 9);
  memcpy(key + 100, "fresh-key", 9);
  EXPECT(kvs_store_kvp(ks, &appended_new, &v, &append), KVS_SUCCESS);
  o = value_of(out, sizeof(out));
  EXPECT(kvs_retrieve_kvp(ks, &appended_new, &plain, &o), KVS_SUCCESS);
  CHECK(o.length == 1000 && memcmp(out, value, 1000) == 0, "APPEND to a missing key inserts");
  char *nearly_full = (char *)calloc(1, 2 * 1024 * 1024);
  kvs_value full = value_of(nearly_full, 2 * 1024 * 1024 - 500);
  EXPECT(kvs_store_kvp(ks, &appended_new, &full, &append), KVS_ERR_VALUE_LENGTH_INVALID);
  free(nearly_full);
  kvs_value empty = {NULL, 0, 0, 0};
  kvs_key empty_key = key_of((char *)"empty-value", 11);
  EXPECT(kvs_store_kvp(ks, &empty_key, &empty, NULL), KVS_SUCCESS);
  o = value_of(out, sizeof(out));
  EXPECT(kvs_retrieve_kvp(ks, &empty_key, NULL, &o), KVS_SUCCESS);
  CHECK(o.length == 0 && o.actual_value_size == 0, "empty value: %u", o.length);

  /* Retrieve: small buffers, offsets, retrieve-and-delete. */
  EXPECT(kvs_retrieve_kvp(NULL, &k, &plain, &o), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_retrieve_kvp(bogus, &k, &plain, &o), KVS_ERR_KS_NOT_OPEN);
  EXPECT(kvs_retrieve_kvp(ks, NULL, &plain, &o), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_retrieve_kvp(ks, &short_key, &plain, &o), KVS_ERR_KEY_LENGTH_INVALID);
  memset(out, 0, sizeof(out));
  kvs_value small = value_of(out, 100);
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, &small), KVS_ERR_BUFFER_SMALL);
  CHECK(small.length == 100 && small.actual_value_size == 2000 && memcmp(out, value, 100) == 0 &&
            out[100] == 0,
        "partial data: %u of %u", small.length, small.actual_value_size);
  kvs_value from = {out, sizeof(out), 0, 512};
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, &from), KVS_SUCCESS);
  CHECK(from.length == 1488 && from.actual_value_size == 1488 &&
            memcmp(out, value + 512, 1488) == 0,
        "from offset 512: %u, actual %u", from.length, from.actual_value_size);
  kvs_value from_small = {out, 100, 0, 1024};
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, &from_small), KVS_ERR_BUFFER_SMALL);
  CHECK(from_small.length == 100 && from_small.actual_value_size == 976 &&
            memcmp(out, value + 1024, 100) == 0,
        "offset and small buffer");
  kvs_value past = {out, sizeof(out), 0, 2048};
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, &past), KVS_ERR_VALUE_OFFSET_INVALID);
  kvs_value crooked = {out, sizeof(out), 0, 513};
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, &crooked), KVS_ERR_VALUE_OFFSET_MISALIGNED);
  kvs_value no_buffer = {NULL, 16, 0, 0};
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, &no_buffer), KVS_ERR_PARAM_INVALID);
  kvs_option_retrieve take = {true};
  small = value_of(out, 100);
  EXPECT(kvs_retrieve_kvp(ks, &k, &take, &small), KVS_ERR_BUFFER_SMALL);
  o = value_of(out, sizeof(out));
  EXPECT(kvs_retrieve_kvp(ks, &k, &take, &o), KVS_SUCCESS); /* kept after BUFFER_SMALL */
  CHECK(o.length == 2000 && memcmp(out, value, 2000) == 0, "retrieve-and-delete's value");
  EXPECT(kvs_retrieve_kvp(ks, &k, &plain, &o), KVS_ERR_KEY_NOT_EXIST);

  /* Key info. */
  uint8_t info_key[255];
  kvs_kvp_info info = {0, info_key, 0};
  EXPECT(kvs_get_kvp_info(ks, &appended_new, &info), KVS_SUCCESS);
  CHECK(info.key_len == 9 && memcmp(info_key, "fresh-key", 9) == 0 && info.value_len == 1000,
        "kvp info: %u %u", info.key_len, info.value_len);
  EXPECT(kvs_get_kvp_info(ks, &k, &info), KVS_ERR_KEY_NOT_EXIST);
  EXPECT(kvs_get_kvp_info(ks, NULL, &info), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_kvp_info(ks, &k, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_get_kvp_info(bogus, &k, &info), KVS_ERR_KS_NOT_OPEN);
  EXPECT(kvs_get_kvp_info(ks, &long_key, &info), KVS_ERR_KEY_LENGTH_INVALID);
  kvs_kvp_info no_key = {0, NULL, 0};
  EXPECT(kvs_get_kvp_info(ks, &appended_new, &no_key), KVS_ERR_PARAM_INVALID);

  /* Delete. */
  kvs_option_delete quiet = {false}, loud = {true};
  EXPECT(kvs_delete_kvp(NULL, &k, &quiet), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_delete_kvp(bogus, &k, &quiet), KVS_ERR_KS_NOT_OPEN);
  EXPECT(kvs_delete_kvp(ks, NULL, &quiet), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_delete_kvp(ks, &short_key, &quiet), KVS_ERR_KEY_LENGTH_INVALID);
  EXPECT(kvs_delete_kvp(ks, &k, &quiet), KVS_SUCCESS); /* absent: not an error */
  EXPECT(kvs_delete_kvp(ks, &k, &loud), KVS_ERR_KEY_NOT_EXIST);
  EXPECT(kvs_delete_kvp(ks, &appended_new, &loud), KVS_SUCCESS);
  EXPECT(kvs_delete_kvp(ks, &empty_key, NULL), KVS_SUCCESS);
  EXPECT(kvs_retrieve_kvp(ks, &appended_new, &plain, &o), KVS_ERR_KEY_NOT_EXIST);
}

static void test_exist(kvs_key_space_handle ks) {
  char keys[10][8];
  kvs_key list_keys[10];
  for (int i = 0; i < 10; i++) {
    snprintf(keys[i], sizeof(keys[i]), "ex%05d", i);
    list_keys[i] = key_of(keys[i], 7);
    if (i % 3 == 0) {
      kvs_value v = value_of(keys[i], 7);
      EXPECT(kvs_store_kvp(ks, &list_keys[i], &v, NULL), KVS_SUCCESS);
    }
  }
  uint8_t bits[4] = {0xaa, 0xaa, 0xaa, 0xaa};
  kvs_exist_list list = {0, NULL, sizeof(bits), bits};
  EXPECT(kvs_exist_kv_pairs(ks, 10, list_keys, &list), KVS_SUCCESS);
  /* keys 0, 3, 6, 9: bits 0, 3, 6 of byte 0 and bit 1 of byte 1. */
  CHECK(bits[0] == 0x49 && bits[1] == 0x02 && bits[2] == 0xaa && list.length == 2 &&
            list.num_keys == 10 && list.keys == list_keys,
        "exist bits %02x %02x %02x, length %u", bits[0], bits[1], bits[2], list.length);
  kvs_exist_list too_small = {0, NULL, 1, bits};
  EXPECT(kvs_exist_kv_pairs(ks, 10, list_keys, &too_small), KVS_ERR_BUFFER_SMALL);
  EXPECT(kvs_exist_kv_pairs(ks, 0, list_keys, &list), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_exist_kv_pairs(ks, 10, NULL, &list), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_exist_kv_pairs(ks, 10, list_keys, NULL), KVS_ERR_PARAM_INVALID);
  kvs_exist_list no_buffer = {0, NULL, 4, NULL};
  EXPECT(kvs_exist_kv_pairs(ks, 10, list_keys, &no_buffer), KVS_ERR_PARAM_INVALID);
  list_keys[4].length = 2;
  list.length = sizeof(bits);
  EXPECT(kvs_exist_kv_pairs(ks, 10, list_keys, &list), KVS_ERR_KEY_LENGTH_INVALID);
  list_keys[4].length = 7;
  EXPECT(kvs_exist_kv_pairs((kvs_key_space_handle)(uintptr_t)0x5550, 10, list_keys, &list),
         KVS_ERR_KS_NOT_OPEN);
  for (int i = 0; i < 10; i += 3) EXPECT(kvs_delete_kvp(ks, &list_keys[i], NULL), KVS_SUCCESS);
}

/* Reads every entry of an iterator; returns the number, checking the layout. */
static int iterate_all(kvs_key_space_handle ks, kvs_iterator_handle iterator, int with_values,
                       char seen[][32], int seen_max, int *batches) {
  uint8_t *buffer = (uint8_t *)kvs_malloc(KVS_ITERATOR_BUFFER_SIZE, 4096);
  kvs_iterator_list list;
  int count = 0;
  *batches = 0;
  do {
    list.size = KVS_ITERATOR_BUFFER_SIZE;
    list.it_list = buffer;
    list.end = false;
    kvs_result ret = kvs_iterate_next(ks, iterator, &list);
    CHECK(ret == KVS_SUCCESS, "iterate next: 0x%x", ret);
    if (ret != KVS_SUCCESS) break;
    (*batches)++;
    uint8_t *at = buffer;
    for (uint32_t e = 0; e < list.num_entries; e++) {
      uint32_t klen;
      memcpy(&klen, at, 4);
      at += 4;
      if (count < seen_max) {
        memset(seen[count], 0, 32);
        memcpy(seen[count], at, klen < 31 ? klen : 31);
      }
      at += klen;
      if (with_values) {
        uint32_t vlen;
        memcpy(&vlen, at, 4);
        at += 4;
        /* Values are "v:" followed by the key. */
        CHECK(vlen == klen + 2 && memcmp(at, "v:", 2) == 0 && memcmp(at + 2, at - klen - 4, klen) == 0,
              "value of an iterated pair");
        at += vlen;
      }
      count++;
    }
    CHECK((uint32_t)(at - buffer) == list.size, "used %u, parsed %ld", list.size,
          (long)(at - buffer));
  } while (!list.end);
  kvs_free(buffer);
  return count;
}

static void store_pair(kvs_key_space_handle ks, const char *key) {
  char value[300];
  snprintf(value, sizeof(value), "v:%s", key);
  kvs_key k = key_of((char *)key, (uint16_t)strlen(key));
  kvs_value v = value_of(value, (uint32_t)strlen(value));
  EXPECT(kvs_store_kvp(ks, &k, &v, NULL), KVS_SUCCESS);
}

static void test_iterators(kvs_key_space_handle ks) {
  kvs_option_iterator keys_only = {KVS_ITERATOR_KEY}, pairs = {KVS_ITERATOR_KEY_VALUE};
  kvs_option_iterator bad_type = {(kvs_iterator_type)7};
  kvs_key_group_filter all = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  kvs_key_group_filter holes = {{0, 0xff, 0, 0}, {0, 0, 0, 0}};
  kvs_iterator_handle it = 0, it2 = 0;
  kvs_key_space_handle bogus = (kvs_key_space_handle)(uintptr_t)0x5550;
  /* 3000 keys in four groups by their fourth byte, more than one 32 KiB batch of keys. */
  char key[32];
  for (int i = 0; i < 3000; i++) {
    snprintf(key, sizeof(key), "it%c%c%05d", 'a' + i % 2, 'w' + i % 4, i);
    store_pair(ks, key);
  }

  EXPECT(kvs_create_iterator(NULL, &keys_only, &all, &it), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_create_iterator(bogus, &keys_only, &all, &it), KVS_ERR_KS_NOT_OPEN);
  EXPECT(kvs_create_iterator(ks, NULL, &all, &it), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_create_iterator(ks, &keys_only, NULL, &it), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_create_iterator(ks, &keys_only, &all, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_create_iterator(ks, &bad_type, &all, &it), KVS_ERR_OPTION_INVALID);
  EXPECT(kvs_create_iterator(ks, &keys_only, &holes, &it), KVS_ERR_ITERATOR_FILTER_INVALID);

  /* The whole key space, keys only, in order, over several batches; a snapshot. */
  EXPECT(kvs_create_iterator(ks, &keys_only, &all, &it), KVS_SUCCESS);
  CHECK(it >= 1 && it <= KVS_MAX_ITERATE_HANDLE, "handle %u", it);
  store_pair(ks, "itzz-after-the-snapshot");
  kvs_key first = key_of((char *)"itaw00000", 9);
  EXPECT(kvs_delete_kvp(ks, &first, NULL), KVS_SUCCESS);
  static char seen[3100][32];
  int batches = 0;
  int count = iterate_all(ks, it, 0, seen, 3100, &batches);
  CHECK(count == 3000 && batches >= 2, "whole key space: %d keys in %d batches", count, batches);
  int ordered = 1;
  for (int i = 1; i < count && i < 3100; i++) ordered &= strcmp(seen[i - 1], seen[i]) < 0;
  CHECK(ordered && strcmp(seen[0], "itaw00000") == 0, "ascending order from %s", seen[0]);
  /* Once at the end, the iterator stays there. */
  uint8_t *buffer = (uint8_t *)kvs_malloc(KVS_ITERATOR_BUFFER_SIZE, 4096);
  kvs_iterator_list list = {0, false, KVS_ITERATOR_BUFFER_SIZE, buffer};
  EXPECT(kvs_iterate_next(ks, it, &list), KVS_SUCCESS);
  CHECK(list.num_entries == 0 && list.end && list.size == 0, "after the end");
  /* The same filter again: ITERATOR_OPEN with the open one's handle. */
  EXPECT(kvs_create_iterator(ks, &keys_only, &all, &it2), KVS_ERR_ITERATOR_OPEN);
  CHECK(it2 == it, "the open iterator's handle %u, got %u", it, it2);
  EXPECT(kvs_delete_iterator(ks, it), KVS_SUCCESS);
  EXPECT(kvs_delete_iterator(ks, it), KVS_ERR_ITERATOR_NOT_EXIST);
  EXPECT(kvs_delete_iterator(ks, 0), KVS_ERR_ITERATOR_NOT_EXIST);
  EXPECT(kvs_delete_iterator(ks, 17), KVS_ERR_ITERATOR_NOT_EXIST);
  EXPECT(kvs_delete_iterator(NULL, 1), KVS_ERR_PARAM_INVALID);
  list.size = KVS_ITERATOR_BUFFER_SIZE;
  EXPECT(kvs_iterate_next(ks, it, &list), KVS_ERR_ITERATOR_NOT_EXIST);

  /* OpenMPDK's byte order: bitmask[0] covers the key's fourth byte. Keys "itaw..": byte 3 is
   * 'w'; byte 2 is 'a'. */
  kvs_key_group_filter fourth_is_w = {{0xff, 0, 0, 0}, {'w', 0, 0, 0}};
  EXPECT(kvs_create_iterator(ks, &pairs, &fourth_is_w, &it), KVS_SUCCESS);
  count = iterate_all(ks, it, 1, seen, 3100, &batches);
  int all_w = 1;
  for (int i = 0; i < count; i++) all_w &= seen[i][3] == 'w';
  CHECK(count == 749 && all_w, "fourth byte 'w': %d pairs", count); /* 750 less the deleted */
  kvs_key_group_filter third_b_fourth_x = {{0xff, 0xff, 0, 0}, {'x', 'b', 0, 0}};
  EXPECT(kvs_create_iterator(ks, &keys_only, &third_b_fourth_x, &it2), KVS_SUCCESS);
  count = iterate_all(ks, it2, 0, seen, 3100, &batches);
  int match = 1;
  for (int i = 0; i < count; i++) match &= seen[i][2] == 'b' && seen[i][3] == 'x';
  CHECK(count == 750 && match, "third byte 'b', fourth 'x': %d", count);
  kvs_key_group_filter whole_prefix = {{0xff, 0xff, 0xff, 0xff}, {'x', 'b', 't', 'i'}};
  kvs_iterator_handle it3;
  EXPECT(kvs_create_iterator(ks, &keys_only, &whole_prefix, &it3), KVS_SUCCESS);
  count = iterate_all(ks, it3, 0, seen, 3100, &batches);
  CHECK(count == 750 && strncmp(seen[0], "itbx", 4) == 0, "whole prefix 'itbx': %d", count);
  EXPECT(kvs_delete_iterator(ks, it), KVS_SUCCESS);
  EXPECT(kvs_delete_iterator(ks, it2), KVS_SUCCESS);
  EXPECT(kvs_delete_iterator(ks, it3), KVS_SUCCESS);

  /* iterate_next's arguments. */
  EXPECT(kvs_create_iterator(ks, &keys_only, &all, &it), KVS_SUCCESS);
  EXPECT(kvs_iterate_next(ks, it, NULL), KVS_ERR_PARAM_INVALID);
  kvs_iterator_list no_buffer = {0, false, KVS_ITERATOR_BUFFER_SIZE, NULL};
  EXPECT(kvs_iterate_next(ks, it, &no_buffer), KVS_ERR_PARAM_INVALID);
  kvs_iterator_list wrong_size = {0, false, 4096, buffer};
  EXPECT(kvs_iterate_next(ks, it, &wrong_size), KVS_ERR_SYS_IO);
  list.size = KVS_ITERATOR_BUFFER_SIZE;
  EXPECT(kvs_iterate_next(bogus, it, &list), KVS_ERR_KS_NOT_OPEN);
  EXPECT(kvs_iterate_next(ks, (kvs_iterator_handle)(it + 1), &list), KVS_ERR_ITERATOR_NOT_EXIST);

  /* At most 16 iterators on a device. */
  kvs_iterator_handle handles[KVS_MAX_ITERATE_HANDLE];
  int opened = 1;
  for (int i = 1; i < KVS_MAX_ITERATE_HANDLE; i++) {
    kvs_key_group_filter f = {{0xff, 0, 0, 0}, {(uint8_t)i, 0, 0, 0}};
    if (kvs_create_iterator(ks, &keys_only, &f, &handles[i]) == KVS_SUCCESS) opened++;
  }
  CHECK(opened == KVS_MAX_ITERATE_HANDLE, "opened %d", opened);
  kvs_key_group_filter one_more = {{0xff, 0, 0, 0}, {200, 0, 0, 0}};
  kvs_iterator_handle extra;
  EXPECT(kvs_create_iterator(ks, &keys_only, &one_more, &extra), KVS_ERR_ITERATOR_MAX);
  for (int i = 1; i < KVS_MAX_ITERATE_HANDLE; i++) EXPECT(kvs_delete_iterator(ks, handles[i]), KVS_SUCCESS);
  EXPECT(kvs_delete_iterator(ks, it), KVS_SUCCESS);

  /* A pair larger than the buffer cannot be returned with its value. */
  char *big = (char *)calloc(1, 40000);
  kvs_key big_key = key_of((char *)"itzz-big-value", 14);
  kvs_value big_value = value_of(big, 40000);
  EXPECT(kvs_store_kvp(ks, &big_key, &big_value, NULL), KVS_SUCCESS);
  kvs_key_group_filter zz = {{0xff, 0xff, 0xff, 0xff}, {'z', 'z', 't', 'i'}};
  EXPECT(kvs_create_iterator(ks, &pairs, &zz, &it), KVS_SUCCESS);
  /* First the small pair stored after the snapshot above, then the big one. */
  list.size = KVS_ITERATOR_BUFFER_SIZE;
  EXPECT(kvs_iterate_next(ks, it, &list), KVS_SUCCESS);
  CHECK(list.num_entries == 1 && !list.end, "the small pair first: %u", list.num_entries);
  list.size = KVS_ITERATOR_BUFFER_SIZE;
  EXPECT(kvs_iterate_next(ks, it, &list), KVS_ERR_BUFFER_SMALL);
  CHECK(list.num_entries == 0, "nothing returned with BUFFER_SMALL");
  EXPECT(kvs_delete_iterator(ks, it), KVS_SUCCESS);
  EXPECT(kvs_delete_kvp(ks, &big_key, NULL), KVS_SUCCESS);
  free(big);

  /* Key-group delete: only the group goes. */
  EXPECT(kvs_delete_key_group(ks, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_delete_key_group(NULL, &all), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_delete_key_group(ks, &holes), KVS_ERR_ITERATOR_FILTER_INVALID);
  EXPECT(kvs_delete_key_group(ks, &fourth_is_w), KVS_SUCCESS);
  EXPECT(kvs_create_iterator(ks, &keys_only, &all, &it), KVS_SUCCESS);
  count = iterate_all(ks, it, 0, seen, 3100, &batches);
  int no_w = 1;
  for (int i = 0; i < count && i < 3100; i++) no_w &= seen[i][3] != 'w';
  CHECK(count == 2251 && no_w, "after deleting the 'w' group: %d", count);
  EXPECT(kvs_delete_iterator(ks, it), KVS_SUCCESS);
  EXPECT(kvs_delete_key_group(ks, &all), KVS_SUCCESS);
  kvs_key_space ks_info;
  kvs_key_space_name named = {0, NULL};
  ks_info.name = &named;
  EXPECT(kvs_get_key_space_info(ks, &ks_info), KVS_SUCCESS);
  CHECK(ks_info.count == 0, "after deleting every group: %llu", (unsigned long long)ks_info.count);
  kvs_free(buffer);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s URI\n", argv[0]);
    return 2;
  }
  test_buffers();
  kvs_device_handle dev;
  kvs_result ret = kvs_open_device(argv[1], &dev);
  CHECK(ret == KVS_SUCCESS, "open %s: 0x%x", argv[1], ret);
  if (ret != KVS_SUCCESS) return check_finish("api_sync");
  test_device(dev, argv[1]);
  test_key_spaces(dev);
  kvs_key_space_name main_name = name_of("main");
  kvs_option_key_space ascend = {KVS_KEY_ORDER_ASCEND};
  EXPECT(kvs_create_key_space(dev, &main_name, 0, ascend), KVS_SUCCESS);
  kvs_key_space_handle ks;
  EXPECT(kvs_open_key_space(dev, (char *)"main", &ks), KVS_SUCCESS);
  test_store_retrieve(ks);
  test_exist(ks);
  test_iterators(ks);
  store_pair(ks, "itutilization");
  uint32_t utilization = 0;
  EXPECT(kvs_get_device_utilization(dev, &utilization), KVS_SUCCESS);
  CHECK(utilization <= 10000, "utilization %u", utilization);

  /* After close, every handle is refused. */
  EXPECT(kvs_close_device(dev), KVS_SUCCESS);
  EXPECT(kvs_close_device(dev), KVS_ERR_DEV_NOT_OPENED);
  EXPECT(kvs_close_device(NULL), KVS_ERR_PARAM_INVALID);
  kvs_key k = key_of((char *)"itutilization", 13);
  kvs_value v = value_of((char *)"x", 1);
  EXPECT(kvs_store_kvp(ks, &k, &v, NULL), KVS_ERR_KS_NOT_OPEN);
  uint64_t capacity;
  EXPECT(kvs_get_device_capacity(dev, &capacity), KVS_ERR_DEV_NOT_OPENED);
  /* The device can be opened again once closed. */
  EXPECT(kvs_open_device(argv[1], &dev), KVS_SUCCESS);
  EXPECT(kvs_close_device(dev), KVS_SUCCESS);
  return check_finish("api_sync");
}
