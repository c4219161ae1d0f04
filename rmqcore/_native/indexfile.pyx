# cython: language_level=3
"""RocketMQ IndexFile kernels over a buffer: native twin of :mod:`rmqcore._pure.indexfile`.

See the pure module for the layout and the contract (same names, signatures, results, exceptions).
The mapped buffer is acquired with ``PyObject_GetBuffer`` (a typed memoryview costs far more per
acquisition, and ``index_select`` runs once per file per query), the geometry and the header's
indexCount are proven once (``rmq_index_check``), then ``csrc/rmq_index.c`` walks raw pointers with
the GIL released. The buffer stays exported for the whole call, so a concurrent ``mmap.close()``
raises ``BufferError`` instead of unmapping under the walk.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint32_t, uint64_t
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

import struct as _struct
import sys as _sys
from array import array as _array

from rmqcore.errors import ConfigError, IndexCorruptError

# the surface is the reference twin's (tests/test_kernels.py checks that this one has all of it)
from rmqcore._pure.indexfile import __all__

cdef extern from "Python.h":
    int _get_buffer "PyObject_GetBuffer"(object obj, Py_buffer *view, int flags) except -1

cdef extern from *:
    """
    #include <string.h>
    static inline int64_t rmq_index_load_host64(const void *base, long long i) {
        int64_t v;
        memcpy(&v, (const char *)base + i * 8, 8);
        return v;
    }
    """
    int64_t _load64 "rmq_index_load_host64"(const void *base, long long i) nogil

HEADER_SIZE = RMQ_INDEX_HEADER_SIZE
SLOT_SIZE = RMQ_INDEX_SLOT_SIZE
ENTRY_SIZE = RMQ_INDEX_ENTRY_SIZE

_NATIVE_ORDER = "<" if _sys.byteorder == "little" else ">"
_INT64_FORMATS = frozenset(
    {"q", "@q", "=q", _NATIVE_ORDER + "q"} | ({"l", "@l"} if _struct.calcsize("l") == 8 else set())
)

cdef enum:
    WALK_CHUNK = 64  # offsets collected per nogil stretch of a walk


cdef int _geometry(long long s, long long n) except -1:
    if s < 1 or s > INT32_MAX:
        raise ConfigError(f"slot_count must be in [1, {INT32_MAX}], not {s}")
    if n < 1 or n > INT32_MAX:
        raise ConfigError(f"max_entries must be in [1, {INT32_MAX}], not {n}")
    return 0


cdef int _key_hash(long long h) except -1:
    if h < 0 or h > INT32_MAX:
        raise ValueError(f"key_hash must be in [0, {INT32_MAX}], not {h}")
    return 0


cdef int _check(Py_buffer *view, long long s, long long n) except -1:
    cdef const unsigned char *p = <const unsigned char *>view.buf
    cdef int st = rmq_index_check(p, <size_t>view.len, <uint32_t>s, <uint32_t>n)
    if st == RMQ_INDEX_OK:
        return 0
    if st == RMQ_INDEX_E_SHORT:
        need = HEADER_SIZE + SLOT_SIZE * s + ENTRY_SIZE * n
        raise IndexCorruptError(
            f"index buffer of {view.len} bytes is shorter than the {need} bytes of {s} slots "
            f"and {n} entries",
            view.len,
        )
    cdef rmq_index_header h
    rmq_index_read_header(p, &h)
    raise IndexCorruptError(f"index header says indexCount {h.index_count} > max entries {n}", 36)


cdef int _writable(object buf, Py_buffer *view) except -1:
    _get_buffer(buf, view, PyBUF_SIMPLE)
    if view.readonly:
        PyBuffer_Release(view)
        raise TypeError("index buffer is read-only")
    return 0


def index_file_size(long long slot_count, long long max_entries):
    """Bytes of an index file: ``40 + 4 * slot_count + 20 * max_entries``.

    Raises:
        ConfigError: slot_count or max_entries outside ``[1, 2**31 - 1]``.
    """
    _geometry(slot_count, max_entries)
    return rmq_index_file_size(<uint32_t>slot_count, <uint32_t>max_entries)


def index_header(object buf):
    """The raw header: ``(beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount,
    indexCount)`` exactly as stored (indexCount is not clamped).

    The contract (results, exceptions) is ``rmqcore._pure.indexfile.index_header``'s.
    """
    cdef Py_buffer view
    cdef rmq_index_header h
    _get_buffer(buf, &view, PyBUF_SIMPLE)
    try:
        if view.len < RMQ_INDEX_HEADER_SIZE:
            raise IndexCorruptError(
                f"index buffer of {view.len} bytes is shorter than the {HEADER_SIZE}-byte header", view.len
            )
        rmq_index_read_header(<const unsigned char *>view.buf, &h)
    finally:
        PyBuffer_Release(&view)
    return (h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset, h.hash_slot_count,
            h.index_count)


def index_put(object buf, long long slot_count, long long max_entries, long long key_hash,
              long long phy_offset, long long store_timestamp):
    """RocketMQ ``IndexFile.putKey``: add one entry, updating slot and header in ``buf``.

    The contract (results, exceptions) is ``rmqcore._pure.indexfile.index_put``'s.
    """
    cdef Py_buffer view
    cdef int r
    _writable(buf, &view)
    try:
        _geometry(slot_count, max_entries)
        _key_hash(key_hash)
        _check(&view, slot_count, max_entries)
        r = rmq_index_put(<unsigned char *>view.buf, <uint32_t>slot_count, <uint32_t>max_entries,
                          <int32_t>key_hash, phy_offset, store_timestamp)
    finally:
        PyBuffer_Release(&view)
    return r != 0


def _int64_array(obj, what):
    try:
        mv = memoryview(obj)
    except TypeError:
        return memoryview(_array("q", obj))
    if mv.ndim != 1 or mv.itemsize != 8 or mv.format not in _INT64_FORMATS or not mv.c_contiguous:
        fmt = mv.format
        mv.release()
        raise TypeError(f"{what} must be a 1-D contiguous int64 array, not format {fmt!r}")
    return mv


def index_put_batch(object buf, long long slot_count, long long max_entries, object key_hashes,
                    object phy_offsets, object store_timestamps, long long start, long long stop):
    """``index_put`` for items ``[start, stop)`` of three parallel int64 arrays, in order, without the GIL.

    The contract (results, exceptions) is ``rmqcore._pure.indexfile.index_put_batch``'s.
    """
    cdef Py_buffer view, vk, vp, vt
    cdef bint hk = False, hp = False, ht = False
    cdef size_t i, n, done, bad = <size_t>-1
    cdef int64_t h
    _writable(buf, &view)
    try:
        _geometry(slot_count, max_entries)
        kh = _int64_array(key_hashes, "key_hashes")
        po = _int64_array(phy_offsets, "phy_offsets")
        st = _int64_array(store_timestamps, "store_timestamps")
        if start < 0 or stop < start or stop > len(kh) or stop > len(po) or stop > len(st):
            raise ValueError(
                f"[{start}, {stop}) is not inside arrays of lengths {len(kh)}, {len(po)}, {len(st)}"
            )
        _get_buffer(kh, &vk, PyBUF_SIMPLE)
        hk = True
        _get_buffer(po, &vp, PyBUF_SIMPLE)
        hp = True
        _get_buffer(st, &vt, PyBUF_SIMPLE)
        ht = True
        n = <size_t>(stop - start)
        with nogil:
            for i in range(n):
                h = _load64(vk.buf, start + <long long>i)
                if h < 0 or h > INT32_MAX:
                    bad = i
                    break
        if bad != <size_t>-1:
            _key_hash(_load64(vk.buf, start + <long long>bad))
        _check(&view, slot_count, max_entries)
        with nogil:
            done = rmq_index_put_batch(
                <unsigned char *>view.buf, <uint32_t>slot_count, <uint32_t>max_entries,
                (<const char *>vk.buf) + start * 8, (<const char *>vp.buf) + start * 8,
                (<const char *>vt.buf) + start * 8, n,
            )
        return done
    finally:
        if ht:
            PyBuffer_Release(&vt)
        if hp:
            PyBuffer_Release(&vp)
        if hk:
            PyBuffer_Release(&vk)
        PyBuffer_Release(&view)


def index_select(object buf, long long slot_count, long long max_entries, long long key_hash,
                 long long begin, long long end, long long max_num, long long max_steps):
    """RocketMQ ``IndexFile.selectPhyOffset``: physical offsets of entries with ``key_hash`` whose time
    ``beginTimestamp + timeDiff * 1000`` is in ``[begin, end]``, newest first, at most ``max_num``
    (``<= 0``: none), reading at most ``max_steps`` entries of the chain (walked without the GIL).

    The contract (results, exceptions) is ``rmqcore._pure.indexfile.index_select``'s.
    """
    cdef Py_buffer view
    cdef rmq_index_walk w
    cdef int64_t chunk[WALK_CHUNK]
    cdef size_t i, n
    cdef const unsigned char *p
    cdef list out = []
    _get_buffer(buf, &view, PyBUF_SIMPLE)
    try:
        _geometry(slot_count, max_entries)
        _key_hash(key_hash)
        if max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, not {max_steps}")
        _check(&view, slot_count, max_entries)
        p = <const unsigned char *>view.buf
        rmq_index_walk_start(p, <uint32_t>slot_count, <int32_t>key_hash,
                             <uint64_t>max_num if max_num > 0 else 0, <uint64_t>max_steps, &w)
        while w.next != 0:
            with nogil:
                n = rmq_index_walk_run(p, <uint32_t>slot_count, <uint32_t>max_entries, <int32_t>key_hash,
                                       begin, end, &w, chunk, WALK_CHUNK)
            for i in range(n):
                out.append(chunk[i])
    finally:
        PyBuffer_Release(&view)
    return out
