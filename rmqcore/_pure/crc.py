"""CRC-32 / CRC-32C kernel, pure-Python twin of :mod:`rmqcore._native.crc`.

CRC-32 is zlib's (reflected polynomial 0xEDB88320), the one RocketMQ stores as a message's body CRC
(masked to 31 bits) and Kafka uses for v0/v1 messages. CRC-32C (Castagnoli, reflected 0x82F63B78)
is Kafka's record-batch CRC. Both chain like ``zlib.crc32(data, value)``: pass the previous result
as ``value`` to continue. ``data`` is any C-contiguous buffer (bytes, bytearray, memoryview, mmap).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from operator import index as _index
from typing import Any

__all__ = ["IMPL_NAME", "body_crc", "crc32", "crc32_range", "crc32c", "crc32c_range"]

IMPL_NAME = "zlib"


def _make_table(poly: int) -> tuple[int, ...]:
    table = []
    for b in range(256):
        r = b
        for _ in range(8):
            r = (r >> 1) ^ (poly if r & 1 else 0)
        table.append(r)
    return tuple(table)


_TABLE_C = _make_table(0x82F63B78)


def crc32(data: Any, value: int = 0) -> int:
    """zlib CRC-32 of ``data`` continuing from ``value``; equals ``zlib.crc32(data, value)``."""
    return zlib.crc32(data, value)


def crc32c(data: Any, value: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data`` continuing from ``value`` (unsigned)."""
    with _octets(data) as octets:
        reg = (_index(value) & 0xFFFFFFFF) ^ 0xFFFFFFFF
        table = _TABLE_C
        for b in octets:
            reg = table[(reg ^ b) & 0xFF] ^ (reg >> 8)
    return reg ^ 0xFFFFFFFF


def body_crc(data: Any) -> int:
    """RocketMQ's stored body CRC: ``zlib.crc32(data) & 0x7FFFFFFF`` (0 for an empty body)."""
    return zlib.crc32(data) & 0x7FFFFFFF


def _octets(data: Any) -> memoryview:
    """``data`` as a flat byte view, to be used in a ``with`` block (which releases it); BufferError,
    as the native twin raises, when it is not C-contiguous."""
    with memoryview(data) as view:
        if not view.c_contiguous:
            raise BufferError("memoryview: underlying buffer is not C-contiguous")
        return view.cast("B")  # outlives the view it was cast from, holding the buffer itself


def _crc_of_range(crc: Callable[[Any], int], data: Any, start: int, end: int) -> int:
    """``crc`` of ``data[start:end]`` (byte offsets) without copying; ValueError on a bad range."""
    with _octets(data) as octets:
        start, end = _index(start), _index(end)
        if not 0 <= start <= end <= octets.nbytes:
            raise ValueError(f"bad range [{start}, {end}) for a buffer of {octets.nbytes} bytes")
        with octets[start:end] as part:
            return crc(part)


def crc32_range(data: Any, start: int, end: int) -> int:
    """CRC-32 of ``data[start:end]`` (byte offsets) without copying; ValueError on a bad range."""
    return _crc_of_range(zlib.crc32, data, start, end)


def crc32c_range(data: Any, start: int, end: int) -> int:
    """CRC-32C of ``data[start:end]`` (byte offsets) without copying; ValueError on a bad range."""
    return _crc_of_range(crc32c, data, start, end)


# Testing hooks of the native twin; the pure module has a single code path.
def _force_portable(on: bool) -> None:
    """Native: force (True) or stop forcing (False) the portable slice-by-8 kernels. No-op here."""


def _force_level(level: int) -> None:
    """Native: 0 best kernels, 1 no 256-bit/3-lane variants, 2 slice-by-8. No-op here."""


def _impl_names() -> tuple[str, str]:
    """Kernels in use now for (crc32, crc32c)."""
    return ("zlib", "python")
