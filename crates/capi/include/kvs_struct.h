/*
 * kvs_struct.h - types of the SNIA Key Value Storage API v1.1 (libkvssd).
 *
 * Field types, order and enum values are those of OpenMPDK/KVSSD v1.6.0, so programs and
 * libraries built against either header share one ABI (crates/capi/tests/c/abi.c checks sizes
 * and offsets). What each field means here is in docs/kv-api.md.
 */
#ifndef KVS_STRUCT_H
#define KVS_STRUCT_H

#include <stdbool.h>
#include <stdint.h>

#include "kvs_const.h"
#include "kvs_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the API library. */
typedef struct {
  uint8_t major;
  uint8_t minor;
  uint8_t micro;
} kvs_api_version;

/* What an asynchronous completion is for (kvs_postprocess_context.context). */
typedef enum {
  KVS_CMD_DELETE       = 0x01,
  KVS_CMD_DELETE_GROUP = 0x02,
  KVS_CMD_EXIST        = 0x03,
  KVS_CMD_ITER_CREATE  = 0x04,
  KVS_CMD_ITER_DELETE  = 0x05,
  KVS_CMD_ITER_NEXT    = 0x06,
  KVS_CMD_RETRIEVE     = 0x07,
  KVS_CMD_STORE        = 0x08
} kvs_context;

/* Key order of a key space. NONE and ASCEND are accepted (keys are kept ascending). */
typedef enum {
  KVS_KEY_ORDER_NONE    = 0,
  KVS_KEY_ORDER_ASCEND  = 1,
  KVS_KEY_ORDER_DESCEND = 2
} kvs_key_order;

typedef struct {
  kvs_key_order ordering;
} kvs_option_key_space;

typedef struct {
  bool kvs_delete_error;       /* absent key: KVS_ERR_KEY_NOT_EXIST instead of success */
} kvs_option_delete;

typedef enum {
  KVS_ITERATOR_KEY       = 0,  /* keys only */
  KVS_ITERATOR_KEY_VALUE = 1   /* keys and values */
} kvs_iterator_type;

typedef struct {
  kvs_iterator_type iter_type;
} kvs_option_iterator;

typedef struct {
  bool kvs_retrieve_delete;    /* delete the pair once it has been read whole */
} kvs_option_retrieve;

typedef enum {
  KVS_STORE_POST        = 0,   /* insert or overwrite */
  KVS_STORE_UPDATE_ONLY = 1,   /* overwrite only: KVS_ERR_KEY_NOT_EXIST if absent */
  KVS_STORE_NOOVERWRITE = 2,   /* insert only: KVS_ERR_VALUE_UPDATE_NOT_ALLOWED if present */
  KVS_STORE_APPEND      = 3    /* append to the value, or insert */
} kvs_store_type;

typedef enum {
  KVS_NOASSOCIATION      = 0,
  KVS_ASSOCIATION_STREAM = 1   /* accepted; the stream id is a hint with no effect */
} kvs_association_type;

typedef struct {
  void *key;                   /* the key's bytes */
  uint16_t length;             /* KVS_MIN_KEY_LENGTH to KVS_MAX_KEY_LENGTH */
} kvs_key;

typedef struct {
  void *value;                 /* store: the bytes; retrieve: the buffer */
  uint32_t length;             /* store: bytes; retrieve: buffer size in, bytes copied out */
  uint32_t actual_value_size;  /* retrieve out: the value's size from offset on */
  uint32_t offset;             /* retrieve: start at this byte (a multiple of 512); store: 0 */
} kvs_value;

typedef struct {
  kvs_association_type assoc_type;
  uint16_t assoc_hint;         /* the stream id */
} kvs_association;

typedef struct {
  kvs_store_type st_type;
  kvs_association *assoc;      /* NULL for none */
} kvs_option_store;

/* Handles are opaque: never dereference them. */
struct _kvs_device_handle;
struct _kvs_key_space_handle;
typedef struct _kvs_device_handle *kvs_device_handle;
typedef struct _kvs_key_space_handle *kvs_key_space_handle;
typedef uint8_t kvs_iterator_handle;   /* 1 to KVS_MAX_ITERATE_HANDLE */

typedef struct {
  uint32_t name_len;           /* bytes of name, without a terminator */
  char *name;
} kvs_key_space_name;

typedef struct {
  bool opened;
  uint64_t capacity;           /* bytes: the key space's size, or the device's if it has none */
  uint64_t free_size;          /* bytes not yet taken by its live pairs */
  uint64_t count;              /* pairs in it (exact: counted on a snapshot) */
  kvs_key_space_name *name;    /* out: name->name must hold MAX_KEYSPACE_NAME_LEN + 1 bytes */
} kvs_key_space;

typedef struct {
  uint64_t capacity;                   /* bytes offered to key spaces */
  uint64_t unalloc_capacity;           /* bytes not reserved by a key space's size */
  uint32_t max_value_len;
  uint32_t max_key_len;
  uint32_t optimal_value_len;
  uint32_t optimal_value_granularity;  /* bytes values are packed in */
  void *extended_info;                 /* NULL */
} kvs_device;

typedef struct {
  uint32_t num_keys;           /* out: keys checked */
  kvs_key *keys;               /* out: the keys checked */
  uint32_t length;             /* bytes of result_buffer in; bytes written out */
  uint8_t *result_buffer;      /* bit i (LSB of byte 0 first) is set if key i exists */
} kvs_exist_list;

typedef struct {
  uint8_t bitmask[KVS_MAX_KEY_GROUP_BYTES];      /* leading ones; see docs/kv-api.md */
  uint8_t bit_pattern[KVS_MAX_KEY_GROUP_BYTES];
} kvs_key_group_filter;

typedef struct {
  uint32_t num_entries;        /* out: entries in it_list */
  bool end;                    /* out: nothing remains after these */
  uint32_t size;               /* KVS_ITERATOR_BUFFER_SIZE in; bytes used out */
  uint8_t *it_list;            /* entries: [u32 klen][key] (+ [u32 vlen][value]) */
} kvs_iterator_list;

/* What an asynchronous callback receives. */
typedef struct {
  kvs_context context;
  kvs_key_space_handle ks_hd;
  kvs_key *key;                /* the key given (exist: the key array) */
  kvs_value *value;            /* the value given */
  void *option;                /* the option given */
  void *private1;
  void *private2;
  kvs_result result;
  kvs_iterator_handle iter_hd;
  union {
    kvs_iterator_list *iter_list;
    kvs_exist_list *list;
  } result_buffer;
} kvs_postprocess_context;

typedef void (*kvs_postprocess_function)(kvs_postprocess_context *ctx);

typedef struct {
  uint16_t key_len;
  uint8_t *key;                /* in: a buffer of at least key_len bytes; out: the key */
  uint32_t value_len;
} kvs_kvp_info;

#ifdef __cplusplus
}
#endif

#endif /* KVS_STRUCT_H */
