# cython: language_level=3
"""Fixed-entry big-endian index search: Kafka's ``AbstractIndex.indexSlotRangeFor`` over a buffer.

Native twin of :mod:`rmqcore._pure.sparse`; see it for the contract. Geometry is checked once at
entry (``n_entries * entry_size <= len(buf)``); the search then reads raw pointers without the GIL,
so a lookup that page-faults on a cold mapped page does not stall other threads.
"""
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

# the surface is the reference twin's (tests/test_kernels.py checks that this one has all of it)
from rmqcore._pure.sparse import __all__

from rmqcore.kafka_layout import LARGEST_LOWER_BOUND, SMALLEST_UPPER_BOUND, WARM_SECTION_BYTES

# the search below takes mode 0 / 1 (checked once at import; a mismatch is a build bug)
if (LARGEST_LOWER_BOUND, SMALLEST_UPPER_BOUND) != (0, 1):
    raise ImportError("rmqcore/_native/sparse.pyx disagrees with rmqcore/kafka_layout.py")


cdef inline int64_t _rd_field(const unsigned char* p, int width) noexcept nogil:
    cdef uint32_t hi32
    if width == 4:
        return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
                         | (<uint32_t>p[2] << 8) | <uint32_t>p[3])
    hi32 = (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]
    return <int64_t>((<uint64_t>hi32 << 32) | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16)
                     | (<uint64_t>p[6] << 8) | <uint64_t>p[7])


cdef Py_ssize_t _search(const unsigned char* base, Py_ssize_t n, Py_ssize_t esize, int width,
                        int64_t target, int mode, Py_ssize_t warm) noexcept nogil:
    cdef Py_ssize_t first_hot = n - 1 - warm
    cdef Py_ssize_t lo, hi, mid
    cdef int64_t found
    if first_hot < 0:
        first_hot = 0
    if _rd_field(base + first_hot * esize, width) < target:
        lo = first_hot
        hi = n - 1
    elif _rd_field(base, width) > target:
        return -1 if mode == 0 else 0
    else:
        lo = 0
        hi = first_hot
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        found = _rd_field(base + mid * esize, width)
        if found > target:
            hi = mid - 1
        elif found < target:
            lo = mid
        else:
            return mid
    if mode == 0:
        return lo
    return -1 if lo == n - 1 else lo + 1


cdef int _geometry(Py_ssize_t nbytes, Py_ssize_t n_entries, Py_ssize_t entry_size,
                   Py_ssize_t field_pos, int field_width) except -1:
    if entry_size <= 0:
        raise ValueError(f"entry_size must be positive, not {entry_size}")
    if field_width != 4 and field_width != 8:
        raise ValueError(f"field_width must be 4 or 8, not {field_width}")
    if field_pos < 0 or field_pos + field_width > entry_size:
        raise ValueError(f"field [{field_pos}, {field_pos + field_width}) outside a {entry_size}-byte entry")
    if n_entries < 0:
        raise ValueError(f"n_entries must be >= 0, not {n_entries}")
    # n_entries * entry_size without overflow: compare by division
    if n_entries > nbytes // entry_size:
        raise ValueError(
            f"{n_entries} entries of {entry_size} bytes need {n_entries * entry_size} bytes, "
            f"buffer has {nbytes}"
        )
    return 0


def index_field(const unsigned char[::1] buf, Py_ssize_t n_entries, Py_ssize_t entry_size,
                Py_ssize_t field_pos, int field_width, Py_ssize_t slot):
    """Return the signed field of entry ``slot`` (bounds-checked).

    Raises:
        ValueError: bad geometry, or ``slot`` not in ``[0, n_entries)``.
    """
    _geometry(buf.shape[0], n_entries, entry_size, field_pos, field_width)
    if slot < 0 or slot >= n_entries:
        raise ValueError(f"slot {slot} outside [0, {n_entries})")
    return _rd_field(&buf[0] + slot * entry_size + field_pos, field_width)


def index_search(const unsigned char[::1] buf, Py_ssize_t n_entries, Py_ssize_t entry_size,
                 Py_ssize_t field_pos, int field_width, long long target, int mode,
                 Py_ssize_t warm_entries):
    """Kafka's largest-lower-bound / smallest-upper-bound slot for ``target``; -1 when there is none.

    Raises:
        ValueError: bad geometry, mode or warm_entries.
        OverflowError: ``target`` outside the signed 64-bit range.
    """
    cdef Py_ssize_t result
    cdef const unsigned char* base
    _geometry(buf.shape[0], n_entries, entry_size, field_pos, field_width)
    if mode != 0 and mode != 1:
        raise ValueError(f"mode must be 0 (largest lower bound) or 1 (smallest upper bound), not {mode}")
    if warm_entries < 0:
        raise ValueError(f"warm_entries must be >= 0, not {warm_entries}")
    if n_entries == 0:
        return -1
    base = &buf[0]
    with nogil:
        result = _search(base + field_pos, n_entries, entry_size, field_width, target, mode, warm_entries)
    return result
