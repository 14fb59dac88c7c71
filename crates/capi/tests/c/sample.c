/*
 * sample.c - a program written the way KV-SSD sample programs are, against the SNIA KV API v1.1
 * as OpenMPDK/KVSSD v1.6.0 exposes it (only kvs_api.h; it builds against Samsung's headers too).
 *
 *   sample URI write N   open, create and open key space "keyspace_test", store N pairs, read
 *                        each back and compare, iterate, check existence, close
 *   sample URI check N   reopen, find the key space by name, read the N pairs back (async, at a
 *                        queue depth of 16), iterate keys and values, check existence, delete
 *                        every pair and the key space, close
 *   sample URI all N     both in one open (a simulated device keeps nothing across opens)
 *
 * Keys are "%0*d" of 15 digits plus the terminating NUL (16 bytes), as in Samsung's samples;
 * values are 4 KiB derived from the key's number. Exits 0 when every check held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvs_api.h"

#define KEY_LENGTH 16
#define VALUE_LENGTH 4096
#define QUEUE_DEPTH 16
#define KEY_SPACE "keyspace_test"

static int failures = 0;

#define CHECK(condition, ...)                                    \
  do {                                                           \
    if (!(condition)) {                                          \
      if (failures < 10) {                                       \
        fprintf(stderr, "sample: check failed at line %d: ", __LINE__); \
        fprintf(stderr, __VA_ARGS__);                            \
        fprintf(stderr, "\n");                                   \
      }                                                          \
      failures++;                                                \
    }                                                            \
  } while (0)

static void make_key(char *key, int i) { snprintf(key, KEY_LENGTH, "%0*d", KEY_LENGTH - 1, i); }

static void make_value(char *value, int i) {
  for (int b = 0; b < VALUE_LENGTH; b++) value[b] = (char)('a' + (i * 7 + b) % 26);
}

static int write_phase(kvs_device_handle dev, int count) {
  /* As the samples do: list the key spaces, delete any, then create and open ours. */
  kvs_key_space_name names[2];
  char name_buffers[2][MAX_KEYSPACE_NAME_LEN + 1];
  for (int i = 0; i < 2; i++) {
    names[i].name = name_buffers[i];
    names[i].name_len = MAX_KEYSPACE_NAME_LEN;
  }
  uint32_t listed = 0;
  kvs_result ret = kvs_list_key_spaces(dev, 1, sizeof(names), names, &listed);
  CHECK(ret == KVS_SUCCESS, "list key spaces: 0x%x", ret);
  for (uint32_t i = 0; i < listed; i++) {
    ret = kvs_delete_key_space(dev, &names[i]);
    CHECK(ret == KVS_SUCCESS, "delete key space %s: 0x%x", names[i].name, ret);
  }
  kvs_key_space_name ks_name = {(uint32_t)strlen(KEY_SPACE), (char *)KEY_SPACE};
  kvs_option_key_space ks_option = {KVS_KEY_ORDER_NONE};
  ret = kvs_create_key_space(dev, &ks_name, 0, ks_option);
  CHECK(ret == KVS_SUCCESS, "create key space: 0x%x", ret);
  kvs_key_space_handle ks;
  ret = kvs_open_key_space(dev, (char *)KEY_SPACE, &ks);
  CHECK(ret == KVS_SUCCESS, "open key space: 0x%x", ret);
  if (ret != KVS_SUCCESS) return 1;

  char *key = (char *)kvs_malloc(KEY_LENGTH, 4096);
  char *value = (char *)kvs_malloc(VALUE_LENGTH, 4096);
  char *expected = (char *)malloc(VALUE_LENGTH);
  kvs_option_store store_option = {KVS_STORE_POST, NULL};
  for (int i = 0; i < count; i++) {
    make_key(key, i);
    make_value(value, i);
    kvs_key k = {key, KEY_LENGTH};
    kvs_value v = {value, VALUE_LENGTH, 0, 0};
    ret = kvs_store_kvp(ks, &k, &v, &store_option);
    CHECK(ret == KVS_SUCCESS, "store %d: 0x%x", i, ret);
  }
  kvs_option_retrieve retrieve_option = {false};
  for (int i = 0; i < count; i++) {
    make_key(key, i);
    make_value(expected, i);
    memset(value, 0, VALUE_LENGTH);
    kvs_key k = {key, KEY_LENGTH};
    kvs_value v = {value, VALUE_LENGTH, 0, 0};
    ret = kvs_retrieve_kvp(ks, &k, &retrieve_option, &v);
    CHECK(ret == KVS_SUCCESS && v.length == VALUE_LENGTH && v.actual_value_size == VALUE_LENGTH &&
              memcmp(value, expected, VALUE_LENGTH) == 0,
          "retrieve %d: 0x%x, %u bytes", i, ret, v.length);
  }

  /* Iterate every key (bitmask 0: the whole key space). */
  kvs_option_iterator iter_option = {KVS_ITERATOR_KEY};
  kvs_key_group_filter filter = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  kvs_iterator_handle iterator;
  ret = kvs_create_iterator(ks, &iter_option, &filter, &iterator);
  CHECK(ret == KVS_SUCCESS, "create iterator: 0x%x", ret);
  uint8_t *buffer = (uint8_t *)kvs_malloc(KVS_ITERATOR_BUFFER_SIZE, 4096);
  kvs_iterator_list list;
  int seen = 0;
  char previous[KEY_LENGTH] = {0};
  do {
    list.size = KVS_ITERATOR_BUFFER_SIZE;
    list.it_list = buffer;
    list.end = false;
    list.num_entries = 0;
    ret = kvs_iterate_next(ks, iterator, &list);
    CHECK(ret == KVS_SUCCESS, "iterate next: 0x%x", ret);
    if (ret != KVS_SUCCESS) break;
    uint8_t *at = buffer;
    for (uint32_t e = 0; e < list.num_entries; e++) {
      uint32_t klen;
      memcpy(&klen, at, sizeof(klen));
      at += sizeof(klen);
      CHECK(klen == KEY_LENGTH, "iterated key length %u", klen);
      CHECK(seen == 0 || memcmp(previous, at, KEY_LENGTH) < 0, "keys out of order");
      memcpy(previous, at, KEY_LENGTH);
      at += klen;
      seen++;
    }
    CHECK((uint32_t)(at - buffer) == list.size, "iterator size %u, parsed %ld", list.size,
          (long)(at - buffer));
  } while (!list.end);
  CHECK(seen == count, "iterated %d keys, stored %d", seen, count);
  ret = kvs_delete_iterator(ks, iterator);
  CHECK(ret == KVS_SUCCESS, "delete iterator: 0x%x", ret);

  /* Existence: the first eight keys and one that was never stored. */
  char keys[9][KEY_LENGTH];
  kvs_key exist_keys[9];
  for (int i = 0; i < 9; i++) {
    make_key(keys[i], i < 8 ? i : count + 1000);
    exist_keys[i].key = keys[i];
    exist_keys[i].length = KEY_LENGTH;
  }
  uint8_t bits[2] = {0, 0};
  kvs_exist_list exist = {9, exist_keys, sizeof(bits), bits};
  ret = kvs_exist_kv_pairs(ks, count >= 8 ? 9 : 1, exist_keys, &exist);
  CHECK(ret == KVS_SUCCESS, "exist: 0x%x", ret);
  if (count >= 8) CHECK(bits[0] == 0xff && bits[1] == 0, "exist bits %02x %02x", bits[0], bits[1]);

  kvs_key_space info_name_struct;
  char info_name[MAX_KEYSPACE_NAME_LEN + 1];
  kvs_key_space_name info_name_holder = {sizeof(info_name), info_name};
  info_name_struct.name = &info_name_holder;
  ret = kvs_get_key_space_info(ks, &info_name_struct);
  CHECK(ret == KVS_SUCCESS && info_name_struct.count == (uint64_t)count &&
            strcmp(info_name, KEY_SPACE) == 0,
        "key space info: 0x%x, count %llu, name %s", ret,
        (unsigned long long)info_name_struct.count, info_name);
  printf("key space %s: %llu pairs, capacity %llu bytes, %llu free\n", info_name,
         (unsigned long long)info_name_struct.count, (unsigned long long)info_name_struct.capacity,
         (unsigned long long)info_name_struct.free_size);

  kvs_free(buffer);
  kvs_free(key);
  kvs_free(value);
  free(expected);
  ret = kvs_close_key_space(ks);
  CHECK(ret == KVS_SUCCESS, "close key space: 0x%x", ret);
  return 0;
}

struct read_slot {
  char key[KEY_LENGTH];
  char value[VALUE_LENGTH];
  kvs_key k;
  kvs_value v;
  int index;
  volatile int busy;
};

static volatile int completed_reads = 0;
static volatile int bad_reads = 0;
static pthread_mutex_t read_lock = PTHREAD_MUTEX_INITIALIZER;

static void read_done(kvs_postprocess_context *ctx) {
  struct read_slot *slot = (struct read_slot *)ctx->private1;
  char expected[VALUE_LENGTH];
  make_value(expected, slot->index);
  pthread_mutex_lock(&read_lock);
  if (ctx->context != KVS_CMD_RETRIEVE || ctx->result != KVS_SUCCESS || ctx->key != &slot->k ||
      ctx->value != &slot->v || slot->v.length != VALUE_LENGTH ||
      memcmp(slot->value, expected, VALUE_LENGTH) != 0)
    bad_reads++;
  completed_reads++;
  slot->busy = 0;
  pthread_mutex_unlock(&read_lock);
}

static int check_phase(kvs_device_handle dev, int count) {
  kvs_key_space_handle ks;
  kvs_result ret = kvs_open_key_space(dev, (char *)KEY_SPACE, &ks);
  CHECK(ret == KVS_SUCCESS, "open key space after reopening: 0x%x", ret);
  if (ret != KVS_SUCCESS) return 1;

  /* Read every pair back asynchronously, QUEUE_DEPTH at a time. */
  static struct read_slot slots[QUEUE_DEPTH];
  kvs_option_retrieve retrieve_option = {false};
  completed_reads = 0;
  for (int i = 0; i < count; i++) {
    struct read_slot *slot = NULL;
    while (slot == NULL) {
      for (int s = 0; s < QUEUE_DEPTH && slot == NULL; s++) {
        pthread_mutex_lock(&read_lock);
        if (!slots[s].busy) {
          slot = &slots[s];
          slot->busy = 1;
        }
        pthread_mutex_unlock(&read_lock);
      }
      if (slot == NULL) usleep(10);
    }
    make_key(slot->key, i);
    memset(slot->value, 0, VALUE_LENGTH);
    slot->index = i;
    slot->k.key = slot->key;
    slot->k.length = KEY_LENGTH;
    slot->v.value = slot->value;
    slot->v.length = VALUE_LENGTH;
    slot->v.actual_value_size = 0;
    slot->v.offset = 0;
    ret = kvs_retrieve_kvp_async(ks, &slot->k, &retrieve_option, slot, NULL, &slot->v, read_done);
    CHECK(ret == KVS_SUCCESS, "retrieve async %d: 0x%x", i, ret);
  }
  while (completed_reads < count) usleep(100);
  CHECK(bad_reads == 0, "%d of %d asynchronous reads were wrong", bad_reads, count);

  /* Keys and values through an iterator. */
  kvs_option_iterator iter_option = {KVS_ITERATOR_KEY_VALUE};
  kvs_key_group_filter filter = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  kvs_iterator_handle iterator;
  ret = kvs_create_iterator(ks, &iter_option, &filter, &iterator);
  CHECK(ret == KVS_SUCCESS, "create iterator: 0x%x", ret);
  uint8_t *buffer = (uint8_t *)kvs_malloc(KVS_ITERATOR_BUFFER_SIZE, 4096);
  char expected[VALUE_LENGTH];
  kvs_iterator_list list;
  int seen = 0;
  do {
    list.size = KVS_ITERATOR_BUFFER_SIZE;
    list.it_list = buffer;
    ret = kvs_iterate_next(ks, iterator, &list);
    CHECK(ret == KVS_SUCCESS, "iterate next: 0x%x", ret);
    if (ret != KVS_SUCCESS) break;
    uint8_t *at = buffer;
    for (uint32_t e = 0; e < list.num_entries; e++) {
      uint32_t klen, vlen;
      memcpy(&klen, at, 4);
      at += 4;
      int index = atoi((const char *)at);
      at += klen;
      memcpy(&vlen, at, 4);
      at += 4;
      make_value(expected, index);
      CHECK(klen == KEY_LENGTH && vlen == VALUE_LENGTH && memcmp(at, expected, VALUE_LENGTH) == 0,
            "iterated pair %d is wrong", index);
      at += vlen;
      seen++;
    }
  } while (!list.end);
  CHECK(seen == count, "iterated %d pairs, stored %d", seen, count);
  kvs_delete_iterator(ks, iterator);
  kvs_free(buffer);

  /* Delete every pair; none may exist afterwards. */
  char key[KEY_LENGTH];
  kvs_option_delete delete_option = {true};
  for (int i = 0; i < count; i++) {
    make_key(key, i);
    kvs_key k = {key, KEY_LENGTH};
    ret = kvs_delete_kvp(ks, &k, &delete_option);
    CHECK(ret == KVS_SUCCESS, "delete %d: 0x%x", i, ret);
  }
  make_key(key, 0);
  kvs_key k = {key, KEY_LENGTH};
  uint8_t bit = 0xff;
  kvs_exist_list exist = {1, &k, 1, &bit};
  ret = kvs_exist_kv_pairs(ks, 1, &k, &exist);
  CHECK(ret == KVS_SUCCESS && bit == 0, "exist after delete: 0x%x, bit %u", ret, bit);

  ret = kvs_close_key_space(ks);
  CHECK(ret == KVS_SUCCESS, "close key space: 0x%x", ret);
  kvs_key_space_name ks_name = {(uint32_t)strlen(KEY_SPACE), (char *)KEY_SPACE};
  ret = kvs_delete_key_space(dev, &ks_name);
  CHECK(ret == KVS_SUCCESS, "delete key space: 0x%x", ret);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s URI write|check|all COUNT\n", argv[0]);
    return 2;
  }
  int count = atoi(argv[3]);
  kvs_device_handle dev;
  kvs_result ret = kvs_open_device(argv[1], &dev);
  if (ret != KVS_SUCCESS) {
    fprintf(stderr, "sample: open %s failed: 0x%x\n", argv[1], ret);
    return 1;
  }
  kvs_device info;
  ret = kvs_get_device_info(dev, &info);
  CHECK(ret == KVS_SUCCESS, "device info: 0x%x", ret);
  printf("device %s: capacity %llu bytes, keys up to %u bytes, values up to %u bytes\n", argv[1],
         (unsigned long long)info.capacity, info.max_key_len, info.max_value_len);
  int write = strcmp(argv[2], "write") == 0 || strcmp(argv[2], "all") == 0;
  int check = strcmp(argv[2], "check") == 0 || strcmp(argv[2], "all") == 0;
  if (write) write_phase(dev, count);
  if (check) check_phase(dev, count);
  ret = kvs_close_device(dev);
  CHECK(ret == KVS_SUCCESS, "close device: 0x%x", ret);
  printf("sample %s %s %d: %s\n", argv[1], argv[2], count, failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
