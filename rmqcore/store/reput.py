"""The reput thread (RocketMQ's ReputMessageService): dispatch what the writer puts, as it is put.

``ReputService`` owns the thread, its stop event, the wake slot it naps on and the error it keeps
while a full disk (or no free descriptor) holds dispatch up. The wake slot is in the notify file: a
put pokes it while a reader in any process waits, and so does a wait about to sleep (and close);
with nobody waiting a put wakes no thread, and the thread dispatches on its timed naps (a reader
that wants its own writes dispatches them itself). What a step dispatches, and the lock and GIL
hand-off words it shares with the writers, are the ``Dispatch`` room's (``Dispatch.step``).
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DiskFullError, RmqError, StoreClosedError, TooManyOpenFilesError

if TYPE_CHECKING:
    from ..live.notifyfile import NotifyFile
    from .dispatch import Dispatch

__all__ = ["ReputService"]

_LIVE_NAP_NS = 50_000  # a live run caught up with the writer looks again after this long ...
_LIVE_IDLE_NS = 4_000_000  # ... for this long at most, then returns


class ReputService:
    """The reput thread of one store (see the module). ``start`` once; ``stop`` once, at close."""

    def __init__(self, dispatch: Dispatch, appender: Any, notify: NotifyFile) -> None:
        self._dispatch, self._appender = dispatch, appender
        self.error: RmqError | None = None  # kept while dispatch waits out a full disk; None once it goes on
        self._stop = threading.Event()
        d = dispatch.dispatcher
        # the reput thread asks the writers for the GIL through this word (Appender.set_gil_request)
        appender.set_gil_request(dispatch.gil_request)
        d.set_signals(dispatch.gil_request, dispatch.lock_wanted)
        # caught up with a busy writer, a run naps for more instead of returning for the GIL
        d.live_nap(_LIVE_NAP_NS, _LIVE_IDLE_NS)
        # between runs it naps on this slot: a put pokes it while a reader waits, and so does a
        # wait about to sleep, and close: it dispatches (and the reader wakes) as soon as a put is
        # published
        self.wake_slot: np.ndarray[Any, Any] | None
        self.wake_slot, waits = notify.reput_wake()
        appender.set_wake(self.wake_slot, waits)
        d.set_wake(self.wake_slot)
        self.thread = threading.Thread(target=self._loop, name="rmqcore-reput", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        """Dispatch what was put, in bounded steps (readers that dispatch for themselves wait on the
        same lock), napping 1 ms (up to 16 ms while idle) when there is nothing to do."""
        idle = 0.001
        backoff = 0.01
        dispatch, nap, live = self._dispatch, self._dispatch.dispatcher.nap, self._appender.live
        try:
            while not self._stop.is_set():
                seen = int(live[0])  # a put after this ends the nap below at once
                try:
                    done = dispatch.step() if dispatch.lag > 0 else 0  # nothing new: no dispatch call
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
                    nap(idle, -1, live, seen)
                    idle = min(idle * 2, 0.016)  # an idle store costs ~60 wake-ups a second
                else:
                    idle = 0.001
        except StoreClosedError:
            return
        except RmqError as e:  # the next dispatch on a caller's thread meets it again and raises
            self.error = e
            return

    def stop(self) -> None:
        """End the thread after its run (a nap ends at once) and let go of the signals and the slot."""
        self._stop.set()
        with self._dispatch.wanting():  # a live run's nap for the writer ends now, and a nap between runs
            if self.thread.ident is not None:
                self.thread.join()
        d = self._dispatch.dispatcher
        self._appender.set_gil_request(None)
        self._appender.set_wake(None)
        d.set_signals(None, None)
        d.set_wake(None)
        self.wake_slot = None  # nothing exports the notify file's map any more
