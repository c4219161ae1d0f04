# Included by dispatch.pyx: how a live run and the reput thread's naps share the processor with the
# writers: the GIL request and "wanted" words, the writer's wake slot, the naps, and following a
# writer that is still appending. Dispatcher.set_signals documents the protocol.

cdef struct _Handoff:
    Py_buffer req_view  # exported while req points into it
    int64_t *req  # the GIL request word shared with the writers
    int64_t seq  # the last number written there
    Py_buffer wanted_view  # exported while wanted points into it
    const int64_t *wanted
    Py_buffer wake_view  # exported while wake points into it
    unsigned char *wake  # the writer's wake slot (uint32[2])
    int64_t nap_ns, nap_max_ns  # live_nap


cdef inline void _h_ask_gil(_Handoff *h, int64_t *req) noexcept nogil:
    """About to wait for the GIL: ask the writers to hand it over (a new nonzero number in ``req``)."""
    h.seq += 1
    rmq_publish_i64(req, h.seq)


cdef int _h_signals(_Handoff *h, object request, object wanted) except -1:
    """See Dispatcher.set_signals."""
    cdef Py_buffer rv, wv
    cdef bint has_r = False
    try:
        if request is not None:
            _get_buffer(request, &rv, PyBUF_WRITABLE | PyBUF_FORMAT)
            has_r = True
            if rv.len < 8 or rv.itemsize != 8 or (<size_t>rv.buf) % 8 != 0:
                raise ValueError("request must be an aligned, writable int64[1]")
        if wanted is not None:
            _get_buffer(wanted, &wv, PyBUF_FORMAT)
            if wv.len < 8 or wv.itemsize != 8 or (<size_t>wv.buf) % 8 != 0:
                PyBuffer_Release(&wv)
                raise ValueError("wanted must be an aligned int64[1]")
    except BaseException:
        if has_r:
            PyBuffer_Release(&rv)
        raise
    if h.req != NULL:
        h.req = NULL
        PyBuffer_Release(&h.req_view)
    if h.wanted != NULL:
        h.wanted = NULL
        PyBuffer_Release(&h.wanted_view)
    if request is not None:
        h.req_view = rv
        h.req = <int64_t *>rv.buf
    if wanted is not None:
        h.wanted_view = wv
        h.wanted = <const int64_t *>wv.buf
    return 0


cdef int _h_wake(_Handoff *h, object wake) except -1:
    """See Dispatcher.set_wake."""
    cdef Py_buffer v
    if wake is not None:
        _get_buffer(wake, &v, PyBUF_WRITABLE | PyBUF_FORMAT)
        if v.len != 8 or v.itemsize != 4 or v.format == NULL or v.format[0] not in b"IL" or (<size_t>v.buf) % 4:
            PyBuffer_Release(&v)
            raise ValueError("wake must be a writable uint32[2]")
    if h.wake != NULL:
        h.wake = NULL
        PyBuffer_Release(&h.wake_view)
    if wake is not None:
        h.wake_view = v
        h.wake = <unsigned char *>v.buf
    return 0


cdef int _h_nap(_Handoff *h, double seconds, int wake_fd, object live, int64_t seen) except -1:
    """See Dispatcher.nap."""
    cdef int64_t *gr = h.req
    cdef const int64_t *wp = h.wanted
    cdef int64_t ns
    cdef Py_buffer lv
    cdef const int64_t *lp = NULL
    cdef uint32_t e
    cdef unsigned char *w = h.wake
    if not seconds >= 0:
        raise ValueError(f"nap of {seconds} s")
    ns = <int64_t>(min(seconds, 1e9) * 1e9)
    if live is not None and w != NULL:
        _i64_buffer(live, &lv, 1, False, "live")
        lp = <const int64_t *>lv.buf
    try:
        with nogil:
            if wp == NULL or rmq_observe_i64(wp) == 0:
                if lp != NULL:
                    e = rmq_notify_seq(w)
                    rmq_notify_arm(w)  # flagged before the look: a put after it pokes the slot
                    if rmq_observe_i64(lp) == seen:
                        rmq_notify_wait(w, e, ns, wp, 1, 0)
                else:
                    rmq_nap_fd(ns, wake_fd)
            if gr != NULL:
                _h_ask_gil(h, gr)
    finally:
        if lp != NULL:
            PyBuffer_Release(&lv)
    if gr != NULL:
        rmq_publish_i64(gr, 0)  # got it (see Dispatcher._loop)
    return 0


cdef struct _Follow:
    # a live run following the writer (its int64[1] end ``live``)
    int64_t prev_full  # the writer's end at the last look
    int64_t prev_t  # ... and when (ns)
    int64_t idle  # ns napped in a row without new records


cdef inline int _follow(_Follow *f, const _Handoff *h, const int64_t *live, int64_t file_from, int64_t n,
                        int64_t live_cap, int64_t *limit) noexcept nogil:
    """A live run reached ``limit``: move it on to the records the writer completed since (1), after
    a nap for them (1) when there are none yet; 0 when the run should end (nothing new within the
    naps ``live_nap`` allows, ``live_cap`` reached, or another thread wants the store)."""
    cdef uint32_t wseq = 0
    cdef int64_t wend, t_now, lag, v
    cdef unsigned char *wk = h.wake
    if wk != NULL:
        wseq = rmq_notify_seq(wk)
    wend = rmq_observe_i64(live) - file_from
    # a streaming writer is followed LIVE_LAG behind; a slower one (a paced producer, live consumers
    # waiting) to its end
    t_now = rmq_notify_now_ns()
    lag = LIVE_LAG
    if (wend - f.prev_full) * LIVE_STREAMING < t_now - f.prev_t:
        lag = 0
    f.prev_full, f.prev_t = wend, t_now
    v = wend - lag
    if v > n:
        v = n
    if v > live_cap:
        v = live_cap
    if v > limit[0]:
        limit[0] = v
        f.idle = 0
        return 1
    # caught up: nap for the writer (no GIL needed) unless someone waits to dispatch
    if (f.idle < h.nap_max_ns and limit[0] < live_cap
            and (h.wanted == NULL or rmq_observe_i64(h.wanted) == 0)):
        if wk != NULL and lag == 0:  # until the writer's next put (it pokes the slot), at most nap
            rmq_notify_arm(wk)
            if rmq_observe_i64(live) - file_from == wend:
                rmq_notify_wait(wk, wseq, h.nap_ns, h.wanted, 1, 0)
        else:
            rmq_sleep_ns(h.nap_ns)
        f.idle += h.nap_ns
        return 1
    return 0
