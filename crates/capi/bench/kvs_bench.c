/*
 * kvs_bench.c - what libkvssd's calls cost on the wall clock, and what pacing makes of a
 * simulated card's latencies. Built and run by scripts/bench-capi.sh:
 *
 *   kvs_bench URI COUNT
 *
 * 1. COUNT synchronous stores of 16-byte keys and 4 KiB values, then COUNT synchronous retrieves
 *    of them in a shuffled order: per-call wall-clock cost (mean, p50, p99), measured here with
 *    CLOCK_MONOTONIC around each call.
 * 2. COUNT asynchronous retrieves at queue depth 1, then 32: per-command wall latency from
 *    submission to callback (measured here), and libkvssd's own report of the same commands'
 *    simulated latency and, on a paced device, how late each completed after its simulated
 *    completion (kvssd_ext.h).
 *
 * Wall-clock figures: measure under /work/bin/quiet on an otherwise idle machine. Simulated
 * figures are the card's model, labelled as such.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvs_api.h"
#include "kvssd_ext.h"

#define KEY_LENGTH 16
#define VALUE_LENGTH 4096
#define QUEUE_DEPTH_MAX 32

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int compare(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void summary(const char *what, uint64_t *samples, int count) {
  qsort(samples, (size_t)count, sizeof(uint64_t), compare);
  double total = 0;
  for (int i = 0; i < count; i++) total += (double)samples[i];
  printf("%-34s wall-clock  n=%d  mean %8.1f us  p50 %8.1f us  p99 %8.1f us\n", what, count,
         total / count / 1000.0, samples[count / 2] / 1000.0, samples[count * 99 / 100] / 1000.0);
}

static void make_key(char *key, int i) { snprintf(key, KEY_LENGTH, "%0*d", KEY_LENGTH - 1, i); }

struct slot {
  char key[KEY_LENGTH];
  char *value;
  kvs_key k;
  kvs_value v;
  uint64_t submitted;
  int busy;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t freed = PTHREAD_COND_INITIALIZER;
static uint64_t *async_samples;
static int async_done;
static int async_errors;

static void on_complete(kvs_postprocess_context *ctx) {
  struct slot *slot = (struct slot *)ctx->private1;
  uint64_t latency = now_ns() - slot->submitted;
  pthread_mutex_lock(&lock);
  if (ctx->result != KVS_SUCCESS) async_errors++;
  async_samples[async_done++] = latency;
  slot->busy = 0;
  pthread_cond_signal(&freed);
  pthread_mutex_unlock(&lock);
}

static void async_reads(kvs_device_handle dev, kvs_key_space_handle ks, int count, int depth,
                        const int *order) {
  static struct slot slots[QUEUE_DEPTH_MAX];
  for (int s = 0; s < depth; s++) {
    if (slots[s].value == NULL) slots[s].value = (char *)kvs_malloc(VALUE_LENGTH, 4096);
    slots[s].busy = 0;
  }
  async_done = 0;
  async_errors = 0;
  kvs_option_retrieve plain = {false};
  kvssd_reset_latency_report(dev);
  uint64_t start = now_ns();
  for (int i = 0; i < count; i++) {
    pthread_mutex_lock(&lock);
    struct slot *slot = NULL;
    while (slot == NULL) {
      for (int s = 0; s < depth && slot == NULL; s++)
        if (!slots[s].busy) slot = &slots[s];
      if (slot == NULL) pthread_cond_wait(&freed, &lock);
    }
    slot->busy = 1;
    pthread_mutex_unlock(&lock);
    make_key(slot->key, order[i]);
    slot->k.key = slot->key;
    slot->k.length = KEY_LENGTH;
    slot->v.value = slot->value;
    slot->v.length = VALUE_LENGTH;
    slot->v.offset = 0;
    slot->submitted = now_ns();
    if (kvs_retrieve_kvp_async(ks, &slot->k, &plain, slot, NULL, &slot->v, on_complete) !=
        KVS_SUCCESS) {
      fprintf(stderr, "kvs_bench: submission failed\n");
      exit(1);
    }
  }
  pthread_mutex_lock(&lock);
  while (async_done < count) pthread_cond_wait(&freed, &lock);
  pthread_mutex_unlock(&lock);
  double seconds = (now_ns() - start) / 1e9;
  char what[64];
  snprintf(what, sizeof(what), "async retrieve, queue depth %d", depth);
  summary(what, async_samples, count);
  kvssd_latency_report report;
  kvssd_get_latency_report(dev, &report);
  printf("%-34s simulated   n=%llu  p50 %8.1f us  p99 %8.1f us\n", "", (unsigned long long)report.commands,
         report.simulated_p50_ns / 1000.0, report.simulated_p99_ns / 1000.0);
  printf("%-34s late        p50 %8.1f us  p99 %8.1f us  (after simulated completion; paced only)\n",
         "", report.lateness_p50_ns / 1000.0, report.lateness_p99_ns / 1000.0);
  printf("%-34s throughput  %.0f retrieves/s wall-clock, %d errors\n", "", count / seconds,
         async_errors);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s URI COUNT\n", argv[0]);
    return 2;
  }
  int count = atoi(argv[2]);
  if (count < 100) count = 100;
  kvs_device_handle dev;
  if (kvs_open_device(argv[1], &dev) != KVS_SUCCESS) return 1;
  kvs_key_space_name name = {5, (char *)"bench"};
  kvs_option_key_space none = {KVS_KEY_ORDER_NONE};
  kvs_delete_key_space(dev, &name);
  if (kvs_create_key_space(dev, &name, 0, none) != KVS_SUCCESS) return 1;
  kvs_key_space_handle ks;
  if (kvs_open_key_space(dev, (char *)"bench", &ks) != KVS_SUCCESS) return 1;
  printf("kvs_bench %s: %d pairs, %d-byte keys, %d-byte values\n", argv[1], count, KEY_LENGTH,
         VALUE_LENGTH);

  uint64_t *samples = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);
  async_samples = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);
  int *order = (int *)malloc(sizeof(int) * (size_t)count);
  for (int i = 0; i < count; i++) order[i] = i;
  srand(7); /* a fixed shuffle: every run reads in the same order */
  for (int i = count - 1; i > 0; i--) {
    int j = rand() % (i + 1), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  char key[KEY_LENGTH];
  char *value = (char *)kvs_malloc(VALUE_LENGTH, 4096);
  int errors = 0;
  kvssd_reset_latency_report(dev);
  for (int i = 0; i < count; i++) {
    make_key(key, i);
    memset(value, 'a' + i % 26, VALUE_LENGTH);
    kvs_key k = {key, KEY_LENGTH};
    kvs_value v = {value, VALUE_LENGTH, 0, 0};
    uint64_t start = now_ns();
    errors += kvs_store_kvp(ks, &k, &v, NULL) != KVS_SUCCESS;
    samples[i] = now_ns() - start;
  }
  summary("sync store", samples, count);
  kvssd_latency_report report;
  kvssd_get_latency_report(dev, &report);
  printf("%-34s simulated   p50 %8.1f us  p99 %8.1f us\n", "", report.simulated_p50_ns / 1000.0,
         report.simulated_p99_ns / 1000.0);
  kvssd_reset_latency_report(dev);
  for (int i = 0; i < count; i++) {
    make_key(key, order[i]);
    kvs_key k = {key, KEY_LENGTH};
    kvs_value v = {value, VALUE_LENGTH, 0, 0};
    uint64_t start = now_ns();
    errors += kvs_retrieve_kvp(ks, &k, NULL, &v) != KVS_SUCCESS;
    samples[i] = now_ns() - start;
    errors += value[0] != 'a' + order[i] % 26;
  }
  summary("sync retrieve", samples, count);
  kvssd_get_latency_report(dev, &report);
  printf("%-34s simulated   p50 %8.1f us  p99 %8.1f us\n", "", report.simulated_p50_ns / 1000.0,
         report.simulated_p99_ns / 1000.0);
  async_reads(dev, ks, count, 1, order);
  async_reads(dev, ks, count, 32, order);
  printf("errors %d\n", errors + async_errors);
  kvs_close_key_space(ks);
  kvs_delete_key_space(dev, &name);
  kvs_close_device(dev);
  kvs_free(value);
  free(samples);
  free(async_samples);
  free(order);
  return errors == 0 ? 0 : 1;
}
