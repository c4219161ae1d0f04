"""The CommitLog append hot path, pure-Python twin of ``rmqcore._native.appender``.

An ``Appender`` is the one stateful kernel: it holds the CommitLog's current file (a MappedFile
whose map it writes into), the write position, the next queue offset of every topic/queue and the
writer lock, so that ``put`` is one call. It is given its two collaborators and calls only their
public methods: a ``FileRoller`` (``rmqcore.rolling``: ``roll`` to the next file, ``prepare_next``
once the bound file is written up to ``prepare_at``) and the ``PutRules`` of the flavour
(``rmqcore.putrules``: ``topic_bytes`` for a topic not seen yet, ``properties_bytes`` and ``host``
for anything unusual, such as a properties mapping or hosts given as text).

Both twins: same names, signatures, results and exceptions.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bases import ReadOnly
from ..errors import InvalidMessageError, MessageTooLargeError, StoreClosedError
from ..layout import (
    BLANK_SIZE,
    C_TOPIC_LEN,
    C_TOPIC_POS,
    D_FLAGS,
    D_KEYS_COUNT,
    D_TAGS_CODE,
    DISPATCH_ROWS,
    H_SEQ,
    HINT_CAPACITY,
    HINT_FIELDS,
    MAX_TOPIC_LEN_V1,
    NCOLUMNS,
    ST_MSG,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
)
from ..wire import SCHEDULE_TOPIC, create_message_id
from . import codec
from . import notify as _notify
from .dispatch import dispatch_batch
from .hashing import index_key_hash, java_string_hash

__all__ = ["Appender", "AppendResult", "BatchAppendResult", "batch_properties", "prefault", "sync_range"]

_MADV_POPULATE_WRITE = 23  # Linux >= 5.14


def batch_properties(
    n: int, tags: Any, keys: Any, flavour: int, fallback: Callable[[Any, Any], bytes]
) -> list[bytes]:
    """The stored properties of each of ``n`` batch messages that have only tags and keys:
    ``tags`` is None, one str for every message, or a sequence of ``n`` (str or None); ``keys``
    None or a sequence of ``n`` (each a str, a sequence of str, or None). ``fallback(tags, keys)``
    builds (and validates) one message's properties; the native twin encodes the plain case
    itself (ASCII strs: ``KEYS\x01k\x02TAGS\x01t``, ``\x02`` at the end in ``flavour`` 5) and
    asks ``fallback`` for everything else, so both give the same bytes and the same errors. One
    ``tags`` str and no keys: one bytes object for every message (their records get dispatch hints,
    see ``Appender._batch_hints``)."""
    one = tags is None or isinstance(tags, str)
    if (not one and len(tags) < n) or (keys is not None and len(keys) < n):
        raise InvalidMessageError("tags and keys need one entry per body")
    if one and keys is None:
        return [fallback(tags, None)] * n if n > 0 else []
    return [fallback(tags if one else tags[i], None if keys is None else keys[i]) for i in range(n)]


def prefault(mm: Any, start: int, end: int) -> bool:
    """Fault the pages of ``mm[start:end]`` in for writing (MADV_POPULATE_WRITE; WILLNEED as a
    fallback). Returns True when pages were populated. (The native twin releases the GIL.)"""
    import mmap as _mmap

    if start < 0 or end > len(mm) or start > end:
        raise ValueError("prefault range outside the buffer")
    page = _mmap.PAGESIZE
    s = start - start % page
    try:
        mm.madvise(_MADV_POPULATE_WRITE, s, end - s)
        return True
    except (OSError, ValueError):
        try:
            mm.madvise(_mmap.MADV_WILLNEED, s, end - s)
        except (OSError, ValueError):
            pass
        return False


def sync_range(mm: Any, start: int, end: int) -> None:
    """Make bytes ``[start, end)`` of the mapped file durable (msync of that range). Raises
    OSError. (The native twin releases the GIL.)"""
    import mmap as _mmap

    if start >= end:
        return
    if start < 0 or end > len(mm):
        raise ValueError("sync range outside the buffer")
    s = start - start % _mmap.PAGESIZE
    mm.flush(s, end - s)


@dataclass(slots=True, repr=False, eq=False)
class AppendResult:
    """What one append returns (AppendMessageResult): physical offset, size, queue offset, store time
    (and the store host, for the message id)."""

    physical_offset: int
    size: int
    queue_offset: int
    store_timestamp: int
    _addr: bytes
    _port: int

    @property
    def msg_id(self) -> str:
        """The offset message id (store host + physical offset), 32 or 56 upper-case hex digits."""
        return create_message_id(self._addr, self._port, self.physical_offset)

    def __repr__(self) -> str:
        return (
            f"AppendResult(physical_offset={self.physical_offset}, size={self.size}, "
            f"queue_offset={self.queue_offset}, store_timestamp={self.store_timestamp})"
        )


@dataclass(slots=True, repr=False, eq=False)
class BatchAppendResult:
    """What a batch append returns: first physical offset, total bytes, first queue offset, store
    time, message count and each message's size (and the store host, for the message ids)."""

    physical_offset: int
    size: int
    queue_offset: int
    store_timestamp: int
    count: int
    sizes: Any
    _addr: bytes
    _port: int

    @property
    def physical_offsets(self) -> list[int]:
        offs = np.concatenate(([0], np.cumsum(self.sizes[:-1]))) + self.physical_offset
        return [int(x) for x in offs]

    @property
    def msg_ids(self) -> list[str]:
        return [create_message_id(self._addr, self._port, o) for o in self.physical_offsets]

    @property
    def msg_id(self) -> str:
        """Comma-joined ids of every message, as RocketMQ's batch AppendMessageResult gives them."""
        return ",".join(self.msg_ids)

    def __repr__(self) -> str:
        return (
            f"BatchAppendResult(physical_offset={self.physical_offset}, size={self.size}, "
            f"queue_offset={self.queue_offset}, count={self.count})"
        )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _int_field(v: Any, name: str, lo: int, hi: int) -> int:
    if not isinstance(v, int):
        raise InvalidMessageError(f"{name} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise InvalidMessageError(f"{name} {v} is out of range")
    return int(v)


_NEVER = 2**63 - 1  # no position reaches it
_GIL_YIELD_MAX_S = 0.002  # as the native twin's GIL_YIELD_MAX_NS
_I32 = (-(2**31), 2**31 - 1)
_I64 = (-(2**63), 2**63 - 1)


class Appender:
    """Append records into the owner's current file (see the module docstring).

    Args:
        files: the CommitLog's ``FileRoller`` (``roll(full_file)``, ``prepare_next()``, ``prepare_at``).
        rules: its ``PutRules`` (``topic_bytes(topic)``, ``properties_bytes(tags, keys, properties,
            properties_raw)``, ``host(value)``).
        file_size: bytes per file.
        store_addr, store_port: the default store host.
        max_message_size: largest body accepted.
        clock: store-time source in ms, or None for the wall clock.
        flavour: 4 or 5 (how a properties string built from tags/keys ends).
    """

    def __init__(self, files: Any, rules: Any, file_size: int, store_addr: bytes, store_port: int,
                 max_message_size: int, clock: Callable[[], int] | None, flavour: int) -> None:
        self._files = files
        self._rules = rules
        self.flavour = flavour
        self.file_size = file_size
        self._store_addr = store_addr
        self._store_port = store_port
        self.max_message_size = max_message_size
        self._clock = clock or _now_ms
        self._lock = threading.Lock()
        self._mf: Any = None
        self._prepare_at = _NEVER  # at this position in the bound file, the roller prepares the next one
        self._queues: dict[tuple[str, int], int] = {}
        self._topics: dict[str, bytes] = {}
        self._closed = False
        # global offset after the last complete record (-1 while no file is bound): the dispatcher
        # follows it while puts go on
        self._live = np.full(1, -1, dtype=np.int64)
        self.live = self._live.view()
        self.live.flags.writeable = False
        self._gil_req: Any = None
        self._gil_seen = 0
        self._wake: Any = None  # set_wake
        self._waits: Any = None
        # dispatch hints (csrc/rmq_hints.h): what a put knows of its record, for the reput thread
        self._ring = np.full((HINT_CAPACITY, HINT_FIELDS), -1, dtype=np.int64)
        self._hints = self._ring.view()
        self._hints.flags.writeable = False
        self._head = np.zeros(1, dtype=np.int64)
        self._hint_head = self._head.view()
        self._hint_head.flags.writeable = False
        self._nhints = 0
        self._topic_hashes: dict[str, int] = {}
        self._publish: Callable[[Any, int, int, int], int] | None = None  # set_publisher
        self._pub_fallback: Callable[[], Any] | None = None

    hints = ReadOnly[Any]("_hints", "The dispatch hints ring, int64[HINT_CAPACITY, HINT_FIELDS] (read-only view).")
    hint_head = ReadOnly[Any]("_hint_head", "int64[1]: the hints written so far (read-only view).")

    # -- state --------------------------------------------------------------------------------------
    def set_file(self, mf: Any) -> None:
        """Write into MappedFile ``mf`` from its ``wrote_position`` on (None releases the current one)."""
        self._ring[:, H_SEQ] = -1  # the position may move back (set_end): no hint may outlive it
        self._mf = mf
        self._prepare_at = _NEVER if mf is None else self._files.prepare_at
        self._live[0] = -1 if mf is None else mf.file_from_offset + mf.wrote_position

    def close(self) -> None:
        with self._lock:
            self.set_file(None)
            self._closed = True

    def acquire(self) -> None:
        self._lock.acquire()

    # -- handing the GIL to the dispatch thread -----------------------------------------------------
    def set_gil_request(self, request: Any) -> None:
        """Share ``request`` (int64[1], or None) with a thread that dispatches without the GIL.
        It holds a new nonzero number while that thread needs the GIL, 0 otherwise; a put that sees
        a number it has not seen yet lets the GIL go until the number changes (at most 2 ms).
        (This twin lets it go by sleeping; the native one waits without it.)

        Why: a thread that wants the GIL back from a thread running Python code waits for the
        switch interval (5 ms), and a dispatch thread needs it a few times per step. Under a put
        loop it spent about half its time waiting, and dispatch fell behind the puts."""
        if request is not None:
            a = np.asarray(request)
            if a.dtype.itemsize != 8 or a.size < 1 or not a.flags.writeable:
                raise ValueError("request must be an aligned, writable int64[1]")
        self._gil_req = request
        self._gil_seen = 0

    def set_wake(self, wake: Any, waits: Any = None) -> None:
        """Share a wake slot (``notify``: uint32 ``seq``, ``waiters``; or None) with the thread that
        follows this appender's published end (the reput thread): when it has flagged itself asleep
        there, a put that publishes a new end bumps the slot and wakes it (csrc/rmq_notify.h) -- only
        while ``waits`` (uint32[1]: the waits in progress on the store, the notify file's count;
        None: always) is nonzero. Nobody waiting, the reput thread dispatches on its timed naps and
        a reader that wants its own writes dispatches them itself: a put wakes no thread."""
        if wake is None and waits is not None:
            raise ValueError("waits without a wake slot")
        if wake is not None:
            a = np.asarray(wake)
            if (a.dtype != np.uint32 or a.shape != (2,) or not a.flags.writeable or not a.flags.c_contiguous
                    or a.ctypes.data % 8):  # the native twin bumps it as one 64-bit word
                raise ValueError("wake must be a writable, 8-aligned uint32[2]")
        if waits is not None:
            a = np.asarray(waits)
            if a.dtype != np.uint32 or a.shape != (1,):
                raise ValueError("waits must be a uint32[1]")
        self._wake, self._waits = wake, waits

    def set_publisher(self, dispatcher: Any, fallback: Callable[[], Any] | None = None) -> None:
        """Publish-on-put: after each append (under the lock, so records go in the order they were
        appended) hand the new records to ``dispatcher.publisher()`` (an armed ``Dispatcher``'s
        ``publish``: it writes their consume-queue units and index entries and wakes the readers
        waiting on their queues); when it declines (-1: not armed, or a file to bind), call
        ``fallback()`` once the lock is let go (the store's dispatch). None stops it."""
        if dispatcher is None:
            self._publish, self._pub_fallback = None, None
            return
        if not callable(fallback):
            raise TypeError("fallback must be callable")
        self._publish, self._pub_fallback = dispatcher.publisher(), fallback

    def _appended(self, mf: Any, pos: int, end: int) -> int:
        """Records [pos, end) of ``mf`` are appended and their end published (under the lock): wake
        the reput thread if it sleeps while a reader waits, and hand the records to the publisher.
        The publisher's answer (1 without one)."""
        w = self._wake
        if w is not None and (self._waits is None or self._waits[0]) and w[1]:
            _notify.bump(w, 0)
        publish = self._publish
        return 1 if publish is None else int(publish(mf.mm, mf.file_from_offset, pos, end))

    def _declined(self, r: int) -> None:
        """After the lock is let go: a declined publish leaves the records to the store's dispatch."""
        if r < 0:
            fallback = self._pub_fallback
            if fallback is not None:
                fallback()

    def _yield_gil(self) -> None:
        req = self._gil_req
        if req is None:
            return
        r = int(req[0])
        if r != 0 and r != self._gil_seen:
            self._gil_seen = r
            deadline = time.monotonic() + _GIL_YIELD_MAX_S
            while int(req[0]) == r and time.monotonic() < deadline:
                time.sleep(0)

    def release(self) -> None:
        self._lock.release()

    def get_queue_offset(self, topic: str, queue_id: int) -> int:
        return self._queues.get((topic, queue_id), 0)

    def set_queue_offset(self, topic: str, queue_id: int, value: int) -> None:
        self._queues[(topic, queue_id)] = value

    def queue_offsets(self) -> dict[tuple[str, int], int]:
        return dict(self._queues)

    def clear_queue_offsets(self) -> None:
        self._queues.clear()

    # -- appending ----------------------------------------------------------------------------------
    def _topic_hash(self, topic: Any, tb: bytes) -> int:
        """Java hash of ``topic + "#"`` (unsigned) for the records of ``topic`` that get dispatch
        hints (an ASCII str, not the delay topic), else -1."""
        h = self._topic_hashes.get(topic) if type(topic) is str else None
        if h is None:
            h = -1
            if type(topic) is str and topic.isascii() and topic != SCHEDULE_TOPIC:
                h = (java_string_hash(topic) * 31 + 35) & 0xFFFFFFFF  # + "#"
                self._topic_hashes[topic] = h
        return h

    def _hint(self, topic: Any, tb: bytes, tags: Any, keys: Any, properties: Any, properties_raw: Any,
              sys_flag: int) -> tuple[int, int, int] | None:
        """(tagsCode, key hash, key count) of a record that gets a dispatch hint: a NOT_TYPE record
        whose only properties are TAGS and one KEYS token, built from ASCII str arguments."""
        if (properties is not None or properties_raw is not None or sys_flag & TRANSACTION_MASK
                or not (tags is None or (type(tags) is str and tags.isascii()))
                or not (keys is None or (type(keys) is str and keys.isascii() and " " not in keys))):
            return None
        th = self._topic_hash(topic, tb)
        if th < 0:
            return None
        code = java_string_hash(tags) if tags else 0
        if not keys:
            return code, 0, 0
        return code, index_key_hash(topic + "#" + keys), 1

    def _put_hint(self, phys: int, size: int, nkeys: int, topic_len: int, queue_id: int, topic_rel: int,
                  qoff: int, ts: int, tags_code: int, key: int) -> None:
        e = self._ring[self._nhints & (HINT_CAPACITY - 1)]
        e[H_SEQ] = -1
        e[1:] = (phys, size | nkeys << 32 | topic_len << 40, queue_id | topic_rel << 32, qoff, ts, tags_code,
                 key)
        e[H_SEQ] = self._nhints
        self._nhints += 1
        self._head[0] = self._nhints

    def _batch_hints(self, mm: Any, pos: int, file_from: int, topic: Any, tb: bytes, properties: Any,
                     sys_flag: int, queue_id: int, qoff: int, ts: int, sizes: Any, cnt: int) -> None:
        """Hints for the ``cnt`` records of a batch just written at ``pos`` when they can have them:
        NOT_TYPE records of an ASCII topic other than the delay topic, every message's properties
        the same object, the first record's dispatch data plain (valid UTF-8, at most one key), which
        the dispatch kernel gives for the first record once (the native twin's appender_hints.pxi)."""
        if (cnt <= 0 or cnt > HINT_CAPACITY or sys_flag & TRANSACTION_MASK or self._topic_hash(topic, tb) < 0
                or type(properties) is not list or len(properties) < cnt
                or any(p is not properties[0] for p in properties[1:cnt])):
            return
        cols = np.zeros((NCOLUMNS, 1), dtype=np.int64)
        disp = np.zeros((DISPATCH_ROWS, 1), dtype=np.int64)
        key = np.zeros(1, dtype=np.int64)
        try:
            count, _, status, _ = dispatch_batch(mm, pos, pos + int(sizes[0]), cols, disp, key, False)
        except ValueError:  # two keys or more
            return
        if status != ST_MSG or count != 1 or disp[D_FLAGS, 0] != 0:
            return
        nk = int(disp[D_KEYS_COUNT, 0])
        tail = int(sizes[0]) - (int(cols[C_TOPIC_POS, 0]) - pos)  # topic, its properties' length and them
        p = file_from + pos
        for i in range(cnt):
            size = int(sizes[i])
            self._put_hint(p, size, nk, int(cols[C_TOPIC_LEN, 0]), queue_id, size - tail, qoff + i, ts,
                           int(disp[D_TAGS_CODE, 0]), int(key[0]) if nk else 0)
            p += size

    def _file(self) -> Any:
        if self._closed:
            raise StoreClosedError("the CommitLog is closed")
        mf = self._mf
        if mf is None or mf.wrote_position >= self.file_size:
            mf = self._files.roll(mf)
            self.set_file(mf)
        if mf.wrote_position >= self._prepare_at:  # once per file, before anything is written
            self._prepare_at = _NEVER
            self._files.prepare_next()
        return mf

    def _still_bound(self, mf: Any) -> None:
        """``mf`` is still the bound file: Python code the append ran (the clock, the roller) may
        have unbound it (``set_file``), and its map may be closed since."""
        if mf is not self._mf:
            raise StoreClosedError("the CommitLog's file was unbound during the append")

    def _roll_over(self, mf: Any, pos: int, need: int, what: str) -> Any:
        """``need`` bytes do not fit after ``pos`` in ``mf``: end it with a BLANK there; the file to
        write into next (MessageTooLargeError when they would not fit in an empty file either)."""
        self._still_bound(mf)
        if pos == 0 or need + BLANK_SIZE > self.file_size:
            raise MessageTooLargeError(f"{what} of {need} bytes does not fit in a {self.file_size}-byte file")
        codec.encode_blank(mf.mm, pos, self.file_size - pos)
        mf.wrote_position = self.file_size
        return self._file()

    def put(
        self,
        topic: str,
        body: bytes,
        queue_id: int = 0,
        *,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Any = None,
        properties_raw: str | None = None,
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int | None = None,
        born_host: Any = None,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        store_host: Any = None,
    ) -> AppendResult:
        tb = self._topics.get(topic) if type(topic) is str else None
        if tb is None:
            tb = self._rules.topic_bytes(topic)
            self._topics[topic] = tb
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise InvalidMessageError(f"body must be bytes-like, not {type(body).__name__}")
        body_len = body.nbytes if isinstance(body, memoryview) else len(body)  # bytes, not items
        if body_len > self.max_message_size:
            raise MessageTooLargeError(
                f"body of {body_len} bytes exceeds the maximum message size {self.max_message_size}"
            )
        pb = self._rules.properties_bytes(tags, keys, properties, properties_raw)
        if type(queue_id) is not int or not 0 <= queue_id <= 0x7FFFFFFF:
            raise InvalidMessageError(f"queue_id must be a non-negative int, not {queue_id!r}")
        flag = _int_field(flag, "flag", *_I32)
        sys_flag = _int_field(sys_flag, "sys_flag", *_I32)
        reconsume_times = _int_field(reconsume_times, "reconsume_times", *_I32)
        prepared_transaction_offset = _int_field(prepared_transaction_offset, "prepared_transaction_offset", *_I64)
        if born_timestamp is not None:
            born_timestamp = _int_field(born_timestamp, "born_timestamp", *_I64)
        if store_host is None:
            sa, sp = self._store_addr, self._store_port
        else:
            sa, sp = self._rules.host(store_host)
        ba, bp = (sa, sp) if born_host is None else self._rules.host(born_host)
        v2 = len(topic) > MAX_TOPIC_LEN_V1
        tran = sys_flag & TRANSACTION_MASK
        no_queue = tran == TRANSACTION_PREPARED or tran == TRANSACTION_ROLLBACK
        hint = self._hint(topic, tb, tags, keys, properties, properties_raw, sys_flag)
        self._yield_gil()
        with self._lock:
            mf = self._file()
            ts = self._clock()
            key = (topic, queue_id)
            qoff = 0 if no_queue else self._queues.get(key, 0)
            bts = ts if born_timestamp is None else born_timestamp
            while True:
                self._still_bound(mf)
                pos = mf.wrote_position
                n = codec.encode_record(
                    mf.mm, pos, self.file_size - pos, tb, queue_id, flag, qoff, mf.file_from_offset + pos,
                    sys_flag, bts, ba, bp, ts, sa, sp, reconsume_times, prepared_transaction_offset,
                    body, pb, v2,
                )
                if n > 0:
                    break
                mf = self._roll_over(mf, pos, -n, "a record")
            mf.wrote_position = pos + n
            self._still_bound(mf)  # (a wrote_position setter is Python code too)
            if hint is not None:  # after the record, before its end is published (rmq_hints.h)
                plen = len(pb) if pb else 0
                self._put_hint(mf.file_from_offset + pos, n, hint[2], len(tb), queue_id, n - 2 - plen - len(tb),
                               qoff, ts, hint[0], hint[1])
            self._live[0] = mf.file_from_offset + pos + n
            if not no_queue:
                self._queues[key] = qoff + 1
            pub = self._appended(mf, pos, pos + n)
        self._declined(pub)
        return AppendResult(mf.file_from_offset + pos, n, qoff, ts, sa, sp)

    def put_batch(
        self,
        topic_bytes: bytes,
        topic: str,
        queue_id: int,
        bodies: list[bytes],
        properties: list[bytes],
        flags: Sequence[int] | None,
        sys_flag: int,
        born_timestamp: int | None,
        born_addr: bytes,
        born_port: int,
        store_addr: bytes,
        store_port: int,
    ) -> BatchAppendResult:
        """Append an already validated batch (the CommitLog validates; this checks each body's
        length against ``max_message_size``, then places and writes it)."""
        n = len(bodies)
        longest = max(map(len, bodies), default=0)
        if longest > self.max_message_size:
            raise MessageTooLargeError(
                f"a body of {longest} bytes exceeds the maximum message size {self.max_message_size}")
        sizes = np.empty(n, dtype=np.int64)
        v2 = len(topic) > MAX_TOPIC_LEN_V1
        self._yield_gil()
        with self._lock:
            mf = self._file()
            ts = self._clock()
            key = (topic, queue_id)
            qoff = self._queues.get(key, 0)
            bts = ts if born_timestamp is None else born_timestamp
            while True:
                self._still_bound(mf)
                pos = mf.wrote_position
                cnt, total = codec.encode_batch(
                    mf.mm, pos, self.file_size - pos, topic_bytes, queue_id, qoff, mf.file_from_offset + pos,
                    sys_flag, bts, born_addr, born_port, ts, store_addr, store_port, bodies, properties,
                    flags, v2, sizes,
                )
                if total > 0:
                    break
                mf = self._roll_over(mf, pos, -total, "a batch")
            mf.wrote_position = pos + total
            self._still_bound(mf)
            # after the records, before their end is published (rmq_hints.h)
            self._batch_hints(mf.mm, pos, mf.file_from_offset, topic, topic_bytes, properties, sys_flag,
                              queue_id, qoff, ts, sizes, cnt)
            self._live[0] = mf.file_from_offset + pos + total
            self._queues[key] = qoff + cnt
            pub = self._appended(mf, pos, pos + total)
        self._declined(pub)
        return BatchAppendResult(mf.file_from_offset + pos, total, qoff, ts, cnt, sizes, store_addr,
                                 store_port)
