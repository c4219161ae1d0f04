# The store's lifecycle gate (gate.pyx); keylookup's LookupFront cimports it to enter and leave
# without a Python call.
from libc.stdint cimport int64_t


cdef class Gate:
    cdef int64_t _inflight
    cdef bint _sealed
    cdef object _message
    cdef int enter_c(self) except -1
    cdef inline void leave_c(self) noexcept:
        self._inflight -= 1
