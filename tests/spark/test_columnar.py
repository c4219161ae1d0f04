"""read_store over a store with Parquet copies of some CommitLog files: the same rows as the rmq source
alone, for the fixture stores A and C of both RocketMQ versions and the demo store, under every pushed
filter; rmqcore.spark.materialize runs one task per CommitLog file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from rmqcore.columnar.manifest import SNAPSHOT_BYTES, columnar_dir, current_copies  # noqa: E402
from rmqcore.spark import materialize, read_store  # noqa: E402
from tests.conftest import RMQ_FIXTURES, VERSIONS, copy_store  # noqa: E402
from tests.spark.test_rmq_source import PUSHED  # noqa: E402

FIXTURE_GEOM = {"commitlogFileSize": 131072, "cqFileSize": 2000}
DEMO_FILE = 65536


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> dict[str, tuple[Path, dict[str, int]]]:
    """Copies of the fixture stores and a demo store, each with copies of half its sealed files (made
    by Spark tasks, one per file; the other half and the live tail go through the rmq source)."""
    from rmqcore import demo

    base = tmp_path_factory.mktemp("columnar")
    out = {}
    for v in VERSIONS:
        for s in ("A", "C"):
            out[f"{v}/{s}"] = (copy_store(RMQ_FIXTURES / v / f"store{s}", base / f"{v}-{s}"), FIXTURE_GEOM)
    demo.run(base / "demo", 3000, commitlog_file_size=DEMO_FILE)
    out["demo"] = (base / "demo", {"commitlogFileSize": DEMO_FILE})
    sc = spark.sparkContext
    for name, (path, geom) in out.items():
        sc.setJobGroup(f"materialize-{name}", "test")
        rep = materialize(spark, path, commitlog_file_size=geom["commitlogFileSize"], max_files=None)
        sc.setJobGroup("", "")
        sealed = len(rep.converted)
        assert sealed >= 2 and rep.unsealed == 1, name
        tracker = sc.statusTracker()
        jobs = tracker.getJobIdsForGroup(f"materialize-{name}")
        tasks = [tracker.getStageInfo(s).numTasks for j in jobs for s in tracker.getJobInfo(j).stageIds]
        assert tasks == [sealed], name  # one task per CommitLog file
        # keep the copies of the first half only: the rest is read by the rmq source
        for e in rep.converted[sealed // 2:]:
            (columnar_dir(path) / e.copy).unlink()
        assert 0 < len(current_copies(path, geom["commitlogFileSize"])) == sealed // 2 < sealed
    return out


@pytest.mark.parametrize("name", [f"{v}/{s}" for v in VERSIONS for s in ("A", "C")] + ["demo"])
def test_read_store_with_copies_equals_the_rmq_source(spark: Any, stores: dict, name: str) -> None:
    """Half the sealed files copied; the rest and the live tail read by the rmq source (no
    snapshots), then from snapshots read_store writes: the same rows and filtered rows."""
    path, geom = stores[name]
    plain = read_store(spark, str(path), columnar=False, **geom)
    want = sorted(plain.collect(), key=lambda r: r.physical_offset)
    pushed = PUSHED if name != "demo" else DEMO_PUSHED
    for snapshots in (0, SNAPSHOT_BYTES):
        mixed = read_store(spark, str(path), snapshot_bytes=snapshots, **geom)
        plan = mixed._jdf.queryExecution().executedPlan().toString()
        assert "Parquet" in plan and ("Python" in plan) == (snapshots == 0)
        got = sorted(mixed.collect(), key=lambda r: r.physical_offset)
        assert len(got) == len(want) > 0
        assert got == want
        assert {r.store for r in got} == {str(path)}
        nonempty = 0
        for expr, pred in pushed if snapshots == 0 else pushed[:4]:
            q = read_store(spark, str(path), snapshot_bytes=snapshots, **geom).filter(expr)
            q = q.select("physical_offset")
            expected = [r.physical_offset for r in want if pred(r)]
            assert sorted(r.physical_offset for r in q.collect()) == expected, expr
            nonempty += any(pred(r) for r in want)
        assert nonempty >= 3


def _offset(r: Any) -> int:
    return int(r.physical_offset)


DEMO_PUSHED = [
    ("topic = 'OrderEvents'", lambda r: r.topic == "OrderEvents"),
    ("topic in ('AuditLog', 'PaymentEvents') and queue_id = 3",
     lambda r: r.topic in ("AuditLog", "PaymentEvents") and r.queue_id == 3),
    ("queue_id in (0, 2) and tags = 'Paid'", lambda r: r.queue_id in (0, 2) and r.tags == "Paid"),
    ("topic = 'NoSuchTopic'", lambda r: False),
]


def test_read_store_with_copies_projects_and_keeps_key_lookups(spark: Any, stores: dict) -> None:
    path, geom = stores["5.3.3/A"]
    cols = "queue_id int, body binary, store string"
    got = read_store(spark, str(path), schema=cols, **geom)
    assert got.columns == ["queue_id", "body", "store"]
    want = read_store(spark, str(path), columnar=False, **geom).select("queue_id", "body", "store")
    assert sorted(map(tuple, got.collect())) == sorted(map(tuple, want.collect()))
    one = read_store(spark, str(path), columnar=False, **geom).filter("queue_id = 0").first()
    key = one.keys[0] if one.keys else one.properties["UNIQ_KEY"]
    kw = {"key": key, "keyTopic": one.topic, "indexSlots": 100, "indexEntries": 1000, **geom}
    rows = read_store(spark, str(path), **kw).collect()  # an index lookup: not doubled by the copies
    alone = read_store(spark, str(path), columnar=False, **kw).collect()
    assert one.physical_offset in [r.physical_offset for r in rows]
    assert sorted(r.physical_offset for r in rows) == sorted(r.physical_offset for r in alone)


def test_fully_materialized_store_is_read_as_parquet_alone(spark: Any, tmp_path: Path) -> None:
    path = copy_store(RMQ_FIXTURES / "5.3.3" / "storeC", tmp_path / "c")
    rep = materialize(spark, path, commitlog_file_size=FIXTURE_GEOM["commitlogFileSize"], tail=True)
    assert [e.sealed for e in rep.converted].count(False) == 1
    df = read_store(spark, str(path), **FIXTURE_GEOM)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "Parquet" in plan and "Python" not in plan  # no rmq source: the copies hold every record
    want = sorted(read_store(spark, str(path), columnar=False, **FIXTURE_GEOM).collect(),
                  key=lambda r: r.physical_offset)
    assert sorted(df.collect(), key=lambda r: r.physical_offset) == want
    for expr, pred in PUSHED[:4]:
        got = read_store(spark, str(path), **FIXTURE_GEOM).filter(expr).select("physical_offset").collect()
        assert sorted(r.physical_offset for r in got) == [r.physical_offset for r in want if pred(r)], expr


def test_read_store_of_a_live_store_reads_what_it_held_when_planned(spark: Any, tmp_path: Path) -> None:
    """A store being appended to (its writer open) between reads: each read_store DataFrame is read
    by Spark's Parquet reader alone and holds exactly the rows the store held when it was made --
    also when it runs again after later reads wrote newer snapshots."""
    from rmqcore.columnar.materialize import materialize as materialize_here
    from rmqcore.store import MessageStore
    from tests.test_materialize import GEOM, _fill

    path = tmp_path / "live"
    _fill(path, 1200)
    materialize_here(path)
    frames = []
    with MessageStore(path, **GEOM) as w:
        for i, more in enumerate((30, 700, 0)):  # the second append seals the tail file
            df = read_store(spark, str(path))
            assert "Python" not in df._jdf.queryExecution().executedPlan().toString()
            want = sorted(read_store(spark, str(path), columnar=False).collect(), key=_offset)
            assert sorted(df.collect(), key=_offset) == want
            assert want[-1].physical_offset + want[-1].size == w.commitlog.max_offset
            frames.append((df, want))
            for k in range(more):
                w.put("Live", b"%d.%d" % (i, k), k % 2)
    assert [len(want) for _, want in frames] == [1200, 1230, 1930]
    for df, want in frames:
        assert sorted(df.collect(), key=_offset) == want


def test_read_store_of_a_store_it_may_not_write(spark: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """No snapshot where the driver may not write (a read-only file system): nothing on disk
    changes, and the rmq source reads what the copies do not hold -- up to where the log ended
    when read_store was called, not the rows appended before the query ran."""
    import errno
    import os

    from rmqcore.columnar.materialize import materialize as materialize_here
    from rmqcore.store import MessageStore
    from tests.test_materialize import GEOM, _fill

    path = tmp_path / "ro"
    _fill(path, 1200)
    materialize_here(path)
    before = sorted((str(p), p.stat().st_mtime_ns) for p in path.rglob("*"))
    real = {n: getattr(os, n) for n in ("open", "mkdir", "link", "unlink")}

    def refuse(name: str) -> Any:
        def call(p: Any, *a: Any, **k: Any) -> Any:
            if str(p).startswith(str(path)) and (name != "open" or a[0] & (os.O_WRONLY | os.O_CREAT)):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(p))
            return real[name](p, *a, **k)
        return call

    for n in real:
        monkeypatch.setattr(os, n, refuse(n))
    df = read_store(spark, str(path))
    monkeypatch.undo()
    assert sorted((str(p), p.stat().st_mtime_ns) for p in path.rglob("*")) == before
    want = sorted(read_store(spark, str(path), columnar=False).collect(), key=_offset)
    with MessageStore(path, **GEOM) as w:
        for k in range(40):
            w.put("Later", b"%d" % k, 0)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "Parquet" in plan and "Python" in plan
    assert sorted(df.collect(), key=_offset) == want
