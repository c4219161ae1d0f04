"""README.md stays true: its quick example runs and prints what its comments say, every test it
cites exists, every benchmark command names a file that exists, and every command-line synopsis is
a command the CLI has."""
from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqcore.store import MessageStore

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "README.md").is_file():  # the wheel round trip runs a copy of tests/ alone
    pytest.skip("no README.md beside tests/", allow_module_level=True)
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    nxt = README.find("\n## ", start + 3)
    return README[start : nxt if nxt >= 0 else None]


def test_quick_example_runs_and_prints_what_it_says(tmp_path: Path) -> None:
    code = re.search(r"```python\n(.*?)```", _section("Quick example"), re.S)
    assert code is not None
    src = code.group(1).replace('"/tmp/store"', repr(str(tmp_path / "store")))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(src, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    printed = out.getvalue().splitlines()
    # the comment after the first print is its exact output
    first = re.search(r"print\(r\.physical_offset.*?# (.*)", src)
    assert first is not None and printed[0] == first.group(1).strip()
    assert printed[1].startswith("FOUND 4 ")  # status, next offset, then the bodies
    assert "b'a'" in printed[1] and "b'{\"id\": 1}'" in printed[1]


def test_every_cited_test_exists() -> None:
    cited = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", README)
    assert len(cited) >= 8
    for path, name in cited:
        f = ROOT / path
        assert f.is_file(), path
        if name:
            assert re.search(rf"^def {name}\(", f.read_text(), re.M), f"{path}::{name}"


def test_every_benchmark_command_names_a_real_file() -> None:
    perf = _section("Performance")
    files = set(re.findall(r"(bench/[\w]+\.py)", perf))
    assert len(files) >= 5
    for f in files:
        assert (ROOT / f).is_file(), f


@pytest.mark.parametrize("line", [ln for ln in _section("Command line").splitlines() if ln.startswith("rmqcore ")])
def test_every_cli_synopsis_is_a_command(line: str) -> None:
    words = line.split()
    cmd = [w for w in words[1:3] if re.fullmatch(r"[a-z-]+", w)]
    if cmd and cmd[0] not in ("dump", "kafka"):
        cmd = cmd[:1]
    r = subprocess.run([sys.executable, "-m", "rmqcore.cli", *cmd, "--help"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0, (cmd, r.stderr)
    for opt in re.findall(r"--[a-z][a-z-]+", line):
        assert opt in r.stdout, (cmd, opt)


def test_producer_and_consumer_example_runs_in_two_processes(tmp_path: Path) -> None:
    section = _section("Producers and consumers in different processes")
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    producer, consumer = (b for b in blocks if b.startswith(("# producer.py", "# consumer.py")))
    store = tmp_path / "store"
    run = [sys.executable, "-c"]
    p = subprocess.Popen([*run, producer, str(store)], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):  # the consumer opens the store once the producer has made it
            if (store / "notify").exists() or p.poll() is not None:
                break
            time.sleep(0.05)
        c = subprocess.run([*run, consumer, str(store)], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    finally:
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert c.returncode == 0, c.stderr
    assert c.stdout.splitlines() == [f"{i} b'order-{i}'" for i in range(5)]
    with MessageStore(store) as s:  # the writer applies the follower's commit
        assert s.fetch_offset("billing", "Orders", 0) == 5
