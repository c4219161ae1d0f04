# Included by appender.pyx: dispatch hints (csrc/rmq_hints.h) for the records of a batch whose
# messages share one properties object (no properties, or one mapping for all): dispatch would parse
# each record to learn what the first one says. ``_batch_hints`` asks the dispatch kernel about the
# first record once, then writes a hint per record that a dispatcher, the put's own
# (``dispatch="put"``) or the reput thread, takes instead of parsing.

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject

from .codec cimport RMQ_C_TOPIC_LEN, RMQ_C_TOPIC_POS, RMQ_NCOLUMNS, RMQ_ST_MSG

cdef extern from "rmq_dispatch.h" nogil:
    int RMQ_D_TAGS_CODE
    int RMQ_D_FLAGS
    int RMQ_D_KEYS_COUNT
    int RMQ_DISPATCH_NROWS
    int rmq_dispatch_batch(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t cap,
                           int64_t *cols, int64_t cols_rs, int64_t cols_cs, int64_t *disp, int64_t disp_rs,
                           int64_t disp_cs, int64_t *keys, int64_t keys_stride, int64_t keys_cap,
                           int64_t *count, int64_t *end_pos, int64_t *nkeys)

DEF _COLS_MAX = 64
DEF _DISP_MAX = 8
if RMQ_NCOLUMNS > _COLS_MAX or RMQ_DISPATCH_NROWS > _DISP_MAX:
    raise ImportError("csrc/rmq_codec.h or rmq_dispatch.h outgrew appender_hints.pxi's scratch")


cdef int64_t _batch_hints(int64_t *ring, int64_t nh, const unsigned char *base, int64_t pos,
                          int64_t file_from, object topic, bytes tb, object properties, int64_t sys_flag,
                          int64_t queue_id, int64_t qoff, int64_t ts, object sizes, Py_ssize_t cnt) except -1:
    """Write the hints of the ``cnt`` records of a batch just written at ``base + pos`` (sizes in
    ``sizes``) when they can have them: NOT_TYPE records of an ASCII topic other than the delay
    topic, every message's properties the same object, the first record's dispatch data plain (valid
    UTF-8, at most one key). Returns the hint count after them (``nh`` when none was written)."""
    cdef int64_t cols[_COLS_MAX]
    cdef int64_t disp[_DISP_MAX]
    cdef int64_t key = 0, count = 0, end_pos = 0, nk = 0, tail, p, s  # (key stays 0 without keys)
    cdef const int64_t[::1] sv
    cdef PyObject *first
    cdef Py_ssize_t i
    if (ring == NULL or cnt <= 0 or cnt > RMQ_HINT_CAPACITY or (sys_flag & 0xC) != 0
            or _topic_hash(topic, tb) < 0 or type(properties) is not list
            or PyList_GET_SIZE(properties) < cnt):
        return nh
    first = PyList_GET_ITEM(properties, 0)
    for i in range(1, cnt):
        if PyList_GET_ITEM(properties, i) != first:
            return nh
    sv = sizes
    if rmq_dispatch_batch(base, pos, pos + sv[0], 0, 1, cols, 1, 1, disp, 1, 1, &key, 1, 1, &count, &end_pos,
                          &nk) != RMQ_ST_MSG or count != 1 or disp[RMQ_D_FLAGS] != 0:
        return nh  # (two keys or more: RMQ_DISPATCH_E_KEYS)
    nk = disp[RMQ_D_KEYS_COUNT]
    tail = sv[0] - (cols[RMQ_C_TOPIC_POS] - pos)  # topic, its properties' length and the properties
    p = file_from + pos
    for i in range(cnt):
        s = sv[i]
        rmq_hint_put(ring, nh, p, s, nk, cols[RMQ_C_TOPIC_LEN], queue_id, s - tail, qoff + i, ts,
                     disp[RMQ_D_TAGS_CODE], key)
        nh += 1
        p += s
    return nh
