"""Dispatch hints (csrc/rmq_hints.h): what a put knows of its record, left in a ring for dispatch.

Each test runs on both twins (appender and dispatcher of the same implementation). The claims:
* a hint describes its record exactly, and only simple records get one;
* dispatch from hints writes consume queues and index files byte for byte as parsing does;
* a hint that does not match its record, an overwritten ring, or a ring invalidated by a rebind
  (a roll, ``set_end``, close) is never used: dispatch parses instead.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rmqcore import _impl
from rmqcore._pure.hashing import index_key_hash, tags_code
from rmqcore.layout import (H_KEY, H_PHYS, H_QOFF, H_QUEUE, H_SEQ, H_SIZE, H_TAGS, H_TS, HINT_CAPACITY,
                            HINT_FIELDS)
from rmqcore.store import MessageStore
from tests.conftest import twins

BIG = dict(commitlog_file_size=8 * 1024 * 1024, cq_file_size=6000, index_slots=101, index_entries=40_000)


def _clock() -> Any:
    t = [1_700_000_000_000]

    def tick() -> int:
        t[0] += 1
        return t[0]

    return tick


def _mixed(s: MessageStore, n: int) -> list[bool]:
    """Put n messages of every kind; returns, per put, whether it should get a hint."""
    expect = []
    for i in range(n):
        t = "TopicA" if i % 3 else "TopicB"
        kind = i % 16
        hint = True
        if kind == 0:
            s.put(t, b"x" * (i % 50), i % 4, tags="T%d" % (i % 5), keys="k%d" % i)
        elif kind == 1:
            s.put(t, b"y", i % 4, tags="TagA", keys="k%d other%d" % (i, i))  # two keys
            hint = False
        elif kind == 2:
            s.put(t, b"z", i % 4, keys="ключ%d" % i)  # a non-ASCII key
            hint = False
        elif kind == 3:
            s.put("SCHEDULE_TOPIC_XXXX", b"d", 0, tags="5", keys="s%d" % i, properties={"DELAY": "3"})
            hint = False
        elif kind == 4:
            s.put(t, b"p", i % 4, tags="", keys="")  # empty values: no tags, no key
        elif kind == 5:
            s.put(t, b"tx", i % 4, tags="Tx", keys="tx%d" % i, sys_flag=0x4)  # PREPARED: no unit
            hint = False
        elif kind == 6:
            s.put(t, b"c", i % 4, tags="Tc", keys="c%d" % i, sys_flag=0x8)  # COMMIT: parsed
            hint = False
        elif kind == 7:
            s.put_batch(t, [b"b1", b"b2"], i % 4, properties_raw=["KEYS\x01bk%d\x02TAGS\x01Bt\x02" % i, ""])
            expect.append(False)  # a batch of per-message properties is parsed
            hint = False
        elif kind == 8:
            s.put(t, b"n", i % 4)  # no properties
        elif kind == 9:
            s.put(t, b"u", 1, tags="Таг", keys="k%d" % i)  # non-ASCII tags
            hint = False
        elif kind == 10:
            s.put(t, b"r", 2, properties={"KEYS": "raw%d" % i})  # a properties mapping
            hint = False
        elif kind == 12:
            s.put_batch(t, [b"s1", b"s22", b"s333"], i % 4)  # a batch without properties: hints
            expect += [True, True]
        elif kind == 13:  # one properties mapping for the whole batch, one key: hints
            s.put_batch(t, [b"m1", b"m2"], i % 4, properties={"TAGS": "Bt%d" % (i % 3), "KEYS": "bk%d" % i})
            expect.append(True)
        elif kind == 14:  # one mapping for the whole batch with two keys: parsed
            s.put_batch(t, [b"w1", b"w2"], i % 4, properties={"KEYS": "a%d b%d" % (i, i)})
            expect.append(False)
            hint = False
        elif kind == 15:  # one tags str for the whole batch: one properties object, hints
            s.put_batch(t, [b"g1", b"g2"], i % 4, tags="G%d" % (i % 2))
            expect.append(True)
        else:
            s.put(t, b"q" * 10, i % 4, tags="TagA", keys="key-%d" % i)
        expect.append(hint)
    return expect


def _files(d: Path) -> dict[str, str]:
    """Digests of the CommitLog and consume-queue files, and of each index file's contents (their
    names are wall-clock times)."""
    out = {}
    for p in sorted(d.rglob("*")):
        rel = str(p.relative_to(d))
        if p.is_file() and rel.startswith(("commitlog", "consumequeue")):
            out[rel] = hashlib.md5(p.read_bytes()).hexdigest()
    out["index"] = ",".join(sorted(hashlib.md5(p.read_bytes()).hexdigest() for p in (d / "index").iterdir()))
    return out


def _store(d: Path, impl: Any, hints: bool = True, **geom: Any) -> MessageStore:
    s = MessageStore(d, clock=_clock(), impl=impl.name, dispatch="inline", **(geom or BIG))
    if not hints:
        s._dispatch.dispatcher.set_hints(None, None)
    return s


@pytest.mark.parametrize("n", [600, HINT_CAPACITY + 500])
def test_dispatch_from_hints_writes_what_parsing_writes(tmp_path: Path, impl: Any, n: int) -> None:
    """The same puts, dispatched with and without hints: identical consume-queue and index files,
    and the same query answers. With more puts than the ring holds, the overwritten hints are
    parsed instead and exactly the ring's worth is taken from hints."""
    if impl.name == "pure" and n > HINT_CAPACITY:
        pytest.skip("slow in the pure twin, whose overwritten slots test_an_overwritten_hint... covers")
    digests, answers, taken = [], [], []
    for hints in (True, False):
        d = tmp_path / f"h{hints}"
        s = _store(d, impl, hints)
        expect = _mixed(s, n)
        written = int(s.commitlog._appender.hint_head[0])
        assert written == sum(expect)
        s.dispatch()
        taken.append(s._dispatch.dispatcher.hinted)
        answers.append([len(s.query_by_key("TopicA", "k%d" % i)) for i in range(0, n, 7)])
        s.close()
        digests.append(_files(d))
    assert taken[0] == min(sum(expect), HINT_CAPACITY) and taken[1] == 0
    assert digests[0] == digests[1]
    assert answers[0] == answers[1] and sum(answers[0]) > 0


def test_a_hint_describes_its_record(tmp_path: Path, impl: Any) -> None:
    """Every hint in the ring: the record at its physical offset has its size, queue id, queue
    offset and store time; its topic sits where the hint says; its tagsCode and key hash are the
    ones RocketMQ computes from the message's tags and key."""
    s = _store(tmp_path, impl)
    ring = s.commitlog._appender.hints
    expect = _mixed(s, 300)
    head = int(s.commitlog._appender.hint_head[0])
    assert head == sum(expect) and ring.shape == (HINT_CAPACITY, HINT_FIELDS) and not ring.flags.writeable
    mm = s.commitlog.queue.files[0].mm
    for n in range(head):
        e = [int(x) for x in ring[n]]
        assert e[H_SEQ] == n
        m = s.commitlog.read(e[H_PHYS])
        size, nkeys, tlen = e[H_SIZE] & 0xFFFFFFFF, (e[H_SIZE] >> 32) & 0xFF, e[H_SIZE] >> 40
        qid, trel = e[H_QUEUE] & 0xFFFFFFFF, e[H_QUEUE] >> 32
        assert (size, qid, e[H_QOFF], e[H_TS]) == (m.size, m.queue_id, m.queue_offset, m.store_timestamp)
        topic = m.topic.encode()
        assert tlen == len(topic) and bytes(mm[e[H_PHYS] + trel : e[H_PHYS] + trel + tlen]) == topic
        props = m.properties
        assert e[H_TAGS] == tags_code(props.get("TAGS") or None)
        key = props.get("KEYS") or ""
        assert nkeys == (1 if key else 0)
        assert e[H_KEY] == (index_key_hash(m.topic + "#" + key) if key else 0)
    s.close()


def test_both_twins_leave_the_same_hints(tmp_path: Path) -> None:
    impls = twins()
    rings = []
    for im in impls:
        s = _store(tmp_path / im.name, im)
        _mixed(s, 200)
        rings.append((int(s.commitlog._appender.hint_head[0]), s.commitlog._appender.hints.copy()))
        s.close()
    assert all(r[0] == rings[0][0] for r in rings)
    assert all(np.array_equal(r[1], rings[0][1]) for r in rings)


def test_a_hint_that_does_not_match_its_record_is_not_used(tmp_path: Path, impl: Any) -> None:
    """A ring whose hints disagree with the records' headers (a wrong queue offset, size, physical
    offset or queue id; a transaction type in the header): dispatch parses those records, and the
    consume queue gets the true tagsCode, not the hint's."""
    s = _store(tmp_path, impl)
    for i in range(8):
        s.put("T", b"x", 0, tags="TagA", keys="k%d" % i)
    real = s.commitlog._appender.hints.copy()
    head = s.commitlog._appender.hint_head.copy()
    fake = real.copy()
    fake[:8, H_TAGS] = 12345  # what a used hint would put in the consume queue
    fake[0, H_QOFF] += 1
    fake[1, H_SIZE] += 1
    fake[3, H_QUEUE] += 1
    fake[4, H_SIZE] = (fake[4, H_SIZE] & 0xFFFFFFFF) | (2 << 32)  # more keys than a hint carries
    fake[5, H_QUEUE] = (fake[5, H_QUEUE] & 0xFFFFFFFF) | (10_000 << 32)  # topic outside the record
    fake[6, H_SEQ] = 99  # not hint number 6
    s._dispatch.dispatcher.set_hints(fake, head)
    s.dispatch()
    got = s.get_messages("g", "T", 0, 0, 32)
    assert got.queue_offsets == list(range(8))
    codes = _tags_codes(s, "T", 0, 8)
    want = tags_code("TagA")
    # records 2 and 7 were taken from their (matching) hints; the rest were parsed one by one
    assert codes == [want, want, 12345, want, want, want, want, 12345]
    assert s._dispatch.dispatcher.hinted == 2
    s.close()


def _tags_codes(s: MessageStore, topic: str, qid: int, n: int) -> list[int]:
    cq = s.consume_queue(topic, qid)
    assert cq is not None
    mf = cq.queue.files[0]
    return [int.from_bytes(bytes(mf.mm[i * 20 + 12 : i * 20 + 20]), "big", signed=True) for i in range(n)]


def test_a_rebind_invalidates_every_hint(tmp_path: Path, impl: Any) -> None:
    """A roll to the next CommitLog file, ``set_end`` and close all rebind the appender, whose
    position may then move back: no hint written before survives (field 0 is -1)."""
    s = _store(tmp_path, impl, **dict(BIG, commitlog_file_size=64 * 1024))
    app = s.commitlog._appender
    first_file = None
    for i in range(2000):
        r = s.put("T", b"x" * 100, 0, tags="TagA", keys="k%d" % i)
        if first_file is None and r.physical_offset >= 64 * 1024:
            first_file = i  # the first put into the second file
            break
    assert first_file is not None
    live = app.hints[:, H_SEQ]
    assert sorted(int(x) for x in live if x >= 0) == [first_file]  # only the hint after the roll
    s.dispatch()
    assert s._dispatch.dispatcher.hinted == 1
    s.close()
    assert (app.hints[:, H_SEQ] == -1).all()


def test_hints_never_outlive_a_truncation(tmp_path: Path, impl: Any) -> None:
    """``CommitLog.set_end`` cuts the log back; the next puts reuse the same physical offsets with
    other records. Dispatch must index the new records, not what the old hints said."""
    s = _store(tmp_path, impl)
    for i in range(10):
        s.put("T", b"x", 0, tags="Old", keys="old%d" % i)
    cut = s.commitlog.queue.files[0].file_from_offset + 0
    s.commitlog.set_end(cut)
    s.commitlog.set_queue_offset("T", 0, 0)
    for i in range(10):
        s.put("T", b"x", 0, tags="New", keys="new%d" % i)
    s.dispatch()
    assert _tags_codes(s, "T", 0, 10) == [tags_code("New")] * 10
    assert len(s.query_by_key("T", "new3")) == 1 and s.query_by_key("T", "old3") == []
    s.close()


def test_an_overwritten_hint_is_skipped_and_its_record_parsed(tmp_path: Path, impl: Any) -> None:
    """A slot that holds a hint one ring newer than the one the dispatcher looks for (the writer
    lapped it while it read): that record is parsed, and the hints after it are used again."""
    s = _store(tmp_path, impl)
    for i in range(20):
        s.put("T", b"x", i % 2, tags="TagA", keys="k%d" % i)
    s.dispatch()
    assert s._dispatch.dispatcher.hinted == 20
    for i in range(20, 25):
        s.put("T", b"x", i % 2, tags="TagB", keys="k%d" % i)
    ring = s.commitlog._appender.hints.copy()
    ring[20, H_SEQ] += HINT_CAPACITY
    ring[20, H_TAGS] = 12345  # would show in the consume queue if used
    s._dispatch.dispatcher.set_hints(ring, s.commitlog._appender.hint_head)
    s.dispatch()
    assert s._dispatch.dispatcher.hinted == 24  # all but the overwritten one
    assert _tags_codes(s, "T", 0, 13)[10:] == [tags_code("TagB")] * 3
    assert len(s.query_by_key("T", "k20")) == 1
    s.close()


def test_set_hints_checks_its_arrays(impl: Any) -> None:
    d = _impl.kernel("dispatch", impl.name).Dispatcher()
    ring = np.full((HINT_CAPACITY, HINT_FIELDS), -1, dtype=np.int64)
    head = np.zeros(1, dtype=np.int64)
    d.set_hints(ring, head)
    d.set_hints(None, None)
    for bad in ((ring, None), (None, head), (ring[:10], head), (ring.astype(np.int32), head),
                (ring, np.zeros(0, dtype=np.int64)), (ring[:, :4], head)):
        with pytest.raises(ValueError):
            d.set_hints(*bad)


def test_a_key_with_a_space_anywhere_gets_no_hint(tmp_path: Path, impl: Any) -> None:
    """KEYS holding more than one token (a space at any position of keys of 1 to 25 bytes, the
    native put finds it in the pass that looks for separators) gives no hint; a single token does."""
    s = _store(tmp_path, impl)
    head = s.commitlog._appender.hint_head
    for n in range(1, 26):
        for i in range(n):
            key = "k" * i + " " + "k" * (n - i - 1)
            before = int(head[0])
            s.put("T", b"x", 0, tags="TagA", keys=key)
            assert int(head[0]) == before, repr(key)
        before = int(head[0])
        s.put("T", b"x", 0, tags="TagA", keys="k" * n)
        assert int(head[0]) == before + 1
    s.close()
