"""Spark maintenance jobs over a RocketMQ store: verify every record's CRC in parallel and rebuild
consume queues and index files.

``verify_and_rebuild(spark, store_dir, rebuild=False, **geometry)`` runs one Spark task per CommitLog
file. A task reads its file, walks it with the native scanner (``codec.scan_records(...,
verify_crc=True)``; past a record with a bad body CRC the walk goes on, as its length is sound) and
returns its record count, where its data ends, how it ended and the offsets of bad records.

With ``rebuild=True`` each task also runs the dispatch kernel (``_impl.kernel("dispatch")``) over its
file, in the same batches ``MessageStore.dispatch`` uses, and returns the dispatch columns (topic,
queue id, queue offset, physical offset, size, tags code, store time, transaction type, index key
hashes). The driver then writes the consume queues and index files itself, file by file in CommitLog
order -- a store has exactly one writer -- with the same code paths ``MessageStore`` uses, so the
result is byte-identical to single-machine recovery (index file *names* are wall-clock times, as in
RocketMQ; their contents are identical).

The store directory must be readable at the same path on the executors (a shared file system, or
``local``/``local-cluster`` mode); only the driver writes. Rebuilding takes the store's ``lock``
(so no ``MessageStore`` may have it open for writing), is refused when verification found a problem
or the store was not shut down cleanly (open it with ``MessageStore`` for abnormal recovery), and
replaces ``consumequeue/`` and ``index/`` entirely. The driver holds the dispatch columns of the
whole store while it writes (about 90 bytes per message plus 8 per index key), so very large stores
need a driver sized for that. Only verification runs for files with problems.

This module imports pyspark lazily: importing it needs only rmqcore.
"""
from __future__ import annotations

import contextlib
import mmap
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import layout as L
from ..config import StoreConfig
from ..errors import StoreLockedError
from ..geometry import resolve
from ..storelock import StoreLock
from ..verify import Problem

__all__ = ["FileCheck", "MaintenanceReport", "verify_and_rebuild", "scan_commitlog_file"]

_CAP = 4000  # records per dispatch batch: MessageStore's batch (index-file rolls depend on it)
_KEYS_CAP = _CAP * 8
_MAX_BAD = 1000  # bad-CRC offsets reported per file
_STATUS_NAMES = {
    L.ST_MSG: "MSG", L.ST_END: "END", L.ST_BLANK: "BLANK", L.ST_TORN: "TORN",
    L.ST_BAD_MAGIC: "BAD_MAGIC", L.ST_BAD_SIZE: "BAD_SIZE", L.ST_BAD_CRC: "BAD_CRC",
}


@dataclass
class FileCheck:
    """What one task found in one CommitLog file.

    ``status``: how the walk ended: ``BLANK`` (filler, the file is complete), ``END`` (the data
    ends here), ``TORN``/``BAD_MAGIC``/``BAD_SIZE`` (unreadable bytes at ``end``). ``bad_crc``: file
    positions (absolute CommitLog offsets) of records whose body CRC does not match (they are
    counted in ``count``: their frames are sound and the walk continues past them).
    """

    path: str
    file_from_offset: int
    file_size: int
    count: int
    end: int  # absolute CommitLog offset where the walk stopped
    status: str
    first_bad_offset: int  # absolute offset of the first bad record / unreadable bytes, -1 if none
    bad_crc: list[int] = field(default_factory=list)
    last_store_timestamp: int = -1

    @property
    def ok(self) -> bool:
        return self.first_bad_offset < 0


@dataclass
class MaintenanceReport:
    store: str
    files: list[FileCheck] = field(default_factory=list)
    messages: int = 0
    problems: list[Problem] = field(default_factory=list)
    rebuilt: bool = False
    consume_queues: int = 0
    consume_queue_units: int = 0
    index_files: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def corrupt_records(self) -> list[tuple[str, int]]:
        """``(path, absolute offset)`` of every bad record found."""
        return [(p.path, p.offset) for p in self.problems if p.kind == "commitlog"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "store": self.store, "ok": self.ok, "messages": self.messages, "rebuilt": self.rebuilt,
            "consume_queues": self.consume_queues, "consume_queue_units": self.consume_queue_units,
            "index_files": self.index_files, "problems": [p.as_dict() for p in self.problems],
            "files": [vars(f) | {"ok": f.ok} for f in self.files],
        }


# -- executor side -------------------------------------------------------------------------------------
@contextlib.contextmanager
def _mapped(path: str) -> Iterator[Any]:
    """The file, mapped read-only (a task never holds a whole CommitLog file in its heap)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield b""
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mm
        finally:
            with contextlib.suppress(BufferError):  # a view still out: the GC unmaps it later
                mm.close()


def scan_commitlog_file(path: str, file_from_offset: int) -> FileCheck:
    """Verify one CommitLog file with the native scanner (runs in a Spark task; usable alone)."""
    from .. import _impl

    codec = _impl.kernel("codec")
    with _mapped(path) as buf:
        return _scan(codec, buf, file_from_offset, path)


def _scan(codec: Any, buf: Any, file_from_offset: int, path: str) -> FileCheck:
    size = len(buf)
    pos, count, last_ts = 0, 0, -1
    bad: list[int] = []
    while True:
        status, end, n, ts = codec.scan_records(buf, pos, size, True, -1)
        count += n
        if ts >= 0:
            last_ts = ts
        if status == L.ST_BAD_CRC:
            if len(bad) < _MAX_BAD:
                bad.append(file_from_offset + end)
            pk, rec_size = codec.peek_record(buf, end, size)
            if pk == L.ST_MSG and rec_size > 0:  # the frame is sound: keep checking what follows
                count += 1
                pos = end + rec_size
                continue
        break
    first_bad = min(bad) if bad else -1
    if status not in (L.ST_BLANK, L.ST_END):
        first_bad = min(first_bad, file_from_offset + end) if first_bad >= 0 else file_from_offset + end
    return FileCheck(path, file_from_offset, size, count, file_from_offset + end,
                     _STATUS_NAMES.get(status, str(status)), first_bad, bad, last_ts)


def _dispatch_file(path: str, file_from_offset: int) -> list[dict[str, Any]]:
    """The dispatch columns of one file's records, in MessageStore.dispatch's batches."""
    from .. import _impl

    dk = _impl.kernel("dispatch")
    codec = _impl.kernel("codec")
    with _mapped(path) as buf:
        return _dispatch_buf(dk, codec, buf, file_from_offset)


def _dispatch_buf(dk: Any, codec: Any, buf: Any, file_from_offset: int) -> list[dict[str, Any]]:
    from ..store.dispatch import general_tags

    limit = len(buf)
    cols = np.empty((L.NCOLUMNS, _CAP), dtype=np.int64)
    disp = np.empty((4, _CAP), dtype=np.int64)
    keys = np.empty(_KEYS_CAP, dtype=np.int64)
    chunks: list[dict[str, Any]] = []
    pos = 0
    while pos < limit:
        n, end_pos, status, nkeys = dk.dispatch_batch(buf, pos, limit, cols, disp, keys, False)
        if n:
            positions = cols[L.C_POSITION, :n]
            tags = disp[0, :n].copy()
            general_tags(codec, buf, limit, file_from_offset, positions, disp[1, :n], tags)
            tp, tl = cols[L.C_TOPIC_POS, :n].tolist(), cols[L.C_TOPIC_LEN, :n].tolist()
            ids: dict[bytes, int] = {}
            tid = np.fromiter(
                (ids.setdefault(buf[p : p + ln], len(ids)) for p, ln in zip(tp, tl, strict=True)),
                dtype=np.int64, count=n,
            )
            chunks.append({
                "phys": positions + file_from_offset,
                "size": cols[L.C_SIZE, :n].copy(),
                "tags": tags,
                "qid": cols[L.C_QUEUE_ID, :n].copy(),
                "qoff": cols[L.C_QUEUE_OFFSET, :n].copy(),
                "tran": cols[L.C_SYS_FLAG, :n] & L.TRANSACTION_MASK,
                "ts": cols[L.C_STORE_TIMESTAMP, :n].copy(),
                "topic_id": tid,  # index into topic_names
                "topic_names": [t.decode("utf-8", "replace") for t in ids],
                "keys": keys[:nkeys].copy(),
                "key_counts": disp[3, :n].copy(),
            })
        if status == L.ST_BLANK or n == 0 or end_pos <= pos:
            break
        pos = end_pos
    return chunks


def _task(item: tuple[str, int, bool]) -> tuple[FileCheck, list[dict[str, Any]] | None]:
    path, from_offset, rebuild = item
    check = scan_commitlog_file(path, from_offset)
    chunks = _dispatch_file(path, from_offset) if rebuild and check.ok else None
    return check, chunks


# -- driver side ---------------------------------------------------------------------------------------
def _commitlog_files(store_dir: Path) -> list[tuple[str, int]]:
    d = store_dir / "commitlog"
    out = []
    if d.is_dir():
        for name in sorted(os.listdir(d)):
            off = L.file_name_to_offset(name)
            if off is not None and os.path.isfile(d / name):
                out.append((str(d / name), off))
    return out


def _check_files(rep: MaintenanceReport, cfg: Any) -> None:
    """Problems from the per-file results: bad records, wrong sizes, and data after the end."""
    ended: FileCheck | None = None
    for fc in rep.files:
        if fc.file_size != cfg.commitlog_file_size:
            rep.problems.append(Problem("commitlog", fc.path, fc.file_from_offset,
                                        f"file size {fc.file_size}, expected {cfg.commitlog_file_size}"))
        for off in fc.bad_crc:
            rep.problems.append(Problem("commitlog", fc.path, off, "body CRC mismatch"))
        if fc.status not in ("BLANK", "END"):
            rep.problems.append(Problem("commitlog", fc.path, fc.end, f"invalid record ({fc.status})"))
        if ended is not None and fc.count:
            rep.problems.append(Problem("commitlog", fc.path, fc.file_from_offset,
                                        f"valid records after the end of the log at {ended.end} "
                                        "(unreachable by a RocketMQ reader)"))
        if ended is None and fc.status != "BLANK":
            ended = fc


def _apply_chunk(
    store_dir: Path, cfg: Any, cqs: dict[tuple[str, int], Any], index: Any, c: dict[str, Any]
) -> None:
    """One batch the tasks computed, written through the store's apply path (``store.dispatch``)."""
    from ..consumequeue import ConsumeQueue
    from ..store.dispatch import apply_batch

    names = c["topic_names"]

    def queue_of(g: int) -> Any:
        q = g & 0xFFFFFFFF
        key = (names[g >> 32], q - (1 << 32) if q >= 1 << 31 else q)
        cq = cqs.get(key)
        if cq is None:
            cq = cqs[key] = ConsumeQueue(store_dir, key[0], key[1], file_size=cfg.cq_file_size)
        return cq

    apply_batch(queue_of, c["topic_id"], c["qid"], c["phys"], c["size"], c["tags"], c["qoff"], c["tran"], index,
                c["keys"], c["key_counts"], c["ts"])


def _rebuild(store_dir: Path, cfg: Any, results: list[tuple[FileCheck, Any]], rep: MaintenanceReport) -> None:
    from ..indexfile import IndexService

    try:
        lock = StoreLock(store_dir)
    except StoreLockedError as e:
        rep.problems.append(Problem("rebuild", str(store_dir / "lock"), -1, f"{e}; not rebuilt"))
        return
    try:
        for sub in ("consumequeue", "index"):
            shutil.rmtree(store_dir / sub, ignore_errors=True)
        cqs: dict[tuple[str, int], Any] = {}
        index = None
        if cfg.message_index_enable:
            index = IndexService(store_dir, cfg.index_slots, cfg.index_entries)
        try:
            for fc, chunks in results:  # CommitLog order; stop where recovery would
                for c in chunks or ():
                    _apply_chunk(store_dir, cfg, cqs, index, c)
                if fc.status != "BLANK":
                    break
            for cq in cqs.values():
                cq.flush()
            if index is not None:
                index.flush()
                rep.index_files = len(index.index_files)
            rep.consume_queues = len(cqs)
            rep.consume_queue_units = sum(cq.max_offset - cq.min_offset for cq in cqs.values())
            rep.rebuilt = True
        finally:
            for cq in cqs.values():
                cq.close()
            if index is not None:
                index.close()
    finally:
        lock.release()


def verify_and_rebuild(spark: Any, store_dir: str | os.PathLike[str], rebuild: bool = False,
                       **geometry: Any) -> MaintenanceReport:
    """Verify every CommitLog record's CRC in parallel (one Spark task per file) and, with
    ``rebuild=True``, rebuild ``consumequeue/`` and ``index/`` from the CommitLog.

    Args:
        spark: a SparkSession (or SparkContext); the store must be readable at ``store_dir`` on executors.
        store_dir: the store root.
        rebuild: rebuild consume queues and index files (only when verification is clean).
        geometry: StoreConfig fields (``commitlog_file_size``, ``cq_file_size``, ``index_slots``,
            ``index_entries``, ``message_index_enable``); default: the store's saved geometry, or
            sizes detected from its files, else RocketMQ's defaults.

    Returns a MaintenanceReport: per-file results, the message count, problems (corrupt records
    with path and absolute offset) and what was rebuilt.
    """
    store_dir = Path(store_dir).resolve()
    cfg = StoreConfig().replace(**resolve(store_dir, geometry).values)
    rep = MaintenanceReport(str(store_dir))
    files = _commitlog_files(store_dir)
    sc = getattr(spark, "sparkContext", spark)
    results: list[tuple[FileCheck, Any]] = []
    if files:
        items = [(p, off, bool(rebuild)) for p, off in files]
        results = sc.parallelize(items, len(items)).map(_task).collect()
        results.sort(key=lambda r: r[0].file_from_offset)
    rep.files = [fc for fc, _ in results]
    rep.messages = sum(fc.count for fc in rep.files)
    _check_files(rep, cfg)
    if rebuild:
        if (store_dir / "abort").exists():
            why = "not rebuilt: open the store with MessageStore for abnormal recovery"
            rep.problems.append(Problem("unclean-shutdown", str(store_dir / "abort"), -1, why))
        elif rep.problems:
            why = "not rebuilt: the CommitLog has problems"
            rep.problems.append(Problem("rebuild", str(store_dir), -1, why))
        else:
            _rebuild(store_dir, cfg, results, rep)
    return rep
