"""Arrow column builders (``arrowcols`` kernel): each twin against the Python reference
(``message.parse_properties``/``format_host``/``create_message_id``), native against pure on random
records and property strings (empty, missing separators, duplicates, invalid UTF-8), and bounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqcore import _impl
from rmqcore.message import create_message_id, format_host, parse_properties
from tests.conftest import IMPLS

V6 = 0x20


def _strings(offsets: np.ndarray, values: np.ndarray) -> list[bytes]:
    v = values.tobytes()
    o = offsets.tolist()
    assert o[0] == 0 and o[-1] == len(v) and offsets.dtype == np.int32 and values.dtype == np.uint8
    return [v[a:b] for a, b in zip(o, o[1:], strict=False)]


def _concat(parts: list[bytes]) -> tuple[bytes, list[int], list[int]]:
    pos, ln, acc = [], [], 0
    for p in parts:
        pos.append(acc + 3)  # some junk between the fields
        ln.append(len(p))
        acc += 3 + len(p)
    return b"".join(b"\x02\x01\xff" + p for p in parts), pos, ln


def _decoded(k: Any, data: bytes, pos: list[int], ln: list[int]) -> list[tuple[list, Any, list]]:
    """Per record: (map items, tags, keys) from split_properties' columns."""
    (mo, ko, kd, vo, vd, to, td, tv, kso, so, sd) = k.split_properties(data, pos, ln)
    names, values = _strings(ko, kd), _strings(vo, vd)
    tags, tokens = _strings(to, td), _strings(so, sd)
    assert len(mo) == len(pos) + 1 and mo[0] == 0 and mo[-1] == len(names) == len(values)
    assert kso[-1] == len(tokens) and tv.dtype == np.uint8
    out = []
    for i in range(len(pos)):
        items = [(names[j].decode(), values[j].decode()) for j in range(mo[i], mo[i + 1])]
        tag = tags[i].decode() if tv[i] else None
        if not tv[i]:
            assert tags[i] == b""
        out.append((items, tag, [t.decode() for t in tokens[kso[i] : kso[i + 1]]]))
    return out


def _expected(raw: bytes) -> tuple[list, Any, list]:
    m = parse_properties(raw.decode("utf-8", "replace"))
    return list(m.items()), m.get("TAGS"), [k for k in m.get("KEYS", "").split(" ") if k]


@pytest.fixture
def ac(impl: Any) -> Any:
    return impl.arrowcols


CASES = [
    b"",
    b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02",
    b"TAGS\x01TagA\x02KEYS\x01  k1   k2 \x02UNIQ_KEY\x01u",
    b"noseparator",
    b"\x01\x02\x01\x01\x02\x02",
    b"a\x01\x02\x01b\x02c\x01d\x01e",
    b"x\x011\x02y\x012\x02x\x013",  # duplicate: first place, last value
    b"TAGS\x01a\x02TAGS\x01b",
    b"KEYS\x01\x02KEYS\x01z",
    b"\xff\x01\xfe\x02\xfe\x01v",  # names equal after replacement
    b"TAGS\x01\xe0\x80\xc3\x02KEYS\x01\xed\xa0\x80 \xf0\x9f\x98\x80",
    b"\xf4\x90\x80\x80\x01ok",
    "ключ\x01значение\x02TAGS\x01标签".encode(),
]


def test_split_properties_cases(ac: Any) -> None:
    data, pos, ln = _concat(CASES)
    got = _decoded(ac, data, pos, ln)
    assert got == [_expected(c) for c in CASES]


def test_gathers(ac: Any) -> None:
    data, pos, ln = _concat(CASES)
    assert _strings(*ac.gather(data, pos, ln)) == CASES
    assert _strings(*ac.gather_utf8(data, pos, ln)) == [c.decode("utf-8", "replace").encode() for c in CASES]
    for f in (ac.gather, ac.gather_utf8, ac.split_properties):
        o = f(b"", [], [])
        assert o[0].tolist() == [0]


def test_hosts_and_message_ids(ac: Any) -> None:
    a4, a6 = bytes([10, 0, 255, 1]), bytes(range(0, 32, 2))
    data = b"\x00" + a4 + a6 + bytes(16)
    pos, port, flags = [1, 5, 21], [10911, 0, -7], [0, V6, V6 | 1]
    offs = [0, 2**40 + 5, 2**63 - 1]
    addrs = [a4, a6, bytes(16)]
    assert [s.decode() for s in _strings(*ac.format_hosts(data, pos, port, flags, V6))] == [
        format_host(a, p) for a, p in zip(addrs, port, strict=True)
    ]
    assert [s.decode() for s in _strings(*ac.message_ids(data, pos, port, flags, V6, offs))] == [
        create_message_id(a, p, o) for a, p, o in zip(addrs, port, offs, strict=True)
    ]


def test_bounds(ac: Any) -> None:
    data = b"abcdef"
    for f in (ac.gather, ac.gather_utf8, ac.split_properties):
        for pos, ln in (([5], [2]), ([-1], [1]), ([0], [-1]), ([7], [0]), ([0, 1], [1])):
            with pytest.raises(ValueError):
                f(data, pos, ln)
        f(data, [6], [0])
    with pytest.raises(ValueError):
        ac.format_hosts(data, [3], [1], [0], V6)
    with pytest.raises(ValueError):
        ac.format_hosts(data, [0], [1], [V6], V6)
    with pytest.raises(ValueError):
        ac.message_ids(data, [0], [1], [V6], V6, [0])
    ac.format_hosts(data, [2], [1], [0], V6)


def test_buffers_of_any_kind(ac: Any) -> None:
    raw = b"TAGS\x01t\x02KEYS\x01a b"
    for data in (raw, bytearray(raw), np.frombuffer(raw, dtype=np.uint8), memoryview(raw)):
        assert _decoded(ac, data, np.array([0]), np.array([len(raw)], dtype=np.int32)) == [_expected(raw)]


# --- native vs pure ------------------------------------------------------------------------------------
_atoms = st.sampled_from(
    [b"\x01", b"\x02", b" ", b"TAGS", b"KEYS", b"TAGS\x01", b"KEYS\x01", b"a", b"k", b"\xff", b"\xc3",
     b"\xe0\x80", b"\xed\xa0\x80", b"\xf0\x9f\x98\x80", "é".encode(), b"\x00"]
)
_props = st.one_of(st.binary(max_size=60), st.lists(_atoms, max_size=25).map(b"".join))


@pytest.mark.skipif(IMPLS != ["pure", "native"], reason="needs both implementations")
@settings(max_examples=300, deadline=None)
@given(st.lists(_props, max_size=12), st.data())
def test_native_matches_pure(props: list[bytes], data: Any) -> None:
    native, pure = _impl.kernel("arrowcols", "native"), _impl.kernel("arrowcols", "pure")
    buf, pos, ln = _concat(props)
    n1, p1 = native.split_properties(buf, pos, ln), pure.split_properties(buf, pos, ln)
    assert len(n1) == len(p1) == 11
    for a, b in zip(n1, p1, strict=True):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
    assert _decoded(native, buf, pos, ln) == [_expected(p) for p in props]
    for f in ("gather", "gather_utf8"):
        x, y = getattr(native, f)(buf, pos, ln), getattr(pure, f)(buf, pos, ln)
        assert all(a.tolist() == b.tolist() for a, b in zip(x, y, strict=True))
    # hosts / ids over random addresses in the same buffer
    n = len(buf)
    if n >= 16:
        k = data.draw(st.integers(0, 8))
        hpos = data.draw(st.lists(st.integers(0, n - 16), min_size=k, max_size=k))
        port = data.draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=k, max_size=k))
        flags = data.draw(st.lists(st.sampled_from([0, V6, 0xFF]), min_size=k, max_size=k))
        offs = data.draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=k, max_size=k))
        calls = (("format_hosts", (hpos, port, flags, V6)), ("message_ids", (hpos, port, flags, V6, offs)))
        for f, args in calls:
            x, y = getattr(native, f)(buf, *args), getattr(pure, f)(buf, *args)
            assert all(a.tolist() == b.tolist() for a, b in zip(x, y, strict=True))


@pytest.mark.skipif(IMPLS != ["pure", "native"], reason="needs both implementations")
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80), st.lists(st.tuples(st.integers(-3, 90), st.integers(-3, 90)), max_size=6))
def test_bad_ranges_never_crash(buf: bytes, ranges: list[tuple[int, int]]) -> None:
    pos, ln = [r[0] for r in ranges], [r[1] for r in ranges]
    for name in ("gather", "gather_utf8", "split_properties"):
        res = []
        for impl in ("native", "pure"):
            try:
                out = getattr(_impl.kernel("arrowcols", impl), name)(buf, pos, ln)
                res.append([a.tolist() for a in out])
            except ValueError:
                res.append("ValueError")
        assert res[0] == res[1]


def test_empty_allocator(ac: Any) -> None:
    data, pos, ln = _concat(CASES)
    calls: list[tuple[int, Any]] = []

    def empty(n: int, dtype: Any) -> np.ndarray:
        calls.append((n, np.dtype(dtype)))
        return np.full(n, 0xAB, dtype=dtype)  # garbage: every output byte must be written

    for f, args in (("gather", (pos, ln)), ("gather_utf8", (pos, ln)), ("split_properties", (pos, ln)),
                    ("format_hosts", ([0], [1], [0], V6)), ("message_ids", ([0], [1], [0], V6, [7]))):
        calls.clear()
        want = getattr(ac, f)(data, *args)
        got = getattr(ac, f)(data, *args, empty=empty)
        assert calls and all(a.tolist() == b.tolist() for a, b in zip(want, got, strict=True))
    with pytest.raises(ValueError):
        ac.gather(data, pos, ln, empty=lambda n, dt: np.empty(n + 1, dtype=dt))
    with pytest.raises(ValueError):
        ac.gather(data, pos, ln, empty=lambda n, dt: np.empty(n, dtype=np.int64))


class _ShapeLies(np.ndarray):
    """An array whose ``shape`` attribute says what ``said`` holds, whatever its buffer is."""

    said: Any = None

    @property  # type: ignore[misc]
    def shape(self) -> Any:
        return self.said


def test_an_allocator_whose_array_lies_about_its_shape_is_refused(ac: Any) -> None:
    """The kernels write through the buffer the allocator's array exports: one of 1 item that says
    it has n is a ValueError (the native twin wrote n items into it: a heap overflow), in both."""
    data, pos, ln = _concat(CASES)

    def empty(n: int, dtype: Any) -> np.ndarray:
        a = np.zeros(1, dtype=dtype).view(_ShapeLies)
        a.said = (n,)
        return a

    for f, args in (("gather", (pos, ln)), ("gather_utf8", (pos, ln)), ("split_properties", (pos, ln)),
                    ("format_hosts", ([0], [1], [0], V6)), ("message_ids", ([0], [1], [0], V6, [7]))):
        with pytest.raises(ValueError):
            getattr(ac, f)(data, *args, empty=empty)
