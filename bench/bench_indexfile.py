"""IndexFile kernels and IndexService queries: native vs pure, side by side per group.

Run: ``python -m pytest bench/bench_indexfile.py --benchmark-only --benchmark-group-by=group``.

Groups:
* ``index-put_batch-100k``: ``index_put_batch`` of 100,000 random key hashes into a fresh file
  (100,000 slots, 100,001 entries); ``extra_info`` has keys/s.
* ``index-select-chain-{1,8,64}``: one ``index_select`` whose slot chain is 1/8/64 entries long (the
  matching entry is the oldest, so every entry is read; result: one offset); ns per call, per step.
* ``index-query-5M``: 5,000,000 keys in one file of RocketMQ's default geometry (5,000,000 slots,
  20,000,000 entries = 420 MB, mapped from a temp file), built once with the native batch put;
  ``index_select`` of LOOKUPS random present keys per round (lookups/s), and the same through
  ``IndexService.query_offset`` (topic#key string, Java hash, file selection; lookups/s).
  Set ``RMQCORE_BENCH_INDEX_KEYS`` to use fewer keys (the file keeps the default geometry).
"""

from __future__ import annotations

import importlib
import mmap
import os
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from rmqcore.indexfile import IndexService

IMPLS = ["native", "pure"]
INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
T0 = 1_700_000_000_000
PUT_N = 100_000
LOOKUPS = 1_000
BIG_SLOTS, BIG_ENTRIES = 5_000_000, 20_000_000
BIG_KEYS = int(os.environ.get("RMQCORE_BENCH_INDEX_KEYS", 5_000_000))


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> str:
    if os.environ.get("RMQCORE_IMPL") == "pure" and request.param == "native":
        pytest.skip("pure-only run")
    return str(request.param)


@pytest.fixture
def kern(impl: str) -> ModuleType:
    return importlib.import_module(f"rmqcore._{impl}.indexfile")


def _best(name: str = "indexfile") -> ModuleType:
    try:
        return importlib.import_module(f"rmqcore._native.{name}")
    except ImportError:
        return importlib.import_module(f"rmqcore._pure.{name}")


def _info(benchmark, per_round: int, unit: str) -> None:  # type: ignore[no-untyped-def]
    if benchmark.stats is not None:
        med = benchmark.stats.stats.median
        benchmark.extra_info[f"{unit}_per_s"] = round(per_round / med)
        benchmark.extra_info[f"ns_per_{unit}"] = round(med * 1e9 / per_round, 1)


@pytest.mark.benchmark(group="index-put_batch-100k")
def test_put_batch(benchmark, impl: str, kern: ModuleType) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1)
    hashes = rng.integers(0, INT_MAX, PUT_N, dtype=np.int64)
    phys = np.arange(PUT_N, dtype=np.int64) * 300
    tss = T0 + np.arange(PUT_N, dtype=np.int64) * 3
    size = kern.index_file_size(PUT_N, PUT_N + 1)

    def setup():  # type: ignore[no-untyped-def]
        buf = bytearray(size)  # fresh, touched pages
        return (buf, PUT_N, PUT_N + 1, hashes, phys, tss, 0, PUT_N), {}

    rounds = 3 if impl == "pure" else 15
    n = benchmark.pedantic(kern.index_put_batch, setup=setup, rounds=rounds, iterations=1)
    assert n == PUT_N
    _info(benchmark, PUT_N, "key")


def _chain_buffer(length: int) -> tuple[bytearray, int, int]:
    """1024 slots; slot 5 holds a chain of ``length`` entries with distinct hashes, the target oldest."""
    k = _best()
    slots, entries = 1024, length + 2
    buf = bytearray(k.index_file_size(slots, entries))
    target = 5
    for i in range(length):
        k.index_put(buf, slots, entries, target + slots * i, 1000 + i, T0 + i)
    return buf, slots, entries


@pytest.mark.parametrize("length", [1, 8, 64])
def test_select_chain(benchmark, impl: str, kern: ModuleType, length: int) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = f"index-select-chain-{length}"
    buf, slots, entries = _chain_buffer(length)
    f = kern.index_select
    assert f(buf, slots, entries, 5, 0, LONG_MAX, 64, entries) == [1000]
    loop = 1000

    def run() -> list[int]:
        r: list[int] = []
        for _ in range(loop):
            r = f(buf, slots, entries, 5, 0, LONG_MAX, 64, entries)
        return r

    assert benchmark(run) == [1000]
    _info(benchmark, loop, "call")
    if benchmark.stats is not None:
        benchmark.extra_info["ns_per_step"] = round(benchmark.stats.stats.median * 1e9 / loop / length, 1)


# -- 5M keys ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, list[str]]:
    """One index file of default geometry with BIG_KEYS keys ``TopicBench#key-<i>``, built through
    ``IndexService.build_index_batch`` (Java hashes of real strings, native batch put)."""
    root = tmp_path_factory.mktemp("bigindex")
    keys = [f"key-{i}" for i in range(BIG_KEYS)]
    phys = np.arange(BIG_KEYS, dtype=np.int64) * 256
    tss = T0 + np.arange(BIG_KEYS, dtype=np.int64) // 10
    t = time.perf_counter()
    impl = "native" if _best().__name__.startswith("rmqcore._native") else "pure"
    with IndexService(root, BIG_SLOTS, BIG_ENTRIES, impl=impl) as svc:
        step = 500_000
        for i in range(0, BIG_KEYS, step):
            n = min(step, BIG_KEYS - i)
            cut = slice(i, i + n)
            svc.build_index_batch(["TopicBench"] * n, [None] * n, keys[cut], phys[cut], tss[cut])
        assert len(svc) == 1
    print(f"\nbuilt {BIG_KEYS:,} keys in {time.perf_counter() - t:.1f} s ({impl})")
    return root, phys, keys


@pytest.mark.benchmark(group="index-query-5M-select")
def test_query_5m_select(benchmark, impl: str, kern: ModuleType, big_store) -> None:  # type: ignore[no-untyped-def]
    """Kernel only: ``index_select`` of LOOKUPS precomputed key hashes over the mapped 420 MB file."""
    root, phys, keys = big_store
    hashing = importlib.import_module(f"rmqcore._{impl}.hashing")
    rng = np.random.default_rng(7)
    picks = rng.integers(0, len(keys), LOOKUPS)
    hashes = [hashing.index_key_hash("TopicBench#" + keys[i]) for i in picks]
    path = next((root / "index").iterdir())
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    f = kern.index_select
    assert f(mm, BIG_SLOTS, BIG_ENTRIES, hashes[0], 0, LONG_MAX, 64, BIG_ENTRIES)[-1] == phys[picks[0]]

    def run() -> int:
        n = 0
        for h in hashes:
            n += len(f(mm, BIG_SLOTS, BIG_ENTRIES, h, 0, LONG_MAX, 64, BIG_ENTRIES))
        return n

    assert benchmark(run) >= LOOKUPS
    _info(benchmark, LOOKUPS, "lookup")
    mm.close()


@pytest.mark.benchmark(group="index-query-5M-service")
def test_query_5m_service(benchmark, impl: str, big_store) -> None:  # type: ignore[no-untyped-def]
    """``IndexService.query_offset(topic, key)``: key string + Java hash + file selection + walk."""
    root, phys, keys = big_store
    rng = np.random.default_rng(8)
    picks = [keys[i] for i in rng.integers(0, len(keys), LOOKUPS)]
    with IndexService(root, BIG_SLOTS, BIG_ENTRIES, read_only=True, impl=impl) as svc:
        q = svc.query_offset

        def run() -> int:
            n = 0
            for key in picks:
                n += len(q("TopicBench", key)[0])
            return n

        assert benchmark(run) >= LOOKUPS
        _info(benchmark, LOOKUPS, "lookup")
