"""Consumers: ``store.consume(...)`` and ``store.consume_async(...)``, a queue's messages as a
RocketMQ push consumer delivers them, committing what was consumed (``rmqcore.live``)."""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config import int_arg
from ..errors import ConfigError
from .pull import _wait_arg

if TYPE_CHECKING:
    from ..message import MessageExt
    from ..store import GetResult, MessageStore

__all__ = ["QueueConsumer", "AsyncQueueConsumer", "make_executor"]

_ASYNC_SLICE = 0.5  # longest wait one executor job of an asyncio consumer does
_MOVED = frozenset({"OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY"})  # PULL_OFFSET_MOVED


class QueueConsumer:
    """``store.consume(...)``: an iterator over one queue's messages, as a RocketMQ push consumer
    delivers them, that waits for new ones and commits what was consumed.

    Where it starts: the group's committed offset (``fetch_offset``); a group with none starts at
    the queue's end (``from_where="last"``, RocketMQ's CONSUME_FROM_LAST_OFFSET) or its first
    message (``"first"``). An offset the queue no longer holds (retention) or never reached is
    corrected to the queue's bounds (RocketMQ's PULL_OFFSET_MOVED).

    When a message counts as consumed: once the loop asks for the next one (its body finished),
    or when the consumer is closed without an error (leaving ``with`` normally, ``break`` included,
    or ``close()``); a message whose handling raised out of the ``with`` block is not consumed.

    When the offset is committed (``commit_offset``; a follower's goes to the writer, see the module
    docstring): when the messages of a pull are all consumed and ``commit_interval`` seconds (5, as
    RocketMQ's persistConsumerOffsetInterval; 0: every pull) have passed since the last commit, when
    the consumer is closed, and when the store closes. Between commits, progress lives in memory:
    a crash then delivers those messages again (at least once, as RocketMQ).

    ``timeout``: the iteration ends after waiting this long for a message (None: until the store
    closes, which raises StoreClosedError in the waiting thread after committing).
    """

    _start_at_once = True  # where to start is looked up in the constructor (asyncio: in a waiting thread)

    def __init__(self, store: MessageStore, group: str, topic: str, queue_id: int, *, batch_size: int = 32,
                 tag_filter: str | None = None, from_where: str = "last", commit_interval: float = 5.0,
                 timeout: float | None = None) -> None:
        if not isinstance(group, str) or not isinstance(topic, str):
            raise ConfigError("group and topic must be str")
        queue_id = int_arg(queue_id, "queue_id")
        batch_size = int_arg(batch_size, "batch_size")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, not {batch_size}")
        if from_where not in ("last", "first"):
            raise ConfigError(f"from_where must be 'last' or 'first', not {from_where!r}")
        self.commit_interval = _wait_arg(commit_interval)
        self.timeout = None if timeout is None else _wait_arg(timeout)
        self.store, self.group, self.topic, self.queue_id = store, group, topic, queue_id
        self.batch_size, self.tag_filter, self.from_where = batch_size, tag_filter, from_where
        self.offset = -1  #: the next offset to consume (-1 until the first pull finds where to start)
        self.committed = -1  #: what was committed last (-1: nothing yet)
        self._batch: collections.deque[MessageExt] = collections.deque()
        self._batch_next = -1  # where the pull that filled _batch said to go on
        self._pending: int | None = None  # the queue offset of the message out for handling
        self._last_commit = time.monotonic()
        self._lock = threading.Lock()
        self._closed = False
        store._live_consumers.add(self)
        if self._start_at_once:
            self._start()

    def _start(self) -> None:
        """Where consuming starts: the committed offset, else the queue's end or start."""
        if self.offset >= 0:
            return
        s = self.store
        committed = s.fetch_offset(self.group, self.topic, self.queue_id)
        if committed >= 0:
            start = committed
        elif self.from_where == "last":
            start = s.max_offset(self.topic, self.queue_id)
        else:
            start = s.min_offset(self.topic, self.queue_id)
        self.committed = committed
        self.offset = self._batch_next = start

    # -- iteration ---------------------------------------------------------------------------------
    def __iter__(self) -> QueueConsumer:
        return self

    def __next__(self) -> MessageExt:
        self._consumed()
        if not self._batch:
            self._pull_until_some()
        m = self._batch.popleft()
        self._pending = m.queue_offset
        return m

    def _consumed(self) -> None:
        if self._closed:
            raise StopIteration
        if self._pending is not None:
            self.offset = max(self.offset, self._pending + 1)
            self._pending = None
        if not self._batch:
            self.offset = max(self.offset, self._batch_next)

    def _pull_until_some(self) -> None:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while not self._batch:
            self._maybe_commit()
            left = 3600.0 if deadline is None else max(0.0, deadline - time.monotonic())
            r = self.store.get_messages(self.group, self.topic, self.queue_id, self.offset, self.batch_size,
                                        tag_filter=self.tag_filter, wait=left)
            if not self._take(r) and deadline is not None and time.monotonic() >= deadline:
                raise StopIteration

    def _take(self, r: GetResult) -> bool:
        """Apply one pull's result; True when it brought messages."""
        if r.status == "FOUND":
            msgs = r.messages
            self._batch.extend(msgs)
            self._batch_next = r.next_begin_offset
            if not msgs:
                self.offset = max(self.offset, r.next_begin_offset)
            return bool(msgs)
        if r.status == "NO_MATCHED_MESSAGE" or r.status == "MESSAGE_WAS_REMOVING":
            self.offset = self._batch_next = max(self.offset, r.next_begin_offset)
        elif r.status in _MOVED:
            self.offset = self._batch_next = r.next_begin_offset
        return False

    # -- commits -------------------------------------------------------------------------------------
    def _maybe_commit(self) -> None:
        if (self.offset >= 0 and self.offset != self.committed
                and time.monotonic() - self._last_commit >= self.commit_interval):
            self.commit()

    def commit(self) -> None:
        """Commit what was consumed now (``commit_offset``)."""
        self._commit(self.store.commit_offset)

    def _commit(self, commit_offset: Callable[[str, str, int, int], None]) -> None:
        with self._lock:
            off = self.offset
            if off >= 0 and off != self.committed:
                commit_offset(self.group, self.topic, self.queue_id, off)
                self.committed = off
            self._last_commit = time.monotonic()

    def close(self, *, last_consumed: bool = True) -> None:
        """Stop; commit what was consumed (the message handed out last too, unless ``last_consumed``
        is False). Idempotent."""
        if self._closed:
            return
        if last_consumed and self._pending is not None:
            self.offset = max(self.offset, self._pending + 1)
        self._pending = None
        self._closed = True
        if self.store._gate.sealed:  # the store is closing: its close commits this (_store_closing)
            return
        self.store._live_consumers.discard(self)
        if not self.store._closed:
            self.commit()

    def _store_closing(self) -> None:
        """The store closes (its gate sealed, no call under way): commit what was consumed (not the
        message out for handling) through the ungated ``_commit_offset``."""
        try:
            self._commit(self.store._commit_offset)
        finally:
            self._closed = True

    def __enter__(self) -> QueueConsumer:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(last_consumed=exc_type is None)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.group!r}, {self.topic!r}, {self.queue_id}, "
                f"offset={self.offset}, "
                f"committed={self.committed})")


class AsyncQueueConsumer(QueueConsumer):
    """``store.consume_async(...)``: ``async for m in consumer`` (and ``async with``), as
    ``QueueConsumer`` (same offsets, same commits). Nothing runs on the event loop that can block:
    pulls, waits, record reads and commits run in the store's waiting threads (an executor), in
    steps of at most 0.5 s, so a cancelled task leaves no thread behind for long."""

    _start_at_once = False

    def __aiter__(self) -> AsyncQueueConsumer:
        return self

    async def __anext__(self) -> MessageExt:
        try:
            self._consumed()
        except StopIteration:
            raise StopAsyncIteration from None
        loop = asyncio.get_running_loop()
        ex = self.store._live_executor()
        deadline = None if self.timeout is None else loop.time() + self.timeout
        while not self._batch:
            left = _ASYNC_SLICE if deadline is None else max(0.0, min(_ASYNC_SLICE, deadline - loop.time()))
            got = await loop.run_in_executor(ex, self._pull_once, left)
            if not got and deadline is not None and loop.time() >= deadline:
                raise StopAsyncIteration
        m = self._batch.popleft()
        self._pending = m.queue_offset
        return m

    def _pull_once(self, wait: float) -> bool:
        """One pull (waiting up to ``wait``) and its messages' reads, in a waiting thread."""
        self._start()
        self._maybe_commit()
        r = self.store.get_messages(self.group, self.topic, self.queue_id, self.offset, self.batch_size,
                                    tag_filter=self.tag_filter, wait=wait)
        return self._take(r)

    async def aclose(self, *, last_consumed: bool = True) -> None:
        """``close`` without blocking the loop."""
        await asyncio.get_running_loop().run_in_executor(
            self.store._live_executor(), lambda: self.close(last_consumed=last_consumed))

    async def __aenter__(self) -> AsyncQueueConsumer:
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        await self.aclose(last_consumed=exc_type is None)


def make_executor() -> concurrent.futures.ThreadPoolExecutor:
    """The store's waiting threads (asyncio consumers, awaited acks)."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="rmqcore-live")
