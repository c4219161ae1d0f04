"""SYNC flush with group commit: a put returns only once its bytes are durable, concurrent puts share
fdatasyncs, and a flush slower than ``sync_flush_timeout_ms`` gives FLUSH_DISK_TIMEOUT."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rmqcore import fileops
from rmqcore.errors import FlushDiskTimeoutError
from rmqcore.flush import GroupCommitService
from rmqcore.store import MessageStore


def test_every_put_returns_durable_and_puts_share_flushes(tmp_path: Path, impl: Any) -> None:
    synced: list[int] = []

    class Counting(fileops.FileOps):
        def fdatasync(self, fd: int, mapped: Any) -> None:
            super().fdatasync(fd, mapped)
            synced.append(mapped.wrote_position)

    problems: list[str] = []
    with fileops.use(Counting()), MessageStore(tmp_path, impl=impl.name, flush_disk_type="SYNC_FLUSH",
                                               commitlog_file_size=1 << 20) as s:
        def producer(k: int) -> None:
            for i in range(40):
                r = s.put("T", b"%02d-%03d" % (k, i), k % 4)
                end = r.physical_offset + r.size
                if s.commitlog.flushed_offset < end:  # acknowledged before it was durable
                    problems.append(f"{k}/{i}: flushed {s.commitlog.flushed_offset} < {end}")

        ts = [threading.Thread(target=producer, args=(k,)) for k in range(16)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert problems == []
        gc = s._group_commit
        assert gc is not None and gc.flushes == len(synced)
        assert 0 < gc.flushes < 16 * 40  # puts waiting together shared an fdatasync
        assert s.max_offset("T", 0) == 4 * 40


def test_a_slow_disk_gives_flush_disk_timeout(tmp_path: Path) -> None:
    class Slow(fileops.FileOps):
        def fdatasync(self, fd: int, mapped: Any) -> None:
            time.sleep(0.3)
            super().fdatasync(fd, mapped)

    with fileops.use(Slow()), MessageStore(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=50,
                                           commitlog_file_size=1 << 20) as s:
        with pytest.raises(FlushDiskTimeoutError) as ei:
            s.put("T", b"late", 0)
        r = ei.value.result  # stored, only not confirmed in time
        assert r.physical_offset == 0 and "FLUSH_DISK_TIMEOUT" in str(ei.value)
        s.commitlog.flush()
        assert s.get_messages("g", "T", 0, 0).messages[0].body == b"late"


def test_group_commit_service_groups_and_times_out() -> None:
    state = {"written": 0, "durable": 0, "calls": 0}
    gate = threading.Event()

    def flush() -> int:
        state["calls"] += 1
        gate.wait(5)
        state["durable"] = state["written"]
        return state["durable"]

    gc = GroupCommitService(lambda: state["durable"], flush, timeout_ms=2000)
    try:
        results: list[bool] = []
        state["written"] = 100
        ts = [threading.Thread(target=lambda o=o: results.append(gc.wait_durable(o))) for o in (10, 50, 100)]
        for t in ts:
            t.start()
        time.sleep(0.05)
        gate.set()
        for t in ts:
            t.join()
        assert results == [True, True, True]
        assert state["calls"] == 1  # one fdatasync served all three
        assert gc.wait_durable(100) is True  # already durable: no flush
        assert state["calls"] == 1
        gate.clear()
        state["written"] = 200
        short = GroupCommitService(lambda: state["durable"], flush, timeout_ms=30)
        try:
            assert short.wait_durable(200) is False
        finally:
            gate.set()
            short.stop()
    finally:
        gate.set()
        gc.stop()


def test_a_request_covered_by_the_running_flush_returns_without_waiting_for_another() -> None:
    """A producer that asks while a flush runs waits for the next flush; when the running one
    already covered its bytes and nothing else is wanted, no next flush comes: it must be woken
    by the running one, not by its timeout."""
    state = {"written": 100, "durable": 0}
    gate = threading.Event()

    def flush() -> int:
        gate.wait(5)
        state["durable"] = state["written"]
        return state["durable"]

    gc = GroupCommitService(lambda: state["durable"], flush, timeout_ms=3000)
    try:
        first = threading.Thread(target=gc.wait_durable, args=(50,))
        first.start()
        time.sleep(0.05)  # the flush for the first request is running (held at the gate)
        took: list[float] = []

        def second() -> None:
            t0 = time.monotonic()
            assert gc.wait_durable(100)
            took.append(time.monotonic() - t0)

        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.05)
        gate.set()
        t.join()
        first.join()
        assert took and took[0] < 1.0  # was the full 3 s timeout
    finally:
        gate.set()
        gc.stop()
