"""Parquet copies of sealed CommitLog files (``rmqcore materialize``, ``rmqcore.spark.materialize``).

A CommitLog file is *sealed* once the log's valid data runs past its end (the appender has moved to
the next file: its records end with a BLANK filler or fill it exactly); its copy is then final. Each
file is decoded by the native batch decoder with CRC checks (a bad record raises its CorruptionError
with the file's path and offset, and nothing of that file is published) into Arrow batches of the
``rmq`` schema and written with pyarrow's Parquet writer to a temp name (``.<name>.parquet.tmp-*``,
invisible to Spark, pyarrow.dataset and ``*.parquet`` globs), fsynced and renamed into place; then
the manifest (see :mod:`rmqcore.columnar.manifest`) is rewritten. A run killed at any point leaves
copies that are either whole or invisible; the next run removes the leftovers and converts what is
missing. A rerun converts only files without a current copy. With ``tail=True`` a run also
snapshots what no sealed copy holds now (see :mod:`rmqcore.columnar.snapshot`; ``read_store`` does
that itself, within a size bound): for a store that is no longer written, everything is then read as
Parquet. Each run removes the snapshots no reader can be using any more.

Needs pyarrow (not pyspark).
"""

from __future__ import annotations

import errno
import json
import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .. import __version__
from .. import layout as L
from ..errors import ConfigError, CorruptionError, DirectoryNotFoundError
from .manifest import (
    COPY_METADATA,
    GRACE_SECONDS,
    TEMP_MARK,
    CopyEntry,
    columnar_dir,
    copy_path,
    current_copies,
    file_of_copy,
    load_manifest,
    record_head,
    run_lock,
    save_manifest,
    sealed_copy_files,
    tail_dir,
    temp_files,
)
from .stores import geometry, open_commitlog

__all__ = ["FileTask", "MaterializeReport", "convert_file", "materialize"]

ROW_GROUP_BYTES = 16 * 1024 * 1024  # Arrow bytes per Parquet row group (~70k rows of 230 bytes)
_DECODE_ROWS = 16384
# dictionary-encoded: the columns with a few distinct values that queries filter or group on (more
# dictionaries, e.g. the hosts, cost hashing time for a few percent of the file's size)
_DICTIONARY = ["store", "topic", "tags"]
# min/max statistics per row group: what filters prune on
_STATISTICS = ["topic", "queue_id", "queue_offset", "physical_offset", "store_timestamp"]
COMPRESSIONS = ("snappy", "zstd", "lz4", "gzip", "none")
_ENTRY_FIELDS = frozenset(f.name for f in fields(CopyEntry))


@dataclass(frozen=True)
class FileTask:
    """One CommitLog file to convert (small and picklable: a Spark task's input)."""

    store_dir: str
    file_from: int
    file_size: int
    end: int  # the log's valid end when planned (past this file's end)
    compression: str = "snappy"
    row_group_bytes: int = ROW_GROUP_BYTES
    tail: bool = False  # a snapshot: the records from file position ``start`` up to ``end`` (global)
    start: int = 0


@dataclass
class MaterializeReport:
    """What a run did: ``converted`` copies (and with ``tail=True`` snapshots) made now, ``current``
    files that already had one, ``unsealed`` files (the live tail: snapshotted by ``read_store`` or
    ``tail=True``), ``removed`` stale copies, snapshots and leftovers deleted."""

    store_dir: str
    converted: list[CopyEntry] = field(default_factory=list)
    current: int = 0
    unsealed: int = 0
    pending: int = 0  # sealed files left for a later run (``max_files``)
    removed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def commitlog_bytes(self) -> int:
        return sum(e.scan_end - e.start for e in self.converted)

    @property
    def copy_bytes(self) -> int:
        return sum(e.copy_bytes for e in self.converted)


def _writer_options(compression: str) -> dict[str, Any]:
    if compression not in COMPRESSIONS:
        raise ConfigError(f"compression must be one of {', '.join(COMPRESSIONS)}, not {compression!r}")
    return {
        "compression": compression,
        "use_dictionary": _DICTIONARY,
        "write_statistics": _STATISTICS,
    }


def _fsync_path(path: str | os.PathLike[str], flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def convert_file(task: FileTask) -> CopyEntry | None:
    """Write the copy of one sealed CommitLog file, or the snapshot of its records from
    ``task.start`` up to ``task.end`` (temp name, fsync, then into place), and return its manifest
    entry (also kept in the Parquet footer, :data:`COPY_METADATA`); None when there are no records
    or retention deleted the file meanwhile. A snapshot is named after the records it holds and
    never replaces a file: when another reader published the same one first, that one is returned.

    Raises:
        CorruptionError: a record fails its CRC or the walk ends inside the file without a BLANK
            filler (path and offset in the error); no copy is published.
        OSError: the copy cannot be written (the temp file is removed).
    """
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    from .arrow import ARROW_SCHEMA, decode_range

    opts = _writer_options(task.compression)
    name = L.offset_to_file_name(task.file_from)
    src = os.path.join(task.store_dir, "commitlog", name)
    stop = task.end if task.tail else task.file_from + task.file_size
    folder = tail_dir(task.store_dir) if task.tail else columnar_dir(task.store_dir)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}{TEMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    cl = open_commitlog(task.store_dir, task.file_size, task.end)
    try:
        if cl.min_offset > task.file_from:  # deleted by retention since planning
            return None
        _fsync_path(src)  # the copy never holds bytes the log could still lose in a power failure
        # the temp name is ours alone; a reader that may not write fails here, before any work
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        records, last_pos, last_size = 0, -1, 0
        entry = None
        group: list[Any] = []
        group_bytes = 0
        try:
            with pq.ParquetWriter(str(tmp), ARROW_SCHEMA, **opts) as w:
                for rb in decode_range(cl, task.store_dir, task.file_from + task.start, stop, None,
                                       _DECODE_ROWS, verify_crc=True):
                    records += rb.num_rows
                    last_pos = rb.column("physical_offset")[-1].as_py() - task.file_from
                    last_size = rb.column("size")[-1].as_py()
                    group.append(rb)
                    group_bytes += rb.nbytes
                    if group_bytes >= task.row_group_bytes:
                        w.write_table(pa.Table.from_batches(group), row_group_size=1 << 40)
                        group, group_bytes = [], 0
                if group:
                    w.write_table(pa.Table.from_batches(group), row_group_size=1 << 40)
                if records:
                    entry = CopyEntry(name, task.file_size, last_pos + last_size, records, last_pos,
                                      record_head(src, last_pos), "", 0, not task.tail,
                                      rmqcore_version=__version__, start=task.start)
                    final = copy_path(task.store_dir, name, entry if task.tail else None)
                    entry = replace(entry, copy=str(final.relative_to(columnar_dir(task.store_dir))))
                    w.add_key_value_metadata({COPY_METADATA: json.dumps(asdict(entry))})
            if entry is None:
                os.unlink(tmp)
                return None
            if not task.tail:
                _check_sealed(src, entry.scan_end, task.file_size)
            _fsync_path(tmp)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    finally:
        cl.close()
    final = columnar_dir(task.store_dir) / entry.copy
    if task.tail:
        _publish_once(tmp, final, lambda: footer_entry(final) == entry)
    else:
        os.replace(tmp, final)
    _fsync_path(final.parent)
    if not os.path.exists(src):  # retention deleted the file while it was converted: drop the copy
        final.unlink(missing_ok=True)
        return None
    return replace(entry, copy_bytes=os.stat(final).st_size)


def _publish_once(tmp: Path, final: Path, same: Callable[[], bool]) -> None:
    """Give ``tmp`` the name ``final`` unless a file has it (a hard link, which never replaces one:
    a reader that planned a query on ``final`` keeps reading the same bytes); ``tmp`` is removed.
    A file there that does not hold the same records (``same()``: torn by a crash, so no reader
    plans on it) is replaced."""
    try:
        try:
            os.link(tmp, final)
        except FileExistsError:
            if not same():
                os.replace(tmp, final)
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
                raise
            if not final.exists() or not same():  # a file system without hard links: rename
                os.rename(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def footer_entry(path: Path) -> CopyEntry | None:
    """The manifest entry a copy's Parquet footer holds (``copy_bytes`` 0), or None when the file is
    gone, torn or not a copy."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    try:
        doc = json.loads((pq.read_metadata(path).metadata or {})[COPY_METADATA.encode()])
        return CopyEntry(**{k: v for k, v in doc.items() if k in _ENTRY_FIELDS})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _check_sealed(src: str, scan_end: int, file_size: int) -> None:
    """A sealed file's records end at its end or at a BLANK filler."""
    if scan_end >= file_size:
        return
    head = bytes.fromhex(record_head(src, scan_end))
    if len(head) < 8 or int.from_bytes(head[4:8], "big", signed=True) != L.MAGIC_BLANK:
        raise CorruptionError("the records of a sealed CommitLog file end without a BLANK filler",
                              position=scan_end, path=src)


def _plan(store_dir: str, file_size: int) -> tuple[list[int], list[int], int, CorruptionError | None]:
    """Base offsets of the sealed files and of the unsealed one with data (none or one), the log's
    valid end, and the damaged record it ends at when records follow it (none then is unsealed: the
    files before the damage are copied, then the damage is raised)."""
    damage = None
    try:
        cl = open_commitlog(store_dir, file_size)
    except CorruptionError as e:
        assert e.path is not None and e.position is not None
        damage = e
        cl = open_commitlog(store_dir, file_size, int(os.path.basename(e.path)) + e.position)
    try:
        end = cl.max_offset
        sealed = [mf.file_from_offset for mf in cl.queue.files if mf.file_end_offset <= end]
        unsealed = [mf.file_from_offset for mf in cl.queue.files
                    if damage is None and mf.file_from_offset < end < mf.file_end_offset]
        return sealed, unsealed, end, damage
    finally:
        cl.close()


def materialize(
    store_dir: str | os.PathLike[str],
    *,
    commitlog_file_size: int | None = None,
    max_files: int | None = None,
    compression: str = "snappy",
    row_group_bytes: int = ROW_GROUP_BYTES,
    tail: bool = False,
    snapshot_grace: float = GRACE_SECONDS,
    convert_all: Callable[[list[FileTask]], Iterable[CopyEntry | CorruptionError | None]] | None = None,
    progress: Callable[[CopyEntry], None] | None = None,
) -> MaterializeReport:
    """Make the missing Parquet copies of a store's sealed CommitLog files (at most ``max_files``
    of them, oldest first) in ``<store>/rmqcore-columnar/``, with ``tail`` the snapshots of what no
    sealed copy holds now, and remove the snapshots unused for ``snapshot_grace`` seconds; see the
    module docs.

    ``convert_all`` runs :func:`convert_file` over the tasks, yielding entries or the CorruptionError
    of a file (default: one after the other in this process, stopping at a corrupt file; the manifest
    is rewritten after each file; ``rmqcore.spark.materialize`` runs them as Spark tasks).
    The store may be open for writing meanwhile: only sealed files are read.

    Raises:
        StoreLockedError: another materialize run is going on.
        CorruptionError: a record of a sealed file is corrupt (the copies made before it are kept).
        ConfigError: an unknown compression or a negative ``max_files``.
        DirectoryNotFoundError: ``store_dir`` has no ``commitlog`` directory.
    """
    from .snapshot import plan_read

    t0 = time.perf_counter()
    store = os.path.abspath(store_dir)
    if not os.path.isdir(os.path.join(store, "commitlog")):
        raise DirectoryNotFoundError(f"{store} has no commitlog directory: not a RocketMQ store")
    if max_files is not None and max_files < 0:
        raise ConfigError(f"max_files must be >= 0, not {max_files}")
    _writer_options(compression)
    file_size, _ = geometry(store, commitlog_file_size)
    rep = MaterializeReport(store)
    with run_lock(store):
        # a killed run's half-written copies (no run is live: we hold the lock; a reader's half-written
        # snapshots are in _tail/, which plan_read cleans)
        for p in temp_files(columnar_dir(store)):
            p.unlink(missing_ok=True)
            rep.removed.append(p.name)
        sealed, unsealed, end, damage = _plan(store, file_size)
        rep.unsealed = len(unsealed)
        names = set(os.listdir(os.path.join(store, "commitlog")))
        loaded = load_manifest(store)
        # without entries of deleted files, nor those of unsealed files an earlier rmqcore made
        entries = {k: e for k, e in loaded.items() if k in names and e.sealed}
        for p in sealed_copy_files(store):  # copies of files no longer in the log
            if file_of_copy(p) not in names:
                p.unlink(missing_ok=True)
                rep.removed.append(p.name)
        done = {e.file_from for e in current_copies(store, file_size)}
        rep.current = len(done & set(sealed))
        todo = [FileTask(store, f, file_size, end, compression, row_group_bytes)
                for f in sealed if f not in done]
        if max_files is not None:
            rep.pending = max(0, len(todo) - max_files)
            todo = todo[:max_files]
        if todo or len(entries) != len(loaded):
            save_manifest(store, entries.values())
        failed: list[CorruptionError] = [] if damage is None else [damage]
        for e in (convert_all or _one_by_one)(todo):
            if isinstance(e, CorruptionError):
                failed.append(e)
                continue
            if e is None:
                continue
            entries[e.file] = e
            save_manifest(store, entries.values())
            rep.converted.append(e)
            if progress is not None:
                progress(e)
        if failed:
            raise failed[0]
        snap = plan_read(store, file_size, snapshot_bytes=None if tail else 0, grace=snapshot_grace,
                         compression=compression, walk=tail)
        for e in snap.written:
            rep.converted.append(e)
            if progress is not None:
                progress(e)
        rep.removed.extend(snap.removed)
    rep.seconds = time.perf_counter() - t0
    return rep


def _one_by_one(tasks: list[FileTask]) -> Iterable[CopyEntry | CorruptionError | None]:
    for t in tasks:
        yield convert_file(t)
