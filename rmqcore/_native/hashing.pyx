"""Java-compatible string hashing, native twin of :mod:`rmqcore._pure.hashing` (same API and results).

Reads the str's code points in place (Latin-1 / UCS-2 / UCS-4 storage, csrc/rmq_hash.c): nothing is
encoded. Characters above U+FFFF count as their UTF-16 surrogate pair, lone surrogates as one unit.
"""
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t
from cpython.number cimport PyNumber_Index
from cpython.unicode cimport (
    PyUnicode_1BYTE_KIND,
    PyUnicode_2BYTE_KIND,
    PyUnicode_DATA,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
)
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

cdef extern from "rmq_hash.h" nogil:
    uint32_t rmq_java_hash_ucs1(uint32_t h, const uint8_t *s, size_t n)
    uint32_t rmq_java_hash_ucs2(uint32_t h, const uint16_t *s, size_t n)
    uint32_t rmq_java_hash_ucs4(uint32_t h, const uint32_t *s, size_t n)
    int32_t rmq_hash_as_int32(uint32_t h)
    int32_t rmq_index_key_hash(int32_t hash_code)

cdef extern from *:
    """
    static int rmq_unicode_ready(PyObject *o) {
    #if PY_VERSION_HEX < 0x030C0000
        return PyUnicode_READY(o);
    #else
        (void)o;
        return 0;
    #endif
    }
    """
    int rmq_unicode_ready(object o) except -1

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1

__all__ = ["index_key_hash", "index_slot", "java_string_hash", "tags_code"]


cdef int32_t _hash(object s) except? -1:  # s: a str (or subclass), checked by the caller
    cdef Py_ssize_t n
    cdef unsigned int kind
    cdef void *data
    rmq_unicode_ready(s)
    n = PyUnicode_GET_LENGTH(s)
    kind = PyUnicode_KIND(s)
    data = PyUnicode_DATA(s)
    if kind == PyUnicode_1BYTE_KIND:
        return rmq_hash_as_int32(rmq_java_hash_ucs1(0, <const uint8_t *>data, <size_t>n))
    if kind == PyUnicode_2BYTE_KIND:
        return rmq_hash_as_int32(rmq_java_hash_ucs2(0, <const uint16_t *>data, <size_t>n))
    return rmq_hash_as_int32(rmq_java_hash_ucs4(0, <const uint32_t *>data, <size_t>n))


cdef inline _type_error(object o, str expected):
    raise TypeError(f"expected {expected}, got {type(o).__name__}")


def java_string_hash(s):
    """Java ``String.hashCode()`` of ``s`` as a signed int32."""
    if not isinstance(s, str):
        _type_error(s, "str")
    return _hash(s)


def index_key_hash(key):
    """RocketMQ IndexService key hash: ``abs(hashCode)``, with Integer.MIN_VALUE mapped to 0."""
    if not isinstance(key, str):
        _type_error(key, "str")
    return rmq_index_key_hash(_hash(key))


def tags_code(tags):
    """ConsumeQueue tags code: 0 for no tags (None or ""), else the tags' signed hashCode."""
    if tags is None:
        return 0
    if not isinstance(tags, str):
        _type_error(tags, "str or None")
    return _hash(tags)


def index_slot(key_hash, slot_count):
    """Hash slot of a key hash in an IndexFile with ``slot_count`` slots (``key_hash % slot_count``)."""
    cdef int ovf_k = 0, ovf_m = 0
    cdef long long k, m
    key_hash = PyNumber_Index(key_hash)
    slot_count = PyNumber_Index(slot_count)
    k = PyLong_AsLongLongAndOverflow(key_hash, &ovf_k)
    m = PyLong_AsLongLongAndOverflow(slot_count, &ovf_m)
    if ovf_k or ovf_m:  # beyond 64 bits: Python arithmetic
        if slot_count <= 0:
            raise ValueError(f"slot_count must be positive, not {slot_count}")
        return key_hash % slot_count
    if m <= 0:
        raise ValueError(f"slot_count must be positive, not {slot_count}")
    k = k % m  # Python semantics (cdivision is off): the result has the sign of m
    return k
