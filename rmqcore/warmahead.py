"""WarmAhead: pages just past where a writer is faulted in for writing, on a thread of their own.

A first write to a page of a fresh file through a shared map is a page fault (allocate, zero, map;
ext4 also marks the block written), which is most of an append's cost when it lands on the writer.
A WarmAhead thread populates the regions its source names (MADV_POPULATE_WRITE, GIL released in the
kernel) so the writer finds them mapped and the faults run on whichever core has time for them.
Two sources use it:

* the CommitLog: up to ``warm_ahead`` (32 MiB) past the write position of its last file;
* the MessageStore's dispatch (``logics_warm_ahead``, 4 MiB): past each consume queue's write
  position and the index file's last entry (first-touch faults there are a large share of
  dispatch's time).

Between passes the thread waits for its writer's progress, not for a clock: given ``progress`` (an
int64[1] the writer publishes, the CommitLog's live end), it sleeps in ``notify.wait_reach`` (GIL
released, looking every ``IDLE_MIN`` while the writer writes, every 16 x that while it does not)
until the writer has written ``step`` more bytes, or ``IDLE_MAX`` passes. A thread that woke on a
clock took the GIL each time (hundreds of times a second while the store was written): a writer
running Python then waited out each hand-over, a few ms at a time on a loaded machine. Without
``progress`` it polls, every ``IDLE_MIN`` backing off to ``IDLE_POLL_MAX`` while there is nothing
to do.

A source names only allocated bytes nothing has written yet (CommitLog and consume-queue files are
allocated when created, an index file as far as ``IndexFile.entry_limit`` allocated it), so file
contents never change. Files are unmapped only with the thread stopped (``stop``, joined) or
``paused()``.
"""
from __future__ import annotations

import contextlib
import struct
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from . import _impl
from .errors import RmqError

__all__ = ["WarmAhead", "Region", "ahead_end", "index_region"]

#: (the map, first byte to warm, end of the bytes to warm)
Region = tuple[Any, int, int]

#: how far ahead of a file's write position a source asks at least (see ``ahead_end``)
MIN_AHEAD = 16 * 1024

_COUNT = struct.Struct(">i")


def ahead_end(start: int, limit: int, written: int, ahead: int) -> int:
    """Where to warm to from ``start``: ``ahead`` bytes, but no more than the file already holds
    (``written``, at least ``MIN_AHEAD``), and not past ``limit``; so a store that writes a few
    messages to many queues does not dirty megabytes of zeros it never uses."""
    return min(limit, start + min(ahead, max(MIN_AHEAD, written)))


def index_region(f: Any, ahead: int) -> Region | None:
    """An index file's region: from its next entry towards the end of its allocated entries."""
    mm = f._mm
    if mm is None or mm.closed:
        return None
    start = f._entries_end(max(_COUNT.unpack_from(mm, 36)[0], 1))
    return mm, start, ahead_end(start, f._entries_end(f._alloc), start - f._entries_end(1), ahead)


def _live(ref: weakref.ref[Any]) -> bool:
    m = ref()
    return m is not None and not m.closed


class WarmAhead:
    """A daemon thread that populates the regions ``regions()`` names.

    ``regions()`` is called on the thread, with the GIL, every pass; a source may name only what
    changed since its last answer, since a region stays with the thread until it is warm. Each map
    is warmed from where this thread last stopped in it (or the region's start, if that is further),
    at most ``chunk`` bytes per kernel call, under the lock ``paused()`` takes. With ``progress``
    (see the module docstring) a pass that warmed nothing is followed by a wait for ``step`` more
    bytes of it (or ``IDLE_MAX``); without, by a poll.
    """

    # progress looked at every 2 ms (without the GIL); a pass at least every second regardless
    # (``step`` is a fraction of the bytes warmed ahead: the writer never catches up in between)
    IDLE_MIN, IDLE_MAX = 0.002, 1.0
    # without progress: polls every 2 ms, backing off to 16 ms while there is nothing to do (half
    # of the CommitLog's 32 MB ahead at 1 GB/s of appends)
    IDLE_POLL_MAX = 0.016

    def __init__(self, regions: Callable[[], Iterable[Region]], chunk: int, name: str,
                 progress: Any = None, step: int = 0) -> None:
        self._regions = regions
        self.chunk = chunk
        self._progress = progress
        self._step_bytes = max(step, 1)
        self._notify = _impl.notify
        self._cancel = np.zeros(1, dtype=np.int64)  # set by stop: ends a wait_reach
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pending: dict[int, Region] = {}  # id(map) -> the region still to warm there
        # id(map) -> (a weak reference to the map, warmed up to): a map its owner let go of (a pooled
        # consume-queue file) is not kept mapped by this
        self._upto: dict[int, tuple[weakref.ref[Any], int]] = {}
        self._prune_at = 64
        self._populate = _impl.appender.prefault
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _step(self) -> bool:
        """One pass: take the regions named, warm a chunk of each pending one; True when something
        was warmed."""
        pending, upto_of = self._pending, self._upto
        for r in self._regions():
            pending[id(r[0])] = r
        did = False
        for key, (mm, start, target) in list(pending.items()):
            prev = upto_of.get(key)
            upto = start if prev is None or prev[0]() is not mm else max(start, prev[1])
            if upto >= target:
                del pending[key]
                continue
            end = min(target, upto + self.chunk)
            with self._lock:
                if self._stop.is_set():
                    return False
                try:
                    self._populate(mm, upto, end)  # False without MADV_POPULATE_WRITE: WILLNEED then
                except (ValueError, BufferError, RmqError):
                    end = target  # the map went away under us: nothing to warm there
            upto_of[key] = (weakref.ref(mm), end)
            did = True
        if len(upto_of) > self._prune_at:  # forget maps closed or gone (amortised: the limit doubles)
            self._upto = {k: v for k, v in upto_of.items() if k in pending or _live(v[0])}
            self._prune_at = max(64, 2 * len(self._upto))
        return did

    def _run(self) -> None:
        idle = self.IDLE_MIN
        progress = self._progress
        while not self._stop.is_set():
            if self._step():
                idle = self.IDLE_MIN
                continue
            if progress is not None:
                at = self._notify.load64(progress, 0)
                self._notify.wait_reach(progress, 0, at + self._step_bytes, self.IDLE_MAX, self._cancel,
                                        self.IDLE_MIN)
                continue
            self._stop.wait(idle)
            idle = min(idle * 2, self.IDLE_POLL_MAX)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No map is in use here meanwhile (for a caller about to unmap files)."""
        with self._lock:
            yield

    def stop(self) -> None:
        self._stop.set()
        self._cancel[0] = 1
        self._thread.join()
