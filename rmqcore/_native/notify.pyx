# cython: language_level=3
"""Publication words of a live store: native twin of ``rmqcore._pure.notify`` (see it for the
contract, ``csrc/rmq_notify.h`` for the memory ordering). Bounds and alignment are checked once per
call; the buffer is exported for the call only; ``wait`` sleeps without the GIL (futex on Linux)."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint32_t, uintptr_t

__all__ = [
    "TIMEOUT", "CHANGED", "CANCELLED", "UNIT_SIZE", "publish_units", "units_end", "seq", "bump", "bump_all",
    "wake", "wait", "poke", "waits_add", "load64", "store64", "load32", "store32", "wait_reach",
    "REACH_BACKOFF",
]

cdef extern from "rmq_notify.h" nogil:
    int RMQ_NOTIFY_TIMEOUT
    int RMQ_NOTIFY_CHANGED
    int RMQ_NOTIFY_CANCELLED
    int RMQ_REACH_BACKOFF
    void rmq_cq_publish_unit(unsigned char *u, int64_t phys, int32_t size, int64_t tags)
    int32_t rmq_cq_unit_size(const unsigned char *u)
    uint32_t rmq_notify_seq(const unsigned char *slot)
    uint32_t rmq_notify_bump(unsigned char *slot)
    void rmq_notify_poke(unsigned char *slot)
    uint32_t rmq_notify_waits_add(uint32_t *waits, int delta)
    void rmq_futex_wake_all(uint32_t *word)
    int rmq_notify_wait_spin(unsigned char *slot, uint32_t expected, int64_t ns, const int64_t *cancel,
                             int flag, int64_t slice_ns, int64_t spin_ns)
    int rmq_notify_wait_reach(const int64_t *word, int64_t target, int64_t ns, const int64_t *cancel,
                              int64_t poll_ns)
    uint32_t rmq_notify_load32(const void *p)
    int64_t rmq_notify_load64(const void *p)
    void rmq_notify_store32(void *p, uint32_t v)
    void rmq_notify_store64(void *p, int64_t v)
    int64_t rmq_load_be64s(const void *p)

TIMEOUT = RMQ_NOTIFY_TIMEOUT
CHANGED = RMQ_NOTIFY_CHANGED
CANCELLED = RMQ_NOTIFY_CANCELLED
REACH_BACKOFF = RMQ_REACH_BACKOFF
UNIT_SIZE = 20


cdef inline int _word(object buf, Py_buffer *v, Py_ssize_t pos, Py_ssize_t width, Py_ssize_t align,
                      bint writable) except -1:
    """Export ``buf`` into ``v`` (released by the caller) and check a ``width``-byte word at ``pos``."""
    PyObject_GetBuffer(buf, v, PyBUF_SIMPLE)
    if writable and v.readonly:
        PyBuffer_Release(v)
        raise ValueError("the buffer is read-only")
    if pos < 0 or pos + width > v.len or pos % 4 or (<uintptr_t>v.buf) % 4:
        PyBuffer_Release(v)
        raise ValueError(f"a {width}-byte word at {pos} is outside a buffer of {v.len} bytes or misaligned")
    if align == 8 and (pos % 8 or (<uintptr_t>v.buf) % 8):
        PyBuffer_Release(v)
        raise ValueError(f"an 8-byte word at {pos} is misaligned")
    return 0


# -- consume-queue units ------------------------------------------------------------------------------
def publish_units(buf, Py_ssize_t pos, units):
    """See the pure twin."""
    cdef Py_buffer dv, sv
    cdef Py_ssize_t n, p
    cdef const unsigned char *s
    cdef unsigned char *d
    PyObject_GetBuffer(units, &sv, PyBUF_SIMPLE)
    try:
        PyObject_GetBuffer(buf, &dv, PyBUF_SIMPLE)
        try:
            if dv.readonly:
                raise ValueError("the buffer is read-only")
            n = sv.len
            if n % 20 or pos < 0 or pos % 4 or pos + n > dv.len:
                raise ValueError(f"{n} bytes of units at {pos} do not fit a buffer of {dv.len} bytes as whole units")
            s = <const unsigned char *>sv.buf
            d = <unsigned char *>dv.buf + pos
            with nogil:
                p = 0
                while p < n:
                    rmq_cq_publish_unit(d + p, rmq_load_be64s(s + p), <int32_t>(
                        (<uint32_t>s[p + 8] << 24) | (<uint32_t>s[p + 9] << 16) | (<uint32_t>s[p + 10] << 8)
                        | <uint32_t>s[p + 11]), rmq_load_be64s(s + p + 12))
                    p += 20
            return pos + n
        finally:
            PyBuffer_Release(&dv)
    finally:
        PyBuffer_Release(&sv)


def units_end(buf, Py_ssize_t pos, Py_ssize_t stop):
    """See the pure twin."""
    cdef Py_buffer v
    cdef const unsigned char *b
    PyObject_GetBuffer(buf, &v, PyBUF_SIMPLE)
    try:
        if pos < 0 or pos % 4 or stop > v.len or stop < pos or (<uintptr_t>v.buf) % 4:
            raise ValueError(f"units [{pos}, {stop}) outside a buffer of {v.len} bytes or misaligned")
        b = <const unsigned char *>v.buf
        with nogil:
            while pos + 20 <= stop and rmq_cq_unit_size(b + pos) != 0:
                pos += 20
        return pos
    finally:
        PyBuffer_Release(&v)


# -- header words (host byte order) and wake slots: one word, checked once --------------------------------
cdef enum _Op:
    _LOAD32, _LOAD64, _STORE32, _STORE64, _SEQ, _BUMP, _WAKE, _POKE, _WAITS_ADD


cdef object _on_word(object buf, Py_ssize_t pos, _Op op, int64_t value=0):
    """Do ``op`` on the word at ``pos`` of ``buf`` (exported for this call only); its result, or None."""
    cdef Py_buffer v
    cdef int64_t r = 0
    cdef char *p
    cdef bint wide = op in (_LOAD64, _STORE64, _BUMP, _POKE)  # a bump swaps a slot's two words at once
    _word(buf, &v, pos, 8 if wide else 4, 8 if wide else 4,
          op in (_STORE32, _STORE64, _BUMP, _POKE, _WAITS_ADD))
    try:
        p = <char *>v.buf + pos
        if op == _LOAD32:
            r = rmq_notify_load32(p)
        elif op == _LOAD64:
            r = rmq_notify_load64(p)
        elif op == _SEQ:
            r = rmq_notify_seq(<const unsigned char *>p)
        elif op == _STORE32:
            rmq_notify_store32(p, <uint32_t>(value & 0xFFFFFFFF))
            return None
        elif op == _STORE64:
            rmq_notify_store64(p, value)
            return None
        elif op == _BUMP:
            with nogil:
                r = rmq_notify_bump(<unsigned char *>p)
        elif op == _POKE:
            with nogil:
                rmq_notify_poke(<unsigned char *>p)
            return None
        elif op == _WAITS_ADD:
            r = rmq_notify_waits_add(<uint32_t *>p, -1 if value < 0 else 1)
        else:
            with nogil:
                rmq_futex_wake_all(<uint32_t *>p)
            return None
        return r
    finally:
        PyBuffer_Release(&v)


def load64(buf, Py_ssize_t pos):
    """See the pure twin."""
    return _on_word(buf, pos, _LOAD64)


def store64(buf, Py_ssize_t pos, int64_t value):
    """See the pure twin."""
    _on_word(buf, pos, _STORE64, value)


def load32(buf, Py_ssize_t pos):
    """See the pure twin."""
    return _on_word(buf, pos, _LOAD32)


def store32(buf, Py_ssize_t pos, value):
    """See the pure twin."""
    _on_word(buf, pos, _STORE32, <int64_t>(value & 0xFFFFFFFF))


def seq(buf, Py_ssize_t pos):
    """See the pure twin."""
    return _on_word(buf, pos, _SEQ)


def bump(buf, Py_ssize_t pos):
    """See the pure twin."""
    return _on_word(buf, pos, _BUMP)


def bump_all(buf, Py_ssize_t pos, Py_ssize_t count, Py_ssize_t waits_pos=-1):
    """See the pure twin (each slot bumped as ``bump`` does; ``waits_pos`` plays no part here)."""
    cdef Py_buffer v
    cdef Py_ssize_t i
    cdef unsigned char *b
    if not 0 <= count <= (<Py_ssize_t>1 << 40):
        raise ValueError(f"count {count} outside [0, 2**40]")
    _word(buf, &v, pos, 8 * count, 8, True)
    try:
        b = <unsigned char *>v.buf + pos
        with nogil:
            for i in range(count):
                rmq_notify_bump(b + 8 * i)
    finally:
        PyBuffer_Release(&v)


def wake(buf, Py_ssize_t pos):
    """See the pure twin."""
    _on_word(buf, pos, _WAKE)


def poke(buf, Py_ssize_t pos):
    """See the pure twin."""
    _on_word(buf, pos, _POKE)


def waits_add(buf, Py_ssize_t pos, int delta):
    """See the pure twin."""
    if delta not in (1, -1):
        raise ValueError(f"delta {delta}: +1 or -1")
    return _on_word(buf, pos, _WAITS_ADD, delta)


cdef bint _cancel_word(object cancel, Py_buffer *cv) except -1:
    """Export ``cancel`` (an int64[1], or None: False) into ``cv``, released by the caller when True."""
    if cancel is None:
        return False
    PyObject_GetBuffer(cancel, cv, PyBUF_SIMPLE)
    if cv.len != 8 or (<uintptr_t>cv.buf) % 8:
        PyBuffer_Release(cv)
        raise ValueError("cancel must be an int64[1]")
    return True


def wait(buf, Py_ssize_t pos, expected, double timeout, cancel=None, bint flag=True, double slice_s=0.0,
         double spin_s=0.0):
    """See the pure twin. ``spin_s``: first spin (GIL released) up to this long on the slot, then sleep
    (``rmq_notify_wait_spin``)."""
    cdef Py_buffer v, cv
    cdef bint has_cancel = False
    cdef int r
    cdef uint32_t exp = <uint32_t>(expected & 0xFFFFFFFF)
    cdef int64_t ns = -1 if timeout < 0 else <int64_t>(min(timeout, 1e9) * 1e9)
    cdef int64_t slice_ns = <int64_t>(min(slice_s, 1e9) * 1e9) if slice_s > 0 else 0
    cdef int64_t spin_ns = <int64_t>(min(spin_s, 1.0) * 1e9) if spin_s > 0 else 0
    _word(buf, &v, pos, 8, 4, flag)
    try:
        has_cancel = _cancel_word(cancel, &cv)
        with nogil:
            r = rmq_notify_wait_spin(<unsigned char *>v.buf + pos, exp, ns,
                                     <const int64_t *>cv.buf if has_cancel else NULL, flag, slice_ns, spin_ns)
        return r
    finally:
        if has_cancel:
            PyBuffer_Release(&cv)
        PyBuffer_Release(&v)


def wait_reach(buf, Py_ssize_t pos, int64_t target, double timeout, cancel=None, double poll_s=0.002):
    """See the pure twin (``rmq_notify_wait_reach``: polled without the GIL)."""
    cdef Py_buffer v, cv
    cdef bint has_cancel = False
    cdef int r
    cdef int64_t ns = -1 if timeout < 0 else <int64_t>(min(timeout, 1e9) * 1e9)
    cdef int64_t poll_ns = <int64_t>(min(max(poll_s, 1e-6), 1.0) * 1e9)
    _word(buf, &v, pos, 8, 8, False)
    try:
        has_cancel = _cancel_word(cancel, &cv)
        with nogil:
            r = rmq_notify_wait_reach(<const int64_t *>(<unsigned char *>v.buf + pos), target, ns,
                                      <const int64_t *>cv.buf if has_cancel else NULL, poll_ns)
        return r
    finally:
        if has_cancel:
            PyBuffer_Release(&cv)
        PyBuffer_Release(&v)
