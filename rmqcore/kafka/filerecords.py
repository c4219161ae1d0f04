"""The ``.log`` file of a Kafka segment, as Kafka's ``FileRecords``: appends with ``pwrite``, reads through a
read-only shared mapping, truncation and trimming of a preallocated tail.

:class:`~rmqcore.kafka.segment.LogSegment` owns one, beside its indexes; what the bytes mean (record
batches) is :mod:`rmqcore.kafka.records`' business.
"""

from __future__ import annotations

import mmap
import os
import threading
from pathlib import Path
from typing import Any

from rmqcore.bases import ClosesOnce
from rmqcore.errors import OffsetOutOfRangeError, ReadOnlyError, StoreClosedError, full_disk_is_error

__all__ = ["FileRecords"]

class FileRecords(ClosesOnce):
    """The ``.log`` file: appends with ``pwrite``, reads through a read-only shared mapping.

    ``size`` is the logical end of data; with preallocation the file may be longer (zero tail).
    """

    def __init__(
        self,
        path: Path,
        *,
        writable: bool,
        file_already_exists: bool,
        init_file_size: int = 0,
        preallocate: bool = False,
    ) -> None:
        self.path = path
        self.writable = writable
        self._lock = threading.RLock()
        self._prealloc = 0  # the zero-filled length preallocate gave the file (Kafka's FileRecords)
        if writable:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if not file_already_exists and preallocate:
                self._prealloc = init_file_size
                os.ftruncate(self._fd, init_file_size)
                self._size = 0
            else:
                self._size = os.fstat(self._fd).st_size
        else:
            self._fd = os.open(path, os.O_RDONLY)
            self._size = os.fstat(self._fd).st_size
        self._map: mmap.mmap | None = None
        self._closed = False

    @property
    def size(self) -> int:
        return self._size

    def view(self) -> Any:
        """A buffer covering at least ``[0, size)`` (valid until the next append/truncate/close)."""
        with self._lock:
            if self._closed:
                raise StoreClosedError(f"log file {self.path} is closed")
            if self._size == 0:
                return b""
            if self._map is None or len(self._map) < self._size:
                self._unmap()
                length = os.fstat(self._fd).st_size
                self._map = mmap.mmap(self._fd, length, access=mmap.ACCESS_READ)
            return self._map

    def _unmap(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None

    def append(self, data: bytes) -> int:
        with self._lock:
            if not self.writable:
                raise ReadOnlyError(f"log file {self.path} is open read-only")
            n = len(data)
            written = 0
            mv = memoryview(data)
            with full_disk_is_error(f"{n} bytes appended to {self.path} at {self._size}"):
                try:
                    while written < n:
                        written += os.pwrite(self._fd, mv[written:], self._size + written)
                except OSError:
                    if written:
                        self._undo_partial(self._size + written)
                    raise
            self._size += n
            return n

    def _undo_partial(self, end: int) -> None:
        """Put back the file as it was before an append that wrote up to ``end`` and failed: cut
        what grew it, zero what it wrote into the preallocated length."""
        keep = max(self._size, self._prealloc)
        if end > keep:
            os.ftruncate(self._fd, keep)
        if min(end, keep) > self._size:
            os.pwrite(self._fd, bytes(min(end, keep) - self._size), self._size)

    def truncate_to(self, target_size: int) -> int:
        """Kafka ``FileRecords.truncateTo``: shrink to ``target_size``; returns bytes removed.

        Raises:
            OffsetOutOfRangeError: target above the current size or negative.
        """
        with self._lock:
            original = self._size
            if target_size > original or target_size < 0:
                raise OffsetOutOfRangeError(
                    f"Attempt to truncate log segment {self.path} to {target_size} bytes failed, "
                    f"size of this "
                    f"log segment is {original} bytes."
                )
            if target_size < os.fstat(self._fd).st_size:
                self._unmap()  # never leave a mapping beyond EOF (SIGBUS)
                os.ftruncate(self._fd, target_size)
                self._size = target_size
            return original - target_size

    def trim(self) -> None:
        if self.writable:
            self.truncate_to(self._size)

    def flush(self) -> None:
        if self.writable and not self._closed:
            os.fsync(self._fd)

    def _finish_writes(self) -> None:
        self.flush()
        self.trim()
