"""Durability costs: SYNC group commit against ASYNC with several producer threads, and recovery
speed (abnormal: CRC-checked scan + re-dispatch) on a 1 GiB CommitLog.

Run: ``python -m pytest bench/bench_durability.py --benchmark-only --benchmark-group-by=group``.
``RMQCORE_BENCH_RECOVERY_MB`` sets the recovery size (default 1024).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading

import pytest

from rmqcore.store import MessageStore

BODY = b"b" * 100


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", "SYNC_FLUSH"])
@pytest.mark.parametrize("threads", [16, 128])
def test_group_commit_vs_async(benchmark, mode: str, threads: int) -> None:
    """Producers each put (and, under SYNC_FLUSH, wait until durable) 24,000 messages in all.
    Group commit can at best serve every waiting producer with one fdatasync, so SYNC throughput
    is bounded by producers / fdatasync latency; ASYNC is bound by the GIL, whatever the count."""
    benchmark.group = f"flush-mode-{threads}-producers"
    per = 24_000 // threads

    def run() -> None:
        d = tempfile.mkdtemp(prefix="rmqbench-flush-")
        s = MessageStore(d, commitlog_file_size=64 * 1024 * 1024, flush_disk_type=mode)

        def producer(k: int) -> None:
            for _ in range(per):
                s.put("Durable", BODY, k & 3)

        ts = [threading.Thread(target=producer, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if s._group_commit is not None:
            benchmark.extra_info["fdatasyncs"] = s._group_commit.flushes
            benchmark.extra_info["puts_per_fdatasync"] = threads * per / max(1, s._group_commit.flushes)
        s.close()
        shutil.rmtree(d)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["msg_per_s"] = threads * per / benchmark.stats["median"]


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
