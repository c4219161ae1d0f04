# Included by codec.pyx (one extension module; the split is for readers): the encode half, record
# and batch writers and the BLANK filler. Uses codec.pyx's argument helpers and C declarations.


def record_size(body_len, topic_len, properties_len, sys_flag, v2):
    """MessageExtEncoder.calMsgLength: bytes one record takes."""
    cdef int64_t b, t, p, f
    if (PyLong_CheckExact(body_len) and PyLong_CheckExact(topic_len) and PyLong_CheckExact(properties_len)
            and PyLong_CheckExact(sys_flag)):
        if (_idx64(body_len, &b) == 0 and _idx64(topic_len, &t) == 0 and _idx64(properties_len, &p) == 0
                and _idx64(sys_flag, &f) == 0 and -(1 << 60) < b < (1 << 60) and -(1 << 60) < t < (1 << 60)
                and -(1 << 60) < p < (1 << 60)):
            return rmq_record_size(b, t, p, f, 1 if v2 else 0)
    # anything else (huge or non-int values): layout's expression (the pure twin's), its results and errors
    return _record_size_any(body_len, topic_len, properties_len, sys_flag, v2)


cdef inline int _topic_fits(Py_ssize_t n, bint v2) except -1:
    """TOPIC's length field is 1 byte in V1 and 2 in V2; an empty topic is refused."""
    if n == 0 or n > (32767 if v2 else 127):
        raise InvalidMessageError(f"topic of {n} bytes cannot be encoded as {'V2' if v2 else 'V1'}")
    return 0


cdef inline int _props_fit(int64_t n) except -1:
    if n > RMQ_MAX_PROPERTIES_LEN:
        raise PropertiesTooLargeError(f"properties of {n} bytes exceed {RMQ_MAX_PROPERTIES_LEN}")
    return 0


cdef inline int32_t _sys_flag_out(int64_t sf, int ovf, object sys_flag) except? -1:
    """SYSFLAG as stored: ``sf`` (``ovf`` set by _sys_flag_in) when it fits a Java int."""
    if ovf or sf < INT32_MIN or sf > INT32_MAX:
        raise InvalidMessageError(f"sys_flag {sys_flag} does not fit a signed 32-bit int")
    return <int32_t>sf


cdef inline void _point_topic_hosts(rmq_msg *m, const _In *t, const _In *ba, const _In *sa) noexcept:
    """Point ``m``'s TOPIC, BORNHOST and STOREHOSTADDRESS at the held topic and address buffers."""
    m.topic = t.ptr
    m.topic_len = t.len
    m.born_addr = ba.ptr
    m.born_addr_len = <int32_t>ba.len
    m.store_addr = sa.ptr
    m.store_addr_len = <int32_t>sa.len


def encode_record(
    buf,
    pos,
    avail,
    topic,
    queue_id,
    flag,
    queue_offset,
    physical_offset,
    sys_flag,
    born_timestamp,
    born_addr,
    born_port,
    store_timestamp,
    store_addr,
    store_port,
    reconsume_times,
    prepared_transaction_offset,
    body,
    properties,
    v2,
):
    """Write one record at ``buf[pos:]`` (the CRC is computed here; the V6 sysflag bits follow the
    address lengths, as the broker sets them).

    Returns the record size, or ``-size`` without writing anything when ``size + 8 > avail`` (the
    CommitLog then writes a BLANK and rolls). Raises InvalidMessageError for values that cannot be
    encoded and ValueError when ``avail`` exceeds the buffer.
    """
    cdef _In b, t, pr, ba, sa
    cdef _Out o
    cdef rmq_msg m
    cdef int64_t sf, p64, a64, size
    cdef int sf_ovf
    cdef bint is_v2
    cdef unsigned char *dst
    b.held = t.held = pr.held = ba.held = sa.held = False
    o.held = False
    try:
        # same order of checks (and so of exceptions) as the pure twin
        kb = _in_get(&b, body)
        kt = _in_get(&t, topic)
        kp = _in_get(&pr, properties)
        kba = _in_get(&ba, born_addr)
        ksa = _in_get(&sa, store_addr)
        sf_ovf = _sys_flag_in(sys_flag, &sf)
        sf = _host_flags(sf, ba.len, sa.len)
        is_v2 = True if v2 else False
        _topic_fits(t.len, is_v2)
        _props_fit(pr.len)
        _out_get(&o, buf)
        _encode_range(o.len, pos, avail, &p64, &a64)
        size = rmq_record_size(b.len, t.len, pr.len, sf, is_v2)
        if size + RMQ_BLANK_SIZE > a64:
            return -size
        if size > INT32_MAX:
            raise InvalidMessageError(f"a record of {size} bytes does not fit TOTALSIZE")
        m.sys_flag = _sys_flag_out(sf, sf_ovf, sys_flag)
        try:  # one handler maps conversion errors as the twin maps struct.error
            _c32(queue_id, &m.queue_id)
            _c32(flag, &m.flag)
            _c64(queue_offset, &m.queue_offset)
            _c64(physical_offset, &m.physical_offset)
            _c64(born_timestamp, &m.born_timestamp)
            _c32(born_port, &m.born_port)
            _c64(store_timestamp, &m.store_timestamp)
            _c32(store_port, &m.store_port)
            _c32(reconsume_times, &m.reconsume_times)
            _c64(prepared_transaction_offset, &m.prepared_tx_offset)
        except (OverflowError, TypeError) as e:
            raise InvalidMessageError(f"field out of range: {e}") from None
        _need_writable(&o, buf)
        dst = o.ptr + p64
        # a source inside the destination (a view of buf itself) is snapshotted first, as bytes()
        # does in the pure twin
        if _overlaps(dst, size, b.ptr, b.len):
            kb = _in_get(&b, PyBytes_FromStringAndSize(<char *>b.ptr, b.len))
        if _overlaps(dst, size, t.ptr, t.len):
            kt = _in_get(&t, PyBytes_FromStringAndSize(<char *>t.ptr, t.len))
        if _overlaps(dst, size, pr.ptr, pr.len):
            kp = _in_get(&pr, PyBytes_FromStringAndSize(<char *>pr.ptr, pr.len))
        if _overlaps(dst, size, ba.ptr, ba.len):
            kba = _in_get(&ba, PyBytes_FromStringAndSize(<char *>ba.ptr, ba.len))
        if _overlaps(dst, size, sa.ptr, sa.len):
            ksa = _in_get(&sa, PyBytes_FromStringAndSize(<char *>sa.ptr, sa.len))
        _point_topic_hosts(&m, &t, &ba, &sa)
        m.body = b.ptr
        m.body_len = b.len
        m.props = pr.ptr
        m.props_len = pr.len
        m.v2 = is_v2
        if b.len >= NOGIL_MIN:
            with nogil:
                rmq_encode_record_crc(dst, &m, size)
        else:
            rmq_encode_record_crc(dst, &m, size)
        return size
    finally:
        _in_release(&b)
        _in_release(&t)
        _in_release(&pr)
        _in_release(&ba)
        _in_release(&sa)
        _out_release(&o)


cdef struct _Batch:
    # per message: borrowed pointers/lengths, and what keeps each source alive: the tuples the batch
    # was read from (see encode_batch), or a strong reference or a held buffer of its own
    const unsigned char **bodies
    const unsigned char **props
    int64_t *body_lens
    int64_t *props_lens
    int64_t *sizes
    int32_t *flags
    PyObject **refs        # 2 per message (body, props): owned references, or NULL (lazy)
    Py_buffer *views       # 2 per message, for bytearray/memoryview sources (lazy)
    bint *held             # 2 per message
    Py_ssize_t n


cdef void _batch_free(_Batch *bt) noexcept:
    cdef Py_ssize_t i
    if bt.held != NULL:
        for i in range(2 * bt.n):
            if bt.held[i]:
                PyBuffer_Release(&bt.views[i])
    if bt.refs != NULL:
        for i in range(2 * bt.n):
            Py_XDECREF(bt.refs[i])
    free(bt.bodies)
    free(bt.props)
    free(bt.body_lens)
    free(bt.props_lens)
    free(bt.sizes)
    free(bt.flags)
    free(bt.refs)
    free(bt.views)
    free(bt.held)


cdef int _batch_ref(_Batch *bt, Py_ssize_t k, object o) except -1:
    """Keep ``o`` alive until _batch_free (slot ``k``)."""
    if bt.refs == NULL:
        bt.refs = <PyObject **>calloc(2 * bt.n, sizeof(PyObject *))
        if bt.refs == NULL:
            raise MemoryError()
    Py_INCREF(o)
    bt.refs[k] = <PyObject *>o
    return 0


cdef int _batch_item(_Batch *bt, Py_ssize_t k, object o, bint kept, const unsigned char **ptr,
                     int64_t *length) except -1:
    """Borrow the bytes of batch source ``o`` (slot ``k``) until _batch_free; ``kept``: a tuple the
    batch was read from holds ``o`` that long already."""
    if PyBytes_Check(o):
        if not kept:
            _batch_ref(bt, k, o)
        ptr[0] = <const unsigned char *>PyBytes_AS_STRING(o)
        length[0] = PyBytes_GET_SIZE(o)
        return 0
    if not (PyByteArray_Check(o) or isinstance(o, memoryview)):
        raise TypeError("batch bodies and properties must be bytes-like")
    if bt.views == NULL:
        bt.views = <Py_buffer *>calloc(2 * bt.n, sizeof(Py_buffer))
        bt.held = <bint *>calloc(2 * bt.n, sizeof(bint))
        if bt.views == NULL or bt.held == NULL:
            raise MemoryError()
    if _try_get_buffer(o, &bt.views[k], PyBUF_SIMPLE) == 0:
        bt.held[k] = True
        ptr[0] = <const unsigned char *>bt.views[k].buf
        length[0] = bt.views[k].len
        return 0
    PyErr_Clear()
    o = bytes(o)  # a non-contiguous memoryview: copy, as the pure twin's bytes() does
    _batch_ref(bt, k, o)
    ptr[0] = <const unsigned char *>PyBytes_AS_STRING(o)
    length[0] = PyBytes_GET_SIZE(o)
    return 0


cdef object _held_items(object seq):
    """A tuple of ``seq``'s items when it is a list or tuple (None otherwise): what a batch reads
    them from. A list may change while the call runs Python code (an ``__index__``, a sequence's
    ``__getitem__``); the tuple keeps every item it had, so no borrowed pointer outlives its item."""
    if PyTuple_CheckExact(seq):
        return seq
    if PyList_CheckExact(seq):
        return PyList_AsTuple(seq)
    return None


cdef inline object _held_item(object held, Py_ssize_t i):
    """Item ``i`` of a batch's held tuple, or the IndexError ``seq[i]`` raises past its end (a list
    shortened since the batch took its length)."""
    if i >= PyTuple_GET_SIZE(held):
        raise IndexError("list index out of range")
    return <object>PyTuple_GET_ITEM(held, i)


cdef int _batch_flags(_Batch *bt, object flags) except -1:
    cdef Py_ssize_t i, n = bt.n
    cdef const int64_t[::1] f64
    cdef const int32_t[::1] f32
    cdef int64_t v
    if PyObject_CheckBuffer(flags):  # numpy int32/int64 arrays without a Python object per item
        try:
            f64 = flags
        except (ValueError, TypeError, BufferError):
            pass
        else:
            for i in range(n):
                v = f64[i]
                if v < INT32_MIN or v > INT32_MAX:
                    raise InvalidMessageError(f"flag {v} does not fit a signed 32-bit int")
                bt.flags[i] = <int32_t>v
            return 0
        try:
            f32 = flags
        except (ValueError, TypeError, BufferError):
            pass
        else:
            for i in range(n):
                bt.flags[i] = f32[i]
            return 0
    for i in range(n):
        _f32(flags[i], &bt.flags[i], "flag")
    return 0


def encode_batch(
    buf,
    pos,
    avail,
    topic,
    queue_id,
    queue_offset,
    physical_offset,
    sys_flag,
    born_timestamp,
    born_addr,
    born_port,
    store_timestamp,
    store_addr,
    store_port,
    bodies,
    properties,
    flags,
    v2,
    sizes_out,
):
    """Write a batch (MessageExtBatch) as consecutive records at ``buf[pos:]``, all or nothing.

    The contract (per-message fields, ``sizes_out``, the result) is ``rmqcore._pure.codec.encode_batch``'s.
    """
    cdef _In t, ba, sa
    cdef _Out o
    cdef _Batch bt
    cdef rmq_msg m
    cdef Py_ssize_t n, i, tlen
    cdef int64_t sf, p64, a64, total = 0, before_last
    cdef int sf_ovf
    cdef bint is_v2, overlap = False
    cdef unsigned char *dst
    cdef unsigned char *scratch = NULL
    cdef int64_t[::1] so
    cdef object body, props, hb, hp
    cdef PyObject *prev = NULL  # the last message's properties object while hp holds it
    t.held = ba.held = sa.held = False
    o.held = False
    bt.bodies = bt.props = NULL
    bt.body_lens = bt.props_lens = bt.sizes = NULL
    bt.flags = NULL
    bt.refs = NULL
    bt.views = NULL
    bt.held = NULL
    bt.n = 0
    try:
        n = len(bodies)
        if len(properties) != n or (flags is not None and len(flags) != n):
            raise InvalidMessageError("bodies, properties and flags must have the same length")
        if sizes_out is not None and len(sizes_out) < n:
            raise ValueError("sizes_out is shorter than the batch")
        _out_get(&o, buf)
        _encode_range(o.len, pos, avail, &p64, &a64)
        kba = _in_get(&ba, born_addr)
        ksa = _in_get(&sa, store_addr)
        sf_ovf = _sys_flag_in(sys_flag, &sf)
        sf = _host_flags(sf, ba.len, sa.len)
        is_v2 = True if v2 else False
        if n == 0:
            if RMQ_BLANK_SIZE <= a64:
                _need_writable(&o, buf)
            return 0, 0
        tlen = len(topic)  # sized as the pure twin does; the bytes themselves are taken once it fits

        bt.bodies = <const unsigned char **>malloc(n * sizeof(void *))
        bt.props = <const unsigned char **>malloc(n * sizeof(void *))
        bt.body_lens = <int64_t *>malloc(n * sizeof(int64_t))
        bt.props_lens = <int64_t *>malloc(n * sizeof(int64_t))
        bt.sizes = <int64_t *>malloc(n * sizeof(int64_t))
        if (bt.bodies == NULL or bt.props == NULL or bt.body_lens == NULL or bt.props_lens == NULL
                or bt.sizes == NULL):
            raise MemoryError()
        bt.n = n
        hb = _held_items(bodies)
        hp = _held_items(properties)
        for i in range(n):
            body = _held_item(hb, i) if hb is not None else bodies[i]
            props = _held_item(hp, i) if hp is not None else properties[i]
            if <PyObject *>props == prev:  # the message before's object (one for a batch): taken once
                bt.props[i] = bt.props[i - 1]
                bt.props_lens[i] = bt.props_lens[i - 1]
            else:
                if hp is not None:
                    prev = <PyObject *>props  # held by hp: no other object can take its address
                if PyUnicode_CheckExact(props):  # a properties string, stored as UTF-8
                    if PyUnicode_IS_COMPACT_ASCII(props):  # its bytes are the UTF-8: no copy
                        if hp is None:
                            _batch_ref(&bt, 2 * i + 1, props)
                        bt.props[i] = <const unsigned char *>PyUnicode_DATA(props)
                        bt.props_lens[i] = PyUnicode_GET_LENGTH(props)
                    else:
                        try:
                            props = PyUnicode_AsEncodedString(props, "utf-8", NULL)
                        except UnicodeEncodeError:
                            raise InvalidMessageError(
                                "properties hold a lone surrogate: they are not UTF-8 text") from None
                        _batch_item(&bt, 2 * i + 1, props, False, &bt.props[i], &bt.props_lens[i])
                elif PyBytes_Check(props) or PyByteArray_Check(props) or isinstance(props, memoryview):
                    _batch_item(&bt, 2 * i + 1, props, hp is not None, &bt.props[i], &bt.props_lens[i])
                else:
                    raise TypeError("batch bodies must be bytes-like and properties bytes-like or str")
            if not (PyBytes_Check(body) or PyByteArray_Check(body) or isinstance(body, memoryview)):
                raise TypeError("batch bodies must be bytes-like and properties bytes-like or str")
            _batch_item(&bt, 2 * i, body, hb is not None, &bt.bodies[i], &bt.body_lens[i])
            if i and bt.body_lens[i] == bt.body_lens[i - 1] and bt.props_lens[i] == bt.props_lens[i - 1]:
                bt.sizes[i] = bt.sizes[i - 1]  # (its properties fit, as the message before's did)
            else:
                _props_fit(bt.props_lens[i])
                bt.sizes[i] = rmq_record_size(bt.body_lens[i], tlen, bt.props_lens[i], sf, is_v2)
            total += bt.sizes[i]
        if total + RMQ_BLANK_SIZE > a64:
            return 0, -total

        # everything the pure twin would reject while encoding, before a single byte is written
        kt = _in_get(&t, topic)
        if t.len != tlen:
            raise InvalidMessageError(f"topic is not a byte string ({tlen} items, {t.len} bytes)")
        _topic_fits(t.len, is_v2)
        _f32(queue_id, &m.queue_id, "queue_id")
        _f64(queue_offset, &m.queue_offset, "queue_offset")
        _f64(physical_offset, &m.physical_offset, "physical_offset")
        m.sys_flag = _sys_flag_out(sf, sf_ovf, sys_flag)
        _f64(born_timestamp, &m.born_timestamp, "born_timestamp")
        _f32(born_port, &m.born_port, "born_port")
        _f64(store_timestamp, &m.store_timestamp, "store_timestamp")
        _f32(store_port, &m.store_port, "store_port")
        for i in range(n):
            if bt.sizes[i] > INT32_MAX:
                raise InvalidMessageError(f"a record of {bt.sizes[i]} bytes does not fit TOTALSIZE")
        if flags is not None:
            bt.flags = <int32_t *>malloc(n * sizeof(int32_t))
            if bt.flags == NULL:
                raise MemoryError()
            _batch_flags(&bt, flags)
        if m.queue_offset > INT64_MAX - (n - 1):
            raise InvalidMessageError(f"queue offset {queue_offset} + {n - 1} does not fit a long")
        before_last = total - bt.sizes[n - 1]
        if m.physical_offset > INT64_MAX - before_last:
            raise InvalidMessageError(f"physical offset {physical_offset} + {before_last} does not fit a long")
        _need_writable(&o, buf)

        _point_topic_hosts(&m, &t, &ba, &sa)
        m.reconsume_times = 0
        m.prepared_tx_offset = 0
        m.v2 = is_v2
        dst = o.ptr + p64
        # sources inside the destination (views of buf itself): encode into scratch, then copy, as
        # the pure twin does
        overlap = (_overlaps(dst, total, t.ptr, t.len) or _overlaps(dst, total, ba.ptr, ba.len)
                   or _overlaps(dst, total, sa.ptr, sa.len))
        i = 0
        while not overlap and bt.views != NULL and i < n:  # (only a buffer view can lie in buf)
            overlap = (_overlaps(dst, total, bt.bodies[i], bt.body_lens[i])
                       or _overlaps(dst, total, bt.props[i], bt.props_lens[i]))
            i += 1
        if overlap:
            scratch = <unsigned char *>malloc(total)
            if scratch == NULL:
                raise MemoryError()
        if total >= NOGIL_MIN:
            with nogil:
                rmq_encode_batch(scratch if overlap else dst, &m, n, bt.bodies, bt.body_lens, bt.props,
                                 bt.props_lens, bt.flags, bt.sizes)
                if overlap:
                    memcpy(dst, scratch, total)
        else:
            rmq_encode_batch(scratch if overlap else dst, &m, n, bt.bodies, bt.body_lens, bt.props,
                             bt.props_lens, bt.flags, bt.sizes)
            if overlap:
                memcpy(dst, scratch, total)

        if sizes_out is not None:
            try:
                so = sizes_out
            except (ValueError, TypeError, BufferError):
                for i in range(n):
                    sizes_out[i] = bt.sizes[i]
            else:
                for i in range(n):
                    so[i] = bt.sizes[i]
        return n, total
    finally:
        free(scratch)
        _batch_free(&bt)
        _in_release(&t)
        _in_release(&ba)
        _in_release(&sa)
        _out_release(&o)


def encode_blank(buf, pos, remaining):
    """Write the 8-byte BLANK filler (int remaining-to-end-of-file, int BLANK magic) at ``pos``."""
    cdef _Out o
    cdef int64_t p64, r64
    cdef int ovf
    o.held = False
    try:
        _out_get(&o, buf)
        if _idx64(pos, &p64) or p64 < 0 or p64 > o.len - RMQ_BLANK_SIZE:
            raise ValueError("BLANK outside the buffer")
        # the pure twin packs with struct and lets struct.error through: same class here
        try:
            ovf = _idx64(remaining, &r64)
        except TypeError:
            raise _struct.error("required argument is not an integer") from None
        if ovf or r64 < INT32_MIN or r64 > INT32_MAX:
            raise _struct.error(f"'i' format requires {INT32_MIN} <= number <= {INT32_MAX}")
        _need_writable(&o, buf)
        rmq_encode_blank(o.ptr + p64, <int32_t>r64)
    finally:
        _out_release(&o)
