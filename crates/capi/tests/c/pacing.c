/*
 * pacing.c - on a paced simulated device no command completes, on the wall clock, sooner than
 * its simulated latency; on the same device without pacing, commands return at the simulator's
 * speed while still recording simulated latency. Per-command figures come from libkvssd's own
 * latency report (kvssd_ext.h). A lower bound only: nothing here depends on how fast the
 * machine is.
 *
 *   pacing
 */
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "kvs_api.h"
#include "kvssd_ext.h"

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Runs 300 stores and 300 retrieves of 4 KiB; returns how many had a simulated latency above
 * zero, checking each against the wall clock when `paced`. */
static int run(const char *uri, int paced) {
  kvs_device_handle dev;
  EXPECT(kvs_open_device((char *)uri, &dev), KVS_SUCCESS);
  kvs_key_space_name name = {4, (char *)"pace"};
  kvs_option_key_space none = {KVS_KEY_ORDER_NONE};
  EXPECT(kvs_create_key_space(dev, &name, 0, none), KVS_SUCCESS);
  kvs_key_space_handle ks;
  EXPECT(kvs_open_key_space(dev, (char *)"pace", &ks), KVS_SUCCESS);
  static char value[4096], out[4096];
  char key[16];
  int timed = 0;
  for (int round = 0; round < 600; round++) {
    int i = round % 300;
    snprintf(key, sizeof(key), "pace%06d", i * 7919 % 300);
    kvs_key k = {key, 10};
    memset(value, 'a' + i % 26, sizeof(value));
    kvs_value v = {round < 300 ? value : out, 4096, 0, 0};
    EXPECT(kvssd_reset_latency_report(dev), KVS_SUCCESS);
    uint64_t start = now_ns();
    kvs_result ret = round < 300 ? kvs_store_kvp(ks, &k, &v, NULL) : kvs_retrieve_kvp(ks, &k, NULL, &v);
    uint64_t wall = now_ns() - start;
    CHECK(ret == KVS_SUCCESS, "command %d: 0x%x", round, ret);
    kvssd_latency_report report;
    EXPECT(kvssd_get_latency_report(dev, &report), KVS_SUCCESS);
    CHECK(report.commands == 1, "one command recorded, got %llu", (unsigned long long)report.commands);
    if (report.simulated_max_ns > 0) timed++;
    /* The histogram keeps three significant digits: allow its rounding. */
    if (paced)
      CHECK(wall + report.simulated_max_ns / 500 >= report.simulated_max_ns,
            "command %d returned after %llu ns, before its simulated %llu ns", round,
            (unsigned long long)wall, (unsigned long long)report.simulated_max_ns);
  }
  EXPECT(kvssd_get_latency_report(NULL, NULL), KVS_ERR_PARAM_INVALID);
  EXPECT(kvs_close_device(dev), KVS_SUCCESS);
  return timed;
}

int main(void) {
  int paced = run("sim:pink?blocks-per-die=4&pacing", 1);
  int unpaced = run("sim:pink?blocks-per-die=4", 0);
  /* Reads of flushed values take simulated time on the card, so many commands were timed. */
  CHECK(paced >= 100 && unpaced >= 100, "commands with simulated latency: %d paced, %d not", paced,
        unpaced);
  return check_finish("pacing");
}
