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

from . import index, log, records, segment, txnindex
from .index import *  # noqa: F403
from .log import *  # noqa: F403
from .records import *  # noqa: F403
from .segment import *  # noqa: F403
from .txnindex import *  # noqa: F403

# The package's names are its submodules' public names (asyncio's pattern): each is declared once, in
# the module that defines or re-exports it. ``+=`` of a module's ``__all__`` is the form mypy follows.
__all__: list[str] = []
__all__ += index.__all__
__all__ += log.__all__
__all__ += records.__all__
__all__ += segment.__all__
__all__ += txnindex.__all__
