"""Followers in other processes under a writer that is SIGKILLed and restarted, again and again.

A writer process puts numbered messages into two queues (the CommitLog and the consume queues
roll often: small files), printing ACK after each put returns; it is killed at random moments and
started again (its twin and its dispatch alternating: a reput thread, or each put publishing its own
record, ``dispatch="put"``), continuing after the last message the store holds. A
follower process of each twin (``read_only=True, follow=True``) pulls both queues with waits
throughout, checks each message's whole body (it is derived from its number: a torn or partial
record would not match) and prints what it saw. At the end every follower saw each queue's
messages exactly once and in queue order, and every acknowledged message among them. ~20 s.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import IMPLS

GEOM = "commitlog_file_size=64 * 1024, cq_file_size=400"

BODY = r"""
import random
def body(i):
    r = random.Random(i)
    return b"seq-%08d-" % i + bytes(r.randrange(256) for _ in range(r.randrange(0, 700)))
"""

WRITER = BODY + r"""
import sys
from rmqcore.store import MessageStore
d, impl, final, dispatch = sys.argv[1], sys.argv[2], sys.argv[3] == "final", sys.argv[4]
s = MessageStore(d, impl=impl, dispatch=dispatch, GEOM)
nxt = 0
for q in (0, 1):
    n = s.max_offset("T", q)
    if n:
        last = s.get_messages("w", "T", q, n - 1, 1).messages[0].body
        nxt = max(nxt, int(last[4:12]) + 1)
print("READY", nxt, flush=True)
i = nxt
while True:
    if final and i >= nxt + 20:
        for q in (0, 1):
            s.put("T", b"END", q)
        s.close()
        print("DONE", flush=True)
        break
    s.put("T", body(i), i % 2)
    print("ACK", i, flush=True)
    i += 1
""".replace("GEOM", GEOM)

FOLLOWER = BODY + r"""
import sys
from rmqcore.store import MessageStore, GetStatus
d, impl = sys.argv[1], sys.argv[2]
f = MessageStore(d, read_only=True, follow=True, impl=impl)
print("READY", flush=True)
off, done = [0, 0], [False, False]
while not all(done):
    for q in (0, 1):
        if done[q]:
            continue
        r = f.get_messages("f", "T", q, off[q], 32, wait=0.05)
        if r.status == GetStatus.FOUND:
            for m in r.messages:
                if m.body == b"END":
                    done[q] = True
                    break
                i = int(m.body[4:12])
                print("MSG", q, m.queue_offset, i, int(m.body == body(i) and i % 2 == q), flush=True)
            off[q] = r.next_begin_offset
        elif r.status not in ("OFFSET_OVERFLOW_ONE", "NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE"):
            print("STATUS", q, r.status, off[q], flush=True)
f.close()
print("DONE", flush=True)
"""


def _start(script: str, *args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "RMQCORE_IMPL"}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    # unbuffered: reading the READY line must not take later lines out of the pipe (communicate reads
    # the pipe, not a reader's buffer)
    p = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, bufsize=0, env=env)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.startswith(b"READY"), p.stderr.read() if p.stderr else line
    return p


def _finish(p: subprocess.Popen[bytes], timeout: float = 120) -> tuple[str, str]:
    out, err = p.communicate(timeout=timeout)
    return out.decode(), err.decode()


def _drain(p: subprocess.Popen[bytes]) -> tuple[threading.Thread, list[bytes]]:
    """Read a follower's output as it comes (a full pipe would stop it following)."""
    got: list[bytes] = []

    def run() -> None:
        assert p.stdout is not None
        while chunk := p.stdout.read(1 << 16):
            got.append(chunk)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, got


def _acks(out: str) -> set[int]:
    """The acknowledged numbers (a line cut by the kill is not an acknowledgement)."""
    return {int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("ACK ") and len(ln.split()) == 2}


@pytest.mark.crash
def test_followers_see_every_message_once_in_order_across_writer_kills(tmp_path: Path) -> None:
    rnd = random.Random(26)
    acked: set[int] = set()
    # (twin, dispatch) of each writer in turn
    kinds = [(impl, dispatch) for dispatch in ("auto", "put") for impl in IMPLS]
    writer = _start(WRITER, str(tmp_path), kinds[0][0], "run", kinds[0][1])  # makes the store and notify file
    followers = {name: _start(FOLLOWER, str(tmp_path), name) for name in IMPLS}
    drains = {name: _drain(p) for name, p in followers.items()}
    kills = 0
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline or kills < len(kinds):
            time.sleep(rnd.uniform(0.05, 0.6))
            os.kill(writer.pid, signal.SIGKILL)
            out, _ = _finish(writer)
            kills += 1
            acked.update(_acks(out))
            impl, dispatch = kinds[kills % len(kinds)]
            writer = _start(WRITER, str(tmp_path), impl, "run", dispatch)
        os.kill(writer.pid, signal.SIGKILL)
        out, _ = _finish(writer)
        acked.update(_acks(out))
        final = _start(WRITER, str(tmp_path), IMPLS[-1], "final", "put")  # 20 more, then END on each queue
        out, err = _finish(final)
        assert "DONE" in out, err
        acked.update(_acks(out))
        for name, p in followers.items():
            t, chunks = drains[name]
            t.join(120)
            p.wait(30)
            assert p.stderr is not None
            out, err = b"".join(chunks).decode(), p.stderr.read().decode()
            assert out.rstrip().endswith("DONE"), f"{name}: {err[-2000:]}"
            seen = [tuple(map(int, ln.split()[1:])) for ln in out.splitlines() if ln.startswith("MSG ")]
            assert not [ln for ln in out.splitlines() if ln.startswith("STATUS ")], name
            assert all(ok == 1 for *_, ok in seen), f"{name}: a message whose body is not whole"
            for q in (0, 1):
                offs = [qoff for qq, qoff, _i, _ok in seen if qq == q]
                assert offs == list(range(len(offs))), f"{name}: queue {q} not exactly once in order"
                nums = [i for qq, _o, i, _ok in seen if qq == q]
                assert nums == sorted(nums) and len(set(nums)) == len(nums)
            got = {i for _q, _o, i, _ok in seen}
            assert acked <= got, f"{name} missed acknowledged messages {sorted(acked - got)[:10]}"
            assert got == set(range(len(got))), f"{name}: the numbers have a gap"
    finally:
        for p in [writer, *followers.values()]:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert kills >= len(kinds) and len(acked) > 100
