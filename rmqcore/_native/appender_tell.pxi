# Included by appender.pyx: whom an append tells of its records (the Appender's ``_tell``): the reput
# thread, through its wake slot while a reader waits (``set_wake``), and a publishing Dispatcher, which
# dispatches them in the put itself (``set_publisher``, ``dispatch="put"``).

from cpython.pycapsule cimport PyCapsule_GetPointer

cdef extern from "rmq_notify.h" nogil:
    # after a new end is published: wake the reput thread if it flagged itself asleep on ``slot``
    # and a reader waits (``waits`` nonzero; NULL: always)
    void rmq_notify_poke_wanted(unsigned char *slot, const uint32_t *waits)

# the C hook of a native Dispatcher (dispatch_publish.pxi): records [pos, end) of the CommitLog file
# at file_from, mapped at buf (n bytes), are complete
ctypedef int64_t (*publish_fn)(object, const unsigned char *, int64_t, int64_t, int64_t, int64_t) except -2


cdef class _Tell:
    cdef Py_buffer _wake_view  # held while wake points into it
    cdef unsigned char *wake
    cdef Py_buffer _waits_view  # held while waits points into it
    cdef const uint32_t *waits
    cdef object pub  # the Dispatcher (held while pub_fn may be called with it) ...
    cdef publish_fn pub_fn  # ... its C hook
    cdef object fallback  # ... and what a put calls when the hook declines

    def __cinit__(self):
        self.wake = NULL
        self.waits = NULL
        self.pub_fn = NULL

    def __dealloc__(self):
        self.drop_wake()

    cdef int set_wake(self, object wake, object waits) except -1:
        """See ``Appender.set_wake`` (the pure twin)."""
        cdef Py_buffer view, wview
        if wake is None and waits is not None:
            raise ValueError("waits without a wake slot")
        if wake is not None:
            _u32_words(wake, &view, 2, PyBUF_WRITABLE, "wake must be a writable, 8-aligned uint32[2]")
            if (<size_t>view.buf) % 8:  # rmq_notify_bump swaps both words at once
                PyBuffer_Release(&view)
                raise ValueError("wake must be a writable, 8-aligned uint32[2]")
        if waits is not None:
            try:
                _u32_words(waits, &wview, 1, 0, "waits must be a uint32[1]")
            except BaseException:
                PyBuffer_Release(&view)
                raise
        self.drop_wake()
        if wake is not None:
            self._wake_view = view
            self.wake = <unsigned char *>view.buf
        if waits is not None:
            self._waits_view = wview
            self.waits = <const uint32_t *>wview.buf
        return 0

    cdef void drop_wake(self) noexcept:
        if self.waits != NULL:
            self.waits = NULL
            PyBuffer_Release(&self._waits_view)
        if self.wake != NULL:
            self.wake = NULL
            PyBuffer_Release(&self._wake_view)

    cdef int set_publisher(self, object dispatcher, object fallback) except -1:
        """See ``Appender.set_publisher`` (the pure twin)."""
        cdef void *fn
        if dispatcher is None:
            self.pub_fn, self.pub, self.fallback = NULL, None, None
            return 0
        if not callable(fallback):
            raise TypeError("fallback must be callable")
        fn = PyCapsule_GetPointer(dispatcher.publisher(), b"rmqcore.dispatch.publish")
        self.pub_fn, self.pub, self.fallback = <publish_fn>fn, dispatcher, fallback
        return 0

    cdef int64_t appended(self, const unsigned char *buf, int64_t n, int64_t file_from, int64_t pos,
                          int64_t end) except -2:
        """Records [pos, end) are appended and their end published (under the Appender's lock, with
        the GIL: records are published in the order they were appended). The publisher's answer
        (1 without one)."""
        if self.wake != NULL:
            rmq_notify_poke_wanted(self.wake, self.waits)
        if self.pub_fn == NULL:
            return 1
        return self.pub_fn(self.pub, buf, n, file_from, pos, end)

    cdef int declined(self, int64_t r) except -1:
        """After the lock is let go: a declined publish leaves the records to the store's dispatch."""
        if r < 0:
            fallback = self.fallback
            if fallback is not None:
                fallback()
        return 0
