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
``PyObject_GetBuffer``, and ``encode_record`` has six buffer arguments on the append hot path. Both accept ``bytes``, ``bytearray``, ``memoryview`` and (read-only) ``mmap``.
Every buffer stays exported until the call returns, so nothing can resize or unmap it meanwhile.
"""
import struct as _struct

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_CheckBuffer
from cpython.bytearray cimport PyByteArray_Check
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_CheckExact, PyBytes_FromStringAndSize
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.exc cimport PyErr_Clear
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM
from cpython.long cimport PyLong_Check, PyLong_CheckExact
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM
from libc.stdint cimport INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, int32_t, int64_t, uint32_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

from ..errors import (
    BadMagicError,
    ChecksumError,
    InvalidMessageError,
    PropertiesTooLargeError,
    RecordSizeError,
    TruncatedRecordError,
)
from ..layout import (
    BLANK_SIZE,
    FLAG_BORNHOST_V6,
    FLAG_STOREHOST_V6,
    KEY_SEPARATOR,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_LEN,
    MIN_RECORD_SIZE,
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
    TRANSACTION_MASK,
)
from ..wire import Host, create_message_id, dispatch_tags_code, parse_properties
from . import hashing as _hashing

__all__ = [
    "record_size",
    "encode_record",
    "encode_batch",
    "encode_blank",
    "peek_record",
    "check_record",
    "scan_records",
    "decode_record",
    "decode_messages",
    "decode_batch",
    "slices",
    "MessageExt",
]


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


cdef inline object _in_get(_In *v, object o):
    """Point ``v`` at the bytes of ``o`` as ``bytes(o)`` would see them; returns the owner to keep
    alive (``o``, or a bytes copy for objects that are not contiguous buffers: TypeError as bytes())."""
    if PyBytes_CheckExact(o):
        v.ptr = <const unsigned char *>PyBytes_AS_STRING(o)
        v.len = PyBytes_GET_SIZE(o)
        return o
    return _in_get_buffer(v, o)


cdef object _in_get_buffer(_In *v, object o):
    # v must not hold a buffer yet (re-pointing an _In is only ever done with bytes, which hold none)
    if _try_get_buffer(o, &v.view, PyBUF_SIMPLE) == 0:
        v.held = True
        v.ptr = <const unsigned char *>v.view.buf
        v.len = v.view.len
        return o
    PyErr_Clear()
    o = bytes(o)
    v.ptr = <const unsigned char *>PyBytes_AS_STRING(o)
    v.len = PyBytes_GET_SIZE(o)
    return o


cdef inline int _in_buf(_In *v, object o) except -1:
    """A readable buffer (bytes, bytearray, memoryview, mmap ...); the buffer protocol's error otherwise."""
    if PyBytes_CheckExact(o):
        v.ptr = <const unsigned char *>PyBytes_AS_STRING(o)
        v.len = PyBytes_GET_SIZE(o)
        return 0
    _get_buffer(o, &v.view, PyBUF_SIMPLE)
    v.held = True
    v.ptr = <const unsigned char *>v.view.buf
    v.len = v.view.len
    return 0


cdef inline void _in_release(_In *v) noexcept:
    if v.held:
        v.held = False
        PyBuffer_Release(&v.view)


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
    if v.held:
        v.held = False
        PyBuffer_Release(&v.view)


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


# --------------------------------------------------------------------------------------------------
# encode
# --------------------------------------------------------------------------------------------------

def record_size(body_len, topic_len, properties_len, sys_flag, v2):
    """MessageExtEncoder.calMsgLength: bytes one record takes."""
    cdef int64_t b, t, p, f
    if (PyLong_CheckExact(body_len) and PyLong_CheckExact(topic_len) and PyLong_CheckExact(properties_len)
            and PyLong_CheckExact(sys_flag)):
        if (_idx64(body_len, &b) == 0 and _idx64(topic_len, &t) == 0 and _idx64(properties_len, &p) == 0
                and _idx64(sys_flag, &f) == 0 and -(1 << 60) < b < (1 << 60) and -(1 << 60) < t < (1 << 60)
                and -(1 << 60) < p < (1 << 60)):
            return rmq_record_size(b, t, p, f, 1 if v2 else 0)
    # anything else (huge or non-int values): the pure twin's expression, with its results and errors
    return (
        MIN_RECORD_SIZE
        + max(body_len, 0)
        + topic_len
        + properties_len
        + (12 if sys_flag & FLAG_BORNHOST_V6 else 0)
        + (12 if sys_flag & FLAG_STOREHOST_V6 else 0)
        + (1 if v2 else 0)
    )


def encode_record(
    buf,
    pos,
    avail,
    topic,
    queue_id,
    flag,
    queue_offset,
    physical_offset,
    sys_flag,
    born_timestamp,
    born_addr,
    born_port,
    store_timestamp,
    store_addr,
    store_port,
    reconsume_times,
    prepared_transaction_offset,
    body,
    properties,
    v2,
):
    """Write one record at ``buf[pos:]`` (the CRC is computed here; the V6 sysflag bits follow the
    address lengths, as the broker sets them).

    Returns the record size, or ``-size`` without writing anything when ``size + 8 > avail`` (the
    CommitLog then writes a BLANK and rolls). Raises InvalidMessageError for values that cannot be
    encoded and ValueError when ``avail`` exceeds the buffer.
    """
    cdef _In b, t, pr, ba, sa
    cdef _Out o
    cdef rmq_msg m
    cdef int64_t sf, p64, a64, size
    cdef int sf_ovf
    cdef bint is_v2
    cdef unsigned char *dst
    b.held = t.held = pr.held = ba.held = sa.held = False
    o.held = False
    try:
        # same order of checks (and so of exceptions) as the pure twin
        kb = _in_get(&b, body)
        kt = _in_get(&t, topic)
        kp = _in_get(&pr, properties)
        kba = _in_get(&ba, born_addr)
        ksa = _in_get(&sa, store_addr)
        sf_ovf = _sys_flag_in(sys_flag, &sf)
        sf = _host_flags(sf, ba.len, sa.len)
        is_v2 = True if v2 else False
        if t.len == 0 or t.len > (32767 if is_v2 else 127):
            raise InvalidMessageError(f"topic of {t.len} bytes cannot be encoded as {'V2' if is_v2 else 'V1'}")
        if pr.len > RMQ_MAX_PROPERTIES_LEN:
            raise PropertiesTooLargeError(f"properties of {pr.len} bytes exceed {RMQ_MAX_PROPERTIES_LEN}")
        _out_get(&o, buf)
        _encode_range(o.len, pos, avail, &p64, &a64)
        size = rmq_record_size(b.len, t.len, pr.len, sf, is_v2)
        if size + RMQ_BLANK_SIZE > a64:
            return -size
        if size > INT32_MAX:
            raise InvalidMessageError(f"a record of {size} bytes does not fit TOTALSIZE")
        if sf_ovf or sf < INT32_MIN or sf > INT32_MAX:
            raise InvalidMessageError(f"sys_flag {sys_flag} does not fit a signed 32-bit int")
        m.sys_flag = <int32_t>sf
        try:  # one handler maps conversion errors as the twin maps struct.error
            _c32(queue_id, &m.queue_id)
            _c32(flag, &m.flag)
            _c64(queue_offset, &m.queue_offset)
            _c64(physical_offset, &m.physical_offset)
            _c64(born_timestamp, &m.born_timestamp)
            _c32(born_port, &m.born_port)
            _c64(store_timestamp, &m.store_timestamp)
            _c32(store_port, &m.store_port)
            _c32(reconsume_times, &m.reconsume_times)
            _c64(prepared_transaction_offset, &m.prepared_tx_offset)
        except (OverflowError, TypeError) as e:
            raise InvalidMessageError(f"field out of range: {e}") from None
        _need_writable(&o, buf)
        dst = o.ptr + p64
        # a source inside the destination (a view of buf itself) is snapshotted first, as bytes()
        # does in the pure twin
        if _overlaps(dst, size, b.ptr, b.len):
            kb = _in_get(&b, PyBytes_FromStringAndSize(<char *>b.ptr, b.len))
        if _overlaps(dst, size, t.ptr, t.len):
            kt = _in_get(&t, PyBytes_FromStringAndSize(<char *>t.ptr, t.len))
        if _overlaps(dst, size, pr.ptr, pr.len):
            kp = _in_get(&pr, PyBytes_FromStringAndSize(<char *>pr.ptr, pr.len))
        if _overlaps(dst, size, ba.ptr, ba.len):
            kba = _in_get(&ba, PyBytes_FromStringAndSize(<char *>ba.ptr, ba.len))
        if _overlaps(dst, size, sa.ptr, sa.len):
            ksa = _in_get(&sa, PyBytes_FromStringAndSize(<char *>sa.ptr, sa.len))
        m.topic = t.ptr
        m.topic_len = t.len
        m.born_addr = ba.ptr
        m.born_addr_len = <int32_t>ba.len
        m.store_addr = sa.ptr
        m.store_addr_len = <int32_t>sa.len
        m.body = b.ptr
        m.body_len = b.len
        m.props = pr.ptr
        m.props_len = pr.len
        m.v2 = is_v2
        if b.len >= NOGIL_MIN:
            with nogil:
                rmq_encode_record_crc(dst, &m, size)
        else:
            rmq_encode_record_crc(dst, &m, size)
        return size
    finally:
        _in_release(&b)
        _in_release(&t)
        _in_release(&pr)
        _in_release(&ba)
        _in_release(&sa)
        _out_release(&o)


cdef struct _Batch:
    # per message: borrowed pointers/lengths, a strong reference or a held buffer per source
    const unsigned char **bodies
    const unsigned char **props
    int64_t *body_lens
    int64_t *props_lens
    int64_t *sizes
    int32_t *flags
    PyObject **refs        # 2 per message (body, props): owned references, or NULL
    Py_buffer *views       # 2 per message, for bytearray/memoryview sources (lazy)
    bint *held             # 2 per message
    Py_ssize_t n


cdef void _batch_free(_Batch *bt) noexcept:
    cdef Py_ssize_t i
    if bt.held != NULL:
        for i in range(2 * bt.n):
            if bt.held[i]:
                PyBuffer_Release(&bt.views[i])
    if bt.refs != NULL:
        for i in range(2 * bt.n):
            Py_XDECREF(bt.refs[i])
    free(bt.bodies)
    free(bt.props)
    free(bt.body_lens)
    free(bt.props_lens)
    free(bt.sizes)
    free(bt.flags)
    free(bt.refs)
    free(bt.views)
    free(bt.held)


cdef int _batch_item(_Batch *bt, Py_ssize_t k, object o, const unsigned char **ptr, int64_t *length) except -1:
    """Borrow the bytes of batch source ``o`` (slot ``k``), keeping it alive until _batch_free."""
    if PyBytes_Check(o):
        Py_INCREF(o)
        bt.refs[k] = <PyObject *>o
        ptr[0] = <const unsigned char *>PyBytes_AS_STRING(o)
        length[0] = PyBytes_GET_SIZE(o)
        return 0
    if not (PyByteArray_Check(o) or isinstance(o, memoryview)):
        raise TypeError("batch bodies and properties must be bytes-like")
    if bt.views == NULL:
        bt.views = <Py_buffer *>calloc(2 * bt.n, sizeof(Py_buffer))
        bt.held = <bint *>calloc(2 * bt.n, sizeof(bint))
        if bt.views == NULL or bt.held == NULL:
            raise MemoryError()
    if _try_get_buffer(o, &bt.views[k], PyBUF_SIMPLE) == 0:
        bt.held[k] = True
        ptr[0] = <const unsigned char *>bt.views[k].buf
        length[0] = bt.views[k].len
        return 0
    PyErr_Clear()
    o = bytes(o)  # a non-contiguous memoryview: copy, as the pure twin's bytes() does
    Py_INCREF(o)
    bt.refs[k] = <PyObject *>o
    ptr[0] = <const unsigned char *>PyBytes_AS_STRING(o)
    length[0] = PyBytes_GET_SIZE(o)
    return 0


cdef int _batch_flags(_Batch *bt, object flags) except -1:
    cdef Py_ssize_t i, n = bt.n
    cdef const int64_t[::1] f64
    cdef const int32_t[::1] f32
    cdef int64_t v
    if PyList_CheckExact(flags) or PyTuple_CheckExact(flags):
        for i in range(n):
            _f32(<object>(PyList_GET_ITEM(flags, i) if PyList_CheckExact(flags) else PyTuple_GET_ITEM(flags, i)),
                 &bt.flags[i], "flag")
        return 0
    if PyObject_CheckBuffer(flags):  # numpy int32/int64 arrays without a Python object per item
        try:
            f64 = flags
        except (ValueError, TypeError, BufferError):
            pass
        else:
            for i in range(n):
                v = f64[i]
                if v < INT32_MIN or v > INT32_MAX:
                    raise InvalidMessageError(f"flag {v} does not fit a signed 32-bit int")
                bt.flags[i] = <int32_t>v
            return 0
        try:
            f32 = flags
        except (ValueError, TypeError, BufferError):
            pass
        else:
            for i in range(n):
                bt.flags[i] = f32[i]
            return 0
    for i in range(n):
        _f32(flags[i], &bt.flags[i], "flag")
    return 0


def encode_batch(
    buf,
    pos,
    avail,
    topic,
    queue_id,
    queue_offset,
    physical_offset,
    sys_flag,
    born_timestamp,
    born_addr,
    born_port,
    store_timestamp,
    store_addr,
    store_port,
    bodies,
    properties,
    flags,
    v2,
    sizes_out,
):
    """Write a batch (MessageExtBatch) as consecutive records at ``buf[pos:]``, all or nothing.

    Message i gets body ``bodies[i]``, properties ``properties[i]`` (bytes, or a str stored as UTF-8;
    one with a lone surrogate is an InvalidMessageError), user flag ``flags[i]``
    (or 0 when ``flags`` is None), queue offset ``queue_offset + i`` and physical offset
    ``physical_offset + bytes before it``; reconsume times and prepared offset are 0 (as the broker
    writes batches). ``sizes_out`` (int64 array of at least ``len(bodies)`` or None) receives each
    record's size. Returns ``(count, total_bytes)``, or ``(0, -total_bytes)`` writing nothing when
    ``total + 8 > avail`` (a batch never splits across files).
    """
    cdef _In t, ba, sa
    cdef _Out o
    cdef _Batch bt
    cdef rmq_msg m
    cdef Py_ssize_t n, i, tlen
    cdef int64_t sf, p64, a64, total = 0, before_last
    cdef int sf_ovf
    cdef bint is_v2, fast_bodies, fast_props, overlap = False
    cdef unsigned char *dst
    cdef unsigned char *scratch = NULL
    cdef int64_t[::1] so
    cdef object body, props
    t.held = ba.held = sa.held = False
    o.held = False
    bt.bodies = bt.props = NULL
    bt.body_lens = bt.props_lens = bt.sizes = NULL
    bt.flags = NULL
    bt.refs = NULL
    bt.views = NULL
    bt.held = NULL
    bt.n = 0
    try:
        n = len(bodies)
        if len(properties) != n or (flags is not None and len(flags) != n):
            raise InvalidMessageError("bodies, properties and flags must have the same length")
        if sizes_out is not None and len(sizes_out) < n:
            raise ValueError("sizes_out is shorter than the batch")
        _out_get(&o, buf)
        _encode_range(o.len, pos, avail, &p64, &a64)
        kba = _in_get(&ba, born_addr)
        ksa = _in_get(&sa, store_addr)
        sf_ovf = _sys_flag_in(sys_flag, &sf)
        sf = _host_flags(sf, ba.len, sa.len)
        is_v2 = True if v2 else False
        if n == 0:
            if RMQ_BLANK_SIZE <= a64:
                _need_writable(&o, buf)
            return 0, 0
        tlen = len(topic)  # sized as the pure twin does; the bytes themselves are taken once it fits

        bt.bodies = <const unsigned char **>malloc(n * sizeof(void *))
        bt.props = <const unsigned char **>malloc(n * sizeof(void *))
        bt.body_lens = <int64_t *>malloc(n * sizeof(int64_t))
        bt.props_lens = <int64_t *>malloc(n * sizeof(int64_t))
        bt.sizes = <int64_t *>malloc(n * sizeof(int64_t))
        bt.refs = <PyObject **>calloc(2 * n, sizeof(PyObject *))
        if (bt.bodies == NULL or bt.props == NULL or bt.body_lens == NULL or bt.props_lens == NULL
                or bt.sizes == NULL or bt.refs == NULL):
            raise MemoryError()
        bt.n = n
        fast_bodies = PyList_CheckExact(bodies) or PyTuple_CheckExact(bodies)
        fast_props = PyList_CheckExact(properties) or PyTuple_CheckExact(properties)
        for i in range(n):
            if fast_bodies:
                body = <object>(PyList_GET_ITEM(bodies, i) if PyList_CheckExact(bodies) else PyTuple_GET_ITEM(bodies, i))
            else:
                body = bodies[i]
            if fast_props:
                props = <object>(PyList_GET_ITEM(properties, i) if PyList_CheckExact(properties)
                                 else PyTuple_GET_ITEM(properties, i))
            else:
                props = properties[i]
            if PyUnicode_CheckExact(props):  # a properties string, stored as UTF-8
                if PyUnicode_IS_COMPACT_ASCII(props):  # its bytes are the UTF-8: no copy
                    Py_INCREF(props)
                    bt.refs[2 * i + 1] = <PyObject *>props
                    bt.props[i] = <const unsigned char *>PyUnicode_DATA(props)
                    bt.props_lens[i] = PyUnicode_GET_LENGTH(props)
                else:
                    try:
                        props = PyUnicode_AsEncodedString(props, "utf-8", NULL)
                    except UnicodeEncodeError:
                        raise InvalidMessageError(
                            "properties hold a lone surrogate: they are not UTF-8 text") from None
                    _batch_item(&bt, 2 * i + 1, props, &bt.props[i], &bt.props_lens[i])
            elif PyBytes_Check(props) or PyByteArray_Check(props) or isinstance(props, memoryview):
                _batch_item(&bt, 2 * i + 1, props, &bt.props[i], &bt.props_lens[i])
            else:
                raise TypeError("batch bodies must be bytes-like and properties bytes-like or str")
            if not (PyBytes_Check(body) or PyByteArray_Check(body) or isinstance(body, memoryview)):
                raise TypeError("batch bodies must be bytes-like and properties bytes-like or str")
            _batch_item(&bt, 2 * i, body, &bt.bodies[i], &bt.body_lens[i])
            if bt.props_lens[i] > RMQ_MAX_PROPERTIES_LEN:
                raise PropertiesTooLargeError(
                    f"properties of {bt.props_lens[i]} bytes exceed {RMQ_MAX_PROPERTIES_LEN}")
            bt.sizes[i] = rmq_record_size(bt.body_lens[i], tlen, bt.props_lens[i], sf, is_v2)
            total += bt.sizes[i]
        if total + RMQ_BLANK_SIZE > a64:
            return 0, -total

        # everything the pure twin would reject while encoding, before a single byte is written
        kt = _in_get(&t, topic)
        if t.len != tlen:
            raise InvalidMessageError(f"topic is not a byte string ({tlen} items, {t.len} bytes)")
        if t.len == 0 or t.len > (32767 if is_v2 else 127):
            raise InvalidMessageError(f"topic of {t.len} bytes cannot be encoded as {'V2' if is_v2 else 'V1'}")
        _f32(queue_id, &m.queue_id, "queue_id")
        _f64(queue_offset, &m.queue_offset, "queue_offset")
        _f64(physical_offset, &m.physical_offset, "physical_offset")
        if sf_ovf or sf < INT32_MIN or sf > INT32_MAX:
            raise InvalidMessageError(f"sys_flag {sys_flag} does not fit a signed 32-bit int")
        m.sys_flag = <int32_t>sf
        _f64(born_timestamp, &m.born_timestamp, "born_timestamp")
        _f32(born_port, &m.born_port, "born_port")
        _f64(store_timestamp, &m.store_timestamp, "store_timestamp")
        _f32(store_port, &m.store_port, "store_port")
        for i in range(n):
            if bt.sizes[i] > INT32_MAX:
                raise InvalidMessageError(f"a record of {bt.sizes[i]} bytes does not fit TOTALSIZE")
        if flags is not None:
            bt.flags = <int32_t *>malloc(n * sizeof(int32_t))
            if bt.flags == NULL:
                raise MemoryError()
            _batch_flags(&bt, flags)
        if m.queue_offset > INT64_MAX - (n - 1):
            raise InvalidMessageError(f"queue offset {queue_offset} + {n - 1} does not fit a long")
        before_last = total - bt.sizes[n - 1]
        if m.physical_offset > INT64_MAX - before_last:
            raise InvalidMessageError(f"physical offset {physical_offset} + {before_last} does not fit a long")
        _need_writable(&o, buf)

        m.topic = t.ptr
        m.topic_len = t.len
        m.born_addr = ba.ptr
        m.born_addr_len = <int32_t>ba.len
        m.store_addr = sa.ptr
        m.store_addr_len = <int32_t>sa.len
        m.reconsume_times = 0
        m.prepared_tx_offset = 0
        m.v2 = is_v2
        dst = o.ptr + p64
        # sources inside the destination (views of buf itself): encode into scratch, then copy, as
        # the pure twin does
        overlap = (_overlaps(dst, total, t.ptr, t.len) or _overlaps(dst, total, ba.ptr, ba.len)
                   or _overlaps(dst, total, sa.ptr, sa.len))
        i = 0
        while not overlap and i < n:
            overlap = (_overlaps(dst, total, bt.bodies[i], bt.body_lens[i])
                       or _overlaps(dst, total, bt.props[i], bt.props_lens[i]))
            i += 1
        if overlap:
            scratch = <unsigned char *>malloc(total)
            if scratch == NULL:
                raise MemoryError()
        if total >= NOGIL_MIN:
            with nogil:
                rmq_encode_batch(scratch if overlap else dst, &m, n, bt.bodies, bt.body_lens, bt.props,
                                 bt.props_lens, bt.flags, bt.sizes)
                if overlap:
                    memcpy(dst, scratch, total)
        else:
            rmq_encode_batch(scratch if overlap else dst, &m, n, bt.bodies, bt.body_lens, bt.props,
                             bt.props_lens, bt.flags, bt.sizes)
            if overlap:
                memcpy(dst, scratch, total)

        if sizes_out is not None:
            try:
                so = sizes_out
            except (ValueError, TypeError, BufferError):
                for i in range(n):
                    sizes_out[i] = bt.sizes[i]
            else:
                for i in range(n):
                    so[i] = bt.sizes[i]
        return n, total
    finally:
        free(scratch)
        _batch_free(&bt)
        _in_release(&t)
        _in_release(&ba)
        _in_release(&sa)
        _out_release(&o)


def encode_blank(buf, pos, remaining):
    """Write the 8-byte BLANK filler (int remaining-to-end-of-file, int BLANK magic) at ``pos``."""
    cdef _Out o
    cdef int64_t p64, r64
    cdef int ovf
    o.held = False
    try:
        _out_get(&o, buf)
        if _idx64(pos, &p64) or p64 < 0 or p64 > o.len - RMQ_BLANK_SIZE:
            raise ValueError("BLANK outside the buffer")
        # the pure twin packs with struct and lets struct.error through: same class here
        try:
            ovf = _idx64(remaining, &r64)
        except TypeError:
            raise _struct.error("required argument is not an integer") from None
        if ovf or r64 < INT32_MIN or r64 > INT32_MAX:
            raise _struct.error(f"'i' format requires {INT32_MIN} <= number <= {INT32_MAX}")
        _need_writable(&o, buf)
        rmq_encode_blank(o.ptr + p64, <int32_t>r64)
    finally:
        _out_release(&o)


# --------------------------------------------------------------------------------------------------
# decode
# --------------------------------------------------------------------------------------------------

def peek_record(buf, pos, limit):
    """Classify what starts at ``pos`` from its first 8 bytes: ``(status, size)``.

    ST_MSG (size = TOTALSIZE, fully inside ``limit``), ST_BLANK (size = declared remaining length),
    ST_END (nothing written: limit reached or zeros), ST_TORN (record runs past ``limit``),
    ST_BAD_MAGIC, ST_BAD_SIZE.
    """
    cdef _In b
    cdef int64_t p, l, size
    cdef int st
    b.held = False
    try:
        _in_buf(&b, buf)
        _check_range(b.len, pos, limit, &p, &l)
        st = rmq_peek_record(b.ptr, p, l, &size)
        return st, size
    finally:
        _in_release(&b)


cdef int _check(const unsigned char *base, int64_t p, int64_t l, bint verify_crc, int64_t *size,
                rmq_record *rec) noexcept:
    """rmq_check_record, with the CRC of a large body computed without the GIL."""
    cdef int st = rmq_check_record(base, p, l, 0, size, rec)
    cdef uint32_t crc
    if st != RMQ_ST_MSG or not verify_crc:
        return st
    if rec.body_len >= NOGIL_MIN:
        with nogil:
            crc = rmq_body_crc(base + rec.body_pos, <size_t>rec.body_len)
    else:
        crc = rmq_body_crc(base + rec.body_pos, <size_t>rec.body_len)
    return RMQ_ST_MSG if crc == <uint32_t>rec.body_crc else RMQ_ST_BAD_CRC


def check_record(buf, pos, limit, verify_crc):
    """Full validation of the record at ``pos`` (checkMessageAndReturnSize): ``(status, size)``."""
    cdef _In b
    cdef int64_t p, l, size
    cdef rmq_record rec
    cdef int st
    b.held = False
    try:
        _in_buf(&b, buf)
        _check_range(b.len, pos, limit, &p, &l)
        st = _check(b.ptr, p, l, True if verify_crc else False, &size, &rec)
        return st, size
    finally:
        _in_release(&b)


cdef inline const unsigned char *_base(const unsigned char[::1] buf) noexcept:
    return &buf[0] if buf.shape[0] > 0 else NULL


def scan_records(const unsigned char[::1] buf, pos, limit, verify_crc, max_records=-1):
    """Walk valid records from ``pos``: ``(status, end_pos, count, last_store_timestamp)``.

    Stops at the first non-record (its status; ``end_pos`` is where it starts) or, with
    ``max_records >= 0``, after that many records (status ST_MSG). ``last_store_timestamp`` is the
    STORETIMESTAMP of the last valid record, or -1 when none. This is recovery's hot loop.
    """
    cdef int64_t p, l, mx, end_pos = 0, count = 0, last_ts = -1
    cdef int st, ovf
    cdef int verify = 1 if verify_crc else 0
    cdef const unsigned char *base = _base(buf)
    _check_range(buf.shape[0], pos, limit, &p, &l)
    ovf = _idx64(max_records, &mx)
    if ovf < 0:
        mx = -1
    with nogil:
        st = rmq_scan_records(base, p, l, verify, mx, &end_pos, &count, &last_ts)
    return st, end_pos, count, last_ts


_ERRORS = {
    ST_TORN: (TruncatedRecordError, "record runs past the end of the data"),
    ST_BAD_MAGIC: (BadMagicError, "unknown magic code"),
    ST_BAD_SIZE: (RecordSizeError, "record size disagrees with its field lengths"),
    ST_BAD_CRC: (ChecksumError, "body CRC mismatch"),
}


# -- MessageExt --------------------------------------------------------------------------------------
# Fields most records of a store share (its magic, its hosts and ports, a topic) come back as one
# object each, the last one made, when the next record's value is the same: immutable ints and
# bytes, so sharing them is invisible, and a decoded message costs fewer allocations. Module
# state, touched with the GIL held only; each entry holds a reference to its object.
DEF _SH_MAGIC = 0
DEF _SH_BORN_PORT = 1
DEF _SH_STORE_PORT = 2
DEF _SH_BORN_ADDR = 3
DEF _SH_STORE_ADDR = 4
DEF _SH_TOPIC = 5
DEF _SH_BYTES_MAX = 128  # longer values are not compared
cdef PyObject *_sh_obj[6]
cdef int64_t _sh_int[3]


cdef inline object _sh_keep(int i, object v):
    Py_INCREF(v)
    Py_XDECREF(_sh_obj[i])
    _sh_obj[i] = <PyObject *>v
    return v


cdef inline object _shared_int(int i, int64_t v):
    if _sh_obj[i] != NULL and _sh_int[i] == v:
        return <object>_sh_obj[i]
    _sh_int[i] = v
    return _sh_keep(i, v)


cdef inline object _shared_bytes(int i, const unsigned char *base, int64_t pos, int64_t n):
    cdef PyObject *got = _sh_obj[i]
    if n > _SH_BYTES_MAX:
        return _bytes_at(base, pos, n)
    if got != NULL and PyBytes_GET_SIZE(<object>got) == n \
            and memcmp(PyBytes_AS_STRING(<object>got), base + pos, <size_t>n) == 0:
        return <object>got
    return _sh_keep(i, PyBytes_FromStringAndSize(<char *>base + pos, n))


# what a MessageExt holds (both twins): its attributes, in the order of the decode_record tuple
# after ``position``; ``_props`` caches the parsed properties
MESSAGE_FIELDS = (
    "position", "size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
    "sys_flag", "born_timestamp", "_born_addr", "_born_port", "store_timestamp", "_store_addr",
    "_store_port", "reconsume_times", "prepared_transaction_offset", "body", "topic_bytes",
    "properties_bytes",
)


cdef class MessageExt:
    """A decoded CommitLog record (MessageExt); the native twin of ``rmqcore._pure.codec.MessageExt``
    (same constructor, attributes, properties and values; ``rmqcore.message.MessageExt`` is this
    class when the native kernels are in use).

    The integer fields are C fields, made into ints when read: a decoded message is one object
    and its bytes, built by ``make_message`` without running Python code. ``position`` is the
    global CommitLog offset the record was read at (``physical_offset`` is the PHYSICALOFFSET
    field stored inside it; the two agree in a healthy store).
    """
    cdef public int64_t position, size, magic, body_crc, queue_id, flag, queue_offset, physical_offset
    cdef public int64_t sys_flag, born_timestamp, _born_port, store_timestamp, _store_port
    cdef public int64_t reconsume_times, prepared_transaction_offset
    cdef public object _born_addr, _store_addr, body, topic_bytes, properties_bytes, _props
    FIELDS = MESSAGE_FIELDS

    def __init__(self, position, raw):
        (
            self.size, self.magic, self.body_crc, self.queue_id, self.flag, self.queue_offset,
            self.physical_offset, self.sys_flag, self.born_timestamp, self._born_addr, self._born_port,
            self.store_timestamp, self._store_addr, self._store_port, self.reconsume_times,
            self.prepared_transaction_offset, self.body, self.topic_bytes, self.properties_bytes,
        ) = raw
        self.position = position
        self._props = None

    @property
    def born_host(self):
        return Host(self._born_addr, self._born_port)

    @property
    def store_host(self):
        return Host(self._store_addr, self._store_port)

    @property
    def topic(self):
        return self.topic_bytes.decode("utf-8", "replace")

    @property
    def properties_string(self):
        """The stored properties string exactly (invalid UTF-8 replaced as Java would)."""
        return self.properties_bytes.decode("utf-8", "replace")

    @property
    def properties(self):
        if self._props is None:
            self._props = parse_properties(self.properties_string)
        return self._props

    @property
    def tags(self):
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self):
        """KEYS split on single spaces, empty tokens dropped (as IndexService indexes them)."""
        k = self.properties.get(PROPERTY_KEYS)
        return [t for t in k.split(KEY_SEPARATOR) if t] if k else []

    @property
    def uniq_key(self):
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def msg_id(self):
        return create_message_id(self._store_addr, self._store_port, self.physical_offset)

    @property
    def compression_type(self):
        from ..compression import compression_type
        return compression_type(self.sys_flag)

    def decompressed_body(self):
        from ..compression import decompress_body
        return decompress_body(self.sys_flag, self.body)

    @property
    def tags_code(self):
        """The consume-queue tags code dispatch computes (delivery time for the delay topic)."""
        return dispatch_tags_code(self.topic, self.properties, self.store_timestamp, _hashing.tags_code)

    @property
    def transaction_type(self):
        return self.sys_flag & TRANSACTION_MASK

    @property
    def version(self):
        return 2 if self.magic == MAGIC_V2 else 1

    def __repr__(self):
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"position={self.position}, size={self.size}, body={len(self.body)} bytes)"
        )


cdef object make_message(object cls, int64_t position, const unsigned char *base, const rmq_record *r):
    """``cls(position, record_tuple(base, r))`` when ``cls`` is MessageExt, built without running
    Python code; None otherwise (the caller builds through the class)."""
    obj = alloc_message(cls)
    if obj is not None:
        fill_message(obj, position, base, r)
    return obj


cdef object alloc_message(object cls):
    """An empty MessageExt when ``cls`` is MessageExt, else None. Allocating may run a garbage
    collection, so Python code (finalizers): callers allocate before they take pointers into
    shared buffers, and fill after."""
    if cls is not MessageExt:
        return None
    return MessageExt.__new__(MessageExt)


cdef int fill_message(object obj, int64_t position, const unsigned char *base, const rmq_record *r) except -1:
    """Set the fields of an ``alloc_message`` instance from the record at ``base``. Makes bytes
    only (no collection runs); a body of 64 KiB or more is copied with the GIL released, so the
    caller holds an export of the buffer ``base`` points into."""
    cdef MessageExt m = <MessageExt>obj
    m.position = position
    m.size = r.size
    m.magic = r.magic
    m.body_crc = r.body_crc
    m.queue_id = r.queue_id
    m.flag = r.flag
    m.queue_offset = r.queue_offset
    m.physical_offset = r.physical_offset
    m.sys_flag = r.sys_flag
    m.born_timestamp = r.born_timestamp
    m._born_addr = _shared_bytes(_SH_BORN_ADDR, base, r.born_host_pos, r.born_addr_len)
    m._born_port = r.born_port
    m.store_timestamp = r.store_timestamp
    m._store_addr = _shared_bytes(_SH_STORE_ADDR, base, r.store_host_pos, r.store_addr_len)
    m._store_port = r.store_port
    m.reconsume_times = r.reconsume_times
    m.prepared_transaction_offset = r.prepared_tx_offset
    m.body = _bytes_at(base, r.body_pos, r.body_len)
    m.topic_bytes = _shared_bytes(_SH_TOPIC, base, r.topic_pos, r.topic_len)
    m.properties_bytes = _bytes_at(base, r.props_pos, r.props_len)
    return 0


cdef tuple record_tuple(const unsigned char *base, const rmq_record *r):
    return (
        r.size, _shared_int(_SH_MAGIC, r.magic), r.body_crc, r.queue_id, r.flag, r.queue_offset,
        r.physical_offset, r.sys_flag, r.born_timestamp,
        _shared_bytes(_SH_BORN_ADDR, base, r.born_host_pos, r.born_addr_len),
        _shared_int(_SH_BORN_PORT, r.born_port), r.store_timestamp,
        _shared_bytes(_SH_STORE_ADDR, base, r.store_host_pos, r.store_addr_len),
        _shared_int(_SH_STORE_PORT, r.store_port), r.reconsume_times, r.prepared_tx_offset,
        _bytes_at(base, r.body_pos, r.body_len), _shared_bytes(_SH_TOPIC, base, r.topic_pos, r.topic_len),
        _bytes_at(base, r.props_pos, r.props_len),
    )


def raise_for_status(status, pos):
    cls, detail = _ERRORS[status]
    raise cls(detail, pos)


cdef inline bytes _bytes_at(const unsigned char *base, int64_t pos, int64_t n):
    if n >= NOGIL_MIN * 16:  # pre-fault a large mapped range without the GIL before copying it
        with nogil:
            rmq_pretouch(base + pos, <size_t>n)
    return PyBytes_FromStringAndSize(<char *>base + pos, n)


def decode_messages(buf, base, positions, limit, verify_crc, factory):
    """See the pure twin. For MessageExt (this module's) each message is built directly
    (``make_message``), under one export of ``buf``; any other factory is called after it is
    released, on the raw tuples."""
    cdef _In b
    cdef int64_t p, l, size, gbase = base
    cdef rmq_record r
    cdef int st
    cdef bint verify = True if verify_crc else False
    cdef bint direct = True
    cdef Py_ssize_t j
    out = []
    starts = []
    b.held = False
    try:
        _in_buf(&b, buf)
        for pos in positions:
            _check_range(b.len, pos, limit, &p, &l)
            st = _check(b.ptr, p, l, verify, &size, &r)
            if st == RMQ_ST_END or st == RMQ_ST_BLANK:
                break
            if st != RMQ_ST_MSG:
                raise_for_status(st, pos)
            m = make_message(factory, gbase + p, b.ptr, &r)
            if m is None:
                direct = False
                m = record_tuple(b.ptr, &r)
                starts.append(gbase + p)
            out.append(m)
    finally:
        _in_release(&b)
    if not direct:
        for j in range(len(out)):
            out[j] = factory(starts[j], out[j])
    return out, len(out)


def decode_record(buf, pos, limit, verify_crc):
    """Decode the record at ``pos``; None at a BLANK or at the end of the data.

    Returns ``(size, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
    born_timestamp, born_addr, born_port, store_timestamp, store_addr, store_port, reconsume_times,
    prepared_transaction_offset, body, topic, properties)`` with bytes for addresses, body, topic
    and properties. Raises a CorruptionError subclass positioned at ``pos`` for invalid bytes.
    """
    cdef _In b
    cdef int64_t p, l, size
    cdef rmq_record r
    cdef int st
    cdef const unsigned char *base
    b.held = False
    try:
        _in_buf(&b, buf)
        _check_range(b.len, pos, limit, &p, &l)
        base = b.ptr
        st = _check(base, p, l, True if verify_crc else False, &size, &r)
        if st == RMQ_ST_END or st == RMQ_ST_BLANK:
            return None
        if st != RMQ_ST_MSG:
            raise_for_status(st, pos)
        return record_tuple(base, &r)
    finally:
        _in_release(&b)


def decode_batch(const unsigned char[::1] buf, pos, limit, out, verify_crc):
    """Decode consecutive records from ``pos`` into the columns of ``out`` (int64, shape
    ``(NCOLUMNS, capacity)``, C-contiguous; row order = ``layout.COLUMNS``) without Python objects
    per field. Returns ``(count, end_pos, status)``: status ST_MSG when ``out`` filled up, else the
    status of whatever stopped the walk at ``end_pos`` (ST_END, ST_BLANK or an error status).
    """
    cdef int64_t p, l, cap, count = 0, end_pos = 0, rs, cs
    cdef int st
    cdef int verify = 1 if verify_crc else 0
    cdef const unsigned char *base = _base(buf)
    cdef int64_t[:, :] o
    cdef int64_t *optr
    _check_range(buf.shape[0], pos, limit, &p, &l)
    if getattr(out, "ndim", 0) != 2 or out.shape[0] != NCOLUMNS:
        raise ValueError(f"out must be a 2-D array with {NCOLUMNS} rows")
    try:
        o = out
    except (ValueError, TypeError, BufferError):
        # not a writable int64 buffer (another dtype, read-only ...): decode into a scratch array and
        # assign, which gives numpy's own conversions and errors, as the pure twin's item assignment
        import numpy
        tmp = numpy.empty((NCOLUMNS, out.shape[1]), dtype=numpy.int64)
        n, end, status = decode_batch(buf, pos, limit, tmp, verify_crc)
        if n:
            out[:, :n] = tmp[:, :n]
        return n, end, status
    cap = o.shape[1]
    if cap == 0:
        return 0, p, RMQ_ST_MSG
    if o.strides[0] % sizeof(int64_t) or o.strides[1] % sizeof(int64_t):
        raise ValueError("out strides must be multiples of 8 bytes")
    rs = o.strides[0] // <Py_ssize_t>sizeof(int64_t)
    cs = o.strides[1] // <Py_ssize_t>sizeof(int64_t)
    optr = &o[0, 0]
    with nogil:
        st = rmq_decode_batch(base, p, l, verify, optr, rs, cs, cap, &count, &end_pos)
    return count, end_pos, st


def slices(const unsigned char[::1] data not None, positions, lengths):
    """``[bytes(data[p:p + n]) for p, n in zip(positions, lengths)]`` (int64 arrays): a batch's bodies,
    topics or properties as bytes. Every range is checked before any object is made; ValueError
    for a range outside ``data`` or arrays of different lengths."""
    cdef const int64_t[:] p = positions
    cdef const int64_t[:] l = lengths
    cdef Py_ssize_t n = p.shape[0], i
    cdef int64_t size = data.shape[0]
    cdef const char *base = <const char *>&data[0] if size > 0 else <const char *>b""
    if l.shape[0] != n:
        raise ValueError(f"{n} positions but {l.shape[0]} lengths")
    for i in range(n):
        if p[i] < 0 or l[i] < 0 or p[i] > size - l[i]:
            raise ValueError(f"slice {i} [{p[i]}, {p[i]} + {l[i]}) outside {size} bytes")
    out = [None] * n
    for i in range(n):
        out[i] = PyBytes_FromStringAndSize(base + p[i], l[i])
    return out
