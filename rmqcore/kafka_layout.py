"""Kafka's formats by name, as ``layout.py`` is RocketMQ's: the ``.log`` walk's statuses, CRC modes and
entry sizes, and the sparse index search's modes.

A leaf module (it imports nothing): both twins of the ``kafka_batch`` and ``sparse`` kernels re-export
these names (the native ones check at import that their C agrees), and :mod:`rmqcore.kafka` maps the
statuses to exceptions. Kafka's names in brackets.
"""
from __future__ import annotations

__all__ = [
    "OK", "END", "TORN", "E_SIZE", "E_MAGIC", "E_CRC", "E_SHORT",
    "CRC_NONE", "CRC_STOP", "CRC_REPORT",
    "HEADER_SIZE_UP_TO_MAGIC", "LOG_OVERHEAD", "RECORD_BATCH_OVERHEAD", "MIN_ENTRY_SIZE",
    "LEGACY_V1_MIN_SIZE",
    "LARGEST_LOWER_BOUND", "SMALLEST_UPPER_BOUND", "WARM_SECTION_BYTES",
]  # fmt: skip

# where a walk over entries stopped (negative: corruption at the stop position)
OK = 0  # an entry was read
END = 1  # no byte left
TORN = 2  # a partial entry at the end (the iteration simply ends)
E_SIZE = -1  # size field below MIN_ENTRY_SIZE
E_MAGIC = -2  # magic not 0, 1 or 2
E_CRC = -3  # the stored CRC differs from the computed one
E_SHORT = -4  # an entry shorter than its format's overhead

# how a walk treats CRCs
CRC_NONE = 0  # not checked
CRC_STOP = 1  # a bad CRC ends the walk with E_CRC
CRC_REPORT = 2  # checked and reported per entry; the walk goes on

HEADER_SIZE_UP_TO_MAGIC = 17  # [Records.HEADER_SIZE_UP_TO_MAGIC] offset, size, 4 bytes, magic
LOG_OVERHEAD = 12  # [Records.LOG_OVERHEAD] offset (8) + size (4)
RECORD_BATCH_OVERHEAD = 61  # [DefaultRecordBatch.RECORD_BATCH_OVERHEAD] a v2 batch's header
MIN_ENTRY_SIZE = 14  # [LegacyRecord.RECORD_OVERHEAD_V0] the smallest legal size field
LEGACY_V1_MIN_SIZE = 22  # [LegacyRecord.RECORD_OVERHEAD_V1] the smallest size field of a v1 message

# the sparse index search ([AbstractIndex.IndexSearchType]) and its warm tail
LARGEST_LOWER_BOUND = 0  # the last entry <= the target
SMALLEST_UPPER_BOUND = 1  # the first entry >= the target
WARM_SECTION_BYTES = 8192  # [AbstractIndex.warmEntries() * entrySize] the last 8 KiB of an index is "warm"
