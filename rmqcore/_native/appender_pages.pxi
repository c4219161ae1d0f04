# Included by appender.pyx: page-level work on a mapped file for its owners (MappedFile, the WarmAhead
# thread, the index files), with the GIL released: fault pages in ahead of the writer, sync a range.

cdef extern from "<sys/mman.h>" nogil:
    int madvise(void *addr, size_t length, int advice)
    int msync(void *addr, size_t length, int flags)
    enum: MADV_WILLNEED
    enum: MS_SYNC

cdef extern from "<errno.h>" nogil:
    int errno

DEF MADV_POPULATE_WRITE_ = 23  # Linux >= 5.14
# madvise and msync take page-aligned addresses: 4 KiB on x86, 16 KiB on Apple silicon
cdef size_t _PAGE = _mmap.PAGESIZE


def prefault(mm, start, end):
    """Fault the pages of ``mm[start:end]`` in for writing (MADV_POPULATE_WRITE), GIL released.

    Falls back to MADV_WILLNEED where the kernel lacks it. Returns True when pages were populated.
    Only for regions nothing reads or writes yet (the next file, or beyond the write position).
    """
    cdef Py_buffer view
    cdef Py_ssize_t s = start, e = end
    cdef size_t page = _PAGE
    cdef char *base
    cdef char *p
    cdef size_t n
    cdef int rc
    PyObject_GetBuffer(mm, &view, PyBUF_WRITABLE)
    try:
        if s < 0 or e > view.len or s > e:
            raise ValueError("prefault range outside the buffer")
        base = <char *>view.buf
        p = base + (s - s % page)
        n = <size_t>(e - (s - s % page))
        with nogil:
            rc = madvise(p, n, MADV_POPULATE_WRITE_)
            if rc != 0:
                madvise(p, n, MADV_WILLNEED)
        return rc == 0
    finally:
        PyBuffer_Release(&view)


def sync_range(mm, start, end):
    """Make bytes ``[start, end)`` of the mapped file durable: msync(MS_SYNC) of that range (on
    Linux vfs_fsync_range: write-back of the range, then the journal and device flush fdatasync
    would do), with the GIL released. Pages outside the range are left alone: a whole-file
    fdatasync also wrote back the pages pre-faulted past the write position and took 100+ ms
    while a producer kept writing. Raises OSError."""
    cdef Py_buffer view
    cdef Py_ssize_t s = start, e = end
    cdef size_t page = _PAGE
    cdef char *p
    cdef size_t n
    cdef int rc = 0, err = 0
    if s >= e:
        return
    PyObject_GetBuffer(mm, &view, PyBUF_SIMPLE)
    try:
        if s < 0 or e > view.len:
            raise ValueError("sync range outside the buffer")
        p = <char *>view.buf + (s - s % page)
        n = <size_t>(e - (s - s % page))
        with nogil:
            rc = msync(p, n, MS_SYNC)
            if rc != 0:
                err = errno
        if rc != 0:
            raise OSError(err, os.strerror(err))
    finally:
        PyBuffer_Release(&view)
