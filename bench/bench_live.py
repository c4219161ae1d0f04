"""Live consumers: writer-to-follower latency across two processes, a follower's read throughput on
a live store (beside its writer, and catching up), the in-process wake latency of
``get_messages(wait=)``, what an idle writer store costs the timing of the thread beside it, the put
that needs a new consume-queue file, and the same wake-ups with no Python and no store (the floor
under the first).

Run: ``python bench/bench_live.py`` (all seven; ``--help`` for the knobs), e.g.
``python bench/bench_live.py latency --rates 10000,100000,1000000 --seconds 3``.

* ``latency``: a writer process puts one message at a time at a fixed rate (open loop: message i is
  due at ``t0 + i / rate``; the writer never waits for the follower, and a put that is late goes out
  at once). Each body carries its due time (CLOCK_MONOTONIC, shared by the processes), so the
  latency is measured from when the message was due, not when it was sent: a stall of the writer
  counts for every message it delayed (no coordinated omission). A follower process
  (``MessageStore(read_only=True, follow=True)``) pulls with ``wait=`` and stamps each batch as it
  gets it. Reported: p50, p99, p99.9, max (us), the rate the writer achieved, how late the writer's
  own puts returned after their due times (``writer_late_p50_us``, ``_p99_us``: a latency no follower
  can beat), the latency from each put's return to the follower's pull (``deliver_p50_us``,
  ``_p99_us``: the store's part, the writer's lateness taken out), how late the same paced loop runs
  with no store at all, just before (``host_late_p99_us``: what this host allows a Python loop
  keeping that cadence), and the follower's CPU time per second of the run (``follower_cpu``: what
  its waits' spinning costs, ``--wait-spin``).
  The writer's own dispatch publishes the units: its reput thread (``--writer-dispatch auto``, the default;
  between puts the writer spins in Python holding the GIL, which the reput thread needs between
  its runs), its put loop calling ``dispatch()`` after each put (``inline``), or each put itself
  (``put``: ``dispatch="put"``, the unit written and its waiters woken in the put's native call).
* ``throughput``: a writer puts batches of 1000 100-byte messages as fast as it can for a number of
  seconds, while a follower pulls (``max_msgs`` 4096, no decoding: offsets and sizes) until it has
  every message (how many: 0.3 s of puts first, scaled to ``--seconds``). Reported: the writer's
  and the follower's rates, how far behind the follower ended (its lag when the writer stopped),
  their CPU-seconds a second, and the same puts into a store of its own with no follower
  (``writer_solo_msgs_per_s``: before or after, alternating run to run), what a follower costs
  the writer.
* ``catchup``: the writer puts ``--catchup-msgs`` (batches of 1000 100-byte messages) and stays
  open; then a follower process opens the store and pulls them all as ``throughput``'s follower
  does. Reported: the follower's rate and its CPU per message: how far ahead of any writer a
  follower that fell behind (or started late) can read.
* ``wake``: in one process, a thread waits in ``get_messages(wait=)``; the main thread puts one
  message every 2 ms (each put finds the waiter asleep). Latency: from before the put to the
  waiter's return.
* ``idle``: what an open writer store costs the timing of the Python thread beside it, and what
  the host allows: the ``latency`` writer's paced loop (100k/s, ``--seconds`` a run) with no work
  and a store open and idle in the process (``open``: its flush and warm-ahead threads, which take
  the GIL when they wake), with no work and no store (``none``), and with ~1 us of plain Python
  per step and no store (``work``: a put's cost here, so the host's slow phases show as they do
  to a writer), 4 rounds, alternated. Reported: p99 and max lateness of each run (us), and the
  median p99 of each side.
* ``roll``: the puts around a consume-queue roll (the last unit of a file, the first of the next,
  one more; ``--roll-units`` per file, 300k as RocketMQ's default), on a store whose spare
  consume-queue file is ready (``spare``, spares.py) and on one whose spares were closed, so the
  queue creates its file itself (``create``), 2 rolls per store, ``--rounds`` stores each,
  alternated. Reported: the median time of the three puts (us) on each side, and every run's.

* ``floor``: ``bench/wake_floor.c``, built here with the C compiler (``$CC``, else ``cc``): a
  writer process and a waiter process in C, at each of ``--rates`` for ``--seconds``, the writer
  bumping a wake slot with ``csrc/rmq_notify.h``'s ``rmq_notify_bump`` after each message and the
  waiter sleeping in its ``rmq_notify_wait_spin`` (``--wait-spin``, 0 by default; ``--pin`` as for
  ``latency``). Reported as ``latency`` reports (p50 ... max, ``writer_late_p99_us``,
  ``host_late_p99_us``): what the wake-up itself costs on this host, which no Python can beat.

``--writer-dispatch`` applies to the first six (``inline`` to ``latency`` only: the others use ``auto``
then).

The machine's load is printed with each result: figures on a shared machine are noisy; compare
by ratio, interleaved.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

# OpenBLAS's worker threads spin for a while after numpy's first BLAS call: on a small machine that
# is CPU the writer or the follower needs (set before numpy loads; the spawned followers inherit it)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402 - after the environment above

TOPIC = "LiveBench"
BODY_PAD = b"p" * 92  # 8-byte due time + 92 = 100-byte bodies
BODY_AT = 88  # a record's body starts here (IPv4 hosts: 84 header bytes + BODYLENGTH)
_TS = struct.Struct("<q")
CASES = ("latency", "throughput", "catchup", "wake", "idle", "roll", "floor")


def _load() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def _pcts(lat_ns: np.ndarray) -> dict[str, float]:
    if not len(lat_ns):
        return {"n": 0}
    us = lat_ns / 1000.0
    return {"n": int(len(us)), "p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99)),
            "p99.9_us": float(np.percentile(us, 99.9)), "max_us": float(us.max())}


def _store_kwargs() -> dict[str, Any]:
    return {"commitlog_file_size": 256 * 1024 * 1024, "cq_file_size": 300_000 * 20}


def _fine_timer_slack() -> None:
    """Linux: 1 us of timer slack for this thread (default 50 us), so short sleeps end on time."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


def _pin(cpu: int | None) -> set[int] | None:
    """Linux: run this thread (and the threads it starts) on ``cpu`` only; returns the CPUs it had."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return None
    had = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    return had


# -- latency across processes -------------------------------------------------------------------------
def _paced(n: int, rate: int, step: Any, t0: int | None = None) -> np.ndarray:
    """Call ``step(due)`` at ``rate`` per second, ``n`` times (open loop: each at its due time, however
    late the one before returned); how late each call returned after its due time (ns)."""
    period = 1_000_000_000 // rate
    now = time.monotonic_ns
    sleep = time.sleep
    t0 = now() + 1_000_000 if t0 is None else t0
    late = np.empty(n, dtype=np.int64)
    for i in range(n):
        due = t0 + i * period
        ahead = due - now()
        if ahead > 60_000:  # sleep most of the gap (a spinning writer takes a core the others need)
            sleep((ahead - 40_000) / 1e9)
        while now() < due:
            pass
        step(due)
        late[i] = now() - due
    return late


def _follower_latency(path: str, n: int, ready: Any, out: Any, impl: str | None, spin: float | None,
                      cpu: int | None = None) -> None:
    from rmqcore.live import NotifyFile
    from rmqcore.store import MessageStore

    _pin(cpu)
    if spin is not None:
        NotifyFile.wait_spin = spin

    s = MessageStore(path, read_only=True, follow=True, impl=impl, max_transfer_count_in_memory=4096,
                     max_transfer_bytes_in_memory=64 << 20)
    lat = np.empty(n, dtype=np.int64)
    got = 0
    off = 0
    ready.set()
    deadline = time.monotonic() + 120
    cpu0, wall0 = time.process_time(), time.monotonic()
    while got < n and time.monotonic() < deadline:
        r = s.get_messages("bench", TOPIC, 0, off, 4096, wait=1.0)
        now = time.monotonic_ns()
        k = r.message_count
        if not k:
            continue
        with s.record_views(r.physical_offsets) as views:
            for v in views:
                if got < n:
                    lat[got] = now - _TS.unpack_from(v, BODY_AT)[0]
                    got += 1
        off = r.next_begin_offset
    cpu = (time.process_time() - cpu0) / (time.monotonic() - wall0)
    s.close()
    out.put((lat[:got].tobytes(), cpu))


def latency(rate: int, seconds: float, impl: str | None = None, writer: str = "auto",
            spin: float | None = None, pin: bool = False) -> dict[str, Any]:
    from rmqcore.live import NotifyFile
    from rmqcore.store import MessageStore

    ctx = mp.get_context("spawn")
    d = tempfile.mkdtemp(prefix="rmqbench-live-")
    had = _pin(0 if pin else None)  # the writer (and its reput thread) on CPU 0, the follower on CPU 1
    try:
        w = MessageStore(d, impl=impl, dispatch=writer, **_store_kwargs())
        w.put(TOPIC, _TS.pack(time.monotonic_ns()) + BODY_PAD, 0)  # the queue exists before the follower
        w.dispatch()
        w.warm_up()
        n = int(rate * seconds)
        ready, out = ctx.Event(), ctx.Queue()
        p = ctx.Process(target=_follower_latency, args=(d, n + 1, ready, out, impl, spin, 1 if pin else None))
        p.start()
        ready.wait(60)
        time.sleep(0.3)
        inline = writer == "inline"
        put, dispatch = w.put, w.dispatch
        pack = _TS.pack

        def step(due: int) -> None:
            put(TOPIC, pack(due) + BODY_PAD, 0)  # dispatch="put": this publishes the unit itself
            if inline:  # the writer's thread dispatches the record (no reput thread to hand it to)
                dispatch()

        _fine_timer_slack()
        floor = _paced(min(n, 100_000), rate, lambda due: None)  # the same loop, no store: this host's floor
        t0 = time.monotonic_ns() + 1_000_000
        late = _paced(n, rate, step, t0)  # when each put (and its dispatch) returned, after its due time
        sent_s = (time.monotonic_ns() - t0) / 1e9
        got, cpu = out.get(timeout=180)
        lat = np.frombuffer(got, dtype=np.int64)
        p.join(30)
        w.close()
        lat = lat[1:]  # the message put before the follower opened
        deliver = lat - late[: len(lat)]  # from the put's return to the follower's pull
        return {"rate": rate, "writer": writer, "wait_spin_us": round((NotifyFile.wait_spin if spin is None
                                                                       else spin) * 1e6),
                "achieved_rate": round(n / sent_s), **_pcts(lat),
                "writer_late_p50_us": round(float(np.percentile(late, 50)) / 1000, 1),
                "writer_late_p99_us": round(float(np.percentile(late, 99)) / 1000, 1),
                "deliver_p50_us": round(float(np.percentile(deliver, 50)) / 1000, 1),
                "deliver_p99_us": round(float(np.percentile(deliver, 99)) / 1000, 1),
                "host_late_p99_us": round(float(np.percentile(floor, 99)) / 1000, 1),
                "follower_cpu": round(cpu, 2),
                "pinned": pin, "load": _load()}
    finally:
        if had is not None:
            os.sched_setaffinity(0, had)
        shutil.rmtree(d, ignore_errors=True)


def floor(rate: int, seconds: float, pin: bool = False, spin_us: float = 0.0) -> dict[str, Any]:
    """``bench/wake_floor.c`` at ``rate`` (the module's docstring): built in a temporary directory."""
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory(prefix="rmqbench-floor-") as d:
        exe = os.path.join(d, "wake_floor")
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-I", os.path.join(here, "..", "csrc"), "-o", exe,
                        os.path.join(here, "wake_floor.c")], check=True)
        out = subprocess.run([exe, str(rate), str(seconds), "1" if pin else "0", str(spin_us)],
                             capture_output=True, text=True, check=True).stdout.split()
    res: dict[str, Any] = {}
    for kv in out[1:]:  # "wake_floor k=v k=v ..."
        k, v = kv.split("=")
        res[k] = float(v) if "." in v else int(v)
    return {**res, "load": _load()}


# -- follower throughput ------------------------------------------------------------------------------
def _follower_throughput(path: str, total: int, ready: Any, out: Any, impl: str | None) -> None:
    from rmqcore.store import MessageStore

    s = MessageStore(path, read_only=True, follow=True, impl=impl, max_transfer_count_in_memory=4096,
                     max_transfer_bytes_in_memory=64 << 20, max_transfer_count_on_disk=4096,
                     max_transfer_bytes_on_disk=64 << 20)
    ready.set()
    got = off = 0
    t_first = None
    cpu0 = time.process_time()
    deadline = time.monotonic() + 300
    while got < total and time.monotonic() < deadline:
        r = s.get_messages("bench", TOPIC, 0, off, 4096, wait=1.0)
        k = r.message_count
        if k:
            if t_first is None:
                t_first = time.monotonic()
            got += k
            off = r.next_begin_offset
    t_end = time.monotonic()
    cpu = time.process_time() - cpu0
    s.close()
    out.put((got, t_first or t_end, t_end, cpu))


def _store_dispatch(writer: str) -> str:
    """The store's ``dispatch`` for ``--writer-dispatch`` outside ``latency`` (there ``inline`` is the
    loop's own ``dispatch()`` call; the others use ``auto`` for it)."""
    return "auto" if writer == "inline" else writer


def _writer_store(d: str, impl: str | None, writer: str) -> Any:
    from rmqcore.store import MessageStore

    w = MessageStore(d, impl=impl, dispatch=_store_dispatch(writer), commitlog_file_size=1 << 30,
                     cq_file_size=300_000 * 20)
    w.warm_up()
    return w


def _put_all(w: Any, total: int, bodies: list[bytes]) -> tuple[float, float]:
    """Put ``total`` messages in batches of ``bodies``; (seconds, CPU-seconds of the process)."""
    t0, c0 = time.monotonic(), time.process_time()
    for _ in range(total // len(bodies)):
        w.put_batch(TOPIC, bodies, 0)
    return time.monotonic() - t0, time.process_time() - c0


_throughput_runs = 0  # alternates which of a throughput run's two writers goes first


def throughput(seconds: float, batch: int = 1000, impl: str | None = None,
               writer: str = "auto") -> dict[str, Any]:
    global _throughput_runs
    ctx = mp.get_context("spawn")
    bodies = [b"b" * 100] * batch
    solo_first = _throughput_runs % 2 == 0
    _throughput_runs += 1
    d = tempfile.mkdtemp(prefix="rmqbench-live-")
    try:
        w = _writer_store(d, impl, writer)
        # how many batches fit the time: measured on 0.3 s of puts into a scratch topic
        t = time.monotonic()
        k = 0
        while time.monotonic() - t < 0.3:
            w.put_batch(TOPIC + "Warm", bodies, 0)
            k += 1
        total = int(k * batch / (time.monotonic() - t) * seconds) // batch * batch

        def solo() -> float:
            d2 = tempfile.mkdtemp(prefix="rmqbench-live-")
            try:
                w2 = _writer_store(d2, impl, writer)
                el, _ = _put_all(w2, total, bodies)
                w2.close()
                return el
            finally:
                shutil.rmtree(d2, ignore_errors=True)  # its dirty pages go with it, unwritten

        solo_s = solo() if solo_first else 0.0
        ready, out = ctx.Event(), ctx.Queue()
        p = ctx.Process(target=_follower_throughput, args=(d, total, ready, out, impl))
        p.start()
        ready.wait(60)
        time.sleep(0.3)
        el, cpu = _put_all(w, total, bodies)
        t1 = time.monotonic()
        got, f0, f1, fcpu = out.get(timeout=600)
        p.join(30)
        w.close()
        if not solo_first:
            solo_s = solo()
        return {"writer": _store_dispatch(writer), "messages": total,
                "writer_solo_msgs_per_s": round(total / solo_s), "writer_msgs_per_s": round(total / el),
                "follower_msgs_per_s": round(got / max(f1 - f0, 1e-9)), "follower_got": got,
                "follower_done_after_writer_s": round(f1 - t1, 3),
                "writer_cpu": round(cpu / el, 2), "follower_cpu": round(fcpu / max(f1 - f0, 1e-9), 2),
                "load": _load()}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def catchup(total: int, impl: str | None = None, writer: str = "auto") -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    total = total // 1000 * 1000  # whole batches
    d = tempfile.mkdtemp(prefix="rmqbench-live-")
    try:
        w = _writer_store(d, impl, writer)
        _put_all(w, total, [b"b" * 100] * 1000)
        w.dispatch()
        ready, out = ctx.Event(), ctx.Queue()
        p = ctx.Process(target=_follower_throughput, args=(d, total, ready, out, impl))
        p.start()
        got, f0, f1, fcpu = out.get(timeout=600)
        p.join(30)
        w.close()
        return {"writer": _store_dispatch(writer), "messages": got,
                "follower_msgs_per_s": round(got / max(f1 - f0, 1e-9)),
                "follower_cpu_ns_per_msg": round(fcpu / max(got, 1) * 1e9, 1), "load": _load()}
    finally:
        shutil.rmtree(d, ignore_errors=True)


# -- in-process wake ----------------------------------------------------------------------------------
def wake(n: int, impl: str | None = None, writer: str = "auto") -> dict[str, Any]:
    from rmqcore.store import MessageStore

    d = tempfile.mkdtemp(prefix="rmqbench-live-")
    try:
        s = MessageStore(d, impl=impl, dispatch=_store_dispatch(writer), **_store_kwargs())
        s.put(TOPIC, b"x", 0)
        lat = np.empty(n, dtype=np.int64)
        sent = np.zeros(n, dtype=np.int64)
        done = threading.Event()

        def waiter() -> None:
            off = 1
            got = 0
            while got < n:
                r = s.get_messages("bench", TOPIC, 0, off, 32, wait=5.0)
                now = time.monotonic_ns()
                for q in r.queue_offsets:
                    lat[got] = now - sent[q - 1]
                    got += 1
                off = r.next_begin_offset
            done.set()

        th = threading.Thread(target=waiter)
        th.start()
        for i in range(n):
            time.sleep(0.002)
            sent[i] = time.monotonic_ns()
            s.put(TOPIC, b"x", 0)
        done.wait(60)
        th.join()
        s.close()
        return {"writer": _store_dispatch(writer), "messages": n, **_pcts(lat), "load": _load()}
    finally:
        shutil.rmtree(d, ignore_errors=True)


# -- an idle store's cost to the thread beside it ---------------------------------------------------
_WORK_ITEMS = list(range(12))


def _python_work(due: int) -> None:
    """~1 us of plain Python here (a body packed, bytes joined, a short sum): what a put costs."""
    _TS.pack(due) + BODY_PAD
    t = 0
    for x in _WORK_ITEMS:
        t += x


def idle(seconds: float, impl: str | None = None, writer: str = "auto", rounds: int = 4) -> dict[str, Any]:
    from rmqcore.store import MessageStore

    n = int(100_000 * seconds)
    sides = ("open", "none", "work")
    runs: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    d = tempfile.mkdtemp(prefix="rmqbench-live-")
    try:
        for i in range(rounds):
            for side in sides if i % 2 == 0 else sides[::-1]:
                s = None
                if side == "open":
                    s = MessageStore(d, impl=impl, dispatch=_store_dispatch(writer), **_store_kwargs())
                    s.put(TOPIC, b"x", 0)  # its CommitLog file made: the warm-ahead thread runs
                    time.sleep(0.2)
                try:
                    us = _paced(n, 100_000, _python_work if side == "work" else lambda due: None) / 1000.0
                finally:
                    if s is not None:
                        s.close()
                runs[side].append((float(np.percentile(us, 99)), float(us.max())))
        out: dict[str, Any] = {"writer": _store_dispatch(writer)}
        for side, rs in runs.items():
            out[f"{side}_p99_us"] = round(float(np.median([r[0] for r in rs])), 1)
            out[f"{side}_runs_p99_max_us"] = " ".join(f"{a:.0f}/{b:.0f}" for a, b in rs)
        return {**out, "load": _load()}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def roll(units: int, impl: str | None = None, writer: str = "auto", rounds: int = 4) -> dict[str, Any]:
    from rmqcore.store import MessageStore

    body = b"r" * 100
    runs: dict[str, list[float]] = {"spare": [], "create": []}
    for i in range(rounds):
        for side in ("spare", "create") if i % 2 == 0 else ("create", "spare"):
            d = tempfile.mkdtemp(prefix="rmqbench-roll-")
            try:
                with MessageStore(d, impl=impl, dispatch=_store_dispatch(writer),
                                  **{**_store_kwargs(), "cq_file_size": units * 20}) as s:
                    if side == "create":
                        s._services.spares.close()
                    s.put(TOPIC, body, 0)
                    s.warm_up()
                    for _ in range(2):
                        for _ in range(units - 3):
                            s.put(TOPIC, body, 0)
                        s.dispatch()
                        time.sleep(0.2)  # the spare made, the warm-ahead threads done
                        t = time.perf_counter_ns()
                        s.put(TOPIC, body, 0)
                        s.put(TOPIC, body, 0)
                        s.put(TOPIC, body, 0)
                        s.dispatch()
                        runs[side].append((time.perf_counter_ns() - t) / 1000.0)
            finally:
                shutil.rmtree(d, ignore_errors=True)
    out: dict[str, Any] = {"writer": _store_dispatch(writer), "units": units}
    for side, rs in runs.items():
        out[f"{side}_us"] = round(float(np.median(rs)), 1)
        out[f"{side}_runs_us"] = " ".join(f"{r:.0f}" for r in rs)
    return {**out, "load": _load()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="*", metavar="CASE", help=f"any of {', '.join(CASES)} (default: all)")
    ap.add_argument("--rates", default="10000,100000,1000000", help="latency, floor: msg/s, comma-separated")
    ap.add_argument("--seconds", type=float, default=3.0, help="latency, throughput, idle: seconds per run")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each case")
    ap.add_argument("--wake-n", type=int, default=2000, help="wake: messages")
    ap.add_argument("--catchup-msgs", type=int, default=4_000_000, help="catchup: messages behind")
    ap.add_argument("--roll-units", type=int, default=300_000, help="roll: units per consume-queue file")
    ap.add_argument("--rounds", type=int, default=4, help="roll: stores of each side")
    ap.add_argument("--impl", choices=["native", "pure"], default=None)
    ap.add_argument("--writer-dispatch", choices=["auto", "inline", "put"], default="auto",
                    help="the writer's reput thread publishes (auto), its put loop calls dispatch() after "
                         "each put (inline: latency only), or each put publishes its unit (put)")
    ap.add_argument("--wait-spin", type=float, default=None, metavar="US",
                    help="latency, floor: the follower's NotifyFile.wait_spin in microseconds (0: sleep "
                         "at once; default: the library's, and 0 for floor)")
    ap.add_argument("--pin", action="store_true",
                    help="latency, floor: the writer process on CPU 0, the follower on CPU 1 (Linux)")
    ap.add_argument("--json", action="store_true", help="one JSON object per result")
    args = ap.parse_args(argv)
    # a SIGTERM ends the run as Ctrl-C would: the cases' ``finally`` blocks remove their stores
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(128 + signal.SIGTERM))
    for what in args.what:  # (choices= rejects the default of a nargs="*" positional)
        if what not in CASES:
            ap.error(f"unknown case {what!r}: choose from {', '.join(CASES)}")
    for _ in range(args.repeat):
        for what in args.what or CASES:
            if what == "latency":
                results = [("latency", latency(int(r), args.seconds, args.impl, args.writer_dispatch,
                                               None if args.wait_spin is None else args.wait_spin / 1e6,
                                               args.pin))
                           for r in args.rates.split(",")]
            elif what == "throughput":
                results = [("throughput", throughput(args.seconds, impl=args.impl,
                                                     writer=args.writer_dispatch))]
            elif what == "catchup":
                results = [("catchup", catchup(args.catchup_msgs, args.impl, args.writer_dispatch))]
            elif what == "wake":
                results = [("wake", wake(args.wake_n, args.impl, args.writer_dispatch))]
            elif what == "idle":
                results = [("idle", idle(args.seconds, args.impl, args.writer_dispatch))]
            elif what == "roll":
                results = [("roll", roll(args.roll_units, args.impl, args.writer_dispatch, args.rounds))]
            else:
                results = [("floor", floor(int(r), args.seconds, args.pin, args.wait_spin or 0.0))
                           for r in args.rates.split(",")]
            for name, res in results:
                if args.json:
                    print(json.dumps({"bench": name, **res}))
                else:
                    print(name, " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                                         for k, v in res.items()))
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
