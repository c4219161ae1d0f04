"""CRC kernels: native vs pure vs the stdlib, per buffer size.

Run: ``python -m pytest bench/bench_crc.py --benchmark-only``. Each group (``crc32-100B`` ...) puts
the native kernel, the pure twin and ``zlib.crc32`` (the stdlib C baseline the native kernel must
beat, house style 5.2.8) side by side; CRC-32C has no stdlib baseline. ``extra_info`` carries
ns/call and GB/s. The 100-byte case is RocketMQ's typical message body.
"""

from __future__ import annotations

import importlib
import os
import random
import zlib

import pytest

pure = importlib.import_module("rmqcore._pure.crc")
native = None if os.environ.get("RMQCORE_IMPL") == "pure" else importlib.import_module("rmqcore._native.crc")

SIZES = [("100B", 100), ("1KiB", 1024), ("64KiB", 64 << 10), ("4MiB", 4 << 20)]
DATA = {n: random.Random(n).randbytes(n) for _, n in SIZES}

FUNCS = {
    "crc32": {"native": native and native.crc32, "pure": pure.crc32, "zlib": zlib.crc32},
    "crc32c": {"native": native and native.crc32c, "pure": pure.crc32c},
}


def _cases(kind: str) -> list:
    impls = [i for i in FUNCS[kind] if not (i == "native" and native is None)]
    return [
        pytest.param(impl, size, id=f"{impl}-{label}", marks=pytest.mark.benchmark(group=f"{kind}-{label}"))
        for label, size in SIZES
        for impl in impls
    ]


def _run(benchmark, fn, data: bytes) -> int:
    if len(data) >= 1 << 20 and fn is pure.crc32c:  # ~0.3 s per call in pure Python
        result = benchmark.pedantic(fn, args=(data,), rounds=3, iterations=1)
    else:
        result = benchmark(fn, data)
    if benchmark.stats is not None:
        mean = benchmark.stats.stats.mean
        benchmark.extra_info["ns_per_call"] = round(mean * 1e9, 1)
        benchmark.extra_info["GB/s"] = round(len(data) / mean / 1e9, 3)
    return result


@pytest.mark.parametrize("impl,size", _cases("crc32"))
def test_crc32(benchmark, impl: str, size: int) -> None:
    data = DATA[size]
    assert _run(benchmark, FUNCS["crc32"][impl], data) == zlib.crc32(data)


@pytest.mark.parametrize("impl,size", _cases("crc32c"))
def test_crc32c(benchmark, impl: str, size: int) -> None:
    data = DATA[size]
    result = _run(benchmark, FUNCS["crc32c"][impl], data)
    ref = (native or pure).crc32c(data) if size > 4096 else pure.crc32c(data)
    assert result == ref
