"""Dispatch kernel (ReputMessageService's per-record work): native vs pure, side by side per group.

Run: ``python -m pytest bench/bench_dispatch.py --benchmark-only --benchmark-group-by=group``.
Data: ~10 MiB of back-to-back ~200-byte records, topic "TopicTest", properties as a producer writes
them (``KEYS order-<i> user-<i % 97>``, a 32-hex UNIQ_KEY that changes per record, ``TAGS TagA``,
``WAIT true``: 3 index keys per record). One round dispatches the whole buffer in batches of 1000
records (cols/disp int64 arrays reused across rounds; 1000 rather than 1024 columns, because
row strides that are a multiple of 4 KiB make the 23 rows of cols collide in the L1 cache).
``decode_batch`` (native codec, columns only) is the baseline a third param shows. Groups: without
CRC (what reput does: checkMessageAndReturnSize with checkCRC=false) and with CRC.
``extra_info``: ns per record and records per second.
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from types import ModuleType

import numpy as np
import pytest

from rmqcore.layout import NCOLUMNS, ST_MSG

IMPLS = ["native", "pure", "decode_batch"]
TOTAL = 10 << 20
CAP = 1000
TOPIC = b"TopicTest"
BODY = bytes(range(21))  # 91 + 21 + 9 + ~79 bytes of properties = ~200-byte records


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> str:
    if os.environ.get("RMQCORE_IMPL") == "pure" and request.param != "pure":
        pytest.skip("pure-only run")
    return request.param


def _best_codec() -> ModuleType:
    try:
        return importlib.import_module("rmqcore._native.codec")
    except ImportError:
        return importlib.import_module("rmqcore._pure.codec")


def props(i: int) -> bytes:
    return (
        f"KEYS\x01order-{i} user-{i % 97}\x02UNIQ_KEY\x01C0A8000A1F402A2A2A2A{i:012X}\x02"
        "TAGS\x01TagA\x02WAIT\x01true\x02"
    ).encode()


@cache
def records() -> tuple[bytes, int]:
    """(buffer, record count): records back to back, the tail zero (END)."""
    c = _best_codec()
    buf = bytearray(TOTAL)
    pos = n = 0
    while True:
        w = c.encode_record(
            buf, pos, len(buf) - pos, TOPIC, 3, 0, n, pos, 0, 1_700_000_000_000, bytes([192, 168, 0, 10]),
            50000, 1_700_000_000_000 + n, bytes([192, 168, 0, 1]), 10911, 0, 0, BODY, props(n), False,
        )  # fmt: skip
        if w < 0:
            return bytes(buf), n
        pos += w
        n += 1


def _runner(impl: str, verify: bool):
    data, _ = records()
    cols = np.zeros((NCOLUMNS, CAP), np.int64)
    disp = np.zeros((4, CAP), np.int64)
    keys = np.zeros(4 * CAP, np.int64)
    if impl == "decode_batch":
        decode = _best_codec().decode_batch

        def run() -> int:
            pos = total = 0
            while True:
                n, pos, status = decode(data, pos, len(data), cols, verify)
                total += n
                if status != ST_MSG:
                    return total

        return run
    f = importlib.import_module(f"rmqcore._{impl}.dispatch").dispatch_batch

    def run() -> int:
        pos = total = 0
        while True:
            n, pos, status, _ = f(data, pos, len(data), cols, disp, keys, verify)
            total += n
            if status != ST_MSG:
                return total

    return run


def _bench(benchmark, impl: str, verify: bool) -> None:
    data, count = records()
    run = _runner(impl, verify)
    if impl == "pure":
        total = benchmark.pedantic(run, rounds=2, iterations=1)
    else:
        total = benchmark.pedantic(run, rounds=15, iterations=1, warmup_rounds=2)
    assert total == count
    if benchmark.stats is not None:
        median = benchmark.stats.stats.median
        benchmark.extra_info["records"] = count
        benchmark.extra_info["bytes_per_record"] = round(len(data.rstrip(b"\0")) / count, 1)
        benchmark.extra_info["ns_per_record"] = round(median * 1e9 / count, 1)
        benchmark.extra_info["records_per_s"] = round(count / median)


@pytest.mark.benchmark(group="dispatch-10MiB")
def test_dispatch(benchmark, impl: str) -> None:
    _bench(benchmark, impl, False)


@pytest.mark.benchmark(group="dispatch-10MiB-crc")
def test_dispatch_crc(benchmark, impl: str) -> None:
    _bench(benchmark, impl, True)
