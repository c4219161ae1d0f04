"""MessageStore behaviour beyond the goldens: views, concurrency, dispatch modes, config files."""
from __future__ import annotations

import errno
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rmqcore import fileops
from rmqcore.configfiles import loads_fastjson
from rmqcore.consumequeue import ConsumeQueue
from rmqcore.errors import (
    ConfigError,
    CorruptionError,
    DiskFullError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    StoreClosedError,
)
from rmqcore.store import GetStatus, MessageStore
from tests.faults import FullFor

GEOM = dict(commitlog_file_size=64 * 1024, cq_file_size=200, index_slots=50, index_entries=200)


def test_record_views_are_zero_copy_and_scoped(tmp_path: Path, impl) -> None:
    s = MessageStore(tmp_path, impl=impl.name, **GEOM)
    rs = [s.put("T", b"body-%d" % i, 0) for i in range(5)]
    r = s.get_messages("g", "T", 0, 0)
    with s.record_views(r.physical_offsets) as views:
        assert [len(v) for v in views] == [x.size for x in rs]
        assert all(v.readonly for v in views)
        assert bytes(views[2]).find(b"body-2") > 0
        with pytest.raises(BufferError):
            s.close()  # refused, nothing changed
        assert s.get_messages("g", "T", 0, 0).message_count == 5
    with pytest.raises(ValueError):
        bytes(views[0])  # released on exit
    with pytest.raises(OffsetOutOfRangeError):  # the second offset has no record: nothing is left out
        with s.record_views([rs[0].physical_offset, s.commitlog.max_offset]):
            pass
    assert s._pull.views_out == {}
    s.close()  # the gate was left: close does not wait for the failed block
    with pytest.raises(StoreClosedError):
        s.get_messages("g", "T", 0, 0)


def test_second_writer_is_refused_and_read_only_sees_complete_records(tmp_path: Path, impl) -> None:
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        for i in range(50):
            s.put("T", b"x" * 100, i % 2)
        s.flush()
        code = ("import sys; from rmqcore.store import MessageStore; from rmqcore.errors import StoreLockedError\n"
                f"try:\n    MessageStore({str(tmp_path)!r})\nexcept StoreLockedError:\n    sys.exit(7)\n")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert p.returncode == 7, p.stderr
        # a read-only open of the live store: complete records only, nothing written
        before = sorted((p.name, p.stat().st_size) for p in tmp_path.rglob("*") if p.is_file())
        with MessageStore(tmp_path, read_only=True, impl=impl.name) as ro:
            assert ro.max_offset("T", 0) == 25 and ro.max_offset("T", 1) == 25
            with pytest.raises(ConfigError):
                ro.put("T", b"no")
        after = sorted((p.name, p.stat().st_size) for p in tmp_path.rglob("*") if p.is_file())
        assert before == after


def test_readers_run_concurrently_with_the_writer(tmp_path: Path, impl) -> None:
    s = MessageStore(tmp_path, impl=impl.name, dispatch="background", **GEOM)
    stop = threading.Event()
    errors: list[BaseException] = []
    seen = [0]

    def reader() -> None:
        try:
            off = 0
            while not stop.is_set() or off < 2000:
                r = s.get_messages("g", "T", 0, off, 16)
                if r.status == GetStatus.FOUND:
                    for m in r.messages:
                        assert m.body == b"m%06d" % m.queue_offset
                    off = r.next_begin_offset
                    seen[0] = off
                elif stop.is_set() and s.dispatch_lag == 0 and r.status != GetStatus.FOUND and off >= 2000:
                    break
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=reader)
    t.start()
    for i in range(2000):
        s.put("T", b"m%06d" % i, 0)
    assert s.wait_dispatched(30)
    stop.set()
    t.join(60)
    assert not t.is_alive() and not errors, errors
    assert seen[0] == 2000
    s.close()


def test_consumer_offsets_file_is_what_a_broker_reads_with_bak_fallback(tmp_path: Path, impl) -> None:
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("TopicA", b"x", 1)
        s.commit_offset("grp", "TopicA", 1, 5)
        s.commit_offset("grp", "TopicA", 0, 3)
        s.commit_offset("grp", "TopicA", 1, 9)
    text = (tmp_path / "config" / "consumerOffset.json").read_text()
    assert '"TopicA@grp":{0:3,1:9}' in text  # fastjson: unquoted integer keys, topic@group
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    assert loads_fastjson(text) == {"offsetTable": {"TopicA@grp": {"0": 3, "1": 9}}}
    assert (tmp_path / "config" / "consumerOffset.json.bak").exists()
    # a torn/garbled file falls back to the .bak (the previous state)
    (tmp_path / "config" / "consumerOffset.json").write_text("{garbage")
    with MessageStore(tmp_path, impl=impl.name) as s:
        assert s.fetch_offset("grp", "TopicA", 1) == 5  # the .bak holds the state before the last commit
        assert s.fetch_offset("nobody", "TopicA", 1) == -1
        assert s.topics()["TopicA"] == 4
    topics = loads_fastjson((tmp_path / "config" / "topics.json").read_text())
    assert topics["topicConfigTable"]["TopicA"]["writeQueueNums"] == 4


def test_a_commit_the_disk_cannot_hold_changes_nothing(tmp_path: Path, impl, monkeypatch: pytest.MonkeyPatch) -> None:
    """fsync can fail with ENOSPC (delayed allocation): the commit is a DiskFullError, the offsets
    file, its .bak and fetch_offset keep the previous state, and no half-written .tmp is left."""
    config = tmp_path / "config"
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.commit_offset("grp", "TopicA", 1, 5)
        s.commit_offset("grp", "TopicA", 1, 7)
        before = {p.name: p.read_bytes() for p in config.iterdir()}

        def full(fd: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "fsync", full)
        for group, queue_id in (("grp", 1), ("grp", 0), ("other", 1)):  # a change, a new queue, a new group
            with pytest.raises(DiskFullError):
                s.commit_offset(group, "TopicA", queue_id, 9)
        assert {p.name: p.read_bytes() for p in config.iterdir()} == before
        assert [s.fetch_offset(g, "TopicA", q) for g, q in (("grp", 1), ("grp", 0), ("other", 1))] == [7, -1, -1]
        monkeypatch.undo()
        s.commit_offset("grp", "TopicA", 0, 2)
    with MessageStore(tmp_path, impl=impl.name) as s:
        assert [s.fetch_offset(g, "TopicA", q) for g, q in (("grp", 1), ("grp", 0), ("other", 1))] == [7, 2, -1]


def test_geometry_is_persisted_and_enforced(tmp_path: Path, impl) -> None:
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"x")
    assert json.loads((tmp_path / "rmqcore.json").read_text())["cq_file_size"] == 200
    with MessageStore(tmp_path, impl=impl.name) as s:  # no options: taken from rmqcore.json
        assert (s.config.commitlog_file_size, s.config.cq_file_size) == (64 * 1024, 200)
    with pytest.raises(ConfigError, match="cq_file_size"):
        MessageStore(tmp_path, impl=impl.name, cq_file_size=400)


def test_lookup_by_msg_id_and_earliest_time(tmp_path: Path, impl) -> None:
    clock = [1_700_000_000_000]
    with MessageStore(tmp_path, impl=impl.name, clock=lambda: clock[0], **GEOM) as s:
        assert s.earliest_message_time() == -1
        r1 = s.put("T", b"first", 0)
        clock[0] += 10
        r2 = s.put("T", b"second", 1)
        assert s.get_by_msg_id(r2.msg_id).body == b"second"
        assert s.earliest_message_time() == 1_700_000_000_000
        assert s.earliest_message_time("T", 1) == 1_700_000_000_010
        assert s.get_by_msg_id(r1.msg_id.lower()).body == b"first"


def test_read_only_open_never_changes_a_file_even_when_recovery_would_cut(tmp_path: Path, impl) -> None:
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        rs = [s.put("T", b"x" * 50, 0) for _ in range(20)]
    f = tmp_path / "commitlog" / "00000000000000000000"
    b = bytearray(f.read_bytes())
    b[rs[3].physical_offset + 100] ^= 0xFF  # a body byte of record 3: CRC-checked recovery cuts there
    f.write_bytes(bytes(b))
    (tmp_path / "abort").write_bytes(b"")
    before = {str(p): p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    with MessageStore(tmp_path, read_only=True, impl=impl.name) as ro:
        assert ro.commitlog.max_offset == rs[3].physical_offset
        assert ro.max_offset("T", 0) == 3
    after = {str(p): p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    assert before == after


@pytest.mark.parametrize("mode", ["background", "auto"])
def test_reput_steps_that_cut_records_are_not_errors(tmp_path: Path, impl, monkeypatch, mode: str) -> None:
    """The reput thread dispatches in bounded steps, following the writer; a step ending inside a
    record leaves it to the next step (it is not a torn record), and the thread keeps up."""
    import rmqcore.store.dispatch as dispatch_mod

    monkeypatch.setattr(dispatch_mod, "REPUT_STEP", 1000)  # every step cuts a record
    s = MessageStore(tmp_path, impl=impl.name, dispatch=mode, **GEOM)
    try:
        for i in range(300):
            s.put("T", b"m%05d" % i + b"." * (i % 50), i % 3, keys="k%d" % i)
        assert s.wait_dispatched(20)
        assert s._reput is not None and s._reput.error is None and s._reput.thread.is_alive()
        assert sum(s.max_offset("T", q) for q in range(3)) == 300
        assert [m.body[:6] for m in s.query_by_key("T", "k123")] == [b"m00123"]
    finally:
        s.close()


def test_index_resume_survives_a_live_run_past_the_call_end(tmp_path: Path, impl) -> None:
    """A live run (the reput thread's) follows the writer past the end its call was given. When the
    index file fills in the middle of a record out there, the record's remaining keys go into the
    next file on the next call, and its first keys are not put twice: the index files are the same
    as those one plain dispatch writes."""
    geom = dict(commitlog_file_size=8 << 20, index_slots=97, index_entries=1000)  # 999 keys per file
    bodies = [b"r%05d" % i + b"." * 1000 for i in range(2600)]  # > 2 MiB: the native run lags 2 MiB

    def fill(d: Path) -> MessageStore:
        s = MessageStore(d, impl=impl.name, dispatch="inline", clock=lambda: 1_700_000_000_000, **geom)
        for i, body in enumerate(bodies):  # 4 keys per record: a file fills at record 249, key 3
            s.put("T", body, 0, keys=f"a{i} b{i} c{i} d{i}")
        return s

    s = fill(tmp_path / "live")
    first_end = s.commitlog.read(0).size
    # the reput thread's call: it saw the CommitLog end at the first record, then the writer went on
    cl_type = type(s.commitlog)
    real_max = cl_type.max_offset
    cl_type.max_offset = property(lambda self: first_end)  # type: ignore[assignment]
    try:
        s._dispatch.run(1 << 40, True)
    finally:
        cl_type.max_offset = real_max  # type: ignore[assignment]
    assert s.reput_from_offset > first_end  # the run went on past its call's end ...
    s.dispatch()  # ... and stopped inside a record there, where this call resumes
    ref = fill(tmp_path / "ref")
    ref.dispatch()
    try:
        assert [h.entries for h in s.index.files] == [999] * 10 + [2600 * 4 - 9990]
        assert [bytes(f.buffer) for f in s.index] == [bytes(f.buffer) for f in ref.index]
        assert len(s.query_offsets("T", "d249")) == 1 and len(s.query_offsets("T", "a250")) == 1
    finally:
        s.close()
        ref.close()


def test_puts_hand_the_gil_to_a_dispatch_thread_that_asks(tmp_path: Path, impl) -> None:
    """Appender.set_gil_request: a put that sees a new request number lets the GIL go until the
    number changes (a thread that asks gets to run Python code before the put returns); a number it
    has seen does not stop it again, and without an answer it waits 2 ms at most."""
    import numpy as np

    s = MessageStore(tmp_path, impl=impl.name, dispatch="inline", **GEOM)
    req = np.zeros(1, dtype=np.int64)
    app = s.commitlog._appender
    app.set_gil_request(req)
    try:
        def attempt(number: int) -> list[str]:
            order: list[str] = []

            ready = threading.Event()

            def dispatcher_side() -> None:
                ready.wait()  # without the GIL, until the main thread is about to put
                order.append("answered")  # needs the GIL, which the put below holds unless it hands it over
                req[0] = 0

            req[0] = number
            t = threading.Thread(target=dispatcher_side)
            t.start()
            ready.set()  # the main thread keeps the GIL from here into the put
            s.put("T", b"x", 0)
            order.append("put returned")
            t.join()
            return order

        # the put waits at most 2 ms for the answer: a loaded machine may miss one
        assert ["answered", "put returned"] in [attempt(n) for n in (5, 6, 7)]
        req[0] = 8  # nobody answers: the put goes on after its bounded wait, and only once
        for _ in range(3):
            s.put("T", b"y", 0)
        assert s.commitlog.max_offset > 0
        with pytest.raises(ValueError):
            app.set_gil_request(np.zeros(1, dtype=np.int32))
    finally:
        app.set_gil_request(None)
        s.close()


def test_offsets_times_and_limits_are_integers(tmp_path: Path, impl) -> None:
    """Every other method that takes an offset, a time, a size or a limit: numpy integers answer as
    ints do; a float, a str, bytes or None raises ConfigError (not a TypeError from inside), and
    changes nothing."""
    import numpy as np

    with MessageStore(tmp_path, impl=impl.name) as s:
        r = s.put("T", b"m0", 0, keys="k")
        s.put("T", b"m1", 0)
        s.commit_offset("g", "T", 0, 1)
        ts = r.store_timestamp
        answers = {
            "read": lambda v: s.commitlog.read(v).body,
            "store_time_of": lambda v: s.store_time_of(v),
            "offset_by_time": lambda v: s.offset_by_time("T", 0, v),
            "commitlog_offset_by_time": lambda v: s.commitlog_offset_by_time(v),
            "read_record_bytes": lambda v: s.read_record_bytes(v, r.size),
            "record_views": lambda v: _viewed(s, v),
            "dispatch": lambda v: s.dispatch(v),
        }
        args = {"offset_by_time": ts, "commitlog_offset_by_time": ts}
        for name, call in answers.items():
            v = args.get(name, r.physical_offset)
            assert call(np.int64(v)) == call(v), name
        state = lambda: (s.commitlog.max_offset, s.reput_from_offset, s.fetch_offset("g", "T", 0),  # noqa: E731
                         s.max_offset("T", 0))
        before = state()
        for bad in (1.0, "0", b"0", None):
            for name, call in answers.items():
                if name == "dispatch" and bad is None:
                    continue  # no limit
                with pytest.raises(ConfigError):
                    call(bad)
            with pytest.raises(ConfigError):
                s.commit_offset("g", "T", 0, bad)
            with pytest.raises(ConfigError):
                s.commit_offset("g", "T", bad, 3)
        s.commit_offset("g", "T", np.int32(0), np.int64(2))
        assert s.fetch_offset("g", "T", 0) == 2
        s.commit_offset("g", "T", 0, 1)
        assert state() == before and before[1:] == (s.commitlog.max_offset, 1, 2)


def _viewed(s: MessageStore, off) -> bytes:  # type: ignore[no-untyped-def]
    with s.record_views([off]) as views:
        return bytes(views[0])


def test_an_idle_reput_thread_leaves_no_gil_request_out(tmp_path: Path, impl) -> None:
    """While the store is idle the reput thread naps with its GIL request withdrawn: a request left
    out would make the next put wait for the sleeping thread (up to a nap) before writing.
    Sampled between short sleeps: a nap's request lives only until the thread takes the GIL."""
    import time

    with MessageStore(tmp_path, impl=impl.name) as s:
        s.put("T", b"x")
        assert s.wait_dispatched(10)
        time.sleep(0.1)  # the naps have grown
        seen = []
        for _ in range(50):
            time.sleep(0.003)
            seen.append(int(s._dispatch.gil_request[0]))
        assert sum(v != 0 for v in seen) < 10, seen
        s.put("T", b"y")
        assert s.wait_dispatched(10) and s.get_messages("g", "T", 0, 0).queue_offsets == [0, 1]


def test_pulls_read_within_one_consume_queue_file_with_rocketmq_statuses(tmp_path: Path, impl) -> None:
    """getMessage reads the units of one file at a time: a pull that starts near a file's end stops
    there; the offsets past the queue answer OVERFLOW_ONE / OVERFLOW_BADLY."""
    per_file = GEOM["cq_file_size"] // 20
    total = 3 * per_file + 5
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        for i in range(total):
            s.put("T", b"m%d" % i, 0)
        for off in range(total):
            r = s.get_messages("g", "T", 0, off, 4)
            want = list(range(off, min(off + 4, (off // per_file + 1) * per_file, total)))
            assert (r.status, r.queue_offsets, r.next_begin_offset) == (GetStatus.FOUND, want, want[-1] + 1), off
            assert (r.min_offset, r.max_offset) == (0, total)
            assert [m.body for m in r.messages] == [b"m%d" % q for q in want]
        r = s.get_messages("g", "T", 0, total, 4)
        assert (r.status, r.next_begin_offset, r.queue_offsets) == (GetStatus.OFFSET_OVERFLOW_ONE, total, [])
        r = s.get_messages("g", "T", 0, total + 7, 4)
        assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, total)
        r = s.get_messages("g", "T", 1, 0, 4)
        assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)


def test_pull_limits_come_from_the_config(tmp_path: Path, impl) -> None:
    """maxTransferCount/BytesOnMessageInMemory bound a pull of messages in memory, and the on-disk
    pair bounds it when accessMessageInMemoryMaxRatio (0 % here) puts them on disk; the first
    message is always taken."""
    def pull(name: str, **cfg: int) -> list[int]:
        with MessageStore(tmp_path / name, impl=impl.name, **cfg, **GEOM) as s:
            for i in range(8):
                s.put("T", b"m" * (40 + i), 0)
            r = s.get_messages("g", "T", 0, 0, 32)
            assert r.status == GetStatus.FOUND and r.next_begin_offset == len(r.queue_offsets)
            sizes[name] = r.sizes
            return r.queue_offsets

    sizes: dict[str, list[int]] = {}
    assert pull("all") == list(range(8))
    assert pull("count", max_transfer_count_in_memory=3) == [0, 1, 2]
    assert pull("disk-count", access_message_in_memory_max_ratio=0, max_transfer_count_on_disk=2,
                max_transfer_count_in_memory=3) == [0, 1]
    rec = sizes["all"]
    limit = rec[0] + rec[1] + rec[2] // 2  # room for two records and a half
    assert pull("bytes", max_transfer_bytes_in_memory=limit) == [0, 1]
    assert pull("disk-bytes", access_message_in_memory_max_ratio=0, max_transfer_bytes_on_disk=limit) == [0, 1]
    assert pull("one", max_transfer_bytes_in_memory=1) == [0]


def test_get_messages_takes_integer_arguments_of_any_int_type(tmp_path: Path, impl) -> None:
    """Pull arguments are integers (numpy's too); anything else is a ConfigError, not a kernel
    TypeError; limits past int64 act as no limit."""
    import numpy as np

    with MessageStore(tmp_path, impl=impl.name) as s:
        for i in range(10):
            s.put("T", b"m%d" % i, 0, tags="a" if i % 2 else "b")
        r = s.get_messages("g", "T", 0, np.int64(2), np.int32(3), 2**80)
        assert (r.status, r.queue_offsets, r.next_begin_offset) == (GetStatus.FOUND, [2, 3, 4], 5)
        assert [m.body for m in r.messages] == [b"m2", b"m3", b"m4"]
        r = s.get_messages("g", "T", 0, 0, 2**70, tag_filter="a")
        assert r.queue_offsets == [1, 3, 5, 7, 9] and r.next_begin_offset == 10
        for bad in (dict(offset=1.0), dict(max_msgs=2.5), dict(max_bytes="1")):
            args = dict(offset=0, max_msgs=32, max_bytes=1 << 20)
            args.update(bad)
            with pytest.raises(ConfigError):
                s.get_messages("g", "T", 0, args["offset"], args["max_msgs"], args["max_bytes"])


def test_a_pull_keeps_its_units_packed_and_lists_them_when_asked(tmp_path: Path, impl) -> None:
    """GetResult's lists come from one packed int64 block (``units``: physical offsets, queue
    offsets, sizes), each made on first read; results compare and print by those values."""
    import numpy as np

    with MessageStore(tmp_path, impl=impl.name) as s:
        acks = [s.put("T", b"m" * (i + 1), 0, tags="a" if i % 2 else "b") for i in range(12)]
        r = s.get_messages("g", "T", 0, 3, 4, tag_filter="a")
        assert r.status == GetStatus.FOUND and r.message_count == 4 and r.next_begin_offset == 10
        want_phys = [acks[i].physical_offset for i in (3, 5, 7, 9)]
        u = r.units
        assert u.dtype == np.int64 and u.shape == (3, 4) and not u.flags.writeable
        assert u.tolist() == [want_phys, [3, 5, 7, 9], [acks[i].size for i in (3, 5, 7, 9)]]
        assert (r.physical_offsets, r.queue_offsets, r.sizes) == tuple(u.tolist())
        assert r.physical_offsets is r.physical_offsets  # made once
        assert [m.body for m in r.messages] == [b"m" * (i + 1) for i in (3, 5, 7, 9)]
        again = s.get_messages("g", "T", 0, 3, 4, tag_filter="a")
        assert again == r and again != s.get_messages("g", "T", 0, 3, 3, tag_filter="a")
        assert f"queue_offsets={[3, 5, 7, 9]}" in repr(r)
        empty = s.get_messages("g", "T", 0, 12, 4)
        assert (empty.status, empty.message_count, empty.physical_offsets, empty.units.shape) == (
            GetStatus.OFFSET_OVERFLOW_ONE, 0, [], (3, 0))


def test_a_record_topic_that_is_no_directory_name_is_cut_not_followed(tmp_path: Path, impl) -> None:
    """A CommitLog record whose topic is a path ("../../outside1": the body CRC does not cover the
    topic) once made dispatch create consume-queue files outside the store, wherever the topic
    pointed. Now recovery ends the CommitLog there, as at any record it cannot read (zeroed, reported
    in ``recovery.cuts``), and nothing is created."""
    d = tmp_path / "store"
    geom = dict(commitlog_file_size=1 << 20, cq_file_size=200, index_slots=10, index_entries=40)
    with MessageStore(d, impl=impl.name, **geom) as s:
        s.put("Topic_ok_first", b"a", 0)
        r = s.put("AAAAAAAAAAAAAA", b"hello", 0)
    cl = d / "commitlog" / "00000000000000000000"
    raw = bytearray(cl.read_bytes())
    i = raw.index(b"AAAAAAAAAAAAAA")
    raw[i : i + 14] = b"../../outside1"
    cl.write_bytes(bytes(raw))
    shutil.rmtree(d / "consumequeue")  # dispatch rebuilds the consume queues from the CommitLog
    (d / "checkpoint").unlink()
    with MessageStore(d, impl=impl.name) as s:
        assert s.commitlog.max_offset == r.physical_offset
        assert [(c.path, c.position, c.records, c.reason) for c in s.recovery.cuts] == [
            (str(cl), r.physical_offset, 0, "undispatchable topic")]
        assert s.max_offset("Topic_ok_first", 0) == 1
    assert not any(cl.read_bytes()[r.physical_offset :])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    assert not (d / "consumequeue" / ".." / ".." / "outside1").exists()


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "/abs", "a\\b", "nul\0", "../x"])
def test_consume_queue_topics_are_one_path_component(tmp_path: Path, impl, topic: str) -> None:
    with MessageStore(tmp_path / "s", impl=impl.name, commitlog_file_size=1 << 20) as s:
        with pytest.raises(InvalidTopicError):
            s.consume_queue(topic, 0, create=True)
    with pytest.raises(InvalidTopicError):
        ConsumeQueue(tmp_path / "s", topic, 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]


def test_reads_and_offsets_take_only_names_and_ints(tmp_path: Path, impl) -> None:
    """Arguments of the wrong type are a ConfigError (the README's promise for offsets, counts and
    ids), never the TypeError of a dict lookup or of a string operation inside."""
    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=1 << 20, dispatch="inline") as s:
        r = s.put("T", b"x", 0)
        s.commit_offset("g", "T", 0, 1)
        bad_calls = [
            lambda: s.commit_offset(7, "T", 0, 1), lambda: s.commit_offset("g", b"T", 0, 1),
            lambda: s.commit_offset("g", "T", "0", 1), lambda: s.fetch_offset(None, "T", 0),
            lambda: s.fetch_offset("g", "T", [0]), lambda: s.min_offset([1], 0), lambda: s.max_offset("T", {}),
            lambda: s.get_messages("g", ["T"], 0, 0), lambda: s.offset_by_time("T", [0], 0),
            lambda: s.earliest_message_time("T", [0]), lambda: s.commitlog.read_batch("0"),
            lambda: list(s.commitlog.iter_records("0")), lambda: s.record_views(r.physical_offset).__enter__(),
        ]
        for call in bad_calls:
            with pytest.raises(ConfigError):
                call()
        assert s.fetch_offset("g", "T", 0) == 1 and s.min_offset("T", 0) == 0 and s.max_offset("T", 0) == 1
        with s.record_views(iter([r.physical_offset])) as views:
            assert len(views) == 1


@pytest.mark.parametrize("name, text", [
    ("consumerOffset.json", '{"offsetTable":{"T@g":{0:{"a":1}}}}'),
    ("consumerOffset.json", '{"offsetTable":{"T@g":{"x":1}}}'),
    ("consumerOffset.json", '{"offsetTable":{"T@g":{"--5":1}}}'),
    ("consumerOffset.json", '{"offsetTable":{"T@g":{0:1.5}}}'),
    ("consumerOffset.json", '{"offsetTable":{"T@g":{0:true}}}'),
    ("consumerOffset.json", '{"offsetTable":{"T@g":[1,2]}}'),
    ("consumerOffset.json", '{"offsetTable":[1]}'),
    ("topics.json", '{"topicConfigTable":{"T":{"writeQueueNums":"8"}}}'),
    ("topics.json", '{"topicConfigTable":{"T":{"writeQueueNums":[8]}}}'),
    ("topics.json", '{"topicConfigTable":{"T":7}}'),
])  # fmt: skip
def test_a_config_file_of_the_wrong_shape_is_corrupt(tmp_path: Path, impl, name: str, text: str) -> None:
    """JSON that parses but is not what a broker writes is reported with the file's path (it used
    to surface as the TypeError or ValueError of an int() inside, or to be skipped silently)."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"x", 0)
        s.commit_offset("g", "T", 0, 1)
    (tmp_path / "config" / name).write_text(text)
    with pytest.raises(CorruptionError) as e:
        MessageStore(tmp_path, impl=impl.name)
    assert e.value.path == str(tmp_path / "config" / name)


def test_a_config_file_nested_too_deep_falls_back_to_its_bak(tmp_path: Path, impl) -> None:
    """Nesting past the parser's recursion limit is an unparsable file, like "{garbage": the .bak
    is read instead (it used to raise RecursionError out of the open)."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"x", 0)
        s.commit_offset("g", "T", 0, 1)
        s.commit_offset("g", "T", 0, 2)
    (tmp_path / "config" / "consumerOffset.json").write_text("[" * 100_000 + "]" * 100_000)
    with MessageStore(tmp_path, impl=impl.name) as s:
        assert s.fetch_offset("g", "T", 0) == 1


def test_consume_queue_refuses_arguments_that_name_no_queue(tmp_path: Path, impl) -> None:
    """MessageStore.consume_queue: an unhashable topic or queue id is a ConfigError (it was the
    dict's TypeError), and so is making a queue for a non-str topic or a queue id outside
    [0, 2**31 - 1] (a bool, a str "0", -1); nothing is created on disk."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        for topic, qid in (([1], 0), ("T", [0]), ("T", {0: 1})):
            for create in (False, True):
                with pytest.raises(ConfigError):
                    s.consume_queue(topic, qid, create=create)  # type: ignore[arg-type]
        for topic, qid in (("T", "0"), ("T", -1), ("T", 2**31), (b"T", 0), ("T", True), ("T", 1.0)):
            assert s.consume_queue(topic, qid) is None  # type: ignore[arg-type]
            with pytest.raises(ConfigError):
                s.consume_queue(topic, qid, create=True)  # type: ignore[arg-type]
        assert not (tmp_path / "consumequeue").exists()
        assert s.consume_queue("T", 2**31 - 1, create=True) is not None


@pytest.mark.parametrize("name", ["consumerOffset.json", "topics.json"])
def test_a_config_file_and_its_bak_both_unparsable_stop_the_open(tmp_path: Path, impl, name: str) -> None:
    """ConfigManager.load: an unparsable file falls back to its .bak; when the .bak is there but
    unparsable too, loadBak fails and the broker does not start. The open raises CorruptionError
    with the .bak's path and leaves both files as they were; with no .bak (or an empty one) the
    store opens with an empty table, as a broker does."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"x", 0)
        s.commit_offset("g", "T", 0, 1)
    cfg = tmp_path / "config"
    main, bak = cfg / name, cfg / (name + ".bak")
    main.write_text("{garbage")
    bak.write_text('{"offsetTable": {')
    with pytest.raises(CorruptionError) as e:
        MessageStore(tmp_path, impl=impl.name)
    assert e.value.path == str(bak)
    assert main.read_text() == "{garbage" and bak.read_text() == '{"offsetTable": {'
    main.unlink()  # no file at all: the .bak is read, and it is still unparsable
    with pytest.raises(CorruptionError):
        MessageStore(tmp_path, impl=impl.name)
    main.write_text("{garbage")
    bak.write_text("")
    with MessageStore(tmp_path, impl=impl.name) as s:
        if name == "consumerOffset.json":
            assert s.fetch_offset("g", "T", 0) == -1
        assert s.get_messages("g", "T", 0, 0).queue_offsets == [0]


def _vm_flags(path: Path) -> set[str] | None:
    """VmFlags of this process's map of ``path`` (/proc/self/smaps), None when it is not mapped."""
    inside, flags = False, None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):
            inside = line.endswith(str(path))
        elif inside and line.startswith("VmFlags:"):
            flags = set(line.split()[1:])
    return flags


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux: VmFlags in /proc/self/smaps")
@pytest.mark.parametrize("flush, huge, want", [("ASYNC_FLUSH", True, True), ("SYNC_FLUSH", True, False),
                                               ("ASYNC_FLUSH", False, False)])  # fmt: skip
def test_huge_page_advice_on_async_stores_only(tmp_path: Path, impl, flush: str, huge: bool, want: bool) -> None:
    """The CommitLog's and consume queues' maps carry MADV_HUGEPAGE ("hg") under ASYNC_FLUSH unless
    huge_pages=False; under SYNC_FLUSH never (a sync would write whole large folios); a read-only
    open never."""
    with MessageStore(tmp_path, impl=impl.name, flush_disk_type=flush, huge_pages=huge, dispatch="inline",
                      **GEOM) as s:
        s.put("T", b"x", 0)
        s.dispatch()
        cl_flags = _vm_flags(Path(s.commitlog.queue.last().path))
        cq_flags = _vm_flags(Path(s.consume_queue("T", 0).queue.last().path))
        assert cl_flags is not None and cq_flags is not None
        assert ("hg" in cl_flags, "hg" in cq_flags) == (want, want)
        assert s.get_messages("g", "T", 0, 0).messages[0].body == b"x"
    with MessageStore(tmp_path, impl=impl.name, read_only=True) as ro:
        flags = _vm_flags(Path(ro.commitlog.queue.last().path))
        assert flags is not None and "hg" not in flags


def test_huge_pages_is_a_bool(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        MessageStore(tmp_path, huge_pages=1, **GEOM)


def test_queue_directories_that_are_no_integer_are_skipped(tmp_path: Path, impl) -> None:
    """Only consumequeue/<topic>/<integer>/ is a queue; "--5" and "²" (which str.isdigit accepts and
    int() does not) used to crash the open."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"x", 3)
    for name in ("--5", "\u00b2", "x1", "-"):
        (tmp_path / "consumequeue" / "T" / name).mkdir()
    with MessageStore(tmp_path, impl=impl.name) as s:
        assert sorted(s.consume_queues) == [("T", 3)]
        assert s.get_messages("g", "T", 3, 0).messages[0].body == b"x"


@pytest.mark.parametrize("dispatch", ["inline", "auto"])
def test_put_batch_with_per_message_keys_and_tags_is_queried_and_filtered(tmp_path: Path, impl, dispatch) -> None:
    """A batch whose messages carry their own KEYS and TAGS (the RocketMQ batch send) is indexed under
    every key and filtered by tag like the same messages put one by one."""
    keys = [f"order-{i}" for i in range(40)]
    tags = ["Paid" if i % 3 else "Created" for i in range(40)]
    with MessageStore(tmp_path, impl=impl.name, dispatch=dispatch, **GEOM) as s:
        r = s.put_batch("Orders", [b"o%d" % i for i in range(40)], 1, keys=keys, tags=tags)
        assert (r.queue_offset, r.count) == (0, 40)
        for i in (0, 17, 39):
            [m] = s.query_by_key("Orders", keys[i])
            assert (m.body, m.tags, m.queue_offset) == (b"o%d" % i, tags[i], i)
        got, off = [], 0
        while off < 40:  # a pull reads one consume-queue file (10 units here), as RocketMQ's does
            res = s.get_messages("g", "Orders", 1, off, max_msgs=64, tag_filter="Created")
            got += [m.body for m in res.messages]
            assert res.next_begin_offset > off
            off = res.next_begin_offset
        assert got == [b"o%d" % i for i in range(0, 40, 3)] and off == 40


def _open_under(path: Path) -> list[str]:
    """Files under ``path`` that this process holds open (descriptors and maps)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the listing's own descriptor
            pass
    with open("/proc/self/maps") as f:
        held += [ln.split(None, 5)[-1].strip() for ln in f if len(ln.split(None, 5)) == 6]
    return sorted(h for h in held if h.startswith(str(path)))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self")
@pytest.mark.parametrize("damage", ["config", "record"])
def test_a_failed_open_leaves_no_file_open_and_no_thread(tmp_path: Path, impl, damage: str) -> None:
    """An open that fails (a corrupt config file after the CommitLog is mapped; a full disk met by
    recovery's dispatch, with consume queues, index and segment indexes open) closes what it had
    opened and stops what it had started before it raises: those stayed open until garbage
    collection (an fd and a map per file, two flusher threads), nothing else is written, and a
    repaired store opens at once. (A record recovery cannot dispatch no longer fails an open: it
    ends the CommitLog there.)"""
    d = tmp_path / "store"
    with MessageStore(d, impl=impl.name, **GEOM) as s:
        for i in range(30):
            s.put("T", b"x%d" % i, i % 3, keys=f"k{i}")
        s.commit_offset("g", "T", 0, 1)
        s.put("AAAAAAAAAAAAAA", b"hello", 0)
    offsets = d / "config" / "consumerOffset.json"
    good = offsets.read_text()
    if damage == "config":
        offsets.write_text('{"offsetTable":{"T@g":{"x":1}}}')
        expected: type[Exception] = CorruptionError
    else:  # recovery's dispatch rebuilds the consume queues, and no file can be created for them
        shutil.rmtree(d / "consumequeue")
        (d / "checkpoint").unlink()
        expected = DiskFullError
    gc.collect()
    threads = {t.ident for t in threading.enumerate()}
    before = {p.name: p.read_bytes() for p in d.rglob("*") if p.is_file() and p.name != "lock"}
    disk = FullFor(f"{d.name}/consumequeue/")
    disk.full = damage == "record"
    with fileops.use(disk), pytest.raises(expected):
        MessageStore(d, impl=impl.name)
    assert _open_under(d) == []  # no garbage collection in between
    assert [t.name for t in threading.enumerate() if t.ident not in threads] == []
    after = {p.name: p.read_bytes() for p in d.rglob("*") if p.is_file() and p.name != "lock"}
    if damage == "config":  # recovery had not begun: not a byte changed
        assert after == before
        offsets.write_text(good)
        with MessageStore(d, impl=impl.name) as s:
            assert s.fetch_offset("g", "T", 0) == 1 and len(s.query_by_key("T", "k7")) == 1
