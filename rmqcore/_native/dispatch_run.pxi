# Included by dispatch.pyx: the Dispatcher, which owns what dispatch_bind.pxi binds and
# dispatch_handoff.pxi shares, and its run loop; the segment index rule it applies per record.

cdef struct _Seg:
    # the segment index (Kafka's LogSegment rule) a run carries on: seg[0:9] of Dispatcher.run
    int64_t count, end, since, max_t, omax, mono, floor, interval, last_t


cdef inline void _seg_load(_Seg *g, const int64_t *seg) noexcept nogil:
    g.count, g.end, g.since, g.max_t, g.omax = seg[0], seg[1], seg[2], seg[3], seg[4]
    g.mono, g.floor, g.interval, g.last_t = seg[5], seg[6], seg[7], seg[8]


cdef inline void _seg_store(const _Seg *g, int64_t *seg) noexcept nogil:
    seg[0], seg[1], seg[2], seg[3], seg[4] = g.count, g.end, g.since, g.max_t, g.omax
    seg[5], seg[6], seg[7], seg[8] = g.mono, g.floor, g.interval, g.last_t


cdef inline int _seg_step(_Seg *g, int64_t rpos, int64_t size, int64_t ts, int64_t *so, int64_t seg_cap,
                          int64_t *nseg) noexcept nogil:
    """The record at ``rpos`` (past the segment index's end): an entry into ``so`` (4 rows of
    ``seg_cap``) before it when the bytes since the last entry exceed the interval. 1, with nothing
    changed, when ``so`` is full."""
    cdef int64_t i = nseg[0]
    if i == seg_cap:
        return 1
    if ts < g.max_t or ts < g.floor:
        g.mono = 0
    if ts > g.max_t:
        g.max_t, g.omax = ts, g.count
    if g.since > g.interval:
        so[0 * seg_cap + i] = g.count
        so[1 * seg_cap + i] = rpos
        if g.max_t > g.last_t:
            so[2 * seg_cap + i] = g.max_t
            so[3 * seg_cap + i] = g.omax
            g.last_t = g.max_t
        else:
            so[2 * seg_cap + i] = -1
            so[3 * seg_cap + i] = -1
        nseg[0] = i + 1
        g.since = 0
    g.since += size
    g.count += 1
    g.end = rpos + size
    return 0


cdef struct _RunOut:
    # what one run did (Dispatcher.run returns it as a DispatchRun)
    int64_t done, at, status, stop, a, b, c, d, max_ts, nseg


cdef class Dispatcher:
    """The consume-queue, index and segment-index writes of dispatch for a run of CommitLog records,
    in one call without the GIL (the pure twin documents the contract)."""

    cdef _Queues _q  # the bound consume queues (and the notify buffer)
    cdef _Index _ix  # the last index file
    cdef _Hints _hints  # the writer's hint ring
    cdef _Handoff _h  # GIL hand-off words, wake slot, naps
    cdef _Pub _p  # publish-on-put (arm)
    cdef int64_t *_cols  # scratch of one scan: CHUNK records' columns, dispatch rows, key hashes
    cdef int64_t *_disp
    cdef int64_t *_keys
    cdef readonly int64_t hinted  # records dispatched from hints, in all
    # a run and a nap in progress: they use the scratch, the bindings and the hand-off words
    # without the GIL, so nothing else may change them meanwhile (_idle; a nap only the words)
    cdef int _running
    cdef int _napping

    def __cinit__(self):
        memset(&self._q, 0, sizeof(_Queues))
        memset(&self._ix, 0, sizeof(_Index))
        memset(&self._hints, 0, sizeof(_Hints))
        memset(&self._h, 0, sizeof(_Handoff))
        memset(&self._p, 0, sizeof(_Pub))
        self._hints.cap = CHUNK
        self.hinted = 0
        self._cols = <int64_t *>malloc(NCOLUMNS * CHUNK * sizeof(int64_t))
        self._disp = <int64_t *>malloc(4 * CHUNK * sizeof(int64_t))
        self._keys = <int64_t *>malloc(KEYS_CAP * sizeof(int64_t))
        if self._cols == NULL or self._disp == NULL or self._keys == NULL:
            raise MemoryError()

    def __dealloc__(self):
        _pub_release(&self._p)
        self.set_signals(None, None)
        self.set_hints(None, None)
        self.set_notify(None)
        self.set_wake(None)
        self.release()
        _q_free(&self._q)
        free(self._cols)
        free(self._disp)
        free(self._keys)

    cdef int _idle(self, bint nap_too) except -1:
        """Raise unless no run (nor, with ``nap_too``, a nap) is in progress on another thread."""
        if self._running:
            raise dispatcher_busy("run")
        if nap_too and self._napping:
            raise dispatcher_busy("nap")
        return 0

    # -- bindings (with the GIL; the store calls these under its dispatch lock) --------------------
    def bind_queue(self, bytes topic not None, int64_t queue_id, buffer, int64_t file_from, int64_t wrote,
                   int64_t max_phys, int64_t notify_pos=-1):
        """Bind (or rebind) queue ``(topic, queue_id)`` to its writable file ``buffer`` (mapped at
        ``file_from``, written up to ``wrote``; units up to CommitLog offset ``max_phys`` are in),
        announcing its units at wake slot ``notify_pos`` of the notify buffer (-1: nowhere).
        ``buffer`` None unbinds it. Returns the slot number."""
        if notify_pos != -1 and (notify_pos < 0 or notify_pos % 8):
            raise ValueError(f"notify position {notify_pos} is not a wake slot")
        self._idle(False)
        cdef int64_t s = _q_slot(&self._q, topic, queue_id)
        _q_bind(&self._q, s, buffer, file_from, wrote, max_phys, notify_pos)
        return s

    def set_notify(self, buffer):
        """Announce units in ``buffer`` (the notify file's writable map; None: nowhere): after each
        run of records, the wake slot of every queue that got units is bumped (csrc/rmq_notify.h)."""
        self._idle(False)
        _q_set_notify(&self._q, buffer)

    def set_wake(self, wake):
        """Nap on ``wake`` (uint32[2], the wake slot the writer's ``Appender.set_wake`` pokes; None:
        plain sleeps): a live run caught up with the writer, and ``nap`` between runs, sleep until
        the writer publishes more (or the nap's time passes), instead of for the whole time."""
        self._idle(True)
        _h_wake(&self._h, wake)

    def bind_index(self, buffer, int64_t slot_count, int64_t max_entries):
        """Bind the last (writable) index file, or None for none."""
        self._idle(False)
        _ix_bind(&self._ix, buffer, slot_count, max_entries)

    def set_signals(self, request, wanted):
        """Share two int64[1] words with the threads around a live run (either may be None).

        ``request``, with the writers (``Appender.set_gil_request``): a live run (and a ``nap``)
        writes a new nonzero number there just before it leaves its nogil code and needs the GIL.
        A writer that saw the number waits without the GIL until it changes (2 ms at most), so
        the GIL goes to this thread rather than back to the writer; then it queues for the GIL as
        any thread does. A ``nap`` writes 0 once it holds the GIL; a live run leaves the number
        there until the next run starts (which writes 0) or the caller writes 0 itself, so the
        Python work between runs (binding new consume-queue and index files, all file calls that
        let the GIL go) does not wait out the switch interval, 5 ms, each time it takes the GIL
        back from a busy writer (the reput thread would fall far behind a put loop). The
        writer's wait is bounded short (2 ms) so that a put never waits out a file creation or
        a lock wait of this thread with the GIL free (bench/bench_store.py measures both).
        ``wanted``: nonzero while another thread waits to dispatch (the store's dispatch lock) or
        for the reput thread to stop (close). A live run that has caught up with the writer naps
        without the GIL (``live_nap``) for the writer to go on, and returns instead when this is
        nonzero; ``nap`` does not sleep then."""
        self._idle(True)
        _h_signals(&self._h, request, wanted)

    def set_hints(self, ring, head):
        """Read the dispatch hints of the writer's ``Appender`` (its ``hints`` ring and ``hint_head``
        word; None, None: none). A run without CRC checks takes each record it has a hint for from
        the hint, checked against the record's header, instead of parsing it (csrc/rmq_hints.h)."""
        self._idle(False)
        _hints_set(&self._hints, ring, head)

    def live_nap(self, int64_t nap_ns, int64_t max_idle_ns):
        """How a live run that has caught up with the writer waits for more: naps of ``nap_ns``
        without the GIL, for at most ``max_idle_ns`` in a row (0: return at once, as before)."""
        if nap_ns < 0 or max_idle_ns < 0:
            raise ValueError("nap times must be >= 0")
        self._h.nap_ns, self._h.nap_max_ns = nap_ns, (max_idle_ns if nap_ns > 0 else 0)

    def nap(self, double seconds, int wake_fd=-1, live=None, int64_t seen=-1):
        """Sleep without the GIL (the reput thread between runs) for ``seconds``, or until
        ``wake_fd`` (the read end of a pipe; -1: none) is readable, or not at all while ``wanted``
        is set (see ``set_signals``); then, like the end of a live run, ask the writers for the
        GIL: a sleeping thread that wakes up behind a busy writer would otherwise wait out the
        5 ms switch interval. With a wake slot (``set_wake``) and ``live`` (the appender's int64[1]
        end, ``seen`` where dispatch stands), the nap waits on the slot instead and ends as soon as
        the writer publishes past ``seen`` (the store's close pokes the slot too)."""
        if self._napping:  # two naps would share the hand-off words (a run may go on meanwhile)
            raise dispatcher_busy("nap")
        self._napping = 1
        try:
            _h_nap(&self._h, seconds, wake_fd, live, seen)
        finally:
            self._napping = 0

    def release(self):
        """Let go of every bound buffer (before any of them is unmapped)."""
        self._idle(False)
        _q_release(&self._q)
        _ix_release(&self._ix)

    def touched(self):
        """``[(topic, queue_id, wrote, max_phys)]`` of the queues written since the last call."""
        return _q_touched(&self._q)

    def moved(self):
        """``[(topic, queue_id, wrote)]`` of the bound queues whose write position moved since the
        last call (or that were bound since): another thread may be in a run moving them on, and
        each ``wrote`` is one the queue held (read for warm-ahead; an idle store lists nothing)."""
        return _q_moved(&self._q)

    # -- publish-on-put (see the pure twin) ----------------------------------------------------------
    def arm(self, int64_t file_from, int64_t pos, bint index_on, seg, seg_out):
        """See the pure twin. ``seg`` and ``seg_out`` stay exported until ``disarm``."""
        cdef _Pub *p = &self._p
        if p.state != PUB_OFF:
            raise ValueError("the dispatcher is armed already (disarm first)")
        if pos < file_from:
            raise ValueError(f"position {pos} before the file at {file_from}")
        _i64_buffer(seg, &p.seg_view, 1, True, "seg")
        try:
            _i64_buffer(seg_out, &p.out_view, 2, True, "seg_out")
        except BaseException:
            PyBuffer_Release(&p.seg_view)
            raise
        if p.seg_view.shape[0] < SEG_FIELDS or p.out_view.shape[0] < 4:
            PyBuffer_Release(&p.out_view)
            PyBuffer_Release(&p.seg_view)
            raise ValueError(f"seg needs {SEG_FIELDS} fields and seg_out 4 rows")
        p.seg, p.seg_len = <int64_t *>p.seg_view.buf, p.seg_view.shape[0]
        p.so, p.seg_cap = <int64_t *>p.out_view.buf, p.out_view.shape[1]
        p.file_from, p.pos, p.index_on = file_from, pos, index_on
        p.nseg, p.max_ts, p.stop, p.arg = 0, -1, RMQ_STOP_NONE, 0
        p.state = PUB_ARMED

    def disarm(self):
        """See the pure twin."""
        cdef _Pub *p = &self._p
        if p.state == PUB_OFF:
            return None
        out = (p.pos, p.nseg, p.max_ts, p.stop, p.arg)
        _pub_release(p)
        return out

    @property
    def published(self):
        """Where the records before are dispatched, as far as publishes know (-1: not armed)."""
        return self._p.pos if self._p.state != PUB_OFF else -1

    def publish(self, buf, int64_t file_from, int64_t pos, int64_t end):
        """See the pure twin (the native Appender calls the C behind this, ``publisher``)."""
        cdef Py_buffer bv
        _get_buffer(buf, &bv, PyBUF_SIMPLE)
        try:
            return self._publish(<const unsigned char *>bv.buf, bv.len, file_from, pos, end)
        finally:
            PyBuffer_Release(&bv)

    def publisher(self):
        """A capsule of the C function ``Appender.set_publisher`` calls after each append."""
        return PyCapsule_New(<void *>_publish_hook, b"rmqcore.dispatch.publish", NULL)

    cdef int64_t _publish(self, const unsigned char *base, int64_t n, int64_t file_from, int64_t pos,
                          int64_t end) except -2:
        cdef _Pub *p = &self._p
        cdef int64_t g = file_from + pos, interval
        cdef _RunOut o
        if p.state != PUB_ARMED or file_from != p.file_from:
            return -1
        if g != p.pos:
            return 0 if file_from + end <= p.pos else -1
        if pos < 0 or end < pos or end > n:
            raise ValueError(f"range [{pos}, {end}) outside a buffer of {n} bytes")
        self._idle(False)  # (a publish is a run of the records appended, with the GIL held)
        # room for every entry the records may make: one at most per record, and per interval bytes
        interval = p.seg[7] if p.seg[7] > RMQ_MIN_RECORD_SIZE else RMQ_MIN_RECORD_SIZE
        if p.seg[9] != 0 and p.nseg + (end - pos) // interval + 1 > p.seg_cap:
            p.state, p.stop, p.arg = PUB_DECLINED, RMQ_STOP_SEG, 0
            return -1
        self._loop(base, n, file_from, pos, end, False, p.index_on, 0, p.seg, p.seg_len, p.so, 4, p.seg_cap,
                   NULL, 0, 0, p.nseg, True, &o)
        p.nseg = o.nseg
        if o.max_ts > p.max_ts:
            p.max_ts = o.max_ts
        if file_from + o.at > p.pos:
            p.pos = file_from + o.at
        if o.stop != RMQ_STOP_NONE or o.at < end:
            p.state, p.stop, p.arg = PUB_DECLINED, o.stop, o.a
            return -1
        return 1

    # -- the run --------------------------------------------------------------------------------
    def run(self, buf, int64_t file_from, int64_t pos, int64_t limit, bint verify_crc, bint index_on,
            int64_t first_key, seg, seg_out, live=None, int64_t live_cap=0):
        """See the pure twin. Returns a ``DispatchRun`` (rmqcore.kernel_results).

        ``buf`` is any bytes-like object; ``seg`` (10 fields), ``seg_out`` (4 rows) and ``live`` (1
        field) are C-contiguous int64 arrays, the first two writable. Each is exported once for the
        call (a plain buffer export: typed memoryviews cost more per call, which a dispatch of
        one record would pay on every put-then-read)."""
        cdef Py_buffer bv, sv, ov, lv
        cdef int held = 0
        cdef _RunOut o
        self._idle(False)
        self._running = 1
        try:
            _get_buffer(buf, &bv, PyBUF_SIMPLE)
            held = 1
            _i64_buffer(seg, &sv, 1, True, "seg")
            held = 2
            _i64_buffer(seg_out, &ov, 2, True, "seg_out")
            held = 3
            if live is not None:
                _i64_buffer(live, &lv, 1, False, "live")
                held = 4
            self._loop(<const unsigned char *>bv.buf, bv.len, file_from, pos, limit, verify_crc, index_on,
                       first_key, <int64_t *>sv.buf, sv.shape[0], <int64_t *>ov.buf, ov.shape[0], ov.shape[1],
                       <const int64_t *>lv.buf if held == 4 else NULL, lv.shape[0] if held == 4 else 0,
                       live_cap, 0, False, &o)
            return tuple.__new__(DispatchRun,
                                 (o.done, o.at, o.status, o.stop, o.a, o.b, o.c, o.d, o.max_ts, o.nseg))
        finally:
            self._running = 0
            if held >= 4:
                PyBuffer_Release(&lv)
            if held >= 3:
                PyBuffer_Release(&ov)
            if held >= 2:
                PyBuffer_Release(&sv)
            if held >= 1:
                PyBuffer_Release(&bv)

    cdef int _loop(self, const unsigned char *base, int64_t n, int64_t file_from, int64_t pos, int64_t limit,
                   bint verify_crc, bint index_on, int64_t first_key, int64_t *seg, int64_t seg_len,
                   int64_t *so, int64_t so_rows, int64_t seg_cap, const int64_t *lp, int64_t live_len,
                   int64_t live_cap, int64_t nseg0, bint keep_gil, _RunOut *o) except -1:
        cdef int64_t cnt, end_pos, nkeys, j, rpos, size, phys, sysf, tran, qid, tags, ts, r
        cdef int64_t done = 0, at = pos, stop = RMQ_STOP_NONE, a = 0, b = 0, c = 0, d = 0, max_ts = -1
        cdef int64_t s, tlen, last_s = -1, last_qid = -1
        cdef int st = 0
        cdef int64_t *cols = self._cols
        cdef int64_t *disp = self._disp
        cdef int64_t *keys = self._keys
        cdef _Queues *q = &self._q
        cdef _Index *ix = &self._ix
        cdef _Hints *hn = &self._hints
        cdef _Handoff *h = &self._h
        cdef int64_t nseg = nseg0  # entries already in so (a publish appends after them)
        cdef int seg_on
        cdef _Seg g
        cdef _Follow fw
        cdef int64_t *gr
        cdef int64_t next_hint = -1, parse_cap, hint_from, from_hints
        cdef PyThreadState *tstate = NULL
        cdef const int64_t *ring = hn.ring if not verify_crc else NULL
        if pos < 0 or limit < pos or limit > n:
            raise ValueError(f"range [{pos}, {limit}) outside a buffer of {n} bytes")
        if lp != NULL and live_len < 1:
            raise ValueError("live must hold one int64")
        if seg_len < SEG_FIELDS or so_rows < 4:
            raise ValueError(f"seg needs {SEG_FIELDS} fields and seg_out 4 rows")
        seg_on = seg[9] != 0
        _seg_load(&g, seg)
        gr = h.req if lp != NULL else NULL
        if gr != NULL:
            rmq_publish_i64(gr, 0)  # leaving the GIL: the writers may take it again
        fw.prev_full, fw.prev_t, fw.idle = limit, rmq_notify_now_ns(), 0
        # the GIL goes for a live run (it may nap) and for more than a few records; a run of one
        # or two (a put, then a read that dispatches it) keeps it: handing it to another thread and
        # waiting to get it back would cost more than the run
        # (the body below is nogil code: it calls no Python and raises nothing)
        # (a publish keeps it whatever the length: nothing may run beside it, see arm)
        if not keep_gil and (lp != NULL or limit - at > GIL_KEEP_BYTES):
            tstate = PyEval_SaveThread()
        while stop == RMQ_STOP_NONE:
            if at >= limit:
                # a live run follows the writer: records completed since the call began
                if lp != NULL and _follow(&fw, h, lp, file_from, n, live_cap, &limit):
                    continue
                break
            cnt = 0
            parse_cap = CHUNK
            hint_from = hn.at
            from_hints = 0
            if ring != NULL:  # records the writer left hints for need no parsing
                # hint_from: the first record's hint, where a stop looks again
                cnt = rmq_dispatch_hinted(ring, rmq_observe_i64(hn.head), &hn.at, base, file_from, at, limit,
                                          hn.cap, cols, CHUNK, disp, CHUNK, keys, &end_pos, &nkeys, &next_hint,
                                          &hint_from)
                if cnt > 0:
                    st = RMQ_ST_MSG
                    from_hints = 1
                elif next_hint >= 0:
                    # hints resume at next_hint: parse up to about there (records of 512 bytes or more)
                    parse_cap = min(CHUNK, max(1, (next_hint - file_from - at) // 512))
            if cnt == 0:
                st = rmq_dispatch_batch(base, at, limit, verify_crc, parse_cap, cols, CHUNK, 1, disp, CHUNK, 1,
                                        keys, 1, KEYS_CAP, &cnt, &end_pos, &nkeys)
            if st == RMQ_DISPATCH_E_KEYS:
                # more keys than the scratch holds: the general path
                stop, a, st = RMQ_STOP_SPECIAL, RMQ_SPECIAL_KEYS, RMQ_ST_MSG
                break
            for j in range(cnt):
                if index_on and ix.bound and j + 6 < cnt:  # the next records' index slots
                    _ix_prefetch(ix, keys + disp[RMQ_D_KEYS_START * CHUNK + j + 6],
                                 disp[RMQ_D_KEYS_COUNT * CHUNK + j + 6])
                rpos = cols[RMQ_C_POSITION * CHUNK + j]
                size = cols[RMQ_C_SIZE * CHUNK + j]
                phys = file_from + rpos
                sysf = cols[RMQ_C_SYS_FLAG * CHUNK + j]
                tran = sysf & 0xC
                ts = cols[RMQ_C_STORE_TIMESTAMP * CHUNK + j]
                if disp[RMQ_D_FLAGS * CHUNK + j] & 3:
                    # delay topic (tagsCode = delivery time) or invalid UTF-8: the general path
                    stop, a = RMQ_STOP_SPECIAL, RMQ_SPECIAL_FLAGS
                    break
                tags = disp[RMQ_D_TAGS_CODE * CHUNK + j]
                # consume queue: NOT_TYPE and COMMIT records get a unit
                if tran == 0 or tran == 0x8:
                    qid = cols[RMQ_C_QUEUE_ID * CHUNK + j]
                    tlen = cols[RMQ_C_TOPIC_LEN * CHUNK + j]
                    # a run of records to one queue (a batch) finds its slot once
                    if (last_s >= 0 and qid == last_qid and tlen == q.slots[last_s].topic_len
                            and rmq_same_topic(base + cols[RMQ_C_TOPIC_POS * CHUNK + j], q.slots[last_s].topic,
                                               tlen)):
                        s = last_s
                    else:
                        s = _q_find(q, base + cols[RMQ_C_TOPIC_POS * CHUNK + j], tlen, qid)
                        last_s, last_qid = s, qid
                    if s < 0 or not q.slots[s].bound:
                        r = RMQ_STOP_QUEUE
                    else:
                        r = _q_put_unit(q, s, phys, size, tags, cols[RMQ_C_QUEUE_OFFSET * CHUNK + j])
                    if r == RMQ_STOP_QUEUE:  # a queue to bind, or its next file
                        stop, a, b, c = RMQ_STOP_QUEUE, cols[RMQ_C_TOPIC_POS * CHUNK + j], tlen, qid
                        d = cols[RMQ_C_QUEUE_OFFSET * CHUNK + j]
                        break
                    if r == RMQ_STOP_SPECIAL:
                        stop, a = RMQ_STOP_SPECIAL, RMQ_SPECIAL_QUEUE_POS
                        break
                # index: the last file first (getAndCreateLastIndexFile), then the keys
                if index_on:
                    r = _ix_put_keys(ix, phys, ts, tran, keys + disp[RMQ_D_KEYS_START * CHUNK + j],
                                     first_key if rpos == pos else 0, disp[RMQ_D_KEYS_COUNT * CHUNK + j])
                    if r >= 0:
                        stop, a = RMQ_STOP_INDEX, r
                        break
                # segment index (Kafka's LogSegment rule), for records past its end
                if seg_on and rpos >= g.end and _seg_step(&g, rpos, size, ts, so, seg_cap, &nseg):
                    stop = RMQ_STOP_SEG
                    break
                if ts > max_ts:
                    max_ts = ts
                done += 1
                self.hinted += from_hints
                at = rpos + size
            if q.npend:  # readers waiting on these queues (any process) may go on
                _q_announce(q)
            if stop != RMQ_STOP_NONE:
                hn.at = hint_from  # records from the stop on are not done: look again
                # and take few from hints next time (a store that binds a queue for every
                # record, each one's first, read thousands of hints to use one)
                hn.cap = HINT_CAP_MIN
                break
            if from_hints and hn.cap < CHUNK:
                hn.cap = min(CHUNK, 2 * hn.cap)
            at = end_pos
            if st != RMQ_ST_MSG and not (st == RMQ_ST_END and lp != NULL and at >= limit):
                break
        if gr != NULL:  # about to wait for the GIL: ask the writers to hand it over (until the next run)
            _h_ask_gil(h, gr)
        if tstate != NULL:
            PyEval_RestoreThread(tstate)
        _seg_store(&g, seg)
        if stop == RMQ_STOP_NONE and st == RMQ_ST_MSG:
            st = RMQ_ST_END if at >= limit else st
        o.done, o.at, o.status, o.stop, o.a, o.b, o.c, o.d = done, at, st, stop, a, b, c, d
        o.max_ts, o.nseg = max_ts, nseg
        return 0
