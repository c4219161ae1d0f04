"""Sparse indexes inside rmqcore's store (per CommitLog file): time seeks and split points."""
from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from rmqcore import layout as L
from rmqcore.store import MessageStore


def _fill(path: Path, impl: str, clock: list[int], n: int = 2500, seed: int = 1, back: bool = False,
          dispatch_each: bool = False) -> MessageStore:
    rnd = random.Random(seed)
    s = MessageStore(path, impl=impl, commitlog_file_size=64 * 1024, cq_file_size=400,
                     message_index_enable=False, clock=lambda: clock[0])
    for i in range(n):
        clock[0] += rnd.choice((0, 0, 1, 3, 40))
        if back and i == n // 2:
            clock[0] -= 500  # the clock steps back once
        if rnd.random() < 0.1:
            s.put_batch("T", [b"b" * rnd.randrange(0, 200) for _ in range(rnd.randrange(1, 6))], i % 3)
        else:
            s.put("T", b"x" * rnd.randrange(0, 400), i % 3)
        if dispatch_each:
            s.dispatch()
    return s


def _segment_indexes(s: MessageStore) -> dict[int, tuple[object, ...]]:
    return {f: (g.count, g.end, g.bytes_since, g.max_ts, g.ordinal_of_max_ts, g.monotonic, g.floor_ts,
                g.state.tolist(), g.offset_index.entries_list(), g.time_index.entries_list())
            for f, g in s.segindex.segments.items()}


def _exact(s: MessageStore, q: int, ts: int, boundary: str) -> int:
    cq = s.consume_queue("T", q)
    return cq.offset_by_time(ts, s.store_time_of, s.commitlog.min_offset, boundary)


@pytest.mark.parametrize("back", [False, True])
def test_indexed_time_seek_equals_exact_search(tmp_path: Path, impl, back: bool) -> None:
    clock = [1_700_000_000_000]
    t0 = clock[0]
    with _fill(tmp_path, impl.name, clock, back=back) as s:
        s.dispatch()
        assert s.segindex.monotonic is (not back)
        assert len(s.commitlog.queue) > 5
        rnd = random.Random(3)
        probes = [t0 - 10, clock[0] + 10] + [rnd.randrange(t0 - 5, clock[0] + 5) for _ in range(150)]
        for ts in probes:
            for q in range(3):
                for b in ("lower", "upper"):
                    assert s.offset_by_time("T", q, ts, b) == _exact(s, q, ts, b), (ts, q, b)


def test_segment_indexes_are_sparse_kafka_style_and_rebuilt(tmp_path: Path, impl) -> None:
    clock = [1_700_000_000_000]
    with _fill(tmp_path, impl.name, clock) as s:
        s.dispatch()
        segs = dict(s.segindex.segments)
        first = segs[0]
        entries = first.offset_index.entries_list()
        # an entry after more than 4096 bytes of records; positions are record starts
        assert 10 <= len(entries) <= 64 * 1024 // 4096
        mf = s.commitlog.queue.files[0]
        for e in entries:
            assert s.commitlog._codec.peek_record(mf.mm, e.position, mf.wrote_position)[0] == L.ST_MSG
        times = first.time_index.entries_list()
        assert [t.timestamp for t in times] == sorted({t.timestamp for t in times})
        before = {f: (g.count, g.end, g.offset_index.entries_list(), g.time_index.entries_list()) for f, g in segs.items()}
    shutil.rmtree(tmp_path / "rmqcore-index")
    with MessageStore(tmp_path, impl=impl.name, message_index_enable=False) as s:
        # complete files lost their indexes: rebuilt from the CommitLog, identical
        after = {f: (g.count, g.end, g.offset_index.entries_list(), g.time_index.entries_list())
                 for f, g in s.segindex.segments.items()}
        assert after == before


def test_split_points_are_record_boundaries(tmp_path: Path, impl) -> None:
    clock = [1_700_000_000_000]
    with _fill(tmp_path, impl.name, clock, n=800) as s:
        s.dispatch()
        seg = s.segindex.segments[0]
        mf = s.commitlog.queue.files[0]
        pts = seg.split_points(4)
        assert 1 <= len(pts) <= 3 and pts == sorted(set(pts))
        for p in pts:
            assert s.commitlog._codec.peek_record(mf.mm, p, mf.wrote_position)[0] == L.ST_MSG
        assert seg.split_points(1) == []


@pytest.mark.parametrize("back", [False, True])
def test_dispatching_record_by_record_builds_the_same_indexes(tmp_path: Path, impl, back: bool) -> None:
    """A dispatch per put (the few-entry path, the state carried between calls in SegmentIndex.state)
    and one dispatch at the end (the bulk path) write the same indexes; so does a rebuild."""
    clock = [1_700_000_000_000]
    with _fill(tmp_path / "each", impl.name, clock, n=1500, back=back, dispatch_each=True) as s:
        each = _segment_indexes(s)
    clock = [1_700_000_000_000]
    with _fill(tmp_path / "bulk", impl.name, clock, n=1500, back=back) as s:
        s.dispatch()
        bulk = _segment_indexes(s)
    assert len(each) > 3 and each == bulk
    assert sum(len(v[8]) for v in each.values()) > 20
    shutil.rmtree(tmp_path / "each" / "rmqcore-index")
    with MessageStore(tmp_path / "each", impl=impl.name, message_index_enable=False) as s:
        rebuilt = _segment_indexes(s)
    # the last file's state is rebuilt at open; complete files' counters come from their state files
    assert {f: v[:1] + v[8:] for f, v in rebuilt.items()} == {f: v[:1] + v[8:] for f, v in each.items()}


@pytest.mark.parametrize("interval", [0, 300, 4096])
def test_index_interval_bytes_spaces_the_entries_as_kafka_does(tmp_path: Path, impl, interval: int) -> None:
    """``index_interval_bytes`` (Kafka's index.interval.bytes): an entry before a record once more
    than that many bytes went by since the last entry (0: before every record but the first); the
    time seeks stay exact whatever the spacing."""
    clock = [1_700_000_000_000]
    rnd = random.Random(5)
    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=64 * 1024, message_index_enable=False,
                      index_interval_bytes=interval, clock=lambda: clock[0]) as s:
        for i in range(900):
            clock[0] += rnd.choice((0, 1, 2))
            s.put("T", b"x" * rnd.randrange(0, 300), i % 2)
            if i % 7 == 0:
                s.dispatch()
        s.dispatch()
        for mf in s.commitlog.queue.files:
            seg = s.segindex.segments[mf.file_from_offset]
            sizes = [size for _pos, size in _record_spans(s, mf)]
            want, since = [], 0
            for k, size in enumerate(sizes):  # LogSegment.append's rule
                if since > interval:
                    want.append(k)
                    since = 0
                since += size
            assert [e.offset for e in seg.offset_index.entries_list()] == want
        for ts in range(1_700_000_000_000 - 1, clock[0] + 2, 37):
            for b in ("lower", "upper"):
                assert s.offset_by_time("T", 1, ts, b) == _exact(s, 1, ts, b)


def _record_spans(s: MessageStore, mf) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    out, pos = [], 0
    while pos < mf.wrote_position:
        st, size = s.commitlog._codec.peek_record(mf.mm, pos, mf.wrote_position)[:2]
        if st != L.ST_MSG:
            break
        out.append((pos, size))
        pos += size
    return out


def test_index_interval_bytes_must_be_a_non_negative_int(tmp_path: Path) -> None:
    from rmqcore.errors import ConfigError

    for bad in (-1, 1.5, "4096", True, None):
        with pytest.raises(ConfigError, match="index_interval_bytes"):
            MessageStore(tmp_path / "s", index_interval_bytes=bad)
    assert not (tmp_path / "s").exists()


def test_kept_entries_reach_the_files_when_a_file_completes_and_at_close(tmp_path: Path, impl) -> None:
    """Dispatch keeps the entries it computes (SegmentIndex.add_entries) and writes them in bulk:
    a completed file's index files hold all of them, though nothing read the indexes meanwhile."""
    from rmqcore.kafka.index import OffsetIndex, TimeIndex

    clock = [1_700_000_000_000]
    with _fill(tmp_path / "bulk", impl.name, clock, n=1500) as s:
        s.dispatch()
        bulk = {f: (g.offset_index.entries_list(), g.time_index.entries_list()) for f, g in s.segindex.segments.items()}
    clock = [1_700_000_000_000]
    s = _fill(tmp_path / "each", impl.name, clock, n=1500, dispatch_each=True)
    complete = sorted(bulk)[:-1]  # the last file's indexes are rebuilt at open
    assert len(complete) > 3
    segs = s.segindex.segments
    assert segs[max(segs)]._npending > 0  # kept: nothing read them
    for f in complete:  # written when the next file began, before its state was saved as complete
        assert (segs[f]._oi.entries_list(), segs[f]._ti.entries_list()) == bulk[f]
    s.close()
    for f in complete:
        d = tmp_path / "each" / "rmqcore-index"
        oi = OffsetIndex(d / f"{L.offset_to_file_name(f)}.index", 0, writable=False, impl=impl.name)
        ti = TimeIndex(d / f"{L.offset_to_file_name(f)}.timeindex", 0, writable=False, impl=impl.name)
        try:
            assert (oi.entries_list(), ti.entries_list()) == bulk[f]
        finally:
            oi.close()
            ti.close()
