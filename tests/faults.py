"""Full-disk doubles of ``rmqcore.fileops.FileOps`` (inject with ``fileops.use``)."""
from __future__ import annotations

import errno

from rmqcore import fileops


def _enospc(path: str = "") -> OSError:
    return OSError(errno.ENOSPC, "No space left on device", path or None)


class FullFor(fileops.FileOps):
    """A disk that is full for new files whose path contains ``part`` (every file: "") while
    ``full`` is set; ``refused`` counts the creations it refused."""

    def __init__(self, part: str = "") -> None:
        self.part = part
        self.full = False
        self.refused = 0

    def create(self, path: str, size: int, allocate: int | None = None) -> int:
        if self.full and self.part in path:
            self.refused += 1
            raise _enospc(path)
        return super().create(path, size, allocate)


class FullAllocations(fileops.FileOps):
    """Allocations (file creation included) fail with ENOSPC while ``full`` is set."""

    def __init__(self, full: bool = False) -> None:
        self.full = full

    def allocate(self, fd: int, offset: int, length: int) -> None:
        if self.full:
            raise _enospc()
        super().allocate(fd, offset, length)
