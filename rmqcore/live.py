"""Live consumers: pulls that wait, consumers that commit, and processes that follow a live store.

How readers learn about new messages (RocketMQ's long polling, without a broker in between):

* **Publication.** Dispatch writes each consume-queue unit with its size field last, a release
  store (``notify.publish_units``; the native ``Dispatcher`` does the same). A reader that loads a
  non-zero size (acquire) sees the whole unit, and the record it points to: dispatch reads only
  records below the appender's published end, itself stored after the record's bytes. So a unit is
  visible only after its record is complete, in this process and in any other that maps the files.
* **Wake slots.** The writer owns a small shared file, ``<store>/notify`` (``layout.NOTIFY_*``
  documents its bytes): a header (state, generation, the dispatched and minimum CommitLog offsets)
  and 1024 wake slots. After a run of units, dispatch bumps the slot of every queue that got units
  (``(String.hashCode(topic) * 31 + queue id) mod 1024``); a waiter reads its slot's ``seq``
  before looking for data and sleeps on it (a futex, GIL released) until it changes. Threads of the
  writer's process and followers in other processes wait the same way: per queue, never a global
  broadcast or a sleep loop (two queues sharing a slot wake each other, harmlessly).
* **Followers.** ``MessageStore(path, read_only=True, follow=True)`` maps the notify file and, on
  each pull, extends its view of the queue: new units (``units_end``), new files (rolls), and the
  CommitLog end. It changes nothing on disk; it writes only the waiter flags in the notify map (and
  consumer offsets, through the writer: ``OffsetInbox``). When the writer restarts, it bumps the
  generation and says it is recovering before it touches any file; a follower's pulls then find
  nothing new (``OFFSET_OVERFLOW_ONE`` at the same offset) until recovery is done, then it re-maps
  what recovery replaced. A pull that overlapped the start of a recovery is done again (the
  generation is read before and after, as a seqlock). Retention: the writer publishes its new
  minimum offset; the follower drops the files that were deleted (its maps of them stayed valid).
* **No notify file** (a store a RocketMQ broker or an older rmqcore is writing): the follower polls,
  every ``FALLBACK_POLL`` seconds while waiting. It finds the CommitLog's end by scanning records (CRC
  checked) and accepts a unit only when the record it points to is below that end and has the
  unit's size, queue id and queue offset (a broker's unit bytes carry no publication order).

What a follower may see of a record that a power loss then removes: dispatch publishes records as
soon as they are in the page cache, under either flush policy, as RocketMQ's broker serves pulls
from its CommitLog's end. Under ASYNC_FLUSH a record is not durable until the next flush (up to
``flush_interval_ms``, 500 ms by default); under SYNC_FLUSH until its group commit (its producer is
still waiting for the ack). A follower on the same machine dies with the power, but what it did
with the record (a side effect elsewhere, a committed consumer offset) outlives it: after the
restart the recovered queue ends before that record, and new messages take its queue offsets. A
SIGKILL of the writer loses nothing that was published (the page cache survives it): recovery keeps
every complete record, and re-dispatch writes the same units again.

Consumer offsets: the writer is the one owner of ``config/consumerOffset.json``, as RocketMQ's broker
is. A follower's ``commit_offset`` appends a line to ``config/consumerOffset.inbox`` under an
exclusive lock (and syncs it); the writer applies the lines in order before its own commits and
reads (``fetch_offset``), in its periodic flush and at open and close, persists consumerOffset.json,
then empties the inbox. A follower's ``fetch_offset`` reads both, under the same lock.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import fcntl
import json
import math
import mmap
import os
import struct
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _impl
from . import layout as L
from .config import int_arg
from .errors import ConfigError, InvalidTopicError, RecoveryCutWarning, StoreClosedError
from .mappedfile import MappedFile, MappedFileQueue

if TYPE_CHECKING:
    from .consumequeue import ConsumeQueue
    from .message import MessageExt
    from .store import GetResult, MessageStore

__all__ = [
    "NotifyFile", "Follower", "OffsetInbox", "QueueConsumer", "AsyncQueueConsumer", "queue_slot", "pull",
    "FALLBACK_POLL",
]

FALLBACK_POLL = 0.01  # seconds between looks of a follower whose store has no notify file
_READ_ONLY_SLICE = 0.002  # a waiter that cannot flag itself (notify file not writable) looks this often
_ASYNC_SLICE = 0.5  # longest wait one executor job of an asyncio consumer does
_UNIT = L.CQ_UNIT_SIZE
_FILLER_SIZE = 0x7FFFFFFF  # ConsumeQueue.BLANK_UNIT's size
_UNIT_STRUCT = struct.Struct(">qiq")
_HEAD_STRUCT = struct.Struct(">iiiiiq")  # TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET

# getMessage statuses a held pull waits on (RocketMQ: PULL_NOT_FOUND, which PullRequestHoldService holds)
OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
HOLD = frozenset({"OFFSET_OVERFLOW_ONE", "NO_MESSAGE_IN_QUEUE", "NO_MATCHED_LOGIC_QUEUE",
                  "OFFSET_FOUND_NULL"})
_MOVED = frozenset({"OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY"})  # PULL_OFFSET_MOVED


def queue_slot(topic: str, queue_id: int, slots: int = L.NOTIFY_SLOTS) -> int:
    """The byte position of the wake slot of queue ``(topic, queue_id)`` in the notify file."""
    h = (_impl.hashing.java_string_hash(topic) * 31 + queue_id) & 0xFFFFFFFF
    return L.NOTIFY_SLOTS_AT + (h % slots) * L.NOTIFY_SLOT_SIZE


def _wait_arg(wait: Any) -> float:
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0 or math.isnan(wait):
        raise ConfigError(f"wait must be a number of seconds >= 0, not {wait!r}")
    return float(wait)


# -- the notify file ------------------------------------------------------------------------------------
class NotifyFile:
    """A map of ``<store>/notify``: the writer's (``writer=True``: created or taken over, read-write)
    or a follower's (read-write when it may, to flag its waits; read-only otherwise, then its waits
    look every 2 ms). In-process waits go through ``wait``; ``cancel`` ends them (close)."""

    def __init__(self, store_dir: str | os.PathLike[str], *, writer: bool, impl: str | None = None) -> None:
        self.path = Path(store_dir) / L.NOTIFY_FILE
        self.k = _impl.kernel("notify", impl)
        self.writer = writer
        cloexec = getattr(os, "O_CLOEXEC", 0)
        self.writable = True
        if writer:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | cloexec, 0o644)
        else:
            try:
                fd = os.open(self.path, os.O_RDWR | cloexec)
            except PermissionError:
                fd = os.open(self.path, os.O_RDONLY | cloexec)
                self.writable = False
        try:
            size = os.fstat(fd).st_size
            if writer and size != L.NOTIFY_FILE_SIZE:
                os.ftruncate(fd, L.NOTIFY_FILE_SIZE)
            elif not writer and size != L.NOTIFY_FILE_SIZE:
                raise FileNotFoundError(f"{self.path} is not a notify file of this version ({size} bytes)")
            self.mm = mmap.mmap(fd, L.NOTIFY_FILE_SIZE,
                                access=mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        head = bytes(self.mm[: L.NF_SLOTS + 4])
        good = (head[: L.NF_VERSION] == L.NOTIFY_MAGIC
                and int.from_bytes(head[L.NF_VERSION : L.NF_VERSION + 4], "little") == L.NOTIFY_VERSION
                and int.from_bytes(head[L.NF_SLOTS : L.NF_SLOTS + 4], "little") == L.NOTIFY_SLOTS)
        if not good:
            if not writer:
                self.mm.close()
                os.close(fd)
                raise FileNotFoundError(f"{self.path} is not a notify file of this version")
            self.mm[:] = bytes(L.NOTIFY_FILE_SIZE)
            self.mm[: L.NF_SLOTS + 4] = (L.NOTIFY_MAGIC + L.NOTIFY_VERSION.to_bytes(4, "little")
                                         + L.NOTIFY_SLOTS.to_bytes(4, "little"))
        self._slot_cache: dict[tuple[Any, int], int] = {}
        self._cancel = np.zeros(1, dtype=np.int64)
        self._lock = threading.Lock()
        self._inside = 0
        self._waiting: collections.Counter[int] = collections.Counter()
        self._closed = False

    @classmethod
    def for_follower(cls, store_dir: str | os.PathLike[str], impl: str | None = None) -> NotifyFile | None:
        """The notify file of a store, None when there is none (RocketMQ's, an older rmqcore's)."""
        try:
            return cls(store_dir, writer=False, impl=impl)
        except FileNotFoundError:
            return None

    # -- header -----------------------------------------------------------------------------------
    @property
    def state(self) -> int:
        return int(self.k.load32(self.mm, L.NF_STATE))

    @property
    def generation(self) -> int:
        return int(self.k.load32(self.mm, L.NF_GENERATION))

    @property
    def dispatched(self) -> int:
        return int(self.k.load64(self.mm, L.NF_DISPATCHED))

    @property
    def commitlog_min(self) -> int:
        return int(self.k.load64(self.mm, L.NF_COMMITLOG_MIN))

    @property
    def pid(self) -> int:
        return int(self.k.load64(self.mm, L.NF_PID))

    def slot(self, topic: Any, queue_id: int) -> int:
        """The wake slot of a queue (``topic`` as str or as its UTF-8 bytes)."""
        key = (topic, queue_id)
        p = self._slot_cache.get(key)
        if p is None:
            name = topic.decode("utf-8", "replace") if isinstance(topic, bytes) else topic
            p = self._slot_cache[key] = queue_slot(name, queue_id)
        return p

    # -- the writer's side --------------------------------------------------------------------------
    def _bump_all(self) -> None:
        bump, mm = self.k.bump, self.mm
        bump(mm, L.NF_LIFECYCLE)
        for i in range(L.NOTIFY_SLOTS):
            bump(mm, L.NOTIFY_SLOTS_AT + i * L.NOTIFY_SLOT_SIZE)

    def begin(self) -> None:
        """A writer opens the store: before it touches any file, followers learn that it recovers."""
        k, mm = self.k, self.mm
        k.store32(mm, L.NF_STATE, L.NOTIFY_STATE_RECOVERING)
        k.store32(mm, L.NF_GENERATION, (k.load32(mm, L.NF_GENERATION) + 1) & 0xFFFFFFFF)
        k.store64(mm, L.NF_PID, os.getpid())
        self._bump_all()

    def opened(self, dispatched: int, commitlog_min: int) -> None:
        """Recovery is done: followers may read again (and re-map what it replaced)."""
        k, mm = self.k, self.mm
        k.store64(mm, L.NF_DISPATCHED, dispatched)
        k.store64(mm, L.NF_COMMITLOG_MIN, commitlog_min)
        k.store32(mm, L.NF_STATE, L.NOTIFY_STATE_OPEN)
        self._bump_all()

    def publish_dispatched(self, offset: int) -> None:
        self.k.store64(self.mm, L.NF_DISPATCHED, offset)

    def publish_min(self, commitlog_min: int) -> None:
        """Retention deleted files: followers drop their maps of them."""
        self.k.store64(self.mm, L.NF_COMMITLOG_MIN, commitlog_min)
        self.k.bump(self.mm, L.NF_LIFECYCLE)

    def announce(self, topic: Any, queue_id: int) -> None:
        """New units of a queue are published: wake its waiters."""
        self.k.bump(self.mm, self.slot(topic, queue_id))

    def closed(self) -> None:
        """The writer closed the store cleanly."""
        self.k.store32(self.mm, L.NF_STATE, L.NOTIFY_STATE_CLOSED)
        self._bump_all()

    # -- waits ---------------------------------------------------------------------------------------
    def token(self, pos: int) -> int:
        """Read before looking for data; ``wait`` returns once the slot moved past it."""
        return int(self.k.seq(self.mm, pos))

    def wait(self, pos: int, token: int, timeout: float) -> None:
        """Sleep until slot ``pos`` changes from ``token`` or ``timeout`` passes (GIL released).

        Raises:
            StoreClosedError: the store is being closed.
        """
        with self._lock:
            if self._cancel[0]:
                raise StoreClosedError(f"the store {self.path.parent} is closed")
            self._inside += 1
            self._waiting[pos] += 1
        try:
            r = self.k.wait(self.mm, pos, token, timeout, self._cancel, self.writable,
                            0.0 if self.writable else _READ_ONLY_SLICE)
        finally:
            with self._lock:
                self._inside -= 1
                self._waiting[pos] -= 1
                if not self._waiting[pos]:
                    del self._waiting[pos]
        if r == self.k.CANCELLED:
            raise StoreClosedError(f"the store {self.path.parent} was closed while waiting")

    def cancel(self) -> None:
        """End every wait of this process on this map (they raise StoreClosedError) and return once
        none is left inside the kernel; later waits raise at once."""
        with self._lock:
            self._cancel[0] = 1
        while True:
            with self._lock:
                positions, inside = list(self._waiting), self._inside
            if not inside:
                return
            for p in positions:
                self.k.wake(self.mm, p)
            time.sleep(0.0005)

    def close(self) -> None:
        if self._closed:
            return
        self.cancel()
        self._closed = True
        try:
            self.mm.close()
        finally:
            os.close(self.fd)


class _Poller:
    """Waits of a follower whose store has no notify file: every ``FALLBACK_POLL`` seconds."""

    writable = False

    def __init__(self) -> None:
        self._cancelled = threading.Event()

    def slot(self, topic: Any, queue_id: int) -> int:
        return 0

    def token(self, pos: int) -> int:
        return 0

    def wait(self, pos: int, token: int, timeout: float) -> None:
        if self._cancelled.wait(min(timeout, FALLBACK_POLL)):
            raise StoreClosedError("the store was closed while waiting")

    def cancel(self) -> None:
        self._cancelled.set()

    def close(self) -> None:
        self.cancel()


# -- followers -------------------------------------------------------------------------------------------
def _map(q: MappedFileQueue, path: str, offset: int) -> MappedFile | None:
    """A read-only map of a file the writer made, made as ``q`` makes its files (a PooledMappedFile
    of the store's map pool for a consume queue); None while it is missing or not yet its full size."""
    try:
        mf = q._file(path, offset, False)
    except (FileNotFoundError, ConfigError):
        return None
    mf.wrote_position = mf.flushed_position = 0
    return mf


def _close(mf: MappedFile) -> bool:
    """Close a map; False when a zero-copy view still holds it (it is then left to the collector)."""
    try:
        mf.close()
        return True
    except BufferError:
        return False


def _map_next(q: MappedFileQueue) -> MappedFile | None:
    """Map the file after the last one of ``q`` (a roll), if the writer has made it."""
    start = q.files[-1].file_end_offset if q.files else None
    if start is None:
        names = sorted((off, e.path) for e in os.scandir(q.directory)
                       if (off := L.file_name_to_offset(e.name)) is not None) if q.directory.is_dir() else []
        if not names:
            return None
        start, path = names[0]
    else:
        path = str(q.directory / L.offset_to_file_name(start))
    mf = _map(q, path, start)
    if mf is not None:
        q.files.append(mf)
    return mf


def _remap(q: MappedFileQueue) -> None:
    """Make ``q``'s maps match its directory again: keep the maps of files that are still the same
    file (inode), map the new or replaced ones (positions: full; the caller sets the end), drop the
    deleted ones."""
    names = sorted((off, e.path) for e in os.scandir(q.directory)
                   if (off := L.file_name_to_offset(e.name)) is not None) if q.directory.is_dir() else []
    old = {mf.file_from_offset: mf for mf in q.files}
    files: list[MappedFile] = []
    for off, path in names:
        mf = old.pop(off, None)
        if mf is not None:
            if mf.maps(path):
                files.append(mf)
                continue
            _close(mf)
        mf = _map(q, path, off)
        if mf is None:
            break  # being created: the next look maps it
        mf.wrote_position = mf.flushed_position = q.file_size
        files.append(mf)
    for mf in old.values():
        _close(mf)
    q.files = files


class Follower:
    """A read-only store's view kept up with a live writer (``MessageStore(..., follow=True)``).

    Made before the store opens its files (it reads the writer's generation first), attached after.
    The store calls ``ready`` and ``refresh_queue`` before each pull; ``still`` after it."""

    def __init__(self, store_dir: str | os.PathLike[str], impl: str | None = None) -> None:
        self.store_dir = Path(store_dir)
        self.notify = NotifyFile.for_follower(store_dir, impl)
        self.waits: NotifyFile | _Poller = self.notify if self.notify is not None else _Poller()
        self.k = _impl.kernel("notify", impl)
        self._codec = _impl.kernel("codec", impl)
        n = self.notify
        self.gen = n.generation if n is not None else 0
        self._stale = n is not None and n.state == L.NOTIFY_STATE_RECOVERING
        self._cl_min = -1
        self._life = -1  # the lifecycle seq when the view was last brought up to the writer's state
        self.store: MessageStore | None = None
        self.inbox = OffsetInbox(store_dir)

    def attach(self, store: MessageStore) -> None:
        """The store's read-only open is done: make its consume queues' ends the published ones."""
        self.store = store
        self._trim_commitlog(store.commitlog.max_offset if store.commitlog.queue.files else 0)
        for cq in store.consume_queues.values():
            self._fix_end(cq)
        if self.notify is not None and not self._stale:
            self._stale = self.notify.generation != self.gen

    def close(self) -> None:
        self.waits.close()

    # -- the global view ----------------------------------------------------------------------------
    def ready(self) -> tuple[bool, int]:
        """Bring the view up to the writer's state; ``(False, token)`` while the writer recovers
        (the files may change under a reader then), else ``(True, token)`` for ``still``. The
        token is the lifecycle slot's ``seq``: the writer bumps it whenever its state, generation
        or minimum offset changes, so one load tells that nothing did."""
        n = self.notify
        if n is None:
            self._poll_commitlog()
            return True, 0
        life = int(self.k.load32(n.mm, L.NF_LIFECYCLE))
        if life == self._life and not self._stale:
            return True, life
        while True:
            gen, state = n.generation, n.state
            if state == L.NOTIFY_STATE_RECOVERING:
                return False, life
            if gen == self.gen and not self._stale:
                break
            self._resync()
            self.gen, self._stale = gen, False
        m = n.commitlog_min
        if m != self._cl_min:
            self._apply_min(m)
        d = n.dispatched
        assert self.store is not None
        if d > self.store.commitlog.max_offset:
            self._extend_commitlog(d)
        self._life = life
        return True, life

    def commitlog_end(self) -> int:
        """Where the records this follower may read end now: the writer's dispatched offset (its
        scanned end without a notify file), kept up incrementally; while the writer recovers, the
        end seen before (what it had published stays)."""
        ok, _ = self.ready()
        if ok and self.notify is not None:
            self._extend_commitlog(self.notify.dispatched)
        assert self.store is not None
        return int(self.store.commitlog.max_offset)

    def still(self, token: int) -> bool:
        """Nothing happened to the writer since ``ready`` gave ``token`` (a pull in between stands:
        the load is ordered after the pull's loads, a seqlock's second look)."""
        n = self.notify
        return n is None or int(self.k.load32(n.mm, L.NF_LIFECYCLE)) == token

    def _resync(self) -> None:
        """After a writer's restart: re-map the files recovery replaced, and re-read every end."""
        s = self.store
        assert s is not None
        s._drop_lookup()
        _remap(s.commitlog.queue)
        end = self.notify.dispatched if self.notify is not None else 0
        for cq in list(s.consume_queues.values()):
            _remap(cq.queue)
            self._fix_end(cq)
            end = max(end, cq.max_physic_offset)
        self._trim_commitlog(end)
        self._cl_min = -1

    def _trim_commitlog(self, end: int) -> None:
        """End the CommitLog view at ``end``: files that start there or later (one the writer made
        ahead of its appends) are let go, and mapped again when records reach them."""
        s = self.store
        assert s is not None
        q = s.commitlog.queue
        while q.files and q.files[-1].file_from_offset >= max(end, 0) and _close(q.files[-1]):
            q.files.pop()
        last = q.last()
        if last is not None:
            s.commitlog.set_end(min(max(end, 0), last.file_end_offset))

    def _apply_min(self, cl_min: int) -> None:
        """Retention: drop the maps of the files the writer deleted; queues start at ``cl_min``."""
        s = self.store
        assert s is not None
        s._drop_lookup()
        q = s.commitlog.queue
        while (len(q.files) > 1 and q.files[0].file_end_offset <= cl_min
               and not os.path.exists(q.files[0].path)):
            if not _close(q.files[0]):
                break
            q.files.pop(0)
        for cq in s.consume_queues.values():
            files = cq.queue.files
            while len(files) > 1 and not os.path.exists(files[0].path):
                if not _close(files[0]):
                    break
                files.pop(0)
            cq.correct_min_offset(cl_min)
        self._cl_min = cl_min

    def _extend_commitlog(self, end: int) -> None:
        """The CommitLog view reaches ``end`` (records below it are complete): map the files up to it."""
        s = self.store
        assert s is not None
        cl = s.commitlog
        if end <= cl.max_offset:
            return
        q = cl.queue
        while not q.files or q.files[-1].file_end_offset < end:
            if _map_next(q) is None:
                break
        last = q.last()
        if last is not None:
            cl.set_end(min(end, last.file_end_offset))

    def _poll_commitlog(self) -> None:
        """No notify file: the end of the CommitLog is where valid records end (CRC checked)."""
        s = self.store
        assert s is not None
        cl = s.commitlog
        q = cl.queue
        if not q.files and _map_next(q) is None:
            return
        scan = self._codec.scan_records
        end = cl.max_offset
        while True:
            mf = q.files[-1]
            pos = end - mf.file_from_offset
            if pos >= mf.file_size:
                if _map_next(q) is None:
                    break
                end = q.files[-1].file_from_offset
                continue
            status, stop, _n, _ts = scan(mf.mm, pos, mf.file_size, True, -1)
            if status == L.ST_BLANK:
                end = mf.file_end_offset
                continue
            end = mf.file_from_offset + stop
            break
        if end > cl.max_offset:
            cl.set_end(end)

    # -- queues ----------------------------------------------------------------------------------------
    def refresh_queue(self, topic: Any, queue_id: Any) -> None:
        """Extend the view of one queue to what the writer has published (a new queue appears)."""
        s = self.store
        assert s is not None
        try:
            cq = s.consume_queues.get((topic, queue_id))
        except TypeError:
            return  # the pull reports the argument
        if cq is None:
            cq = self._discover(topic, queue_id)
            if cq is None:
                return
        self._extend(cq)

    def _discover(self, topic: Any, queue_id: Any) -> ConsumeQueue | None:
        from .consumequeue import ConsumeQueue

        s = self.store
        assert s is not None
        if type(topic) is not str or type(queue_id) is not int or not 0 <= queue_id <= 0x7FFFFFFF:
            return None
        try:
            cq = ConsumeQueue(s.store_dir, topic, queue_id, file_size=s.config.cq_file_size, read_only=True,
                              pool=s._map_pool)
        except InvalidTopicError:
            return None
        if not cq.directory.is_dir():
            return None
        _remap(cq.queue)
        if not cq.queue.files:
            return None
        self._fix_end(cq)
        s.consume_queues[(topic, queue_id)] = cq
        return cq

    def _fix_end(self, cq: ConsumeQueue) -> None:
        """The published end of a queue's last file (earlier files are full: the writer makes the next
        file only then), its last unit's record end, and its minimum offset."""
        files = cq.queue.files
        if not files:
            return
        last = files[-1]
        last.wrote_position = last.flushed_position = 0
        for mf in files[:-1]:
            mf.wrote_position = mf.flushed_position = mf.file_size
        cq.max_physic_offset = -1
        self._extend(cq)
        if cq.max_physic_offset < 0:  # nothing in the last file: the previous file's last unit
            for mf in reversed(files[:-1]):
                off, size, _ = _unpack_unit(mf.mm, mf.file_size - _UNIT)
                if size != _FILLER_SIZE:
                    cq.max_physic_offset = off + size
                    break
        cl_min = self._cl_min if self._cl_min >= 0 else (self.store.commitlog.min_offset if self.store else 0)
        cq.correct_min_offset(cl_min)

    def _extend(self, cq: ConsumeQueue) -> None:
        q = cq.queue
        if not q.files and _map_next(q) is None:
            return
        last = q.files[-1]
        grow = -1
        units_end = self.k.units_end
        while True:
            w = last.wrote_position
            if self.notify is not None:
                end = units_end(last.mm, w, last.file_size)
            else:
                end = self._checked_end(cq, last)
            if end > w:
                last.wrote_position = last.flushed_position = end
                off, size, _ = _unpack_unit(last.mm, end - _UNIT)
                if size != _FILLER_SIZE:
                    cq.max_physic_offset = grow = off + size
            if end < last.file_size:
                break
            nxt = _map_next(q)
            if nxt is None:
                break
            last = nxt
        if grow > 0 and self.store is not None:
            self._extend_commitlog(grow)

    def _checked_end(self, cq: ConsumeQueue, mf: MappedFile) -> int:
        """No notify file: the units from ``mf``'s position whose records are below the CommitLog's
        scanned end and name this queue and offset (a broker writes units with no order to rely on)."""
        s = self.store
        assert s is not None
        cl = s.commitlog
        cl_end = cl.max_offset
        pos = mf.wrote_position
        while pos + _UNIT <= mf.file_size:
            off, size, _ = _unpack_unit(mf.mm, pos)
            if size == 0:
                break
            if not (off == 0 and size == _FILLER_SIZE):
                if off < 0 or size <= 0 or off + size > cl_end:
                    break
                try:
                    rec = cl.queue.find(off)
                except Exception:  # noqa: BLE001 - not mapped (yet): not published
                    break
                at = off - rec.file_from_offset
                head = _unpack_head(rec.mm, at) if at + 28 <= rec.file_size else None
                if head is None or head[0] != size or head[1] != cq.queue_id \
                        or head[2] != (mf.file_from_offset + pos) // _UNIT:
                    break
            pos += _UNIT
        return pos

    # -- consumer offsets ----------------------------------------------------------------------------------
    def fetch_offset(self, key: str, queue_id: int) -> int:
        """What the writer will answer: consumerOffset.json with the inbox's lines on top."""
        path = self.store_dir / "config" / "consumerOffset.json"
        with self.inbox.locked(shared=True) as (_fd, lines):
            from .configfiles import load_with_bak

            data = load_with_bak(path)
            table = (data or {}).get("offsetTable", {}) if isinstance(data, dict) else {}
            got = table.get(key, {}).get(str(queue_id), -1) if isinstance(table, dict) else -1
            for k, qid, off in lines:
                if k == key and qid == queue_id:
                    got = off
        return int(got) if isinstance(got, int) and not isinstance(got, bool) else -1


def _unpack_unit(buf: Any, pos: int) -> tuple[int, int, int]:
    return _UNIT_STRUCT.unpack_from(buf, pos)


def _unpack_head(buf: Any, pos: int) -> tuple[int, int, int]:
    """(TOTALSIZE, QUEUEID, QUEUEOFFSET) of the record at ``pos``."""
    size, _magic, _crc, qid, _flag, qoff = _HEAD_STRUCT.unpack_from(buf, pos)
    return size, qid, qoff


# -- consumer offsets committed by followers -----------------------------------------------------------
class OffsetInbox:
    """``config/consumerOffset.inbox``: followers' commits, for the writer to apply (module docstring)."""

    def __init__(self, store_dir: str | os.PathLike[str]) -> None:
        self.path = Path(store_dir) / "config" / L.OFFSET_INBOX_FILE

    def append(self, key: str, queue_id: int, offset: int) -> None:
        """A follower commits: one line, appended and synced under the exclusive lock."""
        line = (json.dumps({key: {str(queue_id): offset}}, ensure_ascii=False) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a line a crash cut short ends here: it is dropped, this one is whole
            os.write(fd, line)
            os.fdatasync(fd)
        finally:
            os.close(fd)  # releases the lock

    @contextlib.contextmanager
    def locked(self, shared: bool) -> Iterator[tuple[int, list[tuple[str, int, int]]]]:
        """``with inbox.locked(shared) as (fd, lines)``: the commits waiting, under the lock
        (``fd`` -1 and no lines when there is no inbox)."""
        try:
            fd = os.open(self.path, (os.O_RDONLY if shared else os.O_RDWR) | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            yield -1, []
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            yield fd, self._parse(b"".join(chunks))
        finally:
            os.close(fd)

    def _parse(self, data: bytes) -> list[tuple[str, int, int]]:
        out: list[tuple[str, int, int]] = []
        at = 0
        for raw in data.split(b"\n"):
            start, at = at, at + len(raw) + 1
            if not raw:
                continue
            try:
                obj = json.loads(raw)
                items = [(k, int(q), v) for k, qmap in obj.items() for q, v in qmap.items()]
                if not all(isinstance(k, str) and type(v) is int for k, _q, v in items):
                    raise ValueError("not a map of integers")
            except (ValueError, AttributeError, TypeError):
                warnings.warn(RecoveryCutWarning(
                    f"{self.path}: the consumer-offset commit at byte {start} is not whole (a crash cut "
                    f"it short) and was dropped: {raw[:80]!r}"), stacklevel=5)
                continue
            out.extend(items)
        return out

    def drain(self, apply: Callable[[list[tuple[str, int, int]]], None]) -> int:
        """The writer takes the commits waiting: ``apply(lines)`` (it persists consumerOffset.json),
        then the inbox is emptied, all under the exclusive lock. Returns how many were applied."""
        try:
            if os.stat(self.path).st_size == 0:
                return 0
        except FileNotFoundError:
            return 0
        with self.locked(shared=False) as (fd, lines):
            if fd < 0:
                return 0
            if lines:
                apply(lines)
            os.ftruncate(fd, 0)
            os.fsync(fd)
        return len(lines)


# -- pulls that wait -----------------------------------------------------------------------------------
def pull(store: MessageStore, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
         max_bytes: int, tag_filter: str | None, wait: Any) -> GetResult:
    """``get_messages`` with ``wait`` seconds of holding (and a follower's refresh): RocketMQ's
    long polling. The queue's wake slot is read before each look, so a unit published meanwhile
    ends the wait at once; the wait ends early with StoreClosedError when the store closes."""
    if type(wait) is not float or not wait >= 0:
        wait = _wait_arg(wait)
    store._check_open()
    f = store._follower
    waits: NotifyFile | _Poller | None = f.waits if f is not None else store._notify
    if wait and (waits is None or (f is None and store._reput is None)):
        raise ConfigError(
            f"{store.store_dir}: nothing would end a wait here ("
            + ("opened read-only without follow=True" if store.read_only
               else "dispatch='inline' has no reput thread")
            + "); pull with wait=0")
    if wait and type(topic) is not str:
        raise ConfigError(f"topic must be a str to wait on its queue, not {type(topic).__name__}")
    slot = waits.slot(topic, queue_id) if wait and waits is not None else 0
    deadline = -1.0
    gate = store._gate
    while True:
        token = waits.token(slot) if wait and waits is not None else 0
        ok = True
        gate.enter()  # each look runs in the store's lifecycle gate, the wait below outside it:
        try:  # close() seals the gate, cancels the waits and never waits for a sleeping pull
            if f is not None:
                ok, life = f.ready()
                if ok:
                    f.refresh_queue(topic, queue_id)
                    r = store._get_messages(group, topic, queue_id, offset, max_msgs, max_bytes, tag_filter)
                    if not f.still(life):
                        continue  # the writer began recovering meanwhile: what was read may be gone
                else:
                    r = _recovering(store, topic, queue_id, offset)
            else:
                r = store._get_messages(group, topic, queue_id, offset, max_msgs, max_bytes, tag_filter)
        finally:
            gate.leave()
        if not wait or r.status not in HOLD:
            return r
        now = time.monotonic()
        if deadline < 0:
            deadline = now + wait
        left = deadline - now
        if left <= 0:
            return r
        assert waits is not None
        if ok:
            waits.wait(slot, token, left)
        else:
            waits.wait(L.NF_LIFECYCLE, life, left)


def _recovering(store: MessageStore, topic: Any, queue_id: Any, offset: int) -> GetResult:
    """What a follower's pull finds while the writer recovers: nothing new, pull again from ``offset``."""
    from .store import GetResult

    try:
        cq = store.consume_queues.get((topic, queue_id))
    except TypeError:
        cq = None
    lo, hi = (cq.min_offset, cq.max_offset) if cq is not None else (0, 0)
    return GetResult(OFFSET_OVERFLOW_ONE, offset, lo, hi, [], [], [], store)


# -- consumers -------------------------------------------------------------------------------------------
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
