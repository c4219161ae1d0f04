"""``spark.readStream.format("rmq")``: a store's CommitLog as a stream.

One store per query, followed (``MessageStore(read_only=True, follow=True)``, opened once by the
query's reader on the driver): each micro-batch's end is the writer's published end, read from its
notify file, not a re-scan of the CommitLog per micro-batch (a store without one, a broker's, is
scanned on from where the last look ended). Offsets are ``{"offset": N}``, CommitLog physical offsets, always record-aligned
(the end of the valid data, never inside a torn tail). ``startingOffset``: ``earliest`` (default),
``latest`` or a number (a record boundary). ``maxRowsPerTrigger`` / ``maxBytesPerTrigger`` limit each
micro-batch (at least one record per batch); ``trigger(availableNow=True)`` reads up to the end seen at
start. Restart from the checkpoint resumes after the last committed offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from ... import layout as L
from ...columnar.arrow import decode_range
from ...columnar.stores import open_commitlog, store_dirs
from ...errors import ConfigError
from .options import store_geometry

__all__ = ["RmqStreamReader", "StreamPartition"]

@dataclass
class StreamPartition(InputPartition):
    store: str
    file_size: int
    end: int
    start: int
    stop: int


try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxBytes,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older 4.x
    ReadAllAvailable = ReadMaxBytes = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]


class RmqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc,unused-ignore]
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        dirs = store_dirs(options["path"])
        if len(dirs) != 1:
            raise ConfigError("a streaming rmq read takes one store directory")
        self.store = dirs[0]
        self.file_size, _ = store_geometry(self.store, options)
        self.max_rows = int(options.get("maxrowspertrigger", "0"))
        self.max_bytes = int(options.get("maxbytespertrigger", "0"))
        self.target: int | None = None
        self._live: Any = None  # the follower, opened on first use (the reader is not pickled)

    def _end(self) -> int:
        """The end of the records the writer has published (record-aligned: never a torn tail)."""
        if self._live is None:
            from ...store import MessageStore

            self._live = MessageStore(self.store, read_only=True, follow=True,
                                      commitlog_file_size=self.file_size, message_index_enable=False)
        return int(self._live._follower.commitlog_end())

    def stop(self) -> None:
        """The query stopped: let the follower go."""
        if self._live is not None:
            self._live.close()
            self._live = None

    def initialOffset(self) -> dict[str, int]:
        s = self.options.get("startingoffset", "earliest").lower()
        if s == "latest":
            return {"offset": self._end()}
        if s == "earliest":
            cl = open_commitlog(self.store, self.file_size)
            try:
                return {"offset": cl.min_offset}
            finally:
                cl.close()
        return {"offset": int(s)}

    def getDefaultReadLimit(self) -> Any:
        if self.max_rows > 0:
            return ReadMaxRows(self.max_rows)
        if self.max_bytes > 0:
            return ReadMaxBytes(self.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._end()

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:
        end = self._end() if self.target is None else self.target
        begin = int(start["offset"]) if start else 0
        if limit is None or isinstance(limit, ReadAllAvailable):
            max_rows, max_bytes = 0, 0
        else:
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.max_rows
            max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else self.max_bytes
        if begin >= end or (max_rows <= 0 and max_bytes <= 0):
            return {"offset": max(begin, end)}
        return {"offset": self._advance(begin, end, max_rows, max_bytes)}

    def _advance(self, begin: int, end: int, max_rows: int, max_bytes: int) -> int:
        cl = open_commitlog(self.store, self.file_size, end)
        try:
            off, rows, nbytes = begin, 0, 0
            while off < end:
                b = cl.read_batch(off, max_records=1024)
                sizes = b.columns[L.C_SIZE].tolist()
                pos = (b.columns[L.C_POSITION] + b.start_offset).tolist()
                for p, sz in zip(pos, sizes, strict=False):
                    if p >= end:
                        return end
                    if rows and ((max_rows and rows >= max_rows) or (max_bytes and nbytes + sz > max_bytes)):
                        return int(p)
                    rows += 1
                    nbytes += sz
                if b.next_offset <= off:
                    break
                off = b.next_offset
            return min(off, end) if off < end else end
        finally:
            cl.close()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[StreamPartition]:
        a, z = int(start["offset"]), int(end["offset"])
        parts = []
        fs = self.file_size
        while a < z:
            file_end = (a // fs + 1) * fs
            parts.append(StreamPartition(self.store, fs, z, a, min(z, file_end)))
            a = file_end
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, StreamPartition)
        cl = open_commitlog(partition.store, partition.file_size, partition.end)
        try:
            yield from decode_range(cl, partition.store, partition.start, partition.stop)
        finally:
            cl.close()

    def commit(self, end: dict[str, int]) -> None:
        pass

