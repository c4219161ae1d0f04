"""Snapshots of the live tail (rmqcore.columnar.snapshot), with pyarrow alone: what a read plans holds
exactly the records the log held at planning time, written once and never replaced, merged like a
binary counter, within a size bound, deleted only after a grace period, never written where the
reader may not write; stale or torn snapshots are not read."""

from __future__ import annotations

import errno
import itertools
import json
import math
import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pq = pytest.importorskip("pyarrow.parquet")

from rmqcore import _impl  # noqa: E402
from rmqcore.columnar.manifest import columnar_dir, tail_dir  # noqa: E402
from rmqcore.columnar.materialize import FileTask, convert_file, materialize  # noqa: E402
from rmqcore.columnar.snapshot import Piece, best_chain, merge_start, plan_read  # noqa: E402
from rmqcore.errors import ChecksumError  # noqa: E402
from rmqcore.store import MessageStore  # noqa: E402
from tests.test_materialize import FILE, GEOM, _decoded, _fill  # noqa: E402


def _rows(store: Path, copies: list[str]) -> list[dict[str, Any]]:
    """The rows of a plan's Parquet files, in CommitLog order."""
    out = [r for c in copies for r in pq.read_table(columnar_dir(store) / c).to_pylist()]
    return sorted(out, key=lambda r: r["physical_offset"])


def _snapshots(store: Path) -> list[str]:
    d = tail_dir(store)
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def _tree(store: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(store)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(store.rglob("*")) if p.is_file()}


def _piece(start: int, end: int, f: int = 0) -> Piece:
    return Piece(f, start, end, Path(f"{f:020d}.{start}-{end}.parquet"), 0.0)


def test_best_chain_reaches_furthest_with_fewest_pieces() -> None:
    a, b, c = _piece(0, 10), _piece(10, 20), _piece(0, 20)
    assert best_chain([]) == []
    assert best_chain([b]) == []  # nothing from position 0
    assert best_chain([a, b]) == [a, b]
    assert best_chain([b, c, a]) == [c]  # fewer pieces to the same end
    # two readers raced: one merged [0, 15), the other appended [10, 30): the furthest chain wins
    d, e = _piece(0, 15), _piece(10, 30)
    assert best_chain([a, d, e]) == [a, e]


@given(st.lists(st.integers(1, 5000), min_size=1, max_size=200), st.integers(1000, 50_000))
def test_merging_keeps_few_pieces_and_rewrites_little(deltas: list[int], limit: int) -> None:
    """A file read after each of n appends: its chain stays contiguous from 0 to the end; each
    piece is more than twice the next or the two exceed ``limit`` together (so O(log bytes) pieces
    below the limit); a record is rewritten only into a piece 1.5 times larger."""
    chain: list[Piece] = []
    end, written = 0, 0
    bound = max(limit, *deltas)
    for d in deltas:
        end += d
        start = merge_start(chain, end, bound)
        assert start <= end - d
        chain.append(_piece(start, end))
        written += end - start
        assert [p.start for p in chain] == [0] + [p.end for p in chain[:-1]]
        assert chain[-1].end == end
        assert all(a.size > 2 * b.size or a.size + b.size > bound for a, b in itertools.pairwise(chain))
    if end <= limit:
        assert len(chain) <= math.log2(end) + 1
    assert written <= end * (1 + math.log(end, 1.5))


def test_a_plan_holds_the_log_as_it_was_planned(tmp_path: Path, impl: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A store being appended to (its writer open) between reads: each plan's Parquet files hold
    exactly the records of the log at its planning time, and still do after later plans."""
    monkeypatch.setattr(_impl, "IMPLEMENTATION", impl.name)
    store = tmp_path / "s"
    _fill(store, 1200)
    materialize(store)  # three sealed copies; the fourth file is the live tail
    plans = []
    with MessageStore(store, impl=impl.name, **GEOM) as w:
        for i in range(12):
            plan = plan_read(store, FILE)
            want = _decoded(store)
            assert plan.end == w.commitlog.max_offset and not plan.rest
            assert _rows(store, plan.copies) == want
            assert plan.covered == {0: -1, FILE: -1, 2 * FILE: -1, 3 * FILE: plan.end - 3 * FILE}
            assert [e.sealed for e in plan.written] == ([False] if i == 0 or (i - 1) % 3 == 0 else [])
            plans.append((plan, want))
            if i % 3 == 0:  # appends between most reads; a read with nothing new writes nothing
                for k in range(5 + i):
                    w.put("T9", b"live-%d-%d" % (i, k), k % 4, keys=[f"live{i}.{k}"])
    for plan, want in plans:  # nothing an earlier plan reads was replaced or deleted (grace period)
        assert _rows(store, plan.copies) == want
    assert len([c for c in plans[-1][0].copies if c.startswith("_tail/")]) <= 3


def test_a_sealed_file_without_a_copy_and_a_bound(tmp_path: Path) -> None:
    store = tmp_path / "s"
    _fill(store, 1200)
    materialize(store, max_files=1)  # files 1 and 2 are sealed without copies, file 3 is the tail
    plan = plan_read(store, FILE, snapshot_bytes=0)  # writes nothing: the rmq source reads the rest
    assert plan.written == [] and plan.rest and plan.covered == {0: -1} and _snapshots(store) == []
    assert plan.end == _decoded(store)[-1]["physical_offset"] + _decoded(store)[-1]["size"]
    # a bound of 1.5 files: the two sealed files' records (below FILE each) and not the tail
    plan = plan_read(store, FILE, snapshot_bytes=FILE * 3 // 2)
    assert [e.file_from for e in plan.written] == [FILE] and plan.rest
    assert sorted(plan.covered) == [0, FILE]
    plan = plan_read(store, FILE, snapshot_bytes=FILE * 3 // 2)  # the next read goes on from there
    assert [e.file_from for e in plan.written] == [2 * FILE] and plan.rest
    plan = plan_read(store, FILE, snapshot_bytes=FILE * 3 // 2)
    assert [e.file_from for e in plan.written] == [3 * FILE] and not plan.rest
    assert _rows(store, plan.copies) == _decoded(store)


def test_a_snapshot_is_written_once(tmp_path: Path) -> None:
    """A second writer of the same snapshot (a concurrent reader) leaves the first file in place."""
    store = tmp_path / "s"
    _fill(store, 300)
    rows = _decoded(store)
    end = rows[-1]["physical_offset"] + rows[-1]["size"]
    task = FileTask(str(store), 0, FILE, end, tail=True)
    first = convert_file(task)
    assert first is not None and (first.start, first.scan_end, first.records) == (0, end, 300)
    assert re.fullmatch(rf"_tail/{0:020d}\.0-{end}\.[0-9a-f]{{8}}\.parquet", first.copy)
    ino = os.stat(columnar_dir(store) / first.copy).st_ino
    again = convert_file(task)
    assert again == first and os.stat(columnar_dir(store) / first.copy).st_ino == ino
    assert _snapshots(store) == [Path(first.copy).name]  # no temp file left
    meta = json.loads(pq.read_metadata(columnar_dir(store) / first.copy).metadata[b"rmqcore.copy"])
    assert meta == {**asdict(first), "copy_bytes": 0}
    assert pq.read_table(columnar_dir(store) / first.copy).to_pylist() == rows


def test_unused_snapshots_go_after_the_grace_period(tmp_path: Path) -> None:
    store = tmp_path / "s"
    _fill(store, 1200)
    materialize(store)
    a = plan_read(store, FILE).written[0]
    _fill(store, 3, start=1200)
    b = plan_read(store, FILE).written[0]  # [0, a) [a, b)
    _fill(store, 6, start=1203)
    c = plan_read(store, FILE)  # [0, a) [a, c): [a, b) merged in
    assert [(e.start, e.scan_end) for e in c.written] == [(a.scan_end, c.end - 3 * FILE)] and c.removed == []
    assert len(_snapshots(store)) == 3
    junk = [".x.parquet.tmp-1-abcd", f"{3 * FILE:020d}.5.parquet"]  # a killed writer's, an older rmqcore's
    for n in junk:
        (tail_dir(store) / n).write_bytes(b"junk")
    newest = max(q.stat().st_mtime for q in tail_dir(store).iterdir())
    assert plan_read(store, FILE, now=newest + 599).removed == []
    p = plan_read(store, FILE, now=newest + 601)
    assert sorted(p.removed) == sorted([b.copy, *(f"_tail/{n}" for n in junk)])
    assert [c for c in p.copies if c.startswith("_tail/")] == [f"_tail/{n}" for n in _snapshots(store)]
    _fill(store, 600, start=1209)  # file 3 sealed; materialize copies it: its snapshots are superseded
    rep = materialize(store)
    assert 3 * FILE in [e.file_from for e in rep.converted]
    assert len(_snapshots(store)) == 2  # kept for the grace period
    rep = materialize(store, snapshot_grace=0)
    assert _snapshots(store) == [] and len(rep.removed) == 2


def test_retention_removes_snapshots_with_their_files(tmp_path: Path, impl: Any) -> None:
    store = tmp_path / "s"
    _fill(store, 1200)
    materialize(store, max_files=1)
    assert plan_read(store, FILE).written  # snapshots of files 1, 2 and 3
    with MessageStore(store, impl=impl.name, delete_when="99", file_reserved_time_hours=1, **GEOM) as s:
        s.dispatch()
        deleted = s.clean_expired(1_800_000_000_000, force=True, usage_ratio=10)
    assert [os.path.basename(p) for p in deleted] == [f"{i * FILE:020d}" for i in range(3)]
    assert _snapshots(store) == [n for n in _snapshots(store) if n.startswith(f"{3 * FILE:020d}.")] != []


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_reader_that_may_not_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      code: int) -> None:
    """A read-only file system or no permission: no snapshot is written and none is deleted, the
    current ones are still read and the rest is left to the rmq source."""
    store = tmp_path / "s"
    _fill(store, 1200)
    materialize(store)
    old = plan_read(store, FILE).written[0]
    _fill(store, 20, start=1200)
    (tail_dir(store) / ".y.parquet.tmp-1-abcd").write_bytes(b"")  # old enough to go, were it writable
    before = _tree(store)
    real = {n: getattr(os, n) for n in ("open", "mkdir", "link", "rename", "replace", "unlink")}

    def refuse(name: str) -> Any:
        def call(path: Any, *a: Any, **k: Any) -> Any:
            writes = name != "open" or a[0] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            if writes and str(path).startswith(str(store)):
                raise OSError(code, os.strerror(code), str(path))
            return real[name](path, *a, **k)
        return call

    for n in real:
        monkeypatch.setattr(os, n, refuse(n))
    plan = plan_read(store, FILE, now=1e12)
    monkeypatch.undo()
    assert _tree(store) == before
    assert plan.written == [] and plan.removed == [] and plan.rest
    assert plan.copies[-1] == old.copy and plan.covered[3 * FILE] == old.scan_end
    assert plan.end == _decoded(store)[-1]["physical_offset"] + _decoded(store)[-1]["size"]


def test_stale_or_torn_snapshots_are_not_read(tmp_path: Path) -> None:
    store = tmp_path / "s"
    _fill(store, 1200)
    materialize(store)
    first = plan_read(store, FILE).written[0]
    with open(store / "commitlog" / first.file, "r+b") as f:  # recovery rewrote its last record
        f.seek(first.last_record + 12)  # its queue id
        f.write(b"\x00\x00\x00\x63")
    plan = plan_read(store, FILE)
    assert [(e.start, e.scan_end) for e in plan.written] == [(0, first.scan_end)]
    assert plan.written[0].copy != first.copy and first.copy not in plan.copies
    assert _rows(store, plan.copies) == _decoded(store) and _decoded(store)[-1]["queue_id"] == 0x63
    (columnar_dir(store) / plan.written[0].copy).write_bytes(b"PAR1")  # torn by a crash
    again = plan_read(store, FILE)  # made again, in the torn one's place (no reader can plan on that)
    assert [e.copy for e in again.written] == [plan.written[0].copy]
    assert _rows(store, again.copies) == _decoded(store)


def test_a_corrupt_record_is_reported_unless_it_ends_the_log(tmp_path: Path) -> None:
    """Bytes that are not a record in a file no copy holds: the end of the log when nothing follows
    (a torn tail, as recovery cuts it); a CorruptionError with path and offset when a later file
    has data."""
    store = tmp_path / "s"
    _fill(store, 1200)
    materialize(store, max_files=1)
    rows = [r for r in _decoded(store) if FILE <= r["physical_offset"] < 2 * FILE]
    bad = rows[5]
    path = store / "commitlog" / f"{FILE:020d}"
    data = bytearray(path.read_bytes())
    at = data.index(bad["body"], bad["physical_offset"] - FILE) + 3
    data[at] ^= 0xFF
    path.write_bytes(data)
    with pytest.raises(ChecksumError) as e:
        plan_read(store, FILE)
    assert (e.value.path, e.value.position) == (str(path), bad["physical_offset"] - FILE)
    assert _snapshots(store) == []
    for later in (store / "commitlog").iterdir():
        if int(later.name) > FILE:
            later.unlink()
    plan = plan_read(store, FILE)  # now it is the end of the log
    assert plan.end == bad["physical_offset"] and not plan.rest
    assert _rows(store, plan.copies) == [r for r in _decoded(store) if r["physical_offset"] < plan.end]
