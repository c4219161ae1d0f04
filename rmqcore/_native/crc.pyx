"""CRC-32 / CRC-32C kernel, native twin of :mod:`rmqcore._pure.crc` (same API and results).

The C kernels (csrc/rmq_crc32.c) pick the fastest instructions the CPU has once per process
(VPCLMULQDQ/PCLMULQDQ folding for CRC-32, SSE4.2 crc32 for CRC-32C on x86-64, the ARMv8 CRC32
instructions on aarch64, slice-by-8 tables elsewhere); ``IMPL_NAME`` says which. ``data`` is any
C-contiguous buffer, read-only ones included; the GIL is released for buffers of 4 KiB and more.
"""
from libc.stdint cimport uint32_t
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsUnsignedLongLongMask
from cpython.object cimport PyObject
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

cdef extern from "Python.h":
    Py_ssize_t PyNumber_AsSsize_t(object o, PyObject *exc) except? -1

__all__ = ["IMPL_NAME", "body_crc", "crc32", "crc32_range", "crc32c", "crc32c_range"]

cdef enum:
    NOGIL_MIN = 4096  # below this, taking and retaking the GIL costs more than it frees


cdef inline uint32_t _run(bint castagnoli, const unsigned char *p, size_t n, uint32_t v) noexcept nogil:
    if castagnoli:
        return rmq_crc32c(v, p, n)
    return rmq_crc32(v, p, n)


cdef inline uint32_t _compute(bint castagnoli, const unsigned char *p, size_t n, uint32_t v) noexcept:
    cdef uint32_t r
    if n >= NOGIL_MIN:
        with nogil:
            r = _run(castagnoli, p, n, v)
        return r
    return _run(castagnoli, p, n, v)


cdef inline uint32_t _value(object value) except? 0xFFFFFFFF:
    # like zlib's "unsigned int(bitwise=True)": any int (or __index__) taken modulo 2**32
    return <uint32_t>PyLong_AsUnsignedLongLongMask(value)


cdef object _crc(bint castagnoli, object data, object value):
    cdef Py_buffer view
    cdef uint32_t v, r
    if type(data) is bytes:
        v = _value(value)
        return _compute(castagnoli, <const unsigned char *>PyBytes_AS_STRING(data),
                        <size_t>PyBytes_GET_SIZE(data), v)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        v = _value(value)
        r = _compute(castagnoli, <const unsigned char *>view.buf, <size_t>view.len, v)
    finally:
        PyBuffer_Release(&view)
    return r


cdef object _crc_range(bint castagnoli, object data, object start, object end):
    cdef Py_buffer view
    cdef Py_ssize_t s, e
    cdef uint32_t r
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        # clamps instead of overflowing, which keeps huge values out of range
        s = PyNumber_AsSsize_t(start, NULL)
        e = PyNumber_AsSsize_t(end, NULL)
        if not (0 <= s <= e <= view.len):
            raise ValueError(f"bad range [{start}, {end}) for a buffer of {view.len} bytes")
        r = _compute(castagnoli, <const unsigned char *>view.buf + s, <size_t>(e - s), 0)
    finally:
        PyBuffer_Release(&view)
    return r


def crc32(data, value=0):
    """zlib CRC-32 of ``data`` continuing from ``value``; equals ``zlib.crc32(data, value)``."""
    return _crc(False, data, value)


def crc32c(data, value=0):
    """CRC-32C (Castagnoli) of ``data`` continuing from ``value`` (unsigned)."""
    return _crc(True, data, value)


def body_crc(data):
    """RocketMQ's stored body CRC: ``zlib.crc32(data) & 0x7FFFFFFF`` (0 for an empty body)."""
    return _crc(False, data, 0) & 0x7FFFFFFF


def crc32_range(data, start, end):
    """CRC-32 of ``data[start:end]`` (byte offsets) without copying; ValueError on a bad range."""
    return _crc_range(False, data, start, end)


def crc32c_range(data, start, end):
    """CRC-32C of ``data[start:end]`` (byte offsets) without copying; ValueError on a bad range."""
    return _crc_range(True, data, start, end)


def _impl_names():
    """Kernels in use now for (crc32, crc32c)."""
    return (rmq_crc32_impl_name().decode("ascii"), rmq_crc32c_impl_name().decode("ascii"))


def _force_portable(on):
    """Testing hook: force (True) or stop forcing (False) the portable slice-by-8 kernels.

    Process-wide; not for production use."""
    rmq_crc_force_portable(1 if on else 0)


def _force_level(int level):
    """Testing hook: 0 best kernels, 1 no 256-bit/3-lane variants, 2 slice-by-8. Process-wide."""
    rmq_crc_force_level(level)


def _name():
    a, b = _impl_names()
    return a if a == b else f"{a}+{b}"


IMPL_NAME = _name()
del _name
