"""RocketMQ IndexFile kernels over a buffer: pure-Python twin of :mod:`rmqcore._native.indexfile`.

Same names, signatures, results and exceptions as the native module. Functions are pure: no I/O, no
state; the buffer is the mapped index file (``mmap``, ``bytearray``, ``bytes`` for reads, any
contiguous buffer).

Layout (all integers big-endian; ``S`` = slot count, ``N`` = max entries)::

    [0, 40)                       header
                                    0  beginTimestamp  i64     8  endTimestamp  i64
                                   16  beginPhyOffset  i64    24  endPhyOffset  i64
                                   32  hashSlotCount   i32    36  indexCount    i32 (next entry number)
    [40, 40 + 4 S)                slots: i32 number of the newest entry of the slot's chain (0 = empty)
    [40 + 4 S, 40 + 4 S + 20 N)   entries: keyHash i32 | phyOffset i64 | timeDiff i32 (s) | prevIndex i32

Invariants and rules (RocketMQ ``IndexFile``, identical in 4.9.8 and 5.3.3):

* ``indexCount`` starts at 1 (entry 0 is never used; ``<= 0`` reads as 1), so a full file holds N - 1
  entries and says ``indexCount = N``; a header with ``indexCount > N`` is impossible and raises
  :class:`~rmqcore.errors.IndexCorruptError` (position 36) before anything else is read.
* ``index_put`` is ``putKey``: the entry's ``timeDiff`` is computed from the header's beginTimestamp
  *before* the first put of a file sets it (the first entry of a rolled file is relative to the previous
  file's end), Java ``long`` arithmetic wraps around and divides toward zero.
* ``index_select`` is ``selectPhyOffset``'s chain walk with its guards (slot value / prevIndex <= 0 or
  > indexCount, prevIndex == current, timeDiff < 0, time < begin) plus ``max_steps``, a bound on the
  entries read, so a corrupt chain (a cycle) cannot loop; entry number N, which RocketMQ reads past the
  end of its buffer (and stops on the exception), stops the walk. Nothing outside the geometry is read.

Errors: a non-buffer raises ``TypeError`` (a read-only buffer too, for writes); slot_count / max_entries
outside ``[1, 2**31 - 1]`` raise :class:`~rmqcore.errors.ConfigError`; a key hash outside
``[0, 2**31 - 1]`` or bad batch bounds raise ``ValueError``; integers outside int64 raise
``OverflowError``; a buffer shorter than the geometry or an impossible header raise ``IndexCorruptError``.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from operator import index as _index

from ..errors import ConfigError, IndexCorruptError

__all__ = [
    "ENTRY_SIZE",
    "HEADER_SIZE",
    "SLOT_SIZE",
    "index_file_size",
    "index_header",
    "index_put",
    "index_put_batch",
    "index_select",
]

HEADER_SIZE = 40
SLOT_SIZE = 4
ENTRY_SIZE = 20

_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_U64 = 1 << 64

_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_I32 = struct.Struct(">i")
_Q64 = struct.Struct(">q")
# int64 element formats accepted for the batch arrays (array('q'), numpy int64 = "l" on LP64, ...)
_NATIVE_ORDER = "<" if sys.byteorder == "little" else ">"
_INT64_FORMATS = frozenset(
    {"q", "@q", "=q", _NATIVE_ORDER + "q"} | ({"l", "@l"} if struct.calcsize("l") == 8 else set())
)


def _i64(v: object) -> int:
    i = _index(v)  # type: ignore[arg-type]
    if i < _INT64_MIN or i > _INT64_MAX:
        raise OverflowError("Python int too large to convert to C long long")
    return int(i)


def _wrap64(v: int) -> int:
    v &= _U64 - 1
    return v - _U64 if v > _INT64_MAX else v


def _geometry(slot_count: object, max_entries: object) -> tuple[int, int]:
    s = _i64(slot_count)
    n = _i64(max_entries)
    if s < 1 or s > _INT32_MAX:
        raise ConfigError(f"slot_count must be in [1, {_INT32_MAX}], not {s}")
    if n < 1 or n > _INT32_MAX:
        raise ConfigError(f"max_entries must be in [1, {_INT32_MAX}], not {n}")
    return s, n


def index_file_size(slot_count: int, max_entries: int) -> int:
    """Bytes of an index file: ``40 + 4 * slot_count + 20 * max_entries``.

    Raises:
        ConfigError: slot_count or max_entries outside ``[1, 2**31 - 1]``.
    """
    s, n = _geometry(slot_count, max_entries)
    return HEADER_SIZE + SLOT_SIZE * s + ENTRY_SIZE * n


def _bytes_view(buf: object) -> memoryview:
    mv = memoryview(buf)  # type: ignore[arg-type]
    if mv.ndim != 1 or mv.itemsize != 1 or mv.format not in ("B", "b", "c"):
        try:
            mv2 = mv.cast("B")
        finally:
            mv.release()
        return mv2
    return mv


def _check(mv: memoryview, s: int, n: int) -> int:
    """Prove the geometry once; returns the header's indexCount as RocketMQ uses it (<= 0 -> 1)."""
    need = HEADER_SIZE + SLOT_SIZE * s + ENTRY_SIZE * n
    if mv.nbytes < need:
        raise IndexCorruptError(
            f"index buffer of {mv.nbytes} bytes is shorter than the {need} bytes of {s} slots "
            f"and {n} entries",
            mv.nbytes,
        )
    count = _I32.unpack_from(mv, 36)[0]
    if count > n:
        raise IndexCorruptError(f"index header says indexCount {count} > max entries {n}", 36)
    return 1 if count <= 0 else count


def index_header(buf: object) -> tuple[int, int, int, int, int, int]:
    """The raw header: ``(beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount,
    indexCount)`` exactly as stored (indexCount is not clamped).

    Raises:
        TypeError: ``buf`` is not a buffer.
        IndexCorruptError: the buffer is shorter than the 40-byte header.
    """
    with _bytes_view(buf) as mv:
        if mv.nbytes < HEADER_SIZE:
            raise IndexCorruptError(
                f"index buffer of {mv.nbytes} bytes is shorter than the {HEADER_SIZE}-byte header", mv.nbytes
            )
        b_ts, e_ts, b_phy, e_phy, slots, count = _HEADER.unpack_from(mv, 0)
        return b_ts, e_ts, b_phy, e_phy, slots, count


def _put(mv: memoryview, s: int, n: int, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
    count = _I32.unpack_from(mv, 36)[0]
    if count <= 0:
        count = 1
    if count >= n:
        return False
    slot_pos = HEADER_SIZE + SLOT_SIZE * (key_hash % s)
    slot_value = _I32.unpack_from(mv, slot_pos)[0]
    if slot_value <= 0 or slot_value > count:
        slot_value = 0
    begin_ts = _Q64.unpack_from(mv, 0)[0]
    diff = _wrap64(store_timestamp - begin_ts)
    time_diff = diff // 1000 if diff >= 0 else -((-diff) // 1000)  # Java: toward zero
    if begin_ts <= 0:
        time_diff = 0
    elif time_diff > _INT32_MAX:
        time_diff = _INT32_MAX
    elif time_diff < 0:
        time_diff = 0
    _ENTRY.pack_into(mv, HEADER_SIZE + SLOT_SIZE * s + ENTRY_SIZE * count, key_hash, phy_offset, time_diff,
                     slot_value)  # fmt: skip
    _I32.pack_into(mv, slot_pos, count)
    if count <= 1:
        _Q64.pack_into(mv, 16, phy_offset)
        _Q64.pack_into(mv, 0, store_timestamp)
    if slot_value == 0:
        hsc = _I32.unpack_from(mv, 32)[0]
        _I32.pack_into(mv, 32, hsc + 1 if hsc != _INT32_MAX else -(1 << 31))
    _I32.pack_into(mv, 36, count + 1)
    _Q64.pack_into(mv, 24, phy_offset)
    _Q64.pack_into(mv, 8, store_timestamp)
    return True


def _writable(buf: object) -> memoryview:
    mv = _bytes_view(buf)
    if mv.readonly:
        mv.release()
        raise TypeError("index buffer is read-only")
    return mv


def index_put(
    buf: object, slot_count: int, max_entries: int, key_hash: int, phy_offset: int, store_timestamp: int
) -> bool:
    """RocketMQ ``IndexFile.putKey``: add one entry, updating slot and header in ``buf``.

    Returns False, writing nothing, when the file is full (indexCount >= max_entries).

    Raises:
        TypeError: ``buf`` is not a writable buffer.
        ConfigError: bad geometry.
        ValueError: ``key_hash`` outside ``[0, 2**31 - 1]``.
        OverflowError: an integer outside int64.
        IndexCorruptError: buffer shorter than the geometry, or indexCount > max_entries.
    """
    s_, n_ = _i64(slot_count), _i64(max_entries)
    key_hash, phy_offset, store_timestamp = _i64(key_hash), _i64(phy_offset), _i64(store_timestamp)
    with _writable(buf) as mv:
        s, n = _geometry(s_, n_)
        if key_hash < 0 or key_hash > _INT32_MAX:
            raise ValueError(f"key_hash must be in [0, {_INT32_MAX}], not {key_hash}")
        _check(mv, s, n)
        return _put(mv, s, n, key_hash, phy_offset, store_timestamp)


def _int64_array(obj: object, what: str) -> memoryview:
    """A 1-D contiguous int64 view of ``obj`` (array('q'), numpy int64 ...), or of ``array('q', obj)``
    for a plain sequence (lists of ints)."""
    try:
        mv = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        return memoryview(array("q", obj))  # type: ignore[call-overload]
    if mv.ndim != 1 or mv.itemsize != 8 or mv.format not in _INT64_FORMATS or not mv.c_contiguous:
        fmt = mv.format
        mv.release()
        raise TypeError(f"{what} must be a 1-D contiguous int64 array, not format {fmt!r}")
    return mv


def index_put_batch(
    buf: object,
    slot_count: int,
    max_entries: int,
    key_hashes: Sequence[int],
    phy_offsets: Sequence[int],
    store_timestamps: Sequence[int],
    start: int,
    stop: int,
) -> int:
    """``index_put`` for items ``[start, stop)`` of three parallel int64 arrays, in order.

    Returns how many were put before the file filled up (``stop - start`` when all fit). Every key hash of
    the range is checked before anything is written. The native twin runs the loop without the GIL.

    Raises:
        TypeError: ``buf`` not a writable buffer; an array is a buffer but not 1-D contiguous int64.
        ConfigError: bad geometry.
        ValueError: ``[start, stop)`` not inside every array; a key hash outside ``[0, 2**31 - 1]``.
        OverflowError: an integer outside int64.
        IndexCorruptError: buffer shorter than the geometry, or indexCount > max_entries.
    """
    s_, n_, start, stop = _i64(slot_count), _i64(max_entries), _i64(start), _i64(stop)
    with _writable(buf) as mv:
        s, n = _geometry(s_, n_)
        with _int64_array(key_hashes, "key_hashes") as kh, _int64_array(
            phy_offsets, "phy_offsets"
        ) as po, _int64_array(store_timestamps, "store_timestamps") as st:
            if start < 0 or stop < start or stop > len(kh) or stop > len(po) or stop > len(st):
                raise ValueError(
                    f"[{start}, {stop}) is not inside arrays of lengths {len(kh)}, {len(po)}, {len(st)}"
                )
            hashes = kh[start:stop].tolist()
            for h in hashes:
                if h < 0 or h > _INT32_MAX:
                    raise ValueError(f"key_hash must be in [0, {_INT32_MAX}], not {h}")
            _check(mv, s, n)
            phys = po[start:stop].tolist()
            tss = st[start:stop].tolist()
            done = 0
            for h, p, t in zip(hashes, phys, tss, strict=True):
                if not _put(mv, s, n, h, p, t):
                    break
                done += 1
            return done


def index_select(
    buf: object,
    slot_count: int,
    max_entries: int,
    key_hash: int,
    begin: int,
    end: int,
    max_num: int,
    max_steps: int,
) -> list[int]:
    """RocketMQ ``IndexFile.selectPhyOffset``: physical offsets of entries with ``key_hash`` whose time
    ``beginTimestamp + timeDiff * 1000`` is in ``[begin, end]``, newest first, at most ``max_num``
    (``<= 0``: none), reading at most ``max_steps`` entries of the chain.

    Raises:
        TypeError: ``buf`` is not a buffer.
        ConfigError: bad geometry.
        ValueError: ``key_hash`` outside ``[0, 2**31 - 1]``; ``max_steps < 0``.
        OverflowError: an integer outside int64.
        IndexCorruptError: buffer shorter than the geometry, or indexCount > max_entries.
    """
    s_, n_ = _i64(slot_count), _i64(max_entries)
    key_hash, begin, end = _i64(key_hash), _i64(begin), _i64(end)
    max_num, max_steps = _i64(max_num), _i64(max_steps)
    with _bytes_view(buf) as mv:
        s, n = _geometry(s_, n_)
        if key_hash < 0 or key_hash > _INT32_MAX:
            raise ValueError(f"key_hash must be in [0, {_INT32_MAX}], not {key_hash}")
        if max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, not {max_steps}")
        count = _check(mv, s, n)
        out: list[int] = []
        cur = _I32.unpack_from(mv, HEADER_SIZE + SLOT_SIZE * (key_hash % s))[0]
        if cur <= 0 or cur > count or count <= 1:
            return out
        begin_ts = _Q64.unpack_from(mv, 0)[0]
        base = HEADER_SIZE + SLOT_SIZE * s
        unpack = _ENTRY.unpack_from
        while True:
            if len(out) >= max_num or max_steps <= 0 or cur >= n:
                break
            max_steps -= 1
            h, phy, time_diff, prev = unpack(mv, base + ENTRY_SIZE * cur)
            if time_diff < 0:
                break
            t = begin_ts + time_diff * 1000
            if t > _INT64_MAX:
                t -= _U64
            if h == key_hash and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > count or prev == cur or t < begin:
                break
            cur = prev
        return out
