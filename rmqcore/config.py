"""Store configuration (MessageStoreConfig's knobs that shape files and behaviour) and argument checks.

Geometry (file sizes, index slots and entries) is written to ``<store>/rmqcore.json`` when rmqcore
creates a store and read back on open; ``rmqcore.geometry.resolve`` is the rule.
"""
from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import geometry as _geometry
from . import layout as L
from .errors import ConfigError, InvalidMessageError
from .geometry import GEOMETRY_FILE, GEOMETRY_KEYS, detect_file_size

__all__ = ["StoreConfig", "GEOMETRY_FILE", "load_geometry", "save_geometry", "detect_file_size"]

# the geometry's file and rule live in rmqcore.geometry; these names stay for callers of this module
load_geometry = _geometry.load
save_geometry = _geometry.save


@dataclass(frozen=True)
class StoreConfig:
    """Knobs of a MessageStore (RocketMQ names in the comments; RocketMQ's defaults)."""

    commitlog_file_size: int = L.DEFAULT_COMMITLOG_FILE_SIZE  # mappedFileSizeCommitLog
    cq_file_size: int = L.DEFAULT_CQ_FILE_SIZE  # mappedFileSizeConsumeQueue
    index_slots: int = L.DEFAULT_INDEX_SLOTS  # maxHashSlotNum
    index_entries: int = L.DEFAULT_INDEX_ENTRIES  # maxIndexNum
    flavour: int = 5  # which RocketMQ's bytes to write: 4 or 5
    store_host: Any = "127.0.0.1:10911"  # "ip:port", "[v6]:port", (ip, port) or a Host
    max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE  # maxMessageSize
    message_index_enable: bool = True  # messageIndexEnable
    max_msgs_num_batch: int = 64  # maxMsgsNumBatch (query by key)
    # rmqcore: lookup() keeps the newest offset of each key hash in memory (a KeyCache, ~24-48
    # bytes per distinct key, built from the index files on first use): one probe instead of a
    # slot read and a chain walk in the index file. Answers are the same either way.
    key_cache: bool = True
    check_crc_on_recover: bool = True  # checkCRCOnRecover
    # rmqcore: recovery checks every consume-queue unit against the CommitLog and rebuilds wrong ones
    # (``rmqcore recover`` does); otherwise only each queue's last units (and, after a crash, the
    # units of the re-dispatched range are rebuilt)
    check_consume_queues: bool = False
    warm_mapped_file: bool = False  # warmMappedFileEnable: pre-fault the next CommitLog file
    flush_disk_type: str = "ASYNC_FLUSH"  # flushDiskType: ASYNC_FLUSH or SYNC_FLUSH (group commit)
    flush_interval_ms: int = 500  # flushIntervalCommitLog
    flush_least_pages: int = 4  # flushCommitLogLeastPages
    flush_thorough_interval_ms: int = 10_000  # flushCommitLogThoroughInterval
    sync_flush_timeout_ms: int = 5000  # syncFlushTimeout
    flush_interval_consume_queue_ms: int = 1000  # flushIntervalConsumeQueue (CQ, index, checkpoint)
    file_reserved_time_hours: float = 72  # fileReservedTime
    delete_when: str = "04"  # deleteWhen: hours of the day (";"-separated) when expired files go
    disk_max_used_space_ratio: int = 75  # diskMaxUsedSpaceRatio: above it, delete expired files now
    disk_space_clean_forcibly_ratio: int = 85  # diskSpaceCleanForciblyRatio: above it, delete oldest files
    disk_space_warning_level_ratio: int = 90  # diskSpaceWarningLevelRatio: above it, refuse writes
    clean_file_forcibly_enable: bool = True  # cleanFileForciblyEnable
    delete_file_batch_max: int = 10  # deleteFileBatchMax
    # "auto": a reput thread dispatches while puts go on, and reads first dispatch what is pending
    # (every read sees every earlier put); "inline": only the caller's thread, before reads and at
    # close; "put": no thread, each put dispatches (publishes) its own record in the put's call
    # (store/dispatch.py); "background": only the reput thread, reads see what it has dispatched
    # (a broker)
    dispatch: str = "auto"
    max_transfer_bytes_in_memory: int = 256 * 1024  # maxTransferBytesOnMessageInMemory
    max_transfer_count_in_memory: int = 32  # maxTransferCountOnMessageInMemory
    max_transfer_bytes_on_disk: int = 64 * 1024  # maxTransferBytesOnMessageInDisk
    max_transfer_count_on_disk: int = 8  # maxTransferCountOnMessageInDisk
    access_message_in_memory_max_ratio: int = 40  # accessMessageInMemoryMaxRatio (% of RAM)
    # rmqcore's own sparse indexes per CommitLog file (rmqcore-index/): an entry once more than this
    # many bytes of records went by since the last one (Kafka's index.interval.bytes); any value is
    # safe across reopens, since the file being written is re-indexed at open
    index_interval_bytes: int = 4096
    # consume-queue and index pages kept faulted in this far ahead of dispatch, on a thread of
    # their own (``warmahead.WarmAhead``); 0 turns it off
    logics_warm_ahead: int = 4 * 1024 * 1024
    # rmqcore: MADV_HUGEPAGE on the CommitLog's and consume queues' maps under ASYNC_FLUSH, so the
    # page cache holds them in large folios and write-back cleans a folio per TLB shootdown, not a
    # 4 KiB page (batched puts with dispatch ran 1.2-1.4x as fast here). Ignored under SYNC_FLUSH.
    huge_pages: bool = True
    # rmqcore: consume-queue files mapped at once (each holds a file descriptor); beyond it the least
    # recently used let go of their maps and map again when used (thousands of queues under a small
    # ``ulimit -n``). 0: a quarter of the process's descriptor limit
    max_open_queue_files: int = 0
    clock: Callable[[], int] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _check_field(self, f.name, f.type)
        if self.flavour not in (4, 5):
            raise ConfigError(f"flavour must be 4 or 5, not {self.flavour!r}")
        if self.cq_file_size % L.CQ_UNIT_SIZE:
            raise ConfigError(f"cq_file_size must be a positive multiple of 20, not {self.cq_file_size}")
        if self.flush_disk_type not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise ConfigError(f"flush_disk_type must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}")
        if self.dispatch not in ("auto", "inline", "put", "background"):
            raise ConfigError(
                f"dispatch must be 'auto', 'inline', 'put' or 'background', not {self.dispatch!r}")

    def replace(self, **kw: Any) -> StoreConfig:
        """A copy with the fields in ``kw`` changed (ConfigError for a name that is no field)."""
        unknown = sorted(set(kw) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ConfigError(f"unknown setting{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
        return dataclasses.replace(self, **kw)


_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
# the integer knobs' ranges where they are narrower than [0, int64]: the geometry is a Java int in
# RocketMQ's MessageStoreConfig; a flush interval of 0 would make a flusher spin
_INT_RANGES: dict[str, tuple[int, int]] = {
    "commitlog_file_size": (4096, _INT32_MAX),
    "cq_file_size": (L.CQ_UNIT_SIZE, _INT32_MAX),
    "index_slots": (1, _INT32_MAX),
    "index_entries": (2, _INT32_MAX),
    "max_message_size": (0, _INT32_MAX),
    "max_msgs_num_batch": (0, _INT32_MAX),
    "flush_interval_ms": (1, _INT64_MAX),
    "flush_interval_consume_queue_ms": (1, _INT64_MAX),
}


def _check_field(cfg: StoreConfig, name: str, kind: Any) -> None:
    """Field ``name`` of ``cfg`` is of its annotated type (an int within its range: numpy integers
    become ints; a finite real >= 0 for a float; a bool; a str; a callable clock), else ConfigError."""
    v = getattr(cfg, name)
    if kind == "int":
        if isinstance(v, bool):
            raise ConfigError(f"{name} must be an integer, not {v!r}")
        v = int_arg(v, name)
        lo, hi = _INT_RANGES.get(name, (0, _INT64_MAX))
        if not lo <= v <= hi:
            raise ConfigError(f"{name} must be in [{lo}, {hi}], not {v}")
        object.__setattr__(cfg, name, v)
    elif kind == "float":
        v = real_arg(v, name)
        if not 0 <= v < float("inf"):
            raise ConfigError(f"{name} must be a finite number >= 0, not {v!r}")
    elif kind == "bool":
        if not isinstance(v, bool):
            raise ConfigError(f"{name} must be a bool, not {v!r}")
    elif name == "store_host":  # what CommitLog takes: "ip:port", "[v6]:port", (ip, port), a Host
        from .message import parse_host

        try:
            parse_host(v)
        except InvalidMessageError as e:
            raise ConfigError(f"store_host: {e}") from None
    elif kind == "str":
        if not isinstance(v, str):
            raise ConfigError(f"{name} must be a str, not {type(v).__name__}")
    elif name == "clock" and v is not None and not callable(v):
        raise ConfigError(f"clock must be a callable returning milliseconds, or None, not {v!r}")


def int_arg(value: Any, name: str) -> int:
    """``value`` as an int (numpy integers too); anything else raises ConfigError naming ``name``."""
    try:
        return operator.index(value)
    except TypeError:
        raise ConfigError(f"{name} must be an integer, not {type(value).__name__}") from None


def path_arg(value: Any, name: str) -> Path:
    """``value`` (a str or path-like) as a Path; ConfigError naming ``name`` for anything else or a
    path holding a NUL character."""
    try:
        path = Path(value)
    except TypeError:
        raise ConfigError(f"{name} must be a str or a path, not {type(value).__name__}") from None
    if "\0" in str(path):
        raise ConfigError(f"{name} {str(path)!r} holds a NUL character")
    return path


def bound_arg(value: Any, name: str) -> int:
    """``value`` as an int clamped to int64 (a bound or a count: past int64 is the same as no bound);
    ConfigError naming ``name`` when it is no integer."""
    return min(max(int_arg(value, name), -(2**63)), 2**63 - 1)


def bool_arg(value: Any, name: str) -> bool:
    """``value``'s truth (a flag): ConfigError naming ``name`` when it has none (a numpy array)."""
    if value is True or value is False:
        return value
    try:
        return bool(value)
    except Exception:  # numpy's ValueError for an array, or a __bool__ of the caller's that raises
        raise ConfigError(f"{name} must be a bool, not {type(value).__name__}") from None


def real_arg(value: Any, name: str) -> float:
    """``value`` as a float: an int or a float (numpy's too), never a bool, a str or NaN; anything else
    raises ConfigError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"{name} must be a number, not {type(value).__name__}")
    try:
        v = float(value)
    except OverflowError:  # an int past the float range
        v = float("inf") if value > 0 else float("-inf")
    if v != v:
        raise ConfigError(f"{name} must be a number, not NaN")
    return v
