"""The ``kafka_batch`` kernel twins: statuses of the header walk, CRC modes, searches and varint record
parsing, with the same answers and exceptions from both implementations."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqcore.errors import CorruptionError, RecordSizeError
from rmqcore.kafka.records import Record, encode_batch, encode_varint, encode_varlong
from tests.conftest import twins

_SHARED = Path(__file__).resolve().parents[3] / "shared"
if not _SHARED.is_dir():  # allow an override, as tests/conftest.py does
    _SHARED = Path(os.environ.get("RMQCORE_SHARED", _SHARED))
FIXTURES = _SHARED / "fixtures" / "kafka"


def log_bytes(scenario: str) -> bytes:
    return (FIXTURES / scenario / "00000000000000000000.log").read_bytes()


def outcome(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - comparing exception classes is the point
        return ("raise", type(e), getattr(e, "detail", str(e)), getattr(e, "position", None))


def same_everywhere(impls: tuple[SimpleNamespace, ...], name: str, *args: Any) -> Any:
    results = [outcome(getattr(k.kafka_batch, name), *args) for k in impls]
    assert all(r == results[0] for r in results), (name, results)
    return results[0]


def test_walks_a_real_log(impl: SimpleNamespace) -> None:
    kb = impl.kafka_batch
    data = log_bytes("v2_transactions")
    hdrs, stop, st = kb.batch_headers(data, 0, len(data), kb.CRC_REPORT, -1)
    assert (len(hdrs), stop, st) == (32, len(data), kb.END)
    assert hdrs[0] == (0, 220, 2, 0, 2, 1700000000015, 1)
    assert all(h[6] == 1 for h in hdrs)
    assert kb.scan(data, 0, len(data), 1) == (32, len(data), kb.END)
    assert kb.scan(data, 0, len(data) - 1, 1) == (31, hdrs[-1][0], kb.TORN)
    assert kb.scan(data, 220, len(data), 0) == (31, len(data), kb.END)
    assert kb.batch_headers(data, 0, len(data), 0, 3)[1:] == (hdrs[3][0], kb.OK)
    assert kb.batch_headers(data, 0, len(data), 0, 0) == ([], 0, kb.OK)
    assert kb.find_offset(data, 0, len(data), 0) == (kb.OK, 0, 220, 2)
    assert kb.find_offset(data, 0, len(data), 11) == (kb.OK, 929, 214, 13)
    assert kb.find_offset(data, 0, len(data), 10**6) == (kb.END, len(data), 0, -1)
    assert kb.find_timestamp(data, 0, len(data), 1700000000016) == (kb.OK, 220, 211)
    assert kb.find_timestamp(data, 0, len(data), 1 << 62) == (kb.END, len(data), 0)
    legacy = log_bytes("legacy_v0")
    assert kb.find_timestamp(legacy, 0, len(legacy), -1)[0] == kb.OK  # v0: max timestamp -1
    assert kb.find_timestamp(legacy, 0, len(legacy), 0)[0] == kb.END


def test_statuses() -> None:
    impls = twins()
    kb = impls[0].kafka_batch
    good = encode_batch([Record(0, 5, b"k", b"v")])
    cases = {
        "empty": (b"", kb.END),
        "short tail": (good + b"\x00" * 17, kb.TORN),
        "partial batch": (good + good[:-1], kb.TORN),
        "size below 14": (good + struct.pack(">qi", 1, 13) + b"\x00" * 10, kb.E_SIZE),
        "zero tail": (good + b"\x00" * 100, kb.E_SIZE),
        "magic 3": (good + good[:16] + b"\x03" + good[17:], kb.E_MAGIC),
        "negative magic": (good + good[:16] + b"\x80" + good[17:], kb.E_MAGIC),
        "short v2": (good + struct.pack(">qii", 1, 30, 0) + b"\x02" + b"\x00" * 30, kb.E_SHORT),
        "short v1": (good + struct.pack(">qiI", 1, 20, 0) + b"\x01" + b"\x00" * 19, kb.E_SHORT),
        "crc": (good + good[:-1] + bytes([good[-1] ^ 1]), kb.E_CRC),
    }
    for name, (data, status) in cases.items():
        got = same_everywhere(impls, "scan", data, 0, len(data), 1)
        expect_count = 0 if name == "empty" else 1
        assert got == ("ok", (expect_count, 0 if name == "empty" else len(good), status)), name
        for mode in (0, 1, 2):
            same_everywhere(impls, "batch_headers", data, 0, len(data), mode, -1)
        same_everywhere(impls, "find_offset", data, 0, len(data), 1)
        same_everywhere(impls, "find_timestamp", data, 0, len(data), 6)
    data = cases["crc"][0]
    hdrs, stop, st = impls[0].kafka_batch.batch_headers(data, 0, len(data), 2, -1)
    assert [h[6] for h in hdrs] == [1, 0] and st == kb.END
    assert impls[0].kafka_batch.batch_headers(data, 0, len(data), 1, -1)[1:] == (len(good), kb.E_CRC)


@pytest.mark.parametrize("args", [(b"abc", -1, 2), (b"abc", 2, 1), (b"abc", 0, 4)])
def test_range_errors(args: tuple[bytes, int, int], impl: SimpleNamespace) -> None:
    kb = impl.kafka_batch
    for call in (
        lambda: kb.scan(*args, 1),
        lambda: kb.batch_headers(*args, 0, -1),
        lambda: kb.find_offset(*args, 0),
        lambda: kb.find_timestamp(*args, 0),
        lambda: kb.parse_records(*args, 0),
    ):
        with pytest.raises(ValueError):
            call()
    with pytest.raises(ValueError):
        kb.batch_headers(b"", 0, 0, 3, -1)


def _record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


def _body(
    ts: int = 0, off: int = 0, key: bytes | None = b"k", value: bytes | None = b"v", headers: bytes = b"\x00"
) -> bytes:
    parts = [b"\x00", encode_varlong(ts), encode_varint(off)]
    parts.append(encode_varint(-1) if key is None else encode_varint(len(key)) + key)
    parts.append(encode_varint(-1) if value is None else encode_varint(len(value)) + value)
    return b"".join(parts) + headers


def test_parse_records_valid() -> None:
    impls = twins()
    hdrs = (
        encode_varint(2) + encode_varint(1) + b"a" + encode_varint(-1) + encode_varint(0) + encode_varint(0)
    )
    data = _record(_body(-5, 3, None, b"", hdrs)) + _record(_body(1 << 40, 7, b"kk", None))
    got = same_everywhere(impls, "parse_records", data, 0, len(data), 2)
    assert got[1][0] == (
        len(_record(_body(-5, 3, None, b"", hdrs))),
        0,
        -5,
        3,
        None,
        b"",
        ((b"a", None), (b"", b"")),
    )
    assert got[1][1][2:6] == (1 << 40, 7, b"kk", None)
    assert same_everywhere(impls, "parse_records", b"", 0, 0, 0) == ("ok", [])


@pytest.mark.parametrize(
    "data,count,exc,fragment",
    [
        (b"", -1, CorruptionError, "invalid record count -1"),
        (b"", 1, CorruptionError, "varint runs past"),
        (b"\xff\xff\xff\xff\xff\x01", 1, CorruptionError, "varint is too long"),
        (encode_varint(-3), 1, RecordSizeError, "Invalid record size"),
        (encode_varint(50) + b"\x00" * 10, 1, RecordSizeError, "only 10 remaining"),
        (_record(_body()) + b"\x00", 1, RecordSizeError, "Incorrect declared batch size"),
        (
            _record(_body(headers=encode_varint(-1))),
            1,
            CorruptionError,
            "invalid number of record headers -1",
        ),
        (
            _record(_body(headers=encode_varint(1) + encode_varint(-2))),
            1,
            CorruptionError,
            "negative header key size -2",
        ),
        (
            _record(_body(headers=encode_varint(1) + encode_varint(9) + b"a")),
            1,
            CorruptionError,
            "runs past the end",
        ),
        (_record(_body() + b"\x00\x00"), 1, RecordSizeError, "expected to read"),
        (_record(b"\x00" + b"\xff" * 10 + b"\x01"), 1, CorruptionError, "varlong is too long"),
        (_record(b""), 1, CorruptionError, "attributes run past"),
        (encode_varint(1) + b"\x00", 1, CorruptionError, "varlong runs past"),
    ],
)
def test_parse_records_errors(
    data: bytes, count: int, exc: type[Exception], fragment: str
) -> None:
    impls = twins()
    got = same_everywhere(impls, "parse_records", data, 0, len(data), count)
    assert got[0] == "raise" and got[1] is exc and fragment in got[2], got


@settings(max_examples=150)
@given(
    ts=st.integers(-(1 << 63), (1 << 63) - 1),
    off=st.integers(-(1 << 31), (1 << 31) - 1),
    key=st.one_of(st.none(), st.binary(max_size=40)),
    value=st.one_of(st.none(), st.binary(max_size=200)),
)
def test_varints_roundtrip(
    ts: int, off: int, key: bytes | None, value: bytes | None
) -> None:
    impls = twins()
    data = _record(_body(ts, off, key, value))
    got = same_everywhere(impls, "parse_records", data, 0, len(data), 1)
    assert got[1] == [(len(data), 0, ts, off, key, value, ())]


@settings(max_examples=150)
@given(raw=st.binary(max_size=12))
def test_overlong_varints_wrap_like_java(raw: bytes) -> None:
    # any byte soup as the record body: both twins give the same answer or the same error
    impls = twins()
    data = _record(b"\x00" + raw)
    same_everywhere(impls, "parse_records", data, 0, len(data), 1)


def _read_zigzag_leb128(data: bytes) -> int:
    """Reference decoder (ByteUtils.readVarlong): LEB128, then zig-zag back."""
    raw = sum((b & 0x7F) << (7 * i) for i, b in enumerate(data))
    assert all(b & 0x80 for b in data[:-1]) and not data[-1] & 0x80
    return (raw >> 1) ^ -(raw & 1)


@pytest.mark.parametrize(
    ("encode", "value", "expected"),
    [
        (encode_varint, 0, b"\x00"),
        (encode_varint, -1, b"\x01"),
        (encode_varint, 1, b"\x02"),
        (encode_varint, 63, b"\x7e"),
        (encode_varint, -64, b"\x7f"),
        (encode_varint, 64, b"\x80\x01"),
        (encode_varint, 2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (encode_varint, -(2**31), b"\xff\xff\xff\xff\x0f"),
        (encode_varlong, 2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (encode_varlong, -(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_varint_encoding_at_the_bounds(encode: Callable[[int], bytes], value: int, expected: bytes) -> None:
    assert encode(value) == expected


@pytest.mark.parametrize(
    ("encode", "value", "kind"),
    [(encode_varint, 2**31, "varint (int32)"), (encode_varint, -(2**31) - 1, "varint (int32)"),
     (encode_varlong, 2**63, "varlong (int64)"), (encode_varlong, -(2**63) - 1, "varlong (int64)")],
)
def test_varint_outside_its_width_is_refused(encode: Callable[[int], bytes], value: int, kind: str) -> None:
    import re

    from rmqcore.errors import InvalidMessageError

    with pytest.raises(InvalidMessageError, match=re.escape(f"{value} does not fit a {kind}")):
        encode(value)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trips_and_varint_agrees_within_int32(value: int) -> None:
    out = encode_varlong(value)
    assert len(out) <= 10 and _read_zigzag_leb128(out) == value
    if -(2**31) <= value < 2**31:
        assert encode_varint(value) == out and len(out) <= 5


def test_read_batch_of_a_buffer_that_is_not_1d_bytes_is_a_config_error() -> None:
    """A numpy scalar exports a 0-d buffer: read_batch said IndexError from slicing it (found by
    test_fuzz_api's hypothesis run); it reads through a 1-D view of bytes, or refuses."""
    import numpy as np

    from rmqcore.errors import ConfigError
    from rmqcore.kafka.records import read_batch

    for buf in (np.int64(3), np.zeros(4, dtype=np.int32), np.zeros((2, 2), dtype=np.uint8)):
        with pytest.raises(ConfigError, match="1-D buffer of bytes"):
            read_batch(buf, 0, 0, 2)
