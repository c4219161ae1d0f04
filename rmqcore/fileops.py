"""The few file operations the store's durability depends on, behind one injectable object.

Tests replace ``FILEOPS`` (``use(...)``) to inject faults: a full disk at file creation, or a
"power loss" that keeps only what was flushed. Production code calls these and nothing else for
creating segment files and making them durable.

Files are *allocated* at creation (``posix_fallocate``), not left sparse: with writes through a
map, a full disk would otherwise surface as SIGBUS on the first touch of an unallocated page and
kill the process. Allocation moves that failure to file creation, where it is a clear ``OSError``
(ENOSPC) the store turns into ``DiskFullError`` before anything is written.
"""
from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from collections.abc import Iterator
from typing import Any

from .errors import full_disk_is_error

__all__ = ["FileOps", "FILEOPS", "use", "current", "allocate"]

_fdatasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


class FileOps:
    """Default: real system calls."""

    def create(self, path: str, size: int, allocate: int | None = None) -> int:
        """Create ``path`` of ``size`` bytes, the first ``allocate`` of them (all by default)
        allocated; returns an open read-write fd."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            os.ftruncate(fd, size)
            self.allocate(fd, 0, size if allocate is None else allocate)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
            raise
        return fd

    def allocate(self, fd: int, offset: int, length: int) -> None:
        """Allocate the blocks of ``[offset, offset + length)`` of ``fd`` (posix_fallocate; a file
        system without it leaves the range as it is). Raises OSError (ENOSPC) on a full disk."""
        if length > 0 and hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, offset, length)
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOTSUP", -1)):
                    raise

    def fdatasync(self, fd: int, mapped: Any) -> None:
        """Make the file's written data durable (also pages dirtied through its map).

        For a MappedFile only its unflushed written range is synced (``appender.sync_range``:
        msync of the range, GIL released). A whole-file fdatasync also wrote back the pages
        pre-faulted past the write position, so the writer faulted on them again, and took
        100+ ms here while a producer kept writing."""
        mm = getattr(mapped, "mm", None)
        if mm is not None and not getattr(mapped, "read_only", True):
            from . import _impl

            _impl.appender.sync_range(mm, mapped.flushed_position, mapped.wrote_position)
            return
        _fdatasync(fd)


FILEOPS: FileOps = FileOps()


def current() -> FileOps:
    return FILEOPS


def allocate(fd: int, path: object, offset: int, length: int) -> None:
    """``current().allocate`` of ``[offset, offset + length)`` of ``path`` (open as ``fd``), before a
    map writes there; a full disk is a DiskFullError."""
    with full_disk_is_error(f"{path} ({offset + length} bytes)"):
        current().allocate(fd, offset, length)


@contextmanager
def use(ops: FileOps) -> Iterator[FileOps]:
    """Inject ``ops`` for the duration of the block (tests)."""
    global FILEOPS
    old, FILEOPS = FILEOPS, ops
    try:
        yield ops
    finally:
        FILEOPS = old
