"""``spark.read.format("kafka-segments")``: Kafka partition directories (``<topic>-<n>/``) as rows.

``path`` is one partition directory or a glob of them (each row's directory is in ``partition_dir``).
One Spark partition per ``.log`` segment. Every record of every batch is returned, control records
of transactional batches included, as Kafka's own ``FileRecords`` reader reports them (LogAppendTime
applied to ``timestamp``, legacy compressed wrappers expanded); ``batch_position`` is the file
position of the (outer) batch. A segment whose tail is not a valid batch (e.g. the zero-filled
preallocated tail of a crash image) is read up to its last valid batch.

Schema: ``partition_dir string, segment long (base offset), offset long, timestamp long,
key binary, value binary, headers map<string,binary>, batch_position long`` (a header key that
repeats keeps its last value).

Pushdown (``spark.sql.python.filterPushdown.enabled=true``): ``offset`` comparisons prune segments
(by base offsets) and start each segment at the ``.index`` position of the lower bound; a
``timestamp`` lower bound starts each segment at the ``.index`` position of the ``.timeindex``
entry below it (segments are not skipped by time: an open segment's last time index entry may lag
behind its records; an index of a crash image only ever moves the start back). Both are only
pruning: the filters are handed back to Spark, so results are exactly those of an unfiltered read
filtered afterwards.

As with every Python data source on Spark 4.3, build a fresh DataFrame per logical read
(:func:`read_kafka_segments`); see :mod:`rmqcore.spark.rmq`.
"""

from __future__ import annotations

import glob as _glob
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from ..columnar.arrow import spark_ddl
from .rmq.options import path_options

__all__ = ["KafkaSegmentsDataSource", "read_kafka_segments", "SCHEMA"]

ARROW_SCHEMA = pa.schema(
    [
        ("partition_dir", pa.string()),
        ("segment", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", pa.map_(pa.string(), pa.binary())),
        ("batch_position", pa.int64()),
    ]
)
SCHEMA = spark_ddl(ARROW_SCHEMA)
_MAX = 2**63 - 1
_MIN = -(2**63)


def read_kafka_segments(spark: Any, path: str, **options: Any) -> Any:
    """A fresh ``spark.read.format("kafka-segments")`` DataFrame over ``path``."""
    r = spark.read.format("kafka-segments")
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(path)


def _partition_dirs(path: str) -> list[str]:
    from ..kafka.segment import parse_segment_base_offset

    cands = sorted(_glob.glob(path)) if any(c in path for c in "*?[") else [path]
    out = [
        os.path.abspath(d)
        for d in cands
        if os.path.isdir(d) and any(parse_segment_base_offset(n) is not None for n in os.listdir(d))
    ]
    if not out:
        raise FileNotFoundError(f"no Kafka partition directory matches {path!r}")
    return out


@dataclass
class SegmentPartition(InputPartition):
    partition_dir: str
    base_offset: int
    start_position: int
    offset_lo: int
    offset_hi: int


class KafkaSegmentsReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.off_lo, self.off_hi, self.ts_lo = _MIN, _MAX, _MIN

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        for f in filters:
            col = f.attribute[0] if len(f.attribute) == 1 else None
            v = getattr(f, "value", None)
            if col in ("offset", "timestamp") and isinstance(v, int) and not isinstance(v, bool):
                lo = (
                    v
                    if isinstance(f, (EqualTo, GreaterThanOrEqual))
                    else v + 1
                    if isinstance(f, GreaterThan)
                    else None
                )
                hi = (
                    v
                    if isinstance(f, (EqualTo, LessThanOrEqual))
                    else v - 1
                    if isinstance(f, LessThan)
                    else None
                )
                if col == "offset":
                    if lo is not None:
                        self.off_lo = max(self.off_lo, lo)
                    if hi is not None:
                        self.off_hi = min(self.off_hi, hi)
                elif lo is not None:
                    self.ts_lo = max(self.ts_lo, lo)
            yield f  # pruning only: Spark evaluates every filter exactly

    def partitions(self) -> list[SegmentPartition]:
        from ..kafka.log import KafkaLog

        parts: list[SegmentPartition] = []
        for d in _partition_dirs(self.options["path"]):
            log = KafkaLog(d)
            try:
                segs = log.segments
                for i, seg in enumerate(segs):
                    nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
                    if nxt is not None and nxt <= self.off_lo:
                        continue
                    if seg.base_offset > self.off_hi:
                        continue
                    start = 0
                    try:
                        if self.ts_lo != _MIN:
                            # an entry (T, O) says every record before offset O has a timestamp <= T
                            e = seg.time_index.lookup(self.ts_lo - 1)
                            start = max(
                                start, seg.offset_index.lookup(max(e.offset, seg.base_offset)).position
                            )
                        if self.off_lo > seg.base_offset:
                            start = max(start, seg.offset_index.lookup(self.off_lo).position)
                        if start < 0 or start > seg.size:
                            start = 0
                    except Exception:  # unusable index (e.g. a crash image): read from the start
                        start = 0
                    parts.append(SegmentPartition(d, seg.base_offset, int(start), self.off_lo, self.off_hi))
            finally:
                log.close()
        return parts or [SegmentPartition("", 0, 0, 0, -1)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SegmentPartition)
        from ..kafka.segment import LogSegment, SegmentConfig

        if not partition.partition_dir:
            return
        seg = LogSegment.open(partition.partition_dir, partition.base_offset, SegmentConfig(), writable=False)
        rows: dict[str, list[Any]] = {n: [] for n in ARROW_SCHEMA.names}
        try:
            for batch in seg.batches(partition.start_position, strict=False):
                if batch.last_offset < partition.offset_lo:
                    continue
                if batch.base_offset > partition.offset_hi:
                    break
                for r in batch.records():
                    rows["offset"].append(r.offset)
                    rows["timestamp"].append(r.timestamp)
                    rows["key"].append(r.key)
                    rows["value"].append(r.value)
                    rows["headers"].append([(h.key, h.value) for h in r.headers])
                    rows["batch_position"].append(batch.position)
                if len(rows["offset"]) >= 4096:
                    yield _to_arrow(rows, partition)
                    rows = {n: [] for n in ARROW_SCHEMA.names}
        finally:
            seg.close()
        if rows["offset"]:
            yield _to_arrow(rows, partition)


def _to_arrow(rows: dict[str, list[Any]], p: SegmentPartition) -> pa.RecordBatch:
    n = len(rows["offset"])
    return pa.RecordBatch.from_arrays(
        [
            pa.array([p.partition_dir] * n, pa.string()),
            pa.array([p.base_offset] * n, pa.int64()),
            pa.array(rows["offset"], pa.int64()),
            pa.array(rows["timestamp"], pa.int64()),
            pa.array(rows["key"], pa.binary()),
            pa.array(rows["value"], pa.binary()),
            pa.array(rows["headers"], pa.map_(pa.string(), pa.binary())),
            pa.array(rows["batch_position"], pa.int64()),
        ],
        schema=ARROW_SCHEMA,
    )


class KafkaSegmentsDataSource(DataSource):
    """``format("kafka-segments")``: batch reads of Kafka log segments."""

    @classmethod
    def name(cls) -> str:
        return "kafka-segments"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> KafkaSegmentsReader:
        return KafkaSegmentsReader(path_options(self.options, "kafka-segments"))
