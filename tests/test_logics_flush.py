"""The periodic flush of consume queues, index files and the checkpoint (flushIntervalConsumeQueue).

It syncs without the dispatch lock, so dispatch and reads go on while a slow sync runs; the
checkpoint's logics timestamp is what was dispatched when the sync began, never more; retention
closes no file under a running sync; an index file is synced once per dirty period, through the
kernel's ``sync_range`` (the native twin drops the GIL; ``mmap.flush`` keeps it for the whole msync).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from rmqcore.indexfile import IndexFile
from rmqcore.store import MessageStore

GEOM = dict(commitlog_file_size=4096, cq_file_size=200, index_slots=17, index_entries=40)
HOUR = 3600 * 1000
QUIET = dict(flush_interval_ms=10**9, flush_interval_consume_queue_ms=10**9)  # no periodic run on its own


class _Gate:
    """Stands in for ``_sync_consume_queues``: holds the sync open until released."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.entered = threading.Event()
        self.go = threading.Event()

    def __call__(self) -> None:
        self.entered.set()
        assert self.go.wait(30), "the test never released the sync"
        self.real()


def _in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # handed to the test, which raises it
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_dispatch_and_reads_go_on_during_a_sync_and_the_checkpoint_claims_only_what_it_synced(
        tmp_path: Path, impl: Any) -> None:
    clock = [1_700_000_000_000]
    with MessageStore(tmp_path, impl=impl.name, dispatch="inline", clock=lambda: clock[0], **QUIET) as s:
        s.put("T", b"first", 0, keys="a")
        s.dispatch()
        gate = _Gate(s._services.sync_consume_queues)
        s._services.sync_consume_queues = gate  # type: ignore[method-assign]
        flusher, flushed = _in_thread(s._services.flush_logics)
        try:
            assert gate.entered.wait(30)
            clock[0] += 5_000
            s.put("T", b"second", 0, keys="b")
            reader, got = _in_thread(lambda: s.get_messages("g", "T", 0, 0, 32))  # dispatches first
            reader.join(10)
            assert not reader.is_alive(), "a read waited for the sync"
            assert not isinstance(got[0], BaseException), got
            assert [m.body for m in got[0].messages] == [b"first", b"second"]
            assert [m.body for m in s.query_by_key("T", "b")] == [b"second"]
        finally:
            gate.go.set()
        flusher.join(30)
        assert flushed == [None]
        # the sync began before "second" was dispatched: its time is not claimed as flushed
        assert s.checkpoint.logics_msg_timestamp == 1_700_000_000_000
        del s._services.sync_consume_queues
        s._services.flush_logics()
        assert s.checkpoint.logics_msg_timestamp == 1_700_000_005_000


def test_retention_closes_no_file_under_a_running_sync(tmp_path: Path, impl: Any) -> None:
    now = 1_800_000_000_000
    with MessageStore(tmp_path, impl=impl.name, delete_when="99", dispatch="inline", **GEOM, **QUIET) as s:
        for i in range(120):
            s.put("R", b"r%05d" % i + b"." * 150, i % 2, keys="k%d" % i)
        s.dispatch()
        files = [mf.path for mf in s.commitlog.queue.files]
        for p in files:
            os.utime(p, ((now - 80 * HOUR) / 1000,) * 2)
        gate = _Gate(s._services.sync_consume_queues)
        s._services.sync_consume_queues = gate  # type: ignore[method-assign]
        flusher, flushed = _in_thread(s._services.flush_logics)
        try:
            assert gate.entered.wait(30)
            cleaner, deleted = _in_thread(lambda: s.clean_expired(now, force=True, usage_ratio=10))
            cleaner.join(0.5)
            assert cleaner.is_alive(), "retention deleted files while a sync was running"
        finally:
            gate.go.set()
        flusher.join(30)
        cleaner.join(30)
        assert flushed == [None]
        assert not isinstance(deleted[0], BaseException), deleted
        assert deleted[0] == files[:-1]  # every expired file but the one being written
        assert s.min_offset("R", 0) > 0 and s.commitlog.min_offset == s.commitlog.queue.files[0].file_from_offset


def test_an_index_file_is_synced_through_the_kernel_once_per_dirty_period(tmp_path: Path, impl: Any) -> None:
    f = IndexFile.create(tmp_path / "20240101000000000", 17, 40, impl=impl.name)
    try:
        calls: list[tuple[int, int]] = []
        real = f._sync
        f._sync = lambda mm, start, end: (calls.append((start, end)), real(mm, start, end))[1]
        f.flush()  # created: the header was written
        assert calls == [(0, f.file_size)]
        f.flush()  # nothing put since
        assert calls == [(0, f.file_size)]
        assert f.put_key("T#k", 100, 1_700_000_000_000)
        f.flush()
        assert calls == [(0, f.file_size)] * 2
        f.close()
        g = IndexFile.open(tmp_path / "20240101000000000", 17, 40, read_only=True, impl=impl.name)
        try:
            assert g.header.index_count == 2 and g.header.begin_phy_offset == 100
        finally:
            g.close()
    finally:
        f.close()


def test_the_periodic_flush_leaves_the_active_index_file_to_a_roll_or_close(tmp_path: Path, impl: Any) -> None:
    """FlushConsumeQueueService syncs consume queues and the checkpoint; an index file is synced
    when it fills up (its end time becomes indexMsgTimestamp), by ``flush()`` and at close.
    Abnormal recovery deletes the index files newer than indexMsgTimestamp and rebuilds them."""
    with MessageStore(tmp_path, impl=impl.name, dispatch="inline", **GEOM, **QUIET) as s:
        synced: list[str] = []

        def watch(f: Any) -> None:
            real = f._sync
            f._sync = lambda mm, a, b: (synced.append(f.name), real(mm, a, b))[1]

        s.put("T", b"a", 0, keys="k0")
        s.dispatch()
        first = s.index.index_files[0]
        watch(first)
        cq_flushed = s.consume_queue("T", 0).queue.files[-1].flushed_position
        s._services.flush_logics()
        assert synced == []
        assert s.consume_queue("T", 0).queue.files[-1].flushed_position > cq_flushed
        for i in range(1, 60):  # 40 entries a file: the first fills up and is synced as the next begins
            s.put("T", b"b", 0, keys=f"k{i}")
        s.dispatch()
        assert synced == [first.name] and len(s.index.index_files) == 2
        assert s.checkpoint.index_msg_timestamp == first.end_timestamp > 0
        active = s.index.index_files[-1]
        watch(active)
        s._services.flush_logics()
        assert synced == [first.name]
        s.flush()
        assert synced == [first.name, active.name]
