"""Fixed-entry big-endian index search: Kafka's ``AbstractIndex.indexSlotRangeFor`` over a buffer.

Pure-Python twin of :mod:`rmqcore._native.sparse` (same names, signatures, results and exceptions).

An index buffer is ``n_entries`` fixed-size entries of ``entry_size`` bytes, big-endian, no header
(Kafka ``.index``: ``int32 relativeOffset | int32 position``; ``.timeindex``:
``int64 timestamp | int32 relativeOffset``). The searched field is the signed big-endian integer of
``field_width`` bytes (4 or 8) at ``field_pos`` inside each entry.

Search (Kafka ``indexSlotRangeFor``, KAFKA-6432): the last ``warm_entries + 1`` entries form the *warm*
section. If the first warm entry is strictly below ``target`` only the warm section is searched, so
lookups of recent data touch the last few pages only; else, if entry 0 is above ``target`` there is
no lower bound (the upper bound is slot 0); else the cold section ``[0, firstHot]`` is searched. The
binary search uses the upper middle ``(lo + hi + 1) >> 1`` and returns at once on equality, exactly as
Kafka does, so even unsorted (corrupt or zero-tailed) indexes give Kafka's answers.

On a sorted index the largest lower bound is the floor entry. Kafka's smallest upper bound is the first
entry *strictly* above ``target`` unless the search happens to probe an entry equal to it (a one-entry
range is never probed: ``[5]`` searched for 5 answers -1); this quirk is reproduced, not fixed.

Functions are pure: no I/O, no state. Argument errors raise ``ValueError``; a ``target`` outside the
signed 64-bit range raises ``OverflowError`` (as the native twin's C conversion does).
"""

from __future__ import annotations

import struct

from rmqcore.kafka_layout import LARGEST_LOWER_BOUND, SMALLEST_UPPER_BOUND, WARM_SECTION_BYTES

__all__ = [
    "LARGEST_LOWER_BOUND",
    "SMALLEST_UPPER_BOUND",
    "WARM_SECTION_BYTES",
    "index_search",
    "index_field",
]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_BE32 = struct.Struct(">i")
_BE64 = struct.Struct(">q")


def _geometry(buf: object, n_entries: int, entry_size: int, field_pos: int, field_width: int) -> memoryview:
    mv = memoryview(buf)  # type: ignore[arg-type]
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    if entry_size <= 0:
        raise ValueError(f"entry_size must be positive, not {entry_size}")
    if field_width not in (4, 8):
        raise ValueError(f"field_width must be 4 or 8, not {field_width}")
    if field_pos < 0 or field_pos + field_width > entry_size:
        raise ValueError(f"field [{field_pos}, {field_pos + field_width}) outside a {entry_size}-byte entry")
    if n_entries < 0:
        raise ValueError(f"n_entries must be >= 0, not {n_entries}")
    if n_entries * entry_size > mv.nbytes:
        raise ValueError(
            f"{n_entries} entries of {entry_size} bytes need {n_entries * entry_size} bytes, "
            f"buffer has {mv.nbytes}"
        )
    return mv


def index_field(
    buf: object, n_entries: int, entry_size: int, field_pos: int, field_width: int, slot: int
) -> int:
    """Return the signed field of entry ``slot`` (bounds-checked).

    Raises:
        ValueError: bad geometry, or ``slot`` not in ``[0, n_entries)``.
    """
    mv = _geometry(buf, n_entries, entry_size, field_pos, field_width)
    if slot < 0 or slot >= n_entries:
        raise ValueError(f"slot {slot} outside [0, {n_entries})")
    fmt = _BE32 if field_width == 4 else _BE64
    return int(fmt.unpack_from(mv, slot * entry_size + field_pos)[0])


def index_search(
    buf: object,
    n_entries: int,
    entry_size: int,
    field_pos: int,
    field_width: int,
    target: int,
    mode: int,
    warm_entries: int,
) -> int:
    """Kafka's largest-lower-bound / smallest-upper-bound slot for ``target``; -1 when there is none.

    Args:
        buf: the index bytes (bytes, bytearray, memoryview or mmap; read-only is fine).
        n_entries: live entries (``entries`` in Kafka; only they are searched).
        entry_size: bytes per entry (8 for the offset index, 12 for the time index).
        field_pos: byte position of the compared field inside an entry.
        field_width: 4 (signed int32) or 8 (signed int64).
        target: the value to compare with (for relative-offset fields: target offset - base offset).
        mode: :data:`LARGEST_LOWER_BOUND` or :data:`SMALLEST_UPPER_BOUND`.
        warm_entries: size of the warm section (Kafka: ``8192 // entry_size``).

    Raises:
        ValueError: bad geometry, mode or warm_entries.
        OverflowError: ``target`` outside the signed 64-bit range.
    """
    mv = _geometry(buf, n_entries, entry_size, field_pos, field_width)
    if mode not in (LARGEST_LOWER_BOUND, SMALLEST_UPPER_BOUND):
        raise ValueError(f"mode must be 0 (largest lower bound) or 1 (smallest upper bound), not {mode}")
    if warm_entries < 0:
        raise ValueError(f"warm_entries must be >= 0, not {warm_entries}")
    if not _INT64_MIN <= target <= _INT64_MAX:
        raise OverflowError("target does not fit a signed 64-bit integer")
    if n_entries == 0:
        return -1
    unpack = (_BE32 if field_width == 4 else _BE64).unpack_from

    def field(slot: int) -> int:
        return int(unpack(mv, slot * entry_size + field_pos)[0])

    first_hot = max(0, n_entries - 1 - warm_entries)
    if field(first_hot) < target:
        lo, hi = first_hot, n_entries - 1
    elif field(0) > target:
        return -1 if mode == LARGEST_LOWER_BOUND else 0
    else:
        lo, hi = 0, first_hot
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        found = field(mid)
        if found > target:
            hi = mid - 1
        elif found < target:
            lo = mid
        else:
            return mid
    if mode == LARGEST_LOWER_BOUND:
        return lo
    return -1 if lo == n_entries - 1 else lo + 1
