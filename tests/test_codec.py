"""CommitLog record codec: unit tests, crossing property tests and fuzzing, run on both twins.

Every test takes ``impl`` (once per implementation) or calls ``twins()`` (all of them, for crossing and
parity: encode with one, decode with the other; same bytes, same statuses, same exception classes).
Byte layout: shared/spec/rocketmq-store.md section 1 and rmqcore/layout.py.
"""

from __future__ import annotations

import inspect
import ipaddress
import mmap
import struct
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rmqcore.errors import (
    BadMagicError,
    ChecksumError,
    CorruptionError,
    InvalidMessageError,
    PropertiesTooLargeError,
    RecordSizeError,
    TruncatedRecordError,
)
from rmqcore.layout import (
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
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    NCOLUMNS,
    ST_BAD_CRC,
    ST_BAD_MAGIC,
    ST_BAD_SIZE,
    ST_BLANK,
    ST_END,
    ST_MSG,
    ST_TORN,
)
from tests.conftest import twins

# hypothesis tests may take the function-scoped `impl` fixture; it always yields the same modules
CROSS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)

# --- the worked example of rocketmq-store.md 1.2 -------------------------------------------------
WORKED_PROPS = (
    b"KEYS\x01k1 k2\x02UNIQ_KEY\x017F0000010E0A18B4AAC2785B5E470000\x02WAIT\x01true\x02TAGS\x01TagA\x02"
)
WORKED = dict(
    topic=b"TopicTest",
    queue_id=3,
    flag=0,
    queue_offset=7,
    physical_offset=1_073_741_824,
    sys_flag=0,
    born_timestamp=1_700_000_000_000,
    born_addr=bytes([192, 168, 0, 10]),
    born_port=50000,
    store_timestamp=1_700_000_000_123,
    store_addr=bytes([192, 168, 0, 1]),
    store_port=10911,
    reconsume_times=0,
    prepared_transaction_offset=0,
    body=b"Hello RocketMQ",
    properties=WORKED_PROPS,
    v2=False,
)
WORKED_HEX = (
    "000000BB"  # TOTALSIZE 187
    "DAA320A7"  # MAGICCODE V1
    "69C865ED"  # BODYCRC 1774740973
    "00000003"  # QUEUEID
    "00000000"  # FLAG
    "0000000000000007"  # QUEUEOFFSET
    "0000000040000000"  # PHYSICALOFFSET
    "00000000"  # SYSFLAG
    "0000018BCFE56800"  # BORNTIMESTAMP
    "C0A8000A0000C350"  # BORNHOST
    "0000018BCFE5687B"  # STORETIMESTAMP
    "C0A8000100002A9F"  # STOREHOST
    "00000000"  # RECONSUMETIMES
    "0000000000000000"  # PREPARED TRANSACTION OFFSET
    "0000000E"  # BODYLENGTH
    "48656C6C6F20526F636B65744D51"  # BODY
    "09"  # TOPICLENGTH
    "546F70696354657374"  # TOPIC
    "0049"  # PROPERTIESLENGTH 73
    "4B455953016B31206B3202554E49515F4B4559013746303030303031304530413138423441414332373835"
    "4235453437303030300257414954017472756502544147530154616741"
    "02"  # PROPERTIES
)
ENCODE_ORDER = list(WORKED)  # encode_record's argument order after (buf, pos, avail)
DECODE_ORDER = [
    "size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset", "sys_flag",
    "born_timestamp", "born_addr", "born_port", "store_timestamp", "store_addr", "store_port",
    "reconsume_times", "prepared_transaction_offset", "body", "topic", "properties",
]  # fmt: skip
# the IPv6 hosts of upstream MessageDecoderTest
V6_BORN = ipaddress.IPv6Address("1050:0000:0000:0000:0005:0600:300c:326b").packed
V6_STORE = ipaddress.IPv6Address("::1").packed


def msg(**over: Any) -> dict[str, Any]:
    m = dict(WORKED)
    m.update(over)
    return m


def encode(
    codec: Any, buf: Any = None, pos: int = 0, avail: int | None = None, **over: Any
) -> tuple[int, Any]:
    m = msg(**over)
    if buf is None:
        buf = bytearray(pos + 120_000)
    if avail is None:
        avail = len(buf) - pos
    n = codec.encode_record(buf, pos, avail, *[m[k] for k in ENCODE_ORDER])
    return n, buf


def record(codec: Any, **over: Any) -> bytes:
    n, buf = encode(codec, **over)
    assert n > 0
    return bytes(buf[:n])


def decoded(codec: Any, buf: Any, pos: int = 0, limit: int | None = None, verify: bool = True) -> dict | None:
    t = codec.decode_record(buf, pos, len(buf) if limit is None else limit, verify)
    return None if t is None else dict(zip(DECODE_ORDER, t, strict=True))


def outcome(fn: Any, *args: Any) -> tuple:
    """A comparable summary of a call: its result, or its exception class and position."""
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return ("raise", type(e), getattr(e, "position", None))


def new_out(cap: int) -> np.ndarray:
    return np.full((NCOLUMNS, cap), -7, dtype=np.int64)


# =================================================================================================
# API surface
# =================================================================================================


def _public(cls: type) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("__"))


def test_same_names_and_signatures():
    impls = twins()
    ref = impls[0].codec
    for other in impls[1:]:
        assert list(other.codec.__all__) == list(ref.__all__)
        for name in [*ref.__all__, "raise_for_status"]:
            if isinstance(getattr(ref, name), type):  # MessageExt: the same attributes and methods
                assert _public(getattr(ref, name)) == _public(getattr(other.codec, name)), name
                continue
            a = inspect.signature(getattr(ref, name)).parameters
            b = inspect.signature(getattr(other.codec, name)).parameters
            assert [(p.name, p.kind, p.default) for p in a.values()] == [
                (p.name, p.kind, p.default) for p in b.values()
            ], name


# =================================================================================================
# encode_record
# =================================================================================================


def test_worked_example_bytes(impl):
    rec = record(impl.codec)
    assert len(rec) == 187
    assert rec == bytes.fromhex(WORKED_HEX)
    assert struct.unpack_from(">i", rec, 8)[0] == 1_774_740_973 == zlib.crc32(b"Hello RocketMQ") & 0x7FFFFFFF


def test_worked_example_decodes(impl):
    d = decoded(impl.codec, bytes.fromhex(WORKED_HEX))
    want = msg()
    del want["v2"]
    assert d == dict(want, size=187, magic=MAGIC_V1, body_crc=1_774_740_973)


def test_worked_example_at_offset_in_every_buffer_type(impl):
    rec = bytes.fromhex(WORKED_HEX)
    ba = bytearray(b"\xee" * 300)
    assert impl.codec.encode_record(ba, 50, 250, *[WORKED[k] for k in ENCODE_ORDER]) == 187
    assert ba[50:237] == rec and ba[:50] == b"\xee" * 50 and ba[237:] == b"\xee" * 63
    mv = memoryview(bytearray(300))
    assert impl.codec.encode_record(mv, 10, 290, *[WORKED[k] for k in ENCODE_ORDER]) == 187
    assert mv[10:197] == rec
    mm = mmap.mmap(-1, 4096)
    try:
        assert impl.codec.encode_record(mm, 4096 - 195, 195, *[WORKED[k] for k in ENCODE_ORDER]) == 187
        assert mm[4096 - 195 : 4096 - 8] == rec
    finally:
        mm.close()


def test_bytes_like_fields(impl):
    conv = dict(
        topic=bytearray(b"TopicTest"),
        body=memoryview(b"Hello RocketMQ"),
        properties=bytearray(WORKED_PROPS),
        born_addr=memoryview(bytes([192, 168, 0, 10])),
        store_addr=bytearray([192, 168, 0, 1]),
    )
    assert record(impl.codec, **conv) == bytes.fromhex(WORKED_HEX)
    # a non-contiguous view is read as bytes() reads it
    strided = memoryview(b"HHeelllloo  RRoocckkeettMMQQ")[::2]
    assert record(impl.codec, body=strided) == bytes.fromhex(WORKED_HEX)


def test_record_size_formula(impl):
    rs = impl.codec.record_size
    assert rs(0, 0, 0, 0, False) == MIN_RECORD_SIZE == 91
    assert rs(14, 9, 73, 0, False) == 187
    assert rs(14, 9, 73, FLAG_BORNHOST_V6, False) == 199
    assert rs(14, 9, 73, FLAG_STOREHOST_V6, False) == 199
    assert rs(14, 9, 73, FLAG_BORNHOST_V6 | FLAG_STOREHOST_V6, True) == 212
    assert rs(-5, 1, 0, 0, False) == 92  # negative body length counts as 0
    assert rs(2**40, 1, 0, -1, True) == 91 + 2**40 + 1 + 24 + 1
    assert rs(2**70, 0, 0, 0, False) == 91 + 2**70


@pytest.mark.parametrize(
    "born, store, extra, bits",
    [
        (bytes(4), bytes(4), 0, 0),
        (V6_BORN, bytes(4), 12, FLAG_BORNHOST_V6),
        (bytes(4), V6_STORE, 12, FLAG_STOREHOST_V6),
        (V6_BORN, V6_STORE, 24, FLAG_BORNHOST_V6 | FLAG_STOREHOST_V6),
    ],
)
@pytest.mark.parametrize("given_bits", [0, FLAG_BORNHOST_V6, FLAG_STOREHOST_V6, 0x30])
def test_ipv6_hosts_and_forced_sysflag_bits(impl, born, store, extra, bits, given_bits):
    sys_flag = 0x8 | 0x200 | given_bits  # transaction commit + compression type bits survive
    rec = record(impl.codec, born_addr=born, store_addr=store, sys_flag=sys_flag)
    assert len(rec) == 187 + extra
    stored_flag = struct.unpack_from(">i", rec, 36)[0]
    assert stored_flag == 0x8 | 0x200 | bits
    bh = 20 if bits & FLAG_BORNHOST_V6 else 8
    assert rec[48 : 48 + bh - 4] == born
    assert struct.unpack_from(">i", rec, 48 + bh - 4)[0] == 50000
    assert struct.unpack_from(">q", rec, 48 + bh)[0] == 1_700_000_000_123  # STORETIMESTAMP: 56 or 68
    d = decoded(impl.codec, rec)
    assert d["born_addr"] == born and d["store_addr"] == store and d["sys_flag"] == stored_flag
    assert d["store_port"] == 10911 and d["body"] == b"Hello RocketMQ"
    assert impl.codec.scan_records(rec, 0, len(rec), True) == (ST_END, len(rec), 1, 1_700_000_000_123)


@pytest.mark.parametrize("bad", [b"", b"\x01\x02\x03", bytes(5), bytes(15), bytes(17)])
@pytest.mark.parametrize("which", ["born_addr", "store_addr"])
def test_bad_address_length(impl, bad, which):
    with pytest.raises(InvalidMessageError):
        encode(impl.codec, **{which: bad})


def test_v2_magic_and_two_byte_topic_length(impl):
    topic = b"%RETRY%" + b"g" * 193  # 200 bytes: needs V2
    rec = record(impl.codec, topic=topic, v2=True)
    assert len(rec) == 187 - 9 + 200 + 1
    assert struct.unpack_from(">i", rec, 4)[0] == MAGIC_V2
    p = 88 + 14
    assert rec[p : p + 2] == b"\x00\xc8" and rec[p + 2 : p + 202] == topic
    assert struct.unpack_from(">h", rec, p + 202)[0] == 73
    d = decoded(impl.codec, rec)
    assert d["topic"] == topic and d["magic"] == MAGIC_V2 and d["properties"] == WORKED_PROPS
    # a short topic in V2 also takes 2 length bytes
    rec2 = record(impl.codec, v2=True)
    assert (
        len(rec2) == 188
        and rec2[102:104] == b"\x00\x09"
        and decoded(impl.codec, rec2)["topic"] == b"TopicTest"
    )


def test_topic_length_limits(impl):
    assert len(record(impl.codec, topic=b"t" * 127)) == 187 - 9 + 127
    assert len(record(impl.codec, topic=b"t" * 1)) == 187 - 8
    for bad in (b"", b"t" * 128, b"t" * 255):
        with pytest.raises(InvalidMessageError):
            encode(impl.codec, topic=bad)
    assert len(record(impl.codec, topic=b"t" * 32767, v2=True)) == 187 - 9 + 32767 + 1
    for bad in (b"", b"t" * 32768):
        with pytest.raises(InvalidMessageError):
            encode(impl.codec, topic=bad, v2=True)


def test_empty_body(impl):
    rec = record(impl.codec, body=b"")
    assert len(rec) == 173
    assert struct.unpack_from(">ii", rec, 8)[0] == 0  # CRC of nothing
    assert struct.unpack_from(">i", rec, 84)[0] == 0
    d = decoded(impl.codec, rec)
    assert d["body"] == b"" and d["body_crc"] == 0 and d["topic"] == b"TopicTest"
    assert impl.codec.check_record(rec, 0, len(rec), True) == (ST_MSG, 173)


def test_properties_limit(impl):
    props = b"p" * 32767
    rec = record(impl.codec, properties=props)
    assert len(rec) == 187 - 73 + 32767
    assert decoded(impl.codec, rec)["properties"] == props
    with pytest.raises(PropertiesTooLargeError) as ei:
        encode(impl.codec, properties=b"p" * 32768)
    assert isinstance(ei.value, InvalidMessageError)
    assert len(record(impl.codec, properties=b"")) == 187 - 73


def test_returns_minus_size_when_it_does_not_fit(impl):
    # size + 8 == avail fits; one byte less does not, and nothing is written then
    buf = bytearray(b"\xaa" * 400)
    assert impl.codec.encode_record(buf, 100, 195, *[WORKED[k] for k in ENCODE_ORDER]) == 187
    buf = bytearray(b"\xaa" * 400)
    assert impl.codec.encode_record(buf, 100, 194, *[WORKED[k] for k in ENCODE_ORDER]) == -187
    assert buf == b"\xaa" * 400
    assert impl.codec.encode_record(buf, 400, 0, *[WORKED[k] for k in ENCODE_ORDER]) == -187


def test_range_errors(impl):
    args = [WORKED[k] for k in ENCODE_ORDER]
    buf = bytearray(300)
    for pos, avail in [(-1, 10), (0, 301), (1, 300), (0, -1), (300, 1), (2**63, 0), (0, 2**64)]:
        with pytest.raises(ValueError):
            impl.codec.encode_record(buf, pos, avail, *args)


@pytest.mark.parametrize(
    "field, lo, hi",
    [
        ("queue_id", *I32),
        ("flag", *I32),
        ("sys_flag", *I32),
        ("born_port", *I32),
        ("store_port", *I32),
        ("reconsume_times", *I32),
        ("queue_offset", *I64),
        ("physical_offset", *I64),
        ("born_timestamp", *I64),
        ("store_timestamp", *I64),
        ("prepared_transaction_offset", *I64),
    ],
)
def test_integer_field_ranges(impl, field, lo, hi):
    for ok in (lo, hi, 0, -1):
        rec = record(impl.codec, **{field: ok})
        if field != "sys_flag":
            assert decoded(impl.codec, rec)[field] == ok
    for bad in (lo - 1, hi + 1, 2**100, "1", 1.0, None):
        # sys_flag is masked (sys_flag & ~V6 bits) before anything else: a non-integer is a TypeError
        exc = TypeError if field == "sys_flag" and not isinstance(bad, int) else InvalidMessageError
        with pytest.raises(exc):
            encode(impl.codec, **{field: bad})
    # the twin's order: a record that does not fit is reported (-size) before its fields are packed
    assert encode(impl.codec, avail=100, **{field: hi + 1})[0] == -187


def test_type_errors_for_non_bytes(impl):
    for field in ("topic", "body", "properties"):
        with pytest.raises(TypeError):
            encode(impl.codec, **{field: "text"})
    with pytest.raises(TypeError):
        encode(impl.codec, sys_flag="0")


def test_read_only_buffer(impl):
    args = [WORKED[k] for k in ENCODE_ORDER]
    with pytest.raises(TypeError):
        impl.codec.encode_record(bytes(300), 0, 300, *args)
    with pytest.raises(TypeError):
        impl.codec.encode_record(memoryview(bytes(300)), 0, 300, *args)
    assert impl.codec.encode_record(bytes(300), 0, 100, *args) == -187  # no write, no error


def test_large_body(impl):
    body = bytes(range(256)) * 400  # 100 KiB: CRC and copy without the GIL in the native twin
    rec = record(impl.codec, body=body)
    assert struct.unpack_from(">i", rec, 8)[0] == zlib.crc32(body) & 0x7FFFFFFF
    assert decoded(impl.codec, rec)["body"] == body
    assert impl.codec.check_record(rec, 0, len(rec), True) == (ST_MSG, len(rec))
    bad = bytearray(rec)
    bad[88 + 50_000] ^= 1
    assert impl.codec.check_record(bad, 0, len(bad), True) == (ST_BAD_CRC, len(rec))


def test_source_overlapping_destination():
    """A body that is a view of the destination is snapshotted first (bytes() in the pure twin)."""
    impls = twins()
    results = []
    for i in impls:
        buf = bytearray(bytes(range(256)) * 4)
        body = memoryview(buf)[20:120]
        n = i.codec.encode_record(buf, 0, len(buf), *[msg(body=body)[k] for k in ENCODE_ORDER])
        results.append(bytes(buf))
        assert decoded(i.codec, buf, 0, n)["body"] == bytes(range(20, 120))
        batch_buf = bytearray(bytes(range(256)) * 4)
        mv = memoryview(batch_buf)
        out = i.codec.encode_batch(
            batch_buf, 0, len(batch_buf), b"T", 0, 0, 0, 0, 0, bytes(4), 0, 0, bytes(4), 0,
            [mv[10:30], mv[40:50]], [mv[0:5], b""], None, False, None,
        )  # fmt: skip
        results.append((out, bytes(batch_buf)))
    assert all(r == results[0] for r in results[0::2]) and all(r == results[1] for r in results[1::2])


# =================================================================================================
# encode_batch
# =================================================================================================

BATCH_HEAD = dict(
    topic=b"TopicTest",
    queue_id=5,
    queue_offset=1000,
    physical_offset=2**40,
    sys_flag=0x1,
    born_timestamp=1_700_000_000_000,
    born_addr=bytes([10, 0, 0, 1]),
    born_port=1234,
    store_timestamp=1_700_000_000_005,
    store_addr=V6_STORE,
    store_port=10911,
)


def batch(codec, buf, pos, avail, bodies, props, flags=None, v2=False, sizes_out=None, **over):
    h = dict(BATCH_HEAD, **over)
    return codec.encode_batch(
        buf, pos, avail, h["topic"], h["queue_id"], h["queue_offset"], h["physical_offset"], h["sys_flag"],
        h["born_timestamp"], h["born_addr"], h["born_port"], h["store_timestamp"], h["store_addr"],
        h["store_port"], bodies, props, flags, v2, sizes_out,
    )  # fmt: skip


def test_batch_records(impl):
    bodies = [b"", b"a" * 10, bytearray(b"b" * 300), memoryview(b"c" * 7)]
    props = [b"KEYS\x01k\x02", b"", b"x" * 40, bytearray(b"TAGS\x01t\x02")]
    flags = [0, -1, 2**31 - 1, 7]
    sizes = np.zeros(6, np.int64)
    buf = bytearray(4096)
    n, total = batch(impl.codec, buf, 16, 4000, bodies, props, flags, sizes_out=sizes)
    assert n == 4
    v6 = 12
    want = [91 + len(b) + 9 + len(p) + v6 for b, p in zip(bodies, props, strict=True)]
    assert list(sizes[:4]) == want and list(sizes[4:]) == [0, 0] and total == sum(want)
    pos = 16
    for i in range(4):
        d = decoded(impl.codec, buf, pos, 16 + total)
        assert d["size"] == want[i]
        assert d["body"] == bytes(bodies[i]) and d["properties"] == bytes(props[i]) and d["flag"] == flags[i]
        assert d["queue_offset"] == 1000 + i and d["physical_offset"] == 2**40 + pos - 16
        assert d["reconsume_times"] == 0 and d["prepared_transaction_offset"] == 0
        assert d["sys_flag"] == 0x1 | FLAG_STOREHOST_V6 and d["store_addr"] == V6_STORE
        assert d["topic"] == b"TopicTest" and d["queue_id"] == 5
        pos += want[i]
    assert buf[16 + total :] == bytes(4096 - 16 - total)


def test_batch_equals_single_records(impl):
    bodies = [bytes([i]) * (i * 13) for i in range(20)]
    props = [b"UNIQ_KEY\x01%d\x02" % i for i in range(20)]
    a = bytearray(8192)
    n, total = batch(impl.codec, a, 0, 8192, bodies, props, None, v2=True)
    b = bytearray(8192)
    p = 0
    for i in range(20):
        h = dict(BATCH_HEAD)
        p += impl.codec.encode_record(
            b, p, 8192 - p, h["topic"], h["queue_id"], 0, 1000 + i, 2**40 + p, h["sys_flag"],
            h["born_timestamp"], h["born_addr"], h["born_port"], h["store_timestamp"], h["store_addr"],
            h["store_port"], 0, 0, bodies[i], props[i], True,
        )  # fmt: skip
    assert (n, total) == (20, p) and a == b


def test_batch_flag_and_size_containers(impl):
    bodies = [b"x" * 5] * 3
    props = [b""] * 3
    ref = bytearray(1024)
    sizes = [0, 0, 0, 99]
    assert batch(impl.codec, ref, 0, 1024, bodies, props, [1, 2, 3], sizes_out=sizes) == (
        3,
        3 * (91 + 5 + 9 + 12),
    )
    assert sizes == [117, 117, 117, 99]
    for flags in (
        np.array([1, 2, 3], np.int64),
        np.array([1, 2, 3], np.int32),
        (1, 2, 3),
        np.array([1, 2, 3], np.uint8),
    ):
        buf = bytearray(1024)
        so = np.zeros(3, np.int64)
        assert batch(impl.codec, buf, 0, 1024, tuple(bodies), tuple(props), flags, sizes_out=so)[0] == 3
        assert buf == ref and list(so) == [117] * 3
    with pytest.raises(InvalidMessageError):
        batch(impl.codec, bytearray(1024), 0, 1024, bodies, props, np.array([0, 2**31, 0], np.int64))


def test_batch_not_fitting_writes_nothing(impl):
    bodies = [b"z" * 100] * 10
    props = [b"KEYS\x01k\x02"] * 10
    size = 91 + 100 + 9 + 7 + 12
    buf = bytearray(b"\x5a" * 4000)
    sizes = np.full(10, -1, np.int64)
    assert batch(impl.codec, buf, 100, 10 * size + 7, bodies, props, sizes_out=sizes) == (0, -10 * size)
    assert buf == b"\x5a" * 4000 and (sizes == -1).all()
    assert batch(impl.codec, buf, 100, 10 * size + 8, bodies, props, sizes_out=sizes) == (10, 10 * size)
    assert (sizes == size).all()
    # fields are not validated when the batch does not fit (it is re-encoded in the next file)
    assert batch(impl.codec, bytearray(100), 0, 100, bodies, props, topic=b"") == (0, -10 * (size - 9))


@pytest.mark.parametrize(
    "case, exc",
    [
        (dict(props_i=b"p" * 32768), PropertiesTooLargeError),
        (dict(flag_last=2**31), InvalidMessageError),
        (dict(flag_last="x"), InvalidMessageError),
        (dict(body_i="str"), TypeError),
        (dict(body_i=12), TypeError),
        (dict(topic=b""), InvalidMessageError),
        (dict(topic=b"t" * 128), InvalidMessageError),
        (dict(queue_offset=2**63 - 3), InvalidMessageError),  # queue_offset + i overflows a long
        (dict(physical_offset=2**63 - 300), InvalidMessageError),
        (dict(queue_id=2**31), InvalidMessageError),
        (dict(born_timestamp=-(2**63) - 1), InvalidMessageError),
        (dict(sys_flag=2**31), InvalidMessageError),
        (dict(born_addr=bytes(6)), InvalidMessageError),
    ],
)
def test_batch_all_or_nothing(impl, case, exc):
    bodies = [b"q" * 30 for _ in range(5)]
    props = [b"" for _ in range(5)]
    flags = [0] * 5
    case = dict(case)
    if "props_i" in case:
        props[3] = case.pop("props_i")
    if "flag_last" in case:
        flags[4] = case.pop("flag_last")
    if "body_i" in case:
        bodies[2] = case.pop("body_i")
    buf = bytearray(b"\x11" * 80_000)
    sizes = np.full(5, -1, np.int64)
    with pytest.raises(exc):
        batch(impl.codec, buf, 0, 80_000, bodies, props, flags, sizes_out=sizes, **case)
    assert buf == b"\x11" * 80_000 and (sizes == -1).all()


def test_batch_argument_errors(impl):
    buf = bytearray(1000)
    with pytest.raises(InvalidMessageError):
        batch(impl.codec, buf, 0, 1000, [b"a", b"b"], [b""])
    with pytest.raises(InvalidMessageError):
        batch(impl.codec, buf, 0, 1000, [b"a"], [b""], [1, 2])
    with pytest.raises(ValueError):
        batch(impl.codec, buf, 0, 1000, [b"a", b"b"], [b"", b""], sizes_out=np.zeros(1, np.int64))
    for pos, avail in [(-1, 10), (0, 1001), (900, 101)]:
        with pytest.raises(ValueError):
            batch(impl.codec, buf, pos, avail, [b"a"], [b""])
    assert batch(impl.codec, buf, 0, 1000, [], []) == (0, 0)
    assert batch(impl.codec, buf, 0, 1000, [], [], topic=b"") == (0, 0)
    assert buf == bytes(1000)


def test_batch_large_releases_gil_path(impl):
    bodies = [bytes([i]) * 5000 for i in range(30)]
    props = [b"k\x01v\x02"] * 30
    buf = bytearray(200_000)
    n, total = batch(impl.codec, buf, 0, len(buf), bodies, props)
    assert n == 30
    st, end, count, _ = impl.codec.scan_records(buf, 0, len(buf), True)
    assert (st, end, count) == (ST_END, total, 30)


# =================================================================================================
# encode_blank
# =================================================================================================


def test_blank(impl):
    buf = bytearray(b"\xff" * 32)
    impl.codec.encode_blank(buf, 20, 12)
    assert buf[20:28] == bytes.fromhex("0000000C CBD43194".replace(" ", ""))
    assert buf[:20] == b"\xff" * 20 and buf[28:] == b"\xff" * 4
    assert impl.codec.peek_record(buf, 20, 32) == (ST_BLANK, 12)
    assert impl.codec.check_record(buf, 20, 32, True) == (ST_BLANK, 12)
    assert impl.codec.decode_record(buf, 20, 32, True) is None
    impl.codec.encode_blank(buf, 24, 2**31 - 1)
    for pos in (-1, 25, 2**64):
        with pytest.raises(ValueError):
            impl.codec.encode_blank(buf, pos, 8)
    with pytest.raises(TypeError):
        impl.codec.encode_blank(bytes(8), 0, 8)


def test_blank_remaining_out_of_range_same_class():
    impls = twins()
    classes = {outcome(i.codec.encode_blank, bytearray(8), 0, 2**31)[1] for i in impls}
    assert len(classes) == 1 and classes != {"ok"}


# =================================================================================================
# peek / check / scan
# =================================================================================================


def stream(codec, n=3, **over) -> tuple[bytes, list[int]]:
    """n records back to back (different bodies), and their start positions."""
    out = b""
    starts = []
    for i in range(n):
        starts.append(len(out))
        out += record(codec, body=b"body-%d" % i * (i + 1), queue_offset=i, physical_offset=len(out), **over)
    return out, starts


def test_end_on_zeros(impl):
    c = impl.codec
    for k in range(0, 20):
        z = bytes(k)
        assert c.peek_record(z, 0, k) == (ST_END, 0)
        assert c.check_record(z, 0, k, True) == (ST_END, 0)
        assert c.scan_records(z, 0, k, True) == (ST_END, 0, 0, -1)
        assert c.decode_record(z, 0, k, True) is None
    assert c.peek_record(b"\x00\x00\x00\x05\x00\x00\x00\x00", 0, 8) == (ST_BAD_MAGIC, 5)
    assert c.peek_record(b"\x00\x00\x01", 0, 3) == (ST_TORN, 0)


def test_blank_stops_scan(impl):
    recs, starts = stream(impl.codec, 3)
    buf = bytearray(recs + bytes(100))
    impl.codec.encode_blank(buf, len(recs), 100)
    assert impl.codec.scan_records(buf, 0, len(buf), True)[:3] == (ST_BLANK, len(recs), 3)
    out = new_out(10)
    assert impl.codec.decode_batch(buf, 0, len(buf), out, True) == (3, len(recs), ST_BLANK)


def test_torn_at_every_truncation_point(impl):
    c = impl.codec
    recs, starts = stream(c, 2)
    last = starts[1]
    size = len(recs) - last
    for cut in range(1, size):
        limit = last + cut
        prefix = recs[last:limit]
        expect = ST_END if cut < 8 and not any(prefix) else ST_TORN
        for buf in (recs, recs[:limit]):  # a short limit and a short buffer are the same thing
            st, _ = c.peek_record(buf, last, limit)
            assert st == expect, cut
            assert c.check_record(buf, last, limit, True)[0] == expect
            assert c.scan_records(buf, 0, limit, True)[:3] == (expect, last, 1)
            assert c.decode_batch(buf, 0, limit, new_out(4), True) == (1, last, expect)
            if expect == ST_TORN:
                with pytest.raises(TruncatedRecordError) as ei:
                    c.decode_record(buf, last, limit, True)
                assert ei.value.position == last
            else:
                assert c.decode_record(buf, last, limit, True) is None
    assert c.scan_records(recs, 0, len(recs), True)[:3] == (ST_END, len(recs), 2)


def test_bad_magic(impl):
    rec = bytearray(record(impl.codec))
    rec[4:8] = b"\x12\x34\x56\x78"
    assert impl.codec.peek_record(rec, 0, len(rec)) == (ST_BAD_MAGIC, 187)
    rec[0:8] = bytes(4) + b"\x00\x00\x00\x01"
    assert impl.codec.peek_record(rec, 0, len(rec)) == (ST_BAD_MAGIC, 0)


def test_bad_size(impl):
    c = impl.codec
    rec = record(c)
    for total in (0, 1, 90, -1, -(2**31)):
        bad = bytearray(rec)
        struct.pack_into(">i", bad, 0, total)
        assert c.peek_record(bad, 0, len(bad)) == (ST_BAD_SIZE, total)
    # TOTALSIZE one larger than the fields say (an extra byte is there)
    bad = bytearray(rec + b"\x00")
    struct.pack_into(">i", bad, 0, 188)
    assert c.peek_record(bad, 0, 188) == (ST_MSG, 188)
    assert c.check_record(bad, 0, 188, False) == (ST_BAD_SIZE, 188)
    # body length, topic length or properties length inconsistent with TOTALSIZE
    damage = [
        (84, ">i", 15), (84, ">i", -1), (84, ">i", 2**31 - 1), (102, ">b", -1), (102, ">b", 10),
        (112, ">h", 72), (112, ">h", -1), (36, ">i", FLAG_BORNHOST_V6),
    ]  # fmt: skip
    for off, fmt, value in damage:
        bad = bytearray(rec)
        struct.pack_into(fmt, bad, off, value)
        assert c.check_record(bad, 0, len(bad), True) == (ST_BAD_SIZE, 187), (off, value)
        with pytest.raises(RecordSizeError):
            c.decode_record(bad, 0, len(bad), True)
    # a record of exactly 91 bytes is the smallest possible one: empty body/topic/properties (V1)
    tiny = bytearray(rec[:91])
    struct.pack_into(">i", tiny, 0, 91)
    struct.pack_into(">ib", tiny, 84, 0, 0)
    struct.pack_into(">h", tiny, 89, 0)
    struct.pack_into(">i", tiny, 8, 0)
    assert c.check_record(tiny, 0, 91, True) == (ST_MSG, 91)
    assert decoded(c, tiny)["topic"] == b""


def test_negative_body_length_counts_as_empty(impl):
    """The size formula treats a negative BODYLENGTH as 0; such a record is valid with an empty body."""
    rec = bytearray(record(impl.codec, body=b""))
    struct.pack_into(">i", rec, 84, -5)
    assert impl.codec.check_record(rec, 0, len(rec), True) == (ST_MSG, len(rec))
    assert decoded(impl.codec, rec)["body"] == b""
    out = new_out(1)
    impl.codec.decode_batch(rec, 0, len(rec), out, True)
    assert out[C_BODY_LEN, 0] == 0


def test_bad_crc_only_when_verifying(impl):
    c = impl.codec
    recs, starts = stream(c, 3)
    bad = bytearray(recs)
    bad[starts[1] + 88] ^= 0x40  # first body byte of the second record
    assert c.check_record(bad, starts[1], len(bad), True) == (ST_BAD_CRC, starts[2] - starts[1])
    assert c.check_record(bad, starts[1], len(bad), False) == (ST_MSG, starts[2] - starts[1])
    assert c.scan_records(bad, 0, len(bad), True)[:3] == (ST_BAD_CRC, starts[1], 1)
    assert c.scan_records(bad, 0, len(bad), False)[:3] == (ST_END, len(bad), 3)
    with pytest.raises(ChecksumError) as ei:
        c.decode_record(bad, starts[1], len(bad), True)
    assert ei.value.position == starts[1]
    assert decoded(c, bad, starts[1], verify=False)["body"] != decoded(c, recs, starts[1])["body"]
    assert c.decode_batch(bad, 0, len(bad), new_out(5), True) == (1, starts[1], ST_BAD_CRC)
    # a stored CRC with bit 31 set can never match the masked CRC
    bad = bytearray(recs)
    bad[8] |= 0x80
    assert c.check_record(bad, 0, len(bad), True)[0] == ST_BAD_CRC


def test_scan_max_records_and_timestamps(impl):
    c = impl.codec
    recs = b"".join(
        record(c, store_timestamp=1000 + i, born_addr=V6_BORN if i % 2 else bytes(4)) for i in range(5)
    )
    assert c.scan_records(recs, 0, len(recs), True) == (ST_END, len(recs), 5, 1004)
    st, end, count, ts = c.scan_records(recs, 0, len(recs), True, 2)
    assert (st, count, ts) == (ST_MSG, 2, 1001)
    assert c.scan_records(recs, end, len(recs), True, 2)[2:] == (2, 1003)
    assert c.scan_records(recs, 0, len(recs), True, 0) == (ST_MSG, 0, 0, -1)
    assert c.scan_records(recs, 0, len(recs), True, 2**80) == (ST_END, len(recs), 5, 1004)
    assert c.scan_records(recs, 0, len(recs), True, -(2**80)) == (ST_END, len(recs), 5, 1004)


@pytest.mark.parametrize("fn", ["peek", "check", "scan", "decode", "batch"])
def test_range_checks(impl, fn):
    c = impl.codec
    calls = {
        "peek": lambda b, p, lim: c.peek_record(b, p, lim),
        "check": lambda b, p, lim: c.check_record(b, p, lim, True),
        "scan": lambda b, p, lim: c.scan_records(b, p, lim, True),
        "decode": lambda b, p, lim: c.decode_record(b, p, lim, True),
        "batch": lambda b, p, lim: c.decode_batch(b, p, lim, new_out(2), True),
    }
    buf = bytes(100)
    for p, lim in [(-1, 10), (10, 9), (0, 101), (2**64, 2**64), (0, 2**64), (-(2**64), 0)]:
        with pytest.raises(ValueError):
            calls[fn](buf, p, lim)
    calls[fn](buf, 100, 100)
    calls[fn](b"", 0, 0)


def test_read_only_inputs(impl):
    recs, starts = stream(impl.codec, 3)
    mm = mmap.mmap(-1, 8192)
    mm[: len(recs)] = recs
    try:
        for buf in (recs, bytearray(recs), memoryview(recs), mm):
            assert impl.codec.scan_records(buf, 0, len(recs), True)[:3] == (ST_END, len(recs), 3)
            assert decoded(impl.codec, buf, starts[2], len(recs))["queue_offset"] == 2
            assert impl.codec.decode_batch(buf, 0, len(recs), new_out(3), True) == (3, len(recs), ST_MSG)
            assert impl.codec.peek_record(buf, 0, len(recs)) == (ST_MSG, starts[1])
    finally:
        mm.close()


def test_read_only_mmap(impl, tmp_path):
    recs, starts = stream(impl.codec, 2)
    path = tmp_path / "seg"
    path.write_bytes(recs + bytes(64))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert impl.codec.scan_records(mm, 0, len(mm), True)[:3] == (ST_END, len(recs), 2)
        assert decoded(impl.codec, mm, starts[1], len(mm))["queue_offset"] == 1
        assert impl.codec.check_record(mm, 0, len(mm), True) == (ST_MSG, starts[1])
        assert impl.codec.decode_batch(mm, 0, len(mm), new_out(4), True) == (2, len(recs), ST_END)


# =================================================================================================
# decode_record / decode_batch
# =================================================================================================


def test_decode_record_errors_have_position(impl):
    c = impl.codec
    recs, starts = stream(c, 3)
    base = bytearray(b"\x00" * 13 + recs)
    p = 13 + starts[1]
    cases = []
    b = bytearray(base)
    b[p + 4] ^= 0xFF
    cases.append((b, BadMagicError))
    b = bytearray(base)
    struct.pack_into(">i", b, p, 50)
    cases.append((b, RecordSizeError))
    b = bytearray(base)
    struct.pack_into(">i", b, p + 84, 1)
    cases.append((b, RecordSizeError))
    b = bytearray(base)
    b[p + 90] ^= 1
    cases.append((b, ChecksumError))
    cases.append((base[: p + 100], TruncatedRecordError))
    for buf, exc in cases:
        with pytest.raises(exc) as ei:
            c.decode_record(buf, p, len(buf), True)
        assert ei.value.position == p and isinstance(ei.value, CorruptionError)
        assert ei.value.path is None
    assert c.decode_record(base, 0, len(base), True) is None  # 13 zero bytes then data: END at zeros


def test_raise_for_status(impl):
    for status, exc in [(ST_TORN, TruncatedRecordError), (ST_BAD_MAGIC, BadMagicError),
                        (ST_BAD_SIZE, RecordSizeError), (ST_BAD_CRC, ChecksumError)]:  # fmt: skip
        with pytest.raises(exc) as ei:
            impl.codec.raise_for_status(status, 1234)
        assert ei.value.position == 1234
    with pytest.raises(KeyError):
        impl.codec.raise_for_status(ST_MSG, 0)


def test_decode_batch_columns_match_decode_record(impl):
    c = impl.codec
    parts = []
    for i in range(7):
        parts.append(
            record(
                c, body=b"B" * (i * 37), topic=b"T%d" % i, properties=b"P" * i, queue_id=i, flag=-i,
                queue_offset=10 + i, physical_offset=2**50 + i, sys_flag=0x8 if i % 2 else 0,
                born_addr=V6_BORN if i % 3 == 0 else bytes(4), store_addr=V6_STORE if i % 2 else bytes(4),
                born_port=i, store_port=2 * i, reconsume_times=3 * i, prepared_transaction_offset=-i,
                born_timestamp=-(2**63), store_timestamp=2**63 - 1 - i, v2=i >= 5,
            )
        )  # fmt: skip
    buf = b"\x00" * 5 + b"".join(parts) + bytes(8)
    out = new_out(10)
    count, end, status = c.decode_batch(buf, 5, len(buf), out, True)
    assert (count, end, status) == (7, len(buf) - 8, ST_END)
    assert (out[:, 7:] == -7).all()
    pos = 5
    for k in range(count):
        d = decoded(c, buf, pos)
        col = out[:, k]
        assert col[C_POSITION] == pos and col[C_SIZE] == d["size"] and col[C_MAGIC] == d["magic"]
        assert (
            col[C_BODY_CRC] == d["body_crc"] and col[C_QUEUE_ID] == d["queue_id"] and col[C_FLAG] == d["flag"]
        )
        assert col[C_QUEUE_OFFSET] == d["queue_offset"] and col[C_PHYSICAL_OFFSET] == d["physical_offset"]
        assert col[C_SYS_FLAG] == d["sys_flag"] and col[C_BORN_TIMESTAMP] == d["born_timestamp"]
        assert col[C_BORN_PORT] == d["born_port"] and col[C_STORE_PORT] == d["store_port"]
        assert (
            col[C_STORE_TIMESTAMP] == d["store_timestamp"] and col[C_RECONSUME_TIMES] == d["reconsume_times"]
        )
        assert col[C_PREPARED_TX_OFFSET] == d["prepared_transaction_offset"]
        bh = len(d["born_addr"])
        assert buf[col[C_BORN_HOST_POS] : col[C_BORN_HOST_POS] + bh] == d["born_addr"]
        sh = len(d["store_addr"])
        assert buf[col[C_STORE_HOST_POS] : col[C_STORE_HOST_POS] + sh] == d["store_addr"]
        assert buf[col[C_BODY_POS] : col[C_BODY_POS] + col[C_BODY_LEN]] == d["body"]
        assert buf[col[C_TOPIC_POS] : col[C_TOPIC_POS] + col[C_TOPIC_LEN]] == d["topic"]
        assert buf[col[C_PROPERTIES_POS] : col[C_PROPERTIES_POS] + col[C_PROPERTIES_LEN]] == d["properties"]
        pos += d["size"]


def test_decode_batch_capacity(impl):
    c = impl.codec
    recs, starts = stream(c, 5)
    out = new_out(3)
    assert c.decode_batch(recs, 0, len(recs), out, True) == (3, starts[3], ST_MSG)
    assert list(out[C_POSITION]) == starts[:3]
    assert c.decode_batch(recs, starts[3], len(recs), out, True) == (2, len(recs), ST_END)
    assert c.decode_batch(recs, 0, len(recs), new_out(5), True) == (5, len(recs), ST_MSG)
    empty = new_out(0)
    assert c.decode_batch(recs, starts[1], len(recs), empty, True) == (0, starts[1], ST_MSG)
    assert c.decode_batch(b"garbage!" * 20, 3, 160, empty, True) == (0, 3, ST_MSG)


def test_decode_batch_out_validation(impl):
    recs, _ = stream(impl.codec, 2)
    for bad in (
        np.zeros((NCOLUMNS - 1, 4), np.int64),
        np.zeros(NCOLUMNS, np.int64),
        [[0] * 4] * NCOLUMNS,
        None,
    ):
        with pytest.raises(ValueError):
            impl.codec.decode_batch(recs, 0, len(recs), bad, True)


def test_decode_batch_into_views_and_other_dtypes():
    """Strided views of a bigger array, float arrays, read-only arrays: same as the pure twin."""
    impls = twins()
    recs, starts = stream(impls[0].codec, 4)
    results = []
    for i in impls:
        big = np.full((NCOLUMNS, 10), -1, np.int64)
        r1 = i.codec.decode_batch(recs, 0, len(recs), big[:, 2:5], True)
        fortran = np.asfortranarray(np.zeros((NCOLUMNS, 6), np.int64))
        r2 = i.codec.decode_batch(recs, 0, len(recs), fortran, True)
        flt = np.zeros((NCOLUMNS, 6), np.float64)
        r3 = i.codec.decode_batch(recs, 0, len(recs), flt, True)
        ro = np.zeros((NCOLUMNS, 6), np.int64)
        ro.flags.writeable = False
        r4 = outcome(i.codec.decode_batch, recs, 0, len(recs), ro, True)
        r5 = i.codec.decode_batch(recs, len(recs), len(recs), ro, True)  # nothing to write: no error
        results.append((r1, big.tolist(), r2, fortran.tolist(), r3, flt.tolist(), r4, r5))
    assert all(r == results[0] for r in results)
    assert results[0][0] == (3, starts[3], ST_MSG) and results[0][6][0] == "raise"


# =================================================================================================
# properties: crossing, parity and fuzz
# =================================================================================================

i32 = st.integers(*I32)
i64 = st.integers(*I64)
addr = st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16))


@st.composite
def messages(draw: Any) -> dict[str, Any]:
    v2 = draw(st.booleans())
    return dict(
        topic=draw(st.binary(min_size=1, max_size=300 if v2 else 127)),
        queue_id=draw(i32),
        flag=draw(i32),
        queue_offset=draw(i64),
        physical_offset=draw(i64),
        sys_flag=draw(i32),
        born_timestamp=draw(i64),
        born_addr=draw(addr),
        born_port=draw(i32),
        store_timestamp=draw(i64),
        store_addr=draw(addr),
        store_port=draw(i32),
        reconsume_times=draw(i32),
        prepared_transaction_offset=draw(i64),
        body=draw(st.one_of(st.binary(max_size=300), st.binary(min_size=4000, max_size=5000))),
        properties=draw(st.binary(max_size=400)),
        v2=v2,
    )


@st.composite
def neighbours(draw: Any) -> list[dict[str, Any]]:
    """Records whose shared-looking fields (magic, hosts, ports, topic) come from small pools, so
    consecutive decodes meet equal values, equal lengths with other bytes, and other lengths."""
    n = draw(st.integers(2, 8))
    out = []
    for _ in range(n):
        v2 = draw(st.booleans())
        out.append(msg(
            topic=draw(st.sampled_from([b"TopicA", b"TopicB", b"T", b"x" * 130 if v2 else b"TopicA"])),
            born_addr=draw(st.sampled_from([b"\x7f\x00\x00\x01", b"\x7f\x00\x00\x02", V6_BORN])),
            store_addr=draw(st.sampled_from([b"\xc0\xa8\x00\x01", b"\xc0\xa8\x00\x02", V6_STORE])),
            born_port=draw(st.sampled_from([0, 9, 10911, -1])),
            store_port=draw(st.sampled_from([10911, 10912])),
            born_timestamp=draw(st.sampled_from([1, 1_700_000_000_000])),
            store_timestamp=draw(st.sampled_from([1, 1_700_000_000_000])),
            physical_offset=draw(st.sampled_from([0, 64, 2**40])),
            v2=v2,
        ))
    return out


@CROSS
@given(ms=neighbours(), order=st.randoms(use_true_random=False))
def test_decoding_neighbours_shares_nothing_wrong(ms, order):
    """The native decoder hands out one object for a field value the previous record had (its
    magic, hosts, ports, topic): in any decoding order every field still equals the encoded one,
    and equal values are then the same object."""
    impls = twins()
    buf, starts = bytearray(), []
    for m in ms:
        starts.append(len(buf))
        buf += record(impls[0].codec, **m)
    idx = list(range(len(ms)))
    order.shuffle(idx)
    for dec in impls:
        prev = None
        for i in idx:
            d = decoded(dec.codec, bytes(buf), starts[i])
            assert d is not None
            for k in ("topic", "born_addr", "store_addr", "born_port", "store_port", "born_timestamp",
                      "store_timestamp", "physical_offset", "body", "properties"):
                assert d[k] == ms[i][k], k
            assert d["magic"] == (MAGIC_V2 if ms[i]["v2"] else MAGIC_V1)
            if dec.name == "native" and prev is not None:
                for k in ("topic", "born_addr", "store_addr", "store_port", "magic"):
                    if d[k] == prev[k] and not (k == "topic" and len(d[k]) > 128):  # longer: not compared
                        assert d[k] is prev[k], k
            prev = d


@CROSS
@given(ms=neighbours(), data=st.data())
def test_decode_messages_is_decode_record_of_each(ms, data):
    """``decode_messages`` = ``decode_record`` at each position, built by the factory (MessageExt,
    made directly by the native twin, or any callable): the same list, the same stop at a BLANK or
    at the end of the data, the same first error at a corrupt record or a position out of range."""
    impls = twins()
    from rmqcore.message import MessageExt

    buf, starts = bytearray(), []
    for m in ms:
        starts.append(len(buf))
        buf += record(impls[0].codec, **m)
    end = len(buf)
    buf += struct.pack(">ii", 8, MAGIC_BLANK)  # a BLANK
    if data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(ms) - 1))
        buf[starts[i] + data.draw(st.integers(0, 60))] ^= 0x5A  # a header byte: any outcome
    pool = starts + [end, len(buf), 3, -1]
    positions = data.draw(st.lists(st.sampled_from(pool), max_size=10))
    base = data.draw(st.sampled_from([0, 1 << 30]))
    limit = data.draw(st.sampled_from([len(buf), end]))
    frozen = bytes(buf)

    def one(dec: Any, factory: Any) -> tuple:
        try:
            got, n = dec.codec.decode_messages(frozen, base, positions, limit, True, factory)
        except Exception as e:  # noqa: BLE001 - the class and position are compared
            return ("raise", type(e), getattr(e, "position", None))
        return ("ok", n, [tuple(getattr(m, f) for f in MessageExt.FIELDS if f != "_props")
                          if isinstance(m, MessageExt) else m for m in got])

    def each(factory: Any) -> tuple:
        out = []
        for p in positions:
            try:
                raw = impls[0].codec.decode_record(frozen, p, limit, True)
            except Exception as e:  # noqa: BLE001
                return ("raise", type(e), getattr(e, "position", None))
            if raw is None:
                break
            m = factory(base + p, raw)
            out.append(tuple(getattr(m, f) for f in MessageExt.FIELDS if f != "_props")
                       if isinstance(m, MessageExt) else m)
        return ("ok", len(out), out)

    for factory in (MessageExt, lambda off, raw: (off, raw)):
        want = each(factory)
        for dec in impls:
            assert one(dec, factory) == want, dec.name


_DERIVED = ("born_host", "store_host", "topic", "properties_string", "properties", "tags", "keys", "uniq_key",
            "msg_id", "compression_type", "tags_code", "transaction_type", "version")


def _message_view(m: Any) -> tuple:
    """Everything a MessageExt answers: its fields, its properties (or the exception one raises),
    its decompressed body (or exception) and its repr."""
    out: list[Any] = [getattr(m, f) for f in m.FIELDS]
    for name in _DERIVED:
        try:
            out.append(getattr(m, name))
        except Exception as e:  # noqa: BLE001 - the class is compared
            out.append(("raise", type(e)))
    try:
        out.append(m.decompressed_body())
    except Exception as e:  # noqa: BLE001
        out.append(("raise", type(e)))
    out.append(repr(m))
    return tuple(out)


@st.composite
def property_strings(draw: Any) -> bytes:
    """Properties that name tags, keys, a UNIQ_KEY or a delay level, or arbitrary bytes."""
    pairs = draw(st.lists(st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "X", ""]),
                                    st.text(st.sampled_from("ab 1\u00e9-"), max_size=6)), max_size=5))
    return draw(st.one_of(st.binary(max_size=40),
                          st.just("\x02".join(f"{k}\x01{v}" for k, v in pairs).encode())))


@CROSS
@given(m=messages(), props=property_strings(), delay=st.booleans(), sys_flag=i32, position=i64)
def test_message_ext_twins_answer_alike(m, props, delay, sys_flag, position):
    """MessageExt, both twins (the native one has C fields): built from the same decode_record
    tuple (and, natively, by decode_messages without __init__), every field, property, the
    decompressed body and the repr are equal; pickling and copying keep all of it; a tuple of
    the wrong length raises ValueError in both."""
    impls = twins()
    import copy
    import pickle

    m = dict(m, properties=props, sys_flag=sys_flag)
    if delay:
        m["topic"] = b"SCHEDULE_TOPIC_XXXX"
    buf = record(impls[0].codec, **m)
    raw = impls[0].codec.decode_record(buf, 0, len(buf), True)
    views = []
    for dec in impls:
        cls = dec.codec.MessageExt
        made = cls(position, raw)
        assert made.FIELDS == impls[0].codec.MessageExt.FIELDS
        (direct,), n = dec.codec.decode_messages(buf, position, [0], len(buf), True, cls)
        assert n == 1 and type(direct) is cls
        for msg in (made, direct, pickle.loads(pickle.dumps(made)), copy.copy(made)):
            assert type(msg) is cls
            views.append(_message_view(msg))
        with pytest.raises(ValueError):
            cls(position, raw[:-1])
    assert all(v == views[0] for v in views)


@CROSS
@given(m=messages(), pos=st.integers(0, 64))
def test_crossing_roundtrip(m, pos):
    """Encode with every twin (identical bytes), decode each encoding with every twin."""
    impls = twins()
    encodings = []
    for enc in impls:
        buf = bytearray(pos + 6000)
        n = enc.codec.encode_record(buf, pos, len(buf) - pos, *[m[k] for k in ENCODE_ORDER])
        assert n == enc.codec.record_size(len(m["body"]), len(m["topic"]), len(m["properties"]),
                                          (0x10 if len(m["born_addr"]) == 16 else 0)
                                          | (0x20 if len(m["store_addr"]) == 16 else 0), m["v2"])  # fmt: skip
        encodings.append(bytes(buf))
    assert all(e == encodings[0] for e in encodings)
    buf = encodings[0]
    sys_flag = (m["sys_flag"] & ~0x30) | (0x10 if len(m["born_addr"]) == 16 else 0)
    sys_flag |= 0x20 if len(m["store_addr"]) == 16 else 0
    for dec in impls:
        d = decoded(dec.codec, buf, pos)
        assert d is not None
        want = {k: v for k, v in m.items() if k != "v2"}
        want["sys_flag"] = sys_flag
        assert {k: d[k] for k in want} == want
        assert d["magic"] == (MAGIC_V2 if m["v2"] else MAGIC_V1)
        assert d["body_crc"] == zlib.crc32(m["body"]) & 0x7FFFFFFF
        size = d["size"]
        assert dec.codec.scan_records(buf, pos, pos + size, True) == (
            ST_END,
            pos + size,
            1,
            m["store_timestamp"],
        )
        out = new_out(2)
        assert dec.codec.decode_batch(buf, pos, len(buf), out, True) == (1, pos + size, ST_END)
        assert out[C_STORE_TIMESTAMP, 0] == m["store_timestamp"] and out[C_SIZE, 0] == size


@CROSS
@given(
    head=messages(),
    items=st.lists(st.tuples(st.binary(max_size=200), st.binary(max_size=60), i32), max_size=12),
    use_flags=st.booleans(),
    slack=st.integers(-3, 3),
)
def test_batch_parity(head, items, use_flags, slack):
    impls = twins()
    bodies = [b for b, _, _ in items]
    props = [p for _, p, _ in items]
    flags = [f for _, _, f in items] if use_flags else None
    sizes = [
        impls[0].codec.record_size(len(b), len(head["topic"]), len(p),
                                   (0x10 if len(head["born_addr"]) == 16 else 0)
                                   | (0x20 if len(head["store_addr"]) == 16 else 0), head["v2"])
        for b, p in zip(bodies, props, strict=True)
    ]  # fmt: skip
    avail = sum(sizes) + 8 + slack  # around the fit boundary
    assume(avail >= 0)
    results = []
    for i in impls:
        buf = bytearray(b"\x77" * (avail + 5))
        so = np.full(len(items) + 1, -1, np.int64)
        r = outcome(
            i.codec.encode_batch, buf, 5, avail, head["topic"], head["queue_id"], head["queue_offset"],
            head["physical_offset"], head["sys_flag"], head["born_timestamp"], head["born_addr"],
            head["born_port"], head["store_timestamp"], head["store_addr"], head["store_port"], bodies, props,
            flags, head["v2"], so,
        )  # fmt: skip
        results.append((r, bytes(buf), so.tolist()))
    assert all(r == results[0] for r in results)
    r, buf, so = results[0]
    if slack < 0:
        assert r == ("ok", (0, -sum(sizes))) and buf == b"\x77" * (avail + 5)
    elif r[0] == "ok":
        assert r[1] == (len(items), sum(sizes)) and so[: len(items)] == sizes


loose_int = st.one_of(
    i32, i64, st.integers(-(2**70), 2**70), st.sampled_from([2**31, -(2**31) - 1, 2**63, None])
)


@CROSS
@given(
    m=messages(),
    over=st.dictionaries(
        st.sampled_from(["queue_id", "flag", "queue_offset", "physical_offset", "sys_flag", "born_timestamp",
                         "born_port", "store_timestamp", "store_port", "reconsume_times",
                         "prepared_transaction_offset"]),
        loose_int,
        max_size=3,
    ),
    born=st.binary(max_size=17),
    topic_len=st.sampled_from([0, 1, 127, 128, 300]),
    props_len=st.sampled_from([0, 32767, 32768]),
    avail=st.integers(0, 40_000),
)  # fmt: skip
def test_encode_parity_with_invalid_values(m, over, born, topic_len, props_len, avail):
    """Same result or same exception class from every twin, whatever the field values."""
    impls = twins()
    m.update(over)
    if born:
        m["born_addr"] = born
    m["topic"] = b"t" * topic_len
    m["properties"] = b"p" * props_len
    results = []
    for i in impls:
        buf = bytearray(40_000)
        results.append(
            (outcome(i.codec.encode_record, buf, 0, avail, *[m[k] for k in ENCODE_ORDER]), bytes(buf))
        )
    assert all(r == results[0] for r in results)


def run_all_readers(codec: Any, buf: bytes, pos: int, limit: int, cap: int) -> list:
    res = [
        outcome(codec.peek_record, buf, pos, limit),
        outcome(codec.check_record, buf, pos, limit, True),
        outcome(codec.check_record, buf, pos, limit, False),
        outcome(codec.scan_records, buf, pos, limit, True),
        outcome(codec.scan_records, buf, pos, limit, False, 2),
        outcome(codec.decode_record, buf, pos, limit, True),
        outcome(codec.decode_record, buf, pos, limit, False),
    ]
    for verify in (True, False):
        out = new_out(cap)
        r = outcome(codec.decode_batch, buf, pos, limit, out, verify)
        res.append((r, out.tolist()))
    return res


def compare_readers(impls: Any, buf: bytes, pos: int, limit: int, cap: int) -> list:
    results = [run_all_readers(i.codec, buf, pos, limit, cap) for i in impls]
    assert all(r == results[0] for r in results)
    return results[0]


@CROSS
@given(
    data=st.binary(max_size=400), pos=st.integers(-2, 420), extra=st.integers(-2, 420), cap=st.integers(0, 3)
)
def test_fuzz_arbitrary_bytes(data, pos, extra, cap):
    impls = twins()
    compare_readers(impls, data, pos, pos + extra, cap)


@st.composite
def valid_streams(draw: Any) -> bytes:
    from rmqcore._pure import codec as pure  # the reference builds the input; every twin reads it

    out = bytearray()
    for _ in range(draw(st.integers(1, 3))):
        m = draw(messages())
        m["body"] = m["body"][:200]
        buf = bytearray(6000)
        n = pure.encode_record(buf, 0, len(buf), *[m[k] for k in ENCODE_ORDER])
        out += buf[:n]
    if draw(st.booleans()):
        blank = bytearray(8)
        pure.encode_blank(blank, 0, draw(i32))
        out += blank + bytes(draw(st.integers(0, 8)))
    return bytes(out)


@CROSS
@given(
    data=valid_streams(),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), max_size=4),
    writes=st.lists(st.tuples(st.integers(0, 10_000), st.binary(min_size=1, max_size=4)), max_size=2),
    cut=st.integers(0, 10_000),
    cap=st.integers(0, 4),
)
def test_fuzz_damaged_records(data, flips, writes, cut, cap):
    impls = twins()
    buf = bytearray(data)
    for at, bit in flips:
        buf[at % len(buf)] ^= 1 << bit
    for at, blob in writes:
        at %= len(buf)
        buf[at : at + len(blob)] = blob[: len(buf) - at]
    buf = bytes(buf[: len(buf) - cut % (len(buf) + 1)])
    res = compare_readers(impls, buf, 0, len(buf), cap)
    # decode_record and the scanner agree on the first record
    st_scan = res[3]
    if st_scan[0] == "ok" and st_scan[1][2] == 0 and st_scan[1][0] != ST_END:
        assert res[1][1][0] == st_scan[1][0]


@CROSS
@given(data=valid_streams(), cap=st.integers(1, 4))
def test_fuzz_every_prefix_of_a_stream(data, cap):
    """Each truncation point of a valid stream: same statuses everywhere, never a crash."""
    impls = twins()
    for cut in range(0, len(data) + 1, max(1, len(data) // 40)):
        compare_readers(impls, data[:cut], 0, cut, cap)


# -- slices: a batch's bodies / topics / properties as bytes ---------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), cuts=st.lists(st.tuples(st.integers(0, 320), st.integers(0, 40)), max_size=30))
def test_slices_twins_agree_and_check_every_range(data: bytes, cuts: list[tuple[int, int]]) -> None:
    impls = twins()
    pos = np.array([p for p, _ in cuts], dtype=np.int64)
    ln = np.array([n for _, n in cuts], dtype=np.int64)
    inside = all(p + n <= len(data) for p, n in cuts)
    for ns in impls:
        if inside:
            assert ns.codec.slices(data, pos, ln) == [data[p : p + n] for p, n in cuts]
        else:
            with pytest.raises(ValueError, match="outside"):
                ns.codec.slices(data, pos, ln)
        with pytest.raises(ValueError):
            ns.codec.slices(data, pos, np.zeros(len(cuts) + 1, dtype=np.int64))


def test_record_batch_bodies_topics_properties(impl) -> None:
    import tempfile

    from rmqcore.commitlog import CommitLog

    with tempfile.TemporaryDirectory() as d, CommitLog(d, file_size=1 << 16, impl=impl.name) as cl:
        for i in range(20):
            cl.put("T%d" % (i % 3), b"body-%d" % i, 0, keys="k%d" % i)
        b = cl.read_batch(0, 100)
        assert b.bodies() == [b"body-%d" % i for i in range(20)]
        assert b.topics() == ["T%d" % (i % 3) for i in range(20)]
        assert all(p.startswith("KEYS\x01k%d" % i) for i, p in enumerate(b.properties_strings()))


@CROSS
@given(st.lists(st.text(max_size=40), min_size=1, max_size=8))
def test_batch_properties_as_str_are_stored_as_their_utf8(impl, texts):
    """A str properties entry is stored as its UTF-8, byte for byte what the encoded bytes give;
    ASCII ones are taken without a copy by the native twin. One with a lone surrogate (no UTF-8
    text: stored as it is, its key would not be found again) is an InvalidMessageError and nothing
    is written."""
    texts = texts + ["KEYS\x01k-1\x02TAGS\x01A\x02", "KEYS\x01\u00e9\U0001f600"]
    as_bytes = [t.encode("utf-8") for t in texts]
    bodies = [b"b%d" % i for i in range(len(texts))]
    a, b = bytearray(8192), bytearray(8192)
    sa, sb = np.zeros(len(texts), np.int64), np.zeros(len(texts), np.int64)
    assert batch(impl.codec, a, 0, 8192, bodies, texts, sizes_out=sa) == batch(
        impl.codec, b, 0, 8192, bodies, as_bytes, sizes_out=sb)
    assert a == b and list(sa) == list(sb)
    c = bytearray(8192)
    with pytest.raises(InvalidMessageError):
        batch(impl.codec, c, 0, 8192, bodies, texts[:-1] + ["KEYS\x01\udc80lone surrogate"])
    assert c == bytearray(8192)
    with pytest.raises(TypeError):
        batch(impl.codec, bytearray(8192), 0, 8192, bodies, texts[:-1] + [7])


def _kind(b: bytes, kind: str) -> Any:
    return bytearray(b) if kind == "bytearray" else memoryview(b) if kind == "memoryview" else b


@CROSS
@given(
    pool=st.lists(st.one_of(st.binary(max_size=40),  # (lone surrogates: an error, tested above)
                            st.text(st.characters(exclude_categories=["Cs"]), max_size=20)),
                  min_size=1, max_size=4),
    items=st.lists(st.tuples(st.integers(0, 3), st.sampled_from([b"", b"x" * 30, b"y" * 30, b"z" * 7]),
                             st.sampled_from(["bytes", "bytearray", "memoryview"])), min_size=1, max_size=12),
    container=st.sampled_from([list, tuple]),
)  # fmt: skip
def test_batch_sharing_properties_objects_writes_what_fresh_ones_write(pool, items, container):
    """``put_batch`` hands the kernel one properties object for every message: a batch whose
    messages share objects (runs of one, and runs of equal lengths) is written byte for byte as the
    same batch with a fresh object per message, by every twin (the pure one, first, writes that)."""
    shared = container(pool[k % len(pool)] for k, _, _ in items)
    # a new object per message (bytearray: never one interned object for equal values)
    fresh = [bytearray(p.encode("utf-8") if isinstance(p, str) else p) for p in shared]
    bodies = container(_kind(b, kind) for _, b, kind in items)
    want = bytearray(4096)
    want_sizes = np.zeros(len(items), np.int64)
    expected = batch(twins()[0].codec, want, 0, 4096, [bytes(b) for b in bodies], fresh, sizes_out=want_sizes)
    for i in twins():
        buf = bytearray(4096)
        sizes = np.zeros(len(items), np.int64)
        assert batch(i.codec, buf, 0, 4096, bodies, shared, sizes_out=sizes) == expected
        assert buf == want and list(sizes) == list(want_sizes)


class _Shrinks:
    """An int (its __index__) or a sequence (its __len__) that empties ``victim`` when used."""

    def __init__(self, victim: list, value: Any) -> None:
        self.victim, self.value = victim, value

    def __index__(self) -> int:
        self.victim.clear()
        return int(self.value)

    def __len__(self) -> int:
        self.victim.clear()
        return len(self.value)

    def __getitem__(self, i: int) -> Any:
        return self.value[i]


@pytest.mark.parametrize("victim", ["bodies", "properties", "flags"])
@pytest.mark.parametrize("via", ["queue_id", "a flag", "a sequence's len"])
def test_batch_lists_emptied_during_the_call_do_as_the_pure_twin(victim, via):
    """Python code the call runs (an ``__index__``, a sequence's ``__len__``) may empty the lists
    it was given. Each body and properties object is read once (the native twin reads a list
    through a tuple of its items, which keeps them alive; it read freed memory before), each flag
    when it is converted: every twin gives the same result, or the same exception and nothing
    written."""
    results = []
    for i in twins():
        lists = {"bodies": [b"b" * 20 for _ in range(300)], "properties": [b"" for _ in range(300)],
                 "flags": [1] * 300}  # fmt: skip
        args, over = dict(lists), {}
        if via == "a sequence's len":  # another argument reports its length, emptying the victim
            other = "flags" if victim != "flags" else "bodies"
            args[other] = _Shrinks(lists[victim], lists[other])
        elif via == "a flag":
            lists["flags"][0] = _Shrinks(lists[victim], 1)
        else:
            over[via] = _Shrinks(lists[victim], 5)
        buf = bytearray(b"\x5a" * 100_000)
        r = outcome(lambda: batch(i.codec, buf, 0, len(buf), args["bodies"], args["properties"],
                                  args["flags"], **over))
        if r[0] == "raise":
            assert buf == b"\x5a" * 100_000
        else:  # every message written, as the lists held them when the call read them
            assert r[1][0] == 300
            assert i.codec.scan_records(buf, 0, r[1][1], True)[:3] == (ST_END, r[1][1], 300)
        results.append(r)
    assert len(set(results)) == 1, results


class _RowsLie(np.ndarray):
    """An array whose ``shape`` attribute says (NCOLUMNS, its columns), whatever its buffer is."""

    @property  # type: ignore[misc]
    def shape(self) -> Any:
        return (NCOLUMNS, np.asarray(self).shape[1])


def test_decode_batch_into_an_array_that_lies_about_its_rows_is_refused(impl):
    """``out`` is checked as the buffer it exports (the native twin checked the ``shape`` attribute
    and wrote NCOLUMNS rows into a 1-row buffer: a heap overflow): ValueError, nothing written."""
    buf = bytearray(4096)
    end = 0
    for i in range(8):
        fields = msg(body=b"b%d" % i)
        end += impl.codec.encode_record(buf, end, len(buf) - end, *[fields[k] for k in ENCODE_ORDER])
    out = np.full((1, 8), -7, dtype=np.int64).view(_RowsLie)
    with pytest.raises(ValueError):
        impl.codec.decode_batch(bytes(buf), 0, end, out, True)
    assert (np.asarray(out) == -7).all()
