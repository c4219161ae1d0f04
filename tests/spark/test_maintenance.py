"""rmqcore.spark.maintenance: parallel CRC verification and consume-queue / index rebuild.

The rebuild must equal single-machine recovery: a copy of the golden 5.3.3 storeA without
consumequeue/ and index/ is rebuilt by the Spark job and, separately, by ``MessageStore`` recovery;
consume-queue files must be byte-identical, index files identical in content (their names are
wall-clock times).
"""
from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("java is not on PATH", allow_module_level=True)

from rmqcore import _impl  # noqa: E402
from rmqcore import layout as L  # noqa: E402
from rmqcore.spark.maintenance import scan_commitlog_file, verify_and_rebuild  # noqa: E402
from rmqcore.store import MessageStore  # noqa: E402
from tests.conftest import RMQ_FIXTURES  # noqa: E402

pytestmark = pytest.mark.spark

STORE_A = RMQ_FIXTURES / "5.3.3" / "storeA"  # honours RMQCORE_SHARED (worktrees)
GEOMETRY = dict(commitlog_file_size=131072, cq_file_size=2000, index_slots=100, index_entries=1000)
N_MESSAGES = 2000  # storeA's manifest


@pytest.fixture(scope="module")
def _spark(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The suite's ``spark`` fixture when there is one, else the active session, else a local one
    of our own (never a second SparkContext in this process)."""
    try:
        yield request.getfixturevalue("spark")
        return
    except (pytest.FixtureLookupError, pytest.fail.Exception):  # none, or not usable from module scope
        pass
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None or SparkContext._active_spark_context is not None:
        yield active or SparkSession.builder.getOrCreate()
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    tmp = tmp_path_factory.mktemp("spark-maint")
    spark = (
        SparkSession.builder.master("local[2]").appName("rmqcore-maintenance-tests")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2").config("spark.local.dir", str(tmp / "local"))
        .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )  # fmt: skip
    try:
        yield spark
    finally:
        spark.stop()


def _copy_store(dst: Path, src: Path = STORE_A) -> Path:
    shutil.copytree(src, dst)
    for root, dirs, files in os.walk(dst):
        for n in dirs + files:
            p = os.path.join(root, n)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    os.chmod(dst, os.stat(dst).st_mode | stat.S_IWUSR)
    return dst


def _strip(store: Path) -> Path:
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    return store


def _cq_files(store: Path) -> dict[str, bytes]:
    root = store / "consumequeue"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _index_contents(store: Path) -> list[bytes]:
    return sorted(p.read_bytes() for p in (store / "index").iterdir() if p.is_file())


@pytest.fixture(scope="module")
def recovered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """storeA without consume queues and index, rebuilt by single-machine MessageStore recovery."""
    store = _strip(_copy_store(tmp_path_factory.mktemp("ref") / "storeA"))
    MessageStore(store, **GEOMETRY).close()
    return store


def test_rebuild_equals_single_machine_recovery(_spark: Any, recovered: Path, tmp_path: Path) -> None:
    store = _strip(_copy_store(tmp_path / "storeA"))
    rep = verify_and_rebuild(_spark, store, rebuild=True, **GEOMETRY)
    assert rep.ok, rep.problems
    assert rep.rebuilt
    assert rep.messages == N_MESSAGES
    assert len(rep.files) == 21 and all(f.ok for f in rep.files)
    assert [f.status for f in rep.files] == ["BLANK"] * 20 + ["END"]
    got, want = _cq_files(store), _cq_files(recovered)
    assert sorted(got) == sorted(want) and len(want) == 24
    for name in want:
        assert got[name] == want[name], name
    assert _index_contents(store) == _index_contents(recovered)
    assert rep.index_files == 5 and rep.consume_queues == 12
    # and what RocketMQ 5.3.3 itself wrote
    assert _cq_files(STORE_A) == want
    # the rebuilt store opens and serves
    with MessageStore(store, read_only=True, **GEOMETRY) as s:
        assert sum(cq.max_offset for cq in s.consume_queues.values()) == N_MESSAGES


@pytest.mark.parametrize("fixture", ["4.9.8/storeC", "5.3.3/storeC", "5.3.3/storeB_after_java_recovery"])
def test_rebuild_other_golden_stores(_spark: Any, tmp_path: Path, fixture: str) -> None:
    """Stores with more shapes (storeC: transactions, delay levels...; a store Java recovered)."""
    src = STORE_A.parents[1] / fixture
    ref = _strip(_copy_store(tmp_path / "ref", src))
    MessageStore(ref, **GEOMETRY).close()
    store = _strip(_copy_store(tmp_path / "spark", src))
    rep = verify_and_rebuild(_spark, store, rebuild=True, **GEOMETRY)
    assert rep.ok and rep.rebuilt, rep.problems
    assert _cq_files(store) == _cq_files(ref)
    assert _index_contents(store) == _index_contents(ref)


def test_verify_reports_corrupt_records(_spark: Any, tmp_path: Path) -> None:
    store = _copy_store(tmp_path / "storeA")
    path = store / "commitlog" / "00000000000000262144"
    buf = bytearray(path.read_bytes())
    cols = np.empty((L.NCOLUMNS, 64), dtype=np.int64)
    n, _end, _st = _impl.kernel("codec").decode_batch(bytes(buf), 0, len(buf), cols, False)
    bad = [3, 10]
    for i in bad:  # flip one body byte: the frame stays sound, the body CRC does not
        buf[int(cols[L.C_BODY_POS, i])] ^= 0xFF
    path.write_bytes(bytes(buf))
    offsets = [262144 + int(cols[L.C_POSITION, i]) for i in bad]
    cq_before = _cq_files(store)

    rep = verify_and_rebuild(_spark, store, rebuild=True, **GEOMETRY)
    assert not rep.ok and not rep.rebuilt
    assert rep.corrupt_records == [(str(path), o) for o in offsets]
    fc = rep.files[2]
    assert fc.path == str(path) and fc.first_bad_offset == offsets[0] and fc.bad_crc == offsets
    assert fc.status == "BLANK"  # the walk went on past the bad bodies to the file's filler
    assert rep.messages == N_MESSAGES
    assert all(f.ok for i, f in enumerate(rep.files) if i != 2)
    assert _cq_files(store) == cq_before  # nothing rebuilt, nothing deleted
    assert scan_commitlog_file(str(path), 262144).bad_crc == offsets  # the task function alone


def test_verify_only_changes_nothing(_spark: Any, tmp_path: Path) -> None:
    store = _copy_store(tmp_path / "storeA")
    before = _cq_files(store)
    rep = verify_and_rebuild(_spark, store, **GEOMETRY)
    assert rep.ok and not rep.rebuilt and rep.messages == N_MESSAGES
    assert _cq_files(store) == before
