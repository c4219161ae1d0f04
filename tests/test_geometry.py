"""One rule for a store's geometry (rmqcore.geometry.resolve), used by the store, the command line,
Spark's readers and maintenance, and the columnar copies (issue 24)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rmqcore import geometry
from rmqcore import layout as L
from rmqcore.columnar.stores import geometry as columnar_geometry
from rmqcore.errors import ConfigError
from rmqcore.store import MessageStore

ROOT = Path(__file__).resolve().parents[1]
SIZES = dict(commitlog_file_size=65536, cq_file_size=2000)


def _store(path: Path, impl: Any, **sizes: int) -> Path:
    with MessageStore(path, impl=impl.name, dispatch="inline", **sizes) as s:
        for i in range(5):
            s.put("T", b"x" * 100, 0, keys=f"k{i}")
    return path


def test_a_created_store_is_opened_with_its_saved_geometry(tmp_path: Path, impl: Any) -> None:
    store = _store(tmp_path / "s", impl, **SIZES)
    got = geometry.resolve(store, {"dispatch": "inline"})
    assert got.saved is not None and got.saved["commitlog_file_size"] == 65536
    assert (got.values["commitlog_file_size"], got.values["cq_file_size"], got.values["dispatch"]) == (
        65536, 2000, "inline")
    assert columnar_geometry(str(store)) == (65536, 2000)
    assert columnar_geometry(str(store), 65536, None) == (65536, 2000)  # the same size may be given


def test_a_size_given_against_the_saved_one_is_refused_everywhere(tmp_path: Path, impl: Any) -> None:
    """The store, Spark's readers (columnar geometry) and the command line refuse a file size the
    store was not created with, naming both (Spark and the CLI read with the given size before)."""
    store = _store(tmp_path / "s", impl, **SIZES)
    with pytest.raises(ConfigError, match="created with commitlog_file_size=65536, not 131072"):
        geometry.resolve(store, {"commitlog_file_size": 131072})
    with pytest.raises(ConfigError, match="created with commitlog_file_size=65536, not 131072"):
        MessageStore(store, impl=impl.name, read_only=True, commitlog_file_size=131072)
    with pytest.raises(ConfigError, match="created with cq_file_size=2000, not 4000"):
        columnar_geometry(str(store), None, "4000")  # Spark options are strings
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "rmqcore.cli", "dump", "commitlog", str(store),
                        "--commitlog-file-size", "131072"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and "created with commitlog_file_size=65536" in p.stderr, (p.returncode, p.stderr)


def test_a_foreign_store_takes_its_files_sizes(tmp_path: Path, impl: Any) -> None:
    store = _store(tmp_path / "s", impl, **SIZES)
    (store / geometry.GEOMETRY_FILE).unlink()  # as a broker leaves it: no rmqcore.json
    got = geometry.resolve(store)
    assert got.saved is None
    assert (got.values["commitlog_file_size"], got.values["cq_file_size"]) == (65536, 2000)
    assert geometry.resolve(store, {"cq_file_size": 4000}).values["cq_file_size"] == 4000  # given wins
    empty = tmp_path / "empty"
    empty.mkdir()
    assert geometry.resolve(empty).values == {}
    assert columnar_geometry(str(empty)) == (L.DEFAULT_COMMITLOG_FILE_SIZE, L.DEFAULT_CQ_FILE_SIZE)
