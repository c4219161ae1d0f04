"""Kafka log segments, byte-compatible with Apache Kafka's storage.

Files: ``.log`` (record batches), ``.index``, ``.timeindex`` and ``.txnindex`` per segment.

Shape follows Kafka's storage module: :class:`AbstractIndex` / :class:`OffsetIndex` / :class:`TimeIndex`
(fixed-entry mmap indexes), :class:`LogSegment` (one segment: append, lookups, truncation, recovery) and
:class:`KafkaLog` (a partition directory as one log). Record batches v2 and legacy v0/v1 messages are
decoded by :mod:`rmqcore.kafka.records`. Hot loops (index binary search, batch-header walks with
CRC-32C, varint record parsing) are native kernels with pure-Python twins (``sparse``,
``kafka_batch``).

Compressed batches need ``cramjam`` for snappy, lz4 and zstd (``pip install rmqcore[kafka]``); gzip
uses the standard library.
"""

from __future__ import annotations

from .index import (
    AbstractIndex,
    InvalidOffsetError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)
from .log import KafkaLog
from .records import (
    DefaultRecordBatch,
    Header,
    LegacyRecordBatch,
    Record,
    RecordBatch,
    encode_batch,
    read_batch,
)
from .segment import (
    AppendResult,
    LogOffsetPosition,
    LogSegment,
    SegmentConfig,
    TimestampAndOffset,
    parse_segment_base_offset,
    segment_file_name,
)
from .txnindex import AbortedTxn, TransactionIndex

__all__ = [
    "AbstractIndex",
    "OffsetIndex",
    "TimeIndex",
    "OffsetPosition",
    "TimestampOffset",
    "InvalidOffsetError",
    "KafkaLog",
    "LogSegment",
    "SegmentConfig",
    "LogOffsetPosition",
    "TimestampAndOffset",
    "AppendResult",
    "segment_file_name",
    "parse_segment_base_offset",
    "RecordBatch",
    "DefaultRecordBatch",
    "LegacyRecordBatch",
    "Record",
    "Header",
    "read_batch",
    "encode_batch",
    "TransactionIndex",
    "AbortedTxn",
]
