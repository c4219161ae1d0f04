"""Flush policies of the CommitLog (CommitLog.FlushRealTimeService / GroupCommitService).

ASYNC (RocketMQ's default): a thread wakes every ``flush_interval_ms`` (500) and flushes when at
least ``flush_least_pages`` (4) dirty 4 KiB pages are waiting, or everything every
``flush_thorough_interval_ms`` (10 s). A put returns once its bytes are in the page cache: a
process crash loses nothing, an OS crash or power loss may lose the last interval.

SYNC (group commit): a put returns only once its bytes are durable. Puts that arrive while a flush
is running share the next one (one ``fdatasync`` for all of them). A put not durable within
``sync_flush_timeout_ms`` (5 s) raises ``FlushDiskTimeoutError`` (RocketMQ's FLUSH_DISK_TIMEOUT):
the message is stored, only its durability is not confirmed.

Flushing calls ``os.fdatasync`` which releases the GIL, so writers keep running meanwhile.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from typing import Any

from .errors import DiskFullError, TooManyOpenFilesError

__all__ = ["AsyncFlushService", "DurableAck", "GroupCommitService"]

PAGE = 4096


class AsyncFlushService:
    """FlushRealTimeService: periodic flushing in a daemon thread."""

    def __init__(self, flushed: Callable[[], int], written: Callable[[], int], flush: Callable[[], object],
                 interval_ms: int = 500, least_pages: int = 4, thorough_interval_ms: int = 10_000) -> None:
        self._flushed, self._written, self._flush = flushed, written, flush
        self.interval = interval_ms / 1000
        self.least_pages = least_pages
        self.thorough = thorough_interval_ms / 1000
        self._stop = threading.Event()
        self._last_thorough = time.monotonic()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rmqcore-flush", daemon=True)
        self._thread.start()

    def _due(self) -> bool:
        if time.monotonic() - self._last_thorough >= self.thorough:
            self._last_thorough = time.monotonic()
            return self._written() > self._flushed()
        return self._written() // PAGE - self._flushed() // PAGE >= self.least_pages

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self._due():
                    self._flush()
                    self.error = None
            except (DiskFullError, TooManyOpenFilesError) as e:
                # no space, or no descriptor, for a file the flush writes (a config file's new
                # copy): the work stays pending and the next interval tries again, as the reput
                # thread waits a full disk out
                self.error = e
            except BaseException as e:  # kept and raised by stop(); never swallowed silently
                self.error = e
                return

    def stop(self) -> None:
        """Stop the thread; raise the error that ended it. A full disk (or a full descriptor table)
        its last flush met is not raised: the owner's final flush (the store's close) meets it
        again if it lasts, and one that has passed is no error (close() raised such a stale
        DiskFullError)."""
        self._stop.set()
        self._thread.join()
        if self.error is not None and not isinstance(self.error, (DiskFullError, TooManyOpenFilesError)):
            raise self.error


class GroupCommitService:
    """GroupCommitService: ``wait_durable(offset)`` returns once everything below ``offset`` is flushed.

    The work is done by the ``groupcommit`` kernel: one flusher thread syncs whatever was written
    past the durable offset whenever a producer wants more, so the producers that arrive while a
    flush runs share the next one. With the native kernel the flusher and the waiting producers run
    without the GIL: a flush never waits for the interpreter (it used to, for up to the 5 ms switch
    interval, while producers held it) and a producer takes the GIL only to return.

    Every CommitLog file is registered with the kernel before the appender writes into it (the
    CommitLog's ``file_listeners``). Under an injected file layer (``rmqcore.fileops.use``) either
    kernel syncs through it (the kernel's ``sync`` function), so fault-injection tests see every
    flush of the very kernel a store uses.
    """

    def __init__(self, commitlog: Any, timeout_ms: int = 5000, impl: str | None = None) -> None:
        from . import _impl, fileops

        self.timeout_ms = int(timeout_ms)
        self._final = 0  # durable through another flush after stop() (mark_durable)
        # file_from -> MappedFile, kept only under an injected file layer (whose sync takes the file)
        self._files: dict[int, Any] | None = None if type(fileops.current()) is fileops.FileOps else {}
        sync = None if self._files is None else self._sync_injected
        durable = commitlog.flushed_offset
        self._gc = _impl.kernel("groupcommit", impl).GroupCommit(commitlog._appender.live, durable, sync)
        for mf in list(commitlog.queue.files):
            if mf.file_end_offset > durable:
                self._add(mf)
        self._commitlog = commitlog
        commitlog.file_listeners.append(self._add)
        commitlog.external_durable = self._gc
        self._thread = threading.Thread(target=self._gc.run, name="rmqcore-group-commit", daemon=True)
        self._thread.start()

    def mark_durable(self, offset: int) -> None:
        """Someone else (the store's close) made everything below ``offset`` durable."""
        self._final = max(self._final, offset)

    def _add(self, mf: Any) -> None:
        if self._files is not None:
            self._files[mf.file_from_offset] = mf
        self._gc.add_file(mf.fd, mf.file_from_offset, mf.file_size, mf)

    def _sync_injected(self, file_from: int, lo: int, hi: int) -> None:
        """The kernel's sync under an injected file layer: that layer's fdatasync of the file."""
        from . import fileops

        assert self._files is not None
        mf = self._files[file_from]
        fileops.current().fdatasync(mf.fd, mf)

    def request(self, offset: int) -> None:
        """Ask for a flush covering ``offset`` without waiting (GroupCommitRequest of an async put)."""
        self._gc.request(offset)

    def wait_durable(self, offset: int) -> bool:
        """Block until bytes below ``offset`` are durable; False on timeout (or once stopped).
        A failed flush raises its OSError in every waiter."""
        if offset <= self._final:
            return True
        return bool(self._gc.wait_durable(offset, self.timeout_ms))

    def durable(self, r: Any) -> Any:
        """``r`` (an append result) once its bytes are durable; FlushDiskTimeoutError carrying it
        when they are not within the timeout (RocketMQ's FLUSH_DISK_TIMEOUT: stored, not confirmed)."""
        if not self.wait_durable(r.physical_offset + r.size):
            from .errors import FlushDiskTimeoutError

            raise FlushDiskTimeoutError(
                f"stored at {r.physical_offset} but not durable within {self.timeout_ms} ms (FLUSH_DISK_TIMEOUT)", r)
        return r

    @property
    def durable_offset(self) -> int:
        """Every byte below this offset has been flushed by this service (or was at its start)."""
        return max(int(self._gc.durable_offset), self._final)

    @property
    def flushes(self) -> int:
        """How many flush rounds served the requests (group commit makes this << puts)."""
        return int(self._gc.flushes)

    @property
    def error(self) -> BaseException | None:
        return self._gc.error  # type: ignore[no-any-return]

    def stop(self) -> None:
        cl = self._commitlog
        if self._add in cl.file_listeners:
            cl.file_listeners.remove(self._add)
        self._gc.stop()
        self._thread.join()
        err = self._gc.error
        self._final = max(self._final, int(self._gc.durable_offset))
        self._gc.close()  # its duplicated descriptors and maps go now, not when the store is collected
        if cl.external_durable is self._gc:
            cl.external_durable = None
        if err is not None:
            raise err


class DurableAck:
    """The acknowledgement of an asynchronous put (RocketMQ 5's ``asyncPutMessage`` future).

    The message is stored when the ack is made; ``result()`` returns its AppendResult once its bytes
    are durable under SYNC_FLUSH (at once under ASYNC_FLUSH, whose promise is the page cache) and
    raises FlushDiskTimeoutError when they are not durable within the store's sync flush timeout.
    A producer that keeps many acks outstanding lets one fdatasync serve all of them."""

    __slots__ = ("append", "_end", "_svc")

    def __init__(self, append: Any, svc: GroupCommitService | None) -> None:
        self.append = append
        self._end = append.physical_offset + append.size
        self._svc = svc

    def done(self) -> bool:
        """True once the message is durable (or the store does not flush synchronously)."""
        svc = self._svc
        return svc is None or svc.durable_offset >= self._end or svc.error is not None

    def result(self) -> Any:
        """Wait until durable; the AppendResult, or FlushDiskTimeoutError after the sync flush timeout."""
        svc = self._svc
        if svc is None or svc.durable_offset >= self._end:
            return self.append
        return svc.durable(self.append)

    def __await__(self) -> Generator[Any, None, Any]:
        """``await ack``: ``result()`` without blocking the event loop (an ack not yet durable is
        waited for in the loop's default executor; a done one answers at once)."""
        if self.done():
            return self.result()
        import asyncio

        return (yield from asyncio.get_running_loop().run_in_executor(None, self.result).__await__())

    def __repr__(self) -> str:
        return f"DurableAck({self.append!r}, done={self.done()})"
