# cython: language_level=3
"""Arrow column builders over decoded CommitLog records, native twin of ``rmqcore._pure.arrowcols``.

Every function takes ``data`` (any contiguous byte buffer: bytes, mmap, uint8 array) and record
columns as produced by ``codec.decode_batch`` (any integer sequences; converted to contiguous int64
arrays), and returns numpy arrays laid out as Arrow wants them: int32 offsets (the first 0) and
uint8 values. Strings are UTF-8 as ``bytes.decode("utf-8", "replace")`` makes them. The byte work is
``csrc/rmq_arrow.c``, run without the GIL after one bounds check of every input range here; no
pointer into the inputs outlives a call.

Outputs are allocated by ``empty(n, dtype)`` when given (e.g. from Arrow's memory pool, which
keeps freed pages, where numpy's large allocations are fresh mappings faulted in page by page),
else by ``numpy.empty``; they must be writable contiguous arrays of that shape and dtype.

Raises ValueError when a range lies outside ``data``, the columns differ in length, or an output
would not fit int32 offsets.
"""
import numpy as np

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

__all__ = ["gather", "gather_utf8", "format_hosts", "message_ids", "split_properties"]

cdef extern from "rmq_arrow.h" nogil:
    int RMQ_HOST_MAX
    int RMQ_MSGID_MAX
    ctypedef struct rmq_props_sizes:
        int64_t entries, key_bytes, value_bytes, tag_bytes, tokens, token_bytes
    ctypedef struct rmq_props_out:
        int32_t *map_offsets
        int32_t *key_offsets
        unsigned char *key_data
        int32_t *value_offsets
        unsigned char *value_data
        int32_t *tag_offsets
        unsigned char *tag_data
        unsigned char *tag_valid
        int32_t *keys_offsets
        int32_t *token_offsets
        unsigned char *token_data
    void rmq_gather(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n,
                    int32_t *offsets, unsigned char *out)
    int64_t rmq_gather_utf8_size(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n)
    void rmq_gather_utf8(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n,
                         int32_t *offsets, unsigned char *out)
    int64_t rmq_format_hosts(const unsigned char *data, const int64_t *pos, const int64_t *port,
                             const int64_t *sys_flag, int64_t v6_bit, int64_t n, int32_t *offsets,
                             unsigned char *out)
    int64_t rmq_message_ids(const unsigned char *data, const int64_t *pos, const int64_t *port,
                            const int64_t *sys_flag, int64_t v6_bit, const int64_t *offset, int64_t n,
                            int32_t *offsets, unsigned char *out)
    int rmq_ranges_ascii(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n)
    void rmq_props_fill(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n,
                        int all_ascii, int64_t *scratch, rmq_props_out *out, rmq_props_sizes *sz)

cdef int64_t I32_MAX = 2147483647


def _new(empty, n, dtype):
    """An output array: ``empty(n, dtype)`` (the caller's allocator) or numpy's."""
    if empty is None:
        return np.empty(n, dtype=dtype)
    a = empty(n, dtype)
    if a.dtype != dtype or a.shape != (n,):
        raise ValueError(f"empty({n}, {dtype}) returned {a.dtype} {a.shape}")
    m = memoryview(a)  # what the kernels write through, whatever its attributes say
    if (m.ndim != 1 or m.shape[0] != n or m.itemsize != np.dtype(dtype).itemsize or not m.c_contiguous
            or m.readonly):
        raise ValueError(f"empty({n}, {dtype}) returned a buffer of shape {m.shape}")
    return a
cdef unsigned char _EMPTY = 0
cdef int64_t _ZERO64 = 0


cdef inline const unsigned char *_base(const unsigned char[::1] data):
    return &data[0] if data.shape[0] > 0 else &_EMPTY


def _col(a, int64_t n, str name):
    c = np.ascontiguousarray(a, dtype=np.int64)
    if c.ndim != 1 or c.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D integer column of {n} values")
    return c


cdef int64_t _check_ranges(const int64_t[::1] pos, const int64_t[::1] ln, int64_t size, int64_t *longest) except -1:
    """Every [pos, pos + len) inside [0, size): the total length (and the longest in *longest)."""
    cdef int64_t i, p, l, total = 0, mx = 0, n = pos.shape[0], bad = -1
    with nogil:
        for i in range(n):
            p = pos[i]
            l = ln[i]
            if p < 0 or l < 0 or p > size or l > size - p:
                bad = i
                break
            total += l
            if l > mx:
                mx = l
    if bad >= 0:
        raise ValueError(f"range {bad} [{pos[bad]}, +{ln[bad]}) lies outside data of {size} bytes")
    longest[0] = mx
    return total


cdef int _check_hosts(const int64_t[::1] pos, const int64_t[::1] flags, int64_t v6_bit, int64_t size) except -1:
    cdef int64_t i, p, w, n = pos.shape[0], bad = -1
    with nogil:
        for i in range(n):
            p = pos[i]
            w = 16 if flags[i] & v6_bit else 4
            if p < 0 or p > size - w:
                bad = i
                break
    if bad >= 0:
        raise ValueError(f"host address {bad} at {pos[bad]} lies outside data of {size} bytes")
    return 0


cdef _fits(int64_t total, str what):
    if total > I32_MAX:
        raise ValueError(f"{what}: {total} bytes do not fit Arrow int32 offsets")


cdef tuple _gather(const unsigned char[::1] data, pos, length, empty, bint utf8):
    """``(offsets, values)`` of the slices ``data[pos[i]:pos[i] + length[i]]`` concatenated: as raw
    bytes, or (``utf8``) each decoded as ``bytes.decode("utf-8", "replace")`` and re-encoded, which
    is a plain copy when every slice is ASCII."""
    n = len(pos)
    cdef const int64_t[::1] p = _col(pos, n, "pos")
    cdef const int64_t[::1] l = _col(length, n, "length")
    cdef int64_t longest
    cdef int64_t total = _check_ranges(p, l, data.shape[0], &longest)
    cdef const unsigned char *base = _base(data)
    cdef const int64_t *pp = &p[0] if n > 0 else &_ZERO64
    cdef const int64_t *lp = &l[0] if n > 0 else &_ZERO64
    cdef int64_t nn = n
    cdef int ascii = 1
    if utf8:
        with nogil:
            ascii = rmq_ranges_ascii(base, pp, lp, nn)
            if not ascii:
                total = rmq_gather_utf8_size(base, pp, lp, nn)
    _fits(total, "gather_utf8" if utf8 else "gather")
    offsets = _new(empty, n + 1, np.int32)
    values = _new(empty, total, np.uint8)
    cdef int32_t[::1] ov = offsets
    cdef unsigned char[::1] vv = values
    cdef unsigned char *vp = &vv[0] if total > 0 else &_EMPTY
    with nogil:
        if ascii:
            rmq_gather(base, pp, lp, nn, &ov[0], vp)
        else:
            rmq_gather_utf8(base, pp, lp, nn, &ov[0], vp)
    return offsets, values


def gather(const unsigned char[::1] data not None, pos, length, empty=None):
    """``(offsets, values)``: the slices ``data[pos[i]:pos[i] + length[i]]`` concatenated (raw bytes)."""
    return _gather(data, pos, length, empty, False)


def gather_utf8(const unsigned char[::1] data not None, pos, length, empty=None):
    """As ``gather``, each slice decoded as ``bytes.decode("utf-8", "replace")`` and re-encoded."""
    return _gather(data, pos, length, empty, True)


cdef tuple _address_strings(const unsigned char[::1] data, pos, port, sys_flag, v6_bit, bint ids, offset,
                           empty):
    """One string per row from the row's address (the 16 bytes at ``pos[i]`` when ``sys_flag[i] &
    v6_bit``, else the 4 bytes there) and port: ``message_ids`` (with ``offset``; ports must be
    int32s) when ``ids``, else ``format_hosts``."""
    n = len(pos)
    cdef const int64_t[::1] p = _col(pos, n, "pos")
    cdef const int64_t[::1] pt = _col(port, n, "port")
    cdef const int64_t[::1] fl = _col(sys_flag, n, "sys_flag")
    cdef const int64_t[::1] of = None
    cdef int64_t bit = v6_bit, used, i
    if ids:
        of = _col(offset, n, "offset")
    _check_hosts(p, fl, bit, data.shape[0])
    if ids:
        for i in range(n):
            if pt[i] < -2147483648 or pt[i] > 2147483647:
                raise ValueError(f"port {pt[i]} of row {i} is not an int32")
    cdef int64_t longest = RMQ_MSGID_MAX if ids else RMQ_HOST_MAX
    _fits(n * longest, "message_ids" if ids else "format_hosts")
    offsets = _new(empty, n + 1, np.int32)
    values = _new(empty, max(1, n * longest), np.uint8)
    cdef int32_t[::1] ov = offsets
    cdef unsigned char[::1] vv = values
    cdef const unsigned char *base = _base(data)
    cdef int64_t nn = n
    if n == 0:
        offsets[0] = 0
        return offsets, values[:0]
    with nogil:
        if ids:
            used = rmq_message_ids(base, &p[0], &pt[0], &fl[0], bit, &of[0], nn, &ov[0], &vv[0])
        else:
            used = rmq_format_hosts(base, &p[0], &pt[0], &fl[0], bit, nn, &ov[0], &vv[0])
    return offsets, values[:used]


def format_hosts(const unsigned char[::1] data not None, pos, port, sys_flag, v6_bit, empty=None):
    """``(offsets, values)`` of ``wire.format_host(address, port[i])``, the address being the 16
    bytes at ``pos[i]`` when ``sys_flag[i] & v6_bit``, else the 4 bytes there."""
    return _address_strings(data, pos, port, sys_flag, v6_bit, False, None, empty)


def message_ids(const unsigned char[::1] data not None, pos, port, sys_flag, v6_bit, offset, empty=None):
    """``(offsets, values)`` of ``message.create_message_id(address, port[i], offset[i])`` (address
    as in ``format_hosts``)."""
    return _address_strings(data, pos, port, sys_flag, v6_bit, True, offset, empty)


def split_properties(const unsigned char[::1] data not None, pos, length, empty=None):
    """The properties strings ``data[pos[i]:pos[i] + length[i]]`` as Arrow columns.

    The columns returned are ``rmqcore._pure.arrowcols.split_properties``'s (its docstring lists them).
    """
    n = len(pos)
    cdef const int64_t[::1] p = _col(pos, n, "pos")
    cdef const int64_t[::1] l = _col(length, n, "length")
    cdef int64_t longest, cap, ecap
    cdef int64_t total = _check_ranges(p, l, data.shape[0], &longest)
    cdef const unsigned char *base = _base(data)
    cdef const int64_t *pp = &p[0] if n > 0 else &_ZERO64
    cdef const int64_t *lp = &l[0] if n > 0 else &_ZERO64
    cdef int64_t nn = n
    cdef int ascii
    cdef rmq_props_sizes sz
    cdef rmq_props_out out
    # worst cases: replacement triples bytes; an entry or token takes at least two bytes (an Arrow
    # pool or numpy allocation is not touched beyond what is written; records are checked for
    # ASCII one by one as they are split)
    ascii = 0
    cap = 3 * total
    ecap = total // 2 + n
    _fits(cap, "properties")
    _fits(ecap, "map entries")
    map_offsets = _new(empty, n + 1, np.int32)
    key_offsets = _new(empty, ecap + 1, np.int32)
    key_data = _new(empty, cap, np.uint8)
    value_offsets = _new(empty, ecap + 1, np.int32)
    value_data = _new(empty, cap, np.uint8)
    tag_offsets = _new(empty, n + 1, np.int32)
    tag_data = _new(empty, cap, np.uint8)
    tag_valid = _new(empty, n, np.uint8)
    keys_offsets = _new(empty, n + 1, np.int32)
    token_offsets = _new(empty, ecap + 1, np.int32)
    token_data = _new(empty, cap, np.uint8)
    out.map_offsets = _i32(map_offsets)
    out.key_offsets = _i32(key_offsets)
    out.key_data = _u8(key_data)
    out.value_offsets = _i32(value_offsets)
    out.value_data = _u8(value_data)
    out.tag_offsets = _i32(tag_offsets)
    out.tag_data = _u8(tag_data)
    out.tag_valid = _u8(tag_valid)
    out.keys_offsets = _i32(keys_offsets)
    out.token_offsets = _i32(token_offsets)
    out.token_data = _u8(token_data)
    cdef int64_t *scratch = <int64_t *>malloc(sizeof(int64_t) * 4 * (longest // 2 + 2))
    if scratch == NULL:
        raise MemoryError()
    with nogil:
        rmq_props_fill(base, pp, lp, nn, ascii, scratch, &out, &sz)
    free(scratch)
    return (map_offsets, key_offsets[:sz.entries + 1], key_data[:sz.key_bytes],
            value_offsets[:sz.entries + 1], value_data[:sz.value_bytes], tag_offsets, tag_data[:sz.tag_bytes],
            tag_valid, keys_offsets, token_offsets[:sz.tokens + 1], token_data[:sz.token_bytes])


cdef int32_t *_i32(object a) except NULL:
    cdef int32_t[::1] v = a
    return &v[0]


cdef unsigned char *_u8(object a) except NULL:
    cdef unsigned char[::1] v = a
    return &v[0] if v.shape[0] > 0 else &_EMPTY
