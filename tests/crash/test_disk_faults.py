"""Disk faults through the injectable file layer (rmqcore.fileops): a full disk when a new file is
needed, and a power loss that keeps only what was flushed."""
from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

import pytest

from rmqcore import fileops, indexfile_format
from rmqcore.errors import DiskFullError
from rmqcore.message import MessageExt
from rmqcore.store import MessageStore
from tests.faults import FullAllocations, FullFor

GEOM = dict(commitlog_file_size=8192, cq_file_size=400, index_slots=17, index_entries=100)


@pytest.mark.crash
def test_enospc_on_roll_is_a_clear_error_and_the_store_recovers(tmp_path: Path, impl) -> None:
    ops = FullFor()
    with fileops.use(ops):
        s = MessageStore(tmp_path, impl=impl.name, **dict(GEOM, cq_file_size=20000))
        s.commitlog.prepare_next = False  # no pre-allocated file to fall back on
        acked = [(s.put("T", b"m%04d" % 0 + b"." * 200, 0), b"m%04d" % 0)]  # the first file exists
        s.dispatch()  # and the consume queue's (big enough for this test)
        ops.full = True
        with pytest.raises(DiskFullError):
            for i in range(1, 1000):
                acked.append((s.put("T", b"m%04d" % i + b"." * 200, 0), b"m%04d" % i))
        n_before = len(acked)
        assert 0 < n_before < 1000
        # nothing half-written: every acknowledged message reads back, and the store keeps working
        for r, body in acked:
            assert s.commitlog.read(r.physical_offset, verify_crc=True).body.startswith(body)
        with pytest.raises(DiskFullError):
            s.put("T", b"still full", 0)
        assert s.max_offset("T", 0) == n_before
        ops.full = False  # space returns
        r = s.put("T", b"after", 0)
        assert r.queue_offset == n_before
        s.close()
    with MessageStore(tmp_path, impl=impl.name) as s:
        assert s.max_offset("T", 0) == n_before + 1
        assert [m.body[:5] for m in s.iter_queue("T", 0)][-2:] == [b"m%04d" % (n_before - 1), b"after"]


INDEX_GEOM = dict(commitlog_file_size=1 << 20, cq_file_size=20 * 1000, index_slots=17, index_entries=100)


def _index_files(store_dir: Path) -> list[str]:
    return sorted(p.name for p in (store_dir / "index").iterdir())


def _check_every_key_once(s: MessageStore, n: int) -> None:
    for i in range(n):
        got = s.query_by_key("T", f"k{i}", raw=True)  # raw: a key indexed twice would show twice
        assert [m.body for m in got] == [b"m%03d" % i], i
    assert s.max_offset("T", 0) == n


@pytest.mark.crash
@pytest.mark.parametrize("kind", ["index", "consumequeue"])
def test_enospc_creating_a_logic_file_is_a_clear_error_and_dispatch_resumes(tmp_path: Path, impl, kind: str) -> None:
    """Index files are allocated through fileops like the other files (a sparse one would SIGBUS
    on a full disk at the first touch of an entry page); a failed creation of the next index or
    consume-queue file keeps what dispatch did, and dispatch resumes once there is space. Under
    ``dispatch="put"`` the put whose record needs the file meets the error first: the put
    stands, the error is kept (``wait_dispatched`` and the next dispatch raise it) and puts retry
    after a backoff, not each time."""
    files = tmp_path / "index" if kind == "index" else tmp_path / "consumequeue" / "T" / "0"
    geom = INDEX_GEOM if kind == "index" else dict(INDEX_GEOM, cq_file_size=20 * 99, index_entries=1000)
    ops = FullFor(f"{tmp_path.name}/{kind}/")
    with fileops.use(ops):
        s = MessageStore(tmp_path, impl=impl.name, dispatch="put", **geom)
        # the queue creates its file itself: a spare made before the disk filled would be taken
        # instead (test_spares.py)
        s._services.spares.close()
        for i in range(60):
            s.put("T", b"m%03d" % i, 0, keys=f"k{i}")
        assert s.dispatch_lag == 0  # each put published its own record
        assert len(list(files.iterdir())) == 1
        ops.full = True
        for i in range(60, 99):
            s.put("T", b"m%03d" % i, 0, keys=f"k{i}")
        assert ops.refused == 0 and s.dispatch_lag == 0
        s.put("T", b"m099", 0, keys="k99")  # the first file holds 99 keys (units): the 100th needs another
        assert ops.refused == 1 and isinstance(s._dispatch.publish_error, DiskFullError)
        s._dispatch._retry_at = time.monotonic() + 60  # as after a longer backoff: no put retries now
        for i in range(100, 120):
            s.put("T", b"m%03d" % i, 0, keys=f"k{i}")  # the puts stand
        assert ops.refused == 1 and len(list(files.iterdir())) == 1
        with pytest.raises(DiskFullError):
            s.wait_dispatched(timeout=5)
        with pytest.raises(DiskFullError):
            s.dispatch()
        assert ops.refused == 2 and len(list(files.iterdir())) == 1
        assert 0 < s.dispatch_lag  # stopped at the record that did not fit
        ops.full = False
        s.dispatch()
        assert s.dispatch_lag == 0 and len(list(files.iterdir())) == 2
        _check_every_key_once(s, 120)
        assert [m.body for m in s.iter_queue("T", 0)] == [b"m%03d" % i for i in range(120)]
        s.close()
    with MessageStore(tmp_path, impl=impl.name, **geom) as s:
        _check_every_key_once(s, 120)


@pytest.mark.crash
def test_the_reput_thread_waits_out_a_full_disk(tmp_path: Path, impl) -> None:
    ops = FullFor(f"{tmp_path.name}/index/")
    with fileops.use(ops):
        s = MessageStore(tmp_path, impl=impl.name, dispatch="background", **INDEX_GEOM)
        ops.full = True
        for i in range(120):
            s.put("T", b"m%03d" % i, 0, keys=f"k{i}")
        with pytest.raises(DiskFullError):  # no index file can be created: not even the first
            s.wait_dispatched(timeout=10)
        assert ops.refused >= 1 and (not (tmp_path / "index").exists() or _index_files(tmp_path) == [])
        ops.full = False  # space returns: the reput thread goes on by itself (its next retry,
        deadline = time.monotonic() + 20  # within its 1 s backoff; the error stands until then)
        while True:
            try:
                assert s.wait_dispatched(timeout=20)
                break
            except DiskFullError:
                assert time.monotonic() < deadline
                time.sleep(0.01)
        assert s._reput is not None and s._reput.thread.is_alive()
        assert len(_index_files(tmp_path)) == 2
        _check_every_key_once(s, 120)
        s.close()


def _make_sparse(path: Path, keep: int) -> None:
    """Rewrite ``path`` as RocketMQ leaves its files: its first ``keep`` bytes, the rest a hole."""
    data, size = path.read_bytes()[:keep], path.stat().st_size
    path.unlink()
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(size)
    assert path.stat().st_blocks * 512 < size


@pytest.mark.crash
def test_a_sparse_file_is_allocated_before_appending_through_its_map(tmp_path: Path, impl) -> None:
    """RocketMQ's own files are sparse (FileChannel.map extends them). Appending through the map
    into a hole on a full disk would be a SIGBUS; opening writable allocates first, so a full disk
    is a DiskFullError at open, and the read-only open still works."""
    geom = dict(commitlog_file_size=64 * 1024, cq_file_size=20 * 1000, index_slots=17, index_entries=1000)
    with MessageStore(tmp_path, impl=impl.name, **geom) as s:
        for i in range(50):
            s.put("T", b"m%03d" % i, 0, keys=f"k{i}")
        end = s.commitlog.max_offset
    cl = tmp_path / "commitlog" / "00000000000000000000"
    cq = tmp_path / "consumequeue" / "T" / "0" / "00000000000000000000"
    index = next((tmp_path / "index").iterdir())
    for path, keep in ((cl, end), (cq, 50 * 20), (index, 40 + 17 * 4 + 51 * 20)):
        _make_sparse(path, keep)
    def files() -> dict[str, bytes]:
        return {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    before = files()
    with fileops.use(FullAllocations(full=True)):
        with pytest.raises(DiskFullError):
            MessageStore(tmp_path, impl=impl.name, **geom)
        assert files() == before  # the refused open changed nothing
        with MessageStore(tmp_path, impl=impl.name, read_only=True, **geom) as ro:
            assert [m.body for m in ro.iter_queue("T", 0)] == [b"m%03d" % i for i in range(50)]
    with MessageStore(tmp_path, impl=impl.name, **geom) as s:
        for path in (cl, cq, index):
            assert path.stat().st_blocks * 512 >= path.stat().st_size, path
        s.put("T", b"m050", 0, keys="k50")
        assert [m.body for m in s.query_by_key("T", "k50")] == [b"m050"]
        assert s.max_offset("T", 0) == 51


@pytest.mark.crash
def test_an_index_file_is_allocated_as_it_fills(tmp_path: Path, impl, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index file takes disk space a chunk of entries at a time (RocketMQ's is sparse: a 420 MB
    file for a few keys), and each chunk is allocated before the dispatcher may write into it: no
    full disk can meet an unallocated page, and one that is full when the next chunk is needed
    stops dispatch with a DiskFullError, to go on once there is space."""
    monkeypatch.setattr(indexfile_format, "ALLOC_ENTRIES", 1024)
    geom = dict(commitlog_file_size=1 << 20, cq_file_size=20 * 10_000, index_slots=17, index_entries=20_000)
    ops = FullAllocations()
    with fileops.use(ops):
        s = MessageStore(tmp_path, impl=impl.name, dispatch="inline", **geom)
        s.commitlog.prepare_next = False
        for i in range(1000):
            s.put("T", b"m%03d" % i, 0, keys=f"k{i}")
        s.dispatch()
        (path,) = (tmp_path / "index").iterdir()
        size = path.stat().st_size
        assert size == 40 + 17 * 4 + 20 * 20_000
        assert 40 + 17 * 4 + 20 * 1001 <= path.stat().st_blocks * 512 < size // 4  # what it holds, not all
        ops.full = True
        for i in range(1000, 2000):
            s.put("T", b"m%03d" % i, 0, keys=f"k{i}")
        with pytest.raises(DiskFullError):
            s.dispatch()  # entry 1024 needs the next chunk
        assert 0 < s.dispatch_lag
        ops.full = False
        s.dispatch()
        assert s.dispatch_lag == 0
        assert 40 + 17 * 4 + 20 * 2001 <= path.stat().st_blocks * 512 < size // 2
        _check_every_key_once(s, 2000)
        s.close()
    with MessageStore(tmp_path, impl=impl.name, **geom) as s:
        _check_every_key_once(s, 2000)
        s.put("T", b"m2000", 0, keys="k2000")
        assert [m.body for m in s.query_by_key("T", "k2000")] == [b"m2000"]


class PowerLoss(fileops.FileOps):
    """Remembers, per file, its content as of its last fdatasync; ``image`` builds the directory a
    power loss would leave: segment files as last flushed (never-flushed ones all zeros)."""

    def __init__(self) -> None:
        self.durable: dict[str, bytes] = {}

    def create(self, path: str, size: int, allocate: int | None = None) -> int:
        fd = super().create(path, size, allocate)
        self.durable[path] = bytes(size)
        return fd

    def fdatasync(self, fd: int, mapped) -> None:
        super().fdatasync(fd, mapped)
        self.durable[mapped.path] = bytes(mapped.mm[:])

    def image(self, src: Path, dst: Path) -> None:
        # one snapshot of what was durable: the store's threads (flushes, the next file's creation)
        # go on meanwhile, and iterating the live dict failed when one of them added a file
        durable = dict(self.durable)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("rmqcore-index"))
        for path, data in durable.items():
            rel = Path(path).relative_to(src)
            if (dst / rel).exists():
                (dst / rel).write_bytes(data)


@pytest.mark.crash
@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_power_loss_keeps_every_durable_message(tmp_path: Path, impl, mode: str) -> None:
    """What a put acknowledged (SYNC_FLUSH) or the flusher flushed (ASYNC_FLUSH) survives a power
    loss that keeps only synced bytes. Under SYNC_FLUSH the group commit is the twin under test: the
    injected file layer sees its syncs through the kernel's ``sync`` function, in C for native."""
    rnd = random.Random(11)
    for trial in range(3):
        ops = PowerLoss()
        src = tmp_path / f"src{trial}"
        with fileops.use(ops):
            s = MessageStore(src, impl=impl.name, flush_disk_type=mode, flush_interval_ms=5, **GEOM)
            if mode == "SYNC_FLUSH":
                assert s._services.group_commit is not None
                assert type(s._services.group_commit._gc).__module__ == f"rmqcore._{impl.name}.groupcommit"
            durable = []
            written = []
            for i in range(rnd.randrange(50, 300)):
                r = s.put("P", b"p%05d-" % i + b"#" * rnd.randrange(0, 150), i % 2, keys="k%d" % i)
                written.append((r.physical_offset, r.size, b"p%05d-" % i))
                if mode == "SYNC_FLUSH":
                    durable.append((r.physical_offset, b"p%05d-" % i))  # acknowledged = durable
                elif rnd.random() < 0.05:
                    s.flush()
            if mode == "ASYNC_FLUSH":  # durable = whatever the flusher had flushed when the power went
                flushed = s.commitlog.flushed_offset
                durable = [(off, b) for off, size, b in written if off + size <= flushed]
            # the power goes out: only flushed bytes survive
            img = tmp_path / f"img{trial}"
            ops.image(src, img)
            (img / "abort").write_bytes(b"")
            s.close()
        with MessageStore(img, impl=impl.name) as r2:
            assert not r2.last_exit_ok
            got = {m.position: m.body for m in r2.commitlog.iter_records(verify_crc=True) if isinstance(m, MessageExt)}
            for off, prefix in durable:
                assert got[off].startswith(prefix)
            for q in (0, 1):
                assert r2.max_offset("P", q) == sum(1 for m in got.values() if m[1:6].isdigit() and int(m[1:6]) % 2 == q)
            r2.put("P", b"after power loss", 0)
