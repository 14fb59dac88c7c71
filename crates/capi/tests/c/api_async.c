/*
 * api_async.c - every asynchronous function of libkvssd: bad arguments are refused by the call
 * itself (the callback never runs), and for good ones the callback runs once, from another
 * thread, with the context, key, value, option, private pointers, result, iterator handle and
 * result buffer the specification promises; failures the device finds (a missing key, a
 * refused overwrite) come through the callback. Also: the queue depth bounds the commands in
 * flight, a callback may submit the next command, and closing a device waits for every callback.
 *
 *   api_async URI      URI names a device with no key spaces and queue-depth=4
 */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "kvs_api.h"

#define QUEUE_DEPTH 4

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int completed = 0;
static int submitted = 0;
static int outstanding_max = 0;
static pthread_t main_thread;
static int callbacks_on_main_thread = 0;
static kvs_postprocess_context last;

static void record(kvs_postprocess_context *ctx) {
  pthread_mutex_lock(&lock);
  if (pthread_equal(pthread_self(), main_thread)) callbacks_on_main_thread++;
  last = *ctx;
  completed++;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
}

static void wait_for(int count) {
  pthread_mutex_lock(&lock);
  while (completed < count) pthread_cond_wait(&changed, &lock);
  pthread_mutex_unlock(&lock);
}

/* Submits with `call`, waits for its callback, and returns the callback's context. */
#define ROUND_TRIP(call)                                           \
  do {                                                             \
    int before_ = completed;                                       \
    EXPECT(call, KVS_SUCCESS);                                     \
    wait_for(before_ + 1);                                         \
  } while (0)

static int private_one, private_two;

static void test_arguments(kvs_key_space_handle ks) {
  char key[] = "async-key";
  char value[64] = "async-value";
  kvs_key k = {key, 9};
  kvs_value v = {value, 11, 0, 0};
  kvs_option_store post = {KVS_STORE_POST, NULL};
  kvs_option_retrieve plain = {false};
  kvs_option_delete quiet = {false};
  kvs_key_space_handle bogus = (kvs_key_space_handle)(uintptr_t)0x5550;
  kvs_key short_key = {key, 3};
  int before = completed;
  EXPECT(kvs_store_kvp_async(ks, &k, &v, &post, NULL, NULL, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_store_kvp_async(bogus, &k, &v, &post, NULL, NULL, record), KVS_ERR_KS_NOT_OPEN);
  EXPECT(kvs_store_kvp_async(ks, &short_key, &v, &post, NULL, NULL, record),
         KVS_ERR_KEY_LENGTH_INVALID);
  EXPECT(kvs_store_kvp_async(ks, &k, NULL, &post, NULL, NULL, record), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_retrieve_kvp_async(ks, &k, &plain, NULL, NULL, &v, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_retrieve_kvp_async(NULL, &k, &plain, NULL, NULL, &v, record), KVS_ERR_PARAM_INVALID);
  kvs_value crooked = {value, 64, 0, 3};
  EXPECT(kvs_retrieve_kvp_async(ks, &k, &plain, NULL, NULL, &crooked, record),
         KVS_ERR_VALUE_OFFSET_MISALIGNED);
  EXPECT(kvs_delete_kvp_async(ks, &k, &quiet, NULL, NULL, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_delete_kvp_async(ks, NULL, &quiet, NULL, NULL, record), KVS_ERR_PARAM_INVALID);
  uint8_t bits = 0;
  kvs_exist_list list = {0, NULL, 1, &bits};
  EXPECT(kvs_exist_kv_pairs_async(ks, 1, &k, &list, NULL, NULL, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_exist_kv_pairs_async(ks, 0, &k, &list, NULL, NULL, record), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_exist_kv_pairs_async(ks, 1, &short_key, &list, NULL, NULL, record),
         KVS_ERR_KEY_LENGTH_INVALID);
  kvs_exist_list empty_list = {0, NULL, 0, &bits};
  EXPECT(kvs_exist_kv_pairs_async(ks, 1, &k, &empty_list, NULL, NULL, record),
         KVS_ERR_BUFFER_SMALL);
  kvs_iterator_list iter_list = {0, false, 4096, (uint8_t *)value};
  EXPECT(kvs_iterate_next_async(ks, 1, &iter_list, NULL, NULL, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_iterate_next_async(ks, 1, NULL, NULL, NULL, record), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_iterate_next_async(ks, 1, &iter_list, NULL, NULL, record), KVS_ERR_SYS_IO);
  kvs_key_group_filter holes = {{0, 0xff, 0, 0}, {0, 0, 0, 0}};
  EXPECT(kvs_delete_key_group_async(ks, NULL, NULL, NULL, record), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_delete_key_group_async(ks, &holes, NULL, NULL, record),
         KVS_ERR_ITERATOR_FILTER_INVALID);
  EXPECT(kvs_delete_key_group_async(bogus, &holes, NULL, NULL, record), KVS_ERR_KS_NOT_OPEN);
  usleep(20000);
  CHECK(completed == before, "no callback for a refused submission (%d)", completed - before);
}

static void test_callbacks(kvs_key_space_handle ks) {
  char key[] = "async-key";
  char value[64] = "async-value";
  char out[64];
  kvs_key k = {key, 9};
  kvs_value v = {value, 11, 0, 0};
  kvs_option_store insert = {KVS_STORE_NOOVERWRITE, NULL};
  ROUND_TRIP(kvs_store_kvp_async(ks, &k, &v, &insert, &private_one, &private_two, record));
  CHECK(last.context == KVS_CMD_STORE && last.result == KVS_SUCCESS && last.ks_hd == ks &&
            last.key == &k && last.value == &v && last.option == &insert &&
            last.private1 == &private_one && last.private2 == &private_two,
        "store callback");
  ROUND_TRIP(kvs_store_kvp_async(ks, &k, &v, &insert, NULL, NULL, record));
  CHECK(last.result == KVS_ERR_VALUE_UPDATE_NOT_ALLOWED, "refused overwrite: 0x%x", last.result);

  kvs_option_retrieve plain = {false};
  memset(out, 0, sizeof(out));
  kvs_value o = {out, sizeof(out), 0, 0};
  ROUND_TRIP(kvs_retrieve_kvp_async(ks, &k, &plain, &private_one, NULL, &o, record));
  CHECK(last.context == KVS_CMD_RETRIEVE && last.result == KVS_SUCCESS && last.value == &o &&
            last.key == &k && last.option == &plain && o.length == 11 &&
            o.actual_value_size == 11 && memcmp(out, "async-value", 11) == 0,
        "retrieve callback: 0x%x, %u bytes", last.result, o.length);
  kvs_value small = {out, 4, 0, 0};
  ROUND_TRIP(kvs_retrieve_kvp_async(ks, &k, NULL, NULL, NULL, &small, record));
  CHECK(last.result == KVS_ERR_BUFFER_SMALL && small.length == 4 && small.actual_value_size == 11,
        "small buffer through the callback");

  char other_key[] = "async-none";
  kvs_key missing = {other_key, 10};
  uint8_t bits[1] = {0xf0};
  kvs_key both[2] = {k, missing};
  kvs_exist_list list = {0, NULL, 1, bits};
  ROUND_TRIP(kvs_exist_kv_pairs_async(ks, 2, both, &list, NULL, &private_two, record));
  CHECK(last.context == KVS_CMD_EXIST && last.result == KVS_SUCCESS && last.key == both &&
            last.result_buffer.list == &list && bits[0] == 0x01 && list.length == 1 &&
            list.num_keys == 2,
        "exist callback: bits %02x", bits[0]);

  kvs_option_delete loud = {true};
  ROUND_TRIP(kvs_delete_kvp_async(ks, &missing, &loud, NULL, NULL, record));
  CHECK(last.context == KVS_CMD_DELETE && last.result == KVS_ERR_KEY_NOT_EXIST &&
            last.key == &missing,
        "delete of a missing key: 0x%x", last.result);
  ROUND_TRIP(kvs_delete_kvp_async(ks, &k, &loud, NULL, NULL, record));
  CHECK(last.result == KVS_SUCCESS, "delete: 0x%x", last.result);
  ROUND_TRIP(kvs_retrieve_kvp_async(ks, &k, &plain, NULL, NULL, &o, record));
  CHECK(last.result == KVS_ERR_KEY_NOT_EXIST, "retrieve after delete: 0x%x", last.result);

  /* Iterator batches through callbacks. */
  for (int i = 0; i < 50; i++) {
    char name[16];
    snprintf(name, sizeof(name), "iter%04d", i);
    kvs_key ik = {name, 8};
    kvs_value iv = {name, 8, 0, 0};
    EXPECT(kvs_store_kvp(ks, &ik, &iv, NULL), KVS_SUCCESS);
  }
  kvs_option_iterator keys_only = {KVS_ITERATOR_KEY};
  kvs_key_group_filter iter_group = {{0xff, 0xff, 0xff, 0xff}, {'r', 'e', 't', 'i'}};
  kvs_iterator_handle it;
  EXPECT(kvs_create_iterator(ks, &keys_only, &iter_group, &it), KVS_SUCCESS);
  uint8_t *buffer = (uint8_t *)kvs_malloc(KVS_ITERATOR_BUFFER_SIZE, 4096);
  kvs_iterator_list iter_list = {0, false, KVS_ITERATOR_BUFFER_SIZE, buffer};
  ROUND_TRIP(kvs_iterate_next_async(ks, it, &iter_list, &private_one, NULL, record));
  CHECK(last.context == KVS_CMD_ITER_NEXT && last.result == KVS_SUCCESS && last.iter_hd == it &&
            last.result_buffer.iter_list == &iter_list && iter_list.num_entries == 50 &&
            iter_list.end && iter_list.size == 50 * 12 && memcmp(buffer + 4, "iter0000", 8) == 0,
        "iterate callback: %u entries", iter_list.num_entries);
  EXPECT(kvs_delete_iterator(ks, it), KVS_SUCCESS);
  iter_list.size = KVS_ITERATOR_BUFFER_SIZE;
  ROUND_TRIP(kvs_iterate_next_async(ks, it, &iter_list, NULL, NULL, record));
  CHECK(last.result == KVS_ERR_ITERATOR_NOT_EXIST, "closed iterator: 0x%x", last.result);
  kvs_free(buffer);

  kvs_key_group_filter group = {{0xff, 0xff, 0xff, 0xff}, {'r', 'e', 't', 'i'}};
  ROUND_TRIP(kvs_delete_key_group_async(ks, &group, NULL, &private_two, record));
  CHECK(last.context == KVS_CMD_DELETE_GROUP && last.result == KVS_SUCCESS &&
            last.private2 == &private_two,
        "key-group delete callback");
  kvs_key gone = {(char *)"iter0007", 8};
  bits[0] = 0xff;
  kvs_exist_list check_list = {0, NULL, 1, bits};
  EXPECT(kvs_exist_kv_pairs(ks, 1, &gone, &check_list), KVS_SUCCESS);
  CHECK(bits[0] == 0, "the group was deleted");
}

/* Many stores at once: never more in flight than the queue depth allows. */
struct slot {
  char key[16];
  char value[128];
  kvs_key k;
  kvs_value v;
};

static void counted(kvs_postprocess_context *ctx) {
  pthread_mutex_lock(&lock);
  if (ctx->result != KVS_SUCCESS) check_failures++;
  completed++;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
}

static void test_queue_depth(kvs_key_space_handle ks) {
  static struct slot slots[300];
  int base = completed;
  for (int i = 0; i < 300; i++) {
    snprintf(slots[i].key, sizeof(slots[i].key), "qd%06d", i);
    memset(slots[i].value, 'a' + i % 26, sizeof(slots[i].value));
    slots[i].k.key = slots[i].key;
    slots[i].k.length = 8;
    slots[i].v.value = slots[i].value;
    slots[i].v.length = sizeof(slots[i].value);
    slots[i].v.offset = 0;
    EXPECT(kvs_store_kvp_async(ks, &slots[i].k, &slots[i].v, NULL, NULL, NULL, counted),
           KVS_SUCCESS);
    pthread_mutex_lock(&lock);
    submitted = i + 1;
    int outstanding = submitted - (completed - base);
    if (outstanding > outstanding_max) outstanding_max = outstanding;
    pthread_mutex_unlock(&lock);
  }
  wait_for(base + 300);
  /* A slot is freed as its callback starts, so one more may be submitted while it runs. */
  CHECK(outstanding_max <= QUEUE_DEPTH + 1 && outstanding_max >= 2,
        "at most %d in flight, saw %d", QUEUE_DEPTH, outstanding_max);
  char out[128];
  kvs_value o = {out, sizeof(out), 0, 0};
  EXPECT(kvs_retrieve_kvp(ks, &slots[299].k, NULL, &o), KVS_SUCCESS);
  CHECK(o.length == 128 && memcmp(out, slots[299].value, 128) == 0, "the last async store");
}

/* A callback that submits the next command: a chain of 100 stores. */
static kvs_key_space_handle chain_ks;
static struct slot chain_slots[100];
static int chain_next = 0;

static void chain(kvs_postprocess_context *ctx) {
  if (ctx->result != KVS_SUCCESS) check_failures++;
  pthread_mutex_lock(&lock);
  int next = ++chain_next;
  completed++;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
  if (next < 100) {
    struct slot *s = &chain_slots[next];
    if (kvs_store_kvp_async(chain_ks, &s->k, &s->v, NULL, NULL, NULL, chain) != KVS_SUCCESS)
      check_failures++;
  }
}

static void test_chain(kvs_key_space_handle ks) {
  chain_ks = ks;
  for (int i = 0; i < 100; i++) {
    snprintf(chain_slots[i].key, sizeof(chain_slots[i].key), "chain%03d", i);
    chain_slots[i].k.key = chain_slots[i].key;
    chain_slots[i].k.length = 8;
    chain_slots[i].v.value = chain_slots[i].key;
    chain_slots[i].v.length = 8;
    chain_slots[i].v.offset = 0;
  }
  int base = completed;
  EXPECT(kvs_store_kvp_async(ks, &chain_slots[0].k, &chain_slots[0].v, NULL, NULL, NULL, chain),
         KVS_SUCCESS);
  wait_for(base + 100);
  uint8_t bits[13];
  kvs_key keys[100];
  for (int i = 0; i < 100; i++) keys[i] = chain_slots[i].k;
  kvs_exist_list list = {0, NULL, sizeof(bits), bits};
  EXPECT(kvs_exist_kv_pairs(ks, 100, keys, &list), KVS_SUCCESS);
  int all = 1;
  for (int i = 0; i < 100; i++) all &= (bits[i / 8] >> (i % 8)) & 1;
  CHECK(all, "every chained store landed");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s URI\n", argv[0]);
    return 2;
  }
  main_thread = pthread_self();
  kvs_device_handle dev;
  kvs_result ret = kvs_open_device(argv[1], &dev);
  CHECK(ret == KVS_SUCCESS, "open %s: 0x%x", argv[1], ret);
  if (ret != KVS_SUCCESS) return check_finish("api_async");
  kvs_key_space_name name = {5, (char *)"async"};
  kvs_option_key_space none = {KVS_KEY_ORDER_NONE};
  EXPECT(kvs_create_key_space(dev, &name, 0, none), KVS_SUCCESS);
  kvs_key_space_handle ks;
  EXPECT(kvs_open_key_space(dev, (char *)"async", &ks), KVS_SUCCESS);
  test_arguments(ks);
  test_callbacks(ks);
  test_queue_depth(ks);
  test_chain(ks);
  CHECK(callbacks_on_main_thread == 0, "callbacks come from completion threads");

  /* Closing waits for every callback of the commands still queued. */
  static struct slot last_slots[50];
  int base = completed;
  for (int i = 0; i < 50; i++) {
    snprintf(last_slots[i].key, sizeof(last_slots[i].key), "last%04d", i);
    last_slots[i].k.key = last_slots[i].key;
    last_slots[i].k.length = 8;
    last_slots[i].v.value = last_slots[i].key;
    last_slots[i].v.length = 8;
    last_slots[i].v.offset = 0;
    EXPECT(kvs_store_kvp_async(ks, &last_slots[i].k, &last_slots[i].v, NULL, NULL, NULL, counted),
           KVS_SUCCESS);
  }
  EXPECT(kvs_close_device(dev), KVS_SUCCESS);
  pthread_mutex_lock(&lock);
  int done = completed - base;
  pthread_mutex_unlock(&lock);
  CHECK(done == 50, "close waited for %d of 50 callbacks", done);
  kvs_key k = {(char *)"last0000", 8};
  kvs_value v = {(char *)"x", 1, 0, 0};
  EXPECT(kvs_store_kvp_async(ks, &k, &v, NULL, NULL, NULL, counted), KVS_ERR_KS_NOT_OPEN);
  return check_finish("api_async");
}
