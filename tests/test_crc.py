"""CRC-32 / CRC-32C kernels (``impl.crc``), native and pure.

References used here are independent of both kernels: ``zlib.crc32`` for CRC-32 and a bitwise
CRC-32C written in this file. JDK 17 vectors: ``java.util.zip.CRC32`` over the body, masked with
``& 0x7FFFFFFF`` as RocketMQ's ``UtilAll.crc32`` stores it.
"""

from __future__ import annotations

import array
import mmap
import random
import threading
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import twins

FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

NATIVE_NAMES = {"vpclmul", "pclmul", "sse42", "armv8", "slice-by-8"}


def _bitwise_crc32c(data: bytes, value: int = 0) -> int:
    reg = value ^ 0xFFFFFFFF
    for b in data:
        reg ^= b
        for _ in range(8):
            reg = (reg >> 1) ^ (0x82F63B78 if reg & 1 else 0)
    return reg ^ 0xFFFFFFFF


_T = [_bitwise_crc32c(bytes([b]), 0xFFFFFFFF) ^ 0xFFFFFFFF for b in range(256)]  # raw table


def _crc32c_prefixes(data: bytes) -> list[int]:
    """[crc32c(data[:n]) for n in 0..len(data)], in one pass."""
    reg = 0xFFFFFFFF
    out = [0]
    for b in data:
        reg = _T[(reg ^ b) & 0xFF] ^ (reg >> 8)
        out.append(reg ^ 0xFFFFFFFF)
    return out


def _crc32_prefixes(data: bytes) -> list[int]:
    out = [0]
    c = 0
    for i in range(len(data)):
        c = zlib.crc32(data[i : i + 1], c)
        out.append(c)
    return out


RNG = random.Random(0x5EED)
BIG = RNG.randbytes(5000 + 64)

MAX_LEN = 5000
OFFSETS = range(32)  # every 16- and 32-byte alignment class of the SIMD loads
CRC32_PREFIX = {off: _crc32_prefixes(BIG[off : off + MAX_LEN]) for off in OFFSETS}
CRC32C_PREFIX = {off: _crc32c_prefixes(BIG[off : off + MAX_LEN]) for off in OFFSETS}


@pytest.fixture
def crc(impl):
    """The crc kernel; the native one is put back on its best kernels after each test."""
    yield impl.crc
    impl.crc._force_level(0)


LEVELS = [0, 1, 2]  # native: best kernels, 128-bit / one-lane SIMD, slice-by-8 (no-ops for pure)


# --------------------------------------------------------------------------------------- vectors
def test_jdk_body_crc_vectors(crc) -> None:
    for body, raw, stored in [
        (b"hello!q!", 0xBCD1C123, 1020379427),
        (b"body", 0xDBA80BB2, 1537739698),
        (b"Hello RocketMQ", 0x69C865ED, 1774740973),
    ]:
        assert crc.crc32(body) == raw
        assert crc.body_crc(body) == stored == raw & 0x7FFFFFFF
        assert crc.body_crc(bytearray(body)) == stored
        assert crc.body_crc(memoryview(body)) == stored


def test_check_values(crc) -> None:
    assert crc.crc32(b"123456789") == 0xCBF43926
    assert crc.crc32c(b"123456789") == 0xE3069283
    # RFC 3720 (iSCSI) B.4 CRC-32C test patterns
    assert crc.crc32c(bytes(32)) == 0x8A9136AA
    assert crc.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc.crc32c(bytes(range(32))) == 0x46DD794E
    assert crc.crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C


def test_empty(crc) -> None:
    assert crc.crc32(b"") == 0
    assert crc.crc32c(b"") == 0
    assert crc.body_crc(b"") == 0
    assert crc.crc32(b"", 0xDEADBEEF) == 0xDEADBEEF
    assert crc.crc32c(bytearray(), 12345) == 12345
    assert crc.crc32_range(b"abc", 1, 1) == 0
    assert crc.crc32c_range(b"abc", 3, 3) == 0


def test_results_are_unsigned_and_body_crc_is_31_bits(crc) -> None:
    for i in range(300):
        data = i.to_bytes(2, "little")
        c = crc.crc32(data)
        assert 0 <= c <= 0xFFFFFFFF and c == zlib.crc32(data)
        assert crc.body_crc(data) == c & 0x7FFFFFFF
        assert 0 <= crc.crc32c(data) <= 0xFFFFFFFF
    assert any(crc.crc32(i.to_bytes(2, "little")) >> 31 for i in range(300))


def test_impl_name(impl, crc) -> None:
    if impl.name == "pure":
        assert crc.IMPL_NAME == "zlib"
        return
    names = crc._impl_names()  # (crc32 kernel, crc32c kernel)
    assert set(names) <= NATIVE_NAMES
    assert crc.IMPL_NAME == (names[0] if names[0] == names[1] else "+".join(names))
    crc._force_portable(True)
    assert crc._impl_names() == ("slice-by-8", "slice-by-8")
    crc._force_portable(False)
    assert crc._impl_names() == names
    crc._force_level(1)
    assert crc._impl_names()[0] == {"vpclmul": "pclmul"}.get(names[0], names[0])
    assert crc._impl_names()[1] == names[1]


# --------------------------------------------------------------------- every length and alignment
@pytest.mark.parametrize("level", LEVELS)
def test_every_length_and_offset_crc32(crc, level) -> None:
    crc._force_level(level)
    view = memoryview(BIG)
    for off in OFFSETS:
        expect = CRC32_PREFIX[off]
        for n in range(MAX_LEN + 1):
            assert crc.crc32(view[off : off + n]) == expect[n], (off, n)


@pytest.mark.parametrize("level", LEVELS)
def test_every_length_and_offset_crc32c(impl, crc, level) -> None:
    crc._force_level(level)
    view = memoryview(BIG)
    # the pure twin is O(n) Python per call: every length at one offset, a sample of the rest
    offsets = OFFSETS if impl.name == "native" else [0, 1, 7]
    for off in offsets:
        expect = CRC32C_PREFIX[off]
        lengths = range(MAX_LEN + 1)
        if impl.name == "pure" and (off or level):
            lengths = [*range(300), *range(300, MAX_LEN + 1, 97), MAX_LEN]
        for n in lengths:
            assert crc.crc32c(view[off : off + n]) == expect[n], (off, n)


def _reference_crc32c(data: bytes, value: int = 0) -> int:
    reg = value ^ 0xFFFFFFFF
    t = _T
    for b in data:
        reg = t[(reg ^ b) & 0xFF] ^ (reg >> 8)
    return reg ^ 0xFFFFFFFF


_LARGE: dict[int, tuple[bytes, int, int]] = {}


def _large(size: int) -> tuple[bytes, int, int]:
    if size not in _LARGE:
        data = random.Random(size).randbytes(size)
        _LARGE[size] = (data, zlib.crc32(data), _reference_crc32c(data))
    return _LARGE[size]


@pytest.mark.parametrize("level", LEVELS)
def test_large_buffers(impl, crc, level) -> None:
    """Sizes past the 3 x 4 KiB lanes of the CRC-32C kernel and the 4 KiB GIL threshold."""
    crc._force_level(level)
    sizes = [12288 * 2 + 777, (1 << 20) + 13] if impl.name == "native" else [12288 * 2 + 777]
    for size in sizes:
        data, c32, c32c = _large(size)
        assert crc.crc32(data) == c32
        assert crc.crc32c(data) == c32c
        assert crc.crc32(bytearray(data)) == c32
        assert crc.crc32c_range(data, 0, size) == c32c
    data, c32, c32c = _large(sizes[0])
    assert crc.crc32c(data, 0x12345678) == _reference_crc32c(data, 0x12345678)
    assert crc.crc32(data, 0x12345678) == zlib.crc32(data, 0x12345678)


# ------------------------------------------------------------------------------------ properties
@FIXTURE_OK
@given(
    data=st.binary(max_size=MAX_LEN),
    offset=st.integers(0, 63),
    value=st.integers(0, 0xFFFFFFFF),
    level=st.sampled_from(LEVELS),
)
def test_property_matches_references(crc, data, offset, value, level) -> None:
    crc._force_level(level)
    buf = bytearray(BIG[:offset]) + data + b"tail"
    part = memoryview(buf)[offset : offset + len(data)]
    assert crc.crc32(part, value) == zlib.crc32(data, value)
    assert crc.crc32c(part, value) == _reference_crc32c(data, value)
    assert crc.body_crc(part) == zlib.crc32(data) & 0x7FFFFFFF
    assert crc.crc32_range(buf, offset, offset + len(data)) == zlib.crc32(data)
    assert crc.crc32c_range(buf, offset, offset + len(data)) == _reference_crc32c(data)


@FIXTURE_OK
@given(a=st.binary(max_size=700), b=st.binary(max_size=700), level=st.sampled_from(LEVELS))
def test_property_chaining(crc, a, b, level) -> None:
    crc._force_level(level)
    assert crc.crc32(b, crc.crc32(a)) == crc.crc32(a + b) == zlib.crc32(a + b)
    assert crc.crc32c(b, crc.crc32c(a)) == crc.crc32c(a + b)


@FIXTURE_OK
@given(data=st.binary(max_size=3000), value=st.integers(0, 0xFFFFFFFF), level=st.sampled_from(LEVELS))
def test_property_native_equals_pure(data, value, level) -> None:
    impls = twins()
    results = set()
    for ns in impls:
        ns.crc._force_level(level)
        try:
            results.add(
                (
                    ns.crc.crc32(data, value),
                    ns.crc.crc32c(data, value),
                    ns.crc.body_crc(data),
                    ns.crc.crc32_range(data, len(data) // 3, len(data) // 2),
                    ns.crc.crc32c_range(data, len(data) // 3, len(data) // 2),
                )
            )
        finally:
            ns.crc._force_level(0)
    assert len(results) == 1
    assert results.pop()[:2] == (zlib.crc32(data, value), _reference_crc32c(data, value))


def test_forced_portable_equals_dispatched(crc) -> None:
    data = random.Random(70_000).randbytes(70_000)
    fast = [
        (crc.crc32(data[:n]), crc.crc32c(data[:n])) for n in (0, 1, 15, 16, 63, 64, 100, 255, 256, 70_000)
    ]
    crc._force_portable(True)
    try:
        slow = [
            (crc.crc32(data[:n]), crc.crc32c(data[:n])) for n in (0, 1, 15, 16, 63, 64, 100, 255, 256, 70_000)
        ]
    finally:
        crc._force_portable(False)
    assert fast == slow
    assert fast[-1] == (zlib.crc32(data), _reference_crc32c(data))


# ------------------------------------------------------------------------------ buffers and args
def test_buffer_types(crc, tmp_path) -> None:
    data = b"Hello RocketMQ" * 500
    expect32, expect32c = zlib.crc32(data), _reference_crc32c(data)
    path = tmp_path / "seg"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as ro:
        assert crc.crc32(ro) == expect32
        assert crc.crc32c(ro) == expect32c
        assert crc.crc32_range(ro, 14, 28) == zlib.crc32(data[14:28])
        assert crc.crc32c_range(ro, 0, len(data)) == expect32c
    for buf in (data, bytearray(data), memoryview(data), memoryview(bytearray(data)).toreadonly()):
        assert crc.crc32(buf) == expect32
        assert crc.crc32c(buf) == expect32c
        assert crc.body_crc(buf) == expect32 & 0x7FFFFFFF
    # any C-contiguous buffer counts as its raw bytes, like zlib.crc32
    arr = array.array("I", range(100))
    assert crc.crc32(arr) == zlib.crc32(arr.tobytes())
    assert crc.crc32c(arr) == _reference_crc32c(arr.tobytes())
    assert crc.crc32_range(arr, 4, 40) == zlib.crc32(arr.tobytes()[4:40])
    assert crc.crc32c_range(arr, 4, 40) == _reference_crc32c(arr.tobytes()[4:40])
    two_d = memoryview(bytearray(data[:64])).cast("B", (8, 8))
    assert crc.crc32(two_d) == zlib.crc32(data[:64])
    assert crc.crc32c(two_d) == _reference_crc32c(data[:64])


def test_bad_buffers(crc) -> None:
    strided = memoryview(b"abcdefgh")[::2]
    for fn in (crc.crc32, crc.crc32c, crc.body_crc):
        with pytest.raises(TypeError):
            fn("text")
        with pytest.raises(TypeError):
            fn(None)
        with pytest.raises(TypeError):
            fn(123)
        with pytest.raises(BufferError):
            fn(strided)
    for fn in (crc.crc32_range, crc.crc32c_range):
        with pytest.raises(TypeError):
            fn("text", 0, 1)
        with pytest.raises(BufferError):
            fn(strided, 0, 1)


def test_value_argument(crc) -> None:
    data = b"RocketMQ"
    for value in (0, 1, 0xFFFFFFFF, -1, -12345, 2**32 + 5, 2**70 + 99, True):
        assert crc.crc32(data, value) == zlib.crc32(data, value)
        assert crc.crc32c(data, value) == _reference_crc32c(data, value & 0xFFFFFFFF)
    assert crc.crc32(data, value=7) == zlib.crc32(data, 7)
    assert crc.crc32c(data, value=7) == _reference_crc32c(data, 7)
    for bad in (1.0, "1", None, b"1"):
        with pytest.raises(TypeError):
            crc.crc32(data, bad)
        with pytest.raises(TypeError):
            crc.crc32c(data, bad)


def test_range_validation(crc) -> None:
    data = bytes(range(100))
    assert crc.crc32_range(data, 0, 100) == zlib.crc32(data)
    assert crc.crc32_range(data, 10, 90) == zlib.crc32(data[10:90])
    assert crc.crc32c_range(data, 99, 100) == _reference_crc32c(data[99:])
    assert crc.crc32_range(bytearray(data), True, 2) == zlib.crc32(data[1:2])
    for start, end in [
        (-1, 10),
        (0, 101),
        (50, 49),
        (101, 101),
        (-5, -1),
        (2**70, 2**70 + 1),
        (0, 2**70),
        (-(2**70), 5),
        (0, 2**63),
        (2**63 - 1, 2**63 - 1),
    ]:
        with pytest.raises(ValueError):
            crc.crc32_range(data, start, end)
        with pytest.raises(ValueError):
            crc.crc32c_range(data, start, end)
    for start, end in [(0.0, 1), (0, "1"), (None, 3)]:
        with pytest.raises(TypeError):
            crc.crc32_range(data, start, end)
        with pytest.raises(TypeError):
            crc.crc32c_range(data, start, end)
    with pytest.raises(ValueError):
        crc.crc32_range(b"", 0, 1)


def test_range_does_not_keep_buffer_exported(crc) -> None:
    buf = bytearray(b"x" * 10_000)
    crc.crc32_range(buf, 0, 10_000)
    crc.crc32c_range(buf, 5, 9_000)
    crc.crc32(buf)
    crc.crc32c(buf)
    with pytest.raises(ValueError):
        crc.crc32_range(buf, 0, 10_001)
    buf.extend(b"y")  # would raise BufferError if a view were still exported
    assert len(buf) == 10_001


def test_threads(crc, impl) -> None:
    """Concurrent callers (GIL released for big buffers in native) get the right answers."""
    size = 1 << 20 if impl.name == "native" else 1 << 14
    datas = [random.Random(i).randbytes(size) for i in range(4)]
    expect = [(zlib.crc32(d), _reference_crc32c(d)) for d in datas]
    got: list = [None] * len(datas)

    def work(i: int) -> None:
        for _ in range(3):
            got[i] = (crc.crc32(datas[i]), crc.crc32c(datas[i]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(datas))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expect


def test_twins_have_the_same_public_api() -> None:
    impls = twins()
    hooks = ["_force_level", "_force_portable", "_impl_names"]
    for ns in impls:
        assert ns.crc.__all__ == ["IMPL_NAME", "body_crc", "crc32", "crc32_range", "crc32c", "crc32c_range"]
        assert all(callable(getattr(ns.crc, n)) for n in ns.crc.__all__[1:] + hooks)
        assert isinstance(ns.crc.IMPL_NAME, str)
