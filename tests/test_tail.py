"""``rmqcore tail``, end to end: a follower process printing messages as the writer publishes them."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqcore.cli import main
from rmqcore.store import MessageStore

GEOMETRY = {"commitlog_file_size": 64 * 1024, "cq_file_size": 20 * 50}


def _tail(store: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-m", "rmqcore", "tail", str(store), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_tail_prints_messages_as_they_arrive_until_max(tmp_path: Path) -> None:
    with MessageStore(tmp_path, **GEOMETRY) as w:
        w.put("T", b"before", 0)
        p = _tail(tmp_path, "--topic", "T", "--json", "--max", "3")  # from latest: "before" is not shown
        sent = 0
        deadline = time.monotonic() + 120
        while p.poll() is None:  # put until the tail has printed three (it may start after the first puts)
            assert time.monotonic() < deadline
            w.put("T", b"live-%d" % sent if sent % 3 else bytes([0xFF, sent]), sent % 2, tags=f"t{sent}")
            sent += 1
            time.sleep(0.1)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        lines = [json.loads(ln) for ln in out.splitlines()]
        assert len(lines) == 3
        for m in lines:
            n = int(m["tags"][1:])
            assert m["topic"] == "T" and m["queue_id"] == n % 2
            if n % 3:
                assert m["body"] == f"live-{n}"
            else:  # not UTF-8
                assert "body" not in m and base64.b64decode(m["body_base64"]) == bytes([0xFF, n])
        assert all(m["body"] != "before" for m in lines if "body" in m)


def test_tail_from_earliest_and_an_offset_of_one_queue(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with MessageStore(tmp_path, **GEOMETRY) as w:
        for i in range(5):
            w.put("T", b"m%d" % i, 1)
        w.put("T", b"other queue", 0)
        w.wait_dispatched()
        assert main(["tail", str(tmp_path), "--topic", "T", "--queue", "1", "--from", "earliest",
                     "--max", "2"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert [ln.split()[-1] for ln in out] == ["m0", "m1"]
        assert out[0].startswith("T queue=1 offset=0 ")
        assert main(["tail", str(tmp_path), "--topic", "T", "--queue", "1", "--from", "3", "--max", "2",
                     "--json"]) == 0
        assert [json.loads(ln)["body"] for ln in capsys.readouterr().out.splitlines()] == ["m3", "m4"]


@pytest.mark.parametrize("args", [["--from", "soon"], ["--from", "-1"], ["--max", "0"]])
def test_tail_refuses_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    args: list[str]) -> None:
    MessageStore(tmp_path, **GEOMETRY).close()
    assert main(["tail", str(tmp_path), "--topic", "T", *args]) == 2
    assert "rmqcore: error:" in capsys.readouterr().err
