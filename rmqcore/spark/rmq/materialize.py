"""``rmqcore.spark.materialize``: the Parquet copies of a store's sealed CommitLog files, one Spark task
per file (see :mod:`rmqcore.columnar.materialize` for what a copy is and how a run stays crash-safe).

The store directory must be at the same path on the executors (a shared file system, or
``local``/``local-cluster`` mode): they read its CommitLog files and write the copies; the driver
plans, holds the run lock and writes the manifest.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ...columnar.manifest import GRACE_SECONDS, CopyEntry
from ...columnar.materialize import FileTask, MaterializeReport, convert_file
from ...columnar.materialize import materialize as _materialize
from ...errors import CorruptionError

__all__ = ["materialize"]


def materialize(
    spark: Any,
    store_dir: str | os.PathLike[str],
    *,
    commitlog_file_size: int | None = None,
    max_files: int | None = None,
    compression: str = "snappy",
    tail: bool = False,
    snapshot_grace: float = GRACE_SECONDS,
) -> MaterializeReport:
    """Convert the sealed CommitLog files of ``store_dir`` that have no current copy, one Spark task
    per file (with ``tail``, also snapshot on the driver what no sealed copy holds now; snapshots
    unused for ``snapshot_grace`` seconds are deleted); returns what was done.

    Raises:
        StoreLockedError: another materialize run is going on.
        CorruptionError: a record of a sealed file is corrupt (the other files' copies are made
            and kept).
        ConfigError: an unknown compression or a negative ``max_files``.
    """

    def on_spark(tasks: list[FileTask]) -> Iterable[CopyEntry | CorruptionError | None]:
        if not tasks:
            return []
        sc = spark.sparkContext
        sc.setJobDescription(f"rmqcore materialize {os.fspath(store_dir)} ({len(tasks)} files)")
        return sc.parallelize(tasks, len(tasks)).map(_convert).collect()  # type: ignore[no-any-return]

    return _materialize(store_dir, commitlog_file_size=commitlog_file_size, max_files=max_files,
                        compression=compression, tail=tail, snapshot_grace=snapshot_grace,
                        convert_all=on_spark)


def _convert(task: FileTask) -> CopyEntry | CorruptionError | None:
    """A task: a corrupt file is returned, not raised, so that the job keeps the other files' copies."""
    try:
        return convert_file(task)
    except CorruptionError as e:
        return e
