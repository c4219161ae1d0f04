"""CommitLog record codec kernels: native vs pure, side by side per group.

Run: ``python -m pytest bench/bench_codec.py --benchmark-only --benchmark-group-by=group``.
Groups: encode one record (100-byte body, ~60-byte properties, topic "TopicTest"), encode_batch of
1000, decode_record of one, decode_batch of 1000 (CRC verified), and scan_records with CRC over a
64 MiB buffer of ~200-byte records. ``extra_info`` carries ns per record (and GB/s for the scan);
the single-record groups time 1000 calls from a Python loop per round, so that pytest-benchmark's
own per-round overhead stays out of ns_per_record. Buffers are allocated and touched before timing.
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from types import ModuleType

import numpy as np
import pytest

IMPLS = ["native", "pure"]
TOPIC = b"TopicTest"
BODY = bytes(range(100))
PROPS = b"UNIQ_KEY\x017F0000010E0A18B4AAC2785B5E470000\x02TAGS\x01TagA\x02WAIT\x01true\x02"  # 62 bytes
BORN = bytes([192, 168, 0, 10])
STORE = bytes([192, 168, 0, 1])
SCAN_BYTES = 64 << 20
BATCH = 1000
LOOP = 1000  # calls per round in the single-record benchmarks (keeps harness overhead out)


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> str:
    if os.environ.get("RMQCORE_IMPL") == "pure" and request.param == "native":
        pytest.skip("pure-only run")
    return request.param


@pytest.fixture
def codec(impl: str) -> ModuleType:
    return importlib.import_module(f"rmqcore._{impl}.codec")


def _best_codec() -> ModuleType:
    try:
        return importlib.import_module("rmqcore._native.codec")
    except ImportError:
        return importlib.import_module("rmqcore._pure.codec")


def _encode_one(c: ModuleType, buf: bytearray, pos: int, qoff: int, body: bytes, props: bytes) -> int:
    return c.encode_record(
        buf, pos, len(buf) - pos, TOPIC, 3, 0, qoff, pos, 0, 1_700_000_000_000, BORN, 50000,
        1_700_000_000_000 + qoff, STORE, 10911, 0, 0, body, props, False,
    )  # fmt: skip


@cache
def _records(total: int, body_len: int, props_len: int) -> bytes:
    """Back-to-back records filling ``total`` bytes at most (the tail stays zero: END)."""
    c = _best_codec()
    buf = bytearray(total)
    body = bytes(i & 0xFF for i in range(body_len))
    props = (PROPS * (props_len // len(PROPS) + 1))[:props_len]
    pos = 0
    q = 0
    while True:
        n = _encode_one(c, buf, pos, q, body, props)
        if n < 0:
            return bytes(buf)
        pos += n
        q += 1


def _per_record(benchmark, records: int) -> None:
    if benchmark.stats is not None:
        benchmark.extra_info["ns_per_record"] = round(benchmark.stats.stats.median * 1e9 / records, 1)


@pytest.mark.benchmark(group="codec-encode_record")
def test_encode_record(benchmark, codec: ModuleType) -> None:
    """LOOP calls per round from a plain Python loop: ns_per_record is what a caller pays per append."""
    buf = bytearray(1 << 16)
    f = codec.encode_record
    topic, born, store, body, props = TOPIC, BORN, STORE, BODY, PROPS

    def run() -> int:
        n = 0
        for _ in range(LOOP):
            n = f(buf, 64, 4096, topic, 3, 0, 7, 1_073_741_824, 0, 1_700_000_000_000, born, 50000,
                  1_700_000_000_123, store, 10911, 0, 0, body, props, False)  # fmt: skip
        return n

    assert benchmark(run) == 91 + 100 + 9 + 62
    _per_record(benchmark, LOOP)


@pytest.mark.benchmark(group="codec-encode_batch-1000")
def test_encode_batch(benchmark, impl: str, codec: ModuleType) -> None:
    bodies = [bytes([i & 0xFF]) * 100 for i in range(BATCH)]
    props = [PROPS] * BATCH
    sizes = np.zeros(BATCH, np.int64)
    buf = bytearray(BATCH * 300)

    def run() -> tuple[int, int]:
        return codec.encode_batch(
            buf, 0, len(buf), TOPIC, 3, 1000, 0, 0, 1_700_000_000_000, BORN, 50000, 1_700_000_000_123, STORE,
            10911, bodies, props, None, False, sizes,
        )  # fmt: skip

    if impl == "pure":
        n, total = benchmark.pedantic(run, rounds=5, iterations=1)
    else:
        n, total = benchmark(run)
    assert n == BATCH
    _per_record(benchmark, BATCH)
    if benchmark.stats is not None:
        benchmark.extra_info["msg_per_s"] = round(BATCH / benchmark.stats.stats.median)


@pytest.mark.benchmark(group="codec-decode_record")
def test_decode_record(benchmark, codec: ModuleType) -> None:
    """LOOP interior records decoded one call each (CRC verified), from a plain Python loop."""
    data = _records(262 * (LOOP + 2), 100, 62)
    f = codec.decode_record

    def run() -> tuple:
        t = ()
        for pos in range(0, 262 * LOOP, 262):
            t = f(data, pos, len(data), True)
        return t

    assert benchmark(run)[16] == bytes(range(100))
    _per_record(benchmark, LOOP)


@pytest.mark.benchmark(group="codec-decode_batch-1000")
def test_decode_batch(benchmark, impl: str, codec: ModuleType) -> None:
    data = _records(262 * BATCH + 8, 100, 62)
    out = np.zeros((23, BATCH), np.int64)
    if impl == "pure":
        n, end, status = benchmark.pedantic(
            codec.decode_batch, args=(data, 0, len(data), out, True), rounds=5
        )
    else:
        n, end, status = benchmark(codec.decode_batch, data, 0, len(data), out, True)
    assert n == BATCH
    _per_record(benchmark, BATCH)


@pytest.mark.benchmark(group="codec-scan_records-64MiB-crc")
def test_scan_records_crc(benchmark, impl: str, codec: ModuleType) -> None:
    data = _records(SCAN_BYTES, 60, 40)  # 91 + 60 + 9 + 40 = 200-byte records
    if impl == "pure":  # seconds per pass
        status, end, count, _ = benchmark.pedantic(
            codec.scan_records, args=(data, 0, len(data), True), rounds=2
        )
    else:
        status, end, count, _ = benchmark.pedantic(
            codec.scan_records, args=(data, 0, len(data), True), rounds=10, warmup_rounds=1
        )
    assert count == len(data) // 200 and end == count * 200
    if benchmark.stats is not None:
        median = benchmark.stats.stats.median
        benchmark.extra_info["GB/s"] = round(end / median / 1e9, 3)
        benchmark.extra_info["ns_per_record"] = round(median * 1e9 / count, 1)
        benchmark.extra_info["records"] = count
