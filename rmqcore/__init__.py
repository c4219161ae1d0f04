"""rmqcore: an embeddable message store whose files are byte-compatible with Apache RocketMQ's
broker store (CommitLog, ConsumeQueue, IndexFile) and Kafka's log segments, with a Cython core.

``rmqcore.IMPLEMENTATION`` says whether the native kernels or their pure-Python twins are in use
(``RMQCORE_IMPL=auto|native|pure`` selects). This module never imports pyspark.
"""
from __future__ import annotations

from . import errors, layout
from ._impl import IMPLEMENTATION
from .commitlog import AppendResult, BatchAppendResult, Blank, CommitLog, RecordBatch, ScanStop
from .errors import (
    ChecksumError,
    ConfigError,
    CorruptionError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    PropertiesTooLargeError,
    RmqError,
    StoreClosedError,
)
from .mappedfile import MappedFile, MappedFileQueue
from .message import (
    Host,
    MessageExt,
    create_message_id,
    decode_message_id,
    parse_properties,
    properties_to_string,
)

__version__ = "0.1.0"

__all__ = [
    "IMPLEMENTATION",
    "__version__",
    "errors",
    "layout",
    "CommitLog",
    "AppendResult",
    "BatchAppendResult",
    "Blank",
    "ScanStop",
    "RecordBatch",
    "MappedFile",
    "MappedFileQueue",
    "Host",
    "MessageExt",
    "create_message_id",
    "decode_message_id",
    "parse_properties",
    "properties_to_string",
    "RmqError",
    "ConfigError",
    "CorruptionError",
    "ChecksumError",
    "InvalidMessageError",
    "InvalidTopicError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "PropertiesTooLargeError",
    "StoreClosedError",
]
