/*
 * kvssd_ext.h - libkvssd's own additions to the SNIA KV API (not in the specification or in
 * OpenMPDK): per-command latencies, to see what a simulated card's pacing achieves.
 */
#ifndef KVSSD_EXT_H
#define KVSSD_EXT_H

#include "kvs_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Latencies of the commands a device completed since it was opened or last reset. Simulated
 * latency is completion minus issue on the device's simulated clock (0 on a file device); wall
 * latency runs from the call (or submission) to its return (or callback); lateness, on a paced
 * device only, is how long after its simulated completion a command completed on the wall
 * clock. */
typedef struct {
  uint64_t commands;
  uint64_t simulated_p50_ns;
  uint64_t simulated_p99_ns;
  uint64_t simulated_max_ns;
  uint64_t wall_p50_ns;
  uint64_t wall_p99_ns;
  uint64_t wall_max_ns;
  uint64_t lateness_p50_ns;
  uint64_t lateness_p99_ns;
  uint64_t lateness_max_ns;
} kvssd_latency_report;

kvs_result kvssd_get_latency_report(kvs_device_handle dev_hd, kvssd_latency_report *report);
kvs_result kvssd_reset_latency_report(kvs_device_handle dev_hd);

#ifdef __cplusplus
}
#endif

#endif /* KVSSD_EXT_H */
