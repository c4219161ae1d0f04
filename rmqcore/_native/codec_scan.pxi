# Included by codec.pyx: classifying and walking records in place (peek, check, the recovery scan)
# and the columnar batch decode, none of which builds a message object.


def peek_record(buf, pos, limit):
    """Classify what starts at ``pos`` from its first 8 bytes: ``(status, size)``.

    ST_MSG (size = TOTALSIZE, fully inside ``limit``), ST_BLANK (size = declared remaining length),
    ST_END (nothing written: limit reached or zeros), ST_TORN (record runs past ``limit``),
    ST_BAD_MAGIC, ST_BAD_SIZE.
    """
    cdef _In b
    cdef int64_t p, l, size
    cdef int st
    b.held = False
    try:
        _in_buf(&b, buf)
        _check_range(b.len, pos, limit, &p, &l)
        st = rmq_peek_record(b.ptr, p, l, &size)
        return st, size
    finally:
        _in_release(&b)


cdef int _check(const unsigned char *base, int64_t p, int64_t l, bint verify_crc, int64_t *size,
                rmq_record *rec) noexcept:
    """rmq_check_record, with the CRC of a large body computed without the GIL."""
    cdef int st = rmq_check_record(base, p, l, 0, size, rec)
    cdef uint32_t crc
    if st != RMQ_ST_MSG or not verify_crc:
        return st
    if rec.body_len >= NOGIL_MIN:
        with nogil:
            crc = rmq_body_crc(base + rec.body_pos, <size_t>rec.body_len)
    else:
        crc = rmq_body_crc(base + rec.body_pos, <size_t>rec.body_len)
    return RMQ_ST_MSG if crc == <uint32_t>rec.body_crc else RMQ_ST_BAD_CRC


def check_record(buf, pos, limit, verify_crc):
    """Full validation of the record at ``pos`` (checkMessageAndReturnSize): ``(status, size)``."""
    cdef _In b
    cdef int64_t p, l, size
    cdef rmq_record rec
    cdef int st
    b.held = False
    try:
        _in_buf(&b, buf)
        _check_range(b.len, pos, limit, &p, &l)
        st = _check(b.ptr, p, l, True if verify_crc else False, &size, &rec)
        return st, size
    finally:
        _in_release(&b)


cdef inline const unsigned char *_base(const unsigned char[::1] buf) noexcept:
    return &buf[0] if buf.shape[0] > 0 else NULL


def scan_records(const unsigned char[::1] buf, pos, limit, verify_crc, max_records=-1):
    """Walk valid records from ``pos``: ``(status, end_pos, count, last_store_timestamp)``.

    Stops at the first non-record (its status; ``end_pos`` is where it starts) or, with
    ``max_records >= 0``, after that many records (status ST_MSG). ``last_store_timestamp`` is the
    STORETIMESTAMP of the last valid record, or -1 when none. This is recovery's hot loop.
    """
    cdef int64_t p, l, mx, end_pos = 0, count = 0, last_ts = -1
    cdef int st, ovf
    cdef int verify = 1 if verify_crc else 0
    cdef const unsigned char *base = _base(buf)
    _check_range(buf.shape[0], pos, limit, &p, &l)
    ovf = _idx64(max_records, &mx)
    if ovf < 0:
        mx = -1
    with nogil:
        st = rmq_scan_records(base, p, l, verify, mx, &end_pos, &count, &last_ts)
    return st, end_pos, count, last_ts



def decode_batch(const unsigned char[::1] buf, pos, limit, out, verify_crc):
    """Decode consecutive records from ``pos`` into the columns of ``out`` (int64, shape
    ``(NCOLUMNS, capacity)``, C-contiguous; row order = ``layout.COLUMNS``) without Python objects
    per field. Returns ``(count, end_pos, status)``: status ST_MSG when ``out`` filled up, else the
    status of whatever stopped the walk at ``end_pos`` (ST_END, ST_BLANK or an error status).
    """
    cdef int64_t p, l, cap, count = 0, end_pos = 0, rs, cs
    cdef int st
    cdef int verify = 1 if verify_crc else 0
    cdef const unsigned char *base = _base(buf)
    cdef int64_t[:, :] o
    cdef int64_t *optr
    _check_range(buf.shape[0], pos, limit, &p, &l)
    if getattr(out, "ndim", 0) != 2 or out.shape[0] != NCOLUMNS:
        raise ValueError(f"out must be a 2-D array with {NCOLUMNS} rows")
    try:
        o = out
    except (ValueError, TypeError, BufferError):
        # not a writable int64 buffer (another dtype, read-only ...): decode into a scratch array and
        # assign, which gives numpy's own conversions and errors, as the pure twin's item assignment
        import numpy
        tmp = numpy.empty((NCOLUMNS, out.shape[1]), dtype=numpy.int64)
        n, end, status = decode_batch(buf, pos, limit, tmp, verify_crc)
        if n:
            out[:, :n] = tmp[:, :n]
        return n, end, status
    if o.shape[0] != NCOLUMNS:  # the buffer itself (an ndarray subclass's shape attribute may say otherwise)
        raise ValueError(f"out must be a 2-D array with {NCOLUMNS} rows")
    cap = o.shape[1]
    if cap == 0:
        return 0, p, RMQ_ST_MSG
    if o.strides[0] % sizeof(int64_t) or o.strides[1] % sizeof(int64_t):
        raise ValueError("out strides must be multiples of 8 bytes")
    rs = o.strides[0] // <Py_ssize_t>sizeof(int64_t)
    cs = o.strides[1] // <Py_ssize_t>sizeof(int64_t)
    optr = &o[0, 0]
    with nogil:
        st = rmq_decode_batch(base, p, l, verify, optr, rs, cs, cap, &count, &end_pos)
    return count, end_pos, st


def slices(const unsigned char[::1] data not None, positions, lengths):
    """``[bytes(data[p:p + n]) for p, n in zip(positions, lengths)]`` (int64 arrays): a batch's bodies,
    topics or properties as bytes. Every range is checked before any object is made; ValueError
    for a range outside ``data`` or arrays of different lengths."""
    cdef const int64_t[:] p = positions
    cdef const int64_t[:] l = lengths
    cdef Py_ssize_t n = p.shape[0], i
    cdef int64_t size = data.shape[0]
    cdef const char *base = <const char *>&data[0] if size > 0 else <const char *>b""
    if l.shape[0] != n:
        raise ValueError(f"{n} positions but {l.shape[0]} lengths")
    for i in range(n):
        if p[i] < 0 or l[i] < 0 or p[i] > size - l[i]:
            raise ValueError(f"slice {i} [{p[i]}, {p[i]} + {l[i]}) outside {size} bytes")
    out = [None] * n
    for i in range(n):
        out[i] = PyBytes_FromStringAndSize(base + p[i], l[i])
    return out
