"""The columnar copy's manifest: which sealed CommitLog files have a current Parquet copy.

``<store>/rmqcore-columnar/`` holds one ``<commitlog file name>.parquet`` per converted file and
``_manifest.json`` (names starting with ``_`` or ``.`` are skipped by Spark, pyarrow.dataset and the
``*.parquet`` globs of DuckDB and Polars). Each manifest entry records the CommitLog file it was made
from: its name and size, where its CRC-checked records end (``scan_end``), their count, the position
and first header bytes of its last record, and the copy's format version. A copy is *current* when
its format version is this rmqcore's, the copy has the size recorded, the CommitLog file is there
with the size recorded and its last record still has the header recorded: a file truncated and
rewritten by recovery, or converted by an older rmqcore, is read from the CommitLog instead (and
``materialize`` converts it again). What no sealed copy holds -- the live tail -- is snapshotted by
readers into ``_tail/`` (see :mod:`rmqcore.columnar.snapshot`), outside the manifest.

Only ``materialize`` writes the manifest (one run at a time, ``_materialize.lock``). Retention
(``MessageStore.clean_expired``) removes the copies and snapshots of the files it deletes and leaves
their entries, which no longer count (their CommitLog file is gone); the next run drops them.

Needs neither pyarrow nor pyspark: the store's retention imports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .. import layout as L
from ..configfiles import load_with_bak, persist
from ..errors import CorruptionError, StoreLockedError

__all__ = [
    "COLUMNAR_DIR",
    "FORMAT_VERSION",
    "CopyEntry",
    "columnar_dir",
    "tail_dir",
    "copy_path",
    "sealed_copy_files",
    "file_of_copy",
    "load_manifest",
    "save_manifest",
    "record_head",
    "current_copies",
    "is_current",
    "drop_copies",
    "run_lock",
]

COLUMNAR_DIR = "rmqcore-columnar"
MANIFEST = "_manifest.json"
RUN_LOCK = "_materialize.lock"
TAIL_DIR = "_tail"
# 1: one Parquet file per sealed CommitLog file, the rmq schema (rmqcore.columnar.arrow.ARROW_SCHEMA)
FORMAT_VERSION = 1
HEAD_BYTES = 48  # a record's fixed header up to BORNTIMESTAMP: size, magic, CRC, queue, offsets, flags
TEMP_MARK = ".parquet.tmp-"  # temp names: ".<name>.parquet.tmp-<pid>-<random>"
COPY_METADATA = "rmqcore.copy"  # Parquet footer key of a copy's manifest entry (JSON)
# snapshots (rmqcore.columnar.snapshot): the most CommitLog bytes one read converts, and how long a
# snapshot no new read plans on is kept for the queries planned on it before (Spark's own
# spark.sql.streaming.fileSink.log.cleanupDelay, for files a compaction superseded, is 10 minutes)
SNAPSHOT_BYTES = 256 << 20
GRACE_SECONDS = 600.0


@dataclass(frozen=True)
class CopyEntry:
    """One converted CommitLog file (a manifest entry)."""

    file: str  # the CommitLog file's name (its 20-digit base offset)
    file_size: int  # the CommitLog file's size
    scan_end: int  # file position where its records end (CRC-checked walk)
    records: int
    last_record: int  # file position of its last record
    last_head: str  # hex of the first HEAD_BYTES bytes of that record
    copy: str  # the Parquet file's path relative to the columnar directory
    copy_bytes: int
    sealed: bool = True  # False: a snapshot of the records in [start, scan_end) (rmqcore.columnar.snapshot)
    format_version: int = FORMAT_VERSION
    rmqcore_version: str = ""
    start: int = 0  # file position of its first record (a snapshot's; 0 for a sealed copy)

    @property
    def file_from(self) -> int:
        return int(self.file)


def columnar_dir(store_dir: str | os.PathLike[str]) -> Path:
    return Path(store_dir) / COLUMNAR_DIR


def tail_dir(store_dir: str | os.PathLike[str]) -> Path:
    """The directory of the snapshots (:mod:`rmqcore.columnar.snapshot`)."""
    return columnar_dir(store_dir) / TAIL_DIR


def copy_path(store_dir: str | os.PathLike[str], file_name: str, piece: CopyEntry | None = None) -> Path:
    """Where the copy of sealed CommitLog file ``file_name`` goes, or snapshot ``piece``:
    ``_tail/<file>.<start>-<end>.<tag>.parquet``, the tag a CRC of its last record's header, so that
    a snapshot of records recovery has since rewritten never has the name of one of the new ones."""
    if piece is None:
        return columnar_dir(store_dir) / f"{file_name}.parquet"
    tag = zlib.crc32(bytes.fromhex(piece.last_head))
    return tail_dir(store_dir) / f"{file_name}.{piece.start}-{piece.scan_end}.{tag:08x}.parquet"


def file_of_copy(path: Path) -> str:
    """The CommitLog file name a copy (sealed or snapshot) belongs to."""
    return path.name.split(".", 1)[0]


def load_manifest(store_dir: str | os.PathLike[str]) -> dict[str, CopyEntry]:
    """The manifest's entries by CommitLog file name ({} without a manifest).

    Raises:
        CorruptionError: neither the manifest nor its ``.bak`` parses, or an entry lacks a field.
    """
    path = columnar_dir(store_dir) / MANIFEST
    doc = load_with_bak(path)
    if doc is None:
        return {}
    names = {f.name for f in fields(CopyEntry)}
    try:
        entries = [CopyEntry(**{k: v for k, v in e.items() if k in names}) for e in doc["files"]]
    except (KeyError, TypeError, AttributeError) as e:
        raise CorruptionError(f"not a columnar manifest: {e!r}", path=str(path)) from None
    return {e.file: e for e in entries}


def save_manifest(store_dir: str | os.PathLike[str], entries: Iterable[CopyEntry]) -> None:
    """Write the manifest durably (temp file, fsync, rename; the previous one kept as ``.bak``)."""
    files = [asdict(e) for e in sorted(entries, key=lambda e: e.file)]
    doc = {"format_version": FORMAT_VERSION, "files": files}
    persist(columnar_dir(store_dir) / MANIFEST, json.dumps(doc, indent=1) + "\n")


def record_head(path: str | os.PathLike[str], position: int) -> str:
    """Hex of the first HEAD_BYTES bytes at ``position`` of a CommitLog file ('' past its end)."""
    try:
        with open(path, "rb", buffering=0) as f:
            return os.pread(f.fileno(), HEAD_BYTES, position).hex()
    except FileNotFoundError:
        return ""


def is_current(store_dir: str | os.PathLike[str], e: CopyEntry, file_size: int) -> bool:
    """Whether copy ``e`` still holds what its CommitLog file holds (see the module docs)."""
    if e.format_version != FORMAT_VERSION or e.file_size != file_size:
        return False
    src = Path(store_dir) / "commitlog" / e.file
    try:
        if os.stat(src).st_size != e.file_size:
            return False
        if os.stat(columnar_dir(store_dir) / e.copy).st_size != e.copy_bytes:
            return False
    except FileNotFoundError:
        return False
    return record_head(src, e.last_record) == e.last_head


def current_copies(store_dir: str | os.PathLike[str], file_size: int) -> list[CopyEntry]:
    """The manifest's current copies of sealed files (see the module docs), in CommitLog order (an
    entry of an unsealed file's records, made by an earlier rmqcore's ``materialize(tail=True)``, is not
    one: those copies are snapshots now)."""
    d = Path(store_dir)
    return [e for _, e in sorted(load_manifest(d).items()) if e.sealed and is_current(d, e, file_size)]


def drop_copies(store_dir: str | os.PathLike[str], file_names: Iterable[str]) -> None:
    """Remove the copies and snapshots of CommitLog files ``file_names`` (retention deleted them).
    Their manifest entries stay until the next ``materialize``: without their CommitLog file they are
    not current."""
    d = columnar_dir(store_dir)
    if not d.is_dir():
        return
    for name in file_names:
        if L.file_name_to_offset(name) is not None:
            for p in [d / f"{name}.parquet", *tail_dir(store_dir).glob(f"{name}.*.parquet")]:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)


@contextlib.contextmanager
def run_lock(store_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the store's materialize lock (one run at a time).

    Raises:
        StoreLockedError: another materialize run holds it.
    """
    d = columnar_dir(store_dir)
    d.mkdir(exist_ok=True)
    fd = os.open(d / RUN_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise StoreLockedError(f"another materialize run holds {d / RUN_LOCK}") from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def sealed_copy_files(store_dir: str | os.PathLike[str]) -> list[Path]:
    """Every copy of a sealed file in the columnar directory, made now or by an earlier run."""
    return sorted(columnar_dir(store_dir).glob("*.parquet"))


def temp_files(directory: Path) -> list[Path]:
    """Copies half-written by a killed writer in ``directory`` (their temp names)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.startswith(".") and TEMP_MARK in p.name)
