"""CommitLog append and read throughput through the public API (warm segment, no fsync).

Run: ``python -m pytest bench/bench_commitlog.py --benchmark-only --benchmark-group-by=group``.
Each benchmark reports msg/s in extra_info. 100-byte bodies, a tag and a key per message, as in
shared/perf.md's workload. The segment is pre-faulted (the warm-segment targets).
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from rmqcore.commitlog import CommitLog

IMPLS = ["native", "pure"]
N = 20_000
BODY = b"b" * 100


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> str:
    if os.environ.get("RMQCORE_IMPL") == "pure" and request.param == "native":
        pytest.skip("pure-only run")
    return request.param


def _fresh(impl: str) -> tuple[CommitLog, str]:
    d = tempfile.mkdtemp(prefix="rmqbench-")
    cl = CommitLog(d, file_size=256 * 1024 * 1024, store_host="127.0.0.1:10911", impl=impl, prepare_next=False)
    cl.put("TopicTest", b"warm")
    cl.queue.last().prefault()
    return cl, d


@pytest.mark.benchmark(group="append-single")
def test_put_single(benchmark, impl: str) -> None:
    cl, d = _fresh(impl)
    put = cl.put
    n = N if impl == "native" else N // 4

    def run() -> None:
        for _ in range(n):
            put("TopicTest", BODY, 1)

    benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["msg_per_s"] = n / benchmark.stats["median"]
    cl.close()
    shutil.rmtree(d)


@pytest.mark.benchmark(group="append-single-tags-keys")
def test_put_single_with_tags_keys(benchmark, impl: str) -> None:
    cl, d = _fresh(impl)
    put = cl.put
    n = N if impl == "native" else N // 4

    def run() -> None:
        for i in range(n):
            put("TopicTest", BODY, i & 3, tags="TagA", keys="key-0000000001")

    benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["msg_per_s"] = n / benchmark.stats["median"]
    cl.close()
    shutil.rmtree(d)


@pytest.mark.benchmark(group="append-batch-1000")
def test_put_batch(benchmark, impl: str) -> None:
    cl, d = _fresh(impl)
    bodies = [BODY] * 1000
    props = {"TAGS": "TagA"}
    batches = 50 if impl == "native" else 10

    def run() -> None:
        for _ in range(batches):
            cl.put_batch("TopicTest", bodies, 1, properties=props)

    benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["msg_per_s"] = batches * 1000 / benchmark.stats["median"]
    cl.close()
    shutil.rmtree(d)


@pytest.mark.benchmark(group="append-batch-1000-keys-tags")
@pytest.mark.parametrize("form", ["keys_tags", "properties_raw", "properties"])
def test_put_batch_with_keys_and_tags(benchmark, impl: str, form: str) -> None:
    """Batches of 1000 whose messages each have their own key and a tag, given the three ways
    put_batch takes them: ``keys=``/``tags=`` lists, the stored strings (``properties_raw``, built
    here with an f-string per message, inside the timing: a caller has to build them too), and a
    mapping per message (``properties``)."""
    cl, d = _fresh(impl)
    bodies = [BODY] * 1000
    keys = [f"key-{i:010d}" for i in range(1000)]
    tags = ["TagA", "TagB", "TagC", "TagD"] * 250
    batches = (50 if form != "properties" else 5) if impl == "native" else 5
    put_batch = cl.put_batch

    def run() -> None:
        for _ in range(batches):
            if form == "keys_tags":
                put_batch("TopicTest", bodies, 1, keys=keys, tags=tags)
            elif form == "properties_raw":
                put_batch("TopicTest", bodies, 1,
                          properties_raw=[f"KEYS\x01{k}\x02TAGS\x01{t}\x02" for k, t in zip(keys, tags)])
            else:
                put_batch("TopicTest", bodies, 1, properties=[{"KEYS": k, "TAGS": t} for k, t in zip(keys, tags)])

    benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["msg_per_s"] = batches * 1000 / benchmark.stats["median"]
    cl.close()
    shutil.rmtree(d)


@pytest.mark.benchmark(group="read-batch")
def test_read_batch(benchmark, impl: str) -> None:
    cl, d = _fresh(impl)
    for _ in range(20):
        cl.put_batch("TopicTest", [BODY] * 1000, 1, properties={"TAGS": "TagA"})
    end = cl.max_offset

    def run() -> int:
        off, n = 0, 0
        while off < end:
            b = cl.read_batch(off, 4096)
            n += len(b)
            off = b.next_offset
        return n

    n = benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["msg_per_s"] = n / benchmark.stats["median"]
    cl.close()
    shutil.rmtree(d)
