"""StoreCheckpoint: ``<store>/checkpoint``, one 4096-byte page of big-endian longs.

    0  physicMsgTimestamp    store time of the last message known flushed in the CommitLog
    8  logicsMsgTimestamp    store time of the last message written into a consume queue
   16  indexMsgTimestamp     endTimestamp of the last index file that filled up and was flushed
   24  masterFlushedOffset   (5.0+) HA: the master's flushed offset seen by a slave
   32  confirmPhyOffset      (5.1.1+) confirm offset (controller / duplication mode)

4.x files carry only the first three (the rest of the page is zero); rmqcore writes the five-field
layout in flavour 5. ``min_timestamp`` is what abnormal recovery compares first records against.
Crash semantics: rewritten in place and fsynced; a torn page can only make recovery start earlier.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

from . import layout as L
from .errors import CorruptionError, full_disk_is_error

__all__ = ["StoreCheckpoint"]

_FIELDS5 = struct.Struct(">qqqqq")
_FIELDS3 = struct.Struct(">qqq")
MARGIN_MS = 3000  # StoreCheckpoint.getMinTimestamp: min(physic, logics) - 3 s


class StoreCheckpoint:
    """Load, update and flush the checkpoint page."""

    def __init__(self, path: str | os.PathLike[str], flavour: int = 5, read_only: bool = False) -> None:
        self.path = Path(path)
        self.flavour = flavour
        self.read_only = read_only
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        if self.path.exists():
            data = self.path.read_bytes()
            if len(data) < _FIELDS3.size:
                raise CorruptionError(f"checkpoint of {len(data)} bytes is shorter than 24", 0, str(self.path))
            (self.physic_msg_timestamp, self.logics_msg_timestamp,
             self.index_msg_timestamp) = _FIELDS3.unpack_from(data, 0)
            if len(data) >= _FIELDS5.size:
                self.master_flushed_offset, self.confirm_phy_offset = struct.unpack_from(">qq", data, 24)

    def min_timestamp(self) -> int:
        """getMinTimestamp: max(0, min(physic, logics) - 3000 ms)."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - MARGIN_MS)

    def min_timestamp_index(self) -> int:
        """getMinTimestampIndex: min(getMinTimestamp, indexMsgTimestamp)."""
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def to_bytes(self) -> bytes:
        page = bytearray(L.CHECKPOINT_FILE_SIZE)
        if self.flavour >= 5:
            _FIELDS5.pack_into(page, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                               self.index_msg_timestamp, self.master_flushed_offset, self.confirm_phy_offset)
        else:
            _FIELDS3.pack_into(page, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                               self.index_msg_timestamp)
        return bytes(page)

    def flush(self) -> None:
        """Write the page in place and fsync it."""
        if self.read_only:
            return
        with full_disk_is_error(str(self.path)):  # no descriptor left: TooManyOpenFilesError
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            os.pwrite(fd, self.to_bytes(), 0)
            os.fsync(fd)
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return (f"StoreCheckpoint(physic={self.physic_msg_timestamp}, logics={self.logics_msg_timestamp}, "
                f"index={self.index_msg_timestamp}, master_flushed={self.master_flushed_offset}, "
                f"confirm={self.confirm_phy_offset})")
