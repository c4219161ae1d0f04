"""Sparse indexes inside rmqcore's own store: one pair per CommitLog file (Kafka's LogSegment rule).

For CommitLog file ``F`` (``<store>/rmqcore-index/<F>.index`` / ``.timeindex``; kept outside
``commitlog/`` because RocketMQ refuses to load a commitlog directory with foreign files):

* an OffsetIndex: message ordinal within the file → byte position (8-byte entries);
* a TimeIndex: store timestamp → message ordinal (12-byte entries, appended only when the maximum
  store timestamp grows);

both sparse: an entry when more than ``index_interval_bytes`` (4096) of records went by since the
last one, exactly as LogSegment.append decides. They serve time seeks over the CommitLog without
reading a record per probe, and split points at record boundaries (Spark partitions).

Crash semantics: derived data. Closed files' indexes are trusted when their state file says they are
complete; the active file's indexes are rebuilt from the CommitLog on open.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, overload

import numpy as np

from . import _impl
from . import layout as L
from .errors import full_disk_is_error
from .kafka.index import OffsetIndex, TimeIndex

__all__ = ["SegmentIndex", "SegmentIndexService"]

DEFAULT_INTERVAL = 4096
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024


# SegmentIndex.state, the dispatcher's view of one file's indexes (Dispatcher.run reads and updates
# it in place): the fields below, then the time index's last timestamp and 1 (index this file)
_COUNT, _END, _SINCE, _MAX_TS, _OMAX, _MONO, _FLOOR, _INTERVAL, _LAST_T, _ON = range(10)


class _StateField:
    """An integer field of ``SegmentIndex.state``."""

    def __init__(self, i: int) -> None:
        self.i = i

    @overload
    def __get__(self, obj: None, owner: Any) -> _StateField: ...
    @overload
    def __get__(self, obj: SegmentIndex, owner: Any) -> int: ...
    def __get__(self, obj: SegmentIndex | None, owner: Any) -> _StateField | int:
        return self if obj is None else int(obj.state[self.i])

    def __set__(self, obj: SegmentIndex, value: int) -> None:
        obj.state[self.i] = value


class SegmentIndex:
    """The sparse indexes of one CommitLog file.

    Its counters live in ``state`` (an int64 array) so that the dispatcher updates them in place,
    with no conversion per dispatch call; the attributes below read and write that array.
    """

    count = _StateField(_COUNT)  # records indexed
    end = _StateField(_END)  # position after the last indexed record
    bytes_since = _StateField(_SINCE)
    max_ts = _StateField(_MAX_TS)
    ordinal_of_max_ts = _StateField(_OMAX)
    floor_ts = _StateField(_FLOOR)  # max store time of the previous file (the monotonic check starts there)
    interval = _StateField(_INTERVAL)

    @property
    def monotonic(self) -> bool:
        """Store times never went back (within this file, nor from the previous one)."""
        return bool(self.state[_MONO])

    @monotonic.setter
    def monotonic(self, value: bool) -> None:
        self.state[_MONO] = 1 if value else 0

    def __init__(self, directory: Path, file_from_offset: int, *, interval: int = DEFAULT_INTERVAL,
                 max_index_size: int = DEFAULT_MAX_INDEX_SIZE, writable: bool = True, impl: str | None = None,
                 fresh: bool = False) -> None:
        self.file_from_offset = file_from_offset
        self.state = np.zeros(10, dtype=np.int64)
        self.state[_ON] = 1
        self.interval = interval
        name = L.offset_to_file_name(file_from_offset)
        self.state_path = directory / f"{name}.state"
        paths = (directory / f"{name}.index", directory / f"{name}.timeindex")
        if fresh and writable:
            for p in (*paths, self.state_path):
                if p.exists():
                    p.unlink()
        self._oi = OffsetIndex(paths[0], 0, max_index_size, writable=writable, impl=impl)
        self._k = _impl.kernel("dispatch", impl)
        try:
            self._ti = TimeIndex(paths[1], 0, max_index_size, writable=writable, impl=impl)
        except BaseException:  # (no descriptor left, say): the offset index is not left open
            self._oi.close()
            raise
        # entries from Dispatcher.run not yet written to the index files (add_entries): written in
        # bulk when PENDING fill up and before anything reads or saves these indexes
        self._pending = np.empty((4, 0), dtype=np.int64)
        self._npending = 0
        self._pending_lock = threading.Lock()
        self.count = self.end = self.bytes_since = 0
        self.max_ts = self.ordinal_of_max_ts = self.floor_ts = -1
        self.monotonic = True
        self.complete = False
        self.writable = writable
        if not fresh:
            self._load_state()
        self._sync_last_t()

    @property
    def offset_index(self) -> OffsetIndex:
        """The OffsetIndex, with every entry dispatched so far."""
        if self._npending:
            self._drain()
        return self._oi

    @property
    def time_index(self) -> TimeIndex:
        """The TimeIndex, with every entry dispatched so far."""
        if self._npending:
            self._drain()
        return self._ti

    def _sync_last_t(self) -> None:
        """``state``'s copy of the time index's last timestamp (-1: no entry), after it changed."""
        ti = self.time_index
        self.state[_LAST_T] = ti.last_entry.timestamp if ti.entries else -1

    def _load_state(self) -> None:
        try:
            st = json.loads(self.state_path.read_text())
            self.count, self.end = int(st["count"]), int(st["end"])
            self.bytes_since, self.max_ts = int(st["bytes_since"]), int(st["max_ts"])
            self.ordinal_of_max_ts, self.monotonic = int(st["ordinal_of_max_ts"]), bool(st["monotonic"])
            self.complete = bool(st["complete"])
        except (OSError, ValueError, KeyError, TypeError):
            self.complete = False
            self.end = -1  # unknown: the service rebuilds

    def save_state(self, complete: bool) -> None:
        if not self.writable:
            return
        self._drain()  # the counters saved include the pending entries
        if complete:
            self._pending = np.empty((4, 0), dtype=np.int64)  # nothing is added to a complete file
        self.complete = complete
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({
            "count": self.count, "end": self.end, "bytes_since": self.bytes_since, "max_ts": self.max_ts,
            "ordinal_of_max_ts": self.ordinal_of_max_ts, "monotonic": self.monotonic, "complete": complete,
            "interval": self.interval,
        }))
        os.replace(tmp, self.state_path)

    def add(self, positions: Any, sizes: Any, timestamps: Any) -> None:
        """Index consecutive records of this file (positions within the file, in order)."""
        oi, ti = self.offset_index, self.time_index
        interval = self.interval
        count, since, max_ts, omax = self.count, self.bytes_since, self.max_ts, self.ordinal_of_max_ts
        mono, end, floor_ts = self.monotonic, self.end, self.floor_ts
        for pos, size, ts in zip(positions, sizes, timestamps):
            if pos < end:
                continue  # already indexed (re-dispatch)
            if ts < max_ts or ts < floor_ts:
                mono = False
            if ts > max_ts:
                max_ts, omax = ts, count
            if since > interval:
                oi.append(count, pos)
                ti.maybe_append(max_ts, omax, skip_full_check=True)
                since = 0
            since += size
            count += 1
            end = pos + size
        self.count, self.bytes_since, self.max_ts, self.ordinal_of_max_ts = count, since, max_ts, omax
        self.monotonic, self.end = mono, end
        self._sync_last_t()

    PENDING = 4096

    def add_entries(self, entries: np.ndarray, n: int) -> None:
        """Take the ``n`` entries ``Dispatcher.run`` computed (it updated ``state`` itself, the
        time index's last timestamp included): rows ordinal, position, timestamp (-1: no time
        entry), ordinal of that timestamp. They are kept and written to the files in bulk later:
        written per dispatch call, the numpy work would weigh on every put followed by a read
        (derived data: a crash loses nothing the open does not rebuild)."""
        with self._pending_lock:
            k = self._npending
            if k + n > self._pending.shape[1]:
                if k:
                    self._write(self._pending, k)
                    k = self._npending = 0
                if n > self.PENDING:
                    self._write(entries, n)
                    return
                if self._pending.shape[1] < self.PENDING:
                    self._pending = np.empty((4, self.PENDING), dtype=np.int64)
            self._pending[:, k : k + n] = entries[:, :n]
            self._npending = k + n

    def _drain(self) -> None:
        with self._pending_lock:
            if self._npending:
                self._write(self._pending, self._npending)
                self._npending = 0

    def _write(self, entries: np.ndarray, n: int) -> None:
        oi, ti = self._oi, self._ti
        if n <= 4:  # a few entries: scalar appends cost a tenth of the bulk path's numpy calls
            for ordinal, position, ts, ts_ordinal in entries[:, :n].T.tolist():
                oi.append(ordinal, position)
                if ts >= 0:
                    ti.maybe_append(ts, ts_ordinal, skip_full_check=True)
        else:
            oi.append_many(entries[0, :n], entries[1, :n])
            grow = entries[2, :n] >= 0
            if grow.any():
                ti.append_many(entries[2, :n][grow], entries[3, :n][grow])

    def add_arrays(self, positions: np.ndarray, sizes: np.ndarray, timestamps: np.ndarray) -> None:
        """``add`` vectorised: the same entries, computed with numpy (one step per index entry)."""
        keep = positions >= self.end
        if not keep.all():
            positions, sizes, timestamps = positions[keep], sizes[keep], timestamps[keep]
        n = len(positions)
        if n == 0:
            return
        ordinals = np.arange(self.count, self.count + n, dtype=np.int64)
        prev_max = np.concatenate(([self.max_ts], np.maximum.accumulate(timestamps)[:-1]))
        prev_max = np.maximum(prev_max, self.max_ts)
        new_max = timestamps > prev_max
        if (timestamps < np.maximum(prev_max, self.floor_ts)).any():
            self.monotonic = False
        run_max = np.maximum(prev_max, timestamps)
        omax = np.where(new_max, ordinals, -1)
        omax = np.maximum.accumulate(np.concatenate(([self.ordinal_of_max_ts], omax)))[1:]
        # entries: before record i, if bytes since the last entry > interval (Kafka's LogSegment rule)
        points = np.empty(n, dtype=np.int64)
        sz = np.ascontiguousarray(sizes, dtype=np.int64)
        c, since_end = self._k.sparse_points(sz, self.bytes_since, self.interval, points)
        entry_at = points[:c]
        if c:
            at = entry_at
            self.offset_index.append_many(ordinals[at], positions[at])
            # LogSegment updates the max timestamp with the record before deciding on an entry; a
            # time entry is written only when that maximum grew past the last one
            tmax, omx = run_max[at], omax[at]
            last_t = int(self.state[_LAST_T])
            grow = tmax > np.maximum.accumulate(np.concatenate(([last_t], tmax[:-1])))
            self.time_index.append_many(tmax[grow], omx[grow])
            self._sync_last_t()
        self.bytes_since = int(since_end)
        self.count += n
        self.max_ts = int(run_max[-1])
        self.ordinal_of_max_ts = int(omax[-1])
        self.end = int(positions[-1] + sizes[-1])

    def seek_time(self, timestamp: int) -> int:
        """A record-aligned position (within the file) from which every record stored at or after
        ``timestamp`` lies; scanning from it finds the first such record (LogSegment.findOffsetByTimestamp)."""
        ordinal = self.time_index.lookup(timestamp).offset
        return self.offset_index.lookup(ordinal).position if ordinal > 0 else 0

    def split_points(self, parts: int) -> list[int]:
        """Up to ``parts - 1`` record-aligned positions that cut the file into similar byte ranges."""
        entries = self.offset_index.entries_list()
        if parts <= 1 or not entries or self.end <= 0:
            return []
        out: list[int] = []
        step = self.end / parts
        k = 0
        for i in range(1, parts):
            target = step * i
            while k < len(entries) and entries[k].position < target:
                k += 1
            if k < len(entries):
                p = entries[k].position
                if not out or p > out[-1]:
                    out.append(p)
        return out

    def truncate(self) -> None:
        with self._pending_lock:
            self._npending = 0
        self._oi.truncate()
        self._ti.truncate()
        self.count = self.end = self.bytes_since = 0
        self.max_ts = self.ordinal_of_max_ts = -1
        self.monotonic = True
        self._sync_last_t()

    def flush(self) -> None:
        if self.writable:
            self.offset_index.flush()
            self.time_index.flush()

    def close(self, complete: bool) -> None:
        if self.writable:
            self.save_state(complete)
            if complete:
                self.offset_index.trim_to_valid_size()
                self.time_index.trim_to_valid_size()
        self.offset_index.close()
        self.time_index.close()

    def destroy(self) -> None:
        with self._pending_lock:
            self._npending = 0
        self._oi.close()
        self._ti.close()
        for p in (self._oi.path, self._ti.path, self.state_path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


class SegmentIndexService:
    """The SegmentIndex of every CommitLog file of a store."""

    def __init__(self, store_dir: Path, commitlog: Any, *, interval: int = DEFAULT_INTERVAL,
                 read_only: bool = False, impl: str | None = None) -> None:
        self.directory = Path(store_dir) / "rmqcore-index"
        self.commitlog = commitlog
        self.interval = interval
        self.read_only = read_only
        self.impl = impl
        self.segments: dict[int, SegmentIndex] = {}
        self._current: SegmentIndex | None = None  # the last for_file answer
        # room for every entry a file can get: one per interval + 1 bytes, at most one per record
        most = commitlog.file_size // max(interval + 1, L.MIN_RECORD_SIZE) + 2
        self.max_index_size = max(4096, most * TimeIndex.ENTRY_SIZE)

    def _get(self, file_from: int, fresh: bool = False) -> SegmentIndex:
        seg = self.segments.get(file_from)
        if seg is None or fresh:
            if seg is not None:
                seg.close(False)
            if not self.read_only:
                self.directory.mkdir(parents=True, exist_ok=True)
            with full_disk_is_error(f"the segment indexes of {file_from}"):  # TooManyOpenFilesError too
                seg = SegmentIndex(self.directory, file_from, interval=self.interval,
                                   max_index_size=self.max_index_size, writable=not self.read_only, impl=self.impl,
                                   fresh=fresh)
            self.segments[file_from] = seg
        if seg.count == 0:
            prev = [s for f, s in self.segments.items() if f < file_from and s.count]
            if prev:
                seg.floor_ts = max(p.max_ts for p in prev)
        return seg

    def recover(self, indexed_until: int) -> None:
        """Open every file's indexes; rebuild those that are not complete up to ``indexed_until``
        (the dispatch start offset: dispatch adds what follows). Indexes of deleted files go."""
        files = self.commitlog.queue.files
        live = {mf.file_from_offset for mf in files}
        if self.directory.is_dir() and not self.read_only:
            for p in self.directory.iterdir():
                off = L.file_name_to_offset(p.name.split(".")[0])
                if off is not None and off not in live:
                    p.unlink()
        for mf in files:
            seg = self._get(mf.file_from_offset)
            if seg.complete and mf is not files[-1]:
                continue
            seg = self._get(mf.file_from_offset, fresh=True)
            stop = min(max(indexed_until - mf.file_from_offset, 0), mf.wrote_position)
            self._rebuild(seg, mf, stop)

    def _rebuild(self, seg: SegmentIndex, mf: Any, stop: int) -> None:
        codec = self.commitlog._codec
        out = np.empty((L.NCOLUMNS, 8000), dtype=np.int64)
        pos = 0
        while pos < stop:
            n, end, _status = codec.decode_batch(mf.mm, pos, stop, out, False)
            if n == 0:
                break
            seg.add_arrays(out[L.C_POSITION, :n].copy(), out[L.C_SIZE, :n].copy(), out[L.C_STORE_TIMESTAMP, :n].copy())
            pos = end

    def for_file(self, file_from: int) -> SegmentIndex:
        """The indexes of the CommitLog file at ``file_from``, for adding records to (older files'
        indexes are then complete)."""
        seg = self.segments.get(file_from)
        if seg is not None and seg is self._current and seg.state[_COUNT]:
            return seg  # the file dispatch is in (checked below when it was new)
        seg = self._current = self._get(file_from)
        if len(self.segments) > 1:
            for f, other in self.segments.items():  # a newer file started: older ones are complete
                if f < file_from and not other.complete:
                    other.save_state(True)
        return seg

    def add(self, file_from: int, positions: Any, sizes: Any, timestamps: Any) -> None:
        seg = self.for_file(file_from)
        if isinstance(positions, np.ndarray):
            seg.add_arrays(positions, sizes, timestamps)
        else:
            seg.add(positions, sizes, timestamps)

    def seek_time(self, timestamp: int) -> int:
        """A global record-aligned CommitLog offset from which a forward scan finds the first record
        stored at or after ``timestamp`` (assuming store times are monotone; see ``monotonic``)."""
        files = self.commitlog.queue.files
        chosen = files[0].file_from_offset if files else 0
        for mf in files:
            seg = self.segments.get(mf.file_from_offset)
            if seg is None or seg.count == 0:
                continue
            if seg.max_ts >= timestamp:
                chosen = mf.file_from_offset
                break
            chosen = mf.file_from_offset
        seg = self.segments.get(chosen)
        return chosen + (seg.seek_time(timestamp) if seg else 0)

    @property
    def monotonic(self) -> bool:
        return all(s.monotonic for s in self.segments.values())

    def flush(self) -> None:
        for s in list(self.segments.values()):  # dispatch (the reput thread) may add one meanwhile
            s.flush()

    def close(self) -> None:
        files = self.commitlog.queue.files
        last = files[-1].file_from_offset if files else None
        for f, s in self.segments.items():
            s.close(complete=s.complete or (last is not None and f != last))
        self.segments = {}
