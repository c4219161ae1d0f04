"""Snapshots of the live tail: what no sealed copy holds, as immutable Parquet files, so that
:func:`rmqcore.spark.read_store` reads a live store with Spark's own Parquet reader alone instead of
planning the ``rmq`` Python source for its tail (a fixed ~0.2-1 s per query beside Spark's scans).

``<store>/rmqcore-columnar/_tail/<CommitLog file>.<start>-<end>.<tag>.parquet`` holds the records of
one CommitLog file between file positions ``start`` and ``end`` (record boundaries: ``end`` is where
its CRC-checked records ended when it was written; ``tag`` is a CRC of its last record's header,
see :func:`~rmqcore.columnar.manifest.copy_path`). A snapshot is written once -- under a temp name,
fsynced after its CommitLog file, then hard-linked to its name, which fails when another reader
published the same one first: a file a query has planned on is never replaced -- and never changed.
Its Parquet footer holds its manifest entry (:data:`~rmqcore.columnar.manifest.COPY_METADATA`),
checked as a sealed copy's is (:func:`~rmqcore.columnar.manifest.is_current`): a CommitLog file
rewritten by recovery invalidates it.

**Planning a read** (:func:`plan_read`, on the driver): files with a current sealed copy are read
from it; every other CommitLog file from its *chain* of current snapshots (from position 0, the one
reaching furthest, then with the fewest pieces) and, past the chain's end, from a snapshot written
now of its records up to the end of the log's valid data (found by a CRC-checked walk of what the
chains do not hold, as recovery finds it). The new piece takes in the chain's last pieces while
each is at most twice its size so far (within the bound below): each piece of a chain is then more
than twice the next one, so a file read after every append keeps O(log bytes) pieces, and a record
is rewritten only into a piece at least 1.5 times larger, O(log bytes) times. The read then holds
exactly the records the log held when it was planned.

**Bound.** One plan converts at most ``snapshot_bytes`` of CommitLog (default
:data:`~rmqcore.columnar.manifest.SNAPSHOT_BYTES`, 256 MiB); past that the records are left to the
``rmq`` source. A snapshot is written by one core of the driver at materialize's rate (~230 MB of
CommitLog per second here), while the ``rmq`` source decodes on the executors at ~50-60 MB/s per
core after its fixed cost of ~0.2-1 s: on one or two cores the snapshot always wins; with eight
executor cores the source catches up between ~100 and ~500 MB. 256 MiB is ~1.1 s of the driver.

**Clean-up** (each plan, and each ``materialize`` run). A snapshot no chain uses (merged into a
larger one, superseded by its file's sealed copy, or no longer current) is deleted once the newest
snapshot of its CommitLog file (or the manifest listing the file's copy) is ``grace`` seconds old
(default :data:`~rmqcore.columnar.manifest.GRACE_SECONDS`, 600: reads planned since then use the
newer files, and the queries planned before had that long to run). Snapshots of CommitLog files
that retention deleted go with them, as their copies do; temp files older than the grace period are
a killed writer's.

**Read-only stores.** A reader that cannot write (no permission, a read-only or full file system)
writes and deletes nothing: it still reads the current snapshots, and the ``rmq`` source reads the
rest.

Needs pyarrow (not pyspark).
"""

from __future__ import annotations

import errno
import math
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import layout as L
from .manifest import (
    GRACE_SECONDS,
    MANIFEST,
    SNAPSHOT_BYTES,
    TEMP_MARK,
    CopyEntry,
    columnar_dir,
    current_copies,
    is_current,
    tail_dir,
)
from .materialize import FileTask, convert_file, footer_entry
from .stores import open_commitlog, raise_if_data_after

__all__ = ["Piece", "ReadPlan", "plan_read", "best_chain", "merge_start"]

_PIECE = re.compile(r"^(\d{20})\.(\d+)-(\d+)\.[0-9a-f]{8}\.parquet$")
_OLD_TAIL = re.compile(r"^\d{20}\.\d+\.parquet$")  # an earlier rmqcore's tail copy: no longer read
# what a reader that may not write meets: it snapshots nothing then
_CANNOT_WRITE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT})


@dataclass(frozen=True)
class Piece:
    """A snapshot file: the records of the CommitLog file at ``file_from`` in file positions
    ``[start, end)``; ``mtime`` is when it was written."""

    file_from: int
    start: int
    end: int
    path: Path
    mtime: float

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass
class ReadPlan:
    """What a read of one store takes from Parquet files, and whether records are left for the
    ``rmq`` source (``rest``: those of each CommitLog file past ``covered``, below ``end``)."""

    store_dir: str
    end: int = 0  # the end of the log's valid data when planned (a global offset): the read stops there
    copies: list[str] = field(default_factory=list)  # Parquet files, relative to the columnar directory
    # file base offset -> -1 (its sealed copy) or the file position where its snapshots end
    covered: dict[int, int] = field(default_factory=dict)
    rest: bool = False
    written: list[CopyEntry] = field(default_factory=list)  # snapshots made by this plan
    removed: list[str] = field(default_factory=list)  # files deleted, relative to the columnar directory


def best_chain(pieces: Iterable[Piece]) -> list[Piece]:
    """The chain of ``pieces`` from file position 0, each starting where the one before ends, that
    reaches furthest, with the fewest pieces (then the first in (start, end, name) order): readers
    looking at the same files pick the same chain."""
    best: dict[int, list[Piece]] = {0: []}
    for p in sorted(pieces, key=lambda p: (p.start, p.end, p.path.name)):
        if p.start in best and p.end > p.start:
            chain = [*best[p.start], p]
            if p.end not in best or len(chain) < len(best[p.end]):
                best[p.end] = chain
    return best[max(best)]


def merge_start(chain: list[Piece], end: int, limit: float) -> int:
    """Where a file's next snapshot starts when its records now end at ``end``: where ``chain``
    ends, or earlier, taking in the chain's last pieces while each is at most twice the new piece
    so far and the new piece stays within ``limit`` bytes (they are popped off ``chain``). Any two
    neighbours left in a chain are then a piece more than twice the next, or more than ``limit``
    together."""
    start = chain[-1].end if chain else 0
    while chain and chain[-1].size <= 2 * (end - start) and end - chain[-1].start <= limit:
        start = chain.pop().start
    return start


def _listing(store: str) -> tuple[dict[int, list[Piece]], list[tuple[Path, float]]]:
    """The snapshots in ``_tail/`` by CommitLog file, and the other files there that are deleted
    once old (temp files, earlier rmqcores' tail copies)."""
    by_file: dict[int, list[Piece]] = {}
    other: list[tuple[Path, float]] = []
    try:
        found = list(os.scandir(tail_dir(store)))
    except FileNotFoundError:
        return by_file, other
    for de in found:
        try:
            mtime = de.stat().st_mtime
        except FileNotFoundError:  # pruned by another reader meanwhile
            continue
        m = _PIECE.match(de.name)
        if m:
            f = int(m.group(1))
            by_file.setdefault(f, []).append(Piece(f, int(m.group(2)), int(m.group(3)), Path(de.path), mtime))
        elif _OLD_TAIL.match(de.name) or (de.name.startswith(".") and TEMP_MARK in de.name):
            other.append((Path(de.path), mtime))
    return by_file, other


def _is_current(store: str, file_size: int, p: Piece) -> bool:
    """Whether snapshot ``p`` holds what its name says and its CommitLog file still holds it."""
    e = footer_entry(p.path)
    try:
        e = None if e is None else replace(e, copy_bytes=os.stat(p.path).st_size)
    except FileNotFoundError:  # pruned meanwhile
        return False
    if e is None or (e.file_from, e.start, e.scan_end, e.sealed) != (p.file_from, p.start, p.end, False):
        return False
    return is_current(store, e, file_size)


def _current_chain(store: str, file_size: int, pieces: list[Piece]) -> list[Piece]:
    """The best chain of the current ones of ``pieces`` (footers read for the candidates only)."""
    candidates = list(pieces)
    checked: dict[Piece, bool] = {}
    while True:
        chain = best_chain(candidates)
        bad = {p for p in chain if not checked.setdefault(p, _is_current(store, file_size, p))}
        if not bad:
            return chain
        candidates = [p for p in candidates if p not in bad]


def _walk(cl: Any, plan: ReadPlan, sealed: set[int], chains: dict[int, list[Piece]]) -> list[tuple[int, int]]:
    """Find the end of the log's valid data (``plan.end``) walking only what no copy or chain holds,
    with CRC checks, as recovery does; returns ``(file base, records end)`` of the files whose records
    run past their chain.

    Raises:
        CorruptionError: invalid bytes in a file after which another file has data (not a torn tail).
    """
    files = cl.queue.files
    codec = cl._codec
    todo = []
    plan.end = files[0].file_from_offset if files else 0
    for mf in files:
        f = mf.file_from_offset
        if f in sealed:
            plan.end = mf.file_end_offset
            continue
        chain = chains.get(f)
        at = chain[-1].end if chain else 0
        status, end, _count, _ts = codec.scan_records(mf.mm, at, mf.file_size, True, -1)
        if status < 0:
            raise_if_data_after(cl, status, f + end)
        if end > at:
            todo.append((f, end))
        if status != L.ST_BLANK:
            plan.end = f + end
            break
        plan.end = mf.file_end_offset
    return todo


def plan_read(
    store_dir: str | os.PathLike[str],
    file_size: int,
    *,
    snapshot_bytes: int | None = SNAPSHOT_BYTES,
    grace: float = GRACE_SECONDS,
    compression: str = "snappy",
    walk: bool = True,
    prune: bool = True,
    now: float | None = None,
) -> ReadPlan:
    """Plan a read of the store at ``store_dir`` from its Parquet files, snapshotting what no copy
    holds up to the end of the log's valid data (at most ``snapshot_bytes`` of CommitLog; None: no
    bound, 0: nothing), and delete the snapshots the ``grace`` period lets go (with ``prune``); see
    the module docs. ``walk=False`` only prunes (``plan.end`` and ``plan.rest`` are not set then).

    Raises:
        CorruptionError: a record is corrupt (with path and offset), other than at the log's end.
    """
    store = os.path.abspath(store_dir)
    budget = math.inf if snapshot_bytes is None else max(0, snapshot_bytes)
    plan = ReadPlan(store)
    sealed = {e.file_from: e for e in current_copies(store, file_size)}
    by_file, other = _listing(store)
    chains = {f: _current_chain(store, file_size, ps) for f, ps in by_file.items() if f not in sealed}
    if walk:
        cl = open_commitlog(store, file_size, recover=False)
        try:
            todo = _walk(cl, plan, set(sealed), chains)
        finally:
            cl.close()
        writable, spent = budget > 0, 0
        for f, end in todo:
            chain = list(chains.get(f, []))
            at = chain[-1].end if chain else 0
            if not writable or end - at > budget - spent:
                continue
            start = merge_start(chain, end, budget - spent)
            try:
                e = convert_file(FileTask(store, f, file_size, f + end, compression, tail=True, start=start))
            except OSError as x:
                if x.errno not in _CANNOT_WRITE:
                    raise
                writable = False
                continue
            if e is None:  # deleted by retention meanwhile
                continue
            new = Piece(f, start, e.scan_end, columnar_dir(store) / e.copy, time.time())
            chains[f] = [*chain, new]
            by_file.setdefault(f, []).append(new)
            spent += new.size
            plan.written.append(e)
        for f in sorted({*sealed, *chains}):
            if f >= plan.end:
                continue
            if f in sealed:
                plan.copies.append(sealed[f].copy)
                plan.covered[f] = -1
            elif chains[f]:
                plan.copies.extend(_rel(store, p.path) for p in chains[f])
                plan.covered[f] = chains[f][-1].end
        plan.rest = any(plan.covered.get(f, 0) < end for f, end in todo)
    if prune:
        plan.removed = _prune(store, by_file, other, chains, sealed, grace,
                              time.time() if now is None else now)
    return plan


def _rel(store: str, p: Path) -> str:
    return str(p.relative_to(columnar_dir(store)))


def _prune(store: str, by_file: dict[int, list[Piece]], other: list[tuple[Path, float]],
           chains: dict[int, list[Piece]], sealed: dict[int, CopyEntry], grace: float,
           now: float) -> list[str]:
    """Delete what no read can be using any more (see the module docs); stops quietly where the
    reader may not delete."""
    names = set(os.listdir(Path(store) / "commitlog"))
    doomed: list[Path] = []
    listed = _mtime(columnar_dir(store) / MANIFEST)  # when the manifest last listed new copies
    for f, pieces in by_file.items():
        if L.offset_to_file_name(f) not in names:  # retention deleted the file
            doomed.extend(p.path for p in pieces)
            continue
        newest = max(p.mtime for p in pieces)
        if f in sealed:
            newest = max(newest, listed)
        if now - newest >= grace:
            keep = set() if f in sealed else set(chains.get(f, []))
            doomed.extend(p.path for p in pieces if p not in keep)
    doomed.extend(p for p, mtime in other if now - mtime >= grace)
    removed = []
    for p in doomed:
        try:
            os.unlink(p)
        except FileNotFoundError:  # another reader pruned it
            continue
        except OSError as e:
            if e.errno in _CANNOT_WRITE:
                break
            raise
        removed.append(_rel(store, p))
    return removed


def _mtime(p: Path) -> float:
    try:
        return os.stat(p).st_mtime
    except FileNotFoundError:
        return 0.0
