"""The typed API (issue 7): ``mypy`` with pyproject.toml's [tool.mypy] (strict) is clean on rmqcore.

``-p rmqcore`` from the suite's root checks the package the tests import: the source tree in a checkout,
the installed wheel (found through its ``py.typed``) in CI's wheel round trip. mypy is in the ``test``
extra; the cache lives under the temp dir so a re-run takes a second or two.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import rmqcore

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_is_clean_on_the_package() -> None:
    config = ROOT / "pyproject.toml"
    pkg = Path(rmqcore.__file__).resolve().parent
    key = hashlib.sha1(f"{sys.prefix}|{pkg}".encode()).hexdigest()[:12]
    # the cache lives in the environment (removed with it); a temporary directory when that is not
    # writable (and then removed after the run)
    cache = Path(sys.prefix) / f".rmqcore-mypy-cache-{key}"
    scratch = None
    if not os.access(sys.prefix, os.W_OK):
        scratch = tempfile.TemporaryDirectory(prefix="rmqcore-mypy-cache-")
        cache = Path(scratch.name)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    try:
        p = subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(cache),
             "--no-error-summary", "--hide-error-context", "-p", "rmqcore"],
            cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
        )
    finally:
        if scratch is not None:
            scratch.cleanup()
    assert p.returncode == 0, f"mypy on {pkg}:\n{p.stdout}{p.stderr}"
