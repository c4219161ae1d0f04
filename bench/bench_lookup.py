"""Key lookups at RocketMQ scale: 5,000,000 unique keys in one store (default geometry: one
420 MB index file of 5M slots / 20M entries; 1 GiB CommitLog files), each message indexed under
its KEYS token and nothing else.

Run: ``python -m pytest bench/bench_lookup.py --benchmark-only --benchmark-group-by=group``
(``RMQCORE_BENCH_LOOKUP_KEYS`` sets the key count; building the store takes about 10 s).

Groups (``extra_info["lookups_per_s"]``, random present keys, one call per lookup):
* ``lookup``: ``MessageStore.lookup`` -> body bytes (one native call; CRC and key re-checked);
* ``query_by_key``: the same answer as a list of ``MessageExt`` (``query_by_key(topic, key)``);
* ``query_offsets``: the raw hash-only offsets (RocketMQ's answer, no record read).
"""
from __future__ import annotations

import os
import random
import shutil
import tempfile

import pytest

from rmqcore.store import MessageStore

KEYS = int(os.environ.get("RMQCORE_BENCH_LOOKUP_KEYS", "5000000"))
LOOKUPS = 100_000


@pytest.fixture(scope="module")
def big() -> MessageStore:
    d = tempfile.mkdtemp(prefix="rmqbench-lookup-")
    s = MessageStore(d)
    body = [b"v" * 100] * 1000
    for lo in range(0, KEYS, 1000):
        raw = [f"KEYS\x01key-{i:010d}\x02" for i in range(lo, min(lo + 1000, KEYS))]
        s.put_batch("BenchTopic", body[: len(raw)], (lo // 1000) & 3, properties_raw=raw)
    s.dispatch()
    yield s
    s.close()
    shutil.rmtree(d)


def _keys() -> list[str]:
    rnd = random.Random(11)
    return [f"key-{rnd.randrange(KEYS):010d}" for _ in range(LOOKUPS)]


@pytest.mark.benchmark(group="lookup")
@pytest.mark.parametrize("key_cache", [True, False])
def test_lookup(benchmark, big: MessageStore, key_cache: bool) -> None:
    """With the KeyCache (the default; built on the first lookup, outside the timing) and with
    RocketMQ's slot read and chain walk in the index file alone."""
    saved = big._keys.key_cache
    if not key_cache:
        big._keys.key_cache = None
    big._drop_lookup()
    keys, look = _keys(), big.lookup
    assert look("BenchTopic", keys[0]) == b"v" * 100
    benchmark.extra_info["key_cache"] = key_cache

    def run() -> None:
        for k in keys:
            look("BenchTopic", k)

    try:
        benchmark.pedantic(run, rounds=3, iterations=1)
    finally:
        big._keys.key_cache = saved
        big._drop_lookup()
    benchmark.extra_info["keys"] = KEYS
    benchmark.extra_info["lookups_per_s"] = LOOKUPS / benchmark.stats["median"]


@pytest.mark.benchmark(group="query_by_key")
def test_query_by_key(benchmark, big: MessageStore) -> None:
    keys, q = _keys()[:20_000], big.query_by_key
    assert len(q("BenchTopic", keys[0])) == 1

    def run() -> None:
        for k in keys:
            q("BenchTopic", k)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["keys"] = KEYS
    benchmark.extra_info["lookups_per_s"] = len(keys) / benchmark.stats["median"]


@pytest.mark.benchmark(group="query_offsets")
def test_query_offsets(benchmark, big: MessageStore) -> None:
    keys, q = _keys()[:20_000], big.query_offsets

    def run() -> None:
        for k in keys:
            q("BenchTopic", k)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["keys"] = KEYS
    benchmark.extra_info["lookups_per_s"] = len(keys) / benchmark.stats["median"]
