# cython: language_level=3
"""Dispatch kernel (ReputMessageService's per-record work), native twin of ``rmqcore._pure.dispatch``.

One call walks a run of CommitLog records like ``codec.decode_batch`` and, per record, also computes
what the ConsumeQueue and IndexFile dispatchers need: the tagsCode, dispatch flags and the index
hashes of the record's keys. The byte work is ``csrc/rmq_dispatch.c`` (plain C, run without the
GIL); this module checks arguments once and maps the one error status to ValueError. Arrays are
taken as typed memoryviews (one acquisition per batch); any int64 buffer with strides that are
multiples of 8 bytes works (numpy arrays, views, Fortran order).
"""
from libc.stdint cimport int64_t
from libc.string cimport memcmp

from ..layout import NCOLUMNS, ST_BAD_CRC, ST_BAD_MAGIC, ST_BAD_SIZE, ST_BLANK, ST_END, ST_MSG, ST_TORN

__all__ = ["dispatch_batch", "topic_groups", "sparse_points", "DISPATCH_ROWS", "D_TAGS_CODE", "D_FLAGS", "D_KEYS_START", "D_KEYS_COUNT",
           "DF_SCHEDULE", "DF_BAD_UTF8"]


cdef extern from "rmq_dispatch.h" nogil:
    int RMQ_ST_MSG
    int RMQ_ST_END
    int RMQ_ST_BLANK
    int RMQ_ST_TORN
    int RMQ_ST_BAD_MAGIC
    int RMQ_ST_BAD_SIZE
    int RMQ_ST_BAD_CRC
    int RMQ_NCOLUMNS
    int RMQ_D_TAGS_CODE
    int RMQ_D_FLAGS
    int RMQ_D_KEYS_START
    int RMQ_D_KEYS_COUNT
    int RMQ_DISPATCH_NROWS
    int RMQ_DF_SCHEDULE
    int RMQ_DF_BAD_UTF8
    int RMQ_DISPATCH_E_KEYS
    int rmq_dispatch_batch(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t cap,
                           int64_t *cols, int64_t cols_rs, int64_t cols_cs, int64_t *disp, int64_t disp_rs,
                           int64_t disp_cs, int64_t *keys, int64_t keys_stride, int64_t keys_cap,
                           int64_t *count, int64_t *end_pos, int64_t *nkeys)

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object obj, int *overflow) except? -1


# rows of ``disp`` and bits of its flags row (the pure twin defines the same names)
DISPATCH_ROWS = 4
D_TAGS_CODE = 0
D_FLAGS = 1
D_KEYS_START = 2
D_KEYS_COUNT = 3
DF_SCHEDULE = 1
DF_BAD_UTF8 = 2

if ((RMQ_ST_MSG, RMQ_ST_END, RMQ_ST_BLANK, RMQ_ST_TORN, RMQ_ST_BAD_MAGIC, RMQ_ST_BAD_SIZE, RMQ_ST_BAD_CRC,
     RMQ_NCOLUMNS, RMQ_DISPATCH_NROWS, RMQ_D_TAGS_CODE, RMQ_D_FLAGS, RMQ_D_KEYS_START, RMQ_D_KEYS_COUNT,
     RMQ_DF_SCHEDULE, RMQ_DF_BAD_UTF8)
        != (ST_MSG, ST_END, ST_BLANK, ST_TORN, ST_BAD_MAGIC, ST_BAD_SIZE, ST_BAD_CRC, NCOLUMNS,
            DISPATCH_ROWS, D_TAGS_CODE, D_FLAGS, D_KEYS_START, D_KEYS_COUNT, DF_SCHEDULE, DF_BAD_UTF8)):
    raise ImportError("csrc/rmq_dispatch.h disagrees with rmqcore/layout.py or the pure twin")


cdef int _idx64(object o, int64_t *out) except -2:
    """``o.__index__()`` into ``out``; nonzero when it does not fit an int64 (TypeError for non-integers)."""
    cdef int ovf = 0
    out[0] = PyLong_AsLongLongAndOverflow(o, &ovf)
    return ovf


cdef tuple _array_shape(object a, int ndim, str name):
    """The pure twin's _array_shape: ``a``'s shape if it is a writable native int64 buffer with
    ``ndim`` dimensions and strides that are multiples of 8 bytes; ValueError otherwise."""
    try:
        m = memoryview(a)
    except (TypeError, BufferError):
        raise ValueError(f"{name} must be a writable {ndim}-D int64 array, not {type(a).__name__}") from None
    try:
        if (m.ndim != ndim or m.itemsize != 8 or m.format not in ("l", "q") or m.readonly
                or any(s % 8 for s in m.strides)):
            raise ValueError(f"{name} must be a writable {ndim}-D int64 array")
        return m.shape
    finally:
        m.release()


def dispatch_batch(const unsigned char[::1] buf not None, pos, limit, cols, disp, keys_out, verify_crc):
    """Walk records from ``pos`` as ``codec.decode_batch`` does and compute their dispatch data.

    ``cols``: int64 ``(NCOLUMNS, cap)``, filled exactly as decode_batch fills it. ``disp``: int64
    ``(4, >= cap)``; per record i: ``disp[0, i]`` tagsCode (Java hashCode of TAGS, 0 without),
    ``disp[1, i]`` flags (DF_SCHEDULE: topic is SCHEDULE_TOPIC_XXXX; DF_BAD_UTF8: topic or properties
    are not valid UTF-8, hashed as decoded with U+FFFD replacement), ``disp[2, i]`` index in
    ``keys_out`` of its first key hash, ``disp[3, i]`` how many. ``keys_out``: int64 1-D; the
    IndexService hashes of ``topic#key`` for UNIQ_KEY, then each non-empty KEYS token.

    Returns ``(count, end_pos, status, nkeys)``; status as decode_batch (ST_MSG also when a record's
    keys do not fit in ``keys_out``: the walk stops before it). Raises ValueError for a bad range or
    arrays, and when the first record's keys alone exceed ``keys_out``.
    """
    cdef int64_t n = buf.shape[0]
    cdef int64_t p, l, cap, kcap, count = 0, end_pos = 0, nkeys = 0
    cdef int64_t crs, ccs, drs, dcs, ks
    cdef int ovp, ovl, st
    cdef int verify = 1 if verify_crc else 0
    cdef int64_t[:, :] cv
    cdef int64_t[:, :] dv
    cdef int64_t[:] kv
    cdef int64_t *kptr = NULL
    cdef const unsigned char *base = &buf[0] if n > 0 else NULL

    ovp = _idx64(pos, &p)
    ovl = _idx64(limit, &l)
    if ovp or ovl or p < 0 or l < p or l > n:
        raise ValueError(f"range [{pos}, {limit}) outside a buffer of {n} bytes")
    cshape = _array_shape(cols, 2, "cols")
    if cshape[0] != NCOLUMNS:
        raise ValueError(f"cols must have {NCOLUMNS} rows, not {cshape[0]}")
    dshape = _array_shape(disp, 2, "disp")
    if dshape[0] != DISPATCH_ROWS or dshape[1] < cshape[1]:
        raise ValueError(f"disp must have {DISPATCH_ROWS} rows and at least {cshape[1]} columns, not {dshape}")
    kshape = _array_shape(keys_out, 1, "keys_out")
    cap = cshape[1]
    kcap = kshape[0]
    if cap == 0:
        return 0, p, ST_MSG, 0
    try:
        cv = cols
        dv = disp
        kv = keys_out
    except (TypeError, ValueError, BufferError):  # passed _array_shape: should not happen
        raise ValueError("cols, disp and keys_out must be writable int64 arrays") from None
    crs = cv.strides[0] // 8
    ccs = cv.strides[1] // 8
    drs = dv.strides[0] // 8
    dcs = dv.strides[1] // 8
    ks = kv.strides[0] // 8
    if kcap > 0:
        kptr = &kv[0]
    with nogil:
        st = rmq_dispatch_batch(base, p, l, verify, cap, &cv[0, 0], crs, ccs, &dv[0, 0], drs, dcs,
                                kptr, ks, kcap, &count, &end_pos, &nkeys)
    if st == RMQ_DISPATCH_E_KEYS:
        raise ValueError(f"keys_out too small: the record at {end_pos} has {nkeys} keys, "
                         f"keys_out holds {kcap}")
    return count, end_pos, st, nkeys


def topic_groups(const unsigned char[::1] buf not None, const int64_t[::1] tpos not None,
                 const int64_t[::1] tlen not None, int64_t[::1] rep not None):
    """Group records by topic bytes: ``rep[i]`` = the index of the first record of the batch whose
    topic (``buf[tpos[i]:tpos[i] + tlen[i]]``) equals record i's. Returns the distinct first indexes
    in order. Raises ValueError when the arrays disagree in length or a topic lies outside ``buf``."""
    cdef Py_ssize_t n = tpos.shape[0], i, k, nd = 0
    cdef int64_t blen = buf.shape[0], p, l, r, cur = -1
    cdef const unsigned char *b = &buf[0] if blen > 0 else NULL
    if tlen.shape[0] != n or rep.shape[0] < n:
        raise ValueError(f"tpos ({n}), tlen ({tlen.shape[0]}) and rep ({rep.shape[0]}) disagree")
    for i in range(n):
        if tpos[i] < 0 or tlen[i] < 0 or tpos[i] > blen - tlen[i]:
            raise ValueError(f"topic {i} at [{tpos[i]}, {tpos[i]} + {tlen[i]}) lies outside a buffer of {blen} bytes")
    if n == 0:
        return []
    distinct = []
    cdef int64_t small[64]
    with nogil:
        for i in range(n):
            p = tpos[i]
            l = tlen[i]
            if cur >= 0 and tlen[cur] == l and memcmp(b + tpos[cur], b + p, <size_t>l) == 0:
                rep[i] = cur
                continue
            r = -1
            for k in range(min(nd, 64)):
                if tlen[small[k]] == l and memcmp(b + tpos[small[k]], b + p, <size_t>l) == 0:
                    r = small[k]
                    break
            if r < 0 and nd > 64:  # many topics in one batch: look through every earlier record
                for k in range(i):
                    if rep[k] == k and tlen[k] == l and memcmp(b + tpos[k], b + p, <size_t>l) == 0:
                        r = k
                        break
            if r < 0:
                r = i
                if nd < 64:
                    small[nd] = i
                nd += 1
            rep[i] = r
            cur = r
    for i in range(n):
        if rep[i] == i:
            distinct.append(i)
    return distinct


def sparse_points(const int64_t[::1] sizes not None, int64_t since, int64_t interval, int64_t[::1] out not None):
    """Kafka's LogSegment rule over a run of records: an index entry goes before record i when the
    bytes appended since the last entry exceed ``interval`` (then the count restarts at 0); record
    sizes accumulate after the decision. Writes the entry record indexes into ``out`` and returns
    ``(count, since)`` with the byte count after the last record."""
    cdef Py_ssize_t n = sizes.shape[0], i, c = 0
    if out.shape[0] < n:
        raise ValueError(f"out holds {out.shape[0]} items, {n} needed")
    with nogil:
        for i in range(n):
            if since > interval:
                out[c] = i
                c += 1
                since = 0
            since += sizes[i]
    return c, since
