"""Kafka's aborted-transaction index ``.txnindex`` (``TransactionIndex`` / ``AbortedTxn``).

Layout: a plain file (not mapped, not preallocated, created on the first append) of 34-byte
big-endian entries::

    int16 version (0) | int64 producerId | int64 firstOffset | int64 lastOffset | int64 lastStableOffset

Entries are appended in increasing ``lastOffset`` order; an entry lives in the segment that holds the
ABORT marker. Reads scan linearly.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from typing import NamedTuple

from rmqcore.errors import IndexCorruptError, ReadOnlyError, full_disk_is_error

from .index import InvalidOffsetError

__all__ = ["AbortedTxn", "TransactionIndex", "TxnIndexSearchResult"]

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = 0

    def encode(self) -> bytes:
        return _ENTRY.pack(
            self.version, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    """The ``.txnindex`` of one segment.

    Args:
        path: the file (it may not exist yet).
        start_offset: the segment's base offset.
        writable: whether appends / truncation are allowed.
    """

    def __init__(self, path: str | os.PathLike[str], start_offset: int, writable: bool = True) -> None:
        self.path = Path(path)
        self.start_offset = start_offset
        self.writable = writable
        self._lock = threading.RLock()
        self._last_offset: int | None = None
        entries = self.all_aborted_txns()
        if entries:
            self._last_offset = entries[-1].last_offset

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry in the file.

        Raises:
            IndexCorruptError: a partial trailing entry or an unsupported version.
        """
        with self._lock:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return []
            if len(data) % ENTRY_SIZE:
                raise IndexCorruptError(
                    f"transaction index {self.path.name} has {len(data)} bytes, "
                    f"not a multiple of {ENTRY_SIZE}",
                    len(data) - len(data) % ENTRY_SIZE,
                    str(self.path),
                )
            out = []
            for i, (ver, pid, first, last, lso) in enumerate(_ENTRY.iter_unpack(data)):
                if ver != 0:
                    raise IndexCorruptError(
                        f"Found aborted transaction with unsupported version {ver}",
                        i * ENTRY_SIZE,
                        str(self.path),
                    )
                out.append(AbortedTxn(pid, first, last, lso, ver))
            return out

    def append(self, txn: AbortedTxn) -> None:
        """Append an entry (creating the file).

        Raises:
            InvalidOffsetError: ``last_offset`` not above the previous entry's.
        """
        with self._lock:
            if not self.writable:
                raise ReadOnlyError(f"transaction index {self.path} is open read-only")
            if self._last_offset is not None and txn.last_offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"The last offset of appended transactions must increase sequentially, but "
                    f"{txn.last_offset} is not greater than current last offset {self._last_offset} "
                    f"of index {self.path}"
                )
            data = txn.encode()
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                start = os.fstat(fd).st_size
                written = 0
                with full_disk_is_error(f"an entry appended to {self.path}"):
                    try:
                        while written < len(data):
                            written += os.write(fd, data[written:])
                    except OSError:  # no partial entry is left (it would read as a corrupt index)
                        if written:
                            os.ftruncate(fd, start)
                        raise
            finally:
                os.close(fd)
            self._last_offset = txn.last_offset

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``."""
        out = []
        for t in self.all_aborted_txns():
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset:
                out.append(t)
            if t.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(out, True)
        return TxnIndexSearchResult(out, False)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose ``last_offset >= offset``."""
        with self._lock:
            keep = [t for t in self.all_aborted_txns() if t.last_offset < offset]
            if not self.path.exists():
                return
            with open(self.path, "r+b") as f:
                f.truncate(len(keep) * ENTRY_SIZE)
            self._last_offset = keep[-1].last_offset if keep else None

    def reset(self) -> None:
        """Truncate to no entries."""
        with self._lock:
            if self.path.exists():
                with open(self.path, "r+b") as f:
                    f.truncate(0)
            self._last_offset = None

    def sanity_check(self) -> None:
        """Raises IndexCorruptError when an entry's last offset is below the segment's start offset."""
        for i, t in enumerate(self.all_aborted_txns()):
            if t.last_offset < self.start_offset:
                raise IndexCorruptError(
                    f"Last offset of aborted transaction {t} in index {self.path.name} is less than start "
                    f"offset {self.start_offset}",
                    i * ENTRY_SIZE,
                    str(self.path),
                )

    def flush(self) -> None:
        if self.writable and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete_if_exists(self) -> bool:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def close(self) -> None:
        pass
