"""A fuzz pass over the public API: wrong types and values for every argument of MessageStore's
methods, the CommitLog's, a ConsumeQueue's and the IndexService's reads, the Kafka package's public
classes and functions, and the ``rmqcore`` command line. Whatever the arguments, a call returns or
raises an :class:`~rmqcore.errors.RmqError` (``SystemExit`` from argparse for the command line), the
same class from both twins, and never crashes the interpreter. About 30 s in CI's profile."""
from __future__ import annotations

import contextlib
import io
import itertools
import math
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqcore import cli
from rmqcore.errors import MessageTooLargeError, RmqError
from rmqcore.kafka import KafkaLog, OffsetIndex, SegmentConfig, TimeIndex, encode_batch, read_batch
from rmqcore.store import MessageStore

from .conftest import FIXTURES

GEOM = dict(commitlog_file_size=8192, cq_file_size=400, index_slots=17, index_entries=100)
KAFKA_DIR = FIXTURES / "kafka" / "v2_transactions"

# values of every kind an argument could wrongly be given
JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.sampled_from([-1, 0, 1, 2**31, 2**63, -(2**63) - 1]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
    st.sampled_from(["", "T", "*", "\udc80", "a\0b", "../x", "T || U", "a/b", "k1"]),
    st.binary(max_size=12), st.sampled_from([b"", b"T", bytearray(b"xy"), memoryview(b"abcdef")[::2]]),
    st.lists(st.integers(-5, 5), max_size=3), st.tuples(st.integers(), st.text(max_size=2)),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
    st.sampled_from([np.int64(3), np.float64("nan"), np.array([1, 2]), object(), 1j, slice(1), math.inf]),
)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))


def _outcome(call: Callable[[], Any]) -> str:
    """What a call did: "ok" or the RmqError class; any other exception fails the test."""
    try:
        got = call()
        if isinstance(got, Iterator):
            list(itertools.islice(got, 50))
    except RmqError as e:
        return type(e).__name__
    return "ok"


def _args(data: st.DataObject, good: list[Any]) -> list[Any]:
    """``good`` with at least one argument replaced by junk."""
    args = list(good)
    at = data.draw(st.sets(st.integers(0, len(good) - 1), min_size=1, max_size=len(good)), label="junk at")
    for i in at:
        args[i] = data.draw(JUNK, label=f"arg {i}")
    return args


# -- MessageStore and the classes it hands out ---------------------------------------------------------
def _store_calls(s: MessageStore) -> dict[str, tuple[Callable[..., Any], list[Any]]]:
    cq = s.consume_queue("T", 0)
    assert cq is not None and s.index is not None
    return {
        "put": (lambda *a: s.put(a[0], a[1], a[2], tags=a[3], keys=a[4], flag=a[5], born_timestamp=a[6],
                                 store_host=a[7]), ["T", b"x", 0, "A", "k1", 0, None, None]),
        "put props": (lambda *a: s.put(a[0], a[1], properties=a[2], properties_raw=a[3], sys_flag=a[4]),
                      ["T", b"x", {"P": "v"}, None, 0]),
        "put_batch": (lambda *a: s.put_batch(a[0], a[1], a[2], tags=a[3], keys=a[4], properties=a[5],
                                             flags=a[6], sys_flag=a[7]),
                      ["T", [b"a", b"b"], 0, ["A", None], None, None, None, 0]),
        "put_batch raw": (lambda *a: s.put_batch(a[0], a[1], properties_raw=a[2], born_timestamp=a[3],
                                                 born_host=a[4]), ["T", [b"a"], ["KEYS\x01k"], None, None]),
        "put_async": (lambda *a: s.put_async(a[0], a[1], a[2]).result(), ["T", b"x", 1]),
        "get_messages": (lambda *a: s.get_messages(*a).messages,
                         ["g", "T", 0, 0, 4, 1 << 20, "A"]),
        "query_by_key": (lambda *a: s.query_by_key(a[0], a[1], a[2], a[3], a[4], raw=a[5]),
                         ["T", "k1", 0, 2**63 - 1, 8, False]),
        "lookup": (s.lookup, ["T", "k1", 0, 2**63 - 1]),
        "query_offsets": (s.query_offsets, ["T", "k1", 0, 2**63 - 1, 8]),
        "min/max_offset": (lambda *a: (s.min_offset(*a), s.max_offset(*a)), ["T", 0]),
        "read_record_bytes": (s.read_record_bytes, [0, 100]),
        "get_by_msg_id": (s.get_by_msg_id, ["7F00000100002A9F0000000000000000"]),
        "store_time_of": (s.store_time_of, [0, 0]),
        "offset_by_time": (s.offset_by_time, ["T", 0, 0, "upper"]),
        "commitlog_offset_by_time": (s.commitlog_offset_by_time, [0, True]),
        "earliest_message_time": (s.earliest_message_time, ["T", 0]),
        "record_views": (lambda *a: _viewed(s, *a), [[0]]),
        "iter_queue": (s.iter_queue, ["T", 0, 0]),
        "commit/fetch_offset": (lambda *a: (s.commit_offset(*a), s.fetch_offset(*a[:3])), ["g", "T", 0, 1]),
        "consume_queue": (s.consume_queue, ["T", 0, False]),
        "dispatch": (s.dispatch, [None]),
        "wait_dispatched": (s.wait_dispatched, [0.5]),
        "clean_expired": (lambda *a: s.clean_expired(a[0], force=a[1], usage_ratio=a[2]), [0, False, 10.0]),
        "commitlog.read": (lambda *a: s.commitlog.read(a[0], verify_crc=a[1]), [0, True]),
        "commitlog.read_many": (s.commitlog.read_many, [[0]]),
        "commitlog.read_batch": (lambda *a: s.commitlog.read_batch(*a), [0, 16]),
        "commitlog.iter_records": (s.commitlog.iter_records, [0]),
        "cq.get": (cq.get, [0]),
        "cq.first_at_or_after": (cq.first_at_or_after, [0]),
        "index.query_offset": (s.index.query_offset, ["T", "k1", 8, 0, 2**63 - 1]),
    }


def _viewed(s: MessageStore, offsets: Any) -> list[bytes]:
    with s.record_views(offsets) as views:
        return [bytes(v) for v in views]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, MessageStore]]:
    """One writable store per implementation, shared by the examples (the fuzz only adds to it)."""
    out: dict[str, MessageStore] = {}
    yield out
    for s in out.values():
        s.close()


def _store(stores: dict[str, MessageStore], tmp_path_factory: pytest.TempPathFactory,
           name: str) -> MessageStore:
    if name not in stores:
        s = MessageStore(tmp_path_factory.mktemp(f"fuzz-{name}"), impl=name, **GEOM)
        for i in range(30):
            s.put("T", b"m%02d" % i, 0, tags="A", keys=f"k{i % 3}")
        s.dispatch()
        stores[name] = s
    return stores[name]


@SETTINGS
@given(data=st.data())
def test_store_methods_take_any_argument(stores, tmp_path_factory, impl, data) -> None:
    s = _store(stores, tmp_path_factory, impl.name)
    calls = _store_calls(s)
    name = data.draw(st.sampled_from(sorted(calls)), label="method")
    fn, good = calls[name]
    args = _args(data, good)
    _outcome(lambda: fn(*args))
    assert not s._closed and s.commitlog.max_offset > 0  # still open and whole


@SETTINGS
@given(data=st.data())
def test_store_methods_raise_the_same_class_from_both_twins(stores, tmp_path_factory, data) -> None:
    """The same junk, one call per twin's store: the same outcome (their stores differ only in time)."""
    names = [n for n in ("pure", "native") if n in _impls()]
    if len(names) < 2:
        pytest.skip("one implementation under test")
    pure, native = (_store(stores, tmp_path_factory, n) for n in names)
    calls_p, calls_n = _store_calls(pure), _store_calls(native)
    name = data.draw(st.sampled_from(sorted(n for n in calls_p if not n.startswith(("put", "clean")))))
    args = _args(data, calls_p[name][1])
    assert _outcome(lambda: calls_p[name][0](*args)) == _outcome(lambda: calls_n[name][0](*args)), name


def _impls() -> list[str]:
    from .conftest import IMPLS

    return IMPLS


@SETTINGS
@given(data=st.data())
def test_opening_a_store_with_any_argument(tmp_path_factory, impl, data) -> None:
    d = tmp_path_factory.mktemp("open")
    keys = ["commitlog_file_size", "cq_file_size", "index_slots", "index_entries", "flavour",
            "flush_disk_type",
            "dispatch", "max_message_size", "file_reserved_time_hours", "huge_pages", "store_host", "clock",
            "delete_when", "logics_warm_ahead", "index_interval_bytes", "no_such_setting"]
    names = data.draw(st.sets(st.sampled_from(keys), min_size=1, max_size=3), label="settings")
    kw = {k: data.draw(JUNK, label=k) for k in names}
    where = data.draw(st.sampled_from([d, str(d), d / "file", 5, b"x", "a\0b"]), label="store_dir")
    if where == d / "file":
        where.write_bytes(b"not a store")
    read_only = data.draw(st.sampled_from([False, True, "yes"]), label="read_only")
    for args in ((where,), (d,)):
        try:
            s = MessageStore(*args, impl=impl.name, read_only=read_only, **dict(GEOM, **kw))
        except RmqError:
            continue
        with s:
            if not s.read_only:
                if s.config.max_message_size < 1:  # a limit the store was given: it refuses a 1-byte body
                    with pytest.raises(MessageTooLargeError):
                        s.put("T", b"x", 0)
                else:
                    s.put("T", b"x", 0)
    shutil.rmtree(d)


# -- the Kafka package -----------------------------------------------------------------------------------
@SETTINGS
@given(data=st.data())
def test_kafka_classes_take_any_argument(tmp_path_factory, impl, data) -> None:
    d = tmp_path_factory.mktemp("k") / "t-0"
    shutil.copytree(KAFKA_DIR, d, ignore=shutil.ignore_patterns("manifest.json"))
    other = shutil.copytree(d, d.parent / "t-1")  # opened (writable too) while `log` holds t-0
    good_batch = encode_batch([(100, 1, b"k", b"v")], base_offset=100)
    log = KafkaLog(d, writable=True, impl=impl.name)
    seg = log.segments[0]
    calls: dict[str, tuple[Callable[..., Any], list[Any]]] = {
        "open": (lambda *a: KafkaLog(_inside(other.parent, a[0]), a[1], writable=a[2], recover=a[3],
                                     impl=impl.name).close(), [other, None, False, False]),
        "translate_offset": (log.translate_offset, [3]),
        "find_offset_by_timestamp": (log.find_offset_by_timestamp, [0]),
        "segment_for": (log.segment_for, [3]),
        "append": (log.append, [good_batch]),
        "roll": (log.roll, [None]),
        "segment.translate_offset": (seg.translate_offset, [3, 0]),
        "segment.find_offset_by_timestamp": (seg.find_offset_by_timestamp, [0, 0]),
        "segment.batches": (lambda *a: seg.batches(a[0], strict=a[1]), [0, True]),
        "segment.truncate_to": (seg.truncate_to, [10**9]),
        "segment.should_roll": (seg.should_roll, [10, 0, 5]),
        "offset_index.lookup": (seg.offset_index.lookup, [3]),
        "offset_index.entry": (seg.offset_index.entry, [0]),
        "offset_index.fetch_upper_bound_offset": (seg.offset_index.fetch_upper_bound_offset, [0, 100]),
        "time_index.lookup": (seg.time_index.lookup, [0]),
        "time_index.entry": (seg.time_index.entry, [0]),
        "OffsetIndex": (lambda *a: OffsetIndex(d / "x.index", a[0], a[1], writable=a[2]).close(),
                        [0, 4096, True]),
        "TimeIndex": (lambda *a: TimeIndex(d / "x.timeindex", a[0], a[1], writable=a[2]).close(),
                      [0, 4096, True]),
        "SegmentConfig": (lambda *a: SegmentConfig(*a), [4096, 1 << 20, 1 << 30]),
        "SegmentConfig.from_kafka": (lambda *a: SegmentConfig.from_kafka(a[0]), [{"segment.bytes": 1 << 20}]),
        "SegmentConfig.from_kafka value": (lambda v: SegmentConfig.from_kafka({"segment.bytes": v}),
                                           [1 << 20]),
        "read_batch": (lambda *a: read_batch(*a, impl=impl.name).records(),
                       [good_batch, 0, len(good_batch), 2]),
        "encode_batch": (lambda *a: encode_batch(a[0], base_offset=a[1], compression_type=a[2],
                                                 timestamp_type=a[3], producer_id=a[4], impl=impl.name),
                         [[(0, 1, b"k", b"v")], 0, "gzip", "CreateTime", -1]),
    }
    name = data.draw(st.sampled_from(sorted(calls)), label="call")
    fn, good = calls[name]
    args = _args(data, good)
    try:
        _outcome(lambda: fn(*args))
    finally:
        log.close()
    shutil.rmtree(d.parent)


def _inside(root: Path, where: Any) -> Any:
    """A str or bytes path made relative to ``root`` (a writable open creates what it names: never
    in the working directory or outside the test's temp dir); anything else as it is."""
    if isinstance(where, (str, bytes)):
        name = os.fsdecode(where).replace("/", "_").replace("\0", "_") or "_"
        return root / ("_" + name if name in (".", "..") else name)
    return where


# -- the command line --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    store = tmp_path_factory.mktemp("cli") / "store"
    with MessageStore(store, **GEOM) as s:
        for i in range(20):
            s.put("T", b"m%02d" % i, i % 2, keys=f"k{i}")
    bad = shutil.copytree(store, store.parent / "badgeo")  # rmqcore.json as a hand edit may leave it
    geo = bad / "rmqcore.json"
    geo.write_text(geo.read_text().replace('"commitlog_file_size": 8192', '"commitlog_file_size": 1e400'))
    return {"STORE": str(store), "BADGEO": str(bad), "KAFKA": str(KAFKA_DIR),
            "MISSING": str(store.parent / "missing")}


WORDS = ["info", "stats", "dump", "commitlog", "cq", "index", "checkpoint", "query", "get", "offset-by-time",
         "verify", "recover", "kafka", "lookup", "--json", "--topic", "--key", "--queue", "--offset",
         "--time",
         "--from", "--max", "--raw", "--begin", "--end", "--boundary", "lower", "--flavour", "4", "7",
         "--timestamp", "--commitlog-file-size", "--cq-file-size", "--index-slots", "--index-entries", "T",
         "0", "-1", "99999999999999999999999", "1e400", "x", "", "\udc80", "STORE", "BADGEO", "KAFKA",
         "MISSING"]


COMMANDS = [["info"], ["stats"], ["dump", "commitlog"], ["dump", "cq"], ["dump", "index"],
            ["dump", "checkpoint"], ["query"], ["get"], ["offset-by-time"], ["verify"], ["kafka", "dump"],
            ["kafka", "lookup"]]
WORD = st.sampled_from(WORDS) | st.text(max_size=5)
ARGV = st.lists(WORD, max_size=8) | st.builds(  # a command, a directory, options
    lambda c, d, o: [*c, d, *o], st.sampled_from(COMMANDS),
    st.sampled_from(["STORE", "BADGEO", "KAFKA", "MISSING"]), st.lists(WORD, max_size=6))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(argv=ARGV)
def test_the_command_line_with_any_argv(cli_dirs, argv) -> None:
    """Exit 0, 1 or 2 with at most one error line, never a traceback (recover works on a copy)."""
    argv = [cli_dirs.get(a, a) for a in argv]
    if "recover" in argv:
        return  # it writes: covered by tests/test_cli.py
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(argv)
        except SystemExit as e:  # argparse: usage errors and --help
            rc = e.code if isinstance(e.code, int) else 2
    assert rc in (0, 1, 2), (argv, rc, err.getvalue())
    lines = [x for x in err.getvalue().splitlines() if x.startswith("rmqcore: error:")]
    assert len(lines) <= 1 and "Traceback" not in err.getvalue(), (argv, err.getvalue())
