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
from collections.abc import Callable

__all__ = ["AsyncFlushService", "GroupCommitService"]

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
            except BaseException as e:  # kept and raised by stop(); never swallowed silently
                self.error = e
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self.error is not None:
            raise self.error


class GroupCommitService:
    """GroupCommitService: ``wait_durable(offset)`` returns once everything below ``offset`` is flushed.

    Requests are grouped by flush: a producer waits on the event of the next flush to start, the
    flush thread swaps in a fresh event as it starts a flush (later requests wait for the one after)
    and sets the old one when its fdatasync returns. So a put wakes only the flusher, and a flush
    wakes only the producers it may have served; none of them is woken by another's request.
    """

    def __init__(self, flushed: Callable[[], int], flush: Callable[[], int], timeout_ms: int = 5000) -> None:
        self._flushed_fn = flushed
        self._flush = flush
        self.timeout = timeout_ms / 1000
        self._lock = threading.Lock()
        self._wake = threading.Event()  # the flusher has work
        self._next = threading.Event()  # set when the next flush to start has finished
        self._wanted = 0
        self._durable = flushed()
        self._stop = False
        self.flushes = 0  # how many fdatasyncs served the requests (group commit makes this << puts)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rmqcore-group-commit", daemon=True)
        self._thread.start()

    def wait_durable(self, offset: int) -> bool:
        """Block until bytes below ``offset`` are durable; False on timeout."""
        if self._durable >= offset:
            return True
        deadline = time.monotonic() + self.timeout
        while True:
            with self._lock:
                if self.error is not None:
                    raise self.error
                if self._durable >= offset:
                    return True
                if self._stop:
                    return False
                if offset > self._wanted:
                    self._wanted = offset
                ev = self._next
            self._wake.set()
            left = deadline - time.monotonic()
            if left <= 0 or not ev.wait(left):
                return self._durable >= offset

    def _run(self) -> None:
        while True:
            self._wake.wait()
            with self._lock:
                self._wake.clear()
                if self._stop:
                    self._next.set()
                    return
                if self._wanted <= self._durable:
                    continue
                ev, self._next = self._next, threading.Event()
            try:
                done = self._flush()  # new requests wait on the fresh event, for the next flush
                self.flushes += 1
            except BaseException as e:  # surfaced to every waiter
                with self._lock:
                    self.error = e
                    self._next.set()
                ev.set()
                return
            covered = None
            with self._lock:
                self._durable = max(self._durable, done)
                if self._wanted > self._durable:
                    self._wake.set()
                else:  # requests made during this flush that it covered: no later flush will wake them
                    covered, self._next = self._next, threading.Event()
            ev.set()
            if covered is not None:
                covered.set()

    def stop(self) -> None:
        with self._lock:
            self._stop = True
        self._wake.set()
        self._thread.join()
