"""Dispatch kernel (ReputMessageService's per-record work): golden stores, parity, properties, fuzz.

Tests taking ``impl`` use ``impl.dispatch``; crossing tests compare every twin (``twins()``).
Semantics: shared/spec/rocketmq-store.md sections 1.5 (properties), 3.3 (tagsCode), 4.2-4.3 (index
keys) and 9 (dispatch).
"""

from __future__ import annotations

import inspect
import mmap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqcore import _impl
from rmqcore._pure import codec as pure_codec
from rmqcore._pure import hashing as pure_hashing
from rmqcore.layout import (
    C_POSITION,
    C_STORE_TIMESTAMP,
    C_TOPIC_LEN,
    C_TOPIC_POS,
    HINT_CAPACITY,
    HINT_FIELDS,
    NCOLUMNS,
    ST_BAD_CRC,
    ST_BAD_MAGIC,
    ST_BLANK,
    ST_END,
    ST_MSG,
    ST_TORN,
)
from rmqcore.message import compute_tags_code, parse_properties
from tests.conftest import IMPLS, RMQ_FIXTURES, VERSIONS, read_jsonl_gz, twins

STORES = ("storeA", "storeB", "storeB2", "storeC")
SCHEDULE = b"SCHEDULE_TOPIC_XXXX"
DF_SCHEDULE, DF_BAD_UTF8 = 1, 2
FAST = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def kernels() -> list[Any]:
    return [t.dispatch for t in twins()]


@pytest.fixture
def dsp(impl: Any) -> Any:
    return impl.dispatch


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def arrays(cap: int, kcap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.full((NCOLUMNS, cap), -7, dtype=np.int64),
        np.full((4, cap), -7, dtype=np.int64),
        np.full(kcap, -7, dtype=np.int64),
    )


def record(
    topic: bytes = b"TopicTest", props: bytes = b"", body: bytes = b"body", v2: bool = False, **kw: Any
) -> bytes:
    """One record encoded by the pure codec (V2 automatically for topics above 127 bytes)."""
    v2 = v2 or len(topic) > 127
    size = pure_codec.record_size(len(body), len(topic), len(props), 0, v2)
    buf = bytearray(size + 8)
    f = dict(
        queue_id=1, flag=0, queue_offset=5, physical_offset=0, sys_flag=0, born_timestamp=1_700_000_000_000,
        born_addr=bytes([10, 0, 0, 1]), born_port=5000, store_timestamp=1_700_000_000_123,
        store_addr=bytes([10, 0, 0, 2]), store_port=10911, reconsume_times=0, prepared_transaction_offset=0,
    )  # fmt: skip
    f.update(kw)
    n = pure_codec.encode_record(
        buf, 0, len(buf), topic, f["queue_id"], f["flag"], f["queue_offset"], f["physical_offset"],
        f["sys_flag"], f["born_timestamp"], f["born_addr"], f["born_port"], f["store_timestamp"],
        f["store_addr"], f["store_port"], f["reconsume_times"], f["prepared_transaction_offset"], body,
        props, v2,
    )  # fmt: skip
    assert n == size
    return bytes(buf[:size])


def walk(
    d: Any,
    buf: Any,
    pos: int = 0,
    limit: int | None = None,
    cap: int = 64,
    kcap: int = 256,
    verify: bool = True,
) -> tuple[list[tuple], int, int]:
    """All records from ``pos``, calling until the status is not ST_MSG (or no progress):
    ``([(position, cols column, tagsCode, flags, [key hashes])...], end_pos, status)``."""
    limit = len(buf) if limit is None else limit
    out: list[tuple] = []
    while True:
        cols, disp, keys = arrays(cap, kcap)
        count, end, status, nk = d.dispatch_batch(buf, pos, limit, cols, disp, keys, verify)
        assert 0 <= count <= cap and 0 <= nk <= kcap
        assert int(disp[3, :count].sum()) == nk if count else nk == 0
        for i in range(count):
            start, n = int(disp[2, i]), int(disp[3, i])
            assert start == int(disp[3, :i].sum())
            col = tuple(cols[:, i].tolist())
            out.append(
                (col[C_POSITION], col, int(disp[0, i]), int(disp[1, i]), keys[start : start + n].tolist())
            )
        assert (cols[:, count:] == -7).all() and (disp[:, count:] == -7).all() and (keys[nk:] == -7).all()
        if status != ST_MSG or count == 0:
            return out, end, status
        pos = end


def valid_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def reference(topic_b: bytes, props_b: bytes, hashing: Any = pure_hashing) -> tuple[int, int, list[int]]:
    """(tagsCode, flags, key hashes) from message.parse_properties and the hashing kernels."""
    topic = topic_b.decode("utf-8", "replace")
    props = parse_properties(props_b.decode("utf-8", "replace"))
    tags = props.get("TAGS")
    tags_code = hashing.tags_code(tags) if tags else 0
    keys = [props["UNIQ_KEY"]] if props.get("UNIQ_KEY") else []
    keys += [k for k in props.get("KEYS", "").split(" ") if k]
    flags = (DF_SCHEDULE if topic_b == SCHEDULE else 0) | (
        0 if valid_utf8(topic_b) and valid_utf8(props_b) else DF_BAD_UTF8
    )
    return tags_code, flags, [hashing.index_key_hash(topic + "#" + k) for k in keys]


def outcome(fn: Any, *args: Any) -> tuple:
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - compared across twins
        return ("raise", type(e), str(e))


# --------------------------------------------------------------------------------------------------
# API
# --------------------------------------------------------------------------------------------------


def test_same_names_and_signatures() -> None:
    native, pure = _impl.kernel("dispatch", "native"), _impl.kernel("dispatch", "pure")
    assert sorted(native.__all__) == sorted(pure.__all__)
    for name in pure.__all__:
        a, b = getattr(native, name), getattr(pure, name)
        if isinstance(b, type):  # the same public methods (same parameters) and attributes
            public = {m: v for m, v in vars(b).items() if not m.startswith("_")}
            methods = sorted(m for m, v in public.items() if not inspect.isdatadescriptor(v))
            attrs = sorted(m for m, v in public.items() if inspect.isdatadescriptor(v))
            assert methods == sorted(m for m in dir(a) if not m.startswith("_") and callable(getattr(a, m)))
            assert attrs == sorted(m for m in dir(a) if not m.startswith("_") and not callable(getattr(a, m)))
            for m in methods:
                pa = list(inspect.signature(getattr(a, m)).parameters)
                assert pa == list(inspect.signature(getattr(b, m)).parameters), m
        elif callable(b):
            assert list(inspect.signature(a).parameters) == list(inspect.signature(b).parameters)
        else:
            assert a == b


# --------------------------------------------------------------------------------------------------
# (1) + (2) golden stores written by real brokers
# --------------------------------------------------------------------------------------------------


def _dump_msgs(version: str, store: str) -> dict[int, dict]:
    rows = read_jsonl_gz(RMQ_FIXTURES / version / f"{store}.dump.jsonl.gz")
    return {r["phyOffset"]: r for r in rows if r.get("type") == "msg"}


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("version", VERSIONS)
def test_golden_stores(impl: Any, dsp: Any, version: str, store: str) -> None:
    msgs = _dump_msgs(version, store)
    seen = 0
    files = sorted((RMQ_FIXTURES / version / store / "commitlog").iterdir())
    assert files
    for path in files:
        base = int(path.name)
        buf = path.read_bytes()
        assert len(buf) == 131072
        recs, end, status = walk(dsp, buf, cap=48, kcap=96)
        assert status in (ST_BLANK, ST_END) or store == "storeB2"  # B2: a torn tail after a crash
        # (2) the columns are decode_batch's
        out = np.zeros((NCOLUMNS, len(recs) + 1), dtype=np.int64)
        assert impl.codec.decode_batch(buf, 0, len(buf), out, True) == (len(recs), end, status)
        assert [r[1] for r in recs] == [tuple(c) for c in out[:, : len(recs)].T.tolist()]
        for position, col, tags_code, flags, key_hashes in recs:
            m = msgs[base + position]
            seen += 1
            topic_b = bytes(buf[col[C_TOPIC_POS] : col[C_TOPIC_POS] + col[C_TOPIC_LEN]])
            assert topic_b.decode() == m["topic"]
            assert flags & DF_BAD_UTF8 == 0
            if m["topic"] == SCHEDULE.decode():
                # the caller turns the tags code into the delivery time
                assert flags == DF_SCHEDULE
                props = parse_properties(m["properties_raw"])
                assert compute_tags_code(m["topic"], props, col[C_STORE_TIMESTAMP]) == m["dispatch_tagsCode"]
            else:
                assert flags == 0
                assert tags_code == m["dispatch_tagsCode"], (version, store, base + position)
            keys = ([m["uniqKey"]] if m.get("uniqKey") else []) + [
                k for k in (m.get("dispatch_keys") or "").split(" ") if k
            ]
            assert key_hashes == [pure_hashing.index_key_hash(m["topic"] + "#" + k) for k in keys]
    assert seen == len(msgs)


def test_golden_twins_agree_with_small_capacities() -> None:
    buf = sorted((RMQ_FIXTURES / VERSIONS[-1] / "storeC" / "commitlog").iterdir())[0].read_bytes()
    results = [
        walk(d, buf, cap=cap, kcap=kcap) for d in kernels() for cap, kcap in ((1, 8), (7, 9), (500, 4000))
    ]
    assert all(r == results[0] for r in results)


# --------------------------------------------------------------------------------------------------
# worked examples
# --------------------------------------------------------------------------------------------------

TYPICAL = (
    b"KEYS\x01order-1 user-1\x02UNIQ_KEY\x01C0A8000A1F402A2A2A2A0000270B07CF\x02TAGS\x01TagA\x02WAIT\x01true"
)


def test_typical_record(dsp: Any) -> None:
    buf = record(b"TopicTest", TYPICAL)
    recs, end, status = walk(dsp, buf)
    assert (end, status) == (len(buf), ST_END)
    [(_, _, tags_code, flags, keys)] = recs
    assert tags_code == 2598919 and flags == 0  # [JDK] TagA
    assert keys == [pure_hashing.index_key_hash("TopicTest#" + k)
                    for k in ("C0A8000A1F402A2A2A2A0000270B07CF", "order-1", "user-1")]  # fmt: skip


@pytest.mark.parametrize(
    "topic, key, expected",
    [  # [JDK] vectors of rocketmq-store.md 4.2
        (b"TopicTest", b"k1", 2746024),
        (b"TopicTest", b"OrderID188", 1231271670),
        (b"TopicTest", b"7F0000010E0A18B4AAC2785B5E470000", 1711423265),
        ("主题".encode(), "键".encode(), 634204136),
        (b"T", "😀".encode(), 4308978),
    ],
)
def test_jdk_key_vectors(dsp: Any, topic: bytes, key: bytes, expected: int) -> None:
    [(_, _, _, _, keys)] = walk(dsp, record(topic, b"KEYS\x01" + key))[0]
    assert keys == [expected]


def test_index_hash_of_min_value_is_zero(dsp: Any) -> None:
    # found by search: "T#ddylq6\u36409".hashCode() == Integer.MIN_VALUE, whose abs() stays negative
    key = "ddylq6\u3640" + "9"
    assert pure_hashing.java_string_hash("T#" + key) == -(2**31)
    [(_, _, _, _, keys)] = walk(dsp, record(b"T", b"KEYS\x01" + key.encode()))[0]
    assert keys == [0]


@pytest.mark.parametrize(
    "props, tags, keys",
    [
        (b"", None, []),
        (b"TAGS\x01", None, []),
        (b"TAGS\x01\x02", None, []),
        (b"\x01TagA", None, []),
        (b"TAGS\x01A\x02TAGS\x01B", "B", []),  # the last one wins
        (b"TAGS\x01A\x02TAGS\x01", "A", []),  # an empty value does not overwrite
        (b"TAGS\x01A\x01B", "A\x01B", []),  # the name ends at the first 0x01
        (b"TA\x01GS\x01B", None, []),
        (b"TAGS \x01A\x02tags\x01B\x02XTAGS\x01C", None, []),
        (b"KEYS\x01  a  b ", None, ["a", "b"]),
        (b"KEYS\x01x x\x02UNIQ_KEY\x01U", None, ["U", "x", "x"]),  # duplicates kept, UNIQ_KEY first
        (b"UNIQ_KEY\x01U\x02UNIQ_KEY\x01V\x02KEYS\x01k", None, ["V", "k"]),
        (b"KEYS\x01 \x02UNIQ_KEY\x01", None, []),
        (b"KEYS\x01a\tb\x02", None, ["a\tb"]),
        (b"\x02\x02TAGS\x01T\x02\x02", "T", []),
        ("TAGS\x01标签\x02KEYS\x01键 🚀".encode(), "标签", ["键", "🚀"]),
    ],
)
def test_properties_semantics(dsp: Any, props: bytes, tags: str | None, keys: list[str]) -> None:
    [(_, _, tags_code, flags, hashes)] = walk(dsp, record(b"Tp", props))[0]
    assert tags_code == (pure_hashing.java_string_hash(tags) if tags else 0)
    assert hashes == [pure_hashing.index_key_hash("Tp#" + k) for k in keys]
    assert flags == 0
    assert (tags_code, flags, hashes) == reference(b"Tp", props)


# maximal invalid subparts, as CPython's decoder replaces them (one U+FFFD each)
INVALID = [
    b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1", b"\xc2", b"\xc3(", b"\xe0\x80\x80", b"\xe0\xa0", b"\xe2\x82",
    b"\xe2\x82(", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xef\xbf", b"\xf0\x80\x80\x80", b"\xf0\x9f\x98",
    b"\xf0\x9f", b"\xf0\x9f(", b"\xf0\x9f\x98(", b"\xf4\x90\x80\x80", b"\xf4\x8f\xbf", b"\xf5\x80\x80\x80",
    b"\xf8", b"\xfe\xff", b"\xff",
]  # fmt: skip


@pytest.mark.parametrize("bad", INVALID)
@pytest.mark.parametrize("where", ["tags", "key", "topic", "other"])
def test_invalid_utf8(dsp: Any, bad: bytes, where: str) -> None:
    topic = b"T" + bad + b"x" if where == "topic" else b"Tp"
    props = {
        "tags": b"TAGS\x01a" + bad + b"\x02KEYS\x01k",
        "key": b"KEYS\x01a" + bad + b" " + bad + b"\x02TAGS\x01" + bad,
        "topic": b"KEYS\x01k\x02TAGS\x01t",
        "other": b"KEYS\x01k\x02X\x01" + bad + b"\x02TAGS\x01t",
    }[where]
    [(_, _, tags_code, flags, hashes)] = walk(dsp, record(topic, props))[0]
    assert flags & DF_BAD_UTF8
    assert (tags_code, flags, hashes) == reference(topic, props)


def test_valid_multibyte_is_not_flagged(dsp: Any) -> None:
    for ch in ("é", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0010ffff"):
        props = ("TAGS\x01" + ch + "\x02KEYS\x01" + ch + "x " + ch).encode()
        [(_, _, tags_code, flags, hashes)] = walk(dsp, record(b"Tp", props))[0]
        assert (tags_code, flags, hashes) == reference(b"Tp", props)
        assert flags == 0


@pytest.mark.parametrize(
    "topic", [SCHEDULE, b"SCHEDULE_TOPIC_XXXY", b"SCHEDULE_TOPIC_XXXXX", b"SCHEDULE_TOPIC_XXX"]
)
def test_schedule_flag(dsp: Any, topic: bytes) -> None:
    [(_, _, tags_code, flags, _)] = walk(dsp, record(topic, b"DELAY\x013\x02TAGS\x01TagA"))[0]
    assert flags == (DF_SCHEDULE if topic == SCHEDULE else 0)
    assert tags_code == 2598919


def test_long_values_and_many_tokens(dsp: Any) -> None:
    keys = [f"k{i}" for i in range(40)] + ["x" * 300]
    for sep in (" ", "  "):
        props = f"TAGS\x01{'T' * 1000}\x02KEYS\x01{sep.join(keys)}\x02UNIQ_KEY\x01{'U' * 77}".encode()
        [(_, _, tags_code, flags, hashes)] = walk(dsp, record(b"Topic" * 25, props), kcap=100)[0]
        assert (tags_code, flags, hashes) == reference(b"Topic" * 25, props)
        assert len(hashes) == 42


# --------------------------------------------------------------------------------------------------
# statuses, ranges and argument checks
# --------------------------------------------------------------------------------------------------


def stream(*props: bytes) -> tuple[bytes, list[int]]:
    recs = [record(b"TopicS", p, queue_offset=i) for i, p in enumerate(props)]
    starts, pos = [], 0
    for r in recs:
        starts.append(pos)
        pos += len(r)
    starts.append(pos)
    return b"".join(recs), starts


def test_statuses_like_decode_batch(impl: Any, dsp: Any) -> None:
    buf, starts = stream(b"KEYS\x01a", b"TAGS\x01b", b"")
    blank = bytearray(buf + bytes(64))
    pure_codec.encode_blank(blank, len(buf), 64)
    cases = [
        (buf + bytes(40), 0, len(buf) + 40),  # END on zeros
        (bytes(blank), 0, len(blank)),  # BLANK
        (buf, 0, len(buf) - 1),  # TORN
        (buf[:-3] + b"\xff\xff\xff", 0, len(buf)),  # last record's properties changed (no CRC over them)
        (buf, starts[1], len(buf)),
        (buf, 3, len(buf)),  # BAD_MAGIC
        (buf, len(buf), len(buf)),
    ]
    bad_body = bytearray(buf)
    bad_body[starts[1] + 88] ^= 1  # first body byte of the second record: BAD_CRC when verifying
    cases.append((bytes(bad_body), 0, len(buf)))
    for b, pos, limit in cases:
        for verify in (True, False):
            cols, disp, keys = arrays(8, 8)
            ref = np.zeros((NCOLUMNS, 8), dtype=np.int64)
            c, e, s, nk = dsp.dispatch_batch(b, pos, limit, cols, disp, keys, verify)
            assert (c, e, s) == impl.codec.decode_batch(b, pos, limit, ref, verify)
            assert (cols[:, :c] == ref[:, :c]).all()
    c, e, s, _ = dsp.dispatch_batch(buf, 3, len(buf), *arrays(4, 4), True)
    assert (c, e, s) == (0, 3, ST_BAD_MAGIC)
    c, e, s, _ = dsp.dispatch_batch(buf, 0, len(buf) - 1, *arrays(4, 4), True)
    assert (c, e, s) == (2, starts[2], ST_TORN)


def test_bad_crc_only_when_verifying(dsp: Any) -> None:
    r = bytearray(record(b"T", b"TAGS\x01x", body=b"0123456789"))
    r[88] ^= 0xFF  # first body byte (IPv4 hosts, V1)
    assert dsp.dispatch_batch(bytes(r), 0, len(r), *arrays(2, 2), True)[:3] == (0, 0, ST_BAD_CRC)
    assert dsp.dispatch_batch(bytes(r), 0, len(r), *arrays(2, 2), False)[:3] == (1, len(r), ST_END)


def test_buffer_types(dsp: Any, tmp_path: Path) -> None:
    buf, _ = stream(TYPICAL, b"KEYS\x01a b")
    expected = walk(dsp, buf)
    p = tmp_path / "cl"
    p.write_bytes(buf)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert walk(dsp, mm) == expected
    assert walk(dsp, bytearray(buf)) == expected
    assert walk(dsp, memoryview(buf)) == expected
    # inside a larger buffer: positions are buffer offsets; bytes past the limit are never read
    big = b"\xee" * 13 + buf + b"\x02TAGS\x01zz" * 3
    recs, end, status = walk(dsp, big, 13, 13 + len(buf))
    assert (end, status) == (13 + len(buf), ST_END)
    assert [r[2:] for r in recs] == [r[2:] for r in expected[0]]


def test_mmap_closes_after_an_error(dsp: Any, tmp_path: Path) -> None:
    p = tmp_path / "cl"
    p.write_bytes(stream(TYPICAL)[0])
    with open(p, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        with pytest.raises(ValueError, match="keys_out too small") as info:
            dsp.dispatch_batch(mm, 0, len(mm), *arrays(4, 1), True)
        assert info.tb is not None  # the traceback (and its frames) is still alive here
        mm.close()  # yet no buffer of the map is exported any more


def test_capacity_zero_and_empty_range(dsp: Any) -> None:
    buf, _ = stream(TYPICAL)
    cols, disp, keys = arrays(0, 0)
    assert dsp.dispatch_batch(buf, 5, len(buf), cols, disp, keys, True) == (0, 5, ST_MSG, 0)
    assert dsp.dispatch_batch(buf, len(buf), len(buf), *arrays(3, 3), True) == (0, len(buf), ST_END, 0)
    assert dsp.dispatch_batch(b"", 0, 0, *arrays(3, 3), True) == (0, 0, ST_END, 0)


def test_argument_errors_agree() -> None:
    buf, _ = stream(TYPICAL)
    n = len(buf)
    ok = arrays(4, 8)
    ro = np.zeros((NCOLUMNS, 4), dtype=np.int64)
    ro.flags.writeable = False
    bad_calls = [
        (buf, -1, n, *ok), (buf, 0, n + 1, *ok), (buf, 5, 4, *ok), (buf, 2**70, n, *ok), (buf, 0, 2**64, *ok),
        (buf, 0, n, np.zeros((NCOLUMNS - 1, 4), np.int64), ok[1], ok[2]),
        (buf, 0, n, np.zeros((NCOLUMNS, 4), np.float64), ok[1], ok[2]),
        (buf, 0, n, np.zeros((NCOLUMNS, 4), np.int32), ok[1], ok[2]),
        (buf, 0, n, np.zeros((NCOLUMNS, 4), np.int64).astype(">i8"), ok[1], ok[2]),
        (buf, 0, n, np.zeros(NCOLUMNS * 4, np.int64), ok[1], ok[2]),
        (buf, 0, n, ro, ok[1], ok[2]),
        (buf, 0, n, [[0] * 4] * NCOLUMNS, ok[1], ok[2]),
        (buf, 0, n, ok[0], np.zeros((4, 3), np.int64), ok[2]),
        (buf, 0, n, ok[0], np.zeros((5, 4), np.int64), ok[2]),
        (buf, 0, n, ok[0], np.zeros(16, np.int64), ok[2]),
        (buf, 0, n, ok[0], ok[1], np.zeros((2, 4), np.int64)),
        (buf, 0, n, ok[0], ok[1], None),
        (buf, 0, n, ok[0], ok[1], np.zeros(8, np.uint8)),
    ]  # fmt: skip
    for args in bad_calls:
        results = [outcome(d.dispatch_batch, *args, True) for d in kernels()]
        assert results[0][:2] == ("raise", ValueError), args[1:3]
        assert all(r == results[0] for r in results)
    for args in [(buf, 0.0, n, *ok), (buf, "0", n, *ok), (None, 0, 0, *ok)]:
        results = [outcome(d.dispatch_batch, *args, True) for d in kernels()]
        assert results[0][:2] == ("raise", TypeError)
        assert all(r[:2] == results[0][:2] for r in results)


def test_strided_and_oversized_outputs() -> None:
    buf, _ = stream(TYPICAL, b"KEYS\x01a b", b"TAGS\x01z")
    results = []
    for d in kernels():
        big = np.full((NCOLUMNS, 9), -1, np.int64)
        cols = big[:, 1:7:2]  # strided view, 3 columns
        disp = np.asfortranarray(np.full((4, 5), -1, np.int64))  # more columns than needed
        keys = np.full(20, -1, np.int64)[::2]
        r = d.dispatch_batch(buf, 0, len(buf), cols, disp, keys, True)
        results.append((r, big.tolist(), disp.tolist(), keys.tolist()))
        assert r == (3, len(buf), ST_MSG, 5)  # capacity reached: ST_MSG even at the end
        assert (big[:, 0] == -1).all() and (big[:, 8] == -1).all() and (disp[:, 3:] == -1).all()
        # negative strides (reversed views) work too
        rcols, rdisp = np.zeros((NCOLUMNS, 3), np.int64), np.zeros((4, 3), np.int64)
        rkeys = np.zeros(10, np.int64)
        r2 = d.dispatch_batch(buf, 0, len(buf), rcols[:, ::-1], rdisp[::-1, ::-1], rkeys[::-1], True)
        assert r2 == r
        assert rcols[:, ::-1].tolist() == cols.tolist() and rdisp[::-1, ::-1].tolist() == disp[:, :3].tolist()
        assert rkeys[::-1][:5].tolist() == keys[:5].tolist()
    assert all(x == results[0] for x in results)


# --------------------------------------------------------------------------------------------------
# keys_out capacity
# --------------------------------------------------------------------------------------------------


def test_keys_capacity(dsp: Any) -> None:
    # key counts 2, 3, 0, 1
    buf, starts = stream(b"KEYS\x01a b", b"UNIQ_KEY\x01u\x02KEYS\x01c d", b"TAGS\x01t", b"KEYS\x01  e ")
    assert dsp.dispatch_batch(buf, 0, len(buf), *arrays(8, 4), True) == (1, starts[1], ST_MSG, 2)
    assert dsp.dispatch_batch(buf, starts[1], len(buf), *arrays(8, 4), True) == (3, len(buf), ST_END, 4)
    assert dsp.dispatch_batch(buf, 0, len(buf), *arrays(8, 6), True) == (4, len(buf), ST_END, 6)
    assert dsp.dispatch_batch(buf, starts[2], len(buf), *arrays(8, 0), True) == (1, starts[3], ST_MSG, 0)
    cols, disp, keys = arrays(8, 2)
    with pytest.raises(ValueError, match="keys_out too small"):
        dsp.dispatch_batch(buf, starts[1], len(buf), cols, disp, keys, True)
    assert (cols == -7).all() and (disp == -7).all() and (keys == -7).all()  # nothing written
    with pytest.raises(ValueError, match="keys_out too small"):
        dsp.dispatch_batch(buf, 0, len(buf), *arrays(8, 1), True)
    # an invalid record is a status even with no room for keys
    assert dsp.dispatch_batch(buf, 1, len(buf), *arrays(8, 0), True)[:3] == (0, 1, ST_BAD_MAGIC)


@FAST
@given(
    counts=st.lists(st.integers(0, 5), min_size=1, max_size=12),
    kcap=st.integers(0, 12),
    cap=st.integers(1, 6),
)
def test_keys_capacity_property(counts: list[int], kcap: int, cap: int) -> None:
    props = [(b"KEYS\x01" + b" ".join(b"k%d" % j for j in range(c))) if c else b"TAGS\x01x" for c in counts]
    buf, starts = stream(*props)
    full = walk(kernels()[0], buf, kcap=64)
    for d in kernels():
        pos, recs = 0, []
        while pos < len(buf):
            cols, disp, keys = arrays(cap, kcap)
            r = outcome(d.dispatch_batch, buf, pos, len(buf), cols, disp, keys, True)
            i = starts.index(pos)
            if counts[i] > kcap:
                msg = f"keys_out too small: the record at {pos} has {counts[i]} keys, keys_out holds {kcap}"
                assert r == ("raise", ValueError, msg)
                break
            c, end, status, nk = r[1]
            assert c >= 1 and nk == sum(counts[i : i + c]) <= kcap
            assert c == cap or end == len(buf) or nk + counts[i + c] > kcap
            assert status == (ST_MSG if c == cap or end < len(buf) else ST_END)
            for j in range(c):
                s, n = int(disp[2, j]), int(disp[3, j])
                recs.append((int(cols[C_POSITION, j]), keys[s : s + n].tolist()))
            pos = end
        else:
            assert recs == [(r[0], r[4]) for r in full[0]]


# --------------------------------------------------------------------------------------------------
# (3) hypothesis: random properties against parse_properties + hashing, both twins
# --------------------------------------------------------------------------------------------------

NAMES = st.sampled_from(
    [b"TAGS", b"KEYS", b"UNIQ_KEY", b"WAIT", b"", b"TAG", b"TAGSS", b"KEYS ", b"tags", b"\xff"]
)
SPECIAL = st.sampled_from(
    [b" ", b"  ", b"\x01", b"\x00", b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80",
     b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x80", "é".encode(), "键".encode(), "😀".encode(),
     "\U0010ffff".encode(), b"TAGS\x01"]
)  # fmt: skip
TEXT = st.text(alphabet=st.sampled_from("aZ9-_ #\t/éß键标签😀🚀\uffff\u0800"), max_size=12).map(str.encode)
VALUES = st.lists(st.one_of(TEXT, SPECIAL, st.binary(max_size=4)), max_size=6).map(lambda xs: b"".join(xs))


@st.composite
def properties(draw: Any) -> bytes:
    segs = []
    for _ in range(draw(st.integers(0, 8))):
        name = draw(NAMES | st.binary(max_size=5))
        if draw(st.integers(0, 3)) > (0 if name in (b"TAGS", b"KEYS", b"UNIQ_KEY") else 1):
            segs.append(name + b"\x01" + draw(VALUES))
        else:
            segs.append(name + draw(VALUES))
    s = b"\x02".join(seg.replace(b"\x02", b"") for seg in segs)
    if draw(st.booleans()):
        s += b"\x02"
    return s[:32767]


TOPICS = st.sampled_from(
    [b"TopicA", SCHEDULE, b"SCHEDULE_TOPIC_XXXXY", "主题".encode(), b"T\xff", b"x", b"%RETRY%G", b"T" * 200,
     "😀".encode(), b"\xed\xa0\x80"]
) | st.binary(min_size=1, max_size=20)  # fmt: skip


@FAST
@given(recs=st.lists(st.tuples(TOPICS, properties()), min_size=1, max_size=4), cap=st.integers(1, 5))
def test_random_properties_match_reference(recs: list[tuple[bytes, bytes]], cap: int) -> None:
    buf = b"".join(record(t, p, queue_offset=i) for i, (t, p) in enumerate(recs))
    expected = [reference(t, p) for t, p in recs]
    results = []
    for d in kernels():
        got, end, status = walk(d, buf, cap=cap, kcap=512)
        assert (end, status) == (len(buf), ST_END)
        assert [(r[2], r[3], r[4]) for r in got] == expected
        results.append(got)
    assert all(r == results[0] for r in results)


@FAST
@given(topic=TOPICS, props=properties())
def test_random_properties_with_native_hashing(topic: bytes, props: bytes) -> None:
    hashing = _impl.kernel("hashing", IMPLS[-1])
    [(_, _, tags_code, flags, hashes)] = walk(kernels()[-1], record(topic, props))[0]
    assert (tags_code, flags, hashes) == reference(topic, props, hashing)


# --------------------------------------------------------------------------------------------------
# (4) fuzz: random and mutated bytes never crash, both twins agree
# --------------------------------------------------------------------------------------------------


def run_all(buf: bytes, pos: int, limit: int, cap: int, kcap: int, verify: bool) -> list[tuple]:
    out = []
    for d in kernels():
        cols, disp, keys = arrays(cap, kcap)
        r = outcome(d.dispatch_batch, buf, pos, limit, cols, disp, keys, verify)
        out.append((r, cols.tolist(), disp.tolist(), keys.tolist()))
    return out


@FAST
@given(
    data=st.binary(max_size=600), pos=st.integers(-2, 700), extra=st.integers(-2, 700), verify=st.booleans()
)
def test_fuzz_random_bytes(data: bytes, pos: int, extra: int, verify: bool) -> None:
    out = run_all(data, pos, pos + extra, 3, 4, verify)
    assert all(o == out[0] for o in out)


@FAST
@given(
    recs=st.lists(st.tuples(TOPICS, properties()), min_size=1, max_size=3),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
    cut=st.integers(0, 10**6),
    cap=st.integers(0, 4),
    kcap=st.integers(0, 6),
    verify=st.booleans(),
)
def test_fuzz_mutated_records(recs: list, flips: list, cut: int, cap: int, kcap: int, verify: bool) -> None:
    buf = bytearray(b"".join(record(t, p) for t, p in recs))
    for at, v in flips:
        buf[at % len(buf)] = v
    limit = cut % (len(buf) + 1)
    out = run_all(bytes(buf), 0, limit, cap, kcap, verify)
    assert all(o == out[0] for o in out)


# -- sparse_points: Kafka's index-entry rule over a run of records (segment indexes)


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 5000), max_size=300), since=st.integers(0, 9000),
       interval=st.integers(0, 8192))
def test_sparse_points_twins(sizes: list[int], since: int, interval: int) -> None:
    # the rule, stated plainly: entry before record i when the bytes since the last entry exceed interval
    exp, s = [], since
    for i, size in enumerate(sizes):
        if s > interval:
            exp.append(i)
            s = 0
        s += size
    arr = np.array(sizes, dtype=np.int64)
    for k in kernels():
        out = np.full(len(sizes), -1, dtype=np.int64)
        c, end = k.sparse_points(arr, since, interval, out)
        assert (c, end) == (len(exp), s)
        assert out[:c].tolist() == exp
        if sizes:
            with pytest.raises(ValueError, match="needed"):
                k.sparse_points(arr, since, interval, np.empty(len(sizes) - 1, dtype=np.int64))


def test_live_run_naps_for_the_writer_until_another_thread_wants_to_dispatch(dsp: Any) -> None:
    """Dispatcher.live_nap / set_signals: a live run that has caught up naps without the GIL
    instead of returning, and returns once ``wanted`` is nonzero; leaving, it asks the writers for
    the GIL (a new nonzero request number) and leaves the request out for the work between runs:
    the next run clears it as it starts (and so does the store when its runs are done)."""
    import threading

    d = dsp.Dispatcher()
    req, wanted = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    d.set_signals(req, wanted)
    d.live_nap(100_000, 60_000_000_000)  # up to a minute of naps: only `wanted` ends this run
    buf = bytearray(4096)
    seg, seg_out = np.zeros(10, dtype=np.int64), np.zeros((4, 8), dtype=np.int64)
    order: list[str] = []
    during: list[int] = []

    def other() -> None:
        order.append("wanted")  # runs while the run naps without the GIL (pure twin: in its sleeps)
        during.append(int(req[0]))
        wanted[0] = 1

    t = threading.Timer(0.05, other)
    t.start()
    req[0] = 7  # a request left out by an earlier run: this one clears it as it starts
    out = d.run(buf, 0, 0, 0, False, False, 0, seg, seg_out, np.zeros(1, dtype=np.int64), len(buf))
    order.append("returned")
    t.join()
    assert order == ["wanted", "returned"] and during == [0]
    assert out[0] == 0 and out[1] == 0  # nothing dispatched
    first = int(req[0])
    assert first > 0  # still out: the caller's work between runs has the GIL to itself
    wanted[0] = 0
    d.live_nap(0, 0)  # a caught-up run returns at once: it cleared the request and asks anew
    d.run(buf, 0, 0, 0, False, False, 0, seg, seg_out, np.zeros(1, dtype=np.int64), len(buf))
    second = int(req[0])
    assert second > first
    d.run(buf, 0, 0, 0, False, False, 0, seg, seg_out, None, len(buf))  # not live: leaves it alone
    assert int(req[0]) == second
    req[0] = 99
    d.nap(0.001)  # a nap between runs ends the same way
    assert req[0] == 0
    with pytest.raises(ValueError):
        d.live_nap(-1, 0)
    with pytest.raises(ValueError):
        d.nap(-1.0)
    d.set_signals(None, None)


def test_a_nap_ends_when_its_pipe_is_written_and_is_skipped_while_wanted(dsp: Any) -> None:
    """Dispatcher.nap (the reput thread between runs, up to 16 ms; here a minute) ends as soon as
    its wake pipe is written (close does this) and does not sleep at all while ``wanted`` is set;
    either way it asks the writers for the GIL as it leaves, and clears the request once it has it."""
    import os
    import threading

    d = dsp.Dispatcher()
    req, wanted = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    d.set_signals(req, wanted)
    r, w = os.pipe()
    try:
        order: list[str] = []

        def wake() -> None:
            order.append("woken")
            os.write(w, b"\0")

        t = threading.Timer(0.05, wake)
        t.start()
        done = threading.Event()
        napper = threading.Thread(target=lambda: (d.nap(60.0, r), order.append("returned"), done.set()))
        napper.start()
        assert done.wait(30), "the nap did not end when its pipe was written"
        napper.join()
        t.join()
        assert order == ["woken", "returned"] and req[0] == 0
        os.read(r, 1)
        wanted[0] = 1
        req[0] = 99
        d.nap(1e300)  # wanted is set: returns at once, however long the nap asked for
        d.nap(1e300, r)
        assert req[0] == 0
    finally:
        os.close(r)
        os.close(w)
        d.set_signals(None, None)


def test_a_nap_wakes_on_a_pipe_whose_descriptor_is_past_fd_setsize(dsp: Any) -> None:
    """A process with over 1024 files open gives the wake pipe a descriptor select() cannot take
    (FD_SETSIZE): the pure twin's nap raised ValueError there, which ended the reput thread."""
    import fcntl
    import os
    import resource
    import threading

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        if hard != resource.RLIM_INFINITY and hard < 1200:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is below 1200")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    d = dsp.Dispatcher()
    req, wanted = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    d.set_signals(req, wanted)
    r0, w = os.pipe()
    r = fcntl.fcntl(r0, fcntl.F_DUPFD, 1100)
    os.close(r0)
    try:
        assert r >= 1100
        d.nap(0.001, r)  # times out
        t = threading.Timer(0.05, lambda: os.write(w, b"\0"))
        t.start()
        d.nap(60.0, r)  # returns when written, not after a minute
        t.join()
        assert req[0] == 0
    finally:
        os.close(r)
        os.close(w)
        d.set_signals(None, None)
        if soft < 1200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# --------------------------------------------------------------------------------------------------
# select_units: the unit loop of getMessage
# --------------------------------------------------------------------------------------------------


def _reference_select(units: list[tuple[int, int, int]], offset: int, max_msgs: int, max_bytes: int,
                      codes: set[int] | None, cl_min: int, max_phys: int, mem_limit: int,
                      limits: tuple[int, int, int, int]) -> tuple:
    """DefaultMessageStore.getMessage's loop over the units, written out plainly from the spec."""
    disk_b, disk_c, mem_b, mem_c = limits
    status, total, taken, i = 0, 0, [], 0
    for off, size, code in units:
        if total and taken:
            if max_msgs <= len(taken):
                break
            lb, lc = (disk_b, disk_c) if max_phys - off > mem_limit else (mem_b, mem_c)
            if total + size > min(lb, max_bytes) or len(taken) > lc - 1:
                break
        i += 1
        if codes is not None and code >= -(2**31):
            c32 = code & 0xFFFFFFFF
            if (c32 - 2**32 if c32 >= 2**31 else c32) not in codes:
                continue
        if off < cl_min:
            if not total:
                status = 2
            continue
        taken.append((off, offset + i - 1, size))
        total += size
        status = 1
    return (status, i, [t[0] for t in taken], [t[1] for t in taken], [t[2] for t in taken])


@FAST
@given(
    units=st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 5000),
                             st.integers(-(2**31), 2**31 - 1) | st.integers(0, 300),
                             st.integers(-(2**63), 2**63 - 1) | st.sampled_from([7, -7, 2**32 + 7, -(2**40)])),
                   max_size=60),
    lead=st.integers(0, 3),
    offset=st.integers(0, 2**40),
    max_msgs=st.integers(-2, 40),
    max_bytes=st.integers(0, 10**6) | st.just(2**62),
    codes=st.none() | st.sets(st.sampled_from([7, -7, 0, 2**31 - 1, -(2**31)]) | st.integers(-(2**31), 2**31 - 1),
                              max_size=4),
    cl_min=st.integers(0, 3000),
    max_phys=st.integers(0, 6000),
    mem_limit=st.integers(0, 6000),
    limits=st.tuples(st.integers(0, 2000), st.integers(0, 40), st.integers(0, 5000), st.integers(0, 40)),
)
def test_select_units_twins_follow_get_message(units, lead, offset, max_msgs, max_bytes, codes, cl_min, max_phys,
                                                mem_limit, limits) -> None:
    """Both twins = the loop as RocketMQ writes it, on units read in place at any byte position,
    with corrupt values (negative sizes and offsets, codes past int32) included."""
    buf = bytearray(b"\xee" * lead)
    for off, size, code in units:
        buf += off.to_bytes(8, "big", signed=True) + size.to_bytes(4, "big", signed=True)
        buf += code.to_bytes(8, "big", signed=True)
    want = _reference_select(units, offset, max_msgs, max_bytes, codes, cl_min, max_phys, mem_limit, limits)
    for k in kernels():
        args = (offset, max_msgs, max_bytes, codes, cl_min, max_phys, mem_limit, *limits)
        status, consumed, count, packed = k.select_units(bytes(buf), lead, len(units), *args)
        assert type(packed) is bytes and len(packed) == 24 * count
        rows = np.frombuffer(packed, dtype=np.int64).reshape(3, count).tolist()
        assert (status, consumed, *rows) == want


def test_select_units_over_thousands_of_units_follows_get_message() -> None:
    """A pull of more units than the native twin keeps the GIL for (it lets it go for the loop):
    the same answers, filtered or not, with removed units first."""
    rng = np.random.default_rng(7)
    n = 6000
    units = [(int(o), int(z), int(c)) for o, z, c in zip(np.cumsum(rng.integers(50, 300, n)),
                                                         rng.integers(50, 300, n), rng.integers(0, 4, n))]
    buf = b"".join(o.to_bytes(8, "big") + z.to_bytes(4, "big") + c.to_bytes(8, "big") for o, z, c in units)
    limits = (1 << 40, 10**6, 1 << 40, 10**6)
    for max_msgs, codes, cl_min in ((n, None, 0), (5000, {1, 3}, units[100][0]), (7, {2}, 0)):
        args = (900, max_msgs, 1 << 40, codes, cl_min, units[-1][0], 1 << 30)
        want = _reference_select(units, *args, limits)
        taken = [u for u in units if (codes is None or u[2] in codes) and u[0] >= cl_min]
        assert want[0] == 1 and len(want[2]) == min(max_msgs, len(taken))
        for k in kernels():
            status, consumed, count, packed = k.select_units(buf, 0, n, *args, *limits)
            rows = np.frombuffer(packed, dtype=np.int64).reshape(3, count).tolist()
            assert (status, consumed, *rows) == want


def test_select_units_range_errors() -> None:
    buf = bytes(20 * 4 + 3)
    for k in kernels():
        assert k.select_units(buf, 3, 4, 0, 32, 2**20, None, 0, 10, 0, 1, 1, 1 << 20, 32)[:2] == (1, 4)
        for pos, n in ((4, 4), (-1, 1), (0, -1), (len(buf) + 1, 0)):
            with pytest.raises(ValueError):
                k.select_units(buf, pos, n, 0, 32, 2**20, None, 0, 10, 0, 1, 1, 1 << 20, 32)


def test_run_takes_state_arrays_as_c_contiguous_int64_in_both_twins(dsp: Any) -> None:
    """Dispatcher.run's ``seg``, ``seg_out`` and ``live``: C-contiguous int64 arrays (each exported
    once per call), ValueError for anything else, and nothing dispatched; ``buf`` any bytes-like."""
    d = dsp.Dispatcher()
    seg, seg_out, live = np.zeros(10, dtype=np.int64), np.zeros((4, 8), dtype=np.int64), np.zeros(1, dtype=np.int64)
    for buf in (bytes(64), bytearray(64), memoryview(bytearray(64))):
        assert d.run(buf, 0, 0, 64, False, False, 0, seg, seg_out)[:3] == (0, 0, ST_END)
    bad = [
        dict(seg=np.zeros(10, dtype=np.float64)),
        dict(seg=np.zeros(9, dtype=np.int64)),
        dict(seg=np.zeros(20, dtype=np.int64)[::2]),
        dict(seg=np.zeros((2, 10), dtype=np.int64)),
        dict(seg=[0] * 10),
        dict(seg_out=np.zeros((3, 8), dtype=np.int64)),
        dict(seg_out=np.zeros((4, 16), dtype=np.int64)[:, ::2]),
        dict(seg_out=np.zeros((4, 8), dtype=np.int32)),
        dict(live=np.zeros(0, dtype=np.int64)),
        dict(live=np.zeros(1, dtype=np.uint8)),
    ]
    ro = np.zeros(10, dtype=np.int64)
    ro.flags.writeable = False
    bad.append(dict(seg=ro))
    for kw in bad:
        args = dict(seg=seg, seg_out=seg_out, live=live)
        args.update(kw)
        with pytest.raises(ValueError):
            d.run(bytes(64), 0, 0, 64, False, False, 0, args["seg"], args["seg_out"], args["live"], 64)
    with pytest.raises(ValueError):
        d.run(bytes(64), 0, 0, 65, False, False, 0, seg, seg_out)
    assert not seg.any() and not seg_out.any()


# --------------------------------------------------------------------------------------------------
# named results and stop codes (issue 24: no positional 10-tuple, no literal stop codes)
# --------------------------------------------------------------------------------------------------


def test_stop_codes_and_select_statuses_are_layouts_names_in_both_twins() -> None:
    from rmqcore import layout as L

    names = ("STOP_NONE", "STOP_QUEUE", "STOP_SPECIAL", "STOP_INDEX", "STOP_SEG",
             "SELECT_NO_MATCH", "SELECT_FOUND", "SELECT_REMOVING")
    for k in kernels():
        assert [getattr(k, n) for n in names] == [getattr(L, n) for n in names]
    assert len({L.STOP_NONE, L.STOP_QUEUE, L.STOP_SPECIAL, L.STOP_INDEX, L.STOP_SEG}) == 5
    assert len({L.SPECIAL_FLAGS, L.SPECIAL_QUEUE_POS, L.SPECIAL_KEYS}) == 3


def test_run_returns_a_named_result_for_each_stop(dsp: Any) -> None:
    """Dispatcher.run answers a DispatchRun: an unbound queue stops with STOP_QUEUE and names the
    record's topic (position and length), queue id and offset; an unbound index file stops with
    STOP_INDEX before the record; the delay topic stops with STOP_SPECIAL, reason SPECIAL_FLAGS; a
    run to its limit is STOP_NONE with the records done and their newest store time."""
    from rmqcore import layout as L
    from rmqcore.kernel_results import DispatchRun

    seg, seg_out = np.zeros(10, dtype=np.int64), np.zeros((4, 8), dtype=np.int64)
    rec = record(b"TopicQ", queue_id=3, queue_offset=0, store_timestamp=1_700_000_000_500)
    buf = rec + bytes(8)
    d = dsp.Dispatcher()
    r = d.run(buf, 0, 0, len(rec), False, False, 0, seg, seg_out)
    assert type(r) is DispatchRun
    assert (r.stop, r.done, r.at, r.queue_id, r.queue_offset) == (L.STOP_QUEUE, 0, 0, 3, 0)
    assert buf[r.topic_pos : r.topic_pos + r.topic_len] == b"TopicQ"
    cq = bytearray(20 * 4)
    d.bind_queue(b"TopicQ", 3, cq, 0, 0, 0, -1)
    r = d.run(buf, 0, 0, len(rec), False, True, 0, seg, seg_out)
    assert (r.stop, r.done, r.at, r.first_key) == (L.STOP_INDEX, 0, 0, 0)
    r = d.run(buf, 0, 0, len(rec), False, False, 0, seg, seg_out)
    assert (r.stop, r.done, r.at, r.status, r.max_timestamp, r.seg_entries) == (
        L.STOP_NONE, 1, len(rec), L.ST_END, 1_700_000_000_500, 0)
    delay = record(SCHEDULE, props=b"DELAY\x013\x02")
    r = dsp.Dispatcher().run(delay, 0, 0, len(delay), False, False, 0, seg, seg_out)
    assert (r.stop, r.reason, r.done) == (L.STOP_SPECIAL, L.SPECIAL_FLAGS, 0)


def test_publish_dispatches_what_is_appended_at_its_armed_position_as_run_would(dsp: Any) -> None:
    """Dispatcher.arm / publish / disarm (publish-on-put): an armed Dispatcher dispatches the
    records appended at its position, one put (or batch) at a time, into the same units and
    segment-index entries one run over them writes; it says 0 for records dispatched before and -1
    (nothing written) when not armed, for another file, or for records past its position; a stop (a
    queue to bind) makes every publish -1 until disarm, which reports it."""
    from rmqcore import layout as L

    F = 1 << 20  # the CommitLog file's first offset
    recs, at = [], 0
    for i in range(4):
        r = record(b"TopicQ", queue_id=3, queue_offset=i, store_timestamp=1_700_000_000_000 + 10 * i,
                   props=b"TAGS\x01t%d\x02KEYS\x01k%d\x02" % (i, i))
        recs.append((at, r))
        at += len(r)
    buf = bytearray(8192)
    for p, r in recs:
        buf[p : p + len(r)] = r
    ends = [p + len(r) for p, r in recs]

    def fresh(cols: int = 8) -> tuple[Any, bytearray, np.ndarray, np.ndarray]:
        d = dsp.Dispatcher()
        cq = bytearray(20 * 8)
        d.bind_queue(b"TopicQ", 3, cq, 0, 0, 0, -1)
        seg = np.zeros(10, dtype=np.int64)
        seg[7], seg[9] = 1, 1  # an entry before every record after the first
        return d, cq, seg, np.full((4, cols), -7, dtype=np.int64)

    d, cq, seg, seg_out = fresh()
    assert d.published == -1 and d.disarm() is None
    assert d.publish(buf, F, 0, ends[0]) == -1  # not armed
    d.arm(F, F, False, seg, seg_out)
    with pytest.raises(ValueError):
        d.arm(F, F, False, seg, seg_out)
    assert d.published == F
    assert d.publish(buf, F, ends[0], ends[1]) == -1  # record 0 is not dispatched: not this one either
    assert d.publish(buf, 2 * F, 0, ends[0]) == -1  # another file
    assert bytes(cq) == bytes(len(cq)) and d.published == F  # nothing written
    assert d.publish(buf, F, 0, ends[0]) == 1
    assert d.published == F + ends[0]
    assert d.publish(buf, F, 0, ends[0]) == 0  # dispatched already
    assert d.publish(buf, F, ends[0], ends[3]) == 1  # a batch of three
    assert d.disarm() == (F + ends[3], 3, 1_700_000_000_030, L.STOP_NONE, 0)
    assert d.publish(buf, F, ends[3], ends[3]) == -1 and d.published == -1

    d2, cq2, seg2, seg_out2 = fresh()
    r = d2.run(buf, F, 0, ends[3], False, False, 0, seg2, seg_out2)
    assert (r.done, r.seg_entries) == (4, 3)
    assert bytes(cq) == bytes(cq2) and np.array_equal(seg, seg2) and np.array_equal(seg_out, seg_out2)

    # a record of a queue not bound: declined, nothing written, and so is every publish after it
    z = record(b"TopicZ", queue_id=0, queue_offset=0, store_timestamp=1_700_000_000_100)
    buf[ends[3] : ends[3] + len(z)] = z
    d.arm(F, F + ends[3], False, seg, seg_out)
    assert d.publish(buf, F, ends[3], ends[3] + len(z)) == -1
    assert d.publish(buf, F, ends[3], ends[3] + len(z)) == -1
    pos, nseg, max_ts, stop, arg = d.disarm()  # type: ignore[misc]
    assert (pos, nseg, max_ts, stop) == (F + ends[3], 0, -1, L.STOP_QUEUE)
    assert bytes(buf[arg : arg + 6]) == b"TopicZ"
    assert bytes(cq) == bytes(cq2)

    # no room in seg_out for the entries the records may make: declined before anything is written
    d3, cq3, seg3, seg_out3 = fresh(cols=1)
    d3.arm(F, F, False, seg3, seg_out3)
    assert d3.publish(buf, F, 0, ends[3]) == -1
    assert d3.disarm() == (F, 0, -1, L.STOP_SEG, 0)
    assert bytes(cq3) == bytes(len(cq3))


# --------------------------------------------------------------------------------------------------
# Python code run during a call, and calls from another thread during a run (crashes found by an audit)
# --------------------------------------------------------------------------------------------------


class _GrowsCodes(int):
    """A tag code whose comparison (``-2**31 <= c`` tries it first) appends 1000 codes to ``grow``."""

    grow: list[Any] = []

    def __ge__(self, other: Any) -> bool:
        if len(self.grow) < 100_000:
            self.grow.extend(range(1000))
        return int.__ge__(self, other)


class _CodesLie:
    """Codes whose ``len`` says none while iterating and ``in`` see 200,000 (tag code 0 among them)."""

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Any:
        return iter(range(200_000))

    def __contains__(self, x: int) -> bool:
        return 0 <= x < 200_000


def test_select_units_with_codes_that_change_or_lie_answers_as_the_pure_twin() -> None:
    """``codes`` is read once, through a tuple (the native twin sized its scratch by ``len`` and
    then wrote every item iteration gave: a list grown by an item's comparison, or a ``len`` that
    says too few, overran it)."""
    buf = bytes(20 * 4)  # 4 units, tag code 0
    results = []
    for k in kernels():
        grown: list[Any] = []
        _GrowsCodes.grow = grown
        grown.append(_GrowsCodes(7))
        got = []
        for codes in (grown, _CodesLie()):
            status, consumed, count, packed = k.select_units(buf, 0, 4, 0, 32, 1 << 20, codes, 0, 1 << 40,
                                                             1 << 30, 1 << 20, 32, 1 << 20, 32)
            got.append((status, consumed, count, np.frombuffer(packed, dtype=np.int64).tolist()))
        results.append(got)
    assert results[0] == results[-1]
    assert [g[2] for g in results[0]] == [0, 4]  # 7 matches none; the liar's 0 matches all four


def test_a_dispatcher_refuses_to_change_what_a_run_or_a_nap_uses(dsp: Any) -> None:
    """While a run is in progress on another thread (without the GIL in the native twin), the
    calls that would change what it reads (the hint ring, the bound queues and index, the notify
    buffer, the hand-off words) and a second run raise RuntimeError instead of pulling buffers from
    under it (set_hints(None, None) made the native run read a NULL head); the run ends as it would
    have, and the calls work again after it. A nap shares only the hand-off words: a second nap
    and set_signals/set_wake wait for it, a run and its bindings (the store's readers) do not."""
    import os
    import threading
    import time

    d = dsp.Dispatcher()
    ring = np.full((HINT_CAPACITY, HINT_FIELDS), -1, dtype=np.int64)
    head = np.zeros(1, dtype=np.int64)
    request, wanted = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    d.set_hints(ring, head)
    d.set_signals(request, wanted)
    d.live_nap(1_000_000, 30_000_000_000)  # caught up: naps of 1 ms, for up to 30 s in a row
    buf, live = bytearray(8192), np.zeros(1, dtype=np.int64)
    seg, seg_out = np.zeros(10, dtype=np.int64), np.zeros((4, 16), dtype=np.int64)
    cq = bytearray(20 * 16)
    refused: list[str] = []

    def busy(call: Any) -> bool:
        try:
            call()
        except RuntimeError as e:
            refused.append(str(e))
            return True
        return False

    def during_the_run() -> None:
        deadline = time.monotonic() + 20
        while not busy(lambda: d.set_hints(ring, head)) and time.monotonic() < deadline:
            time.sleep(0.001)  # not in the run yet: the same ring again changes nothing
        busy(lambda: d.set_hints(None, None))
        busy(lambda: d.bind_queue(b"T", 0, cq, 0, 0, 0))
        busy(lambda: d.bind_index(None, 1, 1))
        busy(lambda: d.set_notify(None))
        busy(d.release)
        busy(lambda: d.run(bytes(64), 0, 0, 64, False, False, 0, seg, seg_out))
        wanted[0] = 1  # someone wants the store: the run returns instead of napping on

    t = threading.Thread(target=during_the_run)
    t.start()
    r = d.run(buf, 0, 0, 0, False, False, 0, seg, seg_out, live, 8192)
    t.join()
    assert tuple(r)[:4] == (0, 0, ST_END, 0) and len(refused) == 7
    assert all("in a run on another thread" in m for m in refused)
    wanted[0] = 0
    assert d.bind_queue(b"T", 0, cq, 0, 0, 0) == 0  # after the run: as ever
    d.set_hints(None, None)

    rfd, wfd = os.pipe()
    try:
        refused.clear()

        def during_the_nap() -> None:
            deadline = time.monotonic() + 20
            while not busy(lambda: d.set_signals(request, wanted)) and time.monotonic() < deadline:
                time.sleep(0.001)
            busy(lambda: d.set_wake(None))
            busy(lambda: d.nap(0.0))
            # a nap uses no binding and no scratch: a run (another thread's dispatch) goes on meanwhile
            assert d.bind_queue(b"T", 1, cq, 0, 0, 0) == 1
            assert d.run(bytes(64), 0, 0, 64, False, False, 0, seg, seg_out)[:3] == (0, 0, ST_END)
            os.write(wfd, b"x")  # the nap ends

        t = threading.Thread(target=during_the_nap)
        t.start()
        d.nap(20.0, rfd)
        t.join()
        assert len(refused) == 3 and all("in a nap on another thread" in m for m in refused)
        d.set_signals(None, None)
    finally:
        os.close(rfd)
        os.close(wfd)
    d.release()
