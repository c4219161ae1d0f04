# The C core's table of functions (csrc/rmq_capi.h). Every kernel module that calls an rmq_* function
# cimports rmq_capi_import and calls it at the top of its module body, before any such call: it imports
# rmqcore._native._core, the one extension holding csrc/*.c, and takes its table (the calls go through it).
cdef extern from "rmq_capi.h":
    ctypedef struct rmq_capi_t:
        pass
    const char *RMQ_CAPI_CAPSULE
    const rmq_capi_t *rmq_capi_table()  # rmqcore._native._core only
    int rmq_capi_import() except -1  # kernel modules (built with RMQ_CAPI_CLIENT)
