"""The reput thread (RocketMQ's ReputMessageService): dispatch what the writer puts, as it is put.

``ReputService`` owns the thread, its stop event, its wake-up pipe and the wake slot it naps on (in
the notify file: a put pokes it while a reader in any process waits, and so does a wait about to
sleep; nobody waiting, the thread dispatches on its timed naps and puts wake no thread), and the
error it keeps while a full disk (or no free descriptor) holds dispatch up. What one step dispatches is the store's business: the service is given ``step()``
(dispatch a bounded step, following the writer: the GIL hand-off of ``Dispatcher.set_signals``),
``pending()`` (is there anything to dispatch) and ``wanting()`` (a context in which a napping run
returns at once), as the flush services are given their callables.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DiskFullError, RmqError, StoreClosedError, TooManyOpenFilesError, full_disk_is_error

if TYPE_CHECKING:
    from ..live.notifyfile import NotifyFile

__all__ = ["ReputService"]

_LIVE_NAP_NS = 50_000  # a live run caught up with the writer looks again after this long ...
_LIVE_IDLE_NS = 4_000_000  # ... for this long at most, then returns


class ReputService:
    """The reput thread of one store (see the module). ``start`` once; ``stop`` once, at close."""

    def __init__(self, dispatcher: Any, appender: Any, notify: NotifyFile, gil_request: Any, lock_wanted: Any,
                 step: Callable[[], int], pending: Callable[[], bool],
                 wanting: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
        self._dispatcher = dispatcher
        self._appender = appender
        self._notify = notify
        self._step = step
        self._pending = pending
        self._wanting = wanting
        self.error: RmqError | None = None  # kept while dispatch waits out a full disk; None once it goes on
        self._stop = threading.Event()
        # the reput thread asks the writers for the GIL through this word (Appender.set_gil_request)
        appender.set_gil_request(gil_request)
        dispatcher.set_signals(gil_request, lock_wanted)
        # caught up with a busy writer, a run naps for more instead of returning for the GIL
        dispatcher.live_nap(_LIVE_NAP_NS, _LIVE_IDLE_NS)
        self._wake: tuple[int, int] | None = None
        with full_disk_is_error("the reput thread's wake-up pipe"):
            self._wake = os.pipe()  # close writes a byte: the reput thread's nap ends at once
        # ... and pokes this slot, which a put pokes too while the reput thread naps on it and a
        # reader waits: it dispatches (and the reader wakes) as soon as the put is published
        self.wake_slot: np.ndarray[Any, Any] | None
        self.wake_slot, waits = notify.reput_wake()
        appender.set_wake(self.wake_slot, waits)
        dispatcher.set_wake(self.wake_slot)
        self.thread = threading.Thread(target=self._loop, name="rmqcore-reput", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        """Dispatch what was put, in bounded steps (readers that dispatch for themselves wait on the
        same lock), napping 1 ms (up to 16 ms while idle) when there is nothing to do."""
        idle = 0.001
        backoff = 0.01
        wake_r = self._wake[0] if self._wake is not None else -1
        live = self._appender.live
        try:
            while not self._stop.is_set():
                seen = int(live[0])  # a put after this ends the nap below at once
                try:
                    done = self._step() if self._pending() else 0  # nothing new: no dispatch call
                except (DiskFullError, TooManyOpenFilesError) as e:
                    # no space or no descriptor for a new consume-queue or index file: what was
                    # dispatched stays so; wait_dispatched raises this meanwhile, and dispatch goes
                    # on once space (or a descriptor) is back
                    self.error = e
                    if self._stop.wait(backoff):
                        return
                    backoff = min(backoff * 2, 1.0)
                    continue
                if self.error is not None:  # space or a descriptor came back
                    self.error = None
                    backoff = 0.01
                if done == 0:
                    if self._stop.is_set():
                        return
                    # ends with a GIL request, withdrawn once answered
                    self._dispatcher.nap(idle, wake_r, live, seen)
                    idle = min(idle * 2, 0.016)  # an idle store costs ~60 wake-ups a second
                else:
                    idle = 0.001
        except StoreClosedError:
            return
        except RmqError as e:  # the next dispatch on a caller's thread meets it again and raises
            self.error = e
            return

    def stop(self) -> None:
        """End the thread after its run (a nap ends at once) and let go of the pipe and the signals."""
        self._stop.set()
        try:
            with self._wanting():  # a live run's nap for the writer ends now
                if self._wake is not None:
                    os.write(self._wake[1], b"\0")  # and a nap between runs (up to 16 ms)
                    self._notify.wake_reput()
                if self.thread.ident is not None:
                    self.thread.join()
        finally:
            if self._wake is not None:
                for fd in self._wake:
                    os.close(fd)
                self._wake = None
        self._appender.set_gil_request(None)
        self._appender.set_wake(None)
        self._dispatcher.set_signals(None, None)
        self._dispatcher.set_wake(None)
        self.wake_slot = None  # nothing exports the notify file's map any more
