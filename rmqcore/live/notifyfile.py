"""The notify file, ``<store>/notify`` (``rmqcore.live`` describes what it is for; ``layout.NOTIFY_*``
its bytes): the writer's announcements and everyone's waits on them, and the polling stand-in for a
store that has none."""
from __future__ import annotations

import collections
import mmap
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import _impl
from .. import layout as L
from ..errors import StoreClosedError

__all__ = ["NotifyFile", "queue_slot", "FALLBACK_POLL"]

FALLBACK_POLL = 0.01  # seconds between looks of a follower whose store has no notify file
_READ_ONLY_SLICE = 0.002  # a waiter that cannot flag itself (notify file not writable) looks this often


def queue_slot(topic: str, queue_id: int, slots: int = L.NOTIFY_SLOTS) -> int:
    """The byte position of the wake slot of queue ``(topic, queue_id)`` in the notify file."""
    h = (_impl.hashing.java_string_hash(topic) * 31 + queue_id) & 0xFFFFFFFF
    return L.NOTIFY_SLOTS_AT + (h % slots) * L.NOTIFY_SLOT_SIZE


# -- the notify file ------------------------------------------------------------------------------------
class _HeaderWord:
    """A word of the notify file's header, loaded (acquire) from a ``NotifyFile``'s map on each read."""

    def __init__(self, pos: int, width: int) -> None:
        self.pos, self.width = pos, width

    def __get__(self, f: NotifyFile, owner: object = None) -> int:
        return int((f.k.load64 if self.width == 8 else f.k.load32)(f.mm, self.pos))


class NotifyFile:
    """A map of ``<store>/notify``: the writer's (``writer=True``: created or taken over, read-write)
    or a follower's (read-write when it may, to flag its waits; read-only otherwise, then its waits
    look every 2 ms). In-process waits go through ``wait``; ``cancel`` ends them (close)."""

    #: How long (seconds) a wait spins on its slot, GIL released, before it sleeps on the futex, as
    #: glibc's adaptive mutexes do: a unit published within that time reaches the waiter without a
    #: futex sleep and wake-up, and the writer makes no FUTEX_WAKE call for it. Adaptive: a wait spins
    #: only while the recent waits (a moving average) were shorter than this, so a quiet queue's
    #: waiter sleeps at once. The cost: a core busy for up to this long per wait. 0 (the default)
    #: sleeps at once: on a host with no idle core the spinner takes the CPU the writer needs (README,
    #: Performance); set it (e.g. ``NotifyFile.wait_spin = 50e-6``) where a core is to spare. Only
    #: the native twin spins.
    wait_spin = 0.0

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
        self._waited = 0.0  # a moving average of how long the waits took (seconds; wait_spin)
        self._closed = False

    @classmethod
    def for_follower(cls, store_dir: str | os.PathLike[str], impl: str | None = None) -> NotifyFile | None:
        """The notify file of a store, None when there is none (RocketMQ's, an older rmqcore's)."""
        try:
            return cls(store_dir, writer=False, impl=impl)
        except FileNotFoundError:
            return None

    # -- header (what the writer publishes about itself; layout.NF_*) ----------------------------------
    state = _HeaderWord(L.NF_STATE, 4)  #: L.NOTIFY_STATE_RECOVERING, _OPEN or _CLOSED
    generation = _HeaderWord(L.NF_GENERATION, 4)  #: bumped by each writer's open
    dispatched = _HeaderWord(L.NF_DISPATCHED, 8)  #: the CommitLog offset dispatch has published up to
    commitlog_min = _HeaderWord(L.NF_COMMITLOG_MIN, 8)  #: the CommitLog's first offset (retention)
    pid = _HeaderWord(L.NF_PID, 8)  #: the writer's process id

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
        """Every slot moves (its waiters look again): the lifecycle slot, then the queues'."""
        self.k.bump(self.mm, L.NF_LIFECYCLE)
        self.k.bump_all(self.mm, L.NOTIFY_SLOTS_AT, L.NOTIFY_SLOTS, L.NF_WAITS)

    def begin(self) -> None:
        """A writer opens the store: before it touches any file, followers learn that it recovers."""
        k, mm = self.k, self.mm
        k.store32(mm, L.NF_STATE, L.NOTIFY_STATE_RECOVERING)
        k.store32(mm, L.NF_GENERATION, (k.load32(mm, L.NF_GENERATION) + 1) & 0xFFFFFFFF)
        k.store64(mm, L.NF_PID, os.getpid())
        self._bump_all()  # (it may look at the count of waits: before the count goes)
        k.store32(mm, L.NF_WAITS, 0)  # counts left by followers that died waiting go

    def opened(self, dispatched: int, commitlog_min: int) -> None:
        """Recovery is done: followers may read again (and re-map what it replaced)."""
        k, mm = self.k, self.mm
        k.store64(mm, L.NF_DISPATCHED, dispatched)
        k.store64(mm, L.NF_COMMITLOG_MIN, commitlog_min)
        k.store32(mm, L.NF_STATE, L.NOTIFY_STATE_OPEN)
        self._bump_all()

    def reput_wake(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """The reput thread's wake slot (uint32[2]) and the count of waits in progress (uint32[1]),
        as arrays over this map for ``Appender.set_wake`` and ``Dispatcher.set_wake``: a waiter in any
        process can wake the reput thread, and a put wakes it only while someone waits. The caller
        lets go of both before ``close``."""
        slot = np.frombuffer(self.mm, dtype=np.uint32, count=2, offset=L.NF_REPUT_WAKE)
        waits = np.frombuffer(self.mm, dtype=np.uint32, count=1, offset=L.NF_WAITS)
        return slot, waits

    def wake_reput(self) -> None:
        """End the reput thread's nap on its wake slot (the store's close)."""
        self.k.bump(self.mm, L.NF_REPUT_WAKE)

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
        spin = self.wait_spin
        t = time.monotonic() if spin else 0.0
        k, mm, counted = self.k, self.mm, False
        try:
            if self.writable:  # while counted, each put wakes the writer's reput thread (layout.NF_WAITS) ...
                k.waits_add(mm, L.NF_WAITS, 1)
                counted = True
                k.poke(mm, L.NF_REPUT_WAKE)  # ... and so does this wait, for a put made before it counted
            r = k.wait(mm, pos, token, timeout, self._cancel, self.writable,
                       0.0 if self.writable else _READ_ONLY_SLICE,
                       spin if self._waited <= spin else 0.0)  # recent waits were long: no spin
        finally:
            if counted:
                k.waits_add(mm, L.NF_WAITS, -1)
            if spin:  # a moving average of the waits (capped), which says whether the next one spins
                self._waited += (min(time.monotonic() - t, 4 * spin) - self._waited) / 8
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
