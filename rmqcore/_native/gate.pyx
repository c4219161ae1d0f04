# cython: language_level=3
"""The lifecycle gate of a store, native twin of ``rmqcore._pure.gate`` (see it for the contract).

Every count changes with the GIL held and no Python code in between, so entering is a check and an
increment (LookupFront does both inline, through ``gate.pxd``)."""
from libc.stdint cimport int64_t

import time

from ..errors import StoreClosedError

__all__ = ["Gate"]


cdef class Gate:
    def __init__(self, str closed_message):
        self._message = closed_message
        self._inflight = 0
        self._sealed = False

    cdef int enter_c(self) except -1:
        if self._sealed:
            raise StoreClosedError(self._message)
        self._inflight += 1
        return 0

    def enter(self):
        self.enter_c()

    def leave(self):
        self.leave_c()

    def __enter__(self):
        self.enter_c()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.leave_c()

    def seal(self):
        self._sealed = True

    def unseal(self):
        self._sealed = False

    @property
    def sealed(self):
        return self._sealed

    @property
    def inflight(self):
        return self._inflight

    def wait_idle(self):
        cdef double nap = 0.00005
        while self._inflight > 0:
            time.sleep(nap)
            nap = min(nap * 2, 0.005)
