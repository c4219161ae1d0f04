"""WarmAhead for dispatch: consume-queue and index pages past what dispatch wrote are faulted in on another
thread; with ``logics_warm_ahead=0`` they are not. What was populated is read from the populate calls
(residency cannot tell: a first write may bring a whole large folio in around it)."""
from __future__ import annotations

import mmap
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rmqcore import _impl
from rmqcore.errors import ConfigError
from rmqcore.store import MessageStore
from rmqcore.warmahead import WarmAhead, ahead_end, index_region

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore and MADV_POPULATE_WRITE")

N = 60_000  # 1.2 MB of consume queue and of index entries
INDEX = dict(index_slots=4096, index_entries=200_000)  # a 4 MB index file, allocated in one chunk


def _fill(s: MessageStore) -> None:
    bodies = [b"m"] * 1000
    for lo in range(0, N, 1000):
        s.put_batch("T", bodies, 0, properties_raw=[f"KEYS\x01k{i}\x02" for i in range(lo, lo + 1000)])
    s.dispatch()


def _covered(calls: list[tuple[Any, int, int]], mm: Any, past: int = 0) -> list[tuple[int, int]]:
    """The ranges populated in ``mm`` past byte ``past``, adjacent ones merged."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted((c[1], c[2]) for c in calls if c[0] is mm and c[2] > past):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


@linux
@pytest.mark.parametrize("ahead", [4 << 20, 0])
def test_pages_past_dispatch_are_faulted_in(tmp_path: Path, impl: Any, ahead: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, int, int]] = []
    real = _impl.appender.prefault

    def populate(mm: Any, lo: int, hi: int) -> bool:
        calls.append((mm, lo, hi))
        return bool(real(mm, lo, hi))

    monkeypatch.setattr(_impl.appender, "prefault", populate)
    with MessageStore(tmp_path, impl=impl.name, dispatch="inline", logics_warm_ahead=ahead,
                      commitlog_file_size=64 << 20, **INDEX) as s:
        _fill(s)
        cq = s.consume_queue("T", 0)
        assert cq is not None and cq.max_offset == N
        mf = cq.queue.last()
        assert mf is not None and mf.wrote_position == 20 * N
        f = s.index.index_files[-1]
        mm_f, start, end = index_region(f, 4 << 20)  # written (20 N bytes of entries) < ahead
        assert start == f._entries_end(N + 1) and end == start + 20 * N
        assert f._entries_end(f._alloc) == f.file_size  # allocated in one chunk: not the limit here
        deadline = time.monotonic() + 5
        want = [(20 * N, 40 * N)], [(start, start + 20 * N)]  # written again past the end (written < ahead)
        while ahead and time.monotonic() < deadline:
            cq_ranges, ix_ranges = _covered(calls, mf.mm), _covered(calls, mm_f, start)
            if cq_ranges and cq_ranges[-1][1] >= 40 * N and ix_ranges and ix_ranges[-1][1] >= start + 20 * N:
                break
            time.sleep(0.01)
        if ahead:
            assert s._services.logics_warmer is not None
            cq_ranges, ix_ranges = _covered(calls, mf.mm), _covered(calls, mm_f, start)
            # the last range runs from where dispatch was when the warmer looked to `written` past
            # the end (earlier ranges are warm-ahead of positions a run went through)
            assert cq_ranges[-1][0] <= want[0][0][0] and cq_ranges[-1][1] == want[0][0][1]
            assert ix_ranges[-1][0] <= want[1][0][0] and ix_ranges[-1][1] == want[1][0][1]
        else:
            time.sleep(0.05)
            assert s._services.logics_warmer is None
            assert _covered(calls, mf.mm) == [] and _covered(calls, mm_f, start) == []
        # contents untouched: nothing past the last unit or entry, and the store reads back what was put
        assert bytes(mf.mm[20 * N : 40 * N]) == bytes(20 * N)
        assert bytes(mm_f[start : start + 20 * N]) == bytes(20 * N)
        assert [m.queue_offset for m in s.query_by_key("T", f"k{N - 1}")] == [N - 1]
        assert s.get_messages("g", "T", 0, N - 5, 10).status == "FOUND"
        if not ahead:  # what the warmer would read (nobody took it here): the queue moved, then did not
            assert s._dispatch.dispatcher.moved() == [(b"T", 0, 20 * N)] and s._dispatch.dispatcher.moved() == []
            s.put("T", b"one more", 0)
            s.dispatch()
            assert s._dispatch.dispatcher.moved() == [(b"T", 0, 20 * N + 20)]


def test_moved_lists_bound_queues_whose_position_changed_in_both_twins(impl: Any) -> None:
    d = _impl.kernel("dispatch", impl.name).Dispatcher()
    assert d.moved() == []
    a, b = bytearray(200), bytearray(400)
    d.bind_queue(b"A", 3, a, 0, 40, 7)
    d.bind_queue(b"B", 0, b, 400, 100, 9)
    assert d.moved() == [(b"A", 3, 40), (b"B", 0, 100)]
    assert d.moved() == []  # nothing moved since
    d.bind_queue(b"A", 3, a, 0, 40, 7)  # bound again (the next file, say): listed again
    d.bind_queue(b"B", 0, None, 0, 0, 0)  # unbound: not listed
    assert d.moved() == [(b"A", 3, 40)]
    d.release()
    assert d.moved() == []


class _Recorder:
    """A region source over one mapped file, counting the populate calls the warmer makes."""

    def __init__(self, path: Path, size: int, ahead: int) -> None:
        with open(path, "wb") as fh:
            fh.truncate(size)
        self.fd = os.open(path, os.O_RDWR)
        self.mm = mmap.mmap(self.fd, size)
        self.size = size
        self.ahead = ahead
        self.start = 0
        self.calls: list[tuple[int, int]] = []

    def regions(self) -> list[tuple[Any, int, int]]:
        """The file written up to ``start``: warmed ``ahead`` past it, capped at what it holds."""
        return [(self.mm, self.start, ahead_end(self.start, self.size, self.start, self.ahead))]

    def close(self) -> None:
        self.mm.close()
        os.close(self.fd)


@linux
def test_warmer_warms_in_chunks_to_the_target_and_pauses(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    src = _Recorder(tmp_path / "f", 8 << 20, 3 << 20)
    real = _impl.appender.prefault

    def populate(mm: Any, s: int, e: int) -> bool:
        src.calls.append((s, e))
        return bool(real(mm, s, e))

    w = None
    try:
        src.start = 1 << 20  # written 1 MiB: warmed 1 MiB past it (less than the 3 MiB asked)
        monkeypatch.setattr(_impl.appender, "prefault", populate)
        w = WarmAhead(src.regions, 256 << 10, "test-warm-ahead")
        deadline = time.monotonic() + 5
        while (not src.calls or src.calls[-1][1] < 2 << 20) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert src.calls[0][0] == 1 << 20 and src.calls[-1][1] == 2 << 20
        assert all(e - s <= 256 << 10 for s, e in src.calls)
        assert [s for s, _ in src.calls[1:]] == [e for _, e in src.calls[:-1]]  # contiguous, no repeats
        # paused: the warmer does not populate while a caller holds it (as retention unmapping does)
        with w.paused():
            n = len(src.calls)
            src.start = 3 << 20
            time.sleep(0.1)
            assert len(src.calls) == n
        deadline = time.monotonic() + 5
        while src.calls[-1][1] < 6 << 20 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert src.calls[-1][1] == 6 << 20 and src.calls[n][0] == 3 << 20  # and no further
        time.sleep(0.05)
        assert src.calls[-1][1] == 6 << 20
    finally:
        if w is not None:
            w.stop()
        src.close()


def test_warmer_skips_a_closed_map_and_stops_promptly(tmp_path: Path) -> None:
    src = _Recorder(tmp_path / "f", 1 << 20, 1 << 20)
    src.start = 4096
    src.mm.close()  # regions() hands out a closed map: skipped, the thread lives on
    w = WarmAhead(src.regions, 1 << 20, "test-warm-ahead")
    time.sleep(0.05)
    assert w._thread.is_alive()
    t0 = time.monotonic()
    w.stop()
    assert not w._thread.is_alive() and time.monotonic() - t0 < 1
    os.close(src.fd)


def test_retention_and_close_with_the_warmer_running(tmp_path: Path) -> None:
    """clean_expired unmaps consume-queue and index files while the warmer may be in one of them."""
    with MessageStore(tmp_path, commitlog_file_size=64 * 1024, cq_file_size=20 * 200, dispatch="inline",
                      logics_warm_ahead=1 << 20, file_reserved_time_hours=0, **INDEX) as s:
        for i in range(2000):
            s.put("T", b"x" * 100, i % 2, keys=f"k{i}")
        s.dispatch()
        deleted = s.clean_expired(force=True)
        assert deleted and s.commitlog.min_offset > 0
        assert s.get_messages("g", "T", 0, s.min_offset("T", 0), 1).status == "FOUND"
    with MessageStore(tmp_path, read_only=True) as ro:
        assert ro.max_offset("T", 0) == 1000


@pytest.mark.parametrize("bad", [-1, True, 1.5])
def test_logics_warm_ahead_is_checked(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(ConfigError, match="logics_warm_ahead"):
        MessageStore(tmp_path, logics_warm_ahead=bad)
    assert list(tmp_path.iterdir()) == []  # refused before anything was created


def test_read_only_store_has_no_warmer(tmp_path: Path) -> None:
    MessageStore(tmp_path).close()
    with MessageStore(tmp_path, read_only=True) as ro:
        assert ro._services.logics_warmer is None
    names = {t.name for t in threading.enumerate()}
    assert "rmqcore-logics-warm-ahead" not in names
