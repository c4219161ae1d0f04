# Included by codec.pyx: decoding a record into objects, the MessageExt class, the tuple of
# decode_record and decode_messages (cdef entry points declared in codec.pxd).

# -- MessageExt --------------------------------------------------------------------------------------
# Fields most records of a store share (its magic, its hosts and ports, a topic) come back as one
# object each, the last one made, when the next record's value is the same: immutable ints and
# bytes, so sharing them is invisible, and a decoded message costs fewer allocations. Module
# state, touched with the GIL held only; each entry holds a reference to its object.
DEF _SH_MAGIC = 0
DEF _SH_BORN_PORT = 1
DEF _SH_STORE_PORT = 2
DEF _SH_BORN_ADDR = 3
DEF _SH_STORE_ADDR = 4
DEF _SH_TOPIC = 5
DEF _SH_BYTES_MAX = 128  # longer values are not compared
cdef PyObject *_sh_obj[6]
cdef int64_t _sh_int[3]


cdef inline object _sh_keep(int i, object v):
    Py_INCREF(v)
    Py_XDECREF(_sh_obj[i])
    _sh_obj[i] = <PyObject *>v
    return v


cdef inline object _shared_int(int i, int64_t v):
    if _sh_obj[i] != NULL and _sh_int[i] == v:
        return <object>_sh_obj[i]
    _sh_int[i] = v
    return _sh_keep(i, v)


cdef inline object _shared_bytes(int i, const unsigned char *base, int64_t pos, int64_t n):
    cdef PyObject *got = _sh_obj[i]
    if n > _SH_BYTES_MAX:
        return _bytes_at(base, pos, n)
    if got != NULL and PyBytes_GET_SIZE(<object>got) == n \
            and memcmp(PyBytes_AS_STRING(<object>got), base + pos, <size_t>n) == 0:
        return <object>got
    return _sh_keep(i, PyBytes_FromStringAndSize(<char *>base + pos, n))


# what a MessageExt holds (both twins): its attributes, in the order of the decode_record tuple
# after ``position``; ``_props`` caches the parsed properties
MESSAGE_FIELDS = (
    "position", "size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
    "sys_flag", "born_timestamp", "_born_addr", "_born_port", "store_timestamp", "_store_addr",
    "_store_port", "reconsume_times", "prepared_transaction_offset", "body", "topic_bytes",
    "properties_bytes",
)


cdef class MessageExt:
    """A decoded CommitLog record (MessageExt); the native twin of ``rmqcore._pure.codec.MessageExt``
    (same constructor, attributes, properties and values; ``rmqcore.message.MessageExt`` is this
    class when the native kernels are in use).

    The integer fields are C fields, made into ints when read: a decoded message is one object
    and its bytes, built by ``make_message`` without running Python code. ``position`` is the
    global CommitLog offset the record was read at (``physical_offset`` is the PHYSICALOFFSET
    field stored inside it; the two agree in a healthy store).
    """
    cdef public int64_t position, size, magic, body_crc, queue_id, flag, queue_offset, physical_offset
    cdef public int64_t sys_flag, born_timestamp, _born_port, store_timestamp, _store_port
    cdef public int64_t reconsume_times, prepared_transaction_offset
    cdef public object _born_addr, _store_addr, body, topic_bytes, properties_bytes, _props
    FIELDS = MESSAGE_FIELDS

    def __init__(self, position, raw):
        (
            self.size, self.magic, self.body_crc, self.queue_id, self.flag, self.queue_offset,
            self.physical_offset, self.sys_flag, self.born_timestamp, self._born_addr, self._born_port,
            self.store_timestamp, self._store_addr, self._store_port, self.reconsume_times,
            self.prepared_transaction_offset, self.body, self.topic_bytes, self.properties_bytes,
        ) = raw
        self.position = position
        self._props = None

    @property
    def born_host(self):
        return Host(self._born_addr, self._born_port)

    @property
    def store_host(self):
        return Host(self._store_addr, self._store_port)

    @property
    def topic(self):
        return self.topic_bytes.decode("utf-8", "replace")

    @property
    def properties_string(self):
        """The stored properties string exactly (invalid UTF-8 replaced as Java would)."""
        return self.properties_bytes.decode("utf-8", "replace")

    @property
    def properties(self):
        if self._props is None:
            self._props = parse_properties(self.properties_string)
        return self._props

    @property
    def tags(self):
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self):
        """KEYS split on single spaces, empty tokens dropped (as IndexService indexes them)."""
        k = self.properties.get(PROPERTY_KEYS)
        return [t for t in k.split(KEY_SEPARATOR) if t] if k else []

    @property
    def uniq_key(self):
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def msg_id(self):
        return create_message_id(self._store_addr, self._store_port, self.physical_offset)

    @property
    def compression_type(self):
        from ..compression import compression_type
        return compression_type(self.sys_flag)

    def decompressed_body(self):
        from ..compression import decompress_body
        return decompress_body(self.sys_flag, self.body)

    @property
    def tags_code(self):
        """The consume-queue tags code dispatch computes (delivery time for the delay topic)."""
        return dispatch_tags_code(self.topic, self.properties, self.store_timestamp, _hashing.tags_code)

    @property
    def transaction_type(self):
        return self.sys_flag & TRANSACTION_MASK

    @property
    def version(self):
        return 2 if self.magic == MAGIC_V2 else 1

    def __repr__(self):
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"position={self.position}, size={self.size}, body={len(self.body)} bytes)"
        )


cdef object make_message(object cls, int64_t position, const unsigned char *base, const rmq_record *r):
    """``cls(position, record_tuple(base, r))`` when ``cls`` is MessageExt, built without running
    Python code; None otherwise (the caller builds through the class)."""
    obj = alloc_message(cls)
    if obj is not None:
        fill_message(obj, position, base, r)
    return obj


cdef object alloc_message(object cls):
    """An empty MessageExt when ``cls`` is MessageExt, else None. Allocating may run a garbage
    collection, so Python code (finalizers): callers allocate before they take pointers into
    shared buffers, and fill after."""
    if cls is not MessageExt:
        return None
    return MessageExt.__new__(MessageExt)


cdef int fill_message(object obj, int64_t position, const unsigned char *base, const rmq_record *r) except -1:
    """Set the fields of an ``alloc_message`` instance from the record at ``base``. Makes bytes
    only (no collection runs); a body of 64 KiB or more is copied with the GIL released, so the
    caller holds an export of the buffer ``base`` points into."""
    cdef MessageExt m = <MessageExt>obj
    m.position = position
    m.size = r.size
    m.magic = r.magic
    m.body_crc = r.body_crc
    m.queue_id = r.queue_id
    m.flag = r.flag
    m.queue_offset = r.queue_offset
    m.physical_offset = r.physical_offset
    m.sys_flag = r.sys_flag
    m.born_timestamp = r.born_timestamp
    m._born_addr = _shared_bytes(_SH_BORN_ADDR, base, r.born_host_pos, r.born_addr_len)
    m._born_port = r.born_port
    m.store_timestamp = r.store_timestamp
    m._store_addr = _shared_bytes(_SH_STORE_ADDR, base, r.store_host_pos, r.store_addr_len)
    m._store_port = r.store_port
    m.reconsume_times = r.reconsume_times
    m.prepared_transaction_offset = r.prepared_tx_offset
    m.body = _bytes_at(base, r.body_pos, r.body_len)
    m.topic_bytes = _shared_bytes(_SH_TOPIC, base, r.topic_pos, r.topic_len)
    m.properties_bytes = _bytes_at(base, r.props_pos, r.props_len)
    return 0


cdef tuple record_tuple(const unsigned char *base, const rmq_record *r):
    return (
        r.size, _shared_int(_SH_MAGIC, r.magic), r.body_crc, r.queue_id, r.flag, r.queue_offset,
        r.physical_offset, r.sys_flag, r.born_timestamp,
        _shared_bytes(_SH_BORN_ADDR, base, r.born_host_pos, r.born_addr_len),
        _shared_int(_SH_BORN_PORT, r.born_port), r.store_timestamp,
        _shared_bytes(_SH_STORE_ADDR, base, r.store_host_pos, r.store_addr_len),
        _shared_int(_SH_STORE_PORT, r.store_port), r.reconsume_times, r.prepared_tx_offset,
        _bytes_at(base, r.body_pos, r.body_len), _shared_bytes(_SH_TOPIC, base, r.topic_pos, r.topic_len),
        _bytes_at(base, r.props_pos, r.props_len),
    )


def raise_for_status(status, pos):
    cls, detail = STATUS_ERRORS[status]
    raise cls(detail, pos)


cdef inline bytes _bytes_at(const unsigned char *base, int64_t pos, int64_t n):
    if n >= NOGIL_MIN * 16:  # pre-fault a large mapped range without the GIL before copying it
        with nogil:
            rmq_pretouch(base + pos, <size_t>n)
    return PyBytes_FromStringAndSize(<char *>base + pos, n)


def decode_messages(buf, base, positions, limit, verify_crc, factory):
    """See the pure twin. For MessageExt (this module's) each message is built directly
    (``make_message``), under one export of ``buf``; any other factory is called after it is
    released, on the raw tuples."""
    cdef _In b
    cdef int64_t p, l, size, gbase = base
    cdef rmq_record r
    cdef int st
    cdef bint verify = True if verify_crc else False
    cdef bint direct = True
    cdef Py_ssize_t j
    out = []
    starts = []
    b.held = False
    try:
        _in_buf(&b, buf)
        for pos in positions:
            _check_range(b.len, pos, limit, &p, &l)
            st = _check(b.ptr, p, l, verify, &size, &r)
            if st == RMQ_ST_END or st == RMQ_ST_BLANK:
                break
            if st != RMQ_ST_MSG:
                raise_for_status(st, pos)
            m = make_message(factory, gbase + p, b.ptr, &r)
            if m is None:
                direct = False
                m = record_tuple(b.ptr, &r)
                starts.append(gbase + p)
            out.append(m)
    finally:
        _in_release(&b)
    if not direct:
        for j in range(len(out)):
            out[j] = factory(starts[j], out[j])
    return out, len(out)


def decode_record(buf, pos, limit, verify_crc):
    """Decode the record at ``pos``; None at a BLANK or at the end of the data.

    Returns ``(size, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
    born_timestamp, born_addr, born_port, store_timestamp, store_addr, store_port, reconsume_times,
    prepared_transaction_offset, body, topic, properties)`` with bytes for addresses, body, topic
    and properties. Raises a CorruptionError subclass positioned at ``pos`` for invalid bytes.
    """
    cdef _In b
    cdef int64_t p, l, size
    cdef rmq_record r
    cdef int st
    cdef const unsigned char *base
    b.held = False
    try:
        _in_buf(&b, buf)
        _check_range(b.len, pos, limit, &p, &l)
        base = b.ptr
        st = _check(base, p, l, True if verify_crc else False, &size, &r)
        if st == RMQ_ST_END or st == RMQ_ST_BLANK:
            return None
        if st != RMQ_ST_MSG:
            raise_for_status(st, pos)
        return record_tuple(base, &r)
    finally:
        _in_release(&b)
