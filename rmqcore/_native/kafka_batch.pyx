# cython: language_level=3
"""Kafka ``.log`` walking and v2 record parsing over a buffer.

Native twin of :mod:`rmqcore._pure.kafka_batch`; see it for the contract (statuses, tuple layouts,
exceptions). Ranges are checked once at entry; walks then advance raw pointers. The header walks run
without the GIL (CRC-32C/CRC-32 via ``csrc/rmq_crc32.h``); only building the result objects holds it.
"""
from libc.stdint cimport int8_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize
from ._core cimport rmq_capi_import
from .crc cimport rmq_crc32, rmq_crc32c

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

from rmqcore.errors import CorruptionError, RecordSizeError
from rmqcore.kafka_layout import (
    CRC_NONE, CRC_REPORT, CRC_STOP, E_CRC, E_MAGIC, E_SHORT, E_SIZE, END, HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_V1_MIN_SIZE, LOG_OVERHEAD, MIN_ENTRY_SIZE, OK, RECORD_BATCH_OVERHEAD, TORN,
)


__all__ = [
    "OK", "END", "TORN", "E_SIZE", "E_MAGIC", "E_CRC", "E_SHORT",
    "CRC_NONE", "CRC_STOP", "CRC_REPORT",
    "HEADER_SIZE_UP_TO_MAGIC", "LOG_OVERHEAD", "RECORD_BATCH_OVERHEAD", "MIN_ENTRY_SIZE",
    "scan", "batch_headers", "find_offset", "find_timestamp", "parse_records",
]

cdef enum:
    ST_OK = 0
    ST_END = 1
    ST_TORN = 2
    ST_E_SIZE = -1
    ST_E_MAGIC = -2
    ST_E_CRC = -3
    ST_E_SHORT = -4

cdef enum:
    K_UP_TO_MAGIC = 17  # kafka_layout.HEADER_SIZE_UP_TO_MAGIC
    K_LOG_OVERHEAD = 12  # kafka_layout.LOG_OVERHEAD
    K_BATCH_OVERHEAD = 61  # kafka_layout.RECORD_BATCH_OVERHEAD
    K_MIN_ENTRY = 14  # kafka_layout.MIN_ENTRY_SIZE
    K_V1_MIN = 22  # kafka_layout.LEGACY_V1_MIN_SIZE

# the C walk must agree with kafka_layout.py (checked once at import; a mismatch is a build bug)
if ((ST_OK, ST_END, ST_TORN, ST_E_SIZE, ST_E_MAGIC, ST_E_CRC, ST_E_SHORT, K_UP_TO_MAGIC, K_LOG_OVERHEAD,
     K_BATCH_OVERHEAD, K_MIN_ENTRY, K_V1_MIN)
        != (OK, END, TORN, E_SIZE, E_MAGIC, E_CRC, E_SHORT, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD,
            RECORD_BATCH_OVERHEAD, MIN_ENTRY_SIZE, LEGACY_V1_MIN_SIZE)):
    raise ImportError("rmqcore/_native/kafka_batch.pyx disagrees with rmqcore/kafka_layout.py")

ctypedef struct khdr:
    Py_ssize_t position
    Py_ssize_t size
    int magic
    int64_t offset_field
    int64_t last_offset
    int64_t max_timestamp
    int crc_state


cdef inline uint32_t _be32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline int64_t _be64(const unsigned char* p) noexcept nogil:
    return <int64_t>((<uint64_t>_be32(p) << 32) | <uint64_t>_be32(p + 4))


cdef inline int _step(const unsigned char* b, Py_ssize_t pos, Py_ssize_t end, khdr* h) noexcept nogil:
    """Parse the entry header at ``pos`` into ``h``; ST_OK or the stop status."""
    cdef Py_ssize_t remaining = end - pos
    cdef const unsigned char* p
    cdef int32_t size
    cdef Py_ssize_t total
    cdef int magic
    if remaining <= K_UP_TO_MAGIC:
        return ST_END if remaining == 0 else ST_TORN
    p = b + pos
    size = <int32_t>_be32(p + 8)
    if size < K_MIN_ENTRY:
        return ST_E_SIZE
    total = <Py_ssize_t>size + K_LOG_OVERHEAD
    if total > remaining:
        return ST_TORN
    magic = <int8_t>p[16]
    if magic < 0 or magic > 2:
        return ST_E_MAGIC
    if (magic == 2 and total < K_BATCH_OVERHEAD) or (magic == 1 and size < K_V1_MIN):
        return ST_E_SHORT
    h.position = pos
    h.size = total
    h.magic = magic
    h.offset_field = _be64(p)
    if magic == 2:
        h.last_offset = <int64_t>(<uint64_t>h.offset_field + <uint64_t>(<int64_t>(<int32_t>_be32(p + 23))))
        h.max_timestamp = _be64(p + 35)
    elif magic == 1:
        h.last_offset = h.offset_field
        h.max_timestamp = _be64(p + 18)
    else:
        h.last_offset = h.offset_field
        h.max_timestamp = -1
    h.crc_state = -1
    return ST_OK


cdef inline int _crc_ok(const unsigned char* p, const khdr* h) noexcept nogil:
    if h.magic == 2:
        return rmq_crc32c(0, p + 21, <size_t>(h.size - 21)) == _be32(p + 17)
    return rmq_crc32(0, p + 16, <size_t>(h.size - 16)) == _be32(p + 12)


cdef int _check_range(Py_ssize_t n, Py_ssize_t start, Py_ssize_t end) except -1:
    if start < 0 or start > end or end > n:
        raise ValueError(f"range [{start}, {end}) outside a buffer of {n} bytes")
    return 0


cdef inline const unsigned char* _ptr(const unsigned char[::1] buf):
    # An empty buffer has no element 0; every walk over it stops before dereferencing.
    if buf.shape[0] == 0:
        return <const unsigned char*>""
    return &buf[0]


def scan(const unsigned char[::1] buf, Py_ssize_t start, Py_ssize_t end, int verify_crc=1):
    """Walk entries from ``start``; stop at the first one that is not a complete valid entry.

    Returns:
        ``(count, stop, status)``.

    Raises:
        ValueError: ``[start, end)`` is not inside ``buf``.
    """
    _check_range(buf.shape[0], start, end)
    cdef const unsigned char* b = _ptr(buf)
    cdef Py_ssize_t pos = start
    cdef Py_ssize_t count = 0
    cdef int st
    cdef khdr h
    with nogil:
        while True:
            st = _step(b, pos, end, &h)
            if st != ST_OK:
                break
            if verify_crc and not _crc_ok(b + pos, &h):
                st = ST_E_CRC
                break
            pos += h.size
            count += 1
    return count, pos, st


def batch_headers(const unsigned char[::1] buf, Py_ssize_t start, Py_ssize_t end, int crc_mode=0,
                  Py_ssize_t max_count=-1):
    """Header tuples of the entries from ``start``.

    Returns:
        ``(headers, stop, status)``; each header is
        ``(position, size, magic, offset_field, last_offset, max_timestamp, crc_state)``.

    Raises:
        ValueError: bad range or ``crc_mode``.
    """
    _check_range(buf.shape[0], start, end)
    if crc_mode != 0 and crc_mode != 1 and crc_mode != 2:
        raise ValueError(f"crc_mode must be 0, 1 or 2, not {crc_mode}")
    cdef const unsigned char* b = _ptr(buf)
    cdef Py_ssize_t pos = start
    cdef Py_ssize_t n = 0
    cdef Py_ssize_t cap = 0
    cdef khdr* arr = NULL
    cdef khdr* grown
    cdef khdr h
    cdef int st = ST_OK
    cdef int oom = 0
    cdef Py_ssize_t i
    try:
        with nogil:
            while True:
                if max_count >= 0 and n >= max_count:
                    st = ST_OK
                    break
                st = _step(b, pos, end, &h)
                if st != ST_OK:
                    break
                if crc_mode != 0:
                    h.crc_state = _crc_ok(b + pos, &h)
                    if h.crc_state == 0 and crc_mode == 1:
                        st = ST_E_CRC
                        break
                if n == cap:
                    cap = 64 if cap == 0 else cap * 2
                    grown = <khdr*>realloc(arr, <size_t>cap * sizeof(khdr))
                    if grown == NULL:
                        oom = 1
                        break
                    arr = grown
                arr[n] = h
                n += 1
                pos += h.size
        if oom:
            raise MemoryError()
        out = [None] * n
        for i in range(n):
            out[i] = (arr[i].position, arr[i].size, arr[i].magic, arr[i].offset_field,
                      arr[i].last_offset, arr[i].max_timestamp, arr[i].crc_state)
        return out, pos, st
    finally:
        free(arr)


cdef enum:
    BY_LAST_OFFSET = 0
    BY_MAX_TIMESTAMP = 1


cdef tuple _first_entry_at_or_above(const unsigned char[::1] buf, Py_ssize_t start, Py_ssize_t end, int by,
                                    int64_t target):
    """Walk from ``start`` to the first entry whose last offset (``by`` BY_LAST_OFFSET) or max
    timestamp (BY_MAX_TIMESTAMP) is >= ``target``.

    Returns:
        ``(ST_OK, position, size, value)`` there, or ``(stop status, stop position, 0, -1)``.

    Raises:
        ValueError: bad range.
    """
    _check_range(buf.shape[0], start, end)
    cdef const unsigned char* b = _ptr(buf)
    cdef Py_ssize_t pos = start
    cdef int st
    cdef khdr h
    with nogil:
        while True:
            st = _step(b, pos, end, &h)
            if st != ST_OK:
                break
            if (h.last_offset if by == BY_LAST_OFFSET else h.max_timestamp) >= target:
                break
            pos += h.size
    if st != ST_OK:
        return st, pos, 0, -1
    return st, pos, h.size, (h.last_offset if by == BY_LAST_OFFSET else h.max_timestamp)


def find_offset(const unsigned char[::1] buf, Py_ssize_t start, Py_ssize_t end, long long target):
    """The first entry whose last offset >= ``target`` (``FileRecords.searchForOffsetWithSize``).

    Returns:
        ``(status, position, size, last_offset)``.

    Raises:
        ValueError: bad range. OverflowError: ``target`` outside int64.
    """
    return _first_entry_at_or_above(buf, start, end, BY_LAST_OFFSET, target)


def find_timestamp(const unsigned char[::1] buf, Py_ssize_t start, Py_ssize_t end, long long target):
    """The first entry whose max timestamp >= ``target``.

    Returns:
        ``(status, position, size)``.

    Raises:
        ValueError: bad range. OverflowError: ``target`` outside int64.
    """
    return _first_entry_at_or_above(buf, start, end, BY_MAX_TIMESTAMP, target)[:3]


# ---------------------------------------------------------------------------------------------------
# v2 records: a cursor (pointer + end) advanced by inline readers returning 0 or an error code.
# ---------------------------------------------------------------------------------------------------

ctypedef struct kcur:
    const unsigned char* p
    const unsigned char* e

cdef enum:
    RD_OK = 0
    RD_UNDERFLOW = 1
    RD_TOO_LONG = 2


cdef inline int _rd_leb128(kcur* c, int max_shift, uint64_t* out) noexcept nogil:
    """ByteUtils' LEB128 loop: the raw (still zig-zagged) value, RD_TOO_LONG once a continuation byte
    takes the shift past ``max_shift`` (28 for a varint, 63 for a varlong)."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef uint64_t b
    while True:
        if c.p >= c.e:
            return RD_UNDERFLOW
        b = c.p[0]
        c.p += 1
        if (b & 0x80) == 0:
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if shift > max_shift:
            return RD_TOO_LONG
    out[0] = value | (b << shift)
    return RD_OK


cdef object _structure(Py_ssize_t rec, str what):
    return CorruptionError(f"Found invalid record structure: {what}", rec)


cdef int _raise_bad_varint(int rc, str kind, Py_ssize_t rec) except -1:
    if rc == RD_UNDERFLOW:
        raise _structure(rec, f"{kind} runs past the end of the record")
    raise _structure(rec, f"{kind} is too long")


cdef int _vi(kcur* c, int32_t* out, Py_ssize_t rec) except -1:
    """ByteUtils.readVarint: at most 5 bytes, zig-zag decoded with 32-bit wrap-around."""
    cdef uint64_t raw
    cdef uint32_t v
    cdef int rc = _rd_leb128(c, 28, &raw)
    if rc != RD_OK:
        return _raise_bad_varint(rc, "varint", rec)
    v = <uint32_t>raw
    out[0] = <int32_t>((v >> 1) ^ (<uint32_t>0 - (v & 1)))
    return 0


cdef int _vl(kcur* c, int64_t* out, Py_ssize_t rec) except -1:
    """ByteUtils.readVarlong: at most 10 bytes, zig-zag decoded with 64-bit wrap-around."""
    cdef uint64_t v
    cdef int rc = _rd_leb128(c, 63, &v)
    if rc != RD_OK:
        return _raise_bad_varint(rc, "varlong", rec)
    out[0] = <int64_t>((v >> 1) ^ (<uint64_t>0 - (v & 1)))
    return 0


cdef bytes _take(kcur* c, int32_t n, Py_ssize_t rec):
    if n > c.e - c.p:
        raise _structure(rec, f"a {n}-byte field runs past the end of the record")
    cdef bytes out = PyBytes_FromStringAndSize(<const char*>c.p, n)
    c.p += n
    return out


def parse_records(const unsigned char[::1] buf, Py_ssize_t start, Py_ssize_t end, long long count):
    """Parse ``count`` v2 records (``DefaultRecord.readFrom``) filling exactly ``[start, end)``.

    Returns:
        One tuple per record: ``(size_in_bytes, attributes, timestamp_delta, offset_delta, key, value,
        headers)``.

    Raises:
        ValueError: bad range. RecordSizeError / CorruptionError: malformed records.
    """
    _check_range(buf.shape[0], start, end)
    if count < 0:
        raise CorruptionError(f"Found invalid record count {count}", start)
    cdef const unsigned char* b = _ptr(buf)
    cdef kcur c
    cdef kcur body
    cdef Py_ssize_t rec, remaining
    cdef int32_t size, off_delta, n, n_headers, h
    cdef int64_t ts_delta = 0  # always set by _vl; gcc cannot see that through its error path
    cdef int attributes
    cdef long long i
    c.p = b + start
    c.e = b + end
    out = []
    for i in range(count):
        rec = c.p - b
        _vi(&c, &size, rec)
        remaining = c.e - c.p
        if size < 0 or size > remaining:
            raise RecordSizeError(
                f"Invalid record size: expected {size} bytes in record payload, but instead the buffer "
                f"has only {remaining} remaining bytes",
                rec,
            )
        body.p = c.p
        body.e = c.p + size
        if body.p >= body.e:
            raise _structure(rec, "record attributes run past the end of the record")
        attributes = body.p[0]
        body.p += 1
        _vl(&body, &ts_delta, rec)
        _vi(&body, &off_delta, rec)
        _vi(&body, &n, rec)
        key = _take(&body, n, rec) if n >= 0 else None
        _vi(&body, &n, rec)
        value = _take(&body, n, rec) if n >= 0 else None
        _vi(&body, &n_headers, rec)
        if n_headers < 0:
            raise CorruptionError(f"Found invalid number of record headers {n_headers}", rec)
        headers = []
        for h in range(n_headers):
            _vi(&body, &n, rec)
            if n < 0:
                raise CorruptionError(f"Invalid negative header key size {n}", rec)
            hkey = _take(&body, n, rec)
            _vi(&body, &n, rec)
            hval = _take(&body, n, rec) if n >= 0 else None
            headers.append((hkey, hval))
        if body.p != body.e:
            raise RecordSizeError(
                f"Invalid record size: expected to read {size} bytes in record payload, but instead "
                f"read {body.p - c.p}",
                rec,
            )
        c.p = body.e
        out.append(((c.p - b) - rec, attributes, ts_delta, off_delta, key, value, tuple(headers)))
    if c.p != c.e:
        raise RecordSizeError("Incorrect declared batch size, records still remaining in file", c.p - b)
    return out
