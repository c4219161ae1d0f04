"""Misuse of the public API: every wrong argument is an RmqError subclass, the same in both twins, and
changes nothing on disk; nothing serves wrong data (unwritten bytes, mangled keys)."""
from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

import pytest

from rmqcore import cli, configfiles, mappedfile
from rmqcore.errors import (
    ConfigError,
    DiskFullError,
    InvalidMessageError,
    OffsetOutOfRangeError,
    StoreAccessError,
)
from rmqcore.store import MessageStore

GEOM = dict(commitlog_file_size=4096, cq_file_size=200, index_slots=17, index_entries=40)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_arguments_of_the_wrong_type_are_config_errors(tmp_path: Path, impl) -> None:
    """Each was the AttributeError or TypeError of an operation inside."""
    with pytest.raises(ConfigError, match="commitlog_file_size must be an integer"):
        MessageStore(tmp_path / "new", impl=impl.name, commitlog_file_size="1")
    assert not (tmp_path / "new").exists()
    with MessageStore(tmp_path / "s", impl=impl.name, **GEOM) as s:
        s.put("T", b"x", 0, tags="A")
        calls = {
            "tag_filter": lambda: s.get_messages("g", "T", 0, 0, tag_filter=5),  # type: ignore[arg-type]
            "tag_filter, unknown queue": lambda: s.get_messages("g", "U", 0, 0, tag_filter=b"A"),  # type: ignore
            "timeout": lambda: s.wait_dispatched("x"),  # type: ignore[arg-type]
            "NaN timeout": lambda: s.wait_dispatched(float("nan")),
            "now_ms": lambda: s.clean_expired("x"),  # type: ignore[arg-type]
            "usage_ratio": lambda: s.clean_expired(0, usage_ratio="90"),  # type: ignore[arg-type]
        }
        for name, call in calls.items():
            with pytest.raises(ConfigError):
                call()
                pytest.fail(name)
        assert s.wait_dispatched(1) is True and s.wait_dispatched(1.5) is True
        assert s.get_messages("g", "T", 0, 0, tag_filter="A").message_count == 1
    for bad in ({"flush_interval_ms": 0}, {"file_reserved_time_hours": float("inf")}, {"huge_pages": 1},
                {"store_host": "nowhere"}, {"clock": 5}, {"no_such_setting": 1}):
        with pytest.raises(ConfigError):
            MessageStore(tmp_path / "s", impl=impl.name, **bad)


@pytest.mark.parametrize("text", ["1e400", "16384.9", '"8192"', "true", "[]"])
def test_geometry_values_must_be_json_integers(tmp_path: Path, impl, text: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """1e400 raised OverflowError (a traceback from `rmqcore info`) and 16384.9 was cut to 16384."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"x", 0)
    geo = tmp_path / "rmqcore.json"
    geo.write_text(geo.read_text().replace('"commitlog_file_size": 4096', f'"commitlog_file_size": {text}'))
    before = _files(tmp_path)
    with pytest.raises(ConfigError, match="commitlog_file_size must be a JSON integer"):
        MessageStore(tmp_path, impl=impl.name)
    assert _files(tmp_path) == before
    assert cli.main(["info", str(tmp_path)]) == cli.EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("rmqcore: error: ") and "JSON integer" in err


def test_a_strided_body_is_stored_as_its_bytes(tmp_path: Path, impl) -> None:
    """A non-contiguous memoryview body is copied (native raised BufferError; pure stored its bytes)."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        r = s.put("T", memoryview(b"abcdef")[::2], 0)
        b = s.put_batch("T", [memoryview(b"ghijkl")[1::2], b"z"], 0)
        assert [m.body for m in s.get_messages("g", "T", 0, 0).messages] == [b"ace", b"hjl", b"z"]
        assert (r.queue_offset, b.queue_offset) == (0, 1)


def _state(s: MessageStore) -> tuple[int, dict[tuple[str, int], int]]:
    return s.commitlog.max_offset, s.commitlog.topic_queue_table


def test_lone_surrogates_are_refused_and_nothing_is_written(tmp_path: Path, impl) -> None:
    """They were stored mangled (UTF-8 with surrogates passed), so the same key was not found again."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"ok", 0, keys="k\u00e9", tags="t\U0001f600")
        s.commit_offset("g", "T", 0, 1)
        before = _state(s)
        bad_puts = [
            dict(tags="a\udc80"), dict(keys="\ud800k"), dict(keys=["ok", "k\udfff"]),
            dict(properties={"P": "v\udc80"}), dict(properties={"\udc80": "v"}),
            dict(properties_raw="A\x01\udc80\x02"),
        ]
        for kw in bad_puts:
            with pytest.raises(InvalidMessageError):
                s.put("T", b"x", 0, **kw)
        bad_batches = [
            dict(tags=["a", "\udc80"]), dict(keys=[None, "\udc80"]), dict(properties={"P": "\udc80"}),
            dict(properties_raw=["KEYS\x01a", "KEYS\x01\udc80"]),
        ]
        for kw in bad_batches:
            with pytest.raises(InvalidMessageError):
                s.put_batch("T", [b"x", b"y"], 0, **kw)
        assert _state(s) == before
        for group, topic in (("\udc80", "T"), ("g", "T\udc80")):
            with pytest.raises(InvalidMessageError):
                s.commit_offset(group, topic, 0, 2)
        assert s.fetch_offset("g", "T", 0) == 1
        assert [m.body for m in s.query_by_key("T", "k\u00e9")] == [b"ok"]
        assert s.get_messages("g", "T", 0, 0, tag_filter="t\U0001f600").message_count == 1
    text = (tmp_path / "config" / "consumerOffset.json").read_text(encoding="utf-8")
    assert "\\udc80" not in text and "@" + "g" in text


def test_queue_ids_are_ints_in_java_range_everywhere(tmp_path: Path, impl) -> None:
    """put(queue_id=True) was accepted by the native twin (refused by the pure one); commit_offset
    took -1 and 2**31, which put refuses."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        before = _state(s)
        for qid in (True, False, -1, 2**31, 1.0, "0"):
            with pytest.raises(InvalidMessageError):
                s.put("T", b"x", qid)  # type: ignore[arg-type]
            with pytest.raises(InvalidMessageError):
                s.put_batch("T", [b"x"], qid)  # type: ignore[arg-type]
        assert _state(s) == before
        for qid in (-1, 2**31, 2**64):
            with pytest.raises(InvalidMessageError):
                s.commit_offset("g", "T", qid, 5)
        for off in (2**63, -(2**63) - 1):
            with pytest.raises(InvalidMessageError):
                s.commit_offset("g", "T", 0, off)
        assert not (tmp_path / "config" / "consumerOffset.json").exists()
        s.commit_offset("g", "T", 2**31 - 1, 5)
        assert s.fetch_offset("g", "T", 2**31 - 1) == 5
        assert s.put("T", b"x", 2**31 - 1).queue_offset == 0


def test_read_record_bytes_never_serves_unwritten_bytes(tmp_path: Path, impl) -> None:
    """read_record_bytes(off, -1) returned the whole mapped file, unwritten bytes included."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        r = s.put("T", b"hello", 0)
        whole = s.read_record_bytes(r.physical_offset, r.size)
        assert len(whole) == r.size and whole[:4] == r.size.to_bytes(4, "big") and b"hello" in whole
        for off, size in ((r.physical_offset, -1), (r.physical_offset, 0), (r.physical_offset, r.size + 1),
                          (r.physical_offset, 4096), (r.physical_offset + r.size, 1), (-1, 1), (2**70, 1)):
            with pytest.raises(OffsetOutOfRangeError):
                s.read_record_bytes(off, size)


def test_a_writable_open_the_os_refuses_is_a_store_access_error(tmp_path: Path, impl,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only file system (or no permission) made a writable open raise a bare OSError."""
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"x", 0)
    before = _files(tmp_path)
    real_open = os.open
    for code in (errno.EROFS, errno.EACCES):
        def refuse(path, flags, *a, code=code, **k):  # type: ignore[no-untyped-def]
            if str(path).startswith(str(tmp_path)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                raise OSError(code, os.strerror(code), str(path))
            return real_open(path, flags, *a, **k)

        monkeypatch.setattr(os, "open", refuse)
        with pytest.raises(StoreAccessError) as ei:
            MessageStore(tmp_path, impl=impl.name)
        assert isinstance(ei.value, OSError) and ei.value.errno == code
        assert str(tmp_path) in str(ei.value) and "read_only=True" in str(ei.value)
        with MessageStore(tmp_path, impl=impl.name, read_only=True) as ro:  # reading needs no write
            assert [m.body for m in ro.get_messages("g", "T", 0, 0).messages] == [b"x"]
        monkeypatch.setattr(os, "open", real_open)
    assert _files(tmp_path) == before


@pytest.mark.parametrize("kind", ["commitlog", "index"])
def test_a_read_only_open_while_retention_deletes_files(tmp_path: Path, impl, monkeypatch: pytest.MonkeyPatch,
                                                        kind: str) -> None:
    """The writer's clean_expired deletes the oldest files between the reader's listing and its
    opening them: the read-only open starts after them (it raised FileNotFoundError)."""
    from rmqcore import indexfile

    w = MessageStore(tmp_path, impl=impl.name, delete_when="99", **GEOM)
    try:
        for i in range(200):
            w.put("R", b"r%05d" % i + b"." * 150, 0, keys=f"k{i}")
        w.dispatch()
        assert len(w.commitlog.queue.files) > 5 and len(w.index.index_files) > 2
        deleted: list[str] = []

        def clean_once() -> None:
            if not deleted:
                deleted.extend(w.clean_expired(2**50, force=True, usage_ratio=10))
                assert deleted

        if kind == "commitlog":
            real = mappedfile.MappedFile

            def opening(path, *a, **k):  # type: ignore[no-untyped-def]
                if k.get("read_only") and "commitlog" in str(path):
                    clean_once()
                return real(path, *a, **k)

            monkeypatch.setattr(mappedfile, "MappedFile", opening)
        else:
            real_open = indexfile.IndexFile.open

            def opening_index(path, *a, **k):  # type: ignore[no-untyped-def]
                if k.get("read_only"):
                    clean_once()
                return real_open(path, *a, **k)

            monkeypatch.setattr(indexfile.IndexFile, "open", staticmethod(opening_index))
        with MessageStore(tmp_path, impl=impl.name, read_only=True) as ro:
            monkeypatch.undo()
            assert deleted
            if kind == "commitlog":  # the files it listed before the clean are not served
                assert ro.commitlog.min_offset == w.commitlog.min_offset > 0
                lo = ro.min_offset("R", 0)
                assert lo == w.min_offset("R", 0) > 0
            else:  # it had mapped the CommitLog and consume queues before the clean: they stay readable
                assert [f.name for f in ro.index.index_files] == [f.name for f in w.index.index_files]
                lo = 0
            got = ro.get_messages("g", "R", 0, lo, 2).messages
            assert [m.body[:6] for m in got] == [b"r%05d" % lo, b"r%05d" % (lo + 1)]
            assert [m.body[:6] for m in ro.query_by_key("R", "k199")] == [b"r00199"]
    finally:
        monkeypatch.undo()
        w.close()


def test_a_full_disk_for_topics_json_is_waited_out(tmp_path: Path, impl,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The consume-queue flusher met ENOSPC writing topics.json: its thread ended, the topic was never
    written, and close() raised that stale DiskFullError long after space came back. Now the flush
    is retried, and close() raises only a full disk that lasts."""
    full = threading.Event()
    refused: list[str] = []
    real_open = open

    def disk(path, mode="r", *a, **k):  # type: ignore[no-untyped-def]
        if full.is_set() and "w" in mode and str(path).endswith("topics.json.tmp"):
            refused.append(str(path))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_open(path, mode, *a, **k)

    monkeypatch.setattr(configfiles, "open", disk, raising=False)
    topics = tmp_path / "config" / "topics.json"
    s = MessageStore(tmp_path, impl=impl.name, flush_interval_consume_queue_ms=2, **GEOM)
    try:
        s.put("T", b"x", 0)
        s.dispatch()
        _wait(lambda: topics.exists() and '"T"' in topics.read_text())
        full.set()
        s.put("U", b"y", 3)
        s.dispatch()
        _wait(lambda: len(refused) >= 2)  # the flusher tried, and tried again
        assert '"U"' not in topics.read_text()
        full.clear()  # space is back: the next flush writes the topic
        _wait(lambda: '"U"' in topics.read_text())
        s.close()
        full.set()  # a full disk at close itself is reported by close
        s = MessageStore(tmp_path, impl=impl.name)
        assert s.topics() == {"T": 4, "U": 4}
        s.put("V", b"z", 0)
        with pytest.raises(DiskFullError, match="topics.json"):
            s.close()
    finally:
        full.clear()
        s.close()
    with MessageStore(tmp_path, impl=impl.name) as s:
        assert [m.body for m in s.get_messages("g", "V", 0, 0).messages] == [b"z"]


def _wait(cond, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)
