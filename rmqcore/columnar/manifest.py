"""The columnar copy's manifest: which sealed CommitLog files have a current Parquet copy.

``<store>/rmqcore-columnar/`` holds one ``<commitlog file name>.parquet`` per converted file and
``_manifest.json`` (names starting with ``_`` or ``.`` are skipped by Spark, pyarrow.dataset and the
``*.parquet`` globs of DuckDB and Polars). ``materialize(tail=True)`` also copies the records of the
unsealed last file as they are now, to ``_tail/<name>.<end>.parquet``: read_store reads it, directory
readers do not (they see sealed files only, each exactly once), and the next run that copies more of
that file deletes it. Each manifest entry records the CommitLog file it was made
from: its name and size, where its CRC-checked records end (``scan_end``), their count, the position
and first header bytes of its last record, and the copy's format version. A copy is *current* when
its format version is this rmqcore's, the copy has the size recorded, the CommitLog file is there
with the size recorded and its last record still has the header recorded: a file truncated and
rewritten by recovery, or converted by an older rmqcore, is read from the CommitLog instead (and
``materialize`` converts it again).

Only ``materialize`` writes the manifest (one run at a time, ``_materialize.lock``). Retention
(``MessageStore.clean_expired``) removes the copies of the files it deletes and leaves their
entries, which no longer count (their CommitLog file is gone); the next run drops them.

Needs neither pyarrow nor pyspark: the store's retention imports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
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
    "copy_path",
    "copy_files",
    "file_of_copy",
    "load_manifest",
    "save_manifest",
    "record_head",
    "current_copies",
    "covers_log",
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
    sealed: bool = True  # False: the records the unsealed last file had (its first scan_end bytes)
    format_version: int = FORMAT_VERSION
    rmqcore_version: str = ""

    @property
    def file_from(self) -> int:
        return int(self.file)


def columnar_dir(store_dir: str | os.PathLike[str]) -> Path:
    return Path(store_dir) / COLUMNAR_DIR


def copy_path(store_dir: str | os.PathLike[str], file_name: str, tail_end: int | None = None) -> Path:
    """Where the copy of sealed CommitLog file ``file_name`` goes, or that of its first ``tail_end``
    bytes while it is the unsealed last file."""
    d = columnar_dir(store_dir)
    if tail_end is None:
        return d / f"{file_name}.parquet"
    return d / TAIL_DIR / f"{file_name}.{tail_end}.parquet"


def file_of_copy(path: Path) -> str:
    """The CommitLog file name a copy (sealed or tail) belongs to."""
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


def _is_current(store_dir: Path, e: CopyEntry, file_size: int) -> bool:
    if e.format_version != FORMAT_VERSION or e.file_size != file_size:
        return False
    src = store_dir / "commitlog" / e.file
    try:
        if os.stat(src).st_size != e.file_size:
            return False
        if os.stat(columnar_dir(store_dir) / e.copy).st_size != e.copy_bytes:
            return False
    except FileNotFoundError:
        return False
    return record_head(src, e.last_record) == e.last_head


def current_copies(store_dir: str | os.PathLike[str], file_size: int) -> list[CopyEntry]:
    """The manifest's current copies (see the module docs), in CommitLog order."""
    d = Path(store_dir)
    return [e for _, e in sorted(load_manifest(d).items()) if _is_current(d, e, file_size)]


def covers_log(store_dir: str | os.PathLike[str], copies: Iterable[CopyEntry]) -> bool:
    """Whether ``copies`` (current ones) hold every record of the store's CommitLog: each file with
    data has a sealed copy, or a tail copy after whose end nothing has been written."""
    d = Path(store_dir) / "commitlog"
    by_file = {e.file: e for e in copies}
    for name in sorted(n for n in os.listdir(d) if L.file_name_to_offset(n) is not None):
        e = by_file.get(name)
        if e is not None and e.sealed:
            continue
        head = record_head(d / name, 0 if e is None else e.scan_end)
        if head[:8].strip("0"):  # a record (or its start) where the copy ends, or a file never copied
            return False
    return True


def drop_copies(store_dir: str | os.PathLike[str], file_names: Iterable[str]) -> None:
    """Remove the copies of CommitLog files ``file_names`` (retention deleted them). Their manifest
    entries stay until the next ``materialize``: without their CommitLog file they are not current."""
    d = columnar_dir(store_dir)
    if not d.is_dir():
        return
    for name in file_names:
        if L.file_name_to_offset(name) is not None:
            for p in [d / f"{name}.parquet", *(d / TAIL_DIR).glob(f"{name}.*.parquet")]:
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


def copy_files(store_dir: str | os.PathLike[str]) -> list[Path]:
    """Every copy (sealed and tail) in the columnar directory, made now or by an earlier run."""
    d = columnar_dir(store_dir)
    return sorted([*d.glob("*.parquet"), *(d / TAIL_DIR).glob("*.parquet")])


def temp_files(store_dir: str | os.PathLike[str]) -> list[Path]:
    """Copies a killed run left half-written (their temp names)."""
    d = columnar_dir(store_dir)
    dirs = [x for x in (d, d / TAIL_DIR) if x.is_dir()]
    return sorted(p for x in dirs for p in x.iterdir() if p.name.startswith(".") and TEMP_MARK in p.name)

