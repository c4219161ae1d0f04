"""README's first command: the main job runs end to end (store and Spark) and its checks pass."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.spark  # the main job ends with the Spark pipeline: needs pyspark and Java
def test_main_job_runs_and_passes_its_checks(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "rmqcore.demo", "--dir", str(tmp_path / "data"), "--messages", "5000"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "checks passed" in p.stdout
    assert p.stdout.count("[ok]") == 7  # store checks and the Spark pipeline's
    assert "Spark (local mode" in p.stdout
    assert (tmp_path / "data" / "commitlog").is_dir() and (tmp_path / "data" / "consumequeue").is_dir()
