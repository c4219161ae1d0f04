"""Spark throughput: the ``rmq`` reader (rows/s and MB/s on one core, ``local[1]``) beside the native
batch decoder alone on the same store, and the writer (rows/s).

Group ``spark-read-1-core`` has three figures over the same store:

(a) ``test_native_batch_decoder_alone``: ``CommitLog.read_batch`` columns only (no Arrow);
(b) ``test_arrow_decode_outside_spark``: ``rmqcore.columnar.arrow.decode_range`` over the whole store,
    i.e. the very Arrow batches the reader yields to Spark, without Spark;
(c) ``test_spark_reader``: ``spark.read.format("rmq")`` + ``sum(length(body))`` in ``local[1]``.

Run: ``python -m pytest bench/bench_spark.py --benchmark-only --benchmark-group-by=group``
(needs pyspark and Java 17). ``RMQCORE_BENCH_SPARK_ROWS`` sets the store size (default 200,000).
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

pyspark = pytest.importorskip("pyspark")

from rmqcore.store import MessageStore  # noqa: E402

ROWS = int(os.environ.get("RMQCORE_BENCH_SPARK_ROWS", "200000"))


@pytest.fixture(scope="module")
def store_dir() -> str:
    d = tempfile.mkdtemp(prefix="rmqbench-spark-")
    with MessageStore(d, commitlog_file_size=64 * 1024 * 1024) as s:
        raw = [f"KEYS\x01key-{i}\x02TAGS\x01TagA\x02" for i in range(1000)]
        for lo in range(0, ROWS, 1000):
            s.put_batch("SparkTopic", [b"b" * 100] * 1000, (lo // 1000) & 3, properties_raw=raw)
    yield d
    shutil.rmtree(d)


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    from rmqcore.spark import local_session

    tmp = tempfile.mkdtemp(prefix="rmqbench-sparkses-")
    s = local_session(tmp, app="rmqcore-bench", master="local[1]")
    yield s
    s.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.benchmark(group="spark-read-1-core")
def test_spark_reader(benchmark, spark, store_dir: str) -> None:
    from rmqcore.spark import read_store

    def run() -> int:
        return read_store(spark, store_dir).selectExpr("sum(length(body)) as n").collect()[0]["n"]

    run()  # warm-up: JIT, Python worker start
    total = benchmark.pedantic(run, rounds=3, iterations=1)
    assert total == ROWS * 100
    benchmark.extra_info["rows_per_s"] = ROWS / benchmark.stats["median"]
    benchmark.extra_info["MB_per_s"] = _store_bytes(store_dir) / 1e6 / benchmark.stats["median"]


@pytest.mark.benchmark(group="spark-read-1-core")
def test_native_batch_decoder_alone(benchmark, store_dir: str) -> None:
    with MessageStore(store_dir, read_only=True) as s:
        cl = s.commitlog

        def run() -> int:
            off, n = cl.min_offset, 0
            while off < cl.max_offset:
                b = cl.read_batch(off, 8000)
                n += len(b)
                off = b.next_offset
            return n

        n = benchmark.pedantic(run, rounds=10, iterations=1, warmup_rounds=1)
    assert n == ROWS
    benchmark.extra_info["rows_per_s"] = ROWS / benchmark.stats["median"]
    benchmark.extra_info["MB_per_s"] = _store_bytes(store_dir) / 1e6 / benchmark.stats["median"]


@pytest.mark.benchmark(group="spark-read-1-core")
def test_arrow_decode_outside_spark(benchmark, store_dir: str) -> None:
    from rmqcore.columnar.arrow import decode_range

    with MessageStore(store_dir, read_only=True) as s:
        cl = s.commitlog

        def run() -> int:
            n = 0
            for rb in decode_range(cl, store_dir, cl.min_offset, cl.max_offset):
                n += rb.num_rows
            return n

        n = benchmark.pedantic(run, rounds=10, iterations=1, warmup_rounds=1)
    assert n == ROWS
    benchmark.extra_info["rows_per_s"] = ROWS / benchmark.stats["median"]
    benchmark.extra_info["MB_per_s"] = _store_bytes(store_dir) / 1e6 / benchmark.stats["median"]


def _store_bytes(store_dir: str) -> int:
    """Bytes of CommitLog data (the files' written part: ROWS records)."""
    with MessageStore(store_dir, read_only=True) as s:
        return s.commitlog.max_offset - s.commitlog.min_offset


@pytest.mark.benchmark(group="spark-write")
def test_spark_writer(benchmark, spark) -> None:
    n = 50_000
    df = spark.range(n).selectExpr("'SparkOut' as topic", "cast(id % 4 as int) as queue_id",
                                   "cast(repeat('w', 100) as binary) as body", "'TagW' as tags")
    df = df.cache()
    df.count()

    def run() -> None:
        d = tempfile.mkdtemp(prefix="rmqbench-sparkw-")
        df.write.format("rmq").mode("append").save(d)
        shutil.rmtree(d)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["rows_per_s"] = n / benchmark.stats["median"]
