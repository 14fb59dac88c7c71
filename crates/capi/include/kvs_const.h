/*
 * kvs_const.h - limits of the SNIA Key Value Storage API v1.1 (libkvssd), with the values
 * OpenMPDK/KVSSD v1.6.0 gives them. kvs_get_max_value_length() tells what a particular device
 * takes (less than KVS_MAX_VALUE_LENGTH on tiny simulated geometries).
 */
#ifndef KVS_CONST_H
#define KVS_CONST_H

#ifdef __cplusplus
extern "C" {
#endif

#define KVS_MIN_KEY_LENGTH              4
#define KVS_MAX_KEY_LENGTH              255
#define KVS_MIN_VALUE_LENGTH            0
#define KVS_MAX_VALUE_LENGTH            (2 * 1024 * 1024)
#define KVS_OPTIMAL_VALUE_LENGTH        4096
#define KVS_ALIGNMENT_UNIT              512        /* retrieve offsets are multiples of this  */
#define KVS_VALUE_LENGTH_ALIGNMENT_UNIT 4
#define KVS_MAX_ITERATE_HANDLE          16         /* iterators open at once on a device      */
#define G_ITER_KEY_SIZE_FIXED           16
#define KVS_MAX_KEY_GROUP_BYTES         4          /* bytes of a key-group filter             */
#define KVS_ITERATOR_BUFFER_SIZE        (32 * 1024) /* the size kvs_iterate_next requires     */
#define MAX_CONT_PATH_LEN               255
#define MAX_KEYSPACE_NAME_LEN           MAX_CONT_PATH_LEN

#ifdef __cplusplus
}
#endif

#endif /* KVS_CONST_H */
