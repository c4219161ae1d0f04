"""SYNC flush with group commit: a put returns only once its bytes are durable, concurrent puts share
fdatasyncs, and a flush slower than ``sync_flush_timeout_ms`` gives FLUSH_DISK_TIMEOUT."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rmqcore import fileops
from rmqcore.errors import ConfigError, FlushDiskTimeoutError, StoreClosedError
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
        gc = s._services.group_commit
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


class _Gated(fileops.FileOps):
    """Holds every sync at a gate; counts them."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.calls = 0

    def fdatasync(self, fd: int, mapped: Any) -> None:
        self.calls += 1
        assert self.gate.wait(5)
        super().fdatasync(fd, mapped)


@pytest.fixture
def segment(tmp_path: Path) -> Any:
    """A registered-size file, its fd and a live-end array the test moves by hand."""
    import numpy as np

    fd = os.open(tmp_path / "00000000000000000000", os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, 1 << 16)
    os.pwrite(fd, b"x" * 300, 0)
    live = np.full(1, -1, dtype=np.int64)
    yield fd, live
    os.close(fd)


def _start(gc: Any) -> threading.Thread:
    t = threading.Thread(target=gc.run, daemon=True)
    t.start()
    return t


def test_group_commit_kernel_serves_waiters_with_one_flush_and_times_out(impl: Any, segment: Any) -> None:
    fd, live = segment
    ops = _Gated()
    with fileops.use(ops):
        gc = impl.groupcommit.GroupCommit(live, 0)
        gc.add_file(fd, 0, 1 << 16, None)
        runner = _start(gc)
        try:
            live[0] = 100
            results: list[bool] = []
            ts = [threading.Thread(target=lambda o=o: results.append(gc.wait_durable(o, 3000))) for o in (10, 50, 100)]
            for t in ts:
                t.start()
            time.sleep(0.05)
            ops.gate.set()
            for t in ts:
                t.join()
            assert results == [True, True, True] and gc.durable_offset == 100
            if impl.name == "pure":  # the native kernel syncs by itself, bypassing the injected layer
                assert ops.calls == 1  # one sync served all three
            flushes = gc.flushes
            assert gc.wait_durable(100, 1000) is True and gc.flushes == flushes  # already durable
            # nothing written past 200 is registered: durability is never claimed beyond the last file
            live[0] = (1 << 16) + 50
            t0 = time.monotonic()
            assert gc.wait_durable((1 << 16) + 10, 100) is False
            # it waited, and the 100 ms timeout ended the wait (bounded loosely: a loaded VM once
            # took 2.2 s to hand this thread back the GIL)
            assert 0.05 < time.monotonic() - t0 < 10.0
            assert gc.durable_offset == 1 << 16
        finally:
            ops.gate.set()
            gc.stop()
            runner.join(5)
        assert not runner.is_alive()
        assert gc.wait_durable(1 << 20, 1000) is False  # stopped: answers at once


def test_a_request_covered_by_the_running_flush_is_served_by_it(segment: Any) -> None:
    """A producer that asks while a flush runs, for bytes that flush already covers, is woken by it
    (not by its timeout: no later flush comes when nothing else is wanted). The pure kernel, whose
    syncs go through the injectable file layer, lets the test hold the flush."""
    from rmqcore._pure.groupcommit import GroupCommit

    fd, live = segment
    ops = _Gated()
    with fileops.use(ops):
        gc = GroupCommit(live, 0)
        gc.add_file(fd, 0, 1 << 16, None)
        runner = _start(gc)
        try:
            live[0] = 100
            first = threading.Thread(target=gc.wait_durable, args=(50, 3000))
            first.start()
            time.sleep(0.05)  # the flush for the first request runs, held at the gate
            took: list[float] = []

            def second() -> None:
                t0 = time.monotonic()
                assert gc.wait_durable(100, 3000)
                took.append(time.monotonic() - t0)

            t = threading.Thread(target=second)
            t.start()
            time.sleep(0.05)
            ops.gate.set()
            t.join()
            first.join()
            assert took and took[0] < 1.0 and ops.calls == 1
        finally:
            ops.gate.set()
            gc.stop()
            runner.join(5)


def test_a_failed_flush_is_raised_in_every_waiter(impl: Any, tmp_path: Path) -> None:
    import numpy as np

    r, w = os.pipe()  # syncing a pipe fails (EINVAL): the disk error every waiter must see
    live = np.full(1, 100, dtype=np.int64)
    try:
        gc = impl.groupcommit.GroupCommit(live, 0)
        gc.add_file(w, 0, 1 << 16, None)
        runner = _start(gc)
        with pytest.raises(OSError):
            gc.wait_durable(50, 3000)
        runner.join(5)
        assert not runner.is_alive() and gc.error is not None and gc.durable_offset == 0
        with pytest.raises(OSError):
            gc.wait_durable(60, 100)
    finally:
        os.close(r)
        os.close(w)


def test_put_async_acks_once_durable(tmp_path: Path, impl: Any) -> None:
    with MessageStore(tmp_path / "sync", impl=impl.name, flush_disk_type="SYNC_FLUSH",
                      commitlog_file_size=64 * 1024) as s:
        acks = [s.put_async("T", b"m%04d" % i + b"." * 300, i % 2, keys=f"k{i}") for i in range(600)]
        last = acks[-1].result()  # across several 64 KiB files
        assert last.physical_offset > 64 * 1024 and acks[-1].done()
        assert all(a.done() for a in acks)
        assert s.commitlog.flushed_offset >= last.physical_offset + last.size
        assert [a.result().queue_offset for a in acks[:4]] == [0, 0, 1, 1]
        assert s._services.group_commit is not None and 0 < s._services.group_commit.flushes < 600
        assert [m.body[:5] for m in s.get_messages("g", "T", 1, 0, max_msgs=3).messages] == [b"m0001", b"m0003", b"m0005"]
        late = s.put_async("T", b"just before close", 0)
    assert late.result().physical_offset > 0 and late.done()  # the close's flush made it durable
    with MessageStore(tmp_path / "async", impl=impl.name) as s:
        ack = s.put_async("T", b"x", 0)
        assert ack.done() and ack.result().physical_offset == 0
    with MessageStore(tmp_path / "async", impl=impl.name, read_only=True) as ro:
        with pytest.raises(ConfigError):
            ro.put_async("T", b"y", 0)
    s.close()
    with pytest.raises(StoreClosedError):
        s.put_async("T", b"z", 0)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
def test_close_gives_back_the_group_commits_descriptors(tmp_path: Path, impl: Any) -> None:
    """The group commit syncs through its own duplicates of the CommitLog descriptors: they go at
    close, not when the store object is collected (a deleted store's space would stay in use)."""

    mine = str(tmp_path.resolve() / "commitlog") + os.sep

    def open_commitlog_fds() -> int:  # this store's only: other tests' stores may await collection
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink(f"/proc/self/fd/{fd}").startswith(mine)
            except OSError:
                pass
        return n

    s = MessageStore(tmp_path, impl=impl.name, flush_disk_type="SYNC_FLUSH", commitlog_file_size=64 * 1024)
    for i in range(400):  # several files
        s.put("T", b"%04d" % i + b"." * 300, 0)
    assert open_commitlog_fds() > len(s.commitlog.queue.files)  # the store's own plus the service's
    s.close()
    assert open_commitlog_fds() == 0
    assert s._services.group_commit is not None and s._services.group_commit.wait_durable(1)  # answers from what it knew
