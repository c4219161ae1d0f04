"""Which CommitLog file the appender writes into next, and the next one made ahead of it.

RocketMQ's ``MappedFileQueue.getLastMappedFile`` (the last file while it has room, else a new
one at the end of the log) and its ``AllocateMappedFileService`` (the file after it created in
the background, before the current one fills up). The appender kernels take a ``FileRoller`` and
call its two public methods: ``roll`` when their file is full or none is bound, ``prepare_next``
once the bound file is written up to ``prepare_at``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import ConfigError
from .mappedfile import MappedFile, MappedFileQueue
from .warmahead import Region, WarmAhead

__all__ = ["FileRoller"]

_WARM_CHUNK = 8 * 1024 * 1024  # bytes the WarmAhead thread populates per kernel call
_WARM_STEPS = 8  # the thread wakes each time the appender has written this fraction of warm_ahead
# the next file is prepared once the current one is this fraction full (the rest of the file is the
# lead time for creating, allocating and, with warm_next, faulting it in)
_PREPARE_FRACTION = 4


class FileRoller:
    """The write side of a CommitLog's ``MappedFileQueue`` (see the module docstring).

    Args:
        queue: the CommitLog's files.
        read_only: refuse to roll (ConfigError): nothing may be created.
        prepare_next: create the next file in the background.
        warm_next: also fault its pages in for writing.
        warm_ahead: keep this many bytes past the write position of the last file faulted in, on a
            background thread started with the first roll (0: none).
    """

    def __init__(self, queue: MappedFileQueue, *, read_only: bool, prepare_next: bool, warm_next: bool,
                 warm_ahead: int) -> None:
        self.queue = queue
        self.read_only = read_only
        self.prepare_next_file = prepare_next and not read_only
        self.warm_next = warm_next
        self.warm_ahead = 0 if read_only else warm_ahead
        # the appender calls prepare_next once its file is written this far: a store smaller than a
        # quarter of a file keeps one allocated file, not two
        self.prepare_at = queue.file_size // _PREPARE_FRACTION
        # called with each new file before the appender writes into it (the group commit registers it)
        self.file_listeners: list[Callable[[MappedFile], None]] = []
        # the appender's live end (int64[1]): the warm-ahead thread waits for appends on it
        self.progress: Any = None
        self._warmer: WarmAhead | None = None

    def roll(self, full: MappedFile | None) -> MappedFile:
        """The file to write into next, ``full`` being the appender's file that has no room left
        (None: none is bound yet). Raises ConfigError when read-only."""
        if self.read_only:
            raise ConfigError("the CommitLog was opened read-only")
        return self.writable(self.queue.max_offset())

    def writable(self, offset: int) -> MappedFile:
        """The last file while it has room, else a new one starting at ``offset``."""
        if self._warmer is None and self.warm_ahead > 0:
            self._warmer = WarmAhead(self._warm_region, _WARM_CHUNK, "rmqcore-warm-ahead", self.progress,
                                     self.warm_ahead // _WARM_STEPS)
        last = self.queue.last()
        if last is not None and not last.is_full():
            return last
        mf = self.queue.last_for_write(offset)
        for listener in self.file_listeners:
            listener(mf)
        return mf

    def prepare_next(self) -> None:
        """The appender's file is written up to ``prepare_at``: create the next file in the
        background, before this one fills up. Called before a write."""
        if self.prepare_next_file:
            self.queue.prepare_next(prefault=self.warm_next)

    def _warm_region(self) -> list[Region]:
        """For the WarmAhead thread: ``warm_ahead`` bytes past the last file's write position."""
        mf = self.queue.last()
        if mf is None or mf.read_only:
            return []
        pos = mf.wrote_position
        return [(mf.mm, pos, min(mf.file_size, pos + self.warm_ahead))]

    def close(self) -> None:
        """Stop the warm-ahead thread (the files are the queue's to close)."""
        if self._warmer is not None:
            self._warmer.stop()
            self._warmer = None
