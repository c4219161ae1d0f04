"""Kafka ``.log`` walking and v2 record parsing over a buffer.

Pure-Python twin of :mod:`rmqcore._native.kafka_batch` (same names, signatures, results and exceptions).

A ``.log`` is a concatenation of entries that all start with ``int64 offset | int32 size`` followed by
``size`` bytes; byte 16 is the magic (2 = record batch v2, 0/1 = legacy message). The walk is Kafka's
``FileLogInputStream.nextBatch``:

* at most 17 bytes left (offset, size, 4 bytes, magic) -> the iteration ends
  (:data:`END` when no byte is left, :data:`TORN` otherwise);
* ``size < 14`` -> :data:`E_SIZE` (``CorruptRecordException: Found record size N smaller than minimum
  record overhead (14)``), checked before the next test, as Kafka does;
* the entry runs past ``end`` -> :data:`TORN` (a partial tail simply ends the iteration);
* magic not 0, 1 or 2 -> :data:`E_MAGIC`; a v2 batch under 61 bytes or a v1 message under 34 bytes ->
  :data:`E_SHORT`;
* with CRC checking, a v2 batch whose CRC-32C over ``[21, size)`` or a legacy message whose CRC-32 over
  ``[16, size)`` differs from the stored one -> :data:`E_CRC`.

Expected conditions (end of data, a torn tail) and corruption are *statuses* here; the caller maps them
to exceptions with the file path in one place. Record parsing (:func:`parse_records`) raises
:class:`~rmqcore.errors.CorruptionError` subclasses, positioned in the given buffer.

Per-entry header tuples (:func:`batch_headers`) are
``(position, size, magic, offset_field, last_offset, max_timestamp, crc_state)``: ``offset_field`` is the
first 8 bytes (v2 base offset; legacy: the message offset, which is the *last* offset of a compressed
wrapper), ``max_timestamp`` is -1 for v0, ``crc_state`` is -1 (not checked), 0 (bad) or 1 (good).
"""

from __future__ import annotations

import struct

from rmqcore._pure.crc import crc32_range, crc32c_range
from rmqcore.errors import CorruptionError, RecordSizeError
from rmqcore.kafka_layout import (
    CRC_NONE,
    CRC_REPORT,
    CRC_STOP,
    E_CRC,
    E_MAGIC,
    E_SHORT,
    E_SIZE,
    END,
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_V1_MIN_SIZE,
    LOG_OVERHEAD,
    MIN_ENTRY_SIZE,
    OK,
    RECORD_BATCH_OVERHEAD,
    TORN,
)

__all__ = [
    "OK",
    "END",
    "TORN",
    "E_SIZE",
    "E_MAGIC",
    "E_CRC",
    "E_SHORT",
    "CRC_NONE",
    "CRC_STOP",
    "CRC_REPORT",
    "HEADER_SIZE_UP_TO_MAGIC",
    "LOG_OVERHEAD",
    "RECORD_BATCH_OVERHEAD",
    "MIN_ENTRY_SIZE",
    "scan",
    "batch_headers",
    "find_offset",
    "find_timestamp",
    "parse_records",
]

_MASK64 = (1 << 64) - 1
_HDR = struct.Struct(">qi")
_BE32 = struct.Struct(">i")
_BE64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


def _view(buf: object, start: int, end: int) -> memoryview:
    mv = memoryview(buf)  # type: ignore[arg-type]
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    if not 0 <= start <= end <= mv.nbytes:
        raise ValueError(f"range [{start}, {end}) outside a buffer of {mv.nbytes} bytes")
    return mv


def _wrap64(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v >> 63 else v


def _step(mv: memoryview, pos: int, end: int) -> tuple[int, int, int]:
    """(status, total size, magic) of the entry at ``pos``."""
    remaining = end - pos
    if remaining <= HEADER_SIZE_UP_TO_MAGIC:
        return (END if remaining == 0 else TORN), 0, 0
    size = _BE32.unpack_from(mv, pos + 8)[0]
    if size < MIN_ENTRY_SIZE:
        return E_SIZE, 0, 0
    total = size + LOG_OVERHEAD
    if total > remaining:
        return TORN, 0, 0
    magic = mv[pos + 16]
    if magic > 2:
        return E_MAGIC, 0, 0
    if (magic == 2 and total < RECORD_BATCH_OVERHEAD) or (magic == 1 and size < LEGACY_V1_MIN_SIZE):
        return E_SHORT, 0, 0
    return OK, total, magic


def _crc_ok(mv: memoryview, pos: int, total: int, magic: int) -> bool:
    if magic == 2:
        return bool(crc32c_range(mv, pos + 21, pos + total) == _U32.unpack_from(mv, pos + 17)[0])
    return bool(crc32_range(mv, pos + 16, pos + total) == _U32.unpack_from(mv, pos + 12)[0])


def _header(mv: memoryview, pos: int, magic: int) -> tuple[int, int, int]:
    """(offset_field, last_offset, max_timestamp)."""
    first = _BE64.unpack_from(mv, pos)[0]
    if magic == 2:
        return first, _wrap64(first + _BE32.unpack_from(mv, pos + 23)[0]), _BE64.unpack_from(mv, pos + 35)[0]
    if magic == 1:
        return first, first, _BE64.unpack_from(mv, pos + 18)[0]
    return first, first, -1


def scan(buf: object, start: int, end: int, verify_crc: int = 1) -> tuple[int, int, int]:
    """Walk entries from ``start``; stop at the first one that is not a complete valid entry.

    Returns:
        ``(count, stop, status)``: entries walked, the position after the last good one (recovery's
        ``validBytes``) and why the walk stopped (:data:`END`, :data:`TORN` or a negative status).

    Raises:
        ValueError: ``[start, end)`` is not inside ``buf``.
    """
    mv = _view(buf, start, end)
    count = 0
    pos = start
    while True:
        st, total, magic = _step(mv, pos, end)
        if st != OK:
            return count, pos, st
        if verify_crc and not _crc_ok(mv, pos, total, magic):
            return count, pos, E_CRC
        pos += total
        count += 1


def batch_headers(
    buf: object, start: int, end: int, crc_mode: int = CRC_NONE, max_count: int = -1
) -> tuple[list[tuple[int, int, int, int, int, int, int]], int, int]:
    """Header tuples of the entries from ``start`` (see the module docstring).

    Args:
        crc_mode: :data:`CRC_NONE`, :data:`CRC_STOP` (a bad CRC ends the walk with :data:`E_CRC`, the bad
            entry not listed) or :data:`CRC_REPORT` (checked, reported in ``crc_state``, walk goes on).
        max_count: stop after this many entries (status :data:`OK`); negative = no limit.

    Returns:
        ``(headers, stop, status)``.

    Raises:
        ValueError: bad range or ``crc_mode``.
    """
    mv = _view(buf, start, end)
    if crc_mode not in (CRC_NONE, CRC_STOP, CRC_REPORT):
        raise ValueError(f"crc_mode must be 0, 1 or 2, not {crc_mode}")
    out: list[tuple[int, int, int, int, int, int, int]] = []
    pos = start
    while True:
        if max_count >= 0 and len(out) >= max_count:
            return out, pos, OK
        st, total, magic = _step(mv, pos, end)
        if st != OK:
            return out, pos, st
        crc_state = -1
        if crc_mode != CRC_NONE:
            crc_state = 1 if _crc_ok(mv, pos, total, magic) else 0
            if crc_state == 0 and crc_mode == CRC_STOP:
                return out, pos, E_CRC
        first, last, max_ts = _header(mv, pos, magic)
        out.append((pos, total, magic, first, last, max_ts, crc_state))
        pos += total


def _first_entry_at_or_above(
    mv: memoryview, start: int, end: int, field: int, target: int
) -> tuple[int, int, int, int]:
    """Walk from ``start`` to the first entry whose header ``field`` (1: last offset, 2: max timestamp,
    as :func:`_header` orders them) is >= ``target``.

    Returns:
        ``(OK, position, size, value)`` there, or ``(stop status, stop position, 0, -1)``.

    Raises:
        OverflowError: ``target`` outside int64.
    """
    if not -(1 << 63) <= target < (1 << 63):
        raise OverflowError("target does not fit a signed 64-bit integer")
    pos = start
    while True:
        st, total, magic = _step(mv, pos, end)
        if st != OK:
            return st, pos, 0, -1
        value = _header(mv, pos, magic)[field]
        if value >= target:
            return OK, pos, total, value
        pos += total


def find_offset(buf: object, start: int, end: int, target: int) -> tuple[int, int, int, int]:
    """Kafka ``FileRecords.searchForOffsetWithSize``: the first entry whose last offset >= ``target``.

    Returns:
        ``(status, position, size, last_offset)``: status :data:`OK` when found; otherwise the walk's
        stop status and position, with size 0 and last offset -1.

    Raises:
        ValueError: bad range. OverflowError: ``target`` outside int64.
    """
    return _first_entry_at_or_above(_view(buf, start, end), start, end, 1, target)


def find_timestamp(buf: object, start: int, end: int, target: int) -> tuple[int, int, int]:
    """The first entry whose max timestamp >= ``target`` (``FileRecords.searchForTimestamp``'s walk).

    Returns:
        ``(status, position, size)``; status :data:`OK` when found.

    Raises:
        ValueError: bad range. OverflowError: ``target`` outside int64.
    """
    return _first_entry_at_or_above(_view(buf, start, end), start, end, 2, target)[:3]


# ---------------------------------------------------------------------------------------------------
# v2 records
# ---------------------------------------------------------------------------------------------------


def _structure(pos: int, what: str) -> CorruptionError:
    return CorruptionError(f"Found invalid record structure: {what}", pos)


def _zigzag_leb128(mv: memoryview, pos: int, end: int, rec: int, bits: int, kind: str) -> tuple[int, int]:
    """ByteUtils.readVarint/readVarlong: zig-zag LEB128 of at most ``ceil(bits / 7)`` bytes, wrapping
    around to a signed ``bits``-bit integer; ``kind`` ("varint", "varlong") names it in errors."""
    max_shift = 7 * ((bits + 6) // 7 - 1)  # 28 for 32 bits, 63 for 64
    mask = (1 << bits) - 1
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise _structure(rec, f"{kind} runs past the end of the record")
        b = mv[pos]
        pos += 1
        if not b & 0x80:
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if shift > max_shift:
            raise _structure(rec, f"{kind} is too long")
    value = (value | (b << shift)) & mask
    value = (value >> 1) ^ (-(value & 1) & mask)
    return (value - (1 << bits) if value >> (bits - 1) else value), pos


def _varint(mv: memoryview, pos: int, end: int, rec: int) -> tuple[int, int]:
    """ByteUtils.readVarint: at most 5 bytes, 32-bit wrap-around."""
    return _zigzag_leb128(mv, pos, end, rec, 32, "varint")


def _varlong(mv: memoryview, pos: int, end: int, rec: int) -> tuple[int, int]:
    """ByteUtils.readVarlong: at most 10 bytes, 64-bit wrap-around."""
    return _zigzag_leb128(mv, pos, end, rec, 64, "varlong")


def _bytes(mv: memoryview, pos: int, end: int, n: int, rec: int) -> tuple[bytes, int]:
    if n > end - pos:
        raise _structure(rec, f"a {n}-byte field runs past the end of the record")
    return mv[pos : pos + n].tobytes(), pos + n


def parse_records(
    buf: object, start: int, end: int, count: int
) -> list[tuple[int, int, int, int, bytes | None, bytes | None, tuple[tuple[bytes, bytes | None], ...]]]:
    """Parse ``count`` v2 records (``DefaultRecord.readFrom``) filling exactly ``[start, end)``.

    Returns:
        One tuple per record: ``(size_in_bytes, attributes, timestamp_delta, offset_delta, key, value,
        headers)``; key/value are None when their length is negative; headers are ``(key, value)``
        byte pairs (value None when null).

    Raises:
        ValueError: bad range.
        RecordSizeError: a record's declared size disagrees with its content, or bytes remain after
            ``count`` records ("Incorrect declared batch size").
        CorruptionError: any other malformed structure (negative count, bad varint, field overrun,
            negative header count or header key size).
    """
    mv = _view(buf, start, end)
    if count < 0:
        raise CorruptionError(f"Found invalid record count {count}", start)
    out = []
    pos = start
    for _ in range(count):
        rec = pos
        body, pos = _varint(mv, pos, end, rec)
        if body < 0 or body > end - pos:
            raise RecordSizeError(
                f"Invalid record size: expected {body} bytes in record payload, but instead the buffer "
                f"has only {end - pos} remaining bytes",
                rec,
            )
        body_start = pos
        body_end = pos + body
        if pos >= body_end:
            raise _structure(rec, "record attributes run past the end of the record")
        attributes = mv[pos]
        pos += 1
        ts_delta, pos = _varlong(mv, pos, body_end, rec)
        off_delta, pos = _varint(mv, pos, body_end, rec)
        n, pos = _varint(mv, pos, body_end, rec)
        key = None
        if n >= 0:
            key, pos = _bytes(mv, pos, body_end, n, rec)
        n, pos = _varint(mv, pos, body_end, rec)
        value = None
        if n >= 0:
            value, pos = _bytes(mv, pos, body_end, n, rec)
        n_headers, pos = _varint(mv, pos, body_end, rec)
        if n_headers < 0:
            raise CorruptionError(f"Found invalid number of record headers {n_headers}", rec)
        headers = []
        for _h in range(n_headers):
            n, pos = _varint(mv, pos, body_end, rec)
            if n < 0:
                raise CorruptionError(f"Invalid negative header key size {n}", rec)
            hkey, pos = _bytes(mv, pos, body_end, n, rec)
            n, pos = _varint(mv, pos, body_end, rec)
            hval = None
            if n >= 0:
                hval, pos = _bytes(mv, pos, body_end, n, rec)
            headers.append((hkey, hval))
        if pos != body_end:
            raise RecordSizeError(
                f"Invalid record size: expected to read {body} bytes in record payload, but instead "
                f"read {pos - body_start}",
                rec,
            )
        out.append((body_end - rec, attributes, ts_delta, off_delta, key, value, tuple(headers)))
    if pos != end:
        raise RecordSizeError("Incorrect declared batch size, records still remaining in file", pos)
    return out
