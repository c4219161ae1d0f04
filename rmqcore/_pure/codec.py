"""CommitLog record codec, pure-Python twin of ``rmqcore._native.codec``.

Functions over buffers only: no files. Positions are buffer offsets. Expected conditions (end of
data, BLANK filler) are return values; invalid bytes are statuses in the scanners and
``CorruptionError`` subclasses (position = buffer offset of the record) in ``decode_record``.
``MessageExt`` is a decoded record (``rmqcore.message.MessageExt`` is the chosen twin's class).
Both twins have the same names, signatures, results and exceptions; one test suite runs both.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any

from ..errors import InvalidMessageError, PropertiesTooLargeError
from ..layout import (
    BLANK_SIZE,
    C_BODY_CRC,
    C_BODY_LEN,
    C_BODY_POS,
    C_BORN_HOST_POS,
    C_BORN_PORT,
    C_BORN_TIMESTAMP,
    C_FLAG,
    C_MAGIC,
    C_PHYSICAL_OFFSET,
    C_POSITION,
    C_PREPARED_TX_OFFSET,
    C_PROPERTIES_LEN,
    C_PROPERTIES_POS,
    C_QUEUE_ID,
    C_QUEUE_OFFSET,
    C_RECONSUME_TIMES,
    C_SIZE,
    C_STORE_HOST_POS,
    C_STORE_PORT,
    C_STORE_TIMESTAMP,
    C_SYS_FLAG,
    C_TOPIC_LEN,
    C_TOPIC_POS,
    FLAG_BORNHOST_V6,
    FLAG_STOREHOST_V6,
    KEY_SEPARATOR,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_LEN,
    MIN_RECORD_SIZE,
    NCOLUMNS,
    POS_STORETIMESTAMP,
    POS_STORETIMESTAMP_V6,
    POS_SYSFLAG,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    ST_BAD_CRC,
    ST_BAD_MAGIC,
    ST_BAD_SIZE,
    ST_BLANK,
    ST_END,
    ST_MSG,
    ST_TORN,
    STATUS_ERRORS,
    TRANSACTION_MASK,
    record_size,
)
from ..wire import Host, create_message_id, dispatch_tags_code, parse_properties, utf8_text
from . import hashing as _hashing

__all__ = [
    "record_size",
    "encode_record",
    "encode_batch",
    "encode_blank",
    "peek_record",
    "check_record",
    "scan_records",
    "decode_record",
    "decode_messages",
    "decode_batch",
    "slices",
    "MessageExt",
]

_I = struct.Struct(">i")
_II = struct.Struct(">ii")
_Q = struct.Struct(">q")
_H = struct.Struct(">h")
_B = struct.Struct(">b")
# size magic crc queueId flag queueOffset physicalOffset sysFlag bornTimestamp
_HEAD = struct.Struct(">iiiiiqqiq")
_HEAD_LEN = _HEAD.size  # 48


def _host_flags(sys_flag: int, born_addr: bytes, store_addr: bytes) -> int:
    sys_flag &= ~(FLAG_BORNHOST_V6 | FLAG_STOREHOST_V6)
    if len(born_addr) == 16:
        sys_flag |= FLAG_BORNHOST_V6
    elif len(born_addr) != 4:
        raise InvalidMessageError(f"born host address must be 4 or 16 bytes, not {len(born_addr)}")
    if len(store_addr) == 16:
        sys_flag |= FLAG_STOREHOST_V6
    elif len(store_addr) != 4:
        raise InvalidMessageError(f"store host address must be 4 or 16 bytes, not {len(store_addr)}")
    return sys_flag


def _props_fit(n: int) -> None:
    if n > MAX_PROPERTIES_LEN:
        raise PropertiesTooLargeError(f"properties of {n} bytes exceed {MAX_PROPERTIES_LEN}")


def _encode_range(buf: Any, pos: int, avail: int) -> None:
    """``avail`` bytes from ``pos`` must lie inside ``buf`` (the writers' one range check)."""
    if pos < 0 or avail < 0 or pos + avail > len(buf):
        raise ValueError("encode range outside the buffer")


def encode_record(
    buf: Any,
    pos: int,
    avail: int,
    topic: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_addr: bytes,
    born_port: int,
    store_timestamp: int,
    store_addr: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    properties: bytes,
    v2: bool,
) -> int:
    """Write one record at ``buf[pos:]`` (the CRC is computed here; the V6 sysflag bits follow the
    address lengths, as the broker sets them).

    Returns the record size, or ``-size`` without writing anything when ``size + 8 > avail`` (the
    CommitLog then writes a BLANK and rolls). Raises InvalidMessageError for values that cannot be
    encoded and ValueError when ``avail`` exceeds the buffer.
    """
    body = bytes(body)
    topic = bytes(topic)
    properties = bytes(properties)
    sys_flag = _host_flags(sys_flag, bytes(born_addr), bytes(store_addr))
    tlen = len(topic)
    if tlen == 0 or tlen > (32767 if v2 else 127):
        raise InvalidMessageError(f"topic of {tlen} bytes cannot be encoded as {'V2' if v2 else 'V1'}")
    _props_fit(len(properties))
    _encode_range(buf, pos, avail)
    size = record_size(len(body), tlen, len(properties), sys_flag, v2)
    if size + BLANK_SIZE > avail:
        return -size
    try:
        parts = [
            _HEAD.pack(
                size, MAGIC_V2 if v2 else MAGIC_V1, zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag,
                queue_offset, physical_offset, sys_flag, born_timestamp,
            ),
            bytes(born_addr), _I.pack(born_port), _Q.pack(store_timestamp), bytes(store_addr),
            _I.pack(store_port), _I.pack(reconsume_times), _Q.pack(prepared_transaction_offset),
            _I.pack(len(body)), body, (_H.pack(tlen) if v2 else _B.pack(tlen)), topic,
            _H.pack(len(properties)), properties,
        ]
    except struct.error as e:
        raise InvalidMessageError(f"field out of range: {e}") from None
    rec = b"".join(parts)
    assert len(rec) == size
    buf[pos : pos + size] = rec
    return size


def encode_batch(
    buf: Any,
    pos: int,
    avail: int,
    topic: bytes,
    queue_id: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_addr: bytes,
    born_port: int,
    store_timestamp: int,
    store_addr: bytes,
    store_port: int,
    bodies: Any,
    properties: Any,
    flags: Any,
    v2: bool,
    sizes_out: Any,
) -> tuple[int, int]:
    """Write a batch (MessageExtBatch) as consecutive records at ``buf[pos:]``, all or nothing.

    Message i gets body ``bodies[i]``, properties ``properties[i]`` (bytes, or a str stored as UTF-8;
    one with a lone surrogate is an InvalidMessageError), user flag ``flags[i]``
    (or 0 when ``flags`` is None), queue offset ``queue_offset + i`` and physical offset
    ``physical_offset + bytes before it``; reconsume times and prepared offset are 0 (as the broker
    writes batches). ``sizes_out`` (int64 array of at least ``len(bodies)`` or None) receives each
    record's size. Returns ``(count, total_bytes)``, or ``(0, -total_bytes)`` writing nothing when
    ``total + 8 > avail`` (a batch never splits across files). Each ``bodies[i]`` and
    ``properties[i]`` is read once, before anything is encoded; each ``flags[i]`` as it is encoded.
    """
    n = len(bodies)
    if len(properties) != n or (flags is not None and len(flags) != n):
        raise InvalidMessageError("bodies, properties and flags must have the same length")
    if sizes_out is not None and len(sizes_out) < n:
        raise ValueError("sizes_out is shorter than the batch")
    _encode_range(buf, pos, avail)
    sys_flag = _host_flags(sys_flag, bytes(born_addr), bytes(store_addr))
    sizes = []
    blist: list[Any] = []  # each message's body and properties, read once (what is encoded)
    plist: list[Any] = []  # bytes-like
    for i in range(n):
        body = bodies[i]
        props = properties[i]
        if isinstance(props, str):  # a properties string: stored as UTF-8
            props = utf8_text(props, "a properties string")
        if not isinstance(body, (bytes, bytearray, memoryview)) or not isinstance(
            props, (bytes, bytearray, memoryview)
        ):
            raise TypeError("batch bodies must be bytes-like and properties bytes-like or str")
        blist.append(body)
        plist.append(props)
        _props_fit(len(props))
        sizes.append(record_size(len(body), len(topic), len(props), sys_flag, v2))
    total = sum(sizes)
    if total + BLANK_SIZE > avail:
        return 0, -total
    scratch = bytearray(total + BLANK_SIZE)
    p = 0
    for i in range(n):
        w = encode_record(
            scratch, p, len(scratch) - p, topic, queue_id, 0 if flags is None else flags[i],
            queue_offset + i, physical_offset + p, sys_flag, born_timestamp, born_addr, born_port,
            store_timestamp, store_addr, store_port, 0, 0, blist[i], plist[i], v2,
        )
        assert w == sizes[i]
        p += w
    buf[pos : pos + total] = scratch[:total]
    if sizes_out is not None:
        for i, sz in enumerate(sizes):
            sizes_out[i] = sz
    return n, total


def encode_blank(buf: Any, pos: int, remaining: int) -> None:
    """Write the 8-byte BLANK filler (int remaining-to-end-of-file, int BLANK magic) at ``pos``."""
    if pos < 0 or pos + BLANK_SIZE > len(buf):
        raise ValueError("BLANK outside the buffer")
    buf[pos : pos + BLANK_SIZE] = _II.pack(remaining, MAGIC_BLANK)


def peek_record(buf: Any, pos: int, limit: int) -> tuple[int, int]:
    """Classify what starts at ``pos`` from its first 8 bytes: ``(status, size)``.

    ST_MSG (size = TOTALSIZE, fully inside ``limit``), ST_BLANK (size = declared remaining length),
    ST_END (nothing written: limit reached or zeros), ST_TORN (record runs past ``limit``),
    ST_BAD_MAGIC, ST_BAD_SIZE.
    """
    _check_range(buf, pos, limit)
    remaining = limit - pos
    if remaining == 0:
        return ST_END, 0
    if remaining < 8:
        if not any(memoryview(buf)[pos:limit]):
            return ST_END, 0
        return ST_TORN, 0
    size, magic = _II.unpack_from(buf, pos)
    if magic == MAGIC_BLANK:
        return ST_BLANK, size
    if size == 0 and magic == 0:
        return ST_END, 0
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return ST_BAD_MAGIC, size
    if size < MIN_RECORD_SIZE:
        return ST_BAD_SIZE, size
    if size > remaining:
        return ST_TORN, size
    return ST_MSG, size


def _check_range(buf: Any, pos: int, limit: int) -> None:
    if pos < 0 or limit < pos or limit > len(buf):
        raise ValueError(f"range [{pos}, {limit}) outside a buffer of {len(buf)} bytes")


def _parse(buf: Any, pos: int, size: int, magic: int) -> tuple[int, ...] | None:
    """Field positions of a record whose header said MSG; None if its lengths are inconsistent."""
    end = pos + size
    sys_flag = _I.unpack_from(buf, pos + 36)[0]
    bh = 20 if sys_flag & FLAG_BORNHOST_V6 else 8
    sh = 20 if sys_flag & FLAG_STOREHOST_V6 else 8
    p = pos + 48 + bh + 8 + sh + 4 + 8  # body length field
    if p + 4 > end:
        return None
    body_len = _I.unpack_from(buf, p)[0]
    body_pos = p + 4
    p = body_pos + max(body_len, 0)
    v2 = magic == MAGIC_V2
    if p + (2 if v2 else 1) > end:
        return None
    topic_len = _H.unpack_from(buf, p)[0] if v2 else _B.unpack_from(buf, p)[0]
    if topic_len < 0:
        return None
    topic_pos = p + (2 if v2 else 1)
    p = topic_pos + topic_len
    if p + 2 > end:
        return None
    props_len = _H.unpack_from(buf, p)[0]
    props_pos = p + 2
    if props_len < 0 or props_pos + props_len > end:
        return None
    if record_size(body_len, topic_len, props_len, sys_flag, v2) != size:
        return None
    return sys_flag, bh, sh, body_pos, max(body_len, 0), topic_pos, topic_len, props_pos, props_len


def check_record(buf: Any, pos: int, limit: int, verify_crc: bool) -> tuple[int, int]:
    """Full validation of the record at ``pos`` (checkMessageAndReturnSize): ``(status, size)``."""
    status, size = peek_record(buf, pos, limit)
    if status != ST_MSG:
        return status, size
    magic = _I.unpack_from(buf, pos + 4)[0]
    f = _parse(buf, pos, size, magic)
    if f is None:
        return ST_BAD_SIZE, size
    if verify_crc:
        body_pos, body_len = f[3], f[4]
        stored = _I.unpack_from(buf, pos + 8)[0]
        if zlib.crc32(memoryview(buf)[body_pos : body_pos + body_len]) & 0x7FFFFFFF != stored:
            return ST_BAD_CRC, size
    return ST_MSG, size


def scan_records(
    buf: Any, pos: int, limit: int, verify_crc: bool, max_records: int = -1
) -> tuple[int, int, int, int]:
    """Walk valid records from ``pos``: ``(status, end_pos, count, last_store_timestamp)``.

    Stops at the first non-record (its status; ``end_pos`` is where it starts) or, with
    ``max_records >= 0``, after that many records (status ST_MSG). ``last_store_timestamp`` is the
    STORETIMESTAMP of the last valid record, or -1 when none. This is recovery's hot loop.
    """
    _check_range(buf, pos, limit)
    count = 0
    last_ts = -1
    while max_records < 0 or count < max_records:
        status, size = check_record(buf, pos, limit, verify_crc)
        if status != ST_MSG:
            return status, pos, count, last_ts
        sys_flag = _I.unpack_from(buf, pos + POS_SYSFLAG)[0]
        at = pos + (POS_STORETIMESTAMP_V6 if sys_flag & FLAG_BORNHOST_V6 else POS_STORETIMESTAMP)
        last_ts = _Q.unpack_from(buf, at)[0]
        pos += size
        count += 1
    return ST_MSG, pos, count, last_ts


def raise_for_status(status: int, pos: int) -> None:
    cls, detail = STATUS_ERRORS[status]
    raise cls(detail, pos)


def decode_record(buf: Any, pos: int, limit: int, verify_crc: bool) -> tuple[Any, ...] | None:
    """Decode the record at ``pos``; None at a BLANK or at the end of the data.

    Returns ``(size, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
    born_timestamp, born_addr, born_port, store_timestamp, store_addr, store_port, reconsume_times,
    prepared_transaction_offset, body, topic, properties)`` with bytes for addresses, body, topic
    and properties. Raises a CorruptionError subclass positioned at ``pos`` for invalid bytes.
    """
    status, size = check_record(buf, pos, limit, verify_crc)
    if status == ST_END or status == ST_BLANK:
        return None
    if status != ST_MSG:
        raise_for_status(status, pos)
    size, magic, crc, qid, flag, qoff, phys, sys_flag, born_ts = _HEAD.unpack_from(buf, pos)
    f = _parse(buf, pos, size, magic)
    assert f is not None
    _, bh, sh, body_pos, body_len, topic_pos, topic_len, props_pos, props_len = f
    mv = memoryview(buf)
    p = pos + 48
    born_addr = bytes(mv[p : p + bh - 4])
    born_port = _I.unpack_from(buf, p + bh - 4)[0]
    p += bh
    store_ts = _Q.unpack_from(buf, p)[0]
    p += 8
    store_addr = bytes(mv[p : p + sh - 4])
    store_port = _I.unpack_from(buf, p + sh - 4)[0]
    p += sh
    reconsume = _I.unpack_from(buf, p)[0]
    prepared = _Q.unpack_from(buf, p + 4)[0]
    return (
        size, magic, crc, qid, flag, qoff, phys, sys_flag, born_ts, born_addr, born_port, store_ts,
        store_addr, store_port, reconsume, prepared, bytes(mv[body_pos : body_pos + body_len]),
        bytes(mv[topic_pos : topic_pos + topic_len]), bytes(mv[props_pos : props_pos + props_len]),
    )


def decode_messages(buf: Any, base: int, positions: Any, limit: int, verify_crc: bool,
                    factory: Any) -> tuple[list[Any], int]:
    """``decode_record`` at each of ``positions`` in one call, each result built as
    ``factory(base + pos, raw)`` (``base``: the global offset of ``buf[0]``). Returns the built
    list and how many positions it covers: fewer than all when one holds no record (a BLANK, or
    the end of the data at ``limit``), where it stops. Raises ValueError for a position outside
    ``[0, limit]`` and a CorruptionError subclass positioned at the first invalid record."""
    out: list[Any] = []
    for i, p in enumerate(positions):
        raw = decode_record(buf, p, limit, verify_crc)
        if raw is None:
            return out, i
        out.append(factory(base + p, raw))
    return out, len(out)


def _exported_rows(out: Any) -> int | None:
    """The first dimension of the buffer ``out`` exports (None: no buffer), whatever an array
    subclass's ``shape`` attribute says."""
    try:
        with memoryview(out) as m:
            return m.shape[0] if m.shape else 0
    except TypeError:
        return None


def decode_batch(buf: Any, pos: int, limit: int, out: Any, verify_crc: bool) -> tuple[int, int, int]:
    """Decode consecutive records from ``pos`` into the columns of ``out`` (int64, shape
    ``(NCOLUMNS, capacity)``, C-contiguous; row order = ``layout.COLUMNS``) without Python objects
    per field. Returns ``(count, end_pos, status)``: status ST_MSG when ``out`` filled up, else the
    status of whatever stopped the walk at ``end_pos`` (ST_END, ST_BLANK or an error status).
    """
    _check_range(buf, pos, limit)
    # (the buffer's own rows too: an array subclass's shape attribute may say anything)
    if (getattr(out, "ndim", 0) != 2 or out.shape[0] != NCOLUMNS
            or _exported_rows(out) not in (None, NCOLUMNS)):
        raise ValueError(f"out must be a 2-D array with {NCOLUMNS} rows")
    cap = out.shape[1]
    n = 0
    while n < cap:
        status, size = check_record(buf, pos, limit, verify_crc)
        if status != ST_MSG:
            return n, pos, status
        size, magic, crc, qid, flag, qoff, phys, sys_flag, born_ts = _HEAD.unpack_from(buf, pos)
        f = _parse(buf, pos, size, magic)
        assert f is not None
        _, bh, sh, body_pos, body_len, topic_pos, topic_len, props_pos, props_len = f
        p = pos + 48
        out[C_POSITION, n] = pos
        out[C_SIZE, n] = size
        out[C_MAGIC, n] = magic
        out[C_BODY_CRC, n] = crc
        out[C_QUEUE_ID, n] = qid
        out[C_FLAG, n] = flag
        out[C_QUEUE_OFFSET, n] = qoff
        out[C_PHYSICAL_OFFSET, n] = phys
        out[C_SYS_FLAG, n] = sys_flag
        out[C_BORN_TIMESTAMP, n] = born_ts
        out[C_BORN_HOST_POS, n] = p
        out[C_BORN_PORT, n] = _I.unpack_from(buf, p + bh - 4)[0]
        p += bh
        out[C_STORE_TIMESTAMP, n] = _Q.unpack_from(buf, p)[0]
        p += 8
        out[C_STORE_HOST_POS, n] = p
        out[C_STORE_PORT, n] = _I.unpack_from(buf, p + sh - 4)[0]
        p += sh
        out[C_RECONSUME_TIMES, n] = _I.unpack_from(buf, p)[0]
        out[C_PREPARED_TX_OFFSET, n] = _Q.unpack_from(buf, p + 4)[0]
        out[C_BODY_POS, n] = body_pos
        out[C_BODY_LEN, n] = body_len
        out[C_TOPIC_POS, n] = topic_pos
        out[C_TOPIC_LEN, n] = topic_len
        out[C_PROPERTIES_POS, n] = props_pos
        out[C_PROPERTIES_LEN, n] = props_len
        n += 1
        pos += size
    return n, pos, ST_MSG


def slices(data: Any, positions: Any, lengths: Any) -> list[bytes]:
    """``[bytes(data[p:p + n]) for p, n in zip(positions, lengths)]`` (int64 arrays): a batch's bodies,
    topics or properties as bytes. Every range is checked before any object is made; ValueError
    for a range outside ``data`` or arrays of different lengths."""
    mv = memoryview(data)
    size = len(mv)
    ps, ls = [int(x) for x in positions], [int(x) for x in lengths]
    if len(ls) != len(ps):
        raise ValueError(f"{len(ps)} positions but {len(ls)} lengths")
    for i, (p, n) in enumerate(zip(ps, ls)):
        if p < 0 or n < 0 or p > size - n:
            raise ValueError(f"slice {i} [{p}, {p} + {n}) outside {size} bytes")
    return [bytes(mv[p : p + n]) for p, n in zip(ps, ls)]


# what a MessageExt holds (both twins): its attributes, in the order of the decode_record tuple
# after ``position``; ``_props`` caches the parsed properties
MESSAGE_FIELDS = (
    "position", "size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
    "sys_flag", "born_timestamp", "_born_addr", "_born_port", "store_timestamp", "_store_addr",
    "_store_port", "reconsume_times", "prepared_transaction_offset", "body", "topic_bytes",
    "properties_bytes",
)


class MessageExt:
    """A decoded CommitLog record (MessageExt), pure twin of ``rmqcore._native.codec.MessageExt``.
    Built from a ``decode_record`` tuple; strings decoded lazily. ``rmqcore.message.MessageExt`` is
    the chosen twin's class.

    ``position`` is the global CommitLog offset the record was read at (``physical_offset`` is the
    PHYSICALOFFSET field stored inside it; the two agree in a healthy store).
    """

    __slots__ = MESSAGE_FIELDS + ("_props",)
    FIELDS = MESSAGE_FIELDS
    position: int
    size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic_bytes: bytes
    properties_bytes: bytes

    def __init__(self, position: int, raw: tuple[Any, ...]) -> None:
        (
            self.size, self.magic, self.body_crc, self.queue_id, self.flag, self.queue_offset,
            self.physical_offset, self.sys_flag, self.born_timestamp, self._born_addr, self._born_port,
            self.store_timestamp, self._store_addr, self._store_port, self.reconsume_times,
            self.prepared_transaction_offset, self.body, self.topic_bytes, self.properties_bytes,
        ) = raw
        self.position = position
        self._props: dict[str, str] | None = None

    @property
    def born_host(self) -> Host:
        return Host(self._born_addr, self._born_port)  # built on use: most reads never look

    @property
    def store_host(self) -> Host:
        return Host(self._store_addr, self._store_port)

    @property
    def topic(self) -> str:
        return self.topic_bytes.decode("utf-8", "replace")

    @property
    def properties_string(self) -> str:
        """The stored properties string exactly (invalid UTF-8 replaced as Java would)."""
        return self.properties_bytes.decode("utf-8", "replace")

    @property
    def properties(self) -> dict[str, str]:
        if self._props is None:
            self._props = parse_properties(self.properties_string)
        return self._props

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        """KEYS split on single spaces, empty tokens dropped (as IndexService indexes them)."""
        k = self.properties.get(PROPERTY_KEYS)
        return [t for t in k.split(KEY_SEPARATOR) if t] if k else []

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def msg_id(self) -> str:
        return create_message_id(self._store_addr, self._store_port, self.physical_offset)

    @property
    def compression_type(self) -> str | None:
        from ..compression import compression_type

        return compression_type(self.sys_flag)

    def decompressed_body(self) -> bytes:
        from ..compression import decompress_body

        return decompress_body(self.sys_flag, self.body)

    @property
    def tags_code(self) -> int:
        """The consume-queue tags code dispatch computes (delivery time for the delay topic)."""
        return dispatch_tags_code(self.topic, self.properties, self.store_timestamp, _hashing.tags_code)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_MASK

    @property
    def version(self) -> int:
        return 2 if self.magic == MAGIC_V2 else 1

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"position={self.position}, size={self.size}, body={len(self.body)} bytes)"
        )
