"""Retention: expired CommitLog files go oldest first, consume queues and index files follow, and
writes are refused while the disk is past the warning level."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqcore.errors import DiskFullError
from rmqcore.store import GetStatus, MessageStore

GEOM = dict(commitlog_file_size=4096, cq_file_size=200, index_slots=17, index_entries=40)
HOUR = 3600 * 1000


def _fill(s: MessageStore, n: int) -> list:
    return [s.put("R", b"r%05d" % i + b"." * 150, i % 2, keys="k%d" % i) for i in range(n)]


def _age(path: str, ms: int) -> None:
    os.utime(path, (ms / 1000, ms / 1000))


def test_expired_files_go_oldest_first_and_never_from_the_middle(tmp_path: Path, impl) -> None:
    now = 1_800_000_000_000
    with MessageStore(tmp_path, impl=impl.name, delete_when="99", **GEOM) as s:
        rs = _fill(s, 200)
        s.dispatch()
        files = [mf.path for mf in s.commitlog.queue.files]
        assert len(files) > 8
        for p in files:
            _age(p, now)  # young
        for p in files[:3] + files[5:7]:
            _age(p, now - 80 * HOUR)  # 0-2 and 5-6 expired: only 0-2 may go
        assert s.clean_expired(now, usage_ratio=10) == []  # not a deleteWhen hour, disk not full
        assert s.clean_expired(now, force=True, usage_ratio=10) == files[:3]
        cl_min = s.commitlog.min_offset
        assert cl_min == s.commitlog.queue.files[0].file_from_offset
        # consume queues follow: their min offset is the first message still in the CommitLog
        for q in (0, 1):
            first = next(r for r in rs if r.physical_offset >= cl_min and rs.index(r) % 2 == q)
            assert s.min_offset("R", q) == first.queue_offset
            r = s.get_messages("g", "R", q, 0)
            assert r.status == GetStatus.OFFSET_TOO_SMALL and r.next_begin_offset == first.queue_offset
            got = s.get_messages("g", "R", q, first.queue_offset, 1).messages[0]
            assert got.position == first.physical_offset
        assert all(f.end_phy_offset >= cl_min for f in s.index.index_files[:-1])
        assert s.query_by_key("R", "k0") == []
        assert [m.body[:6] for m in s.query_by_key("R", "k199")] == [b"r00199"]
    with MessageStore(tmp_path, impl=impl.name) as s:  # survives a reopen
        assert s.commitlog.min_offset == cl_min
        assert s.min_offset("R", 0) == next(r for r in rs if r.physical_offset >= cl_min and rs.index(r) % 2 == 0).queue_offset


def test_disk_pressure_deletes_oldest_and_refuses_writes_past_warning(tmp_path: Path, impl) -> None:
    now = 1_800_000_000_000
    with MessageStore(tmp_path, impl=impl.name, delete_when="99", delete_file_batch_max=2, **GEOM) as s:
        _fill(s, 120)
        s.dispatch()
        for mf in s.commitlog.queue.files:
            _age(mf.path, now)
        n = len(s.commitlog.queue.files)
        assert len(s.clean_expired(now, usage_ratio=80)) == 0  # > 75%: expired files only (none)
        assert len(s.clean_expired(now, usage_ratio=88)) == 2  # > 85%: oldest regardless of age, 2 per run
        assert len(s.commitlog.queue.files) == n - 2
        s.clean_expired(now, usage_ratio=95)  # > 90%: disk full
        assert s.disk_full
        with pytest.raises(DiskFullError):
            s.put("R", b"refused", 0)
        with pytest.raises(DiskFullError):
            s.put_batch("R", [b"refused"], 0)
        s.clean_expired(now, usage_ratio=50)
        assert not s.disk_full
        s.put("R", b"accepted again", 0)
