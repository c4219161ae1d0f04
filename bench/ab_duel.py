"""Interleaved A/B of the store's hot single calls between two builds of rmqcore.

Run: ``python bench/ab_duel.py A_PYTHON B_PYTHON [--cases reads,dispatch] [--rounds 20] [--calls 1000]``,
where each PYTHON is the interpreter of a virtualenv with one build installed (a worktree's
``.venv/bin/python``). Each build runs in a process of its own, sets up its stores once, then the
two take turns: every round runs each case once in A and once in B (the order alternating), a block
of ``--calls`` calls each. On a shared, noisy machine this compares by ratio with A and B a few
milliseconds apart, instead of minutes apart as whole benchmark files are.

Reported per case: ns per call, the minimum and the median over the rounds for each build, and B/A
of both. The cases use only public calls (and, for the kernel case, the dispatch kernel's
``select_units``), so older builds run them too.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

CASE_SETS = ("reads", "dispatch", "follow")


def _reads() -> tuple[dict[str, Callable[[], Any]], Callable[[], None]]:
    """Hot reads of a store of 100k messages in one queue, each with its own key."""
    from rmqcore.store import MessageStore

    d = tempfile.mkdtemp(prefix="rmqduel-")
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    s = MessageStore(d, dispatch="inline", commitlog_file_size=64 << 20, cq_file_size=20 * 300_000,
                     index_slots=200_000, index_entries=800_000, clock=lambda: next(clock))
    for i in range(0, 100_000, 100):
        s.put_batch("BenchTopic", [b"x" * 100] * 100, 0, keys=[f"k{j}" for j in range(i, i + 100)])
    s.dispatch()
    get, st, q, obt, qk = s.get_messages, s.store_time_of, s.query_offsets, s.offset_by_time, s.query_by_key
    phys = get("g", "BenchTopic", 0, 5000, 1).physical_offsets[0]
    cq = s.consume_queue("BenchTopic", 0)
    cl = s.commitlog
    mn, off0 = cl.min_offset, cl.min_offset
    ts = 1_700_000_000_500
    cases: dict[str, Callable[[], Any]] = {
        "get_messages(32)": lambda: get("g", "BenchTopic", 0, 640, 32),
        "get_messages(1)": lambda: get("g", "BenchTopic", 0, 640, 1),
        "get_messages past end": lambda: get("g", "BenchTopic", 0, 100_000, 32),
        "store_time_of": lambda: st(phys),
        "query_offsets": lambda: q("BenchTopic", "k777"),
        "query_by_key": lambda: qk("BenchTopic", "k777"),
        "query_by_key, no such key": lambda: qk("BenchTopic", "nokey"),
        "offset_by_time": lambda: obt("BenchTopic", 0, ts),
        "ConsumeQueue.offset_by_time": lambda: cq.offset_by_time(ts, st, mn),
        "CommitLog.read_batch(8192)": lambda: cl.read_batch(off0, 8192),
    }

    def cleanup() -> None:
        s.close()
        shutil.rmtree(d)

    return cases, cleanup


def _dispatch() -> tuple[dict[str, Callable[[], Any]], Callable[[], None]]:
    """A put and the dispatch of its one record, as an embedded queue does per message."""
    from rmqcore.store import MessageStore

    d = tempfile.mkdtemp(prefix="rmqduel-")
    s = MessageStore(d, dispatch="inline", commitlog_file_size=256 << 20, cq_file_size=20 * 1_000_000)
    s.put("T", b"x" * 100, 0)
    s.dispatch()
    s.warm_up()
    put, disp, get = s.put, s.dispatch, s.get_messages
    body = b"x" * 100

    def put_dispatch() -> None:
        put("T", body, 0)
        disp()

    def put_pull() -> None:
        get("g", "T", 0, put("T", body, 0).queue_offset, 32)

    def cleanup() -> None:
        s.close()
        shutil.rmtree(d)

    return {"put": lambda: put("T", body, 0), "put + dispatch()": put_dispatch, "dispatch() of nothing": disp,
            "put + get_messages (dispatches it)": put_pull}, cleanup


def _follow() -> tuple[dict[str, Callable[[], Any]], Callable[[], None]]:
    """A follower's pull of each new message (``bench_live.py latency``'s loop without the processes):
    a ``dispatch="put"`` writer puts one message, a ``follow=True`` store in the same process pulls
    it with ``wait=`` (found at once) and reads its record view."""
    import struct

    from rmqcore.store import MessageStore

    d = tempfile.mkdtemp(prefix="rmqduel-")
    w = MessageStore(d, dispatch="put", commitlog_file_size=256 << 20, cq_file_size=20 * 2_000_000)
    w.put("T", b"x" * 100, 0)
    w.warm_up()
    f = MessageStore(d, read_only=True, follow=True, max_transfer_count_in_memory=4096,
                     max_transfer_bytes_in_memory=64 << 20)
    put, get, views = w.put, f.get_messages, f.record_views
    body = b"x" * 100
    unpack = struct.Struct("<q").unpack_from
    at = [w.max_offset("T", 0)]

    def pull() -> Any:
        put("T", body, 0)
        r = get("g", "T", 0, at[0], 4096, wait=1.0)
        at[0] = r.next_begin_offset
        return r

    def pull_view() -> None:
        r = pull()
        with views(r.physical_offsets) as vs:
            for v in vs:
                unpack(v, 88)

    def cleanup() -> None:
        f.close()
        w.close()
        shutil.rmtree(d)

    return {"put + follower pull (wait=)": pull, "put + follower pull + record view": pull_view}, cleanup


def worker(sets: list[str]) -> None:
    """Set the cases up, print their names (one line, tab-separated), then answer each ``INDEX N``
    line with the ns per call of N calls of that case."""
    cases: dict[str, Callable[[], Any]] = {}
    cleanups = []
    for name in sets:
        c, done = {"reads": _reads, "dispatch": _dispatch, "follow": _follow}[name]()
        cases.update(c)
        cleanups.append(done)
    fns = list(cases.values())
    pc = time.perf_counter_ns
    print("\t".join(cases), flush=True)
    try:
        for line in sys.stdin:
            i, n = (int(x) for x in line.split())
            f = fns[i]
            t = pc()
            for _ in range(n):
                f()
            print((pc() - t) / n, flush=True)
    finally:
        for done in cleanups:
            done()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="build A's Python")
    ap.add_argument("b", help="build B's Python")
    ap.add_argument("--cases", default=",".join(CASE_SETS), help=f"any of {', '.join(CASE_SETS)}")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--calls", type=int, default=1000, help="calls per block")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sets = [c for c in args.cases.split(",") if c]
    if any(c not in CASE_SETS for c in sets):
        ap.error(f"--cases takes {', '.join(CASE_SETS)}")
    if args.worker:
        worker(sets)
        return 0
    cmd = [__file__, "x", "x", "--worker", "--cases", ",".join(sets)]
    procs = [subprocess.Popen([py, *cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=tempfile.gettempdir()) for py in (args.a, args.b)]
    try:
        names = [p.stdout.readline().rstrip("\n").split("\t") for p in procs if p.stdout]
        if len(names) != 2 or names[0] != names[1] or names[0] == [""]:
            raise SystemExit(f"the builds set up different cases (or failed): {names}")
        got: list[tuple[list[float], list[float]]] = [([], []) for _ in names[0]]

        def ask(side: int, i: int) -> float:
            p = procs[side]
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(f"{i} {args.calls}\n")
            p.stdin.flush()
            return float(p.stdout.readline())

        for r in range(args.rounds):
            for i in range(len(names[0])):
                for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                    got[i][side].append(ask(side, i))
    finally:
        for p in procs:
            if p.stdin:
                p.stdin.close()
            p.wait(60)
    heads = ("A min", "B min", "B/A", "A median", "B median", "B/A")
    print(f"{'case':36s} " + " ".join(f"{h:>{5 if h == 'B/A' else 9}s}" for h in heads) + "  ns/call")
    for name, (a, b) in zip(names[0], got):
        ma, mb, da, db = min(a), min(b), statistics.median(a), statistics.median(b)
        print(f"{name:36s} {ma:9.0f} {mb:9.0f} {mb / ma:5.2f} {da:9.0f} {db:9.0f} {db / da:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
