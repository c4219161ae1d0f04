"""The ``rmq`` data source, and :func:`read_store`."""

from __future__ import annotations

from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.datasource import DataSource

from ...columnar.arrow import ARROW_SCHEMA, SCHEMA, SPARK_TYPES, project
from .options import lower_options
from .reader import RmqReader
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
        o = lower_options(self.options)
        if "path" not in o:
            raise ValueError("the rmq source needs a path (load(path) or option('path', ...))")
        return o

    def reader(self, schema: Any) -> RmqReader:
        return RmqReader(self._options(), arrow_schema_of(schema))

    def writer(self, schema: Any, overwrite: bool) -> RmqWriter:
        return RmqWriter(self._options(), overwrite)

    def streamReader(self, schema: Any) -> RmqStreamReader:
        return RmqStreamReader(self._options())


def read_store(spark: Any, path: str, schema: Any = None, **options: Any) -> Any:
    """A fresh ``spark.read.format("rmq")`` DataFrame of the messages of the store(s) at ``path`` (a
    directory or a glob); ``schema`` (a DDL string or StructType) projects it to a subset of the
    columns.

    Every call plans anew: Spark 4.3 keeps a Python source's read plan per DataFrame, so a
    DataFrame is a snapshot of the store taken when it is first used (later appends are invisible
    to it), and after a filtered action on a DataFrame an unfiltered action on the *same*
    DataFrame may reuse the pruned reader and return too few rows. Build one per logical read.
    """
    r = spark.read.format("rmq")
    if schema is not None:
        r = r.schema(schema)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(path)
