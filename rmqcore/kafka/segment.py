"""One Kafka log segment: ``<base>.log`` + ``.index`` + ``.timeindex`` (+ ``.txnindex``), as ``LogSegment``.

Files are named by the segment's base offset, zero-padded to 20 digits. The ``.log`` is a
concatenation of record batches (:mod:`rmqcore.kafka.records`); the indexes are sparse
(:mod:`rmqcore.kafka.index`).

How the pieces compose (Kafka ``LogSegment``):

* **append** -- the bytes go to the end of the ``.log``; an index entry is added once more than
  ``index.interval.bytes`` have accumulated since the last one, never for the first append of a
  segment. ``per_batch_index=True`` (default) applies the rule per batch (KAFKA-806; append-time
  indexes then equal recovery-time ones); ``False`` applies it per append call as Kafka up to 3.9 did
  (``(largestOffset, chunk start)``), which is what the oracle fixtures were written with.
* **translate_offset** -- floor entry of the offset index, then a header walk to the first batch whose
  last offset >= the target.
* **find_offset_by_timestamp** -- floor entry of the time index, the offset index's position for
  ``max(that offset, starting offset)``, then a walk to the first record with timestamp >= target.
* **recover** -- rebuild both indexes from a CRC-checked walk of the ``.log`` and truncate it at the
  first invalid byte.
* **truncate_to** / **close** / **on_become_inactive_segment** -- as in Kafka; close and roll write the
  final time-index entry (the segment's max timestamp) and trim the indexes.

Crash semantics: the ``.log`` is checksummed per batch; the indexes are rebuilt by :meth:`recover`.
Thread safety: one writer; lookups may run concurrently with each other.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from rmqcore.bases import Closeable
from rmqcore.config import bool_arg, bound_arg, int_arg, path_arg
from rmqcore.errors import (
    ConfigError,
    CorruptionError,
    IndexCorruptError,
    OffsetOutOfRangeError,
)

from ._kernels import Kernels, kernels
from ._status import raise_for_status
from .filerecords import FileRecords
from .index import DEFAULT_MAX_INDEX_SIZE, OffsetIndex, TimeIndex, TimestampOffset
from .records import RecordBatch, read_batch
from .txnindex import TransactionIndex

__all__ = [
    "SegmentConfig",
    "FileRecords",
    "LogSegment",
    "LogOffsetPosition",
    "TimestampAndOffset",
    "AppendResult",
    "BatchHeader",
    "segment_file_name",
    "parse_segment_base_offset",
]

_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def _clamp64(v: int) -> int:
    return _INT64_MIN if v < _INT64_MIN else _INT64_MAX if v > _INT64_MAX else v


def segment_file_name(base_offset: int, suffix: str = "") -> str:
    """``00000000000000000042`` + suffix (Kafka ``LogFileUtils.filenamePrefixFromOffset``)."""
    base_offset = int_arg(base_offset, "base_offset")
    if not 0 <= base_offset <= _INT64_MAX:
        raise ConfigError(f"base offset must be in [0, 2**63 - 1], not {base_offset}")
    return f"{base_offset:020d}{suffix}"


def parse_segment_base_offset(name: str) -> int | None:
    """Base offset of a ``<20 digits>.log`` file name, None for anything else (``.deleted``, ``.swap``...)."""
    if len(name) == 24 and name.endswith(".log") and name[:20].isdigit():
        return int(name[:20])
    return None


@dataclass(frozen=True)
class SegmentConfig:
    """Topic configuration that shapes segment files (Kafka names in brackets).

    Attributes:
        index_interval_bytes: [index.interval.bytes] bytes between index entries (>= 0).
        segment_index_bytes: [segment.index.bytes] preallocated index size (>= 8).
        segment_bytes: [segment.bytes] roll threshold of the ``.log``.
        segment_ms: [segment.ms] age-based roll threshold.
        preallocate: [preallocate] create a new ``.log`` at ``init_file_size`` bytes (trimmed on close).
        init_file_size: preallocated ``.log`` size; None = ``segment_bytes``.
        per_batch_index: index per batch (KAFKA-806, default) instead of per append call.
    """

    index_interval_bytes: int = 4096
    segment_index_bytes: int = DEFAULT_MAX_INDEX_SIZE
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    preallocate: bool = False
    init_file_size: int | None = None
    per_batch_index: bool = True

    def __post_init__(self) -> None:
        ints = ("index_interval_bytes", "segment_index_bytes", "segment_bytes", "segment_ms",
                "init_file_size")
        for name in ints:
            v = getattr(self, name)
            if v is None and name == "init_file_size":  # None: segment_bytes
                continue
            if isinstance(v, bool) or not 0 <= int_arg(v, name) <= _INT64_MAX:
                raise ConfigError(f"{name} must be an integer in [0, 2**63 - 1], not {v!r}")
            object.__setattr__(self, name, int_arg(v, name))
        for name in ("preallocate", "per_batch_index"):
            object.__setattr__(self, name, bool_arg(getattr(self, name), name))
        if self.segment_index_bytes > _INT32_MAX or self.segment_bytes > _INT32_MAX:  # Java ints in Kafka
            raise ConfigError("segment.index.bytes and segment.bytes must fit a Java int")
        if self.index_interval_bytes < 0:
            raise ConfigError(f"index.interval.bytes must be >= 0, not {self.index_interval_bytes}")
        if self.segment_index_bytes < 4:
            raise ConfigError(f"segment.index.bytes must be >= 4, not {self.segment_index_bytes}")
        if self.segment_bytes < 14:
            raise ConfigError(f"segment.bytes must be >= 14, not {self.segment_bytes}")

    @classmethod
    def from_kafka(cls, config: Mapping[str, Any], **overrides: Any) -> SegmentConfig:
        """Build from Kafka-named keys (``index.interval.bytes``, ``segment.index.bytes``,
        ``segment.bytes``, ``segment.ms``, ``preallocate``, ``initFileSize``)."""
        if not isinstance(config, Mapping):
            raise ConfigError(f"config must be a mapping of Kafka setting names, not {type(config).__name__}")
        kw: dict[str, Any] = {}
        names = {
            "index.interval.bytes": "index_interval_bytes",
            "segment.index.bytes": "segment_index_bytes",
            "segment.bytes": "segment_bytes",
            "segment.ms": "segment_ms",
            "preallocate": "preallocate",
            "initFileSize": "init_file_size",
        }
        for k, v in config.items():
            if k in names:
                kw[names[k]] = v
        if kw.get("init_file_size") == 0:
            kw["init_file_size"] = None
        kw.update(overrides)
        return cls(**kw)


class LogOffsetPosition(NamedTuple):
    """``translate_offset``'s answer: the batch's last offset, its position and size."""

    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    """``find_offset_by_timestamp``'s answer; ``leader_epoch`` None when the batch has none."""

    timestamp: int
    offset: int
    leader_epoch: int | None


class AppendResult(NamedTuple):
    position: int
    size: int
    offset_index_entry_added: bool
    time_index_entry_added: bool


class BatchHeader(NamedTuple):
    """A batch as the header walk sees it (no decoding)."""

    position: int
    size: int
    magic: int
    offset_field: int
    last_offset: int
    max_timestamp: int
    crc_state: int


class LogSegment(Closeable):
    """A Kafka log segment. Open one with :meth:`open`.

    Attributes:
        base_offset: the segment's first possible offset.
        log: the ``.log`` (:class:`FileRecords`).
        offset_index / time_index / txn_index: its indexes.
        config: the :class:`SegmentConfig`.
    """

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        base_offset: int,
        config: SegmentConfig,
        impl: str | None = None,
    ) -> None:
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.config = config
        self._k: Kernels = kernels(impl)
        self._impl = impl
        self._max_ts: TimestampOffset | None = None  # None = UNKNOWN (not loaded yet)
        self._bytes_since_last_index_entry = 0
        self.rolling_based_timestamp: int | None = None
        self.created_ms = int(time.time() * 1000)
        self._lock = threading.RLock()

    # --- opening -----------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        base_offset: int,
        config: SegmentConfig | None = None,
        *,
        file_already_exists: bool | None = None,
        writable: bool = True,
        impl: str | None = None,
    ) -> LogSegment:
        """Open (or, when writable and absent, create) segment ``base_offset`` in ``directory``.

        Raises:
            FileNotFoundError: read-only and the ``.log`` does not exist.
            ConfigError: bad configuration.
        """
        if config is not None and not isinstance(config, SegmentConfig):
            raise ConfigError(f"config must be a SegmentConfig, not {type(config).__name__}")
        config = config or SegmentConfig()
        d = path_arg(directory, "directory")
        writable = bool_arg(writable, "writable")
        prefix = segment_file_name(base_offset)
        log_path = d / f"{prefix}.log"
        exists = log_path.exists() if file_already_exists is None else file_already_exists
        init = config.init_file_size if config.init_file_size is not None else config.segment_bytes
        log = FileRecords(
            log_path,
            writable=writable,
            file_already_exists=exists,
            init_file_size=init,
            preallocate=config.preallocate,
        )
        oi = OffsetIndex(d / f"{prefix}.index", base_offset, config.segment_index_bytes, writable, impl)
        ti = TimeIndex(d / f"{prefix}.timeindex", base_offset, config.segment_index_bytes, writable, impl)
        txn = TransactionIndex(d / f"{prefix}.txnindex", base_offset, writable)
        return cls(log, oi, ti, txn, base_offset, config, impl)

    # --- state -------------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Bytes of data in the ``.log``."""
        return self.log.size

    def _max_so_far(self) -> TimestampOffset:
        if self._max_ts is None:
            self._max_ts = self.time_index.last_entry
        return self._max_ts

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_so_far().timestamp

    @property
    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        return self._max_so_far().offset

    @property
    def largest_timestamp(self) -> int:
        """The segment's max timestamp, or the ``.log``'s mtime in ms when it has none (Kafka)."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return int(os.stat(self.log.path).st_mtime * 1000)

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise OffsetOutOfRangeError(
                f"Detected offset overflow at offset {offset} in segment {self.log.path} "
                f"(base offset {self.base_offset})"
            )

    def _raise(self, status: int, buf: Any, position: int) -> None:
        raise_for_status(status, buf, position, str(self.log.path), self._k)

    # --- reading -----------------------------------------------------------------------------------
    def batch_headers(self, start_position: int = 0, crc_mode: int = 0) -> tuple[list[BatchHeader], int, int]:
        """Header walk from ``start_position``: ``(headers, stop, status)`` (status as the kernel's)."""
        buf = self.log.view()
        hdrs, stop, st = self._k.batch.batch_headers(buf, start_position, self.log.size, crc_mode, -1)
        return [BatchHeader(*h) for h in hdrs], stop, st

    def batches(self, start_position: int = 0, *, strict: bool = True) -> Iterator[RecordBatch]:
        """Batches from ``start_position`` (copied out of the file) until the end of the data.

        A partial batch at the end ends the iteration, as in Kafka.

        Raises:
            CorruptionError: an entry whose size is below 14 or whose magic is invalid (when ``strict``).
        """
        pos = int_arg(start_position, "start_position")
        strict = bool_arg(strict, "strict")
        if not 0 <= pos <= self.log.size:
            raise OffsetOutOfRangeError(f"position {pos} is outside {self.log.path} [0, {self.log.size}]")
        while True:
            buf = self.log.view()
            hdrs, stop, st = self._k.batch.batch_headers(buf, pos, self.log.size, 0, 256)
            for h in hdrs:
                yield read_batch(buf, h[0], h[1], h[2], self._impl, str(self.log.path))
            if st < 0 and strict:
                self._raise(st, buf, stop)
            if st != self._k.batch.OK or not hdrs:
                return
            pos = stop

    def translate_offset(self, offset: int, starting_file_position: int = 0) -> LogOffsetPosition | None:
        """Position of the first batch whose last offset >= ``offset`` (Kafka ``translateOffset``).

        Raises:
            CorruptionError: the walk met a corrupt entry before finding one.
            IndexCorruptError: the offset index points outside the ``.log``.
            ConfigError: an argument is not an integer.
        """
        offset = bound_arg(offset, "offset")
        starting_file_position = int_arg(starting_file_position, "starting_file_position")
        mapping = self.offset_index.lookup(offset)
        start = max(mapping.position, starting_file_position)
        if start < 0:
            raise IndexCorruptError(
                f"offset index entry {mapping} points before the start of the log",
                -1,
                str(self.offset_index.path),
            )
        size = self.log.size
        if start >= size:
            return None
        buf = self.log.view()
        st, pos, bsize, last = self._k.batch.find_offset(buf, start, size, _clamp64(offset))
        if st == self._k.batch.OK:
            return LogOffsetPosition(last, pos, bsize)
        if st < 0:
            self._raise(st, buf, pos)
        return None

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """The first record with timestamp >= ``timestamp`` and offset >= ``starting_offset``
        (default: the base offset), located as Kafka's ``findOffsetByTimestamp`` does.

        Raises:
            CorruptionError: the walk met a corrupt entry or batch before finding one.
            MissingCodecError: a compressed batch had to be decoded without its codec.
        """
        timestamp = bound_arg(timestamp, "timestamp")
        start_off = self.base_offset
        if starting_offset is not None:
            start_off = bound_arg(starting_offset, "starting_offset")
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, start_off)).position
        return self.search_for_timestamp(timestamp, position, start_off)

    def search_for_timestamp(
        self, timestamp: int, start_position: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """Kafka ``FileRecords.searchForTimestamp`` from ``start_position``."""
        if start_position < 0:
            raise IndexCorruptError(
                f"offset index points to negative position {start_position}", -1, str(self.offset_index.path)
            )
        pos = start_position
        target = _clamp64(timestamp)
        while True:
            size = self.log.size
            if pos >= size:
                return None
            buf = self.log.view()
            st, p, bsize = self._k.batch.find_timestamp(buf, pos, size, target)
            if st < 0:
                self._raise(st, buf, p)
            if st != self._k.batch.OK:
                return None
            batch = read_batch(buf, p, bsize, buf[p + 16], self._impl, str(self.log.path))
            try:
                recs = batch.records()
            except CorruptionError as e:
                raise e.at(str(self.log.path), p) from None
            for r in recs:
                if r.timestamp >= timestamp and r.offset >= starting_offset:
                    epoch = batch.partition_leader_epoch
                    return TimestampAndOffset(r.timestamp, r.offset, None if epoch == -1 else epoch)
            pos = p + bsize

    def read_next_offset(self) -> int:
        """The offset after the last batch (Kafka ``readNextOffset``).

        Raises:
            CorruptionError: a corrupt entry after the last index entry.
        """
        mapping = self.translate_offset(self.offset_index.last_offset)
        if mapping is None:
            return self.base_offset
        buf = self.log.view()
        hdrs, stop, st = self._k.batch.batch_headers(buf, mapping.position, self.log.size, 0, -1)
        if st < 0:
            self._raise(st, buf, stop)
        return int(hdrs[-1][4]) + 1 if hdrs else self.base_offset

    def largest_timestamp_after(self, start_position: int) -> TimestampOffset:
        """Kafka ``FileRecords.largestTimestampAfter``: max batch timestamp from a position, and the
        last offset of the (first) batch holding it; ``(-1, -1)`` when none."""
        best = TimestampOffset(-1, -1)
        hdrs, stop, st = self.batch_headers(start_position)
        if st < 0:
            self._raise(st, self.log.view(), stop)
        for h in hdrs:
            if h.max_timestamp > best.timestamp:
                best = TimestampOffset(h.max_timestamp, h.last_offset)
        return best

    # --- writing -----------------------------------------------------------------------------------
    def append(
        self,
        records: bytes | bytearray | memoryview,
        largest_offset: int | None = None,
        largest_timestamp: int | None = None,
        shallow_offset_of_max_timestamp: int | None = None,
    ) -> AppendResult:
        """Append whole, valid batches (one Kafka ``LogSegment.append`` call).

        The three values default to what Kafka's ``LogValidator`` reports for these batches: the last
        batch's last offset, the max of the batches' max timestamps, and the last offset of the first
        batch holding that max (-1 for v0 data).

        Returns:
            Where the data went and whether index entries were added.

        Raises:
            CorruptionError: ``records`` is not a sequence of complete, CRC-valid batches.
            OffsetOutOfRangeError: the largest offset cannot be stored relative to the base offset.
            SegmentFullError: an index is full (the segment should have rolled).
        """
        data = bytes(records)
        with self._lock:
            position = self.log.size
            if not data:
                return AppendResult(position, 0, False, False)
            hdrs, stop, st = self._k.batch.batch_headers(data, 0, len(data), self._k.batch.CRC_STOP, -1)
            if st < 0:
                raise_for_status(st, data, stop, None, self._k)
            if stop != len(data):
                raise CorruptionError("records to append end with a partial batch", stop)
            if largest_offset is None:
                largest_offset = max(h[4] for h in hdrs)
            if largest_timestamp is None or shallow_offset_of_max_timestamp is None:
                max_ts, shallow = -1, -1
                for h in hdrs:
                    if h[5] > max_ts:
                        max_ts, shallow = h[5], h[4]
                if largest_timestamp is None:
                    largest_timestamp = max_ts
                if shallow_offset_of_max_timestamp is None:
                    shallow_offset_of_max_timestamp = shallow
            if position == 0:
                self.rolling_based_timestamp = largest_timestamp
            self._ensure_offset_in_range(largest_offset)
            for h in hdrs:
                self._ensure_offset_in_range(h[4])
            self.log.append(data)
            oi_added = ti_added = False
            interval = self.config.index_interval_bytes
            if self.config.per_batch_index:
                p = position
                for h in hdrs:
                    if h[5] > self._max_so_far().timestamp:
                        self._max_ts = TimestampOffset(h[5], h[4])
                    if self._bytes_since_last_index_entry > interval:
                        self.offset_index.append(h[4], p)
                        oi_added = True
                        mx = self._max_so_far()
                        ti_added = self.time_index.maybe_append(mx.timestamp, mx.offset) or ti_added
                        self._bytes_since_last_index_entry = 0
                    p += h[1]
                    self._bytes_since_last_index_entry += h[1]
            else:
                if largest_timestamp > self._max_so_far().timestamp:
                    self._max_ts = TimestampOffset(largest_timestamp, shallow_offset_of_max_timestamp)
                if self._bytes_since_last_index_entry > interval:
                    self.offset_index.append(largest_offset, position)
                    oi_added = True
                    mx = self._max_so_far()
                    ti_added = self.time_index.maybe_append(mx.timestamp, mx.offset)
                    self._bytes_since_last_index_entry = 0
                self._bytes_since_last_index_entry += len(data)
            return AppendResult(position, len(data), oi_added, ti_added)

    def should_roll(
        self,
        incoming_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int | None = None,
    ) -> bool:
        """Kafka ``LogSegment.shouldRoll`` (without the roll jitter)."""
        incoming_size = int_arg(incoming_size, "incoming_size")
        max_timestamp_in_messages = int_arg(max_timestamp_in_messages, "max_timestamp_in_messages")
        max_offset_in_messages = int_arg(max_offset_in_messages, "max_offset_in_messages")
        now = int(time.time() * 1000) if now_ms is None else int_arg(now_ms, "now_ms")
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            waited = max_timestamp_in_messages - self.rolling_based_timestamp
        else:
            waited = now - self.created_ms
        reached_roll_ms = waited > self.config.segment_ms
        size = self.log.size
        return (
            size > self.config.segment_bytes - incoming_size
            or (size > 0 and reached_roll_ms)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    def truncate_to(self, offset: int) -> int:
        """Remove every batch from the one containing ``offset`` on (Kafka ``truncateTo``).

        Returns:
            Bytes removed from the ``.log``.
        """
        offset = bound_arg(offset, "offset")
        with self._lock:
            mapping = self.translate_offset(offset)
            self.offset_index.truncate_to(offset)
            self.time_index.truncate_to(offset)
            self.txn_index.truncate_to(offset)
            self.offset_index.resize(self.offset_index.max_index_size)
            self.time_index.resize(self.time_index.max_index_size)
            truncated = 0 if mapping is None else self.log.truncate_to(mapping.position)
            if self.log.size == 0:
                self.created_ms = int(time.time() * 1000)
                self.rolling_based_timestamp = None
            self._bytes_since_last_index_entry = 0
            if self.max_timestamp_so_far >= 0:
                self._max_ts = self._read_largest_timestamp()
            return truncated

    def _read_largest_timestamp(self) -> TimestampOffset:
        last = self.time_index.last_entry
        pos = self.offset_index.lookup(last.offset).position
        after = self.largest_timestamp_after(pos)
        return after if after.timestamp > last.timestamp else last

    def recover(self) -> int:
        """Rebuild both indexes from the ``.log`` and truncate it at the first invalid byte
        (Kafka ``LogSegment.recover``; the transaction index keeps the entries of surviving markers).

        Returns:
            Bytes truncated from the ``.log``.

        Raises:
            OffsetOutOfRangeError: a batch's offset cannot be stored relative to the base offset.
        """
        with self._lock:
            self.offset_index.reset()
            self.time_index.reset()
            self._max_ts = None
            buf = self.log.view()
            hdrs, valid_bytes, _st = self._k.batch.batch_headers(
                buf, 0, self.log.size, self._k.batch.CRC_STOP, -1
            )
            del buf
            interval = self.config.index_interval_bytes
            last_index_entry = 0
            for pos, _size, _magic, _first, last, max_ts, _crc in hdrs:
                self._ensure_offset_in_range(last)
                if max_ts > self._max_so_far().timestamp:
                    self._max_ts = TimestampOffset(max_ts, last)
                if pos - last_index_entry > interval:
                    self.offset_index.append(last, pos)
                    mx = self._max_so_far()
                    self.time_index.maybe_append(mx.timestamp, mx.offset)
                    last_index_entry = pos
            truncated = int(self.log.size - valid_bytes)
            self.log.truncate_to(valid_bytes)
            next_offset = int(hdrs[-1][4]) + 1 if hdrs else self.base_offset
            self.txn_index.truncate_to(next_offset)
            self.offset_index.trim_to_valid_size()
            mx = self._max_so_far()
            self.time_index.maybe_append(mx.timestamp, mx.offset, skip_full_check=True)
            self.time_index.trim_to_valid_size()
            return truncated

    def on_become_inactive_segment(self) -> None:
        """On roll: write the final time-index entry and trim the indexes and the ``.log``."""
        with self._lock:
            mx = self._max_so_far()
            self.time_index.maybe_append(mx.timestamp, mx.offset, skip_full_check=True)
            self.offset_index.trim_to_valid_size()
            self.time_index.trim_to_valid_size()
            self.log.trim()

    def resize_indexes(self, size: int) -> None:
        """Resize both indexes (LogLoader does this to the active segment after loading)."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def sanity_check(self) -> None:
        """Kafka's index sanity checks (offset, time and transaction index).

        Raises:
            IndexCorruptError: an index fails its check.
        """
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        self.txn_index.sanity_check()

    def flush(self) -> None:
        """fsync the ``.log`` and msync the indexes."""
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Write the final time-index entry (if the max timestamp was ever loaded), trim and close."""
        with self._lock:
            if self.log.writable and self._max_ts is not None and not self.time_index._closed:
                mx = self._max_ts
                self.time_index.maybe_append(mx.timestamp, mx.offset, skip_full_check=True)
            self.offset_index.close()
            self.time_index.close()
            self.log.close()
            self.txn_index.close()

    def close_handlers(self) -> None:
        """Close without trimming or writing (crash-like)."""
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.log.close_handler()

    def delete_if_exists(self) -> None:
        self.close_handlers()
        for p in (self.log.path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"<LogSegment {self.log.path} base={self.base_offset} size={self.size}>"
