"""Torn tail: for each of the last records, zero the CommitLog from every byte position of the
record to the end of the file (what a crash during the write leaves). Recovery yields exactly the
records before it, and the consume queues agree."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rmqcore import layout as L
from rmqcore.commitlog import ScanStop
from rmqcore.message import MessageExt
from rmqcore.store import MessageStore

GEOM = dict(commitlog_file_size=8192, cq_file_size=400, index_slots=17, index_entries=100)


@pytest.mark.crash
def test_zeroed_tail_at_every_byte_recovers_the_exact_prefix(tmp_path: Path, impl) -> None:
    base = tmp_path / "base"
    with MessageStore(base, impl=impl.name, **GEOM) as s:
        rs = [s.put("Torn", b"body-%03d" % i + b"." * (i % 7), i % 2, tags="t", keys="k%d" % i) for i in range(40)]
    (base / "abort").write_bytes(b"")  # as a crash would leave it
    last_two = rs[-2:]
    tried = 0
    for victim_index, victim in zip((len(rs) - 2, len(rs) - 1), last_two):
        path_name = L.offset_to_file_name(victim.physical_offset - victim.physical_offset % 8192)
        for cut in range(victim.physical_offset, victim.physical_offset + victim.size):
            work = tmp_path / "w"
            if work.exists():
                shutil.rmtree(work)
            shutil.copytree(base, work)
            f = work / "commitlog" / path_name
            data = bytearray(f.read_bytes())
            pos = cut % 8192
            data[pos:] = b"\0" * (len(data) - pos)
            f.write_bytes(bytes(data))
            with MessageStore(work, impl=impl.name, **GEOM) as s:
                msgs = [m for m in s.commitlog.iter_records(verify_crc=True) if isinstance(m, MessageExt)]
                assert not any(isinstance(m, ScanStop) for m in s.commitlog.iter_records())
                assert [m.position for m in msgs] == [r.physical_offset for r in rs[:victim_index]]
                assert s.commitlog.max_offset == victim.physical_offset
                want = [sum(1 for r in rs[:victim_index] if r.queue_offset >= 0 and rs.index(r) % 2 == q)
                        for q in (0, 1)]
                assert [s.max_offset("Torn", q) for q in (0, 1)] == want
                assert s.put("Torn", b"new", 0).physical_offset == victim.physical_offset
            tried += 1
    assert tried == sum(r.size for r in last_two)
