"""A Kafka partition directory (``<topic>-<partition>/``) opened as one log (``LocalLog``/``LogSegments``).

Segments are the ``<20-digit base offset>.log`` files of the directory, ordered by base offset;
transient files (``.deleted``, ``.cleaned``, ``.swap``) and other names are ignored.

* The segment for an offset is the *floor* segment (greatest base offset <= offset); an offset lookup
  that finds nothing there moves on to the following segments, as ``LocalLog.read`` does.
* A timestamp lookup uses the first segment whose largest timestamp >= the target
  (``UnifiedLog.fetchOffsetByTimestamp``) with the log start offset as starting offset.
* Appends go to the active (last) segment, rolling first when ``LogSegment.shouldRoll`` says so.
* ``recover=True`` rebuilds the indexes of every segment from the one holding ``recovery_point`` on
  (and of any segment whose ``.index`` is missing); when a segment loses bytes, all later segments are
  deleted, as ``LogLoader`` does after an unclean shutdown.

Thread safety: one writer; lookups may run concurrently with each other.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator

from rmqcore.bases import Closeable
from rmqcore.config import bool_arg, bound_arg, int_arg, path_arg
from rmqcore.errors import (
    ConfigError,
    DirectoryNotFoundError,
    InvalidMessageError,
    OffsetOutOfRangeError,
    ReadOnlyError,
)

from ._kernels import kernels
from .records import RecordBatch
from .segment import (
    AppendResult,
    LogOffsetPosition,
    LogSegment,
    SegmentConfig,
    TimestampAndOffset,
    parse_segment_base_offset,
    segment_file_name,
)

__all__ = ["KafkaLog"]


class KafkaLog(Closeable):
    """All segments of one partition directory.

    Args:
        directory: the partition directory.
        config: segment configuration (sizes and index interval used for writes and recovery).
        writable: open for appends (creates the directory and a first segment when empty).
        recover: run segment recovery on open (writable only).
        recovery_point: recover segments from the one holding this offset on.
        impl: kernel implementation ("native", "pure" or None).

    Raises:
        DirectoryNotFoundError: read-only and the directory does not exist (a FileNotFoundError).
        ConfigError: ``recover`` without ``writable``, or an argument of the wrong type.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        config: SegmentConfig | None = None,
        *,
        writable: bool = False,
        recover: bool = False,
        recovery_point: int = 0,
        impl: str | None = None,
    ) -> None:
        self.dir = path_arg(directory, "directory")
        if config is not None and not isinstance(config, SegmentConfig):
            raise ConfigError(f"config must be a SegmentConfig, not {type(config).__name__}")
        if impl not in (None, "native", "pure"):
            raise ConfigError(f"impl must be 'native', 'pure' or None, not {impl!r}")
        writable, recover = bool_arg(writable, "writable"), bool_arg(recover, "recover")
        recovery_point = bound_arg(recovery_point, "recovery_point")
        self.config = config or SegmentConfig()
        self.writable = writable
        self._impl = impl
        self._k = kernels(impl)
        if recover and not writable:
            raise ConfigError("recovery rewrites files: open the log writable")
        if not self.dir.is_dir():
            if not writable:
                raise DirectoryNotFoundError(f"no such partition directory: {self.dir}")
            if self.dir.exists():
                raise ConfigError(f"{self.dir} is not a directory (a partition is a directory)")
            self.dir.mkdir(parents=True)
        bases = sorted(
            b for b in (parse_segment_base_offset(p.name) for p in self.dir.iterdir()) if b is not None
        )
        self.segments: list[LogSegment] = []
        self.recovered_bytes: dict[int, int] = {}
        for base in bases:
            missing_index = not (self.dir / f"{base:020d}.index").exists()
            seg = LogSegment.open(
                self.dir, base, self.config, file_already_exists=True, writable=writable, impl=impl
            )
            self.segments.append(seg)
            if writable and missing_index and not recover:
                self.recovered_bytes[base] = seg.recover()
        if recover:
            self._recover(recovery_point)
        if writable:
            if not self.segments:
                self.segments.append(LogSegment.open(self.dir, 0, self.config, writable=True, impl=impl))
            self.active_segment.resize_indexes(self.config.segment_index_bytes)

    def _recover(self, recovery_point: int) -> None:
        first = max(0, bisect.bisect_right(self._bases(), recovery_point) - 1)
        i = first
        while i < len(self.segments):
            seg = self.segments[i]
            truncated = seg.recover()
            self.recovered_bytes[seg.base_offset] = truncated
            if truncated > 0:
                for later in self.segments[i + 1 :]:
                    later.delete_if_exists()
                del self.segments[i + 1 :]
                break
            i += 1

    def _bases(self) -> list[int]:
        return [s.base_offset for s in self.segments]

    # --- properties --------------------------------------------------------------------------------
    @property
    def active_segment(self) -> LogSegment:
        if not self.segments:
            raise OffsetOutOfRangeError(f"log {self.dir} has no segments")
        return self.segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self.segments[0].base_offset if self.segments else 0

    @property
    def log_end_offset(self) -> int:
        """The next offset to be written."""
        return self.active_segment.read_next_offset() if self.segments else 0

    def segment_for(self, offset: int) -> LogSegment | None:
        """The floor segment of ``offset`` (None when the offset is below the first base offset)."""
        i = bisect.bisect_right(self._bases(), bound_arg(offset, "offset")) - 1
        return self.segments[i] if i >= 0 else None

    # --- lookups -----------------------------------------------------------------------------------
    def translate_offset(self, offset: int) -> tuple[LogSegment, LogOffsetPosition] | None:
        """The first batch (in any segment from the floor one on) whose last offset >= ``offset``.

        Raises:
            CorruptionError: a corrupt entry met on the way (path and position in the message).
        """
        offset = bound_arg(offset, "offset")
        i = max(0, bisect.bisect_right(self._bases(), offset) - 1)
        for seg in self.segments[i:]:
            found = seg.translate_offset(offset)
            if found is not None:
                return seg, found
        return None

    def find_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The earliest record with timestamp >= ``timestamp`` (Kafka ``fetchOffsetByTimestamp``).

        Raises:
            CorruptionError: a corrupt entry met on the way.
        """
        timestamp = bound_arg(timestamp, "timestamp")
        for seg in self.segments:
            if seg.largest_timestamp >= timestamp:
                return seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
        return None

    def batches(self) -> Iterator[tuple[LogSegment, RecordBatch]]:
        """Every batch of every segment, in order."""
        for seg in self.segments:
            for b in seg.batches():
                yield seg, b

    # --- writing -----------------------------------------------------------------------------------
    def roll(self, new_base_offset: int | None = None) -> LogSegment:
        """Close the active segment for writing and start a new one (Kafka ``LocalLog.roll``)."""
        if not self.writable:
            raise ReadOnlyError(f"log {self.dir} is open read-only")
        end = self.log_end_offset
        base = end if new_base_offset is None else max(int_arg(new_base_offset, "new_base_offset"), end)
        active = self.active_segment
        if base == active.base_offset and active.size == 0:
            return active
        if base <= active.base_offset:
            raise InvalidMessageError(
                f"cannot roll to base offset {base}: active segment starts at {active.base_offset}"
            )
        segment_file_name(base)  # a base offset past int64 is refused before anything changes
        active.on_become_inactive_segment()
        seg = LogSegment.open(self.dir, base, self.config, writable=True, impl=self._impl)
        self.segments.append(seg)
        return seg

    def append(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append whole batches whose offsets continue the log (follower-style: offsets are kept).

        Raises:
            InvalidMessageError: the first offset is below the log end offset.
            CorruptionError: ``records`` is not a sequence of complete, CRC-valid batches.
        """
        if not self.writable:
            raise ReadOnlyError(f"log {self.dir} is open read-only")
        if not isinstance(records, (bytes, bytearray, memoryview)):
            raise InvalidMessageError(f"records must be bytes-like, not {type(records).__name__}")
        data = bytes(records)
        hdrs, stop, st = self._k.batch.batch_headers(data, 0, len(data), self._k.batch.CRC_STOP, -1)
        if not hdrs:
            return self.active_segment.append(data)  # raises for corrupt input, no-op for empty
        first = hdrs[0][3] if hdrs[0][2] >= 2 else hdrs[0][4]
        if first < self.log_end_offset:
            raise InvalidMessageError(
                f"first offset {first} of the appended records is below the log end offset "
                f"{self.log_end_offset}"
            )
        last = max(h[4] for h in hdrs)
        max_ts = max(h[5] for h in hdrs)
        if self.active_segment.should_roll(len(data), max_ts, last):
            self.roll(first)
        return self.active_segment.append(data)

    def flush(self) -> None:
        for s in self.segments:
            s.flush()

    def close(self) -> None:
        for s in self.segments:
            s.close()

    def __repr__(self) -> str:
        return f"<KafkaLog {self.dir} segments={len(self.segments)}>"
