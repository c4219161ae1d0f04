# Included by dispatch.pyx: the files a Dispatcher binds, each a C struct the run loop reads without
# the GIL, with the functions that bind, release and write it: the consume-queue files (found by topic
# and queue id in an open-addressing table), the last index file and the writer's hint ring.


cdef bint _is_i64_format(const char *f):
    """``l`` or ``q`` (with itemsize 8: a native int64), the formats ``_array_shape`` accepts."""
    if f == NULL:
        return True  # PyBUF_FORMAT not honoured means unsigned bytes; itemsize 8 then rules them out
    return (f[0] == b'l' or f[0] == b'q') and f[1] == 0


cdef int _i64_buffer(object o, Py_buffer *v, int ndim, bint writable, str name) except -1:
    """Export ``o`` into ``v`` as a C-contiguous int64 array of ``ndim`` dimensions (ValueError
    otherwise, with nothing held)."""
    cdef int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (PyBUF_WRITABLE if writable else 0)
    try:
        _get_buffer(o, v, flags)
    except (TypeError, BufferError):
        raise ValueError(f"{name} must be a {ndim}-D C-contiguous int64 array, not {type(o).__name__}") from None
    if v.ndim != ndim or v.itemsize != 8 or not _is_i64_format(v.format):
        PyBuffer_Release(v)
        raise ValueError(f"{name} must be a {ndim}-D C-contiguous int64 array")
    return 0


cdef int _realloc(void **p, size_t size) except -1:
    """``p[0] = realloc(p[0], size)``; MemoryError (``p[0]`` unchanged) when that fails."""
    cdef void *q = realloc(p[0], size)
    if q == NULL:
        raise MemoryError()
    p[0] = q
    return 0


# -- the consume queues ------------------------------------------------------------------------------

cdef struct cq_slot:
    unsigned char *buf
    int64_t file_from
    int64_t file_size
    int64_t wrote
    int64_t max_phys
    unsigned char *topic
    int64_t topic_len
    int64_t queue_id
    int bound
    int touched
    int64_t seen  # wrote as moved() last reported it (-1: not yet)
    int64_t npos  # its wake slot in the notify buffer (-1: none)
    int pend  # got units since the last announcement


cdef struct _Queues:
    cq_slot *slots
    Py_buffer *views  # views[s] is exported while slots[s].bound
    int64_t nslots, cap
    int64_t *table  # tcap (a power of two) slot numbers by hash, -1 free: linear probing
    int64_t tcap
    int64_t *touched  # slots written since touched() last listed them
    int64_t ntouched
    int64_t *pend  # slots with units not yet announced
    int64_t npend
    Py_buffer nview  # the notify buffer (set_notify), exported while nbuf points into it
    unsigned char *nbuf
    Py_ssize_t nlen


cdef extern from *:
    """
    #include <string.h>
    /* the first 8 and last 8 bytes of t[0, n) as words (zero-padded when n < 8): O(1) per topic */
    static inline uint64_t rmq_slot_hash(const unsigned char *t, int64_t n, int64_t qid) {
        uint64_t a = 0, b = 0, h;
        if (n >= 8) {
            memcpy(&a, t, 8);
            memcpy(&b, t + n - 8, 8);
        } else if (n > 0) {
            memcpy(&a, t, (size_t)n);
        }
        h = (a ^ ((uint64_t)n << 56)) * 0x9E3779B97F4A7C15ULL;
        h = (h ^ (h >> 31) ^ b) * 0xBF58476D1CE4E5B9ULL;
        h ^= (uint64_t)qid * 0x94D049BB133111EBULL;
        return h ^ (h >> 29);
    }
    /* a[0, n) == b[0, n) for short n, inline (a libc call costs more than the compare) */
    static inline int rmq_same_topic(const unsigned char *a, const unsigned char *b, int64_t n) {
        uint64_t x, y;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y)
                return 0;
        }
        for (; i < n; i++)
            if (a[i] != b[i])
                return 0;
        return 1;
    }
    """
    uint64_t _slot_hash "rmq_slot_hash"(const unsigned char *t, int64_t n, int64_t qid) noexcept nogil
    int rmq_same_topic(const unsigned char *a, const unsigned char *b, int64_t n) noexcept nogil


cdef inline int64_t _q_find(const _Queues *q, const unsigned char *t, int64_t n, int64_t qid) noexcept nogil:
    """The slot of queue ``(t[0, n), qid)``, or -1."""
    cdef uint64_t mask, h
    cdef int64_t s
    if q.tcap == 0:
        return -1
    mask = <uint64_t>q.tcap - 1
    h = _slot_hash(t, n, qid) & mask
    while True:
        s = q.table[h]
        if s < 0:
            return -1
        if (q.slots[s].queue_id == qid and q.slots[s].topic_len == n
                and rmq_same_topic(q.slots[s].topic, t, n)):
            return s
        h = (h + 1) & mask


cdef void _q_insert(_Queues *q, int64_t s) noexcept:
    cdef uint64_t mask = <uint64_t>q.tcap - 1
    cdef uint64_t h = _slot_hash(q.slots[s].topic, q.slots[s].topic_len, q.slots[s].queue_id) & mask
    while q.table[h] >= 0:
        h = (h + 1) & mask
    q.table[h] = s


cdef int _q_grow(_Queues *q) except -1:
    """Room for twice the slots (16 at first), the table rebuilt at twice that."""
    cdef int64_t i, cap = max(16, q.cap * 2), tcap = cap * 2
    _realloc(<void **>&q.slots, cap * sizeof(cq_slot))
    _realloc(<void **>&q.views, cap * sizeof(Py_buffer))
    _realloc(<void **>&q.touched, cap * sizeof(int64_t))
    _realloc(<void **>&q.pend, cap * sizeof(int64_t))
    cdef int64_t *tb = <int64_t *>malloc(tcap * sizeof(int64_t))
    if tb == NULL:
        raise MemoryError()
    free(q.table)
    q.table = tb
    q.tcap = tcap
    q.cap = cap
    for i in range(tcap):
        tb[i] = -1
    for i in range(q.nslots):  # rehash
        _q_insert(q, i)
    return 0


cdef int64_t _q_slot(_Queues *q, bytes topic, int64_t queue_id) except -1:
    """The slot of queue ``(topic, queue_id)``, added (unbound) when it has none yet."""
    cdef int64_t n = len(topic), s
    cdef const unsigned char *t = <const unsigned char *>(<char *>topic)
    s = _q_find(q, t, n, queue_id)
    if s >= 0:
        return s
    if q.nslots == q.cap:
        _q_grow(q)
    s = q.nslots
    q.slots[s].topic = <unsigned char *>malloc(n + 1)
    if q.slots[s].topic == NULL:
        raise MemoryError()
    memcpy(q.slots[s].topic, t, <size_t>n)
    q.slots[s].topic_len = n
    q.slots[s].queue_id = queue_id
    q.slots[s].bound = 0
    q.slots[s].touched = 0
    q.slots[s].pend = 0
    q.nslots += 1
    _q_insert(q, s)
    return s


cdef int _q_bind(_Queues *q, int64_t s, object buffer, int64_t file_from, int64_t wrote, int64_t max_phys,
                 int64_t notify_pos) except -1:
    """Bind slot ``s`` to its writable file ``buffer`` (None: unbind it); see Dispatcher.bind_queue."""
    cdef cq_slot *sl = &q.slots[s]
    cdef Py_buffer *v = &q.views[s]
    if sl.bound:
        PyBuffer_Release(v)
        sl.bound = 0
    sl.npos = notify_pos
    if buffer is None:
        return 0
    _get_buffer(buffer, v, PyBUF_WRITABLE)
    if wrote < 0 or wrote > v.len or wrote % 20:
        PyBuffer_Release(v)
        raise ValueError(f"write position {wrote} does not fit a consume-queue file of {v.len} bytes")
    sl.bound = 1
    sl.seen = -1
    sl.buf = <unsigned char *>v.buf
    sl.file_from = file_from
    sl.file_size = v.len
    sl.wrote = wrote
    sl.max_phys = max_phys
    return 0


cdef void _q_release(_Queues *q) noexcept:
    """Let go of every bound file."""
    cdef int64_t i
    for i in range(q.nslots):
        if q.slots[i].bound:
            PyBuffer_Release(&q.views[i])
            q.slots[i].bound = 0


cdef void _q_free(_Queues *q) noexcept:
    """Free the table (after _q_release and set_notify(None))."""
    cdef int64_t i
    for i in range(q.nslots):
        free(q.slots[i].topic)
    free(q.slots)
    free(q.views)
    free(q.table)
    free(q.touched)
    free(q.pend)


cdef inline int _q_put_unit(_Queues *q, int64_t s, int64_t phys, int64_t size, int64_t tags,
                            int64_t qoff) noexcept nogil:
    """ConsumeQueue.putMessagePositionInfo for bound slot ``s``: RMQ_STOP_NONE when the unit is in
    (or was before), RMQ_STOP_QUEUE when its file is full, RMQ_STOP_SPECIAL when the queue offset is
    ahead of the file (RocketMQ writes it where the file is, with a warning: the general path)."""
    cdef cq_slot *sl = &q.slots[s]
    cdef int64_t expected, current
    if phys + size <= sl.max_phys:
        return RMQ_STOP_NONE
    if sl.wrote >= sl.file_size:
        return RMQ_STOP_QUEUE
    expected = qoff * 20
    current = sl.file_from + sl.wrote
    if expected == current:
        rmq_cq_publish_unit(sl.buf + sl.wrote, phys, <int32_t>size, tags)
        sl.wrote += 20
        sl.max_phys = phys + size
        if not sl.touched:
            sl.touched = 1
            q.touched[q.ntouched] = s
            q.ntouched += 1
        if not sl.pend and sl.npos >= 0:
            sl.pend = 1
            q.pend[q.npend] = s
            q.npend += 1
    elif expected == 0 or expected > current:
        return RMQ_STOP_SPECIAL
    # else: built before (expected < current): nothing to write
    return RMQ_STOP_NONE


cdef int _q_set_notify(_Queues *q, object buffer) except -1:
    """See Dispatcher.set_notify."""
    cdef Py_buffer v
    if buffer is not None:
        _get_buffer(buffer, &v, PyBUF_WRITABLE)
        if (<size_t>v.buf) % 8:  # wake slots are bumped as one 64-bit word (rmq_notify_bump)
            PyBuffer_Release(&v)
            raise ValueError("the notify buffer must be 8-aligned")
    if q.nbuf != NULL:
        q.nbuf = NULL
        q.nlen = 0
        PyBuffer_Release(&q.nview)
    if buffer is not None:
        q.nview = v
        q.nbuf = <unsigned char *>v.buf
        q.nlen = v.len
    return 0


cdef void _q_announce(_Queues *q) noexcept nogil:
    """Bump the wake slot of each queue that got units since the last call (after the units)."""
    cdef int64_t i, s, p
    for i in range(q.npend):
        s = q.pend[i]
        q.slots[s].pend = 0
        p = q.slots[s].npos
        if q.nbuf != NULL and 0 <= p and p + 8 <= q.nlen:
            rmq_notify_bump(q.nbuf + p)
    q.npend = 0


cdef list _q_touched(_Queues *q):
    """See Dispatcher.touched."""
    cdef int64_t i, s
    out = []
    for i in range(q.ntouched):
        s = q.touched[i]
        q.slots[s].touched = 0
        out.append((q.slots[s].topic[:q.slots[s].topic_len], q.slots[s].queue_id, q.slots[s].wrote,
                    q.slots[s].max_phys))
    q.ntouched = 0
    return out


cdef list _q_moved(_Queues *q):
    """See Dispatcher.moved."""
    cdef int64_t i, w
    out = []
    for i in range(q.nslots):
        if q.slots[i].bound:
            w = q.slots[i].wrote
            if w != q.slots[i].seen:
                q.slots[i].seen = w
                out.append((q.slots[i].topic[:q.slots[i].topic_len], q.slots[i].queue_id, w))
    return out


# -- the last index file -----------------------------------------------------------------------------

cdef struct _Index:
    Py_buffer view  # exported while bound
    int bound
    uint32_t slots, entries


cdef void _ix_release(_Index *x) noexcept:
    if x.bound:
        PyBuffer_Release(&x.view)
        x.bound = 0


cdef int _ix_bind(_Index *x, object buffer, int64_t slot_count, int64_t max_entries) except -1:
    """See Dispatcher.bind_index."""
    _ix_release(x)
    if buffer is None:
        return 0
    if not (1 <= slot_count <= 0x7FFFFFFF and 1 <= max_entries <= 0x7FFFFFFF):
        raise ValueError(f"bad index geometry: {slot_count} slots, {max_entries} entries")
    _get_buffer(buffer, &x.view, PyBUF_WRITABLE)
    if x.view.len < 40 + 4 * slot_count + 20 * max_entries:
        PyBuffer_Release(&x.view)
        raise ValueError("the index buffer is shorter than its geometry")
    x.bound = 1
    x.slots, x.entries = <uint32_t>slot_count, <uint32_t>max_entries
    return 0


cdef inline void _ix_prefetch(const _Index *x, const int64_t *keys, int64_t n) noexcept nogil:
    """Prefetch the hash slots of ``n`` key hashes (random accesses into a table larger than the
    caches), while the records before theirs are applied."""
    cdef int64_t k
    for k in range(n):
        rmq_prefetch_w(<unsigned char *>x.view.buf + 40 + 4 * (<uint32_t><int32_t>keys[k] % x.slots))


cdef inline int64_t _ix_put_keys(_Index *x, int64_t phys, int64_t ts, int64_t tran, const int64_t *keys,
                                 int64_t k0, int64_t kn) noexcept nogil:
    """IndexService.buildIndex for keys ``k0 ..< kn`` of the record at CommitLog offset ``phys``:
    -1 when they are in (or need not be: a rollback record, or one the file already covers), else
    the key to resume at once a new last file is bound (0 when none is bound)."""
    cdef unsigned char *ib
    cdef int64_t ic, k
    if not x.bound:
        return 0
    ib = <unsigned char *>x.view.buf
    ic = rmq_load_be32s(ib + 36)
    if ic <= 0:
        ic = 1
    if ic >= x.entries:
        return k0
    if tran != 0xC and phys >= rmq_load_be64s(ib + 24):
        for k in range(k0, kn):
            if not rmq_index_put(ib, x.slots, x.entries, <int32_t>keys[k], phys, ts):
                return k
    return -1


# -- the writer's hint ring --------------------------------------------------------------------------

cdef struct _Hints:
    Py_buffer ring_view  # with head_view, exported while ring is not NULL
    Py_buffer head_view
    const int64_t *ring
    const int64_t *head
    int64_t at  # the next hint number to look at
    int64_t cap  # records a batch takes from hints: small after a stop, doubling back to CHUNK


cdef int _hints_set(_Hints *h, object ring, object head) except -1:
    """See Dispatcher.set_hints."""
    cdef Py_buffer rv, hv
    if (ring is None) != (head is None):
        raise ValueError("ring and head go together")
    if ring is not None:
        _i64_buffer(ring, &rv, 2, False, "ring")
        if rv.shape[0] != RMQ_HINT_CAPACITY or rv.shape[1] != RMQ_HINT_FIELDS or (<size_t>rv.buf) % 8:
            PyBuffer_Release(&rv)
            raise ValueError(f"ring must be int64[{RMQ_HINT_CAPACITY}, {RMQ_HINT_FIELDS}]")
        try:
            _i64_buffer(head, &hv, 1, False, "head")
        except BaseException:
            PyBuffer_Release(&rv)
            raise
        if hv.shape[0] < 1 or (<size_t>hv.buf) % 8:
            PyBuffer_Release(&hv)
            PyBuffer_Release(&rv)
            raise ValueError("head must be an aligned int64[1]")
    if h.ring != NULL:
        h.ring = h.head = NULL
        PyBuffer_Release(&h.ring_view)
        PyBuffer_Release(&h.head_view)
    h.at = 0
    if ring is not None:
        h.ring_view, h.head_view = rv, hv
        h.ring, h.head = <const int64_t *>rv.buf, <const int64_t *>hv.buf
    return 0
