"""The lifecycle gate of a store: pure-Python twin of ``rmqcore._native.gate``.

Each public call of a store (and of its CommitLog) runs inside the gate: ``enter()`` counts it in,
or raises ``StoreClosedError(closed_message)`` once the gate is sealed; ``leave()`` counts it out.
``close()`` seals the gate, waits (``wait_idle``) until every call under way has left, and only
then lets go of files and maps, so no call ever sees a map closed under it and none has to catch
the consequences. ``unseal()`` opens it again (a close that found zero-copy views out).

Calls nest (the count is not per thread); a nested ``enter`` after sealing raises too, which ends
the outer call with the same StoreClosedError.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from ..errors import StoreClosedError
from ..bases import ReadOnly

__all__ = ["Gate"]


class Gate:
    def __init__(self, closed_message: str) -> None:
        self._message = closed_message
        self._lock = threading.Lock()
        self._inflight = 0
        self._sealed = False

    def enter(self) -> None:
        with self._lock:
            if self._sealed:
                raise StoreClosedError(self._message)
            self._inflight += 1

    def leave(self) -> None:
        with self._lock:
            self._inflight -= 1

    def __enter__(self) -> Gate:
        self.enter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.leave()

    def seal(self) -> None:
        self._sealed = True

    def unseal(self) -> None:
        self._sealed = False

    sealed = ReadOnly[bool]("_sealed", "Whether the gate refuses new calls.")
    inflight = ReadOnly[int]("_inflight", "Calls inside the gate now.")

    def wait_idle(self) -> None:
        """Return once no call is inside (sealed first, the count only falls)."""
        nap = 0.00005
        while self._inflight > 0:
            time.sleep(nap)
            nap = min(nap * 2, 0.005)
