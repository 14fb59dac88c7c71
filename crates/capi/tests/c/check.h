/*
 * check.h - the few helpers the C tests share: a check that counts failures and says where, and
 * key and value makers.
 */
#ifndef KVSSD_TEST_CHECK_H
#define KVSSD_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures = 0;
static int check_count = 0;

#define CHECK(condition, ...)                                             \
  do {                                                                    \
    check_count++;                                                        \
    if (!(condition)) {                                                   \
      check_failures++;                                                   \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #condition); \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, "\n");                                              \
    }                                                                     \
  } while (0)

/* A call's result must be exactly `expected`. */
#define EXPECT(call, expected)                                            \
  do {                                                                    \
    int got_ = (int)(call);                                               \
    CHECK(got_ == (int)(expected), "%s returned 0x%x, expected 0x%x", #call, got_, \
          (int)(expected));                                               \
  } while (0)

/* Prints the closing line the test driver reads, and the exit code. */
static int check_finish(const char *program) {
  printf("%s: %d checks, %d failed\n", program, check_count, check_failures);
  return check_failures == 0 ? 0 : 1;
}

#endif
