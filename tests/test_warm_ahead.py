"""WarmAhead: the pages just past the CommitLog's write position are faulted in on another thread
(MADV_POPULATE_WRITE), so the writer does not take those page faults; with ``warm_ahead=0`` they
are not. Residency is read with mincore(2) on the mapping."""
from __future__ import annotations

import ctypes
import mmap
import sys
import time
from pathlib import Path

import pytest

from rmqcore.commitlog import CommitLog

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore and MADV_POPULATE_WRITE")

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)


def resident(mm: mmap.mmap, start: int, end: int) -> int:
    """How many pages of ``mm[start:end]`` are in memory."""
    holder = ctypes.c_char.from_buffer(mm)
    try:
        base = ctypes.addressof(holder)
        n = (end - start) // PAGE
        vec = (ctypes.c_ubyte * n)()
        rc = _libc.mincore(ctypes.c_void_p(base + start), ctypes.c_size_t(n * PAGE), vec)
        assert rc == 0, ctypes.get_errno()
        return sum(v & 1 for v in vec)
    finally:
        del holder


@pytest.mark.parametrize("ahead", [32 << 20, 0])
def test_pages_ahead_of_the_writer_are_faulted_in(tmp_path: Path, ahead: int) -> None:
    # a first write may bring in a large folio around it (8 MiB seen on 6.x kernels): look further
    cl = CommitLog(tmp_path, file_size=64 << 20, warm_ahead=ahead, prepare_next=False)
    try:
        r = cl.put("T", b"x" * 100, 0)
        mf = cl.queue.last()
        assert mf is not None
        lo, hi = 16 << 20, 24 << 20  # well past the one record written
        if ahead:
            deadline = time.monotonic() + 5
            while resident(mf.mm, lo, hi) < (hi - lo) // PAGE and time.monotonic() < deadline:
                time.sleep(0.01)
            assert resident(mf.mm, lo, hi) == (hi - lo) // PAGE
            assert resident(mf.mm, 48 << 20, 56 << 20) == 0  # not further than asked
        else:
            time.sleep(0.1)
            assert resident(mf.mm, lo, hi) == 0
        assert cl.read(r.physical_offset).body == b"x" * 100  # contents untouched
    finally:
        cl.close()


def test_warm_up_faults_in_the_current_and_the_next_file(tmp_path: Path, impl) -> None:
    from rmqcore.errors import ConfigError
    from rmqcore.store import MessageStore

    size = 4 << 20
    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=size, dispatch="inline") as s:
        assert s.commitlog.queue.files == []  # nothing written: no file yet
        s.warm_up()
        files = s.commitlog.queue.files
        assert len(files) == 1 and resident(files[0].mm, 0, size) == size // PAGE
        nxt = s.commitlog.queue._prepared
        assert nxt is not None and nxt.file_from_offset == size and resident(nxt.mm, 0, size) == size // PAGE
        assert s.commitlog.max_offset == 0  # nothing was written
        r = s.put("T", b"after warm-up", 0)
        assert r.physical_offset == 0 and s.get_messages("g", "T", 0, 0).messages[0].body == b"after warm-up"
    with MessageStore(tmp_path, read_only=True) as ro:
        with pytest.raises(ConfigError):
            ro.warm_up()


def test_the_thread_waits_for_the_writers_progress_not_for_a_clock() -> None:
    """Given a progress word, a pass that warmed nothing is followed by a wait (GIL released) for
    ``step`` more bytes of it: no pass (and no GIL taken) while the writer writes nothing; without
    one, the thread polls."""
    import numpy as np

    from rmqcore.warmahead import WarmAhead

    for progress in (np.zeros(1, dtype=np.int64), None):
        passes: list[float] = []

        def regions() -> list:
            passes.append(time.monotonic())
            return []

        w = WarmAhead(regions, 1 << 20, "test-warm-ahead", progress, 1000)
        try:
            time.sleep(0.3)
            if progress is None:
                assert len(passes) >= 10  # polled (every 2 to 16 ms)
                continue
            assert len(passes) == 1  # the first pass, then a wait: no clock wakes it
            progress[0] = 999
            time.sleep(0.1)
            assert len(passes) == 1  # 999 bytes are not a step
            progress[0] = 1000
            deadline = time.monotonic() + 5
            while len(passes) < 2 and time.monotonic() < deadline:
                time.sleep(0.005)
            assert len(passes) == 2
            time.sleep(0.1)
            assert len(passes) == 2  # and waits for the next step from where it looked
        finally:
            t0 = time.monotonic()
            w.stop()
            assert time.monotonic() - t0 < 0.5  # stop ends the wait (cancel), not the 1 s timeout
