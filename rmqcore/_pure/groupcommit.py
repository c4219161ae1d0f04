"""SYNC_FLUSH group commit (CommitLog.GroupCommitService): pure-Python twin of
``rmqcore._native.groupcommit``.

``GroupCommit(live, durable)`` serves ``wait_durable(offset, timeout_ms)``: it returns True once every
byte below ``offset`` is durable, False on timeout or after ``stop()``, and raises OSError when a
flush failed. ``run()`` is the flusher loop, called once from a thread of the caller's: whenever
something is wanted past the durable offset it reads the appender's published end ``live[0]``,
syncs every registered file holding bytes in [durable, end) and publishes ``end`` as durable. So
requests made while a flush runs share the next one, and a request the running flush covered is
served by it. ``request(offset)`` asks without waiting (asynchronous puts).

Files are registered with ``add_file(fd, file_from, file_size, mapped)`` before anything is written
into them, in offset order; the service syncs its own duplicate of ``fd`` (closed once the file is
wholly durable) and never claims durability past the last registered file. This twin syncs through
``rmqcore.fileops`` (``mapped`` is passed on); the native twin calls msync/fdatasync itself, with the
GIL released. ``GroupCommit(live, durable, sync)`` makes both call ``sync(file_from, lo, hi)`` instead
to make bytes ``[lo, hi)`` of the file at ``file_from`` durable (an injected file layer: fault tests),
and raise what it raises in every waiter.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from .. import fileops
from ..bases import ReadOnly

__all__ = ["GroupCommit"]

_BATCH = 16


class GroupCommit:
    def __init__(self, live: Any, durable: int,
                 sync: Callable[[int, int, int], object] | None = None) -> None:
        if getattr(live, "shape", None) != (1,):
            raise ValueError("live must be a contiguous int64[1] array")
        if sync is not None and not callable(sync):
            raise TypeError("sync must be callable or None")
        self._sync = sync
        self._live = live
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._done = threading.Condition(self._lock)
        self._wanted = self._durable = int(durable)
        self._flushes = 0
        self._error: BaseException | None = None  # a failed flush, raised in every waiter
        self._stop = False
        self._ran = False
        self._files: list[tuple[int, int, int, Any]] = []  # (fd, from, size, mapped)

    def add_file(self, fd: int, file_from: int, file_size: int, mapped: Any = None) -> None:
        with self._lock:
            if self._stop:
                raise ValueError("the group commit service is stopped")
            if self._files and self._files[-1][1] >= file_from:
                return
            self._files.append((os.dup(fd), file_from, file_size, mapped))
            self._work.notify()

    def request(self, offset: int) -> None:
        if self._durable >= offset or self._wanted >= offset:
            return
        with self._lock:
            if offset > self._wanted:
                self._wanted = offset
            self._work.notify()

    def wait_durable(self, offset: int, timeout_ms: int) -> bool:
        if self._durable >= offset:
            return True
        with self._lock:
            if offset > self._wanted:
                self._wanted = offset
            self._work.notify()
            self._done.wait_for(lambda: self._durable >= offset or self._error is not None or self._stop,
                                max(timeout_ms, 0) / 1000)
            if self._durable >= offset:
                return True
            if self._error is not None:
                raise self._error
            return False

    durable_offset = ReadOnly[int]("_durable", "The offset up to which everything is on disk.")
    flushes = ReadOnly[int]("_flushes", "Syncs done so far.")
    error = ReadOnly[BaseException | None]("_error",
                                           "The failed flush, raised in every waiter (None until one fails).")

    def run(self) -> bool:
        if self._ran:
            raise RuntimeError("run() may be called once")
        self._ran = True
        fsync = fileops.current().fdatasync
        hook = self._sync
        with self._lock:
            try:
                while not self._stop and self._error is None:
                    if self._wanted <= self._durable:
                        self._work.wait()
                        continue
                    end = int(self._live[0])
                    todo: list[tuple[int, Any, int, int]] = []
                    for fd, start, size, mapped in self._files:
                        if start + size <= self._durable:
                            continue
                        if start >= end or len(todo) == _BATCH:
                            break
                        todo.append((fd, mapped, start, size))
                        if len(todo) == _BATCH:
                            end = min(end, start + size)
                    if self._files:
                        end = min(end, self._files[-1][1] + self._files[-1][2])
                    else:
                        end = self._durable
                    if end <= self._durable or not todo:
                        self._work.wait(0.001)  # nothing written past durable yet
                        continue
                    durable = self._durable
                    self._lock.release()
                    try:
                        for fd, mapped, start, size in todo:
                            if hook is None:
                                fsync(fd, mapped)
                                continue
                            lo, hi = max(durable - start, 0), min(end - start, size)
                            if hi > lo:
                                hook(start, lo, hi)
                    except BaseException as e:  # an injected file layer (or sync) may fail in its own way
                        self._error = e
                    finally:
                        self._lock.acquire()
                    if self._error is not None:
                        break
                    self._flushes += 1
                    self._durable = max(self._durable, end)
                    while len(self._files) > 1 and self._files[0][1] + self._files[0][2] <= self._durable:
                        os.close(self._files.pop(0)[0])
                    self._done.notify_all()
            finally:
                self._done.notify_all()
        return self._error is None

    def stop(self) -> None:
        with self._lock:
            self._stop = True
            self._work.notify_all()
            self._done.notify_all()

    def close(self) -> None:
        """Give back the duplicated descriptors (after ``stop()`` and the end of ``run()``);
        afterwards the service answers from what was durable when it closed."""
        with self._lock:
            files, self._files = self._files, []
            self._stop = True
        for f in files:
            os.close(f[0])

    def __del__(self) -> None:
        for f in getattr(self, "_files", ()):
            try:
                os.close(f[0])
            except OSError:
                pass
