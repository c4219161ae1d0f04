"""CommitLog and MappedFileQueue behaviour: rolling, BLANK rule, validation, reopening, errors."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqcore import layout as L
from rmqcore.commitlog import Blank, CommitLog, ScanStop, column_buffer
from rmqcore.errors import (
    ChecksumError,
    ConfigError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    PropertiesTooLargeError,
    StoreClosedError,
)
from rmqcore.message import MessageExt, decode_message_id
from tests.conftest import IMPLS

FS = 4096


def _cl(path: Path, impl, **kw) -> CommitLog:
    kw.setdefault("file_size", FS)
    kw.setdefault("store_host", "10.0.0.1:10911")
    kw.setdefault("clock", lambda: 1_700_000_000_000)
    return CommitLog(path, impl=impl.name, **kw)


def _files(path: Path) -> list[str]:
    return sorted(os.listdir(path / "commitlog"))


def test_append_read_roundtrip_and_msgid(tmp_path: Path, impl) -> None:
    with _cl(tmp_path, impl) as cl:
        r = cl.put("TopicA", b"hello", 3, tags="TagA", keys=["k1", "k2"], properties={"x": "y"})
        assert (r.physical_offset, r.queue_offset, r.store_timestamp) == (0, 0, 1_700_000_000_000)
        m = cl.read(0, verify_crc=True)
        assert (m.topic, m.queue_id, m.body, m.tags, m.keys, m.properties["x"]) == (
            "TopicA", 3, b"hello", "TagA", ["k1", "k2"], "y")
        assert m.size == r.size and m.physical_offset == 0
        host, off = decode_message_id(r.msg_id)
        assert (str(host), off) == ("10.0.0.1:10911", 0)
        r2 = cl.put("TopicA", b"", 3)
        assert r2.queue_offset == 1 and r2.physical_offset == r.size


def test_queue_offsets_per_topic_queue_and_transactions(tmp_path: Path, impl) -> None:
    with _cl(tmp_path, impl) as cl:
        assert [cl.put("T", b"a", 0).queue_offset for _ in range(3)] == [0, 1, 2]
        assert cl.put("T", b"a", 1).queue_offset == 0
        assert cl.put("U", b"a", 0).queue_offset == 0
        prep = cl.put("T", b"half", 0, sys_flag=L.TRANSACTION_PREPARED)
        assert prep.queue_offset == 0
        assert cl.put("T", b"rb", 0, sys_flag=L.TRANSACTION_ROLLBACK, prepared_transaction_offset=prep.physical_offset).queue_offset == 0
        assert cl.put("T", b"commit", 0, sys_flag=L.TRANSACTION_COMMIT).queue_offset == 3


def test_alternating_topics_keep_their_own_queues(tmp_path: Path, impl) -> None:
    """The appender remembers the last topic it put (its bytes and queue table): runs of puts to
    one topic, switches, equal topics in other str objects, a str subclass, a batch in between and
    a reset of the queue offsets all land in the right topic and queue offset."""

    class Name(str):
        pass

    with _cl(tmp_path, impl) as cl:
        with pytest.raises(InvalidTopicError):
            cl.put(None, b"x", 0)  # type: ignore[arg-type]
        seq = ["A", "A", "B", "A", "".join(["A"]), Name("B"), "B", "C", "A"]
        want: dict[str, int] = {}
        got = []
        for i, t in enumerate(seq):
            if i == 4:
                assert cl.put_batch("B", [b"1", b"2"], 0).queue_offset == want.get("B", 0)
                want["B"] = want.get("B", 0) + 2
            r = cl.put(t, b"m%d" % i, 0)
            assert r.queue_offset == want.get(str(t), 0)
            want[str(t)] = want.get(str(t), 0) + 1
            got.append((cl.read(r.physical_offset).topic, r.queue_offset))
        assert [t for t, _ in got] == [str(t) for t in seq]
        cl._appender.clear_queue_offsets()
        assert cl.put("A", b"again", 0).queue_offset == 0 and cl.put("B", b"again", 0).queue_offset == 0


def test_next_file_is_prepared_once_a_quarter_of_the_current_one_is_written(tmp_path: Path, impl) -> None:
    """AllocateMappedFileService, later than RocketMQ's: the next file is created (allocated, in
    the background) when a put finds the current file written past ``prepare_at``, a quarter of
    it, once per file; the roll then takes that file. A small store keeps one allocated file."""
    size = 64 * 1024
    with _cl(tmp_path, impl, file_size=size) as cl:
        assert cl.prepare_at == size // 4
        asked: list[int] = []
        real = cl.queue.prepare_next

        def prepare_next(prefault: bool = True) -> None:
            asked.append(cl.max_offset)  # where the log stood when the put asked
            real(prefault)

        cl.queue.prepare_next = prepare_next  # type: ignore[method-assign]
        r = cl.put("T", b"x" * 500, 0)
        rec = r.size
        while cl.max_offset < size // 4:
            cl.put("T", b"x" * 500, 0)
            assert asked == [] and _files(tmp_path) == ["00000000000000000000"]
        cl.put("T", b"x" * 500, 0)  # the first put that finds a quarter written asks, before it writes
        assert asked == [cl.max_offset - rec]
        cl.queue.wait_prepared()
        prepared = cl.queue._prepared
        assert prepared is not None and prepared.file_from_offset == size
        assert _files(tmp_path) == ["00000000000000000000", "00000000000000065536"]
        while cl.max_offset < size:  # the roll takes the prepared file; asked once for this file
            cl.put_batch("T", [b"y" * 500] * 3, 0)
        assert cl.queue.files[1] is prepared and len(asked) == 1
        while cl.max_offset < size + size // 4:
            cl.put_batch("T", [b"y" * 500] * 3, 0)
        cl.put_batch("T", [b"y" * 500] * 3, 0)
        assert len(asked) == 2  # the second file asks for the third
    with _cl(tmp_path, impl, file_size=size) as cl:  # reopened past a quarter: the first put asks
        assert cl.queue._prepared is None
        cl.put("T", b"z", 0)
        cl.queue.wait_prepared()
        assert cl.queue._prepared is not None and cl.queue._prepared.file_from_offset == 2 * size
    with _cl(tmp_path / "off", impl, file_size=size, prepare_next=False) as cl:
        for _ in range(200):
            cl.put("T", b"x" * 500, 0)
        assert cl.max_offset > size and cl.queue._prepared is None and cl.queue._prepare_thread is None


def test_roll_writes_blank_and_every_file_ends_with_one(tmp_path: Path, impl) -> None:
    body = b"x" * 300
    with _cl(tmp_path, impl, prepare_next=False) as cl:
        results = [cl.put("TopicA", body, 0) for _ in range(40)]
        size = results[0].size
        per_file = (FS - 8) // size  # a record is appended only if size + 8 <= bytes left
        assert results[per_file].physical_offset == FS
        assert results[per_file - 1].physical_offset == (per_file - 1) * size
        items = list(cl.iter_records())
    blanks = [i for i in items if isinstance(i, Blank)]
    assert blanks[0] == Blank(per_file * size, FS - per_file * size, FS)
    assert all(b.file_end % FS == 0 for b in blanks)
    assert sum(isinstance(i, MessageExt) for i in items) == 40


def test_exact_fit_rules(tmp_path: Path, impl) -> None:
    with _cl(tmp_path, impl, prepare_next=False) as cl:
        first = cl.put("T", b"", 0)
        base = first.size  # 91 + topic 1 = 92 bytes with empty body and properties
        # a record leaving exactly 8 bytes fits; an 8-byte BLANK follows
        n = FS - first.size - 8 - base
        r = cl.put("T", b"z" * n, 0)
        assert r.physical_offset == first.size and r.physical_offset + r.size == FS - 8
        nxt = cl.put("T", b"", 0)
        assert nxt.physical_offset == FS
    with _cl(tmp_path / "b", impl, prepare_next=False) as cl:
        first = cl.put("T", b"", 0)
        # msgLen == bytes left does not fit (needs 8 more)
        r = cl.put("T", b"z" * (FS - first.size - first.size), 0)
        assert r.physical_offset == FS
        items = list(cl.iter_records())
        assert items[1] == Blank(first.size, FS - first.size, FS)


def test_batch_never_splits_and_is_all_or_nothing(tmp_path: Path, impl) -> None:
    with _cl(tmp_path, impl, prepare_next=False) as cl:
        cl.put("T", b"x" * 3000, 1)
        b = cl.put_batch("T", [b"a" * 300] * 5, 1, properties={"k": "v"})
        assert b.physical_offset == FS  # whole batch moved to the next file
        assert b.queue_offset == 1 and b.count == 5
        offs = b.physical_offsets
        assert [cl.read(o).queue_offset for o in offs] == [1, 2, 3, 4, 5]
        assert len(b.msg_id.split(",")) == 5
        before = cl.max_offset
        with pytest.raises(MessageTooLargeError):
            cl.put_batch("T", [b"a" * 3000, b"b" * 3000], 1)
        with pytest.raises(InvalidMessageError):
            cl.put_batch("T", [b"a", "not bytes"], 1)  # type: ignore[list-item]
        assert cl.max_offset == before
        assert cl.put("T", b"after", 1).queue_offset == 6


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        (dict(topic="bad topic"), InvalidTopicError),
        (dict(topic=""), InvalidTopicError),
        (dict(topic="T" * 256), InvalidTopicError),
        (dict(topic="主题"), InvalidTopicError),
        (dict(topic=None), InvalidTopicError),  # first of all: nothing was put before it
        (dict(body="text"), InvalidMessageError),
        (dict(body=b"x" * 1025), MessageTooLargeError),
        (dict(properties={"p": "v" * 32767}), PropertiesTooLargeError),
        (dict(properties={"a\x01b": "v"}), InvalidMessageError),
        (dict(queue_id=-1), InvalidMessageError),
        (dict(flag=2**31), InvalidMessageError),
        (dict(born_host="nonsense"), InvalidMessageError),
        (dict(born_timestamp=2**63), InvalidMessageError),
    ],
)
def test_bad_input_raises_and_writes_nothing(tmp_path: Path, impl, kwargs, exc) -> None:
    with _cl(tmp_path, impl, max_message_size=1024) as cl:
        cl.put("T", b"first", 0)
        before = cl.max_offset
        args = dict(topic="T", body=b"b", queue_id=0)
        args.update(kwargs)
        with pytest.raises(exc):
            cl.put(args.pop("topic"), args.pop("body"), args.pop("queue_id"), **args)
        assert cl.max_offset == before
        assert cl.put("T", b"next", 0).queue_offset == 1


# ASCII with both separators, their neighbours and a space (the KEYS token separator)
_PROP_TEXT = st.text(alphabet=st.sampled_from("\x00\x01\x02\x03 aZ~#\x7f"), max_size=40)


@settings(max_examples=120, deadline=None)
@given(tags=st.one_of(st.none(), _PROP_TEXT), keys=st.one_of(st.none(), _PROP_TEXT))
def test_separators_in_tags_and_keys(tags: str | None, keys: str | None) -> None:
    """The native put checks ASCII tags and keys for RocketMQ's separators (\\x01, \\x02) eight
    bytes at a time, re-reading the last eight for a tail, and byte by byte below eight: a separator
    at any position is refused and nothing is written; anything else is stored as given, by both
    twins alike."""
    bad = any(v is not None and ("\x01" in v or "\x02" in v) for v in (tags, keys))
    parts = ([] if keys is None else [f"KEYS\x01{keys}"]) + ([] if tags is None else [f"TAGS\x01{tags}"])
    want = "\x02".join(parts) + ("\x02" if parts else "")  # flavour 5 ends a non-empty string with \x02
    for name in IMPLS:
        with tempfile.TemporaryDirectory(prefix="rmqscratch-") as d, \
                CommitLog(d, impl=name, file_size=FS, clock=lambda: 1_700_000_000_000) as cl:
            if bad:
                with pytest.raises(InvalidMessageError, match="separator"):
                    cl.put("T", b"b", 0, tags=tags, keys=keys)
                assert cl.max_offset == 0
            else:
                cl.put("T", b"b", 0, tags=tags, keys=keys)
                assert cl.read(0).properties_string == want


@pytest.mark.parametrize("n", range(1, 26))
def test_a_separator_at_every_position_is_refused(tmp_path: Path, impl, n: int) -> None:
    """Every position of strings of 1-25 bytes (shorter than a word, whole words, tails)."""
    with _cl(tmp_path, impl) as cl:
        for at in range(n):
            for sep in "\x01\x02":
                s = "k" * at + sep + "k" * (n - at - 1)
                for kw in (dict(keys=s), dict(tags=s), dict(keys="ok", tags=s)):
                    with pytest.raises(InvalidMessageError, match="separator"):
                        cl.put("T", b"b", 0, **kw)
        assert cl.max_offset == 0
        tags, keys = "\x00\x03" * n, "\x7f" * n  # the separators' neighbours are allowed
        cl.put("T", b"b", 0, tags=tags, keys=keys)
        assert cl.read(0).properties_string == "KEYS\x01" + keys + "\x02TAGS\x01" + tags + "\x02"


@pytest.mark.parametrize("field, value", [
    ("queue_id", 2**31), ("queue_id", 2**64), ("queue_id", -(2**70)), ("flag", -(2**31) - 1),
    ("sys_flag", 2**100), ("reconsume_times", 2**31), ("prepared_transaction_offset", 2**63),
    ("prepared_transaction_offset", -(2**63) - 1), ("born_timestamp", -(2**200)),
])  # fmt: skip
def test_int_fields_out_of_range_write_nothing(tmp_path: Path, impl, field: str, value: int) -> None:
    """Integers past the field's range, int64's included, are an InvalidMessageError, not an
    OverflowError, and nothing is written; the extremes that fit are stored."""
    with _cl(tmp_path, impl) as cl:
        kw = dict(queue_id=0) | {field: value}
        with pytest.raises(InvalidMessageError) as e:
            cl.put("T", b"b", kw.pop("queue_id"), **kw)
        assert not isinstance(e.value, OverflowError)
        assert cl.max_offset == 0
        r = cl.put("T", b"b", 2**31 - 1, flag=-(2**31), prepared_transaction_offset=-(2**63),
                   born_timestamp=2**63 - 1)
        m = cl.read(r.physical_offset)
        assert (m.queue_id, m.flag, m.prepared_transaction_offset, m.born_timestamp) == \
            (2**31 - 1, -(2**31), -(2**63), 2**63 - 1)


def test_any_int32_queue_id_keeps_its_own_offsets(tmp_path: Path, impl) -> None:
    """Queue ids up to 2**31 - 1 are valid. The native twin keeps ids below 4096 in an array and
    larger ones in a dict: a put to queue 2**31 - 1 once grew the array to 16 GiB."""
    import resource
    import sys

    def rss_bytes() -> int:
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return r if sys.platform == "darwin" else r * 1024

    before = rss_bytes()
    with _cl(tmp_path, impl, file_size=1 << 20) as cl:
        qids = [0, 4095, 4096, 70_000, 2**31 - 1]
        for rnd in range(2):
            for q in qids:
                assert cl.put("T", b"b", q).queue_offset == rnd
        for q in qids:
            assert cl.put_batch("T", [b"x", b"y"], q).queue_offset == 2
        cl.set_queue_offset("T", 2**31 - 2, 7)
        assert cl.put("T", b"b", 2**31 - 2).queue_offset == 7
        assert cl.topic_queue_table == {**{("T", q): 4 for q in qids}, ("T", 2**31 - 2): 8}
    assert rss_bytes() - before < 256 << 20


@pytest.mark.parametrize("bad", [b"x" * 1025, bytearray(1025), memoryview(b"x" * 2000), 7, None])
def test_bad_batch_body_raises_and_writes_nothing(tmp_path: Path, impl, bad) -> None:
    """Body lengths are checked in the appender (either twin) before anything is written."""
    with _cl(tmp_path, impl, max_message_size=1024) as cl:
        cl.put("T", b"first", 0)
        before = cl.max_offset
        exc = MessageTooLargeError if isinstance(bad, (bytes, bytearray, memoryview)) else InvalidMessageError
        with pytest.raises(exc):
            cl.put_batch("T", [b"ok", b"y" * 1024, bad, b"ok"], 0)
        assert cl.max_offset == before
        assert cl.put_batch("T", [b"y" * 1024, b"z"], 0).queue_offset == 1


def test_flavour_4_limits_topic_and_5_uses_v2(tmp_path: Path, impl) -> None:
    long_topic = "t" * 200
    with _cl(tmp_path / "4", impl, flavour=4) as cl:
        with pytest.raises(InvalidTopicError):
            cl.put(long_topic, b"x")
        cl.put("t" * 127, b"x", properties={"a": "b"})
        assert cl.read(0).properties_string == "a\x01b"
    with _cl(tmp_path / "5", impl, flavour=5) as cl:
        r = cl.put(long_topic, b"x", properties={"a": "b"})
        m = cl.read(r.physical_offset)
        assert (m.magic, m.topic, m.properties_string) == (L.MAGIC_V2, long_topic, "a\x01b\x02")
        m127 = cl.read(cl.put("t" * 127, b"x").physical_offset)
        assert m127.magic == L.MAGIC_V1


def test_reopen_continues_at_end(tmp_path: Path, impl) -> None:
    with _cl(tmp_path, impl) as cl:
        for i in range(30):
            cl.put("T", b"y" * 200, i % 2)
        end = cl.max_offset
    assert _files(tmp_path)[-1] == L.offset_to_file_name(end - end % FS)  # no pre-allocated file left
    with _cl(tmp_path, impl) as cl:
        assert cl.max_offset == end
        cl.rebuild_queue_offsets()
        assert cl.put("T", b"z", 0).queue_offset == 15
        assert cl.read(end).body == b"z"


def test_torn_tail_is_cut_on_open(tmp_path: Path, impl) -> None:
    with _cl(tmp_path, impl, prepare_next=False) as cl:
        rs = [cl.put("T", b"q" * 100, 0) for _ in range(5)]
    last = rs[-1]
    path = tmp_path / "commitlog" / L.offset_to_file_name(0)
    with open(path, "r+b") as f:
        f.seek(last.physical_offset + 50)
        f.write(b"\0" * (last.size - 50))
    with _cl(tmp_path, impl) as cl:
        assert cl.max_offset == last.physical_offset
        assert cl.put("T", b"new", 0).physical_offset == last.physical_offset


def test_corrupt_record_error_names_file_and_offset(tmp_path: Path, impl) -> None:
    with _cl(tmp_path, impl, prepare_next=False) as cl:
        rs = [cl.put("T", b"q" * 100, 0) for _ in range(3)]
    path = tmp_path / "commitlog" / L.offset_to_file_name(0)
    data = bytearray(path.read_bytes())
    data[rs[1].physical_offset + 100] ^= 0x40  # a body byte of the middle record
    path.write_bytes(bytes(data))
    with _cl(tmp_path, impl, check_crc=False) as cl:
        with pytest.raises(ChecksumError) as ei:
            cl.read(rs[1].physical_offset, verify_crc=True)
        assert ei.value.path == str(path) and ei.value.position == rs[1].physical_offset
        items = list(cl.iter_records(verify_crc=True))
        assert isinstance(items[-1], ScanStop) and items[-1].status == L.ST_BAD_CRC
        assert items[-1].position == rs[1].physical_offset
        with pytest.raises(OffsetOutOfRangeError):
            cl.read(10**9)
        # read_many: the same error for the same record, after the good one before it
        with pytest.raises(ChecksumError) as ei:
            cl.read_many([rs[0].physical_offset, rs[1].physical_offset], verify_crc=True)
        assert ei.value.path == str(path) and ei.value.position == rs[1].physical_offset
        flipped = cl.read(rs[1].physical_offset).body  # without the CRC check: served as stored
        assert flipped != b"q" * 100
        assert [m.body for m in cl.read_many([rs[2].physical_offset, rs[1].physical_offset])] == [b"q" * 100, flipped]


def _read_many_outcome(cl: CommitLog, offsets: list[int], verify: bool) -> tuple:
    try:
        return ("ok", [(m.position, m.body, m.queue_offset, m.topic) for m in cl.read_many(offsets, verify)])
    except Exception as e:  # noqa: BLE001 - compared with read's
        return ("raise", type(e), str(e))


def _read_outcome(cl: CommitLog, offsets: list[int], verify: bool) -> tuple:
    try:
        return ("ok", [(m.position, m.body, m.queue_offset, m.topic) for m in (cl.read(o, verify) for o in offsets)])
    except Exception as e:  # noqa: BLE001
        return ("raise", type(e), str(e))


def test_read_many_is_read_of_each_offset(tmp_path: Path, impl) -> None:
    """``read_many`` over runs in several files, any order, repeats, and offsets that are out of
    range, at a BLANK or inside a record: the same messages or the same first error as ``read``."""
    import random

    with _cl(tmp_path, impl, prepare_next=False) as cl:
        rs = [cl.put("T%d" % (i % 3), b"m%04d" % i * (1 + i % 40), i % 2) for i in range(120)]
        assert len(cl.queue.files) >= 3
        good = [r.physical_offset for r in rs]
        blank = [mf.file_from_offset + mf.wrote_position for mf in cl.queue.files[:-1]
                 if mf.wrote_position < mf.file_size]
        bad = [*blank, good[5] + 1, -1, cl.max_offset, 10**12, "x", None, 1.5, float(good[3])]  # ConfigError for non-ints
        rnd = random.Random(3)
        cases = [good, sorted(rnd.sample(good, 40)), rnd.sample(good, 40), [good[7]] * 3, []]
        cases += [[*rnd.sample(good, 5), b, *rnd.sample(good, 5)] for b in bad]
        for offsets in cases:
            for verify in (False, True):
                assert _read_many_outcome(cl, offsets, verify) == _read_outcome(cl, offsets, verify)
        assert _read_many_outcome(cl, good, True)[1] == [(r.physical_offset, b"m%04d" % i * (1 + i % 40),
                                                          r.queue_offset, "T%d" % (i % 3)) for i, r in enumerate(rs)]


def test_wrong_sized_file_is_a_clear_error_and_empty_last_file_deleted(tmp_path: Path, impl) -> None:
    d = tmp_path / "commitlog"
    d.mkdir()
    (d / L.offset_to_file_name(0)).write_bytes(b"\0" * 100)
    (d / L.offset_to_file_name(FS)).write_bytes(b"")
    with pytest.raises(ConfigError, match="length 100"):
        _cl(tmp_path, impl)
    (d / L.offset_to_file_name(0)).write_bytes(b"\0" * FS)
    (d / "notes.txt").write_text("stray")
    with _cl(tmp_path, impl) as cl:
        assert cl.max_offset == 0
    assert not (d / L.offset_to_file_name(FS)).exists()


def test_closed_commitlog_refuses_use(tmp_path: Path, impl) -> None:
    cl = _cl(tmp_path, impl)
    cl.put("T", b"x")
    cl.close()
    cl.close()
    with pytest.raises(StoreClosedError):
        cl.put("T", b"x")
    with pytest.raises(StoreClosedError):
        cl.read(0)


def test_read_batch_columns_match_records(tmp_path: Path, impl) -> None:
    with _cl(tmp_path, impl, prepare_next=False) as cl:
        rs = [cl.put(f"T{i % 3}", bytes([i]) * i, i % 4, tags=f"g{i}") for i in range(20)]
        got = []
        off = 0
        while off < cl.max_offset:
            b = cl.read_batch(off, 7, verify_crc=True)
            got.extend(zip(b.physical_positions.tolist(), b.topics(), b.bodies(), b.column("queue_id").tolist()))
            off = b.next_offset
    assert got == [(r.physical_offset, f"T{i % 3}", bytes([i]) * i, i % 4) for i, r in enumerate(rs)]


def test_read_batch_any_max_records(tmp_path: Path, impl) -> None:
    """A huge max_records reads what there is (columns are sized by the bytes written, not by the
    argument: 2**62 rows once raised numpy's "array is too big"); below 1 or not an int is a
    ConfigError (0 used to read one record)."""
    with _cl(tmp_path, impl, prepare_next=False, file_size=1 << 16) as cl:
        rs = [cl.put("T", bytes([i]) * i, 0) for i in range(30)]
        for n in (2**62, np.int64(2**40), 31, 30):
            b = cl.read_batch(0, n)
            assert b.physical_positions.tolist() == [r.physical_offset for r in rs] and b.next_offset == cl.max_offset
        assert len(cl.read_batch(rs[29].physical_offset, 2**62)) == 1
        assert len(cl.read_batch(cl.max_offset, 2**62)) == 0
        for bad in (0, -1, 1.5, "8", None):
            with pytest.raises(ConfigError):
                cl.read_batch(0, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("cap", [1, 100, 511, 512, 513, 1000, 8192])
def test_column_buffer_rows_are_off_4k_aliasing(cap: int) -> None:
    buf = column_buffer(cap)
    assert buf.shape == (L.NCOLUMNS, cap) and buf.dtype == np.int64
    assert buf.strides[1] == 8 and all(buf[i].flags.c_contiguous for i in range(L.NCOLUMNS))
    if cap >= 512:
        assert buf.strides[0] % 4096 == 64 and buf.strides[0] < 8 * cap + 4096
    else:
        assert buf.strides[0] == 8 * cap


def test_read_batch_of_a_padded_full_buffer_equals_a_contiguous_decode(tmp_path: Path, impl) -> None:
    with _cl(tmp_path, impl, prepare_next=False, file_size=1 << 20) as cl:
        cl.put_batch("T", [bytes([i % 256]) * (i % 50) for i in range(600)], 1)
        r = cl.put("U", b"tail", 2)
        b = cl.read_batch(0, 512)  # full: the padded buffer itself is the batch's columns
        assert len(b) == 512 and b.columns.strides[0] % 4096 == 64
        plain = np.empty((L.NCOLUMNS, 512), dtype=np.int64)
        mf = cl.queue.last()
        count, end, _ = cl._codec.decode_batch(mf.mm, 0, mf.wrote_position, plain, False)
        assert count == 512 and b.next_offset == end
        assert np.array_equal(b.columns, plain)
        rest = cl.read_batch(b.next_offset, 512)  # partial: copied out, contiguous
        assert len(rest) == 89 and rest.columns.flags.c_contiguous
        assert rest.physical_positions[-1] == r.physical_offset and rest.bodies()[-1] == b"tail"
        assert rest.bodies()[:3] == [bytes([i % 256]) * (i % 50) for i in range(512, 515)]


@pytest.mark.parametrize("kind", ["slot", "property"])
def test_wrote_position_of_a_mapped_file_subclass(tmp_path: Path, impl, monkeypatch, kind: str) -> None:
    """The native appender writes a file's wrote_position straight into MappedFile's slot; a
    subclass (the slot inherited, or a property in its place) gets the same values."""
    import rmqcore.mappedfile as mfmod

    seen: list[int] = []
    if kind == "slot":
        class Sub(mfmod.MappedFile):
            __slots__ = ()
    else:
        class Sub(mfmod.MappedFile):  # type: ignore[no-redef]
            __slots__ = ("_wp",)

            @property  # type: ignore[override]
            def wrote_position(self) -> int:
                return self._wp  # type: ignore[no-any-return]

            @wrote_position.setter
            def wrote_position(self, v: int) -> None:
                seen.append(v)
                self._wp = v

    monkeypatch.setattr(mfmod, "MappedFile", Sub)
    with _cl(tmp_path, impl, prepare_next=False) as cl:
        rs = [cl.put("T", b"x" * (20 + i), 0) for i in range(60)]  # rolls over several 4 KiB files
        files = cl.queue.files
        assert len(files) >= 3 and all(type(mf) is Sub for mf in files)
        assert [mf.wrote_position for mf in files[:-1]] == [FS] * (len(files) - 1)
        assert files[-1].file_from_offset + files[-1].wrote_position == cl.max_offset == rs[-1].physical_offset + rs[-1].size
        assert [cl.read(r.physical_offset).body for r in rs] == [b"x" * (20 + i) for i in range(60)]
    if kind == "property":
        assert seen[-1] == rs[-1].physical_offset + rs[-1].size - files[-1].file_from_offset and FS in seen


# -- put_batch(tags=, keys=): per-message tags and keys, encoded by the kernel ------------------------
_TAGS_KEYS = [  # (tags, keys) of one message: plain ASCII, None, lists, non-ASCII, empty
    ("TagA", "k1"), (None, "k2"), ("TagB", None), (None, None), ("", ""), ("TagC", ["a", "b c"]),
    ("Tä", "kü"), ("TagD", ("x", "y")), ("T" * 300, "k" * 700),
]


@pytest.mark.parametrize("flavour", [4, 5])
def test_put_batch_with_tags_and_keys_stores_what_put_stores(tmp_path: Path, impl, flavour: int) -> None:
    tags = [t for t, _ in _TAGS_KEYS]
    keys = [k for _, k in _TAGS_KEYS]
    bodies = [b"m%d" % i for i in range(len(_TAGS_KEYS))]
    with _cl(tmp_path / "single", impl, file_size=1 << 20, flavour=flavour) as one:
        want = [one.read(one.put("T", b, 0, tags=t, keys=k).physical_offset).properties_string
                for b, (t, k) in zip(bodies, _TAGS_KEYS)]
    with _cl(tmp_path / "batch", impl, file_size=1 << 20, flavour=flavour) as cl:
        r = cl.put_batch("T", bodies, 0, tags=tags, keys=keys)
        got = [m.properties_string for m in cl.iter_records(r.physical_offset)]
        assert got == want
        assert want[0] == "KEYS\x01k1\x02TAGS\x01TagA" + ("\x02" if flavour == 5 else "")
        assert want[3] == "" and want[5].startswith("KEYS\x01a b c\x02")
        ms = list(cl.iter_records(r.physical_offset))
        # an empty value is stored ("TAGS\x01") and read back as absent, as Java's split drops it
        assert [m.tags for m in ms] == [t or None for t in tags]
        # one str of tags for every message, keys only / tags only
        r2 = cl.put_batch("T", [b"a", b"b"], 1, tags="Shared", keys=["x1", None])
        assert [m.properties for m in cl.iter_records(r2.physical_offset)] == [
            {"KEYS": "x1", "TAGS": "Shared"}, {"TAGS": "Shared"}]
        r3 = cl.put_batch("T", [b"a"], 1, keys=("solo",))
        assert [m.properties for m in cl.iter_records(r3.physical_offset)] == [{"KEYS": "solo"}]


def test_put_batch_tags_and_keys_with_properties(tmp_path: Path, impl) -> None:
    with _cl(tmp_path, impl, file_size=1 << 20) as cl:
        r = cl.put_batch("T", [b"a", b"b"], 0, tags=["t1", None], keys=[None, "k2"],
                         properties=[{"x": "1", "TAGS": "old", "KEYS": "oldk"}, {"y": "2"}])
        assert [m.properties for m in cl.iter_records(r.physical_offset)] == [
            {"x": "1", "KEYS": "oldk", "TAGS": "t1"}, {"y": "2", "KEYS": "k2"}]
        r = cl.put_batch("T", [b"a", b"b"], 0, tags="t", properties={"z": "3"})
        assert [m.properties for m in cl.iter_records(r.physical_offset)] == [{"z": "3", "TAGS": "t"}] * 2


@pytest.mark.parametrize("kw, match", [
    (dict(keys="k1"), "one entry per body"),
    (dict(keys=b"kk"), "one entry per body"),
    (dict(keys=5), "one entry per body"),
    (dict(keys=["k1"]), "1 entries for 2 bodies"),
    (dict(tags=["a", "b", "c"]), "3 entries for 2 bodies"),
    (dict(tags=b"ab"), "one entry per body"),
    (dict(tags=["a", 5]), "must be str"),
    (dict(keys=["a", 5]), "str or a sequence of str"),
    (dict(keys=["a", [b"x"]]), "str or a sequence of str"),
    (dict(keys=["ok", "bad\x01"]), "separator"),
    (dict(tags=["ok", "bad\x02"]), "separator"),
    (dict(tags=["ok", "t" * 40000]), "exceed"),
    (dict(keys=["k"] * 2, properties_raw=["", ""]), "excludes"),
    (dict(tags="t", properties=[{}]), "one mapping per body"),
])
def test_put_batch_bad_tags_or_keys_raise_and_write_nothing(tmp_path: Path, impl, kw, match) -> None:
    with _cl(tmp_path, impl, file_size=1 << 20) as cl:
        cl.put("T", b"first", 0)
        end = cl.max_offset
        with pytest.raises(InvalidMessageError, match=match):
            cl.put_batch("T", [b"a", b"b"], 0, **kw)
        assert cl.max_offset == end
        assert cl.put("T", b"next", 0).queue_offset == 1


@pytest.mark.parametrize("keys", [5, b"kk", [1, 2], ["a", None], 1.5])
def test_put_with_keys_of_the_wrong_type_raises_and_writes_nothing(tmp_path: Path, impl, keys) -> None:
    with _cl(tmp_path, impl) as cl:
        with pytest.raises(InvalidMessageError, match="keys must be a str or a sequence of str"):
            cl.put("T", b"x", 0, keys=keys)
        assert cl.max_offset == 0


_tk_text = st.one_of(st.none(), st.text(max_size=12), st.text(alphabet="ab \x01\x02é", max_size=6),
                     st.integers(32750, 32770).map(lambda n: "k" * n))  # about MAX_PROPERTIES_LEN
_tk_key = st.one_of(_tk_text, st.lists(st.text(alphabet="ab ", max_size=4), max_size=3))


@settings(max_examples=200)
@given(st.lists(st.tuples(_tk_text, _tk_key), min_size=1, max_size=6), st.sampled_from([4, 5]),
       st.booleans())
def test_batch_properties_twins_agree_with_the_per_message_rule(rows, flavour, one_tag) -> None:
    """Both kernels give, for every message, what PutRules.properties_bytes gives (put's rule),
    or raise what it raises."""
    from rmqcore._impl import kernel

    with tempfile.TemporaryDirectory() as d:
        cl = CommitLog(d, file_size=FS, flavour=flavour)
        try:
            tags = rows[0][0] if one_tag else [t for t, _ in rows]
            keys = [k for _, k in rows]
            outcomes = []
            for name in IMPLS:
                try:
                    outcomes.append(kernel("appender", name).batch_properties(
                        len(rows), tags, keys, flavour, cl._rules.tags_keys_bytes))
                except InvalidMessageError as e:
                    outcomes.append((type(e), str(e)))
            want: object
            try:
                want = [cl._rules.properties_bytes(tags if one_tag else t, k, None, None) for t, k in rows]
            except InvalidMessageError as e:
                want = (type(e), str(e))
            assert outcomes == [want] * len(IMPLS)
        finally:
            cl.close()


def test_batch_properties_twins_refuse_short_sequences(impl) -> None:
    def fallback(t, k):  # never reached
        raise AssertionError((t, k))

    for tags, keys in ((["a"], None), (None, ["k"]), ("one", ["k"])):
        with pytest.raises(InvalidMessageError, match="one entry per body"):
            impl.appender.batch_properties(2, tags, keys, 5, fallback)
    assert impl.appender.batch_properties(0, None, None, 5, fallback) == []


def test_the_appender_rolls_and_asks_only_through_its_public_collaborators(tmp_path: Path, impl) -> None:
    """Issue 24: an appender kernel is given a FileRoller and PutRules and calls their public
    methods, no CommitLog involved: ``roll`` with the full file (None before the first),
    ``prepare_next`` once per file when a put finds it written past ``prepare_at``; ``topic_bytes``
    once per topic, ``properties_bytes`` and ``host`` for what it does not encode itself."""
    from rmqcore.mappedfile import MappedFileQueue
    from rmqcore.putrules import PutRules
    from rmqcore.rolling import FileRoller

    calls: list[tuple[object, ...]] = []

    class Roller(FileRoller):
        def roll(self, full):  # type: ignore[no-untyped-def]
            calls.append(("roll", None if full is None else full.file_from_offset))
            return super().roll(full)

        def prepare_next(self) -> None:
            calls.append(("prepare_next", self.queue.max_offset()))
            super().prepare_next()

    class Rules(PutRules):
        def topic_bytes(self, topic: str) -> bytes:
            calls.append(("topic_bytes", topic))
            return super().topic_bytes(topic)

        def properties_bytes(self, tags, keys, properties, properties_raw) -> bytes:  # type: ignore[no-untyped-def]
            if properties is not None:  # the pure twin asks for every message's; both for a mapping
                calls.append(("properties_bytes", properties))
            return super().properties_bytes(tags, keys, properties, properties_raw)

        def host(self, value: object) -> tuple[bytes, int]:
            calls.append(("host", value))
            return super().host(value)

    queue = MappedFileQueue(tmp_path / "commitlog", FS)
    queue.load()
    roller = Roller(queue, read_only=False, prepare_next=True, warm_next=False, warm_ahead=0)
    app = impl.appender.Appender(roller, Rules(5), FS, bytes([10, 0, 0, 1]), 10911, FS, lambda: 7, 5)
    try:
        assert roller.prepare_at == FS // 4
        first = app.put("T", b"x" * 1000, 0, tags="a", keys="k")
        rs = [app.put("T", b"x" * 1000, 0) for _ in range(3)]  # the third goes to the next file
        assert [r.physical_offset for r in rs] == [first.size, first.size + rs[0].size, FS]
        odd = app.put("U", b"y", 1, properties={"p": "v"}, store_host="10.0.0.2:1")
        assert odd.physical_offset == FS + rs[-1].size and odd.msg_id.startswith("0A00000200000001")
        assert calls == [("topic_bytes", "T"), ("roll", None), ("prepare_next", first.size), ("roll", 0),
                         ("topic_bytes", "U"), ("properties_bytes", {"p": "v"}), ("host", "10.0.0.2:1"),
                         ("prepare_next", FS + rs[-1].size)]
    finally:
        app.close()
        roller.close()
        queue.close()


def test_put_is_declared_by_the_class_and_is_the_appender_put(tmp_path: Path, impl) -> None:
    """Issue 24: ``CommitLog.put`` is the class's own attribute (the appender kernel's ``put``, one
    native call per message, looked up once), not rebound on the instance by ``__init__``; a
    read-only CommitLog's put refuses, a closed one's says it is closed."""
    import inspect
    from functools import cached_property

    assert isinstance(inspect.getattr_static(CommitLog, "put"), cached_property)
    with _cl(tmp_path, impl) as cl:
        assert "put" not in vars(cl)
        assert cl.put == cl._appender.put
        r = cl.put("T", b"x", 0)
        assert (r.physical_offset, cl.max_offset) == (0, r.size)
    with _cl(tmp_path, impl, read_only=True) as ro:
        with pytest.raises(ConfigError):
            ro.put("T", b"y", 0)
        assert ro.max_offset == r.size
    with pytest.raises(StoreClosedError):
        ro.put("T", b"y", 0)


@pytest.mark.parametrize("call", ["put", "put_batch"])
def test_an_append_whose_clock_unbinds_the_file_raises_and_writes_nothing(impl, call) -> None:
    """Python code an append runs (here the store clock) may unbind the appender's file and close
    its map: the append says so (StoreClosedError) instead of writing through its old pointer (the
    native twin wrote into the unmapped address: a segfault)."""
    import mmap

    from rmqcore.putrules import PutRules

    size = 1 << 20

    class File:  # what the appender reads of a MappedFile
        def __init__(self) -> None:
            self.mm = mmap.mmap(-1, size)
            self.file_from_offset = 0
            self.wrote_position = 0

    class Files:  # a FileRoller that has one file
        prepare_at = 1 << 62

        def __init__(self) -> None:
            self.mf = File()

        def roll(self, full: object) -> File:
            return self.mf

        def prepare_next(self) -> None:
            pass

    files = Files()
    armed = False

    def clock() -> int:
        if armed:
            app.set_file(None)
            files.mf.mm.close()
        return 1_700_000_000_000

    app = impl.appender.Appender(files, PutRules(4), size, bytes([127, 0, 0, 1]), 10911, size, clock, 4)
    first = app.put("T", b"x" * 100)
    assert files.mf.wrote_position == first.size
    armed = True
    with pytest.raises(StoreClosedError, match="unbound during the append"):
        if call == "put":
            app.put("T", b"y" * 100)
        else:
            app.put_batch(b"T", "T", 0, [b"y" * 100] * 3, [b""] * 3, None, 0, None, bytes([127, 0, 0, 1]), 1,
                          bytes([127, 0, 0, 1]), 10911)
    assert files.mf.wrote_position == first.size
