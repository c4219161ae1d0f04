"""Finding stores and opening their CommitLog read-only, for the readers outside ``MessageStore``
(the ``rmq`` Spark source, ``materialize``)."""

from __future__ import annotations

import glob as _glob
import os
from pathlib import Path
from typing import Any

from .. import layout as L
from ..errors import DirectoryNotFoundError
from ..geometry import resolve

__all__ = ["store_dirs", "geometry", "open_commitlog", "raise_if_data_after"]


def store_dirs(path: str) -> list[str]:
    """The store directories ``path`` names: itself, or every store (a directory with a
    ``commitlog/``) a glob matches, as absolute paths.

    Raises:
        DirectoryNotFoundError: a glob that matches no store.
    """
    if any(c in path for c in "*?["):
        dirs = sorted(p for p in _glob.glob(path) if os.path.isdir(os.path.join(p, "commitlog")))
    else:
        dirs = [path]
    if not dirs:
        raise DirectoryNotFoundError(f"no RocketMQ store matches {path!r}")
    return [os.path.abspath(d) for d in dirs]


def geometry(store_dir: str, commitlog_file_size: Any = None, cq_file_size: Any = None) -> tuple[int, int]:
    """(CommitLog file size, consume-queue file size) as MessageStore opens the store with them
    (``rmqcore.geometry.resolve``; a given size that is None or 0 is not given).

    Raises:
        ConfigError: a given size differs from the one the store was created with.
    """
    sizes = (("commitlog_file_size", commitlog_file_size), ("cq_file_size", cq_file_size))
    given = {k: int(v) for k, v in sizes if v}
    values = resolve(Path(store_dir), given).values
    return (int(values.get("commitlog_file_size", L.DEFAULT_COMMITLOG_FILE_SIZE)),
            int(values.get("cq_file_size", L.DEFAULT_CQ_FILE_SIZE)))


def open_commitlog(store_dir: str, file_size: int, end: int | None = None, recover: bool = True) -> Any:
    """The store's CommitLog, read-only: recovered to the end of its valid data, or cut at ``end``
    (or, with ``recover=False``, every file mapped whole: the caller walks what it needs).

    Raises:
        CorruptionError: recovering, the valid data stops at a damaged record while a later file
            holds records: a reader reports the damage (path, position) rather than end silently in
            the middle of the log. (A torn record at the live end, or a writer's next file allocated
            ahead and still empty, is just the end.)
    """
    from ..commitlog import CommitLog

    cl = CommitLog(store_dir, file_size=file_size, read_only=True, recover=False, prepare_next=False)
    try:
        if end is None and recover:
            end, stop = cl.scan_end()
            if stop is not None:
                raise_if_data_after(cl, stop.status, stop.position)
        if end is not None:
            cl.set_end(end)
    except BaseException:
        cl.close()
        raise
    return cl


def raise_if_data_after(cl: Any, status: int, position: int) -> None:
    """Invalid bytes (scan ``status``) at global ``position`` of ``cl``: the end of the log when no
    later file holds data (a torn record at the live end, a writer's next file still empty), else
    damage in the middle of the log.

    Raises:
        CorruptionError: a later file holds data (the path and file position of the damage).
    """
    from ..commitlog import raise_status

    files = cl.queue.files
    if any(mf.file_from_offset > position and mf.mm[:8].strip(b"\0") for mf in files):
        mf = next(mf for mf in files if mf.file_from_offset <= position < mf.file_end_offset)
        raise_status(cl._codec, status, mf.path, position - mf.file_from_offset)
