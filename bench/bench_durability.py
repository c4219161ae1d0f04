"""Durability costs: SYNC group commit against ASYNC with several producer threads, and recovery
speed (abnormal: CRC-checked scan + re-dispatch) on a 1 GiB CommitLog.

Only the producer phase is timed (the store is opened and the threads started in setup).

Run: ``python -m pytest bench/bench_durability.py --benchmark-only --benchmark-group-by=group``.
``RMQCORE_BENCH_RECOVERY_MB`` sets the recovery size (default 1024).
"""
from __future__ import annotations

import collections
import os
import shutil
import tempfile
import threading
import time

import pytest

from rmqcore.store import MessageStore

BODY = b"b" * 100


def _producers(benchmark, mode: str, threads: int, total: int, body) -> None:
    """Time only the producer phase: the store is opened and the threads are started (parked on
    an event) in setup, closed in teardown. ``body(store, k, n, lat)`` is one producer's work;
    it appends ack latencies (seconds) to ``lat``."""
    per = total // threads
    st: dict = {}

    def setup():
        st["dir"] = tempfile.mkdtemp(prefix="rmqbench-flush-")
        s = st["store"] = MessageStore(st["dir"], commitlog_file_size=256 * 1024 * 1024, flush_disk_type=mode)
        go = st["go"] = threading.Event()
        st["lat"] = lats = [[] for _ in range(threads)]
        st["flushes0"] = s._group_commit.flushes if s._group_commit else 0

        def producer(k: int) -> None:
            go.wait()
            body(s, k, per, lats[k])

        st["threads"] = ts = [threading.Thread(target=producer, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        return (), {}

    def run() -> None:
        st["go"].set()
        for t in st["threads"]:
            t.join()

    def teardown() -> None:
        s = st["store"]
        if s._group_commit is not None:
            st.setdefault("fdatasyncs", []).append(s._group_commit.flushes - st["flushes0"])
        st.setdefault("all_lat", []).extend(x for lat in st["lat"] for x in lat)
        s.close()
        shutil.rmtree(st["dir"])

    benchmark.pedantic(run, setup=setup, teardown=teardown, rounds=3, iterations=1)
    n = threads * per
    benchmark.extra_info["msg_per_s"] = n / benchmark.stats["median"]
    if st.get("fdatasyncs"):
        benchmark.extra_info["puts_per_flush"] = 3 * n / max(1, sum(st["fdatasyncs"]))
    lat = sorted(st["all_lat"])
    if lat:
        benchmark.extra_info["ack_latency_p50_ms"] = lat[len(lat) // 2] * 1e3
        benchmark.extra_info["ack_latency_p99_ms"] = lat[int(len(lat) * 0.99)] * 1e3


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", "SYNC_FLUSH"])
@pytest.mark.parametrize("threads", [16, 128])
def test_group_commit_blocking_put(benchmark, mode: str, threads: int) -> None:
    """Each producer puts one message at a time and, under SYNC_FLUSH, waits until it is durable.
    A flush can at best serve every producer once, so SYNC throughput is bounded by producers /
    flush latency (16 / ~0.3 ms here), whatever the store does; ASYNC is bound by the GIL."""
    benchmark.group = f"flush-put-{threads}-producers"

    def body(s, k: int, n: int, lat: list) -> None:
        put, clock, q = s.put, time.perf_counter, k & 3
        for _ in range(n):
            t0 = clock()
            put("Durable", BODY, q)
            lat.append(clock() - t0)

    _producers(benchmark, mode, threads, 24_000 if mode == "SYNC_FLUSH" else 240_000, body)


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_group_commit_put_async(benchmark, mode: str) -> None:
    """RocketMQ 5's asyncPutMessage: 16 producers each keep up to 1024 puts in flight and wait for
    the acks half a window at a time; one flush serves every message written before it. The same
    API under ASYNC_FLUSH (acks done at once) is the baseline. Latency: put to ack of waited acks."""
    benchmark.group = "flush-put_async-16-producers"
    window = 1024

    def body(s, k: int, n: int, lat: list) -> None:
        put, clock, q = s.put_async, time.perf_counter, k & 3
        acks: collections.deque = collections.deque()
        half = window // 2
        for _ in range(n):
            acks.append((put("Durable", BODY, q), clock()))
            if len(acks) >= window:
                ack, t0 = acks[half]
                ack.result()
                lat.append(clock() - t0)
                for _ in range(half + 1):
                    acks.popleft()
        if acks:
            ack, t0 = acks[-1]
            ack.result()
            lat.append(clock() - t0)

    _producers(benchmark, mode, 16, 160_000, body)


@pytest.mark.benchmark(group="recovery")
def test_abnormal_recovery_speed(benchmark) -> None:
    mb = int(os.environ.get("RMQCORE_BENCH_RECOVERY_MB", "1024"))
    d = tempfile.mkdtemp(prefix="rmqbench-recover-")
    s = MessageStore(d, commitlog_file_size=256 * 1024 * 1024)
    bodies = [BODY] * 1000
    raw = [f"KEYS\x01k{i}\x02TAGS\x01TagA\x02" for i in range(1000)]
    while s.commitlog.max_offset < mb * 1024 * 1024:
        s.put_batch("Recover", bodies, 0, properties_raw=raw)
    size = s.commitlog.max_offset
    s.close()
    shutil.rmtree(os.path.join(d, "consumequeue"))
    shutil.rmtree(os.path.join(d, "index"))
    shutil.rmtree(os.path.join(d, "rmqcore-index"))
    # the checkpoint predates everything: recovery scans (CRC) and re-dispatches the whole log
    with open(os.path.join(d, "checkpoint"), "wb") as f:
        f.write(bytes(4096))

    def setup() -> None:
        open(os.path.join(d, "abort"), "wb").close()

    def run() -> None:
        with MessageStore(d) as r:
            assert r.commitlog.max_offset == size and not r.last_exit_ok

    benchmark.pedantic(run, setup=setup, rounds=1, iterations=1)
    benchmark.extra_info["GB_per_s"] = size / benchmark.stats["median"] / 1e9
    benchmark.extra_info["bytes"] = size
    shutil.rmtree(d)
