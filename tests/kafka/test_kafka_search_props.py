"""Property tests of the index search kernel (``sparse.index_search``): it agrees with a brute-force
scan on sorted indexes (with duplicates, empty and full, warm and cold sections), and the twins agree
slot for slot on arbitrary (even unsorted, zero-tailed) bytes."""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqcore.kafka import OffsetIndex, TimeIndex
from tests.conftest import twins

LLB, SUB = 0, 1
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)

# (entry_size, key (pos, width), value (pos, width)) of the offset index and the time index
LAYOUTS = {"offset": (8, (0, 4), (4, 4)), "time": (12, (0, 8), (8, 4))}


def pack(layout: str, rows: list[tuple[int, int]]) -> bytes:
    fmt = ">ii" if layout == "offset" else ">qi"
    return b"".join(struct.pack(fmt, a, b) for a, b in rows)


def kafka_reference(fields: list[int], target: int, mode: int, warm: int) -> int:
    """Kafka's indexSlotRangeFor, written plainly (the spec's pseudo-code)."""
    n = len(fields)
    if n == 0:
        return -1
    first_hot = max(0, n - 1 - warm)
    if fields[first_hot] < target:
        lo, hi = first_hot, n - 1
    elif fields[0] > target:
        return -1 if mode == LLB else 0
    else:
        lo, hi = 0, first_hot
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if fields[mid] > target:
            hi = mid - 1
        elif fields[mid] < target:
            lo = mid
        else:
            return mid
    if mode == LLB:
        return lo
    return -1 if lo == n - 1 else lo + 1


def brute_floor_value(fields: list[int], target: int) -> int | None:
    below = [f for f in fields if f <= target]
    return max(below) if below else None


def brute_ceiling_value(fields: list[int], target: int) -> int | None:
    above = [f for f in fields if f >= target]
    return min(above) if above else None


def brute_strict_ceiling_value(fields: list[int], target: int) -> int | None:
    above = [f for f in fields if f > target]
    return min(above) if above else None


@st.composite
def sorted_index(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]], int, int]:
    """A sorted (non-decreasing, duplicates allowed) index, a target and a warm size."""
    layout = draw(st.sampled_from(["offset", "time"]))
    size = draw(st.sampled_from([0, 1, 2, 3, draw(st.integers(0, 60)), draw(st.integers(0, 1500))]))
    lo_bound = -50 if layout == "offset" else -(10**6)
    start = draw(st.integers(lo_bound, 1000))
    steps = draw(st.lists(st.integers(0, 3), min_size=size, max_size=size))
    keys = []
    k = start
    for s in steps:
        k += s
        keys.append(k)
    vals = []
    v = draw(st.integers(-10, 10))
    for _ in keys:
        v += draw(st.integers(0, 2)) if size < 80 else 1
        vals.append(v)
    rows = list(zip(keys, vals, strict=True))
    target = draw(st.one_of(st.integers(start - 5, k + 5), INT32 if layout == "offset" else INT64))
    warm = draw(st.sampled_from([0, 1, 2, 7, 8192 // LAYOUTS[layout][0], 10**6]))
    return layout, rows, target, warm


@settings(max_examples=300)
@given(case=sorted_index(), mode=st.sampled_from([LLB, SUB]), which=st.sampled_from(["key", "value"]))
def test_search_agrees_with_brute_force(
    case: tuple[str, list[tuple[int, int]], int, int],
    mode: int,
    which: str,
) -> None:
    impls = twins()
    layout, rows, target, warm = case
    es, key, value = LAYOUTS[layout]
    pos, width = key if which == "key" else value
    fields = [r[0] if which == "key" else r[1] for r in rows]
    buf = pack(layout, rows) + b"\x00" * es * 3  # slack slots past the live entries are never read
    expected_slot = kafka_reference(fields, target, mode, warm)
    for k in impls:
        slot = k.sparse.index_search(buf, len(rows), es, pos, width, target, mode, warm)
        assert slot == expected_slot, k.name
        if mode == LLB:
            want = brute_floor_value(fields, target)
            assert (None if slot == -1 else fields[slot]) == want
            if slot != -1 and fields.count(want) == 1:
                assert fields.index(want) == slot  # unique values: the exact slot
        else:
            # Kafka's smallest upper bound is the first entry > target, or an entry == target when the
            # binary search happens to probe one (a one-entry range is never probed): both are ceilings.
            strict = brute_strict_ceiling_value(fields, target)
            if slot == -1:
                assert strict is None
            else:
                assert fields[slot] == strict or fields[slot] == target


@settings(max_examples=200)
@given(
    data=st.binary(max_size=400),
    es=st.sampled_from([8, 12]),
    target=INT64,
    mode=st.sampled_from([LLB, SUB]),
    warm=st.integers(0, 40),
    pick=st.integers(0, 10**6),
)
def test_twins_agree_on_arbitrary_bytes(
    data: bytes, es: int, target: int, mode: int, warm: int, pick: int
) -> None:
    impls = twins()
    n = len(data) // es
    pos, width = [(0, 4), (4, 4)][pick % 2] if es == 8 else [(0, 8), (8, 4)][pick % 2]
    fields = [int.from_bytes(data[i * es + pos : i * es + pos + width], "big", signed=True) for i in range(n)]
    expected = kafka_reference(fields, target, mode, warm)
    for k in impls:
        assert k.sparse.index_search(data, n, es, pos, width, target, mode, warm) == expected


def test_warm_and_cold_paths_on_a_large_index(impl: SimpleNamespace) -> None:
    n = 5000
    rows = [(i * 2, i * 100) for i in range(n)]
    buf = pack("offset", rows)
    warm = 8192 // 8
    first_hot = n - 1 - warm
    for target in [
        -1,
        0,
        1,
        2 * first_hot - 1,
        2 * first_hot,
        2 * first_hot + 1,
        2 * (n - 1),
        2 * n + 7,
        777,
        9998,
    ]:
        for mode in (LLB, SUB):
            got = impl.sparse.index_search(buf, n, 8, 0, 4, target, mode, warm)
            assert got == kafka_reference([r[0] for r in rows], target, mode, warm)
    assert impl.sparse.index_search(buf, n, 8, 0, 4, 9998, SUB, warm) == n - 1
    assert impl.sparse.index_search(buf, n, 8, 0, 4, 9999, SUB, warm) == -1
    assert impl.sparse.index_search(buf, n, 8, 0, 4, -5, SUB, warm) == 0
    assert impl.sparse.index_field(buf, n, 8, 4, 4, 3) == 300


def test_empty_and_full_indexes_through_the_classes(impl: SimpleNamespace, tmp_path: Path) -> None:
    oi = OffsetIndex(tmp_path / "e.index", 10, 64, impl=impl.name)
    assert oi.lookup(5) == (10, 0) and oi.lookup(10**30) == (10, 0)
    assert oi.fetch_upper_bound_offset(0, 0) is None
    for i in range(8):
        oi.append(10 + i * 2, i * 10)
    assert oi.is_full()
    assert [oi.lookup(t) for t in (9, 10, 11, 24, 25, 10**30, -(10**30))] == [
        (10, 0),
        (10, 0),
        (10, 0),
        (24, 70),
        (24, 70),
        (24, 70),
        (10, 0),
    ]
    oi.close()
    ti = TimeIndex(tmp_path / "e.timeindex", 10, 64, impl=impl.name)
    assert ti.lookup(123) == (-1, 10)
    for i in range(4):
        ti.maybe_append(100 + i, 10 + i)
    assert ti.lookup(102) == (102, 12) and ti.lookup(99) == (-1, 10) and ti.lookup(10**40) == (103, 13)
    ti.close()


@pytest.mark.parametrize(
    "args,exc",
    [
        ((b"\x00" * 15, 2, 8, 0, 4, 0, 0, 1), ValueError),  # needs 16 bytes
        ((b"\x00" * 16, 2, 8, 5, 4, 0, 0, 1), ValueError),  # field outside the entry
        ((b"\x00" * 16, 2, 8, 0, 3, 0, 0, 1), ValueError),  # bad width
        ((b"\x00" * 16, 2, 0, 0, 4, 0, 0, 1), ValueError),  # bad entry size
        ((b"\x00" * 16, -1, 8, 0, 4, 0, 0, 1), ValueError),
        ((b"\x00" * 16, 2, 8, 0, 4, 0, 2, 1), ValueError),  # bad mode
        ((b"\x00" * 16, 2, 8, 0, 4, 0, 0, -1), ValueError),  # bad warm size
        ((b"\x00" * 16, 2, 8, 0, 4, 1 << 63, 0, 1), OverflowError),
        ((b"", 1, 8, 0, 4, 0, 0, 1), ValueError),
    ],
)
def test_search_argument_errors(
    args: tuple[object, ...], exc: type[Exception], impl: SimpleNamespace
) -> None:
    with pytest.raises(exc):
        impl.sparse.index_search(*args)


def test_search_accepts_read_only_buffers(impl: SimpleNamespace, tmp_path: Path) -> None:
    import mmap

    p = tmp_path / "ro.index"
    p.write_bytes(pack("offset", [(i, i) for i in range(100)]))
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert impl.sparse.index_search(m, 100, 8, 0, 4, 57, LLB, 1024) == 57
        assert impl.sparse.index_search(memoryview(m), 100, 8, 4, 4, 57, SUB, 0) == 57
    assert impl.sparse.index_search(bytearray(16), 2, 8, 0, 4, 0, LLB, 0) == 1  # upper middle hits first
    assert impl.sparse.index_search(b"", 0, 8, 0, 4, 0, SUB, 0) == -1


def test_twin_surfaces_match() -> None:
    impls = twins()
    for name in ("sparse", "kafka_batch"):
        surfaces = [sorted(getattr(k, name).__all__) for k in impls]
        assert all(s == surfaces[0] for s in surfaces)
        for attr in surfaces[0]:
            vals = [getattr(getattr(k, name), attr) for k in impls]
            if isinstance(vals[0], int):
                assert all(v == vals[0] for v in vals), attr
            else:
                assert all(callable(v) for v in vals), attr
