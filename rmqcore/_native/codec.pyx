# cython: language_level=3
"""CommitLog record codec, native twin of ``rmqcore._pure.codec``.

Functions over buffers only: no files. Positions are buffer offsets. Expected conditions (end of
data, BLANK filler) are return values; invalid bytes are statuses in the scanners and
``CorruptionError`` subclasses (position = buffer offset of the record) in ``decode_record``.
``MessageExt`` is a decoded record (``rmqcore.message.MessageExt`` is the chosen twin's class).
Both twins have the same names, signatures, results and exceptions; one test suite runs both.

The byte work is in ``csrc/rmq_codec.c`` (plain C, no GIL needed); this module converts arguments,
checks ranges once at entry and maps statuses to exceptions.

Buffers. ``scan_records`` and ``decode_batch`` take typed memoryviews (acquired once per call).
The per-record functions take the raw buffer protocol instead (``bytes`` directly, anything else
through ``PyObject_GetBuffer``): a typed memoryview costs far more to acquire than
``PyObject_GetBuffer``, and ``encode_record`` has six buffer arguments on the append hot path. Both
accept ``bytes``, ``bytearray``, ``memoryview`` and (read-only) ``mmap``.
Every buffer stays exported until the call returns, so nothing can resize or unmap it meanwhile.

One extension module, read in four files (msgpack's ``include`` pattern, so the hot per-record calls
stay inline): this one (C declarations, import checks, argument helpers), ``codec_encode.pxi``
(records, batches, BLANK), ``codec_scan.pxi`` (peek, check, scan, columnar decode) and
``codec_message.pxi`` (MessageExt and the decoders that build it).
"""
import struct as _struct

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_CheckBuffer
from cpython.bytearray cimport PyByteArray_Check
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_CheckExact, PyBytes_FromStringAndSize
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.exc cimport PyErr_Clear
from cpython.list cimport PyList_AsTuple, PyList_CheckExact
from cpython.long cimport PyLong_Check, PyLong_CheckExact
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, int32_t, int64_t, uint32_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

from ..errors import InvalidMessageError, PropertiesTooLargeError
from ..layout import (
    BLANK_SIZE,
    FLAG_BORNHOST_V6,
    FLAG_STOREHOST_V6,
    KEY_SEPARATOR,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_LEN,
    NCOLUMNS,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    ST_BAD_CRC,
    ST_BAD_MAGIC,
    ST_BAD_SIZE,
    ST_BLANK,
    ST_END,
    ST_MSG,
    ST_TORN,
    STATUS_ERRORS,
    TRANSACTION_MASK,
)
from ..layout import record_size as _record_size_any
from ..wire import Host, create_message_id, dispatch_tags_code, parse_properties
from . import hashing as _hashing

# the surface is the reference twin's (tests/test_kernels.py checks that this one has all of it)
from rmqcore._pure.codec import __all__


cdef extern from "Python.h":
    # noexcept: -1 with an exception set; the callers decide whether to clear it or fall back
    int _try_get_buffer "PyObject_GetBuffer"(object obj, Py_buffer *view, int flags) noexcept
    int _get_buffer "PyObject_GetBuffer"(object obj, Py_buffer *view, int flags) except -1
    long long PyLong_AsLongLongAndOverflow(object obj, int *overflow) except? -1
    bint PyUnicode_CheckExact(object o)
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    object PyUnicode_AsEncodedString(object s, const char *encoding, const char *errors)


# the C kernels must agree with layout.py (checked once at import; a mismatch is a build bug)
if ((RMQ_ST_MSG, RMQ_ST_END, RMQ_ST_BLANK, RMQ_ST_TORN, RMQ_ST_BAD_MAGIC, RMQ_ST_BAD_SIZE, RMQ_ST_BAD_CRC,
     RMQ_NCOLUMNS, RMQ_BLANK_SIZE, RMQ_MAX_PROPERTIES_LEN, RMQ_FLAG_BORNHOST_V6, RMQ_FLAG_STOREHOST_V6)
        != (ST_MSG, ST_END, ST_BLANK, ST_TORN, ST_BAD_MAGIC, ST_BAD_SIZE, ST_BAD_CRC,
            NCOLUMNS, BLANK_SIZE, MAX_PROPERTIES_LEN, FLAG_BORNHOST_V6, FLAG_STOREHOST_V6)):
    raise ImportError("csrc/rmq_codec.h disagrees with rmqcore/layout.py")

cdef enum:
    NOGIL_MIN = 4096  # bodies (and batches) at least this long are CRC'd / copied without the GIL
    V6_BITS = 0x30  # FLAG_BORNHOST_V6 | FLAG_STOREHOST_V6


# --------------------------------------------------------------------------------------------------
# argument helpers
# --------------------------------------------------------------------------------------------------

cdef struct _In:
    const unsigned char *ptr
    Py_ssize_t len
    bint held
    Py_buffer view


cdef struct _Out:
    unsigned char *ptr
    Py_ssize_t len
    bint held
    bint writable
    Py_buffer view


cdef inline void _in_bytes(_In *v, object o) noexcept:
    """Point ``v`` at the bytes object ``o`` (which holds no buffer export)."""
    v.ptr = <const unsigned char *>PyBytes_AS_STRING(o)
    v.len = PyBytes_GET_SIZE(o)


cdef inline void _in_held(_In *v) noexcept:
    """Point ``v`` at the buffer just exported into ``v.view``, released by _in_release."""
    v.held = True
    v.ptr = <const unsigned char *>v.view.buf
    v.len = v.view.len


cdef inline object _in_get(_In *v, object o):
    """Point ``v`` at the bytes of ``o`` as ``bytes(o)`` would see them; returns the owner to keep
    alive (``o``, or a bytes copy for objects that are not contiguous buffers: TypeError as bytes())."""
    if PyBytes_CheckExact(o):
        _in_bytes(v, o)
        return o
    return _in_get_buffer(v, o)


cdef object _in_get_buffer(_In *v, object o):
    # v must not hold a buffer yet (re-pointing an _In is only ever done with bytes, which hold none)
    if _try_get_buffer(o, &v.view, PyBUF_SIMPLE) == 0:
        _in_held(v)
        return o
    PyErr_Clear()
    o = bytes(o)
    _in_bytes(v, o)
    return o


cdef inline int _in_buf(_In *v, object o) except -1:
    """A readable buffer (bytes, bytearray, memoryview, mmap ...); the buffer protocol's error otherwise."""
    if PyBytes_CheckExact(o):
        _in_bytes(v, o)
        return 0
    _get_buffer(o, &v.view, PyBUF_SIMPLE)
    _in_held(v)
    return 0


cdef inline void _release(bint *held, Py_buffer *view) noexcept:
    """Release an export taken into ``view`` (once: ``held`` is cleared)."""
    if held[0]:
        held[0] = False
        PyBuffer_Release(view)


cdef inline void _in_release(_In *v) noexcept:
    _release(&v.held, &v.view)


cdef int _out_get(_Out *v, object o) except -1:
    """A writable buffer; a read-only one is accepted too (its length serves the range checks) and
    the write then raises TypeError, as the pure twin's slice assignment does."""
    if _try_get_buffer(o, &v.view, PyBUF_WRITABLE) == 0:
        v.writable = True
    else:
        PyErr_Clear()
        _get_buffer(o, &v.view, PyBUF_SIMPLE)
        v.writable = False
    v.held = True
    v.ptr = <unsigned char *>v.view.buf
    v.len = v.view.len
    return 0


cdef inline void _out_release(_Out *v) noexcept:
    _release(&v.held, &v.view)


cdef int _need_writable(_Out *v, object o) except -1:
    if not v.writable:
        raise TypeError(f"{type(o).__name__!r} object is a read-only buffer")
    return 0


cdef inline int _idx64(object o, int64_t *out) except -2:
    """``o.__index__()`` into ``out``: 0, or +1/-1 when it does not fit in an int64 (``out`` is then
    saturated). TypeError for objects that are not integers."""
    cdef int ovf = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(o, &ovf)
    if ovf > 0:
        out[0] = INT64_MAX
    elif ovf < 0:
        out[0] = INT64_MIN
    else:
        out[0] = v
    return ovf


cdef int _c_slow(object o, int64_t *out, int64_t lo, int64_t hi) except -1:
    """``o.__index__()`` in [lo, hi]: TypeError for non-integers (floats included, as struct.pack),
    OverflowError when out of range."""
    if _idx64(o, out) or out[0] < lo or out[0] > hi:
        raise OverflowError(f"{o} is out of range")
    return 0


cdef inline int _c32(object o, int32_t *out) except -1:
    """A Java int: Cython's inline conversion for exact ints, __index__ otherwise."""
    cdef int64_t v
    if PyLong_CheckExact(o):
        out[0] = o
    else:
        _c_slow(o, &v, INT32_MIN, INT32_MAX)
        out[0] = <int32_t>v
    return 0


cdef inline int _c64(object o, int64_t *out) except -1:
    """A Java long, as _c32."""
    if PyLong_CheckExact(o):
        out[0] = o
    else:
        _c_slow(o, out, INT64_MIN, INT64_MAX)
    return 0


cdef int _f64(object o, int64_t *out, str name) except -1:
    """A Java long field: InvalidMessageError when ``o`` is no integer or out of range (the pure
    twin's struct.error)."""
    cdef int ovf
    if PyLong_CheckExact(o):
        ovf = _idx64(o, out)
    else:
        try:
            ovf = _idx64(o, out)
        except TypeError:
            raise InvalidMessageError(f"{name} must be an integer, not {type(o).__name__}") from None
    if ovf:
        raise InvalidMessageError(f"{name} {o} does not fit a signed 64-bit long")
    return 0


cdef int _f32(object o, int32_t *out, str name) except -1:
    """A Java int field, as _f64."""
    cdef int64_t v
    cdef int ovf
    if PyLong_CheckExact(o):
        ovf = _idx64(o, &v)
    else:
        try:
            ovf = _idx64(o, &v)
        except TypeError:
            raise InvalidMessageError(f"{name} must be an integer, not {type(o).__name__}") from None
    if ovf or v < INT32_MIN or v > INT32_MAX:
        raise InvalidMessageError(f"{name} {o} does not fit a signed 32-bit int")
    out[0] = <int32_t>v
    return 0


cdef int _sys_flag_in(object sys_flag, int64_t *out) except -2:
    """``sys_flag & ~V6`` as the pure twin computes it (TypeError for non-integers): returns the
    int64 overflow flag; a value that is out of range fails later, when fields are packed."""
    if not PyLong_Check(sys_flag):
        sys_flag = sys_flag & ~V6_BITS
    cdef int ovf = _idx64(sys_flag, out)
    out[0] &= ~V6_BITS
    return ovf


cdef int64_t _host_flags(int64_t sys_flag, Py_ssize_t born_len, Py_ssize_t store_len) except? -1:
    if born_len == 16:
        sys_flag |= RMQ_FLAG_BORNHOST_V6
    elif born_len != 4:
        raise InvalidMessageError(f"born host address must be 4 or 16 bytes, not {born_len}")
    if store_len == 16:
        sys_flag |= RMQ_FLAG_STOREHOST_V6
    elif store_len != 4:
        raise InvalidMessageError(f"store host address must be 4 or 16 bytes, not {store_len}")
    return sys_flag


cdef int _encode_range(Py_ssize_t n, object pos, object avail, int64_t *p, int64_t *a) except -1:
    """``pos < 0 or avail < 0 or pos + avail > len(buf)`` -> ValueError (int64 overflow counts as out
    of range); evaluated in the pure twin's order so that TypeErrors agree as well."""
    if _idx64(pos, p) or p[0] < 0 or _idx64(avail, a) or a[0] < 0 or a[0] > n - p[0]:
        raise ValueError("encode range outside the buffer")
    return 0


cdef int _check_range(Py_ssize_t n, object pos, object limit, int64_t *p, int64_t *l) except -1:
    """The pure twin's _check_range: ``pos < 0 or limit < pos or limit > len(buf)`` -> ValueError."""
    if _idx64(pos, p) or p[0] < 0 or _idx64(limit, l) or l[0] < p[0] or l[0] > n:
        raise ValueError(f"range [{pos}, {limit}) outside a buffer of {n} bytes")
    return 0


cdef inline bint _overlaps(const unsigned char *a, Py_ssize_t alen, const unsigned char *b, Py_ssize_t blen) noexcept:
    return alen > 0 and blen > 0 and a < b + blen and b < a + alen



include "codec_encode.pxi"
include "codec_scan.pxi"
include "codec_message.pxi"
