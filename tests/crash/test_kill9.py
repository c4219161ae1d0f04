"""A child process appending under SYNC_FLUSH is killed with SIGKILL at random moments, many times.
After each kill the store recovers (abnormal recovery: the abort file is there) with every
acknowledged message present and intact, and takes new writes. Bounded in time; local only."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqcore.store import GetStatus, MessageStore

GEOM = dict(commitlog_file_size=64 * 1024, cq_file_size=400, index_slots=97, index_entries=500)

CHILD = r"""
import sys, random
from rmqcore.store import MessageStore
d, start, impl = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = MessageStore(d, impl=impl, flush_disk_type="SYNC_FLUSH", commitlog_file_size=64*1024, cq_file_size=400,
                 index_slots=97, index_entries=500)
rnd = random.Random(start)
i = start
print("READY", flush=True)
while True:
    body = b"msg-%08d-" % i + bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 600)))
    r = s.put("Crash", body, i % 3, tags="t%d" % (i % 5), keys="k%d" % i)
    print("ACK", i, r.physical_offset, r.queue_offset, i % 3, len(body), flush=True)
    i += 1
"""


@pytest.mark.crash
def test_sigkill_during_sync_appends_loses_no_acknowledged_message(tmp_path: Path, impl) -> None:
    rnd = random.Random(2024)
    acked: dict[int, tuple[int, int, int, int]] = {}  # i -> (phys, qoffset, queue, body_len)
    next_i = 0
    kills = 0
    deadline = time.monotonic() + 60
    while kills < 12 and time.monotonic() < deadline:
        p = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(next_i), impl.name],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "READY", p.stderr.read() if p.stderr else ""
        time.sleep(rnd.uniform(0.02, 0.3))
        os.kill(p.pid, signal.SIGKILL)
        out, _err = p.communicate(timeout=60)
        kills += 1
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 6 and parts[0] == "ACK":  # a line cut by the kill is not an acknowledgement
                i, phys, qoff, q, blen = map(int, parts[1:])
                acked[i] = (phys, qoff, q, blen)
                next_i = max(next_i, i + 1)
        assert (tmp_path / "abort").exists()  # the crash left the abort file: abnormal recovery next
        with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
            assert not s.last_exit_ok
            for i, (phys, qoff, q, blen) in acked.items():
                m = s.commitlog.read(phys, verify_crc=True)
                assert m.body.startswith(b"msg-%08d-" % i) and len(m.body) == blen
                assert (m.queue_id, m.queue_offset) == (q, qoff)
            for q in range(3):
                want = sorted((qoff, i) for i, (_p, qoff, qq, _b) in acked.items() if qq == q)
                # every acknowledged message is in its queue at its offset
                for qoff, i in want:
                    r = s.get_messages("g", "Crash", q, qoff, 1)
                    assert r.status == GetStatus.FOUND and r.messages[0].body.startswith(b"msg-%08d-" % i)
            # and the store takes new writes after recovery
            s.put("Crash", b"after-kill-%d" % kills, 0)
    assert kills >= 5 and len(acked) > 20
