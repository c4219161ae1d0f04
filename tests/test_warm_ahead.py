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
