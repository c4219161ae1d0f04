# cython: language_level=3
"""Dispatch kernel (ReputMessageService's per-record work), native twin of ``rmqcore._pure.dispatch``.

One call walks a run of CommitLog records like ``codec.decode_batch`` and, per record, also computes
what the ConsumeQueue and IndexFile dispatchers need: the tagsCode, dispatch flags and the index
hashes of the record's keys. The byte work is ``csrc/rmq_dispatch.c`` (plain C, run without the
GIL); this module checks arguments once and maps the one error status to ValueError. Arrays are
taken as typed memoryviews (one acquisition per batch); any int64 buffer with strides that are
multiples of 8 bytes works (numpy arrays, views, Fortran order).

One extension module in five files (``include``, so the per-record steps stay inline in the run
loop): this one (the stateless kernels and the C they call), ``dispatch_bind.pxi`` (the consume-queue
files, index file and hint ring a Dispatcher binds), ``dispatch_handoff.pxi`` (GIL hand-off, wake
slot, naps, following a live writer), ``dispatch_publish.pxi`` (publish-on-put: what an armed
Dispatcher holds) and ``dispatch_run.pxi`` (the Dispatcher and its run loop).
"""
from libc.stdint cimport int64_t
from libc.string cimport memcpy
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

from ..kernel_results import DispatchRun, dispatcher_busy
from ..layout import (D_FLAGS, D_KEYS_COUNT, D_KEYS_START, D_TAGS_CODE, DF_BAD_UTF8, DF_SCHEDULE, DISPATCH_ROWS,
                      HINT_CAPACITY, HINT_FIELDS, MIN_RECORD_SIZE, NCOLUMNS, SELECT_FOUND, SELECT_NO_MATCH,
                      SELECT_REMOVING, SPECIAL_FLAGS, SPECIAL_KEYS, SPECIAL_QUEUE_POS, ST_BAD_CRC,
                      ST_BAD_MAGIC, ST_BAD_SIZE, ST_BLANK, ST_END, ST_MSG, ST_TORN, STOP_INDEX, STOP_NONE,
                      STOP_QUEUE, STOP_SEG, STOP_SPECIAL)
from ..wire import SCHEDULE_TOPIC

__all__ = ["dispatch_batch", "sparse_points", "select_units", "SELECT_NO_MATCH", "SELECT_FOUND", "SELECT_REMOVING",
           "Dispatcher", "STOP_NONE", "STOP_QUEUE",
           "STOP_SPECIAL", "STOP_INDEX", "STOP_SEG", "DISPATCH_ROWS", "D_TAGS_CODE", "D_FLAGS", "D_KEYS_START", "D_KEYS_COUNT",
           "DF_SCHEDULE", "DF_BAD_UTF8"]


# the record statuses and batch columns are the codec's (rmq_dispatch.h includes rmq_codec.h)
from .codec cimport (RMQ_C_POSITION, RMQ_C_QUEUE_ID, RMQ_C_QUEUE_OFFSET, RMQ_C_SIZE, RMQ_C_STORE_TIMESTAMP,
                     RMQ_C_SYS_FLAG, RMQ_C_TOPIC_LEN, RMQ_C_TOPIC_POS, RMQ_MIN_RECORD_SIZE, RMQ_NCOLUMNS,
                     RMQ_ST_BAD_CRC, RMQ_ST_BAD_MAGIC, RMQ_ST_BAD_SIZE, RMQ_ST_BLANK, RMQ_ST_END, RMQ_ST_MSG,
                     RMQ_ST_TORN)


cdef extern from "rmq_dispatch.h" nogil:
    int RMQ_D_TAGS_CODE
    int RMQ_D_FLAGS
    int RMQ_D_KEYS_START
    int RMQ_D_KEYS_COUNT
    int RMQ_DISPATCH_NROWS
    int RMQ_DF_SCHEDULE
    int RMQ_DF_BAD_UTF8
    int RMQ_DISPATCH_E_KEYS
    const char *RMQ_SCHEDULE_TOPIC
    enum:
        RMQ_STOP_NONE
        RMQ_STOP_QUEUE
        RMQ_STOP_SPECIAL
        RMQ_STOP_INDEX
        RMQ_STOP_SEG
        RMQ_SPECIAL_FLAGS
        RMQ_SPECIAL_QUEUE_POS
        RMQ_SPECIAL_KEYS
        RMQ_SELECT_NO_MATCH
        RMQ_SELECT_FOUND
        RMQ_SELECT_REMOVING
    int rmq_dispatch_batch(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t cap,
                           int64_t *cols, int64_t cols_rs, int64_t cols_cs, int64_t *disp, int64_t disp_rs,
                           int64_t disp_cs, int64_t *keys, int64_t keys_stride, int64_t keys_cap,
                           int64_t *count, int64_t *end_pos, int64_t *nkeys)
    int64_t rmq_dispatch_hinted(const int64_t *ring, int64_t head, int64_t *ri, const unsigned char *buf,
                                int64_t file_from, int64_t pos, int64_t limit, int64_t cap, int64_t *cols,
                                int64_t cols_rs, int64_t *disp, int64_t disp_rs, int64_t *keys, int64_t *end_pos,
                                int64_t *nkeys, int64_t *next_hint, int64_t *first)

cdef extern from "rmq_hints.h" nogil:
    int RMQ_HINT_CAPACITY
    int RMQ_HINT_FIELDS

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object obj, int *overflow) except? -1


if ((RMQ_ST_MSG, RMQ_ST_END, RMQ_ST_BLANK, RMQ_ST_TORN, RMQ_ST_BAD_MAGIC, RMQ_ST_BAD_SIZE, RMQ_ST_BAD_CRC,
     RMQ_NCOLUMNS, RMQ_DISPATCH_NROWS, RMQ_D_TAGS_CODE, RMQ_D_FLAGS, RMQ_D_KEYS_START, RMQ_D_KEYS_COUNT,
     RMQ_DF_SCHEDULE, RMQ_DF_BAD_UTF8, RMQ_HINT_CAPACITY, RMQ_HINT_FIELDS, RMQ_STOP_NONE, RMQ_STOP_QUEUE,
     RMQ_STOP_SPECIAL, RMQ_STOP_INDEX, RMQ_STOP_SEG, RMQ_SPECIAL_FLAGS, RMQ_SPECIAL_QUEUE_POS, RMQ_SPECIAL_KEYS,
     RMQ_SELECT_NO_MATCH, RMQ_SELECT_FOUND, RMQ_SELECT_REMOVING, RMQ_MIN_RECORD_SIZE)
        != (ST_MSG, ST_END, ST_BLANK, ST_TORN, ST_BAD_MAGIC, ST_BAD_SIZE, ST_BAD_CRC, NCOLUMNS,
            DISPATCH_ROWS, D_TAGS_CODE, D_FLAGS, D_KEYS_START, D_KEYS_COUNT, DF_SCHEDULE, DF_BAD_UTF8,
            HINT_CAPACITY, HINT_FIELDS, STOP_NONE, STOP_QUEUE, STOP_SPECIAL, STOP_INDEX, STOP_SEG,
            SPECIAL_FLAGS, SPECIAL_QUEUE_POS, SPECIAL_KEYS, SELECT_NO_MATCH, SELECT_FOUND, SELECT_REMOVING,
            MIN_RECORD_SIZE)):
    raise ImportError("csrc/rmq_dispatch.h disagrees with rmqcore/layout.py")
if (<bytes>RMQ_SCHEDULE_TOPIC).decode("ascii") != SCHEDULE_TOPIC:
    raise ImportError("csrc/rmq_dispatch.h's RMQ_SCHEDULE_TOPIC disagrees with rmqcore/wire.py")


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

    See the pure twin for the arrays, the result ``(count, end_pos, status, nkeys)`` and the errors.
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


# -- the C the Dispatcher (below) and select_units call ----------------------------------------

from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.stdint cimport int32_t, uint32_t, uint64_t
from libc.string cimport memset

cdef extern from "Python.h":
    int _get_buffer "PyObject_GetBuffer"(object obj, Py_buffer *view, int flags) except -1
    ctypedef struct PyThreadState:
        pass
    PyThreadState *PyEval_SaveThread()
    void PyEval_RestoreThread(PyThreadState *tstate)

from .indexfile cimport rmq_index_put

cdef extern from "rmq_notify.h" nogil:
    # a unit's size is stored last (release): a reader in another process that sees it sees the unit
    void rmq_cq_publish_unit(unsigned char *u, int64_t phys, int32_t size, int64_t tags)
    uint32_t rmq_notify_bump(unsigned char *slot)
    uint32_t rmq_notify_seq(const unsigned char *slot)
    int rmq_notify_wait(unsigned char *slot, uint32_t expected, int64_t ns, const int64_t *cancel, int flag,
                        int64_t slice_ns)
    int64_t rmq_notify_now_ns()
    void rmq_notify_arm(unsigned char *slot)

cdef extern from "rmq_endian.h" nogil:
    void rmq_store_be64(unsigned char *p, uint64_t v)
    void rmq_store_be32(unsigned char *p, uint32_t v)
    int64_t rmq_load_be64s(const unsigned char *p)
    int32_t rmq_load_be32s(const unsigned char *p)
    void rmq_publish_i64(int64_t *p, int64_t v)
    int64_t rmq_observe_i64(const int64_t *p)

cdef extern from *:
    """
    #define rmq_prefetch_w(p) __builtin_prefetch((p), 1, 3)
    #if defined(_WIN32)
    #include <windows.h>
    static void rmq_sleep_ns(int64_t ns) { Sleep((DWORD)((ns + 999999) / 1000000)); }
    #else
    #include <time.h>
    static void rmq_sleep_ns(int64_t ns) {
        struct timespec t;
        t.tv_sec = (time_t)(ns / 1000000000);
        t.tv_nsec = (long)(ns % 1000000000);
        while (nanosleep(&t, &t) != 0) {}
    }
    #endif
    #if defined(_WIN32)
    static void rmq_nap_fd(int64_t ns, int fd) { (void)fd; rmq_sleep_ns(ns); }
    #else
    #include <limits.h>
    #include <poll.h>
    /* sleep ns (rounded up to ms), or until fd is readable; a signal may end it early */
    static void rmq_nap_fd(int64_t ns, int fd) {
        struct pollfd p;
        int64_t ms = (ns + 999999) / 1000000;
        if (fd < 0) { rmq_sleep_ns(ns); return; }
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        (void)poll(&p, 1, (int)(ms > INT_MAX ? INT_MAX : ms));
    }
    #endif
    """
    void rmq_prefetch_w(const void *p) nogil
    void rmq_sleep_ns(int64_t ns) nogil
    void rmq_nap_fd(int64_t ns, int fd) nogil

DEF LIVE_LAG = 2 * 1024 * 1024  # follow a streaming writer this far behind: its newest lines stay in its core's cache
DEF LIVE_STREAMING = 10  # ... streaming: more than 1 byte per LIVE_STREAMING ns (100 MB/s) since the last look
DEF CHUNK = 4000  # records per scan: not a multiple of 512 (4 KiB-multiple row strides thrash L1)
DEF GIL_KEEP_BYTES = 2048  # a run over fewer CommitLog bytes keeps the GIL (Dispatcher.run)
DEF SELECT_GIL_KEEP = 4096  # select_units over more units than this lets the GIL go
DEF KEYS_CAP = CHUNK * 8
DEF HINT_CAP_MIN = 16  # records a batch takes from hints right after a stop
DEF SEG_FIELDS = 10


# -- the unit loop of getMessage --------------------------------------------------------------------


cdef int64_t _select(const unsigned char *u, int64_t n, int64_t max_msgs, int64_t max_bytes,
                     const int32_t *cs, Py_ssize_t ncs, bint filt, int64_t cl_min, int64_t max_phys,
                     int64_t mem_limit, int64_t disk_bytes, int64_t disk_count, int64_t mem_bytes,
                     int64_t mem_count, int64_t offset, int64_t *out, int64_t k, int64_t *count,
                     int *status) noexcept nogil:
    """The unit loop over ``n`` units at ``u``; returns the units looked at. With ``out`` (room for
    ``k`` taken units, as many as a first pass without it counted) it also writes them: physical
    offsets at ``out``, queue offsets at ``out + k``, sizes at ``out + 2k``."""
    cdef int64_t i = 0, total = 0, c = 0, off, size, code, lim_b, lim_c
    cdef int32_t c32
    cdef Py_ssize_t j
    cdef bint hit
    cdef int st = RMQ_SELECT_NO_MATCH
    while i < n:
        off = rmq_load_be64s(u)
        size = rmq_load_be32s(u + 8)
        code = rmq_load_be64s(u + 12)
        if total != 0 and c != 0:
            if max_msgs <= c:
                break
            if off < max_phys - mem_limit:  # max_phys - off > mem_limit, without overflow
                lim_b, lim_c = disk_bytes, disk_count
            else:
                lim_b, lim_c = mem_bytes, mem_count
            if total + size > min(lim_b, max_bytes) or c > lim_c - 1:
                break
        i += 1
        u += 20
        if filt and code >= -2147483648:
            c32 = <int32_t><uint32_t>code
            hit = False
            for j in range(ncs):
                if cs[j] == c32:
                    hit = True
                    break
            if not hit:
                continue
        if off < cl_min:
            if total == 0:
                st = RMQ_SELECT_REMOVING
            continue
        if out != NULL:
            out[c] = off
            out[k + c] = offset + i - 1
            out[2 * k + c] = size
        total += size
        c += 1
        st = RMQ_SELECT_FOUND
    count[0] = c
    status[0] = st
    return i


def select_units(buf, int64_t pos, int64_t n, int64_t offset, int64_t max_msgs, int64_t max_bytes, codes,
                 int64_t cl_min, int64_t max_phys, int64_t mem_limit, int64_t disk_bytes, int64_t disk_count,
                 int64_t mem_bytes, int64_t mem_count):
    """See the pure twin. The units are read in place, under one export of ``buf``: a first pass
    counts what the loop takes, a second writes it into a bytes object of that size."""
    cdef Py_buffer view
    cdef const unsigned char *u
    cdef int64_t i = 0, count = 0
    cdef int32_t *cs = NULL
    cdef Py_ssize_t ncs = 0
    cdef int status = RMQ_SELECT_NO_MATCH
    cdef bint filt = codes is not None
    cdef bytes units = b""
    cdef int64_t *out
    cdef PyThreadState *ts
    if filt:
        # a tuple: what its items' comparisons run (an int subclass's __ge__) cannot change its length
        codes = tuple(codes)
        cs = <int32_t *>malloc((len(codes) + 1) * sizeof(int32_t))
        if cs == NULL:
            raise MemoryError()
    try:
        if filt:
            for c in <tuple>codes:
                if -2**31 <= c < 2**31:  # no int32 equals any other
                    cs[ncs] = <int32_t>c
                    ncs += 1
        _get_buffer(buf, &view, PyBUF_SIMPLE)
        try:
            if pos < 0 or n < 0 or pos > view.len or n > (view.len - pos) // 20:
                raise ValueError(f"{n} units at {pos} outside a buffer of {view.len} bytes")
            u = <const unsigned char *>view.buf + pos
            # (the loop raises nothing: no exception can leave the GIL released)
            ts = PyEval_SaveThread() if n > SELECT_GIL_KEEP else NULL
            i = _select(u, n, max_msgs, max_bytes, cs, ncs, filt, cl_min, max_phys, mem_limit, disk_bytes,
                        disk_count, mem_bytes, mem_count, offset, NULL, 0, &count, &status)
            if ts != NULL:
                PyEval_RestoreThread(ts)
            if count:
                units = PyBytes_FromStringAndSize(NULL, 24 * count)
                out = <int64_t *>PyBytes_AS_STRING(units)
                ts = PyEval_SaveThread() if n > SELECT_GIL_KEEP else NULL
                _select(u, n, max_msgs, max_bytes, cs, ncs, filt, cl_min, max_phys, mem_limit, disk_bytes,
                        disk_count, mem_bytes, mem_count, offset, out, count, &count, &status)
                if ts != NULL:
                    PyEval_RestoreThread(ts)
        finally:
            PyBuffer_Release(&view)
    finally:
        free(cs)
    return status, i, count, units


# -- Dispatcher: ReputMessageService's whole per-record work in one nogil loop --------------------

include "dispatch_bind.pxi"
include "dispatch_handoff.pxi"
include "dispatch_publish.pxi"
include "dispatch_run.pxi"
