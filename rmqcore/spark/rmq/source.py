"""The ``rmq`` data source, and :func:`read_store`: a store as one DataFrame, read by Spark's own
Parquet reader from its columnar copy and snapshots of its tail, or by the ``rmq`` source."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.datasource import DataSource

from ...columnar.arrow import ARROW_SCHEMA, SCHEMA, SPARK_TYPES, project
from ...columnar.manifest import GRACE_SECONDS, SNAPSHOT_BYTES, columnar_dir
from ...columnar.snapshot import plan_read
from ...columnar.stores import store_dirs
from .options import lower_options, path_options, store_geometry
from .reader import COVERED, RmqReader
from .stream import RmqStreamReader
from .writer import RmqWriter

__all__ = ["RmqDataSource", "read_store", "arrow_schema_of"]


def arrow_schema_of(schema: Any) -> pa.Schema:
    """The Arrow schema the reader yields for Spark ``schema`` (a StructType): the whole ``rmq``
    schema, or a projection of it (see :func:`rmqcore.columnar.arrow.project`)."""
    if schema is None:
        return ARROW_SCHEMA
    cols = [(f.name, f.dataType.simpleString()) for f in schema.fields]
    return ARROW_SCHEMA if cols == list(SPARK_TYPES.items()) else project(cols)


class RmqDataSource(DataSource):
    """``format("rmq")``: batch reads, streaming reads and appends of RocketMQ stores."""

    @classmethod
    def name(cls) -> str:
        return "rmq"

    def schema(self) -> str:
        return SCHEMA

    def _options(self) -> dict[str, str]:
        return path_options(self.options, "rmq")

    def reader(self, schema: Any) -> RmqReader:
        return RmqReader(self._options(), arrow_schema_of(schema))

    def writer(self, schema: Any, overwrite: bool) -> RmqWriter:
        return RmqWriter(self._options(), overwrite)

    def streamReader(self, schema: Any) -> RmqStreamReader:
        return RmqStreamReader(self._options())


def read_store(
    spark: Any,
    path: str,
    schema: Any = None,
    columnar: bool = True,
    *,
    snapshot_bytes: int | None = SNAPSHOT_BYTES,
    snapshot_grace: float = GRACE_SECONDS,
    **options: Any,
) -> Any:
    """A fresh DataFrame of the messages of the store(s) at ``path`` (a directory or a glob).

    A store with a columnar copy (``rmqcore.spark.materialize`` / ``rmqcore materialize``) is read
    by Spark's Parquet reader alone (column pruning, filter pushdown, row-group statistics): its
    sealed files from their copies, and what no copy holds -- the live tail, files not converted
    yet -- from snapshots (:mod:`rmqcore.columnar.snapshot`), written here, on the driver, for the
    records no earlier snapshot holds (at most ``snapshot_bytes`` of CommitLog per call, 256 MiB by
    default; None: no bound) and deleted ``snapshot_grace`` seconds after newer ones replace them.
    Records past that bound, stores never materialized, and stores this process may not write are
    read by the ``rmq`` source, with ``options``; ``snapshot_bytes=0`` writes nothing.
    The rows are the same either way (row order is not: sort by ``physical_offset`` when it
    matters): those the store held when ``read_store`` was called. ``schema`` (a DDL string or
    StructType) projects both sides to a subset of the columns; ``columnar=False`` reads everything
    through the ``rmq`` source, and so does a ``key`` option (an index lookup).

    Every call plans anew: Spark 4.3 keeps a Python source's read plan per DataFrame, so a
    DataFrame read through the ``rmq`` source alone is a snapshot of the store taken when it is
    first used (later appends are invisible to it), and after a filtered action on such a DataFrame
    an unfiltered action on the *same* DataFrame may reuse the pruned reader and return too few
    rows. Build one per logical read.

    Raises:
        CorruptionError: a record no copy holds is corrupt (path and offset), other than at the end.
    """
    o = lower_options(options)

    def rmq(extra: dict[str, str]) -> Any:
        r = spark.read.format("rmq")
        if schema is not None:
            r = r.schema(schema)
        for k, v in {**options, **extra}.items():
            r = r.option(k, str(v))
        return r.load(path)

    if not columnar or "key" in o:
        return rmq({})
    stores = store_dirs(path)
    plans = []
    for store in stores:
        if columnar_dir(store).is_dir():  # materialized: snapshots are welcome there
            file_size, _ = store_geometry(store, o)
            plans.append(plan_read(store, file_size, snapshot_bytes=snapshot_bytes, grace=snapshot_grace,
                                   prune=snapshot_bytes != 0))
    if not any(p.copies for p in plans):
        return rmq({})
    given = None if schema is None else schema if not isinstance(schema, str) else _struct(spark, schema)
    out = arrow_schema_of(given)  # validates a projection here, on the driver
    parts = [_parquet(spark, p.store_dir, p.copies, out) for p in plans if p.copies]
    if len(plans) < len(stores) or any(p.rest for p in plans):  # (no Python source when Parquet holds all)
        cover = {p.store_dir: {"end": p.end, "files": p.covered} for p in plans}
        parts.append(rmq({COVERED: json.dumps(cover)}))
    df = parts[0]
    for part in parts[1:]:
        df = df.unionByName(part)
    return df


def _struct(spark: Any, ddl: str) -> Any:
    """The StructType of a DDL string."""
    return spark.createDataFrame([], ddl).schema


def _parquet(spark: Any, store: str, copies: list[str], schema: pa.Schema) -> Any:
    """Spark's Parquet scan of ``copies`` in ``schema``'s columns; ``store`` is the directory as the
    store is read now (a copy holds the path it was made from)."""
    from pyspark.sql import functions as F

    stored = [f.name for f in schema if f.name.lower() != "store"] or ["physical_offset"]
    ddl = ", ".join(f"`{n}` {SPARK_TYPES[n.lower()]}" for n in stored)
    d = columnar_dir(store)
    pq = spark.read.schema(ddl).parquet(*[str(d / c) for c in copies])
    return pq.select(*[F.lit(store).alias(f.name) if f.name.lower() == "store" else F.col(f"`{f.name}`")
                       for f in schema])
