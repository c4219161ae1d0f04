"""Concurrency and resources: close() racing every call, one writer per store directory, and the
descriptors many consume queues need (issue 23)."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqcore.errors import ConfigError, OffsetOutOfRangeError, StoreClosedError, StoreLockedError
from rmqcore.store import GetStatus, MessageStore

GEOM = dict(commitlog_file_size=64 * 1024, cq_file_size=400, index_slots=50, index_entries=200)
# files roll now and then under the race's writes (each put thread writes at most 500 messages)
RACE_GEOM = dict(commitlog_file_size=64 * 1024, cq_file_size=20 * 200, index_slots=100, index_entries=500)


def _wait_for(cond: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


class _Blocking:
    """Stands in for a kernel module: ``name`` blocks on ``release`` once ``entered`` is set."""

    def __init__(self, real: Any, name: str) -> None:
        self._real, self._name = real, name
        self.entered, self.release = threading.Event(), threading.Event()

    def __getattr__(self, attr: str) -> Any:
        fn = getattr(self._real, attr)
        if attr != self._name:
            return fn

        def blocked(*a: Any, **k: Any) -> Any:
            self.entered.set()
            assert self.release.wait(60)
            return fn(*a, **k)

        return blocked


def test_close_waits_for_a_call_under_way_and_refuses_new_ones(tmp_path: Path, impl) -> None:
    """close() seals the store at once (every new call, lookups included, raises StoreClosedError)
    and waits for a pull that is inside the kernel over a consume-queue map: the pull completes
    with its messages, and only then are the files let go. The store reopens cleanly."""
    s = MessageStore(tmp_path, impl=impl.name, **GEOM)
    for i in range(20):
        s.put("T", b"m%d" % i, 0, keys=f"k{i}")
    assert s.lookup("T", "k3") == b"m3"
    blocking = _Blocking(s._pull._kernel, "select_units")
    s._pull._kernel = blocking
    got: list[Any] = []
    puller = threading.Thread(target=lambda: got.append(s.get_messages("g", "T", 0, 0, 32)))
    puller.start()
    assert blocking.entered.wait(30)
    closer = threading.Thread(target=s.close)
    closer.start()
    _wait_for(lambda: getattr(getattr(s, "_gate", None), "sealed", False) or not closer.is_alive(),
              "close to seal the store")
    for call in (lambda: s.get_messages("g", "T", 0, 0), lambda: s.lookup("T", "k3"),
                 lambda: s.query_by_key("T", "k3"), lambda: s.put("T", b"late", 0),
                 lambda: s.commitlog.read(0), lambda: s.flush(), lambda: s.commit_offset("g", "T", 0, 1)):
        with pytest.raises(StoreClosedError):
            call()
    assert closer.is_alive()  # waiting for the pull, which holds a map
    blocking.release.set()
    puller.join(30)
    closer.join(30)
    assert not closer.is_alive() and not puller.is_alive()
    assert got[0].status == GetStatus.FOUND and got[0].message_count == 20
    assert not (tmp_path / "abort").exists()
    with MessageStore(tmp_path, impl=impl.name) as s2:
        assert s2.max_offset("T", 0) == 20 and s2.lookup("T", "k19") == b"m19"


def test_wait_dispatched_under_way_ends_when_the_store_closes(tmp_path: Path, impl) -> None:
    """wait_dispatched with nothing to dispatch it (inline mode, a lag left) raises StoreClosedError
    once close() begins, instead of holding close() for its whole timeout."""
    s = MessageStore(tmp_path, impl=impl.name, dispatch="inline", **GEOM)
    s.put("T", b"x", 0)
    out: list[BaseException] = []

    def waiter() -> None:
        try:
            s.wait_dispatched(120)
        except BaseException as e:  # noqa: BLE001 - asserted below
            out.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    _wait_for(lambda: s._gate.inflight == 1, "wait_dispatched to start")
    s.close()
    t.join(30)
    assert not t.is_alive() and len(out) == 1 and isinstance(out[0], StoreClosedError)
    assert not (tmp_path / "abort").exists()


# -- one writer per store directory ---------------------------------------------------------------------

def test_a_second_writer_in_this_process_is_refused(tmp_path: Path, impl) -> None:
    """The lock file's fcntl lock belongs to the process, so it did not stop a second writable open
    in the same process (both appended at the same offsets, one put lost): the directory, by any
    path to it, is refused while it is open for writing; read-only opens are not; close frees it."""
    d = tmp_path / "store"
    a = MessageStore(d, impl=impl.name, **GEOM)
    first = a.put("T", b"first", 0)
    (tmp_path / "link").symlink_to(d)
    for other in (d, tmp_path / "link", d / ".." / "store"):
        with pytest.raises(StoreLockedError, match="in this process"):
            MessageStore(other, impl=impl.name)
    with MessageStore(d, read_only=True, impl=impl.name) as ro:
        assert ro.commitlog.read(first.physical_offset).body == b"first"
    second = a.put("T", b"second", 0)
    a.close()
    with MessageStore(tmp_path / "link", impl=impl.name) as b:
        assert [m.body for m in b.get_messages("g", "T", 0, 0).messages] == [b"first", b"second"]
        assert second.physical_offset == first.physical_offset + first.size
    MessageStore(d, impl=impl.name).close()


def test_a_failed_open_undoes_its_lock(tmp_path: Path, impl) -> None:
    """An open refused by a config check leaves nothing behind: not the lock file it made, not the
    directory it made (they stayed), and not its place in the registry: the same directory opens at
    once with a good config. A lock file that was there before stays."""
    d = tmp_path / "new"
    with pytest.raises(ConfigError):
        MessageStore(d, impl=impl.name, commitlog_file_size=100)
    assert not d.exists()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "lock").write_bytes(b"lock")
    with pytest.raises(ConfigError):
        MessageStore(tmp_path / "old", impl=impl.name, commitlog_file_size=100)
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == ["lock"]
    with MessageStore(d, impl=impl.name, **GEOM) as s:
        s.put("T", b"x", 0)
    assert (d / "lock").is_file()


def test_asking_about_the_lock_in_the_writers_process_keeps_it(tmp_path: Path, impl) -> None:
    """``rmqcore info``'s lock query opens and closes the lock file, and closing any descriptor of
    it drops the process's fcntl lock: asked in the writer's own process, it answers from the
    registry, and another process is still refused."""
    from rmqcore.cli.state import lock_state as _lock_state

    with MessageStore(tmp_path, impl=impl.name, **GEOM):
        state = _lock_state(tmp_path)
        code = ("import sys\nfrom rmqcore.store import MessageStore\n"
                "from rmqcore.errors import StoreLockedError\n"
                f"try:\n    MessageStore({str(tmp_path)!r})\nexcept StoreLockedError:\n    sys.exit(7)\n")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert p.returncode == 7, p.stderr
        assert state == {"exists": True, "held": True, "pid": os.getpid()}


# -- descriptors -------------------------------------------------------------------------------------

@contextlib.contextmanager
def _fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on tmpfs where there is one (else ``tmp_path``), removed afterwards: the tests
    that open, sync and close thousands of files would spend most of their time on a disk."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    root = Path(tempfile.mkdtemp(prefix="rmqcore-test-", dir=shm))
    try:
        yield root
    finally:
        shutil.rmtree(root)


def _child(*args: str) -> dict[str, Any]:
    """Run ``__main__`` below with ``args`` in a process of its own (it lowers its descriptor limit)."""
    p = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"the child ended with {p.returncode}: {p.stderr[-3000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _ten_thousand_queues(impl: str, root: str) -> dict[str, Any]:
    """10,000 queues (100 topics x 100 queue ids) under ``ulimit -n 1024``: one keyed message each,
    every seventh queue pulled and key looked up; the store closed and reopened, every queue pulled
    and every tenth key looked up."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    geom = dict(commitlog_file_size=4 << 20, cq_file_size=20 * 16, index_slots=5000, index_entries=20000)
    out: dict[str, Any] = {}
    for phase in ("write", "reopen"):
        with MessageStore(root, impl=impl, **geom) as s:
            if phase == "write":
                for i in range(10_000):
                    s.put(f"T{i // 100}", b"m%d" % i, i % 100, keys=f"k{i}")
                assert s.wait_dispatched(120)
            step = 7 if phase == "write" else 1
            found = sum(s.get_messages("g", f"T{i // 100}", i % 100, 0).messages[0].body == b"m%d" % i
                        for i in range(0, 10_000, step))
            looked = sum(s.lookup(f"T{i // 100}", f"k{i}") == b"m%d" % i for i in range(0, 10_000, 10 * step))
            out[phase] = [found, looked, len(s.consume_queues), s._map_pool.mapped, s._map_pool.budget,
                          len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0]
    return out


@pytest.mark.slow  # 9 s native, 25 s pure on a busy 2-core machine: 10,000 files made, synced and reopened
def test_ten_thousand_queues_under_ulimit_1024(tmp_path: Path, impl) -> None:
    """Each consume-queue file held two descriptors: with 600 queues under ``ulimit -n 1024`` the
    reput thread died with EMFILE and no writable reopen succeeded. Now at most a quarter of the
    limit is mapped (the pool's budget, 256 here), the rest mapped again when used."""
    with _fast_dir(tmp_path) as root:
        out = _child("queues", impl.name, str(root / "store"))
    for phase, n in (("write", 7), ("reopen", 1)):
        found, looked, queues, mapped, budget, fds = out[phase]
        assert (found, looked, queues, budget) == (len(range(0, 10_000, n)), len(range(0, 10_000, 10 * n)),
                                                   10_000, 256), (phase, out)
        assert mapped <= budget and fds < 1024, (phase, out)


def _held_under(d: Path) -> int:
    """Descriptors of this process open on files under ``d`` (maps hold one each)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith(str(d))
        except OSError:
            pass
    return n


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_queue_files_beyond_the_budget_are_mapped_again_when_used(tmp_path: Path, impl) -> None:
    """With ``max_open_queue_files=8``, 60 queues: at most 8 consume-queue files hold a descriptor
    (the rest let go of their maps, dirty ones too) and each is mapped again when read, flushed or
    dispatched to; every message is there, after a reopen as well."""
    s = MessageStore(tmp_path, impl=impl.name, max_open_queue_files=8, **GEOM)
    try:
        for r in range(3):
            for q in range(60):
                s.put(f"T{q % 6}", b"m%d-%d" % (q, r), q // 6, keys=f"k{q}-{r}")
            s.dispatch()
            assert s._map_pool.mapped <= 8 and _held_under(tmp_path / "consumequeue") <= 8
        reopened = s._map_pool.reopened
        for q in range(60):
            got = s.get_messages("g", f"T{q % 6}", q // 6, 0)
            assert [m.body for m in got.messages] == [b"m%d-%d" % (q, r) for r in range(3)]
        assert s._map_pool.reopened > reopened and _held_under(tmp_path / "consumequeue") <= 8
        s.flush()  # syncs the queues whose maps were let go with unsynced units
        assert all(mf.flushed_position == mf.wrote_position for cq in s.consume_queues.values()
                   for mf in cq.queue.files)
    finally:
        s.close()
    with MessageStore(tmp_path, impl=impl.name, max_open_queue_files=8) as s2:
        assert s2.last_exit_ok and len(s2.consume_queues) == 60
        assert all(s2.max_offset(f"T{q % 6}", q // 6) == 3 for q in range(60))
        assert s2.lookup("T5", "k59-2") == b"m59-2" and _held_under(tmp_path / "consumequeue") <= 8


def _out_of_descriptors(impl: str, root: str) -> dict[str, Any]:
    """With every descriptor of the process taken (but the pool's), calls that need a file raise
    TooManyOpenFilesError and change nothing; once descriptors are free again the store works on,
    the reput thread included (it waited, it did not die)."""
    import errno
    import resource

    from rmqcore.errors import RmqError

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    out: dict[str, Any] = {}
    s = MessageStore(root, impl=impl, max_open_queue_files=16, **GEOM)
    for q in range(4):
        s.put("T", b"before%d" % q, q)
    s.commit_offset("g", "T", 0, 1)
    s.flush()
    held = []
    try:
        while True:  # every descriptor left
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as e:
        assert e.errno == errno.EMFILE
    errors: dict[str, str] = {}
    out["old queues"] = [m.body.decode() for q in range(4) for m in s.get_messages("g", "T", q, 0).messages]
    for name, call in (("commit_offset", lambda: s.commit_offset("g", "T", 0, 2)), ("flush", s.flush),
                       ("new queue", lambda: (s.put("NEW", b"new", 0), s.get_messages("g", "NEW", 0, 0))),
                       ("wait_dispatched", lambda: s.wait_dispatched(5))):
        try:
            call()
            errors[name] = "no error"
        except RmqError as e:
            errors[name] = f"{type(e).__name__} {getattr(e, 'errno', None)}"
        except BaseException as e:  # noqa: BLE001 - what the test reports
            errors[name] = f"{type(e).__name__}: {e}"
    out["errors"] = errors
    out["offset kept"] = s.fetch_offset("g", "T", 0)
    for fd in held:
        os.close(fd)
    deadline = time.monotonic() + 60
    while True:  # the reput thread retries after a pause (up to a second): it reports the error until then
        try:
            out["dispatched"] = s.wait_dispatched(1)
            break
        except RmqError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    out["reput alive"] = s._reput is not None and s._reput.thread.is_alive()
    out["new"] = [m.body.decode() for m in s.get_messages("g", "NEW", 0, 0).messages]
    s.commit_offset("g", "T", 0, 3)
    s.flush()
    s.close()
    with MessageStore(root, impl=impl) as s2:
        out["reopened"] = [s2.last_exit_ok, s2.fetch_offset("g", "T", 0), s2.max_offset("NEW", 0)]
    return out


def test_out_of_descriptors_is_an_rmq_error_and_the_store_goes_on(tmp_path: Path, impl) -> None:
    out = _child("emfile", impl.name, str(tmp_path / "store"))
    refused = "TooManyOpenFilesError 24"
    assert out["errors"] == {"commit_offset": refused, "flush": refused, "new queue": refused,
                             "wait_dispatched": refused}
    assert out["offset kept"] == 1 and out["old queues"] == ["before0", "before1", "before2", "before3"]
    assert out["dispatched"] is True and out["reput alive"] and out["new"] == ["new"]
    assert out["reopened"] == [True, 3, 1]


# -- reads past the end ---------------------------------------------------------------------------------

def test_a_read_only_open_of_a_live_store_ends_at_its_last_record(tmp_path: Path, impl) -> None:
    """The writer allocates its next CommitLog file ahead: a read-only open took that file's start
    (1 MiB) for the end. It ends at the last readable record, and keeps that end while the writer
    goes on (index entries of later records are not served); reads past it, on it and on any store,
    raise OffsetOutOfRangeError, never ValueError; at the end itself read_batch is empty."""
    w = MessageStore(tmp_path, impl=impl.name, commitlog_file_size=1 << 20)
    try:
        for i in range(3000):
            w.put("T", b"x%05d" % i + b"." * 100, i % 2, keys=f"k{i}")
        w.flush()
        w.commitlog.queue.wait_prepared()
        assert len(list((tmp_path / "commitlog").iterdir())) == 2  # the next file exists, all zeros
        end = w.commitlog.max_offset
        with MessageStore(tmp_path, read_only=True, impl=impl.name) as ro:
            assert ro.commitlog.max_offset == end and ro.recovered_end == end
            assert ro.max_offset("T", 0) + ro.max_offset("T", 1) == 3000
            for i in range(3000, 3100):  # the writer goes on; its index entries reach the files
                w.put("T", b"x%05d" % i, i % 2, keys=f"k{i}")
            w.flush()
            assert [m.body[:6] for m in ro.query_by_key("T", "k2999")] == [b"x02999"]
            assert ro.query_by_key("T", "k3050") == [] and ro.lookup("T", "k3050") is None
            for store, at in ((ro, end), (w, w.commitlog.max_offset)):
                cl = store.commitlog
                for bad in (at, at + 10, at + 5000):
                    with pytest.raises(OffsetOutOfRangeError):
                        cl.read(bad)
                    with pytest.raises(OffsetOutOfRangeError):
                        cl.read_batch(bad + 10)
                    with pytest.raises(OffsetOutOfRangeError):
                        cl.read_many([bad])
                    with pytest.raises(OffsetOutOfRangeError):
                        with store.record_views([bad]):
                            pass
                batch = cl.read_batch(at)
                assert len(batch) == 0 and batch.next_offset == at
    finally:
        w.close()


# -- the thread race -----------------------------------------------------------------------------------

def _race(impl: str, root: str, seconds: float, min_rounds: int) -> dict[str, Any]:
    """Rounds of: a store with a few hundred keyed messages; threads calling every public call in
    a loop; close() after 0-12 ms; the threads must end with StoreClosedError (anything else is
    reported); then the store must reopen cleanly with every acknowledged put readable."""
    foreign: list[str] = []
    rounds = 0
    start = time.monotonic()
    while rounds < min_rounds or time.monotonic() - start < seconds:
        d = Path(tempfile.mkdtemp(prefix=f"r{rounds}-", dir=root))
        s = MessageStore(d, impl=impl, **RACE_GEOM)
        for i in range(200):
            s.put("T", b"v%d" % i, i % 4, keys=f"k{i}")
        acked: list[tuple[int, bytes]] = []
        ids = [s.get_messages("g", "T", q, 0, 1).messages[0].msg_id for q in range(4)]
        ready = threading.Barrier(17)

        def loop(kind: str, s: MessageStore = s, acked: list[tuple[int, bytes]] = acked,
                 ids: list[str] = ids, ready: threading.Barrier = ready, rnd: int = rounds) -> None:
            ready.wait()
            i = 0
            try:
                while True:
                    i += 1
                    k = f"k{i % 200}"
                    if kind.startswith("put") and i > 500:  # enough written: a cheap call from now on
                        s.max_offset("T", 0)
                    elif kind == "put":
                        body = b"p%d" % i
                        acked.append((s.put("T", body, i % 4, keys=f"n{i}").physical_offset, body))
                    elif kind == "put_batch":
                        s.put_batch("T", [b"a", b"b"], 1, keys=["x", "y"])
                    elif kind == "put_async":
                        s.put_async("T", b"c", 2).result()
                    elif kind == "get":
                        r = s.get_messages("g", "T", i % 4, 0, 16)
                        if r.status == GetStatus.FOUND:
                            assert len(r.messages) == r.message_count
                    elif kind == "lookup":
                        s.lookup("T", k)
                    elif kind == "query":
                        s.query_by_key("T", k)
                        s.query_offsets("T", k)
                    elif kind == "msgid":
                        s.get_by_msg_id(ids[i % 4])
                    elif kind == "read":
                        s.commitlog.read(0)
                        s.commitlog.read_batch(0, 64)
                    elif kind == "views":
                        with s.record_views([0]) as views:
                            bytes(views[0][:4])
                    elif kind == "commit":
                        s.commit_offset("g", "T", i % 4, i)
                        s.fetch_offset("g", "T", i % 4)
                    elif kind == "flush":
                        s.flush()
                    elif kind == "dispatch":
                        s.dispatch()
                        s.wait_dispatched(5)
                    elif kind == "time":
                        s.offset_by_time("T", i % 4, 0)
                        s.earliest_message_time()
                        s.min_offset("T", 0)
                    elif kind == "clean":
                        s.clean_expired(now_ms=0)
                    elif kind == "iter":
                        for _ in s.commitlog.iter_records(0):
                            pass
            except StoreClosedError:
                return
            except BaseException as e:  # noqa: BLE001 - what the test reports
                foreign.append(f"round {rnd} {kind}: {type(e).__name__}: {e}\n"
                               + "".join(traceback.format_exception(e)[-4:]))

        kinds = ["put", "put", "put_batch", "put_async", "get", "lookup", "query", "msgid", "read", "views",
                 "commit", "flush", "dispatch", "time", "clean", "iter"]
        threads = [threading.Thread(target=loop, args=(k,), daemon=True) for k in kinds]
        for t in threads:
            t.start()
        ready.wait()
        time.sleep(0.001 * (rounds % 13))
        try:
            s.close()
        except BaseException as e:  # noqa: BLE001
            foreign.append(f"round {rounds} close: {type(e).__name__}: {e}")
        for t in threads:
            t.join(60)
            if t.is_alive():
                foreign.append(f"round {rounds}: a thread did not end (hang)")
                return {"rounds": rounds, "foreign": foreign}
        if (d / "abort").exists():
            foreign.append(f"round {rounds}: a clean close left the abort file")
        try:
            with MessageStore(d, impl=impl) as s2:
                if not s2.last_exit_ok or s2.dispatch_lag:
                    foreign.append(f"round {rounds}: reopened after an unclean close")
                for off, body in acked:
                    if s2.commitlog.read(off).body != body:
                        foreign.append(f"round {rounds}: the put at {off} reads back wrong")
                        break
        except BaseException as e:  # noqa: BLE001
            foreign.append(f"round {rounds} reopen: {type(e).__name__}: {e}")
        shutil.rmtree(d)
        rounds += 1
        if len(foreign) > 20:
            break
    return {"rounds": rounds, "foreign": foreign}


def test_threads_racing_close_see_only_store_closed_error(tmp_path: Path, impl) -> None:
    """Hundreds of rounds of readers and writers (every public call) on 16 threads while close()
    runs: each call completes or raises StoreClosedError, never another error, a hang or a crash
    (the race runs in a subprocess, so a crash fails this test, not the run), close() itself
    raises nothing, and the store reopens after a clean shutdown with every acknowledged put."""
    with _fast_dir(tmp_path) as root:  # each round opens, closes and reopens a store
        out = _child("race", impl.name, str(root), "0", "100")
    assert out["foreign"] == [] and out["rounds"] >= 100, "\n".join(out["foreign"][:5])


if __name__ == "__main__":
    import faulthandler

    faulthandler.enable()
    faulthandler.dump_traceback_later(500, exit=True)
    if sys.argv[1] == "race":
        print(json.dumps(_race(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))))
    elif sys.argv[1] == "queues":
        print(json.dumps(_ten_thousand_queues(sys.argv[2], sys.argv[3])))
    elif sys.argv[1] == "emfile":
        print(json.dumps(_out_of_descriptors(sys.argv[2], sys.argv[3])))
