# cython: language_level=3
"""The CommitLog append hot path, native twin of ``rmqcore._pure.appender`` (see its docstring).

``Appender.put`` does in one C call what the pure twin does in Python: validation of the common
arguments, topic and queue-offset lookups, the store clock, properties built from ``tags``/``keys``,
encoding with CRC straight into the mapped file. The writable buffer of the current file is
acquired once per file (``set_file``) and released on roll/close, so the map stays exported (and
cannot be closed or resized) while the appender may write into it. The writer lock is a C lock;
a contended ``put`` waits for it with the GIL released. Unusual arguments (a properties mapping,
non-ASCII tags, hosts as text) go through the PutRules, and rolls through the FileRoller, exactly
as in the pure twin. Included: ``appender_props.pxi`` (properties from tags and keys, in C) and
``appender_pages.pxi`` (prefault, sync_range).
"""
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_Check, PyLong_CheckExact
from cpython.list cimport PyList_CheckExact
from cpython.tuple cimport PyTuple_CheckExact
from cpython.unicode cimport PyUnicode_Check, PyUnicode_CheckExact, PyUnicode_GET_LENGTH
cimport cython
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint32_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memset
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

import mmap as _mmap
import os

import numpy as np

from ..errors import InvalidMessageError, MessageTooLargeError, StoreClosedError
from ..layout import HINT_CAPACITY, HINT_FIELDS
from ..wire import SCHEDULE_TOPIC, create_message_id
from . import codec as _codec

# the live end of the CommitLog: written after the record bytes (release), read by the dispatcher
# without the GIL (acquire), so a reader that sees an end sees the bytes below it
cdef extern from "rmq_endian.h" nogil:
    void rmq_publish_i64(int64_t *p, int64_t v)
    int64_t rmq_observe_i64(const int64_t *p)

cdef extern from *:
    """
    #include "rmq_endian.h"
    /* Wait, without the GIL, while *p still holds v (a dispatch thread's GIL request, see
       Appender.set_gil_request), for at most max_ns: yield the CPU between looks. */
    #if defined(_WIN32)
    #include <windows.h>
    static void rmq_wait_while(const int64_t *p, int64_t v, int64_t max_ns) {
        ULONGLONG end = GetTickCount64() + (ULONGLONG)(max_ns / 1000000 + 1);
        while (rmq_observe_i64(p) == v && GetTickCount64() < end)
            SwitchToThread();
    }
    #else
    #include <sched.h>
    #include <time.h>
    static int64_t rmq_mono_ns(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
    }
    static void rmq_wait_while(const int64_t *p, int64_t v, int64_t max_ns) {
        int64_t end = rmq_mono_ns() + max_ns;
        while (rmq_observe_i64(p) == v && rmq_mono_ns() < end)
            sched_yield();
    }
    #endif
    """
    void rmq_wait_while(const int64_t *p, int64_t v, int64_t max_ns) nogil

# The writer lock: a pthread mutex (an uncontended trylock and unlock cost ~30 instructions; a
# PyThread lock, a semaphore, ~150). Taken and released by the same thread, in put and put_batch.
cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_init(pthread_mutex_t *m, const void *attr)
    int pthread_mutex_destroy(pthread_mutex_t *m)
    int pthread_mutex_lock(pthread_mutex_t *m)
    int pthread_mutex_trylock(pthread_mutex_t *m)
    int pthread_mutex_unlock(pthread_mutex_t *m)


# dispatch hints (csrc/rmq_hints.h): what a put knows of its record, left for the reput thread
cdef extern from "rmq_hints.h" nogil:
    void rmq_hint_put(int64_t *ring, int64_t n, int64_t phys, int64_t size, int64_t nkeys, int64_t topic_len,
                      int64_t queue_id, int64_t topic_rel, int64_t qoff, int64_t ts, int64_t tags_code, int64_t key)
    void rmq_hints_invalidate(int64_t *ring)
    int RMQ_HINT_CAPACITY
    int RMQ_HINT_FIELDS

cdef extern from "rmq_jhash.h" nogil:
    uint32_t rmq_jhash_ascii(uint32_t h, const unsigned char *s, size_t n)

cdef extern from "rmq_hash.h" nogil:
    int32_t rmq_hash_as_int32(uint32_t h)
    int32_t rmq_index_key_hash(int32_t hash_code)

if (RMQ_HINT_CAPACITY, RMQ_HINT_FIELDS) != (HINT_CAPACITY, HINT_FIELDS):
    raise ImportError("csrc/rmq_hints.h disagrees with rmqcore/layout.py")

DEF GIL_YIELD_MAX_NS = 2_000_000  # a bound: the dispatch thread answers once it holds the GIL (see
# Dispatcher.set_signals for why 2 ms and not 20)

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    void *PyUnicode_DATA(object o)

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk, timespec *tp)
    enum: CLOCK_REALTIME

from .codec cimport rmq_body_crc, rmq_encode_blank, rmq_encode_record, rmq_msg, rmq_record_size

DEF BLANK_SIZE = 8
DEF MAX_PROPS = 32767
DEF PROPS_STACK = 1024

include "appender_props.pxi"

cdef int64_t I32_MIN = -2147483648
cdef int64_t I32_MAX = 2147483647


cdef extern from "rmq_pyslots.h":
    ctypedef struct PyObject
    Py_ssize_t rmq_member_offset(object d, object cls)
    void rmq_slot_replace(PyObject *o, Py_ssize_t off, PyObject *v)

__all__ = ["Appender", "AppendResult", "BatchAppendResult", "batch_properties", "prefault", "sync_range"]

_NO_TOPIC = object()


@cython.freelist(64)
@cython.no_gc
cdef class AppendResult:
    """What one append returns (AppendMessageResult): physical offset, size, queue offset, store time."""

    cdef readonly int64_t physical_offset
    cdef readonly int64_t size
    cdef readonly int64_t queue_offset
    cdef readonly int64_t store_timestamp
    cdef bytes _addr
    cdef int32_t _port

    def __init__(self, physical_offset, size, queue_offset, store_timestamp, addr, port):
        self.physical_offset = physical_offset
        self.size = size
        self.queue_offset = queue_offset
        self.store_timestamp = store_timestamp
        self._addr = addr
        self._port = port

    @property
    def msg_id(self):
        """The offset message id (store host + physical offset), 32 or 56 upper-case hex digits."""
        return create_message_id(self._addr, self._port, self.physical_offset)

    def __repr__(self):
        return (
            f"AppendResult(physical_offset={self.physical_offset}, size={self.size}, "
            f"queue_offset={self.queue_offset}, store_timestamp={self.store_timestamp})"
        )


cdef inline int64_t _wall_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef int _int_field(object v, str name, int64_t lo, int64_t hi, int64_t *out) except -1:
    cdef int overflow = 0
    cdef int64_t x
    if not PyLong_Check(v):
        raise InvalidMessageError(f"{name} must be an int, not {type(v).__name__}")
    x = PyLong_AsLongLongAndOverflow(v, &overflow)  # no exception to catch on a put's hot path
    if overflow or x < lo or x > hi:
        raise InvalidMessageError(f"{name} {v} is out of range")
    out[0] = x
    return 0


cdef inline int _i32_field(object v, str name, int32_t *out) except -1:
    """``out[0] = v``, an int32 argument (0, its usual value, without a conversion)."""
    cdef int64_t x = 0
    if v is not 0:
        _int_field(v, name, I32_MIN, I32_MAX, &x)
    out[0] = <int32_t>x
    return 0


cdef int64_t _topic_hash(object topic, bytes tb):
    """Java hash of ``topic + "#"`` for the records of ``topic`` that get dispatch hints (an ASCII
    str, not the delay topic), else -1."""
    cdef uint32_t h
    if not PyUnicode_CheckExact(topic) or not PyUnicode_IS_ASCII(topic) or topic == SCHEDULE_TOPIC:
        return -1
    h = rmq_jhash_ascii(0, <const unsigned char *>PyBytes_AS_STRING(tb), <size_t>PyBytes_GET_SIZE(tb))
    h = h * 31 + 35  # + "#"
    return h


DEF DENSE_QUEUES = 4096


cdef int _u32_words(object obj, Py_buffer *v, Py_ssize_t n, int flags, str what) except -1:
    """Export ``obj`` into ``v`` (released by the caller) as ``n`` aligned uint32 words, or raise
    ValueError(``what``)."""
    PyObject_GetBuffer(obj, v, flags | PyBUF_FORMAT)
    if v.len != 4 * n or v.itemsize != 4 or v.format == NULL or v.format[0] not in b"IL" or (<size_t>v.buf) % 4:
        PyBuffer_Release(v)
        raise ValueError(what)
    return 0


@cython.final
cdef class _Queues:
    """Next queue offset of each queue id of one topic: ids below 4096 in a growable C array (-1 =
    never set), larger ones (RocketMQ topics have a few queues, but any int32 id is valid) in a
    dict, so one put to queue 2**31 - 1 does not allocate 16 GiB."""

    cdef int64_t *v
    cdef Py_ssize_t n
    cdef dict big

    def __dealloc__(self):
        free(self.v)

    cdef inline int64_t get(self, int32_t qid) except -1:
        if qid < self.n:
            return self.v[qid] if self.v[qid] >= 0 else 0
        if self.big is None or qid < DENSE_QUEUES:
            return 0
        return self.big.get(qid, 0)

    cdef int put(self, int32_t qid, int64_t value) except -1:
        cdef Py_ssize_t m
        cdef int64_t *p
        if qid >= DENSE_QUEUES:
            if self.big is None:
                self.big = {}
            self.big[qid] = value
            return 0
        if qid >= self.n:
            m = min(max(<Py_ssize_t>qid + 1, self.n * 2, 8), DENSE_QUEUES)
            p = <int64_t *>realloc(self.v, m * sizeof(int64_t))
            if p == NULL:
                raise MemoryError()
            memset(p + self.n, 0xFF, (m - self.n) * sizeof(int64_t))
            self.v = p
            self.n = m
        self.v[qid] = value
        return 0

    cdef dict items(self):
        """{queue id: next offset} of every queue set."""
        cdef Py_ssize_t i
        out = {i: self.v[i] for i in range(self.n) if self.v[i] >= 0}
        if self.big is not None:
            out.update(self.big)
        return out


include "appender_tell.pxi"
include "appender_hints.pxi"


cdef class Appender:
    """Append records into the CommitLog's current file (see ``rmqcore._pure.appender.Appender``)."""

    cdef object _files  # the FileRoller: roll, prepare_next, prepare_at
    cdef object _rules  # the PutRules: topic_bytes, properties_bytes, host
    cdef object _mf
    cdef object _clock
    cdef dict _queues  # topic -> _Queues
    cdef dict _topics
    # the last topic put (an exact str, held) with its bytes and, once looked up, its queue table:
    # a run of puts to one topic skips both dict lookups
    cdef object _last_topic
    cdef bytes _last_tb
    cdef _Queues _last_qt
    cdef int64_t _pos
    cdef int64_t _prepare_at  # at this position in the bound file, the roller prepares the next one
    cdef Py_ssize_t _wp_off  # the bound file's wrote_position slot (its offset in the object), or -1
    cdef bytes _store_addr
    cdef int32_t _store_port
    cdef readonly int64_t file_size
    cdef readonly int64_t max_message_size
    cdef readonly int flavour
    cdef Py_buffer _view
    cdef bint _has_view
    cdef int64_t _from
    cdef bint _closed
    cdef pthread_mutex_t _mutex
    cdef bint _mutex_ok
    cdef readonly object live  # int64[1]: global offset after the last complete record, -1 when unbound
    cdef int64_t *_live
    cdef Py_buffer _gil_view  # held while _gil_req points into it
    cdef const int64_t *_gil_req
    cdef object _gil_obj  # the request array, for a put to hold while it waits on it
    cdef int64_t _gil_seen
    cdef _Tell _tell  # whom an append tells: the reput thread's wake slot, a publishing Dispatcher
    cdef readonly object hints  # int64[HINT_CAPACITY, HINT_FIELDS], read-only to Python
    cdef readonly object hint_head  # int64[1]: hints written
    cdef int64_t *_ring
    cdef int64_t *_hint_head
    cdef int64_t _nhints
    cdef int64_t _last_th  # _topic_hash of _last_topic

    def __cinit__(self):
        self._ring = NULL
        self._last_topic = _NO_TOPIC  # no argument is this object
        self._has_view = False
        self._gil_req = NULL
        self._tell = _Tell()
        if pthread_mutex_init(&self._mutex, NULL) != 0:
            raise MemoryError()
        self._mutex_ok = True

    def __init__(self, files, rules, file_size, store_addr, store_port, max_message_size, clock, flavour):
        self._files = files
        self._rules = rules
        self.file_size = file_size
        self._store_addr = bytes(store_addr)
        self._store_port = store_port
        self.max_message_size = max_message_size
        self._clock = clock
        self.flavour = flavour
        self._queues = {}
        self._topics = {}
        self._mf = None
        self._closed = False
        self.live = np.full(1, -1, dtype=np.int64)
        self._live = <int64_t *><size_t>self.live.ctypes.data
        self.live.flags.writeable = False
        self._gil_seen = 0
        self.hints = np.full((HINT_CAPACITY, HINT_FIELDS), -1, dtype=np.int64)
        self._ring = <int64_t *><size_t>self.hints.ctypes.data
        self.hints.flags.writeable = False
        self.hint_head = np.zeros(1, dtype=np.int64)
        self._hint_head = <int64_t *><size_t>self.hint_head.ctypes.data
        self.hint_head.flags.writeable = False
        self._nhints = 0

    def __dealloc__(self):
        if self._has_view:
            PyBuffer_Release(&self._view)
            self._has_view = False
        if self._mutex_ok:
            pthread_mutex_destroy(&self._mutex)
            self._mutex_ok = False
        if self._gil_req != NULL:
            self._gil_req = NULL
            PyBuffer_Release(&self._gil_view)

    # -- lock ---------------------------------------------------------------------------------------
    cdef inline void _acquire(self) noexcept:
        # Take the lock only while holding the GIL. A thread that took it in the nogil wait would
        # then hold it while queuing for the GIL, and every put of every other thread would queue
        # behind it: a lock convoy that cut 16 producer threads to 150k puts/s (2.5M with one).
        # So wait for the holder without the GIL, let go, and take the lock back with the GIL.
        while pthread_mutex_trylock(&self._mutex) != 0:
            with nogil:
                pthread_mutex_lock(&self._mutex)
                pthread_mutex_unlock(&self._mutex)

    cdef inline void _release(self) noexcept:
        pthread_mutex_unlock(&self._mutex)

    def acquire(self):
        self._acquire()

    # -- handing the GIL to the dispatch thread -----------------------------------------------------
    def set_gil_request(self, request):
        """See the pure twin (and why it is there)."""
        cdef Py_buffer view
        if request is not None:
            PyObject_GetBuffer(request, &view, PyBUF_WRITABLE | PyBUF_FORMAT)
            if view.len < 8 or view.itemsize != 8 or view.format == NULL or view.format[0] not in b"qlL" \
                    or (<size_t>view.buf) % 8 != 0:
                PyBuffer_Release(&view)
                raise ValueError("request must be an aligned, writable int64[1]")
        if self._gil_req != NULL:
            self._gil_req = NULL
            self._gil_obj = None
            PyBuffer_Release(&self._gil_view)
        if request is not None:
            self._gil_view = view
            self._gil_req = <const int64_t *>view.buf
            self._gil_obj = request

    def set_wake(self, wake, waits=None):
        """See the pure twin."""
        self._tell.set_wake(wake, waits)

    def set_publisher(self, dispatcher, fallback=None):
        """See the pure twin. ``dispatcher`` is a native ``Dispatcher`` (its ``publisher`` hook)."""
        self._tell.set_publisher(dispatcher, fallback)

    cdef inline void _yield_gil(self) noexcept:
        # the pointer and the array it points into are taken while the GIL is held: another thread
        # may withdraw the request (set_gil_request(None), a store's close) during the wait
        cdef int64_t r
        cdef const int64_t *req = self._gil_req
        cdef object keep
        if req == NULL:
            return
        r = rmq_observe_i64(req)
        if r != 0 and r != self._gil_seen:
            self._gil_seen = r
            keep = self._gil_obj
            with nogil:
                rmq_wait_while(req, r, GIL_YIELD_MAX_NS)

    def release(self):
        self._release()

    # -- state --------------------------------------------------------------------------------------
    cdef int _bind(self, object mf) except -1:
        if self._ring != NULL:  # the position may move back (set_end): no hint may outlive it
            rmq_hints_invalidate(self._ring)
        if self._has_view:
            PyBuffer_Release(&self._view)
            self._has_view = False
        self._mf = mf
        self._wp_off = -1
        self._prepare_at = INT64_MAX
        if mf is not None:
            self._prepare_at = self._files.prepare_at
            PyObject_GetBuffer(mf.mm, &self._view, PyBUF_WRITABLE)
            self._has_view = True
            if self._view.len < self.file_size:
                PyBuffer_Release(&self._view)
                self._has_view = False
                self._mf = None
                raise ValueError("mapped file is smaller than the file size")
            self._from = mf.file_from_offset
            self._pos = mf.wrote_position
            self._wp_off = rmq_member_offset(type(mf).__dict__.get("wrote_position"), type(mf))
            rmq_publish_i64(self._live, self._from + self._pos)
        elif self._live != NULL:
            rmq_publish_i64(self._live, -1)
        return 0

    cdef inline int _set_wrote(self, object mf, int64_t v) except -1:
        """``mf.wrote_position = v``; for the bound file, straight into its slot (a put does
        this once; the generic attribute path cost about as much as the rest of the bookkeeping)."""
        cdef object o
        if self._wp_off >= 0 and mf is self._mf:
            o = v  # an int object (typed: inferred, it would stay a C int64)
            rmq_slot_replace(<PyObject *>mf, self._wp_off, <PyObject *>o)
        else:
            mf.wrote_position = v
        return 0

    def set_file(self, mf):
        """Write into MappedFile ``mf`` from its ``wrote_position`` on (None releases the current one)."""
        self._bind(mf)

    def close(self):
        self._acquire()
        try:
            self._bind(None)
            self._closed = True
        finally:
            self._release()

    cdef _Queues _table(self, object topic):
        if topic is self._last_topic and self._last_qt is not None:
            return self._last_qt
        t = self._queues.get(topic)
        if t is None:
            t = _Queues()
            self._queues[topic] = t
        if topic is self._last_topic:
            self._last_qt = <_Queues>t
        return <_Queues>t

    def get_queue_offset(self, topic, queue_id):
        t = self._queues.get(topic)
        return 0 if t is None else (<_Queues>t).get(queue_id)

    def set_queue_offset(self, topic, queue_id, value):
        if not 0 <= queue_id <= 0x7FFFFFFF or value < 0:
            raise ValueError("queue ids and offsets are non-negative")
        self._table(topic).put(queue_id, value)

    def queue_offsets(self):
        cdef _Queues t
        cdef Py_ssize_t i
        out = {}
        for topic, t in self._queues.items():
            for i, v in t.items().items():
                out[(topic, i)] = v
        return out

    def clear_queue_offsets(self):
        self._queues.clear()
        self._last_qt = None

    cdef object _file(self):
        if self._closed:
            raise StoreClosedError("the CommitLog is closed")
        mf = self._mf
        if mf is None or self._pos >= self.file_size:
            mf = self._files.roll(mf)
            self._bind(mf)
        if self._pos >= self._prepare_at:  # once per file, before anything is written
            self._prepare_at = INT64_MAX
            self._files.prepare_next()
        return mf

    cdef inline int _still_bound(self, object mf) except -1:
        """``mf`` is still the bound file, its map exported: Python code the append ran (the
        clock, the roller) may have unbound it (``set_file``), and its map may be closed since."""
        if not self._has_view or mf is not self._mf:
            raise StoreClosedError("the CommitLog's file was unbound during the append")
        return 0

    cdef object _roll_over(self, object mf):
        """End the bound file ``mf`` with a BLANK at the write position; the file to write into next."""
        self._still_bound(mf)
        rmq_encode_blank(<unsigned char *>self._view.buf + self._pos, <int32_t>(self.file_size - self._pos))
        self._pos = self.file_size
        self._set_wrote(mf, self.file_size)
        return self._file()

    # -- appending ----------------------------------------------------------------------------------
    def put(self, topic, body, queue_id=0, *, tags=None, keys=None, properties=None, properties_raw=None,
            flag=0, sys_flag=0, born_timestamp=None, born_host=None, reconsume_times=0,
            prepared_transaction_offset=0, store_host=None):
        cdef rmq_msg m
        cdef Py_buffer bview
        cdef bint has_bview = False
        cdef unsigned char pstack[PROPS_STACK]
        cdef object pb = None
        cdef object tb
        cdef int64_t x, qoff, size, pos, ts
        cdef Py_ssize_t tl = 0, kl = 0
        cdef const char *tp = NULL
        cdef const char *kp = NULL
        cdef bint no_queue
        cdef object ba, sa
        cdef _Queues qt
        cdef AppendResult r
        cdef int64_t th = -1, h_tags = 0, h_key = 0, h_nk = 0
        cdef int key_scan = 0  # rmq_keys_scan of keys: 2 when it holds a ' '
        cdef bint fast = False, hint
        cdef int64_t pub = 1

        # topic (validated once per distinct topic by the rules)
        if topic is self._last_topic:
            tb = self._last_tb
            th = self._last_th
        else:
            tb = self._topics.get(topic) if PyUnicode_CheckExact(topic) else None
            if tb is None:
                tb = self._rules.topic_bytes(topic)
                self._topics[topic] = tb
            th = _topic_hash(topic, tb)
            if PyUnicode_CheckExact(topic):
                self._last_topic, self._last_tb, self._last_qt, self._last_th = topic, tb, None, th
        m.topic = <const unsigned char *>PyBytes_AS_STRING(tb)
        m.topic_len = PyBytes_GET_SIZE(tb)
        m.v2 = PyUnicode_GET_LENGTH(topic) > 127

        # properties: tags/keys as ASCII str are built here; anything else by the rules
        m.props = NULL
        m.props_len = 0
        if (properties is None and properties_raw is None
                and (tags is None or (PyUnicode_CheckExact(tags) and PyUnicode_IS_ASCII(tags)))
                and (keys is None or (PyUnicode_CheckExact(keys) and PyUnicode_IS_ASCII(keys)))):
            fast = True
            key_scan = _tags_keys_props(tags, keys, self.flavour, pstack, &m, &tp, &tl, &kp, &kl)
        if m.props == NULL:
            pb = self._rules.properties_bytes(tags, keys, properties, properties_raw)
        if pb is not None:
            m.props = <const unsigned char *>PyBytes_AS_STRING(pb)
            m.props_len = PyBytes_GET_SIZE(pb)
            if m.props_len > MAX_PROPS:
                raise InvalidMessageError("properties too long")

        # scalar fields
        if not PyLong_CheckExact(queue_id):  # as the twin: an int, not a bool (nor another subclass)
            raise InvalidMessageError(f"queue_id must be a non-negative int, not {queue_id!r}")
        _int_field(queue_id, "queue_id", 0, I32_MAX, &x)
        m.queue_id = <int32_t>x
        _i32_field(flag, "flag", &m.flag)
        _i32_field(sys_flag, "sys_flag", &m.sys_flag)
        _i32_field(reconsume_times, "reconsume_times", &m.reconsume_times)
        if prepared_transaction_offset is 0:
            m.prepared_tx_offset = 0
        else:
            _int_field(prepared_transaction_offset, "prepared_transaction_offset", -(2**63), 2**63 - 1, &x)
            m.prepared_tx_offset = x
        if born_timestamp is not None:
            _int_field(born_timestamp, "born_timestamp", -(2**63), 2**63 - 1, &x)
            m.born_timestamp = x

        # hosts
        if store_host is None:
            sa = self._store_addr
            m.store_port = self._store_port
        else:
            sa, x = self._rules.host(store_host)
            m.store_port = <int32_t>x
        if born_host is None:
            ba = sa
            m.born_port = m.store_port
        else:
            ba, x = self._rules.host(born_host)
            m.born_port = <int32_t>x
        m.store_addr = <const unsigned char *>PyBytes_AS_STRING(sa)
        m.store_addr_len = <int32_t>PyBytes_GET_SIZE(sa)
        m.born_addr = <const unsigned char *>PyBytes_AS_STRING(ba)
        m.born_addr_len = <int32_t>PyBytes_GET_SIZE(ba)
        m.sys_flag &= ~0x30
        if m.born_addr_len == 16:
            m.sys_flag |= 0x10
        if m.store_addr_len == 16:
            m.sys_flag |= 0x20
        no_queue = (m.sys_flag & 0xC) == 0x4 or (m.sys_flag & 0xC) == 0xC
        # a dispatch hint: a NOT_TYPE record whose only properties are TAGS and one KEYS token
        hint = fast and th >= 0 and (m.sys_flag & 0xC) == 0 and key_scan == 0
        if hint:
            if tp != NULL and tl > 0:
                h_tags = rmq_hash_as_int32(rmq_jhash_ascii(0, <const unsigned char *>tp, <size_t>tl))
            if kp != NULL and kl > 0:
                h_key = rmq_index_key_hash(rmq_hash_as_int32(
                    rmq_jhash_ascii(<uint32_t>th, <const unsigned char *>kp, <size_t>kl)))
                h_nk = 1

        # body
        if PyBytes_CheckExact(body):
            m.body = <const unsigned char *>PyBytes_AS_STRING(body)
            m.body_len = PyBytes_GET_SIZE(body)
        elif isinstance(body, (bytearray, memoryview)):
            if isinstance(body, memoryview) and not body.c_contiguous:
                body = body.tobytes()  # a strided view: its bytes, copied (the twin does the same)
            PyObject_GetBuffer(body, &bview, PyBUF_SIMPLE)
            has_bview = True
            m.body = <const unsigned char *>bview.buf
            m.body_len = bview.len
        else:
            raise InvalidMessageError(f"body must be bytes-like, not {type(body).__name__}")
        try:
            if m.body_len > self.max_message_size:
                raise MessageTooLargeError(
                    f"body of {m.body_len} bytes exceeds the maximum message size {self.max_message_size}"
                )
            size = rmq_record_size(m.body_len, m.topic_len, m.props_len, m.sys_flag, m.v2)
            if size + BLANK_SIZE > self.file_size:
                raise MessageTooLargeError(f"a record of {size} bytes does not fit in a {self.file_size}-byte file")
            crc = rmq_body_crc(m.body, <size_t>m.body_len)
            self._yield_gil()
            self._acquire()
            try:
                mf = self._file()
                ts = _wall_ms() if self._clock is None else <int64_t>self._clock()
                m.store_timestamp = ts
                if born_timestamp is None:
                    m.born_timestamp = ts
                if no_queue:
                    qt = None
                    qoff = 0
                else:
                    qt = self._table(topic)
                    qoff = qt.get(m.queue_id)
                m.queue_offset = qoff
                pos = self._pos
                if size + BLANK_SIZE > self.file_size - pos:
                    mf = self._roll_over(mf)
                    pos = self._pos
                    if size + BLANK_SIZE > self.file_size - pos:
                        raise MessageTooLargeError(f"a record of {size} bytes does not fit after a roll")
                self._still_bound(mf)
                m.physical_offset = self._from + pos
                rmq_encode_record(<unsigned char *>self._view.buf + pos, &m, size, crc)
                self._pos = pos + size
                self._set_wrote(mf, self._pos)
                self._still_bound(mf)  # (a wrote_position setter is Python code too)
                if hint:  # after the record, before its end is published (rmq_hints.h)
                    rmq_hint_put(self._ring, self._nhints, self._from + pos, size, h_nk, m.topic_len, m.queue_id,
                                 size - 2 - m.props_len - m.topic_len, qoff, ts, h_tags, h_key)
                    self._nhints += 1
                    rmq_publish_i64(self._hint_head, self._nhints)
                rmq_publish_i64(self._live, self._from + self._pos)
                if qt is not None:
                    qt.put(m.queue_id, qoff + 1)
                pub = self._tell.appended(<const unsigned char *>self._view.buf, self._view.len, self._from,
                                          pos, self._pos)
            finally:
                self._release()
            self._tell.declined(pub)
            r = AppendResult.__new__(AppendResult)
            r.physical_offset = m.physical_offset
            r.size = size
            r.queue_offset = qoff
            r.store_timestamp = ts
            r._addr = sa
            r._port = m.store_port
            return r
        finally:
            if has_bview:
                PyBuffer_Release(&bview)

    def put_batch(self, topic_bytes, topic, queue_id, bodies, properties, flags, sys_flag, born_timestamp,
                  born_addr, born_port, store_addr, store_port):
        """Append an already validated batch (the CommitLog validates; this checks each body's
        length against ``max_message_size``, then places and writes it)."""
        cdef Py_ssize_t n = len(bodies), i, ln, longest = 0
        cdef _Queues qt
        cdef int64_t pub = 1, nh
        for i in range(n):
            b = bodies[i]
            ln = PyBytes_GET_SIZE(b) if PyBytes_CheckExact(b) else len(b)
            if ln > longest:
                longest = ln
        if longest > self.max_message_size:
            raise MessageTooLargeError(
                f"a body of {longest} bytes exceeds the maximum message size {self.max_message_size}")
        sizes = np.empty(n, dtype=np.int64)
        v2 = len(topic) > 127
        self._yield_gil()
        self._acquire()
        try:
            mf = self._file()
            ts = _wall_ms() if self._clock is None else <int64_t>self._clock()
            qt = self._table(topic)
            qoff = qt.get(queue_id)
            bts = ts if born_timestamp is None else born_timestamp
            while True:
                self._still_bound(mf)
                pos = self._pos
                cnt, total = _codec.encode_batch(
                    mf.mm, pos, self.file_size - pos, topic_bytes, queue_id, qoff, self._from + pos,
                    sys_flag, bts, born_addr, born_port, ts, store_addr, store_port, bodies, properties,
                    flags, v2, sizes,
                )
                if total > 0:
                    break
                if pos == 0 or -total + BLANK_SIZE > self.file_size:
                    raise MessageTooLargeError(
                        f"a batch of {-total} bytes does not fit in a {self.file_size}-byte file"
                    )
                mf = self._roll_over(mf)
            self._pos = pos + total
            self._set_wrote(mf, self._pos)
            self._still_bound(mf)  # before the bound map is read (encode_batch wrote through its own export)
            nh = _batch_hints(self._ring, self._nhints, <const unsigned char *>self._view.buf, pos,
                              self._from, topic, topic_bytes, properties, sys_flag, queue_id, qoff, ts, sizes,
                              cnt)
            if nh != self._nhints:  # after the records, before their end is published (rmq_hints.h)
                self._nhints = nh
                rmq_publish_i64(self._hint_head, nh)
            rmq_publish_i64(self._live, self._from + self._pos)
            qt.put(queue_id, qoff + cnt)
            pub = self._tell.appended(<const unsigned char *>self._view.buf, self._view.len, self._from, pos,
                                      self._pos)
            r = BatchAppendResult(self._from + pos, total, qoff, ts, cnt, sizes, store_addr, store_port)
        finally:
            self._release()
        self._tell.declined(pub)
        return r
from .._pure.appender import BatchAppendResult  # one Python class serves both twins


include "appender_pages.pxi"
