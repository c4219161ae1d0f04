"""Model-based test of MessageStore: random put / put_batch / get / query / offsets / reopen
sequences against an in-memory model (hypothesis RuleBasedStateMachine). Small geometry so files,
consume-queue files and index files all roll."""
from __future__ import annotations

import shutil
import tempfile
from types import SimpleNamespace

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from rmqcore.store import GetStatus, MessageStore

TOPICS = ("TA", "TopicB")
QUEUES = 3
KEYS = [f"k{i}" for i in range(25)]
CQ_UNITS = 8
GEOM = dict(commitlog_file_size=8192, cq_file_size=CQ_UNITS * 20, index_slots=7, index_entries=40,
            index_interval_bytes=256)  # segment indexes: several entries per file


class StoreMachine(RuleBasedStateMachine):
    def __init__(self, impl: str, dispatch: str = "auto") -> None:
        super().__init__()
        self.impl = impl
        self.dispatch = dispatch

    @initialize()
    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="rmq-sm-")
        self.clock = [1_700_000_000_000]
        self.store = self._open()
        self.queues: dict[tuple[str, int], list[tuple[bytes, str | None, tuple[str, ...], int]]] = {}
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.times: list[tuple[int, int]] = []  # (physical offset, store time) of every message
        self.n = 0

    def _open(self) -> MessageStore:
        return MessageStore(self.dir, impl=self.impl, clock=lambda: self.clock[0], dispatch=self.dispatch,
                            **GEOM)

    def teardown(self) -> None:
        if hasattr(self, "store"):
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(topic=st.sampled_from(TOPICS), q=st.integers(0, QUEUES - 1), body=st.binary(max_size=600),
          tags=st.sampled_from([None, "t1", "t2"]), keys=st.lists(st.sampled_from(KEYS), max_size=3, unique=True),
          dt=st.integers(0, 3))
    def put(self, topic, q, body, tags, keys, dt) -> None:
        self.clock[0] += dt
        r = self.store.put(topic, body, q, tags=tags, keys=keys or None)
        lst = self.queues.setdefault((topic, q), [])
        assert r.queue_offset == len(lst)
        lst.append((body, tags, tuple(keys), r.physical_offset))
        self.times.append((r.physical_offset, self.clock[0]))
        self.n += 1

    @rule(topic=st.sampled_from(TOPICS), q=st.integers(0, QUEUES - 1),
          bodies=st.lists(st.binary(max_size=200), min_size=1, max_size=6), key=st.sampled_from(KEYS))
    def put_batch(self, topic, q, bodies, key) -> None:
        self.clock[0] += 1
        r = self.store.put_batch(topic, bodies, q, properties={"TAGS": "t1", "KEYS": key})
        lst = self.queues.setdefault((topic, q), [])
        assert r.queue_offset == len(lst)
        for b, off in zip(bodies, r.physical_offsets):
            lst.append((b, "t1", (key,), off))
            self.times.append((off, self.clock[0]))
        self.n += len(bodies)

    @rule(topic=st.sampled_from(TOPICS), q=st.integers(0, QUEUES - 1),
          msgs=st.lists(st.tuples(st.binary(max_size=200), st.sampled_from([None, "t1", "t2"]),
                                  st.lists(st.sampled_from(KEYS), max_size=2, unique=True)),
                        min_size=1, max_size=6))
    def put_batch_per_message(self, topic, q, msgs) -> None:
        """A batch whose messages carry their own tags and keys (tags=/keys= lists)."""
        self.clock[0] += 1
        r = self.store.put_batch(topic, [b for b, _, _ in msgs], q, tags=[t for _, t, _ in msgs],
                                 keys=[k or None for _, _, k in msgs])
        lst = self.queues.setdefault((topic, q), [])
        assert r.queue_offset == len(lst)
        for (b, t, k), off in zip(msgs, r.physical_offsets):
            lst.append((b, t, tuple(k), off))
            self.times.append((off, self.clock[0]))
        self.n += len(msgs)

    @precondition(lambda self: self.n > 0)
    @rule(data=st.data(), max_msgs=st.integers(1, 40))
    def get(self, data, max_msgs) -> None:
        key = data.draw(st.sampled_from(sorted(self.queues)))
        lst = self.queues[key]
        offset = data.draw(st.integers(0, len(lst) + 1))
        r = self.store.get_messages("g", key[0], key[1], offset, max_msgs)
        assert (r.min_offset, r.max_offset) == (0, len(lst))
        if offset == len(lst):
            assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, offset)
            return
        if offset > len(lst):
            assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, len(lst))
            return
        assert r.status == GetStatus.FOUND
        k = r.message_count
        file_end = (offset // CQ_UNITS + 1) * CQ_UNITS  # a pull never crosses a consume-queue file
        assert 1 <= k <= min(max_msgs, 32, file_end - offset, len(lst) - offset)
        assert r.queue_offsets == list(range(offset, offset + k))
        assert r.next_begin_offset == offset + k
        got = r.messages
        assert [m.body for m in got] == [lst[i][0] for i in range(offset, offset + k)]
        assert [m.tags for m in got] == [lst[i][1] for i in range(offset, offset + k)]

    @precondition(lambda self: self.n > 0)
    @rule(topic=st.sampled_from(TOPICS), key=st.sampled_from(KEYS))
    def query(self, topic, key) -> None:
        want = sorted(off for (t, _q), lst in self.queues.items() if t == topic
                      for (_b, _tg, keys, off) in lst if key in keys)
        got = [m.position for m in self.store.query_by_key(topic, key)]
        if len(want) <= 64:
            assert got == want
        else:
            assert got == want[-64:]

    @precondition(lambda self: self.n > 0)
    @rule(data=st.data(), after=st.booleans())
    def seek_time(self, data, after) -> None:
        """The CommitLog time seek (segment time index, then a short scan), dispatched in whatever
        steps the rules before took: the first record stored at (after) or after ``ts``."""
        near = st.sampled_from(self.times).flatmap(lambda r: st.integers(r[1] - 1, r[1] + 1))  # at a record's time
        ts = data.draw(st.one_of(near, st.integers(1_700_000_000_000 - 2, self.clock[0] + 2)))
        hits = [off for off, t in self.times if (t > ts if after else t >= ts)]
        want = min(hits) if hits else self.store.commitlog.max_offset
        assert self.store.commitlog_offset_by_time(ts, after=after) == want

    @precondition(lambda self: self.n > 0)
    @rule(data=st.data(), group=st.sampled_from(["g1", "g2"]))
    def commit(self, data, group) -> None:
        key = data.draw(st.sampled_from(sorted(self.queues)))
        off = data.draw(st.integers(0, len(self.queues[key])))
        self.store.commit_offset(group, key[0], key[1], off)
        self.offsets[(group, key[0], key[1])] = off

    @precondition(lambda self: self.dispatch == "put" and self.n > 0)
    @rule(data=st.data())
    def follower_reads(self, data) -> None:
        """``dispatch="put"``: a follower sees every put of a queue, whatever the writer did before
        (published by the puts themselves, or dispatched by a read or a put's own dispatch)."""
        key = data.draw(st.sampled_from(sorted(self.queues)))
        lst = self.queues[key]
        with MessageStore(self.dir, read_only=True, follow=True, impl=self.impl) as f:
            got, off = [], 0
            while off < len(lst):
                r = f.get_messages("g", key[0], key[1], off, 32)
                assert r.status == GetStatus.FOUND
                got += [m.body for m in r.messages]
                off = r.next_begin_offset
        assert got == [b for b, _t, _k, _o in lst]

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = self._open()

    @invariant()
    def bounds_and_offsets(self) -> None:
        if not hasattr(self, "store"):
            return
        for (topic, q), lst in self.queues.items():
            assert self.store.max_offset(topic, q) == len(lst)
        for (g, t, q), off in self.offsets.items():
            assert self.store.fetch_offset(g, t, q) == off


@pytest.mark.parametrize("dispatch", ["auto", "put"])
def test_store_state_machine(impl: SimpleNamespace, dispatch: str) -> None:
    """Once per implementation through the ``impl`` fixture: the native run fails (never skips) when
    the extension is missing, and each run builds its own machines (no class attribute changes).
    ``dispatch="put"``: each put publishes its record, and a follower checks what it sees."""
    examples = 25 if impl.name == "pure" else 40
    run_state_machine_as_test(
        lambda: StoreMachine(impl.name, dispatch),
        settings=settings(max_examples=examples if dispatch == "auto" else examples // 2,
                          stateful_step_count=35, deadline=None),
    )
