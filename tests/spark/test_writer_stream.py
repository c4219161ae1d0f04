"""df.write.format("rmq") (append through one driver-side commit) and spark.readStream.format("rmq")."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from rmqcore.errors import (  # noqa: E402
    ConfigError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    PropertiesTooLargeError,
    RmqError,
)
from rmqcore.spark import read_store  # noqa: E402
from rmqcore.store import MessageStore  # noqa: E402

GEOM = {"commitlogFileSize": 65536, "cqFileSize": 2000, "indexSlots": 64, "indexEntries": 512}
STORE_KW = {"commitlog_file_size": 65536, "cq_file_size": 2000, "index_slots": 64, "index_entries": 512}
SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("queue_id", IntegerType()),
        StructField("body", BinaryType()),
        StructField("tags", StringType()),
        StructField("keys", ArrayType(StringType())),
        StructField("properties", MapType(StringType(), StringType())),
    ]
)


def _rows(start: int, n: int) -> list[tuple]:
    return [
        (
            f"T{i % 2}",
            i % 3,
            f"body-{i}".encode() * (1 + i % 5),
            f"tag{i % 4}",
            [f"k{i}", "shared"],
            {"seq": str(i)},
        )
        for i in range(start, start + n)
    ]


def _write(spark, path: Path, rows: list[tuple], parts: int = 3) -> None:
    df = spark.createDataFrame(rows, SCHEMA).repartition(parts)
    w = df.write.format("rmq").mode("append")
    for k, v in GEOM.items():
        w = w.option(k, str(v))
    w.save(str(path))


def test_writer_round_trip(spark, tmp_path: Path) -> None:
    path = tmp_path / "store"
    first, second = _rows(0, 300), _rows(300, 120)
    _write(spark, path, first)
    _write(spark, path, second, parts=2)
    assert not os.path.exists(str(path) + ".rmq-staging")
    with MessageStore(path, **STORE_KW) as ms:
        seen: dict[int, tuple] = {}
        for topic in ("T0", "T1"):
            for qid in range(3):
                msgs = list(ms.iter_queue(topic, qid))
                assert [m.queue_offset for m in msgs] == list(range(len(msgs)))
                assert ms.max_offset(topic, qid) == len(msgs)
                for m in msgs:
                    i = int(m.properties["seq"])
                    assert i not in seen
                    seen[i] = (m.topic, m.queue_id, m.body, m.tags, m.keys)
        assert sorted(seen) == list(range(420))
        for r in first + second:
            i = int(r[5]["seq"])
            assert seen[i] == (r[0], r[1], r[2], r[3], r[4])
        # every message of the second job comes after the first job's in each queue
        for topic in ("T0", "T1"):
            for qid in range(3):
                seqs = [int(m.properties["seq"]) for m in ms.iter_queue(topic, qid)]
                k = sum(s < 300 for s in seqs)
                assert all(s < 300 for s in seqs[:k]) and all(s >= 300 for s in seqs[k:])
        for i in (0, 77, 299, 419):
            found = ms.query_by_key(f"T{i % 2}", f"k{i}")
            assert [int(m.properties["seq"]) for m in found] == [i]
    # and the reader sees the same rows
    df = read_store(spark, str(path), **GEOM)
    assert df.count() == 420
    assert read_store(spark, str(path), key="k5", keyTopic="T1", **GEOM).collect()[0].properties["seq"] == "5"


def test_writer_keys_as_string(spark, tmp_path: Path) -> None:
    path = tmp_path / "s2"
    df = spark.createDataFrame(
        [("TS", 0, b"x", "a  b c")], "topic string, queue_id int, body binary, keys string"
    )
    df.write.format("rmq").mode("append").options(**{k: str(v) for k, v in GEOM.items()}).save(str(path))
    with MessageStore(path, **STORE_KW) as ms:
        (m,) = list(ms.iter_queue("TS", 0))
        assert m.keys == ["a", "b", "c"] and m.body == b"x"


def test_failed_write_leaves_store_unchanged(spark, tmp_path: Path) -> None:
    path = tmp_path / "store"
    _write(spark, path, _rows(0, 20))
    before = {p.name: p.read_bytes() for p in (path / "commitlog").iterdir()}
    bad = _rows(20, 10) + [("bad topic!", 0, b"x", None, None, None)]
    with pytest.raises(Exception, match="bad topic"):
        _write(spark, path, bad)
    # a task failure aborts the job as well
    df = spark.createDataFrame(_rows(40, 10), SCHEMA).selectExpr(
        "topic", "queue_id", "if(queue_id = 2, cast(raise_error('boom') as binary), body) as body"
    )
    with pytest.raises(Exception, match="boom"):
        df.write.format("rmq").mode("append").options(**{k: str(v) for k, v in GEOM.items()}).save(str(path))
    assert {p.name: p.read_bytes() for p in (path / "commitlog").iterdir()} == before
    assert not os.path.exists(str(path) + ".rmq-staging")
    assert read_store(spark, str(path), **GEOM).count() == 20


def _bad_rows() -> list[tuple[str, dict[str, Any], type[Exception], str]]:
    from rmqcore import layout as L

    big = "t" * (L.MAX_PROPERTIES_LEN + 1)
    ok = {"topic": ["T", "T"], "queue_id": [0, 1], "body": [b"a", b"b"]}
    return [
        ("no body column", {"topic": ["T"], "queue_id": [0]}, ConfigError, "needs a 'body' column"),
        ("null topic", {**ok, "topic": ["T", None]}, InvalidTopicError, "row 1: topic is null"),
        ("null queue id", {**ok, "queue_id": [0, None]}, InvalidMessageError,
         "row 1: invalid queue_id None"),
        ("negative queue id", {**ok, "queue_id": [0, -1]}, InvalidMessageError,
         "row 1: invalid queue_id -1"),
        ("body too large", {**ok, "body": [b"a", bytes(L.DEFAULT_MAX_MESSAGE_SIZE + 1)]},
         MessageTooLargeError, "row 1: body of"),
        ("properties too large", {**ok, "tags": ["x", big]}, PropertiesTooLargeError, "row 1: properties of"),
    ]


@pytest.mark.parametrize("case", _bad_rows(), ids=lambda c: c[0])
def test_writer_rejects_bad_rows_with_rmq_errors(tmp_path: Path, case: tuple) -> None:
    """The sink's checks raise the RmqError classes the store's own puts raise (they raised bare
    ValueError): before the store is opened, leaving no store and no staging files."""
    import pyarrow as pa

    from rmqcore.spark.rmq.writer import RmqWriter

    _, cols, cls, msg = case
    path = tmp_path / "s"
    w = RmqWriter({"path": str(path)}, False)
    staged = w.write(iter(pa.table(cols).to_batches()))
    with pytest.raises(cls, match=msg) as e:
        w.commit([staged])
    assert isinstance(e.value, RmqError) and isinstance(e.value, ValueError)
    assert not path.exists() and not os.path.exists(str(path) + ".rmq-staging")


def test_writer_rejects_overwrite_and_properties_past_the_flavour_5_limit(tmp_path: Path) -> None:
    import pyarrow as pa

    from rmqcore import layout as L
    from rmqcore.spark.rmq.writer import RmqWriter, _properties_raw

    with pytest.raises(ConfigError, match="only appends"):
        RmqWriter({"path": str(tmp_path / "o")}, True)
    # a properties string of exactly the limit: flavour 5 ends it with a separator, one byte too many
    tags = "t" * (L.MAX_PROPERTIES_LEN - len(_properties_raw("t", None, None)) + 1)
    assert len(_properties_raw(tags, None, None).encode()) == L.MAX_PROPERTIES_LEN
    path = tmp_path / "s"
    w = RmqWriter({"path": str(path), **{k.lower(): str(v) for k, v in GEOM.items()}}, False)
    table = pa.table({"topic": ["T"], "queue_id": [0], "body": [b"x"], "tags": [tags]})
    staged = w.write(iter(table.to_batches()))
    with pytest.raises(PropertiesTooLargeError, match="properties exceed"):
        w.commit([staged])
    with MessageStore(path, **STORE_KW) as ms:
        assert ms.commitlog.max_offset == 0
    assert not os.path.exists(str(path) + ".rmq-staging")


def _put(path: Path, start: int, n: int) -> None:
    with MessageStore(path, **STORE_KW) as ms:
        for i in range(start, start + n):
            ms.put(f"S{i % 2}", f"m{i}".encode() * (1 + i % 7), i % 2, keys=[f"s{i}"])


def _run(spark, path: Path, ckpt: Path, **opts: str) -> tuple[object, list[list]]:
    """One availableNow run from the checkpoint; returns the query and the rows of each batch."""
    r = spark.readStream.format("rmq")
    for k, v in {**GEOM, **opts}.items():
        r = r.option(k, str(v))
    batches: list[list] = []

    def sink(df, batch_id):  # type: ignore[no-untyped-def]
        batches.append(df.select("physical_offset", "body").collect())

    q = (
        r.load(str(path))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    return q, [b for b in batches if b]


def test_stream_limits_and_checkpoint_restart(spark, tmp_path: Path) -> None:
    path, ckpt = tmp_path / "live", tmp_path / "ckpt"
    _put(path, 0, 50)
    q, batches = _run(spark, path, ckpt, maxRowsPerTrigger=12)
    got = [r for b in batches for r in b]
    assert sorted(r.body for r in got) == sorted(f"m{i}".encode() * (1 + i % 7) for i in range(50))
    sizes = [len(b) for b in batches]
    assert max(sizes) <= 12 and sum(sizes) == 50 and len(sizes) >= 5
    # committed offsets are record-aligned CommitLog offsets
    last = max(int(f) for f in os.listdir(ckpt / "offsets") if f.isdigit())
    lines = (ckpt / "offsets" / str(last)).read_text().splitlines()
    end = [ln for ln in lines if ln.startswith('{"offset"')][-1]
    with MessageStore(path, **STORE_KW) as ms:
        assert f'"offset":{ms.commitlog.max_offset}' in end.replace(" ", "")
        starts = {m.position for t in ("S0", "S1") for m in ms.iter_queue(t, int(t[1]))}
    assert {r.physical_offset for r in got} == starts
    # more data, restart from the checkpoint: only the new rows, with a byte limit
    _put(path, 50, 30)
    q, batches = _run(spark, path, ckpt, maxBytesPerTrigger=2000)
    got2 = [r for b in batches for r in b]
    assert sorted(r.body for r in got2) == sorted(f"m{i}".encode() * (1 + i % 7) for i in range(50, 80))
    assert len(batches) >= 2
    # nothing new: a third run reads nothing
    _, batches = _run(spark, path, ckpt)
    assert batches == []


def test_source_options_errors_are_config_errors(tmp_path: Path) -> None:
    """A read without a path, and an index lookup without keyTopic, raise ConfigError (they raised
    bare ValueError), before any file is read."""
    from rmqcore.spark.rmq.reader import RmqReader
    from rmqcore.spark.rmq.source import RmqDataSource

    with pytest.raises(ConfigError, match="needs a path"):
        RmqDataSource({}).reader(None)
    path = tmp_path / "s"
    with MessageStore(path, **STORE_KW) as s:
        s.put("T", b"x", 0, keys=["k"])
    with pytest.raises(ConfigError, match="needs option 'keyTopic'"):
        RmqReader({"path": str(path), "key": "k", **{k.lower(): str(v) for k, v in GEOM.items()}}).partitions()


def test_the_stream_follows_a_live_writer_without_opening_its_commitlog_per_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from rmqcore.spark.rmq import stream

    opened: list[object] = []
    real = stream.open_commitlog

    def counting(*a: object, **k: object) -> object:
        opened.append(a)
        return real(*a, **k)

    monkeypatch.setattr(stream, "open_commitlog", counting)
    path = tmp_path / "live"
    with MessageStore(path, **STORE_KW) as w:
        w.put("S0", b"first", 0)
        w.wait_dispatched()
        r = stream.RmqStreamReader({"path": str(path), **{k.lower(): str(v) for k, v in GEOM.items()}})
        try:
            e1 = r.latestOffset({"offset": 0}, ReadAllAvailable())["offset"]
            assert e1 == w.commitlog.max_offset
            for i in range(300):  # the writer rolls to new CommitLog files meanwhile
                w.put(f"S{i % 2}", b"b%d" % i * 100, i % 2)
            w.wait_dispatched()
            assert len(w.commitlog.queue.files) > 2
            e2 = r.latestOffset({"offset": e1}, ReadAllAvailable())["offset"]
            assert e2 == w.commitlog.max_offset > e1
            assert opened == []  # each micro-batch's end came from the follower, not a CommitLog re-scan
            rows = sum(b.num_rows for p in r.partitions({"offset": 0}, {"offset": e2}) for b in r.read(p))
            assert rows == 301
        finally:
            r.stop()
