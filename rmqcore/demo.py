"""The main job on an embedded default: a store in ./rmqcore-data, a realistic workload, a report.

Run: ``python -m rmqcore.demo [--dir DIR] [--messages N] [--no-spark]``. Creates a fresh
MessageStore, produces messages over several topics, queues, keys and tags (single puts and
batches), consumes every queue as a consumer group would (committing offsets), queries by key and by
time, reopens the store and checks that everything survived; then runs the Spark pipeline over the
store in local mode (per-topic counts through the ``rmq`` data source, a pushed-down filter, the
parallel CRC verification job) and prints a short report. Exit status 0 only if every check passed.
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from . import IMPLEMENTATION
from .store import GetStatus, MessageStore

TOPICS = ("OrderEvents", "PaymentEvents", "AuditLog")
TAGS = ("Created", "Paid", "Shipped", "Cancelled")
QUEUES = 4


def run(directory: Path, n: int, seed: int = 7,
        commitlog_file_size: int = 64 * 1024 * 1024) -> dict[str, object]:
    if directory.exists():
        shutil.rmtree(directory)
    rnd = random.Random(seed)
    sent: dict[tuple[str, int], list[tuple[bytes, str, str]]] = {}
    checks: list[tuple[str, bool]] = []
    t0 = time.perf_counter()
    with MessageStore(directory, commitlog_file_size=commitlog_file_size, cq_file_size=300_000 * 20) as store:
        i = 0
        while i < n:
            topic = rnd.choice(TOPICS)
            q = rnd.randrange(QUEUES)
            lst = sent.setdefault((topic, q), [])
            if rnd.random() < 0.2:
                k = min(rnd.randrange(2, 50), n - i)
                tag = rnd.choice(TAGS)
                bodies = [f"{topic}:{i + j}:".encode() + rnd.randbytes(40) for j in range(k)]
                store.put_batch(topic, bodies, q, tags=tag, keys=[f"order-{i + j}" for j in range(k)])
                lst.extend((b, tag, f"order-{i + j}") for j, b in enumerate(bodies))
                i += k
            else:
                tag = rnd.choice(TAGS)
                body = f"{topic}:{i}:".encode() + rnd.randbytes(rnd.randrange(0, 300))
                store.put(topic, body, q, tags=tag, keys=[f"order-{i}", f"user-{i % 97}"])
                lst.append((body, tag, f"order-{i}"))
                i += 1
        t_write = time.perf_counter() - t0

        t1 = time.perf_counter()
        consumed = 0
        per_topic: Counter[str] = Counter()
        ok = True
        for (topic, q), lst in sent.items():
            offset = 0
            while True:
                r = store.get_messages("demo-group", topic, q, offset, 32)
                if r.status != GetStatus.FOUND:
                    break
                for m in r.messages:
                    body, tag, _key = lst[m.queue_offset]
                    ok &= m.body == body and m.tags == tag
                consumed += r.message_count
                per_topic[topic] += r.message_count
                offset = r.next_begin_offset
            store.commit_offset("demo-group", topic, q, offset)
            ok &= offset == len(lst)
        t_read = time.perf_counter() - t1
        checks.append(("every message consumed intact, in queue order", ok and consumed == n))

        probe = [(t, q, lst[rnd.randrange(len(lst))]) for (t, q), lst in list(sent.items())[:8]]
        found = all(any(m.body == body for m in store.query_by_key(t, key)) for t, q, (body, _tag, key) in probe)
        checks.append(("query by key finds the message", found))
        topic, q = next(iter(sent))
        first = store.get_messages("g", topic, q, 0, 1).messages[0]
        checks.append(("offset by time finds the first message",
                       store.offset_by_time(topic, q, first.store_timestamp) == 0))

    with MessageStore(directory) as store:
        survived = all(store.max_offset(t, q) == len(lst) for (t, q), lst in sent.items())
        survived &= all(store.fetch_offset("demo-group", t, q) == len(lst) for (t, q), lst in sent.items())
        checks.append(("reopened store has every message and committed offset", survived))
        end = store.commitlog.max_offset
    return {"messages": n, "bytes": end, "write_s": t_write, "read_s": t_read,
            "per_topic": dict(per_topic), "checks": checks}


def run_spark(directory: Path, per_topic: dict[str, int]) -> dict[str, object]:
    """The Spark pipeline over the store in local mode: per-topic counts and bytes through the
    ``rmq`` data source, a pushed-down topic filter, and the parallel CRC verification job."""
    import tempfile

    from .spark import local_session, read_store
    from .spark.maintenance import verify_and_rebuild

    with tempfile.TemporaryDirectory(prefix="rmqcore-spark-") as tmp:
        spark = local_session(tmp, app="rmqcore-demo")
        try:
            read_store(spark, str(directory)).groupBy("topic").count().collect()  # warm-up (JIT, workers)
            t0 = time.perf_counter()
            rows = read_store(spark, str(directory)).groupBy("topic").count().collect()
            t_read = time.perf_counter() - t0
            counts = {r["topic"]: r["count"] for r in rows}
            topic = sorted(per_topic)[0]
            pushed = read_store(spark, str(directory)).filter(f"topic = '{topic}'").count()
            report = verify_and_rebuild(spark, str(directory))
        finally:
            spark.stop()
    checks = [
        ("Spark reads every message, counts per topic agree", counts == per_topic),
        ("pushed-down topic filter returns that topic's messages", pushed == per_topic[topic]),
        ("Spark CRC verification of every CommitLog file finds no problem", report.ok),
    ]
    return {"counts": counts, "read_s": t_read, "checks": checks}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rmqcore.demo", description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="rmqcore-data", help="store directory (replaced)")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark pipeline")
    args = ap.parse_args(argv)
    r: dict[str, Any] = run(Path(args.dir), args.messages)
    if not args.no_spark:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            print("rmqcore demo: pyspark is not installed (pip install -e '.[spark]'); use --no-spark to skip",
                  file=sys.stderr)
            return 2
        sr: dict[str, Any] = run_spark(Path(args.dir), r["per_topic"])
        r["checks"] = list(r["checks"]) + list(sr["checks"])
        r["spark_read_s"] = sr["read_s"]
    print(f"rmqcore demo ({IMPLEMENTATION} kernels), store at {args.dir}")
    print(f"  produced {r['messages']} messages ({r['bytes']} bytes of CommitLog) in {r['write_s']:.2f}s, "
          f"{r['messages'] / r['write_s']:,.0f} msg/s including Python workload generation")
    print(f"  consumed all queues in {r['read_s']:.2f}s")
    for t, c in sorted(r["per_topic"].items()):
        print(f"  {t:<14} {c:>8} messages")
    if "spark_read_s" in r:
        print(f"  Spark (local mode, warm) read and grouped all messages in {r['spark_read_s']:.2f}s "
              f"({r['messages'] / r['spark_read_s']:,.0f} rows/s)")
    failed = 0
    for name, ok in r["checks"]:
        print(f"  [{'ok' if ok else 'FAILED'}] {name}")
        failed += not ok
    print("  checks passed" if not failed else f"  {failed} checks FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
