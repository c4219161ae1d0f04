"""Kafka record batches (magic 2) and legacy messages (magic 0/1): decode and encode.

Record batch v2 (``DefaultRecordBatch``), all fixed-width fields big-endian::

    offset size field                 notes
    0      8    baseOffset            int64
    8      4    batchLength           int32 = total size - 12
    12     4    partitionLeaderEpoch  int32; NOT covered by the CRC (the broker rewrites it)
    16     1    magic                 2
    17     4    crc                   uint32 CRC-32C over [21, end of batch)
    21     2    attributes            bits 0-2 codec, 3 LogAppendTime, 4 transactional, 5 control,
                                      6 delete horizon set
    23     4    lastOffsetDelta       int32
    27     8    baseTimestamp         int64
    35     8    maxTimestamp          int64
    43     8    producerId            int64
    51     2    producerEpoch         int16
    53     4    baseSequence          int32
    57     4    recordsCount          int32
    61     ...  records               varint records, or one compressed stream of them

Record: ``length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint | key | valueLength varint | value | headerCount varint | headers``; each header
``keyLength varint | key (UTF-8) | valueLength varint | value``. Varints are zig-zag LEB128.

Legacy message (``LegacyRecord``, the FileMessageSet era)::

    int64 offset | int32 size | uint32 crc (CRC-32 over magic..end) | int8 magic | int8 attributes |
    [int64 timestamp, v1 only] | int32 keyLength | key | int32 valueLength | value

A compressed legacy message is a wrapper whose value is the compressed concatenation of inner messages;
v1 inner offsets are relative and the wrapper's offset is the absolute offset of the last inner message.

Reading rules taken from Kafka: with LogAppendTime every record's timestamp is the batch max timestamp
(v2) or the wrapper timestamp (v1 inner messages); control batches hold one record whose key is
``int16 version | int16 type``; after ``recordsCount`` records nothing may remain.

Batch objects copy the batch bytes out of the file buffer, so they stay valid after the segment is
closed. They are immutable and safe to share between threads.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from rmqcore.config import bool_arg, int_arg
from rmqcore.errors import ChecksumError, ConfigError, CorruptionError, InvalidMessageError, RecordSizeError
from rmqcore.wire import utf8_text

from . import compression
from ._kernels import Kernels, kernels

__all__ = [
    "Header",
    "Record",
    "RecordBatch",
    "DefaultRecordBatch",
    "LegacyRecordBatch",
    "read_batch",
    "encode_batch",
    "encode_varint",
    "encode_varlong",
    "NO_TIMESTAMP",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
    "CONTROL_TYPES",
]

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
RECORD_BATCH_OVERHEAD = 61
LOG_OVERHEAD = 12

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

#: ControlRecordType ids (key = int16 version, int16 type).
CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}

_V2_HEADER = struct.Struct(">qiiBIhiqqqhii")
_V2_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordsCount (the CRC-covered header part)
_LEGACY_HEADER = struct.Struct(">qiIbb")
_BE32 = struct.Struct(">i")
_BE64 = struct.Struct(">q")
_INT32_MAX = (1 << 31) - 1


class Header(NamedTuple):
    """A record header: UTF-8 key, bytes value (None = null)."""

    key: str
    value: bytes | None


class Record(NamedTuple):
    """One record as Kafka reports it (``offset`` absolute, ``timestamp`` after LogAppendTime)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    size_in_bytes: int = 0
    sequence: int = NO_SEQUENCE
    attributes: int = 0


def _increment_sequence(sequence: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence: wraps past Int.MAX to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


class RecordBatch:
    """Common interface of a v2 batch and a legacy message (Kafka's ``RecordBatch``)."""

    __slots__ = ("data", "position", "path", "_k")

    magic: int

    def __init__(
        self, data: bytes, position: int = 0, impl: str | None = None, path: str | None = None
    ) -> None:
        self.data = data
        self.position = position
        self.path = path  # the file the batch was read from (None: a bare buffer); errors name it
        self._k: Kernels = kernels(impl)

    @property
    def size(self) -> int:
        """Total bytes of the batch, including the 12-byte offset/size prefix (``sizeInBytes``)."""
        return len(self.data)

    @property
    def crc_valid(self) -> bool:
        """Whether the stored checksum matches (CRC-32C for v2, CRC-32 for legacy)."""
        return bool(self._k.batch.scan(self.data, 0, len(self.data), 1)[2] == self._k.batch.END)

    def ensure_valid(self) -> None:
        """Kafka ``ensureValid``: raise unless the checksum matches.

        Raises:
            ChecksumError: the stored checksum differs from the computed one.
        """
        if not self.crc_valid:
            err = ChecksumError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {self.computed_crc()})",
                self.position,
                self.path,
            )
            err.expected = self.crc  # type: ignore[attr-defined]
            err.actual = self.computed_crc()  # type: ignore[attr-defined]
            raise err

    # implemented by subclasses (as slots or read-only properties)
    crc: int
    attributes: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    partition_leader_epoch: int
    count: int | None

    def computed_crc(self) -> int:
        raise NotImplementedError

    def records(self) -> list[Record]:
        raise NotImplementedError

    def __iter__(self) -> Any:
        return iter(self.records())

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> str:
        return compression.codec_name(self.attributes & ATTR_COMPRESSION_MASK)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} position={self.position} size={self.size} magic={self.magic} "
            f"offsets={self.base_offset}..{self.last_offset}>"
        )


class DefaultRecordBatch(RecordBatch):
    """A record batch v2 (magic 2)."""

    __slots__ = (
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "count",
        "_records",
    )

    def __init__(
        self, data: bytes, position: int = 0, impl: str | None = None, path: str | None = None
    ) -> None:
        super().__init__(data, position, impl, path)
        if len(data) < RECORD_BATCH_OVERHEAD:
            raise CorruptionError(
                f"Record batch is corrupt (the size {len(data)} is smaller than the minimum allowed "
                f"overhead {RECORD_BATCH_OVERHEAD})",
                position,
                path,
            )
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.count,
        ) = _V2_HEADER.unpack_from(data, 0)
        self._records: list[Record] | None = None

    @property
    def last_offset(self) -> int:  # type: ignore[override]
        return _wrap64(self.base_offset + self.last_offset_delta)

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & ATTR_TIMESTAMP_TYPE else "CreateTime"

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return _increment_sequence(self.base_sequence, self.last_offset_delta)

    def computed_crc(self) -> int:
        return int(self._k.crc.crc32c(self.data[21:]))

    def records(self) -> list[Record]:
        """The records, decompressed and with absolute offsets and effective timestamps.

        Raises:
            MissingCodecError: a compressed batch whose codec is not installed.
            CorruptionError: malformed records or compressed payload (position = this batch).
        """
        if self._records is not None:
            return self._records
        codec = self.attributes & ATTR_COMPRESSION_MASK
        try:
            if codec == 0:
                raw: bytes = self.data
                start = RECORD_BATCH_OVERHEAD
            else:
                raw = compression.decompress(codec, self.data[RECORD_BATCH_OVERHEAD:], 2)
                start = 0
            parsed = self._k.batch.parse_records(raw, start, len(raw), self.count)
        except CorruptionError as e:
            raise e.at(self.path, self.position) from None
        base = self.base_offset
        log_append = bool(self.attributes & ATTR_TIMESTAMP_TYPE)
        base_ts = self.base_timestamp
        max_ts = self.max_timestamp
        base_seq = self.base_sequence
        out = []
        for size, attrs, ts_delta, off_delta, key, value, hdrs in parsed:
            out.append(
                Record(
                    base + off_delta,
                    max_ts if log_append else base_ts + ts_delta,
                    key,
                    value,
                    tuple(Header(k.decode("utf-8", "replace"), v) for k, v in hdrs) if hdrs else (),
                    size,
                    _increment_sequence(base_seq, off_delta) if base_seq >= 0 else NO_SEQUENCE,
                    attrs,
                )
            )
        self._records = out
        return out

    def control_type(self) -> str | None:
        """For a control batch, the type of its (first) record: "ABORT", "COMMIT", ...; else None."""
        if not self.is_control:
            return None
        recs = self.records()
        if not recs or recs[0].key is None or len(recs[0].key) < 4:
            raise CorruptionError("control record without a valid key", self.position, self.path)
        t = struct.unpack_from(">h", recs[0].key, 2)[0]
        return CONTROL_TYPES.get(t, f"UNKNOWN({t})")


class LegacyRecordBatch(RecordBatch):
    """A legacy message (magic 0 or 1); a compressed one is a wrapper around inner messages."""

    __slots__ = ("offset", "crc", "magic", "attributes", "timestamp", "key", "value", "_records")

    def __init__(
        self, data: bytes, position: int = 0, impl: str | None = None, path: str | None = None
    ) -> None:
        super().__init__(data, position, impl, path)
        if len(data) < _LEGACY_HEADER.size:
            raise CorruptionError(
                f"legacy message of {len(data)} bytes is shorter than its header", position, path)
        self.offset, _size, self.crc, self.magic, self.attributes = _LEGACY_HEADER.unpack_from(data, 0)
        self.timestamp, self.key, self.value = _legacy_body(data, 0, len(data), self.magic, position, path)
        self._records: list[Record] | None = None

    partition_leader_epoch = NO_PARTITION_LEADER_EPOCH
    producer_id = NO_PRODUCER_ID
    producer_epoch = NO_PRODUCER_EPOCH
    base_sequence = NO_SEQUENCE
    last_sequence = NO_SEQUENCE
    count = None
    base_timestamp = None
    is_transactional = False
    is_control = False

    @property
    def last_offset(self) -> int:  # type: ignore[override]
        return int(self.offset)

    @property
    def base_offset(self) -> int:  # type: ignore[override]
        if self.attributes & ATTR_COMPRESSION_MASK == 0:
            return int(self.offset)
        recs = self.records()
        return recs[0].offset if recs else int(self.offset)

    @property
    def max_timestamp(self) -> int:  # type: ignore[override]
        return int(self.timestamp)

    @property
    def timestamp_type(self) -> str:
        if self.magic == 0:
            return "NoTimestampType"
        return "LogAppendTime" if self.attributes & ATTR_TIMESTAMP_TYPE else "CreateTime"

    def computed_crc(self) -> int:
        return int(self._k.crc.crc32(self.data[16:]))

    def records(self) -> list[Record]:
        """The message itself, or a wrapper's inner messages with absolute offsets.

        Raises:
            MissingCodecError: a compressed wrapper whose codec is not installed.
            CorruptionError: malformed wrapper or inner messages.
        """
        if self._records is not None:
            return self._records
        codec = self.attributes & ATTR_COMPRESSION_MASK
        if codec == 0:
            self._records = [Record(self.offset, self.timestamp, self.key, self.value, (), len(self.data))]
            return self._records
        if self.value is None:
            raise CorruptionError(
                "Found invalid compressed record set with null value", self.position, self.path)
        try:
            raw = compression.decompress(codec, self.value, self.magic)
        except CorruptionError as e:
            raise e.at(self.path, self.position) from None
        inner = []
        pos = 0
        n = len(raw)
        while pos < n:
            if n - pos < LOG_OVERHEAD:
                raise CorruptionError(
                    "inner message header runs past the end of the wrapper", self.position, self.path)
            off, size = struct.unpack_from(">qi", raw, pos)
            if size < 14 or size > n - pos - LOG_OVERHEAD:
                raise CorruptionError(
                    f"inner message of size {size} does not fit the wrapper", self.position, self.path)
            end = pos + LOG_OVERHEAD + size
            magic = raw[pos + 16]
            if magic != self.magic:
                raise CorruptionError(
                    f"inner message magic {magic} differs from the wrapper's {self.magic}",
                    self.position,
                    self.path,
                )
            if raw[pos + 17] & ATTR_COMPRESSION_MASK:
                raise CorruptionError("Compressed messages must not be nested", self.position, self.path)
            ts, key, value = _legacy_body(raw, pos, end, magic, self.position, self.path)
            inner.append((off, ts, key, value, end - pos))
            pos = end
        if self.magic > 0 and inner:
            base = self.offset - inner[-1][0]
        else:
            base = 0
        log_append = self.magic > 0 and bool(self.attributes & ATTR_TIMESTAMP_TYPE)
        self._records = [
            Record(base + off, self.timestamp if log_append else ts, key, value, (), size)
            for off, ts, key, value, size in inner
        ]
        return self._records


def _legacy_body(
    data: bytes, pos: int, end: int, magic: int, where: int, path: str | None
) -> tuple[int, bytes | None, bytes | None]:
    """(timestamp, key, value) of the legacy message at ``pos`` (``end`` = its end)."""
    p = pos + 18
    if magic == 1:
        if end - p < 8:
            raise CorruptionError("legacy message too short for its timestamp", where, path)
        ts = _BE64.unpack_from(data, p)[0]
        p += 8
    elif magic == 0:
        ts = NO_TIMESTAMP
    else:
        raise CorruptionError(f"invalid legacy magic {magic}", where, path)
    fields: list[bytes | None] = []
    for what in ("key", "value"):
        if end - p < 4:
            raise CorruptionError(f"legacy message too short for its {what} length", where, path)
        n = _BE32.unpack_from(data, p)[0]
        p += 4
        if n < 0:
            fields.append(None)
            continue
        if n > end - p:
            raise RecordSizeError(
                f"legacy message {what} of {n} bytes runs past the message end", where, path)
        fields.append(bytes(data[p : p + n]))
        p += n
    return ts, fields[0], fields[1]


def read_batch(
    buf: Any, position: int, size: int, magic: int, impl: str | None = None, path: str | None = None
) -> RecordBatch:
    """Copy the batch at ``[position, position + size)`` out of ``buf`` and parse its header.

    ``size`` and ``magic`` come from a kernel header walk (so they are already validated).

    Raises:
        CorruptionError: the header is malformed.
        ConfigError: ``buf`` is not bytes-like, or the range or magic cannot be a batch of it.
    """
    try:
        mv = memoryview(buf)
    except TypeError:
        raise ConfigError(f"buf must be bytes-like, not {type(buf).__name__}") from None
    with mv:
        if mv.ndim != 1 or mv.itemsize != 1:  # (a numpy scalar exports a 0-d buffer)
            raise ConfigError(f"buf must be a 1-D buffer of bytes, not {type(buf).__name__}")
        n = mv.nbytes
        position, size, magic = int_arg(position, "position"), int_arg(size, "size"), int_arg(magic, "magic")
        if not (0 <= position and 0 <= size and position + size <= n) or magic not in (0, 1, 2):
            raise ConfigError(
                f"no batch of magic {magic} at [{position}, {position + size}) of a {n}-byte buffer")
        data = bytes(mv[position : position + size])
    if magic >= 2:
        return DefaultRecordBatch(data, position, impl, path)
    return LegacyRecordBatch(data, position, impl, path)


# ---------------------------------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------------------------------


_ONE_BYTE = tuple(bytes((b,)) for b in range(0x80))


def _zigzag_leb128(value: int, bits: int, kind: str) -> bytes:
    """ByteUtils' writeVarint/writeVarlong of the ``bits``-wide signed ``value``: zig-zag (0, -1, 1, -2 ...
    as 0, 1, 2, 3 ...), then unsigned LEB128: 7 bits a byte, low first, the high bit set on every byte but
    the last.

    Raises:
        InvalidMessageError: ``value`` outside a signed ``bits``-wide int (a ValueError).
    """
    sign = value >> (bits - 1)  # 0 or -1 exactly when value fits
    if sign != 0 and sign != -1:
        raise InvalidMessageError(f"{value} does not fit a {kind} (int{bits})")
    v = (value << 1) ^ sign
    if v < 0x80:
        return _ONE_BYTE[v]
    out = bytearray()
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """ByteUtils.writeVarint: zig-zag, then LEB128 (at most 5 bytes).

    Raises:
        InvalidMessageError: ``value`` outside int32 (a ValueError).
    """
    return _zigzag_leb128(value, 32, "varint")


def encode_varlong(value: int) -> bytes:
    """ByteUtils.writeVarlong: zig-zag, then LEB128 (at most 10 bytes).

    Raises:
        InvalidMessageError: ``value`` outside int64 (a ValueError).
    """
    return _zigzag_leb128(value, 64, "varlong")


def _encode_bytes(b: bytes | bytearray | memoryview | None) -> bytes:
    if b is None:
        return encode_varint(-1)
    data = bytes(b)
    return encode_varint(len(data)) + data


def _encode_record(offset_delta: int, timestamp_delta: int, key: Any, value: Any, headers: Any) -> bytes:
    if not (isinstance(key, (bytes, bytearray, memoryview)) or key is None) or not (
            isinstance(value, (bytes, bytearray, memoryview)) or value is None):
        raise InvalidMessageError("record keys and values must be bytes-like or None")
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta), _encode_bytes(key)]
    parts.append(_encode_bytes(value))
    if headers is not None and (isinstance(headers, (str, bytes, bytearray, memoryview))
                                or not isinstance(headers, Iterable)):
        raise InvalidMessageError(
            f"record headers must be a sequence of (key, value), not {type(headers).__name__}")
    hdrs = list(headers or ())
    parts.append(encode_varint(len(hdrs)))
    for h in hdrs:
        if isinstance(h, (str, bytes, bytearray, memoryview)) or not isinstance(h, Sequence) or len(h) != 2:
            raise InvalidMessageError(f"a record header is a (key, value) pair, not {h!r:.40}")
        hk, hv = h[0], h[1]
        if hk is None:
            raise InvalidMessageError("record header keys must not be null")
        if not isinstance(hk, (str, bytes, bytearray, memoryview)):
            raise InvalidMessageError(f"record header keys are str or bytes, not {type(hk).__name__}")
        kb = utf8_text(hk, "a record header key") if isinstance(hk, str) else bytes(hk)
        if not (isinstance(hv, (bytes, bytearray, memoryview)) or hv is None):
            raise InvalidMessageError("record header values must be bytes-like or None")
        parts.append(encode_varint(len(kb)) + kb)
        parts.append(_encode_bytes(hv))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _records_of(records: Any) -> list[Record]:
    """``records`` as Records: each a Record or an ``(offset, timestamp, key, value[, headers])``
    sequence with integer offset and timestamp; InvalidMessageError for anything else."""
    if isinstance(records, (str, bytes, bytearray, memoryview)) or not isinstance(records, Iterable):
        raise InvalidMessageError(f"records must be an iterable of Records, not {type(records).__name__}")
    out = []
    for r in records:
        if not isinstance(r, Record):
            if isinstance(r, (str, bytes, bytearray, memoryview)) or not isinstance(r, Sequence) \
                    or not 4 <= len(r) <= 5:
                raise InvalidMessageError(
                    f"a record is a Record or (offset, timestamp, key, value[, headers]), not {r!r:.40}")
            r = Record(*r)
        if not (_is_int(r.offset) and _is_int(r.timestamp)):
            raise InvalidMessageError(f"a record's offset and timestamp are integers, not {r.offset!r:.20}, "
                                      f"{r.timestamp!r:.20}")
        out.append(r)
    return out


def encode_batch(
    records: Iterable[Record | Sequence[Any]],
    *,
    base_offset: int = 0,
    compression_type: str = "none",
    timestamp_type: str = "CreateTime",
    log_append_time: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    last_offset_delta: int | None = None,
    impl: str | None = None,
) -> bytes:
    """Encode one record batch v2 as Kafka's ``MemoryRecordsBuilder`` does.

    Args:
        records: :class:`Record` objects (or ``(offset, timestamp, key, value[, headers])`` tuples);
            offsets must be >= ``base_offset`` and increasing (gaps are allowed, as after compaction).
        base_offset: the batch's base offset.
        compression_type: "none", "gzip", "snappy", "lz4" or "zstd".
        timestamp_type: "CreateTime" or "LogAppendTime" (then ``log_append_time`` is the max timestamp).
        last_offset_delta: defaults to the last record's offset delta (0 for an empty batch).

    Returns:
        The batch bytes, CRC-32C filled in.

    Raises:
        InvalidMessageError: offsets out of order or out of int32 range, bad header key, or a bad
            timestamp type.
        MissingCodecError: the codec needs ``cramjam``.
    """
    recs = _records_of(records)
    codec = compression.codec_id(compression_type)
    for name, v in (("base_offset", base_offset), ("partition_leader_epoch", partition_leader_epoch),
                    ("producer_id", producer_id), ("producer_epoch", producer_epoch),
                    ("base_sequence", base_sequence), ("log_append_time", log_append_time),
                    ("last_offset_delta", last_offset_delta)):
        if not (_is_int(v) or (v is None and name in ("log_append_time", "last_offset_delta"))):
            raise InvalidMessageError(f"{name} must be an integer, not {type(v).__name__}")
    is_transactional = bool_arg(is_transactional, "is_transactional")
    is_control = bool_arg(is_control, "is_control")
    if type(timestamp_type) is not str or timestamp_type not in ("CreateTime", "LogAppendTime"):
        raise InvalidMessageError(
            f"timestamp_type must be CreateTime or LogAppendTime, not {timestamp_type!r}"
        )
    base_ts = recs[0].timestamp if recs else NO_TIMESTAMP
    chunks = []
    prev = None
    for r in recs:
        delta = r.offset - base_offset
        if not 0 <= delta <= _INT32_MAX or (prev is not None and r.offset <= prev):
            raise InvalidMessageError(
                f"record offset {r.offset} is out of order or out of range of the batch"
            )
        prev = r.offset
        chunks.append(_encode_record(delta, r.timestamp - base_ts, r.key, r.value, r.headers))
    payload = b"".join(chunks)
    if codec:
        payload = compression.compress(codec, payload)
    if timestamp_type == "LogAppendTime":
        if log_append_time is None:
            raise InvalidMessageError("LogAppendTime batches need log_append_time")
        max_ts = log_append_time
    else:
        max_ts = max((r.timestamp for r in recs), default=NO_TIMESTAMP)
    if last_offset_delta is None:
        last_offset_delta = (recs[-1].offset - base_offset) if recs else 0
    attributes = codec
    if timestamp_type == "LogAppendTime":
        attributes |= ATTR_TIMESTAMP_TYPE
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    try:
        after_crc = (
            _V2_AFTER_CRC.pack(
                attributes,
                last_offset_delta,
                base_ts,
                max_ts,
                producer_id,
                producer_epoch,
                base_sequence,
                len(recs),
            )
            + payload
        )
        crc = int(kernels(impl).crc.crc32c(after_crc))
        head = struct.pack(">qiibI", base_offset, len(after_crc) + 9, partition_leader_epoch, 2, crc)
    except struct.error as e:
        raise InvalidMessageError(f"a batch header field is out of range: {e}") from None
    return head + after_crc
