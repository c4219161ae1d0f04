# cython: language_level=3
"""SYNC_FLUSH group commit without the GIL: native twin of ``rmqcore._pure.groupcommit`` (see it for
the contract). The flusher loop, the waits and the wake-ups are C (``csrc/rmq_groupcommit.c``):
``run()`` and ``wait_durable()`` release the GIL for their whole duration, so a flush never waits
for the interpreter and a producer takes the GIL only to return. With a ``sync`` function (an
injected file layer) the flusher takes the GIL for each sync call only."""
import errno
import os

from libc.stdint cimport int64_t
from ._core cimport rmq_capi_import

rmq_capi_import()  # the C core's functions (csrc/rmq_capi.h), before any call

__all__ = ["GroupCommit"]

cdef extern from "rmq_groupcommit.h" nogil:
    ctypedef struct rmq_gc:
        pass
    ctypedef int (*rmq_gc_sync_fn)(void *ctx, int64_t file_from, int64_t lo, int64_t hi)
    rmq_gc *rmq_gc_new(const int64_t *live, int64_t durable)
    void rmq_gc_set_sync(rmq_gc *g, rmq_gc_sync_fn fn, void *ctx)
    void rmq_gc_free(rmq_gc *g)
    int rmq_gc_add_file(rmq_gc *g, int fd, int64_t file_from, int64_t file_size)
    void rmq_gc_request(rmq_gc *g, int64_t offset)
    int rmq_gc_wait(rmq_gc *g, int64_t offset, int64_t timeout_ms)
    int rmq_gc_run(rmq_gc *g)
    void rmq_gc_stop(rmq_gc *g)
    int64_t rmq_gc_durable(const rmq_gc *g)
    int64_t rmq_gc_flushes(const rmq_gc *g)
    int rmq_gc_error(const rmq_gc *g)


cdef int _sync_through(void *ctx, int64_t file_from, int64_t lo, int64_t hi) noexcept nogil:
    """rmq_gc_sync_fn calling the GroupCommit's ``sync`` (the flusher thread holds a reference to it)."""
    with gil:
        return (<GroupCommit>ctx)._call_sync(file_from, lo, hi)


cdef class GroupCommit:
    cdef rmq_gc *_g
    cdef object _live  # keeps the appender's published-end array alive while the C side reads it
    cdef object _sync  # sync(file_from, lo, hi), or None: msync/fdatasync in C
    cdef object _sync_error  # what the last failed call of _sync raised
    cdef bint _running
    cdef bint _ran
    cdef bint _closed
    cdef int _waiters  # threads inside rmq_gc_wait (counted with the GIL held): close() frees after them
    cdef int64_t _closed_durable, _closed_flushes

    def __cinit__(self, live, int64_t durable, sync=None):
        if live.dtype.str != "<i8" or live.shape != (1,) or not live.flags.c_contiguous:
            raise ValueError("live must be a contiguous int64[1] array")
        if sync is not None and not callable(sync):
            raise TypeError("sync must be callable or None")
        self._live = live
        self._g = rmq_gc_new(<const int64_t *><size_t>live.ctypes.data, durable)
        if self._g == NULL:
            raise MemoryError("cannot create the group commit service")
        self._sync = sync
        if sync is not None:
            rmq_gc_set_sync(self._g, _sync_through, <void *>self)

    cdef int _call_sync(self, int64_t file_from, int64_t lo, int64_t hi) noexcept:
        try:
            self._sync(file_from, lo, hi)
        except BaseException as e:  # kept: every waiter raises it, as the twin does
            self._sync_error = e
            return e.errno if isinstance(e, OSError) and e.errno else errno.EIO
        return 0

    cdef object _failure(self, int err):
        return self._sync_error if self._sync_error is not None else OSError(
            err, f"fdatasync failed: {os.strerror(err)}")

    def __dealloc__(self):
        if self._g != NULL and not self._running:
            rmq_gc_free(self._g)
            self._g = NULL

    def close(self):
        """Give back the duplicated descriptors and maps (after ``stop()`` and the end of ``run()``);
        afterwards the service answers from what was durable when it closed. A producer still
        returning from a wait (woken by ``stop()``) frees them as it leaves."""
        if self._running:
            raise RuntimeError("close() while run() is running: stop() and join first")
        if self._closed:
            return
        self._closed_durable = rmq_gc_durable(self._g)
        self._closed_flushes = rmq_gc_flushes(self._g)
        self._closed = True
        rmq_gc_stop(self._g)
        self._free_if_idle()

    cdef void _free_if_idle(self) noexcept:
        if self._closed and self._waiters == 0 and self._g != NULL:
            rmq_gc_free(self._g)
            self._g = NULL

    def add_file(self, int fd, int64_t file_from, int64_t file_size, mapped=None):
        if self._closed:
            raise ValueError("the group commit service is closed")
        cdef int rc = rmq_gc_add_file(self._g, fd, file_from, file_size)
        if rc < 0:
            raise OSError(-rc, os.strerror(-rc))

    def request(self, int64_t offset):
        if not self._closed:
            rmq_gc_request(self._g, offset)

    def wait_durable(self, int64_t offset, int64_t timeout_ms):
        cdef int rc
        if self._closed:
            return self._closed_durable >= offset
        if rmq_gc_durable(self._g) >= offset:
            return True
        self._waiters += 1
        try:
            with nogil:
                rc = rmq_gc_wait(self._g, offset, timeout_ms)
        finally:
            self._waiters -= 1
            self._free_if_idle()
        if rc < 0:
            raise self._failure(-rc)
        return rc == 1

    @property
    def durable_offset(self):
        return self._closed_durable if self._closed else rmq_gc_durable(self._g)

    @property
    def flushes(self):
        return self._closed_flushes if self._closed else rmq_gc_flushes(self._g)

    @property
    def error(self):
        if self._closed:
            return None
        cdef int e = rmq_gc_error(self._g)
        return None if e == 0 else self._failure(e)

    def run(self):
        cdef int rc
        if self._ran or self._closed:
            raise RuntimeError("run() may be called once, before close()")
        self._ran = self._running = True
        try:
            with nogil:
                rc = rmq_gc_run(self._g)
        finally:
            self._running = False
        return rc == 0

    def stop(self):
        if not self._closed:
            rmq_gc_stop(self._g)
