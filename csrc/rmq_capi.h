/*
 * rmq_capi.h - the C core as one table of function pointers, built once per process.
 *
 * The csrc .c files are compiled into one extension module, rmqcore._native._core, with hidden
 * visibility: no rmq_* symbol leaves it, and its per-process state (the CRC kernel chosen for this
 * CPU and the testing override of it, rmq_crc_force_level) exists once. The module publishes the table below as
 * the capsule RMQ_CAPI_CAPSULE (NumPy's and datetime's C-API pattern). Each kernel extension is built
 * with RMQ_CAPI_CLIENT defined: it links no C core of its own, and every call to an rmq_* function
 * goes through the table (the macros at the end), which rmq_capi_import() fetches when the kernel
 * module is imported, before any call.
 *
 * RMQ_CAPI_FUNCS lists every function the csrc headers declare (tests/test_native_build.py checks
 * that it, the client macros and the headers agree). Adding a function: declare it in its header,
 * list it in RMQ_CAPI_FUNCS, add its client macro, bump RMQ_CAPI_VERSION.
 *
 * Plain C99 plus __typeof__ (GCC, Clang; MSVC 17.9+) above RMQ_CAPI_CLIENT; the client part is for
 * Cython modules only (it needs Python.h, included before this header).
 */
#ifndef RMQ_CAPI_H
#define RMQ_CAPI_H

#include <stddef.h>

#include "rmq_arrow.h"
#include "rmq_codec.h"
#include "rmq_crc32.h"
#include "rmq_dispatch.h"
#include "rmq_groupcommit.h"
#include "rmq_hash.h"
#include "rmq_index.h"
#include "rmq_keycache.h"
#include "rmq_lookup.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RMQ_CAPI_MODULE "rmqcore._native._core"
#define RMQ_CAPI_CAPSULE RMQ_CAPI_MODULE "._C_API"
#define RMQ_CAPI_VERSION 2

#define RMQ_CAPI_FUNCS(X)                                                                               \
    /* rmq_arrow.h */                                                                                   \
    X(rmq_utf8_out_len) X(rmq_utf8_copy) X(rmq_gather) X(rmq_ranges_ascii) X(rmq_gather_utf8_size)        \
    X(rmq_gather_utf8) X(rmq_format_hosts) X(rmq_message_ids) X(rmq_props_fill)                          \
    /* rmq_codec.h */                                                                                   \
    X(rmq_record_size) X(rmq_body_crc) X(rmq_encode_record) X(rmq_encode_record_crc) X(rmq_encode_batch) \
    X(rmq_pretouch) X(rmq_encode_blank) X(rmq_peek_record) X(rmq_check_record) X(rmq_scan_records)       \
    X(rmq_decode_batch)                                                                                 \
    /* rmq_crc32.h */                                                                                   \
    X(rmq_crc32) X(rmq_crc32c) X(rmq_crc32_impl_name) X(rmq_crc32c_impl_name) X(rmq_crc_force_portable)  \
    X(rmq_crc_force_level)                                                                              \
    /* rmq_dispatch.h */                                                                                \
    X(rmq_java_hash_utf8) X(rmq_java_hash_ascii) X(rmq_utf8_valid) X(rmq_dispatch_batch)                 \
    X(rmq_dispatch_hinted)                                                                              \
    /* rmq_groupcommit.h */                                                                             \
    X(rmq_gc_new) X(rmq_gc_free) X(rmq_gc_set_sync) X(rmq_gc_add_file) X(rmq_gc_request) X(rmq_gc_wait) \
    X(rmq_gc_run) X(rmq_gc_stop) X(rmq_gc_durable) X(rmq_gc_flushes) X(rmq_gc_error)                    \
    /* rmq_hash.h */                                                                                    \
    X(rmq_java_hash_ucs1) X(rmq_java_hash_ucs2) X(rmq_java_hash_ucs4)                                   \
    /* rmq_index.h */                                                                                   \
    X(rmq_index_file_size) X(rmq_index_read_header) X(rmq_index_check) X(rmq_index_put)                 \
    X(rmq_index_put_batch) X(rmq_index_walk_start) X(rmq_index_walk_run)                                \
    /* rmq_keycache.h */                                                                                \
    X(rmq_kc_init) X(rmq_kc_free) X(rmq_kc_put) X(rmq_kc_get) X(rmq_kc_get_n) X(rmq_kc_prefetch)         \
    X(rmq_kc_ingest)                                                                                    \
    /* rmq_lookup.h */                                                                                  \
    X(rmq_props_have_key)

#define RMQ_CAPI_FIELD(name) __typeof__(&name) name;

typedef struct rmq_capi {
    int version;  /* RMQ_CAPI_VERSION of the core that filled it */
    size_t size;  /* sizeof(rmq_capi_t) there */
    RMQ_CAPI_FUNCS(RMQ_CAPI_FIELD)
} rmq_capi_t;

#undef RMQ_CAPI_FIELD

/* the core's table (csrc/rmq_capi.c; called by rmqcore._native._core only) */
const rmq_capi_t *rmq_capi_table(void);

#ifdef RMQ_CAPI_CLIENT

static const rmq_capi_t *rmq_capi = NULL;

/* Fetch the core's table (importing rmqcore._native._core); 0, or -1 with an exception set. */
static int rmq_capi_import(void)
{
    const rmq_capi_t *t;
    /* PyCapsule_Import imports only the top-level package (before 3.13) and walks attributes from
     * there: import the core module first */
    PyObject *core = PyImport_ImportModule(RMQ_CAPI_MODULE);
    if (core == NULL)
        return -1;
    Py_DECREF(core);
    t = (const rmq_capi_t *)PyCapsule_Import(RMQ_CAPI_CAPSULE, 0);
    if (t == NULL)
        return -1;
    if (t->version != RMQ_CAPI_VERSION || t->size != sizeof(rmq_capi_t)) {
        PyErr_Format(PyExc_ImportError,
                     "rmqcore._native._core has C API version %d (%zu bytes), this kernel was built for %d "
                     "(%zu bytes): rebuild rmqcore",
                     t->version, t->size, RMQ_CAPI_VERSION, sizeof(rmq_capi_t));
        return -1;
    }
    rmq_capi = t;
    return 0;
}

/* every call below goes through the table (a macro does not expand inside its own expansion) */
#define rmq_utf8_out_len (rmq_capi->rmq_utf8_out_len)
#define rmq_utf8_copy (rmq_capi->rmq_utf8_copy)
#define rmq_gather (rmq_capi->rmq_gather)
#define rmq_ranges_ascii (rmq_capi->rmq_ranges_ascii)
#define rmq_gather_utf8_size (rmq_capi->rmq_gather_utf8_size)
#define rmq_gather_utf8 (rmq_capi->rmq_gather_utf8)
#define rmq_format_hosts (rmq_capi->rmq_format_hosts)
#define rmq_message_ids (rmq_capi->rmq_message_ids)
#define rmq_props_fill (rmq_capi->rmq_props_fill)
#define rmq_record_size (rmq_capi->rmq_record_size)
#define rmq_body_crc (rmq_capi->rmq_body_crc)
#define rmq_encode_record (rmq_capi->rmq_encode_record)
#define rmq_encode_record_crc (rmq_capi->rmq_encode_record_crc)
#define rmq_encode_batch (rmq_capi->rmq_encode_batch)
#define rmq_pretouch (rmq_capi->rmq_pretouch)
#define rmq_encode_blank (rmq_capi->rmq_encode_blank)
#define rmq_peek_record (rmq_capi->rmq_peek_record)
#define rmq_check_record (rmq_capi->rmq_check_record)
#define rmq_scan_records (rmq_capi->rmq_scan_records)
#define rmq_decode_batch (rmq_capi->rmq_decode_batch)
#define rmq_crc32 (rmq_capi->rmq_crc32)
#define rmq_crc32c (rmq_capi->rmq_crc32c)
#define rmq_crc32_impl_name (rmq_capi->rmq_crc32_impl_name)
#define rmq_crc32c_impl_name (rmq_capi->rmq_crc32c_impl_name)
#define rmq_crc_force_portable (rmq_capi->rmq_crc_force_portable)
#define rmq_crc_force_level (rmq_capi->rmq_crc_force_level)
#define rmq_java_hash_utf8 (rmq_capi->rmq_java_hash_utf8)
#define rmq_java_hash_ascii (rmq_capi->rmq_java_hash_ascii)
#define rmq_utf8_valid (rmq_capi->rmq_utf8_valid)
#define rmq_dispatch_batch (rmq_capi->rmq_dispatch_batch)
#define rmq_dispatch_hinted (rmq_capi->rmq_dispatch_hinted)
#define rmq_gc_new (rmq_capi->rmq_gc_new)
#define rmq_gc_free (rmq_capi->rmq_gc_free)
#define rmq_gc_set_sync (rmq_capi->rmq_gc_set_sync)
#define rmq_gc_add_file (rmq_capi->rmq_gc_add_file)
#define rmq_gc_request (rmq_capi->rmq_gc_request)
#define rmq_gc_wait (rmq_capi->rmq_gc_wait)
#define rmq_gc_run (rmq_capi->rmq_gc_run)
#define rmq_gc_stop (rmq_capi->rmq_gc_stop)
#define rmq_gc_durable (rmq_capi->rmq_gc_durable)
#define rmq_gc_flushes (rmq_capi->rmq_gc_flushes)
#define rmq_gc_error (rmq_capi->rmq_gc_error)
#define rmq_java_hash_ucs1 (rmq_capi->rmq_java_hash_ucs1)
#define rmq_java_hash_ucs2 (rmq_capi->rmq_java_hash_ucs2)
#define rmq_java_hash_ucs4 (rmq_capi->rmq_java_hash_ucs4)
#define rmq_index_file_size (rmq_capi->rmq_index_file_size)
#define rmq_index_read_header (rmq_capi->rmq_index_read_header)
#define rmq_index_check (rmq_capi->rmq_index_check)
#define rmq_index_put (rmq_capi->rmq_index_put)
#define rmq_index_put_batch (rmq_capi->rmq_index_put_batch)
#define rmq_index_walk_start (rmq_capi->rmq_index_walk_start)
#define rmq_index_walk_run (rmq_capi->rmq_index_walk_run)
#define rmq_kc_init (rmq_capi->rmq_kc_init)
#define rmq_kc_free (rmq_capi->rmq_kc_free)
#define rmq_kc_put (rmq_capi->rmq_kc_put)
#define rmq_kc_get (rmq_capi->rmq_kc_get)
#define rmq_kc_get_n (rmq_capi->rmq_kc_get_n)
#define rmq_kc_prefetch (rmq_capi->rmq_kc_prefetch)
#define rmq_kc_ingest (rmq_capi->rmq_kc_ingest)
#define rmq_props_have_key (rmq_capi->rmq_props_have_key)

#endif /* RMQ_CAPI_CLIENT */

#ifdef __cplusplus
}
#endif

#endif /* RMQ_CAPI_H */
