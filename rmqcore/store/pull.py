"""Pulls (DefaultMessageStore.getMessage and its neighbours): a queue's bounds, messages from an
offset with RocketMQ's statuses and next offsets, offsets by time, zero-copy record views.

``Pull`` owns what a read keeps between calls (the selection limits, the seek scratch, the views
that are out); the store's façade enters the lifecycle gate and calls it. ``get_messages(wait=)``
goes through ``rmqcore.live.pull``, which calls back into ``MessageStore._get_messages``.
"""
from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _impl
from .. import layout as L
from ..config import int_arg
from ..consumequeue import BOUNDARY_LOWER, BOUNDARY_NEAREST, BOUNDARY_UPPER, ConsumeQueue
from ..errors import ConfigError, InvalidMessageError, OffsetOutOfRangeError
from ..message import MessageExt, decode_message_id
from ..wire import store_timestamp_at
from .queues import queue_of

if TYPE_CHECKING:
    from ..commitlog import CommitLog
    from . import MessageStore

__all__ = ["GetStatus", "GetResult", "Pull", "store_time_in"]


class GetStatus:
    """GetMessageStatus names."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class GetResult:
    """GetMessageResult: status, next offset to pull, queue bounds, and the messages found.

    ``physical_offsets``, ``queue_offsets`` and ``sizes`` are lists of the ``message_count``
    messages, each made the first time it is read: the pull keeps them packed (``units``), so a
    follower pulling thousands at a time, which reads only the count, makes no ints."""

    __slots__ = ("status", "next_begin_offset", "min_offset", "max_offset", "message_count", "_units",
                 "_rows", "_store")

    def __init__(self, status: str, next_begin_offset: int, min_offset: int, max_offset: int, count: int = 0,
                 units: bytes = b"", store: Any = None) -> None:
        self.status = status
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.message_count = count
        self._units = units  # count native int64 of each: physical offsets, queue offsets, sizes
        self._rows: list[list[int] | None] | None = None  # the three lists, each once made
        self._store = store

    def _row(self, k: int) -> list[int]:
        rows = self._rows
        if rows is None:
            rows = self._rows = [None, None, None]
        row = rows[k]
        if row is None:
            n = self.message_count
            row = rows[k] = memoryview(self._units).cast("q")[k * n : (k + 1) * n].tolist()
        return row

    @property
    def physical_offsets(self) -> list[int]:
        return self._row(0)

    @property
    def queue_offsets(self) -> list[int]:
        return self._row(1)

    @property
    def sizes(self) -> list[int]:
        return self._row(2)

    @property
    def units(self) -> np.ndarray:
        """The messages' units as a read-only int64 array of 3 rows: physical offsets, queue
        offsets, sizes (no Python int made)."""
        return np.frombuffer(self._units, dtype=np.int64).reshape(3, self.message_count)

    @property
    def messages(self) -> list[MessageExt]:
        """The messages, decoded (each read from the CommitLog on access, body CRC verified: a corrupt
        record raises ChecksumError with its path and offset instead of being served)."""
        return self._store.commitlog.read_many(self.physical_offsets, verify_crc=True)  # type: ignore[no-any-return]

    def raw(self) -> list[bytes]:
        """Each message's record bytes, as a broker would send them to a client."""
        return [self._store.read_record_bytes(o, n) for o, n in zip(self.physical_offsets, self.sizes)]

    def __eq__(self, other: object) -> bool:
        if type(other) is not GetResult:
            return NotImplemented
        mine = (self.status, self.next_begin_offset, self.min_offset, self.max_offset, self.message_count,
                self._units, self._store)
        return mine == (other.status, other.next_begin_offset, other.min_offset, other.max_offset,
                        other.message_count, other._units, other._store)

    __hash__ = None  # type: ignore[assignment]  # compared by value, not hashable

    def __repr__(self) -> str:
        return (f"GetResult(status={self.status!r}, next_begin_offset={self.next_begin_offset!r}, "
                f"min_offset={self.min_offset!r}, max_offset={self.max_offset!r}, "
                f"physical_offsets={self.physical_offsets!r}, queue_offsets={self.queue_offsets!r}, "
                f"sizes={self.sizes!r})")


@functools.lru_cache(maxsize=1)
def _ram_bytes() -> int:
    """Physical memory, read once (as RocketMQ's StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


# dispatch.select_units's statuses
_MAX_FILTER = 16000 // L.CQ_UNIT_SIZE  # maxFilterMessageCount: a pull looks at up to 800 units
_SELECT_STATUS = (GetStatus.NO_MATCHED_MESSAGE, GetStatus.FOUND, GetStatus.MESSAGE_WAS_REMOVING)
_CAP = 2**62  # the select kernel's arguments are int64: larger limits are the same as no limit
_SEEK_STEP = 64  # records a time seek decodes at a time (the answer is usually a few past its index entry)


def _tag_codes(expr: str | None) -> tuple[int, ...] | None:
    """SubscriptionData of a tag expression: None means every message ("*" or no filter), else
    the tags' hash codes, each once (a tuple: ``select_units`` reads its codes through one).

    Raises:
        ConfigError: ``expr`` is not a str (nor None).
    """
    if expr is None:
        return None
    if not isinstance(expr, str):
        raise ConfigError(f"tag_filter must be a str ('TagA || TagB') or None, not {type(expr).__name__}")
    return _codes_of(expr)


@functools.lru_cache(maxsize=256)
def _codes_of(expr: str) -> tuple[int, ...] | None:
    """``_tag_codes`` of a str, made once per expression (a consumer pulls with the same one)."""
    expr = expr.strip()
    if not expr or expr == "*":
        return None
    hashing = _impl.hashing
    return tuple({hashing.java_string_hash(t.strip()): None for t in expr.split("||") if t.strip()})


def store_time_in(cl: CommitLog, physical_offset: int) -> int | None:
    """STORETIMESTAMP of the record at ``physical_offset`` of ``cl`` (CommitLog.pickupStoreTimestamp),
    None when no file holds it."""
    if type(physical_offset) is not int:  # a time search calls this per probe: the usual case at once
        physical_offset = int_arg(physical_offset, "physical_offset")
    try:
        mf = cl.queue.find(physical_offset)
    except OffsetOutOfRangeError:
        return None
    return store_timestamp_at(mf.mm, physical_offset - mf.file_from_offset, mf.wrote_position)


class Pull:
    """The store's reads; the caller is inside the store's gate."""

    def __init__(self, store: MessageStore) -> None:
        cfg = store.config
        self._store = store
        self._kernel = _impl.kernel("dispatch", store.impl)  # its select_units
        # get_messages' limits (the config is frozen): memory share, then on-disk and in-memory caps
        self._limits = (
            _ram_bytes() * cfg.access_message_in_memory_max_ratio // 100, cfg.max_transfer_bytes_on_disk,
            cfg.max_transfer_count_on_disk, cfg.max_transfer_bytes_in_memory, cfg.max_transfer_count_in_memory)
        self.views_out: dict[int, int] = {}  # record_views blocks open, per thread
        self._seek_free: list[np.ndarray] = []  # commitlog_offset_by_time's scratch columns not in use

    def queue_bound(self, topic: str, queue_id: int, upper: bool) -> int:
        """getMinOffsetInQueue / getMaxOffsetInQueue (``upper``) of the queue as it is now (pending
        dispatch done first, a follower's view brought up to the writer's); 0 for an unknown queue.
        Enters the gate itself: consumers call this in a loop."""
        s = self._store
        gate = s._gate
        gate.enter()
        try:
            s._dispatch.caught_up()
            f = s._follower
            if f is not None and f.ready()[0]:
                f.refresh_queue(topic, queue_id)
            try:
                cq = s.consume_queues.get((topic, queue_id))
            except TypeError:
                cq = queue_of(s, topic, queue_id)  # raises ConfigError
            return 0 if cq is None else cq.max_offset if upper else cq.min_offset
        finally:
            gate.leave()

    def get(self, topic: str, queue_id: int, offset: int, max_msgs: int, max_bytes: int,
            tag_filter: str | None) -> GetResult:
        """getMessage without a wait (the group plays no part in a store without filters)."""
        if not (type(offset) is type(max_msgs) is type(max_bytes) is int):  # the usual case, checked at once
            offset, max_msgs, max_bytes = (int_arg(offset, "offset"), int_arg(max_msgs, "max_msgs"),
                                           int_arg(max_bytes, "max_bytes"))
        if tag_filter is not None and not isinstance(tag_filter, str):
            _tag_codes(tag_filter)  # raises ConfigError, whatever the queue's state
        s = self._store
        cl = s.commitlog
        cl_max = cl.queue.max_offset()
        d = s._dispatch
        # Dispatch.caught_up's rule inline, the end read once (the call cost a pull of 32 0.1-0.2 us)
        if d.read_your_writes and d.reput_from_offset < cl_max:
            d.run(None, False)
            cl_max = cl.queue.max_offset()
        try:
            cq = s.consume_queues.get((topic, queue_id))
        except TypeError:
            cq = queue_of(s, topic, queue_id)  # raises ConfigError
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0, 0, b"", s)
        # maxFilterMessageCount: 16000 bytes of units
        lo, hi, mf, pos, n = cq.pull_span(offset, max_msgs if max_msgs > _MAX_FILTER else _MAX_FILTER)
        if hi == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, lo, hi, 0, b"", s)
        if offset < lo:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi, 0, b"", s)
        if offset == hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi, 0, b"", s)
        if offset > hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, hi, lo, hi, 0, b"", s)
        if mf is None or n == 0:
            return GetResult(GetStatus.OFFSET_FOUND_NULL, offset + 1, lo, hi, 0, b"", s)
        codes = None if tag_filter is None else _tag_codes(tag_filter)
        if not (-_CAP <= max_msgs <= _CAP and -_CAP <= max_bytes <= _CAP):
            max_msgs, max_bytes = max(-_CAP, min(max_msgs, _CAP)), max(-_CAP, min(max_bytes, _CAP))
        status, i, count, units = self._kernel.select_units(
            mf.mm, pos, n, offset, max_msgs, max_bytes, codes, cl.queue.min_offset(), cl_max, *self._limits)
        return GetResult(_SELECT_STATUS[status], offset + i, lo, hi, count, units, s)

    def read_record_bytes(self, physical_offset: int, size: int) -> bytes:
        physical_offset, size = int_arg(physical_offset, "physical_offset"), int_arg(size, "size")
        self._store._check_open()
        if size <= 0:
            raise OffsetOutOfRangeError(f"a record size must be positive, not {size}")
        mf = self._store.commitlog.queue.find(physical_offset)
        pos = physical_offset - mf.file_from_offset
        if pos + size > mf.wrote_position:
            raise OffsetOutOfRangeError(f"record at {physical_offset} runs past the written data")
        return bytes(mf.mm[pos : pos + size])

    def by_msg_id(self, msg_id: str) -> MessageExt:
        s = self._store
        s._check_open()
        host, off = decode_message_id(msg_id)
        m = s.commitlog.read(off, verify_crc=True)
        if m.store_host != host:
            raise OffsetOutOfRangeError(f"message id {msg_id} names store host {host}, the record says {m.store_host}")
        return m

    def iter_queue(self, topic: str, queue_id: int, offset: int) -> Iterator[MessageExt]:
        while True:
            r = self._store.get_messages("", topic, queue_id, offset, 32)
            if r.status != GetStatus.FOUND and r.status != GetStatus.NO_MATCHED_MESSAGE:
                return
            yield from r.messages
            if r.next_begin_offset <= offset:
                return
            offset = r.next_begin_offset

    # -- times ------------------------------------------------------------------------------------------
    def offset_by_time(self, topic: str, queue_id: int, timestamp: int, boundary: str) -> int:
        timestamp = int_arg(timestamp, "timestamp")
        s = self._store
        s._dispatch.caught_up()
        if type(boundary) is not str or boundary not in (BOUNDARY_LOWER, BOUNDARY_UPPER, BOUNDARY_NEAREST):
            raise InvalidMessageError(f"boundary must be 'lower', 'upper' or 'nearest', not {boundary!r}")
        cq = queue_of(s, topic, queue_id)
        if cq is None:
            return 0
        if boundary != BOUNDARY_NEAREST and s.segindex is not None and s.segindex.monotonic:
            # store times monotone in CommitLog order: the first unit stored at/after ``ts`` is the
            # first unit at/after the first such record
            if boundary == BOUNDARY_LOWER:
                return cq.first_at_or_after(self.commitlog_offset_by_time(timestamp, False))
            k = cq.first_at_or_after(self.commitlog_offset_by_time(timestamp, True)) - 1
            return k if k >= cq.min_offset else 0
        cl = s.commitlog

        def time_of(physical_offset: int, size: int = 0) -> int | None:
            return store_time_in(cl, physical_offset)

        return cq.offset_by_time(timestamp, time_of, cl.min_offset, boundary)

    def commitlog_offset_by_time(self, timestamp: int, after: bool) -> int:
        s = self._store
        s._check_open()
        cl = s.commitlog
        seg = s.segindex
        start = seg.seek_time(timestamp - 1 if not after else timestamp) if seg else cl.min_offset
        free = self._seek_free  # scratch columns, each held by one call at a time (threads seek at once)
        out = free.pop() if free else np.empty((L.NCOLUMNS, _SEEK_STEP), dtype=np.int64)
        try:
            return self._first_stored_after(cl, max(start, cl.min_offset), timestamp, after, out)
        finally:
            free.append(out)

    def _first_stored_after(self, cl: CommitLog, off: int, timestamp: int, after: bool,
                            out: np.ndarray) -> int:
        """``commitlog_offset_by_time``'s walk from ``off``, ``_SEEK_STEP`` records at a time into ``out``."""
        codec = cl._codec
        while off < cl.max_offset:
            mf = cl.queue.find(off)
            pos = off - mf.file_from_offset
            n, end, status = codec.decode_batch(mf.mm, pos, mf.wrote_position, out, False)
            ts = out[L.C_STORE_TIMESTAMP, :n]
            hit = ts > timestamp if after else ts >= timestamp
            if hit.any():
                return mf.file_from_offset + int(out[L.C_POSITION, int(hit.argmax())])
            if status == L.ST_BLANK:
                off = mf.file_end_offset
            elif n == 0:
                break
            else:
                off = mf.file_from_offset + end
        return cl.max_offset

    def earliest_message_time(self, topic: str | None, queue_id: int | None) -> int:
        s = self._store
        s._dispatch.caught_up()
        cl = s.commitlog
        if topic is None:
            for item in cl.iter_records(cl.min_offset):
                if isinstance(item, MessageExt):
                    return item.store_timestamp
            return -1
        cq = queue_of(s, topic, queue_id if queue_id is not None else 0)
        if cq is None or cq.max_offset <= cq.min_offset:
            return -1
        unit = cq.get(cq.min_offset)
        t = store_time_in(cl, unit[0]) if unit else None
        return -1 if t is None else t

    # -- zero-copy views --------------------------------------------------------------------------------
    def record_views(self, physical_offsets: Sequence[int]) -> _RecordViews:
        return _RecordViews(self, physical_offsets)

    def _take_views(self, offsets: Iterator[Any], views: list[memoryview]) -> None:
        """``record_views``' views, appended to ``views`` as they are made."""
        cl = self._store.commitlog
        for off in offsets:
            mf, pos = cl._locate(int_arg(off, "a physical offset"))
            status, size = cl._codec.peek_record(mf.mm, pos, mf.wrote_position)
            if status != L.ST_MSG:
                raise OffsetOutOfRangeError(f"no record at offset {off}")
            base = memoryview(mf.mm)
            views.append(base[pos : pos + size].toreadonly())
            base.release()


class _RecordViews:
    """``record_views``' block: zero-copy views of the records at the offsets, taken on entry inside
    the store's gate and released on exit. The block runs inside the gate: close() on another
    thread waits for it (and the block's store calls raise StoreClosedError meanwhile); on this
    thread it raises BufferError. (A class, not a generator: a follower reads one message's view
    per pull, and the generator's machinery was a fifth of that.)"""

    __slots__ = ("_pull", "_offsets", "_views", "_me")

    def __init__(self, pull: Pull, physical_offsets: Sequence[int]) -> None:
        self._pull = pull
        self._offsets = physical_offsets
        self._views: list[memoryview] = []
        self._me = -1

    def __enter__(self) -> list[memoryview]:
        p = self._pull
        s = p._store
        s._check_open()
        try:
            offsets = iter(self._offsets)
        except TypeError:
            raise ConfigError(
                f"physical_offsets must be an iterable of ints, not {self._offsets!r}") from None
        me = self._me = threading.get_ident()
        out = p.views_out
        s._gate.enter()
        out[me] = out.get(me, 0) + 1
        try:
            p._take_views(offsets, self._views)
        except BaseException:
            self._leave()
            raise
        return self._views

    def __exit__(self, *exc: object) -> None:
        self._leave()

    def _leave(self) -> None:
        p = self._pull
        for v in self._views:
            v.release()
        out, me = p.views_out, self._me
        if out[me] == 1:
            del out[me]
        else:
            out[me] -= 1
        p._store._gate.leave()
