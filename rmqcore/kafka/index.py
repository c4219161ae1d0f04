"""Kafka's fixed-entry mmap indexes: ``AbstractIndex``, ``OffsetIndex`` (``.index``), ``TimeIndex``.

File layout (big-endian, no header, no checksum)::

    .index      entry = int32 relativeOffset | int32 physicalPosition          (8 bytes)
    .timeindex  entry = int64 timestamp      | int32 relativeOffset            (12 bytes)

``relativeOffset = offset - baseOffset`` must fit ``[0, Int.MAX]``. An offset-index entry
``(O, P)`` means "the append (or batch) that starts at byte P of the .log ends at offset O"; a
time-index entry ``(T, O)`` means "T is the largest timestamp seen up to the batch ending at O".

Invariants, as in Kafka:

* A new file is preallocated to ``roundDown(max_index_size, entry_size)`` zero bytes and the write
  position starts at 0. A reopened file's entry count is ``roundDown(length, entry_size) / entry_size``
  -- every slot counts, there is no scan for a zero tail -- which is why indexes are trimmed to
  their valid size on close and roll (:meth:`AbstractIndex.trim_to_valid_size`).
* :meth:`AbstractIndex.resize` keeps the entry count, zero-extends or shrinks the file and remaps it.
* The time index reserves its last slot for the entry written on roll/close (``is_full`` at
  ``max_entries - 1``).
* Searches are Kafka's ``indexSlotRangeFor`` with the 8 KiB warm section (native kernel ``sparse``).

Crash semantics: indexes are not checksummed; after an unclean shutdown they are rebuilt from the
log (``LogSegment.recover``). :meth:`sanity_check` detects the usual zero-tail damage.

Thread safety: every method takes the index's lock, so lookups never race a remap.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from rmqcore import fileops
from rmqcore.bases import ClosesOnce, ReadOnly
from rmqcore.config import bool_arg, int_arg, path_arg
from rmqcore.errors import (
    ConfigError,
    IndexCorruptError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    RmqError,
    SegmentFullError,
    StoreClosedError,
)
from rmqcore.kafka_layout import LARGEST_LOWER_BOUND, SMALLEST_UPPER_BOUND, WARM_SECTION_BYTES

from ._kernels import kernels

__all__ = [
    "AbstractIndex",
    "OffsetIndex",
    "TimeIndex",
    "OffsetPosition",
    "TimestampOffset",
    "InvalidOffsetError",
    "DEFAULT_MAX_INDEX_SIZE",
]

#: segment.index.bytes default (log.index.size.max.bytes): 10 MiB.
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_OFFSET_ENTRY = struct.Struct(">ii")
_new_tuple = tuple.__new__  # builds NamedTuples without their Python-level __new__ (hot lookups)
_TIME_ENTRY = struct.Struct(">qi")


class InvalidOffsetError(RmqError, ValueError):
    """An index append out of order (Kafka ``InvalidOffsetException``)."""


class OffsetPosition(NamedTuple):
    """An offset-index entry: absolute ``offset``, byte ``position`` in the .log."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time-index entry: ``timestamp`` (ms), absolute ``offset``."""

    timestamp: int
    offset: int


_EntryT = TypeVar("_EntryT", OffsetPosition, TimestampOffset)


def _clamp64(v: int) -> int:
    return _INT64_MIN if v < _INT64_MIN else _INT64_MAX if v > _INT64_MAX else v


class AbstractIndex(ClosesOnce, Generic[_EntryT]):
    """A file of fixed-size entries mapped into memory (Kafka ``AbstractIndex``).

    Args:
        path: the index file.
        base_offset: the segment's base offset (entries store offsets relative to it).
        max_index_size: ``segment.index.bytes``: the preallocated size of a new file and the size
            :meth:`resize` re-expands an active index to.
        writable: map read-write (and create the file if missing); read-only otherwise. A read-only
            index whose file does not exist is empty.
        impl: kernel implementation ("native", "pure" or None for the process default).

    Raises:
        ConfigError: ``max_index_size`` smaller than one entry when a file must be created.
        OSError: the file cannot be opened or mapped.
    """

    ENTRY_SIZE = 0
    KEY_POS = KEY_WIDTH = VALUE_POS = VALUE_WIDTH = 0
    KIND = "index"
    _ENTRY: struct.Struct  # an entry's two fields, as stored
    _NAME_IN_ERRORS = "index"  # as Kafka's messages call the file
    _OFFSET_IS_KEY = True  # truncate_to searches the key field (False: the value field holds the offset)

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
        impl: str | None = None,
    ) -> None:
        self.path = path_arg(path, "path")
        self.base_offset = int_arg(base_offset, "base_offset")
        self.max_index_size = int_arg(max_index_size, "max_index_size")
        if not 0 <= self.base_offset <= _INT64_MAX or not 0 <= self.max_index_size <= _INT32_MAX:
            raise ConfigError(
                f"base offset {self.base_offset} or max index size {self.max_index_size} is out of range")
        writable = bool_arg(writable, "writable")
        self.writable = writable
        self._k = kernels(impl)
        self._search = self._k.sparse.index_search
        self._lock = threading.RLock()
        self._fd = -1
        self._mmap: mmap.mmap | None = None
        self._length = 0
        self._entries = 0
        self._max_entries = 0
        self._closed = False
        self.warm_entries = WARM_SECTION_BYTES // self.ENTRY_SIZE
        es = self.ENTRY_SIZE
        if writable:
            newly_created = not self.path.exists()
            if newly_created and self.max_index_size < es:
                raise ConfigError(f"Invalid max index size: {self.max_index_size}")
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if newly_created:
                size = self.max_index_size - self.max_index_size % es
                try:
                    # allocated, where Kafka leaves it sparse: on a full disk the first write to an
                    # unallocated page through the map would be a SIGBUS that kills the process
                    os.ftruncate(self._fd, size)
                    fileops.allocate(self._fd, self.path, 0, size)
                except BaseException:
                    os.close(self._fd)
                    self._fd = -1
                    self.path.unlink(missing_ok=True)
                    raise
        else:
            newly_created = False
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                self._fd = -1
        self._length = os.fstat(self._fd).st_size if self._fd >= 0 else 0
        self._map()
        self._entries = 0 if newly_created else (self._length - self._length % es) // es
        self._max_entries = self._length // es
        self._entries_changed()

    # --- mapping -----------------------------------------------------------------------------------
    def _map(self) -> None:
        if self._length == 0 or self._fd < 0:
            self._mmap = None
            return
        access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
        self._mmap = mmap.mmap(self._fd, self._length, access=access)

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def _buf(self) -> Any:
        m = self._mmap
        if m is not None:
            return m
        if self._closed:
            raise StoreClosedError(f"index {self.path} is closed")
        return b""

    def _require_writable(self) -> None:
        if not self.writable:
            raise ReadOnlyError(f"index {self.path} is open read-only")

    # --- sizes -------------------------------------------------------------------------------------
    entries = ReadOnly[int]("_entries", "Live entries (Kafka ``entries()``).")
    max_entries = ReadOnly[int]("_max_entries",
                                "Slots the current file length holds (``length // entry_size``).")
    length = ReadOnly[int]("_length", "Current file length in bytes.")

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    # --- entries -----------------------------------------------------------------------------------
    def _make_entry(self, first: int, second: int) -> _EntryT:
        """The entry whose stored fields are ``(first, second)`` (its relative offset made absolute)."""
        raise NotImplementedError

    def entry(self, n: int) -> _EntryT:
        """Entry ``n`` (absolute offset).

        Raises:
            OffsetOutOfRangeError: ``n`` is not a live entry (an IndexError).
        """
        n = int_arg(n, "n")
        with self._lock:
            if not 0 <= n < self._entries:
                raise OffsetOutOfRangeError(
                    f"Attempt to fetch the {n}th entry from {self._NAME_IN_ERRORS} {self.path}, "
                    f"which has size {self._entries}."
                )
            return self._make_entry(*self._ENTRY.unpack_from(self._buf(), n * self.ENTRY_SIZE))

    def entries_list(self) -> list[_EntryT]:
        """Every live entry."""
        with self._lock:
            live = self._buf()[: self._entries * self.ENTRY_SIZE]
            return [self._make_entry(a, b) for a, b in self._ENTRY.iter_unpack(live)]

    def _relative(self, offset: int) -> int:
        """``offset - base_offset``, which an entry stores as an int32.

        Raises:
            OffsetOutOfRangeError: it does not fit ``[0, Int.MAX]``.
        """
        rel = offset - self.base_offset
        if not 0 <= rel <= _INT32_MAX:
            raise OffsetOutOfRangeError(
                f"Integer overflow for offset: {offset} ({self.path}): "
                f"not relative to base {self.base_offset}"
            )
        return rel

    # --- search ------------------------------------------------------------------------------------
    def _slot(self, target: int, key: bool, mode: int) -> int:
        pos, width = (self.KEY_POS, self.KEY_WIDTH) if key else (self.VALUE_POS, self.VALUE_WIDTH)
        if not _INT64_MIN <= target <= _INT64_MAX:
            target = _clamp64(target)
        return int(
            self._search(
                self._buf(), self._entries, self.ENTRY_SIZE, pos, width, target, mode, self.warm_entries
            )
        )

    def _field(self, slot: int, pos: int, width: int) -> int:
        fmt = ">i" if width == 4 else ">q"
        return int(struct.unpack_from(fmt, self._buf(), slot * self.ENTRY_SIZE + pos)[0])

    # --- mutation ----------------------------------------------------------------------------------
    def resize(self, new_size: int) -> bool:
        """Set the file length to ``roundDown(new_size, entry_size)``, keeping the entries.

        Returns:
            False when the length is already that, True after resizing.

        Raises:
            ReadOnlyError: read-only index (a PermissionError).
            ConfigError: the new size cannot hold the live entries (a ValueError).
        """
        new_size = int_arg(new_size, "new_size")
        with self._lock:
            self._require_writable()
            rounded = new_size - new_size % self.ENTRY_SIZE
            if self._length == rounded:
                return False
            if rounded < self._entries * self.ENTRY_SIZE or rounded > _INT32_MAX:
                raise ConfigError(
                    f"cannot resize {self.path} to {rounded} bytes: it holds {self._entries} entries"
                )
            self._unmap()
            os.ftruncate(self._fd, rounded)
            if rounded > self._length:
                try:
                    fileops.allocate(self._fd, self.path, self._length, rounded - self._length)
                except BaseException:
                    os.ftruncate(self._fd, self._length)
                    self._map()
                    raise
            self._length = rounded
            self._max_entries = rounded // self.ENTRY_SIZE
            self._map()
            self._entries_changed()
            return True

    def _entries_changed(self) -> None:
        """Re-read what a subclass keeps of its last entry (on open, after a truncation or a resize)."""

    def trim_to_valid_size(self) -> None:
        """Shrink the file to the live entries (on close and roll)."""
        with self._lock:
            self.resize(self._entries * self.ENTRY_SIZE)

    def truncate(self) -> None:
        """Drop every entry (the file keeps its length)."""
        with self._lock:
            self._truncate_to_entries(0)

    def reset(self) -> None:
        """Drop every entry and re-expand the file to ``max_index_size``."""
        with self._lock:
            self.truncate()
            self.resize(self.max_index_size)

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = entries
        self._entries_changed()

    def truncate_to(self, offset: int) -> None:
        """Kafka ``truncateTo``: remove entries with offset >= ``offset``."""
        offset = int_arg(offset, "offset")
        with self._lock:
            self._truncate_to_slot(offset)

    def _truncate_to_slot(self, offset: int) -> None:
        # slot = largest entry <= offset; drop it too when it is exactly offset (Kafka truncateTo).
        slot = self._slot(offset - self.base_offset, self._OFFSET_IS_KEY, LARGEST_LOWER_BOUND)
        if slot < 0:
            n = 0
        elif self._relative_offset(slot) == offset - self.base_offset:
            n = slot
        else:
            n = slot + 1
        self._truncate_to_entries(n)

    def _relative_offset(self, slot: int) -> int:
        """The relative offset stored in entry ``slot``: its key field or its value field."""
        if self._OFFSET_IS_KEY:
            return self._field(slot, self.KEY_POS, self.KEY_WIDTH)
        return self._field(slot, self.VALUE_POS, self.VALUE_WIDTH)

    def flush(self) -> None:
        """msync the mapped file (without the GIL when the native kernels are in use)."""
        from rmqcore import _impl

        with self._lock:
            if self._mmap is not None and self.writable:
                _impl.kernel("appender", self._k.name).sync_range(self._mmap, 0, len(self._mmap))

    def _finish_writes(self) -> None:  # close: trim to the valid size, then unmap
        self.trim_to_valid_size()

    def delete_if_exists(self) -> bool:
        """Close and delete the file."""
        with self._lock:
            self.close_handler()
            try:
                self.path.unlink()
            except FileNotFoundError:
                return False
            return True

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        with self._lock:
            os.replace(self.path, path)
            self.path = Path(path)

    def sanity_check(self) -> None:
        """Kafka ``sanityCheck``: a non-empty index's last entry is sound, and the file holds whole entries.

        Raises:
            IndexCorruptError: see :meth:`_check_last_entry` and :meth:`_check_length`.
        """
        with self._lock:
            if self._entries != 0:
                self._check_last_entry()
            self._check_length()

    def _check_last_entry(self) -> None:
        """sanityCheck's entry-specific test, on a non-empty index (under the lock)."""
        raise NotImplementedError

    def _corrupt(self, detail: str, slot: int) -> IndexCorruptError:
        return IndexCorruptError(detail, max(slot, 0) * self.ENTRY_SIZE, str(self.path))

    def _check_length(self) -> None:
        """sanityCheck's last test: the file holds whole entries.

        Raises:
            IndexCorruptError: the length is not a multiple of the entry size.
        """
        es = self.ENTRY_SIZE
        if self._length % es != 0:
            raise self._corrupt(
                f"{self._NAME_IN_ERRORS.capitalize()} file {self.path.name} is corrupt, found {self._length} "
                f"bytes which is neither positive nor a multiple of {es}",
                self._length // es,
            )

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.path.name} base={self.base_offset} "
            f"entries={self._entries}/{self._max_entries}>"
        )


class OffsetIndex(AbstractIndex[OffsetPosition]):
    """``.index``: 8-byte entries ``int32 relativeOffset | int32 position`` (Kafka ``OffsetIndex``)."""

    ENTRY_SIZE = 8
    KEY_POS, KEY_WIDTH = 0, 4
    VALUE_POS, VALUE_WIDTH = 4, 4
    KIND = "offset index"
    _ENTRY = _OFFSET_ENTRY
    _last_offset: int  # the last entry's offset, read on open by _entries_changed

    def _read_last_offset(self) -> int:
        if self._entries == 0:
            return self.base_offset
        return self.base_offset + self._relative_offset(self._entries - 1)

    last_offset = ReadOnly[int]("_last_offset", "Offset of the last entry, or the base offset when empty.")

    def _make_entry(self, rel: int, position: int) -> OffsetPosition:
        return OffsetPosition(self.base_offset + rel, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``; ``(base_offset, 0)`` when none."""
        base = self.base_offset
        if type(target_offset) is not int:
            target_offset = int_arg(target_offset, "target_offset")
        target = target_offset - base
        if not _INT64_MIN <= target <= _INT64_MAX:
            target = _clamp64(target)
        with self._lock:
            buf = self._buf()
            slot = self._search(buf, self._entries, 8, 0, 4, target, 0, self.warm_entries)
            if slot == -1:
                return _new_tuple(OffsetPosition, (base, 0))
            rel, pos = _OFFSET_ENTRY.unpack_from(buf, slot * 8)
            return _new_tuple(OffsetPosition, (base + rel, pos))

    def fetch_upper_bound_offset(self, fetch_position: int, fetch_size: int) -> OffsetPosition | None:
        """The first entry whose position >= ``fetch_position + fetch_size`` (Kafka's search), or None."""
        fetch_position = int_arg(fetch_position, "fetch_position")
        fetch_size = int_arg(fetch_size, "fetch_size")
        with self._lock:
            slot = self._slot(fetch_position + fetch_size, False, SMALLEST_UPPER_BOUND)
            if slot == -1:
                return None
            rel, pos = struct.unpack_from(">ii", self._buf(), slot * 8)
            return OffsetPosition(self.base_offset + rel, pos)

    def append(self, offset: int, position: int) -> None:
        """Append ``(offset, position)``.

        Raises:
            SegmentFullError: the index is full (the segment should have rolled).
            InvalidOffsetError: ``offset`` is not above the last offset.
            OffsetOutOfRangeError: ``offset`` is not relative-able to the base offset.
        """
        offset, position = int_arg(offset, "offset"), int_arg(position, "position")
        with self._lock:
            self._require_writable()
            if self.is_full():
                raise SegmentFullError(f"Attempt to append to a full index (size = {self._entries}).")
            if self._entries != 0 and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to position {self._entries} no larger than "
                    f"the last offset appended ({self._last_offset}) to {self.path}."
                )
            rel = self._relative(offset)
            if not 0 <= position <= _INT32_MAX:
                raise OffsetOutOfRangeError(f"position {position} does not fit int32")
            struct.pack_into(">ii", self._buf(), self._entries * 8, rel, position)
            self._entries += 1
            self._last_offset = offset

    def append_many(self, offsets: Any, positions: Any) -> None:
        """``append`` for many entries at once (increasing offsets), validated once, written in bulk.

        Raises:
            SegmentFullError, InvalidOffsetError, OffsetOutOfRangeError: as ``append``.
        """
        import numpy as np

        offs = np.asarray(offsets, dtype=np.int64)
        pos = np.asarray(positions, dtype=np.int64)
        n = len(offs)
        if n == 0:
            return
        with self._lock:
            self._require_writable()
            if self._entries + n > self._max_entries:
                raise SegmentFullError(f"Attempt to append to a full index (size = {self._entries}).")
            if (self._entries and offs[0] <= self._last_offset) or (n > 1 and (np.diff(offs) <= 0).any()):
                raise InvalidOffsetError(f"offsets must increase past {self._last_offset} in {self.path}")
            rel = offs - self.base_offset
            if rel.min() < 0 or rel.max() > _INT32_MAX or pos.min() < 0 or pos.max() > _INT32_MAX:
                raise OffsetOutOfRangeError(f"entries not relative-able to base {self.base_offset} ({self.path})")
            out = np.empty((n, 2), dtype=">i4")
            out[:, 0] = rel
            out[:, 1] = pos
            start = self._entries * 8
            self._buf()[start : start + n * 8] = out.tobytes()
            self._entries += n
            self._last_offset = int(offs[-1])

    def _entries_changed(self) -> None:
        self._last_offset = self._read_last_offset()

    def _check_last_entry(self) -> None:
        """Kafka ``OffsetIndex.sanityCheck``.

        Raises:
            IndexCorruptError: the last offset is below the base offset.
        """
        if self._last_offset < self.base_offset:
            raise self._corrupt(
                f"Corrupt index found, index file ({self.path.name}) has non-zero size but the last "
                f"offset is {self._last_offset} which is less than the base offset {self.base_offset}",
                self._entries - 1,
            )


class TimeIndex(AbstractIndex[TimestampOffset]):
    """``.timeindex``: 12-byte entries ``int64 timestamp | int32 relativeOffset`` (Kafka ``TimeIndex``)."""

    ENTRY_SIZE = 12
    KEY_POS, KEY_WIDTH = 0, 8
    VALUE_POS, VALUE_WIDTH = 8, 4
    KIND = "time index"
    _ENTRY = _TIME_ENTRY
    _NAME_IN_ERRORS = "time index"
    _OFFSET_IS_KEY = False  # the offset is the value field
    _last_entry: TimestampOffset  # read on open by _entries_changed

    def _read_last_entry(self) -> TimestampOffset:
        if self._entries == 0:
            return TimestampOffset(-1, self.base_offset)
        ts, rel = struct.unpack_from(">qi", self._buf(), (self._entries - 1) * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def is_full(self) -> bool:
        """Full one slot early: the last slot is kept for the entry written on roll/close."""
        return self._entries >= self._max_entries - 1

    last_entry = ReadOnly[TimestampOffset]("_last_entry",
                                           "The last entry, or ``(-1, base_offset)`` when empty.")

    def _make_entry(self, timestamp: int, rel: int) -> TimestampOffset:
        return TimestampOffset(timestamp, self.base_offset + rel)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp``; ``(-1, base_offset)`` when none."""
        target = target_timestamp
        if type(target) is not int:
            target = int_arg(target, "target_timestamp")
        if not _INT64_MIN <= target <= _INT64_MAX:
            target = _clamp64(target)
        with self._lock:
            buf = self._buf()
            slot = self._search(buf, self._entries, 12, 0, 8, target, 0, self.warm_entries)
            if slot == -1:
                return _new_tuple(TimestampOffset, (-1, self.base_offset))
            ts, rel = _TIME_ENTRY.unpack_from(buf, slot * 12)
            return _new_tuple(TimestampOffset, (ts, self.base_offset + rel))

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append ``(timestamp, offset)`` if ``timestamp`` is above the last entry's.

        Returns:
            Whether an entry was written.

        Raises:
            SegmentFullError: the index is full (only the reserved slot is left and
                ``skip_full_check`` is false, or no slot at all).
            InvalidOffsetError: ``offset`` below the last entry's offset, or ``timestamp`` below the
                last entry's timestamp.
            OffsetOutOfRangeError: ``offset`` not relative-able.
        """
        timestamp, offset = int_arg(timestamp, "timestamp"), int_arg(offset, "offset")
        with self._lock:
            self._require_writable()
            if not skip_full_check and self.is_full():
                raise SegmentFullError(f"Attempt to append to a full time index (size = {self._entries}).")
            last = self._last_entry
            if self._entries != 0 and offset < last.offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {self._entries} no larger than the "
                    f"last offset appended ({last.offset}) to {self.path}."
                )
            if self._entries != 0 and timestamp < last.timestamp:
                raise InvalidOffsetError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger than "
                    f"the last timestamp appended ({last.timestamp}) to {self.path}."
                )
            if timestamp <= last.timestamp:
                return False
            if self._entries >= self._max_entries:
                raise SegmentFullError(f"No slot left in time index {self.path} (size = {self._entries}).")
            rel = self._relative(offset)
            struct.pack_into(">qi", self._buf(), self._entries * 12, timestamp, rel)
            self._entries += 1
            self._last_entry = TimestampOffset(timestamp, offset)
            return True

    def append_many(self, timestamps: Any, offsets: Any) -> None:
        """Bulk ``maybe_append`` of entries whose timestamps strictly increase past the last entry's
        (callers pass only growing maxima); validated once, written at once."""
        import numpy as np

        ts = np.asarray(timestamps, dtype=np.int64)
        offs = np.asarray(offsets, dtype=np.int64)
        n = len(ts)
        if n == 0:
            return
        with self._lock:
            self._require_writable()
            last = self._last_entry
            if self._entries + n > self._max_entries:
                raise SegmentFullError(f"No slot left in time index {self.path} (size = {self._entries}).")
            if (self._entries and (ts[0] <= last.timestamp or offs[0] < last.offset)) or (
                    n > 1 and ((np.diff(ts) <= 0).any() or (np.diff(offs) < 0).any())):
                raise InvalidOffsetError(f"time index entries must grow past {last} in {self.path}")
            rel = offs - self.base_offset
            if rel.min() < 0 or rel.max() > _INT32_MAX:
                raise OffsetOutOfRangeError(f"entries not relative-able to base {self.base_offset} ({self.path})")
            out = np.zeros(n, dtype=[("t", ">i8"), ("o", ">i4")])
            out["t"] = ts
            out["o"] = rel
            start = self._entries * 12
            self._buf()[start : start + n * 12] = out.tobytes()
            self._entries += n
            self._last_entry = TimestampOffset(int(ts[-1]), int(offs[-1]))

    def _entries_changed(self) -> None:
        self._last_entry = self._read_last_entry()

    def _check_last_entry(self) -> None:
        """Kafka ``TimeIndex.sanityCheck``.

        Raises:
            IndexCorruptError: the last timestamp is below the first (a zero tail), the last offset is
                below the base offset.
        """
        last_ts, last_off = self._last_entry
        first_ts = self._field(0, 0, 8)
        if last_ts < first_ts:
            raise self._corrupt(
                f"Corrupt time index found, time index file ({self.path.name}) has non-zero size "
                f"but the last timestamp is {last_ts} which is less than the first timestamp "
                f"{first_ts}",
                self._entries - 1,
            )
        if last_off < self.base_offset:
            raise self._corrupt(
                f"Corrupt time index found, time index file ({self.path.name}) has non-zero size "
                f"but the last offset is {last_off} which is less than the first offset "
                f"{self.base_offset}",
                self._entries - 1,
            )
