/*
 * rmq_capi.c - the table of the C core's functions (see rmq_capi.h), filled once at build time.
 */
#include "rmq_capi.h"

#define RMQ_CAPI_ENTRY(name) name,

static const rmq_capi_t rmq_capi_instance = {
    RMQ_CAPI_VERSION,
    sizeof(rmq_capi_t),
    RMQ_CAPI_FUNCS(RMQ_CAPI_ENTRY)
};

const rmq_capi_t *rmq_capi_table(void) { return &rmq_capi_instance; }
