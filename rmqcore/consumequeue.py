"""ConsumeQueue: the per topic/queue index of a RocketMQ store (``consumequeue/<topic>/<queueId>/``).

Unit (20 bytes, big-endian; ConsumeQueue.CQ_STORE_UNIT_SIZE)::

    0  8  commitLogOffset   physical offset of the record
    8  4  size              record size
   12  8  tagsCode          hash of TAGS (sign-extended), delivery time for SCHEDULE_TOPIC_XXXX

Files are fixed-size (300,000 units by default), named by the 20-digit *byte* offset of their first
unit (= first queue offset × 20). The unit of queue offset ``q`` is at global byte ``q × 20``.
A queue whose first file is created for an offset > 0 is padded with filler units
``(0, 0x7FFFFFFF, 0)`` and its min offset starts there (fillPreBlank).

Publication: each unit is written with its size last (``notify.publish_units``, a release store),
so a reader in another process that sees a unit's size sees the whole unit (``rmqcore.live``).

Crash semantics: rebuilt from the CommitLog on recovery (dispatch is idempotent: a unit whose
record ends at or before ``max_physic_offset`` is skipped); units recovery cuts are zeroed, so no
later open reads them again. File mtimes are set to the store time of each file's last unit
(``stamp_mtimes``), as RocketMQ 4.x's time lookup expects. Thread-safety: one writer (dispatch);
readers see complete units below the write position.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _impl
from . import layout as L
from .config import int_arg
from .errors import ConfigError, InvalidTopicError
from .mappedfile import MappedFile, MappedFileQueue, MapPool
from .wire import utf8_text

if TYPE_CHECKING:
    from .spares import SpareFiles

__all__ = ["ConsumeQueue", "check_topic_dir", "BLANK_UNIT", "BOUNDARY_LOWER", "BOUNDARY_UPPER", "BOUNDARY_NEAREST", "put_grouped"]

_UNIT = struct.Struct(">qiq")
UNIT = L.CQ_UNIT_SIZE
BLANK_UNIT = (0, 0x7FFFFFFF, 0)  # ConsumeQueue.fillPreBlank filler
BOUNDARY_LOWER = "lower"
BOUNDARY_UPPER = "upper"
BOUNDARY_NEAREST = "nearest"  # RocketMQ 4.x getOffsetInQueueByTime(ts): the closest unit
_UNIT_DTYPE = np.dtype(L.CQ_UNIT_FIELDS)
_ZERO_UNIT = bytes(UNIT)


def _units(mf: MappedFile, count: int, pos: int = 0) -> np.ndarray:
    """``count`` units of a file from byte ``pos``, copied out of the map (no view into the map
    outlives the call, so the file can always be closed)."""
    return np.frombuffer(mf.mm[pos : pos + count * UNIT], dtype=_UNIT_DTYPE)


def put_grouped(queue_of: Callable[[int], ConsumeQueue], keys: np.ndarray, phys: np.ndarray, sizes: np.ndarray,
                tags: np.ndarray, qoffs: np.ndarray) -> None:
    """``put_many`` for units of many queues: ``keys[i]`` names unit i's queue (``queue_of(key)``
    gives it); each queue gets its units in the given (CommitLog) order. One vector pass per
    queue while there are few (the usual case), a stable sort for the rest."""
    idx = np.arange(len(keys))
    groups: list[tuple[int, np.ndarray]] = []
    while len(keys) and len(groups) < 8:
        g = int(keys[0])
        m = keys == g
        if m.all():
            groups.append((g, idx))
            keys = keys[:0]
            break
        groups.append((g, idx[m]))
        rest = ~m
        keys, idx = keys[rest], idx[rest]
    if len(keys):
        order = np.argsort(keys, kind="stable")
        sk, si = keys[order], idx[order]
        cuts = np.flatnonzero(np.diff(sk)) + 1
        groups.extend((int(sk[c[0]]), si[c]) for c in np.split(np.arange(len(sk)), cuts))
    for g, i in groups:
        queue_of(g).put_many(phys[i], sizes[i], tags[i], qoffs[i])


def check_topic_dir(topic: object) -> None:
    """A topic names a directory, ``consumequeue/<topic>/``: a str that is one path component
    (not empty, ``.`` or ``..``, no ``/``, ``\\`` or NUL), so that no topic, from an argument or
    from a record in a file, reaches outside the store; and UTF-8 text (no lone surrogate), as the
    topic of a record and a broker's directory name are.

    Raises:
        InvalidTopicError: it is not.
    """
    if not isinstance(topic, str) or topic in ("", ".", "..") or any(c in topic for c in "/\\\0"):
        raise InvalidTopicError(f"topic {topic!r} cannot name a consume-queue directory")
    if not topic.isascii():
        utf8_text(topic, "topic", InvalidTopicError)


class ConsumeQueue:
    """One consume queue (a topic and queue id)."""

    def __init__(
        self, store_dir: str | Path, topic: str, queue_id: int, *, file_size: int = L.DEFAULT_CQ_FILE_SIZE,
        read_only: bool = False, huge_pages: bool = False, pool: MapPool | None = None,
        spares: SpareFiles | None = None,
    ) -> None:
        if file_size <= 0 or file_size % UNIT:
            raise ConfigError(f"consume queue file size must be a positive multiple of 20, not {file_size}")
        check_topic_dir(topic)
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.read_only = read_only
        self.directory = Path(store_dir) / "consumequeue" / topic / str(queue_id)
        # with a pool (a store's), its files are mapped while used, at most the pool's budget at once
        # with spares (a writing store's), a new file is a spare made ahead (spares.py)
        self.queue = MappedFileQueue(self.directory, file_size, read_only=read_only, huge_pages=huge_pages,
                                     pool=pool, spares=spares)
        self.min_logic_offset = 0  # bytes
        self.max_physic_offset = -1  # offset + size of the last unit
        self._stamped: dict[int, int] = {}  # file start -> write position when its mtime was set

    # -- loading / recovery ---------------------------------------------------------------------
    def load(self) -> None:
        self.queue.load()

    def recover(self) -> None:
        """ConsumeQueue.recover: from the third-last file, keep units while offset >= 0 and size > 0."""
        files = self.queue.files
        if not files:
            return
        i = max(0, len(files) - 3)
        process = files[i].file_from_offset
        max_phys = -1
        while True:
            mf = files[i]
            units = _units(mf, mf.file_size // UNIT)
            bad = np.flatnonzero((units["offset"] < 0) | (units["size"] <= 0))
            n = int(bad[0]) if len(bad) else len(units)
            if n:
                last = units[n - 1]
                max_phys = int(last["offset"]) + int(last["size"])
            if n == len(units) and i + 1 < len(files):
                i += 1
                process = files[i].file_from_offset
                continue
            process = mf.file_from_offset + n * UNIT
            if n < len(units) and not self.read_only and units[n].tobytes() != _ZERO_UNIT:
                # an invalid unit with bytes after it: a later write must not make them units again
                mf.zero(n * UNIT, mf.data_end(n * UNIT))
            break
        self.max_physic_offset = max_phys
        self._set_end(process)

    def _set_end(self, end: int) -> None:
        if self.read_only:
            for mf in self.queue.files:
                mf.wrote_position = mf.flushed_position = min(max(end - mf.file_from_offset, 0), mf.file_size)
        else:
            self.queue.truncate_dirty(end)

    # -- offsets --------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        """getMinOffsetInQueue."""
        return self.min_logic_offset // UNIT

    @property
    def max_offset(self) -> int:
        """getMaxOffsetInQueue: one past the last unit."""
        return self.queue.max_offset() // UNIT

    def _file_for(self, queue_offset: int) -> tuple[MappedFile, int] | None:
        byte = queue_offset * UNIT
        if not self.queue.files or byte < self.queue.min_offset() or byte >= self.queue.max_offset():
            return None
        mf = self.queue.find(byte)
        return mf, byte - mf.file_from_offset

    def get(self, queue_offset: int) -> tuple[int, int, int] | None:
        """The unit at ``queue_offset`` as (physical offset, size, tags code), None if absent.

        Raises:
            ConfigError: ``queue_offset`` is not an integer.
        """
        queue_offset = int_arg(queue_offset, "queue_offset")
        loc = self._file_for(queue_offset)
        if loc is None or queue_offset < self.min_offset:
            return None
        mf, pos = loc
        return _UNIT.unpack_from(mf.mm, pos)

    def pull_span(self, queue_offset: int, max_units: int) -> tuple[int, int, MappedFile | None, int, int]:
        """What a pull needs, read in one pass: ``(min_offset, max_offset, file, byte position,
        count)``: the queue's bounds and where up to ``max_units`` units from ``queue_offset`` are,
        within one file (the file None and the count 0 when no file holds the offset)."""
        lo = self.min_logic_offset // UNIT
        files = self.queue.files
        if not files:
            return lo, 0, None, 0, 0
        last = files[-1]
        end = last.file_from_offset + last.wrote_position
        byte = queue_offset * UNIT
        if byte < files[0].file_from_offset or byte >= end:
            return lo, end // UNIT, None, 0, 0
        mf = last if byte >= last.file_from_offset else self.queue.find(byte)
        pos = byte - mf.file_from_offset
        return lo, end // UNIT, mf, pos, max(0, min(max_units, (mf.wrote_position - pos) // UNIT))

    def first_at_or_after(self, physical_offset: int) -> int:
        """The first queue offset (>= min offset) whose unit's record starts at or after
        ``physical_offset``; ``max_offset`` when none. Binary search over the mapped units, no copy.

        Raises:
            ConfigError: ``physical_offset`` is not an integer.
        """
        physical_offset = int_arg(physical_offset, "physical_offset")
        unpack = _UNIT.unpack_from
        lo_global = self.min_logic_offset
        for mf in self.queue.files:
            n = mf.wrote_position // UNIT
            if n == 0 or mf.file_end_offset <= lo_global:
                continue
            mm = mf.mm  # once: each use of a pooled file's map counts as a use
            if unpack(mm, (n - 1) * UNIT)[0] < physical_offset:
                continue
            lo = max(0, (lo_global - mf.file_from_offset) // UNIT)
            hi = n - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if unpack(mm, mid * UNIT)[0] < physical_offset:
                    lo = mid + 1
                else:
                    hi = mid
            return (mf.file_from_offset + lo * UNIT) // UNIT
        return self.max_offset

    def all_units(self) -> np.ndarray:
        parts = [_units(mf, mf.wrote_position // UNIT) for mf in self.queue.files]
        return np.concatenate(parts) if parts else np.empty(0, dtype=_UNIT_DTYPE)

    # -- writing (dispatch) -------------------------------------------------------------------------
    def put(self, physical_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """putMessagePositionInfo: write the unit of ``queue_offset``; idempotent on re-dispatch.

        Returns False when the unit was already there (skipped)."""
        if physical_offset + size <= self.max_physic_offset:
            return False
        expected = queue_offset * UNIT
        mf = self._writable(expected)
        current = mf.file_from_offset + mf.wrote_position
        if expected != 0 and expected < current:
            return False  # built repeatedly
        pos = mf.wrote_position
        _impl.notify.publish_units(mf.mm, pos, _UNIT.pack(physical_offset, size, tags_code))
        mf.wrote_position = pos + UNIT
        self.max_physic_offset = physical_offset + size
        return True

    def put_many(self, phys: np.ndarray, sizes: np.ndarray, tags: np.ndarray, qoffs: np.ndarray) -> int:
        """``put`` for many units of this queue in CommitLog order (vectorised); returns units written."""
        keep = (phys + sizes) > self.max_physic_offset
        if not keep.all():
            phys, sizes, tags, qoffs = phys[keep], sizes[keep], tags[keep], qoffs[keep]
        n = len(phys)
        written = 0
        i = 0
        while i < n:
            expected = int(qoffs[i]) * UNIT
            mf = self._writable(expected)
            current = mf.file_from_offset + mf.wrote_position
            if expected != 0 and expected < current:
                i += 1  # built repeatedly
                continue
            room = (self.file_size - mf.wrote_position) // UNIT
            run = min(room, n - i)
            # a run continues while queue offsets stay consecutive (the normal case)
            q = qoffs[i : i + run]
            breaks = np.flatnonzero(np.diff(q) != 1)
            if len(breaks):
                run = int(breaks[0]) + 1
            units = np.empty(run, dtype=_UNIT_DTYPE)
            units["offset"] = phys[i : i + run]
            units["size"] = sizes[i : i + run]
            units["tags"] = tags[i : i + run]
            pos = mf.wrote_position
            _impl.notify.publish_units(mf.mm, pos, units.tobytes())
            mf.wrote_position = pos + run * UNIT
            self.max_physic_offset = int(phys[i + run - 1]) + int(sizes[i + run - 1])
            written += run
            i += run
        return written

    def _writable(self, expected: int) -> MappedFile:
        q = self.queue
        last = q.last()
        if last is not None and not last.is_full():
            return last
        if last is None:
            start = expected - expected % self.file_size
            mf = q.last_for_write(start)
            if expected != 0 and start == mf.file_from_offset:
                self._fill_pre_blank(mf, expected)
            return mf
        return q.last_for_write(last.file_end_offset)

    def _fill_pre_blank(self, mf: MappedFile, until: int) -> None:
        n = (until - mf.file_from_offset) // UNIT
        if n > 0:
            blank = _UNIT.pack(*BLANK_UNIT) * n
            _impl.notify.publish_units(mf.mm, 0, blank)
            mf.wrote_position = len(blank)
        self.min_logic_offset = until

    # -- maintenance ------------------------------------------------------------------------------
    def correct_min_offset(self, commitlog_min: int) -> None:
        """Set the min offset to the first unit whose record still exists (correctMinOffset)."""
        files = self.queue.files
        if not files:
            return
        last = self.get(self.max_offset - 1) if self.max_offset > 0 else None
        if last is None or last[0] < commitlog_min:
            self.min_logic_offset = self.queue.max_offset()
            return
        first = files[0]
        units = _units(first, first.wrote_position // UNIT)
        ok = np.flatnonzero((units["offset"] >= commitlog_min) & (units["size"] > 0) & ~(
            (units["offset"] == 0) & (units["size"] == 0x7FFFFFFF)))
        if len(ok):
            self.min_logic_offset = max(self.min_logic_offset, first.file_from_offset + int(ok[0]) * UNIT)
        elif len(files) > 1:
            self.min_logic_offset = max(self.min_logic_offset, files[1].file_from_offset)

    def truncate_dirty(self, physical_offset: int) -> None:
        """truncateDirtyLogicFiles: drop units whose record starts at or after ``physical_offset``."""
        q = self.queue
        files = list(q.files)
        while files:
            mf = files[-1]
            units = _units(mf, mf.wrote_position // UNIT)
            if len(units) == 0 or (units[0]["offset"] >= physical_offset and not (
                    units[0]["offset"] == 0 and units[0]["size"] == 0x7FFFFFFF)):
                if len(files) == 1 and len(units) == 0:
                    break
                files.pop()
                q.files.remove(mf)
                if self.read_only:
                    mf.close()  # dropped from view; the file stays on disk
                else:
                    mf.destroy()
                self.max_physic_offset = -1
                continue
            keep = np.flatnonzero((units["offset"] < 0) | (units["size"] <= 0) | (units["offset"] >= physical_offset))
            n = int(keep[0]) if len(keep) else len(units)
            # filler units (0, MAX) count as kept
            while n < len(units) and units[n]["offset"] == 0 and units[n]["size"] == 0x7FFFFFFF:
                n += 1
            self._cut_file(mf, n * UNIT)
            if n:
                self.max_physic_offset = int(units[n - 1]["offset"]) + int(units[n - 1]["size"])
            break
        if not files:
            self.min_logic_offset = 0

    def _cut_file(self, mf: MappedFile, pos: int) -> None:
        """End ``mf``'s units at ``pos``; the units cut are zeroed (not in a read-only view), so
        that no later recovery reads them as units again."""
        if mf.wrote_position > pos and not self.read_only:
            mf.zero(pos, mf.wrote_position)
        mf.wrote_position = mf.flushed_position = pos
        self._stamped.pop(mf.file_from_offset, None)  # rewritten from here: its mtime is set again

    def truncate_units(self, queue_offset: int) -> None:
        """Drop the units from ``queue_offset`` on (zeroed, later files deleted): a check found the
        unit there wrong, and dispatch rebuilds them from the CommitLog."""
        byte = queue_offset * UNIT
        q = self.queue
        for mf in reversed(list(q.files)):
            if mf.file_from_offset >= byte and mf is not q.files[0]:
                q.files.remove(mf)
                mf.destroy()
                continue
            self._cut_file(mf, max(0, byte - mf.file_from_offset))
            break
        last = self.get(queue_offset - 1) if queue_offset > self.min_offset else None
        self.max_physic_offset = last[0] + last[1] if last is not None and last[1] != 0x7FFFFFFF else -1

    def delete_expired(self, commitlog_min: int) -> int:
        """Delete files (never the last) whose last unit's record is before ``commitlog_min``."""
        deleted = 0
        q = self.queue
        while len(q.files) > 1:
            mf = q.files[0]
            n = mf.wrote_position // UNIT
            if n == 0:
                break
            off = _UNIT.unpack_from(mf.mm, (n - 1) * UNIT)[0]
            if off >= commitlog_min:
                break
            q.delete_first()
            deleted += 1
        self.correct_min_offset(commitlog_min)
        return deleted

    def offset_by_time(
        self, timestamp: int, store_time_of: Callable[[int, int], int | None], commitlog_min: int,
        boundary: str = BOUNDARY_LOWER,
    ) -> int:
        """getOffsetInQueueByTime(ts, boundary) with 5.x semantics (store times read from the log,
        never file mtimes). ``store_time_of(phy_offset, size)`` returns a record's store time."""
        files = self.queue.files
        if not files or self.max_offset == 0:
            return 0
        if boundary == BOUNDARY_NEAREST:
            return self._offset_by_time_4x(timestamp, store_time_of, commitlog_min)
        lower = boundary == BOUNDARY_LOWER

        def t_of(mm: Any, idx: int) -> int | None:  # the map taken once per file: each use counts
            off, size, _ = _UNIT.unpack_from(mm, idx * UNIT)
            if off < commitlog_min:
                return -1  # too early: its record is gone
            return store_time_of(off, size)

        def first_idx(mf: MappedFile) -> int:
            return max(0, (self.min_logic_offset - mf.file_from_offset) // UNIT)

        chosen: MappedFile | None = None
        if lower:
            for k, mf in enumerate(files):
                n = mf.wrote_position // UNIT
                if k == len(files) - 1:
                    chosen = mf
                    break
                if n == 0:
                    continue
                stop = t_of(mf.mm, n - 1)
                if stop is not None and stop >= timestamp:
                    chosen = mf
                    break
        else:
            for mf in files:
                n = mf.wrote_position // UNIT
                if n == 0:
                    continue
                start = t_of(mf.mm, first_idx(mf)) if first_idx(mf) < n else None
                if start is not None and start <= timestamp:
                    chosen = mf
            if chosen is None:
                chosen = files[0]
        mf = chosen  # type: ignore[assignment]  # both branches above set it (files is not empty)
        n = mf.wrote_position // UNIT
        lo = first_idx(mf)
        hi = n - 1
        if hi < lo:
            return (mf.file_from_offset + lo * UNIT) // UNIT
        mm = mf.mm
        t_last = t_of(mm, hi)
        t_first = t_of(mm, lo)
        if t_last is None or t_first is None:
            return 0
        base = mf.file_from_offset // UNIT
        if t_last < timestamp:
            return base + (hi + 1 if lower else hi)
        if t_first > timestamp:
            return base + lo if lower else 0
        left, right = lo, hi
        found = -1
        while left <= right:
            mid = (left + right) // 2
            t = t_of(mm, mid)
            if t is None:
                return 0
            if t == timestamp:
                found = mid
                break
            if t < timestamp:
                left = mid + 1
            else:
                right = mid - 1
        if found >= 0:
            if lower:
                while found - 1 >= lo and t_of(mm, found - 1) == timestamp:
                    found -= 1
            else:
                while found + 1 <= hi and t_of(mm, found + 1) == timestamp:
                    found += 1
            return base + found
        # no exact hit: LOWER = first unit with time > ts; UPPER = last unit with time < ts
        return base + (left if lower else right)

    def _offset_by_time_4x(
        self, timestamp: int, store_time_of: Callable[[int, int], int | None], commitlog_min: int
    ) -> int:
        """4.x: the file is the first whose last unit was stored at or after ``ts`` (4.x compares
        file mtimes, which a broker leaves at the last write); then a plain binary search that
        returns an exact hit, else the neighbour with the smaller time distance (ties: earlier)."""
        files = self.queue.files
        chosen = files[-1]
        for mf in files:
            n = mf.wrote_position // UNIT
            if n:
                off, size, _ = _UNIT.unpack_from(mf.mm, (n - 1) * UNIT)
                t = store_time_of(off, size)
                if t is not None and t >= timestamp:
                    chosen = mf
                    break
        mf = chosen
        mm = mf.mm
        low, high = 0, mf.wrote_position - UNIT
        target = left = right = -1
        left_t = right_t = -1
        while high >= low:
            mid = (low + high) // (2 * UNIT) * UNIT
            off, size, _ = _UNIT.unpack_from(mm, mid)
            if off < commitlog_min:
                low = mid + UNIT
                left = mid
                continue
            t = store_time_of(off, size)
            if t is None or t < 0:
                return 0
            if t == timestamp:
                target = mid
                break
            if t > timestamp:
                high = mid - UNIT
                right, right_t = mid, t
            else:
                low = mid + UNIT
                left, left_t = mid, t
        if target != -1:
            pos = target
        elif left_t == -1:
            pos = right
        elif right_t == -1:
            pos = left
        else:
            pos = right if abs(timestamp - left_t) > abs(timestamp - right_t) else left
        return (mf.file_from_offset + pos) // UNIT

    def flush(self) -> int:
        return self.queue.flush()

    def stamp_mtimes(self, store_time_of: Callable[[int, int], int | None]) -> None:
        """Set each file written since the last call to the store time of its last unit, as its mtime
        (``store_time_of(phy_offset, size)``): RocketMQ 4.x's getOffsetInQueueByTime picks the first
        file whose mtime is at or after the time asked, and a broker's files carry about that time.
        A full file is set once; the one being written at each call (flush and close)."""
        if self.read_only:
            return
        for mf in list(self.queue.files):
            wrote = mf.wrote_position
            if wrote < UNIT or self._stamped.get(mf.file_from_offset) == wrote or mf.closed:
                continue
            off, size, _ = _UNIT.unpack_from(mf.mm, wrote - UNIT)
            t = store_time_of(off, size) if size != 0x7FFFFFFF else None
            if t is not None and t > 0:
                os.utime(mf.path, ns=(t * 1_000_000, t * 1_000_000))
                self._stamped[mf.file_from_offset] = wrote

    def close(self) -> None:
        self.queue.close()

    def __enter__(self) -> ConsumeQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def destroy(self) -> None:
        for mf in list(self.queue.files):
            mf.destroy()
        self.queue.files = []
        try:
            os.rmdir(self.directory)
        except OSError:
            pass
