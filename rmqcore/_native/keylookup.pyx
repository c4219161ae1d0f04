# cython: language_level=3
"""Exact key lookup over IndexFiles and the CommitLog: native twin of ``rmqcore._pure.keylookup``
(see it for the contract).

``KeyLookup`` acquires every buffer once, when the store builds it, and keeps them exported until
``release()`` (the store releases it before any file is unmapped, and rebuilds it when files come
or go), so a query is one call: hash ``topic#key`` over the str's UTF-8 (Java's UTF-16 units),
walk the index chains (``csrc/rmq_index.c``), validate each hit's record (``rmq_check_record``)
and re-check topic and key on the raw bytes (``csrc/rmq_lookup.c``). The GIL is held: a query is
about a microsecond, and holding it keeps ``release()`` from running under a walk. The one nogil
section, the key cache taking in new index entries, is pinned: a ``release()`` meanwhile waits for
it, and the query then stops without touching a buffer (answering LOOKUP_CANNOT_ANSWER: the general path decides).
``LookupFront`` runs each call inside the store's lifecycle gate (``gate.pxd``).
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memset
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

__all__ = ["KeyCache", "KeyLookup", "LookupFront", "props_have_key"]

cdef extern from "Python.h":
    int _get_buffer "PyObject_GetBuffer"(object obj, Py_buffer *view, int flags) except -1
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    bint PyUnicode_IS_ASCII(object s)
    bint PyLong_CheckExact(object o)
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) noexcept

cdef extern from "rmq_hash.h" nogil:
    int32_t rmq_hash_as_int32(uint32_t h)
    int32_t rmq_index_key_hash(int32_t hash_code)

cdef extern from "rmq_dispatch.h" nogil:
    uint32_t rmq_java_hash_utf8(uint32_t h, const unsigned char *s, size_t n, int *bad)
    uint32_t rmq_java_hash_ascii(uint32_t h, const unsigned char *s, size_t n)
    int rmq_utf8_valid(const unsigned char *s, size_t n)

cdef extern from "rmq_lookup.h" nogil:
    enum:
        RMQ_LOOKUP_DISPATCH_FIRST
        RMQ_LOOKUP_CANNOT_ANSWER
    int rmq_props_have_key(const unsigned char *props, size_t n, const unsigned char *key, size_t klen)

cdef extern from "rmq_keycache.h" nogil:
    ctypedef struct rmq_keycache:
        uint64_t cap
        uint64_t used
    int rmq_kc_init(rmq_keycache *c, uint64_t cap)
    void rmq_kc_free(rmq_keycache *c)
    int64_t rmq_kc_get(const rmq_keycache *c, int32_t hash)
    int64_t rmq_kc_get_n(const rmq_keycache *c, int32_t hash, int32_t *n)
    void rmq_kc_prefetch(const rmq_keycache *c, int32_t hash)
    int rmq_kc_ingest(rmq_keycache *c, const unsigned char *index, uint32_t slots, uint32_t start, uint32_t stop)

cdef extern from "rmq_endian.h" nogil:
    int32_t rmq_observe_be32s(const void *p)
    int64_t rmq_observe_i64(const int64_t *p)
    void rmq_publish_i64(int64_t *p, int64_t v)

cdef extern from "<sched.h>" nogil:
    int sched_yield()

from .codec cimport (
    RMQ_ST_BLANK,
    RMQ_ST_END,
    RMQ_ST_MSG,
    alloc_message,
    fill_message,
    make_message,
    record_tuple,
    rmq_check_record,
    rmq_record,
)
from .gate cimport Gate
from .indexfile cimport (
    RMQ_INDEX_OK,
    rmq_index_check,
    rmq_index_file_size,
    rmq_index_header,
    rmq_index_read_header,
    rmq_index_walk,
    rmq_index_walk_run,
    rmq_index_walk_start,
)

cdef extern from *:
    """
    #define rmq_prefetch_r(p) __builtin_prefetch((p), 0, 3)
    """
    void rmq_prefetch_r(const void *p) nogil

DEF STACK_HITS = 64

from ..layout import LOOKUP_CANNOT_ANSWER, LOOKUP_DISPATCH_FIRST

# the C header names the outcomes the Python side tests for (checked once at import: a build bug)
if (RMQ_LOOKUP_DISPATCH_FIRST, RMQ_LOOKUP_CANNOT_ANSWER) != (LOOKUP_DISPATCH_FIRST, LOOKUP_CANNOT_ANSWER):
    raise ImportError("csrc/rmq_lookup.h disagrees with rmqcore/layout.py")


def props_have_key(const unsigned char[::1] props, const unsigned char[::1] key):
    """1 when ``props`` names ``key`` as UNIQ_KEY or as a KEYS token, 0 when not, -1 when the
    properties are not valid UTF-8 (see csrc/rmq_lookup.h)."""
    cdef const unsigned char *p = &props[0] if props.shape[0] else <const unsigned char *>b""
    cdef const unsigned char *k = &key[0] if key.shape[0] else <const unsigned char *>b""
    return rmq_props_have_key(p, <size_t>props.shape[0], k, <size_t>key.shape[0])


cdef bint _encode_key(str topic, str key, const unsigned char **t, Py_ssize_t *tlen, const unsigned char **k,
                      Py_ssize_t *klen, int32_t *key_hash) except -1:
    """The UTF-8 of ``topic`` and ``key`` (borrowed from the str objects) and the index hash of
    ``topic#key``; False when either cannot be encoded (a lone surrogate: the general path)."""
    cdef int bad = 0
    cdef uint32_t h
    try:
        t[0] = <const unsigned char *>PyUnicode_AsUTF8AndSize(topic, tlen)
        k[0] = <const unsigned char *>PyUnicode_AsUTF8AndSize(key, klen)
    except UnicodeEncodeError:
        return False
    if PyUnicode_IS_ASCII(topic) and PyUnicode_IS_ASCII(key):  # one UTF-16 unit per byte
        h = rmq_java_hash_ascii(0, t[0], <size_t>tlen[0])
        h = rmq_java_hash_ascii(h * 31u + 35u, k[0], <size_t>klen[0])  # 35: '#'
    else:
        h = rmq_java_hash_utf8(0, t[0], <size_t>tlen[0], &bad)
        h = rmq_java_hash_utf8(h, <const unsigned char *>b"#", 1, &bad)
        h = rmq_java_hash_utf8(h, k[0], <size_t>klen[0], &bad)
    key_hash[0] = rmq_index_key_hash(rmq_hash_as_int32(h))
    return True


cdef inline void _prefetch_record(const unsigned char *buf, Py_ssize_t buflen, int64_t file_from,
                                  int64_t off) noexcept:
    """Start loading a record's first lines at once, not one miss after another."""
    cdef int64_t pos = off - file_from
    if pos >= 0 and pos + 256 <= buflen:
        rmq_prefetch_r(buf + pos)
        rmq_prefetch_r(buf + pos + 64)
        rmq_prefetch_r(buf + pos + 128)
        rmq_prefetch_r(buf + pos + 192)


cdef int _check_in(const unsigned char *buf, Py_ssize_t buflen, int64_t file_from, int64_t off,
                   const unsigned char *t, Py_ssize_t tlen, const unsigned char *k, Py_ssize_t klen,
                   int64_t cl_end, bint verify_crc, rmq_record *rec) noexcept:
    """``KeyLookup._check_hit`` in the CommitLog file mapped at ``buf`` (``buflen`` bytes, starting at
    global offset ``file_from <= off``): 1 the record at ``off`` is a valid message of topic ``t``
    with key ``k`` (``rec`` filled), 0 no, -1 when the general path must decide. (Callers start
    the record's loads first, ``_prefetch_record``.)"""
    cdef int64_t pos = off - file_from, limit = min(<int64_t>buflen, cl_end - file_from), size
    cdef int st
    st = rmq_check_record(buf, pos, limit, verify_crc, &size, rec)
    if st == RMQ_ST_BLANK or st == RMQ_ST_END:
        return 0
    if st != RMQ_ST_MSG:
        return -1
    if rec.topic_len != tlen or (tlen and memcmp(buf + rec.topic_pos, t, <size_t>tlen) != 0):
        return 0 if rmq_utf8_valid(buf + rec.topic_pos, <size_t>rec.topic_len) else -1
    return rmq_props_have_key(buf + rec.props_pos, <size_t>rec.props_len, k, <size_t>klen)


cdef class KeyCache:
    """The newest indexed offset of each key hash (see the pure twin and csrc/rmq_keycache.h).
    Outlives the KeyLookups the store rebuilds; remembers how many entries of each index file
    (by name) it has taken in. ``_ingesting`` is set (with the GIL) while one thread takes entries
    in without the GIL: the table may be reallocated meanwhile, so no other thread reads it then
    (their lookups walk the index instead)."""
    cdef rmq_keycache c
    cdef bint _ingesting
    cdef dict _pos
    cdef int64_t *_counts
    cdef Py_ssize_t _n, _cap

    def __cinit__(self):
        self._counts = NULL
        self._n = self._cap = 0
        self._ingesting = False
        self._pos = {}
        if rmq_kc_init(&self.c, 1024) != 0:
            raise MemoryError()

    def __dealloc__(self):
        rmq_kc_free(&self.c)
        PyMem_Free(self._counts)

    cdef Py_ssize_t position(self, name) except -1:
        cdef int64_t *grown
        p = self._pos.get(name)
        if p is not None:
            return <Py_ssize_t>p
        if self._n == self._cap:
            self._cap = max(16, 2 * self._cap)
            grown = <int64_t *>PyMem_Realloc(self._counts, self._cap * sizeof(int64_t))
            if grown == NULL:
                raise MemoryError()
            self._counts = grown
        self._counts[self._n] = 0
        self._pos[name] = self._n
        self._n += 1
        return self._n - 1

    @property
    def size(self):
        """How many distinct key hashes it holds."""
        return self.c.used

    def newest(self, int32_t key_hash):
        """The largest offset indexed under ``key_hash``, or -1."""
        return rmq_kc_get(&self.c, key_hash)

    def entries(self, int32_t key_hash):
        """How many entries were taken in under ``key_hash``: 0, 1, or 2 for more than one."""
        cdef int32_t n
        rmq_kc_get_n(&self.c, key_hash, &n)
        return n


cdef class KeyLookup:
    cdef KeyCache _kc
    cdef Py_ssize_t *_kcpos
    cdef Py_buffer *_idx
    cdef Py_ssize_t _nidx
    cdef Py_buffer *_cl
    cdef int64_t *_from
    cdef Py_ssize_t _ncl
    cdef uint32_t _slots, _entries
    cdef uint64_t _steps
    cdef Py_buffer _live_view  # the appender's published end (int64[1]), held while _live_p is set
    cdef Py_buffer _disp_view  # the store's dispatched end (int64[1])
    cdef const int64_t *_live_p
    cdef const int64_t *_disp_p
    cdef int64_t _static_end
    cdef int64_t _max_num
    cdef bint _released  # set first by release(): no call starts, and one under way stops, on it
    cdef int64_t _pinned  # calls in a nogil section over the buffers (release() waits for them)

    def __cinit__(self, index_buffers, slot_count, max_entries, max_steps, commitlog_buffers, commitlog_froms,
                  live=None, dispatched=None, static_end=0, max_num=64, cache=None, index_ids=None):
        self._kc = None
        self._kcpos = NULL
        self._idx = NULL
        self._cl = NULL
        self._from = NULL
        self._nidx = self._ncl = 0
        self._live_p = NULL
        self._disp_p = NULL
        self._released = False
        self._pinned = 0

    def __init__(self, index_buffers, slot_count, max_entries, max_steps, commitlog_buffers, commitlog_froms,
                  live=None, dispatched=None, static_end=0, max_num=64, cache=None, index_ids=None):
        cdef Py_ssize_t i
        for a in (live, dispatched):
            if a is not None and (a.dtype.kind != "i" or a.dtype.itemsize != 8 or a.shape != (1,)):
                raise ValueError("live and dispatched must be int64 arrays of one item")
        self._static_end, self._max_num = static_end, max_num
        if live is not None:
            _get_buffer(live, &self._live_view, PyBUF_SIMPLE)
            self._live_p = <const int64_t *>self._live_view.buf
        if dispatched is not None:
            _get_buffer(dispatched, &self._disp_view, PyBUF_SIMPLE)
            self._disp_p = <const int64_t *>self._disp_view.buf
        idx, cls, froms = list(index_buffers), list(commitlog_buffers), [int(f) for f in commitlog_froms]
        if len(cls) != len(froms):
            raise ValueError("commitlog_buffers and commitlog_froms differ in length")
        if not (1 <= slot_count <= 0x7FFFFFFF and 1 <= max_entries <= 0x7FFFFFFF and max_steps >= 0):
            raise ValueError(f"bad geometry: {slot_count} slots, {max_entries} entries, {max_steps} steps")
        self._slots, self._entries, self._steps = slot_count, max_entries, max_steps
        self._idx = <Py_buffer *>PyMem_Malloc(max(1, len(idx)) * sizeof(Py_buffer))
        self._cl = <Py_buffer *>PyMem_Malloc(max(1, len(cls)) * sizeof(Py_buffer))
        self._from = <int64_t *>PyMem_Malloc(max(1, len(cls)) * sizeof(int64_t))
        if self._idx == NULL or self._cl == NULL or self._from == NULL:
            raise MemoryError()
        for b in idx:
            _get_buffer(b, &self._idx[self._nidx], PyBUF_SIMPLE)
            self._nidx += 1
            if <uint64_t>self._idx[self._nidx - 1].len < rmq_index_file_size(self._slots, self._entries):
                raise ValueError("an index buffer is shorter than the geometry")
        for i in range(len(cls)):
            _get_buffer(cls[i], &self._cl[self._ncl], PyBUF_SIMPLE)
            self._from[i] = froms[i]
            self._ncl += 1
        if cache is not None:
            if not isinstance(cache, KeyCache) or index_ids is None or len(index_ids) != len(idx):
                raise ValueError("a cache needs a KeyCache and one id per index buffer")
            self._kcpos = <Py_ssize_t *>PyMem_Malloc(max(1, len(idx)) * sizeof(Py_ssize_t))
            if self._kcpos == NULL:
                raise MemoryError()
            for i in range(len(idx)):
                self._kcpos[i] = (<KeyCache>cache).position(index_ids[i])
            self._kc = cache

    def release(self):
        """Let go of every buffer. A call of another thread in a nogil section over them (taking in
        index entries for the key cache) finishes that section first, and then stops (answering LOOKUP_CANNOT_ANSWER,
        the general path) instead of going on: when this returns, nothing of this lookup points
        into a map, which may then be closed. Calls on a released lookup answer LOOKUP_CANNOT_ANSWER as well."""
        cdef Py_ssize_t i
        self._released = True
        if self._pinned:
            with nogil:
                while rmq_observe_i64(&self._pinned) > 0:
                    sched_yield()
        for i in range(self._nidx):
            PyBuffer_Release(&self._idx[i])
        for i in range(self._ncl):
            PyBuffer_Release(&self._cl[i])
        self._nidx = self._ncl = 0
        if self._live_p != NULL:
            PyBuffer_Release(&self._live_view)
            self._live_p = NULL
        if self._disp_p != NULL:
            PyBuffer_Release(&self._disp_view)
            self._disp_p = NULL
        PyMem_Free(self._idx)
        PyMem_Free(self._cl)
        PyMem_Free(self._from)
        PyMem_Free(self._kcpos)
        self._kcpos = NULL
        self._kc = None
        self._idx = NULL
        self._cl = NULL
        self._from = NULL

    def __dealloc__(self):
        self.release()

    def find(self, str topic, str key, int64_t begin, int64_t end, int64_t max_num, int64_t cl_min,
             int64_t cl_end, bint verify_crc, bint newest_body):
        return self._find(topic, key, begin, end, max_num, cl_min, cl_end, verify_crc, newest_body)

    def offsets_raw(self, str topic, str key, int64_t begin, int64_t end, int64_t max_num):
        """See the pure twin."""
        return self._offsets_raw(topic, key, begin, end, max_num)

    cdef object _offsets_raw(self, str topic, str key, int64_t begin, int64_t end, int64_t max_num):
        cdef int64_t cl_end = self._end_now()
        if cl_end < 0:
            return RMQ_LOOKUP_DISPATCH_FIRST if cl_end == -1 else RMQ_LOOKUP_CANNOT_ANSWER
        ok, got = self._find(topic, key, begin, end, min(max_num, self._max_num), 0, 0, False, False, True)
        return got if ok else RMQ_LOOKUP_CANNOT_ANSWER

    cdef tuple _find(self, str topic, str key, int64_t begin, int64_t end, int64_t max_num, int64_t cl_min,
                     int64_t cl_end, bint verify_crc, bint newest_body, bint raw_only=False):
        """The index walk (IndexService.queryOffset) and each hit's record re-checked: ``(True,
        ascending offsets)``, or with ``newest_body`` ``(True, the newest match's body or None)``;
        ``raw_only``: the walk's offsets as they are (hash matches), sorted. ``(False, None)`` when
        the general path must answer."""
        cdef Py_ssize_t tlen, klen, i
        cdef const unsigned char *t
        cdef const unsigned char *k
        cdef int32_t key_hash
        cdef int64_t stack[STACK_HITS]
        cdef int64_t *raw = stack
        cdef int64_t nraw = 0, off, best = -1
        cdef rmq_index_header hd
        cdef rmq_index_walk w
        cdef rmq_record rec
        cdef rmq_record best_rec
        cdef const unsigned char *buf
        cdef const unsigned char *best_buf = NULL
        cdef int m
        # allocated first: a collection (an allocation may run one, and its finalizers may release
        # this lookup) must not come between the check below and the walk
        hits = None if newest_body else []
        if self._released:
            return False, None
        if not _encode_key(topic, key, &t, &tlen, &k, &klen, &key_hash):
            return False, None
        if max_num <= 0:
            return True, hits
        if max_num > STACK_HITS:
            raw = <int64_t *>PyMem_Malloc(max_num * sizeof(int64_t))
            if raw == NULL:
                raise MemoryError()
        try:
            # IndexService.queryOffset: newest file first
            for i in range(self._nidx - 1, -1, -1):
                buf = <const unsigned char *>self._idx[i].buf
                if rmq_index_check(buf, <size_t>self._idx[i].len, self._slots, self._entries) != RMQ_INDEX_OK:
                    return False, None
                rmq_index_read_header(buf, &hd)
                if ((begin < hd.begin_timestamp and end > hd.end_timestamp)
                        or (hd.begin_timestamp <= begin <= hd.end_timestamp)
                        or (hd.begin_timestamp <= end <= hd.end_timestamp)):
                    rmq_index_walk_start(buf, self._slots, key_hash, <uint64_t>(max_num - nraw), self._steps, &w)
                    nraw += <int64_t>rmq_index_walk_run(buf, self._slots, self._entries, key_hash, begin, end, &w,
                                                        raw + nraw, <size_t>(max_num - nraw))
                if hd.begin_timestamp < begin or nraw >= max_num:
                    break
            if raw_only:
                for i in range(nraw):
                    hits.append(raw[i])
                hits.sort()
                return True, hits
            # the re-check against each record
            for i in range(nraw):
                off = raw[i]
                m = self._check_hit(off, t, tlen, k, klen, cl_min, cl_end, verify_crc, &rec, &buf)
                if m < 0:
                    return False, None
                if m:
                    if newest_body:
                        if off > best:
                            best, best_rec, best_buf = off, rec, buf
                    else:
                        hits.append(off)
            if newest_body:
                if best_buf == NULL:
                    return True, None
                return True, PyBytes_FromStringAndSize(<const char *>best_buf + best_rec.body_pos, best_rec.body_len)
            hits.sort()
            return True, hits
        finally:
            if raw != stack:
                PyMem_Free(raw)

    cdef Py_ssize_t _file_of(self, int64_t off) noexcept:
        """The last CommitLog file starting at or before ``off`` (0 when none does; _ncl > 0)."""
        cdef Py_ssize_t lo = 0, hi = self._ncl, j
        while hi - lo > 1:
            j = (lo + hi) >> 1
            if self._from[j] <= off:
                lo = j
            else:
                hi = j
        return lo

    cdef int _check_hit(self, int64_t off, const unsigned char *t, Py_ssize_t tlen, const unsigned char *k,
                        Py_ssize_t klen, int64_t cl_min, int64_t cl_end, bint verify_crc, rmq_record *rec,
                        const unsigned char **rbuf) noexcept:
        """Is the record at ``off`` a valid message of topic ``t`` with key ``k``? 1 yes, 0 no (or
        outside ``[cl_min, cl_end)``, or not a message), -1 when the general path must decide."""
        cdef Py_ssize_t lo = self._file_holding(off, cl_min, cl_end)
        if lo < 0:
            return 0
        rbuf[0] = <const unsigned char *>self._cl[lo].buf
        _prefetch_record(rbuf[0], self._cl[lo].len, self._from[lo], off)
        return _check_in(rbuf[0], self._cl[lo].len, self._from[lo], off, t, tlen, k, klen, cl_end, verify_crc,
                         rec)

    cdef Py_ssize_t _file_holding(self, int64_t off, int64_t cl_min, int64_t cl_end) noexcept:
        """The CommitLog file a record at ``off`` would be in: its index, or -1 when ``off`` is
        outside ``[cl_min, cl_end)`` or before every file."""
        cdef Py_ssize_t lo
        if off < cl_min or off >= cl_end or self._ncl == 0:
            return -1
        lo = self._file_of(off)
        return -1 if self._from[lo] > off else lo

    cdef int _cache_sync(self) except -1:
        """Take in the index entries added since the cache last looked (sequential reads). 0 when
        the cache may be read now, 1 when another thread is taking entries in (leave it alone) or
        the lookup was released meanwhile."""
        cdef Py_ssize_t i, p
        cdef int64_t cnt, have
        cdef const unsigned char *buf
        cdef KeyCache kc = self._kc
        cdef int rc
        if kc._ingesting:
            return 1
        for i in range(self._nidx):
            buf = <const unsigned char *>self._idx[i].buf
            cnt = rmq_observe_be32s(buf + 36)  # the header's index count: entries [1, count) are written
            if cnt > self._entries:
                cnt = self._entries
            p = self._kcpos[i]
            have = kc._counts[p]
            if cnt > have:
                # pinned: a release() on another thread meanwhile waits for this section, and this
                # call then stops (the buffers go when it returns)
                rmq_publish_i64(&self._pinned, self._pinned + 1)
                kc._ingesting = True
                with nogil:
                    rc = rmq_kc_ingest(&kc.c, buf, self._slots, <uint32_t>(have if have >= 1 else 1), <uint32_t>cnt)
                kc._ingesting = False
                rmq_publish_i64(&self._pinned, self._pinned - 1)
                if rc != 0:
                    raise MemoryError()
                kc._counts[p] = cnt
                if self._released:
                    return 1
        return 0

    cdef int64_t _end_now(self) noexcept:
        """The CommitLog end a query sees: the appender's published end (``static_end`` while it
        publishes none); -1 when the store's dispatched end is behind it, -2 once released."""
        cdef int64_t cl_end = self._static_end, done
        if self._released:
            return -2
        if self._live_p != NULL:
            done = rmq_observe_i64(self._live_p)
            if done >= 0:
                cl_end = done
                if self._disp_p != NULL and rmq_observe_i64(self._disp_p) < cl_end:
                    return -1
        return cl_end

    def newest_body(self, str topic, str key, int64_t begin, int64_t end):
        """See ``_newest_body``."""
        return self._newest_body(topic, key, begin, end)

    cdef object _newest_body(self, str topic, str key, int64_t begin, int64_t end):
        """``find(..., newest_body=True)`` for ``MessageStore.lookup``: the end of the CommitLog is the
        appender's published end (``live``; ``static_end`` while it publishes none), and when the
        store's ``dispatched`` end is behind it the answer is LOOKUP_DISPATCH_FIRST
        (dispatch, then ask again). Returns bytes or None, LOOKUP_DISPATCH_FIRST, or LOOKUP_CANNOT_ANSWER (the general path answers)."""
        cdef int64_t cl_end = self._end_now()
        if cl_end < 0:
            return RMQ_LOOKUP_DISPATCH_FIRST if cl_end == -1 else RMQ_LOOKUP_CANNOT_ANSWER
        if self._kc is not None and begin <= 0 and end == INT64_MAX:
            # the cache names the newest entry of the key's hash: when its record is this key's,
            # no newer message has the key; anything else (a collision, a record gone) walks
            got = self._cached_body(topic, key, cl_end)
            if got is not None:
                return got
        ok, got = self._find(topic, key, begin, end, self._max_num, 0, cl_end, True, True)
        return got if ok else RMQ_LOOKUP_CANNOT_ANSWER

    def offsets_now(self, str topic, str key, int64_t begin, int64_t end, int64_t max_num):
        """``find(...)``'s exact offsets for ``query_by_key``, with the CommitLog's end read as
        ``newest_body`` reads it. Returns the ascending list, LOOKUP_DISPATCH_FIRST (dispatch, then ask
        again) or LOOKUP_CANNOT_ANSWER (the general path must answer)."""
        return self._offsets_now(topic, key, begin, end, max_num, self._end_now())

    cdef object _offsets_now(self, str topic, str key, int64_t begin, int64_t end, int64_t max_num,
                             int64_t cl_end):
        if cl_end < 0:
            return RMQ_LOOKUP_DISPATCH_FIRST if cl_end == -1 else RMQ_LOOKUP_CANNOT_ANSWER
        if self._kc is not None and begin <= 0 and end == INT64_MAX and max_num > 0:
            # a key hash indexed once: its one entry is all the walk would find
            got = self._cached_offsets(topic, key, cl_end)
            if got is not None:
                return got
        ok, got = self._find(topic, key, begin, end, min(max_num, self._max_num), 0, cl_end, True, False)
        return got if ok else RMQ_LOOKUP_CANNOT_ANSWER

    def messages_now(self, str topic, str key, int64_t begin, int64_t end, int64_t max_num, factory):
        """See ``_messages_now``."""
        return self._messages_now(topic, key, begin, end, max_num, factory)

    cdef object _messages_now(self, str topic, str key, int64_t begin, int64_t end, int64_t max_num, factory):
        """``offsets_now`` with each match decoded: ``[factory(offset, raw)]`` in ascending offset
        order, ``raw`` the tuple ``codec.decode_record`` returns (the records were checked, CRC
        included, by the lookup); or an outcome (layout.LOOKUP_*) as ``offsets_now`` answers.

        Each record is decoded under its own export of the file's map (decoding a large body lets
        the GIL go, and a release() meanwhile must not unmap it), and ``factory`` runs only after
        every record is decoded: it is Python code, during which release() may run. For
        ``codec.MessageExt`` ``codec.make_message`` builds each one directly instead (no Python
        code runs, and no raw tuple is made)."""
        cdef Py_ssize_t lo, j
        cdef bint built
        cdef int64_t off, pos, limit, size, cl_end
        cdef Py_buffer view
        cdef rmq_record rec
        cdef int st
        cl_end = self._end_now()
        if cl_end >= 0 and self._kc is not None and begin <= 0 and end == INT64_MAX and max_num > 0:
            got = self._cached_message(topic, key, cl_end, factory)  # one match, one pass
            if got is not None:
                return got
        got = self._offsets_now(topic, key, begin, end, max_num, cl_end)
        if type(got) is not list:
            return got
        raws = []
        built = True
        for o in <list>got:  # cl_end >= 0 here: the offsets are an answer
            if self._released:
                return RMQ_LOOKUP_CANNOT_ANSWER  # released meanwhile (files changed)
            off = o
            lo = self._file_of(off)
            pos = off - self._from[lo]
            _get_buffer(self._cl[lo].obj, &view, PyBUF_SIMPLE)
            try:
                limit = min(<int64_t>view.len, cl_end - self._from[lo])
                st = rmq_check_record(<const unsigned char *>view.buf, pos, limit, False, &size, &rec)
                if st != RMQ_ST_MSG:
                    return RMQ_LOOKUP_CANNOT_ANSWER  # checked a moment ago: let the general path look again
                m = make_message(factory, off, <const unsigned char *>view.buf, &rec)
                if m is None:
                    built = False
                    m = record_tuple(<const unsigned char *>view.buf, &rec)
                raws.append(m)
            finally:
                PyBuffer_Release(&view)
        if not built:  # another class: built through it, now that no pointer is held
            for j in range(len(raws)):
                raws[j] = factory((<list>got)[j], raws[j])
        return raws

    cdef int _cached_hit(self, str topic, str key, int64_t cl_end, int64_t *off, rmq_record *rec) except -2:
        """The key's one match when the cache holds exactly one entry for its hash: 1 (``off``,
        ``rec`` set, the record checked, CRC included), 0 when there is no match, -1 when the
        walk must answer."""
        cdef Py_ssize_t tlen, klen
        cdef const unsigned char *t
        cdef const unsigned char *k
        cdef const unsigned char *buf = NULL
        cdef int32_t key_hash, n
        if self._cache_sync():
            return -1
        if not _encode_key(topic, key, &t, &tlen, &k, &klen, &key_hash):
            return -1
        off[0] = rmq_kc_get_n(&self._kc.c, key_hash, &n)
        if n == 0:
            return 0
        if n != 1:
            return -1
        return self._check_hit(off[0], t, tlen, k, klen, 0, cl_end, True, rec, &buf)

    cdef object _cached_offsets(self, str topic, str key, int64_t cl_end):
        """[off] or [] when the cache holds exactly one entry for the key's hash (or none at all);
        None when the walk must answer."""
        cdef int64_t off
        cdef rmq_record rec
        cdef int m = self._cached_hit(topic, key, cl_end, &off, &rec)
        if m < 0:
            return None
        return [off] if m else []

    cdef object _cached_message(self, str topic, str key, int64_t cl_end, object factory):
        """``_cached_offsets`` decoded, for ``codec.MessageExt``: [message], [] or None.

        A lookup waits on two loads from memory, the cache's slot and then the record. Each is
        started early and overlapped with work that does not need it: the instance is allocated
        while the slot loads (an allocation may run a collection, so Python code: nothing but the
        KeyCache, held here, is relied on across it), and the record is checked under an export
        of its file's map, as in messages_now."""
        cdef Py_ssize_t tlen, klen, lo
        cdef const unsigned char *t
        cdef const unsigned char *k
        cdef int32_t key_hash, n
        cdef int64_t off, file_from
        cdef rmq_record rec
        cdef Py_buffer view
        cdef int m
        cdef KeyCache kc = self._kc
        if self._cache_sync():
            return None
        if not _encode_key(topic, key, &t, &tlen, &k, &klen, &key_hash):
            return None
        rmq_kc_prefetch(&kc.c, key_hash)
        msg = alloc_message(factory)
        if msg is None or self._released or kc._ingesting:  # released, or taking in, during the allocation
            return None
        off = rmq_kc_get_n(&kc.c, key_hash, &n)
        if n == 0:
            return []
        if n != 1:  # more than one entry
            return None
        lo = self._file_holding(off, 0, cl_end)
        if lo < 0:
            return []
        file_from = self._from[lo]
        _get_buffer(self._cl[lo].obj, &view, PyBUF_SIMPLE)
        try:
            _prefetch_record(<const unsigned char *>view.buf, view.len, file_from, off)
            m = _check_in(<const unsigned char *>view.buf, view.len, file_from, off, t, tlen, k, klen, cl_end, True,
                          &rec)
            if m <= 0:
                return None if m < 0 else []
            fill_message(msg, off, <const unsigned char *>view.buf, &rec)
        finally:
            PyBuffer_Release(&view)
        return [msg]

    cdef object _cached_body(self, str topic, str key, int64_t cl_end):
        cdef Py_ssize_t tlen, klen
        cdef const unsigned char *t
        cdef const unsigned char *k
        cdef const unsigned char *buf = NULL
        cdef int32_t key_hash
        cdef int64_t off
        cdef rmq_record rec
        if self._cache_sync():
            return None
        if not _encode_key(topic, key, &t, &tlen, &k, &klen, &key_hash):
            return None
        off = rmq_kc_get(&self._kc.c, key_hash)
        if off < 0 or self._check_hit(off, t, tlen, k, klen, 0, cl_end, True, &rec, &buf) != 1:
            return None
        return PyBytes_FromStringAndSize(<const char *>buf + rec.body_pos, rec.body_len)


cdef inline bint _i64(object o, int64_t *out) noexcept:
    """An int (exactly) within int64, as ``out``; False for anything else."""
    cdef int overflow = 0
    cdef long long v
    if not PyLong_CheckExact(o):
        return False
    v = PyLong_AsLongLongAndOverflow(o, &overflow)
    out[0] = v
    return overflow == 0


cdef class LookupFront:
    """``MessageStore.lookup``, ``query_by_key`` and ``query_offsets`` as one native call each (see
    the pure twin): the current KeyLookup's answer, or the store's general path when there is none
    or it cannot answer."""
    cdef public KeyLookup current
    cdef object _general
    cdef object _message
    cdef Gate _gate

    def __init__(self, general, message, Gate gate not None):
        self._general = general
        self._message = message
        self._gate = gate
        self.current = None

    def lookup(self, topic, key, begin=0, end=INT64_MAX):
        cdef Gate gate = self._gate
        gate.enter_c()
        try:
            return self._lookup(topic, key, begin, end)
        finally:
            gate.leave_c()

    cdef object _lookup(self, topic, key, begin, end):
        cdef KeyLookup lk = self.current
        cdef int64_t b, e
        if lk is not None and type(topic) is str and type(key) is str and _i64(begin, &b) and _i64(end, &e):
            got = lk._newest_body(topic, key, b, e)  # LOOKUP_CANNOT_ANSWER when released since it was set (files changed)
            if type(got) is not int:
                return got
        return self._general.lookup_general(topic, key, begin, end)

    def query_by_key(self, topic, key, begin=0, end=INT64_MAX, max_num=64, *, raw=False):
        cdef Gate gate = self._gate
        gate.enter_c()
        try:
            return self._query_by_key(topic, key, begin, end, max_num, raw)
        finally:
            gate.leave_c()

    cdef object _query_by_key(self, topic, key, begin, end, max_num, raw):
        cdef KeyLookup lk = self.current
        cdef int64_t b, e, n
        if (lk is not None and raw is False and type(topic) is str and type(key) is str and _i64(begin, &b)
                and _i64(end, &e) and _i64(max_num, &n)):
            got = lk._messages_now(topic, key, b, e, n, self._message)  # LOOKUP_CANNOT_ANSWER when released since it was set
            if type(got) is list:
                return got
        return self._general.query_general(topic, key, begin, end, max_num, raw)

    def query_offsets(self, topic, key, begin=0, end=INT64_MAX, max_num=64):
        cdef Gate gate = self._gate
        gate.enter_c()
        try:
            return self._query_offsets(topic, key, begin, end, max_num)
        finally:
            gate.leave_c()

    cdef object _query_offsets(self, topic, key, begin, end, max_num):
        cdef KeyLookup lk = self.current
        cdef int64_t b, e, n
        if lk is not None and type(topic) is str and type(key) is str and _i64(begin, &b) and _i64(end, &e) \
                and _i64(max_num, &n):
            got = lk._offsets_raw(topic, key, b, e, n)  # an int when dispatch is behind, or released
            if type(got) is list:
                return got
        return self._general.query_offsets(topic, key, begin, end, max_num)
