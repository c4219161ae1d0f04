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
from libc.string cimport memcpy
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

from ..kernel_results import DispatchRun
from ..layout import (HINT_CAPACITY, HINT_FIELDS, NCOLUMNS, SELECT_FOUND, SELECT_NO_MATCH, SELECT_REMOVING,
                      SPECIAL_FLAGS, SPECIAL_KEYS, SPECIAL_QUEUE_POS, ST_BAD_CRC, ST_BAD_MAGIC, ST_BAD_SIZE, ST_BLANK,
                      ST_END, ST_MSG, ST_TORN, STOP_INDEX, STOP_NONE, STOP_QUEUE, STOP_SEG, STOP_SPECIAL)
from ..wire import SCHEDULE_TOPIC

__all__ = ["dispatch_batch", "sparse_points", "select_units", "SELECT_NO_MATCH", "SELECT_FOUND", "SELECT_REMOVING",
           "Dispatcher", "STOP_NONE", "STOP_QUEUE",
           "STOP_SPECIAL", "STOP_INDEX", "STOP_SEG", "DISPATCH_ROWS", "D_TAGS_CODE", "D_FLAGS", "D_KEYS_START", "D_KEYS_COUNT",
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

cdef extern from "rmq_codec.h" nogil:
    enum:
        RMQ_C_POSITION
        RMQ_C_SIZE
        RMQ_C_QUEUE_ID
        RMQ_C_QUEUE_OFFSET
        RMQ_C_SYS_FLAG
        RMQ_C_STORE_TIMESTAMP
        RMQ_C_TOPIC_POS
        RMQ_C_TOPIC_LEN

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
     RMQ_DF_SCHEDULE, RMQ_DF_BAD_UTF8, RMQ_HINT_CAPACITY, RMQ_HINT_FIELDS, RMQ_STOP_NONE, RMQ_STOP_QUEUE,
     RMQ_STOP_SPECIAL, RMQ_STOP_INDEX, RMQ_STOP_SEG, RMQ_SPECIAL_FLAGS, RMQ_SPECIAL_QUEUE_POS, RMQ_SPECIAL_KEYS,
     RMQ_SELECT_NO_MATCH, RMQ_SELECT_FOUND, RMQ_SELECT_REMOVING)
        != (ST_MSG, ST_END, ST_BLANK, ST_TORN, ST_BAD_MAGIC, ST_BAD_SIZE, ST_BAD_CRC, NCOLUMNS,
            DISPATCH_ROWS, D_TAGS_CODE, D_FLAGS, D_KEYS_START, D_KEYS_COUNT, DF_SCHEDULE, DF_BAD_UTF8,
            HINT_CAPACITY, HINT_FIELDS, STOP_NONE, STOP_QUEUE, STOP_SPECIAL, STOP_INDEX, STOP_SEG,
            SPECIAL_FLAGS, SPECIAL_QUEUE_POS, SPECIAL_KEYS, SELECT_NO_MATCH, SELECT_FOUND, SELECT_REMOVING)):
    raise ImportError("csrc/rmq_dispatch.h disagrees with rmqcore/layout.py or the pure twin")
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


# -- Dispatcher: ReputMessageService's whole per-record work in one nogil loop --------------------

from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.stdint cimport int32_t, uint32_t, uint64_t

cdef extern from "Python.h":
    int _get_buffer "PyObject_GetBuffer"(object obj, Py_buffer *view, int flags) except -1

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

cdef bint _is_i64_format(const char *f):
    """``l`` or ``q`` (with itemsize 8: a native int64), the formats ``_array_shape`` accepts."""
    if f == NULL:
        return True  # PyBUF_FORMAT not honoured means unsigned bytes; itemsize 8 then rules them out
    return (f[0] == b'l' or f[0] == b'q') and f[1] == 0


cdef int _i64_buffer(object o, Py_buffer *v, int ndim, bint writable, str name) except -1:
    """Export ``o`` into ``v`` as a C-contiguous int64 array of ``ndim`` dimensions (ValueError
    otherwise, with nothing held)."""
    cdef int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (PyBUF_WRITABLE if writable else 0)
    try:
        _get_buffer(o, v, flags)
    except (TypeError, BufferError):
        raise ValueError(f"{name} must be a {ndim}-D C-contiguous int64 array, not {type(o).__name__}") from None
    if v.ndim != ndim or v.itemsize != 8 or not _is_i64_format(v.format):
        PyBuffer_Release(v)
        raise ValueError(f"{name} must be a {ndim}-D C-contiguous int64 array")
    return 0


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
DEF KEYS_CAP = CHUNK * 8
DEF HINT_CAP_MIN = 16  # records a batch takes from hints right after a stop
DEF SEG_FIELDS = 10

cdef struct cq_slot:
    unsigned char *buf
    int64_t file_from
    int64_t file_size
    int64_t wrote
    int64_t max_phys
    unsigned char *topic
    int64_t topic_len
    int64_t queue_id
    int bound
    int touched
    int64_t seen  # wrote as moved() last reported it (-1: not yet)
    int64_t npos  # its wake slot in the notify buffer (-1: none)
    int pend  # got units since the last announcement


cdef extern from *:
    """
    #include <string.h>
    /* the first 8 and last 8 bytes of t[0, n) as words (zero-padded when n < 8): O(1) per topic */
    static inline uint64_t rmq_slot_hash(const unsigned char *t, int64_t n, int64_t qid) {
        uint64_t a = 0, b = 0, h;
        if (n >= 8) {
            memcpy(&a, t, 8);
            memcpy(&b, t + n - 8, 8);
        } else if (n > 0) {
            memcpy(&a, t, (size_t)n);
        }
        h = (a ^ ((uint64_t)n << 56)) * 0x9E3779B97F4A7C15ULL;
        h = (h ^ (h >> 31) ^ b) * 0xBF58476D1CE4E5B9ULL;
        h ^= (uint64_t)qid * 0x94D049BB133111EBULL;
        return h ^ (h >> 29);
    }
    /* a[0, n) == b[0, n) for short n, inline (a libc call costs more than the compare) */
    static inline int rmq_same_topic(const unsigned char *a, const unsigned char *b, int64_t n) {
        uint64_t x, y;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y)
                return 0;
        }
        for (; i < n; i++)
            if (a[i] != b[i])
                return 0;
        return 1;
    }
    """
    uint64_t _slot_hash "rmq_slot_hash"(const unsigned char *t, int64_t n, int64_t qid) noexcept nogil
    int rmq_same_topic(const unsigned char *a, const unsigned char *b, int64_t n) noexcept nogil


cdef class Dispatcher:
    """The consume-queue, index and segment-index writes of dispatch for a run of CommitLog records,
    in one call without the GIL (the pure twin documents the contract)."""

    cdef cq_slot *_slots
    cdef Py_buffer *_views
    cdef int64_t _nslots, _cap
    cdef int64_t *_table
    cdef int64_t _tcap
    cdef Py_buffer _idx
    cdef int _idx_bound
    cdef uint32_t _islots, _ientries
    cdef int64_t *_cols
    cdef int64_t *_disp
    cdef int64_t *_keys
    cdef int64_t *_touched
    cdef int64_t _ntouched
    cdef Py_buffer _gil_view  # held while _gil_req points into it
    cdef int64_t *_gil_req
    cdef int64_t _gil_seq
    cdef Py_buffer _wanted_view  # held while _wanted points into it
    cdef const int64_t *_wanted
    cdef int64_t _nap_ns, _nap_max_ns
    cdef Py_buffer _ring_view  # held while _ring points into it (with _head_view and _head)
    cdef Py_buffer _head_view
    cdef const int64_t *_ring
    cdef const int64_t *_head
    cdef int64_t _hint_at  # the next hint number to look at
    cdef int64_t _hint_cap  # records a batch takes from hints: small after a stop, doubling back to CHUNK
    cdef Py_buffer _nview  # the notify buffer (set_notify), held while _nbuf points into it
    cdef unsigned char *_nbuf
    cdef Py_ssize_t _nlen
    cdef int64_t *_pend  # slots with units not yet announced
    cdef int64_t _npend
    cdef Py_buffer _wview  # the writer's wake slot (set_wake), held while _wake points into it
    cdef unsigned char *_wake
    cdef readonly int64_t hinted  # records dispatched from hints, in all

    def __cinit__(self):
        self._ring = NULL
        self._head = NULL
        self._hint_at = 0
        self._hint_cap = CHUNK
        self.hinted = 0
        self._gil_req = NULL
        self._gil_seq = 0
        self._wanted = NULL
        self._nap_ns = self._nap_max_ns = 0
        self._slots = NULL
        self._views = NULL
        self._table = NULL
        self._nslots = self._cap = self._tcap = 0
        self._idx_bound = 0
        self._cols = <int64_t *>malloc(NCOLUMNS * CHUNK * sizeof(int64_t))
        self._disp = <int64_t *>malloc(4 * CHUNK * sizeof(int64_t))
        self._keys = <int64_t *>malloc(KEYS_CAP * sizeof(int64_t))
        self._touched = NULL
        self._ntouched = 0
        self._nbuf = NULL
        self._nlen = 0
        self._pend = NULL
        self._npend = 0
        self._wake = NULL
        if self._cols == NULL or self._disp == NULL or self._keys == NULL:
            raise MemoryError()

    def __dealloc__(self):
        cdef int64_t i
        self.set_signals(None, None)
        self.set_hints(None, None)
        self.set_notify(None)
        self.set_wake(None)
        self.release()
        for i in range(self._nslots):
            free(self._slots[i].topic)
        free(self._slots)
        free(self._views)
        free(self._table)
        free(self._touched)
        free(self._pend)
        free(self._cols)
        free(self._disp)
        free(self._keys)

    # -- bindings (with the GIL; the store calls these under its dispatch lock) --------------------
    cdef int64_t _find(self, const unsigned char *t, int64_t n, int64_t qid) noexcept nogil:
        cdef uint64_t mask, h
        cdef int64_t s
        if self._tcap == 0:
            return -1
        mask = <uint64_t>self._tcap - 1
        h = _slot_hash(t, n, qid) & mask
        while True:
            s = self._table[h]
            if s < 0:
                return -1
            if (self._slots[s].queue_id == qid and self._slots[s].topic_len == n
                    and rmq_same_topic(self._slots[s].topic, t, n)):
                return s
            h = (h + 1) & mask

    cdef int _grow(self) except -1:
        cdef int64_t i, cap = max(16, self._cap * 2), tcap = cap * 2
        cdef cq_slot *ns = <cq_slot *>realloc(self._slots, cap * sizeof(cq_slot))
        if ns == NULL:
            raise MemoryError()
        self._slots = ns
        cdef Py_buffer *nv = <Py_buffer *>realloc(self._views, cap * sizeof(Py_buffer))
        if nv == NULL:
            raise MemoryError()
        self._views = nv
        cdef int64_t *nt = <int64_t *>realloc(self._touched, cap * sizeof(int64_t))
        if nt == NULL:
            raise MemoryError()
        self._touched = nt
        nt = <int64_t *>realloc(self._pend, cap * sizeof(int64_t))
        if nt == NULL:
            raise MemoryError()
        self._pend = nt
        cdef int64_t *tb = <int64_t *>malloc(tcap * sizeof(int64_t))
        if tb == NULL:
            raise MemoryError()
        free(self._table)
        self._table = tb
        self._tcap = tcap
        self._cap = cap
        for i in range(tcap):
            tb[i] = -1
        for i in range(self._nslots):  # rehash
            self._insert(i)
        return 0

    cdef void _insert(self, int64_t s) noexcept:
        cdef uint64_t mask = <uint64_t>self._tcap - 1
        cdef uint64_t h = _slot_hash(self._slots[s].topic, self._slots[s].topic_len, self._slots[s].queue_id) & mask
        while self._table[h] >= 0:
            h = (h + 1) & mask
        self._table[h] = s

    def bind_queue(self, bytes topic not None, int64_t queue_id, buffer, int64_t file_from, int64_t wrote,
                   int64_t max_phys, int64_t notify_pos=-1):
        """Bind (or rebind) queue ``(topic, queue_id)`` to its writable file ``buffer`` (mapped at
        ``file_from``, written up to ``wrote``; units up to CommitLog offset ``max_phys`` are in),
        announcing its units at wake slot ``notify_pos`` of the notify buffer (-1: nowhere).
        ``buffer`` None unbinds it. Returns the slot number."""
        if notify_pos != -1 and (notify_pos < 0 or notify_pos % 4):
            raise ValueError(f"notify position {notify_pos} is not a wake slot")
        cdef int64_t n = len(topic), s
        cdef const unsigned char *t = <const unsigned char *>(<char *>topic)
        s = self._find(t, n, queue_id)
        if s < 0:
            if self._nslots == self._cap:
                self._grow()
            s = self._nslots
            self._slots[s].topic = <unsigned char *>malloc(n + 1)
            if self._slots[s].topic == NULL:
                raise MemoryError()
            memcpy(self._slots[s].topic, t, <size_t>n)
            self._slots[s].topic_len = n
            self._slots[s].queue_id = queue_id
            self._slots[s].bound = 0
            self._slots[s].touched = 0
            self._slots[s].pend = 0
            self._nslots += 1
            self._insert(s)
        if self._slots[s].bound:
            PyBuffer_Release(&self._views[s])
            self._slots[s].bound = 0
        self._slots[s].npos = notify_pos
        if buffer is None:
            return s
        _get_buffer(buffer, &self._views[s], PyBUF_WRITABLE)
        if wrote < 0 or wrote > self._views[s].len or wrote % 20:
            PyBuffer_Release(&self._views[s])
            raise ValueError(f"write position {wrote} does not fit a consume-queue file of {self._views[s].len} bytes")
        self._slots[s].bound = 1
        self._slots[s].seen = -1
        self._slots[s].buf = <unsigned char *>self._views[s].buf
        self._slots[s].file_from = file_from
        self._slots[s].file_size = self._views[s].len
        self._slots[s].wrote = wrote
        self._slots[s].max_phys = max_phys
        return s

    def set_notify(self, buffer):
        """Announce units in ``buffer`` (the notify file's writable map; None: nowhere): after each
        run of records, the wake slot of every queue that got units is bumped (csrc/rmq_notify.h)."""
        cdef Py_buffer v
        if buffer is not None:
            _get_buffer(buffer, &v, PyBUF_WRITABLE)
        if self._nbuf != NULL:
            self._nbuf = NULL
            self._nlen = 0
            PyBuffer_Release(&self._nview)
        if buffer is not None:
            self._nview = v
            self._nbuf = <unsigned char *>v.buf
            self._nlen = v.len

    def set_wake(self, wake):
        """Nap on ``wake`` (uint32[2], the wake slot the writer's ``Appender.set_wake`` pokes; None:
        plain sleeps): a live run caught up with the writer, and ``nap`` between runs, sleep until
        the writer publishes more (or the nap's time passes), instead of for the whole time."""
        cdef Py_buffer v
        if wake is not None:
            _get_buffer(wake, &v, PyBUF_WRITABLE | PyBUF_FORMAT)
            if v.len != 8 or v.itemsize != 4 or v.format == NULL or v.format[0] not in b"IL" or (<size_t>v.buf) % 4:
                PyBuffer_Release(&v)
                raise ValueError("wake must be a writable uint32[2]")
        if self._wake != NULL:
            self._wake = NULL
            PyBuffer_Release(&self._wview)
        if wake is not None:
            self._wview = v
            self._wake = <unsigned char *>v.buf

    cdef void _announce(self) noexcept nogil:
        """Bump the wake slot of each queue that got units since the last call (after the units)."""
        cdef int64_t i, s, p
        for i in range(self._npend):
            s = self._pend[i]
            self._slots[s].pend = 0
            p = self._slots[s].npos
            if self._nbuf != NULL and 0 <= p and p + 8 <= self._nlen:
                rmq_notify_bump(self._nbuf + p)
        self._npend = 0

    def bind_index(self, buffer, int64_t slot_count, int64_t max_entries):
        """Bind the last (writable) index file, or None for none."""
        if self._idx_bound:
            PyBuffer_Release(&self._idx)
            self._idx_bound = 0
        if buffer is None:
            return
        if not (1 <= slot_count <= 0x7FFFFFFF and 1 <= max_entries <= 0x7FFFFFFF):
            raise ValueError(f"bad index geometry: {slot_count} slots, {max_entries} entries")
        _get_buffer(buffer, &self._idx, PyBUF_WRITABLE)
        if self._idx.len < 40 + 4 * slot_count + 20 * max_entries:
            PyBuffer_Release(&self._idx)
            raise ValueError("the index buffer is shorter than its geometry")
        self._idx_bound = 1
        self._islots, self._ientries = <uint32_t>slot_count, <uint32_t>max_entries

    def set_signals(self, request, wanted):
        """Share two int64[1] words with the threads around a live run (either may be None).

        ``request``, with the writers (``Appender.set_gil_request``): a live run (and a ``nap``)
        writes a new nonzero number there just before it leaves its nogil code and needs the GIL.
        A writer that saw the number waits without the GIL until it changes (2 ms at most), so
        the GIL goes to this thread rather than back to the writer; then it queues for the GIL as
        any thread does. A ``nap`` writes 0 once it holds the GIL; a live run leaves the number
        there until the next run starts (which writes 0) or the caller writes 0 itself, so the
        Python work between runs (binding new consume-queue and index files, all file calls that
        let the GIL go) does not wait out the switch interval, 5 ms, each time it takes the GIL
        back from a busy writer (the reput thread would fall far behind a put loop). The
        writer's wait is bounded short (2 ms) so that a put never waits out a file creation or
        a lock wait of this thread with the GIL free (bench/bench_store.py measures both).
        ``wanted``: nonzero while another thread waits to dispatch (the store's dispatch lock) or
        for the reput thread to stop (close). A live run that has caught up with the writer naps
        without the GIL (``live_nap``) for the writer to go on, and returns instead when this is
        nonzero; ``nap`` does not sleep then."""
        cdef Py_buffer rv, wv
        cdef bint has_r = False
        try:
            if request is not None:
                _get_buffer(request, &rv, PyBUF_WRITABLE | PyBUF_FORMAT)
                has_r = True
                if rv.len < 8 or rv.itemsize != 8 or (<size_t>rv.buf) % 8 != 0:
                    raise ValueError("request must be an aligned, writable int64[1]")
            if wanted is not None:
                _get_buffer(wanted, &wv, PyBUF_FORMAT)
                if wv.len < 8 or wv.itemsize != 8 or (<size_t>wv.buf) % 8 != 0:
                    PyBuffer_Release(&wv)
                    raise ValueError("wanted must be an aligned int64[1]")
        except BaseException:
            if has_r:
                PyBuffer_Release(&rv)
            raise
        if self._gil_req != NULL:
            self._gil_req = NULL
            PyBuffer_Release(&self._gil_view)
        if self._wanted != NULL:
            self._wanted = NULL
            PyBuffer_Release(&self._wanted_view)
        if request is not None:
            self._gil_view = rv
            self._gil_req = <int64_t *>rv.buf
        if wanted is not None:
            self._wanted_view = wv
            self._wanted = <const int64_t *>wv.buf

    def set_hints(self, ring, head):
        """Read the dispatch hints of the writer's ``Appender`` (its ``hints`` ring and ``hint_head``
        word; None, None: none). A run without CRC checks takes each record it has a hint for from
        the hint, checked against the record's header, instead of parsing it (csrc/rmq_hints.h)."""
        cdef Py_buffer rv, hv
        if (ring is None) != (head is None):
            raise ValueError("ring and head go together")
        if ring is not None:
            _i64_buffer(ring, &rv, 2, False, "ring")
            if rv.shape[0] != RMQ_HINT_CAPACITY or rv.shape[1] != RMQ_HINT_FIELDS or (<size_t>rv.buf) % 8:
                PyBuffer_Release(&rv)
                raise ValueError(f"ring must be int64[{RMQ_HINT_CAPACITY}, {RMQ_HINT_FIELDS}]")
            try:
                _i64_buffer(head, &hv, 1, False, "head")
            except BaseException:
                PyBuffer_Release(&rv)
                raise
            if hv.shape[0] < 1 or (<size_t>hv.buf) % 8:
                PyBuffer_Release(&hv)
                PyBuffer_Release(&rv)
                raise ValueError("head must be an aligned int64[1]")
        if self._ring != NULL:
            self._ring = self._head = NULL
            PyBuffer_Release(&self._ring_view)
            PyBuffer_Release(&self._head_view)
        self._hint_at = 0
        if ring is not None:
            self._ring_view, self._head_view = rv, hv
            self._ring, self._head = <const int64_t *>rv.buf, <const int64_t *>hv.buf

    def live_nap(self, int64_t nap_ns, int64_t max_idle_ns):
        """How a live run that has caught up with the writer waits for more: naps of ``nap_ns``
        without the GIL, for at most ``max_idle_ns`` in a row (0: return at once, as before)."""
        if nap_ns < 0 or max_idle_ns < 0:
            raise ValueError("nap times must be >= 0")
        self._nap_ns, self._nap_max_ns = nap_ns, (max_idle_ns if nap_ns > 0 else 0)

    def nap(self, double seconds, int wake_fd=-1, live=None, int64_t seen=-1):
        """Sleep without the GIL (the reput thread between runs) for ``seconds``, or until
        ``wake_fd`` (the read end of a pipe; -1: none) is readable, or not at all while ``wanted``
        is set (see ``set_signals``); then, like the end of a live run, ask the writers for the
        GIL: a sleeping thread that wakes up behind a busy writer would otherwise wait out the
        5 ms switch interval. With a wake slot (``set_wake``) and ``live`` (the appender's int64[1]
        end, ``seen`` where dispatch stands), the nap waits on the slot instead and ends as soon as
        the writer publishes past ``seen`` (the store's close pokes the slot too)."""
        cdef int64_t *gr = self._gil_req
        cdef const int64_t *wp = self._wanted
        cdef int64_t ns
        cdef Py_buffer lv
        cdef const int64_t *lp = NULL
        cdef uint32_t e
        cdef unsigned char *w = self._wake
        if not seconds >= 0:
            raise ValueError(f"nap of {seconds} s")
        ns = <int64_t>(min(seconds, 1e9) * 1e9)
        if live is not None and w != NULL:
            _i64_buffer(live, &lv, 1, False, "live")
            lp = <const int64_t *>lv.buf
        try:
            with nogil:
                if wp == NULL or rmq_observe_i64(wp) == 0:
                    if lp != NULL:
                        e = rmq_notify_seq(w)
                        rmq_notify_arm(w)  # flagged before the look: a put after it pokes the slot
                        if rmq_observe_i64(lp) == seen:
                            rmq_notify_wait(w, e, ns, wp, 1, 0)
                    else:
                        rmq_nap_fd(ns, wake_fd)
                if gr != NULL:
                    self._gil_seq += 1
                    rmq_publish_i64(gr, self._gil_seq)
        finally:
            if lp != NULL:
                PyBuffer_Release(&lv)
        if gr != NULL:
            rmq_publish_i64(gr, 0)  # got it (see _run)

    def release(self):
        """Let go of every bound buffer (before any of them is unmapped)."""
        cdef int64_t i
        for i in range(self._nslots):
            if self._slots[i].bound:
                PyBuffer_Release(&self._views[i])
                self._slots[i].bound = 0
        if self._idx_bound:
            PyBuffer_Release(&self._idx)
            self._idx_bound = 0

    def touched(self):
        """``[(topic, queue_id, wrote, max_phys)]`` of the queues written since the last call."""
        cdef int64_t i, s
        out = []
        for i in range(self._ntouched):
            s = self._touched[i]
            self._slots[s].touched = 0
            out.append((self._slots[s].topic[:self._slots[s].topic_len], self._slots[s].queue_id,
                        self._slots[s].wrote, self._slots[s].max_phys))
        self._ntouched = 0
        return out

    def moved(self):
        """``[(topic, queue_id, wrote)]`` of the bound queues whose write position moved since the
        last call (or that were bound since): another thread may be in a run moving them on, and
        each ``wrote`` is one the queue held (read for warm-ahead; an idle store lists nothing)."""
        cdef int64_t i, w
        out = []
        for i in range(self._nslots):
            if self._slots[i].bound:
                w = self._slots[i].wrote
                if w != self._slots[i].seen:
                    self._slots[i].seen = w
                    out.append((self._slots[i].topic[:self._slots[i].topic_len], self._slots[i].queue_id, w))
        return out

    # -- the run --------------------------------------------------------------------------------
    def run(self, buf, int64_t file_from, int64_t pos, int64_t limit, bint verify_crc, bint index_on,
            int64_t first_key, seg, seg_out, live=None, int64_t live_cap=0):
        """See the pure twin. Returns a ``DispatchRun`` (rmqcore.kernel_results).

        ``buf`` is any bytes-like object; ``seg`` (10 fields), ``seg_out`` (4 rows) and ``live`` (1
        field) are C-contiguous int64 arrays, the first two writable. Each is exported once for the
        call (a plain buffer export: typed memoryviews cost more per call, which a dispatch of
        one record would pay on every put-then-read)."""
        cdef Py_buffer bv, sv, ov, lv
        cdef int held = 0
        try:
            _get_buffer(buf, &bv, PyBUF_SIMPLE)
            held = 1
            _i64_buffer(seg, &sv, 1, True, "seg")
            held = 2
            _i64_buffer(seg_out, &ov, 2, True, "seg_out")
            held = 3
            if live is not None:
                _i64_buffer(live, &lv, 1, False, "live")
                held = 4
            return self._run(<const unsigned char *>bv.buf, bv.len, file_from, pos, limit, verify_crc, index_on,
                             first_key, <int64_t *>sv.buf, sv.shape[0], <int64_t *>ov.buf, ov.shape[0], ov.shape[1],
                             <const int64_t *>lv.buf if held == 4 else NULL,
                             lv.shape[0] if held == 4 else 0, live_cap)
        finally:
            if held >= 4:
                PyBuffer_Release(&lv)
            if held >= 3:
                PyBuffer_Release(&ov)
            if held >= 2:
                PyBuffer_Release(&sv)
            if held >= 1:
                PyBuffer_Release(&bv)

    cdef object _run(self, const unsigned char *bp, int64_t n, int64_t file_from, int64_t pos, int64_t limit,
                    bint verify_crc, bint index_on, int64_t first_key, int64_t *seg, int64_t seg_len,
                    int64_t *so, int64_t so_rows, int64_t seg_cap, const int64_t *lp, int64_t live_len,
                    int64_t live_cap):
        cdef int64_t v
        cdef int64_t cnt, end_pos, nkeys, j, k, k0, kn, rpos, size, phys, sysf, tran, qid, qoff, tags, ts
        cdef int64_t done = 0, at = pos, stop = RMQ_STOP_NONE, a = 0, b = 0, c = 0, d = 0, max_ts = -1
        cdef int64_t s, expected, current, ic, tlen, last_s = -1, last_qid = -1
        cdef int st = 0, full
        cdef const unsigned char *base = bp
        cdef int64_t *cols = self._cols
        cdef int64_t *disp = self._disp
        cdef int64_t *keys = self._keys
        cdef cq_slot *sl
        cdef unsigned char *ib
        cdef int64_t nseg = 0
        cdef int seg_on
        cdef int64_t s_count, s_end, s_since, s_max, s_omax, s_mono, s_floor, s_interval, s_last_t
        cdef int64_t *gr
        cdef const int64_t *wp = self._wanted
        cdef int64_t idle = 0, nap = self._nap_ns, nap_max = self._nap_max_ns
        cdef int64_t wend, lag, prev_full = limit, prev_t = 0, t_now
        cdef uint32_t wseq = 0
        cdef unsigned char *wk = self._wake
        cdef int64_t next_hint = -1, parse_cap, hint_from, from_hints
        cdef const int64_t *ring = self._ring if not verify_crc else NULL
        if pos < 0 or limit < pos or limit > n:
            raise ValueError(f"range [{pos}, {limit}) outside a buffer of {n} bytes")
        if lp != NULL and live_len < 1:
            raise ValueError("live must hold one int64")
        if seg_len < SEG_FIELDS or so_rows < 4:
            raise ValueError(f"seg needs {SEG_FIELDS} fields and seg_out 4 rows")
        seg_on = seg[9] != 0
        s_count, s_end, s_since, s_max, s_omax = seg[0], seg[1], seg[2], seg[3], seg[4]
        s_mono, s_floor, s_interval, s_last_t = seg[5], seg[6], seg[7], seg[8]
        gr = self._gil_req if lp != NULL else NULL
        if gr != NULL:
            rmq_publish_i64(gr, 0)  # leaving the GIL: the writers may take it again
        prev_t = rmq_notify_now_ns()
        with nogil:
            while stop == RMQ_STOP_NONE:
                if at >= limit:
                    if lp != NULL:  # follow the writer: records completed since the call began
                        if wk != NULL:
                            wseq = rmq_notify_seq(wk)
                        wend = rmq_observe_i64(lp) - file_from
                        # a streaming writer is followed LIVE_LAG behind; a slower one (a paced
                        # producer, live consumers waiting) to its end
                        t_now = rmq_notify_now_ns()
                        lag = LIVE_LAG
                        if (wend - prev_full) * LIVE_STREAMING < t_now - prev_t:
                            lag = 0
                        prev_full, prev_t = wend, t_now
                        v = wend - lag
                        if v > n:
                            v = n
                        if v > live_cap:
                            v = live_cap
                        if v > limit:
                            limit = v
                            idle = 0
                            continue
                        # caught up: nap for the writer (no GIL needed) unless someone waits to dispatch
                        if (idle < nap_max and limit < live_cap
                                and (wp == NULL or rmq_observe_i64(wp) == 0)):
                            if wk != NULL and lag == 0:  # until the writer's next put (it pokes the slot), at most nap
                                rmq_notify_arm(wk)
                                if rmq_observe_i64(lp) - file_from == wend:
                                    rmq_notify_wait(wk, wseq, nap, wp, 1, 0)
                            else:
                                rmq_sleep_ns(nap)
                            idle += nap
                            continue
                    break
                cnt = 0
                parse_cap = CHUNK
                hint_from = self._hint_at
                from_hints = 0
                if ring != NULL:  # records the writer left hints for need no parsing
                    # hint_from: the first record's hint, where a stop looks again
                    cnt = rmq_dispatch_hinted(ring, rmq_observe_i64(self._head), &self._hint_at, base, file_from,
                                              at, limit, self._hint_cap, cols, CHUNK, disp, CHUNK, keys, &end_pos,
                                              &nkeys, &next_hint, &hint_from)
                    if cnt > 0:
                        st = RMQ_ST_MSG
                        from_hints = 1
                    elif next_hint >= 0:
                        # hints resume at next_hint: parse up to about there (records of 512 bytes or more)
                        parse_cap = min(CHUNK, max(1, (next_hint - file_from - at) // 512))
                if cnt == 0:
                    st = rmq_dispatch_batch(base, at, limit, verify_crc, parse_cap, cols, CHUNK, 1, disp, CHUNK, 1,
                                            keys, 1, KEYS_CAP, &cnt, &end_pos, &nkeys)
                if st == RMQ_DISPATCH_E_KEYS:
                    stop, a, st = RMQ_STOP_SPECIAL, RMQ_SPECIAL_KEYS, RMQ_ST_MSG  # more keys than the scratch holds: the general path
                    break
                for j in range(cnt):
                    # index slots are random accesses into a table larger than the caches: prefetch
                    # the next records' slots while this one is applied
                    if index_on and self._idx_bound and j + 6 < cnt:
                        for k in range(disp[RMQ_D_KEYS_COUNT * CHUNK + j + 6]):
                            rmq_prefetch_w(<unsigned char *>self._idx.buf + 40 + 4 * (
                                <uint32_t><int32_t>keys[disp[RMQ_D_KEYS_START * CHUNK + j + 6] + k] % self._islots))
                    rpos = cols[RMQ_C_POSITION * CHUNK + j]
                    size = cols[RMQ_C_SIZE * CHUNK + j]
                    phys = file_from + rpos
                    sysf = cols[RMQ_C_SYS_FLAG * CHUNK + j]
                    tran = sysf & 0xC
                    ts = cols[RMQ_C_STORE_TIMESTAMP * CHUNK + j]
                    if disp[RMQ_D_FLAGS * CHUNK + j] & 3:
                        stop, a = RMQ_STOP_SPECIAL, RMQ_SPECIAL_FLAGS  # delay topic (tagsCode = delivery time) or invalid UTF-8: the general path
                        break
                    tags = disp[RMQ_D_TAGS_CODE * CHUNK + j]
                    # consume queue: NOT_TYPE and COMMIT records get a unit
                    if tran == 0 or tran == 0x8:
                        qid = cols[RMQ_C_QUEUE_ID * CHUNK + j]
                        tlen = cols[RMQ_C_TOPIC_LEN * CHUNK + j]
                        # a run of records to one queue (a batch) finds its slot once
                        if (last_s >= 0 and qid == last_qid and tlen == self._slots[last_s].topic_len
                                and rmq_same_topic(base + cols[RMQ_C_TOPIC_POS * CHUNK + j], self._slots[last_s].topic, tlen)):
                            s = last_s
                        else:
                            s = self._find(base + cols[RMQ_C_TOPIC_POS * CHUNK + j], tlen, qid)
                            last_s, last_qid = s, qid
                        if s < 0 or not self._slots[s].bound:
                            stop, a, b, c = RMQ_STOP_QUEUE, cols[RMQ_C_TOPIC_POS * CHUNK + j], cols[RMQ_C_TOPIC_LEN * CHUNK + j], qid
                            d = cols[RMQ_C_QUEUE_OFFSET * CHUNK + j]
                            break
                        sl = &self._slots[s]
                        if phys + size > sl.max_phys:
                            qoff = cols[RMQ_C_QUEUE_OFFSET * CHUNK + j]
                            if sl.wrote >= sl.file_size:
                                stop, a, b, c, d = RMQ_STOP_QUEUE, cols[RMQ_C_TOPIC_POS * CHUNK + j], cols[RMQ_C_TOPIC_LEN * CHUNK + j], qid, qoff
                                break
                            expected = qoff * 20
                            current = sl.file_from + sl.wrote
                            if expected == current:
                                rmq_cq_publish_unit(sl.buf + sl.wrote, phys, <int32_t>size, tags)
                                sl.wrote += 20
                                sl.max_phys = phys + size
                                if not sl.touched:
                                    sl.touched = 1
                                    self._touched[self._ntouched] = s
                                    self._ntouched += 1
                                if not sl.pend and sl.npos >= 0:
                                    sl.pend = 1
                                    self._pend[self._npend] = s
                                    self._npend += 1
                            elif expected == 0 or expected > current:
                                stop, a = RMQ_STOP_SPECIAL, RMQ_SPECIAL_QUEUE_POS  # RocketMQ writes it where the file is (with a warning): the general path
                                break
                            # else: built before (expected < current): nothing to write
                    # index: the last file first (getAndCreateLastIndexFile), then the keys
                    if index_on:
                        if not self._idx_bound:
                            stop, a = RMQ_STOP_INDEX, 0
                            break
                        ib = <unsigned char *>self._idx.buf
                        ic = rmq_load_be32s(ib + 36)
                        if ic <= 0:
                            ic = 1
                        k0 = first_key if rpos == pos else 0
                        kn = disp[RMQ_D_KEYS_COUNT * CHUNK + j]
                        if ic >= self._ientries:
                            stop, a = RMQ_STOP_INDEX, k0
                            break
                        if tran != 0xC and phys >= rmq_load_be64s(ib + 24):
                            full = 0
                            for k in range(k0, kn):
                                if not rmq_index_put(ib, self._islots, self._ientries,
                                                     <int32_t>keys[disp[RMQ_D_KEYS_START * CHUNK + j] + k], phys, ts):
                                    stop, a, full = RMQ_STOP_INDEX, k, 1
                                    break
                            if full:
                                break
                    # segment index (Kafka's LogSegment rule), for records past its end
                    if seg_on and rpos >= s_end:
                        if nseg == seg_cap:
                            stop = RMQ_STOP_SEG
                            break
                        if ts < s_max or ts < s_floor:
                            s_mono = 0
                        if ts > s_max:
                            s_max, s_omax = ts, s_count
                        if s_since > s_interval:
                            so[0 * seg_cap + nseg] = s_count
                            so[1 * seg_cap + nseg] = rpos
                            if s_max > s_last_t:
                                so[2 * seg_cap + nseg] = s_max
                                so[3 * seg_cap + nseg] = s_omax
                                s_last_t = s_max
                            else:
                                so[2 * seg_cap + nseg] = -1
                                so[3 * seg_cap + nseg] = -1
                            nseg += 1
                            s_since = 0
                        s_since += size
                        s_count += 1
                        s_end = rpos + size
                    if ts > max_ts:
                        max_ts = ts
                    done += 1
                    self.hinted += from_hints
                    at = rpos + size
                if self._npend:  # readers waiting on these queues (any process) may go on
                    self._announce()
                if stop != RMQ_STOP_NONE:
                    self._hint_at = hint_from  # records from the stop on are not done: look again
                    # and take few from hints next time (a store that binds a queue for every
                    # record, each one's first, read thousands of hints to use one)
                    self._hint_cap = HINT_CAP_MIN
                    break
                if from_hints and self._hint_cap < CHUNK:
                    self._hint_cap = min(CHUNK, 2 * self._hint_cap)
                at = end_pos
                if st != RMQ_ST_MSG and not (st == RMQ_ST_END and lp != NULL and at >= limit):
                    break
            if gr != NULL:  # about to wait for the GIL: ask the writers to hand it over (until the next run)
                self._gil_seq += 1
                rmq_publish_i64(gr, self._gil_seq)
        seg[0], seg[1], seg[2], seg[3], seg[4] = s_count, s_end, s_since, s_max, s_omax
        seg[5], seg[6], seg[7], seg[8] = s_mono, s_floor, s_interval, s_last_t
        if stop == RMQ_STOP_NONE and st == RMQ_ST_MSG:
            st = RMQ_ST_END if at >= limit else st
        return tuple.__new__(DispatchRun, (done, at, st, stop, a, b, c, d, max_ts, nseg))


# -- the unit loop of getMessage --------------------------------------------------------------------


def select_units(buf, int64_t pos, int64_t n, int64_t offset, int64_t max_msgs, int64_t max_bytes, codes,
                 int64_t cl_min, int64_t max_phys, int64_t mem_limit, int64_t disk_bytes, int64_t disk_count,
                 int64_t mem_bytes, int64_t mem_count):
    """See the pure twin. The units are read in place, under one export of ``buf``."""
    cdef Py_buffer view
    cdef const unsigned char *u
    cdef int64_t i = 0, total = 0, count = 0, off, size, code, lim_b, lim_c
    cdef int32_t *cs = NULL
    cdef int32_t c32
    cdef Py_ssize_t ncs = 0, j
    cdef int status = RMQ_SELECT_NO_MATCH
    cdef bint filt = codes is not None
    cdef bint hit
    phys = []
    qoffs = []
    sizes = []
    if filt:
        cs = <int32_t *>malloc((len(codes) + 1) * sizeof(int32_t))
        if cs == NULL:
            raise MemoryError()
    try:
        if filt:
            for c in codes:
                if -2**31 <= c < 2**31:  # no int32 equals any other
                    cs[ncs] = <int32_t>c
                    ncs += 1
        _get_buffer(buf, &view, PyBUF_SIMPLE)
        try:
            if pos < 0 or n < 0 or pos > view.len or n > (view.len - pos) // 20:
                raise ValueError(f"{n} units at {pos} outside a buffer of {view.len} bytes")
            u = <const unsigned char *>view.buf + pos
            while i < n:
                off = rmq_load_be64s(u)
                size = rmq_load_be32s(u + 8)
                code = rmq_load_be64s(u + 12)
                if total != 0 and count != 0:
                    if max_msgs <= count:
                        break
                    if off < max_phys - mem_limit:  # max_phys - off > mem_limit, without overflow
                        lim_b, lim_c = disk_bytes, disk_count
                    else:
                        lim_b, lim_c = mem_bytes, mem_count
                    if total + size > min(lim_b, max_bytes) or count > lim_c - 1:
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
                        status = RMQ_SELECT_REMOVING
                    continue
                phys.append(off)
                qoffs.append(offset + i - 1)
                sizes.append(size)
                total += size
                count += 1
                status = RMQ_SELECT_FOUND
        finally:
            PyBuffer_Release(&view)
    finally:
        free(cs)
    return status, i, phys, qoffs, sizes
