/*
 * kvs_result.h - result codes of the SNIA Key Value Storage API v1.1 (libkvssd).
 *
 * Every kvs_* function returns one of these. The numbers are those of OpenMPDK/KVSSD v1.6.0, so a
 * program built against either header gets the same codes. KVS_ERR_DEV_CAPAPCITY keeps the
 * spelling programs were written against; KVS_ERR_DEV_CAPACITY names the same code.
 */
#ifndef KVS_RESULT_H
#define KVS_RESULT_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  KVS_SUCCESS                      = 0x00,
  KVS_ERR_BUFFER_SMALL             = 0x01, /* an output buffer is too small: partial data     */
  KVS_ERR_DEV_CAPAPCITY            = 0x02, /* the device cannot hold a key space of that size */
  KVS_ERR_DEV_NOT_EXIST            = 0x03, /* no such device (URI or handle)                  */
  KVS_ERR_KS_CAPACITY              = 0x04, /* the key space (or the device) is full           */
  KVS_ERR_KS_EXIST                 = 0x05, /* a key space of that name exists                 */
  KVS_ERR_KS_INDEX                 = 0x06, /* a key-space list index out of range             */
  KVS_ERR_KS_NAME                  = 0x07, /* a key-space name that is empty or too long      */
  KVS_ERR_KS_NOT_EXIST             = 0x08, /* no key space of that name                       */
  KVS_ERR_KS_NOT_OPEN              = 0x09, /* the handle is not an open key space             */
  KVS_ERR_KS_OPEN                  = 0x0A, /* the key space is open already                   */
  KVS_ERR_ITERATOR_FILTER_INVALID  = 0x0B, /* the bitmask is not leading ones                 */
  KVS_ERR_ITERATOR_MAX             = 0x0C, /* KVS_MAX_ITERATE_HANDLE iterators are open       */
  KVS_ERR_ITERATOR_NOT_EXIST       = 0x0D, /* no such iterator on this key space              */
  KVS_ERR_ITERATOR_OPEN            = 0x0E, /* an iterator with this filter is open            */
  KVS_ERR_KEY_LENGTH_INVALID       = 0x0F, /* key length outside 4..255                       */
  KVS_ERR_KEY_NOT_EXIST            = 0x10, /* no such key                                     */
  KVS_ERR_OPTION_INVALID           = 0x11, /* an option this implementation does not support  */
  KVS_ERR_PARAM_INVALID            = 0x12, /* a NULL or malformed argument                    */
  KVS_ERR_SYS_IO                   = 0x13, /* an I/O error, or anything else                  */
  KVS_ERR_VALUE_LENGTH_INVALID     = 0x14, /* value longer than the device takes              */
  KVS_ERR_VALUE_OFFSET_INVALID     = 0x15, /* value offset past the end of the value          */
  KVS_ERR_VALUE_OFFSET_MISALIGNED  = 0x16, /* value offset not a multiple of 512              */
  KVS_ERR_VALUE_UPDATE_NOT_ALLOWED = 0x17, /* the key exists and may not be overwritten       */
  KVS_ERR_DEV_NOT_OPENED           = 0x18  /* the handle is not an open device                */
} kvs_result;

#define KVS_ERR_DEV_CAPACITY KVS_ERR_DEV_CAPAPCITY

#ifdef __cplusplus
}
#endif

#endif /* KVS_RESULT_H */
