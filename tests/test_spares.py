"""Spare consume-queue files (rmqcore/spares.py): the queue that needs a new file takes a spare made
ahead by a thread, the store's files are the same bytes as without spares, and the spare directory
is the writer's scratch: gone at a clean close, cleared at the next writer's open after a crash,
never touched by a read-only open."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from rmqcore import fileops
from rmqcore import layout as L
from rmqcore.errors import DiskFullError
from rmqcore.spares import SpareFiles
from rmqcore.store import MessageStore
from tests.faults import FullFor

UNITS = 8
GEOM = dict(commitlog_file_size=1 << 20, cq_file_size=UNITS * L.CQ_UNIT_SIZE, index_slots=17,
            index_entries=400)


def _ready(sp: SpareFiles, n: int = 1, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while sp.ready < n:
        assert sp.error is None, sp.error
        assert time.monotonic() < deadline, "no spare was made"
        time.sleep(0.002)


def _spares(store: Path) -> list[str]:
    d = store / L.SPARE_DIR
    return sorted(os.listdir(d)) if d.is_dir() else []


def _cq_files(store: Path) -> dict[str, bytes]:
    root = store / "consumequeue"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("dispatch", ["put", "inline"])
def test_a_queue_that_needs_a_file_takes_the_spare_and_the_bytes_are_the_same(tmp_path: Path, impl: Any,
                                                                               dispatch: str) -> None:
    """The first file is created in place (no spare is ready; that starts the thread); each later
    file, of this queue or a new one, is the spare (its inode), and a new spare follows. The
    consume-queue files are byte-equal to those of a store whose spares were closed at once."""
    plain, spared = tmp_path / "plain", tmp_path / "spared"
    with MessageStore(plain, impl=impl.name, dispatch=dispatch, **GEOM) as p, \
            MessageStore(spared, impl=impl.name, dispatch=dispatch, **GEOM) as s:
        p._services.spares.close()
        sp = s._services.spares
        assert sp is not None and sp.file_size == UNITS * L.CQ_UNIT_SIZE
        for st in (p, s):
            st.put("T", b"first", 0)
            st.dispatch()
        assert (sp.taken, sp.misses) == (0, 1)
        for k, (topic, qid) in enumerate([("T", 0), ("T", 0), ("U", 3)]):
            _ready(sp)
            [name] = _spares(spared)
            ino = os.stat(spared / L.SPARE_DIR / name).st_ino
            n = UNITS if topic == "T" else 1
            for st in (p, s):
                for i in range(n):
                    st.put(topic, b"m%d-%d" % (k, i), qid, keys="k%d" % i)
                st.dispatch()
            newest = max((spared / "consumequeue" / topic / str(qid)).iterdir())
            assert os.stat(newest).st_ino == ino
            assert sp.taken == k + 1 and sp.misses == 1
        _ready(sp)
        assert s.max_offset("T", 0) == 2 * UNITS + 1 and s.max_offset("U", 3) == 1
        assert [m.body for m in s.iter_queue("U", 3)] == [b"m2-0"]
    assert _cq_files(spared) == _cq_files(plain)
    assert len(_cq_files(spared)) == 4
    assert not (spared / L.SPARE_DIR).exists() and not (plain / L.SPARE_DIR).exists()


def test_a_crashed_writers_spares_go_at_the_next_writers_open_and_read_only_opens_leave_them(
        tmp_path: Path, impl: Any) -> None:
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"x", 0)
        s.dispatch()
        _ready(s._services.spares)
    d = tmp_path / L.SPARE_DIR
    d.mkdir()
    left = [d / f"{L.SPARE_PREFIX}7", d / f"{L.SPARE_PREFIX}8"]
    for p in left:
        p.write_bytes(bytes(UNITS * L.CQ_UNIT_SIZE))
    (d / "not-ours").write_bytes(b"kept")
    with MessageStore(tmp_path, impl=impl.name, read_only=True) as ro:
        assert ro.max_offset("T", 0) == 1
        assert ro._services.spares is None
    assert _spares(tmp_path) == sorted([p.name for p in left] + ["not-ours"])
    with MessageStore(tmp_path, impl=impl.name) as s:
        assert _spares(tmp_path) == ["not-ours"]
        s.put("T", b"y", 0)
    assert _spares(tmp_path) == ["not-ours"]  # a file that is not a spare is not deleted, nor its directory


def test_a_spare_that_cannot_be_made_leaves_queues_to_create_their_files(tmp_path: Path, impl: Any) -> None:
    """A full disk for spares: the thread records why and ends; queues create their files as before,
    and a full disk for those is the put's (or dispatch's) DiskFullError."""
    ops = FullFor(f"/{L.SPARE_DIR}/")
    with fileops.use(ops), MessageStore(tmp_path, impl=impl.name, dispatch="inline", **GEOM) as s:
        ops.full = True
        sp = s._services.spares
        s.put("T", b"x", 0)
        s.dispatch()
        deadline = time.monotonic() + 10
        while sp.error is None:
            assert time.monotonic() < deadline
            time.sleep(0.002)
        assert isinstance(sp.error, OSError) and ops.refused == 1
        for i in range(UNITS):
            s.put("T", b"y%d" % i, 0)
        s.dispatch()
        assert s.max_offset("T", 0) == UNITS + 1 and sp.ready == 0 and sp.taken == 0
        ops.part = "/consumequeue/"
        with pytest.raises(DiskFullError):
            s.put("U", b"z", 0)
            s.dispatch()
        ops.full = False
        s.dispatch()
        assert s.max_offset("U", 0) == 1
    assert not (tmp_path / L.SPARE_DIR).exists()


def test_a_spare_that_cannot_be_moved_is_deleted_and_spares_stop(tmp_path: Path) -> None:
    sp = SpareFiles(tmp_path / "spare", 4096)
    try:
        assert sp.take(tmp_path / "a") is False  # none ready: starts the thread
        _ready(sp)
        [name] = os.listdir(tmp_path / "spare")
        assert (tmp_path / "spare" / name).read_bytes() == bytes(4096)
        assert sp.take(tmp_path / "no such directory" / "b") is False
        assert isinstance(sp.error, FileNotFoundError)
        assert os.listdir(tmp_path / "spare") == [] and sp.ready == 0
        assert sp.take(tmp_path / "c") is False and not (tmp_path / "c").exists()
    finally:
        sp.close()
    assert not (tmp_path / "spare").exists()
