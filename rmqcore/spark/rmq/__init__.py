"""``spark.read`` / ``spark.readStream`` / ``df.write`` ``.format("rmq")``: RocketMQ stores in Spark.

* :mod:`.reader`: batch reads (partitions, filter pushdown, projection, the ``key`` option);
* :mod:`.stream`: streaming reads with CommitLog offsets;
* :mod:`.writer`: appends;
* :mod:`.source`: the data source itself and :func:`read_store`, which reads a store's Parquet copies
  (:mod:`.materialize`) with Spark's Parquet reader and the rest with the ``rmq`` source.

The conversion of records to Arrow (and the schema) is :mod:`rmqcore.columnar.arrow`, shared with
``rmqcore materialize``, which needs pyarrow but not pyspark.
"""

from __future__ import annotations

from ...columnar.arrow import ARROW_SCHEMA, SCHEMA
from .materialize import materialize
from .source import RmqDataSource, read_store

__all__ = ["RmqDataSource", "read_store", "materialize", "SCHEMA", "ARROW_SCHEMA"]
