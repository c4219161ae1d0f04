# Included by dispatch.pyx: what a Dispatcher armed for publish-on-put holds (Dispatcher.arm), and the
# C hook the native Appender calls after each append (Dispatcher.publisher).

from cpython.pycapsule cimport PyCapsule_New

cdef struct _Pub:
    int state  # PUB_OFF, PUB_ARMED, or PUB_DECLINED (a publish met a stop: the store takes over)
    int index_on
    int64_t file_from  # the CommitLog file armed
    int64_t pos  # global offset the records before which are dispatched
    int64_t nseg  # segment-index entries in seg_out
    int64_t max_ts  # largest store time published (-1: none)
    int64_t stop, arg  # the stop a declined publish met, and its argument (STOP_INDEX: the key)
    Py_buffer seg_view, out_view  # exported while armed
    int64_t *seg
    int64_t seg_len
    int64_t *so
    int64_t seg_cap

DEF PUB_OFF = 0
DEF PUB_ARMED = 1
DEF PUB_DECLINED = 2


cdef void _pub_release(_Pub *p) noexcept:
    if p.state != PUB_OFF:
        p.state = PUB_OFF
        p.seg = p.so = NULL
        PyBuffer_Release(&p.out_view)
        PyBuffer_Release(&p.seg_view)


cdef int64_t _publish_hook(object d, const unsigned char *base, int64_t n, int64_t file_from, int64_t pos,
                           int64_t end) except -2:
    """What the native Appender calls (with the GIL, under its lock) after it appended [pos, end)."""
    return (<Dispatcher>d)._publish(base, n, file_from, pos, end)
