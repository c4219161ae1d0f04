"""spark.read.format("rmq") against the golden RocketMQ stores (read-only fixtures)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan  # noqa: E402

from rmqcore.spark import read_store  # noqa: E402
from rmqcore.spark.rmq.reader import RmqReader  # noqa: E402
from tests.conftest import RMQ_FIXTURES, VERSIONS  # noqa: E402
from tests.rocketmq import manifest  # noqa: E402

GEOM = {"commitlogFileSize": 131072, "cqFileSize": 2000}
STORES = [(v, s) for v in VERSIONS for s in ("A", "C")]


def _store(version: str, store: str) -> str:
    return str(RMQ_FIXTURES / version / f"store{store}")


def _dump_msgs(version: str, store: str) -> list[dict]:
    return [r for r in manifest.load(RMQ_FIXTURES / version, store, "dump") if r["type"] == "msg"]


def _keys(s: str | None) -> list[str]:
    return [k for k in (s or "").split(" ") if k]


@pytest.mark.parametrize("version,store", STORES)
def test_read_matches_dump(spark, version: str, store: str) -> None:
    rows = read_store(spark, _store(version, store), **GEOM).collect()
    want = _dump_msgs(version, store)
    assert len(rows) == len(want) > 0
    got = {r.physical_offset: r for r in rows}
    assert len(got) == len(rows)
    for m in want:
        r = got[m["phyOffset"]]
        assert r.store == _store(version, store)
        assert (r.topic, r.queue_id, r.queue_offset, r.size) == (
            m["topic"],
            m["queueId"],
            m["queueOffset"],
            m["totalSize"],
        )
        assert (r.sys_flag, r.flag, r.reconsume_times) == (m["sysFlag"], m["flag"], m["reconsumeTimes"])
        assert r.prepared_transaction_offset == m["preparedTransactionOffset"]
        assert (r.born_timestamp, r.store_timestamp) == (m["bornTimestamp"], m["storeTimestamp"])
        assert r.born_host == m["bornHost"].replace("|", ":")
        assert r.store_host == m["storeHost"].replace("|", ":")
        assert r.msg_id == m["msgId"]
        assert r.tags == m["tags"]
        assert r.keys == _keys(m["properties"].get("KEYS"))
        assert dict(r.properties) == m["properties"]
        assert hashlib.sha256(r.body).hexdigest() == m["body_sha256"]
    # physical order within the store
    assert [r.physical_offset for r in rows] == sorted(got)


def test_glob_over_versions_has_store_column(spark) -> None:
    df = read_store(spark, str(RMQ_FIXTURES / "*" / "storeA"), **GEOM)
    counts = {r["store"]: r["count"] for r in df.groupBy("store").count().collect()}
    assert counts == {_store(v, "A"): len(_dump_msgs(v, "A")) for v in VERSIONS}


def test_split_partitions_give_same_rows(spark) -> None:
    path = _store("5.3.3", "A")
    one = read_store(spark, path, **GEOM)
    many = read_store(spark, path, recordsPerPartition=100, **GEOM)
    assert many.rdd.getNumPartitions() > one.rdd.getNumPartitions() == 21
    cols = ["physical_offset", "queue_offset", "body"]
    assert sorted(map(tuple, many.select(*cols).collect())) == sorted(map(tuple, one.select(*cols).collect()))


PUSHED = [
    ("topic = 'TopicA'", lambda r: r.topic == "TopicA"),
    ("topic = 'TopicA' and queue_id = 1", lambda r: r.topic == "TopicA" and r.queue_id == 1),
    (
        "topic in ('TopicC', 'TopicB_longer-name_01') and queue_id in (0, 3)",
        lambda r: r.topic in ("TopicC", "TopicB_longer-name_01") and r.queue_id in (0, 3),
    ),
    ("queue_id = 2", lambda r: r.queue_id == 2),
    (
        "store_timestamp >= 1700003703000 and store_timestamp < 1700003704000",
        lambda r: 1700003703000 <= r.store_timestamp < 1700003704000,
    ),
    ("store_timestamp > 1700003704900", lambda r: r.store_timestamp > 1700003704900),
    ("store_timestamp = 1700000000000", lambda r: r.store_timestamp == 1700000000000),
    (
        "topic = 'TopicA' and store_timestamp <= 1700000001000 and flag = 0",
        lambda r: r.topic == "TopicA" and r.store_timestamp <= 1700000001000 and r.flag == 0,
    ),
    ("topic = 'NoSuchTopic'", lambda r: False),
    ("topic = 'TopicA' and topic = 'TopicC'", lambda r: False),
]


@pytest.mark.parametrize("version,store", [("5.3.3", "A"), ("4.9.8", "C")])
def test_pushdown_equals_filter_after_unfiltered_read(spark, version: str, store: str) -> None:
    path = _store(version, store)
    full = (
        read_store(spark, path, **GEOM)
        .select("physical_offset", "topic", "queue_id", "store_timestamp", "flag")
        .collect()
    )
    assert len(full) == len(_dump_msgs(version, store))
    nonempty = 0
    for expr, pred in PUSHED:
        pushed = sorted(
            r.physical_offset
            for r in read_store(spark, path, **GEOM).filter(expr).select("physical_offset").collect()
        )
        want = sorted(r.physical_offset for r in full if pred(r))
        assert pushed == want, expr
        nonempty += bool(want)
    assert nonempty >= 5


def _reader(path: str, filters: list) -> tuple[RmqReader, list]:
    r = RmqReader({"path": path, "commitlogfilesize": "131072", "cqfilesize": "2000"})
    left = list(r.pushFilters(filters))
    return r, left


def test_pushdown_prunes_partitions() -> None:
    path = _store("4.9.8", "A")
    all_parts = _reader(path, [])[0].partitions()
    assert len(all_parts) == 21
    r, left = _reader(
        path,
        [
            GreaterThanOrEqual(("store_timestamp",), 1700003704000),
            LessThan(("store_timestamp",), 1700003704500),
        ],
    )
    assert left == []
    assert 0 < len(r.partitions()) <= 3
    # TopicB's queue 2 only has units in the last files (consume queue pruning)
    r, left = _reader(path, [EqualTo(("topic",), "TopicB_longer-name_01"), In(("queue_id",), (2,))])
    assert left == []
    assert 0 < len(r.partitions()) < 21
    # filters on other columns go back to Spark
    _, left = _reader(path, [EqualTo(("flag",), 0)])
    assert len(left) == 1


def test_pruning_keeps_files_with_undispatched_records() -> None:
    # storeC holds prepared / rolled-back transactional messages that no consume queue references
    path = _store("5.3.3", "C")
    r, _ = _reader(path, [EqualTo(("topic",), "TopicA")])
    assert len(r.partitions()) >= 1


def test_key_option_uses_index(spark) -> None:
    version = "5.3.3"
    path = _store(version, "A")
    dump = manifest.load(RMQ_FIXTURES / version, "A", "dump")
    msgs = {m["phyOffset"]: m for m in _dump_msgs(version, "A")}
    queries = [
        q
        for q in dump
        if q["type"] == "query" and q["begin"] == 0 and q["end"] == 2**63 - 1 and q["queryMessage_phyOffsets"]
    ]
    assert queries
    checked = 0
    for q in queries[:3]:
        topic, key = q["topic"], q["key"]
        want = sorted(
            o
            for o in q["queryMessage_phyOffsets"]
            if msgs[o]["topic"] == topic
            and (
                key in _keys(msgs[o]["properties"].get("KEYS"))
                or msgs[o]["properties"].get("UNIQ_KEY") == key
            )
        )
        rows = read_store(
            spark, path, key=key, keyTopic=topic, indexSlots=100, indexEntries=1000, **GEOM
        ).collect()
        assert sorted(r.physical_offset for r in rows) == want
        for r in rows:
            assert r.topic == topic and (key in r.keys or r.properties.get("UNIQ_KEY") == key)
        checked += len(want)
    assert checked > 0


def test_fresh_dataframe_per_read(spark) -> None:
    path = _store("4.9.8", "A")
    assert read_store(spark, path, **GEOM).filter("queue_id = 1").count() < 2000
    assert read_store(spark, path, **GEOM).count() == 2000


def test_fixtures_untouched() -> None:
    for v in VERSIONS:
        d = Path(_store(v, "A"))
        assert not (d / "abort").exists() and not (d / "rmqcore.json").exists()


def test_segment_index_split_points_and_time_seek(spark, tmp_path: Path) -> None:
    from rmqcore.store import MessageStore

    path = tmp_path / "own"
    clock = iter(range(1_700_000_000_000, 1_700_000_000_000 + 10**6, 3))
    kw = {"commitlog_file_size": 65536, "cq_file_size": 2000, "index_slots": 64, "index_entries": 512}
    with MessageStore(path, clock=lambda: next(clock), **kw) as ms:
        for i in range(1500):
            ms.put(f"T{i % 3}", bytes([i % 251]) * (40 + i % 90), i % 4, keys=[f"k{i}"])
    assert (path / "rmqcore-index").is_dir()
    from rmqcore.spark.rmq.reader import _segindex

    seg = _segindex(str(path), 0)
    assert seg is not None and seg.complete
    seg.close(False)
    geom = {"commitlogFileSize": 65536, "cqFileSize": 2000}
    one = read_store(spark, str(path), **geom)
    nfiles = one.rdd.getNumPartitions()
    many = read_store(spark, str(path), partitionsPerFile=4, **geom)
    assert many.rdd.getNumPartitions() > 2 * nfiles
    full = one.select("physical_offset", "store_timestamp", "body").collect()
    assert len(full) == 1500
    assert sorted(map(tuple, many.select("physical_offset", "store_timestamp", "body").collect())) == sorted(
        map(tuple, full)
    )
    mid = full[700].store_timestamp
    r = RmqReader({"path": str(path), "commitlogfilesize": "65536", "cqfilesize": "2000"})
    assert list(r.pushFilters([GreaterThanOrEqual(("store_timestamp",), mid)])) == []
    first = r.partitions()[0]
    assert first.start % 65536 > 0 and first.start <= full[700].physical_offset  # seeked inside the file
    got = sorted(
        x.physical_offset
        for x in read_store(spark, str(path), **geom).filter(f"store_timestamp >= {mid}").collect()
    )
    assert got == sorted(x.physical_offset for x in full if x.store_timestamp >= mid)


def test_missing_pyspark_message() -> None:
    import subprocess
    import sys

    code = "import sys; sys.modules['pyspark'] = None; import rmqcore.spark"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "pip install rmqcore[spark]" in p.stderr


@pytest.mark.parametrize("version,store", STORES)
def test_decode_range_native_equals_pure(monkeypatch, version: str, store: str) -> None:
    """decode_range's Arrow batches (driver side, no Spark) are the same with either arrowcols twin,
    with and without pushed filters and a stop inside the data."""
    import pyarrow as pa

    from rmqcore import _impl
    from rmqcore.columnar import arrow as R
    from rmqcore.columnar.stores import open_commitlog

    path = _store(version, store)
    cl = open_commitlog(path, GEOM["commitlogFileSize"])
    try:
        mid = cl.min_offset + (cl.max_offset - cl.min_offset) // 2
        cases = [
            (None, cl.max_offset),
            (R.RowFilter(topics=frozenset({"TopicA"}), queue_ids=frozenset({0, 1})), cl.max_offset),
            (R.RowFilter(ts_lo=0), mid),
        ]
        for flt, stop in cases:
            got = {}
            for impl in ("native", "pure"):
                monkeypatch.setattr(R, "_kernel", lambda impl=impl: _impl.kernel("arrowcols", impl))
                batches = list(R.decode_range(cl, path, cl.min_offset, stop, flt, 97))
                for b in batches:
                    b.validate(full=True)
                got[impl] = pa.Table.from_batches(batches, schema=R.ARROW_SCHEMA).to_pylist()
            assert got["native"] == got["pure"]
            assert got["native"] and all(r["physical_offset"] < stop for r in got["native"])
    finally:
        cl.close()


def test_user_schema_projects_the_read(spark) -> None:
    path = _store("4.9.8", "A")
    cols = "topic string, queue_id int, body binary"
    r = spark.read.format("rmq").schema(cols)
    for k, v in GEOM.items():
        r = r.option(k, str(v))
    got = r.load(path).filter("queue_id = 1").collect()
    want = read_store(spark, path, **GEOM).filter("queue_id = 1").select("topic", "queue_id", "body")
    want = want.collect()
    assert len(got) == len(want) > 0
    assert sorted(map(tuple, got)) == sorted(map(tuple, want))
    assert read_store(spark, path, schema="body binary", **GEOM).columns == ["body"]
    with pytest.raises(Exception, match="no column 'bodies'"):
        read_store(spark, path, schema="bodies binary", **GEOM).count()
